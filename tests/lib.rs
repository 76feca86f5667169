//! Helpers for the end-to-end tests: build the real tools once, compile the
//! example C programs with gcc, run the pipeline
//! (`hpcrun-rs` -> `hpcprof-rs` -> `hpcprof-rs export` / `hpcview-tui`) and
//! read the JSON export.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Directory of the built binaries (the profile this test was built with).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    // target/<profile>/deps/<test> -> target/<profile>
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf()
}

/// Builds the three tools and the preload library (once per test binary).
pub fn tools() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = bin_dir();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(root()).args([
            "build",
            "-q",
            "-p",
            "hpcrun-rs",
            "-p",
            "hpcrun-preload",
            "-p",
            "hpcprof-rs",
            "-p",
            "hpcview-tui",
        ]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building the tools failed");
        dir
    })
}

/// Path of a built tool.
pub fn tool(name: &str) -> PathBuf {
    tools().join(name)
}

/// `<temp>/hpc-tests`, where every test process keeps its scratch
/// directories (`<pid>-<name>`). The first call of a process removes the
/// directories of test processes that have ended (a failed test's files
/// stay until the next run), and those of the older layout
/// (`<temp>/hpc-tests-<pid>-<name>`).
fn scratch_root() -> &'static Path {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let temp = std::env::temp_dir();
        let root = temp.join("hpc-tests");
        std::fs::create_dir_all(&root).expect("create the scratch root");
        let ended = |name: &str| {
            name.split('-')
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|pid| {
                    pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
                })
        };
        for (dir, prefix) in [(&root, ""), (&temp, "hpc-tests-")] {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(rest) = name.strip_prefix(prefix) {
                    if ended(rest) {
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                }
            }
        }
        root
    })
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = scratch_root().join(format!("{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Compiles `examples/<rel>` with `gcc -O2 -g` (plus `extra` flags) into `dir`.
pub fn compile_c(rel: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    compile(&root().join("examples").join(rel), dir, extra)
}

/// Compiles `src` (C, or C++ for `.cpp`) with `-O2 -g` plus `extra` into
/// `dir` (`lib<stem>.so` with `-shared`); returns the output path.
fn compile(src: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let src = src.canonicalize().unwrap_or_else(|_| src.to_path_buf());
    let stem = src
        .file_stem()
        .expect("source name")
        .to_string_lossy()
        .into_owned();
    let out = dir.join(if extra.contains(&"-shared") {
        format!("lib{stem}.so")
    } else {
        stem
    });
    let compiler = if src.extension().is_some_and(|e| e == "cpp") {
        "g++"
    } else {
        "gcc"
    };
    compile_with(compiler, &src, out, extra)
}

/// Runs `compiler -O2 -g EXTRA -o OUT SRC`; returns `out`.
fn compile_with(compiler: &str, src: &Path, out: PathBuf, extra: &[&str]) -> PathBuf {
    let status = Command::new(compiler)
        .args(["-O2", "-g"])
        .args(extra)
        .arg("-o")
        .arg(&out)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(status.success(), "{compiler} failed on {}", src.display());
    out
}

/// Compiles `rel` (below the repository root) with the MPI compiler
/// wrapper `compiler` (`mpicc`, `mpicc.mpich`) and `-O2 -g` plus `extra`
/// into `dir`; returns the output path.
pub fn compile_mpi(compiler: &str, rel: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let src = root().join(rel);
    let out = dir.join(src.file_stem().expect("source name"));
    compile_with(compiler, &src, out, extra)
}

/// `hpcrun-rs -o OUT` in `dir`, with no parallel-job variables from the
/// environment the tests run in (each launch is a run of its own).
pub fn hpcrun_alone(dir: &Path, out: &str) -> Command {
    let mut cmd = Command::new(tool("hpcrun-rs"));
    cmd.current_dir(dir).args(["-o", out]);
    for var in [
        "PMIX_NAMESPACE",
        "OMPI_MCA_ess_base_jobid",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_NTASKS",
        "PMI_RANK",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The number after `label` in `text` ("samples: 779," -> 779).
pub fn number_after(text: &str, label: &str) -> u64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {text}"));
    text[at + label.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {label:?} in {text}"))
}

/// True when `program --version` runs; otherwise prints why the calling
/// test is skipped (`install` says what provides it). Under CI (`CI` set)
/// a missing tool fails instead: CI installs them all.
pub fn have_tool(program: &str, install: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must provide {program} ({install})"
        );
        eprintln!("SKIPPED: {program} not found; install {install} to run this test");
    }
    found
}

/// The Rust compiler: `$RUSTC` if set, else `rustc` from `PATH`.
pub fn rustc() -> String {
    std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string())
}

/// Compiles the single-file Rust program `examples/<rel>` with `rustc -O -g`
/// (no Cargo project) into `dir`; returns the executable's path.
pub fn compile_rust(rel: &str, dir: &Path) -> PathBuf {
    let src = root().join("examples").join(rel);
    let src = src.canonicalize().unwrap_or(src);
    let out = dir.join(src.file_stem().expect("source name"));
    let status = Command::new(rustc())
        .args(["-O", "-g", "--edition", "2021", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("run rustc: {e}"));
    assert!(status.success(), "rustc failed on {}", src.display());
    out
}

/// An exit status as a shell shows it: the exit code, or 128+N when the
/// process was killed by signal N (hpcrun-rs ends as its program did).
pub fn shell_status(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// Runs the shell command line `cmd` as `sh -c "SETUP && exec CMD"`:
/// under limits the shell sets first (`setup`: `ulimit -v 200000`), as a
/// user would start it (the limits are the launcher's and the
/// program's).
pub fn run_in_shell(setup: &str, cmd: &str) -> Output {
    run(Command::new("sh")
        .arg("-c")
        .arg(format!("{setup} && exec {cmd}")))
}

/// Runs a command, returning its output; panics if it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Asserts success and returns stdout as text.
pub fn ok_stdout(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `program ARGS` natively, then profiles it ([`profile`]) and
/// asserts that it printed the same output; returns the pipeline's result.
pub fn profile_same_output(dir: &Path, event: &str, program: &Path, args: &[&str]) -> Pipeline {
    let native = ok_stdout(&run(Command::new(program).args(args)), "native run");
    let p = profile(dir, event, program, args);
    assert_eq!(
        p.program_stdout, native,
        "output changed under the profiler"
    );
    p
}

/// Asserts that the stderr of a profiled run is the unprofiled run's
/// stderr plus hpcrun-rs's own lines (`hpcrun-rs: ...`), in order; returns
/// hpcrun-rs's lines.
pub fn assert_stderr_is_the_programs_own(profiled: &Output, native: &Output) -> Vec<String> {
    let err = String::from_utf8_lossy(&profiled.stderr);
    let (own, rest): (Vec<&str>, Vec<&str>) =
        err.lines().partition(|l| l.starts_with("hpcrun-rs: "));
    let native_err = String::from_utf8_lossy(&native.stderr);
    assert_eq!(
        rest,
        native_err.lines().collect::<Vec<_>>(),
        "profiling changed stderr:\n{err}"
    );
    own.into_iter().map(str::to_string).collect()
}

/// Result of a full pipeline run.
pub struct Pipeline {
    /// stdout of the profiled program.
    pub program_stdout: String,
    pub measurements: PathBuf,
    pub db: PathBuf,
}

/// hpcrun-rs (with `event`) then hpcprof-rs, in `dir`.
pub fn profile(dir: &Path, event: &str, program: &Path, args: &[&str]) -> Pipeline {
    profile_with(dir, &[], event, program, args)
}

/// [`profile`] with more `hpcrun-rs` options (`opts`, e.g. `--alloc-log`).
pub fn profile_with(
    dir: &Path,
    opts: &[&str],
    event: &str,
    program: &Path,
    args: &[&str],
) -> Pipeline {
    let db = dir.join("db");
    let (out, measurements) = hpcrun_with(dir, opts, event, program, args);
    let program_stdout = ok_stdout(&out, "hpcrun-rs");
    let out = run(Command::new(tool("hpcprof-rs"))
        .current_dir(dir)
        .arg("-o")
        .arg(&db)
        .arg(&measurements));
    ok_stdout(&out, "hpcprof-rs");
    Pipeline {
        program_stdout,
        measurements,
        db,
    }
}

/// `hpcprof-rs export DB --view VIEW --format json`, parsed.
pub fn export_json(db: &Path, view: &str) -> serde_json::Value {
    let out = run(Command::new(tool("hpcprof-rs"))
        .args(["export"])
        .arg(db)
        .args(["--view", view, "--format", "json"]));
    let text = ok_stdout(&out, "hpcprof-rs export");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("export is not JSON ({e}):\n{text}"))
}

/// Line number (1-based) of the first line of `examples/<rel>` containing `needle`.
pub fn line_of(rel: &str, needle: &str) -> u64 {
    let text = std::fs::read_to_string(root().join("examples").join(rel)).expect("read example");
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("{needle:?} not in {rel}"))
}

/// The exported heap object whose allocation path ends at `file` (a path
/// suffix) line `line`, if any.
pub fn heap_object_at<'a>(
    objects: &'a [serde_json::Value],
    file: &str,
    line: u64,
) -> Option<&'a serde_json::Value> {
    objects.iter().find(|o| {
        o["kind"] == "heap"
            && o["alloc_path"]
                .as_array()
                .and_then(|p| p.last())
                .is_some_and(|f| {
                    f["line"].as_u64() == Some(line)
                        && f["file"].as_str().is_some_and(|s| s.ends_with(file))
                })
    })
}

