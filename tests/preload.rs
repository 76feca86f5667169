//! The preload library inside real programs: exact allocation semantics,
//! tracking of every entry point, threads, fork and the allocation log.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use pipeline_tests::*;

/// 100 us: tests that assert "sampling went on" (`memory_samples > 10`)
/// get about 20 times more samples than that from their sweeps, instead of
/// about 10 at the default 2 ms (which flipped those assertions).
const EVENT: &str = "mem:soft@100000";

#[test]
fn allocation_entry_points_keep_glibc_semantics_and_are_tracked() {
    let dir = scratch("alloc-semantics");
    let exe = compile_test_program("alloc_semantics.c", &dir, &[]);
    let native = run(&mut Command::new(&exe));
    let native_out = ok_stdout(&native, "native alloc_semantics");
    assert!(native_out.starts_with("ok "), "{native_out}");
    let (profiled, measurements) = hpcrun_with(&dir, &["--alloc-log"], EVENT, &exe, &[]);
    assert_eq!(ok_stdout(&profiled, "profiled alloc_semantics"), native_out);

    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 1);
    let log = &profiles[0].allocations;
    let sizes: HashSet<u64> = log.iter().map(|a| a.size).collect();
    // malloc, calloc, realloc (twice), reallocarray, posix_memalign,
    // aligned_alloc, memalign, valloc, pvalloc, malloc again.
    for expected in [
        1 << 20,
        4096 * 4,
        2000,
        200000,
        4000,
        10000,
        4096,
        3000,
        5000,
        50000,
    ] {
        assert!(
            sizes.contains(&expected),
            "no tracked allocation of {expected} bytes in {log:#?}"
        );
    }
    // Blocks below --min-bytes (1024) have no log record: they are
    // tracked in the small-block map at their site (malloc(16) on the
    // line of malloc(1 << 20), its sibling in the file), counted there.
    assert!(log.iter().all(|a| a.size >= 1024), "{log:#?}");
    let stats = &profiles[0].stats;
    assert!(stats.small_blocks_peak >= 1, "{stats:?}");
    assert!(stats.untracked_blocks.is_empty(), "{stats:?}");
    assert!(
        profiles[0]
            .alloc_sites
            .iter()
            .any(|s| s.small && s.max_bytes == 16 && s.allocations == 1),
        "no small site of malloc(16) in {:#?}",
        profiles[0].alloc_sites
    );
    // Every block the program freed has a free time after its allocation.
    let big = log.iter().find(|a| a.size == 1 << 20).unwrap();
    assert!(big.free_unix_ns.is_some_and(|f| f >= big.alloc_unix_ns));
    // Each allocation names a site whose path reaches main.
    for a in log {
        assert!(!profiles[0].alloc_sites[a.site as usize].frames.is_empty());
    }
    // Every hook call counts (the 11 allocations above and their frees at
    // least), one in HOOK_TIME_EVERY is timed, the first one included.
    let hooks = &profiles[0].stats.hook_time;
    assert!(hooks.calls >= 20, "{hooks:?}");
    assert!(
        hooks.timed >= 1
            && hooks.timed <= hooks.calls.div_ceil(formats::measurement::HOOK_TIME_EVERY)
            && hooks.timed_ns > 0,
        "{hooks:?}"
    );
}

#[test]
fn dlopen_dlclose_loop_and_static_data_of_a_library() {
    let dir = scratch("dlopen");
    let lib = compile_test_program("libtable.c", &dir, &["-shared", "-fPIC"]);
    let exe = compile_test_program("dlopen_loop.c", &dir, &["-ldl"]);
    let lib_arg = lib.to_string_lossy().into_owned();
    let native = ok_stdout(
        &run(Command::new(&exe).args([&lib_arg, "300"])),
        "native dlopen_loop",
    );
    let (out, measurements) = hpcrun(&dir, "mem:soft@100000", &exe, &[&lib_arg, "300"]);
    assert_eq!(ok_stdout(&out, "profiled dlopen_loop"), native);
    let export = merge_and_export(&dir, &measurements);
    let objects = export["objects"].as_array().unwrap();
    // The library's static table is found by the module that owns the data.
    assert_eq!(objects[0]["kind"], "static", "{objects:#?}");
    assert_eq!(objects[0]["name"], "lib_table");
    assert!(objects[0]["share"].as_f64().unwrap() > 0.5, "{objects:#?}");
}

