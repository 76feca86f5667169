//! The truth of `mem:soft`: kernels whose answer the physics
//! fixes, through the real pipeline (hpcrun-rs, hpcprof-rs, export). Each
//! assertion holds whatever the sampling noise and the machine's load: it
//! checks what must be true of any honest attribution (which object holds
//! the time, which rule reached it, whether it is memory bound), never an
//! ordering that noise could flip. docs/ACCURACY.md has the measured
//! shares against Valgrind.

use pipeline_tests::*;

/// Profiles `tests/programs/<name>` (compiled with `extra`) under
/// `-e mem:soft` with `args`; returns (data export, bottleneck export).
fn measure(name: &str, extra: &[&str], args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let dir = scratch(name.trim_end_matches(".c"));
    let exe = compile_test_program(name, &dir, extra);
    measure_exe(&dir, &exe, name, args)
}

/// [`measure`] of an already compiled program.
fn measure_exe(
    dir: &std::path::Path,
    exe: &std::path::Path,
    name: &str,
    args: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let p = profile(dir, "mem:soft", exe, args);
    assert!(!p.program_stdout.is_empty(), "{name} printed nothing");
    rules_add_up_per_line(&export_json(&p.db, "code"));
    (export_json(&p.db, "data"), export_json(&p.db, "bottleneck"))
}

/// Every function and line of the code view says how its samples were
/// attributed: its `rule_*` columns add up to its CPU samples (each
/// sample is decided by exactly one rule, counted where it is recorded).
fn rules_add_up_per_line(code: &serde_json::Value) {
    let functions = code["functions"].as_array().expect("functions");
    assert!(!functions.is_empty(), "{code:#}");
    let rows = functions.iter().chain(
        functions
            .iter()
            .flat_map(|f| f["lines"].as_array().unwrap()),
    );
    for row in rows {
        let m = row["metrics"].as_object().expect("metrics");
        let by_rule: u64 = m
            .iter()
            .filter(|(k, _)| k.starts_with("rule_"))
            .map(|(_, v)| v.as_u64().unwrap_or(0))
            .sum();
        let cpu = m["cpu_samples"].as_u64().unwrap_or(0);
        assert_eq!(by_rule, cpu, "rule columns vs cpu_samples: {row:#}");
    }
}

fn objects(export: &serde_json::Value) -> &[serde_json::Value] {
    export["objects"].as_array().expect("objects")
}

fn object<'a>(export: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    objects(export)
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no object {name}: {export:#}"))
}

fn stores(obj: &serde_json::Value) -> u64 {
    obj["metrics"]["store_samples"].as_u64().unwrap_or(0)
}

fn rule(export: &serde_json::Value, name: &str) -> u64 {
    export["stats"]["attribution"][name].as_u64().unwrap_or(0)
}

/// The bottleneck row of object `name`.
fn row<'a>(bottleneck: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    bottleneck["bottleneck"]
        .as_array()
        .expect("bottleneck rows")
        .iter()
        .find(|r| r["region"] == "object" && r["name"] == name)
        .unwrap_or_else(|| panic!("no bottleneck row {name}: {bottleneck:#}"))
}

/// Every sample is attributed by exactly one rule.
fn rules_add_up(export: &serde_json::Value) {
    let stats = &export["stats"];
    let by_rule: u64 = stats["attribution"]
        .as_object()
        .expect("attribution counters")
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum();
    let samples = stats["samples"].as_u64().unwrap();
    assert!(
        by_rule <= samples && by_rule > 0,
        "{by_rule} attributed of {samples}: {stats:#}"
    );
}

#[test]
fn self_clobbering_index_load_gives_the_index_its_share() {
    let (data, _) = measure("soft_index_gather.c", &[], &["30"]);
    rules_add_up(&data);
    let index = object(&data, "index");
    let grid = object(&data, "grid");
    let (i, g) = (samples(index), samples(grid));
    // Every index read misses (64 MiB at random), every grid read hits L2:
    // the index holds the time. Before, it got none (its load overwrites
    // its index register). A third of the heap samples is far below what
    // was measured (about 75%) and far above the old answer (0).
    assert!(i * 3 >= i + g, "index {i} vs grid {g}: {data:#}");
    // The object was named by the intact base register.
    assert!(data["stats"]["recovered_base_only"].as_u64().unwrap() > 0);
    // No load became a stack access (the old fallback's spill). (The
    // index does get store samples: main writes it before the gathers.)
    let stack: u64 = objects(&data)
        .iter()
        .filter(|o| o["kind"] == "stack")
        .map(|o| samples(o) + stores(o))
        .sum();
    let total: u64 = objects(&data).iter().map(|o| samples(o) + stores(o)).sum();
    assert!(stack * 20 <= total, "stack {stack} of {total}");
}

#[test]
fn vectorised_streaming_sum_is_memory_bound_on_its_array() {
    let (data, bottleneck) = measure("soft_stream_sum.c", &["-O3", "-march=x86-64-v2"], &["24"]);
    rules_add_up(&data);
    let heap: u64 = objects(&data)
        .iter()
        .filter(|o| o["kind"] == "heap")
        .map(samples)
        .sum();
    let all: u64 = objects(&data).iter().map(samples).sum();
    // The array is the only data the loop reads.
    assert!(heap * 10 >= all * 9, "heap {heap} of {all}");
    let r = row(&bottleneck, "data");
    let mts = r["mem_time_share"].as_f64().unwrap();
    assert!(mts >= 0.8, "mem_time_share {mts}: {r:#}");
    assert_eq!(r["memory_bound"], true);
}

