//! One pane's outline: items materialised on demand from the [`Model`],
//! expansion, sorting of siblings, flattening into visible rows, selection
//! and search. No terminal involved.
//!
//! The four outlines:
//!
//! * [`PaneKind::TopDown`]: the code-centric tree (root -> call path ->
//!   sampled line);
//! * [`PaneKind::BottomUp`]: callers: every function, expanding into the
//!   functions that called it (inclusive = the function's cost when called
//!   from there, recursion counted once);
//! * [`PaneKind::Flat`]: every function, expanding into its sampled lines;
//! * [`PaneKind::Data`]: data objects, object first; a heap object expands
//!   into "allocated at" (its allocation path, root first) and then its
//!   access call paths.
//!
//! [`Pane`] holds what is common (items, expansion, sorting, flattening,
//! selection, search); what differs, the top-level rows, the rows an
//! item stands for and their children, is one [`Outline`] per file:
//! `top_down`, `data`, and `bottom_up` and `flat` over the function groups
//! of `functions`.
//!
//! A pane made with [`Pane::with_runtime_hidden`] leaves out the rows of
//! MPI libraries and OpenMP runtimes (the viewer's `H`): objects a runtime
//! allocated and functions of a runtime's modules are dropped; a runtime
//! frame inside a call path (libgomp's thread start above an OpenMP
//! region's body, `MPI_Recv` above the transport) is replaced by the rows
//! below it, so the program's own code stays in view. Shares stay shares
//! of the whole run.
//!
//! ```
//! use hpcview_tui::state::{model::Model, tree::{Pane, PaneKind}};
//! let model = Model::new(hpcview_tui::fixtures::abc(), None);
//! let pane = Pane::new(&model, PaneKind::Data);
//! assert_eq!(pane.items[pane.visible[0] as usize].label, "C");
//! assert!((pane.share(&model, pane.visible[0]) - 0.9).abs() < 1e-9);
//! ```

mod bottom_up;
mod data;
mod flat;
mod functions;
mod top_down;

use std::cmp::Ordering;

use formats::database::{NodeKind, ObjectKind, Tree};

use super::bottleneck::{self, ratio, Bottleneck};
use super::model::Model;
use functions::Group;

/// Which outline a pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaneKind {
    TopDown,
    BottomUp,
    Flat,
    Data,
}

impl PaneKind {
    pub fn title(self) -> &'static str {
        match self {
            PaneKind::TopDown => "Code-centric: top-down",
            PaneKind::BottomUp => "Code-centric: bottom-up (callers)",
            PaneKind::Flat => "Code-centric: flat (function, line)",
            PaneKind::Data => "Data-centric: objects",
        }
    }

    /// The outline this pane shows.
    fn outline(self) -> &'static dyn Outline {
        match self {
            PaneKind::TopDown => &top_down::TopDown,
            PaneKind::BottomUp => &bottom_up::BottomUp,
            PaneKind::Flat => &flat::Flat,
            PaneKind::Data => &data::Data,
        }
    }
}

/// What differs between the outlines.
trait Outline {
    /// The top-level rows (not sorted yet).
    fn roots(&self, pane: &mut Pane, model: &Model) -> Vec<u32>;
    /// Metrics, label and links of a new `item` (its node, parent and depth
    /// are set).
    fn fill(&self, pane: &Pane, model: &Model, item: &mut Item);
    /// Creates the rows below item `id` (not sorted yet).
    fn children(&self, pane: &mut Pane, model: &Model, id: u32) -> Vec<u32>;
    /// The tree whose nodes the rows stand for, for the search index; None
    /// when only the materialised rows and the roots are searched.
    fn tree<'m>(&self, _model: &'m Model) -> Option<&'m Tree> {
        None
    }
}

/// What an item stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// A code-centric tree node.
    Code(u32),
    /// A data-centric tree node (access path below an object).
    Data(u32),
    /// A data object (index into `Database::objects`).
    Object(u32),
    /// "allocated at": the allocation path of an object.
    AllocPath(u32),
    /// Frame `index` of object `object`'s allocation path.
    AllocFrame { object: u32, index: u32 },
    /// A function (bottom-up or flat root) or a caller (bottom-up).
    Group(u32),
    /// A line of a function (flat).
    Line(u32),
}

