//! One worker's partial merge ([`Partial`]): profiles are added one at a
//! time into its code tree, data tree and objects; per-process facts
//! (allocation counts, stack sizes, per-rank sums) are settled once a
//! process's files are all merged; two partials combine with
//! [`Partial::absorb`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use formats::database::ThreadRef;
use formats::measurement::{
    HistogramLayout, NodeKey, ObjectRef, SampleStats, ThreadProfile, REGION_ROOT_ADDRESS,
};
use rustc_hash::FxHashMap;

use super::columns::Columns;
use super::input::Input;
use super::objects::{DataBuilder, ObjKey};
use super::resolve::{AddrMap, Resolver};
use super::tree::{absorb_tree, RankValues, TreeBuilder};
use crate::symbolize::{self, Loc, Symbolizer};

/// Identity of a measured process: (run id, host, pid).
pub(super) type ProcKey = (String, String, u32);

pub(super) fn proc_key(p: &ThreadProfile) -> ProcKey {
    (
        p.process.run_id.clone(),
        p.process.host.clone(),
        p.process.pid,
    )
}

/// State shared by all workers.
pub(super) struct Shared {
    pub(super) symbols: Symbolizer,
    pub(super) columns: Columns,
    /// The whole merge has at most `MAX_THREAD_VALUES` inputs: per-thread
    /// values and histograms of objects are gathered (the database keeps
    /// them only for runs of that many threads).
    pub(super) keep_thread_values: bool,
    /// The whole merge has at most `MAX_RANK_VALUES` processes (hence
    /// ranks): per-rank values of nodes are gathered.
    pub(super) keep_rank_values: bool,
}

/// What one allocation site allocated (whole process, then summed over
/// processes; the largest block and `small` over all).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct BlockCounts {
    pub(super) allocations: u64,
    pub(super) bytes: u64,
    pub(super) max_bytes: u64,
    pub(super) peak_live: u64,
    pub(super) frees: u64,
    pub(super) small: bool,
}

impl BlockCounts {
    /// The same process's counts in another of its files (each file holds
    /// the process-wide counts at its writing): the largest of each.
    fn latest(&mut self, o: &BlockCounts) {
        self.allocations = self.allocations.max(o.allocations);
        self.bytes = self.bytes.max(o.bytes);
        self.max_bytes = self.max_bytes.max(o.max_bytes);
        self.peak_live = self.peak_live.max(o.peak_live);
        self.frees = self.frees.max(o.frees);
        self.small |= o.small;
    }

    /// Another process's counts.
    pub(super) fn add(&mut self, o: &BlockCounts) {
        self.allocations = self.allocations.saturating_add(o.allocations);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.max_bytes = self.max_bytes.max(o.max_bytes);
        self.peak_live = self.peak_live.saturating_add(o.peak_live);
        self.frees = self.frees.saturating_add(o.frees);
        self.small |= o.small;
    }
}

/// (counts, symbolised allocation path) of one site.
pub(super) type SiteCounts = (BlockCounts, Vec<u32>);

/// Per-process facts gathered over one work item (or, for a process whose
/// files were split over several work items, carried until the end).
#[derive(Default)]
pub(super) struct ProcState {
    /// (process, raw allocation path) -> (allocations, bytes, symbolised path):
    /// process-wide counts repeated in every thread file (max taken).
    pub(super) sites: HashMap<(ProcKey, Vec<u64>), SiteCounts>,
    /// (process, thread index) -> stack size.
    pub(super) stacks: HashMap<(ProcKey, u32), u64>,
    /// Stack objects seen: (process, thread index).
    pub(super) stack_refs: HashSet<(ProcKey, u32)>,
    /// rank -> per-node sums, code tree and data tree.
    pub(super) code_ranks: HashMap<u32, RankValues>,
    pub(super) data_ranks: HashMap<u32, RankValues>,
}

impl ProcState {
    pub(super) fn is_empty(&self) -> bool {
        self.sites.is_empty()
            && self.stacks.is_empty()
            && self.stack_refs.is_empty()
            && self.code_ranks.is_empty()
            && self.data_ranks.is_empty()
    }
}

