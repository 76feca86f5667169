//! Event names, periods and the fallback from hardware to software sampling.

use anyhow::{bail, Result};
pub use hpcrun_abi::event::{Event, DEFAULT_SOFT_PERIOD_NS};

use crate::pmu;

/// The sample source that will actually run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub name: &'static str,
    pub period: u64,
}

/// The attributes of hardware memory event `name` (`mem:latency`,
/// `mem:stores`) on this machine (sysfs, procfs, then `perf_event_open`),
/// or why it cannot run.
pub fn hardware_event(name: &str) -> Result<pmu::sysfs::HwAttr, String> {
    let event = pmu::sysfs::MemEvent::from_name(name)
        .ok_or_else(|| format!("{name} is not a hardware memory event"))?;
    pmu::probe_machine(std::path::Path::new("/"), pmu::try_open)
        .into_iter()
        .find(|p| p.event == event)
        .map(|p| match (p.missing, p.attr) {
            (None, Some(attr)) => Ok(attr),
            (Some(m), _) => Err(m.why()),
            (None, None) => Err("no attributes".to_string()),
        })
        .unwrap_or_else(|| Err(format!("{name} was not probed")))
}

/// Why hardware memory sampling (`mem:latency`) is unavailable on this
/// machine; empty when it is available. (`choose` uses [`hardware_event`],
/// which also returns the attributes.)
#[allow(dead_code)]
pub fn hardware_unavailable_reason() -> String {
    hardware_event("mem:latency").err().unwrap_or_default()
}

/// The `HPCRUN_HW_ATTR` value for the chosen event, if it is a hardware one.
pub fn hardware_env(chosen: &Chosen) -> Result<Option<String>> {
    if pmu::sysfs::MemEvent::from_name(chosen.name).is_none() {
        return Ok(None);
    }
    hardware_event(chosen.name)
        .map(|a| Some(a.to_env()))
        .map_err(|why| anyhow::anyhow!("{} is not available: {why}", chosen.name))
}

/// The watchpoint analyses: they run on a sample source's samples.
fn is_analysis(name: &str) -> bool {
    name.parse::<Event>().is_ok_and(Event::is_analysis)
}

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
        let (name, period) = match hpcrun_abi::event::split_item(spec) {
            (n, Some(p)) => {
                let period = p.ok_or_else(|| {
                    let p = spec.split_once('@').map_or("", |(_, p)| p);
                    if p.bytes().all(|b| b.is_ascii_digit()) && !p.trim_start_matches('0').is_empty() {
                        anyhow::anyhow!(
                            "period {p} in -e {spec} is too large: at most {} (see hpcrun-rs --list-events for the defaults)",
                            u64::MAX
                        )
                    } else {
                        anyhow::anyhow!("bad period '{p}' in -e {spec}: expected a positive integer")
                    }
                })?;
                (n, Some(period))
            }
            (n, None) => (n, None),
        };
        let event = match name.parse::<Event>() {
            Ok(e) if e.is_hardware() => {
                let event = e.name();
                match hardware_event(event) {
                    Ok(attr) => Chosen {
                        name: event,
                        period: period.unwrap_or(attr.default_period()),
                    },
                    Err(reason) => {
                        if strict {
                            bail!("{event} is not available: {reason} (drop --strict to fall back to mem:soft)");
                        }
                        notes.push(format!(
                            "{event} is not available ({reason}); running mem:soft instead"
                        ));
                        Chosen {
                            name: Event::MemSoft.name(),
                            period: DEFAULT_SOFT_PERIOD_NS,
                        }
                    }
                }
            }
            Ok(e) => {
                let floor = hpcrun_abi::event::MIN_TIMER_PERIOD_NS;
                if let Some(p) =
                    period.filter(|&p| matches!(e, Event::MemSoft | Event::CpuTime) && p < floor)
                {
                    bail!(
                        "period {p} ns in -e {spec} is below the floor of {floor} ns ({} us): each sample costs a signal and the handler (10-20 us), so shorter periods leave the program little time to run; use -e {}@{floor} or longer (see hpcrun-rs --list-events)",
                        floor / 1000,
                        e.name()
                    );
                }
                Chosen {
                    name: e.name(),
                    period: period
                        .or(e.default_period())
                        .unwrap_or(DEFAULT_SOFT_PERIOD_NS),
                }
            }
            Err(unknown) => bail!("{unknown}; see hpcrun-rs --list-events"),
        };
        let is_timer = |c: &Chosen| c.name != "page-faults" && !is_analysis(c.name);
        if let Some(prev) = chosen
            .iter()
            .find(|c| c.name == event.name || (is_timer(c) && is_timer(&event)))
        {
            if prev.name == event.name {
                notes.push(format!(
                    "{} is given more than once: keeping {}@{}, ignoring {spec}",
                    event.name, prev.name, prev.period
                ));
            } else {
                notes.push(format!(
                    "only one timer source per run: keeping {}, ignoring {spec}",
                    prev.name
                ));
            }
            continue;
        }
        chosen.push(event);
    }
    // The watchpoints are armed by samples with data addresses: without a
    // memory source, mem:soft runs; cpu-time has no data addresses.
    if chosen.iter().any(|c| is_analysis(c.name)) {
        match chosen
            .iter()
            .position(|c| c.name != "page-faults" && !is_analysis(c.name))
        {
            None => {
                chosen.insert(
                    0,
                    Chosen {
                        name: "mem:soft",
                        period: DEFAULT_SOFT_PERIOD_NS,
                    },
                );
            }
            Some(i) if chosen[i].name == "cpu-time" => {
                bail!("sharing and reuse need data addresses: use them with mem:soft (or a hardware memory event), not cpu-time")
            }
            Some(_) => {}
        }
    }
    Ok((chosen, notes))
}

