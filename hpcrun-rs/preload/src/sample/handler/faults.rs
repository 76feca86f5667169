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
use super::classify::{classify, Target};
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
    // Whether any sample or loss was drained (each left a signal queued).
    let mut drained_any = false;
    let drained = ring.for_each_record(|header, body| match record::parse(header, body, &layout) {
        Ok(Record::Sample(s)) => {
            drained_any = true;
            fault(state, &ctx, s.ip, s.addr, s.data_page_size);
        }
        Ok(Record::Lost { lost, .. }) => {
            drained_any = true;
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
    // A signal that finds the ring empty was queued for a record an
    // earlier signal drained (one drain takes every record, a burst of
    // thousands while the signal waited, and the kernel queues a signal
    // for each, lost or not): not a loop, and nothing to do.
    if !drained_any {
        return;
    }
    // A feedback loop (signals whose samples are all faults of the
    // profiler itself, or a thousand faults in a row on one page: below)
    // must not keep the program from running: after
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
    // touch counts all its 4 KiB pages not touched before.
    use crate::access::pages;
    let n = pages::pages_mapped(page_size);
    let put = |metrics: &[(usize, u64)], t: Target| {
        record(state, path, metrics, Some(t), None, metrics, None);
    };
    if n == 1 {
        let touched = pages::first_touch(addr);
        let metrics = [(cct::M_PAGE_FAULTS, 1), (cct::M_FIRST_TOUCH, 1)];
        put(if touched { &metrics } else { &metrics[..1] }, target);
        return;
    }
    let base = addr & !(n * 4096 - 1);
    let Some(some_seen) = pages::first_touch_huge(base, n) else {
        put(&[(cct::M_PAGE_FAULTS, 1)], target);
        return;
    };
    let end = base + n * 4096;
    if !some_seen && target.range.is_some_and(|(s, e)| s <= base && e >= end) {
        put(&[(cct::M_PAGE_FAULTS, 1), (cct::M_FIRST_TOUCH, n)], target);
        return;
    }
    // A huge page that holds more than the faulting object, or some of
    // whose pages were touched before (one by one): each page not touched
    // before counts for the object at its first byte (the faulting page
    // for the faulting object), in runs of pages of one object.
    let own = (addr - base) / 4096;
    let mut run: Option<(Target, u64, bool)> = None;
    let mut faulted = false;
    let mut emit = |run: Option<(Target, u64, bool)>| {
        if let Some((t, count, has_own)) = run {
            let metrics = [(cct::M_FIRST_TOUCH, count), (cct::M_PAGE_FAULTS, 1)];
            put(if has_own { &metrics } else { &metrics[..1] }, t);
            faulted |= has_own;
        }
    };
    for page in 0..n {
        let at = base + page * 4096;
        if some_seen && pages::seen(at) {
            emit(run.take());
            continue;
        }
        let t = if page == own {
            target
        } else {
            classify(state, snap, at, None).unwrap_or(target)
        };
        match &mut run {
            Some((r, count, has_own)) if same_object(r, &t) => {
                *count += 1;
                *has_own |= page == own;
            }
            _ => {
                emit(run.take());
                run = Some((t, 1, page == own));
            }
        }
    }
    emit(run.take());
    if !faulted {
        put(&[(cct::M_PAGE_FAULTS, 1)], target);
    }
}

/// True if `a` and `b` are one data object (one node of the data trees).
fn same_object(a: &Target, b: &Target) -> bool {
    (a.root, a.tag, a.key) == (b.root, b.tag, b.key)
}
