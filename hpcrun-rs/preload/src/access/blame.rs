//! Blame: which instruction a `mem:soft` sample's period belongs to.
//!
//! A timer sample interrupts a thread at the instruction after the last one
//! that retired (docs/ARCHITECTURE.md, "Skid"). That instruction is often
//! not the one that stalled: on AMD Zen several instructions retire
//! together, so the IP lands one past the *consumer* of a load (`movdqu
//! (%rax),%xmm2; paddq %xmm2,%xmm0` -> after the `paddq`), or past the
//! loop's compare and branch. GPU PC-sampling advisors (GPA, LEO) shift
//! the blame from the waiting instruction to the one that produced its
//! operands by backward slicing over register def-use; this module does
//! the same over the straight-line code that ran before the IP.
//!
//! The input is a [`Window`]: the last instructions of the basic block
//! that ended at the sampled IP, in execution order, the last one being
//! the *landed* instruction (the one that retired last). At a loop head
//! that is the loop's back-edge branch and the window is the loop body,
//! not the padding before the label. [`blame`] then applies, in order:
//!
//! 0. the landed instruction is a call: the IP is its return address, the
//!    callee's `ret` retired last: **other**;
//! 1. the landed instruction is a divide or square root: **compute**
//!    (its own latency dominates, memory operand or not);
//! 2. it accesses memory and the operand is not a compiler constant
//!    (`constant`: RIP-relative, no index register, read-only, not a
//!    named variable), a scalar stack slot or a scalar of the thread's
//!    control block (`%fs:0x28`): the sample is that access's
//!    (**landed**);
//! 3. otherwise walk back through register data flow: for every register
//!    the landed instruction reads (a conditional branch reads those of
//!    the compare before it), find the instruction that wrote it in the
//!    window; a load ends the walk there (**walked back**, or **split**
//!    between several loads), cheap integer and floating-point arithmetic
//!    is walked through, a divide or square root stops it, and a register
//!    no instruction of the window wrote (a loop-carried accumulator, or a
//!    value from before the block) is not followed;
//! 4. no load found: if the chain went through floating-point arithmetic
//!    or a divide, the period is **compute** (a dependent FP chain);
//! 5. else the nearest memory access at most [`RETIRE_GROUP`]
//!    instructions back, unless arithmetic comes first (**retire
//!    group**): on a wide-retiring core the instructions after a stalled
//!    load retire in the same cycle it does;
//! 6. else the period is **other** work (not memory).
//!
//! [`address_registers`] then says where the blamed access's base and
//! index values are after the landed instruction: in their registers, in
//! a register they were copied from, in memory they were loaded from
//! ([`Reload`]), or computed by an `add` or `lea` from such values
//! ([`Sum`]); it searches the block's last [`HISTORY`] instructions, more
//! than the blame's [`WINDOW`].
//!
//! No allocation, no lock: this runs in the signal handler.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};

use crate::access::soft;

/// Instructions kept before the sampled IP for the blame.
pub const WINDOW: usize = 16;

/// Instructions of the block kept for the recovery of an address: the
/// load or copy that set a blamed access's base can be older than the
/// [`WINDOW`] the blame looks at (LAMMPS's pair loop loads `x[j]` and
/// then runs 20 instructions of FP arithmetic on it before the compare).
pub const HISTORY: usize = 32;

/// How far back the retire-group rule looks for a memory access.
pub const RETIRE_GROUP: usize = 6;

/// Most loads a sample is split between.
pub const MAX_LOADS: usize = 4;

/// Instructions searched forward from a loop head for its back edge.
const BACK_EDGE_SEARCH: usize = 96;

/// The straight-line instructions that ran up to the sampled IP, oldest
/// first; the last one is the landed instruction. Holds up to [`HISTORY`]
/// of them; the blame sees the last [`WINDOW`] ([`Window::insns`]).
#[derive(Clone, Copy)]
pub struct Window {
    insns: [Instruction; HISTORY],
    len: usize,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            insns: [Instruction::default(); HISTORY],
            len: 0,
        }
    }
}

impl Window {
    /// A window holding only `insn` (when the code before it is unknown).
    pub fn single(insn: Instruction) -> Window {
        let mut w = Window::default();
        w.insns[0] = insn;
        w.len = 1;
        w
    }

