//! Preparing the environment and running the command: the program is
//! checked before anything is created (found, a file, executable, its
//! interpreter there, not static), the output directory is taken with the
//! run marker ([`crate::marker`]), the program runs with the preload
//! library and the `HPCRUN_*` variables, signals to the launcher are
//! forwarded to it ([`crate::signals`]); the processes of the run that
//! outlive it are waited for ([`crate::descendants`]), and the last
//! launcher of the run prints the closing line.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use hpcrun_abi::env;
use object::Object;

use crate::descendants;
use crate::events;
use crate::marker;
use crate::signals::{self, Ended};
use crate::{say, Args};

/// File name of the preload library.
pub const PRELOAD_NAME: &str = "libhpcrun_preload.so";

/// The preload library: `HPCRUN_PRELOAD`, else next to this executable,
/// else in `../lib/hpc-memprof/` from it (`install.sh`).
pub fn find_preload() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env::PRELOAD) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("HPCRUN_PRELOAD names {}, which is not a file", p.display());
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("cannot find the hpcrun-rs executable")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    // Next to the executable (the build tree), or where install.sh puts
    // it (PREFIX/bin/hpcrun-rs, PREFIX/lib/hpc-memprof/).
    let candidates = [
        dir.join(PRELOAD_NAME),
        dir.join("../lib/hpc-memprof").join(PRELOAD_NAME),
    ];
    if let Some(found) = candidates.iter().find(|c| c.is_file()) {
        return Ok(found.clone());
    }
    bail!(
        "cannot find {PRELOAD_NAME} next to {} nor in {} (build it with `cargo build -p hpcrun-preload`, install with `sh install.sh`, or set HPCRUN_PRELOAD to its path)",
        exe.display(),
        dir.join("../lib/hpc-memprof").display()
    )
}

/// The command's executable: `program` itself when it names a path, else
/// the first executable file of that name in PATH. Errors say what is
/// wrong with it and what to do, before anything is created.
fn resolve(program: &str) -> Result<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        check_runnable(&path, program)?;
        return Ok(path);
    }
    let candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    if let Some(p) = candidates.iter().find(|p| executable(p)) {
        check_interpreter(p, program)?;
        return Ok(p.clone());
    }
    match candidates.first() {
        Some(p) => bail!(
            "cannot run {program}: {} is not executable (chmod +x it)",
            p.display()
        ),
        None if program.starts_with('-') => bail!(
            "unknown option {program} (see hpcrun-rs --help; a program whose name starts with '-' goes after --)"
        ),
        None => bail!("command not found: {program} (not in PATH; give its path, e.g. ./{program})"),
    }
}

/// `access(path, X_OK)`.
fn executable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// `path` (given as `shown`) exists, is a file and can be executed.
fn check_runnable(path: &Path, shown: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("cannot run {shown}: no such file")
        }
        Err(e) => Err(e).with_context(|| format!("cannot run {shown}")),
        Ok(m) if m.is_dir() => bail!("cannot run {shown}: it is a directory, not a program"),
        Ok(_) if !executable(path) => bail!(
            "cannot run {shown}: it is not executable (chmod +x {shown}, or name its interpreter: hpcrun-rs sh {shown})"
        ),
        Ok(_) => check_interpreter(path, shown),
    }
}

/// The interpreter of a script: its `#!` line's program, if any.
fn interpreter(path: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?.trim();
    text.split_whitespace().next().map(PathBuf::from)
}

/// A script whose `#!` interpreter does not exist cannot start.
fn check_interpreter(path: &Path, shown: &str) -> Result<()> {
    if let Some(interp) = interpreter(path) {
        if !interp.exists() {
            bail!(
                "cannot run {shown}: its interpreter {} (its #! line) does not exist",
                interp.display()
            );
        }
    }
    Ok(())
}

