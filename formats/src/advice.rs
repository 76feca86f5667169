//! Decisions from a database: which data to put into a small fast memory
//! (placement), where objects should live on a NUMA machine, and the hot
//! byte range of an object. `hpcprof-rs advise` prints them; the viewer's
//! detail pane shows an object's hot range and NUMA advice.
//!
//! Placement works on each object's offset histogram. An object allocated
//! N times from one call path is taken as N copies of its average size
//! that a range applies to alike (`--histogram` buckets of a fraction of
//! the object line up across copies), i.e. fast memory for all N at once.
//! Each object may contribute one contiguous byte range (one `mbind` or
//! one allocation from a fast-memory allocator), the whole object being
//! the widest. Choosing the ranges is a multiple-choice knapsack: for
//! every object and every width the best window of buckets, then dynamic
//! programming over the budget in 2,048 steps (exact at the histograms'
//! resolution, sizes rounded up to a step) for the 64 hottest objects.
//! The result is never worse than the simple strategies it is compared
//! with (if one of them covers more, it is taken).

use std::cmp::Ordering;

use serde::Serialize;

use crate::database::{DataObject, Database, ObjectKind};
use crate::views;

/// Histograms with more buckets than this are read in groups of adjacent
/// buckets (the window search is quadratic in the bucket count, and the
/// knapsack linear in the choices).
const MAX_BUCKETS: usize = 256;

/// One range placed in fast memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    /// Index of the object in the database's object list.
    pub object: u32,
    pub name: String,
    /// Allocation site (`function file:line`), heap objects only.
    pub site: Option<String>,
    /// Byte range `[offset, offset + range_bytes)` inside each allocation.
    pub offset: u64,
    pub range_bytes: u64,
    /// Fast memory used: `range_bytes` times the allocations of the path.
    pub bytes: u64,
    /// The whole object.
    pub whole: bool,
    /// Samples (primary metric) that fall into the range, estimated from
    /// the object's offset histogram.
    pub samples: f64,
    /// `samples` over all data-centric samples of the run.
    pub share: f64,
}

/// A set of placements and what it covers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Strategy {
    pub name: &'static str,
    pub placements: Vec<Placement>,
    pub bytes: u64,
    pub share: f64,
}

/// An object whose histogram is coarser than the placement granularity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coarse {
    pub object: u32,
    pub name: String,
    /// Bytes of one histogram bucket of this object.
    pub bucket_bytes: u64,
}

/// The answer of `advise --fast-mem`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacementAdvice {
    pub fast_mem: u64,
    pub granularity: u64,
    /// Data-centric samples of the run (the shares' denominator).
    pub total_samples: u64,
    /// The advised placement.
    pub advised: Strategy,
    /// The simple strategies, for comparison.
    pub strategies: Vec<Strategy>,
    /// Objects among the advised ones whose histogram buckets are wider
    /// than the granularity: their ranges are only that precise.
    pub coarse: Vec<Coarse>,
}

/// An object as placement sees it.
struct Candidate {
    object: u32,
    name: String,
    site: Option<String>,
    /// Average bytes of one allocation.
    unit: u64,
    copies: u64,
    /// Contiguous buckets covering `[0, unit)`: (start, end, samples).
    buckets: Vec<(u64, u64, f64)>,
    bucket_bytes: u64,
}

impl Candidate {
    fn total(&self) -> f64 {
        self.buckets.iter().map(|b| b.2).sum()
    }

    /// Fast memory for buckets `i..=j`, rounded out to `g`.
    fn bytes(&self, i: usize, j: usize, g: u64) -> (u64, u64) {
        let start = self.buckets[i].0 / g * g;
        let end = self.buckets[j].1.div_ceil(g) * g;
        (start, (end - start).saturating_mul(self.copies))
    }

