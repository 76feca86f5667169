//! perf events: the task-clock and page-fault sample sources, ring
//! buffer mappings, hardware watchpoints, routing of their signals, and
//! the set of the profiler's perf fds.
//!
//! **Descriptors the profiler owns.** Every event's descriptor is moved
//! out of the program's low range at once (`F_DUPFD_CLOEXEC` above
//! [`fd_floor`]) and remembered by identity: its number, the perf anon
//! inode (`fstat`) and the kernel's id of the event (`PERF_EVENT_IOC_ID`).
//! A program may close it anyway (`close_range(3, ~0)`, `closefrom`, a
//! thread closing numbers it did not open) and reuse the number for its
//! own file: the profiler then closes, disables or re-arms it only after
//! [`owns_event`] found it is still the same event ([`close_event`],
//! [`disable_owned`]), so it never closes or changes the program's file,
//! and the caller counts the event as lost. A sample signal names its
//! event's number (`si_fd`); the kernel keeps signalling with that number
//! for as long as the event lives (an event with a mapped ring outlives
//! its closed descriptor), so a number the profiler ever gave one of its
//! events is the profiler's for its signals ([`is_perf_fd`]).

use std::ffi::{c_int, c_void};

use super::mem::raw_mmap;
use super::proc::{errno, gettid};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// perf_event constants libc does not define for linux-gnu.
pub const F_SETSIG: c_int = 10;
pub const F_SETOWN_EX: c_int = 15;
pub const F_OWNER_TID: c_int = 0;