/// One row of an outline.
#[derive(Debug, Clone)]
pub struct Item {
    pub node: Node,
    pub parent: Option<u32>,
    pub depth: u16,
    /// None until materialised.
    pub children: Option<Vec<u32>>,
    pub expanded: bool,
    /// False when the item has no children for sure.
    pub expandable: bool,
    pub label: String,
    /// Heap objects: where the application allocated them, shown dimmed
    /// after the label (`abc.c:32`, `AtomVec::grow+0x1cd`).
    pub site: Option<String>,
    /// Short kind tag shown before the label (`heap`, `static`, ...).
    pub tag: &'static str,
    /// Inclusive values (empty for rows without metrics).
    pub inc: Vec<u64>,
    /// Exclusive values.
    pub exc: Vec<u64>,
    /// Memory-boundness proxy.
    pub mem: Option<f64>,
    /// Frame for the source pane.
    pub frame: Option<u32>,
    /// Data object, for the detail pane.
    pub object: Option<u32>,
    /// Tree node whose thread/rank distribution applies.
    pub dist_node: Option<Node>,
    /// The bottleneck share is the exclusive one (function rows, as in
    /// `hpcprof-rs export --view bottleneck`).
    pub exclusive_share: bool,
    /// An MPI or OpenMP runtime's row: an object the runtime allocated, or
    /// a frame in a runtime's module.
    pub runtime: bool,
}

impl Item {
    /// Whether this row has metric values.
    pub fn has_metrics(&self) -> bool {
        !self.inc.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Column {
    pub metric: usize,
    pub exclusive: bool,
}

/// What siblings are sorted by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SortKey {
    Column(Column),
    Name,
    /// Bottleneck priority score (`mem x share`).
    Bottleneck,
}

/// Sort order of siblings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

#[derive(Debug)]
pub struct Pane {
    pub kind: PaneKind,
    pub items: Vec<Item>,
    pub roots: Vec<u32>,
    groups: Vec<Group>,
    /// Items of the rows on screen, in order.
    pub visible: Vec<u32>,
    /// Index into `visible`.
    pub selected: usize,
    /// First row shown.
    pub offset: usize,
    /// Totals for percentages (inclusive values of the tree's root).
    pub totals: Vec<u64>,
    /// Bottom-up/flat: whether a code node has an ancestor of the same
    /// function (its inclusive value is already counted).
    nested: Vec<bool>,
    sort: Option<Sort>,
    /// Runtime rows are left out (see the module's overview).
    pub hide_runtime: bool,
}

fn basename(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// `function file:line` with the file's base name.
pub fn frame_label(model: &Model, f: u32) -> String {
    let Some(frame) = model.db.frames.get(f as usize) else {
        return format!("<frame {f}>");
    };
    match (&frame.file, frame.line) {
        (Some(file), Some(line)) => format!("{}  {}:{line}", frame.function, basename(file)),
        (Some(file), None) => format!("{}  {}", frame.function, basename(file)),
        _ => frame.function.clone(),
    }
}

fn object_tag(kind: ObjectKind, name: &str) -> &'static str {
    match kind {
        ObjectKind::Heap if name.starts_with('<') => "small",
        ObjectKind::Heap => "heap",
        ObjectKind::Static => "static",
        ObjectKind::Stack => "stack",
        ObjectKind::Unknown => "unknown",
    }
}

/// Memory-boundness proxy of code-centric values: `samples / cpu_samples`.
fn code_mem(model: &Model, inc: &[u64]) -> Option<f64> {
    model
        .cpu_metric
        .and_then(|c| ratio(inc[model.primary], inc[c], true))
}

/// Label, tag and links of a code or data tree node's row.
fn label_tree_node(model: &Model, kind: &NodeKind, item: &mut Item) {
    match kind {
        NodeKind::Root(name) => {
            item.label = if name.is_empty() {
                "<root>".into()
            } else {
                name.clone()
            };
            item.tag = "root";
        }
        NodeKind::Frame(f) => {
            item.label = frame_label(model, *f);
            item.frame = Some(*f);
            item.tag = if model.db.frames[*f as usize].inlined {
                "inl"
            } else {
                ""
            };
        }
        NodeKind::Object(o) => {
            let obj = &model.db.objects[*o as usize];
            item.label = obj.name.clone();
            item.tag = object_tag(obj.kind, &obj.name);
            item.object = Some(*o);
        }
    }
}

impl Pane {
    /// The outline's top-level rows, sorted by the primary metric.
    pub fn new(model: &Model, kind: PaneKind) -> Self {
        Pane::build(model, kind, false)
    }

