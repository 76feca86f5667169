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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

thread_local! {
    /// The memory the calling thread's allocations come from while a
    /// value is built: [FIRST, END), the unused part [NEXT, END); END 0
    /// when none. Const-initialised, no destructor: readable from the
    /// allocator at any time. Atomics, not cells: a signal handler that
    /// interrupts this thread's [`serve`] and allocates too (or builds a
    /// value of its own, restoring the window before it returns) makes the
    /// interrupted bump retry instead of handing out the handler's block
    /// again.
    static FIRST: AtomicUsize = const { AtomicUsize::new(0) };
    static NEXT: AtomicUsize = const { AtomicUsize::new(0) };
    static END: AtomicUsize = const { AtomicUsize::new(0) };
    /// Set when an allocation did not fit the memory being served.
    static OVERFLOWED: AtomicBool = const { AtomicBool::new(false) };
}

/// The serving window: (first, next, end).
fn window() -> (usize, usize, usize) {
    (
        FIRST.with(|f| f.load(Relaxed)),
        NEXT.with(|n| n.load(Relaxed)),
        END.with(|e| e.load(Relaxed)),
    )
}

/// Sets the serving window, closed while it changes (END 0 first, last
/// set).
fn set_window((first, next, end): (usize, usize, usize)) {
    END.with(|e| e.store(0, Relaxed));
    FIRST.with(|f| f.store(first, Relaxed));
    NEXT.with(|n| n.store(next, Relaxed));
    END.with(|e| e.store(end, Relaxed));
}

/// A block of `size` bytes aligned to `align` from the memory the calling
/// thread is building a value in, if it is building one and the block
/// fits (`None` otherwise: the allocator's usual path). Async-signal-safe.
#[inline]
pub fn serve(size: usize, align: usize) -> Option<*mut u8> {
    let end = END.with(|e| e.load(Relaxed));
    if end == 0 {
        return None;
    }
    NEXT.with(|n| {
        let mut next = n.load(Relaxed);
        loop {
            let start = next.checked_add(align - 1)? & !(align - 1);
            match start.checked_add(size.max(1)) {
                Some(stop) if stop <= end => {
                    match n.compare_exchange(next, stop, Relaxed, Relaxed) {
                        Ok(_) => return Some(start as *mut u8),
                        // A handler of this thread took memory meanwhile.
                        Err(now) => next = now,
                    }
                }
                _ => {
                    OVERFLOWED.with(|o| o.store(true, Relaxed));
                    return None;
                }
            }
        }
    })
}

/// True if `p` lies in the memory the calling thread is building a value
/// in (a block served there is never given to the heap's free lists).
#[inline]
pub fn serving(p: *mut u8) -> bool {
    let (first, _, end) = window();
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
            let outer = window();
            set_window((start, start, end));
            let outer_overflow = OVERFLOWED.with(|o| o.swap(false, Relaxed));
            let value = make();
            // Whatever the memory has left is not used again: the value's
            // blocks are never freed.
            set_window(outer);
            let overflowed = OVERFLOWED.with(|o| o.swap(outer_overflow, Relaxed));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A value built while another is being built (a signal handler's
    /// cache, built in the middle of a hook's) takes its blocks from its
    /// own memory; the outer value's next block follows its earlier ones,
    /// never overlapping what was handed out.
    #[test]
    fn nested_values_take_blocks_from_their_own_memory() {
        let outer = Prepared::<Vec<(usize, usize)>>::new(4096).unwrap();
        let inner = Prepared::<usize>::new(4096).unwrap();
        let (o_lo, o_hi) = outer.memory;
        let (i_lo, i_hi) = inner.memory;
        // SAFETY: this test's own values, used by this thread only.
        let blocks = unsafe {
            &*outer.get(|| {
                let a = serve(100, 8).unwrap() as usize;
                let nested = *inner.get(|| serve(64, 16).unwrap() as usize);
                let b = serve(100, 8).unwrap() as usize;
                vec![(a, b), (nested, 0)]
            })
        };
        let (a, b) = blocks[0];
        let nested = blocks[1].0;
        assert!((o_lo..o_hi).contains(&a) && (o_lo..o_hi).contains(&b));
        assert!(b >= a + 100, "{a:#x} {b:#x}");
        assert!((i_lo..i_hi).contains(&nested) && nested % 16 == 0);
        assert!(outer.fits() && inner.fits());
        // Outside any value's construction nothing is served.
        assert!(serve(8, 8).is_none());
        assert!(!serving(a as *mut u8));
    }
}
