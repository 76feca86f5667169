//! The sample signal handler.
//!
//! Rules (see docs/ARCHITECTURE.md): no allocation, no lock, errno
//! preserved, re-entry refused, every lost sample counted by cause. All the
//! memory it touches was mapped before sampling started: the thread's node
//! pool, its unwind cache, the published module snapshot and unwinder, the
//! object map.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::*;

use crate::attribute::{accessing_instruction, analyse, Analysis, Source};
use crate::blame::Rule;
use crate::cct::{self, Tree};
use crate::code::modules::{self, Snapshot};
use crate::code::unwind;
use crate::objects::Lookup;
use crate::soft::{self, Access, Regs};
use crate::stride::{self, Decoded};
use crate::threads::{self, ThreadState};
use crate::{handler_time, numa, objects, run, sys};

/// Deepest call path recorded per sample.
pub use crate::threads::MAX_FRAMES;

/// The common entry of every sampling signal handler: saves errno, ignores
/// late signals (after the profile was written) and counts re-entry as a
/// dropped sample; otherwise runs `work` on the thread's state and the
/// interrupted registers (RIP, RSP, RBP).
fn enter(context: *mut c_void, work: impl FnOnce(&ThreadState, (Regs, u64, u64))) {
    let saved_errno = sys::errno();
    if let Some(state) = threads::current() {
        if state.finished.load(Relaxed) || !run::active() {
            // Late signal after the profile was written: ignore.
        } else if state.in_handler.swap(true, Acquire) {
            // (Hardware and page-fault records stay in their ring for the
            // next signal.)
            state.stats.dropped[threads::DROP_REENTERED].fetch_add(1, Relaxed);
        } else {
            // SAFETY: the kernel passes a valid ucontext_t for SA_SIGINFO
            // handlers; it lives for the duration of the handler.
            let uc = unsafe { &*(context as *const libc::ucontext_t) };
            // The module snapshot and the unwinder it reads stay valid
            // until the section closes.
            let section = sys::reading();
            // (Single-threaded programs: a checkpoint due is noted here,
            // written by the program's next allocation.)
            crate::checkpoint::tick();
            // The work runs on the thread's handler stack: the kernel may
            // have put this frame on a small stack (the program's own
            // alternate stack), and the interrupted one may be tiny (a
            // coroutine's).
            let regs = registers(uc);
            let interrupted_sp = regs.1;
            let mut job = Some((work, regs));
            state.handler_stack.run_below(interrupted_sp, &mut || {
                if let Some((work, regs)) = job.take() {
                    work(state, regs);
                }
            });
            drop(section);
            state.in_handler.store(false, Release);
        }
    }
    sys::set_errno(saved_errno);
}

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
    if !from_kernel || !crate::signals::sigio_left_default() {
        INTERRUPTED_SP.with(|c| c.set(interrupted_sp(context)));
        crate::signals::forward(signal, &delivered, flush_on_own_stack);
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
fn program_signal(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) -> bool {
    // SAFETY: the kernel's handler arguments, valid while the handler runs
    // (and `delivered` does not outlive it).
    let delivered = unsafe { sys::Delivered::new(info, context) };
    if crate::signals::from_profiler(&delivered) {
        return false;
    }
    INTERRUPTED_SP.with(|c| c.set(interrupted_sp(context)));
    crate::signals::forward(signal, &delivered, flush_on_own_stack);
    true
}

/// The calling thread's watchpoint whose trap this signal is, if any.
fn watch_slot(info: *mut libc::siginfo_t, context: *mut c_void) -> Option<usize> {
    let state = threads::current()?;
    // SAFETY: the kernel's handler arguments, valid while the handler
    // runs (and `delivered` does not outlive it).
    let delivered = unsafe { sys::Delivered::new(info, context) };
    let (_, fd) = delivered.code_fd()?;
    state.watch.slot_of_fd(fd)
}

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
    let period = crate::config::get().period_ns.max(1);
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
    matches!(delivered.code_fd(), Some((code, _)) if code == crate::signals::POLL_HUP)
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
    if crate::config::get().period_ns < run::FREE_RUN_MIN_PERIOD_NS {
        // Short periods: one overflow at a time, always (at most one
        // signal pending, whatever this handler's time).
        if stopped && sys::limit_to_one_overflow(fd) {
            state.clock_limited.store(true, Relaxed);
        }
        return;
    }
    let slow = spent_ns.saturating_mul(SLOW_HANDLER_DIVISOR) > crate::config::get().period_ns;
    if slow && !state.clock_limited.load(Relaxed) {
        if sys::limit_to_one_overflow(fd) {
            state.clock_limited.store(true, Relaxed);
        }
    } else if stopped && !slow {
        sys::enable_event(fd);
    }
}

