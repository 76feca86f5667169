//! Writing everything at the end: stops every thread's sampling and writes
//! every profile of the process (at `atexit`, from the `_exit` hooks, from
//! the fatal-signal handler, before a forwarded signal's default action
//! ends the process).

use std::sync::atomic::{AtomicU64, Ordering::*};

use crate::output::checkpoint;
use crate::output::writer;
use crate::sys;
use crate::threads;
use crate::threads::run;
use crate::threads::sampling;

/// The end of the process's flush at its exit, per process: the pid in
/// the high 32 bits, then the flushing thread's tid (bits 2-31) and the
/// state (bits 0-1: [`NOT_STARTED`], [`FLUSHING`], [`FLUSHED`]). A forked
/// child finds its parent's pid there: not started.
static AT_END: AtomicU64 = AtomicU64::new(0);
const NOT_STARTED: u64 = 0;
const FLUSHING: u64 = 1;
const FLUSHED: u64 = 2;

/// The thread that called `exit` first in this process (pid << 32 | tid;
/// 0: none): [`before_exit`].
static EXITING: AtomicU64 = AtomicU64::new(0);

/// [`flush_all`] at the process's normal end (`atexit`, `exit`'s other
/// callers, `_exit`, `quick_exit`), once per process: a second caller
/// while the first is flushing (another thread ending the process)
/// waits until it is done, so that no thread's `_exit` ends the process
/// in the middle of the writing.
pub fn flush_at_end() {
    let pid = sys::getpid() as u64;
    let tid = sys::gettid() as u64;
    let mine = pid << 32 | tid << 2 | FLUSHING;
    loop {
        let now = AT_END.load(Acquire);
        if now >> 32 != pid || now & 3 == NOT_STARTED {
            if AT_END.compare_exchange(now, mine, AcqRel, Acquire).is_ok() {
                flush_all();
                AT_END.store(pid << 32 | FLUSHED, Release);
                return;
            }
            continue;
        }
        if now & 3 == FLUSHED {
            return;
        }
        // Flushing: by this thread (a nested exit: a fatal signal while
        // writing), or by one that ended meanwhile: nothing to wait for.
        let owner = (now >> 2) & 0x3fff_ffff;
        if owner == tid || !sys::thread_alive(owner as u32) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Before the program's `exit` (the interposed one): the first thread to
/// call it goes on (its `exit` runs the program's `atexit` handlers, and
/// the profiler's last, in order). Another thread calling `exit`
/// meanwhile waits until the first has written the profiles (at most 10
/// s for the writing to start, and while the first thread lives), then
/// goes on: its own `exit` would end the process, with the profiles half
/// written, as soon as it found no handler left to run.
pub fn before_exit() {
    let me = (sys::getpid() as u64) << 32 | sys::gettid() as u64;
    let now = EXITING.load(Acquire);
    let first = now >> 32 != me >> 32 && EXITING.compare_exchange(now, me, AcqRel, Acquire).is_ok();
    if first || now == me {
        return;
    }
    let first_tid = (EXITING.load(Acquire) & 0xffff_ffff) as u32;
    let pid = me >> 32;
    let mut waited_ms = 0u32;
    loop {
        let end = AT_END.load(Acquire);
        let state = if end >> 32 == pid {
            end & 3
        } else {
            NOT_STARTED
        };
        if state == FLUSHED || !sys::thread_alive(first_tid) {
            return;
        }
        if state == NOT_STARTED && waited_ms >= 10_000 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        waited_ms = waited_ms.saturating_add(1);
    }
}

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
