//! Attribution through the real pipeline: the page-fault source
//! (first-touch threads, per-thread values, equal totals in the code and
//! data trees), NUMA locality on this one-node machine, a program whose
//! own page faults would feed back into the sampler, the profiler's own
//! first touches while it reads a large symbol table, and call paths that
//! cannot be unwound to their root.

use std::process::Command;

use pipeline_tests::*;

fn object<'a>(export: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    export["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no object {name} in {export:#}"))
}

fn metric(v: &serde_json::Value, name: &str) -> u64 {
    v["metrics"][name].as_u64().unwrap_or(0)
}

/// Arrays aligned to 2 MiB and advised to be transparent huge pages: a
/// huge page's one fault places all its 512 pages, and each array's first
/// touch still counts its 8,192 pages of 4 KiB, with or without huge pages
/// on the machine (the fault's sample reports the size of the page it
/// mapped). Where the kernel gave huge pages, the faults are fewer.
#[test]
fn first_touch_counts_the_pages_a_huge_page_fault_places() {
    let dir = scratch("first-touch-huge");
    let exe = compile_test_program("first_touch_threads.c", &dir, &["-pthread"]);
    let native = ok_stdout(
        &run(Command::new(&exe).arg("huge")),
        "native first_touch_threads huge",
    );
    let p = profile(&dir, "mem:soft,page-faults@1", &exe, &["huge"]);
    assert_eq!(
        p.program_stdout, native,
        "output changed under the profiler"
    );
    let data = export_json(&p.db, "data");
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    for (name, thread) in [("by_worker", "thread 1"), ("by_main", "thread 0")] {
        let o = object(&data, name);
        let pages = metric(o, "first_touch");
        let faults = metric(o, "page_faults");
        eprintln!("{name}: {pages} pages first touched in {faults} faults (THP: {thp})");
        assert_eq!(pages, 8192, "{name}: {pages} pages\n{o:#}");
        assert!((16..=8192).contains(&faults), "{name}: {faults} faults");
        assert_eq!(o["first_touch_thread"], thread, "{o:#}");
        assert!(o["first_touch_share"].as_f64().unwrap() > 0.99, "{o:#}");
    }
}

/// Two static arrays of 1 MiB share one 2 MiB window advised to be a
/// transparent huge page; thread 1 touches the left one first, thread 0
/// the right one after. Each counts its own 256 pages whether the kernel
/// gave a huge page or not. With a huge page, thread 1's one fault placed
/// both, so the right array's pages are thread 1's first touches.
#[test]
fn a_huge_page_s_first_touch_is_split_among_the_objects_it_holds() {
    let dir = scratch("first-touch-huge-neighbours");
    let exe = compile_test_program(
        "huge_page_neighbours.c",
        &dir,
        &["-pthread", "-fno-toplevel-reorder"],
    );
    let native = ok_stdout(&run(&mut Command::new(&exe)), "native huge_page_neighbours");
    assert!(native.starts_with("adjacent\n"), "{native}");
    let p = profile(&dir, "mem:soft,page-faults@1", &exe, &[]);
    assert_eq!(
        p.program_stdout, native,
        "output changed under the profiler"
    );
    let data = export_json(&p.db, "data");
    let (left, right) = (object(&data, "left"), object(&data, "right"));
    let faults = metric(left, "page_faults");
    let huge = faults < 128;
    eprintln!("left: first touched in {faults} faults (huge page: {huge})");
    for (name, o) in [("left", left), ("right", right)] {
        let pages = metric(o, "first_touch");
        assert!((250..=256).contains(&pages), "{name}: {pages} pages\n{o:#}");
    }
    assert_eq!(left["first_touch_thread"], "thread 1", "{left:#}");
    let right_thread = if huge { "thread 1" } else { "thread 0" };
    assert_eq!(right["first_touch_thread"], right_thread, "{right:#}");
}

