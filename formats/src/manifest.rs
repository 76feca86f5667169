//! The run manifest: what `hpcrun-rs` started and wrote, so that
//! hpcprof-rs can tell what is missing from a measurements directory.
//!
//! Every measured process keeps a file of its own,
//! `.hpcrun-manifest.<host>.<pid>.<start ns>`, of text lines with
//! tab-separated fields ([`Record`]): `process` at start (host, pid,
//! rank and world size of an MPI job, start time), `final` for each
//! thread's final profile written, `lost` for a profile that could not be
//! written (with the reason), `signal` when a signal that ends it
//! arrived and it began writing its profiles, `exit` when the process
//! wrote its profiles at the end (also before an `exec` replaces its
//! image), `resumed` when such an `exec` failed and the image ran on. Its first bytes are reserved when the process starts (the
//! file is extended with zeros, [`RESERVED`]), so that the records fit on a
//! disk that is full by the end of the run: readers stop at the first
//! NUL. The launcher writes `.hpcrun-manifest.run` (`run`: start, end and
//! how the program ended).
//!
//! [`check`] compares the manifests with the profiles present and lists
//! every [`Loss`]: a thread whose final profile is missing (only a
//! checkpoint, or nothing), a process that never wrote its final
//! profiles (killed), an MPI rank with no profile at all.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Name prefix of the manifest files.
pub const PREFIX: &str = ".hpcrun-manifest.";

/// The launcher's file.
pub const RUN_FILE: &str = ".hpcrun-manifest.run";

/// Bytes each process reserves for its records at start.
pub const RESERVED: u64 = 16 << 10;

/// One line of a manifest.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A measured process started (unix ns).
    Process {
        host: String,
        pid: u32,
        rank: Option<u32>,
        world: Option<u32>,
        start_ns: u64,
    },
    /// Thread `index` (tid) wrote its final profile at `end_ns`.
    Final { index: u32, tid: u32, end_ns: u64 },
    /// Thread `index`'s profile could not be written at `end_ns`.
    Lost {
        index: u32,
        tid: u32,
        end_ns: u64,
        reason: String,
    },
    /// The process wrote its profiles at its end (`threads` measured).
    Exit { end_ns: u64, threads: u32 },
    /// Signal `signal`, whose action ends the process, arrived at
    /// `at_ns`: the process began writing its profiles (a process killed
    /// before its `exit` record was killed while writing them).
    Signal { signal: i32, at_ns: u64 },
    /// An `exec` failed at `at_ns` after the process had written its
    /// profiles and its `exit` for it: the image runs on, and the
    /// `final` and `exit` records before this one no longer tell its end.
    Resumed { at_ns: u64 },
    /// The launcher: the program ran from `start_ns` to `end_ns` and
    /// ended as `status` says ("exit 0", "signal 9").
    Run {
        start_ns: u64,
        end_ns: u64,
        status: String,
    },
}

fn opt(v: Option<u32>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\0'], " ")
}

impl Record {
    /// The record as one line (with its newline).
    pub fn line(&self) -> String {
        match self {
            Record::Process {
                host,
                pid,
                rank,
                world,
                start_ns,
            } => format!(
                "process\t{}\t{pid}\t{}\t{}\t{start_ns}\n",
                clean(host),
                opt(*rank),
                opt(*world)
            ),
            Record::Final { index, tid, end_ns } => format!("final\t{index}\t{tid}\t{end_ns}\n"),
            Record::Lost {
                index,
                tid,
                end_ns,
                reason,
            } => format!("lost\t{index}\t{tid}\t{end_ns}\t{}\n", clean(reason)),
            Record::Exit { end_ns, threads } => format!("exit\t{end_ns}\t{threads}\n"),
            Record::Signal { signal, at_ns } => format!("signal\t{signal}\t{at_ns}\n"),
            Record::Resumed { at_ns } => format!("resumed\t{at_ns}\n"),
            Record::Run {
                start_ns,
                end_ns,
                status,
            } => format!("run\t{start_ns}\t{end_ns}\t{}\n", clean(status)),
        }
    }

