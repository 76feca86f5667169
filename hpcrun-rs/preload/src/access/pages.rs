//! The set of pages whose first fault has been seen (process-wide), for
//! the `first_touch` metric of the `page-faults` source: the first sampled
//! fault on a page is its first touch, and the faulting thread is the one
//! the kernel's first-touch policy places the page near. A huge page is
//! one fault that places all its 4 KiB pages ([`pages_mapped`]); its
//! 2 MiB window is kept, so that its pages are not first touched again
//! when it is split and they fault in one by one
//! ([`first_touch_huge`]).
//!
//! A lock-free open-addressing set of page numbers in memory mapped at
//! start (`MAP_NORESERVE`: only the touched part costs memory), safe in a
//! signal handler (the set's memory is touched at start: 16 MiB while
//! `page-faults` runs). A page that is unmapped and mapped again keeps its
//! first touch (documented limitation); a full set refuses new pages
//! (counted).
//!
//! Also [`FaultWatch`], per thread, for `attribute::about_to_fault`: the
//! thread's faults and CPU time at its last reading, and [`RecentPages`],
//! the pages of its last fault-rule candidates, which tell a page that
//! just faulted in from one the thread reads again and again.

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

/// The 4 KiB pages a fault mapped, from the page size its sample reports
/// (`PERF_SAMPLE_DATA_PAGE_SIZE`): 512 for a 2 MiB transparent huge page;
/// 1 when the size is not reported (0) or not a power of two of at least
/// 4 KiB.
pub fn pages_mapped(page_size: u64) -> u64 {
    if page_size >= 4096 && page_size.is_power_of_two() {
        page_size / 4096
    } else {
        1
    }
}

/// Key bit of a 2 MiB window that a huge page's fault placed whole.
const HUGE_WINDOW: u64 = 1 << 62;
/// Key bit of a 2 MiB window in which a 4 KiB page was first touched.
const SMALL_IN_WINDOW: u64 = 1 << 61;
/// log2 of the windows' size (2 MiB).
const WINDOW_SHIFT: u32 = 21;

/// The first touch of the 4 KiB page at `addr`: true if neither the page
/// nor a huge page over it was seen before (a huge page split later, and
/// its pages dropped and faulted in again, is not touched first again).
pub fn first_touch(addr: u64) -> bool {
    let Some(table) = SET.get() else {
        return false;
    };
    let window = addr >> WINDOW_SHIFT;
    if contains(table, window | HUGE_WINDOW) {
        return false;
    }
    let first = insert(table, addr >> 12);
    if first {
        insert(table, window | SMALL_IN_WINDOW);
    }
    first
}

/// The first touch of a huge page of `pages` 4 KiB pages at `base`
/// (aligned to its size): `None` if it was seen before, else whether
/// some of its 4 KiB pages were first touched before it ([`seen`] says
/// which).
pub fn first_touch_huge(base: u64, pages: u64) -> Option<bool> {
    let table = SET.get()?;
    let windows = (pages >> (WINDOW_SHIFT - 12)).max(1);
    let first_window = base >> WINDOW_SHIFT;
    if !insert(table, first_window | HUGE_WINDOW) {
        return None;
    }
    let mut some_seen = false;
    for w in first_window..first_window + windows {
        if w != first_window {
            insert(table, w | HUGE_WINDOW);
        }
        some_seen |= contains(table, w | SMALL_IN_WINDOW);
    }
    Some(some_seen)
}

/// True if the 4 KiB page at `addr` was first touched before.
pub fn seen(addr: u64) -> bool {
    SET.get().is_some_and(|table| contains(table, addr >> 12))
}

/// True if `page` (a key) is in `table`.
fn contains(table: &[AtomicU64], page: u64) -> bool {
    let key = page + 1;
    let mask = table.len() - 1;
    let mut slot = slot_of(page) & mask;
    for _ in 0..MAX_PROBE {
        match table[slot].load(Relaxed) {
            0 => return false,
            k if k == key => return true,
            _ => slot = (slot + 1) & mask,
        }
    }
    false
}