/// A 2 MiB block advised to be a huge page is written, its second half
/// dropped and written again: its 512 pages are first touched once,
/// whether the first pass took one huge-page fault (then split by the
/// drop) or 512 small ones.
#[test]
fn a_split_huge_page_s_pages_are_not_first_touched_again() {
    let dir = scratch("first-touch-huge-refault");
    let exe = compile_test_program("huge_page_refault.c", &dir, &[]);
    let native = ok_stdout(&run(&mut Command::new(&exe)), "native huge_page_refault");
    let p = profile(&dir, "mem:soft,page-faults@1", &exe, &[]);
    assert_eq!(
        p.program_stdout, native,
        "output changed under the profiler"
    );
    let data = export_json(&p.db, "data");
    let o = object(&data, "region");
    let (pages, faults) = (metric(o, "first_touch"), metric(o, "page_faults"));
    eprintln!("region: {pages} pages first touched, {faults} faults");
    assert_eq!(pages, 512, "{o:#}");
    // The second pass faulted its 256 pages in again, each one sampled
    // (or counted as dropped): without the huge page's window kept, each
    // would count as a first touch again. The first pass took one fault
    // (a huge page) or 512.
    let dropped: u64 = data["stats"]["dropped"]
        .as_object()
        .map(|d| {
            d.iter()
                .filter(|(why, _)| *why != "in profiler code")
                .filter_map(|(_, n)| n.as_u64())
                .sum()
        })
        .unwrap_or(0);
    assert!(
        faults + dropped >= 257 && faults <= 768,
        "{faults} faults, {dropped} dropped\n{o:#}\n{}",
        data["stats"]
    );
}

#[test]
fn first_touch_threads_match_the_program() {
    let dir = scratch("first-touch-threads");
    let exe = compile_test_program("first_touch_threads.c", &dir, &["-pthread"]);
    let native = ok_stdout(&run(&mut Command::new(&exe)), "native first_touch_threads");
    let p = profile(&dir, "mem:soft,page-faults@1", &exe, &[]);
    assert_eq!(
        p.program_stdout, native,
        "output changed under the profiler"
    );
    let data = export_json(&p.db, "data");

    // 32 MiB each: 8,192 pages, every one first touched by the thread the
    // program says.
    for (name, thread) in [("by_worker", "thread 1"), ("by_main", "thread 0")] {
        let o = object(&data, name);
        let pages = metric(o, "first_touch");
        assert!(
            (8150..=8200).contains(&pages),
            "{name}: {pages} pages\n{o:#}"
        );
        assert_eq!(o["first_touch_thread"], thread, "{o:#}");
        assert!(o["first_touch_share"].as_f64().unwrap() > 0.99, "{o:#}");
        // Per-thread values: the toucher has all the object's faults.
        let toucher = o["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["thread"] == thread)
            .unwrap();
        assert_eq!(metric(toucher, "page_faults"), metric(o, "page_faults"));
    }

    // The code tree's totals equal the data trees' (every fault of the
    // program is attributed to an object, possibly <unknown address>).
    let code = export_json(&p.db, "code");
    for m in ["page_faults", "first_touch", "samples"] {
        let in_code: u64 = code["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| metric(f, m))
            .sum();
        let in_data: u64 = data["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| metric(o, m))
            .sum();
        assert_eq!(in_code, in_data, "{m}: code {in_code} vs data {in_data}");
    }
    assert!(data["stats"]["dropped"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| k == "in profiler code"));
}

#[test]
fn numa_locality_on_a_one_node_machine_is_all_local() {
    let dir = scratch("numa-one-node");
    let exe = compile_c("abc/abc.c", &dir, &[]);
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", "mem:soft@200000", "--numa", "-o"])
        .arg(&measurements)
        .arg(&exe));
    ok_stdout(&out, "hpcrun-rs --numa");
    let data = merge_and_export(&dir, &measurements);
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("node"))
                .count()
        })
        .unwrap_or(1);
    let c = object(&data, "C");
    let accesses = metric(c, "samples") + metric(c, "store_samples");
    assert!(accesses > 100, "{c:#}");
    if nodes == 1 {
        assert_eq!(metric(c, "numa_local"), accesses, "{c:#}");
        assert_eq!(metric(c, "numa_remote"), 0, "{c:#}");
    } else {
        assert!(metric(c, "numa_local") + metric(c, "numa_remote") <= accesses);
    }
}

