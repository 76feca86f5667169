//! Can `mem:latency` and `mem:stores` run on this machine? If not, why not
//! and what would fix it; if so, with which attributes.
//!
//! [`probe_with`] is pure (PMU descriptions from a sysfs tree plus a few
//! host facts) and tested with fixture trees; [`confirm`] then asks the
//! kernel, through a caller-supplied `perf_event_open` attempt, trying the
//! `precise_ip` levels from best to worst, and records the errno when every
//! attempt fails.
//!
//! This file uses only `std` (and [`super::sysfs`]): the launcher compiles it
//! too.

use std::fmt;
use std::path::Path;

use super::sysfs::{self, HwAttr, MemEvent, Unsupported, Vendor};

/// Host facts that decide whether perf events may be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    /// `/proc/sys/kernel/perf_event_paranoid` (2 if unreadable).
    pub paranoid: i32,
    /// CAP_PERFMON or CAP_SYS_ADMIN in the effective set.
    pub privileged: bool,
    /// The CPU flags say `hypervisor`.
    pub vm: bool,
}

impl Host {
    /// Reads the facts from the procfs under `root` (normally `/`).
    pub fn read(root: &Path) -> Host {
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
        let paranoid = read("proc/sys/kernel/perf_event_paranoid")
            .trim()
            .parse()
            .unwrap_or(2);
        // CAP_PERFMON is 38, CAP_SYS_ADMIN 21.
        let cap_eff = read("proc/self/status")
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        let vm = read("proc/cpuinfo").lines().any(|l| {
            (l.starts_with("flags") || l.starts_with("Features"))
                && l.split_whitespace().any(|f| f == "hypervisor")
        });
        Host {
            paranoid,
            privileged: cap_eff & (1 << 38 | 1 << 21) != 0,
            vm,
        }
    }
}

/// Why a hardware memory event is not available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// No memory-sampling PMU among the devices.
    NoDevice { devices: Vec<String>, vm: bool },
    /// The PMU exists but does not list the event.
    NoEvent { pmu: String, event: &'static str },
    /// The PMU description could not be read.
    Sysfs(String),
    /// `perf_event_paranoid` forbids it for this (unprivileged) user.
    Paranoid { level: i32, needed: i32 },
    /// The kernel refused every `precise_ip` level.
    OpenFailed { pmu: String, errno: i32 },
    /// The PMU works but this version does not read its samples yet.
    NotWired { vendor: Vendor },
}

impl Missing {
    /// One line: why.
    pub fn why(&self) -> String {
        match self {
            Missing::NoDevice { devices, vm } => {
                let list = if devices.is_empty() {
                    "nothing".to_string()
                } else {
                    devices.join(" ")
                };
                if *vm {
                    format!("no hardware PMU for memory sampling (Intel PEBS mem-loads, AMD ibs_op, Arm arm_spe): this is a virtual machine without PMU passthrough; /sys/bus/event_source/devices has only {list}")
                } else {
                    format!("no hardware PMU for memory sampling (Intel PEBS mem-loads, AMD ibs_op, Arm arm_spe) in /sys/bus/event_source/devices, which has only {list}")
                }
            }
            Missing::NoEvent { pmu, event } => {
                format!("the {pmu} PMU does not offer the {event} event")
            }
            Missing::Sysfs(e) => format!("the PMU description in sysfs is unreadable: {e}"),
            Missing::Paranoid { level, needed } => format!(
                "perf_event_paranoid is {level} and this user has no CAP_PERFMON: this event needs {needed} or less"
            ),
            Missing::OpenFailed { pmu, errno } => format!(
                "the {pmu} PMU is there, but perf_event_open refused the event: {}",
                errno_text(*errno)
            ),
            Missing::NotWired { vendor } => format!(
                "the {} PMU is there, but this version of hpcrun-rs does not read its samples yet",
                vendor.name()
            ),
        }
    }

