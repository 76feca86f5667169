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
}
