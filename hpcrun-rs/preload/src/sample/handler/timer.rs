//! The timer signal's entry (`on_sample`): the periods a CPU-time
//! timer's signal stands for (`timer_weight`), and keeping the task-clock
//! event sampling after a slow handler (`keep_clock_running`).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::*;

use crate::access::handler_time;
use crate::sys;
use crate::threads::run;
use crate::threads::{self, ThreadState};

use super::enter;
use super::forward::program_signal;
use super::sample::sample;
use super::watches::{watch_slot, watch_trap};

/// The signal handler (installed with SA_SIGINFO | SA_RESTART). A signal
/// of the same number that did not come from the profiler's perf events
/// is the program's: its own action runs (`signals::forward`).
pub extern "C" fn on_sample(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if program_signal(signal, info, context) {
        return;
    }
    // A trap of one of this thread's watchpoints (same signal, its fd):
    // not a sample (not timed, the task-clock event is not re-armed).
    if let Some(slot) = watch_slot(info, context) {
        enter(context, |state, ctx| watch_trap(state, ctx, slot));
        return;
    }
    // A CPU-time timer's signal stands for the periods of user time
    // since the last one (at least 1 + its overrun).
    let weight = timer_overrun(info).map(timer_weight);
    let t0 = handler_time::start();
    let mut sampled = false;
    enter(context, |state, ctx| {
        let extra = weight.unwrap_or(1) - 1;
        if extra > 0 {
            state.stats.timer_overruns.fetch_add(extra, Relaxed);
            let largest = &threads::LARGEST_TIMER_WEIGHT;
            if largest.load(Relaxed) < 1 + extra {
                largest.fetch_max(1 + extra, Relaxed);
            }
        }
        sample(state, ctx, 1 + extra);
        sampled = true;
    });
    let spent_ns = t0.elapsed_ns();
    if let Some(state) = threads::current() {
        if sampled {
            state.stats.handler_time.note(spent_ns);
        }
        let saved_errno = sys::errno();
        keep_clock_running(state, overflow_stopped_clock(info), spent_ns);
        sys::set_errno(saved_errno);
    }
}

/// The periods a CPU-time timer's signal with overrun count `overrun`
/// stands for: all periods of the thread's user time (its kernel clock,
/// the timer's own) that no earlier signal stood for, at least
/// `1 + overrun`. The kernel's count leaves out the period that expired
/// at the very tick that sent the signal (the timer is re-armed at that
/// expiry, which the next tick reports): a thread that ends before its
/// next tick lost it, and a 2 ms thread at a 2 ms period whose only tick
/// charged it 4 ms of user time (HZ=250) counted 1 period of 2. One clock
/// read (a system call) per sample.
fn timer_weight(overrun: u32) -> u64 {
    let kernel = 1 + u64::from(overrun);
    let Some(state) = threads::current() else {
        return kernel;
    };
    let period = crate::threads::config::get().period_ns.max(1);
    let s = &state.stats;
    let credited = s.timer_periods.load(Relaxed);
    let elapsed = sys::thread_user_ns_of(state.tid)
        .map(|ns| ns.saturating_sub(s.user_time_at_start_ns.load(Relaxed)) / period)
        .unwrap_or(0);
    let weight = kernel.max(elapsed.saturating_sub(credited));
    s.timer_periods.store(credited + weight, Relaxed);
    weight
}

/// The overrun count of a CPU-time timer's signal (`None`: not one).
fn timer_overrun(info: *mut libc::siginfo_t) -> Option<u32> {
    // SAFETY: the kernel's handler arguments, valid while the handler runs.
    unsafe { sys::Delivered::new(info, std::ptr::null_mut()) }.timer_overrun()
}

/// A handler that took more than this share of the period (1/4) limits
/// the task-clock event to one overflow at a time.
const SLOW_HANDLER_DIVISOR: u64 = 4;

/// True if this overflow disabled the task-clock event (it was limited to
/// one overflow: the kernel then signals with `POLL_HUP`, else `POLL_IN`).
fn overflow_stopped_clock(info: *mut libc::siginfo_t) -> bool {
    // SAFETY: the kernel's handler arguments, valid while the handler runs.
    let delivered = unsafe { sys::Delivered::new(info, std::ptr::null_mut()) };
    matches!(delivered.code_fd(), Some((code, _)) if code == crate::threads::signals::POLL_HUP)
}

/// Keeps the task-clock event sampling after a sample that took
/// `spent_ns`. The event normally runs free (no system call per sample:
/// the arming `ioctl` costs about 14 us in a VM). After a handler slower
/// than a quarter of the period it is limited to its next overflow, so a
/// handler slower than the period cannot queue signal after signal; the
/// signal of that overflow (`POLL_HUP`: the event stopped) re-enables it,
/// free again if that handler was fast. At most one overflow of limit is
/// outstanding (`clock_limited`), so the event never stops unnoticed.
fn keep_clock_running(state: &ThreadState, stopped: bool, spent_ns: u64) {
    let fd = state.perf_fd.load(Relaxed);
    if fd < 0 {
        return;
    }
    if stopped {
        state.clock_limited.store(false, Relaxed);
    }
    if crate::threads::config::get().period_ns < run::FREE_RUN_MIN_PERIOD_NS {
        // Short periods: one overflow at a time, always (at most one
        // signal pending, whatever this handler's time).
        if stopped && sys::limit_to_one_overflow(fd) {
            state.clock_limited.store(true, Relaxed);
        }
        return;
    }
    let slow =
        spent_ns.saturating_mul(SLOW_HANDLER_DIVISOR) > crate::threads::config::get().period_ns;
    if slow && !state.clock_limited.load(Relaxed) {
        if sys::limit_to_one_overflow(fd) {
            state.clock_limited.store(true, Relaxed);
        }
    } else if stopped && !slow {
        sys::enable_event(fd);
    }
}
