//! Mapped memory as data objects: a file mapped with `mmap`, a POSIX
//! shared-memory object (`shm_open` + `mmap`) and a System V segment
//! (`shmat`) are objects named by their file (or key) that hold the
//! samples of the loops reading them, not `<unknown address>`.

use std::process::Command;

use pipeline_tests::*;

#[test]
fn mapped_files_and_shared_memory_are_named_objects() {
    let dir = scratch("mappings");
    let exe = compile_test_program("mappings.c", &dir, &["-Wall", "-Werror"]);
    let arg = dir.to_string_lossy().into_owned();
    let p = profile_same_output(&dir, "mem:soft@500000", &exe, &[&arg]);
    let data = export_json(&p.db, "data");
    let objects = data["objects"].as_array().unwrap();
    let named = |what: &str, pred: &dyn Fn(&str) -> bool| -> &serde_json::Value {
        let found: Vec<&serde_json::Value> = objects
            .iter()
            .filter(|o| o["name"].as_str().is_some_and(pred))
            .collect();
        assert_eq!(found.len(), 1, "{what}: {found:#?}\nall: {objects:#?}");
        found[0]
    };
    let input_path = format!("{arg}/input.bin");
    let input = named("file", &|n| n == input_path || n.ends_with("/input.bin"));
    let posix = named("POSIX shm", &|n| n.starts_with("/dev/shm/hpcrun-mappings-"));
    let sysv = named("System V shm", &|n| n.starts_with("SysV shm id "));
    // Each region is summed 120 times over 8 MiB (about 0.1 s of CPU
    // time each, 200 periods at 0.5 ms): every one has samples.
    for (what, o) in [
        ("file", input),
        ("POSIX shm", posix),
        ("System V shm", sysv),
    ] {
        assert_eq!(o["kind"], "heap", "{what}: {o:#}");
        assert!(samples(o) >= 20, "{what}: {} samples\n{o:#}", samples(o));
    }
    // Named by the whole path when it fits the 63-byte label.
    if input_path.len() <= 63 {
        assert_eq!(input["name"].as_str(), Some(input_path.as_str()));
    }
}

/// An address in a module's data that no symbol covers (a stripped
/// executable's static array) is the data section's object, named after
/// the section and the module, not `<unknown address>`; its code is
/// grouped by the unwind table's function ranges.
#[test]
fn static_data_without_a_symbol_is_its_section() {
    let dir = scratch("stripped-static");
    let exe = compile_test_program("stripped_static.c", &dir, &["-s"]);
    let native = ok_stdout(&run(&mut Command::new(&exe)), "native stripped_static");
    let p = profile(&dir, "mem:soft@500000", &exe, &[]);
    assert_eq!(
        p.program_stdout, native,
        "output changed under the profiler"
    );
    let data = export_json(&p.db, "data");
    let objects = data["objects"].as_array().unwrap();
    let bss = objects
        .iter()
        .find(|o| o["name"] == "<.bss of stripped_static>")
        .unwrap_or_else(|| panic!("no .bss object: {objects:#?}"));
    assert_eq!(bss["kind"], "static", "{bss:#}");
    // 100 passes over 8 MiB: about 0.1 s of CPU time, 200 periods.
    assert!(samples(bss) >= 20, "{bss:#}");
    // And it has most of the program's memory samples.
    let total: u64 = objects.iter().map(samples).sum();
    assert!(samples(bss) * 2 > total, "{objects:#?}");

    // The code without symbols is one function per range of the unwind
    // table (`sum`'s loop), not a row per sampled instruction.
    let code = export_json(&p.db, "code");
    let functions = code["functions"].as_array().unwrap();
    let top = &functions[0];
    let name = top["function"].as_str().unwrap();
    assert!(
        name.starts_with("stripped_static: function at +0x"),
        "{functions:#?}"
    );
    assert!(samples(top) * 2 > total, "{functions:#?}");
    assert!(
        functions.iter().all(|f| !f["function"]
            .as_str()
            .unwrap()
            .starts_with("stripped_static+0x")),
        "{functions:#?}"
    );
}
