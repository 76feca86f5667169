//! Arm SPE: decoding the packet stream the `arm_spe` PMU writes into the
//! perf AUX area into sampled operations.
//!
//! Each sampled operation is a *record*: a sequence of packets ended by an
//! End packet or a Timestamp packet. Packet encodings (Arm ARM, "Statistical
//! Profiling Extension"; the same as Linux's
//! tools/perf/util/arm-spe-decoder):
//!
//! | header byte        | packet       | payload                              |
//! |--------------------|--------------|--------------------------------------|
//! | `0x00`             | padding      | none                                 |
//! | `0x01`             | end          | none                                 |
//! | `0x71`             | timestamp    | 8 bytes                              |
//! | `0b01sz0010`       | events       | 1 << sz bytes, one bit per event     |
//! | `0b01sz0011`       | data source  | 1 << sz bytes                        |
//! | `0b011001cc`       | context      | 4 bytes                              |
//! | `0b010010cc`       | operation    | 1 byte; class cc (1 = load/store)    |
//! | `0b10110iii`       | address      | 8 bytes; index iii: 0 PC, 1 branch target, 2 data VA, 3 data PA |
//! | `0b10011iii`       | counter      | 2 bytes; 0 total, 1 issue, 2 translation latency |
//!
//! The size field `sz` is header bits 5:4 (payload = 1 << sz bytes). An
//! extended header `0b001000hh` precedes address and counter headers whose
//! index needs more than 3 bits (index = hh << 3 | iii); followed by `0x00`
//! it is an alignment packet instead. Payloads are little-endian.
//!
//! Memory level: the data source packet's values are implementation
//! defined; the Neoverse encoding (L1 0x0, L2 0x8, peer core 0x9, local
//! cluster 0xa, system cache 0xb, peer cluster 0xc, remote 0xd, DRAM 0xe)
//! is used when the caller says the core is a Neoverse one. Otherwise the
//! level is inferred from the events packet (L1D access/refill, LLC
//! access/miss, remote access) like perf's generic fallback.

use super::datasrc::{Access, MemLevel};

/// Event bits of the events packet.
pub mod events {
    pub const EXCEPTION_GEN: u64 = 1 << 0;
    pub const RETIRED: u64 = 1 << 1;
    pub const L1D_ACCESS: u64 = 1 << 2;
    pub const L1D_REFILL: u64 = 1 << 3;
    pub const TLB_ACCESS: u64 = 1 << 4;
    pub const TLB_WALK: u64 = 1 << 5;
    pub const NOT_TAKEN: u64 = 1 << 6;
    pub const MISPRED: u64 = 1 << 7;
    pub const LLC_ACCESS: u64 = 1 << 8;
    pub const LLC_MISS: u64 = 1 << 9;
    pub const REMOTE_ACCESS: u64 = 1 << 10;
    pub const ALIGNMENT: u64 = 1 << 11;
}

/// Address packet indices.
pub mod address {
    pub const PC: u8 = 0;
    pub const BRANCH_TARGET: u8 = 1;
    pub const DATA_VIRTUAL: u8 = 2;
    pub const DATA_PHYSICAL: u8 = 3;
    pub const PREV_BRANCH: u8 = 4;
}

/// Counter packet indices.
pub mod counter {
    pub const TOTAL_LATENCY: u8 = 0;
    pub const ISSUE_LATENCY: u8 = 1;
    pub const TRANSLATION_LATENCY: u8 = 2;
}

/// One SPE packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    Pad,
    End,
    Timestamp(u64),
    Address { index: u8, payload: u64 },
    Counter { index: u8, value: u64 },
    Context { index: u8, value: u64 },
    Operation { class: u8, payload: u64 },
    Events(u64),
    DataSource(u64),
}

/// Why the stream could not be decoded at some point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeError {
    /// The buffer ends inside a packet.
    NeedMore,
    /// No packet has this header byte.
    BadHeader(u8),
}

