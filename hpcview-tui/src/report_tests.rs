//! Unit tests of the text report on hand-built databases.

use super::*;
use formats::database::{DataObject, DbInfo, NodeKind, ObjectKind, Tree, TreeNode};
use formats::measurement::{MetricInfo, SampleStats};

fn frame(function: &str, file: &str, line: u32, module: &str) -> Frame {
    Frame {
        function: function.into(),
        file: Some(file.into()),
        line: Some(line),
        module: module.into(),
        inlined: false,
        offset: None,
    }
}

fn node(parent: u32, kind: NodeKind, v: u64) -> TreeNode {
    TreeNode {
        parent,
        kind,
        exclusive: vec![v],
        threads: None,
        ranks: None,
        by_rank: Vec::new(),
    }
}

/// main allocates C (90 samples) and B (10 samples) in /src/abc.c;
/// the accesses are in `compute`.
fn sample_db() -> Database {
    let frames = vec![
        frame("main", "/src/abc.c", 20, "/bin/abc"),
        frame("compute", "/src/abc.c", 4, "/bin/abc"),
        frame("main", "/src/abc.c", 21, "/bin/abc"),
        frame(
            "__libc_malloc",
            "/usr/src/malloc.c",
            3000,
            "/usr/lib/libc.so.6",
        ),
    ];
    let mut data = Tree::default();
    data.nodes
        .push(node(0, NodeKind::Root("heap data".into()), 0)); // 1
    data.nodes.push(node(1, NodeKind::Frame(0), 0)); // 2: main:20
    data.nodes.push(node(2, NodeKind::Object(0), 0)); // 3: C
    data.nodes.push(node(3, NodeKind::Frame(1), 90)); // 4
    data.nodes.push(node(1, NodeKind::Frame(2), 0)); // 5: main:21
    data.nodes.push(node(5, NodeKind::Frame(3), 0)); // 6: malloc
    data.nodes.push(node(6, NodeKind::Object(1), 0)); // 7: B
    data.nodes.push(node(7, NodeKind::Frame(1), 10)); // 8
    let mut code = Tree::default();
    code.nodes.push(node(0, NodeKind::Frame(1), 100));
    Database {
        info: DbInfo {
            events: vec!["mem:soft".into()],
            processes: 1,
            threads: 2,
            profiles: 2,
            metrics: vec![MetricInfo {
                name: "samples".into(),
                unit: "samples".into(),
                description: String::new(),
            }],
            stats: SampleStats {
                samples: 120,
                memory_samples: 100,
                address_recovered: 75,
                ..SampleStats::default()
            },
            ..DbInfo::default()
        },
        frames,
        code,
        data,
        objects: vec![
            DataObject {
                kind: ObjectKind::Heap,
                name: "C".into(),
                alloc_path: vec![0],
                bytes: 800,
                allocations: 1,
                node: 3,
                ..Default::default()
            },
            DataObject {
                kind: ObjectKind::Heap,
                name: "B".into(),
                alloc_path: vec![2, 3],
                bytes: 800,
                allocations: 1,
                node: 7,
                ..Default::default()
            },
        ],
    }
}

#[test]
fn report_text() {
    let db = sample_db();
    db.validate().unwrap();
    let text = render(&db, Tables::Both, 10);
    let expected = "\
events: mem:soft | processes: 1 | threads: 2 | metric: samples | address recovery: 75.0% (75 of 100 memory samples)
Note: only 100 memory samples: a share is uncertain by about ±10 points at 50% and ±6 at 10% (95%); findings need 30 samples of an object. For shares worth comparing, measure 1000 or more: run longer, or sample 10x as often (-e mem:soft@NS with NS the period divided by that)

Data-centric view: top 2 of 2 objects by samples (100 in all)
#   share   samples  kind     name  allocation site
1   90.0%        90  heap     C     main /src/abc.c:20
2   10.0%        10  heap     B     main /src/abc.c:21

Code-centric view: top 1 of 1 functions by samples (100 in all)
 share   samples  function  hottest line
100.0%       100  compute   /src/abc.c:4
";
    assert_eq!(text, expected);
}

