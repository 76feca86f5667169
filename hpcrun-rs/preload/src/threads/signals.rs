//! The profiler's signals stay the profiler's, and the program keeps its own.
//!
//! The sample signal (`SIGRTMIN+4`, or `--signal N`) and the page-fault
//! signal (the next one) are real-time signals that programs, MPI
//! libraries and runtimes may use too. This module interposes the calls
//! through which a program would take them over:
//!
//! * `sigaction` and `signal` on a profiler signal do not touch the kernel:
//!   the program's action is remembered (and reported back by later
//!   calls), the profiler's handler stays installed;
//! * the handler tells the two kinds of signal apart by their origin: a
//!   perf event's overflow signal has `si_code` `POLL_IN`..`POLL_HUP` and
//!   `si_fd` naming a number the profiler gave one of its perf events
//!   ([`sys::was_perf_fd`]; still signalling after the program closed
//!   the descriptor, see `sys::perf`),
//!   a CPU-time timer's signal has `si_code` `SI_TIMER` and the profiler's
//!   cookie as its value ([`sys::TIMER_COOKIE`]);
//!   everything else (`raise`, `kill`, `sigqueue`, the program's timers, its
//!   own `F_SETSIG` fds) is the program's and goes to [`forward`], which
//!   runs the program's action (handler with its mask and flags, ignore, or
//!   the default action: terminate, after the profiles are written);
//! * `sigprocmask` and `pthread_sigmask` never block a profiler signal in
//!   the kernel (sampling would stop silently): the request is remembered
//!   per thread (and reported back in the old mask), counted, and the
//!   program's own signals of that number are held back while the program
//!   thinks it blocked them: the handler queues the signal again
//!   (`rt_tgsigqueueinfo`, same `siginfo`) and returns with it blocked, so
//!   that it stays pending for `sigwait`, `signalfd` or the unblocking
//!   call, as the program expects;
//! * `sigwait`, `sigwaitinfo` and `sigtimedwait` never hand a perf signal
//!   to the program (it is dropped and the wait goes on);
//! * a handler of the program's that runs on its alternate signal stack
//!   (`SA_ONSTACK`) gets the profiler's signals in its `sa_mask`
//!   ([`onstack_action`]; queries report the program's own mask,
//!   [`reported_action`]): a sample signal arriving while it runs waits
//!   until it returns, rather than put a second signal frame on that
//!   stack, which the program sized for its own handler alone (a frame
//!   that does not fit is a SIGSEGV from the kernel).
//!
//! A mask the program's signals inherit past these calls (across `exec`,
//! from `posix_spawn`'s or a thread's attribute, from the parent) is
//! taken the same way at the start of each process and thread
//! ([`adopt_inherited_mask`]), and the program-blocked signals are
//! blocked in the kernel just before `exec` ([`block_for_exec`]), so that
//! the new image starts with the mask it would have natively.
//!
//! Not interposed: the raw `rt_sigaction`/`rt_sigprocmask` system calls
//! (the writer detects a replaced handler and a thread left without
//! samples, and says so), and `signalfd` reads (a profiler signal can only
//! be pending there while a program signal of the same number is held
//! back).

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::*};

use crate::sys;

/// The profiler's signals: [sample, page fault, SIGIO]; 0 = not taken
/// over. SIGIO ([`SIGIO_SLOT`]) is borrowed only to count the samples the
/// kernel could not queue (it sends SIGIO instead): its action, its
/// queries and its default (terminate) stay the program's; it is not
/// kept out of the program's masks (the first two are).
static OURS: [AtomicI32; 3] = [AtomicI32::new(0), AtomicI32::new(0), AtomicI32::new(0)];

/// Slot of SIGIO in `OURS`.
pub const SIGIO_SLOT: usize = 2;

/// The profiler's sample signals (`OURS[..SAMPLE_SLOTS]`).
const SAMPLE_SLOTS: usize = 2;