/// The handler of the page-fault event's signal: drains the thread's
/// ring and records each fault at its data address.
pub extern "C" fn on_page_fault(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if program_signal(signal, info, context) {
        return;
    }
    enter(context, page_faults);
}

fn page_faults(state: &ThreadState, ctx: (Regs, u64, u64)) {
    use crate::pmu::record::{self, Record, SampleLayout};
    let Some(ring) = state.fault_ring.get() else {
        return;
    };
    let layout = SampleLayout::new(sys::PAGE_FAULT_SAMPLE_TYPE);
    let dropped = &state.stats.dropped;
    let drained = ring.for_each_record(|header, body| match record::parse(header, body, &layout) {
        Ok(Record::Sample(s)) => fault(state, &ctx, s.ip, s.addr),
        Ok(Record::Lost { lost, .. }) => {
            dropped[threads::DROP_RING_LOST].fetch_add(lost, Relaxed);
        }
        Ok(_) => {}
        Err(_) => {
            dropped[threads::DROP_BAD_RECORD].fetch_add(1, Relaxed);
        }
    });
    let bad = drained.too_large + drained.corrupt;
    if bad > 0 {
        dropped[threads::DROP_BAD_RECORD].fetch_add(bad, Relaxed);
    }
    // A feedback loop (signals without new samples, or only faults of the
    // profiler itself) must not keep the program from running: after
    // `MAX_IDLE_FAULT_SIGNALS` such signals in a row, this thread's
    // page-fault sampling stops.
    if state.fault_progress.swap(false, Relaxed) {
        state.fault_idle.store(0, Relaxed);
    } else if state.fault_idle.fetch_add(1, Relaxed) + 1 >= MAX_IDLE_FAULT_SIGNALS {
        let fd = state.fault_fd.swap(-1, AcqRel);
        if fd >= 0 {
            sys::disable_event(fd);
            state.stats.fault_sampling_stopped.store(1, Relaxed);
        }
    }
}

/// See `page_faults`.
const MAX_IDLE_FAULT_SIGNALS: u32 = 1_000;

/// The module snapshot, for a sample of the program at `ip`; `None`
/// (counted) without a snapshot, or when `ip` is in this library: time
/// inside the profiler itself (allocation hooks unwinding, its tables
/// being touched) is overhead, not the program's.
fn program_snapshot(state: &ThreadState, ip: u64) -> Option<&'static Snapshot> {
    let dropped = &state.stats.dropped;
    let Some(snap) = modules::get() else {
        dropped[threads::DROP_UNWIND].fetch_add(1, Relaxed);
        return None;
    };
    if snap.is_own_code(ip) {
        dropped[threads::DROP_IN_PROFILER].fetch_add(1, Relaxed);
        return None;
    }
    Some(snap)
}

/// One sampled page fault of user code at `ip` on data address `addr`.
fn fault(state: &ThreadState, ctx: &(Regs, u64, u64), ip: u64, addr: u64) {
    let stats = &state.stats;
    stats.page_faults.fetch_add(1, Relaxed);
    // (A fault in the profiler's own code: its trees and tables being
    // touched.)
    let Some(snap) = program_snapshot(state, ip) else {
        return;
    };
    // A page that faults again and again (a program writing the control
    // page of its own perf ring: each of our signals makes it write again)
    // is a feedback loop, not first touches.
    let page = addr >> 12;
    if state.fault_last_page.swap(page, Relaxed) == page {
        if state.fault_same_page.fetch_add(1, Relaxed) + 1 >= MAX_IDLE_FAULT_SIGNALS {
            state.fault_idle.store(MAX_IDLE_FAULT_SIGNALS, Relaxed);
            return;
        }
    } else {
        state.fault_same_page.store(0, Relaxed);
    }
    state.fault_progress.store(true, Relaxed);
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    // The signal arrives as the faulting instruction is about to run again:
    // the interrupted context is the fault's, unless older records were
    // waiting in the ring (then only their IP is known).
    let path: &[u64] = if ip == ctx.0.rip {
        match call_path(state, snap, ctx, ip, frames) {
            Some(p) => p,
            None => return,
        }
    } else {
        stats.partial_unwinds.fetch_add(1, Relaxed);
        frames[0] = ip;
        frames[1] = PARTIAL_UNWIND;
        &frames[..2]
    };
    let Some(target) = classify(state, snap, addr, None) else {
        stats.dropped[threads::DROP_MAP_BUSY].fetch_add(1, Relaxed);
        return;
    };
    let first = crate::pages::first_touch(addr);
    let metrics = [
        (cct::M_PAGE_FAULTS, 1),
        (cct::M_FIRST_TOUCH, u64::from(first)),
    ];
    let metrics = if first { &metrics[..] } else { &metrics[..1] };
    record(state, path, metrics, Some(target), None, metrics, None);
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
    sys::enter_crash_mode();
    INTERRUPTED_SP.with(|c| c.set(interrupted_sp(context)));
    crate::guard::without_hooks(flush_on_own_stack);
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
    let mut flush = crate::exit::flush_all;
    match threads::current() {
        Some(state) => state.handler_stack.run_below(below, &mut flush),
        None => flush(),
    }
}

