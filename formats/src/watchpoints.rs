//! The watchpoint findings of an object, for the outputs (export, viewer,
//! report): sharing between threads (`-e sharing`) and temporal reuse
//! (`-e reuse`). How they are measured: docs/GUIDE.md, "Access patterns".

use serde::Serialize;

use crate::database::{DataObject, Database, SharingLine};
use crate::patterns::REUSE_BUCKETS;

/// A sharing finding is reported when the object has at least this many
/// events of the kind (one trap can be chance: a thread reading a result
/// once).
pub const MIN_SHARING_EVENTS: u64 = 3;

/// Reuse findings need this many watched words.
pub const MIN_REUSE_OUTCOMES: u64 = 5;

/// The object's sharing events: (false sharing, true sharing).
pub fn sharing_events(obj: &DataObject) -> (u64, u64) {
    obj.sharing.iter().fold((0, 0), |(f, t), l| {
        if l.true_sharing {
            (f, t + l.events)
        } else {
            (f + l.events, t)
        }
    })
}

/// True when the database has the sharing columns (the run used
/// `-e sharing`).
pub fn sharing_measured(db: &Database) -> bool {
    db.metric_column("false_sharing").is_some()
}

/// The label of the other thread of a sharing line (same process as
/// `line.thread`).
pub fn other_thread_label(db: &Database, line: &SharingLine) -> String {
    match db.info.thread_list.get(line.thread as usize) {
        Some(t) => {
            let mut other = t.clone();
            other.index = line.other_thread;
            other.label(db.info.processes > 1)
        }
        None => format!("thread {}", line.other_thread),
    }
}

/// One sharing line in the export.
#[derive(Debug, Serialize)]
pub struct SharingLineOut<'a> {
    /// `false` or `true`.
    pub kind: &'static str,
    /// Offset of the cache line from the object's start.
    pub line_offset: i64,
    /// The thread whose access trapped, and the thread whose sampled
    /// access armed the watchpoint.
    pub threads: [String; 2],
    /// The two accesses (innermost source locations), in that order.
    pub accesses: [AccessOut<'a>; 2],
    pub events: u64,
}

/// A source location in the export.
#[derive(Debug, Serialize)]
pub struct AccessOut<'a> {
    pub function: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
}

fn access_out(db: &Database, frame: u32) -> AccessOut<'_> {
    match db.frames.get(frame as usize) {
        Some(f) => AccessOut {
            function: &f.function,
            file: f.file.as_deref(),
            line: f.line,
        },
        None => AccessOut {
            function: "?",
            file: None,
            line: None,
        },
    }
}

/// The export form of an object's sharing lines.
pub fn sharing_out<'a>(db: &'a Database, obj: &DataObject) -> Vec<SharingLineOut<'a>> {
    obj.sharing
        .iter()
        .map(|l| SharingLineOut {
            kind: if l.true_sharing { "true" } else { "false" },
            line_offset: l.line_offset,
            threads: [db.thread_label(l.thread), other_thread_label(db, l)],
            accesses: [access_out(db, l.frame), access_out(db, l.other_frame)],
            events: l.events,
        })
        .collect()
}

/// One reuse bucket in the export.
#[derive(Debug, Serialize)]
pub struct ReuseBucketOut {
    pub bucket: &'static str,
    pub count: u64,
    pub share: f64,
}

/// The export form of an object's reuse histogram (`None` without
/// outcomes).
pub fn reuse_out(obj: &DataObject) -> Option<Vec<ReuseBucketOut>> {
    let total: u64 = obj.reuse.iter().sum();
    (total > 0).then(|| {
        REUSE_BUCKETS
            .iter()
            .enumerate()
            .map(|(i, &bucket)| {
                let count = obj.reuse.get(i).copied().unwrap_or(0);
                ReuseBucketOut {
                    bucket,
                    count,
                    share: count as f64 / total as f64,
                }
            })
            .collect()
    })
}

/// How an object's words are reused, in a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// Most watched words were touched again within 100 us.
    Hot,
    /// Most were not touched again before the watch was re-armed.
    Streamed,
    /// In between.
    Mixed,
}

