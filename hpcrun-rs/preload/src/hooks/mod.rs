//! The first step: where the program calls into the library. [`malloc`]
//! and the hooks below interpose the allocation calls; [`exec`] the `exec`
//! family (the profiles are written first); [`labels`] the `hpcrun.h`
//! calls that name data. Hands to the next step: each tracked block with
//! its allocation site to the object map ([`crate::objects`]), each new
//! thread's creation path to [`crate::threads`].
//!
//! The interposed C entry points: the malloc family ([`malloc`]; the
//! shared machinery, recording and forgetting a block, is here), C++'s
//! `operator new` and `operator delete` ([`cxx`]), `pthread_create`, the
//! `mmap` family and System V `shmat`/`shmdt`.
//!
//! Every hook calls the program's allocator first (`sys::real`: the next
//! definition of the function in symbol lookup order: the program's own,
//! tcmalloc, jemalloc, mimalloc or glibc's), then (for blocks of at
//! least `min_bytes`, outside re-entrant calls, once the library is
//! initialised) unwinds the allocation call path and records the block.
//! A const-initialised thread-local guard makes nested calls (from the
//! unwinder, the loader, or the library itself) pass straight through.
//! errno is preserved across the bookkeeping. Anonymous mappings are
//! tracked like heap blocks; file-backed and shared ones (files,
//! `shm_open` and `memfd_create` objects, System V segments) too, at a
//! site labelled with the file's name (or the segment's key). `prctl` and
//! `syscall` are watched for seccomp filters ([`seccomp`]).

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use formats::measurement::HOOK_TIME_EVERY;

use crate::code::modules::CodeOwner;
use crate::code::{modules, unwind};
use crate::objects;
use crate::objects::mapping::{self, MapName};
use crate::objects::small_sites::SmallSite;
use crate::sys::{self, real};
use crate::threads;
use crate::threads::config;
use crate::threads::guard::{guarded, without_hooks, READY};

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

/// Where the program called an allocation hook: the return address and
/// the caller's stack and frame pointers as they are once the call
/// returns. Taken by the hook's naked entry ([`hook_entry!`]), so that the
/// call path is unwound from the program's frame: this library's own
/// frames are never unwound (fewer frames, and none of the collisions of
/// their addresses with the program's in framehop's direct-mapped rule
/// cache, which made the unwind cost depend on this library's code layout).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller {
    ret: u64,
    sp: u64,
    bp: u64,
}

impl Caller {
    /// The caller of a hook whose entry had stack pointer `entry_sp` and
    /// frame pointer `entry_bp`.
    ///
    /// # Safety
    /// `entry_sp` is the stack pointer at the hook's first instruction (it
    /// points at the return address the call pushed).
    unsafe fn at_entry(entry_sp: u64, entry_bp: u64) -> Caller {
        Caller {
            // SAFETY: per the contract, the return address of the call.
            ret: unsafe { *(entry_sp as *const u64) },
            sp: entry_sp + 8,
            bp: entry_bp,
        }
    }
}

/// Defines the exported allocation function `$name` as a naked entry
/// that passes its stack and frame pointers, in the two argument registers
/// after its own arguments, to `$imp` (`extern "C"`, the same arguments
/// plus `entry_sp: u64, entry_bp: u64`) by a tail jump: `$imp` runs as if
/// the program had called it, and returns to the program.
macro_rules! hook_entry {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $imp:ident, $sp:literal, $bp:literal) => {
        $(#[$doc])*
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            std::arch::naked_asm!(
                concat!("mov ", $sp, ", rsp"),
                concat!("mov ", $bp, ", rbp"),
                "jmp {imp}",
                imp = sym $imp,
            )
        }
    };
}

