//! The heap-object map and the allocation-site table.
//!
//! **Sites**: every distinct allocation call path gets one entry in an
//! append-only table (deduplicated by hash under a writers-only spin lock).
//! **Objects**: live tracked blocks as a sorted array of (start, end, site)
//! guarded by a sequence lock. Writers (the malloc hooks) serialise on a spin
//! lock; the signal handler never takes it: it reads optimistically and
//! retries a few times if a writer was active, then gives up (counted as a
//! dropped lookup). Lookup is a binary search: O(log n) with no allocation.
//! Frees of untracked blocks take no lock (an optimistic exact lookup first).

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::OnceLock;

use crate::ffi;

/// Longest allocation call path kept.
pub const MAX_ALLOC_FRAMES: usize = 48;
const SITE_CAPACITY: usize = 1 << 16;
const OBJECT_CAPACITY: usize = 1 << 20;

pub struct Site {
    hash: AtomicU64,
    len: AtomicU32,
    pub allocations: AtomicU64,
    pub bytes: AtomicU64,
    pub max_bytes: AtomicU64,
    frames: [AtomicU64; MAX_ALLOC_FRAMES],
}

#[repr(C)]
pub struct Entry {
    start: AtomicU64,
    end: AtomicU64,
    site: AtomicU64,
    /// Index + 1 of the block's allocation record (0: none).
    record: AtomicU64,
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

const RECORD_CAPACITY: usize = 1 << 20;

pub struct Objects {
    sites: &'static [Site],
    site_index: &'static [AtomicU32],
    site_count: AtomicU32,
    site_lock: AtomicBool,
    entries: &'static [Entry],
    records: &'static [Record],
    record_count: AtomicU64,
    /// Tracked allocations that did not fit in the log.
    pub records_dropped: AtomicU64,
    len: AtomicU64,
    seq: AtomicU64,
    write_lock: AtomicBool,
}

static OBJECTS: OnceLock<Objects> = OnceLock::new();

/// Creates the tables (at library load).
pub fn init() -> bool {
    let Some(sites) = ffi::map_zeroed::<Site>(SITE_CAPACITY) else {
        return false;
    };
    let Some(site_index) = ffi::map_zeroed::<AtomicU32>(SITE_CAPACITY * 2) else {
        return false;
    };
    let Some(entries) = ffi::map_zeroed::<Entry>(OBJECT_CAPACITY) else {
        return false;
    };
    let Some(records) = ffi::map_zeroed::<Record>(RECORD_CAPACITY) else {
        return false;
    };
    OBJECTS
        .set(Objects {
            sites,
            site_index,
            site_count: AtomicU32::new(0),
            site_lock: AtomicBool::new(false),
            entries,
            records,
            record_count: AtomicU64::new(0),
            records_dropped: AtomicU64::new(0),
            len: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            write_lock: AtomicBool::new(false),
        })
        .is_ok()
}

pub fn get() -> Option<&'static Objects> {
    OBJECTS.get()
}

fn lock(flag: &AtomicBool) {
    while flag
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
        std::thread::yield_now();
    }
}

fn unlock(flag: &AtomicBool) {
    flag.store(false, Release);
}

fn path_hash(frames: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in frames {
        h ^= f;
        h = h.wrapping_mul(0x100_0000_01b3).rotate_left(23);
    }
    h | 1
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Site(u32),
    NotFound,
    /// A writer was active on every try.
    Busy,
}

