//! The object map's lookups: which block holds an address ([`Objects::lookup`],
//! safe in the signal handler: registered ranges first, then the small-block
//! map, the granule tables and the big-block array), in which map a block
//! is ([`Objects::find`], for relabelling), whether a block starts at an
//! address and its site's label.

use std::sync::atomic::Ordering::*;

use super::{small_map, Map, Objects, REGISTERED_DEPTH};

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The block `[start, end)` allocated through `site`.
    Block {
        site: u32,
        start: u64,
        end: u64,
    },
    NotFound,
    /// A writer was active on every try.
    Busy,
}

impl Lookup {
    /// The site, when a block was found.
    pub fn site(self) -> Option<u32> {
        match self {
            Lookup::Block { site, .. } => Some(site),
            _ => None,
        }
    }
}

impl Objects {
    /// The map and start of the block containing `addr`, in lookup order.
    pub(super) fn find(&self, addr: u64) -> Option<(Map, u64)> {
        let start = |l: Lookup| match l {
            Lookup::Block { start, .. } => Some(start),
            _ => None,
        };
        if self.registered_live.load(Relaxed) > 0 {
            if let Some(s) = start(self.registered.lookup_nested(addr, REGISTERED_DEPTH)) {
                return Some((Map::Registered, s));
            }
        }
        if let Some((s, _, _)) = small_map::existing().and_then(|m| m.lookup(addr)) {
            return Some((Map::Small, s));
        }
        if let Some(s) = start(self.granules.lookup(addr)) {
            return Some((Map::Granules, s));
        }
        if let Some(s) = start(self.medium.lookup(addr)) {
            return Some((Map::Medium, s));
        }
        start(self.big.lookup(addr)).map(|s| (Map::Big, s))
    }
    /// True if a tracked block starts exactly at `start`.
    pub fn is_tracked_start(&self, start: u64) -> bool {
        small_map::existing().is_some_and(|m| m.find_start(start).is_some())
            || self.granules.find_start(start).is_some()
            || self.medium.find_start(start).is_some()
            || self.big.find_start(start).is_some()
    }

    /// The label of the site of the tracked block (or mapping) that starts
    /// at `start`, copied into `out`; returns its length (0: no such
    /// block, or no label).
    pub fn label_of_block_at(&self, start: u64, out: &mut [u8]) -> usize {
        match self.lookup(start) {
            Lookup::Block { site, start: s, .. } if s == start => self
                .sites
                .get(site as usize)
                .map_or(0, |site| site.label_into(out)),
            _ => 0,
        }
    }

    /// The site of the block containing `addr`. Safe in a signal handler.
    pub fn lookup(&self, addr: u64) -> Lookup {
        if self.registered_live.load(Relaxed) > 0 {
            match self.registered.lookup_nested(addr, REGISTERED_DEPTH) {
                Lookup::NotFound => {}
                found => return found,
            }
        }
        if let Some((start, size, site)) = small_map::existing().and_then(|m| m.lookup(addr)) {
            return Lookup::Block {
                site,
                start,
                end: start + size,
            };
        }
        match self.granules.lookup(addr) {
            Lookup::NotFound => match self.medium.lookup(addr) {
                Lookup::NotFound => self.big.lookup(addr),
                found => found,
            },
            found => found,
        }
    }
}