/// The interrupted general-purpose registers in iced-x86 order.
fn registers(uc: &libc::ucontext_t) -> (Regs, u64, u64) {
    let g = &uc.uc_mcontext.gregs;
    let r = |i: c_int| g[i as usize] as u64;
    let regs = Regs {
        gpr: [
            r(libc::REG_RAX),
            r(libc::REG_RCX),
            r(libc::REG_RDX),
            r(libc::REG_RBX),
            r(libc::REG_RSP),
            r(libc::REG_RBP),
            r(libc::REG_RSI),
            r(libc::REG_RDI),
            r(libc::REG_R8),
            r(libc::REG_R9),
            r(libc::REG_R10),
            r(libc::REG_R11),
            r(libc::REG_R12),
            r(libc::REG_R13),
            r(libc::REG_R14),
            r(libc::REG_R15),
        ],
        rip: r(libc::REG_RIP),
    };
    (regs, r(libc::REG_RSP), r(libc::REG_RBP))
}

/// The data object a sample touched: its tree root, node tag and key, and
/// the address range it occupies (heap blocks and static variables).
#[derive(Clone, Copy)]
pub struct Target {
    pub root: u32,
    pub tag: u32,
    pub key: u64,
    pub range: Option<(u64, u64)>,
}

impl Target {
    const fn of(root: u32, tag: u32, key: u64) -> Target {
        Target {
            root,
            tag,
            key,
            range: None,
        }
    }
}

/// The data object at `addr`; `None` if the object map stayed busy.
/// `frame`: for an address on this thread's stack, the start of the
/// function whose frame holds it (`call_path`), if found.
pub fn classify(
    state: &ThreadState,
    snap: &Snapshot,
    addr: u64,
    frame: Option<u64>,
) -> Option<Target> {
    if let Some(objs) = objects::get() {
        match objs.lookup(addr) {
            Lookup::Block { site, start, end } => {
                return Some(Target {
                    range: Some((start, end)),
                    ..Target::of(cct::HEAP, cct::TAG_HEAP_SITE, site as u64)
                })
            }
            Lookup::Busy => return None,
            Lookup::NotFound => {}
        }
    }
    if let Some((module, index, start, end)) = snap.static_at(addr) {
        return Some(Target {
            range: Some((start, end)),
            ..Target::of(
                cct::STATIC,
                cct::TAG_STATIC,
                (module as u64) << 32 | index as u64,
            )
        });
    }
    if state.stack.contains(addr) {
        return Some(match frame {
            Some(function) => Target::of(cct::UNKNOWN, cct::TAG_STACK_FRAME, function),
            None => Target::of(cct::UNKNOWN, cct::TAG_STACK, state.index as u64),
        });
    }
    // Another thread's stack: the frame that held the address when that
    // thread was last sampled (an OpenMP worker reading the shared
    // variables in the master's frame), else its whole stack.
    if let Some(owner) = threads::stack_owner(addr) {
        let frame = owner
            .frames_seen
            .owner(addr)
            .and_then(|f| program_function(snap, f));
        return Some(match frame {
            Some(function) => Target::of(cct::UNKNOWN, cct::TAG_STACK_FRAME, function),
            None => Target::of(cct::UNKNOWN, cct::TAG_STACK, owner.index as u64),
        });
    }
    if objects::in_small_heap(addr) {
        return Some(Target::of(cct::HEAP, cct::TAG_SMALL_HEAP, 0));
    }
    Some(Target::of(cct::UNKNOWN, cct::TAG_UNKNOWN, 0))
}

