//! `libhpcrun_preload.so`: the measurement library that `hpcrun-rs` injects
//! with `LD_PRELOAD` into the program it profiles.
//!
//! Data flow, one module each:
//!
//! * [`hooks`]: interposes the malloc family; every allocation of at least
//!   `HPCRUN_MIN_BYTES` is unwound ([`unwind`]) and recorded in the object map.
//! * [`labels`]: `hpcrun_label`, `hpcrun_register`, `hpcrun_unregister`,
//!   the calls by which a program names its data (`hpcrun.h`).
//! * [`objects`]: the address -> heap object map (read from the signal
//!   handler without locks) and the table of allocation sites.
//! * [`modules`]: loaded ELF modules, their static variables and function
//!   symbols, and the static-data map.
//! * [`threads`]: per-thread state, the `pthread_create` hook and the thread
//!   registry (stack ranges).
//! * [`sampling`]: the per-thread `perf_event_open` task-clock event whose
//!   overflow signal goes to that thread.
//! * [`handler`]: the signal handler: unwind, decode the skid-corrected
//!   instruction ([`soft`], from the closest known instruction boundary
//!   of [`anchors`]), find the data object, insert into the trees
//!   ([`cct`]); [`handler_time`]: the histogram of its time per sample.
//! * [`stride`], [`patterns`]: access patterns of the sampled accesses:
//!   the decoder's stride of an instruction in its loop, and the
//!   per-thread tables of strides and sampled deltas per access site.
//! * [`watch`]: hardware watchpoints on sampled words (`-e sharing`,
//!   `-e reuse`): which other thread touches the same cache line next,
//!   and when the same thread touches the word again.
//! * [`pages`]: which pages have been touched (first touch, `page-faults`).
//! * [`numa`]: CPU -> node topology and the node of sampled pages.
//! * [`writer`]: one MessagePack file per thread at thread and process exit
//!   ([`profile_file`]: never torn); [`checkpoint`]: rewritten every few
//!   seconds while the program runs, for runs that get killed.
//! * [`signals`], [`signal_hooks`]: the profiler's signals stay the
//!   profiler's (`sigaction`, `signal`, the signal masks and `sigwait`
//!   interposed); the program's own signals of those numbers reach its
//!   handler.
//! * [`pmu`]: hardware sample sources (PEBS, IBS, SPE): ring buffer, record
//!   and data-source decoding, PMU discovery in sysfs.
//!
//! Rules that hold everywhere (see docs/ARCHITECTURE.md): the library's own
//! memory never comes from the hooked functions (it has its own global
//! allocator on glibc's `__libc_*` entry points); the signal handler neither
//! allocates nor takes a lock; `unsafe` lives only in [`ffi`], [`hooks`],
//! [`labels`] (the C entry points), [`signal_hooks`] and [`handler`].

pub mod anchors;
pub mod cct;
pub mod checkpoint;
pub mod config;
pub mod ffi;
pub mod handler;
pub mod handler_time;
pub mod hooks;
pub mod labels;
pub mod modules;
pub mod notices;
pub mod numa;
pub mod objects;
pub mod pages;
pub mod patterns;
pub mod pmu;
pub mod profile_file;
pub mod sampling;
pub mod signal_hooks;
pub mod signals;
pub mod soft;
pub mod stride;
pub mod threads;
pub mod unwind;
pub mod watch;
pub mod writer;

/// The library's own allocator: glibc's allocator, reached without the hooks.
#[global_allocator]
static ALLOCATOR: ffi::LibcAllocator = ffi::LibcAllocator;
