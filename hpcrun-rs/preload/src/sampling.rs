//! Library start-up and the per-thread sample source.
//!
//! `mem:soft` (and `cpu-time`) use a software task-clock perf event per
//! thread, opened by that thread, whose overflow signal (a real-time signal,
//! `SIGRTMIN+4` unless `HPCRUN_SIGNAL` says otherwise) is delivered to that
//! same thread (`F_SETOWN_EX` with `F_OWNER_TID`).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::*};

use formats::measurement::HistogramLayout;

use crate::{
    anchors, cct, config, ffi, handler, hooks, modules, numa, objects, pages, pmu, signals, soft,
    threads, writer,
};

/// Pages of each thread's page-fault ring (a power of two).
const FAULT_RING_PAGES: usize = 8;

/// Nodes per thread (all four trees).
pub const TREE_CAPACITY: usize = 1 << 16;

static SIGNAL: AtomicI32 = AtomicI32::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);

static CODE_ONLY: AtomicBool = AtomicBool::new(false);

/// True for `cpu-time`: no instruction decoding, no data attribution.
pub fn code_only() -> bool {
    CODE_ONLY.load(Relaxed)
}

static LAYOUT: std::sync::OnceLock<HistogramLayout> = std::sync::OnceLock::new();

/// The offset histogram layout (set at start, read by the handler).
pub fn histogram_layout() -> HistogramLayout {
    LAYOUT.get().copied().unwrap_or_default()
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
        anchors::init();
        numa::init(std::path::Path::new(numa::SYSFS_NODES), cfg.numa);
        let _ = LAYOUT.set(cfg.histogram);
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
        // Page faults: the next signal, each handler blocking the other.
        let fault_signal = signal + 1;
        if cfg.period_ns > 0 && !signals::take_over(signal, on_signal, &[fault_signal]) {
            writer::warn("could not install the sample signal handler; sampling disabled");
        }
        if cfg.page_faults.is_some() {
            pages::init();
            if let Some(objs) = objects::get() {
                std::hint::black_box(objs.prefault());
            }
            if !signals::take_over(fault_signal, handler::on_page_fault, &[signal]) {
                writer::warn("could not install the page-fault signal handler");
            }
        }
        // A full queue of real-time signals turns a sample into SIGIO, whose
        // default action would end the program.
        ffi::install_handler_if_default(libc::SIGIO, handler::on_sigio);
        writer::init();
        ffi::at_exit(at_exit);
        for signal in FATAL_SIGNALS {
            ffi::install_fatal_handler(signal, handler::on_fatal);
        }
        ffi::at_fork(after_fork_in_child);
        if !code_only() && cfg.period_ns > 0 {
            crate::watch::configure(cfg.sharing_every, cfg.reuse_every);
        }
        ACTIVE.store(true, Relaxed);
        // Before the hooks are ready: the helper thread is not measured.
        crate::checkpoint::start();
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
    let (sharing, reuse) = (
        crate::watch::sharing_every() > 0,
        crate::watch::reuse_every() > 0,
    );
    if sharing || reuse {
        if let Err(errno) = state.watch.open(SIGNAL.load(Relaxed), sharing, reuse) {
            writer::warn_once(&format!(
                "perf_event_open(breakpoint) failed (errno {errno}{}): this thread's accesses are not watched (sharing, reuse)",
                match errno {
                    libc::ENOSPC => ", no free debug register: a debugger may hold them",
                    libc::EMFILE => ", or half of the open-file limit (ulimit -n) reached: the program's descriptors come first",
                    _ => "",
                }
            ));
        }
    }
    if let Some(period) = cfg.page_faults {
        match ffi::open_page_faults(period, SIGNAL.load(Relaxed) + 1, FAULT_RING_PAGES) {
            Ok((fd, ring)) => {
                let _ = state.fault_ring.set(ring);
                state.fault_fd.store(fd, Release);
            }
            Err(errno) => writer::warn_once(&format!(
                "perf_event_open(page-faults) failed (errno {errno}): no page-fault samples; check /proc/sys/kernel/perf_event_paranoid"
            )),
        }
    }
}