    /// Parses one line (without its newline); `None` for anything else.
    pub fn parse(line: &str) -> Option<Record> {
        let f: Vec<&str> = line.split('\t').collect();
        let num = |i: usize| f.get(i)?.parse::<u64>().ok();
        let small = |i: usize| f.get(i)?.parse::<u32>().ok();
        Some(match *f.first()? {
            "process" => Record::Process {
                host: f.get(1)?.to_string(),
                pid: small(2)?,
                rank: small(3),
                world: small(4),
                start_ns: num(5)?,
            },
            "final" => Record::Final {
                index: small(1)?,
                tid: small(2)?,
                end_ns: num(3)?,
            },
            "lost" => Record::Lost {
                index: small(1)?,
                tid: small(2)?,
                end_ns: num(3)?,
                reason: f.get(4)?.to_string(),
            },
            "exit" => Record::Exit {
                end_ns: num(1)?,
                threads: small(2)?,
            },
            "signal" => Record::Signal {
                signal: f.get(1)?.parse().ok()?,
                at_ns: num(2)?,
            },
            "resumed" => Record::Resumed { at_ns: num(1)? },
            "run" => Record::Run {
                start_ns: num(1)?,
                end_ns: num(2)?,
                status: f.get(3)?.to_string(),
            },
            _ => return None,
        })
    }
}

/// The records of a manifest file's bytes (up to the first NUL: the rest
/// of the reserved space).
pub fn parse(bytes: &[u8]) -> Vec<Record> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end])
        .lines()
        .filter_map(Record::parse)
        .collect()
}

/// What one process's manifest says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessManifest {
    pub host: String,
    pub pid: u32,
    pub rank: Option<u32>,
    pub world: Option<u32>,
    pub start_ns: u64,
    /// Thread index -> (tid, end ns) of its final profile.
    pub finals: BTreeMap<u32, (u32, u64)>,
    /// (thread index, tid, end ns, reason) of profiles not written.
    pub lost: Vec<(u32, u32, u64, String)>,
    /// (end ns, threads) when the process wrote its profiles at its end.
    pub exit: Option<(u64, u32)>,
    /// (signal, ns) of the signal that made it write its profiles.
    pub signal: Option<(i32, u64)>,
}

/// Every manifest of a measurements directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    pub processes: Vec<ProcessManifest>,
    /// The launcher's record: (start ns, end ns, how it ended).
    pub run: Option<(u64, u64, String)>,
}

/// Reads the manifests of `dir`; `None` when there is none (measurements
/// of an older hpcrun-rs).
pub fn read_dir(dir: &Path) -> Option<Manifest> {
    let mut out = Manifest::default();
    let mut any = false;
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(PREFIX) {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        any = true;
        fold(parse(&bytes), &mut out);
    }
    any.then_some(out)
}

/// Adds one manifest file's records to `out`: the launcher's `run`, or
/// one process, its records read in order.
fn fold(records: Vec<Record>, out: &mut Manifest) {
    let mut proc: Option<ProcessManifest> = None;
    for record in records {
        match record {
            Record::Run {
                start_ns,
                end_ns,
                status,
            } => out.run = Some((start_ns, end_ns, status)),
            Record::Process {
                host,
                pid,
                rank,
                world,
                start_ns,
            } => {
                proc = Some(ProcessManifest {
                    host,
                    pid,
                    rank,
                    world,
                    start_ns,
                    ..Default::default()
                })
            }
            Record::Final { index, tid, end_ns } => {
                if let Some(p) = proc.as_mut() {
                    p.finals.insert(index, (tid, end_ns));
                }
            }
            Record::Lost {
                index,
                tid,
                end_ns,
                reason,
            } => {
                if let Some(p) = proc.as_mut() {
                    p.lost.push((index, tid, end_ns, reason));
                }
            }
            Record::Exit { end_ns, threads } => {
                if let Some(p) = proc.as_mut() {
                    p.exit = Some((end_ns, threads));
                }
            }
            Record::Signal { signal, at_ns } => {
                if let Some(p) = proc.as_mut() {
                    p.signal.get_or_insert((signal, at_ns));
                }
            }
            Record::Resumed { .. } => {
                if let Some(p) = proc.as_mut() {
                    // The profiles written for the exec are superseded:
                    // the threads run on and owe their final ones again.
                    p.finals.clear();
                    p.lost.clear();
                    p.exit = None;
                }
            }
        }
    }
    out.processes.extend(proc);
}

