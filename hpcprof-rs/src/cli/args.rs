//! The command line: `hpcprof-rs`'s arguments (the merge) and those of its
//! subcommands `export`, `diff` and `advise` (clap definitions, with the
//! help texts), and the "did you mean" for a mistyped subcommand.

use std::path::{Path, PathBuf};

use clap::{Parser, ValueEnum};

const MERGE_AFTER_HELP: &str = "\
Subcommands:
  export DB    Print a database as JSON or CSV (see `hpcprof-rs export --help`)
  diff BEFORE AFTER
               Compare two databases (see `hpcprof-rs diff --help`)
  advise DB [--fast-mem SIZE]
               Placement in fast memory and NUMA advice (see `hpcprof-rs
               advise --help`)

A measurement directory literally named `export`, `diff` or `advise` can be
given as `./export`, `./diff` or `./advise`.

Exit status: 0 on success, 1 with --strict when a file was skipped,
2 when no database was written.";

/// Merge hpcrun-rs measurements into a database.
///
/// Reads every *.hpcrun file of MEASUREMENTS_DIR (not recursive), maps raw
/// addresses to functions, files and lines (addr2line, with inlining),
/// merges all threads, processes and ranks, and writes DB/profile.db plus
/// copies of the source files under DB/src/. Damaged files are skipped with
/// a warning.
#[derive(Debug, Parser)]
#[command(
    name = "hpcprof-rs",
    version,
    override_usage = "hpcprof-rs [OPTIONS] <MEASUREMENTS_DIR>\n       hpcprof-rs export [OPTIONS] <DB>\n       hpcprof-rs diff [OPTIONS] <BEFORE> <AFTER>\n       hpcprof-rs advise [OPTIONS] <DB>",
    after_help = MERGE_AFTER_HELP
)]
pub(crate) struct MergeArgs {
    /// Database directory to write.
    #[arg(short = 'o', long = "output", value_name = "DB", default_value = "db")]
    pub(crate) output: PathBuf,

    /// Worker threads for reading and symbolising [default: one per CPU].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub(crate) jobs: Option<usize>,

    /// Replace DB if it exists (only if it is an hpcprof-rs database).
    #[arg(long)]
    pub(crate) force: bool,

    /// Exit with status 1 if any measurement file was skipped.
    #[arg(long)]
    pub(crate) strict: bool,

    /// A function that wraps the allocator (glob on the demangled name,
    /// with or without its parameters, e.g. 'hypre_*Alloc' or
    /// '*Memory::s*alloc'): allocation sites are shown in its callers.
    /// Repeatable; common wrappers are found without it (docs/GUIDE.md,
    /// "Real applications").
    #[arg(long = "alloc-wrapper", value_name = "PATTERN")]
    pub(crate) alloc_wrapper: Vec<String>,

    /// Merge only the profiles of this run (its id, or the start of it),
    /// when the directory holds several: hpcprof-rs lists them. The
    /// others are left out, with a note.
    #[arg(long = "run", value_name = "ID", conflicts_with = "allow_mixed")]
    pub(crate) run: Option<String>,

    /// Merge the profiles of several runs (runs of hpcrun-rs whose files
    /// were put into one directory) into one database, on purpose.
    /// Without it such a directory is refused.
    #[arg(long = "allow-mixed")]
    pub(crate) allow_mixed: bool,

    /// Merge on MPI: run under `mpirun -np P` (or `srun`); the ranks share
    /// the files (all threads of a measured process on one rank, `-j`
    /// workers each) and rank 0 writes the database, byte-identical to the
    /// serial merge's. Needs a build with `--features mpi`
    /// (docs/GUIDE.md, "Merging on MPI").
    #[arg(long)]
    pub(crate) mpi: bool,

