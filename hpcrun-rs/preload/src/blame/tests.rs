//! Unit tests of the blame rules on hand-assembled windows.

use super::*;

fn window(code: &[u8]) -> Window {
    Window::decode(code, 0x1000, 0x1000, 0x1000 + code.len() as u64).unwrap()
}

fn never(_: u64) -> bool {
    false
}

fn no_local(_: usize) -> bool {
    false
}

#[test]
fn consumer_of_a_load_blames_the_load() {
    // f3 0f 6f 10   movdqu xmm2,[rax]
    // 48 83 c0 10   add rax,16
    // 66 0f d4 c2   paddq xmm0,xmm2      <- landed
    let w = window(&[
        0xf3, 0x0f, 0x6f, 0x10, 0x48, 0x83, 0xc0, 0x10, 0x66, 0x0f, 0xd4, 0xc2,
    ]);
    let b = blame(&w, &never, &no_local);
    assert_eq!(b.rule, Rule::WalkedBack);
    assert_eq!(b.accesses(), [0]);
    assert_eq!(b.distance, 2);
    // rax was advanced by 16 after the load.
    assert_eq!(
        address_registers(&w, 0),
        (Operand::In(Register::RAX, 16), Operand::None)
    );
}

#[test]
fn divide_is_compute_even_with_a_memory_operand() {
    // f2 41 0f 5e 00   divsd xmm0,[r8]
    let w = window(&[0xf2, 0x41, 0x0f, 0x5e, 0x00]);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Compute);
}

#[test]
fn fp_chain_without_loads_is_compute() {
    // f2 0f 59 c1   mulsd xmm0,xmm1
    // f2 0f 58 c2   addsd xmm0,xmm2
    let w = window(&[0xf2, 0x0f, 0x59, 0xc1, 0xf2, 0x0f, 0x58, 0xc2]);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Compute);
}

#[test]
fn rip_relative_constant_is_not_data() {
    // f2 0f 59 05 00 01 00 00   mulsd xmm0,[rip+0x100]
    let w = window(&[0xf2, 0x0f, 0x59, 0x05, 0x00, 0x01, 0x00, 0x00]);
    assert_eq!(blame(&w, &|_| true, &no_local).rule, Rule::Constant);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Landed);
    // ... but a load feeding it still gets the blame:
    // f2 0f 10 0f   movsd xmm1,[rdi]
    // f2 0f 59 0d 00 01 00 00  mulsd xmm1,[rip+0x100]
    let w = window(&[
        0xf2, 0x0f, 0x10, 0x0f, 0xf2, 0x0f, 0x59, 0x0d, 0x00, 0x01, 0x00, 0x00,
    ]);
    let b = blame(&w, &|_| true, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::WalkedBack, &[0u8][..]));
}

#[test]
fn self_clobbering_index_keeps_its_base() {
    // 49 63 04 86   movsxd rax,dword [r14+rax*4]
    // f2 0f 58 04 c3  addsd xmm0,[rbx+rax*8]   <- landed (grid)
    let code = [0x49, 0x63, 0x04, 0x86, 0xf2, 0x0f, 0x58, 0x04, 0xc3];
    let w = window(&code);
    let b = blame(&w, &never, &no_local);
    assert_eq!(b.rule, Rule::Landed);
    // The index load, seen alone: its index is lost, its base intact.
    let w = window(&code[..4]);
    assert_eq!(
        address_registers(&w, 0),
        (Operand::In(Register::R14, 0), Operand::Lost)
    );
    // With a copy of the index: 48 89 d0 mov rax,rdx first.
    let mut copy = vec![0x48, 0x89, 0xd0];
    copy.extend_from_slice(&code[..4]);
    let w = window(&copy);
    assert_eq!(
        address_registers(&w, 1),
        (Operand::In(Register::R14, 0), Operand::In(Register::RDX, 0))
    );
}

#[test]
fn stack_slots_do_not_take_the_blame() {
    // f2 0f 10 07            movsd xmm0,[rdi]
    // f2 0f 59 44 24 08      mulsd xmm0,[rsp+8]   <- landed
    let w = window(&[0xf2, 0x0f, 0x10, 0x07, 0xf2, 0x0f, 0x59, 0x44, 0x24, 0x08]);
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::WalkedBack, &[0u8][..]));
    // A chain over spills only is compute:
    // f2 0f 10 4c 24 10      movsd xmm1,[rsp+16]
    // f2 0f 59 c1            mulsd xmm0,xmm1      <- landed
    let w = window(&[0xf2, 0x0f, 0x10, 0x4c, 0x24, 0x10, 0xf2, 0x0f, 0x59, 0xc1]);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Compute);
}

#[test]
fn two_loads_feeding_one_add_split() {
    // f2 0f 10 07   movsd xmm0,[rdi]
    // f2 0f 10 0e   movsd xmm1,[rsi]
    // f2 0f 58 c1   addsd xmm0,xmm1   <- landed
    let w = window(&[
        0xf2, 0x0f, 0x10, 0x07, 0xf2, 0x0f, 0x10, 0x0e, 0xf2, 0x0f, 0x58, 0xc1,
    ]);
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::Split, &[0u8, 1][..]));
}

