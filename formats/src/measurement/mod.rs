//! The per-thread measurement file written by the `hpcrun-rs` preload library.
//!
//! One file per thread (`<exe>.<host>.<pid>.<tid>.hpcrun`). Addresses are raw
//! virtual addresses of the measured process; [`Module`] maps them back to a
//! file and an offset so that `hpcprof-rs` can symbolise them and merge runs
//! that were loaded at different addresses (ASLR, several ranks).
//!
//! The profile's types are here; its statistics (samples, hook and handler
//! time, watchpoints, cache sizes) are in `stats.rs`, re-exported.

use serde::{Deserialize, Serialize};

use crate::envelope::{self, FormatError, Kind};

mod stats;

/// File kind of a measurement file.
pub const KIND: Kind = Kind {
    magic: *b"HPCRUNMF",
    version: 1,
    what: "measurement file",
};

/// File name extension of measurement files.
pub const EXTENSION: &str = "hpcrun";

/// Everything one thread measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadProfile {
    pub process: ProcessInfo,
    pub thread: ThreadInfo,
    /// The sample sources that actually ran (after any fallback).
    pub events: Vec<EventInfo>,
    /// Names of the metric columns of every tree node, in order.
    pub metrics: Vec<MetricInfo>,
    /// Loaded modules at the time the file was written.
    pub modules: Vec<Module>,
    /// Allocation sites referenced by `ObjectRef::HeapSite` (by index).
    pub alloc_sites: Vec<AllocSite>,
    /// Static variables referenced by `ObjectRef::Static` (by index).
    pub statics: Vec<StaticVar>,
    /// Code-centric tree: access call paths, leaf = the sampled instruction.
    pub code: Cct,
    /// Heap data: root -> `Object(HeapSite)` -> access call path.
    pub heap: Cct,
    /// Static data: root -> `Object(Static)` -> access call path.
    pub statics_tree: Cct,
    /// Unknown data: root -> `Object(StackFrame | Stack | SmallHeap | Unknown | UnknownRegion | NotRecovered)` -> access path.
    pub unknown: Cct,
    /// Counts of what happened to every sample.
    pub stats: SampleStats,
    /// Tracked allocations made by this thread (oldest first), with their
    /// free time if freed before this file was written.
    #[serde(default)]
    pub allocations: Vec<Allocation>,
    /// How `object_stats` histograms bucket offsets.
    #[serde(default)]
    pub histogram_layout: HistogramLayout,
    /// Per-object details beyond the tree metrics: where in the object the
    /// sampled accesses fell.
    #[serde(default)]
    pub object_stats: Vec<ObjectStats>,
    /// What was mapped where the samples of `ObjectRef::UnknownRegion`
    /// fell (by index). Added in format version 1 with a default: older
    /// files read it empty (their unknown addresses are all
    /// `ObjectRef::Unknown`).
    #[serde(default)]
    pub unknown_regions: Vec<UnknownRegion>,
}

/// A region of the address space (2 MiB, aligned) where sampled
/// addresses fell that belonged to no known object, and what the process's
/// memory map (`/proc/self/maps`, read when the file was written) had at
/// the first of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnknownRegion {
    /// The region's first sampled address (in this process: ASLR moves
    /// it between runs and ranks).
    pub address: u64,
    /// What the address was, e.g. `[vdso]/[vvar]`, `[heap] outside any
    /// block (malloc metadata)`, `file mapping /usr/lib/locale/locale-archive`,
    /// `not mapped at exit` (docs/GUIDE.md lists them); `hpcprof-rs` names
    /// the row `<unknown address: LABEL>`, one row per label.
    pub label: String,
}

/// How an object's access histogram buckets the offsets of sampled
/// accesses from the object's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HistogramLayout {
    /// `n` equal buckets over the object's size: bucket = offset * n / size
    /// (objects of different sizes from one allocation path line up).
    Fraction(u32),
    /// Buckets of this many bytes from the object's start (64: cache lines,
    /// 4096: pages); offsets beyond the last bucket go into the last one.
    Bytes { size: u64, max_buckets: u32 },
}

/// Buckets of the default layout.
pub const DEFAULT_HISTOGRAM_BUCKETS: u32 = 32;

impl Default for HistogramLayout {
    fn default() -> Self {
        HistogramLayout::Fraction(DEFAULT_HISTOGRAM_BUCKETS)
    }
}

