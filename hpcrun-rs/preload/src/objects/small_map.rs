//! The compact map of live small heap blocks (under [`SMALL_MAX`] bytes
//! and under `--min-bytes`): every one of them, with its site, in a few
//! bytes per block, so that a program of a million per-row or per-node
//! blocks gets each site its share instead of one anonymous bucket.
//!
//! Per 4 KiB page of the heap that holds tracked blocks, a [`PageDir`]
//! (128 bytes, in chunks of 256 MiB of the heap mapped on first use; a
//! two-level directory of 8 KiB, then 4 KiB per 128 GiB of the address
//! space that holds chunks; under an address-space limit the chunks
//! cover less, [`chunk_shift`]):
//! * a bitmap of the 8-byte positions where a tracked block starts;
//! * the page's *record*: one 8-byte entry (size, site) per set bit, in
//!   address order, so the entry of a start is its rank among the bits.
//!
//! Records come from per-shard slabs in size classes of 4 to 512 entries
//! and move to the next class when full; a block costs its 8-byte entry
//! (up to twice that in a half-empty class) and its share of the page's
//! directory: about 20 bytes for blocks of 200 bytes, 10 for a page of
//! 32-byte nodes. Blocks allocated one after another share a page, so an
//! insert usually appends to a record already in cache; nothing is ever
//! rehashed.
//!
//! Writers (the allocation hooks) take the spin lock of their page's
//! shard ([`SHARDS`], by page), never held by a signal handler, and
//! change a page inside its sequence count (odd while changing). A
//! reader (the sample handler) takes no lock: it reads the count, the
//! bitmap, the rank's entry, and the count again, and retries a few times
//! if a writer was at work (then reports nothing: never a wrong block).
//! A record a writer gave back stays mapped (slabs are never unmapped), so
//! a reader that raced with it reads stale bytes and retries.
//!
//! Memory is bounded by a cap ([`SmallMap::set_cap`]): a slab that would
//! grow past it does not, and the block is left untracked and counted by
//! the caller, with the reason ([`Untracked`]).

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering::*};

use crate::sys;

/// Blocks under this size (and under `--min-bytes`) live here.
pub const SMALL_MAX: u64 = 4096;
/// Shards of the writers' locks and slabs (by page).
pub const SHARDS: usize = 64;
const PAGE_SHIFT: u32 = 12;
/// Bitmap words per page: one bit per 8-byte position.
const WORDS: usize = 4096 / 8 / 64;
/// A directory chunk covers 256 MiB of the heap with 8 MiB of address
/// space (its pages' `PageDir`s, touched only where blocks are), less
/// under an address-space limit ([`chunk_shift`]).
const CHUNK_SHIFT: u32 = 28;
/// The smallest chunk under a limit: 4 MiB of the heap, 128 KiB of
/// `PageDir`s.
const MIN_CHUNK_SHIFT: u32 = 22;
/// Bits of the user address space (47).
const ADDRESS_BITS: u32 = 47;
/// Chunk addresses per leaf of the directory (a 4 KiB page).
const LEAF_BITS: u32 = 9;
/// Record size classes: 4 << class entries, up to 512 (a page of 8-byte
/// positions).
const CLASSES: usize = 8;
/// Bytes a shard's slab maps at a time, less under an address-space
/// limit ([`slab_bytes`]).
const SLAB_BYTES: usize = 256 << 10;
/// The smallest slab under a limit (four records of the largest class).
const MIN_SLAB_BYTES: usize = 16 << 10;
/// The default cap's floor: tracking may always take this much.
pub const DEFAULT_CAP_FLOOR: u64 = 64 << 20;
/// Times a reader retries a page a writer is changing.
const READ_TRIES: usize = 8;

/// Why a small block was not entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untracked {
    /// The tracking memory cap was reached.
    Cap,
    /// The kernel refused memory for the map.
    NoMemory,
    /// An address this map cannot hold (unaligned to 8 bytes, beyond 47
    /// bits).
    Address,
}

/// One page's tracked blocks (see the module overview).
#[repr(C, align(128))]
struct PageDir {
    starts: [AtomicU64; WORDS],
    /// Odd while a writer changes the page.
    seq: AtomicU64,
    /// Address of the record (0: none).
    record: AtomicU64,
    /// The record's size class, and its entries in use.
    class: AtomicU32,
    len: AtomicU32,
}

