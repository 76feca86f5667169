//! Every call into C and the kernel, with the `unsafe` they need.
//!
//! Other modules call the safe wrappers here; each `unsafe` block states why
//! it is sound.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_void, CStr};

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
    /// glibc's sigaction under its public alias: the interposed
    /// `sigaction` (signal_hooks.rs) is the program's entry point.
    fn __sigaction(signal: c_int, new: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
}

/// glibc's allocator, reached through its internal entry points so that the
/// library's own memory never passes through its own hooks.
///
/// In *crash mode* (set while flushing profiles from a fatal-signal
/// handler, when the interrupted code may hold glibc's heap locks or have
/// corrupted the heap) it allocates from fresh anonymous mappings instead
/// and never frees.
pub struct LibcAllocator;

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

// SAFETY: the `__libc_*` functions implement malloc's contract; alignment
// beyond 16 goes through `__libc_memalign`.
unsafe impl GlobalAlloc for LibcAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        crate::handler::note_allocation();
        if in_crash_mode() {
            return crash_alloc(layout);
        }
        // SAFETY: plain calls into glibc's allocator.
        unsafe {
            if layout.align() <= 16 {
                __libc_malloc(layout.size()) as *mut u8
            } else {
                __libc_memalign(layout.align(), layout.size()) as *mut u8
            }
        }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        crate::handler::note_allocation();
        if in_crash_mode() {
            // Fresh anonymous pages are zero.
            return crash_alloc(layout);
        }
        // SAFETY: as above; calloc zeroes.
        unsafe {
            if layout.align() <= 16 {
                __libc_calloc(1, layout.size()) as *mut u8
            } else {
                let p = __libc_memalign(layout.align(), layout.size()) as *mut u8;
                if !p.is_null() {
                    std::ptr::write_bytes(p, 0, layout.size());
                }
                p
            }
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        if in_crash_mode() {
            return; // Leaked: the process is about to die.
        }
        // SAFETY: `ptr` came from one of the functions above.
        unsafe { __libc_free(ptr as *mut c_void) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator; over-aligned blocks are
        // copied by hand because realloc does not keep alignment.
        unsafe {
            if in_crash_mode() {
                let new = crash_alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                }
                return new;
            }
            if layout.align() <= 16 {
                __libc_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                let new = self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}

/// The real allocator, for the hooks.
pub mod real {
    use super::*;
    pub fn malloc(size: usize) -> *mut c_void {
        // SAFETY: glibc's malloc has no preconditions.
        unsafe { __libc_malloc(size) }
    }
    pub fn calloc(n: usize, size: usize) -> *mut c_void {
        // SAFETY: glibc's calloc checks the multiplication itself.
        unsafe { __libc_calloc(n, size) }
    }
    /// # Safety
    /// `p` is null or a live block of glibc's allocator.
    pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        // SAFETY: per the caller's contract.
        unsafe { __libc_realloc(p, size) }
    }
    /// # Safety
    /// `p` is null or a live block of glibc's allocator.
    pub unsafe fn free(p: *mut c_void) {
        // SAFETY: per the caller's contract.
        unsafe { __libc_free(p) }
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

/// The mmap system call itself, bypassing the interposed `mmap` (the
/// library's own mappings are not the program's objects).
pub fn raw_mmap(
    addr: u64,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> Option<*mut u8> {
    // SAFETY: mmap with a null or caller-chosen hint never touches existing
    // Rust-visible memory unless MAP_FIXED is passed (the hooks forward the
    // program's own flags unchanged).
    let r = unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) };
    (r != -1).then_some(r as *mut u8)
}

/// munmap, bypassing the interposed `munmap`.
pub fn raw_munmap(addr: u64, len: usize) -> c_int {
    // SAFETY: unmapping a range the caller owns.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int }
}

/// mremap, bypassing the interposed `mremap`.
pub fn raw_mremap(
    old: u64,
    old_len: usize,
    new_len: usize,
    flags: c_int,
    new_addr: u64,
) -> Option<*mut u8> {
    // SAFETY: forwards the program's own request.
    let r = unsafe { libc::syscall(libc::SYS_mremap, old, old_len, new_len, flags, new_addr) };
    (r != -1).then_some(r as *mut u8)
}

/// Types for which all-zero bytes are a valid value (atomics, integers).
///
/// # Safety
/// Implement only for types whose every field is an integer or atomic.
pub unsafe trait ZeroInit: Sync {}

// SAFETY (all below): integers and atomics, or structs of only those.
unsafe impl ZeroInit for std::sync::atomic::AtomicU32 {}
// SAFETY: see above.
unsafe impl ZeroInit for std::sync::atomic::AtomicU64 {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::cct::Node {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::objects::Site {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::objects::big::Entry {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::objects::granules::Slot {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::objects::Record {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::patterns::IpEntry {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::patterns::Site {}
// SAFETY: see above.
unsafe impl ZeroInit for crate::watch::SharingEntry {}

/// Maps `len` zeroed values of `T` for the rest of the process's life. Pages
/// are reserved lazily (MAP_NORESERVE), so large capacities cost nothing
/// until used. Returns `None` when the kernel refuses.
pub fn map_zeroed<T: ZeroInit>(len: usize) -> Option<&'static [T]> {
    let bytes = len.checked_mul(std::mem::size_of::<T>())?.max(1);
    // SAFETY: anonymous private mapping; no file, no aliasing.
    let p = raw_mmap(
        0,
        bytes,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    )?;
    // SAFETY: the mapping is zeroed, page-aligned (enough for T), never
    // unmapped, and T is valid when zeroed (ZeroInit).
    Some(unsafe { std::slice::from_raw_parts(p as *const T, len) })
}

/// A view of `len` bytes of this process's mapped memory at `addr`, for
/// memory that stays mapped while the module it belongs to is loaded.
///
/// # Safety
/// The range must be mapped and readable for as long as the slice is used.
pub unsafe fn memory(addr: u64, len: usize) -> &'static [u8] {
    // SAFETY: per the caller's contract.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }
}

/// Copies the bytes of the C string at `s` (up to its NUL, at most
/// `out.len()` bytes) into `out`; returns how many. A null `s` gives 0.
///
/// # Safety
/// `s` is null or points to a NUL-terminated string, or to at least
/// `out.len()` readable bytes.
pub unsafe fn c_string_prefix(s: *const std::ffi::c_char, out: &mut [u8]) -> usize {
    if s.is_null() {
        return 0;
    }
    let mut n = 0;
    while n < out.len() {
        // SAFETY: bytes up to the first NUL (or out.len()) are readable,
        // per the caller's contract; we stop at the NUL.
        let b = unsafe { *s.add(n) } as u8;
        if b == 0 {
            break;
        }
        out[n] = b;
        n += 1;
    }
    n
}

pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

pub fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u32 }
}

/// `CLOCK_MONOTONIC` in ns (async-signal-safe; a vDSO read, no system
/// call, on x86-64 with a TSC clock source).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time in ns since the epoch.
pub fn now_unix_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(value: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = value }
}

/// The calling thread's stack as [low, high).
pub fn current_stack_range() -> Option<(u64, u64)> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before use and
    // destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        ok.then(|| (addr as u64, addr as u64 + size as u64))
    }
}

/// `dlsym(RTLD_NEXT, name)`.
pub fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// One loaded module as the dynamic loader reports it.
#[derive(Debug, Clone)]
pub struct LoadedModule {
    pub path: String,
    pub bias: u64,
    /// PT_LOAD segments as (start, end, executable).
    pub segments: Vec<(u64, u64, bool)>,
    /// PT_GNU_EH_FRAME as (start, end).
    pub eh_frame_hdr: Option<(u64, u64)>,
}

/// Every module the loader has mapped, the executable first.
pub fn loaded_modules() -> Vec<LoadedModule> {
    unsafe extern "C" fn callback(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info; `data` is our Vec.
        unsafe {
            let out = &mut *(data as *mut Vec<LoadedModule>);
            let info = &*info;
            let name = if info.dlpi_name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(info.dlpi_name)
                    .to_string_lossy()
                    .into_owned()
            };
            let mut module = LoadedModule {
                path: name,
                bias: info.dlpi_addr,
                segments: Vec::new(),
                eh_frame_hdr: None,
            };
            for i in 0..info.dlpi_phnum as usize {
                let ph = &*info.dlpi_phdr.add(i);
                let start = info.dlpi_addr.wrapping_add(ph.p_vaddr);
                let end = start.wrapping_add(ph.p_memsz);
                match ph.p_type {
                    libc::PT_LOAD => {
                        module
                            .segments
                            .push((start, end, ph.p_flags & libc::PF_X != 0))
                    }
                    libc::PT_GNU_EH_FRAME => module.eh_frame_hdr = Some((start, end)),
                    _ => {}
                }
            }
            out.push(module);
        }
        0
    }
    let mut out: Vec<LoadedModule> = Vec::new();
    // SAFETY: the callback only touches `out` and the loader's data.
    unsafe { libc::dl_iterate_phdr(Some(callback), &mut out as *mut _ as *mut c_void) };
    if let Some(first) = out.first_mut() {
        if first.path.is_empty() {
            first.path = std::fs::read_link("/proc/self/exe")
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
    }
    out
}

/// The address of a function of this library (to find its own module).
pub fn own_address() -> u64 {
    loaded_modules as *const () as usize as u64
}

/// Runs `f` once at library load, from `.init_array`.
#[macro_export]
macro_rules! on_load {
    ($f:path) => {
        #[used]
        #[link_section = ".init_array"]
        static ON_LOAD: extern "C" fn() = {
            extern "C" fn on_load() {
                $f();
            }
            on_load
        };
    };
}

/// Registers `f` to run at process exit (after the program's own atexit
/// handlers, which were registered later).
pub fn at_exit(f: extern "C" fn()) {
    // SAFETY: registering a plain function.
    unsafe { libc::atexit(f) };
}

/// Registers fork handlers.
pub fn at_fork(child: unsafe extern "C" fn()) {
    // SAFETY: registering a plain function.
    unsafe { libc::pthread_atfork(None, None, Some(child)) };
}

/// A pthread key whose destructor runs at thread exit.
pub fn thread_exit_key(
    destructor: unsafe extern "C" fn(*mut c_void),
) -> Option<libc::pthread_key_t> {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: valid out pointer.
    (unsafe { libc::pthread_key_create(&mut key, Some(destructor)) } == 0).then_some(key)
}

/// Gives the calling thread a non-null value for `key`, so that the key's
/// destructor runs when the thread exits.
pub fn arm_thread_exit(key: libc::pthread_key_t) {
    // SAFETY: `key` came from pthread_key_create; the value is never
    // dereferenced (the destructor ignores it).
    unsafe { libc::pthread_setspecific(key, 1 as *const c_void) };
}

/// Host name of the machine.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buffer and its length.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return String::from("localhost");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// perf_event constants libc does not define for linux-gnu.
pub const F_SETSIG: c_int = 10;
pub const F_SETOWN_EX: c_int = 15;
pub const F_OWNER_TID: c_int = 0;

/// Opens a task-clock sampling event on the calling thread that sends
/// `signal` to this thread every `period_ns` of its CPU time. Returns the fd.
pub fn open_task_clock(period_ns: u64, signal: c_int) -> Result<c_int, c_int> {
    use perf_event_open_sys::bindings as pe;
    let mut attr = pe::perf_event_attr {
        type_: pe::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<pe::perf_event_attr>() as u32,
        config: pe::PERF_COUNT_SW_TASK_CLOCK as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = period_ns;
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    // SAFETY: valid attr; pid 0 / cpu -1 = this thread on any CPU.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut attr, 0, -1, -1, pe::PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        return Err(errno());
    }
    signal_and_enable(fd, signal)?;
    // One overflow at a time: the event disables itself at its next
    // overflow and the handler re-arms it when done (`rearm_event`), so a
    // handler slower than the period cannot queue signal after signal (the
    // per-user queue of pending signals, `ulimit -i`, is shared by all of
    // the user's processes), and the handler's own time is not sampled.
    if !rearm_event(fd) {
        let e = errno();
        close_event(fd);
        return Err(e);
    }
    Ok(fd)
}

/// `ioctl(fd, PERF_EVENT_IOC_REFRESH, 1)`: enables the event for one more
/// overflow, after which the kernel disables it again. Async-signal-safe
/// (one system call).
pub fn rearm_event(fd: c_int) -> bool {
    use perf_event_open_sys::bindings as pe;
    // SAFETY: ioctl on an fd; an invalid fd only returns an error.
    unsafe { libc::ioctl(fd, pe::REFRESH as _, 1) == 0 }
}

/// Sample layout of the page-fault event.
pub const PAGE_FAULT_SAMPLE_TYPE: u64 = (perf_event_open_sys::bindings::PERF_SAMPLE_IP
    | perf_event_open_sys::bindings::PERF_SAMPLE_TID
    | perf_event_open_sys::bindings::PERF_SAMPLE_ADDR)
    as u64;

/// Opens a page-fault sampling event for the calling thread: every
/// `period`-th fault of its user code writes a sample (IP, TID, data
/// address) into a ring of `data_pages` pages and sends `signal` to this
/// thread. Returns the fd and the ring.
pub fn open_page_faults(
    period: u64,
    signal: c_int,
    data_pages: usize,
) -> Result<(c_int, crate::pmu::ring::Ring), c_int> {
    use perf_event_open_sys::bindings as pe;
    let mut attr = pe::perf_event_attr {
        type_: pe::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<pe::perf_event_attr>() as u32,
        config: pe::PERF_COUNT_SW_PAGE_FAULTS as u64,
        sample_type: PAGE_FAULT_SAMPLE_TYPE,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = period.max(1);
    // A wakeup (and so a signal) for every sample.
    attr.__bindgen_anon_2.wakeup_events = 1;
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    // SAFETY: valid attr; pid 0 / cpu -1 = this thread on any CPU.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut attr, 0, -1, -1, pe::PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        return Err(errno());
    }
    let Some(ring) = map_perf_ring(fd, data_pages) else {
        let e = errno();
        // SAFETY: closing our own fd.
        unsafe { libc::close(fd) };
        return Err(e);
    };
    signal_and_enable(fd, signal)?;
    Ok((fd, ring))
}

/// Routes `fd`'s overflow signal to the calling thread
/// ([`route_perf_signal`]), resets and enables it; closes `fd` on failure.
fn signal_and_enable(fd: c_int, signal: c_int) -> Result<(), c_int> {
    use perf_event_open_sys::bindings as pe;
    let result = route_perf_signal(fd, signal).and_then(|()| {
        // SAFETY: ioctl on our own fd with valid arguments.
        let reset = unsafe { libc::ioctl(fd, pe::RESET as _, 0) } == 0;
        if reset && enable_event(fd) {
            Ok(())
        } else {
            Err(errno())
        }
    });
    if result.is_err() {
        // SAFETY: closing our own fd.
        unsafe { libc::close(fd) };
    }
    result
}

/// Stops and closes a sampling event.
pub fn close_event(fd: c_int) {
    use perf_event_open_sys::bindings as pe;
    // SAFETY: our own fd; errors are harmless.
    unsafe {
        libc::ioctl(fd, pe::DISABLE as _, 0);
        libc::close(fd);
    }
    crate::signals::mark_perf_fd(fd, false);
}

/// Where a watchpoint waits while it watches nothing (never accessed).
static WATCH_PARKING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The attributes of a one-shot hardware watchpoint (`PERF_TYPE_BREAKPOINT`)
/// on the `len` bytes at `addr` (len 1, 2, 4 or 8, `addr` aligned to it):
/// triggered by user-space writes, or by reads and writes with `reads`.
fn watchpoint_attr(
    addr: u64,
    len: u64,
    reads: bool,
) -> perf_event_open_sys::bindings::perf_event_attr {
    use perf_event_open_sys::bindings as pe;
    let mut attr = pe::perf_event_attr {
        type_: pe::PERF_TYPE_BREAKPOINT,
        size: std::mem::size_of::<pe::perf_event_attr>() as u32,
        ..Default::default()
    };
    attr.bp_type = if reads {
        pe::HW_BREAKPOINT_RW
    } else {
        pe::HW_BREAKPOINT_W
    };
    attr.__bindgen_anon_3.bp_addr = addr;
    attr.__bindgen_anon_4.bp_len = len;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

/// Opens a disabled hardware watchpoint for the calling thread (one of
/// its debug registers), whose trap sends `signal` to this thread.
/// [`arm_watchpoint`] points it at an address. Returns the fd or the errno
/// (`ENOSPC`: no free debug register, e.g. a debugger holds them).
pub fn open_watchpoint(signal: c_int) -> Result<c_int, c_int> {
    let parking = &WATCH_PARKING as *const _ as u64;
    let mut attr = watchpoint_attr(parking, 8, true);
    let fd = open_perf_event(&mut attr, -1)?;
    if let Err(e) = route_perf_signal(fd, signal) {
        close_fd(fd);
        return Err(e);
    }
    Ok(fd)
}

/// Points watchpoint `fd` (of any thread of this process) at the `len`
/// bytes at `addr` and enables it (`PERF_EVENT_IOC_MODIFY_ATTRIBUTES` with
/// `disabled` clear: one system call). It traps at every access until
/// disabled: the trapped thread's handler disables it first thing
/// ([`disable_event`]), so each arming gives one trap. (Arming for one
/// overflow with `PERF_EVENT_IOC_REFRESH` does not work for breakpoints:
/// on Linux 6.18 a breakpoint modified after its limited overflow stays in
/// the debug register but never signals again, and every access then costs
/// a debug exception, about 20 us.) For another thread's watchpoint the
/// kernel updates its debug register by an interprocessor call (about 1
/// us here). Async-signal-safe.
pub fn arm_watchpoint(fd: c_int, addr: u64, len: u64, reads: bool) -> bool {
    use perf_event_open_sys::bindings as pe;
    let mut attr = watchpoint_attr(addr, len, reads);
    attr.set_disabled(0);
    // SAFETY: ioctl on an fd with a valid, fully initialised attr that
    // outlives the call; an invalid fd only returns an error.
    unsafe { libc::ioctl(fd, pe::MODIFY_ATTRIBUTES as _, &attr) == 0 }
}

/// Stops a sampling event without closing it (from any thread).
pub fn disable_event(fd: c_int) {
    use perf_event_open_sys::bindings as pe;
    // SAFETY: our own fd; errors are harmless.
    unsafe { libc::ioctl(fd, pe::DISABLE as _, 0) };
}

pub fn sigrtmin() -> c_int {
    libc::SIGRTMIN()
}

/// Installs `handler` for `signal` only if the signal still has its
/// default action (an inherited SIG_IGN, e.g. under nohup, is kept). The
/// handler runs once (SA_RESETHAND): afterwards the default action applies.
pub fn install_fatal_handler(
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
) -> bool {
    // SAFETY: query then install with zeroed, initialised sigaction values.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if __sigaction(signal, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL
        {
            return false;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        __sigaction(signal, &sa, std::ptr::null_mut()) == 0
    }
}

/// Installs `handler` (SA_SIGINFO | SA_RESTART) for `signal` only if the
/// signal still has its default action; a program's own handler (or
/// SIG_IGN) is kept, and a program that installs one later replaces ours.
pub fn install_handler_if_default(
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
) -> bool {
    let default = real_sigaction_query(signal).is_some_and(|old| old.sa_sigaction == libc::SIG_DFL);
    default && install_handler(signal, handler, &[])
}

/// The per-user limit of pending signals (`ulimit -i`), if finite.
/// The soft limit of open file descriptors (`ulimit -n`), if finite.
pub fn open_files_limit() -> Option<u64> {
    // SAFETY: getrlimit writes into a valid, owned struct.
    let limit = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0).then_some(l.rlim_cur)
    };
    limit.filter(|&l| l != libc::RLIM_INFINITY)
}

pub fn pending_signal_limit() -> Option<u64> {
    // SAFETY: getrlimit writes into a valid, owned struct.
    let limit = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut l) == 0).then_some(l.rlim_cur)
    };
    limit.filter(|&l| l != libc::RLIM_INFINITY)
}

