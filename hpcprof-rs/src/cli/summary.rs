//! What a merge says on stderr: the one-line summary (profiles, samples,
//! recovery, dropped samples) and the notes after it (the measurement's
//! notices, short-lived threads, blocked signals, the profiler's own time
//! when it is a measurable share of the run, a slow sample handler,
//! checkpoints of a run that did not finish).

use std::path::Path;

use formats::database::DbInfo;

/// The one-line summary printed after a merge.
pub(crate) fn summary(info: &DbInfo, out: &Path, skipped: usize) -> String {
    let s = &info.stats;
    let pct = if s.memory_samples == 0 {
        0.0
    } else {
        100.0 * s.address_recovered as f64 / s.memory_samples as f64
    };
    let dropped = if s.dropped.is_empty() {
        "none".to_string()
    } else {
        s.dropped
            .iter()
            .map(|(cause, n)| format!("{cause}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "hpcprof-rs: merged {} profiles ({} processes, {} ranks, {} threads) into {}; {skipped} files skipped; samples: {}, memory accesses: {}, address recovered: {} ({pct:.1}%); dropped: {dropped}",
        info.profiles,
        info.processes,
        info.ranks.len(),
        info.threads,
        out.display(),
        s.samples,
        s.memory_samples,
        s.address_recovered,
    )
}

/// Lines after the summary: what the measurement notices say (a program
/// that damaged its own measurement), short-lived threads when they took a
/// measurable share of the run (`formats::notes::short_lived`), signals
/// the program blocked, and checkpoints of runs that did not finish.
pub(crate) fn notes(info: &DbInfo) -> Vec<String> {
    let s = &info.stats;
    let mut out: Vec<String> = s
        .notices
        .iter()
        .map(|(notice, n)| {
            let threads = if *n == 1 { "thread" } else { "threads" };
            match notice.strip_prefix("note: ") {
                Some(note) => format!("hpcprof-rs: note: {note} ({n} {threads})"),
                None => format!("hpcprof-rs: warning: {notice} ({n} {threads})"),
            }
        })
        .collect();
    if let Some(line) = formats::notes::untracked_blocks(&s.untracked_blocks) {
        out.push(format!("hpcprof-rs: warning: {line}"));
    }
    if let Some(note) = s.short_lived_note() {
        let n = s.short_lived_threads;
        let threads = if n == 1 { "thread" } else { "threads" };
        let note = note.strip_prefix("note: ").unwrap_or(&note);
        out.push(format!("hpcprof-rs: note: {note} ({n} {threads})"));
    }
    if s.signal_blocks > 0 {
        out.push(format!(
            "hpcprof-rs: note: the program asked {} time(s) to block the profiler's sampling signal; hpcrun-rs kept it unblocked so that sampling went on (the program's own signals of that number were held back as it asked)",
            s.signal_blocks
        ));
    }
    // The profiler's own time: said when it is a measurable share of the
    // run (or asked for with HPCPROF_RS_TIMINGS), not on every merge.
    let share = profiler_share(s);
    let loud = share.map_or(
        slow_handler(&s.handler_time, s.cpu_time_ns).is_some(),
        |x| x >= PROFILER_NOTE_SHARE,
    );
    if loud || std::env::var_os("HPCPROF_RS_TIMINGS").is_some() {
        if let Some(line) = profiler_time(s) {
            out.push(line);
        }
    }
    if loud {
        if let Some(line) = slow_handler(&s.handler_time, s.cpu_time_ns) {
            out.push(line);
        }
    }
    if s.checkpoints > 0 {
        out.push(format!(
            "hpcprof-rs: note: {} of {} profiles are checkpoints of a run that did not finish (killed?): they hold what was measured up to the last checkpoint (hpcrun-rs --checkpoint SECS)",
            s.checkpoints, info.profiles
        ));
    }
    out
}

/// Share of the sampled threads' CPU time from which the profiler's own
/// time (sample handler and allocation hooks) is said after the summary:
/// the overhead budget at the default period.
const PROFILER_NOTE_SHARE: f64 = 0.03;

/// The profiler's own time (handler and hooks) as a share of the sampled
/// threads' CPU time; None for files without that time.
fn profiler_share(s: &formats::measurement::SampleStats) -> Option<f64> {
    (s.cpu_time_ns > 0).then(|| {
        (s.handler_time.total_ns + s.hook_time.estimated_ns()) as f64 / s.cpu_time_ns as f64
    })
}

/// What the profiler's own code took inside the program, from the
/// measurement's counters: the sample handler (`handler_time`, every
/// sample timed) and the allocation hooks (`hook_time`, one call in
/// `HOOK_TIME_EVERY` timed), with their share of the sampled threads' CPU
/// time. None when neither ran (or for files older than the counters).
fn profiler_time(s: &formats::measurement::SampleStats) -> Option<String> {
    let handler_ns = s.handler_time.total_ns;
    let samples = s.handler_time.samples();
    let hook_ns = s.hook_time.estimated_ns();
    let calls = s.hook_time.calls;
    if samples == 0 && calls == 0 {
        return None;
    }
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let mut line = format!(
        "hpcprof-rs: profiler time in the program: sample handler {} ({samples} samples, mean {:.1} us), allocation hooks {} ({calls} calls, mean {} ns)",
        ms(handler_ns),
        handler_ns as f64 / 1e3 / samples.max(1) as f64,
        ms(hook_ns),
        hook_ns / calls.max(1),
    );
    let slow = &s.hook_time;
    if slow.slow > 0 {
        // One-time work or preemption: counted as it was, not scaled.
        line.push_str(&format!(
            "; {} of the timed calls took {} us or more, {} in all (set-up, module reads or a loaded machine)",
            slow.slow,
            formats::measurement::SLOW_HOOK_NS / 1000,
            ms(slow.slow_ns),
        ));
    }
    if s.cpu_time_ns > 0 {
        line.push_str(&format!(
            "; together {:.1}% of the {:.2} s of CPU time the threads were sampled for",
            100.0 * (handler_ns + hook_ns) as f64 / s.cpu_time_ns as f64,
            s.cpu_time_ns as f64 / 1e9,
        ));
    }
    Some(line)
}

/// Handler time per sample from which a sample counts as slow: at the
/// default period (2 ms of a thread's CPU time) a 20 us handler costs 1%.
const SLOW_HANDLER_NS: u64 = 20_000;
/// Share of slow samples above which the summary says so (files without
/// the threads' CPU time): then the 99th percentile of the handler time is
/// at least `SLOW_HANDLER_NS`.
const SLOW_HANDLER_SHARE: f64 = 0.01;
/// Share of the sampled threads' CPU time in the handler above which the
/// summary says so.
const SLOW_HANDLER_CPU_SHARE: f64 = 0.01;

/// A note when the handler took more than `SLOW_HANDLER_CPU_SHARE` of the
/// sampled threads' CPU time (`cpu_time_ns`; whatever the period), or,
/// for files without that time, when more than `SLOW_HANDLER_SHARE` of
/// the samples took `SLOW_HANDLER_NS` or more (`SampleStats::handler_time`).
fn slow_handler(h: &formats::measurement::HandlerTime, cpu_time_ns: u64) -> Option<String> {
    let total = h.samples();
    let slow = h.at_least(SLOW_HANDLER_NS);
    let costly = if cpu_time_ns > 0 {
        h.total_ns as f64 > SLOW_HANDLER_CPU_SHARE * cpu_time_ns as f64
    } else {
        (slow as f64) > SLOW_HANDLER_SHARE * total as f64
    };
    if total == 0 || !costly {
        return None;
    }
    let cost = if cpu_time_ns > 0 {
        format!(
            "it took {:.1}% of the sampled threads' CPU time; ",
            100.0 * h.total_ns as f64 / cpu_time_ns as f64
        )
    } else {
        String::new()
    };
    let us = |ns: u64| format!("{:.1} us", ns as f64 / 1e3);
    let p99 = match h.quantile_bound(0.99) {
        Some(b) => format!("99% under {}", us(b)),
        None => format!(
            "the slowest 1% over {}",
            us(h.bounds_ns.last().copied().unwrap_or(0))
        ),
    };
    Some(format!(
        "hpcprof-rs: note: the sample handler was slow: {cost}{slow} of {total} samples ({:.1}%) took {} or more ({p99}, longest {}, mean {}); at the default period (2 ms) every 20 us per sample costs the program 1%, a longer period (-e EVENT@NS) costs less (docs/PERFORMANCE.md)",
        100.0 * slow as f64 / total as f64,
        us(SLOW_HANDLER_NS),
        us(h.max_ns),
        us(h.total_ns / total),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::database::Database;

    #[test]
    fn slow_handler_note() {
        use formats::measurement::{HandlerTime, HANDLER_TIME_BOUNDS_NS};
        let mut h = HandlerTime {
            bounds_ns: HANDLER_TIME_BOUNDS_NS.to_vec(),
            counts: vec![990, 9, 0, 0, 0, 1, 0, 0],
            max_ns: 30_000,
            total_ns: 1_000_000,
        };
        // Files without the threads' CPU time: by the share of slow
        // samples. 0.1% at 20 us or more: quiet.
        assert_eq!(slow_handler(&h, 0), None);
        assert_eq!(slow_handler(&HandlerTime::default(), 0), None);
        h.counts = vec![900, 50, 0, 0, 0, 35, 0, 15];
        h.max_ns = 250_000;
        let line = slow_handler(&h, 0).unwrap();
        assert!(
            line.contains("was slow: 50 of 1000 samples (5.0%) took 20.0 us or more")
                && line.contains("the slowest 1% over 100.0 us")
                && line.contains("longest 250.0 us, mean 1.0 us"),
            "{line}"
        );
        // With it: by the handler's share of that time, whatever the
        // period. 1 ms of 2 s (0.05%): quiet, however many were slow.
        assert_eq!(slow_handler(&h, 2_000_000_000), None);
        // 30 ms of 2 s: 1.5%.
        h.total_ns = 30_000_000;
        let line = slow_handler(&h, 2_000_000_000).unwrap();
        assert!(
            line.contains("was slow: it took 1.5% of the sampled threads' CPU time; 50 of 1000"),
            "{line}"
        );
    }

    #[test]
    fn profiler_time_line() {
        use formats::measurement::{HandlerTime, HookTime, SampleStats};
        assert_eq!(profiler_time(&SampleStats::default()), None);
        let s = SampleStats {
            cpu_time_ns: 2_000_000_000,
            handler_time: HandlerTime {
                bounds_ns: vec![1000],
                counts: vec![0, 1000],
                max_ns: 30_000,
                total_ns: 20_000_000,
            },
            hook_time: HookTime {
                calls: 160_000,
                timed: 10_000,
                timed_ns: 2_500_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let line = profiler_time(&s).unwrap();
        assert!(
            line.contains("sample handler 20.0 ms (1000 samples, mean 20.0 us)")
                && line.contains("allocation hooks 40.0 ms (160000 calls, mean 250 ns)")
                && line.contains("together 3.0% of the 2.00 s of CPU time"),
            "{line}"
        );
        // Two timed calls of 5 ms each (the first call's set-up, a
        // preemption): counted once each, not 16 times.
        let mut slow = s.clone();
        slow.hook_time = HookTime {
            calls: 160_002,
            timed: 10_002,
            timed_ns: 12_500_000,
            slow: 2,
            slow_ns: 10_000_000,
        };
        let line = profiler_time(&slow).unwrap();
        assert!(
            line.contains("allocation hooks 50.0 ms (160002 calls")
                && line.contains("2 of the timed calls took 100 us or more, 10.0 ms in all"),
            "{line}"
        );
    }

    #[test]
    fn summary_line() {
        let mut db = Database::default();
        db.info.profiles = 2;
        db.info.processes = 1;
        db.info.threads = 2;
        db.info.stats.samples = 10;
        db.info.stats.memory_samples = 8;
        db.info.stats.address_recovered = 6;
        db.info.stats.dropped.insert("tree full".into(), 3);
        let s = summary(&db.info, Path::new("db"), 1);
        assert_eq!(
            s,
            "hpcprof-rs: merged 2 profiles (1 processes, 0 ranks, 2 threads) into db; 1 files skipped; samples: 10, memory accesses: 8, address recovered: 6 (75.0%); dropped: tree full: 3"
        );
    }
}
