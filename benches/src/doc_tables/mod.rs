//! The tables that the `overhead` and `truth` harnesses write into
//! docs/PERFORMANCE.md and docs/ACCURACY.md: their Markdown format, in one
//! place, so that the harnesses print them and a test reads the committed
//! ones back.
//!
//! A table in a document sits between markers, starts with a header line
//! naming the build and the machine ([`Header`]) and is followed by the
//! tool's table(s):
//!
//! ```text
//! <!-- table: overhead examples -->
//! Build 09c1f5b, Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 167, AVX-512 yes, 2 cores): 2026-11-28, ...
//!
//! | workload | rounds | native wall s | ...
//! <!-- end table -->
//! ```
//!
//! [`overhead`] and [`truth`] hold each tool's row types, their rendering
//! and their parsing: a committed table parses into rows that render to
//! the same text.
//!
//! ```
//! let doc = "<!-- table: overhead demo -->\nBuild abc1234, AMD EPYC (AuthenticAMD family 25 model 1, AVX-512 no, 2 cores): test\n\n\
//! | workload | rounds | native wall s | hpcrun-rs wall | hpcrun-rs CPU | floor wall | perf -g wall | perf -g CPU | handler ms | hooks ms |\n\
//! |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n\
//! | abc | 5 | 3.03 | 0.986 | 0.984 | 1.023 | 1.369 | 1.132 | | |\n<!-- end table -->\n";
//! let blocks = benches::doc_tables::blocks(doc).unwrap();
//! let table = benches::doc_tables::overhead::Table::parse(&blocks[0].body).unwrap();
//! assert_eq!(table.render(), blocks[0].body);
//! ```

pub mod header;
pub mod overhead;
pub mod truth;

pub use header::Header;

/// The line that ends every table.
pub const END: &str = "<!-- end table -->";

/// The line that starts a table of `tool` (`overhead`, `truth`) named
/// `name`.
pub fn start(tool: &str, name: &str) -> String {
    format!("<!-- table: {tool} {name} -->")
}

/// A table that could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("line {line}: {what}")]
    Marker { line: usize, what: String },
    #[error("header line: {0}")]
    Header(String),
    #[error("table: {0}")]
    Table(String),
}

/// One marked table of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// `overhead`, `truth`, ...
    pub tool: String,
    /// The rest of the start marker.
    pub name: String,
    /// 1-based line of the start marker.
    pub line: usize,
    /// The lines between the markers, each ending in a newline.
    pub body: String,
}

/// Every marked table of `doc`, in order; a start marker without its end,
/// or an end without a start, is an error naming the line.
pub fn blocks(doc: &str) -> Result<Vec<Block>, Error> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in doc.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix("<!-- table: ") {
            if open.is_some() {
                return Err(Error::Marker {
                    line: n,
                    what: "a table starts inside another".into(),
                });
            }
            let rest = rest.strip_suffix(" -->").ok_or(Error::Marker {
                line: n,
                what: "a start marker must end in ` -->`".into(),
            })?;
            let (tool, name) = rest.split_once(' ').unwrap_or((rest, ""));
            open = Some(Block {
                tool: tool.to_string(),
                name: name.to_string(),
                line: n,
                body: String::new(),
            });
        } else if line == END {
            out.push(open.take().ok_or(Error::Marker {
                line: n,
                what: "an end marker without a start".into(),
            })?);
        } else if let Some(b) = &mut open {
            b.body.push_str(line);
            b.body.push('\n');
        }
    }
    match open {
        Some(b) => Err(Error::Marker {
            line: b.line,
            what: "a table without its end marker".into(),
        }),
        None => Ok(out),
    }
}

/// The cells of a Markdown table row `| a | b |` (trimmed; empty cells
/// are empty strings).
pub(crate) fn cells(row: &str) -> Result<Vec<&str>, Error> {
    let inner = row
        .strip_prefix('|')
        .and_then(|r| r.strip_suffix('|'))
        .ok_or_else(|| Error::Table(format!("not a table row: {row:?}")))?;
    Ok(inner.split('|').map(str::trim).collect())
}

/// A Markdown table row from its cells (an empty cell as `| |`).
pub(crate) fn row(cells: &[String]) -> String {
    let mut s = String::from("|");
    for c in cells {
        if c.is_empty() {
            s.push_str(" |");
        } else {
            s.push_str(&format!(" {c} |"));
        }
    }
    s
}

/// Splits `body` into its header line and the tables that follow, each a
/// list of lines (the header row, the alignment row, the data rows);
/// blank lines separate them.
pub(crate) fn sections(body: &str) -> Result<(Header, Vec<Vec<&str>>), Error> {
    let mut lines = body.lines();
    let header = Header::parse(lines.next().unwrap_or_default())?;
    let mut tables: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in lines {
        if line.is_empty() {
            if !current.is_empty() {
                tables.push(std::mem::take(&mut current));
            }
        } else if line.starts_with('|') {
            current.push(line);
        } else {
            return Err(Error::Table(format!(
                "only the header line, blank lines and table rows go between the markers: {line:?}"
            )));
        }
    }
    if !current.is_empty() {
        tables.push(current);
    }
    Ok((header, tables))
}

/// Checks that `lines` open with exactly `columns` and `align` and returns
/// the data rows' cells.
pub(crate) fn data_rows<'a>(
    lines: &[&'a str],
    columns: &[&str],
    align: &str,
) -> Result<Vec<Vec<&'a str>>, Error> {
    let head = lines
        .first()
        .ok_or_else(|| Error::Table("no header row".into()))?;
    let got = cells(head)?;
    if got != columns {
        return Err(Error::Table(format!(
            "columns {got:?}, the tool writes {columns:?}"
        )));
    }
    if lines.get(1) != Some(&align) {
        return Err(Error::Table(format!(
            "alignment row {:?}, the tool writes {align:?}",
            lines.get(1)
        )));
    }
    lines[2..]
        .iter()
        .map(|l| {
            let c = cells(l)?;
            if c.len() != columns.len() {
                return Err(Error::Table(format!(
                    "{} cells, {} columns: {l:?}",
                    c.len(),
                    columns.len()
                )));
            }
            Ok(c)
        })
        .collect()
}

/// `x` with `decimals` decimals, or an empty cell.
pub(crate) fn fixed(x: Option<f64>, decimals: usize) -> String {
    x.map_or(String::new(), |v| format!("{v:.decimals$}"))
}

/// An empty cell as `None`, else its number.
pub(crate) fn parse_opt<T: std::str::FromStr>(cell: &str, what: &str) -> Result<Option<T>, Error> {
    if cell.is_empty() {
        return Ok(None);
    }
    cell.parse()
        .map(Some)
        .map_err(|_| Error::Table(format!("{what}: not a number: {cell:?}")))
}
