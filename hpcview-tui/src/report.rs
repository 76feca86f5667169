//! The text report (`hpcview-tui DB --report`): a header line, then the
//! data-centric and/or the code-centric table, from [`formats::views`], or
//! the bottleneck-priority table (`--view bottleneck`) from
//! [`crate::state`]: the same rows, in the same order, as the viewer's
//! data-centric and flat panes with `b`. Compared with a baseline
//! ([`render_compared`], `--baseline`), every table gets a `Δshare` column
//! (the change of the row's share in percentage points, or `new`; see
//! [`crate::state::baseline`]). Memory that MPI and OpenMP runtimes
//! allocated gets a summary line under the data table, and the CPU time
//! inside those runtimes a "Waiting in MPI/OpenMP" line under the code
//! table and the bottleneck table; with [`Options::hide_runtime`] the
//! runtimes' objects and functions are left out of every table (the two
//! lines stay).
//!
//! ```
//! use hpcview_tui::report::{render, Tables};
//! let text = render(&hpcview_tui::fixtures::abc(), Tables::Data, 1);
//! assert!(text.contains("90.0%  "));
//! ```

use std::fmt::Write;

use formats::database::{Database, Frame};
use formats::views::{self, FunctionRow, ObjectRow};

use crate::state::baseline::{Baseline, Delta};

/// Which tables to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    Data,
    Code,
    Both,
    Bottleneck,
}

/// Longest name or function shown before it is shortened with `…`.
const MAX_NAME: usize = 40;

/// How the report shows what it shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Leave runtime rows out of every table: memory an MPI library or an
    /// OpenMP runtime allocated ([`formats::runtimes`]) and functions of
    /// their modules; the summary and waiting lines stay.
    pub hide_runtime: bool,
}

/// The whole report, `top` rows per table.
pub fn render(db: &Database, tables: Tables, top: usize) -> String {
    render_with(db, tables, top, None, Options::default())
}

/// [`render`] with `options`.
pub fn render_with_options(db: &Database, tables: Tables, top: usize, options: Options) -> String {
    render_with(db, tables, top, None, options)
}

/// The report of `db` compared with `baseline` (made for `db`): a line
/// naming the baseline after the header, and a `Δshare` column.
pub fn render_compared(
    db: &Database,
    tables: Tables,
    top: usize,
    baseline: &mut Baseline,
) -> String {
    render_with(db, tables, top, Some(baseline), Options::default())
}

/// [`render_compared`] with `options`.
pub fn render_compared_with_options(
    db: &Database,
    tables: Tables,
    top: usize,
    baseline: &mut Baseline,
    options: Options,
) -> String {
    render_with(db, tables, top, Some(baseline), options)
}

fn render_with(
    db: &Database,
    tables: Tables,
    top: usize,
    base: Option<&mut Baseline>,
    options: Options,
) -> String {
    let mut out = header(db);
    out.push('\n');
    out.push_str(&few_samples_note(db));
    if let Some(b) = base.as_deref() {
        out.push_str(&baseline_line(b));
        out.push('\n');
    }
    if tables == Tables::Bottleneck {
        out.push('\n');
        out.push_str(&bottleneck_table(db, top, base, options));
        let waiting = waiting_line(db);
        if !waiting.is_empty() {
            out.push('\n');
            out.push_str(&waiting);
        }
        return out;
    }
    if matches!(tables, Tables::Data | Tables::Both) {
        out.push('\n');
        out.push_str(&data_table_with(db, top, base.as_deref(), options));
        out.push_str(&runtime_memory_line(db, options));
    }
    if matches!(tables, Tables::Code | Tables::Both) {
        out.push('\n');
        out.push_str(&code_table(db, top, base.as_deref(), options));
        out.push_str(&waiting_line(db));
    }
    if matches!(tables, Tables::Data | Tables::Both) && crate::findings::measured(db) {
        out.push('\n');
        out.push_str(&findings_section(db, top));
    }
    out
}

