//! The sample signal handler.
//!
//! Rules (see docs/ARCHITECTURE.md): no allocation, no lock, errno
//! preserved, re-entry refused, every lost sample counted by cause. All the
//! memory it touches was mapped before sampling started: the thread's node
//! pool, its unwind cache, the published module snapshot and unwinder, the
//! object map.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::*;

use crate::cct::{self, Tree};
use crate::modules::Snapshot;
use crate::objects::Lookup;
use crate::soft::{self, Access, Regs};
use crate::threads::{self, ThreadState};
use crate::{ffi, modules, objects, sampling, unwind};

/// Allocations requested while a sample handler ran on the same thread
/// (through the library's allocator or the malloc hooks). Must stay 0: it
/// is written into every profile and checked by the tests.
pub static ALLOCATIONS_IN_HANDLER: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// Counts an allocation if the calling thread is inside the handler.
#[inline]
pub fn note_allocation() {
    if threads::current().is_some_and(|s| s.in_handler.load(Relaxed)) {
        ALLOCATIONS_IN_HANDLER.fetch_add(1, Relaxed);
    }
}

/// Deepest call path recorded per sample.
pub const MAX_FRAMES: usize = 128;

/// Longest distance from a function start that is decoded forward.
const MAX_FORWARD_DECODE: u64 = 64 * 1024;

/// The signal handler (installed with SA_SIGINFO | SA_RESTART).
pub extern "C" fn on_sample(_signal: c_int, _info: *mut libc::siginfo_t, context: *mut c_void) {
    let saved_errno = ffi::errno();
    if let Some(state) = threads::current() {
        if state.finished.load(Relaxed) || !sampling::active() {
            // Late signal after the profile was written: ignore.
        } else if state.in_handler.swap(true, Acquire) {
            state.stats.dropped[threads::DROP_REENTERED].fetch_add(1, Relaxed);
        } else {
            // SAFETY: the kernel passes a valid ucontext_t for SA_SIGINFO
            // handlers; it lives for the duration of the handler.
            let uc = unsafe { &*(context as *const libc::ucontext_t) };
            sample(state, registers(uc));
            state.in_handler.store(false, Release);
        }
    }
    ffi::set_errno(saved_errno);
}

/// Handler of fatal signals (SIGSEGV, SIGABRT, SIGTERM, ...): writes what
/// has been measured, then lets the signal take its default action (the
/// handler was installed with SA_RESETHAND), so the exit status is the one
/// the program would have had. The library's allocator switches to private
/// mappings first: the interrupted code may hold glibc's heap locks.
pub extern "C" fn on_fatal(signal: c_int, _info: *mut libc::siginfo_t, _context: *mut c_void) {
    let saved_errno = ffi::errno();
    ffi::enter_crash_mode();
    crate::hooks::without_hooks(sampling::flush_all);
    // Delivered again, with the default action, when this handler returns
    // (a fault also repeats when the faulting instruction is re-executed).
    ffi::reraise(signal);
    ffi::set_errno(saved_errno);
}

/// The interrupted general-purpose registers in iced-x86 order.
fn registers(uc: &libc::ucontext_t) -> (Regs, u64, u64) {
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

/// Where the data address came from.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Previous,
    AtIp,
}

/// The skid-corrected instruction and its memory access. (Public for the
/// benchmarks, like [`classify`] and [`sample`].)
#[doc(hidden)]
pub fn analyse(state: &ThreadState, snap: &Snapshot, regs: &Regs) -> (u64, Access, Source) {
    let ip = regs.rip;
    let Some((seg_start, seg_end)) = snap.exec_segment(ip) else {
        return (ip, Access::NotMemory, Source::Previous);
    };
    let Some(code) = ffi::loaded_bytes(&[(seg_start, seg_end, true)], seg_start, seg_end) else {
        return (ip, Access::NotMemory, Source::Previous);
    };
    let previous = threads::cached_previous(state, ip).or_else(|| {
        let found = snap
            .function_start(ip)
            .filter(|&f| ip - f <= MAX_FORWARD_DECODE && f >= seg_start)
            .and_then(|f| soft::previous_by_forward_decode(code, seg_start, f, ip))
            .or_else(|| soft::previous_by_backward_guess(code, seg_start, ip))?;
        threads::cache_previous(state, ip, found);
        Some(found)
    });
    let Some(prev) = previous else {
        return (ip, Access::NotMemory, Source::Previous);
    };
    let Some(insn) = soft::decode_at(code, seg_start, prev) else {
        return (prev, Access::NotMemory, Source::Previous);
    };
    match soft::access(&insn, regs, true) {
        Access::Unrecoverable => {
            // The previous load overwrote its address register: the
            // instruction at the IP has not run yet, its inputs are intact.
            if let a @ Access::Address { .. } = soft::next_access(code, seg_start, ip, regs) {
                return (prev, a, Source::AtIp);
            }
            (prev, Access::Unrecoverable, Source::Previous)
        }
        a => (prev, a, Source::Previous),
    }
}

