//! Criterion benchmark of the in-process merge (`hpcprof_rs::merge::merge`,
//! then `hpcprof_rs::name::name_objects`) on synthetic profiles, for
//! quick comparisons of merge-code changes; the end-to-end numbers (files,
//! real binary, memory) come from `bench-merge`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn merge(c: &mut Criterion) {
    let cfg = benches::Config {
        threads: 64,
        ranks: 4,
        ..benches::Config::default()
    };
    let prog = benches::program(&cfg);
    let profiles: Vec<_> = (0..cfg.threads)
        .map(|t| benches::generate_with(&cfg, &prog, t))
        .collect();
    let bytes: u64 = profiles
        .iter()
        .map(|p| p.to_bytes().map_or(0, |b| b.len() as u64))
        .sum();
    let wrappers = hpcprof_rs::name::Wrappers::default();
    let mut group = c.benchmark_group("merge");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.bench_function("64 threads, 4 ranks, in memory", |b| {
        b.iter(|| {
            let mut merged = hpcprof_rs::merge::merge(&profiles, Vec::new());
            let db = &mut merged.db;
            hpcprof_rs::name::name_objects(
                &mut db.objects,
                &db.frames,
                &merged.alloc_paths,
                &wrappers,
            );
            merged
        })
    });
    group.finish();
}

criterion_group!(benches, merge);
criterion_main!(benches);
