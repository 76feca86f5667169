//! Programs that sandbox themselves with seccomp (raw BPF filters
//! installed after start), natively and under the real `hpcrun-rs`: the
//! same output and exit status, and a notice in the measurements that
//! the measurement was limited.
//!
//! * `seccomp_mmap.c`: `mmap` fails with EPERM after start; the program
//!   allocates 64 MiB in 1 KiB blocks and runs a thread on a stack of its
//!   own. The profiler's heap is refused mappings: it goes on from its
//!   reserve, stops tracking blocks and writes its profiles.
//! * `many_blocks_no_mmap.c`: `mmap` and `mremap` fail after start,
//!   then 5 threads keep 2 million small blocks from 64 sites live, and
//!   every block is logged (`--min-bytes 16 --alloc-log`): the log
//!   would need more than the profiler's 16 MiB reserve; it is cut, said
//!   in a notice, and the program ends as natively (it used to abort on
//!   the failed allocation).
//! * `deep_paths_no_mmap.c`: `mmap` and `mremap` fail after start in
//!   every thread (TSYNC, the checkpoint helper's too); then 4 threads
//!   sample tens of thousands of distinct 40-call paths, with a
//!   checkpoint due every 0.1 s. The main thread's tree fills (65,536
//!   nodes), more than the reserve can write: the profile keeps the
//!   nodes it can spare and says how many it left out, the checkpoints
//!   due after the refusal are skipped (said in the notice), and the
//!   program ends as natively (it used to abort in the writer).
//! * `fill_address_space.c`: under `ulimit -v 200000` the main thread
//!   takes every byte of its limit while 3 threads compute: the
//!   profiler is refused mappings (its heap then uses its reserve, 8 MiB
//!   under this limit) and writes every thread's profile.
//! * `seccomp_allow.c`: an allow-list that kills the process on any
//!   other call (SECCOMP_RET_KILL_PROCESS). The profiler sees the filter
//!   coming (its `prctl`), writes its profiles before it is in place and
//!   makes no call of its own after it.
//! * `chroot_jail.c`: the program changes its root to an empty directory
//!   (in a user namespace of its own when it may not otherwise), closes
//!   every descriptor from 3 up, then computes on a heap array: its
//!   profile, written after the `chroot`, still reaches the measurements
//!   directory outside the new root.

use std::path::Path;
use std::process::{Command, Output};

use pipeline_tests::*;

fn native(exe: &Path) -> Output {
    run(&mut Command::new(exe))
}

/// `hpcrun-rs -o DIR/measurements exe`, then `hpcprof-rs` on its output:
/// (the program's run, hpcprof-rs's stderr).
fn measured(dir: &Path, exe: &Path) -> (Output, String) {
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .arg("-o")
        .arg(&measurements)
        .arg(exe));
    let (merged, _db) = merge(dir, &measurements);
    (out, String::from_utf8_lossy(&merged.stderr).into_owned())
}

fn assert_same(got: &Output, want: &Output, what: &str) {
    assert_eq!(
        String::from_utf8_lossy(&got.stdout),
        String::from_utf8_lossy(&want.stdout),
        "{what}: stdout differs; stderr: {}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert_eq!(
        shell_status(&got.status),
        shell_status(&want.status),
        "{what}: exit status or signal differs; stderr: {}",
        String::from_utf8_lossy(&got.stderr)
    );
}

#[test]
fn the_profilers_memory_running_out_never_aborts_the_program() {
    let dir = scratch("many-blocks-no-mmap");
    let exe = compile_test_program("many_blocks_no_mmap.c", &dir, &["-pthread"]);
    let want = native(&exe);
    assert_eq!(want.status.code(), Some(0), "native run: {want:?}");
    let stdout = String::from_utf8_lossy(&want.stdout);
    assert!(stdout.starts_with("blocks 2000000 "), "{stdout}");
    let measurements = dir.join("measurements");
    let got = run(Command::new(tool("hpcrun-rs"))
        .args(["--min-bytes", "16", "--alloc-log", "-o"])
        .arg(&measurements)
        .arg(&exe));
    assert_same(&got, &want, "many_blocks_no_mmap under hpcrun-rs");
    let (merged, db) = merge(&dir, &measurements);
    let said = String::from_utf8_lossy(&merged.stderr);
    let report = ok_stdout(
        &run(Command::new(tool("hpcview-tui")).arg(&db).arg("--report")),
        "hpcview-tui --report",
    );
    for notice in [
        "Warning: measurement limited: the kernel refused the profiler memory",
        "Warning: measurement limited: the profiler's memory ran out",
    ] {
        assert!(
            report.contains(notice),
            "{notice:?} not in\n{report}\n{said}"
        );
    }
}

