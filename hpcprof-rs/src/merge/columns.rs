//! The metric columns of the database: one registry shared by all workers
//! that gives every metric name its column, [`PRIMARY`] first.

use std::sync::Mutex;

use formats::measurement::{MetricInfo, ThreadProfile};

/// Name of the primary metric (always database column 0).
pub const PRIMARY: &str = "samples";

/// Column registry shared by the workers: database column of every metric
/// name, `samples` first.
pub(super) struct Columns {
    /// (metric, described by a profile yet).
    pub(super) list: Mutex<Vec<(MetricInfo, bool)>>,
}

impl Columns {
    pub(super) fn new() -> Self {
        Columns {
            list: Mutex::new(vec![(
                MetricInfo {
                    name: PRIMARY.to_string(),
                    unit: String::new(),
                    description: String::new(),
                },
                false,
            )]),
        }
    }

    /// Database column of each of `p`'s metric columns.
    pub(super) fn map(&self, p: &ThreadProfile) -> Vec<usize> {
        // Columns that nodes carry beyond the named ones get synthetic names.
        let width = [&p.code, &p.heap, &p.statics_tree, &p.unknown]
            .iter()
            .flat_map(|t| t.nodes.iter().map(|n| n.metrics.len()))
            .max()
            .unwrap_or(0)
            .max(p.metrics.len());
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        (0..width)
            .map(|j| {
                let (info, described) = match p.metrics.get(j) {
                    Some(m) => (m.clone(), true),
                    None => (
                        MetricInfo {
                            name: if j == 0 && p.metrics.is_empty() {
                                PRIMARY.to_string()
                            } else {
                                format!("metric{j}")
                            },
                            unit: String::new(),
                            description: String::new(),
                        },
                        false,
                    ),
                };
                match list.iter().position(|(m, _)| m.name == info.name) {
                    Some(c) => {
                        if described && !list[c].1 {
                            list[c] = (info, true);
                        }
                        c
                    }
                    None => {
                        list.push((info, described));
                        list.len() - 1
                    }
                }
            })
            .collect()
    }

    pub(super) fn finish(self) -> Vec<MetricInfo> {
        let list = self.list.into_inner().unwrap_or_else(|e| e.into_inner());
        list.into_iter().map(|(m, _)| m).collect()
    }

    /// The registry so far: (metric, described by a profile yet).
    pub(super) fn snapshot(&self) -> Vec<(MetricInfo, bool)> {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Database column of a metric of another process's partial merge.
    pub(super) fn column(&self, info: &MetricInfo, described: bool) -> usize {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        match list.iter().position(|(m, _)| m.name == info.name) {
            Some(c) => {
                if described && !list[c].1 {
                    list[c] = (info.clone(), true);
                }
                c
            }
            None => {
                list.push((info.clone(), described));
                list.len() - 1
            }
        }
    }
}
