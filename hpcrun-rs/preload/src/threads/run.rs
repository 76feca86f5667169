//! Run settings and process-wide flags read on the sampling path: whether
//! samples are recorded ([`active`]), the sample signal, `cpu-time` mode,
//! the histogram layout, the metric columns of this run; and the library's
//! warnings (on the standard error it started with, else in a file).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::*};

use formats::measurement::HistogramLayout;

use crate::access::numa;
use crate::cct;
use crate::pmu;
use crate::sys;
use crate::threads::config;

/// Nodes per thread (all four trees) without an address-space limit.
pub const TREE_CAPACITY: usize = 1 << 16;

/// Address space the library's tables may reserve in a process under an
/// address-space limit (`ulimit -v`): this share of it (1/16), so that a
/// program that fits under its limit natively with some margin still
/// fits measured.
pub const LIMITED_SHARE: u64 = 16;

/// How many times (a power of two, as a shift) the library's tables are
/// made smaller than their full size, which reserves about `full_bytes`
/// (0 without a limit, or when they fit in its share): more heap blocks
/// may go untracked and deep trees fill, both counted in the profiles.
pub fn table_shift(full_bytes: u64) -> u32 {
    let Some(limit) = sys::address_space_limit() else {
        return 0;
    };
    let budget = (limit / LIMITED_SHARE).max(1);
    let mut shift = 0;
    while shift < 8 && full_bytes >> shift > budget {
        shift += 1;
    }
    shift
}

/// Nodes per thread: [`TREE_CAPACITY`], smaller under an address-space
/// limit (at least 4,096). Read once.
pub fn tree_capacity() -> usize {
    static CAPACITY: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CAPACITY.get_or_init(|| {
        // A few threads' tables.
        (TREE_CAPACITY >> table_shift(4 * thread_table_bytes(TREE_CAPACITY))).max(1 << 12)
    })
}

/// About the bytes of one thread's tables with `capacity` nodes: 192-byte
/// nodes, their index, the histogram (20 bytes a slot, a slot a node:
/// `threads::histogram_slots`), and the strides and caches (about 1.75
/// MiB).
pub fn thread_table_bytes(capacity: usize) -> u64 {
    capacity as u64 * (192 + 8 + 20) + (7 << 18)
}

/// Below this period (1 ms) the task-clock event samples one overflow at
/// a time (re-armed by each sample's handler, an `ioctl` per sample), so
/// that at most one of its signals is ever pending per thread; at 1 ms
/// and more it runs free and is limited only after a slow handler
/// (`handler::keep_clock_running`). The CPU-time timer never has more
/// than one signal pending (the kernel counts overruns instead).
pub const FREE_RUN_MIN_PERIOD_NS: u64 = 1_000_000;

static SIGNAL: AtomicI32 = AtomicI32::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);
static CODE_ONLY: AtomicBool = AtomicBool::new(false);
static LAYOUT: std::sync::OnceLock<HistogramLayout> = std::sync::OnceLock::new();

/// Sets the run's settings (at start-up, before any thread samples): the
/// sample signal, the offset histogram layout, `cpu-time` mode.
pub fn configure(signal: i32, layout: HistogramLayout, code_only: bool) {
    SIGNAL.store(signal, Relaxed);
    let _ = LAYOUT.set(layout);
    CODE_ONLY.store(code_only, Relaxed);
}

/// Starts (start-up) or stops (exit, fatal signal) recording samples.
pub fn set_active(on: bool) {
    ACTIVE.store(on, Relaxed);
}

/// True for `cpu-time`: no instruction decoding, no data attribution.
pub fn code_only() -> bool {
    CODE_ONLY.load(Relaxed)
}

/// The offset histogram layout (set at start, read by the handler).
pub fn histogram_layout() -> HistogramLayout {
    LAYOUT.get().copied().unwrap_or_default()
}

/// True while samples should be recorded.
pub fn active() -> bool {
    ACTIVE.load(Relaxed)
}

/// The sample signal (the page-fault signal is the next one).
pub fn signal() -> i32 {
    SIGNAL.load(Relaxed)
}

