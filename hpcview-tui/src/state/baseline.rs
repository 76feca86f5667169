//! The baseline of a comparison (`hpcview-tui AFTER_DB --baseline
//! BEFORE_DB`): the change of every row's share against the matching row
//! of the baseline database, in percentage points, or "new" when the
//! baseline has no such row.
//!
//! Rows are matched the way `hpcprof-rs diff` matches them
//! ([`formats::diff`]): data objects by kind, name and allocation site
//! (source file name and line, never addresses), functions by name, lines
//! by function, file name and line; for those rows the delta is the diff's
//! own `delta_share`. Rows inside the trees (call paths of the top-down
//! pane, access paths below an object, callers of the bottom-up pane) are
//! matched by their path: the baseline row with the same label under the
//! parent's match (frames are labelled `function file:line`, with the
//! file's base name). Their share is the one the pane shows for them, in
//! both databases, so the delta is `after share - baseline share`.
//!
//! What "share" is follows [`Pane::share`] and `hpcprof-rs diff`: an
//! object's share of all data-centric samples, a function's *exclusive*
//! share of all code-centric samples (as in the bottleneck view), a line's
//! share, a call path's inclusive share.
//!
//! ```
//! use hpcview_tui::fixtures;
//! use hpcview_tui::state::{baseline::{Baseline, Delta}, model::Model, tree::{Pane, PaneKind}};
//! let after = Model::new(fixtures::abc(), None);
//! let mut before_db = fixtures::abc();
//! before_db.objects[0].name = "D".into(); // C is not in the baseline
//! let mut base = Baseline::new("before/".into(), before_db, &after.db);
//! let pane = Pane::new(&after, PaneKind::Data);
//! let c = pane.visible[0];
//! assert_eq!(base.delta(&after, &pane, c), Some(Delta::New));
//! assert_eq!(base.delta(&after, &pane, pane.visible[1]).unwrap().text(), "0.0");
//! ```

use std::collections::HashMap;
use std::path::PathBuf;

use formats::database::Database;
use formats::diff::{self, Diff, Status};

use super::model::Model;
use super::tree::{Node, Pane, PaneKind};

/// The change of one row against the baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delta {
    /// `after share - baseline share`, as a fraction (0.123: +12.3 points).
    Change(f64),
    /// No matching row in the baseline.
    New,
}

impl Delta {
    /// "+12.3", "-4.0", "0.0" (percentage points, one decimal) or "new".
    pub fn text(self) -> String {
        match self {
            Delta::New => "new".into(),
            Delta::Change(d) => {
                let pp = (1000.0 * d).round() / 10.0;
                if pp == 0.0 {
                    "0.0".into()
                } else {
                    format!("{pp:+.1}")
                }
            }
        }
    }
}

/// What the baseline's diff says of a row matched by key.
fn by_key(rows: &[diff::Row]) -> HashMap<String, Delta> {
    rows.iter()
        .filter_map(|r| {
            let d = match r.status {
                Status::Matched => Delta::Change(r.delta_share),
                Status::New => Delta::New,
                Status::Vanished => return None,
            };
            Some((r.key(), d))
        })
        .collect()
}

/// The baseline database and the matching state.
#[derive(Debug)]
pub struct Baseline {
    /// The path the user gave (for headers).
    pub path: PathBuf,
    /// The baseline, indexed like the database in view.
    pub model: Model,
    /// `hpcprof-rs diff BASELINE DB`.
    pub diff: Diff,
    objects: HashMap<String, Delta>,
    functions: HashMap<String, Delta>,
    lines: HashMap<String, Delta>,
    /// Object key (`formats::diff::object_key`) of every object of the
    /// database in view, and the baseline's object of each key.
    after_keys: Vec<String>,
    before_objects: HashMap<String, u32>,
    /// The baseline's outlines, materialised as rows are matched.
    panes: HashMap<PaneKind, Pane>,
    /// (pane, item of the database in view) -> item of the baseline's pane.
    matches: HashMap<(PaneKind, u32), Option<u32>>,
}