/// Sends `signal` to the calling thread again (it is delivered, with its
/// default action, when the handler returns).
pub fn reraise(signal: c_int) {
    // SAFETY: raise has no memory preconditions.
    unsafe { libc::raise(signal) };
}

/// Installs `handler` (SA_SIGINFO | SA_RESTART) for `signal`.
pub fn install_handler(
    signal: c_int,
    handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
    block: &[c_int],
) -> bool {
    // SAFETY: a zeroed sigaction with our handler; its mask blocks `block`
    // (the library's other sample signals) while it runs.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for &b in block {
            libc::sigaddset(&mut sa.sa_mask, b);
        }
        __sigaction(signal, &sa, std::ptr::null_mut()) == 0
    }
}

/// A file mapped read-only; unmapped on drop.
pub struct MappedFile {
    ptr: *mut c_void,
    len: usize,
}

impl MappedFile {
    pub fn open(path: &str) -> Option<MappedFile> {
        let file = std::fs::File::open(path).ok()?;
        let len = file.metadata().ok()?.len() as usize;
        if len == 0 {
            return None;
        }
        use std::os::fd::AsRawFd;
        // SAFETY: read-only private mapping of an open file.
        let ptr = raw_mmap(
            0,
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )?;
        Some(MappedFile {
            ptr: ptr as *mut c_void,
            len,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        raw_munmap(self.ptr as u64, self.len);
    }
}

/// A value published once per update and then only read, from any thread
/// and from signal handlers: a pointer to a leaked box. Old values are never
/// freed, so a reader's reference stays valid forever.
pub struct Published<T>(std::sync::atomic::AtomicPtr<T>);

impl<T> Published<T> {
    pub const fn new() -> Self {
        Published(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()))
    }

    pub fn publish(&self, value: T) -> &'static T {
        let leaked: &'static mut T = Box::leak(Box::new(value));
        self.0.store(leaked, std::sync::atomic::Ordering::Release);
        leaked
    }

