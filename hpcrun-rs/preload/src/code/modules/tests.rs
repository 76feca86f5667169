//! Unit tests of the module tables: static variables by address (and
//! their data-section fallback), whose code a module is, segment
//! lookups, the cache's lookup by bias, path and segments, and the
//! loaded images' build ids and unwind sections against their files.

use super::*;

#[test]
fn addresses_without_a_symbol_fall_back_to_their_data_section() {
    let sym = |start: u64, end: u64, name: &str| Symbol {
        start,
        end,
        name: name.into(),
    };
    let m = Arc::try_unwrap(module("/lib/libx.so", vec![(0x1000, 0x9000, false)], false)).unwrap();
    let m = ModuleData::with_symbols(
        m.info,
        Symbols {
            statics: vec![
                sym(0x5000, 0x5100, "counter"),
                sym(0x4000, 0x6000, "<.bss of libx.so>"),
            ],
            sorted_statics: 1,
            functions: vec![],
        },
    );
    let snap = Snapshot::new(vec![(7, Arc::new(m))]);
    assert_eq!(snap.static_at(0x5010), Some((7, 0, 0x5000, 0x5100)));
    assert_eq!(snap.static_at(0x5800), Some((7, 1, 0x4000, 0x6000)));
    assert_eq!(snap.static_at(0x7000), None);
}

fn module(path: &str, segments: Vec<(u64, u64, bool)>, is_self: bool) -> Arc<ModuleData> {
    Arc::new(ModuleData::with_symbols(
        ModuleInfo {
            path: path.into(),
            bias: 0,
            build_id: None,
            segments,
            sections: UnwindSections::default(),
            is_self,
            owner: match is_self {
                true => CodeOwner::System,
                false => CodeOwner::Program,
            },
        },
        Symbols {
            statics: vec![],
            sorted_statics: 0,
            functions: vec![(0x1000, 0x1100), (0x1100, 0x1180)],
        },
    ))
}

#[test]
fn modules_are_the_programs_a_runtimes_or_the_systems() {
    for program in [
        "/usr/bin/lmp",
        "/usr/lib/x86_64-linux-gnu/liblammps.so.0",
        "/work/app",
    ] {
        assert_eq!(owner_of_module(program), CodeOwner::Program, "{program}");
    }
    for runtime in [
        "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40",
        "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so",
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1",
        "/usr/lib/x86_64-linux-gnu/libmpich.so.12",
    ] {
        assert_eq!(owner_of_module(runtime), CodeOwner::Runtime, "{runtime}");
    }
    for cxx in [
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/usr/lib/llvm-16/lib/libc++.so.1",
    ] {
        assert_eq!(owner_of_module(cxx), CodeOwner::CxxRuntime, "{cxx}");
    }
    for lib in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libhwloc.so.15",
        "",
    ] {
        assert_eq!(owner_of_module(lib), CodeOwner::System, "{lib}");
    }
}

#[test]
fn address_lookups_find_the_right_segment() {
    // Listed out of address order, the way the loader reports them.
    let snap = Snapshot::new(vec![
        (
            0,
            module(
                "exe",
                vec![(0x1000, 0x2000, true), (0x3000, 0x4000, false)],
                false,
            ),
        ),
        (1, module("lib", vec![(0x8000, 0x9000, true)], true)),
        (
            2,
            module(
                "lib2",
                vec![(0x5000, 0x6000, false), (0x6000, 0x7000, true)],
                false,
            ),
        ),
    ]);
    assert_eq!(snap.exec_segment(0x1000), Some((0x1000, 0x2000)));
    assert_eq!(snap.exec_segment(0x1fff), Some((0x1000, 0x2000)));
    assert_eq!(snap.exec_segment(0x2000), None);
    assert_eq!(snap.exec_segment(0x3500), None, "not executable");
    assert_eq!(snap.exec_segment(0x6000), Some((0x6000, 0x7000)));
    assert_eq!(snap.exec_segment(0x5fff), None);
    assert_eq!(snap.exec_segment(0x10), None);
    assert_eq!(snap.exec_segment(0xffff_ffff), None);
    assert!(snap.is_own_code(0x8800));
    assert!(!snap.is_own_code(0x1800));
    assert_eq!(snap.module_containing(0x3800).map(|m| m.0), Some(0));
    assert_eq!(snap.module_containing(0x5800).map(|m| m.0), Some(2));
    assert_eq!(snap.function_start(0x1150), Some(0x1100));
    assert_eq!(snap.function_start(0x1190), None);
}

