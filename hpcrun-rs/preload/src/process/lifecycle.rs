//! Start-up, fork and exit: the top layer, the only module that may import
//! every other. At load (`.init_array`) it reads the configuration, sets
//! up the maps, the unwinder, the signal handlers, the thread-exit key,
//! `atexit` and `pthread_atfork`, then measures the main thread; in a
//! forked child it starts afresh; at exit it writes the profiles. What
//! only samples need (symbols, the decoder's tables) waits for the first
//! sample (`threads::lazy`): a short-lived process never reads it.

use std::sync::atomic::Ordering::*;

use crate::access::anchors;
use crate::access::numa;
use crate::access::pages;
use crate::code::modules;
use crate::hooks::exec;
use crate::objects;
use crate::output::checkpoint;
use crate::output::exit;
use crate::output::writer;
use crate::pmu;
use crate::sample::handler;
use crate::sys;
use crate::threads;
use crate::threads::config;
use crate::threads::guard;
use crate::threads::run::{self, code_only};
use crate::threads::sampling;
use crate::threads::sandbox;
use crate::threads::signals;

crate::on_load!(init);

/// Says so when the program's `malloc` comes before the library's in
/// symbol lookup order (defined in the executable): it serves the
/// program without passing through the hooks, so no heap block is seen.
fn warn_if_malloc_comes_first() {
    // (By module: the address of the library's own `malloc`, an exported
    // symbol, would be the first definition too.)
    let first = sys::first_symbol(c"malloc");
    // (A non-PIE executable that takes malloc's address holds an entry
    // for it that forwards to the library's: not a malloc of its own.)
    if !sys::is_definition(first) {
        return;
    }
    let Some((base, name)) = sys::module_of(first) else {
        return;
    };
    if sys::module_of(sys::own_address() as usize).is_some_and(|(own, _)| own == base) {
        return;
    }
    let module = Some(name)
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "the executable".to_string());
    run::warn(&format!(
        "malloc is defined in {module}, ahead of the profiler's: its heap blocks are not seen (define the malloc family in a shared library to have them named)"
    ));
}

/// Runs at library load (from `.init_array`).
fn init() {
    guard::without_hooks(|| {
        // Also in a passive process (a launcher forks and execs): a forked
        // child of a threaded process must find them without the loader.
        exec::resolve();
        // The program's allocator, which the malloc hooks forward to.
        sys::real::resolve();
        // Memory for when the kernel refuses the library's heap a mapping.
        sys::heap::map_reserve();
        sandbox::init();
        crate::hooks::cxx::resolve();
        let cfg = config::get();
        if cfg.out_dir.is_none() {
            // Loaded without hpcrun-rs: stay passive.
            return;
        }
        // Also in an MPI launcher started by hpcrun-rs: it too gets a
        // group's signal twice.
        super::forwarded::init(cfg.launcher_pid);
        // (And its orphans, too, are given to the launcher.)
        crate::hooks::parent::note(cfg.launcher_pid);
        if is_launcher() {
            // MPI launchers and daemons pass LD_PRELOAD and HPCRUN_* on to
            // the ranks (the environment is left untouched) but are not
            // measured themselves.
            return;
        }
        // The rest runs on the main thread's handler stack (made now, as
        // for every measured thread): the program's own stack may be
        // small (`ulimit -s`), and this set-up needs more than 16 KiB.
        let mut measured = || measured_init(cfg);
        match sys::HandlerStack::for_current_thread() {
            Some(stack) => stack.run(&mut measured),
            None => measured(),
        }
    });
}

