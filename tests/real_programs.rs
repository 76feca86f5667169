//! Real programs behave exactly as without the profiler (same stdout, same
//! exit status) and leave readable profiles: a gcc compile (a fork/exec
//! chain), `sort -n` of 200,000 numbers, and python3 running 16 threads that
//! use sqlite3.

use std::collections::HashSet;
use std::process::Command;

use pipeline_tests::*;

fn exe_names(profiles: &[formats::measurement::ThreadProfile]) -> HashSet<String> {
    profiles
        .iter()
        .map(|p| p.process.exe.rsplit('/').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn gcc_compile_chain() {
    let dir = scratch("real-gcc");
    let src = root().join("examples/abc/abc.c");
    let native = run(Command::new("gcc")
        .current_dir(&dir)
        .args(["-O2", "-o", "native.bin"])
        .arg(&src));
    assert!(native.status.success());
    let (out, measurements) = hpcrun(
        &dir,
        "mem:soft@200000",
        Path::new("gcc"),
        &["-O2", "-o", "profiled.bin", &src.to_string_lossy()],
    );
    assert_eq!(out.status.code(), native.status.code());
    assert_eq!(out.stdout, native.stdout);
    // The same compiler output (gcc is deterministic for the same input).
    assert_eq!(
        std::fs::read(dir.join("native.bin")).unwrap(),
        std::fs::read(dir.join("profiled.bin")).unwrap()
    );
    let profiles = read_profiles(&measurements);
    let names = exe_names(&profiles);
    for tool in ["cc1", "as", "collect2", "ld"] {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(tool) || n.contains(tool)),
            "no profile from {tool}: {names:?}"
        );
    }
    let export = merge_and_export(&dir, &measurements);
    assert!(export["source"]["processes"].as_u64().unwrap() >= 4);
}

#[test]
fn sort_200000_numbers() {
    let dir = scratch("real-sort");
    let input = dir.join("numbers.txt");
    let mut text = String::with_capacity(200_000 * 8);
    let mut x: u64 = 12345;
    for _ in 0..200_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(&format!("{}\n", (x >> 33) % 10_000_000));
    }
    std::fs::write(&input, text).unwrap();
    let native = run(Command::new("sort").arg("-n").arg(&input));
    let (out, measurements) = hpcrun(
        &dir,
        "mem:soft@100000",
        Path::new("sort"),
        &["-n", &input.to_string_lossy()],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        out.stdout, native.stdout,
        "sort's output changed under the profiler"
    );
    let profiles = read_profiles(&measurements);
    assert!(!profiles.is_empty());
    let total: u64 = profiles.iter().map(|p| p.stats.samples).sum();
    assert!(total > 0, "sort was not sampled");
}

#[test]
fn python_16_threads_with_sqlite3() {
    let dir = scratch("real-python");
    let script = root().join("tests/programs/sqlite_threads.py");
    let native = run(Command::new("python3").arg(&script));
    assert!(
        native.status.success(),
        "{}",
        String::from_utf8_lossy(&native.stderr)
    );
    let (out, measurements) = hpcrun(
        &dir,
        "mem:soft",
        Path::new("python3"),
        &[&script.to_string_lossy()],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, native.stdout);
    let profiles = read_profiles(&measurements);
    // The python process itself: its main thread and the 16 workers.
    let python: Vec<_> = profiles
        .iter()
        .filter(|p| {
            p.process
                .exe
                .rsplit('/')
                .next()
                .is_some_and(|e| e.starts_with("python"))
        })
        .collect();
    let pids: HashSet<u32> = python.iter().map(|p| p.process.pid).collect();
    assert_eq!(pids.len(), 1, "{:?}", exe_names(&profiles));
    assert!(
        python.len() >= 17,
        "only {} python thread profiles",
        python.len()
    );
}

use std::path::Path;