/// The `HPCRUN_EVENTS` value for the preload library.
pub fn env_value(chosen: &[Chosen]) -> String {
    let events: Vec<(Event, u64)> = chosen
        .iter()
        .filter_map(|c| Some((c.name.parse().ok()?, c.period)))
        .collect();
    hpcrun_abi::event::to_env(&events)
}

/// "mem:soft every 2000000 ns, page-faults every 1 faults".
pub fn describe(chosen: &[Chosen]) -> String {
    chosen
        .iter()
        .map(|c| {
            let unit = if c.name == "page-faults" {
                "faults"
            } else if is_analysis(c.name) {
                "samples"
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
    /// For an available hardware event: the PMU and settings it runs with.
    pub via: Option<String>,
}

/// What this machine offers, read from sysfs and procfs under `root`
/// (normally "/"); a hardware event that sysfs allows is then opened once
/// (and closed) to ask the kernel.
pub fn probe(root: &std::path::Path) -> Vec<Availability> {
    probe_with(root, pmu::try_open)
}

/// [`probe`] with `open` trying a hardware event (tests use fixture trees
/// and a fake).
pub fn probe_with(
    root: &std::path::Path,
    open: impl FnMut(&pmu::sysfs::HwAttr) -> Result<(), i32>,
) -> Vec<Availability> {
    let devices: Vec<String> = std::fs::read_dir(root.join("sys/bus/event_source/devices"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let pmu::probe::Host {
        paranoid,
        privileged,
        ..
    } = pmu::probe::Host::read(root);
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
    let watchpoints = if let Some(sw) = &software {
        Some(sw.clone())
    } else if !cfg!(target_arch = "x86_64") {
        Some((
            "the watchpoint analyses are built for x86-64 debug registers only".to_string(),
            "run on x86-64".to_string(),
        ))
    } else if !devices.iter().any(|d| d == "breakpoint") {
        Some((
            "the kernel has no hardware breakpoint events (no /sys/bus/event_source/devices/breakpoint)".to_string(),
            "use a kernel built with CONFIG_HAVE_HW_BREAKPOINT".to_string(),
        ))
    } else {
        None
    };
    let hw = pmu::probe_machine(root, open);
    let hardware = |event: pmu::sysfs::MemEvent| -> (Option<(String, String)>, Option<String>) {
        if let Some(sw) = &software {
            return (Some(sw.clone()), None);
        }
        match hw.iter().find(|p| p.event == event) {
            Some(p) => match (&p.missing, &p.attr) {
                (Some(m), _) => (Some((m.why(), m.fix())), None),
                (None, Some(a)) => (
                    None,
                    Some(format!(
                        "{} PMU {} (type {}, config {:#x}, config1 {:#x}, config2 {:#x}{}), precise_ip {}",
                        a.vendor.name(),
                        a.pmu,
                        a.type_,
                        a.config,
                        a.config1,
                        a.config2,
                        a.aux_leader
                            .map(|c| format!(", group leader config {c:#x}"))
                            .unwrap_or_default(),
                        a.precise_ip
                    )),
                ),
                (None, None) => (None, None),
            },
            None => (None, None),
        }
    };
    let (latency_missing, latency_via) = hardware(pmu::sysfs::MemEvent::Latency);
    let (stores_missing, stores_via) = hardware(pmu::sysfs::MemEvent::Stores);
    hpcrun_abi::event_doc::DOCS
        .iter()
        .map(|d| {
            let (missing, via) = match d.event {
                Event::MemSoft | Event::CpuTime | Event::PageFaults => (software.clone(), None),
                Event::MemLatency => (latency_missing.clone(), latency_via.clone()),
                Event::MemStores => (stores_missing.clone(), stores_via.clone()),
                Event::Sharing | Event::Reuse => (watchpoints.clone(), None),
            };
            Availability {
                name: d.event.name(),
                what: d.what,
                missing,
                via,
            }
        })
        .collect()
}

/// The `--list-events` table.
pub fn list(root: &std::path::Path) -> String {
    render(&probe(root))
}

/// "default: page-faults@256 (every 256 faults)", for events with one.
fn default_line(name: &str) -> Option<String> {
    let event: Event = name.parse().ok()?;
    let period = event.default_period()?;
    let what = match event {
        Event::MemSoft | Event::CpuTime => format!(
            "every {period} ns = {} ms of each thread's user CPU time); period at least {} ns ({} us",
            period as f64 / 1e6,
            hpcrun_abi::event::MIN_TIMER_PERIOD_NS,
            hpcrun_abi::event::MIN_TIMER_PERIOD_NS / 1000
        ),
        Event::PageFaults if period == 1 => "every fault".to_string(),
        Event::PageFaults => {
            format!("every {period}th fault; {name}@1 samples every fault")
        }
        _ if period == 1 => "at every sample".to_string(),
        _ => format!("at every {period}th sample"),
    };
    Some(format!("default: {name}@{period} ({what})"))
}

fn render(list: &[Availability]) -> String {
    let mut out = String::new();
    for a in list {
        match &a.missing {
            None => {
                out.push_str(&format!("{:<12} available      {}\n", a.name, a.what));
                if let Some(via) = &a.via {
                    out.push_str(&format!("{:<27}via: {via}\n", ""));
                }
            }
            Some((why, fix)) => out.push_str(&format!(
                "{:<12} not available  {}\n{:<27}why: {why}\n{:<27}fix: {fix}\n",
                a.name, a.what, "", ""
            )),
        }
        if let Some(line) = default_line(a.name) {
            out.push_str(&format!("{:<27}{line}\n", ""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(devices: &[&str], paranoid: &str, cpuinfo: &str) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        for (i, d) in devices.iter().enumerate() {
            let dev = dir.0.join("sys/bus/event_source/devices").join(d);
            std::fs::create_dir_all(&dev).unwrap();
            std::fs::write(dev.join("type"), format!("{}\n", 20 + i)).unwrap();
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
        let list = probe_with(&dir.0, |_| panic!("nothing to open"));
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
        let list = probe_with(&dir.0, |_| panic!("nothing to open"));
        let (why, fix) = list[0].missing.clone().unwrap();
        assert!(why.contains("perf_event_paranoid is 3"), "{why}");
        assert!(fix.contains("sysctl"));
    }

    #[test]
    fn probe_amd_ibs_is_recognised() {
        let dir = fixture(&["software", "ibs_op", "cpu"], "1", "flags\t: fpu\n");
        let latency = probe_with(&dir.0, |_| Ok(()))
            .into_iter()
            .find(|a| a.name == "mem:latency")
            .unwrap();
        assert_eq!(latency.missing, None);
        let via = latency.via.unwrap();
        assert!(via.contains("amd-ibs PMU ibs_op (type 21"), "{via}");
        // The kernel refuses it: the errno is the reason.
        let latency = probe_with(&dir.0, |_| Err(16))
            .into_iter()
            .find(|a| a.name == "mem:latency")
            .unwrap();
        let (why, fix) = latency.missing.unwrap();
        assert!(why.contains("errno 16"), "{why}");
        assert!(fix.contains("another tool"), "{fix}");
        // paranoid 2 for a user: IBS without swfilt would include kernel
        // samples, which needs 1.
        let dir = fixture(&["software", "ibs_op"], "2", "flags\t: fpu\n");
        let (why, _) = probe_with(&dir.0, |_| Ok(()))[2].missing.clone().unwrap();
        assert!(why.contains("perf_event_paranoid is 2"), "{why}");
    }

    /// A root whose sysfs devices are one of the `hpcrun-abi` fixture trees.
    fn root_with_devices(tree: &str, paranoid: &str) -> tempdir::Dir {
        let dir = fixture(&[], paranoid, "flags\t: fpu\n");
        let devices = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("abi/tests/fixtures/sysfs")
            .join(tree);
        std::fs::create_dir_all(dir.0.join("sys/bus/event_source")).unwrap();
        std::os::unix::fs::symlink(devices, dir.0.join("sys/bus/event_source/devices")).unwrap();
        dir
    }

    #[test]
    fn list_intel_pebs_with_the_attrs_from_sysfs() {
        let dir = root_with_devices("intel", "2");
        let mut tried = Vec::new();
        let list = probe_with(&dir.0, |a| {
            tried.push(a.precise_ip);
            if a.precise_ip == 3 {
                Err(95)
            } else {
                Ok(())
            }
        });
        assert_eq!(tried, [3, 2, 3, 2]);
        let latency = list.iter().find(|a| a.name == "mem:latency").unwrap();
        assert_eq!(latency.missing, None);
        assert_eq!(
            latency.via.as_deref(),
            Some("intel-pebs PMU cpu (type 4, config 0x1cd, config1 0x1e, config2 0x0), precise_ip 2")
        );
        let stores = list.iter().find(|a| a.name == "mem:stores").unwrap();
        assert!(stores.via.as_deref().unwrap().contains("config 0x82d0"));
    }

    #[test]
    fn list_shows_the_default_periods() {
        let dir = fixture(
            &["breakpoint", "msr", "software", "tracepoint", "uprobe"],
            "2",
            "flags\t: fpu hypervisor\n",
        );
        let text = render(&probe_with(&dir.0, |_| panic!("nothing to open")));
        assert!(
            text.contains(
                "default: page-faults@256 (every 256th fault; page-faults@1 samples every fault)"
            ),
            "{text}"
        );
        assert!(
            text.contains("default: mem:soft@2000000 (every 2000000 ns = 2 ms"),
            "{text}"
        );
    }

    #[test]
    fn list_on_a_vm_says_why_and_the_fix() {
        let dir = fixture(
            &["breakpoint", "msr", "software", "tracepoint", "uprobe"],
            "2",
            "flags\t: fpu hypervisor\n",
        );
        let text = render(&probe_with(&dir.0, |_| panic!("nothing to open")));
        for name in ["mem:latency", "mem:stores"] {
            let line = text.lines().position(|l| l.starts_with(name)).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert!(lines[line].contains("not available"), "{text}");
            assert!(lines[line + 1].contains("why: no hardware PMU"), "{text}");
            assert!(lines[line + 1].contains("virtual machine"), "{text}");
            assert!(lines[line + 2].contains("fix: run on bare metal"), "{text}");
        }
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
        let (c, _) = choose(&["mem:soft@100000".into()], false).unwrap();
        assert_eq!(c[0].period, 100000);
        assert!(choose(&["mem:soft@x".into()], false).is_err());
        assert!(choose(&["mem:soft@0".into()], false).is_err());
        // The floor: refused below, accepted at it, named in the list.
        let floor = hpcrun_abi::event::MIN_TIMER_PERIOD_NS;
        for spec in ["mem:soft@1", "mem:soft@19999", "cpu-time@5000"] {
            let e = choose(&[spec.into()], false).unwrap_err().to_string();
            assert!(e.contains(&format!("floor of {floor} ns")), "{e}");
        }
        assert_eq!(
            choose(&[format!("mem:soft@{floor}")], false).unwrap().0[0].period,
            floor
        );
        let listed = render(&probe_with(std::path::Path::new("/nonexistent"), |_| {
            Err(0)
        }));
        for name in ["mem:soft", "cpu-time"] {
            let line = listed
                .lines()
                .find(|l| l.contains(&format!("default: {name}@")))
                .unwrap();
            assert!(line.contains(&format!("at least {floor} ns")), "{line}");
        }
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
        let (c, notes) = choose(&["mem:soft@200000".into(), "page-faults".into()], false).unwrap();
        assert_eq!(env_value(&c), "mem:soft@200000,page-faults@256");
        assert!(notes.is_empty());
        let (c, _) = choose(&["page-faults@8".into()], false).unwrap();
        assert_eq!(env_value(&c), "page-faults@8");
        let (c, notes) = choose(&["mem:soft,cpu-time".into()], false).unwrap();
        assert_eq!(env_value(&c), format!("mem:soft@{DEFAULT_SOFT_PERIOD_NS}"));
        assert!(notes[0].contains("only one timer source"), "{notes:?}");
        let (_, notes) = choose(&["page-faults".into(), "page-faults@8".into()], false).unwrap();
        assert!(
            notes[0].contains("page-faults is given more than once"),
            "{notes:?}"
        );
        let e = choose(&["mem:soft@99999999999999999999".into()], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("too large"), "{e}");
    }
}
