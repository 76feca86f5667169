//! Finds the measurement files of a directory and decodes them in parallel.
//!
//! A file that cannot be used (unreadable, truncated, corrupt, written by a
//! newer version, not a measurement file) is skipped with its reason; it
//! never stops the merge and never panics.

use std::path::{Path, PathBuf};

use formats::measurement::{ThreadProfile, EXTENSION};
use rayon::prelude::*;

/// Why the measurement directory cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error("measurement directory {} does not exist", .0.display())]
    Missing(PathBuf),
    #[error(
        "{} is not a directory (expected the measurement directory written by hpcrun-rs)",
        .0.display()
    )]
    NotADirectory(PathBuf),
    #[error("cannot list measurement directory {}", dir.display())]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no measurement files (*.{EXTENSION}) in {}; run `hpcrun-rs` first or name the directory it wrote",
        .0.display()
    )]
    Empty(PathBuf),
}

/// The decoded files of a directory.
#[derive(Debug, Default)]
pub struct Measurements {
    /// Decoded profiles with their file, sorted by file name.
    pub profiles: Vec<(PathBuf, ThreadProfile)>,
    /// Files that were skipped: (path, reason), sorted by path.
    pub skipped: Vec<(String, String)>,
}

/// The `*.hpcrun` files directly in `dir` (not recursive), sorted.
pub fn find(dir: &Path) -> Result<Vec<PathBuf>, FindError> {
    if !dir.exists() {
        return Err(FindError::Missing(dir.to_path_buf()));
    }
    if !dir.is_dir() {
        return Err(FindError::NotADirectory(dir.to_path_buf()));
    }
    let list = |source| FindError::List {
        dir: dir.to_path_buf(),
        source,
    };
    let entries = std::fs::read_dir(dir).map_err(list)?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(list)?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == EXTENSION) && path.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(FindError::Empty(dir.to_path_buf()));
    }
    files.sort();
    Ok(files)
}

/// Reads and decodes `files` in parallel.
pub fn read_all(files: &[PathBuf]) -> Measurements {
    let results: Vec<(PathBuf, Result<ThreadProfile, String>)> = files
        .par_iter()
        .map(|path| (path.clone(), read_one(path)))
        .collect();
    let mut out = Measurements::default();
    for (path, result) in results {
        match result {
            Ok(profile) => out.profiles.push((path, profile)),
            Err(reason) => out.skipped.push((path.display().to_string(), reason)),
        }
    }
    out
}

fn read_one(path: &Path) -> Result<ThreadProfile, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    ThreadProfile::from_bytes(&bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fresh, empty directory under the system temporary directory.
    pub(crate) fn temp_dir(tag: &str) -> PathBuf {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hpcprof-rs-test-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn missing_and_empty_directories_are_errors() {
        let dir = temp_dir("empty");
        let err = find(&dir).unwrap_err().to_string();
        assert!(err.contains("no measurement files"), "{err}");
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        assert!(find(&dir).is_err());
        let err = find(&dir.join("missing")).unwrap_err();
        assert!(matches!(err, FindError::Missing(_)));
        assert!(err.to_string().contains("does not exist"), "{err}");
        let file = dir.join("notes.txt");
        let err = find(&file).unwrap_err().to_string();
        assert!(
            err.contains("notes.txt is not a directory") && err.contains("hpcrun-rs"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_files_are_skipped_with_reasons() {
        let dir = temp_dir("damaged");
        let good = ThreadProfile::default().to_bytes().unwrap();
        std::fs::write(dir.join("a.hpcrun"), &good).unwrap();
        std::fs::write(dir.join("b.hpcrun"), &good[..good.len() / 2]).unwrap();
        std::fs::write(dir.join("c.hpcrun"), b"hello, not a profile").unwrap();
        let mut newer = good.clone();
        newer[8] = 99;
        std::fs::write(dir.join("d.hpcrun"), &newer).unwrap();
        std::fs::write(dir.join("e.hpcrun"), b"").unwrap();
        std::fs::write(dir.join("ignored.txt"), b"").unwrap();
        let files = find(&dir).unwrap();
        assert_eq!(files.len(), 5);
        let m = read_all(&files);
        assert_eq!(m.profiles.len(), 1);
        assert_eq!(m.skipped.len(), 4);
        assert!(m.skipped[0].0.ends_with("b.hpcrun"));
        assert!(
            m.skipped[1].1.contains("not a measurement file"),
            "{:?}",
            m.skipped
        );
        assert!(m.skipped[2].1.contains("newer"), "{:?}", m.skipped);
        assert!(m.skipped[3].1.contains("truncated"), "{:?}", m.skipped);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