/// A second thread allocates and is sampled while the main thread loads and
/// unloads a library 300 times: its hooks and handlers read the unwinder
/// and the module snapshot that each dlopen/dlclose replaces (and frees once
/// no reader can hold it). The program's output must be its own, and both
/// threads' profiles must be written.
#[test]
fn dlopen_dlclose_loop_while_another_thread_allocates_and_is_sampled() {
    let dir = scratch("dlopen-threads");
    let lib = compile_test_program("libtable.c", &dir, &["-shared", "-fPIC"]);
    let exe = compile_test_program("dlopen_loop.c", &dir, &["-ldl", "-pthread"]);
    let lib_arg = lib.to_string_lossy().into_owned();
    let args = [lib_arg.as_str(), "300", "threads"];
    let native = ok_stdout(&run(Command::new(&exe).args(args)), "native dlopen_loop");
    assert!(native.starts_with("worker ok\n"), "{native}");
    let (out, measurements) = hpcrun(&dir, "mem:soft@100000", &exe, &args);
    assert_eq!(
        ok_stdout(&out, "profiled dlopen_loop with a thread"),
        native
    );
    let profiles = read_profiles(&measurements);
    assert_eq!(
        profiles.len(),
        2,
        "main thread and worker each write a profile"
    );
    let hooked: u64 = profiles.iter().map(|p| p.stats.hook_time.calls).sum();
    assert!(
        hooked >= 200,
        "the worker's allocations went through the hooks: {hooked}"
    );
}

#[test]
fn fork_without_exec_profiles_both_processes() {
    let dir = scratch("fork");
    let exe = compile_test_program("processes.c", &dir, &[]);
    let native = run(Command::new(&exe).arg("fork"));
    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &["fork"]);
    assert_eq!(out.stdout, native.stdout);
    assert_eq!(out.status.code(), Some(0));
    let profiles = read_profiles(&measurements);
    let pids: HashSet<u32> = profiles.iter().map(|p| p.process.pid).collect();
    assert_eq!(pids.len(), 2, "parent and child each write their own files");
    // Each process sampled the calloc'd array inherited across fork.
    for p in &profiles {
        assert!(
            p.stats.memory_samples > 10,
            "pid {} has {:?}",
            p.process.pid,
            p.stats
        );
        assert!(p.heap.nodes.len() > 1);
    }
}

/// 100 threads that return at once, then a fork: the parent's main
/// profile counts the threads that got no file (`short_lived_threads`),
/// the child's counts none of them (it inherited the parent's counter and
/// counted them again before the counter was reset at fork).
#[test]
fn a_forked_child_does_not_count_its_parents_short_lived_threads() {
    let dir = scratch("fork-short-lived");
    let exe = compile_test_program("fork_after_threads.c", &dir, &["-pthread"]);
    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &["100"]);
    assert_eq!(ok_stdout(&out, "fork_after_threads"), "threads 100\n");
    let profiles = read_profiles(&measurements);
    let pids: HashSet<u32> = profiles.iter().map(|p| p.process.pid).collect();
    assert_eq!(pids.len(), 2, "parent and child");
    let workers = profiles.iter().filter(|p| p.thread.index > 0).count() as u64;
    let counted: u64 = profiles.iter().map(|p| p.stats.short_lived_threads).sum();
    assert_eq!(
        workers + counted,
        100,
        "a file or a count for each thread, once: {:?}",
        profiles
            .iter()
            .map(|p| (p.process.pid, p.thread.index, p.stats.short_lived_threads))
            .collect::<Vec<_>>()
    );
}

#[test]
fn posix_spawn_and_exec_are_profiled_through_ld_preload() {
    let dir = scratch("spawn");
    let exe = compile_test_program("processes.c", &dir, &[]);
    let native = run(Command::new(&exe).arg("spawn"));
    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &["spawn"]);
    assert_eq!(out.stdout, native.stdout);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "spawned\nspawn exit 4\n"
    );
    let profiles = read_profiles(&measurements);
    let exes: HashSet<String> = profiles
        .iter()
        .map(|p| p.process.exe.rsplit('/').next().unwrap_or("").to_string())
        .collect();
    assert!(exes.contains("processes"), "{exes:?}");
    assert!(
        exes.iter().any(|e| e == "dash" || e == "bash" || e == "sh"),
        "the spawned shell wrote no profile: {exes:?}"
    );
}