/// Samples (primary metric) of an exported object.
pub fn samples(obj: &serde_json::Value) -> u64 {
    obj["metrics"]["samples"].as_u64().unwrap_or(0)
}

/// Every measurement file in `dir`, decoded.
pub fn read_profiles(dir: &Path) -> Vec<formats::measurement::ThreadProfile> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("measurement dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "hpcrun") {
            let bytes = std::fs::read(&path).expect("read profile");
            out.push(
                formats::measurement::ThreadProfile::from_bytes(&bytes)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            );
        }
    }
    out
}

/// Runs `program` under `hpcrun-rs -e EVENT -o DIR` and returns its output.
pub fn hpcrun(dir: &Path, event: &str, program: &Path, args: &[&str]) -> (Output, PathBuf) {
    hpcrun_with(dir, &[], event, program, args)
}

/// [`hpcrun`] with more `hpcrun-rs` options (`opts`, e.g. `--alloc-log`:
/// the tests that read the allocation log).
pub fn hpcrun_with(
    dir: &Path,
    opts: &[&str],
    event: &str,
    program: &Path,
    args: &[&str],
) -> (Output, PathBuf) {
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .current_dir(dir)
        .args(opts)
        .args(["-e", event, "-o"])
        .arg(&measurements)
        .arg(program)
        .args(args));
    (out, measurements)
}

