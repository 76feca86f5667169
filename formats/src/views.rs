//! Tables derived from a [`Database`]: the data-centric object list and the
//! flat function list. Shared by `hpcprof-rs export` and `hpcview-tui`.

use std::collections::HashMap;

use crate::database::{DataObject, Database, Dist, Frame, NodeKind, ObjectHistogram, ObjectKind};

/// One data object with its inclusive metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRow<'a> {
    pub index: u32,
    pub kind: ObjectKind,
    pub name: &'a str,
    /// Root first.
    pub alloc_path: Vec<&'a Frame>,
    /// Heap: where the application asked for the memory (a frame of
    /// `alloc_path` outside allocator wrappers).
    pub alloc_site: Option<&'a Frame>,
    /// Heap: the name the program gave the object, if any.
    pub label: Option<&'a str>,
    pub bytes: u64,
    pub allocations: u64,
    /// Inclusive values, one per metric column.
    pub metrics: Vec<u64>,
    /// Primary metric over the data-centric total (0 when the total is 0).
    pub share: f64,
    /// Where in the object the sampled accesses fell.
    pub histogram: Option<&'a ObjectHistogram>,
    /// Inclusive values per thread: (index into `DbInfo::thread_list`,
    /// values).
    pub by_thread: &'a [(u32, Vec<u64>)],
}

impl ObjectRow<'_> {
    /// The thread that first touched most of this object's sampled pages
    /// (`page-faults` event), with its share of them; `None` without
    /// first-touch data.
    pub fn first_touch(&self, db: &Database) -> Option<(u32, f64)> {
        let col = db.metric_column("first_touch")?;
        db.objects.get(self.index as usize)?.top_thread(col)
    }
}

/// One function of the code-centric view (exclusive values of its
/// instructions, inlined code counted in the inlined function).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionRow<'a> {
    pub function: &'a str,
    pub module: &'a str,
    /// File and line of the function's hottest line.
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: Vec<u64>,
    pub share: f64,
    /// Its lines, hottest first.
    pub lines: Vec<LineRow<'a>>,
}

/// One source line of a function.
#[derive(Debug, Clone, PartialEq)]
pub struct LineRow<'a> {
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: Vec<u64>,
    pub share: f64,
}

fn share(value: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        value as f64 / total as f64
    }
}

/// Every data object, sorted by the primary metric (descending), then name.
pub fn objects(db: &Database) -> Vec<ObjectRow<'_>> {
    let columns = db.info.metrics.len().max(1);
    let primary = db.info.primary_metric as usize;
    let inclusive = db.data.inclusive(columns);
    let total: u64 = db
        .objects
        .iter()
        .map(|o| inclusive[o.node as usize][primary])
        .sum();
    let mut rows: Vec<ObjectRow<'_>> = db
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let metrics = inclusive[o.node as usize].clone();
            ObjectRow {
                index: i as u32,
                kind: o.kind,
                name: &o.name,
                alloc_path: o
                    .alloc_path
                    .iter()
                    .map(|&f| &db.frames[f as usize])
                    .collect(),
                alloc_site: o.site_frame().map(|f| &db.frames[f as usize]),
                label: o.label.as_deref(),
                bytes: o.bytes,
                allocations: o.allocations,
                share: share(metrics[primary], total),
                metrics,
                histogram: o.histogram.as_ref(),
                by_thread: &o.by_thread,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.metrics[primary]
            .cmp(&a.metrics[primary])
            .then_with(|| a.name.cmp(b.name))
    });
    rows
}

