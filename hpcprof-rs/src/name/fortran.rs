//! Fortran: the arrays an `ALLOCATE` statement names.

use super::text::{matching_close, split_top_level};

/// The arrays a Fortran `ALLOCATE` statement allocates, in order:
/// `allocate(a(n), grid%u(n,m), stat=ierr)` -> `a`, `grid%u`.
pub fn fortran_allocated(line: &str) -> Option<Vec<String>> {
    let code = match line.find('!') {
        Some(i) => &line[..i],
        None => line,
    }
    .trim();
    // An optional statement label, then `allocate`.
    let code = code
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start();
    if code.len() < 8 || !code[..8].eq_ignore_ascii_case("allocate") {
        return None;
    }
    let rest = code[8..].trim_start();
    if !rest.starts_with('(') {
        return None;
    }
    let close = matching_close(rest, 0)?;
    let names: Vec<String> = split_top_level(&rest[1..close], ',')
        .into_iter()
        .filter_map(|item| {
            let item = item.trim();
            let name = item[..item.find('(').unwrap_or(item.len())].trim();
            let is_keyword = item.contains('=') && !item.contains('(');
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '%');
            (ok && !is_keyword).then(|| name.to_string())
        })
        .collect();
    (!names.is_empty()).then_some(names)
}
