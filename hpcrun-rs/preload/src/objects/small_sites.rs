//! Which heap blocks below the tracking threshold (`--min-bytes`) are
//! tracked with their allocation site anyway: those the program's own
//! code allocated directly (the caller of `malloc` is in the executable or
//! one of its libraries, [`crate::code::modules::ModuleInfo::program_code`]),
//! up to [`BUDGET`] blocks per process. Small tables read in a hot loop
//! (LAMMPS's pair coefficients, `memory->create` of a few hundred bytes
//! each) are then an object named by their site, not `<small heap
//! objects>`.
//!
//! Why not every small block: an unwind per allocation costs microseconds,
//! and MPI libraries make a hundred thousand small allocations in
//! `MPI_Init` (LAMMPS with `--min-bytes 1`: 2.4 s of allocation hooks,
//! against 37 ms). Blocks from C and C++ runtime code (`operator new`,
//! `strdup`), MPI and OpenMP runtimes and system libraries, and every
//! small block after the budget, stay in `<small heap objects>`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Small blocks tracked per process at most.
pub const BUDGET: u64 = 16 << 10;

static TRACKED: AtomicU64 = AtomicU64::new(0);
static ANY: AtomicBool = AtomicBool::new(false);

/// True if a small block whose `malloc` was called from `return_address`
/// is to be tracked (takes one of the budget's blocks).
pub fn wanted(return_address: u64, program_code: impl FnOnce(u64) -> bool) -> bool {
    if TRACKED.load(Relaxed) >= BUDGET || !program_code(return_address) {
        return false;
    }
    if TRACKED.fetch_add(1, Relaxed) >= BUDGET {
        return false;
    }
    ANY.store(true, Relaxed);
    true
}

/// True once any small block was tracked: frees of small blocks must then
/// look them up in the object map.
pub fn any() -> bool {
    ANY.load(Relaxed)
}
