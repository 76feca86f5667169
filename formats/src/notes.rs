//! Notes that more than one tool prints from the measurement's counts, with
//! the thresholds that decide when they are worth a line on stderr: the
//! preload library (for `hpcrun-rs`'s closing lines) judges one process,
//! `hpcprof-rs` the merged run, by the same rule.
//!
//! * Short-lived threads ([`short_lived`]): threads that ended before their
//!   first sample got no file; their number and CPU time are always in the
//!   statistics (`SampleStats::short_lived_threads`,
//!   `short_lived_cpu_ns`), a note only when they took a measurable part of
//!   the run.
//! * Untracked small blocks ([`untracked_blocks`]): small heap blocks the
//!   object map did not take (a memory cap, a refused mapping), always
//!   said: their samples are the anonymous `<small heap objects>` row.

/// Short-lived threads are told on stderr only when their CPU time is at
/// least this many sampling periods ...
pub const SHORT_LIVED_PERIODS: u64 = 5;

/// ... and at least this share of all threads' CPU time (theirs and the
/// sampled threads'): then the samples they did not get are a measurable
/// part of the run. An MPI runtime's helper threads (a few ms of CPU time
/// in a run of seconds) stay quiet.
pub const SHORT_LIVED_SHARE: f64 = 0.01;

/// The note on `threads` short-lived threads that took `cpu_ns` of CPU
/// time beside the `sampled_cpu_ns` of the threads with a file, at a timer
/// period of `period_ns` (0: unknown, the share alone decides), when it
/// matters ([`SHORT_LIVED_PERIODS`], [`SHORT_LIVED_SHARE`]). Its text
/// opens with `note: ` and says the share; the printers add the number of
/// threads.
pub fn short_lived(
    threads: u64,
    cpu_ns: u64,
    sampled_cpu_ns: u64,
    period_ns: u64,
) -> Option<String> {
    if threads == 0 || cpu_ns == 0 || cpu_ns < SHORT_LIVED_PERIODS.saturating_mul(period_ns) {
        return None;
    }
    let share = cpu_ns as f64 / cpu_ns.saturating_add(sampled_cpu_ns) as f64;
    if share < SHORT_LIVED_SHARE {
        return None;
    }
    Some(format!(
        "note: short-lived threads ended before their first sample: their {:.1} ms of CPU time in all ({:.1}% of all threads' CPU time) went unsampled; no profile was written for them (they measured nothing)",
        cpu_ns as f64 / 1e6,
        100.0 * share,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn short_lived_threads_are_told_only_when_they_matter() {
        // None, or no CPU time known.
        assert_eq!(short_lived(0, 50 * MS, 100 * MS, 2 * MS), None);
        assert_eq!(short_lived(3, 0, 100 * MS, 2 * MS), None);
        // Open MPI's helper threads: 4 ms of a 2 s run, under 5 periods.
        assert_eq!(short_lived(2, 4 * MS, 2000 * MS, 2 * MS), None);
        // 5 periods, but 0.5% of the run.
        assert_eq!(short_lived(9, 10 * MS, 1990 * MS, 2 * MS), None);
        // 5 periods and 1%.
        let note = short_lived(9, 10 * MS, 990 * MS, 2 * MS).unwrap();
        assert!(
            note.starts_with("note: short-lived threads ended before their first sample: their 10.0 ms of CPU time in all (1.0% of all threads' CPU time) went unsampled"),
            "{note}"
        );
        // Unknown period: the share alone.
        assert!(short_lived(1, MS, MS, 0).unwrap().contains("(50.0% of"));
    }
}

/// Small heap blocks left untracked for one reason (process-wide).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UntrackedBlocks {
    pub blocks: u64,
    pub bytes: u64,
}

/// What every surface (hpcprof-rs's stderr, the report's header, the
/// viewer's status line) says about small heap blocks the object map did
/// not take (`SampleStats::untracked_blocks`, by reason): how many, their
/// bytes, why, and what to do; `None` when every small block was tracked.
pub fn untracked_blocks(
    by_reason: &std::collections::BTreeMap<String, UntrackedBlocks>,
) -> Option<String> {
    let blocks: u64 = by_reason.values().map(|n| n.blocks).sum();
    let bytes: u64 = by_reason.values().map(|n| n.bytes).sum();
    if blocks == 0 {
        return None;
    }
    let reasons: Vec<String> = by_reason
        .iter()
        .map(|(reason, n)| format!("{}: {}", thousands(n.blocks), reason))
        .collect();
    Some(format!(
        "{} small heap blocks ({}) were not tracked ({}); their samples are <small heap objects>",
        thousands(blocks),
        bytes_text(bytes),
        reasons.join("; ")
    ))
}

/// The short form for a status line.
pub fn untracked_blocks_short(
    by_reason: &std::collections::BTreeMap<String, UntrackedBlocks>,
) -> Option<String> {
    let blocks: u64 = by_reason.values().map(|n| n.blocks).sum();
    (blocks > 0).then(|| format!("{} small blocks untracked", thousands(blocks)))
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `12 B`, `8.0 MiB`: byte counts for people.
pub fn bytes_text(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
