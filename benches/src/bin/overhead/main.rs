//! `overhead`: the run-time overhead of `hpcrun-rs` against the native run
//! and against `perf record` at the same sampling rate (docs/PERFORMANCE.md,
//! "Run-time overhead at the default period").
//!
//! For every workload it runs, round after round, the program natively,
//! under `hpcrun-rs` (default event `mem:soft` at its default period, unless
//! `--period` says otherwise) and under `perf record -e cpu-clock -c <period
//! in ns> -g`, rotating the order each round so that a drifting machine load
//! hits all three alike. It prints the medians of wall time and of CPU time
//! (user + system of the whole process tree, from `getrusage`), the
//! overheads against native (ratio of the medians, and the median of the
//! per-round ratios), the samples taken and the bytes written, and for
//! hpcrun-rs the time its own code took inside the program (handler and
//! allocation hooks, from the profiles' counters: `stats.handler_time`,
//! `stats.hook_time`), with which the overhead can be explained.
//!
//! Workloads: the examples (compiled with `gcc -O2 -g`, `mpicc` for
//! `mpi_stencil`), `benches/programs/spin.c` (a register-only loop: the
//! direct cost of sampling without cache effects), HPC Challenge
//! (`hpcc`, Debian package) under `mpirun -np 1` with a small input,
//! `benches/programs/lulesh_proxy.c` (an OpenMP proxy of LULESH: per-step
//! heap temporaries of several MB) with 1 and 2 threads, and LAMMPS's
//! Lennard-Jones melt (`lmp`, Debian packages lammps and lammps-examples),
//! one process; LULESH 2.0 and hypre's AMG (MPI + OpenMP) when their
//! sources are given (`--lulesh-src`, `--amg-src`). Missing tools (perf, mpicc, hpcc, lmp) drop their column
//! or workload with a note.
//!
//! The floor (`benches/programs/null_sampler.c`) samples every thread of
//! the program with the same timer (`--timer`), signal and arming as
//! hpcrun-rs, and an empty handler.
//!
//! `--markdown` prints the table of docs/PERFORMANCE.md between its
//! markers, after a header line naming the build and this machine
//! (`benches::doc_tables`).
//!
//! `--only` and `--skip` take the first word of a workload's name
//! (`--only lulesh_proxy` runs both thread counts).
//!
//! ```sh
//! cargo build --release -p hpcrun-rs -p hpcrun-preload
//! cargo build --release -p benches --bin overhead
//! target/release/overhead --rounds 5            # or: just overhead
//! target/release/overhead --only abc --period 1000000 --rounds 3
//! target/release/overhead --only lulesh_proxy,lammps_melt --no-perf --rounds 11
//! target/release/overhead --with sharing --only lulesh_proxy   # a watchpoint analysis's cost
//! target/release/overhead --lulesh-src ~/LULESH --only lulesh --rounds 15  # LULESH 2.0 itself
//! target/release/overhead --amg-src ~/AMG --only amg --rounds 15         # hypre's AMG
//! target/release/overhead --only hpcc --baseline /tmp/old/target/release/hpcrun-rs  # before/after
//! target/release/overhead --only abc --rounds 3 --markdown --label abc   # docs/PERFORMANCE.md's table
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;

mod series;
mod tables;
mod workloads;
use series::{median, Run, Series, Tool};
use tables::{against_baseline, doc_table, print_table, report};
use workloads::{compile, which, Workload};

