//! This process's part of the run manifest (`formats::manifest`): a
//! file of its own in the output directory, created at start with
//! `formats::manifest::RESERVED` bytes of zeros after its `process`
//! record (fewer under a file-size limit that allows fewer), then one record per final profile written (`final`), per
//! profile that could not be written (`lost`, with the reason) and at the
//! end (`exit`). Records are written in place into the reserved bytes
//! (the file is opened for each and closed again: the program's
//! descriptors stay its own), so they fit on a disk that filled up
//! meanwhile. A write past the file-size limit only fails
//! (`sys::file_limits::QuietFsize`). Never from a signal handler but the fatal one (which
//! writes profiles anyway), never once a killing seccomp filter is in
//! (`sandbox::quiet`).
//!
//! [`wait_for_peer_ranks`]: after a termination signal, an MPI rank that
//! wrote its profiles waits (briefly) for the other ranks of its host to
//! write theirs before it ends, reading their manifests: Open MPI's
//! `mpirun` sends SIGTERM to every rank, then SIGKILL to those still
//! alive as soon as one has ended, so the rank that writes fastest would
//! otherwise decide when the others are killed.

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::{Mutex, OnceLock};

use formats::manifest::{Record, PREFIX, RESERVED};

use crate::sys;
use crate::threads::config;
use crate::threads::sandbox;

/// The file of this process (None: not measured, or not created), and
/// its pid (a forked child creates its own).
static FILE: Mutex<Option<(u32, String)>> = Mutex::new(None);
/// Where the next record goes.
static OFFSET: AtomicU64 = AtomicU64::new(0);
/// This process's MPI rank plus one (0: not a rank of a job of several).
static RANK: AtomicU64 = AtomicU64::new(0);

/// The size of the MPI job this process belongs to, from the launchers'
/// variables.
fn world_size() -> Option<u32> {
    static WORLD: OnceLock<Option<u32>> = OnceLock::new();
    launcher_number(
        &WORLD,
        &[
            "OMPI_COMM_WORLD_SIZE",
            "PMIX_SIZE",
            "PMI_SIZE",
            "MV2_COMM_WORLD_SIZE",
            "SLURM_NTASKS",
        ],
    )
}

/// The first of the launchers' variables `vars` that holds a number, read
/// once into `cell` (at load: before the program can change its
/// environment; a forked child keeps its parent's and reads nothing).
pub fn launcher_number(cell: &OnceLock<Option<u32>>, vars: &[&str]) -> Option<u32> {
    *cell.get_or_init(|| {
        vars.iter()
            .find_map(|v| std::env::var(v).ok()?.parse().ok())
    })
}

/// Creates this process's manifest with its `process` record (at load,
/// and in a forked child). `rank`: the process's MPI rank, if any.
pub fn start(rank: Option<u32>) {
    let Some(dir) = config::get().out_dir.as_deref() else {
        return;
    };
    let pid = sys::getpid();
    let start_ns = sys::now_unix_ns();
    let host = sys::hostname().to_string();
    let path = format!("{dir}/{PREFIX}{host}.{pid}.{start_ns}");
    let world = world_size();
    let in_job = rank.is_some() && world.is_some_and(|w| w > 1);
    RANK.store(rank.filter(|_| in_job).map_or(0, |r| r as u64 + 1), Relaxed);
    let first = Record::Process {
        host,
        pid,
        rank,
        world,
        start_ns,
    }
    .line();
    // The reserved zeros are allocated, not written; under a file-size
    // limit, only as many as it allows (the records past them extend the
    // file while the limit and the disk let them).
    let _quiet = sys::file_limits::QuietFsize::new();
    let at = first.len() as u64;
    let reserve = sys::file_limits::file_size_limit()
        .map_or(RESERVED, |limit| RESERVED.min(limit.saturating_sub(at)));
    let created = sys::outdir::open(&path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)
        .map(sys::file_above_floor)
        .and_then(|f| {
            f.write_all_at(first.as_bytes(), 0)?;
            if reserve > 0 {
                sys::reserve_zeros(&f, at, reserve)?;
            }
            Ok(())
        });
    let mut file = FILE.lock().unwrap_or_else(|e| e.into_inner());
    match created {
        Ok(()) => {
            OFFSET.store(first.len() as u64, Relaxed);
            *file = Some((pid, path));
        }
        Err(e) => {
            *file = None;
            crate::threads::run::warn(&format!(
                "could not create the run manifest {path}: {}; hpcprof-rs will not be able to tell which profiles are missing",
                sys::file_limits::describe(&e)
            ));
        }
    }
}

