//! The program's descriptor calls that could touch the profiler's
//! descriptors (its perf events and its message descriptor,
//! `sys::messages`, kept at `sys::fd_floor` and above):
//! `close`, `close_range` and `closefrom` leave them open, as if they were
//! not there; `dup2` and `dup3` onto one of their numbers give the
//! program what it asked for after the profiler moved its event to
//! another number (`sampling::make_way`), so sampling goes on. When a
//! daemon lets go of descriptor 2 (`close`, `dup2`, `dup3`, and
//! `setsid`, in either order), a message descriptor that is a pipe or
//! socket goes too (`sys::let_go_of_stderr`). `chroot` first pins the
//! measurements directory by a descriptor (`sys::outdir`), which the calls
//! above leave open too. The raw
//! system calls bypass these: what they close is found when sampling
//! stops, counted and told (`notices`).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;

use crate::sys;
use crate::threads::config;
use crate::threads::guard::READY;

type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
static REAL_CLOSE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `close`: the profiler's own perf event descriptors are not the
/// program's (they are above its range, `sys::fd_floor`): closing one
/// fails with `EBADF`, as it would natively, and the profiler's event
/// stays open. Every other descriptor is glibc's `close` (a cancellation
/// point, as before).
///
/// # Safety
/// POSIX's close contract.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if sys::holds_event(fd) || sys::is_message_fd(fd) || sys::outdir::is_dir_fd(fd) {
        sys::set_errno(libc::EBADF);
        return -1;
    }
    let real = sys::next_symbol_cached(&REAL_CLOSE, c"close");
    if real == 0 {
        sys::set_errno(libc::ENOSYS);
        return -1;
    }
    // SAFETY: RTLD_NEXT's close has this signature.
    let real: CloseFn = unsafe { std::mem::transmute::<usize, CloseFn>(real) };
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { real(fd) };
    if fd == 2 && rc == 0 {
        let saved = sys::errno();
        sys::let_go_of_stderr();
        sys::set_errno(saved);
    }
    rc
}

/// `close_range` (glibc 2.34): closes the program's descriptors in the
/// range and leaves the profiler's open (`sys::close_range_sparing_ours`).
/// A raw `close_range` system call still closes them: found when
/// sampling stops, told and counted (`sys::owns_event`).
///
/// # Safety
/// Linux's close_range contract (no memory is passed).
#[no_mangle]
pub unsafe extern "C" fn close_range(
    first: libc::c_uint,
    last: libc::c_uint,
    flags: c_int,
) -> c_int {
    sys::close_range_sparing_ours(first, last, flags as u32)
}

/// `closefrom` (glibc 2.34): `close_range(low, ~0, 0)` sparing the
/// profiler's descriptors.
///
/// # Safety
/// glibc's closefrom contract (no memory is passed).
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    let saved = sys::errno();
    sys::close_range_sparing_ours(low.max(0) as u32, u32::MAX, 0);
    sys::set_errno(saved);
}

/// `dup2`: if `new` is one of the profiler's live events, the event
/// first moves to another number (`sampling::make_way`); then the system
/// call, as glibc's (errno and result are the kernel's).
///
/// # Safety
/// POSIX's dup2 contract (no memory is passed).
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    // (A failing call must not move anything: an invalid `old` leaves
    // `new` open.)
    if old != new && sys::fd_is_open(old) {
        if sys::is_event_number(new) {
            crate::threads::sampling::make_way(new);
        }
        sys::move_message_fd(new);
        sys::outdir::move_dir_fd(new);
    }
    let rc = sys::raw_dup2(old, new);
    if new == 2 && rc == 2 {
        sys::let_go_of_stderr();
    }
    rc
}

/// `dup3`: as [`dup2`], with `flags` (`O_CLOEXEC`).
///
/// # Safety
/// Linux's dup3 contract (no memory is passed).
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let valid = old != new && flags & !libc::O_CLOEXEC == 0;
    if valid && sys::fd_is_open(old) {
        if sys::is_event_number(new) {
            crate::threads::sampling::make_way(new);
        }
        sys::move_message_fd(new);
        sys::outdir::move_dir_fd(new);
    }
    let rc = sys::raw_dup3(old, new, flags);
    if new == 2 && rc == 2 {
        sys::let_go_of_stderr();
    }
    rc
}

type SetsidFn = unsafe extern "C" fn() -> libc::pid_t;
static REAL_SETSID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `setsid`: glibc's; then, in a process that already let go of its
/// descriptor 2 (a daemon), the profiler's piped message descriptor goes
/// too (`sys::let_go_of_stderr`).
///
/// # Safety
/// POSIX's setsid contract (no arguments).
#[no_mangle]
pub unsafe extern "C" fn setsid() -> libc::pid_t {
    let real = sys::next_symbol_cached(&REAL_SETSID, c"setsid");
    if real == 0 {
        sys::set_errno(libc::ENOSYS);
        return -1;
    }
    // SAFETY: RTLD_NEXT's setsid has this signature.
    let real: SetsidFn = unsafe { std::mem::transmute::<usize, SetsidFn>(real) };
    // SAFETY: no arguments.
    let sid = unsafe { real() };
    if sid >= 0 {
        sys::let_go_of_stderr();
    }
    sid
}

type ChrootFn = unsafe extern "C" fn(*const c_char) -> c_int;
static REAL_CHROOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `chroot`: the measurements directory is first pinned by a descriptor
/// (`sys::outdir`), so that the profiles, the manifest and the messages
/// still reach it from inside the new root; then glibc's `chroot`.
///
/// # Safety
/// POSIX's chroot contract (`path` a NUL-terminated string).
#[no_mangle]
pub unsafe extern "C" fn chroot(path: *const c_char) -> c_int {
    if READY.load(Ordering::Acquire) {
        if let Some(dir) = config::get().out_dir.as_deref() {
            let saved = sys::errno();
            if !sys::outdir::pin(dir) {
                crate::threads::run::warn_once(&format!(
                    "could not keep the measurements directory {dir} open before the program's chroot: profiles written after it may be lost"
                ));
            }
            sys::set_errno(saved);
        }
    }
    let real = sys::next_symbol_cached(&REAL_CHROOT, c"chroot");
    if real == 0 {
        sys::set_errno(libc::ENOSYS);
        return -1;
    }
    // SAFETY: RTLD_NEXT's chroot has this signature.
    let real: ChrootFn = unsafe { std::mem::transmute::<usize, ChrootFn>(real) };
    // SAFETY: forwarding the caller's argument.
    unsafe { real(path) }
}