    pub fn get(&self) -> Option<&'static T> {
        let p = self.0.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY: non-null pointers stored here come from `Box::leak` and
        // are never freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

// SAFETY: a null AtomicPtr is all zeroes.
unsafe impl<T: Sync> ZeroInit for Published<T> {}

impl<T> Default for Published<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The calling thread's stack bounds; reading a word inside them is safe
/// while the thread runs (its stack stays mapped).
#[derive(Debug, Clone, Copy, Default)]
pub struct StackBounds {
    pub low: u64,
    pub high: u64,
}

impl StackBounds {
    /// Bounds of the calling thread's stack.
    pub fn current() -> Option<StackBounds> {
        current_stack_range().map(|(low, high)| StackBounds { low, high })
    }

    /// Reads the word at `addr` if it lies inside the stack.
    pub fn read(&self, addr: u64) -> Option<u64> {
        if addr < self.low || addr.checked_add(8)? > self.high {
            return None;
        }
        // SAFETY: inside the stack mapping of the thread that owns these
        // bounds; only that thread calls this (from its hooks or handler).
        Some(unsafe { std::ptr::read_volatile(addr as *const u64) })
    }

    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.low && addr < self.high
    }
}

/// The bytes [start, end) of a loaded module, if they lie inside one of its
/// loaded `segments` (as reported by the dynamic loader). Valid while the
/// module stays loaded (modules are not unloaded in this version).
pub fn loaded_bytes(segments: &[(u64, u64, bool)], start: u64, end: u64) -> Option<&'static [u8]> {
    let inside = start <= end && segments.iter().any(|&(s, e, _)| start >= s && end <= e);
    // SAFETY: the range is inside a segment the loader mapped readable.
    inside.then(|| unsafe { memory(start, (end - start) as usize) })
}

