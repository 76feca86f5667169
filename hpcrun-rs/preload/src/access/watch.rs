//! Hardware watchpoints on sampled words (`-e sharing`, `-e reuse`): the
//! per-thread watchpoint slots and the tables their traps fill.
//!
//! A sample of thread A that recovered an address in a heap or static
//! object may arm watchpoints (debug registers, `PERF_TYPE_BREAKPOINT`):
//!
//! * **sharing**: in up to [`MAX_SHARING_TARGETS`] other threads, slot 0 on
//!   the sampled bytes and slots 1-2 on two other 8-byte words of the same
//!   64-byte line (rotating through the line's words from one arming to
//!   the next). The watch triggers on writes only when A's access was a
//!   load, on any access when A stored: a trap is always a conflict (at
//!   least one write). A trap of slot 0 is true sharing, of slots 1-2
//!   false sharing;
//! * **reuse**: in A itself (slot 3) on the sampled bytes, with A's CPU
//!   time: the trap gives the time until the word was touched again; a
//!   watch re-armed before it triggered counts as "not reused".
//!
//! Each thread opens its own watchpoint events at start (so that traps
//! are delivered to it), disabled; any thread re-points and enables them
//! (`sys::arm_watchpoint`); the trapped thread disables its watchpoint
//! first thing in the handler, so that one arming gives one trap. A slot moves through
//! `FREE -> ARMING -> ARMED -> FREE` with compare-and-swap only: the arming
//! thread owns the description while `ARMING`, the trapped thread takes it
//! back by `ARMED -> FREE`; a trap that finds its slot being re-armed is
//! stale and counted, never waited for. Nothing here allocates or locks:
//! both sides run in signal handlers.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering::*};

use crate::sys;

/// Debug registers used per thread: x86-64 has four.
pub const SLOTS: usize = 4;
/// Slots armed by other threads (sharing): 0 on the sampled bytes, the
/// others on other words of the line.
pub const SHARING_SLOTS: usize = 3;
/// The slot a thread arms on itself (reuse).
pub const REUSE_SLOT: usize = 3;
/// The sharing slot on the sampled bytes themselves (a trap there is true
/// sharing; in the other sharing slots false sharing).
pub const EXACT_SLOT: usize = 0;
/// Threads whose sharing slots one arming round re-points (rotating
/// through the process's threads).
pub const MAX_SHARING_TARGETS: usize = 4;
/// Cache line size the sharing analysis assumes.
pub const LINE: u64 = 64;

const CLOSED: u32 = 0;
const FREE: u32 = 1;
const ARMING: u32 = 2;
const ARMED: u32 = 3;

/// Arm the sharing (reuse) watchpoints every N-th sample of a thread; 0: off.
static SHARING_EVERY: AtomicU32 = AtomicU32::new(0);
static REUSE_EVERY: AtomicU32 = AtomicU32::new(0);

/// Turns the analyses on (at start-up, from the configuration).
pub fn configure(sharing_every: u32, reuse_every: u32) {
    SHARING_EVERY.store(sharing_every, Relaxed);
    REUSE_EVERY.store(reuse_every, Relaxed);
}

/// Every how many samples sharing watchpoints are armed (0: off).
pub fn sharing_every() -> u32 {
    SHARING_EVERY.load(Relaxed)
}

/// Every how many samples the reuse watchpoint is armed (0: off).
pub fn reuse_every() -> u32 {
    REUSE_EVERY.load(Relaxed)
}

/// What a watch is about: the sample that armed it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Armed {
    /// Start of the sampled cache line.
    pub line: u64,
    /// Index of the thread whose sample armed the watch.
    pub from_thread: u32,
    /// The sampled instruction.
    pub from_ip: u64,
    /// The data object: tree root, node tag and key (`handler::Target`)
    /// and its start address.
    pub root: u32,
    pub tag: u32,
    pub key: u64,
    pub start: u64,
    /// CPU time of the arming thread when armed (reuse), ns.
    pub armed_ns: u64,
}

