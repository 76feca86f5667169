//! Per-thread access-pattern tables, written by the signal handler: the
//! stride of each access site (object, sampled instruction).
//!
//! Two fixed-size tables per thread, mapped before sampling starts and
//! made of atomics (a checkpoint reads them from another thread):
//!
//! * [`IpTable`], direct-mapped by instruction address: the decoder's
//!   stride of that instruction (computed once, [`crate::access::stride`]) and the
//!   last sampled address with the object it was in;
//! * [`SiteTable`], open addressing by (object node, instruction): the
//!   counted decoder strides and sampled deltas of each site
//!   ([`formats::patterns::STRIDE_SLOTS`] slots each, the rest counted as
//!   "other"), and the GCD of the deltas. A full table loses the
//!   observation (counted, never the sample).

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::*};

use formats::patterns::{StrideCounts, STRIDE_SLOTS};

use crate::access::stride::{Decoded, Stride};
use crate::cct::filled::Filled;
use crate::sys;

/// Entries of the per-thread instruction table.
pub const IP_ENTRIES: usize = 1024;
/// Slots of the per-thread site table.
pub const SITE_SLOTS: usize = 4096;
const MAX_PROBE: usize = 32;

/// Decoder result states of an [`IpEntry`].
const STRIDE_UNKNOWN: u32 = 0;
const STRIDE_NONE: u32 = 1;
const STRIDE_SOME: u32 = 2;
const STRIDE_DATA: u32 = 3;

#[derive(Default)]
pub struct IpEntry {
    ip: AtomicU64,
    /// `STRIDE_*`.
    state: AtomicU32,
    element: AtomicU32,
    stride: AtomicI64,
    last_addr: AtomicU64,
    /// Object node + 1 of the last sampled address (0: none).
    last_object: AtomicU32,
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for IpEntry {}

/// Instruction address -> decoder stride and last sampled address.
pub struct IpTable {
    entries: &'static [IpEntry],
}

fn ip_slot(ip: u64) -> usize {
    (ip as usize ^ (ip as usize >> 10)) % IP_ENTRIES
}

impl IpTable {
    pub fn new() -> Option<IpTable> {
        Some(IpTable {
            entries: sys::map_zeroed::<IpEntry>(IP_ENTRIES)?,
        })
    }

    /// The decoder's verdict on `ip`, computing it with `compute` the first
    /// time (or after the entry was taken by another instruction).
    pub fn stride(&self, ip: u64, compute: impl FnOnce() -> Decoded) -> Decoded {
        let e = &self.entries[ip_slot(ip)];
        if e.ip.load(Relaxed) != ip {
            e.ip.store(ip, Relaxed);
            e.state.store(STRIDE_UNKNOWN, Relaxed);
            e.last_object.store(0, Relaxed);
        }
        match e.state.load(Relaxed) {
            STRIDE_SOME => Decoded::Stride(Stride {
                bytes: e.stride.load(Relaxed),
                element: e.element.load(Relaxed),
            }),
            STRIDE_NONE => Decoded::Unknown,
            STRIDE_DATA => Decoded::DataDependent,
            _ => {
                let d = compute();
                let state = match d {
                    Decoded::Stride(s) => {
                        e.stride.store(s.bytes, Relaxed);
                        e.element.store(s.element, Relaxed);
                        STRIDE_SOME
                    }
                    Decoded::DataDependent => STRIDE_DATA,
                    Decoded::Unknown => STRIDE_NONE,
                };
                e.state.store(state, Relaxed);
                d
            }
        }
    }

    /// Empties the table for another thread (`sys::discard`; its owner
    /// ended, nothing reads it any more).
    pub fn reset(&self) {
        sys::discard(self.entries);
    }

