//! The merge on constructed profiles: object identity, histograms and
//! access sites, distributions, damaged input, and a result independent of
//! the number of workers and of how a process's files are split.

use formats::database::{DataObject, Database, Dist, NodeKind, ObjectKind};
use formats::measurement::{
    AllocSite, Cct, CctNode, EventInfo, HistogramLayout, MetricInfo, NodeKey, ObjectRef,
    ObjectStats, ProcessInfo, SampleStats, StaticVar, ThreadInfo, ThreadProfile, UnknownRegion,
};
use formats::views;

use super::*;

fn node(parent: u32, key: NodeKey, samples: u64) -> CctNode {
    CctNode {
        parent,
        key,
        metrics: vec![samples],
    }
}

fn cct(nodes: Vec<CctNode>) -> Cct {
    let mut t = Cct::default();
    t.nodes.extend(nodes);
    t
}

/// A thread of process `pid` that allocated through `main -> init`
/// (0x1000 <- 0x2000) and sampled `samples` accesses to it at 0x3000.
fn thread(pid: u32, tid: u32, index: u32, samples: u64) -> ThreadProfile {
    ThreadProfile {
        process: ProcessInfo {
            pid,
            host: "node1".into(),
            rank: Some(pid % 2),
            exe: "/bin/app".into(),
            command: vec!["./app".into()],
            run_id: "run".into(),
        },
        thread: ThreadInfo {
            tid,
            index,
            stack: (0x7000_0000, 0x7080_0000),
            ..ThreadInfo::default()
        },
        events: vec![EventInfo {
            name: "mem:soft".into(),
            period: 1000,
            unit: "ns".into(),
        }],
        metrics: vec![MetricInfo {
            name: "samples".into(),
            unit: "samples".into(),
            description: "samples".into(),
        }],
        modules: Vec::new(),
        alloc_sites: vec![
            // An unrelated site first, so that indices differ by thread.
            AllocSite {
                frames: vec![0x9000 + u64::from(index)],
                allocations: 1,
                bytes: 8,
                max_bytes: 8,
                label: None,
                ..Default::default()
            },
            AllocSite {
                frames: vec![0x1000, 0x2000],
                allocations: 3,
                bytes: 3000,
                max_bytes: 1000,
                label: None,
                ..Default::default()
            },
        ],
        statics: vec![StaticVar {
            name: "_ZN3app5TABLE17h0123456789abcdefE".into(),
            module: None,
            address: 0x5000,
            size: 64,
        }],
        code: cct(vec![
            node(0, NodeKey::Call(0x1000), 0),
            node(1, NodeKey::Call(0x3000), samples + 2),
        ]),
        heap: cct(vec![
            node(0, NodeKey::Object(ObjectRef::HeapSite(1)), 0),
            node(1, NodeKey::Call(0x1000), 0),
            node(2, NodeKey::Call(0x3000), samples),
        ]),
        statics_tree: cct(vec![
            node(0, NodeKey::Object(ObjectRef::Static(0)), 0),
            node(1, NodeKey::Call(0x3000), 1),
        ]),
        unknown: cct(vec![
            node(0, NodeKey::Object(ObjectRef::Stack(index)), 0),
            node(1, NodeKey::Call(0x3000), 1),
        ]),
        stats: SampleStats {
            samples: samples + 2,
            memory_samples: samples + 2,
            address_recovered: samples + 2,
            ..SampleStats::default()
        },
        ..ThreadProfile::default()
    }
}

fn object(db: &Database, kind: ObjectKind) -> Vec<&DataObject> {
    db.objects.iter().filter(|o| o.kind == kind).collect()
}

