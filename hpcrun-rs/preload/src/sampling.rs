//! Library start-up and the per-thread sample source.
//!
//! `mem:soft` (and `cpu-time`) use a software task-clock perf event per
//! thread, opened by that thread, whose overflow signal (a real-time signal,
//! `SIGRTMIN+4` unless `HPCRUN_SIGNAL` says otherwise) is delivered to that
//! same thread (`F_SETOWN_EX` with `F_OWNER_TID`).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::*};

use crate::{cct, config, ffi, handler, hooks, modules, objects, pmu, soft, threads, writer};

/// Nodes per thread (all four trees).
pub const TREE_CAPACITY: usize = 1 << 16;

static SIGNAL: AtomicI32 = AtomicI32::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);

static CODE_ONLY: AtomicBool = AtomicBool::new(false);

/// True for `cpu-time`: no instruction decoding, no data attribution.
pub fn code_only() -> bool {
    CODE_ONLY.load(Relaxed)
}

/// True while samples should be recorded.
pub fn active() -> bool {
    ACTIVE.load(Relaxed)
}

crate::on_load!(init);

/// Runs at library load (from `.init_array`).
fn init() {
    hooks::without_hooks(|| {
        let cfg = config::get();
        if cfg.out_dir.is_none() {
            // Loaded without hpcrun-rs: stay passive.
            return;
        }
        if is_launcher() {
            // MPI launchers and daemons pass LD_PRELOAD and HPCRUN_* on to
            // the ranks (the environment is left untouched) but are not
            // measured themselves.
            return;
        }
        if !objects::init() {
            return;
        }
        modules::refresh(None);
        soft::warm_up();
        CODE_ONLY.store(cfg.event == "cpu-time", Relaxed);
        let signal = ffi::sigrtmin() + cfg.signal_offset;
        SIGNAL.store(signal, Relaxed);
        // Hardware memory events (mem:latency, mem:stores) drain a perf ring
        // in their own handler.
        let on_signal = match pmu::sampler::setup(&cfg.event, cfg.period_ns) {
            Ok(Some(_)) => handler::on_hw_sample,
            Ok(None) => handler::on_sample,
            Err(e) => {
                writer::warn(&format!("{e}: no samples"));
                handler::on_sample
            }
        };
        if cfg.period_ns > 0 && !ffi::install_handler(signal, on_signal) {
            writer::warn("could not install the sample signal handler; sampling disabled");
        }
        writer::init();
        ffi::at_exit(at_exit);
        for signal in FATAL_SIGNALS {
            ffi::install_fatal_handler(signal, handler::on_fatal);
        }
        ffi::at_fork(after_fork_in_child);
        ACTIVE.store(true, Relaxed);
        hooks::READY.store(true, Release);
        start_thread(threads::next_index());
    });
}

/// Process names of MPI/batch launchers and daemons, which are not measured.
pub const LAUNCHERS: [&str; 14] = [
    "mpirun",
    "mpiexec",
    "orterun",
    "prterun",
    "orted",
    "prted",
    "prte",
    "hydra_pmi_proxy",
    "mpiexec.hydra",
    "mpiexec.openmpi",
    "mpirun.openmpi",
    "srun",
    "slurmstepd",
    "hpcrun-rs",
];

/// True if this process is a launcher (by its executable's file name).
fn is_launcher() -> bool {
    let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("");
    LAUNCHERS.contains(&name)
}

/// Sets up the calling thread: state, exit hook, sampling.
pub fn start_thread(index: u32) {
    if !ACTIVE.load(Relaxed) {
        return;
    }
    let Some(state) = threads::start_current(index, TREE_CAPACITY) else {
        writer::warn("could not map memory for a thread's profile; thread not measured");
        return;
    };
    writer::register_thread_exit(state);
    let cfg = config::get();
    if cfg.period_ns > 0 {
        match pmu::sampler::setup(&cfg.event, cfg.period_ns) {
            Ok(None) => {}
            Ok(Some(setup)) => {
                let signal = Some(SIGNAL.load(Relaxed));
                if let Err(e) = pmu::sampler::start_thread(&state.hw, &state.perf_fd, setup, signal)
                {
                    writer::warn_once(&format!("{e}: no samples"));
                }
                return;
            }
            // Reported at start-up.
            Err(_) => return,
        }
        match ffi::open_task_clock(cfg.period_ns, SIGNAL.load(Relaxed)) {
            Ok(fd) => state.perf_fd.store(fd, Release),
            Err(errno) => writer::warn_once(&format!(
                "perf_event_open(task-clock) failed (errno {errno}): no samples; check /proc/sys/kernel/perf_event_paranoid"
            )),
        }
    }
}

/// Stops a thread's sampling (from any thread).
pub fn stop(state: &threads::ThreadState, close: bool) {
    let fd = state.perf_fd.swap(-1, AcqRel);
    if fd >= 0 {
        if close {
            ffi::close_event(fd);
        } else {
            ffi::disable_event(fd);
        }
    }
    if close {
        pmu::sampler::stop_thread(&state.hw);
    }
}

/// Process exit: write every profile that was not written yet.
extern "C" fn at_exit() {
    hooks::without_hooks(flush_all);
}

/// Stops every thread's sampling, then writes every profile of this
/// process that was not written yet (process exit, fatal signal, exec).
pub fn flush_all() {
    let pid = ffi::getpid();
    // A vfork child shares the parent's memory but has its own pid: it owns
    // no state here and must not stop the parent's sampling.
    if !threads::all().any(|s| s.pid == pid) {
        return;
    }
    ACTIVE.store(false, Relaxed);
    for state in threads::all().filter(|s| s.pid == pid) {
        stop(state, false);
    }
    for state in threads::all().filter(|s| s.pid == pid) {
        writer::finish(state);
    }
}

/// Signals whose default action ends the process: profiles are written
/// before it happens.
pub const FATAL_SIGNALS: [i32; 10] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGABRT,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGHUP,
    libc::SIGPIPE,
];

/// In a forked child: reset locks other threads may have held, forget the
/// parent's threads and measure this (only) thread afresh.
unsafe extern "C" fn after_fork_in_child() {
    hooks::without_hooks(|| {
        if let Some(objs) = objects::get() {
            objs.reset_locks_after_fork();
        }
        // The parent's perf events are the parent's: do not touch them.
        threads::reset_after_fork();
        start_thread(threads::next_index());
    });
}

/// Metric columns, in `cct::M_*` order.
pub fn metric_columns() -> [(&'static str, &'static str, &'static str); cct::METRICS] {
    if pmu::sampler::get().is_some() {
        return [
            (
                "samples",
                "samples",
                "hardware load samples (Intel PEBS mem-loads above the latency threshold, AMD IBS ops that load); each stands for one sampling period of such events",
            ),
            (
                "store_samples",
                "samples",
                "hardware store samples (Intel PEBS mem-stores, AMD IBS ops that store)",
            ),
            (
                "cpu_samples",
                "samples",
                "unused with hardware sampling (always 0)",
            ),
        ];
    }
    [
        (
            "samples",
            "samples",
            "task-clock samples whose skid-corrected instruction loads from memory (mem:soft); each stands for one sampling period of thread CPU time",
        ),
        (
            "store_samples",
            "samples",
            "task-clock samples whose skid-corrected instruction only stores to memory (stores rarely stall: kept apart from the primary metric)",
        ),
        (
            "cpu_samples",
            "samples",
            "all task-clock samples (code-centric tree only)",
        ),
    ]
}
