//! Names heap objects after the variable their allocation is assigned to.
//!
//! Starting at the allocation site (the innermost frame of the allocation
//! path whose source file is the program's own and can be read), the
//! source line is parsed:
//!
//! * frames in library sources (C++ standard library headers under
//!   `/usr/include` or `.../include/c++/`, the Rust standard library under
//!   `/rustc/<hash>/library/` or `rustlib/src`, Cargo's registry) are
//!   skipped: `std::vector`'s or `alloc::raw_vec`'s inlined frames lead to
//!   the user's line that made the vector;
//! * `double *A = malloc(...)` names the object `A` (also `s->grid = ...`,
//!   `SD.nuclide_grid = ...`, `grid_w[i] = ...`, `let mut a: Vec<f64> = ...`),
//!   and so do a declaration with constructor arguments
//!   (`std::vector<double> v(n);`) and a growing method call on a
//!   container (`v.resize(n)`, `.assign`, `.reserve`, `.push_back`,
//!   `.push`, `.extend`, ...);
//! * in a C++ constructor (`Grid::Grid(...)`), a member initialiser
//!   (`: pressure(n),`), a member assignment (`data = new double[n];`,
//!   `this->data = ...`) or a member's method call (`density.resize(n);`)
//!   names a member; the caller's line then names the object that holds
//!   it: `Grid grid(n);` gives `grid.pressure`, `auto g =
//!   std::make_unique<Grid>(n);` gives `g->pressure`, and without one the
//!   class qualifies it (`Grid::pressure`);
//! * `return ...;`, or an assignment to a local that the function returns a
//!   few lines later (`p = malloc(n); ... return p;`), means the function is
//!   an allocation wrapper: the next outer frame's line is parsed instead;
//! * otherwise the object is called `heap@function:line` (the last frame
//!   of the program's own sources examined).

use std::collections::HashMap;

use formats::database::Frame;

mod through_params;

/// How many lines after an assignment are searched for `return NAME;`.
const RETURN_WINDOW: usize = 30;

/// Source files read so far (`None`: unreadable).
#[derive(Debug, Default)]
pub struct SourceCache {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceCache {
    /// Lines of `path`, read once.
    pub fn lines(&mut self, path: &str) -> Option<&[String]> {
        self.files
            .entry(path.to_string())
            .or_insert_with(|| {
                let bytes = std::fs::read(path).ok()?;
                Some(
                    String::from_utf8_lossy(&bytes)
                        .lines()
                        .map(str::to_string)
                        .collect(),
                )
            })
            .as_deref()
    }
}

/// The name of a heap object from its allocation path (root first) and its
/// allocation site (index into `path`, chosen by `crate::site`); `ordinal`
/// is (this object's rank, how many objects) among the objects allocated
/// at the same source line by different call instructions (a Fortran
/// `ALLOCATE(a(n), b(m))` makes one `malloc` call per array).
pub fn heap_name(
    path: &[&Frame],
    site: usize,
    ordinal: Option<(usize, usize)>,
    sources: &mut SourceCache,
) -> String {
    heap_name_with(path, site, ordinal, |file| {
        sources.lines(file).map(<[String]>::to_vec)
    })
}

/// What line `line` (1-based) of `lines` says of an allocation made there:
/// `None` if there is no such line, `Some(None)` if it returns the
/// allocation (a wrapper: `return malloc(n);`, or `p = malloc(n);` with
/// `return p;` a few lines later), `Some(Some(true))` if it names what it
/// allocates, `Some(Some(false))` otherwise. `function` is the frame's
/// function (a constructor's lines may name members).
pub fn names_at(lines: &[String], line: usize, function: &str) -> Option<Option<bool>> {
    if line == 0 || line > lines.len() {
        return None;
    }
    if is_return(&lines[line - 1]) {
        return Some(None);
    }
    if fortran_allocated(&lines[line - 1]).is_some() {
        return Some(Some(true));
    }
    Some(
        match line_name(lines, line, constructor_class(function).is_some()) {
            Some(Named::Var { name, .. }) if returned_later(&lines[line..], &name) => None,
            Some(_) => Some(true),
            None => Some(false),
        },
    )
}

/// True for source files of language and third-party libraries rather than
/// the program's own: the C++ standard library and other system headers,
/// gcc's own headers, the Rust standard library (as its debug info names
/// it, `/rustc/<commit>/library/...`, or installed with rust-src) and
/// crates from Cargo's registry or git checkouts.
pub fn is_library_source(file: &str) -> bool {
    const PREFIXES: &[&str] = &["/usr/include/", "/usr/lib/gcc/", "/rustc/"];
    const PARTS: &[&str] = &[
        "/include/c++/",
        "/lib/rustlib/src/rust/",
        "/.cargo/registry/src/",
        "/.cargo/git/checkouts/",
        "/.rustup/toolchains/",
    ];
    PREFIXES.iter().any(|p| file.starts_with(p)) || PARTS.iter().any(|p| file.contains(p))
}

/// What one source line says about the allocation it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    /// A variable (or an lvalue such as `s->grid`); `pointer` when the line
    /// makes a pointer to the object (`new`, `make_unique`, `T *p = ...`),
    /// so that a member is reached with `->`.
    Var { name: String, pointer: bool },
    /// A member of the class whose constructor this is.
    Member(String),
}

