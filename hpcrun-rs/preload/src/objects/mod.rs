//! The second step: the object map. Hands to the next step: the heap object
//! (its site and offset) that holds a sampled address, looked up by the
//! sample handler ([`crate::sample`]) without a lock; the sites, which the
//! writer ([`crate::output`]) puts in the profile.
//!
//! The heap-object map, the allocation-site table and the allocation log.
//!
//! **Sites**: every distinct allocation call path gets one entry in an
//! append-only table (deduplicated by hash under a writers-only spin lock;
//! only the allocation hooks take it, never the signal handler).
//!
//! **Objects** (live tracked blocks), in two structures chosen by size:
//! * blocks under [`MEDIUM_BYTES`] go into [`granules`]: a lock-free hash
//!   table keyed by 4 KiB address granule (a block is entered once per
//!   granule it touches, at most 5); insert, remove and lookup cost O(1)
//!   and take no lock, so threads that allocate concurrently do not
//!   serialise;
//! * blocks from [`MEDIUM_BYTES`] to [`BIG_BYTES`] go into a second table
//!   of the same kind keyed by 64 KiB granule (at most 5 entries a block
//!   instead of up to 64), or into the first one if it is full;
//! * bigger blocks (few, and long-lived) go into [`big`]: a sorted array
//!   under a sequence lock, binary-searched;
//! * blocks under `--min-bytes` (and under [`small_map::SMALL_MAX`]) go
//!   into [`small_map`]: every one, with its site, in about 10-20 bytes a
//!   block (a per-page record) and no allocation-log record. A site's counters say how many
//!   of its blocks live now and at most ([`Site`]).
//!
//! The signal handler only reads, never waits: a slot or array being
//! written is retried a few times, then the lookup reports `Busy` and the
//! sample is counted as dropped. Freed addresses leave the map before glibc
//! can hand them out again, so a reused address maps to the block live at
//! the sample's time. The lookups are in [`lookup`].
//!
//! **Registered ranges** (`hpcrun_register`, see [`crate::hooks::labels`]) live in
//! a third map of the [`big`] kind whose lookup scans a few entries back,
//! so a registered range nested in another one wins. The signal handler
//! looks there first: a registered sub-range of a pool wins over the pool's
//! heap block.
//!
//! **Labels**: a site's identity is its call path *and* its label (at most
//! [`LABEL_BYTES`] bytes, written once when the site is created, before the
//! site is published), so blocks with different labels from one call path
//! are different sites.
//!
//! **Mappings** ([`mapping`]): file-backed and shared mappings and System
//! V segments are blocks too, at a site labelled with their file's name.
//!
//! **Allocation log** (`--alloc-log` only): one record per tracked block
//! (address, size, site, thread, allocation and free times), chained per
//! thread. Without it a block only counts at its site (allocations, bytes,
//! largest block), and its map entry has no record.

pub(crate) mod big;
pub(crate) mod granules;
mod lookup;
pub mod mapping;
mod small_heap;
pub mod small_map;
pub mod small_sites;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::OnceLock;

pub use lookup::Lookup;
pub use small_heap::{in_small_heap, note_small_block};

use crate::sys;

/// Longest allocation call path kept.
pub const MAX_ALLOC_FRAMES: usize = 48;
/// Blocks of at least this size go to the big-block map.
pub const BIG_BYTES: u64 = 256 << 10;
/// Blocks of at least this size (and under [`BIG_BYTES`]) go to the
/// 64 KiB-granule table.
pub const MEDIUM_BYTES: u64 = 16 << 10;
const SITE_CAPACITY: usize = 1 << 16;
const RECORD_CAPACITY: usize = 1 << 20;
/// Longest label kept (bytes; longer names are cut).
pub const LABEL_BYTES: usize = 63;
/// How many registered ranges a lookup checks backwards from the one that
/// starts last at or below the address (nested registrations).
const REGISTERED_DEPTH: usize = 16;

