//! `getppid`. A process whose parent ends is given to the launcher, not
//! to init: `hpcrun-rs` makes itself the run's subreaper, to wait for the
//! daemons and background jobs the program leaves behind. Natively its
//! `getppid` would then say 1, and programs wait for that to learn that
//! their parent is gone (a child that polls for its parent's end, a
//! daemon's double fork). The interposed `getppid` says 1 when the real
//! parent is the launcher but the process did not start as its child.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::sys;

/// The launcher's pid (0: not run by hpcrun-rs).
static LAUNCHER: AtomicU32 = AtomicU32::new(0);
/// The process's parent when it started (at load, or at its `fork`).
static FIRST_PARENT: AtomicU32 = AtomicU32::new(0);

/// At load, in a process that `hpcrun-rs` (pid `launcher`) runs.
pub fn note(launcher: Option<u32>) {
    let Some(launcher) = launcher else {
        return;
    };
    LAUNCHER.store(launcher, Relaxed);
    FIRST_PARENT.store(sys::getppid(), Relaxed);
    sys::at_fork(after_fork_in_child);
}

extern "C" fn after_fork_in_child() {
    FIRST_PARENT.store(sys::getppid(), Relaxed);
}

/// POSIX's getppid (async-signal-safe, as libc's).
#[no_mangle]
pub extern "C" fn getppid() -> libc::pid_t {
    let parent = sys::getppid();
    let launcher = LAUNCHER.load(Relaxed);
    let first = FIRST_PARENT.load(Relaxed);
    if launcher != 0 && parent == launcher && first != 0 && first != launcher {
        return 1;
    }
    parent as libc::pid_t
}
