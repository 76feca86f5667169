//! C++'s `operator new` and `operator delete` (every form: plain and
//! array, nothrow, aligned, sized), by their mangled names. tcmalloc and
//! mimalloc define their own, which serve blocks without calling `malloc`:
//! without these hooks a C++ program linked with either had no heap
//! object from `new`.
//!
//! Each `new` calls the next definition (`sys::real::cxx`: the
//! allocator's, else libstdc++'s) and records the block once at the
//! program's call of `new`: when that definition calls `malloc` (libstdc++,
//! jemalloc), the nested `malloc` hook leaves the block to this one
//! (`sys::real::in_allocator`). A `new` that throws (`std::bad_alloc`)
//! unwinds through the hook (`C-unwind`) with nothing recorded and the
//! thread's marks restored. Each `delete` forgets the block, then calls
//! the next definition.

#![allow(unsafe_code)]

use std::ffi::c_void;

use super::{forget_block, record, Caller};
use crate::sys;
use crate::sys::real::cxx::{self, DeleteArgs, NewArgs, Symbol};

static NEW: Symbol = Symbol::new(c"_Znwm");
static NEW_ARRAY: Symbol = Symbol::new(c"_Znam");
static NEW_NOTHROW: Symbol = Symbol::new(c"_ZnwmRKSt9nothrow_t");
static NEW_ARRAY_NOTHROW: Symbol = Symbol::new(c"_ZnamRKSt9nothrow_t");
static NEW_ALIGNED: Symbol = Symbol::new(c"_ZnwmSt11align_val_t");
static NEW_ARRAY_ALIGNED: Symbol = Symbol::new(c"_ZnamSt11align_val_t");
static NEW_ALIGNED_NOTHROW: Symbol = Symbol::new(c"_ZnwmSt11align_val_tRKSt9nothrow_t");
static NEW_ARRAY_ALIGNED_NOTHROW: Symbol = Symbol::new(c"_ZnamSt11align_val_tRKSt9nothrow_t");

static DELETE: Symbol = Symbol::new(c"_ZdlPv");
static DELETE_ARRAY: Symbol = Symbol::new(c"_ZdaPv");
static DELETE_SIZED: Symbol = Symbol::new(c"_ZdlPvm");
static DELETE_ARRAY_SIZED: Symbol = Symbol::new(c"_ZdaPvm");
static DELETE_NOTHROW: Symbol = Symbol::new(c"_ZdlPvRKSt9nothrow_t");
static DELETE_ARRAY_NOTHROW: Symbol = Symbol::new(c"_ZdaPvRKSt9nothrow_t");
static DELETE_ALIGNED: Symbol = Symbol::new(c"_ZdlPvSt11align_val_t");
static DELETE_ARRAY_ALIGNED: Symbol = Symbol::new(c"_ZdaPvSt11align_val_t");
static DELETE_SIZED_ALIGNED: Symbol = Symbol::new(c"_ZdlPvmSt11align_val_t");
static DELETE_ARRAY_SIZED_ALIGNED: Symbol = Symbol::new(c"_ZdaPvmSt11align_val_t");
static DELETE_ALIGNED_NOTHROW: Symbol = Symbol::new(c"_ZdlPvSt11align_val_tRKSt9nothrow_t");
static DELETE_ARRAY_ALIGNED_NOTHROW: Symbol = Symbol::new(c"_ZdaPvSt11align_val_tRKSt9nothrow_t");

/// Looks every form up (at start-up, so that the first `new` of a
/// program thread does not wait for the loader; forms not found yet are
/// looked up again at their first call).
pub(crate) fn resolve() {
    for sym in [
        &NEW,
        &NEW_ARRAY,
        &NEW_NOTHROW,
        &NEW_ARRAY_NOTHROW,
        &NEW_ALIGNED,
        &NEW_ARRAY_ALIGNED,
        &NEW_ALIGNED_NOTHROW,
        &NEW_ARRAY_ALIGNED_NOTHROW,
        &DELETE,
        &DELETE_ARRAY,
        &DELETE_SIZED,
        &DELETE_ARRAY_SIZED,
        &DELETE_NOTHROW,
        &DELETE_ARRAY_NOTHROW,
        &DELETE_ALIGNED,
        &DELETE_ARRAY_ALIGNED,
        &DELETE_SIZED_ALIGNED,
        &DELETE_ARRAY_SIZED_ALIGNED,
        &DELETE_ALIGNED_NOTHROW,
        &DELETE_ARRAY_ALIGNED_NOTHROW,
    ] {
        sym.resolve();
    }
}

/// The block of the next `sym` for `args`, recorded at `caller`.
///
/// # Safety
/// `sym` is an `operator new` of `args`'s form; `entry_sp` is the
/// hook's stack pointer at entry (`Caller::at_entry`).
#[inline(always)]
unsafe fn new_from(sym: &Symbol, args: NewArgs, entry_sp: u64, entry_bp: u64) -> *mut c_void {
    sys::note_allocation();
    // SAFETY: per this function's contract (may throw: nothing of the
    // profiler's is held across it but the call's mark, undone).
    let p = unsafe { cxx::new(sym, args) };
    // SAFETY: the entry's stack pointer, per this function's contract.
    let caller = unsafe { Caller::at_entry(entry_sp, entry_bp) };
    record(p, args.size(), Some(caller));
    p
}

