//! OpenMP time hangs under the parallel region that ran it:
//! `tests/programs/omp_regions.c` calls two regions of equal work in
//! turn, `sweep`'s and `checksum`'s, on two threads. libgomp's worker
//! thread is created by the first region (`sweep`'s) and then runs both;
//! its samples must still land under the region running them, so the two
//! functions' inclusive shares come out about equal, and no outlined
//! function of `checksum` sits under `sweep`. The master thread's own
//! samples are checked the same way, from its profile alone.

use std::path::Path;
use std::process::Command;

use formats::database::{Database, NodeKind, Tree};
use pipeline_tests::*;

/// The function names on the path from the root to node `n`, root first.
fn path(db: &Database, tree: &Tree, mut n: u32) -> Vec<String> {
    let mut out = Vec::new();
    while n != u32::MAX {
        let node = &tree.nodes[n as usize];
        if let NodeKind::Frame(f) = node.kind {
            out.push(db.frames[f as usize].function.clone());
        }
        n = node.parent;
    }
    out.reverse();
    out
}

/// Per function of interest, the CPU samples at or below its outermost
/// frames (each sample counted once per function), and the samples of an
/// outlined `checksum._omp_fn` function found under `sweep` (or the
/// reverse).
#[derive(Debug, Default)]
struct Shares {
    sweep: u64,
    checksum: u64,
    misplaced: u64,
    total: u64,
}

fn shares(db: &Database) -> Shares {
    let cpu = db
        .info
        .metrics
        .iter()
        .position(|m| m.name == "cpu_samples")
        .expect("a cpu_samples column");
    let mut s = Shares::default();
    for (i, node) in db.code.nodes.iter().enumerate() {
        let samples = node.exclusive.get(cpu).copied().unwrap_or(0);
        if samples == 0 {
            continue;
        }
        s.total += samples;
        let p = path(db, &db.code, i as u32);
        let has = |f: &str| p.iter().any(|n| n == f);
        if has("sweep") {
            s.sweep += samples;
        }
        if has("checksum") {
            s.checksum += samples;
        }
        let outlined_of = |f: &str| p.iter().any(|n| n.starts_with(&format!("{f}._omp_fn")));
        if (has("sweep") && outlined_of("checksum")) || (has("checksum") && outlined_of("sweep")) {
            s.misplaced += samples;
        }
    }
    s
}

fn database(db: &Path) -> Database {
    let bytes = std::fs::read(db.join("profile.db")).expect("read the database");
    Database::from_bytes(&bytes).expect("decode the database")
}

/// Each function's share of the two together is between 30% and 70%
/// (about 50% each), and nothing of one region sits under the other.
fn assert_balanced(s: &Shares, what: &str) {
    let both = s.sweep + s.checksum;
    assert!(both >= 40, "{what}: too few samples: {s:?}");
    let share = s.sweep as f64 / both as f64;
    assert!(
        (0.3..=0.7).contains(&share),
        "{what}: sweep's share {share:.2} of sweep + checksum: {s:?}"
    );
    assert_eq!(
        s.misplaced, 0,
        "{what}: one region's code under the other: {s:?}"
    );
}

