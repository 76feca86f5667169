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
//! shares are then the fairer comparison. [`diff_at`] puts another number
//! of standard deviations than 3 in all these tests and those below
//! (`hpcprof-rs diff --noise-sigmas K`).
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
//! ([`DataObject::runtime`](crate::database::DataObject::runtime), `crate::runtimes`), not thread stacks, and not
//! the `<...>` buckets (small heap objects, unknown addresses, sections).
//! It fails only on a rise beyond sampling noise: an object whose samples
//! rose by more than the percentage and whose row is a change beyond
//! noise with a growing share (the row's verdict, [`Row::beyond_noise`]
//! and `z > 0`), or the application objects' total, risen by more than
//! the percentage and by more than `3 sqrt(before + after)` samples
//! ([`beyond_noise`], the totals' test). No object of two runs of the
//! same build fails, whatever percentage is given, but about once in 370
//! diffs per object. Their totals differ as their CPU times do: a
//! machine's load changes those, so the total can fail at a percentage
//! below that change; its reason then says that no object's share rose
//! (every object took longer alike).
//!
//! ```
//! use formats::database::Database;
//! let d = formats::diff::diff(&Database::default(), &Database::default());
//! assert_eq!(d.total.before, 0);
//! assert!(formats::diff::worse(&d, 10.0, 0.01).is_empty());
//! ```
//!
//! The steps, one file each: [`matching`] pairs the rows of the two runs
//! (objects by kind, name and site; functions; lines) and sums the
//! totals; [`noise`] judges the totals and every row against sampling
//! noise and says what `--fail-if-worse` fails on; [`render`] writes the
//! text report, JSON and CSV; below them all, `percent` computes and
//! writes a change in percent.

use serde::Serialize;

use crate::database::Database;

pub mod matching;
pub mod noise;
mod percent;
pub mod render;

pub use matching::{alloc_site, object_key};
pub use noise::{
    beyond_noise, beyond_noise_at, is_application_object, share_beyond_noise,
    share_beyond_noise_at, share_z, time_resolution, time_resolution_at, two_sided_p, worse,
    NOISE_SIGMAS,
};
pub use render::{to_csv, to_json, to_text, to_text_with};

use matching::{
    application_keys, code_tables, cpu_samples, data_total, labels_unknown, object_table, rows,
    UNKNOWN,
};
use noise::noise_warnings;
use percent::change_pct;

/// Value of the top-level `format` field.
pub const FORMAT: &str = "hpcprof-rs/diff";
/// Value of the top-level `version` field.
pub const VERSION: u32 = 1;

/// What [`diff`] says about the measure it compares.
pub const MEASURE: &str = "samples of the primary metric (at a fixed sampling period: time); \
the databases record no wall-clock time, so samples are compared, not samples per second";

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
    /// Standard deviations beyond which a difference is a change, not
    /// noise ([`NOISE_SIGMAS`] unless asked otherwise, [`diff_at`]).
    pub noise_sigmas: f64,
    /// The runs' total samples or run times differ by more than their
    /// noise (see the module documentation); empty otherwise.
    pub warnings: Vec<String>,
}

/// Compares `before` with `after`, noise judged at [`NOISE_SIGMAS`].
pub fn diff(before: &Database, after: &Database) -> Diff {
    diff_at(before, after, NOISE_SIGMAS)
}

/// Compares `before` with `after`, a change beyond noise at `sigmas`
/// standard deviations (the rows' exact test at the same two-sided
/// probability, [`two_sided_p`]).
pub fn diff_at(before: &Database, after: &Database, sigmas: f64) -> Diff {
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
        sigmas,
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
        noise_sigmas: sigmas,
        warnings: noise_warnings(&total, sigmas)
            .into_iter()
            .chain(fold_unknown.then(|| {
                format!(
                    "one database names its unknown addresses by what was mapped there and the other does not: both are compared as one {UNKNOWN} row"
                )
            }))
            .collect(),
        objects,
        functions: rows(fb, fa, sigmas),
        lines: rows(lb, la, sigmas),
    }
}

#[cfg(test)]
mod tests;