/// [`heap_name`] with a custom source reader (for tests).
pub fn heap_name_with(
    path: &[&Frame],
    site: usize,
    ordinal: Option<(usize, usize)>,
    mut read: impl FnMut(&str) -> Option<Vec<String>>,
) -> String {
    let Some(site_frame) = path.get(site) else {
        return "heap@[unknown]".to_string();
    };
    // A member found in a constructor, waiting for the object that holds
    // it: (`pressure` or `grid.pressure`, the class).
    let mut member: Option<(String, String)> = None;
    for (i, frame) in path[..=site].iter().enumerate().rev() {
        let (Some(file), Some(line)) = (frame.file.as_deref(), frame.line) else {
            if i == site {
                break;
            }
            continue;
        };
        if is_library_source(file) {
            continue;
        }
        let Some(lines) = read(file) else {
            if i == site {
                break;
            }
            continue;
        };
        let idx = line as usize;
        if idx == 0 || idx > lines.len() {
            continue;
        }
        let text = &lines[idx - 1];
        if i == site {
            if let Some(names) = fortran_allocated(text) {
                match ordinal {
                    Some((k, n)) if n == names.len() => return names[k].clone(),
                    _ if names.len() == 1 => return names[0].clone(),
                    _ => return names.join("|"),
                }
            }
        }
        if is_return(text) {
            continue;
        }
        let class = constructor_class(&frame.function);
        let named = line_name(&lines, idx, class.is_some());
        match (named, &mut member) {
            (Some(Named::Member(m)), chain) => {
                let class = class.unwrap_or_default();
                *chain = Some(match chain.take() {
                    Some((inner, _)) => (format!("{m}.{inner}"), class),
                    None => (m, class),
                });
            }
            (Some(Named::Var { name, .. }), _) if returned_later(&lines[idx..], &name) => continue,
            (Some(Named::Var { name, pointer }), Some((chain, _))) => {
                let sep = if pointer { "->" } else { "." };
                return format!("{name}{sep}{chain}");
            }
            (Some(Named::Var { name, .. }), None) => {
                return through_callers(path, i, name, &lines, &mut read);
            }
            (None, _) => break,
        }
    }
    if let Some((chain, class)) = member {
        return if class.is_empty() {
            chain
        } else {
            format!("{class}::{chain}")
        };
    }
    let function = crate::site::short_function(&site_frame.function);
    match (site_frame.line, site_frame.offset) {
        (Some(line), _) => format!("heap@{function}:{line}"),
        (None, Some(off)) => format!("heap@{function}+0x{off:x}"),
        (None, None) => format!("heap@{function}"),
    }
}

