//! `hpcprof-rs export DB`: a database as JSON, CSV or a Hatchet literal on
//! standard output (`formats::export`, `formats::hatchet`).

use std::process::ExitCode;

use anyhow::Result;
use formats::export::{self, View};

use super::args::{ExportArgs, FormatArg, ViewArg};
use super::paths::{database_or_hint, load, print_out};

pub(crate) fn run(args: ExportArgs) -> Result<ExitCode> {
    database_or_hint(&args.db, "hpcprof-rs export")?;
    let db = load(&args.db)?;
    let view = match args.view {
        ViewArg::Data => View::Data,
        ViewArg::Code => View::Code,
        ViewArg::Bottleneck => View::Bottleneck,
        ViewArg::Threads => View::Threads,
    };
    let options = export::Options {
        hide_runtime: args.hide_runtime,
    };
    let text = match args.format {
        FormatArg::Json => export::to_json_with(&db, view, args.top, options),
        FormatArg::Csv => export::to_csv_with(&db, view, args.top, options),
        FormatArg::Hatchet if args.hide_runtime => {
            anyhow::bail!("--hide-runtime works with --format json and csv, not hatchet")
        }
        FormatArg::Hatchet => {
            let tree = match view {
                View::Code => formats::hatchet::Tree::Code,
                View::Data => formats::hatchet::Tree::Data,
                View::Bottleneck | View::Threads => {
                    anyhow::bail!("--format hatchet writes a tree: use --view code or --view data")
                }
            };
            formats::hatchet::to_literal(&db, tree, args.top)
        }
    };
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}
