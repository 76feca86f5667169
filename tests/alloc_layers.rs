//! C++ arrays made through the program's own allocation layers
//! (tests/programs/alloc_layers.cpp: an `allocate<T>` helper, a storage
//! template used for four arrays of four element types, a vector class
//! whose constructor, copy constructor and `reserve` allocate, a
//! `std::vector` and a `std::unordered_map`), built at `-O0` and `-O2`
//! (inlined copies of the helpers), three runs each. Every array is its
//! own row, sited at the program's line that made it (marked `// makes
//! NAME`), never inside the layer, and named after the variable that holds
//! it with its element type; every object has the same name and site in
//! every run, and `diff` of two runs pairs every array.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use pipeline_tests::*;

const PROGRAM: &str = "alloc_layers.cpp";
const EVENT: &str = "mem:soft";

/// (the object's name, the marker on the line that makes it).
const ARRAYS: &[(&str, &str)] = &[
    ("domain->flux : double[262,144]", "// makes flux"),
    ("domain->cellIndex : int[262,144]", "// makes cellIndex"),
    ("domain->weights : float[262,144]", "// makes weights"),
    ("domain->facets : Facet[]", "// makes facets"),
    ("domain->pressure : double[262,144]", "// makes pressure"),
    ("domain->density : double[262,144]", "// makes density"),
    (
        "domain->temperature : double[262,144]",
        "// makes temperature",
    ),
    ("domain->lookup", "// makes lookup"),
    ("energy : double[262,144]", "// makes energy"),
    ("upwind : double[262,144]", "// makes upwind, downwind"),
    ("downwind : double[262,144]", "// makes upwind, downwind"),
];

/// Line (1-based) of the program's line that contains `marker`.
fn marked_line(marker: &str) -> u64 {
    let path = root().join("tests/programs").join(PROGRAM);
    let text = std::fs::read_to_string(&path).expect("read the test program");
    text.lines()
        .position(|l| l.contains(marker))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("{marker:?} not in {}", path.display()))
}

/// One heap object of an export: (name, site "function file:line",
/// samples), by its allocation path.
type Objects = BTreeMap<String, (String, String, u64)>;

fn heap_objects(export: &serde_json::Value) -> Objects {
    let frame_text = |f: &serde_json::Value| {
        format!(
            "{} {}:{}",
            f["function"].as_str().unwrap_or(""),
            f["file"].as_str().unwrap_or(""),
            f["line"].as_u64().unwrap_or(0)
        )
    };
    export["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter(|o| {
            o["kind"] == "heap" && o["alloc_path"].as_array().is_some_and(|p| !p.is_empty())
        })
        .map(|o| {
            let path: Vec<String> = o["alloc_path"]
                .as_array()
                .unwrap()
                .iter()
                .map(frame_text)
                .collect();
            // With the site's call offset: two calls on one line are two
            // objects.
            (
                format!("{} @{}", path.join(" > "), o["alloc_site"]["offset"]),
                (
                    o["name"].as_str().unwrap_or("").to_string(),
                    frame_text(&o["alloc_site"]),
                    samples(o),
                ),
            )
        })
        .collect()
}

/// Builds the program with `opt`, runs it natively once and profiled three
/// times: each run's heap objects and database.
fn three_runs(opt: &str, sweeps: &str) -> Vec<(Objects, PathBuf)> {
    let dir = scratch(&format!("alloc-layers{opt}"));
    let exe = compile_test_program(PROGRAM, &dir, &[opt]);
    let native = ok_stdout(&run(Command::new(&exe).arg(sweeps)), "native run");
    (0..3)
        .map(|k| {
            let sub = dir.join(format!("run{k}"));
            std::fs::create_dir_all(&sub).unwrap();
            let p = profile(&sub, EVENT, &exe, &[sweeps]);
            assert_eq!(
                p.program_stdout, native,
                "output changed under the profiler"
            );
            (heap_objects(&export_json(&p.db, "data")), p.db)
        })
        .collect()
}

fn check(opt: &str, sweeps: &str) {
    let runs = three_runs(opt, sweeps);
    for (k, (objects, _)) in runs.iter().enumerate() {
        let total: u64 = objects.values().map(|o| o.2).sum();
        for (name, marker) in ARRAYS {
            let line = marked_line(marker);
            // One row (objects of one name and site are one row: a hash
            // map's nodes and its bucket array), with samples (every array
            // is swept as often as the others: each holds several percent).
            let rows: Vec<_> = objects.values().filter(|o| o.0 == *name).collect();
            assert!(!rows.is_empty(), "{opt} run {k}: no {name}: {objects:#?}");
            for (_, site, _) in &rows {
                assert!(
                    site.ends_with(&format!("{PROGRAM}:{line}")),
                    "{opt} run {k}: {name} sited at {site}, not line {line}"
                );
            }
            let n: u64 = rows.iter().map(|o| o.2).sum();
            assert!(n > 0, "{opt} run {k}: {name} has no samples of {total}");
        }
        // No object is sited inside the layer.
        for (name, site, _) in objects.values() {
            for layer in ["Storage<", "Vec<", "allocate<"] {
                assert!(
                    !site.contains(layer),
                    "{opt} run {k}: {name} sited in the layer: {site}"
                );
            }
        }
    }
    // The same object has the same name and site in every run.
    let (first, _) = &runs[0];
    for (objects, _) in &runs[1..] {
        for (path, (name, site, _)) in objects {
            if let Some((name0, site0, _)) = first.get(path) {
                assert_eq!((name0, site0), (name, site), "{opt}: {path}");
            }
        }
    }
    // diff of two runs pairs every array.
    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("diff")
        .arg(&runs[0].1)
        .arg(&runs[1].1)
        .args(["--format", "json"]));
    let text = ok_stdout(&out, "hpcprof-rs diff");
    let diff: serde_json::Value = serde_json::from_str(&text).expect("diff JSON");
    for (name, _) in ARRAYS {
        let rows: Vec<_> = diff["objects"]
            .as_array()
            .expect("objects")
            .iter()
            .filter(|r| r["name"] == *name)
            .collect();
        assert_eq!(rows.len(), 1, "{opt}: {name} in diff: {diff:#}");
        assert_eq!(rows[0]["status"], "matched", "{opt}: {name}: {:#}", rows[0]);
    }
}

#[test]
fn arrays_made_through_the_programs_layers_are_named_at_their_sites_unoptimised() {
    check("-O0", "150");
}

#[test]
fn arrays_made_through_the_programs_layers_are_named_at_their_sites_optimised() {
    check("-O2", "400");
}
