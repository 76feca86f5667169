//! Names assigned through a function's parameters: in
//! `void hypre_CSRMatrixInitialize(hypre_CSRMatrix *matrix)`, the line
//! `hypre_CSRMatrixData(matrix) = hypre_CTAlloc(...)` names the object
//! after `matrix`, which is whatever the caller passed:
//! `hypre_CSRMatrixInitialize(A_diag);` makes it
//! `hypre_CSRMatrixData(A_diag)`, and `init_grid(&g);` turns
//! `g->density` into `g.density`.

use super::text::matching_close;

/// How far back from the allocation line the function's definition is
/// searched.
const DEFINITION_WINDOW: usize = 300;

/// Identifier characters.
fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The last `::` component of a function name without its parameters.
fn bare_name(function: &str) -> &str {
    let f = function.split('(').next().unwrap_or(function).trim();
    f.rsplit("::").next().unwrap_or(f)
}

/// Byte offsets of `name(` in `text` as a whole word.
fn calls_of(text: &str, name: &str) -> Vec<usize> {
    text.match_indices(name)
        .filter(|&(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].trim_start();
            !before.is_some_and(is_ident) && after.starts_with('(')
        })
        .map(|(at, _)| at + text[at..].find('(').unwrap_or(0))
        .collect()
}

