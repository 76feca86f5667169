//! The interposed C entry points: the malloc family and `pthread_create`.
//!
//! Every hook calls glibc's real allocator first, then (for blocks of at
//! least `min_bytes`, outside re-entrant calls, once the library is
//! initialised) unwinds the allocation call path and records the block.
//! A const-initialised thread-local guard makes nested calls (from the
//! unwinder, the loader, or the library itself) pass straight through.
//! errno is preserved across the bookkeeping.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use crate::code::{modules, unwind};
use crate::guard::{guarded, without_hooks, READY};
use crate::sys::{self, real};
use crate::{config, objects, threads};

/// The caller's (pc, sp, bp), read where this is inlined.
#[inline(always)]
fn current_registers() -> (u64, u64, u64) {
    let (pc, sp, bp): (u64, u64, u64);
    // SAFETY: reads three registers, touches no memory.
    unsafe {
        std::arch::asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            pc = out(reg) pc,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags)
        );
    }
    (pc, sp, bp)
}

/// Unwinds the allocation call path and records the block.
#[inline(never)]
fn record(ptr: *mut c_void, size: usize) {
    if ptr.is_null() || !READY.load(Ordering::Acquire) {
        return;
    }
    if size < config::get().min_bytes {
        objects::note_small_block(ptr as u64);
        return;
    }
    guarded(|| track(ptr as u64, size as u64, None));
}

/// Unwinds the call path into this library and enters `[start, start+size)`
/// in the object map: as a heap block (`label` `None`), or as a range the
/// program registered with this label (`hpcrun_register`; empty: none).
/// Runs inside [`guarded`].
#[inline(never)]
pub(crate) fn track(start: u64, size: u64, label: Option<&[u8]>) {
    let (Some(state), Some(unwinder), Some(objs), Some(snap)) = (
        threads::current(),
        unwind::get(),
        objects::get(),
        modules::get(),
    ) else {
        return;
    };
    let (pc, sp, bp) = current_registers();
    let mut frames = [0u64; objects::MAX_ALLOC_FRAMES + 8];
    // SAFETY: the hook cache is used only by this thread's hooks, and
    // the IN_HOOK guard excludes nested use.
    let cache = unsafe { &mut *state.hook_cache.get() };
    let got = unwind::unwind(unwinder, cache, &state.stack, pc, sp, bp, &mut frames);
    // Drop the frames inside this library (the hook itself, and the
    // thread trampoline at the root of a thread's paths).
    let mut len = 0;
    for i in 0..got.len {
        if !snap.is_own_code(frames[i]) {
            frames[len] = frames[i];
            len += 1;
        }
    }
    let path = &frames[..len];
    let head = state.last_record.load(Ordering::Relaxed);
    let id = match label {
        None => objs
            .site(path)
            .map(|site| objs.insert(start, size, site, state.index, head)),
        Some(label) => objs
            .labelled_site(path, label)
            .map(|site| objs.register(start, size, site, state.index, head)),
    };
    if let Some(id) = id.filter(|&id| id != 0) {
        // Release: a checkpoint on another thread reads the log.
        state.last_record.store(id, Ordering::Release);
    }
}

fn forget(ptr: *mut c_void) {
    if ptr.is_null() || !READY.load(Ordering::Acquire) {
        return;
    }
    if let Some(objs) = objects::get() {
        objs.remove(ptr as u64);
    }
}

/// # Safety
/// C's malloc contract.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    sys::note_allocation();
    let p = real::malloc(size);
    record(p, size);
    p
}

/// # Safety
/// C's calloc contract.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    sys::note_allocation();
    let p = real::calloc(n, size);
    if !p.is_null() {
        record(p, n.saturating_mul(size));
    }
    p
}

/// # Safety
/// C's realloc contract.
#[no_mangle]
pub unsafe extern "C" fn realloc(old: *mut c_void, size: usize) -> *mut c_void {
    // Forget first: once glibc has the block back, another thread may get
    // the same address and record it.
    forget(old);
    // SAFETY: `old` is null or a live block, per the caller's contract.
    let p = unsafe { real::realloc(old, size) };
    if !p.is_null() {
        record(p, size);
    }
    p
}

/// # Safety
/// glibc's reallocarray contract.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(old: *mut c_void, n: usize, size: usize) -> *mut c_void {
    let Some(bytes) = n.checked_mul(size) else {
        sys::set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    };
    // SAFETY: per the caller's contract.
    unsafe { realloc(old, bytes) }
}

/// # Safety
/// glibc's valloc contract.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    let p = real::valloc(size);
    record(p, size);
    p
}

/// # Safety
/// glibc's pvalloc contract (size rounded up to whole pages).
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let p = real::pvalloc(size);
    record(p, size);
    p
}

/// # Safety
/// C's free contract.
#[no_mangle]
pub unsafe extern "C" fn free(ptr: *mut c_void) {
    forget(ptr);
    // SAFETY: per the caller's contract.
    unsafe { real::free(ptr) }
}

/// # Safety
/// C's memalign contract.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let p = real::memalign(align, size);
    record(p, size);
    p
}

/// # Safety
/// C11's aligned_alloc contract.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let p = real::memalign(align, size);
    record(p, size);
    p
}

/// # Safety
/// POSIX's posix_memalign contract (`out` is writable).
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if align < std::mem::size_of::<*mut c_void>() || !align.is_power_of_two() {
        return libc::EINVAL;
    }
    let saved = sys::errno();
    let p = real::memalign(align, size);
    if p.is_null() {
        sys::set_errno(saved);
        return libc::ENOMEM;
    }
    // SAFETY: `out` is writable per the caller's contract.
    unsafe { *out = p };
    record(p, size);
    0
}

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
    /// The creator's program-blocked profiler signals (a new thread
    /// inherits its creator's signal mask).
    blocked: u8,
}

