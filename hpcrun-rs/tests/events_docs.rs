//! The event lists agree: `hpcrun-rs --help`'s EVENTS
//! section, `hpcrun-rs --list-events` and the event table of docs/GUIDE.md
//! ("Events and which machines support them") name the same events in the
//! same order, and every default period that `--list-events` prints
//! (`default: NAME@N`, N > 1) is stated in the help's entry and in the
//! GUIDE's row (as `N` or with thousands separators, `2,000,000`).

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

/// (event, its row) from GUIDE's event table.
fn guide_events() -> Vec<(String, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/GUIDE.md");
    let guide = std::fs::read_to_string(&path).expect("read docs/GUIDE.md");
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