/// One allocation site. Laid out for the allocation hook, which finds
/// the site of nearly every block among the existing ones, usually with
/// the table out of the caches (the program's data evicted it): what one
/// lookup reads (hash, lengths, counters and the first frames) shares the
/// first cache line, and a site never straddles a line it does not need.
#[repr(C, align(64))]
pub struct Site {
    hash: AtomicU64,
    len: AtomicU32,
    label_len: AtomicU32,
    pub allocations: AtomicU64,
    pub bytes: AtomicU64,
    pub max_bytes: AtomicU64,
    /// Blocks of this site live now, and the most live at once.
    pub live: AtomicU64,
    pub peak_live: AtomicU64,
    /// Blocks of this site freed.
    pub frees: AtomicU64,
    /// 1 if the site's blocks are small ones ([`small_map`]).
    pub small: AtomicU32,
    frames: [AtomicU64; MAX_ALLOC_FRAMES],
    label: [AtomicU8; LABEL_BYTES],
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Site {}

impl Site {
    /// The site's label, if it has one (invalid UTF-8 replaced; a multi-byte
    /// character cut by the length limit dropped).
    pub fn label(&self) -> Option<String> {
        let n = (self.label_len.load(Relaxed) as usize).min(LABEL_BYTES);
        if n == 0 {
            return None;
        }
        let bytes: Vec<u8> = self.label[..n].iter().map(|b| b.load(Relaxed)).collect();
        let valid = match std::str::from_utf8(&bytes) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => n,
        };
        Some(String::from_utf8_lossy(&bytes[..valid]).into_owned())
    }

    /// Copies the site's label into `out` (cut to its length); returns
    /// how many bytes. Allocates nothing.
    pub fn label_into(&self, out: &mut [u8]) -> usize {
        let n = (self.label_len.load(Relaxed) as usize)
            .min(LABEL_BYTES)
            .min(out.len());
        for (o, b) in out.iter_mut().zip(&self.label[..n]) {
            *o = b.load(Relaxed);
        }
        n
    }

    /// Counts one block of `size` bytes allocated here.
    fn count_block(&self, size: u64) {
        self.allocations.fetch_add(1, Relaxed);
        self.bytes.fetch_add(size, Relaxed);
        self.max_bytes.fetch_max(size, Relaxed);
        let live = self.live.fetch_add(1, Relaxed) + 1;
        self.peak_live.fetch_max(live, Relaxed);
    }

    /// Marks the site as one of small blocks (written once: the
    /// allocation path then only reads it).
    fn mark_small(&self) {
        if self.small.load(Relaxed) == 0 {
            self.small.store(1, Relaxed);
        }
    }

    /// Counts one block of this site freed.
    fn count_free(&self) {
        // Never below zero: a block relabelled away after its count.
        let _ = self
            .live
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        self.frees.fetch_add(1, Relaxed);
    }

    fn label_equals(&self, label: &[u8]) -> bool {
        self.label_len.load(Relaxed) as usize == label.len()
            && self
                .label
                .iter()
                .zip(label)
                .all(|(a, b)| a.load(Relaxed) == *b)
    }
}

/// One tracked allocation, for the allocation log.
#[repr(C)]
pub struct Record {
    pub start: AtomicU64,
    pub size: AtomicU64,
    pub site: AtomicU32,
    pub thread: AtomicU32,
    pub alloc_ns: AtomicU64,
    /// 0 while live.
    pub free_ns: AtomicU64,
    /// Index + 1 of the same thread's previous record (0: none).
    pub previous: AtomicU64,
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Record {}

/// A live block as both maps store it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub start: u64,
    pub end: u64,
    pub site: u32,
    /// Index + 1 of its allocation record (0: none).
    pub record: u64,
}

pub struct Objects {
    sites: &'static [Site],
    site_index: &'static [AtomicU32],
    site_count: AtomicU32,
    site_lock: AtomicBool,
    /// The allocation log (empty without `--alloc-log`).
    records: &'static [Record],
    record_count: AtomicU64,
    /// Tracked allocations that did not fit in the log.
    pub records_dropped: AtomicU64,
    /// Tracked allocations that did not fit in the maps.
    pub map_full: AtomicU64,
    /// `hpcrun_label` calls whose address was in no tracked block.
    pub labels_untracked: AtomicU64,
    granules: granules::Granules,
    /// Blocks of [`MEDIUM_BYTES`] and more, by 64 KiB granule.
    medium: granules::Granules,
    big: big::BigBlocks,
    /// Ranges entered by `hpcrun_register`.
    registered: big::BigBlocks,
    /// Live registered ranges (0: lookups skip that map).
    registered_live: AtomicU64,
}

