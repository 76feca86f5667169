//! The profiler's own stack per thread: the sample handlers never run
//! their work on the program's stacks.
//!
//! A program's thread may run on a tiny stack (16 KiB `pthread` stacks,
//! `OMP_STACKSIZE=32K`) or on a coroutine's (ucontext, Argobots, Boost
//! Context: 8-64 KiB with a guard page), while the handler needs about
//! 12 KiB and setting up a thread's state more. And the kernel's signal
//! frame holds the thread's xsave state: about 1 KiB without AVX, 3.3 KiB
//! with AVX-512, 12 KiB with AMX (the kernel tells the largest in
//! `AT_MINSIGSTKSZ`, [`signal_frame_bytes`]). So each measured thread
//! gets a [`HandlerStack`] (a private mapping of [`handler_stack_bytes`]
//! above a guard page, touched only as far as it is used):
//!
//! * it is the thread's alternate signal stack (`sigaltstack`) unless the
//!   program installed one of its own that holds a signal frame; the
//!   handlers are installed with `SA_ONSTACK`, so the kernel's signal
//!   frame lands on it, not on the interrupted stack;
//! * every handler the profiler installs is entered through
//!   [`signal_entry`], which moves to this stack before anything else
//!   when the kernel put the frame elsewhere (on the program's own
//!   alternate stack): the profiler uses a few words of a stack the
//!   program gave, beyond the kernel's frame;
//! * [`HandlerStack::run`] runs a function on it, switching the stack
//!   pointer when the code is elsewhere (an allocation hook, the thread's
//!   set-up);
//! * the program sees its own alternate stack only: the interposed
//!   `sigaltstack` reports "disabled" while the profiler's is installed,
//!   lets the program install its own (which then takes the kernel's
//!   frames), and puts the profiler's back when the program disables its
//!   own ([`program_sigaltstack`]). An alternate stack of the program's
//!   smaller than a signal frame of this machine and 4.5 KiB of room
//!   ([`smallest_shared_altstack`]: a 2-8 KiB one sized for older
//!   processors, or for one frame and the program's handler alone) could
//!   be overrun by the profiler's signals or its forwarding of the
//!   program's: it is recorded and reported as the program's, while the
//!   profiler's stays installed and takes every frame, the program's
//!   handlers' too.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

use super::mem::raw_munmap;

/// Bytes of a handler stack for the profiler's own work: the handler, the
/// fatal-signal writer, the thread's set-up (virtual: pages are touched
/// only as deep as they go).
const WORK_BYTES: usize = 256 << 10;

/// `AT_MINSIGSTKSZ` (not in the libc crate): the auxiliary vector's entry
/// for the size of the kernel's signal frame.
const AT_MINSIGSTKSZ: libc::c_ulong = 51;

/// Bytes of a signal frame besides the xsave area: `siginfo_t`,
/// `ucontext_t` and the kernel's alignment padding (`AT_MINSIGSTKSZ`
/// minus the xsave area is 940 on x86-64 Linux 6.x), rounded up.
const FRAME_BESIDES_XSAVE: usize = 1024;

/// Bytes the kernel's signal frame may take on this machine: its
/// `AT_MINSIGSTKSZ` (the frame with the xsave state of every feature the
/// processor has: 3,376 with AVX-512 on Zen 4, 11,952 with AMX on
/// Sapphire Rapids). Kernels before 5.14 do not tell (RHEL 8's 4.18 on
/// AVX-512 nodes): then the xsave area of the features enabled in XCR0
/// (CPUID leaf 0xD), which such a kernel saves whole, and the rest of the
/// frame; never less than `MINSIGSTKSZ`.
pub fn signal_frame_bytes() -> usize {
    // SAFETY: getauxval reads the process's auxiliary vector, no
    // preconditions (0 for an absent entry).
    frame_bytes(unsafe { libc::getauxval(AT_MINSIGSTKSZ) } as usize)
}

/// [`signal_frame_bytes`] from the kernel's `AT_MINSIGSTKSZ` (0: not
/// told).
fn frame_bytes(aux: usize) -> usize {
    if aux != 0 {
        return aux.max(libc::MINSIGSTKSZ);
    }
    let xsave = if std::arch::x86_64::__get_cpuid_max(0).0 >= 0xd {
        std::arch::x86_64::__cpuid_count(0xd, 0).ebx as usize
    } else {
        0
    };
    (xsave + FRAME_BESIDES_XSAVE).max(libc::MINSIGSTKSZ)
}