/// Runs `work`, the profiler's part of a hook call, counting the call in
/// this thread's [`HookTime`](formats::measurement::HookTime) and timing
/// one call in `HOOK_TIME_EVERY`.
#[inline(always)]
fn timed(work: impl FnOnce()) {
    let Some(state) = threads::current() else {
        return work();
    };
    // The handler asked for more of the call-path tree: mapped here, out
    // of the signal handler.
    state.tree.grow_if_wanted();
    let s = &state.stats;
    if bump(&s.hook_calls, 1) % HOOK_TIME_EVERY != 0 {
        return work();
    }
    let t0 = sys::monotonic_ns();
    work();
    let ns = sys::monotonic_ns().saturating_sub(t0);
    bump(&s.hook_timed, 1);
    bump(&s.hook_timed_ns, ns);
    if ns >= formats::measurement::SLOW_HOOK_NS {
        bump(&s.hook_slow, 1);
        bump(&s.hook_slow_ns, ns);
    }
}

/// Adds `n` to a counter that only the calling thread writes (no locked
/// instruction); returns the value before.
fn bump(counter: &std::sync::atomic::AtomicU64, n: u64) -> u64 {
    let before = counter.load(Ordering::Relaxed);
    counter.store(before + n, Ordering::Relaxed);
    before
}

/// Unwinds the allocation call path from `caller` and records the block.
/// Not inside the program's allocator (a `realloc` that calls `malloc`
/// through the hooks): the outer hook records the block it returns.
#[inline(never)]
fn record(ptr: *mut c_void, size: usize, caller: Option<Caller>) {
    if ptr.is_null()
        || !READY.load(Ordering::Acquire)
        || sys::heap::serving_libc()
        || real::in_allocator()
    {
        return;
    }
    if sys::heap::short_of_memory() {
        // The profiler's memory was refused: no new block is tracked; a
        // small one is still counted, as one the map had no memory for.
        if size > 0 && size < small_limit() {
            objects::small_sites::count_untracked(
                objects::small_sites::Reason::NoMemory,
                size as u64,
            );
            objects::note_small_block(ptr as u64);
        }
        return;
    }
    timed(|| {
        if size < small_limit() {
            guarded(|| track_small(ptr as u64, size as u64, caller));
        } else {
            guarded(|| track(ptr as u64, size as u64, Entry::Block, caller));
        }
    });
    // A checkpoint the sample handler found due (single-threaded
    // programs: no helper thread); one relaxed load otherwise.
    crate::output::checkpoint::poll();
}

/// Blocks under this size go to the compact small-block map: under
/// `--min-bytes` and under `small_map::SMALL_MAX`.
fn small_limit() -> usize {
    config::get()
        .min_bytes
        .min(objects::small_map::SMALL_MAX as usize)
}

/// Enters the small block `[start, start+size)` in the compact map at its
/// site (`objects::small_sites`), or counts it untracked with the reason
/// (and notes its window for `<small heap objects>`). Runs inside
/// [`guarded`]; the unwind runs on the thread's handler stack.
#[inline(never)]
fn track_small(start: u64, size: u64, caller: Option<Caller>) {
    // A block of no bytes (`malloc(0)`, `new T[0]`) holds nothing a sample
    // could touch: nothing to track, nothing lost.
    if size == 0 {
        return;
    }
    let untracked = |reason: objects::small_sites::Reason| {
        objects::small_sites::count_untracked(reason, size);
        objects::note_small_block(start);
    };
    let (Some(state), Some(caller)) = (threads::current(), caller) else {
        return untracked(objects::small_sites::Reason::NotMeasured);
    };
    let mut site = None;
    state
        .handler_stack
        .run(&mut || site = small_site(state, caller));
    let Some(objs) = objects::get() else {
        return untracked(objects::small_sites::Reason::NoMemory);
    };
    let Some(site) = site else {
        return untracked(objects::small_sites::Reason::SitesFull);
    };
    if let Err(e) = objs.insert_small(start, size, site) {
        untracked(e.into());
    }
}