/// The strongest access-pattern findings across objects, one line each
/// with its advice ([`crate::findings`]).
pub fn findings_section(db: &Database, top: usize) -> String {
    let found = crate::findings::strongest(db, top);
    let mut out = String::new();
    if found.is_empty() {
        let _ = writeln!(
            out,
            "Findings: none (no misaligned accesses, large or data-dependent strides, sharing or streamed data with enough evidence: objects above 1% and {} sampled accesses, not a runtime's memory nor a <...> bucket)",
            crate::findings::MIN_OBJECT_SAMPLES
        );
        return out;
    }
    let _ = writeln!(out, "Findings: {} strongest", found.len());
    // Two objects of one name (different allocation sites) are told
    // apart by their site; each kind's advice is written out once.
    let mut names = std::collections::HashMap::<&str, std::collections::HashSet<_>>::new();
    for f in &found {
        let (name, site) = crate::findings::object_identity(db, f.object);
        names
            .entry(db.objects[f.object as usize].name.as_str())
            .or_default()
            .insert((name, site));
    }
    let mut advised = std::collections::HashMap::new();
    for f in &found {
        let o = &db.objects[f.object as usize];
        let mut name = fit(&o.name, MAX_NAME);
        if names.get(o.name.as_str()).is_some_and(|s| s.len() > 1) {
            if let Some(frame) = o.site_frame().and_then(|i| db.frames.get(i as usize)) {
                name = format!(
                    "{name} (allocated at {})",
                    crate::findings::site_text(frame)
                );
            }
        }
        let _ = writeln!(out, "- {name}: {}", f.text);
        let _ = writeln!(out, "  evidence: {}", f.evidence);
        match advised.get(&f.kind) {
            Some(first) => {
                let _ = writeln!(out, "  advice: as for {first} above");
            }
            None => {
                let _ = writeln!(out, "  advice: {}", f.kind.advice());
                advised.insert(f.kind, name);
            }
        }
    }
    out
}

/// Runs with fewer memory samples than this get [`few_samples_note`].
pub const FEW_SAMPLES: u64 = 1000;

/// A note when the run has too few memory samples for its shares to mean
/// much (under [`FEW_SAMPLES`]): how uncertain a share is, and what to do;
/// empty otherwise (and for a database without samples).
pub fn few_samples_note(db: &Database) -> String {
    let s = &db.info.stats;
    let n = if s.memory_samples > 0 {
        s.memory_samples
    } else {
        let primary = db.info.primary_metric as usize;
        db.code
            .nodes
            .iter()
            .map(|n| n.exclusive.get(primary).copied().unwrap_or(0))
            .sum()
    };
    if n == 0 || n >= FEW_SAMPLES {
        return String::new();
    }
    // 95% interval of a share p from n samples: 1.96 sqrt(p (1-p) / n).
    let at = |p: f64| 196.0 * (p * (1.0 - p) / n as f64).sqrt();
    format!(
        "Note: only {n} memory samples: a share is uncertain by about ±{:.0} points at 50% and ±{:.0} at 10% (95%); findings need {} samples of an object. For shares worth comparing, measure {FEW_SAMPLES} or more: run longer, or sample {}x as often (-e mem:soft@NS with NS the period divided by that)\n",
        at(0.5),
        at(0.1),
        crate::findings::MIN_OBJECT_SAMPLES,
        FEW_SAMPLES.div_ceil(n),
    )
}

/// "baseline: PATH | Δshare = ...": which database the deltas compare with.
pub fn baseline_line(b: &Baseline) -> String {
    let (objects, functions) = b.vanished();
    let total = &b.diff.total;
    format!(
        "baseline: {} | Δshare: change of the row's share in percentage points (this database minus the baseline), new: not in the baseline | memory samples {} -> {} | gone since the baseline: objects {objects}, functions {functions}",
        b.path.display(),
        total.before,
        total.after,
    )
}

/// The delta cell of a row (`{:>6}`), empty without a baseline.
fn delta_cell(d: Option<Delta>) -> String {
    d.map(|d| format!("  {:>6}", d.text())).unwrap_or_default()
}

