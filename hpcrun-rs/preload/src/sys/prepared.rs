//! A value whose memory is obtained at a thread's start and which is
//! built at its first use ([`Prepared`]): a thread that never uses it
//! touches none of its pages, and a thread that uses it late (after the
//! kernel or a seccomp filter began refusing memory, or in a signal
//! handler) takes nothing from the heap for it.
//!
//! The value's own allocations (framehop's unwind cache keeps its 24 KiB
//! unwind context and 8 KiB rule cache in boxes) are served, while it is
//! built, from the memory obtained at start: the library's allocator
//! asks [`serve`] first ([`super::alloc`]), which hands out the next
//! bytes of that memory, without a lock or a system call, and only on
//! the thread that builds the value. The memory is fresh from `mmap`
//! (zero, untouched): only the pages the construction writes are faulted
//! in. A value that asks for more than the memory holds gets the rest from
//! the heap as any allocation would ([`Prepared::fits`] tells whether it
//! did; the unit tests check that the memory given suffices).
//!
//! The value is never dropped (the state holding it lives as long as the
//! process), so the served blocks are never freed; a block freed while
//! the value is built is simply not reused.

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;

thread_local! {
    /// The memory the calling thread's allocations come from while a
    /// value is built: (start, next, end), the unused part [next, end);
    /// all 0 when none. Const-initialised, no destructor: readable from
    /// the allocator at any time.
    static SERVING: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
    /// Set when an allocation did not fit the memory being served.
    static OVERFLOWED: Cell<bool> = const { Cell::new(false) };
}

/// A block of `size` bytes aligned to `align` from the memory the calling
/// thread is building a value in, if it is building one and the block
/// fits (`None` otherwise: the allocator's usual path). Async-signal-safe.
#[inline]
pub fn serve(size: usize, align: usize) -> Option<*mut u8> {
    let (first, next, end) = SERVING.with(|s| s.get());
    if end == 0 {
        return None;
    }
    let start = next.checked_add(align - 1)? & !(align - 1);
    match start.checked_add(size.max(1)) {
        Some(stop) if stop <= end => {
            SERVING.with(|s| s.set((first, stop, end)));
            Some(start as *mut u8)
        }
        _ => {
            OVERFLOWED.with(|o| o.set(true));
            None
        }
    }
}

/// True if `p` lies in the memory the calling thread is building a value
/// in (a block served there is never given to the heap's free lists).
#[inline]
pub fn serving(p: *mut u8) -> bool {
    let (first, _, end) = SERVING.with(|s| s.get());
    (first..end).contains(&(p as usize))
}

/// A value of `T` built at its first use in memory obtained up front
/// (see the module's overview). Used by one thread at a time only (its
/// owner's: the holder of the value declares it `Sync`).
pub struct Prepared<T> {
    /// The memory for the value's allocations: [start, end).
    memory: (usize, usize),
    /// Set once the value is built.
    made: Cell<bool>,
    /// False if building it took memory beyond `memory`.
    fitted: Cell<bool>,
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Prepared<T> {
    /// A value to be built later, with `bytes` of memory for its
    /// allocations obtained now ([`super::map_zeroed`]: carved from the
    /// thread's table region if one is being set up; no page is touched).
    /// `None` when the kernel refuses the memory.
    pub fn new(bytes: usize) -> Option<Prepared<T>> {
        let memory = super::map_zeroed::<std::sync::atomic::AtomicU64>(bytes.div_ceil(8))?;
        let start = memory.as_ptr() as usize;
        Some(Prepared {
            memory: (start, start + memory.len() * 8),
            made: Cell::new(false),
            fitted: Cell::new(true),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        })
    }

    /// The value, built by `make` now if this is its first use, with the
    /// allocations `make` makes served from the memory obtained at start.
    ///
    /// # Safety
    /// No other call on this value may be under way on any thread (nor
    /// interrupted by the caller, a signal handler), and no reference
    /// from an earlier call may still be in use; the pointer is valid
    /// for as long as `self`.
    pub unsafe fn get(&self, make: impl FnOnce() -> T) -> *mut T {
        let slot = self.value.get();
        if !self.made.get() {
            let (start, end) = self.memory;
            let outer = SERVING.with(|s| s.replace((start, start, end)));
            let outer_overflow = OVERFLOWED.with(|o| o.replace(false));
            let value = make();
            // Whatever the memory has left is not used again: the value's
            // blocks are never freed.
            SERVING.with(|s| s.set(outer));
            let overflowed = OVERFLOWED.with(|o| o.replace(outer_overflow));
            // SAFETY: the caller guarantees exclusive use; the slot is
            // uninitialised until `made` is set just below.
            unsafe { (*slot).write(value) };
            self.fitted.set(!overflowed);
            self.made.set(true);
        }
        // SAFETY: built above or at an earlier call (`made`).
        unsafe { (*slot).as_mut_ptr() }
    }

    /// True once the value was built.
    pub fn made(&self) -> bool {
        self.made.get()
    }

    /// False if building the value took memory beyond what was obtained
    /// at start (from the heap).
    pub fn fits(&self) -> bool {
        self.fitted.get()
    }
}