    fn placement(&self, i: usize, j: usize, g: u64, total: u64) -> Placement {
        let (offset, bytes) = self.bytes(i, j, g);
        let samples: f64 = self.buckets[i..=j].iter().map(|b| b.2).sum();
        Placement {
            object: self.object,
            name: self.name.clone(),
            site: self.site.clone(),
            offset,
            range_bytes: bytes / self.copies,
            bytes,
            whole: i == 0 && j + 1 == self.buckets.len(),
            samples,
            share: share(samples, total),
        }
    }
}

pub use crate::notes::bytes_text;

fn share(samples: f64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        samples / total as f64
    }
}

/// Heap and static objects with samples and a size, with their buckets;
/// not the memory of MPI libraries and OpenMP runtimes (the program does
/// not allocate it: an OpenMP barrier or an MPI queue is not the
/// program's to place). Shares stay shares of all objects' samples.
fn candidates(db: &Database) -> (Vec<Candidate>, u64) {
    let primary = db.info.primary_metric as usize;
    let rows = views::objects(db);
    let total: u64 = rows.iter().map(|r| r.metrics[primary]).sum();
    let mut out = Vec::new();
    for row in rows {
        let samples = row.metrics[primary] as f64;
        let placeable = matches!(row.kind, ObjectKind::Heap | ObjectKind::Static)
            && db.objects[row.index as usize].runtime.is_none();
        if !placeable || row.bytes == 0 || samples == 0.0 {
            continue;
        }
        let copies = row.allocations.max(1);
        let unit = (row.bytes / copies).max(1);
        let mut buckets: Vec<(u64, u64, f64)> = match row.histogram {
            Some(h) => {
                let n = h.layout.buckets(unit);
                let hist_total: u64 = h.counts.iter().map(|c| c.1).sum();
                let mut b: Vec<(u64, u64, f64)> = (0..n)
                    .map(|i| {
                        let (s, e) = h.layout.range(i, unit);
                        (s, e, 0.0)
                    })
                    .collect();
                for &(i, c) in &h.counts {
                    if let Some(slot) = b.get_mut(i as usize) {
                        slot.2 = samples * c as f64 / hist_total.max(1) as f64;
                    }
                }
                b.retain(|x| x.1 > x.0);
                b
            }
            None => vec![(0, unit, samples)],
        };
        if buckets.is_empty() {
            buckets.push((0, unit, samples));
        }
        if buckets.len() > MAX_BUCKETS {
            let group = buckets.len().div_ceil(MAX_BUCKETS);
            buckets = buckets
                .chunks(group)
                .map(|c| (c[0].0, c[c.len() - 1].1, c.iter().map(|x| x.2).sum()))
                .collect();
        }
        let bucket_bytes = buckets.iter().map(|b| b.1 - b.0).max().unwrap_or(unit);
        out.push(Candidate {
            object: row.index,
            name: row.name.to_string(),
            site: row.alloc_site.map(|f| f.site_text()),
            unit,
            copies,
            buckets,
            bucket_bytes,
        });
    }
    (out, total)
}

/// One choice for an object: buckets `i..=j` (or nothing).
#[derive(Debug, Clone, Copy)]
struct Choice {
    bytes: u64,
    samples: f64,
    range: Option<(usize, usize)>,
}

const NOTHING: Choice = Choice {
    bytes: 0,
    samples: 0.0,
    range: None,
};

