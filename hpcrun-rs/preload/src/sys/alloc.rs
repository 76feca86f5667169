//! The library's own allocator: its heap (`heap`, never the program's
//! allocator nor the malloc hooks), with a crash mode on private mappings;
//! the program's allocator for the hooks ([`real`]: the next definitions
//! of the malloc family in symbol lookup order); and the count of
//! allocations made while a sample handler runs.

use super::mem::raw_mmap;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_void};

/// Allocations requested while a sample handler ran on the same thread
/// (through the library's allocator or the malloc hooks). Must stay 0: it
/// is written into every profile and checked by the tests. (A process's
/// first sample may prepare the tables samples need, from the library's
/// heap with its lock free: `threads::lazy`, not counted.)
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
/// The signal that ends the process, whose profiles crash mode writes.
static CRASH_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Switches the library's allocator to crash mode for the rest of the
/// process's life: the profiles are written next, then `signal` ends the
/// process (its default action).
pub fn enter_crash_mode(signal: c_int) {
    CRASH_SIGNAL.store(signal, std::sync::atomic::Ordering::SeqCst);
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
        // A chunk; under an address-space limit that the program filled
        // (what brought it down, often), one just large enough, then the
        // heap's reserve (mapped at load, taken without its lock).
        let least = (layout.size() + align as usize).next_multiple_of(4096);
        let Some((p, size)) = [CHUNK.max(least), least.max(256 << 10), least]
            .into_iter()
            .find_map(|size| Some((crash_map(size)?, size)))
            .or_else(|| {
                let size = least.max(256 << 10);
                [size, least]
                    .into_iter()
                    .find_map(|size| Some((super::heap::reserve_pages(size)?, size)))
            })
        else {
            give_up();
        };
        CRASH_END.store(p as u64 + size as u64, SeqCst);
        CRASH_NEXT.store(p as u64, SeqCst);
    }
}

/// `size` bytes of a private mapping of their own.
fn crash_map(size: usize) -> Option<*mut u8> {
    raw_mmap(
        0,
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    )
}

