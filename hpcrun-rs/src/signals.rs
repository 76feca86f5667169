//! Signals to the launcher go to the program, as with `mpirun`, `srun` and
//! `timeout`: SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 sent to
//! hpcrun-rs (by `kill`, a batch system's time limit, `timeout`) are
//! forwarded to the program, and the launcher keeps waiting for it, so it
//! still writes its closing line and exits as the program did.
//!
//! [`block`] blocks those signals in the launcher before any thread
//! exists; [`unblock_in_child`] unblocks them in the child before `exec`. [`forward_to`] starts a thread that takes them
//! with `sigwaitinfo` and sends them on through a pidfd (no pid reuse
//! once the program is reaped). A signal the kernel sent to the whole
//! foreground process group (Ctrl-C, a hang-up: `si_code` `SI_KERNEL`)
//! reached the program already and is not sent twice. A signal sent with
//! `kill` goes on as `SI_QUEUE` with the sender's `si_pid` and `si_uid`
//! and the mark [`hpcrun_abi::env::forward_mark`] as its value: the
//! preload library in the program tells it from a copy sent to the
//! program directly (`kill` of the process group, a batch system that
//! signals every process of a job step) and lets the program see one of
//! the two, with the `siginfo` of a `kill` (`process::forwarded` in the
//! library).
//!
//! Once the program has ended and the launcher waits for processes of
//! the run that outlived it ([`crate::descendants`]), SIGINT, SIGTERM and
//! SIGHUP stop that waiting instead ([`program_ended`], [`stop_waiting`]).
//!
//! [`exit_like`] ends the launcher the way the program ended: with its
//! exit code, or by the same signal (default action, no core file).

use std::mem::MaybeUninit;

/// The signals forwarded to the program.
pub const FORWARDED: [libc::c_int; 5] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

fn forwarded_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset with valid numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for sig in FORWARDED {
            libc::sigaddset(set.as_mut_ptr(), sig);
        }
        set.assume_init()
    }
}

