//! Allocation sites outside allocator wrappers: examples/wrappers allocates
//! five arrays through `my_alloc` -> `xcalloc` -> `calloc` from five call
//! sites in three functions. With and without debug information, every
//! object's site is the call in the application's own code (asserted
//! exactly), never a wrapper or libc; with `-g` the objects are named after
//! the variables; `--alloc-wrapper` moves sites out of a function the user
//! names. A library call's own buffers (glibc's `qsort`) are named after
//! the call, and small blocks the program allocates itself are an object
//! of their site, not `<small heap objects>`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use pipeline_tests::*;

const EVENT: &str = "mem:soft@100000";
const SRC: &str = "wrappers/wrappers.c";
const ROUNDS: &str = "40";

/// Every heap object's name and site (function, line, offset).
type Site = (String, Option<u64>, Option<u64>);

fn site_list(export: &serde_json::Value) -> Vec<(String, Site)> {
    export["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter(|o| o["kind"] == "heap" && !o["alloc_path"].as_array().unwrap().is_empty())
        .map(|o| {
            let s = &o["alloc_site"];
            assert!(s.is_object(), "no alloc_site in {o:#}");
            (
                o["name"].as_str().unwrap().to_string(),
                (
                    s["function"].as_str().unwrap().to_string(),
                    s["line"].as_u64(),
                    s["offset"].as_u64(),
                ),
            )
        })
        .collect()
}

/// [`site_list`] by name (names must be distinct).
fn sites(export: &serde_json::Value) -> BTreeMap<String, Site> {
    let list = site_list(export);
    let map: BTreeMap<String, Site> = list.iter().cloned().collect();
    assert_eq!(map.len(), list.len(), "duplicate names: {list:#?}");
    map
}

fn run_and_export(dir: &Path, exe: &Path, extra_merge: &[&str]) -> serde_json::Value {
    let native = ok_stdout(&run(Command::new(exe).arg(ROUNDS)), "native wrappers");
    let (out, measurements) = hpcrun(dir, EVENT, exe, &[ROUNDS]);
    assert_eq!(ok_stdout(&out, "hpcrun-rs"), native);
    let db = dir.join("db");
    let merged = run(Command::new(tool("hpcprof-rs"))
        .arg("-o")
        .arg(&db)
        .args(extra_merge)
        .arg(&measurements));
    ok_stdout(&merged, "hpcprof-rs");
    export_json(&db, "data")
}

#[test]
fn with_debug_info_sites_and_names_are_the_callers_lines() {
    let dir = scratch("wrappers-g");
    let exe = compile_c(SRC, &dir, &[]);
    let export = run_and_export(&dir, &exe, &[]);
    let line = |needle| Some(line_of(SRC, needle));
    let expected: BTreeMap<String, (String, Option<u64>)> = [
        ("pressure", "main", line("double *pressure = my_alloc(N);")),
        ("velocity", "main", line("double *velocity = my_alloc(N);")),
        ("g.density", "init_grid", line("g->density = my_alloc(N);")),
        ("g.energy", "init_grid", line("g->energy = my_alloc(N);")),
        ("halo", "main", line("double *halo = make_buffer();")),
    ]
    .into_iter()
    .map(|(n, f, l)| (n.to_string(), (f.to_string(), l)))
    .collect();
    let got: BTreeMap<String, (String, Option<u64>)> = sites(&export)
        .into_iter()
        .map(|(n, (f, l, _))| (n, (f, l)))
        .collect();
    assert_eq!(got, expected, "{export:#}");
    // The report's site column names the same lines.
    let out = run(Command::new(tool("hpcview-tui"))
        .arg(dir.join("db"))
        .args(["--report", "--view", "data", "--top", "10"]));
    let text = ok_stdout(&out, "hpcview-tui --report");
    let row = text
        .lines()
        .find(|l| l.contains(" halo "))
        .unwrap_or_else(|| panic!("no halo row:\n{text}"));
    assert!(
        row.contains(&format!(
            "main {}",
            root().join("examples").join(SRC).display()
        )) || row.contains(&format!("wrappers.c:{}", expected["halo"].1.unwrap())),
        "{row}"
    );
    assert!(
        !text.contains("xcalloc") && !text.contains("my_alloc"),
        "{text}"
    );
}

/// Return-address offsets of the calls of `callee` in each function of
/// `exe`, from objdump: the sites a profiler must report without debug
/// information.
fn call_sites(exe: &Path, callee: &str) -> BTreeSet<(String, u64)> {
    let out = run(Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(exe));
    let text = ok_stdout(&out, "objdump");
    let mut sites = BTreeSet::new();
    let mut function: Option<(String, u64)> = None;
    let mut pending_call = false;
    for l in text.lines() {
        // `0000000000001310 <init_grid>:`
        if let Some((addr, rest)) = l.split_once(" <") {
            if let (Ok(a), Some(name)) = (
                u64::from_str_radix(addr.trim(), 16),
                rest.strip_suffix(">:"),
            ) {
                function = Some((name.to_string(), a));
                pending_call = false;
                continue;
            }
        }
        // `    1324:	call   1300 <my_alloc>`
        let Some((addr, insn)) = l.trim_start().split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        if pending_call {
            if let Some((name, start)) = &function {
                sites.insert((name.clone(), addr - start));
            }
            pending_call = false;
        }
        if insn.contains("call") && insn.contains(&format!("<{callee}>")) {
            pending_call = true;
        }
    }
    sites
}

#[test]
fn without_debug_info_sites_are_caller_offsets() {
    if !have_tool("objdump", "binutils") {
        return;
    }
    let dir = scratch("wrappers-nog");
    let exe = compile_c(SRC, &dir, &["-g0"]);
    let export = run_and_export(&dir, &exe, &[]);
    let expected = call_sites(&exe, "my_alloc");
    assert_eq!(expected.len(), 5, "objdump found {expected:?}");
    let got = sites(&export);
    let got_sites: BTreeSet<(String, u64)> = got
        .values()
        .map(|(f, line, off)| {
            assert_eq!(*line, None);
            (f.clone(), off.expect("an offset without line information"))
        })
        .collect();
    assert_eq!(got_sites, expected, "{export:#}");
    // Named after the site: `heap@init_grid+0x1b`.
    for (name, (f, _, off)) in &got {
        assert_eq!(*name, format!("heap@{f}+0x{:x}", off.unwrap()));
    }
}

#[test]
fn alloc_wrapper_moves_sites_to_the_callers() {
    let dir = scratch("wrappers-user");
    let exe = compile_c(SRC, &dir, &[]);
    let export = run_and_export(&dir, &exe, &["--alloc-wrapper", "init_*"]);
    let got = site_list(&export);
    let call = line_of(SRC, "init_grid(&g);");
    // Both grid arrays now sit at main's call of init_grid; the other
    // three are unchanged.
    let at_call: Vec<&String> = got
        .iter()
        .filter(|(_, (f, l, _))| f == "main" && *l == Some(call))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(at_call.len(), 2, "{got:#?}");
    assert_eq!(got.len(), 5, "{got:#?}");
    let named: BTreeSet<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        named.contains("pressure") && named.contains("halo"),
        "{got:#?}"
    );
    assert!(got.iter().all(|(_, (f, _, _))| f == "main"), "{got:#?}");
    // A bad pattern is refused, naming the option.
    let bad = run(Command::new(tool("hpcprof-rs"))
        .args(["-o"])
        .arg(dir.join("db2"))
        .args(["--alloc-wrapper", "[oops"])
        .arg(dir.join("measurements")));
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--alloc-wrapper"));
}