/// Defines an `operator new` form: a naked entry (`hook_entry!`) that
/// passes its stack and frame pointers to `$imp`, which forwards to
/// `$sym` with the arguments `$args` and records the block.
macro_rules! new_hook {
    ($name:ident($($arg:ident: $ty:ty),*) => $imp:ident, $sp:literal, $bp:literal, $sym:ident, $args:expr) => {
        hook_entry! {
            /// # Safety
            /// C++'s contract of this form of `operator new`.
            $name($($arg: $ty),*) -> *mut c_void => $imp, $sp, $bp
        }

        /// # Safety
        /// Called only by the naked entry of the same form (its stack and
        /// frame pointers at entry); C++'s contract of this form.
        unsafe extern "C-unwind" fn $imp($($arg: $ty,)* entry_sp: u64, entry_bp: u64) -> *mut c_void {
            // SAFETY: the next definition of the same form, with the
            // caller's arguments and entry registers.
            unsafe { new_from(&$sym, $args, entry_sp, entry_bp) }
        }
    };
}

new_hook!(_Znwm(size: usize) => new_at, "rsi", "rdx", NEW, NewArgs::Size(size));
new_hook!(_Znam(size: usize) => new_array_at, "rsi", "rdx", NEW_ARRAY, NewArgs::Size(size));
new_hook!(_ZnwmRKSt9nothrow_t(size: usize, t: *const c_void) => new_nothrow_at, "rdx", "rcx",
    NEW_NOTHROW, NewArgs::Nothrow(size, t));
new_hook!(_ZnamRKSt9nothrow_t(size: usize, t: *const c_void) => new_array_nothrow_at, "rdx", "rcx",
    NEW_ARRAY_NOTHROW, NewArgs::Nothrow(size, t));
new_hook!(_ZnwmSt11align_val_t(size: usize, align: usize) => new_aligned_at, "rdx", "rcx",
    NEW_ALIGNED, NewArgs::Aligned(size, align));
new_hook!(_ZnamSt11align_val_t(size: usize, align: usize) => new_array_aligned_at, "rdx", "rcx",
    NEW_ARRAY_ALIGNED, NewArgs::Aligned(size, align));
new_hook!(_ZnwmSt11align_val_tRKSt9nothrow_t(size: usize, align: usize, t: *const c_void)
    => new_aligned_nothrow_at, "rcx", "r8",
    NEW_ALIGNED_NOTHROW, NewArgs::AlignedNothrow(size, align, t));
new_hook!(_ZnamSt11align_val_tRKSt9nothrow_t(size: usize, align: usize, t: *const c_void)
    => new_array_aligned_nothrow_at, "rcx", "r8",
    NEW_ARRAY_ALIGNED_NOTHROW, NewArgs::AlignedNothrow(size, align, t));

/// Forgets the block (if tracked), then calls the next `sym`.
///
/// # Safety
/// `sym` is an `operator delete` of `args`'s form; delete's contract.
#[inline(always)]
unsafe fn delete_with(sym: &Symbol, args: DeleteArgs) {
    // SAFETY: null or a live block of the program's allocator.
    unsafe { forget_block(args.ptr()) };
    // SAFETY: per this function's contract.
    unsafe { cxx::delete(sym, args) }
}

/// Defines an `operator delete` form forwarding to `$sym`.
macro_rules! delete_hook {
    ($name:ident($($arg:ident: $ty:ty),*) => $sym:ident, $args:expr) => {
        /// # Safety
        /// C++'s contract of this form of `operator delete`.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) {
            // SAFETY: the next definition of the same form, with the
            // caller's arguments.
            unsafe { delete_with(&$sym, $args) }
        }
    };
}

delete_hook!(_ZdlPv(p: *mut c_void) => DELETE, DeleteArgs::Plain(p));
delete_hook!(_ZdaPv(p: *mut c_void) => DELETE_ARRAY, DeleteArgs::Plain(p));
delete_hook!(_ZdlPvm(p: *mut c_void, size: usize) => DELETE_SIZED, DeleteArgs::One(p, size));
delete_hook!(_ZdaPvm(p: *mut c_void, size: usize) => DELETE_ARRAY_SIZED, DeleteArgs::One(p, size));
delete_hook!(_ZdlPvRKSt9nothrow_t(p: *mut c_void, t: *const c_void) => DELETE_NOTHROW,
    DeleteArgs::Nothrow(p, t));
delete_hook!(_ZdaPvRKSt9nothrow_t(p: *mut c_void, t: *const c_void) => DELETE_ARRAY_NOTHROW,
    DeleteArgs::Nothrow(p, t));
delete_hook!(_ZdlPvSt11align_val_t(p: *mut c_void, align: usize) => DELETE_ALIGNED,
    DeleteArgs::One(p, align));
delete_hook!(_ZdaPvSt11align_val_t(p: *mut c_void, align: usize) => DELETE_ARRAY_ALIGNED,
    DeleteArgs::One(p, align));
delete_hook!(_ZdlPvmSt11align_val_t(p: *mut c_void, size: usize, align: usize)
    => DELETE_SIZED_ALIGNED, DeleteArgs::Two(p, size, align));
delete_hook!(_ZdaPvmSt11align_val_t(p: *mut c_void, size: usize, align: usize)
    => DELETE_ARRAY_SIZED_ALIGNED, DeleteArgs::Two(p, size, align));
delete_hook!(_ZdlPvSt11align_val_tRKSt9nothrow_t(p: *mut c_void, align: usize, t: *const c_void)
    => DELETE_ALIGNED_NOTHROW, DeleteArgs::AlignedNothrow(p, align, t));
delete_hook!(_ZdaPvSt11align_val_tRKSt9nothrow_t(p: *mut c_void, align: usize, t: *const c_void)
    => DELETE_ARRAY_ALIGNED_NOTHROW, DeleteArgs::AlignedNothrow(p, align, t));
