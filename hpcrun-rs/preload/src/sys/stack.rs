//! The profiler's own stack per thread: the sample handlers never run
//! their work on the program's stacks.
//!
//! A program's thread may run on a tiny stack (16 KiB `pthread` stacks,
//! `OMP_STACKSIZE=32K`) or on a coroutine's (ucontext, Argobots, Boost
//! Context: 8-64 KiB with a guard page), while the handler needs about
//! 12 KiB and setting up a thread's state more. So each measured thread
//! gets a [`HandlerStack`] (a private mapping of [`HANDLER_STACK_BYTES`]
//! above a guard page, touched only as far as it is used):
//!
//! * it is the thread's alternate signal stack (`sigaltstack`) unless the
//!   program installed its own; the sample handlers are installed with
//!   `SA_ONSTACK`, so the kernel's signal frame lands on it, not on the
//!   interrupted stack;
//! * [`HandlerStack::run`] runs a function on it, switching the stack
//!   pointer when the code is elsewhere (on the program's own alternate
//!   stack, or while the thread's state is built), so the handler needs
//!   only a few hundred bytes of whatever stack the kernel chose;
//! * the program sees its own alternate stack only: the interposed
//!   `sigaltstack` reports "disabled" while the profiler's is installed,
//!   lets the program install its own (which then takes the kernel's
//!   frames) and puts the profiler's back when the program disables its
//!   own ([`program_sigaltstack`]).

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering::*};

use super::mem::{raw_mmap, raw_munmap};

/// Usable bytes of a thread's handler stack (virtual: pages are touched
/// only as deep as the handler, the fatal-signal writer or the thread's
/// set-up go).
pub const HANDLER_STACK_BYTES: usize = 256 << 10;

/// Guard page below it (a stack overflow faults instead of writing into
/// another mapping).
const GUARD: usize = 4096;

/// One thread's handler stack: [low, low + HANDLER_STACK_BYTES).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandlerStack {
    low: u64,
}

thread_local! {
    /// The calling thread's handler stack (low end; 0: none). Copied into
    /// a forked child with the thread, whose stack it still is.
    static OURS: Cell<u64> = const { Cell::new(0) };
}

/// The current stack pointer.
#[inline(always)]
fn stack_pointer() -> u64 {
    let sp: u64;
    // SAFETY: reads one register.
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    sp
}

/// The kernel's `stack_t`.
fn query_altstack() -> Option<libc::stack_t> {
    // SAFETY: all-zero is a valid stack_t; the kernel writes the current one.
    unsafe {
        let mut old: libc::stack_t = std::mem::zeroed();
        (libc::syscall(
            libc::SYS_sigaltstack,
            std::ptr::null::<libc::stack_t>(),
            &mut old,
        ) == 0)
            .then_some(old)
    }
}

/// True while the calling thread runs on an alternate signal stack (in
/// a signal handler installed with `SA_ONSTACK`).
pub fn on_signal_stack() -> bool {
    query_altstack().is_some_and(|s| s.ss_flags & libc::SS_ONSTACK != 0)
}

/// `sigaltstack(new, old)` as the raw system call (glibc's is a plain
/// wrapper; the interposed one is the program's). Returns 0 or -1 with
/// errno.
///
/// # Safety
/// `new` and `old` are null or valid `stack_t`.
pub unsafe fn raw_sigaltstack(new: *const libc::stack_t, old: *mut libc::stack_t) -> c_int {
    // SAFETY: per the caller's contract.
    unsafe { libc::syscall(libc::SYS_sigaltstack, new, old) as c_int }
}

fn install_altstack(low: u64) -> bool {
    let st = libc::stack_t {
        ss_sp: low as *mut c_void,
        ss_flags: 0,
        ss_size: HANDLER_STACK_BYTES,
    };
    // SAFETY: a valid stack_t naming our own mapping, which stays mapped
    // while it is installed (`HandlerStack::release` disables it first).
    unsafe { raw_sigaltstack(&st, std::ptr::null_mut()) == 0 }
}

