//! A signal sent to both hpcrun-rs and the program (a `kill` of their
//! process group, or of both pids, as Slurm signals every process of a
//! job step) runs the program's handler once, as natively; a signal sent
//! to hpcrun-rs alone reaches the program as the sender's `kill`; two
//! separate signals stay two. The program (tests/programs/count_signals.c)
//! prints each signal it got with its `si_code` and `si_pid`: the output
//! under hpcrun-rs must be the native one, line for line.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use pipeline_tests::*;

/// Who the test signals.
#[derive(Debug, Clone, Copy)]
enum Send {
    /// SIGUSR1 to the process group (hpcrun-rs and the program).
    Group,
    /// SIGUSR1 to the process group twice, a second apart.
    GroupTwice,
    /// SIGTERM to the process group (ends the program).
    GroupTerm,
    /// SIGUSR1 to hpcrun-rs's pid alone (natively: the program's).
    Launcher,
    /// SIGUSR1 to hpcrun-rs's pid, then to the program's.
    LauncherThenProgram,
    /// SIGUSR1 to the program's pid, then to hpcrun-rs's.
    ProgramThenLauncher,
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill with a pid (or -pgid) the test started, and a signal.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// Runs `count_signals MODE` natively or under hpcrun-rs, in a process
/// group of its own, sends what `send` says once it is ready, ends it
/// with a SIGTERM to the program's pid alone (unless `send` did), and
/// returns its output after the "ready" line and hpcrun-rs's stderr.
fn scenario(exe: &Path, dir: &Path, mode: &str, profiled: bool, send: Send) -> (String, String) {
    let mut cmd = if profiled {
        let mut c = Command::new(tool("hpcrun-rs"));
        c.arg("-o")
            .arg(dir.join(format!("m-{mode}-{send:?}")))
            .arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let mut child = cmd
        .arg(mode)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let group = child.id() as i32;
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    let program: i32 = ready
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("{mode} {send:?}: not ready: {ready:?}"));
    let usr1 = libc::SIGUSR1;
    match send {
        Send::Group => kill(-group, usr1),
        Send::GroupTwice => {
            kill(-group, usr1);
            std::thread::sleep(Duration::from_secs(1));
            kill(-group, usr1);
        }
        Send::GroupTerm => kill(-group, libc::SIGTERM),
        Send::Launcher => kill(group, usr1),
        Send::LauncherThenProgram => {
            kill(group, usr1);
            if profiled {
                kill(program, usr1);
            }
        }
        Send::ProgramThenLauncher => {
            kill(program, usr1);
            if profiled {
                kill(group, usr1);
            }
        }
    }
    if !matches!(send, Send::GroupTerm) {
        // Every copy delivered (the launcher forwards within
        // milliseconds), then the end.
        std::thread::sleep(Duration::from_secs(1));
        kill(program, libc::SIGTERM);
    }
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{mode} {send:?} profiled {profiled}: {status:?}\n{rest}\n{err}"
    );
    (rest, err)
}

/// The output the program prints after `usr1` SIGUSR1 and one SIGTERM,
/// all sent by this test with `kill`.
fn expected(mode: &str, usr1: usize) -> String {
    let me = std::process::id();
    let (code, pid) = if mode == "signal" {
        ("-1".to_string(), "-1".to_string())
    } else {
        ("0".to_string(), me.to_string())
    };
    let mut text = String::new();
    for _ in 0..usr1 {
        text += &format!("usr1 code {code} pid {pid}\n");
    }
    text += &format!("term code {code} pid {pid}\n");
    if mode == "siginfo" {
        text += "term now default\n";
    }
    text + &format!("usr1 {usr1} term 1\n")
}

const MODES: [&str; 3] = ["siginfo", "signal", "wait"];

/// Each case natively and under hpcrun-rs: the same output, the expected
/// one.
fn check(name: &str, cases: &[(Send, usize)]) {
    let dir = scratch(name);
    let exe = compile_test_program("count_signals.c", &dir, &[]);
    for mode in MODES {
        for &(send, usr1) in cases {
            let (native, _) = scenario(&exe, &dir, mode, false, send);
            assert_eq!(native, expected(mode, usr1), "native {mode} {send:?}");
            let (profiled, err) = scenario(&exe, &dir, mode, true, send);
            assert_eq!(profiled, native, "{mode} {send:?}: {err}");
            assert!(
                err.contains("1 profile(s)") && !err.contains("warning"),
                "{mode} {send:?}: {err}"
            );
        }
    }
}

/// `kill -USR1 -- -PGID` of a group holding hpcrun-rs and the program:
/// once, as natively; twice a second apart: twice; `kill -TERM -- -PGID`:
/// the program's SIGTERM handler runs once (its SA_RESETHAND leaves the
/// default action, which a second copy would take).
#[test]
fn a_signal_to_the_process_group_reaches_the_program_once() {
    check(
        "fwd-group",
        &[
            (Send::Group, 1),
            (Send::GroupTwice, 2),
            (Send::GroupTerm, 0),
        ],
    );
}

/// A signal to hpcrun-rs alone reaches the program as the sender's
/// `kill` (`si_code` SI_USER, `si_pid` the sender), as a signal to the
/// program does natively.
#[test]
fn a_signal_to_the_launcher_alone_reaches_the_program_as_a_kill() {
    check("fwd-launcher", &[(Send::Launcher, 1)]);
}

/// The signal sent to each pid of the job step, one after the other, in
/// either order (Slurm's `scancel --signal`): once, as the native
/// program's single one.
#[test]
fn a_signal_to_both_pids_reaches_the_program_once_in_either_order() {
    check(
        "fwd-both",
        &[
            (Send::LauncherThenProgram, 1),
            (Send::ProgramThenLauncher, 1),
        ],
    );
}