/// For every width, the best window of buckets of `c` (by samples; the
/// cheaper on ties), then only those that are not dominated.
fn choices(c: &Candidate, g: u64) -> Vec<Choice> {
    let n = c.buckets.len();
    let mut prefix = vec![0.0; n + 1];
    for (i, b) in c.buckets.iter().enumerate() {
        prefix[i + 1] = prefix[i] + b.2;
    }
    let mut all = vec![NOTHING];
    for k in 1..=n {
        let mut best: Option<Choice> = None;
        for i in 0..=n - k {
            let j = i + k - 1;
            let samples = prefix[j + 1] - prefix[i];
            let bytes = c.bytes(i, j, g).1;
            let better = match best {
                None => true,
                Some(b) => samples > b.samples || (samples == b.samples && bytes < b.bytes),
            };
            if better {
                best = Some(Choice {
                    bytes,
                    samples,
                    range: Some((i, j)),
                });
            }
        }
        all.extend(best);
    }
    all.sort_by(|a, b| a.bytes.cmp(&b.bytes).then(cmp_f64(b.samples, a.samples)));
    let mut kept: Vec<Choice> = Vec::new();
    for ch in all {
        if kept.last().map_or(true, |k| ch.samples > k.samples) {
            kept.push(ch);
        }
    }
    kept
}