impl Baseline {
    /// Compares `after` (the database in view) with `before`, read from
    /// `path`.
    pub fn new(path: PathBuf, before: Database, after: &Database) -> Self {
        let diff = diff::diff(&before, after);
        let after_keys = after
            .objects
            .iter()
            .map(|o| diff::object_key(after, o))
            .collect();
        let before_objects = before
            .objects
            .iter()
            .enumerate()
            .map(|(i, o)| (diff::object_key(&before, o), i as u32))
            .collect();
        Baseline {
            path,
            objects: by_key(&diff.objects),
            functions: by_key(&diff.functions),
            lines: by_key(&diff.lines),
            diff,
            after_keys,
            before_objects,
            model: Model::new(before, None),
            panes: HashMap::new(),
            matches: HashMap::new(),
        }
    }

    /// The delta of object `o` of the database in view (as `hpcprof-rs
    /// diff` has it).
    pub fn object_delta(&self, o: u32) -> Option<Delta> {
        let key = self.after_keys.get(o as usize)?;
        Some(match self.objects.get(key) {
            Some(d) => *d,
            // In both runs without samples: the diff leaves it out.
            None if self.before_objects.contains_key(key) => Delta::Change(0.0),
            None => Delta::New,
        })
    }

    /// The delta of a function, by name (as `hpcprof-rs diff` has it).
    pub fn function_delta(&self, name: &str) -> Delta {
        self.functions.get(name).copied().unwrap_or(Delta::New)
    }

    /// Objects and functions of the baseline that this database lacks.
    pub fn vanished(&self) -> (usize, usize) {
        let n = |rows: &[diff::Row]| rows.iter().filter(|r| r.status == Status::Vanished).count();
        (n(&self.diff.objects), n(&self.diff.functions))
    }

    /// The delta of row `id` of `pane` (a pane of `after`); None for rows
    /// without values (allocation paths).
    pub fn delta(&mut self, after: &Model, pane: &Pane, id: u32) -> Option<Delta> {
        let item = pane.items.get(id as usize)?;
        if !item.has_metrics() {
            return None;
        }
        match (item.node, item.parent) {
            (Node::Object(o), None) => return self.object_delta(o),
            // Functions and lines without exclusive samples are in
            // neither run's diff: matched by path below.
            (Node::Group(_), None) => {
                if let Some(d) = self.functions.get(&item.label) {
                    return Some(*d);
                }
            }
            (Node::Line(_), Some(p)) => {
                let function = &pane.items[p as usize].label;
                let key = format!("{function}\u{0}{}", item.label);
                if let Some(d) = self.lines.get(&key) {
                    return Some(*d);
                }
            }
            _ => {}
        }
        Some(match self.matching(pane, id) {
            Some(b) => {
                let base = &self.panes[&pane.kind];
                Delta::Change(pane.share(after, id) - base.share(&self.model, b))
            }
            None => Delta::New,
        })
    }

    /// The baseline pane's row that matches row `id` of `pane`.
    fn matching(&mut self, pane: &Pane, id: u32) -> Option<u32> {
        let kind = pane.kind;
        if let Some(m) = self.matches.get(&(kind, id)) {
            return *m;
        }
        let item = &pane.items[id as usize];
        let parent = item.parent.map(|p| self.matching(pane, p));
        let model = &self.model;
        let base = self
            .panes
            .entry(kind)
            .or_insert_with(|| Pane::new(model, kind));
        let found = match parent {
            // The parent has no match: neither has this row.
            Some(None) => None,
            Some(Some(p)) => {
                base.materialize(model, p);
                let kids = base.items[p as usize].children.clone().unwrap_or_default();
                kids.into_iter()
                    .find(|&k| same_row(&base.items[k as usize], item))
            }
            None => match item.node {
                Node::Object(o) => {
                    let b = self
                        .after_keys
                        .get(o as usize)
                        .and_then(|key| self.before_objects.get(key))
                        .copied();
                    b.and_then(|b| {
                        base.roots
                            .iter()
                            .copied()
                            .find(|&r| base.items[r as usize].node == Node::Object(b))
                    })
                }
                _ => base
                    .roots
                    .iter()
                    .copied()
                    .find(|&r| same_row(&base.items[r as usize], item)),
            },
        };
        self.matches.insert((kind, id), found);
        found
    }
}