    /// Remembers `addr` in `object` as the last sample of `ip`; returns the
    /// delta from the previous sample of `ip` if that was in the same
    /// object.
    pub fn delta(&self, ip: u64, object: u32, addr: u64) -> Option<i64> {
        let e = &self.entries[ip_slot(ip)];
        if e.ip.load(Relaxed) != ip {
            e.ip.store(ip, Relaxed);
            e.state.store(STRIDE_UNKNOWN, Relaxed);
            e.last_object.store(0, Relaxed);
        }
        let same = e.last_object.swap(object + 1, Relaxed) == object + 1;
        let last = e.last_addr.swap(addr, Relaxed);
        same.then(|| addr.wrapping_sub(last) as i64)
    }
}

/// Counted values: `STRIDE_SLOTS` (value, count) pairs and the rest.
#[derive(Default)]
struct Slots {
    values: [AtomicI64; STRIDE_SLOTS],
    counts: [AtomicU64; STRIDE_SLOTS],
    other: AtomicU64,
}

impl Slots {
    fn add(&self, v: i64) {
        for i in 0..STRIDE_SLOTS {
            let n = self.counts[i].load(Relaxed);
            if n == 0 {
                self.values[i].store(v, Relaxed);
                self.counts[i].store(1, Release);
                return;
            }
            if self.values[i].load(Relaxed) == v {
                self.counts[i].store(n + 1, Release);
                return;
            }
        }
        self.other.fetch_add(1, Relaxed);
    }

