//! `truth`: how well mem:soft's per-object answer agrees with a ground
//! truth, per workload (docs/ACCURACY.md).
//!
//! For every workload it runs the program under Valgrind DHAT (heap access
//! volume per allocation site: bytes read + written, and bytes read;
//! [`dhat`]), optionally under Valgrind lackey's memory trace through a
//! cache simulator sized from this machine's sysfs (last-level-cache
//! misses per site; [`trace`], [`cachesim`]), and under `hpcrun-rs -e
//! mem:soft` + `hpcprof-rs` ([`profile`]); it matches heap objects by
//! allocation site ([`compare`]) and reports top-1 agreement, Spearman's
//! rank correlation and the total variation distance of the two share
//! distributions ([`stats`]), plus where the profiler's samples went
//! ([`report`]). The table is printed and appended to docs/ACCURACY.md
//! under the CPU vendor's heading.
//!
//! ```sh
//! cargo build --release -p hpcrun-rs -p hpcrun-preload -p hpcprof-rs
//! cargo build --release -p benches --bin truth
//! target/release/truth --label after                     # or: just truth --label after
//! target/release/truth --only gather,l1_chain --no-append
//! target/release/truth --hpcrun /old/target/release/hpcrun-rs --label before \
//!     --xsbench ~/src/XSBench/openmp-threading/XSBench --lulesh ~/src/LULESH/lulesh2.0
//! ```

mod cachesim;
mod compare;
mod dhat;
mod machine;
mod profile;
mod report;
mod stats;
mod trace;
mod workloads;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;

/// Agreement of mem:soft's per-object shares with Valgrind's ground truth.
#[derive(Debug, Parser)]
#[command(name = "truth", version)]
struct Args {
    /// Only these workloads (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Skip these workloads (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// The hpcrun-rs binary (hpcprof-rs and the preload library beside it)
    /// [default: target/release/hpcrun-rs under --root].
    #[arg(long)]
    hpcrun: Option<PathBuf>,
    /// The label of this run in the report (`before`, `after`, ...).
    #[arg(long, default_value = "current")]
    label: String,
    /// The commit the measured hpcrun-rs was built from, for the report
    /// [default: the workspace's HEAD].
    #[arg(long)]
    commit: Option<String>,
    /// The file the report is appended to.
    #[arg(long, default_value = "docs/ACCURACY.md")]
    out: PathBuf,
    /// Print the report only.
    #[arg(long)]
    no_append: bool,
    /// Print the Markdown section as docs/ACCURACY.md has it (the tables
    /// between their markers, with a header line naming the build and this
    /// machine, then the per-object shares) and do not append it.
    #[arg(long)]
    markdown: bool,
    /// Added to the header line's details (e.g. what else ran).
    #[arg(long)]
    note: Option<String>,
    /// The sampling event given to hpcrun-rs.
    #[arg(long, default_value = "mem:soft")]
    event: String,
    /// Profiled runs per workload (their samples are added up).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Also run the workloads that have a small input for it under
    /// lackey's memory trace through a cache simulator sized from sysfs,
    /// and compare with simulated LLC misses per object (slow: minutes
    /// per workload).
    #[arg(long)]
    sim: bool,
    /// Rerun DHAT and the simulation even when an earlier run of the same
    /// command and binary is in --dir (the truth does not depend on the
    /// profiler, so 'after' runs reuse it by default).
    #[arg(long)]
    fresh_truth: bool,
    /// An XSBench binary (openmp-threading, built with -g): adds `xsbench`
    /// (event, 1 thread) and `xsbench_hash` (-G hash).
    #[arg(long, value_name = "PATH")]
    xsbench: Option<PathBuf>,
    /// A serial LULESH 2.0 binary (-DUSE_MPI=0, no OpenMP, -g -O2): adds `lulesh` and `lulesh_large`.
    #[arg(long, value_name = "PATH")]
    lulesh: Option<PathBuf>,
    /// The workspace root.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Scratch directory (compiled kernels, DHAT outputs, profiles).
    #[arg(long, default_value = "target/truth")]
    dir: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let root = std::fs::canonicalize(&args.root).context("--root")?;
    let dir = root.join(&args.dir);
    let hpcrun = args
        .hpcrun
        .clone()
        .unwrap_or_else(|| root.join("target/release/hpcrun-rs"));
    let tools = profile::Tools::beside(std::path::absolute(&hpcrun)?)?;
    let cfg = workloads::Config {
        root: root.clone(),
        bin: dir.join("bin"),
        xsbench: args.xsbench.clone(),
        lulesh: args.lulesh.clone(),
    };
    let selected = |n: &str| {
        (args.only.is_empty() || args.only.iter().any(|o| o == n))
            && !args.skip.iter().any(|s| s == n)
    };
    let machine = machine::Machine::read();
    let mut outcomes = Vec::new();
    let mut failed = Vec::new();
    for w in workloads::all(&cfg)?
        .into_iter()
        .filter(|w| selected(w.name))
    {
        match measure(&args, &cfg, &dir.join(w.name), &tools, &machine, &w) {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                eprintln!("truth: {}: {e:#}", w.name);
                failed.push(format!("{}: {e:#}", w.name));
            }
        }
    }
    let commit = args
        .commit
        .clone()
        .unwrap_or_else(|| benches::doc_tables::header::git_head(&root));
    // The build is named by its commit, not by where its binary lies: the
    // table goes into docs/ACCURACY.md, which names no local paths.
    let today = benches::doc_tables::header::today();
    let heading = format!("### {}, {today}, {}", machine.model, args.label);
    let mut details = format!(
        "{today}, event {}, {} run(s), caches {}",
        args.event,
        args.runs.max(1),
        machine.cache_summary(),
    );
    if let Some(note) = &args.note {
        details.push_str(&format!("; {note}"));
    }
    let header = benches::doc_tables::Header::this_machine(&commit, &details);
    let mut section = report::markdown(&heading, &args.label, header, &outcomes);
    for f in &failed {
        section.push_str(&format!("- not measured: {f}\n"));
    }
    println!("{section}");
    if !args.no_append && !args.markdown {
        let out = root.join(&args.out);
        report::append(&out, &machine.vendor_heading(), &section)?;
        eprintln!("truth: appended to {}", out.display());
    }
    Ok(())
}