/// Compiles `tests/programs/<name>` (C, or C++ by extension) with `-O2 -g`
/// plus `extra` into `dir`; returns the output path.
pub fn compile_test_program(name: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    compile(&root().join("tests/programs").join(name), dir, extra)
}

/// Merges `measurements` into `dir/db` with hpcprof-rs (asserting
/// success): hpcprof-rs's output and the database's path.
pub fn merge(dir: &Path, measurements: &Path) -> (Output, PathBuf) {
    let db = dir.join("db");
    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("-o")
        .arg(&db)
        .arg(measurements));
    ok_stdout(&out, "hpcprof-rs");
    (out, db)
}

/// Merges `measurements` into `dir/db` with hpcprof-rs and exports the data view.
pub fn merge_and_export(dir: &Path, measurements: &Path) -> serde_json::Value {
    export_json(&merge(dir, measurements).1, "data")
}

/// examples/first_touch (compiled to `exe`) in `mode` (`serial` or
/// `parallel`), 2 OpenMP threads, 4 sweeps, under `hpcrun-rs -e EVENT -e
/// page-faults@1` (every fault: exact page counts) into
/// `sub/measurements`: (program's stdout, measurements).
pub fn measure_first_touch(sub: &Path, exe: &Path, event: &str, mode: &str) -> (String, PathBuf) {
    std::fs::create_dir_all(sub).unwrap();
    let measurements = sub.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .env("OMP_NUM_THREADS", "2")
        .args(["-e", event, "-e", "page-faults@1", "-o"])
        .arg(&measurements)
        .arg(exe)
        .args([mode, "4"]));
    (ok_stdout(&out, "hpcrun-rs first_touch"), measurements)
}
