//! The preload's layering, checked: every top-level folder of `src/` sits
//! in one layer of [`LAYERS`] and imports (`crate::` paths, `use crate::{..}`
//! groups included) only folders of its own layer or of lower ones; there is
//! no import cycle among the top-level folders; `sys` imports nothing from
//! the rest of the crate; and no source file is longer than [`MAX_LINES`].
//!
//! The compiler cannot check this inside one crate, so this test parses the
//! sources. `cargo test -p hpcrun-preload --test layers -- --nocapture`
//! prints the folder graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer of each top-level folder, lowest first. A folder may import from
/// its own layer and from those below it, never from those above. The
/// folders follow the data flow (hooks -> objects -> sample -> cct ->
/// output); the layers say who calls whom.
const LAYERS: &[(&str, &[&str])] = &[
    // The only code that calls libc or the kernel.
    ("sys", &["sys"]),
    // Data structures, decoders and tables over sys: the program's code,
    // the object map, the trees, the PMU records, what one access is.
    ("data", &["code", "objects", "cct", "pmu", "access"]),
    // The run's settings and flags, per-thread state, sampling, signals.
    ("state", &["threads"]),
    // A thread's state to a file: writer, checkpoints, notices, exit.
    ("output", &["output"]),
    // The interposed C entry points of the program's calls.
    ("hooks", &["hooks"]),
    // The signal handlers: a sample becomes an attributed access.
    ("sample", &["sample"]),
    // Start-up, fork, exit, the signal calls: may import everything.
    ("process", &["process"]),
];

/// The longest source file allowed.
const MAX_LINES: usize = 1_200;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/objects/big.rs` ->
/// `objects`), `None` for `lib.rs`.
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    if first == "lib.rs" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_string())
}

/// Removes `//` comments (doc comments included) and string literals, so
/// that a path mentioned in prose or in a message is not an import.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if !in_str && c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' && !(prev == '\'' && chars.get(i + 1) == Some(&'\'')) {
                in_str = !in_str;
            } else if !in_str {
                out.push(c);
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
            i += 1;
        }
        out.push('\n');
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segments after every `crate::` (`$crate::` included) in
/// `code`, with `crate::{a, b::c}` groups expanded.
fn crate_imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `mycrate::`
        }
        let tail = rest.trim_start();
        if let Some(group) = tail.strip_prefix('{') {
            // Top-level items of the group: split at depth-0 commas.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        let id = ident_at(&group[i..]);
                        if !id.is_empty() {
                            found.insert(id.to_string());
                        }
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let id = ident_at(tail);
            if !id.is_empty() {
                found.insert(id.to_string());
            }
        }
    }
    found
}

/// The import graph between top-level modules: module -> (module it
/// imports -> a file that does so).
fn module_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = top_module(&src, file) else {
            continue;
        };
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        let edges = graph.entry(module.clone()).or_default();
        for target in crate_imports(&code) {
            if target != module {
                let rel = file.strip_prefix(&src).unwrap().display().to_string();
                edges.entry(target).or_insert(rel);
            }
        }
    }
    graph
}

/// The module one level inside a folder that a file belongs to
/// (`src/code/unwind.rs` -> `code::unwind`, `src/sample/handler/timer.rs`
/// -> `sample::handler`, `src/code/mod.rs` -> `code`), `None` for `lib.rs`.
fn inner_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [f] if f == "lib" => None,
        [f] => Some(f.clone()),
        [f, m] if m == "mod" => Some(f.clone()),
        [f, m, ..] => Some(format!("{f}::{m}")),
        _ => None,
    }
}

