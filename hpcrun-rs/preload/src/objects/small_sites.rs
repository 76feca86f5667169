//! How a small heap block (under `--min-bytes`) gets its site, cheaply,
//! and the count of the small blocks that got none.
//!
//! Every small block is entered in the compact map ([`super::small_map`])
//! at a site:
//! - blocks the program's own code allocated (the caller of `malloc` is
//!   in the executable or one of its libraries), the C++ library did
//!   (`operator new`) or a system library did (`strdup`): at their call
//!   path (hpcprof-rs names the site at the program's call above them). A full unwind per block costs
//!   about a microsecond, too much for a million per-row blocks; so the
//!   first [`KEY_FRAMES`] frames (a short unwind) are the key of a
//!   per-thread cache of sites ([`SiteCache`]), and only a key not seen
//!   before unwinds the whole path. Blocks whose paths agree in those
//!   frames share the site of the first of them: enough to see past an
//!   allocation helper or template and its caller (`allocate<T>` called
//!   from four places is four keys);
//! - blocks a runtime (MPI, OpenMP) allocated: at the allocating
//!   instruction alone (no unwind).
//!
//! A block that finds no room (the tracking memory cap, the kernel
//! refusing memory, a full site table) is counted by reason with its
//! bytes ([`untracked`]): the profile, the database, the report and the
//! viewer say how many and why, and `<small heap objects>` holds them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Frames of the short unwind that keys the site cache.
pub const KEY_FRAMES: usize = 6;

/// Entries of a thread's site cache (direct-mapped).
const CACHE_ENTRIES: usize = 512;

/// Whose small block it is, and so how its site is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallSite {
    /// The program's (or `operator new`'s, or a system library's): its
    /// call path.
    Program,
    /// A runtime's: the allocating instruction.
    Runtime,
}

/// Why a small block was left untracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Reason {
    /// The tracking memory cap (`--max-tracking-memory`) was reached.
    Cap,
    /// The kernel refused memory for the map (a sandbox, `ulimit -v`).
    NoMemory,
    /// The site table was full.
    SitesFull,
    /// An address the map cannot hold (not 8-byte aligned).
    Address,
    /// Allocated on a thread the profiler does not measure, or before it
    /// was ready.
    NotMeasured,
}

const REASONS: usize = 5;

impl Reason {
    /// The words the profile uses for it (the key of
    /// `SampleStats::untracked_blocks`).
    pub fn text(self) -> &'static str {
        match self {
            Reason::Cap => "tracking memory cap reached, raise --max-tracking-memory",
            Reason::NoMemory => "no memory for the object map (address-space limit or sandbox)",
            Reason::SitesFull => "allocation-site table full",
            Reason::Address => "address not 8-byte aligned",
            Reason::NotMeasured => "allocated on a thread not measured",
        }
    }

    pub const ALL: [Reason; REASONS] = [
        Reason::Cap,
        Reason::NoMemory,
        Reason::SitesFull,
        Reason::Address,
        Reason::NotMeasured,
    ];
}

impl From<super::small_map::Untracked> for Reason {
    fn from(u: super::small_map::Untracked) -> Reason {
        match u {
            super::small_map::Untracked::Cap => Reason::Cap,
            super::small_map::Untracked::NoMemory => Reason::NoMemory,
            super::small_map::Untracked::Address => Reason::Address,
        }
    }
}

static BLOCKS: [AtomicU64; REASONS] = [const { AtomicU64::new(0) }; REASONS];
static BYTES: [AtomicU64; REASONS] = [const { AtomicU64::new(0) }; REASONS];

/// Counts a small block of `size` bytes left untracked for `reason`.
pub fn count_untracked(reason: Reason, size: u64) {
    BLOCKS[reason as usize].fetch_add(1, Relaxed);
    BYTES[reason as usize].fetch_add(size, Relaxed);
}

/// The untracked small blocks so far: (reason, blocks, bytes), reasons
/// with none left out.
pub fn untracked() -> impl Iterator<Item = (Reason, u64, u64)> {
    Reason::ALL.into_iter().filter_map(|r| {
        let blocks = BLOCKS[r as usize].load(Relaxed);
        (blocks > 0).then(|| (r, blocks, BYTES[r as usize].load(Relaxed)))
    })
}

/// A thread's cache of the sites of small blocks, keyed by the hash of
/// their first [`KEY_FRAMES`] frames.
pub struct SiteCache {
    keys: [u64; CACHE_ENTRIES],
    sites: [u32; CACHE_ENTRIES],
    /// Lookups, and those that had to unwind the whole path.
    pub lookups: u64,
    pub misses: u64,
}

// SAFETY: integers only: all-zero bytes are the empty cache, the same as
// `default()`.
#[allow(unsafe_code)]
unsafe impl crate::sys::ZeroInit for SiteCache {}

impl Default for SiteCache {
    fn default() -> Self {
        SiteCache {
            keys: [0; CACHE_ENTRIES],
            sites: [0; CACHE_ENTRIES],
            lookups: 0,
            misses: 0,
        }
    }
}

/// The cache key of a path's first frames (never 0).
pub fn key(frames: &[u64]) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for &f in frames {
        h = (h ^ f).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
    h | 1
}

impl SiteCache {
    /// The site cached for `key`, or the one `full_site` finds (then
    /// cached; `None`: not cached).
    pub fn site(&mut self, key: u64, full_site: impl FnOnce() -> Option<u32>) -> Option<u32> {
        self.lookups += 1;
        let slot = (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 55) as usize % CACHE_ENTRIES;
        if self.keys[slot] == key {
            return Some(self.sites[slot]);
        }
        self.misses += 1;
        let site = full_site()?;
        self.keys[slot] = key;
        self.sites[slot] = site;
        Some(site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_seen_before_does_not_unwind_again() {
        let mut c = SiteCache::default();
        let a = key(&[1, 2, 3]);
        let b = key(&[1, 2, 4]);
        assert_ne!(a, b);
        assert_eq!(c.site(a, || Some(10)), Some(10));
        assert_eq!(c.site(a, || panic!("cached")), Some(10));
        assert_eq!(c.site(b, || Some(11)), Some(11));
        assert_eq!(c.site(b, || None), Some(11));
        assert_eq!((c.lookups, c.misses), (4, 2));
        // A failed full lookup is not cached.
        let d = key(&[9]);
        assert_eq!(c.site(d, || None), None);
        assert_eq!(c.site(d, || Some(3)), Some(3));
    }
}
