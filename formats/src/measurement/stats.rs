//! The per-thread statistics of a measurement, apart from its profile:
//! what happened to the samples ([`SampleStats`]: handled, attributed,
//! dropped and why, by rule), the time the hooks and the sample handler
//! took ([`HookTime`], [`HandlerTime`]), the watchpoints' counts
//! ([`WatchStats`]) and the caches' sizes ([`CacheBytes`]). The
//! [`ThreadProfile`](super::ThreadProfile) holds one of each.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::notes::UntrackedBlocks;

/// What happened to the samples of one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleStats {
    /// Every sample signal handled.
    pub samples: u64,
    /// Periods that the CPU-time timer's samples stood for beyond one each
    /// (the sum of their overruns: with the kernel's tick coarser than the
    /// period, one signal per tick stands for several periods, and its
    /// tree metrics count that many). Samples' periods: `samples +
    /// timer_overruns`.
    #[serde(default)]
    pub timer_overruns: u64,
    /// The skid-corrected instruction loaded from memory (including
    /// read-modify-write, and accesses whose address was lost).
    pub memory_samples: u64,
    /// The skid-corrected instruction only stored to memory.
    #[serde(default)]
    pub store_samples: u64,
    /// ... and its data address was recovered.
    pub address_recovered: u64,
    /// ... of which from the instruction before the interrupted IP.
    pub recovered_previous: u64,
    /// ... of which from the instruction at the interrupted IP (the previous
    /// one overwrote its address register).
    pub recovered_at_ip: u64,
    /// Allocations made while a sample handler ran (process-wide; must be 0:
    /// the handler may not allocate).
    #[serde(default)]
    pub handler_allocations: u64,
    /// Samples whose call path stopped before its root (kept below a
    /// `<partial unwind>` frame).
    #[serde(default)]
    pub partial_unwinds: u64,
    /// Page-fault samples (the `page-faults` source).
    #[serde(default)]
    pub page_faults: u64,
    /// `hpcrun_label` calls whose address was in no tracked block (a block
    /// below `--min-bytes`, stack or static data); process-wide, in the
    /// main thread's file.
    #[serde(default)]
    pub labels_untracked: u64,
    /// Samples lost, by cause (e.g. "tree full", "unwind failed").
    pub dropped: BTreeMap<String, u64>,
    /// Thread CPU time the timer source counted (ns; 0 when unknown): with
    /// the period, how many samples the thread should have had.
    #[serde(default)]
    pub cpu_time_ns: u64,
    /// Times the program asked to block one of the profiler's signals
    /// (`sigprocmask`, `pthread_sigmask`); the profiler kept it unblocked
    /// so that sampling went on, and held the program's own signals of
    /// that number back as the program asked.
    #[serde(default)]
    pub signal_blocks: u64,
    /// The program's own signals on the profiler's signal numbers (not
    /// from its perf events), passed to the program's handler.
    #[serde(default)]
    pub program_signals: u64,
    /// 1 in a profile written as a checkpoint while its thread was still
    /// running (a later checkpoint or the final profile replaces it): a
    /// checkpoint that remains is what a killed run left. Summed over
    /// profiles.
    #[serde(default)]
    pub checkpoints: u64,
    /// Notices about a measurement the program damaged or left empty, each
    /// naming its cause and the fix, with the number of threads that
    /// reported it.
    #[serde(default)]
    pub notices: BTreeMap<String, u64>,
    /// Watchpoints (`-e sharing`, `-e reuse`).
    #[serde(default)]
    pub watchpoints: WatchStats,
    /// How long the sample handler took per sample (added with a default:
    /// older files read it empty).
    #[serde(default)]
    pub handler_time: HandlerTime,
    /// How long the allocation hooks took (added with a default: older
    /// files read it empty).
    #[serde(default)]
    pub hook_time: HookTime,
    /// Load samples whose blamed load had overwritten its index register:
    /// the intact base register named the object, not the element (no
    /// offset, stride or alignment recorded). Part of `address_recovered`.
    #[serde(default)]
    pub recovered_base_only: u64,
    /// `mem:soft`: samples with the IP at a memory access while the
    /// thread's page faults took a large share of its time: a faulting
    /// instruction never retires, the sample is that access's (docs/GUIDE.md
    /// "Page faults"); part of the `landed` rule's count.
    #[serde(default)]
    pub about_to_fault: u64,
    /// `mem:soft`: load samples given to another load of the loop in
    /// flight with the blamed one, by its share of the loop's memory
    /// traffic (docs/GUIDE.md "Loads in flight together").
    #[serde(default)]
    pub shared_in_flight: u64,
    /// `mem:soft`: samples by the rule that attributed them (`landed`,
    /// `walked_back`, `split`, `retire_group`, `compute`, `constant`,
    /// `other`, `unrecovered`; docs/GUIDE.md "How mem:soft attributes a
    /// sample"). Counted per signal: they add up to the samples analysed.
    #[serde(default)]
    pub attribution: BTreeMap<String, u64>,
    /// The measuring machine's data caches (bytes; 0 when unknown): L1
    /// data and L2 of one core, and the last level. The largest seen when
    /// profiles are merged.
    #[serde(default)]
    pub cache_bytes: CacheBytes,
    /// Threads that ended before their first sample, having measured and
    /// lost nothing: they got no file, only this count (process-wide, in
    /// the main thread's file; older files read 0 and may tell them in a
    /// `notices` text instead).
    #[serde(default)]
    pub short_lived_threads: u64,
    /// Their CPU time (ns; 0 when unknown, e.g. with hardware sources).
    /// Not part of `cpu_time_ns`, which counts the threads with a file.
    #[serde(default)]
    pub short_lived_cpu_ns: u64,
    /// The timer source's sampling period (ns; `mem:soft`, `cpu-time`),
    /// 0 for other sources and older files; the largest seen when
    /// profiles are merged.
    #[serde(default)]
    pub timer_period_ns: u64,
    /// Small heap blocks the object map did not take, by reason (e.g.
    /// "tracking memory cap reached, raise --max-tracking-memory"): their
    /// samples are `<small heap objects>`. Process-wide, in the main
    /// thread's file; summed over processes.
    #[serde(default)]
    pub untracked_blocks: BTreeMap<String, UntrackedBlocks>,
    /// The small-block map: bytes of its tables at the end, and the most
    /// small blocks live at once (process-wide; summed over processes).
    #[serde(default)]
    pub small_map_bytes: u64,
    #[serde(default)]
    pub small_blocks_peak: u64,
}

