//! The events of `-e` and `HPCRUN_EVENTS`: their names, default periods,
//! and the list grammar `NAME[@PERIOD],...`.
//!
//! A run has at most one *timer source* (`mem:soft`, `cpu-time`, or a
//! hardware memory event), optionally `page-faults`, and the watchpoint
//! *analyses* `sharing` and `reuse`, which run on the timer source's
//! samples (their period is "every N-th sample").

use std::fmt;
use std::str::FromStr;

/// Default period of the timer sources (`mem:soft`, `cpu-time`) in ns of
/// thread CPU time: 2 ms, 500 samples per second per thread. Each sample
/// costs the kernel a timer interrupt and a signal frame (about 20 us in a
/// KVM guest, empty handler), so 500 us cost 4-9% of wall time and 1 ms
/// still 2-4.5% on memory-bound examples (docs/PERFORMANCE.md), over the
/// 3% budget. Signal-based samplers default coarser still (gperftools:
/// 100 Hz); `-e mem:soft@NS` sets any period.
pub const DEFAULT_SOFT_PERIOD_NS: u64 = 2_000_000;

/// The shortest period of the timer sources (`mem:soft`, `cpu-time`):
/// 20 us. Each sample costs a signal and the handler (10-20 us in a KVM
/// guest, more on a cold first decode), so shorter periods leave the
/// program little or no time between samples (at 5-10 us programs made
/// no progress for minutes). The launcher refuses shorter ones; the
/// library raises a shorter `HPCRUN_EVENTS` period to it.
pub const MIN_TIMER_PERIOD_NS: u64 = 20_000;

/// Default period of `page-faults`: every 256th fault. A sampled fault
/// costs about 35 us (signal, unwind, record; measured on examples/
/// first_touch's serial initialisation, 65,536 faults: 0.5 s native, 2.8 s
/// at every fault), so a fault-bound phase slows down by about 2% at 256;
/// `page-faults@1` samples every fault (exact first-touch page counts).
pub const DEFAULT_PAGE_FAULT_PERIOD: u64 = 256;

/// Default of `sharing[@N]` and `reuse[@N]`: watchpoints armed at every
/// sample of the timer source.
pub const DEFAULT_WATCH_EVERY: u64 = 1;

/// One event name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    /// Software memory-access sampling on a task-clock timer.
    MemSoft,
    /// Plain task-clock sampling, code-centric only.
    CpuTime,
    /// Page faults with their data addresses.
    PageFaults,
    /// Hardware load-latency sampling (PEBS, IBS, SPE).
    MemLatency,
    /// Hardware store sampling.
    MemStores,
    /// Watchpoint analysis: which other thread touches the line next.
    Sharing,
    /// Watchpoint analysis: when the same thread touches the word again.
    Reuse,
}

impl Event {
    /// Every event, in the order of the help text.
    pub const ALL: [Event; 7] = [
        Event::MemSoft,
        Event::CpuTime,
        Event::PageFaults,
        Event::MemLatency,
        Event::MemStores,
        Event::Sharing,
        Event::Reuse,
    ];

    /// The name of `-e` and `HPCRUN_EVENTS`.
    pub fn name(self) -> &'static str {
        match self {
            Event::MemSoft => "mem:soft",
            Event::CpuTime => "cpu-time",
            Event::PageFaults => "page-faults",
            Event::MemLatency => "mem:latency",
            Event::MemStores => "mem:stores",
            Event::Sharing => "sharing",
            Event::Reuse => "reuse",
        }
    }

    /// The period when none is given; `None` for the hardware events,
    /// whose default depends on the PMU (`pmu::sysfs::HwAttr`).
    pub fn default_period(self) -> Option<u64> {
        match self {
            Event::MemSoft | Event::CpuTime => Some(DEFAULT_SOFT_PERIOD_NS),
            Event::PageFaults => Some(DEFAULT_PAGE_FAULT_PERIOD),
            Event::Sharing | Event::Reuse => Some(DEFAULT_WATCH_EVERY),
            Event::MemLatency | Event::MemStores => None,
        }
    }

    /// A watchpoint analysis of the timer source's samples.
    pub fn is_analysis(self) -> bool {
        matches!(self, Event::Sharing | Event::Reuse)
    }

    /// A timer source (one per run).
    pub fn is_timer(self) -> bool {
        !self.is_analysis() && self != Event::PageFaults
    }

    /// A hardware memory event.
    pub fn is_hardware(self) -> bool {
        matches!(self, Event::MemLatency | Event::MemStores)
    }

    /// The unit of the period: ns, faults, samples, or events.
    pub fn period_unit(self) -> &'static str {
        match self {
            Event::PageFaults => "faults",
            Event::Sharing | Event::Reuse => "samples",
            Event::MemLatency | Event::MemStores => "events",
            Event::MemSoft | Event::CpuTime => "ns",
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown event name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEvent(pub String);

impl fmt::Display for UnknownEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Event::ALL.iter().map(|e| e.name()).collect();
        write!(
            f,
            "unknown event '{}' (known: {})",
            self.0,
            known.join(", ")
        )
    }
}

