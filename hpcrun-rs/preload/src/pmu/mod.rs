//! Beside the flow: a sample source. Hands the sample handler
//! ([`crate::sample`]) decoded hardware records: the IP, the data address,
//! the latency and the memory level of each sampled access.
//!
//! Hardware sample sources: Intel PEBS load latency and stores, AMD IBS op
//! sampling, Arm SPE.
//!
//! * [`ring`]: reading the perf mmap ring buffer from a signal handler.
//! * [`record`]: decoding `PERF_RECORD_SAMPLE` bodies for a `sample_type`,
//!   and the loss and throttling records.
//! * [`datasrc`]: `perf_mem_data_src` -> memory level, TLB miss, load/store.
//! * [`ibs`]: AMD IBS op registers (the raw block of `ibs_op` samples).
//! * [`spe`]: Arm SPE packets (the AUX area of `arm_spe` events).
//! * [`sysfs`], [`probe`], [`attr`]: PMU discovery, probing and the
//!   `perf_event_attr` of a memory event, from the `hpcrun-abi` crate that
//!   the launcher shares (re-exported here).
//! * [`sampler`]: the run-time side: per-thread event and ring, draining
//!   and decoding samples for the signal handler.
//!
//! Everything here except the mapping (in [`crate::sys`]) is safe code that
//! works on bytes, tested with constructed buffers: the development
//! machines have no PMU.

pub mod datasrc;
pub mod ibs;
pub mod record;
pub mod ring;
pub mod sampler;
pub mod spe;

pub use hpcrun_abi::pmu::probe::{probe, EventProbe};
pub use hpcrun_abi::pmu::{attr, probe, sysfs};