fn cmp_f64(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Budget steps of the knapsack: choice sizes are rounded up to
/// `budget / STEPS` (never over the budget).
const STEPS: u64 = 2048;

/// Objects the knapsack weighs, hottest first (the rest are too cold to
/// matter next to them).
const MAX_CANDIDATES: usize = 64;

/// The best choice per candidate within `budget` bytes: a multiple-choice
/// knapsack solved exactly by dynamic programming over the budget in
/// `STEPS` steps.
fn knapsack(all: &[Vec<Choice>], budget: u64) -> Vec<Choice> {
    let step = budget.div_ceil(STEPS).max(1);
    let cap = (budget / step) as usize;
    let units = |c: &Choice| c.bytes.div_ceil(step) as usize;
    let mut best = vec![0.0f64; cap + 1];
    // pick[c][w]: the choice of candidate c in the best solution of
    // capacity w over candidates 0..=c.
    let mut pick: Vec<Vec<u16>> = Vec::with_capacity(all.len());
    for options in all {
        let mut next = best.clone();
        let mut chosen = vec![0u16; cap + 1];
        for (k, o) in options.iter().enumerate().skip(1) {
            let u = units(o);
            if u > cap {
                continue;
            }
            for w in u..=cap {
                let v = best[w - u] + o.samples;
                if v > next[w] + 1e-9 {
                    next[w] = v;
                    chosen[w] = k as u16;
                }
            }
        }
        best = next;
        pick.push(chosen);
    }
    let mut out = vec![NOTHING; all.len()];
    let mut w = cap;
    for c in (0..all.len()).rev() {
        let k = pick[c][w] as usize;
        if k > 0 {
            out[c] = all[c][k];
            w -= units(&out[c]);
        }
    }
    out
}

fn strategy(name: &'static str, placements: Vec<Placement>) -> Strategy {
    Strategy {
        name,
        bytes: placements.iter().map(|p| p.bytes).sum(),
        // (+ 0.0: an empty f64 sum is -0.0.)
        share: placements.iter().map(|p| p.share).sum::<f64>() + 0.0,
        placements,
    }
}

/// Whole objects in `order` while they fit.
fn whole_first(
    name: &'static str,
    cands: &[Candidate],
    order: &[usize],
    budget: u64,
    g: u64,
    total: u64,
) -> Strategy {
    let mut used = 0;
    let mut placements = Vec::new();
    for &i in order {
        let c = &cands[i];
        let p = c.placement(0, c.buckets.len() - 1, g, total);
        if used + p.bytes <= budget {
            used += p.bytes;
            placements.push(p);
        }
    }
    strategy(name, placements)
}

/// Where `SIZE` bytes of fast memory cover the most samples, next to the
/// simple strategies (largest objects first, hottest objects whole, the
/// end of the hottest object). `granularity` rounds ranges out (4096 for
/// pages).
pub fn place(db: &Database, fast_mem: u64, granularity: u64) -> PlacementAdvice {
    let g = granularity.max(1);
    let (mut cands, total) = candidates(db);
    cands.sort_by(|a, b| cmp_f64(b.total(), a.total()));
    cands.truncate(MAX_CANDIDATES);
    let all: Vec<Vec<Choice>> = cands.iter().map(|c| choices(c, g)).collect();
    let chosen = knapsack(&all, fast_mem);
    let mut placements: Vec<Placement> = cands
        .iter()
        .zip(&chosen)
        .filter_map(|(c, ch)| {
            let (i, j) = ch.range?;
            Some(c.placement(i, j, g, total))
        })
        .collect();
    placements.sort_by(|a, b| cmp_f64(b.samples, a.samples));
    let mut advised = strategy("advised", placements);

    let mut by_size: Vec<usize> = (0..cands.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(cands[i].unit * cands[i].copies));
    let mut by_heat: Vec<usize> = (0..cands.len()).collect();
    by_heat.sort_by(|&a, &b| cmp_f64(cands[b].total(), cands[a].total()));
    let mut strategies = vec![
        whole_first(
            "largest objects first",
            &cands,
            &by_size,
            fast_mem,
            g,
            total,
        ),
        whole_first(
            "hottest objects whole",
            &cands,
            &by_heat,
            fast_mem,
            g,
            total,
        ),
    ];
    // The end of the hottest object: its last buckets that fit.
    let mut tail = Vec::new();
    if let Some(&h) = by_heat.first() {
        let c = &cands[h];
        let last = c.buckets.len() - 1;
        if let Some(i) = (0..=last).find(|&i| c.bytes(i, last, g).1 <= fast_mem) {
            tail.push(c.placement(i, last, g, total));
        }
    }
    strategies.push(strategy("end of the hottest object", tail));

    if let Some(better) = strategies.iter().find(|s| s.share > advised.share + 1e-12) {
        advised = Strategy {
            name: "advised",
            ..better.clone()
        };
    }
    let coarse = advised
        .placements
        .iter()
        .filter_map(|p| {
            let c = cands.iter().find(|c| c.object == p.object)?;
            (!p.whole && c.bucket_bytes > g).then(|| Coarse {
                object: c.object,
                name: c.name.clone(),
                bucket_bytes: c.bucket_bytes,
            })
        })
        .collect();
    PlacementAdvice {
        fast_mem,
        granularity: g,
        total_samples: total,
        advised,
        strategies,
        coarse,
    }
}

/// The smallest contiguous byte range of one allocation of `obj` that
/// holds at least `fraction` of its histogram's accesses: `(start, end,
/// share held)`; `None` without a histogram.
pub fn hot_range(obj: &DataObject, fraction: f64) -> Option<(u64, u64, f64)> {
    let h = obj.histogram.as_ref()?;
    let unit = (obj.bytes / obj.allocations.max(1)).max(1);
    let n = h.layout.buckets(unit) as usize;
    let mut counts = vec![0u64; n];
    for &(b, c) in &h.counts {
        if let Some(slot) = counts.get_mut(b as usize) {
            *slot += c;
        }
    }
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let need = (fraction * total as f64).ceil() as u64;
    // Two pointers: for each end, the latest start that still holds `need`.
    let mut best: Option<(usize, usize, u64)> = None;
    let (mut start, mut sum) = (0usize, 0u64);
    for end in 0..n {
        sum += counts[end];
        while start < end && sum - counts[start] >= need {
            sum -= counts[start];
            start += 1;
        }
        if sum >= need && best.map_or(true, |(s, e, _)| end - start < e - s) {
            best = Some((start, end, sum));
        }
    }
    let (s, e, held) = best?;
    let range = |i: usize| h.layout.range(i as u32, unit);
    Some((range(s).0, range(e).1, held as f64 / total as f64))
}

/// What to do about an object's NUMA placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NumaAction {
    /// First touched by one thread, used by others, each thread in its own
    /// part: initialise it in parallel with the compute loops' schedule.
    InitialiseInParallel,
    /// First touched by one thread, used by all threads all over:
    /// interleave its pages across the nodes.
    Interleave,
}

