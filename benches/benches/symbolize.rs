//! Symbolisation in hpcprof-rs: addr2line lookups of N addresses in real
//! binaries with DWARF.
//!
//! Two modules: `examples/abc` compiled with `gcc -O2 -g` (small C program)
//! and this benchmark's own executable (a large Rust binary with criterion
//! and the hpcprof-rs library, line tables and inlining, `debug = 1`). The
//! addresses are taken from the `.symtab` function symbols (start + 1/3 of
//! the function, spread over the whole text), so that every lookup hits
//! real code.
//!
//! * `symbolize/resolve_all/<module>/<N>`: the batch API, cold: open the
//!   module (parse ELF, DWARF sections), then resolve N addresses with their
//!   inline chains (what one merge does per module);
//! * `symbolize/symbolizer/<module>/<N>`: the streaming `Symbolizer` of
//!   the merge, cold (new symboliser each time: loader, chain cache and
//!   frame interning included);
//! * `symbolize/symbolizer_cached/<module>`: an address already resolved
//!   (the cache hit every later profile of a merge sees).
//!
//! `cargo bench -p benches --bench symbolize`. Needs gcc.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use hpcprof_rs::symbolize::{resolve_all, Loc, ModuleRequest, Symbolizer};
use object::{Object, ObjectSymbol, SymbolKind};

/// Compiles examples/abc/abc.c into a temporary directory.
fn abc() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = std::env::temp_dir().join(format!("bench-symbolize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("abc");
    let status = Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&out)
        .arg(root.join("examples/abc/abc.c"))
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed");
    out
}

/// `n` addresses inside the module's functions (file virtual addresses),
/// spread over all of them.
fn addresses(path: &Path, n: usize) -> Vec<u64> {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut functions: Vec<(u64, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .map(|s| (s.address(), s.size()))
        .collect();
    functions.sort_unstable();
    functions.dedup();
    assert!(!functions.is_empty(), "no functions in {}", path.display());
    (0..n)
        .map(|i| {
            let (start, size) = functions[i * functions.len() / n.max(1) % functions.len()];
            // Distinct addresses even when n exceeds the functions.
            start + (size / 3 + (i / functions.len()) as u64) % size
        })
        .collect()
}

fn symbolize(c: &mut Criterion) {
    let abc = abc();
    let exe = std::env::current_exe().unwrap();
    let modules = [("abc_c", abc.clone()), ("rust_bench_exe", exe)];
    let mut group = c.benchmark_group("symbolize");
    group.sample_size(10);
    for (name, path) in &modules {
        let path_str = path.to_str().unwrap().to_string();
        for n in [100usize, 1_000, 10_000] {
            let addrs = addresses(path, n);
            let request = vec![ModuleRequest {
                path: path_str.clone(),
                build_id: None,
                addrs: addrs.clone(),
            }];
            // Sanity: the lookups find functions with lines.
            let resolved = resolve_all(&request);
            let with_lines = resolved[0]
                .frames
                .values()
                .filter(|chain| chain.iter().any(|f| f.line.is_some()))
                .count();
            assert!(
                with_lines * 2 > resolved[0].frames.len(),
                "{name}: only {with_lines} of {} addresses have lines",
                resolved[0].frames.len()
            );
            group.bench_with_input(
                BenchmarkId::new(format!("resolve_all/{name}"), n),
                &request,
                |b, request| b.iter(|| resolve_all(black_box(request))),
            );
            group.bench_with_input(
                BenchmarkId::new(format!("symbolizer/{name}"), n),
                &addrs,
                |b, addrs| {
                    b.iter_batched(
                        Symbolizer::default,
                        |s| {
                            let m = s.module_id(&path_str, None);
                            for &a in addrs {
                                black_box(s.chain(Loc::Module(m, a)));
                            }
                            s
                        },
                        BatchSize::PerIteration,
                    )
                },
            );
        }
        let s = Symbolizer::default();
        let m = s.module_id(&path_str, None);
        let addr = addresses(path, 1)[0];
        s.chain(Loc::Module(m, addr));
        group.bench_function(BenchmarkId::new("symbolizer_cached", name), |b| {
            b.iter(|| s.chain(black_box(Loc::Module(m, addr))))
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(abc.parent().unwrap());
}

criterion_group!(benches, symbolize);
criterion_main!(benches);
