//! The hardware sample source at run time: the configuration the launcher
//! passed (`HPCRUN_HW_ATTR`), each thread's event and ring, and turning the
//! ring's records into samples for the signal handler.
//!
//! Per thread: an event on the calling thread (`pid 0, cpu -1`), with the
//! `mem-loads-aux` group leader when the PMU needs one; a ring of
//! [`RING_PAGES`] data pages; every sample wakes the thread with the sample
//! signal, whose handler ([`crate::sample::handler::on_hw_sample`]) calls [`drain`].
//! [`decode`] is pure (tested with constructed samples): PEBS samples carry
//! the IP, data address, latency and `data_src`; IBS samples carry the IBS
//! registers in their raw block. Arm SPE (samples in the AUX area) is not
//! read yet.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::*};
use std::sync::OnceLock;

use super::datasrc::{self, Access};
use super::ibs::IbsOp;
use super::record::{self, Record, Sample, SampleLayout};
use super::ring::Ring;
use super::sysfs::{HwAttr, MemEvent, Vendor};
use super::{attr, probe};
use crate::sys;

/// Environment variable with the event's attributes (see
/// [`HwAttr::to_env`]).
pub use hpcrun_abi::env::HW_ATTR as ENV_HW_ATTR;

/// Data pages of each thread's ring (32 KiB with 4 KiB pages): with a
/// wakeup per sample it holds hundreds of samples before one is lost.
pub const RING_PAGES: usize = 8;

/// The configured hardware event.
#[derive(Debug, Clone)]
pub struct Setup {
    pub attr: HwAttr,
    pub layout: SampleLayout,
    pub period: u64,
}

static SETUP: OnceLock<Result<Setup, String>> = OnceLock::new();

/// Reads the configuration once (call outside the signal handler):
/// `Ok(None)` when the event is not a hardware one.
pub fn setup(event: &str, period: u64) -> Result<Option<&'static Setup>, &'static str> {
    let Some(kind) = MemEvent::from_name(event) else {
        return Ok(None);
    };
    let result = SETUP.get_or_init(|| {
        let text = std::env::var(ENV_HW_ATTR)
            .map_err(|_| format!("{event} needs {ENV_HW_ATTR} (set by hpcrun-rs)"))?;
        let attr = HwAttr::from_env(&text).map_err(|e| format!("bad {ENV_HW_ATTR}: {e}"))?;
        if attr.event != kind {
            return Err(format!(
                "{ENV_HW_ATTR} describes {}, not {event}",
                attr.event.name()
            ));
        }
        if !probe::wired(attr.vendor) {
            return Err(format!(
                "{} samples are not read in this version",
                attr.vendor.name()
            ));
        }
        Ok(Setup {
            layout: SampleLayout::new(attr::sample_type(attr.vendor)),
            period: attr.valid_period(period),
            attr,
        })
    });
    match result {
        Ok(s) => Ok(Some(s)),
        Err(e) => Err(e.as_str()),
    }
}

/// The configuration, once [`setup`] has succeeded (signal-safe).
pub fn get() -> Option<&'static Setup> {
    SETUP.get().and_then(|r| r.as_ref().ok())
}

/// Causes of hardware records that gave no sample (index into
/// [`ThreadHw::dropped`]).
pub const DROP_CAUSES: [&str; 9] = [
    "hw: records lost by the kernel (ring full)",
    "hw: samples lost by the PMU driver",
    "hw: throttled by the kernel",
    "hw: unreadable records",
    "hw: wrapped records too large",
    "hw: ring inconsistent",
    "hw: sample without a data address",
    "hw: not a sampled load/store",
    "hw: kernel code",
];
const LOST: usize = 0;
const LOST_SAMPLES: usize = 1;
const THROTTLED: usize = 2;
const BAD: usize = 3;
const TOO_LARGE: usize = 4;
const CORRUPT: usize = 5;
const NO_ADDR: usize = 6;
const WRONG_KIND: usize = 7;
const KERNEL: usize = 8;

/// A thread's hardware event: its ring, its group leader and counts.
#[derive(Default)]
pub struct ThreadHw {
    pub ring: OnceLock<Ring>,
    pub leader_fd: AtomicI32,
    pub samples: AtomicU64,
    pub dropped: [AtomicU64; DROP_CAUSES.len()],
}

impl ThreadHw {
    pub fn new() -> ThreadHw {
        ThreadHw {
            leader_fd: AtomicI32::new(-1),
            ..Default::default()
        }
    }

