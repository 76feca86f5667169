//! Checkpoints: while the program runs, every thread's profile is written
//! again every `--checkpoint` seconds of wall time (the first one second
//! after start, [`FIRST_MS`]), so that a run killed with SIGKILL (a batch
//! time limit, the OOM killer) leaves what was measured up to the last
//! checkpoint.
//!
//! No thread is added to a single-threaded program (`unshare` of a user
//! namespace needs a single thread, and programs count their threads):
//! there the sample handler notes when a checkpoint is due ([`tick`],
//! atomics only) and the program's next allocation writes it on its own
//! thread ([`poll`], from the allocation hooks; a program that no longer
//! allocates writes none until its exit). A helper thread takes over
//! once the program creates its second thread ([`program_goes_multithreaded`],
//! from `pthread_create`).
//!
//! Soundness: the helper never stops or signals the program's threads. It
//! reads their data the way the final writer at process exit reads the
//! data of other threads: the node pool, the histogram table, the
//! counters and the allocation log are all atomics, written by their
//! thread's handler and hooks without locks; a node is complete before
//! the pool's length (a release store) counts it, and an allocation record
//! before the thread's log head (release) points to it. So a checkpoint is
//! a consistent tree whose counters are each exact at some instant during
//! the copy (trees may differ by the few samples taken meanwhile). The
//! copying and writing allocate from the library's own allocator, in the
//! helper thread, never in a signal handler. The helper blocks every
//! signal (except glibc's internal ones, which `setxid` needs), so the
//! program's process-directed signals never land on it.
//!
//! A thread's file is written under its `writing` lock (checkpoint, or the
//! final profile at thread or process exit, which waits for a checkpoint
//! in progress and then replaces it): a profile that remains marked as a
//! checkpoint (`stats.checkpoints = 1`) is from a run that did not finish.
//! Threads whose counters did not move since their last checkpoint are
//! skipped. Forked children (which lose the helper) write at exit only.
//!
//! The same two places (the helper's 50 ms polls, else [`poll`]) name
//! the regions of unknown addresses the handler noted since
//! (`regions::label_new_regions`), while their mappings are still there.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

use crate::output::writer;
use crate::sys;
use crate::threads::config;
use crate::threads::{self, ThreadState};

static STOP: AtomicBool = AtomicBool::new(false);

/// The checkpoint interval (ms; 0: no checkpoints) and the process they
/// are for (a forked child writes at exit only).
static INTERVAL_MS: AtomicU64 = AtomicU64::new(0);
static PID: AtomicU32 = AtomicU32::new(0);

/// Set once the helper thread was started (or tried).
static HELPER: AtomicBool = AtomicBool::new(false);

/// Without the helper: when the next checkpoint is due (monotonic ns),
/// and whether the sample handler found it due.
static NEXT_DUE_NS: AtomicU64 = AtomicU64::new(0);
static DUE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this thread creates the helper: its `pthread_create`
    /// passes straight through (the helper is not measured).
    static SPAWNING: Cell<bool> = const { Cell::new(false) };
    /// This thread's calls of [`poll`].
    static POLLS: Cell<u32> = const { Cell::new(0) };
}

/// True while the calling thread creates the helper thread.
pub fn spawning() -> bool {
    SPAWNING.with(|s| s.get())
}

/// From the sample handler (async-signal-safe: atomics and a vDSO clock
/// read): notes that a checkpoint is due, while there is no helper.
pub fn tick() {
    let due = NEXT_DUE_NS.load(Relaxed);
    if due != 0 && !HELPER.load(Relaxed) && sys::monotonic_ns() >= due {
        DUE.store(true, Relaxed);
    }
}

/// From the allocation hooks: writes the checkpoint the sample handler
/// found due (single-threaded programs), on the calling thread. One
/// relaxed load when none is due.
pub fn poll() {
    // Every 1,024th allocation: has the program taken the sample signal
    // over (a raw rt_sigaction)? Then sampling stops, before the program
    // gets many of the profiler's signals (the helper checks every 50 ms).
    let n = POLLS.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    if n % 1024 == 0
        && !crate::threads::signals::WITHDRAWN.load(Relaxed)
        && crate::threads::signals::handler_taken()
    {
        crate::threads::sampling::withdraw();
    }
    // Regions of unknown addresses sampled since the last allocation are
    // named now, while mapped, unless the helper thread does it (a forked
    // child has none). Not inside another hook or the library's own code.
    if crate::access::regions::pending()
        && (!HELPER.load(Relaxed) || sys::getpid() != PID.load(Relaxed))
    {
        crate::threads::guard::guarded(crate::access::regions::label_new_regions);
    }
    if !DUE.load(Relaxed) || !DUE.swap(false, AcqRel) {
        return;
    }
    let interval = INTERVAL_MS.load(Relaxed);
    let pid = sys::getpid();
    if interval == 0 || pid != PID.load(Relaxed) || HELPER.load(Relaxed) || STOP.load(SeqCst) {
        return;
    }
    NEXT_DUE_NS.store(sys::monotonic_ns() + interval * 1_000_000, Relaxed);
    let Some(dir) = config::get().out_dir.as_deref() else {
        return;
    };
    let cpu = sys::thread_cpu_ns();
    crate::threads::guard::without_hooks(|| {
        for state in threads::all().filter(|s| s.pid == pid) {
            checkpoint(state, dir);
        }
    });
    ROUNDS.fetch_add(1, Relaxed);
    CPU_NS.fetch_add(sys::thread_cpu_ns().saturating_sub(cpu), Relaxed);
}

