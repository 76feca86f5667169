//! LLVM's OpenMP runtime (libomp: `clang -fopenmp`, `__kmpc_fork_call`)
//! through OMPT, the tool interface of OpenMP 5: every thread's samples
//! inside a parallel region hang below the calling context of the
//! region, as with libgomp ([`super::openmp`]), not below the region that
//! happened to create the thread pool.
//!
//! `__kmpc_fork_call` is variadic (the outlined microtask gets the
//! region's shared variables as further arguments), so it is not
//! interposed with a trampoline: this library defines `ompt_start_tool`,
//! which libomp looks up when it initialises (this definition comes
//! first in lookup order, before libomp's own weak one), and registers
//! three callbacks:
//!
//! * `parallel_begin`, on the thread entering a region: the region's
//!   record ([`openmp::begin_here`]: its call path from the program's
//!   call of the runtime, `codeptr_ra`, continued by the enclosing region
//!   or the thread's creation path), kept in the region's tool data;
//! * `implicit_task` begin, on every thread of the team (the entering
//!   one too): the record published as the thread's current region
//!   ([`ThreadState::omp_region`]); a thread running another thread's
//!   region is a pool worker; at its end, the enclosing region (the
//!   entering thread's) or none published again;
//! * `parallel_end`: the region is over.
//!
//! The sample handler cuts a path at libomp's call of the outlined
//! function (`__kmp_invoke_microtask`, [`openmp::MICROTASK_FRAME`],
//! found when the tool starts) and continues it with the published
//! region's path, as it does at libgomp's trampoline. A record stays
//! alive while any thread has it published: each publication holds a
//! reference and the region one more until `parallel_end`; the last to
//! let go frees it (libomp ends a worker's implicit task when the worker
//! wakes for the next region, after the region ended).
//!
//! libgomp does not implement OMPT: nothing here runs under it. Another
//! tool found after this library (`ompt_start_tool` in the program or a
//! later library) is started instead, and the regions then stay below
//! their creators. Without measurement (no output directory) no tool is
//! started.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::atomic::Ordering;

use super::openmp::{self, Region, MICROTASK_FRAME};
use crate::sys;
use crate::threads::config;
use crate::threads::guard::READY;
use crate::threads::{self, ThreadState};

/// `ompt_function_lookup_t`: an entry point of the runtime by name.
type Lookup = unsafe extern "C" fn(*const c_char) -> *mut c_void;
/// `ompt_set_callback_t`.
type SetCallback = unsafe extern "C" fn(c_int, *mut c_void) -> c_int;
/// `ompt_start_tool_t`.
type StartTool = unsafe extern "C" fn(c_uint, *const c_char) -> *mut StartToolResult;

/// `ompt_callbacks_t` values (OpenMP 5.0, table 4.2).
const CALLBACK_PARALLEL_BEGIN: c_int = 3;
const CALLBACK_PARALLEL_END: c_int = 4;
const CALLBACK_IMPLICIT_TASK: c_int = 7;
/// `ompt_scope_endpoint_t`.
const SCOPE_BEGIN: c_int = 1;
const SCOPE_END: c_int = 2;

/// `ompt_start_tool_result_t`.
#[repr(C)]
pub struct StartToolResult {
    initialize: extern "C" fn(Lookup, c_int, *mut u64) -> c_int,
    finalize: extern "C" fn(*mut u64),
    tool_data: u64,
}

/// The result handed to libomp, which may write its `tool_data`.
struct Shared(std::cell::UnsafeCell<StartToolResult>);

// SAFETY: libomp reads it, and writes only `tool_data` (which this
// library never reads), once, while it initialises.
unsafe impl Sync for Shared {}

static RESULT: Shared = Shared(std::cell::UnsafeCell::new(StartToolResult {
    initialize,
    finalize,
    tool_data: 0,
}));