#[test]
fn histograms_and_per_thread_values_of_one_object_merge() {
    let mut a = thread(10, 10, 0, 5);
    let mut b = thread(10, 11, 1, 7);
    let mut c = thread(12, 12, 0, 4);
    for (p, hist) in [
        (&mut a, vec![(0, 4), (3, 1)]),
        (&mut b, vec![(0, 2), (31, 5)]),
        (&mut c, vec![(3, 4)]),
    ] {
        p.object_stats = vec![ObjectStats {
            object: ObjectRef::HeapSite(1),
            histogram: hist,
            sites: Vec::new(),
            ..Default::default()
        }];
    }
    // Same result with any number of workers and any order.
    for profiles in [vec![a.clone(), b.clone(), c.clone()], vec![c, b, a]] {
        let db = merge(&profiles, Vec::new()).db;
        db.validate().unwrap();
        let heap = object(&db, ObjectKind::Heap);
        let obj = heap[0];
        let h = obj.histogram.as_ref().expect("histogram");
        assert_eq!(h.layout, HistogramLayout::default());
        assert_eq!(h.counts, vec![(0, 6), (3, 5), (31, 5)]);
        // Threads sorted by (rank, host, pid, index); values per thread.
        let threads: Vec<(u32, u32, u64)> = obj
            .by_thread
            .iter()
            .map(|(t, v)| {
                let t = &db.info.thread_list[*t as usize];
                (t.pid, t.index, v[0])
            })
            .collect();
        assert_eq!(threads, vec![(10, 0, 5), (10, 1, 7), (12, 0, 4)]);
        assert_eq!(db.info.thread_list.len(), 3);
    }
}

#[test]
fn access_sites_merge_per_object_site_and_stride() {
    use formats::measurement::SiteStrides;
    use formats::patterns::StrideCounts;
    let mut a = thread(10, 10, 0, 5);
    let mut b = thread(10, 11, 1, 7);
    let site = |ip: u64, strides: Vec<(i64, u64)>, gcd: u64| SiteStrides {
        ip,
        counts: StrideCounts {
            samples: strides.iter().map(|s| s.1).sum(),
            element_bytes: 8,
            strides,
            delta_gcd: gcd,
            ..Default::default()
        },
        frame_offset: None,
    };
    a.object_stats = vec![ObjectStats {
        object: ObjectRef::HeapSite(1),
        histogram: Vec::new(),
        sites: vec![site(0x40_1000, vec![(320_000, 4), (8, 1)], 16)],
        ..Default::default()
    }];
    b.object_stats = vec![ObjectStats {
        object: ObjectRef::HeapSite(1),
        histogram: vec![(0, 1)],
        sites: vec![
            site(0x40_1000, vec![(320_000, 6)], 24),
            site(0x40_2000, vec![(8, 2)], 8),
        ],
        ..Default::default()
    }];
    for profiles in [vec![a.clone(), b.clone()], vec![b, a]] {
        let db = merge(&profiles, Vec::new()).db;
        db.validate().unwrap();
        let obj = object(&db, ObjectKind::Heap)[0];
        assert_eq!(obj.sites.len(), 2, "{:?}", obj.sites);
        // Most sampled first.
        let top = &obj.sites[0].counts;
        assert_eq!(top.samples, 11);
        assert_eq!(top.strides, vec![(8, 1), (320_000, 10)]);
        assert_eq!(top.delta_gcd, 8);
        assert_eq!(obj.sites[1].counts.strides, vec![(8, 2)]);
        assert_ne!(obj.sites[0].frame, obj.sites[1].frame);
    }
}

#[test]
fn different_histogram_layouts_drop_the_histograms() {
    let mut a = thread(10, 10, 0, 5);
    let mut b = thread(10, 11, 1, 7);
    a.object_stats = vec![ObjectStats {
        object: ObjectRef::HeapSite(1),
        histogram: vec![(0, 1)],
        sites: Vec::new(),
        ..Default::default()
    }];
    b.object_stats = a.object_stats.clone();
    b.histogram_layout = HistogramLayout::Fraction(8);
    let merged = merge(&[a, b], Vec::new());
    assert!(merged.db.objects.iter().all(|o| o.histogram.is_none()));
    assert!(merged
        .warnings
        .iter()
        .any(|w| w.contains("histogram layouts")));
}