/// One watchpoint of a thread.
pub struct Slot {
    fd: AtomicI32,
    state: AtomicU32,
    line: AtomicU64,
    from_thread: AtomicU32,
    from_ip: AtomicU64,
    root: AtomicU32,
    tag: AtomicU32,
    key: AtomicU64,
    start: AtomicU64,
    armed_ns: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            fd: AtomicI32::new(-1),
            state: AtomicU32::new(CLOSED),
            line: AtomicU64::new(0),
            from_thread: AtomicU32::new(0),
            from_ip: AtomicU64::new(0),
            root: AtomicU32::new(0),
            tag: AtomicU32::new(0),
            key: AtomicU64::new(0),
            start: AtomicU64::new(0),
            armed_ns: AtomicU64::new(0),
        }
    }

    fn describe(&self, a: &Armed) {
        self.line.store(a.line, Relaxed);
        self.from_thread.store(a.from_thread, Relaxed);
        self.from_ip.store(a.from_ip, Relaxed);
        self.root.store(a.root, Relaxed);
        self.tag.store(a.tag, Relaxed);
        self.key.store(a.key, Relaxed);
        self.start.store(a.start, Relaxed);
        self.armed_ns.store(a.armed_ns, Relaxed);
    }

    fn description(&self) -> Armed {
        Armed {
            line: self.line.load(Relaxed),
            from_thread: self.from_thread.load(Relaxed),
            from_ip: self.from_ip.load(Relaxed),
            root: self.root.load(Relaxed),
            tag: self.tag.load(Relaxed),
            key: self.key.load(Relaxed),
            start: self.start.load(Relaxed),
            armed_ns: self.armed_ns.load(Relaxed),
        }
    }
}

/// How an arming attempt went.
#[derive(Debug, PartialEq, Eq)]
pub enum Arm {
    /// Armed; the slot was free (or had triggered).
    Armed,
    /// Armed over a watch that had not triggered yet: its description.
    Replaced(Armed),
    /// Not armed: the slot is closed, being armed by another thread, or
    /// the kernel refused.
    Skipped,
}

/// A thread's watchpoints.
pub struct Watches {
    slots: [Slot; SLOTS],
    /// Arming rounds this thread started (rotates the watched words).
    rounds: AtomicU64,
}

impl Default for Watches {
    fn default() -> Self {
        Watches {
            slots: [const { Slot::new() }; SLOTS],
            rounds: AtomicU64::new(0),
        }
    }
}

impl Watches {
    /// Opens the calling thread's watchpoints (the sharing slots and/or
    /// the reuse slot), disabled, trapping with `signal`. Returns the
    /// errno of the first slot that could not be opened (the others stay
    /// closed).
    ///
    /// The program's file descriptors come first: a watchpoint whose
    /// descriptor would lie in the upper half of `ulimit -n` is closed
    /// again, with the thread's others (`Err(EMFILE)`), so that a program
    /// with many threads never runs out of descriptors because of us.
    pub fn open(&self, signal: c_int, sharing: bool, reuse: bool) -> Result<(), c_int> {
        let fd_budget = sys::open_files_limit().map_or(u64::MAX, |n| n / 2);
        for (i, slot) in self.slots.iter().enumerate() {
            let wanted = if i == REUSE_SLOT { reuse } else { sharing };
            if !wanted {
                continue;
            }
            let fd = sys::open_watchpoint(signal)?;
            slot.fd.store(fd, Relaxed);
            slot.state.store(FREE, Release);
            if fd as u64 >= fd_budget {
                self.stop(true);
                return Err(libc::EMFILE);
            }
        }
        Ok(())
    }

    /// The slot whose watchpoint has file descriptor `fd`.
    pub fn slot_of_fd(&self, fd: c_int) -> Option<usize> {
        if fd < 0 {
            return None;
        }
        self.slots.iter().position(|s| s.fd.load(Relaxed) == fd)
    }