impl HistogramLayout {
    /// Bucket of `offset` in an object of `size` bytes, `None` outside it.
    pub fn bucket(self, offset: u64, size: u64) -> Option<u32> {
        if offset >= size {
            return None;
        }
        match self {
            HistogramLayout::Fraction(n) => {
                let n = u128::from(n.max(1));
                Some((u128::from(offset) * n / u128::from(size)) as u32)
            }
            HistogramLayout::Bytes {
                size: b,
                max_buckets,
            } => {
                let last = u64::from(max_buckets.max(1) - 1);
                Some((offset / b.max(1)).min(last) as u32)
            }
        }
    }

    /// Number of buckets an object of `size` bytes has.
    pub fn buckets(self, size: u64) -> u32 {
        match self {
            HistogramLayout::Fraction(n) => n.max(1),
            HistogramLayout::Bytes {
                size: b,
                max_buckets,
            } => size
                .div_ceil(b.max(1))
                .clamp(1, u64::from(max_buckets.max(1))) as u32,
        }
    }

    /// Offset range `[start, end)` that bucket `i` covers in an object of
    /// `size` bytes (the last `Bytes` bucket reaches the object's end).
    pub fn range(self, i: u32, size: u64) -> (u64, u64) {
        match self {
            HistogramLayout::Fraction(n) => {
                let n = u128::from(n.max(1));
                let at = |k: u32| (u128::from(k) * u128::from(size) / n) as u64;
                (at(i), at(i + 1))
            }
            HistogramLayout::Bytes { size: b, .. } => {
                let start = u64::from(i).saturating_mul(b).min(size);
                let end = if i + 1 >= self.buckets(size) {
                    size
                } else {
                    start.saturating_add(b).min(size)
                };
                (start, end)
            }
        }
    }
}

/// Per-object details of one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectStats {
    pub object: ObjectRef,
    /// Sampled accesses (loads and stores with a recovered address) per
    /// offset bucket, as (bucket, count) sorted by bucket; see
    /// `ThreadProfile::histogram_layout`.
    pub histogram: Vec<(u32, u64)>,
    /// Access sites (sampled instructions) of the object with their
    /// strides, by instruction address.
    #[serde(default)]
    pub sites: Vec<SiteStrides>,
    /// Sharing events (`-e sharing`): this thread's watchpoint traps on
    /// the object, by kind.
    #[serde(default)]
    pub sharing: Vec<SharingEvents>,
    /// Reuse outcomes (`-e reuse`) of this thread's watched words in the
    /// object, as (bucket, count) sorted by bucket; buckets as
    /// `crate::patterns::REUSE_BUCKETS`.
    #[serde(default)]
    pub reuse: Vec<(u32, u64)>,
}

/// Sharing events of one kind in one thread: a watchpoint this thread
/// trapped on, armed by another thread's sample (see docs/GUIDE.md,
/// "Access patterns").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingEvents {
    /// True sharing: the trapping access touched the very bytes of the
    /// other thread's sampled access; false sharing: another 8-byte word
    /// of the same 64-byte line.
    pub true_sharing: bool,
    /// Offset of the cache line's start from the object's start (negative
    /// when the object starts inside the line).
    pub line_offset: i64,
    /// Index (`ThreadInfo::index`) of the other thread, in the same
    /// process.
    pub other_thread: u32,
    /// This thread's instruction (a lookup address, like a leaf).
    pub ip: u64,
    /// The other thread's sampled instruction.
    pub other_ip: u64,
    pub count: u64,
}

/// One access site of an object in one thread: the sampled instruction
/// (a lookup address, like the leaf of an access path) and what its
/// samples said about its stride (`crate::patterns`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteStrides {
    pub ip: u64,
    pub counts: crate::patterns::StrideCounts,
    /// For an access to a stack frame (`ObjectRef::StackFrame`): where it
    /// fell, as the data address minus the frame's CFA (negative), from
    /// the site's first such sample; `hpcprof-rs` names the variable the
    /// DWARF places there (`DW_OP_fbreg` from a CFA frame base).
    #[serde(default)]
    pub frame_offset: Option<i64>,
}

/// One tracked heap block (at least `--min-bytes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub address: u64,
    /// Requested size in bytes.
    pub size: u64,
    /// Index into `ThreadProfile::alloc_sites`.
    pub site: u32,
    pub alloc_unix_ns: u64,
    /// `None` while still live when the file was written.
    pub free_unix_ns: Option<u64>,
}

/// The measured process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: u32,
    pub host: String,
    /// MPI rank, when the process is one.
    pub rank: Option<u32>,
    pub exe: String,
    pub command: Vec<String>,
    /// Identifies one `hpcrun-rs` invocation (all processes of a run share it).
    pub run_id: String,
}