/// Everything in a partial result besides the trees.
#[derive(Default)]
pub(super) struct InfoAcc {
    pub(super) events: BTreeSet<String>,
    pub(super) commands: BTreeSet<Vec<String>>,
    pub(super) ranks: BTreeSet<u32>,
    pub(super) processes: HashSet<ProcKey>,
    pub(super) stats: SampleStats,
    pub(super) profiles: u32,
    pub(super) skipped: Vec<(String, String)>,
    /// Ranks whose sums were accumulated (twice: split processes).
    pub(super) flushed_ranks: HashSet<u32>,
    pub(super) rank_clash: bool,
    /// Every merged thread.
    pub(super) threads: Vec<ThreadRef>,
    /// The histogram layout of the first profile that had histograms.
    pub(super) layout: Option<HistogramLayout>,
    /// Profiles (or partial results) whose histograms used another
    /// layout: histograms are then left out altogether.
    pub(super) layout_mismatches: u32,
    /// The threads whose profile is a checkpoint (their process ended
    /// without writing the final one), named ([`checkpoint_name`]).
    pub(super) checkpoint_only: Vec<String>,
}

/// "thread 0 (main, tid 1738) of app (pid 1738)" (", rank 3" after the
/// pid when the process has a rank): a thread whose profile is only a
/// checkpoint, for the warning that names them (`finish`).
pub(super) fn checkpoint_name(p: &ThreadProfile) -> String {
    let exe = p.process.exe.rsplit('/').next().unwrap_or("");
    let exe = if exe.is_empty() { "process" } else { exe };
    let main = if p.thread.index == 0 { "main, " } else { "" };
    let rank = p
        .process
        .rank
        .map(|r| format!(", rank {r}"))
        .unwrap_or_default();
    format!(
        "thread {} ({main}tid {}) of {exe} (pid {}{rank})",
        p.thread.index, p.thread.tid, p.process.pid
    )
}

/// One worker's merged result.
pub(super) struct Partial {
    pub(super) code: TreeBuilder,
    pub(super) data: DataBuilder,
    pub(super) info: InfoAcc,
    /// Symbolised allocation path -> its counts, summed over processes.
    pub(super) site_counts: HashMap<Vec<u32>, BlockCounts>,
    /// Per-process state of processes split over several work items.
    pub(super) pending: ProcState,
    /// This worker's cache of resolved addresses.
    pub(super) cache: FxHashMap<Loc, Arc<[u32]>>,
}

impl Partial {
    pub(super) fn new() -> Self {
        Partial {
            code: TreeBuilder::new(),
            data: DataBuilder::new(),
            info: InfoAcc::default(),
            site_counts: HashMap::new(),
            pending: ProcState::default(),
            cache: FxHashMap::default(),
        }
    }

