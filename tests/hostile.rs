//! Hostile programs: small C programs that do what real codes
//! do to their own process (close every descriptor, run on tiny stacks,
//! use SIGIO, count their threads), run natively and under the real
//! `hpcrun-rs`. Each must behave exactly as natively: same output, same
//! exit status; where the profiler loses samples it says so. Only what
//! is guaranteed is asserted (no timing, no sample counts beyond "some").

use std::path::Path;
use std::process::{Command, Output};

use pipeline_tests::*;

/// The program's native run (stdout, exit status).
fn native(exe: &Path, args: &[&str]) -> Output {
    run(Command::new(exe).args(args))
}

/// Runs `exe args` under `hpcrun-rs OPTS... -o DIR/measurements`.
fn profiled(dir: &Path, opts: &[&str], exe: &Path, args: &[&str]) -> (Output, std::path::PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(opts)
        .arg("-o")
        .arg(&measurements)
        .arg(exe)
        .args(args));
    (out, measurements)
}

/// Asserts the profiled run printed what the native one did and ended
/// the same way.
fn assert_same(profiled: &Output, native: &Output, what: &str) {
    assert_eq!(
        String::from_utf8_lossy(&profiled.stdout),
        String::from_utf8_lossy(&native.stdout),
        "{what}: stdout differs; stderr: {}",
        String::from_utf8_lossy(&profiled.stderr)
    );
    assert_eq!(
        shell_status(&profiled.status),
        shell_status(&native.status),
        "{what}: exit status or signal differs; stderr: {}",
        String::from_utf8_lossy(&profiled.stderr)
    );
}

/// The main thread's profile in `measurements`.
fn main_profile(measurements: &Path) -> formats::measurement::ThreadProfile {
    read_profiles(measurements)
        .into_iter()
        .find(|p| p.thread.index == 0)
        .expect("the main thread's profile")
}

/// A handler of the program's that runs on its own alternate stack
/// (`SA_ONSTACK`, a 64 KiB stack) for 20 ms of CPU time, ten times: the
/// profiler's sample signals due meanwhile wait until it returns, so the
/// deepest byte it reached on that stack is the native run's (without
/// that, each sample's signal frame went below the handler's: about
/// 3.5 KiB deeper here, enough to overrun a stack sized for the
/// program's handler alone). A query of the action reports the mask the
/// program set.
#[test]
fn a_handler_on_the_programs_alternate_stack_gets_no_sample_frame_below_it() {
    let dir = scratch("hostile-onstack");
    let exe = compile_test_program("onstack_depth.c", &dir, &["-Wl,-z,now"]);
    let want = native(&exe, &[]);
    assert_eq!(want.status.code(), Some(0), "native run");
    let text = String::from_utf8_lossy(&want.stdout).into_owned();
    assert!(
        text.starts_with("handled 10, mask as set 1, depth "),
        "{text}"
    );
    for (name, opts) in [
        ("cpu-timer", &["-e", "mem:soft@1000000"][..]),
        (
            "task-clock",
            &[
                "--timer",
                "task-clock",
                "-e",
                "mem:soft@200000",
                "-e",
                "page-faults",
            ][..],
        ),
    ] {
        let (out, _) = profiled(&dir.join(name), opts, &exe, &[]);
        assert_same(&out, &want, name);
    }
}

/// A program that closes every descriptor from 3 up with the raw
/// `close_range` system call (past the interposed libc calls), then opens and reads its own file, with a
/// thread that ends after the program reused the numbers. The profiler
/// never closes the program's files (it checks an event's identity
/// before closing it) and never hands its events' signals to the
/// program; the main thread's closed event is told and its lost periods
/// counted.
#[test]
fn a_program_that_closes_every_descriptor_keeps_its_own_files() {
    let dir = scratch("hostile-close");
    let exe = compile_test_program("hostile_close.c", &dir, &["-pthread"]);
    let want = native(&exe, &[]);
    assert_eq!(want.status.code(), Some(0), "native run");
    let cases: [(&str, &[&str]); 3] = [
        (
            "task-clock",
            &["--timer", "task-clock", "-e", "mem:soft@200000"],
        ),
        (
            "page-faults",
            &["-e", "mem:soft@500000", "-e", "page-faults"],
        ),
        (
            "cpu-time",
            &[
                "--timer",
                "task-clock",
                "-e",
                "cpu-time@300000",
                "-e",
                "page-faults",
            ],
        ),
    ];
    for (name, opts) in cases {
        let (out, measurements) = profiled(&dir.join(name), opts, &exe, &[]);
        assert_same(&out, &want, name);
        let main = main_profile(&measurements);
        let notice = main
            .stats
            .notices
            .keys()
            .find(|n| n.contains("closed the profiler's perf event descriptors"));
        assert!(notice.is_some(), "{name}: {:?}", main.stats.notices);
        assert!(
            !main.stats.notices.keys().any(|n| n.contains("--signal")),
            "{name}: wrong advice: {:?}",
            main.stats.notices
        );
        // The main thread's task-clock event was closed early in a run of
        // hundreds of periods of user time.
        let lost = main
            .stats
            .dropped
            .get("descriptor closed by the program")
            .copied()
            .unwrap_or(0);
        assert!(lost > 0, "{name}: {:?}", main.stats.dropped);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("closed the profiler's perf event descriptors"),
            "{name}: {stderr}"
        );
    }
    // glibc's closefrom (as daemons call it) leaves the profiler's
    // descriptors open: nothing lost, nothing to tell.
    let want = native(&exe, &["libc"]);
    assert_eq!(want.status.code(), Some(0), "native run, closefrom");
    let opts = [
        "--timer",
        "task-clock",
        "-e",
        "mem:soft@200000",
        "-e",
        "page-faults",
    ];
    let (out, measurements) = profiled(&dir.join("closefrom"), &opts, &exe, &["libc"]);
    assert_same(&out, &want, "closefrom");
    for p in read_profiles(&measurements) {
        assert!(p.stats.notices.is_empty(), "{:?}", p.stats.notices);
        assert!(
            !p.stats
                .dropped
                .contains_key("descriptor closed by the program"),
            "{:?}",
            p.stats.dropped
        );
    }
}

