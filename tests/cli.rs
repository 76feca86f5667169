//! The command-line surfaces, run as a user would: launches that fail leave
//! nothing behind, one run per output directory (also when launched
//! concurrently or under Slurm), signals to hpcrun-rs reach the program,
//! a closed stderr, errors that say what to do, and `hpcprof-rs --force`
//! deleting only databases.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use pipeline_tests::*;

/// `hpcrun-rs -o DIR ARGS...` in `dir`, with no parallel-job variables
/// from the environment the tests run in.
fn hpcrun_cmd(dir: &Path, out: &str) -> Command {
    let mut cmd = Command::new(tool("hpcrun-rs"));
    cmd.current_dir(dir).args(["-o", out]);
    for var in [
        "PMIX_NAMESPACE",
        "OMPI_MCA_ess_base_jobid",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_NTASKS",
        "PMI_RANK",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A program that cannot start fails with a message that says why, and
/// leaves no marker (no directory) behind: the next run into the same
/// directory works with no cleanup.
#[test]
fn failed_launches_leave_nothing_behind() {
    let dir = scratch("cli-failed");
    std::fs::create_dir_all(dir.join("a_directory")).unwrap();
    std::fs::write(dir.join("not_executable.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::write(dir.join("bad_interp.sh"), "#!/nonexistent/sh\necho hi\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.join("bad_interp.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    for (program, says) in [
        ("./nosuch", "no such file"),
        ("no_such_command_anywhere", "command not found"),
        ("./a_directory", "is a directory"),
        ("./not_executable.sh", "not executable"),
        ("./bad_interp.sh", "interpreter /nonexistent/sh"),
    ] {
        let out = run(hpcrun_cmd(&dir, "m").arg(program));
        assert_eq!(out.status.code(), Some(2), "{program}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{program}: {}", stderr(&out));
        assert!(!dir.join("m").exists(), "{program} left m/ behind");
    }
    // mpirun refusing to run as root: it ran, measured nothing.
    if is_root() && Command::new("mpirun").arg("--version").output().is_ok() {
        let out = run(hpcrun_cmd(&dir, "m")
            .env_remove("OMPI_ALLOW_RUN_AS_ROOT")
            .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
            .args(["mpirun", "-np", "1", "true"]));
        assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            !dir.join("m/.hpcrun-run").exists(),
            "mpirun's refusal left the marker: {}",
            stderr(&out)
        );
    }
    // A program that runs and measures nothing (an existing directory):
    // the directory stays, the marker goes.
    std::fs::create_dir_all(dir.join("kept")).unwrap();
    let out = run(hpcrun_cmd(&dir, "kept").args(["sh", "-c", "kill -KILL $$"]));
    assert_eq!(shell_status(&out.status), 128 + 9, "{}", stderr(&out));
    assert!(dir.join("kept").is_dir());
    assert!(!dir.join("kept/.hpcrun-run").exists(), "{}", stderr(&out));
    let out = run(hpcrun_cmd(&dir, "m").arg("true"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.join("m/.hpcrun-run").is_file());
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The marker of a launch whose launcher is gone and that measured
/// nothing is reclaimed with a note; one of a run that measured is not.
#[test]
fn a_stale_marker_is_reclaimed_with_a_note() {
    let dir = scratch("cli-stale");
    std::fs::create_dir_all(dir.join("m")).unwrap();
    std::fs::write(
        dir.join("m/.hpcrun-run"),
        "4242-1\npid 4242\nhost elsewhere\n",
    )
    .unwrap();
    let out = run(hpcrun_cmd(&dir, "m").arg("true"));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("reclaimed"), "{err}");
    assert!(err.contains("1 profile(s)"), "{err}");
    let again = run(hpcrun_cmd(&dir, "m").arg("true"));
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("already holds measurements"));
}

/// Six launches into one directory at once, each program waiting on its
/// stdin until all are started: exactly one is accepted.
#[test]
fn concurrent_launches_into_one_directory_take_turns() {
    let dir = scratch("cli-concurrent");
    let mut children: Vec<_> = (0..6)
        .map(|_| {
            hpcrun_cmd(&dir, "m")
                .args(["sh", "-c", "read x"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start hpcrun-rs")
        })
        .collect();
    for c in &mut children {
        let _ = c.stdin.take().map(|mut s| s.write_all(b"go\n"));
    }
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("hpcrun-rs ends"))
        .collect();
    let accepted = outs.iter().filter(|o| o.status.success()).count();
    let report: Vec<String> = outs.iter().map(stderr).collect();
    assert_eq!(accepted, 1, "{report:#?}");
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert_eq!(o.status.code(), Some(2));
        let e = stderr(o);
        assert!(
            e.contains("is measuring into") || e.contains("already holds measurements"),
            "{e}"
        );
    }
}

/// SLURM_JOB_ID alone (a batch script's own commands) does not make two
/// launches one run; the tasks of one srun step share the directory.
#[test]
fn slurm_launches_are_separate_runs_unless_ranks_of_one_step() {
    let dir = scratch("cli-slurm");
    let launch = |out: &str, step: bool| {
        let mut cmd = hpcrun_cmd(&dir, out);
        cmd.env("SLURM_JOB_ID", "777");
        if step {
            cmd.env("SLURM_STEP_ID", "0")
                .env("SLURM_STEP_NUM_TASKS", "2")
                .env("SLURM_SRUN_COMM_PORT", "40001");
        }
        run(cmd.arg("true"))
    };
    assert!(launch("batch", false).status.success());
    let second = launch("batch", false);
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    assert!(stderr(&second).contains("already holds measurements"));
    assert!(launch("step", true).status.success());
    let rank = launch("step", true);
    assert!(rank.status.success(), "{}", stderr(&rank));
    assert!(stderr(&rank).contains("2 profile(s)"), "{}", stderr(&rank));
}

/// A program that prints "ready" and then waits for signals; `trap`s
/// `sig` with exit status 3.
fn start_trapping(dir: &Path, out: &str, sig: &str) -> (std::process::Child, u32) {
    let script =
        format!("trap 'echo got {sig}; exit 3' {sig}; echo ready; while :; do sleep 0.05; done");
    let mut child = hpcrun_cmd(dir, out)
        .args(["sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hpcrun-rs");
    let pid = child.id();
    let mut line = String::new();
    let mut reader = std::io::BufReader::new(child.stdout.as_mut().unwrap());
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    (child, pid)
}

/// SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 sent to hpcrun-rs reach the
/// program; hpcrun-rs waits for it, writes its closing line and exits as
/// the program did; a program killed by the signal kills the launcher with
/// it.
#[test]
fn signals_to_the_launcher_reach_the_program() {
    let dir = scratch("cli-signals");
    for (i, sig) in ["TERM", "INT", "HUP", "USR1", "USR2"].iter().enumerate() {
        let (child, pid) = start_trapping(&dir, &format!("m{i}"), sig);
        let kill = run(Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]));
        assert!(kill.status.success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{sig}: {}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("got {sig}\n"));
        assert!(
            stderr(&out).contains("exit status 3; "),
            "{sig}: {}",
            stderr(&out)
        );
    }
    // No trap: the program dies of SIGTERM, and so does the launcher,
    // after its closing line.
    let mut child = hpcrun_cmd(&dir, "plain")
        .args(["sh", "-c", "echo ready; while :; do sleep 0.05; done"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(15), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("killed by signal 15"),
        "{}",
        stderr(&out)
    );
}

/// `hpcrun-rs ./app 2>&1 | head -1` ends like `./app | head -1`: killed by
/// SIGPIPE (141 in the shell), no panic.
#[test]
fn a_closed_stderr_is_not_a_panic() {
    let dir = scratch("cli-pipe");
    let script = r#""$0" -o m yes 2>&1 | head -1; echo "status ${PIPESTATUS[0]}"; yes | head -1; echo "native ${PIPESTATUS[0]}""#;
    let out = run(Command::new("bash")
        .current_dir(&dir)
        .args(["-c", script])
        .arg(tool("hpcrun-rs")));
    let text = ok_stdout(&out, "bash");
    assert_eq!(text, "y\nstatus 141\ny\nnative 141\n", "{}", stderr(&out));
}

/// A mistyped option before the program is an option error with clap's
/// suggestion, never taken for the program.
#[test]
fn unknown_options_get_did_you_mean() {
    let dir = scratch("cli-options");
    let out = run(hpcrun_cmd(&dir, "m").args(["--min-byte", "10", "ls"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("'--min-byte'") && err.contains("similar argument exists: '--min-bytes'"),
        "{err}"
    );
    assert!(!err.contains("command not found"), "{err}");
    assert!(!dir.join("m").exists());
    // Options of the program stay the program's.
    let out = run(hpcrun_cmd(&dir, "m").args(["ls", "-la", "--color=never"]));
    assert!(out.status.success(), "{}", stderr(&out));
}