/// Same kind of row, label and site.
fn same_row(a: &super::tree::Item, b: &super::tree::Item) -> bool {
    std::mem::discriminant(&a.node) == std::mem::discriminant(&b.node)
        && a.label == b.label
        && a.site == b.site
        && a.tag == b.tag
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn an_object_without_samples_in_either_run_did_not_change() {
        // An object never sampled, in both runs: the diff leaves it out,
        // and the viewer says 0.0, not "new".
        let unsampled = |mut db: Database| {
            db.data.nodes.push(formats::database::TreeNode {
                parent: 0,
                kind: formats::database::NodeKind::Object(db.objects.len() as u32),
                exclusive: vec![0],
                threads: None,
                ranks: None,
                by_rank: Vec::new(),
            });
            db.objects.push(formats::database::DataObject {
                kind: formats::database::ObjectKind::Heap,
                name: "idle".into(),
                node: db.data.nodes.len() as u32 - 1,
                ..Default::default()
            });
            db
        };
        let after = Model::new(unsampled(fixtures::abc()), None);
        let base = Baseline::new("b".into(), unsampled(fixtures::abc()), &after.db);
        let idle = after.db.objects.len() as u32 - 1;
        assert!(!base.diff.objects.iter().any(|r| r.name == "idle"));
        assert_eq!(base.object_delta(idle), Some(Delta::Change(0.0)));
    }

    #[test]
    fn objects_take_the_diffs_delta_and_paths_their_own() {
        let after = Model::new(fixtures::abc_faster(), None);
        let mut base = Baseline::new("b".into(), fixtures::abc(), &after.db);
        let mut pane = Pane::new(&after, PaneKind::Data);
        let c = pane.visible[0];
        assert_eq!(pane.items[c as usize].label, "C");
        // C: 90% before, 300 of 400 = 75% after.
        let d = base
            .diff
            .objects
            .iter()
            .find(|r| r.name == "C")
            .unwrap()
            .delta_share;
        assert_eq!(base.delta(&after, &pane, c), Some(Delta::Change(d)));
        assert_eq!(base.delta(&after, &pane, c).unwrap().text(), "-15.0");
        // The access path below C: matched by path, same share as C.
        pane.toggle(&after);
        let alloc = pane.visible[1];
        assert_eq!(base.delta(&after, &pane, alloc), None);
        let path = pane.visible[2];
        assert_eq!(pane.items[path as usize].label, "_start");
        assert_eq!(base.delta(&after, &pane, path).unwrap().text(), "-15.0");
        // B: 7% -> 17.5%.
        let b = *pane
            .visible
            .iter()
            .find(|&&i| pane.items[i as usize].label == "B")
            .unwrap();
        assert_eq!(base.delta(&after, &pane, b).unwrap().text(), "+10.5");
    }

    #[test]
    fn code_rows_and_new_rows() {
        let mut after_db = fixtures::abc();
        after_db.frames[9].function = "compute_v2".into();
        let after = Model::new(after_db, None);
        let mut base = Baseline::new("b".into(), fixtures::abc(), &after.db);
        for kind in [PaneKind::TopDown, PaneKind::BottomUp, PaneKind::Flat] {
            let mut pane = Pane::new(&after, kind);
            assert!(pane.search(&after, "compute_v2", true), "{kind:?}");
            let id = pane.selected_id().unwrap();
            assert_eq!(base.delta(&after, &pane, id), Some(Delta::New), "{kind:?}");
            // main is in both, and so is __libc_start_call_main (no
            // exclusive samples: not in the diff's functions).
            pane.select_edge(false);
            assert!(pane.search(&after, "main", true), "{kind:?}");
            let id = pane.selected_id().unwrap();
            let d = base.delta(&after, &pane, id).unwrap();
            assert!(matches!(d, Delta::Change(_)), "{kind:?}: {d:?}");
            assert!(pane.search(&after, "main", true), "{kind:?}");
            let id = pane.selected_id().unwrap();
            let d = base.delta(&after, &pane, id).unwrap();
            assert!(matches!(d, Delta::Change(_)), "{kind:?}: {d:?}");
        }
    }

    #[test]
    fn delta_text() {
        assert_eq!(Delta::Change(0.123).text(), "+12.3");
        assert_eq!(Delta::Change(-0.04).text(), "-4.0");
        assert_eq!(Delta::Change(-0.0001).text(), "0.0");
        assert_eq!(Delta::New.text(), "new");
    }
}
