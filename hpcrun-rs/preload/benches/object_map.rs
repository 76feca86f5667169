//! Cost of the heap-object map: the signal handler's lookup (hit and miss)
//! and a tracked block's insert + remove, with 1,000 and 100,000 live
//! blocks, without the allocation log (the default; `--alloc-log` adds a
//! record per insert). `cargo bench -p hpcrun-preload --bench object_map`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hpcrun_preload::objects;
use std::hint::black_box;

fn object_map(c: &mut Criterion) {
    assert!(objects::init(false, 0));
    let map = objects::get().unwrap();
    let site = map.site(&[0x1000, 0x2000, 0x3000]).unwrap();
    let mut live = 0u64;
    let mut group = c.benchmark_group("object_map");
    for n in [1_000u64, 100_000] {
        // Blocks of 4 KiB at increasing addresses, as an allocator hands them out.
        while live < n {
            map.insert(0x1000_0000 + live * 8192, 4096, site, 0, 0);
            live += 1;
        }
        let mut i = 0u64;
        group.bench_with_input(BenchmarkId::new("lookup_hit", n), &n, |b, &n| {
            b.iter(|| {
                i = (i + 7919) % n;
                let r = map.lookup(black_box(0x1000_0000 + i * 8192 + 100));
                assert_eq!(r.site(), Some(site));
            })
        });
        group.bench_with_input(BenchmarkId::new("lookup_miss", n), &n, |b, &n| {
            b.iter(|| {
                i = (i + 7919) % n;
                black_box(map.lookup(black_box(0x1000_0000 + i * 8192 + 5000)))
            })
        });
        // A block allocated and freed at the top of the address range (the
        // common case: new blocks come at increasing addresses).
        let top = 0x1000_0000 + n * 8192;
        group.bench_with_input(BenchmarkId::new("insert_remove_top", n), &n, |b, _| {
            b.iter(|| {
                map.insert(black_box(top), 4096, site, 0, 0);
                map.remove(black_box(top));
            })
        });
        // The worst case: below every live block (all entries move twice).
        group.bench_with_input(BenchmarkId::new("insert_remove_bottom", n), &n, |b, _| {
            b.iter(|| {
                map.insert(black_box(0x100), 64, site, 0, 0);
                map.remove(black_box(0x100));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, object_map);
criterion_main!(benches);
