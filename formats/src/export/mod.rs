//! The export contract of `hpcprof-rs export`: a stable interface for
//! scripts. Fields are only ever added; `version` changes if one must go.
//!
//! Here: the contract's types and [`build_with`], which fills them, and the
//! JSON writer; the CSV writer ([`to_csv_with`]) is in `csv.rs`.

use serde::Serialize;

use crate::database::{Database, Dist, Frame};
use crate::views::{self, Thresholds};

mod csv;

pub use csv::{to_csv, to_csv_with};

/// Value of the top-level `format` field.
pub const FORMAT: &str = "hpcprof-rs/export";
/// Value of the top-level `version` field.
pub const VERSION: u32 = 1;

/// Which table to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Data,
    Code,
    /// Objects and functions ranked by the bottleneck-priority rule.
    Bottleneck,
    /// Per-thread and per-rank distributions of the program, the data roots
    /// and every object.
    Threads,
}

impl View {
    /// The value of the top-level `view` field.
    pub fn as_str(self) -> &'static str {
        match self {
            View::Data => "data",
            View::Code => "code",
            View::Bottleneck => "bottleneck",
            View::Threads => "threads",
        }
    }
}

/// What the export leaves out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Leave out the rows of MPI libraries and OpenMP runtimes: objects
    /// they allocated ([`crate::database::DataObject::runtime`]) and
    /// functions of their modules ([`crate::runtimes::of_module`]), in
    /// every view (`hpcprof-rs export --hide-runtime`). Shares stay shares
    /// of the whole run.
    pub hide_runtime: bool,
}

impl Options {
    fn keeps_object(&self, db: &Database, index: u32) -> bool {
        !self.hide_runtime
            || !db
                .objects
                .get(index as usize)
                .is_some_and(|o| o.runtime.is_some())
    }

    fn keeps_module(&self, module: &str) -> bool {
        !self.hide_runtime || crate::runtimes::of_module(module).is_none()
    }
}

/// The top-level JSON document.
#[derive(Debug, Serialize)]
pub struct Export<'a> {
    pub format: &'static str,
    pub version: u32,
    pub view: &'static str,
    pub source: Source<'a>,
    /// Name of the primary metric (sorting key, `share` denominator).
    pub metric: &'a str,
    /// Description of every metric column.
    pub metrics: Vec<MetricDoc<'a>>,
    pub stats: Stats,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<ObjectOut<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<FunctionOut<'a>>>,
    /// `--view bottleneck`: the rule's thresholds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<ThresholdsOut>,
    /// `--view bottleneck`: objects and functions, first to optimise first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Vec<BottleneckOut<'a>>>,
    /// `--view threads`: distribution rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributions: Option<Vec<DistOut<'a>>>,
    /// What the measurements lack by the run manifest (every view; left
    /// out when nothing is lost).
    #[serde(skip_serializing_if = "no_losses")]
    pub losses: &'a [crate::manifest::Loss],
}

fn no_losses(losses: &&[crate::manifest::Loss]) -> bool {
    losses.is_empty()
}

/// Thresholds of the bottleneck rule.
#[derive(Debug, Serialize)]
pub struct ThresholdsOut {
    /// Name of the memory-boundness measure (`mem_time_share`).
    pub memory_boundness: &'static str,
    /// Memory bound when the measure is at least this.
    pub mem_time_share: f64,
    /// High share when `share` is at least this.
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct BottleneckOut<'a> {
    /// 1-based position in the ranking.
    pub rank: usize,
    /// `object` or `function`.
    pub region: &'static str,
    /// Objects: `heap`, `static`, `stack` or `unknown`; functions: `code`.
    pub kind: &'static str,
    pub name: &'a str,
    /// Functions: module, file and line of the hottest line.
    pub module: Option<&'a str>,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    /// Objects: allocation path, root first (empty unless heap).
    pub alloc_path: Vec<FrameOut<'a>>,
    /// Heap objects: the allocation site.
    pub alloc_site: Option<SiteOut<'a>>,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
    /// Memory samples over the cpu_samples of the code the region runs in.
    pub mem_time_share: Option<f64>,
    /// That denominator.
    pub code_cpu_samples: u64,
    pub memory_bound: Option<bool>,
    pub high_share: bool,
    /// 1 (optimise first) to 4 (no optimisation needed).
    pub priority: u32,
    pub advice: &'static str,
}