#[test]
fn same_alloc_path_in_two_threads_is_one_object() {
    let profiles = vec![thread(10, 10, 0, 5), thread(10, 11, 1, 7)];
    let db = merge(&profiles, Vec::new()).db;
    db.validate().unwrap();
    let heap = object(&db, ObjectKind::Heap);
    assert_eq!(heap.len(), 1, "{:?}", db.objects);
    let obj = heap[0];
    // Process-wide counts are taken once per process.
    assert_eq!(obj.allocations, 3);
    assert_eq!(obj.bytes, 3000);
    // Root first: main (0x2000) then init (0x1000).
    let path: Vec<&str> = obj
        .alloc_path
        .iter()
        .map(|&f| db.frames[f as usize].function.as_str())
        .collect();
    assert_eq!(path, ["[unknown]+0x2000", "[unknown]+0x1000"]);
    let rows = views::objects(&db);
    let row = rows.iter().find(|r| r.kind == ObjectKind::Heap).unwrap();
    assert_eq!(row.metrics, vec![12]);
    // Code total equals the data total.
    let code_total = db.code.inclusive(1)[0][0];
    let data_total = db.data.inclusive(1)[0][0];
    assert_eq!(code_total, 16);
    assert_eq!(data_total, 16);
    assert_eq!(db.info.threads, 2);
    assert_eq!(db.info.processes, 1);
    assert_eq!(db.info.stats.samples, 16);
    assert_eq!(db.info.events, ["mem:soft"]);
    assert_eq!(db.info.primary_metric, 0);
}

#[test]
fn same_path_in_two_processes_sums_allocations() {
    let profiles = vec![
        thread(10, 10, 0, 5),
        thread(10, 11, 1, 1),
        thread(11, 20, 0, 7),
    ];
    let db = merge(&profiles, Vec::new()).db;
    let heap = object(&db, ObjectKind::Heap);
    assert_eq!(heap.len(), 1);
    assert_eq!(heap[0].allocations, 6);
    assert_eq!(heap[0].bytes, 6000);
    assert_eq!(db.info.processes, 2);
    assert_eq!(db.info.ranks, [0, 1]);
    assert_eq!(db.info.commands, [vec!["./app".to_string()]]);
    // Statics by name, demangled; stacks by thread index.
    let statics = object(&db, ObjectKind::Static);
    assert_eq!(statics.len(), 1);
    assert_eq!(statics[0].name, "app::TABLE");
    assert_eq!(statics[0].bytes, 64);
    let stacks = object(&db, ObjectKind::Stack);
    let mut names: Vec<&str> = stacks.iter().map(|o| o.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["<stack: thread 0>", "<stack: thread 1>"]);
    assert!(stacks.iter().all(|o| o.bytes == 0x80_0000));
}

#[test]
fn data_tree_has_three_roots_and_parents_first() {
    let db = merge(&[thread(1, 1, 0, 1)], Vec::new()).db;
    let roots: Vec<&NodeKind> = db
        .data
        .nodes
        .iter()
        .filter(|n| n.parent == 0)
        .map(|n| &n.kind)
        .collect();
    assert_eq!(
        roots,
        [
            &NodeKind::Root(HEAP_ROOT.into()),
            &NodeKind::Root(STATIC_ROOT.into()),
            &NodeKind::Root(UNKNOWN_ROOT.into()),
        ]
    );
    for (i, n) in db.data.nodes.iter().enumerate().skip(1) {
        assert!((n.parent as usize) < i);
    }
    for o in &db.objects {
        assert_eq!(
            db.data.nodes[o.node as usize].kind,
            NodeKind::Object(db.objects.iter().position(|x| x == o).unwrap() as u32)
        );
    }
}

