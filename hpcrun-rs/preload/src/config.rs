//! Configuration passed by `hpcrun-rs` through the environment.

use std::sync::OnceLock;

/// Environment variable names (the contract with `hpcrun-rs`).
pub const ENV_OUT: &str = "HPCRUN_OUT";
pub const ENV_EVENTS: &str = "HPCRUN_EVENTS";
pub const ENV_MIN_BYTES: &str = "HPCRUN_MIN_BYTES";
pub const ENV_RUN_ID: &str = "HPCRUN_RUN_ID";
pub const ENV_SIGNAL: &str = "HPCRUN_SIGNAL";
pub const ENV_HISTOGRAM: &str = "HPCRUN_HISTOGRAM";
pub const ENV_NUMA: &str = "HPCRUN_NUMA";
pub const ENV_CHECKPOINT: &str = "HPCRUN_CHECKPOINT";

/// Default checkpoint interval (ms of wall time) when `HPCRUN_CHECKPOINT`
/// is not set (the launcher always sets it; see its `--checkpoint`).
pub const DEFAULT_CHECKPOINT_MS: u64 = 10_000;

/// Default period of the timer sources (`mem:soft`, `cpu-time`) in ns of
/// thread CPU time: 2 ms, 500 samples per second per thread. Each sample
/// costs the kernel a timer interrupt and a signal frame (about 20 us in a
/// KVM guest, empty handler), so 500 us cost 4-9% of wall time and 1 ms
/// still 2-4.5% on memory-bound examples (docs/PERFORMANCE.md), over the
/// 3% budget. Signal-based samplers default coarser still (gperftools:
/// 100 Hz); `-e mem:soft@NS` sets any period.
pub const DEFAULT_SOFT_PERIOD_NS: u64 = 2_000_000;
/// Default period of `page-faults`: every fault (first touch needs them all).
pub const DEFAULT_PAGE_FAULT_PERIOD: u64 = 1;

/// What the profiled process was asked to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Absolute output directory; `None` disables writing (library loaded
    /// without hpcrun-rs).
    pub out_dir: Option<String>,
    /// Period of the timer source in ns; 0 = no timer sampling.
    pub period_ns: u64,
    /// Name of the timer source that runs (`mem:soft` or `cpu-time`), or
    /// `none`.
    pub event: String,
    /// Period of the `page-faults` source, when it runs.
    pub page_faults: Option<u64>,
    /// Offset histogram layout of data objects.
    pub histogram: formats::measurement::HistogramLayout,
    /// Record NUMA locality even on a one-node machine.
    pub numa: bool,
    pub min_bytes: usize,
    pub run_id: String,
    /// Real-time signal offset from SIGRTMIN used for samples.
    pub signal_offset: i32,
    /// Interval of the profile checkpoints in ms of wall time; 0: none.
    pub checkpoint_ms: u64,
    /// `sharing[@N]`: arm sharing watchpoints every N-th sample; 0: off.
    pub sharing_every: u32,
    /// `reuse[@N]`: arm the reuse watchpoint every N-th sample; 0: off.
    pub reuse_every: u32,
}

/// The watchpoint analyses named in `HPCRUN_EVENTS` (`sharing[@N]`,
/// `reuse[@N]`): every how many samples each arms (0: not asked for).
pub fn parse_watch(spec: &str) -> (u32, u32) {
    let mut out = (0, 0);
    for item in spec.split(',') {
        let (name, n) = match item.split_once('@') {
            Some((n, p)) => (n, p.parse().ok().filter(|&p: &u32| p > 0)),
            None => (item, None),
        };
        match name {
            "sharing" => out.0 = n.unwrap_or(DEFAULT_WATCH_EVERY),
            "reuse" => out.1 = n.unwrap_or(DEFAULT_WATCH_EVERY),
            _ => {}
        }
    }
    out
}

/// Default of `sharing[@N]` and `reuse[@N]`: every sample.
pub const DEFAULT_WATCH_EVERY: u32 = 1;

