//! The library's own heap: size classes carved from private mappings of
//! its own, never glibc's allocator.
//!
//! glibc gives every thread that calls `malloc` an arena of its own (up to
//! eight per core), each reserving 64 MiB of address space. Through
//! glibc, the library's few allocations on a program thread that never
//! allocates itself (its tables, its profile at exit), and on the
//! checkpoint helper, each cost such an arena: a 64-thread compute
//! program measured under `ulimit -v` ran out of address space for its
//! own blocks. Here, blocks up to [`LARGEST_CLASS`] bytes come from
//! 64 KiB slabs, kept on a free list per class when freed (any thread may
//! free what another allocated); larger ones are mappings of their own.
//! Slabs are carved from [`CHUNK`]-byte mappings, so that a short-lived
//! process, whose few blocks spread over some twenty classes, makes two
//! `mmap` calls for them, not one per class; untouched pages of a chunk
//! take no memory.
//! One spin lock guards the lists; it is never taken in a signal handler
//! (the handler does not allocate; once, a process's first sample
//! prepares its tables there, only when [`lock_held`] says the lock is
//! free, `threads::lazy`) and is reset in a forked child.
//!
//! When the kernel refuses a mapping (a seccomp filter that makes `mmap`
//! fail, an address-space limit reached), or under an address-space
//! limit a mapping would leave the program less than its headroom
//! (`mem::limit`: the heap's mappings, as all of the library's own,
//! leave it that much), memory comes from a reserve of
//! [`RESERVE`] bytes of address space mapped at load ([`map_reserve`],
//! no memory until touched; under an address-space limit a 32nd of the
//! limit, 8 to 16 MiB: [`reserve_bytes`]), and [`refused`] says so from
//! then on: the
//! layers above stop taking new work (the hooks stop tracking blocks) so
//! that the reserve lasts until the profiles are written, and no
//! checkpoint is written. Work whose size the run decides (the
//! allocation log, a profile's tree nodes and sites' call paths, a
//! module's symbols, the memory map's text) asks [`can_spare`] before
//! it grows and stops there, so that [`KEPT`] bytes of the reserve stay
//! for the rest of the writing, whose size is bounded by the library's
//! fixed tables; its growth uses `try_reserve`, so a refusal is never
//! the allocation failure that would end the program (Rust's allocation
//! error handler aborts). The reserve's memory is never given back to the
//! kernel: a freed block of its own mapping that lies in the reserve is
//! kept for reuse ([`REUSABLE_SLOTS`] ranges, neighbours joined), so that
//! writing one profile after another (threads that end) takes the same
//! memory again instead of spending the reserve.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};

use super::mem::limit::{map_private, room_to_grow, try_map_private};
use super::mem::{raw_mmap, raw_mremap, raw_munmap};

pub use super::mem::limit::{refused, short_of_memory};

/// Block sizes of the classes (multiples of 16; the powers of two among
/// them are aligned to their size up to a page).
const CLASSES: [usize; 40] = [
    16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
    1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336,
    16384, 20480, 24576, 28672, 32768,
];

/// Blocks above this size are mappings of their own.
pub const LARGEST_CLASS: usize = 32768;

/// Bytes of a slab (a class's blocks are carved from these).
const SLAB: usize = 64 << 10;

/// Bytes of a chunk (slabs are carved from these, one mapping for
/// sixteen slabs).
const CHUNK: usize = 16 * SLAB;

const PAGE: usize = 4096;

/// A free block (its first word links the next).
struct FreeBlock {
    next: *mut FreeBlock,
}

struct Class {
    free: *mut FreeBlock,
    /// The unused rest of the class's current slab: [bump, end).
    bump: usize,
    end: usize,
}

struct Heap {
    classes: [Class; CLASSES.len()],
    /// Freed ranges of the reserve, (start, bytes); bytes 0: unused.
    reusable: [(usize, usize); REUSABLE_SLOTS],
    /// The unused rest of the current chunk: [chunk_next, chunk_end).
    chunk_next: usize,
    chunk_end: usize,
}