    /// One line: what to do about it.
    pub fn fix(&self) -> String {
        match self {
            Missing::NoDevice { vm: true, .. } => "run on bare metal or in a VM with a virtual PMU (e.g. KVM -cpu host with vPMU enabled); mem:soft works everywhere".to_string(),
            Missing::NoDevice { vm: false, .. } => "load the PMU driver (dmesg | grep -i -e pmu -e ibs -e spe) or use mem:soft, which works everywhere".to_string(),
            Missing::NoEvent { .. } => "use mem:latency or mem:soft".to_string(),
            Missing::Sysfs(_) => "check the files named above; mem:soft works everywhere".to_string(),
            Missing::Paranoid { needed, .. } => format!(
                "sysctl kernel.perf_event_paranoid={needed} (or grant CAP_PERFMON: setcap cap_perfmon+ep, or run as root)"
            ),
            Missing::OpenFailed { errno, .. } => match *errno {
                libc_errno::EACCES | libc_errno::EPERM => "lower kernel.perf_event_paranoid or grant CAP_PERFMON".to_string(),
                libc_errno::EMFILE => "the process's open-file limit (ulimit -n) was reached: raise it".to_string(),
                libc_errno::ENFILE => "the system's open-file table is full (fs.file-max): close files elsewhere or raise it".to_string(),
                libc_errno::EBUSY => "another tool (perf, a profiler, a watchdog) holds the PMU: stop it and retry".to_string(),
                libc_errno::EOPNOTSUPP | libc_errno::ENOENT | libc_errno::EINVAL => "the kernel does not support this configuration (too old?); check `perf mem record true`; mem:soft works everywhere".to_string(),
                _ => "check dmesg and `perf mem record true`; mem:soft works everywhere".to_string(),
            },
            Missing::NotWired { .. } => "use mem:soft".to_string(),
        }
    }
}

/// The errno values named in explanations (Linux, all architectures).
mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EACCES: i32 = 13;
    pub const EBUSY: i32 = 16;
    pub const EINVAL: i32 = 22;
    pub const ENFILE: i32 = 23;
    pub const EMFILE: i32 = 24;
    pub const ENODATA: i32 = 61;
    pub const EOPNOTSUPP: i32 = 95;
}

/// "errno 22 (EINVAL: ...)".
pub fn errno_text(errno: i32) -> String {
    let what = match errno {
        libc_errno::EPERM => "EPERM: not permitted",
        libc_errno::ENOENT => "ENOENT: the PMU does not know this event",
        libc_errno::EACCES => "EACCES: permission denied",
        libc_errno::EBUSY => "EBUSY: the PMU is in use",
        libc_errno::EINVAL => "EINVAL: invalid attributes",
        libc_errno::ENODATA => "ENODATA: mem-loads needs its mem-loads-aux group leader",
        libc_errno::EOPNOTSUPP => "EOPNOTSUPP: not supported",
        _ => "",
    };
    if what.is_empty() {
        format!("errno {errno}")
    } else {
        format!("errno {errno} ({what})")
    }
}

/// The verdict for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventProbe {
    pub event: MemEvent,
    /// The attributes to use (also filled when only the kernel's consent is
    /// missing, for diagnostics).
    pub attr: Option<HwAttr>,
    /// `None` when available.
    pub missing: Option<Missing>,
}

impl EventProbe {
    pub fn name(&self) -> &'static str {
        self.event.name()
    }

    pub fn available(&self) -> bool {
        self.missing.is_none()
    }
}

impl fmt::Display for EventProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.missing {
            None => write!(f, "{}: available", self.name()),
            Some(m) => write!(f, "{}: not available: {}", self.name(), m.why()),
        }
    }
}

/// Whether this version reads the samples of `vendor` (SPE's AUX area is
/// not wired into the sampler yet; its packets are decoded by
/// [`super::spe`]).
pub fn wired(vendor: Vendor) -> bool {
    vendor != Vendor::ArmSpe
}

