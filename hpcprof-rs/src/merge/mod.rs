//! Merges thread profiles into one symbolised [`Database`], streaming.
//!
//! The input is a list of profiles (files, or decoded profiles in tests),
//! grouped by process (`<exe>.<host>.<pid>.<tid>.hpcrun`: everything but
//! the thread id) and cut into work items. A fixed number of workers (the
//! rayon pool, `-j N`) pull work items from a shared counter; each worker
//! owns one partial database and, for every profile, reads and decodes it,
//! merges it into its partial and drops it. So memory holds at most one
//! profile per worker plus one partial result per worker, never the inputs.
//! The partials are then combined, frames/objects/nodes put into a canonical
//! order (the result does not depend on the number of workers or on timing)
//! and the per-node distributions finished. Naming the heap objects is the
//! next stage of the pipeline (read -> merge -> name -> db, see
//! [`crate::naming`]), run by the caller.
//!
//! * Raw addresses are mapped to (module, file address) with the profile's
//!   module table and symbolised on first sight by the shared
//!   [`Symbolizer`] (one addr2line context per module, opened lazily; each
//!   address resolved once per merge); each address becomes its inline
//!   chain of frames, outermost first.
//! * Trees merge by (parent, frame or object); exclusive metrics are summed
//!   (columns matched by metric name; `samples` is always column 0, the
//!   primary metric).
//! * Data objects are identified by what they are, not by where a process
//!   kept them: a heap object by its symbolised allocation path (the same
//!   path in two threads, processes or ranks is one object), a static
//!   variable by its name, a stack by its thread index.
//! * Distributions (`TreeNode::threads`, `TreeNode::ranks`): for each
//!   profile the inclusive primary value of every node it reaches is
//!   computed in the merged tree (sparse, only the nodes it touched) and
//!   added to per-node accumulators (count of non-zero values, sum, sum of
//!   squares, min, max); threads that never reached a node count as 0 when
//!   the summary is finished with the total thread count. Per-rank values
//!   are summed over a process's threads first (a process's files are one
//!   work item unless the group is split, in which case its per-rank sums
//!   are carried along and combined before they are accumulated).
//!
//! The modules, each using only those above it:
//!
//! * `dist`: `Acc`, the streaming summary of a value over
//!   threads or ranks;
//! * `resolve`: raw address -> module address -> inline chain of frames;
//! * `tree`: the tree builder (nodes, exclusive metrics, accumulators) and
//!   the absorption of one worker's tree into another's;
//! * `objects`: data object identity, per-object facts, the data tree;
//! * `columns`: the metric column registry;
//! * `input`: decoded profiles, or files read and decoded on demand;
//! * `partial`: one worker's partial merge, adding profiles and combining;
//! * `output`: the finished trees and the merged database, written node by
//!   node;
//! * `finish`: canonical order, objects and database info of the combined
//!   partial;
//! * `workers`: work items and the worker pool;
//! * `share`: a partial merge sent between MPI ranks (`--mpi`).

mod columns;
mod dist;
mod finish;
mod input;
mod objects;
mod output;
mod partial;
mod resolve;
mod share;
mod tree;
mod workers;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use formats::measurement::ThreadProfile;

pub use columns::PRIMARY;
use input::{with_file_input, Input};
pub use output::{Merged, MergedDb, Streamed};
use partial::{proc_key, ProcKey};
pub use share::{process_groups, Share};
pub use tree::{HEAP_ROOT, STACKS_GROUP, STATIC_ROOT, UNKNOWN_ROOT};
use workers::run;

/// Merges `profiles` (already decoded) into a database; `skipped` is recorded
/// as is. Never fails: what cannot be symbolised gets a placeholder frame.
/// Heap objects keep their placeholder names: naming them is the next
/// stage ([`crate::naming::name_objects`]).
pub fn merge(profiles: &[ThreadProfile], skipped: Vec<(String, String)>) -> Merged {
    let mut groups: BTreeMap<ProcKey, Vec<usize>> = BTreeMap::new();
    for (i, p) in profiles.iter().enumerate() {
        groups.entry(proc_key(p)).or_default().push(i);
    }
    let load = |i: usize| Ok(Cow::Borrowed(&profiles[i]));
    let name = |i: usize| format!("profile {i}");
    let input = Input {
        load: &load,
        name: &name,
    };
    run(groups.into_values().collect(), &input, skipped).into_merged()
}

/// Reads, decodes and merges `files`, streaming (see the module
/// documentation). `progress` is told the size of every file read.
/// Unusable files are skipped with their reason.
pub fn merge_files(files: &[PathBuf], progress: &(dyn Fn(u64) + Sync)) -> Streamed {
    let groups = process_groups(files);
    with_file_input(files, progress, |input| run(groups, input, Vec::new()))
}

#[cfg(test)]
mod tests;