#[test]
fn openmp_workers_hang_below_the_region_that_runs_them() {
    let dir = scratch("openmp-regions");
    let exe = compile_test_program("omp_regions.c", &dir, &["-fopenmp"]);
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .env("OMP_NUM_THREADS", "2")
        .env("OMP_WAIT_POLICY", "passive")
        .args(["-e", "mem:soft@1000000", "-o"])
        .arg(&measurements)
        .arg(&exe)
        .arg("40"));
    let stdout = ok_stdout(&out, "hpcrun-rs omp_regions");
    assert!(stdout.starts_with("checksum "), "{stdout}");
    let (_, db) = merge(&dir, &measurements);
    let db = database(&db);
    assert_eq!(db.info.threads, 2, "the master and one worker");
    let all = shares(&db);
    eprintln!("both threads: {all:?}");
    assert_balanced(&all, "both threads");

    // Every outlined function's samples hang below the function that
    // outlined it, called from main.
    for (i, node) in db.code.nodes.iter().enumerate() {
        if node.exclusive.iter().all(|&v| v == 0) {
            continue;
        }
        let p = path(&db, &db.code, i as u32);
        for f in ["sweep", "checksum"] {
            if p.iter().any(|n| n.starts_with(&format!("{f}._omp_fn"))) {
                let mut it = p.iter();
                assert!(
                    it.any(|n| n == "main") && it.any(|n| n == f),
                    "{f}'s outlined code not below main -> {f}: {p:?}"
                );
            }
        }
    }

    // Each thread alone: the master's own profile, then the worker's.
    let mut files: Vec<_> = std::fs::read_dir(&measurements)
        .expect("list the measurements")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "hpcrun"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    for file in &files {
        let profile =
            formats::measurement::ThreadProfile::from_bytes(&std::fs::read(file).unwrap())
                .expect("decode a thread profile");
        let what = if profile.thread.index == 0 {
            "the master thread"
        } else {
            "the worker thread"
        };
        let sub = dir.join(format!("thread-{}", profile.thread.index));
        let alone = sub.join("measurements");
        std::fs::create_dir_all(&alone).unwrap();
        std::fs::copy(file, alone.join(file.file_name().unwrap())).unwrap();
        let (_, db) = merge(&sub, &alone);
        let s = shares(&database(&db));
        eprintln!("{what}: {s:?}");
        assert_balanced(&s, what);
    }
}

/// Every entry point of a parallel region: each outlined function's
/// samples, on every thread, hang below `main -> F` for the function `F`
/// that entered its region (a nested region below the enclosing one's).
#[test]
fn every_kind_of_region_hangs_below_its_function() {
    let dir = scratch("openmp-kinds");
    let exe = compile_test_program(
        "omp_kinds.c",
        &dir,
        &["-fopenmp", "-fno-optimize-sibling-calls"],
    );
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .env("OMP_NUM_THREADS", "2")
        .env("OMP_WAIT_POLICY", "passive")
        .args(["-e", "mem:soft@1000000", "-o"])
        .arg(&measurements)
        .arg(&exe)
        .arg("60"));
    let stdout = ok_stdout(&out, "hpcrun-rs omp_kinds");
    assert!(stdout.starts_with("sum "), "{stdout}");
    let (_, db) = merge(&dir, &measurements);
    let db = database(&db);
    let want: [(&str, &[&str]); 5] = [
        ("dynamic_loop", &["main", "dynamic_loop"]),
        ("runtime_loop", &["main", "runtime_loop"]),
        ("two_sections", &["main", "two_sections"]),
        ("plain", &["main", "plain"]),
        ("inner", &["main", "outer", "outer._omp_fn.0", "inner"]),
    ];
    let mut seen = [0u64; 5];
    for (i, node) in db.code.nodes.iter().enumerate() {
        let samples: u64 = node.exclusive.iter().take(1).sum();
        if samples == 0 {
            continue;
        }
        let p = path(&db, &db.code, i as u32);
        let Some(leaf_fn) = p.iter().rev().find(|n| n.contains("._omp_fn.")) else {
            continue;
        };
        let owner = leaf_fn.split("._omp_fn.").next().unwrap();
        let Some(k) = want.iter().position(|(f, _)| *f == owner) else {
            continue;
        };
        let mut it = p.iter();
        assert!(
            want[k].1.iter().all(|w| it.any(|n| n == w)),
            "{owner}'s region not below {:?}: {p:?}",
            want[k].1
        );
        seen[k] += samples;
    }
    for (k, (f, _)) in want.iter().enumerate() {
        assert!(seen[k] > 0, "no samples in {f}'s region: {seen:?}");
    }
}
