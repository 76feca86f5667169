//! The programs the harness measures: the examples, a register-only loop,
//! the MPI stencil, HPC Challenge, the OpenMP LULESH proxy, LULESH 2.0 and
//! hypre's AMG when their sources are given, and LAMMPS. Each is built
//! (or found installed) here; what cannot run on this machine becomes a
//! note instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// Where the sources are and how big the runs are (from the command line).
pub struct Config {
    /// The examples directory.
    pub examples: PathBuf,
    /// Scratch directory (hpcc's and LAMMPS's inputs, AMG's build).
    pub dir: PathBuf,
    /// Multiplies the repeat counts.
    pub scale: f64,
    /// HPL size of hpcc's input.
    pub hpcc_n: u32,
    pub lulesh_src: Option<PathBuf>,
    pub amg_src: Option<PathBuf>,
    /// Only these workloads (first word of the name), and not these.
    pub only: Vec<String>,
    pub skip: Vec<String>,
}

/// One program to measure.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    /// The command (program first).
    pub command: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// Files removed before every run (hpcc appends to its output file).
    pub scrub: Vec<PathBuf>,
}

pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Compiles a C/C++ source into `out` unless it is already newer.
pub fn compile(compiler: &str, flags: &[&str], src: &Path, out: &Path) -> Result<()> {
    let fresh = match (std::fs::metadata(src), std::fs::metadata(out)) {
        (Ok(s), Ok(o)) => o.modified()? >= s.modified()?,
        _ => false,
    };
    if fresh {
        return Ok(());
    }
    let status = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(src)
        .status()
        .with_context(|| format!("cannot run {compiler}"))?;
    if !status.success() {
        bail!("{compiler} failed on {}", src.display());
    }
    Ok(())
}

