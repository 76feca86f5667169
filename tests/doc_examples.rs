//! The example outputs of README.md and docs/GUIDE.md are the tools'
//! output today.
//!
//! * Every ``` block of docs/GUIDE.md after a `<!-- example: NAME -->`
//!   line is produced here from a real run of a bundled program
//!   (examples/, tests/programs/): the commands the doc shows, run in a
//!   scratch directory, their output with the workspace's path shortened
//!   to `...` and the host's name written `vm`. The doc's block must have
//!   the fresh output's *form*: the same paragraphs, each with the same
//!   set of lines once every number (with its unit of size or time) is
//!   replaced by `#` (counts, shares, sizes, times and line numbers vary
//!   from run to run) and runs of spaces are one (columns widen with
//!   their numbers); the order of the lines inside a paragraph is not
//!   compared (rows of similar counts swap), nor a count of rows not
//!   listed. Blocks: the duplicate-profile note, the untracked-blocks
//!   warning, csr_rows' rows, the `--baseline` report, the diff, its
//!   `--fail-if-worse`, the placement and NUMA advice.
//!   `UPDATE_DOCS=1` (`just guide-examples`) rewrites each block from its
//!   fresh run instead.
//! * A block after `<!-- example of the form: NAME -->` was captured from
//!   a third-party application (LAMMPS, LULESH) that the tests cannot run;
//!   its text says so and names the version. Its lines of fixed form (the
//!   data view's headline and column header, the profiler-time line) must
//!   have the form of the same lines of a real run of examples/abc.
//! * README's headline numbers (array C allocated at abc.c:LINE holding
//!   LO-HI% of the data-centric samples, A and B a few percent each): the
//!   line is C's `malloc` in examples/abc/abc.c, and a real run's shares
//!   are within a tolerance of the stated ranges (this run's shares depend
//!   on the machine and its load: 25 points below, 15 above).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use pipeline_tests::*;

/// The environment variable that makes the tests rewrite the blocks.
const UPDATE: &str = "UPDATE_DOCS";

/// Period of the abc runs, as the GUIDE's commands give it.
const EVENT: &str = "mem:soft@100000";

/// Serialises the rewrites of a document by tests running in parallel.
static WRITING: Mutex<()> = Mutex::new(());

fn doc_path(rel: &str) -> PathBuf {
    root().join(rel)
}

/// A marked block of a document: its name and the byte range of its body
/// (the lines between the fences, with their line ends).
struct Block {
    name: String,
    line: usize,
    body: std::ops::Range<usize>,
}

/// The blocks of `doc` that follow a `<!-- MARKER: NAME -->` line.
fn blocks(doc: &str, marker: &str) -> Vec<Block> {
    let prefix = format!("<!-- {marker}: ");
    let mut out = Vec::new();
    let mut offset = 0;
    let mut lines = doc.split_inclusive('\n').enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        offset += line.len();
        let Some(name) = line
            .trim_end()
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().map(|(_, l)| l).unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "line {}: the marker of {name} is not followed by a ``` block",
            n + 1
        );
        offset += fence.len();
        let start = offset;
        for (_, l) in lines.by_ref() {
            if l.trim_end() == "```" {
                break;
            }
            offset += l.len();
        }
        out.push(Block {
            name: name.to_string(),
            line: n + 1,
            body: start..offset,
        });
        offset += "```\n".len();
    }
    out
}

/// Units of sizes and times that follow a number.
const UNITS: [&str; 9] = ["B", "KiB", "MiB", "GiB", "TiB", "ns", "us", "ms", "s"];

/// `line` with every number (digits with `,` and `.`, a sign, `%`, a unit
/// of [`UNITS`]) as `#` and its runs of spaces as one.
fn skeleton(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        let signed = (c == '+' || c == '-') && chars.peek().is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() || signed {
            while let Some(&d) = chars.peek() {
                let more = d.is_ascii_digit()
                    || ((d == ',' || d == '.') && {
                        let mut ahead = chars.clone();
                        ahead.next();
                        ahead.peek().is_some_and(char::is_ascii_digit)
                    });
                if !more {
                    break;
                }
                chars.next();
            }
            if chars.peek() == Some(&'%') {
                chars.next();
            }
            // A unit after the number is part of it: the tools pick the
            // unit by size (`0 B`, `64.0 MiB`; `333 ns`, `19.2 us`).
            let rest: String = chars.clone().collect();
            if let Some(unit) = UNITS.iter().find(|u| {
                rest.strip_prefix(' ')
                    .and_then(|r| r.strip_prefix(**u))
                    .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric()))
            }) {
                for _ in 0..=unit.len() {
                    chars.next();
                }
            }
            out.push('#');
            prev = '#';
        } else if c.is_whitespace() {
            if prev != ' ' {
                out.push(' ');
            }
            prev = ' ';
        } else {
            out.push(c);
            prev = c;
        }
    }
    out.trim().to_string()
}

