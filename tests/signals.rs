//! Signal coexistence and killed runs: a program that uses the
//! profiler's signal keeps its behaviour and the profile keeps its
//! samples; a program that blocks the signal is reported, not silent.

use std::path::Path;
use std::process::{Command, Output};

use pipeline_tests::*;

/// Runs `program args` under `hpcrun-rs EXTRA... -o DIR/measurements`.
fn hpcrun_with(
    dir: &Path,
    extra: &[&str],
    program: &Path,
    args: &[&str],
) -> (Output, std::path::PathBuf) {
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(extra)
        .arg("-o")
        .arg(&measurements)
        .arg(program)
        .args(args));
    (out, measurements)
}

/// hpcprof-rs on `measurements`: its stderr (the summary).
fn merge(dir: &Path, measurements: &Path) -> String {
    let out = run(Command::new(tool("hpcprof-rs"))
        .arg("-o")
        .arg(dir.join("db"))
        .arg(measurements));
    ok_stdout(&out, "hpcprof-rs");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn samples_of(measurements: &Path) -> u64 {
    read_profiles(measurements)
        .iter()
        .map(|p| p.stats.samples)
        .sum()
}

/// A program with its own handler for SIGRTMIN+OFF, raised
/// 1,000 times. Under the profiler it must count exactly 1,000 (the
/// profiler's timer signals never reach it) and the profile must hold
/// samples, whether the profiler uses that signal or another one.
#[test]
fn a_program_with_its_own_handler_for_the_sampling_signal_keeps_it() {
    let dir = scratch("own-signal");
    let exe = compile_test_program("own_signal.c", &dir, &[]);
    // (profiler options, the program's signal offset, whether it is one of
    // the profiler's signals: the sample signal, or the page-fault signal
    // right after it)
    let cases: [(&[&str], &str, bool); 4] = [
        (&[], "4", true),
        (&["--signal", "7"], "7", true),
        (&["--signal", "5"], "4", false),
        (&["-e", "mem:soft", "-e", "page-faults"], "5", true),
    ];
    for (i, (extra, offset, shared)) in cases.iter().enumerate() {
        let case = dir.join(format!("case{i}"));
        std::fs::create_dir_all(&case).unwrap();
        let (out, measurements) = hpcrun_with(&case, extra, &exe, &[offset, "200000000"]);
        let stdout = ok_stdout(&out, "hpcrun-rs own_signal");
        assert_eq!(stdout, "hits 1000\n", "{extra:?} program offset {offset}");
        let samples = samples_of(&measurements);
        // 200 M iterations take well over 100 ms of CPU time: at 2 ms a
        // sample, dozens of samples.
        assert!(samples >= 20, "{extra:?}: {samples} samples");
        let profiles = read_profiles(&measurements);
        let main = profiles.iter().find(|p| p.thread.index == 0).unwrap();
        let passed = if *shared { 1000 } else { 0 };
        assert_eq!(main.stats.program_signals, passed, "{extra:?}");
        assert!(main.stats.notices.is_empty(), "{:?}", main.stats.notices);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("warning"), "{stderr}");
    }
}

/// A program that blocks the sampling signal in all threads (and takes
/// its own instance of it with `sigwait`) behaves as without the profiler,
/// keeps being sampled, and the blocking is counted and said.
#[test]
fn blocking_the_sampling_signal_is_overridden_counted_and_reported() {
    let dir = scratch("block-libc");
    let exe = compile_test_program("block_signal.c", &dir, &["-pthread"]);
    let native = ok_stdout(&run(Command::new(&exe).arg("libc")), "native block_signal");
    assert_eq!(native, "blocked 1\nwaited 1\nhits 0\n");
    let (out, measurements) = hpcrun_with(&dir, &[], &exe, &["libc"]);
    // The program sees its mask, takes its own signal with sigwait, and its
    // handler never runs: exactly as without the profiler.
    assert_eq!(ok_stdout(&out, "hpcrun-rs block_signal libc"), native);
    // Sampling went on in all 5 threads (each computes ~0.1 s or more).
    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 5);
    for p in &profiles {
        assert!(
            p.stats.samples >= 10,
            "thread {} has {} samples",
            p.thread.index,
            p.stats.samples
        );
        assert!(p.stats.notices.is_empty(), "{:?}", p.stats.notices);
    }
    let main = profiles.iter().find(|p| p.thread.index == 0).unwrap();
    assert_eq!(main.stats.signal_blocks, 1);
    // And it is said.
    let summary = merge(&dir, &measurements);
    assert!(
        summary.contains("asked 1 time(s) to block the profiler's sampling signal"),
        "{summary}"
    );
}

