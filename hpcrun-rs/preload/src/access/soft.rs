//! `mem:soft`: the software memory-access sample source.
//!
//! A task-clock sample interrupts a thread at the instruction *after* the
//! one that was executing (measured skid, docs/ARCHITECTURE.md). We find that
//! previous instruction (decoding forward from the start of the enclosing
//! function, with a per-thread cache, else a backward guess), and if it has
//! an explicit memory operand whose address registers it did not overwrite,
//! its effective address is computed from the interrupted registers. If it
//! overwrote them (a pointer chase `mov (%rdi),%rdi`), the instruction at the
//! interrupted IP is used instead. No allocation anywhere (iced-x86's tables
//! are warmed up before sampling starts).

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register,
};

/// General-purpose registers of the interrupted context, indexed by
/// [`gpr_index`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Regs {
    pub gpr: [u64; 16],
    pub rip: u64,
}

/// RAX=0 .. R15=15 (iced's order).
pub fn gpr_index(reg: Register) -> Option<usize> {
    let full = reg.full_register();
    let n = full as usize;
    let rax = Register::RAX as usize;
    (n >= rax && n <= Register::R15 as usize).then(|| n - rax)
}

/// What the skid-corrected instruction does with memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No explicit memory operand.
    NotMemory,
    /// Address recovered.
    Address {
        addr: u64,
        size: u32,
        kind: AccessKind,
    },
    /// Accesses memory, but the address cannot be computed (registers
    /// overwritten, segment base unknown, gather).
    Unrecoverable,
}

/// Whether an access reads memory, writes it, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessKind {
    Load,
    Store,
    /// Read-modify-write (`add [mem], reg`): a load too.
    LoadStore,
}

impl AccessKind {
    /// True if the instruction waits for the data (loads stall; stores
    /// retire into the store buffer).
    pub fn loads(self) -> bool {
        !matches!(self, AccessKind::Store)
    }

    /// True if the instruction writes the memory (stores and
    /// read-modify-write).
    pub fn stores(self) -> bool {
        !matches!(self, AccessKind::Load)
    }
}

/// Moves and sets whose destination (memory or register) is only written.
pub(crate) fn is_pure_store(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Mov | Movd
            | Movq
            | Movss
            | Movsd
            | Movaps
            | Movups
            | Movapd
            | Movupd
            | Movdqa
            | Movdqu
            | Movnti
            | Movntps
            | Movntpd
            | Movntdq
            | Movhps
            | Movhpd
            | Movlps
            | Movlpd
            | Movbe
            | Vmovss
            | Vmovsd
            | Vmovaps
            | Vmovups
            | Vmovapd
            | Vmovupd
            | Vmovdqa
            | Vmovdqu
            | Vmovdqa32
            | Vmovdqa64
            | Vmovdqu8
            | Vmovdqu16
            | Vmovdqu32
            | Vmovdqu64
            | Vmovntps
            | Vmovntpd
            | Vmovntdq
            | Vmovq
            | Vmovd
            | Vmovhps
            | Vmovhpd
            | Vmovlps
            | Vmovlpd
            | Vextractf128
            | Vextracti128
            | Pextrb
            | Pextrw
            | Pextrd
            | Pextrq
            | Extractps
            | Seta
            | Setae
            | Setb
            | Setbe
            | Sete
            | Setg
            | Setge
            | Setl
            | Setle
            | Setne
            | Setno
            | Setnp
            | Setns
            | Seto
            | Setp
            | Sets
    )
}

/// Decodes one instruction at `ip` from `code` (which starts at `code_start`).
pub fn decode_at(code: &[u8], code_start: u64, ip: u64) -> Option<Instruction> {
    let off = ip.checked_sub(code_start)? as usize;
    let bytes = code.get(off..)?;
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    if !decoder.can_decode() {
        return None;
    }
    let insn = decoder.decode();
    (!insn.is_invalid()).then_some(insn)
}

/// Start of the instruction that ends exactly at `ip`, decoding forward from
/// `from` (a function start). `None` if the decode does not land on `ip`.
pub fn previous_by_forward_decode(code: &[u8], code_start: u64, from: u64, ip: u64) -> Option<u64> {
    previous_by_forward_decode_noting(code, code_start, from, ip, 64, &mut |_| {})
}

