//! Call-path unwinding with framehop, from the signal handler and from the
//! malloc hooks, without allocating (`MustNotAllocateDuringUnwind`).
//!
//! The unwinder is built from the module snapshot (DWARF CFI from each
//! module's `.eh_frame`/`.eh_frame_hdr`, read in place from mapped memory)
//! and published for lock-free use.
//!
//! The walk also tells which frame owns a stack address ([`owning_frame`]):
//! frame `i` occupies `[SP_i, CFA_i)`, where the CFA (the caller's stack
//! pointer) is what unwinding the frame yields; the interrupted frame
//! also owns the red zone below its stack pointer. The sample handler's
//! walk publishes those ranges ([`FrameRanges`]) so that another thread's
//! sample of an address on this thread's stack finds its frame too.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering::*};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder,
};

use crate::sys::{self, StackBounds};

pub type Unwind = UnwinderX86_64<&'static [u8], MustNotAllocateDuringUnwind>;
pub type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// Memory obtained at a thread's start for one [`Cache`]'s boxes (its
/// 24 KiB unwind context and 8 KiB rule cache), built at its first use
/// (`sys::Prepared`; a unit test checks that they fit). Address space
/// only until then.
pub const CACHE_MEMORY: usize = 36 << 10;

static UNWINDER: sys::Published<Unwind> = sys::Published::new();

/// The current unwinder; valid only inside a read section (`sys::reading`).
pub fn get() -> Option<&'static Unwind> {
    UNWINDER.get()
}

/// What the unwinder needs of a module (stated virtual addresses).
#[derive(Debug, Clone, Default)]
pub struct UnwindSections {
    pub text: Option<(u64, u64)>,
    pub eh_frame: Option<(u64, u64)>,
    pub eh_frame_hdr: Option<(u64, u64)>,
    pub got: Option<(u64, u64)>,
}

/// One loaded module as the unwinder sees it.
pub struct CodeModule<'a> {
    pub path: &'a str,
    pub bias: u64,
    /// Loaded segments (runtime addresses) and whether they are executable.
    pub segments: &'a [(u64, u64, bool)],
    pub sections: &'a UnwindSections,
}

/// Builds and publishes an unwinder for every module of a new snapshot
/// (`modules::refresh` passes them).
#[allow(unsafe_code)] // reads the loaded `.eh_frame` sections in place
pub fn refresh<'a>(modules: impl IntoIterator<Item = CodeModule<'a>>) {
    let mut unwinder = Unwind::new();
    for m in modules {
        let (Some(text), Some(hdr), Some(eh)) = (
            m.sections.text,
            m.sections.eh_frame_hdr,
            m.sections.eh_frame,
        ) else {
            continue;
        };
        let Some(&(start, end, _)) = m.segments.iter().find(|s| s.2) else {
            continue;
        };
        let low = m.segments.iter().map(|s| s.0).min().unwrap_or(start);
        let high = m.segments.iter().map(|s| s.1).max().unwrap_or(end);
        // Section data read in place from the loaded segments.
        let in_memory = |(s, e): (u64, u64)| {
            // SAFETY: `m.segments` are the module's PT_LOAD segments as the
            // loader reported them; the unwinder drops the module before
            // `dlclose` unmaps it (`modules`).
            unsafe { sys::loaded_bytes(m.segments, s.wrapping_add(m.bias), e.wrapping_add(m.bias)) }
        };
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: Some(text.0..text.1),
            text: in_memory(text),
            eh_frame_svma: Some(eh.0..eh.1),
            eh_frame: in_memory(eh),
            eh_frame_hdr_svma: Some(hdr.0..hdr.1),
            eh_frame_hdr: in_memory(hdr),
            got_svma: m.sections.got.map(|g| g.0..g.1),
            ..Default::default()
        };
        unwinder.add_module(Module::new(m.path.to_string(), low..high, m.bias, info));
    }
    UNWINDER.publish(unwinder);
}

/// Result of an unwind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwound {
    /// Frames written (the first is the instruction pointer).
    pub len: usize,
    /// False if unwinding stopped on an error before reaching the root.
    pub complete: bool,
    /// The frame (index into the output) whose stack range holds the
    /// data address asked about ([`owning_frame`]), and that frame's CFA;
    /// `None` when not asked, or when no unwound frame holds it.
    pub owner: Option<(usize, u64)>,
}

