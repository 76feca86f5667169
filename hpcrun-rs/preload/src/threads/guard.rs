//! The re-entry guard of the hooks: a const-initialised thread-local flag
//! that makes nested calls into the interposed functions (from the
//! unwinder, the loader, the library's own code) pass straight through,
//! and the flag that says the library finished initialising. Below every
//! module that calls into libc allocation on the program's threads.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sys;

/// Set once the library finished initialising.
pub static READY: AtomicBool = AtomicBool::new(false);

thread_local! {
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// True while a hook, or the library's own code that may call into libc
/// allocation, runs on this thread (async-signal-safe: a signal handler
/// asks whether it interrupted the profiler).
pub fn in_hook() -> bool {
    IN_HOOK.with(|g| g.get())
}

/// Runs `f` unless a hook is already active on this thread.
pub fn guarded(f: impl FnOnce()) {
    if !READY.load(Ordering::Acquire) {
        return;
    }
    let entered = IN_HOOK.with(|g| !g.replace(true));
    if entered {
        let saved = sys::errno();
        f();
        sys::set_errno(saved);
        IN_HOOK.with(|g| g.set(false));
    }
}

/// Makes the calling thread's hooks pass through while `f` runs (used by
/// the library's own code that may call into libc allocation): what libc
/// allocates meanwhile (`opendir`'s buffer, the loader's records) is the
/// library's own, served from its heap, never by the program's allocator
/// (`sys::heap::with_libc_served`; after a fatal signal, by the
/// program's allocator as any other call). The thread's cancellation is
/// held off meanwhile (`sys::cancel`).
pub fn without_hooks<R>(f: impl FnOnce() -> R) -> R {
    // (Dropped last: the library's work may reach cancellation points.)
    let _no_cancel = sys::cancel::NoCancel::new();
    let was = IN_HOOK.with(|g| g.replace(true));
    let r = sys::heap::with_libc_served(f);
    IN_HOOK.with(|g| g.set(was));
    r
}
