//! Findings worth reading, through the real pipeline on
//! examples/access_patterns (known strides and misalignment): every
//! finding states its evidence and has enough of it; a run with too few
//! memory samples says so in the report and makes no finding.

use std::path::Path;
use std::process::Command;

use pipeline_tests::*;

fn report(db: &Path) -> String {
    let out = run(Command::new(tool("hpcview-tui"))
        .arg(db)
        .args(["--report", "--view", "data", "--top", "20"]));
    ok_stdout(&out, "hpcview-tui --report")
}

/// Memory samples from the header ("... (N of M memory samples)").
fn memory_samples(text: &str) -> u64 {
    let head = text.lines().next().unwrap();
    let before = head
        .split(" memory samples)")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no memory samples in {head}"));
    before.parse().unwrap()
}

/// The findings: (object line, evidence line) pairs.
fn findings(text: &str) -> Vec<(&str, &str)> {
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Findings"))
        .collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("- "))
        .map(|(i, l)| (*l, lines.get(i + 1).copied().unwrap_or("")))
        .collect()
}

/// "  evidence: N sampled accesses of the object ..." -> N.
fn evidence_samples(evidence: &str) -> u64 {
    evidence
        .trim_start()
        .strip_prefix("evidence: ")
        .and_then(|e| e.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no evidence count in {evidence:?}"))
}

#[test]
fn findings_state_their_evidence_and_thin_runs_say_so() {
    let dir = scratch("findings");
    let exe = compile_c("access_patterns/access_patterns.c", &dir, &[]);

    // A run long enough for findings: each one has its evidence line, with
    // at least the minimum of sampled accesses of its object.
    let full = dir.join("full");
    std::fs::create_dir_all(&full).unwrap();
    let p = profile(&full, "mem:soft@1000000", &exe, &["16", "100"]);
    let text = report(&p.db);
    let found = findings(&text);
    assert!(!found.is_empty(), "{text}");
    for (finding, evidence) in &found {
        assert!(
            evidence.starts_with("  evidence: ")
                && evidence.contains("sampled accesses of the object"),
            "{finding} has no evidence line:\n{text}"
        );
        assert!(
            evidence_samples(evidence) >= 30,
            "{finding}: {evidence}\n{text}"
        );
    }
    // The aligned records and doubles are no misalignment finding.
    assert!(
        found.iter().all(|(f, _)| !f.starts_with("- aligned:")),
        "{text}"
    );
    let few = memory_samples(&text) < 1000;
    assert_eq!(text.contains("Note: only "), few, "{text}");

    // A thin run (a 40 ms period: a few dozen samples at most): the note
    // says so, and no object has the evidence for a finding.
    let thin = dir.join("thin");
    std::fs::create_dir_all(&thin).unwrap();
    let p = profile(&thin, "mem:soft@40000000", &exe, &["4", "100"]);
    let text = report(&p.db);
    let n = memory_samples(&text);
    assert!(n < 1000, "{text}");
    assert!(
        text.contains(&format!(
            "Note: only {n} memory samples: a share is uncertain"
        )),
        "{text}"
    );
    for (finding, evidence) in findings(&text) {
        assert!(
            evidence_samples(evidence) >= 30,
            "{finding}: {evidence}\n{text}"
        );
    }
}

/// One row per object: `data`, allocated at one line of `worker` reached
/// from main and from a second thread (two allocation call paths, so two
/// objects in the database), is one row of the report's data table, with
/// the samples of both, and at most one finding of each kind.
#[test]
fn one_allocation_site_reached_by_two_threads_is_one_row() {
    let dir = scratch("findings-dup-site");
    let exe = compile_test_program("dup_site.c", &dir, &["-pthread"]);
    let p = profile(&dir, "mem:soft@500000", &exe, &["50"]);
    assert!(
        p.program_stdout.starts_with("sums "),
        "{}",
        p.program_stdout
    );
    let line = {
        let text = std::fs::read_to_string(root().join("tests/programs/dup_site.c")).unwrap();
        text.lines()
            .position(|l| l.contains("double *data = malloc"))
            .unwrap() as u64
            + 1
    };
    let data = export_json(&p.db, "data");
    let objects: Vec<&serde_json::Value> = data["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| {
            o["alloc_site"]["line"].as_u64() == Some(line)
                && o["alloc_site"]["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("dup_site.c"))
        })
        .collect();
    // The premise: two objects of one name and site in the database.
    assert_eq!(objects.len(), 2, "{data:#}");
    assert!(objects.iter().all(|o| o["name"] == "data"), "{objects:#?}");
    let total: u64 = objects.iter().map(|o| samples(o)).sum();
    assert!(total > 0, "{objects:#?}");

    let out = run(Command::new(tool("hpcview-tui"))
        .arg(&p.db)
        .args(["--report", "--view", "data", "--top", "0"]));
    let text = ok_stdout(&out, "hpcview-tui --report");
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Data-centric view"))
        .skip(2)
        .take_while(|l| !l.is_empty() && !l.starts_with("Runtime memory"))
        .filter(|l| l.split_whitespace().nth(4) == Some("data"))
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    let row_samples: u64 = rows[0].split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_eq!(row_samples, total, "{text}");
    let mut kinds = std::collections::HashSet::new();
    for (finding, _) in findings(&text) {
        if let Some(rest) = finding.strip_prefix("- data: ") {
            let kind = rest.split(':').next().unwrap();
            assert!(kinds.insert(kind.to_string()), "{finding} twice:\n{text}");
        }
    }

    // The viewer's data pane: one row too, with both objects' samples, and
    // it expands into both allocation call paths.
    let model = hpcview_tui::state::model::Model::open(&p.db).expect("open the database");
    let samples_column = model.samples_metric.expect("a samples column");
    let mut pane =
        hpcview_tui::state::tree::Pane::new(&model, hpcview_tui::state::tree::PaneKind::Data);
    let rows: Vec<u32> = pane
        .roots
        .iter()
        .copied()
        .filter(|&r| pane.items[r as usize].label == "data")
        .collect();
    assert_eq!(rows.len(), 1, "data pane rows named data: {rows:?}");
    let row = rows[0];
    assert_eq!(pane.items[row as usize].inc[samples_column], total);
    pane.materialize(&model, row);
    let paths = pane.items[row as usize]
        .children
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|&k| {
            pane.items[k as usize]
                .label
                .starts_with("allocated at (call path")
        })
        .count();
    assert_eq!(paths, 2, "the row expands into both allocation paths");
}

