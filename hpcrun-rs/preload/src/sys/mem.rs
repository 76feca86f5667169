//! Memory: the `mmap` family and System V `shmat`/`shmdt` as system
//! calls, the file behind a descriptor, zeroed mappings for
//! lock-free tables ([`ZeroInit`]), read-only file mappings, views of
//! loaded code, and the NUMA node of a page; under an address-space
//! limit, the library's mappings leave the program its headroom and the
//! first refusal is recorded ([`limit`]).

use std::ffi::{c_int, c_void};

pub mod limit;

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

/// The file behind descriptor `fd` (`readlink` of `/proc/self/fd/FD`),
/// written into `out`; returns its length (cut to `out.len()`), 0 when the
/// link cannot be read. Allocates nothing.
pub fn fd_path(fd: c_int, out: &mut [u8]) -> usize {
    if fd < 0 {
        return 0;
    }
    let mut link = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0";
    let mut digits = [0u8; 10];
    let (mut n, mut v) = (0, fd as u32);
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        link[14 + i] = digits[n - 1 - i];
    }
    let saved = super::errno();
    // SAFETY: `link` is NUL-terminated (at most 10 digits after the
    // 14-byte prefix, in a 25-byte array of zeros) and `out` is writable
    // for its length; readlink writes at most that many bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_readlink,
            link.as_ptr(),
            out.as_mut_ptr(),
            out.len(),
        )
    };
    super::set_errno(saved);
    if r < 0 {
        0
    } else {
        r as usize
    }
}

/// shmat, bypassing the interposed `shmat`: the address of the attached
/// System V segment `id`, `None` (errno set) on failure.
pub fn raw_shmat(id: c_int, addr: u64, flags: c_int) -> Option<u64> {
    // SAFETY: forwards the program's own request; the kernel picks or
    // checks the address (SHM_REMAP is the program's choice).
    let r = unsafe { libc::syscall(libc::SYS_shmat, id, addr, flags) };
    (r != -1).then_some(r as u64)
}

/// shmdt, bypassing the interposed `shmdt`.
pub fn raw_shmdt(addr: u64) -> c_int {
    // SAFETY: forwards the program's own request for a segment it attached.
    unsafe { libc::syscall(libc::SYS_shmdt, addr) as c_int }
}

/// The size and key of System V segment `id` (`shmctl(IPC_STAT)`); `None`
/// when the kernel refuses. errno is left as it was.
pub fn shm_size_and_key(id: c_int) -> Option<(u64, i32)> {
    let saved = super::errno();
    // SAFETY: all-zero bytes are a valid shmid_ds (integers only).
    let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: IPC_STAT writes one shmid_ds into `ds`, which is writable.
    let r = unsafe { libc::syscall(libc::SYS_shmctl, id, libc::IPC_STAT, &mut ds) };
    super::set_errno(saved);
    (r == 0).then_some((ds.shm_segsz as u64, ds.shm_perm.__key))
}

/// Types for which all-zero bytes are a valid value (atomics, integers).
///
/// # Safety
/// Implement only for types whose every field is an integer or atomic.
pub unsafe trait ZeroInit: Sync {}

// SAFETY: an atomic integer is valid when all its bytes are zero.
unsafe impl ZeroInit for std::sync::atomic::AtomicU32 {}
// SAFETY: see above.
unsafe impl ZeroInit for std::sync::atomic::AtomicU64 {}
// SAFETY: an integer is valid when all its bytes are zero.
unsafe impl ZeroInit for u64 {}
// SAFETY: an array of values valid when zero is valid when zero.
unsafe impl<T: ZeroInit, const N: usize> ZeroInit for [T; N] {}

/// A private, zeroed, lazily reserved anonymous mapping of `bytes`
/// (leaving the program its headroom under an address-space limit; a
/// refusal is recorded: [`limit::map_private`]).
fn map_anonymous(bytes: usize) -> Option<*mut u8> {
    limit::map_private(bytes, libc::MAP_NORESERVE)
}

