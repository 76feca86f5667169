//! The flat outline: every function, expanding into its sampled lines.

use formats::database::NodeKind;

use super::{basename, code_mem, functions, Item, Model, Node, Outline, Pane};

/// [`super::PaneKind::Flat`].
pub(super) struct Flat;

impl Outline for Flat {
    fn roots(&self, pane: &mut Pane, model: &Model) -> Vec<u32> {
        functions::roots(pane, model)
    }

    fn fill(&self, pane: &Pane, model: &Model, item: &mut Item) {
        match item.node {
            Node::Group(g) => functions::fill_group(pane, model, item, g, |_| true),
            Node::Line(g) => {
                let cols = model.columns;
                let group = &pane.groups[g as usize];
                let mut exc = vec![0u64; cols];
                for &(inst, _) in &group.insts {
                    for (a, v) in exc.iter_mut().zip(model.code.exclusive(inst)) {
                        *a += v;
                    }
                }
                let (inst, _) = group.insts[0];
                if let NodeKind::Frame(f) = model.db.code.nodes[inst as usize].kind {
                    let frame = &model.db.frames[f as usize];
                    item.label = match (&frame.file, frame.line) {
                        (Some(file), Some(line)) => format!("{}:{line}", basename(file)),
                        (Some(file), None) => basename(file).to_string(),
                        _ => "(no line information)".to_string(),
                    };
                    item.frame = Some(f);
                }
                item.tag = "line";
                item.mem = code_mem(model, &exc);
                item.inc = exc.clone();
                item.exc = exc;
            }
            _ => {}
        }
    }

    fn children(&self, pane: &mut Pane, model: &Model, id: u32) -> Vec<u32> {
        let Node::Group(g) = pane.items[id as usize].node else {
            return Vec::new();
        };
        // The sampled lines: instances with exclusive values by file and
        // line.
        let bucket = |inst: u32, at: u32| {
            let NodeKind::Frame(f) = model.db.code.nodes[inst as usize].kind else {
                return None;
            };
            if model.code.exclusive(inst).iter().all(|&v| v == 0) {
                return None;
            }
            let fr = &model.db.frames[f as usize];
            // Lines of one function: same file and line.
            let file = fr.file.as_deref().unwrap_or("");
            Some(((hash_str(file), u64::from(fr.line.unwrap_or(0))), at))
        };
        functions::children(pane, model, id, g, bucket, Node::Line)
    }
}

fn hash_str(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}
