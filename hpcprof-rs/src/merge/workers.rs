//! Scheduling: the input cut into work items, one work item per process group unless a
//! group is a large share of the input; a fixed number of workers pull
//! work items from a shared counter, each into its own [`Partial`], and
//! the partials are combined.

use std::sync::atomic::{AtomicUsize, Ordering};

use formats::database::{MAX_RANK_VALUES, MAX_THREAD_VALUES};
use rayon::prelude::*;

use super::columns::Columns;
use super::finish::finish;
use super::input::Input;
use super::output::Streamed;
use super::partial::{Partial, Shared};
use crate::symbolize::Symbolizer;

/// Runs the merge over `groups` of input indices (one group per process).
pub(super) fn run(
    groups: Vec<Vec<usize>>,
    input: &Input<'_>,
    skipped: Vec<(String, String)>,
) -> Streamed {
    let timings = std::env::var_os("HPCPROF_RS_TIMINGS").is_some();
    let t0 = std::time::Instant::now();
    let sizes = (groups.iter().map(Vec::len).sum(), groups.len());
    let (partial, shared) = run_partial(groups, input, sizes);
    let merged = finish(partial, shared, skipped);
    if timings {
        eprintln!(
            "hpcprof-rs: timings: finished at {:.3}s",
            t0.elapsed().as_secs_f64()
        );
    }
    merged
}

/// The workers' combined partial result over `groups`, not finished;
/// `sizes` are the numbers of profiles and of processes of the whole
/// merge (all shares).
pub(super) fn run_partial(
    groups: Vec<Vec<usize>>,
    input: &Input<'_>,
    sizes: (usize, usize),
) -> (Partial, Shared) {
    let shared = Shared {
        symbols: Symbolizer::default(),
        columns: Columns::new(),
        keep_thread_values: sizes.0 <= MAX_THREAD_VALUES,
        keep_rank_values: sizes.1 <= MAX_RANK_VALUES,
    };
    let workers = rayon::current_num_threads().max(1);
    let total: usize = groups.iter().map(Vec::len).sum();
    // Split a process's files over workers only when it is a large share
    // of the input (one process with many threads).
    let max_item = total.div_ceil(2 * workers).max(1);
    let mut items: Vec<(&[usize], bool)> = Vec::new();
    for g in &groups {
        if g.len() <= max_item {
            items.push((g, true));
        } else {
            items.extend(g.chunks(max_item).map(|c| (c, false)));
        }
    }
    let next = AtomicUsize::new(0);
    let timings = std::env::var_os("HPCPROF_RS_TIMINGS").is_some();
    let t0 = std::time::Instant::now();
    let partial = (0..workers.min(items.len()).max(1))
        .into_par_iter()
        .map(|_| {
            let mut partial = Partial::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(files, whole)) = items.get(i) else {
                    break;
                };
                partial.merge_item(&shared, files, whole, input);
            }
            // Every work item has been taken: no more profiles.
            partial.end_profiles();
            if timings {
                eprintln!(
                    "hpcprof-rs: timings: worker done at {:.3}s ({} + {} nodes)",
                    t0.elapsed().as_secs_f64(),
                    partial.code.len(),
                    partial.data.tb.len()
                );
            }
            partial
        })
        .reduce_with(Partial::absorb)
        .unwrap_or_else(Partial::new);
    if timings {
        eprintln!(
            "hpcprof-rs: timings: combined at {:.3}s",
            t0.elapsed().as_secs_f64()
        );
    }
    (partial, shared)
}
