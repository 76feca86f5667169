//! The slots a single-writer, insert-only table has filled, in the order it
//! filled them. Reading such a table when a profile is written then visits
//! those slots only, not every page of a mostly empty table: a thread that
//! took a handful of samples used to fault in the 1 MiB offset histogram
//! and the 1 MiB stride table page by page to find them (about 0.45 ms a
//! thread; programs that start a thread per task paid it for every task).

use std::sync::atomic::{AtomicU32, Ordering::*};

use crate::sys;

pub struct Filled {
    order: &'static [AtomicU32],
    len: AtomicU32,
}

impl Filled {
    /// Room for `capacity` slots (the table's size), in preallocated memory
    /// touched only as it fills.
    pub fn new(capacity: usize) -> Option<Filled> {
        Some(Filled {
            order: sys::map_zeroed::<AtomicU32>(capacity)?,
            len: AtomicU32::new(0),
        })
    }

    /// Notes that `slot` was filled, after the slot's key was stored. Only
    /// the table's writer calls this; allocation-free, signal-safe.
    pub fn push(&self, slot: usize) {
        let n = self.len.load(Relaxed) as usize;
        if let Some(o) = self.order.get(n) {
            o.store(slot as u32, Relaxed);
            self.len.store(n as u32 + 1, Release);
        }
    }

    /// Forgets every slot (the table was emptied for another thread; no
    /// other thread reads it meanwhile).
    pub fn reset(&self) {
        if self.len.load(Acquire) > 0 {
            sys::discard(self.order);
        }
        self.len.store(0, Release);
    }

    /// The filled slots, oldest first (readable from any thread: a slot is
    /// listed only once its key is visible).
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        let n = (self.len.load(Acquire) as usize).min(self.order.len());
        self.order[..n].iter().map(|s| s.load(Relaxed) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_what_was_pushed_and_no_more_than_capacity() {
        let f = Filled::new(4).unwrap();
        assert_eq!(f.slots().count(), 0);
        for s in [9, 3, 7, 1, 5] {
            f.push(s);
        }
        assert_eq!(f.slots().collect::<Vec<_>>(), vec![9, 3, 7, 1]);
    }
}
