//! The program's allocator serves the program under the profiler: a
//! program linked with tcmalloc, jemalloc or mimalloc, the same program
//! with the allocator preloaded (`LD_PRELOAD`), and a program with a
//! malloc family of its own (a bump allocator in a library it links)
//! print what they print natively, exit as natively,
//! and their allocator says the blocks are its own (`mallctl`'s
//! `stats.allocated`, tcmalloc's ownership query, mimalloc's heap-region
//! query, the bump allocator's own counter). The profiler still sees every
//! block: the two arrays are named heap objects, the one read 64 times as
//! often taking most of the samples. (A malloc family in the executable
//! comes before the profiler's hooks: it serves the program as natively,
//! and hpcrun-rs says that its blocks are not seen.)
//!
//! C++ programs linked with tcmalloc or mimalloc, whose own `operator
//! new` serves blocks without calling `malloc`, have their `new double[N]`
//! arrays named too, each recorded once (also with libstdc++'s `new`,
//! which calls `malloc`); a `new` that throws `std::bad_alloc` through the
//! profiler's hook is caught by the program as natively.
//!
//! The allocators are Debian's packages; a missing one fails the test
//! with the package to install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pipeline_tests::*;

/// A sampling period that gives a few thousand samples to a run of about
/// a second.
const EVENT: &str = "mem:soft@200000";

/// Passes over the hot array (about a second natively).
const PASSES: &str = "1024";

/// The shared library `file` as the compiler finds it; fails naming the
/// Debian package `package` if it is not installed.
fn allocator_library(file: &str, package: &str) -> PathBuf {
    let out = run(Command::new("gcc").arg(format!("-print-file-name={file}")));
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        path.is_absolute() && path.exists(),
        "{file} not found: install the Debian package {package} (apt-get install {package})"
    );
    path
}

/// How the program gets its allocator.
enum Mode<'a> {
    /// Linked with these compiler flags.
    Linked(&'a [&'a str]),
    /// Built plain, the library preloaded.
    Preloaded(&'a Path),
}

/// One program built and run natively and under hpcrun-rs, with the
/// checks every allocator shares; returns the data view of its profile.
///
/// For the bump allocator and jemalloc the program also prints the bytes
/// its allocator counts at the end, which must be the same as natively:
/// nothing of the profiler's comes from the program's allocator.
/// (tcmalloc's count grows with the environment, which hpcrun-rs's
/// variables lengthen: its initialisation copies it with `setenv`.)
fn check(name: &str, alloc: &str, exe: &Path, preload: Option<&Path>) -> serde_json::Value {
    let dir = exe.parent().expect("program directory").to_path_buf();
    let count = if matches!(alloc, "bump" | "jemalloc") {
        "count"
    } else {
        "-"
    };
    let args = [alloc, PASSES, count];
    let with_env = |cmd: &mut Command| {
        if let Some(lib) = preload {
            cmd.env("LD_PRELOAD", lib);
        }
    };
    let mut native = Command::new(exe);
    native.args(args);
    with_env(&mut native);
    let native: Output = run(&mut native);
    let native_out = String::from_utf8_lossy(&native.stdout).into_owned();
    assert_eq!(
        native.status.code(),
        Some(0),
        "{name}: native run failed: {native_out}{}",
        String::from_utf8_lossy(&native.stderr)
    );
    assert!(
        native_out.contains(&format!(
            "served by {alloc}: hot=yes cold=yes table=yes grown=yes aligned=yes old_style=yes paged=yes"
        )),
        "{name}: natively, {alloc} does not serve:\n{native_out}"
    );

    let measurements = dir.join("measurements");
    let mut profiled = Command::new(tool("hpcrun-rs"));
    profiled
        .current_dir(&dir)
        .args(["-e", EVENT, "-o"])
        .arg(&measurements)
        .arg(exe)
        .args(args);
    with_env(&mut profiled);
    let out = run(&mut profiled);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        native_out,
        "{name}: stdout differs under the profiler; stderr:\n{stderr}"
    );
    assert_eq!(
        out.status.code(),
        native.status.code(),
        "{name}: exit status differs; stderr:\n{stderr}"
    );
    assert!(
        !stderr.contains("malloc is defined in"),
        "{name}: blocks the hooks see are told as unseen:\n{stderr}"
    );
    merge_and_export(&dir, &measurements)
}

/// The heap object named `name` in a data view.
fn heap_object<'a>(data: &'a serde_json::Value, name: &str, what: &str) -> &'a serde_json::Value {
    data["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .find(|o| o["kind"] == "heap" && o["name"] == name)
        .unwrap_or_else(|| panic!("{what}: no heap object {name} in {data:#}"))
}

