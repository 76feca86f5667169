//! A signal sent to both hpcrun-rs and the program reaches the program
//! once.
//!
//! The launcher forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to
//! the program (`hpcrun-rs/src/signals.rs`). A `kill` of the whole process
//! group, or a batch system that signals every process of a job step
//! (Slurm's `scancel --signal`, `--signal=USR1@60`, the time limit's
//! SIGTERM), reaches the program directly *and* through the launcher. The
//! launcher marks its copy of a `kill` (`si_code` `SI_QUEUE`, the sender's
//! `si_pid`/`si_uid`, the value `hpcrun_abi::env::forward_mark`); here, in
//! the launcher's direct child, each forwarded copy is paired with a
//! direct `kill` of the same signal from the same sender that arrives
//! within [`WINDOW_MS`], in either order, and the second of a pair is
//! dropped. Everything else reaches the program unchanged; a forwarded
//! copy that does reach it has the `siginfo` of the `kill` it stands for
//! (`SI_USER`, no value).
//!
//! How: when the program installs a handler for one of these signals
//! (`sigaction`, `signal`), the kernel gets [`on_signal`] instead, with
//! the program's flags and mask (so blocking, `SA_NODEFER`, `SA_RESTART`
//! and `SA_ONSTACK` act as natively); the program's action is kept here
//! and reported back by queries. `SA_RESETHAND` is done here (the kernel
//! resetting the action would let the dropped copy take the default
//! action): after the first delivery the program sees `SIG_DFL`, and a
//! later signal that is not a pair's second ends the process as the
//! default action would (after the profiles are written). `SIG_DFL` and
//! `SIG_IGN` go to the kernel as asked: a second SIGTERM with the default
//! action is harmless. The program's `sigwait`, `sigwaitinfo` and
//! `sigtimedwait` pair the same way ([`waited`]). The handler uses
//! atomics and the vDSO clock only: no allocation, no lock.
//!
//! Not covered: a raw `rt_sigaction` system call (the program then gets
//! both copies, as without this), `signalfd` reads, a process that is not
//! the launcher's direct child (the launcher forwards to that one only),
//! and a handler installed before the library's start-up.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

use crate::sys;

/// The signals the launcher forwards.
pub const SIGNALS: [c_int; 5] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// How long a copy waits for its pair (the launcher forwards within
/// milliseconds; a loaded machine may take longer to schedule it).
pub const WINDOW_MS: u64 = 2000;

/// Unpaired arrivals remembered per signal.
const SLOTS: usize = 8;

/// The launcher's mark (`forward_mark`); 0: pairing is off (not the
/// launcher's direct child).
static MARK: AtomicU64 = AtomicU64::new(0);

/// Called at start-up with the launcher's pid (`HPCRUN_LAUNCHER_PID`):
/// pairing is on if this process is the launcher's direct child.
pub fn init(launcher_pid: Option<u32>) {
    if let Some(pid) = launcher_pid.filter(|&p| p == sys::getppid()) {
        MARK.store(hpcrun_abi::env::forward_mark(pid), Relaxed);
    }
}

/// True in the launcher's direct child (pairing is on).
pub fn enabled() -> bool {
    MARK.load(Relaxed) != 0
}

fn index(signal: c_int) -> Option<usize> {
    SIGNALS.iter().position(|&s| s == signal)
}

/// The program's action per signal of [`SIGNALS`] (the kernel has the
/// wrapper). Writers block every signal on their thread: no handler of
/// theirs finds a half-written action, nor calls `sigaction` while the
/// table is held.
static PROGRAM: sys::ProgramActions<5> = sys::ProgramActions::new();

fn all_signals() -> libc::sigset_t {
    let mut all = sys::empty_sigset();
    for s in 1..=64 {
        sys::sigset_add(&mut all, s);
    }
    all
}

fn wrapper_address() -> usize {
    on_signal as *const () as usize
}