/// [`previous_by_forward_decode`] from `from` (a function start or a known
/// boundary), calling `note` with the first instruction that starts in
/// each `2^block_shift`-byte block after `from`'s (the anchors of
/// [`crate::access::anchors`]; those of the last 64 blocks before `ip`) once the
/// decode has landed on `ip`.
pub fn previous_by_forward_decode_noting(
    code: &[u8],
    code_start: u64,
    from: u64,
    ip: u64,
    block_shift: u32,
    note: &mut dyn FnMut(u64),
) -> Option<u64> {
    let start = from.checked_sub(code_start)? as usize;
    let end = ip.checked_sub(code_start)? as usize;
    let bytes = code.get(start..end)?;
    let mut decoder = Decoder::with_ip(64, bytes, from, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    let mut last = None;
    // The anchors of the last 64 blocks before `ip` are noted (a ring in a
    // fixed buffer: no allocation; the ones nearest the IP matter most).
    let mut anchors = [0u64; 64];
    let mut n = 0usize;
    let mut block = from >> block_shift;
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        if insn.is_invalid() {
            return None;
        }
        if insn.ip() >> block_shift != block {
            block = insn.ip() >> block_shift;
            anchors[n % anchors.len()] = insn.ip();
            n += 1;
        }
        last = Some(insn.ip());
    }
    if decoder.ip() != ip {
        return None;
    }
    let kept = n.min(anchors.len());
    (n - kept..n).for_each(|i| note(anchors[i % anchors.len()]));
    last
}

/// Without a function start: the longest valid instruction that ends at
/// `ip` and accesses memory, else the shortest valid one. (Shorter tails of
/// an instruction usually keep its ModRM byte, hence the same address; the
/// longest candidate keeps its prefixes and REX.W.)
pub fn previous_by_backward_guess(code: &[u8], code_start: u64, ip: u64) -> Option<u64> {
    let mut memory = None;
    let mut fallback = None;
    for len in 1..=15u64 {
        let Some(start) = ip.checked_sub(len) else {
            break;
        };
        if start < code_start {
            break;
        }
        let Some(insn) = decode_at(code, code_start, start) else {
            continue;
        };
        if insn.len() as u64 != len {
            continue;
        }
        if has_memory_operand(&insn) {
            memory = Some(start);
        }
        fallback.get_or_insert(start);
    }
    memory.or(fallback)
}

pub(crate) fn memory_operand(insn: &Instruction) -> Option<u32> {
    (0..insn.op_count()).find(|&i| insn.op_kind(i) == OpKind::Memory)
}

pub(crate) fn has_memory_operand(insn: &Instruction) -> bool {
    !matches!(insn.mnemonic(), Mnemonic::Lea | Mnemonic::Nop) && memory_operand(insn).is_some()
}

/// True if executing `insn` changed register `reg` (conservatively).
pub(crate) fn writes_register(insn: &Instruction, reg: Register) -> bool {
    let full = reg.full_register();
    if insn.op_count() > 0 && insn.op_kind(0) == OpKind::Register {
        let compares = matches!(
            insn.mnemonic(),
            Mnemonic::Cmp
                | Mnemonic::Test
                | Mnemonic::Ucomisd
                | Mnemonic::Ucomiss
                | Mnemonic::Comisd
                | Mnemonic::Comiss
        );
        if !compares && insn.op0_register().full_register() == full {
            return true;
        }
    }
    // Exchanges write their second operand too.
    if matches!(
        insn.mnemonic(),
        Mnemonic::Xchg | Mnemonic::Xadd | Mnemonic::Cmpxchg
    ) && insn.op_count() > 1
        && insn.op_kind(1) == OpKind::Register
        && insn.op1_register().full_register() == full
    {
        return true;
    }
    // Implicit writers of RAX/RDX/RSP.
    match insn.mnemonic() {
        Mnemonic::Mul | Mnemonic::Div | Mnemonic::Idiv | Mnemonic::Cqo | Mnemonic::Cdq => {
            full == Register::RAX || full == Register::RDX
        }
        Mnemonic::Imul if insn.op_count() == 1 => full == Register::RAX || full == Register::RDX,
        Mnemonic::Push | Mnemonic::Pop | Mnemonic::Call | Mnemonic::Ret => full == Register::RSP,
        Mnemonic::Cmpxchg => full == Register::RAX,
        Mnemonic::Rdtsc => full == Register::RAX || full == Register::RDX,
        Mnemonic::Rdtscp => matches!(full, Register::RAX | Register::RDX | Register::RCX),
        Mnemonic::Cpuid => matches!(
            full,
            Register::RAX | Register::RBX | Register::RCX | Register::RDX
        ),
        Mnemonic::Syscall => matches!(full, Register::RAX | Register::RCX | Register::R11),
        // String instructions advance RSI/RDI and count down RCX.
        _ if insn.is_string_instruction() => {
            matches!(full, Register::RSI | Register::RDI | Register::RCX)
        }
        _ => false,
    }
}

