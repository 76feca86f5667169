//! Access-pattern findings: how each object was accessed, in plain words
//! (the detail pane's lines), and the strongest findings across objects
//! with one line of advice each (`--report`'s "Findings" section):
//! misalignment, strides, and from the watchpoints false and true sharing
//! and streamed (not reused) data. A finding needs evidence: an object of
//! at least [`MIN_OBJECT_SHARE`] and [`MIN_OBJECT_SAMPLES`] sampled
//! accesses, not a runtime's memory nor a `<...>` bucket; a misalignment finding also
//! [`MIN_MISALIGNED_SAMPLES`] and an element type that is not naturally
//! aligned. Each says what it rests on ([`Finding::evidence`]); objects of
//! one name and site reached by several call paths give one finding.
//!
//! ```
//! use hpcview_tui::findings;
//! let db = hpcview_tui::fixtures::abc();
//! // The fixture has no access patterns: nothing to report.
//! assert!(findings::strongest(&db, 10).is_empty());
//! ```

use formats::database::Database;
use formats::object_access;
use formats::patterns::{Pattern, Regularity, StrideShare, StrideSource};
use formats::watchpoints;

/// Objects with a smaller share of the primary metric get no finding.
pub const MIN_OBJECT_SHARE: f64 = 0.01;
/// Misaligned accesses below this share of an object's accesses are no
/// finding.
pub const MIN_MISALIGNED_SHARE: f64 = 0.01;
/// A regular stride at least this large touches a new cache line at
/// every access.
pub const LARGE_STRIDE: u64 = 64;
/// Share of data-dependent samples that makes an irregular finding.
pub const MIN_DATA_DEPENDENT: f64 = 0.5;
/// An object with fewer sampled accesses gets no access-pattern finding:
/// its shares are too uncertain (at 30 samples a 20% share is 20 +- 14
/// points at 95%).
pub const MIN_OBJECT_SAMPLES: u64 = 30;
/// Fewer misaligned samples than this are no misalignment finding.
pub const MIN_MISALIGNED_SAMPLES: u64 = 5;
/// A site with at least this many blocks live at once, each under
/// [`SCATTERED_BLOCK_BYTES`] on average, is many small blocks read
/// together (a scattered-blocks finding).
pub const MIN_SCATTERED_BLOCKS: u64 = 1000;
/// See [`MIN_SCATTERED_BLOCKS`]: a block of a page or more is its own
/// stream for the prefetcher.
pub const SCATTERED_BLOCK_BYTES: u64 = 4096;

/// What kind of pattern a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Misaligned,
    LargeStride,
    Irregular,
    FalseSharing,
    TrueSharing,
    Streamed,
    ScatteredBlocks,
}

impl Kind {
    /// One line of advice.
    pub fn advice(self) -> &'static str {
        match self {
            Kind::Misaligned => {
                "align it so no element spans two cache lines: natural alignment (no `packed`), reorder or pad record fields"
            }
            Kind::LargeStride => {
                "walk it contiguously: interchange the loops, transpose the array, or block the loop nest"
            }
            Kind::Irregular => {
                "the address comes from memory (x[idx[i]], p->next): unless the indices are already sorted, renumber the data or sort the index list so consecutive iterations touch nearby lines; allocate linked nodes in traversal order; or prefetch a few iterations ahead"
            }
            Kind::FalseSharing => {
                "threads write different words of one cache line: pad or align each thread's part to 64 bytes (alignas(64)), or accumulate in a thread-local variable and write once"
            }
            Kind::TrueSharing => {
                "threads update the same data: give each thread its own copy and combine once (a reduction), or batch the updates"
            }
            Kind::Streamed => {
                "its words are not touched again while still in cache: fuse the loops that read it, or block them so each piece is reused before it is evicted"
            }
            Kind::ScatteredBlocks => {
                "allocate them contiguously: one array with offsets (CSR rows instead of a block per row), a pool or an arena for nodes, so that the prefetcher streams them and a page holds many of them"
            }
        }
    }
}