/// Called by libomp when it initialises: this library is its tool while
/// the process is measured and no other tool comes after it in lookup
/// order.
///
/// # Safety
/// libomp's contract: `runtime_version` is a C string or null.
#[no_mangle]
pub unsafe extern "C" fn ompt_start_tool(
    omp_version: c_uint,
    runtime_version: *const c_char,
) -> *mut StartToolResult {
    // The next definition: libomp's own (which starts a tool found after
    // libomp) or another tool's. A tool of the program's keeps OMPT.
    let next = sys::next_symbol(c"ompt_start_tool");
    if !next.is_null() {
        // SAFETY: a definition of `ompt_start_tool`, of that type.
        let next = unsafe { std::mem::transmute::<*mut c_void, StartTool>(next) };
        // SAFETY: forwarding libomp's arguments.
        let other = unsafe { next(omp_version, runtime_version) };
        if !other.is_null() {
            return other;
        }
    }
    if config::get().out_dir.is_none() {
        return std::ptr::null_mut();
    }
    RESULT.0.get()
}

/// Registers the callbacks when libomp's call of the outlined function
/// is found; 0 (no tool) otherwise.
extern "C" fn initialize(lookup: Lookup, _device: c_int, _data: *mut u64) -> c_int {
    let frame = microtask_frame(lookup as *const () as usize);
    if frame == 0 {
        return 0;
    }
    // SAFETY: libomp's lookup function, with a C string.
    let set = unsafe { lookup(c"ompt_set_callback".as_ptr()) };
    if set.is_null() {
        return 0;
    }
    MICROTASK_FRAME.store(frame, Ordering::Relaxed);
    // SAFETY: `ompt_set_callback`, by its name.
    let set = unsafe { std::mem::transmute::<*mut c_void, SetCallback>(set) };
    let callbacks: [(c_int, *mut c_void); 3] = [
        (CALLBACK_PARALLEL_BEGIN, parallel_begin as *mut c_void),
        (CALLBACK_PARALLEL_END, parallel_end as *mut c_void),
        (CALLBACK_IMPLICIT_TASK, implicit_task as *mut c_void),
    ];
    for (event, f) in callbacks {
        // SAFETY: each callback has the signature OMPT gives its event.
        unsafe { set(event, f) };
    }
    1
}

extern "C" fn finalize(_data: *mut u64) {}