#[test]
fn special_objects_are_named() {
    let mut p = thread(1, 1, 0, 1);
    p.unknown = cct(vec![
        node(0, NodeKey::Object(ObjectRef::SmallHeap), 1),
        node(0, NodeKey::Object(ObjectRef::Unknown), 2),
        node(0, NodeKey::Object(ObjectRef::NotRecovered), 3),
        node(0, NodeKey::Object(ObjectRef::Stack(5)), 4),
    ]);
    let db = merge(&[p], Vec::new()).db;
    let find = |name: &str| db.objects.iter().find(|o| o.name == name).unwrap();
    assert_eq!(find("<small heap objects>").kind, ObjectKind::Heap);
    assert_eq!(find("<unknown address>").kind, ObjectKind::Unknown);
    assert_eq!(find("<address not recovered>").kind, ObjectKind::Unknown);
    // Another thread's stack: size unknown from this file.
    assert_eq!(find("<stack: thread 5>").bytes, 0);
}

/// A thread whose unknown addresses fell in regions labelled `labels`
/// (one sample per region, `regions[i]` at 0x1000 * i).
fn unknown_regions(pid: u32, labels: &[&str]) -> ThreadProfile {
    let mut p = thread(pid, pid, 0, 1);
    p.unknown_regions = labels
        .iter()
        .enumerate()
        .map(|(i, l)| UnknownRegion {
            address: 0x1000 * i as u64,
            label: l.to_string(),
        })
        .collect();
    let mut nodes = vec![node(0, NodeKey::Object(ObjectRef::Unknown), 1)];
    for i in 0..labels.len() {
        nodes.push(node(
            0,
            NodeKey::Object(ObjectRef::UnknownRegion(i as u32)),
            1,
        ));
        nodes.push(node(nodes.len() as u32, NodeKey::Call(0x3000), 1));
    }
    p.unknown = cct(nodes);
    p
}