/// A signal that stood for several periods counts them all: the tables'
/// column is then named `periods`, and its total is the one the header
/// gives. Rows without any of the metric are left out of the top lists.
#[test]
fn tables_name_their_unit_and_leave_out_empty_rows() {
    let mut db = sample_db();
    db.info.stats.timer_overruns = 20;
    let text = render(&db, Tables::Both, 10);
    assert!(
        text.contains("Data-centric view: top 2 of 2 objects by periods (100 in all)\n#   share   periods  kind"),
        "{text}"
    );
    assert!(
        text.contains("Code-centric view: top 1 of 1 functions by periods (100 in all)"),
        "{text}"
    );
    // `main` (no samples of its own) is not a row of the code table.
    let code = &text[text.find("Code-centric").unwrap()..];
    assert!(!code.lines().any(|l| l.contains("  main ")), "{text}");
    assert!(text.contains("top 1 of 1 functions"), "{text}");
}

#[test]
fn few_memory_samples_get_a_note() {
    // 100 memory samples: a share is +-10 points at 50%.
    let db = sample_db();
    let note = few_samples_note(&db);
    assert!(
        note.starts_with("Note: only 100 memory samples: a share is uncertain by about ±10 points"),
        "{note}"
    );
    assert!(note.contains("10x as often"), "{note}");
    assert!(render(&db, Tables::Data, 5).contains(&note));
    let mut many = sample_db();
    many.info.stats.memory_samples = FEW_SAMPLES;
    assert_eq!(few_samples_note(&many), "");
}

#[test]
fn objects_of_one_name_and_site_are_one_row() {
    let mut db = sample_db();
    // B again, from another call path: same name, same site frame.
    db.objects[1].alloc_site = Some(0);
    let mut twin = db.objects[1].clone();
    db.data.nodes.push(node(5, NodeKind::Object(2), 0)); // 9
    db.data.nodes.push(node(9, NodeKind::Frame(1), 5)); // 10
    twin.node = 9;
    db.objects.push(twin);
    let text = data_table(&db, 10, None);
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("  B ")).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].contains("15"), "{text}");
    assert!(text.contains("top 2 of 2 objects"), "{text}");
}

#[test]
fn header_counts_short_lived_threads() {
    let mut db = sample_db();
    assert!(!header(&db).contains("short-lived"));
    db.info.stats.short_lived_threads = 598;
    db.info.stats.short_lived_cpu_ns = 24_000_000;
    let line = header(&db);
    assert!(
        line.contains("(+598 short-lived without samples, 24.0 ms of CPU time) | metric"),
        "{line}"
    );
}

#[test]
fn top_and_single_views() {
    let db = sample_db();
    let text = render(&db, Tables::Data, 1);
    assert!(text.contains("top 1 of 2 objects"));
    assert!(!text.contains("Code-centric"));
    let text = render(&db, Tables::Code, 0);
    assert!(!text.contains("Data-centric"));
    assert!(text.contains("top 0 of 1 functions"));
}

#[test]
fn empty_database() {
    let text = render(&Database::default(), Tables::Both, 10);
    assert!(text.contains("no data objects"), "{text}");
    assert!(text.contains("no samples"), "{text}");
    assert!(text.contains("address recovery: n/a"), "{text}");
}