    /// [`Pane::new`] without the rows of MPI libraries and OpenMP runtimes.
    pub fn with_runtime_hidden(model: &Model, kind: PaneKind) -> Self {
        Pane::build(model, kind, true)
    }

    fn build(model: &Model, kind: PaneKind, hide_runtime: bool) -> Self {
        let totals = match kind {
            PaneKind::Data => model.data.inclusive(0).to_vec(),
            _ => model.code.inclusive(0).to_vec(),
        };
        let mut pane = Pane {
            kind,
            items: Vec::new(),
            roots: Vec::new(),
            groups: Vec::new(),
            visible: Vec::new(),
            selected: 0,
            offset: 0,
            totals,
            nested: Vec::new(),
            sort: None,
            hide_runtime,
        };
        let roots = kind.outline().roots(&mut pane, model);
        pane.roots = pane.without_runtime(model, roots, None);
        pane.set_sort(
            model,
            Sort {
                key: SortKey::Column(Column {
                    metric: model.primary,
                    exclusive: false,
                }),
                descending: true,
            },
        );
        pane
    }

    /// Creates an item (metrics, label) for `node`.
    fn push(&mut self, model: &Model, node: Node, parent: Option<u32>) -> u32 {
        let depth = parent.map_or(0, |p| self.items[p as usize].depth + 1);
        let mut item = Item {
            node,
            parent,
            depth,
            children: None,
            expanded: false,
            expandable: false,
            label: String::new(),
            site: None,
            tag: "",
            inc: Vec::new(),
            exc: Vec::new(),
            mem: None,
            frame: None,
            object: None,
            dist_node: None,
            exclusive_share: false,
            runtime: false,
        };
        self.kind.outline().fill(self, model, &mut item);
        let runtime_frame = |f: Option<u32>| {
            f.and_then(|f| model.runtime_frame.get(f as usize))
                .copied()
                .unwrap_or(false)
        };
        item.runtime = match item.node {
            Node::Object(o) => model.db.objects[o as usize].runtime.is_some(),
            Node::Code(_) | Node::Data(_) | Node::Group(_) => runtime_frame(item.frame),
            Node::AllocPath(_) | Node::AllocFrame { .. } | Node::Line(_) => false,
        };
        let id = self.items.len() as u32;
        self.items.push(item);
        id
    }

    /// Creates the children of `id` (once), sorted.
    pub fn materialize(&mut self, model: &Model, id: u32) {
        if self.items[id as usize].children.is_some() {
            return;
        }
        let kids = self.kind.outline().children(self, model, id);
        let mut kids = self.without_runtime(model, kids, Some(id));
        self.items[id as usize].expandable = !kids.is_empty();
        if let Some(sort) = self.sort {
            self.sort_ids(model, &mut kids, sort);
        }
        self.items[id as usize].children = Some(kids);
    }

    /// `rows` (children of `parent`, or the top level) without runtime
    /// rows when they are hidden: an object or a function (a top-level
    /// group) of a runtime is dropped, a runtime frame in a call path is
    /// replaced by the rows below it (repeatedly), which become `parent`'s.
    fn without_runtime(&mut self, model: &Model, rows: Vec<u32>, parent: Option<u32>) -> Vec<u32> {
        if !self.hide_runtime {
            return rows;
        }
        let depth = parent.map_or(0, |p| self.items[p as usize].depth + 1);
        let mut out = Vec::with_capacity(rows.len());
        let mut todo: Vec<u32> = rows.into_iter().rev().collect();
        while let Some(id) = todo.pop() {
            let item = &self.items[id as usize];
            if !item.runtime {
                let item = &mut self.items[id as usize];
                item.parent = parent;
                item.depth = depth;
                out.push(id);
                continue;
            }
            let splice = match item.node {
                Node::Code(_) | Node::Data(_) => true,
                Node::Group(_) => item.parent.is_some(),
                _ => false,
            };
            if splice {
                let below = self.kind.outline().children(self, model, id);
                todo.extend(below.into_iter().rev());
            }
        }
        out
    }

