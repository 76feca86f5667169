//! Event names, periods and the fallback from hardware to software sampling.

use anyhow::{bail, Result};

/// The sample source that will actually run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub name: &'static str,
    pub period: u64,
}

pub const DEFAULT_SOFT_PERIOD_NS: u64 = 500_000;

/// Why hardware memory sampling is unavailable on this machine.
pub fn hardware_unavailable_reason() -> String {
    let devices: Vec<String> = std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let has_pmu = devices
        .iter()
        .any(|d| d == "cpu" || d == "ibs_op" || d.starts_with("arm_spe") || d.starts_with("cpu_"));
    if has_pmu {
        "hardware memory sampling is not implemented in this version of hpcrun-rs".into()
    } else {
        format!(
            "no hardware PMU on this machine (a virtual machine or container?): /sys/bus/event_source/devices has only {}",
            devices.join(" ")
        )
    }
}

/// Default period of `page-faults`: every fault (first touch needs them all).
pub const DEFAULT_PAGE_FAULT_PERIOD: u64 = 1;

/// Parses the `-e` options; returns the events to run (at most one timer
/// source, plus `page-faults`) and notes for stderr.
pub fn choose(specs: &[String], strict: bool) -> Result<(Vec<Chosen>, Vec<String>)> {
    let mut notes = Vec::new();
    let mut chosen: Vec<Chosen> = Vec::new();
    let default = ["mem:soft".to_string()];
    let specs = if specs.is_empty() {
        &default[..]
    } else {
        specs
    };
    for spec in specs
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        let (name, period) = match spec.split_once('@') {
            Some((n, p)) => {
                let period: u64 = p.parse().ok().filter(|&p| p > 0).ok_or_else(|| {
                    anyhow::anyhow!("bad period '{p}' in -e {spec}: expected a positive integer")
                })?;
                (n, Some(period))
            }
            None => (spec, None),
        };
        let event = match name {
            "mem:soft" | "cpu-time" => Chosen {
                name: if name == "mem:soft" { "mem:soft" } else { "cpu-time" },
                period: period.unwrap_or(DEFAULT_SOFT_PERIOD_NS),
            },
            "page-faults" => Chosen {
                name: "page-faults",
                period: period.unwrap_or(DEFAULT_PAGE_FAULT_PERIOD),
            },
            "mem:latency" | "mem:stores" => {
                let reason = hardware_unavailable_reason();
                if strict {
                    bail!("{name} is not available: {reason} (drop --strict to fall back to mem:soft)");
                }
                notes.push(format!(
                    "{name} is not available ({reason}); running mem:soft instead"
                ));
                Chosen {
                    name: "mem:soft",
                    period: DEFAULT_SOFT_PERIOD_NS,
                }
            }
            other => bail!(
                "unknown event '{other}' (known: mem:soft, cpu-time, page-faults, mem:latency, mem:stores); see hpcrun-rs --list-events"
            ),
        };
        let is_timer = |c: &Chosen| c.name != "page-faults";
        if let Some(prev) = chosen
            .iter()
            .find(|c| c.name == event.name || (is_timer(c) && is_timer(&event)))
        {
            notes.push(format!(
                "only one timer source per run: keeping {}, ignoring {spec}",
                prev.name
            ));
            continue;
        }
        chosen.push(event);
    }
    Ok((chosen, notes))
}

/// The `HPCRUN_EVENTS` value for the preload library.
pub fn env_value(chosen: &[Chosen]) -> String {
    chosen
        .iter()
        .map(|c| format!("{}@{}", c.name, c.period))
        .collect::<Vec<_>>()
        .join(",")
}

