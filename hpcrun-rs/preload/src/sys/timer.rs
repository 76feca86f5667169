//! POSIX CPU-time timers: the `cpu-timer` sample source. One timer per
//! thread on that thread's user-time clock, whose expiry sends a real-time
//! signal to that thread (`SIGEV_THREAD_ID`). The kernel checks such
//! timers at its scheduler tick, so a context switch costs nothing (a
//! task-clock perf event reprograms a kernel timer at every switch), and
//! a period finer than the tick shows as overruns: the one signal of a
//! tick carries how many more periods it stands for.
//!
//! System calls only (no glibc wrapper state): async-signal-safe.

use std::ffi::c_int;

/// The value every profiler timer carries in its signal (`si_value`), by
/// which the handler tells a profiler timer's signal from the program's.
pub const TIMER_COOKIE: u64 = 0x6870_6372_756e_7469; // "hpcrunti"

/// The kernel's `struct sigevent` for `SIGEV_THREAD_ID` (64 bytes).
#[repr(C)]
struct SigEvent {
    value: u64,
    signo: c_int,
    notify: c_int,
    tid: c_int,
    _pad: [c_int; 11],
}

const SIGEV_THREAD_ID: c_int = 4;

/// The user-mode CPU-time clock of thread `tid` of this process (the
/// kernel's per-thread `CPUCLOCK_VIRT`), as a clock id.
fn thread_user_clock(tid: u32) -> libc::clockid_t {
    // CPUCLOCK_VIRT (1) | CPUCLOCK_PERTHREAD_MASK (4), tid inverted << 3.
    ((!(tid as libc::clockid_t)) << 3) | 5
}

/// Creates a timer on the calling thread's user CPU time that sends
/// `signal` to this thread every `period_ns` of it. Returns the kernel's
/// timer id, or the errno.
pub fn start_cpu_timer(period_ns: u64, signal: c_int) -> Result<c_int, c_int> {
    let tid = super::gettid();
    let event = SigEvent {
        value: TIMER_COOKIE,
        signo: signal,
        notify: SIGEV_THREAD_ID,
        tid: tid as c_int,
        _pad: [0; 11],
    };
    let mut id: c_int = -1;
    // SAFETY: the kernel reads the sigevent and writes the id, both owned
    // and live for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            thread_user_clock(tid),
            &event as *const SigEvent,
            &mut id as *mut c_int,
        )
    };
    if r != 0 {
        return Err(super::errno());
    }
    if !set_cpu_timer(id, period_ns) {
        let e = super::errno();
        delete_cpu_timer(id);
        return Err(e);
    }
    Ok(id)
}

/// Arms timer `id` to expire every `period_ns` (0: disarms it).
pub fn set_cpu_timer(id: c_int, period_ns: u64) -> bool {
    let ts = libc::timespec {
        tv_sec: (period_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (period_ns % 1_000_000_000) as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: ts,
        it_value: ts,
    };
    // SAFETY: the kernel reads an owned itimerspec; a stale id only
    // returns an error.
    unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            id,
            0,
            &spec as *const libc::itimerspec,
            std::ptr::null_mut::<libc::itimerspec>(),
        ) == 0
    }
}

/// Deletes timer `id` (from any thread of the process).
pub fn delete_cpu_timer(id: c_int) {
    // SAFETY: a stale id only returns an error.
    unsafe { libc::syscall(libc::SYS_timer_delete, id) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigevent_is_the_kernels_size() {
        assert_eq!(std::mem::size_of::<SigEvent>(), 64);
    }

    #[test]
    fn a_timer_starts_and_is_deleted() {
        // A long period: the test thread never sees the signal.
        let id = start_cpu_timer(3_600_000_000_000, libc::SIGRTMIN() + 9).expect("timer");
        assert!(id >= 0);
        assert!(set_cpu_timer(id, 0));
        delete_cpu_timer(id);
        assert!(!set_cpu_timer(id, 1_000_000));
    }
}
