//! Losses reach the database: the run manifest hpcrun-rs writes beside
//! the profiles lets hpcprof-rs list what is missing, and the JSON export
//! and the report's header show it.
//!
//! * A program that fills the disk of its measurements directory (a
//!   small tmpfs, mounted here; the test says so and passes where mounting
//!   is not allowed, outside CI): its main thread's final profile cannot
//!   be written; its checkpoint remains, and the manifest, whose space was
//!   reserved at start, says why.
//! * A threaded program killed with SIGKILL mid-way: every thread's
//!   profile is a checkpoint; the viewer's status line (drawn with
//!   ratatui's `TestBackend`) names the first loss with the part of the
//!   run its checkpoint kept, and how many more there are.
//! * Two MPI ranks, one of whose profiles are gone from the directory.
//! * A real 2-rank run interrupted as Ctrl-C does (SIGINT to the whole
//!   foreground process group) while both ranks work: `mpirun` ends the
//!   ranks (SIGTERM, then SIGKILL to those left as soon as one ended),
//!   and every rank still writes its final profile.

use std::path::{Path, PathBuf};
use std::process::Command;

use hpcview_tui::state::model::Model;
use hpcview_tui::state::AppState;
use hpcview_tui::view::{self, Theme};
use pipeline_tests::*;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// `hpcview-tui DB --report`'s text.
fn report(db: &Path) -> String {
    let out = run(Command::new(tool("hpcview-tui")).arg(db).arg("--report"));
    ok_stdout(&out, "hpcview-tui --report")
}