/// The attributes of a disabled software sampling event of user space:
/// `config` (`PERF_COUNT_SW_*`) every `period` events.
fn software_attr(config: u64, period: u64) -> perf_event_open_sys::bindings::perf_event_attr {
    use perf_event_open_sys::bindings as pe;
    let mut attr = pe::perf_event_attr {
        type_: pe::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<pe::perf_event_attr>() as u32,
        config,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = period;
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

/// Opens a task-clock sampling event on the calling thread that sends
/// `signal` to this thread every `period_ns` of its CPU time. Returns the fd.
///
/// The event runs free: no system call per sample. The handler limits it to
/// one overflow at a time (`limit_to_one_overflow`) only after a sample
/// whose handler was slow against the period, so that a handler slower
/// than the period cannot queue signal after signal (the per-user queue of
/// pending signals, `ulimit -i`, is shared by all of the user's processes).
/// That arming costs an `ioctl` of about 14 us in a KVM guest (measured,
/// docs/PERFORMANCE.md), which is why it is not done for every sample.
///
/// The event is returned stopped, its signal routed: the caller
/// publishes the fd where the handler finds it, then starts it with
/// [`start_event`] (the first overflow's handler may need the fd to
/// re-arm the event: found unpublished, the event would stay stopped).
pub fn open_task_clock(period_ns: u64, signal: c_int) -> Result<c_int, c_int> {
    use perf_event_open_sys::bindings as pe;
    let mut attr = software_attr(pe::PERF_COUNT_SW_TASK_CLOCK as u64, period_ns);
    let fd = open_perf_event(&mut attr, -1)?;
    if let Err(e) = route_perf_signal(fd, signal) {
        close_fd(fd);
        return Err(e);
    }
    Ok(fd)
}

/// Starts a stopped event from zero: running free, or with
/// `one_overflow` limited to its first overflow (the handler then re-arms
/// it for one overflow per sample: at most one of its signals is ever
/// pending, whatever the handler's time). Returns the errno on failure.
pub fn start_event(fd: c_int, one_overflow: bool) -> Result<(), c_int> {
    use perf_event_open_sys::bindings as pe;
    // SAFETY: ioctl on our own fd with valid arguments.
    let reset = unsafe { libc::ioctl(fd, pe::RESET as _, 0) } == 0;
    let started = if one_overflow {
        limit_to_one_overflow(fd)
    } else {
        enable_event(fd)
    };
    if reset && started {
        Ok(())
    } else {
        Err(errno())
    }
}

/// `ioctl(fd, PERF_EVENT_IOC_REFRESH, 1)`: enables the event for one more
/// overflow, after which the kernel disables it (that overflow's signal
/// carries `POLL_HUP`). Async-signal-safe (one system call).
pub fn limit_to_one_overflow(fd: c_int) -> bool {
    use perf_event_open_sys::bindings as pe;
    // SAFETY: ioctl on an fd; an invalid fd only returns an error.
    unsafe { libc::ioctl(fd, pe::REFRESH as _, 1) == 0 }
}

/// Sample layout of the page-fault event: IP, thread, data address and
/// the size of the page the fault mapped (`PERF_SAMPLE_DATA_PAGE_SIZE`,
/// Linux 5.11: 2 MiB for a transparent huge page).
pub const PAGE_FAULT_SAMPLE_TYPE: u64 = PAGE_FAULT_SAMPLE_TYPE_NO_SIZE
    | perf_event_open_sys::bindings::PERF_SAMPLE_DATA_PAGE_SIZE as u64;

/// The layout on kernels that do not report page sizes (before 5.11):
/// each fault then counts one page.
pub const PAGE_FAULT_SAMPLE_TYPE_NO_SIZE: u64 = (perf_event_open_sys::bindings::PERF_SAMPLE_IP
    | perf_event_open_sys::bindings::PERF_SAMPLE_TID
    | perf_event_open_sys::bindings::PERF_SAMPLE_ADDR)
    as u64;

/// The layout the page-fault events were opened with (0 before the
/// first): all threads get the same kernel's answer.
static PAGE_FAULT_LAYOUT: AtomicU64 = AtomicU64::new(0);

/// The sample layout of the page-fault events opened so far
/// ([`PAGE_FAULT_SAMPLE_TYPE`], or [`PAGE_FAULT_SAMPLE_TYPE_NO_SIZE`] on
/// an older kernel).
pub fn page_fault_layout() -> u64 {
    match PAGE_FAULT_LAYOUT.load(Relaxed) {
        0 => PAGE_FAULT_SAMPLE_TYPE,
        layout => layout,
    }
}

/// Opens a page-fault sampling event for the calling thread: every
/// `period`-th minor fault of its user code (a page mapped without
/// reading a file or swap: a first touch, or a copy on write) writes a
/// sample (IP, TID, data address and, where the kernel reports it, the
/// size of the page mapped: [`page_fault_layout`]) into a ring of
/// `data_pages` pages and sends `signal` to this thread. Returns the fd
/// and the ring's mapping.
///
/// Minor faults, not all faults: the kernel counts those after the page
/// is mapped, so the sample knows the page's size; it counts a fault of
/// any kind before it is handled.
pub fn open_page_faults(
    period: u64,
    signal: c_int,
    data_pages: usize,
) -> Result<(c_int, RingMemory), c_int> {
    use perf_event_open_sys::bindings as pe;
    let mut attr = software_attr(pe::PERF_COUNT_SW_PAGE_FAULTS_MIN as u64, period.max(1));
    attr.sample_type = page_fault_layout();
    // A wakeup (and so a signal) for every sample.
    attr.__bindgen_anon_2.wakeup_events = 1;
    let fd = match open_perf_event(&mut attr, -1) {
        Err(libc::EINVAL) if attr.sample_type == PAGE_FAULT_SAMPLE_TYPE => {
            attr.sample_type = PAGE_FAULT_SAMPLE_TYPE_NO_SIZE;
            open_perf_event(&mut attr, -1)?
        }
        opened => opened?,
    };
    PAGE_FAULT_LAYOUT.store(attr.sample_type, Relaxed);
    let Some(ring) = map_perf_ring(fd, data_pages) else {
        let e = errno();
        close_fd(fd);
        super::proc::set_errno(e);
        return Err(e);
    };
    signal_and_start(fd, signal, false)?;
    Ok((fd, ring))
}

/// Routes `fd`'s overflow signal to the calling thread
/// ([`route_perf_signal`]), resets and enables it (for its first overflow
/// only with `one_overflow`); closes `fd` on failure.
fn signal_and_start(fd: c_int, signal: c_int, one_overflow: bool) -> Result<(), c_int> {
    let result = route_perf_signal(fd, signal).and_then(|()| start_event(fd, one_overflow));
    if result.is_err() {
        close_fd(fd);
    }
    result
}

/// Stops and closes a sampling event if it is still the profiler's
/// ([`owns_event`]). False if the program closed it meanwhile: then
/// nothing is closed (the number may be the program's file now).
pub fn close_event(fd: c_int) -> bool {
    use perf_event_open_sys::bindings as pe;
    let ours = owns_event(fd);
    if ours {
        // SAFETY: our own fd (checked just above); errors are harmless.
        unsafe {
            libc::ioctl(fd, pe::DISABLE as _, 0);
            raw_close(fd);
        }
    }
    forget(fd);
    ours
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
pub fn map_perf_ring(fd: c_int, data_pages: usize) -> Option<RingMemory> {
    if !data_pages.is_power_of_two() {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page).ok().filter(|&p| p > 0)?;
    let data_size = data_pages.checked_mul(page)?;
    let len = data_size.checked_add(page)?;
    // Under an address-space limit the ring leaves the program its
    // headroom, as the library's other mappings (a refusal is recorded).
    if !super::mem::limit::room_to_grow(len) {
        return None;
    }
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
    Some(RingMemory {
        control: p,
        // SAFETY: `page` < `len`: inside the mapping.
        data: unsafe { p.add(page) },
        data_size,
    })
}

/// `perf_event_open(attr, 0, -1, group_fd, FD_CLOEXEC)`: an event on the
/// calling thread, any CPU. Returns the fd or the errno.
pub fn open_perf_event(
    attr: &mut perf_event_open_sys::bindings::perf_event_attr,
    group_fd: c_int,
) -> Result<c_int, c_int> {
    use perf_event_open_sys::bindings as pe;
    attr.size = std::mem::size_of::<pe::perf_event_attr>() as u32;
    super::floor::opening_own(|| {
        // SAFETY: `attr` is a valid, fully initialised perf_event_attr
        // whose size field matches the struct.
        let fd = unsafe {
            perf_event_open_sys::perf_event_open(
                attr,
                0,
                -1,
                group_fd,
                pe::PERF_FLAG_FD_CLOEXEC as _,
            )
        };
        if fd < 0 {
            return Err(errno());
        }
        let fd = super::floor::move_above_floor(fd);
        remember(fd);
        // (Known to the close hooks from now on, before its signal is
        // routed.)
        mark_perf_fd(fd, true);
        Ok(fd)
    })
}

/// The kernel's id of perf event `fd` (`PERF_EVENT_IOC_ID`).
fn event_id(fd: c_int) -> Option<u64> {
    use perf_event_open_sys::bindings as pe;
    let mut id: u64 = 0;
    // SAFETY: the ioctl writes one u64 into `id`; only called on a
    // descriptor whose inode is the perf anon inode (`same_inode`).
    let ok = unsafe { libc::ioctl(fd, pe::ID as _, &mut id as *mut u64) } == 0;
    ok.then_some(id)
}

/// (st_dev, st_ino) of `fd` (async-signal-safe).
fn inode(fd: c_int) -> Option<(u64, u64)> {
    // SAFETY: fstat writes into an owned stat; a bad fd only returns an
    // error.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

/// The perf events' anon inode (st_dev, st_ino), as the first event
/// showed it (0, 0: none opened yet).
static PERF_INODE: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Largest descriptor number the identity tables cover.
const MAX_FD: usize = 1 << 16;

/// The event id of each descriptor number the profiler holds (0: none).
static EVENT_IDS: [AtomicU64; MAX_FD] = [const { AtomicU64::new(0) }; MAX_FD];

/// Remembers `fd` as one of the profiler's events (its number, its inode
/// and its event id).
fn remember(fd: c_int) {
    let (Some(slot), Some(id)) = (
        usize::try_from(fd).ok().and_then(|f| EVENT_IDS.get(f)),
        event_id(fd),
    ) else {
        return;
    };
    if let Some((dev, ino)) = inode(fd) {
        PERF_INODE[0].store(dev, Relaxed);
        PERF_INODE[1].store(ino, Relaxed);
    }
    slot.store(id, Relaxed);
    mark_ever(fd);
}

/// True if descriptor `fd` is still the profiler's event it was given
/// to (not closed by the program, its number not reused for another
/// file or event). Two system calls (`fstat`, `ioctl`); async-signal-safe.
pub fn owns_event(fd: c_int) -> bool {
    let Some(id) = usize::try_from(fd)
        .ok()
        .and_then(|f| EVENT_IDS.get(f))
        .map(|s| s.load(Relaxed))
        .filter(|&id| id != 0)
    else {
        return false;
    };
    let perf = (PERF_INODE[0].load(Relaxed), PERF_INODE[1].load(Relaxed));
    inode(fd) == Some(perf) && event_id(fd) == Some(id)
}

/// True if the profiler gave one of its events number `fd` and has not
/// forgotten it (one load, no system call: a quick test before
/// [`owns_event`]).
pub fn is_event_number(fd: c_int) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|f| EVENT_IDS.get(f))
        .is_some_and(|s| s.load(Relaxed) != 0)
}

/// Forgets `fd` as one of the profiler's events (it is closed, or the
/// program closed it).
fn forget(fd: c_int) {
    if let Some(slot) = usize::try_from(fd).ok().and_then(|f| EVENT_IDS.get(f)) {
        slot.store(0, Relaxed);
    }
    mark_perf_fd(fd, false);
}

/// Moves the profiler's live event at `fd` out of the program's way: a
/// second descriptor of the same event at the lowest free number at or
/// above [`fd_floor`] (`F_DUPFD_CLOEXEC`), not `fd`, remembered by
/// identity, its wakeup signal re-registered under the new number (so
/// that signals name it: `O_ASYNC` off and on again; the signal and the
/// owning thread belong to the event and stay), and `fd` forgotten. `fd`
/// itself stays open: the caller's `dup2`/`dup3` replaces it next.
/// `None` (nothing changed) if `fd` is not a live event of the profiler
/// ([`owns_event`]) or no number is free.
pub fn move_event(fd: c_int) -> Option<c_int> {
    if !owns_event(fd) {
        return None;
    }
    let floor = super::floor::fd_floor();
    // SAFETY: fcntl on our own, open fd (checked just above).
    let mut moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
    if moved == fd {
        // (Cannot happen: `fd` is taken. Never hand back the number being
        // replaced.)
        return None;
    }
    if moved < 0 {
        // A tiny `ulimit -n`: any free number but this one.
        // SAFETY: as above.
        moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if moved < 0 {
            return None;
        }
    }
    // Known as the profiler's before any signal can name it: the event's
    // other thread may be sampled right now, and a signal naming a number
    // the profiler never had would go to the program's action (the
    // default one ends the process).
    remember(moved);
    // SAFETY: fcntl on the new descriptor of our event.
    let flags = unsafe { libc::fcntl(moved, libc::F_GETFL) };
    if flags >= 0 && flags & libc::O_ASYNC != 0 {
        // SAFETY: as above; the kernel's fasync entry of the event takes
        // the number it is re-enabled through.
        unsafe {
            libc::fcntl(moved, libc::F_SETFL, flags & !libc::O_ASYNC);
            libc::fcntl(moved, libc::F_SETFL, flags);
        }
    }
    let signalled = is_perf_fd(fd);
    forget(fd);
    if signalled {
        mark_perf_fd(moved, true);
    }
    Some(moved)
}

/// Closes `fd`, a descriptor [`move_event`] made, when the profiler no
/// longer needs it (its thread stopped meanwhile).
pub fn close_moved(fd: c_int) {
    close_fd(fd);
}

/// True if `fd` is an open descriptor (`F_GETFD`; async-signal-safe).
pub fn fd_is_open(fd: c_int) -> bool {
    // SAFETY: F_GETFD reads a flag; a bad fd only returns an error.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// The `dup2` system call; -1 with errno on failure, as the call.
pub fn raw_dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: the system call takes two integers; the numbers are the
    // program's (it asked for this).
    unsafe { libc::syscall(libc::SYS_dup2, old, new) as c_int }
}

/// The `dup3` system call (`flags` 0: `dup2`'s semantics for two
/// different numbers); -1 with errno on failure, as the call.
pub fn raw_dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: the system call takes three integers; the numbers are the
    // program's (it asked for this).
    unsafe { libc::syscall(libc::SYS_dup3, old, new, flags) as c_int }
}

/// Disables event `fd` if it is still the profiler's ([`owns_event`]);
/// false if the program closed it (nothing is touched then).
pub fn disable_owned(fd: c_int) -> bool {
    let ours = owns_event(fd);
    if ours {
        disable_event(fd);
    }
    ours
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
        mark_perf_fd(fd, true);
        Ok(())
    } else {
        Err(errno())
    }
}