/// Freed ranges of the reserve kept for reuse at most (a range that finds
/// no slot is lost, the smallest one first).
pub const REUSABLE_SLOTS: usize = 64;

static LOCK: AtomicBool = AtomicBool::new(false);

/// Guarded by `LOCK`.
static mut HEAP: Heap = Heap {
    classes: [const {
        Class {
            free: std::ptr::null_mut(),
            bump: 0,
            end: 0,
        }
    }; CLASSES.len()],
    reusable: [(0, 0); REUSABLE_SLOTS],
    chunk_next: 0,
    chunk_end: 0,
};

/// Runs `f` on the heap under the lock.
fn locked<R>(f: impl FnOnce(&mut Heap) -> R) -> R {
    let mut spins = 0u32;
    while LOCK
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        spins += 1;
        if spins > 64 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    // SAFETY: the lock gives this thread the only access to HEAP until it
    // is released below.
    let r = f(unsafe { &mut *std::ptr::addr_of_mut!(HEAP) });
    LOCK.store(false, Release);
    r
}

/// True while some thread holds the heap's lock (async-signal-safe).
pub fn lock_held() -> bool {
    LOCK.load(Acquire)
}

/// The class of a block of `size` bytes aligned to `align`, if it fits
/// one.
fn class_of(size: usize, align: usize) -> Option<usize> {
    let size = size.max(1);
    let wanted = if align <= 16 {
        size
    } else if align <= PAGE {
        // A power-of-two class at least `align`: its blocks lie at
        // multiples of their size from a page-aligned slab.
        size.max(align).checked_next_power_of_two()?
    } else {
        return None;
    };
    if wanted > LARGEST_CLASS {
        return None;
    }
    let c = if wanted <= 128 {
        wanted.div_ceil(16) - 1
    } else {
        CLASSES.partition_point(|&c| c < wanted)
    };
    (CLASSES[c] % align.max(16) == 0 || align <= 16).then_some(c)
}

/// Bytes of address space kept for when the kernel refuses mappings.
pub const RESERVE: usize = 16 << 20;

/// The reserve under an address-space limit (`ulimit -v`) is a 32nd of
/// it, between this and [`RESERVE`]: twice [`KEPT`], so that writing the
/// profiles (of tables made smaller under the limit too) keeps its share.
pub const LIMITED_RESERVE_MIN: usize = 2 * KEPT;

/// Bytes of the reserve: [`RESERVE`], or under an address-space limit of
/// `limit` bytes a 32nd of it (page-rounded), at least
/// [`LIMITED_RESERVE_MIN`].
pub fn reserve_bytes(limit: Option<u64>) -> usize {
    match limit {
        None => RESERVE,
        Some(limit) => {
            let share = usize::try_from(limit / 32).unwrap_or(RESERVE) & !(PAGE - 1);
            share.clamp(LIMITED_RESERVE_MIN, RESERVE)
        }
    }
}