/// Load bias of the module behind a `dlopen` handle.
///
/// # Safety
/// `handle` must be a live handle returned by `dlopen`.
pub unsafe fn handle_bias(handle: *mut c_void) -> Option<u64> {
    let mut map: *mut c_void = std::ptr::null_mut();
    // SAFETY: RTLD_DI_LINKMAP stores a `struct link_map *` whose first
    // field is `l_addr`, the load bias (glibc's public <link.h> layout).
    unsafe {
        if libc::dlinfo(
            handle,
            libc::RTLD_DI_LINKMAP,
            &mut map as *mut _ as *mut c_void,
        ) != 0
            || map.is_null()
        {
            return None;
        }
        Some(*(map as *const u64))
    }
}

/// Ends the process immediately (the `_exit` system call for all threads).
pub fn exit_group(status: c_int) -> ! {
    // SAFETY: exit_group does not return.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    loop {
        std::hint::spin_loop();
    }
}

/// The CPU the calling thread runs on (getcpu; safe in a signal handler).
pub fn current_cpu() -> Option<u32> {
    let mut cpu: u32 = 0;
    // SAFETY: getcpu writes one u32 through a valid pointer; the node and
    // cache arguments may be null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut u32,
            std::ptr::null_mut::<u32>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    (r == 0).then_some(cpu)
}