/// The address installed for each signal of `OURS` (`sys::install_handler`).
static HANDLERS: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// The address the profiler installed in the kernel for its `slot`-th
/// signal ([`take_over`]; the entry that runs its handler).
pub fn handler_at(slot: usize) -> usize {
    HANDLERS.get(slot).map_or(0, |h| h.load(Relaxed))
}

/// The action the program asked for, per profiler signal (the kernel
/// has the profiler's handler). Writers block the profiler's signals on
/// their thread ([`ours_blocked`]).
static PROGRAM: sys::ProgramActions<3> = sys::ProgramActions::new();

const MASK_WORDS: usize = std::mem::size_of::<libc::sigset_t>() / 8;

/// Process-wide counts, written into the main thread's profile.
pub static BLOCKS: AtomicU64 = AtomicU64::new(0);
pub static FORWARDED: AtomicU64 = AtomicU64::new(0);
pub static HELD_BACK: AtomicU64 = AtomicU64::new(0);
pub static WAIT_DROPPED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Profiler signals this thread's program code asked to block (bit 0:
    /// sample signal, bit 1: page-fault signal).
    static BLOCKED: Cell<u8> = const { Cell::new(0) };
}

/// `si_code` of an `F_SETSIG` signal: `POLL_IN` (1) to `POLL_HUP` (6).
pub(crate) const POLL_IN: c_int = 1;
pub(crate) const POLL_HUP: c_int = 6;

/// Index of a profiler signal in `OURS`.
fn slot(signal: c_int) -> Option<usize> {
    if signal <= 0 {
        return None;
    }
    OURS.iter().position(|s| s.load(Relaxed) == signal)
}

/// The profiler signal taken over at `slot`, if any.
pub fn signal_at(slot: usize) -> Option<c_int> {
    OURS.get(slot).map(|s| s.load(Relaxed)).filter(|&s| s > 0)
}

/// True if the signal described by `info` came from one of the
/// profiler's perf events or CPU-time timers.
pub fn from_profiler(signal: &sys::Delivered) -> bool {
    if signal.timer_overrun().is_some() {
        return true;
    }
    let Some((code, fd)) = signal.code_fd() else {
        return false;
    };
    // A number the profiler ever gave one of its events: its live event,
    // one the program closed but that still signals (its ring mapping
    // holds it), or a late signal of a closed one whose number the
    // program reused; never forwarded to the program as its own.
    (POLL_IN..=POLL_HUP).contains(&code) && sys::was_perf_fd(fd)
}

/// True if a raw `rt_sigaction` system call replaced the profiler's
/// handler of one of its sample signals: the program now gets the
/// profiler's signals (one `sigaction` query per signal; not for a
/// signal handler's hot path).
pub fn handler_taken() -> bool {
    (0..SAMPLE_SLOTS).any(|slot| {
        signal_at(slot).is_some_and(|signal| {
            sys::real_sigaction_query(signal)
                .is_some_and(|now| now.sa_sigaction != handler_at(slot))
        })
    })
}

/// Set once sampling was withdrawn because [`handler_taken`]: no thread
/// starts its sample sources any more.
pub static WITHDRAWN: AtomicBool = AtomicBool::new(false);

/// Installs `handler` for `signal` (the profiler's) and remembers the
/// action the program inherited as the program's own.
pub fn take_over(
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
    block: &[c_int],
) -> bool {
    let Some(free) = OURS[..SAMPLE_SLOTS]
        .iter()
        .position(|s| s.load(Relaxed) == 0)
    else {
        return false;
    };
    take_over_at(free, signal, handler, block)
}

/// Borrows SIGIO for `handler` ([`SIGIO_SLOT`]): installed in the kernel,
/// while the program's `sigaction`/`signal` see and set the program's own
/// action (the inherited one at first), which [`forward`] runs for every
/// SIGIO that is not a lost sample's.
pub fn take_over_sigio(handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)) -> bool {
    take_over_at(SIGIO_SLOT, libc::SIGIO, handler, &[])
}