    /// Directory of *.hpcrun files written by hpcrun-rs.
    #[arg(value_name = "MEASUREMENTS_DIR")]
    pub(crate) measurements: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ViewArg {
    /// Data objects (heap, static, stack, unknown), hottest first.
    Data,
    /// Functions with their lines, hottest first.
    Code,
    /// Objects and functions ranked by the bottleneck-priority rule
    /// (memory bound and large share first; see docs/FORMATS.md).
    Bottleneck,
    /// Per-thread and per-rank distributions of the program, the data
    /// roots and every object.
    Threads,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    /// The stable JSON document (`format`, `version`, ...).
    Json,
    /// One row per object or function, with a header line.
    Csv,
    /// The code-centric (`--view code`) or data-centric (`--view data`)
    /// tree in the literal format of LLNL Hatchet's
    /// `GraphFrame.from_literal` (docs/FORMATS.md).
    Hatchet,
}

/// Print a database as JSON, CSV or a Hatchet literal on standard output.
///
/// The JSON document is a stable interface for scripts: fields are only ever
/// added; its `version` changes if one must go.
#[derive(Debug, Parser)]
#[command(name = "hpcprof-rs export", bin_name = "hpcprof-rs export", version)]
pub(crate) struct ExportArgs {
    /// Database directory written by hpcprof-rs (or its profile.db file).
    #[arg(value_name = "DB")]
    pub(crate) db: PathBuf,

    /// Which table to export.
    #[arg(long, value_enum, default_value = "data")]
    pub(crate) view: ViewArg,

    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    pub(crate) format: FormatArg,

    /// Keep only the first N rows.
    #[arg(long, value_name = "N")]
    pub(crate) top: Option<usize>,

    /// Leave out the rows of MPI libraries and OpenMP runtimes (the memory
    /// they allocated, the functions of their modules); shares stay of
    /// the whole run. JSON and CSV.
    #[arg(long)]
    pub(crate) hide_runtime: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DiffFormatArg {
    /// A report for people.
    Text,
    /// The `hpcprof-rs/diff` JSON document (see docs/FORMATS.md).
    Json,
    /// One row per object, function and line, with a header line.
    Csv,
}

/// Compare two databases: objects matched by name and allocation site
/// (file name and line, not addresses), code by function and line.
///
/// Shows, per object, function and line, the samples and the share before
/// and after, the change of share and of samples, and new and vanished
/// objects. The databases record no wall-clock time: samples (at a fixed
/// sampling period, time) are compared, not samples per second.
///
/// Noise: a sample count N varies by about sqrt(N) between runs of the same
/// work. A warning says when the two runs' total samples differ by more
/// than 3 sqrt(before + after), or their sampled CPU times by more than the
/// 3 sqrt(1/N_before + 1/N_after) these samples resolve: the runs then did
/// different work or ran under different load, and shares compare better
/// than counts.
#[derive(Debug, Parser)]
#[command(
    name = "hpcprof-rs diff",
    bin_name = "hpcprof-rs diff",
    version,
    after_help = "Exit status: 0, or 1 with --fail-if-worse when something got worse beyond sampling noise; 2 on errors."
)]
pub(crate) struct DiffArgs {
    /// Database of the run before the change.
    #[arg(value_name = "BEFORE_DB")]
    pub(crate) before: PathBuf,

    /// Database of the run after the change.
    #[arg(value_name = "AFTER_DB")]
    pub(crate) after: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: DiffFormatArg,

    /// Text: show only the first N rows of each table.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(crate) top: usize,

    /// Text: list only the rows whose share changed beyond sampling noise
    /// (the others are counted). By default they are listed after the
    /// changed ones, marked "within noise".
    #[arg(long)]
    pub(crate) hide_noise: bool,

    /// Exit with status 1 when the memory time of the application's
    /// objects, or the samples of a matched application object, rose by
    /// more than PCT percent and beyond sampling noise (for CI): the total
    /// by more than 3 sqrt(before + after) samples, an object when its row
    /// is a change beyond noise with a growing share (verdict "changed",
    /// z > 0). Two runs of the same build pass. Thread stacks, MPI and
    /// OpenMP runtime objects and the <...> buckets are not judged.
    #[arg(long, value_name = "PCT")]
    pub(crate) fail_if_worse: Option<f64>,