impl std::fmt::Display for SpeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpeError::NeedMore => write!(f, "SPE packet cut off at the end of the buffer"),
            SpeError::BadHeader(h) => write!(f, "no SPE packet has header byte {h:#04x}"),
        }
    }
}

impl std::error::Error for SpeError {}

fn payload_len(header: u8) -> usize {
    1 << ((header >> 4) & 3)
}

fn payload(buf: &[u8], start: usize, len: usize) -> Result<u64, SpeError> {
    let bytes = buf.get(start..start + len).ok_or(SpeError::NeedMore)?;
    let mut v = [0u8; 8];
    v[..len].copy_from_slice(bytes);
    Ok(u64::from_le_bytes(v))
}

/// Decodes the packet at the start of `buf`; `offset` is its position in
/// the (aligned) AUX buffer, for alignment packets. Returns the packet and
/// its length in bytes.
pub fn packet(buf: &[u8], offset: usize) -> Result<(Packet, usize), SpeError> {
    let &h0 = buf.first().ok_or(SpeError::NeedMore)?;
    let short = |p: Packet| -> Result<(Packet, usize), SpeError> { Ok((p, 1)) };
    let with_payload = |make: &dyn Fn(u64) -> Packet, ext: usize, header: u8| {
        let len = payload_len(header);
        payload(buf, 1 + ext, len).map(|v| (make(v), 1 + ext + len))
    };
    match h0 {
        0x00 => return short(Packet::Pad),
        0x01 => return short(Packet::End),
        0x71 => return with_payload(&Packet::Timestamp, 0, h0),
        _ => {}
    }
    if h0 & 0xcf == 0x42 {
        return with_payload(&Packet::Events, 0, h0);
    }
    if h0 & 0xcf == 0x43 {
        return with_payload(&Packet::DataSource, 0, h0);
    }
    if h0 & 0xfc == 0x64 {
        let index = h0 & 3;
        return with_payload(&|value| Packet::Context { index, value }, 0, h0);
    }
    if h0 & 0xfc == 0x48 {
        let class = h0 & 3;
        return with_payload(&|payload| Packet::Operation { class, payload }, 0, h0);
    }
    let (ext, h, hi) = if h0 & 0xfc == 0x20 {
        let &h1 = buf.get(1).ok_or(SpeError::NeedMore)?;
        if h1 == 0x00 {
            // Alignment: pad to the next multiple of 2 << (h0 & 3) bytes.
            let align = 1usize << ((h0 & 0xf) + 1);
            let skip = align - (offset & (align - 1));
            if buf.len() < skip {
                return Err(SpeError::NeedMore);
            }
            return Ok((Packet::Pad, skip));
        }
        (1, h1, (h0 & 3) << 3)
    } else {
        (0, h0, 0)
    };
    let index = hi | (h & 7);
    if h & 0xf8 == 0xb0 {
        return with_payload(&|payload| Packet::Address { index, payload }, ext, h);
    }
    if h & 0xf8 == 0x98 {
        return with_payload(&|value| Packet::Counter { index, value }, ext, h);
    }
    Err(SpeError::BadHeader(h0))
}

/// What a sampled operation was.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Load,
    Store,
    Branch,
    Other,
    #[default]
    Unknown,
}

/// One sampled operation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SpeRecord {
    /// The instruction's virtual address.
    pub pc: Option<u64>,
    /// Exception level of the instruction (0 = user).
    pub el: u8,
    pub data_va: Option<u64>,
    pub data_pa: Option<u64>,
    /// Cycles from dispatch to completion.
    pub total_latency: Option<u64>,
    pub issue_latency: Option<u64>,
    pub translation_latency: Option<u64>,
    /// Events packet bits ([`events`]).
    pub events: u64,
    pub op: Op,
    pub data_source: Option<u64>,
    pub timestamp: Option<u64>,
    pub context: Option<u64>,
}