    /// Share of item `id`'s inclusive primary value in the pane's total.
    pub fn share(&self, model: &Model, id: u32) -> f64 {
        let item = &self.items[id as usize];
        let total = self.totals.get(model.primary).copied().unwrap_or(0);
        let vals = if item.exclusive_share {
            &item.exc
        } else {
            &item.inc
        };
        let v = vals.get(model.primary).copied().unwrap_or(0);
        if total == 0 {
            0.0
        } else {
            v as f64 / total as f64
        }
    }

    /// The bottleneck figures of item `id`.
    pub fn bottleneck(&self, model: &Model, id: u32) -> Bottleneck {
        bottleneck::classify(self.items[id as usize].mem, self.share(model, id))
    }

    fn sort_ids(&self, model: &Model, ids: &mut [u32], sort: Sort) {
        let cmp = |a: &u32, b: &u32| -> Ordering {
            let (ia, ib) = (&self.items[*a as usize], &self.items[*b as usize]);
            // Rows without metrics (allocation paths) stay first, in order.
            match (ia.has_metrics(), ib.has_metrics()) {
                (false, false) => return a.cmp(b),
                (false, true) => return Ordering::Less,
                (true, false) => return Ordering::Greater,
                _ => {}
            }
            let primary = |i: &Item| i.inc.get(model.primary).copied().unwrap_or(0);
            let ord = match sort.key {
                SortKey::Name => ia.label.cmp(&ib.label),
                SortKey::Column(c) => {
                    let v = |i: &Item| {
                        let vals = if c.exclusive { &i.exc } else { &i.inc };
                        vals.get(c.metric).copied().unwrap_or(0)
                    };
                    // Ties: by the other of inclusive/exclusive.
                    let w = |i: &Item| {
                        let vals = if c.exclusive { &i.inc } else { &i.exc };
                        vals.get(c.metric).copied().unwrap_or(0)
                    };
                    v(ia).cmp(&v(ib)).then_with(|| w(ia).cmp(&w(ib)))
                }
                SortKey::Bottleneck => {
                    // The shared bottleneck order (export and report
                    // too): the program's rows before the runtimes'
                    // (MPI, OpenMP), then quadrant, score and share.
                    // Descending is that order; ascending keeps the
                    // program's rows first and reverses the rest.
                    let rank = |id: u32, item: &Item| {
                        let b = self.bottleneck(model, id);
                        formats::views::BottleneckRank {
                            runtime: item.runtime,
                            quadrant: b.quadrant,
                            share: b.share,
                            mem_time_share: b.mem,
                        }
                    };
                    let (ra, rb) = (rank(*a, ia), rank(*b, ib));
                    let ord = if sort.descending {
                        formats::views::bottleneck_order(&ra, &rb)
                    } else {
                        ia.runtime
                            .cmp(&ib.runtime)
                            .then_with(|| formats::views::bottleneck_order(&rb, &ra))
                    };
                    return ord
                        .then_with(|| primary(ib).cmp(&primary(ia)))
                        .then_with(|| ia.label.cmp(&ib.label))
                        .then(a.cmp(b));
                }
            };
            let ord = if sort.descending { ord.reverse() } else { ord };
            ord.then_with(|| ia.label.cmp(&ib.label)).then(a.cmp(b))
        };
        ids.sort_by(cmp);
    }

    /// Current sort order.
    pub fn sort(&self) -> Option<Sort> {
        self.sort
    }

    /// Re-sorts every materialised sibling list; keeps the selected item.
    pub fn set_sort(&mut self, model: &Model, sort: Sort) {
        let keep = self.selected_id();
        self.sort = Some(sort);
        let mut roots = std::mem::take(&mut self.roots);
        self.sort_ids(model, &mut roots, sort);
        self.roots = roots;
        for i in 0..self.items.len() {
            if let Some(mut kids) = self.items[i].children.take() {
                self.sort_ids(model, &mut kids, sort);
                self.items[i].children = Some(kids);
            }
        }
        self.flatten();
        self.select_id(keep);
    }

    /// Recomputes `visible` from the expansion state.
    pub fn flatten(&mut self) {
        let mut out = Vec::with_capacity(self.visible.len().max(64));
        let mut stack: Vec<u32> = self.roots.iter().rev().copied().collect();
        while let Some(id) = stack.pop() {
            out.push(id);
            let item = &self.items[id as usize];
            if item.expanded {
                if let Some(kids) = &item.children {
                    stack.extend(kids.iter().rev());
                }
            }
        }
        self.visible = out;
        if self.selected >= self.visible.len() {
            self.selected = self.visible.len().saturating_sub(1);
        }
    }

