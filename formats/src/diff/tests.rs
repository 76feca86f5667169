//! Tests of the diff: matching, noise warnings, what `--fail-if-worse`
//! judges, the text and CSV forms.

use super::matching::site_text;
use super::render::elide_middle;
use super::*;
use crate::database::{DataObject, Frame, NodeKind, ObjectKind, TreeNode};

fn frame(function: &str, file: &str, line: u32) -> Frame {
    Frame {
        function: function.into(),
        file: Some(file.into()),
        line: Some(line),
        module: "m".into(),
        inlined: false,
        offset: None,
    }
}

/// A database with heap objects (name, malloc line, samples), all
/// allocated from main in `dir`/prog.c through glibc's malloc.
fn db(dir: &str, objects: &[(&str, u32, u64)]) -> Database {
    let mut db = Database::default();
    db.frames.push(frame("main", &format!("{dir}/prog.c"), 0));
    db.frames.push(frame("malloc", "./malloc/malloc.c", 3300));
    for (i, &(name, line, samples)) in objects.iter().enumerate() {
        db.frames
            .push(frame("main", &format!("{dir}/prog.c"), line));
        let site = db.frames.len() as u32 - 1;
        db.data.nodes.push(TreeNode {
            parent: 0,
            kind: NodeKind::Object(i as u32),
            exclusive: vec![samples],
            threads: None,
            ranks: None,
            by_rank: Vec::new(),
        });
        db.objects.push(DataObject {
            kind: ObjectKind::Heap,
            name: name.into(),
            alloc_path: vec![site, 1],
            // Written as before sites were chosen: the diff falls back
            // to the innermost user frame.
            bytes: 100,
            allocations: 1,
            node: db.data.nodes.len() as u32 - 1,
            ..Default::default()
        });
    }
    db
}

#[test]
fn alloc_site_skips_library_frames() {
    let d = db("/home/u/build1", &[("A", 12, 5)]);
    let site = alloc_site(&d, &d.objects[0]).unwrap();
    assert_eq!(site_text(site), "prog.c:12");
}

#[test]
fn objects_match_by_name_and_site_across_directories() {
    let before = db("/a", &[("A", 12, 10), ("B", 13, 90), ("T", 20, 5)]);
    let after = db("/b", &[("A", 12, 30), ("B", 13, 20), ("T", 21, 5)]);
    let d = diff(&before, &after);
    let get = |name: &str, status: Status| {
        d.objects
            .iter()
            .find(|r| r.name == name && r.status == status)
            .unwrap_or_else(|| panic!("{name} {status:?} in {d:#?}"))
    };
    let b = get("B", Status::Matched);
    assert_eq!(b.delta_samples, -70);
    assert!((b.change_pct.unwrap() + 700.0 / 9.0).abs() < 1e-9);
    assert_eq!(get("A", Status::Matched).delta_samples, 20);
    // T moved to another line: vanished and new, not matched.
    assert_eq!(get("T", Status::Vanished).site, "prog.c:20");
    assert_eq!(get("T", Status::New).site, "prog.c:21");
    assert_eq!((d.total.before, d.total.after), (105, 55));
    // Largest absolute change first.
    assert_eq!(d.objects[0].name, "B");
}

#[test]
fn row_keys_are_the_matching_keys() {
    let before = db("/a", &[("A", 12, 10)]);
    let after = db("/b", &[("A", 12, 30)]);
    let d = diff(&before, &after);
    assert_eq!(d.objects[0].key(), object_key(&after, &after.objects[0]));
    assert_eq!(d.objects[0].key(), object_key(&before, &before.objects[0]));
}

#[test]
fn worse_names_the_total_and_objects_above_the_floor() {
    let before = db("/a", &[("A", 12, 1000), ("B", 13, 9000), ("N", 14, 100)]);
    let after = db("/a", &[("A", 12, 3000), ("B", 13, 9500), ("N", 14, 300)]);
    let d = diff(&before, &after);
    // A: +200%; B: +5.6%; N: +200% but below 1% in both... it is
    // 100/10,100 before and 300/12,800 after (2.3%), so it is checked at
    // 1%, not at 5%. Every change is beyond sampling noise.
    let at1 = worse(&d, 10.0, 0.01);
    assert!(at1.iter().any(|r| r.contains("total")), "{at1:?}");
    assert!(at1.iter().any(|r| r.contains("object A")), "{at1:?}");
    assert!(at1.iter().any(|r| r.contains("object N")), "{at1:?}");
    assert!(!at1.iter().any(|r| r.contains("object B")), "{at1:?}");
    let at5 = worse(&d, 10.0, 0.05);
    assert!(!at5.iter().any(|r| r.contains("object N")), "{at5:?}");
    assert!(worse(&d, 300.0, 0.01).is_empty());
    assert!(worse(&diff(&after, &before), 10.0, 0.01).is_empty());
}

