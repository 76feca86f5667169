//! Turns a thread's state into a `formats::measurement::ThreadProfile` and
//! writes it as `<exe>.<host>.<pid>.<tid>.hpcrun` in the output directory.
//! Runs at thread exit (pthread key destructor) and at process exit, never
//! in a signal handler, so it may allocate (from the library's own
//! allocator).

use std::collections::HashMap;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

use formats::measurement::{
    AllocSite, Allocation, Cct, CctNode, EventInfo, MetricInfo, Module, NodeKey, ObjectRef,
    ObjectStats, ProcessInfo, SampleStats, SharingEvents, SiteStrides, StaticVar, ThreadInfo,
    ThreadProfile, UnknownRegion, WatchStats,
};

use crate::access::regions;
use crate::cct;
use crate::code::modules;
use crate::objects;
use crate::sys;
use crate::threads::config;
use crate::threads::run;
use crate::threads::sampling;
use crate::threads::{self, ThreadState};

/// This process's description, read once per process (at load time, in a
/// forked child at its first write): a checkpoint thread must not read the
/// environment while the program may be changing it (`getenv` against a
/// concurrent `setenv` is a data race in glibc).
static PROCESS: std::sync::Mutex<Option<ProcessInfo>> = std::sync::Mutex::new(None);

/// Reads this process's description (at load time), for the files.
pub fn init_process_info() {
    process_info();
}

fn process_info() -> ProcessInfo {
    use std::sync::TryLockError;
    let mut cached = match PROCESS.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        // After a fatal signal the holder may be stuck on glibc's heap lock
        // that the crashed thread holds: read it afresh instead.
        Err(TryLockError::WouldBlock) if sys::in_crash_mode() => return read_process_info(),
        Err(TryLockError::WouldBlock) => PROCESS.lock().unwrap_or_else(|e| e.into_inner()),
    };
    match &*cached {
        Some(info) if info.pid == sys::getpid() => info.clone(),
        _ => {
            let info = read_process_info();
            *cached = Some(info.clone());
            info
        }
    }
}

/// The final writer's turn at `state`'s file: waits for a checkpoint in
/// progress. After a fatal signal (crash mode) it waits at most 0.5 s: the
/// helper may be stuck on a lock the crashed thread holds (glibc's heap),
/// and the final profile matters more.
pub fn wait_for_writer(state: &ThreadState) -> Option<std::sync::MutexGuard<'_, ()>> {
    if !sys::in_crash_mode() {
        return Some(state.writing.lock().unwrap_or_else(|e| e.into_inner()));
    }
    for _ in 0..500 {
        match state.writing.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {
                std::thread::sleep(Duration::from_millis(1))
            }
        }
    }
    None
}

/// True if the thread measured anything worth a file (or has one).
pub fn measured(state: &ThreadState) -> bool {
    let s = &state.stats;
    s.samples.load(Relaxed) > 0
        || s.page_faults.load(Relaxed) > 0
        || s.watch_traps.load(Relaxed) > 0
        || state.last_record.load(Relaxed) != 0
        || state.file.get().is_some()
}

/// Stops sampling for `state` and writes its profile (once; it replaces
/// the thread's last checkpoint, if any). A thread other than the main
/// one that measured nothing (a short-lived thread that ended before its
/// first sample) gets no file, only a count: creating and writing a file
/// was most of what a short thread cost. True if this call
/// finished it (false: it was finished already, or belongs to another
/// process).
pub fn finish(state: &ThreadState) -> bool {
    if state.pid != sys::getpid() || state.finished.swap(true, AcqRel) {
        return false;
    }
    sampling::stop(state, true);
    let Some(dir) = config::get().out_dir.as_deref() else {
        return true;
    };
    // A checkpoint of this thread being written finishes first.
    let _writing = wait_for_writer(state);
    // Nothing measured, nothing lost, nothing to tell: no file.
    let quiet = || {
        crate::output::notices::of_thread(state).is_empty()
            && state.stats.dropped.iter().all(|d| d.load(Relaxed) == 0)
    };
    if state.index != 0 && !measured(state) && quiet() {
        crate::output::notices::count_unwritten(state.stats.cpu_time_ns.load(Relaxed));
        return true;
    }
    let profile = build_profile(state);
    crate::output::notices::publish(dir, &profile.stats.notices);
    // The main thread is written last: every other thread is finished.
    if state.index == 0 {
        if let Some((note, threads)) = crate::output::notices::short_lived_note() {
            crate::output::notices::publish(dir, &[(note, threads)].into());
        }
        // Small blocks the object map did not take: the launcher says so
        // (one line per process that lost some).
        if let Some(lost) = formats::notes::untracked_blocks(&profile.stats.untracked_blocks) {
            crate::output::notices::publish(dir, &[(lost, 1)].into());
        }
    }
    crate::output::profile_file::write(state, dir, &profile);
    true
}