/// Flat function list of the code-centric tree, sorted by the primary metric.
pub fn functions(db: &Database) -> Vec<FunctionRow<'_>> {
    let columns = db.info.metrics.len().max(1);
    let primary = db.info.primary_metric as usize;
    // (function, module) -> ((file, line) -> metrics)
    type Lines<'a> = HashMap<(Option<&'a str>, Option<u32>), Vec<u64>>;
    let mut by_function: HashMap<(&str, &str), Lines<'_>> = HashMap::new();
    let mut total = 0u64;
    for node in &db.code.nodes {
        let NodeKind::Frame(f) = node.kind else {
            continue;
        };
        if node.exclusive.iter().all(|&v| v == 0) {
            continue;
        }
        let frame = &db.frames[f as usize];
        let entry = by_function
            .entry((frame.function.as_str(), frame.module.as_str()))
            .or_default()
            .entry((frame.file.as_deref(), frame.line))
            .or_insert_with(|| vec![0; columns]);
        for (acc, v) in entry.iter_mut().zip(&node.exclusive) {
            *acc += v;
        }
        total += node.exclusive.get(primary).copied().unwrap_or(0);
    }
    let mut rows: Vec<FunctionRow<'_>> = by_function
        .into_iter()
        .map(|((function, module), lines)| {
            let mut metrics = vec![0; columns];
            let mut lines: Vec<LineRow<'_>> = lines
                .into_iter()
                .map(|((file, line), m)| {
                    for (acc, v) in metrics.iter_mut().zip(&m) {
                        *acc += v;
                    }
                    LineRow {
                        file,
                        line,
                        share: share(m[primary], total),
                        metrics: m,
                    }
                })
                .collect();
            lines.sort_by(|a, b| {
                b.metrics[primary]
                    .cmp(&a.metrics[primary])
                    .then_with(|| a.line.cmp(&b.line))
            });
            FunctionRow {
                function,
                module,
                file: lines.first().and_then(|l| l.file),
                line: lines.first().and_then(|l| l.line),
                share: share(metrics[primary], total),
                metrics,
                lines,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.metrics[primary]
            .cmp(&a.metrics[primary])
            .then_with(|| a.function.cmp(b.function))
    });
    rows
}

/// Name of the metric of all samples (memory or not) of `mem:soft`, the
/// denominator of [`BottleneckRow::mem_time_share`].
pub const CPU_SAMPLES: &str = "cpu_samples";

/// Default threshold above which a region counts as memory bound
/// (`mem_time_share`).
pub const MEM_TIME_SHARE_HIGH: f64 = 0.5;

/// Default threshold above which a region's share of the primary metric
/// counts as high.
pub const SHARE_HIGH: f64 = 0.1;

/// Which kind of region a [`BottleneckRow`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// A data object (heap, static, stack, unknown).
    Object(ObjectKind),
    /// A function of the code-centric view.
    Function,
}

impl Region {
    pub fn as_str(self) -> &'static str {
        match self {
            Region::Object(_) => "object",
            Region::Function => "function",
        }
    }
}

/// The quadrant of the bottleneck-priority rule (memory-boundness x share
/// of the primary metric), best to optimise first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Quadrant {
    /// Memory bound, large share: optimise first.
    OptimiseFirst = 1,
    /// Memory bound, small share: low priority.
    LowPriority = 2,
    /// Not memory bound, large share: optimising its memory accesses
    /// would yield little benefit.
    LittleBenefit = 3,
    /// Neither: no optimisation needed.
    NoNeed = 4,
}

impl Quadrant {
    pub fn of(memory_bound: bool, high_share: bool) -> Quadrant {
        match (memory_bound, high_share) {
            (true, true) => Quadrant::OptimiseFirst,
            (true, false) => Quadrant::LowPriority,
            (false, true) => Quadrant::LittleBenefit,
            (false, false) => Quadrant::NoNeed,
        }
    }

    /// Priority, 1 (first) to 4.
    pub fn priority(self) -> u32 {
        self as u32
    }

    pub fn advice(self) -> &'static str {
        match self {
            Quadrant::OptimiseFirst => "optimise first",
            Quadrant::LowPriority => "low priority",
            Quadrant::LittleBenefit => "optimisation would yield little benefit",
            Quadrant::NoNeed => "no optimisation needed",
        }
    }
}

