//! Runtimes as runtimes: memory that the OpenMP runtime or the MPI
//! library allocated is named and grouped as the runtime's
//! (`OpenMP runtime: ...`, `Open MPI: shared-memory transport ...`), gets
//! no finding and can be hidden (`--hide-runtime`); the CPU time spent
//! inside the runtimes is a "Waiting in MPI/OpenMP" line of the report.
//! The MPI test needs Open MPI (`mpicc`); without it it says so and
//! passes, except in CI.

use std::path::Path;
use std::process::Command;

use pipeline_tests::*;

fn report(db: &Path, extra: &[&str]) -> String {
    let out = run(Command::new(tool("hpcview-tui"))
        .arg(db)
        .args(["--report", "--view", "both", "--top", "40"])
        .args(extra));
    ok_stdout(&out, "hpcview-tui --report")
}

/// The share (0..1) of the "Waiting in MPI/OpenMP: X% of ..." line.
fn waiting_share(report: &str) -> f64 {
    let line = report
        .lines()
        .find(|l| l.starts_with("Waiting in MPI/OpenMP: "))
        .unwrap_or_else(|| panic!("no waiting line:\n{report}"));
    let pct = line["Waiting in MPI/OpenMP: ".len()..]
        .split('%')
        .next()
        .unwrap();
    pct.parse::<f64>().unwrap() / 100.0
}

/// The data table's rows (between its header and the next blank line).
fn data_rows(report: &str) -> Vec<&str> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("Data-centric view"))
        .skip(2)
        .take_while(|l| !l.is_empty() && !l.starts_with("Runtime memory"))
        .collect()
}

/// `hpcprof-rs export DB --hide-runtime --view VIEW` as JSON.
fn export_hidden(db: &Path, view: &str) -> serde_json::Value {
    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("export")
        .arg(db)
        .args(["--hide-runtime", "--view", view]));
    serde_json::from_str(&ok_stdout(&out, "hpcprof-rs export --hide-runtime")).unwrap()
}

fn findings(report: &str) -> Vec<&str> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("Findings"))
        .collect()
}

#[test]
fn openmp_runtime_memory_and_waiting_are_the_runtimes() {
    let dir = scratch("runtimes-openmp");
    let exe = compile_test_program("omp_waiting.c", &dir, &["-fopenmp"]);
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .env("OMP_NUM_THREADS", "2")
        .env("OMP_WAIT_POLICY", "active")
        .args(["-e", "mem:soft@500000", "-o"])
        .arg(&measurements)
        .arg(&exe)
        .arg("60"));
    let stdout = ok_stdout(&out, "hpcrun-rs omp_waiting");
    assert!(stdout.starts_with("total "), "{stdout}");
    let data = merge_and_export(&dir, &measurements);
    let db = dir.join("db");
    let objects = data["objects"].as_array().unwrap();

    // The program's array is the program's.
    let line = {
        let text = std::fs::read_to_string(root().join("tests/programs/omp_waiting.c")).unwrap();
        text.lines()
            .position(|l| l.contains("double *work = malloc"))
            .unwrap() as u64
            + 1
    };
    let work = heap_object_at(objects, "omp_waiting.c", line)
        .unwrap_or_else(|| panic!("no object at omp_waiting.c:{line}: {objects:#?}"));
    assert_eq!(work["name"], "work", "{work:#}");
    assert!(work["runtime"].is_null(), "{work:#}");
    assert!(samples(work) > 0, "{work:#}");
    // Every object libgomp allocated is the OpenMP runtime's, by name too.
    for o in objects {
        let in_gomp = o["alloc_path"].as_array().is_some_and(|p| {
            p.last()
                .and_then(|f| f["module"].as_str())
                .is_some_and(|m| m.contains("libgomp"))
        });
        if in_gomp {
            assert_eq!(o["runtime"], "OpenMP runtime", "{o:#}");
            assert!(
                o["name"].as_str().unwrap().starts_with("OpenMP runtime: "),
                "{o:#}"
            );
        }
    }

    // The report: the waiting thread spins in libgomp (OMP_WAIT_POLICY
    // active) for as long as thread 0 sums, so a good share of the CPU
    // samples is the runtime's; no finding names runtime memory.
    let text = report(&db, &[]);
    assert!(waiting_share(&text) >= 0.10, "{text}");
    assert!(
        findings(&text)
            .iter()
            .all(|l| !l.contains("OpenMP runtime:")),
        "{text}"
    );
    // Hidden on request, summarised either way.
    let hidden = report(&db, &["--hide-runtime"]);
    let rows = data_rows(&hidden);
    assert!(rows.iter().any(|r| r.contains(" work ")), "{hidden}");
    assert!(
        rows.iter().all(|r| !r.contains("OpenMP runtime:")),
        "{hidden}"
    );
    // The export leaves the runtime's objects and functions out too.
    let data = export_hidden(&db, "data");
    let kept = data["objects"].as_array().unwrap();
    assert!(kept.iter().any(|o| o["name"] == "work"), "{data:#}");
    assert!(kept.iter().all(|o| o["runtime"].is_null()), "{data:#}");
    let code = export_hidden(&db, "code");
    let functions = code["functions"].as_array().unwrap();
    assert!(
        functions
            .iter()
            .all(|f| !f["module"].as_str().unwrap_or("").contains("libgomp")),
        "{code:#}"
    );
    assert!(
        functions
            .iter()
            .any(|f| f["function"].as_str().unwrap_or("") == "sum"),
        "{code:#}"
    );
    // advise says how much time went to waiting, and places no runtime
    // memory in fast memory.
    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("advise")
        .arg(&db)
        .args(["--fast-mem", "1GiB"]));
    let advice = ok_stdout(&out, "hpcprof-rs advise");
    assert!(waiting_share(&advice) >= 0.10, "{advice}");
    assert!(!advice.contains("OpenMP runtime:"), "{advice}");
    assert!(advice.contains("  work ("), "{advice}");
    if objects.iter().any(|o| o["runtime"] == "OpenMP runtime") {
        for t in [&text, &hidden] {
            assert!(
                t.lines()
                    .any(|l| l.starts_with("Runtime memory") && l.contains("OpenMP runtime")),
                "{t}"
            );
        }
    }
}

