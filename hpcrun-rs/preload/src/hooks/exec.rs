//! The interposed `exec` family: what a process measured before it
//! replaces its image is written first (`exit::before_exec`), the
//! profiler's signals that the program blocked are blocked in the kernel
//! (the new image inherits the mask the program asked for;
//! `signals::block_for_exec`), then the real function runs; if it fails,
//! the program goes on as before, still sampled, and its later profiles
//! replace those.
//!
//! glibc's `execv`, `execvp`, `execl*` call its internal `__execve`, not
//! the exported `execve`, so each entry point is interposed:
//! `execve`, `execv`, `execvp`, `execvpe`, `fexecve`, `execveat` forward
//! to the real `execve`, `execvpe`, `fexecve` or `execveat` (looked up at
//! load time: a forked child of a threaded program must not need the
//! loader's lock); the variadic `execl`, `execlp`, `execle` have a naked
//! entry that hands their argument registers and stack arguments to
//! [`exec_list`], which builds the argument vector as glibc does and
//! calls the `execv*` forms.
//!
//! No profile is written from a signal handler running on an alternate
//! signal stack (a crash handler that re-executes the program: the
//! interrupted code may hold glibc's heap lock, which writing needs), nor
//! before the library is initialised, nor in a `vfork` child (it owns no
//! thread state here).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicUsize, Ordering::*};

use crate::output::exit;
use crate::sys;
use crate::threads;
use crate::threads::guard::{without_hooks, READY};
use crate::threads::signals;

type Argv = *const *const c_char;

/// The real functions (0: not found), looked up by [`resolve`].
static REAL_EXECVE: AtomicUsize = AtomicUsize::new(0);
static REAL_EXECVPE: AtomicUsize = AtomicUsize::new(0);
static REAL_FEXECVE: AtomicUsize = AtomicUsize::new(0);
static REAL_EXECVEAT: AtomicUsize = AtomicUsize::new(0);

/// Looks the real functions up (at load time; again lazily if needed).
pub fn resolve() {
    for (slot, name) in [
        (&REAL_EXECVE, c"execve"),
        (&REAL_EXECVPE, c"execvpe"),
        (&REAL_FEXECVE, c"fexecve"),
        (&REAL_EXECVEAT, c"execveat"),
    ] {
        if slot.load(Relaxed) == 0 {
            slot.store(sys::next_symbol(name) as usize, Relaxed);
        }
    }
}

/// The real function in `slot`, or `None` (errno ENOSYS is the caller's
/// answer).
fn real(slot: &AtomicUsize) -> Option<usize> {
    if slot.load(Relaxed) == 0 {
        resolve();
    }
    Some(slot.load(Relaxed)).filter(|&f| f != 0)
}

/// Writes the profiles, runs `call` (the real exec), and if it returns
/// (the exec failed) lets the program go on, errno kept.
fn around_exec(call: impl FnOnce() -> c_int) -> c_int {
    let mut before = None;
    if READY.load(Acquire) && !sys::on_signal_stack() {
        without_hooks(|| match threads::current() {
            // On the thread's handler stack: a small thread stack or a
            // coroutine's cannot hold the writer.
            Some(state) => state
                .handler_stack
                .run(&mut || before = Some(exit::before_exec())),
            None => before = Some(exit::before_exec()),
        });
    }
    // The new image inherits the mask the program asked for.
    let blocked = signals::block_for_exec();
    let rc = call();
    let saved = sys::errno();
    signals::after_failed_exec(&blocked);
    without_hooks(|| drop(before));
    sys::set_errno(saved);
    rc
}

fn enosys() -> c_int {
    sys::set_errno(libc::ENOSYS);
    -1
}

type ExecveFn = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;
type ExecveatFn = unsafe extern "C" fn(c_int, *const c_char, Argv, Argv, c_int) -> c_int;

/// The body of an interposed exec function: the real one in `$slot`
/// (of type `$ty`), called as `$call` by [`around_exec`]; ENOSYS when it
/// was not found.
macro_rules! forward {
    ($slot:ident as $ty:ty, |$f:ident| $call:expr) => {{
        let Some(f) = real(&$slot) else {
            return enosys();
        };
        // SAFETY: the symbol found under this name has this signature.
        let $f = unsafe { std::mem::transmute::<usize, $ty>(f) };
        // SAFETY: forwarding the caller's arguments.
        around_exec(|| unsafe { $call })
    }};
}

/// # Safety
/// POSIX's execve contract.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    forward!(REAL_EXECVE as ExecveFn, |f| f(path, argv, envp))
}

/// # Safety
/// POSIX's execv contract.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    // SAFETY: the same contract, with the process's environment.
    unsafe { execve(path, argv, sys::environment()) }
}

