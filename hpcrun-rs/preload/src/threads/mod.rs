//! The run and its threads: the state every step reads and writes. The
//! configuration ([`config`]) and the run's process-wide flags and columns
//! ([`run`]); each thread's state (this module: [`ThreadState`], created by
//! the `pthread_create` hook, filled by the sample handler, read by the
//! writer); where each thread was created ([`creators`]); its sample
//! timers and perf events ([`sampling`]); the profiler's signals
//! ([`signals`]); the hooks' re-entry guard ([`guard`]).
//!
//! Hands to the next step: a thread's state, whose trees and tables the
//! handler ([`crate::sample`]) fills and the writer ([`crate::output`])
//! turns into a file.
//!
//! Per-thread measurement state and the registry of all threads.
//!
//! A thread's state is created when it starts (the main thread at load time,
//! others in the `pthread_create` trampoline), reached from the signal
//! handler through a thread-local pointer, and finished (sampling stopped,
//! file written) at thread exit or process exit. States are never freed: a
//! late signal can never see a dangling pointer.
//!
//! A state is two parts: the thread's identity ([`ThreadState`]: ids,
//! stack, whether it finished, its file; about 200 bytes, kept for good)
//! and its body ([`ThreadBody`]: the tables, the unwinder caches, the
//! counters; a few MiB reserved, reached through `Deref`). When a thread
//! ends after writing its own profile, its body goes on a free list
//! ([`recycle`]) and the next thread to start takes it over, emptied
//! (only the pages its tables touched are given back: `sys::discard`),
//! with its registry slot: a program that creates and joins threads in a
//! loop maps, faults in and allocates nothing per thread, and holds as
//! many bodies as it ever had threads at once. Readers of another
//! thread's state (checkpoints, the exit writer) take its `writing` lock
//! and see it finished before its body can be handed on.

mod build;
pub mod config;
pub mod creators;
pub mod guard;
pub mod lazy;
pub mod run;
pub mod sampling;
pub mod sandbox;
pub mod signals;

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use crate::cct;
use crate::code::unwind;
use crate::sys::{self, StackBounds};

/// Causes of dropped samples (index into `Stats::dropped`).
pub const DROP_CAUSES: [&str; 10] = [
    "tree full",
    "handler re-entered",
    "object map busy",
    "in profiler code",
    "unwind failed",
    "lost in the perf ring",
    "unreadable perf record",
    "signal queue full",
    "descriptor closed by the program",
    "counted by the kernel, never read",
];
pub const DROP_TREE_FULL: usize = 0;
pub const DROP_REENTERED: usize = 1;
pub const DROP_MAP_BUSY: usize = 2;
pub const DROP_IN_PROFILER: usize = 3;
pub const DROP_UNWIND: usize = 4;
pub const DROP_RING_LOST: usize = 5;
pub const DROP_BAD_RECORD: usize = 6;
/// The kernel could not queue a sample signal (the per-user limit of
/// pending real-time signals) and sent SIGIO instead.
pub const DROP_QUEUE_FULL: usize = 7;
/// The program closed the thread's task-clock event's descriptor
/// (`close_range`, `closefrom`): the periods of user time after the
/// samples it had (`ThreadState::missing_periods`).
pub const DROP_FD_CLOSED: usize = 8;
/// Page-fault samples the kernel made (its event's count over the
/// period, read when sampling stopped: `Stats::fault_samples_made`) that
/// the handler never read nor was told were lost: lost in a full ring
/// with no later record to carry the kernel's "lost" record, or left in
/// the ring by a thread that ended with the signal blocked or pending.
/// Set when the final profile is written.
pub const DROP_NEVER_READ: usize = 9;

/// Sample counters of one thread.
/// The most periods one CPU-time timer signal stood for, process-wide
/// (1 + its overrun; 0 before any): the tick's length in periods.
pub static LARGEST_TIMER_WEIGHT: AtomicU64 = AtomicU64::new(0);