/// Splits an argument or parameter list at top-level commas (brackets
/// only; `->` and templates do not nest).
fn split_args(list: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = list[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// The text from line `from` (0-based) on, up to the `)` that closes the
/// first `(` at or after byte `open` of that line (at most 10 lines).
fn list_at(lines: &[String], from: usize, open: usize) -> Option<String> {
    let mut text = String::new();
    for l in lines.iter().skip(from).take(10) {
        text.push_str(l);
        text.push(' ');
        if let Some(close) = matching_close(&text, open) {
            return Some(text[open + 1..close].to_string());
        }
    }
    None
}

/// The parameter names of `function`, whose body holds line `line`
/// (1-based): from the nearest definition above it.
fn parameters(lines: &[String], line: usize, function: &str) -> Option<Vec<String>> {
    let bare = bare_name(function);
    if bare.is_empty() {
        return None;
    }
    let first = line.saturating_sub(DEFINITION_WINDOW);
    for i in (first..line.min(lines.len())).rev() {
        let Some(&open) = calls_of(&lines[i], bare).first() else {
            continue;
        };
        let list = list_at(lines, i, open)?;
        let names = split_args(&list)
            .into_iter()
            .filter(|p| *p != "void" && !p.is_empty())
            .map(|p| {
                let p = p.split('=').next().unwrap_or(p).trim_end();
                let p = p.trim_end_matches(|c: char| c == ']' || c == '[' || c.is_ascii_digit());
                let start = p.rfind(|c: char| !is_ident(c)).map_or(0, |s| s + 1);
                p[start..].to_string()
            })
            .collect();
        return Some(names);
    }
    None
}

/// The first identifier of `name` (as a whole word) that is one of
/// `params`: its index.
fn parameter_in(name: &str, params: &[String]) -> Option<(usize, String)> {
    let mut word = String::new();
    for c in name.chars().chain(std::iter::once(' ')) {
        if is_ident(c) {
            word.push(c);
            continue;
        }
        if let Some(k) = params.iter().position(|p| *p == word) {
            return Some((k, word));
        }
        word.clear();
    }
    None
}

/// Replaces the whole word `param` in `name` by `arg`: `&g` with `g->x`
/// gives `g.x`; any other argument must be a plain lvalue (identifiers,
/// `.`, `->`, `[...]`).
fn substitute(name: &str, param: &str, arg: &str) -> Option<String> {
    // An lvalue: identifiers, `.`, `->`, `[...]` and macro calls
    // (`hypre_ParCSRMatrixDiag(matrix)`); blanks dropped.
    let plain = |s: &str| -> Option<String> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let ok = s
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && s.chars().all(|c| is_ident(c) || ".[]>-()".contains(c))
            && s.matches('(').count() == s.matches(')').count();
        ok.then_some(s)
    };
    let (arg, deref) = match arg.strip_prefix('&') {
        Some(inner) => (plain(inner)?, true),
        None => (plain(arg)?, false),
    };
    let arg = arg.as_str();
    let mut out = String::new();
    let mut rest = name;
    while let Some(at) = rest.find(param) {
        let before = rest[..at].chars().next_back();
        let after_text = &rest[at + param.len()..];
        let whole =
            !before.is_some_and(is_ident) && !after_text.chars().next().is_some_and(is_ident);
        out.push_str(&rest[..at]);
        if whole {
            match (deref, after_text.strip_prefix("->")) {
                (true, Some(tail)) => {
                    out.push_str(arg);
                    out.push('.');
                    rest = tail;
                    continue;
                }
                (true, None) => out.push_str(&format!("(&{arg})")),
                (false, _) => out.push_str(arg),
            }
        } else {
            out.push_str(param);
        }
        rest = after_text;
    }
    out.push_str(rest);
    Some(out)
}

/// `name`, assigned at line `line` of `lines` inside `function`, with a
/// parameter replaced by the argument on the caller's line
/// (`caller_lines`, 1-based `caller_line`); `None` when `name` uses no
/// parameter or the call cannot be read.
pub fn through_caller(
    name: &str,
    lines: &[String],
    line: usize,
    function: &str,
    caller_lines: &[String],
    caller_line: usize,
) -> Option<String> {
    let params = parameters(lines, line, function)?;
    let (k, param) = parameter_in(name, &params)?;
    let idx = caller_line.checked_sub(1)?;
    let text = caller_lines.get(idx)?;
    let open = *calls_of(text, bare_name(function)).first()?;
    let args = list_at(caller_lines, idx, open)?;
    let arg = split_args(&args).get(k)?.to_string();
    substitute(name, &param, &arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn hypre_initialise() {
        let callee = lines(
            "HYPRE_Int\n\
             hypre_CSRMatrixInitialize( hypre_CSRMatrix *matrix )\n\
             {\n\
             \x20  hypre_CSRMatrixData(matrix) = hypre_CTAlloc(double, n);\n\
             }\n",
        );
        let caller = lines("  x = 1;\n  hypre_CSRMatrixInitialize(A_diag);\n");
        assert_eq!(
            through_caller(
                "hypre_CSRMatrixData(matrix)",
                &callee,
                4,
                "hypre_CSRMatrixInitialize",
                &caller,
                2
            ),
            Some("hypre_CSRMatrixData(A_diag)".to_string())
        );
    }

    #[test]
    fn pointers_to_the_callers_struct() {
        let callee = lines(
            "void init_grid(struct grid *g,\n               int n)\n{\n    g->density = my_alloc(n);\n}\n",
        );
        let caller = lines("    init_grid(&g, 4);\n    init_grid(grids[2], 4);\n");
        let through = |line| through_caller("g->density", &callee, 4, "init_grid", &caller, line);
        assert_eq!(through(1), Some("g.density".to_string()));
        assert_eq!(through(2), Some("grids[2]->density".to_string()));
        // Not a parameter, or an argument that is an expression: unchanged.
        assert_eq!(
            through_caller("local->x", &callee, 4, "init_grid", &caller, 1),
            None
        );
        let expr = lines("    init_grid(make() + 1, 4);\n");
        let deep = lines("  init_grid(hypre_Diag( m ), 4);\n");
        assert_eq!(
            through_caller("g->density", &callee, 4, "init_grid", &deep, 1),
            Some("hypre_Diag(m)->density".to_string())
        );
        assert_eq!(
            through_caller("g->density", &callee, 4, "init_grid", &expr, 1),
            None
        );
    }
}