thread_local! {
    /// The region [`with_region`] carves tables from on this thread:
    /// (next free address, end); (0, 0) outside it.
    static REGION: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The page size the region rounds pieces to.
const PIECE_ALIGN: u64 = 4096;

/// `bytes` (rounded up to pages) from the current region, if there is
/// one and it has room.
fn carve(bytes: usize) -> Option<*mut u8> {
    REGION.with(|r| {
        let (next, end) = r.get();
        let size = (bytes as u64).checked_add(PIECE_ALIGN - 1)? & !(PIECE_ALIGN - 1);
        if next == 0 || end - next < size {
            return None;
        }
        r.set((next + size, end));
        Some(next as *mut u8)
    })
}

/// Runs `build` with every [`map_zeroed`] of this thread carved from one
/// mapping of `bytes` (a thread's tables: one `mmap` instead of one per
/// table, each costing a system call and a search of the address space
/// at thread start). Tables that do not fit, or all of them when the
/// mapping fails (an address-space limit), are mapped on their own as
/// before. The part of the region no table took is unmapped after
/// `build`, so `bytes` may be a generous guess. Returns `build`'s result
/// and the bytes the tables asked for (page-rounded: the size to ask for
/// next time). The tables are never unmapped (they live as long as the
/// process).
pub fn with_region<R>(bytes: usize, build: impl FnOnce() -> R) -> (R, usize) {
    let bytes = (bytes as u64 + PIECE_ALIGN - 1) & !(PIECE_ALIGN - 1);
    let start = if bytes > 0 {
        // (A guess: refused, the tables are mapped one by one.)
        limit::try_map_private(bytes as usize, libc::MAP_NORESERVE).map_or(0, |p| p as u64)
    } else {
        0
    };
    let outer = REGION.with(|r| r.replace((start, start + bytes)));
    let outer_asked = ASKED.with(|a| a.replace(0));
    let result = build();
    let asked = ASKED.with(|a| a.replace(outer_asked));
    let (next, end) = REGION.with(|r| r.replace(outer));
    if start != 0 && next < end {
        raw_munmap(next, (end - next) as usize);
    }
    (result, asked)
}

thread_local! {
    /// Page-rounded bytes [`map_zeroed`] was asked for on this thread
    /// inside [`with_region`].
    static ASKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `bytes` of zeroed, page-aligned memory: carved from the thread's
/// region inside [`with_region`] (and counted as asked of it), else a
/// mapping of its own. `None` when the kernel refuses.
fn carve_or_map(bytes: usize) -> Option<*mut u8> {
    ASKED.with(|a| {
        let page = PIECE_ALIGN as usize - 1;
        a.set(a.get().saturating_add(bytes.saturating_add(page) & !page))
    });
    match carve(bytes) {
        Some(p) => Some(p),
        None => map_anonymous(bytes),
    }
}

/// Maps `len` zeroed values of `T` for the rest of the process's life. Pages
/// are reserved lazily (MAP_NORESERVE), so large capacities cost nothing
/// until used. Returns `None` when the kernel refuses.
/// Inside [`with_region`], the table is carved from the region instead
/// (page-aligned, the rest of its last page unused).
pub fn map_zeroed<T: ZeroInit>(len: usize) -> Option<&'static [T]> {
    let bytes = len.checked_mul(std::mem::size_of::<T>())?.max(1);
    let p = carve_or_map(bytes)?;
    // SAFETY: the mapping is zeroed, page-aligned (enough for T), never
    // unmapped, and T is valid when zeroed (ZeroInit).
    Some(unsafe { std::slice::from_raw_parts(p as *const T, len) })
}

/// Zeroed, untouched memory for one `T` to be built in place (its fields
/// written one by one: those valid when zero need no writing, and their
/// pages are touched only when used), carved like [`map_zeroed`] from the
/// thread's region if one is being set up, else mapped on its own. Never
/// unmapped. `None` when the kernel refuses.
pub fn map_uninit<T>() -> Option<&'static mut std::mem::MaybeUninit<T>> {
    const { assert!(std::mem::align_of::<T>() <= PIECE_ALIGN as usize) };
    let p = carve_or_map(std::mem::size_of::<T>().max(1))?;
    // SAFETY: a fresh private mapping (or a part of one no other table
    // took) of at least `bytes`, page-aligned (enough for T, checked
    // above), never unmapped: the caller has the only reference.
    Some(unsafe { &mut *(p as *mut std::mem::MaybeUninit<T>) })
}

/// Maps `len` zeroed values of `T` on a mapping of their own, never
/// carved from a thread's region (a table that grows: [`discard`] gives
/// its pages back when it is replaced). `None` when the kernel refuses.
pub fn map_own<T: ZeroInit>(len: usize) -> Option<&'static [T]> {
    let bytes = len.checked_mul(std::mem::size_of::<T>())?.max(1);
    let p = map_anonymous(bytes)?;
    // SAFETY: the mapping is zeroed, page-aligned (enough for T), never
    // unmapped, and T is valid when zeroed (ZeroInit).
    Some(unsafe { std::slice::from_raw_parts(p as *const T, len) })
}