#[derive(Default)]
pub struct Stats {
    pub samples: AtomicU64,
    /// Periods the CPU-time timer's samples stood for beyond one each
    /// (the sum of their overruns).
    pub timer_overruns: AtomicU64,
    /// CPU time counted by the thread's task-clock event when sampling
    /// stopped (ns; timer sources only).
    pub cpu_time_ns: AtomicU64,
    /// Its user-mode part (ns; 0 if unknown): the event excludes the
    /// kernel, so only this time can earn samples (`notices`).
    pub user_time_ns: AtomicU64,
    /// True once `user_time_ns` was read (with tick-based accounting a
    /// short thread's user time may be 0).
    pub user_time_read: AtomicBool,
    /// The thread's user-mode CPU time when its timer started (ns): only
    /// the time after it can earn samples (with a CPU-time timer, a tick
    /// of a thread's start-up may fall before its timer exists).
    pub user_time_at_start_ns: AtomicU64,
    /// Periods of user time the CPU-time timer's signals stood for so far
    /// (`handler::timer_weight`), sampled or dropped.
    pub timer_periods: AtomicU64,
    /// Load samples (the primary metric).
    pub memory: AtomicU64,
    /// Store-only samples.
    pub stores: AtomicU64,
    pub recovered: AtomicU64,
    pub recovered_previous: AtomicU64,
    pub recovered_at_ip: AtomicU64,
    /// Load samples whose index register was lost: the object is named by
    /// the intact base register (no offset).
    pub recovered_base_only: AtomicU64,
    /// Samples at a memory access while the thread's page faults took a
    /// large share of its time: attributed to that access
    /// (`attribute::about_to_fault`).
    pub about_to_fault: AtomicU64,
    /// Load samples shared with another load of the loop in flight with
    /// the blamed one, and given to it (`in_flight`).
    pub shared_in_flight: AtomicU64,
    /// Samples by the `mem:soft` rule that attributed them
    /// (`blame::Rule`, in its order).
    pub attribution: [AtomicU64; crate::access::blame::Rule::COUNT],
    pub dropped: [AtomicU64; DROP_CAUSES.len()],
    /// The thread's perf event descriptors that the program closed
    /// (found when sampling stopped: `sys::owns_event`); bit 0: the
    /// task-clock event, bit 1: the page-fault event.
    pub fds_closed: AtomicU32,
    /// Samples whose call path could not be unwound to its root.
    pub partial_unwinds: AtomicU64,
    /// Page-fault samples handled.
    pub page_faults: AtomicU64,
    /// Page-fault samples the kernel made: the event's count divided by
    /// its period, read when the thread's sampling stopped (0 before, or
    /// when the event was no longer the profiler's). See
    /// `DROP_NEVER_READ`.
    pub fault_samples_made: AtomicU64,
    /// Allocation-hook calls of this thread, those timed and their time
    /// (`hooks::timed`; only this thread writes them). A checkpoint
    /// rewrites the file when the calls changed.
    pub hook_calls: AtomicU64,
    pub hook_timed: AtomicU64,
    pub hook_timed_ns: AtomicU64,
    /// Of the timed calls, those of `SLOW_HOOK_NS` or more, and their time.
    pub hook_slow: AtomicU64,
    pub hook_slow_ns: AtomicU64,
    /// 1 if page-fault sampling was stopped (feedback loop).
    pub fault_sampling_stopped: AtomicU64,
    /// Histogram increments lost because the table was full (the sample
    /// itself is kept).
    pub histogram_full: AtomicU64,
    /// Stride observations lost because the site table was full.
    pub sites_full: AtomicU64,
    /// Watchpoints armed (sharing in other threads, reuse in this one)
    /// by this thread's samples.
    pub watch_armed: AtomicU64,
    /// Watchpoint traps of this thread handled.
    pub watch_traps: AtomicU64,
    /// Traps that found their watchpoint being re-armed (not counted).
    pub watch_stale: AtomicU64,
    /// Sharing events or reuse outcomes lost because their table was full.
    pub watch_full: AtomicU64,
    /// The handler's time per sample.
    pub handler_time: crate::access::handler_time::Histogram,
}