/// The reserve: [start, end) mapped, [next, end) never handed out yet
/// (0 before [`map_reserve`]).
static RESERVE_START: AtomicUsize = AtomicUsize::new(0);
static RESERVE_NEXT: AtomicUsize = AtomicUsize::new(0);
static RESERVE_END: AtomicUsize = AtomicUsize::new(0);
/// Bytes in the heap's `reusable` ranges.
static REUSABLE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Maps the reserve (once, at load; without it a refused mapping is a
/// failed allocation). `MAP_NORESERVE`: address space only, until used.
pub fn map_reserve() {
    if RESERVE_END.load(Acquire) != 0 {
        return;
    }
    let bytes = reserve_bytes(super::address_space_limit());
    if let Some(p) = raw_mmap(
        0,
        bytes,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    ) {
        RESERVE_START.store(p as usize, Release);
        RESERVE_NEXT.store(p as usize, Release);
        RESERVE_END.store(p as usize + bytes, Release);
    }
}

/// Bytes of the reserve still free: never handed out, or freed and kept
/// for reuse.
pub fn reserve_left() -> usize {
    let next = RESERVE_NEXT.load(Acquire);
    if next == 0 {
        return 0;
    }
    RESERVE_END.load(Acquire).saturating_sub(next) + REUSABLE_BYTES.load(Relaxed)
}

/// True if `p` lies in the reserve.
fn in_reserve(p: usize) -> bool {
    let start = RESERVE_START.load(Acquire);
    start != 0 && p >= start && p < RESERVE_END.load(Acquire)
}

/// `bytes` (page multiple) from the reserve's freed ranges (the smallest
/// that fits), zeroed as a fresh mapping is; null when none fits.
fn reuse(bytes: usize) -> *mut u8 {
    if REUSABLE_BYTES.load(Relaxed) < bytes {
        return std::ptr::null_mut();
    }
    let p = locked(|heap| {
        let best = heap
            .reusable
            .iter_mut()
            .filter(|r| r.1 >= bytes)
            .min_by_key(|r| r.1)?;
        let p = best.0;
        best.0 += bytes;
        best.1 -= bytes;
        if best.1 == 0 {
            best.0 = 0;
        }
        REUSABLE_BYTES.fetch_sub(bytes, Relaxed);
        Some(p)
    });
    match p {
        Some(p) => {
            // SAFETY: a freed range of the reserve (mapped, ours alone now).
            unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes) };
            p as *mut u8
        }
        None => std::ptr::null_mut(),
    }
}

/// Keeps the freed range [p, p + bytes) of the reserve for [`reuse`],
/// joined with a kept neighbour (a range that finds no slot replaces the
/// smallest kept one if it is larger, else it is lost).
fn keep_for_reuse(p: usize, bytes: usize) {
    locked(|heap| {
        let slots = &mut heap.reusable;
        let mut range = (p, bytes);
        // Join the ranges just below and just above.
        for slot in slots.iter_mut().filter(|r| r.1 != 0) {
            if slot.0 + slot.1 == range.0 {
                range = (slot.0, slot.1 + range.1);
                REUSABLE_BYTES.fetch_sub(slot.1, Relaxed);
                *slot = (0, 0);
            } else if range.0 + range.1 == slot.0 {
                range.1 += slot.1;
                REUSABLE_BYTES.fetch_sub(slot.1, Relaxed);
                *slot = (0, 0);
            }
        }
        if let Some(slot) = slots.iter_mut().min_by_key(|r| r.1) {
            if slot.1 < range.1 {
                REUSABLE_BYTES.fetch_sub(slot.1, Relaxed);
                *slot = range;
                REUSABLE_BYTES.fetch_add(range.1, Relaxed);
            }
        }
    });
}

/// Bytes of the reserve that work that can do without memory leaves for
/// writing the profiles ([`can_spare`]).
pub const KEPT: usize = 4 << 20;

/// True if work that can do without memory (a longer allocation log)
/// may take `bytes` more: always while the kernel grants mappings; once
/// it refused one, only while the reserve keeps [`KEPT`] bytes after it.
pub fn can_spare(bytes: usize) -> bool {
    !short_of_memory() || reserve_left() >= bytes.saturating_add(KEPT)
}

/// `bytes` (page multiple) from the reserve, page-aligned; null when
/// it is spent.
fn from_reserve(bytes: usize) -> *mut u8 {
    let mut next = RESERVE_NEXT.load(Acquire);
    loop {
        let end = RESERVE_END.load(Acquire);
        if next == 0 || end - next < bytes {
            return std::ptr::null_mut();
        }
        match RESERVE_NEXT.compare_exchange_weak(next, next + bytes, AcqRel, Acquire) {
            Ok(_) => return next as *mut u8,
            Err(now) => next = now,
        }
    }
}

