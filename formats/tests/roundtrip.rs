//! Property tests: encode/decode round trips; random, truncated and
//! newer-version bytes give errors, never panics.

use formats::database::{DataObject, Database, Frame, NodeKind, ObjectKind, TreeNode};
use formats::measurement::{
    AllocSite, CctNode, HandlerTime, Module, NodeKey, ObjectRef, SampleStats, StaticVar,
    ThreadProfile, UnknownRegion, HANDLER_TIME_BOUNDS_NS,
};
use formats::FormatError;
use proptest::prelude::*;

fn arb_profile() -> impl Strategy<Value = ThreadProfile> {
    (
        any::<u32>(),
        "[a-z]{0,12}",
        proptest::collection::vec(any::<u64>(), 0..20),
        proptest::collection::vec((0u32..10, any::<u64>(), 0u64..1000), 0..40),
        any::<u64>(),
    )
        .prop_map(|(pid, host, frames, nodes, samples)| {
            let mut p = ThreadProfile::default();
            p.process.pid = pid;
            p.process.host = host.clone();
            p.modules.push(Module {
                path: format!("/bin/{host}"),
                build_id: Some("abcd".into()),
                bias: 0x1000,
                ranges: vec![(0x1000, 0x2000)],
            });
            p.alloc_sites.push(AllocSite {
                frames: frames.clone(),
                allocations: 1,
                bytes: 4096,
                max_bytes: 4096,
                label: None,
                ..Default::default()
            });
            p.statics.push(StaticVar {
                name: "A".into(),
                module: Some(0),
                address: 0x1100,
                size: 8,
            });
            p.unknown_regions.push(UnknownRegion {
                address: 0x7fff_f7fc_5000,
                label: "[vdso]/[vvar]".into(),
            });
            for (i, (kind, value, m)) in nodes.into_iter().enumerate() {
                let key = match kind {
                    0 => NodeKey::Call(value),
                    1 => NodeKey::Object(ObjectRef::HeapSite(0)),
                    2 => NodeKey::Object(ObjectRef::Static(0)),
                    3 => NodeKey::Object(ObjectRef::Stack(value as u32)),
                    4 => NodeKey::Object(ObjectRef::SmallHeap),
                    5 => NodeKey::Object(ObjectRef::Unknown),
                    6 => NodeKey::Object(ObjectRef::NotRecovered),
                    7 => NodeKey::Object(ObjectRef::StackFrame(value)),
                    8 => NodeKey::Object(ObjectRef::UnknownRegion(0)),
                    _ => NodeKey::Call(!value),
                };
                let parent = (value % (i as u64 + 1)) as u32;
                p.heap.nodes.push(CctNode {
                    parent,
                    key,
                    metrics: vec![m, m / 2],
                });
            }
            p.stats = SampleStats {
                samples,
                handler_time: HandlerTime {
                    bounds_ns: HANDLER_TIME_BOUNDS_NS.to_vec(),
                    counts: vec![samples, 0, 0, 0, 0, 0, 0, 1],
                    max_ns: 123_456,
                    total_ns: samples.wrapping_mul(700),
                },
                ..Default::default()
            };
            p.stats.dropped.insert("tree full".into(), 3);
            p
        })
}

