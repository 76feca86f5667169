//! Big blocks (at least `BIG_BYTES`): few and long-lived, kept in an array
//! sorted by address under a sequence lock. Writers serialise on a spin lock
//! that the signal handler never takes; readers binary-search
//! optimistically and retry if a writer was active. Insert and remove move
//! O(n) entries, with n the number of live big blocks.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering::*};

use super::{lock, unlock, Block, Lookup};
use crate::sys;

/// Entries of a map without an address-space limit.
pub const CAPACITY: usize = 1 << 16;

#[repr(C)]
pub struct Entry {
    start: AtomicU64,
    end: AtomicU64,
    site: AtomicU64,
    record: AtomicU64,
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Entry {}

pub struct BigBlocks {
    entries: &'static [Entry],
    len: AtomicU64,
    seq: AtomicU64,
    write_lock: AtomicBool,
}

impl BigBlocks {
    /// A map of `capacity` entries (at most that many live blocks).
    pub fn new(capacity: usize) -> Option<BigBlocks> {
        Some(BigBlocks {
            entries: sys::map_zeroed::<Entry>(capacity)?,
            len: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            write_lock: AtomicBool::new(false),
        })
    }

    pub fn insert(&self, block: Block) -> bool {
        lock(&self.write_lock);
        let len = self.len.load(Relaxed) as usize;
        let ok = len < self.entries.len();
        if ok {
            let pos = self.lower_bound(block.start, len);
            self.begin_write();
            let mut i = len;
            while i > pos {
                self.copy_entry(i - 1, i);
                i -= 1;
            }
            self.len.store(len as u64 + 1, Relaxed);
            let e = &self.entries[pos];
            e.start.store(block.start, Relaxed);
            e.end.store(block.end, Relaxed);
            e.site.store(block.site as u64, Relaxed);
            e.record.store(block.record, Relaxed);
            self.end_write();
        }
        unlock(&self.write_lock);
        ok
    }

    pub fn remove(&self, start: u64) -> Option<Block> {
        self.find_start(start)?;
        lock(&self.write_lock);
        let len = self.len.load(Relaxed) as usize;
        let pos = self.lower_bound(start, len);
        let mut removed = None;
        if pos < len && self.entries[pos].start.load(Relaxed) == start {
            removed = Some(self.block(pos));
            self.begin_write();
            for i in pos..len - 1 {
                self.copy_entry(i + 1, i);
            }
            self.len.store(len as u64 - 1, Relaxed);
            self.end_write();
        }
        unlock(&self.write_lock);
        removed
    }

    /// The block starting exactly at `start` (optimistic; a writer in
    /// progress makes it answer yes, which only costs the lock in `remove`).
    pub fn find_start(&self, start: u64) -> Option<()> {
        let s1 = self.seq.load(Acquire);
        if s1 & 1 == 1 {
            return Some(());
        }
        let len = (self.len.load(Relaxed) as usize).min(self.entries.len());
        let pos = self.lower_bound(start, len);
        let found = pos < len && self.entries[pos].start.load(Relaxed) == start;
        fence(Acquire);
        (found || self.seq.load(Relaxed) != s1).then_some(())
    }

    /// The site of the block containing `addr`. Safe in a signal handler.
    pub fn lookup(&self, addr: u64) -> Lookup {
        self.lookup_nested(addr, 1)
    }

    /// The block containing `addr` among the `depth` blocks that start last
    /// at or below it, latest start first: with nested blocks, the innermost
    /// one (as long as it is at most `depth` entries back). Safe in a signal
    /// handler.
    pub fn lookup_nested(&self, addr: u64, depth: usize) -> Lookup {
        for _ in 0..8 {
            let s1 = self.seq.load(Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let len = (self.len.load(Relaxed) as usize).min(self.entries.len());
            let pos = self.upper_bound(addr, len);
            let mut found = Lookup::NotFound;
            for e in self.entries[pos.saturating_sub(depth)..pos].iter().rev() {
                let end = e.end.load(Relaxed);
                if addr < end {
                    found = Lookup::Block {
                        site: e.site.load(Relaxed) as u32,
                        start: e.start.load(Relaxed),
                        end,
                    };
                    break;
                }
            }
            fence(Acquire);
            if self.seq.load(Relaxed) == s1 {
                return found;
            }
        }
        Lookup::Busy
    }

    /// The block starting exactly at `start` (under the write lock).
    pub fn find_block(&self, start: u64) -> Option<Block> {
        lock(&self.write_lock);
        let len = self.len.load(Relaxed) as usize;
        let pos = self.lower_bound(start, len);
        let found =
            (pos < len && self.entries[pos].start.load(Relaxed) == start).then(|| self.block(pos));
        unlock(&self.write_lock);
        found
    }

    /// Gives the block starting at `start` the site `site`; returns the
    /// block as it was.
    pub fn set_site(&self, start: u64, site: u32) -> Option<Block> {
        lock(&self.write_lock);
        let len = self.len.load(Relaxed) as usize;
        let pos = self.lower_bound(start, len);
        let mut old = None;
        if pos < len && self.entries[pos].start.load(Relaxed) == start {
            old = Some(self.block(pos));
            self.begin_write();
            self.entries[pos].site.store(site as u64, Relaxed);
            self.end_write();
        }
        unlock(&self.write_lock);
        old
    }

    fn block(&self, i: usize) -> Block {
        let e = &self.entries[i];
        Block {
            start: e.start.load(Relaxed),
            end: e.end.load(Relaxed),
            site: e.site.load(Relaxed) as u32,
            record: e.record.load(Relaxed),
        }
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

    pub fn reset_after_fork(&self) {
        sys::release_after_fork(&self.write_lock);
        let s = self.seq.load(Relaxed);
        if s & 1 == 1 {
            self.seq.store(s + 1, Relaxed);
        }
    }
}
