//! Heap objects named by their own call: several
//! allocations on one source line each take their own left-hand side, in
//! order, also when only one of them has samples (`double *cold =
//! malloc(a), *hot = malloc(b);`, Fortran `ALLOCATE(a(n/2), b(n))`);
//! `posix_memalign(&p, ...)` names `p` whether its status is tested
//! (`if (posix_memalign(&pm, ...)) return 1;`, a line that returns a
//! constant, not the allocation) or assigned (`rc = ...`).

use std::process::Command;

use pipeline_tests::*;

const MIB: u64 = 1 << 20;

/// The exported heap object of `bytes` bytes (one allocation each).
fn by_size(data: &serde_json::Value, bytes: u64) -> Option<&serde_json::Value> {
    data["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "heap" && o["bytes"].as_u64() == Some(bytes))
}

#[test]
fn each_call_of_a_line_and_posix_memalign_name_their_own_object() {
    let dir = scratch("names-per-call");
    let exe = compile_test_program("names_one_line.c", &dir, &[]);
    let p = profile(&dir, "mem:soft", &exe, &[]);
    assert!(p.program_stdout.starts_with("names_one_line"));
    let data = export_json(&p.db, "data");

    // `hot` is read in the loop: it has samples, and is named by the second
    // left-hand side of its line (it was named `cold`, the first).
    let hot = by_size(&data, 32 * MIB).unwrap_or_else(|| panic!("no 32 MiB object:\n{data:#}"));
    assert!(samples(hot) > 0, "{hot:#}");
    assert_eq!(hot["name"], "hot", "{hot:#}");
    // `cold` (one element written) has samples only by chance.
    if let Some(cold) = by_size(&data, 16 * MIB) {
        assert_eq!(cold["name"], "cold", "{cold:#}");
    }
    // posix_memalign in a condition that returns a constant: the line is
    // main's own (the site was `_start`, the name `heap@_start+0x21`).
    for (bytes, name) in [(24 * MIB, "pm"), (20 * MIB, "pr"), (12 * MIB, "al")] {
        let o = by_size(&data, bytes).unwrap_or_else(|| panic!("no object {name}:\n{data:#}"));
        assert_eq!(o["name"], name, "{o:#}");
        assert_eq!(o["alloc_site"]["function"], "main", "{o:#}");
    }
}

#[test]
fn fortran_allocate_of_two_arrays_names_the_one_with_samples() {
    if !have_tool("gfortran", "gfortran") {
        return;
    }
    let dir = scratch("names-per-call-fortran");
    let exe = dir.join("names_one_line_f");
    let status = Command::new("gfortran")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(root().join("tests/programs/names_one_line.f90"))
        .status()
        .expect("run gfortran");
    assert!(status.success());
    let p = profile(&dir, "mem:soft", &exe, &[]);
    let data = export_json(&p.db, "data");
    // b: 4,000,000 doubles, read 40 times; a: half as many, one written.
    let b = by_size(&data, 32_000_000).unwrap_or_else(|| panic!("no b:\n{data:#}"));
    assert!(samples(b) > 0, "{b:#}");
    assert_eq!(b["name"], "b", "{b:#}");
    if let Some(a) = by_size(&data, 16_000_000) {
        assert_eq!(a["name"], "a", "{a:#}");
    }
}