/// Refuses statically linked executables, which ignore LD_PRELOAD.
fn check_not_static(program: &Path) -> Result<()> {
    let Ok(bytes) = std::fs::read(program) else {
        return Ok(()); // Let the exec report it.
    };
    let Ok(file) = object::File::parse(&*bytes) else {
        return Ok(()); // A script or another format: not our business.
    };
    if let object::File::Elf64(elf) = &file {
        use object::read::elf::ProgramHeader;
        let endian = elf.endian();
        let has_interp = elf
            .elf_program_headers()
            .iter()
            .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP);
        let is_exec = file.kind() == object::ObjectKind::Executable
            || file.kind() == object::ObjectKind::Dynamic;
        if is_exec && !has_interp {
            bail!(
                "{} is statically linked: LD_PRELOAD cannot reach it, so it cannot be measured (rebuild it without -static)",
                program.display()
            );
        }
    }
    Ok(())
}

/// The id of the parallel job this process is one rank of, when it was
/// started by a launcher with several ranks (`mpirun -np 64 hpcrun-rs
/// ./app`, `srun -n 64 hpcrun-rs ./app`): every rank's hpcrun-rs derives
/// the same id, so they share one output directory. None for a launch of
/// its own (then the id is unique to this invocation).
pub fn job_id() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(ns) = var("PMIX_NAMESPACE") {
        return Some(format!("pmix-{ns}"));
    }
    if let Some(job) = var("OMPI_MCA_ess_base_jobid") {
        return Some(format!("ompi-{job}"));
    }
    if let (Some(job), Some(step)) = (var("SLURM_JOB_ID"), var("SLURM_STEP_ID")) {
        // A step of srun (not the batch script, 0xfffffffe, nor the
        // extern step) with several tasks; a batch script's own commands
        // are launches of their own, whatever SLURM_JOB_ID says.
        let real_step = step.parse::<u32>().is_ok_and(|s| s < 0xffff_fff0);
        let tasks = var("SLURM_STEP_NUM_TASKS")
            .or_else(|| var("SLURM_NTASKS"))
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(1);
        if real_step && tasks > 1 {
            let srun = var("SLURM_SRUN_COMM_PORT").unwrap_or_default();
            return Some(format!("slurm-{job}.{step}.{srun}"));
        }
        return None;
    }
    if var("PMI_RANK").is_some() {
        // MPICH's Hydra: the ranks of one host share their proxy process.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        return Some(format!(
            "hydra-{}-{}",
            host.trim(),
            std::os::unix::process::parent_id()
        ));
    }
    None
}

/// This process's rank in its parallel job, if the launcher says.
fn job_rank() -> Option<u64> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

/// A run id unique to this invocation: pid and start time (ns).
fn own_run_id() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