/// A program that puts its own file on the profiler's perf
/// event numbers with `dup2` and `dup3` while a second thread runs
/// across it gets exactly its file there (its writes land in it, its
/// flags hold, nothing of the profiler closes or touches it), and the
/// profiler moves its events out of the way first, so both threads go on
/// sampling: no descriptor lost, nothing to tell, and each thread's
/// samples stand for at least a third of its CPU time (without the move the
/// task-clock events end at the dup2, early in the run: 3 samples of
/// about 2,900).
#[test]
fn dup2_onto_the_profilers_descriptors_gives_the_program_its_file_and_sampling_goes_on() {
    let dir = scratch("hostile-dup");
    let exe = compile_test_program("hostile_dup.c", &dir, &["-pthread"]);
    let want = native(&exe, &[]);
    assert_eq!(want.status.code(), Some(0), "native run");
    let cases: [(&str, &[&str], u64); 2] = [
        (
            "task-clock+page-faults",
            &[
                "--timer",
                "task-clock",
                "-e",
                "mem:soft@200000",
                "-e",
                "page-faults",
            ],
            200_000,
        ),
        (
            "sharing",
            &["-e", "mem:soft@500000", "-e", "sharing"],
            500_000,
        ),
    ];
    for (name, opts, period) in cases {
        let (out, measurements) = profiled(&dir.join(name), opts, &exe, &[]);
        assert_same(&out, &want, name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let replaced: usize = stderr
            .split("replaced ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no count in {stderr}"));
        // Two threads, each with a task-clock event and a page-fault
        // event or watchpoints.
        assert!(replaced >= 4, "{name}: replaced {replaced}");
        assert!(
            !stderr.contains("closed the profiler's"),
            "{name}: {stderr}"
        );
        let profiles = read_profiles(&measurements);
        assert_eq!(profiles.len(), 2, "{name}: {stderr}");
        for p in &profiles {
            let what = format!("{name}, thread {}", p.thread.index);
            assert!(p.stats.notices.is_empty(), "{what}: {:?}", p.stats.notices);
            assert!(
                !p.stats
                    .dropped
                    .contains_key("descriptor closed by the program"),
                "{what}: {:?}",
                p.stats.dropped
            );
            // Task-clock periods are CPU time: a thread sampled to its end
            // has about cpu_time / period samples (less the time its
            // event waits for the handler to re-arm it at these periods,
            // and kernel time: 70-90% measured).
            assert!(
                p.stats.samples * period * 3 >= p.stats.cpu_time_ns,
                "{what}: {} samples of {period} ns in {} ns of CPU time",
                p.stats.samples,
                p.stats.cpu_time_ns
            );
        }
    }
}

/// How tests/programs/hostile_stacks.c is built: with `-z now`. Lazy
/// binding's first call of `free`, 24 KiB deep on a 32 KiB stack, saves
/// the processor's whole xsave state on that stack (glibc's
/// `_dl_runtime_resolve_xsavec`: about 11 KiB with AMX), which overflows
/// it natively in a third of the runs on such a machine (7 of 20 on a
/// Xeon with AMX); bound at start, the program uses what it says.
const HOSTILE_STACKS_FLAGS: &[&str] = &["-pthread", "-Wl,-z,now"];

/// Threads with 16 and 32 KiB stacks (the 32 KiB ones 24 KiB deep)
/// and a ucontext coroutine on a 16 KiB stack above a guard page, all
/// sampled every 100 us: the thread's state is built and the handler
/// runs on the profiler's own stack per thread, and the kernel's signal
/// frames land there, so nothing overflows.
#[test]
fn small_thread_stacks_and_a_coroutine_stack_are_sampled_safely() {
    let dir = scratch("hostile-stacks");
    let exe = compile_test_program("hostile_stacks.c", &dir, HOSTILE_STACKS_FLAGS);
    let want = native(&exe, &[]);
    assert_eq!(want.status.code(), Some(0), "native run");
    let cases: [(&str, &[&str]); 3] = [
        ("task-clock", &["-e", "mem:soft@100000"]),
        (
            "cpu-timer",
            &["--timer", "cpu-timer", "-e", "mem:soft@1000000"],
        ),
        (
            "page-faults",
            &["-e", "cpu-time@100000", "-e", "page-faults"],
        ),
    ];
    for (name, opts) in cases {
        let (out, measurements) = profiled(&dir.join(name), opts, &exe, &[]);
        assert_same(&out, &want, name);
        let profiles = read_profiles(&measurements);
        assert_eq!(profiles.len(), 5, "{name}: the main thread and 4 others");
    }
}

