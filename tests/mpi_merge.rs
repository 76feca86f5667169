//! `mpirun -np P hpcprof-rs --mpi`: the merge distributed over
//! MPI ranks writes a database byte-identical to the serial merge's for
//! P = 1..4 and any -j, on real measurements of examples/mpi_stencil and
//! on synthetic ones; a damaged file is named once; a rank that cannot
//! read its share stops every rank with a clear error.
//!
//! The MPI build (`--features mpi`) is made here, into `target/mpi`, the
//! first time (it needs an MPI library and libclang; CI installs them).
//! Skipped, with a message, where no MPI is installed or (outside CI) the
//! feature cannot be built: the default `cargo test --workspace` needs
//! no MPI.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use pipeline_tests::*;

const MPIRUN_FLAGS: [&str; 2] = ["--allow-run-as-root", "--oversubscribe"];

/// hpcprof-rs built with the `mpi` feature, or `None` (skipped) without
/// MPI.
fn mpi_hpcprof() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !have_tool("mpicc", "openmpi-bin and libopenmpi-dev") {
                return None;
            }
            let target = root().join("target/mpi");
            let out = Command::new(env!("CARGO"))
                .current_dir(root())
                .args(["build", "-q", "-p", "hpcprof-rs", "--features", "mpi"])
                .arg("--target-dir")
                .arg(&target)
                .output()
                .expect("run cargo build");
            if !out.status.success() {
                let why = format!(
                    "building hpcprof-rs --features mpi failed (needs libclang-dev and an MPI library's headers):\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(std::env::var_os("CI").is_none(), "{why}");
                eprintln!("SKIPPED: {why}");
                return None;
            }
            Some(target.join("debug/hpcprof-rs"))
        })
        .as_deref()
}

fn serial(measurements: &Path, db: &Path, jobs: &str) -> Output {
    run(Command::new(tool("hpcprof-rs"))
        .args(["-j", jobs, "-o"])
        .arg(db)
        .arg(measurements))
}

fn on_mpi(exe: &Path, ranks: u32, measurements: &Path, db: &Path, jobs: &str) -> Output {
    run(Command::new("mpirun")
        .args(MPIRUN_FLAGS)
        .args(["-np", &ranks.to_string()])
        .arg(exe)
        .args(["--mpi", "-j", jobs, "-o"])
        .arg(db)
        .arg(measurements))
}

/// Builds the benches' synthetic-profile generator (`gen-profiles`).
fn build_gen_profiles() {
    let status = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["build", "-q", "-p", "benches", "--bin", "gen-profiles"])
        .status()
        .expect("run cargo build");
    assert!(status.success());
}

fn db_bytes(db: &Path) -> Vec<u8> {
    std::fs::read(db.join("profile.db")).unwrap_or_else(|e| panic!("{}: {e}", db.display()))
}

