//! Writing everything at the end: stops every thread's sampling and writes
//! every profile of the process (at `atexit`, from the `_exit` hooks, from
//! the fatal-signal handler, before a forwarded signal's default action
//! ends the process).

use crate::output::checkpoint;
use crate::output::writer;
use crate::sys;
use crate::threads;
use crate::threads::run;
use crate::threads::sampling;

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
    // The main thread last: its profile counts the threads that ended
    // without a file (`writer::finish`).
    for state in threads::all().filter(|s| s.pid == pid && s.index != 0) {
        writer::finish(state);
    }
    for state in threads::all().filter(|s| s.pid == pid && s.index == 0) {
        writer::finish(state);
    }
    crate::output::manifest::exit(threads::all().filter(|s| s.pid == pid).count() as u32);
    // Messages that found no place when they were said (the open-file
    // limit reached).
    run::flush_messages();
}

/// The profiles written before an `exec`, with every thread's writing
/// lock held until the exec is over (no checkpoint may replace a final
/// profile with a checkpoint meanwhile). Dropping it (the exec failed and
/// the program runs on) lets the locks go, after the manifest says the
/// image runs on (`resumed`).
pub struct BeforeExec {
    held: Vec<std::sync::MutexGuard<'static, ()>>,
    wrote_exit: bool,
}

impl Drop for BeforeExec {
    fn drop(&mut self) {
        if self.wrote_exit {
            crate::output::manifest::resumed();
        }
        self.held.clear();
    }
}

/// Before `exec` replaces this process's image: writes every thread's
/// profile as it stands, as a final profile (an exec ends every thread;
/// the exec'd image's files take the next free names, `profile_file`).
/// Sampling goes on, so a failed exec leaves the program measured as
/// before, and its later profiles replace these. Threads that measured
/// nothing (a forked child about to exec) write no file. The manifest's
/// `exit` record follows, with the number of profiles written. It allocates:
/// the caller does not call it from a signal handler (see `exec.rs`).
pub fn before_exec() -> BeforeExec {
    let mut held = Vec::new();
    let pid = sys::getpid();
    let Some(dir) = crate::threads::config::get().out_dir.as_deref() else {
        return BeforeExec {
            held,
            wrote_exit: false,
        };
    };
    let mut written = 0;
    for state in threads::all().filter(|s| s.pid == pid) {
        // A checkpoint in progress finishes first (at most 1 s: the
        // caller may be a handler that interrupted this library's writer).
        let Some(guard) = lock_within(&state.writing, 1000) else {
            continue;
        };
        if !state.finished.load(std::sync::atomic::Ordering::Acquire) && writer::measured(state) {
            sampling::note_times(state);
            let profile = writer::build_profile(state);
            crate::output::notices::publish(dir, &profile.stats.notices);
            crate::output::profile_file::write(state, dir, &profile);
            written += 1;
        }
        held.push(guard);
    }
    // This image ends here: its manifest says so, also when it measured
    // nothing (a forked child that execs a launcher such as Open MPI's
    // `orted`, which is not measured, would otherwise look killed).
    crate::output::manifest::exit(written);
    BeforeExec {
        held,
        wrote_exit: true,
    }
}

/// `lock`, waiting at most `ms` milliseconds.
fn lock_within(
    lock: &'static std::sync::Mutex<()>,
    ms: u32,
) -> Option<std::sync::MutexGuard<'static, ()>> {
    use std::sync::TryLockError;
    for _ in 0..=ms {
        match lock.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
        }
    }
    None
}
