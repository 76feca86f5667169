//! The event lists agree: `hpcrun-rs --help`'s EVENTS
//! section, `hpcrun-rs --list-events` and the event table of docs/GUIDE.md
//! ("Events and which machines support them") name the same events in the
//! same order, each with the description of `hpcrun_abi::event_doc`, and
//! every default period that `--list-events` prints (`default: NAME@N`,
//! N above one) is stated in the help's entry and in the GUIDE's row (as
//! `N` or with thousands separators, `2,000,000`). The GUIDE's table between its
//! `<!-- table: events` markers is exactly `event_doc::guide_table()`;
//! `HPCRUN_UPDATE_DOCS=1` (`just guide-events`) rewrites it.

use std::path::PathBuf;
use std::process::Command;

fn hpcrun(arg: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hpcrun-rs"))
        .arg(arg)
        .output()
        .expect("run hpcrun-rs");
    assert!(out.status.success(), "hpcrun-rs {arg}: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// `mem:soft[@NS]` -> `mem:soft`.
fn bare(name: &str) -> String {
    name.split('[').next().unwrap_or(name).to_string()
}

/// An event name: lower case letters, `:` and `-`, optionally `[@X]`.
fn is_event_name(token: &str) -> bool {
    let name = bare(token);
    !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == ':' || c == '-')
}

/// (event, its text) from `--help`'s EVENTS section: entries are
/// `  NAME[@X]   text` with continuation lines indented further.
fn help_events() -> Vec<(String, String)> {
    let help = hpcrun("--help");
    let section = help
        .split("\nEVENTS:\n")
        .nth(1)
        .expect("an EVENTS section in --help");
    let mut out: Vec<(String, String)> = Vec::new();
    for line in section.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            break; // the next section
        }
        let entry = line.strip_prefix("  ").filter(|l| !l.starts_with(' '));
        let token = entry.and_then(|l| l.split_whitespace().next());
        match (entry, token) {
            (Some(l), Some(t)) if is_event_name(t) && l[t.len()..].starts_with("  ") => {
                out.push((bare(t), l.to_string()))
            }
            _ => {
                if let Some(last) = out.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(line.trim());
                }
            }
        }
    }
    out
}

/// (event, its lines) from `--list-events`.
fn listed_events() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in hpcrun("--list-events").lines() {
        if line.starts_with(' ') {
            if let Some(last) = out.last_mut() {
                last.1.push(' ');
                last.1.push_str(line.trim());
            }
        } else if let Some(t) = line.split_whitespace().next() {
            out.push((bare(t), line.to_string()));
        }
    }
    out
}

const START: &str = "<!-- table: events";
const END: &str = "<!-- end table -->";

/// docs/GUIDE.md, and the byte range of its event table (between the
/// line of the start marker and the end marker).
fn guide_table_span() -> (PathBuf, String, std::ops::Range<usize>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/GUIDE.md");
    let guide = std::fs::read_to_string(&path).expect("read docs/GUIDE.md");
    let start = guide.find(START).expect("the events table's start marker");
    let start = start + guide[start..].find('\n').expect("a line after the marker") + 1;
    let end = start
        + guide[start..]
            .find(END)
            .expect("the events table's end marker");
    (path, guide, start..end)
}

/// The GUIDE's table is the one `event_doc` writes (rewritten first under
/// `HPCRUN_UPDATE_DOCS=1`).
#[test]
fn guide_table_is_written_from_the_event_table() {
    let (path, guide, span) = guide_table_span();
    let want = hpcrun_abi::event_doc::guide_table();
    if std::env::var_os("HPCRUN_UPDATE_DOCS").is_some() && guide[span.clone()] != want {
        let mut text = guide.clone();
        text.replace_range(span.clone(), &want);
        std::fs::write(&path, text).expect("write docs/GUIDE.md");
        return;
    }
    assert_eq!(
        &guide[span], want,
        "docs/GUIDE.md's event table is not event_doc::guide_table(): run `just guide-events`"
    );
}

/// Words of `text` joined by single spaces.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every event's description, word for word, in `--help` (wrapped) and
/// `--list-events` (one line), and the help in 80 columns.
#[test]
fn help_and_list_events_describe_every_event_from_the_table() {
    let help = help_events();
    let listed = listed_events();
    for d in &hpcrun_abi::event_doc::DOCS {
        let name = d.event.name();
        let h = &help
            .iter()
            .find(|e| e.0 == name)
            .unwrap_or_else(|| panic!("{name} missing from --help"))
            .1;
        assert!(
            words(h).contains(&words(d.what)),
            "--help's {name} is not the table's description:\n{h}\n{}",
            d.what
        );
        assert!(h.starts_with(&d.usage()), "{h}");
        let l = &listed
            .iter()
            .find(|e| e.0 == name)
            .unwrap_or_else(|| panic!("{name} missing from --list-events"))
            .1;
        assert!(l.contains(d.what), "--list-events' {name}: {l}");
    }
    let full = hpcrun("--help");
    let events = full.split("\nEVENTS:\n").nth(1).expect("EVENTS");
    for line in events.lines() {
        assert!(
            line.chars().count() <= 80,
            "wider than 80 columns: {line:?}"
        );
    }
}

/// (event, its row) from GUIDE's event table.
fn guide_events() -> Vec<(String, String)> {
    let (_, guide, _) = guide_table_span();
    let section = guide
        .split("### Events and which machines support them")
        .nth(1)
        .expect("the GUIDE's events section");
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|row| {
            let name = row.strip_prefix("| `")?.split('`').next()?;
            is_event_name(name).then(|| (bare(name), row.to_string()))
        })
        .collect()
}

#[test]
fn help_list_events_and_guide_agree() {
    let help = help_events();
    let listed = listed_events();
    let guide = guide_events();
    let names = |v: &[(String, String)]| v.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
    assert!(listed.len() >= 7, "{:?}", names(&listed));
    assert_eq!(
        names(&help),
        names(&listed),
        "--help's EVENTS and --list-events differ"
    );
    assert_eq!(
        names(&guide),
        names(&listed),
        "docs/GUIDE.md's event table and --list-events differ"
    );

    // Default periods.
    let mut checked = 0;
    for (name, text) in &listed {
        let Some(n) = text
            .split(&format!("default: {name}@"))
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|d| d.parse::<u64>().ok())
        else {
            continue;
        };
        if n <= 1 {
            continue;
        }
        let states =
            |t: &str| t.contains(&n.to_string()) || t.contains(&formats::notes::thousands(n));
        let h = &help.iter().find(|e| &e.0 == name).unwrap().1;
        let g = &guide.iter().find(|e| &e.0 == name).unwrap().1;
        assert!(
            states(h),
            "--help's {name} does not say its default {n}: {h}"
        );
        assert!(
            states(g),
            "GUIDE's {name} row does not say its default {n}: {g}"
        );
        checked += 1;
    }
    // mem:soft, cpu-time, page-faults at least (hardware events show no
    // default where the machine has no PMU).
    assert!(checked >= 3, "only {checked} defaults checked: {listed:?}");
}