// SAFETY: atomics only: all-zero bytes are a valid value.
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for PageDir {}

/// A shard: its writers' lock and its slab (free records per class, and
/// the unused end of the last slab mapping). Only touched under the lock.
#[repr(C, align(64))]
struct Shard {
    lock: AtomicBool,
    free: [AtomicU64; CLASSES],
    bump: AtomicU64,
    bump_end: AtomicU64,
}

impl Shard {
    const fn new() -> Shard {
        Shard {
            lock: AtomicBool::new(false),
            free: [const { AtomicU64::new(0) }; CLASSES],
            bump: AtomicU64::new(0),
            bump_end: AtomicU64::new(0),
        }
    }
}

/// The process map's shards (8 KiB): a zero-initialised static, so that
/// their pages are touched only when blocks are entered there (a process
/// that tracks no small block never touches them).
static PROCESS_SHARDS: [Shard; SHARDS] = [const { Shard::new() }; SHARDS];

/// The map (one per process: [`get`]).
pub struct SmallMap {
    shards: &'static [Shard; SHARDS],
    /// Directory: leaf index (a chunk index's high bits) -> address of a
    /// leaf of 1 << [`LEAF_BITS`] slots (0: none), each the address of
    /// its chunk's `PageDir`s (0: none).
    leaves: &'static [AtomicU64],
    /// A chunk covers 1 << `chunk_shift` bytes of the heap.
    chunk_shift: u32,
    /// Bytes of a shard's slab ([`slab_bytes`]).
    slab_bytes: usize,
    chunk_lock: AtomicBool,
    /// Bytes of slabs mapped, and of page directories in use.
    bytes: AtomicU64,
    /// The most bytes the map may take (0: [`DEFAULT_CAP_FLOOR`] or half
    /// the live blocks' bytes, whichever is more).
    cap: AtomicU64,
    /// Bytes of the live blocks.
    live_bytes: AtomicU64,
    /// Live blocks, and the most live at once.
    live: AtomicU64,
    peak: AtomicU64,
}

static MAP: std::sync::OnceLock<SmallMap> = std::sync::OnceLock::new();

/// The map, created at first use (`None` if the kernel refused its
/// directory).
pub fn get() -> Option<&'static SmallMap> {
    if let Some(m) = MAP.get() {
        return Some(m);
    }
    let m = SmallMap::new(&PROCESS_SHARDS)?;
    let _ = MAP.set(m);
    MAP.get()
}

/// The map if it was created (for readers: nothing is created).
pub fn existing() -> Option<&'static SmallMap> {
    MAP.get()
}

fn shard_of(start: u64) -> usize {
    ((start >> PAGE_SHIFT).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 58) as usize % SHARDS
}

/// Entries of a record of size class `class`.
fn capacity(class: u32) -> usize {
    4 << class
}

/// The entries of the record at `address` of `class` (stale but mapped
/// memory when the record was given back meanwhile).
fn record_of(address: u64, class: u32) -> &'static [AtomicU64] {
    if address == 0 {
        return &[];
    }
    // SAFETY: `address` is a record carved by `SmallMap::alloc_record`
    // from a slab mapping that is never unmapped, of this class's size;
    // atomics of any bit pattern are valid.
    #[allow(unsafe_code)]
    unsafe {
        std::slice::from_raw_parts(address as *const AtomicU64, capacity(class))
    }
}

/// Bits of a page's bitmap strictly below position `pos`.
fn rank(starts: &[AtomicU64; WORDS], pos: usize) -> usize {
    let mut n = 0;
    for w in &starts[..pos / 64] {
        n += w.load(Relaxed).count_ones() as usize;
    }
    let below = (1u64 << (pos % 64)) - 1;
    n + (starts[pos / 64].load(Relaxed) & below).count_ones() as usize
}

