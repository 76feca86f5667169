//! The `truth` harness's tables (docs/ACCURACY.md): per workload, how
//! mem:soft's per-object shares agree with DHAT's access volume (and,
//! with `--sim`, with simulated LLC misses and stall cycles), and where
//! mem:soft's samples went. `-`: not defined (too few objects) or not
//! measured.

use super::{data_rows, row, sections, Error, Header};

/// The agreement table's columns without the simulation.
pub const AGREEMENT: [&str; 9] = [
    "workload",
    "objects",
    "top (DHAT bytes)",
    "top (mem:soft)",
    "top-1",
    "ρ bytes",
    "TVD bytes",
    "ρ reads",
    "TVD reads",
];

/// The columns `--sim` adds.
pub const SIMULATED: [&str; 8] = [
    "top (sim. LLC misses)",
    "top-1",
    "ρ misses",
    "TVD misses",
    "top (sim. stall)",
    "top-1",
    "ρ stall",
    "TVD stall",
];

const AGREEMENT_ALIGN: &str = "|---|--:|---|---|---|--:|--:|--:|--:|";
const SIMULATED_ALIGN: &str = "---|---|--:|--:|---|---|--:|--:|";

/// The context table's columns.
pub const CONTEXT: [&str; 9] = [
    "workload",
    "samples",
    "memory",
    "recovered",
    "heap (site)",
    "heap (small)",
    "static",
    "stack",
    "unknown",
];

const CONTEXT_ALIGN: &str = "|---|--:|--:|--:|--:|--:|--:|--:|--:|";

/// Agreement with one truth.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Versus {
    /// The truth's top object.
    pub top: Option<String>,
    /// Whether mem:soft's top object is the truth's.
    pub top1: Option<bool>,
    /// Spearman's ρ and the total variation distance.
    pub rho: Option<f64>,
    pub tvd: Option<f64>,
}

/// One workload's agreement.
#[derive(Debug, Clone, PartialEq)]
pub struct AgreementRow {
    pub workload: String,
    pub objects: u32,
    /// Against DHAT's bytes read + written (`top` is DHAT's top object).
    pub bytes: Versus,
    /// mem:soft's top object.
    pub prof_top: Option<String>,
    /// ρ and TVD against DHAT's bytes read (no top of its own).
    pub reads: Versus,
    /// Against the simulated LLC misses and stall cycles (`--sim`).
    pub misses: Versus,
    pub stall: Versus,
}

/// One workload's context: where mem:soft's samples went, in percent.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextRow {
    pub workload: String,
    pub samples: u64,
    /// memory, recovered, heap (site), heap (small), static, stack,
    /// unknown.
    pub pct: [Option<f64>; 7],
}

/// The header line and the tables: the harness writes both; a document
/// may keep one of them (`None`: not in this block).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub header: Header,
    /// The agreement table has the `--sim` columns.
    pub sim: bool,
    pub agreement: Option<Vec<AgreementRow>>,
    pub context: Option<Vec<ContextRow>>,
}

fn name(n: &Option<String>) -> String {
    n.as_deref().map_or("-".into(), |s| format!("`{s}`"))
}

fn parse_name(cell: &str) -> Result<Option<String>, Error> {
    if cell == "-" {
        return Ok(None);
    }
    cell.strip_prefix('`')
        .and_then(|c| c.strip_suffix('`'))
        .map(|c| Some(c.to_string()))
        .ok_or_else(|| Error::Table(format!("an object is `name` or -: {cell:?}")))
}

fn top1(t: Option<bool>) -> String {
    match t {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "-",
    }
    .into()
}

fn parse_top1(cell: &str) -> Result<Option<bool>, Error> {
    match cell {
        "yes" => Ok(Some(true)),
        "**no**" => Ok(Some(false)),
        "-" => Ok(None),
        _ => Err(Error::Table(format!("top-1 is yes, **no** or -: {cell:?}"))),
    }
}

fn num(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

fn parse_num(cell: &str) -> Result<Option<f64>, Error> {
    if cell == "-" {
        return Ok(None);
    }
    cell.parse()
        .map(Some)
        .map_err(|_| Error::Table(format!("not a number or -: {cell:?}")))
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.0}%"))
}

fn parse_pct(cell: &str) -> Result<Option<f64>, Error> {
    if cell == "-" {
        return Ok(None);
    }
    cell.strip_suffix('%')
        .and_then(|c| c.parse().ok())
        .map(Some)
        .ok_or_else(|| Error::Table(format!("not a percentage or -: {cell:?}")))
}