/// Alternate signal stacks of the program's own, one per thread: 3 KiB
/// (smaller than a signal frame with AVX-512 state), exactly
/// `MINSIGSTKSZ` (`sysconf`: the kernel's `AT_MINSIGSTKSZ`), that and
/// 1 KiB, and `SIGSTKSZ`, each between canary regions, the last three
/// taking the program's own `SA_ONSTACK` signals. Sampled every 100 us,
/// every thread still finds its stack reported as installed and every
/// canary intact, and the program prints what it printed natively: the
/// profiler's signals never land on a stack too small for the machine's
/// signal frame, and use only a few words of one that holds it.
#[test]
fn the_programs_small_alternate_stacks_are_never_overrun() {
    let dir = scratch("hostile-altstacks");
    let exe = compile_test_program("hostile_altstacks.c", &dir, &["-pthread", "-Wl,-z,now"]);
    let want = native(&exe, &[]);
    assert_eq!(
        want.status.code(),
        Some(0),
        "native run: {}",
        String::from_utf8_lossy(&want.stdout)
    );
    for (name, opts) in [
        ("task-clock", &["-e", "mem:soft@100000"][..]),
        (
            "cpu-timer",
            &["--timer", "cpu-timer", "-e", "mem:soft@1000000"][..],
        ),
    ] {
        let (out, measurements) = profiled(&dir.join(name), opts, &exe, &[]);
        assert_same(&out, &want, name);
        assert_eq!(
            read_profiles(&measurements).len(),
            5,
            "{name}: the main thread and 4 others"
        );
    }
}

/// SIGIO stays the program's. The profiler borrows it (a sample the
/// kernel cannot queue arrives as SIGIO), but `sigaction(SIGIO, NULL,
/// &old)` reports the default, `signal` returns it, the program's handler
/// gets exactly the SIGIOs it sent itself, and `kill(getpid(), SIGIO)`
/// ends the program by SIGIO as natively.
#[test]
fn sigio_keeps_its_default_disposition_and_ends_the_program() {
    let dir = scratch("hostile-sigio");
    let exe = compile_test_program("hostile_sigio.c", &dir, &[]);
    for args in [&[][..], &["handler"][..]] {
        let want = native(&exe, args);
        assert_eq!(want.status.code(), None, "native run is killed by SIGIO");
        assert!(String::from_utf8_lossy(&want.stdout).contains("default 1"));
        for (i, opts) in [
            &["--timer", "task-clock", "-e", "mem:soft@500000"][..],
            &["-e", "mem:soft", "-e", "page-faults"][..],
        ]
        .into_iter()
        .enumerate()
        {
            let name = format!("{}{i}", args.join(""));
            let (out, measurements) = profiled(&dir.join(&name), opts, &exe, args);
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&want.stdout),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The launcher ends as its program did: by SIGIO (or 128 + 29).
            use std::os::unix::process::ExitStatusExt;
            assert!(
                out.status.signal() == Some(29) || out.status.code() == Some(128 + 29),
                "{name}: {:?}",
                out.status
            );
            // The profiles were written before the default action ran.
            assert_eq!(read_profiles(&measurements).len(), 1, "{name}");
        }
    }
}

/// No extra thread in a single-threaded program: it counts 1 thread
/// and `unshare(CLONE_NEWUSER)` (which needs a single thread) behaves as
/// natively. Its checkpoints are written by its own allocations instead
/// (with `HPCRUN_CHECKPOINT_STATS`, the rounds are reported at exit), and
/// the program's second thread still gets a profile.
#[test]
fn a_single_threaded_program_gets_no_helper_thread() {
    let dir = scratch("hostile-threads");
    let exe = compile_test_program("hostile_threads.c", &dir, &["-pthread"]);
    let want = native(&exe, &["alloc"]);
    assert_eq!(want.status.code(), Some(0), "native run");
    let stdout = String::from_utf8_lossy(&want.stdout);
    assert!(stdout.starts_with("threads 1\n"), "{stdout}");
    let out = run(Command::new(tool("hpcrun-rs"))
        .env("HPCRUN_CHECKPOINT_STATS", "1")
        .args(["--checkpoint", "0.1", "-e", "mem:soft@200000", "-o"])
        .arg(dir.join("measurements"))
        .arg(&exe)
        .arg("alloc"));
    assert_same(&out, &want, "checkpoints every 0.1 s");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("checkpoints: "), "{stderr}");
    assert_eq!(read_profiles(&dir.join("measurements")).len(), 2);
}