fn sample_db() -> Database {
    let mut db = Database::default();
    db.frames.push(Frame {
        function: "main".into(),
        file: Some("abc.c".into()),
        line: Some(4),
        module: "abc".into(),
        inlined: false,
        offset: None,
    });
    db.objects.push(DataObject {
        kind: ObjectKind::Heap,
        name: "C".into(),
        alloc_path: vec![0],
        bytes: 100,
        allocations: 1,
        node: 1,
        histogram: Some(formats::database::ObjectHistogram {
            layout: formats::measurement::HistogramLayout::default(),
            counts: vec![(0, 3), (31, 4)],
        }),
        by_thread: vec![(0, vec![7])],
        histogram_by_thread: vec![(0, vec![(0, 3), (31, 4)])],
        sharing: vec![formats::database::SharingLine {
            true_sharing: false,
            line_offset: 64,
            thread: 0,
            other_thread: 1,
            frame: 0,
            other_frame: 0,
            events: 9,
        }],
        reuse: vec![5, 0, 0, 0, 2],
        ..Default::default()
    });
    db.info.thread_list.push(formats::database::ThreadRef {
        rank: None,
        host: "h".into(),
        pid: 1,
        index: 0,
        tid: 1,
    });
    db.data.nodes.push(TreeNode {
        parent: 0,
        kind: NodeKind::Object(0),
        exclusive: vec![7],
        threads: None,
        ranks: None,
        by_rank: Vec::new(),
    });
    db
}

proptest! {
    #[test]
    fn profile_round_trip(p in arb_profile()) {
        let bytes = p.to_bytes().unwrap();
        prop_assert_eq!(ThreadProfile::from_bytes(&bytes).unwrap(), p);
    }

    #[test]
    fn truncated_profile_is_an_error(p in arb_profile(), cut in 0.0f64..1.0) {
        let bytes = p.to_bytes().unwrap();
        let at = ((bytes.len() as f64) * cut) as usize;
        prop_assert!(ThreadProfile::from_bytes(&bytes[..at]).is_err());
    }

    #[test]
    fn random_bytes_are_an_error(junk in proptest::collection::vec(any::<u8>(), 0..4096)) {
        prop_assert!(ThreadProfile::from_bytes(&junk).is_err());
        prop_assert!(Database::from_bytes(&junk).is_err());
    }

    #[test]
    fn random_body_behind_a_good_header_never_panics(junk in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let mut bytes = b"HPCRUNMF\x01\0\0\0\0\0\0\0".to_vec();
        bytes.extend_from_slice(&junk);
        let _ = ThreadProfile::from_bytes(&bytes);
        let mut bytes = b"HPCPROFD\x01\0\0\0\0\0\0\0".to_vec();
        bytes.extend_from_slice(&junk);
        let _ = Database::from_bytes(&bytes);
    }

    #[test]
    fn flipped_byte_never_panics(p in arb_profile(), at in any::<prop::sample::Index>(), x in 1u8..) {
        let mut bytes = p.to_bytes().unwrap();
        let i = at.index(bytes.len());
        bytes[i] ^= x;
        let _ = ThreadProfile::from_bytes(&bytes);
        let _ = ThreadProfile::head_from_bytes(&bytes);
    }

    /// The head (process, thread) is read from the start of a file alone,
    /// the same as the whole file decodes; a start that ends before it is
    /// an error, never a wrong head.
    #[test]
    fn head_is_read_from_the_start_of_a_file(p in arb_profile(), cut in 0.0f64..1.0) {
        let bytes = p.to_bytes().unwrap();
        let (process, thread) = ThreadProfile::head_from_bytes(&bytes).unwrap();
        prop_assert_eq!(&process, &p.process);
        prop_assert_eq!(&thread, &p.thread);
        let at = ((bytes.len() as f64) * cut) as usize;
        if let Ok((process, thread)) = ThreadProfile::head_from_bytes(&bytes[..at]) {
            prop_assert_eq!(process, p.process);
            prop_assert_eq!(thread, p.thread);
        }
    }

    #[test]
    fn random_bytes_have_no_head(junk in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let mut bytes = b"HPCRUNMF\x01\0\0\0\0\0\0\0".to_vec();
        bytes.extend_from_slice(&junk);
        let _ = ThreadProfile::head_from_bytes(&bytes);
        prop_assert!(ThreadProfile::head_from_bytes(&junk).is_err() || junk.starts_with(b"HPCRUNMF"));
    }
}

