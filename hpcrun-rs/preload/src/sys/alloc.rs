//! The library's own allocator: its heap (`heap`, never glibc's allocator
//! nor the malloc hooks), with a crash mode on private mappings; the real
//! allocation functions for the hooks (glibc's `__libc_*` entry points);
//! and the count of allocations made while a sample handler runs.

use super::mem::raw_mmap;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
}

/// Allocations requested while a sample handler ran on the same thread
/// (through the library's allocator or the malloc hooks). Must stay 0: it
/// is written into every profile and checked by the tests.
pub static ALLOCATIONS_IN_HANDLER: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

std::thread_local! {
    /// The calling thread's "inside a sample handler" flag (the handler
    /// sets and clears it; `threads` registers it when it creates the
    /// thread's state). Const-initialised, no destructor: readable from
    /// the allocator at any time, also during thread teardown.
    static HANDLER_FLAG: std::cell::Cell<Option<&'static std::sync::atomic::AtomicBool>> =
        const { std::cell::Cell::new(None) };
}

/// Registers (or with `None` forgets) the calling thread's in-handler flag,
/// read by [`note_allocation`].
pub fn set_handler_flag(flag: Option<&'static std::sync::atomic::AtomicBool>) {
    HANDLER_FLAG.with(|f| f.set(flag));
}

