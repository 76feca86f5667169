//! The merged, symbolised database written by `hpcprof-rs` (`DB/profile.db`).
//!
//! A database is a directory: `profile.db` (this type, MessagePack behind the
//! header) and `src/` with copies of the source files that frames refer to.

use serde::{Deserialize, Serialize};

use crate::envelope::{self, FormatError, Kind};
use crate::measurement::{HistogramLayout, MetricInfo, SampleStats};

/// File kind of `profile.db`.
pub const KIND: Kind = Kind {
    magic: *b"HPCPROFD",
    version: 1,
    what: "profile database",
};

/// Name of the main file inside a database directory.
pub const FILE_NAME: &str = "profile.db";

/// The whole merged profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Database {
    pub info: DbInfo,
    /// Interned source locations; tree nodes refer to them by index.
    pub frames: Vec<Frame>,
    /// Code-centric tree: root -> call path -> sampled instruction.
    pub code: Tree,
    /// Data-centric tree: root -> {heap, static, unknown} roots -> ... ->
    /// object -> access call path.
    pub data: Tree,
    /// Every data object; `node` is its node in `data`.
    pub objects: Vec<DataObject>,
}

/// What was merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DbInfo {
    /// Names of the sample sources that actually ran.
    pub events: Vec<String>,
    /// Sorted distinct MPI ranks (empty when not MPI).
    pub ranks: Vec<u32>,
    pub processes: u32,
    pub threads: u32,
    /// Measurement files merged.
    pub profiles: u32,
    /// Files that were skipped, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Metric columns of every tree node.
    pub metrics: Vec<MetricInfo>,
    /// Index of the primary metric in `metrics`.
    pub primary_metric: u32,
    /// Sample counts summed over all threads.
    pub stats: SampleStats,
    /// Command lines of the measured processes (distinct).
    pub commands: Vec<Vec<String>>,
    /// Every measured thread, sorted (rank, host, pid, index);
    /// `DataObject::by_thread` refers to it by index.
    #[serde(default)]
    pub thread_list: Vec<ThreadRef>,
    /// What the measurements lack by the run manifest
    /// (`crate::manifest::check`): threads whose final profile is
    /// missing, processes killed before writing, MPI ranks with nothing.
    #[serde(default)]
    pub losses: Vec<crate::manifest::Loss>,
    /// False when the measurements had no manifest (an older hpcrun-rs):
    /// losses could not be checked.
    #[serde(default)]
    pub manifest: bool,
    /// The database's format revision ([`DB_FORMAT`] when written; 0: a
    /// database older than the revisions), for readers that compare
    /// databases of different ages.
    #[serde(default)]
    pub format: u32,
}

/// The format revision hpcprof-rs writes ([`DbInfo::format`]). 1: unknown
/// addresses are named by what was mapped there (`<unknown address:
/// MAPPING>` rows beside `<unknown address>`).
pub const DB_FORMAT: u32 = 1;

/// One measured thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ThreadRef {
    pub rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    /// 0 for the main thread, then in creation order within the process.
    pub index: u32,
    pub tid: u32,
}

impl ThreadRef {
    /// "rank 3 thread 1", "thread 1" or "pid 1234 thread 1" (several
    /// processes, no ranks).
    pub fn label(&self, several_processes: bool) -> String {
        match self.rank {
            Some(r) => format!("rank {r} thread {}", self.index),
            None if several_processes => format!("pid {} thread {}", self.pid, self.index),
            None => format!("thread {}", self.index),
        }
    }
}

/// Objects of runs with more threads keep no per-thread values.
pub const MAX_THREAD_VALUES: usize = 4096;

/// Module name of the pseudo-frame that ends the allocation path of blocks
/// the program named (`hpcrun_label`, `hpcrun_register`): its `function`
/// is the label. Blocks with different labels are different objects.
pub const LABEL_MODULE: &str = "[label]";

/// A source location (one inlining level).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// Demangled function name, or `module+0xoffset` without symbols.
    pub function: String,
    /// Source file as recorded in the debug info.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// File name of the module.
    pub module: String,
    /// True when this frame was inlined into its parent.
    pub inlined: bool,
    /// Allocation paths only, for a frame without line information: the
    /// return address's offset from the function's start, so that two call
    /// sites in one function stay apart (`AtomVec::grow+0x1c4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

impl Frame {
    /// `function` with `+0xOFFSET` when the frame has an offset.
    pub fn function_at(&self) -> String {
        match self.offset {
            Some(off) => format!("{}+0x{off:x}", self.function),
            None => self.function.clone(),
        }
    }

