//! Merges thread profiles into one symbolised [`Database`].
//!
//! 1. Every raw address (tree nodes, allocation call paths) is mapped to its
//!    module and module-relative address with the profile's module table.
//! 2. The distinct (module, address) pairs are symbolised, one module per
//!    rayon task ([`crate::symbolize`]); each address becomes its inline
//!    chain of frames, outermost first.
//! 3. The trees are merged: children are keyed by (parent, frame or object),
//!    exclusive metrics summed (columns matched by metric name).
//!
//! Data objects are identified by what they are, not by where a process
//! kept them: a heap object by its symbolised allocation path (the same path
//! in two threads, processes or ranks is one object), a static variable by
//! its name, a stack by its thread index.

use std::collections::{BTreeSet, HashMap, HashSet};

use formats::database::{
    DataObject, Database, DbInfo, Frame, NodeKind, ObjectKind, Tree, TreeNode,
};
use formats::measurement::{Cct, MetricInfo, NodeKey, ObjectRef, SampleStats, ThreadProfile};

use crate::name::{heap_name, SourceCache};
use crate::symbolize::{self, ModuleRequest};

/// Name of the root under which heap objects hang.
pub const HEAP_ROOT: &str = "heap data";
/// Name of the root under which static variables hang.
pub const STATIC_ROOT: &str = "static data";
/// Name of the root of everything else.
pub const UNKNOWN_ROOT: &str = "unknown data";

/// A merged database and what went wrong on the way (nothing fatal).
#[derive(Debug)]
pub struct Merged {
    pub db: Database,
    pub warnings: Vec<String>,
}

/// Where an address points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Loc {
    /// Global module index and file virtual address.
    Module(u32, u64),
    /// In no loaded module.
    Unknown(u64),
}

/// Runtime address -> module of one profile.
struct AddrMap {
    /// (start, end, global module, bias), sorted by start.
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ObjKey {
    Heap(Vec<u32>),
    Static(String),
    Stack(u32),
    SmallHeap,
    Unknown,
    NotRecovered,
}

/// Child key of a tree node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Frame(u32),
    Object(u32),
    Root(&'static str),
}

/// A tree under construction.
struct TreeBuilder {
    nodes: Vec<TreeNode>,
    children: HashMap<(u32, Key), u32>,
    columns: usize,
}

impl TreeBuilder {
    fn new(columns: usize) -> Self {
        TreeBuilder {
            nodes: vec![TreeNode {
                parent: u32::MAX,
                kind: NodeKind::Root(String::new()),
                exclusive: vec![0; columns],
                threads: None,
                ranks: None,
            }],
            children: HashMap::new(),
            columns,
        }
    }

    fn child(&mut self, parent: u32, key: Key) -> u32 {
        if let Some(&id) = self.children.get(&(parent, key.clone())) {
            return id;
        }
        let id = self.nodes.len() as u32;
        let kind = match &key {
            Key::Frame(f) => NodeKind::Frame(*f),
            Key::Object(o) => NodeKind::Object(*o),
            Key::Root(name) => NodeKind::Root(name.to_string()),
        };
        self.nodes.push(TreeNode {
            parent,
            kind,
            exclusive: vec![0; self.columns],
            threads: None,
            ranks: None,
        });
        self.children.insert((parent, key), id);
        id
    }

    /// Descends from `parent` through `frames` (outermost first).
    fn path(&mut self, parent: u32, frames: &[u32]) -> u32 {
        frames
            .iter()
            .fold(parent, |cur, &f| self.child(cur, Key::Frame(f)))
    }

    /// Adds a profile node's metrics (`cols` maps its columns to ours).
    fn add(&mut self, node: u32, metrics: &[u64], cols: &[usize]) {
        let exclusive = &mut self.nodes[node as usize].exclusive;
        for (j, &v) in metrics.iter().enumerate() {
            if let Some(&c) = cols.get(j) {
                exclusive[c] = exclusive[c].saturating_add(v);
            }
        }
    }