#[derive(Debug, Serialize)]
pub struct DistOut<'a> {
    /// `program`, `data root` or `object`.
    pub scope: &'static str,
    /// Objects: `heap`, `static`, `stack` or `unknown`; otherwise null.
    pub kind: Option<&'static str>,
    pub name: &'a str,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
    /// Inclusive primary metric over threads (null with one thread).
    pub threads: Option<Dist>,
    /// The same over MPI ranks (null when not MPI).
    pub ranks: Option<Dist>,
    /// threads.max / threads.mean (null without a distribution).
    pub thread_imbalance: Option<f64>,
    pub rank_imbalance: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Source<'a> {
    pub events: &'a [String],
    pub ranks: &'a [u32],
    pub processes: u32,
    pub threads: u32,
}

#[derive(Debug, Serialize)]
pub struct MetricDoc<'a> {
    pub name: &'a str,
    pub unit: &'a str,
    pub description: &'a str,
}

/// Sample accounting summed over all threads.
#[derive(Debug, Serialize)]
pub struct Stats {
    pub samples: u64,
    /// Periods the CPU-time timer's samples stood for beyond one each
    /// (`SampleStats::timer_overruns`): the metrics count `samples +
    /// timer_overruns` periods.
    pub timer_overruns: u64,
    /// Load samples (`memory_samples` of the measurement files).
    pub memory_samples: u64,
    /// Store-only samples.
    pub store_samples: u64,
    pub address_recovered: u64,
    /// address_recovered / memory_samples (0 when there were none).
    pub recovery_rate: f64,
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// The sample handler's time per sample, summed over threads
    /// (`SampleStats::handler_time`; empty for older databases).
    pub handler_time: crate::measurement::HandlerTime,
    /// The allocation hooks' time, summed over threads
    /// (`SampleStats::hook_time`; empty for older databases).
    pub hook_time: crate::measurement::HookTime,
    /// CPU time of the sampled threads (ns; `SampleStats::cpu_time_ns`).
    pub cpu_time_ns: u64,
    /// Load samples whose object was named by the intact base register
    /// (`SampleStats::recovered_base_only`), part of `address_recovered`.
    pub recovered_base_only: u64,
    /// `mem:soft`: samples that landed on an access about to page-fault
    /// (`SampleStats::about_to_fault`), part of the `landed` rule's count.
    pub about_to_fault: u64,
    /// `mem:soft`: load samples given to another load of the loop in
    /// flight with the blamed one (`SampleStats::shared_in_flight`).
    pub shared_in_flight: u64,
    /// `mem:soft`: samples by the rule that attributed them
    /// (`SampleStats::attribution`; empty for other sources and older
    /// databases).
    pub attribution: std::collections::BTreeMap<String, u64>,
    /// The measuring machine's data caches (`SampleStats::cache_bytes`).
    pub cache_bytes: crate::measurement::CacheBytes,
    /// Threads that ended before their first sample and got no file
    /// (`SampleStats::short_lived_threads`; 0 for older databases).
    pub short_lived_threads: u64,
    /// Their CPU time (ns), not part of `cpu_time_ns`
    /// (`SampleStats::short_lived_cpu_ns`).
    pub short_lived_cpu_ns: u64,
    /// The timer source's sampling period (ns; 0 for other sources and
    /// older databases; `SampleStats::timer_period_ns`).
    pub timer_period_ns: u64,
    /// What limited the measurement (`SampleStats::notices`: a refused
    /// memory, a sandbox), each with the number of threads that said so;
    /// left out when there is none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub notices: std::collections::BTreeMap<String, u64>,
    /// Small heap blocks the object map did not take, by reason
    /// (`SampleStats::untracked_blocks`); left out when there is none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub untracked_blocks: std::collections::BTreeMap<String, crate::notes::UntrackedBlocks>,
}

#[derive(Debug, Serialize)]
pub struct FrameOut<'a> {
    pub function: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    /// Without line information: the call's offset in `function`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// A heap object's allocation site: where the application asked for the
/// memory, outside allocator wrappers.
#[derive(Debug, Serialize)]
pub struct SiteOut<'a> {
    pub function: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub module: &'a str,
    /// The return address's offset in `function` (always set when line
    /// information is missing).
    pub offset: Option<u64>,
}

fn site_out(f: &Frame) -> SiteOut<'_> {
    SiteOut {
        function: &f.function,
        file: f.file.as_deref(),
        line: f.line,
        module: &f.module,
        offset: f.offset,
    }
}

