//! The stride of a memory access, from the decoded code around it.
//!
//! Samples of one instruction are milliseconds apart, so the delta between
//! two sampled addresses is the true stride times an unknown number of
//! iterations, plus whatever the outer loops moved (in abc's C walk: a
//! random multiple of 320000 plus multiples of 1600 and 8). The loop itself
//! says more: [`static_stride`] finds the innermost loop around the
//! instruction (the first backward branch after it that jumps to or before
//! it), adds up how much each iteration moves the operand's base and index
//! registers (`add`/`sub`/`inc`/`dec`/`lea` by constants, or by registers
//! the loop never writes, read from the interrupted context), and divides
//! by the unroll factor (accesses through the same registers whose offsets
//! split the step evenly, like `movsd (%rdx)` and `movhpd -0x4e200(%rdx)`
//! around `add $0x9c400,%rdx`). A contiguous vector access (`movupd` moving
//! 16 bytes by 16) walks its elements one by one: its stride is the
//! element size. Anything else that writes an address register in the
//! loop (a load: pointer chase, indirection) means the address is not an
//! induction variable: no stride (the sampled deltas classify it instead).
//! No allocation: fixed arrays, a bounded number of decodes.

use iced_x86::{FlowControl, Instruction, Mnemonic, OpKind, Register};

use crate::access::soft::{self, Regs};

/// Instructions scanned after the access for the loop's back edge.
const MAX_SCAN: usize = 64;
/// Largest loop body analysed (instructions).
const MAX_BODY: usize = 256;
/// Distinct offsets considered for the unroll factor.
const MAX_OFFSETS: usize = 16;

/// A stride the decoder derived: signed bytes per access, and the size of
/// one element of the operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stride {
    pub bytes: i64,
    pub element: u32,
}

/// Registers that a call may change (System V: caller-saved).
fn caller_saved(reg: Register) -> bool {
    use Register::*;
    matches!(reg, RAX | RCX | RDX | RSI | RDI | R8 | R9 | R10 | R11 | RSP)
}

/// Bit of a general-purpose register in a mask.
fn bit(reg: Register) -> u32 {
    soft::gpr_index(reg).map_or(0, |i| 1 << i)
}

/// True if `insn` may change `reg` (a full 64-bit register).
fn writes(insn: &Instruction, reg: Register) -> bool {
    if soft::writes_register(insn, reg) {
        return true;
    }
    if insn.flow_control() == FlowControl::Call {
        return caller_saved(reg);
    }
    // String instructions move RSI/RDI/RCX.
    insn.is_string_instruction() && matches!(reg, Register::RSI | Register::RDI | Register::RCX)
}

/// A register's value as seen by a 32-bit or 64-bit operation.
fn value_as(v: u64, dest: Register) -> i64 {
    if dest.is_gpr32() {
        v as u32 as i32 as i64
    } else {
        v as i64
    }
}

