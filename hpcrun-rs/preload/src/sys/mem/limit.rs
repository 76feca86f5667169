//! The library's own mappings under an address-space limit (`ulimit -v`,
//! `RLIMIT_AS`), and the first mapping refused.
//!
//! The program and the library share the limit. Left alone, the
//! library's tables that grow with the run (the call-path trees, the
//! small-block map's slabs, its heap's chunks) would take address space
//! until the kernel refused them, and the program's next `malloc` would
//! then fail where it succeeded natively. So under a limit every mapping
//! the library makes for its own growth leaves [`headroom_bytes`] of the
//! limit to the program ([`map_private`]): it asks the kernel for that
//! much more and unmaps the excess at once, so that the kernel's own
//! check of the limit decides, without reading the process's size.
//!
//! The first refusal, the kernel's or the headroom's, is recorded
//! ([`refused`]): from then on the layers above stop growing what they
//! can do without ([`short_of_memory`]): the hooks stop tracking new
//! blocks, the trees stop growing (samples on new call paths are dropped
//! and counted), new threads are not measured, and the profiles are
//! written from the heap's reserve.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};

use super::{raw_mmap, raw_munmap};

const PAGE: usize = 4096;

/// The least address space left to the program under a limit.
pub const MIN_HEADROOM: usize = 1 << 20;

/// Address space the library's mappings leave to the program under an
/// address-space limit of `limit` bytes: a 64th of it (page-rounded), at
/// least [`MIN_HEADROOM`].
pub fn headroom_bytes(limit: u64) -> usize {
    (usize::try_from(limit / 64).unwrap_or(usize::MAX) & !(PAGE - 1)).max(MIN_HEADROOM)
}

/// The headroom under the process's limit now (0 without one).
fn headroom_now() -> usize {
    super::super::address_space_limit().map_or(0, headroom_bytes)
}

/// The errno of the first refused mapping (0: none refused yet), when
/// (CLOCK_MONOTONIC ns), and whether the headroom refused it.
static REFUSED_ERRNO: AtomicI32 = AtomicI32::new(0);
static REFUSED_AT_NS: AtomicU64 = AtomicU64::new(0);
static REFUSED_FOR_HEADROOM: AtomicBool = AtomicBool::new(false);

/// Records a refused mapping (the first one is kept): `errno` of the
/// failed call, `headroom` if the mapping failed only with the headroom
/// added.
pub fn note_refused(errno: c_int, headroom: bool) {
    if REFUSED_ERRNO
        .compare_exchange(0, errno.max(1), Relaxed, Relaxed)
        .is_ok()
    {
        REFUSED_FOR_HEADROOM.store(headroom, Relaxed);
        REFUSED_AT_NS.store(super::super::monotonic_ns(), Relaxed);
    }
}

/// The errno of the first mapping refused to the library and when it
/// happened (CLOCK_MONOTONIC ns), if one was.
pub fn refused() -> Option<(i32, u64)> {
    let errno = REFUSED_ERRNO.load(Relaxed);
    (errno != 0).then(|| (errno, REFUSED_AT_NS.load(Relaxed)))
}

/// True if the first refusal was the headroom's: the kernel would have
/// granted the mapping, but it would have left the program less than
/// [`headroom_bytes`] of its limit.
pub fn refused_for_headroom() -> bool {
    REFUSED_FOR_HEADROOM.load(Relaxed)
}

/// True once a mapping was refused: callers that can do without memory
/// (tracking one more block, a new tree chunk) should.
#[inline]
pub fn short_of_memory() -> bool {
    REFUSED_ERRNO.load(Relaxed) != 0
}

/// Maps `bytes` with `extra` more after them and unmaps the `extra`
/// (the limit's check without the process's size): the mapping, or the
/// errno of the refusal.
fn map_with_room(bytes: usize, extra: usize, prot: c_int, flags: c_int) -> Result<*mut u8, c_int> {
    let total = bytes.checked_add(extra).ok_or(libc::ENOMEM)?;
    let p = raw_mmap(0, total, prot, flags, -1, 0).ok_or_else(super::super::errno)?;
    if extra > 0 {
        raw_munmap(p as u64 + bytes as u64, extra);
    }
    Ok(p)
}

/// A private anonymous read-write mapping of `bytes` (`flags` added to
/// `MAP_PRIVATE | MAP_ANONYMOUS`) that leaves the program its headroom
/// under an address-space limit. A refusal is recorded ([`refused`]) and
/// gives `None`.
pub fn map_private(bytes: usize, flags: c_int) -> Option<*mut u8> {
    let p = try_map_private(bytes, flags);
    if p.is_none() {
        let errno = super::super::errno();
        note_refused(errno, errno == libc::ENOMEM && headroom_now() > 0);
    }
    p
}

/// As [`map_private`], without recording a refusal (a mapping the
/// caller can do without, such as a region guessed generously; errno
/// says why).
pub fn try_map_private(bytes: usize, flags: c_int) -> Option<*mut u8> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags;
    match map_with_room(
        bytes,
        headroom_now(),
        libc::PROT_READ | libc::PROT_WRITE,
        flags,
    ) {
        Ok(p) => Some(p),
        Err(errno) => {
            super::super::set_errno(errno);
            None
        }
    }
}

/// True if the library may take `more` bytes of address space more (a
/// mapping it grows in place): always without a limit; under one, if
/// the headroom stays (a reservation of `more` plus the headroom is
/// granted, and given back at once). A refusal is recorded.
pub fn room_to_grow(more: usize) -> bool {
    let headroom = headroom_now();
    if headroom == 0 {
        return true;
    }
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    match map_with_room(0, more.saturating_add(headroom), libc::PROT_NONE, flags) {
        Ok(_) => true,
        Err(errno) => {
            note_refused(errno, errno == libc::ENOMEM);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headroom_is_a_64th_of_the_limit_at_least_a_mib() {
        assert_eq!(headroom_bytes(400 << 20), 6400 << 10);
        assert_eq!(headroom_bytes(16 << 20), MIN_HEADROOM);
        assert_eq!(headroom_bytes((64 << 20) + 100), 1 << 20);
        assert_eq!(headroom_bytes(u64::MAX) % PAGE, 0);
    }

    #[test]
    fn a_mapping_with_room_keeps_only_its_own_bytes() {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let p = map_with_room(PAGE, 4 * PAGE, prot, flags).unwrap();
        // SAFETY: the first page is ours, mapped read-write.
        unsafe { p.write(7) };
        // The excess is unmapped: mincore fails on its first page.
        let mut vec = 0u8;
        // SAFETY: mincore writes one byte for one page into `vec`.
        let r = unsafe {
            libc::mincore(
                (p as usize + PAGE) as *mut libc::c_void,
                PAGE,
                &mut vec as *mut u8 as *mut _,
            )
        };
        assert_eq!(r, -1, "the page after the mapping is unmapped");
        raw_munmap(p as u64, PAGE);
    }
}
