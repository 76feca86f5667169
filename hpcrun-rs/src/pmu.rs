//! Hardware PMU discovery for `--list-events` and `-e mem:latency`: the
//! `hpcrun-abi` crate's `pmu::sysfs`, `pmu::probe` and `pmu::attr`, shared
//! with the preload library, so that the launcher and the library agree on
//! the attributes (passed in `HPCRUN_HW_ATTR`); here, opening the event
//! once to ask the kernel.
//!
//! The launcher does not link the preload library itself: that rlib brings
//! a global allocator, malloc hooks and a load-time constructor with it.

pub use hpcrun_abi::pmu::{attr, probe, sysfs};

use std::ffi::c_int;

/// `perf_event_open` of `fields` on this process (any CPU), in `group`.
fn open(fields: &attr::Fields, group: c_int) -> Result<c_int, i32> {
    use perf_event_open_sys::bindings as pe;
    let mut a = fields.to_perf();
    // SAFETY: `a` is a fully initialised perf_event_attr whose size field
    // matches the struct.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut a, 0, -1, group, pe::PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(fd)
    }
}

fn close(fd: c_int) {
    // SAFETY: closing an fd this function's caller opened.
    unsafe { libc::close(fd) };
}

/// Tries to open (then closes) the sampling event of `hw`, with its group
/// leader if it needs one. Returns the errno on failure.
pub fn try_open(hw: &sysfs::HwAttr) -> Result<(), i32> {
    let leader = match attr::leader(hw) {
        Some(f) => Some(open(&f, -1)?),
        None => None,
    };
    let result = open(
        &attr::sampling(hw, hw.default_period()),
        leader.unwrap_or(-1),
    );
    if let Ok(fd) = result {
        close(fd);
    }
    if let Some(fd) = leader {
        close(fd);
    }
    result.map(|_| ())
}

/// Probes the hardware memory events of this machine: sysfs and procfs
/// under `root` (normally `/`), then the kernel through `open`.
pub fn probe_machine(
    root: &std::path::Path,
    open: impl FnMut(&sysfs::HwAttr) -> Result<(), i32>,
) -> Vec<probe::EventProbe> {
    let mut probes = probe::probe(root);
    probe::confirm(&mut probes, open);
    probes
}
