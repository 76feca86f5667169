//! Signal actions the program set while the profiler's handler, or a
//! wrapper of the program's, is what the kernel has: kept here so that the
//! program's `sigaction` queries see its own action and the profiler's
//! handler can run it.
//!
//! [`ProgramActions`] is a table of actions, each under a sequence lock
//! over atomics: a signal handler reads one without waiting and never sees
//! it half-written ([`ProgramActions::load`]). Writers take the table's
//! flag with some signals blocked on their thread ([`ProgramActions::write`],
//! a [`Writer`]), so that no handler of the writing thread spins on the
//! action being written, nor enters a writer while the flag is held. A
//! handler that must write (the program's `SA_RESETHAND`: the kernel resets
//! the handler to `SIG_DFL` and keeps flags and mask) does it only when no
//! writer holds the flag ([`ProgramActions::reset_handler_if_free`]).

use std::ffi::c_int;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering::*};

use super::mask::raw_sigmask;
use super::signal::{make_sigaction, sigset_words};

const MASK_WORDS: usize = std::mem::size_of::<libc::sigset_t>() / 8;

/// One action under its sequence lock (odd `seq`: being written).
struct Action {
    seq: AtomicU64,
    handler: AtomicUsize,
    flags: AtomicU64,
    mask: [AtomicU64; MASK_WORDS],
}

impl Action {
    #[allow(clippy::declare_interior_mutable_const)]
    const DEFAULT: Action = Action {
        seq: AtomicU64::new(0),
        handler: AtomicUsize::new(libc::SIG_DFL),
        flags: AtomicU64::new(0),
        mask: [const { AtomicU64::new(0) }; MASK_WORDS],
    };

    fn store(&self, handler: usize, flags: c_int, mask: &libc::sigset_t) {
        self.seq.fetch_add(1, AcqRel);
        self.handler.store(handler, Relaxed);
        self.flags.store(flags as u32 as u64, Relaxed);
        for (w, v) in self.mask.iter().zip(sigset_words(mask)) {
            w.store(v, Relaxed);
        }
        self.seq.fetch_add(1, Release);
    }

    /// The handler and flags alone (a handler's hot path: no 128-byte
    /// mask copied onto the stack it runs on).
    fn handler_and_flags(&self) -> (usize, c_int) {
        loop {
            let before = self.seq.load(Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let got = (
                self.handler.load(Relaxed),
                self.flags.load(Relaxed) as u32 as c_int,
            );
            fence(Acquire);
            if self.seq.load(Relaxed) == before {
                return got;
            }
        }
    }

    fn load(&self) -> libc::sigaction {
        loop {
            let before = self.seq.load(Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut words = [0u64; MASK_WORDS];
            for (v, w) in words.iter_mut().zip(&self.mask) {
                *v = w.load(Relaxed);
            }
            let act = make_sigaction(
                self.handler.load(Relaxed),
                self.flags.load(Relaxed) as u32 as c_int,
                &words,
            );
            fence(Acquire);
            if self.seq.load(Relaxed) == before {
                return act;
            }
        }
    }
}

/// `N` signal actions of the program, each `SIG_DFL` with no flags at
/// first.
pub struct ProgramActions<const N: usize> {
    actions: [Action; N],
    writing: AtomicBool,
}

impl<const N: usize> ProgramActions<N> {
    /// A table of default actions (for a `static`).
    pub const fn new() -> Self {
        ProgramActions {
            actions: [const { Action::DEFAULT }; N],
            writing: AtomicBool::new(false),
        }
    }

    /// Action `i`, consistent (retried while a writer is in it). Safe in a
    /// signal handler; panics if `i >= N`.
    pub fn load(&self, i: usize) -> libc::sigaction {
        self.actions[i].load()
    }

    /// Action `i`'s handler and flags (without its mask).
    pub fn handler_and_flags(&self, i: usize) -> (usize, c_int) {
        self.actions[i].handler_and_flags()
    }

    /// Becomes the writer of the table: blocks `block` on this thread,
    /// then waits for the flag. Writers are short; none runs in a signal
    /// handler.
    pub fn write(&self, block: &libc::sigset_t) -> Writer<'_, N> {
        let mut mask = super::mask::empty_sigset();
        raw_sigmask(libc::SIG_BLOCK, Some(block), Some(&mut mask));
        while self.writing.swap(true, Acquire) {
            std::hint::spin_loop();
        }
        Writer { table: self, mask }
    }

    /// What the kernel does for `SA_RESETHAND`, from a signal handler:
    /// action `i`'s handler becomes `SIG_DFL` (flags and mask kept), unless
    /// a writer holds the table (then it is left as it is). True when
    /// reset.
    pub fn reset_handler_if_free(&self, i: usize) -> bool {
        if self.writing.swap(true, Acquire) {
            return false;
        }
        let act = self.actions[i].load();
        self.actions[i].store(libc::SIG_DFL, act.sa_flags, &act.sa_mask);
        self.writing.store(false, Release);
        true
    }
}

impl<const N: usize> Default for ProgramActions<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The writer of a [`ProgramActions`] table; dropping it releases the
/// table and restores the thread's signal mask.
pub struct Writer<'a, const N: usize> {
    table: &'a ProgramActions<N>,
    mask: libc::sigset_t,
}

impl<const N: usize> Writer<'_, N> {
    /// Sets action `i`.
    pub fn store(&self, i: usize, handler: usize, flags: c_int, mask: &libc::sigset_t) {
        self.table.actions[i].store(handler, flags, mask);
    }

    /// Sets action `i` to `act`'s handler, flags and mask.
    pub fn store_action(&self, i: usize, act: &libc::sigaction) {
        self.store(i, act.sa_sigaction, act.sa_flags, &act.sa_mask);
    }

    /// Action `i`.
    pub fn load(&self, i: usize) -> libc::sigaction {
        self.table.actions[i].load()
    }
}

impl<const N: usize> Drop for Writer<'_, N> {
    fn drop(&mut self) {
        self.table.writing.store(false, Release);
        raw_sigmask(libc::SIG_SETMASK, Some(&self.mask), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_keep_handler_flags_and_mask_and_reset_keeps_flags() {
        static TABLE: ProgramActions<2> = ProgramActions::new();
        assert_eq!(TABLE.load(1).sa_sigaction, libc::SIG_DFL);
        let mut mask = super::super::mask::empty_sigset();
        super::super::signal::sigset_add(&mut mask, libc::SIGUSR2);
        let flags = libc::SA_SIGINFO | libc::SA_RESETHAND;
        {
            let w = TABLE.write(&super::super::mask::empty_sigset());
            w.store(1, 0x1234, flags, &mask);
            assert_eq!(w.load(1).sa_sigaction, 0x1234);
        }
        let act = TABLE.load(1);
        assert_eq!((act.sa_sigaction, act.sa_flags), (0x1234, flags));
        assert_eq!(sigset_words(&act.sa_mask), sigset_words(&mask));
        assert_eq!(TABLE.load(0).sa_sigaction, libc::SIG_DFL);

        assert!(TABLE.reset_handler_if_free(1));
        let act = TABLE.load(1);
        assert_eq!((act.sa_sigaction, act.sa_flags), (libc::SIG_DFL, flags));
        // A writer holding the table: the reset leaves the action.
        let w = TABLE.write(&super::super::mask::empty_sigset());
        w.store(1, 0x5678, 0, &mask);
        assert!(!TABLE.reset_handler_if_free(1));
        drop(w);
        assert_eq!(TABLE.load(1).sa_sigaction, 0x5678);
    }
}