/// Counts an allocation if the calling thread is inside the handler.
#[inline]
pub fn note_allocation() {
    if HANDLER_FLAG
        .with(|f| f.get())
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    {
        ALLOCATIONS_IN_HANDLER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The library's allocator: its own heap (`heap`: size classes on private
/// mappings), never glibc's allocator nor the hooks, so that the library
/// makes glibc create no arena on a thread of the program.
///
/// In *crash mode* (set while flushing profiles from a fatal-signal
/// handler, when the interrupted code may hold the heap's lock or have
/// corrupted memory) it allocates from fresh anonymous mappings instead
/// and never frees.
pub struct LibraryAllocator;

static CRASH_MODE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static CRASH_NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static CRASH_END: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Switches the library's allocator to crash mode for the rest of the
/// process's life.
pub fn enter_crash_mode() {
    CRASH_MODE.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn crash_alloc(layout: Layout) -> *mut u8 {
    use std::sync::atomic::Ordering::SeqCst;
    const CHUNK: usize = 64 << 20;
    let align = layout.align().max(16) as u64;
    loop {
        let next = CRASH_NEXT.load(SeqCst);
        let start = (next + align - 1) & !(align - 1);
        let end = start + layout.size() as u64;
        if next != 0 && end <= CRASH_END.load(SeqCst) {
            if CRASH_NEXT
                .compare_exchange(next, end, SeqCst, SeqCst)
                .is_ok()
            {
                return start as *mut u8;
            }
            continue;
        }
        let size = CHUNK.max(layout.size() + align as usize);
        let Some(p) = raw_mmap(
            0,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        ) else {
            return std::ptr::null_mut();
        };
        CRASH_END.store(p as u64 + size as u64, SeqCst);
        CRASH_NEXT.store(p as u64, SeqCst);
    }
}

/// True once a fatal signal switched the allocator to private mappings.
pub fn in_crash_mode() -> bool {
    CRASH_MODE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts an allocation (see [`note_allocation`]); in crash mode, makes it
/// from private mappings.
#[inline]
fn counted_crash_alloc(layout: Layout) -> Option<*mut u8> {
    note_allocation();
    in_crash_mode().then(|| crash_alloc(layout))
}

// SAFETY: `heap` implements the allocator's contract (blocks of at least
// the size asked, aligned as asked, freed and resized with their layout).
unsafe impl GlobalAlloc for LibraryAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(p) = counted_crash_alloc(layout) {
            return p;
        }
        super::heap::alloc(layout.size(), layout.align())
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if let Some(p) = counted_crash_alloc(layout) {
            // Fresh anonymous pages are zero.
            return p;
        }
        let p = super::heap::alloc(layout.size(), layout.align());
        if !p.is_null() && layout.size() <= super::heap::LARGEST_CLASS {
            // SAFETY: a block of at least `layout.size()` bytes (larger
            // ones are fresh mappings, zero already).
            unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_crash_mode() {
            return; // Leaked: the process is about to die.
        }
        // SAFETY: `ptr` came from this allocator with `layout` (a block
        // from crash mode is never freed: the flag never goes back).
        unsafe { super::heap::dealloc(ptr, layout.size(), layout.align()) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe {
            if in_crash_mode() {
                let new = crash_alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                }
                return new;
            }
            super::heap::realloc(ptr, layout.size(), layout.align(), new_size)
        }
    }
}

/// glibc's own `malloc_usable_size`, looked up in libc.so.6 (not whatever
/// the program or another preloaded library defines under that name: the
/// real allocator of the hooks is glibc's). 0 until [`resolve_usable_size`].
static USABLE_SIZE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Looks up glibc's `malloc_usable_size` (at load; false if not found, and
/// [`usable_size`] then always says `None`).
pub fn resolve_usable_size() -> bool {
    // SAFETY: dlopen with RTLD_NOLOAD only returns a handle to a library
    // that is already loaded (libc, which this library links); dlsym on
    // that handle reads the loader's tables; the handle is released.
    let f = unsafe {
        let handle = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return false;
        }
        let f = libc::dlsym(handle, c"malloc_usable_size".as_ptr());
        libc::dlclose(handle);
        f
    };
    USABLE_SIZE.store(f as usize, std::sync::atomic::Ordering::Relaxed);
    !f.is_null()
}

/// The usable size of glibc block `p` (at least what was asked for), or
/// `None` if glibc's function was not found.
///
/// # Safety
/// `p` is a live block of glibc's allocator (not null).
pub unsafe fn usable_size(p: *mut c_void) -> Option<usize> {
    let f = USABLE_SIZE.load(std::sync::atomic::Ordering::Relaxed);
    if f == 0 {
        return None;
    }
    // SAFETY: `f` is glibc's malloc_usable_size (resolve_usable_size),
    // whose only precondition, a live glibc block, is the caller's.
    unsafe {
        let f: unsafe extern "C" fn(*mut c_void) -> usize = std::mem::transmute(f);
        Some(f(p))
    }
}

/// The real allocator, for the hooks.
pub mod real {
    use super::*;
    // Inside `heap::with_libc_served` (the library's own calls into
    // glibc code that allocates), the blocks come from the library's heap.
    use super::super::heap;
    pub fn malloc(size: usize) -> *mut c_void {
        if heap::serving_libc() {
            return heap::c_malloc(size) as *mut c_void;
        }
        // SAFETY: glibc's malloc has no preconditions.
        unsafe { __libc_malloc(size) }
    }
    pub fn calloc(n: usize, size: usize) -> *mut c_void {
        if heap::serving_libc() {
            let Some(bytes) = n.checked_mul(size) else {
                return std::ptr::null_mut();
            };
            let p = heap::c_malloc(bytes);
            if !p.is_null() {
                // SAFETY: a fresh block of `bytes` bytes.
                unsafe { std::ptr::write_bytes(p, 0, bytes) };
            }
            return p as *mut c_void;
        }
        // SAFETY: glibc's calloc checks the multiplication itself.
        unsafe { __libc_calloc(n, size) }
    }
    /// # Safety
    /// `p` is null or a live block of glibc's allocator or of the
    /// library's heap (`heap::c_malloc`: glibc's own allocations inside
    /// the library's calls).
    pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        // SAFETY: per the caller's contract.
        unsafe {
            if p.is_null() {
                return malloc(size);
            }
            if heap::is_c_block(p as *const u8) {
                return heap::c_realloc(p as *mut u8, size) as *mut c_void;
            }
            __libc_realloc(p, size)
        }
    }
    /// # Safety
    /// As [`realloc`].
    pub unsafe fn free(p: *mut c_void) {
        // SAFETY: per the caller's contract.
        unsafe {
            if p.is_null() {
                return;
            }
            if heap::is_c_block(p as *const u8) {
                return heap::c_free(p as *mut u8);
            }
            __libc_free(p)
        }
    }
    pub fn memalign(align: usize, size: usize) -> *mut c_void {
        // SAFETY: glibc's memalign validates `align`.
        unsafe { __libc_memalign(align, size) }
    }
    pub fn valloc(size: usize) -> *mut c_void {
        // SAFETY: no preconditions.
        unsafe { __libc_valloc(size) }
    }
    pub fn pvalloc(size: usize) -> *mut c_void {
        // SAFETY: no preconditions.
        unsafe { __libc_pvalloc(size) }
    }
}