/// Closes one of the profiler's perf event fds (errors ignored) if it is
/// still the profiler's ([`owns_event`]).
pub fn close_fd(fd: c_int) {
    if owns_event(fd) {
        raw_close(fd);
    }
    forget(fd);
}

/// Reads a counting perf event's value (task-clock: ns of CPU time).
pub fn read_counter(fd: c_int) -> Option<u64> {
    let mut value: u64 = 0;
    // SAFETY: reading 8 bytes into a u64.
    let r = unsafe { libc::read(fd, &mut value as *mut u64 as *mut c_void, 8) };
    (r == 8).then_some(value)
}

/// The profiler's perf event fds, one bit each (fds below 65,536): a
/// `POLL_*` signal naming one of them is a sample.
static PERF_FDS: [AtomicU64; 1024] = [const { AtomicU64::new(0) }; 1024];

/// Every number the profiler ever gave one of its events (never cleared):
/// an event keeps signalling with its number after the program closed
/// its descriptor (a mapped ring holds the event), and a late signal of
/// a closed event may arrive after the number was reused.
static EVER_FDS: [AtomicU64; 1024] = [const { AtomicU64::new(0) }; 1024];

fn mark_ever(fd: c_int) {
    if let Some(word) = usize::try_from(fd).ok().and_then(|f| EVER_FDS.get(f / 64)) {
        word.fetch_or(1u64 << (fd as usize % 64), Relaxed);
    }
}

