//! `hpcprof-rs advise DB`: fast-memory placement and NUMA advice
//! (`formats::advice`, printed by `hpcprof_rs::advise`).

use std::process::ExitCode;

use anyhow::Result;

use super::args::{AdviseArgs, AdviseFormatArg};
use super::paths::{database_or_hint, load, print_out};

pub(crate) fn run(args: AdviseArgs) -> Result<ExitCode> {
    use hpcprof_rs::advise;
    database_or_hint(&args.db, "hpcprof-rs advise")?;
    let db = load(&args.db)?;
    let placement = args
        .fast_mem
        .map(|size| formats::advice::place(&db, size, args.granularity));
    let numa = formats::advice::numa(&db);
    let has_first_touch = db.metric_column("first_touch").is_some();
    let text = match args.format {
        AdviseFormatArg::Text => advise::to_text(&db, placement.as_ref(), &numa, has_first_touch),
        AdviseFormatArg::Json => advise::to_json(placement.as_ref(), &numa, has_first_touch),
    };
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}