impl NumaAction {
    pub fn advice(self) -> &'static str {
        match self {
            NumaAction::InitialiseInParallel => {
                "initialise in parallel: first-touch it with the same threads and schedule as the loops that use it"
            }
            NumaAction::Interleave => {
                "interleave its pages across NUMA nodes (numactl --interleave=all, or mbind MPOL_INTERLEAVE on it)"
            }
        }
    }
}

/// A NUMA finding with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumaFinding {
    pub object: u32,
    pub name: String,
    pub action: NumaAction,
    /// The thread that first touched most sampled pages, and its share.
    pub first_touch_thread: String,
    pub first_touch_share: f64,
    /// Share of the object's sampled accesses (loads and, where recorded,
    /// stores) made by other threads.
    pub accessed_by_others: f64,
    /// Threads with sampled accesses of the object.
    pub threads: u32,
    /// Per-thread shares of the object's accesses (thread, share), largest
    /// first.
    pub thread_shares: Vec<(String, f64)>,
    /// How much each part of the object belongs to one thread: the sum over
    /// histogram buckets of the largest thread's accesses, over all
    /// accesses (1.0: every part is used by one thread only).
    pub ownership: Option<f64>,
    /// `numa_local` and `numa_remote` of the object where measured.
    pub numa_local: Option<u64>,
    pub numa_remote: Option<u64>,
}

/// First touch by one thread of at least this share of the pages...
const ONE_TOUCHER: f64 = 0.9;
/// ...while other threads make at least this share of the accesses.
const OTHERS_USE: f64 = 0.25;
/// Parts owned by one thread: initialise in parallel; below: interleave.
const OWNED: f64 = 0.75;
/// An object with fewer sampled accesses gets no NUMA advice: which
/// threads use it is not known well enough (with 9 samples, "a quarter
/// by other threads" is 2 samples).
pub const MIN_NUMA_ACCESSES: u64 = 20;

/// NUMA advice for every object that needs some (and has the evidence:
/// [`MIN_NUMA_ACCESSES`], not a runtime's memory), hottest first.
pub fn numa(db: &Database) -> Vec<NumaFinding> {
    let Some(ft_col) = db.metric_column("first_touch") else {
        return Vec::new();
    };
    // Accesses: the primary metric plus sampled stores where recorded
    // (which of load or store a timer sample lands after depends on the
    // core; both are accesses that place and use pages).
    let mut access_cols = vec![db.info.primary_metric as usize];
    access_cols.extend(db.metric_column("store_samples"));
    let col = |name: &str, row: &views::ObjectRow| db.metric_column(name).map(|c| row.metrics[c]);
    let mut out = Vec::new();
    for row in views::objects(db) {
        let obj = &db.objects[row.index as usize];
        let Some((toucher, ft_share)) = obj.top_thread(ft_col) else {
            continue;
        };
        let accesses = |v: &Vec<u64>| -> u64 {
            access_cols
                .iter()
                .map(|&c| v.get(c).copied().unwrap_or(0))
                .sum()
        };
        let total: u64 = obj.by_thread.iter().map(|(_, v)| accesses(v)).sum();
        let users = obj
            .by_thread
            .iter()
            .filter(|(_, v)| accesses(v) > 0)
            .count();
        // A runtime's memory (an MPI segment, an OpenMP team) is not the
        // program's to place.
        if total < MIN_NUMA_ACCESSES || users < 2 || ft_share < ONE_TOUCHER || obj.runtime.is_some()
        {
            continue;
        }
        let mine: u64 = access_cols
            .iter()
            .map(|&c| obj.thread_value(toucher, c))
            .sum();
        let others = (total - mine) as f64 / total as f64;
        if others < OTHERS_USE {
            continue;
        }
        let ownership = ownership(obj);
        let action = match ownership {
            Some(o) if o < OWNED => NumaAction::Interleave,
            _ => NumaAction::InitialiseInParallel,
        };
        let mut thread_shares: Vec<(String, f64)> = obj
            .by_thread
            .iter()
            .filter(|(_, v)| accesses(v) > 0)
            .map(|(t, v)| (db.thread_label(*t), accesses(v) as f64 / total as f64))
            .collect();
        thread_shares.sort_by(|a, b| cmp_f64(b.1, a.1));
        out.push(NumaFinding {
            object: row.index,
            name: obj.name.clone(),
            action,
            first_touch_thread: db.thread_label(toucher),
            first_touch_share: ft_share,
            accessed_by_others: others,
            threads: users as u32,
            thread_shares,
            ownership,
            numa_local: col("numa_local", &row),
            numa_remote: col("numa_remote", &row),
        });
    }
    out
}

