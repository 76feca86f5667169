//! Tests of the findings: which stride, misalignment, data-dependence,
//! small-block, sharing and streaming evidence makes a finding, and which
//! (runtime memory, thin evidence) does not; how the report words them.

use super::*;
use formats::database::AccessSite;
use formats::measurement::MetricInfo;
use formats::patterns::StrideCounts;

fn with_patterns() -> Database {
    let mut db = crate::fixtures::abc();
    db.info.metrics.push(MetricInfo {
        name: "misaligned_samples".into(),
        ..Default::default()
    });
    db.frames.push(formats::database::Frame {
        function: "compute".into(),
        file: Some("/src/abc.c".into()),
        line: Some(33),
        ..Default::default()
    });
    let frame = db.frames.len() as u32 - 1;
    for o in &mut db.objects {
        let stride = if o.name == "C" { 320_000 } else { 8 };
        o.sites = vec![AccessSite {
            frame,
            counts: StrideCounts {
                samples: 100,
                element_bytes: 8,
                strides: vec![(stride, 100)],
                ..Default::default()
            },
        }];
    }
    db
}

#[test]
fn large_regular_stride_is_a_finding() {
    let db = with_patterns();
    let found = strongest(&db, 10);
    assert!(!found.is_empty());
    let f = &found[0];
    assert_eq!(db.objects[f.object as usize].name, "C");
    assert_eq!(f.kind, Kind::LargeStride);
    assert_eq!(
        f.text,
        "stride: 320000 bytes (40000 elements of 8 bytes), regular (100% of 100 sampled accesses)"
    );
    // Unit strides are no finding.
    assert!(found
        .iter()
        .all(|f| db.objects[f.object as usize].name == "C"));
}

/// `with_patterns` plus misaligned accesses: C has 90 samples, 20 of
/// them spanning two lines, at a site with element size 8 and
/// `stride`.
fn misaligned(stride: i64) -> Database {
    let mut db = with_patterns();
    let col = db.metric_column("misaligned_samples").unwrap();
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    let node = db.objects[c].node as usize;
    for n in &mut db.data.nodes {
        n.exclusive.resize(col + 1, 0);
    }
    let leaf = db
        .data
        .nodes
        .iter()
        .position(|n| n.parent as usize == node)
        .unwrap();
    db.data.nodes[leaf].exclusive[col] = 20;
    db.objects[c].sites[0].counts.strides = vec![(stride, 100)];
    db
}

#[test]
fn misalignment_of_naturally_aligned_elements_is_no_finding() {
    // Doubles 8 bytes apart: an access spanning lines is a vector
    // meeting a line border, nothing to fix in the layout.
    let db = misaligned(8);
    assert!(strongest(&db, 10)
        .iter()
        .all(|f| f.kind != Kind::Misaligned));
    // Packed 9-byte records: a finding, with its evidence.
    let db = misaligned(9);
    let found = strongest(&db, 10);
    let f = found
        .iter()
        .find(|f| f.kind == Kind::Misaligned)
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!(db.objects[f.object as usize].name, "C");
    assert!(
        f.evidence.contains("sampled accesses of the object")
            && f.evidence.contains("20 of them spanning two lines"),
        "{}",
        f.evidence
    );
}

/// `misaligned(8)` plus an `access_bytes` column: `bytes` at C's
/// leaf (C has 900 sampled accesses).
fn with_access_bytes(bytes: u64) -> Database {
    let mut db = misaligned(8);
    db.info.metrics.push(MetricInfo {
        name: "access_bytes".into(),
        ..Default::default()
    });
    let col = db.metric_column("access_bytes").unwrap();
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    let node = db.objects[c].node;
    for n in &mut db.data.nodes {
        n.exclusive.resize(col + 1, 0);
    }
    let leaf = db.data.nodes.iter().position(|n| n.parent == node).unwrap();
    db.data.nodes[leaf].exclusive[col] = bytes;
    db
}

fn misaligned_c(db: &Database) -> bool {
    strongest(db, 10)
        .iter()
        .any(|f| f.kind == Kind::Misaligned && db.objects[f.object as usize].name == "C")
}