/// True if the profiler ever gave one of its events number `fd`: a
/// `POLL_*` signal of the profiler's signal naming it is a sample (of a
/// live event, of one the program closed, or a late one), never the
/// program's (async-signal-safe).
pub fn was_perf_fd(fd: c_int) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|f| EVER_FDS.get(f / 64))
        .is_some_and(|w| w.load(Relaxed) & (1u64 << (fd as usize % 64)) != 0)
}

/// Marks `fd` as a perf event of the profiler (its signals are samples).
pub fn mark_perf_fd(fd: c_int, open: bool) {
    let Some(word) = usize::try_from(fd).ok().and_then(|f| PERF_FDS.get(f / 64)) else {
        return;
    };
    let bit = 1u64 << (fd as usize % 64);
    if open {
        word.fetch_or(bit, Relaxed);
    } else {
        word.fetch_and(!bit, Relaxed);
    }
}

/// True if [`mark_perf_fd`] marked `fd` open (async-signal-safe).
pub fn is_perf_fd(fd: c_int) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|f| PERF_FDS.get(f / 64))
        .is_some_and(|w| w.load(Relaxed) & (1u64 << (fd as usize % 64)) != 0)
}

/// The `close` system call (the interposed `close` refuses the profiler's
/// own descriptors to the program).
fn raw_close(fd: c_int) -> c_int {
    // SAFETY: closing a descriptor the caller owns.
    unsafe { libc::syscall(libc::SYS_close, fd) as c_int }
}