impl Objects {
    /// Site id of this call path (innermost first), created if new. `None`
    /// when the table is full.
    pub fn site(&self, frames: &[u64]) -> Option<u32> {
        let frames = &frames[..frames.len().min(MAX_ALLOC_FRAMES)];
        let hash = path_hash(frames);
        let mask = self.site_index.len() - 1;
        let mut slot = hash as usize & mask;
        lock(&self.site_lock);
        let result = loop {
            let entry = self.site_index[slot].load(Relaxed);
            if entry == 0 {
                let id = self.site_count.load(Relaxed);
                if id as usize >= self.sites.len() {
                    break None;
                }
                let site = &self.sites[id as usize];
                site.hash.store(hash, Relaxed);
                site.len.store(frames.len() as u32, Relaxed);
                for (slot, f) in site.frames.iter().zip(frames) {
                    slot.store(*f, Relaxed);
                }
                self.site_count.store(id + 1, Release);
                self.site_index[slot].store(id + 1, Relaxed);
                break Some(id);
            }
            let site = &self.sites[entry as usize - 1];
            if site.hash.load(Relaxed) == hash && self.site_frames_equal(site, frames) {
                break Some(entry - 1);
            }
            slot = (slot + 1) & mask;
        };
        unlock(&self.site_lock);
        result
    }

    fn site_frames_equal(&self, site: &Site, frames: &[u64]) -> bool {
        site.len.load(Relaxed) as usize == frames.len()
            && site
                .frames
                .iter()
                .zip(frames)
                .all(|(a, b)| a.load(Relaxed) == *b)
    }

    pub fn site_count(&self) -> u32 {
        self.site_count.load(Acquire)
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
        if let Some(s) = self.sites.get(site as usize) {
            s.allocations.fetch_add(1, Relaxed);
            s.bytes.fetch_add(size, Relaxed);
            s.max_bytes.fetch_max(size, Relaxed);
        }
        let index = self.record_count.fetch_add(1, Relaxed) as usize;
        let record = match self.records.get(index) {
            Some(r) => {
                r.start.store(start, Relaxed);
                r.size.store(size, Relaxed);
                r.site.store(site, Relaxed);
                r.thread.store(thread, Relaxed);
                r.alloc_ns.store(ffi::now_unix_ns(), Relaxed);
                r.free_ns.store(0, Relaxed);
                r.previous.store(thread_head, Relaxed);
                index as u64 + 1
            }
            None => {
                self.records_dropped.fetch_add(1, Relaxed);
                0
            }
        };
        lock(&self.write_lock);
        let len = self.len.load(Relaxed) as usize;
        let pos = self.lower_bound(start, len);
        let replace = pos < len && self.entries[pos].start.load(Relaxed) == start;
        if replace || len < self.entries.len() {
            self.begin_write();
            if !replace {
                let mut i = len;
                while i > pos {
                    self.copy_entry(i - 1, i);
                    i -= 1;
                }
                self.len.store(len as u64 + 1, Relaxed);
            }
            let e = &self.entries[pos];
            e.start.store(start, Relaxed);
            e.end.store(start + size.max(1), Relaxed);
            e.site.store(site as u64, Relaxed);
            e.record.store(record, Relaxed);
            self.end_write();
        }
        unlock(&self.write_lock);
        record
    }

    /// Allocation record `id` (index + 1).
    pub fn record(&self, id: u64) -> Option<&Record> {
        id.checked_sub(1).and_then(|i| self.records.get(i as usize))
    }

    /// Forgets the block starting at `start`, if tracked.
    pub fn remove(&self, start: u64) {
        if !self.is_tracked(start) {
            return;
        }
        lock(&self.write_lock);
        let len = self.len.load(Relaxed) as usize;
        let pos = self.lower_bound(start, len);
        if pos < len && self.entries[pos].start.load(Relaxed) == start {
            if let Some(r) = self.record(self.entries[pos].record.load(Relaxed)) {
                r.free_ns.store(ffi::now_unix_ns(), Relaxed);
            }
            self.begin_write();
            for i in pos..len - 1 {
                self.copy_entry(i + 1, i);
            }
            self.len.store(len as u64 - 1, Relaxed);
            self.end_write();
        }
        unlock(&self.write_lock);
    }

    /// True if a tracked block starts exactly at `start`.
    pub fn is_tracked_start(&self, start: u64) -> bool {
        self.is_tracked(start)
    }