/// Bytes below the stack pointer that the interrupted function may use
/// without moving it (the x86-64 System V red zone).
pub const RED_ZONE: u64 = 128;

/// Unwinds as [`unwind`] and also finds the frame that owns the stack
/// address `data`, if given: the first frame `i` with `data < CFA_i`,
/// provided `data >= SP_0 - RED_ZONE` (the interrupted frame's red
/// zone). An address above the last unwound frame's CFA, or any address
/// when the interrupted frame could not be unwound, has no owner. The
/// frames' ranges are published in `publish` (the thread's own table).
pub fn owning_frame(
    unwinder: &Unwind,
    cache: &mut Cache,
    stack: &StackBounds,
    (pc, sp, bp): (u64, u64, u64),
    data: Option<u64>,
    (out, publish): (&mut [u64], &FrameRanges),
) -> Unwound {
    let regs = UnwindRegsX86_64::new(pc, sp, bp);
    let lowest = sp.saturating_sub(RED_ZONE);
    let owner = data.filter(|&d| d >= lowest);
    publish.begin(lowest);
    let got = walk(
        unwinder,
        cache,
        stack,
        FrameAddress::from_instruction_pointer(pc),
        regs,
        (owner, Some(publish)),
        out,
    );
    publish.end();
    got
}

/// Frames of a thread's stack as its latest sample unwound them: the
/// frame's end (CFA) and its lookup address, innermost first, from the
/// interrupted SP minus the red zone. Written by the thread's own
/// handler, read by other threads' handlers (a sequence counter, odd
/// while written: a reader that meets a write finds nothing). Frames an
/// older sample saw may have returned since: the table says where the
/// frames were then, which holds for the long-lived ones (`main`, a
/// function around a parallel region) whose variables other threads read.
pub struct FrameRanges {
    seq: AtomicU64,
    len: AtomicU32,
    lowest: AtomicU64,
    cfa: [AtomicU64; PUBLISHED_FRAMES],
    address: [AtomicU64; PUBLISHED_FRAMES],
}

/// Frames a [`FrameRanges`] keeps (the innermost ones).
pub const PUBLISHED_FRAMES: usize = 64;

// SAFETY: atomics only: all-zero bytes are a valid (empty) table, the
// same as `default()`.
#[allow(unsafe_code)]
unsafe impl sys::ZeroInit for FrameRanges {}