    /// Makes the slot whose watchpoint has descriptor `old` use `new` (a
    /// second descriptor of the same event: the program is about to put
    /// its own file at `old`); false if no slot has `old`.
    pub fn replace_fd(&self, old: c_int, new: c_int) -> bool {
        old >= 0
            && self
                .slots
                .iter()
                .any(|s| s.fd.compare_exchange(old, new, AcqRel, Relaxed).is_ok())
    }

    /// True if any slot is open (the thread can be watched).
    pub fn is_open(&self, slot: usize) -> bool {
        self.slots
            .get(slot)
            .is_some_and(|s| s.state.load(Relaxed) != CLOSED)
    }

    /// Points slot `i` at the `len` bytes at `addr` (reads and writes, or
    /// writes only) for one trap, described by `what`.
    pub fn arm(&self, i: usize, addr: u64, len: u64, reads: bool, what: &Armed) -> Arm {
        let slot = &self.slots[i];
        let before = slot.state.load(Relaxed);
        if (before != FREE && before != ARMED)
            || slot
                .state
                .compare_exchange(before, ARMING, Acquire, Relaxed)
                .is_err()
        {
            return Arm::Skipped;
        }
        let replaced = (before == ARMED).then(|| slot.description());
        slot.describe(what);
        let fd = slot.fd.load(Relaxed);
        if !sys::arm_watchpoint(fd, addr, len, reads) {
            slot.state.store(FREE, Release);
            return Arm::Skipped;
        }
        slot.state.store(ARMED, Release);
        match replaced {
            Some(old) => Arm::Replaced(old),
            None => Arm::Armed,
        }
    }

    /// The trap of slot `i` (in its own thread): disables the watchpoint
    /// (it would trap again at the next access), then returns the watch's
    /// description, or `None` when the slot was being re-armed (a stale
    /// trap).
    pub fn take(&self, i: usize) -> Option<Armed> {
        let slot = self.slots.get(i)?;
        sys::disable_event(slot.fd.load(Relaxed));
        slot.state
            .compare_exchange(ARMED, ARMING, Acquire, Relaxed)
            .ok()?;
        let what = slot.description();
        slot.state.store(FREE, Release);
        Some(what)
    }

    /// The next arming round's number.
    pub fn next_round(&self) -> u64 {
        self.rounds.fetch_add(1, Relaxed)
    }

    /// Stops every watchpoint; with `close`, closes them (the thread
    /// ends). Waits for an arming in progress in another thread (a few
    /// microseconds) so that no one re-points a closed descriptor; an
    /// arming that never ends (a crash inside a handler, then the profiles
    /// are written from the fatal-signal handler) is given up on after
    /// [`STOP_WAIT_ROUNDS`] yields: that watchpoint stays open, and the
    /// kernel drops it with the thread.
    pub fn stop(&self, close: bool) {
        for slot in &self.slots {
            for _ in 0..STOP_WAIT_ROUNDS {
                let s = slot.state.load(Acquire);
                if s == CLOSED {
                    break;
                }
                if s != ARMING
                    && slot
                        .state
                        .compare_exchange(s, CLOSED, AcqRel, Relaxed)
                        .is_ok()
                {
                    let fd = slot.fd.load(Relaxed);
                    if close {
                        slot.fd.store(-1, Relaxed);
                        sys::close_event(fd);
                    } else {
                        sys::disable_event(fd);
                    }
                    break;
                }
                std::thread::yield_now();
            }
        }
    }
}

/// Yields [`Watches::stop`] waits for an arming in progress.
pub const STOP_WAIT_ROUNDS: u32 = 10_000;

/// Reuse buckets (thread CPU time until the watched word was touched
/// again), as in `formats::patterns::REUSE_BUCKETS`: < 100 us, < 1 ms,
/// < 10 ms, >= 10 ms, not reused before the watch was re-armed. The time
/// includes the rest of the arming handler and the trap's own delivery
/// (10-50 us in a VM): the first bucket means "at once".
pub const REUSE_LIMITS_NS: [u64; 3] = [100_000, 1_000_000, 10_000_000];
pub const REUSE_NOT_REUSED: u32 = REUSE_LIMITS_NS.len() as u32 + 1;

