//! The harness's tables: the text report (times, overheads, pooled
//! overheads, samples and output; the baseline comparison) and the table of
//! docs/PERFORMANCE.md (`benches::doc_tables::overhead`).

use crate::series::{bootstrap_median_ci, med, median, Run, Series, Tool};

pub fn pct(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{:+.1}%", x * 100.0)
    }
}

/// One table: a header row and the data rows.
pub type Table = Vec<Vec<String>>;

pub fn print_table(rows: &Table, markdown: bool) {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for (i, row) in rows.iter().enumerate() {
        if markdown {
            println!("| {} |", row.join(" | "));
            if i == 0 {
                let align: Vec<&str> = (0..row.len())
                    .map(|c| if c == 0 { "---" } else { "---:" })
                    .collect();
                println!("|{}|", align.join("|"));
            }
        } else {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (v, w))| {
                    if c == 0 {
                        format!("{v:<w$}")
                    } else {
                        format!("{v:>w$}")
                    }
                })
                .collect();
            println!("{}", cells.join("  "));
        }
    }
    println!();
}

/// Times (wall or CPU) and overheads against native: the ratio of the
/// medians and the median of the per-round ratios with its bootstrap 95%
/// interval.
pub fn time_table(series: &[Series], tools: &[Tool], what: &str, f: fn(&Run) -> f64) -> Table {
    let mut header = vec!["workload".to_string()];
    header.extend(tools.iter().map(|t| format!("{} {what} s", t.name())));
    for t in &tools[1..] {
        header.push(format!("{} %", t.name()));
        header.push(format!("{} paired %", t.name()));
    }
    let mut rows = vec![header];
    for s in series {
        let Some(native) = s.of(Tool::Native) else {
            continue;
        };
        let base = med(native, f);
        let mut row = vec![s.name.clone()];
        for t in tools {
            row.push(
                s.of(*t)
                    .map_or("n/a".into(), |r| format!("{:.2}", med(r, f))),
            );
        }
        for t in &tools[1..] {
            let Some(runs) = s.of(*t) else {
                row.extend(["n/a".into(), "n/a".into()]);
                continue;
            };
            row.push(pct(med(runs, f) / base - 1.0));
            row.push(paired_median(runs, native, f));
        }
        rows.push(row);
    }
    rows
}

/// The median of the per-round ratios `runs / against - 1` and its
/// bootstrap 95% interval, as "+m% (lo .. hi)".
pub fn paired_median(runs: &[Run], against: &[Run], f: fn(&Run) -> f64) -> String {
    let mut paired: Vec<f64> = runs
        .iter()
        .zip(against)
        .map(|(r, a)| f(r) / f(a) - 1.0)
        .collect();
    let (lo, hi) = bootstrap_median_ci(&paired);
    format!("{} ({} .. {})", pct(median(&mut paired)), pct(lo), pct(hi))
}

/// Every per-round ratio (tool / native - 1) of `tool`, over all workloads.
pub fn paired_ratios(series: &[Series], tool: Tool, f: fn(&Run) -> f64) -> Vec<f64> {
    let mut all = Vec::new();
    for s in series {
        if let (Some(native), Some(runs)) = (s.of(Tool::Native), s.of(tool)) {
            all.extend(runs.iter().zip(native).map(|(r, n)| f(r) / f(n) - 1.0));
        }
    }
    all
}

/// The overhead over all workloads at once: the median of every per-round
/// ratio and its bootstrap 95% interval. One workload's median moves with
/// the machine's noise (several percent on a shared VM); pooling all
/// rounds of all workloads narrows that.
pub fn pooled_table(series: &[Series], tools: &[Tool], f: fn(&Run) -> f64) -> Table {
    let header = ["tool", "paired runs", "pooled median %", "95% interval"];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect()];
    for t in &tools[1..] {
        let mut ratios = paired_ratios(series, *t, f);
        let (lo, hi) = bootstrap_median_ci(&ratios);
        rows.push(vec![
            t.name().to_string(),
            ratios.len().to_string(),
            pct(median(&mut ratios)),
            format!("{} .. {}", pct(lo), pct(hi)),
        ]);
    }
    rows
}

