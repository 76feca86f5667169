//! What a frame's module and function say: runtime and system library
//! frames (never an allocation site) and short function names for object
//! names.

use formats::database::Frame;

use super::source::is_library_source;
use super::text::scope_parts;

/// Module file names (prefixes of the base name) of runtimes and system
/// libraries whose frames are never an allocation site.
pub(super) const RUNTIME_MODULES: &[&str] = &[
    "libc.so",
    "libc-",
    "ld-linux",
    "ld-2.",
    "libstdc++.so",
    "libc++.so",
    "libc++abi.so",
    "libgcc_s.so",
    "libgfortran.so",
    "libpython",
    "libjemalloc.so",
    "libtcmalloc",
    "libmimalloc.so",
    "libhpcrun_preload.so",
];

/// Function name prefixes of runtime allocators and library code (for
/// programs without line information, where the file rule cannot apply).
pub(super) const RUNTIME_FUNCTIONS: &[&str] = &[
    "operator new",
    "__rust_alloc",
    "__rust_realloc",
    "__rdl_alloc",
    "__rg_alloc",
    "alloc::",
    "<alloc::",
    "std::",
    "<std::",
    "__gnu_cxx::",
    "_gfortran_",
    "__libc_",
    "__GI_",
];

/// `f(int, char const*)` -> `f`; `std::vector<int>::push_back(int&&)` ->
/// `std::vector<int>::push_back`.
pub fn without_parameters(function: &str) -> &str {
    let f = function.trim_end();
    if !f.ends_with(')') {
        return f;
    }
    // The parenthesis that opens the final parameter list.
    let mut depth = 0i32;
    for (i, c) in f.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return f[..i].trim_end();
                }
            }
            _ => {}
        }
    }
    f
}

/// The last `::` component of a name without parameters, outside template
/// brackets: `LAMMPS_NS::MyPage<int>::allocate` -> `allocate`.
pub(super) fn last_component(name: &str) -> &str {
    scope_parts(name).last().copied().unwrap_or(name)
}

/// A short form of a function name for object names: no parameters, at
/// most the class and the function (`LAMMPS_NS::AtomVec::grow(int)` ->
/// `AtomVec::grow`).
pub fn short_function(function: &str) -> String {
    let parts = scope_parts(without_parameters(function));
    parts[parts.len().saturating_sub(2)..].join("::")
}

pub(super) fn module_base(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// Rule 1: a frame of a runtime or system library.
pub fn is_runtime(frame: &Frame) -> bool {
    let base = module_base(&frame.module);
    RUNTIME_MODULES.iter().any(|m| base.starts_with(m)) || is_runtime_code(frame)
}

/// Language runtimes that can be the program itself: `python3` is a
/// small `main` over libpython, whose own allocations (its arenas, its
/// lists' item arrays) have no frame outside it.
const LANGUAGE_RUNTIMES: &[&str] = &["libpython"];

/// Rule 1 for a program that runs inside a language runtime: a frame of a
/// system library (libc, the loader, an allocator, the profiler), not of
/// the language runtime ([`LANGUAGE_RUNTIMES`]).
pub(super) fn is_system(frame: &Frame) -> bool {
    let base = module_base(&frame.module);
    RUNTIME_MODULES
        .iter()
        .filter(|m| !LANGUAGE_RUNTIMES.contains(m))
        .any(|m| base.starts_with(m))
        || is_runtime_code(frame)
}

/// A runtime allocator or library code by its name or source file.
fn is_runtime_code(frame: &Frame) -> bool {
    RUNTIME_FUNCTIONS
        .iter()
        .any(|p| frame.function.starts_with(p))
        || frame.file.as_deref().is_some_and(is_library_source)
}

/// A process's entry frame, the caller of libc's start-up (`_start`, or
/// `lmp+0x1260` in a stripped program; `i` its index in the path, `next`
/// the frame it calls): never a site.
pub(super) fn is_start_up(frame: &Frame, i: usize, next: Option<&Frame>) -> bool {
    frame.function == "_start"
        || (i == 0 && next.is_some_and(|n| n.function.starts_with("__libc_start")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shortened() {
        assert_eq!(
            short_function("LAMMPS_NS::AtomVec::grow(int)"),
            "AtomVec::grow"
        );
        assert_eq!(
            short_function("LAMMPS_NS::MyPage<int>::allocate()"),
            "MyPage<int>::allocate"
        );
        assert_eq!(short_function("main"), "main");
        assert_eq!(
            without_parameters("LAMMPS_NS::Memory::srealloc(void*, long, char const*)"),
            "LAMMPS_NS::Memory::srealloc"
        );
        assert_eq!(last_component("std::map<a::b, c>::insert"), "insert");
    }
}