    /// The last [`WINDOW`] instructions, oldest first: what the blame
    /// looks at (its indices are into this slice).
    pub fn insns(&self) -> &[Instruction] {
        &self.insns[self.hidden()..self.len]
    }

    /// Every instruction kept, oldest first ([`HISTORY`] at most).
    pub fn history(&self) -> &[Instruction] {
        &self.insns[..self.len]
    }

    /// Instructions kept before the first one of [`Window::insns`].
    fn hidden(&self) -> usize {
        self.len.saturating_sub(WINDOW)
    }

    /// The landed instruction.
    pub fn last(&self) -> Option<&Instruction> {
        self.insns().last()
    }

    /// Decodes `[from, end)` forward, keeping the last [`WINDOW`]
    /// instructions of the last basic block (a branch, call or return
    /// inside the range starts a new one; the range's last instruction may
    /// itself be a branch). `None` unless the decode lands on `end`.
    pub fn decode(code: &[u8], code_start: u64, from: u64, end: u64) -> Option<Window> {
        let start = from.checked_sub(code_start)? as usize;
        let stop = end.checked_sub(code_start)? as usize;
        let bytes = code.get(start..stop)?;
        let mut decoder = Decoder::with_ip(64, bytes, from, DecoderOptions::NONE);
        let mut w = Window::default();
        let mut insn = Instruction::default();
        let mut cut = false;
        // A ring of the block's last HISTORY instructions (`n` decoded
        // since the block began), put in order once at the end.
        let mut n = 0usize;
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            if insn.is_invalid() {
                return None;
            }
            if cut {
                n = 0;
            }
            w.insns[n % HISTORY] = insn;
            n += 1;
            cut = insn.flow_control() != FlowControl::Next;
        }
        if n > HISTORY {
            w.insns.rotate_left(n % HISTORY);
        }
        w.len = n.min(HISTORY);
        (decoder.ip() == end && w.len > 0).then_some(w)
    }
}

/// The loop branch after `head` that jumps back to it, if `head` is a
/// loop head: searched forward over at most [`BACK_EDGE_SEARCH`]
/// instructions, stopping at a return or an indirect jump.
pub fn back_edge(code: &[u8], code_start: u64, head: u64) -> Option<Instruction> {
    let off = head.checked_sub(code_start)? as usize;
    let bytes = code.get(off..)?;
    let mut decoder = Decoder::with_ip(64, bytes, head, DecoderOptions::NONE);
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
            FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
                if insn.near_branch_target() == head =>
            {
                return Some(insn);
            }
            FlowControl::Return | FlowControl::IndirectBranch | FlowControl::Exception => {
                return None
            }
            _ => {}
        }
    }
    None
}

/// True if control cannot fall through `insn` to the next address (or it
/// is padding): then the code at the next address is reached by a jump.
pub fn no_fall_through(insn: &Instruction) -> bool {
    matches!(insn.mnemonic(), Mnemonic::Nop | Mnemonic::Int3)
        || matches!(
            insn.flow_control(),
            FlowControl::UnconditionalBranch
                | FlowControl::Return
                | FlowControl::IndirectBranch
                | FlowControl::Exception
        )
}

/// How a sample was attributed. The discriminant indexes the per-thread
/// counters (`threads::Stats::attribution`) and [`Rule::NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The landed instruction accesses memory.
    Landed = 0,
    /// A load found by walking back from the landed instruction.
    WalkedBack = 1,
    /// Several loads feed the landed instruction: the sample goes to one
    /// of them in turn.
    Split = 2,
    /// The nearest memory access of the retire group before a cheap
    /// instruction that consumes no load.
    RetireGroup = 3,
    /// A divide or square root, or a floating-point chain fed by no load.
    Compute = 4,
    /// The landed instruction's only memory operand is a compiler
    /// constant (read-only data at a RIP-relative address).
    Constant = 5,
    /// No memory access and no arithmetic chain: other work.
    Other = 6,
    /// A memory access whose address could not be recovered.
    Unrecovered = 7,
}

impl Rule {
    pub const COUNT: usize = 8;
    /// Names in the profile (`SampleStats::attribution`).
    pub const NAMES: [&'static str; Rule::COUNT] = [
        "landed",
        "walked_back",
        "split",
        "retire_group",
        "compute",
        "constant",
        "other",
        "unrecovered",
    ];
}

