//! The calling-context trees (CCT) of each thread: the sample handler
//! inserts each attributed access here as a path (code, heap object, static
//! object, unknown address) with its metrics; [`filled`] lists the slots
//! an insert-only table filled. Hands to the next step: the trees, which the
//! writer ([`crate::output`]) reads into the thread's profile.
//!
//! A thread's calling-context trees, in preallocated memory so that the
//! signal handler can insert paths without allocating or locking.
//!
//! One node pool holds the four trees; nodes 0..4 are their roots. Children
//! are found through an open-addressing hash table keyed by (parent, tag,
//! key). Only the owning thread's handler writes; the file writer reads after
//! sampling stopped, or (a checkpoint) while it goes on: a node is complete
//! before the pool's length (release) counts it. Everything is atomic (relaxed), so there are no data
//! races even if a late signal arrives while the file is written.

use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

pub mod filled;

use crate::cct::filled::Filled;
use crate::sys;

/// Roots.
pub const CODE: u32 = 0;
pub const HEAP: u32 = 1;
pub const STATIC: u32 = 2;
pub const UNKNOWN: u32 = 3;
const ROOTS: u32 = 4;

/// Node tags.
pub const TAG_ROOT: u32 = 0;
pub const TAG_CALL: u32 = 1;
pub const TAG_HEAP_SITE: u32 = 2;
pub const TAG_STATIC: u32 = 3;
pub const TAG_STACK: u32 = 4;
pub const TAG_SMALL_HEAP: u32 = 5;
/// An address in no known object; key: its region's (`regions::key`),
/// 0 when not kept.
pub const TAG_UNKNOWN: u32 = 6;
pub const TAG_NOT_RECOVERED: u32 = 7;
/// A frame on the thread's stack; key: its function's start address.
pub const TAG_STACK_FRAME: u32 = 8;

/// Metric columns (see `run::metric_columns` for their meaning; a
/// profile lists only the columns its events fill).
pub const M_SAMPLES: usize = 0;
pub const M_STORE_SAMPLES: usize = 1;
pub const M_CPU_SAMPLES: usize = 2;
pub const M_PAGE_FAULTS: usize = 3;
pub const M_FIRST_TOUCH: usize = 4;
pub const M_NUMA_LOCAL: usize = 5;
pub const M_NUMA_REMOTE: usize = 6;
/// Hardware sources: summed load latency (cycles) and the data source of
/// each sample.
pub const M_LATENCY: usize = 7;
pub const M_SRC_L1: usize = 8;
pub const M_SRC_LFB: usize = 9;
pub const M_SRC_L2: usize = 10;
pub const M_SRC_L3: usize = 11;
pub const M_SRC_LOCAL_DRAM: usize = 12;
pub const M_SRC_REMOTE_DRAM: usize = 13;
pub const M_SRC_REMOTE_CACHE: usize = 14;
pub const M_SRC_HITM: usize = 15;
pub const M_SRC_OTHER: usize = 16;
pub const M_TLB_MISS: usize = 17;
/// mem:soft (no hardware source fills the data-source columns): the
/// samples each attribution rule decided, `blame::Rule` order, in the
/// columns from here on (`M_SRC_L1` ..= `M_SRC_HITM`): per node, so per
/// code line and per object, how its samples were attributed.
pub const M_RULE_FIRST: usize = M_SRC_L1;
/// mem:soft: summed operand size of the sampled accesses whose address was
/// recovered.
pub const M_ACCESS_BYTES: usize = 18;
/// Sampled accesses whose bytes span two 64-byte cache lines.
pub const M_MISALIGNED: usize = 19;
/// Watchpoint traps (`-e sharing`): another thread touched the sampled
/// bytes (true sharing) or another word of their cache line (false
/// sharing), at least one of the two accesses a write.
pub const M_FALSE_SHARING: usize = 20;
pub const M_TRUE_SHARING: usize = 21;
pub const METRICS: usize = 22;

/// How many hash slots are probed before giving up.
const MAX_PROBE: usize = 64;

#[repr(C)]
pub struct Node {
    pub parent: AtomicU32,
    pub tag: AtomicU32,
    pub key: AtomicU64,
    pub metrics: [AtomicU64; METRICS],
}

