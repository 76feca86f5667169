//! C, C++ and Rust: what one source line says about the allocation it
//! makes: the variable or lvalue assigned (`double *A = malloc(...)`,
//! `s->grid = ...`, `let mut a: Vec<f64> = ...`), a declaration with
//! constructor arguments (`std::vector<double> v(n);`), a growing method
//! call on a container (`v.resize(n)`), a member in a constructor (`:
//! pressure(n),`, `this->data = ...`), or a `return` (an allocation
//! wrapper).

use super::text::{
    code_part, matching_close, scope_parts, split_top_level, top_level_colon, without_parens,
};

/// How many lines after an assignment are searched for `return NAME;`.
pub(super) const RETURN_WINDOW: usize = 30;

/// What one source line says about the allocation it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Named {
    /// A variable (or an lvalue such as `s->grid`); `pointer` when the line
    /// makes a pointer to the object (`new`, `make_unique`, `T *p = ...`),
    /// so that a member is reached with `->`.
    Var { name: String, pointer: bool },
    /// A member of the class whose constructor this is.
    Member(String),
}

/// The statement that line `idx` (1-based) of `lines` ends, joined from
/// the line where it starts, when that line closes more parentheses than
/// it opens: a call whose arguments span lines, for which the compiler's
/// line table gives the call's last line (`locDom = new Domain(numRanks,
/// col, ...,\n    side, opts.numReg, opts.balance, opts.cost) ;` at the
/// second line). At most [`CONTINUATION_LINES`] lines back; `None` if the
/// line is balanced or the start is not found.
fn statement_from_start(lines: &[String], idx: usize) -> Option<String> {
    let balance = |text: &str| {
        code_part(text).chars().fold(0i32, |d, c| match c {
            '(' => d + 1,
            ')' => d - 1,
            _ => d,
        })
    };
    let last = lines.get(idx.checked_sub(1)?)?;
    let mut depth = balance(last);
    if depth >= 0 {
        return None;
    }
    let mut joined = last.trim().to_string();
    for back in 2..=CONTINUATION_LINES + 1 {
        let line = lines.get(idx.checked_sub(back)?)?;
        let code = code_part(line).trim_end();
        // A previous statement or block ends there: no start found.
        if code.ends_with(';') || code.ends_with('{') || code.ends_with('}') {
            return None;
        }
        depth += balance(line);
        joined = format!("{} {joined}", line.trim());
        if depth == 0 {
            return Some(joined);
        }
    }
    None
}

/// How many lines before a call's last line [`statement_from_start`]
/// looks for the line where its statement starts.
const CONTINUATION_LINES: usize = 6;

/// What line `idx` (1-based) of `lines` names; `in_constructor` allows
/// members (initialisers, assignments without a declaration).
pub(super) fn line_name(lines: &[String], idx: usize, in_constructor: bool) -> Option<Named> {
    line_name_calling(lines, idx, in_constructor, None)
}

/// [`line_name`] for a line that calls `callee` (the next inner frame's
/// function, its last name component without template arguments: a
/// storage class's `setCapacity`): `flux.setCapacity(n);` names `flux`,
/// as a growing method's call does.
pub(super) fn line_name_calling(
    lines: &[String],
    idx: usize,
    in_constructor: bool,
    callee: Option<&str>,
) -> Option<Named> {
    let text = &lines[idx - 1];
    if in_constructor {
        if let Some(m) = member_initialiser(text) {
            return Some(Named::Member(m));
        }
    }
    if let Some(name) = out_param_target(text) {
        return Some(Named::Var {
            name,
            pointer: false,
        });
    }
    let target = assignment_target(text)
        .or_else(|| guard_assignment(text).map(|name| (name, false)))
        .or_else(|| {
            // `double *A =\n    malloc(n);`: the call is on the next line.
            let prev = lines.get(idx.wrapping_sub(2))?;
            if prev.trim_end().ends_with('=') {
                assignment_target(&format!("{} x;", prev.trim_end()))
            } else {
                None
            }
        })
        .or_else(|| assignment_target(&statement_from_start(lines, idx)?));
    if let Some((name, declared)) = target {
        if in_constructor && !declared {
            if let Some(m) = as_member(&name) {
                return Some(Named::Member(m));
            }
        }
        return Some(Named::Var {
            pointer: makes_pointer(text, &name),
            name,
        });
    }
    if let Some(name) = method_receiver_of(text, callee) {
        if in_constructor {
            if let Some(m) = as_member(&name) {
                return Some(Named::Member(m));
            }
        }
        return Some(Named::Var {
            name,
            pointer: false,
        });
    }
    declared_name(text).map(|name| Named::Var {
        pointer: makes_pointer(text, &name),
        name,
    })
}

