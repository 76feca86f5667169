//! Hardware sample sources: Intel PEBS load latency and stores, AMD IBS op
//! sampling, Arm SPE.
//!
//! * [`ring`]: reading the perf mmap ring buffer from a signal handler.
//! * [`record`]: decoding `PERF_RECORD_SAMPLE` bodies for a `sample_type`,
//!   and the loss and throttling records.
//! * [`datasrc`]: `perf_mem_data_src` -> memory level, TLB miss, load/store.
//! * [`ibs`]: AMD IBS op registers (the raw block of `ibs_op` samples).
//! * [`spe`]: Arm SPE packets (the AUX area of `arm_spe` events).
//! * [`sysfs`]: PMU discovery in `/sys/bus/event_source/devices` and the
//!   attributes of the memory events, read from the PMUs' `format/` and
//!   `events/` files.
//! * [`probe`]: whether `mem:latency` and `mem:stores` can run, why not and
//!   the fix; the `precise_ip` level the kernel accepts; multiplexing scale.
//!
//! * [`attr`]: the `perf_event_attr` of a memory event.
//! * [`sampler`]: the run-time side: per-thread event and ring, draining
//!   and decoding samples for the signal handler.
//!
//! `sysfs.rs` and `probe.rs` use only `std`: the launcher compiles them too
//! (with `#[path]`, and `attr.rs` too), so that `--list-events` and the library agree.
//!
//! Everything here except the mapping (in [`crate::sys`]) is safe code that
//! works on bytes, tested with constructed buffers: the development
//! machines have no PMU.

pub mod attr;
pub mod datasrc;
pub mod ibs;
pub mod probe;
pub mod record;
pub mod ring;
pub mod sampler;
pub mod spe;
pub mod sysfs;

pub use probe::{probe, EventProbe};