#[test]
fn call_trees_that_outgrow_the_reserve_are_cut_never_abort() {
    let dir = scratch("deep-paths-no-mmap");
    let exe = compile_test_program("deep_paths_no_mmap.c", &dir, &["-pthread"]);
    let want = native(&exe);
    assert_eq!(want.status.code(), Some(0), "native run: {want:?}");
    assert_eq!(
        String::from_utf8_lossy(&want.stdout).lines().count(),
        4,
        "{want:?}"
    );
    let measurements = dir.join("measurements");
    // A sample every 100 us of CPU time: the main thread's paths fill its
    // tree; a checkpoint due every 0.1 s.
    let got = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", "mem:soft@100000", "--checkpoint", "0.1", "-o"])
        .arg(&measurements)
        .arg(&exe));
    assert_same(&got, &want, "deep_paths_no_mmap under hpcrun-rs");
    let (merged, db) = merge(&dir, &measurements);
    let said = String::from_utf8_lossy(&merged.stderr);
    assert!(said.contains("merged 4 profiles"), "{said}");
    let report = ok_stdout(
        &run(Command::new(tool("hpcview-tui")).arg(&db).arg("--report")),
        "hpcview-tui --report",
    );
    let warnings: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("Warning: measurement limited"))
        .collect();
    let has = |text: &str| warnings.iter().any(|w| w.contains(text));
    assert!(
        has("the kernel refused the profiler memory")
            && has("checkpoints of threads due after that were not written"),
        "{warnings:#?}\n{said}"
    );
    assert!(
        has("call-path tree nodes, the paths first seen last, were not written"),
        "{warnings:#?}\n{said}"
    );
}

#[test]
fn a_program_refused_new_mappings_runs_as_natively() {
    let dir = scratch("seccomp-mmap");
    let exe = compile_test_program("seccomp_mmap.c", &dir, &["-pthread"]);
    let want = native(&exe);
    assert_eq!(want.status.code(), Some(0), "native run: {want:?}");
    let stdout = String::from_utf8_lossy(&want.stdout);
    assert!(stdout.contains("mmap EPERM"), "{stdout}");
    assert!(stdout.contains("blocks 65536 "), "{stdout}");
    let (got, summary) = measured(&dir, &exe);
    assert_same(&got, &want, "seccomp_mmap under hpcrun-rs");
    // Whether the profiler's heap asks the kernel for memory after the
    // filter, and so tells of a refusal too, depends on how much its
    // current chunk has left: the refusal notice is checked where memory
    // runs out for sure (the test above). The worker thread's tables
    // cannot be mapped after the filter: the filter's notice says so.
    assert!(
        summary.contains("what they would have measured is missing"),
        "{summary}"
    );
}

#[test]
fn a_program_that_kills_on_unlisted_calls_runs_as_natively() {
    let dir = scratch("seccomp-allow");
    let exe = compile_test_program("seccomp_allow.c", &dir, &["-pthread"]);
    let want = native(&exe);
    assert_eq!(want.status.code(), Some(0), "native run: {want:?}");
    let (got, summary) = measured(&dir, &exe);
    assert_same(&got, &want, "seccomp_allow under hpcrun-rs");
    assert!(
        summary.contains("measurement limited: the program installed a seccomp filter that kills"),
        "{summary}"
    );
}