// SAFETY: every field is an integer or an atomic: all-zero bytes are a
// valid value (`sys::map_zeroed`).
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for Node {}

/// The node pool of one thread, mapped in chunks as it fills: chunk 0
/// holds nodes `[0, first)`, chunk `k > 0` nodes `[first << (k - 1),
/// first << k)`, up to the capacity. The signal handler never maps: when
/// the pool passes half of what is mapped it asks for the next chunk
/// ([`Tree::wants_chunk`]), which the thread's allocation hooks, the
/// checkpoint helper or the thread's next start map ([`Tree::grow`]); a
/// sample that finds no room is dropped (counted as "tree full").
pub struct Tree {
    chunks: [AtomicPtr<Node>; MAX_CHUNKS],
    /// log2 of chunk 0's nodes.
    first_shift: u32,
    /// Most nodes (a power of two).
    capacity: u32,
    /// Nodes in the mapped chunks.
    mapped: AtomicU32,
    /// Set by the handler when the pool passed half of `mapped`.
    wants: AtomicBool,
    /// Held while a chunk is being mapped (the owner's hooks and the
    /// helper may both try).
    growing: AtomicBool,
    /// 0 = empty, otherwise node index + 1 (sized for the capacity: 8
    /// bytes a node, touched only where used).
    table: &'static [AtomicU32],
    len: AtomicU32,
}

/// Chunks of a pool at most (2^(MAX_CHUNKS - 1) times the first).
const MAX_CHUNKS: usize = 12;

/// Nodes of a pool's first chunk (384 KiB): what most threads need.
pub const FIRST_CHUNK: usize = 1 << 11;

/// The chunk of node `i` and its index in that chunk.
fn chunk_of(i: u32, first_shift: u32) -> (usize, usize) {
    let c = i >> first_shift;
    if c == 0 {
        (0, i as usize)
    } else {
        let k = 32 - c.leading_zeros();
        (k as usize, (i - (1 << (first_shift + k - 1))) as usize)
    }
}

/// Nodes of chunk `k`.
fn chunk_len(k: usize, first_shift: u32) -> usize {
    if k == 0 {
        1 << first_shift
    } else {
        1 << (first_shift + k as u32 - 1)
    }
}