/// One finding about one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Index into `Database::objects`.
    pub object: u32,
    pub kind: Kind,
    /// The plain line ("misaligned: 12% of sampled accesses span two
    /// cache lines").
    pub text: String,
    /// Object share x pattern share: the ordering of `--report`.
    pub strength: f64,
    /// What the finding rests on: "1234 sampled accesses of the object
    /// (12.3% of all)" and, for a pattern, its own count.
    pub evidence: String,
}

/// Sampled accesses (loads and stores) in `metrics`.
fn accesses(db: &Database, metrics: &[u64]) -> u64 {
    let col = |name: &str| {
        db.metric_column(name)
            .and_then(|c| metrics.get(c).copied())
            .unwrap_or(0)
    };
    col("samples") + col("store_samples")
}

/// True when the misaligned samples of object `index` (inclusive
/// `metrics`) are explained by naturally aligned elements read by wider
/// accesses, not by the layout: the object's element size (the one the
/// decoder knew at the sites with the most samples) is a power of two of
/// at most 16 bytes, the strides and address deltas at every site are
/// multiples of it (a `double` array, LAMMPS's `double[3]` coordinates),
/// and the sampled accesses are wider than one element on average
/// (`access_bytes`: vectors of doubles; then an access spanning two lines
/// is a vector meeting a line border). Sites of single bytes are left out
/// (a byte never spans two lines; LAMMPS hashes the bytes of a
/// coordinate). False without a known element size; without the
/// `access_bytes` column the width is not checked.
fn naturally_aligned(db: &Database, index: u32, metrics: &[u64]) -> bool {
    let Some(obj) = db.objects.get(index as usize) else {
        return false;
    };
    let sites: Vec<_> = obj
        .sites
        .iter()
        .map(|s| &s.counts)
        .filter(|c| c.samples > 0 && c.element_bytes != 1)
        .collect();
    // The element size with the most samples (sites without a decoder
    // stride often do not know it); ties: the larger.
    let mut by_size = std::collections::BTreeMap::<u32, u64>::new();
    for c in sites.iter().filter(|c| c.element_bytes > 0) {
        *by_size.entry(c.element_bytes).or_default() += c.samples;
    }
    let Some(e) = by_size
        .iter()
        .max_by_key(|&(&e, &n)| (n, e))
        .map(|(&e, _)| e)
    else {
        return false;
    };
    if e > 16 || !e.is_power_of_two() {
        return false;
    }
    let whole = sites.iter().all(|c| {
        c.strides.iter().all(|&(b, _)| b % i64::from(e) == 0)
            && (c.delta_gcd == 0 || c.delta_gcd % u64::from(e) == 0)
    });
    // Scalar accesses of aligned elements never span two lines: if every
    // sampled access was one element wide, the block itself is off.
    let wider = match db.metric_column("access_bytes") {
        Some(col) => {
            let bytes = metrics.get(col).copied().unwrap_or(0);
            bytes > u64::from(e) * accesses(db, metrics)
        }
        None => true,
    };
    whole && wider
}

/// 95% Wilson interval of a share of `k` in `n`.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.96f64);
    let p = k / n;
    let centre = p + z * z / (2.0 * n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    let d = 1.0 + z * z / n;
    (
        ((centre - half) / d).max(0.0),
        ((centre + half) / d).min(1.0),
    )
}

/// "lulesh.cc:2039 (CalcPressureForElems)", or the function alone.
pub fn site_text(f: &formats::database::Frame) -> String {
    let function = f.function.split('(').next().unwrap_or(&f.function);
    match (&f.file, f.line) {
        (Some(file), Some(l)) => format!(
            "{}:{l} ({function})",
            file.rsplit('/').next().unwrap_or(file)
        ),
        _ => function.to_string(),
    }
}

