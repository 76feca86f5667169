//! The difference of two databases (`hpcprof-rs diff BEFORE AFTER`).
//!
//! Data objects are matched across the two runs by kind, name and
//! allocation site (the source file's name and the line, see
//! [`alloc_site`]), never by address, so a match survives a rebuild and a
//! move of the build directory. Code is matched by function (and, for
//! lines, by function, file name and line).
//!
//! The measure is the primary metric (for `mem:soft`: samples at
//! memory-accessing instructions, one per period of CPU time): each row
//! shows its value and its share of all data-centric samples in both runs.
//! The databases record no run time, so the diff compares sample counts
//! (which, at a fixed sampling period, are proportional to the time
//! spent), not samples per second; `measure` in the output says so.
//!
//!
//! **Noise.** A sample count N is a Poisson count: it varies by about
//! sqrt(N) from run to run of the same work. The totals of two runs differ
//! by more than their noise when `|after - before| > 3 sqrt(before +
//! after)` ([`beyond_noise`]; three standard deviations of the difference,
//! so two runs of the same work warn about once in 370 diffs). Their run
//! times (the sampled threads' CPU time, recorded in every profile) differ
//! by more than their noise when the relative difference exceeds what the
//! samples can resolve, `3 sqrt(1/N_before + 1/N_after)` of all samples.
//! Either way [`Diff::warnings`] says so: the runs did different work or
//! ran under different conditions (machine load, input, period), and
//! shares are then the fairer comparison.
//!
//! **Rows.** Each row's change is judged against the same noise, on
//! shares: the row had `b` of the `N_b` samples before and `a` of `N_a`
//! after. If its share did not change, each of its `n = a + b` samples
//! fell in the after run with probability `q = N_a / (N_a + N_b)` (two
//! Poisson counts compared: the conditional binomial test), so `z = (a -
//! n q) / sqrt(n q (1 - q))` ([`share_z`], continuity-corrected). A row
//! whose `|z|` exceeds 3 ([`NOISE_SIGMAS`]), or of at most 1,000 samples
//! whose exact binomial probability is under 0.27% (the same level:
//! `0 -> 2` samples is not a change), changed beyond sampling noise
//! ([`share_beyond_noise`], [`Row::beyond_noise`]); the others are
//! "within noise", however large their percentage (11 -> 9 samples is
//! -18%, and noise). Shares, not counts, so that a run slowed
//! as a whole (machine load) does not make every row "changed". Rows
//! beyond noise come first; rows with no samples in either run are left
//! out.
//!
//! **`--fail-if-worse`** ([`worse`]) judges the application's objects:
//! heap objects and static variables that are not a runtime's
//! ([`DataObject::runtime`], `crate::runtimes`), not thread stacks, and not
//! the `<...>` buckets (small heap objects, unknown addresses, sections).
//! It fails only on a rise beyond sampling noise: an object whose samples
//! rose by more than the percentage and whose row is a change beyond
//! noise with a growing share (the row's verdict, [`Row::beyond_noise`]
//! and `z > 0`), or the application objects' total, risen by more than
//! the percentage and by more than `3 sqrt(before + after)` samples
//! ([`beyond_noise`], the totals' test). Two runs of the same build do
//! not fail, whatever percentage is given, but about once in 370 diffs
//! per object.
//!
//! ```
//! use formats::database::Database;
//! let d = formats::diff::diff(&Database::default(), &Database::default());
//! assert_eq!(d.total.before, 0);
//! assert!(formats::diff::worse(&d, 10.0, 0.01).is_empty());
//! ```

use std::collections::BTreeMap;

use serde::Serialize;

use crate::database::{DataObject, Database, Frame, ObjectKind};
use crate::views;

/// Value of the top-level `format` field.
pub const FORMAT: &str = "hpcprof-rs/diff";
/// Value of the top-level `version` field.
pub const VERSION: u32 = 1;

