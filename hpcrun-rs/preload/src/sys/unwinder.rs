//! The C unwinder (`_Unwind_*`) that the library's Rust code calls, found
//! when first called instead of loaded with the library.
//!
//! Rust's panics and the personality routine of the library's frames call
//! twelve functions of the system unwinder (`_Unwind_RaiseException`,
//! `_Unwind_Resume`, `_Unwind_GetIP`, ...), which GCC's `libgcc_s.so.1`
//! defines. Linked against it, the library made every process load it:
//! the loader maps it and relocates it, and its constructor runs GCC's
//! CPU-model detection (a dozen `cpuid` instructions, each a trap to the
//! hypervisor in a virtual machine). A C program never needs it; that was
//! about 0.08 ms of each short-lived child's start (docs/PERFORMANCE.md,
//! "Short-lived children").
//!
//! So the library defines these twelve symbols itself, hidden (they bind
//! only the library's own calls, never the program's), as trampolines
//! that jump to the unwinder's function: the one the program's own symbol
//! lookup finds (`dlsym(RTLD_DEFAULT)`: the `libgcc_s` that `libstdc++`
//! or `libgfortran` loaded, or LLVM's `libunwind`, the same unwinder that
//! runs when a C++ exception passes through one of the library's hooks
//! and calls the library's personality routine), else `libgcc_s.so.1`
//! loaded then (`dlopen`, `RTLD_LOCAL`). The first call of each resolves
//! it; a trampoline is a jump, never a frame of its own, so an unwinder
//! that looks at its caller (`_Unwind_Resume`, `_Unwind_RaiseException`)
//! sees the caller it would have seen.
//!
//! These calls happen only when something unwinds: a C++ exception
//! through a hook, or a panic inside the library (a bug, caught where the
//! library catches it). When no unwinder can be found (the program
//! forbids opening the file), raising an exception reports a fatal error,
//! so a panic aborts, and resuming one aborts: what an unwinder that
//! cannot find its tables does.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering::*};

/// The unwinder's functions the library calls, by slot.
const NAMES: [&CStr; 12] = [
    c"_Unwind_RaiseException",
    c"_Unwind_Resume",
    c"_Unwind_DeleteException",
    c"_Unwind_GetIP",
    c"_Unwind_GetIPInfo",
    c"_Unwind_SetIP",
    c"_Unwind_SetGR",
    c"_Unwind_GetLanguageSpecificData",
    c"_Unwind_GetRegionStart",
    c"_Unwind_GetTextRelBase",
    c"_Unwind_GetDataRelBase",
    c"_Unwind_Backtrace",
];

/// Each slot's function once resolved (0: not yet).
static RESOLVED: [AtomicUsize; 12] = [const { AtomicUsize::new(0) }; 12];

/// The `dlopen` handle of `libgcc_s.so.1` when this library loaded it
/// (0: not loaded by it).
static LIBGCC: AtomicUsize = AtomicUsize::new(0);

/// A hidden global function `name` that jumps to the dispatch with slot
/// `slot` in r11.
macro_rules! trampoline {
    ($name:literal, $slot:literal) => {
        concat!(
            ".globl ",
            $name,
            "\n",
            ".hidden ",
            $name,
            "\n",
            ".type ",
            $name,
            ",@function\n",
            ".p2align 4\n",
            $name,
            ":\n",
            "mov r11d, ",
            $slot,
            "\n",
            "jmp hpcrun_unwinder_dispatch\n",
            ".size ",
            $name,
            ", . - ",
            $name,
            "\n",
        )
    };
}

// Each of the twelve names loads its slot number into r11 (a scratch
// register in every call) and jumps to the dispatch code, which jumps on
// to the resolved function with the caller's registers and stack
// untouched. The first call saves the argument registers (every argument
// of these functions is an integer or a pointer), resolves (a call on
// the caller's stack, aligned: 8 + 6 pushes + 8 bytes), restores them
// and jumps.
std::arch::global_asm!(
    ".pushsection .text.hpcrun_unwinder,\"ax\",@progbits",
    ".p2align 4",
    "hpcrun_unwinder_dispatch:",
    "lea rax, [rip + {resolved}]",
    "mov rax, qword ptr [rax + r11 * 8]",
    "test rax, rax",
    "jz 2f",
    "jmp rax",
    "2:",
    "push rdi",
    "push rsi",
    "push rdx",
    "push rcx",
    "push r8",
    "push r9",
    "sub rsp, 8",
    "mov rdi, r11",
    "call {resolve}",
    "add rsp, 8",
    "pop r9",
    "pop r8",
    "pop rcx",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "jmp rax",
    trampoline!("_Unwind_RaiseException", 0),
    trampoline!("_Unwind_Resume", 1),
    trampoline!("_Unwind_DeleteException", 2),
    trampoline!("_Unwind_GetIP", 3),
    trampoline!("_Unwind_GetIPInfo", 4),
    trampoline!("_Unwind_SetIP", 5),
    trampoline!("_Unwind_SetGR", 6),
    trampoline!("_Unwind_GetLanguageSpecificData", 7),
    trampoline!("_Unwind_GetRegionStart", 8),
    trampoline!("_Unwind_GetTextRelBase", 9),
    trampoline!("_Unwind_GetDataRelBase", 10),
    trampoline!("_Unwind_Backtrace", 11),
    ".popsection",
    resolved = sym RESOLVED,
    resolve = sym resolve,
);