/// Σ over buckets of the largest thread's count, over all counts.
pub fn ownership(obj: &DataObject) -> Option<f64> {
    if obj.histogram_by_thread.len() < 2 {
        return None;
    }
    let mut per_bucket: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
    for (_, counts) in &obj.histogram_by_thread {
        for &(b, c) in counts {
            let e = per_bucket.entry(b).or_default();
            e.0 = e.0.max(c);
            e.1 += c;
        }
    }
    let (top, all) = per_bucket
        .values()
        .fold((0u64, 0u64), |(t, a), &(m, s)| (t + m, a + s));
    (all > 0).then(|| top as f64 / all as f64)
}

/// Parses `32MiB`, `1G`, `4096`, `1.5GB`: K/M/G/T and KiB/MiB/GiB/TiB are
/// powers of 1024, KB/MB/GB/TB powers of 1000, a bare number is bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size: give e.g. 32MiB, 1G or 4096"))?;
    let unit = unit.trim();
    let scale: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use B, KiB, MiB, GiB, TiB, K, M, G, KB, MB, GB)"
            ))
        }
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(format!("{text:?}: give a size of at least 1 byte"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::{NodeKind, ObjectHistogram, Tree, TreeNode};
    use crate::measurement::{HistogramLayout, MetricInfo};

    /// A database of objects `(name, bytes, samples, histogram counts)`.
    fn db(objects: &[(&str, u64, u64, Vec<u64>)]) -> Database {
        let mut d = Database::default();
        d.info.metrics = vec![MetricInfo {
            name: "samples".into(),
            unit: "samples".into(),
            description: String::new(),
        }];
        let node = |kind, parent, v: u64| TreeNode {
            parent,
            kind,
            exclusive: vec![v],
            threads: None,
            ranks: None,
            by_rank: Vec::new(),
        };
        d.data = Tree {
            nodes: vec![node(NodeKind::Root("data".into()), u32::MAX, 0)],
        };
        for (i, (name, bytes, samples, hist)) in objects.iter().enumerate() {
            d.data
                .nodes
                .push(node(NodeKind::Object(i as u32), 0, *samples));
            d.objects.push(DataObject {
                kind: ObjectKind::Heap,
                name: name.to_string(),
                bytes: *bytes,
                allocations: 1,
                node: i as u32 + 1,
                histogram: (!hist.is_empty()).then(|| ObjectHistogram {
                    layout: HistogramLayout::Fraction(hist.len() as u32),
                    counts: hist
                        .iter()
                        .enumerate()
                        .map(|(b, &c)| (b as u32, c))
                        .collect(),
                }),
                ..Default::default()
            });
        }
        d
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_runtimes_memory_is_never_placed() {
        let mut d = db(&[
            ("OpenMP runtime: libgomp.so.1+0xd138", 4096, 3000, vec![]),
            ("field", 64 * MIB, 1000, vec![10; 8]),
        ]);
        d.objects[0].runtime = Some("OpenMP runtime".into());
        let a = place(&d, 64 * MIB, 4096);
        let names: Vec<&str> = a
            .advised
            .placements
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["field"], "{a:#?}");
        // field whole: 1000 of all 4000 samples.
        assert!((a.advised.share - 0.25).abs() < 1e-9, "{a:#?}");
        for s in &a.strategies {
            assert!(s.placements.iter().all(|p| p.name == "field"), "{s:#?}");
        }
    }

    #[test]
    fn the_head_of_a_skewed_table_and_most_of_a_uniform_one() {
        // skewed: 8 buckets of 8 MiB, 70% of its samples in the first;
        // uniform: 8 buckets evenly. 64 MiB of fast memory.
        let skewed: Vec<u64> = std::iter::once(70).chain([5u64; 6]).chain([0]).collect();
        let d = db(&[
            ("skewed", 64 * MIB, 1000, skewed),
            ("uniform", 64 * MIB, 1000, vec![10; 8]),
        ]);
        let a = place(&d, 64 * MIB, 4096);
        assert!(a.advised.bytes <= 64 * MIB);
        let names: Vec<&str> = a
            .advised
            .placements
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["uniform", "skewed"], "{a:#?}");
        let head = &a.advised.placements[1];
        assert_eq!((head.offset, head.range_bytes), (0, 8 * MIB));
        assert_eq!(a.advised.placements[0].range_bytes, 56 * MIB);
        // 700 + 7/8 of 1000 = 1575 of 2000.
        assert!((a.advised.share - 0.7875).abs() < 1e-9, "{a:#?}");
        for s in &a.strategies {
            assert!(s.share <= 0.5 + 1e-9, "{s:#?}");
        }
        assert!(a.coarse.is_empty() || a.coarse.iter().all(|c| c.bucket_bytes == 8 * MIB));
    }

    #[test]
    fn never_worse_than_a_simple_strategy_and_within_budget() {
        let d = db(&[
            ("a", 10 * MIB, 300, vec![1, 1, 1, 1]),
            ("b", 6 * MIB, 200, Vec::new()),
            ("c", 5 * MIB, 250, vec![9, 1]),
        ]);
        for budget in [MIB, 5 * MIB, 11 * MIB, 16 * MIB, 40 * MIB] {
            let a = place(&d, budget, 4096);
            assert!(a.advised.bytes <= budget, "{a:#?}");
            for s in &a.strategies {
                assert!(s.bytes <= budget, "{s:#?}");
                assert!(a.advised.share + 1e-12 >= s.share, "{budget}: {a:#?}");
            }
        }
        // Everything fits: everything is placed whole.
        let a = place(&d, 40 * MIB, 4096);
        assert!(a.advised.placements.iter().all(|p| p.whole));
        assert!((a.advised.share - 1.0).abs() < 1e-9);
    }

    #[test]
    fn hot_range_is_the_smallest_window_holding_the_fraction() {
        let d = db(&[("t", 32 * MIB, 100, vec![0, 50, 40, 5, 5, 0, 0, 0])]);
        let (s, e, held) = hot_range(&d.objects[0], 0.9).unwrap();
        assert_eq!((s, e), (4 * MIB, 12 * MIB));
        assert!((held - 0.9).abs() < 1e-9);
        assert!(hot_range(&db(&[("x", 8, 1, Vec::new())]).objects[0], 0.9).is_none());
    }

    #[test]
    fn ownership_tells_private_parts_from_shared_ones() {
        let mut d = db(&[("f", 8 * MIB, 100, vec![10; 4])]);
        d.objects[0].histogram_by_thread =
            vec![(0, vec![(0, 10), (1, 10)]), (1, vec![(2, 10), (3, 10)])];
        assert_eq!(ownership(&d.objects[0]), Some(1.0));
        d.objects[0].histogram_by_thread = vec![
            (0, vec![(0, 5), (1, 5), (2, 5), (3, 5)]),
            (1, vec![(0, 5), (1, 5), (2, 5), (3, 5)]),
        ];
        assert_eq!(ownership(&d.objects[0]), Some(0.5));
    }
}
