//! From a thread's state to a file: the last step inside the measured
//! process.
//!
//! * [`writer`]: turns a thread's state (its trees from [`crate::cct`], its
//!   tables from [`crate::access`], the object sites from
//!   [`crate::objects`], the modules from [`crate::code`]) into a
//!   `formats::measurement::ThreadProfile`.
//! * [`profile_file`]: writes it as `<exe>.<host>.<pid>.<tid>.hpcrun` so
//!   that it is never torn (temporary file, then one rename).
//! * [`checkpoint`]: rewrites every thread's profile every few seconds, so
//!   that a killed run leaves what it measured.
//! * [`notices`]: what damaged or emptied a measurement, with its fix.
//! * [`exit`]: stops every thread's sampling and writes everything, at
//!   exit, `_exit`, a fatal signal or before `exec`.
//!
//! Hands to the next step: one `.hpcrun` file per thread in the output
//! directory, which `hpcprof-rs` merges.

pub mod checkpoint;
pub mod exit;
pub mod manifest;
pub mod notices;
pub mod profile_file;
pub mod writer;
