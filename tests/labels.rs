//! Labels from the program (`hpcrun.h`): `hpcrun_register` names pool
//! sub-ranges, `hpcrun_label` names heap blocks, `hpcrun_unregister`
//! returns a range to its pool; the same programs run unchanged without the
//! profiler (weak symbols).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use formats::measurement::ThreadProfile;
use pipeline_tests::*;

const MIB: u64 = 1 << 20;

fn include_flag() -> String {
    format!("-I{}", root().join("hpcrun-rs/include").display())
}

fn compile_with_header(name: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let include = include_flag();
    let mut flags = vec!["-Wall", "-Wextra", "-Werror", include.as_str()];
    flags.extend_from_slice(extra);
    compile_test_program(name, dir, &flags)
}

/// The label of the allocation path's innermost frame (the `[label]`
/// pseudo-frame hpcprof-rs appends), if any.
fn last_function(obj: &serde_json::Value) -> Option<&str> {
    obj["alloc_path"].as_array()?.last()?["function"].as_str()
}

/// The object the program labelled `label`: its `label`, its name (a
/// label wins over inferred names) and its allocation path's `[label]`
/// frame all say so.
fn object<'a>(objects: &'a [serde_json::Value], label: &str) -> &'a serde_json::Value {
    let o = objects
        .iter()
        .find(|o| o["label"].as_str() == Some(label))
        .unwrap_or_else(|| panic!("no object labelled {label:?} in {objects:#?}"));
    assert_eq!(o["name"].as_str(), Some(label), "{o:#}");
    assert_eq!(last_function(o), Some(label), "{o:#}");
    // The site is the program's call, not the label's pseudo-frame.
    assert_ne!(o["alloc_site"]["module"], "[label]", "{o:#}");
    o
}

/// Allocation-log records per site label (`None`: unlabelled), over all
/// threads: (records, records freed/unregistered, bytes of the first).
fn records_by_label(profiles: &[ThreadProfile]) -> HashMap<Option<String>, (u64, u64, u64)> {
    let mut by: HashMap<Option<String>, (u64, u64, u64)> = HashMap::new();
    for p in profiles {
        for a in &p.allocations {
            let label = p.alloc_sites[a.site as usize].label.clone();
            let e = by.entry(label).or_insert((0, 0, a.size));
            e.0 += 1;
            e.1 += u64::from(a.free_unix_ns.is_some());
        }
    }
    by
}

#[test]
fn registered_ranges_and_labelled_blocks_are_objects_of_their_own() {
    let dir = scratch("labels");
    let exe = compile_with_header("labels.c", &dir, &[]);
    let native = run(Command::new(&exe).arg("100"));
    let native_out = ok_stdout(&native, "labels without the profiler");
    assert!(native_out.starts_with("particles "), "{native_out}");

    let p = profile_with(&dir, &["--alloc-log"], "mem:soft@100000", &exe, &["100"]);
    assert_eq!(
        p.program_stdout, native_out,
        "output changed under the profiler"
    );

    // What the program said, from the measurement (no sampling involved).
    let profiles = read_profiles(&p.measurements);
    // strdup's small block is tracked (at the C library's allocating
    // instruction, in the small-block map): its label is taken; only
    // labels of addresses in no block are untracked (none here).
    let untracked: u64 = profiles.iter().map(|p| p.stats.labels_untracked).sum();
    assert_eq!(untracked, 0, "a label of a small block is taken");
    let log = records_by_label(&profiles);
    let label = |s: &str| Some(s.to_string());
    assert_eq!(
        log.get(&label("particles")),
        Some(&(1, 1, 8 * MIB)),
        "{log:?}"
    );
    assert_eq!(log.get(&label("cells")), Some(&(1, 1, 4 * MIB)), "{log:?}");
    assert_eq!(
        log.get(&label("scratch")),
        Some(&(1, 1, 2 * MIB)),
        "{log:?}"
    );
    // hpcrun_label moves the block (its log record) to the labelled site.
    assert_eq!(log.get(&label("grid")), Some(&(1, 1, 16 * MIB)), "{log:?}");
    assert!(!log.contains_key(&label("tiny")), "{log:?}");
    assert!(!log.contains_key(&label("nothing")), "{log:?}");

    // Through the merge: every labelled range is its own object.
    let data = export_json(&p.db, "data");
    let objects = data["objects"].as_array().expect("objects");
    let particles = object(objects, "particles");
    let cells = object(objects, "cells");
    let grid = object(objects, "grid");
    assert_eq!(particles["bytes"].as_u64(), Some(8 * MIB));
    assert_eq!(cells["bytes"].as_u64(), Some(4 * MIB));
    assert_eq!(grid["bytes"].as_u64(), Some(16 * MIB));
    // One call path (carve <- main), told apart by the label only.
    let path = |o: &serde_json::Value| {
        let frames = o["alloc_path"].as_array().expect("alloc_path").clone();
        frames[..frames.len() - 1].to_vec()
    };
    assert_eq!(path(particles), path(cells));
    // Each region is read for the same time (~0.09 s of CPU at 100 us):
    // hundreds of samples each.
    for (name, o) in [("particles", particles), ("cells", cells), ("grid", grid)] {
        assert!(samples(o) >= 100, "{name}: {} samples", samples(o));
    }
    // The pool keeps what no registered range covers (scratch after its
    // unregister, and the rest): registered ranges win over it.
    let pool = objects
        .iter()
        .find(|o| o["bytes"].as_u64() == Some(32 * MIB))
        .unwrap_or_else(|| panic!("no 32 MiB pool object in {objects:#?}"));
    assert!(pool["label"].is_null(), "{pool:#}");
    assert_eq!(pool["name"].as_str(), Some("pool"), "{pool:#}");
    assert!(samples(pool) >= 200, "pool: {} samples", samples(pool));
    // scratch was unregistered before any read.
    assert!(
        objects
            .iter()
            .all(|o| o["label"].as_str() != Some("scratch") || samples(o) == 0),
        "{objects:#?}"
    );
}

