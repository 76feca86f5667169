//! Names heap objects after the variable their allocation is assigned to.
//!
//! Starting at the allocation site (the innermost frame of the allocation
//! path whose source file can be read), the source line is parsed:
//!
//! * `double *A = malloc(...)` names the object `A` (also `s->grid = ...`,
//!   `SD.nuclide_grid = ...`, `grid_w[i] = ...`, `let mut a: Vec<f64> = ...`);
//! * `return ...;`, or an assignment to a local that the function returns a
//!   few lines later (`p = malloc(n); ... return p;`), means the function is
//!   an allocation wrapper: the next outer frame's line is parsed instead;
//! * otherwise the object is called `heap@function:line`.

use std::collections::HashMap;

use formats::database::Frame;

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

/// The name of a heap object from its allocation path (root first).
pub fn heap_name(path: &[&Frame], sources: &mut SourceCache) -> String {
    heap_name_with(path, |file| sources.lines(file).map(<[String]>::to_vec))
}

/// [`heap_name`] with a custom source reader (for tests).
pub fn heap_name_with(
    path: &[&Frame],
    mut read: impl FnMut(&str) -> Option<Vec<String>>,
) -> String {
    // The frame the fallback name refers to: the last one examined.
    let mut named_frame: Option<&Frame> = None;
    for frame in path.iter().rev() {
        let (Some(file), Some(line)) = (frame.file.as_deref(), frame.line) else {
            continue;
        };
        let Some(lines) = read(file) else {
            continue;
        };
        let idx = line as usize;
        if idx == 0 || idx > lines.len() {
            continue;
        }
        named_frame = Some(frame);
        let text = &lines[idx - 1];
        if is_return(text) {
            continue;
        }
        let assigned = assigned_name(text).or_else(|| {
            // `double *A =\n    malloc(n);`: the call is on the next line.
            let prev = lines.get(idx.wrapping_sub(2))?;
            if prev.trim_end().ends_with('=') {
                assigned_name(&format!("{} x;", prev.trim_end()))
            } else {
                None
            }
        });
        match assigned {
            Some(name) if returned_later(&lines[idx..], &name) => continue,
            Some(name) => return name,
            None => break,
        }
    }
    let frame = named_frame.or_else(|| path.last().copied());
    match frame {
        Some(f) => match f.line {
            Some(line) => format!("heap@{}:{line}", f.function),
            None => format!("heap@{}", f.function),
        },
        None => "heap@[unknown]".to_string(),
    }
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
            let rest = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or(rest)
                .trim();
            if rest == name {
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
    let code = code_part(line);
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
        return valid(name);
    }
    // Scan the last expression of the left-hand side backwards: identifier
    // characters, `.`, `->`, `::` and bracketed indices.
    let chars: Vec<char> = lhs.chars().collect();
    let mut start = chars.len();
    let mut depth = 0i32;
    while start > 0 {
        let c = chars[start - 1];
        if depth > 0 {
            match c {
                ']' => depth += 1,
                '[' => depth -= 1,
                _ => {}
            }
            start -= 1;
            continue;
        }
        let ok = match c {
            ']' => {
                depth += 1;
                true
            }
            '[' => return None,
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
    if depth != 0 {
        return None;
    }
    let name: String = chars[start..].iter().collect();
    let before = chars[..start].iter().collect::<String>();
    let before = before.trim_end();
    // A lone `*p = ...` assigns through a pointer: keep the `*`.
    if before == "*" {
        return valid(format!("*{name}"));
    }
    // Anything else before the name must look like a declaration's type
    // (`double *`, `struct grid *`, `std::vector<int>`, `auto`), not an
    // expression or a statement (`if (x) a`, `f(x).a`).
    if before.contains(['(', ')', ';', '{', '}', '=', ',', '"']) {
        return None;
    }
    valid(name)
}

fn valid(name: String) -> Option<String> {
    let first = name.chars().next()?;
    let first_ok = first.is_alphabetic() || first == '_' || first == '*';
    let keyword = matches!(
        name.as_str(),
        "if" | "else" | "for" | "while" | "return" | "const" | "static" | "auto"
    );
    (first_ok && !keyword).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(assigned_name("if (x) a = malloc(3);"), None);
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
        let libc = frame("helper", Some("/usr/src/missing.c"), Some(3));
        assert_eq!(
            heap_name_with(&[&main, &make, &xmalloc, &libc], source()),
            "C"
        );
        let call = frame("main", Some("/src/app.c"), Some(10));
        assert_eq!(
            heap_name_with(&[&call, &make, &xmalloc], source()),
            "heap@main:10"
        );
        let split = frame("main", Some("/src/app.c"), Some(12));
        assert_eq!(heap_name_with(&[&split], source()), "D");
    }

    #[test]
    fn falls_back() {
        let nofile = frame("alloc_it", None, None);
        assert_eq!(heap_name_with(&[&nofile], source()), "heap@alloc_it");
        let unreadable = frame("g", Some("/nope.c"), Some(4));
        assert_eq!(heap_name_with(&[&unreadable], source()), "heap@g:4");
        assert_eq!(heap_name_with(&[], source()), "heap@[unknown]");
    }
}