/// Line number (1-based) of the first line of `tests/programs/<name>`
/// containing `needle`.
fn program_line(name: &str, needle: &str) -> u64 {
    let text = std::fs::read_to_string(root().join("tests/programs").join(name)).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() as u64 + 1
}

fn objects(export: &serde_json::Value) -> &Vec<serde_json::Value> {
    export["objects"].as_array().expect("objects")
}

fn samples_of(o: &serde_json::Value) -> u64 {
    o["metrics"]["samples"].as_u64().unwrap_or(0)
}

/// tests/programs/qsort_buffer.c: glibc's qsort mallocs a buffer as large
/// as the array it sorts, 20 times from one call line. Those blocks are
/// one object named `qsort buffer (qsort_buffer.c:LINE)`, sited at the
/// call; `table` keeps its own name; nothing is named after the array
/// the call line sorts.
#[test]
fn qsort_buffers_are_named_after_the_call() {
    let dir = scratch("qsort-buffer");
    let exe = compile_test_program("qsort_buffer.c", &dir, &[]);
    let native = ok_stdout(&run(Command::new(&exe).arg("20")), "native qsort_buffer");
    let p = profile(&dir, EVENT, &exe, &["20"]);
    assert_eq!(p.program_stdout, native);
    let export = export_json(&p.db, "data");
    let call = program_line("qsort_buffer.c", "qsort(table,");
    let want = format!("qsort buffer (qsort_buffer.c:{call})");
    let all = objects(&export);
    let buffer = all
        .iter()
        .find(|o| o["name"] == want.as_str())
        .unwrap_or_else(|| panic!("no {want} in {export:#}"));
    assert_eq!(buffer["allocations"], 20, "{buffer:#}");
    assert_eq!(
        buffer["alloc_site"]["line"].as_u64(),
        Some(call),
        "{buffer:#}"
    );
    assert!(all.iter().any(|o| o["name"] == "table"), "{export:#}");
    // Every block allocated at the call line is the buffer.
    let at_call: Vec<&str> = all
        .iter()
        .filter(|o| o["alloc_site"]["line"].as_u64() == Some(call))
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(at_call, [want.as_str()], "{export:#}");
}

