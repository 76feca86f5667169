//! The data outline: data objects, object first; a heap object expands
//! into "allocated at" (its allocation path, root first) and then its
//! access call paths. An object row's exclusive value is all of its
//! accesses (equal to its inclusive value); an access-path row's is the
//! samples at that line, as in the code-centric tree.
//!
//! Heap objects of one name and allocation site reached by several call
//! paths are one row ([`Model::row_objects`]), as in `--report`: its
//! values are theirs summed, and it expands into each one's allocation
//! path and access paths.

use formats::database::{Frame, Tree};

use super::{frame_label, label_tree_node, object_tag, Item, Model, Node, Outline, Pane};

/// [`super::PaneKind::Data`].
pub(super) struct Data;

impl Outline for Data {
    fn roots(&self, pane: &mut Pane, model: &Model) -> Vec<u32> {
        (0..model.db.objects.len() as u32)
            .filter(|&o| model.row_of[o as usize] == o)
            .map(|o| pane.push(model, Node::Object(o), None))
            .collect()
    }

    fn fill(&self, _pane: &Pane, model: &Model, item: &mut Item) {
        let node = item.node;
        match node {
            Node::Data(n) => {
                let kind = &model.db.data.nodes[n as usize].kind;
                item.inc = model.data.inclusive(n).to_vec();
                item.exc = model.data.exclusive(n).to_vec();
                item.mem = model.data_proxy(n);
                item.expandable = !model.data.children(n).is_empty();
                item.dist_node = Some(node);
                label_tree_node(model, kind, item);
            }
            Node::Object(o) => {
                let obj = &model.db.objects[o as usize];
                let members = model.row_objects(o);
                let mut inc = model.data.inclusive(obj.node).to_vec();
                for &m in &members[1..] {
                    let node = model.db.objects[m as usize].node;
                    for (a, b) in inc.iter_mut().zip(model.data.inclusive(node)) {
                        *a += b;
                    }
                }
                item.inc = inc;
                // An object's own cost is every access to it: no other
                // object lies below it (the tree node itself carries
                // none, its access paths do). Rows below keep the tree's
                // meaning: the samples at that line.
                item.exc = item.inc.clone();
                item.mem = model.object_mem[o as usize];
                item.expandable = members.iter().any(|&m| {
                    let obj = &model.db.objects[m as usize];
                    !obj.alloc_path.is_empty() || !model.data.children(obj.node).is_empty()
                });
                item.label = obj.name.clone();
                item.site = obj
                    .site_frame()
                    .map(|f| short_site(&model.db.frames[f as usize]));
                item.tag = object_tag(obj.kind, &obj.name);
                item.object = Some(o);
                item.dist_node = Some(Node::Data(obj.node));
                item.frame = obj.site_frame().or(obj.alloc_path.last().copied());
            }
            Node::AllocPath(o) => {
                let n = model.db.objects[o as usize].alloc_path.len();
                let row = model.row_objects(model.row_of[o as usize]);
                let which = match row.iter().position(|&m| m == o) {
                    Some(k) if row.len() > 1 => format!("call path {} of {}, ", k + 1, row.len()),
                    _ => String::new(),
                };
                item.label = format!(
                    "allocated at ({which}{n} frame{}, root first)",
                    if n == 1 { "" } else { "s" }
                );
                item.expandable = n > 0;
                item.object = Some(o);
                item.frame = model.db.objects[o as usize].alloc_path.last().copied();
            }
            Node::AllocFrame { object, index } => {
                let f = model.db.objects[object as usize].alloc_path[index as usize];
                item.label = frame_label(model, f);
                item.frame = Some(f);
                item.object = Some(object);
            }
            Node::Code(_) | Node::Group(_) | Node::Line(_) => {}
        }
    }

    fn children(&self, pane: &mut Pane, model: &Model, id: u32) -> Vec<u32> {
        let mut kids: Vec<u32> = Vec::new();
        match pane.items[id as usize].node {
            Node::Data(n) => {
                for &c in model.data.children(n) {
                    kids.push(pane.push(model, Node::Data(c), Some(id)));
                }
            }
            Node::Object(o) => {
                let members = model.row_objects(o);
                for &m in members {
                    if !model.db.objects[m as usize].alloc_path.is_empty() {
                        kids.push(pane.push(model, Node::AllocPath(m), Some(id)));
                    }
                }
                for &m in members {
                    for &c in model.data.children(model.db.objects[m as usize].node) {
                        kids.push(pane.push(model, Node::Data(c), Some(id)));
                    }
                }
            }
            Node::AllocPath(o) => {
                let n = model.db.objects[o as usize].alloc_path.len() as u32;
                for index in 0..n {
                    kids.push(pane.push(model, Node::AllocFrame { object: o, index }, Some(id)));
                }
            }
            Node::AllocFrame { .. } | Node::Code(_) | Node::Group(_) | Node::Line(_) => {}
        }
        kids
    }

    fn tree<'m>(&self, model: &'m Model) -> Option<&'m Tree> {
        Some(&model.db.data)
    }
}

/// information `AtomVec::grow+0x1cd` (parameters left out).
fn short_site(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => {
            format!("{}:{line}", file.rsplit('/').next().unwrap_or(file))
        }
        _ => {
            let bare = f.function.split('(').next().unwrap_or(&f.function);
            match f.offset {
                Some(off) => format!("{bare}+0x{off:x}"),
                None => bare.to_string(),
            }
        }
    }
}