/// The NUMA node of the page holding `addr` (move_pages in query mode;
/// safe in a signal handler); `None` if the page is not present.
pub fn page_node(addr: u64) -> Option<u32> {
    let page = (addr & !4095) as *mut libc::c_void;
    let pages = [page];
    let mut status: [c_int; 1] = [-1];
    // SAFETY: query mode (nodes = null) only writes `count` statuses into
    // the valid `status` array; the pages are not touched.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            1usize,
            pages.as_ptr(),
            std::ptr::null::<c_int>(),
            status.as_mut_ptr(),
            0,
        )
    };
    (r == 0 && status[0] >= 0).then_some(status[0] as u32)
}

/// The mapping of one perf event's ring buffer: the `perf_event_mmap_page`
/// control page followed by a power-of-two data area. Mapped for the rest
/// of the process's life (never unmapped, so a late signal handler cannot
/// read freed memory).
pub struct RingMemory {
    control: *mut u8,
    data: *const u8,
    data_size: usize,
}

// SAFETY: the control page is only accessed through atomics; the data area
// is only read, and only the bytes the kernel has finished writing (see
// `RingMemory::data`). The mapping is never unmapped.
unsafe impl Send for RingMemory {}
// SAFETY: as above.
unsafe impl Sync for RingMemory {}

