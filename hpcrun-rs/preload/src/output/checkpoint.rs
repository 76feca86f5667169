//! Checkpoints: while the program runs, every thread's profile is written
//! again every `--checkpoint` seconds of wall time (the first one second
//! after start, [`FIRST_MS`]), so that a run killed with SIGKILL (a batch
//! time limit, the OOM killer) leaves what was measured up to the last
//! checkpoint.
//!
//! No thread of the profiler runs while the program has a single thread
//! (`unshare` of a user namespace needs a single thread, and programs
//! count their threads): there the sample handler notes when a
//! checkpoint is due ([`tick`], atomics only) and the program's next
//! allocation writes it on its own thread ([`poll`], from the allocation
//! hooks; a program that no longer allocates writes none until its
//! exit). A helper thread takes over while two or more of the program's
//! threads run: started when the second one starts ([`thread_started`],
//! in the new thread before the program's start routine), stopped when
//! the program is down to one thread again ([`thread_ended`], in the
//! ending thread's exit, which waits until the kernel has reaped the
//! helper: a program that joins its threads finds itself alone, as
//! natively). Forked children do the same for themselves.
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
//! skipped.
//!
//! Once the kernel refused the library's heap a mapping
//! (`sys::heap::refused`), no checkpoint is written: each would spend
//! the heap's reserve that the final profiles need, and those are what
//! matters. The checkpoints that were due then are counted
//! (`sandbox::checkpoint_skipped`) and the notice on the refused memory
//! says so.
//!
//! The same two places (the helper's 50 ms polls, else [`poll`]) name
//! the regions of unknown addresses the handler noted since
//! (`regions::label_new_regions`), while their mappings are still there.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::time::Duration;

use crate::output::writer;
use crate::sys;
use crate::threads::config;
use crate::threads::{self, ThreadState};

static STOP: AtomicBool = AtomicBool::new(false);

/// The checkpoint interval (ms; 0: no checkpoints) and the process they
/// are for (a forked child sets up its own: [`reset_after_fork`]).
static INTERVAL_MS: AtomicU64 = AtomicU64::new(0);
static PID: AtomicU32 = AtomicU32::new(0);

/// The program's measured threads that run (started, not yet at their
/// exit): the helper runs while there are two or more.
static LIVE: AtomicU32 = AtomicU32::new(0);

/// Set while a helper thread runs (from just before it is started until
/// the kernel has reaped it).
static HELPER: AtomicBool = AtomicBool::new(false);

/// The helper's generation (a futex word): a helper runs while it holds
/// the value it started with; stopping it adds one and wakes it.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// The running helper's thread id (0 before it ran).
static HELPER_TID: AtomicU32 = AtomicU32::new(0);

/// Held while the helper is started or stopped (a spin lock: reset in a
/// forked child, never taken in a signal handler nor by the helper).
static CHANGING: AtomicBool = AtomicBool::new(false);

/// When the next checkpoint is due (monotonic ns; the helper keeps it
/// too, so that checkpoints go on when it stops), and whether the sample
/// handler found it due while there is no helper.
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

/// The first checkpoint is due this soon after start (ms) at the latest,
/// whatever the interval: a run killed a few seconds in (a batch job's
/// limit, a user's SIGKILL) keeps what it measured.
pub const FIRST_MS: u64 = 1000;

/// Sets checkpoints up (at load time, and in a forked child): the first
/// is due after one interval or [`FIRST_MS`], whichever is shorter; no
/// thread is started yet.
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

/// A measured thread of the program starts (the main thread at load
/// time or after fork, others in their start trampoline, before the
/// program's start routine): with a second one running, the helper
/// starts.
pub fn thread_started() {
    LIVE.fetch_add(1, SeqCst);
    settle();
}

/// A measured thread of the program ends (its exit, after its profile
/// was written): with one thread left, the helper stops, and this
/// returns once the kernel has reaped it (the ending thread's
/// `pthread_join` in the program returns after that).
pub fn thread_ended() {
    let _ = LIVE.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1));
    settle();
}

/// True if a helper should run now.
fn helper_wanted() -> bool {
    LIVE.load(SeqCst) >= 2
        && INTERVAL_MS.load(Relaxed) != 0
        && !STOP.load(SeqCst)
        && sys::getpid() == PID.load(Relaxed)
}

/// Starts or stops the helper until it runs exactly when wanted. A
/// thread that starts while another stops the helper may find it still
/// running and return; the stopping thread then sees the new count after
/// the helper is gone, and starts a new one.
fn settle() {
    if INTERVAL_MS.load(Relaxed) == 0 || helper_wanted() == HELPER.load(SeqCst) {
        return;
    }
    lock_changes();
    // A few rounds at most: a helper that cannot start is not retried
    // in a loop.
    for _ in 0..4 {
        let (wanted, running) = (helper_wanted(), HELPER.load(SeqCst));
        if wanted == running {
            break;
        }
        if wanted {
            start_helper();
        } else {
            stop_helper();
        }
    }
    CHANGING.store(false, Release);
}