#[test]
fn database_round_trip() {
    let db = sample_db();
    let bytes = db.to_bytes().unwrap();
    assert_eq!(Database::from_bytes(&bytes).unwrap(), db);
}

#[test]
fn access_sites_round_trip_and_are_checked() {
    use formats::database::AccessSite;
    use formats::patterns::StrideCounts;
    let mut db = sample_db();
    db.objects[0].sites = vec![AccessSite {
        frame: 0,
        counts: StrideCounts {
            samples: 10,
            element_bytes: 8,
            strides: vec![(320_000, 9), (8, 1)],
            data_dependent: 1,
            deltas: vec![(640_000, 2)],
            other_deltas: 5,
            delta_gcd: 8,
            ..Default::default()
        },
    }];
    let bytes = db.to_bytes().unwrap();
    assert_eq!(Database::from_bytes(&bytes).unwrap(), db);
    db.objects[0].sites[0].frame = 99;
    let bytes = db.to_bytes().unwrap();
    assert!(matches!(
        Database::from_bytes(&bytes),
        Err(FormatError::Invalid { .. })
    ));
}

/// `ObjectStats` as files before access sites wrote it.
#[derive(serde::Serialize)]
struct OldObjectStats {
    object: formats::measurement::ObjectRef,
    histogram: Vec<(u32, u64)>,
}

/// `SampleStats` as files before the handler-time histogram wrote it.
#[derive(serde::Serialize)]
struct OldSampleStats {
    samples: u64,
    memory_samples: u64,
    address_recovered: u64,
    recovered_previous: u64,
    recovered_at_ip: u64,
    dropped: std::collections::BTreeMap<String, u64>,
}

#[test]
fn sample_stats_without_handler_time_still_read() {
    let old = OldSampleStats {
        samples: 7,
        memory_samples: 5,
        address_recovered: 4,
        recovered_previous: 3,
        recovered_at_ip: 1,
        dropped: Default::default(),
    };
    let bytes = rmp_serde::to_vec_named(&old).unwrap();
    let read: SampleStats = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(read.samples, 7);
    assert_eq!(read.handler_time, HandlerTime::default());
    // An old thread's empty histogram merges with a new one's.
    let mut sum = read.clone();
    let new = HandlerTime {
        bounds_ns: HANDLER_TIME_BOUNDS_NS.to_vec(),
        counts: vec![90, 5, 2, 1, 0, 1, 0, 1],
        max_ns: 250_000,
        total_ns: 600_000,
    };
    sum.add(&SampleStats {
        handler_time: new.clone(),
        ..Default::default()
    });
    assert_eq!(sum.handler_time, new);
}

#[test]
fn handler_time_sums_and_quantiles() {
    let a = HandlerTime {
        bounds_ns: HANDLER_TIME_BOUNDS_NS.to_vec(),
        counts: vec![90, 5, 2, 1, 0, 1, 0, 1],
        max_ns: 250_000,
        total_ns: 600_000,
    };
    let mut sum = a.clone();
    sum.add(&a);
    assert_eq!(sum.counts, vec![180, 10, 4, 2, 0, 2, 0, 2]);
    assert_eq!(
        (sum.max_ns, sum.total_ns, sum.samples()),
        (250_000, 1_200_000, 200)
    );
    // 20 us or more: the 20-50, 50-100 and >= 100 us buckets.
    assert_eq!(sum.at_least(20_000), 4);
    assert_eq!(sum.at_least(1_000), 20);
    assert_eq!(sum.quantile_bound(0.5), Some(1_000));
    assert_eq!(sum.quantile_bound(0.95), Some(2_000));
    assert_eq!(sum.quantile_bound(0.99), Some(50_000));
    assert_eq!(sum.quantile_bound(1.0), None);
    assert_eq!(HandlerTime::default().quantile_bound(0.5), None);
    // Other bounds: each bucket goes where its lower end falls.
    let mut odd = HandlerTime {
        bounds_ns: vec![3_000],
        counts: vec![1, 1],
        max_ns: 4_000,
        total_ns: 5_000,
    };
    odd.add(&a);
    assert_eq!(odd.counts, vec![1 + 90 + 5 + 2, 1 + 1 + 1 + 1]);
}

