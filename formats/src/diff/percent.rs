//! Percent changes, the bottom of the diff's steps: a change of a count
//! in percent ([`change_pct`]) and as text ([`pct_text`]).

pub(super) fn change_pct(before: u64, after: u64) -> Option<f64> {
    (before > 0).then(|| 100.0 * (after as f64 - before as f64) / before as f64)
}

/// A change in percent as the reports show it (`+12.5%`; `new` without a
/// count before).
pub(super) fn pct_text(p: Option<f64>) -> String {
    match p {
        Some(p) => format!("{p:+.1}%"),
        None => "new".into(),
    }
}