    fn finish(self) -> Tree {
        Tree { nodes: self.nodes }
    }
}

/// Interned frames.
#[derive(Default)]
struct Frames {
    list: Vec<Frame>,
    ids: HashMap<Frame, u32>,
}

impl Frames {
    fn intern(&mut self, frame: Frame) -> u32 {
        if let Some(&id) = self.ids.get(&frame) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(frame.clone());
        self.ids.insert(frame, id);
        id
    }
}

/// What the merge needs to know about one profile.
struct Ctx<'a> {
    profile: &'a ThreadProfile,
    addrs: AddrMap,
    /// Profile metric column -> database column.
    cols: Vec<usize>,
    /// Index of the profile's process.
    process: u32,
}

impl Ctx<'_> {
    fn chain<'c>(&self, chains: &'c HashMap<Loc, Vec<u32>>, addr: u64) -> &'c [u32] {
        chains
            .get(&self.addrs.locate(addr))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Allocation path of a site: root first, inline chains expanded.
    fn alloc_path(&self, chains: &HashMap<Loc, Vec<u32>>, site: u32) -> Vec<u32> {
        let Some(site) = self.profile.alloc_sites.get(site as usize) else {
            return Vec::new();
        };
        site.frames
            .iter()
            .rev()
            .flat_map(|&a| self.chain(chains, a).iter().copied())
            .collect()
    }
}

/// Metric columns of the database and, per profile, its column mapping.
fn merge_metrics(profiles: &[ThreadProfile]) -> (Vec<MetricInfo>, Vec<Vec<usize>>) {
    let mut metrics: Vec<MetricInfo> = Vec::new();
    let mut maps = Vec::with_capacity(profiles.len());
    for p in profiles {
        // Columns that nodes carry beyond the named ones get synthetic names.
        let width = [&p.code, &p.heap, &p.statics_tree, &p.unknown]
            .iter()
            .flat_map(|t| t.nodes.iter().map(|n| n.metrics.len()))
            .max()
            .unwrap_or(0)
            .max(p.metrics.len());
        let mut map = Vec::with_capacity(width);
        for j in 0..width {
            let info = p.metrics.get(j).cloned().unwrap_or_else(|| MetricInfo {
                name: if j == 0 && p.metrics.is_empty() {
                    "samples".to_string()
                } else {
                    format!("metric{j}")
                },
                unit: String::new(),
                description: String::new(),
            });
            let col = match metrics.iter().position(|m| m.name == info.name) {
                Some(c) => c,
                None => {
                    metrics.push(info);
                    metrics.len() - 1
                }
            };
            map.push(col);
        }
        maps.push(map);
    }
    (metrics, maps)
}

fn trees(p: &ThreadProfile) -> [&Cct; 4] {
    [&p.code, &p.heap, &p.statics_tree, &p.unknown]
}

