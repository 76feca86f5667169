//! The database's trees in the literal format of LLNL Hatchet
//! (`hatchet.GraphFrame.from_literal`, and Thicket on top of it):
//! `hpcprof-rs export DB --format hatchet [--view code|data]`.
//!
//! The document is a JSON list of root nodes; every node is
//! `{"frame": {...}, "metrics": {...}, "children": [...]}`:
//!
//! * `frame`: `name` and `type`, plus what locates it. A code node is
//!   `{"name": "main (abc.c:45)", "type": "function", "function": "main",
//!   "file", "line", "module"}` (the file, line and module when known; one
//!   node per inlining level and source line, as in the database); a data
//!   object is `{"name": "C", "type": "object", "kind": "heap", "site":
//!   "abc.c:41"}`. A code node's name always carries its file's base name
//!   and line ([`node_name`]): Hatchet's literal reader puts only `name`
//!   (and the metrics) in the dataframe, and `GraphFrame.tree()` prints
//!   only `name`, so lines of one function (`main` calling at line 41, 42
//!   and 45) would otherwise be identical rows; a name that depends on the
//!   node alone, not on its siblings, stays the same in every run, so
//!   Thicket and Hatchet's graph union still match the nodes of two runs
//!   (they compare every frame attribute). `function` keeps the bare
//!   function name for grouping.
//! * `metrics`: for every metric of the database, `"NAME (inc)"` (the
//!   node's inclusive value) and `"NAME"` (its exclusive value): Hatchet
//!   reads keys with `(inc)` as inclusive metrics and the others as
//!   exclusive ones. A data object's own exclusive value is the tree's
//!   (normally 0: its samples are at the lines of its access paths), so
//!   that Hatchet's `update_inclusive_columns` gives the same inclusive
//!   values back.
//! * `children`, and the list of roots: sorted by the primary metric's
//!   inclusive value, largest first (ties in database order), which
//!   `node.children` and `graph.roots` keep. (`GraphFrame.tree()` prints
//!   siblings in its own order, by their frames' attributes.)
//!
//! The code view's roots are the code-centric tree's top frames (`_start`,
//! ...); the data view's roots are the data objects, hottest first, each
//! with its access call paths below it (the viewer's data pane, object
//! first). The trees are built bottom-up, without recursion, so that deep
//! call paths do not overflow the stack here (Python's own recursion limit
//! still applies in Hatchet's reader, about 1,000 levels).
//!
//! ```
//! use formats::database::Database;
//! let text = formats::hatchet::to_literal(&Database::default(), formats::hatchet::Tree::Code, None);
//! assert_eq!(text.trim(), "[]");
//! ```

use serde_json::{json, Map, Value};

use crate::database::{Database, Frame, NodeKind};

/// Which tree to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    /// The code-centric calling-context tree.
    Code,
    /// The data objects, each with its access call paths.
    Data,
}

/// The literal (a JSON list of roots) of `tree`, at most `top` roots.
pub fn to_literal(db: &Database, tree: Tree, top: Option<usize>) -> String {
    let roots = roots(db, tree);
    let keep = top.unwrap_or(roots.len()).min(roots.len());
    let mut text = serde_json::to_string(&Value::Array(roots[..keep].to_vec())).unwrap_or_default();
    text.push('\n');
    text
}

