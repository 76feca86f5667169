//! The library behind `hpcprof-rs`: merges the per-thread measurement files
//! of `hpcrun-rs`, maps them to source and writes a database.
//!
//! The modules follow the pipeline, read -> merge -> name -> db, each using
//! only those before it:
//!
//! * [`read`] finds the measurement files (and decodes them all, for
//!   tests and small runs);
//! * [`runs`] chooses which of them to merge: one run per database (a
//!   directory that mixes runs is refused unless told which), each
//!   thread's profile once (duplicates left out, with a note);
//! * [`symbolize`] maps raw addresses to functions, files and lines with
//!   addr2line, for the merge;
//! * [`merge`] streams the files (damaged ones are skipped with their
//!   reason) and merges the code-centric and the data-centric trees with
//!   per-thread and per-rank distributions;
//! * [`name`] chooses each heap object's allocation site outside allocator
//!   wrappers and names it after its label or the variable its allocation
//!   is assigned to;
//! * [`db`] writes the database atomically;
//! * [`advise`] renders the placement and NUMA advice of a database.
//!
//! With the cargo feature `mpi`, `distributed` runs the merge over MPI
//! ranks ([`merge::Share`]: one rank's partial merge, sent and combined).
//! The driver (`main.rs`) runs the stages in that order:
//!
//! ```no_run
//! let files = hpcprof_rs::read::find(std::path::Path::new("measurements")).unwrap();
//! let mut merged = hpcprof_rs::merge::merge_files(&files, &|_bytes| {});
//! let wrappers = hpcprof_rs::name::Wrappers::default();
//! let db = &mut merged.db;
//! hpcprof_rs::name::name_objects(&mut db.objects, &db.frames, &db.alloc_paths, &wrappers);
//! hpcprof_rs::db::write(&merged.db, std::path::Path::new("db"), false).unwrap();
//! ```

pub mod advise;
pub mod db;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod losses;
pub mod merge;
pub mod name;
pub mod read;
pub mod runs;
pub mod symbolize;
