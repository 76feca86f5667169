//! A partial merge that travels: one process's share of the measurement
//! files merged as far as it goes without the others (`hpcprof-rs --mpi`,
//! one share per MPI rank), sent as bytes to another process and combined
//! there, finished on one.
//!
//! A share's trees and objects refer to frames and metric columns by
//! index into its own process's tables, so the bytes carry those tables
//! (frames by value, metrics by name) and the receiver re-interns them and
//! renumbers everything on arrival; then the ordinary [`Partial::absorb`]
//! combines the two. Every process-wide fact (allocation counts, stack
//! sizes, per-rank sums) is settled before sending: the files of one
//! measured process always belong to one share ([`process_groups`]). Since
//! the merge is independent of how its input is split over workers, the
//! finished database is byte-identical to the serial merge's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use formats::database::{DataObject, Frame, ThreadRef};
use formats::measurement::{HistogramLayout, MetricInfo, SampleStats};
use formats::patterns::StrideCounts;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::dist::Acc;
use super::finish::finish;
use super::input::{process_of_file, with_file_input};
use super::objects::{ObjExtra, ObjKey};
use super::output::Streamed;
use super::partial::{InfoAcc, Partial, ProcKey, Shared};
use super::tree::{Key, TreeBuilder};
use super::workers::run_partial;

/// The measurement files grouped by measured process (all threads of a
/// process in one group), in a fixed order: share `r` of `n` is every
/// group `g` with `g % n == r`.
pub fn process_groups(files: &[PathBuf]) -> Vec<Vec<usize>> {
    let mut groups: BTreeMap<(PathBuf, String), Vec<usize>> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        let dir = f.parent().map(PathBuf::from).unwrap_or_default();
        groups.entry((dir, process_of_file(f))).or_default().push(i);
    }
    groups.into_values().collect()
}

/// A partial merge with the tables it refers to.
pub struct Share {
    part: Partial,
    shared: Shared,
}

impl Share {
    /// Merges the files of `groups` (indices into `files`) with the usual
    /// workers, as far as a share goes.
    pub fn merge(
        files: &[PathBuf],
        groups: Vec<Vec<usize>>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Share {
        let sizes = (files.len(), process_groups(files).len());
        let (mut part, shared) =
            with_file_input(files, progress, |input| run_partial(groups, input, sizes));
        // Every process of this share is complete here.
        let pending = std::mem::take(&mut part.pending);
        if !pending.is_empty() {
            part.flush(pending, shared.keep_rank_values);
        }
        part.end_profiles();
        Share { part, shared }
    }

    /// The share as bytes (MessagePack), for [`Share::absorb_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(&Wire::of(self)).expect("a share serialises")
    }

    /// Adds a share sent by another process.
    pub fn absorb_bytes(self, bytes: &[u8]) -> Result<Share, String> {
        let wire: Wire =
            rmp_serde::from_slice(bytes).map_err(|e| format!("damaged partial merge: {e}"))?;
        let other = wire.into_partial(&self.shared)?;
        Ok(Share {
            part: self.part.absorb(other),
            shared: self.shared,
        })
    }

    /// The finished, canonical database (only once every share is in).
    pub fn finish(mut self) -> Streamed {
        // The per-profile tables were freed; the lookup tables rebuilt on
        // arrival are freed by `finish`.
        self.part.end_profiles();
        finish(self.part, self.shared, Vec::new())
    }
}

#[derive(Serialize, Deserialize)]
struct WireTree {
    parents: Vec<u32>,
    keys: Vec<Key>,
    exclusive: Vec<Vec<u64>>,
    threads: Vec<Acc>,
    ranks: Vec<Acc>,
    by_rank: Vec<Vec<(u32, u64)>>,
}

impl WireTree {
    fn of(t: &TreeBuilder) -> Self {
        WireTree {
            parents: t.parents.clone(),
            keys: t.keys.clone(),
            exclusive: t.exclusive.clone(),
            threads: t.threads.clone(),
            ranks: t.ranks.clone(),
            by_rank: t.by_rank.clone(),
        }
    }

