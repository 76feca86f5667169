//! Unknown addresses explained: memory the profiler tracks no object for
//! (the vDSO, glibc's chunk headers in the brk heap, an anonymous and a
//! file mapping made by raw `mmap` system calls that the hooks do not
//! see, memory unmapped before exit) is one `<unknown address: ...>` row
//! per kind, named from the memory map soon after its first sample (or
//! when the profile is written); nothing is left as the plain `<unknown
//! address>`. Memory unmapped long before exit is named by what it was
//! while mapped.

use pipeline_tests::*;

/// The `<unknown address...>` rows of a data view.
fn unknown_rows(data: &serde_json::Value) -> Vec<&serde_json::Value> {
    data["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| {
            o["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("<unknown address"))
        })
        .collect()
}

#[test]
fn unknown_addresses_are_named_by_what_was_mapped_there() {
    let dir = scratch("unknown-addresses");
    let exe = compile_test_program("unknown_addresses.c", &dir, &["-Wall", "-Werror"]);
    let arg = dir.to_string_lossy().into_owned();
    let p = profile_same_output(&dir, "mem:soft@500000", &exe, &[&arg]);
    let data = export_json(&p.db, "data");
    let unknown = unknown_rows(&data);
    let row = |what: &str, pred: &dyn Fn(&str) -> bool| -> &serde_json::Value {
        let found: Vec<&&serde_json::Value> = unknown
            .iter()
            .filter(|o| o["name"].as_str().is_some_and(pred))
            .collect();
        assert_eq!(found.len(), 1, "{what}: {found:#?}\nall: {unknown:#?}");
        found[0]
    };
    let rows = [
        (
            "vdso",
            row("vdso", &|n| n == "<unknown address: [vdso]/[vvar]>"),
        ),
        (
            "malloc metadata",
            row("malloc metadata", &|n| {
                n == "<unknown address: [heap] outside any block (malloc metadata)>"
            }),
        ),
        (
            "raw anonymous mapping",
            row("raw anonymous mapping", &|n| {
                n.starts_with("<unknown address: anonymous mapping not tracked (")
            }),
        ),
        (
            "raw file mapping",
            row("raw file mapping", &|n| {
                n.starts_with("<unknown address: file mapping /") && n.ends_with("/raw.bin>")
            }),
        ),
        (
            "unmapped",
            row("unmapped", &|n| {
                n == "<unknown address: not mapped at exit>"
            }),
        ),
    ];
    // Each phase reads its memory for about 0.1-0.2 s of CPU time: 200
    // periods or more at 0.5 ms.
    for (what, o) in rows {
        assert_eq!(o["kind"], "unknown", "{what}: {o:#}");
        assert!(samples(o) >= 20, "{what}: {} samples\n{o:#}", samples(o));
    }
    // Every unknown address was named: no plain `<unknown address>` row
    // has samples.
    assert!(
        !unknown
            .iter()
            .any(|o| o["name"] == "<unknown address>" && samples(o) > 0),
        "{unknown:#?}"
    );
    // The measurement files keep the region's first sampled address: the
    // raw mappings are where the program asked for them.
    let regions: Vec<_> = read_profiles(&p.measurements)
        .into_iter()
        .flat_map(|t| t.unknown_regions)
        .collect();
    for (label, start) in [
        ("anonymous mapping not tracked", 0x2000_0000_0000u64),
        ("file mapping", 0x2100_0000_0000),
        ("not mapped at exit", 0x2200_0000_0000),
    ] {
        assert!(
            regions
                .iter()
                .filter(|r| r.label.starts_with(label))
                .all(|r| r.address >= start && r.address < start + (8 << 20)),
            "{label}: {regions:#?}"
        );
    }
}

/// Memory mapped by raw system calls, gone when the profile is written,
/// is named by what it was while mapped: in a single-threaded program at
/// its next allocation or when it unmaps memory through libc, in a
/// multi-threaded one by the checkpoint helper thread (`mode`: `alloc`,
/// `unmap` or `thread`, see tests/programs/unmapped_early.c). Before this, all its samples were
/// `<unknown address: not mapped at exit>`.
fn memory_unmapped_early_is_named_by_what_it_was(mode: &str) {
    let dir = scratch(&format!("unmapped-early-{mode}"));
    let exe = compile_test_program("unmapped_early.c", &dir, &["-Wall", "-Werror", "-pthread"]);
    let p = profile_same_output(&dir, "mem:soft@500000", &exe, &[mode]);
    let data = export_json(&p.db, "data");
    let unknown = unknown_rows(&data);
    let samples_of = |pred: &dyn Fn(&str) -> bool| -> u64 {
        unknown
            .iter()
            .filter(|o| o["name"].as_str().is_some_and(pred))
            .map(|o| samples(o))
            .sum()
    };
    let anon = samples_of(&|n| n.starts_with("<unknown address: anonymous mapping not tracked ("));
    let sysv = samples_of(&|n| {
        n.starts_with("<unknown address: System V shared memory (IPC_PRIVATE) not tracked (")
    });
    let gone = samples_of(&|n| n == "<unknown address: not mapped at exit>");
    // Each phase reads its 2 MiB for about 0.3 s of CPU time: 600
    // periods at 0.5 ms (fewer on a loaded machine, never under 20).
    // Every sample of a region shares its name, given within a pass over
    // the memory (alloc), before the unmapping (unmap) or within 50 ms
    // (thread) of its first sample: none is left unnamed, whatever the
    // load.
    assert!(anon >= 20, "anonymous: {anon} samples\n{unknown:#?}");
    assert!(sysv >= 20, "System V: {sysv} samples\n{unknown:#?}");
    assert!(
        gone * 20 <= anon + sysv,
        "not mapped at exit: {gone} samples against {} named\n{unknown:#?}",
        anon + sysv
    );
    // The measurement files name the regions where the program mapped
    // them.
    let regions: Vec<_> = read_profiles(&p.measurements)
        .into_iter()
        .flat_map(|t| t.unknown_regions)
        .collect();
    for (start, label) in [
        (0x2300_0000_0000u64, "anonymous mapping not tracked"),
        (0x2400_0000_0000, "System V shared memory (IPC_PRIVATE)"),
    ] {
        let here: Vec<_> = regions
            .iter()
            .filter(|r| r.address >= start && r.address < start + (2 << 20))
            .collect();
        assert!(
            !here.is_empty() && here.iter().all(|r| r.label.starts_with(label)),
            "{label}: {regions:#?}"
        );
    }
}

#[test]
fn memory_unmapped_early_is_named_in_a_program_that_allocates() {
    memory_unmapped_early_is_named_by_what_it_was("alloc");
}

#[test]
fn memory_unmapped_early_is_named_by_the_helper_thread() {
    memory_unmapped_early_is_named_by_what_it_was("thread");
}

#[test]
fn memory_unmapped_early_is_named_when_libc_unmaps_it() {
    memory_unmapped_early_is_named_by_what_it_was("unmap");
}
