//! Finishing the combined partial: allocation counts into the heap
//! objects, frames and objects put into canonical order (the result does
//! not depend on the number of workers or on timing), per-object access
//! sites, histograms and per-thread values, and the database info.

use std::collections::{BTreeMap, HashMap};

use formats::database::{
    AccessSite, DataObject, DbInfo, Frame, ObjectHistogram, SharingLine, MAX_THREAD_VALUES,
};
use rustc_hash::FxHashMap;

use super::objects::{add_values, ObjExtra, ObjKey};
use super::output::{FinishedTree, MergedDb, Streamed};
use super::partial::{Partial, Shared};
use super::tree::Key;

/// Canonical order key of a frame.
pub(super) fn frame_order(f: &Frame) -> (&str, &str, Option<&str>, Option<u32>, bool, Option<u64>) {
    (
        &f.module,
        &f.function,
        f.file.as_deref(),
        f.line,
        f.inlined,
        f.offset,
    )
}

/// Finishes the combined partial: allocation counts, canonical order,
/// names, distributions. Every part of the partial is freed as soon as its
/// content has moved on.
pub(super) fn finish(
    mut part: Partial,
    shared: Shared,
    mut skipped: Vec<(String, String)>,
) -> Streamed {
    let pending = std::mem::take(&mut part.pending);
    if !pending.is_empty() {
        part.flush(pending, shared.keep_rank_values);
    }
    // The lookup tables are not needed any more.
    part.end_profiles();
    for tb in [&mut part.code, &mut part.data.tb] {
        tb.children = FxHashMap::default();
    }
    let metrics = shared.columns.finish();
    // Closes every module (the mapped debug information counts in the
    // resident memory).
    let (frame_table, mut warnings) = shared.symbols.finish();
    if let Some(w) = checkpoint_warning(&mut part.info.checkpoint_only) {
        warnings.push(w);
    }
    let columns = metrics.len();
    let threads = part.info.profiles;
    let ranks = part.info.ranks.len() as u32;
    let rank_dists = ranks > 0 && !part.info.rank_clash;
    if ranks > 0 && part.info.rank_clash {
        warnings.push(
            "a rank's threads are in files of several processes; per-rank distributions are left out"
                .to_string(),
        );
    }

    // Frames: keep the used ones, sorted.
    let mut used = vec![false; frame_table.list.len()];
    // Allocation counts into the heap objects. The frames of every
    // allocation path are kept, also those of paths no sample reached:
    // the naming stage tells the calls of one line apart by their order
    // (`double *cold = malloc(a), *hot = malloc(b);`, `ALLOCATE(a(n),
    // b(m))`), which needs all of them.
    // Every allocation path is kept for the naming stage, which decides
    // from all of them (not only the sampled ones) which functions are the
    // program's allocation layers, so that the decision does not depend
    // on which objects happened to get samples.
    let mut alloc_paths: Vec<Vec<u32>> = Vec::with_capacity(part.site_counts.len());
    for (path, counts) in std::mem::take(&mut part.site_counts) {
        for &f in &path {
            used[f as usize] = true;
        }
        alloc_paths.push(path.clone());
        if let Some(&id) = part.data.object_ids.get(&ObjKey::Heap(path)) {
            let o = &mut part.data.objects[id as usize];
            o.allocations = o.allocations.saturating_add(counts.allocations);
            o.bytes = o.bytes.saturating_add(counts.bytes);
            let b = o.blocks.get_or_insert_with(Default::default);
            b.max_bytes = b.max_bytes.max(counts.max_bytes);
            b.peak_live = b.peak_live.saturating_add(counts.peak_live);
            b.frees = b.frees.saturating_add(counts.frees);
            b.small |= counts.small;
        }
    }

    for tb in [&part.code, &part.data.tb] {
        for k in &tb.keys {
            if let Key::Frame(f) = k {
                used[*f as usize] = true;
            }
        }
    }
    for o in &part.data.objects {
        for &f in &o.alloc_path {
            used[f as usize] = true;
        }
    }
    // The function of each stack-frame object, by object.
    let stack_frames: Vec<Option<u32>> = part
        .data
        .keys
        .iter()
        .map(|k| match k {
            ObjKey::StackFrame(f) => Some(*f),
            _ => None,
        })
        .collect();
    for &f in stack_frames.iter().flatten() {
        used[f as usize] = true;
    }
    for extra in &part.data.extras {
        for &f in extra.sites.keys() {
            used[f as usize] = true;
        }
        for &(.., f, of) in extra.sharing.keys() {
            used[f as usize] = true;
            used[of as usize] = true;
        }
    }
    let mut order: Vec<u32> = (0..frame_table.list.len() as u32)
        .filter(|&f| used[f as usize])
        .collect();
    order.sort_by(|&a, &b| {
        frame_order(&frame_table.list[a as usize]).cmp(&frame_order(&frame_table.list[b as usize]))
    });
    let mut frame_map = vec![u32::MAX; frame_table.list.len()];
    for (new, &old) in order.iter().enumerate() {
        frame_map[old as usize] = new as u32;
    }
    let mut old_frames: Vec<Option<Frame>> = frame_table.list.into_iter().map(Some).collect();
    let frames: Vec<Frame> = order
        .iter()
        .map(|&f| old_frames[f as usize].take().unwrap_or_default())
        .collect();
    drop(old_frames);

    // Objects: sorted by kind, then what identifies them.
    let mut data = part.data;
    data.object_ids = HashMap::new();
    let mut extras: Vec<Option<ObjExtra>> = std::mem::take(&mut data.extras)
        .into_iter()
        .map(Some)
        .collect();
    let sort_key = |k: &ObjKey| -> (u8, Vec<u32>, String, u32) {
        match k {
            ObjKey::Heap(path) => (
                0,
                path.iter().map(|&f| frame_map[f as usize]).collect(),
                String::new(),
                0,
            ),
            ObjKey::SmallHeap => (1, Vec::new(), String::new(), 0),
            ObjKey::Static(name) => (2, Vec::new(), name.clone(), 0),
            ObjKey::Stack(n) => (3, Vec::new(), String::new(), *n),
            ObjKey::StackFrame(f) => (3, vec![frame_map[*f as usize]], String::new(), 0),
            ObjKey::Unknown => (4, Vec::new(), String::new(), 0),
            ObjKey::UnknownIn(label) => (4, Vec::new(), label.clone(), 1),
            ObjKey::NotRecovered => (5, Vec::new(), String::new(), 0),
        }
    };
    let mut obj_order: Vec<usize> = (0..data.objects.len()).collect();
    let obj_keys: Vec<_> = std::mem::take(&mut data.keys)
        .iter()
        .map(sort_key)
        .collect();
    obj_order.sort_by(|&a, &b| obj_keys[a].cmp(&obj_keys[b]));
    drop(obj_keys);
    let mut obj_map = vec![0u32; data.objects.len()];
    for (new, &old) in obj_order.iter().enumerate() {
        obj_map[old] = new as u32;
    }

    let rank_count = rank_dists.then_some(ranks);
    let code = FinishedTree::new(
        part.code, &frame_map, &obj_map, columns, threads, rank_count,
    );
    let data_tree = FinishedTree::new(data.tb, &frame_map, &obj_map, columns, threads, rank_count);
    // Threads, in canonical order, for the per-thread values.
    let merged_threads = std::mem::take(&mut part.info.threads);
    let mut thread_list = merged_threads.clone();
    thread_list.sort();
    thread_list.dedup();
    // Partial's thread index -> index into `thread_list`.
    let thread_index: Vec<u32> = merged_threads
        .iter()
        .map(|t| thread_list.binary_search(t).unwrap_or_default() as u32)
        .collect();
    drop(merged_threads);
    let keep_threads = thread_list.len() <= MAX_THREAD_VALUES;
    let layout = part
        .info
        .layout
        .filter(|_| part.info.layout_mismatches == 0);
    if part.info.layout_mismatches > 0 {
        warnings.push(
            "profiles were measured with different histogram layouts (--histogram); object histograms are left out"
                .to_string(),
        );
    }
    let mut old_objects: Vec<Option<DataObject>> = data.objects.into_iter().map(Some).collect();
    let objects: Vec<DataObject> = obj_order
        .iter()
        .filter_map(|&o| {
            let mut obj = old_objects[o].take()?;
            let extra = extras[o].take().unwrap_or_default();
            if let Some(f) = stack_frames[o] {
                let f = frame_map[f as usize];
                obj.frame = Some(f);
                let frame = &frames[f as usize];
                obj.name = crate::name::stack_frame_name(frame);
                // The variables its accesses fell in, by the DWARF.
                let vars = crate::name::frame_variables(&extra.frame_vars);
                if !vars.is_empty() {
                    obj.name = format!("{}: {vars}", obj.name);
                }
                // A runtime's own frames (libgomp's barrier) are the
                // runtime's memory, named and hidden as such.
                if let Some(r) = formats::runtimes::of_module(&frame.module) {
                    obj.name = format!("{}: {}", r.name, obj.name);
                    obj.runtime = Some(r.name.to_string());
                }
            }
            if let Some(layout) = layout.filter(|_| !extra.histogram.is_empty()) {
                obj.histogram = Some(ObjectHistogram {
                    layout,
                    counts: extra.histogram.into_iter().collect(),
                });
            }
            obj.sites = extra
                .sites
                .into_iter()
                .map(|(frame, counts)| AccessSite {
                    frame: frame_map[frame as usize],
                    counts,
                })
                .collect();
            // Most sampled first; ties by source location.
            obj.sites
                .sort_by_key(|s| (std::cmp::Reverse(s.counts.samples), s.frame));
            obj.sharing = extra
                .sharing
                .into_iter()
                .map(
                    |((t, line_offset, thread, other_thread, f, of), events)| SharingLine {
                        true_sharing: t,
                        line_offset,
                        thread: thread_index[thread as usize],
                        other_thread,
                        frame: frame_map[f as usize],
                        other_frame: frame_map[of as usize],
                        events,
                    },
                )
                .collect();
            // Most events first; ties in a fixed order.
            obj.sharing.sort_by(|a, b| {
                b.events.cmp(&a.events).then_with(|| {
                    (
                        a.true_sharing,
                        a.line_offset,
                        a.thread,
                        a.other_thread,
                        a.frame,
                        a.other_frame,
                    )
                        .cmp(&(
                            b.true_sharing,
                            b.line_offset,
                            b.thread,
                            b.other_thread,
                            b.frame,
                            b.other_frame,
                        ))
                })
            });
            obj.reuse = extra.reuse;
            if keep_threads {
                let mut by: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
                for (t, mut values) in extra.by_thread {
                    values.resize(columns, 0);
                    add_values(by.entry(thread_index[t as usize]).or_default(), &values);
                }
                obj.by_thread = by.into_iter().collect();
                if obj.histogram.is_some() {
                    let mut hist: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
                    for (t, counts) in extra.histogram_by_thread {
                        let h = hist.entry(thread_index[t as usize]).or_default();
                        for (b, n) in counts {
                            let e = h.entry(b).or_default();
                            *e = e.saturating_add(n);
                        }
                    }
                    obj.histogram_by_thread = hist
                        .into_iter()
                        .map(|(t, h)| (t, h.into_iter().collect()))
                        .collect();
                }
            }
            Some(obj)
        })
        .map(|mut o| {
            o.alloc_path = o
                .alloc_path
                .iter()
                .map(|&f| frame_map[f as usize])
                .collect();
            o.node = data_tree.final_index(o.node);
            o
        })
        .collect();
    drop(old_objects);
    drop(extras);
    let mut alloc_paths: Vec<Vec<u32>> = alloc_paths
        .into_iter()
        .map(|p| p.iter().map(|&f| frame_map[f as usize]).collect())
        .collect();
    alloc_paths.sort();
    alloc_paths.dedup();

    let info = part.info;
    skipped.extend(info.skipped);
    skipped.sort();
    let db = MergedDb {
        info: DbInfo {
            events: info.events.into_iter().collect(),
            ranks: info.ranks.into_iter().collect(),
            processes: info.processes.len() as u32,
            threads,
            profiles: threads,
            skipped,
            metrics,
            primary_metric: 0,
            stats: info.stats,
            commands: info.commands.into_iter().collect(),
            thread_list,
            losses: Vec::new(),
            manifest: false,
            format: formats::database::DB_FORMAT,
        },
        frames,
        code,
        data: data_tree,
        objects,
        alloc_paths,
    };
    Streamed { db, warnings }
}

