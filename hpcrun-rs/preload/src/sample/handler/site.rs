//! The access site's instruction: decoded from its loaded module, and its
//! decoder stride (computed once per instruction and thread).

use crate::access::soft::{self, Regs};
use crate::access::stride::{self, Decoded};
use crate::code::modules::Snapshot;
use crate::sys;
use crate::threads::ThreadState;

/// The instruction at `ip`, decoded from its loaded module, with that
/// module's code bytes and their start address.
pub(super) fn instruction_at(
    snap: &Snapshot,
    ip: u64,
) -> Option<(iced_x86::Instruction, &'static [u8], u64)> {
    let (seg_start, seg_end) = snap.exec_segment(ip)?;
    // SAFETY: as in `analyse`: a loaded segment of the current snapshot.
    let code = unsafe { sys::loaded_bytes(&[(seg_start, seg_end, true)], seg_start, seg_end)? };
    let insn = soft::decode_at(code, seg_start, ip)?;
    Some((insn, code, seg_start))
}

/// The decoder stride of the memory access at `ip` (computed once per
/// instruction and thread, see `patterns::IpTable`).
pub(super) fn site_stride(
    state: &ThreadState,
    snap: &Snapshot,
    ip: u64,
    regs: Option<&Regs>,
) -> Decoded {
    state.ips.stride(ip, || match instruction_at(snap, ip) {
        Some((insn, code, start)) => stride::static_stride(code, start, &insn, regs),
        None => Decoded::Unknown,
    })
}
