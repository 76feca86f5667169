//! The library behind `hpcprof-rs`: merges the per-thread measurement files
//! of `hpcrun-rs`, maps them to source and writes a database.
//!
//! The merge streams the files ([`merge::merge_files`]; damaged files are
//! skipped with their reason), symbolises raw addresses with addr2line
//! ([`symbolize`]), merges the code-centric and the data-centric trees with
//! per-thread and per-rank distributions ([`merge`]), names heap objects
//! after the variable their allocation is assigned to ([`name`]) and writes
//! the database atomically ([`db`]).
//!
//! ```no_run
//! let files = hpcprof_rs::read::find(std::path::Path::new("measurements")).unwrap();
//! let merged = hpcprof_rs::merge::merge_files(&files, &|_bytes| {});
//! hpcprof_rs::db::write(&merged.db, std::path::Path::new("db"), false).unwrap();
//! ```

pub mod db;
pub mod merge;
pub mod name;
pub mod read;
pub mod symbolize;
