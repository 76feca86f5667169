//! Known instruction boundaries in the program's code, process-wide, so
//! that finding the instruction before a sampled IP (the skid correction of
//! `mem:soft`, see [`crate::access::soft`]) never decodes a long function from its
//! start more than once.
//!
//! x86-64 cannot be decoded backwards, so the handler decodes forward from
//! a known boundary to the IP. Without anchors that is the function's
//! start: a sample at a new IP deep inside a 20 KB function decodes
//! thousands of instructions. Every forward decode notes here the first
//! instruction it meets in each 256-byte block of code; later samples start
//! from the closest anchor at or before their IP (in the same function)
//! and decode at most a few hundred bytes.
//!
//! The table is direct-mapped: one `AtomicU64` per slot holding the
//! boundary's address (its block is `address >> 8`, so a slot is valid for
//! the block it names and a colliding block simply overwrites it). One
//! atomic word per entry: readers never see a torn entry, no lock is taken
//! and nothing is allocated, so the signal handler may read and write it.
//! Anchors are only ever taken from decodes that started at a function's
//! start or at an earlier anchor, so every anchor is a real boundary (as
//! long as the code is not data, the assumption the forward decode makes
//! anyway). Code that is unloaded and replaced by other code at the same
//! address could leave stale anchors; a decode from one that does not land
//! on the IP falls back to the function's start.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use crate::sys;

/// Bytes of code per anchor.
pub const BLOCK_SHIFT: u32 = 8;
/// Slots of the table (512 KiB: 16 MiB of hot code at one anchor per block).
const SLOTS: usize = 1 << 16;
/// Blocks looked at below the IP's own block.
const LOOKBACK: u64 = 8;

static TABLE: OnceLock<&'static [AtomicU64]> = OnceLock::new();

/// Maps the table (start-up, before the first sample); false if the memory
/// cannot be had (then every decode starts at the function's start).
pub fn init() -> bool {
    if TABLE.get().is_some() {
        return true;
    }
    match sys::map_zeroed::<AtomicU64>(SLOTS) {
        Some(t) => TABLE.set(t).is_ok() || TABLE.get().is_some(),
        None => false,
    }
}

fn slot(block: u64) -> usize {
    (block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
}

/// Notes that an instruction starts at `boundary`.
pub fn record(boundary: u64) {
    if let Some(t) = TABLE.get() {
        t[slot(boundary >> BLOCK_SHIFT)].store(boundary, Relaxed);
    }
}

/// The latest known boundary in `[floor, ip)`, looking at `ip`'s block and
/// the [`LOOKBACK`] blocks below it.
pub fn start_before(ip: u64, floor: u64) -> Option<u64> {
    let t = TABLE.get()?;
    let top = ip >> BLOCK_SHIFT;
    let bottom = (floor >> BLOCK_SHIFT).max(top.saturating_sub(LOOKBACK));
    (bottom..=top).rev().find_map(|block| {
        let b = t[slot(block)].load(Relaxed);
        (b != 0 && b >> BLOCK_SHIFT == block && b >= floor && b < ip).then_some(b)
    })
}

/// Forgets every anchor (benchmarks: the first sample in a function).
#[doc(hidden)]
pub fn clear() {
    if let Some(t) = TABLE.get() {
        for s in t.iter() {
            s.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_found_below_the_ip_and_above_the_floor() {
        assert!(init());
        let base = 0x7f00_1234_0000u64;
        record(base + 0x105);
        record(base + 0x203);
        assert_eq!(start_before(base + 0x250, base), Some(base + 0x203));
        // An anchor at or past the IP is not a start.
        assert_eq!(start_before(base + 0x203, base), Some(base + 0x105));
        // Nor one below the function's start.
        assert_eq!(start_before(base + 0x150, base + 0x110), None);
        // Too far below the IP.
        assert_eq!(start_before(base + 0x105 + (20 << BLOCK_SHIFT), base), None);
    }
}
