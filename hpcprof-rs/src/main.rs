//! `hpcprof-rs`: merges the per-thread measurement files of `hpcrun-rs`,
//! maps them to source and writes a database; exports it as JSON or CSV.
//!
//! ```sh
//! hpcprof-rs measurements/                 # -> db/ (profile.db + src/)
//! hpcprof-rs -o run1.db -j 8 measurements/
//! hpcprof-rs export db/ --view data --format json --top 10
//! ```
//!
//! The work is done by the `hpcprof_rs` library: the merge streams every
//! `*.hpcrun` file of the directory through a fixed number of workers
//! (`-j N`; damaged files are skipped with a warning), symbolises raw
//! addresses with addr2line, merges the code-centric and the data-centric
//! trees with per-thread and per-rank distributions, names heap objects
//! after the variable their allocation is assigned to and writes the
//! database atomically.
//!
//! Exit status: 0 on success; 1 with `--strict` when a file was skipped;
//! 2 when nothing was written (bad arguments, no measurements, an existing
//! output, an unreadable database to export).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use formats::database::{Database, DbInfo, FILE_NAME};
use formats::export::{self, View};
use hpcprof_rs::{db, merge, read};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
struct MergeArgs {
    /// Database directory to write.
    #[arg(short = 'o', long = "output", value_name = "DB", default_value = "db")]
    output: PathBuf,

    /// Worker threads for reading and symbolising [default: one per CPU].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    jobs: Option<usize>,

    /// Replace DB if it exists (only if it is an hpcprof-rs database).
    #[arg(long)]
    force: bool,

    /// Exit with status 1 if any measurement file was skipped.
    #[arg(long)]
    strict: bool,

    /// A function that wraps the allocator (glob on the demangled name,
    /// with or without its parameters, e.g. 'hypre_*Alloc' or
    /// '*Memory::s*alloc'): allocation sites are shown in its callers.
    /// Repeatable; common wrappers are found without it (docs/GUIDE.md,
    /// "Real applications").
    #[arg(long = "alloc-wrapper", value_name = "PATTERN")]
    alloc_wrapper: Vec<String>,

    /// Merge on MPI: run under `mpirun -np P` (or `srun`); the ranks share
    /// the files (all threads of a measured process on one rank, `-j`
    /// workers each) and rank 0 writes the database, byte-identical to the
    /// serial merge's. Needs a build with `--features mpi`
    /// (docs/GUIDE.md, "Merging on MPI").
    #[arg(long)]
    mpi: bool,

