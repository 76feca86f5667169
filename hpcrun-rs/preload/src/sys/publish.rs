//! [`Published`]: a value replaced now and then (the module snapshot, the
//! unwinder) and read without locks from any thread and from signal
//! handlers; and the read sections ([`reading`]) that say when a replaced
//! value can be freed.
//!
//! Readers (the sample handler, the allocation hooks) open a read section
//! and use what [`Published::get`] returns only inside it. A replaced value
//! is retired, and freed by a later publication once no section that could
//! have seen it is still open. Before this, replaced values were leaked: an
//! MPI process replaces the module snapshot and the unwinder at each of its
//! 100-200 `dlopen`/`dlclose` calls, about 25 KB each, and every leaked
//! page was a page fault.
//!
//! The scheme: an epoch counter, and per epoch parity a count of open
//! sections (striped over cache lines, so that threads do not share one).
//! A section counts itself in the parity of the epoch it read, then checks
//! that the epoch has not moved (else it uncounts and retries): while the
//! epoch is E, every counted section has epoch E-1 or E. The epoch moves
//! from E to E+1 only when no section of E-1 is counted. A value replaced
//! while the epoch was E can only be held by sections opened before the
//! replacement (epoch at most E); once the epoch reaches E+2 every open
//! section has epoch E+1 or E+2, so none holds it, and it is freed.
//!
//! Readers pay two atomic additions and take no lock; writers never wait,
//! except in [`wait_for_readers`], which is bounded. A section that never
//! closes (a thread killed inside a handler) stops reclamation: values are
//! then kept forever, as they were before, never freed early. A forked
//! child forgets the parent's other threads' sections.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use super::mem::ZeroInit;
use super::proc::monotonic_ns;

/// Stripes of the open-section counts, per parity.
const STRIPES: usize = 16;

/// One count on a cache line of its own.
#[repr(align(64))]
struct Stripe(AtomicUsize);

#[allow(clippy::declare_interior_mutable_const)] // only to build the static
const CLOSED: Stripe = Stripe(AtomicUsize::new(0));
#[allow(clippy::declare_interior_mutable_const)]
const ROW: [Stripe; STRIPES] = [CLOSED; STRIPES];

/// The epoch and, per parity of the epoch, the open sections.
static EPOCH: AtomicU64 = AtomicU64::new(0);
static OPEN: [[Stripe; STRIPES]; 2] = [ROW; 2];

/// Replaced values not freed yet, with the epoch when they were replaced.
type Retired = Vec<(u64, Box<dyn Send>)>;
static RETIRED: Mutex<Retired> = Mutex::new(Vec::new());

/// An open read section; closed when dropped.
pub struct Reading {
    count: &'static AtomicUsize,
}

