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

#[test]
fn an_entry_of_an_array_of_pointers_computed_by_lea_is_recomputed() {
    // Open MPI's opal_progress (Debian's libopen-pal.so.40 +0x2fe08), its
    // loop over the progress callbacks:
    // 48 8b 05 41 05 08 00   mov rax,[rip+0x80541]   (the callbacks array)
    // 48 8d 04 d8            lea rax,[rax+rbx*8]
    // 48 83 c3 01            add rbx,1
    // 48 8b 00               mov rax,[rax]           <- landed (rax replaced)
    // ff d0                  call rax
    let code = [
        0x48, 0x8b, 0x05, 0x41, 0x05, 0x08, 0x00, 0x48, 0x8d, 0x04, 0xd8, 0x48, 0x83, 0xc3, 0x01,
        0x48, 0x8b, 0x00, 0xff, 0xd0,
    ];
    let w = window(&code[..18]);
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::Landed, &[3u8][..]));
    // The entry is the array (the word at the RIP-relative address, the
    // window decoded at 0x1000) plus rbx, advanced by one since, times 8.
    let array = Reload {
        base: Register::None,
        base_delta: 0,
        base_deref: None,
        index: Register::None,
        index_delta: 0,
        scale: 1,
        disp: 0x1007 + 0x80541,
    };
    assert_eq!(
        address_registers(&w, 3),
        (
            Operand::Sum(Sum {
                terms: [Term::Loaded(array), Term::In(Register::RBX, 1)],
                scale: 8,
                disp: 0,
            }),
            Operand::None
        )
    );
    // rbx changed by other than a constant after the lea: lost.
    // 48 0f af db            imul rbx,rbx
    let mut changed = code[..18].to_vec();
    changed.splice(15..15, [0x48, 0x0f, 0xaf, 0xdb]);
    let w = window(&changed);
    assert_eq!(address_registers(&w, 4).0, Operand::Lost);
    // A store after the array pointer was read: it may have changed.
    // 48 89 3e               mov [rsi],rdi
    let mut stored = code[..18].to_vec();
    stored.splice(7..7, [0x48, 0x89, 0x3e]);
    let w = window(&stored);
    assert_eq!(address_registers(&w, 4).0, Operand::Lost);
}

#[test]
fn a_sample_at_a_return_address_is_not_the_loads_before_the_call() {
    // opal_progress again, the IP after `call rax` (+0x2fe1c): the
    // callee's `ret` retired last, not the call or the load before it.
    let w = window(&[
        0x48, 0x8b, 0x05, 0x41, 0x05, 0x08, 0x00, 0x48, 0x8d, 0x04, 0xd8, 0x48, 0x83, 0xc3, 0x01,
        0x48, 0x8b, 0x00, 0xff, 0xd0,
    ]);
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::Other, &[][..]));
    // A direct call: the same (before, the retire group took the load).
    // 48 8b 07               mov rax,[rdi]
    // e8 00 00 00 00         call next
    let w = window(&[0x48, 0x8b, 0x07, 0xe8, 0, 0, 0, 0]);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Other);
}

#[test]
fn a_member_pointer_plus_an_offset_is_recomputed() {
    // Open MPI's vader fast-box poll (Debian's mca_btl_vader.so +0x4f88):
    // 49 8b 46 28            mov rax,[r14+0x28]      (the fast box)
    // 89 de                  mov esi,ebx             (the read offset)
    // 48 01 f0               add rax,rsi
    // 8b 50 04               mov edx,[rax+4]         (the header)
    // 44 8b 28               mov r13d,[rax]
    // 89 d0                  mov eax,edx             (rax lost)
    // c1 e8 10               shr eax,0x10
    // 66 85 d2               test dx,dx
    // 0f 84 eb 00 00 00      je ...                  <- landed
    let code = [
        0x49, 0x8b, 0x46, 0x28, 0x89, 0xde, 0x48, 0x01, 0xf0, 0x8b, 0x50, 0x04, 0x44, 0x8b, 0x28,
        0x89, 0xd0, 0xc1, 0xe8, 0x10, 0x66, 0x85, 0xd2, 0x0f, 0x84, 0xeb, 0x00, 0x00, 0x00,
    ];
    let w = window(&code);
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::WalkedBack, &[3u8][..]));
    let fast_box = Reload {
        base: Register::R14,
        base_delta: 0,
        base_deref: None,
        index: Register::None,
        index_delta: 0,
        scale: 1,
        disp: 0x28,
    };
    let expected = Operand::Sum(Sum {
        terms: [Term::Loaded(fast_box), Term::In(Register::RSI, 0)],
        scale: 1,
        disp: 0,
    });
    assert_eq!(address_registers(&w, 3), (expected, Operand::None));
    // rsi replaced after the add: it was a copy of ebx, still intact.
    // 31 f6                  xor esi,esi
    let mut copied = code.to_vec();
    copied.splice(12..12, [0x31, 0xf6]);
    let w = window(&copied);
    let Operand::Sum(s) = address_registers(&w, 3).0 else {
        panic!("{:?}", address_registers(&w, 3));
    };
    assert_eq!(s.terms[1], Term::In(Register::EBX, 0));
    // ebx replaced too: lost (a sum's terms are never guessed).
    // 31 db                  xor ebx,ebx
    copied.splice(12..12, [0x31, 0xdb]);
    let w = window(&copied);
    assert_eq!(address_registers(&w, 3).0, Operand::Lost);
}

