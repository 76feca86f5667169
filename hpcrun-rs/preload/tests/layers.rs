//! The preload's layering, checked: every top-level module of `src/` sits
//! in one layer of [`LAYERS`] and imports (`crate::` paths, `use crate::{..}`
//! groups included) only modules of its own layer or of lower ones; there is
//! no import cycle among the top-level modules; `sys` imports nothing from
//! the rest of the crate; and no source file is longer than [`MAX_LINES`].
//!
//! The compiler cannot check this inside one crate, so this test parses the
//! sources. `cargo test -p hpcrun-preload --test layers -- --nocapture`
//! prints the module graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer of each top-level module, lowest first. A module may import from
/// its own layer and from those below it, never from those above.
const LAYERS: &[(&str, &[&str])] = &[
    // The only code that calls libc or the kernel.
    ("sys", &["sys"]),
    // Pure data structures, decoders and tables, over sys.
    (
        "data",
        &[
            "guard",
            "filled",
            "cct",
            "objects",
            "pages",
            "regions",
            "numa",
            "soft",
            "blame",
            "caches",
            "anchors",
            "stride",
            "patterns",
            "pmu",
            "code",
            "watch",
            "handler_time",
        ],
    ),
    // Run settings, per-thread state, the profiler's signal bookkeeping.
    (
        "state",
        &["config", "run", "creators", "threads", "signals", "sandbox"],
    ),
    // Sampling, the writer, the signal handler, the C entry points.
    (
        "measure",
        &[
            "sampling",
            "notices",
            "profile_file",
            "manifest",
            "writer",
            "checkpoint",
            "exit",
            "exec",
            "attribute",
            "handler",
            "hooks",
            "labels",
            "signal_hooks",
        ],
    ),
    // Start-up, fork, thread exit: may import everything.
    ("lifecycle", &["lifecycle"]),
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
            problems.push(format!("module `{module}` is in no layer of LAYERS"));
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
    println!("no import cycle among {} top-level modules", graph.len());
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