/// One line: events, processes, threads (and short-lived threads without
/// a file), primary metric, recovery rate.
pub fn header(db: &Database) -> String {
    let info = &db.info;
    let s = &info.stats;
    let events = if info.events.is_empty() {
        "none".to_string()
    } else {
        info.events.join(", ")
    };
    let recovery = if s.memory_samples == 0 {
        "n/a (no memory samples)".to_string()
    } else {
        format!(
            "{:.1}% ({} of {} memory samples)",
            100.0 * s.address_recovered as f64 / s.memory_samples as f64,
            s.address_recovered,
            s.memory_samples
        )
    };
    let ranks = if info.ranks.is_empty() {
        String::new()
    } else {
        format!(" | ranks: {}", info.ranks.len())
    };
    // Threads that ended before their first sample have no file: not in
    // `threads`, counted beside it.
    let short_lived = if s.short_lived_threads == 0 {
        String::new()
    } else {
        format!(
            " (+{} short-lived without samples, {:.1} ms of CPU time)",
            s.short_lived_threads,
            s.short_lived_cpu_ns as f64 / 1e6
        )
    };
    let mut line = format!(
        "events: {events} | processes: {}{ranks} | threads: {}{short_lived} | metric: {} | address recovery: {recovery}",
        info.processes,
        info.threads,
        db.primary_metric_name()
    );
    if let Some(more) = attribution_line(s) {
        line.push('\n');
        line.push_str(&more);
    }
    if let Some(untracked) = formats::notes::untracked_blocks(&s.untracked_blocks) {
        line.push_str("\nWarning: ");
        line.push_str(&untracked);
    }
    // What the run manifest says is missing (`formats::manifest`).
    for loss in &info.losses {
        line.push_str("\nLost: ");
        line.push_str(&loss.text);
    }
    for notice in s
        .notices
        .keys()
        .filter(|n| n.starts_with("measurement limited"))
    {
        line.push_str("\nWarning: ");
        line.push_str(notice);
    }
    line
}

/// `mem:soft`'s accounting, so that every count adds up: signals and the
/// periods they stood for, how each was attributed, how many memory
/// samples got an address. `None` without rule counters (other sources,
/// older databases).
pub fn attribution_line(s: &formats::measurement::SampleStats) -> Option<String> {
    if s.attribution.is_empty() {
        return None;
    }
    let n = |rule: &str| s.attribution.get(rule).copied().unwrap_or(0);
    let memory = n("landed") + n("walked_back") + n("split") + n("retire_group") + n("unrecovered");
    let periods = if s.timer_overruns > 0 {
        format!(
            " standing for {} periods (the kernel's tick is coarser than the period: each signal counts the periods it stood for in the tables)",
            s.samples + s.timer_overruns
        )
    } else {
        String::new()
    };
    Some(format!(
        "samples: {}{periods}; attributed {}: memory {memory} (landed on the access {}{}, walked back to a load {}, split between loads {}, retire group {}, address lost {}) + compute {} (divide, square root, FP chain) + constants {} + other {}; of the memory samples {} loads and {} stores got an address ({} named by their base register only){}",
        s.samples,
        s.attribution.values().sum::<u64>(),
        n("landed"),
        if s.about_to_fault > 0 {
            format!(" ({} of them on an access about to page-fault)", s.about_to_fault)
        } else {
            String::new()
        },
        n("walked_back"),
        n("split"),
        n("retire_group"),
        n("unrecovered"),
        n("compute"),
        n("constant"),
        n("other"),
        s.address_recovered,
        s.store_samples,
        s.recovered_base_only,
        if s.shared_in_flight > 0 {
            format!(
                "; {} load samples shared with the loop's other loads in flight",
                s.shared_in_flight
            )
        } else {
            String::new()
        },
    ))
}

/// Shortens `s` to `max` characters by cutting its middle (`…`): the
/// start and the end stay, so that names that differ only at the end
/// (`/dev/shm/vader_segment.h.0` and `.1`, `: double[942,080]`) stay
/// distinct.
fn fit(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(1);
    let head = keep * 3 / 5;
    let tail = keep - head;
    let mut t: String = s.chars().take(head).collect();
    t.push('…');
    t.extend(s.chars().skip(n - tail));
    t
}

fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(n)))
}

fn percent(share: f64) -> String {
    format!("{:.1}%", 100.0 * share)
}

/// Source files of the system, the toolchain or third-party packages.
fn is_system(frame: &Frame) -> bool {
    let file = frame.file.as_deref().unwrap_or("");
    let system_file = ["/usr/", "/rustc/", "/build/", "/lib/", "/lib64/"]
        .iter()
        .any(|p| file.starts_with(p))
        || file.contains("/.cargo/registry/")
        || file.contains("/.rustup/");
    let system_module = ["/usr/lib", "/lib/", "/lib64/", "/usr/local/lib"]
        .iter()
        .any(|p| frame.module.starts_with(p));
    system_file || system_module
}

fn location(file: Option<&str>, line: Option<u32>) -> String {
    match (file, line) {
        (Some(f), Some(l)) => format!("{f}:{l}"),
        (Some(f), None) => f.to_string(),
        _ => String::new(),
    }
}

