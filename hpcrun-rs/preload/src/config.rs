//! Configuration passed by `hpcrun-rs` through the environment: the
//! contract (variable names, grammars, defaults, [`Config`]) is the
//! `hpcrun-abi` crate's, shared with the launcher; this module reads it
//! once per process.

use std::sync::OnceLock;

pub use hpcrun_abi::config::{
    parse_checkpoint, parse_events, parse_watch, RunConfig as Config, DEFAULT_CHECKPOINT_MS,
};
pub use hpcrun_abi::event::{DEFAULT_PAGE_FAULT_PERIOD, DEFAULT_SOFT_PERIOD_NS};
pub use hpcrun_abi::histogram::parse as parse_histogram;

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Reads the configuration once (outside any signal handler).
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| Config::from_env(|name| std::env::var(name).ok()))
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
