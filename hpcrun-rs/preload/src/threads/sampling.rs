//! The per-thread sample sources: opening, arming and stopping each
//! thread's perf events (task clock, page faults, hardware memory events,
//! watchpoints).
//!
//! `mem:soft` (and `cpu-time`) sample each thread with one of two timers
//! (`--timer`, [`hpcrun_abi::config::Timer`]), both started by that thread
//! and signalling that same thread with a real-time signal (`SIGRTMIN+4`
//! unless `HPCRUN_SIGNAL` says otherwise):
//!
//! * a POSIX timer on the thread's user CPU time (`sys::start_cpu_timer`;
//!   the default at periods of 1 ms or more): checked at the kernel's
//!   tick, nothing to do at a context switch; a signal may stand for
//!   several periods (its overrun count, the sample's weight);
//! * a software task-clock perf event (`F_SETOWN_EX` with `F_OWNER_TID`):
//!   exact periods, but a kernel timer stopped and restarted at every
//!   context switch of the thread (about 12 us each in a KVM guest,
//!   docs/PERFORMANCE.md).

use std::sync::atomic::Ordering::*;

use crate::pmu;
use crate::sys;
use crate::threads;
use crate::threads::config;
use crate::threads::run;

/// Pages of each thread's page-fault ring (a power of two).
const FAULT_RING_PAGES: usize = 8;

/// Sets up the calling thread: state, exit hook, sampling.
pub fn start_thread(index: u32) {
    // Short of memory (the heap lives on its reserve): threads started
    // from now on are not measured (`sandbox::notices` says so).
    if !run::active() || sys::heap::short_of_memory() {
        return;
    }
    let Some(state) = threads::start_current(index, run::tree_capacity()) else {
        run::warn("could not map memory for a thread's profile; thread not measured");
        return;
    };
    threads::arm_exit();
    if crate::threads::signals::WITHDRAWN.load(Acquire) {
        // The program took the sample signal over: it would get them.
        return;
    }
    let cfg = config::get();
    if cfg.period_ns > 0 {
        match pmu::sampler::setup(&cfg.event, cfg.period_ns) {
            Ok(None) => {}
            Ok(Some(setup)) => {
                let signal = Some(run::signal());
                if let Err(e) = pmu::sampler::start_thread(&state.hw, &state.perf_fd, setup, signal)
                {
                    run::warn_once(&format!("{e}: no samples"));
                }
                return;
            }
            // Reported at start-up.
            Err(_) => return,
        }
        if let Some(ns) = sys::thread_user_ns_of(state.tid) {
            state.stats.user_time_at_start_ns.store(ns, Relaxed);
        }
        if cfg.timer.uses_cpu_timer(cfg.period_ns) {
            match sys::start_cpu_timer(cfg.period_ns, run::signal()) {
                Ok(id) => {
                    state.cpu_timer.store(id, Release);
                    return start_watches(state, cfg);
                }
                Err(errno) => run::warn_once(&format!(
                    "timer_create(CPU time) failed (errno {errno}): sampling with the task-clock event instead"
                )),
            }
        }
        let one_at_a_time = cfg.period_ns < run::FREE_RUN_MIN_PERIOD_NS;
        match sys::open_task_clock(cfg.period_ns, run::signal()) {
            Ok(fd) => {
                // Published before the event starts: limited to one
                // overflow, the event stops at it until that signal's
                // handler re-arms it through `perf_fd` (a vCPU preempted
                // between start and publication let the first overflow
                // find no fd, and the thread was never sampled again).
                state.clock_limited.store(one_at_a_time, Relaxed);
                state.perf_fd.store(fd, Release);
                if let Err(errno) = sys::start_event(fd, one_at_a_time) {
                    state.perf_fd.store(-1, Release);
                    let _ = sys::close_event(fd);
                    run::warn_once(&format!(
                        "perf_event_open(task-clock) could not start (errno {errno}): no samples"
                    ));
                }
            }
            Err(errno) => run::warn_once(&format!(
                "perf_event_open(task-clock) failed (errno {errno}): no samples; {}",
                open_failed_fix(errno)
            )),
        }
    }
    start_watches(state, cfg);
}