#[test]
fn a_program_that_reads_its_own_perf_ring_is_not_livelocked() {
    // perf record writes the control page of its own ring after every
    // wakeup; were each write a sampled fault, each fault would signal us
    // and each signal wake perf again. The run must end as natively: the
    // minor-fault event the sampler uses does not count those writes
    // (the kernel counts a fault once it mapped a page), and should a loop
    // start anyway, the sampler notices (a thousand faults on one page in
    // a row) and stops that thread's page-fault sampling.
    if !std::path::Path::new("/usr/bin/perf").exists() {
        eprintln!("skipped: /usr/bin/perf is not installed (Debian package linux-perf)");
        return;
    }
    let dir = scratch("perf-feedback");
    let measurements = dir.join("measurements");
    // (The tools are built, if need be, before the clock starts.)
    let hpcrun = tool("hpcrun-rs");
    let start = std::time::Instant::now();
    let out = run(Command::new(hpcrun)
        .current_dir(&dir)
        .args(["-e", "page-faults@1", "-o"])
        .arg(&measurements)
        .args(["perf", "record", "-q", "-o"])
        .arg(dir.join("perf.data"))
        .arg("true"));
    assert!(out.status.success(), "{out:?}");
    // Generous: it takes about a second; a livelock never ends.
    assert!(start.elapsed().as_secs() < 120);
    assert!(!read_profiles(&measurements).is_empty());
}

/// A thousand faults in a row on one page stop that thread's page-fault
/// sampling (a loop the sampler's own signals could feed), and the
/// program runs on unharmed.
#[test]
fn faults_on_one_page_again_and_again_stop_page_fault_sampling() {
    let dir = scratch("same-page-faults");
    let exe = compile_test_program("same_page_faults.c", &dir, &[]);
    let native = ok_stdout(&run(&mut Command::new(&exe)), "native same_page_faults");
    assert_eq!(native, "3000\n");
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", "page-faults@1", "-o"])
        .arg(&measurements)
        .arg(&exe));
    assert_eq!(ok_stdout(&out, "hpcrun-rs same_page_faults"), native);
    let stopped = read_profiles(&measurements).iter().any(|p| {
        p.stats
            .dropped
            .contains_key("page-fault sampling stopped (fault feedback loop)")
    });
    assert!(stopped, "sampling went on: {out:?}");
}

/// The symbols of a large program are read at its first sample, in the
/// handler: a few thousand pages of the profiler's own. Those faults are
/// not sampled: sampled, they overflowed the thread's page-fault ring
/// (about 800 samples) and left a signal queued for each, which found the
/// ring drained: a thousand of them stopped the thread's page-fault
/// sampling as a feedback loop, before the program touched its data.
#[test]
fn reading_a_large_symbol_table_leaves_page_fault_sampling_on() {
    let dir = scratch("many-symbols");
    let exe = compile_test_program("many_symbols.c", &dir, &[]);
    let p = profile_same_output(&dir, "page-faults@1", &exe, &[]);
    for t in read_profiles(&p.measurements) {
        for cause in [
            "page-fault sampling stopped (fault feedback loop)",
            "lost in the perf ring",
        ] {
            assert!(
                !t.stats.dropped.contains_key(cause),
                "{cause}: {:?}",
                t.stats.dropped
            );
        }
    }
    let data = export_json(&p.db, "data");
    let table = object(&data, "table");
    assert_eq!(metric(table, "first_touch"), 4096, "{table:#}");
    assert_eq!(metric(table, "page_faults"), 4096, "{table:#}");
}

