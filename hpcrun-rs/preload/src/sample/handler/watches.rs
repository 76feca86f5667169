//! Watchpoints (`watch.rs`): arming them after a sample, and their traps
//! (sharing between threads, reuse).

use std::ffi::c_void;
use std::sync::atomic::Ordering::*;

use crate::access::soft::Regs;
use crate::cct;
use crate::code::modules;
use crate::sample::attribute::accessing_instruction;
use crate::sys;
use crate::threads::{self, ThreadState};

use super::call_path::call_path;
use super::classify::Target;
use super::record::record;

/// The calling thread's watchpoint whose trap this signal is, if any.
pub(super) fn watch_slot(info: *mut libc::siginfo_t, context: *mut c_void) -> Option<usize> {
    let state = threads::current()?;
    // SAFETY: the kernel's handler arguments, valid while the handler
    // runs (and `delivered` does not outlive it).
    let delivered = unsafe { sys::Delivered::new(info, context) };
    let (_, fd) = delivered.code_fd()?;
    state.watch.slot_of_fd(fd)
}

/// After a sample of `ip` that accessed `size` bytes at `addr` in heap or
/// static object `target` (`store`: the access wrote): arms the sharing
/// watchpoints of other threads and this thread's reuse watchpoint, each
/// every N-th sample as configured. Stack and unknown data are never
/// watched (the handler itself reads the stack).
pub(super) fn arm_watches(
    state: &ThreadState,
    target: &Target,
    addr: u64,
    size: u32,
    store: bool,
    ip: u64,
) {
    use crate::access::watch::{self, Arm, Armed};
    let (sharing, reuse) = (watch::sharing_every(), watch::reuse_every());
    let Some((start, _)) = target.range else {
        return;
    };
    if sharing == 0 && reuse == 0 {
        return;
    }
    let n = state.stats.samples.load(Relaxed);
    let (word, len) = watch::watched_range(addr, size);
    let line = addr & !(watch::LINE - 1);
    let what = Armed {
        line,
        from_thread: state.index,
        from_ip: ip,
        root: target.root,
        tag: target.tag,
        key: target.key,
        start,
        armed_ns: 0,
    };
    let armed = &state.stats.watch_armed;
    if sharing > 0 && n % u64::from(sharing) == 0 {
        let round = state.watch.next_round();
        let others = watch::other_words(line, word & !7, round);
        let count = threads::all().count();
        let first = (round as usize) % count.max(1);
        let mut targets = 0;
        for other in threads::all().skip(first).chain(threads::all().take(first)) {
            if std::ptr::eq(other, state)
                || other.pid != state.pid
                || other.finished.load(Relaxed)
                || !other.watch.is_open(watch::EXACT_SLOT)
            {
                continue;
            }
            // A load conflicts with a write only; a store with any access.
            if other.watch.arm(watch::EXACT_SLOT, word, len, store, &what) != Arm::Skipped {
                armed.fetch_add(1, Relaxed);
            }
            for (j, &w) in others.iter().enumerate() {
                if other
                    .watch
                    .arm(watch::EXACT_SLOT + 1 + j, w, 8, store, &what)
                    != Arm::Skipped
                {
                    armed.fetch_add(1, Relaxed);
                }
            }
            targets += 1;
            if targets >= watch::MAX_SHARING_TARGETS {
                break;
            }
        }
    }
    if reuse > 0 && n % u64::from(reuse) == 0 && state.watch.is_open(watch::REUSE_SLOT) {
        let what = Armed {
            armed_ns: sys::thread_cpu_ns(),
            ..what
        };
        match state.watch.arm(watch::REUSE_SLOT, word, len, true, &what) {
            Arm::Skipped => {}
            Arm::Armed => {
                armed.fetch_add(1, Relaxed);
            }
            Arm::Replaced(old) => {
                armed.fetch_add(1, Relaxed);
                note_reuse(state, &old, watch::REUSE_NOT_REUSED);
            }
        }
    }
}

/// Counts one reuse outcome (bucket) of a watched word of `what`'s object.
fn note_reuse(state: &ThreadState, what: &crate::access::watch::Armed, bucket: u32) {
    let node = state.tree.child(what.root, what.tag, what.key);
    if !node.is_some_and(|node| state.reuse.add(node, bucket)) {
        state.stats.watch_full.fetch_add(1, Relaxed);
    }
}

/// A trap of watchpoint `slot` of this thread: the watched word (or its
/// line) was touched. Reuse: the thread CPU time since the watch was
/// armed. Sharing: a true or false sharing event, recorded under the
/// object with this access's call path, and in the thread's sharing table
/// with the other thread's sampled instruction.
pub(super) fn watch_trap(state: &ThreadState, ctx: (Regs, u64, u64), slot: usize) {
    use crate::access::watch::{self, SharingRow};
    let stats = &state.stats;
    let Some(what) = state.watch.take(slot) else {
        stats.watch_stale.fetch_add(1, Relaxed);
        return;
    };
    stats.watch_traps.fetch_add(1, Relaxed);
    if slot == watch::REUSE_SLOT {
        let ns = sys::thread_cpu_ns().saturating_sub(what.armed_ns);
        note_reuse(state, &what, watch::reuse_bucket(ns));
        return;
    }
    let regs = &ctx.0;
    let Some(snap) = modules::get().filter(|s| !s.is_own_code(regs.rip)) else {
        return;
    };
    // A data watchpoint traps after the access: the accessing instruction
    // is the one before the interrupted IP.
    let leaf = accessing_instruction(snap, regs.rip).unwrap_or(regs.rip);
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    let Some(path) = call_path(state, snap, &ctx, leaf, frames) else {
        return;
    };
    let exact = slot == watch::EXACT_SLOT;
    let metric = if exact {
        cct::M_TRUE_SHARING
    } else {
        cct::M_FALSE_SHARING
    };
    let target = Target::of(what.root, what.tag, what.key);
    let metrics = [(metric, 1)];
    if !record(state, path, &metrics, Some(target), None, &metrics, None) {
        return;
    }
    let Some(node) = state.tree.child(what.root, what.tag, what.key) else {
        return;
    };
    let row = SharingRow {
        node,
        exact,
        other_thread: what.from_thread,
        line_offset: what.line.wrapping_sub(what.start) as i64,
        ip: leaf,
        other_ip: what.from_ip,
        count: 0,
    };
    if !state.sharing.note(&row) {
        stats.watch_full.fetch_add(1, Relaxed);
    }
}