    /// The selected item.
    pub fn selected_id(&self) -> Option<u32> {
        self.visible.get(self.selected).copied()
    }

    /// The selected item's row.
    pub fn selected_item(&self) -> Option<&Item> {
        self.selected_id().map(|id| &self.items[id as usize])
    }

    /// Selects `id` if it is visible.
    pub fn select_id(&mut self, id: Option<u32>) {
        if let Some(id) = id {
            if let Some(pos) = self.visible.iter().position(|&v| v == id) {
                self.selected = pos;
            }
        }
    }

    /// Moves the selection by `delta` rows (clamped).
    pub fn move_by(&mut self, delta: isize) {
        if self.visible.is_empty() {
            return;
        }
        let last = self.visible.len() - 1;
        self.selected = (self.selected as isize + delta).clamp(0, last as isize) as usize;
    }

    /// Selects the first or last row.
    pub fn select_edge(&mut self, end: bool) {
        self.selected = if end {
            self.visible.len().saturating_sub(1)
        } else {
            0
        };
    }

    /// Expands item `id`.
    pub fn expand(&mut self, model: &Model, id: u32) {
        self.materialize(model, id);
        let item = &mut self.items[id as usize];
        if item.children.as_ref().is_some_and(|c| !c.is_empty()) {
            item.expanded = true;
            self.flatten();
        }
    }

    /// Collapses item `id`.
    pub fn collapse(&mut self, id: u32) {
        if self.items[id as usize].expanded {
            self.items[id as usize].expanded = false;
            self.flatten();
            self.select_id(Some(id));
        }
    }

    /// Enter/Space: expands or collapses the selected row.
    pub fn toggle(&mut self, model: &Model) {
        if let Some(id) = self.selected_id() {
            if self.items[id as usize].expanded {
                self.collapse(id);
            } else {
                self.expand(model, id);
            }
        }
    }

    /// Right/l: expands, or moves to the first child when expanded.
    pub fn right(&mut self, model: &Model) {
        if let Some(id) = self.selected_id() {
            if self.items[id as usize].expanded {
                self.move_by(1);
            } else {
                self.expand(model, id);
            }
        }
    }

    /// Left/h: collapses, or moves to the parent when collapsed.
    pub fn left(&mut self) {
        if let Some(id) = self.selected_id() {
            if self.items[id as usize].expanded {
                self.collapse(id);
            } else if let Some(p) = self.items[id as usize].parent {
                self.select_id(Some(p));
            }
        }
    }

    /// The value the hot path compares: the inclusive primary value, or,
    /// with runtime rows hidden, the part of it that stays in view below
    /// the row (a call path node's cost outside MPI and OpenMP frames), so
    /// that the path does not follow a branch whose cost is hidden.
    fn hot_value(&self, model: &Model, item: &Item) -> u64 {
        let inc = item.inc.get(model.primary).copied().unwrap_or(0);
        if !self.hide_runtime {
            return inc;
        }
        match item.node {
            Node::Code(n) => model.code_program.get(n as usize).copied().unwrap_or(inc),
            Node::Data(n) => model.data_program.get(n as usize).copied().unwrap_or(inc),
            _ => inc,
        }
    }

    /// Expands the hottest path below the selection down to a leaf (the
    /// sampled line) and selects it: at every level the child with the
    /// largest inclusive primary value (the first shown of equals); rows
    /// without metrics (an object's "allocated at") are passed over. With
    /// runtime rows hidden the value compared is what stays in view below
    /// each child (`hot_value`). The `x` key, and how the top-down
    /// pane opens.
    pub fn expand_hot_path(&mut self, model: &Model, max_depth: usize) {
        let mut id = match self.selected_id() {
            Some(id) => id,
            None => return,
        };
        for _ in 0..max_depth {
            self.materialize(model, id);
            let kids = self.items[id as usize].children.as_deref().unwrap_or(&[]);
            let mut hottest: Option<(u32, u64)> = None;
            for &k in kids {
                let item = &self.items[k as usize];
                let value = self.hot_value(model, item);
                let hotter = match hottest {
                    None => true,
                    Some((_, best)) => value > best,
                };
                if item.has_metrics() && hotter {
                    hottest = Some((k, value));
                }
            }
            let Some((next, _)) = hottest else {
                break;
            };
            self.items[id as usize].expanded = true;
            id = next;
        }
        self.flatten();
        self.select_id(Some(id));
    }

