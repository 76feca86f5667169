//! Attribution of one `mem:soft` sample: from the interrupted registers
//! to the instruction the period belongs to and the data address it used.
//!
//! The handler (`handler.rs`) calls [`analyse`] for every timer sample:
//! find the instruction that retired before the IP (the loop's back edge at
//! a loop head), decode the straight-line window that ended there, let
//! [`crate::access::blame`] pick the access that stalled (or call the period
//! compute or other work), and recover that access's address from the
//! registers that still hold its base and index. No allocation, no lock:
//! it runs in the signal handler.
//!
//! The rules for a sample that lands at the access itself (a page fault,
//! Intel's waiting load) are in [`landed`].

#![allow(unsafe_code)]

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;

use iced_x86::Register;

use crate::access::anchors;
use crate::access::blame::{self, Operand, Rule, Window};
use crate::access::caches;
use crate::access::in_flight;
use crate::access::regions;
use crate::access::soft::{self, Access, Regs};
use crate::code::modules::Snapshot;
use crate::objects;
use crate::sys::{self, StackBounds};
use crate::threads::{self, ThreadState};

mod landed;

use landed::{about_to_fault, waiting_at_ip};

/// Longest distance from a function start that is decoded forward.
const MAX_FORWARD_DECODE: u64 = 64 * 1024;

/// The top of a thread's own stack that is taken as L1-resident: from the
/// red zone below the stack pointer to this many bytes above it (half of
/// the 32 KiB L1 data cache of current x86 cores). The running thread
/// touched its frame and its callers' nearby frames moments ago; a local
/// array read through a pointer there costs what a scalar spill costs.
const LOCAL_STACK_BYTES: u64 = 16 * 1024;

/// Bytes of code before the landed instruction that a window is decoded
/// from at least: 16 instructions of the 4-5 bytes typical of compiled
/// loops, with room to spare.
const WINDOW_CONTEXT: u64 = 128;

/// The x86-64 red zone below the stack pointer.
const RED_ZONE: u64 = 128;

/// Where the data address came from.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Computed from the interrupted registers (the blamed access's base
    /// and index, or copies of them, are intact).
    Previous,
    /// The blamed load overwrote its own pointer (a pointer chase): the
    /// address of the next access through that pointer, at the IP.
    AtIp,
    /// The blamed load overwrote its index: the intact base register
    /// names the object, not the element (no offset or stride recorded).
    BaseOnly,
}

/// What [`analyse`] decided for one sample.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Analysis {
    /// The instruction the sample is attributed to (the code tree's
    /// leaf): the blamed access, else the landed instruction.
    pub leaf: u64,
    pub access: Access,
    pub source: Source,
    pub rule: Rule,
}

/// The instruction before `ip` in the function starting at `func`,
/// decoding forward from the closest known boundary (else the function's
/// start), and noting the boundaries met on the way.
fn previous_from_anchor_or_start(code: &[u8], seg_start: u64, func: u64, ip: u64) -> Option<u64> {
    let from = anchors::start_before(ip, func).unwrap_or(func);
    let decode = |from: u64| {
        soft::previous_by_forward_decode_noting(
            code,
            seg_start,
            from,
            ip,
            anchors::BLOCK_SHIFT,
            &mut anchors::record,
        )
    };
    // A stale anchor (code replaced at the same address) misses the IP:
    // start over from the function's start.
    decode(from).or_else(|| (from != func).then(|| decode(func)).flatten())
}

/// The instruction that retired before `ip`: the one that ends at `ip`,
/// or, when that one cannot fall through to `ip` (padding before a loop
/// label, a jump), the loop's back-edge branch that jumps to `ip`.
///
/// At a function's first instruction nothing fell through: a call or a
/// jump landed there (compilers never let one symbol fall into the next;
/// the bytes before are the previous function's padding or its last
/// instruction, or a CRT stub such as `frame_dummy`). The previous
/// instruction is then a back edge to the entry (a loop whose head is the
/// function's first instruction), else none: the period belongs to the
/// landed instruction, in the function that was running.
fn previous_executed(snap: &Snapshot, code: &[u8], seg_start: u64, ip: u64) -> Option<u64> {
    if snap.function_start(ip) == Some(ip) {
        return blame::back_edge(code, seg_start, ip).map(|b| b.ip());
    }
    let linear = linear_previous(snap, code, seg_start, ip)?;
    let falls_through =
        soft::decode_at(code, seg_start, linear).is_some_and(|insn| !blame::no_fall_through(&insn));
    if falls_through {
        return Some(linear);
    }
    Some(
        blame::back_edge(code, seg_start, ip)
            .map(|b| b.ip())
            .unwrap_or(linear),
    )
}