/// "320000 bytes (40000 elements of 8 bytes)".
fn stride_words(s: &StrideShare) -> String {
    match s.elements.filter(|&e| e != 0) {
        Some(e) => {
            let size = s.bytes / e;
            let what = if e.abs() == 1 { "element" } else { "elements" };
            format!("{} bytes ({e} {what} of {size} bytes)", s.bytes)
        }
        None => format!("{} bytes", s.bytes),
    }
}

fn pct1(share: f64) -> String {
    format!("{:.1}%", 100.0 * share)
}

fn pct(share: f64) -> String {
    if share > 0.0 && share < 0.01 {
        "<1%".to_string()
    } else {
        format!("{:.0}%", 100.0 * share)
    }
}

/// The stride line of a pattern.
fn stride_line(p: &Pattern) -> String {
    let from = match p.source {
        StrideSource::Decoder => "",
        StrideSource::Samples => ", from sampled address deltas only",
    };
    match (p.regularity, p.strides.first()) {
        (Regularity::Regular, Some(s)) => format!(
            "stride: {}, regular ({} of {} sampled accesses{from})",
            stride_words(s),
            pct(s.share),
            p.observations
        ),
        _ if p.data_dependent >= MIN_DATA_DEPENDENT => format!(
            "stride: irregular, {} of the sampled addresses depend on loaded data (indirection, pointer chase)",
            pct(p.data_dependent)
        ),
        (_, Some(s)) => format!(
            "stride: irregular, no stride has 60% (top: {} at {}{from})",
            stride_words(s),
            pct(s.share)
        ),
        (_, None) => format!("stride: irregular, no stride has 60%{from}"),
    }
}

/// The detail pane's lines about object `index`, whose inclusive metrics
/// are `metrics`: misalignment and stride, or why they are missing.
pub fn lines(db: &Database, index: u32, metrics: &[u64]) -> Vec<String> {
    let access = object_access::object_access(db, index, metrics);
    let mut out = Vec::new();
    match access.misaligned {
        Some((0, _)) => out.push("misaligned: no sampled access spans two cache lines".into()),
        Some((_, share)) => out.push(format!(
            "misaligned: {} of sampled accesses span two cache lines",
            pct(share)
        )),
        None if db.metric_column("misaligned_samples").is_some() => {}
        None => out.push("misaligned: not measured".into()),
    }
    match &access.pattern {
        Some(p) => out.push(stride_line(p)),
        None => out.push("stride: not measured".into()),
    }
    // Sites with another stride than the object's dominant one.
    let dominant = access
        .pattern
        .as_ref()
        .and_then(|p| p.strides.first())
        .map(|s| s.bytes);
    for (frame, counts, p) in access.sites.iter().take(4) {
        let Some(p) = p else { continue };
        let first = p.strides.first().map(|s| s.bytes);
        if access.sites.len() > 1 && first != dominant {
            let at = match (&frame.file, frame.line) {
                (Some(f), Some(l)) => format!("{}:{l}", f.rsplit('/').next().unwrap_or(f)),
                _ => frame.function.clone(),
            };
            out.push(format!(
                "  at {at} ({} samples): {}",
                counts.samples,
                stride_line(p)
            ));
        }
    }
    if let Some(obj) = db.objects.get(index as usize) {
        out.extend(watchpoints::lines(db, obj, 3));
        if watchpoints::sharing_measured(db) && obj.sharing.is_empty() {
            out.push("sharing: no watchpoint event".into());
        }
    }
    out
}

