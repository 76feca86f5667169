//! Where the blamed access's address values stand after the landed
//! instruction: [`address_registers`] searches the block's last
//! [`HISTORY`](super::HISTORY) instructions for each of the access's base
//! and index values, and finds it in its register (minus the constant a
//! loop advanced it by), in a register it was copied from, in memory it
//! was loaded from ([`Reload`]), or computed by an `add` or `lea` from
//! such values ([`Sum`]). The sample handler reads the access's data
//! address again from these.
//!
//! No allocation, no lock: this runs in the signal handler.

use iced_x86::{Instruction, Mnemonic, OpKind, Register};

use super::{stack_slot, Window};
use crate::access::soft;

/// Where the blamed access's address registers stand after the landed
/// instruction: each of base and index is intact (no instruction from the
/// access on wrote it), copied (a `mov` before the access copied it from a
/// register still intact), or lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// No register (absolute or RIP-relative).
    None,
    /// Its value is in this register now, minus this constant (a loop's
    /// induction variable advanced by `add $16,%rax` after the access).
    In(Register, i64),
    /// It was overwritten after the access, but its value is still in
    /// memory, at an address the registers give again (see [`reload`]).
    Loaded(Reload),
    /// It was overwritten after the access, but it was computed in the
    /// window from values that can still be had (see [`sum`]).
    Sum(Sum),
    Lost,
}

/// One input of a [`Sum`]: as in [`Operand`], without sums of sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Term {
    None,
    In(Register, i64),
    Loaded(Reload),
}

/// A register's lost value that an `add` or `lea` of the window computed:
/// `terms[0] + terms[1] * scale + disp` (`lea (%rax,%rbx,8),%rax` after
/// `mov table(%rip),%rax`: an entry of an array of pointers; `add
/// %rsi,%rax` after `mov 0x28(%r14),%rax`: a member pointer plus an
/// offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sum {
    pub terms: [Term; 2],
    pub scale: u8,
    pub disp: i64,
}

/// A word in memory that holds a register's lost value: at
/// `B + (index - index_delta) * scale + disp`, where B is
/// `base - base_delta` or, with `base_deref`, the word at `base +
/// base_deref`; registers read from the interrupted context
/// (`Register::None`: absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reload {
    pub base: Register,
    pub base_delta: i64,
    pub base_deref: Option<i64>,
    pub index: Register,
    pub index_delta: i64,
    pub scale: u8,
    pub disp: i64,
}

/// The constant `insn` adds to `reg` if it only advances it (`add`/`sub`
/// an immediate, `inc`, `dec`, `lea disp(reg),reg`); `None` for any other
/// write.
pub(crate) fn advance(insn: &Instruction, reg: Register) -> Option<i64> {
    let full = reg.full_register();
    if insn.op_count() == 0
        || insn.op_kind(0) != OpKind::Register
        || insn.op0_register().full_register() != full
        || !insn.op0_register().is_gpr64()
    {
        return None;
    }
    let imm = || {
        (insn.op_count() == 2)
            .then(|| match insn.op_kind(1) {
                OpKind::Immediate8to64 | OpKind::Immediate32to64 | OpKind::Immediate8 => {
                    Some(insn.immediate(1) as i64)
                }
                _ => None,
            })
            .flatten()
    };
    match insn.mnemonic() {
        Mnemonic::Add => imm(),
        Mnemonic::Sub => imm().map(|v| -v),
        Mnemonic::Inc => Some(1),
        Mnemonic::Dec => Some(-1),
        Mnemonic::Lea
            if insn.memory_base().full_register() == full
                && insn.memory_index() == Register::None =>
        {
            Some(insn.memory_displacement64() as i64)
        }
        _ => None,
    }
}