/// A floor on the timer period. Below it the launcher refuses, says
/// why and names the floor, and the program does not run; `--list-events`
/// shows it; at the floor, with the task-clock event (one overflow at a
/// time below 1 ms: never more than one sample signal pending per
/// thread), a busy 5-thread program runs to its end as natively.
#[test]
fn periods_below_the_floor_are_refused_and_the_floor_runs() {
    let dir = scratch("hostile-period");
    let exe = compile_test_program("hostile_stacks.c", &dir, HOSTILE_STACKS_FLAGS);
    for (i, spec) in ["mem:soft@1", "mem:soft@10000", "cpu-time@19999"]
        .into_iter()
        .enumerate()
    {
        let (out, measurements) =
            profiled(&dir.join(format!("refused{i}")), &["-e", spec], &exe, &[]);
        assert!(!out.status.success(), "{spec}");
        assert!(out.stdout.is_empty(), "{spec}: the program ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("below the floor of 20000 ns"),
            "{spec}: {stderr}"
        );
        assert!(
            !measurements.join(".hpcrun-run").exists() || read_profiles(&measurements).is_empty()
        );
    }
    let list = run(Command::new(tool("hpcrun-rs")).arg("--list-events"));
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("period at least 20000 ns"), "{text}");
    let want = native(&exe, &[]);
    let (out, measurements) = profiled(
        &dir.join("floor"),
        &["--timer", "task-clock", "-e", "mem:soft@20000"],
        &exe,
        &[],
    );
    assert_same(&out, &want, "at the floor");
    assert_eq!(read_profiles(&measurements).len(), 5);
}

/// A program that takes the sample signal with a raw `rt_sigaction`
/// system call (past the interposed `sigaction`) runs to its end as
/// natively; the profiler notices (its checkpoint helper within 50 ms,
/// or the allocation hooks), stops sampling so that the program stops
/// getting its signals, and says so with the fix. (How many signals
/// reached the program before that depends on scheduling: not asserted.)
#[test]
fn a_raw_rt_sigaction_on_the_sample_signal_is_noticed_and_told() {
    let dir = scratch("hostile-rawsig");
    let exe = compile_test_program("hostile_rawsig.c", &dir, &["-pthread"]);
    let want = native(&exe, &[]);
    assert_eq!(want.status.code(), Some(0), "native run");
    for (i, opts) in [&["-e", "mem:soft@500000"][..], &["-e", "mem:soft"][..]]
        .into_iter()
        .enumerate()
    {
        let (out, _) = profiled(&dir.join(format!("run{i}")), opts, &exe, &[]);
        assert_same(&out, &want, "raw rt_sigaction");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("replaced the profiler's handler of SIGRTMIN+4")
                && stderr.contains("--signal N"),
            "{stderr}"
        );
    }
}

/// A stack overflow caught as Rust's runtime and many C programs catch it:
/// a SIGSEGV handler on an 8 KiB alternate stack that reports and calls
/// `abort()`. The profiler's fatal-signal handler then runs on that small
/// stack: it writes the profiles on its own stack instead, and the
/// process ends by SIGABRT with its message, as natively.
#[test]
fn a_stack_overflow_caught_on_a_small_alternate_stack_ends_as_natively() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("hostile-overflow");
    let exe = compile_test_program("hostile_overflow.c", &dir, &[]);
    let want = native(&exe, &[]);
    assert_eq!(want.status.signal(), Some(libc_sigabrt()), "native run");
    let (out, measurements) = profiled(&dir.join("run"), &["-e", "mem:soft@100000"], &exe, &[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&want.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stack overflow, aborting"), "{stderr}");
    assert!(
        out.status.signal() == Some(libc_sigabrt()) || out.status.code() == Some(128 + 6),
        "{:?}: {stderr}",
        out.status
    );
    assert_eq!(read_profiles(&measurements).len(), 1, "{stderr}");
}

/// SIGABRT's number on Linux.
fn libc_sigabrt() -> i32 {
    6
}

/// A program that creates and joins threads round after
/// round (40 threads, 8 at a time, each spinning 20 ms of CPU time in one
/// of two functions by its parity). Every thread's profile arrives, each
/// with its own thread id and index, and holds samples of its own
/// function only: the tables an ended thread hands to the next one
/// (`threads::recycle`) are emptied first. The task-clock event samples
/// every thread for sure (exact periods of its CPU time).
#[test]
fn churned_threads_each_write_their_own_profile() {
    let dir = scratch("hostile-churn");
    let exe = compile_test_program("churn_profiles.c", &dir, &["-pthread", "-O1"]);
    let want = native(&exe, &[]);
    assert_eq!(String::from_utf8_lossy(&want.stdout), "threads 40\n");
    let opts = ["--timer", "task-clock", "-e", "mem:soft@1000000"];
    let (out, measurements) = profiled(&dir.join("run"), &opts, &exe, &[]);
    assert_same(&out, &want, "churn");
    let profiles = read_profiles(&measurements);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(profiles.len(), 41, "{stderr}");
    let mut indices: Vec<u32> = profiles.iter().map(|p| p.thread.index).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..=40).collect::<Vec<_>>());
    let mut tids: Vec<u32> = profiles.iter().map(|p| p.thread.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    assert_eq!(tids.len(), 41, "thread ids repeat");
    // Where the two spin functions lie in the executable (nm -S).
    let nm = run(Command::new("nm").arg("-S").arg(&exe));
    let symbol = |name: &str| -> (u64, u64) {
        let text = String::from_utf8_lossy(&nm.stdout);
        let line = text
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} not in nm's output:\n{text}"));
        let f: Vec<&str> = line.split_whitespace().collect();
        let start = u64::from_str_radix(f[0], 16).unwrap();
        (start, start + u64::from_str_radix(f[1], 16).unwrap())
    };
    let (odd, even) = (symbol("spin_odd"), symbol("spin_even"));
    for p in profiles.iter().filter(|p| p.thread.index != 0) {
        let exe_name = exe.file_name().unwrap().to_string_lossy();
        let bias = p
            .modules
            .iter()
            .find(|m| m.path.ends_with(&*exe_name))
            .map(|m| m.bias)
            .expect("the executable among the modules");
        // Thread index n ran thread number n (created in order).
        let (own, other) = if p.thread.index % 2 == 1 {
            (odd, even)
        } else {
            (even, odd)
        };
        let inside = |(s, e): (u64, u64)| {
            p.code.nodes.iter().any(|n| match n.key {
                formats::measurement::NodeKey::Call(a) => {
                    a >= s.wrapping_add(bias) && a < e.wrapping_add(bias)
                }
                _ => false,
            })
        };
        assert!(p.stats.samples > 0, "thread {}", p.thread.index);
        assert!(
            inside(own),
            "thread {}: no sample in its own function",
            p.thread.index
        );
        assert!(
            !inside(other),
            "thread {}: samples of another thread's function (tables handed on unemptied)",
            p.thread.index
        );
    }
}

