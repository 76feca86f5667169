//! Decoding `union perf_mem_data_src` (the `PERF_SAMPLE_DATA_SRC` word) into
//! one memory-hierarchy category, a TLB-miss flag and the access kind.
//!
//! Bit fields, per linux/perf_event.h (little-endian layout):
//!
//! | bits  | field        | bits  | field       |
//! |-------|--------------|-------|-------------|
//! | 0-4   | mem_op       | 33-36 | mem_lvl_num |
//! | 5-18  | mem_lvl      | 37    | mem_remote  |
//! | 19-23 | mem_snoop    | 38-39 | mem_snoopx  |
//! | 24-25 | mem_lock     | 40-42 | mem_blk     |
//! | 26-32 | mem_dtlb     | 43-45 | mem_hops    |
//!
//! The category follows what `perf mem report` prints: a snoop that hit a
//! modified line in another core's cache (HITM) is its own category whatever
//! the level; otherwise the level number (`mem_lvl_num`, newer kernels,
//! with `mem_remote`) decides, else the older `mem_lvl` bit mask. A level
//! reported only as missed (e.g. Intel stores: "L1 miss") tells where the
//! data was *not*, so it is [`MemLevel::Other`].

use perf_event_open_sys::bindings as pe;

use super::record::Sample;

/// Where a sampled access was served from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemLevel {
    /// The L1 data cache (or an L0).
    L1,
    /// A line fill buffer / miss address buffer: the line was already on
    /// its way after an earlier miss.
    FillBuffer,
    L2,
    /// The last-level cache of this socket (L3, L4, a memory-side cache, or
    /// another core's cache on the same die without a modified line).
    L3,
    LocalDram,
    RemoteDram,
    /// A cache of another socket or die (without HITM).
    RemoteCache,
    /// A snoop found the line modified in another core's cache.
    Hitm,
    Io,
    Uncached,
    /// Known but none of the above: persistent memory, CXL, or a level
    /// reported only as missed.
    Other,
    /// The PMU did not say (`PERF_MEM_*_NA`).
    Unknown,
}

impl MemLevel {
    pub const ALL: [MemLevel; 12] = [
        MemLevel::L1,
        MemLevel::FillBuffer,
        MemLevel::L2,
        MemLevel::L3,
        MemLevel::LocalDram,
        MemLevel::RemoteDram,
        MemLevel::RemoteCache,
        MemLevel::Hitm,
        MemLevel::Io,
        MemLevel::Uncached,
        MemLevel::Other,
        MemLevel::Unknown,
    ];

    /// Short name for reports and metric columns.
    pub fn name(self) -> &'static str {
        match self {
            MemLevel::L1 => "L1",
            MemLevel::FillBuffer => "LFB",
            MemLevel::L2 => "L2",
            MemLevel::L3 => "L3",
            MemLevel::LocalDram => "local DRAM",
            MemLevel::RemoteDram => "remote DRAM",
            MemLevel::RemoteCache => "remote cache",
            MemLevel::Hitm => "HITM",
            MemLevel::Io => "I/O",
            MemLevel::Uncached => "uncached",
            MemLevel::Other => "other",
            MemLevel::Unknown => "unknown",
        }
    }
}

/// A decoded sample's memory access, common to PEBS, IBS and SPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub level: MemLevel,
    /// The address translation missed the (last-level) data TLB.
    pub tlb_miss: bool,
    pub is_store: bool,
    pub is_load: bool,
}

/// The fields of `union perf_mem_data_src`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DataSrc {
    pub op: u8,
    pub lvl: u16,
    pub snoop: u8,
    pub lock: u8,
    pub dtlb: u8,
    pub lvl_num: u8,
    pub remote: bool,
    pub snoopx: u8,
    pub blk: u8,
    pub hops: u8,
}

fn field(v: u64, shift: u32, bits: u32) -> u64 {
    (v >> shift) & ((1u64 << bits) - 1)
}