impl RingMemory {
    fn word(&self, offset: usize) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: `offset` is the offset of a u64 field inside the control
        // page (page-aligned mapping, 8-aligned field), which stays mapped;
        // the kernel and this thread access it concurrently, so only through
        // an atomic.
        unsafe { &*(self.control.add(offset) as *const std::sync::atomic::AtomicU64) }
    }

    /// `data_head`, read with acquire ordering: the records before it are
    /// completely written.
    pub fn head(&self) -> u64 {
        use perf_event_open_sys::bindings::perf_event_mmap_page as Page;
        self.word(std::mem::offset_of!(Page, data_head))
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// `data_tail` (written only by this reader).
    pub fn tail(&self) -> u64 {
        use perf_event_open_sys::bindings::perf_event_mmap_page as Page;
        self.word(std::mem::offset_of!(Page, data_tail))
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Publishes `data_tail` with release ordering: the kernel may overwrite
    /// everything before it.
    pub fn set_tail(&self, tail: u64) {
        use perf_event_open_sys::bindings::perf_event_mmap_page as Page;
        self.word(std::mem::offset_of!(Page, data_tail))
            .store(tail, std::sync::atomic::Ordering::Release)
    }

    /// The data area. The kernel writes only between `data_head` and
    /// `data_tail + size`; callers read only `[data_tail, data_head)` after
    /// an acquire load of `data_head`, which the kernel does not touch until
    /// `data_tail` moves past it.
    pub fn data(&self) -> &[u8] {
        // SAFETY: `data_size` bytes at `data` are mapped readable for the
        // process's life; see above for the bytes the kernel writes.
        unsafe { std::slice::from_raw_parts(self.data, self.data_size) }
    }
}

/// Maps the ring buffer of perf event `fd`: one control page and
/// `data_pages` data pages (a power of two). `None` if `data_pages` is not a
/// power of two or the kernel refuses (e.g. `EPERM` beyond
/// `perf_event_mlock_kb`).
pub fn map_perf_ring(fd: c_int, data_pages: usize) -> Option<crate::pmu::ring::Ring> {
    if !data_pages.is_power_of_two() {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page).ok().filter(|&p| p > 0)?;
    let data_size = data_pages.checked_mul(page)?;
    let len = data_size.checked_add(page)?;
    // A shared read-write mapping: writing data_tail tells the kernel what
    // has been consumed (a read-only mapping would make it overwrite).
    let p = raw_mmap(
        0,
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        0,
    )?;
    Some(crate::pmu::ring::Ring::new(RingMemory {
        control: p,
        // SAFETY: `page` < `len`: inside the mapping.
        data: unsafe { p.add(page) },
        data_size,
    }))
}

/// `perf_event_open(attr, 0, -1, group_fd, FD_CLOEXEC)`: an event on the
/// calling thread, any CPU. Returns the fd or the errno.
pub fn open_perf_event(
    attr: &mut perf_event_open_sys::bindings::perf_event_attr,
    group_fd: c_int,
) -> Result<c_int, c_int> {
    use perf_event_open_sys::bindings as pe;
    attr.size = std::mem::size_of::<pe::perf_event_attr>() as u32;
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr whose
    // size field matches the struct.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(attr, 0, -1, group_fd, pe::PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd)
    }
}