/// How the notices on what a profile built short of memory left out
/// begin.
const RAN_OUT: &str = "measurement limited: the profiler's memory ran out (the kernel refused it new mappings and its reserve was nearly spent): ";

/// Heap bytes one node of the trees takes while a profile is built: its
/// place, its node twice (a vector that grows holds its old and new
/// blocks for a moment), its metrics block (`columns` values) and its
/// share of the object tables.
fn node_bytes(columns: usize) -> usize {
    std::mem::size_of::<(u32, u32)>()
        + 2 * std::mem::size_of::<CctNode>()
        + (columns * 8).next_multiple_of(16).max(16)
        + 32
}

/// How many of a thread's `n` tree nodes its profile holds: all of them
/// while the kernel grants the profiler memory; once it refused, as many
/// as the reserve can spare (`sys::heap::can_spare`) at `per_node` bytes
/// each. Nodes are kept in creation order, so a kept node's parent is
/// kept: the tail, the paths first seen last, is what is cut.
fn node_budget(n: usize, per_node: usize) -> usize {
    if !sys::heap::short_of_memory() {
        return n;
    }
    let spare = sys::heap::reserve_left().saturating_sub(sys::heap::KEPT);
    n.min(spare / per_node.max(1))
}

/// Pushes `value` onto `v`, growing it fallibly: false (nothing pushed)
/// when the profiler's memory refuses.
fn push_fallibly<T>(v: &mut Vec<T>, value: T) -> bool {
    if v.len() == v.capacity() && v.try_reserve(v.capacity().max(16)).is_err() {
        return false;
    }
    v.push(value);
    true
}

/// What a profile built short of memory left out (counted for its
/// notice).
#[derive(Default)]
struct Cut {
    /// Tree nodes, and the samples they held.
    nodes: u64,
    samples: u64,
    /// Allocation sites written without their call paths.
    sites: u64,
}

/// Makes room for one more record in the allocation log `log`, growing
/// it only as far as the profiler's memory can spare
/// (`sys::heap::can_spare`), and fallibly; false when there is none.
fn log_has_room(log: &mut Vec<Allocation>) -> bool {
    if log.len() < log.capacity() {
        return true;
    }
    let more = log.capacity().max(1024);
    sys::heap::can_spare(more.saturating_mul(std::mem::size_of::<Allocation>()) * 2)
        && log.try_reserve_exact(more).is_ok()
}

/// This process's MPI rank, from the launchers' variables
/// (`manifest::launcher_number`: read once, at load).
pub fn rank_from_env() -> Option<u32> {
    static RANK: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    super::manifest::launcher_number(
        &RANK,
        &[
            "OMPI_COMM_WORLD_RANK",
            "PMIX_RANK",
            "PMI_RANK",
            "MV2_COMM_WORLD_RANK",
            "SLURM_PROCID",
        ],
    )
}

fn read_process_info() -> ProcessInfo {
    let command: Vec<String> = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let exe = sys::exe_path().to_string();
    ProcessInfo {
        pid: sys::getpid(),
        host: sys::hostname().to_string(),
        rank: rank_from_env(),
        exe,
        command,
        run_id: config::get().run_id.clone(),
    }
}