/// Overhead of hpcrun-rs and perf record against native runs.
#[derive(Debug, Parser)]
#[command(name = "overhead", version)]
struct Args {
    /// Rounds; each runs every tool once per workload.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Sampling period in ns for both hpcrun-rs (`-e mem:soft@NS`) and perf
    /// (`-c NS`) [default: hpcrun-rs's own default, read from a probe run].
    #[arg(long, value_name = "NS")]
    period: Option<u64>,
    /// hpcrun-rs's `--timer` (`auto`, `cpu-timer`, `task-clock`), also
    /// given to the floor (`NULL_SAMPLER_TIMER`).
    #[arg(long, default_value = "auto")]
    timer: String,
    /// Event passed to hpcrun-rs (`mem:soft` or `cpu-time`).
    #[arg(long, default_value = "mem:soft")]
    event: String,
    /// Watchpoint analyses added to hpcrun-rs's event (`sharing`,
    /// `reuse`, `sharing@N`; comma-separated): measures their cost on top
    /// of the sampler.
    #[arg(long, value_delimiter = ',', value_name = "ANALYSES")]
    with: Vec<String>,
    /// Only these workloads (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Skip these workloads (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Do not run perf record.
    #[arg(long)]
    no_perf: bool,
    /// Do not run the signal floor (null_sampler.c).
    #[arg(long)]
    no_floor: bool,
    /// A LULESH 2.0 source directory (a clone of github.com/LLNL/LULESH;
    /// not shipped here): builds it serial + OpenMP (`g++ -O3 -fopenmp
    /// -DUSE_MPI=0`) and adds `lulesh (s=30, 1 thread)` and `(2 threads)`,
    /// `-s 30 -i 120`.
    #[arg(long, value_name = "DIR")]
    lulesh_src: Option<PathBuf>,
    /// An AMG source directory (a clone of github.com/LLNL/AMG; not shipped
    /// here): builds it with its Makefile (`mpicc -O2 -fopenmp`) in a copy
    /// under `--dir` and adds `amg (problem 1, n=60, ...)` with 1 rank and
    /// 1 or 2 threads, and 2 ranks (`-P 2 1 1`) of 1 thread, under mpirun.
    #[arg(long, value_name = "DIR")]
    amg_src: Option<PathBuf>,
    /// Problem size N of hpcc's input (HPL N; the other tests scale with it).
    #[arg(long, default_value_t = 2000)]
    hpcc_n: u32,
    /// Multiplies the examples' repeat counts (0.2 for a quick check).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Scratch directory (created; the measurement outputs are deleted after
    /// every run).
    #[arg(long, default_value = "target/overhead")]
    dir: PathBuf,
    /// The hpcrun-rs binary [default: next to this executable].
    #[arg(long)]
    hpcrun: Option<PathBuf>,
    /// Another hpcrun-rs binary (with its preload library beside it, e.g.
    /// an older commit's `target/release/hpcrun-rs`), run as the tool
    /// `baseline` in the same rotating rounds; the report adds hpcrun-rs
    /// against it, paired by round (a change's before and after).
    #[arg(long, value_name = "HPCRUN")]
    baseline: Option<PathBuf>,
    /// The examples directory [default: ./examples].
    #[arg(long, default_value = "examples")]
    examples: PathBuf,
    /// Print the results as the table of docs/PERFORMANCE.md, between its
    /// markers, with a header line naming the build (--commit) and this
    /// machine (`benches::doc_tables::overhead`); with --attribute, the
    /// shares as a Markdown table.
    #[arg(long)]
    markdown: bool,
    /// The name in the table's start marker (`<!-- table: overhead NAME
    /// -->`).
    #[arg(long, default_value = "run")]
    label: String,
    /// Added to the header line's details (e.g. what else ran).
    #[arg(long)]
    note: Option<String>,
    /// The commit the measured hpcrun-rs was built from, for the header
    /// line [default: the repository's HEAD, `-dirty` with changes].
    #[arg(long)]
    commit: Option<String>,
    /// Instead of timing runs, profile each tool's run with `perf record -e
    /// cpu-clock -F 9999` and report which share of the program's CPU time
    /// went to the kernel and to the sampler's handler (one run per round;
    /// immune to run-to-run noise).
    #[arg(long)]
    attribute: bool,
}