/// The form of a text: per paragraph (split at blank lines), the set of
/// its lines' skeletons. A count of rows not listed (`(N more)`, `(N
/// within noise not shown)`) is left out: whether a run has such rows
/// (a function or line with one sample) is chance.
fn form(text: &str) -> Vec<BTreeSet<String>> {
    let mut out = vec![BTreeSet::new()];
    let unlisted = ["(# more)", "(# within noise not shown)"];
    for line in text
        .lines()
        .filter(|l| !unlisted.contains(&skeleton(l).as_str()))
    {
        if line.trim().is_empty() {
            if !out.last().unwrap().is_empty() {
                out.push(BTreeSet::new());
            }
        } else {
            out.last_mut().unwrap().insert(skeleton(line));
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// `text` without the profiler-time line's optional clause on slow calls
/// ("; N of the timed calls took 100 us or more, ... loaded machine)").
fn without_slow_calls(text: &str) -> String {
    text.lines()
        .map(
            |line| match (line.find("; "), line.find("loaded machine)")) {
                (Some(_), Some(end)) => {
                    let clause_start = line[..end].rfind("; ").unwrap();
                    format!(
                        "{}{}",
                        &line[..clause_start],
                        &line[end + "loaded machine)".len()..]
                    )
                }
                _ => line.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks (or, under `UPDATE_DOCS`, rewrites) the blocks of `rel` marked
/// `<!-- example: NAME -->` whose NAME is a key of `fresh`; returns the
/// names of the blocks of the wrong form.
fn check_examples(rel: &str, fresh: &[(&str, String)]) {
    let _guard = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let path = doc_path(rel);
    let doc = std::fs::read_to_string(&path).expect("read the document");
    let found = blocks(&doc, "example");
    let mut text = doc.clone();
    let mut stale = Vec::new();
    // From the last block to the first, so that earlier ranges hold.
    let mut todo: Vec<(&Block, &String)> = Vec::new();
    for (name, out) in fresh {
        let b = found
            .iter()
            .find(|b| b.name == *name)
            .unwrap_or_else(|| panic!("{rel} has no <!-- example: {name} --> block"));
        todo.push((b, out));
    }
    todo.sort_by_key(|(b, _)| std::cmp::Reverse(b.body.start));
    for (b, out) in todo {
        let old = &doc[b.body.clone()];
        let mut new = out.trim_end_matches('\n').to_string();
        new.push('\n');
        if form(old) != form(&new) {
            stale.push(format!(
                "{rel}:{} ({}): the doc's block\n{old}is not of the form of today's output\n{new}",
                b.line, b.name
            ));
        }
        text.replace_range(b.body.clone(), &new);
    }
    if std::env::var_os(UPDATE).is_some() {
        if text != doc {
            std::fs::write(&path, text).expect("write the document");
        }
        return;
    }
    assert!(
        stale.is_empty(),
        "{}\nrun `just guide-examples` (UPDATE_DOCS=1 cargo test -p pipeline-tests --test doc_examples) to rewrite them",
        stale.join("\n")
    );
}

/// The body of the third-party block `name` of `rel`.
fn form_example(rel: &str, name: &str) -> String {
    let doc = std::fs::read_to_string(doc_path(rel)).expect("read the document");
    let b = blocks(&doc, "example of the form")
        .into_iter()
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("{rel} has no <!-- example of the form: {name} --> block"));
    doc[b.body].to_string()
}

/// The host's name, written `vm` in the docs.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Output as the docs show it: the workspace's path as `...`, the host's
/// name as `vm`.
fn shown(text: &str) -> String {
    let mut t = text.replace(&root().display().to_string(), "...");
    let h = host();
    if !h.is_empty() {
        t = t.replace(&format!(".{h}."), ".vm.");
    }
    // The diff's last column is padded: no trailing spaces in the docs.
    t.lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

/// Runs `tool args` in `dir`: (status code, stdout, stderr).
fn run_in(
    dir: &Path,
    tool_name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let out = run(Command::new(tool(tool_name))
        .current_dir(dir)
        .args(args)
        .envs(env.iter().copied()));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `tool args` in `dir` and asserts success: (stdout, stderr).
fn ok_in(dir: &Path, tool_name: &str, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let (code, out, err) = run_in(dir, tool_name, args, env);
    assert_eq!(code, 0, "{tool_name} {args:?} failed:\n{out}\n{err}");
    (out, err)
}

/// The lines of `text` that start with `prefix`.
fn lines_starting(text: &str, prefix: &str) -> String {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// README's "array C (allocated at abc.c:LINE): LO-HI%, A and B: LO-HI%
/// each", its words joined by single spaces.
fn readme_claim() -> (u64, (f64, f64), (f64, f64)) {
    let readme = std::fs::read_to_string(doc_path("README.md")).expect("read README.md");
    let words = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let after = |s: &str, what: &str| -> String {
        words
            .split(s)
            .nth(1)
            .unwrap_or_else(|| panic!("README.md does not say `{s}` ({what})"))
            .to_string()
    };
    let c = after("array C (allocated at abc.c:", "C's site");
    let line: u64 = c.split(')').next().unwrap().parse().expect("C's line");
    let range = |text: &str| -> (f64, f64) {
        let r = text.split('%').next().unwrap().trim();
        let (lo, hi) = r.split_once('-').expect("a range LO-HI%");
        (lo.trim().parse().unwrap(), hi.trim().parse().unwrap())
    };
    let c_range = range(c.split_once("): ").expect("C's range").1);
    let ab = after(", A and B: ", "A's and B's range");
    (line, c_range, range(&ab))
}

/// examples/abc strided (`before`) and with `-DC_CONTIGUOUS` (`after`),
/// as "Did my change help?" runs them: the README's numbers, the diff, its
/// `--fail-if-worse`, the viewer's `--baseline` report, the note on a
/// duplicate profile, and the third-party captures' fixed lines.
#[test]
fn abc_examples_are_todays_output() {
    let dir = scratch("doc-examples-abc");
    let src = root().join("examples/abc/abc.c");
    for (out, extra) in [("abc", None), ("abc_contig", Some("-DC_CONTIGUOUS"))] {
        let status = Command::new("gcc")
            .current_dir(&dir)
            .args(["-O2", "-g", "-o", out])
            .args(extra)
            .arg(&src)
            .status()
            .expect("run gcc");
        assert!(status.success(), "gcc {out}");
    }
    for (exe, m, db) in [("./abc", "m1", "before"), ("./abc_contig", "m2", "after")] {
        ok_in(&dir, "hpcrun-rs", &["-e", EVENT, "-o", m, exe, "8"], &[]);
        ok_in(&dir, "hpcprof-rs", &["-o", db, m], &[]);
    }

    // README: C's line and the shares of a real run.
    let (line, (c_lo, c_hi), (ab_lo, ab_hi)) = readme_claim();
    assert_eq!(
        line,
        line_of("abc/abc.c", "cube *C = malloc"),
        "README's C site"
    );
    let objects = export_json(&dir.join("before"), "data")["objects"]
        .as_array()
        .cloned()
        .expect("objects");
    let total: u64 = objects.iter().map(samples).sum();
    let share = |needle: &str| {
        let o = heap_object_at(&objects, "abc.c", line_of("abc/abc.c", needle))
            .unwrap_or_else(|| panic!("no object at {needle}"));
        100.0 * samples(o) as f64 / total as f64
    };
    let (c, b, a) = (
        share("cube *C = malloc"),
        share("cube *B = malloc"),
        share("cube *A = malloc"),
    );
    eprintln!("abc: C {c:.1}%, B {b:.1}%, A {a:.1}% of {total}");
    assert!(
        c >= c_lo - 25.0 && c <= c_hi + 15.0,
        "C holds {c:.1}%, README says {c_lo}-{c_hi}%"
    );
    for (name, s) in [("A", a), ("B", b)] {
        assert!(
            s >= (ab_lo - 25.0).max(0.0) && s <= ab_hi + 15.0,
            "{name} holds {s:.1}%, README says {ab_lo}-{ab_hi}%"
        );
    }
    assert!(c > a + b, "C {c:.1}%, A {a:.1}%, B {b:.1}%");

    // The diff, and the viewer's report against a baseline.
    let (diff, _) = ok_in(
        &dir,
        "hpcprof-rs",
        &["diff", "before", "after", "--hide-noise", "--top", "3"],
        &[],
    );
    let (code, _, err) = run_in(
        &dir,
        "hpcprof-rs",
        &["diff", "after", "before", "--fail-if-worse", "20"],
        &[],
    );
    assert_eq!(code, 1, "--fail-if-worse on the strided run:\n{err}");
    let fail = format!(
        "$ hpcprof-rs diff after before --fail-if-worse 20 > /dev/null; echo $?\n{}{code}\n",
        lines_starting(&err, "hpcprof-rs: worse by more than")
    );
    let baseline_args = [
        "after",
        "--baseline",
        "before",
        "--report",
        "--view",
        "data",
        "--top",
        "3",
    ];
    let (report, _) = ok_in(&dir, "hpcview-tui", &baseline_args, &[]);
    let report = format!("$ hpcview-tui {}\n{report}", baseline_args.join(" "));

    // A copy of a profile beside it is merged once, with a note.
    let m = dir.join("m1");
    let profile = std::fs::read_dir(&m)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "hpcrun"))
        .expect("abc's profile");
    std::fs::copy(&profile, m.join("abc.copy.hpcrun")).unwrap();
    std::fs::rename(&m, dir.join("m")).unwrap();
    let (_, err) = ok_in(
        &dir,
        "hpcprof-rs",
        &["-o", "dup", "m"],
        &[("HPCPROF_RS_TIMINGS", "1")],
    );
    let duplicate = lines_starting(&err, "hpcprof-rs: note: left out 1 duplicate");
    assert!(!duplicate.is_empty(), "no note on the copy:\n{err}");

    check_examples(
        "docs/GUIDE.md",
        &[
            ("diff", shown(&diff)),
            ("fail-if-worse", shown(&fail)),
            ("baseline", shown(&report)),
            ("duplicate", shown(&duplicate)),
        ],
    );

    // The third-party captures' fixed lines have today's form.
    // The clause on calls of 100 us or more appears only when some were
    // that slow (start-up, a loaded machine), so it is left out of both.
    let timing = lines_starting(&err, "hpcprof-rs: profiler time in the program:");
    assert!(!timing.is_empty(), "no profiler-time line:\n{err}");
    let timing = without_slow_calls(&timing);
    let lulesh_timing = form_example("docs/GUIDE.md", "lulesh-profiler-time");
    assert_eq!(
        form(&without_slow_calls(&lulesh_timing)),
        form(&timing),
        "docs/GUIDE.md's LULESH profiler-time line"
    );
    let (abc_report, _) = ok_in(
        &dir,
        "hpcview-tui",
        &["before", "--report", "--view", "data", "--top", "3"],
        &[],
    );
    let headline = |text: &str| -> (String, String) {
        let mut it = text
            .lines()
            .skip_while(|l| !l.starts_with("Data-centric view:"));
        let head = skeleton(it.next().expect("a data-centric headline"));
        let columns = skeleton(it.next().expect("a column header"));
        (head.replace(" (runtime memory hidden)", ""), columns)
    };
    let want = headline(&abc_report);
    for name in ["lammps", "lammps-hidden", "lulesh"] {
        let capture = form_example("docs/GUIDE.md", name);
        assert_eq!(
            headline(&capture),
            want,
            "docs/GUIDE.md's {name} capture: headline and columns are not today's"
        );
    }
}

/// examples/first_touch initialised by one thread: `advise` says to
/// initialise in parallel. Sampled every 100 us of CPU time, so that the
/// run has the 1,000 memory samples below which `advise` adds a note.
#[test]
fn first_touch_advice_is_todays_output() {
    let dir = scratch("doc-examples-first-touch");
    let exe = compile_c("first_touch/first_touch.c", &dir, &["-fopenmp"]);
    let (_, measurements) = measure_first_touch(&dir, &exe, "mem:soft@100000", "serial");
    let (_, db) = merge(&dir, &measurements);
    let (advice, _) = ok_in(&dir, "hpcprof-rs", &["advise", db.to_str().unwrap()], &[]);
    let block = format!(
        "$ OMP_NUM_THREADS=2 hpcrun-rs -e mem:soft@100000 -e page-faults@1 ./first_touch serial 4\n\
         $ hpcprof-rs measurements/ && hpcprof-rs advise db/\n{advice}"
    );
    check_examples("docs/GUIDE.md", &[("first-touch", shown(&block))]);
}

/// tests/programs/csr_rows.c: one row per allocation, each site one row
/// with its block count. The top three rows (the fourth, y with 1-2%,
/// trades places with the allocator's metadata).
#[test]
fn csr_rows_report_is_todays_output() {
    let dir = scratch("doc-examples-csr");
    let exe = compile_test_program("csr_rows.c", &dir, &[]);
    let p = profile(&dir, "mem:soft@200000", &exe, &["300000", "20"]);
    let (report, _) = ok_in(
        &dir,
        "hpcview-tui",
        &[
            p.db.to_str().unwrap(),
            "--report",
            "--view",
            "data",
            "--top",
            "3",
        ],
        &[],
    );
    let table: String = report
        .lines()
        .skip_while(|l| !l.starts_with("Data-centric view:"))
        .skip(1)
        .take(4)
        .map(|l| format!("{l}\n"))
        .collect();

    // Past a tracking cap far below what the blocks need, every surface
    // says how many went untracked: the report's line.
    let capped = dir.join("capped");
    std::fs::create_dir_all(&capped).unwrap();
    let (out, measurements) = hpcrun_with(
        &capped,
        &["--max-tracking-memory", "256KiB"],
        "mem:soft@200000",
        &exe,
        &["100000", "2"],
    );
    ok_stdout(&out, "hpcrun-rs --max-tracking-memory 256KiB");
    let (_, db) = merge(&capped, &measurements);
    let (report, _) = ok_in(
        &capped,
        "hpcview-tui",
        &[db.to_str().unwrap(), "--report"],
        &[],
    );
    let untracked: String = report
        .lines()
        .filter(|l| l.contains("small heap blocks") && l.contains("were not tracked"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        !untracked.is_empty(),
        "the report does not say so:\n{report}"
    );
    check_examples(
        "docs/GUIDE.md",
        &[
            ("csr-rows", shown(&table)),
            ("untracked-blocks", shown(&untracked)),
        ],
    );
}

/// examples/placement: `advise --fast-mem 512MiB` places the skewed
/// table's head and most of the uniform table, and compares the simple
/// strategies.
#[test]
fn placement_advice_is_todays_output() {
    let dir = scratch("doc-examples-placement");
    let exe = compile_c("placement/placement.c", &dir, &[]);
    let p = profile(&dir, "mem:soft@100000", &exe, &["3"]);
    let (advice, _) = ok_in(
        &dir,
        "hpcprof-rs",
        &["advise", p.db.to_str().unwrap(), "--fast-mem", "512MiB"],
        &[],
    );
    let block = format!(
        "$ hpcrun-rs -e mem:soft@100000 ./placement 3\n\
         $ hpcprof-rs measurements/\n\
         $ hpcprof-rs advise db/ --fast-mem 512MiB\n{advice}"
    );
    check_examples("docs/GUIDE.md", &[("placement", shown(&block))]);
}

#[test]
fn skeletons_hide_numbers_and_widths() {
    assert_eq!(
        skeleton(" 1   56.3%      1313  heap     values[i]   main csr_rows.c:22 (300,000 blocks of 216 B)"),
        "# # # heap values[i] main csr_rows.c:# (# blocks of #)"
    );
    assert_eq!(skeleton("-65.6%   +57.0 -> 4.2 s"), "# # -> #");
    assert_eq!(
        skeleton("bytes 0 B-448.0 MiB of 512.0 MiB, mean 333 ns, 2 blocks"),
        skeleton("bytes 64.0 MiB-512.0 MiB of 512.0 MiB, mean 19.2 us, 2 blocks")
    );
    assert_ne!(form("a 1\nb 2\n\nc"), form("a 1\n\nb 2\nc"));
    assert_eq!(form("a 1\nb 2\n"), form("b 3\na 100\n"));
    assert_eq!(form("a 1\n(2 more)\n"), form("a 1\n"));
    assert_eq!(
        without_slow_calls("hooks 1 ms (9 calls, mean 3 us); 2 of the timed calls took 100 us or more, 10.0 ms in all (set-up, module reads or a loaded machine); together 2%"),
        "hooks 1 ms (9 calls, mean 3 us); together 2%"
    );
}