/// `bytes` (page multiple) of the reserve, lock-free: for the crash-mode
/// allocator (`alloc`), which may not take the heap's lock.
pub fn reserve_pages(bytes: usize) -> Option<*mut u8> {
    let p = from_reserve(bytes);
    (!p.is_null()).then_some(p)
}

/// `bytes` (page multiple) of a mapping of their own, else (refused,
/// and recorded: [`refused`]) of the reserve; null when both refuse.
fn map(bytes: usize) -> *mut u8 {
    match map_private(bytes, 0) {
        Some(p) => p,
        None => {
            let p = reuse(bytes);
            if p.is_null() {
                from_reserve(bytes)
            } else {
                p
            }
        }
    }
}

fn page_round(bytes: usize) -> Option<usize> {
    Some(bytes.checked_add(PAGE - 1)? & !(PAGE - 1))
}

/// A block of `size` bytes aligned to `align` (null when the kernel
/// refuses memory).
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    let Some(c) = class_of(size, align) else {
        return alloc_large(size, align);
    };
    let block = CLASSES[c];
    let fresh = locked(|heap| {
        let class = &mut heap.classes[c];
        if !class.free.is_null() {
            let b = class.free;
            // SAFETY: blocks on the list are free blocks of this class,
            // each holding the link to the next.
            class.free = unsafe { (*b).next };
            return Ok(b as *mut u8);
        }
        if class.end - class.bump >= block {
            let b = class.bump;
            class.bump += block;
            return Ok(b as *mut u8);
        }
        Err(())
    });
    if let Ok(p) = fresh {
        return p;
    }
    let slab = new_slab();
    if slab.is_null() {
        return slab;
    }
    locked(|heap| {
        let class = &mut heap.classes[c];
        // The rest of the old slab is given up (less than one block).
        class.bump = slab as usize + block;
        class.end = slab as usize + SLAB;
    });
    slab
}

/// A slab of [`SLAB`] bytes (page-aligned): the next of the current
/// chunk, or the first of a new chunk mapped outside the lock; from
/// [`map`] alone (the reserve) once the kernel refuses a chunk.
fn new_slab() -> *mut u8 {
    let carved = locked(|heap| {
        (heap.chunk_end - heap.chunk_next >= SLAB).then(|| {
            heap.chunk_next += SLAB;
            (heap.chunk_next - SLAB) as *mut u8
        })
    });
    if let Some(slab) = carved {
        return slab;
    }
    let Some(chunk) = try_map_private(CHUNK, 0) else {
        return map(SLAB);
    };
    let (next, end) = (chunk as usize + SLAB, chunk as usize + CHUNK);
    locked(|heap| {
        // Another thread may have mapped a chunk meanwhile: the one with
        // more room left stays current, the other's rest is given up.
        if heap.chunk_end - heap.chunk_next < end - next {
            heap.chunk_next = next;
            heap.chunk_end = end;
        }
    });
    chunk
}

fn alloc_large(size: usize, align: usize) -> *mut u8 {
    let Some(bytes) = page_round(size.max(1)) else {
        return std::ptr::null_mut();
    };
    if align <= PAGE {
        return map(bytes);
    }
    // Over-aligned: map more, keep the aligned part.
    let Some(total) = bytes.checked_add(align) else {
        return std::ptr::null_mut();
    };
    let p = map(total) as usize;
    if p == 0 {
        return std::ptr::null_mut();
    }
    let start = (p + align - 1) & !(align - 1);
    if start > p {
        raw_munmap(p as u64, start - p);
    }
    let tail = p + total - (start + bytes);
    if tail > 0 {
        raw_munmap((start + bytes) as u64, tail);
    }
    start as *mut u8
}