/// `name`, assigned in `path[i]` (whose source is `lines`), rewritten
/// through the parameters it uses, one caller at a time (at most 4):
/// `hypre_CSRMatrixData(matrix)` -> `hypre_CSRMatrixData(A_diag)`.
fn through_callers(
    path: &[&Frame],
    mut i: usize,
    mut name: String,
    lines: &[String],
    read: &mut impl FnMut(&str) -> Option<Vec<String>>,
) -> String {
    let mut lines = lines.to_vec();
    for _ in 0..4 {
        let (Some(callee_line), Some(caller)) = (path[i].line, i.checked_sub(1).map(|c| path[c]))
        else {
            break;
        };
        let (Some(file), Some(line)) = (caller.file.as_deref(), caller.line) else {
            break;
        };
        let Some(caller_lines) = read(file) else {
            break;
        };
        match through_params::through_caller(
            &name,
            &lines,
            callee_line as usize,
            &path[i].function,
            &caller_lines,
            line as usize,
        ) {
            Some(n) => name = n,
            None => break,
        }
        lines = caller_lines;
        i -= 1;
    }
    name
}

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

/// What line `idx` (1-based) of `lines` names; `in_constructor` allows
/// members (initialisers, assignments without a declaration).
fn line_name(lines: &[String], idx: usize, in_constructor: bool) -> Option<Named> {
    let text = &lines[idx - 1];
    if in_constructor {
        if let Some(m) = member_initialiser(text) {
            return Some(Named::Member(m));
        }
    }
    let target = assignment_target(text).or_else(|| {
        // `double *A =\n    malloc(n);`: the call is on the next line.
        let prev = lines.get(idx.wrapping_sub(2))?;
        if prev.trim_end().ends_with('=') {
            assignment_target(&format!("{} x;", prev.trim_end()))
        } else {
            None
        }
    });
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
    if let Some(name) = method_receiver(text) {
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
fn as_member(name: &str) -> Option<String> {
    let name = name.strip_prefix("this->").unwrap_or(name);
    (!name.starts_with('*') && !name.is_empty()).then(|| name.to_string())
}

/// True when the line makes a pointer to the object it names: `new`,
/// `make_unique`/`make_shared`, a smart pointer type, or `T *name`.
fn makes_pointer(line: &str, name: &str) -> bool {
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
fn without_guard(code: &str) -> &str {
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

/// `(x)` -> `x` (repeatedly, trimmed); other text as it is.
fn without_parens(text: &str) -> &str {
    let mut t = text.trim();
    while t.starts_with('(') && matching_close(t, 0) == Some(t.len() - 1) {
        t = t[1..t.len() - 1].trim();
    }
    t
}

/// Byte index of the bracket that closes the one at `open`.
fn matching_close(code: &str, open: usize) -> Option<usize> {
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

/// The member a constructor's initialiser line initialises:
/// `: pressure(n),`, `, velocity{n}`, `density(n) {`,
/// `Grid(int n) : data(n) {}`. `None` for a line with several initialisers
/// (the line cannot tell which one allocated) or a statement (`f(n);`).
fn member_initialiser(line: &str) -> Option<String> {
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

/// Byte index of a `:` that is not part of `::`, outside brackets.
fn top_level_colon(code: &str) -> Option<usize> {
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
fn split_top_level(text: &str, sep: char) -> Vec<&str> {
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

/// Container methods that allocate (C++ and Rust).
const GROWING_METHODS: &[&str] = &[
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
fn method_receiver(line: &str) -> Option<String> {
    let code = code_part(line);
    for method in GROWING_METHODS {
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
            let receiver = lvalue_suffix(&code[..receiver_end]).filter(|r| !r.contains('('))?;
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
fn lvalue_suffix(text: &str) -> Option<String> {
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
fn declared_name(line: &str) -> Option<String> {
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

/// Strips a trailing `//` comment and surrounding blanks.
fn code_part(line: &str) -> &str {
    match line.find("//") {
        Some(i) => line[..i].trim(),
        None => line.trim(),
    }
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

/// True when one of the next lines (up to the end of the function, as far as
/// a closing brace in column 0 tells) is `return NAME;`.
fn returned_later(after: &[String], name: &str) -> bool {
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
fn assignment_index(code: &str) -> Option<usize> {
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
fn assignment_target(line: &str) -> Option<(String, bool)> {
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

fn valid(name: String) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Names one object as the merge does: the site is the innermost frame
    /// that rules 1 and 3 of `crate::site` do not skip.
    fn named(path: &[&Frame], mut read: impl FnMut(&str) -> Option<Vec<String>>) -> String {
        let site = (0..path.len())
            .rev()
            .find(|&i| {
                let f = path[i];
                if crate::site::is_runtime(f) {
                    return false;
                }
                match (f.file.as_deref(), f.line) {
                    (Some(file), Some(line)) => match read(file) {
                        Some(lines) => names_at(&lines, line as usize, &f.function) != Some(None),
                        None => true,
                    },
                    _ => true,
                }
            })
            .unwrap_or(path.len().saturating_sub(1));
        heap_name_with(path, site, None, read)
    }

    #[test]
    fn assignments() {
        assert_eq!(
            assigned_name("  double *A = (double *) malloc(n * sizeof(double));"),
            Some("A".into())
        );
        assert_eq!(assigned_name("A = malloc(n);"), Some("A".into()));
        assert_eq!(
            assigned_name("\ts->grid = calloc(n, sizeof *s->grid); // grid"),
            Some("s->grid".into())
        );
        assert_eq!(
            assigned_name("SD.nuclide_grid = (NuclideGridPoint *) malloc(sz);"),
            Some("SD.nuclide_grid".into())
        );
        assert_eq!(
            assigned_name("    grid_w[i] = malloc(sizeof(double) * n);"),
            Some("grid_w[i]".into())
        );
        assert_eq!(
            assigned_name("grid_w[i + 1] = malloc(8);"),
            Some("grid_w[i + 1]".into())
        );
        assert_eq!(
            assigned_name("struct grid *g = xmalloc(sizeof *g);"),
            Some("g".into())
        );
        assert_eq!(
            assigned_name("double* restrict B = aligned_alloc(64, n);"),
            Some("B".into())
        );
        assert_eq!(
            assigned_name("std::vector<double> v = std::vector<double>(n);"),
            Some("v".into())
        );
        assert_eq!(
            assigned_name("this->data = new double[n];"),
            Some("this->data".into())
        );
        assert_eq!(
            assigned_name("    let mut a: Vec<f64> = vec![0.0; n];"),
            Some("a".into())
        );
        assert_eq!(
            assigned_name("let b = Vec::with_capacity(n);"),
            Some("b".into())
        );
        assert_eq!(assigned_name("*p = malloc(8);"), Some("*p".into()));
    }

    #[test]
    fn not_assignments() {
        assert_eq!(assigned_name("if (a == malloc(3)) {"), None);
        assert_eq!(assigned_name("foo(malloc(n));"), None);
        assert_eq!(assigned_name("x += malloc(3);"), None);
        assert_eq!(assigned_name("return p = malloc(3);"), None);
        // A guard on the same line is not part of the name (hypre's `if
        // (n_fine) assigned = hypre_CTAlloc(...)`).
        assert_eq!(assigned_name("if (x) a = malloc(3);"), Some("a".into()));
        assert_eq!(assigned_name("a[i].b(c = 3);"), None);
        assert_eq!(assigned_name("   "), None);
        assert_eq!(assigned_name("= malloc(3);"), None);
        assert_eq!(
            assigned_name("for (i = 0; i < n; i++) x[i] = malloc(3);"),
            None
        );
    }

    #[test]
    fn returns() {
        assert!(is_return("  return malloc(n);"));
        assert!(is_return("return(p);"));
        assert!(!is_return("returned = 1;"));
        assert!(!is_return("noreturn_f();"));
        assert!(is_return(
            "static double *make(size_t n) { return xmalloc(n); }"
        ));
        let after: Vec<String> = ["  if (!p) abort();", "  return p;", "}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(returned_later(&after, "p"));
        assert!(!returned_later(&after, "q"));
        let ended: Vec<String> = ["}", "int f() {", "  return p;"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(!returned_later(&ended, "p"));
    }

    fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(str::to_string),
            line,
            module: "/bin/app".into(),
            inlined: false,
            offset: None,
        }
    }

    fn source() -> impl FnMut(&str) -> Option<Vec<String>> {
        |file| {
            let text = match file {
                "/src/app.c" => {
                    "#include <stdlib.h>\n\
                     static void *xmalloc(size_t n) {\n\
                     \x20 void *p = malloc(n);\n\
                     \x20 if (!p) abort();\n\
                     \x20 return p;\n\
                     }\n\
                     static double *make(size_t n) { return xmalloc(n * 8); }\n\
                     int main(void) {\n\
                     \x20 double *C = make(100);\n\
                     \x20 foo(make(3));\n\
                     \x20 double *D =\n\
                     \x20     malloc(8);\n\
                     }\n"
                }
                _ => return None,
            };
            Some(text.lines().map(str::to_string).collect())
        }
    }

    #[test]
    fn steps_out_of_wrappers() {
        let main = frame("main", Some("/src/app.c"), Some(9));
        let make = frame("make", Some("/src/app.c"), Some(7));
        let xmalloc = frame("xmalloc", Some("/src/app.c"), Some(3));
        let libc = Frame {
            module: "/lib/x86_64-linux-gnu/libc.so.6".into(),
            ..frame("helper", Some("/usr/src/missing.c"), Some(3))
        };
        assert_eq!(named(&[&main, &make, &xmalloc, &libc], source()), "C");
        let call = frame("main", Some("/src/app.c"), Some(10));
        assert_eq!(named(&[&call, &make, &xmalloc], source()), "heap@main:10");
        let split = frame("main", Some("/src/app.c"), Some(12));
        assert_eq!(named(&[&split], source()), "D");
    }

    #[test]
    fn returned_through_a_cast() {
        let after: Vec<String> = ["   if (!ptr) oom();", "   return (char*)ptr;", "}"]
            .map(String::from)
            .to_vec();
        assert!(returned_later(&after, "ptr"));
        let after: Vec<String> = ["   return (void *) (p);"].map(String::from).to_vec();
        assert!(returned_later(&after, "p"));
        let after: Vec<String> = ["   return (double)n;"].map(String::from).to_vec();
        assert!(!returned_later(&after, "p"));
    }

    #[test]
    fn macro_call_left_hand_sides() {
        assert_eq!(
            assigned_name("   hypre_CSRMatrixJ(S_diag) = hypre_CTAlloc(int, num_nonzeros_diag);"),
            Some("hypre_CSRMatrixJ(S_diag)".into())
        );
        assert_eq!(
            assigned_name("  hypre_ParCSRMatrixDiag(A)->data = hypre_CTAlloc(double, n);"),
            Some("hypre_ParCSRMatrixDiag(A)->data".into())
        );
        assert_eq!(
            assigned_name("  if (n_fine) assigned = hypre_CTAlloc(HYPRE_Int, n_fine);"),
            Some("assigned".into())
        );
        assert_eq!(assigned_name("  else if (x) { p = malloc(n); }"), None);
        assert_eq!(assigned_name("  if (x == y) a = 1;"), Some("a".into()));
        assert_eq!(assigned_name("  (p) = malloc(n);"), None);
    }

    #[test]
    fn fortran_allocate_statements() {
        assert_eq!(
            fortran_allocated("  allocate(a(n), b(2*n))"),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(
            fortran_allocated("10 ALLOCATE (grid%u(n, m), stat=ierr) ! the grid"),
            Some(vec!["grid%u".to_string()])
        );
        assert_eq!(fortran_allocated("  deallocate(a)"), None);
        assert_eq!(fortran_allocated("  call allocate_all(a)"), None);
        let lines: Vec<String> = ["  allocate(a(n), b(m))".to_string()].to_vec();
        let site = Frame {
            offset: Some(0x40),
            ..frame("MAIN__", Some("/src/a.f90"), Some(1))
        };
        let read = |_: &str| Some(lines.clone());
        assert_eq!(heap_name_with(&[&site], 0, Some((1, 2)), read), "b");
        assert_eq!(heap_name_with(&[&site], 0, Some((0, 2)), read), "a");
        // Fewer objects than arrays (one was too small to track): both.
        assert_eq!(heap_name_with(&[&site], 0, Some((0, 1)), read), "a|b");
    }

    #[test]
    fn without_line_information_the_site_names_the_object() {
        let grow = Frame {
            offset: Some(0x1cd),
            ..frame("LAMMPS_NS::AtomVec::grow(int)", None, None)
        };
        let srealloc = frame(
            "LAMMPS_NS::Memory::srealloc(void*, long, char const*)",
            None,
            None,
        );
        assert_eq!(
            heap_name_with(&[&grow, &srealloc], 0, None, |_| None),
            "heap@AtomVec::grow+0x1cd"
        );
    }

    #[test]
    fn falls_back() {
        let nofile = frame("alloc_it", None, None);
        assert_eq!(named(&[&nofile], source()), "heap@alloc_it");
        let unreadable = frame("g", Some("/nope.c"), Some(4));
        assert_eq!(named(&[&unreadable], source()), "heap@g:4");
        assert_eq!(named(&[], source()), "heap@[unknown]");
    }

    #[test]
    fn library_sources() {
        assert!(is_library_source("/usr/include/c++/12/bits/stl_vector.h"));
        assert!(is_library_source(
            "/usr/lib/gcc/x86_64-linux-gnu/12/include/mm_malloc.h"
        ));
        assert!(is_library_source(
            "/opt/gcc-13/include/c++/13/bits/vector.tcc"
        ));
        assert!(is_library_source(
            "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/raw_vec/mod.rs"
        ));
        assert!(is_library_source(
            "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/rustlib/src/rust/library/alloc/src/vec/mod.rs"
        ));
        assert!(is_library_source(
            "/home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/ndarray-0.15.6/src/impl_constructors.rs"
        ));
        assert!(!is_library_source("/work/app/src/main.rs"));
        assert!(!is_library_source("/home/u/include/grid.h"));
    }

    #[test]
    fn constructors() {
        assert_eq!(
            constructor_class("Grid::Grid(unsigned long)"),
            Some("Grid".into())
        );
        assert_eq!(
            constructor_class(
                "ns::Grid<double, 3>::Grid(std::vector<int, std::allocator<int> > const&)"
            ),
            Some("ns::Grid<double, 3>".into())
        );
        assert_eq!(
            constructor_class("(anonymous namespace)::Mesh::Mesh(int)"),
            Some("{anonymous}::Mesh".into())
        );
        assert_eq!(constructor_class("Grid::~Grid()"), None);
        assert_eq!(constructor_class("Grid::resize(unsigned long)"), None);
        assert_eq!(constructor_class("main"), None);
        assert_eq!(constructor_class("rust_vec::main"), None);
        assert_eq!(
            constructor_class(
                "std::vector<double, std::allocator<double> >::vector(unsigned long)"
            ),
            Some("std::vector<double, std::allocator<double> >".into())
        );
    }

    #[test]
    fn member_initialisers() {
        assert_eq!(
            member_initialiser("        : pressure(n, 1.0),"),
            Some("pressure".into())
        );
        assert_eq!(
            member_initialiser("          velocity(n) {"),
            Some("velocity".into())
        );
        assert_eq!(member_initialiser("    , rho{n} {}"), Some("rho".into()));
        assert_eq!(
            member_initialiser("  explicit Grid(int n) : data_(n * n) {}"),
            Some("data_".into())
        );
        // Two on one line: which one allocated is unknown.
        assert_eq!(member_initialiser("  : a(n), b(n) {}"), None);
        // Statements and control headers are not initialisers.
        assert_eq!(member_initialiser("    init(n);"), None);
        assert_eq!(
            member_initialiser("    for (std::size_t i = 0; i < n; i++) {"),
            None
        );
        assert_eq!(member_initialiser("    if (n > 0) {"), None);
        assert_eq!(member_initialiser("  } else {"), None);
    }

    #[test]
    fn method_receivers() {
        assert_eq!(
            method_receiver("  density.resize(n);"),
            Some("density".into())
        );
        assert_eq!(
            method_receiver("grid.density.assign(n, 0.0); // zero"),
            Some("grid.density".into())
        );
        assert_eq!(method_receiver("p->v.push_back(x);"), Some("p->v".into()));
        assert_eq!(
            method_receiver("this->v.reserve(n);"),
            Some("this->v".into())
        );
        assert_eq!(
            method_receiver("        hist.push(0u64);"),
            Some("hist".into())
        );
        assert_eq!(
            method_receiver("    out.extend_from_slice(&buf[..n]);"),
            Some("out".into())
        );
        assert_eq!(
            method_receiver("for (int i = 0; i < n; i++) v.push_back(i);"),
            Some("v".into())
        );
        assert_eq!(
            method_receiver("parts[k].emplace_back(x);"),
            Some("parts[k]".into())
        );
        assert_eq!(method_receiver("v.size();"), None);
        assert_eq!(method_receiver("my_resize(n);"), None);
        assert_eq!(method_receiver("f(x).resize(n);"), None);
        assert_eq!(method_receiver("total += v.push(x);"), None);
    }

    #[test]
    fn declarations_with_arguments() {
        assert_eq!(
            declared_name("  std::vector<double> v(n);"),
            Some("v".into())
        );
        assert_eq!(declared_name("Grid grid(N);"), Some("grid".into()));
        assert_eq!(
            declared_name("  Grid grid{N}; // main grid"),
            Some("grid".into())
        );
        assert_eq!(
            declared_name("static std::map<int, std::string> names(init());"),
            Some("names".into())
        );
        assert_eq!(declared_name("foo(n);"), None);
        assert_eq!(declared_name("std::sort(v.begin(), v.end());"), None);
        assert_eq!(declared_name("obj.method(x);"), None);
        assert_eq!(declared_name("throw std::bad_alloc();"), None);
        assert_eq!(declared_name("delete p;"), None);
        assert_eq!(declared_name("static_cast<void>(f(x));"), None);
        assert_eq!(declared_name("std::cout << f(x);"), None);
        assert_eq!(declared_name("Grid grid(N)"), None);
        assert_eq!(declared_name("f(a)(b);"), None);
    }

    fn lines(text: &str) -> Option<Vec<String>> {
        Some(text.lines().map(str::to_string).collect())
    }

    /// A C++ program, std::vector's header and Rust's raw_vec, all
    /// readable (the library files must be skipped all the same).
    fn cpp_and_rust_source() -> impl FnMut(&str) -> Option<Vec<String>> {
        |file| match file {
            "/src/grid.cpp" => lines(
                "#include <vector>\n\
                 struct Grid {\n\
                 \x20   std::vector<double> pressure, velocity, density;\n\
                 \x20   std::vector<double> *extra;\n\
                 \x20   explicit Grid(std::size_t n)\n\
                 \x20       : pressure(n, 1.0),\n\
                 \x20         velocity(n) {\n\
                 \x20       density.resize(n);\n\
                 \x20       extra = new std::vector<double>(n);\n\
                 \x20   }\n\
                 };\n\
                 struct Sim {\n\
                 \x20   Grid grid;\n\
                 \x20   Sim(std::size_t n) : grid(n) {}\n\
                 };\n\
                 static Grid *make(std::size_t n) { return new Grid(n); }\n\
                 int main() {\n\
                 \x20   Grid grid(1 << 20);\n\
                 \x20   auto g = std::make_unique<Grid>(8);\n\
                 \x20   Sim sim(4);\n\
                 \x20   Grid *m = make(2);\n\
                 \x20   use(Grid(3));\n\
                 \x20   std::vector<double> v(100);\n\
                 \x20   foo(std::vector<int>(5));\n\
                 }\n",
            ),
            "/usr/include/c++/12/bits/stl_vector.h" => lines(
                "line 1\n\
                 \x20     pointer __new_start(this->_M_allocate(__len));\n\
                 \x20 this->_M_impl._M_start = this->_M_allocate(__n);\n",
            ),
            "/rustc/abc/library/alloc/src/raw_vec/mod.rs" => lines(
                "line 1\n\
                 \x20       let ptr = match result {\n",
            ),
            "/src/main.rs" => lines(
                "fn main() {\n\
                 \x20   let table: Vec<u64> = vec![0; n];\n\
                 \x20   let mut hist = Vec::with_capacity(n);\n\
                 \x20   hist.push(0u64);\n\
                 \x20   consume(vec![1u8; 4096]);\n\
                 }\n",
            ),
            _ => None,
        }
    }

    fn at(function: &str, file: &str, line: u32) -> Frame {
        frame(function, Some(file), Some(line))
    }

    #[test]
    fn cpp_vector_members() {
        let new = frame("operator new(unsigned long)", None, None);
        let alloc = at(
            "std::_Vector_base<double, std::allocator<double> >::_M_create_storage(unsigned long)",
            "/usr/include/c++/12/bits/stl_vector.h",
            3,
        );
        let vector = at(
            "std::vector<double, std::allocator<double> >::vector(unsigned long)",
            "/usr/include/c++/12/bits/stl_vector.h",
            2,
        );
        let ctor = |line| at("Grid::Grid(unsigned long)", "/src/grid.cpp", line);
        let main = |line| at("main", "/src/grid.cpp", line);
        let name = |frames: &[&Frame]| named(frames, cpp_and_rust_source());
        // Member initialisers, through std::vector's inlined frames.
        let (pressure, velocity, density, extra) = (ctor(6), ctor(7), ctor(8), ctor(9));
        assert_eq!(
            name(&[&main(18), &pressure, &vector, &alloc, &new]),
            "grid.pressure"
        );
        assert_eq!(
            name(&[&main(18), &velocity, &vector, &alloc, &new]),
            "grid.velocity"
        );
        // `.resize(` in the constructor's body; `member = new ...`.
        assert_eq!(name(&[&main(18), &density, &alloc, &new]), "grid.density");
        assert_eq!(
            name(&[&main(18), &extra, &vector, &alloc, &new]),
            "grid.extra"
        );
        // Through std::make_unique (a library frame): a pointer.
        let make_unique = at(
            "std::make_unique<Grid, int>(int&&)",
            "/usr/include/c++/12/bits/unique_ptr.h",
            2,
        );
        assert_eq!(
            name(&[&main(19), &make_unique, &pressure, &vector, &alloc, &new]),
            "g->pressure"
        );
        // A member of a member.
        let sim = at("Sim::Sim(unsigned long)", "/src/grid.cpp", 14);
        assert_eq!(
            name(&[&main(20), &sim, &velocity, &vector, &alloc, &new]),
            "sim.grid.velocity"
        );
        // A factory that returns `new Grid(n)`.
        let factory = at("make(unsigned long)", "/src/grid.cpp", 16);
        assert_eq!(
            name(&[&main(21), &factory, &pressure, &vector, &alloc, &new]),
            "m->pressure"
        );
        // No variable holds the Grid: the class qualifies the member.
        assert_eq!(
            name(&[&main(22), &pressure, &vector, &alloc, &new]),
            "Grid::pressure"
        );
        // A plain vector declared with its size.
        assert_eq!(name(&[&main(23), &vector, &alloc, &new]), "v");
        // Not a declaration: the fallback names the user's frame, not the
        // library's.
        assert_eq!(name(&[&main(24), &vector, &alloc, &new]), "heap@main:24");
    }

    #[test]
    fn rust_vecs() {
        let raw_vec = at(
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "/rustc/abc/library/alloc/src/raw_vec/mod.rs",
            2,
        );
        let from_elem = at(
            "alloc::vec::from_elem",
            "/rustc/abc/library/alloc/src/vec/mod.rs",
            3651,
        );
        let alloc = frame("alloc::alloc::alloc_zeroed", None, None);
        let main = |line| at("rust_vec::main", "/src/main.rs", line);
        let name = |frames: &[&Frame]| named(frames, cpp_and_rust_source());
        assert_eq!(name(&[&main(2), &from_elem, &raw_vec, &alloc]), "table");
        assert_eq!(name(&[&main(3), &raw_vec, &alloc]), "hist");
        assert_eq!(name(&[&main(4), &raw_vec, &alloc]), "hist");
        assert_eq!(
            name(&[&main(5), &from_elem, &raw_vec, &alloc]),
            "heap@rust_vec::main:5"
        );
    }
}
