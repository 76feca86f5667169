//! The report: per workload, the agreement of mem:soft with each truth
//! and the context columns (where the profiler's samples went), as the
//! tables of `benches::doc_tables::truth` between their markers, and the
//! per-object shares, printed and appended to docs/ACCURACY.md under a
//! heading per CPU vendor.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use benches::doc_tables::truth::{AgreementRow, ContextRow, Table, Versus};
use benches::doc_tables::Header;

use crate::compare::{Agreement, Entry};
use crate::profile::Profile;

/// Everything measured on one workload.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: String,
    pub expect: &'static str,
    pub entries: Vec<Entry>,
    pub access: Agreement,
    pub reads: Agreement,
    /// Against simulated LLC misses, when simulated.
    pub misses: Option<Agreement>,
    /// Against simulated stall cycles (latency-weighted misses).
    pub stall: Option<Agreement>,
    /// The (smaller) input lackey ran.
    pub sim_command: Option<String>,
    pub profile: Profile,
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.0}%", 100.0 * x)
    }
}

/// Where the profiler's sampled accesses went, as shares of all sampled
/// accesses over every object: heap (with a site), other heap (no site:
/// small blocks), static, stack, unknown.
fn kinds(p: &Profile) -> [f64; 5] {
    let mut w = [0.0; 5];
    for o in &p.objects {
        let i = match (o.kind.as_str(), &o.site) {
            ("heap", Some(_)) => 0,
            ("heap", None) => 1,
            ("static", _) => 2,
            ("stack", _) => 3,
            _ => 4,
        };
        w[i] += (o.reads + o.writes) as f64;
    }
    let total: f64 = w.iter().sum();
    w.map(|x| if total > 0.0 { x / total } else { f64::NAN })
}

/// mem:soft's agreement with one truth, as the docs' table has it.
fn versus(a: &Agreement) -> Versus {
    Versus {
        top: a.truth_top.clone(),
        top1: a.top1(),
        rho: a.spearman,
        tvd: a.tvd,
    }
}

/// The docs' tables (agreement, context) of `outcomes` under `header`.
pub fn table(header: Header, outcomes: &[Outcome]) -> Table {
    let sim = outcomes.iter().any(|o| o.misses.is_some());
    let agreement = outcomes
        .iter()
        .map(|o| AgreementRow {
            workload: o.name.clone(),
            objects: o.access.objects as u32,
            bytes: versus(&o.access),
            prof_top: o.access.prof_top.clone(),
            reads: Versus {
                top: None,
                top1: None,
                rho: o.reads.spearman,
                tvd: o.reads.tvd,
            },
            misses: o.misses.as_ref().map(versus).unwrap_or_default(),
            stall: o.stall.as_ref().map(versus).unwrap_or_default(),
        })
        .collect();
    let context = outcomes
        .iter()
        .map(|o| {
            let p = &o.profile;
            let k = kinds(p);
            let ratio = |a: u64, b: u64| (b > 0).then(|| 100.0 * a as f64 / b as f64);
            let share = |x: f64| (!x.is_nan()).then_some(100.0 * x);
            ContextRow {
                workload: o.name.clone(),
                samples: p.samples,
                pct: [
                    ratio(p.loads + p.stores, p.samples),
                    ratio(p.recovered, p.loads),
                    share(k[0]),
                    share(k[1]),
                    share(k[2]),
                    share(k[3]),
                    share(k[4]),
                ],
            }
        })
        .collect();
    Table {
        header,
        sim,
        agreement: Some(agreement),
        context: Some(context),
    }
}

/// The Markdown section for one harness run: `heading`, the tables between
/// their markers (`label` names them) and the per-object shares.
pub fn markdown(heading: &str, label: &str, header: Header, outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{heading}\n");
    let _ = writeln!(s, "{}", benches::doc_tables::start("truth", label));
    s.push_str(&table(header, outcomes).render());
    let _ = writeln!(s, "{}", benches::doc_tables::END);
    s.push_str(
        "\nPer object (heap objects by allocation site; each column renormalised over them):\n\n",
    );
    for o in outcomes {
        let _ = writeln!(s, "- **{}** (expected: {}):", o.name, o.expect);
        if let Some(c) = &o.sim_command {
            let c = c.rsplit('/').next().unwrap_or(c);
            let _ = writeln!(s, "  (simulated on `{c}`)");
        }
        let sum = |f: &dyn Fn(&Entry) -> f64| o.entries.iter().map(f).sum::<f64>();
        let (ta, tr, pa) = (
            sum(&|e| e.truth_access),
            sum(&|e| e.truth_reads),
            sum(&|e| e.prof_access),
        );
        let tm = sum(&|e| e.truth_misses.unwrap_or(0.0));
        let tst = sum(&|e| e.truth_stall.unwrap_or(0.0));
        let share = |x: f64, t: f64| if t > 0.0 { x / t } else { f64::NAN };
        let mut shown = 0;
        for e in &o.entries {
            let big = share(e.truth_access, ta).max(share(e.prof_access, pa));
            if shown >= 8 || big.is_nan() || big < 0.01 {
                continue;
            }
            shown += 1;
            let misses = match (e.truth_misses, e.truth_stall) {
                (Some(m), Some(st)) => format!(
                    ", sim. LLC misses {}, sim. stall {}",
                    pct(share(m, tm)),
                    pct(share(st, tst))
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "  `{}` ({}): DHAT bytes {}, reads {}{misses}; mem:soft {}",
                e.name,
                e.key,
                pct(share(e.truth_access, ta)),
                pct(share(e.truth_reads, tr)),
                pct(share(e.prof_access, pa)),
            );
        }
    }
    s
}

/// Appends `section` to `file` under `## <vendor>`, adding the heading if
/// the file does not have it yet (sections are appended at the end of the
/// file; a vendor's heading is written once).
pub fn append(file: &Path, vendor: &str, section: &str) -> Result<()> {
    let mut text = std::fs::read_to_string(file).unwrap_or_default();
    let heading = format!("## Results: {vendor}");
    if !text.lines().any(|l| l.trim() == heading) {
        if !text.is_empty() && !text.ends_with("\n\n") {
            text.push('\n');
        }
        let _ = writeln!(text, "{heading}\n");
        text.push_str(section);
    } else {
        // Insert before the next `## ` heading after this vendor's.
        let start = text.find(&heading).unwrap_or(0) + heading.len();
        let end = text[start..]
            .find("\n## ")
            .map_or(text.len(), |i| start + i + 1);
        let mut insert = section.to_string();
        if !text[..end].ends_with("\n\n") {
            insert.insert(0, '\n');
        }
        if end < text.len() {
            insert.push('\n');
        }
        text.insert_str(end, &insert);
    }
    std::fs::write(file, text).with_context(|| format!("{}", file.display()))
}