/// The interrupted call path, innermost first, with `leaf` as its first
/// frame and the library's own frames left out; `None` (counted) when the
/// module snapshot or unwinder is missing.
fn call_path<'a>(
    state: &ThreadState,
    snap: &Snapshot,
    ctx: &(Regs, u64, u64),
    leaf: u64,
    frames: &'a mut [u64; MAX_FRAMES],
) -> Option<&'a [u64]> {
    call_path_owning(state, snap, ctx, leaf, None, frames).map(|(path, _)| path)
}

/// [`call_path`], and for `data`, an address on this thread's stack, the
/// frame that holds it (`unwind::owning_frame`) as the start of its
/// function (the address in it when the module has no symbol there);
/// `None` when no unwound frame of the program holds it.
fn call_path_owning<'a>(
    state: &ThreadState,
    snap: &Snapshot,
    (regs, sp, bp): &(Regs, u64, u64),
    leaf: u64,
    data: Option<u64>,
    frames: &'a mut [u64; MAX_FRAMES],
) -> Option<(&'a [u64], Option<u64>)> {
    let Some(unwinder) = unwind::get() else {
        state.stats.dropped[threads::DROP_UNWIND].fetch_add(1, Relaxed);
        return None;
    };
    // SAFETY: the handler cache is used only by this thread's handler, and
    // `in_handler` excludes re-entry.
    let cache = unsafe { &mut *state.handler_cache.get() };
    // (The walk also publishes the frames' ranges, for other threads'
    // samples of this stack.)
    let got = unwind::owning_frame(
        unwinder,
        cache,
        &state.stack,
        (regs.rip, *sp, *bp),
        data,
        (frames, &state.frames_seen),
    );
    frames[0] = leaf;
    let owner = got.owner.and_then(|i| program_function(snap, frames[i]));
    // Callers inside this library (the thread trampoline) are left out.
    let mut depth = 1;
    for i in 1..got.len {
        if !snap.is_own_code(frames[i]) {
            frames[depth] = frames[i];
            depth += 1;
        }
    }
    if !got.complete {
        state.stats.partial_unwinds.fetch_add(1, Relaxed);
        // The path is kept below a `<partial unwind>` marker frame, so
        // that truncated paths do not pose as complete ones.
        if depth < MAX_FRAMES {
            frames[depth] = PARTIAL_UNWIND;
            depth += 1;
        }
    }
    Some((&frames[..depth], owner))
}

/// The start of the function at lookup address `frame` (the address
/// itself when its module has no symbol there), as a stack frame's
/// owner; `None` for this library's code (the thread trampoline's frame).
fn program_function(snap: &Snapshot, frame: u64) -> Option<u64> {
    (!snap.is_own_code(frame)).then(|| snap.function_start(frame).unwrap_or(frame))
}

/// Marker "frame" at the root end of a call path whose unwinding stopped
/// early (hpcprof-rs shows it as `<partial unwind>`).
pub const PARTIAL_UNWIND: u64 = formats::measurement::PARTIAL_UNWIND_ADDRESS;

