//! The run configuration the launcher passes to the library through the
//! environment ([`crate::env`]), and the grammars of the values that are
//! not events ([`crate::event`]) or histogram layouts
//! ([`crate::histogram`]).

use formats::measurement::HistogramLayout;

use crate::event::Sources;
use crate::{env, histogram};

/// Default checkpoint interval (ms of wall time) when `HPCRUN_CHECKPOINT`
/// is not set (the launcher always sets it; see its `--checkpoint`).
pub const DEFAULT_CHECKPOINT_MS: u64 = 10_000;

/// Default of `HPCRUN_MIN_BYTES` (and `--min-bytes`).
pub const DEFAULT_MIN_BYTES: usize = 1024;

/// Default of `HPCRUN_SIGNAL` (and `--signal`): SIGRTMIN+4.
pub const DEFAULT_SIGNAL_OFFSET: i32 = 4;

/// The finest period (ns) that `Timer::Auto` gives to the POSIX CPU-time
/// timer: the kernel checks those timers at its scheduler tick (1 ms at
/// `CONFIG_HZ=1000`, 4 ms at 250), so a finer period would be a tick with
/// overruns; it gets the task-clock event instead.
pub const CPU_TIMER_MIN_PERIOD_NS: u64 = 1_000_000;

/// The timer behind `mem:soft` and `cpu-time` (`--timer`, `HPCRUN_TIMER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// `cpu-timer` at periods of `CPU_TIMER_MIN_PERIOD_NS` or more,
    /// `task-clock` below.
    Auto,
    /// A POSIX timer on the thread's user CPU time (`timer_create` on the
    /// thread's `CPUCLOCK_VIRT` clock; HPCToolkit's `CPUTIME` is the same
    /// kind of timer): checked at the scheduler tick, nothing to do at a
    /// context switch; a sample that stands for several periods (the tick
    /// is coarser than the period) carries their number.
    CpuTimer,
    /// A software task-clock perf event per thread: exact periods, user
    /// time only; the kernel stops and restarts its timer at every context
    /// switch of the thread.
    TaskClock,
}

impl Timer {
    /// Parses `auto`, `cpu-timer`, `task-clock`.
    pub fn parse(s: &str) -> Option<Timer> {
        match s {
            "auto" => Some(Timer::Auto),
            "cpu-timer" => Some(Timer::CpuTimer),
            "task-clock" => Some(Timer::TaskClock),
            _ => None,
        }
    }

    /// True if a timer source of this period samples with the CPU-time
    /// timer (else the task-clock event).
    pub fn uses_cpu_timer(self, period_ns: u64) -> bool {
        match self {
            Timer::Auto => period_ns >= CPU_TIMER_MIN_PERIOD_NS,
            Timer::CpuTimer => true,
            Timer::TaskClock => false,
        }
    }
}

/// What the profiled process was asked to measure.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Absolute output directory; `None` disables writing (library loaded
    /// without hpcrun-rs).
    pub out_dir: Option<String>,
    /// Period of the timer source in ns; 0 = no timer sampling.
    pub period_ns: u64,
    /// Name of the timer source that runs (`mem:soft`, `cpu-time`,
    /// `mem:latency`, `mem:stores`), or `none`.
    pub event: String,
    /// The timer behind `mem:soft` and `cpu-time`.
    pub timer: Timer,
    /// Period of the `page-faults` source, when it runs.
    pub page_faults: Option<u64>,
    /// Offset histogram layout of data objects.
    pub histogram: HistogramLayout,
    /// Record NUMA locality even on a one-node machine.
    pub numa: bool,
    pub min_bytes: usize,
    /// The most bytes the small-block map's tables may take (0: 64 MiB
    /// or half the live small blocks' bytes, whichever is more).
    pub max_tracking_memory: u64,
    /// Keep a record of every tracked block (address, size, site, times)
    /// and write each thread's in its file (`--alloc-log`).
    pub alloc_log: bool,
    pub run_id: String,
    /// Real-time signal offset from SIGRTMIN used for samples.
    pub signal_offset: i32,
    /// Interval of the profile checkpoints in ms of wall time; 0: none.
    pub checkpoint_ms: u64,
    /// `sharing[@N]`: arm sharing watchpoints every N-th sample; 0: off.
    pub sharing_every: u32,
    /// `reuse[@N]`: arm the reuse watchpoint every N-th sample; 0: off.
    pub reuse_every: u32,
    /// The launcher's pid ([`env::LAUNCHER_PID`]), if set.
    pub launcher_pid: Option<u32>,
}

impl RunConfig {
    /// Reads the configuration through `var` (`std::env::var` in the
    /// library; a map in tests). Missing or malformed values take their
    /// defaults.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> RunConfig {
        let out_dir = var(env::OUT).filter(|s| !s.is_empty());
        let events = var(env::EVENTS).unwrap_or_default();
        let (event, period_ns, page_faults) = parse_events(&events);
        let sources = Sources::from_env(&events);
        RunConfig {
            out_dir,
            period_ns,
            event,
            timer: var(env::TIMER)
                .and_then(|s| Timer::parse(&s))
                .unwrap_or(Timer::Auto),
            page_faults,
            histogram: histogram::parse(&var(env::HISTOGRAM).unwrap_or_default())
                .unwrap_or_default(),
            numa: var(env::NUMA).is_some_and(|v| v == "1"),
            min_bytes: var(env::MIN_BYTES)
                .and_then(|s| s.parse().ok())
                .unwrap_or(DEFAULT_MIN_BYTES),
            max_tracking_memory: var(env::MAX_TRACKING_MEMORY)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            alloc_log: var(env::ALLOC_LOG).is_some_and(|v| v == "1"),
            run_id: var(env::RUN_ID).unwrap_or_default(),
            signal_offset: var(env::SIGNAL)
                .and_then(|s| s.parse().ok())
                .unwrap_or(DEFAULT_SIGNAL_OFFSET),
            checkpoint_ms: var(env::CHECKPOINT)
                .and_then(|s| parse_checkpoint(&s))
                .unwrap_or(DEFAULT_CHECKPOINT_MS),
            sharing_every: sources.sharing_every,
            reuse_every: sources.reuse_every,
            launcher_pid: var(env::LAUNCHER_PID)
                .and_then(|s| s.parse().ok())
                .filter(|&p| p > 0),
        }
    }
}