// SAFETY: atomic counters only (`handler_time` too): all-zero bytes are
// the same value as `default()`.
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Stats {}

impl Stats {
    /// Back to zero, for the next thread (its body was handed on). Every
    /// field is named: a new one must be reset here too.
    pub fn reset(&self) {
        let Stats {
            samples,
            timer_overruns,
            cpu_time_ns,
            user_time_ns,
            user_time_read,
            user_time_at_start_ns,
            timer_periods,
            memory,
            stores,
            recovered,
            recovered_previous,
            recovered_at_ip,
            recovered_base_only,
            about_to_fault,
            shared_in_flight,
            attribution,
            dropped,
            fds_closed,
            partial_unwinds,
            page_faults,
            fault_samples_made,
            hook_calls,
            hook_timed,
            hook_timed_ns,
            hook_slow,
            hook_slow_ns,
            fault_sampling_stopped,
            histogram_full,
            sites_full,
            watch_armed,
            watch_traps,
            watch_stale,
            watch_full,
            handler_time,
        } = self;
        for c in [
            samples,
            timer_overruns,
            cpu_time_ns,
            user_time_ns,
            user_time_at_start_ns,
            timer_periods,
            memory,
            stores,
            recovered,
            recovered_previous,
            recovered_at_ip,
            recovered_base_only,
            about_to_fault,
            shared_in_flight,
            partial_unwinds,
            page_faults,
            fault_samples_made,
            hook_calls,
            hook_timed,
            hook_timed_ns,
            hook_slow,
            hook_slow_ns,
            fault_sampling_stopped,
            histogram_full,
            sites_full,
            watch_armed,
            watch_traps,
            watch_stale,
            watch_full,
        ]
        .into_iter()
        .chain(attribution)
        .chain(dropped)
        {
            c.store(0, Relaxed);
        }
        user_time_read.store(false, Relaxed);
        fds_closed.store(0, Relaxed);
        handler_time.reset();
    }
}

impl ThreadState {
    /// Sample periods of this thread's user time since its timer started
    /// that no sample stands for (0 if it got all it should have), less
    /// one signal's worth of periods of slack (a CPU-time timer's tick may
    /// fall where its signal cannot be taken). Read after sampling stopped.
    pub fn missing_periods(&self, period_ns: u64) -> u64 {
        let s = &self.stats;
        if period_ns == 0 {
            return 0;
        }
        // The event excludes kernel time: the user time says how many
        // samples the thread should have had (its whole CPU time if the
        // user time could not be read), counted from its timer's start.
        let cpu = if s.user_time_read.load(Relaxed) {
            let user = s.user_time_ns.load(Relaxed);
            user.saturating_sub(s.user_time_at_start_ns.load(Relaxed))
        } else {
            s.cpu_time_ns.load(Relaxed)
        };
        let expected =
            (cpu / period_ns).saturating_sub(LARGEST_TIMER_WEIGHT.load(Relaxed).saturating_sub(1));
        expected.saturating_sub(self.got_periods())
    }

    /// Periods the thread's samples stood for (a CPU-time timer's sample
    /// may stand for several).
    pub fn got_periods(&self) -> u64 {
        self.stats.samples.load(Relaxed) + self.stats.timer_overruns.load(Relaxed)
    }
}

/// Deepest call path recorded per sample (the handler's frame buffer).
pub const MAX_FRAMES: usize = 128;

/// Slots of a thread's histogram table ((object, bucket) pairs) with the
/// full tree capacity.
pub const HISTOGRAM_SLOTS: usize = 1 << 16;