/// The sharing and reuse findings of object `index` (watchpoints). A
/// sharing finding's strength is the object's share times its events per
/// sampled access (at most 1): a few events at the borders of threads'
/// chunks of a big array weigh little, a line that threads fight over
/// weighs as much as the object.
fn watch_findings(
    db: &Database,
    index: u32,
    metrics: &[u64],
    share: f64,
    evidence: &str,
    out: &mut Vec<Finding>,
) {
    let Some(obj) = db.objects.get(index as usize) else {
        return;
    };
    let col = |name: &str| {
        db.metric_column(name)
            .and_then(|c| metrics.get(c).copied())
            .unwrap_or(0)
    };
    let accesses = (col("samples") + col("store_samples")).max(1);
    let (false_events, true_events) = watchpoints::sharing_events(obj);
    for (events, kind, is_true) in [
        (false_events, Kind::FalseSharing, false),
        (true_events, Kind::TrueSharing, true),
    ] {
        if events < watchpoints::MIN_SHARING_EVENTS {
            continue;
        }
        let top = obj.sharing.iter().find(|l| l.true_sharing == is_true);
        let between = top.map_or(String::new(), |l| {
            format!(
                " ({} and {} on line +{})",
                db.thread_label(l.thread),
                watchpoints::other_thread_label(db, l),
                l.line_offset
            )
        });
        let name = if is_true { "true" } else { "false" };
        out.push(Finding {
            object: index,
            kind,
            text: format!("{name} sharing: {events} watchpoint events{between}"),
            strength: share * (events as f64 / accesses as f64).min(1.0),
            evidence: format!("{evidence}, {events} watchpoint events"),
        });
    }
    if let Some((watchpoints::Reuse::Streamed, never)) = watchpoints::reuse_class(obj) {
        out.push(Finding {
            object: index,
            kind: Kind::Streamed,
            text: format!(
                "streamed: {} of its watched words were not touched again within a sampling period",
                pct(never)
            ),
            strength: share * never,
            evidence: format!(
                "{evidence}, {} watched words",
                obj.reuse.iter().sum::<u64>()
            ),
        });
    }
}

/// The findings about object `index` (see [`strongest`]).
pub fn of_object(db: &Database, index: u32, metrics: &[u64], share: f64) -> Vec<Finding> {
    let mut out = Vec::new();
    if share < MIN_OBJECT_SHARE || accesses(db, metrics) < MIN_OBJECT_SAMPLES {
        return out;
    }
    // A runtime's memory (an MPI transport, an OpenMP barrier) is not the
    // program's to pad, reorder or copy, and a `<...>` bucket (small heap
    // objects, unknown addresses, a thread's stack) is many objects with
    // no one layout: no finding.
    if db
        .objects
        .get(index as usize)
        .is_some_and(|o| o.runtime.is_some() || o.name.starts_with('<'))
    {
        return out;
    }
    let n = accesses(db, metrics);
    let evidence = format!(
        "{n} sampled accesses of the object ({} of all)",
        pct1(share)
    );
    let access = object_access::object_access(db, index, metrics);
    let misaligned = access
        .misaligned
        .filter(|&(count, m)| m >= MIN_MISALIGNED_SHARE && count >= MIN_MISALIGNED_SAMPLES);
    if let Some((count, m)) = misaligned.filter(|_| !naturally_aligned(db, index, metrics)) {
        out.push(Finding {
            object: index,
            kind: Kind::Misaligned,
            text: format!(
                "misaligned: {} of sampled accesses span two cache lines",
                pct(m)
            ),
            strength: share * m,
            evidence: format!("{evidence}, {count} of them spanning two lines"),
        });
    }
    if let Some(p) = &access.pattern {
        let top = p.strides.first();
        match (p.regularity, top) {
            (Regularity::Regular, Some(s)) if s.bytes.unsigned_abs() >= LARGE_STRIDE => {
                out.push(Finding {
                    object: index,
                    kind: Kind::LargeStride,
                    text: stride_line(p),
                    strength: share * s.share,
                    evidence: format!("{evidence}, {} with a stride", p.observations),
                })
            }
            (Regularity::Irregular, _) if p.source == StrideSource::Decoder => {
                // Enough data-dependent observations, and a share that
                // stays above the threshold at 95% confidence.
                let dependent = (p.data_dependent * p.observations as f64).round() as u64;
                let (low, high) = wilson(dependent, p.observations);
                let top = access
                    .sites
                    .iter()
                    .filter(|(_, c, _)| c.data_dependent > 0)
                    .max_by_key(|(_, c, _)| c.data_dependent);
                if dependent >= MIN_OBJECT_SAMPLES && low >= MIN_DATA_DEPENDENT {
                    let at = top.map_or(String::new(), |(f, c, _)| {
                        format!("; most at {} ({} of them)", site_text(f), c.data_dependent)
                    });
                    out.push(Finding {
                        object: index,
                        kind: Kind::Irregular,
                        text: format!(
                            "data-dependent addresses: {} of {} decoded accesses are gathers or pointer chases (address loaded from memory){at}",
                            pct(p.data_dependent),
                            p.observations
                        ),
                        strength: share * p.data_dependent,
                        evidence: format!(
                            "{evidence}, {dependent} of {} decoded accesses data-dependent (95% interval {:.0}-{:.0}%)",
                            p.observations,
                            100.0 * low,
                            100.0 * high
                        ),
                    })
                }
            }
            _ => {}
        }
    }
    if let Some(f) = scattered_blocks(db, index, share, &evidence) {
        out.push(f);
    }
    watch_findings(db, index, metrics, share, &evidence, &mut out);
    out
}

