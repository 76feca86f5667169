//! OpenMP parallel regions (libgomp's `GOMP_parallel` family): every
//! thread's samples inside a region hang below the calling context of
//! the region, as HPCToolkit does with OMPT, not below the region that
//! happened to create the thread pool.
//!
//! libgomp keeps a pool of worker threads: they are created by the first
//! region and then run every later region, so their creation path
//! ([`crate::threads::creators`]) names the first region only. When the program
//! enters a region, the hook here records the master's call path of the
//! call (continued by the region it is itself running, or by its thread's
//! creation path), and hands libgomp a trampoline instead of the outlined
//! function: every thread of the team (the master too) runs the
//! trampoline, which publishes the region in the thread's state
//! ([`ThreadState::omp_region`]) for as long as the outlined function
//! runs. The sample handler cuts a call path at the trampoline's frame and
//! continues it with the region's path ([`continue_path`]), ending it
//! with [`REGION_ROOT`], which tells `hpcprof-rs` that the path is
//! complete: it is not hung below the thread's creator.
//!
//! The region record lives, allocated by the master, until the real
//! `GOMP_*` call returns, which is after every thread of the team has
//! left the outlined function (the region's closing barrier): a thread's
//! published region is always alive. The handler only reads it (no lock,
//! no allocation).
//!
//! Hooked: `GOMP_parallel`, `GOMP_parallel_loop_{static,dynamic,guided,
//! runtime}` and their `nonmonotonic`/`maybe_nonmonotonic` variants,
//! `GOMP_parallel_sections` and `GOMP_teams_reg`. Not hooked: the
//! pre-4.9 `GOMP_parallel_start`/`_end` pair, `GOMP_parallel_reductions`
//! (libgomp reads the reductions through the data pointer) and tasks:
//! their threads stay below their creator. LLVM's runtime (libomp,
//! `__kmpc_fork_call`) publishes the same region records through its tool
//! interface instead of a trampoline ([`super::ompt`]): its paths are cut
//! at `__kmp_invoke_microtask`'s call of the outlined function
//! ([`MICROTASK_FRAME`]).