/// The straight-line code that ran up to `ip`, ending with `prev` (see
/// [`previous_executed`]).
fn window(snap: &Snapshot, code: &[u8], seg_start: u64, ip: u64, prev: u64) -> Option<Window> {
    if prev > ip {
        // A loop head: the body, from the head to its back edge.
        let branch = soft::decode_at(code, seg_start, prev)?;
        return Window::decode(code, seg_start, ip, branch.next_ip());
    }
    let func = snap
        .function_start(ip)
        .filter(|&f| ip - f <= MAX_FORWARD_DECODE && f >= seg_start && f <= prev);
    if let Some(f) = func {
        // An anchor far enough before `prev` that the window can hold its
        // WINDOW instructions (an anchor just before `prev` would cut the
        // block and lose the loads and reloads at its start).
        let from = anchors::start_before(prev.saturating_sub(WINDOW_CONTEXT), f).unwrap_or(f);
        if let Some(w) = Window::decode(code, seg_start, from, ip) {
            return Some(w);
        }
    }
    soft::decode_at(code, seg_start, prev)
        .filter(|insn| insn.next_ip() == ip)
        .map(Window::single)
}

/// The value of register `reg` (read as `width`, the register the
/// instruction named) in `regs`.
fn register_value(regs: &Regs, reg: Register, width: Register) -> Option<u64> {
    let v = regs.gpr[soft::gpr_index(reg)?];
    Some(if width.is_gpr32() { v & 0xffff_ffff } else { v })
}

/// False if an access at `addr` cannot have run without killing the
/// program: an address below the lowest mappable one or beyond the user
/// address space (47 bits, or 56 when the thread's stack lies above 47
/// bits: 5-level paging that maps there), as [`regions`] defines them for
/// the unknown addresses' labels. The registers then hold what another
/// path left (a sample at a branch target charged to the instruction
/// before it in address order, which the branch skipped), and the address
/// is lost, not reported.
fn could_have_run(addr: u64, regs: &Regs) -> bool {
    let top = if regs.gpr[4] >= regions::USER_TOP {
        regions::USER_TOP_5LEVEL
    } else {
        regions::USER_TOP
    };
    (regions::LOWEST_MAPPABLE..top).contains(&addr)
}