#[test]
fn unknown_regions_are_one_object_per_label_in_every_kind_of_merge() {
    const ANON: &str = "anonymous mapping not tracked (made before the profiler started, by the loader or by a raw system call)";
    let profiles = [
        // Two regions of one kind in a process, and one of another.
        unknown_regions(1, &[ANON, "[vdso]/[vvar]", ANON]),
        unknown_regions(2, &["[vdso]/[vvar]", "not mapped at exit"]),
    ];
    let check = |db: &Database| {
        let mut rows: Vec<(&str, u64)> = views::objects(db)
            .iter()
            .filter(|r| r.kind == ObjectKind::Unknown)
            .map(|r| (r.name, r.metrics[0]))
            .collect();
        rows.sort();
        let anon = format!("<unknown address: {ANON}>");
        let mut want = vec![
            ("<unknown address>", 2),
            ("<unknown address: [vdso]/[vvar]>", 4),
            ("<unknown address: not mapped at exit>", 2),
            (anon.as_str(), 4),
        ];
        want.sort();
        assert_eq!(rows, want);
    };
    let serial = merge(&profiles, Vec::new()).db;
    check(&serial);
    // From files, and as two shares (hpcprof-rs --mpi).
    let dir = crate::read::tests::temp_dir("unknown-regions");
    for p in &profiles {
        let name = format!("app.node1.{}.{}.hpcrun", p.process.pid, p.thread.tid);
        std::fs::write(dir.join(name), p.to_bytes().unwrap()).unwrap();
    }
    let files = crate::read::find(&dir).unwrap();
    let from_files = merge_files(&files, &|_| {}).db.into_database();
    check(&from_files);
    let groups = process_groups(&files);
    assert_eq!(groups.len(), 2);
    let a = Share::merge(&files, vec![groups[0].clone()], &|_| {});
    let b = Share::merge(&files, vec![groups[1].clone()], &|_| {});
    let shared = a
        .absorb_bytes(&b.to_bytes())
        .unwrap()
        .finish()
        .db
        .into_database();
    check(&shared);
    assert_eq!(shared, from_files);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stack_frames_are_one_object_per_function_below_the_stacks_group() {
    // Two threads sampled the frames of the function at 0x4000, one also
    // an address that no frame held, the other the function at 0x5000.
    let mut a = thread(1, 1, 0, 1);
    a.unknown = cct(vec![
        node(0, NodeKey::Object(ObjectRef::StackFrame(0x4000)), 0),
        node(1, NodeKey::Call(0x3000), 3),
        node(0, NodeKey::Object(ObjectRef::Stack(0)), 1),
    ]);
    let mut b = thread(1, 2, 1, 1);
    b.unknown = cct(vec![
        node(0, NodeKey::Object(ObjectRef::StackFrame(0x4000)), 0),
        node(1, NodeKey::Call(0x3000), 2),
        node(0, NodeKey::Object(ObjectRef::StackFrame(0x5000)), 4),
    ]);
    let db = merge(&[a, b], Vec::new()).db;
    db.validate().unwrap();
    let stacks = object(&db, ObjectKind::Stack);
    let names: Vec<&str> = stacks.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let frames: Vec<&DataObject> = stacks
        .iter()
        .copied()
        .filter(|o| o.frame.is_some())
        .collect();
    assert_eq!(frames.len(), 2, "{names:?}");
    for o in &frames {
        let f = &db.frames[o.frame.unwrap() as usize];
        assert_eq!(o.name, crate::name::stack_frame_name(f));
        assert!(o.name.starts_with("stack: locals of "), "{}", o.name);
    }
    // The function at 0x4000: both threads' samples, one row.
    let inc = db.data.inclusive(1);
    let value = |o: &DataObject| inc[o.node as usize][0];
    let mut values: Vec<u64> = frames.iter().map(|o| value(o)).collect();
    values.sort();
    assert_eq!(values, [4, 5]);
    let whole = stacks.iter().find(|o| o.frame.is_none()).unwrap();
    assert_eq!(whole.name, "<stack: thread 0>");
    assert!(stacks.iter().all(|o| o.runtime.is_none()));
    // Every stack object hangs below the stacks group of the unknown root.
    for o in &stacks {
        let group = db.data.nodes[o.node as usize].parent as usize;
        assert_eq!(
            db.data.nodes[group].kind,
            NodeKind::Root(STACKS_GROUP.into())
        );
        let root = db.data.nodes[group].parent as usize;
        assert_eq!(
            db.data.nodes[root].kind,
            NodeKind::Root(UNKNOWN_ROOT.into())
        );
    }
}

#[test]
fn a_runtimes_stack_frames_are_the_runtimes() {
    let mut a = thread(1, 1, 0, 1);
    a.modules = vec![formats::measurement::Module {
        path: "/nonexistent/libgomp.so.1".into(),
        build_id: None,
        bias: 0x10_0000,
        ranges: vec![(0x10_0000, 0x20_0000)],
    }];
    a.unknown = cct(vec![
        node(0, NodeKey::Object(ObjectRef::StackFrame(0x10_1234)), 0),
        node(1, NodeKey::Call(0x3000), 3),
    ]);
    let db = merge(&[a], Vec::new()).db;
    let stacks = object(&db, ObjectKind::Stack);
    assert_eq!(stacks.len(), 1);
    assert_eq!(
        stacks[0].name,
        "OpenMP runtime: stack: locals of libgomp.so.1+0x1234"
    );
    assert_eq!(stacks[0].runtime.as_deref(), Some("OpenMP runtime"));
}

#[test]
fn modules_map_addresses_and_metrics_merge_by_name() {
    let mut a = thread(1, 1, 0, 1);
    a.modules = vec![formats::measurement::Module {
        path: "/nonexistent/libx.so".into(),
        build_id: None,
        bias: 0x10_0000,
        ranges: vec![(0x10_0000, 0x20_0000)],
    }];
    a.code = cct(vec![node(0, NodeKey::Call(0x10_1234), 4)]);
    let mut b = thread(2, 2, 0, 1);
    b.metrics.insert(
        0,
        MetricInfo {
            name: "latency".into(),
            unit: "cycles".into(),
            description: String::new(),
        },
    );
    b.code = cct(vec![CctNode {
        parent: 0,
        key: NodeKey::Call(0x10_1234),
        metrics: vec![100, 2],
    }]);
    let merged = merge(&[a, b], Vec::new());
    let db = merged.db;
    assert_eq!(merged.warnings.len(), 1, "{:?}", merged.warnings);
    let names: Vec<&str> = db.info.metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["samples", "latency"]);
    assert_eq!(db.info.primary_metric, 0);
    let fns = views::functions(&db);
    let lib = fns.iter().find(|f| f.function == "libx.so+0x1234").unwrap();
    assert_eq!(lib.metrics, vec![4, 0]);
    let unknown = fns
        .iter()
        .find(|f| f.function == "[unknown]+0x101234")
        .unwrap();
    assert_eq!(unknown.metrics, vec![2, 100]);
}