/// Metric columns, in `cct::M_*` order: (name, unit, description).
pub fn metric_columns() -> [(&'static str, &'static str, &'static str); cct::METRICS] {
    let mut cols = soft_metric_columns();
    if hardware_active() {
        cols[cct::M_SAMPLES].2 = "hardware load samples (Intel PEBS mem-loads above the latency threshold, AMD IBS ops that load); each stands for one sampling period of such events";
        cols[cct::M_STORE_SAMPLES].2 =
            "hardware store samples (Intel PEBS mem-stores, AMD IBS ops that store)";
    } else {
        for (rule, column) in RULE_COLUMNS.iter().enumerate() {
            cols[cct::M_RULE_FIRST + rule] = *column;
        }
    }
    cols
}

/// The attribution rule columns of mem:soft (`cct::M_RULE_FIRST`), in
/// `blame::Rule` order: the samples each rule decided, in sampling
/// periods (see docs/GUIDE.md, "How mem:soft attributes a sample").
const RULE_COLUMNS: [(&str, &str, &str); crate::access::blame::Rule::COUNT] = [
    (
        "rule_landed",
        "samples",
        "mem:soft samples whose interrupted instruction's predecessor accesses memory: attributed to that access",
    ),
    (
        "rule_walked_back",
        "samples",
        "mem:soft samples attributed to the load whose result the landed instruction consumes (register data flow, walked back)",
    ),
    (
        "rule_split",
        "samples",
        "mem:soft samples whose landed instruction consumes several loads: attributed to each in turn",
    ),
    (
        "rule_retire_group",
        "samples",
        "mem:soft samples attributed to the nearest memory access a few instructions before a cheap one",
    ),
    (
        "rule_compute",
        "samples",
        "mem:soft samples on a divide, square root or floating-point chain fed by no load: compute time",
    ),
    (
        "rule_constant",
        "samples",
        "mem:soft samples whose only memory operand is a compiler constant (read-only data): not a data access",
    ),
    (
        "rule_other",
        "samples",
        "mem:soft samples with no memory access and no arithmetic chain before them: other work",
    ),
    (
        "rule_unrecovered",
        "samples",
        "mem:soft samples attributed to a memory access whose address could not be recovered",
    ),
];

fn soft_metric_columns() -> [(&'static str, &'static str, &'static str); cct::METRICS] {
    [
        (
            "samples",
            "samples",
            "timer samples whose skid-corrected instruction loads from memory (mem:soft), in sampling periods of thread user CPU time (a CPU-time timer's signal that stood for several periods counts each)",
        ),
        (
            "store_samples",
            "samples",
            "timer samples whose skid-corrected instruction only stores to memory, in sampling periods (stores rarely stall: kept apart from the primary metric)",
        ),
        (
            "cpu_samples",
            "samples",
            "all timer samples, in sampling periods (code-centric tree only)",
        ),
        (
            "page_faults",
            "faults",
            "sampled page faults (page-faults event) at the faulting data address",
        ),
        (
            "first_touch",
            "pages",
            "pages first touched here: the first sampled fault on each page (page-faults event)",
        ),
        (
            "numa_local",
            "samples",
            "memory samples whose page is on the NUMA node of the CPU that sampled it",
        ),
        (
            "numa_remote",
            "samples",
            "memory samples whose page is on another NUMA node than the CPU that sampled it",
        ),
        ("latency", "cycles", "summed load latency of hardware samples"),
        ("src_l1", "samples", "hardware samples served by the L1 cache"),
        ("src_lfb", "samples", "hardware samples served by a fill buffer"),
        ("src_l2", "samples", "hardware samples served by the L2 cache"),
        ("src_l3", "samples", "hardware samples served by the L3 cache"),
        ("src_local_dram", "samples", "hardware samples served by local DRAM"),
        ("src_remote_dram", "samples", "hardware samples served by remote DRAM"),
        ("src_remote_cache", "samples", "hardware samples served by a remote cache"),
        ("src_hitm", "samples", "hardware samples that hit a modified line in another core's cache"),
        ("src_other", "samples", "hardware samples served by I/O, uncached memory or an unknown source"),
        ("tlb_miss", "samples", "hardware samples that missed the data TLB"),
        (
            "access_bytes",
            "bytes",
            "operand size of the sampled memory accesses whose address was recovered, summed (mem:soft): access_bytes / (samples + store_samples) is the typical access width",
        ),
        (
            "misaligned_samples",
            "samples",
            "sampled accesses (loads and stores) whose bytes [address, address + operand size) span two 64-byte cache lines; the operand size comes from the decoded instruction",
        ),
        (
            "false_sharing",
            "events",
            "watchpoint traps (-e sharing): this access of one thread touched another 8-byte word of a 64-byte line that another thread had just been sampled accessing, at least one of the two a write",
        ),
        (
            "true_sharing",
            "events",
            "watchpoint traps (-e sharing): this access of one thread touched the very bytes another thread had just been sampled accessing, at least one of the two a write",
        ),
    ]
}

/// The metric columns this run fills, in order: a profile lists only
/// these (the others are always zero).
pub fn active_columns() -> Vec<usize> {
    let cfg = config::get();
    let mut cols = Vec::new();
    if hardware_active() {
        // No timer: cpu_samples stays empty.
        cols.extend([cct::M_SAMPLES, cct::M_STORE_SAMPLES]);
    } else if cfg.period_ns > 0 {
        cols.extend([cct::M_SAMPLES, cct::M_STORE_SAMPLES, cct::M_CPU_SAMPLES]);
    } else {
        // `samples` is always the first column (the primary metric).
        cols.push(cct::M_SAMPLES);
    }
    if !hardware_active() && cfg.period_ns > 0 && !code_only() {
        cols.extend([cct::M_ACCESS_BYTES, cct::M_MISALIGNED]);
        cols.extend(cct::M_RULE_FIRST..cct::M_RULE_FIRST + crate::access::blame::Rule::COUNT);
    }
    if cfg.page_faults.is_some() {
        cols.extend([cct::M_PAGE_FAULTS, cct::M_FIRST_TOUCH]);
    }
    if crate::access::watch::sharing_every() > 0 {
        cols.extend([cct::M_FALSE_SHARING, cct::M_TRUE_SHARING]);
    }
    if numa::enabled() {
        cols.extend([cct::M_NUMA_LOCAL, cct::M_NUMA_REMOTE]);
    }
    if hardware_active() {
        cols.extend(cct::M_LATENCY..=cct::M_TLB_MISS);
        cols.push(cct::M_MISALIGNED);
    }
    cols
}

/// True when a hardware memory source runs (its columns are filled).
pub fn hardware_active() -> bool {
    pmu::sampler::get().is_some()
}

/// File in the output directory that takes a process's messages when it
/// has no standard error of its own (`MESSAGES_FILE.<pid>`).
pub const MESSAGES_FILE: &str = "hpcrun-rs.messages";

/// Messages not written yet: there was nowhere to write them when they
/// were said (no descriptor of the profiler's and no free number to
/// open the messages file: the open-file limit reached). Written with
/// the next message, or at exit ([`flush_messages`]). At most 64 KiB.
static PENDING: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Writes `text` where the process's messages go: the standard error it
/// started with (the profiler's own duplicate, `sys::messages`; never
/// descriptor 2, which the program may have given to one of its files),
/// or, when that is gone or there was none, appended to
/// `<output>/hpcrun-rs.messages.<pid>`. False when neither took it.
fn write_messages(text: &str) -> bool {
    if sys::write_message(text.as_bytes()) {
        return true;
    }
    let Some(dir) = config::get().out_dir.as_deref() else {
        // (Not measured: nowhere else to say it.)
        return true;
    };
    let path = format!("{dir}/{MESSAGES_FILE}.{}", sys::getpid());
    sys::append_to_file(&path, text.as_bytes())
}

/// Prints a warning ([`write_messages`]); kept for later when it cannot
/// be written now.
pub fn warn(msg: &str) {
    let line = format!("hpcrun-rs: {msg}\n");
    // (Never waits: a forked child may find the lock held by a thread
    // of its parent; another thread's message is then written alone.)
    let Ok(mut pending) = PENDING.try_lock() else {
        write_messages(&line);
        return;
    };
    pending.push_str(&line);
    if write_messages(&pending) {
        pending.clear();
    } else if pending.len() > 64 << 10 {
        let cut = pending.len() - (64 << 10);
        let cut = (cut..pending.len())
            .find(|&i| pending.is_char_boundary(i))
            .unwrap_or(0);
        pending.drain(..cut);
    }
}

/// Writes the messages kept for later (at exit; never waits for the
/// lock: the caller may be a fatal-signal handler).
pub fn flush_messages() {
    if let Ok(mut pending) = PENDING.try_lock() {
        if !pending.is_empty() && write_messages(&pending) {
            pending.clear();
        }
    }
}

/// Prints a warning once per process.
pub fn warn_once(msg: &str) {
    static DONE: AtomicBool = AtomicBool::new(false);
    if !DONE.swap(true, Relaxed) {
        warn(msg);
    }
}
