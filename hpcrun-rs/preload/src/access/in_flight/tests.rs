//! The loop bodies of a per-row CSR SpMV and of a gather, as gcc -O3
//! compiles them, and the shares their loads get.

use super::*;

/// `sum += vals[j] * x[cols[j]]` at 0x1a10: the column index load, the
/// gather of `x` through it, the values load fused into the multiply.
const SPMV: [u8; 29] = [
    0x49, 0x63, 0x14, 0x83, // movslq (%r11,%rax,4),%rdx
    0xf2, 0x41, 0x0f, 0x10, 0x14, 0xd4, // movsd (%r12,%rdx,8),%xmm2
    0xf2, 0x41, 0x0f, 0x59, 0x14, 0xc2, // mulsd (%r10,%rax,8),%xmm2
    0x48, 0x83, 0xc0, 0x01, // add $1,%rax
    0xf2, 0x0f, 0x58, 0xca, // addsd %xmm2,%xmm1
    0x4c, 0x39, 0xc0, // cmp %r8,%rax
    0x75, 0xe3, // jne 0x1a10
];
const SPMV_AT: u64 = 0x1a10;

/// `sum += grid[index[k ^ flip]]` at 0x1350: the index load overwrites
/// its own index, computed from the counter by a xor.
const GATHER: [u8; 25] = [
    0x49, 0x89, 0xc8, // mov %rcx,%r8
    0x49, 0x31, 0xc0, // xor %rax,%r8
    0x48, 0x83, 0xc0, 0x01, // add $1,%rax
    0x4e, 0x63, 0x04, 0x86, // movslq (%rsi,%r8,4),%r8
    0xf2, 0x42, 0x0f, 0x58, 0x04, 0xc7, // addsd (%rdi,%r8,8),%xmm0
    0x48, 0x39, 0xc2, // cmp %rax,%rdx
    0x75, 0xe7, // jne 0x1350
];
const GATHER_AT: u64 = 0x1350;

fn shares(code: &[u8], start: u64, from: u64, blamed: u64) -> Vec<(u64, u64)> {
    let body = loop_around(code, start, from, blamed).expect("a loop");
    let a = body.position(blamed).unwrap();
    let (m, n) = members(&body, a, &|_| false);
    m[..n]
        .iter()
        .map(|m| (body.insns()[m.at].ip(), m.weight))
        .collect()
}

#[test]
fn the_loop_is_found_from_any_ip_of_its_body() {
    for from in [0x1a10, 0x1a14, 0x1a1a, 0x1a28] {
        let body = loop_around(&SPMV, SPMV_AT, from, 0x1a10).unwrap();
        assert_eq!(body.head(), 0x1a10);
        assert_eq!(body.insns().len(), 7);
    }
    // An IP past the back edge is outside the loop.
    assert!(loop_around(&SPMV, SPMV_AT, 0x1a2d, 0x1a10).is_none());
}

/// Blamed on the index load: the values stream was in flight with it
/// (8 bytes a iteration against the indices' 4); the gather of `x` waits
/// for the index and was not.
#[test]
fn an_index_load_shares_with_the_values_stream() {
    assert_eq!(
        shares(&SPMV, SPMV_AT, 0x1a14, 0x1a10),
        vec![(0x1a10, 4), (0x1a1a, 8)]
    );
}

/// Blamed on the values: the index stream shares, the gather of `x`
/// (its address loaded) has no cost known from the code.
#[test]
fn a_values_load_shares_with_the_index_stream_not_the_gather() {
    assert_eq!(
        shares(&SPMV, SPMV_AT, 0x1a20, 0x1a1a),
        vec![(0x1a1a, 8), (0x1a10, 4)]
    );
}

/// Blamed on the gather: it weighs a line; the index that produced its
/// address and the values stream get their bytes.
#[test]
fn a_gather_keeps_a_line_and_shares_with_the_streams() {
    assert_eq!(
        shares(&SPMV, SPMV_AT, 0x1a1a, 0x1a14),
        vec![(0x1a14, 64), (0x1a10, 4), (0x1a1a, 8)]
    );
    // The index computed by a xor from the counter: its own 4 bytes.
    assert_eq!(
        shares(&GATHER, GATHER_AT, 0x1364, 0x135e),
        vec![(0x135e, 64), (0x135a, 4)]
    );
}

/// Blamed on the self-clobbering index load of the gather: the gather
/// depends on it, nothing else loads: no share.
#[test]
fn nothing_to_share_when_every_other_load_waits_for_the_blamed_one() {
    assert!(shares(&GATHER, GATHER_AT, 0x135e, 0x135a).is_empty());
}

/// A store is never shared; a body with a call is not a loop body here.
#[test]
fn stores_and_calls_are_left_alone() {
    // 1: mov %rdx,(%rdi,%rax,8); movsd (%rsi,%rax,8),%xmm0; add $1,%rax;
    //    cmp %rcx,%rax; jne 1b
    let code = [
        0x48, 0x89, 0x14, 0xc7, 0xf2, 0x0f, 0x10, 0x04, 0xc6, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39,
        0xc8, 0x75, 0xee,
    ];
    assert!(shares(&code, 0x1000, 0x1004, 0x1000).is_empty());
    assert_eq!(
        shares(&code, 0x1000, 0x1009, 0x1004),
        Vec::<(u64, u64)>::new(),
        "the store is not a load in flight"
    );
    // 1: mov (%rsi,%rax,8),%rdx; call *%r9; add $1,%rax; jne 1b
    let call = [
        0x48, 0x8b, 0x14, 0xc6, 0x41, 0xff, 0xd1, 0x48, 0x83, 0xc0, 0x01, 0x75, 0xf3,
    ];
    assert!(loop_around(&call, 0x1000, 0x1007, 0x1000).is_none());
}

/// Over many samples each member gets its weight's share, and the draw
/// does not depend on anything but the turn.
#[test]
fn the_draw_gives_each_member_its_share() {
    let members = [
        Member { at: 0, weight: 4 },
        Member { at: 1, weight: 8 },
        Member { at: 2, weight: 64 },
    ];
    let mut got = [0u64; 3];
    let turns = 76_000u64;
    for turn in 0..turns {
        got[choose(&members, turn).unwrap().at] += 1;
    }
    for (m, &n) in members.iter().zip(&got) {
        let want = turns * m.weight / 76;
        assert!(n.abs_diff(want) * 100 <= want, "{got:?}");
    }
    assert_eq!(choose(&members, 7), choose(&members, 7));
    assert!(choose(&[Member { at: 0, weight: 0 }], 1).is_none());
}
