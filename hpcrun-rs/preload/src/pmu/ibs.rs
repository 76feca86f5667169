//! AMD IBS op samples: decoding the `PERF_SAMPLE_RAW` block the kernel's
//! `ibs_op` PMU writes.
//!
//! Layout (arch/x86/events/amd/ibs.c, `struct perf_ibs_data` from `caps`
//! on): a u32 with the IBS capabilities (CPUID Fn8000_001B EAX), then the
//! MSR values as u64, in this order: IbsOpCtl, IbsOpRip, IbsOpData,
//! IbsOpData2, IbsOpData3, IbsDcLinAd, IbsDcPhysAd; then IbsBrTarget if the
//! `BRNTRGT` capability is set and IbsOpData4 if `OPDATA4` is set.
//!
//! Register fields used (tools/arch/x86/include/asm/amd-ibs.h):
//!
//! * IbsOpCtl: bit 18 `op_val` (the sample is valid);
//! * IbsOpData: bits 16-31 tag-to-retire cycles, bit 38 `op_rip_invalid`;
//! * IbsOpData2: bits 0-2 data source (low), bit 4 `rmt_node`, bits 6-7
//!   data source (high, with the `ZEN4` capability);
//! * IbsOpData3: bit 0 load, bit 1 store, bit 2 L1 DTLB miss, bit 3 L2 DTLB
//!   miss, bit 7 DC miss, bit 14 uncacheable, bit 15 locked, bit 16 DC miss
//!   without a MAB allocation (a fill already in flight), bit 17 linear
//!   address valid, bit 18 physical address valid, bit 20 L2 miss, bits
//!   32-47 DC miss latency (cycles).
//!
//! The memory level follows the kernel's `perf_ibs_get_mem_lvl`: uncached,
//! then L1 (no DC miss), L2 (no L2 miss), then IbsOpData2's data source
//! (loads only), then a MAB hit as the fill buffer. Two details of the
//! kernel that need the CPU family are left out: erratum #1293 (Zen3
//! models 0-0xF report an L2 hit wrongly for software prefetches) and the
//! HITM snoop state (valid only on some families).

use super::datasrc::{Access, MemLevel};

/// IBS capability bits (the u32 before the registers).
pub mod caps {
    pub const AVAIL: u32 = 1 << 0;
    pub const OPSAM: u32 = 1 << 2;
    pub const RDWROPCNT: u32 = 1 << 3;
    pub const OPCNT: u32 = 1 << 4;
    pub const BRNTRGT: u32 = 1 << 5;
    pub const OPCNTEXT: u32 = 1 << 6;
    pub const RIPINVALIDCHK: u32 = 1 << 7;
    pub const OPBRNFUSE: u32 = 1 << 8;
    pub const FETCHCTLEXTD: u32 = 1 << 9;
    pub const OPDATA4: u32 = 1 << 10;
    pub const ZEN4: u32 = 1 << 11;
}

/// One IBS op sample's registers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IbsOp {
    pub caps: u32,
    pub op_ctl: u64,
    pub op_rip: u64,
    pub op_data: u64,
    pub op_data2: u64,
    pub op_data3: u64,
    pub dc_lin_ad: u64,
    pub dc_phys_ad: u64,
    pub br_target: Option<u64>,
    pub op_data4: Option<u64>,
}

/// Why a raw block is not an IBS op sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IbsError {
    /// Fewer bytes than the caps word and the seven op registers (or the
    /// optional registers its caps announce).
    TooShort { len: usize, need: usize },
}

impl std::fmt::Display for IbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IbsError::TooShort { len, need } => {
                write!(f, "IBS raw block of {len} bytes, need {need}")
            }
        }
    }
}

impl std::error::Error for IbsError {}

/// Data sources of IbsOpData2 (amd-ibs.h `IBS_DATA_SRC_*`).
mod src {
    pub const LOC_CACHE: u8 = 2;
    pub const DRAM: u8 = 3;
    pub const REM_CACHE: u8 = 4;
    pub const IO: u8 = 7;
    // With the ZEN4 capability (`IBS_DATA_SRC_EXT_*`).
    pub const EXT_LOC_CACHE: u8 = 1;
    pub const EXT_NEAR_CCX_CACHE: u8 = 2;
    pub const EXT_DRAM: u8 = 3;
    pub const EXT_FAR_CCX_CACHE: u8 = 5;
    pub const EXT_PMEM: u8 = 6;
    pub const EXT_IO: u8 = 7;
    pub const EXT_EXT_MEM: u8 = 8;
    pub const EXT_PEER_AGENT_MEM: u8 = 12;
}

fn bit(v: u64, n: u32) -> bool {
    v >> n & 1 != 0
}

