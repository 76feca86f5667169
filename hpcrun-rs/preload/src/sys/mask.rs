//! The signal mask, read and set by system call (no libc wrapper that a
//! program could interpose), and the empty signal set: used by the
//! signal layer and by the stack switch. Also the mask a thread attribute
//! carries (`pthread_attr_getsigmask_np`), for a new thread's start.

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

/// The calling thread's signal mask as the kernel holds it.
pub fn kernel_mask() -> libc::sigset_t {
    let mut now = empty_sigset();
    raw_sigmask(libc::SIG_BLOCK, None, Some(&mut now));
    now
}

/// glibc's `pthread_attr_getsigmask_np` (2.32+), looked up once: 0 not
/// yet, 1 absent (an older glibc), else its address.
static ATTR_GETSIGMASK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

type AttrGetSigmask =
    unsafe extern "C" fn(*const libc::pthread_attr_t, *mut libc::sigset_t) -> c_int;

/// The signal mask a thread attribute carries for the thread it creates
/// (`pthread_attr_setsigmask_np`): `None` when there is no attribute, it
/// carries none, or this glibc has no such call (looked up with `dlsym`,
/// so that the library still loads with an older one).
pub fn attr_sigmask(attr: Option<&libc::pthread_attr_t>) -> Option<libc::sigset_t> {
    use std::sync::atomic::Ordering::Relaxed;
    let attr = attr?;
    let mut f = ATTR_GETSIGMASK.load(Relaxed);
    if f == 0 {
        f = super::dl::next_symbol(c"pthread_attr_getsigmask_np") as usize;
        f = if f == 0 { 1 } else { f };
        ATTR_GETSIGMASK.store(f, Relaxed);
    }
    if f == 1 {
        return None;
    }
    // SAFETY: the symbol found under this name has glibc's signature.
    let get = unsafe { std::mem::transmute::<usize, AttrGetSigmask>(f) };
    let mut mask = empty_sigset();
    // SAFETY: `attr` is an initialised attribute (the caller's
    // pthread_create contract), `mask` a valid sigset_t; 0: it carries a
    // mask, PTHREAD_ATTR_NO_SIGMASK_NP (-1): none.
    (unsafe { get(attr, &mut mask) } == 0).then_some(mask)
}
