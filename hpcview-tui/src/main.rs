//! `hpcview-tui`: looks at an `hpcprof-rs` database in a terminal.
//!
//! ```sh
//! hpcview-tui db/                             # the interactive viewer
//! hpcview-tui db/ --report                    # both tables, top 10
//! hpcview-tui db/ --report --view data --top 20
//! hpcview-tui db/ --report --view bottleneck
//! hpcview-tui after/ --baseline before/       # delta columns in every pane
//! hpcview-tui after/ --baseline before/ --report
//! ```
//!
//! The viewer is the library's [`hpcview_tui::app`]; keys and panes are in
//! docs/VIEWER.md. The report ([`hpcview_tui::report`]) has a header line
//! (events, processes, threads, primary metric, address recovery rate), the
//! data-centric table (objects with their share, kind, name and allocation
//! site), the code-centric table (functions with their hottest line), or
//! the bottleneck-priority table. With `--baseline` every pane and table
//! gets a `Δshare` column: the change of the row's share against the
//! baseline database in percentage points, or `new`
//! ([`hpcview_tui::state::baseline`]).
//!
//! Exit status: 0 on success, 2 when the database or the baseline cannot be
//! read (missing, damaged or written by a newer version) or the viewer
//! cannot start.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use formats::database::Database;
use hpcview_tui::report;
use hpcview_tui::state::baseline::Baseline;
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

    /// Rows per table; 0 shows every row.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,

    /// Compare with this database (the run before a change): every pane and
    /// table gets a column with the change of each row's share, in
    /// percentage points ("new" for rows the baseline lacks).
    #[arg(long, value_name = "BEFORE_DB")]
    baseline: Option<PathBuf>,

    /// Leave the rows of MPI libraries and OpenMP runtimes (the memory they
    /// allocated, the functions of their modules) out of the report's
    /// tables and the viewer's panes (in the viewer `H` shows them again);
    /// the runtime-memory and waiting lines stay.
    #[arg(long)]
    hide_runtime: bool,
}

/// Reads the baseline database; errors name it.
fn baseline(path: &Path, after: &Database) -> Result<Baseline> {
    let before = model::load(path)
        .with_context(|| format!("--baseline {} is not a usable database", path.display()))?;
    Ok(Baseline::new(path.to_path_buf(), before, after))
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

/// `path`, given as a database, is not a measurements directory or file:
/// else an error that says to merge it first.
fn database_or_hint(path: &Path) -> Result<()> {
    use formats::inspect::{inspect, PathKind};
    let p = path.display();
    match inspect(path) {
        PathKind::Measurements { files } => anyhow::bail!(
            "{p} is a measurements directory of hpcrun-rs ({files} measurement file(s)), not a database: merge it first with `hpcprof-rs -o db {p}`, then `hpcview-tui db`"
        ),
        PathKind::MeasurementFile => anyhow::bail!(
            "{p} is a measurement file of hpcrun-rs, not a database: merge its directory first with `hpcprof-rs -o db DIR`, then `hpcview-tui db`"
        ),
        _ => Ok(()),
    }
}

fn run(args: &Args) -> Result<ExitCode> {
    database_or_hint(&args.db)?;
    if let Some(b) = &args.baseline {
        database_or_hint(b)?;
    }
    if !args.report {
        let model = Model::open(&args.db)?;
        let base = match &args.baseline {
            Some(path) => Some(baseline(path, &model.db)?),
            None => None,
        };
        hpcview_tui::app::run(model, base, args.hide_runtime)?;
        return Ok(ExitCode::SUCCESS);
    }
    let db = model::load(&args.db)?;
    let mut base = match &args.baseline {
        Some(path) => Some(baseline(path, &db)?),
        None => None,
    };
    let tables = match args.view {
        ViewArg::Data => report::Tables::Data,
        ViewArg::Code => report::Tables::Code,
        ViewArg::Both => report::Tables::Both,
        ViewArg::Bottleneck => report::Tables::Bottleneck,
    };
    let options = report::Options {
        hide_runtime: args.hide_runtime,
    };
    // `--top 0`: every row (a report of no rows is never what was asked
    // for).
    let top = match args.top {
        0 => usize::MAX,
        n => n,
    };
    let text = match base.as_mut() {
        Some(b) => report::render_compared_with_options(&db, tables, top, b, options),
        None => report::render_with_options(&db, tables, top, options),
    };
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

    #[test]
    fn a_baseline_that_is_not_a_database_is_named() {
        let dir = std::env::temp_dir().join(format!("hpcview-tui-base-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let not_db = dir.join("notes.txt");
        std::fs::write(&not_db, b"not a database").unwrap();
        let err = format!("{:#}", baseline(&not_db, &Database::default()).unwrap_err());
        assert!(
            err.contains("--baseline") && err.contains("notes.txt"),
            "{err}"
        );
        let err = format!(
            "{:#}",
            baseline(&dir.join("nope"), &Database::default()).unwrap_err()
        );
        assert!(
            err.contains("nope") && err.contains("does not exist"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