/// "mem:soft every 500000 ns, page-faults every 1 faults".
pub fn describe(chosen: &[Chosen]) -> String {
    chosen
        .iter()
        .map(|c| {
            let unit = if c.name == "page-faults" {
                "faults"
            } else {
                "ns"
            };
            format!("{} every {} {unit}", c.name, c.period)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line of `--list-events`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    pub name: &'static str,
    pub what: &'static str,
    /// `None` when available; else why not and what to do.
    pub missing: Option<(String, String)>,
}

/// What this machine offers, read from sysfs and procfs (no event is
/// opened). `root` is a sysfs tree (normally "/") so tests can use fixtures.
pub fn probe(root: &std::path::Path) -> Vec<Availability> {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    let exists = |p: &str| root.join(p).exists();
    let devices: Vec<String> = std::fs::read_dir(root.join("sys/bus/event_source/devices"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let paranoid: i32 = read("proc/sys/kernel/perf_event_paranoid")
        .trim()
        .parse()
        .unwrap_or(2);
    // CAP_PERFMON (38) or CAP_SYS_ADMIN (21) in the effective set.
    let cap_eff = read("proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let privileged = cap_eff & (1 << 38 | 1 << 21) != 0;
    let vm = read("proc/cpuinfo")
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
    let software = if !devices.iter().any(|d| d == "software") {
        Some((
            "the kernel has no software perf events (no /sys/bus/event_source/devices/software)"
                .to_string(),
            "use a kernel built with CONFIG_PERF_EVENTS".to_string(),
        ))
    } else if paranoid > 2 && !privileged {
        Some((
            format!("perf_event_paranoid is {paranoid} and this user has no CAP_PERFMON"),
            "sysctl kernel.perf_event_paranoid=2 (or grant CAP_PERFMON)".to_string(),
        ))
    } else {
        None
    };
    let intel = exists("sys/bus/event_source/devices/cpu/events/mem-loads");
    let amd = devices.iter().any(|d| d == "ibs_op");
    let arm = devices.iter().any(|d| d.starts_with("arm_spe"));
    let hardware = |stores: bool| -> Option<(String, String)> {
        if let Some(sw) = &software {
            return Some(sw.clone());
        }
        let has = if stores {
            intel && exists("sys/bus/event_source/devices/cpu/events/mem-stores") || amd || arm
        } else {
            intel || amd || arm
        };
        if !has {
            let reason = if vm {
                "no memory-sampling PMU (Intel PEBS mem-loads, AMD ibs_op, Arm arm_spe): this is a virtual machine without PMU passthrough".to_string()
            } else {
                "no memory-sampling PMU (Intel PEBS mem-loads, AMD ibs_op, Arm arm_spe) in /sys/bus/event_source/devices".to_string()
            };
            return Some((
                reason,
                "run on bare metal or a VM with a virtual PMU; mem:soft works everywhere"
                    .to_string(),
            ));
        }
        if paranoid > 1 && !privileged {
            return Some((
                format!("perf_event_paranoid is {paranoid}: hardware sampling needs 1 or less, or CAP_PERFMON"),
                "sysctl kernel.perf_event_paranoid=1 (or grant CAP_PERFMON)".to_string(),
            ));
        }
        Some((
            "the PMU is there, but hardware memory sampling is not implemented in this version of hpcrun-rs".to_string(),
            "use mem:soft".to_string(),
        ))
    };
    vec![
        Availability {
            name: "mem:soft",
            what: "software memory-access sampling (task-clock timer, decoded instruction, data address from registers)",
            missing: software.clone(),
        },
        Availability {
            name: "cpu-time",
            what: "plain task-clock sampling, code-centric only",
            missing: software.clone(),
        },
        Availability {
            name: "mem:latency",
            what: "hardware load-latency sampling (Intel PEBS, AMD IBS, Arm SPE)",
            missing: hardware(false),
        },
        Availability {
            name: "mem:stores",
            what: "hardware store sampling",
            missing: hardware(true),
        },
        Availability {
            name: "page-faults",
            what: "page-fault sampling with data addresses (first touch)",
            missing: Some((
                "not implemented in this version of hpcrun-rs".to_string(),
                "use mem:soft".to_string(),
            )),
        },
    ]
}

/// The `--list-events` table.
pub fn list(root: &std::path::Path) -> String {
    let mut out = String::new();
    for a in probe(root) {
        match &a.missing {
            None => out.push_str(&format!("{:<12} available      {}\n", a.name, a.what)),
            Some((why, fix)) => out.push_str(&format!(
                "{:<12} not available  {}\n{:<27}why: {why}\n{:<27}fix: {fix}\n",
                a.name, a.what, "", ""
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(devices: &[&str], paranoid: &str, cpuinfo: &str) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        for d in devices {
            std::fs::create_dir_all(dir.0.join("sys/bus/event_source/devices").join(d)).unwrap();
        }
        std::fs::create_dir_all(dir.0.join("proc/sys/kernel")).unwrap();
        std::fs::create_dir_all(dir.0.join("proc/self")).unwrap();
        std::fs::write(dir.0.join("proc/sys/kernel/perf_event_paranoid"), paranoid).unwrap();
        std::fs::write(dir.0.join("proc/cpuinfo"), cpuinfo).unwrap();
        std::fs::write(
            dir.0.join("proc/self/status"),
            "CapEff:\t0000000000000000\n",
        )
        .unwrap();
        dir
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "hpcrun-probe-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn probe_a_vm_without_pmu() {
        let dir = fixture(
            &["breakpoint", "msr", "software", "tracepoint", "uprobe"],
            "2",
            "flags\t: fpu hypervisor\n",
        );
        let list = probe(&dir.0);
        assert_eq!(list[0].name, "mem:soft");
        assert_eq!(list[0].missing, None);
        let latency = list.iter().find(|a| a.name == "mem:latency").unwrap();
        let (why, fix) = latency.missing.clone().unwrap();
        assert!(why.contains("virtual machine"), "{why}");
        assert!(fix.contains("mem:soft"));
    }

    #[test]
    fn probe_paranoid_3_blocks_software_events() {
        let dir = fixture(&["software"], "3", "flags\t: fpu\n");
        let list = probe(&dir.0);
        let (why, fix) = list[0].missing.clone().unwrap();
        assert!(why.contains("perf_event_paranoid is 3"), "{why}");
        assert!(fix.contains("sysctl"));
    }

    #[test]
    fn probe_amd_ibs_is_recognised() {
        let dir = fixture(&["software", "ibs_op", "cpu"], "1", "flags\t: fpu\n");
        let latency = probe(&dir.0)
            .into_iter()
            .find(|a| a.name == "mem:latency")
            .unwrap();
        let (why, _) = latency.missing.unwrap();
        assert!(why.contains("not implemented"), "{why}");
    }

    #[test]
    fn default_is_mem_soft() {
        let (c, notes) = choose(&[], false).unwrap();
        assert_eq!(
            c,
            vec![Chosen {
                name: "mem:soft",
                period: DEFAULT_SOFT_PERIOD_NS
            }]
        );
        assert!(notes.is_empty());
    }

    #[test]
    fn period_is_parsed() {
        let (c, _) = choose(&["mem:soft@1000".into()], false).unwrap();
        assert_eq!(c[0].period, 1000);
        assert!(choose(&["mem:soft@x".into()], false).is_err());
        assert!(choose(&["mem:soft@0".into()], false).is_err());
    }

    #[test]
    fn unknown_event_is_an_error() {
        let e = choose(&["cycles".into()], false).unwrap_err().to_string();
        assert!(e.contains("unknown event 'cycles'"), "{e}");
    }

    #[test]
    fn latency_falls_back_unless_strict() {
        let (c, notes) = choose(&["mem:latency".into()], false).unwrap();
        assert_eq!(c[0].name, "mem:soft");
        assert!(notes[0].contains("mem:latency") && notes[0].contains("mem:soft"));
        assert!(choose(&["mem:latency".into()], true).is_err());
    }

    #[test]
    fn page_faults_go_with_a_timer_source() {
        let (c, notes) = choose(&["mem:soft@2000".into(), "page-faults".into()], false).unwrap();
        assert_eq!(env_value(&c), "mem:soft@2000,page-faults@1");
        assert!(notes.is_empty());
        let (c, _) = choose(&["page-faults@8".into()], false).unwrap();
        assert_eq!(env_value(&c), "page-faults@8");
        let (c, notes) = choose(&["mem:soft,cpu-time".into()], false).unwrap();
        assert_eq!(env_value(&c), format!("mem:soft@{DEFAULT_SOFT_PERIOD_NS}"));
        assert!(notes[0].contains("only one timer source"), "{notes:?}");
    }
}