/// Parses `HPCRUN_CHECKPOINT` (seconds, decimals allowed; 0 disables).
pub fn parse_checkpoint(spec: &str) -> Option<u64> {
    let secs: f64 = spec.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).round() as u64)
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The sources named in `HPCRUN_EVENTS` ("mem:soft@500000,page-faults@1"):
/// (timer source, its period, page-fault period). No list means
/// `mem:soft` at its default period; a list without a timer source means
/// no timer (`none`).
pub fn parse_events(spec: &str) -> (String, u64, Option<u64>) {
    let mut timer: Option<(String, u64)> = None;
    let mut page_faults = None;
    let mut any = false;
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (name, p) = match item.split_once('@') {
            Some((n, p)) => (n, p.parse().ok().filter(|&p: &u64| p > 0)),
            None => (item, None),
        };
        // Analyses of a timer source's samples, not sources.
        if matches!(name, "sharing" | "reuse") {
            continue;
        }
        any = true;
        match name {
            "page-faults" => page_faults = Some(p.unwrap_or(DEFAULT_PAGE_FAULT_PERIOD)),
            _ if timer.is_none() => {
                timer = Some((name.to_string(), p.unwrap_or(DEFAULT_SOFT_PERIOD_NS)))
            }
            _ => {}
        }
    }
    match timer {
        Some((name, period)) => (name, period, page_faults),
        None if any => ("none".to_string(), 0, page_faults),
        None => ("mem:soft".to_string(), DEFAULT_SOFT_PERIOD_NS, page_faults),
    }
}

/// Parses `HPCRUN_HISTOGRAM`: `N` equal buckets (default 32), `cacheline`
/// (64-byte buckets) or `page` (4 KiB buckets), or `bytes:N`.
pub fn parse_histogram(spec: &str) -> Option<formats::measurement::HistogramLayout> {
    use formats::measurement::HistogramLayout;
    const MAX_BUCKETS: u32 = 1 << 16;
    let bytes = |size| HistogramLayout::Bytes {
        size,
        max_buckets: MAX_BUCKETS,
    };
    match spec.trim() {
        "" => Some(HistogramLayout::default()),
        "cacheline" => Some(bytes(64)),
        "page" => Some(bytes(4096)),
        s => match s.strip_prefix("bytes:") {
            Some(n) => n.parse().ok().filter(|&n| n > 0).map(bytes),
            None => s
                .parse()
                .ok()
                .filter(|&n| n > 0 && n <= MAX_BUCKETS)
                .map(HistogramLayout::Fraction),
        },
    }
}

/// Reads the configuration once (outside any signal handler).
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| {
        let out_dir = std::env::var(ENV_OUT).ok().filter(|s| !s.is_empty());
        let (event, period_ns, page_faults) =
            parse_events(&std::env::var(ENV_EVENTS).unwrap_or_default());
        let histogram =
            parse_histogram(&std::env::var(ENV_HISTOGRAM).unwrap_or_default()).unwrap_or_default();
        let numa = std::env::var(ENV_NUMA).is_ok_and(|v| v == "1");
        let min_bytes = std::env::var(ENV_MIN_BYTES)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1024);
        let run_id = std::env::var(ENV_RUN_ID).unwrap_or_default();
        let signal_offset = std::env::var(ENV_SIGNAL)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(4);
        let checkpoint_ms = std::env::var(ENV_CHECKPOINT)
            .ok()
            .and_then(|s| parse_checkpoint(&s))
            .unwrap_or(DEFAULT_CHECKPOINT_MS);
        let (sharing_every, reuse_every) =
            parse_watch(&std::env::var(ENV_EVENTS).unwrap_or_default());
        Config {
            sharing_every,
            reuse_every,
            checkpoint_ms,
            out_dir,
            period_ns,
            event,
            page_faults,
            histogram,
            numa,
            min_bytes,
            run_id,
            signal_offset,
        }
    })
}

/// The configuration if it has been read.
pub fn try_get() -> Option<&'static Config> {
    CONFIG.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::measurement::HistogramLayout;

    #[test]
    fn event_lists() {
        assert_eq!(
            parse_events(""),
            ("mem:soft".into(), DEFAULT_SOFT_PERIOD_NS, None)
        );
        assert_eq!(
            parse_events("cpu-time@1000"),
            ("cpu-time".into(), 1000, None)
        );
        assert_eq!(
            parse_events("mem:soft@2000,page-faults"),
            ("mem:soft".into(), 2000, Some(1))
        );
        assert_eq!(parse_events("page-faults@16"), ("none".into(), 0, Some(16)));
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
        assert_eq!(parse_histogram(""), Some(HistogramLayout::Fraction(32)));
        assert_eq!(parse_histogram("10"), Some(HistogramLayout::Fraction(10)));
        assert!(matches!(
            parse_histogram("cacheline"),
            Some(HistogramLayout::Bytes { size: 64, .. })
        ));
        assert!(matches!(
            parse_histogram("bytes:256"),
            Some(HistogramLayout::Bytes { size: 256, .. })
        ));
        assert_eq!(parse_histogram("0"), None);
        assert_eq!(parse_histogram("lines"), None);
    }
}