#[test]
fn object_stats_without_sites_still_read() {
    let old = OldObjectStats {
        object: formats::measurement::ObjectRef::HeapSite(0),
        histogram: vec![(3, 4)],
    };
    let bytes = rmp_serde::to_vec_named(&old).unwrap();
    let read: formats::measurement::ObjectStats = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(read.histogram, vec![(3, 4)]);
    assert!(read.sites.is_empty());
}

/// `ObjectRef` before `StackFrame` was added.
#[derive(serde::Serialize)]
enum OldObjectRef {
    HeapSite(u32),
    Static(u32),
    Stack(u32),
    SmallHeap,
    Unknown,
    NotRecovered,
}

#[test]
fn object_refs_written_before_stack_frames_still_read() {
    use formats::measurement::ObjectRef;
    let old = vec![
        OldObjectRef::HeapSite(1),
        OldObjectRef::Static(2),
        OldObjectRef::Stack(3),
        OldObjectRef::SmallHeap,
        OldObjectRef::Unknown,
        OldObjectRef::NotRecovered,
    ];
    let bytes = rmp_serde::to_vec_named(&old).unwrap();
    let read: Vec<ObjectRef> = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(
        read,
        [
            ObjectRef::HeapSite(1),
            ObjectRef::Static(2),
            ObjectRef::Stack(3),
            ObjectRef::SmallHeap,
            ObjectRef::Unknown,
            ObjectRef::NotRecovered,
        ]
    );
}

#[test]
fn a_stack_object_frame_outside_the_frames_is_refused() {
    let mut db = sample_db();
    db.objects[0].frame = Some(99);
    let bytes = db.to_bytes().unwrap();
    assert!(matches!(
        Database::from_bytes(&bytes),
        Err(FormatError::Invalid { .. })
    ));
}

#[test]
fn newer_version_is_refused() {
    let mut bytes = ThreadProfile::default().to_bytes().unwrap();
    bytes[8] = 99;
    match ThreadProfile::from_bytes(&bytes) {
        Err(FormatError::NewerVersion { found: 99, .. }) => {}
        other => panic!("expected NewerVersion, got {other:?}"),
    }
}

#[test]
fn a_database_is_not_a_profile() {
    let bytes = sample_db().to_bytes().unwrap();
    assert!(matches!(
        ThreadProfile::from_bytes(&bytes),
        Err(FormatError::BadMagic { .. })
    ));
}

#[test]
fn dangling_references_are_refused() {
    let mut db = sample_db();
    db.objects[0].node = 99;
    let bytes = db.to_bytes().unwrap();
    assert!(matches!(
        Database::from_bytes(&bytes),
        Err(FormatError::Invalid { .. })
    ));
}

#[test]
fn inclusive_sums_children() {
    let db = sample_db();
    let inc = db.data.inclusive(1);
    assert_eq!(inc[0], vec![7]);
}

#[test]
fn an_unknown_region_that_is_not_listed_is_refused() {
    let mut p = ThreadProfile::default();
    p.unknown.nodes.push(CctNode {
        parent: 0,
        key: NodeKey::Object(ObjectRef::UnknownRegion(0)),
        metrics: vec![1],
    });
    let err = ThreadProfile::from_bytes(&p.to_bytes().unwrap()).unwrap_err();
    assert!(err.to_string().contains("names a missing object"), "{err}");
    p.unknown_regions.push(UnknownRegion {
        address: 0x2000_0000_0000,
        label: "not mapped at exit".into(),
    });
    let read = ThreadProfile::from_bytes(&p.to_bytes().unwrap()).unwrap();
    assert_eq!(read, p);
}