/// SIGPIPE was ignored when hpcrun-rs started (its parent's disposition,
/// which the program inherits natively). Rust's runtime ignores SIGPIPE
/// before `main` and `Command` resets it to the default in the child, so
/// it is read here, before either ([`record_sigpipe`], from
/// `.init_array`).
static SIGPIPE_IGNORED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records whether SIGPIPE is ignored; runs before Rust's runtime.
extern "C" fn record_sigpipe() {
    let mut old = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a query (no new action) into an out-parameter of the right type.
    let queried = unsafe { libc::sigaction(libc::SIGPIPE, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: sigaction filled it when it returned 0.
    if queried == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN {
        SIGPIPE_IGNORED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs [`record_sigpipe`] at load, before `main` and Rust's runtime.
#[used]
#[link_section = ".init_array"]
static RECORD_SIGPIPE: extern "C" fn() = record_sigpipe;

/// The forwarded signals that were blocked already when hpcrun-rs
/// started (its parent's mask, which the program inherits natively).
static INHERITED: std::sync::OnceLock<libc::sigset_t> = std::sync::OnceLock::new();

/// Blocks the forwarded signals in this thread (call it first in `main`,
/// so that every later thread inherits the mask), remembering which of
/// them the inherited mask blocked.
pub fn block() {
    let set = forwarded_set();
    let mut old = MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: a valid set and an out-parameter of the right type.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, old.as_mut_ptr()) } == 0 {
        // SAFETY: pthread_sigmask filled it.
        let _ = INHERITED.set(unsafe { old.assume_init() });
    }
}

/// Set once the program has ended (the launcher waits for the rest of
/// the run), and once a signal said to stop that waiting.
static PROGRAM_ENDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static STOP_WAITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The program has ended: from now on SIGINT, SIGTERM and SIGHUP to the
/// launcher stop its waiting for the processes that outlived it.
pub fn program_ended() {
    PROGRAM_ENDED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// True once SIGINT, SIGTERM or SIGHUP came after the program ended.
pub fn stop_waiting() -> bool {
    STOP_WAITING.load(std::sync::atomic::Ordering::SeqCst)
}

/// Starts the thread that forwards the blocked signals to process `pid`.
pub fn forward_to(pid: u32) {
    let pid = pid as libc::pid_t;
    // SAFETY: pidfd_open takes a pid and flags; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    let spawned = std::thread::Builder::new()
        .name("hpcrun-signals".into())
        .spawn(move || {
            let set = forwarded_set();
            loop {
                let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
                // SAFETY: a valid set and an out-parameter of the right type.
                let sig = unsafe { libc::sigwaitinfo(&set, info.as_mut_ptr()) };
                if sig < 0 {
                    continue; // EINTR
                }
                if PROGRAM_ENDED.load(std::sync::atomic::Ordering::SeqCst)
                    && [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].contains(&sig)
                {
                    // Also from the terminal: the processes still
                    // running left its process group (a daemon).
                    STOP_WAITING.store(true, std::sync::atomic::Ordering::SeqCst);
                    continue;
                }
                // SAFETY: sigwaitinfo filled it.
                let mut info = unsafe { info.assume_init() };
                if info.si_code == libc::SI_KERNEL {
                    continue; // The terminal sent it to the program too.
                }
                // A `kill`'s copy goes on marked; a `sigqueue`'s as it
                // came (its value is the program's); any other kind (a
                // `tgkill` of the launcher's thread) as a plain signal.
                let info = match info.si_code {
                    libc::SI_USER => {
                        mark_forwarded(&mut info);
                        &info as *const libc::siginfo_t
                    }
                    libc::SI_QUEUE => &info as *const libc::siginfo_t,
                    _ => std::ptr::null(),
                };
                // With the info, then (refused: a plain signal is better
                // than none) without it.
                for info in [info, std::ptr::null()] {
                    if pidfd >= 0 {
                        // SAFETY: a pidfd this thread owns; `info` is null or
                        // a full siginfo_t for this signal.
                        let r = unsafe {
                            libc::syscall(libc::SYS_pidfd_send_signal, pidfd, sig, info, 0)
                        };
                        if r == 0
                            || std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
                        {
                            break;
                        }
                    }
                    // SAFETY: a pid, a signal number, `info` null or a full
                    // siginfo_t.
                    let r = unsafe {
                        if info.is_null() {
                            libc::kill(pid, sig)
                        } else {
                            libc::syscall(libc::SYS_rt_sigqueueinfo, pid, sig, info) as libc::c_int
                        }
                    };
                    if r == 0 {
                        break;
                    }
                }
            }
        });
    if spawned.is_err() {
        // Without the thread, signals take their default action again.
        unblock_all();
    }
}

/// Turns the `siginfo` of a `kill` the launcher received into that of its
/// forwarded copy: `si_code` `SI_QUEUE` (the kernel refuses a code of 0
/// from another process), `si_pid` and `si_uid` (offsets 16 and 20) kept,
/// the 8-byte `si_value` (offset 24) the launcher's mark.
fn mark_forwarded(info: &mut libc::siginfo_t) {
    info.si_code = libc::SI_QUEUE;
    let mark = hpcrun_abi::env::forward_mark(std::process::id());
    // SAFETY: siginfo_t is 128 bytes; offset 24 holds the 8-byte value of
    // the `_rt` member (`si_pid`, `si_uid`, `si_value`) on 64-bit Linux.
    unsafe {
        std::ptr::write_unaligned(
            (info as *mut libc::siginfo_t as *mut u8).add(24) as *mut u64,
            mark,
        );
    }
}

/// Unblocks the forwarded signals (in the child, before `exec`: the
/// program starts with the mask it would have had without hpcrun-rs,
/// those its parent blocked still blocked), and ignores SIGPIPE again if
/// the parent did. Async-signal-safe.
pub fn unblock_in_child() -> std::io::Result<()> {
    unblock_all();
    if SIGPIPE_IGNORED.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: signal() with a valid number and SIG_IGN.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    }
    Ok(())
}

/// Unblocks the forwarded signals that the inherited mask did not block.
fn unblock_all() {
    let mut set = forwarded_set();
    if let Some(inherited) = INHERITED.get() {
        for sig in FORWARDED {
            // SAFETY: valid sets and signal numbers.
            unsafe {
                if libc::sigismember(inherited, sig) == 1 {
                    libc::sigdelset(&mut set, sig);
                }
            }
        }
    }
    // SAFETY: a valid set.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
}

/// Ends this process by signal `sig` (its default action, without a core
/// file); returns only if that did not end it.
pub fn die_by(sig: libc::c_int) {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on this process; `raise` targets this
    // thread, so the forwarding thread cannot take the signal.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), sig);
        libc::raise(sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, set.as_ptr(), std::ptr::null_mut());
    }
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(u8),
    Signalled(i32),
}

impl Ended {
    pub fn of(status: std::process::ExitStatus) -> Ended {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Ended::Exited(code as u8),
            (None, Some(sig)) => Ended::Signalled(sig),
            _ => Ended::Exited(1),
        }
    }
}

/// Ends the launcher as the program ended.
pub fn exit_like(ended: Ended) -> ! {
    match ended {
        Ended::Exited(code) => std::process::exit(code.into()),
        Ended::Signalled(sig) => {
            die_by(sig);
            std::process::exit(128 + sig)
        }
    }
}
