//! The `overhead` harness's table (docs/PERFORMANCE.md): per workload and
//! series, the rounds, the native median wall time, and each tool's wall
//! and CPU time as a ratio to native, the median of the per-round ratios
//! with its 95% bootstrap interval (`1.030 (1.026-1.033)`), plus
//! hpcrun-rs's own time inside the program (handler, allocation hooks).
//! Empty cells: not measured.

use super::{data_rows, fixed, parse_opt, row, sections, Error, Header};

/// The columns, in order.
pub const COLUMNS: [&str; 10] = [
    "workload",
    "rounds",
    "native wall s",
    "hpcrun-rs wall",
    "hpcrun-rs CPU",
    "floor wall",
    "perf -g wall",
    "perf -g CPU",
    "handler ms",
    "hooks ms",
];

/// A ratio to native: the median of the per-round ratios and, when known,
/// its 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    pub median: f64,
    pub interval: Option<(f64, f64)>,
}

impl Ratio {
    fn render(&self) -> String {
        match self.interval {
            Some((lo, hi)) => format!("{:.3} ({lo:.3}-{hi:.3})", self.median),
            None => format!("{:.3}", self.median),
        }
    }

    fn parse(cell: &str, what: &str) -> Result<Option<Ratio>, Error> {
        if cell.is_empty() {
            return Ok(None);
        }
        let bad = || Error::Table(format!("{what}: not `M` or `M (LO-HI)`: {cell:?}"));
        let num = |s: &str| s.trim().parse::<f64>().map_err(|_| bad());
        let (median, interval) = match cell.split_once(" (") {
            Some((m, rest)) => {
                let inner = rest.strip_suffix(')').ok_or_else(bad)?;
                let (lo, hi) = inner.split_once('-').ok_or_else(bad)?;
                (num(m)?, Some((num(lo)?, num(hi)?)))
            }
            None => (num(cell)?, None),
        };
        Ok(Some(Ratio { median, interval }))
    }
}

/// Seconds, or a range of them when rows of several series were pooled
/// (`4.48-4.70`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Secs {
    pub lo: f64,
    pub hi: f64,
}

impl Secs {
    fn render(&self) -> String {
        if format!("{:.2}", self.lo) == format!("{:.2}", self.hi) {
            format!("{:.2}", self.lo)
        } else {
            format!("{:.2}-{:.2}", self.lo, self.hi)
        }
    }

    fn parse(cell: &str) -> Result<Option<Secs>, Error> {
        if cell.is_empty() {
            return Ok(None);
        }
        let bad = || Error::Table(format!("native wall s: not `S` or `LO-HI`: {cell:?}"));
        let num = |s: &str| s.parse::<f64>().map_err(|_| bad());
        Ok(Some(match cell.split_once('-') {
            Some((lo, hi)) => Secs {
                lo: num(lo)?,
                hi: num(hi)?,
            },
            None => {
                let v = num(cell)?;
                Secs { lo: v, hi: v }
            }
        }))
    }
}

/// One row: a workload's series.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub workload: String,
    pub rounds: u32,
    pub native_wall: Option<Secs>,
    pub hpcrun_wall: Option<Ratio>,
    pub hpcrun_cpu: Option<Ratio>,
    pub floor_wall: Option<Ratio>,
    pub perf_wall: Option<Ratio>,
    pub perf_cpu: Option<Ratio>,
    /// Medians of hpcrun-rs's handler and allocation-hook time a run.
    pub handler_ms: Option<f64>,
    pub hooks_ms: Option<f64>,
}

/// The alignment row.
const ALIGN: &str = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

/// A header line and the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub header: Header,
    pub rows: Vec<Row>,
}

impl Table {
    /// The text between the markers: header line, blank line, table.
    pub fn render(&self) -> String {
        let mut s = format!("{}\n\n", self.header.render());
        s.push_str(&row(&COLUMNS.map(String::from)));
        s.push('\n');
        s.push_str(ALIGN);
        s.push('\n');
        let opt = |r: &Option<Ratio>| r.map_or(String::new(), |r| r.render());
        for r in &self.rows {
            let cells = [
                r.workload.clone(),
                r.rounds.to_string(),
                r.native_wall.map_or(String::new(), |s| s.render()),
                opt(&r.hpcrun_wall),
                opt(&r.hpcrun_cpu),
                opt(&r.floor_wall),
                opt(&r.perf_wall),
                opt(&r.perf_cpu),
                fixed(r.handler_ms, 1),
                fixed(r.hooks_ms, 1),
            ];
            s.push_str(&row(&cells));
            s.push('\n');
        }
        s
    }

    /// Reads the text between the markers.
    pub fn parse(body: &str) -> Result<Table, Error> {
        let (header, tables) = sections(body)?;
        let [lines] = &tables[..] else {
            return Err(Error::Table(format!(
                "{} tables after the header line, the tool writes one",
                tables.len()
            )));
        };
        let mut rows = Vec::new();
        for c in data_rows(lines, &COLUMNS, ALIGN)? {
            let ratio = |i: usize| Ratio::parse(c[i], COLUMNS[i]);
            rows.push(Row {
                workload: c[0].to_string(),
                rounds: parse_opt(c[1], "rounds")?
                    .ok_or_else(|| Error::Table(format!("no rounds: {c:?}")))?,
                native_wall: Secs::parse(c[2])?,
                hpcrun_wall: ratio(3)?,
                hpcrun_cpu: ratio(4)?,
                floor_wall: ratio(5)?,
                perf_wall: ratio(6)?,
                perf_cpu: ratio(7)?,
                handler_ms: parse_opt(c[8], "handler ms")?,
                hooks_ms: parse_opt(c[9], "hooks ms")?,
            });
        }
        Ok(Table { header, rows })
    }
}