/// The site of a small block whose `malloc` was called at `caller`: the
/// allocating instruction for a runtime's or system library's block, the
/// call path (through the thread's site cache) for the program's.
fn small_site(state: &threads::ThreadState, caller: Caller) -> Option<u32> {
    let _section = sys::reading();
    let (objs, snap) = (objects::get()?, modules::get()?);
    // A system library's block (strdup, a locale table) takes its call
    // path too: hpcprof-rs names it at the program's call above the
    // library. A runtime's (MPI, OpenMP) is its allocating instruction.
    let whose = match snap.code_owner(caller.ret) {
        Some(CodeOwner::Runtime) => SmallSite::Runtime,
        _ => SmallSite::Program,
    };
    if whose == SmallSite::Runtime {
        // As the unwinder stores a return address: the call's last byte,
        // which names the call's line.
        return objs.site(&[caller.ret.saturating_sub(1)]);
    }
    let unwinder = unwind::get()?;
    let mut first = [0u64; objects::small_sites::KEY_FRAMES];
    // SAFETY: the hook cache is used only by this thread's hooks, and
    // the IN_HOOK guard excludes nested use.
    let cache = unsafe { &mut *state.hook_cache() };
    let got = unwind::unwind_from_call(
        unwinder,
        cache,
        &state.stack,
        caller.ret,
        caller.sp,
        caller.bp,
        &mut first,
    );
    let key = objects::small_sites::key(&first[..got.len]);
    // SAFETY: the site cache is used only by this thread's hooks, inside
    // the IN_HOOK guard.
    let sites = unsafe { &mut *state.small_sites.get() };
    sites.site(key, || {
        let mut frames = [0u64; objects::MAX_ALLOC_FRAMES + 8];
        let len = program_path(state, unwinder, snap, Some(caller), &mut frames);
        objs.site(&frames[..len])
    })
}

