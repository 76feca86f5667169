//! Tests of PMU discovery from sysfs: the format and event-term parsing,
//! the events chosen on Intel (also hybrid), AMD IBS, Arm SPE and a VM
//! without a PMU (fixture trees), and errors, not panics, on garbage.

use super::*;

use crate::pmu::fixture;

#[test]
fn formats() {
    let f = Format::parse("config:0-7\n").unwrap();
    assert_eq!((f.word, f.mask, f.width()), (ConfigWord::Config, 0xff, 8));
    let f = Format::parse("config1:0-15").unwrap();
    assert_eq!((f.word, f.mask), (ConfigWord::Config1, 0xffff));
    let f = Format::parse("config:32").unwrap();
    assert_eq!(f.mask, 1 << 32);
    let f = Format::parse("config:0-7,32-35").unwrap();
    assert_eq!(f.mask, 0xf_0000_00ff);
    // Scattered: value bits 0-7 go to 0-7, bits 8-11 to 32-35.
    assert_eq!(f.place(0x1cd), Some(0x1_0000_00cd));
    assert_eq!(f.place(0x1000), None, "13 bits do not fit in 12");
    let f = Format::parse("config2:0-63").unwrap();
    assert_eq!((f.mask, f.place(u64::MAX)), (u64::MAX, Some(u64::MAX)));
    for bad in [
        "",
        "config",
        "config:",
        "config:x",
        "config:64",
        "config:7-0",
        "config9:0",
        "config:0-7,",
    ] {
        assert!(Format::parse(bad).is_err(), "'{bad}'");
    }
}

#[test]
fn terms() {
    assert_eq!(
        parse_terms("event=0xcd,umask=0x1,ldlat=3\n").unwrap(),
        [
            ("event".to_string(), 0xcd),
            ("umask".to_string(), 1),
            ("ldlat".to_string(), 3)
        ]
    );
    assert_eq!(parse_terms("any").unwrap(), [("any".to_string(), 1)]);
    for bad in [
        "",
        "event=",
        "event=0xzz",
        "=3",
        "a,,b",
        "ev ent=1",
        "event=-1",
    ] {
        assert!(parse_terms(bad).is_err(), "'{bad}'");
    }
}

#[test]
fn intel_mem_loads_with_ldlat_30_and_mem_stores() {
    let dir = fixture("intel");
    let a = mem_event_attr(&dir, MemEvent::Latency, DEFAULT_LDLAT).unwrap();
    assert_eq!(
        a,
        HwAttr {
            event: MemEvent::Latency,
            vendor: Vendor::IntelPebs,
            pmu: "cpu".into(),
            type_: 4,
            config: 0x01cd,
            config1: 30,
            config2: 0,
            config3: 0,
            aux_leader: None,
            exclude_kernel: true,
            precise_ip: 0,
        }
    );
    assert_eq!(a.precise_candidates(), [3, 2, 1]);
    let s = mem_event_attr(&dir, MemEvent::Stores, DEFAULT_LDLAT).unwrap();
    assert_eq!((s.type_, s.config, s.config1), (4, 0x82d0, 0));
    // Another threshold.
    let a = mem_event_attr(&dir, MemEvent::Latency, 100).unwrap();
    assert_eq!(a.config1, 100);
    // ldlat is 16 bits wide.
    assert!(matches!(
        mem_event_attr(&dir, MemEvent::Latency, 70_000),
        Err(Unsupported::Sysfs(_))
    ));
}

#[test]
fn intel_hybrid_uses_cpu_core_with_the_aux_leader() {
    let dir = fixture("intel_hybrid");
    let a = mem_event_attr(&dir, MemEvent::Latency, DEFAULT_LDLAT).unwrap();
    assert_eq!(a.pmu, "cpu_core");
    assert_eq!((a.type_, a.config, a.config1), (4, 0x01cd, 30));
    assert_eq!(a.aux_leader, Some(0x8203));
    let s = mem_event_attr(&dir, MemEvent::Stores, DEFAULT_LDLAT).unwrap();
    assert_eq!((s.config, s.aux_leader), (0x02cd, None));
}

#[test]
fn amd_ibs_op() {
    let dir = fixture("amd");
    for event in [MemEvent::Latency, MemEvent::Stores] {
        let a = mem_event_attr(&dir, event, DEFAULT_LDLAT).unwrap();
        assert_eq!(
            a,
            HwAttr {
                event,
                vendor: Vendor::AmdIbs,
                pmu: "ibs_op".into(),
                type_: 11,
                config: 1 << 19,
                config1: 0,
                config2: 1,
                config3: 0,
                aux_leader: None,
                exclude_kernel: true,
                precise_ip: 0,
            }
        );
        assert_eq!(a.precise_candidates(), [0]);
    }
    // The AMD "cpu" PMU has no mem-loads: not taken for Intel.
    assert_eq!(find_memory_pmu(&dir).unwrap().0, Vendor::AmdIbs);
}