/// The data address of the access at window index `at`, after the landed
/// instruction ran, from the registers that still hold its base and
/// index; with a lost index and an intact base, the base (the object, not
/// the element).
fn blamed_address(
    w: &Window,
    at: usize,
    regs: &Regs,
    stack: &StackBounds,
    code: &[u8],
    seg_start: u64,
) -> (Access, Source) {
    let insn = &w.insns()[at];
    let Some(kind) = soft::memory_kind(insn) else {
        return (Access::NotMemory, Source::Previous);
    };
    let size = insn.memory_size().size() as u32;
    if insn.is_string_instruction()
        || matches!(insn.memory_segment(), Register::FS | Register::GS)
        || insn.memory_index().is_xmm()
        || insn.memory_index().is_ymm()
        || insn.memory_index().is_zmm()
    {
        return (Access::Unrecoverable, Source::Previous);
    }
    let (base, index) = blame::address_registers(w, at);
    let reg = |r: Register, delta: i64| match r {
        Register::None => Some(0),
        r => register_value(regs, r, r).map(|v| v.wrapping_sub(delta as u64)),
    };
    // The own stack is read directly; any other word through the
    // kernel, which refuses an address that is no longer mapped.
    let read = |at: u64| {
        if stack.contains(at) {
            stack.read(at)
        } else {
            sys::read_word_checked(at)
        }
    };
    let loaded = |word: blame::Reload| {
        let base = match word.base_deref {
            Some(d) => read(reg(word.base, 0)?.wrapping_add(d as u64))?,
            None => reg(word.base, word.base_delta)?,
        };
        read(
            base.wrapping_add(reg(word.index, word.index_delta)?.wrapping_mul(word.scale as u64))
                .wrapping_add(word.disp as u64),
        )
    };
    let term = |t: blame::Term| match t {
        blame::Term::None => Some(0),
        blame::Term::In(r, delta) => reg(r, delta),
        blame::Term::Loaded(word) => loaded(word),
    };
    let value = |op: Operand, named: Register| match op {
        Operand::None => Some(0),
        Operand::In(r, delta) => register_value(regs, r, if named.is_gpr32() { named } else { r })
            .map(|v| v.wrapping_sub(delta as u64)),
        Operand::Loaded(word) => loaded(word),
        Operand::Sum(s) => {
            let v = term(s.terms[0])?
                .wrapping_add(term(s.terms[1])?.wrapping_mul(s.scale as u64))
                .wrapping_add(s.disp as u64);
            Some(if named.is_gpr32() { v & 0xffff_ffff } else { v })
        }
        Operand::Lost => None,
    };
    let b = value(base, insn.memory_base());
    let i = value(index, insn.memory_index());
    let disp = insn.memory_displacement64();
    let scale = insn.memory_index_scale() as u64;
    match (b, i) {
        (Some(b), Some(i)) => {
            let addr = b.wrapping_add(i.wrapping_mul(scale)).wrapping_add(disp);
            match could_have_run(addr, regs) {
                true => (Access::Address { addr, size, kind }, Source::Previous),
                false => (Access::Unrecoverable, Source::Previous),
            }
        }
        (Some(b), None) if base != Operand::None => {
            match could_have_run(b.wrapping_add(disp), regs) {
                true => (
                    Access::Address {
                        addr: b.wrapping_add(disp),
                        size,
                        kind,
                    },
                    Source::BaseOnly,
                ),
                false => (Access::Unrecoverable, Source::Previous),
            }
        }
        _ => {
            // A pointer chase (`mov (%rax),%rax`): the next access through
            // the loaded pointer reads the next element of the same
            // structure. Only loads that replaced their own base, whose
            // register still holds the loaded pointer at the IP (the
            // sample may land after the `test` or the back edge that
            // follow the load).
            let via = insn.memory_base().full_register();
            let chase = insn.memory_index() == Register::None
                && insn.op_count() > 0
                && insn.op_kind(0) == iced_x86::OpKind::Register
                && insn.op0_register().full_register() == via
                && !w.insns()[at + 1..]
                    .iter()
                    .any(|later| soft::writes_register(later, via));
            if chase {
                if let a @ Access::Address { .. } =
                    soft::next_access_via(code, seg_start, regs.rip, regs, via)
                {
                    let a = match a {
                        Access::Address { addr, size, .. } => Access::Address {
                            addr,
                            size,
                            kind: soft::AccessKind::Load,
                        },
                        other => other,
                    };
                    return (a, Source::AtIp);
                }
            }
            (Access::Unrecoverable, Source::Previous)
        }
    }
}

/// The instruction that ends at `ip` (a watchpoint traps right after the
/// accessing instruction: no skid, no blame).
pub fn accessing_instruction(snap: &Snapshot, ip: u64) -> Option<u64> {
    let (seg_start, seg_end) = snap.exec_segment(ip)?;
    // SAFETY: as in `analyse`: a loaded segment of the current snapshot.
    let code = unsafe { sys::loaded_bytes(&[(seg_start, seg_end, true)], seg_start, seg_end)? };
    linear_previous(snap, code, seg_start, ip)
}

/// The instruction that ends at `ip`: decoded forward in its function
/// (from an anchor or the start), else a backward guess.
fn linear_previous(snap: &Snapshot, code: &[u8], seg_start: u64, ip: u64) -> Option<u64> {
    snap.function_start(ip)
        .filter(|&f| ip - f <= MAX_FORWARD_DECODE && f >= seg_start)
        .and_then(|f| previous_from_anchor_or_start(code, seg_start, f, ip))
        .or_else(|| soft::previous_by_backward_guess(code, seg_start, ip))
}