/// `hot` and `cold` are 8 MiB heap objects; `hot`, read 64 times as
/// often, has at least 5 times `cold`'s samples (20 to 45 times here:
/// mem:soft gives the loop that reads `cold` more than its share), and
/// the two together at least half of all samples.
fn assert_arrays_attributed(data: &serde_json::Value, what: &str) {
    let hot = heap_object(data, "hot", what);
    let cold = heap_object(data, "cold", what);
    for o in [hot, cold] {
        assert_eq!(o["bytes"], 8 << 20, "{what}: {o:#}");
    }
    let all: u64 = data["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(samples)
        .sum();
    let (h, c) = (samples(hot), samples(cold));
    eprintln!("{what}: hot {h}, cold {c} of {all} samples");
    assert!(all >= 200, "{what}: too few samples: {all}");
    assert!(h >= 5 * c, "{what}: hot {h} vs cold {c}");
    assert!(2 * (h + c) >= all, "{what}: hot {h} + cold {c} of {all}");
}

/// Builds alloc_arrays for `mode` into `dir/<name>` and checks it.
fn arrays_with(name: &str, alloc: &str, mode: Mode<'_>) {
    let dir = scratch(&format!("allocators-{name}"));
    let (exe, preload) = match mode {
        Mode::Linked(flags) => (compile_test_program("alloc_arrays.c", &dir, flags), None),
        Mode::Preloaded(lib) => (compile_test_program("alloc_arrays.c", &dir, &[]), Some(lib)),
    };
    let data = check(name, alloc, &exe, preload);
    assert_arrays_attributed(&data, name);
}

#[test]
fn jemalloc_serves_a_program_linked_with_it_or_preloaded() {
    let lib = allocator_library("libjemalloc.so.2", "libjemalloc-dev");
    arrays_with(
        "jemalloc-linked",
        "jemalloc",
        Mode::Linked(&["-Wl,--no-as-needed", "-ljemalloc"]),
    );
    arrays_with("jemalloc-preloaded", "jemalloc", Mode::Preloaded(&lib));
}

#[test]
fn tcmalloc_serves_a_program_linked_with_it_or_preloaded() {
    let lib = allocator_library("libtcmalloc_minimal.so.4", "libgoogle-perftools-dev");
    allocator_library("libtcmalloc.so.4", "libgoogle-perftools-dev");
    arrays_with(
        "tcmalloc-linked",
        "tcmalloc",
        Mode::Linked(&["-Wl,--no-as-needed", "-ltcmalloc"]),
    );
    arrays_with("tcmalloc-preloaded", "tcmalloc", Mode::Preloaded(&lib));
}

#[test]
fn mimalloc_serves_a_program_linked_with_it_or_preloaded() {
    let lib = allocator_library("libmimalloc.so.2", "libmimalloc-dev");
    arrays_with(
        "mimalloc-linked",
        "mimalloc",
        Mode::Linked(&["-Wl,--no-as-needed", "-lmimalloc"]),
    );
    arrays_with("mimalloc-preloaded", "mimalloc", Mode::Preloaded(&lib));
}

/// A bump allocator in a library the program links: it serves every
/// block, and its counter says exactly as many bytes as natively (the
/// profiler's own memory never comes from it). Its calloc and realloc
/// call its malloc through symbol lookup, so through the hooks.
#[test]
fn a_malloc_family_of_the_programs_own_serves_it() {
    let dir = scratch("allocators-own-library");
    compile_test_program("bump_alloc.c", &dir, &["-shared", "-fPIC"]);
    let lib_dir = dir.to_string_lossy().into_owned();
    let exe = compile_test_program(
        "alloc_arrays.c",
        &dir,
        &[
            &format!("-L{lib_dir}"),
            &format!("-Wl,-rpath,{lib_dir}"),
            "-Wl,--no-as-needed",
            "-lbump_alloc",
        ],
    );
    let data = check("own-library", "bump", &exe, None);
    assert_arrays_attributed(&data, "own-library");
    // Its calloc calls malloc through the hooks: the block is still one
    // allocation at the program's call. (The export lists the objects
    // that have samples: `grown`, realloc's block, may have none.)
    let cold = heap_object(&data, "cold", "own-library");
    assert_eq!(cold["allocations"], 1, "{cold:#}");
}

/// A non-PIE executable that takes malloc's address holds an entry for it
/// (the "canonical PLT entry", an undefined `malloc` with an address) that
/// the loader's lookup finds first; calls through it still reach glibc
/// through the hooks: its arrays are named and hpcrun-rs does not say
/// that its blocks are unseen.
#[test]
fn a_non_pie_program_that_takes_mallocs_address_is_seen() {
    let address = root().join("tests/programs/malloc_address.c");
    let address = address.to_str().expect("source path");
    arrays_with(
        "non-pie",
        "glibc",
        Mode::Linked(&["-fno-pie", "-no-pie", address]),
    );
}

/// The same bump allocator defined in the executable comes before the
/// profiler's hooks in symbol lookup order: it still serves the program
/// exactly as natively, and hpcrun-rs says that its blocks are not seen.
#[test]
fn a_malloc_family_in_the_executable_serves_it_and_is_told() {
    let dir = scratch("allocators-own-executable");
    let bump = root().join("tests/programs/bump_alloc.c");
    let exe = compile_test_program(
        "alloc_arrays.c",
        &dir,
        &["-rdynamic", bump.to_str().expect("source path")],
    );
    let native = run(Command::new(&exe).args(["bump", "64"]));
    let native_out = ok_stdout(&native, "native run");
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", EVENT, "-o"])
        .arg(&measurements)
        .arg(&exe)
        .args(["bump", "64"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        ok_stdout(&out, "hpcrun-rs"),
        native_out,
        "stdout differs under the profiler; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("malloc is defined in") && stderr.contains("its heap blocks are not seen"),
        "{stderr}"
    );
}

/// Runs `exe ARGS` natively and under hpcrun-rs in `dir`: asserts the
/// same stdout and exit status, and returns the native stdout and the
/// data view of the profile.
fn same_run(name: &str, dir: &Path, exe: &Path, args: &[&str]) -> (String, serde_json::Value) {
    let native = run(Command::new(exe).args(args));
    let native_out = String::from_utf8_lossy(&native.stdout).into_owned();
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .current_dir(dir)
        .args(["-e", EVENT, "-o"])
        .arg(&measurements)
        .arg(exe)
        .args(args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        native_out,
        "{name}: stdout differs under the profiler; stderr:\n{stderr}"
    );
    assert_eq!(
        out.status.code(),
        native.status.code(),
        "{name}: exit status differs; stderr:\n{stderr}"
    );
    (native_out, merge_and_export(dir, &measurements))
}

/// new_arrays.cpp built with `flags`, its arrays served by `alloc`
/// (natively and measured): `hot` and `cold` are named heap objects of
/// 8 MiB, each one allocation at the program's `new`, `hot` taking most
/// of the samples.
fn new_arrays_with(name: &str, alloc: &str, flags: &[&str]) {
    let dir = scratch(&format!("allocators-{name}"));
    let exe = compile_test_program("new_arrays.cpp", &dir, flags);
    let (native_out, data) = same_run(name, &dir, &exe, &[alloc, "512"]);
    assert!(
        native_out.contains(&format!(
            "served by {alloc}: hot=yes cold=yes quiet=yes lined=yes"
        )),
        "{name}: natively, {alloc} does not serve:\n{native_out}"
    );
    assert_arrays_attributed(&data, name);
    for array in ["hot", "cold"] {
        let o = heap_object(&data, array, name);
        assert_eq!(o["allocations"], 1, "{name}: {o:#}");
    }
}

#[test]
fn cxx_new_of_tcmalloc_and_mimalloc_serves_named_arrays() {
    allocator_library("libtcmalloc.so.4", "libgoogle-perftools-dev");
    allocator_library("libmimalloc.so.2", "libmimalloc-dev");
    new_arrays_with(
        "new-tcmalloc",
        "tcmalloc",
        &["-Wl,--no-as-needed", "-ltcmalloc"],
    );
    new_arrays_with(
        "new-mimalloc",
        "mimalloc",
        &["-Wl,--no-as-needed", "-lmimalloc"],
    );
    // libstdc++'s `new` calls `malloc`: still one record per block.
    new_arrays_with("new-libstdcxx", "glibc", &[]);
}

/// A `new` too large to serve throws `std::bad_alloc` through the
/// profiler's hook three times; the program catches each, allocates
/// again and exits 3, as natively; the block it allocates after the
/// exceptions is a named heap object (the hook's state was restored).
#[test]
fn a_throwing_new_is_caught_by_the_program_as_natively() {
    let dir = scratch("allocators-new-throws");
    let exe = compile_test_program("new_arrays.cpp", &dir, &[]);
    let (native_out, data) = same_run("throw", &dir, &exe, &["throw"]);
    assert!(native_out.starts_with("caught 3 bad_alloc"), "{native_out}");
    let after = heap_object(&data, "after", "throw");
    assert_eq!(after["bytes"], 8 << 20, "{after:#}");
    assert_eq!(after["allocations"], 1, "{after:#}");
}