/// A chunk covers 1 << this many bytes of the heap: 256 MiB, or under an
/// address-space limit of `limit` bytes as much as keeps a chunk's
/// `PageDir`s (1/32 of what it covers) within 1/256 of the limit, at
/// least 4 MiB of the heap (a program under a limit keeps most of it).
pub fn chunk_shift(limit: Option<u64>) -> u32 {
    let Some(limit) = limit else {
        return CHUNK_SHIFT;
    };
    let mut shift = CHUNK_SHIFT;
    // A chunk's `PageDir`s: 128 bytes per 4 KiB page, 1 << (shift - 5).
    while shift > MIN_CHUNK_SHIFT && 1u64 << (shift - 5) > limit / 256 {
        shift -= 1;
    }
    shift
}

/// Bytes of a shard's slab: [`SLAB_BYTES`], or under an address-space
/// limit of `limit` bytes the power of two that keeps a slab for every
/// shard within 1/64 of the limit, at least [`MIN_SLAB_BYTES`] (blocks
/// spread over many pages reach every shard soon: full-size slabs
/// took 16 MiB of address space for a few thousand blocks).
pub fn slab_bytes(limit: Option<u64>) -> usize {
    let Some(limit) = limit else {
        return SLAB_BYTES;
    };
    let mut bytes = SLAB_BYTES;
    while bytes > MIN_SLAB_BYTES && (bytes * SHARDS) as u64 > limit / 64 {
        bytes /= 2;
    }
    bytes
}

fn entry(size: u64, site: u32) -> u64 {
    size << 32 | site as u64
}

fn split(e: u64) -> (u64, u32) {
    (e >> 32, e as u32)
}

impl SmallMap {
    fn new(shards: &'static [Shard; SHARDS]) -> Option<SmallMap> {
        let limit = sys::address_space_limit();
        let chunk_shift = chunk_shift(limit);
        Some(SmallMap {
            shards,
            leaves: sys::map_own::<AtomicU64>(1 << (ADDRESS_BITS - chunk_shift - LEAF_BITS))?,
            chunk_shift,
            slab_bytes: slab_bytes(limit),
            chunk_lock: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            cap: AtomicU64::new(0),
            live_bytes: AtomicU64::new(0),
            live: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        })
    }

    /// Sets the cap on the bytes the map may take (0: the default,
    /// [`DEFAULT_CAP_FLOOR`] or half the live blocks' bytes).
    pub fn set_cap(&self, bytes: u64) {
        self.cap.store(bytes, Relaxed);
    }

    /// Bytes of slabs mapped and of page directories in use.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Live blocks now, and the most that were live at once.
    pub fn live_and_peak(&self) -> (u64, u64) {
        (self.live.load(Relaxed), self.peak.load(Relaxed))
    }

    fn over_cap(&self, more: u64) -> bool {
        let cap = match self.cap.load(Relaxed) {
            0 => DEFAULT_CAP_FLOOR.max(self.live_bytes.load(Relaxed) / 2),
            cap => cap,
        };
        self.bytes.load(Relaxed) + more > cap
    }

    /// Pages per chunk.
    fn chunk_pages(&self) -> usize {
        1 << (self.chunk_shift - PAGE_SHIFT)
    }

    /// The address in `slot` (a leaf or a chunk), creating it with
    /// `make` (under the chunk lock) if `create`; `None` if absent.
    fn slot_or_make(
        &self,
        slot: &AtomicU64,
        create: bool,
        make: impl FnOnce() -> Option<u64>,
    ) -> Option<u64> {
        let mut base = slot.load(Acquire);
        if base == 0 {
            if !create {
                return None;
            }
            super::lock(&self.chunk_lock);
            base = slot.load(Acquire);
            if base == 0 {
                if let Some(made) = make() {
                    base = made;
                    slot.store(base, Release);
                }
            }
            super::unlock(&self.chunk_lock);
        }
        (base != 0).then_some(base)
    }

