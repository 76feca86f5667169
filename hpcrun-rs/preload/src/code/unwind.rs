//! Call-path unwinding with framehop, from the signal handler and from the
//! malloc hooks, without allocating (`MustNotAllocateDuringUnwind`).
//!
//! The unwinder is built from the module snapshot (DWARF CFI from each
//! module's `.eh_frame`/`.eh_frame_hdr`, read in place from mapped memory)
//! and published for lock-free use.

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder,
};

use super::modules::Snapshot;
use crate::sys::{self, StackBounds};

pub type Unwind = UnwinderX86_64<&'static [u8], MustNotAllocateDuringUnwind>;
pub type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

static UNWINDER: sys::Published<Unwind> = sys::Published::new();

/// The current unwinder; valid only inside a read section (`sys::reading`).
pub fn get() -> Option<&'static Unwind> {
    UNWINDER.get()
}

/// Builds and publishes an unwinder for every module of `snapshot`.
#[allow(unsafe_code)] // reads the loaded `.eh_frame` sections in place
pub fn refresh(snapshot: &Snapshot) {
    let mut unwinder = Unwind::new();
    for (_, m) in &snapshot.modules {
        let m = &m.info;
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
            unsafe {
                sys::loaded_bytes(&m.segments, s.wrapping_add(m.bias), e.wrapping_add(m.bias))
            }
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
        unwinder.add_module(Module::new(m.path.clone(), low..high, m.bias, info));
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
        };
    };
    let regs = UnwindRegsX86_64::new(ret, sp, bp);
    walk(unwinder, cache, stack, address, regs, out)
}

fn walk(
    unwinder: &Unwind,
    cache: &mut Cache,
    stack: &StackBounds,
    mut address: FrameAddress,
    mut regs: UnwindRegsX86_64,
    out: &mut [u64],
) -> Unwound {
    let mut read = |addr: u64| stack.read(addr).ok_or(());
    let mut len = 0;
    while len < out.len() {
        out[len] = address.address_for_lookup();
        len += 1;
        match unwinder.unwind_frame(address, &mut regs, cache, &mut read) {
            Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                Some(next) => address = next,
                None => {
                    return Unwound {
                        len,
                        complete: true,
                    }
                }
            },
            Ok(None) => {
                return Unwound {
                    len,
                    complete: true,
                }
            }
            Err(_) => {
                return Unwound {
                    len,
                    complete: false,
                }
            }
        }
    }
    Unwound {
        len,
        complete: false,
    }
}