#[test]
fn csv_and_text_have_every_row() {
    let before = db("/a", &[("A", 12, 10)]);
    let after = db("/a", &[("A", 12, 30), ("X,y", 14, 3)]);
    let d = diff(&before, &after);
    let csv = to_csv(&d);
    assert!(csv.contains("object,matched,heap,A,prog.c:12,100,10,1.000000,30,"));
    assert!(csv.contains("object,new,heap,\"X,y\",prog.c:14,100,,,3,"));
    let text = to_text(&d, 10);
    assert!(text.starts_with("measure: samples:"), "{text}");
    assert!(text.contains("total memory time: 10 -> 33 samples (+230.0%)"));
}

#[test]
fn text_columns_stay_aligned_with_long_names() {
    let long = "stack: locals of CalcKinematicsForElems [clone ._omp_fn.0] (lulesh.cc:1510)";
    let before = db("/a", &[("A", 12, 10), (long, 13, 90)]);
    let after = db("/a", &[("A", 12, 30), (long, 13, 70), ("new_one", 14, 5)]);
    let text = to_text(&diff(&before, &after), 10);
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("data objects:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 4, "{text}");
    // Every row ends its `change` column where the header does, and its
    // site column starts where the header's does.
    let width = |l: &str| l.chars().count();
    let site_at = |l: &str| {
        l.chars()
            .collect::<Vec<_>>()
            .windows(7)
            .position(|w| w.iter().collect::<String>() == "prog.c:")
    };
    let header_site = table[0].find("site").unwrap();
    for row in &table[1..] {
        assert_eq!(width(row), width(table[0]), "{text}");
        assert_eq!(site_at(row), Some(header_site), "{text}");
    }
    // The long name is cut in the middle: both ends stay.
    let cut = table
        .iter()
        .find(|l| l.contains('…'))
        .expect("an elided name");
    assert!(
        cut.contains("stack: locals of CalcKin") && cut.contains("n.0] (lulesh.cc:1510)"),
        "{text}"
    );
    assert_eq!(elide_middle("abcdefgh", 5), "ab…gh");
    assert_eq!(elide_middle("abcdefgh", 4), "ab…h");
    assert_eq!(elide_middle("abc", 3), "abc");
}

#[test]
fn noise_warnings_only_beyond_noise() {
    // 1000 -> 1050: 50 < 3 sqrt(2050) = 135.8; 1000 -> 1300: 300 > 144.
    let mut before = db("/a", &[("A", 12, 1000)]);
    let mut same = db("/a", &[("A", 12, 1050)]);
    before.info.stats.cpu_time_ns = 1_000_000_000;
    same.info.stats.cpu_time_ns = 1_050_000_000;
    let d = diff(&before, &same);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    assert!(!to_text(&d, 5).contains("warning:"));

    let mut more = db("/a", &[("A", 12, 1300)]);
    // CPU time +50%: beyond the 12.6% that 1000 and 1300 samples resolve.
    more.info.stats.cpu_time_ns = 1_500_000_000;
    let d = diff(&before, &more);
    assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
    assert!(
        d.warnings[0].contains("1000 -> 1300 (+30.0%)"),
        "{:?}",
        d.warnings
    );
    assert!(
        d.warnings[0].contains("within 144 samples"),
        "{:?}",
        d.warnings
    );
    assert!(
        d.warnings[1].contains("1.00 s -> 1.50 s"),
        "{:?}",
        d.warnings
    );
    let text = to_text(&d, 5);
    assert!(text.contains("warning: the runs' total samples"), "{text}");
    assert!(to_json(&d).contains("\"warnings\""));
    assert!(beyond_noise(0, 10) && !beyond_noise(0, 9));
    assert!(time_resolution(0, 5).is_infinite());
}

#[test]
fn fail_if_worse_judges_application_objects_only() {
    // A thread stack, a runtime's object and the unknown bucket rise
    // tenfold; the application's A stays: nothing is worse.
    let extra = |db: &mut Database, samples: [u64; 3]| {
        for (i, (kind, name, runtime)) in [
            (ObjectKind::Stack, "<stack: thread 1>", None),
            (
                ObjectKind::Heap,
                "shared-memory transport",
                Some("Open MPI"),
            ),
            (ObjectKind::Unknown, "<unknown address>", None),
        ]
        .into_iter()
        .enumerate()
        {
            db.data.nodes.push(TreeNode {
                parent: 0,
                kind: NodeKind::Object(db.objects.len() as u32),
                exclusive: vec![samples[i]],
                threads: None,
                ranks: None,
                by_rank: Vec::new(),
            });
            db.objects.push(DataObject {
                kind,
                name: name.into(),
                runtime: runtime.map(Into::into),
                node: db.data.nodes.len() as u32 - 1,
                ..Default::default()
            });
        }
    };
    let mut before = db("/a", &[("A", 12, 100)]);
    extra(&mut before, [10, 10, 10]);
    let mut after = db("/a", &[("A", 12, 100)]);
    extra(&mut after, [100, 100, 100]);
    let d = diff(&before, &after);
    let judged: Vec<_> = d.objects.iter().filter(|r| r.application).collect();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert_eq!(judged[0].name, "A");
    assert_eq!(
        (d.total.application_before, d.total.application_after),
        (100, 100)
    );
    assert!(
        worse(&d, 10.0, 0.01).is_empty(),
        "{:?}",
        worse(&d, 10.0, 0.01)
    );
    // The application's object rising beyond noise is still caught.
    let mut before = db("/a", &[("A", 12, 1000), ("B", 13, 1000)]);
    extra(&mut before, [10, 10, 10]);
    let mut worse_a = db("/a", &[("A", 12, 2000), ("B", 13, 1000)]);
    extra(&mut worse_a, [10, 10, 10]);
    let reasons = worse(&diff(&before, &worse_a), 10.0, 0.01);
    assert!(
        reasons.iter().any(|r| r.contains("object A")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("application's objects")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().all(|r| !r.contains("object B")),
        "{reasons:?}"
    );
}

#[test]
fn fail_if_worse_ignores_rises_within_noise() {
    // A rises 20% (100 -> 120 samples) and so does the total: more than
    // 10%, but within sampling noise (3 sqrt(220) = 44 samples; A's share
    // 50% -> 55% of 200 -> 220 samples, z about 0.6).
    let before = db("/a", &[("A", 12, 100), ("B", 13, 100)]);
    let after = db("/a", &[("A", 12, 120), ("B", 13, 100)]);
    let d = diff(&before, &after);
    let a = d.objects.iter().find(|r| r.name == "A").unwrap();
    assert!(!a.beyond_noise, "{a:?}");
    assert!(
        worse(&d, 10.0, 0.01).is_empty(),
        "{:?}",
        worse(&d, 10.0, 0.01)
    );
    // With ten times the samples a rise of 40% is beyond noise: A's share
    // 50% -> 58% of 2,000 -> 2,400 samples (z about 3.7), the total rises
    // by 400 against 3 sqrt(4,400) = 199.
    let before = db("/a", &[("A", 12, 1000), ("B", 13, 1000)]);
    let after = db("/a", &[("A", 12, 1400), ("B", 13, 1000)]);
    let d = diff(&before, &after);
    let reasons = worse(&d, 10.0, 0.01);
    assert!(
        reasons.iter().any(|r| r.contains("object A")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("application's objects")),
        "{reasons:?}"
    );
    // A share that fell is no reason, even when the samples rose: B
    // (1000 -> 1100) lost share to A (1000 -> 1600).
    let after = db("/a", &[("A", 12, 1600), ("B", 13, 1100)]);
    let reasons = worse(&diff(&before, &after), 5.0, 0.01);
    assert!(
        reasons.iter().all(|r| !r.contains("object B")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("object A")),
        "{reasons:?}"
    );
}

#[test]
fn a_higher_noise_level_calls_fewer_changes() {
    // The normal tail: 0.27% beyond 3 standard deviations, 0.0063% beyond 4.
    assert!((two_sided_p(3.0) - 0.0027).abs() < 1e-5);
    assert!((two_sided_p(4.0) - 6.33e-5).abs() < 1e-6);
    assert!((two_sided_p(1.0) - 0.3173).abs() < 1e-4);
    // 1000 -> 1120 samples: 2.6 standard deviations of the difference; 1000
    // -> 1200: 4.3.
    assert!(!beyond_noise_at(1000, 1120, 3.0));
    assert!(beyond_noise_at(1000, 1200, 3.0) && beyond_noise_at(1000, 1200, 4.0));
    assert!(beyond_noise_at(1000, 1160, 3.0) && !beyond_noise_at(1000, 1160, 4.0));
    // A row of 1,000 of 2,000 samples before and 1,380 of 2,380 after (z
    // about 3.5): a change at 3, noise at 4.
    assert!(share_beyond_noise_at(1000, 2000, 1380, 2380, 3.0));
    assert!(!share_beyond_noise_at(1000, 2000, 1380, 2380, 4.0));
    // By the exact test (at most 1,000 samples): 100 -> 155 of 1,000 each,
    // p about 0.0007.
    assert!(share_beyond_noise_at(100, 1000, 155, 1000, 3.0));
    assert!(!share_beyond_noise_at(100, 1000, 155, 1000, 4.0));
    // The whole diff at 4: A's share 50% -> 58.5% of 2,000 samples each
    // (z about 3.6) is within noise and no reason to fail; at 3 it is both.
    let before = db("/a", &[("A", 12, 1000), ("B", 13, 1000)]);
    let after = db("/a", &[("A", 12, 1170), ("B", 13, 830)]);
    let row = |d: &Diff| {
        d.objects
            .iter()
            .find(|r| r.name == "A")
            .unwrap()
            .beyond_noise
    };
    let at3 = diff(&before, &after);
    assert!(row(&at3));
    assert!(worse(&at3, 0.0, 0.01)
        .iter()
        .any(|r| r.contains("object A")));
    let at4 = diff_at(&before, &after, 4.0);
    assert!(!row(&at4));
    assert_eq!(at4.noise_sigmas, 4.0);
    assert!(
        worse(&at4, 0.0, 0.01).is_empty(),
        "{:?}",
        worse(&at4, 0.0, 0.01)
    );
}

#[test]
fn a_total_that_rose_with_every_object_alike_says_so() {
    // The whole run took 20% longer (a loaded machine): both objects rose
    // alike, their shares stayed, and only the total is a reason, telling
    // that no share rose.
    let before = db("/a", &[("A", 12, 1000), ("B", 13, 1000)]);
    let after = db("/a", &[("A", 12, 1200), ("B", 13, 1200)]);
    let reasons = worse(&diff(&before, &after), 0.0, 0.01);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("application's objects"), "{reasons:?}");
    assert!(reasons[0].contains("no object's share rose"), "{reasons:?}");
    // When an object's share rose, the total's reason does not say so.
    let after = db("/a", &[("A", 12, 1400), ("B", 13, 1000)]);
    let reasons = worse(&diff(&before, &after), 0.0, 0.01);
    assert!(
        reasons.iter().any(|r| r.contains("object A")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .all(|r| !r.contains("no object's share rose")),
        "{reasons:?}"
    );
}

#[test]
fn unknown_addresses_pair_with_a_database_that_did_not_name_them() {
    let unknown = |mut d: Database| {
        for o in d
            .objects
            .iter_mut()
            .filter(|o| o.name.starts_with("<unknown"))
        {
            o.kind = ObjectKind::Unknown;
            o.alloc_path.clear();
        }
        d
    };
    let before = unknown(db("/a", &[("<unknown address>", 0, 30), ("A", 12, 70)]));
    let after = unknown(db(
        "/a",
        &[
            ("<unknown address: [vdso]/[vvar]>", 0, 10),
            ("<unknown address: not mapped at exit>", 0, 15),
            ("A", 12, 75),
        ],
    ));
    let unknown_rows = |d: &Diff| -> Vec<Row> {
        d.objects
            .iter()
            .filter(|r| r.name.starts_with("<unknown"))
            .cloned()
            .collect()
    };
    let silent = |d: &Diff| d.warnings.iter().all(|w| !w.contains("unknown addresses"));
    let d = diff(&before, &after);
    let rows = unknown_rows(&d);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].name, "<unknown address>");
    assert_eq!(rows[0].before.unwrap().samples, 30);
    assert_eq!(rows[0].after.unwrap().samples, 25);
    assert!(
        d.warnings.iter().any(|w| w.contains("unknown addresses")),
        "{:?}",
        d.warnings
    );
    // Both named: the rows stay apart, with no word about it.
    let d = diff(&after, &after);
    assert_eq!(unknown_rows(&d).len(), 2);
    assert!(silent(&d), "{:?}", d.warnings);
    // Two databases of today's format, one of whose samples reached no
    // unknown mapping (only `<unknown address>`): no word either, and the
    // rows stay apart.
    let today = |mut d: Database| {
        d.info.format = crate::database::DB_FORMAT;
        d
    };
    let d = diff(&today(before), &today(after));
    assert_eq!(unknown_rows(&d).len(), 3);
    assert!(silent(&d), "{:?}", d.warnings);
}

