//! Which heap blocks below the tracking threshold (`--min-bytes`) are
//! tracked with their allocation site anyway:
//!
//! - those the program's own code allocated directly (the caller of
//!   `malloc` is in the executable or one of its libraries,
//!   [`crate::code::modules::CodeOwner::Program`]) or through the C++
//!   library (`operator new`, [`crate::code::modules::CodeOwner::CxxRuntime`]),
//!   with their call path, up to [`BUDGET`] blocks per process. Small
//!   tables read in a hot loop (LAMMPS's pair coefficients, `memory->create`
//!   of a few hundred bytes each) and small C++ objects (`new Coeff`) are
//!   then an object named by their site, not `<small heap objects>`;
//! - those an MPI library or OpenMP runtime allocated directly
//!   ([`crate::code::modules::CodeOwner::Runtime`]), at the allocating
//!   instruction alone (no unwind), up to [`RUNTIME_BUDGET`] blocks per
//!   process. Open MPI's array of progress callbacks and the shared-memory
//!   transport's endpoints, read on every poll, are then the runtime's
//!   rows (`Open MPI: ... at opal_progress_init+0x39`), not `<small heap
//!   objects>`.
//!
//! Why not every small block with its call path: an unwind per allocation
//! costs microseconds, and runtimes make thousands of small allocations
//! in their initialisation (LAMMPS, 2 ranks: about 9,500 per rank from
//! Open MPI's libraries and components, 13,000 from the C library, 3,000
//! from `operator new`). Blocks from the C library's own calls
//! (`strdup`) and other system libraries, and every small block after the
//! budgets, stay in `<small heap objects>`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Small blocks of the program tracked per process at most.
pub const BUDGET: u64 = 16 << 10;

/// Small blocks of runtimes tracked per process at most (no unwind: an
/// object-map insert each).
pub const RUNTIME_BUDGET: u64 = 32 << 10;

/// Whose small block is tracked, and so how its site is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallSite {
    /// The program's: its call path.
    Program,
    /// A runtime's: the allocating instruction alone.
    Runtime,
}

static TRACKED: AtomicU64 = AtomicU64::new(0);
static RUNTIME_TRACKED: AtomicU64 = AtomicU64::new(0);
static ANY: AtomicBool = AtomicBool::new(false);

/// Whether a small block whose `malloc` was called from `return_address`
/// is to be tracked, and how (takes one of that budget's blocks).
/// `owner` says whose code an address is.
pub fn wanted(
    return_address: u64,
    owner: impl FnOnce(u64) -> Option<SmallSite>,
) -> Option<SmallSite> {
    if TRACKED.load(Relaxed) >= BUDGET && RUNTIME_TRACKED.load(Relaxed) >= RUNTIME_BUDGET {
        return None;
    }
    let site = owner(return_address)?;
    let (count, budget) = match site {
        SmallSite::Program => (&TRACKED, BUDGET),
        SmallSite::Runtime => (&RUNTIME_TRACKED, RUNTIME_BUDGET),
    };
    if count.fetch_add(1, Relaxed) >= budget {
        return None;
    }
    ANY.store(true, Relaxed);
    Some(site)
}

/// True once any small block was tracked: frees of small blocks must then
/// look them up in the object map.
pub fn any() -> bool {
    ANY.load(Relaxed)
}
