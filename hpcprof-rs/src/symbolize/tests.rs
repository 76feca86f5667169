use super::*;

#[test]
fn demangles_rust_and_cpp() {
    assert_eq!(
        demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
        "core::ptr::drop_in_place"
    );
    assert_eq!(demangle("_Z3fooi"), "foo(int)");
    assert_eq!(demangle("main"), "main");
    assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
}

#[test]
fn unreadable_module_gives_offset_frames() {
    let req = ModuleRequest {
        path: "/nonexistent/libfoo.so".into(),
        build_id: None,
        addrs: vec![0x1234],
    };
    let r = resolve_module(&req);
    assert_eq!(r.warnings.len(), 1);
    let f = &r.frames[&0x1234];
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].function, "libfoo.so+0x1234");
    assert!(!f[0].inlined);
}

#[test]
fn pseudo_module_is_quiet() {
    for path in ["[vdso]", "linux-vdso.so.1"] {
        let req = ModuleRequest {
            path: path.into(),
            build_id: None,
            addrs: vec![0x10],
        };
        let r = resolve_module(&req);
        assert!(r.warnings.is_empty());
        assert_eq!(r.frames[&0x10][0].function, format!("{path}+0x10"));
    }
}

/// A file address inside the function of this test binary whose
/// demangled name ends with `suffix`.
fn address_of(exe: &str, suffix: &str) -> u64 {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = file
        .symbols()
        .find(|s| s.name().is_ok_and(|n| demangle(n).ends_with(suffix)))
        .unwrap_or_else(|| panic!("no symbol {suffix}"));
    sym.address() + 4
}

#[test]
fn an_idle_module_is_closed_and_opened_again_on_demand() {
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    let a = address_of(exe, "symbolize::build_id_from_head");
    let b = address_of(exe, "symbolize::file_crc32");
    let s = Symbolizer::default();
    let m = s.module_id(exe, None);
    let open = |s: &Symbolizer| {
        let slot = lock(&s.modules).1[m as usize].clone();
        let open = matches!(lock(&slot.loader).loader, Some(Some(_)));
        open
    };
    let first = s.chain(Loc::Module(m, a));
    assert!(open(&s));
    s.profile_done(); // this profile looked up: stays open
    let idle = |s: &Symbolizer, profiles: u32| (0..profiles).for_each(|_| s.profile_done());
    idle(&s, FIRST_PATIENCE - 1);
    assert!(open(&s));
    idle(&s, 1);
    assert!(!open(&s), "closed after FIRST_PATIENCE idle profiles");
    let second = s.chain(Loc::Module(m, b));
    assert!(open(&s), "opened again");
    // A resolved address is not looked up again.
    assert_eq!(s.chain(Loc::Module(m, a)), first);
    // Patience doubled.
    s.profile_done();
    idle(&s, 2 * FIRST_PATIENCE - 1);
    assert!(open(&s));
    idle(&s, 1);
    assert!(!open(&s));
    let (frames, warnings) = s.finish();
    assert!(warnings.is_empty(), "{warnings:?}");
    let name = |chain: &[u32]| frames.list[chain[0] as usize].function.clone();
    assert!(
        name(&first).contains("build_id_from_head"),
        "{}",
        name(&first)
    );
    assert!(name(&second).contains("file_crc32"), "{}", name(&second));
}

#[test]
fn symbolises_this_test_binary() {
    // The test binary itself has debug info: resolve the address of a
    // function of ours and expect this file.
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap().to_string();
    let addr = address_of(&exe, "symbolize::build_id_from_head");
    let r = resolve_module(&ModuleRequest {
        path: exe,
        build_id: None,
        addrs: vec![addr],
    });
    let chain = &r.frames[&addr];
    let outer = &chain[0];
    assert!(!outer.inlined);
    assert!(
        outer.function.contains("build_id_from_head"),
        "{}",
        outer.function
    );
    assert!(outer
        .file
        .as_deref()
        .unwrap_or("")
        .ends_with("symbolize.rs"));
    assert!(chain[1..].iter().all(|f| f.inlined));
}

#[test]
fn reads_build_id_of_this_binary_or_none() {
    // Must not panic on any input.
    assert_eq!(build_id_from_head(b""), None);
    assert_eq!(build_id_from_head(b"\x7fELF\x02garbage"), None);
    let _ = file_build_id(&std::env::current_exe().unwrap());
}
