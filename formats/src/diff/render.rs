//! Rendering a [`Diff`]: the text report of `hpcprof-rs diff` (name and
//! site columns as wide as their values within limits, long values cut in
//! the middle, rows within noise after the others or hidden), JSON
//! (the [`Diff`] document as it is) and CSV (one line per row).

use super::noise::beyond_noise_at;
use super::percent::{change_pct, pct_text};
use super::{Diff, Row, Side, Status};

pub(super) fn side_text(s: Option<Side>) -> String {
    match s {
        Some(s) => format!("{:>9} {:>6.1}%", s.samples, 100.0 * s.share),
        None => format!("{:>9} {:>7}", "-", ""),
    }
}

/// The text tables' name and site columns are as wide as their longest
/// shown value, at least these widths (characters) ...
pub(super) const NAME_MIN: usize = 24;
pub(super) const SITE_MIN: usize = 20;
/// ... and at most these: a longer value is cut in the middle with `…`
/// (both ends stay: a C++ name's class and method, a clone mark, a site's
/// file and line), so the numbers stay in their columns.
pub(super) const NAME_MAX: usize = 48;
pub(super) const SITE_MAX: usize = 32;

/// `s` in at most `max` characters, cut in the middle with `…`.
pub(super) fn elide_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let tail = (max - 1) / 2;
    let mut t: String = s.chars().take(max - 1 - tail).collect();
    t.push('…');
    t.extend(s.chars().skip(n - tail));
    t
}

/// Width of a column of `values`: the longest, within `min..=max`.
pub(super) fn column_width<'a>(
    values: impl Iterator<Item = &'a str>,
    min: usize,
    max: usize,
) -> usize {
    values
        .map(|v| v.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(min, max)
}

/// The diff as a text report, at most `top` rows per table, the rows
/// within noise included (after the others).
pub fn to_text(d: &Diff, top: usize) -> String {
    to_text_with(d, top, false)
}

/// How a row's change reads in the text report's last column.
pub(super) fn verdict_text(r: &Row) -> &'static str {
    if r.beyond_noise {
        "changed"
    } else {
        "within noise"
    }
}

/// The diff as a text report, at most `top` rows per table; with
/// `hide_noise`, only the rows that changed beyond sampling noise.
pub fn to_text_with(d: &Diff, top: usize, hide_noise: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!("measure: {}: {}\n", d.metric, d.measure));
    out.push_str(&format!(
        "total memory time: {} -> {} samples ({}{})",
        d.total.before,
        d.total.after,
        pct_text(d.total.change_pct),
        if beyond_noise_at(d.total.before, d.total.after, d.noise_sigmas) {
            ""
        } else {
            ", within noise"
        }
    ));
    if let (Some(b), Some(a)) = (d.total.cpu_before, d.total.cpu_after) {
        out.push_str(&format!(
            "; all samples: {b} -> {a} ({})",
            pct_text(change_pct(b, a))
        ));
    }
    out.push('\n');
    for w in &d.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    for (title, rows) in [
        ("data objects", &d.objects),
        ("functions", &d.functions),
        ("lines", &d.lines),
    ] {
        let changed = rows.iter().filter(|r| r.beyond_noise).count();
        let listed: Vec<&Row> = rows
            .iter()
            .filter(|r| r.beyond_noise || !hide_noise)
            .collect();
        let shown = &listed[..top.min(listed.len())];
        let name_w = column_width(shown.iter().map(|r| r.name.as_str()), NAME_MIN, NAME_MAX);
        let site_w = column_width(shown.iter().map(|r| r.site.as_str()), SITE_MIN, SITE_MAX);
        out.push_str(&format!(
            "\n{title}: {changed} of {} changed beyond sampling noise\n\
             {:<9} {:<name_w$} {:<site_w$} {:>17} {:>17} {:>9} {:>8} {:>7} {:<12}\n",
            rows.len(),
            "status",
            "name",
            "site",
            "before",
            "after",
            "d.share",
            "change",
            "z",
            "verdict"
        ));
        for r in shown {
            out.push_str(&format!(
                "{:<9} {:<name_w$} {:<site_w$} {} {} {:>+8.1}% {:>8} {:>+7.1} {:<12}\n",
                r.status.as_str(),
                elide_middle(&r.name, name_w),
                elide_middle(&r.site, site_w),
                side_text(r.before),
                side_text(r.after),
                100.0 * r.delta_share,
                match (r.status, r.change_pct) {
                    (Status::Matched, None) => "from 0".to_string(),
                    (Status::Vanished, None) => "-".to_string(),
                    (_, p) => pct_text(p),
                },
                r.z,
                verdict_text(r)
            ));
        }
        if listed.len() > top {
            out.push_str(&format!("({} more)\n", listed.len() - top));
        }
        if hide_noise && changed < rows.len() {
            out.push_str(&format!(
                "({} within noise not shown)\n",
                rows.len() - changed
            ));
        }
    }
    out
}

/// The diff as pretty JSON.
pub fn to_json(d: &Diff) -> String {
    let mut s = serde_json::to_string_pretty(d).unwrap_or_default();
    s.push('\n');
    s
}

pub(super) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Every row (objects, functions, lines) as CSV with a header.
pub fn to_csv(d: &Diff) -> String {
    let mut out = String::from(
        "table,status,kind,name,site,bytes,before_samples,before_share,after_samples,after_share,delta_share,delta_samples,change_pct,z,beyond_noise\n",
    );
    let opt = |s: Option<Side>| match s {
        Some(s) => (s.samples.to_string(), format!("{:.6}", s.share)),
        None => (String::new(), String::new()),
    };
    for (table, rows) in [
        ("object", &d.objects),
        ("function", &d.functions),
        ("line", &d.lines),
    ] {
        for r in rows {
            let (bs, bsh) = opt(r.before);
            let (as_, ash) = opt(r.after);
            out.push_str(&format!(
                "{table},{},{},{},{},{},{bs},{bsh},{as_},{ash},{:.6},{},{},{:.3},{}\n",
                r.status.as_str(),
                csv_field(&r.kind),
                csv_field(&r.name),
                csv_field(&r.site),
                r.bytes.map(|b| b.to_string()).unwrap_or_default(),
                r.delta_share,
                r.delta_samples,
                r.change_pct.map(|p| format!("{p:.3}")).unwrap_or_default(),
                r.z,
                r.beyond_noise
            ));
        }
    }
    out
}