/// Blocked with the raw system call, past the interposition: the thread
/// that blocked it gets no samples, and both tools say why and what to
/// do. The threads it creates afterwards inherit the block, which the
/// profiler takes at their start as the program's own (as a thread
/// attribute's mask): they are sampled.
#[test]
fn a_signal_blocked_past_the_interposition_is_reported_with_the_fix() {
    let dir = scratch("block-raw");
    let exe = compile_test_program("block_signal.c", &dir, &["-pthread"]);
    let (out, measurements) = hpcrun_with(&dir, &[], &exe, &["raw"]);
    assert_eq!(ok_stdout(&out, "hpcrun-rs block_signal raw"), "hits 0\n");
    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 5);
    for p in &profiles {
        if p.thread.index == 0 {
            assert_eq!(p.stats.samples, 0);
        } else {
            assert!(
                p.stats.samples >= 10,
                "thread {} has {} samples",
                p.thread.index,
                p.stats.samples
            );
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notice: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("received almost none"))
        .collect();
    assert_eq!(notice.len(), 1, "{stderr}");
    assert!(
        notice[0].contains("SIGRTMIN+4")
            && notice[0].contains("--signal N")
            && notice[0].contains("(1 thread)"),
        "{stderr}"
    );
    let summary = merge(&dir, &measurements);
    assert!(
        summary.contains("received almost none") && summary.contains("--signal N"),
        "{summary}"
    );
    // With another signal, the same program is measured.
    let again = dir.join("again");
    std::fs::create_dir_all(&again).unwrap();
    let (out, measurements) = hpcrun_with(&again, &["--signal", "6"], &exe, &["raw"]);
    assert_eq!(
        ok_stdout(&out, "hpcrun-rs --signal 6 block_signal raw"),
        "hits 0\n"
    );
    assert!(samples_of(&measurements) >= 50);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

/// The `running <pid>` line of threads_killed.c, read from `child`.
fn wait_running(child: &mut std::process::Child) -> u32 {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the program's first line");
    line.trim()
        .strip_prefix("running ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
}

/// The number of profiles in `dir`.
fn profile_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "hpcrun"))
                .count()
        })
        .unwrap_or(0)
}

/// An 8-thread program killed with SIGKILL after 3 s (or once every
/// thread has its checkpoint, if that takes longer), checkpointing every
/// second: every thread's profile is there, readable, with the samples of
/// at least the first checkpoint, and hpcprof-rs merges them and says they
/// are checkpoints of a run that did not finish.
#[test]
fn a_run_killed_with_sigkill_keeps_its_checkpoints() {
    let dir = scratch("killed");
    let exe = compile_test_program("threads_killed.c", &dir, &["-pthread"]);
    let measurements = dir.join("measurements");
    let mut child = Command::new(tool("hpcrun-rs"))
        .args(["--checkpoint", "1", "-o"])
        .arg(&measurements)
        .arg(&exe)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start hpcrun-rs");
    let pid = wait_running(&mut child);
    // At least 3 s, and until every thread's checkpoint is there (a loaded
    // machine may give the checkpointing thread its turn late; at most 60 s).
    let start = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(3));
    while profile_files(&measurements) < 9 && start.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let kill = run(Command::new("kill").args(["-KILL", &pid.to_string()]));
    assert!(kill.status.success(), "kill -KILL {pid}");
    let out = child.wait_with_output().expect("hpcrun-rs ends");
    // The launcher reports the program's death like the shell would.
    assert_eq!(shell_status(&out.status), 128 + 9);
    let profiles = read_profiles(&measurements);
    // Main thread + 8 workers, each exactly once, all checkpoints.
    assert_eq!(profiles.len(), 9, "{profiles:#?}");
    let tids: std::collections::HashSet<u32> = profiles.iter().map(|p| p.thread.tid).collect();
    assert_eq!(tids.len(), 9);
    assert!(profiles.iter().all(|p| p.stats.checkpoints == 1));
    // The 8 workers computed for 3 s: by the checkpoint at 2 s, even a
    // loaded 2-core machine gave them far more than 40 ms of CPU time.
    let samples: u64 = profiles.iter().map(|p| p.stats.samples).sum();
    assert!(samples >= 20, "{samples} samples");
    let summary = merge(&dir, &measurements);
    assert!(
        summary.contains("9 of 9 profiles are checkpoints of a run that did not finish"),
        "{summary}"
    );
}