/// Thousands of faults while every signal is blocked (the raw system
/// call): the sampler's ring holds some and loses the rest, and a signal
/// waits for each. When the mask is lifted the first signal drains the
/// ring; the others find it empty, which is no feedback loop: sampling
/// goes on, every fault of the next array is sampled, and each of the
/// burst's faults is counted, sampled or lost.
#[test]
fn a_burst_of_faults_while_signals_are_blocked_leaves_page_fault_sampling_on() {
    let dir = scratch("blocked-fault-burst");
    let exe = compile_test_program("blocked_fault_burst.c", &dir, &[]);
    let p = profile_same_output(&dir, "page-faults@1", &exe, &[]);
    let mut lost = 0;
    for t in read_profiles(&p.measurements) {
        let stopped = "page-fault sampling stopped (fault feedback loop)";
        assert!(
            !t.stats.dropped.contains_key(stopped),
            "{:?}",
            t.stats.dropped
        );
        lost += t
            .stats
            .dropped
            .get("lost in the perf ring")
            .copied()
            .unwrap_or(0);
    }
    let data = export_json(&p.db, "data");
    let after = object(&data, "after");
    assert_eq!(metric(after, "first_touch"), 4096, "{after:#}");
    let burst = object(&data, "burst");
    let sampled = metric(burst, "page_faults");
    assert!(sampled > 0 && sampled < 8192, "{burst:#}");
    // (The lost count also holds the few other faults of the window: of
    // the stack, and the profiler's own before it drained the ring.)
    assert!(sampled + lost >= 8192, "{burst:#}\nlost {lost}");
}

#[test]
fn a_thread_that_ends_right_after_a_fault_burst_has_every_fault_counted() {
    // The thread's handler never runs (every signal blocked to its end):
    // nothing reads its ring, and no record after the ring filled up
    // tells the kernel's loss. The event's own count still does.
    let dir = scratch("fault-burst-at-thread-end");
    let exe = compile_test_program("fault_burst_at_thread_end.c", &dir, &["-pthread"]);
    let p = profile_same_output(&dir, "page-faults@1", &exe, &[]);
    let profiles = read_profiles(&p.measurements);
    let thread = profiles
        .iter()
        .find(|t| t.thread.index == 1)
        .expect("the burst thread's profile");
    let dropped = |why: &str| thread.stats.dropped.get(why).copied().unwrap_or(0);
    let never_read = dropped("counted by the kernel, never read");
    let counted = thread.stats.page_faults + dropped("lost in the perf ring") + never_read;
    // (Besides the 4,096, the thread's other faults: its stack, its TLS.)
    assert!(
        (4096..4096 + 512).contains(&counted),
        "{} handled, {:?}",
        thread.stats.page_faults,
        thread.stats.dropped
    );
    assert!(
        never_read >= 4096 - thread.stats.page_faults,
        "{:?}",
        thread.stats.dropped
    );
}

#[test]
fn paths_that_cannot_be_unwound_hang_below_partial_unwind() {
    // The hot loop runs on a coroutine stack in the heap: the unwinder reads
    // only the thread's stack, so its paths stop early.
    let dir = scratch("partial-unwind");
    let exe = compile_test_program("coroutine.c", &dir, &[]);
    let native = ok_stdout(&run(&mut Command::new(&exe)), "native coroutine");
    let p = profile(&dir, "mem:soft@100000", &exe, &[]);
    assert_eq!(p.program_stdout, native);
    let partial: u64 = read_profiles(&p.measurements)
        .iter()
        .map(|t| t.stats.partial_unwinds)
        .sum();
    assert!(partial > 0, "no partial unwind counted");

    let bytes = std::fs::read(p.db.join("profile.db")).unwrap();
    let db = formats::database::Database::from_bytes(&bytes).unwrap();
    let inc = db.code.inclusive(db.info.metrics.len());
    let name = |n: &formats::database::TreeNode| match n.kind {
        formats::database::NodeKind::Frame(f) => db.frames[f as usize].function.as_str(),
        _ => "",
    };
    let marker = db
        .code
        .nodes
        .iter()
        .position(|n| n.parent == 0 && name(n) == "<partial unwind>")
        .expect("a <partial unwind> child of the code root");
    let total = inc[0][0];
    assert!(
        inc[marker][0] * 10 >= total * 9,
        "{} of {total}",
        inc[marker][0]
    );
    // sweep is right below it, and main is not (the path stopped).
    let below: Vec<&str> = db
        .code
        .nodes
        .iter()
        .filter(|n| n.parent as usize == marker)
        .map(name)
        .collect();
    assert!(below.contains(&"sweep"), "{below:?}");
    assert!(!below.contains(&"main"), "{below:?}");
}
