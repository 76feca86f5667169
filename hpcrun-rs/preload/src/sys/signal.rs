//! Signals: glibc's real `sigaction`, installing handlers, signal sets
//! and masks, a delivered signal's info and context, re-raising.

use std::ffi::{c_int, c_void};

pub use super::mask::{attr_sigmask, empty_sigset, kernel_mask, raw_sigmask};

use super::proc::{getpid, gettid};

extern "C" {
    /// glibc's sigaction under its public alias: the interposed
    /// `sigaction` (signal_hooks.rs) is the program's entry point.
    fn __sigaction(signal: c_int, new: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
}

pub fn sigrtmin() -> c_int {
    libc::SIGRTMIN()
}

/// Installs `handler` for `signal` only if the signal still has its
/// default action (an inherited SIG_IGN, e.g. under nohup, is kept). The
/// handler runs once (SA_RESETHAND): afterwards the default action applies.
/// It runs on the thread's handler stack (entered through
/// [`super::stack::entry_for`]).
pub fn install_fatal_handler(
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
) -> bool {
    // SAFETY: query then install with zeroed, initialised sigaction values.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if __sigaction(signal, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL
        {
            return false;
        }
        let Some(entry) = super::stack::entry_for(signal, handler) else {
            return false;
        };
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = entry;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        __sigaction(signal, &sa, std::ptr::null_mut()) == 0
    }
}

/// The per-user limit of pending signals (`ulimit -i`), if finite.
pub fn pending_signal_limit() -> Option<u64> {
    // SAFETY: getrlimit writes into a valid, owned struct.
    let limit = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut l) == 0).then_some(l.rlim_cur)
    };
    limit.filter(|&l| l != libc::RLIM_INFINITY)
}

/// Sends `signal` to the calling thread again (it is delivered, with its
/// default action, when the handler returns).
pub fn reraise(signal: c_int) {
    // SAFETY: raise has no memory preconditions.
    unsafe { libc::raise(signal) };
}

/// Installs `handler` (SA_SIGINFO | SA_RESTART | SA_ONSTACK) for
/// `signal`: the kernel's signal frame goes on the thread's alternate
/// stack (the profiler's handler stack unless the program has its own,
/// `sys::stack`), never on a small program or coroutine stack, and the
/// handler runs on the handler stack in any case (entered through
/// [`super::stack::entry_for`]). Returns the address installed in the
/// kernel, `None` if the call failed.
pub fn install_handler(
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
    block: &[c_int],
) -> Option<usize> {
    let entry = super::stack::entry_for(signal, handler)?;
    // SAFETY: a zeroed sigaction with our handler; its mask blocks `block`
    // (the library's other sample signals) while it runs.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = entry;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        for &b in block {
            libc::sigaddset(&mut sa.sa_mask, b);
        }
        (__sigaction(signal, &sa, std::ptr::null_mut()) == 0).then_some(entry)
    }
}

/// The current action for `signal`, from glibc's real `sigaction`.
pub fn real_sigaction_query(signal: c_int) -> Option<libc::sigaction> {
    // SAFETY: a query with a valid out pointer.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (__sigaction(signal, std::ptr::null(), &mut old) == 0).then_some(old)
    }
}

/// glibc's real `sigaction`.
///
/// # Safety
/// The pointers are null or valid, as for `sigaction`.
pub unsafe fn real_sigaction(
    signal: c_int,
    new: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: per the caller's contract.
    unsafe { __sigaction(signal, new, old) }
}

/// One delivered signal as the kernel hands it to an `SA_SIGINFO`
/// handler: its `siginfo_t` and `ucontext_t` (the context may be null: a
/// signal taken by `sigtimedwait`).
pub struct Delivered {
    info: *mut libc::siginfo_t,
    context: *mut c_void,
}

impl Delivered {
    /// # Safety
    /// `info` is null or a valid `siginfo_t`, `context` null or a valid
    /// `ucontext_t`, both for as long as the value is used (a handler's
    /// arguments, for the handler's duration).
    pub unsafe fn new(info: *mut libc::siginfo_t, context: *mut c_void) -> Delivered {
        Delivered { info, context }
    }

    /// A signal taken by `sigtimedwait` into `info` (no context).
    pub fn waited(info: &mut libc::siginfo_t) -> Delivered {
        Delivered {
            info,
            context: std::ptr::null_mut(),
        }
    }

