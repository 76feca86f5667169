//! Inserting one sample into the thread's trees: the code path, the
//! object and its access path, the offset histogram and the access site.

use std::sync::atomic::Ordering::*;

use crate::access::stride::Decoded;
use crate::cct::{self, Tree};
use crate::threads::run;
use crate::threads::{self, ThreadState};

use super::classify::Target;

/// Records one sample: `path` (innermost first) in the code tree with
/// `code_metrics`, and, when `target` is known, below that object in its
/// data tree with `data_metrics` (and into its offset histogram at
/// `addr`; and, with `site` = (accessing instruction, its decoder stride),
/// into the stride tables of that access site). Returns false (counted)
/// if the trees are full.
pub fn record(
    state: &ThreadState,
    path: &[u64],
    code_metrics: &[(usize, u64)],
    target: Option<Target>,
    addr: Option<u64>,
    data_metrics: &[(usize, u64)],
    site: Option<(u64, Decoded)>,
) -> bool {
    let stats = &state.stats;
    let tree: &Tree = &state.tree;
    // Room for both paths and the object node, so that a sample is either
    // in every tree or in none.
    if tree.len() + 2 * path.len() + 2 > tree.mapped() {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    }
    let Some((&leaf, callers)) = path.split_first() else {
        return false;
    };
    // SAFETY: the path cache is used only by this thread's handlers, which
    // block each other's signals (no re-entry).
    let paths = unsafe { &mut *state.handler_paths.get() };
    // The callers' nodes usually come from the previous sample (a loop);
    // then only the leaf is looked up in each tree.
    let code_leaf = paths
        .code_parent(tree, callers)
        .and_then(|parent| tree.child(parent, cct::TAG_CALL, leaf));
    let Some(code_leaf) = code_leaf else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    };
    let Some(target) = target else {
        for &(m, v) in code_metrics {
            tree.add(code_leaf, m, v);
        }
        return true;
    };
    let Some(object) = tree.child(target.root, target.tag, target.key) else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    };
    let data_leaf = paths
        .data_parent(tree, object, callers)
        .and_then(|parent| tree.child(parent, cct::TAG_CALL, leaf));
    let Some(data_leaf) = data_leaf else {
        stats.dropped[threads::DROP_TREE_FULL].fetch_add(1, Relaxed);
        return false;
    };
    for &(m, v) in code_metrics {
        tree.add(code_leaf, m, v);
    }
    for &(m, v) in data_metrics {
        tree.add(data_leaf, m, v);
    }
    if let (Some((start, end)), Some(addr)) = (target.range, addr) {
        if let Some(bucket) = run::histogram_layout().bucket(addr.wrapping_sub(start), end - start)
        {
            if !state.histogram.add(object, bucket) {
                stats.histogram_full.fetch_add(1, Relaxed);
            }
        }
    }
    if let (Some(addr), Some((ip, stride))) = (addr, site) {
        let delta = state.ips.delta(ip, object, addr);
        // Where in its frame a stack access fell names the variable.
        let frame_offset = target.frame_cfa.map(|cfa| addr.wrapping_sub(cfa) as i64);
        if !state.sites.note(object, ip, stride, delta, frame_offset) {
            stats.sites_full.fetch_add(1, Relaxed);
        }
    }
    true
}
