//! The `perf_event_attr` of a hardware memory event, from its [`HwAttr`].
//!
//! What each vendor's samples carry (`sample_type`):
//!
//! * Intel PEBS: IP, TID, TIME, ADDR, CPU, WEIGHT (load latency), DATA_SRC;
//! * AMD IBS: the same plus RAW (the IBS registers: data source, DC miss
//!   latency, L2 miss, also on kernels that do not fill ADDR/DATA_SRC);
//! * Arm SPE: TID, TIME, CPU only (the records are in the AUX area).
//!
//! Every sample wakes the reader (`wakeup_events = 1`), so the overflow
//! signal arrives right after the sample and the ring stays nearly empty.
//! [`Fields`] holds the values (tested); [`Fields::to_perf`] only copies
//! them into the kernel struct. Shared with the launcher, which opens the
//! same attributes to probe them.

use perf_event_open_sys::bindings as pe;

use super::sysfs::{HwAttr, Vendor};

/// The sample layout the event is opened with.
pub fn sample_type(vendor: Vendor) -> u64 {
    let generic = pe::PERF_SAMPLE_IP
        | pe::PERF_SAMPLE_TID
        | pe::PERF_SAMPLE_TIME
        | pe::PERF_SAMPLE_ADDR
        | pe::PERF_SAMPLE_CPU
        | pe::PERF_SAMPLE_WEIGHT
        | pe::PERF_SAMPLE_DATA_SRC;
    (match vendor {
        Vendor::IntelPebs => generic,
        Vendor::AmdIbs => generic | pe::PERF_SAMPLE_RAW,
        Vendor::ArmSpe => pe::PERF_SAMPLE_TID | pe::PERF_SAMPLE_TIME | pe::PERF_SAMPLE_CPU,
    }) as u64
}

/// The `perf_event_attr` fields this profiler sets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub config3: u64,
    pub sample_type: u64,
    /// 0 for a counting event.
    pub sample_period: u64,
    pub wakeup_events: u32,
    pub precise_ip: u8,
    pub disabled: bool,
    pub exclude_kernel: bool,
}

impl Fields {
    pub fn to_perf(self) -> pe::perf_event_attr {
        let mut attr = pe::perf_event_attr {
            type_: self.type_,
            size: std::mem::size_of::<pe::perf_event_attr>() as u32,
            config: self.config,
            sample_type: self.sample_type,
            config3: self.config3,
            ..Default::default()
        };
        attr.__bindgen_anon_1.sample_period = self.sample_period;
        attr.__bindgen_anon_2.wakeup_events = self.wakeup_events;
        attr.__bindgen_anon_3.config1 = self.config1;
        attr.__bindgen_anon_4.config2 = self.config2;
        attr.set_precise_ip(self.precise_ip as u64);
        attr.set_disabled(self.disabled as u64);
        attr.set_exclude_kernel(self.exclude_kernel as u64);
        attr.set_exclude_hv(self.exclude_kernel as u64);
        attr
    }
}

/// The sampling event: disabled until enabled (a group member follows its
/// leader instead), user space only when `exclude_kernel`.
pub fn sampling(hw: &HwAttr, period: u64) -> Fields {
    Fields {
        type_: hw.type_,
        config: hw.config,
        config1: hw.config1,
        config2: hw.config2,
        config3: hw.config3,
        sample_type: sample_type(hw.vendor),
        sample_period: hw.valid_period(period),
        wakeup_events: 1,
        precise_ip: hw.precise_ip,
        disabled: hw.aux_leader.is_none(),
        exclude_kernel: hw.exclude_kernel,
    }
}

/// The counting group leader some Intel parts require (`mem-loads-aux`).
pub fn leader(hw: &HwAttr) -> Option<Fields> {
    Some(Fields {
        type_: hw.type_,
        config: hw.aux_leader?,
        disabled: true,
        exclude_kernel: hw.exclude_kernel,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::sysfs::MemEvent;
    use super::*;

    fn hw(vendor: Vendor, aux_leader: Option<u64>, exclude_kernel: bool) -> HwAttr {
        HwAttr {
            event: MemEvent::Latency,
            vendor,
            pmu: "x".into(),
            type_: 4,
            config: 0x1cd,
            config1: 30,
            config2: 7,
            config3: 9,
            aux_leader,
            exclude_kernel,
            precise_ip: 2,
        }
    }

    #[test]
    fn pebs_sampling_event() {
        let f = sampling(&hw(Vendor::IntelPebs, None, true), 10_007);
        assert_eq!(
            f,
            Fields {
                type_: 4,
                config: 0x1cd,
                config1: 30,
                config2: 7,
                config3: 9,
                sample_type: (pe::PERF_SAMPLE_IP
                    | pe::PERF_SAMPLE_TID
                    | pe::PERF_SAMPLE_TIME
                    | pe::PERF_SAMPLE_ADDR
                    | pe::PERF_SAMPLE_CPU
                    | pe::PERF_SAMPLE_WEIGHT
                    | pe::PERF_SAMPLE_DATA_SRC) as u64,
                sample_period: 10_007,
                wakeup_events: 1,
                precise_ip: 2,
                disabled: true,
                exclude_kernel: true,
            }
        );
        let a = f.to_perf();
        assert_eq!(
            (a.type_, a.config, a.config3, a.sample_type),
            (4, 0x1cd, 9, f.sample_type)
        );
        assert_eq!(
            (
                a.precise_ip(),
                a.disabled(),
                a.exclude_kernel(),
                a.exclude_hv()
            ),
            (2, 1, 1, 1)
        );
        assert!(leader(&hw(Vendor::IntelPebs, None, true)).is_none());
    }

    #[test]
    fn hybrid_group_member_and_leader() {
        let h = hw(Vendor::IntelPebs, Some(0x8203), true);
        assert!(!sampling(&h, 10_007).disabled, "enabled through its leader");
        let l = leader(&h).unwrap();
        assert_eq!(
            (l.type_, l.config, l.disabled, l.sample_period),
            (4, 0x8203, true, 0)
        );
        assert_eq!(l.sample_type, 0);
    }

    #[test]
    fn ibs_rounds_the_period_and_keeps_kernel_samples_without_swfilt() {
        let f = sampling(&hw(Vendor::AmdIbs, None, false), 100_001);
        assert_eq!(f.sample_period, 100_000);
        assert!(!f.exclude_kernel);
        assert_ne!(f.sample_type & pe::PERF_SAMPLE_RAW as u64, 0);
        assert_eq!(
            sampling(&hw(Vendor::AmdIbs, None, true), 3).sample_period,
            16
        );
        let spe = sampling(&hw(Vendor::ArmSpe, None, true), 4096);
        assert_eq!(spe.sample_type & pe::PERF_SAMPLE_ADDR as u64, 0);
    }
}
