//! Signal coexistence and killed runs (issue 20): a program that uses the
//! profiler's signal keeps its behaviour and the profile keeps its
//! samples; a program that blocks the signal is reported, not silent.

use std::path::Path;
use std::process::{Command, Output};

use pipeline_tests::*;

/// Runs `program args` under `hpcrun-rs EXTRA... -o DIR/measurements`.
fn hpcrun_with(dir: &Path, extra: &[&str], program: &Path, args: &[&str]) -> (Output, std::path::PathBuf) {
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

/// The program of the issue: its own handler for SIGRTMIN+OFF, raised
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
    let native = ok_stdout(&run(&mut Command::new(&exe).arg("libc")), "native block_signal");
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

/// Blocked with the raw system call, past the interposition: the threads
/// get no samples, and both tools say why and what to do.
#[test]
fn a_signal_blocked_past_the_interposition_is_reported_with_the_fix() {
    let dir = scratch("block-raw");
    let exe = compile_test_program("block_signal.c", &dir, &["-pthread"]);
    let (out, measurements) = hpcrun_with(&dir, &[], &exe, &["raw"]);
    assert_eq!(ok_stdout(&out, "hpcrun-rs block_signal raw"), "hits 0\n");
    assert_eq!(samples_of(&measurements), 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notice: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("received almost none"))
        .collect();
    assert_eq!(notice.len(), 1, "{stderr}");
    assert!(
        notice[0].contains("SIGRTMIN+4") && notice[0].contains("--signal N") && notice[0].contains("(5 threads)"),
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
    assert_eq!(ok_stdout(&out, "hpcrun-rs --signal 6 block_signal raw"), "hits 0\n");
    assert!(samples_of(&measurements) >= 50);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}