/// `ioctl(fd, PERF_EVENT_IOC_ENABLE)`.
pub fn enable_event(fd: c_int) -> bool {
    use perf_event_open_sys::bindings as pe;
    // SAFETY: ioctl on an fd; an invalid fd only returns an error.
    unsafe { libc::ioctl(fd, pe::ENABLE as _, 0) == 0 }
}

/// Sends `signal` to the calling thread on every wakeup of perf event `fd`
/// (`O_ASYNC`, `F_SETSIG`, `F_SETOWN_EX` with `F_OWNER_TID`).
pub fn route_perf_signal(fd: c_int, signal: c_int) -> Result<(), c_int> {
    #[repr(C)]
    struct FOwnerEx {
        kind: c_int,
        pid: libc::pid_t,
    }
    let owner = FOwnerEx {
        kind: F_OWNER_TID,
        pid: gettid() as libc::pid_t,
    };
    // SAFETY: fcntl on an fd with valid arguments; `owner` outlives the call.
    let ok = unsafe {
        libc::fcntl(fd, libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK) == 0
            && libc::fcntl(fd, F_SETSIG, signal) == 0
            && libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) == 0
    };
    if ok {
        crate::signals::mark_perf_fd(fd, true);
        Ok(())
    } else {
        Err(errno())
    }
}

/// Closes an fd (errors ignored).
pub fn close_fd(fd: c_int) {
    // SAFETY: closing an fd the caller owns.
    unsafe { libc::close(fd) };
}

// ---------------------------------------------------------------------------
// Signals (signals.rs, signal_hooks.rs): the real calls behind the
// interposed ones, and the pieces of the handler's forwarding.

/// The current action for `signal`, from glibc's real `sigaction`.
pub fn real_sigaction_query(signal: c_int) -> Option<libc::sigaction> {
    // SAFETY: a query with a valid out pointer.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (__sigaction(signal, std::ptr::null(), &mut old) == 0).then_some(old)
    }
}

/// glibc's real `sigaction`.
///
/// # Safety
/// The pointers are null or valid, as for `sigaction`.
pub unsafe fn real_sigaction(
    signal: c_int,
    new: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: per the caller's contract.
    unsafe { __sigaction(signal, new, old) }
}

/// One delivered signal as the kernel hands it to an `SA_SIGINFO`
/// handler: its `siginfo_t` and `ucontext_t` (the context may be null: a
/// signal taken by `sigtimedwait`).
pub struct Delivered {
    info: *mut libc::siginfo_t,
    context: *mut c_void,
}

impl Delivered {
    /// # Safety
    /// `info` is null or a valid `siginfo_t`, `context` null or a valid
    /// `ucontext_t`, both for as long as the value is used (a handler's
    /// arguments, for the handler's duration).
    pub unsafe fn new(info: *mut libc::siginfo_t, context: *mut c_void) -> Delivered {
        Delivered { info, context }
    }

    /// A signal taken by `sigtimedwait` into `info` (no context).
    pub fn waited(info: &mut libc::siginfo_t) -> Delivered {
        Delivered {
            info,
            context: std::ptr::null_mut(),
        }
    }

    /// (si_code, si_fd); si_fd is meaningful only for the POLL_* codes of
    /// an `F_SETSIG` signal (the `_sigpoll` member: `long si_band` at
    /// offset 16, `int si_fd` at offset 24 on 64-bit Linux).
    pub fn code_fd(&self) -> Option<(c_int, c_int)> {
        if self.info.is_null() {
            return None;
        }
        // SAFETY: a valid, full siginfo_t (128 bytes, per `new`); both
        // offsets lie inside it.
        unsafe {
            let code = (*self.info).si_code;
            let fd = std::ptr::read_unaligned((self.info as *const u8).add(24) as *const c_int);
            Some((code, fd))
        }
    }

    /// Queues `signal` with the same info to the calling thread again and
    /// makes the interrupted code resume with `signal` blocked: it stays
    /// pending (for `sigwait`, `signalfd`, or the program's unblocking
    /// call).
    pub fn requeue_blocked(&self, signal: c_int) {
        // SAFETY: per `new`, the pointers are valid; the ucontext's saved
        // mask is what the kernel restores when the handler returns;
        // rt_tgsigqueueinfo only reads the info.
        unsafe {
            if !self.context.is_null() {
                let uc = &mut *(self.context as *mut libc::ucontext_t);
                libc::sigaddset(&mut uc.uc_sigmask, signal);
            }
            if !self.info.is_null() {
                libc::syscall(
                    libc::SYS_rt_tgsigqueueinfo,
                    getpid() as libc::pid_t,
                    gettid() as libc::pid_t,
                    signal,
                    self.info,
                );
            }
        }
    }