    /// The directory entry of `page`, creating its leaf and chunk if
    /// `create`.
    fn dir(&self, page: u64, create: bool) -> Option<&'static PageDir> {
        let chunk = (page >> (self.chunk_shift - PAGE_SHIFT)) as usize;
        let leaf_slot = self.leaves.get(chunk >> LEAF_BITS)?;
        let leaf = self.slot_or_make(leaf_slot, create, || {
            sys::map_own::<AtomicU64>(1 << LEAF_BITS).map(|t| t.as_ptr() as u64)
        })?;
        // SAFETY: `leaf` is a `map_own` table of 1 << LEAF_BITS slots,
        // never unmapped; the index is below that.
        #[allow(unsafe_code)]
        let slot = unsafe { &*(leaf as *const AtomicU64).add(chunk & ((1 << LEAF_BITS) - 1)) };
        let pages = self.chunk_pages();
        let base = self.slot_or_make(slot, create, || {
            sys::map_own::<PageDir>(pages).map(|t| t.as_ptr() as u64)
        })?;
        let index = page as usize & (pages - 1);
        // SAFETY: `base` is a `map_own` table of `chunk_pages()`
        // directories, never unmapped; `index` is below that.
        #[allow(unsafe_code)]
        Some(unsafe { &*(base as *const PageDir).add(index) })
    }

    /// A record of `class` from the shard's slab; with its lock held.
    fn alloc_record(&self, shard: &Shard, class: u32) -> Result<u64, Untracked> {
        let head = shard.free[class as usize].load(Relaxed);
        if head != 0 {
            let next = record_of(head, class)[0].load(Relaxed);
            shard.free[class as usize].store(next, Relaxed);
            return Ok(head);
        }
        let bytes = (capacity(class) * 8) as u64;
        let mut at = shard.bump.load(Relaxed);
        if at == 0 || at + bytes > shard.bump_end.load(Relaxed) {
            let slab_bytes = self.slab_bytes as u64;
            if self.over_cap(slab_bytes) {
                return Err(Untracked::Cap);
            }
            let slab = sys::map_own::<AtomicU64>(self.slab_bytes / 8).ok_or(Untracked::NoMemory)?;
            at = slab.as_ptr() as u64;
            shard.bump_end.store(at + slab_bytes, Relaxed);
            self.bytes.fetch_add(slab_bytes, Relaxed);
        }
        shard.bump.store(at + bytes, Relaxed);
        Ok(at)
    }

    /// Gives a record back to its class's free list; with the lock held.
    fn free_record(shard: &Shard, address: u64, class: u32) {
        record_of(address, class)[0].store(shard.free[class as usize].load(Relaxed), Relaxed);
        shard.free[class as usize].store(address, Relaxed);
    }

    /// Enters the block `[start, start+size)` of `site`, replacing an
    /// entry at the same start (a free this library did not see). Returns
    /// the entry it replaced, as (size, site).
    pub fn insert(
        &self,
        start: u64,
        size: u64,
        site: u32,
    ) -> Result<Option<(u64, u32)>, Untracked> {
        if start & 7 != 0 || !(8..1 << 47).contains(&start) || size == 0 || size >= SMALL_MAX {
            return Err(Untracked::Address);
        }
        let dir = self
            .dir(start >> PAGE_SHIFT, true)
            .ok_or(Untracked::NoMemory)?;
        let shard = &self.shards[shard_of(start)];
        super::lock(&shard.lock);
        let result = self.insert_locked(shard, dir, start, entry(size, site));
        super::unlock(&shard.lock);
        match result {
            Ok(None) => {
                let live = self.live.fetch_add(1, Relaxed) + 1;
                self.peak.fetch_max(live, Relaxed);
                self.live_bytes.fetch_add(size, Relaxed);
            }
            Ok(Some((old, _))) => {
                self.live_bytes.fetch_add(size, Relaxed);
                self.live_bytes.fetch_sub(old, Relaxed);
            }
            Err(_) => {}
        }
        result
    }

    fn insert_locked(
        &self,
        shard: &Shard,
        dir: &PageDir,
        start: u64,
        value: u64,
    ) -> Result<Option<(u64, u32)>, Untracked> {
        let pos = ((start & 0xfff) >> 3) as usize;
        let bit = 1u64 << (pos % 64);
        let at = rank(&dir.starts, pos);
        let len = dir.len.load(Relaxed) as usize;
        let class = dir.class.load(Relaxed);
        let mut record = record_of(dir.record.load(Relaxed), class);
        if dir.starts[pos / 64].load(Relaxed) & bit != 0 {
            // The same start again: its entry is replaced.
            let s = begin_write(dir);
            let old = record[at].swap(value, Relaxed);
            end_write(dir, s);
            return Ok(Some(split(old)));
        }
        let mut new_record = None;
        if len == record.len() {
            // Full (or none yet): the next class.
            let class = if record.is_empty() { 0 } else { class + 1 };
            if class as usize >= CLASSES {
                return Err(Untracked::Cap); // Cannot happen: 512 positions.
            }
            if record.is_empty() && self.over_cap(128) {
                return Err(Untracked::Cap);
            }
            let address = self.alloc_record(shard, class)?;
            if record.is_empty() {
                self.bytes.fetch_add(128, Relaxed); // This page's directory.
            }
            new_record = Some((address, class));
        }
        let s = begin_write(dir);
        if let Some((address, new_class)) = new_record {
            let bigger = record_of(address, new_class);
            for (to, from) in bigger.iter().zip(&record[..len]) {
                to.store(from.load(Relaxed), Relaxed);
            }
            let old = dir.record.load(Relaxed);
            dir.record.store(address, Relaxed);
            dir.class.store(new_class, Relaxed);
            if old != 0 {
                Self::free_record(shard, old, class);
            }
            record = bigger;
        }
        // Shift the entries after the rank up by one, then write it.
        for i in (at..len).rev() {
            record[i + 1].store(record[i].load(Relaxed), Relaxed);
        }
        record[at].store(value, Relaxed);
        dir.starts[pos / 64].fetch_or(bit, Relaxed);
        dir.len.store(len as u32 + 1, Relaxed);
        end_write(dir, s);
        Ok(None)
    }

    /// Forgets the block starting at `start`; returns its (size, site) if
    /// it was entered. Without a lock when no tracked block starts there
    /// (most frees of untracked blocks: one bitmap read).
    pub fn remove(&self, start: u64) -> Option<(u64, u32)> {
        if start & 7 != 0 || start >= 1 << 47 {
            return None;
        }
        let dir = self.dir(start >> PAGE_SHIFT, false)?;
        let pos = ((start & 0xfff) >> 3) as usize;
        let bit = 1u64 << (pos % 64);
        if dir.starts[pos / 64].load(Relaxed) & bit == 0 {
            return None;
        }
        let shard = &self.shards[shard_of(start)];
        super::lock(&shard.lock);
        let mut found = None;
        if dir.starts[pos / 64].load(Relaxed) & bit != 0 {
            let at = rank(&dir.starts, pos);
            let len = dir.len.load(Relaxed) as usize;
            let class = dir.class.load(Relaxed);
            let address = dir.record.load(Relaxed);
            let record = record_of(address, class);
            let s = begin_write(dir);
            found = Some(split(record[at].load(Relaxed)));
            for i in at + 1..len {
                record[i - 1].store(record[i].load(Relaxed), Relaxed);
            }
            dir.starts[pos / 64].fetch_and(!bit, Relaxed);
            dir.len.store(len as u32 - 1, Relaxed);
            if len == 1 {
                // The page's last block: its record goes back.
                dir.record.store(0, Relaxed);
                dir.class.store(0, Relaxed);
                Self::free_record(shard, address, class);
                self.bytes.fetch_sub(128, Relaxed);
            }
            end_write(dir, s);
        }
        super::unlock(&shard.lock);
        if let Some((size, _)) = found {
            self.live.fetch_sub(1, Relaxed);
            self.live_bytes.fetch_sub(size, Relaxed);
        }
        found
    }

    /// The (start, size, site) of the block that starts at or before
    /// position `pos` of `page` (`None` past a page's last position: the
    /// last block of the page), read consistently. Lock-free.
    fn block_at_or_before(&self, page: u64, pos: usize) -> Option<(u64, u64, u32)> {
        let dir = self.dir(page, false)?;
        for _ in 0..READ_TRIES {
            let s1 = dir.seq.load(Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let found = last_start_at_or_before(&dir.starts, pos).map(|p| {
                let at = rank(&dir.starts, p);
                let record = record_of(dir.record.load(Relaxed), dir.class.load(Relaxed));
                (p, record.get(at).map(|e| e.load(Relaxed)))
            });
            fence(Acquire);
            if dir.seq.load(Relaxed) != s1 {
                continue;
            }
            let (p, e) = found?;
            let (size, site) = split(e?);
            return Some(((page << PAGE_SHIFT) + p as u64 * 8, size, site));
        }
        None
    }

    /// The (start, size, site) of the entered block starting exactly at
    /// `start`. Lock-free.
    pub fn find_start(&self, start: u64) -> Option<(u64, u64, u32)> {
        if start & 7 != 0 || start >= 1 << 47 {
            return None;
        }
        let pos = ((start & 0xfff) >> 3) as usize;
        self.block_at_or_before(start >> PAGE_SHIFT, pos)
            .filter(|b| b.0 == start)
    }

    /// The (start, size, site) of the entered block containing `addr`.
    /// Safe in a signal handler: no lock, no allocation, bounded work.
    pub fn lookup(&self, addr: u64) -> Option<(u64, u64, u32)> {
        if addr >= 1 << 47 {
            return None;
        }
        let page = addr >> PAGE_SHIFT;
        let pos = ((addr & 0xfff) >> 3) as usize;
        // The nearest start at or before the address, in this page or
        // (a block is under 4 KiB) the one before.
        let (start, size, site) = self
            .block_at_or_before(page, pos)
            .or_else(|| self.block_at_or_before(page.checked_sub(1)?, WORDS * 64 - 1))?;
        (addr < start + size).then_some((start, size, site))
    }

    /// After fork: the child is single-threaded; locks held by other
    /// threads of the parent are released (a page they were changing
    /// stays odd: its blocks are not found, and a writer makes it even
    /// again).
    pub fn reset_locks_after_fork(&self) {
        for s in self.shards {
            sys::release_after_fork(&s.lock);
        }
        sys::release_after_fork(&self.chunk_lock);
    }
}

