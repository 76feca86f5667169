//! rust_vec: a Rust program whose arrays are `Vec`s: a 64 MiB lookup
//! table from `vec![0; n]` (alloc_zeroed inside alloc::raw_vec), a
//! histogram from `Vec::with_capacity` filled by `push`, and a small
//! vector of keys from `collect()`. The hot loop gathers from `table` at
//! pseudo-random indices.
//!
//! Expected finding (data-centric view): `table` holds most of the
//! samples, named after its variable through the inlined alloc::raw_vec
//! frames of the Rust standard library (files under /rustc/<hash>/library).
//!
//! Build: rustc -O -g rust_vec.rs   Run: ./rust_vec [REPEAT]

use std::hint::black_box;

const TABLE_LEN: usize = 8 << 20; // u64s: 64 MiB
const HIST_LEN: usize = 4096;
const KEYS: usize = 1 << 20;

/// xorshift64: cheap pseudo-random indices.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Random gather: one cache and TLB miss per lookup.
#[inline(never)]
fn gather(table: &[u64], keys: &[u64], hist: &mut [u64]) -> u64 {
    let mut sum = 0u64;
    for &k in keys {
        let v = table[(k as usize) % table.len()];
        hist[(v as usize) % hist.len()] += 1;
        sum = sum.wrapping_add(v);
    }
    sum
}

fn main() {
    let repeat: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4);
    let mut table: Vec<u64> = vec![0; black_box(TABLE_LEN)];
    for (i, t) in table.iter_mut().enumerate() {
        *t = (i as u64).wrapping_mul(2654435761) >> 7;
    }
    let mut hist = Vec::with_capacity(HIST_LEN);
    for _ in 0..black_box(HIST_LEN) {
        hist.push(0u64);
    }
    let mut state = 88172645463325252u64;
    let keys: Vec<u64> = (0..black_box(KEYS)).map(|_| next(&mut state)).collect();
    let mut sum = 0u64;
    for _ in 0..repeat {
        sum = sum.wrapping_add(gather(black_box(&table), &keys, &mut hist));
    }
    let peak = hist.iter().max().copied().unwrap_or(0);
    println!("rust_vec repeat={repeat} checksum={sum} peak={peak}");
}