/// Merges `profiles` (already decoded) into a database; `skipped` is recorded
/// as is. Never fails: what cannot be symbolised gets a placeholder frame.
pub fn merge(profiles: &[ThreadProfile], skipped: Vec<(String, String)>) -> Merged {
    let mut warnings = Vec::new();

    // Modules, by path, across all profiles.
    let mut module_ids: HashMap<&str, u32> = HashMap::new();
    let mut requests: Vec<ModuleRequest> = Vec::new();
    let mut processes: HashMap<(&str, &str, u32), u32> = HashMap::new();
    let (metrics, col_maps) = merge_metrics(profiles);
    let mut ctxs = Vec::with_capacity(profiles.len());
    for (p, cols) in profiles.iter().zip(col_maps) {
        let mut ranges = Vec::new();
        for m in &p.modules {
            let id = *module_ids.entry(m.path.as_str()).or_insert_with(|| {
                requests.push(ModuleRequest {
                    path: m.path.clone(),
                    build_id: m.build_id.clone(),
                    addrs: Vec::new(),
                });
                (requests.len() - 1) as u32
            });
            ranges.extend(m.ranges.iter().map(|&(s, e)| (s, e, id, m.bias)));
        }
        ranges.sort_unstable();
        let next = processes.len() as u32;
        let process = *processes
            .entry((
                p.process.run_id.as_str(),
                p.process.host.as_str(),
                p.process.pid,
            ))
            .or_insert(next);
        ctxs.push(Ctx {
            profile: p,
            addrs: AddrMap { ranges },
            cols,
            process,
        });
    }

    // Every address to symbolise.
    let mut module_addrs: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); requests.len()];
    let mut locs: HashSet<Loc> = HashSet::new();
    for ctx in &ctxs {
        let p = ctx.profile;
        let calls = trees(p).into_iter().flat_map(|t| {
            t.nodes.iter().filter_map(|n| match n.key {
                NodeKey::Call(a) => Some(a),
                _ => None,
            })
        });
        let sites = p.alloc_sites.iter().flat_map(|s| s.frames.iter().copied());
        for addr in calls.chain(sites) {
            let loc = ctx.addrs.locate(addr);
            if locs.insert(loc) {
                if let Loc::Module(m, rel) = loc {
                    module_addrs[m as usize].insert(rel);
                }
            }
        }
    }
    for (req, addrs) in requests.iter_mut().zip(module_addrs) {
        req.addrs = addrs.into_iter().collect();
    }
    let resolved = symbolize::resolve_all(&requests);
    for r in &resolved {
        warnings.extend(r.warnings.iter().cloned());
    }

    // Intern frames in a deterministic order: modules in order of first
    // appearance, addresses ascending, then unknown addresses ascending.
    let mut frames = Frames::default();
    let mut chains: HashMap<Loc, Vec<u32>> = HashMap::with_capacity(locs.len());
    for (m, (req, res)) in requests.iter().zip(&resolved).enumerate() {
        for &rel in &req.addrs {
            let chain = match res.frames.get(&rel) {
                Some(chain) => chain.clone(),
                None => vec![Frame {
                    function: format!("{}+0x{rel:x}", symbolize::basename(&req.path)),
                    module: req.path.clone(),
                    ..Frame::default()
                }],
            };
            let ids = chain.into_iter().map(|f| frames.intern(f)).collect();
            chains.insert(Loc::Module(m as u32, rel), ids);
        }
    }
    let mut unknown: Vec<u64> = locs
        .iter()
        .filter_map(|l| match l {
            Loc::Unknown(a) => Some(*a),
            Loc::Module(..) => None,
        })
        .collect();
    unknown.sort_unstable();
    for addr in unknown {
        let id = frames.intern(Frame {
            function: format!("[unknown]+0x{addr:x}"),
            module: "[unknown]".to_string(),
            ..Frame::default()
        });
        chains.insert(Loc::Unknown(addr), vec![id]);
    }

    // Trees.
    let columns = metrics.len();
    let mut code = TreeBuilder::new(columns);
    let mut data = DataBuilder::new(columns);
    let stack_sizes: HashMap<(u32, u32), u64> = ctxs
        .iter()
        .map(|c| {
            let (lo, hi) = c.profile.thread.stack;
            ((c.process, c.profile.thread.index), hi.saturating_sub(lo))
        })
        .collect();
    for ctx in &ctxs {
        merge_code(&mut code, &ctx.profile.code, ctx, &chains);
        for (tree, root) in [
            (&ctx.profile.heap, data.heap_root),
            (&ctx.profile.statics_tree, data.static_root),
            (&ctx.profile.unknown, data.unknown_root),
        ] {
            data.merge_tree(tree, root, ctx, &chains, &stack_sizes);
        }
    }

    // Allocation counts: process-wide, repeated in every thread file of a
    // process. Take each (process, site) once (the largest count: the latest
    // snapshot), then sum over processes into the objects.
    /// (allocations, bytes, profile index, site index).
    type SiteCounts = (u64, u64, usize, u32);
    let mut sites: HashMap<(u32, &[u64]), SiteCounts> = HashMap::new();
    for (i, ctx) in ctxs.iter().enumerate() {
        for (s, site) in ctx.profile.alloc_sites.iter().enumerate() {
            let e = sites
                .entry((ctx.process, site.frames.as_slice()))
                .or_insert((0, 0, i, s as u32));
            e.0 = e.0.max(site.allocations);
            e.1 = e.1.max(site.bytes);
        }
    }
    let mut site_list: Vec<_> = sites.into_values().collect();
    site_list.sort_unstable_by_key(|&(_, _, i, s)| (i, s));
    for (allocations, bytes, i, s) in site_list {
        let path = ctxs[i].alloc_path(&chains, s);
        if let Some(&id) = data.object_ids.get(&ObjKey::Heap(path)) {
            let obj = &mut data.objects[id as usize];
            obj.allocations = obj.allocations.saturating_add(allocations);
            obj.bytes = obj.bytes.saturating_add(bytes);
        }
    }

    // Heap object names from the source of their allocation paths.
    let mut sources = SourceCache::default();
    for obj in data.objects.iter_mut() {
        if obj.kind == ObjectKind::Heap && !obj.alloc_path.is_empty() {
            let path: Vec<&Frame> = obj
                .alloc_path
                .iter()
                .map(|&f| &frames.list[f as usize])
                .collect();
            obj.name = heap_name(&path, &mut sources);
        }
    }

    let info = merge_info(profiles, skipped, metrics, processes.len());
    let db = Database {
        info,
        frames: frames.list,
        code: code.finish(),
        data: data.tb.finish(),
        objects: data.objects,
    };
    Merged { db, warnings }
}