/// What the helper did: rounds, files written, bytes, its CPU time (ns).
static ROUNDS: AtomicU64 = AtomicU64::new(0);
static FILES: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static CPU_NS: AtomicU64 = AtomicU64::new(0);

/// With `HPCRUN_CHECKPOINT_STATS` set, prints what the checkpoints cost
/// (called at process exit; for docs/PERFORMANCE.md).
pub fn report() {
    if std::env::var_os("HPCRUN_CHECKPOINT_STATS").is_none() || ROUNDS.load(Relaxed) == 0 {
        return;
    }
    crate::threads::run::warn(&format!(
        "checkpoints: {} rounds, {} files, {} bytes, {:.1} ms of CPU time in the helper thread",
        ROUNDS.load(Relaxed),
        FILES.load(Relaxed),
        BYTES.load(Relaxed),
        CPU_NS.load(Relaxed) as f64 / 1e6
    ));
}

/// Set when the main thread ended with `pthread_exit` while others run.
static MAIN_EXITED: AtomicBool = AtomicBool::new(false);

/// Called at the exit of a measured thread. glibc ends the process with
/// `exit(0)` when its last thread ends, but the helper is a thread too:
/// once the main thread has gone, the helper watches for the moment it is
/// the only live thread left and then does what glibc would have done.
pub fn thread_exited(state: &ThreadState) {
    if state.index == 0 {
        MAIN_EXITED.store(true, SeqCst);
    }
}

/// True if every thread of this process but the caller has ended (the
/// main thread, gone with `pthread_exit`, stays as a zombie task).
fn only_helper_left() -> bool {
    let me = sys::gettid().to_string();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    for task in tasks.flatten() {
        let name = task.file_name();
        if name.to_string_lossy() == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // Gone meanwhile.
        };
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if !matches!(state, Some('Z') | Some('X')) {
            return false;
        }
    }
    true
}

/// The first checkpoint is due this soon after start (ms) at the latest,
/// whatever the interval: a run killed a few seconds in (a batch job's
/// limit, a user's SIGKILL) keeps what it measured.
pub const FIRST_MS: u64 = 1000;

/// Sets checkpoints up (at load time): the first is due after one
/// interval or [`FIRST_MS`], whichever is shorter; no thread is started
/// yet.
pub fn start() {
    let cfg = config::get();
    if cfg.checkpoint_ms == 0 || cfg.out_dir.is_none() {
        return;
    }
    INTERVAL_MS.store(cfg.checkpoint_ms, Relaxed);
    PID.store(sys::getpid(), Relaxed);
    let first = cfg.checkpoint_ms.min(FIRST_MS);
    NEXT_DUE_NS.store(sys::monotonic_ns() + first * 1_000_000, Relaxed);
}

/// Starts the helper thread once, when the program is about to create
/// its second thread (from `pthread_create`, in the creating thread).
pub fn program_goes_multithreaded() {
    let interval = INTERVAL_MS.load(Relaxed);
    let pid = sys::getpid();
    if interval == 0
        || pid != PID.load(Relaxed)
        || HELPER.load(Relaxed)
        || HELPER.swap(true, AcqRel)
    {
        return;
    }
    DUE.store(false, Relaxed);
    SPAWNING.with(|s| s.set(true));
    crate::threads::guard::without_hooks(|| spawn_helper(Duration::from_millis(interval), pid));
    SPAWNING.with(|s| s.set(false));
}