/// `function file:line` of an allocation site, or `function+0xOFFSET
/// (module)` without line information.
pub fn site_text(f: &Frame) -> String {
    f.site_text()
}

/// The allocation site of an object: the one the database chose, else (a
/// database written before sites were chosen) the innermost user frame.
pub fn object_site(site: Option<&Frame>, path: &[&Frame]) -> String {
    match site {
        Some(f) => site_text(f),
        None => alloc_site(path),
    }
}

/// `function file:line` of the innermost user frame of an allocation path.
pub fn alloc_site(path: &[&Frame]) -> String {
    let with_line = |f: &&&Frame| f.file.is_some() && f.line.is_some();
    let frame = path
        .iter()
        .rev()
        .filter(with_line)
        .find(|f| !is_system(f))
        .or_else(|| path.iter().rev().find(with_line))
        .or_else(|| path.last());
    match frame {
        Some(f) => {
            let loc = location(f.file.as_deref(), f.line);
            if loc.is_empty() {
                f.function.clone()
            } else {
                format!("{} {loc}", f.function)
            }
        }
        None => "-".to_string(),
    }
}

/// The unit of the tables' metric column: `periods` when each sample of
/// the primary `samples` metric counts the periods it stood for (the
/// kernel's tick was coarser than the period), else the metric's name.
pub fn table_unit(db: &Database) -> &str {
    let metric = db.primary_metric_name();
    if metric == "samples" && db.info.stats.timer_overruns > 0 {
        "periods"
    } else {
        metric
    }
}

fn primary(db: &Database, metrics: &[u64]) -> u64 {
    metrics
        .get(db.info.primary_metric as usize)
        .copied()
        .unwrap_or(0)
}

/// "runtime memory: Open MPI 14.2% (3 objects), OpenMP runtime 7.4% (1
/// object)": the share of the primary metric in memory the runtimes
/// allocated, per runtime; empty when there is none.
pub fn runtime_memory_line(db: &Database, options: Options) -> String {
    let mut by: Vec<(&str, f64, usize)> = Vec::new();
    for row in views::objects(db) {
        let Some(r) = db.objects[row.index as usize].runtime.as_deref() else {
            continue;
        };
        match by.iter_mut().find(|(n, _, _)| *n == r) {
            Some(e) => {
                e.1 += row.share;
                e.2 += 1;
            }
            None => by.push((r, row.share, 1)),
        }
    }
    if by.is_empty() {
        return String::new();
    }
    by.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = by
        .iter()
        .map(|(n, share, count)| {
            let s = if *count == 1 { "" } else { "s" };
            format!("{n} {} ({count} object{s})", percent(*share))
        })
        .collect();
    let shown = if options.hide_runtime {
        "their rows are hidden (--hide-runtime)"
    } else {
        "rows named after the runtime, no findings; --hide-runtime hides them"
    };
    format!(
        "Runtime memory (allocated by MPI or OpenMP runtimes, not the program): {}; {shown}\n",
        parts.join(", ")
    )
}

/// "waiting in MPI/OpenMP: 37.0% of cpu_samples (...)": the CPU samples
/// inside MPI libraries and OpenMP runtimes ([`formats::runtimes::waiting`]);
/// empty when there are none.
pub fn waiting_line(db: &Database) -> String {
    formats::runtimes::waiting(db).line()
}

/// One row per object as a reader sees it: heap objects of one name and
/// allocation site reached by several call paths (a function inlined into
/// two callers, a constructor called from two places) are summed into the
/// first (largest) one, and the rows sorted again.
pub fn merge_duplicates<'a>(db: &'a Database, rows: Vec<ObjectRow<'a>>) -> Vec<ObjectRow<'a>> {
    let mut out: Vec<ObjectRow<'a>> = Vec::with_capacity(rows.len());
    let mut at: std::collections::HashMap<(String, String), usize> = Default::default();
    for row in rows {
        if row.kind != formats::database::ObjectKind::Heap || row.alloc_site.is_none() {
            out.push(row);
            continue;
        }
        let key = crate::findings::object_identity(db, row.index);
        match at.get(&key) {
            Some(&i) => {
                let first = &mut out[i];
                for (a, b) in first.metrics.iter_mut().zip(&row.metrics) {
                    *a += b;
                }
                first.share += row.share;
                first.bytes += row.bytes;
                first.allocations += row.allocations;
            }
            None => {
                at.insert(key, out.len());
                out.push(row);
            }
        }
    }
    let primary = db.info.primary_metric as usize;
    out.sort_by(|a, b| {
        let v = |r: &ObjectRow<'_>| r.metrics.get(primary).copied().unwrap_or(0);
        v(b).cmp(&v(a)).then_with(|| a.name.cmp(b.name))
    });
    out
}

