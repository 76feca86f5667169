//! One run, one database: which of a directory's measurement files are
//! merged.
//!
//! Every profile names its run (`ProcessInfo::run_id`: one `hpcrun-rs`
//! invocation, shared by the ranks of one parallel job), its process and
//! its thread with the thread's start time. Before any merging, the head
//! of every file (its first fields, [`ThreadProfile::head_from_bytes`]) is
//! read and:
//!
//! * the profiles of more than one run (files copied or moved together,
//!   two runs of different programs) are refused with an error that names
//!   the runs, their programs and files and what to do; `--run ID` merges
//!   one of them (the others are left out and said), `--allow-mixed` all
//!   of them into one database on purpose;
//! * duplicates, the profiles of one thread that appear more than once
//!   (a copied file, a directory copied into itself, a checkpoint kept
//!   beside the final profile), are merged once: of the files with the
//!   same run, host, pid, tid, thread index and start time, the one
//!   written last (its `end_unix_ns`: the final profile before any
//!   checkpoint, checkpoints being cumulative) is kept. They are decoded
//!   whole first, so that a damaged copy is reported as damaged by the
//!   merge, not taken for a duplicate.
//!
//! A file whose head cannot be read stays in the list: the merge skips it
//! with its reason as before.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use formats::measurement::{ProcessInfo, ThreadInfo, ThreadProfile};
use rayon::prelude::*;

/// Which runs of a directory to merge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Choice {
    /// The directory must hold one run (the default): else an error.
    #[default]
    One,
    /// Only the run with this id (or the one whose id starts with it).
    Run(String),
    /// Every run, into one database (`--allow-mixed`).
    All,
}

/// The files to merge and what was left out.
#[derive(Debug, Default)]
pub struct Selection {
    /// The files to merge, in their original order.
    pub files: Vec<PathBuf>,
    /// Lines for stderr after the summary: duplicates left out, runs
    /// left out or mixed on purpose.
    pub notes: Vec<String>,
    /// Files left out as duplicates of a merged one.
    pub duplicates: usize,
}

/// Bytes read of each file for its head: the process and thread fields
/// come first and take a few hundred bytes (more with a long command
/// line; then the whole file is read). One page.
const HEAD_BYTES: u64 = 4 << 10;