#[test]
fn address_reused_after_free_goes_to_the_new_object() {
    let dir = scratch("reuse");
    let exe = compile_test_program("processes.c", &dir, &[]);
    let (out, measurements) = hpcrun(&dir, "mem:soft@100000", &exe, &["reuse"]);
    let stdout = ok_stdout(&out, "profiled reuse");
    assert!(
        stdout.starts_with("reuse same"),
        "glibc did not reuse the block: {stdout}"
    );
    // Without --alloc-log no allocation log is written, and the sites still
    // count their blocks.
    let profiles = read_profiles(&measurements);
    assert!(profiles.iter().all(|p| p.allocations.is_empty()));
    let counted: u64 = profiles
        .iter()
        .flat_map(|p| &p.alloc_sites)
        .map(|s| s.allocations)
        .sum();
    assert!(counted >= 1, "{counted} allocations counted at the sites");
    let export = merge_and_export(&dir, &measurements);
    let objects = export["objects"].as_array().unwrap();
    let by_function = |f: &str| {
        objects
            .iter()
            .filter(|o| {
                o["alloc_path"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|fr| fr["function"] == f)
            })
            .map(samples)
            .sum::<u64>()
    };
    let (first, second) = (by_function("make_first"), by_function("make_second"));
    assert!(
        second > 100,
        "second allocation got {second} samples: {objects:#?}"
    );
    assert!(
        first * 10 < second,
        "first (freed) {first} vs second {second}"
    );
}

#[test]
fn a_thousand_threads() {
    let dir = scratch("threads1000");
    let exe = compile_test_program("threads1000.c", &dir, &["-pthread"]);
    let (out, measurements) = hpcrun_with(&dir, &["--alloc-log"], EVENT, &exe, &[]);
    assert_eq!(ok_stdout(&out, "threads1000"), "threads ok 1000\n");
    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 1001, "one profile per thread plus main");
    let indices: HashSet<u32> = profiles.iter().map(|p| p.thread.index).collect();
    assert_eq!(indices.len(), 1001);
    // Every worker's 128 KiB buffer is in its allocation log.
    let workers_with_buffer = profiles
        .iter()
        .filter(|p| p.allocations.iter().any(|a| a.size == 1 << 17))
        .count();
    assert_eq!(workers_with_buffer, 1000);
}

#[test]
fn cxx_new_and_delete_reach_the_hooks() {
    let dir = scratch("cxx");
    let exe = compile_test_program("cxx_new.cpp", &dir, &[]);
    let native = run(&mut Command::new(&exe));
    let (out, measurements) = hpcrun_with(&dir, &["--alloc-log"], "mem:soft@100000", &exe, &[]);
    assert_eq!(out.stdout, native.stdout);
    let profiles = read_profiles(&measurements);
    let sizes: HashSet<u64> = profiles[0].allocations.iter().map(|a| a.size).collect();
    assert!(
        sizes.contains(&(8 << 22)),
        "std::vector's buffer not tracked: {sizes:?}"
    );
    assert!(
        sizes.contains(&(8 << 20)),
        "new double[] not tracked: {sizes:?}"
    );
    // delete and delete[] reach free (other blocks, e.g. libstdc++'s
    // emergency exception pool, live until exit).
    for size in [8 << 22, 8 << 20] {
        let a = profiles[0]
            .allocations
            .iter()
            .find(|a| a.size == size)
            .unwrap();
        assert!(
            a.free_unix_ns.is_some(),
            "block of {size} bytes never freed"
        );
    }
    let export = merge_and_export(&dir, &measurements);
    let top = &export["objects"][0];
    assert_eq!(top["kind"], "heap");
    assert!(top["bytes"].as_u64() == Some(8 << 22), "{top:#?}");
}

#[test]
fn fatal_signals_flush_profiles_and_keep_the_exit_status() {
    let dir = scratch("fatal");
    let exe = compile_test_program("fatal.c", &dir, &[]);
    for (mode, status) in [
        ("segv", 128 + 11),
        ("abort", 128 + 6),
        ("term", 128 + 15),
        ("ok", 0),
    ] {
        let sub = dir.join(mode);
        std::fs::create_dir_all(&sub).unwrap();
        let (out, measurements) = hpcrun(&sub, EVENT, &exe, &[mode]);
        assert_eq!(shell_status(&out.status), status, "{mode}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("sum "),
            "{mode}"
        );
        let profiles = read_profiles(&measurements);
        assert_eq!(profiles.len(), 1, "{mode}");
        // The anonymous mmap region is a tracked heap object with samples
        // (its site, referenced by the sampled heap tree, is in the file).
        let p = &profiles[0];
        assert!(
            p.alloc_sites.iter().any(|s| s.max_bytes == 8 << 24),
            "{mode}: mmap not tracked: {:?}",
            p.alloc_sites
        );
        assert!(p.stats.memory_samples > 10, "{mode}: {:?}", p.stats);
    }
}