/// What to do when `perf_event_open` failed with `errno`: a limit on
/// descriptors is named as such (it is no permission problem).
pub fn open_failed_fix(errno: i32) -> String {
    match errno {
        libc::EMFILE => format!(
            "the process's open-file limit (ulimit -n{}) was reached: raise it, or open fewer files at once",
            sys::open_files_limit()
                .map(|l| format!(", now {l}"))
                .unwrap_or_default()
        ),
        libc::ENFILE => {
            "the system's open-file table is full (fs.file-max): close files elsewhere or raise it"
                .to_string()
        }
        libc::EACCES | libc::EPERM => {
            "check /proc/sys/kernel/perf_event_paranoid (or grant CAP_PERFMON)".to_string()
        }
        _ => "check /proc/sys/kernel/perf_event_paranoid and dmesg".to_string(),
    }
}

/// Opens the calling thread's watchpoints and page-fault event, as asked.
fn start_watches(state: &threads::ThreadState, cfg: &config::Config) {
    let (sharing, reuse) = (
        crate::access::watch::sharing_every() > 0,
        crate::access::watch::reuse_every() > 0,
    );
    if sharing || reuse {
        if let Err(errno) = state.watch.open(run::signal(), sharing, reuse) {
            run::warn_once(&format!(
                "perf_event_open(breakpoint) failed (errno {errno}{}): this thread's accesses are not watched (sharing, reuse)",
                match errno {
                    libc::ENOSPC => ", no free debug register: a debugger may hold them",
                    libc::EMFILE => ", or half of the open-file limit (ulimit -n) reached: the program's descriptors come first",
                    _ => "",
                }
            ));
        }
    }
    if let Some(period) = cfg.page_faults {
        match sys::open_page_faults(period, run::signal() + 1, FAULT_RING_PAGES) {
            Ok((fd, ring)) => {
                let _ = state.fault_ring.set(pmu::ring::Ring::new(ring));
                state.fault_fd.store(fd, Release);
            }
            Err(errno) => run::warn_once(&format!(
                "perf_event_open(page-faults) failed (errno {errno}): no page-fault samples; {}",
                open_failed_fix(errno)
            )),
        }
    }
}