/// A file's process and thread, from its first bytes.
pub fn read_head(path: &Path) -> Result<(ProcessInfo, ThreadInfo), String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::with_capacity(HEAD_BYTES as usize);
    (&mut file)
        .take(HEAD_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    match ThreadProfile::head_from_bytes(&bytes) {
        Ok(head) => Ok(head),
        Err(_) if bytes.len() as u64 == HEAD_BYTES => {
            file.read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read: {e}"))?;
            ThreadProfile::head_from_bytes(&bytes).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// One run found in the directory.
#[derive(Debug, Default)]
struct Run {
    /// Indices into the file list.
    files: Vec<usize>,
    /// Programs (executable paths) of its processes.
    programs: BTreeSet<String>,
    /// (host, pid) of its processes.
    processes: BTreeSet<(String, u32)>,
    /// Earliest thread start (0: unknown).
    start_ns: u64,
}

/// Chooses the files of `dir` (`files`, as `read::find` listed them) to
/// merge; an error (with what to do) when they mix runs and `choice`
/// does not say which.
pub fn select(dir: &Path, files: &[PathBuf], choice: &Choice) -> Result<Selection, String> {
    let heads: Vec<Option<(ProcessInfo, ThreadInfo)>> =
        files.par_iter().map(|f| read_head(f).ok()).collect();
    let mut runs: BTreeMap<String, Run> = BTreeMap::new();
    for (i, head) in heads.iter().enumerate() {
        let Some((process, thread)) = head else {
            continue;
        };
        let run = runs.entry(process.run_id.clone()).or_default();
        run.files.push(i);
        run.programs.insert(process.exe.clone());
        run.processes.insert((process.host.clone(), process.pid));
        if thread.start_unix_ns > 0 && (run.start_ns == 0 || thread.start_unix_ns < run.start_ns) {
            run.start_ns = thread.start_unix_ns;
        }
    }
    let mut out = Selection::default();
    // Files whose head cannot be read go to the merge, which says why it
    // skips them.
    let mut keep: Vec<bool> = heads.iter().map(Option::is_none).collect();
    match choice {
        Choice::One if runs.len() > 1 => return Err(mixed(dir, files, &runs)),
        Choice::One => keep.iter_mut().for_each(|k| *k = true),
        Choice::All => {
            keep.iter_mut().for_each(|k| *k = true);
            if runs.len() > 1 {
                let list: Vec<String> = runs
                    .iter()
                    .map(|(id, run)| format!("{} ({})", show_id(id), programs(run)))
                    .collect();
                out.notes.push(format!(
                    "hpcprof-rs: note: --allow-mixed: merged the profiles of {} runs into one database: {}",
                    runs.len(),
                    list.join(", ")
                ));
            }
        }
        Choice::Run(want) => {
            let id = find_run(dir, files, &runs, want)?;
            for &i in &runs[&id].files {
                keep[i] = true;
            }
            let others: Vec<String> = runs
                .iter()
                .filter(|(other, _)| **other != id)
                .map(|(other, run)| {
                    format!(
                        "{} ({}, {} file(s))",
                        show_id(other),
                        programs(run),
                        run.files.len()
                    )
                })
                .collect();
            if !others.is_empty() {
                out.notes.push(format!(
                    "hpcprof-rs: note: --run {}: left out the profiles of {} other run(s) in {}: {}",
                    show_id(&id),
                    others.len(),
                    dir.display(),
                    others.join(", ")
                ));
            }
        }
    }
    let dups = duplicates(files, &heads, &keep);
    for (dup, _) in &dups {
        keep[*dup] = false;
    }
    out.duplicates = dups.len();
    if let Some(note) = duplicates_note(files, &heads, &dups) {
        out.notes.push(note);
    }
    out.files = files
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(f, _)| f.clone())
        .collect();
    Ok(out)
}

/// The run `want` names: its id, or the only id that starts with it.
fn find_run(
    dir: &Path,
    files: &[PathBuf],
    runs: &BTreeMap<String, Run>,
    want: &str,
) -> Result<String, String> {
    if runs.contains_key(want) {
        return Ok(want.to_string());
    }
    let matching: Vec<&String> = runs
        .keys()
        .filter(|id| !want.is_empty() && id.starts_with(want))
        .collect();
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "--run {want}: {} holds no profile of that run; it holds:\n{}",
            dir.display(),
            run_lines(dir, files, runs)
        )),
        _ => Err(format!(
            "--run {want}: more than one run's id starts with it; give more of the id:\n{}",
            run_lines(dir, files, runs)
        )),
    }
}

/// The error for a directory of several runs: names them (programs,
/// processes, start, files) and says what to do.
fn mixed(dir: &Path, files: &[PathBuf], runs: &BTreeMap<String, Run>) -> String {
    let all_programs: BTreeSet<&String> = runs.values().flat_map(|r| &r.programs).collect();
    let of = if all_programs.len() > 1 {
        let names: Vec<String> = all_programs.iter().map(|p| short_program(p)).collect();
        format!(" of different programs ({})", names.join(", "))
    } else {
        String::new()
    };
    let d = dir.display();
    let first = runs.keys().next().map(|id| show_id(id)).unwrap_or_default();
    format!(
        "{d} holds the profiles of {} different runs{of}, which one database must not mix:\n{}\nEach run of hpcrun-rs writes a directory of its own: these were put together (copied or moved). Merge one run with --run ID (e.g. `hpcprof-rs --run {first} -o db-{first} {d}`, then the next into another -o), move each run's files into a directory of its own, or merge them together on purpose with --allow-mixed",
        runs.len(),
        run_lines(dir, files, runs)
    )
}