/// Probes both events from the PMU descriptions under `devices` and the
/// host facts, without opening anything. `ldlat` is the load-latency
/// threshold.
pub fn probe_with(devices: &Path, host: &Host, ldlat: u32) -> Vec<EventProbe> {
    [MemEvent::Latency, MemEvent::Stores]
        .into_iter()
        .map(|event| match sysfs::mem_event_attr(devices, event, ldlat) {
            Err(Unsupported::NoDevice { devices }) => EventProbe {
                event,
                attr: None,
                missing: Some(Missing::NoDevice {
                    devices,
                    vm: host.vm,
                }),
            },
            Err(Unsupported::NoEvent { pmu, event: e }) => EventProbe {
                event,
                attr: None,
                missing: Some(Missing::NoEvent { pmu, event: e }),
            },
            Err(Unsupported::Sysfs(e)) => EventProbe {
                event,
                attr: None,
                missing: Some(Missing::Sysfs(e.to_string())),
            },
            Ok(attr) => {
                // Unprivileged users may sample their own user-space code up
                // to paranoid 2; kernel samples (IBS without swfilt) need 1;
                // 3 and above (a distribution patch) forbid everything.
                let needed = if attr.exclude_kernel { 2 } else { 1 };
                let missing = if !host.privileged && host.paranoid > needed {
                    Some(Missing::Paranoid {
                        level: host.paranoid,
                        needed,
                    })
                } else if !wired(attr.vendor) {
                    Some(Missing::NotWired {
                        vendor: attr.vendor,
                    })
                } else {
                    None
                };
                EventProbe {
                    event,
                    attr: Some(attr),
                    missing,
                }
            }
        })
        .collect()
}

/// Probes on the machine itself: sysfs and procfs under `root` (normally
/// `/`), without opening anything. See [`confirm`].
pub fn probe(root: &Path) -> Vec<EventProbe> {
    probe_with(
        &root.join("sys/bus/event_source/devices"),
        &Host::read(root),
        sysfs::DEFAULT_LDLAT,
    )
}

/// For every available probe, asks the kernel: `open(attr)` tries to open
/// (and closes) the event with `attr.precise_ip` set, returning the errno on
/// failure. The first accepted level is kept; if none is, the probe becomes
/// unavailable with the last errno.
pub fn confirm(probes: &mut [EventProbe], mut open: impl FnMut(&HwAttr) -> Result<(), i32>) {
    for p in probes.iter_mut() {
        let (None, Some(attr)) = (&p.missing, &mut p.attr) else {
            continue;
        };
        let mut last = 0;
        let mut accepted = None;
        for &level in attr.precise_candidates() {
            let trial = HwAttr {
                precise_ip: level,
                ..attr.clone()
            };
            match open(&trial) {
                Ok(()) => {
                    accepted = Some(level);
                    break;
                }
                Err(errno) => last = errno,
            }
        }
        match accepted {
            Some(level) => attr.precise_ip = level,
            None => {
                p.missing = Some(Missing::OpenFailed {
                    pmu: attr.pmu.clone(),
                    errno: last,
                })
            }
        }
    }
}

/// The multiplexing scale factor of a counter: `time_enabled /
/// time_running` (the counter ran for only part of the time it was
/// enabled). `None` if it never ran.
pub fn multiplex_scale(time_enabled: u64, time_running: u64) -> Option<f64> {
    (time_running > 0).then(|| time_enabled as f64 / time_running as f64)
}