/// How [`track`] enters a range.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry<'a> {
    /// A heap block (or anonymous mapping), at its call path's site.
    Block,
    /// A file-backed or shared mapping, at the site of its call path
    /// labelled with the mapping's name ([`objects::mapping`]).
    Mapping(&'a [u8]),
    /// A range the program registered with this label
    /// (`hpcrun_register`; empty: none).
    Registered(&'a [u8]),
}

/// Unwinds the call path (from `caller`, else from here, through this
/// library's frames) and enters `[start, start+size)` in the object map
/// as `entry` says. Runs inside [`guarded`]. From a `caller`, the work
/// runs on the thread's handler stack (`sys::HandlerStack`): unwinding
/// needs more stack than a small thread or coroutine stack has left.
#[inline(never)]
pub(crate) fn track(start: u64, size: u64, entry: Entry<'_>, caller: Option<Caller>) {
    if let (Some(caller), Some(state)) = (caller, threads::current()) {
        let mut job = Some(entry);
        state.handler_stack.run(&mut || {
            if let Some(entry) = job.take() {
                track_here(start, size, entry, Some(caller));
            }
        });
        return;
    }
    track_here(start, size, entry, caller)
}

#[inline(never)]
fn track_here(start: u64, size: u64, entry: Entry<'_>, caller: Option<Caller>) {
    // The unwinder and the module snapshot stay valid while it is open.
    let _section = sys::reading();
    let (Some(state), Some(unwinder), Some(objs), Some(snap)) = (
        threads::current(),
        unwind::get(),
        objects::get(),
        modules::get(),
    ) else {
        return;
    };
    let mut frames = [0u64; objects::MAX_ALLOC_FRAMES + 8];
    let len = program_path(state, unwinder, snap, caller, &mut frames);
    let path = &frames[..len];
    let head = state.last_record.load(Ordering::Relaxed);
    let id = match entry {
        Entry::Block => objs
            .site(path)
            .map(|site| objs.insert(start, size, site, state.index, head)),
        Entry::Mapping(name) => objs
            .labelled_site(path, name)
            .map(|site| objs.insert(start, size, site, state.index, head)),
        Entry::Registered(label) => objs
            .labelled_site(path, label)
            .map(|site| objs.register(start, size, site, state.index, head)),
    };
    if let Some(id) = id.filter(|&id| id != 0) {
        // Release: a checkpoint on another thread reads the log.
        state.last_record.store(id, Ordering::Release);
    }
}

/// Unwinds the program's call path (from `caller`, else from here) into
/// `frames`, innermost first, leaving out the frames inside this library
/// (the hook itself, and the thread trampoline at the root of a thread's
/// paths); returns how many it wrote. Runs inside [`guarded`].
fn program_path(
    state: &threads::ThreadState,
    unwinder: &unwind::Unwind,
    snap: &modules::Snapshot,
    caller: Option<Caller>,
    frames: &mut [u64],
) -> usize {
    // SAFETY: the hook cache is used only by this thread's hooks, and
    // the IN_HOOK guard excludes nested use.
    let cache = unsafe { &mut *state.hook_cache() };
    let got = match caller {
        Some(c) => {
            unwind::unwind_from_call(unwinder, cache, &state.stack, c.ret, c.sp, c.bp, frames)
        }
        None => {
            let (pc, sp, bp) = current_registers();
            unwind::unwind(unwinder, cache, &state.stack, pc, sp, bp, frames)
        }
    };
    let mut len = 0;
    for i in 0..got.len {
        if !snap.is_own_code(frames[i]) {
            frames[len] = frames[i];
            len += 1;
        }
    }
    len
}

/// Records the file-backed or shared mapping `[ptr, ptr+size)` named
/// `name` (called only when it is big enough to track), unwinding its
/// call path from here.
fn record_mapping(ptr: u64, size: usize, name: impl FnOnce() -> MapName) {
    if !READY.load(Ordering::Acquire) || sys::heap::short_of_memory() {
        return;
    }
    timed(|| {
        if size < config::get().min_bytes {
            return;
        }
        let name = name();
        guarded(|| track(ptr, size as u64, Entry::Mapping(name.as_bytes()), None));
    })
}

/// Before memory is unmapped: names the regions of unknown addresses
/// sampled since they were last named (`regions`), while what they hit
/// is still mapped. One relaxed load when there are none.
fn name_unknown_regions() {
    if crate::access::regions::pending() {
        guarded(crate::access::regions::label_new_regions);
    }
}

/// Forgets the tracked block or mapping starting at `ptr`, if any.
fn forget(ptr: *mut c_void) {
    if ptr.is_null() || !READY.load(Ordering::Acquire) {
        return;
    }
    if let Some(objs) = objects::get() {
        timed(|| objs.remove(ptr as u64));
    }
}

/// Forgets the block at `ptr` (about to be freed or reallocated) if it is
/// tracked: the small-block map first (one bitmap read when no small
/// block starts there), then the other maps. The allocator is never asked
/// for the block's size.
///
/// # Safety
/// `ptr` is null or a live block of the program's allocator (free's and
/// realloc's contract), never a mapping (`munmap` uses [`forget`]).
unsafe fn forget_block(ptr: *mut c_void) {
    if ptr.is_null() || !READY.load(Ordering::Acquire) {
        return;
    }
    // (Blocks of the library's heap, for glibc's own allocations inside
    // the library's calls and the loader's while the allocator is looked
    // up, are never tracked.)
    // SAFETY: a live block, per this function's contract.
    if unsafe { sys::heap::is_c_block(ptr as *const u8) } {
        return;
    }
    timed(|| {
        if let Some(objs) = objects::get() {
            objs.remove_sized(ptr as u64, None);
        }
    })
}

pub(crate) mod cxx;
pub mod exec;
mod fds;
pub mod labels;
mod malloc;
pub(crate) mod ompt;
pub(crate) mod openmp;
pub(crate) mod parent;
mod seccomp;
mod thread_create;

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
    if flags & libc::MAP_FIXED != 0 && (flags & libc::MAP_ANONYMOUS != 0 || fd >= 0) {
        forget(p as *mut c_void);
    }
    if real::in_allocator() {
        // The program's allocator mapping its arena (inside a malloc the
        // hooks forwarded): the blocks it serves from it are the objects.
    } else if flags & libc::MAP_ANONYMOUS != 0 {
        record(p as *mut c_void, len, None);
    } else if fd >= 0 {
        // A file, a `shm_open` or `memfd_create` object: named by its path.
        record_mapping(p as u64, len, || {
            let mut path = [0u8; 4096];
            let n = sys::fd_path(fd, &mut path);
            mapping::file_name(&path[..n])
        });
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
    name_unknown_regions();
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
    // A named mapping keeps its name where it moves.
    let mut label = [0u8; objects::LABEL_BYTES];
    let named = match objects::get() {
        Some(o) if tracked => o.label_of_block_at(old as u64, &mut label),
        _ => 0,
    };
    match sys::raw_mremap(old as u64, old_len, new_len, flags, fixed) {
        Some(p) => {
            if tracked {
                forget(old);
                if named > 0 {
                    let name = mapping::file_name(&label[..named]);
                    record_mapping(p as u64, new_len, || name);
                } else {
                    record(p as *mut c_void, new_len, None);
                }
            }
            p as *mut c_void
        }
        None => libc::MAP_FAILED,
    }
}

/// # Safety
/// System V's shmat contract. The attached segment is a data object named
/// by its key ([`mapping::shm_name`]).
#[no_mangle]
pub unsafe extern "C" fn shmat(id: c_int, addr: *const c_void, flags: c_int) -> *mut c_void {
    let Some(p) = sys::raw_shmat(id, addr as u64, flags) else {
        return usize::MAX as *mut c_void;
    };
    if READY.load(Ordering::Acquire) {
        if flags & libc::SHM_REMAP != 0 {
            forget(p as *mut c_void);
        }
        if let Some((size, key)) = sys::shm_size_and_key(id) {
            record_mapping(p, size as usize, || mapping::shm_name(key, id));
        }
    }
    p as *mut c_void
}

/// # Safety
/// System V's shmdt contract.
#[no_mangle]
pub unsafe extern "C" fn shmdt(addr: *const c_void) -> c_int {
    forget(addr as *mut c_void);
    name_unknown_regions();
    sys::raw_shmdt(addr as u64)
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
        // (The new modules' tables: the profiler's first touches, not
        // sampled.)
        crate::threads::sampling::without_fault_samples(|| {
            without_hooks(|| modules::refresh(None))
        });
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
        without_hooks(crate::output::exit::flush_at_end);
    }
    sys::exit_group(status)
}