/// What [`diff`] says about the measure it compares.
pub const MEASURE: &str = "samples of the primary metric (at a fixed sampling period: time); \
the databases record no wall-clock time, so samples are compared, not samples per second";

/// The allocation site of a heap object: the one hpcprof-rs chose
/// (`DataObject::alloc_site`, outside allocator wrappers); for databases
/// written before sites were chosen, the innermost frame of its allocation
/// path with a file and a line outside system sources. `None` for static,
/// stack and unknown objects.
pub fn alloc_site<'a>(db: &'a Database, obj: &DataObject) -> Option<&'a Frame> {
    if let Some(f) = obj.site_frame() {
        return db.frames.get(f as usize);
    }
    // A database written before sites were chosen: the innermost frame
    // with a line outside system sources.
    obj.alloc_path
        .iter()
        .rev()
        .filter_map(|&f| db.frames.get(f as usize))
        .find(|f| f.line.is_some() && f.file.as_deref().is_some_and(|file| !is_system(file)))
}

/// True for source files of the system (the C library, compiler runtimes,
/// system headers): not a place a user allocates from.
fn is_system(file: &str) -> bool {
    file.starts_with("/usr/")
        || file.starts_with("./")
        || file.starts_with("../")
        || file.contains("/rustc/")
        || file.contains("/glibc")
}

/// The last component of a path: the part of a file name that survives a
/// move of the build directory.
fn base(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// "file.c:12" of a frame, with the file's last component only.
fn site_text(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{}:{line}", base(file)),
        (Some(file), None) => base(file).to_string(),
        // No line information: the function and the call's offset.
        _ => f.function_at(),
    }
}

/// One side of a row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Side {
    /// Value of the primary metric.
    pub samples: u64,
    /// Over all data-centric samples of that run (objects), or all
    /// code-centric samples (functions, lines).
    pub share: f64,
}

/// Whether a row is in both runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Matched,
    New,
    Vanished,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Matched => "matched",
            Status::New => "new",
            Status::Vanished => "vanished",
        }
    }
}

/// One object, function or line in the two runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub status: Status,
    /// Object kind ("heap", "static", ...) or "function" or "line".
    pub kind: String,
    /// Object or function name.
    pub name: String,
    /// Allocation site ("abc.c:31") of an object, or "file:line" of a line;
    /// empty when unknown.
    pub site: String,
    /// Bytes of an object in the run after (before for vanished ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    pub before: Option<Side>,
    pub after: Option<Side>,
    /// after.share - before.share (a missing side counts as 0).
    pub delta_share: f64,
    /// after.samples - before.samples.
    pub delta_samples: i64,
    /// Relative change of the samples in percent; `None` when new.
    pub change_pct: Option<f64>,
    /// Objects: false for a runtime's objects (MPI, OpenMP), thread
    /// stacks and the `<...>` buckets, which `--fail-if-worse` does not
    /// judge ([`is_application_object`]); true for functions and lines.
    pub application: bool,
    /// The change of the row's share in standard deviations ([`share_z`]):
    /// positive when its share grew.
    pub z: f64,
    /// The share changed by more than sampling noise explains
    /// ([`share_beyond_noise`]).
    pub beyond_noise: bool,
}

/// Whether an object is the application's own: a heap object or static
/// variable that no runtime owns (`runtime` is `DataObject::runtime`),
/// not a `<...>` bucket (small heap objects, unknown addresses, a
/// module's section). Thread stacks and unknown data are not.
pub fn is_application_object(kind: ObjectKind, name: &str, runtime: Option<&str>) -> bool {
    matches!(kind, ObjectKind::Heap | ObjectKind::Static)
        && runtime.is_none()
        && !name.starts_with('<')
}

/// Standard deviations of the difference of two sample counts beyond
/// which [`beyond_noise`] calls it real.
pub const NOISE_SIGMAS: f64 = 3.0;

