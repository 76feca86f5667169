//! The program's sources: files read once ([`SourceCache`]) and which
//! files are the program's own rather than a library's
//! ([`is_library_source`]).

use std::collections::HashMap;

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
