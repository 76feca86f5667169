//! The mem:soft (and timer) sample path: skid correction and data address
//! (`attribute::analyse`), unwind, object, the metrics of both trees, the
//! access site, the watchpoints, the counters by rule and source.

use std::sync::atomic::Ordering::*;

use crate::access::blame::Rule;
use crate::access::numa;
use crate::access::soft::{Access, Regs};
use crate::access::stride::{self, Decoded};
use crate::cct;
use crate::sample::attribute::{analyse, Analysis, Source};
use crate::threads::run;
use crate::threads::{self, ThreadState};

use super::call_path::call_path_owning;
use super::classify::{classify, Target};
use super::program_snapshot;
use super::record::record;
use super::site::site_stride;
use super::watches::arm_watches;

/// Everything the handler does for one sample, given the interrupted
/// registers (and RSP, RBP): skid correction, data address, unwind, object
/// lookup, tree insertion. The sample stands for `weight` periods (more
/// than 1 when a CPU-time timer's tick was coarser than the period): its
/// tree metrics count that many times; the offset histogram and the
/// access sites, distributions, count it once.
#[doc(hidden)]
pub fn sample(state: &ThreadState, ctx: (Regs, u64, u64), weight: u64) {
    let stats = &state.stats;
    stats.samples.fetch_add(1, Relaxed);
    let regs = &ctx.0;
    let Some(snap) = program_snapshot(state, regs.rip) else {
        return;
    };
    let Analysis {
        leaf,
        access,
        source,
        rule,
    } = if run::code_only() {
        Analysis {
            leaf: regs.rip,
            access: Access::NotMemory,
            source: Source::Previous,
            rule: Rule::Other,
        }
    } else {
        analyse(state, snap, regs, stats.samples.load(Relaxed))
    };
    stats.attribution[rule as usize].fetch_add(1, Relaxed);
    // A base-only address names the object, not the element: no offset,
    // stride or alignment is recorded from it.
    let exact = source != Source::BaseOnly;
    // SAFETY: the frame buffer is used only by this thread's handlers,
    // which block each other's signals (no re-entry).
    let frames = unsafe { &mut *state.handler_frames.get() };
    // An access to this thread's stack: the unwind also finds the frame
    // that holds it.
    let on_stack = match access {
        Access::Address { addr, .. } if state.stack.contains(addr) => Some(addr),
        _ => None,
    };
    let Some((path, frame)) = call_path_owning(state, snap, &ctx, leaf, on_stack, frames) else {
        return;
    };

    let (target, addr) = match access {
        Access::NotMemory => (None, None),
        Access::Unrecoverable => (
            Some(Target::of(cct::UNKNOWN, cct::TAG_NOT_RECOVERED, 0)),
            None,
        ),
        Access::Address { addr, .. } => match classify(state, snap, addr, frame) {
            Some(o) => (Some(o), Some(addr)),
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
    // Data-tree metrics: the access, its width, whether it spans two
    // cache lines, its NUMA placement; the code tree gets the same plus
    // the CPU sample.
    // The rule that decided it (mem:soft), in both trees: per code line
    // and per object, how its samples were attributed.
    let by_rule = (cct::M_RULE_FIRST + rule as usize, weight);
    let mut data = [(metric, weight), by_rule, (0, 0), (0, 0), (0, 0)];
    let mut n = if run::code_only() { 1 } else { 2 };
    if let Access::Address { addr, size, .. } = access {
        if size > 0 {
            data[n] = (cct::M_ACCESS_BYTES, u64::from(size) * weight);
            n += 1;
        }
        if exact && stride::misaligned(addr, size) {
            data[n] = (cct::M_MISALIGNED, weight);
            n += 1;
        }
    }
    if let Some(addr) = addr {
        if let Some(local) = numa::is_local(addr) {
            let column = if local {
                cct::M_NUMA_LOCAL
            } else {
                cct::M_NUMA_REMOTE
            };
            data[n] = (column, weight);
            n += 1;
        }
    }
    let data = &data[..n];
    let mut code = [
        (cct::M_CPU_SAMPLES, weight),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
    ];
    let code_metrics = if target.is_some() {
        code[1..=n].copy_from_slice(data);
        &code[..=n]
    } else if run::code_only() {
        &code[..1]
    } else {
        code[1] = by_rule;
        &code[..2]
    };
    // The access site: the instruction whose address was computed (its
    // loop gives the decoder stride). An address taken from the next
    // instruction (`Source::AtIp`) means the sampled load overwrote its
    // own address register: a pointer chase, data-dependent.
    let exact_addr = addr.filter(|_| exact);
    let site = exact_addr.map(|_| {
        let stride = match source {
            Source::AtIp => Decoded::DataDependent,
            _ => site_stride(state, snap, leaf, Some(regs)),
        };
        (leaf, stride)
    });
    if !record(state, path, code_metrics, target, exact_addr, data, site) || target.is_none() {
        return;
    }
    if let (Access::Address { addr, size, kind }, Some(t), true) = (access, target, exact) {
        arm_watches(state, &t, addr, size, kind.stores(), leaf);
    }
    if metric == cct::M_STORE_SAMPLES {
        stats.stores.fetch_add(1, Relaxed);
        return;
    }
    stats.memory.fetch_add(1, Relaxed);
    if addr.is_some() {
        stats.recovered.fetch_add(1, Relaxed);
        match source {
            Source::Previous => stats.recovered_previous.fetch_add(1, Relaxed),
            Source::AtIp => stats.recovered_at_ip.fetch_add(1, Relaxed),
            Source::BaseOnly => stats.recovered_base_only.fetch_add(1, Relaxed),
        };
    }
}