/// Each finding rests on its own evidence (tests/programs/findings_kinds.c,
/// known answers): `gathered`, read through a shuffled index list, is a
/// data-dependent finding naming its access site; `walked`, doubles read
/// by 16-byte vectors 8 bytes into the block (one in four spans two
/// lines) plus a byte-wise hash, has no misalignment finding (naturally
/// aligned elements, wider accesses) and no data-dependent one (the loop
/// counter); `shifted`, doubles 4 bytes into the block read one at a
/// time, is a misalignment finding (scalar accesses that span lines).
#[test]
fn findings_follow_the_access_evidence() {
    let dir = scratch("findings-kinds");
    let exe = compile_test_program("findings_kinds.c", &dir, &["-fno-tree-vectorize"]);
    let p = profile(&dir, "mem:soft@500000", &exe, &["150"]);
    assert!(
        p.program_stdout.starts_with("sums "),
        "{}",
        p.program_stdout
    );
    let data = export_json(&p.db, "data");
    let object = |name: &str| {
        data["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {data:#}"))
    };
    let text = report(&p.db);
    let found = findings(&text);
    let of = |name: &str| -> Vec<(&str, &str)> {
        let prefix = format!("- {name}: ");
        found
            .iter()
            .filter(|(f, _)| f.starts_with(&prefix))
            .copied()
            .collect()
    };
    // walked: never a misalignment or data-dependent finding, whatever
    // its samples; the premise (vectors spanning lines, a byte site) is
    // checked when it had samples enough to make one.
    assert!(of("walked").is_empty(), "{text}");
    let walked = object("walked");
    if samples(walked) >= 100 {
        assert!(
            walked["misaligned_share"].as_f64().unwrap_or(0.0) > 0.0,
            "{walked:#}"
        );
    }
    // gathered: most of the samples, a data-dependent finding with its
    // evidence, at the gather's line.
    let line = {
        let src = std::fs::read_to_string(root().join("tests/programs/findings_kinds.c")).unwrap();
        src.lines()
            .position(|l| l.contains("sum += gathered[idx[i]]"))
            .unwrap()
            + 1
    };
    let gathered = of("gathered");
    assert_eq!(gathered.len(), 1, "{text}");
    let (finding, evidence) = gathered[0];
    assert!(
        finding.contains("data-dependent addresses")
            && finding.contains(&format!("most at findings_kinds.c:{line} (main)")),
        "{finding}\n{text}"
    );
    assert!(
        evidence.contains("decoded accesses data-dependent (95% interval"),
        "{evidence}\n{text}"
    );
    // shifted: a misalignment finding when it had the evidence (its
    // share is above 1% and it has 30 samples in every run measured:
    // 264-330 of 3,300); never a data-dependent one.
    let shifted = of("shifted");
    assert!(
        shifted
            .iter()
            .all(|(f, _)| f.starts_with("- shifted: misaligned: ")),
        "{text}"
    );
    if samples(object("shifted")) >= 60 {
        assert_eq!(shifted.len(), 1, "{text}");
        assert!(
            shifted[0].1.contains("of them spanning two lines"),
            "{text}"
        );
    }
}
