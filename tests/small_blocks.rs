//! Programs of many small heap blocks (under `--min-bytes`), as per-row
//! and per-node C and C++ code allocates them: every block is tracked at
//! its site at the default settings, so each site is a row of its own
//! with its exact block count, and `<small heap objects>` holds only what
//! the object map could not take; when a memory cap leaves blocks
//! untracked, hpcrun-rs, hpcprof-rs and the report say how many and why.

use std::process::Command;

use pipeline_tests::*;

/// A sampling period that gives a few thousand samples to these programs
/// of about a second.
const EVENT: &str = "mem:soft@200000";

/// The heap rows of an export: (name, allocations, blocks, samples).
fn heap_rows(export: &serde_json::Value) -> Vec<(String, u64, serde_json::Value, u64)> {
    export["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter(|o| o["kind"] == "heap")
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                o["allocations"].as_u64().unwrap(),
                o["blocks"].clone(),
                samples(o),
            )
        })
        .collect()
}

/// The row named `name` whose site made `allocations` blocks.
fn row<'a>(
    rows: &'a [(String, u64, serde_json::Value, u64)],
    name: &str,
    allocations: u64,
) -> &'a (String, u64, serde_json::Value, u64) {
    rows.iter()
        .find(|r| r.0 == name && r.1 == allocations)
        .unwrap_or_else(|| panic!("no row {name} of {allocations} blocks in {rows:#?}"))
}

/// A heap row of the export: (name, allocations, blocks, samples).
type Row = (String, u64, serde_json::Value, u64);

/// Each of `rows` is a site of small blocks of its size (`max_bytes`),
/// `blocks` of them live at once.
fn assert_small_sites(rows: &[(&Row, u64)], blocks: u64) {
    for (r, size) in rows {
        assert_eq!(r.2["small"], true, "{r:?}");
        assert_eq!(r.2["max_bytes"], *size, "{r:?}");
        assert_eq!(r.2["peak_live"], blocks, "{r:?}");
    }
}

/// The heap samples (more than `floor`), of which `<small heap objects>`
/// holds at most 5%.
fn assert_bucket_under_5_percent(heap: &[Row], floor: u64) {
    let heap_samples: u64 = heap.iter().map(|r| r.3).sum();
    let bucket: u64 = heap
        .iter()
        .filter(|r| r.0 == "<small heap objects>")
        .map(|r| r.3)
        .sum();
    eprintln!("<small heap objects> {bucket} of {heap_samples} heap samples");
    assert!(heap_samples > floor, "too few samples: {heap_samples}");
    assert!(
        bucket * 20 <= heap_samples,
        "<small heap objects> {bucket} of {heap_samples}"
    );
}

