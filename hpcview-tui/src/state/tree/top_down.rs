//! The top-down outline: the code-centric tree (root -> call path ->
//! sampled line).

use formats::database::Tree;

use super::{code_mem, label_tree_node, Item, Model, Node, Outline, Pane};

/// [`super::PaneKind::TopDown`].
pub(super) struct TopDown;

impl Outline for TopDown {
    fn roots(&self, pane: &mut Pane, model: &Model) -> Vec<u32> {
        model
            .code
            .children(0)
            .iter()
            .map(|&c| pane.push(model, Node::Code(c), None))
            .collect()
    }

    fn fill(&self, _pane: &Pane, model: &Model, item: &mut Item) {
        let node = item.node;
        if let Node::Code(n) = node {
            let kind = &model.db.code.nodes[n as usize].kind;
            item.inc = model.code.inclusive(n).to_vec();
            item.exc = model.code.exclusive(n).to_vec();
            item.mem = code_mem(model, &item.inc);
            item.expandable = !model.code.children(n).is_empty();
            item.dist_node = Some(node);
            label_tree_node(model, kind, item);
        }
    }

    fn children(&self, pane: &mut Pane, model: &Model, id: u32) -> Vec<u32> {
        let mut kids: Vec<u32> = Vec::new();
        if let Node::Code(n) = pane.items[id as usize].node {
            for &c in model.code.children(n) {
                kids.push(pane.push(model, Node::Code(c), Some(id)));
            }
        }
        kids
    }

    fn tree<'m>(&self, model: &'m Model) -> Option<&'m Tree> {
        Some(&model.db.code)
    }
}
