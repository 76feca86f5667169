//! Blocks below `BIG_BYTES`, in lock-free open-addressing hash tables keyed
//! by address granule. A block is entered once per granule it touches, so
//! a lookup hashes the address's granule and checks the few blocks entered
//! there. Two tables of this kind exist (`objects`): 4 KiB granules for
//! small blocks (1 or 2 granules for most, at most 5), and 64 KiB
//! granules for blocks of 16 KiB and more (at most 5 granules for a block
//! under 256 KiB, where 4 KiB granules would take 64: each granule is a
//! random slot, a cache and TLB miss at insert and again at free).
//!
//! Each slot has a sequence number: a writer claims a free slot by moving
//! it from even to odd with a compare-and-swap, fills it, and makes it even
//! again; a reader that sees an odd or changed sequence skips the slot (a
//! block being entered or removed is not live yet, or not any more). Removed
//! slots become tombstones, reused by later inserts; probing stops at an
//! empty slot or after `MAX_PROBE` slots. No operation takes a lock.
//!
//! A writer turns an empty slot into a tombstone before it claims it, so an
//! odd slot is never empty and never ends a probe. That is what makes fork
//! cheap: a slot left odd in the child by a thread of the parent that was
//! writing it is skipped like any slot being written, at most one per such
//! thread, and nothing has to be scanned (a scan of the 96 MiB table took
//! 25 ms per fork, paid by every fork-then-exec).

use std::sync::atomic::{fence, AtomicU64, Ordering::*};

use super::{Block, Lookup};
use crate::sys;

/// 4 KiB granules, 2^21 slots (96 MiB of address space, mapped as used).
pub const SMALL: (u32, u32) = (12, 21);
/// 64 KiB granules, 2^18 slots (12 MiB).
pub const MEDIUM: (u32, u32) = (16, 18);
const MAX_PROBE: usize = 256;
const EMPTY: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;

#[repr(C)]
pub struct Slot {
    seq: AtomicU64,
    /// EMPTY, TOMBSTONE, or granule + 1.
    granule: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
    site: AtomicU64,
    record: AtomicU64,
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Slot {}

pub struct Granules {
    slots: &'static [Slot],
    /// log2 of the granule size in bytes.
    shift: u32,
    /// log2 of the number of slots.
    bits: u32,
}

impl Granules {
    /// A table of `2^bits` slots keyed by `2^shift`-byte granules
    /// ([`SMALL`], [`MEDIUM`]).
    pub fn new((shift, bits): (u32, u32)) -> Option<Granules> {
        Some(Granules {
            slots: sys::map_zeroed::<Slot>(1 << bits)?,
            shift,
            bits,
        })
    }