/// The measured thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadInfo {
    pub tid: u32,
    /// 0 for the main thread, then in creation order within the process.
    pub index: u32,
    /// Lowest and highest address of this thread's stack.
    pub stack: (u64, u64),
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// Where the thread was created: the call path of the
    /// `pthread_create` call that started it, in the creating thread,
    /// innermost first (call-site addresses, as `AllocSite::frames`),
    /// followed by the creating thread's own `created_at` (so that a
    /// thread created by a worker reaches back to `main`). Empty for the
    /// main thread and for threads not started through `pthread_create`.
    /// `hpcprof-rs` hangs the thread's call paths below it. (Added in
    /// format version 1 with a default: older files read it empty.)
    #[serde(default)]
    pub created_at: Vec<u64>,
}

/// A sample source that ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventInfo {
    /// e.g. "mem:soft".
    pub name: String,
    /// Sampling period, in `unit`s.
    pub period: u64,
    /// e.g. "ns" (task-clock) or "loads".
    pub unit: String,
}

/// One metric column.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricInfo {
    pub name: String,
    pub unit: String,
    pub description: String,
}

/// A loaded ELF module (executable or shared library).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub path: String,
    /// GNU build-id as lowercase hex, when the module has one.
    pub build_id: Option<String>,
    /// Load bias: runtime address = file virtual address + bias.
    pub bias: u64,
    /// Runtime address ranges [start, end) of its loaded segments.
    pub ranges: Vec<(u64, u64)>,
}

/// A distinct allocation call path and what was allocated through it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocSite {
    /// Lookup addresses, innermost (the caller of malloc) first. Return
    /// addresses are already decremented by one so that they fall inside the
    /// call instruction.
    pub frames: Vec<u64>,
    /// Number of tracked allocations made through this path (whole process).
    pub allocations: u64,
    /// Bytes requested through this path (whole process).
    pub bytes: u64,
    /// The largest single allocation.
    pub max_bytes: u64,
    /// The name the program gave the blocks of this path
    /// (`hpcrun_label`, `hpcrun_register`); wins over inferred names.
    #[serde(default)]
    pub label: Option<String>,
    /// The most blocks of this path live at once (whole process; 0 in
    /// older files).
    #[serde(default)]
    pub peak_live: u64,
    /// Blocks of this path freed before the file was written (whole
    /// process).
    #[serde(default)]
    pub frees: u64,
    /// True if its blocks were under `--min-bytes`: tracked in the compact
    /// small-block map, each block at its site, with no per-block record.
    #[serde(default)]
    pub small: bool,
}

pub use crate::notes::UntrackedBlocks;
pub use stats::{
    CacheBytes, HandlerTime, HookTime, SampleStats, WatchStats, HANDLER_TIME_BOUNDS_NS,
    HOOK_TIME_EVERY, SLOW_HOOK_NS,
};

/// A static variable from a module's symbol table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticVar {
    pub name: String,
    /// Index into `ThreadProfile::modules`, when known.
    pub module: Option<u32>,
    /// Runtime address.
    pub address: u64,
    pub size: u64,
}

/// The lookup address that stands for "unwinding stopped here": the
/// root-most frame of a call path that could not be unwound to its root.
/// `hpcprof-rs` shows it as [`PARTIAL_UNWIND_FRAME`].
pub const PARTIAL_UNWIND_ADDRESS: u64 = u64::MAX;
/// The name of that frame.
pub const PARTIAL_UNWIND_FRAME: &str = "<partial unwind>";

/// The lookup address that stands for "the process's root": the
/// root-most frame of a call path that is complete on its own, never
/// hung below its thread's creator. An OpenMP thread's path inside a
/// parallel region ends with the region's calling context and then this.
pub const REGION_ROOT_ADDRESS: u64 = u64::MAX - 1;

/// A calling-context tree: node 0 is the root; parents precede children.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cct {
    pub nodes: Vec<CctNode>,
}

impl Default for Cct {
    fn default() -> Self {
        Cct {
            nodes: vec![CctNode {
                parent: u32::MAX,
                key: NodeKey::Root,
                metrics: Vec::new(),
            }],
        }
    }
}

/// One node; `metrics` are exclusive (this node only), one per metric column
/// (missing trailing columns are zero).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CctNode {
    /// Index of the parent node (`u32::MAX` for the root).
    pub parent: u32,
    pub key: NodeKey,
    pub metrics: Vec<u64>,
}

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKey {
    Root,
    /// A lookup address (leaf: the sampled instruction; callers: return
    /// address minus one).
    Call(u64),
    /// A data object; its children are the access call paths.
    Object(ObjectRef),
}

