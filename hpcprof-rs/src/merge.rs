//! Merges thread profiles into one symbolised [`Database`], streaming.
//!
//! The input is a list of profiles (files, or decoded profiles in tests),
//! grouped by process (`<exe>.<host>.<pid>.<tid>.hpcrun`: everything but
//! the thread id) and cut into work items. A fixed number of workers (the
//! rayon pool, `-j N`) pull work items from a shared counter; each worker
//! owns one partial database and, for every profile, reads and decodes it,
//! merges it into its partial and drops it. So memory holds at most one
//! profile per worker plus one partial result per worker, never the inputs.
//! The partials are then combined, frames/objects/nodes put into a canonical
//! order (the result does not depend on the number of workers or on timing),
//! heap objects named and the per-node distributions finished.
//!
//! * Raw addresses are mapped to (module, file address) with the profile's
//!   module table and symbolised on first sight by the shared
//!   [`Symbolizer`] (one addr2line context per module, opened lazily; each
//!   address resolved once per merge); each address becomes its inline
//!   chain of frames, outermost first.
//! * Trees merge by (parent, frame or object); exclusive metrics are summed
//!   (columns matched by metric name; `samples` is always column 0, the
//!   primary metric).
//! * Data objects are identified by what they are, not by where a process
//!   kept them: a heap object by its symbolised allocation path (the same
//!   path in two threads, processes or ranks is one object), a static
//!   variable by its name, a stack by its thread index.
//! * Distributions (`TreeNode::threads`, `TreeNode::ranks`): for each
//!   profile the inclusive primary value of every node it reaches is
//!   computed in the merged tree (sparse, only the nodes it touched) and
//!   added to per-node accumulators (count of non-zero values, sum, sum of
//!   squares, min, max); threads that never reached a node count as 0 when
//!   the summary is finished with the total thread count. Per-rank values
//!   are summed over a process's threads first (a process's files are one
//!   work item unless the group is split, in which case its per-rank sums
//!   are carried along and combined before they are accumulated).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use formats::database::{
    AccessSite, DataObject, Database, DbInfo, Dist, Frame, ObjectHistogram, ObjectKind, ThreadRef,
    MAX_RANK_VALUES, MAX_THREAD_VALUES,
};
use formats::measurement::{
    HistogramLayout, MetricInfo, NodeKey, ObjectRef, SampleStats, ThreadProfile,
};
use formats::patterns::StrideCounts;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

mod output;
mod share;

use crate::site::Wrappers;
use crate::symbolize::{self, Loc, Symbolizer};
use output::FinishedTree;
pub use output::MergedDb;
pub use share::{process_groups, Share};

/// FxHash (rustc's hasher): the merge hashes small integer keys millions
/// of times; SipHash's DoS resistance buys nothing here.
#[derive(Debug, Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// Name of the root under which heap objects hang.
pub const HEAP_ROOT: &str = "heap data";
/// Name of the root under which static variables hang.
pub const STATIC_ROOT: &str = "static data";
/// Name of the root of everything else.
pub const UNKNOWN_ROOT: &str = "unknown data";

/// Name of the primary metric (always database column 0).
pub const PRIMARY: &str = "samples";

/// A merged database and what went wrong on the way (nothing fatal).
#[derive(Debug)]
pub struct Merged {
    pub db: Database,
    pub warnings: Vec<String>,
}

/// A merged database ready to be written without being held in memory as a
/// whole ([`MergedDb`]), and what went wrong on the way (nothing fatal).
#[derive(Debug)]
pub struct Streamed {
    pub db: MergedDb,
    pub warnings: Vec<String>,
}

impl Streamed {
    /// The whole database in memory.
    pub fn into_merged(self) -> Merged {
        Merged {
            db: self.db.into_database(),
            warnings: self.warnings,
        }
    }
}

/// Identity of a measured process: (run id, host, pid).
type ProcKey = (String, String, u32);

fn proc_key(p: &ThreadProfile) -> ProcKey {
    (
        p.process.run_id.clone(),
        p.process.host.clone(),
        p.process.pid,
    )
}

/// Runtime address -> module of one profile.
struct AddrMap {
    /// (start, end, module id, bias), sorted by start.
    ranges: Vec<(u64, u64, u32, u64)>,
}

impl AddrMap {
    fn locate(&self, addr: u64) -> Loc {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        if i > 0 {
            let (start, end, module, bias) = self.ranges[i - 1];
            if addr >= start && addr < end {
                return Loc::Module(module, addr.wrapping_sub(bias));
            }
        }
        Loc::Unknown(addr)
    }
}

/// Identity of a data object across profiles.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum ObjKey {
    Heap(Vec<u32>),
    Static(String),
    Stack(u32),
    SmallHeap,
    Unknown,
    NotRecovered,
}

impl ObjKey {
    fn kind(&self) -> ObjectKind {
        match self {
            ObjKey::Heap(_) | ObjKey::SmallHeap => ObjectKind::Heap,
            ObjKey::Static(_) => ObjectKind::Static,
            ObjKey::Stack(_) => ObjectKind::Stack,
            ObjKey::Unknown | ObjKey::NotRecovered => ObjectKind::Unknown,
        }
    }

    fn default_name(&self) -> String {
        match self {
            // Set once all objects exist (it reads sources).
            ObjKey::Heap(_) => "heap@[unknown]".to_string(),
            ObjKey::Static(name) => name.clone(),
            ObjKey::Stack(n) => format!("<stack: thread {n}>"),
            ObjKey::SmallHeap => "<small heap objects>".to_string(),
            ObjKey::Unknown => "<unknown address>".to_string(),
            ObjKey::NotRecovered => "<address not recovered>".to_string(),
        }
    }
}

/// The named roots, by [`Key::Root`] index.
const ROOTS: [&str; 4] = ["", HEAP_ROOT, STATIC_ROOT, UNKNOWN_ROOT];

/// Child key of a tree node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Key {
    /// Index into [`ROOTS`].
    Root(u8),
    Frame(u32),
    Object(u32),
}

/// Streaming summary of a value over threads (or ranks); only non-zero
/// values are added, the zeros are implied by the final count.
///
/// 40 bytes (one per tree node): the sum of squares is kept in 96 bits
/// (`sumsq_hi`, `sumsq_lo`; saturating at 2^96, i.e. values of 2^48 per
/// thread) instead of a 16-byte aligned `u128`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Acc {
    count: u32,
    sumsq_hi: u32,
    sumsq_lo: u64,
    sum: u64,
    min: u64,
    max: u64,
}