/// `sigaction` on one of [`SIGNALS`] while pairing is on: a handler is
/// kept here and [`on_signal`] installed in the kernel with its flags and
/// mask; `SIG_DFL`/`SIG_IGN` go to the kernel. `old` gets the program's
/// previous action (the kernel's, if it was not wrapped: the caller
/// translates the library's fatal-signal handler). `None`: not ours, the
/// caller passes the call on. `Some(rc)`: glibc's result (errno set).
pub fn program_sigaction(
    signal: c_int,
    new: Option<&libc::sigaction>,
    old: Option<&mut libc::sigaction>,
) -> Option<c_int> {
    if !enabled() {
        return None;
    }
    let i = index(signal)?;
    let writer = PROGRAM.write(&all_signals());
    let current = sys::real_sigaction_query(signal)?;
    let previous = if current.sa_sigaction == wrapper_address() {
        writer.load(i)
    } else {
        current
    };
    if let Some(new) = new {
        let rc = match new.sa_sigaction {
            libc::SIG_DFL | libc::SIG_IGN => {
                // SAFETY: a valid action, no old-value pointer.
                unsafe { sys::real_sigaction(signal, new, std::ptr::null_mut()) }
            }
            handler => {
                // Stored first: the wrapper finds it from its first call.
                writer.store(i, handler, new.sa_flags, &new.sa_mask);
                // (On the alternate stack: the profiler's signals wait
                // while it runs, `signals::onstack_action`.)
                let (adjusted, added) = crate::threads::signals::onstack_action(new);
                let mask = adjusted.as_ref().map_or(&new.sa_mask, |a| &a.sa_mask);
                let rc = sys::install_program_wrapper(signal, on_signal, new.sa_flags, mask);
                if rc == 0 {
                    // The flags and mask a query would show natively
                    // (glibc's SA_RESTORER, the mask as the kernel keeps it,
                    // less the profiler's signals added to it).
                    if let Some(mut now) = sys::real_sigaction_query(signal) {
                        crate::threads::signals::reported_action(added, &mut now);
                        let own = libc::SA_SIGINFO | libc::SA_RESETHAND;
                        let flags = (now.sa_flags & !own) | (new.sa_flags & own);
                        writer.store(i, handler, flags, &now.sa_mask);
                    }
                }
                rc
            }
        };
        if rc != 0 {
            return Some(rc);
        }
    }
    if let Some(old) = old {
        *old = previous;
    }
    Some(0)
}

/// One arrival packed in a word: bit 63 set, bit 62 the kind (1:
/// forwarded), bits 40..62 the sender's pid, bits 0..40 the monotonic
/// time in ms.
fn pack(forwarded: bool, pid: i32, ms: u64) -> u64 {
    (1 << 63)
        | (u64::from(forwarded) << 62)
        | (((pid as u32 as u64) & 0x3f_ffff) << 40)
        | (ms & ((1 << 40) - 1))
}

fn arrival_ms(word: u64) -> u64 {
    word & ((1 << 40) - 1)
}

static ARRIVALS: [[AtomicU64; SLOTS]; 5] = [const { [const { AtomicU64::new(0) }; SLOTS] }; 5];

/// Counts the copies dropped as a pair's second (for tests and the
/// curious: `forwarded_dropped`).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// The copies dropped so far.
pub fn forwarded_dropped() -> u64 {
    DROPPED.load(Relaxed)
}

