//! A thread's body built in place ([`body`]): its tables mapped, its
//! fields written straight into their final memory (zeroed pages carved
//! from the thread's region, `sys::map_uninit`), never built on the stack
//! and copied. The fields valid when zero (the handler's frame buffer and
//! frame table, the counters, the callers' and sites' caches: about 9
//! KiB) are not written at all, so their pages are touched only when a
//! sample or a hook first uses them; the two unwind caches are built at
//! their first use in memory obtained now (`sys::Prepared`,
//! [`ThreadState::handler_cache`], [`ThreadState::hook_cache`]). A
//! short-lived process that takes no sample and tracks no block touches
//! none of those pages.

use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64};

use super::{histogram_slots, ThreadBody, ThreadState, DECODE_CACHE, REUSE_SLOTS};
use crate::cct;
use crate::code::unwind;
use crate::sys;

/// Types of the fields left as the zeroed memory has them (checked at
/// compile time: each is `sys::ZeroInit`).
fn zero_valid<T: sys::ZeroInit>(_: *mut T) {}

/// A new body for thread `index` (the main thread's tree pool mapped
/// whole), inside the caller's `sys::with_region`.
pub(super) fn body(index: u32, tree_capacity: usize) -> Option<&'static ThreadBody> {
    // The main thread's pool is mapped whole: a single-threaded program
    // has no helper thread to map more, and may never allocate.
    let tree = if index == 0 {
        cct::Tree::new_whole(tree_capacity)?
    } else {
        cct::Tree::new(tree_capacity)?
    };
    let histogram = cct::Counts::new(histogram_slots(tree_capacity))?;
    let decode_cache = sys::map_zeroed::<AtomicU64>(DECODE_CACHE * 2)?;
    let ips = crate::access::patterns::IpTable::new()?;
    let sites = crate::access::patterns::SiteTable::new()?;
    let sharing = crate::access::watch::SharingTable::new()?;
    let reuse = cct::Counts::new(REUSE_SLOTS)?;
    let handler_cache = sys::Prepared::new(unwind::CACHE_MEMORY)?;
    let hook_cache = sys::Prepared::new(unwind::CACHE_MEMORY)?;
    let slot = sys::map_uninit::<ThreadBody>()?;
    let b = slot.as_mut_ptr();
    // SAFETY: `b` points to zeroed memory for one ThreadBody that nothing
    // else references; every field is written below except those whose
    // types are valid when zero (`zero_valid`), so the body is fully
    // initialised when `assume_init_ref` is reached.
    #[allow(unsafe_code)]
    unsafe {
        addr_of_mut!((*b).tree).write(tree);
        addr_of_mut!((*b).histogram).write(histogram);
        addr_of_mut!((*b).ips).write(ips);
        addr_of_mut!((*b).sites).write(sites);
        addr_of_mut!((*b).watch).write(Default::default());
        addr_of_mut!((*b).sharing).write(sharing);
        addr_of_mut!((*b).reuse).write(reuse);
        zero_valid::<super::Stats>(addr_of_mut!((*b).stats));
        addr_of_mut!((*b).decode_cache).write(decode_cache);
        addr_of_mut!((*b).perf_fd).write(AtomicI32::new(-1));
        addr_of_mut!((*b).cpu_timer).write(AtomicI32::new(-1));
        addr_of_mut!((*b).clock_limited).write(AtomicBool::new(false));
        addr_of_mut!((*b).fault_fd).write(AtomicI32::new(-1));
        addr_of_mut!((*b).fault_ring).write(std::sync::OnceLock::new());
        addr_of_mut!((*b).fault_progress).write(AtomicBool::new(false));
        addr_of_mut!((*b).fault_idle).write(AtomicU32::new(0));
        addr_of_mut!((*b).fault_last_page).write(AtomicU64::new(0));
        addr_of_mut!((*b).fault_same_page).write(AtomicU32::new(0));
        addr_of_mut!((*b).fault_watch).write(Default::default());
        addr_of_mut!((*b).last_record).write(AtomicU64::new(0));
        addr_of_mut!((*b).in_handler).write(AtomicBool::new(false));
        addr_of_mut!((*b).touched).write(AtomicBool::new(false));
        addr_of_mut!((*b).handler_cache).write(handler_cache);
        // (UnsafeCell<T> has T's layout.)
        zero_valid::<[u64; super::MAX_FRAMES]>(addr_of_mut!((*b).handler_frames).cast());
        zero_valid::<unwind::FrameRanges>(addr_of_mut!((*b).frames_seen));
        zero_valid::<cct::PathCache>(addr_of_mut!((*b).handler_paths).cast());
        addr_of_mut!((*b).hook_cache).write(hook_cache);
        zero_valid::<crate::objects::small_sites::SiteCache>(addr_of_mut!((*b).small_sites).cast());
        addr_of_mut!((*b).hw).write(crate::pmu::sampler::ThreadHw::new());
        addr_of_mut!((*b).slot).write(AtomicU32::new(u32::MAX));
        addr_of_mut!((*b).slot_pid).write(AtomicU32::new(0));
        addr_of_mut!((*b).next_free).write(AtomicPtr::new(std::ptr::null_mut()));
        Some(slot.assume_init_ref())
    }
}

impl ThreadState {
    /// The signal handler's unwind cache, built at the thread's first
    /// sample (in memory obtained at its start: no heap, no lock, no
    /// system call). Call only from this thread's handler, which runs on
    /// the handler stack and is not re-entered (`in_handler`).
    pub fn handler_cache(&self) -> *mut unwind::Cache {
        // SAFETY: used by this thread's handler only, never re-entered
        // (see above): no other use of the cache is under way.
        #[allow(unsafe_code)]
        unsafe {
            self.handler_cache.get(|| self.cache_on_handler_stack())
        }
    }

    /// True once the handler's unwind cache was built.
    pub fn handler_cache_made(&self) -> bool {
        self.handler_cache.made()
    }

    /// The allocation hooks' unwind cache, built at their first unwind
    /// (in memory obtained at the thread's start, so that a kernel that
    /// refuses memory by then cannot reach it). Call only from this
    /// thread's hooks, inside the hook guard (no nested use).
    pub fn hook_cache(&self) -> *mut unwind::Cache {
        // SAFETY: used by this thread's hooks only, inside the hook
        // guard, never by a signal handler: no other use is under way.
        #[allow(unsafe_code)]
        unsafe {
            self.hook_cache.get(|| self.cache_on_handler_stack())
        }
    }

    /// A new unwind cache, built on the handler stack (its unwind context
    /// passes through the stack on its way to its box: 24 KiB, more than
    /// a small thread stack has left).
    fn cache_on_handler_stack(&self) -> unwind::Cache {
        let mut cache = None;
        self.handler_stack
            .run(&mut || cache = Some(unwind::Cache::new_in()));
        cache.unwrap_or_else(unwind::Cache::new_in)
    }
}

#[cfg(test)]
mod tests {
    use crate::code::unwind;
    use crate::sys;

    #[test]
    fn an_unwind_cache_fits_the_memory_obtained_for_it() {
        let slot = sys::Prepared::<unwind::Cache>::new(unwind::CACHE_MEMORY).unwrap();
        assert!(!slot.made());
        // SAFETY: this test's own value, used by this thread only.
        #[allow(unsafe_code)]
        let cache = unsafe { &mut *slot.get(unwind::Cache::new_in) };
        assert!(slot.made());
        assert!(slot.fits(), "an unwind cache takes more than CACHE_MEMORY");
        assert_eq!(cache.stats().total(), 0);
    }
}