impl Table {
    /// The agreement table's columns.
    pub fn agreement_columns(sim: bool) -> Vec<&'static str> {
        let mut c = AGREEMENT.to_vec();
        if sim {
            c.extend(SIMULATED);
        }
        c
    }

    /// The text between the markers: header line, agreement table, context
    /// table (blank lines between).
    pub fn render(&self) -> String {
        let mut s = format!("{}\n", self.header.render());
        if let Some(agreement) = &self.agreement {
            s.push('\n');
            s.push_str(&row(&Self::agreement_columns(self.sim)
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()));
            s.push('\n');
            s.push_str(AGREEMENT_ALIGN);
            if self.sim {
                s.push_str(SIMULATED_ALIGN);
            }
            s.push('\n');
            for r in agreement {
                let mut c = vec![
                    r.workload.clone(),
                    r.objects.to_string(),
                    name(&r.bytes.top),
                    name(&r.prof_top),
                    top1(r.bytes.top1),
                    num(r.bytes.rho),
                    num(r.bytes.tvd),
                    num(r.reads.rho),
                    num(r.reads.tvd),
                ];
                if self.sim {
                    for v in [&r.misses, &r.stall] {
                        c.extend([name(&v.top), top1(v.top1), num(v.rho), num(v.tvd)]);
                    }
                }
                s.push_str(&row(&c));
                s.push('\n');
            }
        }
        if let Some(context) = &self.context {
            s.push('\n');
            s.push_str(&row(&CONTEXT.map(String::from)));
            s.push('\n');
            s.push_str(CONTEXT_ALIGN);
            s.push('\n');
            for r in context {
                let mut c = vec![r.workload.clone(), r.samples.to_string()];
                c.extend(r.pct.iter().map(|p| pct(*p)));
                s.push_str(&row(&c));
                s.push('\n');
            }
        }
        s
    }

    /// Reads the text between the markers.
    pub fn parse(body: &str) -> Result<Table, Error> {
        let (header, tables) = sections(body)?;
        let is_context = |t: &[&str]| {
            t.first()
                .is_some_and(|h| h.starts_with("| workload | samples |"))
        };
        let (agreement, context) = match &tables[..] {
            [a, c] if !is_context(a) && is_context(c) => (Some(a), Some(c)),
            [c] if is_context(c) => (None, Some(c)),
            [a] => (Some(a), None),
            _ => {
                return Err(Error::Table(format!(
                    "{} tables after the header line; the tool writes the agreement table, then the context table",
                    tables.len()
                )))
            }
        };
        let sim = agreement
            .and_then(|a| a.first())
            .is_some_and(|h| h.contains(SIMULATED[0]));
        let agreement = match agreement {
            Some(lines) => Some(agreement_rows(lines, sim)?),
            None => None,
        };
        let context = match context {
            Some(lines) => Some(context_rows(lines)?),
            None => None,
        };
        Ok(Table {
            header,
            sim,
            agreement,
            context,
        })
    }
}

/// The agreement table's rows.
fn agreement_rows(lines: &[&str], sim: bool) -> Result<Vec<AgreementRow>, Error> {
    let columns = Table::agreement_columns(sim);
    let align = if sim {
        format!("{AGREEMENT_ALIGN}{SIMULATED_ALIGN}")
    } else {
        AGREEMENT_ALIGN.to_string()
    };
    let mut rows = Vec::new();
    for c in data_rows(lines, &columns, &align)? {
        let versus = |i: usize| -> Result<Versus, Error> {
            Ok(Versus {
                top: parse_name(c[i])?,
                top1: parse_top1(c[i + 1])?,
                rho: parse_num(c[i + 2])?,
                tvd: parse_num(c[i + 3])?,
            })
        };
        let (misses, stall) = if sim {
            (versus(9)?, versus(13)?)
        } else {
            (Versus::default(), Versus::default())
        };
        rows.push(AgreementRow {
            workload: c[0].to_string(),
            objects: c[1]
                .parse()
                .map_err(|_| Error::Table(format!("objects: {:?}", c[1])))?,
            bytes: Versus {
                top: parse_name(c[2])?,
                top1: parse_top1(c[4])?,
                rho: parse_num(c[5])?,
                tvd: parse_num(c[6])?,
            },
            prof_top: parse_name(c[3])?,
            reads: Versus {
                top: None,
                top1: None,
                rho: parse_num(c[7])?,
                tvd: parse_num(c[8])?,
            },
            misses,
            stall,
        });
    }
    Ok(rows)
}

/// The context table's rows.
fn context_rows(lines: &[&str]) -> Result<Vec<ContextRow>, Error> {
    let mut rows = Vec::new();
    for c in data_rows(lines, &CONTEXT, CONTEXT_ALIGN)? {
        let mut pct = [None; 7];
        for (i, p) in pct.iter_mut().enumerate() {
            *p = parse_pct(c[i + 2])?;
        }
        rows.push(ContextRow {
            workload: c[0].to_string(),
            samples: c[1]
                .parse()
                .map_err(|_| Error::Table(format!("samples: {:?}", c[1])))?,
            pct,
        });
    }
    Ok(rows)
}
