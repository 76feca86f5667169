//! Loads in flight together: the share of a stalled load's period that
//! belongs to the other memory streams of its loop.
//!
//! [`crate::access::blame`] names the access the thread waited for when the timer
//! fired. In a loop that reads several arrays, that access is often not
//! the only one that missed: an out-of-order core issues the loads of the
//! coming iterations while the oldest waits, and the retirement stalls at
//! whichever missing load comes first in program order. A CSR SpMV
//! (`movslq (%r11,%rax,4),%rdx; movsd (%r12,%rdx,8),%xmm2; mulsd
//! (%r10,%rax,8),%xmm2`) reads its column indices first, so the misses of
//! the values, which arrive with the indices' own, wait behind the index
//! load and are charged to it; on another core the order is the other way
//! round. The load that produced the address of a gather (`grid[index[i]]`)
//! delays the gather by its own latency, and never retires last.
//!
//! So a sample whose blamed access is a load in a loop is shared, by
//! [`members`], with the other loads of the loop body that can be in
//! flight with it: those whose address does not depend on the blamed
//! load's result, in proportion to the memory traffic each brings per
//! iteration (the *expected miss cost*):
//!
//! - a stream (its address registers only advanced by constants in the
//!   body: a loop's induction variables) moves `min(|stride|, 64)` bytes a
//!   iteration: a line every `64 / stride` iterations;
//! - a load at the same address every iteration (a loop-invariant
//!   pointer, a member read again) is an L1 hit: nothing;
//! - an address computed by other arithmetic from the loop's counters and
//!   invariants (`index[k ^ flip]`, `a[i * n + j]`, a hash) moves its own
//!   operand's bytes;
//! - an address computed from a loaded value (a gather, a pointer chase)
//!   has no cost known from the code: it keeps only the samples that
//!   stall on it (as the blamed access it weighs a full line, 64 bytes).
//!
//! Several loads of one stream in the body (`u[i-1]`, `u[i]`, `u[i+1]`:
//! the same registers, displacements within a line) count once. Stores
//! are not shared (a store sample counts for its target). Bodies with a
//! call, or longer than [`MAX_BODY`] instructions, are not shared.
//!
//! No allocation, no lock: this runs in the signal handler.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Register};

use crate::access::blame;
use crate::access::soft;

/// Longest loop body (instructions) whose loads are shared.
pub const MAX_BODY: usize = 48;

/// Most loads a sample is shared between.
pub const MAX_MEMBERS: usize = 6;

/// Instructions searched forward from the sampled IP for the loop's back
/// edge.
const BACK_EDGE_SEARCH: usize = 64;

/// A cache line: the most one access of a stream moves per iteration.
const LINE: u64 = 64;

/// One iteration of the innermost loop around the blamed access: from its
/// head (a branch target: an instruction boundary) to its back edge.
#[derive(Clone, Copy)]
pub struct Body {
    insns: [Instruction; MAX_BODY],
    len: usize,
}

impl Body {
    /// The body's instructions, head first.
    pub fn insns(&self) -> &[Instruction] {
        &self.insns[..self.len]
    }

    /// The loop head's address.
    pub fn head(&self) -> u64 {
        self.insns[0].ip()
    }

    /// The body index of the instruction at `ip`.
    pub fn position(&self, ip: u64) -> Option<usize> {
        self.insns().iter().position(|i| i.ip() == ip)
    }
}

