//! The rules for a sample that lands *at* an access rather than one past
//! the instruction that stalled: the access is about to page-fault
//! ([`about_to_fault`]: the tick came while the kernel returned from the
//! fault), or, on Intel, it is the load the thread was waiting for
//! ([`waiting_at_ip`]). [`analyse`](super::analyse) tries both before the
//! usual blame. No allocation, no lock: this runs in the signal handler.

use std::sync::atomic::Ordering::Relaxed;

use iced_x86::Register;

use super::{is_prefetch, previous_ip};
use crate::access::soft::{self, Access, Regs};
use crate::code::modules::Snapshot;
use crate::sys;
use crate::threads::ThreadState;

/// Page faults per sample (since the last sample that counted them) from
/// which a sample at a memory access may be one of a fault of it: below,
/// the faults took too little of the period for a sample to land on one
/// (a fault costs about 1 us: 4 in a 2 ms period are 0.2% of it), and the
/// handler's own first touches of its tables (about 0.3 per sample) do
/// not count.
const FAULTS_PER_SAMPLE: u64 = 4;

/// The access of the instruction at the IP if the period belongs to a
/// page fault of it. A faulting instruction never retires: a tick that
/// came while the kernel returned from the fault is taken in user mode
/// *at* the faulting instruction (the page now present), where the usual
/// rule would blame the instruction before it. It applies when the
/// thread page-faulted at least [`FAULTS_PER_SAMPLE`] times per sample
/// since the last sample that counted (one `getrusage`, only for a
/// sample at a memory access). Measured: 44-47% of the samples of a loop
/// that reads one byte of each fresh page of a mapping landed at the
/// faulting read; a cached array read by the same loop, one instruction
/// before, got them all.
///
/// A sample can also land one past the faulting access (it retired
/// after the fault, its TLB miss done): when the instruction before the
/// IP is a memory access too, the two are told apart by the thread's
/// recent pages (`pages::RecentPages`, the candidates of its earlier
/// fault-rule samples): an access to a page read again and again did not
/// just fault, so when the IP's page is recent and the previous access's
/// is not, the period is the previous access's (the usual rule, which
/// takes it as the landed one). A loop that faults often and stalls on
/// resident data in between can still give a period of each kind to the
/// other. Prefetches never fault; the thread's own stack and compiler
/// constants are left to the usual rules.
pub(super) fn about_to_fault(
    state: &ThreadState,
    snap: &Snapshot,
    code: &[u8],
    seg_start: u64,
    regs: &Regs,
) -> Option<Access> {
    let insn = soft::decode_at(code, seg_start, regs.rip)?;
    let access @ Access::Address { addr, .. } = faultable_access(state, &insn, regs, false) else {
        return None;
    };
    // With `-e page-faults` every sampled fault runs the profiler's own
    // handler at the faulting instruction: the timer's samples there are
    // mostly that handler's time, and the faults have their own samples.
    if state.fault_fd.load(Relaxed) >= 0 {
        return None;
    }
    let watch = &state.fault_watch;
    let now = sys::thread_usage()?;
    let since = watch.since_last(now, state.stats.samples.load(Relaxed))?;
    if since.faults < FAULTS_PER_SAMPLE * since.samples {
        return None;
    }
    // The faults took a large share of the thread's time since: the
    // kernel's time at least half the user time (a program that faults
    // now and then, LULESH's 7% of its time, keeps the usual rule).
    if since.system_us * 2 < since.user_us {
        return None;
    }
    let previous = instruction_before(state, snap, code, seg_start, regs.rip)
        .map(|p| faultable_access(state, &p, regs, true));
    let recent = &watch.recent;
    let one_past = match previous {
        Some(Access::Address { addr: before, .. }) => {
            let one_past = recent.contains(addr) && !recent.contains(before);
            recent.note(before);
            one_past
        }
        _ => false,
    };
    recent.note(addr);
    (!one_past).then_some(access)
}

/// Intel: the access of the instruction at the IP, if it is the one the
/// thread was waiting for. On Intel a timer interrupt can be taken
/// *before* a load that waits for a page walk retires: the IP is then that
/// load, not one past the access that stalled (measured with perf's
/// cpu-clock on examples/skewed_lookup, Intel Xeon: 20% of the samples at
/// the random `table` read, 78% one past it, none at the cached `weights`
/// read before it; the usual rule gave the 20% to `weights`). An IP at an
/// access is also where a sample lands one past the access before it, so
/// the two are told apart by the thread's recent pages (the pages of its
/// earlier samples' accesses, `pages::RecentPages`): when the IP's access
/// is to a page not seen lately and the access before it is to one seen
/// lately, the period is the IP's access. AMD processors retire the
/// stalled load first (the IP is one past it): the rule is Intel's only.
pub(super) fn waiting_at_ip(
    state: &ThreadState,
    snap: &Snapshot,
    code: &[u8],
    seg_start: u64,
    regs: &Regs,
) -> Option<Access> {
    if !sys::intel_cpu() {
        return None;
    }
    let insn = soft::decode_at(code, seg_start, regs.rip)?;
    let access @ Access::Address { addr, .. } = faultable_access(state, &insn, regs, false) else {
        return None;
    };
    let previous = instruction_before(state, snap, code, seg_start, regs.rip)?;
    let before = match faultable_access(state, &previous, regs, true) {
        Access::Address { addr, .. } => addr,
        // A load that overwrote its index (`mov (%r11,%rax,8),%rax`): its
        // intact base names the page of a small table.
        Access::Unrecoverable => intact_base(&previous, regs)?,
        Access::NotMemory => return None,
    };
    let recent = &state.fault_watch.waiting;
    let waiting = !recent.contains(addr) && recent.contains(before);
    recent.note(before);
    recent.note(addr);
    waiting.then_some(access)
}

/// The instruction that ran just before `ip` when it falls through to
/// it (not a jump to `ip`).
fn instruction_before(
    state: &ThreadState,
    snap: &Snapshot,
    code: &[u8],
    seg_start: u64,
    ip: u64,
) -> Option<iced_x86::Instruction> {
    previous_ip(state, snap, code, seg_start, ip)
        .and_then(|p| soft::decode_at(code, seg_start, p))
        .filter(|p| p.next_ip() == ip)
}

/// The value of the base register of `insn`'s memory operand plus its
/// displacement, if the instruction (having run) did not overwrite it.
fn intact_base(insn: &iced_x86::Instruction, regs: &Regs) -> Option<u64> {
    let base = insn.memory_base();
    if base == Register::None || base == Register::RIP || soft::writes_register(insn, base) {
        return None;
    }
    let v = regs.gpr[soft::gpr_index(base)?];
    Some(v.wrapping_add(insn.memory_displacement64()))
}

/// The memory access of `insn` (before it ran, or after: `executed`) if
/// it is one that can page-fault: not a prefetch (a hint), not a
/// RIP-relative operand (code and constants of a loaded module), not the
/// thread's own stack.
fn faultable_access(
    state: &ThreadState,
    insn: &iced_x86::Instruction,
    regs: &Regs,
    executed: bool,
) -> Access {
    if insn.is_ip_rel_memory_operand() || is_prefetch(insn) || soft::memory_kind(insn).is_none() {
        return Access::NotMemory;
    }
    match soft::access(insn, regs, executed) {
        Access::Address { addr, .. } if state.stack.contains(addr) => Access::NotMemory,
        a => a,
    }
}