#[test]
fn open_mpi_shared_memory_is_a_named_runtime_object() {
    if !have_tool("mpicc", "openmpi-bin and libopenmpi-dev") {
        return;
    }
    let dir = scratch("runtimes-mpi");
    let exe = compile_mpi("mpicc", "tests/programs/mpi_shm.c", &dir, &[]);
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", "mem:soft@500000", "-o"])
        .arg(&measurements)
        .args([
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "2",
        ])
        .arg(&exe)
        .arg("150"));
    let stdout = ok_stdout(&out, "hpcrun-rs mpirun mpi_shm");
    assert!(stdout.contains("rank 1 received 150"), "{stdout}");
    let data = merge_and_export(&dir, &measurements);
    let db = dir.join("db");
    let objects = data["objects"].as_array().unwrap();

    // Rank 1 waits for rank 0's messages polling its receive queue in its
    // shared-memory segment: that mapping is an object named by its file,
    // as Open MPI's shared-memory transport, with samples.
    let segments: Vec<&serde_json::Value> = objects
        .iter()
        .filter(|o| {
            o["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("Open MPI: shared-memory transport /dev/shm/"))
        })
        .collect();
    assert!(!segments.is_empty(), "{objects:#?}");
    assert!(
        segments.iter().all(|o| o["runtime"] == "Open MPI"),
        "{segments:#?}"
    );
    assert!(
        segments.iter().map(|o| samples(o)).sum::<u64>() > 0,
        "{segments:#?}"
    );
    // The program's array stays the program's.
    let field = objects
        .iter()
        .find(|o| o["name"] == "field")
        .unwrap_or_else(|| panic!("no field: {objects:#?}"));
    assert!(
        field["runtime"].is_null() && samples(field) > 0,
        "{field:#}"
    );
    // Each poll also reads Open MPI's small blocks (`opal_progress`'s
    // array of callbacks, the transport's endpoints): under `--min-bytes`,
    // but allocated by the runtime, so they are its rows by site, not
    // `<small heap objects>` (which had more samples than all of them
    // before; only a few of the C library's blocks are left there).
    let runtime_small: u64 = objects
        .iter()
        .filter(|o| {
            o["runtime"] == "Open MPI"
                && o["kind"] == "heap"
                && o["bytes"].as_u64().is_some_and(|b| b > 0 && b < 1024)
        })
        .map(samples)
        .sum();
    let small_heap: u64 = objects
        .iter()
        .filter(|o| o["name"] == "<small heap objects>")
        .map(samples)
        .sum();
    assert!(
        runtime_small > 0 && small_heap < runtime_small,
        "runtime small blocks {runtime_small}, <small heap objects> {small_heap}: {objects:#?}"
    );

    // Rank 1 spends its time in the MPI library.
    let text = report(&db, &[]);
    assert!(waiting_share(&text) >= 0.10, "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("Runtime memory") && l.contains("Open MPI")),
        "{text}"
    );
    assert!(
        findings(&text).iter().all(|l| !l.contains("Open MPI:")),
        "{text}"
    );
    let hidden = report(&db, &["--hide-runtime"]);
    assert!(
        data_rows(&hidden).iter().all(|r| !r.contains("Open MPI:")),
        "{hidden}"
    );
    let data = export_hidden(&db, "data");
    let kept = data["objects"].as_array().unwrap();
    assert!(kept.iter().any(|o| o["name"] == "field"), "{data:#}");
    assert!(kept.iter().all(|o| o["runtime"].is_null()), "{data:#}");
}

#[test]
fn mpich_runtime_memory_and_waiting_are_the_runtimes() {
    if !have_tool("mpicc.mpich", "mpich and libmpich-dev") {
        return;
    }
    let dir = scratch("runtimes-mpich");
    let exe = compile_mpi("mpicc.mpich", "tests/programs/mpi_shm.c", &dir, &[]);
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", "mem:soft@500000", "-o"])
        .arg(&measurements)
        .args(["mpiexec.mpich", "-n", "2"])
        .arg(&exe)
        .arg("150"));
    let stdout = ok_stdout(&out, "hpcrun-rs mpiexec.mpich mpi_shm");
    assert!(stdout.contains("rank 1 received 150"), "{stdout}");
    let data = merge_and_export(&dir, &measurements);
    let objects = data["objects"].as_array().unwrap();
    // MPICH (over UCX on Debian) allocates its own state: runtime
    // objects, named after their runtime; the program's array is not.
    let runtime: Vec<&serde_json::Value> =
        objects.iter().filter(|o| !o["runtime"].is_null()).collect();
    assert!(!runtime.is_empty(), "{objects:#?}");
    for o in &runtime {
        let r = o["runtime"].as_str().unwrap();
        assert!(
            o["name"].as_str().unwrap().starts_with(&format!("{r}: ")),
            "{o:#}"
        );
    }
    let field = objects
        .iter()
        .find(|o| o["name"] == "field")
        .unwrap_or_else(|| panic!("no field: {objects:#?}"));
    assert!(
        field["runtime"].is_null() && samples(field) > 0,
        "{field:#}"
    );
    let text = report(&dir.join("db"), &[]);
    assert!(waiting_share(&text) >= 0.10, "{text}");
}