/// The root nodes of `tree`, hottest first.
pub fn roots(db: &Database, tree: Tree) -> Vec<Value> {
    let t = match tree {
        Tree::Code => &db.code,
        Tree::Data => &db.data,
    };
    let columns = db.info.metrics.len().max(1);
    let primary = db.info.primary_metric as usize;
    let inc = t.inclusive(columns);
    let names: Vec<String> = (0..columns)
        .map(|m| {
            db.info
                .metrics
                .get(m)
                .map_or_else(|| format!("metric {m}"), |i| i.name.clone())
        })
        .collect();
    let metrics = |n: usize| -> Value {
        let mut map = Map::new();
        for (m, name) in names.iter().enumerate() {
            let exc = t.nodes[n].exclusive.get(m).copied().unwrap_or(0);
            map.insert(format!("{name} (inc)"), json!(inc[n][m]));
            map.insert(name.clone(), json!(exc));
        }
        Value::Object(map)
    };
    // Children lists, hottest first.
    let mut kids: Vec<Vec<u32>> = vec![Vec::new(); t.nodes.len()];
    for (i, node) in t.nodes.iter().enumerate().skip(1) {
        kids[node.parent as usize].push(i as u32);
    }
    let hottest_first = |ids: &mut Vec<u32>| {
        ids.sort_by(|&a, &b| {
            inc[b as usize][primary]
                .cmp(&inc[a as usize][primary])
                .then(a.cmp(&b))
        });
    };
    for k in &mut kids {
        hottest_first(k);
    }
    // Bottom-up: children have larger indices than their parents.
    let mut built: Vec<Option<Value>> = vec![None; t.nodes.len()];
    for i in (1..t.nodes.len()).rev() {
        // In the data view objects are roots: the nodes above them (the
        // heap, static and unknown roots) do not take them.
        let children: Vec<Value> = kids[i]
            .iter()
            .filter(|&&c| {
                tree == Tree::Code || !matches!(t.nodes[c as usize].kind, NodeKind::Object(_))
            })
            .filter_map(|&c| built[c as usize].take())
            .collect();
        let frame = match &t.nodes[i].kind {
            NodeKind::Frame(f) => frame_attrs(db.frames.get(*f as usize)),
            NodeKind::Object(o) => object_attrs(db, *o),
            NodeKind::Root(name) => json!({"name": root_name(name), "type": "root"}),
        };
        let mut node = json!({"frame": frame, "metrics": metrics(i)});
        if !children.is_empty() {
            node["children"] = Value::Array(children);
        }
        built[i] = Some(node);
    }
    match tree {
        Tree::Code => kids[0]
            .iter()
            .filter_map(|&c| built[c as usize].take())
            .collect(),
        Tree::Data => {
            let mut objects: Vec<u32> = db.objects.iter().map(|o| o.node).collect();
            hottest_first(&mut objects);
            objects
                .iter()
                .filter_map(|&n| built.get_mut(n as usize).and_then(Option::take))
                .collect()
        }
    }
}

fn root_name(name: &str) -> &str {
    if name.is_empty() {
        "<root>"
    } else {
        name
    }
}

/// A code node's name: the function and where, `main (abc.c:50)` (the
/// file's base name), `main (abc.c)` without a line, the function alone
/// without a file.
pub fn node_name(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{} ({}:{line})", f.function, base_name(file)),
        (Some(file), None) => format!("{} ({})", f.function, base_name(file)),
        _ => f.function.clone(),
    }
}