use std::ffi::{c_uint, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::{guarded, Caller, READY};
use crate::code::{modules, unwind};
use crate::sys;
use crate::threads::config;
use crate::threads::{self, ThreadState};

/// The marker "frame" at the root end of a call path continued by its
/// region's path: the path is complete, from the process's first frame.
pub const REGION_ROOT: u64 = formats::measurement::REGION_ROOT_ADDRESS;

/// The deepest region path kept (its outermost frames beyond are left
/// out).
const REGION_FRAMES: usize = 256;

/// An outlined function as libgomp calls it.
type Outlined = extern "C" fn(*mut c_void);

/// One running region: what the trampoline calls (at fixed offsets: the
/// trampoline reads them) and the master's call path of the region,
/// innermost first.
#[repr(C)]
pub(super) struct Region {
    outlined: Outlined,
    data: *mut c_void,
    /// The index of the thread that entered the region.
    pub(super) master: u32,
    pub(super) len: usize,
    pub(super) path: [u64; REGION_FRAMES],
    /// The region the master was running when it entered this one (0:
    /// none): what it runs again when this one ends.
    pub(super) outer: u64,
    /// Regions of the tool interface ([`super::ompt`]): the threads that
    /// have it published, plus one until the region ends; the last to
    /// let go frees it. 0 for libgomp's (freed by their `GOMP_*` call).
    pub(super) refs: AtomicUsize,
}

/// The outlined function of a region record that no trampoline runs.
extern "C" fn no_outlined(_: *mut c_void) {}

/// The lookup address (return address - 1) of the trampoline's call of
/// the outlined function, as unwinding reports that frame; 0 until the
/// first region (then the handler has no region to look for).
static TRAMPOLINE_FRAME: AtomicU64 = AtomicU64::new(0);

/// The lookup address of libomp's call of the outlined function (in
/// `__kmp_invoke_microtask`), where a libomp region's paths are cut; 0
/// until the tool interface found it ([`super::ompt`]).
pub(super) static MICROTASK_FRAME: AtomicU64 = AtomicU64::new(0);

/// Runs `region.outlined(region.data)` with `region` published as the
/// calling thread's current region, and the previous one restored after.
/// Written out so that its call of the outlined function is one known
/// instruction ([`trampoline_frame`] finds it), with unwind information
/// so that unwinders (the allocation hooks') still walk through it.
#[unsafe(naked)]
extern "C" fn trampoline(region: *const Region) {
    std::arch::naked_asm!(
        ".cfi_startproc",
        "push rbx",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_offset rbx, -16",
        "push r12",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_offset r12, -24",
        "sub rsp, 8",
        ".cfi_adjust_cfa_offset 8",
        "mov rbx, rdi",
        "call {enter}",
        "mov r12, rax",
        "mov rdi, [rbx + 8]",
        "call qword ptr [rbx]",
        "mov rdi, r12",
        "call {leave}",
        "add rsp, 8",
        ".cfi_adjust_cfa_offset -8",
        "pop r12",
        ".cfi_adjust_cfa_offset -8",
        "pop rbx",
        ".cfi_adjust_cfa_offset -8",
        "ret",
        ".cfi_endproc",
        enter = sym enter,
        leave = sym leave,
    )
}

/// Publishes `region` as the calling thread's current region; returns
/// the previous one (a nested region's outer region), for [`leave`].
/// A thread that runs another thread's region is a pool worker
/// ([`ThreadState::omp_worker`]).
extern "C" fn enter(region: *const Region) -> u64 {
    let Some(state) = threads::current() else {
        return 0;
    };
    // SAFETY: the record the master made for this call of the trampoline,
    // alive until the region ends.
    if unsafe { (*region).master } != state.index {
        state.omp_worker.store(true, Ordering::Relaxed);
    }
    state.omp_region.swap(region as u64, Ordering::Relaxed)
}

/// Restores the calling thread's previous region (0: none).
extern "C" fn leave(previous: u64) {
    if let Some(state) = threads::current() {
        state.omp_region.store(previous, Ordering::Relaxed);
    }
}

/// The lookup address of the trampoline's call of the outlined function:
/// the instruction after its first call through `rbx`, found by decoding
/// the trampoline (once).
fn trampoline_frame() -> u64 {
    static FOUND: OnceLock<u64> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let start = trampoline as *const () as usize as u64;
        // SAFETY: the trampoline's own code, mapped and readable: it is
        // 40 bytes long, and its call of the outlined function ends at
        // byte 24.
        let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, 32) };
        let mut decoder =
            iced_x86::Decoder::with_ip(64, bytes, start, iced_x86::DecoderOptions::NONE);
        while decoder.can_decode() {
            let ins = decoder.decode();
            if ins.flow_control() == iced_x86::FlowControl::IndirectCall
                && ins.memory_base() == iced_x86::Register::RBX
            {
                return ins.next_ip() - 1;
            }
        }
        0
    })
}

/// Where `frames` (innermost first, lookup addresses, this library's
/// frames included) enters the thread's current region: the index of the
/// trampoline's frame, and the region's path; `None` outside a region or
/// when the trampoline's frame is not among them (a path cut short).
/// Signal-safe: atomics and reads only.
pub(crate) fn region_of<'a>(state: &'a ThreadState, frames: &[u64]) -> Option<(usize, &'a [u64])> {
    let region = state.omp_region.load(Ordering::Relaxed);
    let frame = TRAMPOLINE_FRAME.load(Ordering::Relaxed);
    let microtask = MICROTASK_FRAME.load(Ordering::Relaxed);
    if region == 0 || (frame == 0 && microtask == 0) {
        return None;
    }
    let at = frames
        .iter()
        .position(|&f| f != 0 && (f == frame || f == microtask))?;
    // SAFETY: a published region stays alive until the thread unpublishes
    // it (module overview), and only its master wrote it, before any
    // thread could publish it.
    let region = unsafe { &*(region as *const Region) };
    Some((at, &region.path[..region.len.min(REGION_FRAMES)]))
}

