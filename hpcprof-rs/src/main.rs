//! `hpcprof-rs`: merges the per-thread measurement files of `hpcrun-rs`,
//! maps them to source and writes a database; exports it as JSON or CSV.
//!
//! ```sh
//! hpcprof-rs measurements/                 # -> db/ (profile.db + src/)
//! hpcprof-rs -o run1.db -j 8 measurements/
//! hpcprof-rs export db/ --view data --format json --top 10
//! ```
//!
//! The work is done by the `hpcprof_rs` library: the merge streams every
//! `*.hpcrun` file of the directory through a fixed number of workers
//! (`-j N`; damaged files are skipped with a warning), symbolises raw
//! addresses with addr2line, merges the code-centric and the data-centric
//! trees with per-thread and per-rank distributions, names heap objects
//! after the variable their allocation is assigned to and writes the
//! database atomically.
//!
//! Exit status: 0 on success; 1 with `--strict` when a file was skipped;
//! 2 when nothing was written (bad arguments, no measurements, an existing
//! output, an unreadable database to export).
//!
//! This file dispatches to the subcommands; the command line and each
//! step's driver are in `cli/` (`cli::args`, `cli::merge`, ...).

mod cli;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use cli::args::{mistyped_subcommand, AdviseArgs, DiffArgs, ExportArgs, MergeArgs};

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(sub) = args.get(1).and_then(|a| mistyped_subcommand(a)) {
        let arg = args[1].to_string_lossy();
        let _ = writeln!(
            std::io::stderr(),
            "error: unrecognized subcommand '{arg}'\n\n  tip: a similar subcommand exists: '{sub}'\n\nUsage: hpcprof-rs {sub} ... (see hpcprof-rs {sub} --help)\n       hpcprof-rs [OPTIONS] <MEASUREMENTS_DIR>"
        );
        return ExitCode::from(2);
    }
    let result = if args.get(1).is_some_and(|a| a == "export") {
        let rest =
            std::iter::once(OsString::from("hpcprof-rs export")).chain(args[2..].iter().cloned());
        cli::export::run(ExportArgs::parse_from(rest))
    } else if args.get(1).is_some_and(|a| a == "diff") {
        let rest =
            std::iter::once(OsString::from("hpcprof-rs diff")).chain(args[2..].iter().cloned());
        cli::diff::run(DiffArgs::parse_from(rest))
    } else if args.get(1).is_some_and(|a| a == "advise") {
        let rest =
            std::iter::once(OsString::from("hpcprof-rs advise")).chain(args[2..].iter().cloned());
        cli::advise::run(AdviseArgs::parse_from(rest))
    } else {
        cli::merge::run(MergeArgs::parse_from(args))
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hpcprof-rs: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