/// A name assigned in a constructor as a member: `x`, `this->x`, `x.y`,
/// `x[i]` (not `*p`).
pub(super) fn as_member(name: &str) -> Option<String> {
    let name = name.strip_prefix("this->").unwrap_or(name);
    (!name.starts_with('*') && !name.is_empty()).then(|| name.to_string())
}

/// True when the line makes a pointer to the object it names: `new`,
/// `make_unique`/`make_shared`, a smart pointer type, or `T *name`.
pub(super) fn makes_pointer(line: &str, name: &str) -> bool {
    let code = code_part(line);
    if [
        "new ",
        "make_unique",
        "make_shared",
        "unique_ptr",
        "shared_ptr",
    ]
    .iter()
    .any(|w| code.contains(w))
    {
        return true;
    }
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].chars().next();
        !before.is_some_and(is_ident)
            && !after.is_some_and(is_ident)
            && code[..at].trim_end().ends_with('*')
    })
}

/// A statement without the condition that guards it on the same line:
/// `if (n) a = malloc(n);` -> `a = malloc(n);` (also `else`, `while`).
pub(super) fn without_guard(code: &str) -> &str {
    let mut code = code.trim_start();
    loop {
        if let Some(rest) = code.strip_prefix("else") {
            if !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                code = rest.trim_start();
                continue;
            }
        }
        let keyword = ["if", "while"].into_iter().find(|k| {
            code.strip_prefix(k)
                .is_some_and(|r| r.trim_start().starts_with('('))
        });
        let Some(k) = keyword else {
            return code;
        };
        let open = k.len() + (code.len() - k.len() - code[k.len()..].trim_start().len());
        match matching_close(code, open) {
            Some(close) => code = code[close + 1..].trim_start(),
            None => return code,
        }
    }
}

/// The class of a C++ constructor from its demangled name
/// (`ns::Grid<double>::Grid(unsigned long)` -> `ns::Grid<double>`).
pub fn constructor_class(function: &str) -> Option<String> {
    let function = function.replace("(anonymous namespace)", "{anonymous}");
    // The name without its parameter list.
    let mut depth = 0i32;
    let mut end = function.len();
    for (i, c) in function.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let parts = scope_parts(&function[..end]);
    let [.., class, last] = parts.as_slice() else {
        return None;
    };
    let base = class.split('<').next().unwrap_or(class);
    let is_ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    (is_ident(last) && *last == base).then(|| parts[..parts.len() - 1].join("::"))
}

/// The member a constructor's initialiser line initialises:
/// `: pressure(n),`, `, velocity{n}`, `density(n) {`,
/// `Grid(int n) : data(n) {}`. `None` for a line with several initialisers
/// (the line cannot tell which one allocated) or a statement (`f(n);`).
pub(super) fn member_initialiser(line: &str) -> Option<String> {
    let code = code_part(line);
    if code.ends_with(';') {
        return None;
    }
    // After the signature's ` : ` if the line has one.
    let list = match top_level_colon(code) {
        Some(i) => &code[i + 1..],
        None => code,
    };
    let list = list.trim().trim_start_matches([':', ',']).trim();
    // Drop the body's opening (and closing) brace at the end.
    let list = list
        .strip_suffix("{}")
        .or_else(|| list.strip_suffix("{ }"))
        .or_else(|| list.strip_suffix('{'))
        .unwrap_or(list)
        .trim()
        .trim_end_matches(',')
        .trim();
    let items = split_top_level(list, ',');
    let [item] = items.as_slice() else {
        return None;
    };
    let item = item.trim();
    let open = item.find(['(', '{'])?;
    let close = if item.as_bytes()[open] == b'(' {
        ')'
    } else {
        '}'
    };
    if !item.ends_with(close) {
        return None;
    }
    let name = item[..open].trim();
    if !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    valid(name.to_string())
}

