//! Where each thread was created: the call path of the `pthread_create`
//! call that started it, kept by thread index until the thread's profile
//! is written (`ThreadInfo::created_at`), so that `hpcprof-rs` can hang
//! the thread's call paths below the code that created it, as HPCToolkit
//! does.
//!
//! A path is innermost first (call-site addresses, as the allocation
//! sites) and already continued by the creating thread's own path, so a
//! thread started by a worker reaches back to `main`. Only
//! `pthread_create` (the creating thread, ordinary context) and the
//! profile writer touch the table, never the signal handler; the writer
//! only tries the lock (a fatal signal may interrupt its holder) and
//! writes an empty path if it is busy. `set` and `remove` try it for a
//! bounded time and then give up (the path is left out): a child forked
//! while another thread of its parent held the lock would otherwise
//! block forever on its first `pthread_create`.
//!
//! ```
//! use hpcrun_preload::threads::creators;
//! creators::set(7, &[0x1234, 0x5678]);
//! assert_eq!(creators::get(7), vec![0x1234, 0x5678]);
//! creators::remove(7);
//! assert!(creators::get(7).is_empty());
//! ```

use std::sync::{Mutex, MutexGuard, TryLockError};

/// The deepest creation path kept (frames beyond it, the outermost, are
/// left out).
pub const MAX_FRAMES: usize = 512;

/// Creation paths by thread index (indices are handed out in creation
/// order, so the table is dense).
static PATHS: Mutex<Vec<Box<[u64]>>> = Mutex::new(Vec::new());

/// The table, if its lock can be taken within about 10,000 tries
/// (yielding between them); the lock is held only for a few
/// microseconds at a time.
fn lock() -> Option<MutexGuard<'static, Vec<Box<[u64]>>>> {
    for _ in 0..10_000 {
        match PATHS.try_lock() {
            Ok(all) => return Some(all),
            Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    None
}

/// Records `path` (innermost first) as where thread `index` was created.
pub fn set(index: u32, path: &[u64]) {
    let path: Box<[u64]> = path[..path.len().min(MAX_FRAMES)].into();
    let Some(mut all) = lock() else {
        return;
    };
    let i = index as usize;
    if all.len() <= i {
        all.resize_with(i + 1, Box::default);
    }
    all[i] = path;
}

/// Forgets thread `index`'s path (its creation failed).
pub fn remove(index: u32) {
    let Some(mut all) = lock() else {
        return;
    };
    if let Some(p) = all.get_mut(index as usize) {
        *p = Box::default();
    }
}

/// Where thread `index` was created (empty: the main thread, a thread not
/// started through `pthread_create`, or the table busy).
pub fn get(index: u32) -> Vec<u64> {
    let all = match PATHS.try_lock() {
        Ok(all) => all,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return Vec::new(),
    };
    all.get(index as usize)
        .map(|p| p.to_vec())
        .unwrap_or_default()
}