    fn home(&self, granule: u64) -> usize {
        (granule.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    fn probe(&self, granule: u64) -> impl Iterator<Item = &Slot> {
        let mask = self.slots.len() - 1;
        let first = self.home(granule);
        (0..MAX_PROBE).map(move |i| &self.slots[(first + i) & mask])
    }

    /// Enters `block` in every granule it touches; false if the table is
    /// too full (the block is then not tracked).
    pub fn insert(&self, block: Block) -> bool {
        let first = block.start >> self.shift;
        let last = (block.end - 1) >> self.shift;
        for g in first..=last {
            if !self.insert_one(g, &block) {
                for done in first..g {
                    self.remove_one(done, block.start);
                }
                return false;
            }
        }
        true
    }

    fn insert_one(&self, granule: u64, block: &Block) -> bool {
        for slot in self.probe(granule) {
            let s = slot.seq.load(Acquire);
            if s & 1 == 1 {
                continue;
            }
            let g = slot.granule.load(Relaxed);
            if g != EMPTY && g != TOMBSTONE {
                continue;
            }
            // Empty -> tombstone first: an odd slot must not end a probe.
            // Losing this race leaves a tombstone (or another writer's
            // slot), either of which probes pass over.
            if g == EMPTY
                && slot
                    .granule
                    .compare_exchange(EMPTY, TOMBSTONE, Relaxed, Relaxed)
                    .is_err()
            {
                continue;
            }
            if slot
                .seq
                .compare_exchange(s, s + 1, Acquire, Relaxed)
                .is_err()
            {
                continue;
            }
            fence(Release);
            slot.start.store(block.start, Relaxed);
            slot.end.store(block.end, Relaxed);
            slot.site.store(block.site as u64, Relaxed);
            slot.record.store(block.record, Relaxed);
            slot.granule.store(granule + 1, Relaxed);
            slot.seq.store(s + 2, Release);
            return true;
        }
        false
    }

    /// Reads a stable slot of `granule`; `None` if it is free, of another
    /// granule, or being written.
    fn read(slot: &Slot, granule: u64) -> Option<(Block, u64)> {
        let s1 = slot.seq.load(Acquire);
        if s1 & 1 == 1 || slot.granule.load(Relaxed) != granule + 1 {
            return None;
        }
        let block = Block {
            start: slot.start.load(Relaxed),
            end: slot.end.load(Relaxed),
            site: slot.site.load(Relaxed) as u32,
            record: slot.record.load(Relaxed),
        };
        fence(Acquire);
        (slot.seq.load(Relaxed) == s1 && slot.granule.load(Relaxed) == granule + 1)
            .then_some((block, s1))
    }

    fn remove_one(&self, granule: u64, start: u64) -> Option<Block> {
        for slot in self.probe(granule) {
            if slot.granule.load(Relaxed) == EMPTY {
                return None;
            }
            let Some((block, s)) = Self::read(slot, granule) else {
                continue;
            };
            if block.start != start {
                continue;
            }
            if slot
                .seq
                .compare_exchange(s, s + 1, Acquire, Relaxed)
                .is_err()
            {
                return None; // Someone else is removing it (a double free).
            }
            slot.granule.store(TOMBSTONE, Relaxed);
            slot.seq.store(s + 2, Release);
            return Some(block);
        }
        None
    }

    /// Removes the block starting at `start` from every granule.
    pub fn remove(&self, start: u64) -> Option<Block> {
        let first = start >> self.shift;
        let block = self.remove_one(first, start)?;
        for g in first + 1..=((block.end - 1) >> self.shift) {
            self.remove_one(g, start);
        }
        Some(block)
    }

    /// Gives the block starting at `start` the site `site` in every granule
    /// it is entered in; returns the block as it was. A slot is odd (skipped
    /// by readers) only while its site is stored.
    pub fn set_site(&self, start: u64, site: u32) -> Option<Block> {
        let first = start >> self.shift;
        let mut old: Option<Block> = None;
        let mut g = first;
        loop {
            for slot in self.probe(g) {
                if slot.granule.load(Relaxed) == EMPTY {
                    break;
                }
                let Some((block, s)) = Self::read(slot, g) else {
                    continue;
                };
                if block.start != start {
                    continue;
                }
                if slot
                    .seq
                    .compare_exchange(s, s + 1, Acquire, Relaxed)
                    .is_ok()
                {
                    fence(Release);
                    slot.site.store(site as u64, Relaxed);
                    slot.seq.store(s + 2, Release);
                    old.get_or_insert(block);
                }
                break;
            }
            let Some(block) = old else {
                return None; // Not in its first granule: not tracked.
            };
            if g >= (block.end - 1) >> self.shift {
                return Some(block);
            }
            g += 1;
        }
    }

    /// The block starting exactly at `start`.
    pub fn find_start(&self, start: u64) -> Option<Block> {
        let granule = start >> self.shift;
        for slot in self.probe(granule) {
            if slot.granule.load(Relaxed) == EMPTY {
                return None;
            }
            if let Some((block, _)) = Self::read(slot, granule) {
                if block.start == start {
                    return Some(block);
                }
            }
        }
        None
    }

    /// The site of the block containing `addr`. Safe in a signal handler:
    /// no lock, no waiting, at most `MAX_PROBE` slots read.
    pub fn lookup(&self, addr: u64) -> Lookup {
        let granule = addr >> self.shift;
        for slot in self.probe(granule) {
            if slot.granule.load(Relaxed) == EMPTY {
                break;
            }
            if let Some((block, _)) = Self::read(slot, granule) {
                if addr >= block.start && addr < block.end {
                    return Lookup::Block {
                        site: block.site,
                        start: block.start,
                        end: block.end,
                    };
                }
            }
        }
        Lookup::NotFound
    }

    /// Reads one word of every page of the table, so that later lookups
    /// (which land on random pages) never fault: with page-fault sampling,
    /// a fault inside the handler's lookup would be sampled in turn.
    /// Untouched pages map the shared zero page: no memory is used.
    pub fn prefault(&self) -> u64 {
        let per_page = (4096 / std::mem::size_of::<Slot>()).max(1);
        self.slots
            .iter()
            .step_by(per_page)
            .map(|s| s.seq.load(Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(start: u64, size: u64, site: u32) -> Block {
        Block {
            start,
            end: start + size,
            site,
            record: 0,
        }
    }

    /// What a forked child sees when a thread of the parent stopped inside
    /// an insert: its slot stays odd for ever. Blocks entered later in the
    /// same probe chain must still be found and removed, without any repair.
    #[test]
    fn a_slot_left_odd_by_a_writer_that_never_returns_is_passed_over() {
        let t = Granules::new((12, 10)).unwrap();
        let start = 0x7000_0000_0000_u64;
        let home = &t.slots[t.home(start >> 12)];
        // The writer's steps up to the point where it stopped: the empty
        // slot made a tombstone, then claimed (odd).
        home.granule
            .compare_exchange(EMPTY, TOMBSTONE, Relaxed, Relaxed)
            .unwrap();
        home.seq.store(1, Relaxed);
        // Blocks of the same granule, entered after it by the child.
        assert!(t.insert(block(start, 100, 7)));
        assert!(t.insert(block(start + 200, 100, 8)));
        assert_eq!(t.lookup(start + 50).site(), Some(7));
        assert_eq!(t.lookup(start + 250).site(), Some(8));
        assert_eq!(t.find_start(start + 200).map(|b| b.site), Some(8));
        assert_eq!(t.set_site(start, 9).map(|b| b.site), Some(7));
        assert_eq!(t.lookup(start + 50).site(), Some(9));
        assert_eq!(t.remove(start).map(|b| b.site), Some(9));
        assert_eq!(t.lookup(start + 50), Lookup::NotFound);
        assert_eq!(t.lookup(start + 250).site(), Some(8));
        // The stuck slot was never reused.
        assert_eq!(home.seq.load(Relaxed), 1);
        assert_eq!(home.granule.load(Relaxed), TOMBSTONE);

        // Why the tombstone comes first: a slot claimed while still empty
        // ends every probe, so a block entered past it would be lost.
        let t = Granules::new((12, 10)).unwrap();
        t.slots[t.home(start >> 12)].seq.store(1, Relaxed);
        assert!(t.insert(block(start, 100, 7)));
        assert_eq!(t.lookup(start + 50), Lookup::NotFound);
    }

    /// Every slot an insert claims was made a tombstone first: no odd
    /// slot is ever empty.
    #[test]
    fn inserts_never_leave_an_odd_empty_slot() {
        let t = Granules::new((12, 8)).unwrap();
        for i in 0..100u64 {
            assert!(t.insert(block(0x5000_0000 + i * 4096 * 7, 64, i as u32)));
        }
        for i in (0..100u64).step_by(2) {
            assert!(t.remove(0x5000_0000 + i * 4096 * 7).is_some());
        }
        for s in t.slots {
            let g = s.granule.load(Relaxed);
            assert_eq!(s.seq.load(Relaxed) & 1, 0);
            if s.seq.load(Relaxed) > 0 {
                assert_ne!(g, EMPTY, "a slot that was claimed is never empty again");
            }
        }
    }
}
