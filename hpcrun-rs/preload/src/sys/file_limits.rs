//! The program's file limits as they bear on the library's own files:
//! the file-size limit (`ulimit -f`, RLIMIT_FSIZE) and the open-file
//! limit (`ulimit -n`, RLIMIT_NOFILE).
//!
//! * A write past the file-size limit fails with `EFBIG` and sends
//!   SIGXFSZ to the writing thread, whose default action ends the
//!   program. The library writes its profiles, its manifest, its notices
//!   and messages on the program's threads (at thread exit, process exit,
//!   exec, in the fatal-signal handler): [`QuietFsize`] keeps the signal
//!   of those writes from the program (blocked meanwhile, and taken back
//!   if it came from them), so the write only fails, and the file is told
//!   lost with the limit named ([`describe`]). The library does not raise
//!   the limit for its files: it is the process's, and another thread of
//!   the program writing meanwhile would be let past it.
//! * A program that ends with its descriptor table full (every number
//!   below the soft open-file limit taken) leaves the library no number
//!   for its files: [`open_with_spare`] then raises the soft limit by a
//!   few numbers (never above the hard limit), opens the file and puts
//!   the limit back, one thread at a time. The descriptor, above the limit, stays valid.

use std::ffi::c_int;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering::*};

use super::mask::{empty_sigset, raw_sigmask};

/// SIGXFSZ alone.
fn sigxfsz_set() -> libc::sigset_t {
    let mut set = empty_sigset();
    // SAFETY: `set` is an initialised sigset_t; SIGXFSZ is a valid signal.
    unsafe { libc::sigaddset(&mut set, libc::SIGXFSZ) };
    set
}

/// True if SIGXFSZ is pending for the calling thread or its process
/// (`rt_sigpending`; async-signal-safe).
fn sigxfsz_pending() -> bool {
    let mut pending = empty_sigset();
    // SAFETY: the kernel writes 8 bytes of signal set into `pending`.
    let rc = unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut pending, 8usize) };
    // SAFETY: `pending` is an initialised sigset_t.
    rc == 0 && unsafe { libc::sigismember(&pending, libc::SIGXFSZ) } == 1
}

/// SIGXFSZ held from the program while this lives: blocked in the
/// calling thread, and a SIGXFSZ that became pending meanwhile (the
/// library's write past the file-size limit) is taken when it is
/// dropped, before the thread's mask is put back. System calls only
/// (async-signal-safe: the fatal-signal handler writes profiles too).
/// Nested guards leave the work to the outermost.
pub struct QuietFsize {
    /// SIGXFSZ was blocked already (the program's mask, an outer guard).
    was_blocked: bool,
    /// SIGXFSZ was pending already (the program's own, left to it).
    was_pending: bool,
}

impl QuietFsize {
    pub fn new() -> QuietFsize {
        let set = sigxfsz_set();
        let mut old = empty_sigset();
        let was_blocked = if raw_sigmask(libc::SIG_BLOCK, Some(&set), Some(&mut old)) == 0 {
            // SAFETY: `old` is an initialised sigset_t.
            unsafe { libc::sigismember(&old, libc::SIGXFSZ) == 1 }
        } else {
            true
        };
        QuietFsize {
            was_blocked,
            was_pending: sigxfsz_pending(),
        }
    }
}

impl Default for QuietFsize {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for QuietFsize {
    fn drop(&mut self) {
        if !self.was_pending && sigxfsz_pending() {
            let set = sigxfsz_set();
            let now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid set and timeout; no siginfo wanted (null).
            // With a zero timeout the call takes a pending SIGXFSZ or
            // returns EAGAIN at once.
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigtimedwait,
                    &set,
                    std::ptr::null_mut::<libc::siginfo_t>(),
                    &now,
                    8usize,
                )
            };
        }
        if !self.was_blocked {
            raw_sigmask(libc::SIG_UNBLOCK, Some(&sigxfsz_set()), None);
        }
    }
}

/// The soft file-size limit in bytes, if finite.
pub fn file_size_limit() -> Option<u64> {
    // SAFETY: getrlimit writes into a valid, owned struct.
    let limit = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_FSIZE, &mut l) == 0).then_some(l.rlim_cur)
    };
    limit.filter(|&l| l != libc::RLIM_INFINITY)
}

/// `e` as told to the user: a write past the file-size limit names the
/// limit and `ulimit -f`; an open that found the descriptor table full
/// (even above the soft limit, [`open_with_spare`]) names the open-file
/// limits.
pub fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EFBIG) => match file_size_limit() {
            Some(limit) => format!("{e}: the file-size limit (`ulimit -f`) is {limit} bytes"),
            None => format!("{e}: the file-size limit (`ulimit -f`)"),
        },
        Some(libc::EMFILE) => match nofile() {
            Some(l) => format!(
                "{e}: the program holds every descriptor its open-file limit (`ulimit -n`) allows, {} (hard limit {})",
                l.rlim_cur, l.rlim_max
            ),
            None => e.to_string(),
        },
        _ => e.to_string(),
    }
}

/// How many numbers [`open_with_spare`] adds to the soft limit: room
/// for the files of several threads writing at once (each may hold two
/// numbers for a moment: the file, and its copy above the descriptor
/// floor), whose earlier files still hold the numbers just above it.
const SPARE: u64 = 32;

/// The thread that raises the limit now (its tid; 0: none). One thread
/// at a time: another waits until it is done (at most a second), a
/// signal handler that interrupted the raiser only tries again.
static RAISER: AtomicU32 = AtomicU32::new(0);

/// Takes [`RAISER`] for the calling thread: false if it holds it already
/// (a handler that interrupted it) or another thread kept it for a
/// second.
fn take_raiser() -> bool {
    let me = super::gettid();
    for _ in 0..1000 {
        match RAISER.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => return true,
            Err(owner) if owner == me => return false,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
    false
}

fn nofile() -> Option<libc::rlimit> {
    // SAFETY: getrlimit writes into a valid, owned struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0).then_some(l)
    }
}

fn set_nofile(l: &libc::rlimit) -> bool {
    // SAFETY: setrlimit reads a valid struct.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, l) == 0 }
}

/// `open()` (a descriptor or -1 with errno set), run again with the
/// soft open-file limit raised by a few numbers when it failed with
/// `EMFILE`; the limit is put back after (unless the program changed it
/// meanwhile).
pub fn open_with_spare(mut open: impl FnMut() -> c_int) -> c_int {
    let fd = open();
    if fd >= 0 || super::errno() != libc::EMFILE {
        return fd;
    }
    if !take_raiser() {
        return open();
    }
    // (Another thread's raise may have let a number go meanwhile.)
    let fd = open();
    if fd >= 0 || super::errno() != libc::EMFILE {
        RAISER.store(0, Release);
        return fd;
    }
    let fd = match nofile() {
        Some(old) if old.rlim_cur != libc::RLIM_INFINITY && old.rlim_cur < old.rlim_max => {
            let raised = libc::rlimit {
                rlim_cur: old.rlim_cur.saturating_add(SPARE).min(old.rlim_max),
                rlim_max: old.rlim_max,
            };
            if set_nofile(&raised) {
                let fd = open();
                let errno = super::errno();
                if nofile().is_some_and(|now| now.rlim_cur == raised.rlim_cur) {
                    set_nofile(&old);
                }
                super::set_errno(errno);
                fd
            } else {
                super::set_errno(libc::EMFILE);
                -1
            }
        }
        _ => {
            super::set_errno(libc::EMFILE);
            -1
        }
    };
    RAISER.store(0, Release);
    fd
}