#[test]
fn a_program_that_fills_its_ulimit_v_gets_every_profile_from_the_smaller_reserve() {
    let dir = scratch("fill-address-space");
    let exe = compile_test_program("fill_address_space.c", &dir, &["-pthread"]);
    let limited = |cmd: String| run_in_shell("ulimit -v 200000", &cmd);
    let want = limited(exe.display().to_string());
    assert_eq!(want.status.code(), Some(0), "native run: {want:?}");
    let measurements = dir.join("measurements");
    let got = limited(format!(
        "{} -o {} {}",
        tool("hpcrun-rs").display(),
        measurements.display(),
        exe.display()
    ));
    assert_same(&got, &want, "fill_address_space under ulimit -v 200000");
    let mut threads: Vec<u32> = read_profiles(&measurements)
        .iter()
        .map(|p| p.thread.index)
        .collect();
    threads.sort_unstable();
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert_eq!(threads, [0, 1, 2, 3], "{stderr}");
    // The small-block map is refused its slabs in every run; whether the
    // profiler's heap is refused a mapping too (and writes from its
    // reserve) depends on how much its current chunk has left when the
    // limit is reached (in some runs only).
    assert!(stderr.contains("no memory for the object map"), "{stderr}");
    let (merged, _db) = merge(&dir, &measurements);
    assert_eq!(
        merged.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
}

/// A program that fills its address-space limit and then dies of a
/// SIGSEGV dies of it under the profiler too: the profiles written after
/// the fatal signal find no room for new mappings and take the reserve
/// (a failed allocation there would end the program by SIGABRT instead).
#[test]
fn a_program_that_crashes_with_its_ulimit_v_full_dies_of_its_own_signal() {
    let dir = scratch("fill-address-space-crash");
    let exe = compile_test_program("fill_address_space.c", &dir, &["-pthread"]);
    let limited =
        |cmd: String| run_in_shell("ulimit -c 0 && ulimit -v 200000", &format!("{cmd} crash"));
    let want = limited(exe.display().to_string());
    assert_eq!(String::from_utf8_lossy(&want.stdout), "filled\n");
    assert_eq!(
        shell_status(&want.status),
        128 + libc::SIGSEGV,
        "native run: {want:?}"
    );
    let measurements = dir.join("measurements");
    let got = limited(format!(
        "{} -o {} {}",
        tool("hpcrun-rs").display(),
        measurements.display(),
        exe.display()
    ));
    assert_same(
        &got,
        &want,
        "fill_address_space crash under ulimit -v 200000",
    );
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(
        read_profiles(&measurements)
            .iter()
            .any(|p| p.thread.index == 0),
        "{stderr}"
    );
}

/// A program that confines itself with `chroot` into an empty directory
/// and closes its descriptors keeps its output, and its profile (written
/// at its exit, inside the new root) reaches the measurements directory:
/// one profile, merged, whose heap array has the program's samples.
#[test]
fn a_program_that_chroots_itself_keeps_its_profile() {
    let dir = scratch("sandbox-chroot");
    let exe = compile_test_program("chroot_jail.c", &dir, &[]);
    let jail = dir.join("jail");
    std::fs::create_dir_all(&jail).unwrap();
    let want = run(Command::new(&exe).arg(&jail));
    assert_eq!(want.status.code(), Some(0), "native run: {want:?}");
    let measurements = dir.join("measurements");
    let got = run(Command::new(tool("hpcrun-rs"))
        .arg("-o")
        .arg(&measurements)
        .arg(&exe)
        .arg(&jail));
    assert_same(&got, &want, "chroot_jail");
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(!stderr.contains("could not"), "{stderr}");
    assert_eq!(read_profiles(&measurements).len(), 1, "{stderr}");
    let data = merge_and_export(&dir, &measurements);
    let objects = data["objects"].as_array().expect("objects");
    let line = {
        let text = std::fs::read_to_string(root().join("tests/programs/chroot_jail.c")).unwrap();
        text.lines()
            .position(|l| l.contains("double *jail_array = malloc"))
            .expect("the allocation line") as u64
            + 1
    };
    let array = heap_object_at(objects, "chroot_jail.c", line)
        .unwrap_or_else(|| panic!("no heap object at line {line}: {objects:#?}"));
    assert!(samples(array) > 0, "{array:#}");
}
