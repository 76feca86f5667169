//! The interposed signal calls: `sigaction`, `signal`, `sigprocmask`,
//! `pthread_sigmask`, `sigwait`, `sigwaitinfo`, `sigtimedwait`,
//! `sigaltstack`.
//!
//! For any signal other than the profiler's (and in a process the library
//! does not measure) they are glibc's own calls, unchanged. What they do
//! with the profiler's signals is explained in [`crate::threads::signals`];
//! what `sigaction`, `signal` and the waits do with the signals the
//! launcher forwards (a signal sent to both reaches the program once), in
//! [`crate::process::forwarded`]. errno follows the real calls' rules.

#![allow(unsafe_code)]

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::process::forwarded;
use crate::sys;
use crate::threads::signals;

/// # Safety
/// POSIX's sigaction contract.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    signal: c_int,
    new: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the pointers are null or valid, per the caller's contract.
    let (new_ref, old_ref) = unsafe { (new.as_ref(), old.as_mut()) };
    if signals::program_sigaction(signal, new_ref, old_ref).is_some() {
        return 0;
    }
    // SAFETY: as above (the previous references are not used any more).
    let (new_ref, old_ref) = unsafe { (new.as_ref(), old.as_mut()) };
    let rc = match forwarded::program_sigaction(signal, new_ref, old_ref) {
        Some(rc) => rc,
        None => {
            // (A handler on the alternate stack: the profiler's signals
            // wait while it runs, `signals::onstack_action`; the program
            // is told its own mask.)
            let before = signals::added_to_mask(signal);
            // SAFETY: `new` is null or valid, per the caller's contract.
            let new_ref = unsafe { new.as_ref() };
            let (adjusted, added) = new_ref.map_or((None, before), signals::onstack_action);
            let new = adjusted
                .as_ref()
                .map_or(new, |a| a as *const libc::sigaction);
            let mut previous = sys::make_sigaction(libc::SIG_DFL, 0, &[0; 16]);
            // SAFETY: forwarding the caller's arguments (or the adjusted
            // copy of `new`); `previous` is owned.
            let rc = unsafe { sys::real_sigaction(signal, new, &mut previous) };
            if rc == 0 {
                signals::set_added_to_mask(signal, added);
                // SAFETY: as above.
                if let Some(old) = unsafe { old.as_mut() } {
                    signals::reported_action(before, &mut previous);
                    *old = previous;
                }
            }
            rc
        }
    };
    if rc == 0 {
        // SAFETY: as above.
        if let Some(old) = unsafe { old.as_mut() } {
            // The one-shot handler that writes the profiles at a fatal
            // signal is the library's: the program sees the default.
            if sys::handler_behind(signal, old.sa_sigaction)
                == crate::sample::handler::on_fatal as *const () as usize
            {
                *old = sys::make_sigaction(libc::SIG_DFL, 0, &[0; 16]);
            }
        }
    }
    rc
}

type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
static REAL_SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// # Safety
/// C's signal contract.
#[no_mangle]
pub unsafe extern "C" fn signal(signal: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if let Some(old) = signals::program_signal(signal, handler) {
        return old;
    }
    if forwarded::SIGNALS.contains(&signal) && forwarded::enabled() {
        // glibc's signal(): BSD semantics, through the interposed
        // sigaction (a handler is wrapped there).
        let mut set = sys::empty_sigset();
        sys::sigset_add(&mut set, signal);
        let mut act = sys::make_sigaction(handler, libc::SA_RESTART, &sys::sigset_words(&set));
        act.sa_mask = set;
        let mut old = sys::make_sigaction(libc::SIG_DFL, 0, &[0; 16]);
        // SAFETY: valid pointers to owned values.
        if unsafe { sigaction(signal, &act, &mut old) } != 0 {
            return libc::SIG_ERR;
        }
        return old.sa_sigaction;
    }
    let real = sys::next_symbol_cached(&REAL_SIGNAL, c"signal");
    if real == 0 {
        sys::set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    // SAFETY: RTLD_NEXT's signal has this signature.
    let real: SignalFn = unsafe { std::mem::transmute::<usize, SignalFn>(real) };
    // SAFETY: forwarding the caller's arguments.
    unsafe { real(signal, handler) }
}

type MaskFn = unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;
static REAL_SIGPROCMASK: AtomicUsize = AtomicUsize::new(0);
static REAL_PTHREAD_SIGMASK: AtomicUsize = AtomicUsize::new(0);

/// The common part of `sigprocmask` and `pthread_sigmask`: the profiler's
/// signals are taken out of the request (remembered as blocked by the
/// program) and put back into the old mask as the program set them.
///
/// # Safety
/// `set` and `old` are null or valid.
unsafe fn mask_call(
    real: usize,
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    if real == 0 {
        return libc::EINVAL;
    }
    // SAFETY: RTLD_NEXT's sigprocmask/pthread_sigmask have this signature.
    let real: MaskFn = unsafe { std::mem::transmute::<usize, MaskFn>(real) };
    // SAFETY: `set` is null or valid.
    let mut copy = unsafe { set.as_ref() }.copied();
    let valid_how = matches!(how, libc::SIG_BLOCK | libc::SIG_UNBLOCK | libc::SIG_SETMASK);
    let before = if valid_how {
        signals::filter_mask(how, copy.as_mut())
    } else {
        signals::blocked_bits()
    };
    let set = copy
        .as_ref()
        .map_or(std::ptr::null(), |s| s as *const libc::sigset_t);
    // SAFETY: forwarding with our copy of the set.
    let rc = unsafe { real(how, set, old) };
    if rc != 0 {
        signals::restore_blocked(before);
    // SAFETY: `old` is null or the caller's valid sigset_t (the contract of
    // sigprocmask/pthread_sigmask).
    } else if let Some(old) = unsafe { old.as_mut() } {
        signals::report_old_mask(before, old);
    }
    rc
}

/// # Safety
/// POSIX's sigprocmask contract.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    let real = sys::next_symbol_cached(&REAL_SIGPROCMASK, c"sigprocmask");
    if real == 0 {
        sys::set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: per the caller's contract.
    unsafe { mask_call(real, how, set, old) }
}

/// # Safety
/// POSIX's pthread_sigmask contract (returns the error number).
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    let real = sys::next_symbol_cached(&REAL_PTHREAD_SIGMASK, c"pthread_sigmask");
    // SAFETY: per the caller's contract.
    unsafe { mask_call(real, how, set, old) }
}

