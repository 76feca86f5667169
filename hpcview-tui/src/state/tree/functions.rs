//! What the bottom-up and the flat outlines share: their rows are groups of
//! instances of a function in the code-centric tree; the top-level rows are
//! every sampled function, a group's values the sum over its instances
//! (inclusive values counted once under recursion).

use std::collections::HashMap;

use formats::database::NodeKind;

use super::{code_mem, Item, Model, Node, Pane};

/// function in the code tree (`inst`) seen at ancestor `at`.
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub(super) insts: Vec<(u32, u32)>,
}

/// The top-level rows: one group per function that has a sampled instance.
pub(super) fn roots(pane: &mut Pane, model: &Model) -> Vec<u32> {
    pane.nested = nested_instances(model);
    let mut by_function: Vec<Vec<(u32, u32)>> = vec![Vec::new(); model.functions];
    for (i, &func) in model.code_function.iter().enumerate() {
        if func != u32::MAX {
            by_function[func as usize].push((i as u32, i as u32));
        }
    }
    let mut roots = Vec::new();
    for insts in by_function.into_iter().filter(|v| !v.is_empty()) {
        let g = pane.groups.len() as u32;
        pane.groups.push(Group { insts });
        let id = pane.push(model, Node::Group(g), None);
        if pane.items[id as usize].inc.iter().any(|&v| v > 0) {
            roots.push(id);
        }
    }
    roots
}

/// The row of group `g` (a function, or a caller below one); `expands`
/// says whether the instance seen at a code node has children rows.
pub(super) fn fill_group(
    pane: &Pane,
    model: &Model,
    item: &mut Item,
    g: u32,
    expands: impl Fn(u32) -> bool,
) {
    let parent = item.parent;
    let cols = model.columns;
    let group = &pane.groups[g as usize];
    let mut inc = vec![0u64; cols];
    let mut exc = vec![0u64; cols];
    let mut expandable = false;
    for &(inst, at) in &group.insts {
        if !pane.nested[inst as usize] {
            for (a, v) in inc.iter_mut().zip(model.code.inclusive(inst)) {
                *a += v;
            }
        }
        for (a, v) in exc.iter_mut().zip(model.code.exclusive(inst)) {
            *a += v;
        }
        if !expandable {
            expandable = expands(at);
        }
    }
    let (inst, at) = group.insts[0];
    // Label: the function at `at` (a caller) or of the instance.
    let shown = if parent.is_some() { at } else { inst };
    if let NodeKind::Frame(f) = model.db.code.nodes[shown as usize].kind {
        let frame = &model.db.frames[f as usize];
        item.label = frame.function.clone();
        item.frame = Some(f);
    }
    item.tag = if parent.is_some() { "caller" } else { "fn" };
    item.mem = code_mem(model, &inc);
    if parent.is_none() {
        // A function: the shared rule (exclusive values).
        if let Some(f) = item.frame {
            item.mem = model.function_bottleneck[model.frame_function[f as usize] as usize];
            item.exclusive_share = true;
        }
    }
    item.inc = inc;
    item.exc = exc;
    item.expandable = expandable;
}

/// The rows below group `g` (item `id`): its instances bucketed by
/// `bucket` (instance, code node seen at -> key and the code node the
/// new group sees them at; None leaves the instance out), one new group
/// per key in order of first appearance, each a row `node(group)`.
pub(super) fn children(
    pane: &mut Pane,
    model: &Model,
    id: u32,
    g: u32,
    bucket: impl Fn(u32, u32) -> Option<((u64, u64), u32)>,
    node: impl Fn(u32) -> Node,
) -> Vec<u32> {
    let mut kids: Vec<u32> = Vec::new();
    let insts = pane.groups[g as usize].insts.clone();
    let mut order: Vec<(u64, u64)> = Vec::new();
    let mut buckets: HashMap<(u64, u64), Vec<(u32, u32)>> = HashMap::new();
    for (inst, at) in insts {
        let Some((key, at)) = bucket(inst, at) else {
            continue;
        };
        buckets
            .entry(key)
            .or_insert_with(|| {
                order.push(key);
                Vec::new()
            })
            .push((inst, at));
    }
    for key in order {
        let insts = buckets.remove(&key).unwrap_or_default();
        let g = pane.groups.len() as u32;
        pane.groups.push(Group { insts });
        kids.push(pane.push(model, node(g), Some(id)));
    }
    kids
}

/// For every code node: does an ancestor belong to the same function?
fn nested_instances(model: &Model) -> Vec<bool> {
    let funcs = &model.code_function;
    let mut nested = vec![false; funcs.len()];
    let mut active = vec![0u32; model.functions];
    // Iterative DFS with enter/exit events, on the compact arrays.
    let mut stack: Vec<(u32, bool)> = vec![(0, false)];
    while let Some((n, exit)) = stack.pop() {
        let func = funcs[n as usize];
        if exit {
            if func != u32::MAX {
                active[func as usize] -= 1;
            }
            continue;
        }
        if func != u32::MAX {
            nested[n as usize] = active[func as usize] > 0;
            active[func as usize] += 1;
            stack.push((n, true));
        }
        for &c in model.code.children(n).iter().rev() {
            stack.push((c, false));
        }
    }
    nested
}