#[test]
fn damaged_file_is_skipped_and_totals_unchanged() {
    let dir = crate::read::tests::temp_dir("merge");
    let profiles = vec![thread(10, 10, 0, 5), thread(10, 11, 1, 7)];
    for (i, p) in profiles.iter().enumerate() {
        std::fs::write(dir.join(format!("t{i}.hpcrun")), p.to_bytes().unwrap()).unwrap();
    }
    let expected = merge(&profiles, Vec::new()).db;
    let bytes = thread(10, 12, 2, 1000).to_bytes().unwrap();
    std::fs::write(dir.join("t9.hpcrun"), &bytes[..bytes.len() - 7]).unwrap();
    let m = crate::read::read_all(&crate::read::find(&dir).unwrap());
    assert_eq!(m.skipped.len(), 1);
    let profiles: Vec<ThreadProfile> = m.profiles.into_iter().map(|(_, p)| p).collect();
    let db = merge(&profiles, m.skipped).db;
    assert_eq!(db.info.stats, expected.info.stats);
    assert_eq!(db.info.skipped.len(), 1);
    assert!(db.info.skipped[0].0.ends_with("t9.hpcrun"));
    assert_eq!(db.objects, expected.objects);
    assert_eq!(db.data, expected.data);
    assert_eq!(db.code, expected.code);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hostile_indices_do_not_panic() {
    let mut p = thread(1, 1, 0, 1);
    // Metrics wider than the named columns, stats near overflow.
    p.code.nodes.push(CctNode {
        parent: 0,
        key: NodeKey::Call(0),
        metrics: vec![u64::MAX, u64::MAX, 3],
    });
    p.code.nodes.push(CctNode {
        parent: 0,
        key: NodeKey::Call(0),
        metrics: vec![u64::MAX],
    });
    let db = merge(&[p], Vec::new()).db;
    db.validate().unwrap();
    assert_eq!(db.info.metrics.len(), 3);
}

fn dist_of(db: &Database, node: u32) -> (Dist, Option<Dist>) {
    let n = &db.data.nodes[node as usize];
    (n.threads.expect("thread distribution"), n.ranks)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn distributions_over_threads_and_ranks() {
    // Process 10 (rank 0): threads with 5 and 7 heap samples; process 11
    // (rank 1): one thread with 3, one that never touches the object.
    let mut idle = thread(11, 21, 1, 0);
    idle.heap = Cct::default();
    let profiles = vec![
        thread(10, 10, 0, 5),
        thread(10, 11, 1, 7),
        thread(11, 20, 0, 3),
        idle,
    ];
    let db = merge(&profiles, Vec::new()).db;
    db.validate().unwrap();
    let obj = object(&db, ObjectKind::Heap)[0];
    let (t, r) = dist_of(&db, obj.node);
    // Threads: 5, 7, 3, 0.
    assert_eq!(t.count, 4);
    assert_eq!((t.min, t.max), (0.0, 7.0));
    assert!(close(t.mean, 3.75), "{t:?}");
    let var = (25.0 + 49.0 + 9.0) / 4.0 - 3.75 * 3.75;
    assert!(close(t.stddev, f64::sqrt(var)), "{t:?}");
    // Ranks: 0 -> 12, 1 -> 3.
    let r = r.expect("rank distribution");
    assert_eq!(r.count, 2);
    assert_eq!((r.min, r.max), (3.0, 12.0));
    assert!(close(r.mean, 7.5) && close(r.stddev, 4.5), "{r:?}");
    // The data root: every thread's inclusive total (samples + 2 each,
    // the idle one keeps its static and stack samples).
    let root = db.data.nodes[0].threads.unwrap();
    assert_eq!((root.min, root.max), (2.0, 9.0));
    assert!(close(root.mean, (7.0 + 9.0 + 5.0 + 2.0) / 4.0));
    // The code tree too: leaf 0x3000 under 0x1000.
    let code_root = db.code.nodes[0].threads.unwrap();
    assert_eq!((code_root.min, code_root.max), (2.0, 9.0));
    assert!(db.code.nodes[0].ranks.is_some());
    // One thread: no distribution.
    let single = merge(&profiles[..1], Vec::new()).db;
    assert!(single.data.nodes.iter().all(|n| n.threads.is_none()));
}

#[test]
fn streaming_result_does_not_depend_on_workers_or_splitting() {
    let dir = crate::read::tests::temp_dir("stream");
    let mut profiles = Vec::new();
    // One big process (split over work items) and a few small ones.
    for t in 0..12 {
        profiles.push(thread(100, 1000 + t, t, u64::from(t) + 1));
    }
    for pid in 0..5 {
        let mut p = thread(200 + pid, 2000 + pid, 0, u64::from(pid) * 3);
        p.process.rank = Some(pid + 1);
        profiles.push(p);
    }
    for p in &profiles {
        let name = format!(
            "app.{}.{}.{}.hpcrun",
            p.process.host, p.process.pid, p.thread.tid
        );
        std::fs::write(dir.join(name), p.to_bytes().unwrap()).unwrap();
    }
    let files = crate::read::find(&dir).unwrap();
    let with = |n: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap();
        let seen = std::sync::atomic::AtomicU64::new(0);
        let db = pool.install(|| {
            merge_files(&files, &|b| {
                seen.fetch_add(b, std::sync::atomic::Ordering::Relaxed);
            })
            .db
        });
        // Encoded node by node, the bytes of the whole database.
        let mut streamed = Vec::new();
        db.write_to(&mut streamed).unwrap();
        let db = db.into_database();
        assert_eq!(streamed, db.to_bytes().unwrap());
        (db, seen.into_inner())
    };
    let (one, bytes) = with(1);
    let (three, _) = with(3);
    let total: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    assert_eq!(bytes, total);
    assert_eq!(one, three);
    // Same as the in-memory merge of the same profiles (up to the
    // skipped list, which is empty in both).
    let memory = merge(&profiles, Vec::new()).db;
    assert_eq!(one, memory);
    // Rank 0 is the split process (1 + ... + 12), ranks 1-5 have
    // 0, 3, 6, 9, 12.
    let obj = object(&one, ObjectKind::Heap)[0];
    let r = one.data.nodes[obj.node as usize].ranks.unwrap();
    assert_eq!(r.count, 6);
    assert_eq!((r.min, r.max), (0.0, 78.0));
    assert!(close(r.mean, (78.0 + 30.0) / 6.0), "{r:?}");
    assert_eq!(obj.allocations, 3 * 6);
    assert_eq!(one.info.processes, 6);
    assert_eq!(one.info.threads, 17);
    std::fs::remove_dir_all(&dir).unwrap();
}