/// Slots of a thread's histogram table for trees of `tree_capacity`
/// nodes (smaller under an address-space limit, `run::tree_capacity`):
/// [`HISTOGRAM_SLOTS`] in proportion, at least 4,096.
pub fn histogram_slots(tree_capacity: usize) -> usize {
    let share = HISTOGRAM_SLOTS as u64 * tree_capacity as u64 / run::TREE_CAPACITY as u64;
    (share.min(HISTOGRAM_SLOTS as u64) as usize).max(1 << 12)
}

/// Slots of a thread's reuse table ((object, bucket) pairs).
pub const REUSE_SLOTS: usize = 4096;

/// Size of the per-thread cache of "instruction before this IP".
pub const DECODE_CACHE: usize = 4096;

/// A thread's identity, kept for good; its body ([`ThreadBody`], the
/// tables and counters) is reached through `Deref` and may go to another
/// thread once this one has finished and written its profile.
pub struct ThreadState {
    pub pid: u32,
    pub tid: u32,
    pub index: u32,
    pub stack: StackBounds,
    /// The profiler's own stack for this thread's handlers (and its
    /// alternate signal stack unless the program installs one).
    pub handler_stack: sys::HandlerStack,
    pub start_ns: u64,
    /// Set once the profile is written; the handler then ignores samples.
    pub finished: AtomicBool,
    /// Held while this thread's file is written (checkpoint or final).
    pub writing: std::sync::Mutex<()>,
    /// The file name this thread's profile claimed (at its first write).
    pub file: std::sync::OnceLock<String>,
    /// What the last checkpoint saw (`checkpoint::signature`).
    pub checkpointed: AtomicU64,
    /// The OpenMP parallel region this thread is running (a pointer to
    /// its record, 0: none), set and cleared by the region's trampoline
    /// (`hooks::openmp`) and read by the handler.
    pub omp_region: AtomicU64,
    /// Set once this thread ran a region another thread entered: an
    /// OpenMP pool worker, whose time between regions is its own.
    pub omp_worker: AtomicBool,
    body: &'static ThreadBody,
}

impl std::ops::Deref for ThreadState {
    type Target = ThreadBody;

    fn deref(&self) -> &ThreadBody {
        self.body
    }
}

