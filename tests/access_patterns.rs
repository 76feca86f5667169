//! Access patterns through the real pipeline: examples/access_patterns
//! (a strided walk with a known stride, packed records whose doubles span
//! cache lines, the same records aligned) measured with `mem:soft`,
//! merged and exported. What is asserted is physically guaranteed: the
//! walk's stride is a property of its instruction (the decoder reads it
//! from the loop, the run-time stride from a register), the aligned
//! array's accesses can never span two lines, and 7 in 64 of the packed
//! ones do (a few thousand samples cannot all miss them).

use std::process::Command;

use pipeline_tests::*;

const EVENT: &str = "mem:soft@100000";

fn heap_object<'a>(objects: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    objects
        .iter()
        .find(|o| o["kind"] == "heap" && o["name"] == name)
        .unwrap_or_else(|| panic!("no heap object {name} in {objects:#?}"))
}

fn accesses(o: &serde_json::Value) -> u64 {
    samples(o) + o["metrics"]["store_samples"].as_u64().unwrap_or(0)
}

#[test]
fn strides_and_misalignment_of_known_arrays() {
    let dir = scratch("access-patterns");
    let exe = compile_c("access_patterns/access_patterns.c", &dir, &[]);
    // A stride of 100 doubles (800 bytes), given at run time.
    let args = ["16", "100"];
    let native = ok_stdout(
        &run(Command::new(&exe).args(args)),
        "native access_patterns",
    );
    let p = profile(&dir, EVENT, &exe, &args);
    assert_eq!(p.program_stdout, native);

    let export = export_json(&p.db, "data");
    let objects = export["objects"].as_array().expect("objects");
    let strided = heap_object(objects, "strided");
    let packed = heap_object(objects, "packed");
    let aligned = heap_object(objects, "aligned");
    eprintln!(
        "access_patterns: strided {} samples, strides {}; packed {} samples, misaligned {} ({}); aligned {} samples, misaligned {}",
        samples(strided),
        strided["strides"],
        samples(packed),
        packed["metrics"]["misaligned_samples"],
        packed["misaligned_share"],
        samples(aligned),
        aligned["metrics"]["misaligned_samples"],
    );

    // The strided walk: one regular stride of 100 elements.
    assert_eq!(strided["access_pattern"], "regular", "{strided:#?}");
    assert_eq!(strided["strides"][0]["bytes"], 800, "{strided:#?}");
    assert_eq!(strided["strides"][0]["elements"], 100, "{strided:#?}");
    assert!(strided["strides"][0]["share"].as_f64().unwrap() >= 0.6);
    let walk = strided["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["function"] == "walk_strided")
        .unwrap_or_else(|| panic!("no site in walk_strided: {strided:#?}"));
    assert_eq!(walk["source"], "decoder");
    assert_eq!(walk["strides"][0]["bytes"], 800);
    assert_eq!(walk["strides"][0]["share"], 1.0);

    // Packed records: 9 bytes apart, doubles at 1 + 9*i: some span two
    // cache lines.
    assert!(accesses(packed) > 200, "{packed:#?}");
    let misaligned = packed["metrics"]["misaligned_samples"].as_u64().unwrap();
    assert!(misaligned > 0, "{packed:#?}");
    let share = packed["misaligned_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{packed:#?}");
    assert_eq!(packed["strides"][0]["bytes"], 9, "{packed:#?}");

    // Aligned records and the aligned doubles: never.
    for o in [aligned, strided] {
        assert!(accesses(o) > 200, "{o:#?}");
        assert_eq!(o["metrics"]["misaligned_samples"], 0, "{o:#?}");
        assert_eq!(o["misaligned_share"], 0.0, "{o:#?}");
    }
    assert_eq!(aligned["strides"][0]["bytes"], 16, "{aligned:#?}");

    // The report's findings name both, with their advice; the aligned
    // array (unit-like stride, no misalignment) is no finding.
    let out = run(Command::new(tool("hpcview-tui"))
        .arg(&p.db)
        .args(["--report", "--view", "data", "--top", "10"]));
    let text = ok_stdout(&out, "hpcview-tui --report");
    let findings = text
        .split_once("Findings:")
        .unwrap_or_else(|| panic!("no Findings section:\n{text}"))
        .1;
    assert!(
        findings.contains("- strided: stride: 800 bytes (100 elements of 8 bytes), regular"),
        "{text}"
    );
    assert!(
        findings.contains("- packed: misaligned: ") && findings.contains("span two cache lines"),
        "{text}"
    );
    assert!(findings.contains("advice: walk it contiguously"), "{text}");
    assert!(!findings.contains("- aligned:"), "{text}");
}
