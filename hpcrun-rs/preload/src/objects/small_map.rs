//! The compact map of live small heap blocks (under [`SMALL_MAX`] bytes
//! and under `--min-bytes`): every one of them, with its site, in a few
//! words per block, so that a program of a million per-row or per-node
//! blocks gets each site its share instead of one anonymous bucket.
//!
//! Two structures:
//! * **entries**: open-addressing hash tables keyed by the block's start,
//!   16 bytes an entry (start; size and site), in [`SHARDS`] shards chosen
//!   by the block's 4 KiB page. A shard's table grows (to a load of 0.65)
//!   when it is 0.85 full, so a live block costs 16 / 0.65-0.85 bytes; the
//!   table it replaces gives its pages back (`sys::discard`).
//! * **starts**: per 4 KiB page of the heap, a bitmap of the 8-byte
//!   positions where a tracked block starts (64 bytes a page: under 4
//!   bytes a block for blocks of 200 bytes), in a directory of 4 GiB
//!   chunks mapped on first use.
//!
//! A sample's address finds its block without a lock: the nearest start at
//! or before it (this page's bitmap, else the previous page's: a block is
//! under 4 KiB), then that start's entry, then the size says whether the
//! address is inside. Writers (the allocation hooks) take their shard's
//! spin lock, never held by a signal handler: the handler only reads,
//! validating an entry by reading its start before and after its value,
//! inside a read section (`sys::reading`): a replaced table gives its pages
//! back only once every section that could have seen it has closed (if
//! one stays open past a millisecond, the table is kept).
//!
//! Memory is bounded by a cap ([`set_cap`]): a table that would grow past
//! it does not, and the block is left untracked and counted by the
//! caller, with the reason ([`Untracked`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

use crate::sys;

/// Blocks under this size (and under `--min-bytes`) live here.
pub const SMALL_MAX: u64 = 4096;
/// Shards of the entry tables (by page).
pub const SHARDS: usize = 64;
const PAGE_SHIFT: u32 = 12;
/// Bitmap words per page: one bit per 8-byte position.
const WORDS: usize = 4096 / 8 / 64;
/// A directory chunk covers 4 GiB.
const CHUNK_SHIFT: u32 = 32;
const PAGES_PER_CHUNK: usize = 1 << (CHUNK_SHIFT - PAGE_SHIFT);
/// Chunks of the 47-bit user address space.
const CHUNKS: usize = 1 << (47 - CHUNK_SHIFT);
/// Entries per page of a table; tables are whole pages.
const ENTRIES_PER_PAGE: usize = 4096 / 16;
/// The most pages a table may have (its page count shares a word with
/// its address).
const MAX_TABLE_PAGES: usize = 4096;
const EMPTY: u64 = 0;
const TOMBSTONE: u64 = 1;
/// The default cap's floor: tables may always take this much.
pub const DEFAULT_CAP_FLOOR: u64 = 64 << 20;
/// Probes a reader makes at most.
const MAX_PROBE: usize = 4096;

/// Why a small block was not entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untracked {
    /// The tracking memory cap was reached.
    Cap,
    /// The kernel refused memory for a table.
    NoMemory,
    /// An address this map cannot hold (unaligned to 8 bytes, beyond 47
    /// bits).
    Address,
}

/// One live block: its start (or [`EMPTY`], [`TOMBSTONE`]) and
/// `size << 32 | site`.
#[repr(C)]
struct Entry {
    key: AtomicU64,
    value: AtomicU64,
}

// SAFETY: two atomics: all-zero bytes are a valid value.
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Entry {}

/// One page's start bitmap.
#[repr(C, align(64))]
struct PageStarts([AtomicU64; WORDS]);

// SAFETY: atomics only: all-zero bytes are a valid value.
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for PageStarts {}

#[repr(C, align(64))]
struct Shard {
    lock: AtomicBool,
    /// The table's address with its page count minus one in the low 12
    /// bits (0: no table yet).
    table: AtomicU64,
    live: AtomicU64,
    /// Live entries and tombstones.
    used: AtomicU64,
}

/// The map (one per process: [`get`]).
pub struct SmallMap {
    shards: [Shard; SHARDS],
    /// Directory: chunk index -> address of its page bitmaps (0: none).
    chunks: &'static [AtomicU64],
    chunk_lock: AtomicBool,
    /// Bytes of tables and bitmaps mapped for live use.
    bytes: AtomicU64,
    /// The most bytes tables may take (0: [`DEFAULT_CAP_FLOOR`] or half
    /// the live blocks' bytes, whichever is more).
    cap: AtomicU64,
    /// Bytes of the live blocks.
    live_bytes: AtomicU64,
    /// Live blocks.
    live: AtomicU64,
    /// The most blocks live at once.
    peak: AtomicU64,
}