/// The program's action for SIGIO is its default or ignore (not a
/// handler of its own).
pub fn sigio_left_default() -> bool {
    matches!(
        PROGRAM.load(SIGIO_SLOT).sa_sigaction,
        libc::SIG_DFL | libc::SIG_IGN
    )
}

fn take_over_at(
    free: usize,
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
    block: &[c_int],
) -> bool {
    if let Some(old) = sys::real_sigaction_query(signal) {
        PROGRAM.write(&ours_blocked()).store_action(free, &old);
    }
    let Some(installed) = sys::install_handler(signal, handler, block) else {
        return false;
    };
    HANDLERS[free].store(installed, Relaxed);
    OURS[free].store(signal, Release);
    true
}

/// The profiler's signals, for a writer of `PROGRAM` to block: no
/// handler of its thread can then find a half-written action (and spin
/// on it forever).
fn ours_blocked() -> libc::sigset_t {
    let mut ours = sys::empty_sigset();
    for s in OURS.iter().map(|s| s.load(Relaxed)).filter(|&s| s > 0) {
        sys::sigset_add(&mut ours, s);
    }
    ours
}

/// `sigaction` on a profiler signal: remembers `new`, reports the
/// previous program action in `old`. `None` if `signal` is not one of
/// the profiler's (the caller passes the call on).
pub fn program_sigaction(
    signal: c_int,
    new: Option<&libc::sigaction>,
    old: Option<&mut libc::sigaction>,
) -> Option<()> {
    let slot = slot(signal)?;
    let writer = PROGRAM.write(&ours_blocked());
    if let Some(old) = old {
        *old = writer.load(slot);
    }
    if let Some(new) = new {
        writer.store_action(slot, new);
    }
    drop(writer);
    Some(())
}

/// `signal()` on a profiler signal (BSD semantics, as glibc's): returns
/// the previous handler; `None` if not the profiler's.
pub fn program_signal(signal: c_int, handler: usize) -> Option<usize> {
    let slot = slot(signal)?;
    let mut mask = [0u64; MASK_WORDS];
    let bit = (signal - 1) as usize;
    mask[bit / 64] |= 1 << (bit % 64);
    let new = sys::make_sigaction(handler, libc::SA_RESTART, &mask);
    let writer = PROGRAM.write(&ours_blocked());
    let old = writer.load(slot).sa_sigaction;
    writer.store_action(slot, &new);
    drop(writer);
    Some(old)
}

/// Runs the program's action for a signal of a profiler signal number that
/// did not come from the profiler (called from the profiler's handler, with
/// the kernel's `info` and `context`).
pub fn forward(signal: c_int, delivered: &sys::Delivered, flush: fn()) {
    let Some(slot) = slot(signal) else {
        return;
    };
    if BLOCKED.with(|b| b.get()) & (1 << slot) != 0 {
        // The program blocked it: keep it pending, blocked, as it asked.
        HELD_BACK.fetch_add(1, Relaxed);
        delivered.requeue_blocked(signal);
        return;
    }
    FORWARDED.fetch_add(1, Relaxed);
    let act = PROGRAM.load(slot);
    match act.sa_sigaction {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // A real-time signal's default action ends the process: write
            // the profiles first, then let it happen.
            let saved = sys::errno();
            sys::enter_crash_mode(signal);
            crate::threads::guard::without_hooks(flush);
            sys::die_by_default(signal);
            sys::set_errno(saved);
        }
        _ => {
            if act.sa_flags & libc::SA_RESETHAND != 0 {
                PROGRAM.reset_handler_if_free(slot);
            }
            delivered.call_program_handler(signal, &act);
        }
    }
}

