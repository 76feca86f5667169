//! Labels from the program: the C entry points that `hpcrun.h` declares
//! (weak) for programs that name their own data.
//!
//! * `hpcrun_label(ptr, name)`: the tracked block that contains `ptr` (a
//!   registered range first, then a heap block) is named `name`. The block
//!   moves to the site of its call path *with that label*, so two blocks
//!   from one call path with different names are two objects. `ptr` in no
//!   tracked block (a block below `--min-bytes`, stack or static data) is
//!   counted (`labels_untracked` in the measurement) and otherwise ignored:
//!   `hpcrun_register` is the way to name such memory.
//! * `hpcrun_register(ptr, bytes, name)`: `[ptr, ptr+bytes)` becomes a
//!   tracked object with the call path of this call and the label `name`,
//!   whatever its size (`--min-bytes` does not apply). For memory the
//!   allocation hooks cannot see or see only as a whole: pool
//!   sub-allocations, custom allocators, arenas. Registered ranges win over
//!   the heap blocks that contain them, and a registered range nested in
//!   another registered range wins over it (up to 16 ranges deep, see
//!   `objects`). Registering again at the same `ptr` replaces the range.
//! * `hpcrun_unregister(ptr)`: forgets the range registered at `ptr` (the
//!   program calls it before it releases or reuses the memory).
//!
//! Names are copied (at most [`objects::LABEL_BYTES`] bytes; the program's
//! string need not outlive the call). A null or empty name means no label.
//! The calls come from ordinary program context, from any thread, at any
//! time: before the library is ready, or when re-entered from inside a hook,
//! they do nothing. They never fail and preserve `errno`.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering::Relaxed;

use crate::hooks;
use crate::objects;
use crate::sys;
use crate::threads::guard;

/// The name at `name`, cut to the label limit.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn copy_name(name: *const c_char) -> ([u8; objects::LABEL_BYTES], usize) {
    let mut buf = [0u8; objects::LABEL_BYTES];
    // SAFETY: per the caller's contract; no more than the buffer is read.
    let n = unsafe { sys::c_string_prefix(name, &mut buf) };
    (buf, n)
}

/// Names the tracked block that contains `ptr`.
///
/// # Safety
/// `name` is null or a NUL-terminated string (`ptr` is only compared).
#[no_mangle]
pub unsafe extern "C" fn hpcrun_label(ptr: *const c_void, name: *const c_char) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: per this function's contract.
    let (buf, n) = unsafe { copy_name(name) };
    guard::guarded(|| {
        let Some(objs) = objects::get() else {
            return;
        };
        if !objs.relabel(ptr as u64, &buf[..n]) {
            objs.labels_untracked.fetch_add(1, Relaxed);
        }
    });
}

/// Enters `[ptr, ptr+bytes)` as an object named `name`, allocated here.
///
/// # Safety
/// `name` is null or a NUL-terminated string (the range is never read).
#[no_mangle]
pub unsafe extern "C" fn hpcrun_register(ptr: *const c_void, bytes: usize, name: *const c_char) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: per this function's contract.
    let (buf, n) = unsafe { copy_name(name) };
    guard::guarded(|| {
        hooks::track(
            ptr as u64,
            bytes as u64,
            hooks::Entry::Registered(&buf[..n]),
            None,
        )
    });
}

/// Forgets the range registered at `ptr`.
#[no_mangle]
pub extern "C" fn hpcrun_unregister(ptr: *const c_void) {
    if ptr.is_null() {
        return;
    }
    guard::guarded(|| {
        if let Some(objs) = objects::get() {
            objs.unregister(ptr as u64);
        }
    });
}