/// One row of the bottleneck view: a data object or a function, with its
/// memory-boundness proxy and its quadrant.
#[derive(Debug, Clone, PartialEq)]
pub struct BottleneckRow<'a> {
    pub region: Region,
    pub name: &'a str,
    /// Objects: root-first allocation path (heap); functions: empty.
    pub alloc_path: Vec<&'a Frame>,
    /// Heap objects: the allocation site.
    pub alloc_site: Option<&'a Frame>,
    /// Functions: module; objects: `None`.
    pub module: Option<&'a str>,
    /// Functions: file and line of the hottest line.
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    /// Inclusive (objects) or exclusive (functions) values, per column.
    pub metrics: Vec<u64>,
    /// Primary metric over the view's total (objects: data-centric total,
    /// functions: code-centric total; the two totals are equal).
    pub share: f64,
    /// Memory samples over the `cpu_samples` of the code the region runs in
    /// (see [`bottleneck`]); `None` without a `cpu_samples` column.
    pub mem_time_share: Option<f64>,
    /// `cpu_samples` of that code (the denominator).
    pub code_cpu_samples: u64,
    /// `mem_time_share >= MEM_TIME_SHARE_HIGH`; `None` when unknown.
    pub memory_bound: Option<bool>,
    pub high_share: bool,
    pub quadrant: Quadrant,
    /// An MPI library's or OpenMP runtime's: an object it allocated
    /// ([`DataObject::runtime`]) or a function of its modules
    /// ([`crate::runtimes::of_module`]).
    pub runtime: bool,
}

/// Thresholds of [`bottleneck`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub mem_time_share: f64,
    pub share: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            mem_time_share: MEM_TIME_SHARE_HIGH,
            share: SHARE_HIGH,
        }
    }
}

impl Thresholds {
    /// (memory bound, high share, quadrant) of a region whose share of the
    /// primary metric is `share` and whose proxy is `mem_time_share`:
    /// memory bound when the proxy is at or above
    /// [`Thresholds::mem_time_share`] (unknown without a proxy, and then
    /// ranked as if memory bound), a high share at or above
    /// [`Thresholds::share`].
    pub fn classify(
        &self,
        share: f64,
        mem_time_share: Option<f64>,
    ) -> (Option<bool>, bool, Quadrant) {
        let memory_bound = mem_time_share.map(|m| m >= self.mem_time_share);
        let high = share >= self.share;
        (
            memory_bound,
            high,
            Quadrant::of(memory_bound.unwrap_or(true), high),
        )
    }
}

/// The memory-boundness proxy of a region, [`BottleneckRow::mem_time_share`]:
/// its memory samples `num` over the `cpu_samples` `den` of its code,
/// capped at 1 (0 when `den` is 0); `None` without a `cpu_samples` column
/// (`has_cpu` false).
pub fn mem_time_share(num: u64, den: u64, has_cpu: bool) -> Option<f64> {
    has_cpu.then(|| {
        if den == 0 {
            0.0
        } else {
            (num as f64 / den as f64).min(1.0)
        }
    })
}

/// The order within a quadrant: `share x mem_time_share` (`share` without
/// a proxy, as if memory bound).
pub fn priority_score(share: f64, mem_time_share: Option<f64>) -> f64 {
    share * mem_time_share.unwrap_or(1.0)
}

/// What places a row in bottleneck order ([`bottleneck_order`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BottleneckRank {
    /// An MPI library's or OpenMP runtime's row ([`BottleneckRow::runtime`]).
    pub runtime: bool,
    pub quadrant: Quadrant,
    /// Share of the primary metric.
    pub share: f64,
    /// The memory-boundness proxy (`None` without `cpu_samples`).
    pub mem_time_share: Option<f64>,
}

impl BottleneckRow<'_> {
    /// This row's place in bottleneck order.
    pub fn rank(&self) -> BottleneckRank {
        BottleneckRank {
            runtime: self.runtime,
            quadrant: self.quadrant,
            share: self.share,
            mem_time_share: self.mem_time_share,
        }
    }
}