/// A thread's tables, caches and counters: reserved once, handed from an
/// ended thread to the next ([`recycle`]).
#[repr(C)]
pub struct ThreadBody {
    pub tree: cct::Tree,
    /// Offset histograms of the data objects: (object node, bucket) -> count.
    pub histogram: cct::Counts,
    /// Decoder strides and last sampled address per instruction.
    pub ips: crate::access::patterns::IpTable,
    /// Stride observations per access site (object node, instruction).
    pub sites: crate::access::patterns::SiteTable,
    /// This thread's watchpoints (`-e sharing`, `-e reuse`).
    pub watch: crate::access::watch::Watches,
    /// Sharing events of this thread's accesses (its watchpoint traps).
    pub sharing: crate::access::watch::SharingTable,
    /// Reuse outcomes of its watched words: (object node, bucket) -> count.
    pub reuse: cct::Counts,
    pub stats: Stats,
    /// (ip, previous instruction start) pairs, direct-mapped by ip.
    pub decode_cache: &'static [AtomicU64],
    pub perf_fd: AtomicI32,
    /// The thread's CPU-time timer (`cpu-timer`), a kernel timer id; -1:
    /// none (the task-clock event or a hardware event samples instead).
    pub cpu_timer: AtomicI32,
    /// True while the task-clock event is limited to its next overflow
    /// (armed by a slow handler; that overflow's signal clears it).
    pub clock_limited: AtomicBool,
    /// The page-fault event (`page-faults`), and its ring.
    pub fault_fd: AtomicI32,
    pub fault_ring: std::sync::OnceLock<crate::pmu::ring::Ring>,
    /// Set by the handler when a fault of the program was recorded.
    pub fault_progress: AtomicBool,
    /// Page-fault signals in a row that recorded none.
    pub fault_idle: AtomicU32,
    /// The page of the last fault, and how many faults in a row hit it.
    pub fault_last_page: AtomicU64,
    pub fault_same_page: AtomicU32,
    /// The thread's faults and CPU time at its last reading, and its
    /// recent candidate pages (`attribute::about_to_fault`).
    pub fault_watch: crate::access::pages::FaultWatch,
    /// Last allocation record of this thread (index + 1, 0: none); records
    /// chain backwards through `Record::previous` (`--alloc-log` only).
    pub last_record: AtomicU64,
    /// Set while the signal handler runs (re-entry guard).
    pub in_handler: AtomicBool,
    /// Set once a handler ran a sample's work (the tables may hold
    /// something: they are emptied before the body goes to another thread).
    pub touched: AtomicBool,
    /// The hardware memory event's ring and counts (mem:latency, mem:stores).
    pub hw: crate::pmu::sampler::ThreadHw,
    /// The registry slot of the body's current thread, and the process
    /// whose registry that is (a forked child starts its own).
    slot: AtomicU32,
    slot_pid: AtomicU32,
    /// The next body on the free list.
    next_free: std::sync::atomic::AtomicPtr<ThreadBody>,
    // (Laid out in this order, `repr(C)`: the fields above and the two
    // cache slots below are written when the body is built and fit its
    // first page; the 9 KiB after them are valid when zero, and their
    // pages are touched only by a thread that samples or tracks blocks:
    // `build`.)
    /// Unwind cache used only by the signal handler, built at its first
    /// sample ([`ThreadState::handler_cache`]).
    handler_cache: sys::Prepared<unwind::Cache>,
    /// Unwind cache used only by the allocation hooks (never by the handler,
    /// so a signal during a hook cannot alias it), built at their first
    /// unwind ([`ThreadState::hook_cache`]).
    hook_cache: sys::Prepared<unwind::Cache>,
    /// The handler's frame buffer (not on the signal stack: no 1 KiB
    /// zeroing per sample).
    pub handler_frames: UnsafeCell<[u64; MAX_FRAMES]>,
    /// The frames of this thread's stack at its latest sample, for other
    /// threads' samples of addresses on it.
    pub frames_seen: unwind::FrameRanges,
    /// The tree nodes of the previous sample's callers (handler only).
    pub handler_paths: UnsafeCell<cct::PathCache>,
    /// Sites of small blocks by their first frames, used only by the
    /// allocation hooks (`objects::small_sites`).
    pub small_sites: UnsafeCell<crate::objects::small_sites::SiteCache>,
}

// SAFETY: the UnsafeCell caches are only used by the owning thread (see the
// field docs); everything else is atomic or immutable.
#[allow(unsafe_code)]
unsafe impl Sync for ThreadBody {}

thread_local! {
    static CURRENT: Cell<Option<&'static ThreadState>> = const { Cell::new(None) };
}

/// The calling thread's state, if it has one (safe in a signal handler:
/// const-initialised TLS without destructor).
pub fn current() -> Option<&'static ThreadState> {
    CURRENT.with(|c| c.get())
}

/// Every thread state created in this process (slots are published once
/// and never freed).
struct Registry {
    slots: &'static [sys::Published<ThreadState>],
    count: AtomicU32,
}

const MAX_THREADS: usize = 1 << 16;

static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| Registry {
        slots: sys::map_zeroed::<sys::Published<ThreadState>>(MAX_THREADS).unwrap_or(&[]),
        count: AtomicU32::new(0),
    })
}

/// All registered states.
pub fn all() -> impl Iterator<Item = &'static ThreadState> {
    let reg = registry();
    let n = (reg.count.load(Acquire) as usize).min(reg.slots.len());
    reg.slots[..n].iter().filter_map(|s| s.get())
}

static NEXT_INDEX: AtomicU32 = AtomicU32::new(0);

/// Reserves the next thread index (called by the creating thread, so that
/// indices follow creation order).
pub fn next_index() -> u32 {
    NEXT_INDEX.fetch_add(1, Relaxed)
}