/// Data cache sizes of the measuring machine (from sysfs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheBytes {
    pub l1d: u64,
    pub l2: u64,
    pub llc: u64,
}

/// Every how many allocation-hook calls of a thread one is timed
/// ([`HookTime`]): two clock reads per call would cost about a tenth of
/// what they measure.
pub const HOOK_TIME_EVERY: u64 = 16;

/// The time the allocation hooks spent on the profiler's work (`malloc`
/// family, `free`, `mmap`/`munmap` of tracked sizes: the size check, the
/// allocation call path's unwind, the site table, the object map), not
/// counting the allocator's own work; one call in [`HOOK_TIME_EVERY`]
/// is timed (`CLOCK_MONOTONIC`), the others counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookTime {
    /// Hook calls that reached the profiler's code.
    pub calls: u64,
    /// Calls that were timed.
    pub timed: u64,
    /// Their summed time (ns).
    pub timed_ns: u64,
    /// Of the timed calls, those that took [`SLOW_HOOK_NS`] or more, and
    /// their time (ns): one-time work (the first call's set-up, reading
    /// the modules after a `dlopen`) or a preemption on a loaded machine.
    /// Counted once, not scaled up like the others. (Added with a
    /// default: 0 in older files.)
    #[serde(default)]
    pub slow: u64,
    #[serde(default)]
    pub slow_ns: u64,
}

