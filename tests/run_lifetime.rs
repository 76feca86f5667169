//! What the profiler adds to the life of the program's processes and
//! threads, run natively and under the real `hpcrun-rs`: no thread of
//! the profiler while the program has one thread (after it joined its
//! others too: `unshare(CLONE_NEWUSER)` and the thread count behave as
//! natively), the checkpoint helper back while the program has several,
//! and a daemon that outlives the program is waited for, counted and
//! merged.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use pipeline_tests::*;

/// The names of the threads of process `pid`.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the task list") {
        let comm = task.expect("a task").path().join("comm");
        if let Ok(name) = std::fs::read_to_string(comm) {
            names.push(name.trim().to_string());
        }
    }
    names
}

/// The thread names of process `pid` once `done` holds for them, or
/// after `secs` seconds.
fn names_within(pid: u32, secs: u64, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = std::time::Instant::now();
    loop {
        let names = thread_names(pid);
        if done(&names) || start.elapsed() >= std::time::Duration::from_secs(secs) {
            return names;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The pid of the only child of process `parent`.
fn child_of(parent: u32) -> u32 {
    let out = run(Command::new("pgrep").args(["-P", &parent.to_string()]));
    let text = String::from_utf8_lossy(&out.stdout);
    let pids: Vec<u32> = text
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    assert_eq!(pids.len(), 1, "children of {parent}: {text}");
    pids[0]
}

/// A program that runs two threads and joins them finds itself alone:
/// one entry in /proc/self/task, and `unshare(CLONE_NEWUSER)` (which
/// needs a single-threaded process) succeeds, as natively. Before, the
/// checkpoint helper outlived the program's threads and unshare failed
/// with EINVAL.
#[test]
fn a_program_that_joined_its_threads_is_single_threaded_again() {
    let dir = scratch("lifetime-joined");
    let exe = compile_test_program("threads_then_alone.c", &dir, &["-pthread"]);
    let native = run(&mut Command::new(&exe));
    let want = ok_stdout(&native, "native threads_then_alone");
    assert!(want.starts_with("tasks 1\nunshare 0 ok\n"), "{want}");
    for (i, opts) in [
        &["-e", "mem:soft@200000", "--checkpoint", "0.1"][..],
        &["-e", "mem:soft"][..],
    ]
    .into_iter()
    .enumerate()
    {
        let measurements = dir.join(format!("measurements{i}"));
        let out = run(Command::new(tool("hpcrun-rs"))
            .args(opts)
            .arg("-o")
            .arg(&measurements)
            .arg(&exe));
        assert_eq!(
            ok_stdout(&out, "hpcrun-rs threads_then_alone"),
            want,
            "{opts:?}"
        );
        // The main thread and both workers.
        assert_eq!(read_profiles(&measurements).len(), 3, "{opts:?}");
    }
}

/// The helper comes and goes with the program's threads: none while the
/// program waits alone after joining its first two threads (checked from
/// outside, in /proc), back while its third thread runs, gone again
/// after it was joined; the program prints what it prints natively.
#[test]
fn the_checkpoint_helper_comes_back_with_a_thread_and_goes_with_it() {
    let dir = scratch("lifetime-step");
    let exe = compile_test_program("threads_then_alone.c", &dir, &["-pthread"]);
    let measurements = dir.join("measurements");
    let mut outputs = Vec::new();
    for profiled in [false, true] {
        let mut cmd = if profiled {
            let mut c = Command::new(tool("hpcrun-rs"));
            c.args(["-e", "mem:soft", "--checkpoint", "0.2", "-o"])
                .arg(&measurements)
                .arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let mut child = cmd
            .arg("step")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start threads_then_alone");
        let pid = if profiled {
            // The launcher's child, once it exists.
            let mut lines = BufReader::new(child.stdout.take().unwrap());
            let mut text = String::new();
            let mut line = String::new();
            while !text.ends_with("alone\n") {
                line.clear();
                assert!(lines.read_line(&mut line).unwrap() > 0, "{text}");
                text.push_str(&line);
            }
            let pid = child_of(child.id());
            assert_eq!(thread_names(pid).len(), 1, "alone: {:?}", thread_names(pid));
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin).unwrap();
            line.clear();
            lines.read_line(&mut line).unwrap();
            assert_eq!(line, "thread running\n");
            text.push_str(&line);
            // The helper names itself once it first runs (`prctl`, no
            // file opened): on a loaded machine that can come after the
            // program's thread has printed.
            let names = names_within(pid, 10, |names| {
                names.len() == 3 && names.iter().any(|n| n == "hpcrun-ckpt")
            });
            assert!(
                names.len() == 3 && names.iter().any(|n| n == "hpcrun-ckpt"),
                "with a second thread: {names:?}"
            );
            writeln!(stdin).unwrap();
            drop(stdin);
            let mut rest = String::new();
            std::io::Read::read_to_string(&mut lines, &mut rest).unwrap();
            text.push_str(&rest);
            let status = child.wait().unwrap();
            assert!(status.success(), "{status:?}");
            outputs.push(text);
            pid
        } else {
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin).unwrap();
            writeln!(stdin).unwrap();
            drop(stdin);
            let out = child.wait_with_output().unwrap();
            outputs.push(ok_stdout(&out, "native threads_then_alone step"));
            0
        };
        let _ = pid;
    }
    assert_eq!(outputs[1], outputs[0]);
    assert!(
        outputs[0].contains("stepped ") && outputs[0].matches("tasks 1\n").count() == 2,
        "{}",
        outputs[0]
    );
    assert_eq!(read_profiles(&measurements).len(), 4);
}

/// Waits up to `secs` seconds for `path` to exist.
fn wait_for_file(path: &Path, secs: u64) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(secs) {
        if path.exists() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// A program that starts a daemon (fork, setsid, fork; the first two
/// exit at once, the original with status 3) whose grandchild works
/// about 2 s, writes a result file and exits. hpcrun-rs ends as the
/// program does (same output, status 3) but only once the daemon has
/// ended: its result file is there when hpcrun-rs returns, the closing
/// line counts the profiles of all three processes, and the daemon's
/// table is an object of hpcprof-rs's database, with samples. Before,
/// the launcher saw its child end, removed the "empty" directory and
/// blamed a raw exit_group or SIGKILL; the daemon's profile was lost.
#[test]
fn a_daemon_that_outlives_the_program_is_waited_for_and_merged() {
    let dir = scratch("lifetime-daemon");
    let exe = compile_test_program("daemonize.c", &dir, &[]);
    let native_result = dir.join("native-result");
    let native = run(Command::new(&exe).arg(&native_result));
    assert_eq!(native.status.code(), Some(3), "native: {native:?}");
    assert!(
        wait_for_file(&native_result, 120),
        "the native daemon wrote no result"
    );
    let result = dir.join("result");
    let measurements = dir.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .args(["-e", "mem:soft", "-o"])
        .arg(&measurements)
        .arg(&exe)
        .arg(&result));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(out.stdout, native.stdout, "{stderr}");
    assert!(
        result.exists(),
        "hpcrun-rs returned before the daemon ended: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&result).unwrap(),
        std::fs::read_to_string(&native_result).unwrap()
    );
    let profiles = read_profiles(&measurements);
    let pids: std::collections::HashSet<u32> = profiles.iter().map(|p| p.process.pid).collect();
    assert_eq!(
        pids.len(),
        3,
        "the original, the middle process and the daemon: {stderr}"
    );
    assert!(
        stderr.contains(&format!("exit status 3; {} profile(s) in ", profiles.len())),
        "{stderr}"
    );
    let data = merge_and_export(&dir, &measurements);
    let objects = data["objects"].as_array().expect("objects");
    let text = std::fs::read_to_string(root().join("tests/programs/daemonize.c")).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("double *daemon_table = malloc"))
        .unwrap() as u64
        + 1;
    let table = heap_object_at(objects, "daemonize.c", line)
        .unwrap_or_else(|| panic!("no object at daemonize.c:{line}: {objects:#?}"));
    assert!(samples(table) > 0, "{table:#}");
}

/// The same daemon working for a minute: SIGTERM to hpcrun-rs while it
/// waits (as `timeout` or a batch system sends it) stops the waiting
/// without passing it on; hpcrun-rs ends with the program's status, its
/// closing line names the daemon still running, and the directory stays:
/// the daemon, ended later, writes its profile there.
#[test]
fn sigterm_to_the_launcher_stops_the_waiting_and_the_daemon_writes_later() {
    let dir = scratch("lifetime-handover");
    let exe = compile_test_program("daemonize.c", &dir, &[]);
    let measurements = dir.join("measurements");
    let mut launcher = Command::new(tool("hpcrun-rs"))
        .args(["-e", "mem:soft", "-o"])
        .arg(&measurements)
        .arg(&exe)
        .arg(dir.join("result"))
        .arg("60")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hpcrun-rs");
    let mut stderr = BufReader::new(launcher.stderr.take().unwrap());
    let mut text = String::new();
    let mut line = String::new();
    while !text.contains("waiting for 1 process of the run") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "{text}");
        text.push_str(&line);
    }
    let kill = run(Command::new("kill").args(["-TERM", &launcher.id().to_string()]));
    assert!(kill.status.success());
    // To the end of the pipe: the daemon sent its standard error to
    // /dev/null, so (as natively) nothing of it holds the launcher's
    // (the library's duplicate went with it), and the pipe ends with the
    // launcher while the daemon still runs.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        let _ = tx.send(rest);
    });
    let rest = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("the launcher's standard error stays open: {text}"));
    text.push_str(&rest);
    assert!(text.contains("exit status 3;"), "{text}");
    let status = launcher.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{text}");
    assert!(
        text.contains("of the run still running (pid ") && text.contains("(daemonize)"),
        "{text}"
    );
    assert!(measurements.is_dir(), "{text}");
    let daemon: u32 = text
        .split("still running (pid ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text}"));
    // The daemon itself still runs (its own SIGTERM ends it; its profile
    // is written first).
    assert!(Path::new(&format!("/proc/{daemon}")).exists(), "{text}");
    let kill = run(Command::new("kill").args(["-TERM", &daemon.to_string()]));
    assert!(kill.status.success());
    let start = std::time::Instant::now();
    let pid_written = || {
        read_profiles(&measurements)
            .iter()
            .any(|p| p.process.pid == daemon)
    };
    while !pid_written() && start.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(pid_written(), "the daemon's profile never came: {text}");
}