/// The data-centric table: objects by the primary metric (with a `Δshare`
/// column against `base`).
pub fn data_table(db: &Database, top: usize, base: Option<&Baseline>) -> String {
    data_table_with(db, top, base, Options::default())
}

/// [`data_table`] with `options` (runtime memory hidden or not).
pub fn data_table_with(
    db: &Database,
    top: usize,
    base: Option<&Baseline>,
    options: Options,
) -> String {
    let mut rows: Vec<ObjectRow<'_>> = merge_duplicates(db, views::objects(db));
    if options.hide_runtime {
        rows.retain(|r| db.objects[r.index as usize].runtime.is_none());
    }
    // Rows without any of the metric are no part of a top list.
    rows.retain(|r| primary(db, &r.metrics) > 0);
    let total = rows.len();
    let sum: u64 = rows.iter().map(|r| primary(db, &r.metrics)).sum();
    let rows = &rows[..top.min(total)];
    let metric = table_unit(db);
    let hidden = if options.hide_runtime {
        " (runtime memory hidden)"
    } else {
        ""
    };
    let mut out = format!(
        "Data-centric view: top {} of {total} objects by {metric} ({} in all){hidden}\n",
        rows.len(),
        formats::notes::thousands(sum),
    );
    if rows.is_empty() {
        out.push_str("  (no data objects)\n");
        return out;
    }
    let names: Vec<String> = rows.iter().map(|r| fit(r.name, MAX_NAME)).collect();
    let name_w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let metric_w = metric.chars().count().max(8);
    let rank_w = rows.len().to_string().len().max(1);
    let _ = writeln!(
        out,
        "{:>rank_w$}  {:>6}{}  {:>metric_w$}  {:<7}  {}  allocation site",
        "#",
        "share",
        if base.is_some() { "  Δshare" } else { "" },
        metric,
        "kind",
        pad("name", name_w),
    );
    for (i, (row, name)) in rows.iter().zip(&names).enumerate() {
        let site = if row.alloc_path.is_empty() {
            "-".to_string()
        } else {
            object_site(row.alloc_site, &row.alloc_path)
        };
        // A site of many blocks says how many, and of what size.
        let site = match blocks_text(db, row) {
            Some(blocks) => format!("{site} ({blocks})"),
            None => site,
        };
        let _ = writeln!(
            out,
            "{:>rank_w$}  {:>6}{}  {:>metric_w$}  {:<7}  {}  {site}",
            i + 1,
            percent(row.share),
            delta_cell(base.and_then(|b| b.object_delta(row.index))),
            primary(db, &row.metrics),
            row.kind.as_str(),
            pad(name, name_w),
        );
    }
    out
}

/// "N blocks of S B" of a heap row of several blocks (counted over the
/// rows merged into it).
fn blocks_text(db: &Database, row: &ObjectRow<'_>) -> Option<String> {
    let obj = db.objects.get(row.index as usize)?;
    let merged = formats::database::DataObject {
        kind: obj.kind,
        allocations: row.allocations,
        bytes: row.bytes,
        blocks: obj.blocks,
        ..Default::default()
    };
    merged.blocks_text()
}

/// The code-centric table: functions by the primary metric (with a
/// `Δshare` column against `base`).
pub fn code_table(db: &Database, top: usize, base: Option<&Baseline>, options: Options) -> String {
    let mut rows: Vec<FunctionRow<'_>> = views::functions(db);
    if options.hide_runtime {
        rows.retain(|r| formats::runtimes::of_module(r.module).is_none());
    }
    // Rows without any of the metric are no part of a top list.
    rows.retain(|r| primary(db, &r.metrics) > 0);
    let total = rows.len();
    let sum: u64 = rows.iter().map(|r| primary(db, &r.metrics)).sum();
    let rows = &rows[..top.min(total)];
    let metric = table_unit(db);
    let hidden = if options.hide_runtime {
        " (runtime functions hidden)"
    } else {
        ""
    };
    let mut out = format!(
        "Code-centric view: top {} of {total} functions by {metric} ({} in all){hidden}\n",
        rows.len(),
        formats::notes::thousands(sum),
    );
    if rows.is_empty() {
        out.push_str("  (no samples)\n");
        return out;
    }
    let names: Vec<String> = rows.iter().map(|r| fit(r.function, MAX_NAME)).collect();
    let name_w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let metric_w = metric.chars().count().max(8);
    let _ = writeln!(
        out,
        "{:>6}{}  {:>metric_w$}  {}  hottest line",
        "share",
        if base.is_some() { "  Δshare" } else { "" },
        metric,
        pad("function", name_w),
    );
    for (row, name) in rows.iter().zip(&names) {
        let loc = location(row.file, row.line);
        let _ = writeln!(
            out,
            "{:>6}{}  {:>metric_w$}  {}  {}",
            percent(row.share),
            delta_cell(base.map(|b| b.function_delta(row.function))),
            primary(db, &row.metrics),
            pad(name, name_w),
            if loc.is_empty() { "-" } else { &loc },
        );
    }
    out
}

