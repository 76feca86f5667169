//! A program that fits its address-space limit (`ulimit -v`) natively,
//! and whose measured run makes the profiler's per-thread trees grow
//! until the limit stops them: the program runs as natively, the
//! profiler stops growing its trees and says so in the database.
//!
//! `tree_growth.c` under `ulimit -v 400000` starts 4 workers, takes
//! all of its limit but 10 MiB in one written block, then each worker
//! walks ever new call paths (16 calls deep among 8 functions) for 40
//! phases of 25 ms of its CPU time, allocating and keeping 10,240 small
//! blocks (16-79 bytes) from as many call paths. Measured on the
//! development VM (2026-11-28, debug build):
//! * natively the phase needs about 2.4 MiB of the 10 MiB (its heap's
//!   `brk` grows by 2.35 MiB; it fits with 3 MiB left, not with 2);
//! * measured, the profiler's tables grow by about 6 MiB in the phase
//!   (call-path tree chunks of the workers, the small-block map's slabs
//!   and pages) when the program leaves it 64 MiB: more than the 10 MiB
//!   leave beside the program's 2.4 MiB and the 6,248 KiB the profiler
//!   keeps for the program under this limit (a 64th of it);
//! * before the profiler kept that headroom, its small-block map's slabs
//!   (256 KiB for each of 64 shards) and tree chunks took the free
//!   address space, and the program's `malloc` failed: 4,199-4,728 of
//!   its 40,960 blocks, exit status 1 (three runs).

use std::path::Path;
use std::process::{Command, Output};

use pipeline_tests::*;

/// The address-space limit of the runs (KiB).
const LIMIT_KIB: u64 = 400_000;

/// The program's arguments: MiB it leaves free, workers, phases.
const ARGS: &str = "10 4 40";

/// The words the notice of a limit reached opens with.
const LIMIT_REACHED: &str =
    "measurement limited: the profiler's memory reached the process's address-space limit";

/// Runs `cmd` (a shell command line) under `ulimit -v LIMIT_KIB`.
fn limited(cmd: String) -> Output {
    run(Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {LIMIT_KIB} && exec {cmd} {ARGS}")))
}

/// The exported row of `function` in the code view, if any.
fn function_row<'a>(code: &'a serde_json::Value, function: &str) -> Option<&'a serde_json::Value> {
    code["functions"]
        .as_array()?
        .iter()
        .find(|f| f["function"] == function)
}

/// Samples of every metric column of an exported row.
fn samples_of(row: &serde_json::Value) -> u64 {
    ["samples", "store_samples", "cpu_samples"]
        .iter()
        .filter_map(|m| row["metrics"][m].as_u64())
        .sum()
}

fn measured(dir: &Path, exe: &Path) -> (Output, std::path::PathBuf) {
    let measurements = dir.join("measurements");
    let out = limited(format!(
        "{} -e mem:soft -o {} {}",
        tool("hpcrun-rs").display(),
        measurements.display(),
        exe.display()
    ));
    (out, measurements)
}

#[test]
fn trees_that_outgrow_the_address_space_limit_stop_and_the_program_runs_as_natively() {
    let dir = scratch("tree-growth");
    let exe = compile_test_program("tree_growth.c", &dir, &["-pthread"]);
    let native = limited(exe.display().to_string());
    let want = String::from_utf8_lossy(&native.stdout).into_owned();
    assert_eq!(native.status.code(), Some(0), "natively: {native:?}");
    assert!(want.starts_with("blocks 40960 sum "), "natively: {want}");

    let (got, measurements) = measured(&dir, &exe);
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert_eq!(
        String::from_utf8_lossy(&got.stdout),
        want,
        "measured under ulimit -v {LIMIT_KIB}; stderr: {stderr}"
    );
    assert_eq!(got.status.code(), Some(0), "{stderr}");
    // The main thread and the 4 workers (all started before the limit
    // was reached).
    assert_eq!(read_profiles(&measurements).len(), 5, "{stderr}");

    let (merged, db) = merge(&dir, &measurements);
    let summary = String::from_utf8_lossy(&merged.stderr);
    assert!(summary.contains(LIMIT_REACHED), "{summary}");
    let data = export_json(&db, "data");
    let stats = &data["stats"];
    let notices = stats["notices"].as_object().expect("stats.notices");
    assert!(
        notices.keys().any(|n| n.starts_with(LIMIT_REACHED)
            && n.contains(&format!("ulimit -v {LIMIT_KIB} KiB"))
            && n.contains("call paths first reached after that are not recorded")),
        "{notices:#?}"
    );
    // What the trees held before the limit was reached is kept: the
    // workers' leaf, where they spend their time, has samples.
    assert!(stats["samples"].as_u64().is_some_and(|n| n > 0), "{stats}");
    let code = export_json(&db, "code");
    let leaf = function_row(&code, "leaf").unwrap_or_else(|| panic!("no leaf row: {code}"));
    assert!(samples_of(leaf) > 0, "{leaf}");
}