/// Builds the file contents from the thread's node pool and the global
/// tables.
pub fn build_profile(state: &ThreadState) -> ThreadProfile {
    let cfg = config::get();
    let objs = objects::get();
    let columns = run::active_columns();
    let all_columns = run::metric_columns();
    let mut profile = ThreadProfile {
        process: process_info(),
        thread: ThreadInfo {
            tid: state.tid,
            index: state.index,
            stack: state.stack.range(),
            start_unix_ns: state.start_ns,
            end_unix_ns: sys::now_unix_ns(),
            created_at: crate::threads::creators::get(state.index),
        },
        events: events(cfg),
        metrics: columns
            .iter()
            .map(|&c| {
                let (name, unit, description) = all_columns[c];
                MetricInfo {
                    name: name.to_string(),
                    unit: unit.to_string(),
                    description: description.to_string(),
                }
            })
            .collect(),
        histogram_layout: cfg.histogram,
        ..Default::default()
    };
    // Node metrics in the order of `columns`, trailing zeros left out.
    let pick = |m: &[u64; cct::METRICS]| -> Vec<u64> {
        let mut v: Vec<u64> = columns.iter().map(|&c| m[c]).collect();
        while v.last() == Some(&0) {
            v.pop();
        }
        v
    };
    // Every module ever loaded (ids are stable), so that addresses in a
    // library that was dlclose'd since can still be mapped.
    let all_modules = modules::all_modules();
    profile.modules = all_modules
        .iter()
        .map(|m| Module {
            path: m.info.path.clone(),
            build_id: m.info.build_id.clone(),
            bias: m.info.bias,
            ranges: m.info.segments.iter().map(|&(s, e, _)| (s, e)).collect(),
        })
        .collect();

    let mut trees = [
        Cct::default(),
        Cct::default(),
        Cct::default(),
        Cct::default(),
    ];
    let n = state.tree.len();
    // Short of memory: only the nodes the reserve can spare, the rest cut
    // (counted).
    let mut cut = Cut::default();
    let mut budget = node_budget(n, node_bytes(columns.len()));
    // Node -> (tree, index in that tree); tree `u32::MAX`: left out.
    let mut placed: Vec<(u32, u32)> = Vec::new();
    if placed.try_reserve_exact(budget).is_err() {
        budget = 0;
    }
    let mut sites = SiteTable::default();
    let mut static_ids: HashMap<u64, u32> = HashMap::new();
    // Node -> the object it stands for (object nodes only).
    let mut object_of: HashMap<u32, ObjectRef> = HashMap::new();
    // Unknown addresses' regions: key -> index in `unknown_regions`.
    let mut region_ids: HashMap<u64, u32> = HashMap::new();
    // Their keys and first sampled addresses, in `unknown_regions` order.
    let mut region_addresses: Vec<(u64, u64)> = Vec::new();
    for i in 0..n {
        let (parent, tag, key, metrics) = state.tree.node(i);
        if i >= budget {
            cut.nodes += 1;
            cut.samples += metrics[cct::M_SAMPLES];
            continue;
        }
        if i < 4 {
            placed.push((i as u32, 0));
            trees[i].nodes[0].metrics = pick(&metrics);
            continue;
        }
        let Some(&(tree, parent_index)) = placed.get(parent as usize) else {
            placed.push((u32::MAX, 0));
            continue;
        };
        if tree == u32::MAX {
            // Below a node left out (short of memory), or a damaged
            // parent link.
            if sys::heap::short_of_memory() {
                cut.nodes += 1;
                cut.samples += metrics[cct::M_SAMPLES];
            }
            placed.push((u32::MAX, 0));
            continue;
        }
        let tree = tree as usize;
        let node_key = match tag {
            cct::TAG_CALL => NodeKey::Call(key),
            cct::TAG_HEAP_SITE => NodeKey::Object(ObjectRef::HeapSite(sites.local(key as u32))),
            cct::TAG_STATIC => {
                let next = static_ids.len() as u32;
                let id = *static_ids.entry(key).or_insert(next);
                if id == next {
                    let (module, index) = ((key >> 32) as u32, key as u32);
                    profile
                        .statics
                        .push(match modules::static_symbol(module, index) {
                            Some(v) => StaticVar {
                                name: v.name,
                                module: Some(module),
                                address: v.start,
                                size: v.end - v.start,
                            },
                            None => StaticVar::default(),
                        });
                }
                NodeKey::Object(ObjectRef::Static(id))
            }
            cct::TAG_STACK => NodeKey::Object(ObjectRef::Stack(key as u32)),
            cct::TAG_STACK_FRAME => NodeKey::Object(ObjectRef::StackFrame(key)),
            cct::TAG_SMALL_HEAP => NodeKey::Object(ObjectRef::SmallHeap),
            cct::TAG_NOT_RECOVERED => NodeKey::Object(ObjectRef::NotRecovered),
            cct::TAG_UNKNOWN => match regions::first_address(key) {
                Some(address) => {
                    let next = region_ids.len() as u32;
                    let id = *region_ids.entry(key).or_insert(next);
                    if id == next {
                        region_addresses.push((key, address));
                    }
                    NodeKey::Object(ObjectRef::UnknownRegion(id))
                }
                None => NodeKey::Object(ObjectRef::Unknown),
            },
            _ => NodeKey::Object(ObjectRef::Unknown),
        };
        let index = trees[tree].nodes.len() as u32;
        let room = matches!(node_key, NodeKey::Call(_)) || object_of.try_reserve(1).is_ok();
        let node = CctNode {
            parent: parent_index,
            key: node_key,
            metrics: pick(&metrics),
        };
        if !room || !push_fallibly(&mut trees[tree].nodes, node) {
            // The profiler's memory refused: this node and its subtree
            // are left out, counted.
            cut.nodes += 1;
            cut.samples += metrics[cct::M_SAMPLES];
            placed.push((u32::MAX, 0));
            continue;
        }
        if let NodeKey::Object(o) = node_key {
            object_of.insert(i as u32, o);
        }
        placed.push((tree as u32, index));
    }
    // This thread's allocation log, oldest first.
    let mut log_cut = 0u64;
    if let Some(objs) = objs {
        let mut id = state.last_record.load(Acquire);
        let mut log: Vec<Allocation> = Vec::new();
        while let Some(r) = objs.record(id) {
            id = r.previous.load(Relaxed);
            if log_cut > 0 || !log_has_room(&mut log) {
                // The profiler's memory ran out: the older records stay
                // out of the file, counted.
                log_cut += 1;
                continue;
            }
            let free = r.free_ns.load(Relaxed);
            log.push(Allocation {
                address: r.start.load(Relaxed),
                size: r.size.load(Relaxed),
                site: sites.local(r.site.load(Relaxed)),
                alloc_unix_ns: r.alloc_ns.load(Relaxed),
                free_unix_ns: (free != 0).then_some(free),
            });
        }
        log.reverse();
        profile.allocations = log;
    }
    // Offset histograms, access sites (strides) and watchpoint findings
    // (`-e sharing`, `-e reuse`), per object.
    let mut per_object: HashMap<ObjectRef, ObjectStats> = HashMap::new();
    fn stats_of<'a>(
        per_object: &'a mut HashMap<ObjectRef, ObjectStats>,
        object_of: &HashMap<u32, ObjectRef>,
        node: u32,
    ) -> Option<&'a mut ObjectStats> {
        let o = *object_of.get(&node)?;
        Some(per_object.entry(o).or_insert_with(|| ObjectStats {
            object: o,
            ..Default::default()
        }))
    }
    for (node, bucket, count) in state.histogram.entries() {
        if let Some(st) = stats_of(&mut per_object, &object_of, node) {
            st.histogram.push((bucket, count));
        }
    }
    for (node, ip, counts, frame_offset) in state.sites.entries() {
        if let Some(st) = stats_of(&mut per_object, &object_of, node) {
            st.sites.push(SiteStrides {
                ip,
                counts,
                frame_offset,
            });
        }
    }
    for row in state.sharing.rows() {
        if let Some(st) = stats_of(&mut per_object, &object_of, row.node) {
            st.sharing.push(SharingEvents {
                true_sharing: row.exact,
                line_offset: row.line_offset,
                other_thread: row.other_thread,
                ip: row.ip,
                other_ip: row.other_ip,
                count: row.count,
            });
        }
    }
    for (node, bucket, count) in state.reuse.entries() {
        if let Some(st) = stats_of(&mut per_object, &object_of, node) {
            st.reuse.push((bucket, count));
        }
    }
    let mut object_stats: Vec<ObjectStats> = per_object
        .into_values()
        .map(|mut st| {
            st.histogram.sort_unstable();
            st.sites.sort_unstable_by_key(|s| s.ip);
            st.reuse.sort_unstable();
            st.sharing.sort_unstable_by_key(|e| {
                (
                    e.true_sharing,
                    e.line_offset,
                    e.other_thread,
                    e.ip,
                    e.other_ip,
                )
            });
            st
        })
        .collect();
    object_stats.sort_by_key(|s| format!("{:?}", s.object));
    profile.object_stats = object_stats;
    // (Short of memory: the sibling sites, a table over every site of
    // the process, are not added.)
    if let Some(objs) = objs.filter(|_| !sys::heap::short_of_memory()) {
        sites.add_siblings(objs);
    }
    profile.alloc_sites = sites.into_sites(objs, &mut cut.sites);
    profile.unknown_regions = name_regions(&region_addresses, &all_modules);
    let [code, heap, statics, unknown] = trees;
    profile.code = code;
    profile.heap = heap;
    profile.statics_tree = statics;
    profile.unknown = unknown;

    let s = &state.stats;
    note_never_read(s);
    profile.stats = SampleStats {
        samples: s.samples.load(Relaxed),
        timer_overruns: s.timer_overruns.load(Relaxed),
        memory_samples: s.memory.load(Relaxed),
        store_samples: s.stores.load(Relaxed),
        handler_allocations: sys::ALLOCATIONS_IN_HANDLER.load(Relaxed),
        address_recovered: s.recovered.load(Relaxed),
        recovered_previous: s.recovered_previous.load(Relaxed),
        recovered_at_ip: s.recovered_at_ip.load(Relaxed),
        recovered_base_only: s.recovered_base_only.load(Relaxed),
        about_to_fault: s.about_to_fault.load(Relaxed),
        shared_in_flight: s.shared_in_flight.load(Relaxed),
        attribution: crate::access::blame::Rule::NAMES
            .iter()
            .zip(&s.attribution)
            .filter(|(_, n)| n.load(Relaxed) > 0)
            .map(|(rule, n)| (rule.to_string(), n.load(Relaxed)))
            .collect(),
        // Read with the first sample's preparation (`threads::lazy`):
        // zeros in the profile of a process that had none (merging keeps
        // the largest).
        cache_bytes: crate::access::caches::read_already().unwrap_or_default(),
        partial_unwinds: s.partial_unwinds.load(Relaxed),
        page_faults: s.page_faults.load(Relaxed),
        labels_untracked: match (state.index, objs) {
            (0, Some(o)) => o.labels_untracked.load(Relaxed),
            _ => 0,
        },
        cpu_time_ns: s.cpu_time_ns.load(Relaxed),
        handler_time: s.handler_time.snapshot(),
        hook_time: formats::measurement::HookTime {
            calls: s.hook_calls.load(Relaxed),
            timed: s.hook_timed.load(Relaxed),
            timed_ns: s.hook_timed_ns.load(Relaxed),
            slow: s.hook_slow.load(Relaxed),
            slow_ns: s.hook_slow_ns.load(Relaxed),
        },
        dropped: threads::DROP_CAUSES
            .iter()
            .zip(&s.dropped)
            .filter(|(_, n)| n.load(Relaxed) > 0)
            .map(|(cause, n)| (cause.to_string(), n.load(Relaxed)))
            .collect(),
        ..Default::default()
    };
    profile.stats.notices = crate::output::notices::of_thread(state);
    if log_cut > 0 {
        profile.stats.notices.insert(
            format!(
                "{RAN_OUT}the {log_cut} oldest records of this thread's allocation log were not written"
            ),
            1,
        );
    }
    if cut.nodes > 0 {
        profile.stats.notices.insert(
            format!(
                "{RAN_OUT}{} of this thread's {n} call-path tree nodes, the paths first seen last, were not written, with their {} sample counts (a sample counts once in the code tree and once in a data tree)",
                cut.nodes, cut.samples
            ),
            1,
        );
    }
    if cut.sites > 0 {
        profile.stats.notices.insert(
            format!(
                "{RAN_OUT}{} allocation sites of this thread were written without their call paths",
                cut.sites
            ),
            1,
        );
    }
    profile.stats.watchpoints = WatchStats {
        armed: s.watch_armed.load(Relaxed),
        traps: s.watch_traps.load(Relaxed),
        stale: s.watch_stale.load(Relaxed),
        lost: s.watch_full.load(Relaxed),
    };
    if s.fault_sampling_stopped.load(Relaxed) > 0 {
        profile.stats.dropped.insert(
            "page-fault sampling stopped (fault feedback loop)".into(),
            1,
        );
    }
    let full = s.histogram_full.load(Relaxed);
    if full > 0 {
        profile
            .stats
            .dropped
            .insert("histogram table full (samples kept)".into(), full);
    }
    let full = s.sites_full.load(Relaxed);
    if full > 0 {
        profile
            .stats
            .dropped
            .insert("stride table full (samples kept)".into(), full);
    }
    // Hardware records that gave no sample (mem:latency, mem:stores).
    for (cause, n) in state.hw.dropped().filter(|&(_, n)| n > 0) {
        profile.stats.dropped.insert(cause.to_string(), n);
    }
    // Process-wide: reported once, in the main thread's file.
    if state.index == 0 {
        crate::output::notices::process_wide(&mut profile.stats);
        if let Some(lost) = objs
            .map(|o| o.records_dropped.load(Relaxed))
            .filter(|&n| n > 0)
        {
            profile
                .stats
                .dropped
                .insert("allocation log full".into(), lost);
        }
        let full = regions::FULL.load(Relaxed);
        if full > 0 {
            profile.stats.dropped.insert(
                "unknown-address region table full (samples kept as <unknown address>)".into(),
                full,
            );
        }
        let full = crate::access::pages::FULL.load(Relaxed);
        if full > 0 {
            profile
                .stats
                .dropped
                .insert("first touch: page set full".into(), full);
        }
        for (reason, blocks, bytes) in objects::small_sites::untracked() {
            profile.stats.untracked_blocks.insert(
                reason.text().to_string(),
                formats::measurement::UntrackedBlocks { blocks, bytes },
            );
        }
        if let Some(m) = objects::small_map::existing() {
            profile.stats.small_map_bytes = m.bytes();
            profile.stats.small_blocks_peak = m.live_and_peak().1;
        }
        if let Some(lost) = objs.map(|o| o.map_full.load(Relaxed)).filter(|&n| n > 0) {
            profile
                .stats
                .dropped
                .insert("untracked: object map full".into(), lost);
        }
    }
    profile
}