#[derive(Debug, Serialize)]
pub struct ObjectOut<'a> {
    pub kind: &'static str,
    pub name: &'a str,
    /// The name the program gave the object (`hpcrun_label`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<&'a str>,
    /// Heap: the runtime that allocated it (`Open MPI`, `OpenMP runtime`,
    /// ...; `DataObject::runtime`), null for the program's own memory.
    pub runtime: Option<&'a str>,
    pub alloc_path: Vec<FrameOut<'a>>,
    /// Heap objects: where the application asked for the memory.
    pub alloc_site: Option<SiteOut<'a>>,
    /// Stack objects of one function's frames: that function, at its
    /// first line (`DataObject::frame`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame: Option<SiteOut<'a>>,
    pub bytes: u64,
    pub allocations: u64,
    /// Heap objects: what the site's blocks were like (largest block,
    /// most live at once, frees, and `small`: tracked in the small-block
    /// map); absent for other kinds and older databases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<crate::database::SiteBlocks>,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
    /// Sampled loads (the `samples` metric).
    pub reads: u64,
    /// Sampled store-only accesses (the `store_samples` metric).
    pub writes: u64,
    /// Where in the object the sampled accesses fell; absent when no
    /// access had a recovered address inside a known object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramOut>,
    /// The object's metrics in each thread that reached it.
    pub threads: Vec<ThreadOut>,
    /// The thread that first touched most of the object's sampled pages
    /// (needs the `page-faults` event).
    pub first_touch_thread: Option<String>,
    /// That thread's share of the object's first-touched pages.
    pub first_touch_share: Option<f64>,
    /// `misaligned_samples` over the object's sampled accesses (`samples`
    /// + `store_samples`); absent without that column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misaligned_share: Option<f64>,
    /// `regular` (one stride has at least 60% of the observations) or
    /// `irregular`; absent without stride observations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_pattern: Option<crate::patterns::Regularity>,
    /// The object's dominant strides over all its sites, sample-weighted,
    /// largest share first.
    pub strides: Vec<crate::patterns::StrideShare>,
    /// Access sites (sampled source lines) with their own strides.
    pub sites: Vec<crate::object_access::AccessSiteOut<'a>>,
    /// Watchpoint traps on the object (`-e sharing`): another thread
    /// touched another word of a cache line (false) or the very bytes
    /// (true) a thread had just been sampled accessing, at least one of
    /// the two a write; absent without `-e sharing`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub false_sharing_events: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_sharing_events: Option<u64>,
    /// The lines, thread pairs and code lines of those events, most
    /// events first.
    pub sharing_lines: Vec<crate::watchpoints::SharingLineOut<'a>>,
    /// How soon a watched word was touched again by the same thread
    /// (`-e reuse`), per bucket; absent without outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reuse_histogram: Option<Vec<crate::watchpoints::ReuseBucketOut>>,
}

/// An object's access histogram.
#[derive(Debug, Serialize)]
pub struct HistogramOut {
    /// "fraction": bucket bounds are fractions of the object's size;
    /// "bytes": byte offsets from its start.
    pub unit: &'static str,
    /// Number of buckets the layout has (most may be empty).
    pub buckets: u32,
    /// Non-empty buckets, by offset.
    pub counts: Vec<BucketOut>,
}

#[derive(Debug, Serialize)]
pub struct BucketOut {
    pub bucket: u32,
    pub start: f64,
    pub end: f64,
    pub count: u64,
}

/// One thread's values of an object.
#[derive(Debug, Serialize)]
pub struct ThreadOut {
    pub thread: String,
    pub rank: Option<u32>,
    pub pid: u32,
    /// 0 = main thread, then in creation order.
    pub index: u32,
    pub tid: u32,
    pub metrics: serde_json::Map<String, serde_json::Value>,
}

/// The export form of a histogram (object size `bytes` for byte layouts).
pub fn histogram_out(h: &crate::database::ObjectHistogram, bytes: u64) -> HistogramOut {
    use crate::measurement::HistogramLayout;
    match h.layout {
        HistogramLayout::Fraction(n) => HistogramOut {
            unit: "fraction",
            buckets: n,
            counts: h
                .counts
                .iter()
                .map(|&(b, count)| BucketOut {
                    bucket: b,
                    start: f64::from(b) / f64::from(n.max(1)),
                    end: f64::from(b + 1) / f64::from(n.max(1)),
                    count,
                })
                .collect(),
        },
        HistogramLayout::Bytes { size, max_buckets } => HistogramOut {
            unit: "bytes",
            buckets: h.layout.buckets(bytes).min(max_buckets),
            counts: h
                .counts
                .iter()
                .map(|&(b, count)| BucketOut {
                    bucket: b,
                    start: (u64::from(b) * size) as f64,
                    end: (u64::from(b + 1) * size) as f64,
                    count,
                })
                .collect(),
        },
    }
}

