//! Standard descriptors closed by the launcher's caller (`hpcrun-rs ...
//! <&-`): the program starts with them closed, as it would have without
//! hpcrun-rs. Rust's runtime opens `/dev/null` on a closed descriptor 0,
//! 1 or 2 before `main` (so that no file of the launcher's lands there).
//! A constructor that runs before it notes which were closed; they are
//! closed again in the child ([`restore_in_child`]), and the program's
//! first `open` gets descriptor 0 as it would natively.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Bit i: descriptor i (0, 1, 2) was closed when the process started.
static CLOSED_AT_START: AtomicU8 = AtomicU8::new(0);

/// Runs before Rust's runtime (from `.init_array`), which would open
/// `/dev/null` on the closed standard descriptors.
extern "C" fn note_closed_stdio() {
    let mut closed = 0;
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor's flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            closed |= 1 << fd;
        }
    }
    CLOSED_AT_START.store(closed, Relaxed);
}

#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STDIO: extern "C" fn() = note_closed_stdio;

/// In the child, before `exec`: the standard descriptors closed at start
/// are closed again. Async-signal-safe.
pub fn restore_in_child() {
    let closed = CLOSED_AT_START.load(Relaxed);
    for fd in 0..3 {
        if closed & (1 << fd) != 0 {
            // SAFETY: closes one of the child's own descriptors.
            unsafe { libc::close(fd) };
        }
    }
}