/// The `losses` of the database's JSON export.
fn losses(db: &Path) -> Vec<serde_json::Value> {
    export_json(db, "data")["losses"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A tmpfs of `size` mounted at `at` for as long as it lives.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let out = run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at));
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot mount a tmpfs in CI: {why}"
            );
            eprintln!("skipped: cannot mount a tmpfs here (needs root): {why}");
            return None;
        }
        Some(Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_final_profile_lost_to_a_full_disk_is_in_the_database() {
    let dir = scratch("losses-full-disk");
    let exe = compile_test_program("fill_disk.c", &dir, &[]);
    let Some(disk) = Tmpfs::mount(&dir.join("disk"), "4m") else {
        return;
    };
    let measurements = disk.0.join("measurements");
    let out = run(Command::new(tool("hpcrun-rs"))
        .arg("-o")
        .arg(&measurements)
        .arg(&exe)
        .arg(&disk.0));
    assert_eq!(
        ok_stdout(&out, "fill_disk under hpcrun-rs"),
        "full\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (merged, db) = merge(&dir, &measurements);
    let said = String::from_utf8_lossy(&merged.stderr);
    let lost = losses(&db);
    let main = lost
        .iter()
        .find(|l| l["thread"] == 0)
        .unwrap_or_else(|| panic!("no loss of the main thread: {lost:?}\n{said}"));
    assert_eq!(main["kind"], "checkpoint", "{main}");
    let reason = main["reason"].as_str().unwrap();
    assert!(reason.contains("No space left on device"), "{main}");
    // The checkpoint (due 1 s after the start) covers part of the run.
    let (kept, ran) = (
        main["kept_s"].as_f64().unwrap(),
        main["run_s"].as_f64().unwrap(),
    );
    assert!(kept > 0.5 && kept < ran, "{main}");
    let text = main["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "process: main thread's final profile could not be written: No space left on device"
        ),
        "{text}"
    );
    assert!(said.contains(&format!("lost: {text}")), "{said}");
    let header = report(&db);
    assert!(header.contains(&format!("Lost: {text}")), "{header}");

    // The viewer's status line (the screen's last line) keeps the losses
    // in sight: the first one's whole sentence, with the seconds its
    // checkpoint kept of the run, and the count of the others (how many
    // threads had their final profile refused depends on when the disk
    // filled).
    let last = viewer_status_line(&db);
    let first = &lost[0];
    let (kept, ran) = (
        first["kept_s"].as_f64().unwrap(),
        first["run_s"].as_f64().unwrap(),
    );
    let share = format!("(checkpoint at {kept:.1} s of {ran:.1} s used)");
    let first_text = first["text"].as_str().unwrap();
    assert!(first_text.ends_with(&share), "{first_text}");
    let more = match lost.len() {
        1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    assert!(
        last.starts_with(&format!(" lost: {first_text}{more} ")),
        "status line: {last}"
    );
    assert!(last.contains("?:help"), "status line: {last}");
}

/// The last line of the viewer's first screen on `db`, 250 columns wide
/// (ratatui's `TestBackend`).
fn viewer_status_line(db: &Path) -> String {
    let mut app = AppState::new(Model::open(db).expect("open the database"));
    let mut term = Terminal::new(TestBackend::new(250, 40)).unwrap();
    term.draw(|f| view::draw(f, &mut app, Theme { color: false }))
        .unwrap();
    let screen = view::text(term.backend().buffer());
    screen.lines().last().unwrap_or_default().to_string()
}

#[test]
fn a_run_killed_mid_way_has_its_checkpoints_told() {
    let dir = scratch("losses-killed");
    let exe = compile_test_program("threads_killed.c", &dir, &["-pthread"]);
    let measurements = dir.join("measurements");
    let mut child = Command::new(tool("hpcrun-rs"))
        .arg("-o")
        .arg(&measurements)
        .arg(&exe)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start hpcrun-rs");
    // The first checkpoint is due 1 s after the start: wait for the nine
    // profiles (main thread and 8 workers), at most 20 s on a loaded
    // machine.
    let start = std::time::Instant::now();
    let count = || {
        std::fs::read_dir(&measurements)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "hpcrun"))
                    .count()
            })
            .unwrap_or(0)
    };
    while start.elapsed() < std::time::Duration::from_secs(20) && count() < 9 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pids = run(Command::new("pgrep").args(["-P", &child.id().to_string()]));
    for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
        run(Command::new("kill").args(["-KILL", pid]));
    }
    let _ = child.wait();
    assert_eq!(count(), 9, "checkpoints of the main thread and 8 workers");
    let (_, db) = merge(&dir, &measurements);
    let lost = losses(&db);
    assert_eq!(lost.len(), 9, "{lost:?}");
    assert!(lost.iter().all(|l| l["kind"] == "checkpoint"), "{lost:?}");
    let main = lost.iter().find(|l| l["thread"] == 0).expect("main thread");
    let text = main["text"].as_str().unwrap();
    assert!(
        text.starts_with("process: main thread's final profile missing (checkpoint at "),
        "{text}"
    );
    assert!(text.ends_with(" s used)"), "{text}");
    let (kept, ran) = (
        main["kept_s"].as_f64().unwrap(),
        main["run_s"].as_f64().unwrap(),
    );
    assert!(kept > 0.0 && kept <= ran, "{main}");
    let header = report(&db);
    assert!(header.contains(&format!("Lost: {text}")), "{header}");
}

#[test]
fn an_mpi_rank_whose_profiles_are_gone_is_told() {
    if !have_tool("mpicc", "openmpi-bin and libopenmpi-dev") {
        return;
    }
    let dir = scratch("losses-mpi");
    let exe = compile_mpi(
        "mpicc",
        "examples/mpi_stencil/mpi_stencil.c",
        &dir,
        &["-fopenmp"],
    );
    let measurements = dir.join("measurements");
    let out = run(Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .env("OMP_NUM_THREADS", "2")
        .env("OMPI_MCA_orte_tmpdir_base", scratch("losses-mpi-session"))
        .arg(tool("hpcrun-rs"))
        .arg("-o")
        .arg(&measurements)
        .arg(&exe)
        .arg("4"));
    ok_stdout(&out, "mpirun hpcrun-rs");
    // Rank 1's profiles go missing (a node's files not copied back).
    let mut removed = 0;
    for entry in std::fs::read_dir(&measurements).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".hpcrun") && name.contains(".r1.") {
            std::fs::remove_file(entry.path()).unwrap();
            removed += 1;
        }
    }
    assert!(removed > 0, "no profile of rank 1 to remove");
    let (merged, db) = merge(&dir, &measurements);
    let said = String::from_utf8_lossy(&merged.stderr);
    let lost = losses(&db);
    assert!(!lost.is_empty(), "{said}");
    assert!(lost.iter().all(|l| l["rank"] == 1), "{lost:?}");
    let main = lost
        .iter()
        .find(|l| l["thread"] == 0)
        .unwrap_or_else(|| panic!("rank 1's main thread: {lost:?}"));
    let text = main["text"].as_str().unwrap();
    assert_eq!(
        text,
        "rank 1: main thread's profile missing (written, not in the directory)"
    );
    assert!(report(&db).contains(&format!("Lost: {text}")));
}