impl Default for FrameRanges {
    fn default() -> Self {
        FrameRanges {
            seq: AtomicU64::new(0),
            len: AtomicU32::new(0),
            lowest: AtomicU64::new(0),
            cfa: std::array::from_fn(|_| AtomicU64::new(0)),
            address: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl FrameRanges {
    fn begin(&self, lowest: u64) {
        self.seq.fetch_add(1, Relaxed);
        fence(Release);
        self.len.store(0, Relaxed);
        self.lowest.store(lowest, Relaxed);
    }

    /// Forgets the published frames (the thread's state goes to the next
    /// thread): no address has an owner until its first sample.
    pub fn clear(&self) {
        self.begin(u64::MAX);
        self.end();
    }

    /// Frame `i` (lookup `address`) ends at `cfa`.
    fn set(&self, i: usize, cfa: u64, address: u64) {
        if i < PUBLISHED_FRAMES {
            self.cfa[i].store(cfa, Relaxed);
            self.address[i].store(address, Relaxed);
            self.len.store(i as u32 + 1, Relaxed);
        }
    }

    fn end(&self) {
        self.seq.fetch_add(1, Release);
    }

    /// The lookup address and the CFA of the frame that held `addr` at the
    /// latest published sample; `None` if none did, or the table was being
    /// written.
    pub fn owner(&self, addr: u64) -> Option<(u64, u64)> {
        let before = self.seq.load(Acquire);
        if before % 2 == 1 {
            return None;
        }
        let n = (self.len.load(Relaxed) as usize).min(PUBLISHED_FRAMES);
        let found = (addr >= self.lowest.load(Relaxed))
            .then(|| {
                (0..n)
                    .find(|&i| addr < self.cfa[i].load(Relaxed))
                    .map(|i| (self.address[i].load(Relaxed), self.cfa[i].load(Relaxed)))
            })
            .flatten();
        fence(Acquire);
        (self.seq.load(Relaxed) == before)
            .then_some(found)
            .flatten()
    }
}

/// Unwinds from (pc, sp, bp) into `out`: `out[0]` = pc, then lookup
/// addresses (return address - 1) of the callers.
pub fn unwind(
    unwinder: &Unwind,
    cache: &mut Cache,
    stack: &StackBounds,
    pc: u64,
    sp: u64,
    bp: u64,
    out: &mut [u64],
) -> Unwound {
    let regs = UnwindRegsX86_64::new(pc, sp, bp);
    walk(
        unwinder,
        cache,
        stack,
        FrameAddress::from_instruction_pointer(pc),
        regs,
        (None, None),
        out,
    )
}

/// Unwinds from a call that returns to `ret` with the caller's stack and
/// frame pointers `sp` and `bp` (as they are after the return): `out[0]` =
/// `ret - 1`, then the lookup addresses of its callers.
pub fn unwind_from_call(
    unwinder: &Unwind,
    cache: &mut Cache,
    stack: &StackBounds,
    ret: u64,
    sp: u64,
    bp: u64,
    out: &mut [u64],
) -> Unwound {
    let Some(address) = FrameAddress::from_return_address(ret) else {
        return Unwound {
            len: 0,
            complete: false,
            owner: None,
        };
    };
    let regs = UnwindRegsX86_64::new(ret, sp, bp);
    walk(unwinder, cache, stack, address, regs, (None, None), out)
}

/// The walk; `data`: the stack address whose owning frame is wanted;
/// `publish`: where the frames' ranges go.
fn walk(
    unwinder: &Unwind,
    cache: &mut Cache,
    stack: &StackBounds,
    mut address: FrameAddress,
    mut regs: UnwindRegsX86_64,
    (mut data, publish): (Option<u64>, Option<&FrameRanges>),
    out: &mut [u64],
) -> Unwound {
    let mut read = |addr: u64| stack.read(addr).ok_or(());
    let mut len = 0;
    let mut owner = None;
    let end = |len, complete, owner| Unwound {
        len,
        complete,
        owner,
    };
    while len < out.len() {
        out[len] = address.address_for_lookup();
        len += 1;
        let step = unwinder.unwind_frame(address, &mut regs, cache, &mut read);
        // Unwound, `regs.sp()` is the caller's stack pointer: this frame's
        // CFA, the end of its range.
        if let Ok(Some(_)) = &step {
            if let Some(p) = publish {
                p.set(len - 1, regs.sp(), out[len - 1]);
            }
            if data.is_some_and(|d| d < regs.sp()) {
                owner = Some((len - 1, regs.sp()));
                data = None;
            }
        }
        match step {
            Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                Some(next) => address = next,
                None => return end(len, true, owner),
            },
            Ok(None) => return end(len, true, owner),
            Err(_) => return end(len, false, owner),
        }
    }
    end(len, false, owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_frames_own_their_ranges() {
        let r = FrameRanges::default();
        assert_eq!(r.owner(0x1000), None);
        // Frame 0 from 0x1000 (SP minus the red zone) to 0x1100, frame 1
        // to 0x1400.
        r.begin(0x1000);
        r.set(0, 0x1100, 0xa0);
        r.set(1, 0x1400, 0xb0);
        // Being written: nothing.
        assert_eq!(r.owner(0x1010), None);
        r.end();
        assert_eq!(r.owner(0xff8), None);
        assert_eq!(r.owner(0x1000), Some((0xa0, 0x1100)));
        assert_eq!(r.owner(0x10ff), Some((0xa0, 0x1100)));
        assert_eq!(r.owner(0x1100), Some((0xb0, 0x1400)));
        assert_eq!(r.owner(0x1400), None);
        // The next sample replaces them.
        r.begin(0x1300);
        r.set(0, 0x1400, 0xb0);
        r.end();
        assert_eq!(r.owner(0x1100), None);
        assert_eq!(r.owner(0x1300), Some((0xb0, 0x1400)));
    }
}