/// Runs `work` (the profiler's own work that touches many pages at
/// once: reading the modules' symbols) with the calling thread's
/// page-fault event stopped. Its faults are the profiler's, not the
/// program's; sampled, a thousand of them in a handler (where the
/// page-fault signal waits) fill the thread's ring (about 800 samples)
/// and lose the rest, and leave a signal queued for each, which find
/// the ring empty: a thousand such signals stop the thread's page-fault
/// sampling for the rest of the run (the feedback brake in
/// `sample::handler::faults`). Nested calls (the modules refreshed at a
/// `dlopen` may be the first to be read) leave the event to the
/// outermost.
pub fn without_fault_samples<R>(work: impl FnOnce() -> R) -> R {
    thread_local! {
        static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let outer = DEPTH.with(|d| d.replace(d.get() + 1)) == 0;
    let fd = match threads::current() {
        Some(s) if outer => s.fault_fd.load(Acquire),
        _ => -1,
    };
    let stopped = fd >= 0 && sys::disable_owned(fd);
    let result = work();
    DEPTH.with(|d| d.set(d.get() - 1));
    // (Not if the brake or `stop` took the event meanwhile.)
    let still = threads::current().is_some_and(|s| s.fault_fd.load(Acquire) == fd);
    if stopped && still && sys::owns_event(fd) {
        sys::enable_event(fd);
    }
    result
}

/// Stops a thread's sampling (from any thread).
pub fn stop(state: &threads::ThreadState, close: bool) {
    note_times(state);
    let timer = state.cpu_timer.swap(-1, AcqRel);
    if timer >= 0 {
        if close {
            sys::delete_cpu_timer(timer);
        } else {
            sys::set_cpu_timer(timer, 0);
        }
    }
    for (bit, slot) in [&state.perf_fd, &state.fault_fd].into_iter().enumerate() {
        let fd = slot.swap(-1, AcqRel);
        if fd < 0 {
            continue;
        }
        // Only if the descriptor is still ours: the program may have closed
        // it (close_range, closefrom) and reused its number for its own file.
        if bit == 1 {
            note_fault_samples_made(state, fd);
        }
        let ours = if close {
            // The ring stays mapped (a late handler may still read it).
            sys::close_event(fd)
        } else {
            sys::disable_owned(fd)
        };
        if !ours {
            state.stats.fds_closed.fetch_or(1 << bit, Relaxed);
            if bit == 0 {
                // The task-clock event ended with its descriptor: the
                // periods after its last sample are lost.
                let lost = state.missing_periods(config::get().period_ns);
                state.stats.dropped[threads::DROP_FD_CLOSED].store(lost, Relaxed);
            }
        }
    }
    state.watch.stop(close);
    if close {
        pmu::sampler::stop_thread(&state.hw);
    }
}

/// Reads how many samples the thread's page-fault event `fd` made (its
/// count over the period) into the thread's stats, after stopping it
/// (so that the count is final), if `fd` is still the profiler's.
/// Compared with the samples the handler read and the losses the kernel
/// told, it counts those never read (`threads::DROP_NEVER_READ`).
fn note_fault_samples_made(state: &threads::ThreadState, fd: i32) {
    let Some(period) = config::get().page_faults else {
        return;
    };
    if sys::disable_owned(fd) {
        if let Some(count) = sys::read_counter(fd) {
            let made = count / period.max(1);
            state.stats.fault_samples_made.store(made, Relaxed);
        }
    }
}

/// Before the program's `dup2`/`dup3` onto number `fd`: if `fd` is one of
/// the profiler's live events, the event moves to another descriptor
/// (`sys::move_event`) and the thread that samples with it uses that one
/// from now on, so the program gets its file at `fd` and the thread goes
/// on sampling; nothing is lost. The profiler never touches `fd` again.
/// (A handler that read the old number just before may still make one
/// `ioctl` on it.) Async-signal-safe: no lock, no allocation.
pub fn make_way(fd: i32) {
    if !sys::is_event_number(fd) {
        return;
    }
    let Some(moved) = sys::move_event(fd) else {
        // Not ours any more, or no free number: the program's dup2
        // closes the event; found when sampling stops (`stop`) and told.
        return;
    };
    let pid = sys::getpid();
    let swap = |slot: &std::sync::atomic::AtomicI32| {
        slot.compare_exchange(fd, moved, AcqRel, Relaxed).is_ok()
    };
    let taken = threads::all().filter(|s| s.pid == pid).any(|s| {
        swap(&s.perf_fd)
            || swap(&s.fault_fd)
            || swap(&s.hw.leader_fd)
            || s.watch.replace_fd(fd, moved)
    });
    if !taken {
        // No thread samples with it (it stopped meanwhile).
        sys::close_moved(moved);
    }
}

/// Reads a sampled thread's CPU and user time into its stats (from any
/// thread; before its profile is written): with the period, the samples
/// it should have had (see notices.rs). From its CPU clock, not the
/// task-clock event's count: the event stops at an overflow until its
/// signal is handled, so a thread whose signal is blocked counts one
/// period only.
pub fn note_times(state: &threads::ThreadState) {
    let fd = state.perf_fd.load(Acquire);
    let timer = state.cpu_timer.load(Acquire);
    if (fd >= 0 || timer >= 0) && !run::hardware_active() {
        if let Some(ns) = sys::thread_cpu_ns_of(state.tid).or_else(|| sys::read_counter(fd)) {
            state.stats.cpu_time_ns.store(ns, Relaxed);
        }
        if let Some(ns) = sys::thread_user_ns_of(state.tid) {
            state.stats.user_time_ns.store(ns, Relaxed);
            state.stats.user_time_read.store(true, Relaxed);
        }
    }
}

/// Stops the sample sources of every thread of this process, once: the
/// program replaced the profiler's handler with a raw `rt_sigaction`
/// ([`crate::threads::signals::handler_taken`]) and would get their signals as
/// its own. The threads' profiles keep what was measured; the notice
/// (`notices::process_wide`) says so.
pub fn withdraw() {
    if crate::threads::signals::WITHDRAWN.swap(true, AcqRel) {
        return;
    }
    let pid = sys::getpid();
    for state in threads::all().filter(|s| s.pid == pid) {
        stop(state, false);
    }
}