/// True if `fd` is one of the profiler's live events (registered and
/// still the same event, [`owns_event`]). A registered number that the
/// program took over meanwhile is forgotten.
pub fn holds_event(fd: c_int) -> bool {
    if !is_perf_fd(fd) {
        return false;
    }
    let ours = owns_event(fd);
    if !ours {
        forget(fd);
    }
    ours
}

/// `close_range(first, last, flags)` that leaves the profiler's live
/// events, its message descriptor and its pinned output directory open: the system call on the gaps between them (the first call
/// carries `CLOSE_RANGE_UNSHARE`, so the rest act on the new table).
/// Returns 0 or -1 with errno, as the call.
pub fn close_range_sparing_ours(first: u32, last: u32, flags: u32) -> c_int {
    super::floor::while_none_opening(|| close_range_sparing_ours_now(first, last, flags))
}

fn close_range_sparing_ours_now(first: u32, last: u32, flags: u32) -> c_int {
    const CLOSE_RANGE_UNSHARE: u32 = 1 << 1;
    let call = |lo: u32, hi: u32, flags: u32| -> c_int {
        // SAFETY: the close_range system call on numbers the program asked
        // to close (ours are left out).
        unsafe { libc::syscall(libc::SYS_close_range, lo, hi, flags) as c_int }
    };
    if first > last {
        return call(first, last, flags);
    }
    let mut ours: [u32; 64] = [0; 64];
    let mut n = 0;
    let hi = (last as usize).min(PERF_FDS.len() * 64 - 1);
    let mut fd = first as usize;
    while fd <= hi && n < ours.len() {
        if PERF_FDS[fd / 64].load(Relaxed) == 0 {
            fd = (fd / 64 + 1) * 64;
            continue;
        }
        if holds_event(fd as c_int) {
            ours[n] = fd as u32;
            n += 1;
        }
        fd += 1;
    }
    // The message descriptor (`messages`) and the pinned output directory
    // (`outdir`) are spared too, in order.
    let others = [
        super::messages::message_fd_in(first, last),
        super::outdir::dir_fd_in(first, last),
    ];
    for m in others.into_iter().flatten() {
        if n < ours.len() && !ours[..n].contains(&m) {
            let at = ours[..n].partition_point(|&o| o < m);
            ours.copy_within(at..n, at + 1);
            ours[at] = m;
            n += 1;
        }
    }
    let mut lo = first;
    let mut flags = flags;
    for &o in &ours[..n] {
        if o > lo {
            let rc = call(lo, o - 1, flags);
            if rc != 0 {
                return rc;
            }
            flags &= !CLOSE_RANGE_UNSHARE;
        }
        lo = o + 1;
    }
    if n > 0 && lo == 0 {
        // (The last of ours was u32::MAX: nothing above it.)
        return 0;
    }
    if lo <= last {
        return call(lo, last, flags);
    }
    0
}
