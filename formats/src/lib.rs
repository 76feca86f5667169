//! Every on-disk type of the pipeline, in one place.
//!
//! The three tools never depend on each other; they agree through this crate:
//!
//! * [`measurement`]: the per-thread profile that the preload library of
//!   `hpcrun-rs` writes (`*.hpcrun`): raw instruction addresses, the module
//!   table to map them, allocation sites and the four calling-context trees
//!   (code, heap data, static data, unknown data).
//! * [`database`]: the merged, symbolised database that `hpcprof-rs` writes
//!   (`DB/profile.db`) and `hpcview-tui` reads.
//! * [`views`] and [`export`]: the derived tables (objects, functions) and the
//!   stable JSON/CSV export contract (`hpcprof-rs export`).
//! * [`diff`]: two databases compared (`hpcprof-rs diff`).
//! * [`hatchet`]: the code-centric and data-centric trees in the literal
//!   format of LLNL Hatchet (`hpcprof-rs export --format hatchet`).
//! * [`advice`]: placement in fast memory, NUMA advice and hot ranges
//!   (`hpcprof-rs advise`, the viewer's detail pane).
//! * [`patterns`]: access patterns (strides per access site) and their
//!   classification.
//! * [`object_access`]: how one object of a database was accessed (its
//!   pattern over its sites), for the export, the viewer and the report.
//! * [`watchpoints`]: sharing between threads and temporal reuse, from the
//!   watchpoint analyses (`-e sharing`, `-e reuse`).
//! * [`runtimes`]: MPI and OpenMP runtimes: their modules, their memory's
//!   names, the CPU time spent inside them.
//! * [`notes`]: notes printed from the measurement's counts, and when
//!   they are worth printing (short-lived threads).
//! * [`inspect`]: what a path is (measurements, database, one file of
//!   either), so that each tool can say which command takes it.
//!
//! Both files are MessagePack (rmp-serde, named fields) behind a 16-byte
//! header: an 8-byte magic, a little-endian `u32` format version and a
//! little-endian `u32` of flags (zero). [`envelope`] reads and writes that
//! header and never panics on bad bytes.
//!
//! ```
//! use formats::measurement::ThreadProfile;
//! let profile = ThreadProfile::default();
//! let bytes = profile.to_bytes().unwrap();
//! let back = ThreadProfile::from_bytes(&bytes).unwrap();
//! assert_eq!(profile, back);
//! assert!(ThreadProfile::from_bytes(&bytes[..10]).is_err());
//! ```

pub mod advice;
pub mod database;
pub mod diff;
pub mod envelope;
pub mod export;
pub mod hatchet;
pub mod inspect;
pub mod manifest;
pub mod measurement;
pub mod notes;
pub mod object_access;
pub mod patterns;
pub mod runtimes;
pub mod views;
pub mod watchpoints;

pub use envelope::FormatError;