/// True if `access` (recovered from `regs`) went to the top of the
/// thread's own stack (see [`LOCAL_STACK_BYTES`]).
fn is_local(access: Access, regs: &Regs) -> bool {
    let Some(sp) = register_value(regs, Register::RSP, Register::RSP) else {
        return false;
    };
    match access {
        Access::Address { addr, .. } => {
            addr.wrapping_sub(sp.wrapping_sub(RED_ZONE)) < RED_ZONE + LOCAL_STACK_BYTES
        }
        _ => false,
    }
}

/// True if `addr`, the target of a RIP-relative operand without an index,
/// is a compiler constant (`Snapshot::is_constant_data`).
fn is_constant(snap: &Snapshot, addr: u64) -> bool {
    snap.is_constant_data(addr)
}

/// The instruction that retired before `ip` ([`previous_executed`],
/// through the thread's cache).
fn previous_ip(
    state: &ThreadState,
    snap: &Snapshot,
    code: &[u8],
    seg_start: u64,
    ip: u64,
) -> Option<u64> {
    threads::cached_previous(state, ip).or_else(|| {
        let found = previous_executed(snap, code, seg_start, ip)?;
        threads::cache_previous(state, ip, found);
        Some(found)
    })
}

/// True for the software prefetches (a hint: never faults).
fn is_prefetch(insn: &iced_x86::Instruction) -> bool {
    use iced_x86::Mnemonic::*;
    matches!(
        insn.mnemonic(),
        Prefetch | Prefetchnta | Prefetcht0 | Prefetcht1 | Prefetcht2 | Prefetchw | Prefetchwt1
    )
}

/// The skid-corrected instruction and its memory access: which instruction
/// the sample's period belongs to ([`blame`]) and the data address it
/// used. `turn` chooses among several blamed loads. (Public for the
/// benchmarks, like [`classify`] and [`sample`].)
#[doc(hidden)]
pub fn analyse(state: &ThreadState, snap: &Snapshot, regs: &Regs, turn: u64) -> Analysis {
    let ip = regs.rip;
    let nothing = |leaf: u64, rule: Rule| Analysis {
        leaf,
        access: Access::NotMemory,
        source: Source::Previous,
        rule,
    };
    let Some((seg_start, seg_end)) = snap.exec_segment(ip) else {
        return nothing(ip, Rule::Other);
    };
    // SAFETY: an executable PT_LOAD segment of a module of the current
    // snapshot, as the loader reported it; a module stays mapped while a
    // snapshot holds it (it leaves the snapshots before `dlclose`).
    let code = unsafe { sys::loaded_bytes(&[(seg_start, seg_end, true)], seg_start, seg_end) };
    let Some(code) = code else {
        return nothing(ip, Rule::Other);
    };
    // An access about to page-fault: a faulting instruction never
    // retires, so the interrupt came before it (the IP is the faulting
    // access, not one past the one that stalled) and its registers are
    // intact (it has not run).
    if let Some(access) = about_to_fault(state, snap, code, seg_start, regs) {
        state.stats.about_to_fault.fetch_add(1, Relaxed);
        return Analysis {
            leaf: ip,
            access,
            source: Source::Previous,
            rule: Rule::Landed,
        };
    }
    if let Some(access) = waiting_at_ip(state, snap, code, seg_start, regs) {
        return Analysis {
            leaf: ip,
            access,
            source: Source::Previous,
            rule: Rule::Landed,
        };
    }
    let Some(prev) = previous_ip(state, snap, code, seg_start, ip) else {
        return nothing(ip, Rule::Other);
    };
    let Some(w) = window(snap, code, seg_start, ip, prev) else {
        return nothing(prev, Rule::Other);
    };
    // Each access's address is recovered once (the own-stack rule asks
    // for the loads of the walk, the pick below for the blamed ones; a
    // reload may cost a system call).
    let recovered: [Cell<Option<(Access, Source)>>; blame::WINDOW] = Default::default();
    let address_of = |at: usize| {
        let memo = recovered.get(at);
        if let Some(found) = memo.and_then(Cell::get) {
            return found;
        }
        let found = blamed_address(&w, at, regs, &state.stack, code, seg_start);
        if let Some(m) = memo {
            m.set(Some(found));
        }
        found
    };
    let b = blame::blame(&w, &|a| is_constant(snap, a), &|at| {
        is_local(address_of(at).0, regs)
    });
    let landed = w.last().map_or(prev, |i| i.ip());
    let blamed = b.accesses();
    if blamed.is_empty() {
        return nothing(landed, b.rule);
    }
    // Several loads feed the landed instruction: one of them in turn,
    // skipping those whose address is lost while another's is known (the
    // group's period goes to the accesses that can be named; it is
    // unrecovered only when none can).
    let n = blamed.len();
    let first = (turn % n as u64) as usize;
    let mut pick = (
        blamed[first] as usize,
        (Access::Unrecoverable, Source::Previous),
    );
    for k in 0..n {
        let at = blamed[(first + k) % n] as usize;
        let found = address_of(at);
        if k == 0 || found.0 != Access::Unrecoverable {
            pick = (at, found);
        }
        if found.0 != Access::Unrecoverable {
            break;
        }
    }
    let (at, (access, source)) = pick;
    let rule = if access == Access::Unrecoverable {
        Rule::Unrecovered
    } else {
        b.rule
    };
    if let Some((leaf, access, source)) = share_in_flight(
        &w,
        at,
        access,
        regs,
        code,
        seg_start,
        turn,
        &address_of,
        snap,
    ) {
        state.stats.shared_in_flight.fetch_add(1, Relaxed);
        return Analysis {
            leaf,
            access,
            source,
            rule,
        };
    }
    Analysis {
        leaf: w.insns()[at].ip(),
        access,
        source,
        rule,
    }
}