    /// (si_code, si_fd); si_fd is meaningful only for the POLL_* codes of
    /// an `F_SETSIG` signal (the `_sigpoll` member: `long si_band` at
    /// offset 16, `int si_fd` at offset 24 on 64-bit Linux).
    pub fn code_fd(&self) -> Option<(c_int, c_int)> {
        if self.info.is_null() {
            return None;
        }
        // SAFETY: a valid, full siginfo_t (128 bytes, per `new`); both
        // offsets lie inside it.
        unsafe {
            let code = (*self.info).si_code;
            let fd = std::ptr::read_unaligned((self.info as *const u8).add(24) as *const c_int);
            Some((code, fd))
        }
    }

    /// For a signal of one of the profiler's CPU-time timers (`SI_TIMER`
    /// carrying [`super::TIMER_COOKIE`]): its overrun count, the periods
    /// that expired after the one it was sent for (the `_timer` member:
    /// `int si_overrun` at offset 20, the 8-byte `si_value` at 24).
    pub fn timer_overrun(&self) -> Option<u32> {
        if self.info.is_null() {
            return None;
        }
        // SAFETY: a valid, full siginfo_t (128 bytes, per `new`); both
        // offsets lie inside it.
        unsafe {
            if (*self.info).si_code != libc::SI_TIMER {
                return None;
            }
            let base = self.info as *const u8;
            let value = std::ptr::read_unaligned(base.add(24) as *const u64);
            let overrun = std::ptr::read_unaligned(base.add(20) as *const c_int);
            (value == super::TIMER_COOKIE).then_some(overrun.max(0) as u32)
        }
    }

    /// How a `kill` or a launcher's forwarded copy of one came: `Kill(pid)`
    /// for `si_code` `SI_USER` from `pid`, `Forwarded(pid)` for `SI_QUEUE`
    /// carrying `mark` as its value (`si_pid` at offset 16, the 8-byte
    /// `si_value` at 24, the `_rt` member), `Other` for anything else.
    pub fn origin(&self, mark: u64) -> Origin {
        if self.info.is_null() {
            return Origin::Other;
        }
        // SAFETY: a valid, full siginfo_t (128 bytes, per `new`); both
        // offsets lie inside it.
        unsafe {
            let base = self.info as *const u8;
            let pid = std::ptr::read_unaligned(base.add(16) as *const i32);
            match (*self.info).si_code {
                libc::SI_USER => Origin::Kill(pid),
                libc::SI_QUEUE if std::ptr::read_unaligned(base.add(24) as *const u64) == mark => {
                    Origin::Forwarded(pid)
                }
                _ => Origin::Other,
            }
        }
    }

    /// Makes a forwarded copy's `siginfo` that of the `kill` it stands
    /// for: `si_code` `SI_USER`, no value (`si_pid` and `si_uid` are the
    /// sender's already).
    pub fn as_kill(&self) {
        if self.info.is_null() {
            return;
        }
        // SAFETY: a valid, writable, full siginfo_t (per `new`); offset
        // 24 lies inside it.
        unsafe {
            (*self.info).si_code = libc::SI_USER;
            std::ptr::write_unaligned((self.info as *mut u8).add(24) as *mut u64, 0);
        }
    }

    /// Calls `handler`, a program's handler for `signal`, with this
    /// signal's arguments (three if `siginfo`, else one), without touching
    /// the mask (the kernel set it from the program's action).
    ///
    /// # Safety
    /// `handler` is a function of the signature `siginfo` says (the
    /// program installed it with those flags).
    pub unsafe fn call_handler(&self, signal: c_int, handler: usize, siginfo: bool) {
        // SAFETY: per the caller's contract; the arguments are the kernel's.
        unsafe {
            if siginfo {
                let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                    std::mem::transmute(handler);
                f(signal, self.info, self.context);
            } else {
                let f: extern "C" fn(c_int) = std::mem::transmute(handler);
                f(signal);
            }
        }
    }

    /// Queues `signal` with the same info to the calling thread again and
    /// makes the interrupted code resume with `signal` blocked: it stays
    /// pending (for `sigwait`, `signalfd`, or the program's unblocking
    /// call).
    pub fn requeue_blocked(&self, signal: c_int) {
        // SAFETY: per `new`, the pointers are valid; the ucontext's saved
        // mask is what the kernel restores when the handler returns;
        // rt_tgsigqueueinfo only reads the info.
        unsafe {
            if !self.context.is_null() {
                let uc = &mut *(self.context as *mut libc::ucontext_t);
                libc::sigaddset(&mut uc.uc_sigmask, signal);
            }
            if !self.info.is_null() {
                libc::syscall(
                    libc::SYS_rt_tgsigqueueinfo,
                    getpid() as libc::pid_t,
                    gettid() as libc::pid_t,
                    signal,
                    self.info,
                );
            }
        }
    }