/// Opens a page's write: its count made odd (whatever a writer that
/// never returned left there); returns the odd value.
fn begin_write(dir: &PageDir) -> u64 {
    let s = dir.seq.load(Relaxed) | 1;
    dir.seq.store(s, Relaxed);
    fence(Release);
    s
}

/// Closes a write opened at `s`: even again.
fn end_write(dir: &PageDir, s: u64) {
    dir.seq.store(s + 1, Release);
}

/// The highest set bit at or before position `pos` of a page's bitmap.
fn last_start_at_or_before(starts: &[AtomicU64; WORDS], pos: usize) -> Option<usize> {
    let mut w = pos / 64;
    let mut mask = if pos % 64 == 63 {
        u64::MAX
    } else {
        (1u64 << (pos % 64 + 1)) - 1
    };
    loop {
        let bits = starts[w].load(Relaxed) & mask;
        if bits != 0 {
            return Some(w * 64 + 63 - bits.leading_zeros() as usize);
        }
        if w == 0 {
            return None;
        }
        w -= 1;
        mask = u64::MAX;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_from_any_address_inside_and_forgotten() {
        let m = get().unwrap();
        let base = 0x6100_0000_0ff0u64; // Straddles a page boundary.
        assert_eq!(m.insert(base, 216, 7), Ok(None));
        assert_eq!(m.insert(base + 224, 108, 8), Ok(None));
        assert_eq!(m.lookup(base), Some((base, 216, 7)));
        assert_eq!(m.lookup(base + 215), Some((base, 216, 7)));
        assert_eq!(m.lookup(base + 216), None); // The gap between them.
        assert_eq!(m.lookup(base + 224 + 50), Some((base + 224, 108, 8)));
        assert_eq!(m.lookup(base - 8), None);
        assert_eq!(m.remove(base), Some((216, 7)));
        assert_eq!(m.lookup(base + 10), None);
        assert_eq!(m.remove(base), None);
        assert_eq!(m.remove(base + 224), Some((108, 8)));
        // Unaligned starts and sizes out of range are refused.
        assert_eq!(m.insert(base + 3, 16, 1), Err(Untracked::Address));
        assert_eq!(m.insert(base, SMALL_MAX, 1), Err(Untracked::Address));
    }

    #[test]
    fn a_million_blocks_cost_under_24_bytes_each_and_stay_exact() {
        let m = get().unwrap();
        let base = 0x6200_0000_0000u64;
        let n = 1_000_000u64;
        let before = m.bytes();
        for i in 0..n {
            m.insert(base + i * 224, 216, (i % 3) as u32).unwrap();
        }
        let per_block = (m.bytes() - before) as f64 / n as f64;
        assert!(per_block <= 24.0, "{per_block} bytes a block");
        for i in (0..n).step_by(997) {
            assert_eq!(
                m.lookup(base + i * 224 + 100),
                Some((base + i * 224, 216, (i % 3) as u32))
            );
        }
        for i in 0..n {
            assert_eq!(m.remove(base + i * 224), Some((216, (i % 3) as u32)));
        }
        assert_eq!(m.lookup(base + 500 * 224), None);
    }

    #[test]
    fn a_start_entered_twice_replaces_the_first() {
        let m = get().unwrap();
        let a = 0x6300_0000_1000u64;
        assert_eq!(m.insert(a, 64, 1), Ok(None));
        assert_eq!(m.insert(a, 32, 2), Ok(Some((64, 1))));
        assert_eq!(m.lookup(a + 40), None);
        assert_eq!(m.lookup(a + 20), Some((a, 32, 2)));
        assert_eq!(m.remove(a), Some((32, 2)));
    }

    #[test]
    fn threads_inserting_and_removing_concurrently_keep_every_block() {
        let m = get().unwrap();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                std::thread::spawn(move || {
                    let base = 0x6400_0000_0000u64 + t * (1 << 30);
                    for round in 0..3 {
                        for i in 0..50_000u64 {
                            if let Err(e) = m.insert(base + i * 48, 40, t as u32) {
                                panic!("{e:?} {round} {i}");
                            }
                        }
                        for i in (0..50_000u64).step_by(2) {
                            assert_eq!(m.remove(base + i * 48), Some((40, t as u32)), "{round}");
                        }
                        for i in (1..50_000u64).step_by(2) {
                            assert_eq!(
                                m.lookup(base + i * 48 + 39),
                                Some((base + i * 48, 40, t as u32))
                            );
                            assert_eq!(m.remove(base + i * 48), Some((40, t as u32)));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn chunks_cover_less_under_an_address_space_limit() {
        assert_eq!(chunk_shift(None), 28);
        assert_eq!(chunk_shift(Some(u64::MAX)), 28);
        // 2 GiB / 256 = 8 MiB: a full chunk's directories.
        assert_eq!(chunk_shift(Some(2 << 30)), 28);
        // 300,000 KiB / 256 = 1.14 MiB: 1 MiB of directories per 32 MiB.
        assert_eq!(chunk_shift(Some(300_000 << 10)), 25);
        assert_eq!(chunk_shift(Some(1 << 20)), MIN_CHUNK_SHIFT);
        assert_eq!(slab_bytes(None), SLAB_BYTES);
        assert_eq!(slab_bytes(Some(4 << 30)), SLAB_BYTES);
        // 400,000 KiB: 64 slabs of 64 KiB (4 MiB, under 6.1 MiB).
        assert_eq!(slab_bytes(Some(400_000 << 10)), 64 << 10);
        assert_eq!(slab_bytes(Some(1 << 20)), MIN_SLAB_BYTES);
        // Every chunk shift's directory reaches the whole address space.
        for shift in MIN_CHUNK_SHIFT..=CHUNK_SHIFT {
            assert!(ADDRESS_BITS - shift > LEAF_BITS);
        }
    }

    #[test]
    fn the_cap_stops_the_map_from_growing() {
        // A map of its own, so the cap does not touch the other tests'.
        let m = SmallMap::new(Box::leak(Box::new([const { Shard::new() }; SHARDS]))).unwrap();
        m.set_cap(1 << 20);
        let base = 0x6500_0000_0000u64;
        let mut refused = 0;
        for i in 0..200_000u64 {
            match m.insert(base + i * 64, 48, 1) {
                Ok(_) => {}
                Err(Untracked::Cap) => refused += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        assert!(refused > 100_000, "{refused}");
        assert!(m.bytes() <= 1 << 20, "{}", m.bytes());
        assert_eq!(m.live_and_peak().0, 200_000 - refused);
    }
}