impl std::error::Error for UnknownEvent {}

impl FromStr for Event {
    type Err = UnknownEvent;
    fn from_str(s: &str) -> Result<Event, UnknownEvent> {
        Event::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| UnknownEvent(s.to_string()))
    }
}

/// One item of an event list: `NAME` or `NAME@PERIOD`, the name not yet
/// checked and the period `None` when absent, `Some(None)` when it is not a
/// positive integer.
pub fn split_item(item: &str) -> (&str, Option<Option<u64>>) {
    match item.split_once('@') {
        Some((name, p)) => (name, Some(p.parse().ok().filter(|&p| p > 0))),
        None => (item, None),
    }
}

/// The items of an event list (`,`-separated, empty items skipped).
pub fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').filter(|s| !s.is_empty())
}

/// The `HPCRUN_EVENTS` value for events and their periods.
pub fn to_env(events: &[(Event, u64)]) -> String {
    events
        .iter()
        .map(|(e, p)| format!("{e}@{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the library runs, read from `HPCRUN_EVENTS`. The launcher writes
/// a checked list; the library reads it leniently (a bad period is the
/// default one, an unknown item is skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    /// The timer source and its period; `None`: no timer (a list without
    /// one).
    pub timer: Option<(Event, u64)>,
    /// The `page-faults` period, when it runs.
    pub page_faults: Option<u64>,
    /// `sharing[@N]`: every how many samples; 0: off.
    pub sharing_every: u32,
    /// `reuse[@N]`: every how many samples; 0: off.
    pub reuse_every: u32,
}

impl Sources {
    /// Reads an `HPCRUN_EVENTS` value. No list means `mem:soft` at its
    /// default period.
    pub fn from_env(list: &str) -> Sources {
        let mut out = Sources {
            timer: None,
            page_faults: None,
            sharing_every: 0,
            reuse_every: 0,
        };
        let mut any = false;
        for item in items(list) {
            let (name, period) = split_item(item);
            let Ok(event) = name.parse::<Event>() else {
                continue;
            };
            let period = period.flatten();
            let every = || {
                period
                    .and_then(|p| u32::try_from(p).ok())
                    .unwrap_or(DEFAULT_WATCH_EVERY as u32)
            };
            match event {
                Event::Sharing => out.sharing_every = every(),
                Event::Reuse => out.reuse_every = every(),
                Event::PageFaults => {
                    any = true;
                    out.page_faults = Some(period.unwrap_or(DEFAULT_PAGE_FAULT_PERIOD));
                }
                timer => {
                    any = true;
                    if out.timer.is_none() {
                        let default = timer.default_period().unwrap_or(DEFAULT_SOFT_PERIOD_NS);
                        let mut period = period.unwrap_or(default);
                        if matches!(timer, Event::MemSoft | Event::CpuTime) {
                            period = period.max(MIN_TIMER_PERIOD_NS);
                        }
                        out.timer = Some((timer, period));
                    }
                }
            }
        }
        if !any {
            out.timer = Some((Event::MemSoft, DEFAULT_SOFT_PERIOD_NS));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Event::ALL {
            assert_eq!(e.to_string().parse::<Event>(), Ok(e));
        }
        assert!("mem:soft2".parse::<Event>().is_err());
    }

    #[test]
    fn lists() {
        let s = Sources::from_env("");
        assert_eq!(s.timer, Some((Event::MemSoft, DEFAULT_SOFT_PERIOD_NS)));
        let s = Sources::from_env("mem:soft@200000,page-faults,sharing@4,reuse");
        assert_eq!(s.timer, Some((Event::MemSoft, 200000)));
        assert_eq!(s.page_faults, Some(DEFAULT_PAGE_FAULT_PERIOD));
        assert_eq!((s.sharing_every, s.reuse_every), (4, 1));
        let s = Sources::from_env("page-faults@16");
        assert_eq!((s.timer, s.page_faults), (None, Some(16)));
        assert_eq!(
            to_env(&[(Event::MemSoft, 5), (Event::PageFaults, 1)]),
            "mem:soft@5,page-faults@1"
        );
    }

    #[test]
    fn a_timer_period_below_the_floor_is_raised_to_it() {
        let s = Sources::from_env("mem:soft@1");
        assert_eq!(s.timer, Some((Event::MemSoft, MIN_TIMER_PERIOD_NS)));
        let s = Sources::from_env("cpu-time@19999");
        assert_eq!(s.timer, Some((Event::CpuTime, MIN_TIMER_PERIOD_NS)));
        let s = Sources::from_env("cpu-time@20001");
        assert_eq!(s.timer, Some((Event::CpuTime, 20_001)));
    }
}