/// Many small blocks from one site live and read together: each is an
/// allocation of its own, scattered among other blocks, where one array
/// would be one stream.
fn scattered_blocks(db: &Database, index: u32, share: f64, evidence: &str) -> Option<Finding> {
    let o = db.objects.get(index as usize)?;
    let blocks = o.blocks?;
    let mean = o.bytes / o.allocations.max(1);
    if blocks.peak_live < MIN_SCATTERED_BLOCKS || mean >= SCATTERED_BLOCK_BYTES {
        return None;
    }
    let text = o.blocks_text()?;
    Some(Finding {
        object: index,
        kind: Kind::ScatteredBlocks,
        text: format!(
            "{text} from one site, up to {} live at once: each a separate allocation among other blocks",
            formats::notes::thousands(blocks.peak_live)
        ),
        // Half weight: whether contiguity pays depends on the order of
        // the reads, which the blocks' count alone does not show.
        strength: share * 0.5,
        evidence: format!(
            "{evidence}, {} blocks live at once",
            formats::notes::thousands(blocks.peak_live)
        ),
    })
}

/// The strongest findings across all objects, strongest first, at most
/// `top`.
pub fn strongest(db: &Database, top: usize) -> Vec<Finding> {
    let mut all: Vec<Finding> = formats::views::objects(db)
        .iter()
        .flat_map(|o| of_object(db, o.index, &o.metrics, o.share))
        .collect();
    all.sort_by(|a, b| {
        b.strength
            .total_cmp(&a.strength)
            .then(a.object.cmp(&b.object))
    });
    // One finding per object and kind: objects of one name and allocation
    // site reached by several call paths are one object to the reader.
    let mut seen = std::collections::HashSet::new();
    all.retain(|f| seen.insert((object_identity(db, f.object), f.kind)));
    all.truncate(top);
    all
}

/// What a reader calls an object: its name and allocation site.
pub fn object_identity(db: &Database, index: u32) -> (String, String) {
    let Some(o) = db.objects.get(index as usize) else {
        return (String::new(), String::new());
    };
    let site = o
        .site_frame()
        .and_then(|f| db.frames.get(f as usize))
        .map(|f| f.site_text())
        .unwrap_or_default();
    (o.name.clone(), site)
}

/// True when the database holds access-pattern measurements at all.
pub fn measured(db: &Database) -> bool {
    db.metric_column("misaligned_samples").is_some()
        || db.objects.iter().any(|o| !o.sites.is_empty())
        || watchpoints::sharing_measured(db)
        || db.objects.iter().any(|o| !o.reuse.is_empty())
}

#[cfg(test)]
mod tests;