    /// `function file:line`, or `function+0xOFFSET (module)` without line
    /// information: how an allocation site is shown.
    pub fn site_text(&self) -> String {
        let loc = match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{f}:{l}"),
            (Some(f), None) => f.clone(),
            _ => String::new(),
        };
        if !loc.is_empty() {
            return format!("{} {loc}", self.function);
        }
        let module = self.module.rsplit('/').next().unwrap_or("");
        if module.is_empty() || self.function.starts_with(module) {
            self.function_at()
        } else {
            format!("{} ({module})", self.function_at())
        }
    }
}

/// A tree; node 0 is the root and parents precede children.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    pub nodes: Vec<TreeNode>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            nodes: vec![TreeNode {
                parent: u32::MAX,
                kind: NodeKind::Root(String::new()),
                exclusive: Vec::new(),
                threads: None,
                ranks: None,
                by_rank: Vec::new(),
            }],
        }
    }
}

/// One node of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeNode {
    /// `u32::MAX` for the root.
    pub parent: u32,
    pub kind: NodeKind,
    /// Exclusive metric values, one per `DbInfo::metrics` entry (missing
    /// trailing entries are zero).
    pub exclusive: Vec<u64>,
    /// Distribution of this node's *inclusive* value of the primary metric
    /// over all measured threads (threads that never reached the node count
    /// as 0). `None` when not computed (e.g. a single thread).
    #[serde(default)]
    pub threads: Option<Dist>,
    /// The same over MPI ranks (per-rank sums); `None` when not MPI.
    #[serde(default)]
    pub ranks: Option<Dist>,
    /// This node's inclusive value of the primary metric in each rank that
    /// reached it, as (rank, value) sorted by rank (sparse); kept for runs
    /// of at most `MAX_RANK_VALUES` ranks, empty otherwise.
    #[serde(default)]
    pub by_rank: Vec<(u32, u64)>,
}

/// Runs with more ranks keep only the rank distributions, not per-rank
/// values.
pub const MAX_RANK_VALUES: usize = 1024;

impl TreeNode {
    /// Inclusive primary value of this node in `rank` (0 if it never
    /// reached it).
    pub fn rank_value(&self, rank: u32) -> u64 {
        self.by_rank
            .binary_search_by_key(&rank, |&(r, _)| r)
            .map(|i| self.by_rank[i].1)
            .unwrap_or(0)
    }
}

/// A distribution summary: how a value spreads over threads or ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// Number of threads (or ranks) the summary is over.
    pub count: u32,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
}

/// What a node stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    /// A named root ("heap data", "static data", "unknown data", ...).
    Root(String),
    /// A source location: index into `Database::frames`.
    Frame(u32),
    /// A data object: index into `Database::objects`.
    Object(u32),
}

/// The kinds of data objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    Heap,
    Static,
    Stack,
    #[default]
    Unknown,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Heap => "heap",
            ObjectKind::Static => "static",
            ObjectKind::Stack => "stack",
            ObjectKind::Unknown => "unknown",
        }
    }
}

/// A data object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataObject {
    pub kind: ObjectKind,
    pub name: String,
    /// Allocation call path, root (e.g. `main`) first, as frame indices.
    pub alloc_path: Vec<u32>,
    /// Heap: the allocation site, where the application asked for the
    /// memory: index into `alloc_path` of the first frame outside the
    /// allocator and its wrappers (`hpcprof-rs` chooses it, see
    /// docs/GUIDE.md "Real applications"); `None` for other kinds.
    #[serde(default)]
    pub alloc_site: Option<u32>,
    /// Heap: the name the program gave the object (`hpcrun_label`,
    /// `hpcrun_register`); then `name` is that label.
    #[serde(default)]
    pub label: Option<String>,
    /// Heap: bytes allocated through the path; static: symbol size; stack:
    /// stack size; unknown: 0.
    pub bytes: u64,
    /// Heap: number of allocations through the path.
    pub allocations: u64,
    /// Node of this object in `Database::data`.
    pub node: u32,
    /// Where in the object the sampled accesses fell (heap and static
    /// objects with recovered addresses).
    #[serde(default)]
    pub histogram: Option<ObjectHistogram>,
    /// This object's inclusive metrics (columns as `DbInfo::metrics`) in
    /// each thread that reached it, as (index into `DbInfo::thread_list`,
    /// values), sorted by thread; empty for runs of more than
    /// `MAX_THREAD_VALUES` threads.
    #[serde(default)]
    pub by_thread: Vec<(u32, Vec<u64>)>,
    /// The access histogram (same layout as `histogram`) of each thread
    /// that had sampled accesses in the object, as (index into
    /// `DbInfo::thread_list`, sparse (bucket, count) sorted by bucket),
    /// sorted by thread; empty without `histogram` or for runs of more
    /// than `MAX_THREAD_VALUES` threads.
    #[serde(default)]
    pub histogram_by_thread: Vec<(u32, Vec<(u32, u64)>)>,
    /// Access sites: the sampled instructions that touched the object,
    /// with their strides (`crate::patterns`), by number of samples.
    #[serde(default)]
    pub sites: Vec<AccessSite>,
    /// Sharing events (`-e sharing`): watchpoint traps on the object's
    /// cache lines, by kind, line, thread pair and code lines; most
    /// events first.
    #[serde(default)]
    pub sharing: Vec<SharingLine>,
    /// Reuse outcomes (`-e reuse`) of the object's watched words, per
    /// bucket of `crate::patterns::REUSE_BUCKETS`; empty without any.
    #[serde(default)]
    pub reuse: Vec<u64>,
    /// Heap: the runtime that allocated the object (`Open MPI`, `MPICH`,
    /// `UCX`, `OpenMP runtime`, ... see [`crate::runtimes`]): the
    /// innermost frame of its allocation path outside the system
    /// libraries is in that runtime. Such objects are the runtime's
    /// memory, not the program's: their name starts with the runtime's,
    /// and they get no findings. `None` for the program's own objects.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Stack: the function whose frames the object is (their locals,
    /// spills and stack-passed arguments), as an index into
    /// `Database::frames` (the function at its first line); `None` for
    /// other objects and for a thread's stack as a whole (addresses that
    /// no unwound frame held). Added with a default: older databases
    /// read it empty.
    #[serde(default)]
    pub frame: Option<u32>,
    /// Heap: what the site's blocks were like (counted over every process;
    /// `None` in older databases and for other kinds).
    #[serde(default)]
    pub blocks: Option<SiteBlocks>,
}