#[test]
fn share_z_is_a_two_proportion_test() {
    // 11 -> 9 of 100 each: far within noise.
    assert!(share_z(11, 100, 9, 100).abs() < 1.0);
    // 100 -> 200 of 1000 each: 10% -> 20%, about 6 standard errors.
    let z = share_z(100, 1000, 200, 1000);
    assert!((5.5..6.5).contains(&z), "{z}");
    assert!(share_z(200, 1000, 100, 1000) < -5.5);
    // Nothing to tell apart: an empty run, a row of everything or nothing.
    assert_eq!(share_z(5, 0, 5, 10), 0.0);
    assert_eq!(share_z(10, 10, 20, 20), 0.0);
    assert_eq!(share_z(0, 10, 0, 20), 0.0);
    // The same shares in a run twice as long: no change.
    assert!(share_z(300, 1000, 600, 2000).abs() < 1e-9);
}

#[test]
fn a_few_samples_are_never_a_change() {
    // 0 -> 1 or 2 samples of thousands: the normal approximation says
    // z > 3; the exact test does not.
    assert!(share_z(0, 64_246, 2, 4_222) > 3.0);
    assert!(!share_beyond_noise(0, 64_246, 1, 4_222));
    assert!(!share_beyond_noise(0, 64_246, 2, 4_222));
    // 0 -> 20 of equal runs is a change, and so is 40 -> 0.
    assert!(share_beyond_noise(0, 1000, 20, 1000));
    assert!(share_beyond_noise(40, 1000, 0, 1000));
    // 11 -> 9 is not; 100 -> 200 is.
    assert!(!share_beyond_noise(11, 100, 9, 100));
    assert!(share_beyond_noise(100, 1000, 200, 1000));
    // Large rows: the z rule (both ways).
    assert!(share_beyond_noise(5_000, 100_000, 6_000, 100_000));
    assert!(!share_beyond_noise(5_000, 100_000, 5_100, 100_000));
    assert!(!share_beyond_noise(0, 0, 5, 10));
}

