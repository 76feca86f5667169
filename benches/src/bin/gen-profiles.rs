//! `gen-profiles`: writes synthetic `hpcrun-rs` measurement files.
//!
//! ```sh
//! gen-profiles -o /tmp/m --threads 1000                 # one process
//! gen-profiles -o /tmp/m --threads 4096 --ranks 4096    # MPI, one thread per rank
//! gen-profiles -o /tmp/m --threads 1000 --module target/release/hpcprof-rs
//! ```

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;

/// Write synthetic hpcrun-rs measurement files (one per thread).
#[derive(Debug, Parser)]
#[command(name = "gen-profiles", version)]
struct Args {
    /// Directory to write (created).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: PathBuf,
    /// Thread profiles in total.
    #[arg(long, default_value_t = 1000)]
    threads: u32,
    /// MPI ranks (one process each); 0: one process, no MPI.
    #[arg(long, default_value_t = 0)]
    ranks: u32,
    /// Distinct call paths of the program.
    #[arg(long, default_value_t = 300)]
    paths: u32,
    /// Mean memory samples per call path per thread.
    #[arg(long, default_value_t = 20)]
    samples_per_path: u32,
    /// ELF file the addresses point into [default: none, all addresses are
    /// outside any module].
    #[arg(long, value_name = "FILE")]
    module: Option<PathBuf>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let module_len = match &args.module {
        Some(m) => std::fs::metadata(m)
            .with_context(|| format!("cannot read {}", m.display()))?
            .len(),
        None => 0x10_0000,
    };
    let cfg = benches::Config {
        threads: args.threads,
        ranks: args.ranks,
        paths: args.paths,
        samples_per_path: args.samples_per_path,
        module: args.module.map(|m| std::fs::canonicalize(&m).unwrap_or(m)),
        module_len,
        seed: args.seed,
        ..benches::Config::default()
    };
    let bytes = benches::write_all(&cfg, &args.output)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!(
        "gen-profiles: wrote {} profiles ({} processes, {:.1} MB) to {}",
        cfg.threads,
        cfg.processes(),
        bytes as f64 / 1e6,
        args.output.display()
    );
    Ok(())
}
