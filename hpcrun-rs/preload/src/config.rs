//! Configuration passed by `hpcrun-rs` through the environment.

use std::sync::OnceLock;

/// Environment variable names (the contract with `hpcrun-rs`).
pub const ENV_OUT: &str = "HPCRUN_OUT";
pub const ENV_EVENTS: &str = "HPCRUN_EVENTS";
pub const ENV_MIN_BYTES: &str = "HPCRUN_MIN_BYTES";
pub const ENV_RUN_ID: &str = "HPCRUN_RUN_ID";
pub const ENV_SIGNAL: &str = "HPCRUN_SIGNAL";

/// Default sampling period of `mem:soft`, in nanoseconds of thread CPU time.
pub const DEFAULT_SOFT_PERIOD_NS: u64 = 500_000;

/// What the profiled process was asked to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Absolute output directory; `None` disables writing (library loaded
    /// without hpcrun-rs).
    pub out_dir: Option<String>,
    /// Sampling period in ns; 0 = no sampling (allocation tracking only).
    pub period_ns: u64,
    /// Name of the sample source that runs.
    pub event: String,
    pub min_bytes: usize,
    pub run_id: String,
    /// Real-time signal offset from SIGRTMIN used for samples.
    pub signal_offset: i32,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Parses `HPCRUN_EVENTS` ("mem:soft@500000,...").
pub fn parse_events(spec: &str) -> (String, u64) {
    let mut event = String::from("mem:soft");
    let mut period = DEFAULT_SOFT_PERIOD_NS;
    if let Some(first) = spec.split(',').find(|s| !s.is_empty()) {
        let (name, p) = match first.split_once('@') {
            Some((n, p)) => (n, p.parse().ok()),
            None => (first, None),
        };
        event = name.to_string();
        if let Some(p) = p {
            period = p;
        }
    }
    (event, period)
}

/// Reads the configuration once (outside any signal handler).
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| {
        let out_dir = std::env::var(ENV_OUT).ok().filter(|s| !s.is_empty());
        let (event, period_ns) = parse_events(&std::env::var(ENV_EVENTS).unwrap_or_default());
        let min_bytes = std::env::var(ENV_MIN_BYTES)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1024);
        let run_id = std::env::var(ENV_RUN_ID).unwrap_or_default();
        let signal_offset = std::env::var(ENV_SIGNAL)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(4);
        Config {
            out_dir,
            period_ns,
            event,
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
