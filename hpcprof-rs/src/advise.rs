//! `hpcprof-rs advise`: the decisions of [`formats::advice`] for people
//! (text) and scripts (JSON), and the parsing of its sizes.
//!
//! The text names every placed range with its object, allocation site and
//! bytes, shows the simple strategies for the same fast memory next to it,
//! says when the histograms are too coarse for the granularity asked, and
//! lists the NUMA findings with their evidence.

use std::fmt::Write;

use formats::advice::{bytes_text, NumaFinding, Placement, PlacementAdvice, Strategy};
use formats::database::Database;
use serde::Serialize;

/// Version of the `hpcprof-rs/advise` JSON document.
pub const JSON_VERSION: u32 = 1;

pub use formats::advice::parse_size;

/// `page` (4096), `line` (64) or a number of bytes.
pub fn parse_granularity(text: &str) -> Result<u64, String> {
    match text {
        "page" => Ok(4096),
        "line" => Ok(64),
        _ => parse_size(text).map_err(|e| format!("{e}; or page, line")),
    }
}

fn range_text(p: &Placement, unit: u64) -> String {
    if p.whole {
        "whole".to_string()
    } else {
        format!(
            "bytes {}-{} of {}",
            bytes_text(p.offset),
            bytes_text(p.offset + p.range_bytes),
            bytes_text(unit)
        )
    }
}

fn object_text(db: &Database, p: &Placement) -> (String, u64) {
    let obj = &db.objects[p.object as usize];
    let unit = obj.bytes / obj.allocations.max(1);
    let mut name = p.name.clone();
    if let Some(site) = &p.site {
        let _ = write!(name, " ({site})");
    }
    if obj.allocations > 1 {
        let _ = write!(name, " x{} allocations", obj.allocations);
    }
    (name, unit)
}

fn strategy_lines(out: &mut String, db: &Database, s: &Strategy) {
    for p in &s.placements {
        let (name, unit) = object_text(db, p);
        let _ = writeln!(
            out,
            "  {:>6.1}%  {:>10}  {name}  {}",
            100.0 * p.share,
            bytes_text(p.bytes),
            range_text(p, unit)
        );
    }
}

/// Runs with fewer memory samples than this get a note on how little
/// their shares say.
pub const FEW_SAMPLES: u64 = 1000;

/// The text report: a note when the run has few memory samples, the share
/// of CPU time spent waiting inside MPI and OpenMP runtimes (when there
/// was some), placement (when asked) and NUMA findings.
pub fn to_text(
    db: &Database,
    placement: Option<&PlacementAdvice>,
    numa: &[NumaFinding],
    has_first_touch: bool,
) -> String {
    let mut out = String::new();
    let memory = db.info.stats.memory_samples;
    if memory > 0 && memory < FEW_SAMPLES {
        let _ = writeln!(
            out,
            "Note: only {memory} memory samples: shares are uncertain by up to ±{:.0} points (95%), and objects with fewer than {} sampled accesses get no NUMA advice. Measure {FEW_SAMPLES} or more: run longer, or sample {}x as often (-e mem:soft@NS with NS the period divided by that).\n",
            196.0 * (0.25 / memory as f64).sqrt(),
            formats::advice::MIN_NUMA_ACCESSES,
            FEW_SAMPLES.div_ceil(memory)
        );
    }
    let waiting = formats::runtimes::waiting(db).line();
    if !waiting.is_empty() {
        let _ = writeln!(
            out,
            "{waiting}(The runtimes' own memory gets no placement or NUMA advice.)\n"
        );
    }
    if let Some(a) = placement {
        let g = match a.granularity {
            4096 => "page, 4 KiB".to_string(),
            64 => "cache line, 64 B".to_string(),
            b => bytes_text(b),
        };
        let _ = writeln!(
            out,
            "Fast memory: {} (granularity: {g}); data-centric samples: {}",
            bytes_text(a.fast_mem),
            a.total_samples
        );
        let _ = writeln!(
            out,
            "\nAdvised placement: {:.1}% of all samples in {}",
            100.0 * a.advised.share,
            bytes_text(a.advised.bytes)
        );
        if a.advised.placements.is_empty() {
            let _ = writeln!(
                out,
                "  (nothing fits: no heap or static object with samples)"
            );
        }
        strategy_lines(&mut out, db, &a.advised);
        let _ = writeln!(
            out,
            "\nSimple strategies for the same {}:",
            bytes_text(a.fast_mem)
        );
        for s in &a.strategies {
            let what: Vec<String> = s
                .placements
                .iter()
                .map(|p| {
                    let (name, unit) = object_text(db, p);
                    format!("{} {}", name, range_text(p, unit))
                })
                .collect();
            let what = if what.is_empty() {
                "(nothing fits)".to_string()
            } else {
                what.join(", ")
            };
            let _ = writeln!(out, "  {:>6.1}%  {:<26} {what}", 100.0 * s.share, s.name);
        }
        if !a.coarse.is_empty() {
            let names: Vec<String> = a
                .coarse
                .iter()
                .map(|c| format!("{} ({})", c.name, bytes_text(c.bucket_bytes)))
                .collect();
            let _ = writeln!(
                out,
                "\nNote: the offset histograms of {} have buckets wider than the granularity: those ranges are only that precise. Record with `hpcrun-rs --histogram page` (or `cacheline`) for placement at page (line) precision.",
                names.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "\nShares are of the data-centric samples (time at memory-accessing instructions); ranges assume the samples are spread evenly within each histogram bucket. An object allocated N times from one call path is placed for all N allocations."
        );
        out.push('\n');
    }
    let _ = writeln!(out, "NUMA:");
    if !has_first_touch {
        let _ = writeln!(
            out,
            "  no first-touch data: record with `hpcrun-rs -e mem:soft -e page-faults` to see which thread placed each object's pages"
        );
    } else if numa.is_empty() {
        let _ = writeln!(
            out,
            "  nothing to change: no object (of the program's, with {} sampled accesses or more) is first touched by one thread and used largely (a quarter or more) by others",
            formats::advice::MIN_NUMA_ACCESSES
        );
    }
    for f in numa {
        let _ = writeln!(out, "  {}", numa_text(f));
    }
    out
}

/// One NUMA finding in plain words.
pub fn numa_text(f: &NumaFinding) -> String {
    let mut s = format!(
        "{}: first touched by {} ({:.0}% of its sampled pages), {:.0}% of its accesses by other threads ({} threads)",
        f.name,
        f.first_touch_thread,
        100.0 * f.first_touch_share,
        100.0 * f.accessed_by_others,
        f.threads
    );
    if let Some(o) = f.ownership {
        let _ = write!(
            s,
            ", each part used by one thread for {:.0}% of its accesses",
            100.0 * o
        );
    }
    if let (Some(l), Some(r)) = (f.numa_local, f.numa_remote) {
        let _ = write!(s, ", {l} local / {r} remote accesses");
    }
    let _ = write!(s, ": {}", f.action.advice());
    s
}

#[derive(Serialize)]
struct StrategyOut<'a> {
    share: f64,
    bytes: u64,
    placements: &'a [Placement],
}