/// The bottleneck order, the one of `hpcprof-rs export --view
/// bottleneck` ([`bottleneck`]), the viewer's `b` order and `hpcview-tui
/// --report`: the program's rows before the runtimes' (MPI libraries'
/// and OpenMP runtimes' objects and functions, which the user does not
/// optimise), then by quadrant (optimise first, low priority, little
/// benefit, no need), then by [`priority_score`] and then by share, the
/// largest first. `Less` when `a` comes first; rows equal here are
/// ordered by name by their callers.
///
/// ```
/// use formats::views::{bottleneck_order, BottleneckRank, Quadrant};
/// let program = BottleneckRank {
///     runtime: false,
///     quadrant: Quadrant::NoNeed,
///     share: 0.1,
///     mem_time_share: Some(0.1),
/// };
/// let library = BottleneckRank {
///     runtime: true,
///     quadrant: Quadrant::OptimiseFirst,
///     share: 0.8,
///     mem_time_share: Some(0.9),
/// };
/// assert!(bottleneck_order(&program, &library).is_lt());
/// ```
pub fn bottleneck_order(a: &BottleneckRank, b: &BottleneckRank) -> std::cmp::Ordering {
    let score = |r: &BottleneckRank| priority_score(r.share, r.mem_time_share);
    a.runtime
        .cmp(&b.runtime)
        .then_with(|| a.quadrant.cmp(&b.quadrant))
        .then_with(|| score(b).total_cmp(&score(a)))
        .then_with(|| b.share.total_cmp(&a.share))
}

/// Memory samples per function that were not cache-resident, from the
/// samples per (object, accessing function) `accessors`: a heap or static
/// object's samples at a function count as cache-resident (compute, not
/// memory time) when the summed size of the heap and static objects that
/// function accessed fits in one core's L2 cache; stack data is always
/// cache-resident; other data (unknown addresses, lost addresses) is
/// memory, and so is an object whose cache lines the sharing analysis saw
/// bounce between threads (`-e sharing`: true or false sharing), whatever
/// its size. `None` when the database does not say the cache sizes (older
/// databases, hardware sources): then every sample is memory time.
fn memory_samples<'a>(
    db: &'a Database,
    accessors: &[HashMap<(&'a str, &'a str), u64>],
) -> Option<HashMap<(&'a str, &'a str), u64>> {
    let limit = db.info.stats.cache_bytes.l2;
    let soft = !db.info.stats.attribution.is_empty();
    if limit == 0 || !soft {
        return None;
    }
    let sized = |o: &DataObject| matches!(o.kind, ObjectKind::Heap | ObjectKind::Static);
    let mut working_set: HashMap<(&str, &str), u64> = HashMap::new();
    for (o, acc) in db.objects.iter().zip(accessors) {
        if sized(o) {
            for k in acc.keys() {
                *working_set.entry(*k).or_default() += o.bytes;
            }
        }
    }
    let mut memory: HashMap<(&str, &str), u64> = HashMap::new();
    for (o, acc) in db.objects.iter().zip(accessors) {
        for (k, &n) in acc {
            // Cache lines that bounce between cores (sharing events, true
            // or false) are memory time whatever the object's size.
            let resident = o.sharing.is_empty()
                && match o.kind {
                    ObjectKind::Stack => true,
                    _ if sized(o) => working_set.get(k).copied().unwrap_or(0) <= limit,
                    _ => false,
                };
            *memory.entry(*k).or_default() += if resident { 0 } else { n };
        }
    }
    Some(memory)
}