/// Continues the call path `frames[..len]` (innermost first, this
/// library's frames still in it, `complete` when unwound to its root) at
/// the current region's trampoline: the frames from the trampoline
/// outwards are replaced by the region's path and [`REGION_ROOT`]. A pool
/// worker's complete path outside any region only gets [`REGION_ROOT`].
/// Returns the new length, or `None` (nothing changed). Signal-safe.
pub(crate) fn continue_path(
    state: &ThreadState,
    frames: &mut [u64],
    len: usize,
    complete: bool,
) -> Option<usize> {
    let Some((at, path)) = region_of(state, &frames[..len]) else {
        // A pool worker between regions (waiting for work): its own
        // complete path, at the top, not below the region that happened
        // to create the pool.
        if complete && len < frames.len() && state.omp_worker.load(Ordering::Relaxed) {
            frames[len] = REGION_ROOT;
            return Some(len + 1);
        }
        return None;
    };
    let room = frames.len().saturating_sub(at + 1);
    let take = path.len().min(room);
    frames[at..at + take].copy_from_slice(&path[..take]);
    frames[at + take] = REGION_ROOT;
    Some(at + take + 1)
}

/// The real `GOMP_*` function `name`, kept in `cache` once found: the
/// next definition after this library's, else libgomp's (or an OpenMP
/// runtime providing libgomp's entries) loaded privately by a `dlopen`ed
/// library; `None` when none is loaded.
fn real(name: &CStr, cache: &AtomicPtr<c_void>) -> Option<*mut c_void> {
    let known = cache.load(Ordering::Relaxed);
    if !known.is_null() {
        return Some(known);
    }
    let mut f = sys::next_symbol(name);
    for lib in [c"libgomp.so.1", c"libomp.so", c"libiomp5.so"] {
        if !f.is_null() {
            break;
        }
        f = sys::loaded_library_symbol(lib, name);
    }
    cache.store(f, Ordering::Relaxed);
    (!f.is_null()).then_some(f)
}

/// Prepares the region the calling thread is entering through a `GOMP_*`
/// call of `outlined(data)`: its record, with the program's call path of
/// the call. `None` when the profiler is not measuring this thread (then
/// the call goes through unchanged).
fn begin(outlined: Outlined, data: *mut c_void, caller: Option<Caller>) -> Option<Box<Region>> {
    if !READY.load(Ordering::Acquire) || config::get().out_dir.is_none() {
        return None;
    }
    let state = threads::current()?;
    let frame = trampoline_frame();
    if frame == 0 {
        return None;
    }
    TRAMPOLINE_FRAME.store(frame, Ordering::Relaxed);
    let mut region = Box::new(Region {
        outlined,
        data,
        master: state.index,
        len: 0,
        path: [0; REGION_FRAMES],
        outer: state.omp_region.load(Ordering::Relaxed),
        refs: AtomicUsize::new(0),
    });
    // Without the caller's registers: unwind from here, on the program's
    // stack (this library's frames are left out of the path).
    let from = match caller {
        Some(c) => From::Call(c),
        None => From::Here(super::current_registers()),
    };
    let mut recorded = false;
    guarded(|| {
        record_path(state, from, &mut region);
        recorded = true;
    });
    recorded.then_some(region)
}

/// The record of a region the calling thread is entering through the
/// tool interface ([`super::ompt`]): its path unwound from here, from the
/// program's call of the runtime (the frame of lookup address
/// `call_frame`) on when that is on the path. `None` when the profiler is
/// not measuring this thread.
pub(super) fn begin_here(call_frame: u64) -> Option<Box<Region>> {
    let mut region = begin(no_outlined, std::ptr::null_mut(), None)?;
    let len = region.len;
    if let Some(at) = region.path[..len].iter().position(|&f| f == call_frame) {
        region.path.copy_within(at..len, 0);
        region.len = len - at;
    }
    Some(region)
}