/// A profile present in the measurements directory (its head).
#[derive(Debug, Clone, PartialEq)]
pub struct Present {
    pub host: String,
    pub pid: u32,
    pub rank: Option<u32>,
    pub index: u32,
    pub tid: u32,
    pub end_ns: u64,
}

/// Something the measurements lack: a thread's final profile, a
/// process's end, a rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    pub rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    /// The thread's index in its process (None: the whole process or
    /// rank).
    pub thread: Option<u32>,
    /// "checkpoint" (only a checkpoint remains), "unwritten" (no profile
    /// of the thread, or of the whole process, remains), "missing-rank"
    /// (an MPI rank left neither manifest nor profile).
    pub kind: String,
    /// Why, when known ("No space left on device (os error 28)").
    pub reason: String,
    /// Seconds of the process's run that its remaining profile covers
    /// (the checkpoint's time), when one remains.
    pub kept_s: Option<f64>,
    /// Seconds the process ran, when known.
    pub run_s: Option<f64>,
    /// The whole sentence ("rank 0: main thread's final profile missing
    /// (checkpoint at 3.1 s of 7.9 s used)").
    pub text: String,
}

fn secs(from: u64, to: u64) -> f64 {
    to.saturating_sub(from) as f64 / 1e9
}

fn who(rank: Option<u32>, pid: u32, several: bool) -> String {
    match rank {
        Some(r) => format!("rank {r}"),
        None if several => format!("pid {pid}"),
        None => "process".to_string(),
    }
}

/// "SIGTERM" for 15 (the signals that end a process), else "signal N".
fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

fn thread_name(index: u32) -> String {
    if index == 0 {
        "main thread".to_string()
    } else {
        format!("thread {index}")
    }
}

