//! What the subcommands read and write: a path checked to be what the
//! command takes (a measurements directory or a database, else an error
//! naming what it is and which command takes it), a database loaded with
//! errors that name the file, a report written to standard output.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use formats::database::{Database, FILE_NAME};

/// `path`, given as a measurements directory, is not a database or one
/// file: else an error that says what it is and which command takes it.
pub(crate) fn measurements_or_hint(path: &Path) -> Result<()> {
    use formats::inspect::{inspect, PathKind};
    let p = path.display();
    match inspect(path) {
        PathKind::Database | PathKind::DatabaseFile => anyhow::bail!(
            "{p} is a database written by hpcprof-rs, not a measurements directory: look at it with `hpcview-tui {p}` (or `hpcview-tui {p} --report`), or print it with `hpcprof-rs export {p}`"
        ),
        PathKind::MeasurementFile => {
            let parent = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            anyhow::bail!(
                "{p} is one measurement file; hpcprof-rs merges the directory that holds it: `hpcprof-rs {}`",
                parent.display()
            )
        }
        _ => Ok(()),
    }
}

/// `path`, given to `command` as a database, is not a measurements
/// directory or file: else an error that says to merge it first.
pub(crate) fn database_or_hint(path: &Path, command: &str) -> Result<()> {
    use formats::inspect::{inspect, PathKind};
    let p = path.display();
    match inspect(path) {
        PathKind::Measurements { files } => anyhow::bail!(
            "{p} is a measurements directory of hpcrun-rs ({files} measurement file(s)), not a database: merge it first with `hpcprof-rs -o db {p}`, then `{command} db`"
        ),
        PathKind::MeasurementFile => anyhow::bail!(
            "{p} is a measurement file of hpcrun-rs, not a database: merge its directory first with `hpcprof-rs -o db DIR`, then `{command} db`"
        ),
        _ => Ok(()),
    }
}

/// Reads a database directory (or its `profile.db`); errors name the file.
pub(crate) fn load(path: &Path) -> Result<Database> {
    let file = if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    };
    if !path.exists() {
        anyhow::bail!("database {} does not exist", path.display());
    }
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    Database::from_bytes(&bytes).with_context(|| format!("cannot use {}", file.display()))
}

/// Writes a report to standard output; a closed pipe
/// (`hpcprof-rs export db | head`) is fine.
pub(crate) fn print_out(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("cannot write to standard output"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("hpcprof-rs-main-load-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let err = format!("{:#}", load(&dir.join("nope")).unwrap_err());
        assert!(
            err.contains("nope") && err.contains("does not exist"),
            "{err}"
        );
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains(FILE_NAME), "{err}");
        std::fs::write(dir.join(FILE_NAME), b"HPCPROFD\x09\0\0\0\0\0\0\0xxxx").unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains(FILE_NAME) && err.contains("newer"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