/// True when two sample counts differ by more than their sampling noise:
/// `|a - b| > 3 sqrt(a + b)` (each a Poisson count).
pub fn beyond_noise(a: u64, b: u64) -> bool {
    let (a, b) = (a as f64, b as f64);
    (a - b).abs() > NOISE_SIGMAS * (a + b).sqrt()
}

/// The change of a row's share between two runs in standard errors: the
/// row had `before` of `total_before` samples and `after` of
/// `total_after`. Both counts are Poisson counts; if the share did not
/// change, the `n = before + after` samples of the row fall in the after
/// run with probability `q = total_after / (total_before + total_after)`
/// (the conditional test of two Poisson rates), so `z = (after - n q) /
/// sqrt(n q (1 - q))`, with a continuity correction of half a sample
/// toward 0. 0 when a run has no samples or the row has none.
pub fn share_z(before: u64, total_before: u64, after: u64, total_after: u64) -> f64 {
    let n = before + after;
    if total_before == 0 || total_after == 0 || n == 0 {
        return 0.0;
    }
    let q = total_after as f64 / (total_before as f64 + total_after as f64);
    let expected = n as f64 * q;
    let sd = (n as f64 * q * (1.0 - q)).sqrt();
    if sd <= 0.0 || sd.is_nan() {
        return 0.0;
    }
    let off = after as f64 - expected;
    off.signum() * (off.abs() - 0.5).max(0.0) / sd
}

/// Rows of at most this many samples (both runs) are judged by the exact
/// binomial test: the normal approximation of [`share_z`] calls a row of
/// 0 -> 2 samples a change.
const EXACT_UP_TO: u64 = 1000;

/// The two-sided probability of `after` or a count further from its
/// expectation among `before + after` samples, each in the after run
/// with probability `q`, by the binomial distribution (twice the smaller
/// tail, at most 1).
fn binomial_p(before: u64, after: u64, q: f64) -> f64 {
    let n = before + after;
    if q <= 0.0 || q >= 1.0 {
        return 1.0;
    }
    // log pmf(k), from log pmf(0) = n ln(1 - q), by the ratio of
    // successive terms.
    let ratio = (q / (1.0 - q)).ln();
    let mut log_pmf = n as f64 * (1.0 - q).ln();
    let (mut lower, mut upper) = (0.0, 0.0);
    for k in 0..=n {
        let pmf = log_pmf.exp();
        if k <= after {
            lower += pmf;
        }
        if k >= after {
            upper += pmf;
        }
        if k < n {
            log_pmf += ((n - k) as f64 / (k + 1) as f64).ln() + ratio;
        }
    }
    (2.0 * f64::min(lower, upper)).min(1.0)
}

/// The two-sided probability beyond [`NOISE_SIGMAS`] standard deviations
/// of a normal distribution (3: 0.27%).
const NOISE_P: f64 = 0.0027;

/// True when a row's share changed by more than sampling noise explains:
/// `|`[`share_z`]`| > 3`, or for a row of at most 1,000 samples the exact
/// binomial test at the same level (0.27%, two-sided).
pub fn share_beyond_noise(before: u64, total_before: u64, after: u64, total_after: u64) -> bool {
    let n = before + after;
    if total_before == 0 || total_after == 0 || n == 0 {
        return false;
    }
    if n <= EXACT_UP_TO {
        let q = total_after as f64 / (total_before as f64 + total_after as f64);
        binomial_p(before, after, q) < NOISE_P
    } else {
        share_z(before, total_before, after, total_after).abs() > NOISE_SIGMAS
    }
}

/// The relative difference of two run times that `samples_before` and
/// `samples_after` samples can resolve: `3 sqrt(1/N_b + 1/N_a)`
/// (infinite without samples).
pub fn time_resolution(samples_before: u64, samples_after: u64) -> f64 {
    if samples_before == 0 || samples_after == 0 {
        return f64::INFINITY;
    }
    NOISE_SIGMAS * (1.0 / samples_before as f64 + 1.0 / samples_after as f64).sqrt()
}