/// The innermost loop whose body holds `at` (the blamed access), found by
/// decoding forward from `from` (the sampled IP, an instruction boundary)
/// to the first branch that jumps back to `at` or before it. `None` when a
/// call, return, indirect or forward unconditional jump comes first, when
/// no back edge is found within [`BACK_EDGE_SEARCH`] instructions, or when
/// the body is longer than [`MAX_BODY`] or holds a call.
pub fn loop_around(code: &[u8], code_start: u64, from: u64, at: u64) -> Option<Body> {
    let off = from.checked_sub(code_start)? as usize;
    let mut decoder = Decoder::with_ip(64, code.get(off..)?, from, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    for _ in 0..BACK_EDGE_SEARCH {
        if !decoder.can_decode() {
            return None;
        }
        decoder.decode_out(&mut insn);
        if insn.is_invalid() {
            return None;
        }
        match insn.flow_control() {
            FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch => {
                let target = insn.near_branch_target();
                if target <= at && target <= from {
                    return body(code, code_start, target, insn.next_ip(), at);
                }
                if insn.flow_control() == FlowControl::UnconditionalBranch {
                    return None;
                }
            }
            FlowControl::Next => {}
            _ => return None,
        }
    }
    None
}

/// The instructions of `[head, end)` if they decode to a body holding `at`
/// with no call and at most [`MAX_BODY`] instructions.
fn body(code: &[u8], code_start: u64, head: u64, end: u64, at: u64) -> Option<Body> {
    let start = head.checked_sub(code_start)? as usize;
    let stop = end.checked_sub(code_start)? as usize;
    let mut decoder = Decoder::with_ip(64, code.get(start..stop)?, head, DecoderOptions::NONE);
    let mut b = Body {
        insns: [Instruction::default(); MAX_BODY],
        len: 0,
    };
    while decoder.can_decode() {
        if b.len == MAX_BODY {
            return None;
        }
        let insn = &mut b.insns[b.len];
        decoder.decode_out(insn);
        if insn.is_invalid()
            || matches!(
                insn.flow_control(),
                FlowControl::Call | FlowControl::IndirectCall | FlowControl::Exception
            )
        {
            return None;
        }
        b.len += 1;
    }
    (decoder.ip() == end && b.position(at).is_some()).then_some(b)
}

/// One load a sample is shared with: its body index and its weight (bytes
/// of memory traffic a iteration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Member {
    pub at: usize,
    pub weight: u64,
}

/// How much register `reg` changes over one iteration of `body`: `Some(0)`
/// if no instruction writes it, the sum of the constants if every write
/// only advances it, `None` if any other instruction writes it.
fn induction(body: &Body, reg: Register) -> Option<i64> {
    if reg == Register::None || reg == Register::RIP {
        return Some(0);
    }
    if !reg.is_gpr64() && !reg.is_gpr32() {
        return None;
    }
    let mut delta = 0i64;
    for insn in body.insns() {
        if soft::writes_register(insn, reg) {
            delta = delta.wrapping_add(blame::advance(insn, reg.full_register())?);
        }
    }
    Some(delta)
}

/// The bytes per iteration by which the address of `insn` (a memory
/// access of `body`) moves, if it moves by a constant.
fn stride(body: &Body, insn: &Instruction) -> Option<i64> {
    let base = induction(body, insn.memory_base())?;
    let index = induction(body, insn.memory_index())?;
    Some(base.wrapping_add(index.wrapping_mul(insn.memory_index_scale() as i64)))
}

/// The traffic of a stream of this stride, a iteration.
fn stream_weight(stride: i64) -> u64 {
    stride.unsigned_abs().min(LINE)
}

/// A set of full registers (at most 16 tracked).
#[derive(Default)]
struct Regs {
    set: [Register; 16],
    n: usize,
}

impl Regs {
    fn contains(&self, r: Register) -> bool {
        r != Register::None && self.set[..self.n].contains(&r.full_register())
    }
    fn insert(&mut self, r: Register) {
        let r = r.full_register();
        if r != Register::None && !self.contains(r) && self.n < self.set.len() {
            self.set[self.n] = r;
            self.n += 1;
        }
    }
    fn remove(&mut self, r: Register) {
        let r = r.full_register();
        if let Some(p) = self.set[..self.n].iter().position(|&x| x == r) {
            self.set[p] = self.set[self.n - 1];
            self.n -= 1;
        }
    }
}

/// The register `insn` writes as its first operand, if any.
fn destination(insn: &Instruction) -> Option<Register> {
    (insn.op_count() > 0
        && insn.op_kind(0) == iced_x86::OpKind::Register
        && soft::writes_register(insn, insn.op0_register()))
    .then(|| insn.op0_register().full_register())
}

/// For each instruction of `body`, whether its address depends on the
/// result of the load at `a` within one turn of the loop (from `a` on,
/// around the back edge, up to `a`): bit `i` of the mask.
fn dependent_on(body: &Body, a: usize) -> u64 {
    let insns = body.insns();
    let mut tainted = Regs::default();
    if let Some(d) = destination(&insns[a]) {
        tainted.insert(d);
    }
    let mut mask = 0u64;
    for k in 1..insns.len() {
        let i = (a + k) % insns.len();
        let insn = &insns[i];
        let address = soft::has_memory_operand(insn)
            && (tainted.contains(insn.memory_base()) || tainted.contains(insn.memory_index()));
        if address {
            mask |= 1 << i;
        }
        let (values, n) = blame::value_sources(insn);
        let reads = address || values[..n].iter().any(|&r| tainted.contains(r));
        if let Some(d) = destination(insn) {
            if reads {
                tainted.insert(d);
            } else {
                tainted.remove(d);
            }
        }
    }
    mask
}

