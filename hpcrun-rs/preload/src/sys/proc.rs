//! The process and its threads: ids, clocks, errno, stack bounds,
//! start-up, exit and fork registration, host name.

use std::ffi::{c_int, c_void};

pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

pub fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u32 }
}

pub fn getppid() -> u32 {
    // SAFETY: getppid has no preconditions. (The system call: libc's
    // `getppid` is the interposed one, `hooks::parent`.)
    unsafe { libc::syscall(libc::SYS_getppid) as u32 }
}

/// Clock `clock` in ns (`clock_gettime`: async-signal-safe); `None` for
/// a clock that does not exist (any more).
#[inline]
fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec; a bad clock id only returns an error.
    let ok = unsafe { libc::clock_gettime(clock, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` in ns (async-signal-safe; a vDSO read, no system
/// call, on x86-64 with a TSC clock source).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// The soft limit of open file descriptors (`ulimit -n`), if finite.
pub fn open_files_limit() -> Option<u64> {
    // SAFETY: getrlimit writes into a valid, owned struct.
    let limit = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0).then_some(l.rlim_cur)
    };
    limit.filter(|&l| l != libc::RLIM_INFINITY)
}

/// The address-space limit (`ulimit -v`, RLIMIT_AS) in bytes, if any.
pub fn address_space_limit() -> Option<u64> {
    // SAFETY: getrlimit writes into a valid, owned struct.
    let limit = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_AS, &mut l) == 0).then_some(l.rlim_cur)
    };
    limit.filter(|&l| l != libc::RLIM_INFINITY)
}

/// True if thread `tid` of this process still runs (`tgkill` with
/// signal 0: no signal is sent).
pub fn thread_alive(tid: u32) -> bool {
    // SAFETY: signal 0 only checks that the thread exists.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            getpid() as libc::pid_t,
            tid as libc::pid_t,
            0,
        ) == 0
    }
}

/// True if process `pid` exists and has not ended (a zombie, ended but
/// not reaped yet, has ended). Reads `/proc/PID/stat`.
pub fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "PID (COMM) STATE ...": the state follows the last ')'.
    let state = stat
        .iter()
        .rposition(|&b| b == b')')
        .and_then(|at| stat.get(at + 2));
    !matches!(state, Some(b'Z' | b'X') | None)
}

/// Wall-clock time in ns since the epoch.
pub fn now_unix_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME).unwrap_or(0)
}

pub fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(value: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = value }
}

/// The calling thread's stack as [low, high), as glibc's
/// `pthread_getattr_np` gives it. `here`: an address on that stack (a
/// local of the thread's own frames, [`stack_address`]; the call itself
/// may run on another stack).
pub fn current_stack_range(here: u64) -> Option<(u64, u64)> {
    if let Some(range) = main_stack_range(here) {
        return Some(range);
    }
    // glibc allocates the attributes' CPU set with `malloc`: served by the
    // library's heap (freed again inside), a thread that never allocates
    // gets no glibc arena from this call.
    super::heap::with_libc_served(stack_range_of_self)
}

/// An address on the calling thread's current stack.
#[inline(always)]
pub fn stack_address() -> u64 {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as u64
}

extern "C" {
    /// The loader's record of where the initial thread's stack began
    /// (glibc, `ld.so`).
    static __libc_stack_end: *mut c_void;
}

/// The initial thread's stack when `here` lies on it, computed as
/// glibc's `pthread_getattr_np` does but without reading
/// `/proc/self/maps` (a few dozen lines formatted by the kernel and
/// parsed with `sscanf`, at every process start): high is the page above
/// `__libc_stack_end`, low is high minus the stack limit less what lies
/// between high and the end of the stack's mapping. That end is found as
/// the kernel lays a new image's stack out (the executable's name,
/// `AT_EXECFN`, is its last string, followed by one null pointer) and
/// checked with `mincore` (the page there is not mapped, the one below
/// is). `None` (glibc's answer is taken) without a stack limit (glibc
/// then bounds the stack by the mapping below it, which only the maps
/// tell), off that stack (another thread, or a forked child of one), or
/// when a check fails.
fn main_stack_range(here: u64) -> Option<(u64, u64)> {
    // SAFETY: reads a pointer-sized variable the loader set at start.
    let stack_end = unsafe { __libc_stack_end } as u64;
    // SAFETY: getauxval has no preconditions.
    let page = unsafe { libc::getauxval(libc::AT_PAGESZ) };
    if !page.is_power_of_two() {
        return None;
    }
    let high = (stack_end & !(page - 1)).checked_add(page)?;
    let limit = stack_limit()?;
    // SAFETY: getauxval has no preconditions.
    let execfn = unsafe { libc::getauxval(libc::AT_EXECFN) };
    if stack_end == 0 || execfn == 0 || here >= high || here < high.saturating_sub(limit) {
        return None;
    }
    // SAFETY: AT_EXECFN points to the NUL-terminated path the kernel
    // copied onto the initial stack.
    let name_len = unsafe { libc::strlen(execfn as *const libc::c_char) } as u64;
    let end = execfn + name_len + 1 + 8;
    if end % page != 0 || end < high || end - high > limit || !mapped(end - page) || mapped(end) {
        return None;
    }
    let size = (limit - (end - high)) & !(page - 1);
    Some((high - size, high))
}

/// The soft stack limit (`None`: unlimited or unknown).
fn stack_limit() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: writes one rlimit.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut rl) } == 0;
    (ok && rl.rlim_cur != libc::RLIM_INFINITY).then_some(rl.rlim_cur)
}

/// True if the page at `addr` (page-aligned) is mapped (`mincore` fails
/// with ENOMEM on an unmapped one).
fn mapped(addr: u64) -> bool {
    let mut resident = 0u8;
    // SAFETY: mincore only inspects the mappings and writes one byte per
    // page (one page here) into `resident`.
    unsafe { libc::mincore(addr as *mut c_void, 1, &mut resident) == 0 }
}

fn stack_range_of_self() -> Option<(u64, u64)> {
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

/// Runs `f` once at library load, from `.init_array`.
#[macro_export]
macro_rules! on_load {
    ($f:path) => {
        #[used]
        #[allow(unsafe_code)] // a link section is how `.init_array` works
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
pub fn at_fork(child: extern "C" fn()) {
    // SAFETY: registering a plain function.
    unsafe { libc::pthread_atfork(None, None, Some(child)) };
}

/// A pthread key whose destructor runs at thread exit.
pub fn thread_exit_key(destructor: extern "C" fn(*mut c_void)) -> Option<libc::pthread_key_t> {
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

/// Starts a detached thread of the library's own (`stack_bytes` of
/// stack, named `name` if given) running `f`; glibc's allocations on it
/// come from the library's heap (`heap::serve_libc_on_this_thread`). A
/// plain pthread: a std thread would allocate with glibc's `calloc` at its
/// start, before `f` runs. The thread names itself
/// (`prctl(PR_SET_NAME)`): `pthread_setname_np` from the creator would
/// open `/proc/self/task/<tid>/comm`, a descriptor and a call the program
/// never made. Returns the errno of `pthread_create`.
pub fn spawn_thread(
    stack_bytes: usize,
    name: Option<&'static std::ffi::CStr>,
    f: Box<dyn FnOnce() + Send>,
) -> Result<(), i32> {
    type Job = (Option<&'static std::ffi::CStr>, Box<dyn FnOnce() + Send>);
    extern "C" fn start(arg: *mut c_void) -> *mut c_void {
        super::heap::serve_libc_on_this_thread();
        // SAFETY: `arg` is the Box leaked below, handed to this thread only.
        let (name, job) = *unsafe { Box::from_raw(arg as *mut Job) };
        if let Some(name) = name {
            // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most
            // 16 bytes (longer ones are cut).
            unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) };
        }
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        std::ptr::null_mut()
    }
    let arg = Box::into_raw(Box::new((name, f)));
    // SAFETY: `attr` is initialised before use and destroyed after; the
    // new thread owns `arg` once pthread_create succeeds, else it is
    // reclaimed here.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstacksize(&mut attr, stack_bytes);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = 0;
        let rc = libc::pthread_create(&mut thread, &attr, start, arg as *mut c_void);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            drop(Box::from_raw(arg));
            return Err(rc);
        }
    }
    Ok(())
}

/// Waits on the futex `word` while it holds `expected`, at most
/// `timeout_ns` (a wake-up, a signal or a spurious return end it early:
/// the caller checks its condition again).
pub fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, timeout_ns: u64) {
    const FUTEX_WAIT_PRIVATE: c_int = 128;
    let timeout = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a futex wait on an aligned u32 this process owns (an atomic
    // lives as long as the reference), with a relative timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            FUTEX_WAIT_PRIVATE,
            expected,
            &timeout as *const libc::timespec,
        )
    };
}

/// Wakes every thread waiting on the futex `word` ([`futex_wait`]).
pub fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    const FUTEX_WAKE_PRIVATE: c_int = 129;
    // SAFETY: a futex wake on an aligned u32 this process owns.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            FUTEX_WAKE_PRIVATE,
            c_int::MAX,
        )
    };
}

/// True while thread `tid` of this process is in its thread group (its
/// `/proc/self/task` entry goes when the kernel has reaped it: only
/// then does the process count one thread less, for `unshare` and for
/// `/proc/self/status`).
pub fn task_alive(tid: u32) -> bool {
    let mut path = [0u8; 40];
    let mut text = std::io::Cursor::new(&mut path[..]);
    let _ = std::io::Write::write_fmt(&mut text, format_args!("/proc/self/task/{tid}\0"));
    // SAFETY: a NUL-terminated path in a local buffer.
    unsafe { libc::access(path.as_ptr() as *const libc::c_char, libc::F_OK) == 0 }
}

/// Host name of the machine, read once (when the library loads; a forked
/// child keeps its parent's without a call or an allocation).
pub fn hostname() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: buffer and its length.
        if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
            return String::from("localhost");
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    })
}

/// The calling thread's stack bounds; reading a word inside them is safe
/// while the thread runs (its stack stays mapped).
#[derive(Debug, Clone, Copy, Default)]
pub struct StackBounds {
    low: u64,
    high: u64,
}

impl StackBounds {
    /// Bounds of the calling thread's stack, which holds `here`
    /// ([`stack_address`]).
    pub fn current(here: u64) -> Option<StackBounds> {
        current_stack_range(here).map(|(low, high)| StackBounds { low, high })
    }

    /// The bounds as [low, high).
    pub fn range(&self) -> (u64, u64) {
        (self.low, self.high)
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

/// CPU time of the calling thread (ns).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// CPU time of thread `tid` of this process (its kernel CPU clock, as
/// `pthread_getcpuclockid` builds it); `None` once the thread is gone.
pub fn thread_cpu_ns_of(tid: u32) -> Option<u64> {
    // CPUCLOCK_SCHED (2) | CPUCLOCK_PERTHREAD_MASK (4), tid inverted << 3.
    clock_ns(((!(tid as libc::clockid_t)) << 3) | 6)
}

/// What [`thread_usage`] reads of the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadUsage {
    /// Page faults so far, minor and major.
    pub faults: u64,
    /// User and system CPU time (us; the kernel's tick-sampled split of
    /// the thread's CPU time).
    pub user_us: u64,
    pub system_us: u64,
}

/// The calling thread's page faults and CPU time split
/// (`getrusage(RUSAGE_THREAD)`: one system call, safe in a signal
/// handler; the caller keeps errno).
pub fn thread_usage() -> Option<ThreadUsage> {
    // SAFETY: the kernel fills the owned, zeroed `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: writes only `usage`, live for the call.
    let r = unsafe { libc::syscall(libc::SYS_getrusage, libc::RUSAGE_THREAD, &mut usage) };
    let us = |t: libc::timeval| (t.tv_sec as u64) * 1_000_000 + t.tv_usec as u64;
    (r == 0).then(|| ThreadUsage {
        faults: (usage.ru_minflt as u64).wrapping_add(usage.ru_majflt as u64),
        user_us: us(usage.ru_utime),
        system_us: us(usage.ru_stime),
    })
}

/// User-mode CPU time of thread `tid` of this process (its kernel
/// CPUCLOCK_VIRT clock); `None` once the thread is gone.
pub fn thread_user_ns_of(tid: u32) -> Option<u64> {
    // CPUCLOCK_VIRT (1) | CPUCLOCK_PERTHREAD_MASK (4), tid inverted << 3.
    clock_ns(((!(tid as libc::clockid_t)) << 3) | 5)
}

extern "C" {
    /// glibc's environment of the process.
    static mut environ: *const *const std::ffi::c_char;
}

/// The process's environment (`environ`), as the `exec` functions without
/// an environment argument pass it on.
pub fn environment() -> *const *const std::ffi::c_char {
    // SAFETY: reads the pointer glibc keeps (a plain global, which
    // `setenv` may replace: read, never referenced).
    unsafe { std::ptr::addr_of!(environ).read() }
}

/// True on an Intel processor (`GenuineIntel` in CPUID leaf 0), read once.
pub fn intel_cpu() -> bool {
    static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INTEL.get_or_init(|| {
        #[allow(unused_unsafe)]
        // SAFETY: CPUID leaf 0 exists on every x86-64 processor and only
        // reads identification registers.
        let r = unsafe { std::arch::x86_64::__cpuid(0) };
        // "Genu" "ineI" "ntel" in ebx, edx, ecx.
        r.ebx == 0x756e_6547 && r.edx == 0x4965_6e69 && r.ecx == 0x6c65_746e
    })
}

/// In a forked child: releases `lock`, which a thread of the parent may
/// have held at the fork (that thread does not exist here), writing it
/// only when it is held, so that a page the child only reads stays
/// shared with the parent (no copy-on-write fault in a child that execs
/// at once).
pub fn release_after_fork(lock: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering::{Relaxed, Release};
    if lock.load(Relaxed) {
        lock.store(false, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The initial thread's stack as glibc computes it from
    /// `/proc/self/maps`: the mapping holding `__libc_stack_end`, the
    /// stack limit, the mapping below.
    fn main_stack_from_maps() -> Option<(u64, u64)> {
        // SAFETY: as in `main_stack_range`.
        let stack_end = unsafe { __libc_stack_end } as u64;
        let high = (stack_end & !4095) + 4096;
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        let mut last_to = 0;
        for line in maps.lines() {
            let range = line.split(' ').next()?;
            let (from, to) = range.split_once('-')?;
            let from = u64::from_str_radix(from, 16).ok()?;
            let to = u64::from_str_radix(to, 16).ok()?;
            if (from..to).contains(&stack_end) {
                let limit = stack_limit()?;
                let size = ((limit - (to - high)) & !4095).min(high - last_to);
                return Some((high - size, high));
            }
            last_to = to;
        }
        None
    }

    #[test]
    fn the_initial_stack_is_what_the_maps_say() {
        // SAFETY: as in `main_stack_range`.
        let on_it = unsafe { __libc_stack_end } as u64;
        let Some(expected) = main_stack_from_maps() else {
            // Unlimited stack: glibc's own answer is used.
            assert_eq!(main_stack_range(on_it), None);
            return;
        };
        assert_eq!(main_stack_range(on_it), Some(expected));
        // Off that stack (a test runs on a thread of its own): glibc's.
        let here = stack_address();
        assert_eq!(main_stack_range(here), None);
        let (low, high) = current_stack_range(here).expect("the thread's stack");
        assert!((low..high).contains(&here));
    }
}