/// Starts `cmd` in a process group of its own (as a shell starts a
/// foreground job) with SIGINT at its default action (a test run as a
/// background job inherits it ignored), waits until both ranks wrote
/// their marker in `dir`, sends SIGINT to the whole group as a
/// terminal's Ctrl-C does, and returns how the command ended.
fn interrupt_when_started(cmd: &mut Command, dir: &Path) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    // SAFETY: `signal` is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = cmd
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the run");
    let started = std::time::Instant::now();
    let marker = |rank: u32| dir.join(format!("started.{rank}")).exists();
    while !(marker(0) && marker(1)) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the ranks did not start within 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Both ranks are in their loop, which reads the arrays.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: kill with a process group id and a signal number.
    let sent = unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGINT) };
    assert_eq!(sent, 0, "kill(-pgid, SIGINT)");
    child.wait_with_output().expect("wait for the run")
}

/// The `mpirun` arguments of the interrupted runs, with a session
/// directory of its own under `dir`.
fn mpirun_args(cmd: &mut Command, dir: &Path, exe: &Path) {
    cmd.args([
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        "2",
    ])
    .env("OMPI_MCA_orte_tmpdir_base", dir)
    .arg(exe)
    .arg(dir);
}

#[test]
fn an_mpi_run_interrupted_by_ctrl_c_keeps_every_ranks_final_profile() {
    if !have_tool("mpicc", "openmpi-bin and libopenmpi-dev") {
        return;
    }
    let dir = scratch("losses-mpi-ctrl-c");
    let exe = compile_mpi("mpicc", "tests/programs/mpi_interrupted.c", &dir, &[]);
    // Natively first: how an interrupted mpirun ends.
    let native_dir = dir.join("native");
    std::fs::create_dir_all(&native_dir).unwrap();
    let mut native = Command::new("env");
    mpirun_args(&mut native, &native_dir, &exe);
    let native = interrupt_when_started(&mut native, &native_dir);
    let measured_dir = dir.join("measured");
    std::fs::create_dir_all(&measured_dir).unwrap();
    let measurements = dir.join("measurements");
    let mut measured = Command::new(tool("hpcrun-rs"));
    measured.arg("-o").arg(&measurements);
    mpirun_args(&mut measured, &measured_dir, &exe);
    let measured = interrupt_when_started(&mut measured, &measured_dir);
    let said = String::from_utf8_lossy(&measured.stderr);
    assert_eq!(
        shell_status(&measured.status),
        shell_status(&native.status),
        "hpcrun-rs mpirun ended as {}, mpirun natively as {}\n{said}",
        measured.status,
        native.status
    );
    // Every rank's manifest records its final profiles.
    let manifest = formats::manifest::read_dir(&measurements).expect("the run manifest");
    let ranks: Vec<(Option<u32>, bool)> = manifest
        .processes
        .iter()
        .map(|p| (p.rank, p.finals.contains_key(&0) && p.exit.is_some()))
        .collect();
    let mut final_ranks: Vec<u32> = ranks
        .iter()
        .filter(|(_, done)| *done)
        .filter_map(|(rank, _)| *rank)
        .collect();
    final_ranks.sort_unstable();
    assert_eq!(final_ranks, vec![0, 1], "{ranks:?}\n{said}");
    let (merged, db) = merge(&dir, &measurements);
    let merged_said = String::from_utf8_lossy(&merged.stderr);
    let lost = losses(&db);
    assert!(lost.is_empty(), "{lost:?}\n{merged_said}");
    assert!(!report(&db).contains("Lost:"), "{merged_said}");
    // Both ranks' arrays (one allocation site) hold the samples of the loop.
    let data = export_json(&db, "data");
    let top = &data["objects"][0];
    assert_eq!(top["name"], "field", "{top}");
    assert_eq!(top["allocations"], 2, "{top}");
}