/// Which map holds a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Map {
    Registered,
    Small,
    Granules,
    Medium,
    Big,
}

static OBJECTS: OnceLock<Objects> = OnceLock::new();

/// Bytes the tables of [`init`] reserve at full size (with the allocation
/// log when `log`), for `run::table_shift`.
pub fn full_bytes(log: bool) -> u64 {
    let slot = std::mem::size_of::<granules::Slot>() as u64;
    let mut bytes = (SITE_CAPACITY * std::mem::size_of::<Site>()) as u64
        + (SITE_CAPACITY * 2 * 4) as u64
        + slot * ((1u64 << granules::SMALL.1) + (1u64 << granules::MEDIUM.1))
        + (big::CAPACITY * std::mem::size_of::<big::Entry>()) as u64;
    if log {
        bytes += (RECORD_CAPACITY * std::mem::size_of::<Record>()) as u64;
    }
    bytes
}

/// Entries of the big-block map: [`big::CAPACITY`], or under an
/// address-space limit of `limit` bytes as many blocks of [`BIG_BYTES`]
/// as fit in it (a power of two, at least 256): never fewer than can be
/// live.
pub fn big_capacity(limit: Option<u64>) -> usize {
    match limit {
        None => big::CAPACITY,
        Some(limit) => usize::try_from((limit / BIG_BYTES).max(256))
            .map_or(big::CAPACITY, |n| n.next_power_of_two().min(big::CAPACITY)),
    }
}

/// Creates the tables (at library load); `log`: keep the allocation log.
/// Under an address-space limit (`ulimit -v`) the tables are made smaller
/// by `shift` (a power of two: `run::table_shift` of their full size):
/// blocks that find no slot stay untracked, counted.
pub fn init(log: bool, shift: u32) -> bool {
    let records = if log {
        sys::map_zeroed::<Record>(RECORD_CAPACITY >> shift)
    } else {
        Some(&[][..])
    };
    let (small, medium) = (granules::SMALL, granules::MEDIUM);
    let (
        Some(sites),
        Some(site_index),
        Some(records),
        Some(granules),
        Some(medium),
        Some(big),
        Some(registered),
    ) = (
        sys::map_zeroed::<Site>(SITE_CAPACITY >> shift),
        sys::map_zeroed::<AtomicU32>((SITE_CAPACITY * 2) >> shift),
        records,
        granules::Granules::new((small.0, small.1 - shift)),
        granules::Granules::new((medium.0, medium.1 - shift)),
        big::BigBlocks::new(big_capacity(sys::address_space_limit())),
        big::BigBlocks::new((big::CAPACITY >> shift).max(1 << 12)),
    )
    else {
        return false;
    };
    OBJECTS
        .set(Objects {
            sites,
            site_index,
            site_count: AtomicU32::new(0),
            site_lock: AtomicBool::new(false),
            records,
            record_count: AtomicU64::new(0),
            records_dropped: AtomicU64::new(0),
            map_full: AtomicU64::new(0),
            labels_untracked: AtomicU64::new(0),
            granules,
            medium,
            big,
            registered,
            registered_live: AtomicU64::new(0),
        })
        .is_ok()
}

pub fn get() -> Option<&'static Objects> {
    OBJECTS.get()
}

pub(crate) fn lock(flag: &AtomicBool) {
    while flag
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
        std::thread::yield_now();
    }
}

pub(crate) fn unlock(flag: &AtomicBool) {
    flag.store(false, Release);
}