    /// Calls the program's handler for `signal` as the kernel would have:
    /// its `sa_mask` (and the signal itself unless `SA_NODEFER`) blocked
    /// while it runs, one or three arguments by `SA_SIGINFO`.
    pub fn call_program_handler(&self, signal: c_int, act: &libc::sigaction) {
        let mut block = act.sa_mask;
        if act.sa_flags & libc::SA_NODEFER == 0 {
            sigset_add(&mut block, signal);
        }
        let mut old = empty_sigset();
        raw_sigmask(libc::SIG_BLOCK, Some(&block), Some(&mut old));
        // SAFETY: the program installed this handler with these flags, so
        // it has the matching signature; the arguments are the kernel's.
        unsafe {
            if act.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                    std::mem::transmute(act.sa_sigaction);
                f(signal, self.info, self.context);
            } else {
                let f: extern "C" fn(c_int) = std::mem::transmute(act.sa_sigaction);
                f(signal);
            }
        }
        raw_sigmask(libc::SIG_SETMASK, Some(&old), None);
    }
}

/// Where a delivered signal came from ([`Delivered::origin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `kill` (`SI_USER`) from this pid.
    Kill(i32),
    /// A launcher's forwarded copy of a `kill` from this pid.
    Forwarded(i32),
    Other,
}

/// Installs `handler` for `signal` with the program's `flags` (always
/// with `SA_SIGINFO`, never `SA_RESETHAND`) and `mask`: the kernel blocks
/// and restarts as it would for the program's own handler, on the stack
/// the program chose. Returns glibc's result (errno set on failure).
pub fn install_program_wrapper(
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
    flags: c_int,
    mask: &libc::sigset_t,
) -> c_int {
    // SAFETY: a zeroed sigaction with our handler, a copied mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        // (SA_RESTORER, 0x04000000, from a program that passes a queried
        // action back: glibc supplies its own restorer.)
        sa.sa_flags = (flags | libc::SA_SIGINFO) & !(libc::SA_RESETHAND | 0x0400_0000);
        sa.sa_mask = *mask;
        __sigaction(signal, &sa, std::ptr::null_mut())
    }
}

/// Gives `signal` its default action (glibc's real `sigaction`).
pub fn set_default_action(signal: c_int) {
    let dfl = make_sigaction(
        libc::SIG_DFL,
        0,
        &[0; std::mem::size_of::<libc::sigset_t>() / 8],
    );
    // SAFETY: a valid sigaction, no old-value pointer.
    unsafe { __sigaction(signal, &dfl, std::ptr::null_mut()) };
}

/// The 64-bit words of a signal set.
pub fn sigset_words(set: &libc::sigset_t) -> [u64; std::mem::size_of::<libc::sigset_t>() / 8] {
    // SAFETY: sigset_t is plain bytes of exactly this size.
    unsafe { std::mem::transmute_copy(set) }
}

/// A sigaction value with this handler, flags and mask words.
pub fn make_sigaction(
    handler: usize,
    flags: c_int,
    mask: &[u64; std::mem::size_of::<libc::sigset_t>() / 8],
) -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction; the mask words are plain
    // bytes of a sigset_t.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        sa.sa_mask = std::mem::transmute_copy(mask);
        sa
    }
}

pub fn sigset_has(set: &libc::sigset_t, signal: c_int) -> bool {
    // SAFETY: a valid set; an invalid signal only returns -1.
    unsafe { libc::sigismember(set, signal) == 1 }
}

pub fn sigset_add(set: &mut libc::sigset_t, signal: c_int) {
    // SAFETY: as above.
    unsafe { libc::sigaddset(set, signal) };
}

pub fn sigset_del(set: &mut libc::sigset_t, signal: c_int) {
    // SAFETY: as above.
    unsafe { libc::sigdelset(set, signal) };
}

/// Gives `signal` its default action and sends it to the calling thread
/// again: delivered when the handler returns (for a real-time signal, the
/// process ends with that signal).
pub fn die_by_default(signal: c_int) {
    let dfl = make_sigaction(
        libc::SIG_DFL,
        0,
        &[0; std::mem::size_of::<libc::sigset_t>() / 8],
    );
    // SAFETY: a valid sigaction; tgkill to ourselves.
    unsafe {
        __sigaction(signal, &dfl, std::ptr::null_mut());
        libc::syscall(
            libc::SYS_tgkill,
            getpid() as libc::pid_t,
            gettid() as libc::pid_t,
            signal,
        );
    }
}