/// Totals of the two runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Total {
    /// All data-centric samples (the memory time).
    pub before: u64,
    pub after: u64,
    pub change_pct: Option<f64>,
    /// Every sample, memory-accessing or not (`cpu_samples`, when the
    /// event records it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_after: Option<u64>,
    /// The sampled threads' CPU time in nanoseconds (the run time the
    /// profiles record; `None` when not recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_time_before_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_time_after_ns: Option<u64>,
    /// The application objects' samples ([`is_application_object`]):
    /// what `--fail-if-worse` judges.
    pub application_before: u64,
    pub application_after: u64,
}

/// The JSON document of `hpcprof-rs diff --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub format: &'static str,
    pub version: u32,
    /// Name of the primary metric compared.
    pub metric: String,
    pub measure: &'static str,
    pub total: Total,
    /// Objects, largest absolute change of samples first.
    pub objects: Vec<Row>,
    /// Functions, largest absolute change first.
    pub functions: Vec<Row>,
    /// Source lines, largest absolute change first.
    pub lines: Vec<Row>,
    /// The runs' total samples or run times differ by more than their
    /// noise (see the module documentation); empty otherwise.
    pub warnings: Vec<String>,
}

fn change_pct(before: u64, after: u64) -> Option<f64> {
    (before > 0).then(|| 100.0 * (after as f64 - before as f64) / before as f64)
}

/// Key -> (kind, name, site, bytes, side) of one run.
type Table = BTreeMap<String, (String, String, String, Option<u64>, Side)>;

/// What matches an object across two runs: kind, name and allocation site
/// ("abc.c:31"); the key of its row in [`Diff::objects`] ([`Row::key`]).
pub fn object_key(db: &Database, obj: &DataObject) -> String {
    let site = alloc_site(db, obj).map(site_text).unwrap_or_default();
    format!("{}\u{0}{}\u{0}{site}", obj.kind.as_str(), obj.name)
}

impl Row {
    /// The key this row was matched by: [`object_key`] for objects, the
    /// function's name for functions, function and "file:line" for lines.
    pub fn key(&self) -> String {
        match self.kind.as_str() {
            "function" => self.name.clone(),
            "line" => format!("{}\u{0}{}", self.name, self.site),
            kind => format!("{kind}\u{0}{}\u{0}{}", self.name, self.site),
        }
    }
}

/// Keys of the application's objects ([`is_application_object`]).
fn application_keys(db: &Database) -> std::collections::BTreeSet<String> {
    db.objects
        .iter()
        .filter(|o| is_application_object(o.kind, &o.name, o.runtime.as_deref()))
        .map(|o| object_key(db, o))
        .collect()
}

/// Prefix of the rows of unknown addresses named by their mapping
/// (databases since 1d0ac84; before, one `<unknown address>` row).
const UNKNOWN_IN: &str = "<unknown address: ";
const UNKNOWN: &str = "<unknown address>";

/// True if `db` names its unknown addresses by mapping.
fn labels_unknown(db: &Database) -> bool {
    db.objects.iter().any(|o| o.name.starts_with(UNKNOWN_IN))
}

/// The objects of `db` by [`object_key`]; `fold_unknown`: the rows of
/// unknown addresses named by mapping are counted as one `<unknown
/// address>` row, to match a database that has only that row.
fn object_table(db: &Database, fold_unknown: bool) -> Table {
    let mut t = Table::new();
    for o in views::objects(db) {
        let site = db
            .objects
            .get(o.index as usize)
            .and_then(|obj| alloc_site(db, obj))
            .map(site_text)
            .unwrap_or_default();
        let name = match fold_unknown && o.name.starts_with(UNKNOWN_IN) {
            true => UNKNOWN,
            false => o.name,
        };
        let key = format!("{}\u{0}{name}\u{0}{site}", o.kind.as_str());
        let samples = o.metrics[db.info.primary_metric as usize];
        let e = t.entry(key).or_insert_with(|| {
            (
                o.kind.as_str().to_string(),
                name.to_string(),
                site.clone(),
                Some(0),
                Side::default(),
            )
        });
        e.3 = e.3.map(|b| b + o.bytes);
        e.4.samples += samples;
        e.4.share += o.share;
    }
    t
}