    /// Calls the program's handler for `signal` as the kernel would have:
    /// its `sa_mask` (and the signal itself unless `SA_NODEFER`) blocked
    /// while it runs, one or three arguments by `SA_SIGINFO`.
    pub fn call_program_handler(&self, signal: c_int, act: &libc::sigaction) {
        let mut block = act.sa_mask;
        if act.sa_flags & libc::SA_NODEFER == 0 {
            sigset_add(&mut block, signal);
        }
        let mut old = empty_sigset();
        raw_sigmask(libc::SIG_BLOCK, Some(&block), Some(&mut old));
        // SAFETY: the program installed this handler with these flags, so
        // it has the matching signature; the arguments are the kernel's.
        unsafe {
            if act.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                    std::mem::transmute(act.sa_sigaction);
                f(signal, self.info, self.context);
            } else {
                let f: extern "C" fn(c_int) = std::mem::transmute(act.sa_sigaction);
                f(signal);
            }
        }
        raw_sigmask(libc::SIG_SETMASK, Some(&old), None);
    }
}

/// True if `fd` is closed or is a perf event (`anon_inode:[perf_event]`):
/// a POLL_* signal naming it comes from a perf event (readlink is
/// async-signal-safe).
pub fn fd_is_perf_or_closed(fd: c_int) -> bool {
    let mut path = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0";
    let mut n = fd.max(0) as u32;
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        path[14 + i] = digits[len - 1 - i];
    }
    let mut buf = [0u8; 64];
    // SAFETY: a NUL-terminated path and a buffer with its length.
    let r = unsafe {
        libc::readlink(
            path.as_ptr() as *const libc::c_char,
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
        )
    };
    if r < 0 {
        return errno() == libc::ENOENT || errno() == libc::EBADF;
    }
    buf[..r as usize].starts_with(b"anon_inode:[perf_event]")
}

/// The 64-bit words of a signal set.
pub fn sigset_words(set: &libc::sigset_t) -> [u64; std::mem::size_of::<libc::sigset_t>() / 8] {
    // SAFETY: sigset_t is plain bytes of exactly this size.
    unsafe { std::mem::transmute_copy(set) }
}

/// A sigaction value with this handler, flags and mask words.
pub fn make_sigaction(
    handler: usize,
    flags: c_int,
    mask: &[u64; std::mem::size_of::<libc::sigset_t>() / 8],
) -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction; the mask words are plain
    // bytes of a sigset_t.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        sa.sa_mask = std::mem::transmute_copy(mask);
        sa
    }
}

pub fn empty_sigset() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is the empty set.
    unsafe { std::mem::zeroed() }
}

pub fn sigset_has(set: &libc::sigset_t, signal: c_int) -> bool {
    // SAFETY: a valid set; an invalid signal only returns -1.
    unsafe { libc::sigismember(set, signal) == 1 }
}

pub fn sigset_add(set: &mut libc::sigset_t, signal: c_int) {
    // SAFETY: as above.
    unsafe { libc::sigaddset(set, signal) };
}

pub fn sigset_del(set: &mut libc::sigset_t, signal: c_int) {
    // SAFETY: as above.
    unsafe { libc::sigdelset(set, signal) };
}

/// The `rt_sigprocmask` system call on the calling thread (the kernel's
/// 8-byte mask; async-signal-safe).
pub fn raw_sigmask(
    how: c_int,
    set: Option<&libc::sigset_t>,
    old: Option<&mut libc::sigset_t>,
) -> c_int {
    let set = set.map_or(std::ptr::null(), |s| s as *const libc::sigset_t);
    let old = old.map_or(std::ptr::null_mut(), |s| s as *mut libc::sigset_t);
    // SAFETY: the pointers are null or valid sigset_t (at least 8 bytes).
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set, old, 8usize) as c_int }
}

/// Gives `signal` its default action and sends it to the calling thread
/// again: delivered when the handler returns (for a real-time signal, the
/// process ends with that signal).
pub fn die_by_default(signal: c_int) {
    let dfl = make_sigaction(
        libc::SIG_DFL,
        0,
        &[0; std::mem::size_of::<libc::sigset_t>() / 8],
    );
    // SAFETY: a valid sigaction; tgkill to ourselves.
    unsafe {
        __sigaction(signal, &dfl, std::ptr::null_mut());
        libc::syscall(
            libc::SYS_tgkill,
            getpid() as libc::pid_t,
            gettid() as libc::pid_t,
            signal,
        );
    }
}

/// CPU time of the calling thread (ns).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads a counting perf event's value (task-clock: ns of CPU time).
/// CPU time of thread `tid` of this process (its kernel CPU clock, as
/// `pthread_getcpuclockid` builds it); `None` once the thread is gone.
pub fn thread_cpu_ns_of(tid: u32) -> Option<u64> {
    // CPUCLOCK_SCHED (2) | CPUCLOCK_PERTHREAD_MASK (4), tid inverted << 3.
    let clock = ((!(tid as libc::clockid_t)) << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec; a bad clock id only returns an error.
    let ok = unsafe { libc::clock_gettime(clock, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

pub fn read_counter(fd: c_int) -> Option<u64> {
    let mut value: u64 = 0;
    // SAFETY: reading 8 bytes into a u64.
    let r = unsafe { libc::read(fd, &mut value as *mut u64 as *mut c_void, 8) };
    (r == 8).then_some(value)
}