    /// The tree with frames and columns renumbered (`frames[f]`,
    /// `columns[c]`).
    fn tree(self, frames: &[u32], columns: &[usize]) -> Result<TreeBuilder, String> {
        let n = self.parents.len();
        if n == 0 || self.keys.len() != n {
            return Err("a tree without a root".into());
        }
        let mut t = TreeBuilder::new();
        t.end_profiles();
        t.parents = self.parents;
        t.keys = Vec::with_capacity(n);
        for k in self.keys {
            t.keys.push(match k {
                Key::Frame(f) => Key::Frame(
                    *frames
                        .get(f as usize)
                        .ok_or("a frame outside the frame table")?,
                ),
                k => k,
            });
        }
        for i in 1..n {
            let p = t.parents[i];
            if p as usize >= i {
                return Err("a node before its parent".into());
            }
            t.children.insert((p, t.keys[i]), i as u32);
        }
        for (c, column) in self.exclusive.into_iter().enumerate() {
            let c = *columns.get(c).ok_or("a column outside the metric list")?;
            for (node, v) in column.into_iter().enumerate() {
                if node < n {
                    t.add_exclusive(c, node as u32, v);
                }
            }
        }
        t.threads = self.threads;
        t.ranks = self.ranks;
        t.by_rank = self.by_rank;
        if t.threads.len() > n || t.ranks.len() > n || t.by_rank.len() > n {
            return Err("node values beyond the tree".into());
        }
        Ok(t)
    }
}

#[derive(Serialize, Deserialize)]
struct WireExtra {
    histogram: Vec<(u32, u64)>,
    by_thread: Vec<(u32, Vec<u64>)>,
    histogram_by_thread: Vec<(u32, Vec<(u32, u64)>)>,
    /// (frame, stride observations) of the object's access sites.
    sites: Vec<(u32, StrideCounts)>,
    /// Sharing events (frames of the key are wire frames).
    sharing: Vec<(super::objects::SharingKey, u64)>,
    reuse: Vec<u64>,
    /// A stack frame's variables touched, with their sampled accesses.
    frame_vars: Vec<(String, u64)>,
}

#[derive(Serialize, Deserialize)]
struct WireInfo {
    events: Vec<String>,
    commands: Vec<Vec<String>>,
    ranks: Vec<u32>,
    processes: Vec<ProcKey>,
    stats: SampleStats,
    profiles: u32,
    skipped: Vec<(String, String)>,
    flushed_ranks: Vec<u32>,
    rank_clash: bool,
    threads: Vec<ThreadRef>,
    layout: Option<HistogramLayout>,
    layout_mismatches: u32,
    checkpoint_only: Vec<String>,
}

/// A [`Share`] on the wire.
#[derive(Serialize, Deserialize)]
struct Wire {
    frames: Vec<Frame>,
    metrics: Vec<(MetricInfo, bool)>,
    warnings: Vec<String>,
    code: WireTree,
    data: WireTree,
    roots: (u32, u32, u32),
    objects: Vec<DataObject>,
    extras: Vec<WireExtra>,
    keys: Vec<ObjKey>,
    info: WireInfo,
    site_counts: Vec<(Vec<u32>, super::partial::BlockCounts)>,
}

impl Wire {
    fn of(s: &Share) -> Wire {
        let p = &s.part;
        let i = &p.info;
        Wire {
            frames: s.shared.symbols.frame_list(),
            metrics: s.shared.columns.snapshot(),
            warnings: s.shared.symbols.warning_list(),
            code: WireTree::of(&p.code),
            data: WireTree::of(&p.data.tb),
            roots: (p.data.heap_root, p.data.static_root, p.data.unknown_root),
            objects: p.data.objects.clone(),
            extras: p
                .data
                .extras
                .iter()
                .map(|e| WireExtra {
                    histogram: e.histogram.iter().map(|(&b, &n)| (b, n)).collect(),
                    by_thread: e.by_thread.clone(),
                    histogram_by_thread: e.histogram_by_thread.clone(),
                    sites: e.sites.iter().map(|(&f, c)| (f, c.clone())).collect(),
                    sharing: e.sharing.iter().map(|(&k, &n)| (k, n)).collect(),
                    reuse: e.reuse.clone(),
                    frame_vars: e.frame_vars.iter().map(|(v, &n)| (v.clone(), n)).collect(),
                })
                .collect(),
            keys: p.data.keys.clone(),
            info: WireInfo {
                events: i.events.iter().cloned().collect(),
                commands: i.commands.iter().cloned().collect(),
                ranks: i.ranks.iter().copied().collect(),
                processes: i.processes.iter().cloned().collect(),
                stats: i.stats.clone(),
                profiles: i.profiles,
                skipped: i.skipped.clone(),
                flushed_ranks: i.flushed_ranks.iter().copied().collect(),
                rank_clash: i.rank_clash,
                threads: i.threads.clone(),
                layout: i.layout,
                layout_mismatches: i.layout_mismatches,
                checkpoint_only: i.checkpoint_only.clone(),
            },
            site_counts: p.site_counts.iter().map(|(k, &v)| (k.clone(), v)).collect(),
        }
    }