/// A run that ends normally, with several checkpoints on the way: each
/// thread's final profile replaced its checkpoint (one file per thread,
/// none marked as a checkpoint, no temporary file left), so nothing is
/// counted twice.
#[test]
fn a_finished_run_replaces_its_checkpoints() {
    let dir = scratch("checkpointed");
    let exe = compile_test_program("threads_killed.c", &dir, &["-pthread"]);
    let (out, measurements) = hpcrun_with(&dir, &["--checkpoint", "0.2"], &exe, &["3"]);
    let stdout = ok_stdout(&out, "hpcrun-rs threads_killed 3");
    assert!(stdout.ends_with("done\n"), "{stdout}");
    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 9);
    assert!(profiles.iter().all(|p| p.stats.checkpoints == 0));
    let names: Vec<String> = std::fs::read_dir(&measurements)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    // The final profiles hold the whole run: the workers computed for 3 s
    // of wall time, far more than the first checkpoint (0.2 s) saw. Their
    // CPU time, hence their samples, shrinks with the machine's load: 104
    // samples in 1.5 s were seen beside two busy loops and the file's other
    // tests, so the run is 3 s.
    let samples: u64 = profiles.iter().map(|p| p.stats.samples).sum();
    eprintln!("threads_killed 3 with checkpoints: {samples} samples");
    assert!(samples >= 50, "{samples} samples");
    let summary = merge(&dir, &measurements);
    assert!(!summary.contains("checkpoints"), "{summary}");
}

/// When the kernel cannot queue a sample's real-time signal (the per-user
/// limit of pending signals, here lowered to 1 with `ulimit -i`), it sends
/// SIGIO, whose default action ends the program. The program must run to
/// its end with its own output, the lost samples must be counted, and the
/// notice must name the queue, not a blocked signal.
#[test]
fn a_full_signal_queue_never_ends_the_program() {
    let dir = scratch("sigio");
    let exe = compile_test_program("threads1000.c", &dir, &["-pthread"]);
    let native = run(&mut Command::new(&exe));
    let measurements = dir.join("measurements");
    let out = run(Command::new("bash")
        .arg("-c")
        .arg("ulimit -i 1 && exec \"$@\"")
        .arg("bash")
        .arg(tool("hpcrun-rs"))
        .args(["-e", "mem:soft@20000", "-o"])
        .arg(&measurements)
        .arg(&exe));
    assert_eq!(
        ok_stdout(&out, "hpcrun-rs threads1000 with ulimit -i 1"),
        ok_stdout(&native, "threads1000")
    );
    let full: u64 = read_profiles(&measurements)
        .iter()
        .map(|p| {
            p.stats
                .dropped
                .get("signal queue full")
                .copied()
                .unwrap_or(0)
        })
        .sum();
    assert!(full > 0, "no sample signal overflowed the queue of 1");
    // (A thread whose every signal met the full queue may also be named
    // by the "received almost none" notice: SIGIO is not queued, so not
    // every lost signal is counted. Not asserted either way.)
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines().filter(|l| l.contains("queue of pending")) {
        assert!(line.contains("ulimit -i"), "{line}");
    }
}