/// What [`blame`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blame {
    pub rule: Rule,
    /// Window indices of the memory accesses the period belongs to (the
    /// landed one, or the loads walked back to), oldest first.
    pub loads: [u8; MAX_LOADS],
    pub n: u8,
    /// Instructions between the blamed access and the landed one.
    pub distance: u8,
}

impl Blame {
    fn of(rule: Rule) -> Blame {
        Blame {
            rule,
            loads: [0; MAX_LOADS],
            n: 0,
            distance: 0,
        }
    }

    /// The blamed accesses' window indices.
    pub fn accesses(&self) -> &[u8] {
        &self.loads[..self.n as usize]
    }
}

/// Divides and square roots: tens of cycles of their own.
pub fn long_latency(insn: &Instruction) -> bool {
    use Mnemonic::*;
    matches!(
        insn.mnemonic(),
        Div | Idiv
            | Divsd
            | Divss
            | Divpd
            | Divps
            | Vdivsd
            | Vdivss
            | Vdivpd
            | Vdivps
            | Sqrtsd
            | Sqrtss
            | Sqrtpd
            | Sqrtps
            | Vsqrtsd
            | Vsqrtss
            | Vsqrtpd
            | Vsqrtps
            | Fdiv
            | Fdivp
            | Fdivr
            | Fdivrp
            | Fsqrt
    )
}

/// Floating-point arithmetic with a latency of a few cycles (add, mul,
/// fused multiply-add): walked through, and the mark of an FP chain.
pub fn fp_arith(insn: &Instruction) -> bool {
    use Mnemonic::*;
    let m = insn.mnemonic();
    matches!(
        m,
        Addsd
            | Addss
            | Addpd
            | Addps
            | Subsd
            | Subss
            | Subpd
            | Subps
            | Mulsd
            | Mulss
            | Mulpd
            | Mulps
            | Vaddsd
            | Vaddss
            | Vaddpd
            | Vaddps
            | Vsubsd
            | Vsubss
            | Vsubpd
            | Vsubps
            | Vmulsd
            | Vmulss
            | Vmulpd
            | Vmulps
            | Haddpd
            | Haddps
            | Vhaddpd
            | Vhaddps
            | Fadd
            | Faddp
            | Fmul
            | Fmulp
            | Fsub
            | Fsubp
    ) || fma(m)
}

fn fma(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Vfmadd132sd
            | Vfmadd213sd
            | Vfmadd231sd
            | Vfmadd132pd
            | Vfmadd213pd
            | Vfmadd231pd
            | Vfmadd132ss
            | Vfmadd213ss
            | Vfmadd231ss
            | Vfmadd132ps
            | Vfmadd213ps
            | Vfmadd231ps
            | Vfmsub132sd
            | Vfmsub213sd
            | Vfmsub231sd
            | Vfmsub132pd
            | Vfmsub213pd
            | Vfmsub231pd
            | Vfnmadd132sd
            | Vfnmadd213sd
            | Vfnmadd231sd
            | Vfnmadd132pd
            | Vfnmadd213pd
            | Vfnmadd231pd
    )
}

/// Instructions whose first (register) operand is only written, never
/// read: moves, loads into a register, conversions, `lea`.
fn writes_only_first(insn: &Instruction) -> bool {
    use Mnemonic::*;
    let m = insn.mnemonic();
    if insn.op_count() >= 3 && !fma(m) && insn.encoding() != iced_x86::EncodingKind::Legacy {
        // VEX/EVEX three-operand forms: `vaddsd %xmm2,%xmm1,%xmm0`.
        return true;
    }
    // Moves into a register (the mnemonics that are pure stores with a
    // memory destination), plus widening moves, `lea`, conversions, `pop`.
    soft::is_pure_store(m)
        || matches!(
            m,
            Movzx
                | Movsx
                | Movsxd
                | Lea
                | Vbroadcastsd
                | Vbroadcastss
                | Vpbroadcastd
                | Vpbroadcastq
                | Cvtsi2sd
                | Cvtsi2ss
                | Cvttsd2si
                | Cvtsd2ss
                | Cvtss2sd
                | Vcvtsi2sd
                | Vcvttsd2si
                | Pop
        )
}