/// Frees a block of [`alloc`] with the same size and alignment.
///
/// # Safety
/// `p` came from [`alloc`] (or [`realloc`]) with this `size` and `align`
/// and is not used after.
pub unsafe fn dealloc(p: *mut u8, size: usize, align: usize) {
    if p.is_null() {
        return;
    }
    let Some(c) = class_of(size, align) else {
        if let Some(bytes) = page_round(size.max(1)) {
            if in_reserve(p as usize) {
                keep_for_reuse(p as usize, bytes);
            } else {
                raw_munmap(p as u64, bytes);
            }
        }
        return;
    };
    locked(|heap| {
        let class = &mut heap.classes[c];
        let b = p as *mut FreeBlock;
        // SAFETY: the block is ours and free now; a class block holds at
        // least one pointer (16 bytes or more, aligned to 16).
        unsafe { (*b).next = class.free };
        class.free = b;
    });
}

/// Resizes a block of [`alloc`] to `new_size` bytes (same alignment),
/// keeping its contents up to the smaller size; null (the old block
/// untouched) when memory is refused.
///
/// # Safety
/// As [`dealloc`] for `p`, `size` and `align`.
pub unsafe fn realloc(p: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
    let (old_class, new_class) = (class_of(size, align), class_of(new_size, align));
    match (old_class, new_class) {
        (Some(a), Some(b)) if a == b => return p,
        // (A block of the reserve is never remapped: its pages stay the
        // reserve's.)
        (None, None) if align <= PAGE && !in_reserve(p as usize) => {
            let (Some(old), Some(new)) = (page_round(size.max(1)), page_round(new_size.max(1)))
            else {
                return std::ptr::null_mut();
            };
            if old == new {
                return p;
            }
            // (Refused, or no room for it under an address-space limit:
            // a new block and a copy, perhaps from the reserve.)
            if new < old || room_to_grow(new - old) {
                if let Some(moved) = raw_mremap(p as u64, old, new, libc::MREMAP_MAYMOVE, 0) {
                    return moved;
                }
            }
        }
        _ => {}
    }
    let new = alloc(new_size, align);
    if !new.is_null() {
        // SAFETY: both blocks are live and distinct; the copy stays inside
        // the smaller one.
        unsafe {
            std::ptr::copy_nonoverlapping(p, new, size.min(new_size));
            dealloc(p, size, align);
        }
    }
    new
}

/// In a forked child: a thread of the parent may have held the lock (in
/// the middle of a list update) when the process forked. The child then
/// forgets every free list, slab and chunk (their memory stays mapped,
/// unused)
/// and frees the lock.
pub fn reset_after_fork() {
    if LOCK.load(Relaxed) {
        // SAFETY: the child has one thread, this one, and the holder of
        // the lock does not exist here: nothing else uses HEAP.
        let heap = unsafe { &mut *std::ptr::addr_of_mut!(HEAP) };
        for class in &mut heap.classes {
            *class = Class {
                free: std::ptr::null_mut(),
                bump: 0,
                end: 0,
            };
        }
        heap.reusable = [(0, 0); REUSABLE_SLOTS];
        REUSABLE_BYTES.store(0, Relaxed);
        heap.chunk_next = 0;
        heap.chunk_end = 0;
        LOCK.store(false, Release);
    }
}