/// The address space a thread's state takes is handed on when the
/// thread ends. 300 threads created and joined one at a time: natively
/// the address space does not grow after the first few (glibc reuses the
/// stacks); measured it grew by 15 MiB a thread (4.2 GB) before the
/// states were recycled, and now not at all beyond a few tables.
#[test]
fn churned_threads_do_not_grow_the_address_space() {
    let dir = scratch("hostile-churn-vm");
    let exe = compile_test_program("churn_profiles.c", &dir, &["-pthread", "-O1"]);
    let grew = |out: &Output| -> i64 {
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim()
            .strip_prefix("grew ")
            .and_then(|t| t.strip_suffix(" KiB"))
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("unexpected output {text:?}"))
    };
    assert_eq!(grew(&native(&exe, &["vm", "300"])), 0);
    let (out, _) = profiled(&dir.join("run"), &[], &exe, &["vm", "300"]);
    let kib = grew(&out);
    assert!(
        kib < 16 << 10,
        "grew {kib} KiB over 280 threads; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A program with 16 threads whose main thread then allocates 40
/// blocks of 4 MiB needs about 290 MB of address space natively, and gets
/// all its blocks under `ulimit -v 600000` (a 2x margin) measured too.
/// Before, each thread's tables reserved 15 MiB and the library's
/// allocations gave each thread a glibc arena (64 MiB reserved): the
/// program needed 1.5 GB measured and got 2 blocks under this limit.
#[test]
fn a_threaded_program_that_fits_under_ulimit_v_natively_fits_measured() {
    let dir = scratch("hostile-ulimit-v");
    let exe = compile_test_program("address_space.c", &dir, &["-pthread"]);
    let limited = |cmd: String| run_in_shell("ulimit -v 600000", &cmd);
    let want = limited(format!("{} 40 16", exe.display()));
    assert_eq!(String::from_utf8_lossy(&want.stdout), "blocks 40\n");
    let measurements = dir.join("measurements");
    let out = limited(format!(
        "{} -o {} {} 40 16",
        tool("hpcrun-rs").display(),
        measurements.display(),
        exe.display()
    ));
    assert_same(&out, &want, "ulimit -v 600000");
    let profiles = read_profiles(&measurements);
    assert!(
        profiles.iter().any(|p| p.thread.index == 0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A program that closes its standard error and opens its own data file
/// (which gets descriptor 2), then starts a thread while its open-file
/// limit leaves no number free, makes the profiler say that the
/// thread's task-clock event could not open. The message names the
/// open-file limit (no permission advice) and goes to the standard
/// error the launcher gave the program, never into the program's data
/// file, which holds exactly what the program wrote. When the program
/// also closed the profiler's descriptors with a raw `close_range`, the
/// message goes to a file in the measurements directory instead.
#[test]
fn messages_never_go_into_the_programs_file_on_descriptor_2() {
    let dir = scratch("hostile-stderr");
    let exe = compile_test_program("hostile_stderr.c", &dir, &["-pthread"]);
    let data = "data: 1 2 3\n";
    let opts = ["--timer", "task-clock", "-e", "mem:soft@500000"];
    for raw in [false, true] {
        let name = if raw { "raw" } else { "libc" };
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let file = sub.join("data.txt");
        let mut args = vec![file.to_str().unwrap()];
        if raw {
            args.push("raw");
        }
        let want = native(&exe, &args);
        assert_eq!(want.status.code(), Some(0), "{name}: native run");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), data);
        std::fs::remove_file(&file).unwrap();
        let (out, measurements) = profiled(&sub, &opts, &exe, &args);
        assert_same(&out, &want, name);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            data,
            "{name}: the data file holds more than the program's data"
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let pid_files: Vec<String> = std::fs::read_dir(&measurements)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("hpcrun-rs.messages."))
            .collect();
        let told = if raw {
            assert_eq!(pid_files.len(), 1, "{name}: {pid_files:?}; {stderr}");
            // The launcher's closing lines point at it.
            assert!(stderr.contains(&pid_files[0]), "{name}: {stderr}");
            std::fs::read_to_string(measurements.join(&pid_files[0])).unwrap()
        } else {
            assert!(pid_files.is_empty(), "{name}: {pid_files:?}");
            stderr.clone()
        };
        let line = told
            .lines()
            .find(|l| l.contains("perf_event_open(task-clock) failed (errno 24)"))
            .unwrap_or_else(|| panic!("{name}: no message in {told:?}; stderr: {stderr}"));
        assert!(line.starts_with("hpcrun-rs: "), "{name}: {line}");
        assert!(line.contains("open-file limit"), "{name}: {line}");
        assert!(!line.contains("paranoid"), "{name}: {line}");
    }
}

#[test]
fn threads_the_program_cancels_never_leave_the_profiler_stuck() {
    // Natively about a second. Under the profiler a cancellation that
    // acted inside the profiler's own work left its locks held: the next
    // thread to load a library waited for ever (hence the time limit).
    let dir = scratch("hostile-cancelled-threads");
    let exe = compile_test_program("cancelled_threads.c", &dir, &["-pthread", "-ldl"]);
    let want = native(&exe, &[]);
    assert_eq!(
        String::from_utf8_lossy(&want.stdout),
        "150 rounds, 0 workers not cancelled\n"
    );
    for opts in [
        &["-e", "mem:soft"][..],
        &["-e", "mem:soft", "-e", "page-faults@1"],
    ] {
        std::fs::create_dir_all(&dir).unwrap();
        let measurements = dir.join(format!("measurements-{}", opts.len()));
        let got = run(Command::new("timeout")
            .args(["-k", "10", "300"])
            .arg(tool("hpcrun-rs"))
            .args(opts)
            .arg("-o")
            .arg(&measurements)
            .arg(&exe));
        assert_same(&got, &want, &format!("{opts:?}"));
    }
}

#[test]
fn a_program_under_a_small_stack_limit_runs_as_natively() {
    // The limit is the launcher's too (the shell's `ulimit -s`), and the
    // preload library's set-up runs on the program's main thread: both
    // work on stacks of their own.
    let dir = scratch("hostile-small-stack-limit");
    let exe = compile_test_program("small_main_stack.c", &dir, &["-pthread"]);
    let limited = |cmd: String| run_in_shell("ulimit -s 48", &cmd);
    let want = limited(exe.display().to_string());
    assert_eq!(
        String::from_utf8_lossy(&want.stdout),
        "ok\n",
        "native: {want:?}"
    );
    let measurements = dir.join("measurements");
    let got = limited(format!(
        "{} -o {} {}",
        tool("hpcrun-rs").display(),
        measurements.display(),
        exe.display()
    ));
    assert_same(&got, &want, "ulimit -s 48");
    let threads = read_profiles(&measurements).len();
    assert_eq!(threads, 2, "{}", String::from_utf8_lossy(&got.stderr));
}

#[test]
fn threads_that_call_exit_together_keep_every_profile() {
    // The first `exit` runs the atexit handlers, the profiler's last;
    // the others' `exit` would end the process as soon as they found no
    // handler left, in the middle of the writing (half the runs lost
    // every profile). Four runs.
    let dir = scratch("hostile-exit-together");
    let exe = compile_test_program("exit_together.c", &dir, &["-pthread"]);
    let want = native(&exe, &["exit"]);
    assert_eq!(want.status.code(), Some(3), "native run: {want:?}");
    for run_no in 0..4 {
        let (got, measurements) = profiled(&dir.join(format!("run{run_no}")), &[], &exe, &["exit"]);
        assert_same(&got, &want, "exit from 2 threads");
        let mut threads: Vec<u32> = read_profiles(&measurements)
            .iter()
            .map(|p| p.thread.index)
            .collect();
        threads.sort_unstable();
        assert_eq!(threads, [0, 1], "{}", String::from_utf8_lossy(&got.stderr));
    }
}

#[test]
fn a_program_that_ends_by_quick_exit_keeps_its_profile() {
    let dir = scratch("hostile-quick-exit");
    let exe = compile_test_program("exit_together.c", &dir, &["-pthread"]);
    let want = native(&exe, &["quick"]);
    assert_eq!(want.status.code(), Some(4), "native run: {want:?}");
    let (got, measurements) = profiled(&dir, &[], &exe, &["quick"]);
    assert_same(&got, &want, "quick_exit");
    assert_eq!(main_profile(&measurements).thread.index, 0);
}

#[test]
fn a_program_started_with_its_standard_descriptors_closed_finds_them_closed() {
    // Rust's runtime opens /dev/null on the launcher's closed standard
    // descriptors before its `main`; the program must not inherit them.
    let dir = scratch("hostile-closed-stdio");
    let exe = compile_test_program("closed_stdio.c", &dir, &[]);
    let closed = |cmd: String, report: &Path| {
        let out = run(Command::new("sh")
            .arg("-c")
            .arg(format!("exec {cmd} {} <&- >&- 2>&-", report.display())));
        (out, std::fs::read_to_string(report).unwrap_or_default())
    };
    let (want, want_report) = closed(exe.display().to_string(), &dir.join("native.txt"));
    assert_eq!(want.status.code(), Some(0), "native run: {want:?}");
    assert_eq!(want_report, "open at start: 0 0 0; first open: 0\n");
    let measurements = dir.join("measurements");
    let (got, got_report) = closed(
        format!(
            "{} -o {} {}",
            tool("hpcrun-rs").display(),
            measurements.display(),
            exe.display()
        ),
        &dir.join("profiled.txt"),
    );
    assert_eq!(got_report, want_report);
    assert_eq!(got.status.code(), Some(0), "{got:?}");
    assert_eq!(main_profile(&measurements).thread.index, 0);
}

#[test]
fn an_orphan_sees_its_parent_end_as_natively() {
    // The launcher is the run's subreaper (it waits for what the program
    // leaves behind): an orphan's real parent becomes hpcrun-rs, where
    // natively it is init, and a program that waits for getppid() == 1
    // would wait for ever.
    let dir = scratch("hostile-orphan");
    let exe = compile_test_program("orphan_parent.c", &dir, &[]);
    let want = native(&exe, &[]);
    let want_out = String::from_utf8_lossy(&want.stdout).into_owned();
    if !want_out.contains("ppid 1") {
        eprintln!("skipped: a subreaper adopts orphans here natively: {want_out}");
        return;
    }
    let (got, _) = profiled(&dir, &[], &exe, &[]);
    assert_same(&got, &want, "orphan");
}

/// A program under a small file-size limit (the shell's `ulimit -f`, or
/// its own `setrlimit`) ends as natively: the profiler's writes past the
/// limit fail without the SIGXFSZ that would end the program (or run its
/// handler), and each profile lost is told on standard error with the
/// limit named. The manifest's reserve shrinks to what the limit allows.
#[test]
fn a_program_under_a_small_file_size_limit_runs_as_natively_and_the_loss_is_told() {
    let dir = scratch("hostile-file-size-limit");
    let exe = compile_test_program("small_file_size_limit.c", &dir, &["-pthread"]);
    let data = dir.join("data.txt");
    let data = data.to_str().unwrap();
    // (dash counts `ulimit -f` in blocks of 512 bytes: 1 KiB.)
    let cases: [(&str, Option<&str>, &[&str]); 3] = [
        ("ulimit -f", Some("ulimit -f 2"), &[data]),
        ("setrlimit", None, &[data, "1024"]),
        ("setrlimit, handler", None, &[data, "1024", "handler"]),
    ];
    for (i, (name, shell, args)) in cases.into_iter().enumerate() {
        let limited = |cmd: &Path, opts: &[String]| {
            let mut line = String::from("exec");
            for word in opts.iter().map(String::as_str).chain(args.iter().copied()) {
                line.push(' ');
                line.push_str(word);
            }
            let line = line.replacen("exec", &format!("exec {}", cmd.display()), 1);
            let script = match shell {
                Some(limit) => format!("{limit} && {line}"),
                None => line,
            };
            run(Command::new("sh").arg("-c").arg(script))
        };
        let want = limited(&exe, &[]);
        assert_eq!(
            String::from_utf8_lossy(&want.stdout),
            "done, 0 SIGXFSZ\n",
            "{name}: native run: {want:?}"
        );
        let measurements = dir.join(format!("measurements-{i}"));
        let opts = [
            "-o".to_string(),
            measurements.display().to_string(),
            exe.display().to_string(),
        ];
        let got = limited(&tool("hpcrun-rs"), &opts);
        assert_same(&got, &want, name);
        let stderr = String::from_utf8_lossy(&got.stderr);
        let told = stderr
            .lines()
            .filter(|l| l.contains("could not write the profile of thread"))
            .collect::<Vec<_>>();
        assert!(!told.is_empty(), "{name}: {stderr}");
        for line in told {
            assert!(
                line.contains("`ulimit -f`) is 1024 bytes"),
                "{name}: {line}"
            );
        }
    }
}

/// A program that lowers its soft open-file limit, fills its descriptor
/// table and ends holding every descriptor, its threads ending
/// meanwhile, ends as natively and every profile is written (the library
/// opens its files above the soft limit, raised for that moment).
#[test]
fn a_program_that_ends_with_its_descriptor_table_full_runs_as_natively_and_its_profiles_are_written(
) {
    let dir = scratch("hostile-full-descriptor-table");
    let exe = compile_test_program("full_descriptor_table.c", &dir, &["-pthread"]);
    let want = native(&exe, &[]);
    assert_eq!(
        String::from_utf8_lossy(&want.stdout),
        "table full: EMFILE\n",
        "native run: {want:?}"
    );
    let (got, measurements) = profiled(&dir, &[], &exe, &[]);
    assert_same(&got, &want, "full descriptor table");
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(!stderr.contains("could not write"), "{stderr}");
    assert_eq!(read_profiles(&measurements).len(), 3, "{stderr}");
    merge(&dir, &measurements);
}

/// Threads created with a signal-mask attribute that blocks every signal
/// (`pthread_attr_setsigmask_np`): their `pthread_sigmask` query reports
/// the profiler's signal blocked, as natively, and they are sampled
/// (the profiler keeps the signal unblocked in the kernel and holds the
/// program's own signals of that number back).
#[test]
fn threads_created_with_a_mask_attribute_see_their_mask_and_are_sampled() {
    let dir = scratch("hostile-mask-attribute");
    let exe = compile_test_program("mask_attr_threads.c", &dir, &["-pthread"]);
    let want = native(&exe, &[]);
    assert_eq!(
        String::from_utf8_lossy(&want.stdout)
            .matches("SIGRTMIN+4 blocked 1")
            .count(),
        2,
        "native: {want:?}"
    );
    let (got, measurements) = profiled(&dir, &[], &exe, &[]);
    assert_same(&got, &want, "attribute mask");
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 3, "{stderr}");
    // Each thread computes ~0.1 s of CPU time or more.
    for p in profiles.iter().filter(|p| p.thread.index != 0) {
        assert!(
            p.stats.samples >= 10,
            "thread {} has {} samples",
            p.thread.index,
            p.stats.samples
        );
    }
}