/// The lookup address of the call of the outlined function in libomp's
/// `__kmp_invoke_microtask` (its first indirect call through a
/// register), in the library holding `runtime_code`; 0 when not found.
fn microtask_frame(runtime_code: usize) -> u64 {
    let Some((_, path)) = sys::module_of(runtime_code) else {
        return 0;
    };
    let Ok(path) = CString::new(path) else {
        return 0;
    };
    let start = sys::loaded_library_symbol(&path, c"__kmp_invoke_microtask") as u64;
    if start == 0 {
        return 0;
    }
    // The function is about 200 bytes long; its call comes after the
    // arguments are pushed, within its first 160 (read word by word
    // without risking a fault: the end of a mapping stops the read).
    let mut bytes = Vec::with_capacity(160);
    for word in (0..20).map_while(|i| sys::read_word_checked(start + 8 * i)) {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    let mut decoder = iced_x86::Decoder::with_ip(64, &bytes, start, iced_x86::DecoderOptions::NONE);
    while decoder.can_decode() {
        let ins = decoder.decode();
        if ins.flow_control() == iced_x86::FlowControl::IndirectCall
            && ins.op0_kind() == iced_x86::OpKind::Register
        {
            return ins.next_ip() - 1;
        }
    }
    0
}

/// The record in an `ompt_data_t`.
///
/// # Safety
/// `data` is null or an `ompt_data_t` that is 0 or holds a record this
/// module made.
unsafe fn record_in(data: *mut u64) -> *const Region {
    if data.is_null() {
        return std::ptr::null();
    }
    // SAFETY: per the contract.
    unsafe { *data as *const Region }
}

/// Lets go of one reference to a record; the last frees it.
///
/// # Safety
/// `region` is a record this module made, and the caller holds one of
/// its references.
unsafe fn release(region: *const Region) {
    // SAFETY: alive while the caller's reference is held.
    if unsafe { (*region).refs.fetch_sub(1, Ordering::AcqRel) } == 1 {
        // SAFETY: the last reference: no thread has it published, and it
        // came from `Box::into_raw`.
        drop(unsafe { Box::from_raw(region as *mut Region) });
    }
}

/// `ompt_callback_parallel_begin`: the record of the region, in
/// `parallel_data`.
extern "C" fn parallel_begin(
    _task_data: *mut u64,
    _task_frame: *const c_void,
    parallel_data: *mut u64,
    _requested: c_uint,
    _flags: c_int,
    codeptr_ra: *const c_void,
) {
    if parallel_data.is_null() || !READY.load(Ordering::Acquire) {
        return;
    }
    let call = (codeptr_ra as u64).wrapping_sub(1);
    let Some(region) = openmp::begin_here(call) else {
        return;
    };
    region.refs.store(1, Ordering::Relaxed);
    // SAFETY: libomp's tool data of the region, written by its tool only.
    unsafe { *parallel_data = Box::into_raw(region) as u64 };
}

/// `ompt_callback_parallel_end`: the region's own reference let go.
extern "C" fn parallel_end(
    parallel_data: *mut u64,
    _task_data: *mut u64,
    _flags: c_int,
    _codeptr_ra: *const c_void,
) {
    // SAFETY: the region's tool data: 0 or the record `parallel_begin`
    // put there, holding the region's reference.
    let region = unsafe { record_in(parallel_data) };
    if region.is_null() {
        return;
    }
    // SAFETY: as above; the tool data let go of it.
    unsafe {
        *parallel_data = 0;
        release(region);
    }
}

/// `ompt_callback_implicit_task`: a thread starts or ends its part of a
/// region.
extern "C" fn implicit_task(
    endpoint: c_int,
    parallel_data: *mut u64,
    _task_data: *mut u64,
    _threads: c_uint,
    _index: c_uint,
    _flags: c_int,
) {
    let Some(state) = threads::current() else {
        return;
    };
    match endpoint {
        SCOPE_BEGIN => {
            // SAFETY: the region's tool data (0 for the initial task's
            // region, which no `parallel_begin` announced).
            let region = unsafe { record_in(parallel_data) };
            if !region.is_null() {
                // SAFETY: the region holds its own reference until its
                // end, after every thread of the team began.
                unsafe { publish(state, region) };
            }
        }
        SCOPE_END => unpublish(state),
        _ => {}
    }
}

/// Publishes `region` as the thread's current region, taking a
/// reference.
///
/// # Safety
/// `region` is a record of this module, alive.
unsafe fn publish(state: &ThreadState, region: *const Region) {
    // SAFETY: alive per the contract.
    let r = unsafe { &*region };
    r.refs.fetch_add(1, Ordering::AcqRel);
    if r.master != state.index {
        state.omp_worker.store(true, Ordering::Relaxed);
        // A worker runs no region of its own when it joins a team: one
        // still published lost its end; it is let go of here.
        unpublish(state);
    }
    state.omp_region.store(region as u64, Ordering::Relaxed);
}

/// Ends the thread's part of its current region: publishes what it ran
/// before (the enclosing region of the thread that entered it; a worker
/// ran none) and lets go of its reference.
fn unpublish(state: &ThreadState) {
    let current = state.omp_region.load(Ordering::Relaxed) as *const Region;
    if current.is_null() {
        return;
    }
    // SAFETY: published, so this thread holds a reference.
    let r = unsafe { &*current };
    if r.refs.load(Ordering::Relaxed) == 0 {
        // A libgomp region (its trampoline unpublishes it).
        return;
    }
    let outer = if r.master == state.index { r.outer } else { 0 };
    state.omp_region.store(outer, Ordering::Relaxed);
    // SAFETY: this thread's reference, no longer published.
    unsafe { release(current) };
}
