//! `hpcview-tui`: looks at an `hpcprof-rs` database in a terminal.
//!
//! For now it prints a text report; the interactive ratatui viewer comes
//! later.
//!
//! ```sh
//! hpcview-tui db/ --report                    # both tables, top 10
//! hpcview-tui db/ --report --view data --top 20
//! ```
//!
//! The report ([`report`]) has a header line (events, processes, threads,
//! primary metric, address recovery rate), the data-centric table (objects
//! with their share, kind, name and allocation site) and the code-centric
//! table (functions with their hottest line), both from `formats::views`.
//!
//! Exit status: 0 on success, 2 when the database cannot be read (missing,
//! damaged or written by a newer version) or without `--report`.

mod report;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use formats::database::{Database, FILE_NAME};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ViewArg {
    /// Data objects, hottest first.
    Data,
    /// Functions, hottest first.
    Code,
    /// Both tables.
    Both,
}

/// View an hpcprof-rs database.
///
/// With --report, prints the data-centric and code-centric tables as text.
/// (The interactive viewer is not built yet.)
#[derive(Debug, Parser)]
#[command(name = "hpcview-tui", version)]
struct Args {
    /// Database directory written by hpcprof-rs (or its profile.db file).
    #[arg(value_name = "DB")]
    db: PathBuf,

    /// Print a text report on standard output instead of starting the viewer.
    #[arg(long)]
    report: bool,

    /// Which tables the report shows.
    #[arg(long, value_enum, default_value = "both")]
    view: ViewArg,

    /// Rows per table.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hpcview-tui: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<ExitCode> {
    if !args.report {
        eprintln!(
            "hpcview-tui: the interactive viewer is not built yet; use `hpcview-tui {} --report` for a text report",
            args.db.display()
        );
        return Ok(ExitCode::from(2));
    }
    let db = load(&args.db)?;
    let tables = match args.view {
        ViewArg::Data => report::Tables::Data,
        ViewArg::Code => report::Tables::Code,
        ViewArg::Both => report::Tables::Both,
    };
    let text = report::render(&db, tables, args.top);
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).context("cannot write to standard output"),
    }
}

/// Reads a database directory (or its `profile.db`); errors name the file.
fn load(path: &Path) -> Result<Database> {
    if !path.exists() {
        anyhow::bail!("database {} does not exist", path.display());
    }
    let file = if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    Database::from_bytes(&bytes).with_context(|| format!("cannot use {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_valid() {
        Args::command().debug_assert();
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = std::env::temp_dir().join(format!("hpcview-tui-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains(FILE_NAME), "{err}");
        let file = dir.join(FILE_NAME);
        std::fs::write(&file, b"HPCPROFD\x01\0\0\0\0\0\0\0\xc1").unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains(FILE_NAME) && err.contains("damaged"), "{err}");
        std::fs::write(&file, b"HPCPROFD\x07\0\0\0\0\0\0\0\x80").unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains("newer"), "{err}");
        std::fs::write(&file, Database::default().to_bytes().unwrap()).unwrap();
        assert!(load(&file).is_ok());
        // A primary metric that names no column would make the views index
        // out of bounds: rejected when loading.
        let mut bad = Database::default();
        bad.info.primary_metric = 5;
        std::fs::write(&file, bad.to_bytes().unwrap()).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains("primary metric"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