type ExitFn = unsafe extern "C" fn(c_int) -> !;

/// libc's `name` (`exit`, `quick_exit`), or `exit_group` if none.
fn real_exit(name: &std::ffi::CStr) -> ExitFn {
    let real = sys::next_symbol(name);
    if real.is_null() {
        extern "C" fn group(status: c_int) -> ! {
            sys::exit_group(status)
        }
        return group;
    }
    // SAFETY: RTLD_NEXT's `exit` and `quick_exit` have this signature.
    unsafe { std::mem::transmute::<*mut c_void, ExitFn>(real) }
}

/// # Safety
/// C's exit contract. The profiles are written by the `atexit` handler,
/// after the program's own; a second thread that calls `exit` meanwhile
/// waits until they are written (`exit::before_exit`): its `exit` would
/// otherwise end the process while they are being written.
#[no_mangle]
pub unsafe extern "C" fn exit(status: c_int) -> ! {
    if READY.load(Ordering::Acquire) {
        without_hooks(crate::output::exit::before_exit);
    }
    let real = real_exit(c"exit");
    // SAFETY: forwarding the caller's argument.
    unsafe { real(status) }
}

/// # Safety
/// C11's quick_exit contract: `at_quick_exit` handlers, then `_exit`
/// inside libc (not the interposed one), and no `atexit` handler: the
/// profiles are written here first.
#[no_mangle]
pub unsafe extern "C" fn quick_exit(status: c_int) -> ! {
    if READY.load(Ordering::Acquire) {
        without_hooks(crate::output::exit::flush_at_end);
    }
    let real = real_exit(c"quick_exit");
    // SAFETY: forwarding the caller's argument.
    unsafe { real(status) }
}

/// # Safety
/// C99's _Exit contract (the same as `_exit`).
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    // SAFETY: the same contract.
    unsafe { _exit(status) }
}
