//! A descriptor the profiler keeps for the whole run (the messages'
//! duplicate of standard error, `messages`; the measurements directory
//! pinned before a `chroot`, `outdir`): its number, above
//! [`super::fd_floor`], and the file it names (device and inode), so that
//! a number the program took over past libc (a raw `close_range`, then
//! an `open`) is never used as the profiler's. The interposed `close`,
//! `close_range`, `closefrom`, `dup2` and `dup3` leave it open
//! ([`KeptFd::is`], [`KeptFd::in_range`], [`KeptFd::make_way`]).

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::*};

/// Device and inode of open descriptor `fd`.
pub fn identity(fd: c_int) -> Option<(u64, u64)> {
    // SAFETY: fstat writes one owned, zero-initialised struct; a bad fd
    // only returns an error.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

/// One kept descriptor (-1: none), with the identity of its file.
pub struct KeptFd {
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

impl Default for KeptFd {
    fn default() -> Self {
        Self::new()
    }
}

impl KeptFd {
    /// None kept yet (a `static`'s initial value).
    pub const fn new() -> KeptFd {
        KeptFd {
            fd: AtomicI32::new(-1),
            dev: AtomicU64::new(0),
            ino: AtomicU64::new(0),
        }
    }

    /// Keeps `fd` (the caller's, above the floor): false, and nothing
    /// kept, if it is not open.
    pub fn keep(&self, fd: c_int) -> bool {
        let Some((dev, ino)) = identity(fd) else {
            return false;
        };
        self.dev.store(dev, Relaxed);
        self.ino.store(ino, Relaxed);
        self.fd.store(fd, Release);
        true
    }

    /// The descriptor if it still names the file kept.
    pub fn live(&self) -> Option<c_int> {
        let fd = self.fd.load(Acquire);
        if fd < 0 {
            return None;
        }
        let same = identity(fd) == Some((self.dev.load(Relaxed), self.ino.load(Relaxed)));
        same.then_some(fd)
    }

    /// True if `fd` is this descriptor, still open (the program's `close`
    /// of that number fails with `EBADF`, as if it were not there).
    pub fn is(&self, fd: c_int) -> bool {
        fd >= 0 && self.fd.load(Acquire) == fd && self.live().is_some()
    }

    /// The descriptor when it lies in `[first, last]` (for `close_range`,
    /// which leaves it open).
    pub fn in_range(&self, first: u32, last: u32) -> Option<u32> {
        let fd = u32::try_from(self.live()?).ok()?;
        (first..=last).contains(&fd).then_some(fd)
    }

    /// Before the program's `dup2`/`dup3` onto `new`: if that is this
    /// descriptor, it moves to another free number above the floor (or
    /// is given up, if none is free), and the program gets the number.
    /// (The old number is the program's call's to replace: not closed
    /// here, the call closes it atomically.)
    pub fn make_way(&self, new: c_int) {
        if !self.is(new) {
            return;
        }
        // SAFETY: duplicating our own open descriptor.
        let moved = unsafe { libc::fcntl(new, libc::F_DUPFD_CLOEXEC, super::fd_floor()) };
        self.fd.store(moved.max(-1), Release);
    }

    /// Gives the descriptor up if it is still `fd` (true); the caller
    /// closes it.
    pub fn give_up(&self, fd: c_int) -> bool {
        self.fd.compare_exchange(fd, -1, AcqRel, Relaxed).is_ok()
    }
}