#[test]
fn bottleneck_report() {
    let text = render(&crate::fixtures::abc(), Tables::Bottleneck, 2);
    let rows: Vec<&str> = text.lines().collect();
    let c = rows
        .iter()
        .position(|l| l.ends_with("  C"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        rows[c].contains("90.0%") && rows[c].contains("optimise first"),
        "{text}"
    );
    // C's samples over the cpu_samples of compute, which accessed it.
    assert!(rows[c].contains("86%"), "{text}");
    assert!(
        rows[c + 1].ends_with("  B") && rows[c + 1].contains("no optimisation needed"),
        "{text}"
    );
    let f = rows.iter().position(|l| l.ends_with("  compute")).unwrap();
    assert!(
        rows[f].contains("95%") && rows[f].contains("optimise first"),
        "{text}"
    );
    // `main` and the start-up frames have no samples of their own: only
    // `compute` is a row.
    assert!(text.contains("functions: top 1 of 1"), "{text}");
    // Without cpu_samples there is no proxy: said, not invented.
    let text = render(&sample_db(), Tables::Bottleneck, 2);
    assert!(text.contains("proxy is n/a"), "{text}");
}

#[test]
fn compared_report_has_delta_columns() {
    let after = crate::fixtures::abc_faster();
    let mut base = Baseline::new("runs/before".into(), crate::fixtures::abc(), &after);
    let text = render_compared(&after, Tables::Both, 10, &mut base);
    let line = |what: &str| -> &str {
        text.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what}:\n{text}"))
    };
    assert!(
        line("baseline: runs/before").contains("percentage points"),
        "{text}"
    );
    assert!(line("baseline: runs/before").contains("memory samples 1000 -> 400"));
    assert!(
        line("#   share  Δshare").ends_with("allocation site"),
        "{text}"
    );
    // C: 90% -> 75%; B: 7% -> 17.5%.
    assert!(line("  C ").contains(" 75.0%   -15.0  "), "{text}");
    assert!(line("  B ").contains(" 17.5%   +10.5  "), "{text}");
    assert!(line(" share  Δshare   samples  function").contains("hottest line"));
    assert!(line("compute ").contains("100.0%     0.0  "), "{text}");
    let text = render_compared(&after, Tables::Bottleneck, 10, &mut base);
    let c = text.lines().find(|l| l.ends_with("  C")).unwrap();
    assert!(c.contains("75.0%   -15.0  "), "{text}");
    // Without a baseline: no column.
    assert!(!render(&after, Tables::Both, 10).contains("Δshare"));
}

#[test]
fn long_names_are_shortened_in_the_middle() {
    assert_eq!(fit("abcdef", 4), "a…ef");
    assert_eq!(fit("abc", 4), "abc");
    // Two names that differ only at the end stay two names.
    let a = fit(
        "Open MPI: shared-memory transport /dev/shm/vader_segment.node.0.0",
        40,
    );
    let b = fit(
        "Open MPI: shared-memory transport /dev/shm/vader_segment.node.0.1",
        40,
    );
    assert_eq!(a.chars().count(), 40);
    assert_ne!(a, b);
}

#[test]
fn hidden_runtime_leaves_every_table() {
    let db = crate::fixtures::abc_openmp();
    let hide = Options { hide_runtime: true };
    for tables in [Tables::Both, Tables::Bottleneck] {
        let shown = render_with_options(&db, tables, 40, Options::default());
        let hidden = render_with_options(&db, tables, 40, hide);
        let rows = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with("Runtime memory") && !l.starts_with("Waiting"))
                .any(|l| l.contains("gomp_") || l.contains("OpenMP runtime:"))
        };
        assert!(rows(&shown), "{shown}");
        assert!(!rows(&hidden), "{hidden}");
        // The waiting line stays: 300 of 1,780 cpu samples.
        assert!(
            hidden.contains("Waiting in MPI/OpenMP: 16.9% of cpu_samples"),
            "{hidden}"
        );
    }
}

#[test]
fn runtime_rows_of_the_bottleneck_table_are_not_advice_for_the_program() {
    let db = crate::fixtures::abc_openmp();
    let text = render(&db, Tables::Bottleneck, 40);
    let gomp: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("gomp_") || l.contains("OpenMP runtime:"))
        .filter(|l| !l.starts_with("Waiting"))
        .collect();
    // libgomp's barrier object and function; its thread start, without
    // memory samples, is no row.
    assert_eq!(gomp.len(), 2, "{text}");
    for l in gomp {
        assert!(l.contains(RUNTIME_ADVICE), "{text}");
    }
}

