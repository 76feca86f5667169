//! `libhpcrun_preload.so`: the measurement library that `hpcrun-rs` injects
//! with `LD_PRELOAD` into the program it profiles.
//!
//! Its folders follow the data flow (docs/ARCHITECTURE.md draws it):
//!
//! 1. [`hooks`]: the program calls in (the malloc family, C++ `operator
//!    new`/`delete`, `mmap`, `pthread_create`, `dlopen`, `_exit`, the
//!    descriptor calls, OpenMP regions, `exec`, the `hpcrun.h` labels);
//!    each tracked block goes, with its allocation site, to
//! 2. [`objects`]: the lock-free address -> heap object map and the
//!    allocation sites, which the handler reads when
//! 3. [`sample`]: a sample signal arrives and the handler turns it into an
//!    attributed access (instruction, data address, object, call path),
//!    with the decoder, rules and tables of [`access`], and inserts it into
//! 4. [`cct`]: the thread's calling-context trees, kept in the thread's
//!    state ([`threads`]: with the run's configuration and flags, sampling
//!    timers, signals, the hooks' re-entry guard), which
//! 5. [`output`]: writes as one `.hpcrun` file per thread, never torn, at
//!    thread exit, process exit, `exec` and every checkpoint.
//!
//! Beside the flow: [`code`] (loaded ELF modules, static variables,
//! function symbols, the unwinder), [`pmu`] (hardware sample sources:
//! PEBS, IBS, SPE), [`process`] (start-up, fork, exit, and the interposed
//! signal calls that keep the profiler's signals its own). Below it:
//! [`sys`], the only code that calls libc, the loader or the kernel.
//!
//! The folders form layers; each imports only its own layer and those
//! below, with no import cycle between folders nor between the modules
//! inside them (checked by `tests/layers.rs`): `sys`; then `code`,
//! `objects`, `cct`, `pmu`, `access`; `threads`; `output`; `hooks`;
//! `sample`; `process`.
//!
//! Rules that hold everywhere (see docs/ARCHITECTURE.md): the library's own
//! memory never comes from the hooked functions nor from the program's
//! allocator (its global allocator is its own heap, `sys::heap`, on
//! private mappings: no glibc arena per thread); the program's blocks
//! always come from the program's allocator (the hooks forward to the
//! next definitions of the malloc family, `sys::real`); the signal handler neither allocates
//! nor takes a lock (but once: [`threads::lazy`]); `unsafe` is denied at the crate root and allowed only
//! in [`sys`], the C entry points ([`hooks`], [`process::signal_hooks`],
//! [`process::forwarded`]'s handler),
//! [`sample::handler`], and on single items that say why (the
//! `ZeroInit` impls, `ThreadState: Sync`, the unwinder reading `.eh_frame`
//! in place); every unsafe block has its `// SAFETY:` line.

#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod access;
pub mod cct;
pub mod code;
pub mod hooks;
pub mod objects;
pub mod output;
pub mod pmu;
pub mod process;
pub mod sample;
pub mod sys;
pub mod threads;

/// The library's own allocator: its own heap, never the program's
/// allocator nor the hooks.
#[global_allocator]
static ALLOCATOR: sys::LibraryAllocator = sys::LibraryAllocator;