/// No memory is left to write the profiles after a fatal signal: the
/// process ends now as that signal ends it (its default action), as it
/// would have without the profiler, rather than by the abort that a
/// failed allocation is in Rust. Says so first (no allocation).
fn give_up() -> ! {
    let signal = CRASH_SIGNAL.load(std::sync::atomic::Ordering::SeqCst);
    super::write_message(
        b"hpcrun-rs: no memory left to write the profiles after the program's fatal signal; they are lost\n",
    );
    if signal > 0 {
        super::die_by_default(signal);
        let mut set = super::mask::empty_sigset();
        // SAFETY: `set` is a valid, initialised signal set.
        unsafe { libc::sigaddset(&mut set, signal) };
        super::mask::raw_sigmask(libc::SIG_UNBLOCK, Some(&set), None);
    }
    // (A signal whose default action does not end the process.)
    // SAFETY: ends the process at once.
    unsafe { libc::_exit(128 + signal) }
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
        // (A value built in memory obtained earlier: not an allocation.)
        if let Some(p) = super::prepared::serve(layout.size(), layout.align()) {
            return p;
        }
        if let Some(p) = counted_crash_alloc(layout) {
            return p;
        }
        super::heap::alloc(layout.size(), layout.align())
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // (Fresh mapped memory, each byte served once: zero already.)
        if let Some(p) = super::prepared::serve(layout.size(), layout.align()) {
            return p;
        }
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
        if in_crash_mode() || super::prepared::serving(ptr) {
            return; // Leaked: the process is about to die.
        }
        // SAFETY: `ptr` came from this allocator with `layout` (a block
        // from crash mode is never freed: the flag never goes back).
        unsafe { super::heap::dealloc(ptr, layout.size(), layout.align()) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe {
            if super::prepared::serving(ptr) {
                // Moved out of the memory being served (never freed).
                let new = self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                }
                return new;
            }
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

/// The program's allocator: the definitions of the malloc family that
/// come after this library in symbol lookup order (`dlsym(RTLD_NEXT)`),
/// the ones the program would call without the profiler: a malloc
/// family of the program's own (in a library it links), tcmalloc,
/// jemalloc, mimalloc, preloaded or linked, or glibc's. Each function is
/// the next definition of its own name, as the program would bind it.
///
/// Looked up once, before the first block is served ([`real::resolve`]:
/// at load, or at the first hook call if a library's constructor
/// allocates before this library's runs). `dlsym` may itself allocate
/// (an error message): while it runs, the hooks on that thread serve
/// from the library's heap (`heap::with_libc_served`), whose blocks
/// `free` recognises wherever they go.
pub mod real {
    use super::super::heap;
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::*};

    /// One function of the program's allocator: its address (0: not
    /// looked up yet, or not defined anywhere after this library).
    struct Next(AtomicUsize);

    impl Next {
        const fn new() -> Next {
            Next(AtomicUsize::new(0))
        }
        /// The function's address, looking the family up first if that
        /// has not happened yet (`None`: no definition after this
        /// library).
        fn get(&self) -> Option<usize> {
            let f = self.0.load(Acquire);
            if f != 0 {
                return Some(f);
            }
            resolve();
            Some(self.0.load(Acquire)).filter(|&f| f != 0)
        }
    }

    static MALLOC: Next = Next::new();
    static CALLOC: Next = Next::new();
    static REALLOC: Next = Next::new();
    static FREE: Next = Next::new();
    static MEMALIGN: Next = Next::new();
    static ALIGNED_ALLOC: Next = Next::new();
    static POSIX_MEMALIGN: Next = Next::new();
    static VALLOC: Next = Next::new();
    static PVALLOC: Next = Next::new();

    /// Looks up the next definition of every function of the family
    /// (again only for those not found yet). Safe to call from several
    /// threads: each stores the same addresses.
    pub fn resolve() {
        heap::with_libc_served(|| {
            for (slot, name) in [
                (&MALLOC, c"malloc"),
                (&CALLOC, c"calloc"),
                (&REALLOC, c"realloc"),
                (&FREE, c"free"),
                (&MEMALIGN, c"memalign"),
                (&ALIGNED_ALLOC, c"aligned_alloc"),
                (&POSIX_MEMALIGN, c"posix_memalign"),
                (&VALLOC, c"valloc"),
                (&PVALLOC, c"pvalloc"),
            ] {
                if slot.0.load(Relaxed) == 0 {
                    let f = super::super::dl::next_symbol(name);
                    slot.0.store(f as usize, Release);
                }
            }
        })
    }

    std::thread_local! {
        /// Depth of the calling thread's calls into the program's
        /// allocator (const-initialised, no destructor: usable from the
        /// hooks at any time).
        static IN_ALLOCATOR: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// True while the calling thread runs inside the program's allocator
    /// (called by a hook): the mappings it makes then are its arenas, not
    /// the program's data.
    pub fn in_allocator() -> bool {
        IN_ALLOCATOR.with(|d| d.get() > 0)
    }

    /// The mark of one call into the program's allocator: dropped when
    /// the call returns, or when a C++ exception (`std::bad_alloc`)
    /// unwinds through it, so the thread's depth is always restored.
    struct Inside;

    impl Drop for Inside {
        #[inline(always)]
        fn drop(&mut self) {
            IN_ALLOCATOR.with(|d| d.set(d.get() - 1));
        }
    }

    /// Runs `f`, a call into the program's allocator, marked as such
    /// ([`in_allocator`]).
    #[inline(always)]
    fn inside<R>(f: impl FnOnce() -> R) -> R {
        IN_ALLOCATOR.with(|d| d.set(d.get() + 1));
        let _mark = Inside;
        f()
    }

    /// A null block with errno ENOMEM: the answer when the family has no
    /// such function after this library.
    fn missing() -> *mut c_void {
        super::super::proc::set_errno(libc::ENOMEM);
        std::ptr::null_mut()
    }

    type Size1 = unsafe extern "C" fn(usize) -> *mut c_void;
    type Size2 = unsafe extern "C" fn(usize, usize) -> *mut c_void;
    type Resize = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
    type Free = unsafe extern "C" fn(*mut c_void);
    type PosixMemalign = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;

    /// Calls the program's function of one size argument in `slot`.
    fn call_size(slot: &Next, size: usize) -> *mut c_void {
        let Some(f) = slot.get() else {
            return missing();
        };
        // SAFETY: `slot` holds the next definition of a function of this
        // signature (malloc, valloc, pvalloc), which has no precondition.
        inside(|| unsafe { std::mem::transmute::<usize, Size1>(f)(size) })
    }

    /// Calls the program's function of two size arguments in `slot`.
    fn call_size2(slot: &Next, a: usize, b: usize) -> *mut c_void {
        let Some(f) = slot.get() else {
            return missing();
        };
        // SAFETY: `slot` holds the next definition of a function of this
        // signature (calloc, memalign, aligned_alloc), which validates its
        // arguments itself.
        inside(|| unsafe { std::mem::transmute::<usize, Size2>(f)(a, b) })
    }

    /// True where glibc's allocations on this thread are the library's
    /// own (`heap::serving_libc`), to be served from its heap; not after a
    /// fatal signal (the heap's lock may be held by the interrupted code).
    fn library_serves() -> bool {
        heap::serving_libc() && !in_crash_mode()
    }

    pub fn malloc(size: usize) -> *mut c_void {
        if library_serves() {
            return heap::c_malloc(size) as *mut c_void;
        }
        call_size(&MALLOC, size)
    }
    pub fn calloc(n: usize, size: usize) -> *mut c_void {
        if library_serves() {
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
        call_size2(&CALLOC, n, size)
    }
    /// # Safety
    /// `p` is null or a live block of the program's allocator or of the
    /// library's heap (`heap::c_malloc`: glibc's own allocations inside
    /// the library's calls).
    pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        if p.is_null() {
            return malloc(size);
        }
        // SAFETY: a live block, per the caller's contract.
        if unsafe { heap::is_c_block(p as *const u8) } {
            // SAFETY: a block of the library's heap, per the check.
            return unsafe { heap::c_realloc(p as *mut u8, size) as *mut c_void };
        }
        let Some(f) = REALLOC.get() else {
            return missing();
        };
        // SAFETY: the next realloc, on a block of its own allocator (the
        // caller's contract).
        inside(|| unsafe { std::mem::transmute::<usize, Resize>(f)(p, size) })
    }
    /// # Safety
    /// As [`realloc`].
    pub unsafe fn free(p: *mut c_void) {
        if p.is_null() {
            return;
        }
        // SAFETY: a live block, per the caller's contract.
        if unsafe { heap::is_c_block(p as *const u8) } {
            // SAFETY: a block of the library's heap, per the check.
            return unsafe { heap::c_free(p as *mut u8) };
        }
        if let Some(f) = FREE.get() {
            // SAFETY: the next free, on a block of its own allocator (the
            // caller's contract).
            inside(|| unsafe { std::mem::transmute::<usize, Free>(f)(p) })
        }
    }
    pub fn memalign(align: usize, size: usize) -> *mut c_void {
        call_size2(&MEMALIGN, align, size)
    }
    pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
        call_size2(&ALIGNED_ALLOC, align, size)
    }
    /// The program's `posix_memalign`: (its result, the block).
    pub fn posix_memalign(align: usize, size: usize) -> (c_int, *mut c_void) {
        let Some(f) = POSIX_MEMALIGN.get() else {
            return (libc::ENOMEM, std::ptr::null_mut());
        };
        let mut p = std::ptr::null_mut();
        // SAFETY: the next posix_memalign, with a writable out pointer; it
        // validates the alignment itself.
        let rc = inside(|| unsafe {
            std::mem::transmute::<usize, PosixMemalign>(f)(&mut p, align, size)
        });
        (rc, p)
    }
    pub fn valloc(size: usize) -> *mut c_void {
        call_size(&VALLOC, size)
    }
    pub fn pvalloc(size: usize) -> *mut c_void {
        call_size(&PVALLOC, size)
    }

    /// The program's C++ allocation functions (`operator new` and
    /// `operator delete`, by mangled name): the next definitions, looked
    /// up at their first call (libstdc++ may be loaded after this
    /// library started). tcmalloc's and mimalloc's serve blocks without
    /// calling `malloc`; libstdc++'s and jemalloc's call it (through the
    /// hooks, [`in_allocator`] then tells the nested hook the block is
    /// the outer call's).
    ///
    /// `operator new` may throw (`std::bad_alloc`, or whatever a
    /// new-handler throws): the calls are `C-unwind`, and the mark of the
    /// call ([`inside`]) is undone while the exception passes.
    pub mod cxx {
        use super::*;

        /// The arguments of one `operator new`, by form.
        #[derive(Clone, Copy)]
        pub enum NewArgs {
            /// `operator new(size)`, `operator new[](size)`.
            Size(usize),
            /// `(size, const std::nothrow_t&)`.
            Nothrow(usize, *const c_void),
            /// `(size, std::align_val_t)`.
            Aligned(usize, usize),
            /// `(size, std::align_val_t, const std::nothrow_t&)`.
            AlignedNothrow(usize, usize, *const c_void),
        }

        impl NewArgs {
            /// The bytes asked for.
            pub fn size(self) -> usize {
                match self {
                    NewArgs::Size(n)
                    | NewArgs::Nothrow(n, _)
                    | NewArgs::Aligned(n, _)
                    | NewArgs::AlignedNothrow(n, _, _) => n,
                }
            }
        }

        /// The arguments of one `operator delete`, by form.
        #[derive(Clone, Copy)]
        pub enum DeleteArgs {
            /// `(ptr)`.
            Plain(*mut c_void),
            /// `(ptr, size)` or `(ptr, std::align_val_t)`.
            One(*mut c_void, usize),
            /// `(ptr, const std::nothrow_t&)`.
            Nothrow(*mut c_void, *const c_void),
            /// `(ptr, size, std::align_val_t)`.
            Two(*mut c_void, usize, usize),
            /// `(ptr, std::align_val_t, const std::nothrow_t&)`.
            AlignedNothrow(*mut c_void, usize, *const c_void),
        }

        impl DeleteArgs {
            /// The block.
            pub fn ptr(self) -> *mut c_void {
                match self {
                    DeleteArgs::Plain(p)
                    | DeleteArgs::One(p, _)
                    | DeleteArgs::Nothrow(p, _)
                    | DeleteArgs::Two(p, _, _)
                    | DeleteArgs::AlignedNothrow(p, _, _) => p,
                }
            }
        }

        /// One mangled name's next definition (0: not looked up or not
        /// found yet: looked up again).
        pub struct Symbol {
            name: &'static std::ffi::CStr,
            addr: AtomicUsize,
        }

        impl Symbol {
            pub const fn new(name: &'static std::ffi::CStr) -> Symbol {
                Symbol {
                    name,
                    addr: AtomicUsize::new(0),
                }
            }
            /// Looks the definition up if that has not been done yet.
            pub fn resolve(&self) {
                let _ = self.get();
            }
            fn get(&self) -> Option<usize> {
                let f = self.addr.load(Acquire);
                if f != 0 {
                    return Some(f);
                }
                let f = heap::with_libc_served(|| super::super::super::dl::next_symbol(self.name))
                    as usize;
                self.addr.store(f, Release);
                Some(f).filter(|&f| f != 0)
            }
        }

        type New1 = unsafe extern "C-unwind" fn(usize) -> *mut c_void;
        type NewNothrow = unsafe extern "C-unwind" fn(usize, *const c_void) -> *mut c_void;
        type New2 = unsafe extern "C-unwind" fn(usize, usize) -> *mut c_void;
        type New2Nothrow = unsafe extern "C-unwind" fn(usize, usize, *const c_void) -> *mut c_void;
        type Del1 = unsafe extern "C" fn(*mut c_void);
        type Del2 = unsafe extern "C" fn(*mut c_void, usize);
        type DelNothrow = unsafe extern "C" fn(*mut c_void, *const c_void);
        type Del3 = unsafe extern "C" fn(*mut c_void, usize, usize);
        type Del3Nothrow = unsafe extern "C" fn(*mut c_void, usize, *const c_void);

        /// Calls the next definition of `sym`, an `operator new` of the
        /// form of `args`. Without one (no C++ runtime after this
        /// library), the block comes from the program's `malloc` or
        /// `posix_memalign` (null on failure).
        ///
        /// # Safety
        /// `sym` names an `operator new` whose parameters are `args`'s
        /// form; the nothrow pointers are the caller's.
        pub unsafe fn new(sym: &Symbol, args: NewArgs) -> *mut c_void {
            let Some(f) = sym.get() else {
                return match args {
                    NewArgs::Size(n) | NewArgs::Nothrow(n, _) => malloc(n),
                    NewArgs::Aligned(n, a) | NewArgs::AlignedNothrow(n, a, _) => {
                        posix_memalign(a, n).1
                    }
                };
            };
            // SAFETY: `f` is the next definition of the function `sym`
            // names, of this form (the caller's contract); it may throw,
            // through these `C-unwind` calls.
            inside(|| unsafe {
                match args {
                    NewArgs::Size(n) => std::mem::transmute::<usize, New1>(f)(n),
                    NewArgs::Nothrow(n, t) => std::mem::transmute::<usize, NewNothrow>(f)(n, t),
                    NewArgs::Aligned(n, a) => std::mem::transmute::<usize, New2>(f)(n, a),
                    NewArgs::AlignedNothrow(n, a, t) => {
                        std::mem::transmute::<usize, New2Nothrow>(f)(n, a, t)
                    }
                }
            })
        }

        /// Calls the next definition of `sym`, an `operator delete` of
        /// the form of `args`; without one, the program's `free`.
        ///
        /// # Safety
        /// `sym` names an `operator delete` whose parameters are
        /// `args`'s form; the block is a live block of the program's
        /// `operator new` (delete's contract).
        pub unsafe fn delete(sym: &Symbol, args: DeleteArgs) {
            let Some(f) = sym.get() else {
                // SAFETY: a block of the program's allocator.
                return unsafe { free(args.ptr()) };
            };
            // SAFETY: `f` is the next definition of the function `sym`
            // names, of this form (the caller's contract).
            inside(|| unsafe {
                match args {
                    DeleteArgs::Plain(p) => std::mem::transmute::<usize, Del1>(f)(p),
                    DeleteArgs::One(p, a) => std::mem::transmute::<usize, Del2>(f)(p, a),
                    DeleteArgs::Nothrow(p, t) => std::mem::transmute::<usize, DelNothrow>(f)(p, t),
                    DeleteArgs::Two(p, a, b) => std::mem::transmute::<usize, Del3>(f)(p, a, b),
                    DeleteArgs::AlignedNothrow(p, a, t) => {
                        std::mem::transmute::<usize, Del3Nothrow>(f)(p, a, t)
                    }
                }
            })
        }
    }
}