    /// Merges one profile; per-process facts go to `st`.
    pub(super) fn add_profile(&mut self, shared: &Shared, p: &ThreadProfile, st: &mut ProcState) {
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
        if p.stats.checkpoints > 0 {
            info.checkpoint_only.push(checkpoint_name(p));
        }
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

        // A worker thread's call paths hang below the code that created it
        // (HPCToolkit's rule): its `pthread_create` call in the creating
        // thread, root first (empty for the main thread).
        let created_at = cx.creation_path(&p.thread.created_at);

        // Code tree.
        let code = &mut self.code;
        let mut map: Vec<u32> = Vec::with_capacity(p.code.nodes.len());
        for (i, node) in p.code.nodes.iter().enumerate() {
            let here = if i == 0 {
                code.path(0, &created_at)
            } else {
                let parent = map[node.parent as usize];
                match node.key {
                    // A path complete on its own (an OpenMP thread's inside
                    // a parallel region): from the tree's root, not below
                    // the thread's creator.
                    NodeKey::Call(REGION_ROOT_ADDRESS) => 0,
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
                        // An access path complete on its own starts at
                        // its object.
                        NodeKey::Call(REGION_ROOT_ADDRESS) => parent,
                        NodeKey::Call(a) => {
                            // An access path starts below the thread's
                            // creator.
                            let parent_key = &cct.nodes[node.parent as usize].key;
                            let parent = if matches!(parent_key, NodeKey::Call(_)) {
                                parent
                            } else {
                                data.tb.path(parent, &created_at)
                            };
                            data.tb.call(parent, a, &mut cx)
                        }
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
                                ObjectRef::StackFrame(a) => {
                                    let f = cx.symbols.function_frame(cx.addrs.locate(a));
                                    data.object(&ObjKey::StackFrame(f))
                                }
                                ObjectRef::SmallHeap => data.object(&ObjKey::SmallHeap),
                                ObjectRef::Unknown => data.object(&ObjKey::Unknown),
                                ObjectRef::UnknownRegion(r) => {
                                    data.object(&match p.unknown_regions.get(r as usize) {
                                        Some(region) => ObjKey::UnknownIn(region.label.clone()),
                                        None => ObjKey::Unknown,
                                    })
                                }
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
                    // A stack frame's site: the variable where it fell.
                    if let (ObjectRef::StackFrame(function), Some(offset)) =
                        (st.object, site.frame_offset)
                    {
                        if let Some(name) =
                            cx.symbols.frame_variable(cx.addrs.locate(function), offset)
                        {
                            let e = data.extras[id as usize].frame_vars.entry(name).or_default();
                            *e = e.saturating_add(site.counts.samples.max(1));
                        }
                    }
                }
                // Watchpoint findings: both accesses by their innermost
                // source location, like the access sites.
                for ev in &st.sharing {
                    let frame = cx.chain(cx.addrs.locate(ev.ip)).last().copied();
                    let other = cx.chain(cx.addrs.locate(ev.other_ip)).last().copied();
                    let (Some(frame), Some(other)) = (frame, other) else {
                        continue;
                    };
                    let key = (
                        ev.true_sharing,
                        ev.line_offset,
                        thread_index,
                        ev.other_thread,
                        frame,
                        other,
                    );
                    let e = data.extras[id as usize].sharing.entry(key).or_default();
                    *e = e.saturating_add(ev.count);
                }
                let reuse = &mut data.extras[id as usize].reuse;
                for &(b, n) in &st.reuse {
                    let b = b as usize;
                    if b < formats::patterns::REUSE_BUCKETS.len() {
                        if reuse.len() <= b {
                            reuse.resize(formats::patterns::REUSE_BUCKETS.len(), 0);
                        }
                        reuse[b] = reuse[b].saturating_add(n);
                    }
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
                .or_insert_with(|| (BlockCounts::default(), cx.alloc_path(p, s as u32)));
            e.0.latest(&BlockCounts {
                allocations: site.allocations,
                bytes: site.bytes,
                max_bytes: site.max_bytes,
                peak_live: site.peak_live,
                frees: site.frees,
                small: site.small,
            });
        }
        let (lo, hi) = p.thread.stack;
        let e = st.stacks.entry((proc, p.thread.index)).or_default();
        *e = (*e).max(hi.saturating_sub(lo));
    }

    /// Accumulates a process's facts: allocation counts summed over
    /// processes, stack sizes, per-rank sums.
    pub(super) fn flush(&mut self, st: ProcState, keep_ranks: bool) {
        for (_, (counts, path)) in st.sites {
            self.site_counts.entry(path).or_default().add(&counts);
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
    pub(super) fn pend(
        &mut self,
        st: ProcState,
        code_map: Option<&[u32]>,
        data_map: Option<&[u32]>,
    ) {
        let pending = &mut self.pending;
        for (k, (counts, path)) in st.sites {
            let e = pending
                .sites
                .entry(k)
                .or_insert((BlockCounts::default(), path));
            e.0.latest(&counts);
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
    pub(super) fn merge_item<'a>(
        &mut self,
        shared: &Shared,
        items: &[usize],
        whole: bool,
        input: &Input<'a>,
    ) {
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
    pub(super) fn end_profiles(&mut self) {
        self.cache = FxHashMap::default();
        self.code.end_profiles();
        self.data.tb.end_profiles();
    }

    /// Adds another worker's result to this one.
    pub(super) fn absorb(mut self, mut other: Partial) -> Partial {
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
        for (path, counts) in other.site_counts {
            self.site_counts.entry(path).or_default().add(&counts);
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
        a.checkpoint_only.extend(b.checkpoint_only);
        a.layout_mismatches += b.layout_mismatches;
        match (a.layout, b.layout) {
            (None, l) => a.layout = l,
            (Some(x), Some(y)) if x != y => a.layout_mismatches += 1,
            _ => {}
        }
        self
    }
}