/// The other load of the loop that a sample blamed on the load at window
/// index `at` (its address `access`) goes to, if the draw gives it to one
/// ([`in_flight`]: the loads in flight with it, by their share of the
/// loop's memory traffic) and that load's address can be had: for a load
/// that ran before the IP in this iteration, as for a blamed access; for
/// one still to run, from the registers now, when nothing before it in
/// the body writes them first.
#[allow(clippy::too_many_arguments)]
fn share_in_flight(
    w: &Window,
    at: usize,
    access: Access,
    regs: &Regs,
    code: &[u8],
    seg_start: u64,
    turn: u64,
    address_of: &dyn Fn(usize) -> (Access, Source),
    snap: &Snapshot,
) -> Option<(u64, Access, Source)> {
    let Access::Address { kind, .. } = access else {
        return None;
    };
    if kind != soft::AccessKind::Load {
        return None;
    }
    let ip = regs.rip;
    let blamed_ip = w.insns()[at].ip();
    let body = in_flight::loop_around(code, seg_start, ip, blamed_ip)?;
    let insns = body.insns();
    let a = body.position(blamed_ip)?;
    // The sampled IP's place in this iteration: the head when the sample
    // came at the loop head (the whole body ran).
    let now = body.position(ip)?;
    let trivial = |i: usize| {
        let insn = &insns[i];
        blame::stack_slot(insn)
            || blame::thread_slot(insn)
            || insn.memory_base() == Register::RSP
            || is_prefetch(insn)
    };
    let (members, n) = in_flight::members(&body, a, &trivial);
    let chosen = in_flight::choose(&members[..n], turn)?;
    if chosen.at == a {
        return None;
    }
    let insn = &insns[chosen.at];
    let found = if now == 0 || chosen.at < now {
        // It ran before the IP: the window holds it.
        let k = w.insns().iter().position(|i| i.ip() == insn.ip())?;
        address_of(k)
    } else {
        let untouched = !insns[now..chosen.at].iter().any(|i| {
            soft::writes_register(i, insn.memory_base())
                || soft::writes_register(i, insn.memory_index())
        });
        if !untouched {
            return None;
        }
        (soft::access(insn, regs, false), Source::Previous)
    };
    match found {
        (a @ Access::Address { addr, .. }, source) if !cache_resident(snap, addr) => {
            Some((insn.ip(), a, source))
        }
        _ => None,
    }
}

