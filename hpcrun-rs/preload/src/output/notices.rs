//! Notices about a measurement the program damaged or left empty, each
//! naming its cause and the fix. They go into the profiles
//! (`SampleStats::notices`, repeated by hpcprof-rs's summary) and, once per
//! distinct text, into `<output>/.hpcrun-notices`, from which the
//! `hpcrun-rs` launcher prints them when the program has ended.
//!
//! * A thread whose timer counted CPU time for many samples but
//!   that received almost none: its sampling signal was blocked or taken
//!   by the program past the interposed calls (a raw `rt_sigprocmask`, a
//!   `signalfd` read, ...).
//!   If the kernel's queue of pending signals overflowed instead (SIGIO
//!   counted as "signal queue full"), the notice says so and names
//!   `ulimit -i`.
//! * The profiler's handler is no longer installed (a raw `rt_sigaction`).
//! * (A note, not a warning: `note: ` opens its text.) Threads that
//!   ended before their first sample got no file (`writer::finish`): they
//!   are counted in the main thread's stats (`short_lived_threads`,
//!   `short_lived_cpu_ns`) and told to the launcher only when they took
//!   a measurable share of the process's CPU time
//!   ([`short_lived_note`]).
//! * The program closed the profiler's perf event descriptors past libc
//!   (raw `close_range`, `dup2`, `dup3` system calls): found when sampling stopped
//!   (`sys::owns_event`); the task-clock event's lost periods are counted
//!   as dropped.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use formats::measurement::SampleStats;

use crate::sys;
use crate::threads::config;
use crate::threads::signals;
use crate::threads::{self, ThreadState};

/// A thread is reported when it should have had at least this many
/// samples and got less than a tenth of them.
const MIN_EXPECTED: u64 = 20;

/// File in the output directory collecting the notices of all processes.
pub const FILE: &str = ".hpcrun-notices";

/// "SIGRTMIN+4 (signal 38)".
fn signal_name(signal: i32) -> String {
    format!("SIGRTMIN+{} (signal {signal})", signal - sys::sigrtmin())
}

fn fix() -> &'static str {
    "rerun with --signal N (0-15) naming a real-time signal the program leaves alone"
}

/// The notices of one thread (its expected against its received samples).
pub fn of_thread(state: &ThreadState) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    let cfg = config::get();
    let Some(signal) = signals::signal_at(0) else {
        return out;
    };
    if cfg.period_ns == 0 || crate::threads::run::hardware_active() {
        return out;
    }
    let closed = state.stats.fds_closed.load(Relaxed);
    if closed != 0 {
        let (what, fix) = if closed & 1 != 0 {
            (
                "the task-clock event's",
                "; the CPU-time timer (--timer cpu-timer, the default at periods of 1 ms or more) needs no descriptor",
            )
        } else {
            ("the page-fault event's", "")
        };
        out.insert(
            format!(
                "the program closed the profiler's perf event descriptors past libc (a raw close_range, dup2 or dup3 system call; libc's close, close_range and closefrom leave them open, its dup2 and dup3 move them first; the profiler keeps them at {} and above): {what} sampling of these threads stopped there and the sample periods after it are counted as dropped (descriptor closed by the program){fix}",
                sys::fd_floor(),
            ),
            1,
        );
        return out;
    }
    // The event excludes kernel time (a timer expiring in a system call
    // makes no sample): a thread that spends its CPU time in the kernel,
    // like an MPI progress thread polling, earns few samples rightly.
    // A CPU-time timer's sample may stand for several periods.
    let got = state.got_periods();
    let expected = got + state.missing_periods(cfg.period_ns);
    if expected >= MIN_EXPECTED && got.saturating_mul(10) < expected {
        let queue_full = state.stats.dropped[threads::DROP_QUEUE_FULL].load(Relaxed);
        if queue_full > 0 {
            let limit = sys::pending_signal_limit()
                .map(|l| format!(", now {l}"))
                .unwrap_or_default();
            out.insert(
                format!(
                    "threads received few of their samples because the kernel's queue of pending signals was full (the per-user limit, ulimit -i{limit}); the lost samples are counted as dropped (signal queue full); raise the limit (ulimit -i unlimited) or sample less often (-e mem:soft@PERIOD)"
                ),
                1,
            );
            return out;
        }
        out.insert(
            format!(
                "threads ran long enough for many samples but received almost none: their sampling signal {} was blocked or taken by the program outside sigaction/sigprocmask (e.g. raw system calls, signalfd); {}",
                signal_name(signal),
                fix()
            ),
            1,
        );
    }
    out
}