/// Usable bytes of each thread's handler stack: the profiler's work and
/// two of this machine's signal frames (a sample's, and a fatal signal's
/// arriving in its handler), in whole pages. The same for the whole
/// process.
pub fn handler_stack_bytes() -> usize {
    static BYTES: AtomicUsize = AtomicUsize::new(0);
    let known = BYTES.load(Relaxed);
    if known != 0 {
        return known;
    }
    let bytes = (WORK_BYTES + 2 * signal_frame_bytes() + GUARD - 1) & !(GUARD - 1);
    BYTES.store(bytes, Relaxed);
    bytes
}

/// Bytes of a stack of the program's that [`signal_entry`] may use below
/// the kernel's frame before it is on the profiler's stack (its frame
/// and the thread-local lookup take about 100).
pub const ENTRY_BYTES: usize = 512;

/// Room on a shared alternate stack of the program's beyond the
/// kernel's frame and [`ENTRY_BYTES`]: for the program's own handler,
/// which the profiler's wrapper of a forwarded signal (SIGTERM, SIGUSR1,
/// ...) calls one frame deeper than the kernel would (about 120 bytes).
/// A stack sized to the byte for one frame and the program's handler
/// (`MINSIGSTKSZ` and 1 KiB, without AVX-512) was overrun by 16 bytes.
pub const SHARED_HANDLER_BYTES: usize = 4096;

/// The smallest alternate stack of the program's that the profiler's
/// signals are let land on: one of this machine's signal frames,
/// [`ENTRY_BYTES`] and [`SHARED_HANDLER_BYTES`]. A smaller one is
/// recorded as the program's while the profiler's stays installed and
/// takes every frame, the program's handlers' too
/// ([`program_sigaltstack`]).
pub fn smallest_shared_altstack() -> usize {
    signal_frame_bytes() + ENTRY_BYTES + SHARED_HANDLER_BYTES
}

/// Guard page below it (a stack overflow faults instead of writing into
/// another mapping).
const GUARD: usize = 4096;

/// One thread's handler stack: [low, low + handler_stack_bytes()).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandlerStack {
    low: u64,
}

thread_local! {
    /// The calling thread's handler stack (low end; 0: none). Copied into
    /// a forked child with the thread, whose stack it still is.
    static OURS: Cell<u64> = const { Cell::new(0) };

    /// The program's own alternate stack while it is too small to be
    /// installed ([`smallest_shared_altstack`]): (ss_sp, ss_size,
    /// ss_flags); ss_sp 0: none.
    static PARKED: Cell<(u64, usize, c_int)> = const { Cell::new((0, 0, 0)) };
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
        ss_size: handler_stack_bytes(),
    };
    // SAFETY: a valid stack_t naming our own mapping, which stays mapped
    // while it is installed (`HandlerStack::release` disables it first).
    unsafe { raw_sigaltstack(&st, std::ptr::null_mut()) == 0 }
}

impl HandlerStack {
    /// The calling thread's handler stack: the one it has already (a
    /// forked child's thread keeps its parent thread's), else a new
    /// mapping, installed as the alternate signal stack if the thread has
    /// none or one of the program's too small for a signal frame (then
    /// parked, see [`program_sigaltstack`]). `None` if the mapping failed.
    pub fn for_current_thread() -> Option<HandlerStack> {
        let known = OURS.with(|o| o.get());
        let stack = if known != 0 {
            HandlerStack { low: known }
        } else if let Some(low) = take_spare() {
            OURS.with(|o| o.set(low));
            HandlerStack { low }
        } else {
            // (Under an address-space limit, leaving the program its
            // headroom; a refusal is recorded, and the thread is not
            // measured.)
            let p =
                super::mem::limit::map_private(GUARD + handler_stack_bytes(), libc::MAP_NORESERVE)?;
            // SAFETY: the first page of our own fresh mapping.
            unsafe { libc::mprotect(p as *mut c_void, GUARD, libc::PROT_NONE) };
            let low = p as u64 + GUARD as u64;
            OURS.with(|o| o.set(low));
            HandlerStack { low }
        };
        match query_altstack() {
            Some(s) if s.ss_flags & libc::SS_DISABLE != 0 => {
                install_altstack(stack.low);
            }
            // (The program's own, installed before the profiler's set-up
            // of this thread, too small for a signal frame: parked.)
            Some(s)
                if s.ss_sp as u64 != stack.low
                    && s.ss_flags & libc::SS_ONSTACK == 0
                    && s.ss_size < smallest_shared_altstack()
                    && install_altstack(stack.low) =>
            {
                PARKED.with(|p| p.set((s.ss_sp as u64, s.ss_size, s.ss_flags)));
            }
            _ => {}
        }
        Some(stack)
    }