fn merge_info(
    profiles: &[ThreadProfile],
    skipped: Vec<(String, String)>,
    metrics: Vec<MetricInfo>,
    processes: usize,
) -> DbInfo {
    let mut events: Vec<String> = Vec::new();
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut ranks: BTreeSet<u32> = BTreeSet::new();
    let mut stats = SampleStats::default();
    for p in profiles {
        for e in &p.events {
            if !events.contains(&e.name) {
                events.push(e.name.clone());
            }
        }
        if !commands.contains(&p.process.command) {
            commands.push(p.process.command.clone());
        }
        ranks.extend(p.process.rank);
        stats.add(&p.stats);
    }
    DbInfo {
        events,
        ranks: ranks.into_iter().collect(),
        processes: processes as u32,
        threads: profiles.len() as u32,
        profiles: profiles.len() as u32,
        skipped,
        primary_metric: metrics
            .iter()
            .position(|m| m.name == "samples")
            .unwrap_or(0) as u32,
        metrics,
        stats,
        commands,
    }
}

/// Merges one profile's code tree.
fn merge_code(tb: &mut TreeBuilder, cct: &Cct, ctx: &Ctx<'_>, chains: &HashMap<Loc, Vec<u32>>) {
    let mut map: Vec<u32> = Vec::with_capacity(cct.nodes.len());
    for (i, node) in cct.nodes.iter().enumerate() {
        let here = if i == 0 {
            0
        } else {
            let parent = map[node.parent as usize];
            match node.key {
                NodeKey::Call(a) => tb.path(parent, ctx.chain(chains, a)),
                // Roots and objects do not belong in a code tree: keep their
                // samples at the parent.
                NodeKey::Root | NodeKey::Object(_) => parent,
            }
        };
        map.push(here);
        tb.add(here, &node.metrics, &ctx.cols);
    }
}

/// The data tree and its objects under construction.
struct DataBuilder {
    tb: TreeBuilder,
    heap_root: u32,
    static_root: u32,
    unknown_root: u32,
    objects: Vec<DataObject>,
    object_ids: HashMap<ObjKey, u32>,
}

impl DataBuilder {
    fn new(columns: usize) -> Self {
        let mut tb = TreeBuilder::new(columns);
        let heap_root = tb.child(0, Key::Root(HEAP_ROOT));
        let static_root = tb.child(0, Key::Root(STATIC_ROOT));
        let unknown_root = tb.child(0, Key::Root(UNKNOWN_ROOT));
        DataBuilder {
            tb,
            heap_root,
            static_root,
            unknown_root,
            objects: Vec::new(),
            object_ids: HashMap::new(),
        }
    }

    /// The node of an object, created on first use. Heap objects hang below
    /// their allocation path, the others directly below their group root.
    fn object(&mut self, key: ObjKey, kind: ObjectKind, name: impl FnOnce() -> String) -> u32 {
        if let Some(&id) = self.object_ids.get(&key) {
            return id;
        }
        let id = self.objects.len() as u32;
        let (parent, alloc_path) = match &key {
            ObjKey::Heap(path) => (self.tb.path(self.heap_root, path), path.clone()),
            ObjKey::Static(_) => (self.static_root, Vec::new()),
            _ => (self.unknown_root, Vec::new()),
        };
        let node = self.tb.child(parent, Key::Object(id));
        self.objects.push(DataObject {
            kind,
            name: name(),
            alloc_path,
            bytes: 0,
            allocations: 0,
            node,
        });
        self.object_ids.insert(key, id);
        id
    }

