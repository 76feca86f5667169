//! Below the flow: every step reaches the operating system through here.
//!
//! The system layer: every call into C, the dynamic loader and the kernel,
//! with the `unsafe` they need, split by concern. The rest of the library
//! calls the safe wrappers here (re-exported at `sys::`); each `unsafe`
//! block states why it is sound.
//!
//! This layer imports nothing from the rest of the crate (checked by
//! `tests/layers.rs`): what the layers above need from it goes down as
//! plain data (the allocation counter of [`alloc`], the perf fd set of
//! [`perf`]), never as a call back up.
//!
//! * [`alloc`]: the library's own allocator on [`heap`] (crash mode on
//!   private mappings), the program's allocator for the hooks (the next
//!   definitions of the malloc family, `dlsym(RTLD_NEXT)`),
//!   allocations-in-handler counting.
//! * [`heap`]: the library's heap, size classes on private mappings.
//! * [`prepared`]: [`Prepared`], a value whose memory is obtained at a
//!   thread's start and which is built at its first use.
//! * [`mem`]: the `mmap` system calls, zeroed mappings ([`ZeroInit`]),
//!   file mappings, views of loaded code, NUMA node of a page.
//! * [`floor`]: the profiler's descriptors moved above the floor
//!   ([`fd_floor`]), and kept apart from the program's `closefrom`
//!   while one is made.
//! * [`perf`]: perf events (task clock, page faults, watchpoints), ring
//!   buffer mappings ([`RingMemory`]), signal routing, the profiler's fds.
//! * [`messages`]: the profiler's own duplicate of the standard error
//!   it started with, where its messages go (never descriptor 2, which
//!   the program may have given to a file of its own).
//! * [`kept_fd`]: a descriptor kept for the whole run, known by its
//!   number and its file's identity ([`kept_fd::KeptFd`]).
//! * [`file_limits`]: the file-size limit (SIGXFSZ held from the
//!   program around the library's writes, [`file_limits::QuietFsize`])
//!   and the open-file limit (raised a little to open an output file
//!   when the program took every number) as they bear on the library's
//!   own files.
//! * [`outdir`]: the measurements directory pinned by a descriptor
//!   when the program changes its root (`chroot`), and the file calls
//!   relative to it.
//! * [`mask`]: the signal mask by system call, the empty signal set.
//! * [`signal`]: real `sigaction`, handlers, signal sets and masks,
//!   [`Delivered`].
//! * [`timer`]: POSIX CPU-time timers (the `cpu-timer` sample source).
//! * [`dl`]: loaded modules, `dlsym(RTLD_NEXT)`, load bias of a handle.
//! * [`proc`]: ids, clocks, errno, stack bounds, atexit/atfork/thread-exit
//!   registration, `exit_group`, current CPU.
//! * [`program_action`]: [`ProgramActions`], the program's signal
//!   actions that the kernel does not hold, readable from a handler.
//! * [`publish`]: [`Published`], the publication primitive, and the read
//!   sections ([`reading`]) after which a replaced value is freed.
//! * [`seccomp`]: the seccomp mode at start, what a filter does to the
//!   calls it refuses, the raw system call the interposed `syscall` and
//!   `prctl` forward to.
//! * [`unwinder`]: the C unwinder's functions (`_Unwind_*`) that Rust's
//!   panics and personality routine call, found at their first call
//!   rather than `libgcc_s` loaded with the library.
//! * [`stack`]: each thread's handler stack ([`HandlerStack`]: its
//!   alternate signal stack, and a stack switch), `sigaltstack` as the
//!   program sees it.

#![allow(unsafe_code)]

pub mod alloc;
pub mod cancel;
pub mod dl;
pub mod file_limits;
pub mod floor;
pub mod heap;
pub mod kept_fd;
pub mod mask;
pub mod mem;
pub mod messages;
pub mod outdir;
pub mod perf;
pub mod prepared;
pub mod proc;
pub mod program_action;
pub mod publish;
pub mod seccomp;
pub mod signal;
pub mod stack;
pub mod timer;
pub mod unwinder;

pub use alloc::*;
pub use dl::*;
pub use floor::{fd_floor, file_above_floor};
pub use mem::*;
pub use messages::*;
pub use perf::*;
pub use prepared::Prepared;
pub use proc::*;
pub use program_action::{ProgramActions, Writer};
pub use publish::*;
pub use signal::*;
pub use stack::*;
pub use timer::*;