pub fn run(args: &Args) -> Result<Ended> {
    let job = job_id();
    // Notes that every rank would repeat: rank 0 says them.
    let speaks = job.is_none() || job_rank().unwrap_or(0) == 0;
    let (chosen, notes) = events::choose(&args.events, args.strict)?;
    if speaks {
        for note in notes {
            say(&format!("hpcrun-rs: {note}"));
        }
    }
    let hw_attr = match chosen
        .iter()
        .find(|c| c.name.starts_with("mem:") && c.name != "mem:soft")
    {
        Some(c) => events::hardware_env(c)?,
        None => None,
    };
    let preload = find_preload()?;
    let program = &args.command[0];
    let resolved = resolve(program)?;
    check_not_static(&resolved)?;
    let run_id = job.clone().unwrap_or_else(own_run_id);
    // A rank of a parallel job: the run's other launchers share its id,
    // each rank starting one of them.
    let rank = job.as_ref().and_then(|_| job_rank());
    let (marker, acquired) = marker::acquire(&args.output, &run_id, rank)?;
    if let Some(note) = acquired.note {
        say(&format!("hpcrun-rs: {note}"));
    }
    let out = marker.dir.clone();

    // First in the list: its malloc family comes before that of any other
    // preloaded library (LD_PRELOAD=libtcmalloc.so), which it forwards
    // to, so the program's blocks are seen and still served by the
    // allocator the program chose.
    let mut ld_preload = OsString::from(preload.as_os_str());
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|s| !s.is_empty()) {
        ld_preload.push(" ");
        ld_preload.push(existing);
    }
    // The variables the preload reads; only these (all set) are passed.
    let mut vars: Vec<(&str, OsString)> = vec![
        ("LD_PRELOAD", ld_preload),
        (env::OUT, out.clone().into_os_string()),
        (env::EVENTS, events::env_value(&chosen).into()),
        (env::HISTOGRAM, args.histogram.clone().into()),
        (env::NUMA, if args.numa { "1" } else { "0" }.into()),
        (env::MIN_BYTES, args.min_bytes.to_string().into()),
        (
            env::MAX_TRACKING_MEMORY,
            args.max_tracking_memory.unwrap_or(0).to_string().into(),
        ),
        (
            env::ALLOC_LOG,
            if args.alloc_log { "1" } else { "0" }.into(),
        ),
        (env::TIMER, args.timer.clone().into()),
        (env::RUN_ID, run_id.into()),
        (env::SIGNAL, args.signal.to_string().into()),
        (env::CHECKPOINT, args.checkpoint.clone().into()),
    ];
    if let Some(attr) = &hw_attr {
        vars.push((env::HW_ATTR, attr.into()));
    }
    let mut command = Command::new(&resolved);
    command.arg0(program).args(&args.command[1..]);
    if hw_attr.is_none() {
        command.env_remove(env::HW_ATTR);
    }
    for (name, value) in &vars {
        command.env(name, value);
    }
    // For this host's processes only (not in Open MPI's list): the program
    // tells the signals forwarded to it from those it got directly.
    command.env(env::LAUNCHER_PID, std::process::id().to_string());
    // Open MPI forwards only listed variables to ranks on other hosts: add
    // ours to its list (MPICH's Hydra and Slurm forward the environment).
    // Open MPI warns about every listed variable that is not set, so the
    // list holds exactly the variables set above.
    command.env("OMPI_MCA_mca_base_env_list", ompi_env_list(&vars));
    // SAFETY: the closure calls only async-signal-safe functions
    // (pthread_sigmask, signal, close, getrlimit, setrlimit).
    unsafe {
        command.pre_exec(|| {
            crate::inherited::restore_in_child();
            signals::unblock_in_child()
        })
    };
    let started_ns = now_unix_ns();
    // Daemons and background jobs of the program come back to the
    // launcher when their parent ends, not to init.
    descendants::become_subreaper();
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            // Nothing ran: leave no marker behind.
            marker.finish(false);
            let why = match (e.raw_os_error(), interpreter(&resolved)) {
                (Some(libc::ENOENT), Some(interp)) => format!(
                    "its interpreter {} (its #! line) cannot be run",
                    interp.display()
                ),
                (Some(libc::ENOEXEC), _) => {
                    "it is not a program this system can run (no #! line?)".to_string()
                }
                _ => e.to_string(),
            };
            bail!("cannot run {program}: {why}");
        }
    };
    signals::forward_to(child.id());
    let status = loop {
        match child.wait() {
            Ok(s) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                marker.finish(false);
                return Err(e).with_context(|| format!("cannot wait for {program}"));
            }
        }
    };
    let ended = Ended::of(status);
    write_run_record(&out, started_ns, ended);
    // The processes of the run that outlived the program write their
    // profiles when they end: waited for, unless a signal says not to.
    signals::program_ended();
    let running = descendants::wait_for_the_rest(program);

    // One closing line per run: the last launcher of the run says it
    // (without flock, rank 0), when every rank's files are there.
    let files = marker::profiles_in(&out);
    let last = marker.finish(!running.is_empty()).unwrap_or(speaks);
    if last {
        for line in crate::notices::lines(&out) {
            say(&line);
        }
        for line in crate::notices::message_file_lines(&out) {
            say(&line);
        }
        let place = match (files, running.is_empty()) {
            (0, true) => NO_PROFILE.to_string(),
            (0, false) => format!(
                "no profile yet: {} of the run still running ({}) write theirs into {} when they end",
                descendants::processes(running.len()),
                descendants::list(&running),
                out.display()
            ),
            (_, true) => format!("{files} profile(s) in {}", out.display()),
            (_, false) => format!(
                "{files} profile(s) in {} so far; {} of the run still running ({}) add theirs when they end",
                out.display(),
                descendants::processes(running.len()),
                descendants::list(&running)
            ),
        };
        say(&format!(
            "hpcrun-rs: {} ({}{}): {}{place}",
            program,
            events::describe(&chosen),
            timer_kind(&args.timer, &chosen),
            ended_text(ended),
        ));
    }
    Ok(ended)
}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The launcher's line of the run manifest (`formats::manifest`): when
/// the program ran and how it ended, from which hpcprof-rs tells how much
/// of the run a killed process's checkpoint covers. Best effort: a
/// directory that cannot take it only loses that share.
fn write_run_record(out: &Path, started_ns: u64, ended: Ended) {
    let status = match ended {
        Ended::Exited(code) => format!("exit {code}"),
        Ended::Signalled(sig) => format!("signal {sig}"),
    };
    let record = formats::manifest::Record::Run {
        start_ns: started_ns,
        end_ns: now_unix_ns(),
        status,
    };
    let path = out.join(format!(
        "{}run.{}",
        formats::manifest::PREFIX,
        std::process::id()
    ));
    let _ = std::fs::write(path, record.line());
}