/// The bottleneck view: every data object and every function, ranked by
/// the bottleneck-priority rule of the data-centric work (memory bound and
/// large share first).
///
/// Memory-boundness: with a software source (`mem:soft`) there is neither
/// latency nor an instruction count; the proxy is **`mem_time_share`**, the
/// share of the sampled CPU time of the region's code that was spent at
/// memory-loading instructions:
///
/// * function: its memory samples over its `cpu_samples` (all timer
///   samples at its instructions), both exclusive, inlined code counted in
///   the inlined function (as in [`functions`]);
/// * object: the memory samples of the functions whose instructions
///   accessed it (the innermost frames of its access paths), all objects'
///   together, over their summed `cpu_samples`: arrays read in one loop
///   share the loop's memory time instead of diluting each other.
///
/// Memory samples: `mem:soft` already left out divides, square roots,
/// floating-point chains fed by no load and compiler constants (rule
/// counters, docs/GUIDE.md); with the measuring machine's cache sizes in
/// the database, the samples of heap and static data at a function whose
/// sampled working set (the summed size of the heap and static objects it
/// accessed) fits in one core's L2 cache, and of stack data, are
/// cache-resident: compute, not memory time, unless the sharing analysis
/// saw the object's lines bounce between threads (see `memory_samples`).
/// Without cache sizes every load sample counts.
///
/// Both are in [0, 1]. A region is memory bound when `mem_time_share >=
/// thresholds.mem_time_share`, has a high share when its share of the
/// primary metric is `>= thresholds.share`. Rows are sorted in
/// [`bottleneck_order`] (the program's rows before the runtimes', then by
/// quadrant, `share x mem_time_share` and share), then by name. Without a
/// `cpu_samples` column `mem_time_share` and `memory_bound` are `None` and
/// regions are ranked as if memory bound (every sample is a memory access).
pub fn bottleneck(db: &Database, thresholds: Thresholds) -> Vec<BottleneckRow<'_>> {
    let primary = db.info.primary_metric as usize;
    let cpu = db.info.metrics.iter().position(|m| m.name == CPU_SAMPLES);
    let functions = functions(db);
    let fn_cpu: HashMap<(&str, &str), u64> = functions
        .iter()
        .map(|f| {
            let c = cpu.and_then(|c| f.metrics.get(c).copied()).unwrap_or(0);
            ((f.function, f.module), c)
        })
        .collect();
    let ratio = |num: u64, den: u64| mem_time_share(num, den, cpu.is_some());
    let classify = |share: f64, mts: Option<f64>| thresholds.classify(share, mts);
    let mut rows: Vec<BottleneckRow<'_>> = Vec::new();

    // The functions accessing each object: walk the data tree once, from
    // every object node down (objects never nest).
    let mut owner: Vec<Option<u32>> = vec![None; db.data.nodes.len()];
    for (i, node) in db.data.nodes.iter().enumerate() {
        owner[i] = match node.kind {
            NodeKind::Object(o) => Some(o),
            _ if i == 0 => None,
            _ => owner.get(node.parent as usize).copied().flatten(),
        };
    }
    // Per object, the functions that accessed it and its primary samples
    // at each.
    let mut accessors: Vec<HashMap<(&str, &str), u64>> = vec![Default::default(); db.objects.len()];
    for (i, node) in db.data.nodes.iter().enumerate() {
        let (Some(o), NodeKind::Frame(f)) = (owner[i], &node.kind) else {
            continue;
        };
        if node.exclusive.iter().all(|&v| v == 0) {
            continue;
        }
        let frame = &db.frames[*f as usize];
        if let Some(map) = accessors.get_mut(o as usize) {
            let n = node.exclusive.get(primary).copied().unwrap_or(0);
            *map.entry((frame.function.as_str(), frame.module.as_str()))
                .or_default() += n;
        }
    }
    let memory = memory_samples(db, &accessors);
    let fn_memory = |k: &(&str, &str), all: u64| {
        memory
            .as_ref()
            .map_or(all, |m| m.get(k).copied().unwrap_or(0))
    };
    for o in objects(db) {
        let acc = &accessors[o.index as usize];
        let den: u64 = acc
            .keys()
            .map(|k| fn_cpu.get(k).copied().unwrap_or(0))
            .sum();
        // The memory time of the code the object is accessed in: with
        // cache sizes known, the memory samples of those functions that
        // were not cache-resident (all objects' together: arrays read in
        // one loop share its memory time); else the object's own samples.
        let num = match &memory {
            Some(m) => acc.keys().map(|k| m.get(k).copied().unwrap_or(0)).sum(),
            None => o.metrics[primary],
        };
        let mts = ratio(num, den);
        let (memory_bound, high_share, quadrant) = classify(o.share, mts);
        rows.push(BottleneckRow {
            region: Region::Object(o.kind),
            name: o.name,
            alloc_path: o.alloc_path,
            alloc_site: o.alloc_site,
            module: None,
            file: None,
            line: None,
            metrics: o.metrics,
            share: o.share,
            mem_time_share: mts,
            code_cpu_samples: den,
            memory_bound,
            high_share,
            quadrant,
            runtime: db.objects[o.index as usize].runtime.is_some(),
        });
    }
    for f in functions {
        let den = fn_cpu.get(&(f.function, f.module)).copied().unwrap_or(0);
        let mts = ratio(fn_memory(&(f.function, f.module), f.metrics[primary]), den);
        let (memory_bound, high_share, quadrant) = classify(f.share, mts);
        rows.push(BottleneckRow {
            region: Region::Function,
            name: f.function,
            alloc_path: Vec::new(),
            alloc_site: None,
            module: Some(f.module),
            file: f.file,
            line: f.line,
            metrics: f.metrics,
            share: f.share,
            mem_time_share: mts,
            code_cpu_samples: den,
            memory_bound,
            high_share,
            quadrant,
            runtime: crate::runtimes::of_module(f.module).is_some(),
        });
    }
    rows.sort_by(|a, b| bottleneck_order(&a.rank(), &b.rank()).then_with(|| a.name.cmp(b.name)));
    rows
}