    /// Counts back to zero (the thread's state goes to the next thread;
    /// its ring, if any, stays: such a state is not handed on).
    pub fn reset(&self) {
        self.samples.store(0, Relaxed);
        for d in &self.dropped {
            d.store(0, Relaxed);
        }
    }

    /// (cause, count) of the records that gave no sample.
    pub fn dropped(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DROP_CAUSES
            .iter()
            .zip(&self.dropped)
            .map(|(c, n)| (*c, n.load(Relaxed)))
    }

    fn drop_one(&self, cause: usize, n: u64) {
        if n > 0 {
            self.dropped[cause].fetch_add(n, Relaxed);
        }
    }
}

/// Opens the calling thread's event, maps its ring and routes its wakeups
/// to `signal` (`None`: no signal, the caller drains). Stores the event's
/// fd in `perf_fd`. Returns a message on failure.
pub fn start_thread(
    hw: &ThreadHw,
    perf_fd: &AtomicI32,
    setup: &Setup,
    signal: Option<i32>,
) -> Result<(), String> {
    let leader = match attr::leader(&setup.attr) {
        Some(f) => {
            let mut a = f.to_perf();
            Some(sys::open_perf_event(&mut a, -1).map_err(|e| {
                format!(
                    "perf_event_open({} group leader) failed: {}",
                    setup.attr.pmu,
                    probe::errno_text(e)
                )
            })?)
        }
        None => None,
    };
    let close_leader = || {
        if let Some(fd) = leader {
            sys::close_fd(fd);
        }
    };
    let mut a = attr::sampling(&setup.attr, setup.period).to_perf();
    let fd = match sys::open_perf_event(&mut a, leader.unwrap_or(-1)) {
        Ok(fd) => fd,
        Err(e) => {
            close_leader();
            return Err(format!(
                "perf_event_open({} {}) failed: {}",
                setup.attr.pmu,
                setup.attr.event.name(),
                probe::errno_text(e)
            ));
        }
    };
    let fail = |what: String| {
        sys::close_fd(fd);
        close_leader();
        Err(what)
    };
    let Some(ring) = sys::map_perf_ring(fd, RING_PAGES).map(Ring::new) else {
        return fail(format!(
            "cannot map the perf ring buffer (errno {}; see /proc/sys/kernel/perf_event_mlock_kb)",
            sys::errno()
        ));
    };
    if hw.ring.set(ring).is_err() {
        return fail("the thread already has a ring".to_string());
    }
    if let Some(signal) = signal {
        if let Err(e) = sys::route_perf_signal(fd, signal) {
            return fail(format!("cannot route perf signals (errno {e})"));
        }
    }
    hw.leader_fd.store(leader.unwrap_or(-1), Release);
    perf_fd.store(fd, Release);
    let enabled = sys::enable_event(leader.unwrap_or(fd));
    if !enabled {
        return Err(format!("cannot enable the event (errno {})", sys::errno()));
    }
    Ok(())
}

/// Closes the group leader, if any (the sampling fd is closed by the
/// caller with the other perf fds). The ring stays mapped: a late signal
/// may still read it.
pub fn stop_thread(hw: &ThreadHw) {
    let fd = hw.leader_fd.swap(-1, AcqRel);
    if fd >= 0 {
        sys::close_event(fd);
    }
}

/// One usable hardware sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwSample {
    pub ip: u64,
    pub addr: u64,
    /// Latency in cycles (PEBS load latency, IBS DC miss latency; 0 when
    /// the hardware gives none, e.g. stores).
    pub weight: u64,
    pub access: Access,
}

/// Why a sample record gives no [`HwSample`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    NoAddress,
    WrongKind,
    Kernel,
    Unreadable,
}

impl Skip {
    fn cause(self) -> usize {
        match self {
            Skip::NoAddress => NO_ADDR,
            Skip::WrongKind => WRONG_KIND,
            Skip::Kernel => KERNEL,
            Skip::Unreadable => BAD,
        }
    }
}

/// Kernel addresses on the architectures with these PMUs (x86-64 and
/// AArch64 both put the kernel in the upper half).
fn is_kernel(ip: u64) -> bool {
    ip >> 63 != 0
}