/// Resolves slot `slot` (called by the dispatch code, once per slot, or
/// again by threads that raced): the unwinder's function, or this
/// module's stand-in when none is found.
extern "C" fn resolve(slot: usize) -> usize {
    let Some(name) = NAMES.get(slot) else {
        // SAFETY: abort ends the process; no slot number outside NAMES
        // is ever loaded by the trampolines.
        unsafe { libc::abort() }
    };
    let mut f = super::dl::first_symbol(name);
    if f == 0 {
        f = from_libgcc(name);
    }
    if f == 0 {
        f = stand_in(slot);
    }
    RESOLVED[slot].store(f, Release);
    f
}

/// `name` in `libgcc_s.so.1`, loaded (once) if the process has not.
fn from_libgcc(name: &CStr) -> usize {
    let mut handle = LIBGCC.load(Acquire);
    if handle == 0 {
        // libc's `dlopen`, not the library's own hook: this may run inside
        // an unwinding (a thread the program cancelled, leaving the
        // library's `pthread_create` frame), where the hook's module
        // refresh and its locks have no place.
        let real = super::dl::next_symbol(c"dlopen");
        if real.is_null() {
            return 0;
        }
        type DlopenFn = unsafe extern "C" fn(*const libc::c_char, libc::c_int) -> *mut c_void;
        // SAFETY: RTLD_NEXT's `dlopen` has this signature.
        let real: DlopenFn = unsafe { std::mem::transmute::<*mut c_void, DlopenFn>(real) };
        // SAFETY: a NUL-terminated file name; RTLD_LOCAL keeps its symbols
        // out of the program's lookup order.
        handle =
            unsafe { real(c"libgcc_s.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) } as usize;
        if handle == 0 {
            return 0;
        }
        if let Err(other) = LIBGCC.compare_exchange(0, handle, AcqRel, Acquire) {
            // Another thread loaded it too: the same object, one more
            // reference.
            // (libc's `dlclose`, as for `dlopen` above.)
            let close = super::dl::next_symbol(c"dlclose");
            if !close.is_null() {
                type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> libc::c_int;
                // SAFETY: RTLD_NEXT's `dlclose` has this signature, and
                // `handle` is a handle its `dlopen` returned.
                unsafe {
                    let close: DlcloseFn = std::mem::transmute::<*mut c_void, DlcloseFn>(close);
                    close(handle as *mut c_void);
                }
            }
            handle = other;
        }
    }
    // SAFETY: a live handle and a NUL-terminated name.
    unsafe { libc::dlsym(handle as *mut c_void, name.as_ptr()) as usize }
}

/// What slot `slot` does when no unwinder exists.
fn stand_in(slot: usize) -> usize {
    match slot {
        0 => raise_without_unwinder as *const () as usize,
        1 => resume_without_unwinder as *const () as usize,
        2 => nothing as *const () as usize,
        4 => zero_info as *const () as usize,
        5 => nothing_set as *const () as usize,
        6 => nothing_set_gr as *const () as usize,
        11 => backtrace_without_unwinder as *const () as usize,
        _ => zero as *const () as usize,
    }
}

/// `_URC_FATAL_PHASE1_ERROR`: Rust's panic aborts on it.
extern "C" fn raise_without_unwinder(_exception: *mut c_void) -> c_int {
    3
}

extern "C" fn resume_without_unwinder(_exception: *mut c_void) {
    // SAFETY: abort ends the process: an exception half unwound cannot go
    // on without the unwinder that started it.
    unsafe { libc::abort() }
}

extern "C" fn nothing(_: *mut c_void) {}

extern "C" fn nothing_set(_: *mut c_void, _: usize) {}

extern "C" fn nothing_set_gr(_: *mut c_void, _: c_int, _: usize) {}

extern "C" fn zero(_: *mut c_void) -> usize {
    0
}

extern "C" fn zero_info(_: *mut c_void, _: *mut c_int) -> usize {
    0
}

/// `_URC_END_OF_STACK`: an empty backtrace.
extern "C" fn backtrace_without_unwinder(_: *mut c_void, _: *mut c_void) -> c_int {
    5
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_is_caught_through_the_unwinder_found_at_first_use() {
        let caught = std::panic::catch_unwind(|| {
            if std::hint::black_box(true) {
                panic!("through the unwinder");
            }
        });
        assert!(caught.is_err());
        // The panic was raised by a real unwinder (this test binary links
        // none: the module's definitions stand in), not the stand-in.
        let raise = super::RESOLVED[0].load(super::Relaxed);
        assert!(raise != 0 && raise != super::stand_in(0));
    }
}