    /// Finds the next (or previous) item whose label contains `query`
    /// (case-insensitive) in display order, expands its ancestors and
    /// selects it. Searches the whole outline, materialising only subtrees
    /// that contain a match. Returns false when nothing matches.
    pub fn search(&mut self, model: &Model, query: &str, forward: bool) -> bool {
        let q = query.to_lowercase();
        if q.is_empty() {
            return false;
        }
        let index = SearchIndex::new(model, &q, self.kind);
        let current = self.selected_id();
        let mut order: Vec<u32> = Vec::new();
        let mut hits: Vec<usize> = Vec::new();
        let mut current_pos = None;
        let mut stack: Vec<u32> = self.roots.iter().rev().copied().collect();
        while let Some(id) = stack.pop() {
            if Some(id) == current {
                current_pos = Some(order.len());
            }
            if self.items[id as usize].label.to_lowercase().contains(&q) {
                hits.push(order.len());
            }
            order.push(id);
            let descend = self.items[id as usize].children.is_some()
                || index.may_contain(model, &self.items[id as usize]);
            if descend && self.items[id as usize].expandable {
                self.materialize(model, id);
                if let Some(kids) = &self.items[id as usize].children {
                    stack.extend(kids.iter().rev());
                }
            }
        }
        if hits.is_empty() {
            return false;
        }
        let cur = current_pos.unwrap_or(0);
        let pick = if forward {
            hits.iter()
                .find(|&&h| h > cur || current_pos.is_none() && h == cur)
                .or(hits.first())
        } else {
            hits.iter().rev().find(|&&h| h < cur).or(hits.last())
        };
        let target = order[*pick.expect("hits is not empty")];
        let mut p = self.items[target as usize].parent;
        while let Some(id) = p {
            self.items[id as usize].expanded = true;
            p = self.items[id as usize].parent;
        }
        self.flatten();
        self.select_id(Some(target));
        true
    }

    /// Adjusts `offset` so that the selection is inside a window of
    /// `height` rows.
    pub fn scroll_into_view(&mut self, height: usize) {
        if height == 0 {
            return;
        }
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + height {
            self.offset = self.selected + 1 - height;
        }
        let max = self.visible.len().saturating_sub(height);
        self.offset = self.offset.min(max);
    }
}

/// Which tree nodes have a matching node in their subtree, for one query.
struct SearchIndex {
    /// Per code or data node (by pane kind).
    subtree: Vec<bool>,
    /// Per function (bottom-up / flat roots).
    objects: Vec<bool>,
}

impl SearchIndex {
    fn new(model: &Model, q: &str, kind: PaneKind) -> Self {
        let frames: Vec<bool> = (0..model.db.frames.len() as u32)
            .map(|f| frame_label(model, f).to_lowercase().contains(q))
            .collect();
        let objects: Vec<bool> = model
            .db
            .objects
            .iter()
            .map(|o| o.name.to_lowercase().contains(q))
            .collect();
        // Bottom-up and flat rows are functions, callers and lines: only
        // the materialised ones and the roots are searched.
        let Some(tree) = kind.outline().tree(model) else {
            return SearchIndex {
                subtree: Vec::new(),
                objects,
            };
        };
        let mut subtree: Vec<bool> = tree
            .nodes
            .iter()
            .map(|n| match &n.kind {
                NodeKind::Frame(f) => frames[*f as usize],
                NodeKind::Object(o) => objects[*o as usize],
                NodeKind::Root(name) => name.to_lowercase().contains(q),
            })
            .collect();
        for i in (1..tree.nodes.len()).rev() {
            if subtree[i] {
                subtree[tree.nodes[i].parent as usize] = true;
            }
        }
        SearchIndex { subtree, objects }
    }

    fn may_contain(&self, model: &Model, item: &Item) -> bool {
        let at = |n: u32| self.subtree.get(n as usize).copied().unwrap_or(false);
        match item.node {
            Node::Code(n) | Node::Data(n) => at(n),
            Node::Object(o) => model.row_objects(o).iter().any(|&m| {
                let obj = &model.db.objects[m as usize];
                self.objects[m as usize] || at(obj.node) || !obj.alloc_path.is_empty()
            }),
            Node::AllocPath(_) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