/// Stops a thread's sampling (from any thread).
pub fn stop(state: &threads::ThreadState, close: bool) {
    // The thread's CPU time: with the period, the samples it should have
    // had (see notices.rs). From its CPU clock, not the task-clock event's
    // count: the event stops at an overflow until its signal is handled,
    // so a thread whose signal is blocked counts one period only.
    let fd = state.perf_fd.load(Acquire);
    if fd >= 0 && !hardware_active() {
        if let Some(ns) = ffi::thread_cpu_ns_of(state.tid).or_else(|| ffi::read_counter(fd)) {
            state.stats.cpu_time_ns.store(ns, Relaxed);
        }
    }
    for slot in [&state.perf_fd, &state.fault_fd] {
        let fd = slot.swap(-1, AcqRel);
        if fd >= 0 {
            if close {
                // The ring stays mapped (a late handler may still read it).
                ffi::close_event(fd);
            } else {
                ffi::disable_event(fd);
            }
        }
    }
    state.watch.stop(close);
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
    crate::checkpoint::stop();
    crate::checkpoint::report();
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

/// Metric columns, in `cct::M_*` order: (name, unit, description).
pub fn metric_columns() -> [(&'static str, &'static str, &'static str); cct::METRICS] {
    let mut cols = soft_metric_columns();
    if hardware_active() {
        cols[cct::M_SAMPLES].2 = "hardware load samples (Intel PEBS mem-loads above the latency threshold, AMD IBS ops that load); each stands for one sampling period of such events";
        cols[cct::M_STORE_SAMPLES].2 =
            "hardware store samples (Intel PEBS mem-stores, AMD IBS ops that store)";
    }
    cols
}

fn soft_metric_columns() -> [(&'static str, &'static str, &'static str); cct::METRICS] {
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
        (
            "page_faults",
            "faults",
            "sampled page faults (page-faults event) at the faulting data address",
        ),
        (
            "first_touch",
            "pages",
            "pages first touched here: the first sampled fault on each page (page-faults event)",
        ),
        (
            "numa_local",
            "samples",
            "memory samples whose page is on the NUMA node of the CPU that sampled it",
        ),
        (
            "numa_remote",
            "samples",
            "memory samples whose page is on another NUMA node than the CPU that sampled it",
        ),
        ("latency", "cycles", "summed load latency of hardware samples"),
        ("src_l1", "samples", "hardware samples served by the L1 cache"),
        ("src_lfb", "samples", "hardware samples served by a fill buffer"),
        ("src_l2", "samples", "hardware samples served by the L2 cache"),
        ("src_l3", "samples", "hardware samples served by the L3 cache"),
        ("src_local_dram", "samples", "hardware samples served by local DRAM"),
        ("src_remote_dram", "samples", "hardware samples served by remote DRAM"),
        ("src_remote_cache", "samples", "hardware samples served by a remote cache"),
        ("src_hitm", "samples", "hardware samples that hit a modified line in another core's cache"),
        ("src_other", "samples", "hardware samples served by I/O, uncached memory or an unknown source"),
        ("tlb_miss", "samples", "hardware samples that missed the data TLB"),
        (
            "access_bytes",
            "bytes",
            "operand size of the sampled memory accesses whose address was recovered, summed (mem:soft): access_bytes / (samples + store_samples) is the typical access width",
        ),
        (
            "misaligned_samples",
            "samples",
            "sampled accesses (loads and stores) whose bytes [address, address + operand size) span two 64-byte cache lines; the operand size comes from the decoded instruction",
        ),
        (
            "false_sharing",
            "events",
            "watchpoint traps (-e sharing): this access of one thread touched another 8-byte word of a 64-byte line that another thread had just been sampled accessing, at least one of the two a write",
        ),
        (
            "true_sharing",
            "events",
            "watchpoint traps (-e sharing): this access of one thread touched the very bytes another thread had just been sampled accessing, at least one of the two a write",
        ),
    ]
}

/// The metric columns this run fills, in order: a profile lists only
/// these (the others are always zero).
pub fn active_columns() -> Vec<usize> {
    let cfg = config::get();
    let mut cols = Vec::new();
    if hardware_active() {
        // No timer: cpu_samples stays empty.
        cols.extend([cct::M_SAMPLES, cct::M_STORE_SAMPLES]);
    } else if cfg.period_ns > 0 {
        cols.extend([cct::M_SAMPLES, cct::M_STORE_SAMPLES, cct::M_CPU_SAMPLES]);
    } else {
        // `samples` is always the first column (the primary metric).
        cols.push(cct::M_SAMPLES);
    }
    if !hardware_active() && cfg.period_ns > 0 && !code_only() {
        cols.extend([cct::M_ACCESS_BYTES, cct::M_MISALIGNED]);
    }
    if cfg.page_faults.is_some() {
        cols.extend([cct::M_PAGE_FAULTS, cct::M_FIRST_TOUCH]);
    }
    if crate::watch::sharing_every() > 0 {
        cols.extend([cct::M_FALSE_SHARING, cct::M_TRUE_SHARING]);
    }
    if numa::enabled() {
        cols.extend([cct::M_NUMA_LOCAL, cct::M_NUMA_REMOTE]);
    }
    if hardware_active() {
        cols.extend(cct::M_LATENCY..=cct::M_TLB_MISS);
        cols.push(cct::M_MISALIGNED);
    }
    cols
}

/// True when a hardware memory source runs (its columns are filled).
pub fn hardware_active() -> bool {
    pmu::sampler::get().is_some()
}
