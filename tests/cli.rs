//! The command-line surfaces, run as a user would: launches that fail leave
//! nothing behind, one run per output directory (also when launched
//! concurrently or under Slurm), signals to hpcrun-rs reach the program,
//! a closed stderr, errors that say what to do, and `hpcprof-rs --force`
//! deleting only databases.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use pipeline_tests::*;

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
        let out = run(hpcrun_alone(&dir, "m").arg(program));
        assert_eq!(out.status.code(), Some(2), "{program}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{program}: {}", stderr(&out));
        assert!(!dir.join("m").exists(), "{program} left m/ behind");
    }
    // mpirun refusing to run as root: it ran, measured nothing.
    if is_root() && Command::new("mpirun").arg("--version").output().is_ok() {
        let out = run(hpcrun_alone(&dir, "m")
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
    let out = run(hpcrun_alone(&dir, "kept").args(["sh", "-c", "kill -KILL $$"]));
    assert_eq!(shell_status(&out.status), 128 + 9, "{}", stderr(&out));
    assert!(dir.join("kept").is_dir());
    assert!(!dir.join("kept/.hpcrun-run").exists(), "{}", stderr(&out));
    let out = run(hpcrun_alone(&dir, "m").arg("true"));
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
    let out = run(hpcrun_alone(&dir, "m").arg("true"));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("reclaimed"), "{err}");
    assert!(err.contains("1 profile(s)"), "{err}");
    let again = run(hpcrun_alone(&dir, "m").arg("true"));
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
            hpcrun_alone(&dir, "m")
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
/// launches one run; the tasks of one srun step share the directory, but
/// a second hpcrun-rs in one task of the step (`srun -n 2 sh -c
/// 'hpcrun-rs ./a; hpcrun-rs ./b'`) is a run of its own and is refused,
/// not mixed into the first (it has the same run id: hpcprof-rs could
/// not tell them apart).
#[test]
fn slurm_launches_are_separate_runs_unless_ranks_of_one_step() {
    let dir = scratch("cli-slurm");
    let launch = |out: &str, task: Option<&str>, program: &str| {
        let mut cmd = hpcrun_alone(&dir, out);
        cmd.env("SLURM_JOB_ID", "777").env_remove("SLURM_PROCID");
        if let Some(task) = task {
            cmd.env("SLURM_STEP_ID", "0")
                .env("SLURM_STEP_NUM_TASKS", "2")
                .env("SLURM_SRUN_COMM_PORT", "40001")
                .env("SLURM_PROCID", task);
        }
        run(cmd.arg(program))
    };
    assert!(launch("batch", None, "true").status.success());
    let second = launch("batch", None, "true");
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    assert!(stderr(&second).contains("already holds measurements"));
    assert!(launch("step", Some("0"), "true").status.success());
    let rank = launch("step", Some("1"), "true");
    assert!(rank.status.success(), "{}", stderr(&rank));
    assert!(stderr(&rank).contains("2 profile(s)"), "{}", stderr(&rank));
    // The step's tasks each run a second program into the same directory.
    for task in ["0", "1"] {
        let again = launch("step", Some(task), "ls");
        assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
        assert!(
            stderr(&again).contains(&format!(
                "into which rank {task} already ran hpcrun-rs: this is a second hpcrun-rs in the same task"
            )),
            "{}",
            stderr(&again)
        );
        assert!(again.stdout.is_empty(), "the program ran");
    }
    let files: Vec<String> = std::fs::read_dir(dir.join("step"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".hpcrun"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.iter().all(|f| f.starts_with("true.")), "{files:?}");
}

/// A program that prints "ready" and then waits for signals; `trap`s
/// `sig` with exit status 3.
fn start_trapping(dir: &Path, out: &str, sig: &str) -> (std::process::Child, u32) {
    let script =
        format!("trap 'echo got {sig}; exit 3' {sig}; echo ready; while :; do sleep 0.05; done");
    // A shell cannot trap a signal that was ignored when it started (under
    // `nohup` SIGHUP is, in a background job of a script SIGINT is): the
    // program starts with the default dispositions, whatever the test's.
    let mut child = hpcrun_alone(dir, out)
        .args(["env", "--default-signal=TERM,INT,HUP,USR1,USR2"])
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

/// The program starts with the signal mask and dispositions it inherits
/// natively: the signals hpcrun-rs blocks to forward them are unblocked
/// in the program only where its parent had not blocked them, and a
/// SIGPIPE its parent ignores stays ignored (a parent that blocks SIGUSR1
/// and SIGTERM and ignores SIGPIPE and SIGUSR2, here perl, passes them on
/// so). Before, the forwarded signals were unblocked and SIGPIPE reset to
/// its default (Rust's runtime and `Command` do that) whatever the
/// parent's.
#[test]
fn the_program_inherits_the_signal_mask_and_dispositions() {
    let dir = scratch("cli-mask");
    // /proc/self/status's SigBlk and SigIgn lines of `cmd`, signals 1-31
    // (glibc keeps 32 and 33 for itself: a program cannot use them, and
    // any threaded process between the parent and the program resets
    // them).
    let masks = |out: std::process::Output| -> Vec<String> {
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (name, hex) = l.split_once(":\t")?;
                let bits = u64::from_str_radix(hex.trim(), 16).ok()? & 0x7fff_ffff;
                matches!(name, "SigBlk" | "SigIgn").then(|| format!("{name} {bits:#x}"))
            })
            .collect()
    };
    // `perl ... cmd...`: runs cmd with SIGUSR1 and SIGTERM blocked and
    // SIGPIPE and SIGUSR2 ignored.
    let from_perl = |cmd: &mut Command| -> Vec<String> {
        let mut perl = Command::new("perl");
        perl.current_dir(&dir).args([
            "-MPOSIX",
            "-e",
            "sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGUSR1, SIGTERM)); $SIG{PIPE} = $SIG{USR2} = 'IGNORE'; exec @ARGV or die",
        ]);
        perl.arg(cmd.get_program()).args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => perl.env(k, v),
                None => perl.env_remove(k),
            };
        }
        masks(run(&mut perl))
    };
    let status = ["grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"];
    let native = from_perl(Command::new(status[0]).args(&status[1..]));
    // SIGUSR1 (10) and SIGTERM (15) blocked: bits 9 and 14; SIGUSR2 (12)
    // and SIGPIPE (13) ignored: bits 11 and 12, with whatever the test
    // itself inherited (a job started in the background by a shell
    // ignores SIGINT and SIGQUIT).
    let bits = |line: &str| u64::from_str_radix(line.split_once(" 0x").unwrap().1, 16).unwrap();
    assert_eq!(native.len(), 2, "{native:?}");
    assert_eq!(bits(&native[0]) & 0x4200, 0x4200, "{native:?}");
    assert_eq!(bits(&native[1]) & 0x1800, 0x1800, "{native:?}");
    assert_eq!(from_perl(hpcrun_alone(&dir, "m").args(status)), native);
    // Started as the test was: the test's mask and dispositions.
    let native = masks(run(Command::new(status[0]).args(&status[1..])));
    assert_eq!(native.len(), 2);
    assert_eq!(masks(run(hpcrun_alone(&dir, "m2").args(status))), native);
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
    let mut child = hpcrun_alone(&dir, "plain")
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
    let out = run(hpcrun_alone(&dir, "m").args(["--min-byte", "10", "ls"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("'--min-byte'") && err.contains("similar argument exists: '--min-bytes'"),
        "{err}"
    );
    assert!(!err.contains("command not found"), "{err}");
    assert!(!dir.join("m").exists());
    // Options of the program stay the program's.
    let out = run(hpcrun_alone(&dir, "m").args(["ls", "-la", "--color=never"]));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `hpcrun-rs -o DIR true` then `hpcprof-rs -o DB DIR` in `dir`.
fn measure_and_merge(dir: &Path, m: &str, db: &str) {
    let out = run(hpcrun_alone(dir, m).arg("true"));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(Command::new(tool("hpcprof-rs"))
        .current_dir(dir)
        .args(["-o", db, m]));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `hpcprof-rs --force -o DIR` replaces a database, and refuses (keeping
/// every file) a directory whose profile.db is not one, or that holds
/// anything a database does not.
#[test]
fn force_deletes_only_a_database() {
    let dir = scratch("cli-force");
    measure_and_merge(&dir, "m", "db");
    let force = |out: &str| {
        run(Command::new(tool("hpcprof-rs"))
            .current_dir(&dir)
            .args(["--force", "-o", out, "m"]))
    };
    // A thesis with a text file named profile.db.
    std::fs::create_dir_all(dir.join("thesis/sub")).unwrap();
    std::fs::write(dir.join("thesis/thesis.tex"), "x").unwrap();
    std::fs::write(dir.join("thesis/sub/data.csv"), "x").unwrap();
    std::fs::write(dir.join("thesis/profile.db"), "my notes").unwrap();
    let out = force("thesis");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not an hpcprof-rs database")
            && stderr(&out).contains("does not start with the database header"),
        "{}",
        stderr(&out)
    );
    for f in [
        "thesis/thesis.tex",
        "thesis/sub/data.csv",
        "thesis/profile.db",
    ] {
        assert!(dir.join(f).is_file(), "{f} deleted");
    }
    // A real database plus a file of the user's.
    std::fs::create_dir_all(dir.join("db2")).unwrap();
    std::fs::copy(dir.join("db/profile.db"), dir.join("db2/profile.db")).unwrap();
    std::fs::write(dir.join("db2/notes.txt"), "mine").unwrap();
    let out = force("db2");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("also holds notes.txt"),
        "{}",
        stderr(&out)
    );
    assert!(dir.join("db2/notes.txt").is_file());
    // A real database whose src/ holds a file it did not copy there.
    std::fs::create_dir_all(dir.join("db3/src/home/me")).unwrap();
    std::fs::copy(dir.join("db/profile.db"), dir.join("db3/profile.db")).unwrap();
    std::fs::write(dir.join("db3/src/home/me/thesis.tex"), "mine").unwrap();
    let out = force("db3");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("its src/ holds db3/src/home/me/thesis.tex, which is no copy of a source file its profile.db names"),
        "{}",
        stderr(&out)
    );
    assert!(dir.join("db3/src/home/me/thesis.tex").is_file());
    // A database: replaced.
    let out = force("db");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.join("db/profile.db").is_file());
}

