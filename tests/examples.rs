//! Examples with known answers, through the real pipeline.

use std::process::Command;

use pipeline_tests::*;

#[test]
fn pointer_chase_blames_the_list_nodes() {
    let dir = scratch("pointer-chase");
    let exe = compile_c("pointer_chase/pointer_chase.c", &dir, &[]);
    let native = ok_stdout(&run(Command::new(&exe).arg("60")), "native pointer_chase");
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["--min-bytes", "32", "-e", "mem:soft@100000", "-o"])
        .arg(&measurements)
        .arg(&exe)
        .arg("60"));
    assert_eq!(ok_stdout(&out, "hpcrun-rs pointer_chase"), native);

    // Almost every address is recovered: from the load that missed when it
    // kept its address register, else (after `mov (%rdi),%rdi`) from the
    // next access to the next node, across the loop's back edge.
    let profiles = read_profiles(&measurements);
    let stats = &profiles[0].stats;
    assert!(stats.memory_samples > 1000, "{stats:?}");
    assert!(
        stats.address_recovered * 100 >= stats.memory_samples * 99,
        "{stats:?}"
    );
    assert!(stats.recovered_at_ip > 0, "{stats:?}");

    let export = merge_and_export(&dir, &measurements);
    let top = &export["objects"][0];
    assert_eq!(top["name"], "node", "{top:#?}");
    assert_eq!(top["allocations"], 200000);
    assert!(top["share"].as_f64().unwrap() > 0.95, "{top:#?}");
    let path = top["alloc_path"].as_array().unwrap();
    assert!(
        path.iter().any(|f| f["function"] == "make_list"),
        "{path:?}"
    );
    // The walk loads each node's address from the previous node: the
    // decoder finds the address register loaded in the loop, so the
    // access is data-dependent, irregular (no stride dominates).
    assert_eq!(top["access_pattern"], "irregular", "{top:#?}");
    let walk = top["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["function"] == "walk")
        .unwrap_or_else(|| panic!("no site in walk: {top:#?}"));
    assert_eq!(walk["pattern"], "irregular", "{walk:#?}");
    assert!(
        walk["data_dependent_share"].as_f64().unwrap() > 0.9,
        "{walk:#?}"
    );
}

/// Period of the examples' runs: 100 us gives a few thousand samples.
const EVENT: &str = "mem:soft@100000";

/// The exported object called `name`.
fn object<'a>(objects: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    objects
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no object {name} in {objects:#?}"))
}

/// Store samples of an exported object.
fn store_samples(obj: &serde_json::Value) -> u64 {
    obj["metrics"]["store_samples"].as_u64().unwrap_or(0)
}