/// (root, tag, key) of the data object at `addr`; `None` if the object map
/// stayed busy.
#[doc(hidden)]
pub fn classify(state: &ThreadState, snap: &Snapshot, addr: u64) -> Option<(u32, u32, u64)> {
    if let Some(objs) = objects::get() {
        match objs.lookup(addr) {
            Lookup::Site(site) => return Some((cct::HEAP, cct::TAG_HEAP_SITE, site as u64)),
            Lookup::Busy => return None,
            Lookup::NotFound => {}
        }
    }
    if let Some((module, index)) = snap.static_at(addr) {
        return Some((
            cct::STATIC,
            cct::TAG_STATIC,
            (module as u64) << 32 | index as u64,
        ));
    }
    if state.stack.contains(addr) {
        return Some((cct::UNKNOWN, cct::TAG_STACK, state.index as u64));
    }
    if let Some(owner) = threads::stack_owner(addr) {
        return Some((cct::UNKNOWN, cct::TAG_STACK, owner as u64));
    }
    if objects::in_small_heap(addr) {
        return Some((cct::HEAP, cct::TAG_SMALL_HEAP, 0));
    }
    Some((cct::UNKNOWN, cct::TAG_UNKNOWN, 0))
}

/// Everything the handler does for one sample, given the interrupted
/// registers (and RSP, RBP): skid correction, data address, unwind, object
/// lookup, tree insertion.
#[doc(hidden)]
pub fn sample(state: &ThreadState, (regs, sp, bp): (Regs, u64, u64)) {
    let stats = &state.stats;
    stats.samples.fetch_add(1, Relaxed);
    let (Some(snap), Some(unwinder)) = (modules::get(), unwind::get()) else {
        stats.dropped[threads::DROP_UNWIND].fetch_add(1, Relaxed);
        return;
    };
    // Time inside the profiler itself (allocation hooks unwinding) is
    // overhead, not the program's: counted, not attributed.
    if snap.is_own_code(regs.rip) {
        stats.dropped[threads::DROP_IN_PROFILER].fetch_add(1, Relaxed);
        return;
    }
    let (leaf, access, source) = if sampling::code_only() {
        (regs.rip, Access::NotMemory, Source::Previous)
    } else {
        analyse(state, snap, &regs)
    };

    // SAFETY: the handler cache and frame buffer are used only by this
    // thread's handler, and `in_handler` excludes re-entry.
    let (cache, frames) = unsafe {
        (
            &mut *state.handler_cache.get(),
            &mut *state.handler_frames.get(),
        )
    };
    let got = unwind::unwind(unwinder, cache, &state.stack, regs.rip, sp, bp, frames);
    frames[0] = leaf;
    // Callers inside this library (the thread trampoline) are left out.
    let mut depth = 1;
    for i in 1..got.len {
        if !snap.is_own_code(frames[i]) {
            frames[depth] = frames[i];
            depth += 1;
        }
    }
    let path = &frames[..depth];

    let object = match access {
        Access::NotMemory => None,
        Access::Unrecoverable => Some((cct::UNKNOWN, cct::TAG_NOT_RECOVERED, 0)),
        Access::Address { addr, .. } => match classify(state, snap, addr) {
            Some(o) => Some(o),
            None => {
                stats.dropped[threads::DROP_MAP_BUSY].fetch_add(1, Relaxed);
                return;
            }
        },
    };
    // An access whose address was lost counts as a load (the usual case: a
    // pointer-chasing load that overwrote its own address register).
    let metric = match access {
        Access::Address { kind, .. } if !kind.loads() => cct::M_STORE_SAMPLES,
        _ => cct::M_SAMPLES,
    };

    let tree: &Tree = &state.tree;
    // Room for both paths and the object node, so that a sample is either
    // in every tree or in none.
    if tree.len() + 2 * depth + 2 > sampling::TREE_CAPACITY {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return;
    }
    // SAFETY: as above, this thread's handler only.
    let paths = unsafe { &mut *state.handler_paths.get() };
    // The callers' nodes usually come from the previous sample (a loop);
    // then only the leaf is looked up in each tree.
    let callers = &path[1..];
    let code_leaf = paths
        .code_parent(tree, callers)
        .and_then(|parent| tree.child(parent, cct::TAG_CALL, leaf));
    let Some(code_leaf) = code_leaf else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return;
    };
    tree.add(code_leaf, cct::M_CPU_SAMPLES, 1);
    let Some((root, tag, key)) = object else {
        return;
    };
    let data_leaf = tree
        .child(root, tag, key)
        .and_then(|obj| paths.data_parent(tree, obj, callers))
        .and_then(|parent| tree.child(parent, cct::TAG_CALL, leaf));
    let Some(data_leaf) = data_leaf else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return;
    };
    tree.add(code_leaf, metric, 1);
    tree.add(data_leaf, metric, 1);
    if metric == cct::M_STORE_SAMPLES {
        stats.stores.fetch_add(1, Relaxed);
        return;
    }
    stats.memory.fetch_add(1, Relaxed);
    if matches!(access, Access::Address { .. }) {
        stats.recovered.fetch_add(1, Relaxed);
        match source {
            Source::Previous => stats.recovered_previous.fetch_add(1, Relaxed),
            Source::AtIp => stats.recovered_at_ip.fetch_add(1, Relaxed),
        };
    }
}