#[test]
fn branch_after_compare_walks_to_the_pointer_load() {
    // 48 8b 00   mov rax,[rax]
    // 48 85 c0   test rax,rax
    // 75 f8      jne -8            <- landed
    let w = window(&[0x48, 0x8b, 0x00, 0x48, 0x85, 0xc0, 0x75, 0xf8]);
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::WalkedBack, &[0u8][..]));
    assert_eq!(address_registers(&w, 0), (Operand::Lost, Operand::None));
}

#[test]
fn loop_bottom_after_a_store_is_the_retire_group() {
    // 0f 11 07      movups [rdi],xmm0
    // 48 83 c7 10   add rdi,16
    // 48 39 f7      cmp rdi,rsi
    // 75 f4         jne            <- landed
    let w = window(&[
        0x0f, 0x11, 0x07, 0x48, 0x83, 0xc7, 0x10, 0x48, 0x39, 0xf7, 0x75, 0xf4,
    ]);
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::RetireGroup, &[0u8][..]));
}

#[test]
fn a_loop_head_finds_its_back_edge() {
    // 0x1000: 48 8b 00  mov rax,[rax]
    // 0x1003: 48 85 c0  test rax,rax
    // 0x1006: 75 f8     jne 0x1000
    let code = [0x48, 0x8b, 0x00, 0x48, 0x85, 0xc0, 0x75, 0xf8];
    let b = back_edge(&code, 0x1000, 0x1000).unwrap();
    assert_eq!(b.ip(), 0x1006);
    assert!(back_edge(&code, 0x1000, 0x1003).is_none());
}

#[test]
fn window_starts_after_the_last_branch() {
    // 74 00 je +0 ; 48 8b 07 mov rax,[rdi]
    let w = window(&[0x74, 0x00, 0x48, 0x8b, 0x07]);
    assert_eq!(w.insns().len(), 1);
}

#[test]
fn accesses_to_the_top_of_the_own_stack_do_not_take_the_blame() {
    // f2 0f 10 08            movsd xmm1,[rax]       (heap)
    // f2 0f 10 17            movsd xmm2,[rdi]       (a local array via a pointer)
    // f2 0f 59 ca            mulsd xmm1,xmm2        <- landed
    let w = window(&[
        0xf2, 0x0f, 0x10, 0x08, 0xf2, 0x0f, 0x10, 0x17, 0xf2, 0x0f, 0x59, 0xca,
    ]);
    let b = blame(&w, &never, &no_local);
    assert_eq!(b.rule, Rule::Split);
    assert_eq!(b.accesses(), [0, 1]);
    let b = blame(&w, &never, &|i| i == 1);
    assert_eq!(b.rule, Rule::WalkedBack);
    assert_eq!(b.accesses(), [0]);
    // Landed on the local load itself: the period belongs to what fed
    // it or to the arithmetic, never to the local.
    let w = window(&[0xf2, 0x0f, 0x10, 0x08, 0xf2, 0x0f, 0x10, 0x17]);
    let b = blame(&w, &never, &|i| i == 1);
    assert_ne!(b.accesses(), [1]);
}

#[test]
fn a_base_reloaded_from_the_frame_and_overwritten_is_read_back_from_its_slot() {
    // LULESH's CalcPressureForElems inlined into main (gcc -O2):
    // 48 8b b5 10 fd ff ff   mov rsi,[rbp-0x2f0]
    // f2 0f 10 04 06         movsd xmm0,[rsi+rax]
    // 48 8b b5 38 fd ff ff   mov rsi,[rbp-0x2c8]   (rsi overwritten)
    // f2 0f 58 c1            addsd xmm0,xmm1       <- landed
    let code = [
        0x48, 0x8b, 0xb5, 0x10, 0xfd, 0xff, 0xff, 0xf2, 0x0f, 0x10, 0x04, 0x06, 0x48, 0x8b, 0xb5,
        0x38, 0xfd, 0xff, 0xff, 0xf2, 0x0f, 0x58, 0xc1,
    ];
    let w = window(&code);
    let b = blame(&w, &never, &no_local);
    assert_eq!(b.accesses(), [1]);
    assert_eq!(
        address_registers(&w, 1),
        (
            Operand::Loaded(Reload {
                base: Register::RBP,
                base_delta: 0,
                base_deref: None,
                index: Register::None,
                index_delta: 0,
                scale: 1,
                disp: -0x2f0
            }),
            Operand::In(Register::RAX, 0)
        )
    );
    // A store to the slot after the reload: its word is no longer the base.
    // 48 89 bd 10 fd ff ff   mov [rbp-0x2f0],rdi
    let mut stored = code.to_vec();
    stored.splice(12..12, [0x48, 0x89, 0xbd, 0x10, 0xfd, 0xff, 0xff]);
    let w = window(&stored);
    assert_eq!(address_registers(&w, 1).0, Operand::Lost);
}