/// Each tool recognises a measurements directory, a database and a
/// measurement file, and says which command takes it; a mistyped
/// subcommand gets "did you mean"; -e mistakes say what is wrong.
#[test]
fn errors_say_which_command_takes_it() {
    let dir = scratch("cli-hints");
    measure_and_merge(&dir, "measurements", "db");
    let hpcprof = |args: &[&str]| {
        run(Command::new(tool("hpcprof-rs"))
            .current_dir(&dir)
            .args(args))
    };
    let expect = |out: std::process::Output, says: &[&str]| {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        for s in says {
            assert!(err.contains(s), "{s:?} not in {err}");
        }
    };
    expect(
        hpcprof(&["exprot", "db"]),
        &[
            "unrecognized subcommand 'exprot'",
            "similar subcommand exists: 'export'",
        ],
    );
    expect(
        hpcprof(&["db"]),
        &["db is a database", "hpcview-tui db", "hpcprof-rs export db"],
    );
    expect(
        hpcprof(&["export", "measurements/"]),
        &[
            "measurements/ is a measurements directory",
            "merge it first with `hpcprof-rs -o db measurements/`",
        ],
    );
    expect(hpcprof(&["advise", "measurements"]), &["merge it first"]);
    expect(
        hpcprof(&["diff", "db", "measurements"]),
        &["merge it first"],
    );
    let file = std::fs::read_dir(dir.join("measurements"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "hpcrun"))
        .unwrap();
    expect(
        hpcprof(&[file.to_str().unwrap()]),
        &[
            "is one measurement file",
            "merges the directory that holds it",
        ],
    );
    let view = run(Command::new(tool("hpcview-tui"))
        .current_dir(&dir)
        .args(["measurements", "--report"]));
    expect(
        view,
        &[
            "measurements is a measurements directory",
            "hpcprof-rs -o db measurements",
            "then `hpcview-tui db`",
        ],
    );
    // hpcrun-rs -e mistakes.
    let out =
        run(hpcrun_alone(&dir, "m2").args(["-e", "page-faults", "-e", "page-faults", "true"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("page-faults is given more than once"),
        "{}",
        stderr(&out)
    );
    let out = run(hpcrun_alone(&dir, "m3").args(["-e", "mem:soft@99999999999999999999", "true"]));
    expect(out, &["period 99999999999999999999", "is too large"]);
}

/// The README's quick start is two commands, the demo then the tests; its
/// usage block runs as pasted, line by line, from a copy of the
/// repository's examples with the tools on PATH.
#[test]
fn readme_usage_block_runs_as_pasted() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("\n```").next())
        .collect();
    let quick = readme
        .split("## Quick start")
        .nth(1)
        .and_then(|q| q.split("```sh\n").nth(1))
        .and_then(|b| b.split("\n```").next())
        .expect("a quick start block");
    assert_eq!(
        quick.lines().collect::<Vec<_>>(),
        [
            "sh examples/abc/demo.sh",
            "cargo test --workspace --no-fail-fast"
        ]
    );
    let usage = blocks[0];
    let dir = scratch("cli-readme");
    std::fs::create_dir_all(dir.join("examples/abc")).unwrap();
    std::fs::copy(
        root().join("examples/abc/abc.c"),
        dir.join("examples/abc/abc.c"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        tools().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for line in usage.lines() {
        let out = run(Command::new("sh")
            .current_dir(&dir)
            .env("PATH", &path)
            .args(["-c", line]));
        assert!(
            out.status.success(),
            "README line failed: {line}\n{}",
            stderr(&out)
        );
    }
    assert!(dir.join("db/profile.db").is_file());
    assert!(dir.join("after.db/profile.db").is_file());
}

/// The demo's measuring and merging commands (read from demo.sh) leave
/// only the summary lines on stderr: one from hpcrun-rs, one from
/// hpcprof-rs. hpcprof-rs adds the profiler's time (and the slow-handler
/// note) only when it is 3% or more of the sampled CPU time: with the
/// release build the demo measured about 1%, but these tests run the
/// debug build, whose handler is slower (and a loaded machine stretches
/// it), so here the lines may come, and then must state a share of 3% or
/// more.
#[test]
fn the_demo_prints_only_summary_lines() {
    let demo = std::fs::read_to_string(root().join("examples/abc/demo.sh")).unwrap();
    let dir = scratch("cli-demo");
    let out = dir.join("target/abc-demo");
    std::fs::create_dir_all(&out).unwrap();
    compile_c("abc/abc.c", &out, &[]);
    let commands: Vec<&str> = demo
        .lines()
        .filter(|l| l.starts_with("\"$bin/hpcrun-rs\"") || l.starts_with("\"$bin/hpcprof-rs\""))
        .collect();
    assert_eq!(commands.len(), 2, "{demo}");
    let mut lines = Vec::new();
    for cmd in commands {
        let o = run(Command::new("sh")
            .current_dir(&dir)
            .env("bin", tools())
            .env("out", "target/abc-demo")
            .args(["-c", cmd]));
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        lines.extend(stderr(&o).lines().map(str::to_string));
    }
    assert!(
        lines[0].starts_with("hpcrun-rs: target/abc-demo/abc ("),
        "{lines:#?}"
    );
    assert!(
        lines[1].starts_with("hpcprof-rs: merged 1 profiles"),
        "{lines:#?}"
    );
    for line in &lines[2..] {
        let share: f64 = line
            .split_once("took ")
            .or_else(|| line.split_once("together "))
            .and_then(|(_, rest)| rest.split('%').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("an unexpected line: {line}\n{lines:#?}"));
        assert!(share >= 3.0, "said at {share}%: {lines:#?}");
    }
    assert!(lines.len() <= 4, "{lines:#?}");
}

/// `page-faults` samples every 256th fault unless told otherwise, and
/// `--list-events` and the closing line say so.
#[test]
fn page_faults_have_a_default_period_that_is_shown() {
    let dir = scratch("cli-page-faults");
    let list = run(Command::new(tool("hpcrun-rs")).arg("--list-events"));
    let text = ok_stdout(&list, "hpcrun-rs --list-events");
    assert!(
        text.contains(
            "default: page-faults@256 (every 256th fault; page-faults@1 samples every fault)"
        ),
        "{text}"
    );
    let out = run(hpcrun_alone(&dir, "m").args(["-e", "mem:soft", "-e", "page-faults", "true"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("page-faults every 256 faults"),
        "{}",
        stderr(&out)
    );
}

/// `mpirun -np 3 hpcrun-rs ./app`: one closing line for the run, by the
/// last launcher, counting every rank's profile.
#[test]
fn one_closing_line_per_mpi_run() {
    if !have_tool("mpirun", "openmpi-bin") {
        return;
    }
    let dir = scratch("cli-mpi");
    let out = run(Command::new("mpirun")
        .current_dir(&dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", "3"])
        .arg(tool("hpcrun-rs"))
        .args(["-e", "mem:latency", "-o", "m", "sh", "-c", "echo rank"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let ours: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("hpcrun-rs: "))
        .collect();
    // Without a PMU, mem:latency falls back with a note: said once (rank 0).
    let (notes, closing): (Vec<&str>, Vec<&str>) =
        ours.iter().partition(|l| l.contains("is not available"));
    assert!(notes.len() <= 1, "{err}");
    assert_eq!(closing.len(), 1, "{err}");
    assert!(closing[0].contains("3 profile(s)"), "{err}");
}

/// `hpcrun-rs --help` lists every event `--list-events` knows.
#[test]
fn help_lists_every_event() {
    let help = ok_stdout(
        &run(Command::new(tool("hpcrun-rs")).arg("--help")),
        "hpcrun-rs --help",
    );
    let list = ok_stdout(
        &run(Command::new(tool("hpcrun-rs")).arg("--list-events")),
        "hpcrun-rs --list-events",
    );
    let events = help.split("EVENTS:").nth(1).expect("an EVENTS section");
    for name in list
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
    {
        assert!(
            events.lines().any(|l| l.trim_start().starts_with(name)),
            "{name} missing under EVENTS:\n{events}"
        );
    }
}

/// Ctrl-C in a terminal reaches the program once: the terminal sends it
/// to the whole foreground process group, so hpcrun-rs does not forward
/// it again (in tmux; skipped without it).
#[test]
fn ctrl_c_in_a_terminal_reaches_the_program_once() {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "CI must provide tmux");
        eprintln!("SKIPPED: tmux not found; install tmux to run this test");
        return;
    }
    let dir = scratch("cli-ctrl-c");
    std::fs::write(
        dir.join("prog.sh"),
        "n=0\ntrap 'n=$((n+1)); echo \"INT $n\"' INT\necho ready\n\
         while [ ! -e stop ]; do sleep 0.05; done\necho \"done n=$n\"\n",
    )
    .unwrap();
    let session = format!("hpcrun-cli-{}", std::process::id());
    let shell = format!(
        "cd {}; {} -o m sh prog.sh; echo rc=$?; sleep 600",
        dir.display(),
        tool("hpcrun-rs").display()
    );
    // A private server (-L), killed at the end.
    let tmux = |args: &[&str]| run(Command::new("tmux").args(["-L", &session]).args(args));
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "20",
        &shell,
    ]);
    assert!(started.status.success(), "{}", stderr(&started));
    let screen = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &session]).stdout).into_owned()
    };
    let wait_for = |what: &str| {
        for _ in 0..1200 {
            let s = screen();
            if s.contains(what) {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let s = screen();
        tmux(&["kill-server"]);
        panic!("no {what:?} on the screen:\n{s}");
    };
    wait_for("ready");
    tmux(&["send-keys", "-t", &session, "C-c"]);
    wait_for("INT 1");
    std::fs::write(dir.join("stop"), "").unwrap();
    let s = wait_for("rc=");
    tmux(&["kill-server"]);
    assert!(s.contains("done n=1"), "{s}");
    assert!(!s.contains("INT 2"), "{s}");
    assert!(s.contains("rc=0"), "{s}");
}

/// A launcher killed with SIGKILL while its program runs: the program
/// still measures into the directory, so another run is refused until
/// the program is gone too; then the marker is reclaimed. (The program is
/// `sleep` itself: a shell that execs it would write its own profile at
/// the exec whenever a sample reached it first, and a directory with a
/// profile is refused for good.)
#[test]
fn a_killed_launchers_running_program_keeps_the_directory() {
    let dir = scratch("cli-orphan");
    let mut launcher = hpcrun_alone(&dir, "m")
        .args(["sleep", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The launcher's child, once it runs `sleep`.
    let program = loop {
        let out = run(Command::new("pgrep").args(["-P", &launcher.id().to_string()]));
        let child = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .ok();
        let sleeping = child.is_some_and(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        match child {
            Some(pid) if sleeping => break pid,
            _ => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    };
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    let refused = run(hpcrun_alone(&dir, "m").arg("true"));
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("is measuring into"),
        "{}",
        stderr(&refused)
    );
    run(Command::new("kill").args(["-KILL", &program.to_string()]));
    // SIGKILL ends it; the test waits (no time limit on correctness) until
    // its /proc entry is gone (it is reparented and reaped by init).
    while Path::new(&format!("/proc/{program}/environ")).exists()
        && std::fs::read(format!("/proc/{program}/environ")).is_ok_and(|e| !e.is_empty())
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = run(hpcrun_alone(&dir, "m").arg("true"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("reclaimed"), "{}", stderr(&out));
}