/// A program that blocked the profiler's signal with `sigprocmask` keeps
/// it blocked across `exec` (a failed one leaves the program sampled), and
/// a child started by `posix_spawn` with a mask blocking every signal
/// starts with it blocked: each child's own `SIGRTMIN+4` stays pending and
/// it exits 0, as natively (not killed by the signal), and every process
/// is sampled.
#[test]
fn a_signal_mask_inherited_across_exec_and_posix_spawn_is_the_programs() {
    let dir = scratch("hostile-mask-exec");
    let exe = compile_test_program("exec_blocked_signal.c", &dir, &[]);
    let want = native(&exe, &[]);
    assert_eq!(
        String::from_utf8_lossy(&want.stdout),
        "failed exec: -1 1\nSIGRTMIN+4 blocked after it 1\n\
         child: SIGRTMIN+4 blocked at start 1\nchild: SIGRTMIN+4 pending 1\n\
         fork+exec: child exit 0\n\
         child: SIGRTMIN+4 blocked at start 1\nchild: SIGRTMIN+4 pending 1\n\
         posix_spawn: child exit 0\n",
        "native: {want:?}"
    );
    let (got, measurements) = profiled(&dir, &[], &exe, &[]);
    assert_same(&got, &want, "exec with a blocked signal");
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    // The parent (after its failed exec) and both children compute
    // ~0.1 s of CPU time or more each.
    let profiles = read_profiles(&measurements);
    let sampled = |child: bool| {
        profiles
            .iter()
            .filter(|p| p.process.command.iter().any(|a| a == "child") == child)
            .filter(|p| p.stats.samples >= 10)
            .count()
    };
    assert_eq!(sampled(true), 2, "{stderr}");
    assert_eq!(sampled(false), 1, "{stderr}");
}