#[test]
fn vfork_and_exec_work() {
    let dir = scratch("vfork");
    let exe = compile_test_program("processes.c", &dir, &[]);
    let native = run(Command::new(&exe).arg("vfork"));
    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &["vfork"]);
    assert_eq!(out.stdout, native.stdout);
    assert!(String::from_utf8_lossy(&out.stdout).contains("vfork exit 6"));
    let profiles = read_profiles(&measurements);
    let parent: Vec<_> = profiles
        .iter()
        .filter(|p| p.process.exe.ends_with("/processes"))
        .collect();
    assert_eq!(parent.len(), 1);
    // The parent kept sampling after its vfork child exec'ed.
    assert!(parent[0].stats.memory_samples > 10, "{:?}", parent[0].stats);
}

#[test]
fn process_ending_with_the_last_thread_writes_every_profile() {
    let dir = scratch("pthread-exit");
    let exe = compile_test_program("processes.c", &dir, &["-pthread"]);
    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &["pthread_exit"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("worker "));
    let profiles = read_profiles(&measurements);
    let indices: HashSet<u32> = profiles.iter().map(|p| p.thread.index).collect();
    assert_eq!(indices, HashSet::from([0, 1]));
    let worker = profiles.iter().find(|p| p.thread.index == 1).unwrap();
    assert!(worker.stats.memory_samples > 10, "{:?}", worker.stats);
}

#[test]
fn statically_linked_programs_are_refused_up_front() {
    let dir = scratch("static");
    let exe = compile_test_program("threads1000.c", &dir, &["-static", "-pthread"]);
    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("statically linked"), "{err}");
    assert!(out.stdout.is_empty(), "the program must not have run");
    assert!(!measurements.exists() || std::fs::read_dir(&measurements).unwrap().next().is_none());
}