/// DHAT, the optional simulation and the profiled runs of one workload.
fn measure(
    args: &Args,
    cfg: &workloads::Config,
    wdir: &std::path::Path,
    tools: &profile::Tools,
    machine: &machine::Machine,
    w: &workloads::Workload,
) -> Result<report::Outcome> {
    std::fs::create_dir_all(wdir)?;
    eprintln!("truth: {}: DHAT", w.name);
    let records = dhat::cached(&w.command, wdir, args.fresh_truth)?;
    let sim = match (&w.sim_args, args.sim) {
        (Some(sim_args), true) => {
            eprintln!("truth: {}: lackey + cache simulation", w.name);
            let mut cmd = vec![w.command[0].clone()];
            cmd.extend(sim_args.iter().cloned());
            let (records, totals) = trace::cached(
                &cfg.root,
                &cfg.bin,
                &cmd,
                wdir,
                &machine.caches,
                args.fresh_truth,
            )?;
            if totals.accesses == 0 {
                eprintln!(
                    "truth: {}: simulation reused from {}",
                    w.name,
                    wdir.display()
                );
            } else {
                eprintln!(
                    "truth: {}: {} accesses, {} LLC misses, {} of them in heap blocks",
                    w.name, totals.accesses, totals.llc_misses, totals.heap_llc_misses
                );
            }
            Some((records, cmd))
        }
        _ => None,
    };
    let mut prof = profile::Profile::default();
    for run in 0..args.runs.max(1) {
        eprintln!("truth: {}: {} (run {})", w.name, args.event, run + 1);
        let p = profile::run(tools, &args.event, &w.hpcrun_opts, &w.command, wdir)?;
        prof.absorb(p);
    }
    let entries = compare::join(&records, &prof, sim.as_ref().map(|s| s.0.as_slice()));
    let access = compare::agreement(&entries, |e| e.truth_access, |e| e.prof_access);
    let reads = compare::agreement(&entries, |e| e.truth_reads, |e| e.prof_reads);
    let misses = sim.as_ref().map(|_| {
        compare::agreement(
            &entries,
            |e| e.truth_misses.unwrap_or(0.0),
            |e| e.prof_access,
        )
    });
    let stall = sim.as_ref().map(|_| {
        compare::agreement(
            &entries,
            |e| e.truth_stall.unwrap_or(0.0),
            |e| e.prof_access,
        )
    });
    Ok(report::Outcome {
        name: w.name.to_string(),
        expect: w.expect,
        entries,
        access,
        reads,
        misses,
        stall,
        sim_command: sim.map(|s| s.1.join(" ")),
        profile: prof,
    })
}