/// The reuse bucket of a reuse time.
pub fn reuse_bucket(ns: u64) -> u32 {
    REUSE_LIMITS_NS
        .iter()
        .position(|&limit| ns < limit)
        .unwrap_or(REUSE_LIMITS_NS.len()) as u32
}

/// One counted kind of sharing event of a thread: (object node, true or
/// false sharing, line offset in the object, the other thread, this
/// thread's instruction, the other thread's instruction).
#[derive(Default)]
pub struct SharingEntry {
    /// Object node + 1 (0: empty).
    node: AtomicU32,
    exact: AtomicBool,
    other_thread: AtomicU32,
    line_offset: AtomicI64,
    ip: AtomicU64,
    other_ip: AtomicU64,
    count: AtomicU64,
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for SharingEntry {}

/// One sharing table row, read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharingRow {
    pub node: u32,
    pub exact: bool,
    pub other_thread: u32,
    pub line_offset: i64,
    pub ip: u64,
    pub other_ip: u64,
    pub count: u64,
}

/// The sharing events of one thread, by kind (fixed size, open
/// addressing; written by the owning thread's handler only, read by the
/// writer and checkpoints).
pub struct SharingTable {
    entries: &'static [SharingEntry],
    /// Set once a row was written: the writer reads the rows (48 KiB,
    /// twelve pages a process that never shares would fault in at
    /// exit) only then.
    used: AtomicBool,
}

/// Rows of a thread's sharing table.
pub const SHARING_ROWS: usize = 1024;
const MAX_PROBE: usize = 32;

impl SharingTable {
    pub fn new() -> Option<SharingTable> {
        Some(SharingTable {
            entries: sys::map_zeroed::<SharingEntry>(SHARING_ROWS)?,
            used: AtomicBool::new(false),
        })
    }

    /// Empties the table for another thread (`sys::discard`; its owner
    /// ended, nothing reads it any more).
    pub fn reset(&self) {
        self.used.store(false, Relaxed);
        sys::discard(self.entries);
    }

    /// Counts one event; false (lost) when the table is full.
    pub fn note(&self, row: &SharingRow) -> bool {
        let h = (row.node as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(row.ip ^ row.other_ip.rotate_left(17))
            .wrapping_add(row.line_offset as u64 ^ u64::from(row.other_thread) << 40)
            .wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let mut i = (h >> 32) as usize % SHARING_ROWS;
        for _ in 0..MAX_PROBE {
            let e = &self.entries[i];
            let node = e.node.load(Relaxed);
            if node == 0 {
                self.used.store(true, Relaxed);
                e.exact.store(row.exact, Relaxed);
                e.other_thread.store(row.other_thread, Relaxed);
                e.line_offset.store(row.line_offset, Relaxed);
                e.ip.store(row.ip, Relaxed);
                e.other_ip.store(row.other_ip, Relaxed);
                e.count.store(1, Relaxed);
                e.node.store(row.node + 1, Release);
                return true;
            }
            if node == row.node + 1
                && e.exact.load(Relaxed) == row.exact
                && e.other_thread.load(Relaxed) == row.other_thread
                && e.line_offset.load(Relaxed) == row.line_offset
                && e.ip.load(Relaxed) == row.ip
                && e.other_ip.load(Relaxed) == row.other_ip
            {
                e.count.fetch_add(1, Relaxed);
                return true;
            }
            i = (i + 1) % SHARING_ROWS;
        }
        false
    }

    /// Every row, in no particular order.
    pub fn rows(&self) -> impl Iterator<Item = SharingRow> + '_ {
        // (`node` is stored with Release after `used`.)
        let entries = match self.used.load(Acquire) {
            true => self.entries,
            false => &[],
        };
        entries.iter().filter_map(|e| {
            let node = e.node.load(Acquire);
            (node != 0).then(|| SharingRow {
                node: node - 1,
                exact: e.exact.load(Relaxed),
                other_thread: e.other_thread.load(Relaxed),
                line_offset: e.line_offset.load(Relaxed),
                ip: e.ip.load(Relaxed),
                other_ip: e.other_ip.load(Relaxed),
                count: e.count.load(Relaxed),
            })
        })
    }
}