fn code_tables(db: &Database) -> (Table, Table) {
    let primary = db.info.primary_metric as usize;
    let mut functions = Table::new();
    let mut lines = Table::new();
    for f in views::functions(db) {
        let e = functions.entry(f.function.to_string()).or_insert_with(|| {
            (
                "function".into(),
                f.function.to_string(),
                String::new(),
                None,
                Side::default(),
            )
        });
        e.4.samples += f.metrics[primary];
        e.4.share += f.share;
        if e.2.is_empty() {
            e.2 = f.file.map(base).unwrap_or("").to_string();
        }
        for l in &f.lines {
            let site = match (l.file, l.line) {
                (Some(file), Some(line)) => format!("{}:{line}", base(file)),
                (Some(file), None) => base(file).to_string(),
                _ => String::new(),
            };
            let e = lines
                .entry(format!("{}\u{0}{site}", f.function))
                .or_insert_with(|| {
                    (
                        "line".into(),
                        f.function.to_string(),
                        site.clone(),
                        None,
                        Side::default(),
                    )
                });
            e.4.samples += l.metrics[primary];
            e.4.share += l.share;
        }
    }
    (functions, lines)
}

fn rows(before: Table, mut after: Table) -> Vec<Row> {
    // Each table splits its run's samples: its sums are the totals the
    // shares are judged against.
    let total = |t: &Table| t.values().map(|e| e.4.samples).sum::<u64>();
    let (total_before, total_after) = (total(&before), total(&after));
    let mut out = Vec::new();
    for (key, (kind, name, site, bytes, b)) in before {
        let row = match after.remove(&key) {
            Some((_, _, _, bytes_after, a)) => Row {
                status: Status::Matched,
                kind,
                name,
                site,
                bytes: bytes_after,
                before: Some(b),
                after: Some(a),
                delta_share: a.share - b.share,
                delta_samples: a.samples as i64 - b.samples as i64,
                change_pct: change_pct(b.samples, a.samples),
                application: true,
                z: 0.0,
                beyond_noise: false,
            },
            None => Row {
                status: Status::Vanished,
                kind,
                name,
                site,
                bytes,
                before: Some(b),
                after: None,
                delta_share: -b.share,
                delta_samples: -(b.samples as i64),
                change_pct: change_pct(b.samples, 0),
                application: true,
                z: 0.0,
                beyond_noise: false,
            },
        };
        out.push(row);
    }
    for (_, (kind, name, site, bytes, a)) in after {
        out.push(Row {
            status: Status::New,
            kind,
            name,
            site,
            bytes,
            before: None,
            after: Some(a),
            delta_share: a.share,
            delta_samples: a.samples as i64,
            change_pct: None,
            application: true,
            z: 0.0,
            beyond_noise: false,
        });
    }
    // Rows without samples in either run are no change.
    out.retain(|r| r.before.map_or(0, |s| s.samples) + r.after.map_or(0, |s| s.samples) > 0);
    for r in &mut out {
        let (b, a) = (
            r.before.map_or(0, |s| s.samples),
            r.after.map_or(0, |s| s.samples),
        );
        r.z = share_z(b, total_before, a, total_after);
        r.beyond_noise = share_beyond_noise(b, total_before, a, total_after);
    }
    out.sort_by(|x, y| {
        y.beyond_noise
            .cmp(&x.beyond_noise)
            .then_with(|| {
                y.delta_samples
                    .unsigned_abs()
                    .cmp(&x.delta_samples.unsigned_abs())
            })
            .then_with(|| x.name.cmp(&y.name))
            .then_with(|| x.site.cmp(&y.site))
    });
    out
}