/// The reuse class of an object (`None`: too few outcomes).
pub fn reuse_class(obj: &DataObject) -> Option<(Reuse, f64)> {
    let total: u64 = obj.reuse.iter().sum();
    if total < MIN_REUSE_OUTCOMES {
        return None;
    }
    let at_once = obj.reuse.first().copied().unwrap_or(0) as f64 / total as f64;
    let never = obj.reuse.last().copied().unwrap_or(0) as f64 / total as f64;
    Some(if at_once >= 0.5 {
        (Reuse::Hot, at_once)
    } else if never >= 0.5 {
        (Reuse::Streamed, never)
    } else {
        (Reuse::Mixed, at_once)
    })
}

fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

fn frame_text(db: &Database, frame: u32) -> String {
    db.frames
        .get(frame as usize)
        .map(|f| f.site_text())
        .unwrap_or_else(|| "?".to_string())
}

/// Plain-words lines about an object's sharing and reuse, for the
/// viewer's detail pane and the report: one line per finding, the
/// strongest sharing lines first (at most `max_lines` of them).
pub fn lines(db: &Database, obj: &DataObject, max_lines: usize) -> Vec<String> {
    let mut out = Vec::new();
    let (false_events, true_events) = sharing_events(obj);
    for (events, kind, is_true) in [
        (false_events, "false sharing", false),
        (true_events, "true sharing", true),
    ] {
        if events == 0 {
            continue;
        }
        out.push(format!("{kind}: {events} watchpoint events"));
        for l in obj
            .sharing
            .iter()
            .filter(|l| l.true_sharing == is_true)
            .take(max_lines)
        {
            out.push(format!(
                "  {} and {} on line +{}: {} vs {} ({} events)",
                db.thread_label(l.thread),
                other_thread_label(db, l),
                l.line_offset,
                frame_text(db, l.frame),
                frame_text(db, l.other_frame),
                l.events
            ));
        }
    }
    if let Some(buckets) = reuse_out(obj) {
        let total: u64 = obj.reuse.iter().sum();
        let parts: Vec<String> = buckets
            .iter()
            .filter(|b| b.count > 0)
            .map(|b| format!("{} {}", b.bucket, pct(b.share)))
            .collect();
        out.push(format!(
            "reuse of {total} watched words: {}",
            parts.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::ObjectKind;

    fn object(name: &str) -> DataObject {
        DataObject {
            kind: ObjectKind::Static,
            name: name.into(),
            bytes: 128,
            allocations: 0,
            node: 0,
            ..Default::default()
        }
    }

    fn line(true_sharing: bool, events: u64) -> SharingLine {
        SharingLine {
            true_sharing,
            events,
            ..Default::default()
        }
    }

    #[test]
    fn events_by_kind() {
        let db = Database::default();
        let mut obj = object("counters");
        obj.sharing = vec![line(false, 5), line(true, 2), line(false, 1)];
        assert_eq!(sharing_events(&obj), (6, 2));
        let text = lines(&db, &obj, 5);
        assert!(text[0].starts_with("false sharing: 6 "), "{text:?}");
        assert!(text.iter().any(|l| l.starts_with("true sharing: 2 ")));
    }

    #[test]
    fn reuse_classes() {
        let mut obj = object("t");
        obj.reuse = vec![9, 1, 0, 0, 0];
        assert_eq!(reuse_class(&obj).map(|r| r.0), Some(Reuse::Hot));
        obj.reuse = vec![1, 0, 0, 0, 9];
        assert_eq!(reuse_class(&obj).map(|r| r.0), Some(Reuse::Streamed));
        obj.reuse = vec![1, 0, 0, 0, 1];
        assert_eq!(reuse_class(&obj), None);
        let out = reuse_out(&DataObject {
            reuse: vec![3, 0, 0, 0, 1],
            ..obj
        })
        .unwrap();
        assert_eq!(out.len(), REUSE_BUCKETS.len());
        assert_eq!(out[0].share, 0.75);
    }
}
