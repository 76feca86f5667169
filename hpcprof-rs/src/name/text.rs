//! Text of source code, language-neutral: brackets, top-level separators,
//! `::`-scoped names, code without comments.

/// `(x)` -> `x` (repeatedly, trimmed); other text as it is.
pub(super) fn without_parens(text: &str) -> &str {
    let mut t = text.trim();
    while t.starts_with('(') && matching_close(t, 0) == Some(t.len() - 1) {
        t = t[1..t.len() - 1].trim();
    }
    t
}

/// Byte index of the bracket that closes the one at `open`.
pub(super) fn matching_close(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in code[open..].char_indices() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Byte index of a `:` that is not part of `::`, outside brackets.
pub(super) fn top_level_colon(code: &str) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut depth = 0i32;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'{' | b'[' | b'<' => depth += 1,
            b')' | b'}' | b']' | b'>' => depth -= 1,
            b':' if depth == 0 => {
                let prev = if i > 0 { bytes[i - 1] } else { b' ' };
                let next = bytes.get(i + 1).copied().unwrap_or(b' ');
                if prev != b':' && next != b':' {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits on `sep` outside brackets.
pub(super) fn split_top_level(text: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '{' | '[' | '<' => depth += 1,
            ')' | '}' | ']' | '>' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if !text[start..].trim().is_empty() || !out.is_empty() {
        out.push(&text[start..]);
    }
    out
}

/// The `::`-separated parts of a name, split outside template arguments
/// and parentheses: `ns::Grid<a::b>::Grid` -> `ns`, `Grid<a::b>`, `Grid`.
pub fn scope_parts(name: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                parts.push(&name[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&name[start..]);
    parts
}

/// Strips a trailing `//` comment and surrounding blanks.
pub(super) fn code_part(line: &str) -> &str {
    match line.find("//") {
        Some(i) => line[..i].trim(),
        None => line.trim(),
    }
}