fn cpu_samples(db: &Database) -> Option<u64> {
    let col = db.metric_column(views::CPU_SAMPLES)?;
    let inc = db.code.inclusive(db.info.metrics.len().max(1));
    inc.first().and_then(|r| r.get(col)).copied()
}

fn data_total(db: &Database) -> u64 {
    let primary = db.info.primary_metric as usize;
    views::objects(db).iter().map(|o| o.metrics[primary]).sum()
}

/// Compares `before` with `after`.
pub fn diff(before: &Database, after: &Database) -> Diff {
    let (fb, lb) = code_tables(before);
    let (fa, la) = code_tables(after);
    let (tb, ta) = (data_total(before), data_total(after));
    let mut app = application_keys(before);
    app.extend(application_keys(after));
    // One database predates the naming of unknown addresses by mapping:
    // both sides count them as one row, so that the row pairs.
    let fold_unknown = labels_unknown(before) != labels_unknown(after);
    let mut objects = rows(
        object_table(before, fold_unknown),
        object_table(after, fold_unknown),
    );
    for r in &mut objects {
        r.application = app.contains(&r.key());
    }
    let app_total = |side: fn(&Row) -> Option<Side>| -> u64 {
        objects
            .iter()
            .filter(|r| r.application)
            .filter_map(|r| side(r).map(|s| s.samples))
            .sum()
    };
    let time = |db: &Database| Some(db.info.stats.cpu_time_ns).filter(|&t| t > 0);
    let total = Total {
        before: tb,
        after: ta,
        change_pct: change_pct(tb, ta),
        cpu_before: cpu_samples(before),
        cpu_after: cpu_samples(after),
        cpu_time_before_ns: time(before),
        cpu_time_after_ns: time(after),
        application_before: app_total(|r| r.before),
        application_after: app_total(|r| r.after),
    };
    Diff {
        format: FORMAT,
        version: VERSION,
        metric: after.primary_metric_name().to_string(),
        measure: MEASURE,
        total,
        warnings: noise_warnings(&total)
            .into_iter()
            .chain(fold_unknown.then(|| {
                format!(
                    "one database names its unknown addresses by what was mapped there and the other does not: both are compared as one {UNKNOWN} row"
                )
            }))
            .collect(),
        objects,
        functions: rows(fb, fa),
        lines: rows(lb, la),
    }
}

/// What [`Diff::warnings`] says (see the module documentation).
fn noise_warnings(t: &Total) -> Vec<String> {
    let mut out = Vec::new();
    // All samples when the event counts them (cpu_samples), else the
    // memory samples.
    let (b, a) = match (t.cpu_before, t.cpu_after) {
        (Some(b), Some(a)) => (b, a),
        _ => (t.before, t.after),
    };
    if beyond_noise(b, a) {
        out.push(format!(
            "the runs' total samples differ by more than sampling noise: {b} -> {a} ({}), \
             noise is within {:.0} samples (3 sqrt(before + after)); the runs did different \
             work or ran under different conditions (machine load, input, period): compare \
             shares (d.share) rather than sample counts",
            pct_text(change_pct(b, a)),
            NOISE_SIGMAS * ((a + b) as f64).sqrt()
        ));
    }
    if let (Some(tb), Some(ta)) = (t.cpu_time_before_ns, t.cpu_time_after_ns) {
        let rel = (ta as f64 - tb as f64).abs() / (0.5 * (ta + tb) as f64);
        let resolution = time_resolution(b, a);
        if rel > resolution {
            out.push(format!(
                "the runs' CPU times differ by more than their noise: {:.2} s -> {:.2} s ({}), \
                 more than the {:.1}% these samples resolve (3 sqrt(1/N_before + 1/N_after))",
                tb as f64 / 1e9,
                ta as f64 / 1e9,
                pct_text(change_pct(tb, ta)),
                100.0 * resolution
            ));
        }
    }
    out
}