/// Rounds of 100,000 reads of small_tables.c and small_objects.cpp: about
/// 0.13 s of CPU time natively; 1,533-2,846 samples at 100 us per run
/// beside two busy loops at load 10-15 (at 100 rounds, about 300 alone and
/// 150-174 so loaded: the samples a run gets at a fixed period of its CPU
/// time fall on a loaded machine, so the work is what keeps them well above
/// the floor of 200).
const REPS: &str = "1000";

/// Profiles tests/programs/`program` (built with `flags` into `dir`) over
/// [`REPS`] rounds, checks it printed what it prints natively and got
/// more than 200 samples, and returns the object of its 64 small blocks
/// (read in a hot loop), after checking that they hold a large share of
/// the samples and `<small heap objects>` next to none.
fn profile_small_blocks(program: &str, dir: &str, flags: &[&str]) -> serde_json::Value {
    let dir = scratch(dir);
    let exe = compile_test_program(program, &dir, flags);
    let native = ok_stdout(&run(Command::new(&exe).arg(REPS)), program);
    let p = profile(&dir, EVENT, &exe, &[REPS]);
    assert_eq!(p.program_stdout, native);
    let export = export_json(&p.db, "data");
    let all = objects(&export);
    let total: u64 = all.iter().map(samples_of).sum();
    eprintln!("{program} {flags:?}: {total} samples");
    // Enough samples for the shares below.
    assert!(total > 200, "{total} samples");
    let blocks = all
        .iter()
        .find(|o| o["kind"] == "heap" && o["allocations"] == 64)
        .unwrap_or_else(|| panic!("no object of the 64 small blocks in {export:#}"));
    let small: u64 = all
        .iter()
        .filter(|o| o["name"] == "<small heap objects>")
        .map(samples_of)
        .sum();
    // The loop reads the blocks (and the array of pointers to them, one
    // small block of its own): the blocks hold a large share, the bucket
    // of untracked small blocks next to none.
    assert!(
        samples_of(blocks) * 4 >= total,
        "{} of {total}: {export:#}",
        samples_of(blocks)
    );
    assert!(
        small * 20 <= total,
        "<small heap objects> {small} of {total}"
    );
    (*blocks).clone()
}

/// tests/programs/small_tables.c: 64 rows of 128 bytes (under
/// `--min-bytes`) allocated by the program and read in a hot loop are one
/// object of their site with most of the samples, not `<small heap
/// objects>`: `t[i]` with `-g`, `heap@make_table+0x... (64 small blocks)`
/// without.
#[test]
fn small_blocks_of_the_program_are_named_by_site() {
    for (debug, flags) in [(true, &[][..]), (false, &["-g0"][..])] {
        let dir = if debug {
            "small-tables-g"
        } else {
            "small-tables-g0"
        };
        let rows = profile_small_blocks("small_tables.c", dir, flags);
        let name = rows["name"].as_str().unwrap();
        if debug {
            assert_eq!(name, "t[i]", "{rows:#}");
        } else {
            assert!(
                name.starts_with("heap@make_table+0x") && name.ends_with(" (64 small blocks)"),
                "{rows:#}"
            );
        }
    }
}

/// Small C++ objects the program makes with `new` (under `--min-bytes`,
/// allocated by the C++ library's `operator new` for the program) and
/// reads in a hot loop are one object of the program's site, not
/// `<small heap objects>`.
#[test]
fn small_objects_made_by_new_are_named_by_site() {
    let records = profile_small_blocks("small_objects.cpp", "small-objects-new", &[]);
    assert!(records["runtime"].is_null(), "{records:#}");
}