    /// With --fail-if-worse: ignore objects below this share (in percent)
    /// of all data samples in both runs (their counts are noise).
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub(crate) min_share: f64,

    /// Standard deviations beyond which a difference is a change, not
    /// noise (the 3s above; for the rows' exact test, the same two-sided
    /// probability: 0.27% at 3, 0.0063% at 4). Each row is a test of its
    /// own: a gate over many objects raises false alarms at about 0.27% a
    /// row at 3, so a nightly gate over dozens of objects may want 4.
    #[arg(long, value_name = "K", default_value_t = formats::diff::NOISE_SIGMAS)]
    pub(crate) noise_sigmas: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AdviseFormatArg {
    /// A report for people.
    Text,
    /// The `hpcprof-rs/advise` JSON document (see docs/FORMATS.md).
    Json,
}

/// Decisions from a database: what to put into a small fast memory, and
/// where objects should live on a NUMA machine.
///
/// With --fast-mem SIZE: the whole objects and contiguous byte ranges of
/// objects that cover the most data-centric samples within SIZE (from the
/// objects' offset histograms), next to what the simple strategies would
/// cover (largest objects first, hottest objects whole, the end of the
/// hottest object). Always: objects first touched by one thread but used
/// mostly by others (initialise in parallel, or interleave), from a run
/// with `-e page-faults`.
#[derive(Debug, Parser)]
#[command(
    name = "hpcprof-rs advise",
    bin_name = "hpcprof-rs advise",
    version,
    after_help = "SIZE: 32MiB, 1G, 4096 (K/M/G and KiB/MiB/GiB are powers of 1024, KB/MB/GB of 1000).\nExit status: 0, or 2 on errors."
)]
pub(crate) struct AdviseArgs {
    /// Database directory written by hpcprof-rs (or its profile.db file).
    #[arg(value_name = "DB")]
    pub(crate) db: PathBuf,

    /// Size of the fast memory (HBM, MCDRAM, a scratchpad, the local node's
    /// share) to fill.
    #[arg(long, value_name = "SIZE", value_parser = hpcprof_rs::advise::parse_size)]
    pub(crate) fast_mem: Option<u64>,

    /// Placement unit ranges are rounded out to: page (4 KiB), line (64 B)
    /// or a size.
    #[arg(long, value_name = "page|line|BYTES", default_value = "page", value_parser = hpcprof_rs::advise::parse_granularity)]
    pub(crate) granularity: u64,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: AdviseFormatArg,
}

/// The subcommands, for "did you mean".
const SUBCOMMANDS: [&str; 3] = ["export", "diff", "advise"];

/// Edit distance between `a` and `b` (Levenshtein, by characters).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// A first argument that is no path and looks like a mistyped subcommand
/// (`hpcprof-rs exprot db`): the subcommand it resembles.
pub(crate) fn mistyped_subcommand(arg: &std::ffi::OsStr) -> Option<&'static str> {
    let arg = arg.to_str()?;
    if arg.starts_with('-') || SUBCOMMANDS.contains(&arg) || Path::new(arg).exists() {
        return None;
    }
    SUBCOMMANDS
        .iter()
        .copied()
        .filter(|s| distance(arg, s) <= 2)
        .min_by_key(|s| distance(arg, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definitions_are_valid() {
        MergeArgs::command().debug_assert();
        ExportArgs::command().debug_assert();
        DiffArgs::command().debug_assert();
        AdviseArgs::command().debug_assert();
    }

    #[test]
    fn mistyped_subcommands_are_suggested() {
        assert_eq!(distance("exprot", "export"), 2);
        assert_eq!(mistyped_subcommand("exprot".as_ref()), Some("export"));
        assert_eq!(mistyped_subcommand("dif".as_ref()), Some("diff"));
        assert_eq!(mistyped_subcommand("advice".as_ref()), Some("advise"));
        assert_eq!(mistyped_subcommand("measurements".as_ref()), None);
        assert_eq!(mistyped_subcommand("--force".as_ref()), None);
        assert_eq!(mistyped_subcommand("export".as_ref()), None);
    }
}