/// Reasons to fail `--fail-if-worse PCT`: the memory time of the
/// application's objects rose by more than `pct` percent and by more than
/// its sampling noise ([`beyond_noise`]), or a matched application object
/// ([`is_application_object`]) holding at least `min_share` of either run
/// rose by more than `pct` percent and its row changed beyond noise with
/// a growing share ([`Row::beyond_noise`], `z > 0`: the row's verdict).
/// Thread stacks, runtime objects and the `<...>` buckets are not judged.
/// Empty when nothing got worse beyond noise.
pub fn worse(d: &Diff, pct: f64, min_share: f64) -> Vec<String> {
    let mut out = Vec::new();
    let limit = 1.0 + pct / 100.0;
    let (tb, ta) = (d.total.application_before, d.total.application_after);
    if ta as f64 > tb as f64 * limit && ta > 0 && beyond_noise(tb, ta) {
        out.push(format!(
            "total memory time rose from {tb} to {ta} samples in the application's objects ({}), \
             beyond sampling noise ({:.0} samples)",
            pct_text(change_pct(tb, ta)),
            NOISE_SIGMAS * ((ta + tb) as f64).sqrt()
        ));
    }
    for r in &d.objects {
        let (Some(b), Some(a)) = (r.before, r.after) else {
            continue;
        };
        if !r.application || !r.beyond_noise || r.z <= 0.0 {
            continue;
        }
        if b.share.max(a.share) < min_share {
            continue;
        }
        if a.samples as f64 > b.samples as f64 * limit {
            out.push(format!(
                "object {} ({}) rose from {} to {} samples ({}), its share from {:.1}% to {:.1}% \
                 (z {:+.1}, beyond sampling noise)",
                r.name,
                if r.site.is_empty() {
                    r.kind.as_str()
                } else {
                    &r.site
                },
                b.samples,
                a.samples,
                pct_text(r.change_pct),
                100.0 * b.share,
                100.0 * a.share,
                r.z
            ));
        }
    }
    out
}

fn pct_text(p: Option<f64>) -> String {
    match p {
        Some(p) => format!("{p:+.1}%"),
        None => "new".into(),
    }
}

fn side_text(s: Option<Side>) -> String {
    match s {
        Some(s) => format!("{:>9} {:>6.1}%", s.samples, 100.0 * s.share),
        None => format!("{:>9} {:>7}", "-", ""),
    }
}

/// The text tables' name and site columns are as wide as their longest
/// shown value, at least these widths (characters) ...
const NAME_MIN: usize = 24;
const SITE_MIN: usize = 20;
/// ... and at most these: a longer value is cut in the middle with `…`
/// (both ends stay: a C++ name's class and method, a clone mark, a site's
/// file and line), so the numbers stay in their columns.
const NAME_MAX: usize = 48;
const SITE_MAX: usize = 32;

/// `s` in at most `max` characters, cut in the middle with `…`.
fn elide_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let tail = (max - 1) / 2;
    let mut t: String = s.chars().take(max - 1 - tail).collect();
    t.push('…');
    t.extend(s.chars().skip(n - tail));
    t
}

/// Width of a column of `values`: the longest, within `min..=max`.
fn column_width<'a>(values: impl Iterator<Item = &'a str>, min: usize, max: usize) -> usize {
    values
        .map(|v| v.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(min, max)
}

/// The diff as a text report, at most `top` rows per table, the rows
/// within noise included (after the others).
pub fn to_text(d: &Diff, top: usize) -> String {
    to_text_with(d, top, false)
}

/// How a row's change reads in the text report's last column.
fn verdict_text(r: &Row) -> &'static str {
    if r.beyond_noise {
        "changed"
    } else {
        "within noise"
    }
}

