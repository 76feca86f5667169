//! `prctl` and `syscall`: the two ways a program installs a seccomp
//! filter (`prctl(PR_SET_SECCOMP, ...)`, `syscall(SYS_seccomp, ...)`;
//! glibc has no `seccomp` function). Both are forwarded as the raw system
//! call glibc would make (`sys::seccomp::raw_syscall6`); before a filter
//! goes in, [`crate::threads::sandbox`] learns of it, and if the filter may kill
//! the process at a call it refuses, every profile is written now and the
//! library goes passive (`READY` cleared: the hooks only forward), so
//! that no call of the profiler's can end the program.

use std::ffi::{c_int, c_long, c_ulong};
use std::sync::atomic::Ordering;

use super::{without_hooks, READY};
use crate::sys;
use crate::threads::config;
use crate::threads::sandbox;

/// `seccomp(2)` operations and `prctl(PR_SET_SECCOMP)` modes.
const SECCOMP_SET_MODE_STRICT: c_ulong = 0;
const SECCOMP_SET_MODE_FILTER: c_ulong = 1;
const SECCOMP_MODE_STRICT: c_ulong = 1;
const SECCOMP_MODE_FILTER: c_ulong = 2;

/// Before the program's filter (`filter`: the `sock_fprog`, `None` for
/// strict mode) is installed.
fn before_filter(filter: Option<*const libc::sock_fprog>) {
    if !READY.load(Ordering::Acquire) || config::get().out_dir.is_none() {
        return;
    }
    let kills = match filter {
        None => true,
        // SAFETY: the program's own filter argument, which the kernel
        // reads right after (null or a valid `sock_fprog`).
        Some(prog) => unsafe { sys::seccomp::filter_refuses_by_killing(prog) },
    };
    if sandbox::installing(kills) {
        without_hooks(crate::output::exit::flush_all);
        READY.store(false, Ordering::Release);
    }
}

/// # Safety
/// glibc's `syscall` contract: the arguments system call `number`
/// expects (the sixth is read from the caller's stack, as glibc's
/// variadic `syscall` reads it).
#[no_mangle]
pub unsafe extern "C" fn syscall(
    number: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    if number == libc::SYS_seccomp {
        match a1 as c_ulong {
            SECCOMP_SET_MODE_STRICT => before_filter(None),
            SECCOMP_SET_MODE_FILTER => before_filter(Some(a3 as *const libc::sock_fprog)),
            _ => {}
        }
    }
    // SAFETY: forwarding the caller's system call and arguments.
    unsafe { sys::seccomp::raw_syscall6(number, [a1, a2, a3, a4, a5, a6]) }
}

/// # Safety
/// glibc's `prctl` contract (its variadic arguments are passed in
/// registers on x86-64, as these four are read).
#[no_mangle]
pub unsafe extern "C" fn prctl(
    option: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) -> c_int {
    if option == libc::PR_SET_SECCOMP {
        match a2 {
            SECCOMP_MODE_STRICT => before_filter(None),
            SECCOMP_MODE_FILTER => before_filter(Some(a3 as *const libc::sock_fprog)),
            _ => {}
        }
    }
    let args = [
        option as c_long,
        a2 as c_long,
        a3 as c_long,
        a4 as c_long,
        a5 as c_long,
        0,
    ];
    // SAFETY: forwarding the caller's call and arguments.
    unsafe { sys::seccomp::raw_syscall6(libc::SYS_prctl, args) as c_int }
}