/// Address packet payload -> address, as perf's `arm_spe_calc_ip`.
fn address_value(index: u8, payload: u64) -> u64 {
    let low = payload & ((1 << 56) - 1);
    match index {
        address::PC | address::BRANCH_TARGET | address::PREV_BRANCH => {
            let ns = payload >> 63 & 1 != 0;
            let el = payload >> 61 & 3;
            // Kernel addresses (EL1/EL2) have the top byte all ones.
            if ns && (el == 1 || el == 2) {
                low | 0xff << 56
            } else {
                low
            }
        }
        address::DATA_VIRTUAL => {
            // The top byte holds a tag; bits 55:52 all ones mean a kernel
            // address.
            if (payload >> 48) & 0xf0 == 0xf0 {
                low | 0xff << 56
            } else {
                low
            }
        }
        _ => low,
    }
}

impl SpeRecord {
    fn apply(&mut self, p: Packet) {
        match p {
            Packet::Address { index, payload } => {
                let v = address_value(index, payload);
                match index {
                    address::PC => {
                        self.pc = Some(v);
                        self.el = (payload >> 61 & 3) as u8;
                    }
                    address::DATA_VIRTUAL => self.data_va = Some(v),
                    address::DATA_PHYSICAL => self.data_pa = Some(v),
                    _ => {}
                }
            }
            Packet::Counter { index, value } => match index {
                counter::TOTAL_LATENCY => self.total_latency = Some(value),
                counter::ISSUE_LATENCY => self.issue_latency = Some(value),
                counter::TRANSLATION_LATENCY => self.translation_latency = Some(value),
                _ => {}
            },
            Packet::Context { value, .. } => self.context = Some(value),
            Packet::Operation { class, payload } => {
                self.op = match class {
                    1 if payload & 1 != 0 => Op::Store,
                    1 => Op::Load,
                    2 => Op::Branch,
                    _ => Op::Other,
                }
            }
            Packet::Events(e) => self.events = e,
            Packet::DataSource(s) => self.data_source = Some(s),
            Packet::Timestamp(t) => self.timestamp = Some(t),
            Packet::Pad | Packet::End => {}
        }
    }

    pub fn tlb_miss(&self) -> bool {
        self.events & events::TLB_WALK != 0
    }

    /// The memory level; `neoverse` selects the Neoverse data-source
    /// encoding (implementation defined elsewhere).
    pub fn level(&self, neoverse: bool) -> MemLevel {
        let remote = self.events & events::REMOTE_ACCESS != 0;
        if neoverse {
            let from_source = match self.data_source {
                Some(0x0) => Some(MemLevel::L1),
                Some(0x8) | Some(0x9) => Some(MemLevel::L2),
                Some(0xa) | Some(0xb) | Some(0xc) => Some(MemLevel::L3),
                Some(0xd) => Some(MemLevel::RemoteCache),
                Some(0xe) if remote => Some(MemLevel::RemoteDram),
                Some(0xe) => Some(MemLevel::LocalDram),
                _ => None,
            };
            if let Some(level) = from_source {
                return level;
            }
        }
        let e = self.events;
        if e & events::LLC_MISS != 0 {
            if remote {
                MemLevel::RemoteDram
            } else {
                MemLevel::LocalDram
            }
        } else if e & events::LLC_ACCESS != 0 {
            if remote {
                MemLevel::RemoteCache
            } else {
                MemLevel::L3
            }
        } else if remote {
            MemLevel::RemoteCache
        } else if e & events::L1D_REFILL != 0 {
            // Missed L1, but where it was served is not reported.
            MemLevel::Other
        } else if e & events::L1D_ACCESS != 0 {
            MemLevel::L1
        } else {
            MemLevel::Unknown
        }
    }

    pub fn access(&self, neoverse: bool) -> Access {
        Access {
            level: self.level(neoverse),
            tlb_miss: self.tlb_miss(),
            is_store: self.op == Op::Store,
            is_load: self.op == Op::Load,
        }
    }
}