fn base_name(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// `{"name", "type": "function", "function", "file", "line", "module"}`.
fn frame_attrs(frame: Option<&Frame>) -> Value {
    let Some(f) = frame else {
        return json!({"name": "<unknown frame>", "type": "function"});
    };
    let mut map = Map::new();
    map.insert("name".into(), json!(node_name(f)));
    map.insert("type".into(), json!("function"));
    map.insert("function".into(), json!(f.function));
    if let Some(file) = &f.file {
        map.insert("file".into(), json!(file));
    }
    if let Some(line) = f.line {
        map.insert("line".into(), json!(line));
    }
    if !f.module.is_empty() {
        map.insert("module".into(), json!(f.module));
    }
    Value::Object(map)
}

/// `{"name", "type": "object", "kind", "site"}` of data object `o`.
fn object_attrs(db: &Database, o: u32) -> Value {
    let Some(obj) = db.objects.get(o as usize) else {
        return json!({"name": format!("<object {o}>"), "type": "object"});
    };
    let mut map = Map::new();
    map.insert("name".into(), json!(obj.name));
    map.insert("type".into(), json!("object"));
    map.insert("kind".into(), json!(obj.kind.as_str()));
    if let Some(site) = obj.site_frame().and_then(|f| db.frames.get(f as usize)) {
        map.insert("site".into(), json!(site.site_text()));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::{DataObject, ObjectKind, TreeNode};
    use crate::measurement::MetricInfo;

    fn node(parent: u32, kind: NodeKind, samples: u64) -> TreeNode {
        TreeNode {
            parent,
            kind,
            exclusive: vec![samples],
            threads: None,
            ranks: None,
            by_rank: Vec::new(),
        }
    }

    fn frame(function: &str, line: u32) -> Frame {
        Frame {
            function: function.into(),
            file: Some("/src/p.c".into()),
            line: Some(line),
            module: "/bin/p".into(),
            inlined: false,
            offset: None,
        }
    }

    /// main -> {work (9 samples), init (1)}; objects X (9) and Y (1)
    /// accessed from those lines.
    fn db() -> Database {
        let mut db = Database::default();
        db.info.metrics.push(MetricInfo {
            name: "samples".into(),
            ..Default::default()
        });
        db.frames = vec![frame("main", 3), frame("work", 10), frame("init", 20)];
        db.code.nodes.push(node(0, NodeKind::Frame(0), 0));
        db.code.nodes.push(node(1, NodeKind::Frame(2), 1));
        db.code.nodes.push(node(1, NodeKind::Frame(1), 9));
        // The heap root above the objects, as hpcprof-rs writes it.
        db.data
            .nodes
            .push(node(0, NodeKind::Root("heap".into()), 0));
        for (o, (name, f, samples)) in [("Y", 2, 1), ("X", 1, 9)].into_iter().enumerate() {
            db.data.nodes.push(node(1, NodeKind::Object(o as u32), 0));
            let obj = db.data.nodes.len() as u32 - 1;
            db.data.nodes.push(node(obj, NodeKind::Frame(0), 0));
            let main = db.data.nodes.len() as u32 - 1;
            db.data.nodes.push(node(main, NodeKind::Frame(f), samples));
            db.objects.push(DataObject {
                kind: ObjectKind::Heap,
                name: name.into(),
                node: obj,
                ..Default::default()
            });
        }
        db.validate().unwrap();
        db
    }

    #[test]
    fn code_tree_as_a_literal() {
        let v: Value = serde_json::from_str(&to_literal(&db(), Tree::Code, None)).unwrap();
        let roots = v.as_array().unwrap();
        assert_eq!(roots.len(), 1);
        let main = &roots[0];
        assert_eq!(main["frame"]["name"], "main (p.c:3)");
        assert_eq!(main["frame"]["function"], "main");
        assert_eq!(main["frame"]["type"], "function");
        assert_eq!(main["frame"]["file"], "/src/p.c");
        assert_eq!(main["frame"]["line"], 3);
        assert_eq!(main["metrics"]["samples (inc)"], 10);
        assert_eq!(main["metrics"]["samples"], 0);
        // Hottest child first; leaves have no children key.
        let work = &main["children"][0];
        assert_eq!(work["frame"]["name"], "work (p.c:10)");
        assert_eq!(work["metrics"]["samples"], 9);
        assert!(work.get("children").is_none());
        assert_eq!(main["children"][1]["frame"]["name"], "init (p.c:20)");
    }

    /// Lines of one function under one caller (`main` calling at two
    /// lines, two top frames of one function) are told apart by their
    /// names, and siblings and roots are ordered by value, largest first,
    /// whatever their names and database order.
    #[test]
    fn siblings_of_one_function_have_distinct_names_and_value_order() {
        let mut db = db();
        let at = db.frames.len() as u32;
        db.frames.extend([
            frame("main", 4),
            frame("main", 5),
            frame("step", 30),
            Frame {
                file: None,
                line: None,
                ..frame("start", 0)
            },
        ]);
        // A second root (main at line 4, 20 samples) after the first
        // (main at line 3, 10): hotter, so first.
        let r = db.code.nodes.len() as u32;
        db.code.nodes.push(node(0, NodeKind::Frame(at), 0));
        db.code.nodes.push(node(r, NodeKind::Frame(at + 2), 20));
        // Below main:3, main's line 5 (3 samples) next to work (9) and
        // init (1).
        db.code.nodes.push(node(1, NodeKind::Frame(at + 1), 3));
        // A third root without a file: the function alone.
        db.code.nodes.push(node(0, NodeKind::Frame(at + 3), 2));
        db.validate().unwrap();
        let v: Value = serde_json::from_str(&to_literal(&db, Tree::Code, None)).unwrap();
        let names = |list: &Value| -> Vec<String> {
            list.as_array()
                .unwrap()
                .iter()
                .map(|n| n["frame"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(&v), ["main (p.c:4)", "main (p.c:3)", "start"]);
        assert_eq!(
            names(&v[1]["children"]),
            ["work (p.c:10)", "main (p.c:5)", "init (p.c:20)"]
        );
        for root in v.as_array().unwrap() {
            assert_eq!(
                root["frame"]["function"],
                root["frame"]["name"]
                    .as_str()
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
            );
        }
    }

    #[test]
    fn data_tree_is_object_first() {
        let v: Value = serde_json::from_str(&to_literal(&db(), Tree::Data, None)).unwrap();
        let roots = v.as_array().unwrap();
        let names: Vec<&str> = roots
            .iter()
            .map(|r| r["frame"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["X", "Y"]);
        let x = &roots[0];
        assert_eq!(x["frame"]["type"], "object");
        assert_eq!(x["frame"]["kind"], "heap");
        assert_eq!(x["metrics"]["samples (inc)"], 9);
        assert_eq!(x["metrics"]["samples"], 0);
        assert_eq!(x["children"][0]["frame"]["name"], "main (p.c:3)");
        assert_eq!(
            x["children"][0]["children"][0]["frame"]["name"],
            "work (p.c:10)"
        );
        assert_eq!(x["children"][0]["children"][0]["metrics"]["samples"], 9);
        let top: Value = serde_json::from_str(&to_literal(&db(), Tree::Data, Some(1))).unwrap();
        assert_eq!(top.as_array().unwrap().len(), 1);
    }
}