/// For each instruction of `body`, whether its address registers hold a
/// value derived from a load of the body (bit `i` of the mask): a
/// register a load wrote, or one computed from such a register, in this
/// iteration or carried from the last one.
fn load_derived(body: &Body) -> u64 {
    let insns = body.insns();
    let mut derived = Regs::default();
    let mut mask = 0u64;
    // Twice around the loop: the second turn sees what the first carried.
    for turn in 0..2 {
        for (i, insn) in insns.iter().enumerate() {
            let memory = soft::has_memory_operand(insn);
            let address = memory
                && (derived.contains(insn.memory_base()) || derived.contains(insn.memory_index()));
            if turn == 1 && address {
                mask |= 1 << i;
            }
            let Some(d) = destination(insn) else {
                continue;
            };
            let (values, n) = blame::value_sources(insn);
            let from_load = (memory && blame::loads(insn) && !blame::stack_slot(insn))
                || address
                || values[..n].iter().any(|&r| derived.contains(r));
            if from_load {
                derived.insert(d);
            } else {
                derived.remove(d);
            }
        }
    }
    mask
}

/// The loads of `body` a sample blamed on its load at `a` is shared
/// with, `a` itself first, and their weights; `trivial(i)` says the
/// access of body instruction `i` never stalls (a compiler constant, a
/// scalar stack slot, the thread's control block). Empty when `a` is not
/// a load or no other load of the body brings traffic.
pub fn members(
    body: &Body,
    a: usize,
    trivial: &dyn Fn(usize) -> bool,
) -> ([Member; MAX_MEMBERS], usize) {
    let mut out = [Member::default(); MAX_MEMBERS];
    let insns = body.insns();
    let blamed = &insns[a];
    if !blame::loads(blamed) || soft::memory_kind(blamed).is_some_and(|k| k.stores()) {
        return (out, 0);
    }
    let own = match stride(body, blamed) {
        Some(s) if s != 0 => stream_weight(s),
        _ => LINE,
    };
    out[0] = Member { at: a, weight: own };
    let mut n = 1;
    let dependent = dependent_on(body, a);
    let gathered = load_derived(body);
    let same_stream = |x: &Instruction, y: &Instruction| {
        x.memory_base() == y.memory_base()
            && x.memory_index() == y.memory_index()
            && x.memory_index_scale() == y.memory_index_scale()
            && x.memory_displacement64()
                .abs_diff(y.memory_displacement64())
                < LINE
    };
    for (i, insn) in insns.iter().enumerate() {
        if i == a
            || n == MAX_MEMBERS
            || dependent & (1 << i) != 0
            || !blame::loads(insn)
            || soft::memory_kind(insn).is_some_and(|k| k.stores())
            || trivial(i)
        {
            continue;
        }
        let weight = match stride(body, insn) {
            Some(0) => continue,
            Some(s) => stream_weight(s),
            // An address computed from loaded values (a gather, a
            // pointer chase): no cost known from the code.
            None if gathered & (1 << i) != 0 => continue,
            // Computed by arithmetic from the loop's counters (`k ^
            // flip`, `i * n + j`): its own bytes a iteration.
            None => (insn.memory_size().size() as u64).clamp(1, LINE),
        };
        if same_stream(insn, blamed) || out[1..n].iter().any(|m| same_stream(insn, &insns[m.at])) {
            continue;
        }
        out[n] = Member { at: i, weight };
        n += 1;
    }
    if n == 1 {
        return (out, 0);
    }
    (out, n)
}

/// The member a sample goes to: `turn` (the thread's sample count) drawn
/// through the golden-ratio sequence, so that over many samples each
/// member gets its weight's share, evenly spread.
pub fn choose(members: &[Member], turn: u64) -> Option<Member> {
    let total: u64 = members.iter().map(|m| m.weight).sum();
    if total == 0 {
        return None;
    }
    let fraction = turn.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    let mut pick = (fraction * total) >> 32;
    for m in members {
        if pick < m.weight {
            return Some(*m);
        }
        pick -= m.weight;
    }
    members.last().copied()
}

#[cfg(test)]
mod tests;
