//! From findings to decisions: `hpcprof-rs diff` of abc against
//! the same program with C read contiguously (`-DC_CONTIGUOUS`), and
//! `hpcprof-rs advise` (fast-memory placement on examples/placement, NUMA
//! advice on examples/first_touch).
//!
//! Known answers: with C contiguous the program is several times faster,
//! so the memory samples (fixed period of CPU time) fall a lot, and C's
//! share falls from dominant to a minority, and the diff warns that the
//! totals differ beyond sampling noise. Swapped, `--fail-if-worse` fails;
//! a database against itself neither warns nor fails.

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

    // The totals differ far beyond sampling noise (3 sqrt(before +
    // after)): the JSON and stderr say so.
    let warnings = d["warnings"].as_array().expect("warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("more than sampling noise")),
        "{warnings:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("hpcprof-rs: warning: the runs' total samples"),
        "{out:?}"
    );
    // A database against itself: no warning, and nothing is worse.
    let same = diff(&before, &before, &["--fail-if-worse", "0"]);
    assert_eq!(same.status.code(), Some(0), "{same:?}");
    assert!(
        !String::from_utf8_lossy(&same.stderr).contains("warning"),
        "{same:?}"
    );

    // Text says the same. (No --fail-if-worse here: B's own samples may
    // rise once C no longer hides its stalls.)
    let text = ok_stdout(&diff(&before, &after, &[]), "hpcprof-rs diff");
    assert!(text.contains("warning: the runs' total samples"), "{text}");
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
    assert!(
        stderr.contains("total memory time rose") && stderr.contains("application's objects"),
        "{stderr}"
    );
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

fn advise(db: &Path, extra: &[&str]) -> serde_json::Value {
    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("advise")
        .arg(db)
        .args(["--format", "json"])
        .args(extra));
    let text = ok_stdout(&out, "hpcprof-rs advise --format json");
    serde_json::from_str(&text).expect("advise JSON")
}

/// examples/placement: two 512 MiB tables read equally often, one with 7
/// of 8 lookups in its first eighth. With room for one table, the advice
/// is the skewed table's head (its first 4 of 32 histogram buckets, 64 MiB)
/// and the rest of the room (448 MiB) in the uniform table. Why it holds
/// on any machine: every lookup waits for its load (one miss at a time), a
/// head bucket gets 7 x 8 / 32 lookups for every one a tail bucket gets
/// per lookup of the uniform table's buckets (measured per-bucket samples:
/// head ~1,650, uniform ~305, skewed tail ~65 on an AMD EPYC VM), so the
/// knapsack's order of buckets is fixed: head, uniform, skewed tail.
#[test]
fn advise_places_the_skewed_head_and_most_of_the_uniform_table() {
    let dir = scratch("advise-placement");
    let exe = compile_c("placement/placement.c", &dir, &[]);
    let p = profile(&dir, EVENT, &exe, &["3"]);
    assert!(p
        .program_stdout
        .starts_with("placement lookups=3000000 sum="));
    let a = advise(&p.db, &["--fast-mem", "512MiB"]);
    assert_eq!(a["format"], "hpcprof-rs/advise");
    assert_eq!(a["version"], 1);
    assert_eq!(a["fast_mem"], 512u64 << 20);
    assert_eq!(a["granularity"], 4096);
    let placements = a["placements"].as_array().expect("placements");
    let find = |name: &str| {
        placements
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not placed: {a:#}"))
    };
    let (skewed, uniform) = (find("skewed"), find("uniform"));
    assert_eq!(
        (&skewed["offset"], &skewed["range_bytes"]),
        (&serde_json::json!(0), &serde_json::json!(64u64 << 20)),
        "{a:#}"
    );
    assert_eq!(uniform["range_bytes"], 448u64 << 20, "{a:#}");
    assert!(a["bytes"].as_u64().unwrap() <= 512 << 20);
    // Each placement names the allocation site.
    let line = line_of("placement/placement.c", "uint64_t *skewed = malloc");
    assert!(
        skewed["site"]
            .as_str()
            .is_some_and(|s| s.ends_with(&format!("placement.c:{line}"))),
        "{skewed:#}"
    );
    // Clearly more than every simple strategy (measured 83% against 54%).
    let share = a["share"].as_f64().unwrap();
    let strategies = a["strategies"].as_object().expect("strategies");
    assert_eq!(strategies.len(), 3, "{a:#}");
    for (name, s) in strategies {
        let other = s["share"].as_f64().unwrap();
        assert!(
            share >= other + 0.1,
            "advised {share} against {name} {other}"
        );
    }
    // 32 buckets of 16 MiB are coarser than a page: the advice says so.
    assert!(!a["coarse_histograms"].as_array().unwrap().is_empty());
    let text = run(Command::new(tool("hpcprof-rs"))
        .arg("advise")
        .arg(&p.db)
        .args(["--fast-mem", "512MiB"]));
    let text = ok_stdout(&text, "hpcprof-rs advise");
    assert!(text.contains("Advised placement:"), "{text}");
    assert!(text.contains("bytes 0 B-64.0 MiB of 512.0 MiB"), "{text}");
    assert!(text.contains("hpcrun-rs --histogram page"), "{text}");
}

/// examples/first_touch with `-e page-faults`: thread 0 first touches every
/// page in `serial` while the other thread uses its half: "initialise in
/// parallel"; in `parallel` each thread first touches its own half:
/// nothing to change.
#[test]
fn advise_says_initialise_in_parallel_for_the_serially_initialised_array() {
    let dir = scratch("advise-numa");
    let exe = compile_c("first_touch/first_touch.c", &dir, &["-fopenmp"]);
    for mode in ["serial", "parallel"] {
        let sub = dir.join(mode);
        let (_, measurements) = measure_first_touch(&sub, &exe, EVENT, mode);
        merge_and_export(&sub, &measurements);
        let a = advise(&sub.join("db"), &[]);
        assert_eq!(a["first_touch_measured"], true);
        let numa = a["numa"].as_array().expect("numa");
        let field = numa.iter().find(|f| f["name"] == "field");
        if mode == "serial" {
            let f = field.unwrap_or_else(|| panic!("no advice for field: {a:#}"));
            assert_eq!(f["action"], "initialise_in_parallel", "{f:#}");
            assert_eq!(f["first_touch_thread"], "thread 0", "{f:#}");
            assert!(f["first_touch_share"].as_f64().unwrap() > 0.99, "{f:#}");
            assert!(f["advice"]
                .as_str()
                .unwrap()
                .contains("initialise in parallel"));
        } else {
            assert!(field.is_none(), "{a:#}");
        }
    }
}