/// Turns a decoded sample record into a sample of the configured event.
pub fn decode(setup: &Setup, s: &Sample) -> Result<HwSample, Skip> {
    let want_store = setup.attr.event == MemEvent::Stores;
    let out = match setup.attr.vendor {
        Vendor::IntelPebs => {
            let access = datasrc::decode(s.data_src);
            // mem-loads gives loads, mem-stores stores; trust the event when
            // data_src does not say (op NA).
            let access = if access.is_load || access.is_store {
                access
            } else {
                Access {
                    is_store: want_store,
                    is_load: !want_store,
                    ..access
                }
            };
            HwSample {
                ip: s.ip,
                addr: s.addr,
                weight: s.weight,
                access,
            }
        }
        Vendor::AmdIbs => match s.raw.map(IbsOp::parse) {
            Some(Ok(op)) => {
                if !op.valid() {
                    return Err(Skip::Unreadable);
                }
                HwSample {
                    ip: op.ip().unwrap_or(s.ip),
                    addr: op.data_addr().unwrap_or(0),
                    weight: op.miss_latency() as u64,
                    access: op.access(),
                }
            }
            Some(Err(_)) => return Err(Skip::Unreadable),
            // No raw block: the generic fields the kernel filled.
            None => HwSample {
                ip: s.ip,
                addr: s.addr,
                weight: s.weight,
                access: datasrc::decode(s.data_src),
            },
        },
        Vendor::ArmSpe => return Err(Skip::Unreadable),
    };
    if is_kernel(out.ip) {
        return Err(Skip::Kernel);
    }
    let right_kind = if want_store {
        out.access.is_store
    } else {
        out.access.is_load
    };
    if !right_kind {
        return Err(Skip::WrongKind);
    }
    if out.addr == 0 {
        return Err(Skip::NoAddress);
    }
    Ok(out)
}

/// Drains the thread's ring, handing each usable sample to `f` and counting
/// the rest. Safe in the signal handler (no allocation, no lock).
pub fn drain(hw: &ThreadHw, setup: &Setup, mut f: impl FnMut(&HwSample)) {
    let Some(ring) = hw.ring.get() else {
        return;
    };
    let mut counts = record::Counts::default();
    let mut skipped = [0u64; DROP_CAUSES.len()];
    let stats = ring.for_each_record(|header, body| {
        let r = record::parse(header, body, &setup.layout);
        counts.note(&r);
        if let Ok(Record::Sample(s)) = r {
            match decode(setup, &s) {
                Ok(sample) => f(&sample),
                Err(skip) => skipped[skip.cause()] += 1,
            }
        }
    });
    hw.samples.fetch_add(counts.samples, Relaxed);
    hw.drop_one(LOST, counts.lost);
    hw.drop_one(LOST_SAMPLES, counts.lost_samples);
    hw.drop_one(THROTTLED, counts.throttle);
    hw.drop_one(BAD, counts.bad);
    hw.drop_one(TOO_LARGE, stats.too_large);
    hw.drop_one(CORRUPT, stats.corrupt);
    for (cause, n) in skipped.iter().enumerate() {
        hw.drop_one(cause, *n);
    }
}

#[cfg(test)]
mod tests {
    use super::super::datasrc::MemLevel;
    use super::*;

    fn setup(vendor: Vendor, event: MemEvent) -> Setup {
        let attr = HwAttr {
            event,
            vendor,
            pmu: "cpu".into(),
            type_: 4,
            config: 0x1cd,
            config1: 30,
            config2: 0,
            config3: 0,
            aux_leader: None,
            exclude_kernel: true,
            precise_ip: 3,
        };
        Setup {
            layout: SampleLayout::new(attr::sample_type(vendor)),
            period: 10_007,
            attr,
        }
    }

    #[test]
    fn pebs_load_sample() {
        use perf_event_open_sys::bindings as pe;
        let l3_hit = datasrc::DataSrc {
            op: pe::PERF_MEM_OP_LOAD as u8,
            lvl: (pe::PERF_MEM_LVL_L3 | pe::PERF_MEM_LVL_HIT) as u16,
            ..Default::default()
        };
        let s = Sample {
            ip: 0x40_1000,
            addr: 0x7f00_0000_1000,
            weight: 212,
            data_src: l3_hit.to_bits(),
            ..Default::default()
        };
        let h = decode(&setup(Vendor::IntelPebs, MemEvent::Latency), &s).unwrap();
        assert_eq!((h.ip, h.addr, h.weight), (0x40_1000, 0x7f00_0000_1000, 212));
        assert_eq!(h.access.level, MemLevel::L3);
        assert!(h.access.is_load);
        // The stores event does not take loads.
        assert_eq!(
            decode(&setup(Vendor::IntelPebs, MemEvent::Stores), &s),
            Err(Skip::WrongKind)
        );
        // No data address, kernel IP.
        let no_addr = Sample { addr: 0, ..s };
        assert_eq!(
            decode(&setup(Vendor::IntelPebs, MemEvent::Latency), &no_addr),
            Err(Skip::NoAddress)
        );
        let kernel = Sample {
            ip: 0xffff_ffff_8100_0000,
            ..s
        };
        assert_eq!(
            decode(&setup(Vendor::IntelPebs, MemEvent::Latency), &kernel),
            Err(Skip::Kernel)
        );
        // data_src without an op: the event's kind.
        let na = Sample { data_src: 0, ..s };
        let h = decode(&setup(Vendor::IntelPebs, MemEvent::Stores), &na).unwrap();
        assert!(h.access.is_store && !h.access.is_load);
    }