/// Container methods that allocate (C++ and Rust).
pub(super) const GROWING_METHODS: &[&str] = &[
    "resize",
    "assign",
    "reserve",
    "push_back",
    "emplace_back",
    "emplace",
    "insert",
    "append",
    "push",
    "push_str",
    "extend",
    "extend_from_slice",
    "resize_with",
];

/// The container a line grows: `v.resize(n);` -> `v`,
/// `grid.density.assign(n, 0.0);` -> `grid.density`, `p->v.push_back(x);`
/// -> `p->v`.
#[cfg(test)]
pub(super) fn method_receiver(line: &str) -> Option<String> {
    method_receiver_of(line, None)
}

/// [`method_receiver`], also for a call of `callee` (a method of the
/// program's own storage class: `cells.setCapacity(n);` -> `cells`).
pub(super) fn method_receiver_of(line: &str, callee: Option<&str>) -> Option<String> {
    let code = code_part(line);
    let callee = callee.filter(|c| !c.is_empty() && !c.contains(['<', '(', ' ']));
    for method in GROWING_METHODS.iter().copied().chain(callee) {
        for (i, _) in code.match_indices(method) {
            let after = &code[i + method.len()..];
            if !after.trim_start().starts_with('(') {
                continue;
            }
            let before = &code[..i];
            let receiver_end = if let Some(b) = before.strip_suffix('.') {
                b.len()
            } else if let Some(b) = before.strip_suffix("->") {
                b.len()
            } else {
                continue;
            };
            // A chain that starts at a variable (`cells.back().faces`),
            // not at a call's result (`f(x)`).
            let receiver = lvalue_suffix(&code[..receiver_end]).filter(|r| {
                let head = r.find(['.', '-', '[']).map_or(r.as_str(), |i| &r[..i]);
                !head.contains('(')
            })?;
            // Only a statement that starts with the receiver (possibly after
            // a loop or condition header: `for (...) v.push_back(x);`).
            let rest = code[..receiver_end - receiver.len()].trim();
            let statement_start = rest.is_empty()
                || rest.ends_with([')', '{', '}', ';'])
                || rest == "else"
                || rest.ends_with(" else");
            if !statement_start {
                return None;
            }
            return valid(receiver);
        }
    }
    None
}

/// The identifier chain at the end of `text` (identifiers, `.`, `->`,
/// `::`, bracketed indices, and macro or function calls such as
/// `hypre_CSRMatrixJ(S_diag)`), or `None` if brackets do not balance.
pub(super) fn lvalue_suffix(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut start = chars.len();
    // Closing brackets seen and not yet opened, innermost last.
    let mut open: Vec<char> = Vec::new();
    while start > 0 {
        let c = chars[start - 1];
        if let Some(&want) = open.last() {
            match c {
                ']' | ')' => open.push(if c == ']' { '[' } else { '(' }),
                '[' | '(' if c == want => {
                    open.pop();
                    // A call's parentheses must follow a name.
                    if c == '('
                        && open.is_empty()
                        && !(start >= 2
                            && (chars[start - 2].is_alphanumeric() || chars[start - 2] == '_'))
                    {
                        return None;
                    }
                }
                '[' | '(' => return None,
                _ => {}
            }
            start -= 1;
            continue;
        }
        let ok = match c {
            ']' => {
                open.push('[');
                true
            }
            ')' => {
                open.push('(');
                true
            }
            '[' | '(' => return None,
            c if c.is_alphanumeric() || c == '_' || c == '.' => true,
            '>' => start >= 2 && chars[start - 2] == '-',
            '-' => chars.get(start) == Some(&'>'),
            ':' => (start >= 2 && chars[start - 2] == ':') || chars.get(start) == Some(&':'),
            _ => false,
        };
        if !ok {
            break;
        }
        start -= 1;
    }
    if !open.is_empty() {
        return None;
    }
    Some(chars[start..].iter().collect())
}