    /// True if `sp` lies on this stack.
    fn contains(&self, sp: u64) -> bool {
        self.low != 0 && sp >= self.low && sp < self.low + handler_stack_bytes() as u64
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
        match self.top_below(interrupted_sp) {
            Some(top) => call_on_stack(top, f),
            None => f(),
        }
    }

    /// Where code switching to this stack starts: its top, or below the
    /// interrupted code (past its red zone) if that ran on this stack;
    /// `None` if no room is left below it.
    fn top_below(&self, interrupted_sp: u64) -> Option<u64> {
        let top = if self.contains(interrupted_sp) {
            interrupted_sp.saturating_sub(1024) & !15
        } else {
            (self.low + handler_stack_bytes() as u64) & !15
        };
        (top > self.low + 16 * 1024).then_some(top)
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
        PARKED.with(|p| p.set((0, 0, 0)));
        if !keep_spare(self.low) {
            raw_munmap(self.low - GUARD as u64, GUARD + handler_stack_bytes());
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

/// A signal handler as the kernel calls it (`SA_SIGINFO`).
pub type SignalHandler = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);

/// The handler [`signal_entry`] runs, per signal number (0: none).
static TARGETS: [AtomicUsize; 65] = [const { AtomicUsize::new(0) }; 65];

/// The address to install for `signal` so that `handler` runs on the
/// thread's handler stack ([`signal_entry`]); `None` for a number out of
/// range.
pub fn entry_for(signal: c_int, handler: SignalHandler) -> Option<usize> {
    let slot = TARGETS.get(usize::try_from(signal).ok()?)?;
    slot.store(handler as *const () as usize, Release);
    Some(signal_entry as *const () as usize)
}

/// The handler behind an installed address: the one [`entry_for`]
/// registered for `signal` if `installed` is [`signal_entry`], else
/// `installed` itself.
pub fn handler_behind(signal: c_int, installed: usize) -> usize {
    if installed != signal_entry as *const () as usize {
        return installed;
    }
    usize::try_from(signal)
        .ok()
        .and_then(|i| TARGETS.get(i))
        .map_or(0, |t| t.load(Acquire))
}

/// The entry of every handler the profiler installs: if the kernel put
/// the signal frame on another stack than the thread's handler stack (the
/// program's own alternate stack, or the thread's stack before it had a
/// handler stack), the handler runs on the handler stack (below the
/// interrupted code if that ran there); only this function's frame, a
/// few words, lies beyond the kernel's frame on the other stack. No
/// allocation, no lock.
extern "C" fn signal_entry(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let target = usize::try_from(signal)
        .ok()
        .and_then(|i| TARGETS.get(i))
        .map_or(0, |t| t.load(Acquire));
    if target == 0 {
        return;
    }
    // SAFETY: TARGETS holds only addresses of `SignalHandler`s
    // (`entry_for`).
    let handler: SignalHandler = unsafe { std::mem::transmute::<usize, SignalHandler>(target) };
    let stack = HandlerStack {
        low: OURS.with(|o| o.get()),
    };
    if stack.low == 0 || stack.contains(stack_pointer()) {
        return handler(signal, info, context);
    }
    let interrupted_sp = if context.is_null() {
        0
    } else {
        // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO
        // handler, alive while it runs.
        unsafe {
            (*(context as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RSP as usize] as u64
        }
    };
    match stack.top_below(interrupted_sp) {
        // SAFETY: `top` is the 16-byte aligned top of the thread's mapped,
        // writable handler stack, unused below it (the kernel's frame and
        // this function's are on another stack; code interrupted on it
        // lies above `top`); r12 (callee-saved, so preserved by the
        // handler) holds this stack pointer, restored before the block
        // ends; the arguments are the kernel's, in the C ABI's registers;
        // every caller-saved register is declared clobbered.
        Some(top) => unsafe {
            std::arch::asm!(
                "mov r12, rsp",
                "mov rsp, {top}",
                "call {handler}",
                "mov rsp, r12",
                top = in(reg) top,
                handler = in(reg) target,
                in("edi") signal,
                in("rsi") info,
                in("rdx") context,
                out("r12") _,
                clobber_abi("C"),
            );
        },
        None => handler(signal, info, context),
    }
}

/// The interposed `sigaltstack`: the program sees and sets its own
/// alternate stack only. While the profiler's is installed, `old` reports
/// it disabled (or the program's parked one); the program's own replaces
/// it if it holds a signal frame of this machine
/// ([`smallest_shared_altstack`]), else it is parked: checked by the
/// kernel, recorded, reported, while the profiler's stays installed.
/// Disabling the program's puts the profiler's back. Returns 0 or -1 with
/// errno, as the call.
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
        let (sp, size, flags) = PARKED.with(|p| p.get());
        current = if sp != 0 {
            libc::stack_t {
                ss_sp: sp as *mut c_void,
                // (A handler of the program's runs on the profiler's stack
                // in place of its own.)
                ss_flags: flags | if on_it { libc::SS_ONSTACK } else { 0 },
                ss_size: size,
            }
        } else {
            libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            }
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
                PARKED.with(|p| p.set((0, 0, 0)));
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
        Some(n) if ours != 0 && n.ss_size < smallest_shared_altstack() => {
            // SAFETY: a valid stack_t (the program's, per the contract).
            let rc = unsafe { park(n) };
            if rc == 0 {
                PARKED.with(|p| p.set((n.ss_sp as u64, n.ss_size, n.ss_flags)));
            }
            rc
        }
        Some(_) => {
            // SAFETY: forwarding the program's valid request.
            let rc = unsafe { raw_sigaltstack(new, std::ptr::null_mut()) };
            if rc == 0 {
                PARKED.with(|p| p.set((0, 0, 0)));
            }
            rc
        }
    };
    if rc == 0 {
        // SAFETY: `old` is null or valid per the contract.
        if let Some(old) = unsafe { old.as_mut() } {
            *old = current;
        }
    }
    rc
}

/// Lets the kernel check the program's alternate stack `new` (its flags
/// and size, errno as natively) by installing it with every signal
/// blocked, then puts the profiler's back: no signal frame lands on it.
/// Returns 0 or -1 with errno (refused: nothing changed).
///
/// # Safety
/// `new` is a valid `stack_t`.
unsafe fn park(new: &libc::stack_t) -> c_int {
    let ours = OURS.with(|o| o.get());
    // SAFETY: a full signal set is a valid sigset_t.
    let all = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        all
    };
    let mut saved = super::mask::empty_sigset();
    super::mask::raw_sigmask(libc::SIG_SETMASK, Some(&all), Some(&mut saved));
    // SAFETY: the program's valid stack_t; no signal can be delivered
    // while it is installed.
    let rc = unsafe { raw_sigaltstack(new, std::ptr::null_mut()) };
    let errno = super::proc::errno();
    if rc == 0 {
        install_altstack(ours);
    }
    super::mask::raw_sigmask(libc::SIG_SETMASK, Some(&saved), None);
    super::proc::set_errno(errno);
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

