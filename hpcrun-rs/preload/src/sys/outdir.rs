//! The measurements directory when the program changes its root
//! (`chroot`).
//!
//! The library names its files by path (`<output>/<file>`). A program
//! that confines itself with `chroot` (a daemon dropping into an empty
//! directory, a build sandbox) would make those paths name nothing, and
//! its profiles, manifest and messages would be lost. So the interposed
//! `chroot` first pins the directory ([`pin`]): a descriptor of it
//! (`O_PATH`, close-on-exec, above [`super::fd_floor`]), after which every
//! file the library makes there is named relative to that descriptor
//! (`openat`, `renameat`, `linkat`, `unlinkat`, `faccessat`): the files
//! reach the directory outside the new root. A program that never calls
//! `chroot` holds no such descriptor.
//!
//! The interposed `close`, `close_range`, `closefrom`, `dup2` and `dup3`
//! leave it open as they do the message descriptor ([`is_dir_fd`],
//! [`dir_fd_in`], [`move_dir_fd`]); a raw system call that closes it, or
//! puts another file at its number, makes the paths name files again
//! (checked by the descriptor's device and inode at each use).
//!
//! The files the library creates there (profiles, checkpoints, manifests,
//! notices, messages) take their mode from the umask the process started
//! with, and are always readable and writable by their owner: a program's
//! own `umask` (`umask(0777)`, or `077` in a group-shared directory) does
//! not hide them from hpcprof-rs.

use std::ffi::{c_int, CString};
use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::OnceLock;

use super::kept_fd::KeptFd;

/// The pinned directory's path, as the library names its files.
static DIR: OnceLock<String> = OnceLock::new();
/// Its descriptor, and the directory it names.
static KEPT: KeptFd = KeptFd::new();

/// Pins `dir` (before the program's `chroot`): false if it cannot be
/// opened or no number at or above the floor is free. Once per process;
/// a later call keeps the first.
pub fn pin(dir: &str) -> bool {
    if live().is_some() {
        return true;
    }
    let Ok(path) = CString::new(dir) else {
        return false;
    };
    // SAFETY: `path` is NUL-terminated; O_PATH opens no file contents.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: duplicating the descriptor opened above, then closing it
    // (the system call: the interposed `close` is the program's entry).
    let high = unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, super::fd_floor());
        libc::syscall(libc::SYS_close, fd);
        high
    };
    if high < 0 {
        return false;
    }
    let same_dir = match DIR.get() {
        Some(pinned) => pinned == dir,
        None => DIR.set(dir.to_string()).is_ok() || DIR.get().is_some_and(|d| d == dir),
    };
    if !same_dir {
        // SAFETY: closing the descriptor duplicated above.
        unsafe { libc::syscall(libc::SYS_close, high) };
        return false;
    }
    if !KEPT.keep(high) {
        // SAFETY: closing the descriptor duplicated above.
        unsafe { libc::syscall(libc::SYS_close, high) };
        return false;
    }
    true
}

/// The descriptor if it is still the one pinned (the same directory).
fn live() -> Option<c_int> {
    KEPT.live()
}

/// True if `fd` is the pinned directory's descriptor, still open.
pub fn is_dir_fd(fd: c_int) -> bool {
    KEPT.is(fd)
}

/// The directory's descriptor when it lies in `[first, last]` (for
/// `close_range`, which leaves it open).
pub fn dir_fd_in(first: u32, last: u32) -> Option<u32> {
    KEPT.in_range(first, last)
}

/// Before the program's `dup2`/`dup3` onto the directory's descriptor:
/// it moves to another free number above the floor (or is given up), and
/// the program gets the number.
pub fn move_dir_fd(new: c_int) {
    KEPT.make_way(new);
}

/// `path` relative to the pinned directory's descriptor, when the
/// directory is pinned and `path` lies in it.
fn relative(path: &str) -> Option<(c_int, CString)> {
    let fd = live()?;
    let rest = path.strip_prefix(DIR.get()?.as_str())?.strip_prefix('/')?;
    Some((fd, CString::new(rest).ok()?))
}