fn spawn_helper(interval: Duration, pid: u32) {
    // The helper inherits this mask: every signal blocked but glibc's
    // internal SIGCANCEL and SIGSETXID (32, 33).
    let mut all = sys::empty_sigset();
    for s in 1..=64 {
        if s != 32 && s != 33 && s != libc::SIGKILL && s != libc::SIGSTOP {
            sys::sigset_add(&mut all, s);
        }
    }
    let mut old = sys::empty_sigset();
    sys::raw_sigmask(libc::SIG_BLOCK, Some(&all), Some(&mut old));
    // A plain pthread (`sys::spawn_thread`), not a std thread: std's
    // thread start registers TLS destructors with glibc's `calloc` before
    // any code of ours runs, and the helper would get a glibc arena
    // (64 MiB of address space); glibc's allocations on it come from the
    // library's heap instead.
    let spawned = sys::spawn_thread(
        256 << 10,
        // (Under a filter from before start, no optional call.)
        (!crate::threads::sandbox::filtered_at_start()).then_some(c"hpcrun-ckpt"),
        Box::new(move || crate::threads::guard::without_hooks(|| run(interval, pid))),
    );
    sys::raw_sigmask(libc::SIG_SETMASK, Some(&old), None);
    if let Err(errno) = spawned {
        crate::threads::run::warn(&format!(
            "could not start the checkpoint thread (errno {errno}); no checkpoints"
        ));
    }
}

/// Stops checkpointing (process exit, fatal signal): no checkpoint starts
/// after this.
pub fn stop() {
    STOP.store(true, SeqCst);
}

fn run(interval: Duration, pid: u32) {
    let step = Duration::from_millis(50).min(interval);
    // The first round when it is due (`start`), the next every interval.
    let due_in = NEXT_DUE_NS
        .load(Relaxed)
        .saturating_sub(sys::monotonic_ns());
    let mut next = Instant::now() + Duration::from_nanos(due_in).min(interval);
    loop {
        while Instant::now() < next {
            if STOP.load(SeqCst) {
                return;
            }
            if !crate::threads::signals::WITHDRAWN.load(Relaxed)
                && crate::threads::signals::handler_taken()
            {
                crate::threads::sampling::withdraw();
            }
            // Regions of unknown addresses sampled since are named while
            // they are mapped (`regions`).
            crate::access::regions::label_new_regions();
            // Call-path trees that asked for more room get it here, out
            // of their threads' signal handlers (a thread that does not
            // allocate has no other place to map it).
            for state in threads::all().filter(|s| s.pid == pid) {
                if !state.finished.load(Relaxed) {
                    state.tree.grow_if_wanted();
                }
            }
            if MAIN_EXITED.load(SeqCst) && only_helper_left() {
                // The program's last thread has ended: end the process as
                // glibc would have (atexit handlers, then the profiles),
                // with the signals unblocked as in a program thread.
                sys::raw_sigmask(libc::SIG_SETMASK, Some(&sys::empty_sigset()), None);
                std::process::exit(0);
            }
            std::thread::sleep(step.min(next.saturating_duration_since(Instant::now())));
        }
        if STOP.load(SeqCst) || sys::getpid() != pid {
            return;
        }
        let Some(dir) = config::get().out_dir.as_deref() else {
            return;
        };
        let cpu = sys::thread_cpu_ns();
        for state in threads::all().filter(|s| s.pid == pid) {
            if STOP.load(SeqCst) {
                return;
            }
            checkpoint(state, dir);
        }
        ROUNDS.fetch_add(1, Relaxed);
        CPU_NS.fetch_add(sys::thread_cpu_ns().saturating_sub(cpu), Relaxed);
        next += interval;
        let now = Instant::now();
        if next < now {
            // Writing took longer than the interval: start counting again.
            next = now + interval;
        }
    }
}

/// What changes when a thread measures something (samples, faults,
/// allocations, tree growth).
fn signature(state: &ThreadState) -> u64 {
    let s = &state.stats;
    s.samples
        .load(Relaxed)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(s.page_faults.load(Relaxed).rotate_left(17))
        .wrapping_add(s.hook_calls.load(Relaxed).rotate_left(34))
        .wrapping_add(state.tree.len() as u64)
        .wrapping_add(1)
}

/// Writes one checkpoint of `state`'s thread, unless it finished or did
/// not change.
fn checkpoint(state: &ThreadState, dir: &str) {
    let _writing = state.writing.lock().unwrap_or_else(|e| e.into_inner());
    if state.finished.load(Acquire) {
        return;
    }
    let sig = signature(state);
    // A thread that measured nothing yet gets no file (`writer::finish`;
    // the main thread's carries the process's counts).
    if state.checkpointed.load(Relaxed) == sig || (state.index != 0 && !writer::measured(state)) {
        return;
    }
    let mut profile = writer::build_profile(state);
    profile.stats.checkpoints = 1;
    if state.finished.load(Acquire) || STOP.load(SeqCst) {
        return;
    }
    let bytes = crate::output::profile_file::write(state, dir, &profile);
    FILES.fetch_add(1, Relaxed);
    BYTES.fetch_add(bytes as u64, Relaxed);
    state.checkpointed.store(sig, Relaxed);
}