/// Whether memory operand `op` of `insn` is read, written or both.
fn kind_of(insn: &Instruction, op: u32) -> AccessKind {
    if op != 0 || matches!(insn.mnemonic(), Mnemonic::Cmp | Mnemonic::Test) {
        AccessKind::Load
    } else if is_pure_store(insn.mnemonic()) {
        AccessKind::Store
    } else {
        AccessKind::LoadStore
    }
}

/// What `insn` does with memory through an explicit operand, if anything.
pub fn memory_kind(insn: &Instruction) -> Option<AccessKind> {
    if !has_memory_operand(insn) {
        return None;
    }
    memory_operand(insn).map(|op| kind_of(insn, op))
}

/// The data address of `insn` computed from `regs`. `executed` says whether
/// the registers are those *after* the instruction ran (skid) or before it.
pub fn access(insn: &Instruction, regs: &Regs, executed: bool) -> Access {
    if !has_memory_operand(insn) {
        return Access::NotMemory;
    }
    let Some(op) = memory_operand(insn) else {
        return Access::NotMemory;
    };
    if insn.is_string_instruction() || matches!(insn.code(), Code::INVALID) {
        return Access::Unrecoverable;
    }
    match insn.memory_segment() {
        Register::FS | Register::GS => return Access::Unrecoverable,
        _ => {}
    }
    let base = insn.memory_base();
    let index = insn.memory_index();
    if index.is_xmm() || index.is_ymm() || index.is_zmm() {
        return Access::Unrecoverable;
    }
    let value = |reg: Register| -> Option<u64> {
        if reg == Register::None {
            return Some(0);
        }
        if reg == Register::RIP || reg == Register::EIP {
            return Some(0);
        }
        if executed && writes_register(insn, reg) {
            return None;
        }
        let v = regs.gpr[gpr_index(reg)?];
        Some(if reg.is_gpr32() { v & 0xffff_ffff } else { v })
    };
    let (Some(b), Some(i)) = (value(base), value(index)) else {
        return Access::Unrecoverable;
    };
    let addr = b
        .wrapping_add(i.wrapping_mul(insn.memory_index_scale() as u64))
        .wrapping_add(insn.memory_displacement64());
    let kind = kind_of(insn, op);
    Access::Address {
        addr,
        size: insn.memory_size().size() as u32,
        kind,
    }
}

/// How far `next_access` looks ahead.
const LOOKAHEAD: usize = 6;

/// The first memory access at or after `ip` (not yet executed) whose
/// address registers nothing before it in the way changes: straight-line
/// code, following a backward branch as taken (a loop's back edge, where
/// pointer-chasing loops continue) and a forward one as not taken, up to
/// `LOOKAHEAD` instructions, stopping at calls, returns and indirect jumps.
/// For a pointer chase (`mov (%rax),%rax; test; jne top; top: add
/// 8(%rax),...`) this is the access to the next element: the same object
/// (allocation site) as the load that stalled.
pub fn next_access(code: &[u8], code_start: u64, ip: u64, regs: &Regs) -> Access {
    next_access_checked(code, code_start, ip, regs, None)
}

/// [`next_access`], claimed only if that access's base register is `via`
/// (the pointer a chasing load just loaded): an access through another
/// register reads unrelated data (a spill, another array).
pub fn next_access_via(
    code: &[u8],
    code_start: u64,
    ip: u64,
    regs: &Regs,
    via: Register,
) -> Access {
    next_access_checked(code, code_start, ip, regs, Some(via))
}