/// A module is found again by its bias, path and segments; a module
/// loaded later at the same bias (after a dlclose) is a new one.
#[test]
fn the_cache_finds_modules_by_bias_path_and_segments() {
    let loaded = |path: &str, bias: u64, end: u64| LoadedModule {
        path: path.into(),
        bias,
        segments: vec![(bias, end, true)],
        eh_frame_hdr: None,
        notes: Vec::new(),
    };
    let data = |l: &LoadedModule| {
        ModuleData::with_symbols(
            ModuleInfo {
                path: l.path.clone(),
                bias: l.bias,
                build_id: None,
                segments: l.segments.clone(),
                sections: UnwindSections::default(),
                is_self: false,
                owner: CodeOwner::Program,
            },
            Symbols::default(),
        )
    };
    let mut cache = Cache {
        modules: Vec::new(),
        by_bias: BTreeMap::new(),
    };
    let a = loaded("/lib/a.so", 0x7000_0000, 0x7000_1000);
    let b = loaded("/lib/b.so", 0x7100_0000, 0x7100_2000);
    assert_eq!(cache.find(&a), None);
    let ida = cache.add(data(&a));
    let idb = cache.add(data(&b));
    assert_eq!(cache.find(&a), Some(ida));
    assert_eq!(cache.find(&b), Some(idb));
    // Same bias, another library or another size: not the same module.
    let c = loaded("/lib/c.so", 0x7000_0000, 0x7000_1000);
    let a2 = loaded("/lib/a.so", 0x7000_0000, 0x7000_3000);
    assert_eq!(cache.find(&c), None);
    assert_eq!(cache.find(&a2), None);
    let idc = cache.add(data(&c));
    assert_eq!(cache.find(&c), Some(idc));
    assert_eq!(cache.find(&a), Some(ida));
}

/// The loaded image gives every module of this process the build id
/// and unwind header its file gives, and an `.eh_frame` at the same
/// address that covers the file's, inside a text range that covers
/// the file's `.text`.
#[test]
fn loaded_images_give_what_their_files_give() {
    let mut compared = 0;
    for loaded in sys::loaded_modules() {
        if loaded.path.is_empty() || loaded.path.starts_with("linux-vdso") {
            continue;
        }
        let Some(mapped) = sys::MappedFile::open(&loaded.path) else {
            continue;
        };
        let file = object::File::parse(mapped.bytes()).unwrap();
        let (file_id, file_sections) = file_facts(&file);
        let (id, sections) = elf_image::facts(&loaded).expect(&loaded.path);
        let path = &loaded.path;
        assert_eq!(id.map(|id| hex(&id)), file_id, "{path}");
        assert_eq!(sections.eh_frame_hdr, file_sections.eh_frame_hdr, "{path}");
        if let Some((start, end)) = file_sections.eh_frame_hdr.and(file_sections.eh_frame) {
            let (s, e) = sections.eh_frame.expect(path);
            assert!(
                s == start && e >= end,
                "{path}: {s:x}-{e:x} {start:x}-{end:x}"
            );
        }
        if let (Some((start, end)), Some(_)) = (file_sections.text, sections.eh_frame_hdr) {
            let (s, e) = sections.text.expect(path);
            assert!(
                s <= start && e >= end,
                "{path}: {s:x}-{e:x} {start:x}-{end:x}"
            );
        }
        compared += 1;
    }
    // The test program, the C library and the loader at least.
    assert!(compared >= 3, "{compared} modules compared");
}
