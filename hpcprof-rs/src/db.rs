//! Writes a database directory atomically.
//!
//! Everything goes to `DB.tmp-<pid>/` first (`profile.db`, then `src/` with a
//! copy of every source file that frames refer to and that exists here);
//! the directory is renamed to `DB` at the end, so a reader never sees half a
//! database. An existing `DB` is only replaced with `--force`, and only if it
//! is provably a database ([`replaceable`]: its `profile.db` starts with the
//! database header, and it holds nothing but that and `src/`), or is empty.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use formats::database::{Database, Frame, FILE_NAME};
use formats::envelope::FormatError;
use rayon::prelude::*;

use crate::merge::MergedDb;

/// Why a database could not be written. Every message names the path and,
/// where the user can do something about it, what to do.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("cannot write the database to {}: name a new directory with -o", .0.display())]
    BadName(PathBuf),
    #[error(
        "{} already exists; use --force to replace it or -o to write elsewhere",
        .0.display()
    )]
    Exists(PathBuf),
    #[error(
        "{path} exists and is not an hpcprof-rs database ({why}); refusing to replace it even with --force: remove it yourself or write elsewhere with -o",
        path = .0.display(),
        why = .1
    )]
    NotADatabase(PathBuf, String),
    #[error(
        "{} appeared while merging; use --force to replace it or -o to write elsewhere",
        .0.display()
    )]
    Appeared(PathBuf),
    #[error("cannot remove stale {}", path.display())]
    RemoveStale {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: FormatError,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot move the old {} aside", path.display())]
    MoveAside {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot rename {} to {}", from.display(), to.display())]
    Rename {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove the old database {}", path.display())]
    RemoveOld {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

type Result<T, E = DbError> = std::result::Result<T, E>;

/// What [`write()`] needs of a database: its encoding and its frames (whose
/// source files are copied). A [`Database`] in memory, or a merge result
/// that is encoded node by node ([`MergedDb`]).
pub trait Contents {
    /// The frame table.
    fn frames(&self) -> &[Frame];
    /// Writes `profile.db`: header and body.
    fn write_to(&self, out: &mut dyn std::io::Write) -> Result<(), FormatError>;
}

impl Contents for Database {
    fn frames(&self) -> &[Frame] {
        &self.frames
    }
    fn write_to(&self, out: &mut dyn std::io::Write) -> Result<(), FormatError> {
        Database::write_to(self, out)
    }
}

impl Contents for MergedDb {
    fn frames(&self) -> &[Frame] {
        &self.frames
    }
    fn write_to(&self, out: &mut dyn std::io::Write) -> Result<(), FormatError> {
        MergedDb::write_to(self, out)
    }
}

/// Name of the source copy directory inside a database.
pub const SOURCE_DIR: &str = "src";

/// What writing did besides `profile.db`.
#[derive(Debug, Default)]
pub struct Written {
    /// Source files copied into `src/`.
    pub sources: usize,
    /// Source files that exist but could not be copied.
    pub warnings: Vec<String>,
}

/// Fails early when `out` exists and may not be replaced.
pub fn check_output(out: &Path, force: bool) -> Result<()> {
    if out.file_name().is_none() {
        return Err(DbError::BadName(out.to_path_buf()));
    }
    if std::fs::symlink_metadata(out).is_err() {
        return Ok(());
    }
    if !force {
        return Err(DbError::Exists(out.to_path_buf()));
    }
    if let Err(why) = replaceable(out) {
        return Err(DbError::NotADatabase(out.to_path_buf(), why));
    }
    Ok(())
}

/// Whether `--force` may delete `out`: an empty directory, or provably
/// a database: a directory (not a symbolic link) holding a `profile.db`
/// file that starts with the database's magic and, besides it, at most the
/// source copy directory `src/`, which holds only the copies of the source
/// files that database names ([`sources_are_copies`]). Else why not.
pub fn replaceable(out: &Path) -> std::result::Result<(), String> {
    let Ok(meta) = std::fs::symlink_metadata(out) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() {
        return Err("it is a symbolic link".into());
    }
    if !meta.is_dir() {
        return Err("it is a file, not a directory".into());
    }
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(out)
        .map_err(|e| format!("cannot read it: {e}"))?
        .collect::<std::io::Result<_>>()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if entries.is_empty() {
        return Ok(());
    }
    let db = out.join(FILE_NAME);
    let mut magic = [0u8; 8];
    let is_file = std::fs::symlink_metadata(&db).is_ok_and(|m| m.is_file());
    let read = is_file
        && std::fs::File::open(&db)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .is_ok();
    if !is_file {
        return Err(format!("no {FILE_NAME} file in it"));
    }
    if !read || magic != formats::database::KIND.magic {
        return Err(format!(
            "its {FILE_NAME} does not start with the database header"
        ));
    }
    let mut unknown: Vec<String> = entries
        .iter()
        .filter(|e| {
            let name = e.file_name();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            !(name == FILE_NAME || (name == SOURCE_DIR && is_dir))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if unknown.is_empty() {
        return sources_are_copies(out);
    }
    unknown.sort();
    let more = if unknown.len() > 3 {
        format!(" and {} more", unknown.len() - 3)
    } else {
        String::new()
    };
    unknown.truncate(3);
    Err(format!(
        "it also holds {}{more}, which a database does not",
        unknown.join(", ")
    ))
}

/// Files named in full when `src/` holds what the database did not copy.
const NAMED_UNKNOWN: usize = 3;

/// `out/src/`, if there, holds nothing but directories and the copies of
/// source files the frames of `out/profile.db` name (at
/// [`source_copy_path`]): a user's own files put there (or a `src/` that
/// was never a database's) are not deleted with it. The frames are the
/// database's second field: the trees after them are not read.
fn sources_are_copies(out: &Path) -> std::result::Result<(), String> {
    let src = out.join(SOURCE_DIR);
    if std::fs::symlink_metadata(&src).is_err() {
        return Ok(());
    }
    let mut found: Vec<PathBuf> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(path),
                Ok(t) if t.is_file() => found.push(path),
                _ => others.push(shown(out, &path)),
            }
        }
    }
    if found.is_empty() && others.is_empty() {
        return Ok(());
    }
    let copies = copied_sources(out)?;
    let mut unknown: Vec<String> = found
        .iter()
        .filter(|p| !copies.contains(*p))
        .map(|p| shown(out, p))
        .chain(others)
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    unknown.sort();
    let n = unknown.len();
    let more = if n > NAMED_UNKNOWN {
        format!(" and {} more", n - NAMED_UNKNOWN)
    } else {
        String::new()
    };
    unknown.truncate(NAMED_UNKNOWN);
    Err(format!(
        "its {SOURCE_DIR}/ holds {}{more}, which {} no copy of a source file its {FILE_NAME} names",
        unknown.join(", "),
        if n == 1 { "is" } else { "are" }
    ))
}

/// `path` relative to `out`'s parent (`db/src/x.c`), for messages.
fn shown(out: &Path, path: &Path) -> String {
    let base = out.parent().unwrap_or(Path::new(""));
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Where the database in `out` copied its source files
/// ([`source_copy_path`] of every frame's file).
fn copied_sources(out: &Path) -> std::result::Result<BTreeSet<PathBuf>, String> {
    /// A frame's source file; the rest of the frame is not needed.
    #[derive(serde::Deserialize)]
    struct FrameFile {
        #[serde(default)]
        file: Option<String>,
    }
    let db = out.join(FILE_NAME);
    let cannot = |e: &dyn std::fmt::Display| {
        format!("its {FILE_NAME} cannot be read ({e}), so what its {SOURCE_DIR}/ holds cannot be checked")
    };
    let file = std::fs::File::open(&db).map_err(|e| cannot(&e))?;
    // SAFETY: a read-only private mapping; a file truncated meanwhile
    // could raise SIGBUS, as for any mapped reader. Only the header and
    // the first two fields are touched.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| cannot(&e))?;
    let mut fields =
        formats::envelope::Fields::new(formats::database::KIND, &map).map_err(|e| cannot(&e))?;
    let src = out.join(SOURCE_DIR);
    while let Some(name) = fields.next_name().map_err(|e| cannot(&e))? {
        if name != "frames" {
            fields.skip().map_err(|e| cannot(&e))?;
            continue;
        }
        let frames: Vec<FrameFile> = fields.value().map_err(|e| cannot(&e))?;
        return Ok(frames
            .iter()
            .filter_map(|f| source_copy_path(&src, f.file.as_deref()?))
            .collect());
    }
    Err(cannot(&"no frames in it"))
}

/// `DB` with a suffix appended to its last component.
fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let mut name: OsString = out.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    out.with_file_name(name)
}

/// Writes `db` to the directory `out` (see the module documentation).
pub fn write(db: &impl Contents, out: &Path, force: bool) -> Result<Written> {
    check_output(out, force)?;
    let tmp = sibling(out, &format!(".tmp-{}", std::process::id()));
    if std::fs::symlink_metadata(&tmp).is_ok() {
        std::fs::remove_dir_all(&tmp).map_err(|source| DbError::RemoveStale {
            path: tmp.clone(),
            source,
        })?;
    }
    let result = write_into(db, &tmp).and_then(|written| {
        install(&tmp, out, force)?;
        Ok(written)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn write_into(db: &impl Contents, tmp: &Path) -> Result<Written> {
    std::fs::create_dir_all(tmp).map_err(|source| DbError::Create {
        path: tmp.to_path_buf(),
        source,
    })?;
    let file = tmp.join(FILE_NAME);
    let f = std::fs::File::create(&file).map_err(|source| DbError::Create {
        path: file.clone(),
        source,
    })?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    db.write_to(&mut w).map_err(|source| DbError::Encode {
        path: file.clone(),
        source,
    })?;
    use std::io::Write;
    w.flush().map_err(|source| DbError::Write {
        path: file.clone(),
        source,
    })?;
    Ok(copy_sources(db, &tmp.join(SOURCE_DIR)))
}

/// Where the copy of the source file `file` goes: `src/<path without />`.
/// `None` for relative paths or paths with `..`.
pub fn source_copy_path(src_dir: &Path, file: &str) -> Option<PathBuf> {
    let path = Path::new(file);
    if !path.is_absolute() {
        return None;
    }
    let mut dest = src_dir.to_path_buf();
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => dest.push(part),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(dest)
}

fn copy_sources(db: &impl Contents, src_dir: &Path) -> Written {
    let files: BTreeSet<&str> = db
        .frames()
        .iter()
        .filter_map(|f| f.file.as_deref())
        .collect();
    let results: Vec<Option<Result<(), String>>> = files
        .par_iter()
        .map(|&file| {
            let dest = source_copy_path(src_dir, file)?;
            if !Path::new(file).is_file() {
                return None;
            }
            let copy = || -> std::io::Result<()> {
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::copy(file, &dest)?;
                Ok(())
            };
            Some(copy().map_err(|e| format!("cannot copy source file {file}: {e}")))
        })
        .collect();
    let mut written = Written::default();
    for r in results.into_iter().flatten() {
        match r {
            Ok(()) => written.sources += 1,
            Err(w) => written.warnings.push(w),
        }
    }
    written
}

/// Renames `tmp` to `out`; an old `out` (allowed by `check_output`) is moved
/// aside first and removed after the new one is in place.
fn install(tmp: &Path, out: &Path, force: bool) -> Result<()> {
    let mut old = None;
    if std::fs::symlink_metadata(out).is_ok() {
        if !force || replaceable(out).is_err() {
            return Err(DbError::Appeared(out.to_path_buf()));
        }
        let aside = sibling(out, &format!(".old-{}", std::process::id()));
        std::fs::rename(out, &aside).map_err(|source| DbError::MoveAside {
            path: out.to_path_buf(),
            source,
        })?;
        old = Some(aside);
    }
    if let Err(e) = std::fs::rename(tmp, out) {
        if let Some(aside) = &old {
            let _ = std::fs::rename(aside, out);
        }
        return Err(DbError::Rename {
            from: tmp.to_path_buf(),
            to: out.to_path_buf(),
            source: e,
        });
    }
    if let Some(aside) = old {
        std::fs::remove_dir_all(&aside).map_err(|source| DbError::RemoveOld {
            path: aside,
            source,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::database::Frame;

    #[test]
    fn source_paths() {
        let src = Path::new("/db/src");
        assert_eq!(
            source_copy_path(src, "/home/u/app.c"),
            Some(PathBuf::from("/db/src/home/u/app.c"))
        );
        assert_eq!(source_copy_path(src, "app.c"), None);
        assert_eq!(source_copy_path(src, "/a/../../etc/passwd"), None);
    }

    /// A database's `src/` holds the copies of the sources its frames
    /// name; a file of anyone else's there keeps `--force` off it.
    #[test]
    fn force_leaves_a_database_whose_sources_were_added_to() {
        let dir = crate::read::tests::temp_dir("db-src");
        let out = dir.join("db");
        let this_file = concat!(env!("CARGO_MANIFEST_DIR"), "/src/db.rs");
        let db = Database {
            frames: vec![Frame {
                function: "f".into(),
                file: Some(this_file.into()),
                ..Frame::default()
            }],
            ..Database::default()
        };
        write(&db, &out, false).unwrap();
        assert_eq!(replaceable(&out), Ok(()));
        let mine = out.join(SOURCE_DIR).join("home/me/thesis.tex");
        std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
        std::fs::write(&mine, "mine").unwrap();
        let err = write(&db, &out, true).unwrap_err().to_string();
        assert!(
            err.contains("db/src/home/me/thesis.tex, which is no copy of a source file"),
            "{err}"
        );
        assert!(mine.is_file());
        // Empty directories are no one's files.
        std::fs::remove_file(&mine).unwrap();
        write(&db, &out, true).unwrap();
        // A damaged profile.db: what src/ holds cannot be checked.
        std::fs::write(out.join(FILE_NAME), b"HPCPROFD\x01\0\0\0\0\0\0\0\x82").unwrap();
        let err = replaceable(&out).unwrap_err();
        assert!(err.contains("cannot be checked"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_atomically_and_refuses_to_overwrite() {
        let dir = crate::read::tests::temp_dir("db");
        let out = dir.join("db");
        let this_file = concat!(env!("CARGO_MANIFEST_DIR"), "/src/db.rs");
        let db = Database {
            frames: vec![
                Frame {
                    function: "f".into(),
                    file: Some(this_file.into()),
                    line: Some(1),
                    ..Frame::default()
                },
                Frame {
                    function: "g".into(),
                    file: Some("/nonexistent/x.c".into()),
                    ..Frame::default()
                },
            ],
            ..Database::default()
        };
        let w = write(&db, &out, false).unwrap();
        assert_eq!(w.sources, 1);
        let back = Database::from_bytes(&std::fs::read(out.join(FILE_NAME)).unwrap()).unwrap();
        assert_eq!(back, db);
        assert!(source_copy_path(&out.join(SOURCE_DIR), this_file)
            .unwrap()
            .is_file());
        let err = write(&db, &out, false).unwrap_err();
        assert!(matches!(err, DbError::Exists(_)));
        let err = err.to_string();
        assert!(
            err.contains("already exists") && err.contains("--force"),
            "{err}"
        );
        write(&db, &out, true).unwrap();
        // Not a database: never replaced.
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("keep.txt"), "x").unwrap();
        let err = write(&db, &other, true).unwrap_err();
        assert!(matches!(err, DbError::NotADatabase(..)), "{err}");
        assert!(other.join("keep.txt").is_file());
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 2, "{leftovers:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
