//! The signal mask, read and set by system call (no libc wrapper that a
//! program could interpose), and the empty signal set: used by the
//! signal layer and by the stack switch.

use std::ffi::c_int;

pub fn empty_sigset() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is the empty set.
    unsafe { std::mem::zeroed() }
}

/// The `rt_sigprocmask` system call on the calling thread (the kernel's
/// 8-byte mask; async-signal-safe).
pub fn raw_sigmask(
    how: c_int,
    set: Option<&libc::sigset_t>,
    old: Option<&mut libc::sigset_t>,
) -> c_int {
    let set = set.map_or(std::ptr::null(), |s| s as *const libc::sigset_t);
    let old = old.map_or(std::ptr::null_mut(), |s| s as *mut libc::sigset_t);
    // SAFETY: the pointers are null or valid sigset_t (at least 8 bytes).
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set, old, 8usize) as c_int }
}
