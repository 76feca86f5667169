//! What a path given to a tool is, from its file headers: a measurements
//! directory of `hpcrun-rs`, a database of `hpcprof-rs`, one file of
//! either, or something else. The tools use it to say which command takes
//! what they were given (`hpcview-tui measurements/` -> "merge it first
//! with `hpcprof-rs measurements/`").
//!
//! ```
//! use formats::inspect::{inspect, PathKind};
//! assert_eq!(inspect(std::path::Path::new("/nonexistent/db")), PathKind::Missing);
//! ```

use std::io::Read;
use std::path::Path;

/// What [`inspect`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathKind {
    /// Nothing there.
    Missing,
    /// A directory with a `profile.db` that has the database header.
    Database,
    /// A file with the database header.
    DatabaseFile,
    /// A directory with measurement files (`*.hpcrun`) or a run marker.
    Measurements {
        /// Its measurement files.
        files: usize,
    },
    /// A file with the measurement header, or named `*.hpcrun`.
    MeasurementFile,
    /// A directory that is neither.
    OtherDir,
    /// A file that is neither.
    OtherFile,
}

/// The first 8 bytes of `path`, if it is a file that has them.
fn magic(path: &Path) -> Option<[u8; 8]> {
    let mut m = [0u8; 8];
    let mut f = std::fs::File::open(path).ok()?;
    f.read_exact(&mut m).ok()?;
    Some(m)
}

/// Classifies `path` (following symbolic links).
pub fn inspect(path: &Path) -> PathKind {
    let Ok(meta) = std::fs::metadata(path) else {
        return PathKind::Missing;
    };
    if meta.is_file() {
        let m = magic(path);
        return if m == Some(crate::database::KIND.magic) {
            PathKind::DatabaseFile
        } else if m == Some(crate::measurement::KIND.magic)
            || path
                .extension()
                .is_some_and(|e| e == crate::measurement::EXTENSION)
        {
            PathKind::MeasurementFile
        } else {
            PathKind::OtherFile
        };
    }
    if magic(&path.join(crate::database::FILE_NAME)) == Some(crate::database::KIND.magic) {
        return PathKind::Database;
    }
    let mut files = 0;
    let mut marker = false;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension()
                .is_some_and(|x| x == crate::measurement::EXTENSION)
            {
                files += 1;
            } else if e.file_name() == ".hpcrun-run" {
                marker = true;
            }
        }
    }
    if files > 0 || marker {
        PathKind::Measurements { files }
    } else {
        PathKind::OtherDir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let dir = std::env::temp_dir().join(format!("formats-inspect-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = dir.join("db");
        let m = dir.join("m");
        std::fs::create_dir_all(&db).unwrap();
        std::fs::create_dir_all(&m).unwrap();
        assert_eq!(inspect(&db), PathKind::OtherDir);
        let bytes = crate::database::Database::default().to_bytes().unwrap();
        std::fs::write(db.join("profile.db"), &bytes).unwrap();
        assert_eq!(inspect(&db), PathKind::Database);
        assert_eq!(inspect(&db.join("profile.db")), PathKind::DatabaseFile);
        std::fs::write(m.join("a.hpcrun"), b"HPCRUNMF").unwrap();
        assert_eq!(inspect(&m), PathKind::Measurements { files: 1 });
        assert_eq!(inspect(&m.join("a.hpcrun")), PathKind::MeasurementFile);
        std::fs::write(dir.join("notes.txt"), b"text").unwrap();
        assert_eq!(inspect(&dir.join("notes.txt")), PathKind::OtherFile);
        assert_eq!(inspect(&dir.join("nope")), PathKind::Missing);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