fn c_path(path: &str) -> io::Result<CString> {
    CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(rc: c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The process's umask when the library started (before the program's
/// code ran); [`u32::MAX`] until [`note_umask`].
static START_UMASK: AtomicU32 = AtomicU32::new(u32::MAX);

/// Reads the umask the process started with (at load, one thread): the
/// files the library creates take their modes from it, not from a
/// `umask` the program sets later.
pub fn note_umask() {
    // SAFETY: umask cannot fail; the old value is put back at once.
    let old = unsafe { libc::syscall(libc::SYS_umask, 0o077) };
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_umask, old) };
    START_UMASK.store((old as u32) & 0o777, Relaxed);
}

/// The mode of a file the library creates: `0666` less the umask the
/// process started with, and always readable and writable by its owner
/// (hpcprof-rs, run by the same user, must read it).
fn file_mode() -> libc::mode_t {
    let umask = match START_UMASK.load(Relaxed) {
        u32::MAX => 0o022,
        m => m,
    };
    (0o666 & !umask) | 0o600
}

/// `open(path, flags | O_CLOEXEC, 0666)` for a file of the output
/// directory (through the pinned descriptor when there is one), above
/// the soft open-file limit when the program took every number below it
/// (`file_limits::open_with_spare`). A file it creates (`O_CREAT`) gets
/// [`file_mode`] whatever the program's umask is now (a program's
/// `umask(0777)` would make it unreadable).
pub fn open(path: &str, flags: c_int) -> io::Result<File> {
    let flags = flags | libc::O_CLOEXEC;
    let mode: libc::c_uint = 0o666;
    let relative = relative(path);
    let absolute = c_path(path)?;
    // (A descriptor table full to the soft limit: opened above it,
    // `file_limits`. Moved above the descriptor floor before a
    // `closefrom` of the program's in another thread may run: `floor`.)
    let fd = super::floor::opening_own(|| {
        let fd = super::file_limits::open_with_spare(|| {
            // SAFETY: NUL-terminated paths; the flags open or create a file.
            unsafe {
                match &relative {
                    Some((dir, rest)) => libc::openat(*dir, rest.as_ptr(), flags, mode),
                    None => libc::open(absolute.as_ptr(), flags, mode),
                }
            }
        });
        if fd < 0 {
            fd
        } else {
            super::floor::move_above_floor(fd)
        }
    });
    check(fd)?;
    if flags & libc::O_CREAT != 0 {
        // SAFETY: the descriptor just opened. (A failure, e.g. a shared
        // file of another user's, leaves the mode as it is.)
        unsafe { libc::fchmod(fd, file_mode()) };
    }
    // SAFETY: the descriptor just opened, owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `rename(from, to)` of files of the output directory.
pub fn rename(from: &str, to: &str) -> io::Result<()> {
    // SAFETY: NUL-terminated paths.
    check(unsafe {
        match (relative(from), relative(to)) {
            (Some((d, a)), Some((_, b))) => libc::renameat(d, a.as_ptr(), d, b.as_ptr()),
            _ => libc::rename(c_path(from)?.as_ptr(), c_path(to)?.as_ptr()),
        }
    })
}

/// `link(from, to)` of files of the output directory.
pub fn hard_link(from: &str, to: &str) -> io::Result<()> {
    // SAFETY: NUL-terminated paths.
    check(unsafe {
        match (relative(from), relative(to)) {
            (Some((d, a)), Some((_, b))) => libc::linkat(d, a.as_ptr(), d, b.as_ptr(), 0),
            _ => libc::link(c_path(from)?.as_ptr(), c_path(to)?.as_ptr()),
        }
    })
}

/// `unlink(path)` of a file of the output directory.
pub fn remove(path: &str) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    check(unsafe {
        match relative(path) {
            Some((d, rest)) => libc::unlinkat(d, rest.as_ptr(), 0),
            None => libc::unlink(c_path(path)?.as_ptr()),
        }
    })
}

/// True if `path` (a file of the output directory) exists.
pub fn exists(path: &str) -> bool {
    // SAFETY: a NUL-terminated path; F_OK checks existence only.
    unsafe {
        match relative(path) {
            Some((d, rest)) => libc::faccessat(d, rest.as_ptr(), libc::F_OK, 0) == 0,
            None => c_path(path).is_ok_and(|p| libc::access(p.as_ptr(), libc::F_OK) == 0),
        }
    }
}