/// A C++ declaration with constructor arguments: `std::vector<double>
/// v(n);`, `Grid grid{n};`, `static Table t(4096);` -> the variable.
pub(super) fn declared_name(line: &str) -> Option<String> {
    let code = code_part(line);
    let code = code.strip_suffix(';')?.trim_end();
    let open = code.find(['(', '{'])?;
    if matching_close(code, open) != Some(code.len() - 1) {
        return None;
    }
    let head = code[..open].trim_end();
    let name_start = head
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let name = &head[name_start..];
    let ty = head[..name_start].trim();
    if ty.is_empty() || name.is_empty() {
        return None;
    }
    // The type: identifiers, `::`, template arguments, `*`, `&`.
    let first = ty.split_whitespace().next().unwrap_or("");
    if matches!(
        first,
        "return" | "else" | "delete" | "new" | "throw" | "case" | "goto" | "co_return"
    ) {
        return None;
    }
    let mut angle = 0i32;
    for c in ty.chars() {
        match c {
            '<' => angle += 1,
            '>' => angle -= 1,
            c if c.is_alphanumeric() || "_:*& ,".contains(c) => {}
            _ => return None,
        }
        if angle < 0 {
            return None;
        }
    }
    if angle != 0 || ty.ends_with("::") {
        return None;
    }
    valid(name.to_string())
}

/// True when the line returns: `return ...;`, also after other statements
/// (`{ return xmalloc(n); }`).
pub fn is_return(line: &str) -> bool {
    let code = code_part(line);
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices("return").any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + "return".len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// True when the line returns something that may be the allocation: a
/// `return` ([`is_return`]) whose value is not a constant. `if
/// (posix_memalign(&p, 64, n)) return 1;`, `if (!p) return NULL;` and
/// `return;` return no allocation: the allocation on such a line is the
/// line's own, not a wrapper's.
pub fn returns_allocation(line: &str) -> bool {
    let code = code_part(line);
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices("return").any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let rest = &code[i + "return".len()..];
        if before.is_some_and(is_ident) || rest.chars().next().is_some_and(is_ident) {
            return false;
        }
        let value = rest.split([';', '}']).next().unwrap_or("");
        !is_constant(without_parens(value))
    })
}