/// The part of a program's signal mask request that reaches the kernel:
/// the profiler's signals are taken out of `set` (and remembered as this
/// thread's program-blocked signals). Returns the previous program-blocked
/// bits, for [`restore_blocked`] and [`report_old_mask`].
pub fn filter_mask(how: c_int, set: Option<&mut libc::sigset_t>) -> u8 {
    let before = BLOCKED.with(|b| b.get());
    let Some(set) = set else {
        return before;
    };
    let mut bits = before;
    for (i, s) in OURS[..SAMPLE_SLOTS].iter().enumerate() {
        let signal = s.load(Relaxed);
        if signal <= 0 || !sys::sigset_has(set, signal) {
            if how == libc::SIG_SETMASK {
                bits &= !(1 << i);
            }
            continue;
        }
        match how {
            libc::SIG_BLOCK | libc::SIG_SETMASK => {
                if bits & (1 << i) == 0 {
                    BLOCKS.fetch_add(1, Relaxed);
                }
                bits |= 1 << i;
                sys::sigset_del(set, signal);
            }
            libc::SIG_UNBLOCK => bits &= !(1 << i),
            _ => {}
        }
    }
    BLOCKED.with(|b| b.set(bits));
    before
}

/// Undoes [`filter_mask`] after the real call failed.
pub fn restore_blocked(before: u8) {
    BLOCKED.with(|b| b.set(before));
}

/// The old mask as the program expects it: the profiler's signals appear
/// blocked exactly when the program had blocked them.
pub fn report_old_mask(before: u8, old: &mut libc::sigset_t) {
    for (i, s) in OURS[..SAMPLE_SLOTS].iter().enumerate() {
        let signal = s.load(Relaxed);
        if signal <= 0 {
            continue;
        }
        if before & (1 << i) != 0 {
            sys::sigset_add(old, signal);
        } else {
            sys::sigset_del(old, signal);
        }
    }
}

/// This thread's program-blocked bits (inherited by threads it creates).
pub fn blocked_bits() -> u8 {
    BLOCKED.with(|b| b.get())
}

/// The profiler's sample signals in `set`, as program-blocked bits.
pub fn bits_in(set: &libc::sigset_t) -> u8 {
    let mut bits = 0;
    for (i, s) in OURS[..SAMPLE_SLOTS].iter().enumerate() {
        let signal = s.load(Relaxed);
        if signal > 0 && sys::sigset_has(set, signal) {
            bits |= 1 << i;
        }
    }
    bits
}

/// The profiler's sample signals of the slots in `bits`, as a set.
fn set_of(bits: u8) -> libc::sigset_t {
    let mut set = sys::empty_sigset();
    for (i, s) in OURS[..SAMPLE_SLOTS].iter().enumerate() {
        let signal = s.load(Relaxed);
        if signal > 0 && bits & (1 << i) != 0 {
            sys::sigset_add(&mut set, signal);
        }
    }
    set
}

/// At the start of a process (once the handlers are installed) or of a
/// thread: the profiler's sample signals that the kernel mask holds
/// blocked (a mask inherited across `exec`, set by `posix_spawn`'s
/// attribute or a thread attribute, or left by a parent that blocked
/// every signal) become this thread's program-blocked signals, with
/// `bits` (the creator's, or the thread attribute's), and are unblocked
/// in the kernel: the program sees the mask it would have natively,
/// its own signals of those numbers are held back, and sampling works.
pub fn adopt_inherited_mask(bits: u8) {
    let found = bits_in(&sys::kernel_mask());
    for i in 0..SAMPLE_SLOTS {
        if found & (1 << i) != 0 {
            BLOCKS.fetch_add(1, Relaxed);
        }
    }
    // Recorded before the unblock: a program signal pending there is
    // held back by the handler, not run.
    BLOCKED.with(|b| b.set(bits | found));
    if found != 0 {
        sys::raw_sigmask(libc::SIG_UNBLOCK, Some(&set_of(found)), None);
    }
}

/// Just before `exec`: the profiler's signals this thread's program code
/// blocked are blocked in the kernel, so that the new image inherits them
/// blocked, as natively (its library records them again,
/// [`adopt_inherited_mask`]). Returns those it blocked there, for
/// [`after_failed_exec`].
pub fn block_for_exec() -> libc::sigset_t {
    let bits = BLOCKED.with(|b| b.get());
    let mut before = sys::empty_sigset();
    sys::raw_sigmask(libc::SIG_BLOCK, Some(&set_of(bits)), Some(&mut before));
    // (A held-back program signal may have left one blocked already: it
    // stays so.)
    set_of(bits & !bits_in(&before))
}