fn path_hash(frames: &[u64], label: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in frames {
        h ^= f;
        h = h.wrapping_mul(0x100_0000_01b3).rotate_left(23);
    }
    for &b in label {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h | 1
}

impl Objects {
    /// Site id of this call path (innermost first), created if new. `None`
    /// when the table is full.
    pub fn site(&self, frames: &[u64]) -> Option<u32> {
        self.labelled_site(frames, &[])
    }

    /// Site id of this call path with this label (cut to [`LABEL_BYTES`];
    /// empty: no label), created if new. `None` when the table is full.
    pub fn labelled_site(&self, frames: &[u64], label: &[u8]) -> Option<u32> {
        let frames = &frames[..frames.len().min(MAX_ALLOC_FRAMES)];
        let label = &label[..label.len().min(LABEL_BYTES)];
        let hash = path_hash(frames, label);
        // A site seen before (nearly every allocation): found without the
        // lock. Sites are written once, before their index entry is
        // published (Release below), and never change.
        if let Ok(id) = self.find_site(hash, frames, label) {
            return Some(id);
        }
        lock(&self.site_lock);
        // Another thread may have added it (or another site) meanwhile.
        let result = match self.find_site(hash, frames, label) {
            Ok(id) => Some(id),
            Err(slot) => self.new_site(slot, hash, frames, label),
        };
        unlock(&self.site_lock);
        result
    }

    /// The id of an existing site with this hash, path and label (read
    /// without the lock), or the free index slot where it would go (the
    /// end of its probe chain).
    fn find_site(&self, hash: u64, frames: &[u64], label: &[u8]) -> Result<u32, usize> {
        let mask = self.site_index.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            let entry = self.site_index[slot].load(Acquire);
            if entry == 0 {
                return Err(slot);
            }
            let site = &self.sites[entry as usize - 1];
            if site.hash.load(Relaxed) == hash
                && site_frames_equal(site, frames)
                && site.label_equals(label)
            {
                return Ok(entry - 1);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Writes a new site and publishes it at free index slot `slot`; `None`
    /// when the table is full. Called with the site lock held.
    fn new_site(&self, slot: usize, hash: u64, frames: &[u64], label: &[u8]) -> Option<u32> {
        let id = self.site_count.load(Relaxed);
        if id as usize >= self.sites.len() {
            return None;
        }
        let site = &self.sites[id as usize];
        site.hash.store(hash, Relaxed);
        site.len.store(frames.len() as u32, Relaxed);
        for (slot, f) in site.frames.iter().zip(frames) {
            slot.store(*f, Relaxed);
        }
        site.label_len.store(label.len() as u32, Relaxed);
        for (slot, b) in site.label.iter().zip(label) {
            slot.store(*b, Relaxed);
        }
        self.site_count.store(id + 1, Release);
        self.site_index[slot].store(id + 1, Release);
        Some(id)
    }

    pub fn site_count(&self) -> u32 {
        self.site_count.load(Acquire)
    }

    /// The bytes the blocks of site `id` live now hold together (their
    /// count times their mean size): what a loop over all of them reads.
    /// Allocates nothing.
    pub fn site_footprint(&self, id: u32) -> Option<u64> {
        let site = self.sites.get(id as usize)?;
        let allocations = site.allocations.load(Relaxed).max(1);
        let mean = site.bytes.load(Relaxed) / allocations;
        Some(site.live.load(Relaxed).saturating_mul(mean))
    }

    /// The frames of site `id` (innermost first) and its counters.
    pub fn site_info(&self, id: u32) -> Option<(Vec<u64>, &Site)> {
        let site = self.sites.get(id as usize)?;
        let n = site.len.load(Relaxed) as usize;
        Some((
            site.frames[..n].iter().map(|f| f.load(Relaxed)).collect(),
            site,
        ))
    }

    /// Records a live block allocated by thread `thread` whose previous
    /// record is `thread_head` (index + 1, 0: none); returns this block's
    /// record (index + 1, 0 if the log is full).
    pub fn insert(&self, start: u64, size: u64, site: u32, thread: u32, thread_head: u64) -> u64 {
        let record = self.new_record(start, size, site, thread, thread_head);
        let block = Block {
            start,
            end: start + size.max(1),
            site,
            record,
        };
        // A block at an address that is still mapped as live (a free we
        // did not see) is replaced.
        self.remove_sized(start, Some(size));
        let stored = if size >= BIG_BYTES {
            self.big.insert(block)
        } else if size >= MEDIUM_BYTES {
            self.medium.insert(block) || self.granules.insert(block)
        } else {
            self.granules.insert(block)
        };
        if !stored {
            self.map_full.fetch_add(1, Relaxed);
        }
        record
    }

    /// Enters the small block `[start, start+size)` of `site` in the
    /// compact map ([`small_map`]); the error says why it was not.
    pub fn insert_small(
        &self,
        start: u64,
        size: u64,
        site: u32,
    ) -> Result<(), small_map::Untracked> {
        let map = small_map::get().ok_or(small_map::Untracked::NoMemory)?;
        let replaced = map.insert(start, size, site)?;
        if let Some((_, old)) = replaced {
            if let Some(s) = self.sites.get(old as usize) {
                s.count_free();
            }
        }
        if let Some(s) = self.sites.get(site as usize) {
            s.mark_small();
            s.count_block(size);
        }
        Ok(())
    }

    /// Enters a range named by the program (`hpcrun_register`) in the
    /// registered map, replacing a registered range that starts at the same
    /// address; returns its record as [`Objects::insert`] does. Heap blocks
    /// that contain it stay tracked: lookups find the registered range
    /// first.
    pub fn register(&self, start: u64, size: u64, site: u32, thread: u32, thread_head: u64) -> u64 {
        let record = self.new_record(start, size, site, thread, thread_head);
        self.unregister(start);
        let block = Block {
            start,
            end: start.saturating_add(size.max(1)),
            site,
            record,
        };
        if self.registered.insert(block) {
            self.registered_live.fetch_add(1, Relaxed);
        } else {
            self.map_full.fetch_add(1, Relaxed);
        }
        record
    }

    /// Forgets the registered range starting at `start`, if any, and stamps
    /// its free time. True if there was one.
    pub fn unregister(&self, start: u64) -> bool {
        let Some(block) = self.registered.remove(start) else {
            return false;
        };
        self.registered_live.fetch_sub(1, Relaxed);
        if let Some(r) = self.record(block.record) {
            r.free_ns.store(sys::now_unix_ns(), Relaxed);
        }
        true
    }

    /// Gives the tracked block (registered range first, as lookups do) that
    /// contains `addr` the site of its call path with `label` (empty: the
    /// unlabelled site). False if `addr` is in no tracked block or the site
    /// table is full.
    pub fn relabel(&self, addr: u64, label: &[u8]) -> bool {
        let Some((map, start)) = self.find(addr) else {
            return false;
        };
        if map == Map::Small {
            return self.relabel_small(start, label);
        }
        let old_site = match map {
            Map::Registered => self.registered.find_block(start),
            Map::Granules => self.granules.find_start(start),
            Map::Medium => self.medium.find_start(start),
            Map::Big => self.big.find_block(start),
            Map::Small => None,
        }
        .map(|b| b.site);
        let Some(old_site) = old_site else {
            return false; // Freed meanwhile.
        };
        let Some((frames, _)) = self.site_info(old_site) else {
            return false;
        };
        let Some(new_site) = self.labelled_site(&frames, label) else {
            return false;
        };
        let changed = match map {
            Map::Registered => self.registered.set_site(start, new_site),
            Map::Granules => self.granules.set_site(start, new_site),
            Map::Medium => self.medium.set_site(start, new_site),
            Map::Big => self.big.set_site(start, new_site),
            Map::Small => None,
        };
        let Some(block) = changed else {
            return false;
        };
        if block.site != new_site {
            let size = block.end - block.start;
            self.move_count(block.site, new_site, size);
            if let Some(r) = self.record(block.record) {
                r.site.store(new_site, Relaxed);
            }
        }
        true
    }

    /// Moves one live block of `size` bytes from site `old` to `new`.
    fn move_count(&self, old: u32, new: u32, size: u64) {
        if let Some(s) = self.sites.get(old as usize) {
            s.allocations.fetch_sub(1, Relaxed);
            s.bytes.fetch_sub(size, Relaxed);
            let _ = s
                .live
                .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        }
        if let Some(s) = self.sites.get(new as usize) {
            s.count_block(size);
        }
    }

    /// [`Objects::relabel`] for a small block starting at `start`.
    fn relabel_small(&self, start: u64, label: &[u8]) -> bool {
        let Some(map) = small_map::existing() else {
            return false;
        };
        let Some((_, size, old_site)) = map.find_start(start) else {
            return false;
        };
        let Some((frames, _)) = self.site_info(old_site) else {
            return false;
        };
        let Some(new_site) = self.labelled_site(&frames, label) else {
            return false;
        };
        if new_site != old_site && map.insert(start, size, new_site).is_ok() {
            self.move_count(old_site, new_site, size);
            if let Some(s) = self.sites.get(new_site as usize) {
                s.mark_small();
            }
        }
        true
    }

    /// Counts the allocation at its site and appends its log record
    /// (index + 1, 0 if the log is full or not kept).
    fn new_record(&self, start: u64, size: u64, site: u32, thread: u32, thread_head: u64) -> u64 {
        if let Some(s) = self.sites.get(site as usize) {
            s.count_block(size);
        }
        if self.records.is_empty() {
            return 0; // No log kept.
        }
        let index = self.record_count.fetch_add(1, Relaxed) as usize;
        match self.records.get(index) {
            Some(r) => {
                r.start.store(start, Relaxed);
                r.size.store(size, Relaxed);
                r.site.store(site, Relaxed);
                r.thread.store(thread, Relaxed);
                r.alloc_ns.store(sys::now_unix_ns(), Relaxed);
                r.free_ns.store(0, Relaxed);
                r.previous.store(thread_head, Relaxed);
                index as u64 + 1
            }
            None => {
                self.records_dropped.fetch_add(1, Relaxed);
                0
            }
        }
    }

    /// Allocation record `id` (index + 1).
    pub fn record(&self, id: u64) -> Option<&Record> {
        id.checked_sub(1).and_then(|i| self.records.get(i as usize))
    }

    /// Forgets the block starting at `start`, if tracked, and stamps its
    /// free time.
    pub fn remove(&self, start: u64) {
        self.remove_sized(start, None)
    }

    /// [`Objects::remove`], looking first in the map that a block of
    /// `size` bytes goes to (a hint: every map is searched).
    pub fn remove_sized(&self, start: u64, size: Option<u64>) {
        if let Some((_, site)) = small_map::existing().and_then(|m| m.remove(start)) {
            if let Some(s) = self.sites.get(site as usize) {
                s.count_free();
            }
            return;
        }
        let small = || self.granules.remove(start);
        let medium = || self.medium.remove(start);
        let big = || self.big.remove(start);
        let removed = match size {
            Some(s) if s >= BIG_BYTES => big().or_else(medium).or_else(small),
            Some(s) if s >= MEDIUM_BYTES => medium().or_else(small).or_else(big),
            _ => small().or_else(medium).or_else(big),
        };
        if let Some(block) = removed {
            if let Some(s) = self.sites.get(block.site as usize) {
                s.count_free();
            }
            if let Some(r) = self.record(block.record) {
                r.free_ns.store(sys::now_unix_ns(), Relaxed);
            }
        }
    }

    /// Maps every page of the lookup tables (see `Granules::prefault`).
    pub fn prefault(&self) -> u64 {
        self.granules
            .prefault()
            .wrapping_add(self.medium.prefault())
    }

    /// After fork: the child is single-threaded, so locks held by other
    /// threads of the parent are released. The granule tables need nothing:
    /// a slot a parent's thread left odd is skipped (`granules`).
    pub fn reset_locks_after_fork(&self) {
        sys::release_after_fork(&self.site_lock);
        if let Some(m) = small_map::existing() {
            m.reset_locks_after_fork();
        }
        self.big.reset_after_fork();
        self.registered.reset_after_fork();
    }
}

fn site_frames_equal(site: &Site, frames: &[u64]) -> bool {
    site.len.load(Relaxed) as usize == frames.len()
        && site
            .frames
            .iter()
            .zip(frames)
            .all(|(a, b)| a.load(Relaxed) == *b)
}

#[cfg(test)]
mod tests;