fn next_access_checked(
    code: &[u8],
    code_start: u64,
    ip: u64,
    regs: &Regs,
    via: Option<Register>,
) -> Access {
    let mut skipped: [Option<Instruction>; LOOKAHEAD] = [None; LOOKAHEAD];
    let mut at = ip;
    for i in 0..LOOKAHEAD {
        let Some(insn) = decode_at(code, code_start, at) else {
            return Access::Unrecoverable;
        };
        if has_memory_operand(&insn) {
            let clobbered = [insn.memory_base(), insn.memory_index()]
                .into_iter()
                .filter(|r| *r != Register::None && *r != Register::RIP)
                .any(|r| skipped[..i].iter().flatten().any(|s| writes_register(s, r)));
            if clobbered {
                return Access::Unrecoverable;
            }
            if via.is_some_and(|v| insn.memory_base().full_register() != v) {
                return Access::Unrecoverable;
            }
            return access(&insn, regs, false);
        }
        match insn.flow_control() {
            FlowControl::Next => at = insn.next_ip(),
            FlowControl::UnconditionalBranch => at = insn.near_branch_target(),
            FlowControl::ConditionalBranch => {
                let target = insn.near_branch_target();
                at = if target < insn.ip() {
                    target
                } else {
                    insn.next_ip()
                };
            }
            _ => return Access::Unrecoverable,
        }
        skipped[i] = Some(insn);
    }
    Access::Unrecoverable
}

/// Decodes a few instructions so that iced-x86 builds any lazy state before
/// the first signal arrives.
pub fn warm_up() {
    // mov rax,[rdi+rsi*8+8]; addsd xmm0,[rcx]; vmovupd ymm0,[rax]; lea; ret
    let code: [u8; 21] = [
        0x48, 0x8b, 0x44, 0xf7, 0x08, 0xf2, 0x0f, 0x58, 0x01, 0xc5, 0xfd, 0x10, 0x00, 0x48, 0x8d,
        0x04, 0x24, 0xc3, 0x90, 0x90, 0x90,
    ];
    let regs = Regs::default();
    let mut ip = 0x1000;
    while let Some(insn) = decode_at(&code, 0x1000, ip) {
        let _ = access(&insn, &regs, true);
        ip += insn.len() as u64;
    }
    let _ = previous_by_forward_decode(&code, 0x1000, 0x1000, 0x1009);
    let _ = previous_by_backward_guess(&code, 0x1000, 0x1009);
}

#[cfg(test)]
mod tests {
    use super::*;

    // 0: 48 8b 3f        mov rdi,[rdi]        (pointer chase)
    // 3: f2 0f 58 01     addsd xmm0,[rcx]
    // 7: 48 8b 44 f7 08  mov rax,[rdi+rsi*8+8]
    const CODE: [u8; 12] = [
        0x48, 0x8b, 0x3f, 0xf2, 0x0f, 0x58, 0x01, 0x48, 0x8b, 0x44, 0xf7, 0x08,
    ];

    #[test]
    fn pointer_chase_continues_at_the_loop_top() {
        // 0: 48 03 50 08  add rdx,[rax+8]
        // 4: 48 8b 00     mov rax,[rax]      (the stalled load)
        // 7: 48 85 c0     test rax,rax        <- interrupted here
        // a: 75 f4        jne 0
        let code = [
            0x48, 0x03, 0x50, 0x08, 0x48, 0x8b, 0x00, 0x48, 0x85, 0xc0, 0x75, 0xf4,
        ];
        let mut regs = Regs::default();
        regs.gpr[0] = 0x7000; // rax: the next node, already loaded
        let prev = decode_at(&code, 0x100, 0x104).unwrap();
        assert_eq!(access(&prev, &regs, true), Access::Unrecoverable);
        assert_eq!(
            next_access(&code, 0x100, 0x107, &regs),
            Access::Address {
                addr: 0x7008,
                size: 8,
                kind: AccessKind::Load
            }
        );
        // If the way there overwrites the register, nothing is claimed:
        // 48 31 c0 xor rax,rax ; 75 f8 jne 0 (from 0x10 back to 0x100)
        let mut code2 = code.to_vec();
        code2.truncate(7);
        code2.extend_from_slice(&[0x48, 0x31, 0xc0, 0x75, 0xf4]);
        assert_eq!(
            next_access(&code2, 0x100, 0x107, &regs),
            Access::Unrecoverable
        );
    }