/// Where a region's path is unwound from: the hook's caller, or a point
/// in the hook (pc, sp, bp) on the program's stack.
#[derive(Clone, Copy)]
enum From {
    Call(Caller),
    Here((u64, u64, u64)),
}

/// Records in `region` the program's call path of its `GOMP_*` call:
/// unwound from the call, continued by the region the thread is running
/// (a nested region) or else by the thread's creation path. Unwinds on the
/// handler stack, as the allocation hooks do.
fn record_path(state: &ThreadState, from: From, region: &mut Region) {
    state.handler_stack.run(&mut || {
        let _section = sys::reading();
        let (Some(unwinder), Some(snap)) = (unwind::get(), modules::get()) else {
            return;
        };
        let mut frames = [0u64; REGION_FRAMES];
        // SAFETY: the hook cache is used only by this thread's hooks, and
        // the hook guard excludes nested use.
        let cache = unsafe { &mut *state.hook_cache() };
        let got = match from {
            From::Call(c) => unwind::unwind_from_call(
                unwinder,
                cache,
                &state.stack,
                c.ret,
                c.sp,
                c.bp,
                &mut frames,
            ),
            From::Here((pc, sp, bp)) => {
                unwind::unwind(unwinder, cache, &state.stack, pc, sp, bp, &mut frames)
            }
        };
        let (own, outer): (usize, Vec<u64>) = match region_of(state, &frames[..got.len]) {
            // A nested region: its path continues the running region's.
            Some((at, path)) => (at, path.to_vec()),
            None => (got.len, crate::threads::creators::get(state.index)),
        };
        let mut len = 0;
        for &f in frames[..own].iter().chain(outer.iter()) {
            if len == REGION_FRAMES {
                break;
            }
            if !snap.is_own_code(f) {
                region.path[len] = f;
                len += 1;
            }
        }
        region.len = len;
    });
}

/// Calls the real `GOMP_*` entry `name` through `call`, with the
/// trampoline and a region record in place of `outlined` and `data` when
/// the thread is measured; the record is freed when the call returned
/// (every thread of the team has left the region).
fn run_region(
    name: &CStr,
    cache: &AtomicPtr<c_void>,
    outlined: Outlined,
    data: *mut c_void,
    caller: Option<Caller>,
    call: impl FnOnce(*mut c_void, Outlined, *mut c_void),
) {
    let Some(real) = real(name, cache) else {
        // libgomp not found from here (loaded privately by a dlopen'ed
        // library): run the region on this thread alone.
        outlined(data);
        return;
    };
    match begin(outlined, data, caller) {
        Some(region) => {
            let ptr = &*region as *const Region as *mut c_void;
            call(real, trampoline_entry(), ptr);
            drop(region);
        }
        None => call(real, outlined, data),
    }
}

/// The trampoline as an outlined function taking the region record.
fn trampoline_entry() -> Outlined {
    // SAFETY: the trampoline takes one pointer argument, as an outlined
    // function does; it reads that pointer as a `Region`.
    unsafe { std::mem::transmute::<extern "C" fn(*const Region), Outlined>(trampoline) }
}

type Parallel = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, c_uint);

hook_entry! {
    /// # Safety
    /// libgomp's `GOMP_parallel` contract.
    GOMP_parallel(outlined: Outlined, data: *mut c_void, threads: c_uint, flags: c_uint) -> () => gomp_parallel_at, "r8", "r9"
}

/// # Safety
/// libgomp's `GOMP_parallel` contract; `entry_sp`/`entry_bp` as
/// [`Caller::at_entry`] wants them.
unsafe extern "C" fn gomp_parallel_at(
    outlined: Outlined,
    data: *mut c_void,
    threads: c_uint,
    flags: c_uint,
    entry_sp: u64,
    entry_bp: u64,
) {
    // SAFETY: the entry's stack pointer, per this function's contract.
    let caller = unsafe { Caller::at_entry(entry_sp, entry_bp) };
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    run_region(
        c"GOMP_parallel",
        &REAL,
        outlined,
        data,
        Some(caller),
        |real, f, d| {
            // SAFETY: libgomp's GOMP_parallel has this signature.
            let real: Parallel = unsafe { std::mem::transmute::<*mut c_void, Parallel>(real) };
            // SAFETY: forwarding the caller's arguments, `f(d)` for `outlined(data)`.
            unsafe { real(f, d, threads, flags) }
        },
    );
}