/// What one hpcrun-rs output directory holds.
#[derive(Debug, Clone, Copy, Default)]
struct Output {
    samples: u64,
    bytes: u64,
    handler_ns: u64,
    hook_ns: u64,
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// User + system CPU seconds of all waited-for children so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn dir_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Samples, bytes and the profiler's own time of one hpcrun-rs output
/// directory.
fn hpcrun_output(dir: &Path) -> Output {
    let mut out = Output::default();
    for f in dir_files(dir) {
        let Ok(data) = std::fs::read(&f) else {
            continue;
        };
        out.bytes += data.len() as u64;
        if f.extension()
            .is_some_and(|e| e == formats::measurement::EXTENSION)
        {
            if let Ok(p) = formats::measurement::ThreadProfile::from_bytes(&data) {
                out.samples += p.stats.samples;
                out.handler_ns += p.stats.handler_time.total_ns;
                out.hook_ns += p.stats.hook_time.estimated_ns();
            }
        }
    }
    out
}

/// The period hpcrun-rs uses by default: from the profile of a probe run.
fn probe_default_period(hpcrun: &Path, scratch: &Path) -> Result<u64> {
    let out = scratch.join("probe");
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(hpcrun)
        .arg("-o")
        .arg(&out)
        .arg("true")
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", hpcrun.display()))?;
    if !status.success() {
        bail!("the probe run `hpcrun-rs true` failed");
    }
    let mut period = None;
    for f in dir_files(&out) {
        if let Ok(p) = formats::measurement::ThreadProfile::from_bytes(&std::fs::read(&f)?) {
            period = p.events.first().map(|e| e.period);
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    period.context(
        "the probe run wrote no profile: cannot tell hpcrun-rs's default period (pass --period)",
    )
}

/// The command line that runs workload `w` under `tool`, writing
/// measurement output (hpcrun-rs, perf) into `out`.
fn command(
    args: &Args,
    w: &Workload,
    tool: Tool,
    hpcrun: &Path,
    period: Option<u64>,
    out: &Path,
) -> Result<Command> {
    let mut cmd = match tool {
        Tool::Native => {
            let mut c = Command::new(&w.command[0]);
            c.args(&w.command[1..]);
            c
        }
        Tool::Hpcrun | Tool::Baseline => {
            let binary = match (tool, &args.baseline) {
                (Tool::Baseline, Some(b)) => b.as_path(),
                _ => hpcrun,
            };
            let mut c = Command::new(binary);
            c.arg("-o").arg(out).args(["--timer", &args.timer]);
            if let Some(p) = period {
                c.arg("-e").arg(format!("{}@{p}", args.event));
            } else if args.event != "mem:soft" || !args.with.is_empty() {
                c.arg("-e").arg(&args.event);
            }
            for a in &args.with {
                c.arg("-e").arg(a);
            }
            c.args(&w.command);
            c
        }
        Tool::Floor => {
            let mut c = Command::new(&w.command[0]);
            c.args(&w.command[1..])
                .env("LD_PRELOAD", args.dir.join("bin/libnull_sampler.so"))
                .env("NULL_SAMPLER_TIMER", &args.timer)
                .env(
                    "NULL_SAMPLER_PERIOD_NS",
                    period.context("the floor needs a period")?.to_string(),
                );
            c
        }
        Tool::Perf => {
            std::fs::create_dir_all(out)?;
            let mut c = Command::new("perf");
            c.args(["record", "-e", "cpu-clock", "-g", "-c"])
                .arg(period.context("perf needs a period")?.to_string())
                .arg("-o")
                .arg(out.join("perf.data"))
                .arg("--")
                .args(&w.command);
            c
        }
    };
    cmd.current_dir(&w.cwd)
        .envs(w.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Ok(cmd)
}

/// Removes what an earlier run of `w` left (its scrub files, the tool's
/// output directory) and returns that directory.
fn fresh_output(w: &Workload, scratch: &Path) -> PathBuf {
    for f in &w.scrub {
        let _ = std::fs::remove_file(f);
    }
    let out = scratch.join("out");
    let _ = std::fs::remove_dir_all(&out);
    out
}

/// Runs one workload under one tool.
fn run_once(
    args: &Args,
    w: &Workload,
    tool: Tool,
    hpcrun: &Path,
    period: Option<u64>,
    scratch: &Path,
) -> Result<Run> {
    let out = fresh_output(w, scratch);
    let mut cmd = command(args, w, tool, hpcrun, period, &out)?;
    let cpu0 = children_cpu();
    let t0 = Instant::now();
    let output = cmd
        .output()
        .with_context(|| format!("cannot run {} under {}", w.name, tool.name()))?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = children_cpu() - cpu0;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "{} under {} failed ({}): {}",
            w.name,
            tool.name(),
            output.status,
            stderr.trim()
        );
    }
    let mut own = Output::default();
    let (samples, bytes) = match tool {
        Tool::Native => (0, 0),
        // "null_sampler: N samples" from every process.
        Tool::Floor => (
            stderr
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("null_sampler: ")?
                        .split(' ')
                        .next()?
                        .parse::<u64>()
                        .ok()
                })
                .sum(),
            0,
        ),
        Tool::Hpcrun | Tool::Baseline => {
            own = hpcrun_output(&out);
            (own.samples, own.bytes)
        }
        Tool::Perf => {
            // "[ perf record: Captured and wrote 0.712 MB perf.data (4187 samples) ]"
            let samples = stderr
                .lines()
                .filter_map(|l| {
                    let i = l.find(" samples)")?;
                    l[..i].rsplit('(').next()?.trim().parse::<u64>().ok()
                })
                .sum();
            let bytes = dir_files(&out)
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum();
            (samples, bytes)
        }
    };
    let _ = std::fs::remove_dir_all(&out);
    Ok(Run {
        wall,
        cpu,
        samples,
        bytes,
        handler_ns: own.handler_ns,
        hook_ns: own.hook_ns,
    })
}

