//! The page-fault event's signal (`-e page-faults`): drains the thread's
//! ring and records each fault at its data address (first touch), with a
//! brake on feedback loops. A transparent huge page's first touch is
//! split among the objects its 4 KiB pages hold.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::*;

use crate::access::soft::Regs;
use crate::cct;
use crate::sys;
use crate::threads::{self, ThreadState};

use super::call_path::{call_path, PARTIAL_UNWIND};
use super::classify::classify;
use super::forward::program_signal;
use super::record::record;
use super::{enter, program_snapshot};

/// The handler of the page-fault event's signal: drains the thread's
/// ring and records each fault at its data address.
pub extern "C" fn on_page_fault(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if program_signal(signal, info, context) {
        return;
    }
    enter(context, page_faults);
}

fn page_faults(state: &ThreadState, ctx: (Regs, u64, u64)) {
    use crate::pmu::record::{self, Record, SampleLayout};
    let Some(ring) = state.fault_ring.get() else {
        return;
    };
    let layout = SampleLayout::new(sys::page_fault_layout());
    let dropped = &state.stats.dropped;
    let drained = ring.for_each_record(|header, body| match record::parse(header, body, &layout) {
        Ok(Record::Sample(s)) => fault(state, &ctx, s.ip, s.addr, s.data_page_size),
        Ok(Record::Lost { lost, .. }) => {
            dropped[threads::DROP_RING_LOST].fetch_add(lost, Relaxed);
        }
        Ok(_) => {}
        Err(_) => {
            dropped[threads::DROP_BAD_RECORD].fetch_add(1, Relaxed);
        }
    });
    let bad = drained.too_large + drained.corrupt;
    if bad > 0 {
        dropped[threads::DROP_BAD_RECORD].fetch_add(bad, Relaxed);
    }
    // A feedback loop (signals without new samples, or only faults of the
    // profiler itself) must not keep the program from running: after
    // `MAX_IDLE_FAULT_SIGNALS` such signals in a row, this thread's
    // page-fault sampling stops.
    if state.fault_progress.swap(false, Relaxed) {
        state.fault_idle.store(0, Relaxed);
    } else if state.fault_idle.fetch_add(1, Relaxed) + 1 >= MAX_IDLE_FAULT_SIGNALS {
        let fd = state.fault_fd.swap(-1, AcqRel);
        if fd >= 0 {
            sys::disable_event(fd);
            state.stats.fault_sampling_stopped.store(1, Relaxed);
        }
    }
}

/// See `page_faults`.
const MAX_IDLE_FAULT_SIGNALS: u32 = 1_000;

/// One sampled page fault of user code at `ip` on data address `addr`,
/// which mapped a page of `page_size` bytes (0: not reported).
fn fault(state: &ThreadState, ctx: &(Regs, u64, u64), ip: u64, addr: u64, page_size: u64) {
    let stats = &state.stats;
    stats.page_faults.fetch_add(1, Relaxed);
    // (A fault in the profiler's own code: its trees and tables being
    // touched.)
    let Some(snap) = program_snapshot(state, ip) else {
        return;
    };
    // A page that faults again and again (a program writing the control
    // page of its own perf ring: each of our signals makes it write again)
    // is a feedback loop, not first touches.
    let page = addr >> 12;
    if state.fault_last_page.swap(page, Relaxed) == page {
        if state.fault_same_page.fetch_add(1, Relaxed) + 1 >= MAX_IDLE_FAULT_SIGNALS {
            state.fault_idle.store(MAX_IDLE_FAULT_SIGNALS, Relaxed);
            return;
        }
    } else {
        state.fault_same_page.store(0, Relaxed);
    }
    state.fault_progress.store(true, Relaxed);
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    // The signal arrives as the faulting instruction is about to run again:
    // the interrupted context is the fault's, unless older records were
    // waiting in the ring (then only their IP is known).
    let path: &[u64] = if ip == ctx.0.rip {
        match call_path(state, snap, ctx, ip, frames) {
            Some(p) => p,
            None => return,
        }
    } else {
        stats.partial_unwinds.fetch_add(1, Relaxed);
        frames[0] = ip;
        frames[1] = PARTIAL_UNWIND;
        &frames[..2]
    };
    let Some(target) = classify(state, snap, addr, None) else {
        stats.dropped[threads::DROP_MAP_BUSY].fetch_add(1, Relaxed);
        return;
    };
    // A transparent huge page is placed whole by its one fault: its first
    // touch counts all its 4 KiB pages, and is known by its first page.
    let pages = crate::access::pages::pages_mapped(page_size);
    let base = addr & !(pages * 4096 - 1);
    if !crate::access::pages::first_touch(base) {
        let metrics = [(cct::M_PAGE_FAULTS, 1)];
        record(state, path, &metrics, Some(target), None, &metrics, None);
        return;
    }
    let end = base + pages * 4096;
    if pages == 1 || target.range.is_some_and(|(s, e)| s <= base && e >= end) {
        let metrics = [(cct::M_PAGE_FAULTS, 1), (cct::M_FIRST_TOUCH, pages)];
        record(state, path, &metrics, Some(target), None, &metrics, None);
        return;
    }
    // A huge page that holds more than the faulting object: each of its
    // pages counts for the object at its first byte (the faulting page for
    // the faulting object), in runs of pages of one object.
    let own = (addr - base) / 4096;
    let object_of = |page: u64| {
        if page == own {
            target
        } else {
            classify(state, snap, base + page * 4096, None).unwrap_or(target)
        }
    };
    let mut start = 0;
    let mut run = object_of(0);
    for page in 1..=pages {
        let next = (page < pages).then(|| object_of(page));
        if next.is_some_and(|t| same_object(&t, &run)) {
            continue;
        }
        let faulted = (start..page).contains(&own);
        let metrics = [(cct::M_FIRST_TOUCH, page - start), (cct::M_PAGE_FAULTS, 1)];
        let metrics = if faulted { &metrics[..] } else { &metrics[..1] };
        record(state, path, metrics, Some(run), None, metrics, None);
        if let Some(t) = next {
            (start, run) = (page, t);
        }
    }
}

/// True if `a` and `b` are one data object (one node of the data trees).
fn same_object(a: &super::classify::Target, b: &super::classify::Target) -> bool {
    (a.root, a.tag, a.key) == (b.root, b.tag, b.key)
}