/// What was mapped at each unknown-address region's first sampled
/// address: the name the region got while mapped (`regions::name`), else
/// from the memory map now (read once, only if there are any regions).
fn name_regions(
    sampled: &[(u64, u64)],
    modules: &[std::sync::Arc<modules::ModuleData>],
) -> Vec<UnknownRegion> {
    if sampled.is_empty() {
        return Vec::new();
    }
    // Regions named while they were mapped keep that name; the others
    // are named from the memory map now (short of memory, its first
    // part: `regions::read_maps`).
    let maps = regions::read_maps();
    let segments = regions::module_segments(modules);
    sampled
        .iter()
        .map(|&(key, address)| UnknownRegion {
            address,
            label: regions::name(key, address, &maps, &segments),
        })
        .collect()
}

/// The sources that ran, with their periods.
fn events(cfg: &config::Config) -> Vec<EventInfo> {
    let mut events = Vec::new();
    if cfg.period_ns > 0 {
        events.push(EventInfo {
            name: cfg.event.clone(),
            period: cfg.period_ns,
            unit: if run::hardware_active() {
                "events".into()
            } else {
                "ns".into()
            },
        });
    }
    if let Some(period) = cfg.page_faults {
        events.push(EventInfo {
            name: "page-faults".into(),
            period,
            unit: "faults".into(),
        });
    }
    events
}