/// Creates, registers and makes current a state for the calling thread:
/// an ended thread's body if one is free ([`recycle`]), else a new one.
/// Runs on the thread's handler stack (`sys::HandlerStack`), not on the
/// thread's own, which may be small (16 KiB) or a coroutine's.
pub fn start_current(index: u32, tree_capacity: usize) -> Option<&'static ThreadState> {
    // (On the thread's own stack, before the handler stack takes over.)
    let here = sys::stack_address();
    let handler_stack = sys::HandlerStack::for_current_thread().unwrap_or_default();
    let mut state = None;
    handler_stack.run(&mut || {
        let body = match FREE.pop() {
            Some(body) => {
                body.empty();
                Some(body)
            }
            None => build_body(index, tree_capacity),
        };
        state = body.and_then(|body| register(index, handler_stack, body, here));
    });
    state
}

/// The bytes of one thread's tables (page-rounded), as the last thread
/// set up asked for: the next thread maps them at once
/// (`sys::with_region`).
static TABLE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The region of the first thread set up, before any thread said what
/// its tables take: a guess above the main thread's (about 16 MiB with
/// the default tree capacity; under an address-space limit twice the
/// estimate for its smaller capacity, `run::thread_table_bytes`), whose
/// unused rest is unmapped at once. Address space only: pages are taken
/// as tables touch them.
const FIRST_TABLE_BYTES: usize = 32 << 20;

fn build_body(index: u32, tree_capacity: usize) -> Option<&'static ThreadBody> {
    let bytes = match TABLE_BYTES.load(Relaxed) {
        0 => {
            let guess = 2 * run::thread_table_bytes(tree_capacity);
            FIRST_TABLE_BYTES.min(usize::try_from(guess).unwrap_or(FIRST_TABLE_BYTES))
        }
        known => known,
    };
    let (body, asked) = sys::with_region(bytes, || build::body(index, tree_capacity));
    TABLE_BYTES.store(asked, Relaxed);
    body
}

/// Gives `body` to the calling thread: a new identity in the body's
/// registry slot (or a new slot), made current. `here`: an address on the
/// thread's own stack.
fn register(
    index: u32,
    handler_stack: sys::HandlerStack,
    body: &'static ThreadBody,
    here: u64,
) -> Option<&'static ThreadState> {
    let pid = sys::getpid();
    let state = ThreadState {
        pid,
        tid: sys::gettid(),
        index,
        stack: StackBounds::current(here).unwrap_or_default(),
        handler_stack,
        start_ns: sys::now_unix_ns(),
        finished: AtomicBool::new(false),
        writing: std::sync::Mutex::new(()),
        file: std::sync::OnceLock::new(),
        checkpointed: AtomicU64::new(0),
        omp_region: AtomicU64::new(0),
        omp_worker: AtomicBool::new(false),
        body,
    };
    let reg = registry();
    let known = body.slot.load(Relaxed);
    let slot = if body.slot_pid.load(Relaxed) == pid && (known as usize) < reg.slots.len() {
        known as usize
    } else {
        reg.count.fetch_add(1, AcqRel) as usize
    };
    let state: &'static ThreadState = match reg.slots.get(slot) {
        Some(s) => {
            body.slot.store(slot as u32, Relaxed);
            body.slot_pid.store(pid, Relaxed);
            s.publish_leaked(state)
        }
        None => {
            body.slot_pid.store(0, Relaxed);
            Box::leak(Box::new(state))
        }
    };
    CURRENT.with(|c| c.set(Some(state)));
    sys::set_handler_flag(Some(&state.in_handler));
    Some(state)
}