/// Records one sample: `path` (innermost first) in the code tree with
/// `code_metrics`, and, when `target` is known, below that object in its
/// data tree with `data_metrics` (and into its offset histogram at
/// `addr`; and, with `site` = (accessing instruction, its decoder stride),
/// into the stride tables of that access site). Returns false (counted)
/// if the trees are full.
pub fn record(
    state: &ThreadState,
    path: &[u64],
    code_metrics: &[(usize, u64)],
    target: Option<Target>,
    addr: Option<u64>,
    data_metrics: &[(usize, u64)],
    site: Option<(u64, Decoded)>,
) -> bool {
    let stats = &state.stats;
    let tree: &Tree = &state.tree;
    // Room for both paths and the object node, so that a sample is either
    // in every tree or in none.
    if tree.len() + 2 * path.len() + 2 > run::tree_capacity() {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    }
    let Some((&leaf, callers)) = path.split_first() else {
        return false;
    };
    // SAFETY: the path cache is used only by this thread's handlers, which
    // block each other's signals (no re-entry).
    let paths = unsafe { &mut *state.handler_paths.get() };
    // The callers' nodes usually come from the previous sample (a loop);
    // then only the leaf is looked up in each tree.
    let code_leaf = paths
        .code_parent(tree, callers)
        .and_then(|parent| tree.child(parent, cct::TAG_CALL, leaf));
    let Some(code_leaf) = code_leaf else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    };
    let Some(target) = target else {
        for &(m, v) in code_metrics {
            tree.add(code_leaf, m, v);
        }
        return true;
    };
    let Some(object) = tree.child(target.root, target.tag, target.key) else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    };
    let data_leaf = paths
        .data_parent(tree, object, callers)
        .and_then(|parent| tree.child(parent, cct::TAG_CALL, leaf));
    let Some(data_leaf) = data_leaf else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    };
    for &(m, v) in code_metrics {
        tree.add(code_leaf, m, v);
    }
    for &(m, v) in data_metrics {
        tree.add(data_leaf, m, v);
    }
    if let (Some((start, end)), Some(addr)) = (target.range, addr) {
        if let Some(bucket) = run::histogram_layout().bucket(addr.wrapping_sub(start), end - start)
        {
            if !state.histogram.add(object, bucket) {
                stats.histogram_full.fetch_add(1, Relaxed);
            }
        }
    }
    if let (Some(addr), Some((ip, stride))) = (addr, site) {
        let delta = state.ips.delta(ip, object, addr);
        if !state.sites.note(object, ip, stride, delta) {
            stats.sites_full.fetch_add(1, Relaxed);
        }
    }
    true
}

/// The instruction at `ip`, decoded from its loaded module, with that
/// module's code bytes and their start address.
fn instruction_at(snap: &Snapshot, ip: u64) -> Option<(iced_x86::Instruction, &'static [u8], u64)> {
    let (seg_start, seg_end) = snap.exec_segment(ip)?;
    // SAFETY: as in `analyse`: a loaded segment of the current snapshot.
    let code = unsafe { sys::loaded_bytes(&[(seg_start, seg_end, true)], seg_start, seg_end)? };
    let insn = soft::decode_at(code, seg_start, ip)?;
    Some((insn, code, seg_start))
}

/// The decoder stride of the memory access at `ip` (computed once per
/// instruction and thread, see `patterns::IpTable`).
fn site_stride(state: &ThreadState, snap: &Snapshot, ip: u64, regs: Option<&Regs>) -> Decoded {
    state.ips.stride(ip, || match instruction_at(snap, ip) {
        Some((insn, code, start)) => stride::static_stride(code, start, &insn, regs),
        None => Decoded::Unknown,
    })
}

