//! Checking a measurements directory against its run manifest
//! (`formats::manifest`): which threads' final profiles, which
//! processes' ends and which MPI ranks are missing. The result goes into
//! the database (`DbInfo::losses`), the JSON export, the report's header
//! and the viewer's status line.
//!
//! ```no_run
//! let dir = std::path::Path::new("measurements");
//! let files = hpcprof_rs::read::find(dir).unwrap();
//! let (losses, manifest) = hpcprof_rs::losses::check(dir, &files);
//! assert!(manifest || losses.is_empty());
//! ```

use std::path::{Path, PathBuf};

use formats::manifest::{self, Loss, Present};

/// The losses of the measurements in `dir` whose profiles are `files`,
/// and whether the directory had a manifest (false: measurements of an
/// older hpcrun-rs, nothing could be checked).
pub fn check(dir: &Path, files: &[PathBuf]) -> (Vec<Loss>, bool) {
    let Some(m) = manifest::read_dir(dir) else {
        return (Vec::new(), false);
    };
    let present: Vec<Present> = files
        .iter()
        .filter_map(|f| crate::runs::read_head(f).ok())
        .map(|(p, t)| Present {
            host: p.host,
            pid: p.pid,
            rank: p.rank,
            index: t.index,
            tid: t.tid,
            end_ns: t.end_unix_ns,
        })
        .collect();
    (manifest::check(&m, &present), true)
}
