//! Writing everything at the end: stops every thread's sampling and writes
//! every profile of the process (at `atexit`, from the `_exit` hooks, from
//! the fatal-signal handler, before a forwarded signal's default action
//! ends the process).

use crate::{checkpoint, run, sampling, sys, threads, writer};

/// Stops every thread's sampling, then writes every profile of this
/// process that was not written yet (process exit, fatal signal, exec).
pub fn flush_all() {
    let pid = sys::getpid();
    // A vfork child shares the parent's memory but has its own pid: it owns
    // no state here and must not stop the parent's sampling.
    if !threads::all().any(|s| s.pid == pid) {
        return;
    }
    run::set_active(false);
    checkpoint::stop();
    checkpoint::report();
    for state in threads::all().filter(|s| s.pid == pid) {
        sampling::stop(state, false);
    }
    for state in threads::all().filter(|s| s.pid == pid) {
        writer::finish(state);
    }
}
