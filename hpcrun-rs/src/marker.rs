//! The run marker: which run an output directory belongs to.
//!
//! `DIR/.hpcrun-run` holds the run id, the launcher's pid and its host.
//! It is created atomically (written under a temporary name, then
//! hard-linked to its name, which fails if the name exists), so of two
//! launches into one directory exactly one takes it. Every launcher of the
//! run (the ranks of one MPI job share the id) holds a shared `flock` on it
//! while its program runs; so a marker that nobody holds belongs to a run
//! whose launchers are gone.
//!
//! * A different run finds the marker: refused while the marker is held,
//!   a process of that run still runs here (its program, when its launcher
//!   was killed: `HPCRUN_RUN_ID` in its environment) or the directory holds
//!   measurement files; a marker nobody holds, in a directory without
//!   measurement files, is stale (a launch that failed or was killed) and
//!   is reclaimed with a note.
//! * When its program ends, a launcher tries to take the lock exclusively:
//!   the one that gets it is the last launcher of the run on the marker
//!   ([`Marker::finish`]); it prints the run's summary line, and when the
//!   run wrote no measurement file it removes the marker (and the
//!   directory, if this launch created it and it is empty), so a launch
//!   that failed leaves nothing behind.
//!
//! * The ranks of a parallel job share the run id (the job's, and its
//!   step's under Slurm), so each launcher of a rank also claims its rank
//!   in `DIR/.hpcrun-ranks.<run id>/` (a file created with `O_EXCL`): a
//!   rank claimed already means a second `hpcrun-rs` in the same task of
//!   the same job step (`srun -n 2 sh -c 'hpcrun-rs ./a; hpcrun-rs ./b'`),
//!   another run under the same id, and it is refused rather than mixed
//!   with the first.
//!
//! On file systems without `flock` (some parallel file systems), liveness
//! falls back to the marker's pid on this host, and the summary line to
//! the job's rank 0.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Name of the marker file.
pub const RUN_MARKER: &str = ".hpcrun-run";

/// Files the preload library writes besides profiles, removed with the
/// marker of a run that wrote no profile.
const LEFTOVERS: &[&str] = &[crate::notices::FILE, FINISHED];

/// The count of a run's launchers that finished (`count_finished`).
const FINISHED: &str = ".hpcrun-run.done";

/// Directory of the ranks of run `run_id` that started into `dir`: one
/// empty file per rank, named by its number.
fn ranks_dir(dir: &Path, run_id: &str) -> PathBuf {
    let safe: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("{RUN_MARKER}-ranks.{safe}"))
}

/// Claims `rank` of run `run_id` in `dir`: false when that rank started
/// before (a second launch in one task); true when claimed, or when the
/// file system cannot tell (then nothing is refused).
fn claim_rank(dir: &Path, run_id: &str, rank: u64) -> bool {
    let ranks = ranks_dir(dir, run_id);
    if std::fs::create_dir_all(&ranks).is_err() {
        return true;
    }
    match File::options()
        .write(true)
        .create_new(true)
        .open(ranks.join(rank.to_string()))
    {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
    }
}

/// Removes what a run of `run_id` left besides profiles: the marker's
/// companions and its ranks.
fn remove_leftovers(dir: &Path, run_id: &str) {
    for name in LEFTOVERS {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_dir_all(ranks_dir(dir, run_id));
}

/// This launcher's hold on the output directory.
#[derive(Debug)]
pub struct Marker {
    /// The canonical output directory.
    pub dir: PathBuf,
    /// The run's id.
    run_id: String,
    file: File,
    /// `flock` works on this file system.
    lockable: bool,
    /// This launch created the directory.
    created_dir: bool,
}

/// Who holds a marker, from its text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Owner {
    run_id: String,
    pid: Option<u32>,
    host: Option<String>,
}

impl Owner {
    fn parse(text: &str) -> Owner {
        let mut lines = text.lines();
        let run_id = lines.next().unwrap_or("").trim().to_string();
        let mut owner = Owner {
            run_id,
            ..Owner::default()
        };
        for line in lines {
            if let Some(p) = line.strip_prefix("pid ") {
                owner.pid = p.trim().parse().ok();
            } else if let Some(h) = line.strip_prefix("host ") {
                owner.host = Some(h.trim().to_string());
            }
        }
        owner
    }