    #[test]
    fn forward_decode_from_any_boundary_finds_the_same_instruction() {
        // 300 x `add rax, 1` (4 bytes), then `mov rax, [rdi]`: 1,203 bytes.
        let mut code: Vec<u8> = std::iter::repeat([0x48, 0x83, 0xc0, 0x01])
            .take(300)
            .flatten()
            .collect();
        code.extend([0x48, 0x8b, 0x07]);
        let (start, ip) = (0x4000u64, 0x4000 + code.len() as u64);
        let mut noted = Vec::new();
        let prev =
            previous_by_forward_decode_noting(&code, start, start, ip, 8, &mut |a| noted.push(a));
        assert_eq!(prev, Some(0x4000 + 1200));
        // The first instruction of each later 256-byte block.
        assert_eq!(noted, [0x4100, 0x4200, 0x4300, 0x4400]);
        for &a in &noted {
            assert_eq!(previous_by_forward_decode(&code, start, a, ip), prev);
        }
        // A decode that does not land on the IP notes nothing.
        let mut none = Vec::new();
        let short = &code[..code.len() - 1];
        assert_eq!(
            previous_by_forward_decode_noting(short, start, start, ip - 1, 8, &mut |a| none
                .push(a)),
            None
        );
        assert!(none.is_empty());
    }

    #[test]
    fn forward_decode_finds_previous_instruction() {
        assert_eq!(
            previous_by_forward_decode(&CODE, 0x100, 0x100, 0x107),
            Some(0x103)
        );
        assert_eq!(
            previous_by_forward_decode(&CODE, 0x100, 0x100, 0x103),
            Some(0x100)
        );
        assert_eq!(previous_by_forward_decode(&CODE, 0x100, 0x100, 0x105), None);
    }

    #[test]
    fn backward_guess_finds_memory_instruction() {
        assert_eq!(previous_by_backward_guess(&CODE, 0x100, 0x107), Some(0x103));
    }

    #[test]
    fn effective_address_from_registers() {
        let mut regs = Regs::default();
        regs.gpr[1] = 0x5000; // rcx
        regs.gpr[7] = 0x9000; // rdi
        regs.gpr[6] = 2; // rsi
        let addsd = decode_at(&CODE, 0x100, 0x103).unwrap();
        assert_eq!(
            access(&addsd, &regs, true),
            Access::Address {
                addr: 0x5000,
                size: 8,
                kind: AccessKind::Load
            }
        );
        let mov = decode_at(&CODE, 0x100, 0x107).unwrap();
        assert_eq!(
            access(&mov, &regs, true),
            Access::Address {
                addr: 0x9000 + 16 + 8,
                size: 8,
                kind: AccessKind::Load
            }
        );
        // The pointer chase overwrote its own address register.
        let chase = decode_at(&CODE, 0x100, 0x100).unwrap();
        assert_eq!(access(&chase, &regs, true), Access::Unrecoverable);
        // 48 89 07: mov [rdi],rax is a store.
        let store = [0x48, 0x89, 0x07];
        assert_eq!(
            access(&decode_at(&store, 0, 0).unwrap(), &regs, true),
            Access::Address {
                addr: 0x9000,
                size: 8,
                kind: AccessKind::Store
            }
        );
        // 48 01 07: add [rdi],rax reads and writes.
        let rmw = [0x48, 0x01, 0x07];
        assert_eq!(
            access(&decode_at(&rmw, 0, 0).unwrap(), &regs, true),
            Access::Address {
                addr: 0x9000,
                size: 8,
                kind: AccessKind::LoadStore
            }
        );
        // Before it executes, the address is known.
        assert_eq!(
            access(&chase, &regs, false),
            Access::Address {
                addr: 0x9000,
                size: 8,
                kind: AccessKind::Load
            }
        );
    }
}