/// # Safety
/// glibc's execvpe contract.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    forward!(REAL_EXECVPE as ExecveFn, |f| f(file, argv, envp))
}

/// # Safety
/// POSIX's execvp contract.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    // SAFETY: the same contract, with the process's environment.
    unsafe { execvpe(file, argv, sys::environment()) }
}

/// # Safety
/// POSIX's fexecve contract.
#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    forward!(REAL_FEXECVE as FexecveFn, |f| f(fd, argv, envp))
}

/// # Safety
/// Linux's execveat contract (glibc 2.34).
#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    flags: c_int,
) -> c_int {
    forward!(REAL_EXECVEAT as ExecveatFn, |f| f(
        dirfd, path, argv, envp, flags
    ))
}

/// Which variadic function [`exec_list`] stands for.
const EXECL: u64 = 0;
const EXECLP: u64 = 1;
const EXECLE: u64 = 2;

/// Defines each variadic `$name(const char *, const char *, ...)` as a
/// naked entry (x86-64 System V: the first six arguments in registers,
/// the rest on the stack) that saves its six argument registers in order
/// on the stack and calls `exec_list(registers, stack arguments, $kind)`:
/// one trampoline, three symbols.
macro_rules! list_entries {
    ($($(#[$doc:meta])* $name:ident = $kind:expr;)*) => {$(
        $(#[$doc])*
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, arg: *const c_char) -> c_int {
            std::arch::naked_asm!(
                "push r9",
                "push r8",
                "push rcx",
                "push rdx",
                "push rsi",
                "push rdi",
                "mov rdi, rsp",
                "lea rsi, [rsp + 56]",
                "mov edx, {kind}",
                "sub rsp, 8",
                "call {imp}",
                "add rsp, 56",
                "ret",
                kind = const $kind,
                imp = sym exec_list,
            )
        }
    )*};
}

list_entries! {
    /// # Safety
    /// POSIX's execl contract.
    execl = EXECL;
    /// # Safety
    /// POSIX's execlp contract.
    execlp = EXECLP;
    /// # Safety
    /// POSIX's execle contract.
    execle = EXECLE;
}

/// Arguments of a list call kept on the stack (more go to a mapping).
const ON_STACK: usize = 256;

/// The variadic `exec` functions: argument `i` is `registers[i]` for the
/// first six and `stack[i - 6]` after them. Builds `argv` (up to its
/// NULL) and calls `execve` (`execl`, `execle` with the environment after
/// the NULL) or `execvpe` (`execlp`), which write the profiles.
///
/// # Safety
/// Called only by the naked entries above, with the caller's arguments.
unsafe extern "C" fn exec_list(registers: *const usize, stack: *const usize, kind: u64) -> c_int {
    // SAFETY: per the calling convention, every argument up to the NULL
    // (and execle's environment after it) was passed.
    let arg = |i: usize| unsafe {
        if i < 6 {
            *registers.add(i)
        } else {
            *stack.add(i - 6)
        }
    };
    let path = arg(0) as *const c_char;
    let mut count = 0;
    while arg(1 + count) != 0 {
        count += 1;
    }
    let envp = if kind == EXECLE {
        arg(2 + count) as Argv
    } else {
        sys::environment()
    };
    let mut local = [std::ptr::null::<c_char>(); ON_STACK];
    let mut mapped = None;
    let argv: &mut [*const c_char] = if count < ON_STACK {
        &mut local[..count + 1]
    } else {
        let bytes = (count + 1) * std::mem::size_of::<usize>();
        match sys::raw_mmap(
            0,
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        ) {
            Some(p) => {
                mapped = Some((p as u64, bytes));
                // SAFETY: a fresh zeroed mapping of count + 1 pointers.
                unsafe { std::slice::from_raw_parts_mut(p as *mut *const c_char, count + 1) }
            }
            None => {
                sys::set_errno(libc::E2BIG);
                return -1;
            }
        }
    };
    for (i, slot) in argv.iter_mut().take(count).enumerate() {
        *slot = arg(1 + i) as *const c_char;
    }
    argv[count] = std::ptr::null();
    // SAFETY: the caller's path, a NULL-terminated argv of its strings,
    // and its (or the process's) environment.
    let rc = unsafe {
        if kind == EXECLP {
            execvpe(path, argv.as_ptr(), envp)
        } else {
            execve(path, argv.as_ptr(), envp)
        }
    };
    if let Some((p, bytes)) = mapped {
        let saved = sys::errno();
        sys::raw_munmap(p, bytes);
        sys::set_errno(saved);
    }
    rc
}
