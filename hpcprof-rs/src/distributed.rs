//! `mpirun -np P hpcprof-rs --mpi MEASUREMENTS`: the merge distributed over
//! MPI ranks (cargo feature `mpi`, the `mpi` crate on the system's MPI).
//!
//! 1. Rank 0 lists the measurement directory once, chooses the files to
//!    merge (one run, each thread once: [`crate::runs`]) and broadcasts
//!    their names (relative to the directory, which every rank resolves
//!    itself: it must be on a file system all ranks see).
//! 2. The files are grouped by measured process ([`merge::process_groups`];
//!    all threads of a process stay on one rank) and rank `r` merges every
//!    group `g` with `g % P == r`, with its own `-j` workers
//!    ([`merge::Share`]).
//! 3. A rank that cannot read its share (a listed file missing: a
//!    node-local directory) says so; every rank learns it from one
//!    reduction and exits with an error: no database is written.
//! 4. Binomial-tree reduction: in round k, rank r with `r % 2^(k+1) ==
//!    2^k` sends its share (MessagePack, with its frame and metric tables)
//!    to `r - 2^k`, which renumbers and absorbs it. After log2(P) rounds
//!    rank 0 holds everything, finishes it and writes the database, which
//!    is byte-identical to the serial merge's (the merge does not depend
//!    on how its input is split).
//!
//! Damaged files are skipped by whoever reads them and travel in the
//! shares to rank 0's summary. Only rank 0 prints the progress and the
//! summary.

use std::path::{Path, PathBuf};

use mpi::traits::*;

use crate::merge::{self, Share, Streamed};
use crate::read;

/// What a rank ends with.
pub enum Outcome {
    /// Rank 0: the finished merge.
    Root(Box<Streamed>),
    /// Another rank: its share went to rank 0's side.
    Sent,
    /// The job failed and this rank has said why (every rank says it
    /// before any exits: a launcher ends the whole job at the first
    /// process that exits with an error).
    Failed,
}

/// Runs this rank's part of the distributed merge of `dir`. `check` runs
/// on rank 0 before any work (the output directory's checks), then
/// `select` chooses the files to merge of those listed (one run, each
/// thread once: [`crate::runs::select`]); `progress` is told the bytes
/// rank 0 reads.
pub fn merge(
    dir: &Path,
    check: &dyn Fn() -> Result<(), String>,
    select: &dyn Fn(Vec<PathBuf>) -> Result<Vec<PathBuf>, String>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Outcome, String> {
    let universe = mpi::initialize().ok_or("MPI was initialised already")?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let root = world.process_at_rank(0);
    let host = hostname();
    let me = format!("rank {rank} of {size} ({host})");

    // 1. The file list, from rank 0 (or its error).
    let mut listing: Vec<u8> = Vec::new();
    if rank == 0 {
        let chosen = check()
            .and_then(|()| read::find(dir).map_err(|e| format!("{e:#}")))
            .and_then(select);
        listing = match chosen {
            Ok(files) => {
                let mut out = vec![b'+'];
                for f in &files {
                    let rel = f.strip_prefix(dir).unwrap_or(f);
                    out.extend_from_slice(rel.to_string_lossy().as_bytes());
                    out.push(0);
                }
                out
            }
            Err(e) => {
                let mut out = vec![b'!'];
                out.extend_from_slice(e.as_bytes());
                out
            }
        };
    }
    let mut len = listing.len() as u64;
    root.broadcast_into(&mut len);
    listing.resize(len as usize, 0);
    root.broadcast_into(&mut listing[..]);
    if listing.first() == Some(&b'!') {
        let e = String::from_utf8_lossy(&listing[1..]).into_owned();
        return Err(if rank == 0 {
            e
        } else {
            format!("{me}: rank 0 stopped: {e}")
        });
    }
    let files: Vec<PathBuf> = listing[1..]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| dir.join(String::from_utf8_lossy(s).as_ref()))
        .collect();

    // 2. This rank's share.
    let groups: Vec<Vec<usize>> = merge::process_groups(&files)
        .into_iter()
        .enumerate()
        .filter(|(g, _)| *g % size as usize == rank as usize)
        .map(|(_, g)| g)
        .collect();
    let missing: Vec<&PathBuf> = groups
        .iter()
        .flatten()
        .map(|&i| &files[i])
        .filter(|f| !f.exists())
        .collect();
    let quiet = |_: u64| {};
    let local_error = (!missing.is_empty()).then(|| {
        format!(
            "{me} cannot read {} of its {} measurement files (first: {}: no such file); the measurement directory must be on a file system that every rank sees, under the same path",
            missing.len(),
            groups.iter().map(Vec::len).sum::<usize>(),
            missing[0].display()
        )
    });
    let share = match local_error {
        None => Some(Share::merge(
            &files,
            groups,
            if rank == 0 { progress } else { &quiet },
        )),
        Some(_) => None,
    };

    // 3. Did any rank fail? (The lowest failing rank, or `size`.)
    let mine = if share.is_none() { rank } else { size };
    let mut failed = size;
    world.all_reduce_into(&mine, &mut failed, mpi::collective::SystemOperation::min());
    if failed < size {
        let why = match local_error {
            Some(e) => e,
            None => format!(
                "{me}: stopping: rank {failed} could not read its share of {} (see its message); no database was written",
                dir.display()
            ),
        };
        eprintln!("hpcprof-rs: error: {why}");
        world.barrier();
        return Ok(Outcome::Failed);
    }
    let mut share = share.expect("no rank failed");

    // 4. Binomial-tree reduction onto rank 0.
    let mut step = 1;
    while step < size {
        if rank % (2 * step) == step {
            world
                .process_at_rank(rank - step)
                .send(&share.to_bytes()[..]);
            return Ok(Outcome::Sent);
        }
        if rank + step < size {
            let (bytes, _status) = world.process_at_rank(rank + step).receive_vec::<u8>();
            share = match share.absorb_bytes(&bytes) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("hpcprof-rs: error: {me}: from rank {}: {e}", rank + step);
                    world.abort(2);
                }
            };
        }
        step *= 2;
    }
    Ok(Outcome::Root(Box::new(share.finish())))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}
