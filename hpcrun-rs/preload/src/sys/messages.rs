//! The profiler's own descriptor for its messages: a duplicate of the
//! standard error the process had when the library started (what the
//! launcher gave it at `exec`), moved above [`super::fd_floor`]
//! (`F_DUPFD_CLOEXEC`) and remembered by identity (device and inode).
//!
//! Descriptor 2 belongs to the program: one that closes it and opens a
//! data file gets that file as number 2, and a message written to
//! "standard error" would land in its data. The profiler writes to its
//! own duplicate instead ([`write_message`]), and only while that number
//! still names the same file: a program that closed it past libc (a raw
//! `close_range`) and reused the number gets nothing written into its
//! file; the caller then puts the message elsewhere.
//!
//! The interposed `close`, `close_range`, `closefrom`, `dup2` and `dup3`
//! leave this descriptor open as they do the perf events
//! ([`is_message_fd`], [`move_message_fd`]).
//!
//! Except in a daemon: a process that left the session it started in
//! (`setsid`) and let go of its standard error (`close(2)`, or
//! `dup2`/`dup3` of another file onto 2, `/dev/null` as a rule), in
//! either order, while the duplicate is a pipe or a socket: then the
//! duplicate is closed too ([`let_go_of_stderr`]), or the daemon would
//! hold the launcher's standard error open where natively it does not,
//! and a reader waiting for its end (`hpcrun-rs ./app 2>&1 | cat`,
//! `$(hpcrun-rs ./app 2>&1)`) would wait for the daemon. Its messages
//! then go to the run's message file, which the launcher prints. A
//! program that only puts a file of its own on descriptor 2 keeps the
//! profiler's messages on the launcher's standard error.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering::*};

use super::kept_fd::{identity, KeptFd};

/// The descriptor, and the file it names.
static KEPT: KeptFd = KeptFd::new();
/// The session the process was in when the duplicate was taken.
static SESSION: AtomicI32 = AtomicI32::new(0);

/// Takes the profiler's duplicate of descriptor 2 (at start-up, before
/// the program runs): false when descriptor 2 is closed or no number at
/// or above the floor is free (then messages go to a file).
pub fn keep_stderr() -> bool {
    let floor = super::fd_floor();
    // SAFETY: F_DUPFD_CLOEXEC duplicates fd 2 if it is open; a closed fd
    // only returns an error.
    let fd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, floor) };
    if fd < 0 {
        return false;
    }
    // SAFETY: getsid(0) has no preconditions.
    SESSION.store(unsafe { libc::getsid(0) }, Relaxed);
    KEPT.keep(fd)
}

/// The descriptor if it is still the one taken (the same file).
fn live() -> Option<c_int> {
    KEPT.live()
}

/// True if `fd` is the profiler's message descriptor, still open (the
/// program's `close` of that number fails with `EBADF`, as if it were
/// not there).
pub fn is_message_fd(fd: c_int) -> bool {
    KEPT.is(fd)
}

/// The message descriptor when it lies in `[first, last]` (for
/// `close_range`, which leaves it open).
pub fn message_fd_in(first: u32, last: u32) -> Option<u32> {
    KEPT.in_range(first, last)
}

/// Before the program's `dup2`/`dup3` onto the message descriptor's
/// number: the descriptor moves to another free number above the floor
/// (or is given up, if none is free), and the program gets the number.
pub fn move_message_fd(new: c_int) {
    KEPT.make_way(new);
}

/// The program closed its descriptor 2, made it another file, or left
/// its session: gives up the duplicate if the process left the session
/// it started in, descriptor 2 no longer names the duplicate's file, and
/// that is a pipe, FIFO or socket (a reader waits for its end).
pub fn let_go_of_stderr() {
    let Some(fd) = live() else {
        return;
    };
    // SAFETY: getsid(0) has no preconditions.
    if unsafe { libc::getsid(0) } == SESSION.load(Relaxed) {
        return;
    }
    if identity(2) == identity(fd) {
        return;
    }
    // SAFETY: fstat writes one owned, zero-initialised struct.
    let stream = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0
            && matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFSOCK)
    };
    if !stream || !KEPT.give_up(fd) {
        return;
    }
    // SAFETY: closing the profiler's own descriptor (the system call: the
    // interposed `close` is the program's entry).
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// Writes all of `bytes` to the message descriptor: false when there is
/// none (closed at start, or the program took its number since), or the
/// write failed.
pub fn write_message(bytes: &[u8]) -> bool {
    let Some(fd) = live() else {
        return false;
    };
    // (Standard error may be a file past the file-size limit.)
    let _quiet = super::file_limits::QuietFsize::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: writes from a live slice to our own descriptor. (The
        // system call, not libc's `write`: not a cancellation point.)
        let n = unsafe { libc::syscall(libc::SYS_write, fd, rest.as_ptr(), rest.len()) };
        if n < 0 {
            if super::errno() == libc::EINTR {
                continue;
            }
            return false;
        }
        if n == 0 {
            return false;
        }
        rest = &rest[n as usize..];
    }
    true
}

/// Appends `bytes` to the file `path` of the output directory (created
/// if needed, one `write` with `O_APPEND`, so lines of processes sharing
/// it do not mix; through the pinned directory, `outdir`, after a
/// `chroot`).
pub fn append_to_file(path: &str, bytes: &[u8]) -> bool {
    use std::io::Write;
    let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT;
    let Ok(mut file) = super::outdir::open(path, flags) else {
        return false;
    };
    let _quiet = super::file_limits::QuietFsize::new();
    file.write(bytes).is_ok_and(|n| n == bytes.len())
}