/// True if this arrival is the second of a pair (drop it); else it is
/// remembered, waiting for its pair.
fn second_of_pair(i: usize, forwarded: bool, pid: i32) -> bool {
    let now = sys::monotonic_ns() / 1_000_000;
    let wanted = pack(!forwarded, pid, 0) >> 40;
    let table = &ARRIVALS[i];
    for slot in table {
        let word = slot.load(Acquire);
        if word >> 40 == wanted
            && now.wrapping_sub(arrival_ms(word)) & ((1 << 40) - 1) <= WINDOW_MS
            && slot.compare_exchange(word, 0, AcqRel, Relaxed).is_ok()
        {
            DROPPED.fetch_add(1, Relaxed);
            return true;
        }
    }
    let new = pack(forwarded, pid, now);
    let expired =
        |word: u64| word == 0 || now.wrapping_sub(arrival_ms(word)) & ((1 << 40) - 1) > WINDOW_MS;
    for slot in table {
        let word = slot.load(Acquire);
        if expired(word) && slot.compare_exchange(word, new, AcqRel, Relaxed).is_ok() {
            return false;
        }
    }
    // All taken by recent arrivals: the oldest makes room.
    if let Some(oldest) = table.iter().min_by_key(|s| arrival_ms(s.load(Relaxed))) {
        oldest.store(new, Release);
    }
    false
}

/// True if `delivered` (of signal index `i`) is the second of a pair and
/// must not reach the program; a forwarded copy that does reach it gets
/// the `siginfo` of a `kill`.
fn drop_it(i: usize, delivered: &sys::Delivered) -> bool {
    match delivered.origin(MARK.load(Relaxed)) {
        sys::Origin::Kill(pid) => second_of_pair(i, false, pid),
        sys::Origin::Forwarded(pid) => {
            delivered.as_kill();
            second_of_pair(i, true, pid)
        }
        sys::Origin::Other => false,
    }
}

/// The library's fatal-signal path (`sample::handler::on_fatal`), set at
/// start-up in a measured process: a signal whose action is the default
/// again (after `SA_RESETHAND`) writes the profiles before it ends it.
static FATAL: AtomicUsize = AtomicUsize::new(0);

/// Sets the fatal-signal path ([`FATAL`]).
pub fn set_fatal_path(path: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)) {
    FATAL.store(path as *const () as usize, Relaxed);
}

/// The handler installed in the kernel for a program's handler of one of
/// [`SIGNALS`]: drops a pair's second, else runs the program's action.
extern "C" fn on_signal(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let Some(i) = index(signal) else {
        return;
    };
    // SAFETY: the kernel's handler arguments (SA_SIGINFO), valid while
    // this handler runs; `delivered` does not outlive it.
    let delivered = unsafe { sys::Delivered::new(info, context) };
    let saved = sys::errno();
    if drop_it(i, &delivered) {
        sys::set_errno(saved);
        return;
    }
    // (Handler and flags only: this frame may be on the program's small
    // alternate stack, below its handler's.)
    let (handler, flags) = PROGRAM.handler_and_flags(i);
    match handler {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // The program's SA_RESETHAND handler ran: the default action
            // (terminate), after the profiles are written.
            sys::set_default_action(signal);
            match FATAL.load(Relaxed) {
                0 => sys::reraise(signal),
                path => {
                    // SAFETY: set by `set_fatal_path` from a function of
                    // this signature.
                    let path: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                        unsafe { std::mem::transmute(path) };
                    path(signal, info, context);
                }
            }
        }
        handler => {
            if flags & libc::SA_RESETHAND != 0 {
                PROGRAM.reset_handler_if_free(i);
            }
            sys::set_errno(saved);
            // SAFETY: the program installed `handler` with these flags.
            unsafe { delivered.call_handler(signal, handler, flags & libc::SA_SIGINFO != 0) };
        }
    }
}

/// True if `set` holds one of [`SIGNALS`] and pairing is on: the
/// program's wait goes through [`waited`].
pub fn watches(set: &libc::sigset_t) -> bool {
    enabled() && SIGNALS.iter().any(|&s| sys::sigset_has(set, s))
}

/// A signal the program took with `sigwait`/`sigwaitinfo`/`sigtimedwait`
/// into `info`: true if it is a pair's second (the wait goes on); a
/// forwarded copy that is not gets the `siginfo` of a `kill`.
pub fn waited(signal: c_int, info: &mut libc::siginfo_t) -> bool {
    if !enabled() {
        return false;
    }
    let Some(i) = index(signal) else {
        return false;
    };
    drop_it(i, &sys::Delivered::waited(info))
}