/// Gives back the pages of a table from [`map_zeroed`] (`MADV_DONTNEED`):
/// it reads as zeros again, and only the pages touched from now on take
/// memory. For a thread's tables handed to the next thread; no other
/// thread may be writing them meanwhile (it would lose its writes).
pub fn discard<T: ZeroInit>(table: &[T]) {
    let page = PIECE_ALIGN as usize;
    let start = table.as_ptr() as usize;
    let bytes = std::mem::size_of_val(table);
    if bytes == 0 || start % page != 0 {
        return;
    }
    let len = (bytes + page - 1) & !(page - 1);
    // SAFETY: the range is a page-aligned table of ours (`map_zeroed`
    // pieces are page-aligned and own their last page); dropping its pages
    // leaves zeros, a valid value of `T` (ZeroInit).
    unsafe { libc::syscall(libc::SYS_madvise, start, len, libc::MADV_DONTNEED) };
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

/// Makes `len` bytes of `file` from `offset` zeros whose disk blocks are
/// allocated (`fallocate`), so that later writes there cannot fail for
/// want of space; written as zeros where the file system cannot allocate.
pub fn reserve_zeros(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    // SAFETY: fallocate on an open descriptor of ours; mode 0 allocates
    // and extends the file, reading back as zeros.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as i64, len as i64) };
    if r == 0 {
        return Ok(());
    }
    file.write_all_at(&vec![0u8; len as usize], offset)
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

/// The bytes [start, end) of a loaded module, if they lie inside one of its
/// `segments`; `None` otherwise.
///
/// # Safety
/// Every range of `segments` is mapped readable for as long as the
/// returned slice is used: the PT_LOAD segments of a module as the dynamic
/// loader reports them ([`crate::sys::loaded_modules`]), while the module
/// stays loaded (the module snapshots keep a module until no handler can
/// read it), or memory the caller mapped and never unmaps.
pub unsafe fn loaded_bytes(
    segments: &[(u64, u64, bool)],
    start: u64,
    end: u64,
) -> Option<&'static [u8]> {
    let inside = start <= end && segments.iter().any(|&(s, e, _)| start >= s && end <= e);
    // SAFETY: the range is inside a segment that, per the caller's
    // contract, stays mapped readable while the slice is used.
    inside.then(|| unsafe { memory(start, (end - start) as usize) })
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

/// Set once `process_vm_readv` was refused as a call (a seccomp policy or
/// a kernel without it): later reads give up without the system call.
static CHECKED_READ_REFUSED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Reads the 8-byte word at `addr` of this process without risking a
/// fault: `process_vm_readv` on the own process returns an error for an
/// unmapped or unreadable address instead of raising SIGSEGV. Safe in a
/// signal handler (one system call; the caller keeps errno). `None` when
/// the kernel refuses (unmapped, or a seccomp policy without the call:
/// then never tried again).
pub fn read_word_checked(addr: u64) -> Option<u64> {
    use std::sync::atomic::Ordering::Relaxed;
    if CHECKED_READ_REFUSED.load(Relaxed) {
        return None;
    }
    let mut word: u64 = 0;
    let local = libc::iovec {
        iov_base: (&mut word as *mut u64).cast::<c_void>(),
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: 8,
    };
    // SAFETY: the kernel writes at most 8 bytes into `word` through
    // `local`; `remote` is only read by the kernel, which checks it.
    let n = unsafe {
        libc::syscall(
            libc::SYS_process_vm_readv,
            libc::getpid(),
            &local as *const libc::iovec,
            1usize,
            &remote as *const libc::iovec,
            1usize,
            0usize,
        )
    };
    if n < 0 && matches!(super::errno(), libc::EPERM | libc::ENOSYS | libc::EACCES) {
        CHECKED_READ_REFUSED.store(true, Relaxed);
    }
    (n == 8).then_some(word)
}

#[cfg(test)]
mod checked_read_tests {
    use super::read_word_checked;

    #[test]
    fn reads_a_mapped_word_and_refuses_an_unmapped_one() {
        let word: Box<u64> = Box::new(0x1234_5678_9abc_def0);
        assert_eq!(
            read_word_checked(&*word as *const u64 as u64),
            Some(0x1234_5678_9abc_def0)
        );
        assert_eq!(read_word_checked(8), None);
    }
}