/// A count scaled for multiplexing (rounded), `None` if it never ran.
pub fn scaled_count(count: u64, time_enabled: u64, time_running: u64) -> Option<u64> {
    multiplex_scale(time_enabled, time_running).map(|s| (count as f64 * s).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pmu::fixture;

    const ROOT: Host = Host {
        paranoid: 2,
        privileged: true,
        vm: false,
    };
    const USER: Host = Host {
        paranoid: 2,
        privileged: false,
        vm: false,
    };

    #[test]
    fn this_machine_a_vm_without_pmu() {
        let host = Host { vm: true, ..ROOT };
        let probes = probe_with(&fixture("vm"), &host, 30);
        assert_eq!(probes.len(), 2);
        for p in &probes {
            let m = p.missing.as_ref().unwrap();
            assert!(matches!(m, Missing::NoDevice { vm: true, .. }), "{m:?}");
            assert!(m.why().contains("virtual machine"), "{}", m.why());
            assert!(
                m.why()
                    .contains("breakpoint msr software tracepoint uprobe"),
                "{}",
                m.why()
            );
            assert!(m.fix().contains("mem:soft"));
            assert_eq!(p.attr, None);
        }
        assert_eq!(probes[0].name(), "mem:latency");
        assert_eq!(probes[1].name(), "mem:stores");
    }

    #[test]
    fn intel_available_with_the_best_precise_level_the_kernel_takes() {
        let mut probes = probe_with(&fixture("intel"), &USER, 30);
        assert!(probes.iter().all(|p| p.available()));
        // The kernel refuses precise_ip 3 (EINVAL) and takes 2.
        let mut tried = Vec::new();
        confirm(&mut probes, |a| {
            tried.push(a.precise_ip);
            if a.precise_ip == 3 {
                Err(22)
            } else {
                Ok(())
            }
        });
        assert_eq!(tried, [3, 2, 3, 2]);
        let a = probes[0].attr.as_ref().unwrap();
        assert_eq!((a.config, a.config1, a.precise_ip), (0x1cd, 30, 2));
        assert!(probes[0].available());
    }

    #[test]
    fn open_failure_is_reported_with_its_errno() {
        let mut probes = probe_with(&fixture("intel_hybrid"), &ROOT, 30);
        confirm(&mut probes, |_| Err(16));
        let m = probes[0].missing.as_ref().unwrap();
        assert_eq!(
            m,
            &Missing::OpenFailed {
                pmu: "cpu_core".into(),
                errno: 16
            }
        );
        assert!(m.why().contains("errno 16 (EBUSY"), "{}", m.why());
        assert!(m.fix().contains("another tool"));
        // The attr is kept for diagnostics.
        assert_eq!(probes[0].attr.as_ref().unwrap().aux_leader, Some(0x8203));
    }

    #[test]
    fn paranoid_levels() {
        // User-space-only sampling of one's own threads works up to 2.
        let probes = probe_with(&fixture("intel"), &USER, 30);
        assert!(probes[0].available());
        let strict = Host {
            paranoid: 3,
            ..USER
        };
        let m = probe_with(&fixture("intel"), &strict, 30)[0]
            .missing
            .clone()
            .unwrap();
        assert_eq!(
            m,
            Missing::Paranoid {
                level: 3,
                needed: 2
            }
        );
        assert!(m.why().contains("perf_event_paranoid is 3"));
        assert!(m.fix().contains("perf_event_paranoid=2"));
        // Root is not limited.
        assert!(probe_with(
            &fixture("intel"),
            &Host {
                paranoid: 4,
                ..ROOT
            },
            30
        )[0]
        .available());
    }

    #[test]
    fn amd_ibs_without_swfilt_needs_paranoid_1() {
        // A copy of the AMD tree whose ibs_op lacks the swfilt format term
        // (kernels before 6.13): kernel samples cannot be excluded.
        let dir = std::env::temp_dir().join(format!("hpcrun-ibs-noswfilt-{}", std::process::id()));
        let ibs = dir.join("ibs_op");
        std::fs::create_dir_all(ibs.join("format")).unwrap();
        std::fs::write(ibs.join("type"), "11\n").unwrap();
        std::fs::write(ibs.join("format/cnt_ctl"), "config:19\n").unwrap();
        let probes = probe_with(&dir, &USER, 30);
        std::fs::remove_dir_all(&dir).unwrap();
        let a = probes[0].attr.as_ref().unwrap();
        assert_eq!((a.config, a.config2, a.exclude_kernel), (1 << 19, 0, false));
        assert_eq!(
            probes[0].missing,
            Some(Missing::Paranoid {
                level: 2,
                needed: 1
            })
        );
        // With swfilt (the fixture) a user at paranoid 2 is fine.
        assert!(probe_with(&fixture("amd"), &USER, 30)[0].available());
    }

    #[test]
    fn arm_spe_is_found_but_not_wired() {
        let probes = probe_with(&fixture("arm"), &ROOT, 30);
        let m = probes[0].missing.as_ref().unwrap();
        assert_eq!(
            m,
            &Missing::NotWired {
                vendor: Vendor::ArmSpe
            }
        );
        assert!(m.why().contains("arm-spe"));
        assert_eq!(probes[0].attr.as_ref().unwrap().config2, 30);
        // confirm() leaves unavailable probes alone.
        let mut probes = probes;
        confirm(&mut probes, |_| panic!("must not open"));
    }

    #[test]
    fn broken_sysfs_is_a_reason_not_a_panic() {
        let probes = probe_with(&fixture("broken/garbage_type"), &ROOT, 30);
        let m = probes[0].missing.as_ref().unwrap();
        assert!(matches!(m, Missing::Sysfs(_)));
        assert!(m.why().contains("is not a PMU type number"), "{}", m.why());
    }

    #[test]
    fn hybrid_stores_and_missing_store_event() {
        let probes = probe_with(&fixture("intel_hybrid"), &ROOT, 30);
        assert_eq!(probes[1].attr.as_ref().unwrap().config, 0x02cd);
        // Intel without mem-stores: mem:stores unavailable, mem:latency fine.
        let dir = std::env::temp_dir().join(format!("hpcrun-no-stores-{}", std::process::id()));
        let cpu = dir.join("cpu");
        std::fs::create_dir_all(cpu.join("format")).unwrap();
        std::fs::create_dir_all(cpu.join("events")).unwrap();
        std::fs::write(cpu.join("type"), "4\n").unwrap();
        std::fs::write(cpu.join("format/event"), "config:0-7\n").unwrap();
        std::fs::write(cpu.join("format/umask"), "config:8-15\n").unwrap();
        std::fs::write(cpu.join("format/ldlat"), "config1:0-15\n").unwrap();
        std::fs::write(
            cpu.join("events/mem-loads"),
            "event=0x0b,umask=0x10,ldlat=3\n",
        )
        .unwrap();
        let probes = probe_with(&dir, &ROOT, 30);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(probes[0].available());
        assert_eq!(probes[0].attr.as_ref().unwrap().config, 0x100b);
        assert_eq!(
            probes[1].missing,
            Some(Missing::NoEvent {
                pmu: "cpu".into(),
                event: "mem-stores"
            })
        );
    }

    #[test]
    fn host_facts_from_procfs() {
        let dir = std::env::temp_dir().join(format!("hpcrun-host-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc/sys/kernel")).unwrap();
        std::fs::create_dir_all(dir.join("proc/self")).unwrap();
        std::fs::write(dir.join("proc/sys/kernel/perf_event_paranoid"), "-1\n").unwrap();
        std::fs::write(
            dir.join("proc/self/status"),
            "Name:\tx\nCapEff:\t0000004000000000\n",
        )
        .unwrap();
        std::fs::write(dir.join("proc/cpuinfo"), "flags\t\t: fpu vme hypervisor\n").unwrap();
        let h = Host::read(&dir);
        assert_eq!(
            h,
            Host {
                paranoid: -1,
                privileged: true,
                vm: true
            }
        );
        std::fs::remove_dir_all(&dir).unwrap();
        // Nothing readable: the conservative defaults.
        assert_eq!(
            Host::read(Path::new("/nonexistent")),
            Host {
                paranoid: 2,
                privileged: false,
                vm: false
            }
        );
    }

    #[test]
    fn multiplexing_scale() {
        assert_eq!(multiplex_scale(1000, 250), Some(4.0));
        assert_eq!(multiplex_scale(1000, 1000), Some(1.0));
        assert_eq!(multiplex_scale(1000, 0), None);
        assert_eq!(scaled_count(10, 300, 100), Some(30));
        assert_eq!(scaled_count(10, 300, 0), None);
    }
}