/// A timed hook call this long or longer is counted apart
/// ([`HookTime::slow`]): a call of the hooks' usual work takes a few
/// microseconds at most.
pub const SLOW_HOOK_NS: u64 = 100_000;

impl HookTime {
    /// The estimated time of all calls (ns): the mean of the timed calls
    /// that were not slow x the calls that were not, plus the slow ones'
    /// own time.
    pub fn estimated_ns(&self) -> u64 {
        let fast = self.timed.saturating_sub(self.slow);
        let fast_ns = self.timed_ns.saturating_sub(self.slow_ns);
        let scaled = match fast {
            0 => 0,
            _ => {
                (fast_ns as u128 * self.calls.saturating_sub(self.slow) as u128 / fast as u128)
                    as u64
            }
        };
        scaled + self.slow_ns
    }

    /// Adds another thread's.
    pub fn add(&mut self, other: &HookTime) {
        self.calls += other.calls;
        self.timed += other.timed;
        self.timed_ns += other.timed_ns;
        self.slow += other.slow;
        self.slow_ns += other.slow_ns;
    }
}

/// What the watchpoint analyses did in a thread (summed over threads).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchStats {
    /// Watchpoints armed by this thread's samples (sharing watchpoints in
    /// other threads, the reuse watchpoint in itself).
    pub armed: u64,
    /// Traps of this thread's watchpoints handled.
    pub traps: u64,
    /// Traps that found their watchpoint being re-armed (not counted).
    pub stale: u64,
    /// Events lost because the thread's table was full.
    pub lost: u64,
}

impl WatchStats {
    pub fn add(&mut self, other: &WatchStats) {
        self.armed += other.armed;
        self.traps += other.traps;
        self.stale += other.stale;
        self.lost += other.lost;
    }
}

/// Upper bounds (exclusive, ns) of the handler-time buckets that
/// hpcrun-rs writes: < 1, 2, 5, 10, 20, 50, 100 us, and a last bucket
/// of 100 us or more.
pub const HANDLER_TIME_BOUNDS_NS: [u64; 7] = [1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000];

/// A histogram of the sample handler's time per sample: wall time
/// (`CLOCK_MONOTONIC`) from the signal handler's entry to its return, for
/// every sample counted in `SampleStats::samples` (so the counts sum to
/// it). Empty (no bounds) in files older than the field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerTime {
    /// Exclusive upper bounds of the buckets in ns, ascending; the last
    /// bucket (`counts[bounds_ns.len()]`) has none.
    pub bounds_ns: Vec<u64>,
    /// Samples per bucket (`bounds_ns.len() + 1` entries).
    pub counts: Vec<u64>,
    /// The longest handler time seen (ns).
    pub max_ns: u64,
    /// The sum of all handler times (ns): with the count, the mean.
    pub total_ns: u64,
}