/// Counts of one decoding pass.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DecodeStats {
    pub records: u64,
    /// Bytes that were not a packet header (skipped one at a time; the
    /// record being assembled is dropped).
    pub bad_bytes: u64,
    /// The buffer ended inside a packet or a record.
    pub truncated: bool,
}

/// Iterates over the records of an SPE buffer. Never allocates or panics.
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    pub stats: DecodeStats,
}

impl<'a> Decoder<'a> {
    /// `buf` starts at an aligned position of the AUX area (its start, or a
    /// multiple of 64 bytes).
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder {
            buf,
            pos: 0,
            stats: DecodeStats::default(),
        }
    }
}

impl Iterator for Decoder<'_> {
    type Item = SpeRecord;

    fn next(&mut self) -> Option<SpeRecord> {
        let mut rec = SpeRecord::default();
        let mut packets = 0;
        while self.pos < self.buf.len() {
            match packet(&self.buf[self.pos..], self.pos) {
                Ok((p, len)) => {
                    self.pos += len;
                    match p {
                        Packet::Pad => {}
                        Packet::End | Packet::Timestamp(_) => {
                            rec.apply(p);
                            if packets > 0 {
                                self.stats.records += 1;
                                return Some(rec);
                            }
                            rec = SpeRecord::default();
                        }
                        _ => {
                            rec.apply(p);
                            packets += 1;
                        }
                    }
                }
                Err(SpeError::NeedMore) => {
                    self.stats.truncated = true;
                    self.pos = self.buf.len();
                }
                Err(SpeError::BadHeader(_)) => {
                    self.stats.bad_bytes += 1;
                    self.pos += 1;
                    rec = SpeRecord::default();
                    packets = 0;
                }
            }
        }
        if packets > 0 {
            self.stats.truncated = true;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packet builders (little-endian payloads).
    fn addr(index: u8, v: u64) -> Vec<u8> {
        let mut p = vec![0xb0 | index];
        p.extend_from_slice(&v.to_le_bytes());
        p
    }
    fn count(index: u8, v: u16) -> Vec<u8> {
        let mut p = vec![0x98 | index];
        p.extend_from_slice(&v.to_le_bytes());
        p
    }
    fn ev(bits: u16) -> Vec<u8> {
        let mut p = vec![0x52]; // events, 2 bytes
        p.extend_from_slice(&bits.to_le_bytes());
        p
    }
    fn source(v: u16) -> Vec<u8> {
        let mut p = vec![0x53]; // data source, 2 bytes
        p.extend_from_slice(&v.to_le_bytes());
        p
    }
    fn op_ldst(store: bool) -> Vec<u8> {
        vec![0x49, store as u8]
    }
    fn ts(v: u64) -> Vec<u8> {
        let mut p = vec![0x71];
        p.extend_from_slice(&v.to_le_bytes());
        p
    }
    fn context(v: u32) -> Vec<u8> {
        let mut p = vec![0x65];
        p.extend_from_slice(&v.to_le_bytes());
        p
    }

    /// A user-space load: PC (EL0, NS), data VA and PA, latencies, events,
    /// Neoverse data source, context, timestamp.
    fn load_record(va: u64, total: u16, events: u16, src: u16) -> Vec<u8> {
        [
            addr(address::PC, 0x0000_aaaa_0040_1234 | 1 << 63),
            op_ldst(false),
            ev(events),
            count(counter::ISSUE_LATENCY, 3),
            count(counter::TOTAL_LATENCY, total),
            count(counter::TRANSLATION_LATENCY, 9),
            addr(address::DATA_VIRTUAL, va),
            addr(address::DATA_PHYSICAL, 0x8_8000_1000),
            source(src),
            context(4242),
            ts(1_000_000),
        ]
        .concat()
    }

    #[test]
    fn single_packets() {
        assert_eq!(packet(&[0x00], 0), Ok((Packet::Pad, 1)));
        assert_eq!(packet(&[0x01], 0), Ok((Packet::End, 1)));
        assert_eq!(packet(&ts(7), 0), Ok((Packet::Timestamp(7), 9)));
        assert_eq!(
            packet(&count(counter::TOTAL_LATENCY, 0x1234), 0),
            Ok((
                Packet::Counter {
                    index: 0,
                    value: 0x1234
                },
                3
            ))
        );
        assert_eq!(
            packet(&[0x42, 0x0c], 0),
            Ok((Packet::Events(0x0c), 2)),
            "1-byte events"
        );
        assert_eq!(
            packet(&[0x62, 1, 2, 3, 4], 0),
            Ok((Packet::Events(0x0403_0201), 5)),
            "4-byte events"
        );
        assert_eq!(
            packet(&op_ldst(true), 0),
            Ok((
                Packet::Operation {
                    class: 1,
                    payload: 1
                },
                2
            ))
        );
        assert_eq!(
            packet(&context(5), 0),
            Ok((Packet::Context { index: 1, value: 5 }, 5))
        );
        // Extended header: address index 0b01_010 = 10.
        let mut ext = vec![0x21, 0xb2];
        ext.extend_from_slice(&0x1234u64.to_le_bytes());
        assert_eq!(
            packet(&ext, 0),
            Ok((
                Packet::Address {
                    index: 10,
                    payload: 0x1234
                },
                10
            ))
        );
        // Alignment to 4 bytes (0x21 -> 1 << 2) at offset 1: 3 bytes.
        assert_eq!(packet(&[0x21, 0x00, 0, 0], 1), Ok((Packet::Pad, 3)));
    }

    #[test]
    fn malformed_packets_are_errors() {
        assert_eq!(packet(&[], 0), Err(SpeError::NeedMore));
        assert_eq!(packet(&[0x71, 1, 2], 0), Err(SpeError::NeedMore));
        assert_eq!(packet(&[0xb0, 1], 0), Err(SpeError::NeedMore));
        assert_eq!(packet(&[0x20], 0), Err(SpeError::NeedMore));
        assert_eq!(packet(&[0x02], 0), Err(SpeError::BadHeader(0x02)));
        assert_eq!(packet(&[0xff], 0), Err(SpeError::BadHeader(0xff)));
    }

    #[test]
    fn a_load_record() {
        let buf = load_record(0x0000_ffff_8000_0010, 187, 0x0308, 0xe);
        let mut d = Decoder::new(&buf);
        let r = d.next().unwrap();
        assert_eq!(r.pc, Some(0x0000_aaaa_0040_1234));
        assert_eq!(r.el, 0);
        assert_eq!(r.op, Op::Load);
        assert_eq!(r.data_va, Some(0x0000_ffff_8000_0010));
        assert_eq!(r.data_pa, Some(0x8_8000_1000));
        assert_eq!(
            (r.total_latency, r.issue_latency, r.translation_latency),
            (Some(187), Some(3), Some(9))
        );
        assert_eq!(
            r.events,
            events::L1D_REFILL | events::LLC_ACCESS | events::LLC_MISS
        );
        assert_eq!(r.data_source, Some(0xe));
        assert_eq!(r.context, Some(4242));
        assert_eq!(r.timestamp, Some(1_000_000));
        assert_eq!(
            r.access(true),
            Access {
                level: MemLevel::LocalDram,
                tlb_miss: false,
                is_store: false,
                is_load: true
            }
        );
        assert_eq!(d.next(), None);
        assert_eq!(
            d.stats,
            DecodeStats {
                records: 1,
                bad_bytes: 0,
                truncated: false
            }
        );
    }

    #[test]
    fn neoverse_sources_and_event_fallback() {
        let level = |events: u16, src: u16, neoverse: bool| {
            let buf = load_record(0x1000, 10, events, src);
            Decoder::new(&buf).next().unwrap().level(neoverse)
        };
        let l1_access = events::L1D_ACCESS as u16;
        assert_eq!(level(l1_access, 0x0, true), MemLevel::L1);
        assert_eq!(level(0, 0x8, true), MemLevel::L2);
        assert_eq!(level(0, 0x9, true), MemLevel::L2);
        assert_eq!(level(0, 0xa, true), MemLevel::L3);
        assert_eq!(level(0, 0xb, true), MemLevel::L3);
        assert_eq!(level(0, 0xc, true), MemLevel::L3);
        assert_eq!(level(0, 0xd, true), MemLevel::RemoteCache);
        assert_eq!(level(0, 0xe, true), MemLevel::LocalDram);
        assert_eq!(
            level(events::REMOTE_ACCESS as u16, 0xe, true),
            MemLevel::RemoteDram
        );
        // Unknown source value or not Neoverse: events decide.
        let llc_miss = (events::L1D_REFILL | events::LLC_ACCESS | events::LLC_MISS) as u16;
        assert_eq!(level(llc_miss, 0x5, true), MemLevel::LocalDram);
        assert_eq!(level(llc_miss, 0x0, false), MemLevel::LocalDram);
        let llc_hit = (events::L1D_REFILL | events::LLC_ACCESS) as u16;
        assert_eq!(level(llc_hit, 0x0, false), MemLevel::L3);
        assert_eq!(
            level(events::L1D_REFILL as u16, 0x0, false),
            MemLevel::Other
        );
        assert_eq!(level(l1_access, 0x0, false), MemLevel::L1);
        assert_eq!(level(0, 0x0, false), MemLevel::Unknown);
    }

    #[test]
    fn stores_kernel_addresses_and_tlb_walks() {
        let buf = [
            addr(address::PC, 0x0000_8000_1000_0000 | 1 << 63 | 1 << 61), // EL1, NS
            op_ldst(true),
            ev((events::TLB_ACCESS | events::TLB_WALK) as u16),
            addr(address::DATA_VIRTUAL, 0x00ff_f000_0000_0040 | 0x5a << 56), // tag 0x5a
            vec![0x01],
        ]
        .concat();
        let r = Decoder::new(&buf).next().unwrap();
        assert_eq!(r.pc, Some(0xff00_8000_1000_0000));
        assert_eq!(r.el, 1);
        assert_eq!(r.op, Op::Store);
        assert_eq!(
            r.data_va,
            Some(0xffff_f000_0000_0040),
            "kernel VA: top byte filled"
        );
        assert!(r.tlb_miss());
        assert!(r.access(false).is_store);
        // A user VA with a tag in the top byte loses the tag.
        let buf = [
            addr(address::DATA_VIRTUAL, 0x0000_7fff_0000_0040 | 0x5a << 56),
            vec![0x01],
        ]
        .concat();
        assert_eq!(
            Decoder::new(&buf).next().unwrap().data_va,
            Some(0x0000_7fff_0000_0040)
        );
    }

    #[test]
    fn a_stream_of_records_with_padding_and_garbage() {
        let mut buf = Vec::new();
        buf.extend(load_record(0x1000, 1, 0, 0));
        buf.extend([0x00; 5]);
        buf.extend(load_record(0x2000, 2, 0, 0));
        buf.extend([0x02, 0xff]); // two bad bytes between records
        buf.extend(load_record(0x3000, 3, 0, 0));
        buf.extend(&load_record(0x4000, 4, 0, 0)[..20]); // cut off
        let mut d = Decoder::new(&buf);
        let vas: Vec<_> = d.by_ref().map(|r| r.data_va.unwrap()).collect();
        assert_eq!(vas, [0x1000, 0x2000, 0x3000]);
        assert_eq!(d.stats.records, 3);
        assert_eq!(d.stats.bad_bytes, 2);
        assert!(d.stats.truncated);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut buf = vec![0u8; 512];
        for _ in 0..500 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            for r in Decoder::new(&buf) {
                let _ = r.access(true);
            }
        }
    }
}
