//! Sandboxes: seccomp filters and refused memory, and the notices that
//! say how they limited the measurement.
//!
//! * A filter present when the process started (a container's, a
//!   launcher's): the profiler's start-up calls passed it. The helper
//!   thread is then not named (an optional call) and a note says the
//!   filter was there.
//! * A filter the program installs (the interposed `prctl` and `syscall`
//!   see it before the kernel does): if it only makes refused calls fail
//!   with an errno, measuring goes on and the profiler's calls that fail
//!   take their failure paths. If it can kill (or trap) on a refused call,
//!   the profiler writes every profile right then, before the filter is
//!   in place, and makes no call of its own after it: no sampling, no
//!   tracking, nothing at thread creation, nothing at exit
//!   ([`quiet`]).
//! * The kernel refused the library a mapping, or under an address-space
//!   limit a mapping would have left the program less than its headroom
//!   (`sys::heap::refused`, `sys::mem::limit`): the hooks stop tracking
//!   new blocks, the call-path trees stop growing, new threads are not
//!   measured and checkpoints are skipped (counted:
//!   [`checkpoint_skipped`]), so that the heap's reserve lasts until the
//!   profiles are written.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

use crate::sys;

/// What the program did to the profiler's system calls.
const NONE: u8 = 0;
/// A filter that makes refused calls fail with an errno.
const ERRNO_FILTER: u8 = 1;
/// A filter that may kill the process at a call it refuses.
const KILLING_FILTER: u8 = 2;

static INSTALLED: AtomicU8 = AtomicU8::new(NONE);
static INSTALLED_AT_NS: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
/// The seccomp mode the process started in (`sys::seccomp`).
static MODE_AT_START: AtomicU32 = AtomicU32::new(0);

/// At load: the clock's start and the mode the process started in.
pub fn init() {
    START_NS.store(sys::monotonic_ns(), Relaxed);
    MODE_AT_START.store(sys::seccomp::mode_from_status(), Relaxed);
}

/// True if the process started under a seccomp filter (or strict mode).
pub fn filtered_at_start() -> bool {
    MODE_AT_START.load(Relaxed) != 0
}

/// Records that the program is installing a filter (`kills`: one that
/// may end the process at a refused call). True when the profiler must
/// write everything now and go quiet.
pub fn installing(kills: bool) -> bool {
    let kind = if kills { KILLING_FILTER } else { ERRNO_FILTER };
    let before = INSTALLED.fetch_max(kind, Relaxed);
    if before == NONE || (kills && before != KILLING_FILTER) {
        INSTALLED_AT_NS.store(sys::monotonic_ns(), Relaxed);
    }
    kills && before != KILLING_FILTER
}

/// True once a filter that may kill on a refused call is installed: the
/// profiler makes no system call of its own any more.
#[inline]
pub fn quiet() -> bool {
    INSTALLED.load(Relaxed) == KILLING_FILTER
}

/// Checkpoints of threads that were due after the kernel refused the
/// library's heap a mapping, not written (`output::checkpoint`).
static CHECKPOINTS_SKIPPED: AtomicU64 = AtomicU64::new(0);

/// Counts a checkpoint not written because the kernel refused the
/// library's heap memory (told in its notice, [`notices`]).
pub fn checkpoint_skipped() {
    CHECKPOINTS_SKIPPED.fetch_add(1, Relaxed);
}

/// In a forked child: the parent's skipped checkpoints are told in the
/// parent's notice.
pub fn reset_after_fork() {
    CHECKPOINTS_SKIPPED.store(0, Relaxed);
}

/// Seconds since load of a CLOCK_MONOTONIC time.
fn secs(at_ns: u64) -> f64 {
    at_ns.saturating_sub(START_NS.load(Relaxed)) as f64 / 1e9
}

/// The notices of this process's sandbox, for its main thread's profile
/// (`notices::process_wide`); each opens with "measurement limited".
pub fn notices() -> Vec<String> {
    let mut out = Vec::new();
    let at = secs(INSTALLED_AT_NS.load(Relaxed));
    match INSTALLED.load(Relaxed) {
        KILLING_FILTER => out.push(format!(
            "measurement limited: the program installed a seccomp filter that kills (or traps) on calls it does not allow, at {at:.3} s: the profiler wrote every profile then, before the filter took effect, and measured nothing after it (no samples, no heap blocks, no new threads), so that none of its own calls could end the program"
        )),
        ERRNO_FILTER => out.push(format!(
            "measurement limited: the program installed a seccomp filter at {at:.3} s (refused calls fail with an error); the profiler's calls it refuses failed and what they would have measured is missing"
        )),
        _ => {}
    }
    if filtered_at_start() && INSTALLED.load(Relaxed) == NONE {
        out.push(
            "note: the process started under a seccomp filter (the Seccomp line of /proc/self/status); the profiler's start-up calls passed it, and it made no optional call (its helper thread is not named)".to_string(),
        );
    }
    if let Some((errno, at_ns)) = sys::heap::refused() {
        let skipped = CHECKPOINTS_SKIPPED.load(Relaxed);
        let checkpoints = if skipped > 0 {
            format!("; {skipped} checkpoints of threads due after that were not written (the final profiles needed the reserve)")
        } else {
            String::new()
        };
        let symbols = crate::code::modules::symbols_left_out();
        let symbols = if symbols > 0 {
            format!("; the symbols of {symbols} loaded modules were not read (the reserve could not spare them): samples in their code are decoded without function boundaries (a backward guess) and their static variables are not named")
        } else {
            String::new()
        };
        let why = match sys::address_space_limit() {
            Some(limit) if sys::mem::limit::refused_for_headroom() => format!(
                "the profiler's memory reached the process's address-space limit (ulimit -v {} KiB; the profiler leaves the last {} KiB of it to the program)",
                limit >> 10,
                sys::mem::limit::headroom_bytes(limit) >> 10
            ),
            _ => format!(
                "the kernel refused the profiler memory (mmap failed, errno {errno}: {})",
                std::io::Error::from_raw_os_error(errno)
            ),
        };
        out.push(format!(
            "measurement limited: {why} at {:.3} s: heap blocks allocated and threads started after that are not measured (the blocks count in no object), call paths first reached after that are not recorded (their samples are dropped as \"tree full\") and the profiles were written from the profiler's reserve{checkpoints}{symbols}",
            secs(at_ns)
        ));
    }
    out
}