impl HandlerTime {
    /// Samples in the histogram.
    pub fn samples(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Samples that took at least `ns` (counted by bucket: `ns` should be
    /// one of the bounds; otherwise the buckets that start at or above it).
    pub fn at_least(&self, ns: u64) -> u64 {
        self.counts
            .iter()
            .enumerate()
            .filter(|&(i, _)| i > 0 && self.bounds_ns.get(i - 1).is_some_and(|&lo| lo >= ns))
            .map(|(_, n)| n)
            .sum()
    }

    /// The bucket bound below which fraction `q` (0..1) of the samples
    /// fall: an upper bound of the `q` quantile (ns); `None` if it lies in
    /// the last, open bucket or the histogram is empty.
    pub fn quantile_bound(&self, q: f64) -> Option<u64> {
        let total = self.samples();
        if total == 0 {
            return None;
        }
        let want = (q * total as f64).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want.max(1) {
                return self.bounds_ns.get(i).copied();
            }
        }
        None
    }

    /// Adds another histogram. With other bounds (not written by any
    /// version so far), each of its buckets goes to the bucket here that
    /// holds that bucket's lower end.
    pub fn add(&mut self, other: &HandlerTime) {
        if other.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            *self = other.clone();
            return;
        }
        self.max_ns = self.max_ns.max(other.max_ns);
        self.total_ns += other.total_ns;
        if self.bounds_ns == other.bounds_ns {
            for (a, b) in self.counts.iter_mut().zip(&other.counts) {
                *a += b;
            }
            return;
        }
        for (i, n) in other.counts.iter().enumerate() {
            let lower = if i == 0 { 0 } else { other.bounds_ns[i - 1] };
            let here = self.bounds_ns.partition_point(|&b| b <= lower);
            if let Some(c) = self.counts.get_mut(here) {
                *c += n;
            }
        }
    }
}

impl SampleStats {
    /// Adds another thread's counts to these.
    pub fn add(&mut self, other: &SampleStats) {
        self.samples += other.samples;
        self.timer_overruns += other.timer_overruns;
        self.memory_samples += other.memory_samples;
        self.store_samples += other.store_samples;
        self.handler_allocations = self.handler_allocations.max(other.handler_allocations);
        self.address_recovered += other.address_recovered;
        self.recovered_previous += other.recovered_previous;
        self.recovered_at_ip += other.recovered_at_ip;
        self.partial_unwinds += other.partial_unwinds;
        self.page_faults += other.page_faults;
        self.labels_untracked += other.labels_untracked;
        for (cause, n) in &other.dropped {
            *self.dropped.entry(cause.clone()).or_default() += n;
        }
        self.cpu_time_ns += other.cpu_time_ns;
        self.signal_blocks += other.signal_blocks;
        self.program_signals += other.program_signals;
        self.checkpoints += other.checkpoints;
        for (notice, n) in &other.notices {
            *self.notices.entry(notice.clone()).or_default() += n;
        }
        self.watchpoints.add(&other.watchpoints);
        self.handler_time.add(&other.handler_time);
        self.hook_time.add(&other.hook_time);
        self.recovered_base_only += other.recovered_base_only;
        self.about_to_fault += other.about_to_fault;
        self.shared_in_flight += other.shared_in_flight;
        for (rule, n) in &other.attribution {
            *self.attribution.entry(rule.clone()).or_default() += n;
        }
        self.cache_bytes.l1d = self.cache_bytes.l1d.max(other.cache_bytes.l1d);
        self.cache_bytes.l2 = self.cache_bytes.l2.max(other.cache_bytes.l2);
        self.cache_bytes.llc = self.cache_bytes.llc.max(other.cache_bytes.llc);
        self.short_lived_threads += other.short_lived_threads;
        self.short_lived_cpu_ns += other.short_lived_cpu_ns;
        self.timer_period_ns = self.timer_period_ns.max(other.timer_period_ns);
        for (reason, n) in &other.untracked_blocks {
            let e = self.untracked_blocks.entry(reason.clone()).or_default();
            e.blocks += n.blocks;
            e.bytes += n.bytes;
        }
        self.small_map_bytes += other.small_map_bytes;
        self.small_blocks_peak += other.small_blocks_peak;
    }

    /// Untracked small blocks in all, as (blocks, bytes).
    pub fn untracked_total(&self) -> (u64, u64) {
        self.untracked_blocks
            .values()
            .fold((0, 0), |(b, y), n| (b + n.blocks, y + n.bytes))
    }

    /// [`crate::notes::short_lived`] for these (merged) counts.
    pub fn short_lived_note(&self) -> Option<String> {
        crate::notes::short_lived(
            self.short_lived_threads,
            self.short_lived_cpu_ns,
            self.cpu_time_ns,
            self.timer_period_ns,
        )
    }
}