/// One-line summary of the objects, for the test log.
fn summary(objects: &[serde_json::Value]) -> String {
    objects
        .iter()
        .map(|o| {
            format!(
                "{} {}/{} ({:.1}%)",
                o["name"].as_str().unwrap_or("?"),
                samples(o),
                store_samples(o),
                100.0 * o["share"].as_f64().unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn stream_triad_splits_loads_between_b_and_c_and_stores_into_a() {
    let dir = scratch("stream-triad");
    let exe = compile_c("stream_triad/stream_triad.c", &dir, &[]);
    let native = ok_stdout(&run(Command::new(&exe).arg("20")), "native stream_triad");
    let p = profile(&dir, EVENT, &exe, &["20"]);
    assert_eq!(p.program_stdout, native);

    let export = export_json(&p.db, "data");
    let objects = export["objects"].as_array().expect("objects");
    eprintln!("stream_triad (loads/stores): {}", summary(objects));
    let total: u64 = objects.iter().map(samples).sum();
    assert!(total > 500, "too few load samples: {total}");
    let (a, b, c) = (
        object(objects, "a"),
        object(objects, "b"),
        object(objects, "c"),
    );
    for o in [a, b, c] {
        assert_eq!(o["kind"], "heap");
        assert_eq!(o["bytes"], 8u64 << 22);
    }
    // The loads are b's and c's: each iteration waits for one of each.
    // Both miss alike (half the misses each), but time samples favour c:
    // its load is the older of the two in flight (it stalls at the head of
    // the reorder buffer) and its consumer (`mulsd`) is blamed on it by the
    // walk-back, while b's load is also its consumer (`addsd (b),%xmm1`).
    // Measured: b 29-35% of b+c. Asserted: both hold at least a fifth.
    let (sb, sc) = (samples(b), samples(c));
    assert!(
        (sb + sc) as f64 >= 0.9 * total as f64,
        "b and c hold only {} of {total} load samples",
        sb + sc
    );
    let b_share = sb as f64 / (sb + sc) as f64;
    assert!(
        (0.2..=0.8).contains(&b_share),
        "b holds {:.1}% of b+c (b {sb}, c {sc})",
        100.0 * b_share
    );
    // a is only written: store samples, (almost) no load samples.
    assert!(
        samples(a) as f64 <= 0.05 * total as f64,
        "a has {} load samples of {total}",
        samples(a)
    );
    let stores: u64 = objects.iter().map(store_samples).sum();
    assert!(
        store_samples(a) >= 20 && store_samples(a) * 2 > stores,
        "a has {} of {stores} store samples",
        store_samples(a)
    );
}

/// Runs `false_sharing MODE` natively: (wall, thread CPU sum) in seconds,
/// from its stderr line `false_sharing MODE: wall W s, thread CPU X s + Y s`.
fn false_sharing_times(exe: &std::path::Path, mode: &str) -> (f64, f64) {
    let out = run(Command::new(exe).args([mode, "40"]));
    ok_stdout(&out, "native false_sharing");
    let err = String::from_utf8_lossy(&out.stderr);
    let nums: Vec<f64> = err
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|t| t.parse().ok())
        .collect();
    assert_eq!(nums.len(), 3, "unexpected timing line: {err}");
    (nums[0], nums[1] + nums[2])
}

#[test]
fn false_sharing_counters_dominate_in_both_threads() {
    let dir = scratch("false-sharing");
    let exe = compile_c("false_sharing/false_sharing.c", &dir, &["-pthread"]);

    // Timing, natively: reported, not asserted. On the 2-vCPU development
    // VM the shared line costs nothing measurable (see the README).
    for mode in ["shared", "padded"] {
        let runs: Vec<(f64, f64)> = (0..3).map(|_| false_sharing_times(&exe, mode)).collect();
        let best_wall = runs.iter().map(|r| r.0).fold(f64::MAX, f64::min);
        let best_cpu = runs.iter().map(|r| r.1).fold(f64::MAX, f64::min);
        eprintln!(
            "false_sharing {mode}: best of 3 wall {best_wall:.3} s, thread CPU {best_cpu:.3} s"
        );
    }

    for mode in ["shared", "padded"] {
        let sub = dir.join(mode);
        std::fs::create_dir_all(&sub).unwrap();
        let (out, measurements) = hpcrun(&sub, EVENT, &exe, &[mode, "40"]);
        assert_eq!(
            ok_stdout(&out, "hpcrun-rs false_sharing"),
            format!("false_sharing {mode} n=40000000 sum=80000000\n")
        );

        // Both incrementing threads have their own profile with samples;
        // the main thread only waits.
        let profiles = read_profiles(&measurements);
        assert_eq!(profiles.len(), 3, "main + 2 threads");
        let mut per_thread: Vec<u64> = profiles
            .iter()
            .map(|p| p.stats.memory_samples + p.stats.store_samples)
            .collect();
        per_thread.sort_unstable();
        eprintln!("false_sharing {mode}: memory samples per thread {per_thread:?}");
        let sum: u64 = per_thread.iter().sum();
        assert!(
            per_thread[1] >= 100 && per_thread[1] * 10 >= sum,
            "{per_thread:?}"
        );

        let export = merge_and_export(&sub, &measurements);
        let objects = export["objects"].as_array().expect("objects");
        eprintln!("false_sharing {mode}: {}", summary(objects));
        let top = &objects[0];
        assert_eq!(top["name"], "counters", "{top:#?}");
        assert_eq!(top["kind"], "static");
        assert_eq!(top["bytes"], 128);
        assert!(top["share"].as_f64().unwrap() > 0.9, "{top:#?}");
        // Not asserted: that some samples are stores. Where the timer
        // lands in `load; add; store` is the core's business: on an Intel
        // Xeon VM some samples fall after the store, on an AMD EPYC (Zen 4)
        // VM 0 or 1 of about 290 do.

        // The threads view: 3 threads, and no single one holds (almost) all
        // the counters' samples (max over the sum: one worker alone would
        // give 1.0; the two workers' CPU time, hence samples, varies up to
        // 2:1 on a busy VM).
        let threads = export_json(&sub.join("db"), "threads");
        let rows = threads["distributions"].as_array().expect("distributions");
        let row = rows
            .iter()
            .find(|r| r["name"] == "counters")
            .unwrap_or_else(|| panic!("no threads row for counters: {rows:#?}"));
        let t = &row["threads"];
        assert_eq!(t["count"], 3, "{row:#?}");
        let (max, mean) = (t["max"].as_f64().unwrap(), t["mean"].as_f64().unwrap());
        assert!(
            max < 0.9 * 3.0 * mean,
            "one thread holds the counters: {row:#?}"
        );
    }
}

#[test]
fn cpp_vectors_names_the_hot_member() {
    if !have_tool("g++", "g++") {
        return;
    }
    let dir = scratch("cpp-vectors");
    let exe = compile_c("cpp_vectors/cpp_vectors.cpp", &dir, &[]);
    let native = ok_stdout(&run(Command::new(&exe).arg("3")), "native cpp_vectors");
    let p = profile(&dir, EVENT, &exe, &["3"]);
    assert_eq!(p.program_stdout, native);

    let export = export_json(&p.db, "data");
    let objects = export["objects"].as_array().expect("objects");
    eprintln!("cpp_vectors: {}", summary(objects));
    // The members are named from the constructor's initialisers and body
    // (`: pressure(n, 1.0),`, `velocity(n) {`, `density.resize(n);`) and
    // the declaration `Grid grid(N);`, past std::vector's inlined frames,
    // with the vectors' element type and length.
    let top = &objects[0];
    assert_eq!(top["name"], "grid.pressure : double[4,194,304]", "{top:#?}");
    assert!(top["share"].as_f64().unwrap() > 0.6, "{top:#?}");
    assert_eq!(top["bytes"], 8u64 << 22);
    for name in [
        "grid.velocity : double[4,194,304]",
        "grid.density : double[4,194,304]",
    ] {
        assert_eq!(object(objects, name)["kind"], "heap");
    }
    let path = top["alloc_path"].as_array().unwrap();
    let file_of = |f: &serde_json::Value| f["file"].as_str().unwrap_or("").to_string();
    assert!(
        path.iter().any(|f| file_of(f).contains("/c++/")
            && f["function"]
                .as_str()
                .is_some_and(|s| s.starts_with("std::"))),
        "no inlined std::vector frame in {path:#?}"
    );
    let ctor = path
        .iter()
        .find(|f| {
            f["function"]
                .as_str()
                .is_some_and(|s| s.starts_with("Grid::Grid("))
        })
        .unwrap_or_else(|| panic!("no Grid constructor frame in {path:#?}"));
    assert_eq!(
        ctor["line"].as_u64(),
        Some(line_of(
            "cpp_vectors/cpp_vectors.cpp",
            ": pressure(n, 1.0),"
        ))
    );
}

#[test]
fn rust_vec_names_the_vec_by_its_variable() {
    if !have_tool(&rustc(), "a Rust toolchain") {
        return;
    }
    let dir = scratch("rust-vec");
    let exe = compile_rust("rust_vec/rust_vec.rs", &dir);
    let native = ok_stdout(&run(Command::new(&exe).arg("4")), "native rust_vec");
    let p = profile(&dir, EVENT, &exe, &["4"]);
    assert_eq!(p.program_stdout, native);

    let export = export_json(&p.db, "data");
    let objects = export["objects"].as_array().expect("objects");
    eprintln!("rust_vec: {}", summary(objects));
    let top = &objects[0];
    assert_eq!(top["name"], "table", "{top:#?}");
    assert!(top["share"].as_f64().unwrap() > 0.6, "{top:#?}");
    assert_eq!(top["bytes"], 8u64 << 23);
    // Named through the Rust standard library's inlined allocation frames.
    let path = top["alloc_path"].as_array().unwrap();
    assert!(
        path.iter().any(|f| {
            f["file"]
                .as_str()
                .is_some_and(|s| s.contains("library/alloc/"))
                && f["function"]
                    .as_str()
                    .is_some_and(|s| s.contains("raw_vec"))
        }),
        "no alloc::raw_vec frame in {path:#?}"
    );
    let main = path
        .iter()
        .find(|f| f["function"] == "rust_vec::main")
        .unwrap_or_else(|| panic!("no rust_vec::main frame in {path:#?}"));
    assert_eq!(
        main["line"].as_u64(),
        Some(line_of("rust_vec/rust_vec.rs", "let mut table: Vec<u64>"))
    );
    // `Vec::with_capacity` then `push`: named too.
    assert_eq!(object(objects, "hist")["kind"], "heap");
}

#[test]
fn skewed_lookup_table_dominates() {
    let dir = scratch("skewed-lookup");
    let exe = compile_c("skewed_lookup/skewed_lookup.c", &dir, &[]);
    let native = ok_stdout(&run(Command::new(&exe).arg("10")), "native skewed_lookup");
    let p = profile(&dir, EVENT, &exe, &["10"]);
    assert_eq!(p.program_stdout, native);

    let export = export_json(&p.db, "data");
    let objects = export["objects"].as_array().expect("objects");
    eprintln!("skewed_lookup: {}", summary(objects));
    let top = &objects[0];
    assert_eq!(top["name"], "table", "{top:#?}");
    assert_eq!(top["bytes"], 8u64 << 23);
    assert!(top["share"].as_f64().unwrap() > 0.9, "{top:#?}");
    // The small, cached weights array: at most a few samples.
    if let Some(w) = objects.iter().find(|o| o["name"] == "weights") {
        assert!(w["share"].as_f64().unwrap() < 0.05, "{w:#?}");
    }
    // The offset histogram finds the hot region: 80% of the lookups go to
    // the first 10% of the table (buckets 0-2 and a fifth of 3): each hot
    // bucket gets 36 times the lookups of a cold one. Hot lookups are
    // cheaper (cached), so the hot share of the samples depends on the
    // machine's caches: 59-65% of the samples in the first 4 of 32 buckets
    // on an Intel Xeon VM, 28-37% on an AMD EPYC (Zen 4) VM whose cold
    // lookups cost about 12 times a hot one (TLB and DRAM misses against
    // L3 hits). What holds on both, by a wide margin (155-188 against at
    // most 74 per bucket on the EPYC): every hot bucket outweighs every
    // cold one.
    let h = &top["histogram"];
    assert_eq!(h["unit"], "fraction", "{h:#}");
    assert_eq!(h["buckets"], 32, "{h:#}");
    let count = |b: u64| {
        h["counts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["bucket"] == b)
            .map_or(0, |c| c["count"].as_u64().unwrap())
    };
    let coldest_hot = (0..3).map(count).min().unwrap();
    let hottest_cold = (4..32).map(count).max().unwrap();
    assert!(coldest_hot > hottest_cold, "{h:#}");
}

#[test]
fn first_touch_threads_follow_the_initialisation() {
    let dir = scratch("first-touch");
    let exe = compile_c("first_touch/first_touch.c", &dir, &["-fopenmp"]);
    for mode in ["serial", "parallel"] {
        let sub = dir.join(mode);
        let (stdout, measurements) = measure_first_touch(&sub, &exe, EVENT, mode);
        assert!(
            stdout.starts_with(&format!("first_touch {mode} threads=2 sweeps=4 ")),
            "{stdout}"
        );
        let export = merge_and_export(&sub, &measurements);
        let objects = export["objects"].as_array().expect("objects");
        eprintln!("first_touch {mode}: {}", summary(objects));
        assert_eq!(export["source"]["threads"], 2);
        // `field` holds almost all the sampled memory accesses. Loads and
        // stores together: in this streaming loop the sampled instruction
        // is the load on one machine (Intel Xeon VM) and mostly the store
        // or the arithmetic between them on another (AMD EPYC Zen 4: 45%
        // after the store, 3% after the load), so loads alone (the primary
        // metric, by which objects are sorted) can be a handful.
        let accesses = |o: &serde_json::Value| samples(o) + store_samples(o);
        let all: u64 = objects.iter().map(accesses).sum();
        let top = objects
            .iter()
            .find(|o| o["name"] == "field")
            .unwrap_or_else(|| panic!("no object field: {objects:#?}"));
        assert_eq!(top["bytes"], 8u64 << 25);
        assert!(
            accesses(top) as f64 > 0.8 * all as f64 && all >= 100,
            "field: {} of {all} sampled accesses\n{top:#?}",
            accesses(top)
        );

        // First touch: serial initialisation leaves every page of `field`
        // to thread 0 (the classic NUMA bug); parallel initialisation with
        // schedule(static) splits them in halves.
        let first_touch = |t: &str| {
            top["threads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["thread"] == t)
                .map_or(0, |r| r["metrics"]["first_touch"].as_u64().unwrap_or(0))
        };
        let (t0, t1) = (first_touch("thread 0"), first_touch("thread 1"));
        let pages = (8u64 << 25) / 4096;
        assert!(
            t0 + t1 >= pages * 99 / 100,
            "{t0} + {t1} of {pages} pages\n{top:#?}"
        );
        if mode == "serial" {
            assert_eq!(top["first_touch_thread"], "thread 0", "{top:#?}");
            assert!(
                top["first_touch_share"].as_f64().unwrap() > 0.99,
                "{top:#?}"
            );
        } else {
            let share = t0 as f64 / (t0 + t1) as f64;
            assert!(
                (0.4..=0.6).contains(&share),
                "thread 0 touched {t0}, thread 1 {t1}"
            );
        }

        // Both OpenMP threads sweep it.
        let threads = export_json(&sub.join("db"), "threads");
        let rows = threads["distributions"].as_array().expect("distributions");
        let row = rows
            .iter()
            .find(|r| r["name"] == "field")
            .unwrap_or_else(|| panic!("no threads row for field: {rows:#?}"));
        assert_eq!(row["threads"]["count"], 2, "{row:#?}");
        for t in ["thread 0", "thread 1"] {
            let n = top["threads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["thread"] == t)
                .map_or(0, |r| {
                    let m = &r["metrics"];
                    m["samples"].as_u64().unwrap_or(0) + m["store_samples"].as_u64().unwrap_or(0)
                });
            assert!(n > 0, "{t} has no sampled access of field: {top:#?}");
        }
    }
}