/// Takes [`CHANGING`] (its holder may be waiting a few ms for a helper
/// to finish the checkpoint it is writing).
fn lock_changes() {
    let mut spins = 0u32;
    while CHANGING.swap(true, Acquire) {
        spins += 1;
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Starts a helper (under [`CHANGING`]).
fn start_helper() {
    let interval = Duration::from_millis(INTERVAL_MS.load(Relaxed));
    let pid = PID.load(Relaxed);
    let generation = GENERATION.load(SeqCst);
    HELPER_TID.store(0, SeqCst);
    HELPER.store(true, SeqCst);
    DUE.store(false, Relaxed);
    SPAWNING.with(|s| s.set(true));
    let spawned = crate::threads::guard::without_hooks(|| {
        spawn_helper(move || run(interval, pid, generation))
    });
    SPAWNING.with(|s| s.set(false));
    if let Err(errno) = spawned {
        HELPER.store(false, SeqCst);
        crate::threads::run::warn_once(&format!(
            "could not start the checkpoint thread (errno {errno}); checkpoints are written at the program's allocations"
        ));
    }
}

/// Stops the helper (under [`CHANGING`]) and waits until the kernel has
/// reaped it: at most [`STOP_WAIT_MS`] (it finishes the thread's
/// checkpoint it is writing first), then it is left to end on its own.
fn stop_helper() {
    GENERATION.fetch_add(1, SeqCst);
    sys::futex_wake_all(&GENERATION);
    let deadline = sys::monotonic_ns() + STOP_WAIT_MS * 1_000_000;
    let mut pause_us = 20;
    loop {
        // 0: not yet run (it will see the new generation at its start).
        let tid = HELPER_TID.load(SeqCst);
        let gone = tid != 0 && !sys::task_alive(tid);
        if gone || sys::monotonic_ns() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_micros(pause_us));
        pause_us = (pause_us * 2).min(2_000);
    }
    HELPER.store(false, SeqCst);
}

/// The longest a thread's exit waits for the helper to end (ms).
const STOP_WAIT_MS: u64 = 10_000;

fn spawn_helper(job: impl FnOnce() + Send + 'static) -> Result<(), i32> {
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
        Box::new(move || crate::threads::guard::without_hooks(job)),
    );
    sys::raw_sigmask(libc::SIG_SETMASK, Some(&old), None);
    spawned
}

/// Stops checkpointing (process exit, fatal signal): no checkpoint starts
/// after this, and the helper ends.
pub fn stop() {
    STOP.store(true, SeqCst);
    GENERATION.fetch_add(1, SeqCst);
    sys::futex_wake_all(&GENERATION);
}

/// In a forked child (its only thread, before it is measured): no
/// helper (the parent's is not here), and checkpoints of its own.
pub fn reset_after_fork() {
    CHANGING.store(false, Release);
    HELPER.store(false, SeqCst);
    HELPER_TID.store(0, SeqCst);
    LIVE.store(0, SeqCst);
    DUE.store(false, Relaxed);
    for counter in [&ROUNDS, &FILES, &BYTES, &CPU_NS] {
        counter.store(0, Relaxed);
    }
    if INTERVAL_MS.load(Relaxed) != 0 && !STOP.load(SeqCst) {
        start();
    }
}

/// The helper: checkpoints when due, and in between (every 50 ms) the
/// housekeeping of threads that never allocate; it returns when its
/// generation ends ([`stop_helper`], [`stop`]).
fn run(interval: Duration, pid: u32, generation: u32) {
    // First: the thread that stops the helper waits for this thread id
    // to leave the process.
    HELPER_TID.store(sys::gettid(), SeqCst);
    let current = || GENERATION.load(SeqCst) == generation && !STOP.load(SeqCst);
    let step_ns = (interval.as_nanos() as u64).min(50_000_000);
    let interval_ns = interval.as_nanos() as u64;
    loop {
        loop {
            if !current() {
                return;
            }
            let now = sys::monotonic_ns();
            let due = NEXT_DUE_NS.load(Relaxed);
            if now >= due {
                break;
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
            sys::futex_wait(&GENERATION, generation, step_ns.min(due - now));
        }
        if !current() || sys::getpid() != pid {
            return;
        }
        let Some(dir) = config::get().out_dir.as_deref() else {
            return;
        };
        // The next one is due an interval from now (a round that took
        // longer than the interval does not make the next ones pile up).
        NEXT_DUE_NS.store(sys::monotonic_ns() + interval_ns, Relaxed);
        let cpu = sys::thread_cpu_ns();
        for state in threads::all().filter(|s| s.pid == pid) {
            if !current() {
                return;
            }
            checkpoint(state, dir);
        }
        ROUNDS.fetch_add(1, Relaxed);
        CPU_NS.fetch_add(sys::thread_cpu_ns().saturating_sub(cpu), Relaxed);
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
    // Short of memory: the reserve is kept for the final profile.
    if sys::heap::short_of_memory() {
        crate::threads::sandbox::checkpoint_skipped();
        state.checkpointed.store(sig, Relaxed);
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