#[test]
fn arm_spe_filters_and_min_latency() {
    let dir = fixture("arm");
    let a = mem_event_attr(&dir, MemEvent::Latency, DEFAULT_LDLAT).unwrap();
    assert_eq!(a.pmu, "arm_spe_0");
    assert_eq!(a.type_, 9);
    // ts_enable (0) | jitter (16) | load_filter (33)
    assert_eq!(a.config, 1 | 1 << 16 | 1 << 33);
    assert_eq!((a.config1, a.config2), (0, 30));
    assert!(a.uses_aux_area() && a.exclude_kernel);
    let s = mem_event_attr(&dir, MemEvent::Stores, DEFAULT_LDLAT).unwrap();
    assert_eq!(s.config, 1 | 1 << 16 | 1 << 34);
    assert_eq!(s.config2, 0);
    // min_latency is 12 bits: clamped.
    let a = mem_event_attr(&dir, MemEvent::Latency, 10_000).unwrap();
    assert_eq!(a.config2, 4095);
}

#[test]
fn a_vm_without_pmu() {
    let dir = fixture("vm");
    assert_eq!(
        mem_event_attr(&dir, MemEvent::Latency, DEFAULT_LDLAT),
        Err(Unsupported::NoDevice {
            devices: ["breakpoint", "msr", "software", "tracepoint", "uprobe"]
                .map(String::from)
                .to_vec()
        })
    );
    let msr = Pmu::read(&dir, "msr").unwrap();
    assert_eq!(msr.type_, 9);
    assert_eq!(msr.formats["event"].mask, u64::MAX);
    assert_eq!(
        msr.encode(&parse_terms(&msr.events["smi"]).unwrap())
            .unwrap()
            .config,
        4
    );
    // A missing directory: no PMU at all.
    assert!(matches!(
        mem_event_attr(&dir.join("nonexistent"), MemEvent::Latency, 30),
        Err(Unsupported::NoDevice { devices }) if devices.is_empty()
    ));
}

#[test]
fn pmu_files_are_read() {
    let cpu = Pmu::read(&fixture("intel"), "cpu").unwrap();
    assert_eq!(cpu.type_, 4);
    assert_eq!(cpu.formats.len(), 12);
    assert!(!cpu.events.contains_key("topdown-retiring.scale"));
    assert_eq!(cpu.events["mem-loads"], "event=0xcd,umask=0x1,ldlat=3");
    assert_eq!(cpu.caps["max_precise"], "3");
    let enc = |t: &str| cpu.encode(&parse_terms(t).unwrap()).unwrap();
    assert_eq!(enc("event=0x3c").config, 0x3c);
    assert_eq!(
        enc("config=0x1234,config1=5"),
        Config {
            config: 0x1234,
            config1: 5,
            ..Default::default()
        }
    );
    assert_eq!(enc("event=0x3c,period=2000003").config, 0x3c);
    assert_eq!(enc("in_tx,event=0xc9").config, 1 << 32 | 0xc9);
}

#[test]
fn garbage_gives_errors_not_panics() {
    let broken = fixture("broken");
    let cases = [
        ("garbage_type", "is not a PMU type number"),
        ("garbage_format", "unknown config word 'config9'"),
        ("garbage_event", "bad value 'zz' of term 'umask'"),
        ("unknown_term", "has no format term 'frobnicate'"),
        ("too_big", "does not fit in 8 bits"),
        ("reversed_range", "reversed bit range"),
    ];
    for (tree, message) in cases {
        let e = mem_event_attr(&broken.join(tree), MemEvent::Latency, 30).unwrap_err();
        match &e {
            Unsupported::Sysfs(s) => assert!(s.to_string().contains(message), "{tree}: {s}"),
            other => panic!("{tree}: {other:?}"),
        }
    }
}

#[test]
fn env_round_trip() {
    let a = mem_event_attr(&fixture("intel_hybrid"), MemEvent::Latency, 30).unwrap();
    let a = HwAttr { precise_ip: 3, ..a };
    let text = a.to_env();
    assert_eq!(
        text,
        "event=mem:latency,vendor=intel-pebs,pmu=cpu_core,type=4,config=0x1cd,config1=0x1e,config2=0x0,config3=0x0,aux_leader=0x8203,exclude_kernel=1,precise=3"
    );
    assert_eq!(HwAttr::from_env(&text), Ok(a));
    let ibs = mem_event_attr(&fixture("amd"), MemEvent::Stores, 30).unwrap();
    assert_eq!(HwAttr::from_env(&ibs.to_env()), Ok(ibs));
    for bad in [
        "",
        "event=mem:latency",
        "x",
        &text.replace("precise=3", "precise=9"),
        &text.replace("type=4", "type=z"),
    ] {
        assert!(HwAttr::from_env(bad).is_err(), "'{bad}'");
    }
}