impl DataSrc {
    pub fn from_bits(v: u64) -> DataSrc {
        DataSrc {
            op: field(v, pe::PERF_MEM_OP_SHIFT, 5) as u8,
            lvl: field(v, pe::PERF_MEM_LVL_SHIFT, 14) as u16,
            snoop: field(v, pe::PERF_MEM_SNOOP_SHIFT, 5) as u8,
            lock: field(v, pe::PERF_MEM_LOCK_SHIFT, 2) as u8,
            dtlb: field(v, pe::PERF_MEM_TLB_SHIFT, 7) as u8,
            lvl_num: field(v, pe::PERF_MEM_LVLNUM_SHIFT, 4) as u8,
            remote: field(v, pe::PERF_MEM_REMOTE_SHIFT, 1) != 0,
            snoopx: field(v, pe::PERF_MEM_SNOOPX_SHIFT, 2) as u8,
            blk: field(v, pe::PERF_MEM_BLK_SHIFT, 3) as u8,
            hops: field(v, pe::PERF_MEM_HOPS_SHIFT, 3) as u8,
        }
    }

    /// The inverse of [`DataSrc::from_bits`] (fields are truncated to their
    /// widths).
    pub fn to_bits(&self) -> u64 {
        let put = |v: u64, shift: u32, bits: u32| (v & ((1u64 << bits) - 1)) << shift;
        put(self.op as u64, pe::PERF_MEM_OP_SHIFT, 5)
            | put(self.lvl as u64, pe::PERF_MEM_LVL_SHIFT, 14)
            | put(self.snoop as u64, pe::PERF_MEM_SNOOP_SHIFT, 5)
            | put(self.lock as u64, pe::PERF_MEM_LOCK_SHIFT, 2)
            | put(self.dtlb as u64, pe::PERF_MEM_TLB_SHIFT, 7)
            | put(self.lvl_num as u64, pe::PERF_MEM_LVLNUM_SHIFT, 4)
            | put(self.remote as u64, pe::PERF_MEM_REMOTE_SHIFT, 1)
            | put(self.snoopx as u64, pe::PERF_MEM_SNOOPX_SHIFT, 2)
            | put(self.blk as u64, pe::PERF_MEM_BLK_SHIFT, 3)
            | put(self.hops as u64, pe::PERF_MEM_HOPS_SHIFT, 3)
    }

    pub fn is_load(&self) -> bool {
        self.op as u32 & pe::PERF_MEM_OP_LOAD != 0
    }

    pub fn is_store(&self) -> bool {
        self.op as u32 & pe::PERF_MEM_OP_STORE != 0
    }

    /// The access missed the data TLB (`PERF_MEM_TLB_MISS`).
    pub fn tlb_miss(&self) -> bool {
        self.dtlb as u32 & pe::PERF_MEM_TLB_MISS != 0
    }

    pub fn level(&self) -> MemLevel {
        if self.snoop as u32 & pe::PERF_MEM_SNOOP_HITM != 0 {
            return MemLevel::Hitm;
        }
        if self.lvl_num != 0 && self.lvl_num as u32 != pe::PERF_MEM_LVLNUM_NA {
            if let Some(level) = self.level_from_number() {
                return level;
            }
        }
        self.level_from_mask()
    }

    fn level_from_number(&self) -> Option<MemLevel> {
        let cache = |local| {
            if self.remote {
                MemLevel::RemoteCache
            } else {
                local
            }
        };
        Some(match self.lvl_num as u32 {
            pe::PERF_MEM_LVLNUM_L0 | pe::PERF_MEM_LVLNUM_L1 => MemLevel::L1,
            pe::PERF_MEM_LVLNUM_LFB | pe::PERF_MEM_LVLNUM_L2_MHB => MemLevel::FillBuffer,
            pe::PERF_MEM_LVLNUM_L2 => cache(MemLevel::L2),
            pe::PERF_MEM_LVLNUM_L3
            | pe::PERF_MEM_LVLNUM_L4
            | pe::PERF_MEM_LVLNUM_MSC
            | pe::PERF_MEM_LVLNUM_ANY_CACHE => cache(MemLevel::L3),
            pe::PERF_MEM_LVLNUM_RAM => {
                if self.remote {
                    MemLevel::RemoteDram
                } else {
                    MemLevel::LocalDram
                }
            }
            pe::PERF_MEM_LVLNUM_PMEM | pe::PERF_MEM_LVLNUM_CXL => MemLevel::Other,
            pe::PERF_MEM_LVLNUM_IO => MemLevel::Io,
            pe::PERF_MEM_LVLNUM_UNC => MemLevel::Uncached,
            _ => return None,
        })
    }

