//! Unknown addresses explained: memory the profiler tracks no object for
//! (the vDSO, glibc's chunk headers in the brk heap, an anonymous and a
//! file mapping made by raw `mmap` system calls that the hooks do not
//! see, memory unmapped before exit) is one `<unknown address: ...>` row
//! per kind, named from the memory map when the profile was written;
//! nothing is left as the plain `<unknown address>`.

use pipeline_tests::*;

#[test]
fn unknown_addresses_are_named_by_what_was_mapped_there() {
    let dir = scratch("unknown-addresses");
    let exe = compile_test_program("unknown_addresses.c", &dir, &["-Wall", "-Werror"]);
    let arg = dir.to_string_lossy().into_owned();
    let p = profile_same_output(&dir, "mem:soft@500000", &exe, &[&arg]);
    let data = export_json(&p.db, "data");
    let objects = data["objects"].as_array().unwrap();
    let unknown: Vec<&serde_json::Value> = objects
        .iter()
        .filter(|o| {
            o["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("<unknown address"))
        })
        .collect();
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
