//! `bench-merge`: the merge benchmark of docs/PERFORMANCE.md.
//!
//! Generates synthetic thread profiles (unless they exist), merges them with
//! the real `hpcprof-rs` binary under `/usr/bin/time -f '%M %e'` and prints a
//! Markdown table row per run: input size, wall time, throughput (MB of
//! profile input per second), peak resident memory of the child, database
//! size and their ratio.
//!
//! ```sh
//! cargo build --release -p hpcprof-rs -p benches
//! target/release/bench-merge --threads 1000 --jobs 2 --repeat 3
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Parser;

/// Merge synthetic profiles with hpcprof-rs and report throughput and memory.
#[derive(Debug, Parser)]
#[command(name = "bench-merge", version)]
struct Args {
    /// Thread profiles (comma-separated list: one benchmark per value).
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    threads: Vec<u32>,
    /// MPI ranks of the generated run (0: one process).
    #[arg(long, default_value_t = 0)]
    ranks: u32,
    /// Distinct call paths.
    #[arg(long, default_value_t = 300)]
    paths: u32,
    /// Worker threads of hpcprof-rs (-j).
    #[arg(long, value_delimiter = ',', default_value = "2")]
    jobs: Vec<usize>,
    /// Runs per configuration (the best time and the largest memory are kept).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Scratch directory.
    #[arg(long, default_value = "target/bench-merge")]
    dir: PathBuf,
    /// The hpcprof-rs binary [default: next to this executable].
    #[arg(long)]
    hpcprof: Option<PathBuf>,
    /// Module the generated addresses point into [default: the hpcprof-rs
    /// binary, so that symbolisation does real work].
    #[arg(long)]
    module: Option<PathBuf>,
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() {
            dir_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(total)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let hpcprof = match args.hpcprof.clone() {
        Some(p) => p,
        None => std::env::current_exe()?
            .parent()
            .context("executable directory")?
            .join("hpcprof-rs"),
    };
    if !hpcprof.is_file() {
        bail!(
            "{} not found: build it (cargo build --release -p hpcprof-rs) or pass --hpcprof",
            hpcprof.display()
        );
    }
    let module = std::fs::canonicalize(args.module.clone().unwrap_or_else(|| hpcprof.clone()))?;
    let module_len = std::fs::metadata(&module)?.len();
    println!("| profiles | ranks | -j | input MB | wall s | CPU s | MB/s (wall) | MB/CPU-s | peak RSS MB | db MB | RSS / db |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &threads in &args.threads {
        let cfg = benches::Config {
            threads,
            ranks: args.ranks,
            paths: args.paths,
            module: Some(module.clone()),
            module_len,
            ..benches::Config::default()
        };
        let input = args
            .dir
            .join(format!("in-t{threads}-r{}-p{}", args.ranks, args.paths));
        if !input.is_dir() {
            benches::write_all(&cfg, &input)?;
        }
        let input_bytes = dir_size(&input)?;
        for &jobs in &args.jobs {
            let db = args.dir.join("db");
            let mut best = f64::INFINITY;
            let mut best_cpu = f64::INFINITY;
            let mut peak_kb = 0u64;
            let mut db_bytes = 0;
            for _ in 0..args.repeat {
                let _ = std::fs::remove_dir_all(&db);
                let out = Command::new("/usr/bin/time")
                    .args(["-f", "%M %e %U %S"])
                    .arg(&hpcprof)
                    .arg("-j")
                    .arg(jobs.to_string())
                    .arg("-o")
                    .arg(&db)
                    .arg(&input)
                    .output()
                    .context("cannot run /usr/bin/time")?;
                let stderr = String::from_utf8_lossy(&out.stderr);
                if !out.status.success() {
                    bail!("hpcprof-rs failed:\n{stderr}");
                }
                let last = stderr.lines().last().unwrap_or_default();
                let mut it = last.split_whitespace();
                let kb: u64 = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .context("time output")?;
                let secs: f64 = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .context("time output")?;
                let user: f64 = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .context("time output")?;
                let sys: f64 = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .context("time output")?;
                best = best.min(secs);
                best_cpu = best_cpu.min(user + sys);
                peak_kb = peak_kb.max(kb);
                db_bytes = dir_size(&db)?;
            }
            let mb = input_bytes as f64 / 1e6;
            let rss = peak_kb as f64 * 1024.0 / 1e6;
            let dbmb = db_bytes as f64 / 1e6;
            println!(
                "| {threads} | {} | {jobs} | {mb:.1} | {best:.2} | {best_cpu:.2} | {:.0} | {:.0} | {rss:.1} | {dbmb:.2} | {:.1} |",
                args.ranks,
                mb / best.max(1e-9),
                mb / best_cpu.max(1e-9),
                rss / dbmb.max(1e-9)
            );
        }
    }
    Ok(())
}