/// Samples taken and megabytes written (medians); for hpcrun-rs also the
/// time its handler and its allocation hooks took inside the program.
pub fn output_table(series: &[Series], tools: &[Tool]) -> Table {
    let mut header = vec!["workload".to_string()];
    for t in &tools[1..] {
        header.push(format!("{} samples", t.name()));
        if *t != Tool::Floor {
            header.push(format!("{} MB", t.name()));
        }
        if t.is_hpcrun() {
            header.push(format!("{} handler ms", t.name()));
            header.push(format!("{} hooks ms", t.name()));
        }
    }
    let mut rows = vec![header];
    for s in series {
        let mut row = vec![s.name.clone()];
        for t in &tools[1..] {
            let runs = s.of(*t).unwrap_or(&[]);
            row.push(format!("{:.0}", med(runs, |r| r.samples as f64)));
            if *t != Tool::Floor {
                row.push(format!("{:.2}", med(runs, |r| r.bytes as f64) / 1e6));
            }
            if t.is_hpcrun() {
                row.push(format!("{:.1}", med(runs, |r| r.handler_ns as f64) / 1e6));
                row.push(format!("{:.1}", med(runs, |r| r.hook_ns as f64) / 1e6));
            }
        }
        rows.push(row);
    }
    rows
}

/// The text report.
pub fn report(series: &[Series], tools: &[Tool]) {
    println!("## wall time\n");
    print_table(&time_table(series, tools, "wall", |r| r.wall), false);
    println!("## CPU time (user + system, whole process tree)\n");
    print_table(&time_table(series, tools, "CPU", |r| r.cpu), false);
    println!("## all workloads pooled: wall time\n");
    print_table(&pooled_table(series, tools, |r| r.wall), false);
    println!("## all workloads pooled: CPU time\n");
    print_table(&pooled_table(series, tools, |r| r.cpu), false);
    if tools.contains(&Tool::Baseline) {
        println!("## hpcrun-rs against the baseline (paired by round)\n");
        print_table(&against_baseline(series), false);
    }
    println!("## samples and output\n");
    print_table(&output_table(series, tools), false);
}

/// Per workload, hpcrun-rs's wall and CPU time against the baseline's in
/// the same round (hpcrun-rs / baseline - 1): the median and its bootstrap
/// 95% interval; negative means this build costs less.
pub fn against_baseline(series: &[Series]) -> Table {
    let header = ["workload", "rounds", "wall, paired %", "CPU, paired %"];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect()];
    for s in series {
        let (Some(now), Some(before)) = (s.of(Tool::Hpcrun), s.of(Tool::Baseline)) else {
            continue;
        };
        let mut row = vec![s.name.clone(), now.len().to_string()];
        row.push(paired_median(now, before, |r| r.wall));
        row.push(paired_median(now, before, |r| r.cpu));
        rows.push(row);
    }
    rows
}

/// The table of docs/PERFORMANCE.md: per workload the ratios to native
/// (median of the per-round ratios, bootstrap 95% interval) and
/// hpcrun-rs's own time.
pub fn doc_table(
    series: &[Series],
    header: benches::doc_tables::Header,
) -> benches::doc_tables::overhead::Table {
    use benches::doc_tables::overhead::{Ratio, Row, Secs, Table};
    let mut rows = Vec::new();
    for s in series {
        let Some(native) = s.of(Tool::Native) else {
            continue;
        };
        let ratio = |tool: Tool, f: fn(&Run) -> f64| {
            let runs = s.of(tool)?;
            let mut r: Vec<f64> = runs.iter().zip(native).map(|(r, n)| f(r) / f(n)).collect();
            let interval = bootstrap_median_ci(&r);
            Some(Ratio {
                median: median(&mut r),
                interval: Some(interval),
            })
        };
        let wall = med(native, |r| r.wall);
        let own = |f: fn(&Run) -> f64| s.of(Tool::Hpcrun).map(|r| med(r, f) / 1e6);
        rows.push(Row {
            workload: s.name.clone(),
            rounds: native.len() as u32,
            native_wall: Some(Secs { lo: wall, hi: wall }),
            hpcrun_wall: ratio(Tool::Hpcrun, |r| r.wall),
            hpcrun_cpu: ratio(Tool::Hpcrun, |r| r.cpu),
            floor_wall: ratio(Tool::Floor, |r| r.wall),
            perf_wall: ratio(Tool::Perf, |r| r.wall),
            perf_cpu: ratio(Tool::Perf, |r| r.cpu),
            handler_ms: own(|r| r.handler_ns as f64),
            hooks_ms: own(|r| r.hook_ns as f64),
        });
    }
    Table { header, rows }
}
