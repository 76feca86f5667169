//! The malloc family's entry points: `malloc`, `calloc`, `realloc`,
//! `reallocarray`, `valloc`, `pvalloc`, `free`, `memalign`,
//! `aligned_alloc` and `posix_memalign`. Each allocating one is a naked
//! entry (`hook_entry!`) that passes the program's stack and
//! frame pointers to its `*_at` function, which calls the program's
//! allocator and records the block at its caller; `free` and `realloc`
//! forget the old block before the allocator has it back.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use super::{forget_block, record, Caller};
use crate::sys::{self, real};

hook_entry! {
    /// # Safety
    /// C's malloc contract.
    malloc(size: usize) -> *mut c_void => malloc_at, "rsi", "rdx"
}

/// # Safety
/// Called only by the naked entry of `malloc` (its stack and frame
/// pointers at entry); C's malloc contract.
unsafe extern "C" fn malloc_at(size: usize, entry_sp: u64, entry_bp: u64) -> *mut c_void {
    sys::note_allocation();
    let p = real::malloc(size);
    // SAFETY: the entry's stack pointer, per this function's contract.
    record(
        p,
        size,
        Some(unsafe { Caller::at_entry(entry_sp, entry_bp) }),
    );
    p
}

hook_entry! {
    /// # Safety
    /// C's calloc contract.
    calloc(n: usize, size: usize) -> *mut c_void => calloc_at, "rdx", "rcx"
}

/// # Safety
/// As [`malloc_at`], for calloc.
unsafe extern "C" fn calloc_at(n: usize, size: usize, entry_sp: u64, entry_bp: u64) -> *mut c_void {
    sys::note_allocation();
    let p = real::calloc(n, size);
    if !p.is_null() {
        // SAFETY: the entry's stack pointer, per this function's contract.
        let caller = unsafe { Caller::at_entry(entry_sp, entry_bp) };
        record(p, n.saturating_mul(size), Some(caller));
    }
    p
}

hook_entry! {
    /// # Safety
    /// C's realloc contract.
    realloc(old: *mut c_void, size: usize) -> *mut c_void => realloc_at, "rdx", "rcx"
}

/// # Safety
/// As [`malloc_at`], for realloc.
unsafe extern "C" fn realloc_at(
    old: *mut c_void,
    size: usize,
    entry_sp: u64,
    entry_bp: u64,
) -> *mut c_void {
    // SAFETY: the entry's stack pointer, per this function's contract.
    let caller = unsafe { Caller::at_entry(entry_sp, entry_bp) };
    // SAFETY: per the caller's contract.
    unsafe { realloc_from(old, size, caller) }
}

/// realloc, for a block the program asked for at `caller`.
///
/// # Safety
/// C's realloc contract.
unsafe fn realloc_from(old: *mut c_void, size: usize, caller: Caller) -> *mut c_void {
    // Forget first: once the allocator has the block back, another thread
    // may get the same address and record it.
    // SAFETY: `old` is null or a live block, per the caller's contract.
    unsafe { forget_block(old) };
    // SAFETY: `old` is null or a live block, per the caller's contract.
    let p = unsafe { real::realloc(old, size) };
    if !p.is_null() {
        record(p, size, Some(caller));
    }
    p
}

hook_entry! {
    /// # Safety
    /// glibc's reallocarray contract.
    reallocarray(old: *mut c_void, n: usize, size: usize) -> *mut c_void => reallocarray_at, "rcx", "r8"
}

/// # Safety
/// As [`malloc_at`], for reallocarray.
unsafe extern "C" fn reallocarray_at(
    old: *mut c_void,
    n: usize,
    size: usize,
    entry_sp: u64,
    entry_bp: u64,
) -> *mut c_void {
    let Some(bytes) = n.checked_mul(size) else {
        sys::set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    };
    // SAFETY: the entry's stack pointer, per this function's contract.
    let caller = unsafe { Caller::at_entry(entry_sp, entry_bp) };
    // SAFETY: per the caller's contract.
    unsafe { realloc_from(old, bytes, caller) }
}

hook_entry! {
    /// # Safety
    /// glibc's valloc contract.
    valloc(size: usize) -> *mut c_void => valloc_at, "rsi", "rdx"
}

/// # Safety
/// As [`malloc_at`], for valloc.
unsafe extern "C" fn valloc_at(size: usize, entry_sp: u64, entry_bp: u64) -> *mut c_void {
    let p = real::valloc(size);
    // SAFETY: the entry's stack pointer, per this function's contract.
    record(
        p,
        size,
        Some(unsafe { Caller::at_entry(entry_sp, entry_bp) }),
    );
    p
}

hook_entry! {
    /// # Safety
    /// glibc's pvalloc contract (size rounded up to whole pages).
    pvalloc(size: usize) -> *mut c_void => pvalloc_at, "rsi", "rdx"
}

/// # Safety
/// As [`malloc_at`], for pvalloc.
unsafe extern "C" fn pvalloc_at(size: usize, entry_sp: u64, entry_bp: u64) -> *mut c_void {
    let p = real::pvalloc(size);
    // SAFETY: the entry's stack pointer, per this function's contract.
    record(
        p,
        size,
        Some(unsafe { Caller::at_entry(entry_sp, entry_bp) }),
    );
    p
}

/// # Safety
/// C's free contract.
#[no_mangle]
pub unsafe extern "C" fn free(ptr: *mut c_void) {
    // SAFETY: `ptr` is null or a live block, per the caller's contract.
    unsafe { forget_block(ptr) };
    // SAFETY: per the caller's contract.
    unsafe { real::free(ptr) }
}

hook_entry! {
    /// # Safety
    /// C's memalign contract.
    memalign(align: usize, size: usize) -> *mut c_void => memalign_at, "rdx", "rcx"
}

/// # Safety
/// As [`malloc_at`], for memalign.
unsafe extern "C" fn memalign_at(
    align: usize,
    size: usize,
    entry_sp: u64,
    entry_bp: u64,
) -> *mut c_void {
    let p = real::memalign(align, size);
    // SAFETY: the entry's stack pointer, per this function's contract.
    record(
        p,
        size,
        Some(unsafe { Caller::at_entry(entry_sp, entry_bp) }),
    );
    p
}

hook_entry! {
    /// # Safety
    /// C11's aligned_alloc contract.
    aligned_alloc(align: usize, size: usize) -> *mut c_void => aligned_alloc_at, "rdx", "rcx"
}

/// # Safety
/// As [`malloc_at`], for aligned_alloc.
unsafe extern "C" fn aligned_alloc_at(
    align: usize,
    size: usize,
    entry_sp: u64,
    entry_bp: u64,
) -> *mut c_void {
    let p = real::aligned_alloc(align, size);
    // SAFETY: the entry's stack pointer, per this function's contract.
    record(
        p,
        size,
        Some(unsafe { Caller::at_entry(entry_sp, entry_bp) }),
    );
    p
}

hook_entry! {
    /// # Safety
    /// POSIX's posix_memalign contract (`out` is writable).
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int => posix_memalign_at, "rcx", "r8"
}

/// # Safety
/// As [`malloc_at`], for posix_memalign.
unsafe extern "C" fn posix_memalign_at(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
    entry_sp: u64,
    entry_bp: u64,
) -> c_int {
    let (rc, p) = real::posix_memalign(align, size);
    if rc != 0 {
        return rc;
    }
    // SAFETY: `out` is writable per the caller's contract.
    unsafe { *out = p };
    // SAFETY: the entry's stack pointer, per this function's contract.
    record(
        p,
        size,
        Some(unsafe { Caller::at_entry(entry_sp, entry_bp) }),
    );
    0
}