/// Everything the handler does for one sample, given the interrupted
/// registers (and RSP, RBP): skid correction, data address, unwind, object
/// lookup, tree insertion. The sample stands for `weight` periods (more
/// than 1 when a CPU-time timer's tick was coarser than the period): its
/// tree metrics count that many times; the offset histogram and the
/// access sites, distributions, count it once.
#[doc(hidden)]
pub fn sample(state: &ThreadState, ctx: (Regs, u64, u64), weight: u64) {
    let stats = &state.stats;
    stats.samples.fetch_add(1, Relaxed);
    let regs = &ctx.0;
    let Some(snap) = program_snapshot(state, regs.rip) else {
        return;
    };
    let Analysis {
        leaf,
        access,
        source,
        rule,
    } = if run::code_only() {
        Analysis {
            leaf: regs.rip,
            access: Access::NotMemory,
            source: Source::Previous,
            rule: Rule::Other,
        }
    } else {
        analyse(state, snap, regs, stats.samples.load(Relaxed))
    };
    stats.attribution[rule as usize].fetch_add(1, Relaxed);
    // A base-only address names the object, not the element: no offset,
    // stride or alignment is recorded from it.
    let exact = source != Source::BaseOnly;
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    // An access to this thread's stack: the unwind also finds the frame
    // that holds it.
    let on_stack = match access {
        Access::Address { addr, .. } if state.stack.contains(addr) => Some(addr),
        _ => None,
    };
    let Some((path, frame)) = call_path_owning(state, snap, &ctx, leaf, on_stack, frames) else {
        return;
    };

    let (target, addr) = match access {
        Access::NotMemory => (None, None),
        Access::Unrecoverable => (
            Some(Target::of(cct::UNKNOWN, cct::TAG_NOT_RECOVERED, 0)),
            None,
        ),
        Access::Address { addr, .. } => match classify(state, snap, addr, frame) {
            Some(o) => (Some(o), Some(addr)),
            None => {
                stats.dropped[threads::DROP_MAP_BUSY].fetch_add(1, Relaxed);
                return;
            }
        },
    };
    // An access whose address was lost counts as a load (the usual case: a
    // pointer-chasing load that overwrote its own address register).
    let metric = match access {
        Access::Address { kind, .. } if !kind.loads() => cct::M_STORE_SAMPLES,
        _ => cct::M_SAMPLES,
    };
    // Data-tree metrics: the access, its width, whether it spans two
    // cache lines, its NUMA placement; the code tree gets the same plus
    // the CPU sample.
    // The rule that decided it (mem:soft), in both trees: per code line
    // and per object, how its samples were attributed.
    let by_rule = (cct::M_RULE_FIRST + rule as usize, weight);
    let mut data = [(metric, weight), by_rule, (0, 0), (0, 0), (0, 0)];
    let mut n = if run::code_only() { 1 } else { 2 };
    if let Access::Address { addr, size, .. } = access {
        if size > 0 {
            data[n] = (cct::M_ACCESS_BYTES, u64::from(size) * weight);
            n += 1;
        }
        if exact && stride::misaligned(addr, size) {
            data[n] = (cct::M_MISALIGNED, weight);
            n += 1;
        }
    }
    if let Some(addr) = addr {
        if let Some(local) = numa::is_local(addr) {
            let column = if local {
                cct::M_NUMA_LOCAL
            } else {
                cct::M_NUMA_REMOTE
            };
            data[n] = (column, weight);
            n += 1;
        }
    }
    let data = &data[..n];
    let mut code = [
        (cct::M_CPU_SAMPLES, weight),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
    ];
    let code_metrics = if target.is_some() {
        code[1..=n].copy_from_slice(data);
        &code[..=n]
    } else if run::code_only() {
        &code[..1]
    } else {
        code[1] = by_rule;
        &code[..2]
    };
    // The access site: the instruction whose address was computed (its
    // loop gives the decoder stride). An address taken from the next
    // instruction (`Source::AtIp`) means the sampled load overwrote its
    // own address register: a pointer chase, data-dependent.
    let exact_addr = addr.filter(|_| exact);
    let site = exact_addr.map(|_| {
        let stride = match source {
            Source::AtIp => Decoded::DataDependent,
            _ => site_stride(state, snap, leaf, Some(regs)),
        };
        (leaf, stride)
    });
    if !record(state, path, code_metrics, target, exact_addr, data, site) || target.is_none() {
        return;
    }
    if let (Access::Address { addr, size, kind }, Some(t), true) = (access, target, exact) {
        arm_watches(state, &t, addr, size, kind.stores(), leaf);
    }
    if metric == cct::M_STORE_SAMPLES {
        stats.stores.fetch_add(1, Relaxed);
        return;
    }
    stats.memory.fetch_add(1, Relaxed);
    if addr.is_some() {
        stats.recovered.fetch_add(1, Relaxed);
        match source {
            Source::Previous => stats.recovered_previous.fetch_add(1, Relaxed),
            Source::AtIp => stats.recovered_at_ip.fetch_add(1, Relaxed),
            Source::BaseOnly => stats.recovered_base_only.fetch_add(1, Relaxed),
        };
    }
}

// ---------------------------------------------------------------------------
// Watchpoints (`watch.rs`): arming them after a sample, and their traps.

