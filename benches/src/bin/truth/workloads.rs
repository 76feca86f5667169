//! The programs the harness compares on, with inputs sized so that DHAT
//! takes well under two minutes each on the 2-core development VM while
//! the native run lasts long enough (about 1-3 s) for a few hundred to a
//! few thousand samples at mem:soft's default 2 ms period: the examples
//! with heap objects, the known-answer kernels of benches/programs/truth_*.c,
//! and XSBench and LULESH 2.0 when built binaries are given (they are not
//! shipped; docs/ACCURACY.md says how to build them).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// One program and its input.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: &'static str,
    /// Program and arguments (the same for the truth and the profiler).
    pub command: Vec<String>,
    /// Extra hpcrun-rs options.
    pub hpcrun_opts: Vec<String>,
    /// The smaller input the cache simulation runs (arguments only), if
    /// lackey can trace this workload in minutes.
    pub sim_args: Option<Vec<String>>,
    /// What the known answer is, for the report.
    pub expect: &'static str,
}

/// Where the sources are and what else to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The workspace root (examples/ and benches/programs/).
    pub root: PathBuf,
    /// Directory for compiled programs.
    pub bin: PathBuf,
    pub xsbench: Option<PathBuf>,
    pub lulesh: Option<PathBuf>,
}

/// Compiles `src` (relative to the root) with gcc and `flags` into the
/// bin directory as `name`, unless the binary is newer than the source.
fn compile(cfg: &Config, src: &str, flags: &[&str], name: &str) -> Result<String> {
    let src = cfg.root.join(src);
    let out = cfg.bin.join(name);
    let fresh = match (std::fs::metadata(&src), std::fs::metadata(&out)) {
        (Ok(s), Ok(o)) => o.modified()? >= s.modified()?,
        _ => false,
    };
    if !fresh {
        std::fs::create_dir_all(&cfg.bin)?;
        let status = Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .context("cannot run gcc")?;
        if !status.success() {
            bail!("gcc failed on {}", src.display());
        }
    }
    Ok(out.display().to_string())
}

fn args(program: String, rest: &[&str]) -> Vec<String> {
    std::iter::once(program)
        .chain(rest.iter().map(|s| s.to_string()))
        .collect()
}

fn exe(p: &Path) -> Result<String> {
    let p = std::fs::canonicalize(p).with_context(|| format!("{}", p.display()))?;
    Ok(p.display().to_string())
}

/// Every workload this configuration can run, in report order.
pub fn all(cfg: &Config) -> Result<Vec<Workload>> {
    let o2 = ["-O2", "-g"];
    let mut list = vec![
        Workload {
            name: "abc",
            sim_args: None,
            command: args(compile(cfg, "examples/abc/abc.c", &o2, "abc")?, &["50"]),
            hpcrun_opts: vec![],
            expect: "C (stride N*N) dominates the misses; A, B, C have equal access volume",
        },
        Workload {
            name: "pointer_chase",
            sim_args: None,
            command: args(
                compile(
                    cfg,
                    "examples/pointer_chase/pointer_chase.c",
                    &o2,
                    "pointer_chase",
                )?,
                &["70"],
            ),
            hpcrun_opts: vec!["--min-bytes".into(), "32".into()],
            expect: "the list nodes hold all the time",
        },
        Workload {
            name: "stream_triad",
            sim_args: Some(vec!["1".into()]),
            command: args(
                compile(
                    cfg,
                    "examples/stream_triad/stream_triad.c",
                    &o2,
                    "stream_triad",
                )?,
                &["300"],
            ),
            hpcrun_opts: vec![],
            expect: "a = b + s*c: b and c read, a written; one third each of the lines",
        },
        Workload {
            name: "skewed_lookup",
            sim_args: Some(vec!["1".into()]),
            command: args(
                compile(
                    cfg,
                    "examples/skewed_lookup/skewed_lookup.c",
                    &o2,
                    "skewed_lookup",
                )?,
                &["50"],
            ),
            hpcrun_opts: vec![],
            expect: "table (random, 64 MiB) holds the time; weights (4 KiB) is L1-resident",
        },
        Workload {
            name: "gather",
            sim_args: Some(vec!["1".into()]),
            command: args(
                compile(cfg, "benches/programs/truth_gather.c", &o2, "truth_gather")?,
                &["25"],
            ),
            hpcrun_opts: vec![],
            expect: "grid (random) most misses, index (sequential, self-clobbering load) a share",
        },
        Workload {
            name: "stream_sum",
            sim_args: Some(vec!["1".into()]),
            command: args(
                compile(
                    cfg,
                    "benches/programs/truth_stream_sum.c",
                    &["-O3", "-march=x86-64-v2", "-g"],
                    "truth_stream_sum",
                )?,
                &["300"],
            ),
            hpcrun_opts: vec![],
            expect: "data is the only object; memory bound",
        },
        Workload {
            name: "l1_chain",
            sim_args: Some(vec!["1".into()]),
            command: args(
                compile(
                    cfg,
                    "benches/programs/truth_l1_chain.c",
                    &o2,
                    "truth_l1_chain",
                )?,
                &["300"],
            ),
            hpcrun_opts: vec![],
            expect: "hot (L1, FP chain) most accesses but no misses; cold (streamed) the misses",
        },
        Workload {
            name: "csr_rows",
            sim_args: Some(vec!["50000".into(), "1".into()]),
            command: args(
                compile(cfg, "tests/programs/csr_rows.c", &o2, "csr_rows")?,
                &["200000", "20"],
            ),
            hpcrun_opts: vec![],
            expect: "SpMV over 200,000 rows of one block each: values rows (216 B) 2x the bytes of index rows (108 B), both streamed from DRAM; x gathered (in cache)",
        },
    ];
    if let Some(x) = &cfg.xsbench {
        let x = exe(x)?;
        let base = ["-s", "small", "-m", "event", "-t", "1", "-l", "2000000"];
        list.push(Workload {
            name: "xsbench",
            sim_args: None,
            command: args(x.clone(), &base),
            hpcrun_opts: vec![],
            expect: "nuclide grid and index_grid (unionized) hold the misses",
        });
        let mut hash = base.to_vec();
        hash.extend(["-G", "hash"]);
        list.push(Workload {
            name: "xsbench_hash",
            sim_args: None,
            command: args(x, &hash),
            hpcrun_opts: vec![],
            expect: "nuclide grid and the hash grid hold the misses",
        });
    }
    if let Some(l) = &cfg.lulesh {
        list.push(Workload {
            name: "lulesh",
            // 20 iterations (lackey writes every access as text: about
            // 20 minutes on the 2-core VM); the per-iteration pattern is
            // the full run's, the start-up's compulsory misses weigh more.
            sim_args: Some(["-s", "15", "-i", "20", "-q"].map(String::from).to_vec()),
            command: args(exe(l)?, &["-s", "15", "-q"]),
            hpcrun_opts: vec![],
            expect: "many arrays, none dominant",
        });
        list.push(Workload {
            name: "lulesh_large",
            // A mesh whose arrays (about 60 MB) exceed the 32 MB L3, so
            // that simulated LLC misses are capacity misses, not only the
            // start-up's compulsory ones: one iteration under lackey
            // (about an hour on the 2-core VM), eight for the profiler.
            sim_args: Some(["-s", "50", "-i", "1", "-q"].map(String::from).to_vec()),
            command: args(exe(l)?, &["-s", "50", "-i", "8", "-q"]),
            hpcrun_opts: vec![],
            expect: "many arrays larger than the L3, none dominant",
        });
    }
    Ok(list)
}
