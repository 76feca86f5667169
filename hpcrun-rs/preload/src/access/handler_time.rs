//! How long the sample handler takes: a per-thread histogram of the time
//! per sample (`SampleStats::handler_time`), cheap enough for every sample
//! (two vDSO reads of `CLOCK_MONOTONIC`, a few relaxed atomic adds; no
//! allocation, no lock).
//!
//! Buckets: [`formats::measurement::HANDLER_TIME_BOUNDS_NS`] (< 1, 2, 5,
//! 10, 20, 50, 100 us and 100 us or more). At the default period (one
//! sample per 2 ms of a thread's CPU time) a 20 us handler is 1% of the
//! thread's time: the 20 us bound is where hpcprof-rs starts to warn.
//!
//! The time is wall time from the handler's entry (after the check that
//! the signal is the profiler's) to the end of its work, before the
//! task-clock event is re-armed (when it is: after slow samples only, see
//! `handler::on_sample`): a handler preempted on a loaded machine counts
//! long, as the program then waits for it. Every sample that
//! `SampleStats::samples` counts is in the histogram exactly once, so the
//! counts sum to `samples`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use formats::measurement::HANDLER_TIME_BOUNDS_NS;

use crate::sys;

const BUCKETS: usize = HANDLER_TIME_BOUNDS_NS.len() + 1;

/// One thread's handler times.
#[derive(Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
    max_ns: AtomicU64,
    total_ns: AtomicU64,
}

impl Histogram {
    /// Counts one sample whose handler took `ns`.
    pub fn note(&self, ns: u64) {
        let bucket = HANDLER_TIME_BOUNDS_NS.partition_point(|&b| b <= ns);
        self.counts[bucket].fetch_add(1, Relaxed);
        self.total_ns.fetch_add(ns, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
    }

    /// Back to no samples (the thread's state goes to the next thread).
    pub fn reset(&self) {
        for c in self.counts.iter().chain([&self.max_ns, &self.total_ns]) {
            c.store(0, Relaxed);
        }
    }

    /// The counts so far, for the profile.
    pub fn snapshot(&self) -> formats::measurement::HandlerTime {
        formats::measurement::HandlerTime {
            bounds_ns: HANDLER_TIME_BOUNDS_NS.to_vec(),
            counts: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
            max_ns: self.max_ns.load(Relaxed),
            total_ns: self.total_ns.load(Relaxed),
        }
    }
}

/// The start of one handler's timing.
#[derive(Clone, Copy)]
pub struct Start(u64);

/// Reads the clock at the handler's entry.
#[inline]
pub fn start() -> Start {
    Start(sys::monotonic_ns())
}

impl Start {
    /// The time since `self`, in ns.
    #[inline]
    pub fn elapsed_ns(self) -> u64 {
        sys::monotonic_ns().saturating_sub(self.0)
    }

    /// Counts one sample that took the time since `self`.
    #[inline]
    pub fn end(self, histogram: &Histogram) {
        histogram.note(self.elapsed_ns());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_by_bound() {
        let h = Histogram::default();
        for ns in [
            0, 999, 1_000, 1_999, 19_999, 20_000, 99_999, 100_000, 5_000_000,
        ] {
            h.note(ns);
        }
        let s = h.snapshot();
        assert_eq!(s.counts, vec![2, 2, 0, 0, 1, 1, 1, 2]);
        assert_eq!(s.max_ns, 5_000_000);
        assert_eq!(s.samples(), 9);
        assert_eq!(s.at_least(20_000), 4);
    }

    #[test]
    fn the_clock_moves_forward() {
        let h = Histogram::default();
        let t = start();
        std::thread::sleep(std::time::Duration::from_millis(1));
        t.end(&h);
        let s = h.snapshot();
        assert_eq!(s.samples(), 1);
        assert!(s.max_ns >= 1_000_000, "{s:?}");
    }
}