/// Threads of this process that ended having measured nothing (no
/// sample, no page fault, no allocation record, no checkpoint) and lost
/// nothing (no notice, no dropped count), for which no file was written
/// (`writer::finish`), and their CPU time (ns): told in the main thread's
/// profile ([`process_wide`]).
static UNWRITTEN_THREADS: AtomicU64 = AtomicU64::new(0);
static UNWRITTEN_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// Counts a thread that got no file, with its CPU time (ns).
pub fn count_unwritten(cpu_ns: u64) {
    UNWRITTEN_THREADS.fetch_add(1, Relaxed);
    UNWRITTEN_CPU_NS.fetch_add(cpu_ns, Relaxed);
}

/// In a forked child: the parent's short-lived threads are counted in the
/// parent's profile, not again in the child's.
pub fn reset_after_fork() {
    UNWRITTEN_THREADS.store(0, Relaxed);
    UNWRITTEN_CPU_NS.store(0, Relaxed);
}

/// The timer source's period (ns), 0 without one (hardware sources).
fn timer_period_ns() -> u64 {
    if crate::threads::run::hardware_active() {
        0
    } else {
        config::get().period_ns
    }
}

/// The note on this process's short-lived threads for the launcher's
/// closing lines, when it matters (`formats::notes::short_lived`: against
/// the CPU time of the process's other threads, as their stats hold it
/// when the main thread's profile is written, last), with their number.
pub fn short_lived_note() -> Option<(String, u64)> {
    let threads_n = UNWRITTEN_THREADS.load(Relaxed);
    if threads_n == 0 {
        return None;
    }
    // Every thread of the process, less the short-lived ones.
    let pid = sys::getpid();
    let all: u64 = threads::all()
        .filter(|s| s.pid == pid)
        .map(|s| s.stats.cpu_time_ns.load(Relaxed))
        .sum::<u64>()
        + threads::recycled_cpu_ns();
    let cpu_ns = UNWRITTEN_CPU_NS.load(Relaxed);
    let note = formats::notes::short_lived(
        threads_n,
        cpu_ns,
        all.saturating_sub(cpu_ns),
        timer_period_ns(),
    )?;
    Some((note, threads_n))
}

/// Process-wide notices and counts (written into the main thread's file).
pub fn process_wide(stats: &mut SampleStats) {
    stats.short_lived_threads = UNWRITTEN_THREADS.load(Relaxed);
    stats.short_lived_cpu_ns = UNWRITTEN_CPU_NS.load(Relaxed);
    stats.timer_period_ns = timer_period_ns();
    stats.signal_blocks = signals::BLOCKS.load(Relaxed);
    for notice in crate::threads::sandbox::notices() {
        stats.notices.insert(notice, 1);
    }
    stats.program_signals = signals::FORWARDED.load(Relaxed) + signals::HELD_BACK.load(Relaxed);
    let waited = signals::WAIT_DROPPED.load(Relaxed);
    if waited > 0 {
        stats
            .dropped
            .insert("taken by the program's sigwait".into(), waited);
    }
    for slot in 0..2 {
        let Some(signal) = signals::signal_at(slot) else {
            continue;
        };
        let ours = signals::handler_at(slot);
        if let Some(now) = sys::real_sigaction_query(signal) {
            if now.sa_sigaction != ours {
                stats.notices.insert(
                    format!(
                        "the program replaced the profiler's handler of {} with a raw rt_sigaction system call: the program got the profiler's signals until the profiler noticed and stopped sampling (within 50 ms with several threads, else at one of the program's next 1,024 allocations, else at exit), the later samples are lost; {}",
                        signal_name(signal),
                        fix()
                    ),
                    1,
                );
            }
        }
    }
}

/// Appends `notices` to the output directory's notice file (one line
/// each: count, tab, text), for the launcher.
pub fn publish(dir: &str, notices: &std::collections::BTreeMap<String, u64>) {
    if notices.is_empty() {
        return;
    }
    let mut text = String::new();
    for (notice, n) in notices {
        text.push_str(&format!("{n}\t{notice}\n"));
    }
    // One write with O_APPEND: lines of concurrent processes do not mix.
    // (Above the descriptor floor, as the profile files: a program
    // thread's dup2 onto a low number cannot take it mid-write.)
    let path = format!("{dir}/{FILE}");
    let _quiet = sys::file_limits::QuietFsize::new();
    if let Ok(f) = sys::outdir::open(&path, libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT) {
        let _ = sys::file_above_floor(f).write_all(text.as_bytes());
    }
}
