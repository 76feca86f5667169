//! docs/VIEWER.md's screen captures are the snapshot tests' screens
//! (`tests/panes.rs`, `tests/snapshots/panes__*.snap`): every ```text
//! block that follows a `<!-- snapshot: NAME -->` line must equal the body
//! of `panes__NAME.snap`, so that the docs show what the viewer draws
//! today. After a change of the screens, `just viewer-docs` (this test
//! with `HPCVIEW_UPDATE_DOCS=1`) rewrites those blocks from the snapshots.
//! And every key of the help popup (`view::KEYS`) is in VIEWER.md's key
//! table. docs/GUIDE.md's detail-pane capture (after `<!-- capture:
//! detail-numa -->`) is the detail pane of C in the hand-built
//! two-thread fixture with first-touch counts added, from its hot range
//! to the NUMA evidence, in a pane 36 characters wide (rewritten by the
//! same `HPCVIEW_UPDATE_DOCS=1`).

use std::path::{Path, PathBuf};

/// The environment variable that makes the test rewrite VIEWER.md.
const UPDATE: &str = "HPCVIEW_UPDATE_DOCS";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The screen stored in snapshot `name` (without insta's header).
fn snapshot(name: &str) -> String {
    let path = crate_dir().join(format!("tests/snapshots/panes__{name}.snap"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    // Header: "---", its fields, "---"; then the screen.
    let mut parts = text.splitn(3, "---\n");
    let (_, _, body) = (parts.next(), parts.next(), parts.next());
    body.unwrap_or_else(|| panic!("{} has no insta header", path.display()))
        .trim_end_matches('\n')
        .to_string()
}

/// VIEWER.md with every marked capture replaced by its snapshot; the
/// names of the captures that differed.
fn regenerate(doc: &str) -> (String, Vec<String>, usize) {
    let mut out = Vec::new();
    let mut stale = Vec::new();
    let mut marked = 0;
    let mut lines = doc.lines().peekable();
    while let Some(line) = lines.next() {
        out.push(line.to_string());
        let Some(name) = line
            .strip_prefix("<!-- snapshot: ")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        marked += 1;
        assert_eq!(
            lines.next(),
            Some("```text"),
            "the snapshot marker {name} is not followed by a ```text block"
        );
        let mut old = Vec::new();
        for l in lines.by_ref() {
            if l == "```" {
                break;
            }
            old.push(l);
        }
        let new = snapshot(name);
        if old.join("\n") != new {
            stale.push(name.to_string());
        }
        out.push("```text".into());
        out.push(new);
        out.push("```".into());
    }
    let mut text = out.join("\n");
    if doc.ends_with('\n') {
        text.push('\n');
    }
    (text, stale, marked)
}

#[test]
fn viewer_md_captures_are_the_snapshots() {
    let path: &Path = &crate_dir().join("../docs/VIEWER.md");
    let doc = std::fs::read_to_string(path).expect("read docs/VIEWER.md");
    let (text, stale, marked) = regenerate(&doc);
    assert!(marked >= 7, "only {marked} snapshot markers in VIEWER.md");
    if std::env::var_os(UPDATE).is_some() {
        if text != doc {
            std::fs::write(path, &text).expect("write docs/VIEWER.md");
            eprintln!("docs/VIEWER.md: rewrote {stale:?}");
        }
        return;
    }
    assert!(
        stale.is_empty(),
        "docs/VIEWER.md's captures {stale:?} differ from the snapshots; run `just viewer-docs` \
         ({UPDATE}=1 cargo test -p hpcview-tui --test doc_captures)"
    );
}

#[test]
fn every_key_of_the_help_is_in_viewer_md() {
    let doc = std::fs::read_to_string(crate_dir().join("../docs/VIEWER.md")).unwrap();
    let table: String = doc
        .split("## Keys")
        .nth(1)
        .expect("a Keys section")
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').nth(1).unwrap_or("").to_lowercase() + "\n")
        .collect();
    for (keys, what) in hpcview_tui::view::KEYS {
        for key in keys
            .split_whitespace()
            .filter(|k| *k != "/" || keys.starts_with('/'))
        {
            assert!(
                table.contains(&format!("`{}`", key.to_lowercase())),
                "VIEWER.md's key table lacks `{key}` ({what})"
            );
        }
    }
}

/// The detail lines of C, from its hot range to the NUMA evidence, in
/// the two-thread fixture where thread 0 first-touched every page of C
/// (what `view::detail`'s NUMA test builds).
fn detail_of_c_with_first_touch(width: usize) -> String {
    use hpcview_tui::state::{model::Model, AppState};
    let mut db = hpcview_tui::fixtures::abc();
    db.info.metrics.push(formats::measurement::MetricInfo {
        name: "first_touch".into(),
        unit: "pages".into(),
        description: String::new(),
    });
    for o in &mut db.objects {
        for (t, v) in &mut o.by_thread {
            v.push(if *t == 0 { 50 } else { 0 });
        }
    }
    db.validate().unwrap();
    let app = AppState::new(Model::new(db, None));
    assert_eq!(app.pane().selected_item().unwrap().label, "C");
    let lines = hpcview_tui::view::detail::lines_in(&app, width);
    let from = lines
        .iter()
        .position(|l| l.starts_with("hot range:"))
        .expect("a hot range line");
    let to = lines
        .iter()
        .position(|l| l.trim_start().starts_with("evidence:"))
        .expect("a NUMA evidence line");
    lines[from..=to].iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn guide_detail_capture_is_the_fixture_pane() {
    let path = crate_dir().join("../docs/GUIDE.md");
    let doc = std::fs::read_to_string(&path).expect("read docs/GUIDE.md");
    let marker = "<!-- capture: detail-numa -->\n```text\n";
    let start = doc
        .find(marker)
        .expect("GUIDE's detail-numa capture marker")
        + marker.len();
    let end = start + doc[start..].find("```\n").expect("the capture's end");
    let want = detail_of_c_with_first_touch(36);
    if std::env::var_os(UPDATE).is_some() {
        if doc[start..end] != want {
            let mut text = doc.clone();
            text.replace_range(start..end, &want);
            std::fs::write(&path, text).expect("write docs/GUIDE.md");
        }
        return;
    }
    assert_eq!(
        &doc[start..end],
        want,
        "docs/GUIDE.md's detail-pane capture is not the viewer's pane; run `just viewer-docs`"
    );
}