/// Maps process-wide site ids to the file's `alloc_sites` indices.
#[derive(Default)]
struct SiteTable {
    ids: HashMap<u32, u32>,
    order: Vec<u32>,
}

impl SiteTable {
    fn local(&mut self, global: u32) -> u32 {
        let next = self.order.len() as u32;
        *self.ids.entry(global).or_insert_with(|| {
            self.order.push(global);
            next
        })
    }

    /// Adds the sites that differ from a site of this file only by their
    /// innermost return address, a few instructions away (the other calls
    /// of one source line: `double *cold = malloc(a), *hot = malloc(b);`,
    /// `ALLOCATE(a(n), b(m))`), also when no sample reached their objects:
    /// hpcprof-rs names each call of a line by its rank among all of them.
    fn add_siblings(&mut self, objs: &objects::Objects) {
        /// How far apart the calls of one line can be, in bytes.
        const LINE_SPAN: u64 = 4096;
        let count = objs.site_count();
        let mut by_callers: HashMap<Vec<u64>, Vec<(u32, u64)>> = HashMap::new();
        for g in 0..count {
            if let Some((frames, _)) = objs.site_info(g) {
                if let Some((&inner, callers)) = frames.split_first() {
                    by_callers
                        .entry(callers.to_vec())
                        .or_default()
                        .push((g, inner));
                }
            }
        }
        for g in self.order.clone() {
            let Some((frames, _)) = objs.site_info(g) else {
                continue;
            };
            let Some((&inner, callers)) = frames.split_first() else {
                continue;
            };
            for &(h, other) in by_callers.get(callers).into_iter().flatten() {
                if other.abs_diff(inner) <= LINE_SPAN {
                    self.local(h);
                }
            }
        }
    }

