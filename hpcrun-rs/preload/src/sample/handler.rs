//! The sample signal handlers.
//!
//! Rules (see docs/ARCHITECTURE.md): no allocation, no lock (but for a
//! process's first sample, `threads::lazy`), errno preserved, re-entry refused, every lost sample counted by cause. All the
//! memory they touch was mapped before sampling started: the thread's node
//! pool, its unwind cache, the published module snapshot and unwinder, the
//! object map.
//!
//! This file is the common entry of every handler (`enter`: errno, late
//! signals, re-entry, the thread's handler stack) and the interrupted
//! registers. The steps, one file each:
//!
//! - [`forward`]: the program's own signals of our numbers, SIGIO, fatal
//!   signals (profiles written before the default action);
//! - [`timer`]: the timer signal's entry, its weight in periods, keeping
//!   the task-clock event running;
//! - [`sample`]: the mem:soft sample path (skid correction and address in
//!   `attribute`), using [`call_path`] (the unwind and the stack frame
//!   that owns an address), [`classify`] (the data object), [`site`] (the
//!   access site's instruction and stride) and [`record`] (the trees);
//! - [`watches`]: arming the watchpoints after a sample, and their traps;
//! - [`faults`]: the page-fault event's samples;
//! - [`hardware`]: PEBS/IBS samples (mem:latency, mem:stores).

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::*;

use crate::access::soft::Regs;
use crate::code::modules::{self, Snapshot};
use crate::sys;
use crate::threads::run;
use crate::threads::{self, ThreadState};

pub mod call_path;
pub mod classify;
pub mod faults;
pub mod forward;
pub mod hardware;
pub mod record;
pub mod sample;
pub mod site;
pub mod timer;
pub mod watches;

pub use call_path::PARTIAL_UNWIND;
pub use classify::{classify, Target};
pub use faults::on_page_fault;
pub use forward::{on_fatal, on_sigio};
pub use hardware::{hardware_sample, on_hw_sample};
pub use record::record;
#[doc(hidden)]
pub use sample::sample;
pub use timer::on_sample;

/// Deepest call path recorded per sample.
pub use crate::threads::MAX_FRAMES;

/// The common entry of every sampling signal handler: saves errno, ignores
/// late signals (after the profile was written) and counts re-entry as a
/// dropped sample; otherwise runs `work` on the thread's state and the
/// interrupted registers (RIP, RSP, RBP).
pub(super) fn enter(context: *mut c_void, work: impl FnOnce(&ThreadState, (Regs, u64, u64))) {
    let saved_errno = sys::errno();
    if let Some(state) = threads::current() {
        if state.finished.load(Relaxed) || !run::active() {
            // Late signal after the profile was written: ignore.
        } else if state.in_handler.swap(true, Acquire) {
            // (Hardware and page-fault records stay in their ring for the
            // next signal.)
            state.stats.dropped[threads::DROP_REENTERED].fetch_add(1, Relaxed);
        } else {
            // (Dropped last: the work may read files, a cancellation point
            // for a thread the program cancelled.)
            let no_cancel = sys::cancel::NoCancel::new();
            // SAFETY: the kernel passes a valid ucontext_t for SA_SIGINFO
            // handlers; it lives for the duration of the handler.
            let uc = unsafe { &*(context as *const libc::ucontext_t) };
            // The module snapshot and the unwinder it reads stay valid
            // until the section closes.
            let section = sys::reading();
            // (Single-threaded programs: a checkpoint due is noted here,
            // written by the program's next allocation.)
            crate::output::checkpoint::tick();
            // The work runs on the thread's handler stack: the kernel may
            // have put this frame on a small stack (the program's own
            // alternate stack), and the interrupted one may be tiny (a
            // coroutine's).
            let regs = registers(uc);
            let interrupted_sp = regs.1;
            // (The tables may change: emptied before the state goes to
            // another thread.)
            state.touched.store(true, Relaxed);
            let mut job = Some((work, regs));
            state.handler_stack.run_below(interrupted_sp, &mut || {
                if let Some((work, regs)) = job.take() {
                    work(state, regs);
                }
            });
            drop(section);
            state.in_handler.store(false, Release);
            drop(no_cancel);
        }
    }
    sys::set_errno(saved_errno);
}

/// The module snapshot, for a sample of the program at `ip`; `None`
/// (counted) without a snapshot, or when `ip` is in this library: time
/// inside the profiler itself (allocation hooks unwinding, its tables
/// being touched) is overhead, not the program's. The process's first
/// sample prepares the tables samples need (`threads::lazy`); one that
/// interrupted the profiler's hooks cannot, and is counted as dropped
/// inside the profiler.
pub(super) fn program_snapshot(state: &ThreadState, ip: u64) -> Option<&'static Snapshot> {
    let dropped = &state.stats.dropped;
    let Some(snap) = modules::get() else {
        dropped[threads::DROP_UNWIND].fetch_add(1, Relaxed);
        return None;
    };
    if snap.is_own_code(ip) || !threads::lazy::prepare_in_handler() {
        dropped[threads::DROP_IN_PROFILER].fetch_add(1, Relaxed);
        return None;
    }
    Some(snap)
}

/// The interrupted general-purpose registers in iced-x86 order.
pub(super) fn registers(uc: &libc::ucontext_t) -> (Regs, u64, u64) {
    let g = &uc.uc_mcontext.gregs;
    let r = |i: c_int| g[i as usize] as u64;
    let regs = Regs {
        gpr: [
            r(libc::REG_RAX),
            r(libc::REG_RCX),
            r(libc::REG_RDX),
            r(libc::REG_RBX),
            r(libc::REG_RSP),
            r(libc::REG_RBP),
            r(libc::REG_RSI),
            r(libc::REG_RDI),
            r(libc::REG_R8),
            r(libc::REG_R9),
            r(libc::REG_R10),
            r(libc::REG_R11),
            r(libc::REG_R12),
            r(libc::REG_R13),
            r(libc::REG_R14),
            r(libc::REG_R15),
        ],
        rip: r(libc::REG_RIP),
    };
    (regs, r(libc::REG_RSP), r(libc::REG_RBP))
}