fn slot_of(page: u64) -> usize {
    let mut h = page.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 31;
    h as usize
}

/// Inserts `page` into `table`; true if it was not there.
fn insert(table: &[AtomicU64], page: u64) -> bool {
    let key = page + 1;
    let mask = table.len() - 1;
    let mut slot = slot_of(page) & mask;
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
    fn a_huge_page_counts_its_small_pages() {
        assert_eq!(pages_mapped(4096), 1);
        assert_eq!(pages_mapped(2 << 20), 512);
        assert_eq!(pages_mapped(1 << 30), 262_144);
        assert_eq!(pages_mapped(0), 1);
        assert_eq!(pages_mapped(12_288), 1);
    }

    #[test]
    fn a_huge_page_s_window_is_kept_for_its_small_pages() {
        init();
        // A huge page at 64 GiB: its pages split later are not first
        // touched again, and it is not first touched twice.
        let huge = 64u64 << 30;
        assert_eq!(first_touch_huge(huge, 512), Some(false));
        assert_eq!(first_touch_huge(huge, 512), None);
        assert!(!first_touch(huge + 5 * 4096));
        // A window with a small page touched before: a huge page there
        // says so, and which page was seen.
        let window = huge + (2 << 20);
        assert!(first_touch(window + 4096));
        assert!(!first_touch(window + 4096));
        assert_eq!(first_touch_huge(window, 512), Some(true));
        assert!(seen(window + 4096));
        assert!(!seen(window + 2 * 4096));
        // Beyond the huge page, small pages are first touched as before.
        assert!(first_touch(window + (2 << 20)));
    }

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

/// What changed in a thread since its previous [`FaultWatch::since_last`]
/// reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinceLast {
    pub faults: u64,
    /// Samples the thread handled in between (at least 1).
    pub samples: u64,
    pub user_us: u64,
    pub system_us: u64,
}

/// A thread's page faults and CPU time at its last reading, and its recent
/// candidate pages (written only by the thread's own signal handler).
#[derive(Default)]
pub struct FaultWatch {
    faults: AtomicU64,
    sample: AtomicU64,
    user_us: AtomicU64,
    system_us: AtomicU64,
    pub recent: RecentPages,
    /// The pages of the Intel rule's samples (`attribute::waiting_at_ip`),
    /// kept apart from the fault rule's.
    pub waiting: RecentPages,
}

impl FaultWatch {
    /// Keeps `now`, taken at sample number `sample`, and returns the
    /// change since the previous reading (`None` at the first).
    pub fn since_last(&self, now: sys::ThreadUsage, sample: u64) -> Option<SinceLast> {
        let delta = |at: &AtomicU64, v: u64| v.saturating_sub(at.swap(v, Relaxed));
        let first = self.faults.load(Relaxed) == 0;
        let change = SinceLast {
            faults: delta(&self.faults, now.faults),
            samples: delta(&self.sample, sample).max(1),
            user_us: delta(&self.user_us, now.user_us),
            system_us: delta(&self.system_us, now.system_us),
        };
        (!first).then_some(change)
    }

    /// Forgets everything (a new thread's body).
    pub fn clear(&self) {
        for v in [&self.faults, &self.sample, &self.user_us, &self.system_us] {
            v.store(0, Relaxed);
        }
        self.recent.clear();
        self.waiting.clear();
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

    #[test]
    fn fault_watch_reports_the_change_since_the_previous_reading() {
        use super::{FaultWatch, SinceLast};
        use crate::sys::ThreadUsage;
        let w = FaultWatch::default();
        let at = |faults, user_us, system_us| ThreadUsage {
            faults,
            user_us,
            system_us,
        };
        assert_eq!(w.since_last(at(100, 1000, 10), 5), None);
        let change = w.since_last(at(180, 5000, 4010), 7);
        assert_eq!(
            change,
            Some(SinceLast {
                faults: 80,
                samples: 2,
                user_us: 4000,
                system_us: 4000
            })
        );
        w.clear();
        assert_eq!(w.since_last(at(200, 6000, 5000), 9), None);
    }
}