/// If the window's instruction `p` loads a 64-bit register from memory
/// (`mov disp(base,index,scale),reg`) at an address that can be computed
/// again at the sample, where the loaded value still is: the registers of
/// that address are intact since (or only advanced by constants), the
/// load did not replace one of them, and nothing after it may have
/// written the word. For a frame slot (`disp(%rbp)` or `disp(%rsp)`, no
/// index: gcc keeps a loop's array pointers there when registers run
/// out) that means no later store to the same slot; for any other word
/// (`mov (%r13,%rcx,8),%rdx`: a pointer read from an array of pointers),
/// no later store at all except to scalar stack slots.
fn reload(insns: &[Instruction], p: usize) -> Option<Operand> {
    let load = &insns[p];
    let is_load = load.mnemonic() == Mnemonic::Mov
        && load.op_count() == 2
        && load.op_kind(0) == OpKind::Register
        && load.op0_register().is_gpr64()
        && load.op_kind(1) == OpKind::Memory
        && !matches!(load.memory_segment(), Register::FS | Register::GS);
    if !is_load {
        return None;
    }
    let dest = load.op0_register().full_register();
    let later = &insns[p + 1..];
    let stored_after = |q: usize| {
        insns[q + 1..]
            .iter()
            .any(|i| soft::memory_kind(i).is_some_and(|k| k.stores()) && !stack_slot(i))
    };
    // A load that replaced its own base (`mov 0x398(%rbp),%rax` then
    // `mov (%rax,%r12,1),%rax`: a member pointer, then a row of a 2-D
    // table): the base is itself the word its producer loaded.
    let mut base_deref = None;
    let mut base_reg = load.memory_base();
    if base_reg.is_gpr64() && base_reg.full_register() == dest {
        let q = (0..p)
            .rev()
            .find(|&q| soft::writes_register(&insns[q], dest))?;
        let producer = &insns[q];
        let simple = producer.mnemonic() == Mnemonic::Mov
            && producer.op_count() == 2
            && producer.op_kind(0) == OpKind::Register
            && producer.op0_register().full_register() == dest
            && producer.op0_register().is_gpr64()
            && producer.op_kind(1) == OpKind::Memory
            && producer.memory_index() == Register::None
            && producer.memory_base().is_gpr64()
            && producer.memory_base() != dest
            && !matches!(producer.memory_segment(), Register::FS | Register::GS);
        let from = producer.memory_base();
        if !simple
            || insns[q + 1..]
                .iter()
                .any(|i| soft::writes_register(i, from))
            || stored_after(q)
        {
            return None;
        }
        base_deref = Some(producer.memory_displacement64() as i64);
        base_reg = from;
    }
    let locate = |reg: Register| -> Option<(Register, i64)> {
        if reg == Register::None || reg == Register::RIP || reg == Register::EIP {
            return Some((Register::None, 0));
        }
        if !reg.is_gpr64() || reg.full_register() == dest {
            return None;
        }
        let mut delta = 0i64;
        for i in later {
            if soft::writes_register(i, reg) {
                delta = delta.wrapping_add(advance(i, reg)?);
            }
        }
        Some((reg, delta))
    };
    let (base, base_delta) = locate(base_reg)?;
    let (index, index_delta) = locate(load.memory_index())?;
    let disp = load.memory_displacement64() as i64;
    let frame_slot = base_deref.is_none()
        && matches!(base, Register::RBP | Register::RSP)
        && index == Register::None;
    let overwritten = later.iter().any(|i| {
        soft::memory_kind(i).is_some_and(|k| k.stores())
            && if frame_slot {
                i.memory_base() == base
                    && i.memory_index() == Register::None
                    && i.memory_displacement64() as i64 == disp
            } else {
                !stack_slot(i)
            }
    });
    (!overwritten).then_some(Operand::Loaded(Reload {
        base,
        base_delta,
        base_deref,
        index,
        index_delta,
        scale: load.memory_index_scale() as u8,
        disp,
    }))
}