/// What a [`DistRow`] summarises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole program (root of the code-centric tree).
    Program,
    /// A root of the data-centric tree ("heap data", ...).
    DataRoot,
    /// A data object.
    Object(ObjectKind),
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Program => "program",
            Scope::DataRoot => "data root",
            Scope::Object(_) => "object",
        }
    }
}

/// One row of the threads view: how a region's inclusive primary value
/// spreads over threads and over MPI ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct DistRow<'a> {
    pub scope: Scope,
    pub name: &'a str,
    /// Inclusive values, one per metric column.
    pub metrics: Vec<u64>,
    /// Primary metric over the program total.
    pub share: f64,
    /// Over threads (`None` when the database has one thread).
    pub threads: Option<Dist>,
    /// Over ranks (`None` when not MPI).
    pub ranks: Option<Dist>,
    /// An object an MPI library or OpenMP runtime allocated.
    pub runtime: bool,
}

impl DistRow<'_> {
    /// max / mean over threads (1 = balanced; `None` without a distribution
    /// or when the mean is 0).
    pub fn thread_imbalance(&self) -> Option<f64> {
        imbalance(self.threads)
    }

    /// max / mean over ranks.
    pub fn rank_imbalance(&self) -> Option<f64> {
        imbalance(self.ranks)
    }
}

fn imbalance(d: Option<Dist>) -> Option<f64> {
    let d = d?;
    (d.mean > 0.0).then(|| d.max / d.mean)
}

/// The threads view: the program total, the data-centric roots, then every
/// data object (by the primary metric, descending), each with its
/// distribution over threads and ranks.
pub fn distributions(db: &Database) -> Vec<DistRow<'_>> {
    let columns = db.info.metrics.len().max(1);
    let primary = db.info.primary_metric as usize;
    let code_inc = db.code.inclusive(columns);
    let data_inc = db.data.inclusive(columns);
    let total = code_inc.first().map_or(0, |v| v[primary]);
    let mut rows = Vec::new();
    if let Some(root) = db.code.nodes.first() {
        rows.push(DistRow {
            scope: Scope::Program,
            name: "<program>",
            metrics: code_inc[0].clone(),
            share: share(code_inc[0][primary], total),
            threads: root.threads,
            ranks: root.ranks,
            runtime: false,
        });
    }
    for (i, node) in db.data.nodes.iter().enumerate() {
        if node.parent != 0 {
            continue;
        }
        if let NodeKind::Root(name) = &node.kind {
            rows.push(DistRow {
                scope: Scope::DataRoot,
                name,
                metrics: data_inc[i].clone(),
                share: share(data_inc[i][primary], total),
                threads: node.threads,
                ranks: node.ranks,
                runtime: false,
            });
        }
    }
    for o in objects(db) {
        let node = &db.data.nodes[db.objects[o.index as usize].node as usize];
        rows.push(DistRow {
            scope: Scope::Object(o.kind),
            name: o.name,
            share: share(o.metrics[primary], total),
            metrics: o.metrics,
            threads: node.threads,
            ranks: node.ranks,
            runtime: db.objects[o.index as usize].runtime.is_some(),
        });
    }
    rows
}