thread_local! {
    /// Set while the library calls into glibc code that allocates with
    /// `malloc` (`pthread_getattr_np`), and for good on the library's own
    /// helper thread: the hooks then serve those calls from this heap
    /// ([`c_malloc`] ...), so that the library makes glibc create no arena
    /// on a program thread that never allocates, nor on its helper.
    static SERVE_LIBC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with glibc's own allocations on this thread served by this
/// heap ([`serving_libc`]).
pub fn with_libc_served<R>(f: impl FnOnce() -> R) -> R {
    let outer = SERVE_LIBC.with(|s| s.replace(true));
    let r = f();
    SERVE_LIBC.with(|s| s.set(outer));
    r
}

/// Serves glibc's allocations on the calling thread (the library's own
/// helper thread) from this heap for the rest of its life.
pub fn serve_libc_on_this_thread() {
    SERVE_LIBC.with(|s| s.set(true));
}

/// True where glibc's allocations on this thread come from this heap.
pub fn serving_libc() -> bool {
    SERVE_LIBC.with(|s| s.get())
}

/// C-style blocks: a header before the block holds its size and a check
/// word, so that `free` and `realloc` (from any thread) tell them from the
/// program allocator's blocks ([`is_c_block`]). The word before a block is
/// read only when it lies on the block's own page: another allocator's
/// block may start a page whose predecessor is unmapped. So a C-style
/// block never starts a page: its header is 16 bytes, or 32 where 16
/// would put the block at a page boundary.
const HEADER: usize = 16;
const CHECK: usize = 0x6870_6372_756e_2d68; // "hpcrun-h"

/// True if `p` is a block of [`c_malloc`] (false for the program
/// allocator's blocks).
///
/// # Safety
/// `p` is a live block of [`c_malloc`] or of the program's allocator (not
/// null): the byte at `p` is mapped (or `p` starts a page).
pub unsafe fn is_c_block(p: *const u8) -> bool {
    if (p as usize) % PAGE < 8 {
        // Never one of ours; the word before may be on an unmapped page.
        return false;
    }
    // The word before the block is outside what the allocator handed out
    // (the compiler must not assume it unreadable: a plain address and a
    // volatile read).
    let word = (p as usize).wrapping_sub(8) as *const usize;
    // SAFETY: the word lies on `p`'s own page (checked above), which is
    // mapped: `p` is a live block that does not start the page.
    unsafe { word.read_volatile() == CHECK ^ p as usize }
}

/// `malloc` from this heap.
pub fn c_malloc(size: usize) -> *mut u8 {
    let Some(total) = size.checked_add(2 * HEADER) else {
        return std::ptr::null_mut();
    };
    let base = alloc(total, 16);
    if base.is_null() {
        return base;
    }
    let offset = if (base as usize + HEADER) % PAGE == 0 {
        2 * HEADER
    } else {
        HEADER
    };
    // SAFETY: the block has `total` bytes, aligned to 16: the header and
    // `size` bytes fit after `offset`.
    unsafe {
        let p = base.add(offset);
        (p.sub(HEADER) as *mut usize).write(size << 6 | offset);
        (p.sub(8) as *mut usize).write(CHECK ^ p as usize);
        p
    }
}

/// The (base, size asked for) of a [`c_malloc`] block.
///
/// # Safety
/// `p` came from [`c_malloc`]/[`c_realloc`], not freed yet.
unsafe fn c_header(p: *mut u8) -> (*mut u8, usize) {
    // SAFETY: per the contract, the header precedes `p`.
    let word = unsafe { (p.sub(HEADER) as *const usize).read() };
    let offset = word & 63;
    // SAFETY: `offset` bytes before `p` is the block's base.
    (unsafe { p.sub(offset) }, word >> 6)
}

/// `free` of a [`c_malloc`] block.
///
/// # Safety
/// `p` came from [`c_malloc`]/[`c_realloc`] ([`is_c_block`]), not freed
/// yet.
pub unsafe fn c_free(p: *mut u8) {
    // SAFETY: per the contract, the header precedes `p`.
    unsafe {
        let (base, size) = c_header(p);
        (p.sub(8) as *mut usize).write(0);
        dealloc(base, size + 2 * HEADER, 16);
    }
}

/// `realloc` of a [`c_malloc`] block.
///
/// # Safety
/// As [`c_free`].
pub unsafe fn c_realloc(p: *mut u8, size: usize) -> *mut u8 {
    let new = c_malloc(size);
    if !new.is_null() {
        // SAFETY: per the contract; the copy stays inside both blocks.
        unsafe {
            let (_, old) = c_header(p);
            std::ptr::copy_nonoverlapping(p, new, old.min(size));
            c_free(p);
        }
    }
    new
}

#[cfg(test)]
mod tests;