    fn read(&self) -> (Vec<(i64, u64)>, u64) {
        let list = (0..STRIDE_SLOTS)
            .filter_map(|i| {
                let n = self.counts[i].load(Acquire);
                (n > 0).then(|| (self.values[i].load(Relaxed), n))
            })
            .collect();
        (list, self.other.load(Relaxed))
    }
}

#[derive(Default)]
pub struct Site {
    /// 0 = empty; published last.
    ip: AtomicU64,
    object: AtomicU32,
    element: AtomicU32,
    samples: AtomicU64,
    strides: Slots,
    data_dependent: AtomicU64,
    deltas: Slots,
    gcd: AtomicU64,
    /// Data address minus the owning frame's CFA of the first sample in a
    /// stack frame (negative; 0 = none).
    frame_offset: AtomicI64,
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Site {}

/// (object node, instruction) -> stride observations.
pub struct SiteTable {
    sites: &'static [Site],
    /// The slots with a site, for [`SiteTable::entries`].
    filled: Filled,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl SiteTable {
    pub fn new() -> Option<SiteTable> {
        Some(SiteTable {
            sites: sys::map_zeroed::<Site>(SITE_SLOTS)?,
            filled: Filled::new(SITE_SLOTS)?,
        })
    }

    fn find(&self, object: u32, ip: u64) -> Option<&Site> {
        let mask = self.sites.len() - 1;
        let h = (ip ^ (u64::from(object) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut slot = (h >> 32) as usize & mask;
        for _ in 0..MAX_PROBE {
            let s = &self.sites[slot];
            let at = s.ip.load(Acquire);
            if at == 0 {
                s.object.store(object, Relaxed);
                s.ip.store(ip, Release);
                self.filled.push(slot);
                return Some(s);
            }
            if at == ip && s.object.load(Relaxed) == object {
                return Some(s);
            }
            slot = (slot + 1) & mask;
        }
        None
    }

    /// Empties the table for another thread (`sys::discard`; its owner
    /// ended, nothing reads it any more).
    pub fn reset(&self) {
        if self.filled.slots().next().is_some() {
            sys::discard(self.sites);
        }
        self.filled.reset();
    }

    /// Records one sample of site (`object`, `ip`): the decoder's verdict,
    /// its delta from the previous sample and, for a stack frame's site,
    /// where in the frame it fell (data address minus the frame's CFA;
    /// the site keeps its first). False when the table is full.
    pub fn note(
        &self,
        object: u32,
        ip: u64,
        decoded: Decoded,
        delta: Option<i64>,
        frame_offset: Option<i64>,
    ) -> bool {
        let Some(site) = self.find(object, ip) else {
            return false;
        };
        site.samples.fetch_add(1, Relaxed);
        if let Some(offset) = frame_offset {
            let _ = site
                .frame_offset
                .compare_exchange(0, offset, Relaxed, Relaxed);
        }
        match decoded {
            Decoded::Stride(s) => {
                site.element.store(s.element, Relaxed);
                site.strides.add(s.bytes);
            }
            Decoded::DataDependent => {
                site.data_dependent.fetch_add(1, Relaxed);
            }
            Decoded::Unknown => {}
        }
        if let Some(d) = delta {
            site.deltas.add(d);
            if d != 0 {
                let g = gcd(site.gcd.load(Relaxed), d.unsigned_abs());
                site.gcd.store(g, Relaxed);
            }
        }
        true
    }

    /// Every (object node, instruction, counts, frame offset), in no
    /// particular order.
    pub fn entries(&self) -> impl Iterator<Item = (u32, u64, StrideCounts, Option<i64>)> + '_ {
        self.filled.slots().filter_map(|slot| {
            let s = &self.sites[slot];
            let ip = s.ip.load(Acquire);
            if ip == 0 {
                return None;
            }
            let (strides, other_strides) = s.strides.read();
            let (deltas, other_deltas) = s.deltas.read();
            Some((
                s.object.load(Relaxed),
                ip,
                StrideCounts {
                    samples: s.samples.load(Relaxed),
                    element_bytes: s.element.load(Relaxed),
                    strides,
                    other_strides,
                    data_dependent: s.data_dependent.load(Relaxed),
                    deltas,
                    other_deltas,
                    delta_gcd: s.gcd.load(Relaxed),
                },
                Some(s.frame_offset.load(Relaxed)).filter(|&o| o != 0),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_count_strides_and_deltas() {
        let t = SiteTable::new().unwrap();
        let s = Decoded::Stride(Stride {
            bytes: 320_000,
            element: 8,
        });
        for d in [None, Some(640_000), Some(-1600), Some(640_000)] {
            assert!(t.note(7, 0x401000, s, d, None));
        }
        for d in [1, 2, 3, 4, 5, 6] {
            assert!(t.note(7, 0x401010, Decoded::Unknown, Some(d * 8), None));
        }
        // A stack site keeps where in its frame its first sample fell.
        assert!(t.note(7, 0x401010, Decoded::Unknown, None, Some(-4096)));
        assert!(t.note(7, 0x401010, Decoded::Unknown, None, Some(-64)));
        let mut e: Vec<_> = t.entries().collect();
        e.sort_by_key(|x| x.1);
        assert_eq!(e.len(), 2);
        let (obj, ip, c, frame) = &e[0];
        assert_eq!((*obj, *ip, *frame), (7, 0x401000, None));
        assert_eq!(e[1].3, Some(-4096));
        assert_eq!(c.samples, 4);
        assert_eq!(c.strides, vec![(320_000, 4)]);
        assert_eq!(c.deltas, vec![(640_000, 2), (-1600, 1)]);
        assert_eq!(c.delta_gcd, 1600);
        let c = &e[1].2;
        assert_eq!(c.deltas.len(), STRIDE_SLOTS);
        assert_eq!(c.other_deltas, 2);
        assert_eq!(c.delta_gcd, 8);
    }

    #[test]
    fn deltas_need_the_same_instruction_and_object() {
        let t = IpTable::new().unwrap();
        assert_eq!(t.delta(0x40, 1, 1000), None);
        assert_eq!(t.delta(0x40, 1, 1064), Some(64));
        assert_eq!(t.delta(0x40, 2, 5000), None);
        assert_eq!(t.delta(0x40, 2, 4000), Some(-1000));
        let mut calls = 0;
        for _ in 0..3 {
            t.stride(0x40, || {
                calls += 1;
                Decoded::Unknown
            });
        }
        assert_eq!(calls, 1);
    }
}
