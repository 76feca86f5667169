//! The merged database before it is written: info, frames and objects as
//! in [`Database`], the two trees still in the builder's compact form
//! (parallel arrays, column-major metrics, accumulators) in canonical
//! order. [`MergedDb::write_to`] encodes it node by node, byte for byte as
//! [`Database::write_to`] would, so the `TreeNode`s (about 180 bytes each,
//! more than the builder's node) never exist all at once.

use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};

use formats::database::{
    DataObject, Database, DbInfo, Frame, NodeKind, Tree, TreeNode, KIND, MAX_RANK_VALUES,
};
use formats::envelope::{self, FormatError};

use super::tree::{Key, TreeBuilder, ROOTS};

/// A finished tree: the builder's arrays with keys already mapped to final
/// frame and object indices, and the canonical node order.
pub(super) struct FinishedTree {
    tb: TreeBuilder,
    /// Final node -> builder node.
    order: Vec<u32>,
    /// Builder node -> final node.
    new_of: Vec<u32>,
    columns: usize,
    /// Threads the distributions are over (none below 2).
    threads: u32,
    /// Ranks the rank distributions are over, when kept.
    ranks: Option<u32>,
}

impl FinishedTree {
    /// Puts `tb` into canonical order (depth first, children by root rank,
    /// then frames, then objects, in their final order); keys are mapped
    /// with `frame_map` and `obj_map`. The builder's lookup tables must be
    /// empty already (they are not needed any more).
    ///
    /// Thread distributions are kept when there are at least two threads,
    /// rank distributions when `ranks` is given.
    pub(super) fn new(
        mut tb: TreeBuilder,
        frame_map: &[u32],
        obj_map: &[u32],
        columns: usize,
        threads: u32,
        ranks: Option<u32>,
    ) -> Self {
        for key in &mut tb.keys {
            *key = match *key {
                Key::Frame(f) => Key::Frame(frame_map[f as usize]),
                Key::Object(o) => Key::Object(obj_map[o as usize]),
                k => k,
            };
        }
        let order = canonical_order(&tb);
        let mut new_of = vec![u32::MAX; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of[old as usize] = new as u32;
        }
        if ranks.is_some_and(|r| r as usize <= MAX_RANK_VALUES) {
            for values in &mut tb.by_rank {
                sum_rank_parts(values);
            }
        } else {
            tb.by_rank = Vec::new();
        }
        FinishedTree {
            tb,
            order,
            new_of,
            columns,
            threads,
            ranks,
        }
    }

    /// Number of nodes.
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Final index of builder node `old`.
    pub(super) fn final_index(&self, old: u32) -> u32 {
        self.new_of[old as usize]
    }

    /// Final node `new`, as the database holds it.
    fn node(&self, new: usize) -> TreeNode {
        let old = self.order[new] as usize;
        let tb = &self.tb;
        TreeNode {
            parent: match tb.parents[old] {
                u32::MAX => u32::MAX,
                p => self.new_of[p as usize],
            },
            kind: match tb.keys[old] {
                Key::Root(r) => NodeKind::Root(ROOTS[r as usize].to_string()),
                Key::Frame(f) => NodeKind::Frame(f),
                Key::Object(o) => NodeKind::Object(o),
            },
            exclusive: (0..self.columns)
                .map(|c| tb.exclusive_value(c, old))
                .collect(),
            threads: (self.threads >= 2).then(|| {
                tb.threads
                    .get(old)
                    .copied()
                    .unwrap_or_default()
                    .dist(self.threads)
            }),
            ranks: self
                .ranks
                .map(|r| tb.ranks.get(old).copied().unwrap_or_default().dist(r)),
            by_rank: tb.by_rank.get(old).cloned().unwrap_or_default(),
        }
    }

    fn into_tree(self) -> Tree {
        Tree {
            nodes: (0..self.len()).map(|i| self.node(i)).collect(),
        }
    }
}

/// Sorts one node's (rank, value) pairs by rank and adds up the parts of a
/// rank that was split over several partial results.
fn sum_rank_parts(values: &mut Vec<(u32, u64)>) {
    values.sort_unstable();
    values.dedup_by(|b, a| {
        let same = a.0 == b.0;
        if same {
            a.1 = a.1.saturating_add(b.1);
        }
        same
    });
}