/// The registers `insn` reads as values (not as an address), full-width,
/// up to four. The memory operand's address registers are not included.
pub(crate) fn value_sources(insn: &Instruction) -> ([Register; 4], usize) {
    let mut out = [Register::None; 4];
    let mut n = 0;
    let zeroing = insn.op_count() == 2
        && insn.op_kind(0) == OpKind::Register
        && insn.op_kind(1) == OpKind::Register
        && insn.op0_register() == insn.op1_register()
        && matches!(
            insn.mnemonic(),
            Mnemonic::Xor | Mnemonic::Pxor | Mnemonic::Xorps | Mnemonic::Xorpd | Mnemonic::Sub
        );
    if zeroing {
        return (out, 0);
    }
    for i in 0..insn.op_count() {
        if insn.op_kind(i) != OpKind::Register {
            continue;
        }
        if i == 0 && writes_only_first(insn) {
            continue;
        }
        let r = insn.op_register(i).full_register();
        if r == Register::None || r == Register::RSP || r == Register::RIP {
            continue;
        }
        if n < out.len() && !out[..n].contains(&r) {
            out[n] = r;
            n += 1;
        }
    }
    (out, n)
}

/// Queues the value sources of `insn` (at window index `at`).
fn add_sources(
    insn: &Instruction,
    at: usize,
    work: &mut [(Register, usize); 16],
    nwork: &mut usize,
) {
    let (regs, n) = value_sources(insn);
    for &r in &regs[..n] {
        if *nwork < work.len() {
            work[*nwork] = (r, at);
            *nwork += 1;
        }
    }
}

/// True if `insn` accesses memory through an explicit operand (not `lea`,
/// `nop`, string or gather instructions).
pub fn accesses_memory(insn: &Instruction) -> bool {
    soft::has_memory_operand(insn)
}

/// True if `insn` reads memory (a load, a read-modify-write, a compare or
/// an arithmetic instruction with a memory source).
pub fn loads(insn: &Instruction) -> bool {
    soft::memory_kind(insn).is_some_and(|k| k.loads())
}

/// True if the memory operand of `insn` is RIP-relative without an index:
/// a compiler constant when the target is read-only data
/// (`is_constant` decides from the absolute address).
pub fn rip_relative_target(insn: &Instruction) -> Option<u64> {
    (accesses_memory(insn)
        && insn.memory_base() == Register::RIP
        && insn.memory_index() == Register::None)
        .then(|| insn.memory_displacement64())
}

/// True if `insn`'s memory operand is a scalar stack slot: `disp(%rsp)`,
/// no index (a local or a spill; large local arrays are indexed).
pub fn stack_slot(insn: &Instruction) -> bool {
    accesses_memory(insn)
        && insn.memory_base() == Register::RSP
        && insn.memory_index() == Register::None
}

/// True if `insn`'s memory operand is a scalar of the thread's own
/// control block or static TLS: `%fs:disp`, no base, no index (the stack
/// protector's canary `%fs:0x28`, read at the entry and exit of every
/// protected function; the thread pointer `%fs:0`; a `__thread`
/// scalar). Like a scalar stack slot, the running thread touches it all
/// the time: an L1 hit.
pub fn thread_slot(insn: &Instruction) -> bool {
    accesses_memory(insn)
        && insn.memory_segment() == Register::FS
        && insn.memory_base() == Register::None
        && insn.memory_index() == Register::None
}