/// `GOMP_parallel_sections` and `GOMP_teams_reg`: three `unsigned`s after
/// the outlined function and its data.
type ThreeUints = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, c_uint, c_uint);

macro_rules! three_uints {
    ($($name:ident),*) => {$(
        /// # Safety
        /// libgomp's contract of the function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            outlined: Outlined,
            data: *mut c_void,
            a: c_uint,
            b: c_uint,
            c: c_uint,
        ) {
            let name = concat!(stringify!($name), "\0");
            let name = CStr::from_bytes_with_nul(name.as_bytes()).unwrap_or(c"");
            static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
            run_region(name, &REAL, outlined, data, None, |real, f, d| {
                // SAFETY: libgomp's function of this name has this signature.
                let real: ThreeUints = unsafe { std::mem::transmute::<*mut c_void, ThreeUints>(real) };
                // SAFETY: forwarding the caller's arguments.
                unsafe { real(f, d, a, b, c) }
            });
        }
    )*};
}

three_uints!(GOMP_parallel_sections, GOMP_teams_reg);

/// The scheduled loops: start, end, increment and chunk size, then flags.
type Loop = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, i64, i64, i64, i64, c_uint);

macro_rules! loops {
    ($($name:ident),*) => {$(
        /// # Safety
        /// libgomp's contract of the function of this name.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            outlined: Outlined,
            data: *mut c_void,
            threads: c_uint,
            start: i64,
            end: i64,
            incr: i64,
            chunk: i64,
            flags: c_uint,
        ) {
            let name = concat!(stringify!($name), "\0");
            let name = CStr::from_bytes_with_nul(name.as_bytes()).unwrap_or(c"");
            static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
            run_region(name, &REAL, outlined, data, None, |real, f, d| {
                // SAFETY: libgomp's function of this name has this signature.
                let real: Loop = unsafe { std::mem::transmute::<*mut c_void, Loop>(real) };
                // SAFETY: forwarding the caller's arguments.
                unsafe { real(f, d, threads, start, end, incr, chunk, flags) }
            });
        }
    )*};
}

loops!(
    GOMP_parallel_loop_static,
    GOMP_parallel_loop_dynamic,
    GOMP_parallel_loop_guided,
    GOMP_parallel_loop_nonmonotonic_dynamic,
    GOMP_parallel_loop_nonmonotonic_guided
);

/// The runtime-scheduled loops: no chunk size.
type RuntimeLoop = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, i64, i64, i64, c_uint);

macro_rules! runtime_loops {
    ($($name:ident),*) => {$(
        /// # Safety
        /// libgomp's contract of the function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            outlined: Outlined,
            data: *mut c_void,
            threads: c_uint,
            start: i64,
            end: i64,
            incr: i64,
            flags: c_uint,
        ) {
            let name = concat!(stringify!($name), "\0");
            let name = CStr::from_bytes_with_nul(name.as_bytes()).unwrap_or(c"");
            static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
            run_region(name, &REAL, outlined, data, None, |real, f, d| {
                let real: RuntimeLoop =
                    // SAFETY: libgomp's function of this name has this signature.
                    unsafe { std::mem::transmute::<*mut c_void, RuntimeLoop>(real) };
                // SAFETY: forwarding the caller's arguments.
                unsafe { real(f, d, threads, start, end, incr, flags) }
            });
        }
    )*};
}

runtime_loops!(
    GOMP_parallel_loop_runtime,
    GOMP_parallel_loop_nonmonotonic_runtime,
    GOMP_parallel_loop_maybe_nonmonotonic_runtime
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trampolines_call_of_the_outlined_function_is_found() {
        let frame = trampoline_frame();
        let start = trampoline as *const () as usize as u64;
        assert_eq!(frame, start + 23, "{frame:#x} {start:#x}");
    }
}