#[test]
fn a_pointer_read_from_an_array_of_pointers_and_overwritten_is_read_back() {
    // LAMMPS's PairLJCut::compute (Debian's liblammps, gcc -O2):
    // 49 8b 54 cd 00         mov rdx,[r13+rcx*8]     (x[j], a double*)
    // 66 0f 10 22            movupd xmm4,[rdx]       (x[j][0..1])
    // 49 63 14 8e            movsxd rdx,dword [r14+rcx*4]  (type[j]: rdx lost)
    // 66 0f 5c cc            subpd xmm1,xmm4         <- landed
    let code = [
        0x49, 0x8b, 0x54, 0xcd, 0x00, 0x66, 0x0f, 0x10, 0x22, 0x49, 0x63, 0x14, 0x8e, 0x66, 0x0f,
        0x5c, 0xcc,
    ];
    let w = window(&code);
    let b = blame(&w, &never, &no_local);
    assert_eq!(b.accesses(), [1]);
    let word = Reload {
        base: Register::R13,
        base_delta: 0,
        base_deref: None,
        index: Register::RCX,
        index_delta: 0,
        scale: 8,
        disp: 0,
    };
    assert_eq!(
        address_registers(&w, 1),
        (Operand::Loaded(word), Operand::None)
    );
    // A store to the heap after the pointer was read: it may have changed.
    // 48 89 07               mov [rdi],rax
    let mut stored = code.to_vec();
    stored.splice(9..9, [0x48, 0x89, 0x07]);
    let w = window(&stored);
    assert_eq!(address_registers(&w, 1).0, Operand::Lost);
    // The load replaced its own base: nothing to read back.
    // 48 8b 3c 17            mov rdi,[rdi+rdx]
    // f2 0f 10 07            movsd xmm0,[rdi]
    // 48 31 ff               xor rdi,rdi
    // f2 0f 58 c8            addsd xmm1,xmm0        <- landed
    let w = window(&[
        0x48, 0x8b, 0x3c, 0x17, 0xf2, 0x0f, 0x10, 0x07, 0x48, 0x31, 0xff, 0xf2, 0x0f, 0x58, 0xc8,
    ]);
    assert_eq!(address_registers(&w, 1).0, Operand::Lost);
}

#[test]
fn a_row_pointer_read_through_a_member_pointer_is_read_back_in_two_steps() {
    // LAMMPS's PairLJCut::compute, lj2[itype][jtype]:
    // 48 8b 85 98 03 00 00   mov rax,[rbp+0x398]       (this->lj2)
    // 4a 8b 04 20            mov rax,[rax+r12]         (lj2[itype]: rax replaced)
    // f2 0f 5c 14 d0         subsd xmm2,[rax+rdx*8]    (lj2[itype][jtype])
    // 4b 8b 04 11            mov rax,[r9+r10]          (rax lost)
    // f2 0f 59 d0            mulsd xmm2,xmm0           <- landed
    let w = window(&[
        0x48, 0x8b, 0x85, 0x98, 0x03, 0x00, 0x00, 0x4a, 0x8b, 0x04, 0x20, 0xf2, 0x0f, 0x5c, 0x14,
        0xd0, 0x4b, 0x8b, 0x04, 0x11, 0xf2, 0x0f, 0x59, 0xd0,
    ]);
    assert_eq!(blame(&w, &never, &no_local).accesses(), [2]);
    let (base, index) = address_registers(&w, 2);
    assert_eq!(
        base,
        Operand::Loaded(Reload {
            base: Register::RBP,
            base_delta: 0,
            base_deref: Some(0x398),
            index: Register::R12,
            index_delta: 0,
            scale: 1,
            disp: 0,
        })
    );
    assert_eq!(index, Operand::In(Register::RDX, 0));
}

#[test]
fn a_divide_on_one_input_makes_the_sample_compute() {
    // f2 0f 10 10            movsd xmm2,[rax]
    // f2 0f 5e c1            divsd xmm0,xmm1
    // f2 0f 59 d0            mulsd xmm2,xmm0        <- landed
    let w = window(&[
        0xf2, 0x0f, 0x10, 0x10, 0xf2, 0x0f, 0x5e, 0xc1, 0xf2, 0x0f, 0x59, 0xd0,
    ]);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Compute);
    // Without the divide the load takes the blame.
    // f2 0f 10 10            movsd xmm2,[rax]
    // f2 0f 59 c1            mulsd xmm0,xmm1
    // f2 0f 59 d0            mulsd xmm2,xmm0        <- landed
    let w = window(&[
        0xf2, 0x0f, 0x10, 0x10, 0xf2, 0x0f, 0x59, 0xc1, 0xf2, 0x0f, 0x59, 0xd0,
    ]);
    assert_eq!(blame(&w, &never, &no_local).accesses(), [0]);
}