/// Where the value `reg` had just before the instruction at `at` ran is
/// now: in a register (intact, or only advanced by constants since), in
/// the register it was copied from, in the memory it was loaded from
/// ([`reload`]) or, with `sums`, computed from such values ([`sum`]).
fn value_before(insns: &[Instruction], at: usize, reg: Register, sums: bool) -> Operand {
    if reg == Register::None || reg == Register::RIP || reg == Register::EIP {
        return Operand::None;
    }
    // Intact, or only advanced by constants since.
    let mut delta = 0i64;
    let mut intact = true;
    for i in &insns[at..] {
        if soft::writes_register(i, reg) {
            match advance(i, reg) {
                Some(d) => delta = delta.wrapping_add(d),
                None => {
                    intact = false;
                    break;
                }
            }
        }
    }
    if intact {
        return Operand::In(reg, delta);
    }
    let full = reg.full_register();
    let Some(p) = (0..at)
        .rev()
        .find(|&p| soft::writes_register(&insns[p], full))
    else {
        return Operand::Lost;
    };
    // A copy: `mov src, reg` (or its 32-bit form) with `src` intact since.
    let mov = &insns[p];
    let is_copy = matches!(mov.mnemonic(), Mnemonic::Mov | Mnemonic::Movsxd)
        && mov.op_count() == 2
        && mov.op_kind(1) == OpKind::Register
        && mov.op1_register().is_gpr();
    if is_copy {
        let src = mov.op1_register();
        if !insns[p + 1..]
            .iter()
            .any(|i| soft::writes_register(i, src.full_register()))
        {
            return Operand::In(src, 0);
        }
    }
    if let Some(word) = reload(insns, p) {
        return word;
    }
    if sums {
        if let Some(s) = sum(insns, p) {
            return Operand::Sum(s);
        }
    }
    Operand::Lost
}

/// If the instruction at `p` computed its 64-bit destination as a sum
/// (`lea disp(b,i,s),reg`, `add src,reg`, `add $imm,reg`, `sub $imm,reg`)
/// of values that can still be had ([`value_before`] at `p`, without
/// sums), that sum.
fn sum(insns: &[Instruction], p: usize) -> Option<Sum> {
    let insn = &insns[p];
    if insn.op_count() != 2
        || insn.op_kind(0) != OpKind::Register
        || !insn.op0_register().is_gpr64()
    {
        return None;
    }
    let dest = insn.op0_register();
    let term = |r: Register| match value_before(insns, p, r, false) {
        Operand::None => Some(Term::None),
        Operand::In(r, d) => Some(Term::In(r, d)),
        Operand::Loaded(w) => Some(Term::Loaded(w)),
        Operand::Sum(_) | Operand::Lost => None,
    };
    let gpr64 = |r: Register| r == Register::None || r.is_gpr64();
    match (insn.mnemonic(), insn.op_kind(1)) {
        (Mnemonic::Lea, OpKind::Memory)
            if gpr64(insn.memory_base()) && gpr64(insn.memory_index()) =>
        {
            // A RIP-relative `lea`'s displacement is the absolute address.
            Some(Sum {
                terms: [term(insn.memory_base())?, term(insn.memory_index())?],
                scale: insn.memory_index_scale() as u8,
                disp: insn.memory_displacement64() as i64,
            })
        }
        (Mnemonic::Lea, OpKind::Memory) if insn.memory_base() == Register::RIP => Some(Sum {
            terms: [Term::None, term(insn.memory_index())?],
            scale: insn.memory_index_scale() as u8,
            disp: insn.memory_displacement64() as i64,
        }),
        (Mnemonic::Add, OpKind::Register) if insn.op1_register().is_gpr64() => Some(Sum {
            terms: [term(dest)?, term(insn.op1_register())?],
            scale: 1,
            disp: 0,
        }),
        (Mnemonic::Add | Mnemonic::Sub, OpKind::Immediate8to64 | OpKind::Immediate32to64) => {
            let imm = insn.immediate(1) as i64;
            Some(Sum {
                terms: [term(dest)?, Term::None],
                scale: 1,
                disp: if insn.mnemonic() == Mnemonic::Sub {
                    imm.wrapping_neg()
                } else {
                    imm
                },
            })
        }
        _ => None,
    }
}

/// The registers holding the base and index values the access at window
/// index `at` used, as seen after the landed instruction (the whole
/// [`Window::history`] is searched for the loads, copies and sums that
/// set them).
pub fn address_registers(window: &Window, at: usize) -> (Operand, Operand) {
    let insns = window.history();
    let at = at + window.hidden();
    let access = &insns[at];
    (
        value_before(insns, at, access.memory_base(), true),
        value_before(insns, at, access.memory_index(), true),
    )
}
