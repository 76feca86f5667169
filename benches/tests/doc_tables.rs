//! The tables of docs/PERFORMANCE.md and docs/ACCURACY.md are in their
//! harness's format: every table between `<!-- table: TOOL NAME -->` and
//! `<!-- end table -->` reads back into the rows of `overhead --markdown`
//! or `truth` (`benches::doc_tables`), with a header line that names the
//! build and the machine, and renders to the same text; no table names a
//! path of a development machine. Reads the documents only: no benchmark
//! runs.

use std::path::PathBuf;

use benches::doc_tables::{blocks, overhead, truth, Block};

fn doc(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parses and re-renders every block of `name`; returns the blocks.
fn check(name: &str) -> Vec<Block> {
    let text = doc(name);
    let found = blocks(&text).unwrap_or_else(|e| panic!("docs/{name}: {e}"));
    for b in &found {
        let at = format!("docs/{name}:{} ({} {})", b.line, b.tool, b.name);
        for local in ["/work/", "/home/"] {
            assert!(!b.body.contains(local), "{at} names a local path {local}");
        }
        let rendered = match b.tool.as_str() {
            "overhead" => overhead::Table::parse(&b.body)
                .unwrap_or_else(|e| panic!("{at}: {e}"))
                .render(),
            "truth" => truth::Table::parse(&b.body)
                .unwrap_or_else(|e| panic!("{at}: {e}"))
                .render(),
            other => panic!("{at}: no tool writes `{other}` tables"),
        };
        assert_eq!(
            rendered, b.body,
            "{at}: the table does not render back to itself"
        );
    }
    found
}

#[test]
fn performance_tables_are_the_overhead_harness_output() {
    let found = check("PERFORMANCE.md");
    let n = found.iter().filter(|b| b.tool == "overhead").count();
    assert!(n >= 5, "only {n} overhead tables in docs/PERFORMANCE.md");
}

#[test]
fn accuracy_tables_are_the_truth_harness_output() {
    let found = check("ACCURACY.md");
    let n = found.iter().filter(|b| b.tool == "truth").count();
    assert!(n >= 3, "only {n} truth tables in docs/ACCURACY.md");
}

/// A table edited by hand is caught: a column dropped, a header line
/// without the machine, a cell the tool would not write.
#[test]
fn hand_edits_are_caught() {
    let text = doc("PERFORMANCE.md");
    let b = blocks(&text)
        .unwrap()
        .into_iter()
        .find(|b| b.tool == "overhead")
        .expect("an overhead table");
    assert!(overhead::Table::parse(&b.body).is_ok());
    let no_hooks = b.body.replace(" | hooks ms |", " |");
    assert!(overhead::Table::parse(&no_hooks).is_err());
    let no_machine = b.body.replacen(", AVX-512 ", ", AVX512 ", 1);
    assert!(overhead::Table::parse(&no_machine).is_err());
    let local = b.body.replacen("Build ", "Build /home/x ", 1);
    assert!(overhead::Table::parse(&local).is_err());
    let bold = b.body.replacen("| 1.", "| **1.", 1);
    assert!(overhead::Table::parse(&bold).is_err());
    assert!(blocks("<!-- table: overhead x -->\nno end\n").is_err());
}