#[test]
fn output_directory_is_absolute_so_chdir_does_not_scatter_files() {
    let dir = scratch("chdir");
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    let (out, measurements) = hpcrun(
        &dir,
        "mem:soft",
        Path::new("sh"),
        &["-c", "cd elsewhere && sh -c 'echo inner'"],
    );
    assert_eq!(ok_stdout(&out, "sh"), "inner\n");
    assert!(read_profiles(&measurements).len() >= 2);
    assert!(std::fs::read_dir(dir.join("elsewhere"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn the_signal_handler_never_allocates() {
    let dir = scratch("handler-alloc");
    let exe = compile_test_program("threads1000.c", &dir, &["-pthread"]);
    // A fast sampling rate and a malloc-heavy program: many samples land
    // while the program allocates.
    let (out, measurements) = hpcrun(&dir, "mem:soft@20000", &exe, &[]);
    ok_stdout(&out, "threads1000");
    let profiles = read_profiles(&measurements);
    let samples: u64 = profiles.iter().map(|p| p.stats.samples).sum();
    assert!(samples > 100, "too few samples to tell: {samples}");
    for p in &profiles {
        assert_eq!(p.stats.handler_allocations, 0, "the handler allocated");
    }
}

#[test]
fn programs_with_their_own_sigprof_timers_keep_working() {
    let dir = scratch("sigprof");
    let exe = compile_test_program("sigprof.c", &dir, &[]);
    let native = run(&mut Command::new(&exe));
    assert_eq!(
        ok_stdout(&native, "native sigprof"),
        "SIGPROF ticks seen: yes, SIGALRM seen: yes\n"
    );
    let (out, measurements) = hpcrun(&dir, EVENT, &exe, &[]);
    assert_eq!(out.stdout, native.stdout);
    assert_eq!(out.status.code(), Some(0));
    let profiles = read_profiles(&measurements);
    assert!(
        profiles[0].stats.memory_samples > 10,
        "{:?}",
        profiles[0].stats
    );
}

/// The hardware sample path (`mem:latency`/`mem:stores`: perf ring, record
/// decoding, `hardware_sample` attribution) without a PMU: the library is
/// given a software page-fault event dressed as an Intel PEBS store event
/// (software events accept the PEBS sample layout and leave WEIGHT and
/// DATA_SRC 0), so every first touch of a page is a "store sample" at the
/// faulting address. hpcrun-rs itself never picks this (it probes the PMU).
#[test]
fn hardware_sample_path_with_a_software_stand_in_event() {
    let dir = scratch("hw-path");
    let exe = compile_test_program("first_touch.c", &dir, &[]);
    let measurements = dir.join("measurements");
    std::fs::create_dir_all(&measurements).unwrap();
    let attr = "event=mem:stores,vendor=intel-pebs,pmu=software,type=1,config=0x2,config1=0x0,config2=0x0,config3=0x0,aux_leader=none,exclude_kernel=1,precise=0";
    let out = run(Command::new(&exe)
        .env("LD_PRELOAD", tools().join("libhpcrun_preload.so"))
        .env("HPCRUN_OUT", &measurements)
        .env("HPCRUN_EVENTS", "mem:stores@1")
        .env("HPCRUN_HW_ATTR", attr)
        .env("HPCRUN_RUN_ID", "hw-path"));
    assert_eq!(ok_stdout(&out, "first_touch"), "3\n");
    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 1);
    let p = &profiles[0];
    assert_eq!(p.events[0].name, "mem:stores");
    assert_eq!(p.events[0].unit, "events");
    assert!(p.stats.store_samples >= 1024 + 256, "{:?}", p.stats);
    assert_eq!(p.stats.memory_samples, 0);

    let data = merge_and_export(&dir, &measurements);
    let objects = data["objects"].as_array().expect("objects");
    let stores = |o: &serde_json::Value| o["metrics"]["store_samples"].as_u64().unwrap_or(0);
    let block = objects
        .iter()
        .find(|o| o["kind"] == "heap" && o["bytes"] == 4 << 20)
        .unwrap_or_else(|| panic!("no 4 MiB heap object in {objects:#?}"));
    // One fault per page (malloc may have touched the first one).
    assert!((1023..=1024).contains(&stores(block)), "{block:#?}");
    let table = objects
        .iter()
        .find(|o| o["name"] == "table")
        .unwrap_or_else(|| panic!("no static 'table' in {objects:#?}"));
    assert!((255..=256).contains(&stores(table)), "{table:#?}");
}

#[test]
fn handler_time_histogram_counts_every_sample() {
    // Two threads (first_touch_threads: main and one worker sweep 64 MiB),
    // through the whole pipeline: every sample the handler took is in its
    // thread's histogram once, and the database and the export carry the
    // sum. Counts only, never a time: the machine may be loaded.
    let dir = scratch("handler-time");
    let exe = compile_test_program("first_touch_threads.c", &dir, &["-pthread"]);
    let p = profile(&dir, EVENT, &exe, &[]);
    let profiles = read_profiles(&p.measurements);
    let mut total = 0;
    for prof in &profiles {
        let (s, h) = (&prof.stats, &prof.stats.handler_time);
        assert_eq!(h.samples(), s.samples, "thread {}", prof.thread.index);
        assert_eq!(h.counts.len(), h.bounds_ns.len() + 1);
        if s.samples > 0 {
            assert!(h.max_ns > 0 && h.total_ns >= h.max_ns, "{h:?}");
        }
        total += s.samples;
    }
    assert!(total > 10, "too few samples to tell: {total}");
    assert!(
        profiles.iter().filter(|p| p.stats.samples > 0).count() >= 2,
        "both threads sample"
    );
    let export = export_json(&p.db, "data");
    let stats = &export["stats"];
    assert_eq!(stats["samples"].as_u64(), Some(total));
    let counts: u64 = stats["handler_time"]["counts"]
        .as_array()
        .expect("handler_time.counts")
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counts, total, "{stats}");
}

/// A C program measured has one library more in its address space, the
/// profiler's own: the C runtime's unwinder (`libgcc_s.so.1`), which the
/// profiler's code needs only when something unwinds through it, is not
/// loaded with it.
#[test]
fn a_measured_c_program_loads_the_profiler_and_nothing_else() {
    let dir = scratch("loaded-libraries");
    let exe = compile_test_program("loaded_libraries.c", &dir, &["-O1"]);
    let native = ok_stdout(&run(&mut Command::new(&exe)), "native loaded_libraries");
    assert!(native.lines().any(|l| l.starts_with("libc.so")), "{native}");
    let (profiled, _) = hpcrun(&dir, EVENT, &exe, &[]);
    let measured = ok_stdout(&profiled, "measured loaded_libraries");
    let mut added: Vec<&str> = measured
        .lines()
        .filter(|l| !native.lines().any(|n| n == *l))
        .collect();
    added.sort_unstable();
    assert_eq!(
        added,
        ["libhpcrun_preload.so"],
        "native:\n{native}\nmeasured:\n{measured}"
    );
    assert!(
        native.lines().all(|n| measured.lines().any(|l| l == n)),
        "native:\n{native}\nmeasured:\n{measured}"
    );
}