    /// Takes Rust's own alternate stack away from the calling thread (a C
    /// program's thread has none).
    fn without_rusts_altstack() {
        let off = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: a valid stack_t; not running on that stack.
        assert_eq!(unsafe { raw_sigaltstack(&off, std::ptr::null_mut()) }, 0);
    }

    fn program_stack(sp: *mut u8, size: usize, flags: c_int) -> libc::stack_t {
        libc::stack_t {
            ss_sp: sp as *mut c_void,
            ss_flags: flags,
            ss_size: size,
        }
    }

    #[test]
    fn an_alternate_stack_too_small_for_a_signal_frame_is_parked() {
        std::thread::spawn(|| {
            without_rusts_altstack();
            let stack = HandlerStack::for_current_thread().expect("mapped");
            // One byte short of what the profiler lets its signals land
            // on: this machine's signal frame decides (3 KiB was too small
            // with AVX-512's, not without).
            let mut mem = vec![0u8; smallest_shared_altstack() - 1];
            let small = program_stack(mem.as_mut_ptr(), mem.len(), 0);
            // SAFETY: valid stack_t values and out pointers throughout.
            unsafe {
                assert_eq!(program_sigaltstack(&small, std::ptr::null_mut()), 0);
                // The kernel keeps the profiler's; the program sees its own.
                assert_eq!(query_altstack().unwrap().ss_sp as u64, stack.low);
                let mut seen: libc::stack_t = std::mem::zeroed();
                assert_eq!(program_sigaltstack(std::ptr::null(), &mut seen), 0);
                assert_eq!(seen.ss_sp as usize, mem.as_ptr() as usize);
                assert_eq!(seen.ss_size, mem.len());
                assert_eq!(seen.ss_flags, 0);
                // Below the kernel's minimum: refused as natively.
                let tiny = program_stack(mem.as_mut_ptr(), 1024, 0);
                assert_eq!(program_sigaltstack(&tiny, std::ptr::null_mut()), -1);
                assert_eq!(super::super::proc::errno(), libc::ENOMEM);
                // Disabled: reported so, the profiler's still installed.
                let off = program_stack(std::ptr::null_mut(), 0, libc::SS_DISABLE);
                let mut old: libc::stack_t = std::mem::zeroed();
                assert_eq!(program_sigaltstack(&off, &mut old), 0);
                assert_eq!(old.ss_sp as usize, mem.as_ptr() as usize);
                assert_eq!(program_sigaltstack(std::ptr::null(), &mut seen), 0);
                assert!(seen.ss_flags & libc::SS_DISABLE != 0);
                assert_eq!(query_altstack().unwrap().ss_sp as u64, stack.low);
            }
            stack.release();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn without_the_kernels_word_the_frame_is_not_underestimated() {
        let told = signal_frame_bytes();
        let estimated = frame_bytes(0);
        eprintln!("AT_MINSIGSTKSZ {told}, from CPUID {estimated}");
        assert!(estimated >= told, "{estimated} < {told}");
        assert!(handler_stack_bytes() >= WORK_BYTES + 2 * told);
    }

    static SEEN_SP: AtomicU64 = AtomicU64::new(0);

    extern "C" fn probe(_: c_int, _: *mut libc::siginfo_t, _: *mut c_void) {
        SEEN_SP.store(stack_pointer(), Relaxed);
    }

    #[test]
    fn a_handler_entered_on_the_programs_alternate_stack_runs_on_the_handler_stack() {
        let signal = libc::SIGRTMAX() - 1;
        assert!(super::super::signal::install_handler(signal, probe, &[]).is_some());
        std::thread::spawn(move || {
            without_rusts_altstack();
            let stack = HandlerStack::for_current_thread().expect("mapped");
            // The program's own stack, the smallest the profiler shares,
            // between canaries.
            let size = smallest_shared_altstack();
            let canary = 8192;
            let mut mem = vec![0x5au8; canary + size + canary];
            let st = program_stack(mem[canary..].as_mut_ptr(), size, 0);
            // SAFETY: a valid stack_t, alive until disabled below.
            assert_eq!(unsafe { program_sigaltstack(&st, std::ptr::null_mut()) }, 0);
            assert_eq!(
                query_altstack().unwrap().ss_sp as usize,
                mem[canary..].as_ptr() as usize
            );
            for _ in 0..100 {
                // SAFETY: raise has no memory preconditions.
                unsafe { libc::raise(signal) };
                assert!(stack.contains(SEEN_SP.load(Relaxed)));
            }
            let off = program_stack(std::ptr::null_mut(), 0, libc::SS_DISABLE);
            // SAFETY: a valid stack_t; not running on that stack.
            let rc = unsafe { program_sigaltstack(&off, std::ptr::null_mut()) };
            assert_eq!(rc, 0);
            let changed = mem[..canary]
                .iter()
                .chain(&mem[canary + size..])
                .filter(|&&b| b != 0x5a)
                .count();
            assert_eq!(changed, 0, "canary bytes changed");
            // The program's stack held the kernel's frame, and not much more.
            let used = mem[canary..canary + size]
                .iter()
                .position(|&b| b != 0x5a)
                .map_or(0, |low| size - low);
            eprintln!("the kernel's frame and the entry used {used} of {size} bytes");
            assert!(used > 0, "no frame on the program's stack");
            stack.release();
        })
        .join()
        .unwrap();
    }
}