/// Builder nodes in canonical order (final node -> builder node).
fn canonical_order(tb: &TreeBuilder) -> Vec<u32> {
    let n = tb.len();
    // Children lists, compressed: kids[start[p]..start[p + 1]].
    let mut start = vec![0u32; n + 1];
    for &p in &tb.parents[1..] {
        start[p as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut kids = vec![0u32; n.saturating_sub(1)];
    for (i, &p) in tb.parents.iter().enumerate().skip(1) {
        kids[fill[p as usize] as usize] = i as u32;
        fill[p as usize] += 1;
    }
    drop(fill);
    let rank = |k: Key| -> (u8, u32) {
        match k {
            Key::Root(r) => (0, u32::from(r)),
            Key::Frame(f) => (1, f),
            Key::Object(o) => (2, o),
        }
    };
    let range = |p: usize| start[p] as usize..start[p + 1] as usize;
    for p in 0..n {
        kids[range(p)].sort_by_key(|&k| rank(tb.keys[k as usize]));
    }
    let mut order = Vec::with_capacity(n);
    let mut stack = vec![0u32];
    while let Some(old) = stack.pop() {
        order.push(old);
        stack.extend(kids[range(old as usize)].iter().rev());
    }
    order
}

/// A merged database, ready to be written (see the module documentation).
pub struct MergedDb {
    pub info: DbInfo,
    pub frames: Vec<Frame>,
    pub objects: Vec<DataObject>,
    /// Every allocation path of the run (root first, frame indices),
    /// also those no sample reached, sorted: the naming stage decides the
    /// program's allocation layers from all of them. Not written.
    pub alloc_paths: Vec<Vec<u32>>,
    pub(super) code: FinishedTree,
    pub(super) data: FinishedTree,
}

impl std::fmt::Debug for MergedDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergedDb")
            .field("info", &self.info)
            .field("frames", &self.frames.len())
            .field("objects", &self.objects.len())
            .field("code nodes", &self.code.len())
            .field("data nodes", &self.data.len())
            .finish()
    }
}

impl MergedDb {
    /// Writes `profile.db` (header and body) to `out`, node by node.
    pub fn write_to<W: std::io::Write>(&self, out: W) -> Result<(), FormatError> {
        let body = DbOut {
            info: &self.info,
            frames: &self.frames,
            code: TreeOut(&self.code),
            data: TreeOut(&self.data),
            objects: &self.objects,
        };
        envelope::encode_to(KIND, &body, out)
    }

    /// The whole database in memory (tests, and callers that want to look
    /// at the trees).
    pub fn into_database(self) -> Database {
        Database {
            info: self.info,
            frames: self.frames,
            code: self.code.into_tree(),
            data: self.data.into_tree(),
            objects: self.objects,
        }
    }
}

/// [`Database`]'s fields in its order and with its names, the trees
/// generated on the fly.
#[derive(Serialize)]
#[serde(rename = "Database")]
struct DbOut<'a> {
    info: &'a DbInfo,
    frames: &'a [Frame],
    code: TreeOut<'a>,
    data: TreeOut<'a>,
    objects: &'a [DataObject],
}

/// Serialises like [`Tree`].
struct TreeOut<'a>(&'a FinishedTree);

impl Serialize for TreeOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tree = serializer.serialize_struct("Tree", 1)?;
        tree.serialize_field("nodes", &NodesOut(self.0))?;
        tree.end()
    }
}

/// Serialises like `Tree::nodes`, one node at a time.
struct NodesOut<'a>(&'a FinishedTree);

impl Serialize for NodesOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let tree = self.0;
        let mut seq = serializer.serialize_seq(Some(tree.len()))?;
        for i in 0..tree.len() {
            seq.serialize_element(&tree.node(i))?;
        }
        seq.end()
    }
}

/// A merged database and what went wrong on the way (nothing fatal).
#[derive(Debug)]
pub struct Merged {
    pub db: Database,
    /// Every allocation path of the run ([`MergedDb::alloc_paths`]).
    pub alloc_paths: Vec<Vec<u32>>,
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
    pub fn into_merged(mut self) -> Merged {
        let alloc_paths = std::mem::take(&mut self.db.alloc_paths);
        Merged {
            db: self.db.into_database(),
            alloc_paths,
            warnings: self.warnings,
        }
    }
}