#[test]
fn triad_samples_all_three_arrays_and_the_store_target() {
    // examples/stream_triad: a = b + s*c over three 32 MiB arrays.
    let dir = scratch("soft_triad");
    let exe = compile_c("stream_triad/stream_triad.c", &dir, &[]);
    // Sampled four times as often as by default: about 800 samples.
    let p = profile(&dir, "mem:soft@500000", &exe, &["40"]);
    assert!(!p.program_stdout.is_empty(), "stream_triad printed nothing");
    let data = export_json(&p.db, "data");
    rules_add_up(&data);
    let (a, b, c) = (object(&data, "a"), object(&data, "b"), object(&data, "c"));
    assert!(samples(b) > 0 && samples(c) > 0, "{data:#}");
    let total: u64 = [a, b, c].iter().map(|o| samples(o) + stores(o)).sum();
    // A third of the traffic is the store stream: the store target gets a
    // share of its own, at least a twentieth of the samples (measured: 18
    // to 38% from run to run on a 2-core machine, 10% once under heavy
    // load).
    assert!(stores(a) * 20 >= total, "a stores {} of {total}", stores(a));
}

#[test]
fn l1_resident_fp_chain_is_compute_not_memory() {
    let (data, bottleneck) = measure("soft_l1_chain.c", &[], &["200000"]);
    rules_add_up(&data);
    // The multiply-add chain's samples are compute ... The loop is a
    // multiply by a constant and an add whose operand is the load, two
    // dependent instructions of the same latency: the samples land on
    // each about half of the time (measured: compute 47-56%, once 50% of
    // 252), so the compute share is asserted, not a majority.
    let compute = rule(&data, "compute");
    let at_loads = rule(&data, "landed") + rule(&data, "walked_back");
    assert!(compute * 4 >= compute + at_loads, "{:#}", data["stats"]);
    // ... the 16 KiB it reads is cache-resident: not memory bound.
    let r = row(&bottleneck, "hot");
    assert_eq!(r["memory_bound"], false, "{r:#}");
    // The constant 0.999 (RIP-relative, read-only) is not a data object:
    // neither an unknown address nor the module's `.rodata`.
    assert!(
        !objects(&data).iter().any(|o| {
            let name = o["name"].as_str().unwrap_or("");
            (name.starts_with("<unknown address") || name.starts_with("<.rodata")) && samples(o) > 0
        }),
        "{data:#}"
    );
}

#[test]
fn page_faults_are_the_faulting_access_s_time() {
    // Every read of `fresh` faults its page in; `weights` (4 KiB) is read
    // from L1 right before it or right after it. About half of the
    // samples during the faults have the IP at the faulting read: the
    // usual rule took them for the read before it (`weights`: 49% of the
    // samples, weights-first) or for no access (46% `other`,
    // fresh-first). The fault rule gives them to `fresh` (measured 99.7%
    // and 92%; one past the faulting read, fresh-first, the IP is at the
    // read of `weights`, told apart by the thread's recent pages). 8 GiB
    // of fresh pages (read faults map the shared zero page: no memory) for
    // about 150 timer signals: the kernel's time is not sampled. The
    // floors leave room for a loaded machine (85% was seen, weights-first,
    // beside another profiled test) and still fail the old answers (51%;
    // fresh-first the `other` check below).
    for (order, tenths) in [("weights-first", 7), ("fresh-first", 6)] {
        let (data, _) = measure("soft_page_faults.c", &[], &["8", order]);
        rules_add_up(&data);
        let fresh = samples(object(&data, "fresh"));
        let total: u64 = objects(&data).iter().map(|o| samples(o) + stores(o)).sum();
        assert!(
            fresh * 10 >= total * tenths,
            "{order}: fresh {fresh} of {total}: {data:#}"
        );
        // The faulting reads' samples are memory samples, not `other`:
        // at most half as many `other` as `fresh` (`other` came to 27% of
        // `fresh` with the other tests of this file beside it, 38% at a
        // load average of 17; the old rule gave about as many `other` as
        // `fresh`).
        assert!(
            rule(&data, "other") * 2 <= fresh,
            "{order}: fresh {fresh}: {:#}",
            data["stats"]
        );
        assert!(
            data["stats"]["about_to_fault"].as_u64().unwrap() > 0,
            "{order}: {:#}",
            data["stats"]
        );
    }
}

#[test]
fn a_base_computed_by_lea_and_replaced_by_its_load_is_computed_again() {
    let (data, _) = measure("soft_computed_base.c", &[], &["30"]);
    rules_add_up(&data);
    let table = samples(object(&data, "table"));
    let lost = objects(&data)
        .iter()
        .find(|o| o["name"] == "<address not recovered>")
        .map_or(0, samples);
    let total: u64 = objects(&data).iter().map(samples).sum();
    // Every table read misses (64 MiB at random) and is the loop's only
    // load: the table holds the time. Its load replaces its own base, an
    // `lea` of the intact table pointer and an index advanced by one since:
    // before the address was computed again, all of it was `<address not
    // recovered>` (793 of 795 memory samples, 0 for the table). Half is
    // far below what was measured (100%).
    assert!(table * 2 >= total, "table {table} of {total}: {data:#}");
    assert!(lost * 10 <= table, "lost {lost} vs table {table}");
}
