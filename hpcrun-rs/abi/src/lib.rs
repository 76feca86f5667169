//! The contract between the `hpcrun-rs` launcher and its preload library
//! (`libhpcrun_preload.so`), in one place that both crates use:
//!
//! * [`env`]: the names of the `HPCRUN_*` environment variables;
//! * [`config`]: the run configuration the library reads from them
//!   ([`config::RunConfig`]) and the grammars of their values;
//! * [`event`]: the events (`-e`, `HPCRUN_EVENTS`): [`event::Event`] with
//!   its names and default periods, the `NAME[@PERIOD]` list grammar;
//! * [`event_doc`]: what each event does, the one table that `--help`,
//!   `--list-events` and docs/GUIDE.md's event table are written from;
//! * [`histogram`]: the offset-histogram layout grammar (`--histogram`,
//!   `HPCRUN_HISTOGRAM`);
//! * [`pmu`]: hardware PMU discovery in sysfs, probing, and the
//!   `perf_event_attr` of the hardware memory events (`HPCRUN_HW_ATTR`).
//!
//! Linked into the preload library, which runs inside other programs:
//! `std`, `formats` and the perf_event bindings only; no `unsafe`.

#![forbid(unsafe_code)]

pub mod config;
pub mod env;
pub mod event;
pub mod event_doc;
pub mod histogram;
pub mod pmu;
