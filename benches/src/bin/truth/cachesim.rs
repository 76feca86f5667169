//! A set-associative LRU cache hierarchy, sized like this machine's data
//! caches ([`crate::machine::Cache`]): L1d, then L2 on an L1 miss, then the
//! last level on an L2 miss (non-inclusive, write-allocate, no prefetcher).
//! Each access is one line; an access that straddles two lines touches
//! both. The misses it counts are a model, not the hardware's: no
//! prefetching (a stream's misses are counted but the hardware hides most
//! of their latency), no other cores, physical indexing ignored.

use crate::machine::Cache;

/// One cache level.
#[derive(Debug, Clone)]
struct Level {
    sets: usize,
    ways: usize,
    line_shift: u32,
    /// `sets * ways` tags, each set's most recently used first;
    /// `u64::MAX` is empty.
    tags: Vec<u64>,
}

impl Level {
    fn new(c: &Cache) -> Level {
        let ways = c.ways.max(1) as usize;
        let line = u64::from(c.line.max(1));
        let sets = ((c.size / line) as usize / ways).max(1);
        Level {
            sets,
            ways,
            line_shift: line.trailing_zeros(),
            tags: vec![u64::MAX; sets * ways],
        }
    }

    /// Looks `line` (address >> line_shift) up and makes it the most
    /// recently used of its set; true on a hit.
    fn access(&mut self, line: u64) -> bool {
        let set = (line % self.sets as u64) as usize;
        let ways = &mut self.tags[set * self.ways..(set + 1) * self.ways];
        let pos = ways.iter().position(|&t| t == line);
        let hit = pos.is_some();
        let end = pos.unwrap_or(self.ways - 1);
        ways[..=end].rotate_right(1);
        ways[0] = line;
        hit
    }
}

/// Misses of one access at each level (true: missed there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    pub l1: bool,
    /// Missed in the last level (memory access).
    pub llc: bool,
    /// Estimated cycles the access waited beyond an L1 hit
    /// ([`stall_cycles`]); for a straddling access, its slower line's.
    pub stall: u64,
}

/// Load-to-use latency beyond an L1 hit, in core cycles, of a hit in the
/// second and third level and of a memory access: Zen 4's published
/// figures (L1 4-5, L2 14, L3 about 50, DRAM about 80-100 ns at 3-3.7 GHz,
/// here 300). A model of what a timer sample of the waiting instruction
/// sees, without prefetching or memory-level parallelism: it weighs a
/// random DRAM miss and a streamed one alike.
pub const LATENCY: [u64; 3] = [14, 50, 300];

/// The stall of an access that missed the first `missed` of `levels`
/// levels: 0 on an L1 hit; the memory latency when it missed them all.
pub fn stall_cycles(missed: usize, levels: usize) -> u64 {
    match missed {
        0 => 0,
        m if m >= levels => LATENCY[2],
        m => LATENCY[(m - 1).min(1)],
    }
}

/// The hierarchy.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    levels: Vec<Level>,
}

impl Hierarchy {
    /// Caches in level order (L1 first); at least one.
    pub fn new(caches: &[Cache]) -> Hierarchy {
        Hierarchy {
            levels: caches.iter().map(Level::new).collect(),
        }
    }

    fn line_access(&mut self, addr: u64) -> Outcome {
        let mut out = Outcome::default();
        let levels = self.levels.len();
        for (i, level) in self.levels.iter_mut().enumerate() {
            if level.access(addr >> level.line_shift) {
                out.stall = stall_cycles(i, levels);
                return out;
            }
            if i == 0 {
                out.l1 = true;
            }
        }
        out.llc = true;
        out.stall = stall_cycles(levels, levels);
        out
    }

    /// One access of `size` bytes at `addr`.
    pub fn access(&mut self, addr: u64, size: u64) -> Outcome {
        let mut out = self.line_access(addr);
        let shift = self.levels.first().map_or(6, |l| l.line_shift);
        let last = addr + size.max(1) - 1;
        if last >> shift != addr >> shift {
            let second = self.line_access(last);
            out.l1 |= second.l1;
            out.llc |= second.llc;
            out.stall = out.stall.max(second.stall);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Hierarchy {
        // L1: 2 sets x 2 ways of 64 B; LLC: 4 sets x 2 ways.
        Hierarchy::new(&[
            Cache {
                level: 1,
                size: 256,
                ways: 2,
                line: 64,
            },
            Cache {
                level: 3,
                size: 512,
                ways: 2,
                line: 64,
            },
        ])
    }

    #[test]
    fn lru_within_a_set() {
        let mut h = small();
        assert!(h.access(0, 8).llc);
        assert!(!h.access(8, 8).l1);
        // Lines 0, 2, 4 map to L1 set 0 (2 ways): 0 is evicted by 4.
        h.access(128, 8);
        h.access(256, 8);
        let o = h.access(0, 8);
        assert!(o.l1 && !o.llc);
        assert_eq!(o.stall, LATENCY[0]);
        assert_eq!(h.access(1 << 20, 8).stall, LATENCY[2]);
        assert_eq!(h.access(1 << 20, 8).stall, 0);
    }

    #[test]
    fn stall_by_level_missed() {
        assert_eq!(stall_cycles(0, 3), 0);
        assert_eq!(stall_cycles(1, 3), 14);
        assert_eq!(stall_cycles(2, 3), 50);
        assert_eq!(stall_cycles(3, 3), 300);
        assert_eq!(stall_cycles(1, 2), 14);
        assert_eq!(stall_cycles(2, 2), 300);
    }

    #[test]
    fn straddling_accesses_touch_two_lines() {
        let mut h = small();
        h.access(60, 8);
        assert!(!h.access(64, 8).l1);
    }
}