impl ThreadBody {
    /// True if nothing but this thread's own code holds on to the body
    /// once its thread has ended: no page-fault ring, hardware ring or
    /// watchpoint is left open (those belong to the ended thread's
    /// events; such bodies are kept as they are).
    fn recyclable(&self) -> bool {
        self.fault_ring.get().is_none()
            && self.hw.ring.get().is_none()
            && self.perf_fd.load(Relaxed) < 0
            && self.fault_fd.load(Relaxed) < 0
            && self.hw.leader_fd.load(Relaxed) < 0
            && self.cpu_timer.load(Relaxed) < 0
            && (0..crate::access::watch::SLOTS).all(|i| !self.watch.is_open(i))
    }

    /// Empties the body for the calling thread (it took it from the free
    /// list; no other thread uses it): counters to zero, tables emptied if
    /// the ended thread's handler touched them, caches of its callers
    /// forgotten. The unwinder caches stay: they hold unwind rules of the
    /// process's code, valid for any thread.
    fn empty(&self) {
        if self.touched.swap(false, Relaxed) {
            self.tree.reset();
            self.histogram.reset();
            self.reuse.reset();
            self.ips.reset();
            self.sites.reset();
            self.sharing.reset();
            sys::discard(self.decode_cache);
        }
        // Chunks the ended thread asked for but did not get.
        self.tree.grow_if_wanted();
        let recycled_cpu = self.stats.cpu_time_ns.load(Relaxed);
        RECYCLED_CPU_NS.fetch_add(recycled_cpu, Relaxed);
        self.stats.reset();
        self.hw.reset();
        self.clock_limited.store(false, Relaxed);
        self.fault_progress.store(false, Relaxed);
        self.fault_idle.store(0, Relaxed);
        self.fault_last_page.store(0, Relaxed);
        self.fault_same_page.store(0, Relaxed);
        self.fault_watch.clear();
        self.last_record.store(0, Relaxed);
        self.in_handler.store(false, Relaxed);
        self.frames_seen.clear();
        // SAFETY: the handler's caches are used by the owning thread only,
        // and this thread owns the body now with no sampling started yet.
        #[allow(unsafe_code)]
        unsafe {
            *self.handler_paths.get() = cct::PathCache::default();
        }
    }
}

/// CPU time (ns) of threads whose bodies went to other threads: their
/// registry slot now shows the next thread (`notices` adds it back).
static RECYCLED_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// The CPU time of ended threads whose state was handed on (see
/// [`RECYCLED_CPU_NS`]).
pub fn recycled_cpu_ns() -> u64 {
    RECYCLED_CPU_NS.load(Relaxed)
}

/// Bodies of ended threads, for the next threads: a list under a spin
/// lock (never taken in a signal handler; reset in a forked child).
struct FreeList {
    lock: AtomicBool,
    head: std::sync::atomic::AtomicPtr<ThreadBody>,
}

static FREE: FreeList = FreeList {
    lock: AtomicBool::new(false),
    head: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
};

impl FreeList {
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        while self.lock.swap(true, Acquire) {
            std::thread::yield_now();
        }
        let r = f();
        self.lock.store(false, Release);
        r
    }

    fn push(&self, body: &'static ThreadBody) {
        self.locked(|| {
            body.next_free.store(self.head.load(Relaxed), Relaxed);
            self.head
                .store(body as *const ThreadBody as *mut ThreadBody, Relaxed);
        })
    }

    fn pop(&self) -> Option<&'static ThreadBody> {
        if self.head.load(Relaxed).is_null() {
            return None;
        }
        self.locked(|| {
            let p = self.head.load(Relaxed);
            // SAFETY: the list holds only leaked bodies (`push`).
            #[allow(unsafe_code)]
            let body: &'static ThreadBody = unsafe { p.as_ref() }?;
            self.head.store(body.next_free.load(Relaxed), Relaxed);
            Some(body)
        })
    }
}

