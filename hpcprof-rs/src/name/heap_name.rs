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

use formats::database::Frame;

use super::fortran::fortran_allocated;
use super::frames::short_function;
use super::layers::callee_method;
use super::source::{is_library_source, SourceCache};
use super::statement::{
    constructor_class, line_name_calling, line_targets, returned_later, returns_allocation, Named,
};
use super::through_params;

/// The name of a heap object from its allocation path (root first) and its
/// allocation site (index into `path`, chosen by [`super::site`]); `ordinal`
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
    names_at_calling(lines, line, function, None)
}

/// [`names_at`] for a line that calls `callee` (see
/// [`super::statement::line_name_calling`]).
pub(super) fn names_at_calling(
    lines: &[String],
    line: usize,
    function: &str,
    callee: Option<&str>,
) -> Option<Option<bool>> {
    if line == 0 || line > lines.len() {
        return None;
    }
    if returns_allocation(&lines[line - 1]) {
        return Some(None);
    }
    if fortran_allocated(&lines[line - 1]).is_some() {
        return Some(Some(true));
    }
    Some(
        match line_name_calling(lines, line, constructor_class(function).is_some(), callee) {
            Some(Named::Var { name, .. }) if returned_later(&lines[line..], &name) => None,
            Some(_) => Some(true),
            None => Some(false),
        },
    )
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
            // `double *cold = malloc(a), *hot = malloc(b);`: each call
            // instruction of the line names its own, in order.
            let targets = line_targets(text);
            if let Some((k, n)) = ordinal.filter(|&(_, n)| n == targets.len()) {
                debug_assert!(k < n);
                return through_callers(path, i, targets[k].clone(), &lines, &mut read);
            }
        }
        if returns_allocation(text) {
            continue;
        }
        let class = constructor_class(&frame.function);
        let callee = path.get(i + 1).map(|c| callee_method(c));
        let named = line_name_calling(&lines, idx, class.is_some(), callee.as_deref());
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
    // Code without symbols (`hpcc: function at +0x12900`, a range of the
    // unwind table): the call's address in the module, `heap@hpcc+0x129ce`.
    let unnamed = site_frame
        .function
        .split_once(": function at +0x")
        .and_then(|(module, start)| Some((module, u64::from_str_radix(start, 16).ok()?)));
    if let (Some((module, start)), Some(off)) = (unnamed, site_frame.offset) {
        return format!("heap@{module}+0x{:x}", (start + off).saturating_sub(1));
    }
    let function = short_function(&site_frame.function);
    match (site_frame.line, site_frame.offset) {
        (Some(line), _) => format!("heap@{function}:{line}"),
        (None, Some(off)) => format!("heap@{function}+0x{off:x}"),
        (None, None) => format!("heap@{function}"),
    }
}

/// `name`, assigned in `path[i]` (whose source is `lines`), rewritten
/// through the parameters it uses, one caller at a time (at most 4):
/// `hypre_CSRMatrixData(matrix)` -> `hypre_CSRMatrixData(A_diag)`.
pub(super) fn through_callers(
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
