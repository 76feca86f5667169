//! The library behind `hpcprof-rs`: merges the per-thread measurement files
//! of `hpcrun-rs`, maps them to source and writes a database.
//!
//! The merge streams the files ([`merge::merge_files`]; damaged files are
//! skipped with their reason), symbolises raw addresses with addr2line
//! ([`symbolize`]), merges the code-centric and the data-centric trees with
//! per-thread and per-rank distributions ([`merge`]), chooses each heap
//! object's allocation site outside allocator wrappers ([`site`]) and names
//! it after its label or the variable its allocation is assigned to
//! ([`naming`], [`name`]), and writes the database atomically ([`db`]).
//! [`advise`] renders the placement and NUMA advice of a database. With the
//! cargo feature `mpi`, `distributed` runs the merge over MPI ranks
//! ([`merge::Share`]: one rank's partial merge, sent and combined).
//!
//! ```no_run
//! let files = hpcprof_rs::read::find(std::path::Path::new("measurements")).unwrap();
//! let mut merged = hpcprof_rs::merge::merge_files(&files, &|_bytes| {});
//! let wrappers = hpcprof_rs::site::Wrappers::default();
//! hpcprof_rs::naming::name_objects(&mut merged.db.objects, &merged.db.frames, &wrappers);
//! hpcprof_rs::db::write(&merged.db, std::path::Path::new("db"), false).unwrap();
//! ```

pub mod advise;
pub mod db;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod merge;
pub mod name;
pub mod naming;
pub mod read;
pub mod site;
pub mod symbolize;