    fn text(&self) -> String {
        format!(
            "{}\npid {}\nhost {}\n",
            self.run_id,
            self.pid.unwrap_or(0),
            self.host.as_deref().unwrap_or("")
        )
    }

    /// The launcher that wrote the marker, when it is known to be alive
    /// on this host (the fallback without `flock`).
    fn alive_here(&self) -> bool {
        match (self.pid, &self.host) {
            (Some(pid), Some(host)) if *host == hostname() => {
                Path::new(&format!("/proc/{pid}")).exists()
            }
            // Another host, or an old marker: cannot tell; assume alive.
            _ => true,
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// A process of run `run_id` still runs on this host: one whose
/// environment holds `HPCRUN_RUN_ID=run_id` (a program whose launcher was
/// killed keeps measuring into the directory). Processes whose environment
/// cannot be read (another user's) are not seen. A process in the middle
/// of an `exec` shows an empty environment for a moment (the new image's
/// is not set up yet): when none is found, /proc is read twice more,
/// 20 ms apart.
fn run_alive_here(run_id: &str) -> bool {
    if run_id.is_empty() {
        return false;
    }
    let needle = format!("{}={run_id}", hpcrun_abi::env::RUN_ID);
    let found = || {
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return false;
        };
        procs.flatten().any(|p| {
            let name = p.file_name();
            let is_pid = name
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
            is_pid
                && std::fs::read(p.path().join("environ"))
                    .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == needle.as_bytes()))
        })
    };
    (0..3).any(|round| {
        if round > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        found()
    })
}

/// `flock(fd, op)`: Ok(true) when taken, Ok(false) when another holds it
/// (with `LOCK_NB`), Err when the file system does not support it.
fn flock(file: &File, op: libc::c_int) -> std::io::Result<bool> {
    loop {
        // SAFETY: flock on a descriptor this process owns.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Measurement files (`*.hpcrun`) in `dir`.
pub fn profiles_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.path()
                        .extension()
                        .is_some_and(|x| x == formats::measurement::EXTENSION)
                })
                .count()
        })
        .unwrap_or(0)
}

/// What [`acquire`] did besides taking the directory.
#[derive(Debug, Default)]
pub struct Acquired {
    /// A note for stderr: a stale marker was reclaimed.
    pub note: Option<String>,
}

/// Takes output directory `dir` for run `run_id` (creating it if needed):
/// creates the marker, or joins the run that holds it with the same id.
/// `rank`: this launcher's rank when it is one of a parallel job's
/// (claimed once per run: [`claim_rank`]).
pub fn acquire(dir: &Path, run_id: &str, rank: Option<u64>) -> Result<(Marker, Acquired)> {
    let (marker, acquired) = take(dir, run_id)?;
    if let Some(rank) = rank {
        if !claim_rank(&marker.dir, run_id, rank) {
            // Not `finish`: the run this launch would have joined ended,
            // and its marker stays whatever it measured.
            bail!(
                "{} holds the run {run_id} of this job step, into which rank {rank} already ran hpcrun-rs: this is a second hpcrun-rs in the same task, a run of its own that must not be mixed with the first; choose another directory with -o (one per command)",
                marker.dir.display()
            );
        }
    }
    Ok((marker, acquired))
}

