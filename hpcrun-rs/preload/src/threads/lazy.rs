//! What only samples need, prepared at the first sample (or before the
//! program's second thread starts) instead of at start-up: the loaded
//! modules' symbols ([`modules::read_symbols`]: instruction boundaries
//! and static variables), the instruction decoder's tables
//! ([`soft::warm_up`]) and the data caches' sizes ([`caches`]; a profile
//! without samples has zeros there). Together they were about 1.4 ms of a process's
//! start (docs/PERFORMANCE.md, "Short-lived children"): a build tool's
//! or a shell's child that ends before its first sample (2 ms of its CPU
//! time at the default period) never pays for them. Its allocations keep
//! their call paths: the unwinder needs only the unwind sections, read at
//! start-up as before.
//!
//! The first sample of a process prepares them in its signal handler.
//! That is safe because of when it can happen: the `pthread_create` hook
//! prepares before the program's second thread exists, so an unprepared
//! process has one measured thread, the interrupted one; the preparation
//! takes no lock but the module refresh mutex (tried, never waited for)
//! and the library heap's (checked free first: only the interrupted
//! thread could hold it), calls nothing in libc that takes a lock
//! (`open`, `fstat`, `mmap`, `read`, `close`), and runs only when the
//! interrupted code is not the profiler's own (its hooks, or libc called
//! from them). A sample that finds it cannot prepare is counted as
//! dropped inside the profiler; the next one tries again. The
//! preparation's allocations, from the library's own heap whose lock is
//! free, are the only ones a handler makes: they are not counted as
//! handler allocations (`sys::ALLOCATIONS_IN_HANDLER`, which stays 0).
//! With `-e page-faults` the thread's page-fault event is stopped while
//! they run (`sampling::without_fault_samples`, two `ioctl`s and the
//! descriptor's check): the thousands of pages the symbols of a large
//! program take are the profiler's first touches, not the program's.

use std::sync::atomic::{AtomicBool, Ordering::*};

use crate::access::caches;
use crate::access::soft;
use crate::code::modules;
use crate::sys;
use crate::threads::guard;

/// Set once everything was prepared.
static PREPARED: AtomicBool = AtomicBool::new(false);

/// True once the samples' tables are ready.
pub fn prepared() -> bool {
    PREPARED.load(Acquire)
}

/// Prepares the samples' tables now, outside any signal handler (waits
/// for a module refresh under way).
pub fn prepare() {
    if !PREPARED.load(Acquire) {
        let _ = prepare_with(true);
    }
}

/// In a sample's signal handler, for a sample of the program (not of the
/// profiler's own code): true if the tables are ready, preparing them now
/// when that is safe (see the module's overview); false if not.
pub fn prepare_in_handler() -> bool {
    if PREPARED.load(Acquire) {
        return true;
    }
    if guard::in_hook() || sys::heap::lock_held() {
        // The interrupted code is the profiler's.
        return false;
    }
    // (The thread's in-handler flag, which the allocator's count reads,
    // is unregistered meanwhile.)
    let state = crate::threads::current();
    sys::set_handler_flag(None);
    let prepared = prepare_with(false);
    sys::set_handler_flag(state.map(|s| &s.in_handler));
    prepared
}

fn prepare_with(wait: bool) -> bool {
    // (A thousand pages and more for large symbol tables: not sampled.)
    crate::threads::sampling::without_fault_samples(|| {
        if !modules::read_symbols(wait) {
            return false;
        }
        soft::warm_up();
        caches::get();
        PREPARED.store(true, Release);
        true
    })
}