#[test]
fn rows_say_which_changes_are_beyond_noise() {
    // B: 11 -> 9 samples (-18%) of about 1000: noise. C: 100 -> 300:
    // beyond noise. A takes the rest.
    let before = db("/a", &[("A", 12, 889), ("B", 13, 11), ("C", 14, 100)]);
    let after = db("/a", &[("A", 12, 891), ("B", 13, 9), ("C", 14, 300)]);
    let d = diff(&before, &after);
    let row = |name: &str| d.objects.iter().find(|r| r.name == name).unwrap();
    assert!(!row("B").beyond_noise, "{:?}", row("B"));
    assert!(row("C").beyond_noise && row("C").z > 3.0, "{:?}", row("C"));
    // A's count barely moved but its share fell from 89% to 74%: changed.
    assert!(row("A").beyond_noise && row("A").z < -3.0, "{:?}", row("A"));
    // Changes beyond noise are listed first.
    let first_noise = d.objects.iter().position(|r| !r.beyond_noise).unwrap();
    assert!(d.objects[first_noise..].iter().all(|r| !r.beyond_noise));
    assert_eq!(d.objects[first_noise].name, "B");

    let text = to_text(&d, 10);
    assert!(
        text.contains("data objects: 2 of 3 changed beyond sampling noise"),
        "{text}"
    );
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with("matched") && l.contains(&format!(" {name} ")))
            .unwrap_or_else(|| panic!("no row {name}: {text}"))
            .to_string()
    };
    assert!(line("B").trim_end().ends_with("within noise"), "{text}");
    assert!(line("C").trim_end().ends_with("changed"), "{text}");
    let hidden = to_text_with(&d, 10, true);
    assert!(!hidden.contains(" B "), "{hidden}");
    assert!(hidden.contains("(1 within noise not shown)"), "{hidden}");
    let csv = to_csv(&d);
    assert!(csv.lines().next().unwrap().ends_with(",z,beyond_noise"));
}

#[test]
fn rows_without_samples_in_either_run_are_not_changes() {
    let before = db("/a", &[("A", 12, 50), ("Z", 13, 0), ("V", 14, 0)]);
    let after = db("/a", &[("A", 12, 50), ("Z", 13, 0), ("N", 15, 0)]);
    let d = diff(&before, &after);
    let names: Vec<&str> = d.objects.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["A"], "{:?}", d.objects);
    let text = to_text(&d, 10);
    assert!(!text.contains("from 0"), "{text}");
    assert!(
        text.contains("total memory time: 50 -> 50 samples (+0.0%, within noise)"),
        "{text}"
    );
}
