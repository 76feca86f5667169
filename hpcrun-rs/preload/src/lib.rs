//! `libhpcrun_preload.so`: the measurement library that `hpcrun-rs` injects
//! with `LD_PRELOAD` into the program it profiles.
//!
//! The modules form layers; each uses only its own layer and those below
//! (checked, with no import cycle among the top-level modules, by
//! `tests/layers.rs`):
//!
//! 1. **sys** ([`sys`]): the only code that calls libc, the loader or the
//!    kernel (allocator, memory, perf events, signals, modules, process,
//!    the publication primitive). Imports nothing from the crate.
//! 2. **data**: data structures and decoders over sys. [`guard`] (the
//!    hooks' re-entry guard); [`objects`] (the lock-free address -> heap
//!    object map, allocation sites); [`cct`] (the per-thread trees);
//!    [`code`] (loaded ELF modules, static variables, function symbols,
//!    the unwinder); [`soft`] (the skid-correcting instruction decoder)
//!    with [`anchors`] (known instruction boundaries); [`stride`],
//!    [`patterns`] (access patterns); [`handler_time`] (the histogram of
//!    the handler's time per sample); [`watch`] (hardware watchpoints on
//!    sampled words: sharing, reuse); [`pages`] (first touch); [`regions`]
//!    (the address-space regions of unknown addresses); [`numa`];
//!    [`pmu`] (PEBS, IBS, SPE: ring buffer, records, data sources, sysfs).
//! 3. **state**: [`config`] (the run configuration from the environment),
//!    [`run`] (process-wide run flags, metric columns, warnings),
//!    [`creators`] (where each thread was created),
//!    [`threads`] (per-thread state and registry), [`signals`] (the
//!    profiler's signals kept the profiler's, the program's forwarded).
//! 4. **measure**: [`sampling`] (per-thread perf events), [`notices`],
//!    [`profile_file`] and [`writer`] (one MessagePack file per thread,
//!    never torn), [`checkpoint`] (rewritten every few seconds), [`exit`]
//!    (stop and write everything), [`handler`] (the signal handler: decode,
//!    unwind, classify, insert), and the C entry points: [`hooks`] (the
//!    malloc family, C++ `operator new`/`delete`, `mmap`,
//!    `pthread_create`, `dlopen`, `_exit`, the descriptor calls),
//!    [`exec`] (the `exec` family: the profiles are written first),
//!    [`labels`] (`hpcrun_label`, `hpcrun_register`: `hpcrun.h`),
//!    [`signal_hooks`] (`sigaction`, masks, `sigwait`).
//! 5. **lifecycle** ([`lifecycle`]): start-up, fork, thread exit, `atexit`;
//!    the only module that may import every other.
//!
//! Rules that hold everywhere (see docs/ARCHITECTURE.md): the library's own
//! memory never comes from the hooked functions nor from the program's
//! allocator (its global allocator is its own heap, `sys::heap`, on
//! private mappings: no glibc arena per thread); the program's blocks
//! always come from the program's allocator (the hooks forward to the
//! next definitions of the malloc family, `sys::real`); the signal handler neither allocates
//! nor takes a lock; `unsafe` is denied at the crate root and allowed only
//! in [`sys`], the C entry points ([`hooks`], [`exec`], [`labels`],
//! [`signal_hooks`]), [`handler`], and on single items that say why (the
//! `ZeroInit` impls, `ThreadState: Sync`, the unwinder reading `.eh_frame`
//! in place); every unsafe block has its `// SAFETY:` line.

#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod anchors;
pub mod attribute;
pub mod blame;
pub mod caches;
pub mod cct;
pub mod checkpoint;
pub mod code;
pub mod config;
pub mod creators;
pub mod exec;
pub mod exit;
pub mod filled;
pub mod guard;
pub mod handler;
pub mod handler_time;
pub mod hooks;
pub mod labels;
pub mod lifecycle;
pub mod manifest;
pub mod notices;
pub mod numa;
pub mod objects;
pub mod pages;
pub mod patterns;
pub mod pmu;
pub mod profile_file;
pub mod regions;
pub mod run;
pub mod sampling;
pub mod sandbox;
pub mod signal_hooks;
pub mod signals;
pub mod soft;
pub mod stride;
pub mod sys;
pub mod threads;
pub mod watch;
pub mod writer;

/// The library's own allocator: its own heap, never the program's
/// allocator nor the hooks.
#[global_allocator]
static ALLOCATOR: sys::LibraryAllocator = sys::LibraryAllocator;