/// At the end of the calling thread, after it finished and wrote its own
/// profile (`writer::finish` on this thread, under its `writing` lock: a
/// checkpoint or the exit writer that comes later sees it finished and
/// leaves its body alone): the body goes to the next thread that starts.
/// Bodies with events of their own left open are kept as they are.
/// Call it only when this thread's own `writer::finish` call finished it
/// (not the exit writer of another thread, which may still be writing).
pub fn recycle(state: &'static ThreadState) {
    if !state.finished.load(Acquire)
        || state.pid != sys::getpid()
        || sys::in_crash_mode()
        || !state.body.recyclable()
    {
        return;
    }
    // A checkpoint that took the lock before the thread finished is done
    // once the lock is free (`writer::finish` waited for it too).
    drop(state.writing.lock().unwrap_or_else(|e| e.into_inner()));
    FREE.push(state.body);
}

static EXIT_KEY: std::sync::OnceLock<libc::pthread_key_t> = std::sync::OnceLock::new();

/// Sets the pthread key whose destructor writes a thread's profile (at
/// load time, by the lifecycle).
pub fn set_exit_key(key: libc::pthread_key_t) {
    let _ = EXIT_KEY.set(key);
}

/// Arranges for the calling thread's profile to be written when it exits
/// (the exit key's destructor).
pub fn arm_exit() {
    if let Some(&key) = EXIT_KEY.get() {
        sys::arm_thread_exit(key);
    }
}

/// Forgets the calling thread's state (after it is finished).
pub fn clear_current() {
    CURRENT.with(|c| c.set(None));
    sys::set_handler_flag(None);
}

/// After fork in the child: states of the parent's threads are dropped
/// from the registry (they belong to the parent's files).
pub fn reset_after_fork() {
    // Each value is written only when it differs: a page the child only
    // reads stays shared with the parent (no copy-on-write fault in a
    // child that execs at once).
    let reg = registry();
    if reg.count.load(Relaxed) != 0 {
        reg.count.store(0, Release);
    }
    if NEXT_INDEX.load(Relaxed) != 0 {
        NEXT_INDEX.store(0, Relaxed);
    }
    // The free bodies may have been mid-list in another thread at the
    // fork: the child starts a list of its own.
    if !FREE.head.load(Relaxed).is_null() {
        FREE.head.store(std::ptr::null_mut(), Relaxed);
    }
    sys::release_after_fork(&FREE.lock);
    if RECYCLED_CPU_NS.load(Relaxed) != 0 {
        RECYCLED_CPU_NS.store(0, Relaxed);
    }
    clear_current();
}

/// The thread whose stack contains `addr`, for stack objects.
pub fn stack_owner(addr: u64) -> Option<&'static ThreadState> {
    let reg = registry();
    let n = (reg.count.load(Acquire) as usize).min(reg.slots.len());
    reg.slots[..n].iter().find_map(|s| {
        let st = s.get()?;
        (!st.finished.load(Relaxed) && st.stack.contains(addr)).then_some(st)
    })
}

/// Cached previous-instruction lookup.
pub fn cached_previous(state: &ThreadState, ip: u64) -> Option<u64> {
    let slot = (ip as usize ^ (ip as usize >> 12)) % DECODE_CACHE * 2;
    (state.decode_cache[slot].load(Relaxed) == ip)
        .then(|| state.decode_cache[slot + 1].load(Relaxed))
}

/// Forgets the cached previous instruction of `ip` (benchmarks: a sample
/// at a new IP).
#[doc(hidden)]
pub fn forget_previous(state: &ThreadState, ip: u64) {
    let slot = (ip as usize ^ (ip as usize >> 12)) % DECODE_CACHE * 2;
    if state.decode_cache[slot].load(Relaxed) == ip {
        state.decode_cache[slot].store(0, Relaxed);
    }
}

pub fn cache_previous(state: &ThreadState, ip: u64, prev: u64) {
    let slot = (ip as usize ^ (ip as usize >> 12)) % DECODE_CACHE * 2;
    state.decode_cache[slot].store(0, Relaxed);
    state.decode_cache[slot + 1].store(prev, Relaxed);
    state.decode_cache[slot].store(ip, Relaxed);
}