/// The blocks an allocation site made (with `DataObject::allocations`
/// and `bytes`: their number and total size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteBlocks {
    /// The largest block.
    pub max_bytes: u64,
    /// The most blocks live at once (summed over processes).
    pub peak_live: u64,
    /// Blocks freed before the profiles were written.
    pub frees: u64,
    /// True if the blocks were under `--min-bytes`: tracked in the
    /// compact small-block map (no per-block record).
    pub small: bool,
}

impl DataObject {
    /// "299,520 blocks of 216 B" for a site of several blocks ("of up to
    /// 4,000 B, mean 1,200 B" when they differ), `None` for one block or
    /// another kind.
    pub fn blocks_text(&self) -> Option<String> {
        if self.kind != ObjectKind::Heap || self.allocations < 2 {
            return None;
        }
        let mean = self.bytes / self.allocations;
        let n = thousands(self.allocations);
        Some(match self.blocks {
            Some(b) if b.max_bytes > mean => format!(
                "{n} blocks of up to {} B, mean {} B",
                thousands(b.max_bytes),
                thousands(mean)
            ),
            _ => format!("{n} blocks of {} B", thousands(mean)),
        })
    }
}

use crate::notes::thousands;

/// Sharing events of one kind on one cache line of an object, between
/// one thread (whose access trapped) and another thread of the same
/// process (whose sample armed the watchpoint).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingLine {
    /// True sharing: the very bytes of the other thread's sampled access;
    /// false sharing: another 8-byte word of the same 64-byte line.
    pub true_sharing: bool,
    /// Offset of the line's start from the object's start (negative when
    /// the object starts inside the line).
    pub line_offset: i64,
    /// The thread whose access trapped: index into `DbInfo::thread_list`.
    pub thread: u32,
    /// The other thread: its `ThreadRef::index` in the same process.
    pub other_thread: u32,
    /// This thread's access (innermost source location), index into
    /// `Database::frames`.
    pub frame: u32,
    /// The other thread's sampled access.
    pub other_frame: u32,
    pub events: u64,
}

/// One access site of an object, summed over threads: the sampled
/// instructions at one source location (its innermost frame).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessSite {
    /// Index into `Database::frames`.
    pub frame: u32,
    pub counts: crate::patterns::StrideCounts,
}

impl DataObject {
    /// The frame index (into `Database::frames`) of the allocation site.
    pub fn site_frame(&self) -> Option<u32> {
        self.alloc_site
            .and_then(|i| self.alloc_path.get(i as usize).copied())
    }

    /// This object's inclusive value of column `col` in thread `t` (index
    /// into `DbInfo::thread_list`; 0 if it never reached the object).
    pub fn thread_value(&self, t: u32, col: usize) -> u64 {
        self.by_thread
            .binary_search_by_key(&t, |(i, _)| *i)
            .ok()
            .and_then(|i| self.by_thread[i].1.get(col).copied())
            .unwrap_or(0)
    }