/// Which data object a sample touched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjectRef {
    /// Index into `ThreadProfile::alloc_sites`.
    HeapSite(u32),
    /// Index into `ThreadProfile::statics`.
    Static(u32),
    /// The stack of the thread with this index.
    Stack(u32),
    /// A heap block below the tracking threshold.
    SmallHeap,
    /// A data address that belongs to no known object (and whose region
    /// was not kept: older files, or a full region table).
    #[default]
    Unknown,
    /// A memory-accessing instruction whose address could not be recovered.
    NotRecovered,
    /// One frame on this thread's stack: the sampled address lay in the
    /// stack range of a frame of the function at this runtime address
    /// (its start when the profiler knew it, else an address in it), the
    /// frame's locals, spills and stack-passed arguments. Stack addresses
    /// that no unwound frame held stay [`ObjectRef::Stack`]. (Added in
    /// format version 1 without a version change: older files never hold
    /// it, and older tools reject files that do.)
    StackFrame(u64),
    /// A data address that belongs to no known object, in the region
    /// `ThreadProfile::unknown_regions[i]`, which says what was mapped
    /// there. (Added in format version 1 without a version change: older
    /// files never hold it, older tools refuse files that do.)
    UnknownRegion(u32),
}

impl ThreadProfile {
    /// Serialises with the header.
    pub fn to_bytes(&self) -> Result<Vec<u8>, FormatError> {
        envelope::encode(KIND, self)
    }

    /// [`ThreadProfile::to_bytes`] straight into `out` (no buffer of the
    /// whole file).
    pub fn write_to<W: std::io::Write>(&self, out: W) -> Result<(), FormatError> {
        envelope::encode_to(KIND, self, out)
    }

    /// Reads a file's bytes; an error (never a panic) for anything damaged.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        let profile: ThreadProfile = envelope::decode(KIND, bytes)?;
        profile.validate()?;
        Ok(profile)
    }

    /// Who wrote a file: its process and thread (run id, host, pid, tid,
    /// start time), decoded from the first fields of the body without the
    /// trees that follow (a few hundred bytes of a file of megabytes).
    /// `bytes` may be the start of the file only; an error when they end
    /// before both fields (read more, or the whole file) or the file is
    /// not a usable measurement file.
    pub fn head_from_bytes(bytes: &[u8]) -> Result<(ProcessInfo, ThreadInfo), FormatError> {
        let mut fields = envelope::Fields::new(KIND, bytes)?;
        let (mut process, mut thread) = (None, None);
        while let Some(name) = fields.next_name()? {
            match name.as_str() {
                "process" => process = Some(fields.value::<ProcessInfo>()?),
                "thread" => thread = Some(fields.value::<ThreadInfo>()?),
                _ => fields.skip()?,
            }
            if let (Some(p), Some(t)) = (&process, &thread) {
                return Ok((p.clone(), t.clone()));
            }
        }
        Err(FormatError::Invalid {
            what: KIND.what,
            msg: "no process or thread in it".into(),
        })
    }

    /// True if the tables `obj` indexes hold it.
    fn has_object(&self, obj: ObjectRef) -> bool {
        match obj {
            ObjectRef::HeapSite(s) => (s as usize) < self.alloc_sites.len(),
            ObjectRef::Static(s) => (s as usize) < self.statics.len(),
            ObjectRef::UnknownRegion(r) => (r as usize) < self.unknown_regions.len(),
            _ => true,
        }
    }

    /// Checks the cross references, so that readers can index without fear.
    pub fn validate(&self) -> Result<(), FormatError> {
        let bad = |msg: String| FormatError::Invalid {
            what: KIND.what,
            msg,
        };
        for (name, tree) in [
            ("code", &self.code),
            ("heap", &self.heap),
            ("static", &self.statics_tree),
            ("unknown", &self.unknown),
        ] {
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
                if let NodeKey::Object(obj) = node.key {
                    if !self.has_object(obj) {
                        return Err(bad(format!("{name} tree node {i} names a missing object")));
                    }
                }
            }
        }
        if self
            .allocations
            .iter()
            .any(|a| a.site as usize >= self.alloc_sites.len())
        {
            return Err(bad("an allocation names a missing site".into()));
        }
        for st in &self.object_stats {
            if !self.has_object(st.object) {
                return Err(bad("object statistics name a missing object".into()));
            }
            if st
                .sites
                .iter()
                .any(|s| s.counts.strides.len() > 64 || s.counts.deltas.len() > 64)
            {
                return Err(bad("a site lists too many strides".into()));
            }
        }
        for var in &self.statics {
            if let Some(m) = var.module {
                if m as usize >= self.modules.len() {
                    return Err(bad(format!("static {} names a missing module", var.name)));
                }
            }
        }
        Ok(())
    }
}