extern "C" fn thread_start(raw: *mut c_void) -> *mut c_void {
    // SAFETY: `raw` is the Box we leaked in pthread_create below.
    let tramp = unsafe { Box::from_raw(raw as *mut Trampoline) };
    crate::signals::set_blocked_bits(tramp.blocked);
    without_hooks(|| crate::sampling::start_thread(tramp.index));
    (tramp.start)(tramp.arg)
}

/// # Safety
/// POSIX's pthread_create contract.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: StartRoutine,
    arg: *mut c_void,
) -> c_int {
    let real = sys::next_symbol(c"pthread_create");
    if real.is_null() {
        return libc::EAGAIN;
    }
    // SAFETY: RTLD_NEXT's pthread_create has this signature.
    let real: PthreadCreate = unsafe { std::mem::transmute::<*mut c_void, PthreadCreate>(real) };
    if !READY.load(Ordering::Acquire) || config::get().out_dir.is_none() {
        // SAFETY: forwarding the caller's arguments.
        return unsafe { real(thread, attr, start, arg) };
    }
    let tramp = Box::into_raw(Box::new(Trampoline {
        start,
        arg,
        index: threads::next_index(),
        blocked: crate::signals::blocked_bits(),
    }));
    // SAFETY: forwarding with our trampoline; it takes ownership of `tramp`.
    let rc = unsafe { real(thread, attr, thread_start, tramp as *mut c_void) };
    if rc != 0 {
        // SAFETY: the thread was not created, so the box is still ours.
        drop(unsafe { Box::from_raw(tramp) });
    }
    rc
}

/// # Safety
/// POSIX's mmap contract.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    let Some(p) = sys::raw_mmap(addr as u64, len, prot, flags, fd, offset) else {
        return libc::MAP_FAILED;
    };
    if flags & libc::MAP_ANONYMOUS != 0 {
        if flags & libc::MAP_FIXED != 0 {
            forget(p as *mut c_void);
        }
        record(p as *mut c_void, len);
    }
    p as *mut c_void
}

/// # Safety
/// POSIX's mmap contract (64-bit offsets, the same on x86-64).
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    // SAFETY: the same contract.
    unsafe { mmap(addr, len, prot, flags, fd, offset) }
}

/// # Safety
/// POSIX's munmap contract.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    forget(addr);
    sys::raw_munmap(addr as u64, len)
}

/// # Safety
/// Linux's mremap contract (the fifth argument is read only with
/// MREMAP_FIXED, as glibc does; x86-64 passes it in a register either way).
#[no_mangle]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: usize,
    new_len: usize,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    let fixed = if flags & libc::MREMAP_FIXED != 0 {
        new_addr as u64
    } else {
        0
    };
    let tracked = objects::get().is_some_and(|o| o.is_tracked_start(old as u64));
    match sys::raw_mremap(old as u64, old_len, new_len, flags, fixed) {
        Some(p) => {
            if tracked {
                forget(old);
                record(p as *mut c_void, new_len);
            }
            p as *mut c_void
        }
        None => libc::MAP_FAILED,
    }
}

type DlopenFn = unsafe extern "C" fn(*const libc::c_char, c_int) -> *mut c_void;
type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// # Safety
/// dlopen's contract. Newly loaded modules get their symbols (static data)
/// and unwind tables added before this returns.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const libc::c_char, flags: c_int) -> *mut c_void {
    let real = sys::next_symbol(c"dlopen");
    if real.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: RTLD_NEXT's dlopen has this signature.
    let real: DlopenFn = unsafe { std::mem::transmute::<*mut c_void, DlopenFn>(real) };
    // SAFETY: forwarding the caller's arguments.
    let handle = unsafe { real(file, flags) };
    if !handle.is_null() && READY.load(Ordering::Acquire) {
        let saved = sys::errno();
        without_hooks(|| modules::refresh(None));
        sys::set_errno(saved);
    }
    handle
}

/// # Safety
/// dlclose's contract. The module leaves the unwinder *before* it is
/// unmapped, so a signal handler never reads its unwind tables afterwards.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let real = sys::next_symbol(c"dlclose");
    if real.is_null() {
        return -1;
    }
    // SAFETY: RTLD_NEXT's dlclose has this signature.
    let real: DlcloseFn = unsafe { std::mem::transmute::<*mut c_void, DlcloseFn>(real) };
    let ready = READY.load(Ordering::Acquire);
    if ready {
        // SAFETY: `handle` is live until the real dlclose below.
        let bias = unsafe { sys::handle_bias(handle) };
        if bias.is_some() {
            without_hooks(|| modules::refresh(bias));
        }
    }
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { real(handle) };
    if ready {
        let saved = sys::errno();
        // Still loaded (other references)? Then it comes back here.
        without_hooks(|| modules::refresh(None));
        sys::set_errno(saved);
    }
    rc
}

/// # Safety
/// POSIX's _exit contract. Programs that end with `_exit` (shells, forked
/// children) skip atexit handlers: their profiles are written here.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    if READY.load(Ordering::Acquire) {
        without_hooks(crate::exit::flush_all);
    }
    sys::exit_group(status)
}

/// # Safety
/// C99's _Exit contract (the same as `_exit`).
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    // SAFETY: the same contract.
    unsafe { _exit(status) }
}