    /// The sites, in file order. Short of memory, a site whose call path
    /// the reserve cannot spare is written without it (counted in `cut`).
    fn into_sites(self, objs: Option<&objects::Objects>, cut: &mut u64) -> Vec<AllocSite> {
        /// Heap bytes of one site's call path at most.
        const PATH_BYTES: usize = objects::MAX_ALLOC_FRAMES * 8 + 64;
        self.order
            .iter()
            .map(|&g| {
                if sys::heap::short_of_memory() && !sys::heap::can_spare(PATH_BYTES) {
                    *cut += 1;
                    return AllocSite::default();
                }
                objs.and_then(|o| o.site_info(g))
                    .map(|(frames, s)| AllocSite {
                        frames,
                        allocations: s.allocations.load(Relaxed),
                        bytes: s.bytes.load(Relaxed),
                        max_bytes: s.max_bytes.load(Relaxed),
                        label: s.label(),
                        peak_live: s.peak_live.load(Relaxed),
                        frees: s.frees.load(Relaxed),
                        small: s.small.load(Relaxed) != 0,
                    })
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// The page-fault samples the kernel made that the handler neither read
/// nor was told were lost (`threads::DROP_NEVER_READ`), once sampling
/// stopped (`Stats::fault_samples_made`; 0 for a checkpoint, written
/// while the thread samples on).
fn note_never_read(s: &threads::Stats) {
    let made = s.fault_samples_made.load(Relaxed);
    if made == 0 {
        return;
    }
    let told = s.page_faults.load(Relaxed)
        + s.dropped[threads::DROP_RING_LOST].load(Relaxed)
        + s.dropped[threads::DROP_BAD_RECORD].load(Relaxed);
    s.dropped[threads::DROP_NEVER_READ].store(made.saturating_sub(told), Relaxed);
}