/// A constant a function returns on failure: empty (`return;`), a number
/// (`-1`, `0x10`), a character, `NULL`, `nullptr`, `true`, `false` or an
/// all-capitals macro (`EXIT_FAILURE`, `-ENOMEM`).
fn is_constant(value: &str) -> bool {
    let v = value.trim().trim_start_matches(['-', '+']).trim();
    if v.is_empty() || v.starts_with('\'') {
        return true;
    }
    if v.starts_with(|c: char| c.is_ascii_digit()) {
        return v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    }
    matches!(v, "nullptr" | "true" | "false")
        || (v
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && v.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// Allocation functions that return the memory through their first
/// argument (`posix_memalign(&p, align, n)`): their out-parameter names
/// the object, whatever the line assigns the status to.
const OUT_PARAM_ALLOCATORS: &[&str] = &["posix_memalign"];

/// The object an out-parameter allocator on the line fills:
/// `if (posix_memalign((void **)&pm, 64, n))` -> `pm`, `rc =
/// posix_memalign(&s->buf, 64, n);` -> `s->buf`, `posix_memalign(pp, 64,
/// n)` -> `*pp`.
pub(super) fn out_param_target(line: &str) -> Option<String> {
    let code = code_part(line);
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    for f in OUT_PARAM_ALLOCATORS {
        for (i, _) in code.match_indices(f) {
            if code[..i].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let after = &code[i + f.len()..];
            let open = i + f.len() + (after.len() - after.trim_start().len());
            if !code[open..].starts_with('(') {
                continue;
            }
            let close = matching_close(code, open)?;
            let first = *split_outside_brackets(&code[open + 1..close], ',').first()?;
            return out_param_name(first);
        }
    }
    None
}

/// Splits C expressions on `sep` outside `()`, `[]` and `{}` (not
/// [`split_top_level`], which takes the `>` of `s->buf` or the `<` of a
/// comparison for brackets).
fn split_outside_brackets(text: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// `(void **)&p` -> `p`, `&s->buf` -> `s->buf`, `pp` -> `*pp`.
fn out_param_name(arg: &str) -> Option<String> {
    let mut arg = without_parens(arg);
    // Casts: `(void **)&p`, `(void**)(&p)`.
    while arg.starts_with('(') {
        let close = matching_close(arg, 0)?;
        arg = without_parens(&arg[close + 1..]);
    }
    match arg.strip_prefix('&') {
        Some(rest) => {
            let rest = without_parens(rest);
            (lvalue_suffix(rest).as_deref() == Some(rest))
                .then(|| valid(rest.to_string()))
                .flatten()
        }
        None => (lvalue_suffix(arg).as_deref() == Some(arg))
            .then(|| valid(format!("*{arg}")))
            .flatten(),
    }
}

/// An assignment in a condition: `if ((p = malloc(n)) == NULL)`, `if
/// (!(s->buf = calloc(n, 8)))` -> `p`, `s->buf` (a call on its right).
pub(super) fn guard_assignment(line: &str) -> Option<String> {
    let code = code_part(line);
    let guard = &code[..code.len() - without_guard(code).len()];
    for (open, _) in guard.match_indices('(') {
        let Some(close) = matching_close(guard, open) else {
            continue;
        };
        let inner = &guard[open + 1..close];
        let Some(eq) = assignment_index(inner) else {
            continue;
        };
        if inner[eq + 1..].contains('(') {
            if let Some((name, _)) = assignment_target(&format!("{inner};")) {
                return Some(name);
            }
        }
    }
    None
}

/// The objects a line with several allocations names, in source order:
/// `double *cold = malloc(a), *hot = malloc(b);` -> `cold`, `hot`;
/// `a = malloc(n); b = malloc(m);` -> `a`, `b`. Only the parts of the
/// statement that call something (or `new`) count: `int n = 4, *p =
/// malloc(n);` has one. Empty when the line has fewer than two.
pub(super) fn line_targets(line: &str) -> Vec<String> {
    let code = code_part(line);
    let mut names = Vec::new();
    for statement in split_outside_brackets(code, ';') {
        let whole = statement.trim();
        let statement = without_guard(whole);
        let guard = &whole[..whole.len() - statement.len()];
        if let Some(name) = out_param_target(guard).or_else(|| guard_assignment(guard)) {
            names.push(name);
        }
        // The declarators after the first share its type.
        let mut declares = false;
        for (k, part) in split_outside_brackets(statement, ',')
            .into_iter()
            .enumerate()
        {
            let part = part.trim();
            let rhs = assignment_index(part).map(|i| &part[i + 1..]);
            let calls = |t: &str| t.contains('(') || t.split_whitespace().any(|w| w == "new");
            if let Some(name) = out_param_target(part) {
                names.push(name);
                continue;
            }
            let Some(rhs) = rhs else { continue };
            let target = if k > 0 && declares {
                // `*hot = ...` after `double *cold = ...`: a declarator.
                let lhs = part[..part.len() - rhs.len() - 1].trim();
                valid(lhs.trim_start_matches(['*', '&', ' ']).to_string())
                    .filter(|n| lvalue_suffix(n).as_deref() == Some(n.as_str()))
                    .map(|n| (n, true))
            } else {
                assignment_target(&format!("{part};"))
            };
            let Some((name, declared)) = target else {
                continue;
            };
            if k == 0 {
                declares = declared;
            }
            if calls(rhs) {
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        for statement in split_outside_brackets(code, ';') {
            names.extend(constructed_declarators(statement.trim()));
        }
    }
    if names.len() < 2 {
        names.clear();
    }
    names
}

/// The variables of a declaration with constructor arguments:
/// `std::vector<double> b(n, 1.0), x(n), r(b);` -> `b`, `x`, `r`. Empty
/// for anything else.
fn constructed_declarators(statement: &str) -> Vec<String> {
    // Split at the commas outside brackets (template arguments only count
    // outside parentheses: `a < b` may be an argument).
    let mut parts = Vec::new();
    let (mut depth, mut angle, mut start) = (0i32, 0i32, 0usize);
    for (i, c) in statement.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '<' if depth == 0 => angle += 1,
            '>' if depth == 0 => angle -= 1,
            ',' if depth == 0 && angle == 0 => {
                parts.push(&statement[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&statement[start..]);
    let Some((first, rest)) = parts.split_first() else {
        return Vec::new();
    };
    let Some(name) = declared_name(&format!("{};", first.trim())) else {
        return Vec::new();
    };
    let mut names = vec![name];
    for part in rest {
        let part = part.trim();
        let Some(open) = part.find(['(', '{']) else {
            return Vec::new();
        };
        let ident = part[..open].trim();
        let ok = matching_close(part, open) == Some(part.len() - 1)
            && !ident.is_empty()
            && ident.chars().all(|c| c.is_alphanumeric() || c == '_');
        match ok.then(|| valid(ident.to_string())).flatten() {
            Some(n) => names.push(n),
            None => return Vec::new(),
        }
    }
    names
}

/// True when one of the next lines (up to the end of the function, as far as
/// a closing brace in column 0 tells) is `return NAME;`.
pub(super) fn returned_later(after: &[String], name: &str) -> bool {
    if !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return false;
    }
    for line in after.iter().take(RETURN_WINDOW) {
        if line.starts_with('}') {
            return false;
        }
        let code = code_part(line);
        if let Some(rest) = code.strip_prefix("return") {
            let rest = rest.trim().trim_end_matches(';').trim();
            let rest = without_parens(rest);
            // A cast: `return (char*)ptr;`, `return (void *) (ptr);`.
            let uncast = match rest.strip_prefix('(') {
                Some(_) => matching_close(rest, 0).map_or(rest, |c| without_parens(&rest[c + 1..])),
                None => rest,
            };
            if rest == name || uncast == name {
                return true;
            }
        }
    }
    false
}

/// Byte index of the first plain `=` (not `==`, `!=`, `<=`, `>=`, `=>` nor a
/// compound assignment), outside parentheses.
pub(super) fn assignment_index(code: &str) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut depth = 0i32;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b'=' if depth == 0 => {
                let prev = if i > 0 { bytes[i - 1] } else { b' ' };
                let next = bytes.get(i + 1).copied().unwrap_or(b' ');
                if next == b'=' || next == b'>' {
                    return None;
                }
                if b"=!<>+-*/%&|^".contains(&prev) {
                    return None;
                }
                return Some(i);
            }
            _ => {}
        }
    }
    None
}

/// The variable a line assigns to: `double *A = ...` -> `A`,
/// `s->grid = ...` -> `s->grid`, `let mut a: Vec<f64> = ...` -> `a`.
pub fn assigned_name(line: &str) -> Option<String> {
    assignment_target(line).map(|(name, _)| name)
}

/// [`assigned_name`], and whether the line declares it (a type or `let`
/// before the name).
pub(super) fn assignment_target(line: &str) -> Option<(String, bool)> {
    let code = without_guard(code_part(line));
    if is_return(code) {
        return None;
    }
    let lhs = code[..assignment_index(code)?].trim_end();
    // Rust: `let [mut] name[: Type]`.
    if let Some(rest) = lhs.strip_prefix("let ") {
        let rest = rest.trim_start();
        let rest = rest.strip_prefix("mut ").unwrap_or(rest).trim_start();
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        return valid(name).map(|n| (n, true));
    }
    // Scan the last expression of the left-hand side backwards: identifier
    // characters, `.`, `->`, `::` and bracketed indices.
    let name = lvalue_suffix(lhs)?;
    let before = lhs[..lhs.len() - name.len()].trim_end();
    // A lone `*p = ...` assigns through a pointer: keep the `*`.
    if before == "*" {
        return valid(format!("*{name}")).map(|n| (n, false));
    }
    // Anything else before the name must look like a declaration's type
    // (`double *`, `struct grid *`, `std::vector<int>`, `auto`), not an
    // expression or a statement (`if (x) a`, `f(x).a`).
    if before.contains(['(', ')', ';', '{', '}', '=', ',', '"']) {
        return None;
    }
    valid(name).map(|n| (n, !before.is_empty()))
}

pub(super) fn valid(name: String) -> Option<String> {
    let first = name.chars().next()?;
    let first_ok = first.is_alphabetic() || first == '_' || first == '*';
    let keyword = matches!(
        name.as_str(),
        "if" | "else"
            | "for"
            | "while"
            | "switch"
            | "return"
            | "const"
            | "static"
            | "auto"
            | "sizeof"
    );
    (first_ok && !keyword).then_some(name)
}
