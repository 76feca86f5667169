//! The page x thread map of a data object (Tabarnac's picture): which
//! threads touched which parts of the object, one row per thread, one
//! column per group of offset-histogram buckets (left: offset 0, right:
//! the object's end), drawn with the block characters ` ░▒▓█` by the
//! cell's sampled accesses relative to the busiest cell of the object.
//!
//! Built from `DataObject::histogram_by_thread` (same bucket layout as the
//! object's offset histogram). At most [`MAX_ROWS`] threads get a row (the
//! busiest, in thread order); the rest are summed up in one line.
//!
//! ```
//! let db = hpcview_tui::fixtures::abc();
//! let lines = hpcview_tui::view::heatmap::lines(&db, &db.objects[0], 40);
//! assert!(lines[1].starts_with("thread 0 |████"));
//! ```

use formats::database::{DataObject, Database};

/// Threads with a row of their own.
pub const MAX_ROWS: usize = 8;
/// Shades from few to most accesses (a blank cell: none sampled).
const SHADES: [char; 4] = ['░', '▒', '▓', '█'];

/// The shade of `v` in a map whose busiest cell is `max`: ` ` for 0, then
/// `░▒▓█` for up to a quarter, half, three quarters and all of `max`.
fn shade(v: f64, max: f64) -> char {
    if v <= 0.0 || max <= 0.0 {
        return ' ';
    }
    let level = (4.0 * v / max).ceil().clamp(1.0, 4.0) as usize;
    SHADES[level - 1]
}

/// The map's lines for a pane `width` characters wide: a title, one row
/// per thread (`thread 0 |██▓░    | 50%`: the share is the thread's share
/// of the object's sampled accesses), "+N more threads" when there are
/// more than [`MAX_ROWS`], and a legend. Empty when the object has no
/// per-thread histogram.
pub fn lines(db: &Database, obj: &DataObject, width: usize) -> Vec<String> {
    let Some(h) = obj.histogram.as_ref() else {
        return Vec::new();
    };
    let threads: Vec<&(u32, Vec<(u32, u64)>)> = obj
        .histogram_by_thread
        .iter()
        .filter(|(_, counts)| counts.iter().any(|&(_, c)| c > 0))
        .collect();
    if threads.is_empty() {
        return Vec::new();
    }
    let unit = (obj.bytes / obj.allocations.max(1)).max(1);
    let n = (h.layout.buckets(unit) as usize).max(1);
    let sum = |counts: &[(u32, u64)]| counts.iter().map(|&(_, c)| c).sum::<u64>();
    let total: u64 = threads.iter().map(|(_, c)| sum(c)).sum();
    // The busiest threads, shown in thread order.
    let mut shown: Vec<&(u32, Vec<(u32, u64)>)> = threads.clone();
    shown.sort_by(|a, b| sum(&b.1).cmp(&sum(&a.1)).then(a.0.cmp(&b.0)));
    shown.truncate(MAX_ROWS);
    shown.sort_by_key(|t| t.0);
    let labels: Vec<String> = shown.iter().map(|(t, _)| db.thread_label(*t)).collect();
    let label_w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    // label, " |", cells, "| ", "100%"
    let room = width.saturating_sub(label_w + 8).max(8);
    // Columns: `group` buckets each when they do not fit, else each bucket
    // `repeat` columns wide.
    let group = n.div_ceil(room);
    let cols = n.div_ceil(group);
    let repeat = (room / cols).max(1);
    let cells = |counts: &[(u32, u64)]| -> Vec<f64> {
        let mut v = vec![0u64; cols];
        for &(b, c) in counts {
            v[(b as usize).min(n - 1) / group] += c;
        }
        // Per bucket, so that a short last column is not paler.
        v.iter()
            .enumerate()
            .map(|(i, &c)| c as f64 / (n - i * group).min(group) as f64)
            .collect()
    };
    let max = threads
        .iter()
        .flat_map(|(_, c)| cells(c))
        .fold(0.0, f64::max);
    let mut out = vec![format!(
        "page x thread map: one row per thread, offset 0 B (left) to {} (right)",
        formats::advice::bytes_text(unit)
    )];
    for ((_, counts), label) in shown.iter().zip(&labels) {
        let row: String = cells(counts)
            .iter()
            .flat_map(|&v| std::iter::repeat(shade(v, max)).take(repeat))
            .collect();
        out.push(format!(
            "{label:<label_w$} |{row}| {:.0}%",
            100.0 * sum(counts) as f64 / total as f64
        ));
    }
    if threads.len() > shown.len() {
        let rest: u64 = threads
            .iter()
            .filter(|t| !shown.iter().any(|s| s.0 == t.0))
            .map(|(_, c)| sum(c))
            .sum();
        out.push(format!(
            "+{} more threads ({:.0}% of the accesses)",
            threads.len() - shown.len(),
            100.0 * rest as f64 / total as f64
        ));
    }
    out.push(format!(
        "  ░▒▓█: up to 1/4, 1/2, 3/4, all of the busiest cell; blank: none sampled; {} per character",
        formats::advice::bytes_text(unit * group as u64 / (n * repeat) as u64)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn two_threads_two_halves() {
        let db = fixtures::abc();
        let l = lines(&db, &db.objects[0], 44);
        // 32 buckets in 44 - 8 - 8 = 28 columns: 2 buckets per column.
        assert_eq!(
            l[1],
            format!("thread 0 |{}{}| 50%", "█".repeat(8), " ".repeat(8))
        );
        assert_eq!(
            l[2],
            format!("thread 1 |{}{}| 50%", " ".repeat(8), "█".repeat(8))
        );
        assert!(l[3].contains("blank: none sampled"), "{l:?}");
        assert_eq!(l.len(), 4);
        // Wide: each bucket two columns.
        let l = lines(&db, &db.objects[0], 80);
        assert_eq!(
            l[1],
            format!("thread 0 |{}{}| 50%", "█".repeat(32), " ".repeat(32))
        );
        // No per-thread histogram: no map.
        assert!(lines(&db, &db.objects[3], 80).is_empty());
    }

    #[test]
    fn many_threads_and_shades() {
        let mut db = fixtures::abc();
        let obj = &mut db.objects[0];
        // Thread t: 4 x (t + 1) accesses in bucket t, for 12 threads.
        obj.histogram_by_thread = (0..12u32)
            .map(|t| (t, vec![(t, 4 * (t as u64 + 1))]))
            .collect();
        let l = lines(&db, &db.objects[0], 80);
        let rows: Vec<&String> = l.iter().filter(|r| r.contains(" |")).collect();
        assert_eq!(rows.len(), MAX_ROWS, "{l:#?}");
        // The busiest 8 (threads 4..11), in order; thread 11 is the max.
        assert!(rows[0].starts_with("thread 4 "), "{l:#?}");
        assert!(rows[7].starts_with("thread 11 |"), "{l:#?}");
        assert!(rows[7].contains('█') && rows[0].contains('▒'), "{l:#?}");
        // Threads 0-3: 4 + 8 + 12 + 16 = 40 of 312 accesses.
        assert!(
            l.iter()
                .any(|r| r == "+4 more threads (13% of the accesses)"),
            "{l:#?}"
        );
        assert_eq!(shade(0.0, 4.0), ' ');
        assert_eq!(shade(1.0, 4.0), '░');
        assert_eq!(shade(1.5, 4.0), '▒');
        assert_eq!(shade(4.0, 4.0), '█');
    }
}
