//! The merge (`hpcprof-rs [OPTIONS] MEASUREMENTS_DIR`): reads and merges
//! the measurement files (serially with `-j` workers, or on MPI with
//! `--mpi`), names the objects, writes the database and prints the
//! summary and its notes ([`super::summary`]).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use hpcprof_rs::{db, merge, read, runs};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::args::MergeArgs;
use super::{paths, summary};

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

pub(crate) fn run(args: MergeArgs) -> Result<ExitCode> {
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
    let choice = choice(&args);
    let (mut merged, files, run_notes) = if args.mpi {
        match merge_on_mpi(&args, &choice)? {
            Some(m) => m,
            // Another rank: its share went to rank 0.
            None => return Ok(ExitCode::SUCCESS),
        }
    } else {
        paths::measurements_or_hint(&args.measurements)?;
        let files = read::find(&args.measurements)?;
        db::check_output(&args.output, args.force)?;
        let t0 = std::time::Instant::now();
        let chosen =
            runs::select(&args.measurements, &files, &choice).map_err(anyhow::Error::msg)?;
        if std::env::var_os("HPCPROF_RS_TIMINGS").is_some() {
            eprintln!(
                "hpcprof-rs: timings: {} files' heads read and checked in {:.3}s",
                files.len(),
                t0.elapsed().as_secs_f64()
            );
        }
        let progress = progress_bar(&chosen.files);
        let merged = merge::merge_files(&chosen.files, &|bytes| progress.inc(bytes));
        progress.finish_and_clear();
        (merged, chosen.files.len(), chosen.notes)
    };
    // What the run manifest says is missing.
    let present = read::find(&args.measurements).unwrap_or_default();
    let (losses, manifest) = hpcprof_rs::losses::check(&args.measurements, &present);
    merged.db.info.losses = losses;
    merged.db.info.manifest = manifest;
    let db = &mut merged.db;
    hpcprof_rs::name::name_objects(&mut db.objects, &db.frames, &db.alloc_paths, &wrappers);
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
    eprintln!(
        "{}",
        summary::summary(&merged.db.info, &args.output, skipped)
    );
    for line in &run_notes {
        eprintln!("{line}");
    }
    for line in summary::notes(&merged.db.info) {
        eprintln!("{line}");
    }
    if !merged.db.info.manifest {
        eprintln!(
            "hpcprof-rs: note: {} has no run manifest (measurements of an older hpcrun-rs): missing profiles cannot be told",
            args.measurements.display()
        );
    }
    for loss in &merged.db.info.losses {
        eprintln!("hpcprof-rs: warning: lost: {}", loss.text);
    }
    if args.strict && skipped > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Which runs of the directory to merge (`--run`, `--allow-mixed`).
fn choice(args: &MergeArgs) -> runs::Choice {
    match (&args.run, args.allow_mixed) {
        (Some(id), _) => runs::Choice::Run(id.clone()),
        (None, true) => runs::Choice::All,
        (None, false) => runs::Choice::One,
    }
}

/// A merge's result, the number of files it was given and the notes of
/// the files' selection ([`runs::select`]).
type MergeResult = (merge::Streamed, usize, Vec<String>);

/// `--mpi`: this rank's part of the distributed merge; rank 0 gets the
/// merged result, the number of files and the selection's notes, the
/// other ranks `None`.
#[cfg(feature = "mpi")]
fn merge_on_mpi(args: &MergeArgs, choice: &runs::Choice) -> Result<Option<MergeResult>> {
    use hpcprof_rs::distributed::{self, Outcome};
    let check = || db::check_output(&args.output, args.force).map_err(|e| format!("{e:#}"));
    let notes = std::sync::Mutex::new(Vec::new());
    let select = |files: Vec<std::path::PathBuf>| {
        let chosen = runs::select(&args.measurements, &files, choice)?;
        *notes.lock().expect("notes") = chosen.notes;
        Ok(chosen.files)
    };
    match distributed::merge(&args.measurements, &check, &select, &|_| {}) {
        Ok(Outcome::Root(merged)) => {
            let n = merged.db.info.profiles as usize + merged.db.info.skipped.len();
            let notes = notes.into_inner().expect("notes");
            Ok(Some((*merged, n, notes)))
        }
        Ok(Outcome::Sent) => Ok(None),
        Ok(Outcome::Failed) => std::process::exit(2),
        Err(e) => Err(anyhow::anyhow!(e)),
    }
}

/// `--mpi` in a build without MPI support.
#[cfg(not(feature = "mpi"))]
fn merge_on_mpi(_: &MergeArgs, _: &runs::Choice) -> Result<Option<MergeResult>> {
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