    fn ibs_raw(data3: u64) -> Vec<u8> {
        let mut v = 0u32.to_ne_bytes().to_vec();
        for r in [1u64 << 18, 0x40_2000, 0, 3, data3, 0x7f00_0000_2000, 0] {
            v.extend_from_slice(&r.to_ne_bytes());
        }
        v
    }

    #[test]
    fn ibs_samples_come_from_the_raw_registers() {
        let set = setup(Vendor::AmdIbs, MemEvent::Latency);
        // Load, DC miss, L2 miss, linear address valid, latency 400.
        let raw = ibs_raw(1 | 1 << 7 | 1 << 17 | 1 << 20 | 400 << 32);
        let s = Sample {
            ip: 0xdead,
            raw: Some(&raw),
            ..Default::default()
        };
        let h = decode(&set, &s).unwrap();
        assert_eq!((h.ip, h.addr, h.weight), (0x40_2000, 0x7f00_0000_2000, 400));
        assert_eq!(h.access.level, MemLevel::LocalDram);
        // A non-memory op, an op without a valid address.
        let raw = ibs_raw(0);
        let s = Sample {
            raw: Some(&raw),
            ..Default::default()
        };
        assert_eq!(decode(&set, &s), Err(Skip::WrongKind));
        let raw = ibs_raw(1);
        let s = Sample {
            raw: Some(&raw),
            ..Default::default()
        };
        assert_eq!(decode(&set, &s), Err(Skip::NoAddress));
        // A truncated raw block.
        let s = Sample {
            raw: Some(&raw[..20]),
            ..Default::default()
        };
        assert_eq!(decode(&set, &s), Err(Skip::Unreadable));
        // Stores event takes the store.
        let raw = ibs_raw(2 | 1 << 17);
        let s = Sample {
            raw: Some(&raw),
            ..Default::default()
        };
        let h = decode(&setup(Vendor::AmdIbs, MemEvent::Stores), &s).unwrap();
        assert!(h.access.is_store);
        assert_eq!(h.access.level, MemLevel::L1);
    }

    /// The whole runtime path but the signal, on this machine: a software
    /// page-fault event opened with the PEBS sample layout (software events
    /// accept WEIGHT and DATA_SRC and leave them 0), ring, drain, decode.
    #[test]
    fn live_page_faults_through_the_pebs_path() {
        let mut set = setup(Vendor::IntelPebs, MemEvent::Stores);
        set.attr.type_ = perf_event_open_sys::bindings::PERF_TYPE_SOFTWARE;
        set.attr.config = perf_event_open_sys::bindings::PERF_COUNT_SW_PAGE_FAULTS as u64;
        set.attr.config1 = 0;
        set.attr.precise_ip = 0;
        set.period = 1;
        let hw = ThreadHw::new();
        let fd = AtomicI32::new(-1);
        if let Err(e) = start_thread(&hw, &fd, &set, None) {
            eprintln!("skipped: {e}");
            return;
        }
        let pages = 8;
        let words = sys::map_zeroed::<std::sync::atomic::AtomicU64>(pages * 512).unwrap();
        let mem = words.as_ptr() as u64;
        for i in 0..pages {
            std::hint::black_box(words[i * 512].load(std::sync::atomic::Ordering::Relaxed));
        }
        sys::disable_event(fd.load(Relaxed));
        let mut addrs = Vec::new();
        drain(&hw, &set, |s| {
            if s.addr >= mem && s.addr < mem + (pages * 4096) as u64 {
                addrs.push(s.addr);
            }
            assert_eq!(s.access.level, MemLevel::Unknown);
        });
        sys::close_event(fd.load(Relaxed));
        stop_thread(&hw);
        assert_eq!(addrs.len(), pages, "{addrs:x?}");
        assert!(hw.samples.load(Relaxed) >= pages as u64);
    }
}