    /// The object node of `obj` as seen from `ctx`.
    fn object_node(
        &mut self,
        obj: ObjectRef,
        ctx: &Ctx<'_>,
        chains: &HashMap<Loc, Vec<u32>>,
        heap_paths: &mut HashMap<u32, u32>,
        stack_sizes: &HashMap<(u32, u32), u64>,
    ) -> u32 {
        let p = ctx.profile;
        let id = match obj {
            ObjectRef::HeapSite(s) => {
                if let Some(&id) = heap_paths.get(&s) {
                    id
                } else {
                    let path = ctx.alloc_path(chains, s);
                    // The name is set once all objects exist (it reads sources).
                    let id = self.object(ObjKey::Heap(path), ObjectKind::Heap, || {
                        "heap@[unknown]".to_string()
                    });
                    heap_paths.insert(s, id);
                    id
                }
            }
            ObjectRef::Static(s) => {
                let (name, size) = p
                    .statics
                    .get(s as usize)
                    .map(|v| (symbolize::demangle(&v.name), v.size))
                    .unwrap_or_else(|| (format!("<static {s}>"), 0));
                let id = self.object(ObjKey::Static(name.clone()), ObjectKind::Static, || name);
                let o = &mut self.objects[id as usize];
                o.bytes = o.bytes.max(size);
                id
            }
            ObjectRef::Stack(n) => {
                let id = self.object(ObjKey::Stack(n), ObjectKind::Stack, || {
                    format!("<stack: thread {n}>")
                });
                let size = stack_sizes.get(&(ctx.process, n)).copied().unwrap_or(0);
                let o = &mut self.objects[id as usize];
                o.bytes = o.bytes.max(size);
                id
            }
            ObjectRef::SmallHeap => self.object(ObjKey::SmallHeap, ObjectKind::Heap, || {
                "<small heap objects>".to_string()
            }),
            ObjectRef::Unknown => self.object(ObjKey::Unknown, ObjectKind::Unknown, || {
                "<unknown address>".to_string()
            }),
            ObjectRef::NotRecovered => {
                self.object(ObjKey::NotRecovered, ObjectKind::Unknown, || {
                    "<address not recovered>".to_string()
                })
            }
        };
        self.objects[id as usize].node
    }

    /// Merges one of a profile's data trees, whose root maps to `root`.
    fn merge_tree(
        &mut self,
        cct: &Cct,
        root: u32,
        ctx: &Ctx<'_>,
        chains: &HashMap<Loc, Vec<u32>>,
        stack_sizes: &HashMap<(u32, u32), u64>,
    ) {
        let mut heap_paths: HashMap<u32, u32> = HashMap::new();
        let mut map: Vec<u32> = Vec::with_capacity(cct.nodes.len());
        for (i, node) in cct.nodes.iter().enumerate() {
            let here = if i == 0 {
                root
            } else {
                let parent = map[node.parent as usize];
                match node.key {
                    NodeKey::Call(a) => self.tb.path(parent, ctx.chain(chains, a)),
                    NodeKey::Object(obj) => {
                        self.object_node(obj, ctx, chains, &mut heap_paths, stack_sizes)
                    }
                    NodeKey::Root => parent,
                }
            };
            map.push(here);
            self.tb.add(here, &node.metrics, &ctx.cols);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::measurement::{AllocSite, CctNode, EventInfo, ProcessInfo, StaticVar, ThreadInfo};
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
                },
                AllocSite {
                    frames: vec![0x1000, 0x2000],
                    allocations: 3,
                    bytes: 3000,
                    max_bytes: 1000,
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
            allocations: Vec::new(),
        }
    }

    fn object(db: &Database, kind: ObjectKind) -> Vec<&DataObject> {
        db.objects.iter().filter(|o| o.kind == kind).collect()
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
}
