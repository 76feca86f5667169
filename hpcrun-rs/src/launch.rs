//! Preparing the environment and running the command.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use hpcrun_abi::env;
use object::Object;

use crate::events;
use crate::Args;

/// File name of the preload library.
pub const PRELOAD_NAME: &str = "libhpcrun_preload.so";

/// The preload library: `HPCRUN_PRELOAD`, else next to this executable.
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
    let candidate = dir.join(PRELOAD_NAME);
    if candidate.is_file() {
        return Ok(candidate);
    }
    bail!(
        "cannot find {PRELOAD_NAME} next to {} (build it with `cargo build -p hpcrun-preload`, or set HPCRUN_PRELOAD to its path)",
        exe.display()
    )
}

/// The command's executable, resolved through PATH.
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
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

/// Name of the file that marks which run a measurement directory belongs to.
pub const RUN_MARKER: &str = ".hpcrun-run";

/// The id of the parallel job this process belongs to, when it was started
/// by a launcher (`mpirun -np 64 hpcrun-rs ./app`): every rank's
/// hpcrun-rs derives the same id, so they share one output directory.
pub fn job_id() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(ns) = var("PMIX_NAMESPACE") {
        return Some(format!("pmix-{ns}"));
    }
    if let Some(job) = var("OMPI_MCA_ess_base_jobid") {
        return Some(format!("ompi-{job}"));
    }
    if let Some(job) = var("SLURM_JOB_ID") {
        let step = var("SLURM_STEP_ID").unwrap_or_default();
        return Some(format!("slurm-{job}.{step}"));
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

/// Creates the output directory for run `run_id`. A directory that already
/// holds measurement files is refused unless it is marked as belonging to
/// this same run (the other ranks of one MPI job).
fn prepare_output(dir: &Path, run_id: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let marker = dir.join(RUN_MARKER);
    let owner = std::fs::read_to_string(&marker).ok();
    if owner.as_deref().map(str::trim) == Some(run_id) {
        return Ok(dir);
    }
    let existing = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.path()
                .extension()
                .is_some_and(|x| x == formats::measurement::EXTENSION)
        })
        .count();
    if existing > 0 || owner.is_some() {
        bail!(
            "{} already holds measurements of another run ({existing} file(s)); choose a new directory with -o, or remove them",
            dir.display()
        );
    }
    // Concurrent ranks of one job may race here: whoever writes last wins,
    // and they all write the same id.
    std::fs::write(&marker, format!("{run_id}\n"))
        .with_context(|| format!("cannot write {}", marker.display()))?;
    Ok(dir)
}

pub fn run(args: &Args) -> Result<u8> {
    let (chosen, notes) = events::choose(&args.events, args.strict)?;
    for note in notes {
        eprintln!("hpcrun-rs: {note}");
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
    let resolved = resolve(program);
    match &resolved {
        Some(p) => check_not_static(p)?,
        None => bail!("command not found: {program}"),
    }
    let run_id = job_id().unwrap_or_else(|| {
        format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        )
    });
    let out = prepare_output(&args.output, &run_id)?;

    let mut ld_preload = OsString::new();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|s| !s.is_empty()) {
        ld_preload.push(existing);
        ld_preload.push(" ");
    }
    ld_preload.push(preload.as_os_str());
    // The variables the preload reads; only these (all set) are passed.
    let mut vars: Vec<(&str, OsString)> = vec![
        ("LD_PRELOAD", ld_preload),
        (env::OUT, out.clone().into_os_string()),
        (env::EVENTS, events::env_value(&chosen).into()),
        (env::HISTOGRAM, args.histogram.clone().into()),
        (env::NUMA, if args.numa { "1" } else { "0" }.into()),
        (env::MIN_BYTES, args.min_bytes.to_string().into()),
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
    let mut command = Command::new(program);
    command.args(&args.command[1..]);
    if hw_attr.is_none() {
        command.env_remove(env::HW_ATTR);
    }
    for (name, value) in &vars {
        command.env(name, value);
    }
    // Open MPI forwards only listed variables to ranks on other hosts: add
    // ours to its list (MPICH's Hydra and Slurm forward the environment).
    // Open MPI warns about every listed variable that is not set, so the
    // list holds exactly the variables set above.
    command.env("OMPI_MCA_mca_base_env_list", ompi_env_list(&vars));
    let status = command
        .status()
        .with_context(|| format!("cannot run {program}"))?;

    let files = std::fs::read_dir(&out)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.path()
                        .extension()
                        .is_some_and(|x| x == formats::measurement::EXTENSION)
                })
                .count()
        })
        .unwrap_or(0);
    for line in crate::notices::lines(&out) {
        eprintln!("{line}");
    }
    eprintln!(
        "hpcrun-rs: {} ({}{}): {files} profile(s) in {}",
        program,
        events::describe(&chosen),
        timer_kind(&args.timer, &chosen),
        out.display()
    );
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        _ => 1,
    })
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