/// 300,000 rows of a sparse matrix, each row's 27 values (216 B) and 27
/// column indices (108 B) in blocks of their own, then SpMV over them:
/// both row sites are named, with exactly one block per row, and
/// together take most of the samples; `<small heap objects>` is under 5%
/// of the heap samples (it should be empty: every block is tracked).
#[test]
fn every_csr_row_is_counted_at_its_site() {
    let dir = scratch("small-blocks-csr");
    let exe = compile_test_program("csr_rows.c", &dir, &[]);
    let rows = "300000";
    let p = profile_same_output(&dir, EVENT, &exe, &[rows, "20"]);
    let export = export_json(&p.db, "data");
    let heap = heap_rows(&export);
    let values = row(&heap, "values[i]", 300_000);
    let indices = row(&heap, "indices[i]", 300_000);
    assert_small_sites(&[(values, 216), (indices, 108)], 300_000);
    let all: u64 = export["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(samples)
        .sum();
    eprintln!("values {} indices {} ({all} in all)", values.3, indices.3);
    assert_bucket_under_5_percent(&heap, 200);
    // The rows are 97 MB read 20 times; x and y (4.8 MB) are the rest.
    assert!(
        (values.3 + indices.3) * 2 > all,
        "rows {} + {} of {all}",
        values.3,
        indices.3
    );
    // Both rows stream from memory, the values with twice the bytes: the
    // samples the index loads stall on are shared with the values loads
    // in flight with them, and the other way round.
    assert_ratio_in_bounds("values[i]", values.3, "indices[i]", indices.3);
    let mut by_samples: Vec<&(String, u64, serde_json::Value, u64)> = heap.iter().collect();
    by_samples.sort_by_key(|r| std::cmp::Reverse(r.3));
    assert_eq!(by_samples[0].0, "values[i]", "{by_samples:#?}");
    assert_eq!(by_samples[1].0, "indices[i]", "{by_samples:#?}");
    let report = run(Command::new(tool("hpcview-tui")).arg(&p.db).arg("--report"));
    let report = ok_stdout(&report, "hpcview-tui --report");
    assert!(
        report.contains("(300,000 blocks of 216 B)")
            && report.contains("(300,000 blocks of 108 B)"),
        "{report}"
    );
    assert!(!report.contains("not tracked"), "{report}");
}

/// The samples of two row sites streamed together, values against
/// indices, lie between 1.2 : 1 and 4 : 1 (their bytes are 2 : 1).
fn assert_ratio_in_bounds(values: &str, v: u64, indices: &str, i: u64) {
    assert!(
        v * 10 >= i * 12 && v <= i * 4,
        "{values} {v} : {indices} {i} is outside 1.2-4"
    );
}

/// A conjugate-gradient solve on a 48^3 grid (110,592 rows) whose matrix
/// is stored a row per `new[]`, as reference C++ CG benchmarks do: values
/// (216 B), local column indices (108 B) and global indices (216 B, read
/// only while building) of every row in blocks of their own. Each row
/// site is named with its exact block count, `<small heap objects>` holds
/// under 5% of the heap samples, the values rows are the top object, and
/// values : indices lies between 1.2 and 4.
#[test]
fn a_per_row_cg_solve_gives_each_row_site_its_share() {
    let dir = scratch("small-blocks-cg");
    let exe = compile_test_program("cg_rows.cpp", &dir, &[]);
    let p = profile_same_output(&dir, EVENT, &exe, &["48", "60"]);
    let export = export_json(&p.db, "data");
    let heap = heap_rows(&export);
    let rows = 48 * 48 * 48;
    let values = row(&heap, "a.values[row]", rows);
    let indices = row(&heap, "a.local_cols[row]", rows);
    assert_small_sites(&[(values, 216), (indices, 108)], rows);
    eprintln!("values {} indices {}", values.3, indices.3);
    assert_bucket_under_5_percent(&heap, 500);
    let top = export["objects"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|o| samples(o))
        .unwrap();
    assert_eq!(top["name"], "a.values[row]", "top object {top:#}");
    assert_ratio_in_bounds("values", values.3, "indices", indices.3);
}

/// Blocks freed by another thread and realloc chains keep exact counts:
/// 50,000 blocks of 64 B all freed by a second thread; 1,000 chains of a
/// 16-byte malloc grown five times by realloc up to 512 B, each realloc a
/// block of the realloc's site, the last ones freed at the end.
#[test]
fn cross_thread_frees_and_realloc_chains_keep_exact_counts() {
    let dir = scratch("small-blocks-churn");
    let exe = compile_test_program("small_churn.c", &dir, &["-pthread"]);
    let p = profile_same_output(&dir, EVENT, &exe, &["50000", "1000", "2000"]);
    let heap = heap_rows(&export_json(&p.db, "data"));
    let blocks = row(&heap, "blocks[i]", 50_000);
    assert_eq!(blocks.2["peak_live"], 50_000, "{blocks:?}");
    assert_eq!(blocks.2["frees"], 50_000, "{blocks:?}");
    assert_eq!(blocks.2["max_bytes"], 64, "{blocks:?}");
    let chains = row(&heap, "c", 5_000);
    // Four reallocs of each chain free the previous block of the site;
    // the program frees the last one before it exits.
    assert_eq!(chains.2["frees"], 5_000, "{chains:?}");
    assert_eq!(chains.2["peak_live"], 1_000, "{chains:?}");
    assert_eq!(chains.2["max_bytes"], 512, "{chains:?}");
}

/// C++ node containers: an unordered_map of 400,000 nodes and a list of
/// 100,000, each a row of its own site (the `emplace` and `push_back`
/// lines) with its exact node count.
#[test]
fn node_containers_are_rows_of_their_sites() {
    let dir = scratch("small-blocks-nodes");
    let exe = compile_test_program("node_containers.cpp", &dir, &[]);
    let p = profile_same_output(&dir, EVENT, &exe, &["400000", "8"]);
    let export = export_json(&p.db, "data");
    let heap = heap_rows(&export);
    let nodes = row(&heap, "table", 400_000);
    let list = row(&heap, "chain", 100_000);
    for r in [nodes, list] {
        assert_eq!(r.2["small"], true, "{r:?}");
        assert!(r.3 > 0, "no samples: {r:?}");
    }
    let line = |needle: &str| {
        let src =
            std::fs::read_to_string(root().join("tests/programs/node_containers.cpp")).unwrap();
        src.lines().position(|l| l.contains(needle)).unwrap() as u64 + 1
    };
    let site_line = |allocations: u64| {
        export["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["allocations"] == allocations)
            .map(|o| o["alloc_site"]["line"].as_u64())
            .unwrap()
    };
    assert_eq!(site_line(400_000), Some(line("table.emplace(")));
    assert_eq!(site_line(100_000), Some(line("chain.push_back(")));
}

/// A tracking cap far below what the blocks need: the blocks past it are
/// counted with their reason, and hpcrun-rs, hpcprof-rs and the report's
/// header all say how many went untracked and which flag raises the cap.
#[test]
fn a_low_tracking_cap_says_how_many_blocks_went_untracked() {
    let dir = scratch("small-blocks-cap");
    let exe = compile_test_program("csr_rows.c", &dir, &[]);
    let (out, measurements) = hpcrun_with(
        &dir,
        &["--max-tracking-memory", "256KiB"],
        EVENT,
        &exe,
        &["100000", "2"],
    );
    ok_stdout(&out, "hpcrun-rs");
    let said = String::from_utf8_lossy(&out.stderr);
    let (merged, db) = merge(&dir, &measurements);
    let merged = String::from_utf8_lossy(&merged.stderr);
    let report = ok_stdout(
        &run(Command::new(tool("hpcview-tui")).arg(&db).arg("--report")),
        "hpcview-tui --report",
    );
    for (who, text) in [
        ("hpcrun-rs", &*said),
        ("hpcprof-rs", &*merged),
        ("report", &*report),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains("small heap blocks") && l.contains("were not tracked"))
            .unwrap_or_else(|| panic!("{who} does not say so:\n{text}"));
        assert!(line.contains("--max-tracking-memory"), "{who}: {line}");
        // 200,000 blocks in all, most of them past a 256 KiB cap.
        let n: u64 = line
            .split_whitespace()
            .find_map(|w| w.replace(',', "").parse().ok())
            .unwrap_or(0);
        assert!(n > 100_000 && n <= 200_000, "{who}: {line}");
    }
}
