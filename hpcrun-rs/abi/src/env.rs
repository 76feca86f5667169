//! The environment variables the launcher sets for the preload library.

/// Absolute output directory; unset: the library stays passive.
pub const OUT: &str = "HPCRUN_OUT";
/// The events, `NAME@PERIOD` separated by commas ([`crate::event`]).
pub const EVENTS: &str = "HPCRUN_EVENTS";
/// Smallest heap block tracked with its call path (bytes).
pub const MIN_BYTES: &str = "HPCRUN_MIN_BYTES";
/// The most memory (bytes) the small-block map's tables may take; unset
/// or 0: 64 MiB or half the live small blocks' bytes, whichever is more.
pub const MAX_TRACKING_MEMORY: &str = "HPCRUN_MAX_TRACKING_MEMORY";
/// `1`: keep a record of every tracked block (`--alloc-log`).
pub const ALLOC_LOG: &str = "HPCRUN_ALLOC_LOG";
/// The timer behind `mem:soft` and `cpu-time`: `auto`, `cpu-timer` or
/// `task-clock` ([`crate::config::Timer`]).
pub const TIMER: &str = "HPCRUN_TIMER";
/// The run's identifier (shared by every process of the run).
pub const RUN_ID: &str = "HPCRUN_RUN_ID";
/// The sample signal as an offset from SIGRTMIN.
pub const SIGNAL: &str = "HPCRUN_SIGNAL";
/// The offset-histogram layout ([`crate::histogram`]).
pub const HISTOGRAM: &str = "HPCRUN_HISTOGRAM";
/// `1`: record NUMA locality even on a one-node machine.
pub const NUMA: &str = "HPCRUN_NUMA";
/// Checkpoint interval in seconds (decimals allowed; 0: none).
pub const CHECKPOINT: &str = "HPCRUN_CHECKPOINT";
/// The chosen hardware event's attributes (`pmu::sysfs::HwAttr::to_env`).
pub const HW_ATTR: &str = "HPCRUN_HW_ATTR";
/// The launcher's override of the preload library's path.
pub const PRELOAD: &str = "HPCRUN_PRELOAD";
/// The launcher's process id: its direct child tells the copies of
/// SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 the launcher forwarded
/// (`si_code` `SI_QUEUE`, `si_value` [`forward_mark`]) from those sent to
/// it directly.
pub const LAUNCHER_PID: &str = "HPCRUN_LAUNCHER_PID";

/// The `si_value` of a signal the launcher `launcher_pid` forwarded on
/// behalf of a `kill` (its `si_code` is `SI_QUEUE`, its `si_pid` and
/// `si_uid` the sender's): a constant in the high half, the launcher's
/// pid in the low one.
pub fn forward_mark(launcher_pid: u32) -> u64 {
    (0x4850_4657u64 << 32) | u64::from(launcher_pid)
}