/// One line per run: id, programs, processes, start and files.
fn run_lines(dir: &Path, files: &[PathBuf], runs: &BTreeMap<String, Run>) -> String {
    runs.iter()
        .map(|(id, run)| {
            let processes = match run.processes.len() {
                1 => {
                    let (host, pid) = run.processes.iter().next().expect("one");
                    format!("pid {pid} on {host}")
                }
                n => format!("{n} processes"),
            };
            let started = if run.start_ns > 0 {
                format!(", started {}", utc(run.start_ns))
            } else {
                String::new()
            };
            let names: Vec<String> = run
                .files
                .iter()
                .take(3)
                .map(|&i| {
                    files[i]
                        .strip_prefix(dir)
                        .unwrap_or(&files[i])
                        .display()
                        .to_string()
                })
                .collect();
            let more = if run.files.len() > 3 {
                format!(" and {} more", run.files.len() - 3)
            } else {
                String::new()
            };
            format!(
                "  run {}: {} ({processes}{started}), {} file(s): {}{more}",
                show_id(id),
                programs(run),
                run.files.len(),
                names.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A run id as shown (profiles written without one have an empty id).
fn show_id(id: &str) -> String {
    if id.is_empty() {
        "\"\"".into()
    } else {
        id.to_string()
    }
}

/// A run's programs, by file name.
fn programs(run: &Run) -> String {
    let names: BTreeSet<String> = run.programs.iter().map(|p| short_program(p)).collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

fn short_program(exe: &str) -> String {
    match exe.rsplit('/').next() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => "<unknown program>".to_string(),
    }
}

/// What makes a thread's profile that thread's: two files with the same
/// key are copies (or checkpoints) of one profile.
type ThreadKey = (String, String, u32, u32, u32, u64);

/// The files among `keep` that repeat another kept file's thread, each
/// with the file kept in its place. Of each group, the files that decode
/// whole are compared: the one written last is kept (the final profile
/// over checkpoints; the first by name among equals); the damaged ones
/// stay for the merge to report.
fn duplicates(
    files: &[PathBuf],
    heads: &[Option<(ProcessInfo, ThreadInfo)>],
    keep: &[bool],
) -> Vec<(usize, usize)> {
    let mut groups: BTreeMap<ThreadKey, Vec<usize>> = BTreeMap::new();
    for (i, head) in heads.iter().enumerate() {
        let (Some((p, t)), true) = (head, keep[i]) else {
            continue;
        };
        let key = (
            p.run_id.clone(),
            p.host.clone(),
            p.pid,
            t.tid,
            t.index,
            t.start_unix_ns,
        );
        groups.entry(key).or_default().push(i);
    }
    let repeated: Vec<Vec<usize>> = groups.into_values().filter(|g| g.len() > 1).collect();
    repeated
        .par_iter()
        .flat_map_iter(|group| {
            // (end time, is a checkpoint, not named by hpcrun-rs, name
            // length, index) of the files that decode.
            let mut whole: Vec<(u64, bool, bool, usize, usize)> = group
                .iter()
                .filter_map(|&i| {
                    let bytes = std::fs::read(&files[i]).ok()?;
                    let p = ThreadProfile::from_bytes(&bytes).ok()?;
                    let name = files[i].file_name()?.to_string_lossy().into_owned();
                    let own = is_own_name(&name, &p.process, &p.thread);
                    let checkpoint = p.stats.checkpoints > 0;
                    Some((p.thread.end_unix_ns, checkpoint, !own, name.len(), i))
                })
                .collect();
            // Latest end first, then the final profile before a
            // checkpoint, then the name hpcrun-rs gave it (not a copy's),
            // then the shortest name, then the first.
            whole.sort_by(|a, b| {
                b.0.cmp(&a.0)
                    .then(a.1.cmp(&b.1))
                    .then(a.2.cmp(&b.2))
                    .then(a.3.cmp(&b.3))
                    .then(a.4.cmp(&b.4))
            });
            let kept = whole.first().map(|w| w.4);
            whole
                .into_iter()
                .skip(1)
                .map(move |(.., i)| (i, kept.expect("a kept file")))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `name` is the one hpcrun-rs gives the profile of `thread` of
/// `process`: `<exe>.<host>.[r<rank>.]<pid>.<tid>[.<n>].hpcrun`.
fn is_own_name(name: &str, process: &ProcessInfo, thread: &ThreadInfo) -> bool {
    let exe = match process.exe.rsplit('/').next() {
        Some(e) if !e.is_empty() => e,
        _ => "process",
    };
    let rank = process.rank.map(|r| format!("r{r}.")).unwrap_or_default();
    let base = format!(
        "{exe}.{}.{rank}{}.{}",
        process.host, process.pid, thread.tid
    );
    let Some(rest) = name
        .strip_prefix(&base)
        .and_then(|r| r.strip_suffix(&format!(".{}", formats::measurement::EXTENSION)))
    else {
        return false;
    };
    rest.is_empty()
        || rest
            .strip_prefix('.')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Files named in full by the duplicates note; more are counted.
const NAMED_DUPLICATES: usize = 8;

/// The note for the duplicates left out, or None.
fn duplicates_note(
    files: &[PathBuf],
    heads: &[Option<(ProcessInfo, ThreadInfo)>],
    dups: &[(usize, usize)],
) -> Option<String> {
    if dups.is_empty() {
        return None;
    }
    let mut dups = dups.to_vec();
    dups.sort();
    let named: Vec<String> = dups
        .iter()
        .take(NAMED_DUPLICATES)
        .map(|&(dup, kept)| {
            let what = match (&heads[dup], &heads[kept]) {
                (Some((_, d)), Some((_, k))) if d.end_unix_ns < k.end_unix_ns => {
                    "an earlier checkpoint of the profile in"
                }
                _ => "a copy of",
            };
            let thread = heads[kept]
                .as_ref()
                .map(|(p, t)| {
                    format!(
                        "thread {} (tid {}) of {} (pid {})",
                        t.index,
                        t.tid,
                        short_program(&p.exe),
                        p.pid
                    )
                })
                .unwrap_or_default();
            format!(
                "{} ({what} {}: {thread})",
                files[dup].display(),
                files[kept].display()
            )
        })
        .collect();
    let more = if dups.len() > NAMED_DUPLICATES {
        format!(", and {} more", dups.len() - NAMED_DUPLICATES)
    } else {
        String::new()
    };
    Some(format!(
        "hpcprof-rs: note: left out {} duplicate profile(s), each the same thread's profile as a merged file (same run, host, pid, tid and start time), so that no thread counts twice: {}{more}",
        dups.len(),
        named.join(", ")
    ))
}

/// `ns` since the epoch as a UTC date and time.
fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::tests::temp_dir;

    fn profile(run: &str, exe: &str, pid: u32, tid: u32, start: u64, end: u64) -> ThreadProfile {
        let mut p = ThreadProfile::default();
        p.process.run_id = run.into();
        p.process.exe = exe.into();
        p.process.host = "h".into();
        p.process.pid = pid;
        p.thread.tid = tid;
        p.thread.start_unix_ns = start;
        p.thread.end_unix_ns = end;
        p
    }

    fn write(dir: &Path, name: &str, p: &ThreadProfile) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, p.to_bytes().unwrap()).unwrap();
        path
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_764_140_592_000_000_000), "2025-11-26 07:03:12 UTC");
        assert_eq!(utc(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn own_names_are_recognised() {
        let p = profile("r", "/x/app", 10, 11, 1, 2);
        let own = |name: &str| is_own_name(name, &p.process, &p.thread);
        assert!(own("app.h.10.11.hpcrun"));
        assert!(own("app.h.10.11.2.hpcrun"));
        assert!(!own("app.h.10.11.copy.hpcrun"));
        assert!(!own("copy.hpcrun"));
        assert!(!own("app.h.10.111.hpcrun"));
        let mut ranked = p.clone();
        ranked.process.rank = Some(3);
        assert!(is_own_name(
            "app.h.r3.10.11.hpcrun",
            &ranked.process,
            &ranked.thread
        ));
    }

    #[test]
    fn heads_of_long_command_lines_are_read_whole() {
        let dir = temp_dir("runs-long");
        let mut p = profile("r", "/bin/a", 1, 1, 5, 6);
        p.process.command = vec!["x".repeat(100_000)];
        let f = write(&dir, "a.hpcrun", &p);
        let (process, thread) = read_head(&f).unwrap();
        assert_eq!((process, thread), (p.process, p.thread));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn runs_are_refused_chosen_or_mixed_on_purpose() {
        let dir = temp_dir("runs-mixed");
        let a = write(
            &dir,
            "a.hpcrun",
            &profile("run-a", "/x/prog_a", 10, 10, 1, 2),
        );
        let b = write(
            &dir,
            "b.hpcrun",
            &profile("run-b", "/x/prog_b", 20, 20, 1, 2),
        );
        let c = write(
            &dir,
            "c.hpcrun",
            &profile("run-b", "/x/prog_b", 20, 21, 1, 2),
        );
        let files = vec![a.clone(), b.clone(), c.clone()];
        let err = select(&dir, &files, &Choice::One).unwrap_err();
        assert!(
            err.contains("2 different runs of different programs (prog_a, prog_b)"),
            "{err}"
        );
        assert!(err.contains("run run-a: prog_a (pid 10 on h"), "{err}");
        assert!(err.contains("1 file(s): a.hpcrun"), "{err}");
        assert!(err.contains("2 file(s): b.hpcrun, c.hpcrun"), "{err}");
        assert!(
            err.contains("--run ID") && err.contains("--allow-mixed"),
            "{err}"
        );
        let s = select(&dir, &files, &Choice::Run("run-b".into())).unwrap();
        assert_eq!(s.files, vec![b.clone(), c.clone()]);
        assert!(
            s.notes[0].contains("left out the profiles of 1 other run(s)"),
            "{:?}",
            s.notes
        );
        // A unique prefix is enough; an unknown id lists the runs.
        let s = select(&dir, &files, &Choice::Run("run-a".into())).unwrap();
        assert_eq!(s.files, vec![a.clone()]);
        let err = select(&dir, &files, &Choice::Run("run-".into())).unwrap_err();
        assert!(err.contains("more than one run"), "{err}");
        let err = select(&dir, &files, &Choice::Run("nope".into())).unwrap_err();
        assert!(
            err.contains("no profile of that run") && err.contains("run run-a"),
            "{err}"
        );
        let s = select(&dir, &files, &Choice::All).unwrap();
        assert_eq!(s.files.len(), 3);
        assert!(
            s.notes[0].contains("merged the profiles of 2 runs"),
            "{:?}",
            s.notes
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn duplicates_are_merged_once_and_damaged_copies_are_left_to_the_merge() {
        let dir = temp_dir("runs-dups");
        let main = profile("r", "/x/app", 10, 10, 100, 900);
        let mut checkpoint = main.clone();
        checkpoint.thread.end_unix_ns = 500;
        checkpoint.stats.checkpoints = 1;
        let worker = profile("r", "/x/app", 10, 11, 100, 900);
        // The same tid after exec: another image, not a duplicate.
        let exec = profile("r", "/x/next", 10, 10, 950, 990);
        let files = vec![
            write(&dir, "a.ckpt.hpcrun", &checkpoint),
            write(&dir, "a.copy.hpcrun", &main),
            write(&dir, "a.hpcrun", &main),
            write(&dir, "a.1.hpcrun", &exec),
            write(&dir, "w.hpcrun", &worker),
        ];
        let bytes = main.to_bytes().unwrap();
        let damaged = dir.join("a.cut.hpcrun");
        std::fs::write(&damaged, &bytes[..bytes.len() - 3]).unwrap();
        let mut all = files.clone();
        all.push(damaged.clone());
        let s = select(&dir, &all, &Choice::One).unwrap();
        assert_eq!(s.duplicates, 2);
        // The final profile of the shortest name; the damaged one stays.
        assert_eq!(
            s.files,
            vec![
                files[2].clone(),
                files[3].clone(),
                files[4].clone(),
                damaged
            ]
        );
        let note = &s.notes[0];
        assert!(note.contains("left out 2 duplicate profile(s)"), "{note}");
        assert!(
            note.contains("a.ckpt.hpcrun (an earlier checkpoint of the profile in")
                && note.contains("a.copy.hpcrun (a copy of")
                && note.contains("thread 0 (tid 10) of app (pid 10)"),
            "{note}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