/// The closing line's end when the run left no profile: why that happens
/// (a loss is never silent). The preload writes every profile
/// at exit, and a checkpoint one second after the start (a
/// single-threaded program's at its next allocation after that), so
/// nothing means the process ended past the profiler's exit paths before
/// that, the files could not be written, or the library never ran in it.
const NO_PROFILE: &str = "no profile written: the program ended past the profiler's exit (a raw exit_group system call, or SIGKILL) before its first checkpoint (due 1 s after the start; a single-threaded program writes it at its next allocation), its profiles could not be written (the profiler's messages above name the file and the error: a program that changed its user id to one that may not write into the measurements directory, say), or the preload library never ran in it (a wrapper that cleared LD_PRELOAD, such as env -i)";

/// "", or how the program ended when it did not exit with 0.
fn ended_text(ended: Ended) -> String {
    match ended {
        Ended::Exited(0) => String::new(),
        Ended::Exited(code) => format!("exit status {code}; "),
        Ended::Signalled(sig) => format!("killed by signal {sig} ({}); ", signal_name(sig)),
    }
}

fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a static or thread-local string.
    let p = unsafe { libc::strsignal(sig) };
    if p.is_null() {
        return format!("signal {sig}");
    }
    // SAFETY: a NUL-terminated string from libc.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// Open MPI's `mca_base_env_list`: the user's list (if any), then the names
/// of `vars`, separated by `;`.
fn ompi_env_list(vars: &[(&str, OsString)]) -> String {
    let mut names: Vec<String> = std::env::var("OMPI_MCA_mca_base_env_list")
        .ok()
        .filter(|l| !l.is_empty())
        .into_iter()
        .collect();
    names.extend(vars.iter().map(|(name, _)| name.to_string()));
    names.join(";")
}

/// ", CPU-time timer" or ", task-clock event": what `--timer` gives the
/// timer source among `chosen` (`mem:soft`, `cpu-time`), if one runs.
fn timer_kind(timer: &str, chosen: &[events::Chosen]) -> &'static str {
    let timer = hpcrun_abi::config::Timer::parse(timer).unwrap_or(hpcrun_abi::config::Timer::Auto);
    match chosen
        .iter()
        .find(|c| c.name == "mem:soft" || c.name == "cpu-time")
    {
        Some(c) if timer.uses_cpu_timer(c.period) => ", CPU-time timer",
        Some(_) => ", task-clock event",
        None => "",
    }
}