/// After a sample of `ip` that accessed `size` bytes at `addr` in heap or
/// static object `target` (`store`: the access wrote): arms the sharing
/// watchpoints of other threads and this thread's reuse watchpoint, each
/// every N-th sample as configured. Stack and unknown data are never
/// watched (the handler itself reads the stack).
fn arm_watches(state: &ThreadState, target: &Target, addr: u64, size: u32, store: bool, ip: u64) {
    use crate::watch::{self, Arm, Armed};
    let (sharing, reuse) = (watch::sharing_every(), watch::reuse_every());
    let Some((start, _)) = target.range else {
        return;
    };
    if sharing == 0 && reuse == 0 {
        return;
    }
    let n = state.stats.samples.load(Relaxed);
    let (word, len) = watch::watched_range(addr, size);
    let line = addr & !(watch::LINE - 1);
    let what = Armed {
        line,
        from_thread: state.index,
        from_ip: ip,
        root: target.root,
        tag: target.tag,
        key: target.key,
        start,
        armed_ns: 0,
    };
    let armed = &state.stats.watch_armed;
    if sharing > 0 && n % u64::from(sharing) == 0 {
        let round = state.watch.next_round();
        let others = watch::other_words(line, word & !7, round);
        let count = threads::all().count();
        let first = (round as usize) % count.max(1);
        let mut targets = 0;
        for other in threads::all().skip(first).chain(threads::all().take(first)) {
            if std::ptr::eq(other, state)
                || other.pid != state.pid
                || other.finished.load(Relaxed)
                || !other.watch.is_open(watch::EXACT_SLOT)
            {
                continue;
            }
            // A load conflicts with a write only; a store with any access.
            if other.watch.arm(watch::EXACT_SLOT, word, len, store, &what) != Arm::Skipped {
                armed.fetch_add(1, Relaxed);
            }
            for (j, &w) in others.iter().enumerate() {
                if other
                    .watch
                    .arm(watch::EXACT_SLOT + 1 + j, w, 8, store, &what)
                    != Arm::Skipped
                {
                    armed.fetch_add(1, Relaxed);
                }
            }
            targets += 1;
            if targets >= watch::MAX_SHARING_TARGETS {
                break;
            }
        }
    }
    if reuse > 0 && n % u64::from(reuse) == 0 && state.watch.is_open(watch::REUSE_SLOT) {
        let what = Armed {
            armed_ns: sys::thread_cpu_ns(),
            ..what
        };
        match state.watch.arm(watch::REUSE_SLOT, word, len, true, &what) {
            Arm::Skipped => {}
            Arm::Armed => {
                armed.fetch_add(1, Relaxed);
            }
            Arm::Replaced(old) => {
                armed.fetch_add(1, Relaxed);
                note_reuse(state, &old, watch::REUSE_NOT_REUSED);
            }
        }
    }
}

/// Counts one reuse outcome (bucket) of a watched word of `what`'s object.
fn note_reuse(state: &ThreadState, what: &crate::watch::Armed, bucket: u32) {
    let node = state.tree.child(what.root, what.tag, what.key);
    if !node.is_some_and(|node| state.reuse.add(node, bucket)) {
        state.stats.watch_full.fetch_add(1, Relaxed);
    }
}

/// A trap of watchpoint `slot` of this thread: the watched word (or its
/// line) was touched. Reuse: the thread CPU time since the watch was
/// armed. Sharing: a true or false sharing event, recorded under the
/// object with this access's call path, and in the thread's sharing table
/// with the other thread's sampled instruction.
fn watch_trap(state: &ThreadState, ctx: (Regs, u64, u64), slot: usize) {
    use crate::watch::{self, SharingRow};
    let stats = &state.stats;
    let Some(what) = state.watch.take(slot) else {
        stats.watch_stale.fetch_add(1, Relaxed);
        return;
    };
    stats.watch_traps.fetch_add(1, Relaxed);
    if slot == watch::REUSE_SLOT {
        let ns = sys::thread_cpu_ns().saturating_sub(what.armed_ns);
        note_reuse(state, &what, watch::reuse_bucket(ns));
        return;
    }
    let regs = &ctx.0;
    let Some(snap) = modules::get().filter(|s| !s.is_own_code(regs.rip)) else {
        return;
    };
    // A data watchpoint traps after the access: the accessing instruction
    // is the one before the interrupted IP.
    let leaf = accessing_instruction(snap, regs.rip).unwrap_or(regs.rip);
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    let Some(path) = call_path(state, snap, &ctx, leaf, frames) else {
        return;
    };
    let exact = slot == watch::EXACT_SLOT;
    let metric = if exact {
        cct::M_TRUE_SHARING
    } else {
        cct::M_FALSE_SHARING
    };
    let target = Target::of(what.root, what.tag, what.key);
    let metrics = [(metric, 1)];
    if !record(state, path, &metrics, Some(target), None, &metrics, None) {
        return;
    }
    let Some(node) = state.tree.child(what.root, what.tag, what.key) else {
        return;
    };
    let row = SharingRow {
        node,
        exact,
        other_thread: what.from_thread,
        line_offset: what.line.wrapping_sub(what.start) as i64,
        ip: leaf,
        other_ip: what.from_ip,
        count: 0,
    };
    if !state.sharing.note(&row) {
        stats.watch_full.fetch_add(1, Relaxed);
    }
}

// ---------------------------------------------------------------------------
// Hardware sample sources (`pmu/`): mem:latency and mem:stores. Kept in one
// block, apart from the mem:soft path above.