#[test]
fn a_pointer_loaded_more_than_a_window_before_is_still_read_back() {
    // LAMMPS's PairLJCut::compute (liblammps.so.0 +0x527a5d): x[j] is
    // loaded (rdx), read, rdx replaced by type[j], and 16 instructions of
    // FP arithmetic follow before the sample lands on the last addsd.
    let code = [
        0x8b, 0x03, 0x66, 0x0f, 0x28, 0xcf, 0x66, 0x0f, 0x28, 0xee, 0x48, 0x8b, 0xbd, 0x18, 0x01,
        0x00, 0x00, 0x89, 0xc1, 0x4a, 0x8b, 0x3c, 0x27, 0x89, 0xc6, 0x81, 0xe1, 0xff, 0xff, 0xff,
        0x3f, 0x81, 0xe6, 0xff, 0xff, 0xff, 0x3f, 0x49, 0x8b, 0x54, 0xcd, 0x00, 0x66, 0x0f, 0x10,
        0x22, 0xf2, 0x0f, 0x5c, 0x6a, 0x10, 0x49, 0x63, 0x14, 0x8e, 0x66, 0x0f, 0x5c, 0xcc, 0x66,
        0x0f, 0x28, 0xd9, 0x66, 0x0f, 0x28, 0xc1, 0xf2, 0x0f, 0x59, 0xc1, 0x66, 0x0f, 0x15, 0xdb,
        0x66, 0x0f, 0x28, 0xe3, 0x66, 0x0f, 0x28, 0xd9, 0x66, 0x0f, 0x28, 0xd4, 0xf2, 0x0f, 0x59,
        0xd4, 0xf2, 0x0f, 0x58, 0xc2, 0x66, 0x0f, 0x28, 0xd5, 0xf2, 0x0f, 0x59, 0xd5, 0xf2, 0x0f,
        0x58, 0xc2,
    ];
    let w = window(&code);
    assert_eq!(w.history().len(), 26);
    assert_eq!(w.insns().len(), WINDOW);
    // movupd xmm4,[rdx] and subsd xmm5,[rdx+0x10] are the window's first
    // two instructions; the load of rdx is before the window.
    let b = blame(&w, &never, &no_local);
    assert_eq!((b.rule, b.accesses()), (Rule::Split, &[0u8, 1][..]));
    let x_j = Operand::Loaded(Reload {
        base: Register::R13,
        base_delta: 0,
        base_deref: None,
        index: Register::RCX,
        index_delta: 0,
        scale: 8,
        disp: 0,
    });
    assert_eq!(address_registers(&w, 0), (x_j, Operand::None));
    assert_eq!(address_registers(&w, 1), (x_j, Operand::None));
}

#[test]
fn the_stack_protector_canary_does_not_take_the_blame() {
    // The entry of vader's progress function (mca_btl_vader.so +0x4d50):
    // 41 57 .. 53            push r15 .. push rbx
    // 48 81 ec b8 00 00 00   sub rsp,0xb8
    // 64 48 8b 04 25 28 00 00 00   mov rax,fs:[0x28]
    // 48 89 84 24 a8 00 00 00      mov [rsp+0xa8],rax   <- landed
    let code = [
        0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x55, 0x53, 0x48, 0x81, 0xec, 0xb8, 0x00,
        0x00, 0x00, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00, 0x48, 0x89, 0x84, 0x24,
        0xa8, 0x00, 0x00, 0x00,
    ];
    let w = window(&code);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Other);
    let w = window(&code[..26]);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Other);
    // A TLS array (an index): memory like any other.
    // 64 48 8b 04 c5 00 00 00 00   mov rax,fs:[rax*8]
    let w = window(&[0x64, 0x48, 0x8b, 0x04, 0xc5, 0, 0, 0, 0]);
    assert_eq!(blame(&w, &never, &no_local).rule, Rule::Landed);
}

#[test]
fn cmpxchg_replaces_rax() {
    // 48 8b 10               mov rdx,[rax]
    // f0 48 0f b1 0f         lock cmpxchg [rdi],rcx  (rax = old value on failure)
    // 48 01 d3               add rbx,rdx            <- landed
    let w = window(&[
        0x48, 0x8b, 0x10, 0xf0, 0x48, 0x0f, 0xb1, 0x0f, 0x48, 0x01, 0xd3,
    ]);
    assert_eq!(blame(&w, &never, &no_local).accesses(), [0]);
    assert_eq!(address_registers(&w, 0).0, Operand::Lost);
}