/// A program that sets `umask(0777)`: its profiles and the other files
/// the profiler makes stay readable and writable by their owner, and
/// hpcprof-rs merges them.
#[test]
fn the_programs_umask_leaves_its_profiles_readable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("hostile-umask");
    let exe = compile_test_program("umask_all.c", &dir, &["-pthread"]);
    let want = native(&exe, &[]);
    assert_eq!(String::from_utf8_lossy(&want.stdout), "done\n");
    let (got, measurements) = profiled(&dir, &[], &exe, &[]);
    assert_same(&got, &want, "umask 0777");
    let mut files = 0;
    for entry in std::fs::read_dir(&measurements).unwrap() {
        let entry = entry.unwrap();
        let mode = entry.metadata().unwrap().permissions().mode();
        assert_eq!(
            mode & 0o600,
            0o600,
            "{}: mode {mode:o}",
            entry.path().display()
        );
        files += 1;
    }
    assert!(files >= 2, "{files} files");
    // (The tests may run as root, who reads any file: the modes above are
    // what an ordinary user's hpcprof-rs needs.)
    merge(&dir, &measurements);
}

#[test]
fn threads_started_while_the_program_calls_closefrom_keep_their_descriptors() {
    // A new thread's perf events are opened at the lowest free numbers
    // and moved above the floor: a closefrom running in between would
    // close them, and the threads would lose their sampling.
    let dir = scratch("hostile-closefrom-race");
    let exe = compile_test_program("closefrom_while_threads_start.c", &dir, &["-pthread"]);
    let want = native(&exe, &[]);
    assert_eq!(String::from_utf8_lossy(&want.stdout), "ok\n");
    let opts = [
        "--timer",
        "task-clock",
        "-e",
        "mem:soft@200000",
        "-e",
        "page-faults",
    ];
    let (got, measurements) = profiled(&dir, &opts, &exe, &[]);
    assert_same(&got, &want, "closefrom while threads start");
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(!stderr.contains("closed the profiler's"), "{stderr}");
    for p in read_profiles(&measurements) {
        assert!(
            !p.stats
                .dropped
                .contains_key("descriptor closed by the program"),
            "thread {}: {:?}",
            p.thread.index,
            p.stats.dropped
        );
    }
}