/// Compares the manifests with the profiles `present` and lists what is
/// missing, process by process (rank order), then the ranks with no
/// profile at all.
pub fn check(manifest: &Manifest, present: &[Present]) -> Vec<Loss> {
    let several = manifest.processes.len() > 1;
    let mut out = Vec::new();
    let run_end = manifest.run.as_ref().map(|r| r.1);
    let mut procs: Vec<&ProcessManifest> = manifest.processes.iter().collect();
    procs.sort_by_key(|p| (p.rank, p.pid));
    for p in procs {
        let mine: Vec<&Present> = present
            .iter()
            .filter(|f| f.host == p.host && f.pid == p.pid)
            .collect();
        let end = p
            .exit
            .map(|e| e.0)
            .or(run_end)
            .or_else(|| mine.iter().map(|f| f.end_ns).max());
        let run_s = end.map(|e| secs(p.start_ns, e));
        let who = who(p.rank, p.pid, several);
        let base = |thread: Option<u32>, kind: &str, reason: String, kept_s, text| Loss {
            rank: p.rank,
            host: p.host.clone(),
            pid: p.pid,
            thread,
            kind: kind.to_string(),
            reason,
            kept_s,
            run_s,
            text,
        };
        let used = |kept: Option<f64>| match (kept, run_s) {
            (Some(k), Some(r)) => format!("checkpoint at {k:.1} s of {r:.1} s used"),
            (Some(k), None) => format!("checkpoint at {k:.1} s"),
            (None, Some(r)) => format!("nothing of its {r:.1} s kept"),
            (None, None) => "nothing kept".to_string(),
        };
        if mine.is_empty() && p.finals.is_empty() && p.lost.is_empty() {
            // An image that ended measuring no thread (a forked child that
            // exec'd a launcher the library does not measure) lost nothing.
            if p.exit.is_some_and(|(_, threads)| threads == 0) {
                continue;
            }
            let reason = if p.exit.is_some() {
                "no profile written".to_string()
            } else {
                "the process ended without writing its profiles (killed?)".to_string()
            };
            out.push(base(
                None,
                "unwritten",
                reason.clone(),
                None,
                format!("{who}: no profile ({reason})"),
            ));
            continue;
        }
        let mut told = BTreeSet::new();
        for (index, _tid, _end, reason) in &p.lost {
            if !told.insert(*index) {
                continue;
            }
            let kept = mine
                .iter()
                .find(|f| f.index == *index)
                .map(|f| secs(p.start_ns, f.end_ns));
            let kind = if kept.is_some() {
                "checkpoint"
            } else {
                "unwritten"
            };
            out.push(base(
                Some(*index),
                kind,
                reason.clone(),
                kept,
                format!(
                    "{who}: {}'s final profile could not be written: {reason} ({})",
                    thread_name(*index),
                    used(kept)
                ),
            ));
        }
        for f in &mine {
            if p.finals.contains_key(&f.index) || told.contains(&f.index) {
                continue;
            }
            told.insert(f.index);
            let kept = Some(secs(p.start_ns, f.end_ns));
            let (reason, how) = match (p.exit, p.signal) {
                (Some(_), _) => ("the thread's final profile was not written".to_string(), String::new()),
                (None, Some((signal, at))) => (
                    format!(
                        "the process was killed while it wrote its final profiles, after {} at {:.1} s (a launcher's SIGKILL after its SIGTERM?)",
                        signal_name(signal),
                        secs(p.start_ns, at)
                    ),
                    format!(": killed while writing it, after {}", signal_name(signal)),
                ),
                (None, None) => (
                    "the process ended without writing its final profiles (killed?)".to_string(),
                    String::new(),
                ),
            };
            out.push(base(
                Some(f.index),
                "checkpoint",
                reason,
                kept,
                format!(
                    "{who}: {}'s final profile missing{how} ({})",
                    thread_name(f.index),
                    used(kept)
                ),
            ));
        }
        for index in p.finals.keys() {
            if told.contains(index) || mine.iter().any(|f| f.index == *index) {
                continue;
            }
            out.push(base(
                Some(*index),
                "unwritten",
                "the profile was written but is not in the directory (removed or not copied)"
                    .to_string(),
                None,
                format!(
                    "{who}: {}'s profile missing (written, not in the directory)",
                    thread_name(*index)
                ),
            ));
        }
    }
    // Ranks of an MPI job of which nothing arrived.
    let world = manifest.processes.iter().filter_map(|p| p.world).max();
    if let Some(world) = world {
        let seen: BTreeSet<u32> = manifest
            .processes
            .iter()
            .filter_map(|p| p.rank)
            .chain(present.iter().filter_map(|f| f.rank))
            .collect();
        for rank in (0..world).filter(|r| !seen.contains(r)) {
            out.push(Loss {
                rank: Some(rank),
                kind: "missing-rank".to_string(),
                reason: "no manifest and no profile of this rank".to_string(),
                text: format!("rank {rank}: no measurements at all (of {world} ranks)"),
                ..Default::default()
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn present(pid: u32, rank: Option<u32>, index: u32, end_ns: u64) -> Present {
        Present {
            host: "n".into(),
            pid,
            rank,
            index,
            tid: pid + index,
            end_ns,
        }
    }

    #[test]
    fn records_read_back_up_to_the_reserved_zeros() {
        let records = vec![
            Record::Process {
                host: "n".into(),
                pid: 7,
                rank: Some(1),
                world: Some(2),
                start_ns: 5,
            },
            Record::Final {
                index: 0,
                tid: 7,
                end_ns: 9,
            },
            Record::Lost {
                index: 1,
                tid: 8,
                end_ns: 9,
                reason: "No space left on device (os error 28)".into(),
            },
            Record::Signal {
                signal: 15,
                at_ns: 10,
            },
            Record::Exit {
                end_ns: 10,
                threads: 2,
            },
            Record::Resumed { at_ns: 11 },
        ];
        let mut bytes: Vec<u8> = records.iter().flat_map(|r| r.line().into_bytes()).collect();
        bytes.extend([0; 64]);
        assert_eq!(parse(&bytes), records);
    }

    #[test]
    fn a_lost_final_profile_with_a_checkpoint_says_how_much_it_covers() {
        let m = Manifest {
            processes: vec![ProcessManifest {
                host: "n".into(),
                pid: 7,
                start_ns: 100 * S,
                lost: vec![(0, 7, 108 * S, "No space left on device".into())],
                exit: Some((108 * S, 1)),
                ..Default::default()
            }],
            run: None,
        };
        let lost = check(&m, &[present(7, None, 0, 103 * S)]);
        assert_eq!(lost.len(), 1);
        assert_eq!(
            lost[0].text,
            "process: main thread's final profile could not be written: No space left on device (checkpoint at 3.0 s of 8.0 s used)"
        );
        assert_eq!(lost[0].kind, "checkpoint");
    }

    #[test]
    fn an_image_that_measured_nothing_before_exec_lost_nothing() {
        let ended = |threads| Manifest {
            processes: vec![ProcessManifest {
                host: "n".into(),
                pid: 7,
                start_ns: 100 * S,
                exit: Some((101 * S, threads)),
                ..Default::default()
            }],
            run: None,
        };
        assert!(check(&ended(0), &[]).is_empty());
        assert_eq!(check(&ended(1), &[]).len(), 1);
    }

    /// A process that wrote its profiles for an `exec` that then failed,
    /// ran on and was killed: the profiles of before the exec do not hide
    /// the kill; one that ran on and ended normally lost nothing.
    #[test]
    fn a_failed_exec_leaves_the_process_owing_its_end() {
        let lines = |tail: &str| {
            format!(
                "process\tn\t7\t-\t-\t{}\nfinal\t0\t7\t{}\nexit\t{}\t1\nresumed\t{}\n{tail}",
                100 * S,
                101 * S,
                101 * S,
                101 * S
            )
        };
        let read = |text: String| {
            let mut m = Manifest::default();
            fold(parse(text.as_bytes()), &mut m);
            m
        };
        let killed = read(lines(""));
        assert_eq!(killed.processes[0].exit, None);
        let lost = check(&killed, &[present(7, None, 0, 103 * S)]);
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].kind, "checkpoint");
        let ended = read(lines(&format!(
            "final\t0\t7\t{}\nexit\t{}\t1\n",
            104 * S,
            104 * S
        )));
        assert!(check(&ended, &[present(7, None, 0, 104 * S)]).is_empty());
    }

    #[test]
    fn killed_processes_and_missing_ranks_are_told() {
        let m = Manifest {
            processes: vec![ProcessManifest {
                host: "n".into(),
                pid: 7,
                rank: Some(0),
                world: Some(3),
                start_ns: 100 * S,
                ..Default::default()
            }],
            run: Some((100 * S, 110 * S, "signal 9".into())),
        };
        let lost = check(&m, &[present(7, Some(0), 0, 101 * S)]);
        let texts: Vec<&str> = lost.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "rank 0: main thread's final profile missing (checkpoint at 1.0 s of 10.0 s used)",
                "rank 1: no measurements at all (of 3 ranks)",
                "rank 2: no measurements at all (of 3 ranks)",
            ]
        );
    }

    #[test]
    fn a_rank_killed_while_writing_after_sigterm_is_told_so() {
        let m = Manifest {
            processes: vec![ProcessManifest {
                host: "n".into(),
                pid: 7,
                rank: Some(0),
                world: Some(1),
                start_ns: 100 * S,
                signal: Some((15, 109 * S)),
                ..Default::default()
            }],
            run: Some((100 * S, 110 * S, "exit 1".into())),
        };
        let lost = check(&m, &[present(7, Some(0), 0, 101 * S)]);
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(
            lost[0].text,
            "rank 0: main thread's final profile missing: killed while writing it, after SIGTERM (checkpoint at 1.0 s of 10.0 s used)"
        );
        assert!(
            lost[0].reason.contains("after SIGTERM at 9.0 s"),
            "{lost:?}"
        );
    }

    #[test]
    fn a_complete_run_has_no_loss() {
        let mut finals = BTreeMap::new();
        finals.insert(0, (7, 108 * S));
        let m = Manifest {
            processes: vec![ProcessManifest {
                host: "n".into(),
                pid: 7,
                start_ns: 100 * S,
                finals,
                exit: Some((108 * S, 1)),
                ..Default::default()
            }],
            run: None,
        };
        assert!(check(&m, &[present(7, None, 0, 108 * S)]).is_empty());
    }
}
