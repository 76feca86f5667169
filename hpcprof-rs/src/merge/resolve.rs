//! Address resolution of one profile: runtime address -> (module, file
//! address) through the profile's module table ([`AddrMap`]), then the
//! inline chain of frames through the worker's cache and the shared
//! [`Symbolizer`] ([`Resolver`]).

use std::sync::Arc;

use formats::measurement::ThreadProfile;
use rustc_hash::FxHashMap;

use crate::symbolize::{Loc, Symbolizer};

/// Runtime address -> module of one profile.
pub(super) struct AddrMap {
    /// (start, end, module id, bias), sorted by start.
    pub(super) ranges: Vec<(u64, u64, u32, u64)>,
}

impl AddrMap {
    pub(super) fn locate(&self, addr: u64) -> Loc {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        if i > 0 {
            let (start, end, module, bias) = self.ranges[i - 1];
            if addr >= start && addr < end {
                return Loc::Module(module, addr.wrapping_sub(bias));
            }
        }
        Loc::Unknown(addr)
    }
}

/// Resolves one profile's addresses: its module map, the worker's cache and
/// the shared symboliser.
pub(super) struct Resolver<'a> {
    pub(super) addrs: &'a AddrMap,
    pub(super) cache: &'a mut FxHashMap<Loc, Arc<[u32]>>,
    pub(super) symbols: &'a Symbolizer,
}

impl Resolver<'_> {
    pub(super) fn chain(&mut self, loc: Loc) -> Arc<[u32]> {
        if let Some(c) = self.cache.get(&loc) {
            return c.clone();
        }
        let c = self.symbols.chain(loc);
        self.cache.insert(loc, c.clone());
        c
    }

    /// Where a thread was created (`ThreadInfo::created_at`, innermost
    /// first): root first, inline chains expanded; empty for the main
    /// thread.
    pub(super) fn creation_path(&mut self, frames: &[u64]) -> Vec<u32> {
        let mut path = Vec::new();
        for &a in frames.iter().rev() {
            let chain = self.chain(self.addrs.locate(a));
            path.extend_from_slice(&chain);
        }
        path
    }

    /// Allocation path of a site: root first, inline chains expanded.
    pub(super) fn alloc_path(&mut self, p: &ThreadProfile, site: u32) -> Vec<u32> {
        let Some(site) = p.alloc_sites.get(site as usize) else {
            return Vec::new();
        };
        let mut path = Vec::with_capacity(site.frames.len() + 1);
        // The calls up to the innermost one in the program's own code keep
        // their offsets: the allocator's call (gfortran's one `malloc` per
        // array of an `ALLOCATE`), and the program's call of `operator
        // new` or of a library function that allocates (`std::vector<double>
        // a(n), b(n);` calls one out-of-line constructor twice from one
        // line: two objects, told apart by their order).
        let mut chains = Vec::with_capacity(site.frames.len());
        let mut program_reached = false;
        for &a in &site.frames {
            let loc = self.addrs.locate(a);
            chains.push(self.symbols.site_chain(loc, !program_reached));
            if !program_reached {
                let outer = self.symbols.outer_frame(loc);
                program_reached = outer.module != formats::database::LABEL_MODULE
                    && !crate::name::is_runtime(&outer);
            }
        }
        for chain in chains.iter().rev() {
            path.extend_from_slice(chain);
        }
        if let Some(label) = &site.label {
            path.push(self.symbols.label_frame(label));
        }
        path
    }
}
