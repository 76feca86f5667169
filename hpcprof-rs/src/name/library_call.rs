//! Blocks a library function allocates for its own use while the program
//! called it: glibc's `qsort` sorts through a temporary buffer it
//! `malloc`s (as large as the array sorted), freed before it returns. The
//! usual rules named such a block after what the calling line sorts, and
//! could move its site further out: XSBench's 68 buffers, from
//! `qsort(&SD.nuclide_grid[...], ...)` in a function that ends with
//! `return SD;` (a wrapper, by the source rule), were an object `SD` sited
//! at Main.c:53. They are named after the call and sited at it instead:
//! `qsort buffer (GridInit.c:51)`.

use formats::database::Frame;

use super::frames::{is_runtime, module_base, short_function};

/// Library functions whose own blocks are temporary buffers, and what the
/// object is called: (function name prefix, name), matched on the name
/// without glibc's internal prefixes (`__GI___qsort_r` is `qsort_r`).
/// glibc's `qsort` calls `qsort_r`, which allocates the buffer, then
/// `msort_with_tmp`.
const BUFFER_CALLS: &[(&str, &str)] = &[("qsort", "qsort buffer"), ("msort", "qsort buffer")];

/// Modules the functions of [`BUFFER_CALLS`] are looked for in.
const LIBRARIES: &[&str] = &["libc.so", "libc-"];

/// The block allocated through `path` (root first) inside a library call
/// of [`BUFFER_CALLS`] made by the program: the index of the program's
/// frame that made the call (the allocation site) and the object's name,
/// `qsort buffer (GridInit.c:51)`. `None` for every other block.
pub fn buffer(path: &[&Frame]) -> Option<(usize, String)> {
    let (call, name) = path.iter().enumerate().find_map(|(i, f)| {
        let base = module_base(&f.module);
        if !LIBRARIES.iter().any(|l| base.starts_with(l)) {
            return None;
        }
        let function = f.function.strip_prefix("__GI_").unwrap_or(&f.function);
        let function = function.trim_start_matches('_');
        BUFFER_CALLS
            .iter()
            .find(|(prefix, _)| function.starts_with(prefix))
            .map(|(_, name)| (i, *name))
    })?;
    // The program's frame that called it: the innermost one above it
    // outside the runtime and system libraries.
    let site = (0..call).rev().find(|&i| !is_runtime(path[i]))?;
    let f = path[site];
    let at = match (&f.file, f.line) {
        (Some(file), Some(line)) => {
            format!("{}:{line}", file.rsplit('/').next().unwrap_or(file))
        }
        _ => match f.offset {
            Some(off) => format!("{}+0x{off:x}", short_function(&f.function)),
            None => short_function(&f.function),
        },
    };
    Some((site, format!("{name} ({at})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, module: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            function: function.into(),
            module: module.into(),
            file: file.map(Into::into),
            line,
            ..Default::default()
        }
    }

    #[test]
    fn qsort_buffers_are_named_after_the_call() {
        let main = frame("main", "/x/XSBench", Some("/x/Main.c"), Some(53));
        let grids = frame(
            "generate_grids",
            "/x/XSBench",
            Some("/x/GridInit.c"),
            Some(51),
        );
        let qsort = frame("qsort", "/lib/x86_64-linux-gnu/libc.so.6", None, None);
        // With glibc's debug information: its internal name and file.
        let qsort_r = frame(
            "__GI___qsort_r",
            "/lib/x86_64-linux-gnu/libc.so.6",
            Some("./stdlib/msort.c"),
            Some(221),
        );
        let malloc = frame("malloc", "/usr/lib/libhpcrun_preload.so", None, None);
        let path = [&main, &grids, &qsort, &qsort_r, &malloc];
        let want = Some((1, "qsort buffer (GridInit.c:51)".to_string()));
        assert_eq!(buffer(&path), want);
        let path = [&main, &grids, &qsort_r];
        assert_eq!(buffer(&path), want);
        // A block the program allocated itself is not one.
        let path = [&main, &grids, &malloc];
        assert_eq!(buffer(&path), None);
        // A program function called qsort_something is not libc's.
        let own = frame("qsort_rows", "/x/XSBench", Some("/x/Sort.c"), Some(9));
        let path = [&main, &grids, &own, &malloc];
        assert_eq!(buffer(&path), None);
        // Without line information: the site's function and offset.
        let lmp = Frame {
            offset: Some(0x2d6),
            ..frame("LAMMPS_NS::Sort::go(int)", "/x/liblammps.so.0", None, None)
        };
        let path = [&main, &lmp, &qsort, &malloc];
        assert_eq!(
            buffer(&path),
            Some((1, "qsort buffer (Sort::go+0x2d6)".to_string()))
        );
    }
}
