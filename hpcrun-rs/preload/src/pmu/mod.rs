//! Hardware sample sources: Intel PEBS load latency and stores, AMD IBS op
//! sampling, Arm SPE.
//!
//! * [`ring`]: reading the perf mmap ring buffer from a signal handler.
//! * [`record`]: decoding `PERF_RECORD_SAMPLE` bodies for a `sample_type`,
//!   and the loss and throttling records.
//!
//! Everything here except the mapping (in [`crate::ffi`]) is safe code that
//! works on bytes, tested with constructed buffers: the development
//! machines have no PMU.

pub mod record;
pub mod ring;