/// Threads named in full by [`checkpoint_warning`]; more are counted.
const CHECKPOINT_NAMES: usize = 8;

/// The warning naming the threads whose profile is only a checkpoint
/// (`SampleStats::checkpoints`): their process ended without writing the
/// final profile, so what they measured after it is lost. A raw
/// `exit_group` system call does that to the main thread of a process
/// that exits normally, so the summary's "checkpoints of a run that did
/// not finish" is not enough: which threads, in which process.
fn checkpoint_warning(names: &mut [String]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    names.sort();
    let shown = names.len().min(CHECKPOINT_NAMES);
    let more = match names.len() - shown {
        0 => String::new(),
        n => format!(", and {n} more"),
    };
    let (subject, verb, who) = match names.len() {
        1 => ("the profile of", "is only a checkpoint".to_string(), "it"),
        n => (
            "the profiles of",
            format!("are only checkpoints ({n} threads)"),
            "these threads",
        ),
    };
    Some(format!(
        "{subject} {}{more} {verb}: the process ended without writing the final profile (a raw exit_group system call, a kill, or a crash the profiler could not catch), so what {who} measured after the last checkpoint is lost",
        names[..shown].join(", "),
    ))
}

#[cfg(test)]
mod tests {
    use super::checkpoint_warning;

    #[test]
    fn checkpoint_warning_names_the_threads_sorted_and_counts_the_rest() {
        assert_eq!(checkpoint_warning(&mut []), None);
        let one =
            checkpoint_warning(&mut ["thread 0 (main, tid 7) of app (pid 7)".into()]).unwrap();
        assert!(
            one.starts_with(
                "the profile of thread 0 (main, tid 7) of app (pid 7) is only a checkpoint: "
            ),
            "{one}"
        );
        let mut many: Vec<String> = (0..10).rev().map(|i| format!("thread {i}")).collect();
        let w = checkpoint_warning(&mut many).unwrap();
        assert!(
            w.starts_with("the profiles of thread 0, thread 1, thread 2, thread 3, thread 4, thread 5, thread 6, thread 7, and 2 more are only checkpoints (10 threads): "),
            "{w}"
        );
    }
}