/// The words a sharing round watches in one line besides the sampled
/// one: `SHARING_SLOTS - 1` of the line's other seven 8-byte words,
/// rotating with the round so that a few rounds cover the line.
pub fn other_words(line: u64, sampled_word: u64, round: u64) -> [u64; SHARING_SLOTS - 1] {
    let words = LINE / 8;
    let w = (sampled_word - line) / 8;
    let mut out = [0; SHARING_SLOTS - 1];
    for (j, o) in out.iter_mut().enumerate() {
        let k = (round * (SHARING_SLOTS as u64 - 1) + j as u64) % (words - 1);
        *o = line + ((w + 1 + k) % words) * 8;
    }
    out
}

/// The watchable range of an access of `size` bytes at `addr`: the
/// access itself when it is 1, 2, 4 or 8 bytes, aligned; otherwise the
/// aligned 8-byte word holding its first byte.
pub fn watched_range(addr: u64, size: u32) -> (u64, u64) {
    let len = u64::from(size);
    if matches!(len, 1 | 2 | 4 | 8) && addr % len == 0 {
        (addr, len)
    } else {
        (addr & !7, 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_words_cover_the_line_and_skip_the_sampled_word() {
        let line = 0x1000;
        let sampled = line + 3 * 8;
        let mut seen = std::collections::BTreeSet::new();
        for round in 0..4 {
            for w in other_words(line, sampled, round) {
                assert_ne!(w, sampled);
                assert!(w >= line && w < line + LINE && w % 8 == 0);
                seen.insert(w);
            }
        }
        assert_eq!(seen.len(), 7);
    }

    #[test]
    fn reuse_buckets() {
        assert_eq!(reuse_bucket(0), 0);
        assert_eq!(reuse_bucket(99_999), 0);
        assert_eq!(reuse_bucket(500_000), 1);
        assert_eq!(reuse_bucket(5_000_000), 2);
        assert_eq!(reuse_bucket(50_000_000), 3);
        assert_eq!(REUSE_NOT_REUSED, 4);
        assert_eq!(
            REUSE_NOT_REUSED as usize + 1,
            formats::patterns::REUSE_BUCKETS.len()
        );
    }

    #[test]
    fn watched_ranges() {
        assert_eq!(watched_range(0x1004, 4), (0x1004, 4));
        assert_eq!(watched_range(0x1004, 8), (0x1000, 8));
        assert_eq!(watched_range(0x1000, 16), (0x1000, 8));
        assert_eq!(watched_range(0x1003, 2), (0x1000, 8));
    }

    #[test]
    fn sharing_rows_count_by_kind() {
        let t = SharingTable::new().unwrap();
        let row = SharingRow {
            node: 5,
            exact: false,
            other_thread: 1,
            line_offset: 0,
            ip: 0x400,
            other_ip: 0x500,
            count: 0,
        };
        assert!(t.note(&row));
        assert!(t.note(&row));
        assert!(t.note(&SharingRow { exact: true, ..row }));
        let mut rows: Vec<_> = t.rows().collect();
        rows.sort_by_key(|r| r.exact);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].count, rows[1].count), (2, 1));
    }

    #[test]
    fn a_closed_slot_is_never_armed_and_a_free_one_is_taken_once() {
        let w = Watches::default();
        let what = Armed::default();
        assert_eq!(w.arm(0, 0x1000, 8, true, &what), Arm::Skipped);
        assert_eq!(w.take(0), None);
    }

    #[test]
    fn stopping_gives_up_on_an_arming_that_never_ends() {
        let w = Watches::default();
        w.slots[1].state.store(ARMING, Relaxed);
        w.stop(true);
        assert_eq!(w.slots[1].state.load(Relaxed), ARMING);
    }
}
