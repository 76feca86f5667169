//! The data object at a sampled address: heap block, static variable,
//! a stack frame of this or another thread, small heap, or unknown (then
//! keyed by its address-space region, [`crate::access::regions`], which the
//! profile writer names from the memory map).

use crate::cct;
use crate::code::modules::Snapshot;
use crate::objects;
use crate::objects::Lookup;
use crate::threads::{self, ThreadState};

use super::call_path::program_function;

/// The data object a sample touched: its tree root, node tag and key, and
/// the address range it occupies (heap blocks and static variables).
#[derive(Clone, Copy)]
pub struct Target {
    pub root: u32,
    pub tag: u32,
    pub key: u64,
    pub range: Option<(u64, u64)>,
    /// For a stack frame: the frame's CFA (where the access fell in it is
    /// recorded per access site).
    pub frame_cfa: Option<u64>,
}

impl Target {
    pub(super) const fn of(root: u32, tag: u32, key: u64) -> Target {
        Target {
            root,
            tag,
            key,
            range: None,
            frame_cfa: None,
        }
    }
}

/// The data object at `addr`; `None` if the object map stayed busy.
/// `frame`: for an address on this thread's stack, the start of the
/// function whose frame holds it (`call_path`) and the frame's CFA, if
/// found.
pub fn classify(
    state: &ThreadState,
    snap: &Snapshot,
    addr: u64,
    frame: Option<(u64, u64)>,
) -> Option<Target> {
    if let Some(objs) = objects::get() {
        match objs.lookup(addr) {
            Lookup::Block { site, start, end } => {
                return Some(Target {
                    range: Some((start, end)),
                    ..Target::of(cct::HEAP, cct::TAG_HEAP_SITE, site as u64)
                })
            }
            Lookup::Busy => return None,
            Lookup::NotFound => {}
        }
    }
    if let Some((module, index, start, end)) = snap.static_at(addr) {
        return Some(Target {
            range: Some((start, end)),
            ..Target::of(
                cct::STATIC,
                cct::TAG_STATIC,
                (module as u64) << 32 | index as u64,
            )
        });
    }
    if state.stack.contains(addr) {
        return Some(match frame {
            Some(function) => stack_frame(function),
            None => Target::of(cct::UNKNOWN, cct::TAG_STACK, state.index as u64),
        });
    }
    // Another thread's stack: the frame that held the address when that
    // thread was last sampled (an OpenMP worker reading the shared
    // variables in the master's frame), else its whole stack.
    if let Some(owner) = threads::stack_owner(addr) {
        let frame = owner
            .frames_seen
            .owner(addr)
            .and_then(|(f, cfa)| Some((program_function(snap, f)?, cfa)));
        return Some(match frame {
            Some(function) => stack_frame(function),
            None => Target::of(cct::UNKNOWN, cct::TAG_STACK, owner.index as u64),
        });
    }
    if objects::in_small_heap(addr) {
        return Some(Target::of(cct::HEAP, cct::TAG_SMALL_HEAP, 0));
    }
    Some(Target::of(
        cct::UNKNOWN,
        cct::TAG_UNKNOWN,
        crate::access::regions::key(addr),
    ))
}

/// The data object of a stack frame: the frame of `function` ending at
/// `cfa`.
fn stack_frame((function, cfa): (u64, u64)) -> Target {
    Target {
        frame_cfa: Some(cfa),
        ..Target::of(cct::UNKNOWN, cct::TAG_STACK_FRAME, function)
    }
}
