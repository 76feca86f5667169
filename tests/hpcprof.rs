//! hpcprof-rs end to end: heap-object naming, inlined and template frames,
//! damaged input, the bottleneck/threads exports, split debug info
//! (found by build-id and `.gnu_debuglink`) and split DWARF (`.dwo` files
//! and `.dwp` packages), on real programs
//! compiled with gcc/g++ and measured with `hpcrun-rs -e mem:soft`.

use std::path::{Path, PathBuf};
use std::process::Command;

use formats::database::{Database, NodeKind, FILE_NAME};
use pipeline_tests::*;

const EVENT: &str = "mem:soft@100000";

fn compile_cxx(rel: &str, dir: &Path) -> PathBuf {
    let src = root().join("examples").join(rel);
    let out = dir.join(src.file_stem().expect("source name"));
    let status = Command::new("g++")
        .args(["-O2", "-g", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run g++");
    assert!(status.success(), "g++ failed on {}", src.display());
    out
}

/// The entry of a code export's `functions` whose name satisfies `pred`;
/// panics with the names there if there is none.
fn function<'a>(
    code: &'a serde_json::Value,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> &'a serde_json::Value {
    let functions = code["functions"].as_array().expect("functions");
    functions
        .iter()
        .find(|f| f["function"].as_str().is_some_and(&pred))
        .unwrap_or_else(|| {
            let names: Vec<&str> = functions
                .iter()
                .filter_map(|f| f["function"].as_str())
                .collect();
            panic!("no {what} in {names:?}")
        })
}

fn load_db(db: &Path) -> Database {
    Database::from_bytes(&std::fs::read(db.join(FILE_NAME)).expect("read profile.db"))
        .expect("decode profile.db")
}

fn hpcprof(args: &[&std::ffi::OsStr]) -> std::process::Output {
    run(Command::new(tool("hpcprof-rs")).args(args))
}

#[test]
fn heap_objects_are_named_after_their_variables() {
    let dir = scratch("naming");
    let exe = compile_c("naming/naming.c", &dir, &[]);
    let p = profile(&dir, EVENT, &exe, &["6"]);
    let export = export_json(&p.db, "data");
    let objects = export["objects"].as_array().expect("objects");
    let heap: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "heap")
        .filter_map(|o| o["name"].as_str())
        .collect();
    // Case 1: `double *grid_w = make_grid(n);` (make_grid returns its local).
    // Case 2: `SD.nuclide_grid = malloc(...);`.
    // Case 3: `double *energy = alloc_buf(n);` (alloc_buf, not inlined,
    // returns its local).
    for name in ["grid_w", "SD.nuclide_grid", "energy"] {
        assert!(heap.contains(&name), "no heap object {name} in {heap:?}");
    }
    assert!(
        !heap.iter().any(|n| *n == "g" || *n == "buf"),
        "a wrapper's local named an object: {heap:?}"
    );
    let grid_w = objects.iter().find(|o| o["name"] == "grid_w").unwrap();
    // The full allocation path is kept: main's line is the assignment.
    let path = grid_w["alloc_path"].as_array().unwrap();
    let line = line_of("naming/naming.c", "    double *grid_w = make_grid");
    assert!(
        path.iter()
            .any(|f| f["function"] == "main" && f["line"].as_u64() == Some(line)),
        "{path:#?}"
    );
    assert_eq!(grid_w["bytes"], 8u64 * (4 << 20));
    // The strided array holds the most samples of the three.
    let s = |n: &str| samples(objects.iter().find(|o| o["name"] == n).unwrap());
    assert!(
        s("grid_w") > s("SD.nuclide_grid") && s("grid_w") > s("energy"),
        "grid_w {}, SD.nuclide_grid {}, energy {}",
        s("grid_w"),
        s("SD.nuclide_grid"),
        s("energy")
    );
}

#[test]
fn inlined_functions_and_templates_are_symbolised() {
    let dir = scratch("inline");
    let exe = compile_cxx("inline/inline.cpp", &dir);
    let p = profile(&dir, EVENT, &exe, &["4"]);
    let code = export_json(&p.db, "code");
    let template = function(&code, "demangled template instance", |n| {
        n.contains("sum_strided<double>")
    });
    assert!(samples(template) > 0);
    let inlined = function(&code, "inlined gather_loop", |n| {
        n.starts_with("gather_loop")
    });
    let first = line_of("inline/inline.cpp", "static inline double gather_loop");
    let last = line_of("inline/inline.cpp", "} // end of gather_loop");
    assert!(inlined["file"].as_str().unwrap().ends_with("inline.cpp"));
    let line = inlined["line"].as_u64().unwrap();
    assert!(
        (first..=last).contains(&line),
        "line {line} not in {first}..={last}"
    );
    assert!(samples(inlined) > 0);
    // In the tree, gather_loop is an inlined node whose parent is gather.
    assert!(
        gather_loop_inlined_in_gather(&p.db),
        "gather_loop is not an inlined node below gather"
    );
}

/// True if the code tree of `db` has an inlined `gather_loop` node whose
/// parent is `gather` (examples/inline).
fn gather_loop_inlined_in_gather(db: &Path) -> bool {
    let db = load_db(db);
    db.code.nodes.iter().any(|n| {
        let (NodeKind::Frame(f), Some(parent)) = (&n.kind, db.code.nodes.get(n.parent as usize))
        else {
            return false;
        };
        let frame = &db.frames[*f as usize];
        let NodeKind::Frame(pf) = parent.kind else {
            return false;
        };
        frame.function.starts_with("gather_loop")
            && frame.inlined
            && db.frames[pf as usize].function.starts_with("gather")
    })
}

/// Builds examples/inline with `-gsplit-dwarf` plus `flags` in `dir/build/`
/// (the skeleton records `build/inline.dwo`), copies the binary to `dir/`
/// and measures the copy; returns the copy and its measurements.
fn split_dwarf_run(dir: &Path, flags: &[&str]) -> (PathBuf, PathBuf) {
    let build = dir.join("build");
    std::fs::create_dir_all(&build).unwrap();
    let built = build.join("inline");
    let status = Command::new("g++")
        .args(["-O2", "-g", "-gsplit-dwarf"])
        .args(flags)
        .arg("-o")
        .arg(&built)
        .arg(root().join("examples/inline/inline.cpp"))
        .status()
        .expect("run g++");
    assert!(status.success(), "g++ -gsplit-dwarf failed");
    assert!(build.join("inline.dwo").is_file(), "g++ wrote no .dwo");
    let exe = dir.join("inline");
    std::fs::copy(&built, &exe).unwrap();
    let (out, measurements) = hpcrun(dir, EVENT, &exe, &["4"]);
    ok_stdout(&out, "hpcrun-rs");
    (exe, measurements)
}

/// Merges `measurements` into `dir/name`.
fn merge_into(dir: &Path, name: &str, measurements: &Path) -> PathBuf {
    let db = dir.join(name);
    let out = hpcprof(&["-o".as_ref(), db.as_os_str(), measurements.as_os_str()]);
    ok_stdout(&out, "hpcprof-rs");
    db
}

#[test]
fn split_dwarf_is_read_from_dwo_files_and_dwp_packages() {
    // DWARF 5 (gcc's default): the inlined frames are only in the .dwo.
    let dir = scratch("split-dwarf");
    let (_, measurements) = split_dwarf_run(&dir, &[]);
    assert!(
        gather_loop_inlined_in_gather(&merge_into(&dir, "db-dwo", &measurements)),
        "the .dwo at its recorded path"
    );
    std::fs::rename(dir.join("build/inline.dwo"), dir.join("inline.dwo")).unwrap();
    assert!(
        gather_loop_inlined_in_gather(&merge_into(&dir, "db-moved", &measurements)),
        "the .dwo next to the binary"
    );
    // Without it: no inlined frames, but the functions from the symbol
    // table and the lines from the skeleton's line table.
    std::fs::remove_file(dir.join("inline.dwo")).unwrap();
    let db = merge_into(&dir, "db-none", &measurements);
    assert!(!gather_loop_inlined_in_gather(&db));
    let code = export_json(&db, "code");
    let gather = function(&code, "gather", |n| n.starts_with("gather"));
    assert!(gather["file"]
        .as_str()
        .is_some_and(|f| f.ends_with("inline.cpp")));

    // A DWARF package (binutils' dwp reads DWARF 4 split units).
    let dir = scratch("split-dwarf-dwp");
    let (exe, measurements) = split_dwarf_run(&dir, &["-gdwarf-4"]);
    binutils(
        "dwp",
        &[
            "-e".as_ref(),
            exe.as_os_str(),
            "-o".as_ref(),
            dir.join("inline.dwp").as_os_str(),
        ],
    );
    std::fs::remove_file(dir.join("build/inline.dwo")).unwrap();
    assert!(
        gather_loop_inlined_in_gather(&merge_into(&dir, "db-dwp", &measurements)),
        "the .dwp package"
    );
}

#[test]
fn damaged_files_are_skipped_and_totals_unchanged() {
    let dir = scratch("damaged");
    let exe = compile_c("abc/abc.c", &dir, &[]);
    let p = profile(&dir, EVENT, &exe, &["1"]);
    let good: Vec<PathBuf> = std::fs::read_dir(&p.measurements)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hpcrun"))
        .collect();
    assert_eq!(good.len(), 1, "{good:?}");
    let bytes = std::fs::read(&good[0]).unwrap();
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(&good[0], bad.join(good[0].file_name().unwrap())).unwrap();
    std::fs::write(bad.join("a.1.2.3.hpcrun"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(
        bad.join("b.1.2.3.hpcrun"),
        b"#!/bin/sh\necho not a profile\n",
    )
    .unwrap();
    let mut newer = bytes.clone();
    newer[8] = 7;
    std::fs::write(bad.join("c.1.2.3.hpcrun"), &newer).unwrap();
    std::fs::write(bad.join("d.1.2.3.hpcrun"), b"").unwrap();
    let mut corrupt = bytes.clone();
    for b in &mut corrupt[16..48] {
        *b = 0xc1; // never used in MessagePack
    }
    std::fs::write(bad.join("e.1.2.3.hpcrun"), &corrupt).unwrap();

    let db2 = dir.join("db2");
    // HPCPROF_RS_TIMINGS: the profiler's time even when it is a small share.
    let out = run(Command::new(tool("hpcprof-rs"))
        .env("HPCPROF_RS_TIMINGS", "1")
        .args(["-o".as_ref(), db2.as_os_str(), bad.as_os_str()]));
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    for (name, why) in [
        ("a.1.2.3.hpcrun", "damaged"),
        ("b.1.2.3.hpcrun", "not a measurement file"),
        ("c.1.2.3.hpcrun", "newer"),
        ("d.1.2.3.hpcrun", "truncated"),
        ("e.1.2.3.hpcrun", "damaged"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains("warning: skipping") && l.contains(name) && l.contains(why)),
            "no warning for {name} ({why}) in:\n{err}"
        );
    }
    let summary = err
        .lines()
        .find(|l| l.contains("merged"))
        .unwrap_or_else(|| panic!("no summary in:\n{err}"));
    assert!(
        summary.contains("merged 1 profiles (1 processes, 0 ranks, 1 threads)")
            && summary.contains("5 files skipped")
            && summary.contains("dropped:"),
        "{summary}"
    );
    // What the profiler's own code took: the handler and the hooks.
    assert!(
        err.lines().any(|l| l
            .starts_with("hpcprof-rs: profiler time in the program: sample handler ")
            && l.contains(" samples, mean ")
            && l.contains("allocation hooks ")
            && l.contains("of CPU time the threads were sampled for")),
        "no profiler time line in:\n{err}"
    );
    // Totals equal those of the run without the bad files.
    for view in ["data", "code", "threads"] {
        let (a, b) = (export_json(&p.db, view), export_json(&db2, view));
        assert_eq!(a["stats"], b["stats"], "{view}");
        let key = match view {
            "data" => "objects",
            "code" => "functions",
            _ => "distributions",
        };
        assert_eq!(a[key], b[key], "{view}");
    }
    let (a, b) = (load_db(&p.db), load_db(&db2));
    assert_eq!((a.code, a.data, a.objects), (b.code, b.data, b.objects));
    assert_eq!(b.info.skipped.len(), 5);

    // --strict: the same database, exit status 1.
    let db3 = dir.join("db3");
    let out = hpcprof(&[
        "--strict".as_ref(),
        "-o".as_ref(),
        db3.as_os_str(),
        bad.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(db3.join(FILE_NAME).is_file());
    // Missing and empty directories: exit 2 with a clear message.
    let out = hpcprof(&[
        "-o".as_ref(),
        dir.join("db4").as_os_str(),
        dir.join("nope").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = hpcprof(&[
        "-o".as_ref(),
        dir.join("db5").as_os_str(),
        empty.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no measurement files"));
    assert!(!dir.join("db5").exists());
}

#[test]
fn bottleneck_and_threads_exports() {
    let dir = scratch("bottleneck");
    let exe = compile_c("abc/abc.c", &dir, &[]);
    let p = profile(&dir, EVENT, &exe, &["2"]);
    let b = export_json(&p.db, "bottleneck");
    assert_eq!(b["version"], 1);
    assert_eq!(b["view"], "bottleneck");
    assert_eq!(b["thresholds"]["memory_boundness"], "mem_time_share");
    let rows = b["bottleneck"].as_array().expect("bottleneck rows");
    // First: C (strided), memory bound, large share, "optimise first".
    let first = &rows[0];
    assert_eq!(first["rank"], 1);
    assert_eq!(first["priority"], 1);
    assert_eq!(first["advice"], "optimise first");
    assert_eq!(first["memory_bound"], true);
    // C ranks before A and B. Its quadrant is not asserted: its proxy (its
    // samples over compute's sampled CPU time, about 0.6 on a quiet machine)
    // falls towards the 0.5 threshold when other processes compete for
    // memory bandwidth and A and B's accesses slow down too (then a tiny
    // object read by one sample, proxy 1, may rank "low priority" above
    // it). A and B, with smaller shares and proxies, always rank below C.
    let objects: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| {
            r["region"] == "object" && ["A", "B", "C"].contains(&r["name"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(objects.len(), 3, "{b:#}");
    let c = objects[0];
    assert_eq!(c["name"], "C", "{b:#}");
    let mts = c["mem_time_share"].as_f64().unwrap();
    assert!(mts > 0.3 && mts <= 1.0, "{c:#}");
    // A and B are read in the same loop as C: they share its memory time
    // (docs/GUIDE.md, "How mem:soft attributes a sample"), whatever their
    // own shares.
    for other in objects
        .iter()
        .filter(|r| r["name"] == "A" || r["name"] == "B")
    {
        let m = other["mem_time_share"].as_f64().unwrap();
        assert!(m > 0.0 && m <= 1.0, "{other:#}");
    }
    // mem_time_share = memory samples of the code it runs in (all the
    // objects that code read, C's own among them) / its cpu_samples.
    let cpu = c["code_cpu_samples"].as_u64().unwrap();
    assert!(mts + 1e-9 >= samples(c) as f64 / cpu as f64, "{c:#}");
    let compute = rows
        .iter()
        .find(|r| r["region"] == "function" && r["name"] == "compute")
        .unwrap();
    assert_eq!(compute["priority"], 1);
    // Sorted by priority.
    let prio: Vec<u64> = rows
        .iter()
        .map(|r| r["priority"].as_u64().unwrap())
        .collect();
    assert!(prio.windows(2).all(|w| w[0] <= w[1]), "{prio:?}");

    let t = export_json(&p.db, "threads");
    let rows = t["distributions"].as_array().expect("distribution rows");
    assert_eq!(rows[0]["scope"], "program");
    // One thread, no MPI: no distributions, but the rows are there.
    assert!(rows[0]["threads"].is_null() && rows[0]["ranks"].is_null());
    assert!(rows
        .iter()
        .any(|r| r["scope"] == "object" && r["name"] == "C"));

    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("export")
        .arg(&p.db)
        .args(["--view", "bottleneck", "--format", "csv", "--top", "2"]));
    let csv = ok_stdout(&out, "export csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with("rank,region,kind,name,module,file,line,samples"));
    assert!(lines[0].contains(
        ",share,mem_time_share,code_cpu_samples,memory_bound,high_share,priority,advice,alloc_path"
    ));
    assert!(lines[1].starts_with("1,"));
    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("export")
        .arg(&p.db)
        .args(["--view", "threads", "--format", "csv"]));
    let csv = ok_stdout(&out, "export csv");
    assert!(csv.starts_with("scope,kind,name,samples"));
    assert!(csv
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("program,,<program>,"));
}

/// Runs a binutils command; panics with its stderr if it fails.
fn binutils(program: &str, args: &[&std::ffi::OsStr]) {
    let out = run(Command::new(program).args(args));
    ok_stdout(&out, program);
}

#[test]
fn split_debug_info_is_found_by_build_id_and_debuglink() {
    let dir = scratch("debuglink");
    let exe = compile_c("abc/abc.c", &dir, &[]);
    // Split the DWARF into abc.debug the way distributions do.
    let split = dir.join("split.debug");
    binutils(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            exe.as_os_str(),
            split.as_os_str(),
        ],
    );
    binutils("strip", &["--strip-debug".as_ref(), exe.as_os_str()]);
    let link = dir.join("abc.debug");
    std::fs::copy(&split, &link).unwrap();
    let add_link = format!("--add-gnu-debuglink={}", link.display());
    binutils("objcopy", &[add_link.as_ref(), exe.as_os_str()]);
    std::fs::remove_file(&link).unwrap();

    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &["1"]);
    ok_stdout(&out, "hpcrun-rs");
    let exe_path = exe.to_str().unwrap();
    let build_id = read_profiles(&measurements)
        .iter()
        .flat_map(|p| p.modules.iter())
        .find(|m| m.path == exe_path)
        .and_then(|m| m.build_id.clone())
        .expect("gcc links with a build-id; the profile records it");

    let root = dir.join("debug-root");
    let by_build_id = root
        .join(".build-id")
        .join(&build_id[..2])
        .join(format!("{}.debug", &build_id[2..]));
    let under_root = root.join(dir.strip_prefix("/").unwrap()).join("abc.debug");
    let layouts: [(&str, Option<PathBuf>); 5] = [
        ("no debug file", None),
        ("build-id under the debug root", Some(by_build_id)),
        ("debuglink next to the binary", Some(link.clone())),
        ("debuglink in .debug/", Some(dir.join(".debug/abc.debug"))),
        ("debuglink under the debug root", Some(under_root)),
    ];
    let first = line_of("abc/abc.c", "static void compute(");
    let last = line_of("abc/abc.c", "int main(");
    for (i, (layout, place)) in layouts.iter().enumerate() {
        if let Some(place) = place {
            std::fs::create_dir_all(place.parent().unwrap()).unwrap();
            std::fs::copy(&split, place).unwrap();
        }
        let db = dir.join(format!("db{i}"));
        let out = run(Command::new(tool("hpcprof-rs"))
            .env("HPCPROF_RS_DEBUG_DIRS", &root)
            .arg("-o")
            .arg(&db)
            .arg(&measurements));
        ok_stdout(&out, "hpcprof-rs");
        let code = export_json(&db, "code");
        let compute = function(&code, &format!("compute ({layout})"), |n| n == "compute");
        assert!(samples(compute) > 0, "{layout}");
        if place.is_none() {
            // Only the symbol table is left in the stripped binary.
            assert!(compute["file"].is_null(), "{layout}: {compute:#}");
            continue;
        }
        assert!(
            compute["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("abc.c")),
            "{layout}: {compute:#}"
        );
        let lines: Vec<u64> = compute["lines"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["line"].as_u64())
            .collect();
        assert!(
            !lines.is_empty() && lines.iter().all(|l| (first..last).contains(l)),
            "{layout}: lines {lines:?} not in compute ({first}..{last})"
        );
        std::fs::remove_file(place.as_ref().unwrap()).unwrap();
    }
}

/// The `*.hpcrun` files of `dir`, sorted.
fn profile_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hpcrun"))
        .collect();
    files.sort();
    files
}

/// `hpcprof-rs ARGS... -o dir/DB MEASUREMENTS` in `dir`.
fn merge_in(dir: &Path, args: &[&str], db: &str, measurements: &str) -> std::process::Output {
    run(Command::new(tool("hpcprof-rs"))
        .current_dir(dir)
        .args(args)
        .args(["-o", db, measurements]))
}

/// Two runs of different programs whose files were copied into one
/// directory: hpcprof-rs refuses it, naming both runs, their programs
/// and files and what to do, and writes nothing; `--run ID` merges one of
/// them (the same database as its own directory's, with a note on the run
/// left out); `--allow-mixed` merges both on purpose.
#[test]
fn a_directory_mixing_runs_is_refused_or_merged_by_run() {
    let dir = scratch("mixed-runs");
    let exe = compile_c("abc/abc.c", &dir, &[]);
    let out = run(hpcrun_alone(&dir, "a")
        .args(["-e", EVENT])
        .arg(&exe)
        .arg("1"));
    ok_stdout(&out, "hpcrun-rs abc");
    let out = run(hpcrun_alone(&dir, "b").args(["sleep", "0.01"]));
    ok_stdout(&out, "hpcrun-rs sleep");
    let run_a = read_profiles(&dir.join("a"))[0].process.run_id.clone();
    let run_b = read_profiles(&dir.join("b"))[0].process.run_id.clone();
    assert_ne!(run_a, run_b);
    std::fs::create_dir_all(dir.join("mixed")).unwrap();
    let mut names = Vec::new();
    for f in profile_files(&dir.join("a"))
        .into_iter()
        .chain(profile_files(&dir.join("b")))
    {
        let name = f.file_name().unwrap().to_owned();
        std::fs::copy(&f, dir.join("mixed").join(&name)).unwrap();
        names.push(name.to_string_lossy().into_owned());
    }
    assert_eq!(names.len(), 2, "{names:?}");

    let out = merge_in(&dir, &[], "db", "mixed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!dir.join("db").exists(), "a database was written: {err}");
    assert!(
        err.contains(
            "mixed holds the profiles of 2 different runs of different programs (abc, sleep)"
        ),
        "{err}"
    );
    for needle in [
        format!("run {run_a}: abc (pid "),
        format!("run {run_b}: sleep (pid "),
        names[0].clone(),
        names[1].clone(),
        "--run ID".into(),
        "--allow-mixed".into(),
    ] {
        assert!(err.contains(&needle), "no {needle:?} in:\n{err}");
    }

    // --run: the one run, as merged from its own directory.
    let out = merge_in(&dir, &[], "db-a-alone", "a");
    ok_stdout(&out, "hpcprof-rs a");
    let out = merge_in(&dir, &["--run", &run_a], "db-a", "mixed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("merged 1 profiles"), "{err}");
    assert!(
        err.contains(&format!(
            "note: --run {run_a}: left out the profiles of 1 other run(s) in mixed: {run_b} (sleep, 1 file(s))"
        )),
        "{err}"
    );
    let (alone, chosen) = (load_db(&dir.join("db-a-alone")), load_db(&dir.join("db-a")));
    assert_eq!(
        (alone.code, alone.data, alone.objects, alone.info.stats),
        (chosen.code, chosen.data, chosen.objects, chosen.info.stats)
    );
    // An id that is in no profile: the runs there are listed.
    let out = merge_in(&dir, &["--run", "no-such-run"], "db-none", "mixed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--run no-such-run: mixed holds no profile of that run")
            && err.contains(&format!("run {run_b}: sleep")),
        "{err}"
    );
    // --allow-mixed: both, said.
    let out = merge_in(&dir, &["--allow-mixed"], "db-all", "mixed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("merged 2 profiles (2 processes"), "{err}");
    assert!(
        err.contains("note: --allow-mixed: merged the profiles of 2 runs into one database"),
        "{err}"
    );
}

/// Duplicates of a thread's profile: the checkpoints of a 9-thread run,
/// copied aside while it ran, and a copy of one final profile, all put
/// into its measurement directory beside the final profiles: hpcprof-rs
/// merges each thread once (not 19 profiles with samples counted twice),
/// with the same samples and database as without them, and says what it
/// left out and why.
#[test]
fn duplicate_profiles_of_a_thread_are_merged_once() {
    use std::io::BufRead;
    let dir = scratch("duplicates");
    let exe = compile_test_program("threads_killed.c", &dir, &["-pthread"]);
    let mut child = hpcrun_alone(&dir, "m")
        .args(["-e", EVENT])
        .arg(&exe)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start hpcrun-rs");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = line
        .trim()
        .strip_prefix("running ")
        .unwrap_or_else(|| panic!("program said {line:?}"))
        .to_string();
    // The first checkpoint (one second after start) of the main thread
    // and its 8 workers, copied aside while the program runs.
    let m = dir.join("m");
    let start = std::time::Instant::now();
    while profile_files(&m).len() < 9 && start.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::create_dir_all(dir.join("aside")).unwrap();
    for f in profile_files(&m) {
        std::fs::copy(&f, dir.join("aside").join(f.file_name().unwrap())).unwrap();
    }
    // SIGTERM: the profiler writes the final profiles, the program ends.
    run(Command::new("kill").args(["-TERM", &pid]));
    let _ = child.wait();
    let checkpoints = read_profiles(&dir.join("aside"));
    assert_eq!(checkpoints.len(), 9);
    assert!(checkpoints.iter().all(|p| p.stats.checkpoints == 1));
    let finals = read_profiles(&m);
    assert_eq!(finals.len(), 9);
    assert!(finals.iter().all(|p| p.stats.checkpoints == 0));

    let out = merge_in(&dir, &[], "db-once", "m");
    let once = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{once}");
    assert!(once.contains("merged 9 profiles"), "{once}");
    assert!(!once.contains("duplicate"), "{once}");
    // Put the copies beside the profiles.
    for f in profile_files(&dir.join("aside")) {
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        std::fs::copy(&f, m.join(format!("{stem}.ckpt.hpcrun"))).unwrap();
    }
    let last = profile_files(&m)
        .into_iter()
        .find(|f| !f.to_string_lossy().contains(".ckpt."))
        .unwrap();
    let copy = m.join(format!(
        "{}.copy.hpcrun",
        last.file_stem().unwrap().to_string_lossy()
    ));
    std::fs::copy(&last, &copy).unwrap();
    assert_eq!(profile_files(&m).len(), 19);

    let out = merge_in(&dir, &[], "db-dups", "m");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("merged 9 profiles"), "{err}");
    assert_eq!(
        number_after(&err, "samples:"),
        number_after(&once, "samples:"),
        "{err}"
    );
    let note = err
        .lines()
        .find(|l| l.contains("duplicate"))
        .unwrap_or_else(|| panic!("no note on the duplicates in:\n{err}"));
    assert!(
        note.starts_with("hpcprof-rs: note: left out 10 duplicate profile(s)")
            && note.contains("an earlier checkpoint of the profile in")
            && note.contains(&format!(
                "m/{} (a copy of m/{}: thread ",
                copy.file_name().unwrap().to_string_lossy(),
                last.file_name().unwrap().to_string_lossy()
            ))
            && note.contains("and 2 more"),
        "{note}"
    );
    let (a, b) = (load_db(&dir.join("db-once")), load_db(&dir.join("db-dups")));
    assert_eq!(
        (a.code, a.data, a.objects, a.info.stats, a.info.skipped),
        (b.code, b.data, b.objects, b.info.stats, b.info.skipped)
    );
}