/// The diff as a text report, at most `top` rows per table; with
/// `hide_noise`, only the rows that changed beyond sampling noise.
pub fn to_text_with(d: &Diff, top: usize, hide_noise: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!("measure: {}: {}\n", d.metric, d.measure));
    out.push_str(&format!(
        "total memory time: {} -> {} samples ({}{})",
        d.total.before,
        d.total.after,
        pct_text(d.total.change_pct),
        if beyond_noise(d.total.before, d.total.after) {
            ""
        } else {
            ", within noise"
        }
    ));
    if let (Some(b), Some(a)) = (d.total.cpu_before, d.total.cpu_after) {
        out.push_str(&format!(
            "; all samples: {b} -> {a} ({})",
            pct_text(change_pct(b, a))
        ));
    }
    out.push('\n');
    for w in &d.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    for (title, rows) in [
        ("data objects", &d.objects),
        ("functions", &d.functions),
        ("lines", &d.lines),
    ] {
        let changed = rows.iter().filter(|r| r.beyond_noise).count();
        let listed: Vec<&Row> = rows
            .iter()
            .filter(|r| r.beyond_noise || !hide_noise)
            .collect();
        let shown = &listed[..top.min(listed.len())];
        let name_w = column_width(shown.iter().map(|r| r.name.as_str()), NAME_MIN, NAME_MAX);
        let site_w = column_width(shown.iter().map(|r| r.site.as_str()), SITE_MIN, SITE_MAX);
        out.push_str(&format!(
            "\n{title}: {changed} of {} changed beyond sampling noise\n\
             {:<9} {:<name_w$} {:<site_w$} {:>17} {:>17} {:>9} {:>8} {:>7} {:<12}\n",
            rows.len(),
            "status",
            "name",
            "site",
            "before",
            "after",
            "d.share",
            "change",
            "z",
            "verdict"
        ));
        for r in shown {
            out.push_str(&format!(
                "{:<9} {:<name_w$} {:<site_w$} {} {} {:>+8.1}% {:>8} {:>+7.1} {:<12}\n",
                r.status.as_str(),
                elide_middle(&r.name, name_w),
                elide_middle(&r.site, site_w),
                side_text(r.before),
                side_text(r.after),
                100.0 * r.delta_share,
                match (r.status, r.change_pct) {
                    (Status::Matched, None) => "from 0".to_string(),
                    (Status::Vanished, None) => "-".to_string(),
                    (_, p) => pct_text(p),
                },
                r.z,
                verdict_text(r)
            ));
        }
        if listed.len() > top {
            out.push_str(&format!("({} more)\n", listed.len() - top));
        }
        if hide_noise && changed < rows.len() {
            out.push_str(&format!(
                "({} within noise not shown)\n",
                rows.len() - changed
            ));
        }
    }
    out
}

/// The diff as pretty JSON.
pub fn to_json(d: &Diff) -> String {
    let mut s = serde_json::to_string_pretty(d).unwrap_or_default();
    s.push('\n');
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Every row (objects, functions, lines) as CSV with a header.
pub fn to_csv(d: &Diff) -> String {
    let mut out = String::from(
        "table,status,kind,name,site,bytes,before_samples,before_share,after_samples,after_share,delta_share,delta_samples,change_pct,z,beyond_noise\n",
    );
    let opt = |s: Option<Side>| match s {
        Some(s) => (s.samples.to_string(), format!("{:.6}", s.share)),
        None => (String::new(), String::new()),
    };
    for (table, rows) in [
        ("object", &d.objects),
        ("function", &d.functions),
        ("line", &d.lines),
    ] {
        for r in rows {
            let (bs, bsh) = opt(r.before);
            let (as_, ash) = opt(r.after);
            out.push_str(&format!(
                "{table},{},{},{},{},{},{bs},{bsh},{as_},{ash},{:.6},{},{},{:.3},{}\n",
                r.status.as_str(),
                csv_field(&r.kind),
                csv_field(&r.name),
                csv_field(&r.site),
                r.bytes.map(|b| b.to_string()).unwrap_or_default(),
                r.delta_share,
                r.delta_samples,
                r.change_pct.map(|p| format!("{p:.3}")).unwrap_or_default(),
                r.z,
                r.beyond_noise
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