    /// The partial, renumbered into `shared`'s frames and columns.
    fn into_partial(self, shared: &Shared) -> Result<Partial, String> {
        let frames: Vec<u32> = self
            .frames
            .into_iter()
            .map(|f| shared.symbols.intern_frame(f))
            .collect();
        let columns: Vec<usize> = self
            .metrics
            .iter()
            .map(|(m, described)| shared.columns.column(m, *described))
            .collect();
        shared.symbols.add_warnings(self.warnings);
        let frame = |f: u32| -> Result<u32, String> {
            frames
                .get(f as usize)
                .copied()
                .ok_or_else(|| "a frame outside the frame table".to_string())
        };
        let path = |p: Vec<u32>| -> Result<Vec<u32>, String> { p.into_iter().map(frame).collect() };
        let values = |v: Vec<u64>| -> Vec<u64> {
            let mut out = Vec::new();
            for (c, x) in v.into_iter().enumerate() {
                if let Some(&to) = columns.get(c) {
                    if out.len() <= to {
                        out.resize(to + 1, 0);
                    }
                    out[to] = x;
                }
            }
            out
        };
        let mut part = Partial::new();
        part.end_profiles();
        part.code = self.code.tree(&frames, &columns)?;
        part.data.tb = self.data.tree(&frames, &columns)?;
        (
            part.data.heap_root,
            part.data.static_root,
            part.data.unknown_root,
        ) = self.roots;
        let n = self.objects.len();
        if self.extras.len() != n || self.keys.len() != n {
            return Err("objects, their keys and extras differ in number".into());
        }
        for ((mut obj, key), extra) in self.objects.into_iter().zip(self.keys).zip(self.extras) {
            obj.alloc_path = path(obj.alloc_path)?;
            for site in &mut obj.sites {
                site.frame = frame(site.frame)?;
            }
            let key = match key {
                ObjKey::Heap(p) => ObjKey::Heap(path(p)?),
                ObjKey::StackFrame(f) => ObjKey::StackFrame(frame(f)?),
                k => k,
            };
            let id = part.data.objects.len() as u32;
            part.data.object_ids.insert(key.clone(), id);
            part.data.keys.push(key);
            part.data.objects.push(obj);
            part.data.extras.push(ObjExtra {
                histogram: extra.histogram.into_iter().collect(),
                by_thread: extra
                    .by_thread
                    .into_iter()
                    .map(|(t, v)| (t, values(v)))
                    .collect(),
                histogram_by_thread: extra.histogram_by_thread,
                sites: extra
                    .sites
                    .into_iter()
                    .map(|(f, c)| Ok((frame(f)?, c)))
                    .collect::<Result<_, String>>()?,
                sharing: extra
                    .sharing
                    .into_iter()
                    .map(|((t, l, th, o, f, of), n)| Ok(((t, l, th, o, frame(f)?, frame(of)?), n)))
                    .collect::<Result<_, String>>()?,
                reuse: extra.reuse,
                frame_vars: extra.frame_vars.into_iter().collect(),
            });
        }
        let i = self.info;
        part.info = InfoAcc {
            events: i.events.into_iter().collect(),
            commands: i.commands.into_iter().collect(),
            ranks: i.ranks.into_iter().collect(),
            processes: i.processes.into_iter().collect(),
            stats: i.stats,
            profiles: i.profiles,
            skipped: i.skipped,
            flushed_ranks: i.flushed_ranks.into_iter().collect(),
            rank_clash: i.rank_clash,
            threads: i.threads,
            layout: i.layout,
            layout_mismatches: i.layout_mismatches,
            checkpoint_only: i.checkpoint_only,
        };
        for (p, counts) in self.site_counts {
            part.site_counts.insert(path(p)?, counts);
        }
        part.cache = FxHashMap::default();
        Ok(part)
    }
}