impl IbsOp {
    /// Decodes a `PERF_SAMPLE_RAW` block of the `ibs_op` PMU.
    pub fn parse(raw: &[u8]) -> Result<IbsOp, IbsError> {
        let word = |i: usize| -> Option<u64> {
            let start = 4 + 8 * i;
            let b = raw.get(start..start + 8)?;
            Some(u64::from_ne_bytes([
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
            ]))
        };
        let too_short = |regs: usize| IbsError::TooShort {
            len: raw.len(),
            need: 4 + 8 * regs,
        };
        let caps = raw
            .get(..4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or(too_short(7))?;
        let mut regs = [0u64; 7];
        for (i, r) in regs.iter_mut().enumerate() {
            *r = word(i).ok_or(too_short(7))?;
        }
        let mut next = 7;
        let mut optional = |present: bool| -> Result<Option<u64>, IbsError> {
            if !present {
                return Ok(None);
            }
            let v = word(next).ok_or(too_short(next + 1))?;
            next += 1;
            Ok(Some(v))
        };
        let br_target = optional(caps & caps::BRNTRGT != 0)?;
        let op_data4 = optional(caps & caps::OPDATA4 != 0)?;
        Ok(IbsOp {
            caps,
            op_ctl: regs[0],
            op_rip: regs[1],
            op_data: regs[2],
            op_data2: regs[3],
            op_data3: regs[4],
            dc_lin_ad: regs[5],
            dc_phys_ad: regs[6],
            br_target,
            op_data4,
        })
    }

    /// IbsOpCtl `op_val`: the hardware marked the sample valid.
    pub fn valid(&self) -> bool {
        bit(self.op_ctl, 18)
    }

    /// The sampled instruction's address, unless the hardware flagged it
    /// invalid (only reported with the `RIPINVALIDCHK` capability).
    pub fn ip(&self) -> Option<u64> {
        let invalid = self.caps & caps::RIPINVALIDCHK != 0 && bit(self.op_data, 38);
        (!invalid).then_some(self.op_rip)
    }

    pub fn is_load(&self) -> bool {
        bit(self.op_data3, 0)
    }

    pub fn is_store(&self) -> bool {
        bit(self.op_data3, 1)
    }

    /// The data (linear) address, when IbsOpData3 says it is valid.
    pub fn data_addr(&self) -> Option<u64> {
        bit(self.op_data3, 17).then_some(self.dc_lin_ad)
    }

    pub fn phys_addr(&self) -> Option<u64> {
        bit(self.op_data3, 18).then_some(self.dc_phys_ad)
    }

    pub fn dc_miss(&self) -> bool {
        bit(self.op_data3, 7)
    }

    pub fn l2_miss(&self) -> bool {
        bit(self.op_data3, 20)
    }

    /// Missed both the L1 and the L2 data TLB (with a valid linear address).
    pub fn tlb_miss(&self) -> bool {
        bit(self.op_data3, 17) && bit(self.op_data3, 2) && bit(self.op_data3, 3)
    }

    pub fn uncached(&self) -> bool {
        bit(self.op_data3, 14)
    }

    pub fn locked(&self) -> bool {
        bit(self.op_data3, 15)
    }

    /// DC miss without a MAB allocation: the line was already being fetched.
    pub fn mab_hit(&self) -> bool {
        bit(self.op_data3, 16)
    }

    /// Cycles from the DC miss to the data's arrival (IbsDcMissLat); the
    /// kernel reports it as the sample weight for load misses. 0 for hits.
    pub fn miss_latency(&self) -> u16 {
        if self.is_load() && self.dc_miss() {
            (self.op_data3 >> 32) as u16
        } else {
            0
        }
    }

    /// Cycles from the op's tag to its retirement (IbsOpData bits 16-31).
    pub fn tag_to_retire(&self) -> u16 {
        (self.op_data >> 16) as u16
    }

    /// IbsOpData2's data source (5 bits with the `ZEN4` capability, else 3).
    pub fn data_source(&self) -> u8 {
        let lo = (self.op_data2 & 7) as u8;
        if self.caps & caps::ZEN4 != 0 {
            ((self.op_data2 >> 6 & 3) as u8) << 3 | lo
        } else {
            lo
        }
    }

    /// IbsOpData2 `rmt_node`: the data came from another node.
    pub fn remote_node(&self) -> bool {
        bit(self.op_data2, 4)
    }

    pub fn level(&self) -> MemLevel {
        let source = self.data_source();
        let zen4 = self.caps & caps::ZEN4 != 0;
        if self.uncached() && !(zen4 && source == src::EXT_IO) {
            return MemLevel::Uncached;
        }
        if !self.dc_miss() {
            return MemLevel::L1;
        }
        if !self.l2_miss() {
            return MemLevel::L2;
        }
        // IbsOpData2 is valid for loads only.
        if self.is_load() {
            let remote = self.remote_node();
            let level = if zen4 {
                match source {
                    src::EXT_LOC_CACHE => Some(MemLevel::L3),
                    src::EXT_NEAR_CCX_CACHE | src::EXT_FAR_CCX_CACHE => Some(MemLevel::RemoteCache),
                    src::EXT_DRAM if remote => Some(MemLevel::RemoteDram),
                    src::EXT_DRAM => Some(MemLevel::LocalDram),
                    src::EXT_PMEM | src::EXT_EXT_MEM | src::EXT_PEER_AGENT_MEM => {
                        Some(MemLevel::Other)
                    }
                    src::EXT_IO => Some(MemLevel::Io),
                    _ => None,
                }
            } else {
                match source {
                    src::LOC_CACHE => Some(MemLevel::L3),
                    src::DRAM if remote => Some(MemLevel::RemoteDram),
                    src::DRAM => Some(MemLevel::LocalDram),
                    src::REM_CACHE => Some(MemLevel::RemoteCache),
                    src::IO => Some(MemLevel::Io),
                    _ => None,
                }
            };
            if let Some(level) = level {
                return level;
            }
        }
        if self.mab_hit() {
            return MemLevel::FillBuffer;
        }
        MemLevel::Unknown
    }

    pub fn access(&self) -> Access {
        Access {
            level: self.level(),
            tlb_miss: self.tlb_miss(),
            is_store: self.is_store(),
            is_load: self.is_load(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw block: caps, then the registers.
    fn raw(caps: u32, regs: &[u64]) -> Vec<u8> {
        let mut v = caps.to_ne_bytes().to_vec();
        for r in regs {
            v.extend_from_slice(&r.to_ne_bytes());
        }
        v
    }

    const VAL: u64 = 1 << 18;
    const LD: u64 = 1 << 0;
    const ST: u64 = 1 << 1;
    const DC_MISS: u64 = 1 << 7;
    const LIN_VALID: u64 = 1 << 17;
    const L2_MISS: u64 = 1 << 20;

    /// Zen 3 style caps (no ZEN4 extensions): AVAIL|OPSAM|RDWROPCNT|OPCNT|
    /// BRNTRGT|OPCNTEXT|RIPINVALIDCHK.
    const ZEN3: u32 = caps::AVAIL
        | caps::OPSAM
        | caps::RDWROPCNT
        | caps::OPCNT
        | caps::BRNTRGT
        | caps::OPCNTEXT
        | caps::RIPINVALIDCHK;

    fn op(caps: u32, data: u64, data2: u64, data3: u64) -> IbsOp {
        let mut regs = vec![
            VAL,
            0x40_1000,
            data,
            data2,
            data3,
            0x7f00_1234,
            0x1_2345_6000,
        ];
        if caps & caps::BRNTRGT != 0 {
            regs.push(0);
        }
        if caps & caps::OPDATA4 != 0 {
            regs.push(0);
        }
        IbsOp::parse(&raw(caps, &regs)).unwrap()
    }

    #[test]
    fn register_order_and_optional_registers() {
        let regs = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        let o = IbsOp::parse(&raw(caps::BRNTRGT | caps::OPDATA4, &regs)).unwrap();
        assert_eq!(
            (o.op_ctl, o.op_rip, o.op_data, o.op_data2, o.op_data3),
            (1, 2, 3, 4, 5)
        );
        assert_eq!((o.dc_lin_ad, o.dc_phys_ad), (6, 7));
        assert_eq!((o.br_target, o.op_data4), (Some(8), Some(9)));
        let o = IbsOp::parse(&raw(caps::OPDATA4, &regs[..8])).unwrap();
        assert_eq!((o.br_target, o.op_data4), (None, Some(8)));
        let o = IbsOp::parse(&raw(0, &regs[..7])).unwrap();
        assert_eq!((o.br_target, o.op_data4), (None, None));
    }

    #[test]
    fn short_blocks_are_errors() {
        for n in 0..7 {
            let r = raw(0, &vec![0; n]);
            assert!(IbsOp::parse(&r).is_err(), "{n} registers");
        }
        assert_eq!(
            IbsOp::parse(&raw(caps::BRNTRGT, &[0; 7])),
            Err(IbsError::TooShort { len: 60, need: 68 })
        );
        assert!(IbsOp::parse(&[]).is_err());
        assert!(IbsOp::parse(&[1, 2, 3]).is_err());
    }

    #[test]
    fn load_that_missed_to_local_dram() {
        // Zen 3: DC miss, L2 miss, DataSrc 3 (DRAM), latency 312 cycles.
        let data3 = LD | DC_MISS | L2_MISS | LIN_VALID | 312 << 32;
        let o = op(ZEN3, 45 << 16, 3, data3);
        assert!(o.valid());
        assert_eq!(o.ip(), Some(0x40_1000));
        assert_eq!(o.data_addr(), Some(0x7f00_1234));
        assert_eq!(o.phys_addr(), None);
        assert!(o.is_load() && !o.is_store());
        assert_eq!(o.miss_latency(), 312);
        assert_eq!(o.tag_to_retire(), 45);
        assert_eq!(
            o.access(),
            Access {
                level: MemLevel::LocalDram,
                tlb_miss: false,
                is_store: false,
                is_load: true
            }
        );
        // rmt_node turns it into remote DRAM.
        assert_eq!(op(ZEN3, 0, 3 | 1 << 4, data3).level(), MemLevel::RemoteDram);
    }

    #[test]
    fn zen3_sources() {
        let miss = LD | DC_MISS | L2_MISS;
        assert_eq!(op(ZEN3, 0, 2, miss).level(), MemLevel::L3);
        assert_eq!(op(ZEN3, 0, 4, miss).level(), MemLevel::RemoteCache);
        assert_eq!(op(ZEN3, 0, 7, miss).level(), MemLevel::Io);
        // No data source: a MAB hit is the fill buffer, else unknown.
        assert_eq!(op(ZEN3, 0, 0, miss | 1 << 16).level(), MemLevel::FillBuffer);
        assert_eq!(op(ZEN3, 0, 0, miss).level(), MemLevel::Unknown);
        // Hits.
        assert_eq!(op(ZEN3, 0, 3, LD).level(), MemLevel::L1);
        assert_eq!(op(ZEN3, 0, 3, LD | DC_MISS).level(), MemLevel::L2);
        // Uncached wins.
        assert_eq!(
            op(ZEN3, 0, 3, LD | DC_MISS | 1 << 14).level(),
            MemLevel::Uncached
        );
    }

    #[test]
    fn zen4_extended_sources() {
        let z4 = ZEN3 | caps::ZEN4 | caps::OPDATA4;
        let miss = LD | DC_MISS | L2_MISS;
        // Extended source = hi (bits 6-7) << 3 | lo (bits 0-2).
        let ds = |v: u64| (v & 7) | (v >> 3) << 6;
        assert_eq!(op(z4, 0, ds(1), miss).level(), MemLevel::L3);
        assert_eq!(op(z4, 0, ds(2), miss).level(), MemLevel::RemoteCache);
        assert_eq!(op(z4, 0, ds(3), miss).level(), MemLevel::LocalDram);
        assert_eq!(
            op(z4, 0, ds(3) | 1 << 4, miss).level(),
            MemLevel::RemoteDram
        );
        assert_eq!(op(z4, 0, ds(5), miss).level(), MemLevel::RemoteCache);
        assert_eq!(op(z4, 0, ds(6), miss).level(), MemLevel::Other);
        assert_eq!(op(z4, 0, ds(8), miss).level(), MemLevel::Other);
        assert_eq!(op(z4, 0, ds(12), miss).level(), MemLevel::Other);
        assert_eq!(op(z4, 0, ds(8), miss).data_source(), 8);
        // Uncached I/O stays I/O on Zen 4.
        assert_eq!(op(z4, 0, ds(7), miss | 1 << 14).level(), MemLevel::Io);
        // Without the ZEN4 capability the high bits are ignored: 8 -> 0.
        assert_eq!(op(ZEN3, 0, ds(8), miss).data_source(), 0);
    }

    #[test]
    fn stores_tlb_misses_and_invalid_rip() {
        // A store that missed L1 and L2: IbsOpData2 is not valid for stores.
        let o = op(ZEN3, 0, 3, ST | DC_MISS | L2_MISS | LIN_VALID | 0b1100);
        assert!(o.is_store() && !o.is_load());
        assert_eq!(o.level(), MemLevel::Unknown);
        assert!(o.tlb_miss());
        assert_eq!(o.miss_latency(), 0, "no latency for stores");
        // L1 DTLB miss but L2 DTLB hit.
        assert!(!op(ZEN3, 0, 0, LD | LIN_VALID | 0b0100).tlb_miss());
        // RIP flagged invalid.
        let o = op(ZEN3, 1 << 38, 0, LD);
        assert_eq!(o.ip(), None);
        // Without RIPINVALIDCHK the bit means nothing.
        let o = op(caps::AVAIL | caps::OPSAM, 1 << 38, 0, LD);
        assert_eq!(o.ip(), Some(0x40_1000));
        // No valid linear address.
        assert_eq!(op(ZEN3, 0, 0, LD).data_addr(), None);
    }
}