/// The blame for the sample that landed after `window`'s last
/// instruction. `is_constant(addr)` says whether a RIP-relative load
/// target is read-only data (not a variable); `is_local(i)` whether the
/// access of the window's instruction `i` went to the top of the
/// thread's own stack (a local array or a caller's, reached through a
/// pointer: an L1 hit, like a scalar stack slot).
pub fn blame(
    window: &Window,
    is_constant: &dyn Fn(u64) -> bool,
    is_local: &dyn Fn(usize) -> bool,
) -> Blame {
    let insns = window.insns();
    let Some(landed) = insns.last() else {
        return Blame::of(Rule::Other);
    };
    let last = insns.len() - 1;
    // The IP is a call's return address: the callee's `ret` retired last,
    // not the call (after the call itself the IP would be the callee's
    // entry) and not the loads before it.
    if matches!(
        landed.flow_control(),
        FlowControl::Call | FlowControl::IndirectCall
    ) {
        return Blame::of(Rule::Other);
    }
    if long_latency(landed) {
        return Blame::of(Rule::Compute);
    }
    let constant = |insn: &Instruction| {
        loads(insn)
            && !soft::memory_kind(insn).is_some_and(|k| k.stores())
            && rip_relative_target(insn).is_some_and(is_constant)
    };
    // Operands that never stall: compiler constants, scalar locals and
    // spills at a fixed offset from the stack pointer (no index), scalars
    // of the thread's control block (`%fs:0x28`), and other accesses to
    // the top of the thread's own stack, which the thread itself touched
    // moments ago: L1 hits.
    let constant_operand = |at: usize| {
        constant(&insns[at]) || stack_slot(&insns[at]) || thread_slot(&insns[at]) || is_local(at)
    };
    let mut saw_constant = false;
    if accesses_memory(landed) {
        if !constant_operand(last) {
            let mut b = Blame::of(Rule::Landed);
            b.loads[0] = last as u8;
            b.n = 1;
            return b;
        }
        saw_constant = constant(landed);
    }

    // Walk back through the data flow.
    let mut found = Blame::of(Rule::WalkedBack);
    let mut arithmetic = fp_arith(landed);
    let mut divides = false;
    // Registers to resolve: (register, the window index that reads it).
    let mut work: [(Register, usize); 16] = [(Register::None, 0); 16];
    let mut nwork = 0;
    add_sources(landed, last, &mut work, &mut nwork);
    // A conditional branch consumes the flags of the compare before it.
    if landed.flow_control() == FlowControl::ConditionalBranch && last > 0 {
        let cmp = &insns[last - 1];
        if matches!(cmp.mnemonic(), Mnemonic::Cmp | Mnemonic::Test) {
            if accesses_memory(cmp) && !constant_operand(last - 1) {
                found.loads[0] = (last - 1) as u8;
                found.n = 1;
                found.distance = 1;
                return found;
            }
            add_sources(cmp, last - 1, &mut work, &mut nwork);
        }
    }
    let mut visited = [false; WINDOW];
    let mut i = 0;
    while i < nwork {
        let (reg, at) = work[i];
        i += 1;
        let Some(p) = (0..at)
            .rev()
            .find(|&p| soft::writes_register(&insns[p], reg))
        else {
            continue; // loop-carried or from before the window
        };
        if visited[p] {
            continue;
        }
        visited[p] = true;
        let producer = &insns[p];
        if long_latency(producer) {
            arithmetic = true;
            divides = true;
            continue;
        }
        if loads(producer) && !constant_operand(p) {
            if (found.n as usize) < MAX_LOADS {
                found.loads[found.n as usize] = p as u8;
                found.n += 1;
            }
            continue;
        }
        if fp_arith(producer) {
            arithmetic = true;
        }
        if matches!(producer.flow_control(), FlowControl::Next) {
            add_sources(producer, p, &mut work, &mut nwork);
        }
    }
    // A divide or square root on one input: its latency (13-20 cycles and
    // more, not pipelined) is what the landed instruction waits for, not
    // the loads of the other inputs, which issued long before in the block.
    if found.n > 0 && divides {
        return Blame::of(Rule::Compute);
    }
    if found.n > 0 {
        // Oldest first, so the choice among them is stable.
        let loads = &mut found.loads[..found.n as usize];
        loads.sort_unstable();
        found.distance = (last - loads[loads.len() - 1] as usize) as u8;
        if found.n > 1 {
            found.rule = Rule::Split;
        }
        return found;
    }
    if saw_constant {
        return Blame::of(Rule::Constant);
    }
    if arithmetic {
        return Blame::of(Rule::Compute);
    }
    // The retire group: the nearest memory access a few instructions
    // back, unless arithmetic comes first.
    for d in 1..=RETIRE_GROUP.min(last) {
        let insn = &insns[last - d];
        if long_latency(insn) {
            return Blame::of(Rule::Compute);
        }
        if accesses_memory(insn) && !constant_operand(last - d) {
            let mut b = Blame::of(Rule::RetireGroup);
            b.loads[0] = (last - d) as u8;
            b.n = 1;
            b.distance = d as u8;
            return b;
        }
        if fp_arith(insn) {
            return Blame::of(Rule::Compute);
        }
    }
    Blame::of(Rule::Other)
}

mod operands;

pub(crate) use operands::advance;
pub use operands::{address_registers, Operand, Reload, Sum, Term};

#[cfg(test)]
mod tests;