/// True if the object at `addr` fits in one core's L2 cache: a heap
/// block (with the other live blocks of its site: a loop over rows reads
/// them all) or a static variable that small brings no memory traffic of
/// its own (a 4 KiB table of weights read beside a 64 MiB one). Unknown
/// memory and the caches' sizes unknown: false.
fn cache_resident(snap: &Snapshot, addr: u64) -> bool {
    let Some(l2) = caches::read_already().map(|c| c.l2).filter(|&l2| l2 > 0) else {
        return false;
    };
    let footprint = match objects::get().map(|objs| (objs.lookup(addr), objs)) {
        Some((objects::Lookup::Block { site, start, end }, objs)) => {
            (end - start).max(objs.site_footprint(site).unwrap_or(0))
        }
        _ => match snap.static_at(addr) {
            Some((_, _, start, end)) => end - start,
            None => return false,
        },
    };
    footprint <= l2
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::code::modules::{ModuleData, ModuleInfo, Symbols};
    use crate::code::unwind::UnwindSections;

    /// f, g and h at 0x1000, 0x1010 and 0x1020, each followed by nop
    /// padding; g's entry is its loop's head.
    fn program() -> (Snapshot, Vec<u8>) {
        let mut code = vec![0x90u8; 0x30];
        // f: mov eax, 1; ret; then a 9-byte nop and a nop.
        let f = [0xb8, 1, 0, 0, 0, 0xc3];
        let pad = [0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0];
        code[..6].copy_from_slice(&f);
        code[6..15].copy_from_slice(&pad);
        // g: 1: add rax, 1; cmp rax, rbx; jne 1b; ret.
        let g = [0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xd8, 0x75, 0xf7, 0xc3];
        code[0x10..0x1a].copy_from_slice(&g);
        code[0x1a..0x20].copy_from_slice(&[0x66, 0x0f, 0x1f, 0x44, 0, 0]);
        // h: mov rax, [rdi]; ret.
        code[0x20..0x24].copy_from_slice(&[0x48, 0x8b, 0x07, 0xc3]);
        let m = ModuleData::with_symbols(
            ModuleInfo {
                path: "prog".into(),
                bias: 0,
                build_id: None,
                segments: vec![(0x1000, 0x1030, true)],
                sections: UnwindSections::default(),
                is_self: false,
                owner: crate::code::modules::CodeOwner::Program,
            },
            Symbols {
                statics: vec![],
                sorted_statics: 0,
                functions: vec![(0x1000, 0x1006), (0x1010, 0x101a), (0x1020, 0x1024)],
            },
        );
        (Snapshot::new(vec![(0, Arc::new(m))]), code)
    }

    /// Addresses no access can have used without killing the program.
    #[test]
    fn impossible_addresses_are_not_reported() {
        let mut regs = Regs {
            gpr: [0; 16],
            rip: 0x1000,
        };
        regs.gpr[4] = 0x7ffc_0000_0000;
        assert!(could_have_run(0x5555_5555_0000, &regs));
        assert!(could_have_run(0x7fff_ffff_f000, &regs));
        // LAMMPS: a pointer times 4, from registers the store never saw.
        assert!(!could_have_run(0x1_55a4_e003_fe40, &regs));
        assert!(!could_have_run(0x10, &regs));
        // 5-level paging, the stack above 47 bits.
        regs.gpr[4] = 0x7f_fffc_0000_0000;
        assert!(could_have_run(0x1_55a4_e003_fe40, &regs));
    }

    /// A sample on a function's first instruction: a call landed there;
    /// the padding (or CRT stub) before it did not run just before.
    #[test]
    fn nothing_falls_into_a_function_entry() {
        let (snap, code) = program();
        assert_eq!(previous_executed(&snap, &code, 0x1000, 0x1020), None);
        assert_eq!(previous_executed(&snap, &code, 0x1000, 0x1000), None);
        // An entry that is also a loop head: its back edge ran before.
        assert_eq!(
            previous_executed(&snap, &code, 0x1000, 0x1010),
            Some(0x1017)
        );
    }
}
