//! `hpcview-tui`: looks at an `hpcprof-rs` database in a terminal.
//!
//! ```sh
//! hpcview-tui db/                             # the interactive viewer
//! hpcview-tui db/ --report                    # both tables, top 10
//! hpcview-tui db/ --report --view data --top 20
//! hpcview-tui db/ --report --view bottleneck
//! ```
//!
//! The viewer is the library's [`hpcview_tui::app`]; keys and panes are in
//! docs/VIEWER.md. The report ([`hpcview_tui::report`]) has a header line
//! (events, processes, threads, primary metric, address recovery rate), the
//! data-centric table (objects with their share, kind, name and allocation
//! site), the code-centric table (functions with their hottest line), or
//! the bottleneck-priority table.
//!
//! Exit status: 0 on success, 2 when the database cannot be read (missing,
//! damaged or written by a newer version) or the viewer cannot start.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use hpcview_tui::report;
use hpcview_tui::state::model::{self, Model};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ViewArg {
    /// Data objects, hottest first.
    Data,
    /// Functions, hottest first.
    Code,
    /// Both tables.
    Both,
    /// Objects and functions in bottleneck-priority order.
    Bottleneck,
}

/// View an hpcprof-rs database.
///
/// Without --report, starts the interactive viewer (press ? for keys).
/// With --report, prints the data-centric and code-centric tables as text.
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
        let model = Model::open(&args.db)?;
        hpcview_tui::app::run(model)?;
        return Ok(ExitCode::SUCCESS);
    }
    let db = model::load(&args.db)?;
    let tables = match args.view {
        ViewArg::Data => report::Tables::Data,
        ViewArg::Code => report::Tables::Code,
        ViewArg::Both => report::Tables::Both,
        ViewArg::Bottleneck => report::Tables::Bottleneck,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use formats::database::{Database, FILE_NAME};
    use hpcview_tui::state::model::load;

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
