//! `pthread_create`: the new thread runs a trampoline that starts its
//! measurement (state, perf event) before the program's start routine,
//! and the creating thread records where it created it
//! ([`crate::threads::creators`]): the program's call path of the call, continued
//! by the creator's own creation path. The new thread's program-blocked
//! profiler signals are its creator's, or those of the attribute's signal
//! mask (`pthread_attr_setsigmask_np`), and any the kernel mask it starts
//! with blocks (`signals::adopt_inherited_mask`).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use super::{guarded, program_path, without_hooks, Caller, READY};
use crate::code::{modules, unwind};
use crate::sys;
use crate::threads;
use crate::threads::config;

type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut c_void,
) -> c_int;

struct Trampoline {
    start: StartRoutine,
    arg: *mut c_void,
    index: u32,
    /// The new thread's program-blocked profiler signals: those of the
    /// attribute's signal mask when it carries one, else the creator's (a
    /// new thread inherits its creator's signal mask).
    blocked: u8,
}

extern "C" fn thread_start(raw: *mut c_void) -> *mut c_void {
    // SAFETY: `raw` is the Box we leaked in pthread_create below.
    let tramp = unsafe { Box::from_raw(raw as *mut Trampoline) };
    // glibc gave the thread its mask (the attribute's, or the creator's)
    // before this runs: a profiler signal blocked there is recorded as
    // the program's and unblocked in the kernel.
    crate::threads::signals::adopt_inherited_mask(tramp.blocked);
    without_hooks(|| {
        crate::threads::sampling::start_thread(tramp.index);
        // A second thread of the program runs: the checkpoint helper
        // starts (on the profiler's stack: the program's may be small).
        if let Some(state) = threads::current() {
            state
                .handler_stack
                .run(&mut crate::output::checkpoint::thread_started);
        }
    });
    (tramp.start)(tramp.arg)
}

hook_entry! {
    /// # Safety
    /// POSIX's pthread_create contract.
    pthread_create(
        thread: *mut libc::pthread_t,
        attr: *const libc::pthread_attr_t,
        start: StartRoutine,
        arg: *mut c_void
    ) -> c_int => pthread_create_at, "r8", "r9"
}

/// # Safety
/// POSIX's pthread_create contract; `entry_sp`/`entry_bp` as
/// [`Caller::at_entry`] wants them.
unsafe extern "C" fn pthread_create_at(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: StartRoutine,
    arg: *mut c_void,
    entry_sp: u64,
    entry_bp: u64,
) -> c_int {
    let real = sys::next_symbol(c"pthread_create");
    if real.is_null() {
        return libc::EAGAIN;
    }
    // SAFETY: RTLD_NEXT's pthread_create has this signature.
    let real: PthreadCreate = unsafe { std::mem::transmute::<*mut c_void, PthreadCreate>(real) };
    if !READY.load(Ordering::Acquire)
        || config::get().out_dir.is_none()
        || crate::output::checkpoint::spawning()
    {
        // SAFETY: forwarding the caller's arguments.
        return unsafe { real(thread, attr, start, arg) };
    }
    // Before a second thread exists: the first sample of a process with
    // one thread may prepare the samples' tables in its handler, not one
    // of a threaded process (`threads::lazy`).
    without_hooks(threads::lazy::prepare);
    let index = threads::next_index();
    // SAFETY: the entry's stack pointer, per this function's contract.
    let caller = unsafe { Caller::at_entry(entry_sp, entry_bp) };
    // (Short of memory: the table of creation paths, one per thread the
    // program ever created, does not grow; the thread is not measured.)
    if !sys::heap::short_of_memory() {
        guarded(|| record_creator(index, caller));
    }
    // SAFETY: `attr` is null or the program's initialised attribute
    // (pthread_create's contract).
    let attr_mask = sys::attr_sigmask(unsafe { attr.as_ref() });
    let tramp = Box::into_raw(Box::new(Trampoline {
        start,
        arg,
        index,
        blocked: match attr_mask {
            Some(mask) => crate::threads::signals::bits_in(&mask),
            None => crate::threads::signals::blocked_bits(),
        },
    }));
    // SAFETY: forwarding with our trampoline; it takes ownership of `tramp`.
    let rc = unsafe { real(thread, attr, thread_start, tramp as *mut c_void) };
    if rc != 0 {
        // SAFETY: the thread was not created, so the box is still ours.
        drop(unsafe { Box::from_raw(tramp) });
        crate::threads::creators::remove(index);
    }
    rc
}

/// Records where thread `index` is being created: the program's call path
/// of its `pthread_create` call, continued by the creating thread's own
/// creation path ([`crate::threads::creators`]). Unwinds on the handler stack, as
/// [`track`] does.
fn record_creator(index: u32, caller: Caller) {
    let Some(state) = threads::current() else {
        return;
    };
    state.handler_stack.run(&mut || {
        let _section = sys::reading();
        let (Some(unwinder), Some(snap)) = (unwind::get(), modules::get()) else {
            return;
        };
        let mut frames = [0u64; crate::threads::creators::MAX_FRAMES];
        let len = program_path(state, unwinder, snap, Some(caller), &mut frames);
        let mut path = frames[..len].to_vec();
        path.extend(crate::threads::creators::get(state.index));
        crate::threads::creators::set(index, &path);
    });
}