/// Slot hash of a (parent, tag, key) edge. Every input bit must reach the
/// low bits (the table index): the same frame address is a child of many
/// parents (recursion, a function reached along many paths), and those
/// edges must not share one probe chain. splitmix64's finaliser over the
/// key mixed with the (parent, tag) pair.
fn hash(parent: u32, tag: u32, key: u64) -> u64 {
    let mut h = key ^ ((parent as u64) << 8 | tag as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

impl Tree {
    /// A pool of up to `capacity` nodes (a power of two), its first
    /// [`FIRST_CHUNK`] (or all of them, if fewer) mapped; `None` if memory
    /// could not be mapped.
    pub fn new(capacity: usize) -> Option<Tree> {
        let capacity = capacity.next_power_of_two().max(64);
        let first = capacity.min(FIRST_CHUNK);
        let table = sys::map_zeroed::<AtomicU32>(capacity * 2)?;
        let tree = Tree {
            chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_CHUNKS],
            first_shift: first.trailing_zeros(),
            capacity: capacity as u32,
            mapped: AtomicU32::new(0),
            wants: AtomicBool::new(false),
            growing: AtomicBool::new(false),
            table,
            len: AtomicU32::new(ROOTS),
        };
        if !tree.grow() {
            return None;
        }
        tree.init_roots();
        Some(tree)
    }

    /// A pool as [`Tree::new`] with all of its `capacity` mapped at once
    /// (the main thread's: there may be no other thread to map more).
    pub fn new_whole(capacity: usize) -> Option<Tree> {
        let tree = Tree::new(capacity)?;
        while tree.mapped() < tree.capacity as usize {
            if !tree.grow() {
                break;
            }
        }
        Some(tree)
    }

    fn init_roots(&self) {
        for root in 0..ROOTS {
            if let Some(n) = self.get(root) {
                n.parent.store(u32::MAX, Relaxed);
            }
        }
    }

    /// The nodes of chunk `k`, if it is mapped.
    #[allow(unsafe_code)]
    fn chunk(&self, k: usize) -> Option<&'static [Node]> {
        let p = self.chunks.get(k)?.load(Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer is the start of a zeroed mapping
        // of `chunk_len(k)` nodes that is never unmapped (`grow`).
        Some(unsafe { std::slice::from_raw_parts(p, chunk_len(k, self.first_shift)) })
    }

    /// Node `i`, if its chunk is mapped.
    fn get(&self, i: u32) -> Option<&Node> {
        let (k, at) = chunk_of(i, self.first_shift);
        self.chunk(k)?.get(at)
    }

    /// Nodes that fit in the mapped chunks.
    pub fn mapped(&self) -> usize {
        self.mapped.load(Acquire) as usize
    }

    /// True when the handler asked for the next chunk.
    pub fn wants_chunk(&self) -> bool {
        self.wants.load(Relaxed)
    }

    /// Maps the next chunk (never from a signal handler); false when the
    /// pool is at its capacity, another thread is mapping one, or the
    /// library's memory was refused (`sys::heap::short_of_memory`: an
    /// address-space limit, a sandbox), now or before: a pool that has
    /// its first chunk then stops growing, and samples on paths not seen
    /// before are dropped (counted as "tree full").
    pub fn grow(&self) -> bool {
        if self.growing.swap(true, Acquire) {
            return false;
        }
        let mapped = self.mapped.load(Relaxed);
        let stopped = mapped > 0 && sys::heap::short_of_memory();
        let grown = mapped < self.capacity && !stopped && {
            let (k, _) = chunk_of(mapped, self.first_shift);
            let len = chunk_len(k, self.first_shift);
            match sys::map_zeroed::<Node>(len) {
                Some(chunk) if k < MAX_CHUNKS => {
                    self.chunks[k].store(chunk.as_ptr() as *mut Node, Release);
                    self.mapped.store(mapped + len as u32, Release);
                    true
                }
                _ => false,
            }
        };
        self.wants.store(false, Relaxed);
        self.growing.store(false, Release);
        grown
    }

    /// Maps the next chunk if the handler asked for it.
    pub fn grow_if_wanted(&self) {
        if self.wants_chunk() {
            self.grow();
        }
    }

    /// Empties the pool for another thread (its owner ended; nothing reads
    /// it any more): its index and chunks are given back to the kernel
    /// (`sys::discard`: zeros again, pages taken as touched), the mapped
    /// chunks are kept.
    pub fn reset(&self) {
        sys::discard(self.table);
        for k in 0..MAX_CHUNKS {
            if let Some(nodes) = self.chunk(k) {
                sys::discard(nodes);
            }
        }
        self.wants.store(false, Relaxed);
        self.len.store(ROOTS, Release);
        self.init_roots();
    }

    /// Finds or creates the child of `parent` with this tag and key. `None`
    /// when the pool is full.
    pub fn child(&self, parent: u32, tag: u32, key: u64) -> Option<u32> {
        let mask = self.table.len() - 1;
        let mut slot = hash(parent, tag, key) as usize & mask;
        for _ in 0..MAX_PROBE {
            let entry = self.table[slot].load(Relaxed);
            if entry == 0 {
                let index = self.len.load(Relaxed);
                let mapped = self.mapped.load(Acquire);
                if index >= mapped / 2 + mapped / 4 {
                    // Three quarters used: the next chunk, please.
                    self.wants.store(true, Relaxed);
                }
                if index >= mapped {
                    return None;
                }
                let node = self.get(index)?;
                node.parent.store(parent, Relaxed);
                node.tag.store(tag, Relaxed);
                node.key.store(key, Relaxed);
                // Release: a reader on another thread (a checkpoint) that
                // sees the new length sees the node's fields.
                self.len.store(index + 1, Release);
                self.table[slot].store(index + 1, Relaxed);
                return Some(index);
            }
            let node = self.get(entry - 1)?;
            if node.parent.load(Relaxed) == parent
                && node.tag.load(Relaxed) == tag
                && node.key.load(Relaxed) == key
            {
                return Some(entry - 1);
            }
            slot = (slot + 1) & mask;
        }
        None
    }

    /// Inserts the call path (root-most frame first) under `parent`;
    /// returns the leaf node.
    pub fn path(
        &self,
        mut parent: u32,
        frames_root_first: impl Iterator<Item = u64>,
    ) -> Option<u32> {
        for frame in frames_root_first {
            parent = self.child(parent, TAG_CALL, frame)?;
        }
        Some(parent)
    }

    pub fn add(&self, node: u32, metric: usize, value: u64) {
        if let Some(n) = self.get(node) {
            n.metrics[metric].fetch_add(value, Relaxed);
        }
    }

    pub fn len(&self) -> usize {
        self.len.load(Acquire) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (parent, tag, key, metrics) of node `i`.
    pub fn node(&self, i: usize) -> (u32, u32, u64, [u64; METRICS]) {
        let Some(n) = self.get(i as u32) else {
            return (u32::MAX, TAG_ROOT, 0, [0; METRICS]);
        };
        let mut m = [0u64; METRICS];
        for (out, v) in m.iter_mut().zip(&n.metrics) {
            *out = v.load(Relaxed);
        }
        (
            n.parent.load(Relaxed),
            n.tag.load(Relaxed),
            n.key.load(Relaxed),
            m,
        )
    }
}

/// Frames of a call path that [`PathCache`] remembers.
pub const CACHED_FRAMES: usize = 128;

/// Data-tree entries remembered for the cached callers.
const CACHED_OBJECTS: usize = 8;

/// The tree nodes of the previous sample's callers (the path without its
/// leaf), for the code tree and for the last few data objects. Consecutive
/// samples in a loop share their callers: with a hit, a sample costs one
/// child lookup per tree instead of one per frame, and touches no node of
/// the callers (cold memory in a memory-bound program). Nodes are never
/// moved or freed, so remembered indices stay valid. Owned by one thread's
/// handler.
#[derive(Debug)]
pub struct PathCache {
    callers: [u64; CACHED_FRAMES],
    len: usize,
    valid: bool,
    code_parent: u32,
    /// (object node, parent of the leaf under that object).
    data: [(u32, u32); CACHED_OBJECTS],
    data_len: usize,
    data_next: usize,
}

// SAFETY: integers and a bool only: all-zero bytes are the empty cache,
// the same as `default()`.
#[allow(unsafe_code)]
unsafe impl crate::sys::ZeroInit for PathCache {}

impl Default for PathCache {
    fn default() -> Self {
        PathCache {
            callers: [0; CACHED_FRAMES],
            len: 0,
            valid: false,
            code_parent: 0,
            data: [(0, 0); CACHED_OBJECTS],
            data_len: 0,
            data_next: 0,
        }
    }
}

impl PathCache {
    /// The code-tree node of `callers` (innermost first, as unwound), from
    /// the cache or inserted; a change of callers forgets the data entries.
    pub fn code_parent(&mut self, tree: &Tree, callers: &[u64]) -> Option<u32> {
        if self.valid && self.callers[..self.len] == *callers {
            return Some(self.code_parent);
        }
        self.valid = false;
        let parent = tree.path(CODE, callers.iter().rev().copied())?;
        if callers.len() <= CACHED_FRAMES {
            self.callers[..callers.len()].copy_from_slice(callers);
            self.len = callers.len();
            self.code_parent = parent;
            self.data_len = 0;
            self.data_next = 0;
            self.valid = true;
        }
        Some(parent)
    }

    /// The node of `callers` under the object node `object` (call
    /// [`PathCache::code_parent`] with the same callers first).
    pub fn data_parent(&mut self, tree: &Tree, object: u32, callers: &[u64]) -> Option<u32> {
        let cached = self.valid && self.callers[..self.len] == *callers;
        if cached {
            if let Some(&(_, p)) = self.data[..self.data_len].iter().find(|e| e.0 == object) {
                return Some(p);
            }
        }
        let parent = tree.path(object, callers.iter().rev().copied())?;
        if cached {
            self.data[self.data_next] = (object, parent);
            self.data_next = (self.data_next + 1) % CACHED_OBJECTS;
            self.data_len = (self.data_len + 1).min(CACHED_OBJECTS);
        }
        Some(parent)
    }
}

/// A fixed-size table of counters keyed by (object node, bucket), in
/// preallocated memory: the per-thread offset histograms of data objects.
/// Insert-only, written by the owning thread's handler; a full table drops
/// the increment (counted by the caller).
pub struct Counts {
    /// 0 = empty, otherwise the packed key + 1.
    keys: &'static [AtomicU64],
    values: &'static [AtomicU64],
    /// The slots with a key, for [`Counts::entries`].
    filled: Filled,
}

impl Counts {
    /// A table of `capacity` slots (rounded up to a power of two).
    pub fn new(capacity: usize) -> Option<Counts> {
        let capacity = capacity.next_power_of_two().max(64);
        Some(Counts {
            keys: sys::map_zeroed::<AtomicU64>(capacity)?,
            values: sys::map_zeroed::<AtomicU64>(capacity)?,
            filled: Filled::new(capacity)?,
        })
    }

    fn pack(node: u32, bucket: u32) -> u64 {
        ((node as u64) << 32 | bucket as u64).wrapping_add(1)
    }

    /// Adds one to (node, bucket); false when the table is full.
    pub fn add(&self, node: u32, bucket: u32) -> bool {
        let key = Self::pack(node, bucket);
        let mask = self.keys.len() - 1;
        let mut slot = (hash(node, 0, bucket as u64) as usize) & mask;
        for _ in 0..MAX_PROBE {
            let k = self.keys[slot].load(Relaxed);
            if k == key {
                self.values[slot].fetch_add(1, Relaxed);
                return true;
            }
            if k == 0 {
                self.values[slot].fetch_add(1, Relaxed);
                self.keys[slot].store(key, Relaxed);
                self.filled.push(slot);
                return true;
            }
            slot = (slot + 1) & mask;
        }
        false
    }

    /// Empties the table for another thread (its owner ended; nothing
    /// reads it any more): its pages are given back (`sys::discard`).
    pub fn reset(&self) {
        if self.filled.slots().next().is_some() {
            sys::discard(self.keys);
            sys::discard(self.values);
        }
        self.filled.reset();
    }

    /// Every (node, bucket, count), in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (u32, u32, u64)> + '_ {
        self.filled.slots().filter_map(|slot| {
            let k = self.keys[slot].load(Relaxed);
            (k != 0).then(|| {
                let k = k - 1;
                ((k >> 32) as u32, k as u32, self.values[slot].load(Relaxed))
            })
        })
    }
}

#[cfg(test)]
mod counts_tests {
    use super::*;

    #[test]
    fn counts_add_and_list() {
        let c = Counts::new(64).unwrap();
        for _ in 0..3 {
            assert!(c.add(7, 2));
        }
        assert!(c.add(7, 0));
        assert!(c.add(0, 0));
        let mut e: Vec<_> = c.entries().collect();
        e.sort();
        assert_eq!(e, vec![(0, 0, 1), (7, 0, 1), (7, 2, 3)]);
    }

    #[test]
    fn a_full_table_refuses() {
        let c = Counts::new(64).unwrap();
        let added = (0..1000).filter(|&b| c.add(1, b)).count();
        assert_eq!(added, 64);
        assert_eq!(c.entries().map(|e| e.2).sum::<u64>(), 64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_frame_under_many_parents() {
        // Deep recursion: the same return address at every level, and the
        // same call site reached from many callers.
        let tree = Tree::new_whole(1 << 16).unwrap();
        let leaf = tree
            .path(CODE, std::iter::repeat_n(0x40_1234u64, 2_000))
            .expect("a 2,000-deep recursion fits");
        assert_eq!(tree.len(), 4 + 2_000);
        for caller in 0..2_000u64 {
            let parent = tree.child(CODE, TAG_CALL, 0x50_0000 + caller * 16).unwrap();
            tree.child(parent, TAG_CALL, 0x40_1234)
                .expect("same frame, new parent");
        }
        // Found again, not inserted twice.
        assert_eq!(
            tree.path(CODE, std::iter::repeat_n(0x40_1234u64, 2_000)),
            Some(leaf)
        );
        assert_eq!(tree.len(), 4 + 2_000 + 4_000);
    }

    #[test]
    fn path_cache_gives_the_nodes_of_a_plain_insertion() {
        let tree = Tree::new(1 << 12).unwrap();
        let mut cache = PathCache::default();
        let callers_a = [0x30u64, 0x20, 0x10]; // innermost first
        let callers_b = [0x31u64, 0x20, 0x10];
        for callers in [callers_a, callers_a, callers_b, callers_a] {
            let expected = tree.path(CODE, callers.iter().rev().copied()).unwrap();
            assert_eq!(cache.code_parent(&tree, &callers), Some(expected));
            for object in [HEAP, STATIC, HEAP] {
                let expected = tree.path(object, callers.iter().rev().copied()).unwrap();
                assert_eq!(cache.data_parent(&tree, object, &callers), Some(expected));
            }
        }
        // More objects than entries: still right.
        for k in 0..20u64 {
            let obj = tree.child(HEAP, TAG_HEAP_SITE, k).unwrap();
            let expected = tree.path(obj, callers_a.iter().rev().copied()).unwrap();
            assert_eq!(cache.data_parent(&tree, obj, &callers_a), Some(expected));
        }
        // Data entries belong to the callers they were made for.
        cache.code_parent(&tree, &callers_b);
        let expected = tree.path(HEAP, callers_b.iter().rev().copied()).unwrap();
        assert_eq!(cache.data_parent(&tree, HEAP, &callers_b), Some(expected));
    }

    #[test]
    fn the_pool_grows_by_chunks_when_asked_and_resets_empty() {
        let tree = Tree::new(1 << 16).unwrap();
        assert_eq!(tree.mapped(), FIRST_CHUNK);
        let mut k = 0u64;
        // Fill the first chunk: the pool asks for more at three quarters
        // and refuses past what is mapped.
        while tree.child(CODE, TAG_CALL, k).is_some() {
            k += 1;
        }
        assert_eq!(tree.len(), FIRST_CHUNK);
        assert!(tree.wants_chunk());
        tree.grow_if_wanted();
        assert_eq!(tree.mapped(), 2 * FIRST_CHUNK);
        assert!(!tree.wants_chunk());
        // Every node is where it was, the new ones in the new chunk.
        for j in 0..k {
            let n = tree.child(CODE, TAG_CALL, j).unwrap();
            assert_eq!(tree.node(n as usize).2, j);
        }
        let more = tree
            .child(CODE, TAG_CALL, k)
            .expect("room in the second chunk");
        tree.add(more, M_SAMPLES, 3);
        assert_eq!(
            tree.node(more as usize),
            (CODE, TAG_CALL, k, {
                let mut m = [0; METRICS];
                m[M_SAMPLES] = 3;
                m
            })
        );
        while tree.mapped() < 1 << 16 {
            assert!(tree.grow());
        }
        assert!(!tree.grow(), "at capacity");
        // Emptied for another thread: only the roots, no metric, the same
        // keys inserted afresh.
        tree.reset();
        assert_eq!(tree.len(), ROOTS as usize);
        assert_eq!(tree.mapped(), 1 << 16);
        assert_eq!(
            tree.node(CODE as usize),
            (u32::MAX, TAG_ROOT, 0, [0; METRICS])
        );
        assert_eq!(tree.child(CODE, TAG_CALL, k), Some(ROOTS));
        assert_eq!(tree.node(ROOTS as usize).3, [0; METRICS]);
    }

    #[test]
    fn chunk_of_finds_every_node() {
        let shift = 4;
        let mut next = [0usize; MAX_CHUNKS];
        for i in 0..(16u32 << 6) {
            let (k, at) = chunk_of(i, shift);
            assert_eq!(at, next[k], "node {i}");
            assert!(at < chunk_len(k, shift));
            next[k] += 1;
        }
        assert_eq!(&next[..7], &[16, 16, 32, 64, 128, 256, 512]);
    }

    #[test]
    fn counts_reset_empty() {
        let c = Counts::new(64).unwrap();
        assert!(c.add(7, 2));
        c.reset();
        assert_eq!(c.entries().count(), 0);
        assert!(c.add(1, 1));
        assert_eq!(c.entries().collect::<Vec<_>>(), vec![(1, 1, 1)]);
    }

    #[test]
    fn pool_full_is_none() {
        let tree = Tree::new(64).unwrap();
        let mut last = None;
        for k in 0..100u64 {
            last = tree.child(CODE, TAG_CALL, k);
        }
        assert_eq!(last, None);
        assert_eq!(tree.len(), 64);
    }
}