/// Opens a read section: values [`Published::get`] returns stay valid
/// until it is dropped. Async-signal-safe (atomics only), nests.
pub fn reading() -> Reading {
    // Threads' stacks lie apart: the address of a local picks the stripe.
    let marker = 0u8;
    let address = std::ptr::addr_of!(marker) as u64;
    let stripe = ((address >> 12).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % STRIPES;
    loop {
        let epoch = EPOCH.load(SeqCst);
        let count = &OPEN[(epoch & 1) as usize][stripe].0;
        count.fetch_add(1, SeqCst);
        if EPOCH.load(SeqCst) == epoch {
            return Reading { count };
        }
        count.fetch_sub(1, SeqCst);
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.count.fetch_sub(1, SeqCst);
    }
}

/// In a forked child: forgets the sections other threads of the parent
/// had open (they do not exist here), which would otherwise hold
/// reclamation and make every `dlclose` wait its limit. The calling thread
/// must have none open.
pub fn reset_readers_after_fork() {
    // Only an open count is written: a page the child only reads stays
    // shared with the parent (no copy-on-write fault in a child that
    // execs at once).
    for stripe in OPEN.iter().flatten() {
        if stripe.0.load(SeqCst) != 0 {
            stripe.0.store(0, SeqCst);
        }
    }
}

/// Moves the epoch on by one if no section of the epoch before it is
/// open; false if one is.
fn try_advance() -> bool {
    let epoch = EPOCH.load(SeqCst);
    // Sections of epoch-1 are counted in the parity epoch+1 will use.
    let older = &OPEN[((epoch + 1) & 1) as usize];
    if older.iter().any(|s| s.0.load(SeqCst) != 0) {
        return false;
    }
    // A concurrent advance makes this one fail: each step is checked.
    EPOCH
        .compare_exchange(epoch, epoch + 1, SeqCst, SeqCst)
        .is_ok()
}

/// Advances the epoch as far as open sections allow (two steps free
/// everything retired so far) and frees what no section can hold.
fn collect(retired: &mut Retired) {
    for _ in 0..2 {
        if !try_advance() {
            break;
        }
    }
    let now = EPOCH.load(SeqCst);
    retired.retain(|(replaced, _)| replaced + 2 > now);
}

/// Keeps `value` until no section can hold it.
fn retire(value: Box<dyn Send>) {
    // The epoch is read after the replacement: a later epoch only delays.
    let replaced = EPOCH.load(SeqCst);
    let mut retired = RETIRED.lock().unwrap_or_else(|e| e.into_inner());
    retired.push((replaced, value));
    collect(&mut retired);
}

/// Frees the retired values no section can hold any more.
fn reclaim() {
    collect(&mut RETIRED.lock().unwrap_or_else(|e| e.into_inner()));
}

/// Waits (yielding the CPU) until every read section open at the call has
/// closed, at most `limit_ns`; true if they all closed. Must not be called
/// inside a read section.
pub fn wait_for_readers(limit_ns: u64) -> bool {
    let target = EPOCH.load(SeqCst) + 2;
    let start = monotonic_ns();
    loop {
        while EPOCH.load(SeqCst) < target && try_advance() {}
        if EPOCH.load(SeqCst) >= target {
            reclaim();
            return true;
        }
        if monotonic_ns().saturating_sub(start) > limit_ns {
            return false;
        }
        std::thread::yield_now();
    }
}

/// A value published now and then and read from any thread and from
/// signal handlers (see the module overview).
pub struct Published<T>(AtomicPtr<T>);

impl<T> Published<T> {
    pub const fn new() -> Self {
        Published(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// Makes `value` the current value for good: it is never freed, and the
    /// one it replaces (if any) is left as it was, never freed either. For
    /// values read outside read sections (the per-thread states, published
    /// once per slot and reused only in a forked child).
    pub fn publish_leaked(&self, value: T) -> &'static T {
        let leaked: &'static mut T = Box::leak(Box::new(value));
        self.0.store(leaked, SeqCst);
        leaked
    }

    /// Makes `value` the value for good if there is none yet (first one
    /// wins; the loser is dropped); returns the value now held. Never
    /// freed, as with [`Published::publish_leaked`] (a `Published` used
    /// with this is never used with [`Published::publish`]). Not for
    /// signal handlers (allocates).
    pub fn publish_leaked_once(&self, value: T) -> &'static T {
        let new = Box::into_raw(Box::new(value));
        match self
            .0
            .compare_exchange(std::ptr::null_mut(), new, SeqCst, SeqCst)
        {
            // SAFETY: `new` is now stored and never freed (a value
            // published this way is never replaced).
            Ok(_) => unsafe { &*new },
            Err(held) => {
                // SAFETY: the exchange failed, so `new` was never shared:
                // this is its only owner. `held` is non-null and, being
                // published with this function, never freed.
                unsafe {
                    drop(Box::from_raw(new));
                    &*held
                }
            }
        }
    }

    /// The current value. A value from [`Published::publish`] is valid only
    /// while the caller's read section ([`reading`]) is open, although the
    /// type says more; one from [`Published::publish_leaked`], forever.
    pub fn get(&self) -> Option<&'static T> {
        let p = self.0.load(SeqCst);
        // SAFETY: non-null pointers stored here come from `Box::into_raw`
        // or `Box::leak`; a replaced one is freed only by `publish`, after
        // every read section open when it was replaced has closed (module
        // overview), and never by `publish_leaked`.
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

impl<T: Send + 'static> Published<T> {
    /// Makes `value` the current value; the one it replaces is freed once
    /// no read section can hold it. Not for signal handlers (allocates).
    pub fn publish(&self, value: T) {
        let new = Box::into_raw(Box::new(value));
        let old = self.0.swap(new, SeqCst);
        if !old.is_null() {
            // SAFETY: non-null pointers stored here come from
            // `Box::into_raw` above (a `Published` is used either with
            // `publish` or with `publish_leaked`, never both), and the swap
            // took this one out: this is its only owner now (readers only
            // borrow it, inside read sections, which `retire` waits for).
            retire(unsafe { Box::from_raw(old) });
        }
    }
}

// SAFETY: a null AtomicPtr is all zeroes.
unsafe impl<T: Sync> ZeroInit for Published<T> {}

impl<T: Send + 'static> Default for Published<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
    use std::sync::Arc;

    /// Counts its drops, and marks itself dropped before it is freed.
    struct Tracked {
        drops: Arc<AtomicU32>,
        alive: AtomicBool,
    }

    impl Tracked {
        fn new(drops: &Arc<AtomicU32>) -> Self {
            Tracked {
                drops: drops.clone(),
                alive: AtomicBool::new(true),
            }
        }
    }

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.alive.store(false, SeqCst);
            self.drops.fetch_add(1, SeqCst);
        }
    }

    /// A value replaced while a section is open stays until that section
    /// closes; then it is freed.
    #[test]
    fn a_replaced_value_outlives_the_sections_that_could_see_it() {
        static VALUE: Published<Tracked> = Published::new();
        let drops = Arc::new(AtomicU32::new(0));
        VALUE.publish(Tracked::new(&drops));
        let section = reading();
        let seen = VALUE.get().unwrap();
        VALUE.publish(Tracked::new(&drops));
        VALUE.publish(Tracked::new(&drops));
        // However often collection runs, the first value stays.
        for _ in 0..10 {
            reclaim();
        }
        assert!(seen.alive.load(SeqCst));
        assert_eq!(drops.load(SeqCst), 0, "nothing freed under an open section");
        assert!(
            !wait_for_readers(5_000_000),
            "the open section is waited for"
        );
        drop(section);
        assert!(wait_for_readers(10_000_000_000));
        assert_eq!(drops.load(SeqCst), 2, "both replaced values freed");
    }

    /// With no section open, a replaced value is freed at once.
    #[test]
    fn without_readers_a_replaced_value_is_freed() {
        static VALUE: Published<Tracked> = Published::new();
        let drops = Arc::new(AtomicU32::new(0));
        for _ in 0..100 {
            VALUE.publish(Tracked::new(&drops));
        }
        // (Another test's section may delay the frees; it closes.)
        assert!(wait_for_readers(10_000_000_000));
        assert_eq!(drops.load(SeqCst), 99);
        assert!(VALUE.get().unwrap().alive.load(SeqCst));
    }

    /// Readers on several threads, a writer replacing the value as fast as
    /// it can: no reader ever sees a value that was dropped.
    #[test]
    fn readers_never_see_a_freed_value() {
        static VALUE: Published<Tracked> = Published::new();
        let drops = Arc::new(AtomicU32::new(0));
        VALUE.publish(Tracked::new(&drops));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(Relaxed) || reads < 1000 {
                        let _section = reading();
                        let value = VALUE.get().unwrap();
                        for _ in 0..20 {
                            assert!(value.alive.load(SeqCst), "read a dropped value");
                            std::hint::spin_loop();
                        }
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for _ in 0..20_000 {
            VALUE.publish(Tracked::new(&drops));
        }
        stop.store(true, Relaxed);
        for r in readers {
            assert!(r.join().unwrap() >= 1000);
        }
        assert!(wait_for_readers(10_000_000_000));
        assert_eq!(drops.load(SeqCst), 20_000, "every replaced value freed");
    }
}