#[derive(Serialize)]
struct NumaOut<'a> {
    #[serde(flatten)]
    finding: &'a NumaFinding,
    advice: &'static str,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    format: &'static str,
    version: u32,
    fast_mem: Option<u64>,
    granularity: Option<u64>,
    total_samples: Option<u64>,
    /// The advised placement's ranges.
    placements: Option<&'a [Placement]>,
    share: Option<f64>,
    bytes: Option<u64>,
    strategies: Option<std::collections::BTreeMap<String, StrategyOut<'a>>>,
    coarse_histograms: Option<&'a [formats::advice::Coarse]>,
    first_touch_measured: bool,
    numa: Vec<NumaOut<'a>>,
}

/// The `hpcprof-rs/advise` JSON document (docs/FORMATS.md).
pub fn to_json(
    placement: Option<&PlacementAdvice>,
    numa: &[NumaFinding],
    has_first_touch: bool,
) -> String {
    let doc = JsonOut {
        format: "hpcprof-rs/advise",
        version: JSON_VERSION,
        fast_mem: placement.map(|a| a.fast_mem),
        granularity: placement.map(|a| a.granularity),
        total_samples: placement.map(|a| a.total_samples),
        placements: placement.map(|a| a.advised.placements.as_slice()),
        share: placement.map(|a| a.advised.share),
        bytes: placement.map(|a| a.advised.bytes),
        strategies: placement.map(|a| {
            a.strategies
                .iter()
                .map(|s| {
                    (
                        s.name.replace(' ', "_"),
                        StrategyOut {
                            share: s.share,
                            bytes: s.bytes,
                            placements: &s.placements,
                        },
                    )
                })
                .collect()
        }),
        coarse_histograms: placement.map(|a| a.coarse.as_slice()),
        first_touch_measured: has_first_touch,
        numa: numa
            .iter()
            .map(|f| NumaOut {
                finding: f,
                advice: f.action.advice(),
            })
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&doc).expect("advice serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("32M"), Ok(32 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 8 KiB "), Ok(8192));
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("3 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_size("0").is_err());
        assert_eq!(parse_granularity("page"), Ok(4096));
        assert_eq!(parse_granularity("line"), Ok(64));
        assert_eq!(parse_granularity("2MiB"), Ok(2 << 20));
        assert!(parse_granularity("huge")
            .unwrap_err()
            .contains("page, line"));
    }
}