impl Default for Acc {
    fn default() -> Self {
        Acc {
            count: 0,
            sumsq_hi: 0,
            sumsq_lo: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

/// Largest sum of squares an [`Acc`] holds.
const SUMSQ_MAX: u128 = (1 << 96) - 1;

impl Acc {
    fn sumsq(&self) -> u128 {
        (u128::from(self.sumsq_hi) << 64) | u128::from(self.sumsq_lo)
    }

    fn add_sumsq(&mut self, v: u128) {
        let s = self.sumsq().saturating_add(v).min(SUMSQ_MAX);
        self.sumsq_hi = (s >> 64) as u32;
        self.sumsq_lo = s as u64;
    }

    fn add(&mut self, v: u64) {
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        self.add_sumsq(u128::from(v) * u128::from(v));
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn absorb(&mut self, o: &Acc) {
        self.count += o.count;
        self.sum = self.sum.saturating_add(o.sum);
        self.add_sumsq(o.sumsq());
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// The summary over `n` threads (or ranks), those not added being 0.
    fn dist(&self, n: u32) -> Dist {
        let n = n.max(self.count);
        if n == 0 {
            return Dist::default();
        }
        let nf = f64::from(n);
        let mean = self.sum as f64 / nf;
        // Population variance (n*sumsq - sum^2) / n^2, exact in u128 when
        // it fits.
        let sum = u128::from(self.sum);
        let sumsq = self.sumsq();
        let var = match (u128::from(n).checked_mul(sumsq), sum.checked_mul(sum)) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / (nf * nf),
            _ => (sumsq as f64 / nf - mean * mean).max(0.0),
        };
        Dist {
            count: n,
            min: if self.count < n || self.count == 0 {
                0.0
            } else {
                self.min as f64
            },
            max: self.max as f64,
            mean,
            stddev: var.sqrt(),
        }
    }
}

/// Sparse per-node values (node -> inclusive value) of one rank.
type RankValues = FxMap<u32, u64>;

/// Key of the (parent, address) edge cache: a [`Loc`] flattened next to
/// the parent (16 bytes instead of 24, the map holds one per edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct EdgeKey {
    addr: u64,
    /// Module id, `u32::MAX` for [`Loc::Unknown`].
    module: u32,
    parent: u32,
}

impl EdgeKey {
    fn new(parent: u32, loc: Loc) -> Self {
        let (module, addr) = match loc {
            Loc::Module(m, a) => (m, a),
            Loc::Unknown(a) => (u32::MAX, a),
        };
        EdgeKey {
            addr,
            module,
            parent,
        }
    }
}

/// Entries of a [`TreeBuilder`]'s edge cache (24 bytes each).
const EDGE_CACHE: usize = 1 << 15;

/// A tree under construction.
struct TreeBuilder {
    parents: Vec<u32>,
    keys: Vec<Key>,
    /// Exclusive metrics, column-major: `exclusive[c][node]`. A column is
    /// only as long as its last non-zero node (missing values are 0), so a
    /// column that a tree never uses costs nothing.
    exclusive: Vec<Vec<u64>>,
    children: FxMap<(u32, Key), u32>,
    /// (parent, address) -> node at the end of the address's inline chain:
    /// one lookup per profile node instead of one per frame. A cache of at
    /// most [`EDGE_CACHE`] entries: the edges below one thread's own
    /// objects (its stack, say) are never met again, and a table that
    /// grew with the tree would cost as much memory as the tree itself.
    edges: FxMap<EdgeKey, u32>,
    threads: Vec<Acc>,
    ranks: Vec<Acc>,
    /// (rank, inclusive value) per node, for the viewer's rank filter.
    by_rank: Vec<Vec<(u32, u64)>>,
    /// Inclusive value of the current profile at the nodes in `touched`.
    scratch: Vec<u64>,
    /// Nodes the current profile reached (each once, see `in_touched`).
    touched: Vec<u32>,
    /// Per node: in `touched`.
    in_touched: Vec<bool>,
}

impl TreeBuilder {
    /// Frees the tables that only adding profiles needs (descending by
    /// address, the current profile's values).
    fn end_profiles(&mut self) {
        self.edges = FxMap::default();
        self.scratch = Vec::new();
        self.touched = Vec::new();
        self.in_touched = Vec::new();
    }

    fn new() -> Self {
        TreeBuilder {
            parents: vec![u32::MAX],
            keys: vec![Key::Root(0)],
            exclusive: Vec::new(),
            children: FxMap::default(),
            edges: FxMap::default(),
            threads: vec![Acc::default()],
            ranks: Vec::new(),
            by_rank: Vec::new(),
            scratch: vec![0],
            touched: Vec::new(),
            in_touched: vec![false],
        }
    }

    fn len(&self) -> usize {
        self.parents.len()
    }

    fn child(&mut self, parent: u32, key: Key) -> u32 {
        if let Some(&id) = self.children.get(&(parent, key)) {
            return id;
        }
        let id = self.parents.len() as u32;
        self.parents.push(parent);
        self.keys.push(key);
        // The per-profile arrays exist while profiles are added (see
        // `end_profiles`).
        if !self.in_touched.is_empty() {
            self.scratch.push(0);
            self.in_touched.push(false);
        }
        self.children.insert((parent, key), id);
        id
    }

    /// Descends from `parent` through the inline chain of `addr`.
    fn call(&mut self, parent: u32, addr: u64, cx: &mut Resolver<'_>) -> u32 {
        let loc = cx.addrs.locate(addr);
        let key = EdgeKey::new(parent, loc);
        if let Some(&n) = self.edges.get(&key) {
            return n;
        }
        let chain = cx.chain(loc);
        let n = self.path(parent, &chain);
        if self.edges.len() >= EDGE_CACHE {
            self.edges.clear();
        }
        self.edges.insert(key, n);
        n
    }

    /// Descends from `parent` through `frames` (outermost first).
    fn path(&mut self, parent: u32, frames: &[u32]) -> u32 {
        frames
            .iter()
            .fold(parent, |cur, &f| self.child(cur, Key::Frame(f)))
    }

    /// Adds `v` to the exclusive value of column `c` at `node`.
    fn add_exclusive(&mut self, c: usize, node: u32, v: u64) {
        if v == 0 {
            return;
        }
        if self.exclusive.len() <= c {
            self.exclusive.resize(c + 1, Vec::new());
        }
        let column = &mut self.exclusive[c];
        let i = node as usize;
        if column.len() <= i {
            column.resize(i + 1, 0);
        }
        column[i] = column[i].saturating_add(v);
    }

    /// The exclusive value of column `c` at `node`.
    fn exclusive_value(&self, c: usize, node: usize) -> u64 {
        self.exclusive
            .get(c)
            .and_then(|column| column.get(node))
            .copied()
            .unwrap_or(0)
    }

    /// Adds a profile node's metrics (`cols` maps its columns to ours) and
    /// notes its primary value for the current profile's distribution.
    fn add(&mut self, node: u32, metrics: &[u64], cols: &[usize]) {
        let mut primary = 0;
        for (j, &v) in metrics.iter().enumerate() {
            if v == 0 {
                continue;
            }
            if let Some(&c) = cols.get(j) {
                self.add_exclusive(c, node, v);
                if c == 0 {
                    primary = v;
                }
            }
        }
        self.touch(node, primary);
    }

    fn touch(&mut self, node: u32, v: u64) {
        if v == 0 {
            return;
        }
        self.note_touched(node);
        let s = &mut self.scratch[node as usize];
        *s = s.saturating_add(v);
    }

    /// Adds `node` to `touched` unless it is there already.
    fn note_touched(&mut self, node: u32) {
        let seen = &mut self.in_touched[node as usize];
        if !*seen {
            *seen = true;
            self.touched.push(node);
        }
    }

    /// Ends a profile: its inclusive value of every node it reached goes
    /// into the thread accumulators (and into `rank`'s sums).
    fn end_profile(&mut self, mut rank: Option<&mut RankValues>) {
        // The ancestors of every touched node receive its value too.
        let mut i = 0;
        while i < self.touched.len() {
            let p = self.parents[self.touched[i] as usize];
            if p != u32::MAX {
                self.note_touched(p);
            }
            i += 1;
        }
        // Children have larger ids than their parents: in decreasing order
        // every node comes after all of its descendants.
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable_by(|a, b| b.cmp(a));
        if self.threads.len() < self.len() {
            self.threads.resize(self.len(), Acc::default());
        }
        for &n in &touched {
            self.in_touched[n as usize] = false;
            let v = std::mem::take(&mut self.scratch[n as usize]);
            self.threads[n as usize].add(v);
            if let Some(r) = rank.as_deref_mut() {
                let e = r.entry(n).or_default();
                *e = e.saturating_add(v);
            }
            let p = self.parents[n as usize];
            if p != u32::MAX {
                let s = &mut self.scratch[p as usize];
                *s = s.saturating_add(v);
            }
        }
        touched.clear();
        self.touched = touched;
    }

    /// Adds one rank's sums to the rank accumulators and per-rank values.
    /// Adds one rank's per-node values to the rank summaries, and to the
    /// per-rank lists when `keep` (runs whose database keeps them: a list
    /// entry per node and rank would otherwise be held until the end,
    /// 16,000 ranks: 650 MB).
    fn add_rank(&mut self, rank: u32, values: &RankValues, keep: bool) {
        if self.ranks.len() < self.len() {
            self.ranks.resize(self.len(), Acc::default());
        }
        if keep && self.by_rank.len() < self.len() {
            self.by_rank.resize(self.len(), Vec::new());
        }
        for (&n, &v) in values {
            if v > 0 {
                self.ranks[n as usize].add(v);
                if keep {
                    self.by_rank[n as usize].push((rank, v));
                }
            }
        }
    }
}

/// Per-object facts beyond the tree: access histogram and per-thread
/// values.
#[derive(Debug, Default)]
struct ObjExtra {
    /// bucket -> sampled accesses.
    histogram: BTreeMap<u32, u64>,
    /// Inclusive metrics (database columns) of the object in each thread,
    /// by index into the partial result's `InfoAcc::threads`.
    by_thread: Vec<(u32, Vec<u64>)>,
    /// The access histogram of each thread (same indices), sparse.
    histogram_by_thread: Vec<(u32, Vec<(u32, u64)>)>,
    /// Access sites: innermost frame of the sampled instruction -> its
    /// stride observations, summed over threads.
    sites: HashMap<u32, StrideCounts>,
}

impl ObjExtra {
    /// Adds `other`, whose thread indices are `thread_offset` lower than
    /// ours (its threads follow ours).
    fn absorb(&mut self, other: ObjExtra, thread_offset: u32) {
        for (b, n) in other.histogram {
            let e = self.histogram.entry(b).or_default();
            *e = e.saturating_add(n);
        }
        self.by_thread.extend(
            other
                .by_thread
                .into_iter()
                .map(|(t, values)| (t + thread_offset, values)),
        );
        self.histogram_by_thread.extend(
            other
                .histogram_by_thread
                .into_iter()
                .map(|(t, counts)| (t + thread_offset, counts)),
        );
        for (frame, counts) in other.sites {
            self.sites.entry(frame).or_default().absorb(&counts);
        }
    }
}

/// Adds `values` into `into`, growing it as needed.
fn add_values(into: &mut Vec<u64>, values: &[u64]) {
    if into.len() < values.len() {
        into.resize(values.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(values) {
        *a = a.saturating_add(*b);
    }
}

/// The data tree and its objects under construction.
struct DataBuilder {
    tb: TreeBuilder,
    heap_root: u32,
    static_root: u32,
    unknown_root: u32,
    objects: Vec<DataObject>,
    /// Parallel to `objects`.
    extras: Vec<ObjExtra>,
    keys: Vec<ObjKey>,
    object_ids: HashMap<ObjKey, u32>,
}

impl DataBuilder {
    fn new() -> Self {
        let mut tb = TreeBuilder::new();
        let heap_root = tb.child(0, Key::Root(1));
        let static_root = tb.child(0, Key::Root(2));
        let unknown_root = tb.child(0, Key::Root(3));
        DataBuilder {
            tb,
            heap_root,
            static_root,
            unknown_root,
            objects: Vec::new(),
            extras: Vec::new(),
            keys: Vec::new(),
            object_ids: HashMap::new(),
        }
    }

    /// The id of an object, created on first use. Heap objects hang below
    /// their allocation path, the others directly below their group root.
    fn object(&mut self, key: &ObjKey) -> u32 {
        if let Some(&id) = self.object_ids.get(key) {
            return id;
        }
        let id = self.objects.len() as u32;
        let (parent, alloc_path) = match key {
            ObjKey::Heap(path) => (self.tb.path(self.heap_root, path), path.clone()),
            ObjKey::Static(_) => (self.static_root, Vec::new()),
            _ => (self.unknown_root, Vec::new()),
        };
        let node = self.tb.child(parent, Key::Object(id));
        self.objects.push(DataObject {
            kind: key.kind(),
            name: key.default_name(),
            alloc_path,
            alloc_site: None,
            label: None,
            bytes: 0,
            allocations: 0,
            node,
            histogram: None,
            by_thread: Vec::new(),
            histogram_by_thread: Vec::new(),
            sites: Vec::new(),
        });
        self.extras.push(ObjExtra::default());
        self.keys.push(key.clone());
        self.object_ids.insert(key.clone(), id);
        id
    }
}

/// Column registry shared by the workers: database column of every metric
/// name, `samples` first.
struct Columns {
    /// (metric, described by a profile yet).
    list: Mutex<Vec<(MetricInfo, bool)>>,
}

impl Columns {
    fn new() -> Self {
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
    fn map(&self, p: &ThreadProfile) -> Vec<usize> {
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

    fn finish(self) -> Vec<MetricInfo> {
        let list = self.list.into_inner().unwrap_or_else(|e| e.into_inner());
        list.into_iter().map(|(m, _)| m).collect()
    }

    /// The registry so far: (metric, described by a profile yet).
    fn snapshot(&self) -> Vec<(MetricInfo, bool)> {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Database column of a metric of another process's partial merge.
    fn column(&self, info: &MetricInfo, described: bool) -> usize {
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

/// State shared by all workers.
struct Shared {
    symbols: Symbolizer,
    columns: Columns,
    /// The whole merge has at most `MAX_THREAD_VALUES` inputs: per-thread
    /// values and histograms of objects are gathered (the database keeps
    /// them only for runs of that many threads).
    keep_thread_values: bool,
    /// The whole merge has at most `MAX_RANK_VALUES` processes (hence
    /// ranks): per-rank values of nodes are gathered.
    keep_rank_values: bool,
}

/// (allocations, bytes, symbolised allocation path) of one site.
type SiteCounts = (u64, u64, Vec<u32>);

/// Per-process facts gathered over one work item (or, for a process whose
/// files were split over several work items, carried until the end).
#[derive(Default)]
struct ProcState {
    /// (process, raw allocation path) -> (allocations, bytes, symbolised path):
    /// process-wide counts repeated in every thread file (max taken).
    sites: HashMap<(ProcKey, Vec<u64>), SiteCounts>,
    /// (process, thread index) -> stack size.
    stacks: HashMap<(ProcKey, u32), u64>,
    /// Stack objects seen: (process, thread index).
    stack_refs: HashSet<(ProcKey, u32)>,
    /// rank -> per-node sums, code tree and data tree.
    code_ranks: HashMap<u32, RankValues>,
    data_ranks: HashMap<u32, RankValues>,
}

impl ProcState {
    fn is_empty(&self) -> bool {
        self.sites.is_empty()
            && self.stacks.is_empty()
            && self.stack_refs.is_empty()
            && self.code_ranks.is_empty()
            && self.data_ranks.is_empty()
    }
}

/// Everything in a partial result besides the trees.
#[derive(Default)]
struct InfoAcc {
    events: BTreeSet<String>,
    commands: BTreeSet<Vec<String>>,
    ranks: BTreeSet<u32>,
    processes: HashSet<ProcKey>,
    stats: SampleStats,
    profiles: u32,
    skipped: Vec<(String, String)>,
    /// Ranks whose sums were accumulated (twice: split processes).
    flushed_ranks: HashSet<u32>,
    rank_clash: bool,
    /// Every merged thread.
    threads: Vec<ThreadRef>,
    /// The histogram layout of the first profile that had histograms.
    layout: Option<HistogramLayout>,
    /// Profiles (or partial results) whose histograms used another
    /// layout: histograms are then left out altogether.
    layout_mismatches: u32,
}

/// One worker's merged result.
struct Partial {
    code: TreeBuilder,
    data: DataBuilder,
    info: InfoAcc,
    /// Symbolised allocation path -> (allocations, bytes), summed over processes.
    site_counts: HashMap<Vec<u32>, (u64, u64)>,
    /// Per-process state of processes split over several work items.
    pending: ProcState,
    /// This worker's cache of resolved addresses.
    cache: FxMap<Loc, Arc<[u32]>>,
}

/// Resolves one profile's addresses: its module map, the worker's cache and
/// the shared symboliser.
struct Resolver<'a> {
    addrs: &'a AddrMap,
    cache: &'a mut FxMap<Loc, Arc<[u32]>>,
    symbols: &'a Symbolizer,
}

impl Resolver<'_> {
    fn chain(&mut self, loc: Loc) -> Arc<[u32]> {
        if let Some(c) = self.cache.get(&loc) {
            return c.clone();
        }
        let c = self.symbols.chain(loc);
        self.cache.insert(loc, c.clone());
        c
    }

    /// Allocation path of a site: root first, inline chains expanded.
    fn alloc_path(&mut self, p: &ThreadProfile, site: u32) -> Vec<u32> {
        let Some(site) = p.alloc_sites.get(site as usize) else {
            return Vec::new();
        };
        let mut path = Vec::with_capacity(site.frames.len() + 1);
        let innermost = site.frames.len().saturating_sub(1);
        for (i, &a) in site.frames.iter().rev().enumerate() {
            let loc = self.addrs.locate(a);
            path.extend_from_slice(&self.symbols.site_chain(loc, i == innermost));
        }
        if let Some(label) = &site.label {
            path.push(self.symbols.label_frame(label));
        }
        path
    }
}

impl Partial {
    fn new() -> Self {
        Partial {
            code: TreeBuilder::new(),
            data: DataBuilder::new(),
            info: InfoAcc::default(),
            site_counts: HashMap::new(),
            pending: ProcState::default(),
            cache: FxMap::default(),
        }
    }

    /// Merges one profile; per-process facts go to `st`.
    fn add_profile(&mut self, shared: &Shared, p: &ThreadProfile, st: &mut ProcState) {
        let proc = proc_key(p);
        let info = &mut self.info;
        info.profiles += 1;
        info.events.extend(p.events.iter().map(|e| e.name.clone()));
        if !info.commands.contains(&p.process.command) {
            info.commands.insert(p.process.command.clone());
        }
        info.ranks.extend(p.process.rank);
        if !info.processes.contains(&proc) {
            info.processes.insert(proc.clone());
        }
        info.stats.add(&p.stats);
        let thread = ThreadRef {
            rank: p.process.rank,
            host: p.process.host.clone(),
            pid: p.process.pid,
            index: p.thread.index,
            tid: p.thread.tid,
        };
        let thread_index = info.threads.len() as u32;
        info.threads.push(thread);

        let cols = shared.columns.map(p);
        let mut ranges = Vec::new();
        for m in &p.modules {
            let id = shared.symbols.module_id(&m.path, m.build_id.as_deref());
            ranges.extend(m.ranges.iter().map(|&(s, e)| (s, e, id, m.bias)));
        }
        ranges.sort_unstable();
        let addrs = AddrMap { ranges };
        let mut cx = Resolver {
            addrs: &addrs,
            cache: &mut self.cache,
            symbols: &shared.symbols,
        };

        // Code tree.
        let code = &mut self.code;
        let mut map: Vec<u32> = Vec::with_capacity(p.code.nodes.len());
        for (i, node) in p.code.nodes.iter().enumerate() {
            let here = if i == 0 {
                0
            } else {
                let parent = map[node.parent as usize];
                match node.key {
                    NodeKey::Call(a) => code.call(parent, a, &mut cx),
                    // Roots and objects do not belong in a code tree: keep
                    // their samples at the parent.
                    NodeKey::Root | NodeKey::Object(_) => parent,
                }
            };
            map.push(here);
            code.add(here, &node.metrics, &cols);
        }
        let rank = p.process.rank;
        code.end_profile(rank.map(|r| st.code_ranks.entry(r).or_default()));

        // Data trees.
        let data = &mut self.data;
        // Profile object -> object id.
        let mut obj_ids: HashMap<ObjectRef, u32> = HashMap::new();
        // Object id -> its inclusive values (database columns) in this thread.
        let mut obj_values: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        // Profile node -> the object it is below (u32::MAX: none).
        let mut below: Vec<u32> = Vec::new();
        for (cct, root) in [
            (&p.heap, data.heap_root),
            (&p.statics_tree, data.static_root),
            (&p.unknown, data.unknown_root),
        ] {
            // Profile site index -> object id, for this tree.
            let mut heap_objs: HashMap<u32, u32> = HashMap::new();
            map.clear();
            below.clear();
            for (i, node) in cct.nodes.iter().enumerate() {
                let mut owner = match node.parent {
                    u32::MAX => u32::MAX,
                    p => below.get(p as usize).copied().unwrap_or(u32::MAX),
                };
                let here = if i == 0 {
                    root
                } else {
                    let parent = map[node.parent as usize];
                    match node.key {
                        NodeKey::Call(a) => data.tb.call(parent, a, &mut cx),
                        NodeKey::Object(obj) => {
                            let id = match obj {
                                ObjectRef::HeapSite(s) => match heap_objs.get(&s) {
                                    Some(&id) => id,
                                    None => {
                                        let path = cx.alloc_path(p, s);
                                        let id = data.object(&ObjKey::Heap(path));
                                        heap_objs.insert(s, id);
                                        id
                                    }
                                },
                                ObjectRef::Static(s) => {
                                    let (name, size) = p
                                        .statics
                                        .get(s as usize)
                                        .map(|v| (symbolize::demangle(&v.name), v.size))
                                        .unwrap_or_else(|| (format!("<static {s}>"), 0));
                                    let id = data.object(&ObjKey::Static(name));
                                    let o = &mut data.objects[id as usize];
                                    o.bytes = o.bytes.max(size);
                                    id
                                }
                                ObjectRef::Stack(n) => {
                                    if !st.stack_refs.contains(&(proc.clone(), n)) {
                                        st.stack_refs.insert((proc.clone(), n));
                                    }
                                    data.object(&ObjKey::Stack(n))
                                }
                                ObjectRef::SmallHeap => data.object(&ObjKey::SmallHeap),
                                ObjectRef::Unknown => data.object(&ObjKey::Unknown),
                                ObjectRef::NotRecovered => data.object(&ObjKey::NotRecovered),
                            };
                            obj_ids.insert(obj, id);
                            owner = id;
                            data.objects[id as usize].node
                        }
                        NodeKey::Root => parent,
                    }
                };
                map.push(here);
                below.push(owner);
                data.tb.add(here, &node.metrics, &cols);
                if owner != u32::MAX && node.metrics.iter().any(|&v| v > 0) {
                    let values = obj_values.entry(owner).or_default();
                    for (j, &v) in node.metrics.iter().enumerate() {
                        if let Some(&c) = cols.get(j) {
                            if c >= values.len() {
                                values.resize(c + 1, 0);
                            }
                            values[c] = values[c].saturating_add(v);
                        }
                    }
                }
            }
        }
        // Per-thread values are kept only for runs the database keeps them
        // for: a run of more threads would hold one entry per thread and
        // object until the end (16,000 threads: 750 MB).
        if shared.keep_thread_values {
            for (id, values) in obj_values {
                data.extras[id as usize]
                    .by_thread
                    .push((thread_index, values));
            }
        }
        if !p.object_stats.is_empty() {
            let layout = *info.layout.get_or_insert(p.histogram_layout);
            if layout != p.histogram_layout {
                info.layout_mismatches += 1;
            } else {
                for st in &p.object_stats {
                    let Some(&id) = obj_ids.get(&st.object) else {
                        continue;
                    };
                    let extra = &mut data.extras[id as usize];
                    for &(b, n) in &st.histogram {
                        let e = extra.histogram.entry(b).or_default();
                        *e = e.saturating_add(n);
                    }
                    if shared.keep_thread_values && !st.histogram.is_empty() {
                        extra
                            .histogram_by_thread
                            .push((thread_index, st.histogram.clone()));
                    }
                }
            }
            // Access sites, by the innermost source location of the
            // instruction (the sites of one line merge).
            for st in &p.object_stats {
                let Some(&id) = obj_ids.get(&st.object) else {
                    continue;
                };
                for site in &st.sites {
                    let chain = cx.chain(cx.addrs.locate(site.ip));
                    let Some(&frame) = chain.last() else {
                        continue;
                    };
                    data.extras[id as usize]
                        .sites
                        .entry(frame)
                        .or_default()
                        .absorb(&site.counts);
                }
            }
        }
        data.tb
            .end_profile(rank.map(|r| st.data_ranks.entry(r).or_default()));

        // Process-wide facts.
        for (s, site) in p.alloc_sites.iter().enumerate() {
            let key = (proc.clone(), site.frames.clone());
            let e = st
                .sites
                .entry(key)
                .or_insert_with(|| (0, 0, cx.alloc_path(p, s as u32)));
            e.0 = e.0.max(site.allocations);
            e.1 = e.1.max(site.bytes);
        }
        let (lo, hi) = p.thread.stack;
        let e = st.stacks.entry((proc, p.thread.index)).or_default();
        *e = (*e).max(hi.saturating_sub(lo));
    }

    /// Accumulates a process's facts: allocation counts summed over
    /// processes, stack sizes, per-rank sums.
    fn flush(&mut self, st: ProcState, keep_ranks: bool) {
        for (_, (allocations, bytes, path)) in st.sites {
            let e = self.site_counts.entry(path).or_default();
            e.0 = e.0.saturating_add(allocations);
            e.1 = e.1.saturating_add(bytes);
        }
        for key in st.stack_refs {
            if let Some(&size) = st.stacks.get(&key) {
                if let Some(&id) = self.data.object_ids.get(&ObjKey::Stack(key.1)) {
                    let o = &mut self.data.objects[id as usize];
                    o.bytes = o.bytes.max(size);
                }
            }
        }
        for (rank, values) in &st.code_ranks {
            self.code.add_rank(*rank, values, keep_ranks);
            if !self.info.flushed_ranks.insert(*rank) {
                self.info.rank_clash = true;
            }
        }
        for (rank, values) in &st.data_ranks {
            self.data.tb.add_rank(*rank, values, keep_ranks);
        }
    }

    /// Keeps a split process's facts until all its files are merged.
    fn pend(&mut self, st: ProcState, code_map: Option<&[u32]>, data_map: Option<&[u32]>) {
        let pending = &mut self.pending;
        for (k, (a, b, path)) in st.sites {
            let e = pending.sites.entry(k).or_insert((0, 0, path));
            e.0 = e.0.max(a);
            e.1 = e.1.max(b);
        }
        for (k, size) in st.stacks {
            let e = pending.stacks.entry(k).or_default();
            *e = (*e).max(size);
        }
        pending.stack_refs.extend(st.stack_refs);
        for (ranks, theirs, map) in [
            (&mut pending.code_ranks, st.code_ranks, code_map),
            (&mut pending.data_ranks, st.data_ranks, data_map),
        ] {
            for (rank, values) in theirs {
                let mine = ranks.entry(rank).or_default();
                for (n, v) in values {
                    let n = map.map_or(n, |m| m[n as usize]);
                    let e = mine.entry(n).or_default();
                    *e = e.saturating_add(v);
                }
            }
        }
    }

    /// Merges one work item: profiles `items` of one process group;
    /// `whole` when the item is the whole group.
    fn merge_item<'a>(&mut self, shared: &Shared, items: &[usize], whole: bool, input: &Input<'a>) {
        let mut st = ProcState::default();
        for &i in items {
            match (input.load)(i) {
                Ok(profile) => {
                    self.add_profile(shared, &profile, &mut st);
                    shared.symbols.profile_done();
                }
                Err(reason) => self.info.skipped.push(((input.name)(i), reason)),
            }
        }
        if whole {
            self.flush(st, shared.keep_rank_values);
        } else {
            self.pend(st, None, None);
        }
    }

    /// No profile will be added any more: frees what only that needs.
    fn end_profiles(&mut self) {
        self.cache = FxMap::default();
        self.code.end_profiles();
        self.data.tb.end_profiles();
    }

    /// Adds another worker's result to this one.
    fn absorb(mut self, mut other: Partial) -> Partial {
        // Keep the larger one and add the smaller one to it.
        if other.code.len() + other.data.tb.len() > self.code.len() + self.data.tb.len() {
            std::mem::swap(&mut self, &mut other);
        }
        let mut objs = Vec::with_capacity(other.data.objects.len());
        let thread_offset = self.info.threads.len() as u32;
        let extras = std::mem::take(&mut other.data.extras);
        for ((key, o), extra) in other.data.keys.iter().zip(&other.data.objects).zip(extras) {
            let id = self.data.object(key);
            let mine = &mut self.data.objects[id as usize];
            mine.bytes = mine.bytes.max(o.bytes);
            self.data.extras[id as usize].absorb(extra, thread_offset);
            objs.push(id);
        }
        let code_map = absorb_tree(&mut self.code, other.code, &[]);
        let data_map = absorb_tree(&mut self.data.tb, other.data.tb, &objs);
        for (path, (a, b)) in other.site_counts {
            let e = self.site_counts.entry(path).or_default();
            e.0 = e.0.saturating_add(a);
            e.1 = e.1.saturating_add(b);
        }
        let pending = std::mem::take(&mut other.pending);
        self.pend(pending, Some(&code_map), Some(&data_map));
        let (a, b) = (&mut self.info, other.info);
        a.events.extend(b.events);
        a.commands.extend(b.commands);
        a.ranks.extend(b.ranks);
        a.processes.extend(b.processes);
        a.stats.add(&b.stats);
        a.profiles += b.profiles;
        a.skipped.extend(b.skipped);
        for r in b.flushed_ranks {
            if !a.flushed_ranks.insert(r) {
                a.rank_clash = true;
            }
        }
        a.rank_clash |= b.rank_clash;
        a.threads.extend(b.threads);
        a.layout_mismatches += b.layout_mismatches;
        match (a.layout, b.layout) {
            (None, l) => a.layout = l,
            (Some(x), Some(y)) if x != y => a.layout_mismatches += 1,
            _ => {}
        }
        self
    }
}

/// Adds `other`'s nodes to `tb`; returns other node -> node of `tb`.
/// The structure first, then the values one array at a time, each freed
/// once added: `other` shrinks while `tb` grows, instead of both being
/// whole at the end.
fn absorb_tree(tb: &mut TreeBuilder, mut other: TreeBuilder, objs: &[u32]) -> Vec<u32> {
    other.children = FxMap::default();
    let mut map = Vec::with_capacity(other.len());
    map.push(0);
    for i in 1..other.len() {
        let parent = map[other.parents[i] as usize];
        let key = match other.keys[i] {
            Key::Object(o) => Key::Object(objs[o as usize]),
            k => k,
        };
        map.push(tb.child(parent, key));
    }
    other.parents = Vec::new();
    other.keys = Vec::new();
    for (c, column) in std::mem::take(&mut other.exclusive).into_iter().enumerate() {
        for (i, v) in column.into_iter().enumerate() {
            tb.add_exclusive(c, map[i], v);
        }
    }
    let len = tb.len();
    absorb_accs(
        &mut tb.threads,
        std::mem::take(&mut other.threads),
        &map,
        len,
    );
    absorb_accs(&mut tb.ranks, std::mem::take(&mut other.ranks), &map, len);
    let by_rank = std::mem::take(&mut other.by_rank);
    if by_rank.iter().any(|v| !v.is_empty()) && tb.by_rank.len() < tb.len() {
        tb.by_rank.resize(tb.len(), Vec::new());
    }
    for (i, values) in by_rank.into_iter().enumerate() {
        if !values.is_empty() {
            tb.by_rank[map[i] as usize].extend(values);
        }
    }
    map
}

/// Adds the accumulators `from` (by node of the absorbed tree) into `into`
/// (by node of a tree of `len` nodes) through the node map.
fn absorb_accs(into: &mut Vec<Acc>, from: Vec<Acc>, map: &[u32], len: usize) {
    if !from.is_empty() && into.len() < len {
        into.resize(len, Acc::default());
    }
    for (i, acc) in from.iter().enumerate() {
        into[map[i] as usize].absorb(acc);
    }
}

/// How a merge gets its profiles.
struct Input<'a> {
    /// Profile `i`, or why it cannot be used.
    load: &'a (dyn Fn(usize) -> Result<Cow<'a, ThreadProfile>, String> + Sync),
    /// Name of input `i` for the skipped list.
    name: &'a (dyn Fn(usize) -> String + Sync),
}

/// Runs the merge over `groups` of input indices (one group per process).
fn run(groups: Vec<Vec<usize>>, input: &Input<'_>, skipped: Vec<(String, String)>) -> Streamed {
    let timings = std::env::var_os("HPCPROF_RS_TIMINGS").is_some();
    let t0 = std::time::Instant::now();
    let sizes = (groups.iter().map(Vec::len).sum(), groups.len());
    let (partial, shared) = run_partial(groups, input, sizes);
    let merged = finish(partial, shared, skipped);
    if timings {
        eprintln!(
            "hpcprof-rs: timings: finished at {:.3}s",
            t0.elapsed().as_secs_f64()
        );
    }
    merged
}

/// The workers' combined partial result over `groups`, not finished;
/// `sizes` are the numbers of profiles and of processes of the whole
/// merge (all shares).
fn run_partial(
    groups: Vec<Vec<usize>>,
    input: &Input<'_>,
    sizes: (usize, usize),
) -> (Partial, Shared) {
    let shared = Shared {
        symbols: Symbolizer::default(),
        columns: Columns::new(),
        keep_thread_values: sizes.0 <= MAX_THREAD_VALUES,
        keep_rank_values: sizes.1 <= MAX_RANK_VALUES,
    };
    let workers = rayon::current_num_threads().max(1);
    let total: usize = groups.iter().map(Vec::len).sum();
    // Split a process's files over workers only when it is a large share
    // of the input (one process with many threads).
    let max_item = total.div_ceil(2 * workers).max(1);
    let mut items: Vec<(&[usize], bool)> = Vec::new();
    for g in &groups {
        if g.len() <= max_item {
            items.push((g, true));
        } else {
            items.extend(g.chunks(max_item).map(|c| (c, false)));
        }
    }
    let next = AtomicUsize::new(0);
    let timings = std::env::var_os("HPCPROF_RS_TIMINGS").is_some();
    let t0 = std::time::Instant::now();
    let partial = (0..workers.min(items.len()).max(1))
        .into_par_iter()
        .map(|_| {
            let mut partial = Partial::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(files, whole)) = items.get(i) else {
                    break;
                };
                partial.merge_item(&shared, files, whole, input);
            }
            // Every work item has been taken: no more profiles.
            partial.end_profiles();
            if timings {
                eprintln!(
                    "hpcprof-rs: timings: worker done at {:.3}s ({} + {} nodes)",
                    t0.elapsed().as_secs_f64(),
                    partial.code.len(),
                    partial.data.tb.len()
                );
            }
            partial
        })
        .reduce_with(Partial::absorb)
        .unwrap_or_else(Partial::new);
    if timings {
        eprintln!(
            "hpcprof-rs: timings: combined at {:.3}s",
            t0.elapsed().as_secs_f64()
        );
    }
    (partial, shared)
}

/// Merges `profiles` (already decoded) into a database; `skipped` is recorded
/// as is. Never fails: what cannot be symbolised gets a placeholder frame.
pub fn merge(profiles: &[ThreadProfile], skipped: Vec<(String, String)>) -> Merged {
    let mut groups: BTreeMap<ProcKey, Vec<usize>> = BTreeMap::new();
    for (i, p) in profiles.iter().enumerate() {
        groups.entry(proc_key(p)).or_default().push(i);
    }
    let load = |i: usize| Ok(Cow::Borrowed(&profiles[i]));
    let name = |i: usize| format!("profile {i}");
    let input = Input {
        load: &load,
        name: &name,
    };
    let mut merged = run(groups.into_values().collect(), &input, skipped).into_merged();
    let db = &mut merged.db;
    crate::naming::name_objects(&mut db.objects, &db.frames, &Wrappers::default());
    merged
}

/// The process part of a measurement file name (`<exe>.<host>.<pid>` of
/// `<exe>.<host>.<pid>.<tid>.hpcrun`): files of one process share it.
fn process_of_file(path: &std::path::Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.rsplit_once('.') {
        Some((process, _tid)) => process.to_string(),
        None => stem,
    }
}

/// Reads, decodes and merges `files`, streaming (see the module
/// documentation). `progress` is told the size of every file read.
/// Unusable files are skipped with their reason.
pub fn merge_files(files: &[PathBuf], progress: &(dyn Fn(u64) + Sync)) -> Streamed {
    let groups = process_groups(files);
    with_file_input(files, progress, |input| run(groups, input, Vec::new()))
}

/// Runs `f` with an [`Input`] that reads and decodes `files`, reporting
/// each file's size to `progress`.
fn with_file_input<T>(
    files: &[PathBuf],
    progress: &(dyn Fn(u64) + Sync),
    f: impl FnOnce(&Input<'_>) -> T,
) -> T {
    let load = |i: usize| -> Result<Cow<'_, ThreadProfile>, String> {
        // One read buffer per worker, reused: a fresh profile-sized block
        // per file would be mapped, faulted in and unmapped every time.
        thread_local! {
            static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUFFER.with_borrow_mut(|bytes| {
            bytes.clear();
            let read = std::fs::File::open(&files[i]).and_then(|mut f| {
                use std::io::Read;
                f.read_to_end(bytes)
            });
            progress(bytes.len() as u64);
            read.map_err(|e| format!("cannot read: {e}"))?;
            ThreadProfile::from_bytes(bytes)
                .map(Cow::Owned)
                .map_err(|e| e.to_string())
        })
    };
    let name = |i: usize| files[i].display().to_string();
    let input = Input {
        load: &load,
        name: &name,
    };
    f(&input)
}

/// Canonical order key of a frame.
fn frame_order(f: &Frame) -> (&str, &str, Option<&str>, Option<u32>, bool, Option<u64>) {
    (
        &f.module,
        &f.function,
        f.file.as_deref(),
        f.line,
        f.inlined,
        f.offset,
    )
}

/// Finishes the combined partial: allocation counts, canonical order,
/// names, distributions. Every part of the partial is freed as soon as its
/// content has moved on.
fn finish(mut part: Partial, shared: Shared, mut skipped: Vec<(String, String)>) -> Streamed {
    let pending = std::mem::take(&mut part.pending);
    if !pending.is_empty() {
        part.flush(pending, shared.keep_rank_values);
    }
    // The lookup tables are not needed any more.
    part.end_profiles();
    for tb in [&mut part.code, &mut part.data.tb] {
        tb.children = FxMap::default();
    }
    let metrics = shared.columns.finish();
    // Closes every module (the mapped debug information counts in the
    // resident memory).
    let (frame_table, mut warnings) = shared.symbols.finish();
    let columns = metrics.len();
    let threads = part.info.profiles;
    let ranks = part.info.ranks.len() as u32;
    let rank_dists = ranks > 0 && !part.info.rank_clash;
    if ranks > 0 && part.info.rank_clash {
        warnings.push(
            "a rank's threads are in files of several processes; per-rank distributions are left out"
                .to_string(),
        );
    }

    // Allocation counts into the heap objects.
    for (path, (allocations, bytes)) in std::mem::take(&mut part.site_counts) {
        if let Some(&id) = part.data.object_ids.get(&ObjKey::Heap(path)) {
            let o = &mut part.data.objects[id as usize];
            o.allocations = o.allocations.saturating_add(allocations);
            o.bytes = o.bytes.saturating_add(bytes);
        }
    }

    // Frames: keep the used ones, sorted.
    let mut used = vec![false; frame_table.list.len()];
    for tb in [&part.code, &part.data.tb] {
        for k in &tb.keys {
            if let Key::Frame(f) = k {
                used[*f as usize] = true;
            }
        }
    }
    for o in &part.data.objects {
        for &f in &o.alloc_path {
            used[f as usize] = true;
        }
    }
    for extra in &part.data.extras {
        for &f in extra.sites.keys() {
            used[f as usize] = true;
        }
    }
    let mut order: Vec<u32> = (0..frame_table.list.len() as u32)
        .filter(|&f| used[f as usize])
        .collect();
    order.sort_by(|&a, &b| {
        frame_order(&frame_table.list[a as usize]).cmp(&frame_order(&frame_table.list[b as usize]))
    });
    let mut frame_map = vec![u32::MAX; frame_table.list.len()];
    for (new, &old) in order.iter().enumerate() {
        frame_map[old as usize] = new as u32;
    }
    let mut old_frames: Vec<Option<Frame>> = frame_table.list.into_iter().map(Some).collect();
    let frames: Vec<Frame> = order
        .iter()
        .map(|&f| old_frames[f as usize].take().unwrap_or_default())
        .collect();
    drop(old_frames);

    // Objects: sorted by kind, then what identifies them.
    let mut data = part.data;
    data.object_ids = HashMap::new();
    let mut extras: Vec<Option<ObjExtra>> = std::mem::take(&mut data.extras)
        .into_iter()
        .map(Some)
        .collect();
    let sort_key = |k: &ObjKey| -> (u8, Vec<u32>, String, u32) {
        match k {
            ObjKey::Heap(path) => (
                0,
                path.iter().map(|&f| frame_map[f as usize]).collect(),
                String::new(),
                0,
            ),
            ObjKey::SmallHeap => (1, Vec::new(), String::new(), 0),
            ObjKey::Static(name) => (2, Vec::new(), name.clone(), 0),
            ObjKey::Stack(n) => (3, Vec::new(), String::new(), *n),
            ObjKey::Unknown => (4, Vec::new(), String::new(), 0),
            ObjKey::NotRecovered => (5, Vec::new(), String::new(), 0),
        }
    };
    let mut obj_order: Vec<usize> = (0..data.objects.len()).collect();
    let obj_keys: Vec<_> = std::mem::take(&mut data.keys)
        .iter()
        .map(sort_key)
        .collect();
    obj_order.sort_by(|&a, &b| obj_keys[a].cmp(&obj_keys[b]));
    drop(obj_keys);
    let mut obj_map = vec![0u32; data.objects.len()];
    for (new, &old) in obj_order.iter().enumerate() {
        obj_map[old] = new as u32;
    }

    let rank_count = rank_dists.then_some(ranks);
    let code = FinishedTree::new(
        part.code, &frame_map, &obj_map, columns, threads, rank_count,
    );
    let data_tree = FinishedTree::new(data.tb, &frame_map, &obj_map, columns, threads, rank_count);
    // Threads, in canonical order, for the per-thread values.
    let merged_threads = std::mem::take(&mut part.info.threads);
    let mut thread_list = merged_threads.clone();
    thread_list.sort();
    thread_list.dedup();
    // Partial's thread index -> index into `thread_list`.
    let thread_index: Vec<u32> = merged_threads
        .iter()
        .map(|t| thread_list.binary_search(t).unwrap_or_default() as u32)
        .collect();
    drop(merged_threads);
    let keep_threads = thread_list.len() <= MAX_THREAD_VALUES;
    let layout = part
        .info
        .layout
        .filter(|_| part.info.layout_mismatches == 0);
    if part.info.layout_mismatches > 0 {
        warnings.push(
            "profiles were measured with different histogram layouts (--histogram); object histograms are left out"
                .to_string(),
        );
    }
    let mut old_objects: Vec<Option<DataObject>> = data.objects.into_iter().map(Some).collect();
    let objects: Vec<DataObject> = obj_order
        .iter()
        .filter_map(|&o| {
            let mut obj = old_objects[o].take()?;
            let extra = extras[o].take().unwrap_or_default();
            if let Some(layout) = layout.filter(|_| !extra.histogram.is_empty()) {
                obj.histogram = Some(ObjectHistogram {
                    layout,
                    counts: extra.histogram.into_iter().collect(),
                });
            }
            obj.sites = extra
                .sites
                .into_iter()
                .map(|(frame, counts)| AccessSite {
                    frame: frame_map[frame as usize],
                    counts,
                })
                .collect();
            // Most sampled first; ties by source location.
            obj.sites
                .sort_by_key(|s| (std::cmp::Reverse(s.counts.samples), s.frame));
            if keep_threads {
                let mut by: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
                for (t, mut values) in extra.by_thread {
                    values.resize(columns, 0);
                    add_values(by.entry(thread_index[t as usize]).or_default(), &values);
                }
                obj.by_thread = by.into_iter().collect();
                if obj.histogram.is_some() {
                    let mut hist: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
                    for (t, counts) in extra.histogram_by_thread {
                        let h = hist.entry(thread_index[t as usize]).or_default();
                        for (b, n) in counts {
                            let e = h.entry(b).or_default();
                            *e = e.saturating_add(n);
                        }
                    }
                    obj.histogram_by_thread = hist
                        .into_iter()
                        .map(|(t, h)| (t, h.into_iter().collect()))
                        .collect();
                }
            }
            Some(obj)
        })
        .map(|mut o| {
            o.alloc_path = o
                .alloc_path
                .iter()
                .map(|&f| frame_map[f as usize])
                .collect();
            o.node = data_tree.final_index(o.node);
            o
        })
        .collect();
    drop(old_objects);
    drop(extras);

    let info = part.info;
    skipped.extend(info.skipped);
    skipped.sort();
    let db = MergedDb {
        info: DbInfo {
            events: info.events.into_iter().collect(),
            ranks: info.ranks.into_iter().collect(),
            processes: info.processes.len() as u32,
            threads,
            profiles: threads,
            skipped,
            metrics,
            primary_metric: 0,
            stats: info.stats,
            commands: info.commands.into_iter().collect(),
            thread_list,
        },
        frames,
        code,
        data: data_tree,
        objects,
    };
    Streamed { db, warnings }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::database::NodeKind;
    use formats::measurement::{
        AllocSite, Cct, CctNode, EventInfo, ObjectStats, ProcessInfo, StaticVar, ThreadInfo,
    };
    use formats::views;

    fn node(parent: u32, key: NodeKey, samples: u64) -> CctNode {
        CctNode {
            parent,
            key,
            metrics: vec![samples],
        }
    }

    fn cct(nodes: Vec<CctNode>) -> Cct {
        let mut t = Cct::default();
        t.nodes.extend(nodes);
        t
    }

    /// A thread of process `pid` that allocated through `main -> init`
    /// (0x1000 <- 0x2000) and sampled `samples` accesses to it at 0x3000.
    fn thread(pid: u32, tid: u32, index: u32, samples: u64) -> ThreadProfile {
        ThreadProfile {
            process: ProcessInfo {
                pid,
                host: "node1".into(),
                rank: Some(pid % 2),
                exe: "/bin/app".into(),
                command: vec!["./app".into()],
                run_id: "run".into(),
            },
            thread: ThreadInfo {
                tid,
                index,
                stack: (0x7000_0000, 0x7080_0000),
                ..ThreadInfo::default()
            },
            events: vec![EventInfo {
                name: "mem:soft".into(),
                period: 1000,
                unit: "ns".into(),
            }],
            metrics: vec![MetricInfo {
                name: "samples".into(),
                unit: "samples".into(),
                description: "samples".into(),
            }],
            modules: Vec::new(),
            alloc_sites: vec![
                // An unrelated site first, so that indices differ by thread.
                AllocSite {
                    frames: vec![0x9000 + u64::from(index)],
                    allocations: 1,
                    bytes: 8,
                    max_bytes: 8,
                    label: None,
                },
                AllocSite {
                    frames: vec![0x1000, 0x2000],
                    allocations: 3,
                    bytes: 3000,
                    max_bytes: 1000,
                    label: None,
                },
            ],
            statics: vec![StaticVar {
                name: "_ZN3app5TABLE17h0123456789abcdefE".into(),
                module: None,
                address: 0x5000,
                size: 64,
            }],
            code: cct(vec![
                node(0, NodeKey::Call(0x1000), 0),
                node(1, NodeKey::Call(0x3000), samples + 2),
            ]),
            heap: cct(vec![
                node(0, NodeKey::Object(ObjectRef::HeapSite(1)), 0),
                node(1, NodeKey::Call(0x1000), 0),
                node(2, NodeKey::Call(0x3000), samples),
            ]),
            statics_tree: cct(vec![
                node(0, NodeKey::Object(ObjectRef::Static(0)), 0),
                node(1, NodeKey::Call(0x3000), 1),
            ]),
            unknown: cct(vec![
                node(0, NodeKey::Object(ObjectRef::Stack(index)), 0),
                node(1, NodeKey::Call(0x3000), 1),
            ]),
            stats: SampleStats {
                samples: samples + 2,
                memory_samples: samples + 2,
                address_recovered: samples + 2,
                ..SampleStats::default()
            },
            ..ThreadProfile::default()
        }
    }

    fn object(db: &Database, kind: ObjectKind) -> Vec<&DataObject> {
        db.objects.iter().filter(|o| o.kind == kind).collect()
    }

    #[test]
    fn histograms_and_per_thread_values_of_one_object_merge() {
        let mut a = thread(10, 10, 0, 5);
        let mut b = thread(10, 11, 1, 7);
        let mut c = thread(12, 12, 0, 4);
        for (p, hist) in [
            (&mut a, vec![(0, 4), (3, 1)]),
            (&mut b, vec![(0, 2), (31, 5)]),
            (&mut c, vec![(3, 4)]),
        ] {
            p.object_stats = vec![ObjectStats {
                object: ObjectRef::HeapSite(1),
                histogram: hist,
                sites: Vec::new(),
            }];
        }
        // Same result with any number of workers and any order.
        for profiles in [vec![a.clone(), b.clone(), c.clone()], vec![c, b, a]] {
            let db = merge(&profiles, Vec::new()).db;
            db.validate().unwrap();
            let heap = object(&db, ObjectKind::Heap);
            let obj = heap[0];
            let h = obj.histogram.as_ref().expect("histogram");
            assert_eq!(h.layout, HistogramLayout::default());
            assert_eq!(h.counts, vec![(0, 6), (3, 5), (31, 5)]);
            // Threads sorted by (rank, host, pid, index); values per thread.
            let threads: Vec<(u32, u32, u64)> = obj
                .by_thread
                .iter()
                .map(|(t, v)| {
                    let t = &db.info.thread_list[*t as usize];
                    (t.pid, t.index, v[0])
                })
                .collect();
            assert_eq!(threads, vec![(10, 0, 5), (10, 1, 7), (12, 0, 4)]);
            assert_eq!(db.info.thread_list.len(), 3);
        }
    }

    #[test]
    fn access_sites_merge_per_object_site_and_stride() {
        use formats::measurement::SiteStrides;
        use formats::patterns::StrideCounts;
        let mut a = thread(10, 10, 0, 5);
        let mut b = thread(10, 11, 1, 7);
        let site = |ip: u64, strides: Vec<(i64, u64)>, gcd: u64| SiteStrides {
            ip,
            counts: StrideCounts {
                samples: strides.iter().map(|s| s.1).sum(),
                element_bytes: 8,
                strides,
                delta_gcd: gcd,
                ..Default::default()
            },
        };
        a.object_stats = vec![ObjectStats {
            object: ObjectRef::HeapSite(1),
            histogram: Vec::new(),
            sites: vec![site(0x40_1000, vec![(320_000, 4), (8, 1)], 16)],
        }];
        b.object_stats = vec![ObjectStats {
            object: ObjectRef::HeapSite(1),
            histogram: vec![(0, 1)],
            sites: vec![
                site(0x40_1000, vec![(320_000, 6)], 24),
                site(0x40_2000, vec![(8, 2)], 8),
            ],
        }];
        for profiles in [vec![a.clone(), b.clone()], vec![b, a]] {
            let db = merge(&profiles, Vec::new()).db;
            db.validate().unwrap();
            let obj = object(&db, ObjectKind::Heap)[0];
            assert_eq!(obj.sites.len(), 2, "{:?}", obj.sites);
            // Most sampled first.
            let top = &obj.sites[0].counts;
            assert_eq!(top.samples, 11);
            assert_eq!(top.strides, vec![(8, 1), (320_000, 10)]);
            assert_eq!(top.delta_gcd, 8);
            assert_eq!(obj.sites[1].counts.strides, vec![(8, 2)]);
            assert_ne!(obj.sites[0].frame, obj.sites[1].frame);
        }
    }

    #[test]
    fn different_histogram_layouts_drop_the_histograms() {
        let mut a = thread(10, 10, 0, 5);
        let mut b = thread(10, 11, 1, 7);
        a.object_stats = vec![ObjectStats {
            object: ObjectRef::HeapSite(1),
            histogram: vec![(0, 1)],
            sites: Vec::new(),
        }];
        b.object_stats = a.object_stats.clone();
        b.histogram_layout = HistogramLayout::Fraction(8);
        let merged = merge(&[a, b], Vec::new());
        assert!(merged.db.objects.iter().all(|o| o.histogram.is_none()));
        assert!(merged
            .warnings
            .iter()
            .any(|w| w.contains("histogram layouts")));
    }

    #[test]
    fn same_alloc_path_in_two_threads_is_one_object() {
        let profiles = vec![thread(10, 10, 0, 5), thread(10, 11, 1, 7)];
        let db = merge(&profiles, Vec::new()).db;
        db.validate().unwrap();
        let heap = object(&db, ObjectKind::Heap);
        assert_eq!(heap.len(), 1, "{:?}", db.objects);
        let obj = heap[0];
        // Process-wide counts are taken once per process.
        assert_eq!(obj.allocations, 3);
        assert_eq!(obj.bytes, 3000);
        // Root first: main (0x2000) then init (0x1000).
        let path: Vec<&str> = obj
            .alloc_path
            .iter()
            .map(|&f| db.frames[f as usize].function.as_str())
            .collect();
        assert_eq!(path, ["[unknown]+0x2000", "[unknown]+0x1000"]);
        let rows = views::objects(&db);
        let row = rows.iter().find(|r| r.kind == ObjectKind::Heap).unwrap();
        assert_eq!(row.metrics, vec![12]);
        // Code total equals the data total.
        let code_total = db.code.inclusive(1)[0][0];
        let data_total = db.data.inclusive(1)[0][0];
        assert_eq!(code_total, 16);
        assert_eq!(data_total, 16);
        assert_eq!(db.info.threads, 2);
        assert_eq!(db.info.processes, 1);
        assert_eq!(db.info.stats.samples, 16);
        assert_eq!(db.info.events, ["mem:soft"]);
        assert_eq!(db.info.primary_metric, 0);
    }

    #[test]
    fn same_path_in_two_processes_sums_allocations() {
        let profiles = vec![
            thread(10, 10, 0, 5),
            thread(10, 11, 1, 1),
            thread(11, 20, 0, 7),
        ];
        let db = merge(&profiles, Vec::new()).db;
        let heap = object(&db, ObjectKind::Heap);
        assert_eq!(heap.len(), 1);
        assert_eq!(heap[0].allocations, 6);
        assert_eq!(heap[0].bytes, 6000);
        assert_eq!(db.info.processes, 2);
        assert_eq!(db.info.ranks, [0, 1]);
        assert_eq!(db.info.commands, [vec!["./app".to_string()]]);
        // Statics by name, demangled; stacks by thread index.
        let statics = object(&db, ObjectKind::Static);
        assert_eq!(statics.len(), 1);
        assert_eq!(statics[0].name, "app::TABLE");
        assert_eq!(statics[0].bytes, 64);
        let stacks = object(&db, ObjectKind::Stack);
        let mut names: Vec<&str> = stacks.iter().map(|o| o.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["<stack: thread 0>", "<stack: thread 1>"]);
        assert!(stacks.iter().all(|o| o.bytes == 0x80_0000));
    }

    #[test]
    fn data_tree_has_three_roots_and_parents_first() {
        let db = merge(&[thread(1, 1, 0, 1)], Vec::new()).db;
        let roots: Vec<&NodeKind> = db
            .data
            .nodes
            .iter()
            .filter(|n| n.parent == 0)
            .map(|n| &n.kind)
            .collect();
        assert_eq!(
            roots,
            [
                &NodeKind::Root(HEAP_ROOT.into()),
                &NodeKind::Root(STATIC_ROOT.into()),
                &NodeKind::Root(UNKNOWN_ROOT.into()),
            ]
        );
        for (i, n) in db.data.nodes.iter().enumerate().skip(1) {
            assert!((n.parent as usize) < i);
        }
        for o in &db.objects {
            assert_eq!(
                db.data.nodes[o.node as usize].kind,
                NodeKind::Object(db.objects.iter().position(|x| x == o).unwrap() as u32)
            );
        }
    }

    #[test]
    fn special_objects_are_named() {
        let mut p = thread(1, 1, 0, 1);
        p.unknown = cct(vec![
            node(0, NodeKey::Object(ObjectRef::SmallHeap), 1),
            node(0, NodeKey::Object(ObjectRef::Unknown), 2),
            node(0, NodeKey::Object(ObjectRef::NotRecovered), 3),
            node(0, NodeKey::Object(ObjectRef::Stack(5)), 4),
        ]);
        let db = merge(&[p], Vec::new()).db;
        let find = |name: &str| db.objects.iter().find(|o| o.name == name).unwrap();
        assert_eq!(find("<small heap objects>").kind, ObjectKind::Heap);
        assert_eq!(find("<unknown address>").kind, ObjectKind::Unknown);
        assert_eq!(find("<address not recovered>").kind, ObjectKind::Unknown);
        // Another thread's stack: size unknown from this file.
        assert_eq!(find("<stack: thread 5>").bytes, 0);
    }

    #[test]
    fn modules_map_addresses_and_metrics_merge_by_name() {
        let mut a = thread(1, 1, 0, 1);
        a.modules = vec![formats::measurement::Module {
            path: "/nonexistent/libx.so".into(),
            build_id: None,
            bias: 0x10_0000,
            ranges: vec![(0x10_0000, 0x20_0000)],
        }];
        a.code = cct(vec![node(0, NodeKey::Call(0x10_1234), 4)]);
        let mut b = thread(2, 2, 0, 1);
        b.metrics.insert(
            0,
            MetricInfo {
                name: "latency".into(),
                unit: "cycles".into(),
                description: String::new(),
            },
        );
        b.code = cct(vec![CctNode {
            parent: 0,
            key: NodeKey::Call(0x10_1234),
            metrics: vec![100, 2],
        }]);
        let merged = merge(&[a, b], Vec::new());
        let db = merged.db;
        assert_eq!(merged.warnings.len(), 1, "{:?}", merged.warnings);
        let names: Vec<&str> = db.info.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["samples", "latency"]);
        assert_eq!(db.info.primary_metric, 0);
        let fns = views::functions(&db);
        let lib = fns.iter().find(|f| f.function == "libx.so+0x1234").unwrap();
        assert_eq!(lib.metrics, vec![4, 0]);
        let unknown = fns
            .iter()
            .find(|f| f.function == "[unknown]+0x101234")
            .unwrap();
        assert_eq!(unknown.metrics, vec![2, 100]);
    }

    #[test]
    fn damaged_file_is_skipped_and_totals_unchanged() {
        let dir = crate::read::tests::temp_dir("merge");
        let profiles = vec![thread(10, 10, 0, 5), thread(10, 11, 1, 7)];
        for (i, p) in profiles.iter().enumerate() {
            std::fs::write(dir.join(format!("t{i}.hpcrun")), p.to_bytes().unwrap()).unwrap();
        }
        let expected = merge(&profiles, Vec::new()).db;
        let bytes = thread(10, 12, 2, 1000).to_bytes().unwrap();
        std::fs::write(dir.join("t9.hpcrun"), &bytes[..bytes.len() - 7]).unwrap();
        let m = crate::read::read_all(&crate::read::find(&dir).unwrap());
        assert_eq!(m.skipped.len(), 1);
        let profiles: Vec<ThreadProfile> = m.profiles.into_iter().map(|(_, p)| p).collect();
        let db = merge(&profiles, m.skipped).db;
        assert_eq!(db.info.stats, expected.info.stats);
        assert_eq!(db.info.skipped.len(), 1);
        assert!(db.info.skipped[0].0.ends_with("t9.hpcrun"));
        assert_eq!(db.objects, expected.objects);
        assert_eq!(db.data, expected.data);
        assert_eq!(db.code, expected.code);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hostile_indices_do_not_panic() {
        let mut p = thread(1, 1, 0, 1);
        // Metrics wider than the named columns, stats near overflow.
        p.code.nodes.push(CctNode {
            parent: 0,
            key: NodeKey::Call(0),
            metrics: vec![u64::MAX, u64::MAX, 3],
        });
        p.code.nodes.push(CctNode {
            parent: 0,
            key: NodeKey::Call(0),
            metrics: vec![u64::MAX],
        });
        let db = merge(&[p], Vec::new()).db;
        db.validate().unwrap();
        assert_eq!(db.info.metrics.len(), 3);
    }

    fn dist_of(db: &Database, node: u32) -> (Dist, Option<Dist>) {
        let n = &db.data.nodes[node as usize];
        (n.threads.expect("thread distribution"), n.ranks)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn distributions_over_threads_and_ranks() {
        // Process 10 (rank 0): threads with 5 and 7 heap samples; process 11
        // (rank 1): one thread with 3, one that never touches the object.
        let mut idle = thread(11, 21, 1, 0);
        idle.heap = Cct::default();
        let profiles = vec![
            thread(10, 10, 0, 5),
            thread(10, 11, 1, 7),
            thread(11, 20, 0, 3),
            idle,
        ];
        let db = merge(&profiles, Vec::new()).db;
        db.validate().unwrap();
        let obj = object(&db, ObjectKind::Heap)[0];
        let (t, r) = dist_of(&db, obj.node);
        // Threads: 5, 7, 3, 0.
        assert_eq!(t.count, 4);
        assert_eq!((t.min, t.max), (0.0, 7.0));
        assert!(close(t.mean, 3.75), "{t:?}");
        let var = (25.0 + 49.0 + 9.0) / 4.0 - 3.75 * 3.75;
        assert!(close(t.stddev, f64::sqrt(var)), "{t:?}");
        // Ranks: 0 -> 12, 1 -> 3.
        let r = r.expect("rank distribution");
        assert_eq!(r.count, 2);
        assert_eq!((r.min, r.max), (3.0, 12.0));
        assert!(close(r.mean, 7.5) && close(r.stddev, 4.5), "{r:?}");
        // The data root: every thread's inclusive total (samples + 2 each,
        // the idle one keeps its static and stack samples).
        let root = db.data.nodes[0].threads.unwrap();
        assert_eq!((root.min, root.max), (2.0, 9.0));
        assert!(close(root.mean, (7.0 + 9.0 + 5.0 + 2.0) / 4.0));
        // The code tree too: leaf 0x3000 under 0x1000.
        let code_root = db.code.nodes[0].threads.unwrap();
        assert_eq!((code_root.min, code_root.max), (2.0, 9.0));
        assert!(db.code.nodes[0].ranks.is_some());
        // One thread: no distribution.
        let single = merge(&profiles[..1], Vec::new()).db;
        assert!(single.data.nodes.iter().all(|n| n.threads.is_none()));
    }

    #[test]
    fn streaming_result_does_not_depend_on_workers_or_splitting() {
        let dir = crate::read::tests::temp_dir("stream");
        let mut profiles = Vec::new();
        // One big process (split over work items) and a few small ones.
        for t in 0..12 {
            profiles.push(thread(100, 1000 + t, t, u64::from(t) + 1));
        }
        for pid in 0..5 {
            let mut p = thread(200 + pid, 2000 + pid, 0, u64::from(pid) * 3);
            p.process.rank = Some(pid + 1);
            profiles.push(p);
        }
        for p in &profiles {
            let name = format!(
                "app.{}.{}.{}.hpcrun",
                p.process.host, p.process.pid, p.thread.tid
            );
            std::fs::write(dir.join(name), p.to_bytes().unwrap()).unwrap();
        }
        let files = crate::read::find(&dir).unwrap();
        let with = |n: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap();
            let seen = std::sync::atomic::AtomicU64::new(0);
            let db = pool.install(|| {
                merge_files(&files, &|b| {
                    seen.fetch_add(b, std::sync::atomic::Ordering::Relaxed);
                })
                .db
            });
            // Encoded node by node, the bytes of the whole database.
            let mut streamed = Vec::new();
            db.write_to(&mut streamed).unwrap();
            let db = db.into_database();
            assert_eq!(streamed, db.to_bytes().unwrap());
            (db, seen.into_inner())
        };
        let (one, bytes) = with(1);
        let (three, _) = with(3);
        let total: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
        assert_eq!(bytes, total);
        assert_eq!(one, three);
        // Same as the in-memory merge of the same profiles (up to the
        // skipped list, which is empty in both).
        let memory = merge(&profiles, Vec::new()).db;
        let mut one = one;
        crate::naming::name_objects(&mut one.objects, &one.frames, &Wrappers::default());
        assert_eq!(one, memory);
        // Rank 0 is the split process (1 + ... + 12), ranks 1-5 have
        // 0, 3, 6, 9, 12.
        let obj = object(&one, ObjectKind::Heap)[0];
        let r = one.data.nodes[obj.node as usize].ranks.unwrap();
        assert_eq!(r.count, 6);
        assert_eq!((r.min, r.max), (0.0, 78.0));
        assert!(close(r.mean, (78.0 + 30.0) / 6.0), "{r:?}");
        assert_eq!(obj.allocations, 3 * 6);
        assert_eq!(one.info.processes, 6);
        assert_eq!(one.info.threads, 17);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