    /// Directory of *.hpcrun files written by hpcrun-rs.
    #[arg(value_name = "MEASUREMENTS_DIR")]
    measurements: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ViewArg {
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
enum FormatArg {
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
struct ExportArgs {
    /// Database directory written by hpcprof-rs (or its profile.db file).
    #[arg(value_name = "DB")]
    db: PathBuf,

    /// Which table to export.
    #[arg(long, value_enum, default_value = "data")]
    view: ViewArg,

    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: FormatArg,

    /// Keep only the first N rows.
    #[arg(long, value_name = "N")]
    top: Option<usize>,

    /// Leave out the rows of MPI libraries and OpenMP runtimes (the memory
    /// they allocated, the functions of their modules); shares stay of
    /// the whole run. JSON and CSV.
    #[arg(long)]
    hide_runtime: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DiffFormatArg {
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
    after_help = "Exit status: 0, or 1 with --fail-if-worse when something got worse; 2 on errors."
)]
struct DiffArgs {
    /// Database of the run before the change.
    #[arg(value_name = "BEFORE_DB")]
    before: PathBuf,

    /// Database of the run after the change.
    #[arg(value_name = "AFTER_DB")]
    after: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: DiffFormatArg,

    /// Text: show only the first N rows of each table.
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,

    /// Exit with status 1 when the memory time of the application's
    /// objects, or the samples of a matched application object, rose by
    /// more than PCT percent (for CI). Thread stacks, MPI and OpenMP
    /// runtime objects and the <...> buckets are not judged.
    #[arg(long, value_name = "PCT")]
    fail_if_worse: Option<f64>,

    /// With --fail-if-worse: ignore objects below this share (in percent)
    /// of all data samples in both runs (their counts are noise).
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    min_share: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AdviseFormatArg {
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
struct AdviseArgs {
    /// Database directory written by hpcprof-rs (or its profile.db file).
    #[arg(value_name = "DB")]
    db: PathBuf,

    /// Size of the fast memory (HBM, MCDRAM, a scratchpad, the local node's
    /// share) to fill.
    #[arg(long, value_name = "SIZE", value_parser = hpcprof_rs::advise::parse_size)]
    fast_mem: Option<u64>,

    /// Placement unit ranges are rounded out to: page (4 KiB), line (64 B)
    /// or a size.
    #[arg(long, value_name = "page|line|BYTES", default_value = "page", value_parser = hpcprof_rs::advise::parse_granularity)]
    granularity: u64,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: AdviseFormatArg,
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
fn mistyped_subcommand(arg: &std::ffi::OsStr) -> Option<&'static str> {
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

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(sub) = args.get(1).and_then(|a| mistyped_subcommand(a)) {
        let arg = args[1].to_string_lossy();
        let _ = writeln!(
            std::io::stderr(),
            "error: unrecognized subcommand '{arg}'\n\n  tip: a similar subcommand exists: '{sub}'\n\nUsage: hpcprof-rs {sub} ... (see hpcprof-rs {sub} --help)\n       hpcprof-rs [OPTIONS] <MEASUREMENTS_DIR>"
        );
        return ExitCode::from(2);
    }
    let result = if args.get(1).is_some_and(|a| a == "export") {
        let rest =
            std::iter::once(OsString::from("hpcprof-rs export")).chain(args[2..].iter().cloned());
        run_export(ExportArgs::parse_from(rest))
    } else if args.get(1).is_some_and(|a| a == "diff") {
        let rest =
            std::iter::once(OsString::from("hpcprof-rs diff")).chain(args[2..].iter().cloned());
        run_diff(DiffArgs::parse_from(rest))
    } else if args.get(1).is_some_and(|a| a == "advise") {
        let rest =
            std::iter::once(OsString::from("hpcprof-rs advise")).chain(args[2..].iter().cloned());
        run_advise(AdviseArgs::parse_from(rest))
    } else {
        run_merge(MergeArgs::parse_from(args))
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hpcprof-rs: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Blocks of at least this size get their own mapping from glibc's malloc.
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Fixes glibc's mmap threshold at 128 KiB (its starting value, which it
/// otherwise raises up to 32 MiB after the first large block is freed).
/// The merge's per-node vectors and tables grow by doubling: as their own
/// mappings they grow in place with `mremap` and go back to the kernel when
/// freed; from the heap, every growth copies and old and new are resident
/// together. Measured on 1,000 profiles: peak memory -3 to -4 MB.
fn keep_large_blocks_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter; it is called before
    // any worker thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

fn run_merge(args: MergeArgs) -> Result<ExitCode> {
    keep_large_blocks_mapped();
    if let Some(n) = args.jobs {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .context("cannot start the worker threads")?;
    }
    // Refuse before doing any work.
    let wrappers =
        hpcprof_rs::name::Wrappers::new(&args.alloc_wrapper).map_err(anyhow::Error::msg)?;
    let (mut merged, files) = if args.mpi {
        match merge_on_mpi(&args)? {
            Some(m) => m,
            // Another rank: its share went to rank 0.
            None => return Ok(ExitCode::SUCCESS),
        }
    } else {
        measurements_or_hint(&args.measurements)?;
        let files = read::find(&args.measurements)?;
        db::check_output(&args.output, args.force)?;
        let progress = progress_bar(&files);
        let merged = merge::merge_files(&files, &|bytes| progress.inc(bytes));
        progress.finish_and_clear();
        (merged, files.len())
    };
    let db = &mut merged.db;
    hpcprof_rs::name::name_objects(&mut db.objects, &db.frames, &wrappers);
    let skipped = merged.db.info.skipped.len();
    for (file, reason) in &merged.db.info.skipped {
        eprintln!("hpcprof-rs: warning: skipping {file}: {reason}");
    }
    if merged.db.info.profiles == 0 {
        anyhow::bail!(
            "none of the {} measurement files in {} could be read",
            files,
            args.measurements.display()
        );
    }
    for w in &merged.warnings {
        eprintln!("hpcprof-rs: warning: {w}");
    }
    let t0 = std::time::Instant::now();
    let written = db::write(&merged.db, &args.output, args.force)?;
    if std::env::var_os("HPCPROF_RS_TIMINGS").is_some() {
        eprintln!(
            "hpcprof-rs: timings: database written in {:.3}s",
            t0.elapsed().as_secs_f64()
        );
    }
    for w in &written.warnings {
        eprintln!("hpcprof-rs: warning: {w}");
    }
    eprintln!("{}", summary(&merged.db.info, &args.output, skipped));
    for line in notes(&merged.db.info) {
        eprintln!("{line}");
    }
    if args.strict && skipped > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--mpi`: this rank's part of the distributed merge; rank 0 gets the
/// merged result and the number of files, the other ranks `None`.
#[cfg(feature = "mpi")]
fn merge_on_mpi(args: &MergeArgs) -> Result<Option<(merge::Streamed, usize)>> {
    use hpcprof_rs::distributed::{self, Outcome};
    let check = || db::check_output(&args.output, args.force).map_err(|e| format!("{e:#}"));
    match distributed::merge(&args.measurements, &check, &|_| {}) {
        Ok(Outcome::Root(merged)) => {
            let n = merged.db.info.profiles as usize + merged.db.info.skipped.len();
            Ok(Some((*merged, n)))
        }
        Ok(Outcome::Sent) => Ok(None),
        Ok(Outcome::Failed) => std::process::exit(2),
        Err(e) => Err(anyhow::anyhow!(e)),
    }
}

/// `--mpi` in a build without MPI support.
#[cfg(not(feature = "mpi"))]
fn merge_on_mpi(_: &MergeArgs) -> Result<Option<(merge::Streamed, usize)>> {
    anyhow::bail!(
        "--mpi: this hpcprof-rs was built without MPI support; build it with `cargo build --release -p hpcprof-rs --features mpi` (needs an MPI library, e.g. Debian's libopenmpi-dev or libmpich-dev, and libclang-dev) and run it under mpirun or srun"
    )
}

/// Input size above which a merge shows a progress bar (on a terminal only).
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

/// A progress bar over the input bytes when stderr is a terminal and the
/// input is large enough for the merge to take a while; hidden otherwise.
fn progress_bar(files: &[PathBuf]) -> ProgressBar {
    let total: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    if !std::io::stderr().is_terminal() || total < PROGRESS_MIN_BYTES {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "hpcprof-rs: merging {bar:40} {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

/// The one-line summary printed after a merge.
fn summary(info: &DbInfo, out: &Path, skipped: usize) -> String {
    let s = &info.stats;
    let pct = if s.memory_samples == 0 {
        0.0
    } else {
        100.0 * s.address_recovered as f64 / s.memory_samples as f64
    };
    let dropped = if s.dropped.is_empty() {
        "none".to_string()
    } else {
        s.dropped
            .iter()
            .map(|(cause, n)| format!("{cause}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "hpcprof-rs: merged {} profiles ({} processes, {} ranks, {} threads) into {}; {skipped} files skipped; samples: {}, memory accesses: {}, address recovered: {} ({pct:.1}%); dropped: {dropped}",
        info.profiles,
        info.processes,
        info.ranks.len(),
        info.threads,
        out.display(),
        s.samples,
        s.memory_samples,
        s.address_recovered,
    )
}

/// Lines after the summary: what the measurement notices say (a program
/// that damaged its own measurement), short-lived threads when they took a
/// measurable share of the run (`formats::notes::short_lived`), signals
/// the program blocked, and checkpoints of runs that did not finish.
fn notes(info: &DbInfo) -> Vec<String> {
    let s = &info.stats;
    let mut out: Vec<String> = s
        .notices
        .iter()
        .map(|(notice, n)| {
            let threads = if *n == 1 { "thread" } else { "threads" };
            match notice.strip_prefix("note: ") {
                Some(note) => format!("hpcprof-rs: note: {note} ({n} {threads})"),
                None => format!("hpcprof-rs: warning: {notice} ({n} {threads})"),
            }
        })
        .collect();
    if let Some(note) = s.short_lived_note() {
        let n = s.short_lived_threads;
        let threads = if n == 1 { "thread" } else { "threads" };
        let note = note.strip_prefix("note: ").unwrap_or(&note);
        out.push(format!("hpcprof-rs: note: {note} ({n} {threads})"));
    }
    if s.signal_blocks > 0 {
        out.push(format!(
            "hpcprof-rs: note: the program asked {} time(s) to block the profiler's sampling signal; hpcrun-rs kept it unblocked so that sampling went on (the program's own signals of that number were held back as it asked)",
            s.signal_blocks
        ));
    }
    // The profiler's own time: said when it is a measurable share of the
    // run (or asked for with HPCPROF_RS_TIMINGS), not on every merge.
    let share = profiler_share(s);
    let loud = share.map_or(
        slow_handler(&s.handler_time, s.cpu_time_ns).is_some(),
        |x| x >= PROFILER_NOTE_SHARE,
    );
    if loud || std::env::var_os("HPCPROF_RS_TIMINGS").is_some() {
        if let Some(line) = profiler_time(s) {
            out.push(line);
        }
    }
    if loud {
        if let Some(line) = slow_handler(&s.handler_time, s.cpu_time_ns) {
            out.push(line);
        }
    }
    if s.checkpoints > 0 {
        out.push(format!(
            "hpcprof-rs: note: {} of {} profiles are checkpoints of a run that did not finish (killed?): they hold what was measured up to the last checkpoint (hpcrun-rs --checkpoint SECS)",
            s.checkpoints, info.profiles
        ));
    }
    out
}

/// Share of the sampled threads' CPU time from which the profiler's own
/// time (sample handler and allocation hooks) is said after the summary:
/// the overhead budget at the default period.
const PROFILER_NOTE_SHARE: f64 = 0.03;

/// The profiler's own time (handler and hooks) as a share of the sampled
/// threads' CPU time; None for files without that time.
fn profiler_share(s: &formats::measurement::SampleStats) -> Option<f64> {
    (s.cpu_time_ns > 0).then(|| {
        (s.handler_time.total_ns + s.hook_time.estimated_ns()) as f64 / s.cpu_time_ns as f64
    })
}

/// What the profiler's own code took inside the program, from the
/// measurement's counters: the sample handler (`handler_time`, every
/// sample timed) and the allocation hooks (`hook_time`, one call in
/// `HOOK_TIME_EVERY` timed), with their share of the sampled threads' CPU
/// time. None when neither ran (or for files older than the counters).
fn profiler_time(s: &formats::measurement::SampleStats) -> Option<String> {
    let handler_ns = s.handler_time.total_ns;
    let samples = s.handler_time.samples();
    let hook_ns = s.hook_time.estimated_ns();
    let calls = s.hook_time.calls;
    if samples == 0 && calls == 0 {
        return None;
    }
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let mut line = format!(
        "hpcprof-rs: profiler time in the program: sample handler {} ({samples} samples, mean {:.1} us), allocation hooks {} ({calls} calls, mean {} ns)",
        ms(handler_ns),
        handler_ns as f64 / 1e3 / samples.max(1) as f64,
        ms(hook_ns),
        hook_ns / calls.max(1),
    );
    if s.cpu_time_ns > 0 {
        line.push_str(&format!(
            "; together {:.1}% of the {:.2} s of CPU time the threads were sampled for",
            100.0 * (handler_ns + hook_ns) as f64 / s.cpu_time_ns as f64,
            s.cpu_time_ns as f64 / 1e9,
        ));
    }
    Some(line)
}

/// Handler time per sample from which a sample counts as slow: at the
/// default period (2 ms of a thread's CPU time) a 20 us handler costs 1%.
const SLOW_HANDLER_NS: u64 = 20_000;
/// Share of slow samples above which the summary says so (files without
/// the threads' CPU time): then the 99th percentile of the handler time is
/// at least `SLOW_HANDLER_NS`.
const SLOW_HANDLER_SHARE: f64 = 0.01;
/// Share of the sampled threads' CPU time in the handler above which the
/// summary says so.
const SLOW_HANDLER_CPU_SHARE: f64 = 0.01;

/// A note when the handler took more than `SLOW_HANDLER_CPU_SHARE` of the
/// sampled threads' CPU time (`cpu_time_ns`; whatever the period), or,
/// for files without that time, when more than `SLOW_HANDLER_SHARE` of
/// the samples took `SLOW_HANDLER_NS` or more (`SampleStats::handler_time`).
fn slow_handler(h: &formats::measurement::HandlerTime, cpu_time_ns: u64) -> Option<String> {
    let total = h.samples();
    let slow = h.at_least(SLOW_HANDLER_NS);
    let costly = if cpu_time_ns > 0 {
        h.total_ns as f64 > SLOW_HANDLER_CPU_SHARE * cpu_time_ns as f64
    } else {
        (slow as f64) > SLOW_HANDLER_SHARE * total as f64
    };
    if total == 0 || !costly {
        return None;
    }
    let cost = if cpu_time_ns > 0 {
        format!(
            "it took {:.1}% of the sampled threads' CPU time; ",
            100.0 * h.total_ns as f64 / cpu_time_ns as f64
        )
    } else {
        String::new()
    };
    let us = |ns: u64| format!("{:.1} us", ns as f64 / 1e3);
    let p99 = match h.quantile_bound(0.99) {
        Some(b) => format!("99% under {}", us(b)),
        None => format!(
            "the slowest 1% over {}",
            us(h.bounds_ns.last().copied().unwrap_or(0))
        ),
    };
    Some(format!(
        "hpcprof-rs: note: the sample handler was slow: {cost}{slow} of {total} samples ({:.1}%) took {} or more ({p99}, longest {}, mean {}); at the default period (2 ms) every 20 us per sample costs the program 1%, a longer period (-e EVENT@NS) costs less (docs/PERFORMANCE.md)",
        100.0 * slow as f64 / total as f64,
        us(SLOW_HANDLER_NS),
        us(h.max_ns),
        us(h.total_ns / total),
    ))
}

/// `path`, given as a measurements directory, is not a database or one
/// file: else an error that says what it is and which command takes it.
fn measurements_or_hint(path: &Path) -> Result<()> {
    use formats::inspect::{inspect, PathKind};
    let p = path.display();
    match inspect(path) {
        PathKind::Database | PathKind::DatabaseFile => anyhow::bail!(
            "{p} is a database written by hpcprof-rs, not a measurements directory: look at it with `hpcview-tui {p}` (or `hpcview-tui {p} --report`), or print it with `hpcprof-rs export {p}`"
        ),
        PathKind::MeasurementFile => {
            let parent = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            anyhow::bail!(
                "{p} is one measurement file; hpcprof-rs merges the directory that holds it: `hpcprof-rs {}`",
                parent.display()
            )
        }
        _ => Ok(()),
    }
}

/// `path`, given to `command` as a database, is not a measurements
/// directory or file: else an error that says to merge it first.
fn database_or_hint(path: &Path, command: &str) -> Result<()> {
    use formats::inspect::{inspect, PathKind};
    let p = path.display();
    match inspect(path) {
        PathKind::Measurements { files } => anyhow::bail!(
            "{p} is a measurements directory of hpcrun-rs ({files} measurement file(s)), not a database: merge it first with `hpcprof-rs -o db {p}`, then `{command} db`"
        ),
        PathKind::MeasurementFile => anyhow::bail!(
            "{p} is a measurement file of hpcrun-rs, not a database: merge its directory first with `hpcprof-rs -o db DIR`, then `{command} db`"
        ),
        _ => Ok(()),
    }
}

/// Reads a database directory (or its `profile.db`); errors name the file.
fn load(path: &Path) -> Result<Database> {
    let file = if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    };
    if !path.exists() {
        anyhow::bail!("database {} does not exist", path.display());
    }
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    Database::from_bytes(&bytes).with_context(|| format!("cannot use {}", file.display()))
}

fn run_export(args: ExportArgs) -> Result<ExitCode> {
    database_or_hint(&args.db, "hpcprof-rs export")?;
    let db = load(&args.db)?;
    let view = match args.view {
        ViewArg::Data => View::Data,
        ViewArg::Code => View::Code,
        ViewArg::Bottleneck => View::Bottleneck,
        ViewArg::Threads => View::Threads,
    };
    let options = export::Options {
        hide_runtime: args.hide_runtime,
    };
    let text = match args.format {
        FormatArg::Json => export::to_json_with(&db, view, args.top, options),
        FormatArg::Csv => export::to_csv_with(&db, view, args.top, options),
        FormatArg::Hatchet if args.hide_runtime => {
            anyhow::bail!("--hide-runtime works with --format json and csv, not hatchet")
        }
        FormatArg::Hatchet => {
            let tree = match view {
                View::Code => formats::hatchet::Tree::Code,
                View::Data => formats::hatchet::Tree::Data,
                View::Bottleneck | View::Threads => {
                    anyhow::bail!("--format hatchet writes a tree: use --view code or --view data")
                }
            };
            formats::hatchet::to_literal(&db, tree, args.top)
        }
    };
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes a report to standard output; a closed pipe
/// (`hpcprof-rs export db | head`) is fine.
fn print_out(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("cannot write to standard output"),
    }
}

fn run_diff(args: DiffArgs) -> Result<ExitCode> {
    if let Some(p) = args.fail_if_worse {
        if !p.is_finite() || p < 0.0 {
            anyhow::bail!("--fail-if-worse {p}: give a percentage of 0 or more");
        }
    }
    database_or_hint(&args.before, "hpcprof-rs diff")?;
    database_or_hint(&args.after, "hpcprof-rs diff")?;
    let before = load(&args.before)?;
    let after = load(&args.after)?;
    let d = formats::diff::diff(&before, &after);
    let text = match args.format {
        DiffFormatArg::Text => formats::diff::to_text(&d, args.top),
        DiffFormatArg::Json => formats::diff::to_json(&d),
        DiffFormatArg::Csv => formats::diff::to_csv(&d),
    };
    print_out(&text)?;
    for w in &d.warnings {
        eprintln!("hpcprof-rs: warning: {w}");
    }
    if let Some(pct) = args.fail_if_worse {
        let reasons = formats::diff::worse(&d, pct, args.min_share / 100.0);
        for r in &reasons {
            eprintln!("hpcprof-rs: worse by more than {pct}%: {r}");
        }
        if !reasons.is_empty() {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_advise(args: AdviseArgs) -> Result<ExitCode> {
    use hpcprof_rs::advise;
    database_or_hint(&args.db, "hpcprof-rs advise")?;
    let db = load(&args.db)?;
    let placement = args
        .fast_mem
        .map(|size| formats::advice::place(&db, size, args.granularity));
    let numa = formats::advice::numa(&db);
    let has_first_touch = db.metric_column("first_touch").is_some();
    let text = match args.format {
        AdviseFormatArg::Text => advise::to_text(&db, placement.as_ref(), &numa, has_first_touch),
        AdviseFormatArg::Json => advise::to_json(placement.as_ref(), &numa, has_first_touch),
    };
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
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

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("hpcprof-rs-main-load-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let err = format!("{:#}", load(&dir.join("nope")).unwrap_err());
        assert!(
            err.contains("nope") && err.contains("does not exist"),
            "{err}"
        );
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains(FILE_NAME), "{err}");
        std::fs::write(dir.join(FILE_NAME), b"HPCPROFD\x09\0\0\0\0\0\0\0xxxx").unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains(FILE_NAME) && err.contains("newer"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn slow_handler_note() {
        use formats::measurement::{HandlerTime, HANDLER_TIME_BOUNDS_NS};
        let mut h = HandlerTime {
            bounds_ns: HANDLER_TIME_BOUNDS_NS.to_vec(),
            counts: vec![990, 9, 0, 0, 0, 1, 0, 0],
            max_ns: 30_000,
            total_ns: 1_000_000,
        };
        // Files without the threads' CPU time: by the share of slow
        // samples. 0.1% at 20 us or more: quiet.
        assert_eq!(slow_handler(&h, 0), None);
        assert_eq!(slow_handler(&HandlerTime::default(), 0), None);
        h.counts = vec![900, 50, 0, 0, 0, 35, 0, 15];
        h.max_ns = 250_000;
        let line = slow_handler(&h, 0).unwrap();
        assert!(
            line.contains("was slow: 50 of 1000 samples (5.0%) took 20.0 us or more")
                && line.contains("the slowest 1% over 100.0 us")
                && line.contains("longest 250.0 us, mean 1.0 us"),
            "{line}"
        );
        // With it: by the handler's share of that time, whatever the
        // period. 1 ms of 2 s (0.05%): quiet, however many were slow.
        assert_eq!(slow_handler(&h, 2_000_000_000), None);
        // 30 ms of 2 s: 1.5%.
        h.total_ns = 30_000_000;
        let line = slow_handler(&h, 2_000_000_000).unwrap();
        assert!(
            line.contains("was slow: it took 1.5% of the sampled threads' CPU time; 50 of 1000"),
            "{line}"
        );
    }

    #[test]
    fn profiler_time_line() {
        use formats::measurement::{HandlerTime, HookTime, SampleStats};
        assert_eq!(profiler_time(&SampleStats::default()), None);
        let s = SampleStats {
            cpu_time_ns: 2_000_000_000,
            handler_time: HandlerTime {
                bounds_ns: vec![1000],
                counts: vec![0, 1000],
                max_ns: 30_000,
                total_ns: 20_000_000,
            },
            hook_time: HookTime {
                calls: 160_000,
                timed: 10_000,
                timed_ns: 2_500_000,
            },
            ..Default::default()
        };
        let line = profiler_time(&s).unwrap();
        assert!(
            line.contains("sample handler 20.0 ms (1000 samples, mean 20.0 us)")
                && line.contains("allocation hooks 40.0 ms (160000 calls, mean 250 ns)")
                && line.contains("together 3.0% of the 2.00 s of CPU time"),
            "{line}"
        );
    }

    #[test]
    fn summary_line() {
        let mut db = Database::default();
        db.info.profiles = 2;
        db.info.processes = 1;
        db.info.threads = 2;
        db.info.stats.samples = 10;
        db.info.stats.memory_samples = 8;
        db.info.stats.address_recovered = 6;
        db.info.stats.dropped.insert("tree full".into(), 3);
        let s = summary(&db.info, Path::new("db"), 1);
        assert_eq!(
            s,
            "hpcprof-rs: merged 2 profiles (1 processes, 0 ranks, 2 threads) into db; 1 files skipped; samples: 10, memory accesses: 8, address recovered: 6 (75.0%); dropped: tree full: 3"
        );
    }
}