static MAP: std::sync::OnceLock<SmallMap> = std::sync::OnceLock::new();

/// The map, created at first use (`None` if the kernel refused its
/// directory).
pub fn get() -> Option<&'static SmallMap> {
    if let Some(m) = MAP.get() {
        return Some(m);
    }
    let chunks = sys::map_own::<AtomicU64>(CHUNKS)?;
    let _ = MAP.set(SmallMap {
        shards: std::array::from_fn(|_| Shard {
            lock: AtomicBool::new(false),
            table: AtomicU64::new(0),
            live: AtomicU64::new(0),
            used: AtomicU64::new(0),
        }),
        chunks,
        chunk_lock: AtomicBool::new(false),
        bytes: AtomicU64::new(0),
        cap: AtomicU64::new(0),
        live_bytes: AtomicU64::new(0),
        live: AtomicU64::new(0),
        peak: AtomicU64::new(0),
    });
    MAP.get()
}

/// The map if it was created (for readers: nothing is created).
pub fn existing() -> Option<&'static SmallMap> {
    MAP.get()
}

fn start_hash(start: u64) -> u64 {
    (start >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn shard_of(start: u64) -> usize {
    ((start >> PAGE_SHIFT).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 58) as usize % SHARDS
}

/// A table as its word says: (entries, or an empty slice).
fn table_of(word: u64) -> &'static [Entry] {
    if word == 0 {
        return &[];
    }
    let pages = (word & 0xfff) as usize + 1;
    let address = word & !0xfff;
    // SAFETY: the word was made by `SmallMap::grow` from a `map_own`
    // table of that many pages, never unmapped (only given back: it then
    // reads as zeros, a valid Entry).
    #[allow(unsafe_code)]
    unsafe {
        std::slice::from_raw_parts(address as *const Entry, pages * ENTRIES_PER_PAGE)
    }
}

/// The home slot of `start` in a table of `len` entries: the page's slot
/// plus the block's 16-byte position in the page. The blocks of one page
/// (allocated one after another) land within 256 slots (4 KiB) of each
/// other: one TLB entry of the table, not a random page each; and a
/// table's entries lie in the order of their pages' hashes, so growing
/// it writes the new table from front to back.
fn home(start: u64, len: usize) -> usize {
    let page = ((start_hash(start & !0xfff) as u128 * len as u128) >> 64) as usize;
    (page + ((start & 0xfff) >> 4) as usize) % len
}

impl SmallMap {
    /// Sets the cap on the bytes the map's tables may take (0: the
    /// default, [`DEFAULT_CAP_FLOOR`] or half the live blocks' bytes).
    pub fn set_cap(&self, bytes: u64) {
        self.cap.store(bytes, Relaxed);
    }

    /// Bytes mapped for the tables and bitmaps.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Live blocks now, and the most that were live at once.
    pub fn live_and_peak(&self) -> (u64, u64) {
        (self.live.load(Relaxed), self.peak.load(Relaxed))
    }

    /// The page bitmap of `page`, creating its chunk if `create`.
    fn starts(&self, page: u64, create: bool) -> Option<&'static PageStarts> {
        let chunk = (page >> (CHUNK_SHIFT - PAGE_SHIFT)) as usize;
        let slot = self.chunks.get(chunk)?;
        let mut base = slot.load(Acquire);
        if base == 0 {
            if !create {
                return None;
            }
            super::lock(&self.chunk_lock);
            base = slot.load(Acquire);
            if base == 0 {
                if let Some(t) = sys::map_own::<PageStarts>(PAGES_PER_CHUNK) {
                    base = t.as_ptr() as u64;
                    slot.store(base, Release);
                }
            }
            super::unlock(&self.chunk_lock);
            if base == 0 {
                return None;
            }
        }
        let index = page as usize & (PAGES_PER_CHUNK - 1);
        // SAFETY: `base` is a `map_own` table of PAGES_PER_CHUNK bitmaps,
        // never unmapped; `index` is below that.
        #[allow(unsafe_code)]
        Some(unsafe { &*(base as *const PageStarts).add(index) })
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
        let starts = self
            .starts(start >> PAGE_SHIFT, true)
            .ok_or(Untracked::NoMemory)?;
        let shard = &self.shards[shard_of(start)];
        super::lock(&shard.lock);
        let mut replaced: &'static [Entry] = &[];
        let bit = (start & 0xfff) >> 3;
        let word = &starts.0[bit as usize / 64];
        // The page's bits change only under its shard's lock: a clear bit
        // says no entry has this start, and no search for one is needed.
        let present = word.load(Relaxed) & (1 << (bit % 64)) != 0;
        let value = size << 32 | site as u64;
        let result = self.insert_locked(shard, start, value, present, &mut replaced);
        if result.is_ok() {
            word.fetch_or(1 << (bit % 64), Release);
        }
        super::unlock(&shard.lock);
        if !replaced.is_empty() {
            self.retire(replaced);
        }
        match result {
            Ok(None) => {
                let live = self.live.fetch_add(1, Relaxed) + 1;
                self.peak.fetch_max(live, Relaxed);
                self.live_bytes.fetch_add(size, Relaxed);
            }
            Ok(Some(old)) => {
                self.live_bytes.fetch_add(size, Relaxed);
                self.live_bytes.fetch_sub(old >> 32, Relaxed);
            }
            Err(_) => {}
        }
        result.map(|old| old.map(|v| (v >> 32, v as u32)))
    }

    /// Enters the entry with the shard locked; a table it replaced (to be
    /// retired once unlocked) goes to `replaced`.
    fn insert_locked(
        &self,
        shard: &Shard,
        start: u64,
        value: u64,
        present: bool,
        replaced: &mut &'static [Entry],
    ) -> Result<Option<u64>, Untracked> {
        let mut table = table_of(shard.table.load(Relaxed));
        let used = shard.used.load(Relaxed);
        if (used + 1) * 100 > table.len() as u64 * 85 {
            let old = table;
            table = self.grow(shard, table)?;
            *replaced = old;
        }
        let n = table.len();
        let mut free = None;
        let mut i = home(start, n);
        for _ in 0..n {
            let e = &table[i];
            match e.key.load(Relaxed) {
                EMPTY => break,
                TOMBSTONE => {
                    free.get_or_insert(i);
                    if !present {
                        break;
                    }
                }
                k if present && k == start => {
                    let old = e.value.swap(value, Release);
                    return Ok(Some(old));
                }
                _ => {}
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        let reuse = free.is_some();
        let e = &table[free.unwrap_or(i)];
        // Value first: a reader that sees the start sees its value.
        e.value.store(value, Release);
        e.key.store(start, Release);
        shard.live.fetch_add(1, Relaxed);
        if !reuse {
            shard.used.fetch_add(1, Relaxed);
        }
        Ok(None)
    }

    /// Replaces the shard's table by one of a load of 0.65 (no
    /// tombstones), unless the cap forbids it or the kernel refuses.
    fn grow(&self, shard: &Shard, old: &'static [Entry]) -> Result<&'static [Entry], Untracked> {
        let live = shard.live.load(Relaxed) as usize + 1;
        let want = (live * 100 / 65).max(ENTRIES_PER_PAGE);
        let pages = want.div_ceil(ENTRIES_PER_PAGE).min(MAX_TABLE_PAGES);
        let len = pages * ENTRIES_PER_PAGE;
        if (live as u64) * 100 > len as u64 * 85 {
            return Err(Untracked::Cap); // The largest table is full.
        }
        let new_bytes = (len * 16) as u64;
        let old_bytes = (old.len() * 16) as u64;
        let cap = match self.cap.load(Relaxed) {
            0 => DEFAULT_CAP_FLOOR.max(self.live_bytes.load(Relaxed) / 2),
            cap => cap,
        };
        let total = self.bytes.load(Relaxed);
        if total + new_bytes > cap + old_bytes {
            return Err(Untracked::Cap);
        }
        let table = sys::map_own::<Entry>(len).ok_or(Untracked::NoMemory)?;
        for e in old {
            let k = e.key.load(Relaxed);
            if k == EMPTY || k == TOMBSTONE {
                continue;
            }
            let mut i = home(k, len);
            while table[i].key.load(Relaxed) != EMPTY {
                i = if i + 1 == len { 0 } else { i + 1 };
            }
            table[i].value.store(e.value.load(Relaxed), Relaxed);
            table[i].key.store(k, Relaxed);
        }
        shard.used.store(shard.live.load(Relaxed), Relaxed);
        // Release: a reader that sees the new word sees its entries.
        shard
            .table
            .store(table.as_ptr() as u64 | (pages as u64 - 1), Release);
        self.bytes.fetch_add(new_bytes, Relaxed);
        Ok(table)
    }

    /// Gives back the pages of a replaced table once no read section can
    /// still be reading it (kept if one stays open past a millisecond).
    /// Called without a shard lock, outside any read section.
    fn retire(&self, old: &'static [Entry]) {
        if sys::wait_for_readers(1_000_000) {
            sys::discard(old);
            self.bytes.fetch_sub((old.len() * 16) as u64, Relaxed);
        }
    }

    /// Forgets the block starting at `start`; returns its (size, site) if
    /// it was entered. Without a lock when no tracked block starts there
    /// (most frees of untracked blocks: one bitmap read).
    pub fn remove(&self, start: u64) -> Option<(u64, u32)> {
        if start & 7 != 0 || start >= 1 << 47 {
            return None;
        }
        let starts = self.starts(start >> PAGE_SHIFT, false)?;
        let bit = (start & 0xfff) >> 3;
        let word = &starts.0[bit as usize / 64];
        if word.load(Relaxed) & (1 << (bit % 64)) == 0 {
            return None;
        }
        let shard = &self.shards[shard_of(start)];
        super::lock(&shard.lock);
        let table = table_of(shard.table.load(Relaxed));
        let mut found = None;
        if !table.is_empty() {
            let n = table.len();
            let mut i = home(start, n);
            for _ in 0..n {
                let e = &table[i];
                match e.key.load(Relaxed) {
                    EMPTY => break,
                    k if k == start => {
                        let v = e.value.load(Relaxed);
                        e.key.store(TOMBSTONE, Release);
                        shard.live.fetch_sub(1, Relaxed);
                        found = Some((v >> 32, v as u32));
                        break;
                    }
                    _ => {}
                }
                i = if i + 1 == n { 0 } else { i + 1 };
            }
        }
        word.fetch_and(!(1 << (bit % 64)), Release);
        super::unlock(&shard.lock);
        if let Some((size, _)) = found {
            self.live.fetch_sub(1, Relaxed);
            self.live_bytes.fetch_sub(size, Relaxed);
        }
        found
    }

    /// The (start, size, site) of the entered block starting exactly at
    /// `start`. Lock-free.
    pub fn find_start(&self, start: u64) -> Option<(u64, u64, u32)> {
        let _section = sys::reading();
        let table = table_of(self.shards[shard_of(start)].table.load(Acquire));
        if table.is_empty() {
            return None;
        }
        let n = table.len();
        let mut i = home(start, n);
        for _ in 0..n.min(MAX_PROBE) {
            let e = &table[i];
            let k1 = e.key.load(Acquire);
            if k1 == EMPTY {
                return None;
            }
            if k1 == start {
                let v = e.value.load(Acquire);
                if e.key.load(Acquire) == start {
                    return Some((start, v >> 32, v as u32));
                }
                return None;
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        None
    }

    /// The (start, size, site) of the entered block containing `addr`.
    /// Safe in a signal handler: no lock, no allocation, bounded work.
    pub fn lookup(&self, addr: u64) -> Option<(u64, u64, u32)> {
        if addr >= 1 << 47 {
            return None;
        }
        let _section = sys::reading();
        let page = addr >> PAGE_SHIFT;
        let here = (addr & 0xfff) >> 3;
        let start = self
            .starts(page, false)
            .and_then(|s| last_start_at_or_before(s, here as usize))
            .map(|pos| (page << PAGE_SHIFT) + pos as u64 * 8)
            .or_else(|| {
                let prev = page.checked_sub(1)?;
                let s = self.starts(prev, false)?;
                let pos = last_start_at_or_before(s, WORDS * 64 - 1)?;
                Some((prev << PAGE_SHIFT) + pos as u64 * 8)
            })?;
        let (start, size, site) = self.find_start(start)?;
        (addr < start + size).then_some((start, size, site))
    }

    /// After fork: the child is single-threaded; locks held by other
    /// threads of the parent are released (a table they were writing may
    /// miss that one block).
    pub fn reset_locks_after_fork(&self) {
        for s in &self.shards {
            s.lock.store(false, Relaxed);
        }
        self.chunk_lock.store(false, Relaxed);
    }
}

/// The highest set bit at or before position `pos` of a page's bitmap.
fn last_start_at_or_before(starts: &PageStarts, pos: usize) -> Option<usize> {
    let mut w = pos / 64;
    let mut mask = if pos % 64 == 63 {
        u64::MAX
    } else {
        (1u64 << (pos % 64 + 1)) - 1
    };
    loop {
        let bits = starts.0[w].load(Acquire) & mask;
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
    fn a_million_blocks_grow_the_tables_and_stay_exact() {
        let m = get().unwrap();
        let base = 0x6200_0000_0000u64;
        let n = 1_000_000u64;
        let before = m.bytes();
        for i in 0..n {
            m.insert(base + i * 224, 216, (i % 3) as u32).unwrap();
        }
        let per_block = (m.bytes() - before) as f64 / n as f64;
        assert!(per_block <= 24.0, "{per_block} table bytes a block");
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
    fn the_cap_stops_growth_and_says_so() {
        // A map of its own, so the cap does not touch the other tests'.
        let chunks = sys::map_own::<AtomicU64>(CHUNKS).unwrap();
        let m = SmallMap {
            shards: std::array::from_fn(|_| Shard {
                lock: AtomicBool::new(false),
                table: AtomicU64::new(0),
                live: AtomicU64::new(0),
                used: AtomicU64::new(0),
            }),
            chunks,
            chunk_lock: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            cap: AtomicU64::new(0),
            live_bytes: AtomicU64::new(0),
            live: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        };
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