/// [`acquire`] without the rank.
fn take(dir: &Path, run_id: &str) -> Result<(Marker, Acquired)> {
    let created_dir = std::fs::symlink_metadata(dir).is_err();
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    if !dir.is_dir() {
        bail!(
            "the output directory {} is not a directory; choose another with -o",
            dir.display()
        );
    }
    let path = dir.join(RUN_MARKER);
    let me = Owner {
        run_id: run_id.to_string(),
        pid: Some(std::process::id()),
        host: Some(hostname()),
    };
    let mut acquired = Acquired::default();
    // A few rounds: a marker can vanish (its run failed and removed it, or
    // was reclaimed) between our attempt to create it and to open it.
    for _ in 0..8 {
        if let Some(file) = try_create(&dir, &path, &me)? {
            let lockable = flock(&file, libc::LOCK_SH).is_ok();
            let found = profiles_in(&dir);
            if found > 0 {
                // Files without a marker: an older run, or a marker removed
                // by hand. Not ours to mix with.
                let _ = std::fs::remove_file(&path);
                bail!(
                    "{} already holds measurements of another run ({found} file(s)); choose a new directory with -o, or remove them",
                    dir.display()
                );
            }
            let marker = Marker {
                dir,
                run_id: run_id.to_string(),
                file,
                lockable,
                created_dir,
            };
            return Ok((marker, acquired));
        }
        // The marker exists: whose is it?
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
        };
        let lockable = flock(&file, libc::LOCK_SH).is_ok();
        if !same_file(&file, &path) {
            continue; // Replaced while we waited for the lock.
        }
        let mut text = String::new();
        file.read_to_string(&mut text)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let owner = Owner::parse(&text);
        if owner.run_id == run_id {
            // Another rank of this run.
            let marker = Marker {
                dir,
                run_id: run_id.to_string(),
                file,
                lockable,
                created_dir: false,
            };
            return Ok((marker, acquired));
        }
        let found = profiles_in(&dir);
        let held = if lockable {
            // Converting our shared lock: whoever else holds one is alive.
            !flock(&file, libc::LOCK_EX | libc::LOCK_NB).unwrap_or(false)
        } else {
            owner.alive_here()
        } || run_alive_here(&owner.run_id);
        // A live run first: its programs may already have written files
        // (an image replaced by exec writes its profile then), and "is
        // measuring into" is what the user needs to know.
        if held {
            let by = match (owner.pid, &owner.host) {
                (Some(pid), Some(host)) => format!(" (hpcrun-rs pid {pid} on {host})"),
                _ => String::new(),
            };
            bail!(
                "another run{by} is measuring into {} now; choose another directory with -o",
                dir.display()
            );
        }
        if found > 0 {
            bail!(
                "{} already holds measurements of another run ({found} file(s)); choose a new directory with -o, or remove them",
                dir.display()
            );
        }
        // Stale: nobody holds it and nothing was measured.
        if same_file(&file, &path) {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove the stale {}", path.display()))?;
            remove_leftovers(&dir, &owner.run_id);
            let by = owner
                .pid
                .map(|p| format!(" (hpcrun-rs pid {p})"))
                .unwrap_or_default();
            acquired.note = Some(format!(
                "note: {} held the marker of an earlier launch{by} that ended without measuring anything; reclaimed it",
                dir.display()
            ));
        }
        drop(file);
    }
    bail!(
        "cannot take {} for this run: its run marker keeps changing (other launches into the same directory?); choose another directory with -o",
        dir.display()
    )
}

/// Creates the marker of `me` atomically; None if one exists.
fn try_create(dir: &Path, path: &Path, me: &Owner) -> Result<Option<File>> {
    let tmp = dir.join(format!(
        "{RUN_MARKER}.{}.tmp",
        me.pid.unwrap_or_else(std::process::id)
    ));
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    let written = file
        .write_all(me.text().as_bytes())
        .with_context(|| format!("cannot write {}", tmp.display()));
    // Locked before it becomes the marker: another launch that opens it
    // at once must find it held, not take it for a stale one and remove
    // it (both launches were then accepted, seen once in a fresh-clone
    // test run under load). Where flock is unsupported `acquire` says so.
    let _ = flock(&file, libc::LOCK_SH);
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot create {}", path.display())),
    });
    let _ = std::fs::remove_file(&tmp);
    Ok(if linked? { Some(file) } else { None })
}

/// `file` is (still) the file at `path`.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

impl Marker {
    /// After the program ended: whether this is the last launcher of the
    /// run (None: cannot tell, no `flock`). The last one removes the
    /// marker of a run that wrote no measurement file, and the directory
    /// if this launch created it and it is empty, unless processes of the
    /// run still run (`live`: they may write there yet).
    pub fn finish(self, live: bool) -> Option<bool> {
        if !self.lockable {
            return None;
        }
        let last = flock(&self.file, libc::LOCK_EX | libc::LOCK_NB).unwrap_or(false);
        // Under an MPI launcher the ranks' launchers start at different
        // times: an early finisher can hold the lock alone before a late
        // one has taken its share. With the job's size known, the one
        // that finishes as the N-th is the last (counted under a lock).
        let speaker = match world_size() {
            Some(n) if n > 1 => count_finished(&self.dir).map_or(last, |k| k >= n),
            _ => last,
        };
        if last && !live && profiles_in(&self.dir) == 0 {
            let path = self.dir.join(RUN_MARKER);
            if same_file(&self.file, &path) {
                let _ = std::fs::remove_file(&path);
                remove_leftovers(&self.dir, &self.run_id);
                if self.created_dir {
                    // Only if empty.
                    let _ = std::fs::remove_dir(&self.dir);
                }
            }
        }
        Some(speaker)
    }
}