/// The advice of a runtime's row in the bottleneck table: its code and
/// memory are not the program's to optimise (its time is the waiting
/// line's).
pub const RUNTIME_ADVICE: &str = "runtime (MPI/OpenMP): not the program's";

/// The bottleneck-priority table: objects, then functions, by
/// `proxy x share` (see [`crate::state::bottleneck`]), with a `Δshare`
/// column against `base`.
pub fn bottleneck_table(
    db: &Database,
    top: usize,
    mut base: Option<&mut Baseline>,
    options: Options,
) -> String {
    use crate::state::bottleneck::{MEM_HIGH, SHARE_HIGH};
    use crate::state::model::Model;
    use crate::state::tree::{Pane, PaneKind, Sort, SortKey};
    // The viewer's model owns its database; the report borrows one.
    let model = Model::new(db.clone(), None);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Bottleneck priority: memory-bound proxy = samples / cpu_samples (share of sampled time on memory-accessing instructions; high >= {:.0}%), share of {} (high >= {:.0}%)",
        100.0 * MEM_HIGH,
        db.primary_metric_name(),
        100.0 * SHARE_HIGH
    );
    if model.cpu_metric.is_none() {
        out.push_str("  (no cpu_samples metric in this database: the proxy is n/a)\n");
    }
    // Why an object is slow: its strongest access-pattern finding.
    let mut why: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    for f in crate::findings::strongest(db, usize::MAX) {
        why.entry(f.object).or_insert(f.text);
    }
    for kind in [PaneKind::Data, PaneKind::Flat] {
        let mut pane = if options.hide_runtime {
            Pane::with_runtime_hidden(&model, kind)
        } else {
            Pane::new(&model, kind)
        };
        pane.set_sort(
            &model,
            Sort {
                key: SortKey::Bottleneck,
                descending: true,
            },
        );
        let what = if kind == PaneKind::Data {
            "objects"
        } else {
            "functions"
        };
        // Rows without any of the primary metric are no part of a top list.
        let sampled: Vec<u32> = pane
            .roots
            .iter()
            .copied()
            .filter(|&id| pane.bottleneck(&model, id).share > 0.0)
            .collect();
        let rows: Vec<u32> = sampled.iter().copied().take(top).collect();
        let hidden = if options.hide_runtime {
            " (runtime rows hidden)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "\n{what}: top {} of {}{hidden}",
            rows.len(),
            sampled.len()
        );
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "{:>6}  {:>6}{}  {:>5}  {:<39}  {:<7}  name",
            "score",
            "share",
            if base.is_some() { "  Δshare" } else { "" },
            "mem%",
            "advice",
            "kind"
        );
        for id in rows {
            let b = pane.bottleneck(&model, id);
            let delta = base
                .as_deref_mut()
                .and_then(|base| base.delta(&model, &pane, id));
            let item = &pane.items[id as usize];
            let _ = writeln!(
                out,
                "{:>6.3}  {:>6}{}  {:>5}  {:<39}  {:<7}  {}",
                b.score,
                percent(b.share),
                delta_cell(delta),
                b.mem
                    .map(|m| format!("{:.0}%", 100.0 * m))
                    .unwrap_or_else(|| "n/a".into()),
                if item.runtime {
                    RUNTIME_ADVICE
                } else {
                    b.quadrant.advice()
                },
                if item.tag.is_empty() { "-" } else { item.tag },
                fit(&item.label, MAX_NAME)
            );
            if let Some(text) = item.object.and_then(|o| why.get(&o)) {
                let _ = writeln!(out, "{:>8}why: {text}", "");
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