#[test]
fn misalignment_of_aligned_elements_needs_wider_accesses() {
    // Doubles 8 bytes apart read 16 bytes at a time: vectors meeting
    // a line border, no finding.
    assert!(!misaligned_c(&with_access_bytes(900 * 16)));
    // Read 8 bytes at a time: an aligned double never spans two
    // lines, so the block itself is off (doubles 4 bytes into it).
    assert!(misaligned_c(&with_access_bytes(900 * 8)));
    // A byte-wise site (a hash of the bytes, 64 apart) besides the
    // doubles does not make the element size unknown.
    let mut db = with_access_bytes(900 * 16);
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    let mut bytes = db.objects[c].sites[0].clone();
    bytes.counts.element_bytes = 1;
    bytes.counts.samples = 1;
    bytes.counts.strides = vec![(1, 1)];
    db.objects[c].sites.push(bytes);
    assert!(!misaligned_c(&db));
}

#[test]
fn data_dependent_finding_needs_its_own_evidence() {
    let mut db = with_patterns();
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    // 100 samples, 40 data-dependent: under half, no finding.
    let site = &mut db.objects[c].sites[0].counts;
    site.strides = vec![(8, 30), (16, 30)];
    site.data_dependent = 40;
    assert!(strongest(&db, 10).iter().all(|f| f.kind != Kind::Irregular));
    // 29 of 29: too few data-dependent observations.
    let site = &mut db.objects[c].sites[0].counts;
    site.strides = vec![];
    site.data_dependent = 29;
    assert!(strongest(&db, 10).iter().all(|f| f.kind != Kind::Irregular));
    // 90 of 100: a finding naming the site, with its interval.
    let site = &mut db.objects[c].sites[0].counts;
    site.strides = vec![(8, 4), (24, 3), (40, 3)];
    site.data_dependent = 90;
    let found = strongest(&db, 10);
    let f = found
        .iter()
        .find(|f| f.kind == Kind::Irregular)
        .unwrap_or_else(|| panic!("{found:?}"));
    assert!(f.text.contains("90% of 100 decoded accesses"), "{}", f.text);
    assert!(
        f.text.contains("most at abc.c:33 (compute) (90 of them)"),
        "{}",
        f.text
    );
    assert!(
        f.evidence
            .contains("90 of 100 decoded accesses data-dependent (95% interval 83-94%)"),
        "{}",
        f.evidence
    );
}

#[test]
fn report_tells_same_named_objects_apart_and_advises_once() {
    let mut db = with_patterns();
    let b = db.objects.iter().position(|o| o.name == "B").unwrap();
    db.objects[b].name = "C".into();
    db.objects[b].sites[0].counts.strides = vec![(320_000, 100)];
    // Allocated at main:31 and main:32 (frames 4 and 5).
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    for (i, frame) in [(b, 4), (c, 5)] {
        db.objects[i].alloc_path = vec![frame];
        db.objects[i].alloc_site = Some(0);
    }
    let text = crate::report::findings_section(&db, 10);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("- C (allocated at "))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert_ne!(rows[0], rows[1], "{text}");
    assert_eq!(
        text.matches("advice: walk it contiguously").count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches("advice: as for C (allocated at ").count(),
        1,
        "{text}"
    );
}

#[test]
fn many_small_blocks_read_together_are_a_finding() {
    let mut db = with_patterns();
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    let blocks = |peak_live| formats::database::SiteBlocks {
        max_bytes: 216,
        peak_live,
        frees: 0,
        small: true,
    };
    db.objects[c].allocations = 300_000;
    db.objects[c].bytes = 300_000 * 216;
    db.objects[c].blocks = Some(blocks(300_000));
    let found = strongest(&db, 10);
    let f = found
        .iter()
        .find(|f| f.kind == Kind::ScatteredBlocks)
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(f.object, c as u32);
    assert!(
        f.text
            .starts_with("300,000 blocks of 216 B from one site, up to 300,000 live at once"),
        "{}",
        f.text
    );
    // Allocated and freed one at a time: never many live together.
    db.objects[c].blocks = Some(blocks(1));
    assert!(strongest(&db, 10)
        .iter()
        .all(|f| f.kind != Kind::ScatteredBlocks));
}

#[test]
fn wilson_interval() {
    let (lo, hi) = wilson(90, 100);
    assert!(
        (lo - 0.8256).abs() < 1e-3 && (hi - 0.9448).abs() < 1e-3,
        "{lo} {hi}"
    );
    assert_eq!(wilson(0, 0), (0.0, 1.0));
}