/// `hpcprof-rs export --view bottleneck`, the report's bottleneck table
/// and the viewer's `b` order list rows in one order
/// (`formats::views::bottleneck_order`): the MPI library's buffer and
/// `MPI_Sendrecv`, which rank first by their figures alone, come after
/// every row of the program in all three.
#[test]
fn export_report_and_viewer_share_the_bottleneck_order() {
    use crate::state::model::Model;
    use crate::state::tree::{Pane, PaneKind, Sort, SortKey};
    use formats::views::{Quadrant, Region};
    let db = crate::fixtures::abc_mpi();
    let export = formats::export::build(&db, formats::export::View::Bottleneck, None);
    let rows = export.bottleneck.expect("bottleneck rows");
    let runtime = |name: &str| name.starts_with("Open MPI") || name.starts_with("MPI_");
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let first = names.iter().position(|n| runtime(n)).expect("runtime rows");
    assert!(first > 0, "{names:?}");
    assert!(names[first..].iter().all(|n| runtime(n)), "{names:?}");
    // By their figures alone (quadrant, score) the library's rows would
    // come first: `MPI_Sendrecv` and the buffer are memory bound with a
    // large share, and score above `compute`.
    let by_figures = formats::views::bottleneck(&db, Default::default());
    let program_first = by_figures.iter().find(|r| !r.runtime).unwrap().rank();
    for r in by_figures.iter().filter(|r| r.runtime && r.share > 0.0) {
        assert_eq!(r.quadrant, Quadrant::OptimiseFirst, "{}", r.name);
        let figures = formats::views::BottleneckRank {
            runtime: false,
            ..r.rank()
        };
        assert!(
            formats::views::bottleneck_order(&figures, &program_first).is_lt(),
            "{}",
            r.name
        );
    }
    // The CSV export lists the same rows in the same order.
    let csv = formats::export::to_csv(&db, formats::export::View::Bottleneck, None);
    let csv_names: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap())
        .collect();
    assert_eq!(csv_names, names);

    // Objects and functions with samples, in export order, against the
    // report's two tables and the viewer's data and flat panes.
    let model = Model::new(db.clone(), None);
    let text = render(&db, Tables::Bottleneck, 40);
    for (kind, is) in [
        (
            PaneKind::Data,
            (|r: &Region| matches!(r, Region::Object(_))) as fn(&Region) -> bool,
        ),
        (PaneKind::Flat, |r: &Region| *r == Region::Function),
    ] {
        let exported: Vec<&str> = by_figures
            .iter()
            .filter(|r| is(&r.region) && r.share > 0.0)
            .map(|r| r.name)
            .collect();
        let mut pane = Pane::new(&model, kind);
        pane.set_sort(
            &model,
            Sort {
                key: SortKey::Bottleneck,
                descending: true,
            },
        );
        let viewer: Vec<String> = pane
            .roots
            .iter()
            .filter(|&&id| pane.bottleneck(&model, id).share > 0.0)
            .map(|&id| pane.items[id as usize].label.clone())
            .collect();
        assert_eq!(viewer.len(), exported.len(), "{viewer:?} {exported:?}");
        for (v, e) in viewer.iter().zip(&exported) {
            assert!(
                v.starts_with(e),
                "{kind:?}: viewer {viewer:?}, export {exported:?}"
            );
        }
        // The report: each exported name on a row, in this order.
        let mut at = 0;
        for e in &exported {
            let line = text
                .lines()
                .skip(at)
                .position(|l| l.ends_with(&format!("  {e}")));
            let line = line.unwrap_or_else(|| panic!("{e} not after line {at}: {text}"));
            at += line + 1;
        }
    }
}