#[test]
fn labels_from_many_threads_while_sampling() {
    let dir = scratch("labels-threads");
    let exe = compile_with_header("labels_threads.c", &dir, &["-pthread"]);
    let native = run(&mut Command::new(&exe));
    let native_out = ok_stdout(&native, "labels_threads without the profiler");
    assert!(native_out.starts_with("ok "), "{native_out}");
    let (out, measurements) = hpcrun_with(&dir, &["--alloc-log"], "mem:soft@20000", &exe, &[]);
    assert_eq!(ok_stdout(&out, "profiled labels_threads"), native_out);
    let profiles = read_profiles(&measurements);
    let log = records_by_label(&profiles);
    for t in 0..4 {
        let name = Some(format!("t{t}"));
        assert_eq!(log.get(&name), Some(&(2000, 2000, 16384)), "{log:?}");
    }
    assert_eq!(
        log.get(&Some("sub".into())),
        Some(&(8000, 8000, 1024)),
        "{log:?}"
    );
}

#[test]
fn print_header_is_the_shipped_header_and_compiles_as_c_and_cxx() {
    let out = run(Command::new(tool("hpcrun-rs")).arg("--print-header"));
    let printed = ok_stdout(&out, "hpcrun-rs --print-header");
    let shipped =
        std::fs::read_to_string(root().join("hpcrun-rs/include/hpcrun.h")).expect("read hpcrun.h");
    assert_eq!(printed, shipped);

    // A C++ program built with it runs without the profiler (the weak
    // symbols are null) and with it.
    let dir = scratch("labels-header");
    let header_dir = dir.join("include");
    std::fs::create_dir_all(&header_dir).expect("mkdir");
    std::fs::write(header_dir.join("hpcrun.h"), &printed).expect("write header");
    let src = dir.join("uses_header.cpp");
    std::fs::write(
        &src,
        "#include <hpcrun.h>\n#include <cstdio>\n#include <vector>\n\
         int main() {\n  std::vector<double> v(1 << 20, 1.0);\n\
         hpcrun_label(v.data(), \"v\");\n  hpcrun_register(v.data() + 8, 64, \"part\");\n\
         double s = 0;\n  for (double x : v) s += x;\n  hpcrun_unregister(v.data() + 8);\n\
         std::printf(\"%.0f %d\\n\", s, &hpcrun_label != nullptr);\n  return 0;\n}\n",
    )
    .expect("write source");
    let exe = dir.join("uses_header");
    let status = Command::new("g++")
        .args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&header_dir)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run g++");
    assert!(status.success(), "g++ failed on {}", src.display());
    let native = run(&mut Command::new(&exe));
    assert_eq!(ok_stdout(&native, "uses_header natively"), "1048576 0\n");
    let (profiled, measurements) = hpcrun_with(&dir, &["--alloc-log"], "mem:soft", &exe, &[]);
    assert_eq!(ok_stdout(&profiled, "uses_header profiled"), "1048576 1\n");
    let log = records_by_label(&read_profiles(&measurements));
    assert_eq!(
        log.get(&Some("v".into())),
        Some(&(1, 1, 8 * MIB)),
        "{log:?}"
    );
    assert_eq!(log.get(&Some("part".into())), Some(&(1, 1, 64)), "{log:?}");
}