impl HandlerStack {
    /// The calling thread's handler stack: the one it has already (a
    /// forked child's thread keeps its parent thread's), else a new
    /// mapping, installed as the alternate signal stack if the thread has
    /// none. `None` if the mapping failed.
    pub fn for_current_thread() -> Option<HandlerStack> {
        let known = OURS.with(|o| o.get());
        let stack = if known != 0 {
            HandlerStack { low: known }
        } else if let Some(low) = take_spare() {
            OURS.with(|o| o.set(low));
            HandlerStack { low }
        } else {
            let p = raw_mmap(
                0,
                GUARD + HANDLER_STACK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )?;
            // SAFETY: the first page of our own fresh mapping.
            unsafe { libc::mprotect(p as *mut c_void, GUARD, libc::PROT_NONE) };
            let low = p as u64 + GUARD as u64;
            OURS.with(|o| o.set(low));
            HandlerStack { low }
        };
        if query_altstack().is_some_and(|s| s.ss_flags & libc::SS_DISABLE != 0) {
            install_altstack(stack.low);
        }
        Some(stack)
    }

    /// True if `sp` lies on this stack.
    fn contains(&self, sp: u64) -> bool {
        self.low != 0 && sp >= self.low && sp < self.low + HANDLER_STACK_BYTES as u64
    }

    /// Runs `f` on this stack: directly if the code runs on it already,
    /// else with the stack pointer switched to its top (the caller's
    /// stack holds only this frame meanwhile). Async-signal-safe; `f` must
    /// not unwind (a panic is caught and dropped).
    pub fn run(&self, f: &mut dyn FnMut()) {
        self.run_below(0, f)
    }

    /// [`HandlerStack::run`] from a signal handler that interrupted code
    /// at stack pointer `interrupted_sp`: if that code ran on this stack
    /// (an allocation hook's unwinding, while the kernel put the signal
    /// frame on the program's own alternate stack), `f` runs below it
    /// (past the red zone), not over it.
    pub fn run_below(&self, interrupted_sp: u64, f: &mut dyn FnMut()) {
        if self.low == 0 || self.contains(stack_pointer()) {
            return f();
        }
        let top = if self.contains(interrupted_sp) {
            interrupted_sp.saturating_sub(1024) & !15
        } else {
            (self.low + HANDLER_STACK_BYTES as u64) & !15
        };
        if top <= self.low + 16 * 1024 {
            // (No room left below the interrupted code.)
            return f();
        }
        call_on_stack(top, f);
    }

    /// At the thread's exit: its alternate signal stack is disabled if it
    /// is this one, and the mapping is returned. The caller guarantees no
    /// handler runs on it any more (the thread's state is finished).
    pub fn release(self) {
        if self.low == 0 {
            return;
        }
        if query_altstack()
            .is_some_and(|s| s.ss_sp as u64 == self.low && s.ss_flags & libc::SS_DISABLE == 0)
        {
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: a valid stack_t; we do not run on that stack here.
            if unsafe { raw_sigaltstack(&off, std::ptr::null_mut()) } != 0 {
                // Still installed (we run on it?): keep it mapped.
                return;
            }
        }
        OURS.with(|o| {
            if o.get() == self.low {
                o.set(0);
            }
        });
        if !keep_spare(self.low) {
            raw_munmap(self.low - GUARD as u64, GUARD + HANDLER_STACK_BYTES);
        }
    }
}

/// Handler stacks of ended threads, kept for the next threads (low ends;
/// 0: empty): a program that creates and joins threads in a loop pays
/// no mapping, guard and first-touch faults per thread (about 24 us
/// here).
static SPARE: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

fn take_spare() -> Option<u64> {
    SPARE.iter().find_map(|s| {
        (s.load(Relaxed) != 0)
            .then(|| s.swap(0, AcqRel))
            .filter(|&l| l != 0)
    })
}

fn keep_spare(low: u64) -> bool {
    SPARE
        .iter()
        .any(|s| s.compare_exchange(0, low, AcqRel, Relaxed).is_ok())
}