/// The sources named in `HPCRUN_EVENTS` ("mem:soft@500000,page-faults@1"):
/// (timer source, its period, page-fault period). No list means
/// `mem:soft` at its default period; a list without a timer source means
/// no timer (`none`).
pub fn parse_events(spec: &str) -> (String, u64, Option<u64>) {
    let sources = Sources::from_env(spec);
    match sources.timer {
        Some((event, period)) => (event.name().to_string(), period, sources.page_faults),
        None => ("none".to_string(), 0, sources.page_faults),
    }
}

/// The watchpoint analyses named in `HPCRUN_EVENTS` (`sharing[@N]`,
/// `reuse[@N]`): every how many samples each arms (0: not asked for).
pub fn parse_watch(spec: &str) -> (u32, u32) {
    let sources = Sources::from_env(spec);
    (sources.sharing_every, sources.reuse_every)
}

/// Parses `HPCRUN_CHECKPOINT` (seconds, decimals allowed; 0 disables)
/// into ms.
pub fn parse_checkpoint(spec: &str) -> Option<u64> {
    let secs: f64 = spec.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{DEFAULT_PAGE_FAULT_PERIOD, DEFAULT_SOFT_PERIOD_NS};
    use formats::measurement::HistogramLayout;

    #[test]
    fn event_lists() {
        assert_eq!(
            parse_events(""),
            ("mem:soft".into(), DEFAULT_SOFT_PERIOD_NS, None)
        );
        assert_eq!(
            parse_events("cpu-time@100000"),
            ("cpu-time".into(), 100000, None)
        );
        assert_eq!(
            parse_events("mem:soft@200000,page-faults"),
            ("mem:soft".into(), 200000, Some(DEFAULT_PAGE_FAULT_PERIOD))
        );
        assert_eq!(parse_events("page-faults@16"), ("none".into(), 0, Some(16)));
    }

    #[test]
    fn timers() {
        assert_eq!(Timer::parse("cpu-timer"), Some(Timer::CpuTimer));
        assert_eq!(Timer::parse("perf"), None);
        assert!(Timer::Auto.uses_cpu_timer(DEFAULT_SOFT_PERIOD_NS));
        assert!(!Timer::Auto.uses_cpu_timer(100_000));
        assert!(Timer::CpuTimer.uses_cpu_timer(100_000));
        assert!(!Timer::TaskClock.uses_cpu_timer(DEFAULT_SOFT_PERIOD_NS));
        assert_eq!(RunConfig::from_env(|_| None).timer, Timer::Auto);
    }

    #[test]
    fn checkpoint_intervals() {
        assert_eq!(parse_checkpoint("1"), Some(1000));
        assert_eq!(parse_checkpoint("0.25"), Some(250));
        assert_eq!(parse_checkpoint("0"), Some(0));
        assert_eq!(parse_checkpoint("-1"), None);
        assert_eq!(parse_checkpoint("soon"), None);
    }

    #[test]
    fn histogram_layouts() {
        assert_eq!(histogram::parse(""), Some(HistogramLayout::Fraction(32)));
        assert_eq!(histogram::parse("10"), Some(HistogramLayout::Fraction(10)));
        assert!(matches!(
            histogram::parse("cacheline"),
            Some(HistogramLayout::Bytes { size: 64, .. })
        ));
        assert!(matches!(
            histogram::parse("bytes:256"),
            Some(HistogramLayout::Bytes { size: 256, .. })
        ));
        assert_eq!(histogram::parse("0"), None);
        assert_eq!(histogram::parse("lines"), None);
    }

    #[test]
    fn from_a_map() {
        let vars = [
            (env::OUT, "/tmp/m"),
            (env::EVENTS, "cpu-time@100000,reuse@2"),
            (env::HISTOGRAM, "page"),
            (env::CHECKPOINT, "0.5"),
            (env::ALLOC_LOG, "1"),
            (env::TIMER, "task-clock"),
        ];
        let cfg = RunConfig::from_env(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        });
        assert_eq!(cfg.out_dir.as_deref(), Some("/tmp/m"));
        assert_eq!((cfg.event.as_str(), cfg.period_ns), ("cpu-time", 100000));
        assert_eq!((cfg.sharing_every, cfg.reuse_every), (0, 2));
        assert_eq!(cfg.checkpoint_ms, 500);
        assert_eq!(cfg.min_bytes, DEFAULT_MIN_BYTES);
        assert!(cfg.alloc_log);
        assert_eq!(cfg.timer, Timer::TaskClock);
        assert!(!RunConfig::from_env(|_| None).alloc_log);
        assert_eq!(cfg.signal_offset, DEFAULT_SIGNAL_OFFSET);
        assert!(matches!(
            cfg.histogram,
            HistogramLayout::Bytes { size: 4096, .. }
        ));
    }
}