/// The workloads that can run on this machine, and notes on those that cannot.
pub fn available(args: &Config, bin: &Path) -> Result<(Vec<Workload>, Vec<String>)> {
    let mut list = Vec::new();
    let mut notes = Vec::new();
    let ex = &args.examples;
    let scaled = |n: u32| ((n as f64 * args.scale).round() as u32).max(1).to_string();
    let cwd = bin.to_path_buf();
    let simple = |name: &str, arg: String| Workload {
        name: name.into(),
        command: vec![bin.join(name).display().to_string(), arg],
        cwd: cwd.clone(),
        env: vec![],
        scrub: vec![],
    };
    let gcc = ["-O2", "-g"];
    // Repeat counts for about 3 s of CPU each on the development VM.
    for (name, src, arg) in [
        ("abc", "abc/abc.c", 30),
        ("abc_static", "abc/abc_static.c", 30),
        ("pointer_chase", "pointer_chase/pointer_chase.c", 100),
        ("naming", "naming/naming.c", 100),
    ] {
        compile("gcc", &gcc, &ex.join(src), &bin.join(name))?;
        list.push(simple(name, scaled(arg)));
    }
    // A pure register loop: the direct cost of the samples, with little
    // of the memory-related noise of a shared machine.
    compile(
        "gcc",
        &gcc,
        &ex.join("../benches/programs/spin.c"),
        &bin.join("spin"),
    )?;
    list.push(simple("spin", scaled(1500)));
    // examples/inline is left out: g++ hoists its pure kernels out of the
    // repeat loop, so it cannot be made to run long enough.
    let mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe"];
    match (which("mpicc"), which("mpirun")) {
        (Some(_), Some(_)) => {
            compile(
                "mpicc",
                &["-O2", "-g", "-fopenmp"],
                &ex.join("mpi_stencil/mpi_stencil.c"),
                &bin.join("mpi_stencil"),
            )?;
            let mut command: Vec<String> = mpirun.iter().map(|s| s.to_string()).collect();
            command.extend([
                "-np".into(),
                "2".into(),
                bin.join("mpi_stencil").display().to_string(),
                scaled(60),
            ]);
            list.push(Workload {
                name: "mpi_stencil (2 ranks)".into(),
                command,
                cwd: cwd.clone(),
                env: vec![("OMP_NUM_THREADS".into(), "1".into())],
                scrub: vec![],
            });
        }
        _ => notes.push("mpi_stencil skipped: mpicc or mpirun missing (apt-get install openmpi-bin libopenmpi-dev)".into()),
    }
    match (which("hpcc"), which("mpirun")) {
        (Some(hpcc), Some(_)) => {
            let dir = args.dir.join("hpcc");
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("hpccinf.txt"), hpcc_input(args.hpcc_n))?;
            let mut command: Vec<String> = mpirun.iter().map(|s| s.to_string()).collect();
            command.extend(["-np".into(), "1".into(), hpcc.display().to_string()]);
            list.push(Workload {
                name: format!("hpcc (N={}, 1 rank)", args.hpcc_n),
                command,
                cwd: dir.clone(),
                env: vec![],
                scrub: vec![dir.join("hpccoutf.txt")],
            });
        }
        _ => notes.push(
            "hpcc skipped: not installed (apt-get install hpcc; `just overhead` does it)".into(),
        ),
    }
    // An OpenMP proxy of LULESH (benches/programs/lulesh_proxy.c): heap
    // temporaries of several MB allocated and freed every time step. The
    // OpenMP threads wait passively: on a shared 2-vCPU machine, spinning
    // barriers make a 2-thread run's wall time depend on the other tenants
    // by up to 10x.
    compile(
        "gcc",
        &["-O2", "-g", "-fopenmp"],
        &ex.join("../benches/programs/lulesh_proxy.c"),
        &bin.join("lulesh_proxy"),
    )?;
    for threads in [1, 2] {
        let mut w = simple("lulesh_proxy", "30".into());
        w.command.push(scaled(600));
        w.name = format!(
            "lulesh_proxy (s=30, {threads} thread{})",
            if threads == 1 { "" } else { "s" }
        );
        w.env = vec![
            ("OMP_NUM_THREADS".into(), threads.to_string()),
            ("OMP_WAIT_POLICY".into(), "passive".into()),
        ];
        list.push(w);
    }
    // LULESH 2.0 itself, when the user points at its sources.
    if let Some(src) = &args.lulesh_src {
        let sources: Vec<PathBuf> = [
            "lulesh.cc",
            "lulesh-comm.cc",
            "lulesh-viz.cc",
            "lulesh-util.cc",
            "lulesh-init.cc",
        ]
        .iter()
        .map(|f| src.join(f))
        .collect();
        if let Some(missing) = sources.iter().find(|f| !f.is_file()) {
            bail!(
                "--lulesh-src {}: {} is missing (give a clone of https://github.com/LLNL/LULESH)",
                src.display(),
                missing.display()
            );
        }
        let exe = bin.join("lulesh2.0");
        let status = Command::new("g++")
            .args(["-O3", "-g", "-fopenmp", "-DUSE_MPI=0", "-I"])
            .arg(src)
            .args(&sources)
            .arg("-o")
            .arg(&exe)
            .status()
            .context("running g++ for LULESH")?;
        if !status.success() {
            bail!("building LULESH from {} failed", src.display());
        }
        for threads in [1, 2] {
            list.push(Workload {
                name: format!(
                    "lulesh (s=30, {threads} thread{})",
                    if threads == 1 { "" } else { "s" }
                ),
                command: vec![
                    exe.display().to_string(),
                    "-s".into(),
                    "30".into(),
                    "-i".into(),
                    scaled(120),
                ],
                cwd: cwd.clone(),
                env: vec![
                    ("OMP_NUM_THREADS".into(), threads.to_string()),
                    ("OMP_WAIT_POLICY".into(), "passive".into()),
                ],
                scrub: vec![],
            });
        }
    }
    // hypre's AMG benchmark, when the user points at its sources.
    if let Some(src) = &args.amg_src {
        if which("mpicc").is_none() || which("mpirun").is_none() {
            bail!("--amg-src needs mpicc and mpirun (apt-get install openmpi-bin libopenmpi-dev)");
        }
        let exe = build_amg(src, &args.dir.join("amg-src"))?;
        // -n is the grid per process: 2 ranks do twice the work of 1.
        let n = ((60.0 * args.scale.cbrt()).round() as u32)
            .max(4)
            .to_string();
        for (ranks, threads) in [(1, 1), (1, 2), (2, 1)] {
            let mut command: Vec<String> = mpirun.iter().map(|s| s.to_string()).collect();
            command.extend(["-np".into(), ranks.to_string(), exe.display().to_string()]);
            command.extend(["-problem", "1", "-n"].map(String::from));
            command.extend([n.clone(), n.clone(), n.clone()]);
            command.extend(["-P".into(), ranks.to_string(), "1".into(), "1".into()]);
            list.push(Workload {
                name: format!(
                    "amg (problem 1, n={n}, {ranks} rank{}, {threads} thread{})",
                    if ranks == 1 { "" } else { "s" },
                    if threads == 1 { "" } else { "s" }
                ),
                command,
                cwd: cwd.clone(),
                env: vec![
                    ("OMP_NUM_THREADS".into(), threads.to_string()),
                    ("OMP_WAIT_POLICY".into(), "passive".into()),
                ],
                scrub: vec![],
            });
        }
    }
    // LAMMPS (Debian), the Lennard-Jones melt example, one process, with
    // more steps than the example's 250 (about 4 s).
    match (which("lmp"), std::fs::read_to_string(LAMMPS_MELT)) {
        (Some(lmp), Ok(input)) => {
            let dir = args.dir.join("lammps");
            std::fs::create_dir_all(&dir)?;
            let steps = scaled(2000);
            let input: String = input
                .lines()
                .map(|l| {
                    if l.split_whitespace().next() == Some("run") {
                        format!("run\t\t{steps}\n")
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            std::fs::write(dir.join("in.melt"), input)?;
            list.push(Workload {
                name: format!("lammps_melt ({steps} steps, 1 process)"),
                command: vec![
                    lmp.display().to_string(),
                    "-in".into(),
                    "in.melt".into(),
                    "-log".into(),
                    "none".into(),
                ],
                cwd: dir,
                env: vec![("OMP_NUM_THREADS".into(), "1".into())],
                scrub: vec![],
            });
        }
        _ => notes.push(
            "lammps_melt skipped: lmp or its examples missing (apt-get install lammps lammps-examples; `just overhead` does it)".into(),
        ),
    }
    let keep = |w: &Workload| {
        let short = w.name.split_whitespace().next().unwrap_or("");
        (args.only.is_empty() || args.only.iter().any(|o| o == short))
            && !args.skip.iter().any(|s| s == short)
    };
    list.retain(keep);
    Ok((list, notes))
}

/// The LAMMPS example input (Debian package lammps-examples).
const LAMMPS_MELT: &str = "/usr/share/lammps/examples/melt/in.melt";

/// hpcc's input: Debian's example with one process (P = Q = 1)
/// (`benches/inputs/hpccinf.txt`, also used by tests/real_apps.rs) with
/// HPL size `n` (RandomAccess, STREAM, DGEMM and FFT sizes follow from it).
fn hpcc_input(n: u32) -> String {
    include_str!("../../../inputs/hpccinf.txt")
        .lines()
        .map(|l| {
            if l.ends_with(" Ns") {
                format!("{n:<12} Ns\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// Builds AMG (a clone of github.com/LLNL/AMG) with its own Makefile
/// (`mpicc -O2 -fopenmp`, OpenMP and MPI) in a copy at `build`, made once:
/// the clone is left as it was. Returns the executable.
fn build_amg(src: &Path, build: &Path) -> Result<PathBuf> {
    if !src.join("Makefile.include").is_file() || !src.join("test/amg.c").is_file() {
        bail!(
            "--amg-src {}: not an AMG source tree (give a clone of https://github.com/LLNL/AMG)",
            src.display()
        );
    }
    if !build.join("Makefile").is_file() {
        std::fs::create_dir_all(build)?;
        let status = Command::new("cp")
            .arg("-a")
            .arg(src.join("."))
            .arg(build)
            .status()
            .context("running cp")?;
        if !status.success() {
            bail!("copying {} to {} failed", src.display(), build.display());
        }
    }
    let status = Command::new("make")
        .arg("-C")
        .arg(build)
        .arg("-j2")
        .stdout(Stdio::null())
        .status()
        .context("running make for AMG")?;
    let exe = build.join("test/amg");
    if !status.success() || !exe.is_file() {
        bail!(
            "building AMG in {} failed (run make there to see why)",
            build.display()
        );
    }
    Ok(exe)
}