/// The `exec` failed: the signals [`block_for_exec`] blocked are unblocked
/// again, and sampling goes on.
pub fn after_failed_exec(blocked: &libc::sigset_t) {
    sys::raw_sigmask(libc::SIG_UNBLOCK, Some(blocked), None);
}

/// True if `set` holds a profiler signal.
pub fn holds_ours(set: &libc::sigset_t) -> bool {
    OURS[..SAMPLE_SLOTS]
        .iter()
        .map(|s| s.load(Relaxed))
        .any(|s| s > 0 && sys::sigset_has(set, s))
}

/// After a program's `sigwait` took one of the profiler's signal numbers:
/// a held-back signal leaves the profiler's signals blocked in the kernel;
/// unblock them again (another held-back one is queued again at once).
pub fn after_wait() {
    let mut set = sys::empty_sigset();
    for s in OURS[..SAMPLE_SLOTS]
        .iter()
        .map(|s| s.load(Relaxed))
        .filter(|&s| s > 0)
    {
        sys::sigset_add(&mut set, s);
    }
    sys::raw_sigmask(libc::SIG_UNBLOCK, Some(&set), None);
}

/// For each signal, the sample slots whose signal the profiler added to
/// the `sa_mask` of the program's `SA_ONSTACK` handler ([`onstack_action`]).
static ADDED_TO_MASK: [std::sync::atomic::AtomicU8; 65] =
    [const { std::sync::atomic::AtomicU8::new(0) }; 65];

/// The sample slots added to the mask of `signal`'s current action (the
/// program's, as the kernel holds it), for [`reported_action`].
pub fn added_to_mask(signal: c_int) -> u8 {
    usize::try_from(signal)
        .ok()
        .and_then(|s| ADDED_TO_MASK.get(s))
        .map_or(0, |a| a.load(Relaxed))
}

/// Records `added` ([`onstack_action`]'s) as the slots in the mask of
/// `signal`'s action, once the kernel took it.
pub fn set_added_to_mask(signal: c_int, added: u8) {
    if let Some(a) = usize::try_from(signal)
        .ok()
        .and_then(|s| ADDED_TO_MASK.get(s))
    {
        a.store(added, Relaxed);
    }
}

/// The action to give the kernel for the program's `sigaction(signal,
/// new)` on a signal other than the profiler's: `new` with the profiler's
/// sample signals added to its mask when its handler runs on the
/// alternate stack, and the slots added (for [`set_added_to_mask`]);
/// `None`: `new` as it is.
pub fn onstack_action(new: &libc::sigaction) -> (Option<libc::sigaction>, u8) {
    let handler = new.sa_sigaction;
    if new.sa_flags & libc::SA_ONSTACK == 0 || handler == libc::SIG_DFL || handler == libc::SIG_IGN
    {
        return (None, 0);
    }
    let mut act = *new;
    let mut added = 0u8;
    for i in 0..SAMPLE_SLOTS {
        if let Some(ours) = signal_at(i) {
            if !sys::sigset_has(&act.sa_mask, ours) {
                sys::sigset_add(&mut act.sa_mask, ours);
                added |= 1 << i;
            }
        }
    }
    ((added != 0).then_some(act), added)
}

/// The program's view of an action the kernel reports: the sample
/// signals of the slots in `added` ([`added_to_mask`]) taken out of its
/// mask.
pub fn reported_action(added: u8, act: &mut libc::sigaction) {
    for i in 0..SAMPLE_SLOTS {
        if added & (1 << i) != 0 {
            if let Some(ours) = signal_at(i) {
                sys::sigset_del(&mut act.sa_mask, ours);
            }
        }
    }
}