/// The signal handler of the hardware memory events: each signal means new
/// records in the thread's perf ring (one wakeup per sample); every usable
/// sample goes to [`hardware_sample`].
pub extern "C" fn on_hw_sample(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if program_signal(signal, info, context) {
        return;
    }
    let Some(setup) = crate::pmu::sampler::get() else {
        return;
    };
    enter(context, |state, interrupted| {
        crate::pmu::sampler::drain(&state.hw, setup, |s| {
            let t0 = handler_time::start();
            hardware_sample(state, &interrupted, s.ip, s.addr, s.weight, &s.access);
            t0.end(&state.stats.handler_time);
        });
    });
}

/// The hardware sample sources: attributes one PEBS/IBS sample of
/// instruction `ip` accessing data address `addr` like a mem:soft sample
/// (call path, data object, both trees, histogram, NUMA; a load counts in
/// `samples`, a store in `store_samples`), plus its latency (`weight`, in
/// cycles) and where the data came from (one `src_*` column, `tlb_miss`).
///
/// The call path is unwound from the interrupted registers, with `ip` as
/// its leaf: the signal arrives right after the sample (one wakeup per
/// sample), normally still in the sampled function.
pub fn hardware_sample(
    state: &ThreadState,
    interrupted: &(Regs, u64, u64),
    ip: u64,
    addr: u64,
    weight: u64,
    access: &crate::pmu::datasrc::Access,
) {
    use crate::pmu::datasrc::MemLevel;
    let (level, is_store, tlb_miss) = (access.level, access.is_store, access.tlb_miss);
    let stats = &state.stats;
    stats.samples.fetch_add(1, Relaxed);
    let Some(snap) = program_snapshot(state, ip) else {
        return;
    };
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    let on_stack = state.stack.contains(addr).then_some(addr);
    let Some((path, frame)) = call_path_owning(state, snap, interrupted, ip, on_stack, frames)
    else {
        return;
    };
    let Some(target) = classify(state, snap, addr, frame) else {
        stats.dropped[threads::DROP_MAP_BUSY].fetch_add(1, Relaxed);
        return;
    };
    let metric = if is_store {
        cct::M_STORE_SAMPLES
    } else {
        cct::M_SAMPLES
    };
    let source = match level {
        MemLevel::L1 => cct::M_SRC_L1,
        MemLevel::FillBuffer => cct::M_SRC_LFB,
        MemLevel::L2 => cct::M_SRC_L2,
        MemLevel::L3 => cct::M_SRC_L3,
        MemLevel::LocalDram => cct::M_SRC_LOCAL_DRAM,
        MemLevel::RemoteDram => cct::M_SRC_REMOTE_DRAM,
        MemLevel::RemoteCache => cct::M_SRC_REMOTE_CACHE,
        MemLevel::Hitm => cct::M_SRC_HITM,
        _ => cct::M_SRC_OTHER,
    };
    let tlb = (cct::M_TLB_MISS, u64::from(tlb_miss));
    let mut metrics = [
        (metric, 1),
        (cct::M_LATENCY, weight),
        (source, 1),
        tlb,
        (0, 0),
        (0, 0),
    ];
    if let Some(local) = numa::is_local(addr) {
        let m = if local {
            cct::M_NUMA_LOCAL
        } else {
            cct::M_NUMA_REMOTE
        };
        metrics[4] = (m, 1);
    }
    // The records carry no access size: the instruction at the sample's
    // IP (exact for IBS and precise PEBS) gives it when it decodes to an
    // explicit memory operand.
    let size = instruction_at(snap, ip)
        .filter(|(insn, ..)| soft::has_memory_operand(insn))
        .map(|(insn, ..)| insn.memory_size().size() as u32);
    if size.is_some_and(|s| stride::misaligned(addr, s)) {
        metrics[5] = (cct::M_MISALIGNED, 1);
    }
    // Deltas of the sampled addresses per site; the decoder stride too
    // (constant steps only: the interrupted registers are not the
    // sample's).
    let site = Some((ip, site_stride(state, snap, ip, None)));
    if !record(
        state,
        path,
        &metrics,
        Some(target),
        Some(addr),
        &metrics,
        site,
    ) {
        return;
    }
    arm_watches(state, &target, addr, size.unwrap_or(8), is_store, ip);
    if is_store {
        stats.stores.fetch_add(1, Relaxed);
    } else {
        stats.memory.fetch_add(1, Relaxed);
    }
    // The hardware gives the address: always "recovered".
    stats.recovered.fetch_add(1, Relaxed);
}
