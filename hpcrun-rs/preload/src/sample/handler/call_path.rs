//! The unwind: the interrupted call path without the library's own
//! frames, marked when partial, and for an address on this thread's
//! stack the frame that owns it (stack-frame attribution).

use std::sync::atomic::Ordering::*;

use crate::access::soft::Regs;
use crate::code::modules::Snapshot;
use crate::code::unwind;
use crate::sys;
use crate::threads::{self, ThreadState};

use super::MAX_FRAMES;

/// The interrupted call path, innermost first, with `leaf` as its first
/// frame and the library's own frames left out; `None` (counted) when the
/// module snapshot or unwinder is missing.
pub(super) fn call_path<'a>(
    state: &ThreadState,
    snap: &Snapshot,
    ctx: &(Regs, u64, u64),
    leaf: u64,
    frames: &'a mut [u64; MAX_FRAMES],
) -> Option<&'a [u64]> {
    call_path_owning(state, snap, ctx, leaf, None, frames).map(|(path, _)| path)
}

/// The frame that holds a stack address: its function's start and the
/// frame's CFA.
pub(super) type FrameOwner = (u64, u64);

/// [`call_path`], and for `data`, an address on this thread's stack, the
/// frame that holds it (`unwind::owning_frame`) as the start of its
/// function (the address in it when the module has no symbol there) and
/// the frame's CFA; `None` when no unwound frame of the program holds it.
pub(super) fn call_path_owning<'a>(
    state: &ThreadState,
    snap: &Snapshot,
    (regs, sp, bp): &(Regs, u64, u64),
    leaf: u64,
    data: Option<u64>,
    frames: &'a mut [u64; MAX_FRAMES],
) -> Option<(&'a [u64], Option<FrameOwner>)> {
    let Some(unwinder) = unwind::get() else {
        state.stats.dropped[threads::DROP_UNWIND].fetch_add(1, Relaxed);
        return None;
    };
    if !state.handler_cache_made() && sys::heap::lock_held() {
        // Its first sample builds the cache in memory of its own; should
        // that not suffice, the rest would come from the heap, whose lock
        // the interrupted code (this thread's) holds.
        state.stats.dropped[threads::DROP_IN_PROFILER].fetch_add(1, Relaxed);
        return None;
    }
    // SAFETY: the handler cache is used only by this thread's handler, and
    // `in_handler` excludes re-entry.
    let cache = unsafe { &mut *state.handler_cache() };
    // (The walk also publishes the frames' ranges, for other threads'
    // samples of this stack.)
    let got = unwind::owning_frame(
        unwinder,
        cache,
        &state.stack,
        (regs.rip, *sp, *bp),
        data,
        (frames, &state.frames_seen),
    );
    frames[0] = leaf;
    let owner = got
        .owner
        .and_then(|(i, cfa)| Some((program_function(snap, frames[i])?, cfa)));
    // Inside an OpenMP parallel region the path continues with the
    // region's calling context from the region's trampoline on: complete.
    let (len, complete) =
        match crate::hooks::openmp::continue_path(state, frames, got.len, got.complete) {
            Some(len) => (len, true),
            None => (got.len, got.complete),
        };
    // Callers inside this library (the thread trampoline) are left out.
    let mut depth = 1;
    for i in 1..len {
        if !snap.is_own_code(frames[i]) {
            frames[depth] = frames[i];
            depth += 1;
        }
    }
    if !complete {
        state.stats.partial_unwinds.fetch_add(1, Relaxed);
        // The path is kept below a `<partial unwind>` marker frame, so
        // that truncated paths do not pose as complete ones.
        if depth < MAX_FRAMES {
            frames[depth] = PARTIAL_UNWIND;
            depth += 1;
        }
    }
    Some((&frames[..depth], owner))
}

/// The start of the function at lookup address `frame` (the address
/// itself when its module has no symbol there), as a stack frame's
/// owner; `None` for this library's code (the thread trampoline's frame).
pub(super) fn program_function(snap: &Snapshot, frame: u64) -> Option<u64> {
    (!snap.is_own_code(frame)).then(|| snap.function_start(frame).unwrap_or(frame))
}

/// Marker "frame" at the root end of a call path whose unwinding stopped
/// early (hpcprof-rs shows it as `<partial unwind>`).
pub const PARTIAL_UNWIND: u64 = formats::measurement::PARTIAL_UNWIND_ADDRESS;