#[test]
fn runtime_memory_and_thin_evidence_give_no_finding() {
    let mut db = with_patterns();
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    assert!(strongest(&db, 10).iter().any(|f| f.object == c as u32));
    db.objects[c].runtime = Some("OpenMP runtime".into());
    assert!(strongest(&db, 10).iter().all(|f| f.object != c as u32));
    // Nor a bucket of many objects.
    let mut db = with_patterns();
    db.objects[c].name = "<small heap objects>".into();
    assert!(strongest(&db, 10).iter().all(|f| f.object != c as u32));
    // Too few samples of the object: no finding either.
    let db = with_patterns();
    let inc = db.data.inclusive(db.info.metrics.len());
    let mut few = inc[db.objects[c].node as usize].clone();
    few[0] = MIN_OBJECT_SAMPLES - 1;
    assert!(of_object(&db, c as u32, &few, 0.5).is_empty());
}

#[test]
fn one_finding_per_object_name_and_site() {
    let mut db = with_patterns();
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    // A second object C from another call path, same site.
    let mut twin = db.objects[c].clone();
    let leaf = db
        .data
        .nodes
        .iter()
        .position(|n| n.parent == db.objects[c].node)
        .unwrap();
    let mut obj_node = db.data.nodes[db.objects[c].node as usize].clone();
    obj_node.kind = formats::database::NodeKind::Object(db.objects.len() as u32);
    db.data.nodes.push(obj_node);
    twin.node = db.data.nodes.len() as u32 - 1;
    let mut leaf_node = db.data.nodes[leaf].clone();
    leaf_node.parent = twin.node;
    db.data.nodes.push(leaf_node);
    db.objects.push(twin);
    let found = strongest(&db, 10);
    let strides = found.iter().filter(|f| f.kind == Kind::LargeStride);
    assert_eq!(strides.count(), 1, "{found:?}");
}

#[test]
fn detail_lines_say_what_was_measured() {
    let db = with_patterns();
    let c = db.objects.iter().position(|o| o.name == "C").unwrap() as u32;
    let inc = db.data.inclusive(db.info.metrics.len());
    let metrics = &inc[db.objects[c as usize].node as usize];
    let l = lines(&db, c, metrics);
    assert_eq!(l[0], "misaligned: no sampled access spans two cache lines");
    assert!(l[1].starts_with("stride: 320000 bytes"), "{l:?}");
    let plain = crate::fixtures::abc();
    let l = lines(&plain, c, metrics);
    assert_eq!(l, vec!["misaligned: not measured", "stride: not measured"]);
}

#[test]
fn sharing_and_streamed_data_are_findings() {
    let mut db = with_patterns();
    db.info.metrics.push(MetricInfo {
        name: "false_sharing".into(),
        ..Default::default()
    });
    let frame = db.frames.len() as u32 - 1;
    let c = db.objects.iter().position(|o| o.name == "C").unwrap();
    db.objects[c].sharing = vec![formats::database::SharingLine {
        true_sharing: false,
        line_offset: 64,
        thread: 0,
        other_thread: 1,
        frame,
        other_frame: frame,
        events: 12,
    }];
    db.objects[c].reuse = vec![1, 0, 0, 0, 9];
    let found = strongest(&db, 10);
    let kinds: Vec<Kind> = found
        .iter()
        .filter(|f| f.object == c as u32)
        .map(|f| f.kind)
        .collect();
    assert!(kinds.contains(&Kind::FalseSharing), "{found:?}");
    assert!(kinds.contains(&Kind::Streamed), "{found:?}");
    let sharing = found.iter().find(|f| f.kind == Kind::FalseSharing).unwrap();
    assert!(
        sharing.text.contains("12 watchpoint events"),
        "{}",
        sharing.text
    );
    assert!(sharing.text.contains("line +64"), "{}", sharing.text);
    let metrics = vec![0; db.info.metrics.len()];
    let text = lines(&db, c as u32, &metrics);
    assert!(
        text.iter().any(|l| l.starts_with("false sharing: 12")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|l| l.starts_with("reuse of 10 watched words")),
        "{text:?}"
    );
    // Another object, measured but without events, says so.
    let a = db.objects.iter().position(|o| o.name == "A").unwrap() as u32;
    let text = lines(&db, a, &metrics);
    assert!(
        text.iter().any(|l| l == "sharing: no watchpoint event"),
        "{text:?}"
    );
}