    /// True if a block starts exactly at `start` (optimistic; a writer in
    /// progress makes it answer true, which only costs a lock).
    fn is_tracked(&self, start: u64) -> bool {
        let s1 = self.seq.load(Acquire);
        if s1 & 1 == 1 {
            return true;
        }
        let len = (self.len.load(Relaxed) as usize).min(self.entries.len());
        let pos = self.lower_bound(start, len);
        let found = pos < len && self.entries[pos].start.load(Relaxed) == start;
        fence(Acquire);
        found || self.seq.load(Relaxed) != s1
    }

    /// The site of the block containing `addr`. Safe in a signal handler.
    pub fn lookup(&self, addr: u64) -> Lookup {
        for _ in 0..8 {
            let s1 = self.seq.load(Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let len = (self.len.load(Relaxed) as usize).min(self.entries.len());
            // Last entry with start <= addr.
            let pos = self.upper_bound(addr, len);
            let mut found = Lookup::NotFound;
            if pos > 0 {
                let e = &self.entries[pos - 1];
                if addr < e.end.load(Relaxed) {
                    found = Lookup::Site(e.site.load(Relaxed) as u32);
                }
            }
            fence(Acquire);
            if self.seq.load(Relaxed) == s1 {
                return found;
            }
        }
        Lookup::Busy
    }

    /// First index whose start >= key.
    fn lower_bound(&self, key: u64, len: usize) -> usize {
        let (mut lo, mut hi) = (0, len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entries[mid].start.load(Relaxed) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// First index whose start > key.
    fn upper_bound(&self, key: u64, len: usize) -> usize {
        let (mut lo, mut hi) = (0, len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entries[mid].start.load(Relaxed) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn copy_entry(&self, from: usize, to: usize) {
        let (f, t) = (&self.entries[from], &self.entries[to]);
        t.start.store(f.start.load(Relaxed), Relaxed);
        t.end.store(f.end.load(Relaxed), Relaxed);
        t.site.store(f.site.load(Relaxed), Relaxed);
        t.record.store(f.record.load(Relaxed), Relaxed);
    }

    fn begin_write(&self) {
        self.seq.fetch_add(1, Relaxed);
        fence(Release);
    }

    fn end_write(&self) {
        self.seq.fetch_add(1, Release);
    }

    /// After fork: the child is single-threaded, so locks held by other
    /// threads of the parent are released.
    pub fn reset_locks_after_fork(&self) {
        self.site_lock.store(false, Relaxed);
        self.write_lock.store(false, Relaxed);
        let s = self.seq.load(Relaxed);
        if s & 1 == 1 {
            self.seq.store(s + 1, Relaxed);
        }
    }
}

/// Address windows (64 MiB, glibc's arena heap size) that hold heap blocks
/// below the tracking threshold: samples there that hit no tracked object
/// go to `<small heap objects>` instead of unknown data. Filled by the
/// allocation hooks (one shift and a short scan per small block), read by
/// the signal handler.
pub struct SmallHeap {
    windows: [AtomicU64; SMALL_HEAP_WINDOWS],
}

const SMALL_HEAP_WINDOWS: usize = 256;
const WINDOW_SHIFT: u32 = 26;

static SMALL_HEAP: SmallHeap = SmallHeap {
    windows: [const { AtomicU64::new(0) }; SMALL_HEAP_WINDOWS],
};

/// Notes that a small heap block lives at `addr`.
pub fn note_small_block(addr: u64) {
    let window = (addr >> WINDOW_SHIFT) + 1;
    for slot in &SMALL_HEAP.windows {
        match slot.load(Relaxed) {
            w if w == window => return,
            0 => match slot.compare_exchange(0, window, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(w) if w == window => return,
                Err(_) => continue,
            },
            _ => continue,
        }
    }
}

/// True if `addr` lies in a window that holds small heap blocks.
pub fn in_small_heap(addr: u64) -> bool {
    let window = (addr >> WINDOW_SHIFT) + 1;
    for slot in &SMALL_HEAP.windows {
        match slot.load(Relaxed) {
            0 => return false,
            w if w == window => return true,
            _ => {}
        }
    }
    false
}