/// Processes that launch or measure the program, left out of the shares.
const LAUNCHERS: [&str; 6] = [
    "hpcrun-rs",
    "mpirun",
    "orted",
    "prterun",
    "perf",
    "perf-exec",
];

/// Shares of the program's CPU time (percent), from one profiled run.
#[derive(Debug, Clone, Copy, Default)]
struct Shares {
    /// In the kernel (interrupts, signal delivery, page faults, syscalls).
    kernel: f64,
    /// In the sampler's library (libhpcrun_preload.so or libnull_sampler.so).
    handler: f64,
}

/// Runs `w` under `tool` inside `perf record -e cpu-clock -F 9999` and
/// splits the program's samples (launchers left out) by DSO.
fn attribute_once(
    args: &Args,
    w: &Workload,
    tool: Tool,
    hpcrun: &Path,
    period: Option<u64>,
    scratch: &Path,
) -> Result<Shares> {
    let out = fresh_output(w, scratch);
    std::fs::create_dir_all(scratch)?;
    let data = scratch.join("attribute.data");
    let inner = command(args, w, tool, hpcrun, period, &out)?;
    let mut cmd = Command::new("perf");
    cmd.args(["record", "-q", "-e", "cpu-clock", "-F", "9999", "-o"])
        .arg(&data)
        .arg("--")
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(&w.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let output = cmd.output().context("cannot run perf record")?;
    if !output.status.success() {
        bail!(
            "{} under {} (profiled) failed: {}",
            w.name,
            tool.name(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let report = Command::new("perf")
        .args(["report", "-q", "--stdio", "--sort", "comm,dso", "-i"])
        .arg(&data)
        .output()
        .context("cannot run perf report")?;
    let (mut total, mut kernel, mut handler) = (0.0, 0.0, 0.0);
    for line in String::from_utf8_lossy(&report.stdout).lines() {
        let mut f = line.split_whitespace();
        let (Some(pct), Some(comm), Some(dso)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let Ok(pct) = pct.trim_end_matches('%').parse::<f64>() else {
            continue;
        };
        if LAUNCHERS.contains(&comm) {
            continue;
        }
        total += pct;
        if dso == "[kernel.kallsyms]" {
            kernel += pct;
        } else if dso == "libhpcrun_preload.so" || dso == "libnull_sampler.so" {
            handler += pct;
        }
    }
    let _ = std::fs::remove_file(&data);
    let _ = std::fs::remove_dir_all(&out);
    if total <= 0.0 {
        bail!("perf recorded no samples of {}", w.name);
    }
    Ok(Shares {
        kernel: 100.0 * kernel / total,
        handler: 100.0 * handler / total,
    })
}

/// The `--attribute` mode: median shares per workload and tool, and the
/// CPU time attributable to sampling (kernel and handler shares above the
/// native run's kernel share).
fn attribute_all(
    args: &Args,
    list: &[Workload],
    tools: &[Tool],
    hpcrun: &Path,
    period: Option<u64>,
    scratch: &Path,
) -> Result<()> {
    let tools: Vec<Tool> = tools.iter().copied().filter(|t| *t != Tool::Perf).collect();
    let mut header = vec!["workload".to_string()];
    for t in &tools {
        header.push(format!("{} kernel %", t.name()));
        if *t != Tool::Native {
            header.push(format!("{} handler %", t.name()));
        }
    }
    for t in &tools[1..] {
        header.push(format!("{} attributable %", t.name()));
    }
    let mut rows = vec![header];
    for w in list {
        let mut shares: Vec<Vec<Shares>> = vec![Vec::new(); tools.len()];
        for round in 0..args.rounds {
            for k in 0..tools.len() {
                let i = (k + round) % tools.len();
                let p = if tools[i].is_hpcrun() {
                    args.period
                } else {
                    period
                };
                let s = attribute_once(args, w, tools[i], hpcrun, p, scratch)?;
                eprintln!(
                    "{:<24} round {} {:<9} kernel {:>6.2}%  handler {:>6.2}%",
                    w.name,
                    round + 1,
                    tools[i].name(),
                    s.kernel,
                    s.handler
                );
                shares[i].push(s);
            }
        }
        let med = |v: &[Shares], f: fn(&Shares) -> f64| {
            let mut x: Vec<f64> = v.iter().map(f).collect();
            median(&mut x)
        };
        let native_kernel = med(&shares[0], |s| s.kernel);
        let mut row = vec![w.name.clone()];
        for (i, t) in tools.iter().enumerate() {
            row.push(format!("{:.2}", med(&shares[i], |s| s.kernel)));
            if *t != Tool::Native {
                row.push(format!("{:.2}", med(&shares[i], |s| s.handler)));
            }
        }
        for tool_shares in &shares[1..] {
            let mut x: Vec<f64> = tool_shares
                .iter()
                .map(|s| s.kernel + s.handler - native_kernel)
                .collect();
            row.push(format!("{:.2}", median(&mut x)));
        }
        rows.push(row);
    }
    println!(
        "# period {} ns, {} rounds (medians); shares of the program's CPU time (launchers left out), from perf record -F 9999",
        period.unwrap_or_default(),
        args.rounds
    );
    println!("# attributable: kernel + handler share minus the native run's kernel share\n");
    print_table(&rows, args.markdown);
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let hpcrun = match args.hpcrun.clone() {
        Some(p) => p,
        None => std::env::current_exe()?
            .parent()
            .context("executable directory")?
            .join("hpcrun-rs"),
    };
    if !hpcrun.is_file() {
        bail!(
            "{} not found: build it (cargo build --release -p hpcrun-rs -p hpcrun-preload) or pass --hpcrun",
            hpcrun.display()
        );
    }
    // Workloads run in their own directories: a relative --hpcrun must
    // not be read from there.
    let hpcrun = hpcrun.canonicalize()?;
    std::fs::create_dir_all(&args.dir)?;
    let dir = args.dir.canonicalize()?;
    // Workloads run in their own directories: the baseline's path must not
    // be relative to this one.
    let baseline = match &args.baseline {
        Some(b) => Some(b.canonicalize().with_context(|| {
            format!(
                "--baseline {}: no such hpcrun-rs binary (build the older commit with cargo build --release -p hpcrun-rs -p hpcrun-preload)",
                b.display()
            )
        })?),
        None => None,
    };
    let args = Args {
        dir: dir.clone(),
        baseline,
        examples: args.examples.canonicalize().with_context(|| {
            format!(
                "examples directory {} not found (run from the repository root or pass --examples)",
                args.examples.display()
            )
        })?,
        ..args
    };
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    let scratch = dir.join("run");
    std::fs::create_dir_all(&scratch)?;

    let period = match args.period {
        Some(p) => Some(p),
        None => Some(probe_default_period(&hpcrun, &scratch)?),
    };
    let period_ns = period.unwrap_or_default();
    let mut tools = vec![Tool::Native, Tool::Hpcrun];
    if args.baseline.is_some() {
        tools.push(Tool::Baseline);
    }
    if !args.no_floor {
        compile(
            "gcc",
            &["-O2", "-shared", "-fPIC"],
            &args.examples.join("../benches/programs/null_sampler.c"),
            &bin.join("libnull_sampler.so"),
        )?;
        tools.push(Tool::Floor);
    }
    if !args.no_perf {
        if which("perf").is_some() {
            tools.push(Tool::Perf);
        } else {
            eprintln!("note: perf not found (apt-get install linux-perf): no perf column");
        }
    }
    let (list, notes) = workloads::available(
        &workloads::Config {
            examples: args.examples.clone(),
            dir: args.dir.clone(),
            scale: args.scale,
            hpcc_n: args.hpcc_n,
            lulesh_src: args.lulesh_src.clone(),
            amg_src: args.amg_src.clone(),
            only: args.only.clone(),
            skip: args.skip.clone(),
        },
        &bin,
    )?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    // hpcrun-rs runs with its default period unless --period was given
    // (the period is then passed explicitly, the same as perf's).
    let hpcrun_period = args.period;
    eprintln!(
        "period {period_ns} ns ({} samples/s per thread), {} rounds, tools: {}",
        1_000_000_000 / period_ns.max(1),
        args.rounds,
        tools
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if args.attribute {
        return attribute_all(&args, &list, &tools, &hpcrun, period, &scratch);
    }
    let load_before = load_average();
    let mut loads = vec![load_before];
    let mut series = Vec::new();
    for w in &list {
        let mut runs: Vec<(Tool, Vec<Run>)> = tools.iter().map(|t| (*t, Vec::new())).collect();
        for round in 0..args.rounds {
            for k in 0..tools.len() {
                let i = (k + round) % tools.len();
                let tool = tools[i];
                loads.push(load_average());
                let p = if tool.is_hpcrun() {
                    hpcrun_period
                } else {
                    period
                };
                let r = run_once(&args, w, tool, &hpcrun, p, &scratch)?;
                eprintln!(
                    "{:<24} round {} {:<9} wall {:>7.2} s  CPU {:>7.2} s  samples {:>7}  load {:.1}",
                    w.name,
                    round + 1,
                    tool.name(),
                    r.wall,
                    r.cpu,
                    r.samples,
                    loads.last().unwrap()
                );
                runs[i].1.push(r);
            }
        }
        series.push(Series {
            name: w.name.clone(),
            runs,
        });
    }
    loads.push(load_average());
    let lo = loads.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if args.markdown {
        let commit = args.commit.clone().unwrap_or_else(|| {
            benches::doc_tables::header::git_head(args.examples.parent().unwrap_or(&args.dir))
        });
        let mut details = format!(
            "{}, {} at {period_ns} ns ({} timer{}), 1-min load average {lo:.1}-{hi:.1}",
            benches::doc_tables::header::today(),
            args.event,
            args.timer,
            if args.with.is_empty() {
                String::new()
            } else {
                format!(", with {}", args.with.join(","))
            },
        );
        if let Some(note) = &args.note {
            details.push_str(&format!("; {note}"));
        }
        let table = doc_table(
            &series,
            benches::doc_tables::Header::this_machine(&commit, &details),
        );
        println!("{}", benches::doc_tables::start("overhead", &args.label));
        print!("{}", table.render());
        println!("{}\n", benches::doc_tables::END);
        if tools.contains(&Tool::Baseline) {
            println!("hpcrun-rs against the baseline (paired by round):\n");
            print_table(&against_baseline(&series), true);
        }
        return Ok(());
    }
    println!(
        "# period {period_ns} ns, {} rounds (medians), 1-min load average {lo:.1}-{hi:.1} during the series",
        args.rounds
    );
    println!("# %: the tool's median against the native median; paired %: median of the per-round ratios");
    report(&series, &tools);
    Ok(())
}