/// How `insn` changes `reg` (which it writes): `Some(step)` for an
/// induction update, `None` for anything else. `invariant` says which
/// registers the loop never writes (their values in `regs` hold for every
/// iteration).
fn step_of(insn: &Instruction, reg: Register, regs: Option<&Regs>, invariant: u32) -> Option<i64> {
    let dest = (insn.op_count() > 0 && insn.op_kind(0) == OpKind::Register)
        .then(|| insn.op0_register())
        .filter(|r| r.full_register() == reg && (r.is_gpr64() || r.is_gpr32()))?;
    let read = |r: Register| -> Option<i64> {
        let full = r.full_register();
        if !(r.is_gpr64() || r.is_gpr32()) || invariant & bit(full) == 0 {
            return None;
        }
        Some(value_as(regs?.gpr[soft::gpr_index(full)?], r))
    };
    let operand = || -> Option<i64> {
        match insn.op1_kind() {
            OpKind::Register => read(insn.op1_register()),
            _ => Some(value_as(insn.try_immediate(1).ok()?, dest)),
        }
    };
    match insn.mnemonic() {
        Mnemonic::Add if insn.op_count() == 2 => operand(),
        Mnemonic::Sub if insn.op_count() == 2 => operand().map(i64::wrapping_neg),
        Mnemonic::Inc => Some(1),
        Mnemonic::Dec => Some(-1),
        Mnemonic::Lea => {
            let (base, index) = (insn.memory_base(), insn.memory_index());
            let scale = i64::from(insn.memory_index_scale());
            let disp = insn.memory_displacement64() as i64;
            let part = |r: Register, s: i64| -> Option<i64> {
                if r == Register::None {
                    Some(0)
                } else {
                    read(r).map(|v| v.wrapping_mul(s))
                }
            };
            if base.full_register() == reg && index.full_register() != reg {
                Some(disp.wrapping_add(part(index, scale)?))
            } else if index.full_register() == reg && scale == 1 && base.full_register() != reg {
                Some(disp.wrapping_add(part(base, 1)?))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The innermost loop around the instruction at `ip`: `[start, end)`, from
/// the first backward branch after it whose target is at or before it.
fn enclosing_loop(code: &[u8], code_start: u64, ip: u64) -> Option<(u64, u64)> {
    let mut at = ip;
    for _ in 0..MAX_SCAN {
        let insn = soft::decode_at(code, code_start, at)?;
        match insn.flow_control() {
            FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch => {
                let target = insn.near_branch_target();
                if target <= ip {
                    return Some((target, insn.next_ip()));
                }
            }
            FlowControl::Return
            | FlowControl::IndirectBranch
            | FlowControl::Interrupt
            | FlowControl::Exception => return None,
            _ => {}
        }
        at = insn.next_ip();
    }
    None
}

/// Frame slots stored to in a loop that the analysis keeps track of.
const MAX_SLOT_STORES: usize = 8;

/// The frame slot `insn`'s memory operand names (`disp(%rsp)` or
/// `disp(%rbp)`, no index): its base register and displacement.
fn frame_slot(insn: &Instruction) -> Option<(Register, u64)> {
    (soft::has_memory_operand(insn)
        && matches!(insn.memory_base(), Register::RSP | Register::RBP)
        && insn.memory_index() == Register::None)
        .then(|| (insn.memory_base(), insn.memory_displacement64()))
}

/// What the decoder says about the stride of an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// An induction variable: this many bytes per access.
    Stride(Stride),
    /// The loop loads an address register from memory (indirection,
    /// pointer chase): the address depends on data, irregular.
    DataDependent,
    /// No loop found, or an address register changes in a way the
    /// analysis does not follow.
    Unknown,
}

/// The decoder's verdict on the memory access of `insn` (decoded from
/// `code`, which starts at `code_start`): its per-access stride when its
/// address registers are induction variables of its innermost loop.
/// `regs` (the interrupted registers) give the values of loop-invariant
/// step registers (`add %r8,%rdx`); without them only constant steps
/// count.
pub fn static_stride(
    code: &[u8],
    code_start: u64,
    insn: &Instruction,
    regs: Option<&Regs>,
) -> Decoded {
    let mut loaded = false;
    match stride_in_loop(code, code_start, insn, regs, &mut loaded) {
        Some(s) => Decoded::Stride(s),
        None if loaded => Decoded::DataDependent,
        None => Decoded::Unknown,
    }
}

/// See [`static_stride`]; sets `loaded` when an address register was
/// written from memory in the loop.
fn stride_in_loop(
    code: &[u8],
    code_start: u64,
    insn: &Instruction,
    regs: Option<&Regs>,
    loaded: &mut bool,
) -> Option<Stride> {
    soft::memory_operand(insn)?;
    let size = insn.memory_size().size() as i64;
    // The element type: the widest element among the loop's accesses
    // through the same registers whose type means something (gcc stores
    // a vector of doubles with `movups`, "floats": a plain move of 16
    // bytes); 0 when none has one.
    let mut element = element_of(insn);
    let full = |r: Register| match r {
        Register::None => Register::None,
        r => r.full_register(),
    };
    let (base, index) = (full(insn.memory_base()), full(insn.memory_index()));
    if base == Register::RIP || base == Register::EIP || index.is_xmm() || index.is_ymm() {
        return None;
    }
    let scale = i64::from(insn.memory_index_scale());
    let (start, end) = enclosing_loop(code, code_start, insn.ip())?;

    // Pass 1: which registers the loop writes, and which frame slots it
    // stores to; the access must be on an instruction boundary of the body.
    let mut written = 0u32;
    let mut slot_stores = [(Register::None, 0u64); MAX_SLOT_STORES];
    let mut n_slot_stores = 0;
    let mut found = false;
    let mut at = start;
    let mut count = 0;
    while at < end {
        let i = soft::decode_at(code, code_start, at)?;
        count += 1;
        if count > MAX_BODY {
            return None;
        }
        found |= at == insn.ip();
        if soft::memory_kind(&i).is_some_and(|k| k.stores()) && frame_slot(&i).is_some() {
            if n_slot_stores == MAX_SLOT_STORES {
                return None;
            }
            slot_stores[n_slot_stores] = (i.memory_base(), i.memory_displacement64());
            n_slot_stores += 1;
        }
        for r in 0..16 {
            let reg = gpr(r);
            if writes(&i, reg) {
                written |= 1 << r;
            }
        }
        at = i.next_ip();
    }
    if !found || at != end {
        return None;
    }
    let invariant = !written;
    // A register reloaded in the loop from a frame slot the loop never
    // stores to (gcc keeps array pointers there when registers run out:
    // `mov 0x8(%rsp),%rsi` before `movsd %xmm0,(%rsi,%rax,8)`) holds the
    // same value at every iteration: it does not step, and it is not data.
    let invariant_reload = |i: &Instruction, reg: Register| {
        frame_slot(i).is_some_and(|(slot_base, disp)| {
            i.mnemonic() == Mnemonic::Mov
                && i.op_kind(0) == OpKind::Register
                && i.op0_register() == reg
                && reg.is_gpr64()
                && invariant & bit(slot_base) != 0
                && !slot_stores[..n_slot_stores].contains(&(slot_base, disp))
        })
    };
    let (mut base_reloaded, mut index_reloaded) = (false, false);

    // Pass 2: the steps of the address registers, and the offsets of the
    // accesses through the same registers at the start of an iteration.
    let (mut base_step, mut index_step) = (0i64, 0i64);
    let mut offsets = [0i64; MAX_OFFSETS];
    let mut n_offsets = 0;
    let mut at = start;
    while at < end {
        let i = soft::decode_at(code, code_start, at)?;
        if soft::has_memory_operand(&i)
            && full(i.memory_base()) == base
            && full(i.memory_index()) == index
            && i64::from(i.memory_index_scale()) == scale
            && n_offsets < MAX_OFFSETS
        {
            offsets[n_offsets] = (i.memory_displacement64() as i64)
                .wrapping_add(base_step)
                .wrapping_add(index_step.wrapping_mul(scale));
            n_offsets += 1;
            let e = element_of(&i);
            if e <= 8 && e > element {
                element = e;
            }
        }
        for (reg, step, reloaded) in [
            (base, &mut base_step, &mut base_reloaded),
            (index, &mut index_step, &mut index_reloaded),
        ] {
            if reg != Register::None && writes(&i, reg) {
                if invariant_reload(&i, reg) {
                    *step = 0;
                    *reloaded = true;
                    continue;
                }
                let Some(s) = step_of(&i, reg, regs, invariant) else {
                    *loaded = soft::memory_operand(&i).is_some() && i.mnemonic() != Mnemonic::Lea;
                    return None;
                };
                *step = step.wrapping_add(s);
            }
        }
        at = i.next_ip();
    }
    // A reloaded register starts every iteration at the same value.
    if base_reloaded {
        base_step = 0;
    }
    if index_reloaded {
        index_step = 0;
    }
    let step = base_step.wrapping_add(index_step.wrapping_mul(scale));
    let per_access = step / unroll(step, &mut offsets[..n_offsets]);
    // A contiguous access (a vector moving by its own width, or a scalar
    // moving by its size) visits its elements one after the other.
    let bytes = if per_access.abs() == size && element > 0 {
        per_access.signum() * element
    } else {
        per_access
    };
    Some(Stride {
        bytes,
        element: element as u32,
    })
}

/// The unroll factor: how many evenly spaced copies of the access one
/// iteration makes (distinct offsets modulo the step that split it into
/// equal parts), else 1.
fn unroll(step: i64, offsets: &mut [i64]) -> i64 {
    let m = step.unsigned_abs() as i64;
    if m == 0 || offsets.is_empty() {
        return 1;
    }
    for o in offsets.iter_mut() {
        *o = o.rem_euclid(m);
    }
    offsets.sort_unstable();
    let mut n = 0;
    for k in 0..offsets.len() {
        if k == 0 || offsets[k] != offsets[n - 1] {
            offsets[n] = offsets[k];
            n += 1;
        }
    }
    let u = n as i64;
    if u <= 1 || m % u != 0 {
        return 1;
    }
    let spacing = m / u;
    let even = (0..n).all(|k| offsets[k] == offsets[0] + k as i64 * spacing);
    if even {
        u
    } else {
        1
    }
}

/// The size of one element of `insn`'s memory operand: the operand's
/// size for a scalar, the element's for a typed vector (`movupd`: 8), 0
/// for a vector moved without a type (`movups`, `movdqu`: any data).
fn element_of(insn: &Instruction) -> i64 {
    use Mnemonic::*;
    let size = insn.memory_size().size() as i64;
    let element = match insn.memory_size().element_size() as i64 {
        0 => size,
        e => e,
    };
    let untyped = matches!(
        insn.mnemonic(),
        Movups
            | Movaps
            | Movdqu
            | Movdqa
            | Lddqu
            | Movntps
            | Movntdq
            | Movntdqa
            | Vmovups
            | Vmovaps
            | Vmovdqu
            | Vmovdqa
            | Vmovdqu8
            | Vmovdqu16
            | Vmovdqu32
            | Vmovdqu64
            | Vmovdqa32
            | Vmovdqa64
            | Vlddqu
            | Vmovntps
            | Vmovntdq
            | Vmovntdqa
    );
    if untyped && size > 8 {
        0
    } else {
        element
    }
}

/// General-purpose register number `i` (iced's order, RAX = 0).
fn gpr(i: usize) -> Register {
    const ALL: [Register; 16] = [
        Register::RAX,
        Register::RCX,
        Register::RDX,
        Register::RBX,
        Register::RSP,
        Register::RBP,
        Register::RSI,
        Register::RDI,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ];
    ALL[i]
}

/// True if the access `[addr, addr + size)` spans two 64-byte cache lines.
pub fn misaligned(addr: u64, size: u32) -> bool {
    size > 1 && (addr % 64) + u64::from(size) > 64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stride_at(code: &[u8], ip: u64, regs: Option<&Regs>) -> Option<Stride> {
        let insn = soft::decode_at(code, 0x1000, ip).unwrap();
        match static_stride(code, 0x1000, &insn, regs) {
            Decoded::Stride(s) => Some(s),
            _ => None,
        }
    }

    /// abc's inner loop, as gcc 12 -O2 emits it (vectorised by two).
    const ABC: [u8; 53] = [
        0xf2, 0x0f, 0x10, 0x02, // 1000 movsd (%rdx),%xmm0           C
        0x66, 0x0f, 0x10, 0x0c, 0x06, // 1004 movupd (%rsi,%rax,1),%xmm1  B
        0x48, 0x81, 0xc2, 0x00, 0xc4, 0x09, 0x00, // 1009 add $0x9c400,%rdx
        0x66, 0x0f, 0x10, 0x14, 0x01, // 1010 movupd (%rcx,%rax,1),%xmm2  A
        0x66, 0x0f, 0x16, 0x82, 0x00, 0x1e, 0xfb, 0xff, // 1015 movhpd -0x4e200(%rdx),%xmm0  C
        0x66, 0x0f, 0x58, 0xc1, // 101d addpd %xmm1,%xmm0
        0x66, 0x0f, 0x58, 0xc2, // 1021 addpd %xmm2,%xmm0
        0x0f, 0x11, 0x04, 0x01, // 1025 movups %xmm0,(%rcx,%rax,1)  A
        0x48, 0x83, 0xc0, 0x10, // 1029 add $0x10,%rax
        0x48, 0x3d, 0x40, 0x06, 0x00, 0x00, // 102d cmp $0x640,%rax
        0x75, 0xcb, // 1033 jne 1000
    ];

    #[test]
    fn abc_strides() {
        // C: 640000 bytes per iteration, two accesses 320000 apart.
        for ip in [0x1000, 0x1015] {
            assert_eq!(
                stride_at(&ABC, ip, None),
                Some(Stride {
                    bytes: 320_000,
                    element: 8
                }),
                "C at {ip:#x}"
            );
        }
        // A and B: contiguous 16-byte vectors of doubles.
        for ip in [0x1004, 0x1010, 0x1025] {
            assert_eq!(
                stride_at(&ABC, ip, None),
                Some(Stride {
                    bytes: 8,
                    element: 8
                }),
                "A/B at {ip:#x}"
            );
        }
    }

    #[test]
    fn register_steps_need_the_registers() {
        // 1000: f2 0f 58 07        addsd (%rdi),%xmm0
        // 1004: 4c 01 c7           add %r8,%rdi
        // 1007: 48 39 f7           cmp %rsi,%rdi
        // 100a: 72 f4              jb 1000
        let code = [
            0xf2, 0x0f, 0x58, 0x07, 0x4c, 0x01, 0xc7, 0x48, 0x39, 0xf7, 0x72, 0xf4,
        ];
        assert_eq!(stride_at(&code, 0x1000, None), None);
        let mut regs = Regs::default();
        regs.gpr[8] = 8 * 1000;
        assert_eq!(
            stride_at(&code, 0x1000, Some(&regs)),
            Some(Stride {
                bytes: 8000,
                element: 8
            })
        );
    }

    #[test]
    fn a_base_reloaded_from_an_untouched_frame_slot_is_invariant() {
        // LULESH's e_old[i] = ... (gcc -O2, registers spilled):
        // 1000: 48 8b 74 24 08        mov 0x8(%rsp),%rsi
        // 1005: f2 0f 11 04 c6        movsd %xmm0,(%rsi,%rax,8)
        // 100a: 48 83 c0 01           add $0x1,%rax
        // 100e: 48 39 c2              cmp %rax,%rdx
        // 1011: 75 ed                 jne 1000
        let code = [
            0x48, 0x8b, 0x74, 0x24, 0x08, 0xf2, 0x0f, 0x11, 0x04, 0xc6, 0x48, 0x83, 0xc0, 0x01,
            0x48, 0x39, 0xc2, 0x75, 0xed,
        ];
        assert_eq!(
            stride_at(&code, 0x1005, None),
            Some(Stride {
                bytes: 8,
                element: 8
            })
        );
        // The loop also stores to the slot: the pointer may change, data.
        // 1000: 48 8b 74 24 08        mov 0x8(%rsp),%rsi
        // 1005: f2 0f 11 04 c6        movsd %xmm0,(%rsi,%rax,8)
        // 100a: 48 89 7c 24 08        mov %rdi,0x8(%rsp)
        // 100f: 48 83 c0 01           add $0x1,%rax
        // 1013: 48 39 c2              cmp %rax,%rdx
        // 1016: 75 e8                 jne 1000
        let code = [
            0x48, 0x8b, 0x74, 0x24, 0x08, 0xf2, 0x0f, 0x11, 0x04, 0xc6, 0x48, 0x89, 0x7c, 0x24,
            0x08, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xc2, 0x75, 0xe8,
        ];
        let insn = soft::decode_at(&code, 0x1000, 0x1005).unwrap();
        assert_eq!(
            static_stride(&code, 0x1000, &insn, None),
            Decoded::DataDependent
        );
    }

    #[test]
    fn loads_into_the_address_register_give_no_stride() {
        // Pointer chase: 1000: 48 8b 3f mov (%rdi),%rdi; 1003: 48 85 ff
        // test %rdi,%rdi; 1006: 75 f8 jne 1000
        let chase = [0x48, 0x8b, 0x3f, 0x48, 0x85, 0xff, 0x75, 0xf8];
        let insn = soft::decode_at(&chase, 0x1000, 0x1000).unwrap();
        assert_eq!(
            static_stride(&chase, 0x1000, &insn, None),
            Decoded::DataDependent
        );
        // No loop: 1000: 48 8b 07 mov (%rdi),%rax; 1003: c3 ret
        let code = [0x48, 0x8b, 0x07, 0xc3];
        let insn = soft::decode_at(&code, 0x1000, 0x1000).unwrap();
        assert_eq!(static_stride(&code, 0x1000, &insn, None), Decoded::Unknown);
        // A register step without the registers: not followed.
        let code = [
            0xf2, 0x0f, 0x58, 0x07, 0x4c, 0x01, 0xc7, 0x48, 0x39, 0xf7, 0x72, 0xf4,
        ];
        let insn = soft::decode_at(&code, 0x1000, 0x1000).unwrap();
        assert_eq!(static_stride(&code, 0x1000, &insn, None), Decoded::Unknown);
    }

    #[test]
    fn scaled_index_and_invariant_address() {
        // 1000: f2 0f 58 04 c7     addsd (%rdi,%rax,8),%xmm0
        // 1005: f2 0f 58 0e        addsd (%rsi),%xmm1   (invariant)
        // 1009: 48 83 c0 03        add $3,%rax
        // 100d: 48 39 d0           cmp %rdx,%rax
        // 1010: 72 ee              jb 1000
        let code = [
            0xf2, 0x0f, 0x58, 0x04, 0xc7, 0xf2, 0x0f, 0x58, 0x0e, 0x48, 0x83, 0xc0, 0x03, 0x48,
            0x39, 0xd0, 0x72, 0xee,
        ];
        assert_eq!(
            stride_at(&code, 0x1000, None),
            Some(Stride {
                bytes: 24,
                element: 8
            })
        );
        assert_eq!(
            stride_at(&code, 0x1005, None),
            Some(Stride {
                bytes: 0,
                element: 8
            })
        );
    }

    #[test]
    fn untyped_vector_moves_have_no_element_size() {
        // 1000: 0f 11 00           movups %xmm0,(%rax)
        // 1003: 48 83 c0 10        add $0x10,%rax
        // 1007: 48 39 d0           cmp %rdx,%rax
        // 100a: 75 f4              jne 1000
        let code = [
            0x0f, 0x11, 0x00, 0x48, 0x83, 0xc0, 0x10, 0x48, 0x39, 0xd0, 0x75, 0xf4,
        ];
        assert_eq!(
            stride_at(&code, 0x1000, None),
            Some(Stride {
                bytes: 16,
                element: 0
            })
        );
    }

    #[test]
    fn misalignment_is_a_line_crossing() {
        assert!(!misaligned(0x1000, 8));
        assert!(!misaligned(0x1038, 8));
        assert!(misaligned(0x1039, 8));
        assert!(misaligned(0x103f, 2));
        assert!(!misaligned(0x103f, 1));
        assert!(misaligned(0x1010, 64));
        assert!(!misaligned(0x1000, 64));
    }
}
