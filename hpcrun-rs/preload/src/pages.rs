//! The set of pages whose first fault has been seen (process-wide), for
//! the `first_touch` metric of the `page-faults` source: the first sampled
//! fault on a page is its first touch, and the faulting thread is the one
//! the kernel's first-touch policy places the page near.
//!
//! A lock-free open-addressing set of page numbers in memory mapped at
//! start (`MAP_NORESERVE`: only the touched part costs memory), safe in a
//! signal handler (the set's memory is touched at start: 16 MiB while
//! `page-faults` runs). A page that is unmapped and mapped again keeps its
//! first touch (documented limitation); a full set refuses new pages
//! (counted).
//!
//! Also [`RecentPages`]: per thread, the pages its last few `mem:soft`
//! samples touched, which tell a page that just faulted in from one the
//! thread reads again and again (`attribute::about_to_fault`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use crate::sys;

/// Pages the set can hold (8 GiB of 4 KiB pages; 16 MiB of memory).
pub const CAPACITY: usize = 1 << 21;
const MAX_PROBE: usize = 128;

static SET: OnceLock<&'static [AtomicU64]> = OnceLock::new();
/// Pages that found no room.
pub static FULL: AtomicU64 = AtomicU64::new(0);

/// Maps the set (outside any signal handler, before page-fault sampling
/// starts). Every page of it is touched here: inserts land on random
/// pages, and their faults would otherwise be sampled as the profiler's.
pub fn init() {
    if let Some(table) = sys::map_zeroed::<AtomicU64>(CAPACITY) {
        for slot in table.iter().step_by(4096 / 8) {
            slot.store(0, Relaxed);
        }
        let _ = SET.set(table);
    }
}

/// Records the page of `addr`; true if this is the first time it is seen.
pub fn first_touch(addr: u64) -> bool {
    let Some(table) = SET.get() else {
        return false;
    };
    insert(table, addr >> 12)
}

/// Inserts `page` into `table`; true if it was not there.
fn insert(table: &[AtomicU64], page: u64) -> bool {
    let key = page + 1;
    let mask = table.len() - 1;
    let mut h = page.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 31;
    let mut slot = h as usize & mask;
    for _ in 0..MAX_PROBE {
        match table[slot].compare_exchange(0, key, Relaxed, Relaxed) {
            Ok(_) => return true,
            Err(existing) if existing == key => return false,
            Err(_) => slot = (slot + 1) & mask,
        }
    }
    FULL.fetch_add(1, Relaxed);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_first_touched_once() {
        let table: Vec<AtomicU64> = (0..1024).map(|_| AtomicU64::new(0)).collect();
        assert!(insert(&table, 5));
        assert!(!insert(&table, 5));
        assert!(insert(&table, 6));
        // From several threads: exactly one wins each page.
        let wins = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for p in 100..400 {
                        if insert(&table, p) {
                            wins.fetch_add(1, Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(wins.load(Relaxed), 300);
    }
}

/// How many pages [`RecentPages`] remembers.
const RECENT: usize = 16;

/// The pages of a thread's recent sampled accesses, oldest replaced first
/// (one thread writes it, from its signal handler: atomics only for
/// interior mutability, no lock, no allocation).
pub struct RecentPages {
    pages: [AtomicU64; RECENT],
    next: AtomicU64,
}

impl Default for RecentPages {
    fn default() -> Self {
        RecentPages {
            pages: std::array::from_fn(|_| AtomicU64::new(0)),
            next: AtomicU64::new(0),
        }
    }
}

impl RecentPages {
    /// True if the page of `addr` is one of the remembered ones.
    pub fn contains(&self, addr: u64) -> bool {
        let page = (addr >> 12) + 1;
        self.pages.iter().any(|p| p.load(Relaxed) == page)
    }

    /// Remembers the page of `addr` (nothing if it already is).
    pub fn note(&self, addr: u64) {
        if self.contains(addr) {
            return;
        }
        let at = self.next.fetch_add(1, Relaxed) as usize % RECENT;
        self.pages[at].store((addr >> 12) + 1, Relaxed);
    }

    /// Forgets every page (a new thread's body).
    pub fn clear(&self) {
        for p in &self.pages {
            p.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
mod recent_tests {
    use super::RecentPages;

    #[test]
    fn remembers_the_last_pages_and_forgets_the_oldest() {
        let r = RecentPages::default();
        assert!(!r.contains(0));
        r.note(0x1000);
        r.note(0x1ff8); // the same page
        assert!(r.contains(0x1234));
        for k in 0..16u64 {
            r.note(0x10_0000 + k * 4096);
        }
        assert!(!r.contains(0x1000), "the oldest page is replaced");
        assert!(r.contains(0x10_0000 + 15 * 4096));
        r.clear();
        assert!(!r.contains(0x10_0000 + 15 * 4096));
    }
}