/// Serial and P = 1..4 merges of `measurements` give the same bytes.
fn assert_identical(dir: &Path, exe: &Path, measurements: &Path) {
    let reference = dir.join("db-serial");
    ok_stdout(&serial(measurements, &reference, "2"), "hpcprof-rs");
    let want = db_bytes(&reference);
    for (ranks, jobs) in [(1, "2"), (2, "1"), (3, "2"), (4, "1")] {
        let db = dir.join(format!("db-mpi-{ranks}"));
        let out = on_mpi(exe, ranks, measurements, &db, jobs);
        ok_stdout(&out, &format!("mpirun -np {ranks} hpcprof-rs --mpi"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        // One summary, from rank 0.
        assert_eq!(stderr.matches("hpcprof-rs: merged ").count(), 1, "{stderr}");
        assert!(
            db_bytes(&db) == want,
            "P={ranks} -j {jobs}: the database differs from the serial merge's"
        );
    }
}

#[test]
fn mpi_merge_of_real_mpi_measurements_is_byte_identical() {
    let Some(exe) = mpi_hpcprof() else { return };
    let dir = scratch("mpi-merge-real");
    let app = compile_mpi(
        "mpicc",
        "examples/mpi_stencil/mpi_stencil.c",
        &dir,
        &["-fopenmp"],
    );
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", "mem:soft@200000", "-o"])
        .arg(&measurements)
        .arg("mpirun")
        .args(MPIRUN_FLAGS)
        .args(["-np", "4"])
        .arg(&app)
        .env("OMP_NUM_THREADS", "2"));
    ok_stdout(&out, "hpcrun-rs mpirun mpi_stencil");
    assert!(read_profiles(&measurements).len() >= 8);
    assert_identical(&dir, exe, &measurements);
}

/// Synthetic profiles (benches' gen-profiles): 24 ranks of 2 threads, so
/// that every MPI rank merges several processes.
#[test]
fn mpi_merge_of_synthetic_measurements_is_byte_identical_and_names_a_damaged_file_once() {
    let Some(exe) = mpi_hpcprof() else { return };
    let dir = scratch("mpi-merge-synthetic");
    build_gen_profiles();
    let measurements = dir.join("measurements");
    let out = run(Command::new(bin_dir().join("gen-profiles"))
        .arg("-o")
        .arg(&measurements)
        .args(["--threads", "48", "--ranks", "24", "--paths", "60"]));
    ok_stdout(&out, "gen-profiles");
    assert_identical(&dir, exe, &measurements);

    // A damaged file: skipped by the rank that read it, named once in the
    // summary; the database still identical to the serial one's.
    let damaged = measurements.join("zz.vm.r99.1.1.hpcrun");
    std::fs::write(&damaged, b"HPCRUN\0\0 not a profile").unwrap();
    let reference = dir.join("db-serial-damaged");
    let s = serial(&measurements, &reference, "2");
    ok_stdout(&s, "hpcprof-rs");
    for ranks in [2, 3] {
        let db = dir.join(format!("db-mpi-damaged-{ranks}"));
        let out = on_mpi(exe, ranks, &measurements, &db, "1");
        ok_stdout(&out, "mpirun hpcprof-rs --mpi (damaged file)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.matches("zz.vm.r99.1.1.hpcrun").count(),
            1,
            "{stderr}"
        );
        assert!(stderr.contains("1 files skipped"), "{stderr}");
        assert!(db_bytes(&db) == db_bytes(&reference));
    }
}

/// Rank 0 chooses the files as the serial merge does: a
/// directory mixing two runs is refused on every rank, `--run ID` merges
/// one (byte-identical to the serial merge of that run's own directory),
/// and a copied profile is merged once.
#[test]
fn mpi_merge_refuses_mixed_runs_and_merges_duplicates_once() {
    let Some(exe) = mpi_hpcprof() else { return };
    let dir = scratch("mpi-merge-runs");
    build_gen_profiles();
    // Two runs (run ids bench-42 and bench-7) of 8 ranks each.
    for (name, seed) in [("m", "42"), ("other", "7")] {
        let out = run(Command::new(bin_dir().join("gen-profiles"))
            .arg("-o")
            .arg(dir.join(name))
            .args([
                "--threads",
                "8",
                "--ranks",
                "8",
                "--paths",
                "20",
                "--seed",
                seed,
            ]));
        ok_stdout(&out, "gen-profiles");
    }
    let alone = dir.join("db-alone");
    ok_stdout(&serial(&dir.join("m"), &alone, "2"), "hpcprof-rs");
    let m = dir.join("m");
    let mut first = None;
    for entry in std::fs::read_dir(dir.join("other")).unwrap() {
        let f = entry.unwrap().path();
        let name = f
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replacen("app.", "other.", 1);
        std::fs::copy(&f, m.join(name)).unwrap();
        first.get_or_insert(f);
    }
    let out = on_mpi(exe, 2, &m, &dir.join("db-mixed"), "1");
    assert_ne!(out.status.code(), Some(0), "the merge must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("holds the profiles of 2 different runs")
            && stderr.contains("run bench-42: app")
            && stderr.contains("run bench-7: app")
            && stderr.contains("--run ID"),
        "{stderr}"
    );
    assert!(!dir.join("db-mixed").exists(), "a database was written");
    // A copy of one of run bench-42's profiles.
    let copied = std::fs::read_dir(&m)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("app."))
        .unwrap();
    let copy_name = format!(
        "{}.copy.hpcrun",
        copied.file_stem().unwrap().to_string_lossy()
    );
    std::fs::copy(&copied, m.join(&copy_name)).unwrap();
    for ranks in [1, 3] {
        let db = dir.join(format!("db-run-{ranks}"));
        let out = run(Command::new("mpirun")
            .args(MPIRUN_FLAGS)
            .args(["-np", &ranks.to_string()])
            .arg(exe)
            .args(["--mpi", "--run", "bench-42", "-o"])
            .arg(&db)
            .arg(&m));
        ok_stdout(&out, "mpirun hpcprof-rs --mpi --run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("note: --run bench-42: left out the profiles of 1 other run(s)")
                && stderr.contains("note: left out 1 duplicate profile(s)")
                && stderr.contains(&format!("{copy_name} (a copy of ")),
            "{stderr}"
        );
        assert!(
            db_bytes(&db) == db_bytes(&alone),
            "P={ranks}: the database differs from the serial merge of the run alone"
        );
    }
}

/// A rank whose view of the measurement directory lacks its files (here:
/// a relative path resolved in another working directory, as a node-local
/// directory would be) stops every rank with an error; no database.
#[test]
fn a_rank_that_cannot_read_its_share_stops_every_rank() {
    let Some(exe) = mpi_hpcprof() else { return };
    let dir = scratch("mpi-merge-fail");
    let (here, elsewhere) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&elsewhere).unwrap();
    build_gen_profiles();
    let out = run(Command::new(bin_dir().join("gen-profiles"))
        .arg("-o")
        .arg(here.join("m"))
        .args(["--threads", "8", "--ranks", "8", "--paths", "20"]));
    ok_stdout(&out, "gen-profiles");
    // MPMD: rank 0 runs in a/ (where m/ is), rank 1 in b/ (where it is not).
    let out = run(Command::new("mpirun")
        .args(MPIRUN_FLAGS)
        .args(["-np", "1", "-wdir"])
        .arg(&here)
        .arg(exe)
        .args(["--mpi", "-o", "db", "m", ":", "-np", "1", "-wdir"])
        .arg(&elsewhere)
        .arg(exe)
        .args(["--mpi", "-o", "db", "m"]));
    assert_ne!(out.status.code(), Some(0), "the merge must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rank 1 of 2")
            && stderr.contains("cannot read")
            && stderr.contains("every rank sees"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rank 0 of 2") && stderr.contains("rank 1 could not read its share"),
        "{stderr}"
    );
    assert!(!here.join("db").exists(), "a database was written");
}

/// Without the feature, `--mpi` is refused with the way to get it.
#[test]
fn mpi_without_the_feature_says_how_to_build_it() {
    let dir = scratch("mpi-merge-nofeature");
    let out = run(Command::new(tool("hpcprof-rs"))
        .args(["--mpi", "-o"])
        .arg(dir.join("db"))
        .arg(&dir));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--features mpi"), "{stderr}");
}
