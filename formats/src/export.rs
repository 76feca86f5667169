//! The export contract of `hpcprof-rs export`: a stable interface for
//! scripts. Fields are only ever added; `version` changes if one must go.

use serde::Serialize;

use crate::database::{Database, Frame};
use crate::views;

/// Value of the top-level `format` field.
pub const FORMAT: &str = "hpcprof-rs/export";
/// Value of the top-level `version` field.
pub const VERSION: u32 = 1;

/// Which table to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Data,
    Code,
}

/// The top-level JSON document.
#[derive(Debug, Serialize)]
pub struct Export<'a> {
    pub format: &'static str,
    pub version: u32,
    pub view: &'static str,
    pub source: Source<'a>,
    /// Name of the primary metric (sorting key, `share` denominator).
    pub metric: &'a str,
    /// Description of every metric column.
    pub metrics: Vec<MetricDoc<'a>>,
    pub stats: Stats,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<ObjectOut<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<FunctionOut<'a>>>,
}

#[derive(Debug, Serialize)]
pub struct Source<'a> {
    pub events: &'a [String],
    pub ranks: &'a [u32],
    pub processes: u32,
    pub threads: u32,
}

#[derive(Debug, Serialize)]
pub struct MetricDoc<'a> {
    pub name: &'a str,
    pub unit: &'a str,
    pub description: &'a str,
}

/// Sample accounting summed over all threads.
#[derive(Debug, Serialize)]
pub struct Stats {
    pub samples: u64,
    /// Load samples (`memory_samples` of the measurement files).
    pub memory_samples: u64,
    /// Store-only samples.
    pub store_samples: u64,
    pub address_recovered: u64,
    /// address_recovered / memory_samples (0 when there were none).
    pub recovery_rate: f64,
    pub dropped: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
pub struct FrameOut<'a> {
    pub function: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
}

#[derive(Debug, Serialize)]
pub struct ObjectOut<'a> {
    pub kind: &'static str,
    pub name: &'a str,
    pub alloc_path: Vec<FrameOut<'a>>,
    pub bytes: u64,
    pub allocations: u64,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct LineOut<'a> {
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct FunctionOut<'a> {
    pub function: &'a str,
    pub module: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
    pub lines: Vec<LineOut<'a>>,
}

fn metric_map(db: &Database, values: &[u64]) -> serde_json::Map<String, serde_json::Value> {
    db.info
        .metrics
        .iter()
        .zip(values)
        .map(|(m, &v)| (m.name.clone(), serde_json::Value::from(v)))
        .collect()
}

fn frame_out(f: &Frame) -> FrameOut<'_> {
    FrameOut {
        function: &f.function,
        file: f.file.as_deref(),
        line: f.line,
    }
}

/// Builds the export document of `view`, keeping the first `top` rows.
pub fn build(db: &Database, view: View, top: Option<usize>) -> Export<'_> {
    let top = top.unwrap_or(usize::MAX);
    let stats = &db.info.stats;
    let mut export = Export {
        format: FORMAT,
        version: VERSION,
        view: match view {
            View::Data => "data",
            View::Code => "code",
        },
        source: Source {
            events: &db.info.events,
            ranks: &db.info.ranks,
            processes: db.info.processes,
            threads: db.info.threads,
        },
        metric: db.primary_metric_name(),
        metrics: db
            .info
            .metrics
            .iter()
            .map(|m| MetricDoc {
                name: &m.name,
                unit: &m.unit,
                description: &m.description,
            })
            .collect(),
        stats: Stats {
            samples: stats.samples,
            memory_samples: stats.memory_samples,
            store_samples: stats.store_samples,
            address_recovered: stats.address_recovered,
            recovery_rate: if stats.memory_samples == 0 {
                0.0
            } else {
                stats.address_recovered as f64 / stats.memory_samples as f64
            },
            dropped: stats.dropped.clone(),
        },
        objects: None,
        functions: None,
    };
    match view {
        View::Data => {
            export.objects = Some(
                views::objects(db)
                    .into_iter()
                    .take(top)
                    .map(|o| ObjectOut {
                        kind: o.kind.as_str(),
                        name: o.name,
                        alloc_path: o.alloc_path.iter().map(|f| frame_out(f)).collect(),
                        bytes: o.bytes,
                        allocations: o.allocations,
                        metrics: metric_map(db, &o.metrics),
                        share: o.share,
                    })
                    .collect(),
            )
        }
        View::Code => {
            export.functions = Some(
                views::functions(db)
                    .into_iter()
                    .take(top)
                    .map(|f| FunctionOut {
                        function: f.function,
                        module: f.module,
                        file: f.file,
                        line: f.line,
                        metrics: metric_map(db, &f.metrics),
                        share: f.share,
                        lines: f
                            .lines
                            .iter()
                            .map(|l| LineOut {
                                file: l.file,
                                line: l.line,
                                metrics: metric_map(db, &l.metrics),
                                share: l.share,
                            })
                            .collect(),
                    })
                    .collect(),
            )
        }
    }
    export
}

/// The export as pretty JSON.
pub fn to_json(db: &Database, view: View, top: Option<usize>) -> String {
    let mut s = serde_json::to_string_pretty(&build(db, view, top)).unwrap_or_default();
    s.push('\n');
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn frame_text(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{}@{}:{}", f.function, file, line),
        _ => f.function.clone(),
    }
}

/// The same rows as CSV, one per line, with a header.
pub fn to_csv(db: &Database, view: View, top: Option<usize>) -> String {
    let top = top.unwrap_or(usize::MAX);
    let metric_names: Vec<&str> = db.info.metrics.iter().map(|m| m.name.as_str()).collect();
    let mut out = String::new();
    match view {
        View::Data => {
            out.push_str("kind,name,bytes,allocations");
            for m in &metric_names {
                out.push(',');
                out.push_str(m);
            }
            out.push_str(",share,alloc_path\n");
            for o in views::objects(db).into_iter().take(top) {
                let path: Vec<String> = o.alloc_path.iter().map(|f| frame_text(f)).collect();
                out.push_str(&format!(
                    "{},{},{},{}",
                    o.kind.as_str(),
                    csv_field(o.name),
                    o.bytes,
                    o.allocations
                ));
                for v in &o.metrics {
                    out.push_str(&format!(",{v}"));
                }
                out.push_str(&format!(
                    ",{:.6},{}\n",
                    o.share,
                    csv_field(&path.join(" > "))
                ));
            }
        }
        View::Code => {
            out.push_str("function,module,file,line");
            for m in &metric_names {
                out.push(',');
                out.push_str(m);
            }
            out.push_str(",share\n");
            for f in views::functions(db).into_iter().take(top) {
                out.push_str(&format!(
                    "{},{},{},{}",
                    csv_field(f.function),
                    csv_field(f.module),
                    csv_field(f.file.unwrap_or("")),
                    f.line.map(|l| l.to_string()).unwrap_or_default()
                ));
                for v in &f.metrics {
                    out.push_str(&format!(",{v}"));
                }
                out.push_str(&format!(",{:.6}\n", f.share));
            }
        }
    }
    out
}