    /// The thread with the largest value of column `col` (for
    /// `first_touch`: the thread that first touched most of the object's
    /// sampled pages) and its share of the total; `None` if all are 0.
    pub fn top_thread(&self, col: usize) -> Option<(u32, f64)> {
        let value = |v: &Vec<u64>| v.get(col).copied().unwrap_or(0);
        let total: u64 = self.by_thread.iter().map(|(_, v)| value(v)).sum();
        let (t, v) = self
            .by_thread
            .iter()
            .map(|(t, v)| (*t, value(v)))
            .max_by_key(|&(t, v)| (v, std::cmp::Reverse(t)))?;
        (v > 0).then(|| (t, v as f64 / total as f64))
    }
}

/// An object's access histogram, summed over threads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectHistogram {
    pub layout: HistogramLayout,
    /// (bucket, sampled accesses), sorted by bucket, sparse.
    pub counts: Vec<(u32, u64)>,
}

impl Database {
    pub fn to_bytes(&self) -> Result<Vec<u8>, FormatError> {
        envelope::encode(KIND, self)
    }

    /// Writes header and body to `out` without an intermediate buffer.
    pub fn write_to<W: std::io::Write>(&self, out: W) -> Result<(), FormatError> {
        envelope::encode_to(KIND, self, out)
    }

    /// Reads `profile.db` bytes; an error (never a panic) for damaged bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        let db: Database = envelope::decode(KIND, bytes)?;
        db.validate()?;
        Ok(db)
    }

    /// Checks every index, so that readers can index without fear.
    pub fn validate(&self) -> Result<(), FormatError> {
        let bad = |msg: String| FormatError::Invalid {
            what: KIND.what,
            msg,
        };
        for (name, tree) in [("code", &self.code), ("data", &self.data)] {
            if tree.nodes.is_empty() {
                return Err(bad(format!("{name} tree has no root")));
            }
            for (i, node) in tree.nodes.iter().enumerate().skip(1) {
                if node.parent as usize >= i {
                    return Err(bad(format!(
                        "{name} tree node {i} has parent {}",
                        node.parent
                    )));
                }
                let ok = match node.kind {
                    NodeKind::Root(_) => true,
                    NodeKind::Frame(f) => (f as usize) < self.frames.len(),
                    NodeKind::Object(o) => (o as usize) < self.objects.len(),
                };
                if !ok {
                    return Err(bad(format!(
                        "{name} tree node {i} refers to a missing entry"
                    )));
                }
            }
        }
        for obj in &self.objects {
            let threads = self.info.thread_list.len();
            if obj.by_thread.iter().any(|(t, _)| *t as usize >= threads)
                || obj
                    .histogram_by_thread
                    .iter()
                    .any(|(t, _)| *t as usize >= threads)
            {
                return Err(bad(format!(
                    "object {} refers to a missing thread",
                    obj.name
                )));
            }
            if obj.node as usize >= self.data.nodes.len()
                || obj
                    .sites
                    .iter()
                    .any(|s| s.frame as usize >= self.frames.len())
                || obj
                    .alloc_path
                    .iter()
                    .any(|&f| f as usize >= self.frames.len())
                || obj.frame.is_some_and(|f| f as usize >= self.frames.len())
            {
                return Err(bad(format!(
                    "object {} refers to a missing entry",
                    obj.name
                )));
            }
        }
        // Views index metric vectors of `max(metrics, 1)` columns.
        if self.info.primary_metric as usize >= self.info.metrics.len().max(1) {
            return Err(bad("primary metric out of range".into()));
        }
        Ok(())
    }

    /// Column of the metric called `name`.
    pub fn metric_column(&self, name: &str) -> Option<usize> {
        self.info.metrics.iter().position(|m| m.name == name)
    }

    /// Label of thread `i` of `DbInfo::thread_list` ("thread 1", "rank 3
    /// thread 0", ...).
    pub fn thread_label(&self, i: u32) -> String {
        match self.info.thread_list.get(i as usize) {
            Some(t) => t.label(self.info.processes > 1),
            None => format!("thread {i}"),
        }
    }

    /// The primary metric's name ("samples" when none is recorded).
    pub fn primary_metric_name(&self) -> &str {
        self.info
            .metrics
            .get(self.info.primary_metric as usize)
            .map(|m| m.name.as_str())
            .unwrap_or("samples")
    }
}

impl Tree {
    /// Inclusive metric values of every node (children summed into parents).
    pub fn inclusive(&self, columns: usize) -> Vec<Vec<u64>> {
        let mut inc: Vec<Vec<u64>> = self
            .nodes
            .iter()
            .map(|n| {
                let mut v = n.exclusive.clone();
                v.resize(columns, 0);
                v
            })
            .collect();
        for i in (1..self.nodes.len()).rev() {
            let parent = self.nodes[i].parent as usize;
            let (head, tail) = inc.split_at_mut(i);
            for (p, c) in head[parent].iter_mut().zip(&tail[0]) {
                *p += c;
            }
        }
        inc
    }
}
