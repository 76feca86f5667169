//! The program's signals and the fatal ones: a signal of a profiler
//! signal number that the profiler's events did not send runs the
//! program's own action (`signals::forward`); SIGIO is borrowed for the
//! kernel's "queue full" fallback; a fatal signal writes every profile,
//! on the thread's handler stack, before its default action.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::*;

use crate::sys;
use crate::threads;

use super::registers;

/// SIGIO, borrowed from the program (`signals::take_over_sigio`): when
/// the kernel cannot queue a perf event's real-time signal (the per-user
/// limit of pending signals, `ulimit -i`, reached by the user's other
/// processes, or by a tiny limit), it sends SIGIO instead (`SI_KERNEL`,
/// to the event's thread). That must not kill the program: the sample is
/// counted as dropped. Every other SIGIO (`kill`, `raise`, `sigqueue`)
/// is the program's: its own action runs,
/// the default one ends the process as natively (after the profiles are
/// written); a program with a SIGIO handler of its own gets the lost
/// sample's SIGIO too (a spurious SIGIO, which its handler tolerates as
/// any `O_ASYNC` user must).
pub extern "C" fn on_sigio(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    sigio(signal, info, context);
}

/// See [`on_sigio`].
fn sigio(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel's handler arguments, valid while the handler runs
    // (and `delivered` does not outlive it).
    let delivered = unsafe { sys::Delivered::new(info, context) };
    // The kernel's own SIGIO (`SI_KERNEL`; `kill`, `raise` and `sigqueue`
    // give other codes) while the program leaves SIGIO at its default: a
    // lost sample (natively, an `O_ASYNC` descriptor of the program's
    // without a handler would end it; no program does that).
    let from_kernel = matches!(delivered.code_fd(), Some((code, _)) if code == libc::SI_KERNEL);
    if !from_kernel || !crate::threads::signals::sigio_left_default() {
        INTERRUPTED_SP.with(|c| c.set(interrupted_sp(context)));
        crate::threads::signals::forward(signal, &delivered, flush_on_own_stack);
    }
    if !from_kernel {
        return;
    }
    let saved_errno = sys::errno();
    if let Some(state) = threads::current() {
        state.stats.dropped[threads::DROP_QUEUE_FULL].fetch_add(1, Relaxed);
        // The lost signal may have been the one of an overflow that
        // stopped the task-clock event (limited to one overflow): arm it
        // for one more, as the queue being full says the machine is
        // overloaded (`keep_clock_running`).
        let fd = state.perf_fd.load(Relaxed);
        if fd >= 0 && sys::limit_to_one_overflow(fd) {
            state.clock_limited.store(true, Relaxed);
        }
    }
    sys::set_errno(saved_errno);
}

/// True (and handled: the program's action ran) if this signal of a
/// profiler signal number did not come from the profiler's perf events.
pub(super) fn program_signal(
    signal: c_int,
    info: *mut libc::siginfo_t,
    context: *mut c_void,
) -> bool {
    // SAFETY: the kernel's handler arguments, valid while the handler runs
    // (and `delivered` does not outlive it).
    let delivered = unsafe { sys::Delivered::new(info, context) };
    if crate::threads::signals::from_profiler(&delivered) {
        return false;
    }
    INTERRUPTED_SP.with(|c| c.set(interrupted_sp(context)));
    crate::threads::signals::forward(signal, &delivered, flush_on_own_stack);
    true
}

/// Handler of fatal signals (SIGSEGV, SIGABRT, SIGTERM, ...): writes what
/// has been measured, then lets the signal take its default action (the
/// handler was installed with SA_RESETHAND), so the exit status is the one
/// the program would have had. The library's allocator switches to private
/// mappings first: the interrupted code may hold glibc's heap locks.
pub extern "C" fn on_fatal(signal: c_int, _info: *mut libc::siginfo_t, context: *mut c_void) {
    fatal(signal, context);
}

/// See [`on_fatal`]. The profiles are written on the thread's handler
/// stack: the kernel may have put this frame on a small alternate stack
/// of the program's (a Rust program's stack-overflow handler calls
/// `abort` on its 8 KiB one), and writing needs far more.
fn fatal(signal: c_int, context: *mut c_void) {
    let saved_errno = sys::errno();
    if crate::threads::sandbox::quiet() {
        // Everything was written when the filter went in.
        sys::reraise(signal);
        return;
    }
    sys::enter_crash_mode(signal);
    INTERRUPTED_SP.with(|c| c.set(interrupted_sp(context)));
    crate::threads::guard::without_hooks(|| crate::output::manifest::signalled(signal));
    crate::threads::guard::without_hooks(flush_on_own_stack);
    if matches!(signal, libc::SIGTERM | libc::SIGINT | libc::SIGHUP) {
        // An MPI launcher ending the job: the other ranks of this host
        // write theirs before this one ends (`manifest`).
        crate::threads::guard::without_hooks(|| {
            crate::output::manifest::wait_for_peer_ranks(crate::output::manifest::PEER_WAIT_MS)
        });
    }
    // Delivered again, with the default action, when this handler returns
    // (a fault also repeats when the faulting instruction is re-executed).
    sys::reraise(signal);
    sys::set_errno(saved_errno);
}

thread_local! {
    /// The stack pointer of the code the current fatal or forwarded
    /// signal interrupted (for [`flush_on_own_stack`]).
    static INTERRUPTED_SP: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The interrupted stack pointer of a handler's `context` (0: none).
fn interrupted_sp(context: *mut c_void) -> u64 {
    if context.is_null() {
        return 0;
    }
    // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers,
    // alive while the handler runs (callers pass their own argument).
    registers(unsafe { &*(context as *const libc::ucontext_t) }).1
}

/// Writes every profile (`exit::flush_all`) on the thread's handler
/// stack, below the code the signal interrupted (`INTERRUPTED_SP`): a
/// fatal or forwarded signal's frame may be on a small alternate stack
/// of the program's, and writing needs far more.
fn flush_on_own_stack() {
    let below = INTERRUPTED_SP.with(|c| c.get());
    let mut flush = crate::output::exit::flush_all;
    match threads::current() {
        Some(state) => state.handler_stack.run_below(below, &mut flush),
        None => flush(),
    }
}
