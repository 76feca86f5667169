//! Address windows (64 MiB, glibc's arena heap size) that hold heap blocks
//! below the tracking threshold: samples there that hit no tracked object
//! go to `<small heap objects>` instead of unknown data. Filled by the
//! allocation hooks (one shift and a short scan per small block), read by
//! the signal handler. An approximation: other data that shares a window
//! with small heap blocks (rare: glibc's heaps are their own mappings) is
//! counted there too.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const WINDOWS: usize = 256;
const WINDOW_SHIFT: u32 = 26;

static SMALL_HEAP: [AtomicU64; WINDOWS] = [const { AtomicU64::new(0) }; WINDOWS];

/// Notes that a small heap block lives at `addr`.
pub fn note_small_block(addr: u64) {
    let window = (addr >> WINDOW_SHIFT) + 1;
    for slot in &SMALL_HEAP {
        match slot.load(Relaxed) {
            w if w == window => return,
            0 => match slot.compare_exchange(0, window, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(w) if w == window => return,
                Err(_) => continue,
            },
            _ => continue,
        }
    }
}

/// True if `addr` lies in a window that holds small heap blocks.
pub fn in_small_heap(addr: u64) -> bool {
    let window = (addr >> WINDOW_SHIFT) + 1;
    for slot in &SMALL_HEAP {
        match slot.load(Relaxed) {
            0 => return false,
            w if w == window => return true,
            _ => {}
        }
    }
    false
}