/// Appends `record` in place (best effort: a manifest that cannot take
/// it is said once).
fn write(record: Record) {
    if sandbox::quiet() {
        return;
    }
    let path = {
        let file = FILE.lock().unwrap_or_else(|e| e.into_inner());
        match &*file {
            Some((pid, path)) if *pid == sys::getpid() => path.clone(),
            _ => return,
        }
    };
    let line = record.line();
    let at = OFFSET.fetch_add(line.len() as u64, Relaxed);
    let _quiet = sys::file_limits::QuietFsize::new();
    let done = sys::outdir::open(&path, libc::O_WRONLY)
        .map(sys::file_above_floor)
        .and_then(|f| f.write_all_at(line.as_bytes(), at));
    if let Err(e) = done {
        crate::threads::run::warn_once(&format!(
            "could not write to the run manifest {path}: {}",
            sys::file_limits::describe(&e)
        ));
    }
}

/// Thread `index` (tid) wrote its final profile.
pub fn wrote_final(index: u32, tid: u32) {
    write(Record::Final {
        index,
        tid,
        end_ns: sys::now_unix_ns(),
    });
}

/// Thread `index`'s final profile could not be written, because `reason`.
pub fn lost(index: u32, tid: u32, reason: &str) {
    write(Record::Lost {
        index,
        tid,
        end_ns: sys::now_unix_ns(),
        reason: reason.to_string(),
    });
}

/// Signal `signal`, whose action ends the process, arrived: the
/// profiles are written next (a process killed before its `exit` record
/// was killed while writing them).
pub fn signalled(signal: i32) {
    write(Record::Signal {
        signal,
        at_ns: sys::now_unix_ns(),
    });
}

/// The process wrote its profiles at its end (`threads` measured).
pub fn exit(threads: u32) {
    write(Record::Exit {
        end_ns: sys::now_unix_ns(),
        threads,
    });
}

/// An `exec` failed after [`exit`] was written for it: the image runs on.
pub fn resumed() {
    write(Record::Resumed {
        at_ns: sys::now_unix_ns(),
    });
}

/// How long a rank waits at most for its peers ([`wait_for_peer_ranks`]):
/// under the one second Open MPI's `mpirun` gives a rank between SIGTERM
/// and SIGKILL when no rank ends before.
pub const PEER_WAIT_MS: u64 = 600;

/// In an MPI rank that wrote its profiles after a termination signal:
/// waits until every other rank process of this host in the run has
/// written its profiles (its manifest has `exit`) or has ended, at most
/// `max_ms` milliseconds. Nothing to do outside a job of several ranks.
/// Called from the fatal-signal handler (after the profiles are written,
/// like them it allocates from the crash-mode mappings); reads the
/// directory and the other ranks' manifests, and `/proc`.
pub fn wait_for_peer_ranks(max_ms: u64) {
    if RANK.load(Relaxed) == 0 || sandbox::quiet() {
        return;
    }
    let Some(dir) = config::get().out_dir.as_deref() else {
        return;
    };
    let own = sys::getpid();
    let prefix = format!("{PREFIX}{}.", sys::hostname());
    let deadline = sys::monotonic_ns() + max_ms * 1_000_000;
    while pending_peers(dir, &prefix, own) > 0 && sys::monotonic_ns() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The rank processes of this host (manifests named with `prefix`) other
/// than `own` that are alive and have not written their profiles yet.
fn pending_peers(dir: &str, prefix: &str, own: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut pending = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !name.starts_with(prefix) {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        let records = formats::manifest::parse(&bytes);
        let Some(Record::Process {
            pid, rank: Some(_), ..
        }) = records.first()
        else {
            continue;
        };
        if *pid == own || records.iter().any(|r| matches!(r, Record::Exit { .. })) {
            continue;
        }
        if sys::process_alive(*pid) {
            pending += 1;
        }
    }
    pending
}
