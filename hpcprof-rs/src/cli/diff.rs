//! `hpcprof-rs diff BEFORE AFTER`: two databases compared
//! (`formats::diff`: each row judged against sampling noise, rows within
//! noise listed last or, with `--hide-noise`, only counted), with the
//! noise warnings on stderr and, with
//! `--fail-if-worse`, exit status 1 when something got worse beyond
//! sampling noise.

use std::process::ExitCode;

use anyhow::Result;

use super::args::{DiffArgs, DiffFormatArg};
use super::paths::{database_or_hint, load, print_out};

pub(crate) fn run(args: DiffArgs) -> Result<ExitCode> {
    if let Some(p) = args.fail_if_worse {
        if !p.is_finite() || p < 0.0 {
            anyhow::bail!("--fail-if-worse {p}: give a percentage of 0 or more");
        }
    }
    if !args.noise_sigmas.is_finite() || args.noise_sigmas < 1.0 {
        anyhow::bail!(
            "--noise-sigmas {}: give a number of standard deviations of 1 or more (3 by default)",
            args.noise_sigmas
        );
    }
    database_or_hint(&args.before, "hpcprof-rs diff")?;
    database_or_hint(&args.after, "hpcprof-rs diff")?;
    let before = load(&args.before)?;
    let after = load(&args.after)?;
    let d = formats::diff::diff_at(&before, &after, args.noise_sigmas);
    let text = match args.format {
        DiffFormatArg::Text => formats::diff::to_text_with(&d, args.top, args.hide_noise),
        DiffFormatArg::Json => formats::diff::to_json(&d),
        DiffFormatArg::Csv => formats::diff::to_csv(&d),
    };
    print_out(&text)?;
    for w in &d.warnings {
        eprintln!("hpcprof-rs: warning: {w}");
    }
    if let Some(pct) = args.fail_if_worse {
        let reasons = formats::diff::worse(&d, pct, args.min_share / 100.0);
        for r in &reasons {
            eprintln!("hpcprof-rs: worse by more than {pct}%: {r}");
        }
        if !reasons.is_empty() {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
