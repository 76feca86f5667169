//! The tree builder: a code or data tree under construction, as parallel
//! arrays (parent, key, column-major exclusive metrics, per-node
//! distribution accumulators) with a (parent, key) -> child table and a
//! (parent, address) edge cache; and [`absorb_tree`], which adds one
//! worker's tree into another's.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::dist::Acc;
use super::resolve::Resolver;
use crate::symbolize::Loc;

/// Name of the root under which heap objects hang.
pub const HEAP_ROOT: &str = "heap data";
/// Name of the root under which static variables hang.
pub const STATIC_ROOT: &str = "static data";
/// Name of the root of everything else.
pub const UNKNOWN_ROOT: &str = "unknown data";
/// Name of the group, below [`UNKNOWN_ROOT`], of the stack objects (the
/// frames of every thread's stack and what no frame held).
pub const STACKS_GROUP: &str = "thread stacks";

/// The named roots and groups, by [`Key::Root`] index.
pub(super) const ROOTS: [&str; 5] = ["", HEAP_ROOT, STATIC_ROOT, UNKNOWN_ROOT, STACKS_GROUP];
/// [`Key::Root`] index of [`STACKS_GROUP`].
pub(super) const STACKS: u8 = 4;

/// Child key of a tree node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) enum Key {
    /// Index into [`ROOTS`].
    Root(u8),
    Frame(u32),
    Object(u32),
}

/// Sparse per-node values (node -> inclusive value) of one rank.
pub(super) type RankValues = FxHashMap<u32, u64>;

/// Key of the (parent, address) edge cache: a [`Loc`] flattened next to
/// the parent (16 bytes instead of 24, the map holds one per edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct EdgeKey {
    pub(super) addr: u64,
    /// Module id, `u32::MAX` for [`Loc::Unknown`].
    pub(super) module: u32,
    pub(super) parent: u32,
}

impl EdgeKey {
    pub(super) fn new(parent: u32, loc: Loc) -> Self {
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
pub(super) const EDGE_CACHE: usize = 1 << 15;

/// A tree under construction.
pub(super) struct TreeBuilder {
    pub(super) parents: Vec<u32>,
    pub(super) keys: Vec<Key>,
    /// Exclusive metrics, column-major: `exclusive[c][node]`. A column is
    /// only as long as its last non-zero node (missing values are 0), so a
    /// column that a tree never uses costs nothing.
    pub(super) exclusive: Vec<Vec<u64>>,
    pub(super) children: FxHashMap<(u32, Key), u32>,
    /// (parent, address) -> node at the end of the address's inline chain:
    /// one lookup per profile node instead of one per frame. A cache of at
    /// most [`EDGE_CACHE`] entries: the edges below one thread's own
    /// objects (its stack, say) are never met again, and a table that
    /// grew with the tree would cost as much memory as the tree itself.
    pub(super) edges: FxHashMap<EdgeKey, u32>,
    pub(super) threads: Vec<Acc>,
    pub(super) ranks: Vec<Acc>,
    /// (rank, inclusive value) per node, for the viewer's rank filter.
    pub(super) by_rank: Vec<Vec<(u32, u64)>>,
    /// Inclusive value of the current profile at the nodes in `touched`.
    pub(super) scratch: Vec<u64>,
    /// Nodes the current profile reached (each once, see `in_touched`).
    pub(super) touched: Vec<u32>,
    /// Per node: in `touched`.
    pub(super) in_touched: Vec<bool>,
}

impl TreeBuilder {
    /// Frees the tables that only adding profiles needs (descending by
    /// address, the current profile's values).
    pub(super) fn end_profiles(&mut self) {
        self.edges = FxHashMap::default();
        self.scratch = Vec::new();
        self.touched = Vec::new();
        self.in_touched = Vec::new();
    }

    pub(super) fn new() -> Self {
        TreeBuilder {
            parents: vec![u32::MAX],
            keys: vec![Key::Root(0)],
            exclusive: Vec::new(),
            children: FxHashMap::default(),
            edges: FxHashMap::default(),
            threads: vec![Acc::default()],
            ranks: Vec::new(),
            by_rank: Vec::new(),
            scratch: vec![0],
            touched: Vec::new(),
            in_touched: vec![false],
        }
    }

    pub(super) fn len(&self) -> usize {
        self.parents.len()
    }

    pub(super) fn child(&mut self, parent: u32, key: Key) -> u32 {
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
    pub(super) fn call(&mut self, parent: u32, addr: u64, cx: &mut Resolver<'_>) -> u32 {
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
    pub(super) fn path(&mut self, parent: u32, frames: &[u32]) -> u32 {
        frames
            .iter()
            .fold(parent, |cur, &f| self.child(cur, Key::Frame(f)))
    }

    /// Adds `v` to the exclusive value of column `c` at `node`.
    pub(super) fn add_exclusive(&mut self, c: usize, node: u32, v: u64) {
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
    pub(super) fn exclusive_value(&self, c: usize, node: usize) -> u64 {
        self.exclusive
            .get(c)
            .and_then(|column| column.get(node))
            .copied()
            .unwrap_or(0)
    }

    /// Adds a profile node's metrics (`cols` maps its columns to ours) and
    /// notes its primary value for the current profile's distribution.
    pub(super) fn add(&mut self, node: u32, metrics: &[u64], cols: &[usize]) {
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

    pub(super) fn touch(&mut self, node: u32, v: u64) {
        if v == 0 {
            return;
        }
        self.note_touched(node);
        let s = &mut self.scratch[node as usize];
        *s = s.saturating_add(v);
    }

    /// Adds `node` to `touched` unless it is there already.
    pub(super) fn note_touched(&mut self, node: u32) {
        let seen = &mut self.in_touched[node as usize];
        if !*seen {
            *seen = true;
            self.touched.push(node);
        }
    }

    /// Ends a profile: its inclusive value of every node it reached goes
    /// into the thread accumulators (and into `rank`'s sums).
    pub(super) fn end_profile(&mut self, mut rank: Option<&mut RankValues>) {
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
    pub(super) fn add_rank(&mut self, rank: u32, values: &RankValues, keep: bool) {
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

/// Adds `other`'s nodes to `tb`; returns other node -> node of `tb`.
/// The structure first, then the values one array at a time, each freed
/// once added: `other` shrinks while `tb` grows, instead of both being
/// whole at the end.
pub(super) fn absorb_tree(tb: &mut TreeBuilder, mut other: TreeBuilder, objs: &[u32]) -> Vec<u32> {
    other.children = FxHashMap::default();
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
pub(super) fn absorb_accs(into: &mut Vec<Acc>, from: Vec<Acc>, map: &[u32], len: usize) {
    if !from.is_empty() && into.len() < len {
        into.resize(len, Acc::default());
    }
    for (i, acc) in from.iter().enumerate() {
        into[map[i] as usize].absorb(acc);
    }
}