/// The full paths of a path expression (`a::{b, c::{d, E}}` -> `a::b`,
/// `a::c::d`, `a::c::E`), appended to `out`.
fn expand(prefix: &str, s: &str, out: &mut Vec<String>) {
    let s = s.trim_start();
    if let Some(group) = s.strip_prefix('{') {
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand(prefix, &group[start..i], out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(prefix, &group[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let id = ident_at(s);
    if id.is_empty() {
        return;
    }
    let path = if prefix.is_empty() {
        id.to_string()
    } else {
        format!("{prefix}::{id}")
    };
    match s[id.len()..].trim_start().strip_prefix("::") {
        Some(rest) => expand(&path, rest, out),
        None => out.push(path),
    }
}

/// The import graph between the modules one level inside the folders:
/// `crate::` paths and, inside a folder, `super::` paths (`super::unwind`
/// in `src/code/modules.rs` is `code::unwind`).
fn inner_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let modules: BTreeSet<String> = files.iter().filter_map(|f| inner_module(&src, f)).collect();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = inner_module(&src, file) else {
            continue;
        };
        let rel = file.strip_prefix(&src).unwrap();
        // What `super::` names from this file: the folder, for a file
        // directly inside one.
        let parent = (rel.components().count() == 2 && !rel.ends_with("mod.rs"))
            .then(|| module.split("::").next().unwrap().to_string());
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        let mut paths = Vec::new();
        for (root, prefix) in [("crate::", None), ("super::", parent.as_deref())] {
            let Some(prefix) = prefix.or((root == "crate::").then_some("")) else {
                continue;
            };
            for (at, _) in code.match_indices(root) {
                let before = code[..at].chars().last();
                let rest = &code[at + root.len()..];
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    || rest.starts_with("super::")
                {
                    continue; // `mycrate::`; `super::super::` in a test module
                }
                expand(prefix, rest, &mut paths);
            }
        }
        let edges = graph.entry(module.clone()).or_default();
        for path in paths {
            let segments: Vec<&str> = path.split("::").collect();
            let target = (1..=segments.len().min(2))
                .rev()
                .map(|n| segments[..n].join("::"))
                .find(|m| modules.contains(m));
            if let Some(target) = target.filter(|t| *t != module) {
                let rel = rel.display().to_string();
                edges.entry(target).or_insert(rel);
            }
        }
    }
    graph
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(edges) = s.graph.get(v) {
            for w in edges.keys() {
                let w = w.as_str();
                if !s.graph.contains_key(w) {
                    continue;
                }
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

#[test]
fn parser_reads_paths_and_groups() {
    let code = code_only(
        "use crate::{a::B, c, d::{e, f}};\n// crate::comment\nlet x = crate::g::h(\"crate::str\");\n$crate::m!();",
    );
    let found: Vec<_> = crate_imports(&code).into_iter().collect();
    assert_eq!(found, ["a", "c", "d", "g", "m"]);
}

#[test]
fn module_graph_is_layered_and_acyclic() {
    let graph = module_graph();
    let mut problems = Vec::new();
    for (module, edges) in &graph {
        println!(
            "{module:>14} [{}] -> {}",
            layer_of(module).map_or("?", |l| LAYERS[l].0),
            edges.keys().cloned().collect::<Vec<_>>().join(", ")
        );
        let Some(layer) = layer_of(module) else {
            problems.push(format!("folder `{module}` is in no layer of LAYERS"));
            continue;
        };
        for (target, file) in edges {
            match layer_of(target) {
                _ if module == "sys" => {
                    problems.push(format!("sys imports `crate::{target}` ({file})"))
                }
                Some(t) if t > layer => problems.push(format!(
                    "{file}: `{module}` ({}) imports `{target}` ({}), a higher layer",
                    LAYERS[layer].0, LAYERS[t].0
                )),
                Some(_) => {}
                None if graph.contains_key(target) => {}
                None => {} // a crate-root item (the allocator) or a macro
            }
        }
    }
    for component in cycles(&graph) {
        problems.push(format!("import cycle among {}", component.join(", ")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!("no import cycle among {} top-level folders", graph.len());
}

/// The most entries `src/` may hold: `lib.rs` and the folders.
const MAX_TOP_ENTRIES: usize = 12;

#[test]
fn top_level_is_folders_with_overviews() {
    let mut problems = Vec::new();
    let entries: Vec<_> = std::fs::read_dir(src_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    if entries.len() > MAX_TOP_ENTRIES {
        problems.push(format!(
            "src/ holds {} entries, more than {MAX_TOP_ENTRIES}",
            entries.len()
        ));
    }
    for path in &entries {
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            let mod_rs = path.join("mod.rs");
            match std::fs::read_to_string(&mod_rs) {
                Ok(text) if text.starts_with("//!") => {}
                Ok(_) => problems.push(format!("{} does not open with `//!`", mod_rs.display())),
                Err(e) => problems.push(format!("{}: {e}", mod_rs.display())),
            }
        } else if name != "lib.rs" {
            problems.push(format!("src/{name}: only lib.rs and folders at the top"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn modules_inside_folders_have_no_import_cycle() {
    let graph = inner_graph();
    for (module, edges) in &graph {
        let edges: Vec<_> = edges.iter().map(|(t, f)| format!("{t} ({f})")).collect();
        println!("{module:>24} -> {}", edges.join(", "));
    }
    let problems: Vec<_> = cycles(&graph)
        .into_iter()
        .map(|c| format!("import cycle among {}", c.join(", ")))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(graph.contains_key("code::unwind") && graph.contains_key("sample::handler"));
}

#[test]
fn no_source_file_is_too_long() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let long: Vec<_> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "{}", long.join("\n"));
}