/// Calls `f` with the stack pointer at `top` (16-byte aligned), then
/// returns on the caller's stack.
fn call_on_stack(top: u64, f: &mut dyn FnMut()) {
    extern "C" fn trampoline(data: *mut c_void) {
        // SAFETY: `data` points at the `&mut dyn FnMut()` of the caller
        // below, alive until the asm block returns.
        let f = unsafe { &mut *(data as *mut &mut dyn FnMut()) };
        // No unwinding across the stack switch.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    }
    let mut f = f;
    let data = &mut f as *mut &mut dyn FnMut() as *mut c_void;
    // SAFETY: `top` is the 16-byte aligned top of a mapped, writable stack
    // that nothing else uses meanwhile; r12 (callee-saved, so preserved
    // by `trampoline`) holds the caller's stack pointer, restored before
    // the block ends; every caller-saved register is declared clobbered.
    unsafe {
        std::arch::asm!(
            "mov r12, rsp",
            "mov rsp, {top}",
            "call {tramp}",
            "mov rsp, r12",
            top = in(reg) top,
            tramp = sym trampoline,
            in("rdi") data,
            out("r12") _,
            clobber_abi("C"),
        );
    }
}

/// The interposed `sigaltstack`: the program sees and sets its own
/// alternate stack only. While the profiler's is installed, `old` reports
/// it disabled; the program's own replaces it; disabling the program's
/// puts the profiler's back. Returns 0 or -1 with errno, as the call.
///
/// # Safety
/// `new` and `old` are null or valid `stack_t`.
pub unsafe fn program_sigaltstack(new: *const libc::stack_t, old: *mut libc::stack_t) -> c_int {
    let ours = OURS.with(|o| o.get());
    let mut current: libc::stack_t = match query_altstack() {
        Some(s) => s,
        // SAFETY: per the caller's contract (the call fails as natively).
        None => return unsafe { raw_sigaltstack(new, old) },
    };
    let ours_installed =
        ours != 0 && current.ss_sp as u64 == ours && current.ss_flags & libc::SS_DISABLE == 0;
    if ours_installed {
        let on_it = current.ss_flags & libc::SS_ONSTACK != 0;
        current = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // (A program handler the profiler ran on its stack: the program's
        // own changes are refused there, as on any active alternate stack.)
        if on_it && !new.is_null() {
            super::proc::set_errno(libc::EPERM);
            return -1;
        }
    }
    // SAFETY: `new` is null or valid per the contract.
    let rc = match unsafe { new.as_ref() } {
        None => 0,
        Some(n) if n.ss_flags & libc::SS_DISABLE != 0 => {
            if ours_installed {
                0
            } else {
                // SAFETY: forwarding the program's valid request.
                let rc = unsafe { raw_sigaltstack(new, std::ptr::null_mut()) };
                if rc == 0 && ours != 0 {
                    install_altstack(ours);
                }
                rc
            }
        }
        // SAFETY: forwarding the program's valid request.
        Some(_) => unsafe { raw_sigaltstack(new, std::ptr::null_mut()) },
    };
    if rc == 0 {
        // SAFETY: `old` is null or valid per the contract.
        if let Some(old) = unsafe { old.as_mut() } {
            *old = current;
        }
    }
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_a_function_on_the_handler_stack_and_comes_back() {
        let stack = std::thread::spawn(|| {
            // (Rust's own threads have an alternate stack: take it away,
            // as a C program's thread has none.)
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: a valid stack_t; not running on that stack.
            assert_eq!(unsafe { raw_sigaltstack(&off, std::ptr::null_mut()) }, 0);
            let stack = HandlerStack::for_current_thread().expect("mapped");
            let before = stack_pointer();
            let mut seen = 0;
            stack.run(&mut || seen = stack_pointer());
            assert!(stack.contains(seen), "{seen:x}");
            assert!(!stack.contains(before));
            // A deep recursion that a 16 KiB stack could not hold.
            fn deep(n: u32) -> u64 {
                let buf = std::hint::black_box([n as u8; 1024]);
                if n == 0 {
                    buf[0] as u64
                } else {
                    deep(n - 1) + buf[1] as u64
                }
            }
            let mut sum = 0;
            stack.run(&mut || sum = deep(100));
            assert_eq!(sum, (1..=100).sum::<u64>());
            // Installed as the alternate stack; the program sees none.
            // SAFETY: all-zero is a valid stack_t.
            let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
            // SAFETY: a valid out pointer.
            let rc = unsafe { program_sigaltstack(std::ptr::null(), &mut old) };
            assert_eq!(rc, 0);
            assert!(old.ss_flags & libc::SS_DISABLE != 0);
            stack.release();
            stack
        })
        .join()
        .unwrap();
        assert!(stack.low != 0);
    }
}
