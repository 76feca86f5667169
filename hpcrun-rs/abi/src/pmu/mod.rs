//! Hardware PMU discovery and attributes, shared by the launcher
//! (`--list-events`, choosing the event, `HPCRUN_HW_ATTR`) and the preload
//! library (opening the event in every thread), so that both agree.
//!
//! * [`sysfs`]: PMU discovery in `/sys/bus/event_source/devices` and the
//!   attributes of the memory events, read from the PMUs' `format/` and
//!   `events/` files ([`sysfs::HwAttr`], passed in `HPCRUN_HW_ATTR`).
//! * [`probe`]: whether `mem:latency` and `mem:stores` can run, why not and
//!   the fix; the `precise_ip` level the kernel accepts; multiplexing scale.
//! * [`attr`]: the `perf_event_attr` of a memory event.

pub mod attr;
pub mod probe;
pub mod sysfs;

/// A fixture tree of `hpcrun-rs/abi/tests/fixtures/sysfs` (tests).
#[cfg(test)]
fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}
