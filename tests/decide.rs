//! From findings to decisions (issue 16): `hpcprof-rs diff` of abc against
//! the same program with C read contiguously (`-DC_CONTIGUOUS`).
//!
//! Known answers: with C contiguous the program is several times faster,
//! so the memory samples (fixed period of CPU time) fall a lot, and C's
//! share falls from dominant to a minority. Swapped, `--fail-if-worse`
//! fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline_tests::*;

const EVENT: &str = "mem:soft@100000";

/// Databases of abc (strided C) and abc -DC_CONTIGUOUS.
fn abc_pair(name: &str) -> (PathBuf, PathBuf) {
    let strided = scratch(&format!("{name}-strided"));
    let contig = scratch(&format!("{name}-contig"));
    let exe = compile_c("abc/abc.c", &strided, &[]);
    let exe_c = compile_c("abc/abc.c", &contig, &["-DC_CONTIGUOUS"]);
    let before = profile(&strided, EVENT, &exe, &["8"]).db;
    let after = profile(&contig, EVENT, &exe_c, &["8"]).db;
    (before, after)
}

fn diff(before: &Path, after: &Path, extra: &[&str]) -> std::process::Output {
    run(Command::new(tool("hpcprof-rs"))
        .arg("diff")
        .arg(before)
        .arg(after)
        .args(extra))
}

fn object<'a>(d: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    d["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .find(|o| o["name"] == name && o["kind"] == "heap")
        .unwrap_or_else(|| panic!("no heap object {name} in {d:#}"))
}

#[test]
fn diff_abc_contiguous_c_share_and_memory_time_fall() {
    let (before, after) = abc_pair("diff-abc");
    let out = diff(&before, &after, &["--format", "json"]);
    let text = ok_stdout(&out, "hpcprof-rs diff --format json");
    let d: serde_json::Value = serde_json::from_str(&text).expect("diff JSON");
    assert_eq!(d["format"], "hpcprof-rs/diff");
    assert_eq!(d["version"], 1);
    assert!(d["measure"].as_str().unwrap().contains("samples"));

    // C is matched by name and allocation site across the two builds.
    let c = object(&d, "C");
    assert_eq!(c["status"], "matched", "{c:#}");
    let site = format!("abc.c:{}", line_of("abc/abc.c", "cube *C = malloc"));
    assert_eq!(c["site"], site.as_str());
    let (cb, ca) = (
        c["before"]["share"].as_f64().unwrap(),
        c["after"]["share"].as_f64().unwrap(),
    );
    eprintln!("C share {cb:.3} -> {ca:.3}; total {}", d["total"]);
    // Strided C dominates (abc.rs: >= 70%); contiguous it is one of three
    // unit-stride arrays.
    assert!(cb >= 0.6 && ca < cb - 0.25, "C share {cb} -> {ca}");
    for name in ["A", "B"] {
        assert_eq!(object(&d, name)["status"], "matched");
    }

    // The memory time falls a lot (strided C costs several times the rest).
    let (tb, ta) = (
        d["total"]["before"].as_u64().unwrap(),
        d["total"]["after"].as_u64().unwrap(),
    );
    assert!(tb > 500, "too few samples before: {tb}");
    assert!((ta as f64) < 0.7 * tb as f64, "memory time {tb} -> {ta}");

    // compute is matched by function.
    let compute = d["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "compute")
        .expect("compute in functions");
    assert_eq!(compute["status"], "matched");

    // Text says the same. (No --fail-if-worse here: B's own samples may
    // rise once C no longer hides its stalls.)
    let text = ok_stdout(&diff(&before, &after, &[]), "hpcprof-rs diff");
    assert!(text.contains("total memory time:") && text.contains("measure:"));
    assert!(text
        .lines()
        .any(|l| l.starts_with("matched") && l.contains(&site)));
    let csv = ok_stdout(&diff(&before, &after, &["--format", "csv"]), "csv");
    assert!(csv.starts_with("table,status,kind,name,site,"));
    assert!(csv
        .lines()
        .any(|l| l.starts_with("object,matched,heap,C,") && l.contains(&site)));

    // Swapped: strided C makes it much worse; exit status 1, reasons named.
    let out = diff(&after, &before, &["--fail-if-worse", "20"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("total memory time rose"), "{stderr}");
    assert!(stderr.contains("object C"), "{stderr}");
}

#[test]
fn diff_bad_arguments_are_named() {
    let dir = scratch("diff-bad");
    let out = diff(&dir.join("nope"), &dir.join("nope2"), &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nope") && stderr.contains("does not exist"),
        "{stderr}"
    );
}