/// The part of [`init`] that a measured process runs: its tables, its
/// signal handlers, the main thread's sampling.
fn measured_init(cfg: &'static config::Config) {
    // The standard error the process started with (the launcher's),
    // before the program can give descriptor 2 to a file of its own.
    sys::keep_stderr();
    // The umask the files the library creates follow, before the
    // program can change it.
    sys::outdir::note_umask();
    warn_if_malloc_comes_first();
    let shift = run::table_shift(objects::full_bytes(cfg.alloc_log));
    if !objects::init(cfg.alloc_log, shift) {
        return;
    }
    if let Some(small) = objects::small_map::get() {
        small.set_cap(cfg.max_tracking_memory);
    }
    // Without symbols: read at the first sample (`threads::lazy`).
    modules::refresh(None);
    anchors::init();
    numa::init(std::path::Path::new(numa::SYSFS_NODES), cfg.numa);
    let signal = sys::sigrtmin() + cfg.signal_offset;
    let cpu_time = cfg.event == hpcrun_abi::event::Event::CpuTime.name();
    run::configure(signal, cfg.histogram, cpu_time);
    // Hardware memory events (mem:latency, mem:stores) drain a perf ring
    // in their own handler.
    let on_signal = match pmu::sampler::setup(&cfg.event, cfg.period_ns) {
        Ok(Some(_)) => handler::on_hw_sample,
        Ok(None) => handler::on_sample,
        Err(e) => {
            run::warn(&format!("{e}: no samples"));
            handler::on_sample
        }
    };
    // Page faults: the next signal, each handler blocking the other.
    let fault_signal = signal + 1;
    if cfg.period_ns > 0 && !signals::take_over(signal, on_signal, &[fault_signal]) {
        run::warn("could not install the sample signal handler; sampling disabled");
    }
    if cfg.page_faults.is_some() {
        pages::init();
        if let Some(objs) = objects::get() {
            std::hint::black_box(objs.prefault());
        }
        if !signals::take_over(fault_signal, handler::on_page_fault, &[signal]) {
            run::warn("could not install the page-fault signal handler");
        }
    }
    // A full queue of real-time signals turns a sample into SIGIO, whose
    // default action would end the program: borrowed, the program's
    // own action and queries stay its own.
    signals::take_over_sigio(handler::on_sigio);
    // A mask inherited blocking the sample signals (across `exec`, from
    // `posix_spawn`'s attribute, from a parent that blocked everything)
    // is the program's: recorded as such, and unblocked in the kernel.
    signals::adopt_inherited_mask(signals::blocked_bits());
    if let Some(key) = sys::thread_exit_key(on_thread_exit) {
        threads::set_exit_key(key);
    }
    writer::init_process_info();
    crate::output::manifest::start(writer::rank_from_env());
    sys::at_exit(at_exit);
    for signal in FATAL_SIGNALS {
        sys::install_fatal_handler(signal, handler::on_fatal);
    }
    super::forwarded::set_fatal_path(handler::on_fatal);
    sys::at_fork(after_fork_in_child);
    if !code_only() && cfg.period_ns > 0 {
        crate::access::watch::configure(cfg.sharing_every, cfg.reuse_every);
    }
    run::set_active(true);
    // No thread yet: the helper starts with the program's second one.
    checkpoint::start();
    guard::READY.store(true, Release);
    sampling::start_thread(threads::next_index());
    if threads::current().is_some() {
        checkpoint::thread_started();
    }
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
    let exe = sys::exe_path();
    let name = exe.rsplit('/').next().unwrap_or(exe);
    LAUNCHERS.contains(&name)
}

/// Process exit: write every profile that was not written yet.
extern "C" fn at_exit() {
    // Under a filter that may kill at a refused call, everything was
    // written when it went in: no call of the profiler's now.
    if sandbox::quiet() {
        return;
    }
    guard::without_hooks(exit::flush_at_end);
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
extern "C" fn after_fork_in_child() {
    // First: a parent thread may have held the library heap's lock.
    sys::heap::reset_after_fork();
    guard::without_hooks(|| {
        if let Some(objs) = objects::get() {
            objs.reset_locks_after_fork();
        }
        // Read sections the parent's other threads had open never close
        // here (this thread, in `fork`, has none open).
        sys::reset_readers_after_fork();
        // The parent's perf events are the parent's: do not touch them.
        threads::reset_after_fork();
        crate::output::notices::reset_after_fork();
        crate::threads::sandbox::reset_after_fork();
        crate::output::manifest::start(writer::rank_from_env());
        checkpoint::reset_after_fork();
        sampling::start_thread(threads::next_index());
        if threads::current().is_some() {
            checkpoint::thread_started();
        }
    });
}

/// The thread-exit key's destructor: writes the exiting thread's profile.
extern "C" fn on_thread_exit(_value: *mut libc::c_void) {
    if sandbox::quiet() {
        return;
    }
    guard::without_hooks(|| {
        if let Some(state) = threads::current() {
            let finished_here = writer::finish(state);
            threads::clear_current();
            // Finished: no handler of this thread uses its stack any more.
            state.handler_stack.release();
            if finished_here {
                // Its tables and caches go to the next thread.
                threads::recycle(state);
            }
            // Down to one thread: the checkpoint helper goes.
            checkpoint::thread_ended();
        }
    });
}
