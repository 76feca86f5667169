//! Hardware sample sources (`pmu/`): mem:latency and mem:stores. Kept
//! apart from the mem:soft path.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::*;

use crate::access::handler_time;
use crate::access::numa;
use crate::access::soft::{self, Regs};
use crate::access::stride;
use crate::cct;
use crate::threads::{self, ThreadState};

use super::call_path::call_path_owning;
use super::classify::classify;
use super::forward::program_signal;
use super::record::record;
use super::site::{instruction_at, site_stride};
use super::watches::arm_watches;
use super::{enter, program_snapshot};

/// The signal handler of the hardware memory events: each signal means new
/// records in the thread's perf ring (one wakeup per sample); every usable
/// sample goes to [`hardware_sample`].
pub extern "C" fn on_hw_sample(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if program_signal(signal, info, context) {
        return;
    }
    let Some(setup) = crate::pmu::sampler::get() else {
        return;
    };
    enter(context, |state, interrupted| {
        crate::pmu::sampler::drain(&state.hw, setup, |s| {
            let t0 = handler_time::start();
            hardware_sample(state, &interrupted, s.ip, s.addr, s.weight, &s.access);
            t0.end(&state.stats.handler_time);
        });
    });
}

/// The hardware sample sources: attributes one PEBS/IBS sample of
/// instruction `ip` accessing data address `addr` like a mem:soft sample
/// (call path, data object, both trees, histogram, NUMA; a load counts in
/// `samples`, a store in `store_samples`), plus its latency (`weight`, in
/// cycles) and where the data came from (one `src_*` column, `tlb_miss`).
///
/// The call path is unwound from the interrupted registers, with `ip` as
/// its leaf: the signal arrives right after the sample (one wakeup per
/// sample), normally still in the sampled function.
pub fn hardware_sample(
    state: &ThreadState,
    interrupted: &(Regs, u64, u64),
    ip: u64,
    addr: u64,
    weight: u64,
    access: &crate::pmu::datasrc::Access,
) {
    use crate::pmu::datasrc::MemLevel;
    let (level, is_store, tlb_miss) = (access.level, access.is_store, access.tlb_miss);
    let stats = &state.stats;
    stats.samples.fetch_add(1, Relaxed);
    let Some(snap) = program_snapshot(state, ip) else {
        return;
    };
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    let on_stack = state.stack.contains(addr).then_some(addr);
    let Some((path, frame)) = call_path_owning(state, snap, interrupted, ip, on_stack, frames)
    else {
        return;
    };
    let Some(target) = classify(state, snap, addr, frame) else {
        stats.dropped[threads::DROP_MAP_BUSY].fetch_add(1, Relaxed);
        return;
    };
    let metric = if is_store {
        cct::M_STORE_SAMPLES
    } else {
        cct::M_SAMPLES
    };
    let source = match level {
        MemLevel::L1 => cct::M_SRC_L1,
        MemLevel::FillBuffer => cct::M_SRC_LFB,
        MemLevel::L2 => cct::M_SRC_L2,
        MemLevel::L3 => cct::M_SRC_L3,
        MemLevel::LocalDram => cct::M_SRC_LOCAL_DRAM,
        MemLevel::RemoteDram => cct::M_SRC_REMOTE_DRAM,
        MemLevel::RemoteCache => cct::M_SRC_REMOTE_CACHE,
        MemLevel::Hitm => cct::M_SRC_HITM,
        _ => cct::M_SRC_OTHER,
    };
    let tlb = (cct::M_TLB_MISS, u64::from(tlb_miss));
    let mut metrics = [
        (metric, 1),
        (cct::M_LATENCY, weight),
        (source, 1),
        tlb,
        (0, 0),
        (0, 0),
    ];
    if let Some(local) = numa::is_local(addr) {
        let m = if local {
            cct::M_NUMA_LOCAL
        } else {
            cct::M_NUMA_REMOTE
        };
        metrics[4] = (m, 1);
    }
    // The records carry no access size: the instruction at the sample's
    // IP (exact for IBS and precise PEBS) gives it when it decodes to an
    // explicit memory operand.
    let size = instruction_at(snap, ip)
        .filter(|(insn, ..)| soft::has_memory_operand(insn))
        .map(|(insn, ..)| insn.memory_size().size() as u32);
    if size.is_some_and(|s| stride::misaligned(addr, s)) {
        metrics[5] = (cct::M_MISALIGNED, 1);
    }
    // Deltas of the sampled addresses per site; the decoder stride too
    // (constant steps only: the interrupted registers are not the
    // sample's).
    let site = Some((ip, site_stride(state, snap, ip, None)));
    if !record(
        state,
        path,
        &metrics,
        Some(target),
        Some(addr),
        &metrics,
        site,
    ) {
        return;
    }
    arm_watches(state, &target, addr, size.unwrap_or(8), is_store, ip);
    if is_store {
        stats.stores.fetch_add(1, Relaxed);
    } else {
        stats.memory.fetch_add(1, Relaxed);
    }
    // The hardware gives the address: always "recovered".
    stats.recovered.fetch_add(1, Relaxed);
}