    fn level_from_mask(&self) -> MemLevel {
        let lvl = self.lvl as u32;
        let has = |bits: u32| lvl & bits != 0;
        if lvl == 0 || lvl == pe::PERF_MEM_LVL_NA {
            return MemLevel::Unknown;
        }
        if has(pe::PERF_MEM_LVL_MISS) && !has(pe::PERF_MEM_LVL_HIT) {
            return MemLevel::Other;
        }
        if has(pe::PERF_MEM_LVL_UNC) {
            MemLevel::Uncached
        } else if has(pe::PERF_MEM_LVL_IO) {
            MemLevel::Io
        } else if has(pe::PERF_MEM_LVL_REM_RAM1 | pe::PERF_MEM_LVL_REM_RAM2) {
            MemLevel::RemoteDram
        } else if has(pe::PERF_MEM_LVL_REM_CCE1 | pe::PERF_MEM_LVL_REM_CCE2) {
            MemLevel::RemoteCache
        } else if has(pe::PERF_MEM_LVL_LOC_RAM) {
            MemLevel::LocalDram
        } else if has(pe::PERF_MEM_LVL_L3) {
            MemLevel::L3
        } else if has(pe::PERF_MEM_LVL_L2) {
            MemLevel::L2
        } else if has(pe::PERF_MEM_LVL_LFB) {
            MemLevel::FillBuffer
        } else if has(pe::PERF_MEM_LVL_L1) {
            MemLevel::L1
        } else {
            MemLevel::Unknown
        }
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

/// Decodes a `PERF_SAMPLE_DATA_SRC` word.
pub fn decode(data_src: u64) -> Access {
    DataSrc::from_bits(data_src).access()
}

/// The access of a generic (PEBS-style) sample.
pub fn sample_access(sample: &Sample) -> Access {
    decode(sample.data_src)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOAD: u8 = pe::PERF_MEM_OP_LOAD as u8;
    const STORE: u8 = pe::PERF_MEM_OP_STORE as u8;
    const HIT: u16 = pe::PERF_MEM_LVL_HIT as u16;
    const MISS: u16 = pe::PERF_MEM_LVL_MISS as u16;

    fn lvl(bits: u32) -> u16 {
        bits as u16
    }

    #[test]
    fn field_layout_round_trips() {
        let d = DataSrc {
            op: 0x1f,
            lvl: 0x3fff,
            snoop: 0x1f,
            lock: 3,
            dtlb: 0x7f,
            lvl_num: 0xf,
            remote: true,
            snoopx: 3,
            blk: 7,
            hops: 7,
        };
        assert_eq!(d.to_bits(), (1u64 << 46) - 1);
        assert_eq!(DataSrc::from_bits(d.to_bits()), d);
        // Each field at its documented position.
        assert_eq!(DataSrc::from_bits(1 << 5).lvl, 1);
        assert_eq!(DataSrc::from_bits(1 << 19).snoop, 1);
        assert_eq!(DataSrc::from_bits(1 << 24).lock, 1);
        assert_eq!(DataSrc::from_bits(1 << 26).dtlb, 1);
        assert_eq!(DataSrc::from_bits(1 << 33).lvl_num, 1);
        assert!(DataSrc::from_bits(1 << 37).remote);
        assert_eq!(DataSrc::from_bits(1 << 38).snoopx, 1);
        assert_eq!(DataSrc::from_bits(1 << 40).blk, 1);
        assert_eq!(DataSrc::from_bits(1 << 43).hops, 1);
    }

    #[test]
    fn perf_script_value_l1_hit() {
        // 0x68100142, which `perf script -F data_src` prints as
        // "L1 hit|SNP None|TLB L1 or L2 hit|LCK No" for Intel PEBS loads.
        let d = DataSrc::from_bits(0x6810_0142);
        assert_eq!(d.op, LOAD);
        assert_eq!(d.lvl, lvl(pe::PERF_MEM_LVL_L1) | HIT);
        assert_eq!(d.snoop as u32, pe::PERF_MEM_SNOOP_NONE);
        assert_eq!(
            d.dtlb as u32,
            pe::PERF_MEM_TLB_L1 | pe::PERF_MEM_TLB_L2 | pe::PERF_MEM_TLB_HIT
        );
        assert_eq!(
            decode(0x6810_0142),
            Access {
                level: MemLevel::L1,
                tlb_miss: false,
                is_store: false,
                is_load: true
            }
        );
    }

    fn load(lvl: u16, lvl_num: u32, snoop: u32, remote: bool) -> u64 {
        DataSrc {
            op: LOAD,
            lvl,
            snoop: snoop as u8,
            lvl_num: lvl_num as u8,
            remote,
            dtlb: (pe::PERF_MEM_TLB_L1 | pe::PERF_MEM_TLB_HIT) as u8,
            ..Default::default()
        }
        .to_bits()
    }

    #[test]
    fn intel_pebs_load_sources() {
        // The encodings the kernel's Intel PEBS data-source tables produce
        // (level bit | HIT, level number, snoop).
        let none = pe::PERF_MEM_SNOOP_NONE;
        let cases = [
            (
                lvl(pe::PERF_MEM_LVL_L1) | HIT,
                pe::PERF_MEM_LVLNUM_L1,
                none,
                false,
                MemLevel::L1,
            ),
            (
                lvl(pe::PERF_MEM_LVL_LFB) | HIT,
                pe::PERF_MEM_LVLNUM_LFB,
                none,
                false,
                MemLevel::FillBuffer,
            ),
            (
                lvl(pe::PERF_MEM_LVL_L2) | HIT,
                pe::PERF_MEM_LVLNUM_L2,
                none,
                false,
                MemLevel::L2,
            ),
            (
                lvl(pe::PERF_MEM_LVL_L3) | HIT,
                pe::PERF_MEM_LVLNUM_L3,
                none,
                false,
                MemLevel::L3,
            ),
            (
                lvl(pe::PERF_MEM_LVL_L3) | HIT,
                pe::PERF_MEM_LVLNUM_L3,
                pe::PERF_MEM_SNOOP_HIT,
                false,
                MemLevel::L3,
            ),
            (
                lvl(pe::PERF_MEM_LVL_L3) | HIT,
                pe::PERF_MEM_LVLNUM_L3,
                pe::PERF_MEM_SNOOP_HITM,
                false,
                MemLevel::Hitm,
            ),
            (
                lvl(pe::PERF_MEM_LVL_LOC_RAM) | HIT,
                pe::PERF_MEM_LVLNUM_RAM,
                pe::PERF_MEM_SNOOP_MISS,
                false,
                MemLevel::LocalDram,
            ),
            (
                lvl(pe::PERF_MEM_LVL_REM_RAM1) | HIT,
                pe::PERF_MEM_LVLNUM_RAM,
                none,
                true,
                MemLevel::RemoteDram,
            ),
            (
                lvl(pe::PERF_MEM_LVL_REM_CCE1) | HIT,
                pe::PERF_MEM_LVLNUM_ANY_CACHE,
                pe::PERF_MEM_SNOOP_HIT,
                true,
                MemLevel::RemoteCache,
            ),
            (
                lvl(pe::PERF_MEM_LVL_REM_CCE1) | HIT,
                pe::PERF_MEM_LVLNUM_ANY_CACHE,
                pe::PERF_MEM_SNOOP_HITM,
                true,
                MemLevel::Hitm,
            ),
            (
                lvl(pe::PERF_MEM_LVL_IO) | HIT,
                pe::PERF_MEM_LVLNUM_IO,
                none,
                false,
                MemLevel::Io,
            ),
            (
                lvl(pe::PERF_MEM_LVL_UNC) | HIT,
                pe::PERF_MEM_LVLNUM_UNC,
                none,
                false,
                MemLevel::Uncached,
            ),
        ];
        for (l, n, snoop, remote, want) in cases {
            let v = load(l, n, snoop, remote);
            assert_eq!(decode(v).level, want, "{v:#x}");
            // Older kernels fill only mem_lvl: same answer from the mask.
            let old = load(l, 0, snoop, false);
            assert_eq!(decode(old).level, want, "mask only {old:#x}");
        }
    }

    #[test]
    fn intel_stores_hit_or_miss_l1() {
        // The kernel's precise_store_data: OP STORE, LVL L1 with HIT or
        // MISS, TLB L2 with HIT or MISS.
        let st = |l1_hit: bool, stlb_miss: bool| {
            DataSrc {
                op: STORE,
                lvl: lvl(pe::PERF_MEM_LVL_L1) | if l1_hit { HIT } else { MISS },
                snoop: pe::PERF_MEM_SNOOP_NA as u8,
                dtlb: (pe::PERF_MEM_TLB_L2
                    | if stlb_miss {
                        pe::PERF_MEM_TLB_MISS
                    } else {
                        pe::PERF_MEM_TLB_HIT
                    }) as u8,
                ..Default::default()
            }
            .to_bits()
        };
        let a = decode(st(true, false));
        assert_eq!(
            (a.level, a.is_store, a.is_load, a.tlb_miss),
            (MemLevel::L1, true, false, false)
        );
        let a = decode(st(false, true));
        assert_eq!(
            (a.level, a.is_store, a.tlb_miss),
            (MemLevel::Other, true, true)
        );
    }

    #[test]
    fn amd_ibs_sources_as_the_kernel_encodes_them() {
        // arch/x86/events/amd/ibs.c: L(x) = LVL x | HIT, LN(x) = LVLNUM x.
        let hops = |h: u32| h as u8;
        let zen2_local_cache = DataSrc {
            op: LOAD,
            lvl: lvl(pe::PERF_MEM_LVL_L3 | pe::PERF_MEM_LVL_REM_CCE1) | HIT,
            lvl_num: pe::PERF_MEM_LVLNUM_ANY_CACHE as u8,
            hops: hops(pe::PERF_MEM_HOPS_0),
            ..Default::default()
        };
        assert_eq!(zen2_local_cache.level(), MemLevel::L3);
        let zen4_near_ccx = DataSrc {
            op: LOAD,
            lvl: lvl(pe::PERF_MEM_LVL_REM_CCE1) | HIT,
            lvl_num: pe::PERF_MEM_LVLNUM_ANY_CACHE as u8,
            remote: true,
            hops: hops(pe::PERF_MEM_HOPS_0),
            ..Default::default()
        };
        assert_eq!(zen4_near_ccx.level(), MemLevel::RemoteCache);
        let remote_dram = DataSrc {
            op: LOAD,
            lvl: lvl(pe::PERF_MEM_LVL_REM_RAM1) | HIT,
            lvl_num: pe::PERF_MEM_LVLNUM_RAM as u8,
            remote: true,
            hops: hops(pe::PERF_MEM_HOPS_1),
            ..Default::default()
        };
        assert_eq!(remote_dram.level(), MemLevel::RemoteDram);
        let cxl = DataSrc {
            op: LOAD,
            lvl_num: pe::PERF_MEM_LVLNUM_CXL as u8,
            ..Default::default()
        };
        assert_eq!(cxl.level(), MemLevel::Other);
        // "Don't set HIT with NA": LVL NA, LVLNUM NA.
        let na = DataSrc {
            op: LOAD,
            lvl: lvl(pe::PERF_MEM_LVL_NA),
            lvl_num: pe::PERF_MEM_LVLNUM_NA as u8,
            ..Default::default()
        };
        assert_eq!(na.level(), MemLevel::Unknown);
        let tlb_miss = DataSrc {
            op: LOAD,
            dtlb: (pe::PERF_MEM_TLB_L2 | pe::PERF_MEM_TLB_MISS) as u8,
            ..Default::default()
        };
        assert!(tlb_miss.tlb_miss());
    }

    #[test]
    fn zero_and_garbage_do_not_panic() {
        assert_eq!(decode(0).level, MemLevel::Unknown);
        for v in [u64::MAX, 0x5555_5555_5555_5555, 0xaaaa_aaaa_aaaa_aaaa] {
            let _ = decode(v);
        }
    }
}
