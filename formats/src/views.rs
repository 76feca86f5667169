//! Tables derived from a [`Database`]: the data-centric object list and the
//! flat function list. Shared by `hpcprof-rs export` and `hpcview-tui`.

use std::collections::HashMap;

use crate::database::{Database, Frame, NodeKind, ObjectKind};

/// One data object with its inclusive metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRow<'a> {
    pub index: u32,
    pub kind: ObjectKind,
    pub name: &'a str,
    /// Root first.
    pub alloc_path: Vec<&'a Frame>,
    pub bytes: u64,
    pub allocations: u64,
    /// Inclusive values, one per metric column.
    pub metrics: Vec<u64>,
    /// Primary metric over the data-centric total (0 when the total is 0).
    pub share: f64,
}

/// One function of the code-centric view (exclusive values of its
/// instructions, inlined code counted in the inlined function).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionRow<'a> {
    pub function: &'a str,
    pub module: &'a str,
    /// File and line of the function's hottest line.
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: Vec<u64>,
    pub share: f64,
    /// Its lines, hottest first.
    pub lines: Vec<LineRow<'a>>,
}

/// One source line of a function.
#[derive(Debug, Clone, PartialEq)]
pub struct LineRow<'a> {
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: Vec<u64>,
    pub share: f64,
}

fn share(value: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        value as f64 / total as f64
    }
}

/// Every data object, sorted by the primary metric (descending), then name.
pub fn objects(db: &Database) -> Vec<ObjectRow<'_>> {
    let columns = db.info.metrics.len().max(1);
    let primary = db.info.primary_metric as usize;
    let inclusive = db.data.inclusive(columns);
    let total: u64 = db
        .objects
        .iter()
        .map(|o| inclusive[o.node as usize][primary])
        .sum();
    let mut rows: Vec<ObjectRow<'_>> = db
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let metrics = inclusive[o.node as usize].clone();
            ObjectRow {
                index: i as u32,
                kind: o.kind,
                name: &o.name,
                alloc_path: o
                    .alloc_path
                    .iter()
                    .map(|&f| &db.frames[f as usize])
                    .collect(),
                bytes: o.bytes,
                allocations: o.allocations,
                share: share(metrics[primary], total),
                metrics,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.metrics[primary]
            .cmp(&a.metrics[primary])
            .then_with(|| a.name.cmp(b.name))
    });
    rows
}

/// Flat function list of the code-centric tree, sorted by the primary metric.
pub fn functions(db: &Database) -> Vec<FunctionRow<'_>> {
    let columns = db.info.metrics.len().max(1);
    let primary = db.info.primary_metric as usize;
    // (function, module) -> ((file, line) -> metrics)
    type Lines<'a> = HashMap<(Option<&'a str>, Option<u32>), Vec<u64>>;
    let mut by_function: HashMap<(&str, &str), Lines<'_>> = HashMap::new();
    let mut total = 0u64;
    for node in &db.code.nodes {
        let NodeKind::Frame(f) = node.kind else {
            continue;
        };
        if node.exclusive.iter().all(|&v| v == 0) {
            continue;
        }
        let frame = &db.frames[f as usize];
        let entry = by_function
            .entry((frame.function.as_str(), frame.module.as_str()))
            .or_default()
            .entry((frame.file.as_deref(), frame.line))
            .or_insert_with(|| vec![0; columns]);
        for (acc, v) in entry.iter_mut().zip(&node.exclusive) {
            *acc += v;
        }
        total += node.exclusive.get(primary).copied().unwrap_or(0);
    }
    let mut rows: Vec<FunctionRow<'_>> = by_function
        .into_iter()
        .map(|((function, module), lines)| {
            let mut metrics = vec![0; columns];
            let mut lines: Vec<LineRow<'_>> = lines
                .into_iter()
                .map(|((file, line), m)| {
                    for (acc, v) in metrics.iter_mut().zip(&m) {
                        *acc += v;
                    }
                    LineRow {
                        file,
                        line,
                        share: share(m[primary], total),
                        metrics: m,
                    }
                })
                .collect();
            lines.sort_by(|a, b| {
                b.metrics[primary]
                    .cmp(&a.metrics[primary])
                    .then_with(|| a.line.cmp(&b.line))
            });
            FunctionRow {
                function,
                module,
                file: lines.first().and_then(|l| l.file),
                line: lines.first().and_then(|l| l.line),
                share: share(metrics[primary], total),
                metrics,
                lines,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.metrics[primary]
            .cmp(&a.metrics[primary])
            .then_with(|| a.function.cmp(b.function))
    });
    rows
}