#[derive(Debug, Serialize)]
pub struct LineOut<'a> {
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct FunctionOut<'a> {
    pub function: &'a str,
    pub module: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub share: f64,
    pub lines: Vec<LineOut<'a>>,
}

fn metric_map(db: &Database, values: &[u64]) -> serde_json::Map<String, serde_json::Value> {
    db.info
        .metrics
        .iter()
        .zip(values)
        .map(|(m, &v)| (m.name.clone(), serde_json::Value::from(v)))
        .collect()
}

fn frame_out(f: &Frame) -> FrameOut<'_> {
    FrameOut {
        function: &f.function,
        file: f.file.as_deref(),
        line: f.line,
        offset: f.offset.filter(|_| f.line.is_none()),
    }
}

/// Builds the export document of `view`, keeping the first `top` rows.
pub fn build(db: &Database, view: View, top: Option<usize>) -> Export<'_> {
    build_with(db, view, top, Options::default())
}

/// [`build`] with `options` (runtime rows left out or not).
pub fn build_with(db: &Database, view: View, top: Option<usize>, options: Options) -> Export<'_> {
    let top = top.unwrap_or(usize::MAX);
    let stats = &db.info.stats;
    let mut export = Export {
        format: FORMAT,
        version: VERSION,
        view: view.as_str(),
        source: Source {
            events: &db.info.events,
            ranks: &db.info.ranks,
            processes: db.info.processes,
            threads: db.info.threads,
        },
        metric: db.primary_metric_name(),
        metrics: db
            .info
            .metrics
            .iter()
            .map(|m| MetricDoc {
                name: &m.name,
                unit: &m.unit,
                description: &m.description,
            })
            .collect(),
        stats: Stats {
            samples: stats.samples,
            timer_overruns: stats.timer_overruns,
            memory_samples: stats.memory_samples,
            store_samples: stats.store_samples,
            address_recovered: stats.address_recovered,
            recovery_rate: if stats.memory_samples == 0 {
                0.0
            } else {
                stats.address_recovered as f64 / stats.memory_samples as f64
            },
            dropped: stats.dropped.clone(),
            handler_time: stats.handler_time.clone(),
            hook_time: stats.hook_time.clone(),
            cpu_time_ns: stats.cpu_time_ns,
            recovered_base_only: stats.recovered_base_only,
            about_to_fault: stats.about_to_fault,
            shared_in_flight: stats.shared_in_flight,
            attribution: stats.attribution.clone(),
            cache_bytes: stats.cache_bytes,
            short_lived_threads: stats.short_lived_threads,
            short_lived_cpu_ns: stats.short_lived_cpu_ns,
            timer_period_ns: stats.timer_period_ns,
            notices: stats.notices.clone(),
            untracked_blocks: stats.untracked_blocks.clone(),
        },
        objects: None,
        functions: None,
        thresholds: None,
        bottleneck: None,
        distributions: None,
        losses: &db.info.losses,
    };
    match view {
        View::Data => {
            export.objects = Some(
                views::objects(db)
                    .into_iter()
                    .filter(|o| options.keeps_object(db, o.index))
                    .take(top)
                    .map(|o| {
                        let col = |name| db.metric_column(name).and_then(|c| o.metrics.get(c));
                        let first_touch = o.first_touch(db);
                        let access = crate::object_access::object_access(db, o.index, &o.metrics);
                        let obj = &db.objects[o.index as usize];
                        let (false_events, true_events) = crate::watchpoints::sharing_events(obj);
                        let sharing = crate::watchpoints::sharing_measured(db);
                        ObjectOut {
                            false_sharing_events: sharing.then_some(false_events),
                            true_sharing_events: sharing.then_some(true_events),
                            sharing_lines: crate::watchpoints::sharing_out(db, obj),
                            reuse_histogram: crate::watchpoints::reuse_out(obj),
                            misaligned_share: access.misaligned.map(|m| m.1),
                            access_pattern: access.pattern.as_ref().map(|p| p.regularity),
                            strides: access
                                .pattern
                                .as_ref()
                                .map(|p| p.strides.clone())
                                .unwrap_or_default(),
                            sites: access.sites_out(),
                            kind: o.kind.as_str(),
                            name: o.name,
                            label: o.label,
                            runtime: obj.runtime.as_deref(),
                            alloc_path: o.alloc_path.iter().map(|f| frame_out(f)).collect(),
                            alloc_site: o.alloc_site.map(site_out),
                            frame: obj.frame.map(|f| site_out(&db.frames[f as usize])),
                            bytes: o.bytes,
                            allocations: o.allocations,
                            blocks: obj.blocks,
                            metrics: metric_map(db, &o.metrics),
                            share: o.share,
                            reads: col("samples").copied().unwrap_or(0),
                            writes: col("store_samples").copied().unwrap_or(0),
                            histogram: o.histogram.map(|h| histogram_out(h, o.bytes)),
                            threads: o
                                .by_thread
                                .iter()
                                .map(|(t, values)| {
                                    let info = db.info.thread_list.get(*t as usize);
                                    ThreadOut {
                                        thread: db.thread_label(*t),
                                        rank: info.and_then(|i| i.rank),
                                        pid: info.map_or(0, |i| i.pid),
                                        index: info.map_or(0, |i| i.index),
                                        tid: info.map_or(0, |i| i.tid),
                                        metrics: metric_map(db, values),
                                    }
                                })
                                .collect(),
                            first_touch_thread: first_touch.map(|(t, _)| db.thread_label(t)),
                            first_touch_share: first_touch.map(|(_, s)| s),
                        }
                    })
                    .collect(),
            )
        }
        View::Code => {
            export.functions = Some(
                views::functions(db)
                    .into_iter()
                    .filter(|f| options.keeps_module(f.module))
                    .take(top)
                    .map(|f| FunctionOut {
                        function: f.function,
                        module: f.module,
                        file: f.file,
                        line: f.line,
                        metrics: metric_map(db, &f.metrics),
                        share: f.share,
                        lines: f
                            .lines
                            .iter()
                            .map(|l| LineOut {
                                file: l.file,
                                line: l.line,
                                metrics: metric_map(db, &l.metrics),
                                share: l.share,
                            })
                            .collect(),
                    })
                    .collect(),
            )
        }
        View::Bottleneck => {
            let t = Thresholds::default();
            export.thresholds = Some(ThresholdsOut {
                memory_boundness: "mem_time_share",
                mem_time_share: t.mem_time_share,
                share: t.share,
            });
            export.bottleneck = Some(
                views::bottleneck(db, t)
                    .into_iter()
                    .filter(|r| !(options.hide_runtime && r.runtime))
                    .take(top)
                    .enumerate()
                    .map(|(i, r)| BottleneckOut {
                        rank: i + 1,
                        region: r.region.as_str(),
                        kind: region_kind(r.region),
                        name: r.name,
                        module: r.module,
                        file: r.file,
                        line: r.line,
                        alloc_path: r.alloc_path.iter().map(|f| frame_out(f)).collect(),
                        alloc_site: r.alloc_site.map(site_out),
                        metrics: metric_map(db, &r.metrics),
                        share: r.share,
                        mem_time_share: r.mem_time_share,
                        code_cpu_samples: r.code_cpu_samples,
                        memory_bound: r.memory_bound,
                        high_share: r.high_share,
                        priority: r.quadrant.priority(),
                        advice: r.quadrant.advice(),
                    })
                    .collect(),
            )
        }
        View::Threads => {
            export.distributions = Some(
                views::distributions(db)
                    .into_iter()
                    .filter(|r| !(options.hide_runtime && r.runtime))
                    .take(top)
                    .map(|r| DistOut {
                        scope: r.scope.as_str(),
                        kind: match r.scope {
                            views::Scope::Object(k) => Some(k.as_str()),
                            _ => None,
                        },
                        name: r.name,
                        metrics: metric_map(db, &r.metrics),
                        share: r.share,
                        threads: r.threads,
                        ranks: r.ranks,
                        thread_imbalance: r.thread_imbalance(),
                        rank_imbalance: r.rank_imbalance(),
                    })
                    .collect(),
            )
        }
    }
    export
}

fn region_kind(r: views::Region) -> &'static str {
    match r {
        views::Region::Object(k) => k.as_str(),
        views::Region::Function => "code",
    }
}

/// The export as pretty JSON.
pub fn to_json(db: &Database, view: View, top: Option<usize>) -> String {
    to_json_with(db, view, top, Options::default())
}

/// [`to_json`] with `options`.
pub fn to_json_with(db: &Database, view: View, top: Option<usize>, options: Options) -> String {
    let mut s =
        serde_json::to_string_pretty(&build_with(db, view, top, options)).unwrap_or_default();
    s.push('\n');
    s
}
