//! The bottom-up outline (callers): every function, expanding into the
//! functions that called it (inclusive = the function's cost when called
//! from there, recursion counted once).

use formats::database::NodeKind;

use super::{functions, Item, Model, Node, Outline, Pane};

/// [`super::PaneKind::BottomUp`].
pub(super) struct BottomUp;

impl Outline for BottomUp {
    fn roots(&self, pane: &mut Pane, model: &Model) -> Vec<u32> {
        functions::roots(pane, model)
    }

    fn fill(&self, pane: &Pane, model: &Model, item: &mut Item) {
        if let Node::Group(g) = item.node {
            // A group expands when its instance has a calling function.
            functions::fill_group(pane, model, item, g, |at| {
                let p = model.db.code.nodes[at as usize].parent;
                p != u32::MAX && matches!(model.db.code.nodes[p as usize].kind, NodeKind::Frame(_))
            });
        }
    }

    fn children(&self, pane: &mut Pane, model: &Model, id: u32) -> Vec<u32> {
        let Node::Group(g) = pane.items[id as usize].node else {
            return Vec::new();
        };
        // The callers: instances by the function of their parent, seen
        // there.
        let bucket = |_inst: u32, at: u32| {
            let p = model.db.code.nodes[at as usize].parent;
            if p == u32::MAX {
                return None;
            }
            let NodeKind::Frame(f) = model.db.code.nodes[p as usize].kind else {
                return None;
            };
            Some(((u64::from(model.frame_function[f as usize]), 0), p))
        };
        functions::children(pane, model, id, g, bucket, Node::Group)
    }
}