/// Ranks of the MPI job this launcher runs in, when the launcher says
/// (Open MPI, MPICH/Hydra).
fn world_size() -> Option<u64> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// Counter of the launchers of this run that finished, next to the
/// marker ([`FINISHED`]); adds this one under an exclusive lock
/// and returns the new count. The N-th removes the file.
fn count_finished(dir: &Path) -> Option<u64> {
    let path = dir.join(FINISHED);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .ok()?;
    if !flock(&file, libc::LOCK_EX).unwrap_or(false) {
        return None;
    }
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let n = text.trim().parse::<u64>().unwrap_or(0) + 1;
    file.set_len(0).ok()?;
    use std::io::Seek;
    file.seek(std::io::SeekFrom::Start(0)).ok()?;
    file.write_all(n.to_string().as_bytes()).ok()?;
    if world_size() == Some(n) {
        let _ = std::fs::remove_file(&path);
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hpcrun-marker-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn owner_round_trips_and_reads_old_markers() {
        let o = Owner {
            run_id: "42-7".into(),
            pid: Some(42),
            host: Some("n1".into()),
        };
        assert_eq!(Owner::parse(&o.text()), o);
        assert_eq!(
            Owner::parse("slurm-1.0\n"),
            Owner {
                run_id: "slurm-1.0".into(),
                ..Owner::default()
            }
        );
    }

    #[test]
    fn one_run_one_directory() {
        let dir = temp("one");
        let (a, _) = acquire(&dir, "run-a", None).unwrap();
        // Same run: joins. Another run: refused while a holds it.
        let (b, _) = acquire(&dir, "run-a", None).unwrap();
        let err = format!("{:#}", acquire(&dir, "run-b", None).unwrap_err());
        assert!(err.contains("is measuring into"), "{err}");
        assert_eq!(b.finish(false), Some(false));
        // The last one with no profile removes the marker and the
        // directory it created.
        assert_eq!(a.finish(false), Some(true));
        assert!(!dir.exists());
    }

    #[test]
    fn a_live_run_with_files_is_named_as_measuring() {
        // A program that exec'd has written its first image's profile
        // while the run goes on: the refusal names the live run.
        let dir = temp("live-files");
        let (a, _) = acquire(&dir, "run-a", None).unwrap();
        std::fs::write(dir.join("a.hpcrun"), b"x").unwrap();
        let err = format!("{:#}", acquire(&dir, "run-b", None).unwrap_err());
        assert!(err.contains("is measuring into"), "{err}");
        assert_eq!(a.finish(false), Some(true));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_rank_of_a_run_starts_once() {
        let dir = temp("ranks");
        let (r0, _) = acquire(&dir, "slurm-1.0.5", Some(0)).unwrap();
        let (r1, _) = acquire(&dir, "slurm-1.0.5", Some(1)).unwrap();
        // Rank 0 again: a second launch in its task.
        let err = format!("{:#}", acquire(&dir, "slurm-1.0.5", Some(0)).unwrap_err());
        assert!(err.contains("rank 0 already ran hpcrun-rs"), "{err}");
        assert_eq!(r1.finish(false), Some(false));
        // Nothing measured: the last one removes the marker, the ranks
        // and the directory.
        assert_eq!(r0.finish(false), Some(true));
        assert!(!dir.exists());
        // The same job step again (nothing was left): taken afresh.
        let (again, _) = acquire(&dir, "slurm-1.0.5", Some(0)).unwrap();
        assert_eq!(again.finish(false), Some(true));
        assert!(!dir.exists());
    }

    #[test]
    fn a_stale_marker_is_reclaimed_unless_measured() {
        let dir = temp("stale");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(RUN_MARKER), "old-run\npid 1\nhost x\n").unwrap();
        let (m, acquired) = acquire(&dir, "new", None).unwrap();
        assert!(acquired.note.unwrap().contains("reclaimed"));
        std::fs::write(dir.join("a.hpcrun"), b"x").unwrap();
        assert_eq!(m.finish(false), Some(true));
        // Measured: kept, and another run is refused.
        let err = format!("{:#}", acquire(&dir, "newer", None).unwrap_err());
        assert!(err.contains("already holds measurements"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