type TimedWaitFn = unsafe extern "C" fn(
    *const libc::sigset_t,
    *mut libc::siginfo_t,
    *const libc::timespec,
) -> c_int;
static REAL_SIGTIMEDWAIT: AtomicUsize = AtomicUsize::new(0);

/// `sigtimedwait` that never returns one of the profiler's perf signals
/// (they are dropped, counted, and the wait goes on).
///
/// # Safety
/// As for `sigtimedwait`.
unsafe fn wait(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
    timeout: *const libc::timespec,
) -> c_int {
    let real = sys::next_symbol_cached(&REAL_SIGTIMEDWAIT, c"sigtimedwait");
    if real == 0 {
        sys::set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: RTLD_NEXT's sigtimedwait has this signature.
    let real: TimedWaitFn = unsafe { std::mem::transmute::<usize, TimedWaitFn>(real) };
    // SAFETY: `set` is valid per the contract.
    let set_ref = unsafe { set.as_ref() };
    let ours = set_ref.is_some_and(signals::holds_ours);
    let paired = set_ref.is_some_and(forwarded::watches);
    if !ours && !paired {
        // SAFETY: forwarding the caller's arguments.
        return unsafe { real(set, info, timeout) };
    }
    // SAFETY: `timeout` is null or valid per the contract.
    let deadline = unsafe { timeout.as_ref() }.map(|t| {
        sys::monotonic_ns()
            .saturating_add((t.tv_sec.max(0) as u64).saturating_mul(1_000_000_000))
            .saturating_add(t.tv_nsec.max(0) as u64)
    });
    let mut left = timeout;
    let mut remaining: libc::timespec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        // SAFETY: an all-zero siginfo_t is valid storage.
        let mut mine: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: forwarding, with our own info buffer.
        let rc = unsafe { real(set, &mut mine, left) };
        if rc > 0 && signals::from_profiler(&sys::Delivered::waited(&mut mine)) {
            signals::WAIT_DROPPED.fetch_add(1, Relaxed);
            continue;
        }
        if rc > 0 && forwarded::waited(rc, &mut mine) {
            // A pair's second: the wait goes on, until the caller's
            // deadline.
            if let Some(deadline) = deadline {
                let ns = deadline.saturating_sub(sys::monotonic_ns());
                remaining.tv_sec = (ns / 1_000_000_000) as libc::time_t;
                remaining.tv_nsec = (ns % 1_000_000_000) as libc::c_long;
                left = &remaining;
            }
            continue;
        }
        if rc > 0 {
            if ours {
                signals::after_wait();
            }
            // SAFETY: `info` is null or valid per the contract.
            if let Some(info) = unsafe { info.as_mut() } {
                *info = mine;
            }
        }
        return rc;
    }
}

/// # Safety
/// POSIX's sigtimedwait contract.
#[no_mangle]
pub unsafe extern "C" fn sigtimedwait(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
    timeout: *const libc::timespec,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { wait(set, info, timeout) }
}

/// # Safety
/// POSIX's sigwaitinfo contract.
#[no_mangle]
pub unsafe extern "C" fn sigwaitinfo(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
) -> c_int {
    // SAFETY: sigwaitinfo is sigtimedwait without a timeout.
    unsafe { wait(set, info, std::ptr::null()) }
}

/// # Safety
/// POSIX's sigwait contract (returns the error number).
#[no_mangle]
pub unsafe extern "C" fn sigwait(set: *const libc::sigset_t, signal: *mut c_int) -> c_int {
    let saved = sys::errno();
    // EINTR is retried, as glibc's sigwait does.
    let rc = loop {
        // SAFETY: `set` per the caller's contract; no info, no timeout.
        let rc = unsafe { wait(set, std::ptr::null_mut(), std::ptr::null()) };
        if rc >= 0 || sys::errno() != libc::EINTR {
            break rc;
        }
    };
    if rc < 0 {
        let e = sys::errno();
        sys::set_errno(saved);
        return e;
    }
    // SAFETY: `signal` is valid per the contract.
    unsafe { *signal = rc };
    sys::set_errno(saved);
    0
}

/// # Safety
/// POSIX's sigaltstack contract.
#[no_mangle]
pub unsafe extern "C" fn sigaltstack(new: *const libc::stack_t, old: *mut libc::stack_t) -> c_int {
    // SAFETY: the pointers are null or valid, per the caller's contract;
    // the program sees its own alternate stack only (`sys::stack`).
    unsafe { sys::program_sigaltstack(new, old) }
}
