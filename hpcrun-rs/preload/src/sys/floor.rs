//! The profiler's descriptors above the floor: the events, the files it
//! writes and the descriptors it keeps are moved to numbers at or above
//! [`fd_floor`], out of the range programs open and close themselves; and
//! the window in which one is made (the kernel gives the lowest free
//! number, then it is moved up) is kept apart from the program's
//! `close_range`/`closefrom` ([`opening_own`], [`while_none_opening`]).

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

/// The lowest number the profiler's descriptors are moved to: a quarter
/// of the open-file limit (`ulimit -n`), above the numbers programs open
/// and close themselves, and below the half the watchpoints keep to
/// (`watch.rs`); at most 1,024. Every `fork` (and `posix_spawn`) copies
/// the descriptor table up to the highest open number: the messages'
/// descriptor, held for the whole run, at 5,000 (`ulimit -n 20000`) made
/// each child copy 40 KiB of it, about 3% of a short-lived child's CPU.
pub fn fd_floor() -> c_int {
    let limit = super::proc::open_files_limit().unwrap_or(1 << 20);
    (limit / 4).clamp(3, 1_024) as c_int
}

/// `fd` moved to the lowest free number at or above [`fd_floor`]
/// (`F_DUPFD_CLOEXEC`); `fd` itself when it is there already or no number
/// is free up there (a tiny `ulimit -n`).
pub fn move_above_floor(fd: c_int) -> c_int {
    let floor = fd_floor();
    if fd >= floor {
        return fd;
    }
    // SAFETY: fcntl on our own, open fd.
    let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
    if moved < 0 {
        return fd;
    }
    // (Our own fd, now open under `moved` too.)
    // SAFETY: closing our own descriptor, open under `moved` too.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    moved
}

/// `file` moved above [`fd_floor`] like the events (the profile files
/// the writer fills): a program thread's `dup2` onto a low number it
/// expects to be free (`dup2(fd, 3)`) then cannot replace the file the
/// profiler is writing under it.
pub fn file_above_floor(file: std::fs::File) -> std::fs::File {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let fd = move_above_floor(file.into_raw_fd());
    // SAFETY: `fd` is the file's descriptor (moved, the old number
    // closed), owned by nothing else.
    unsafe { std::fs::File::from_raw_fd(fd) }
}

/// The profiler's descriptors being made now: between the system call
/// that opens one at the lowest free number and its move above the floor
/// (where the close hooks know it: [`remember`], [`mark_perf_fd`]), the
/// program's `close_range`/`closefrom` in another thread would close it
/// unseen. A descriptor being made waits for the calls already running;
/// a call that would start waits until none is being made (at most about
/// 100 ms: a signal handler of the program's may have interrupted one
/// being made on its own thread).
static OPENING: AtomicU32 = AtomicU32::new(0);
/// The program's `close_range`/`closefrom` calls running now.
static CLOSING: AtomicU32 = AtomicU32::new(0);

/// Runs `open` (which makes one of the profiler's descriptors and moves
/// it above the floor) once no `close_range`/`closefrom` of the
/// program's runs (see [`OPENING`]).
pub fn opening_own<R>(open: impl FnOnce() -> R) -> R {
    OPENING.fetch_add(1, SeqCst);
    for _ in 0..2000 {
        if CLOSING.load(SeqCst) == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    let r = open();
    OPENING.fetch_sub(1, SeqCst);
    r
}

/// Runs `close` (the program's `close_range`/`closefrom`) while none of
/// the profiler's descriptors is being made (see [`OPENING`]).
pub fn while_none_opening<R>(close: impl FnOnce() -> R) -> R {
    let mut held = false;
    for _ in 0..2000 {
        CLOSING.fetch_add(1, SeqCst);
        if OPENING.load(SeqCst) == 0 {
            held = true;
            break;
        }
        // (Yield to the one being made.)
        CLOSING.fetch_sub(1, SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    let r = close();
    if held {
        CLOSING.fetch_sub(1, SeqCst);
    }
    r
}
