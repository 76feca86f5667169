//! Everything the viewer knows, as plain data: the loaded [`model::Model`],
//! one [`tree::Pane`] per outline, focus, metric columns, sort order,
//! search, the rank/thread filter, whether runtime rows are hidden, the
//! source file being shown and the optional [`baseline::Baseline`] that
//! delta columns compare with.
//! [`AppState::apply`] performs an [`Action`]; nothing here touches a
//! terminal, so all of it is unit-testable.
//!
//! ```
//! use hpcview_tui::state::{Action, AppState};
//! use hpcview_tui::state::model::Model;
//! let mut app = AppState::new(Model::new(hpcview_tui::fixtures::abc(), None));
//! app.apply(Action::DataView);
//! assert_eq!(app.pane().selected_item().unwrap().label, "C");
//! assert!(app.apply(Action::Quit));
//! ```

pub mod baseline;
pub mod bottleneck;
pub mod model;
pub mod tree;

use std::collections::HashMap;
use std::path::PathBuf;

use baseline::{Baseline, Delta};
use model::Model;
use tree::{Column, Pane, PaneKind, Sort, SortKey};

/// Which pane has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Tree,
    Source,
    Detail,
}

/// The rank/thread filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    All,
    Rank(u32),
    Thread(u32),
}

/// What the user asked for (keys are mapped to these in `app`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    /// Enter / Space
    Toggle,
    /// Right / l
    Expand,
    /// Left / h
    Collapse,
    NextPane,
    PrevPane,
    /// `c`: code-centric; again: top-down -> bottom-up -> flat.
    CodeView,
    /// `d`: data-centric.
    DataView,
    /// `b`: bottleneck-priority order (toggle); turning it on selects the
    /// first row and scrolls to the top.
    Bottleneck,
    /// `s`: sort by the next column.
    SortNext,
    /// `r`: reverse the sort order.
    SortReverse,
    /// `o`: open/close the column chooser.
    Columns,
    /// `/`
    SearchStart,
    SearchChar(char),
    SearchBackspace,
    SearchCommit,
    /// `n` / `N`
    NextMatch,
    PrevMatch,
    /// `f` / `F`: next / previous rank or thread filter.
    FilterNext,
    FilterPrev,
    /// `x`: expand the hottest path below the selection down to its leaf
    /// (the sampled line) and select it, like hpcviewer's hot-path button.
    HotPath,
    /// `H`: hide or show the rows of MPI libraries and OpenMP runtimes
    /// (their memory and their frames) in every pane.
    HideRuntime,
    /// `?`
    Help,
    /// Esc: closes a popup or cancels the search input.
    Escape,
    /// A key with no action of its own: closes the help or the column
    /// chooser, otherwise ignored.
    Other,
    Quit,
}

/// The deepest hot path `x` expands (and the top-down pane opens on).
pub const HOT_PATH_DEPTH: usize = 512;

/// The source file of the selected row.
#[derive(Debug, Clone)]
pub struct SourceView {
    /// Path as recorded in the debug info.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Where it was read from.
    pub path: Option<PathBuf>,
    /// Its lines, or why it cannot be shown.
    pub text: Result<Vec<String>, String>,
    /// First line shown (0-based) when the user scrolled; None follows the
    /// selected line.
    pub scroll: Option<usize>,
}

/// A source file read once: where from, and its lines or why not.
type CachedSource = (Option<PathBuf>, Result<Vec<String>, String>);

/// The whole viewer state.
#[derive(Debug)]
pub struct AppState {
    pub model: Model,
    panes: HashMap<PaneKind, Pane>,
    /// The outline in the main pane.
    pub view: PaneKind,
    pub focus: Focus,
    /// Every metric column and whether it is shown.
    pub columns: Vec<(Column, bool)>,
    /// The sort order chosen with `s`/`r` (restored when `b` is turned off).
    pub sort: Sort,
    pub bottleneck: bool,
    /// Search text being typed, when the search prompt is open.
    pub input: Option<String>,
    /// Last search.
    pub query: Option<String>,
    pub filter: Filter,
    pub help: bool,
    /// Column chooser cursor, when open.
    pub chooser: Option<usize>,
    /// One-line message in the status bar.
    pub message: Option<String>,
    pub source: SourceView,
    pub detail_scroll: usize,
    /// The detail pane's last scroll position (its wrapped lines beyond
    /// its height) and its height, set by the view.
    pub detail_max_scroll: usize,
    pub detail_page: usize,
    /// Rows of the tree pane (set by the view; used for PgUp/PgDn).
    pub page: usize,
    /// Lines of the source pane (set by the view; its keys scroll by it).
    pub source_page: usize,
    /// The database compared with (`--baseline`): delta columns.
    pub baseline: Option<Baseline>,
    /// Rows of MPI libraries and OpenMP runtimes are left out of every
    /// pane (`H`, `--hide-runtime`).
    pub hide_runtime: bool,
    source_cache: HashMap<String, CachedSource>,
}

impl AppState {
    /// Opens on the data-centric pane with the hottest object selected.
    pub fn new(model: Model) -> Self {
        let mut columns = Vec::new();
        for m in 0..model.columns {
            for exclusive in [false, true] {
                columns.push((
                    Column {
                        metric: m,
                        exclusive,
                    },
                    m == model.primary,
                ));
            }
        }
        let sort = Sort {
            key: SortKey::Column(Column {
                metric: model.primary,
                exclusive: false,
            }),
            descending: true,
        };
        let mut app = AppState {
            model,
            panes: HashMap::new(),
            view: PaneKind::Data,
            focus: Focus::Tree,
            columns,
            sort,
            bottleneck: false,
            input: None,
            query: None,
            filter: Filter::All,
            help: false,
            chooser: None,
            message: None,
            source: SourceView {
                file: None,
                line: None,
                path: None,
                text: Err(String::new()),
                scroll: None,
            },
            detail_scroll: 0,
            detail_max_scroll: usize::MAX,
            detail_page: 10,
            page: 10,
            source_page: 10,
            baseline: None,
            hide_runtime: false,
            source_cache: HashMap::new(),
        };
        // Every pane is built at open (the bottom-up pane walks the whole
        // code tree), so that no later keypress pays for it.
        for kind in [PaneKind::TopDown, PaneKind::BottomUp, PaneKind::Flat] {
            app.prepare(kind);
        }
        app.switch(PaneKind::Data);
        app
    }

    /// Compares every pane with `baseline` (delta columns).
    pub fn with_baseline(mut self, baseline: Baseline) -> Self {
        self.baseline = Some(baseline);
        self
    }

    /// The deltas of the rows on screen in a window of `rows` rows (after
    /// scrolling the selection into it); None without a baseline.
    pub fn visible_deltas(&mut self, rows: usize) -> Option<Vec<Option<Delta>>> {
        let pane = self
            .panes
            .get_mut(&self.view)
            .expect("the pane in view exists");
        pane.scroll_into_view(rows);
        let baseline = self.baseline.as_mut()?;
        let end = (pane.offset + rows).min(pane.visible.len());
        Some(
            pane.visible[pane.offset..end]
                .iter()
                .map(|&id| baseline.delta(&self.model, pane, id))
                .collect(),
        )
    }

    /// The delta of the selected row (None without a baseline).
    pub fn selected_delta(&mut self) -> Option<Delta> {
        let pane = &self.panes[&self.view];
        let id = pane.selected_id()?;
        self.baseline.as_mut()?.delta(&self.model, pane, id)
    }

    /// Hides (or shows) the rows of MPI libraries and OpenMP runtimes in
    /// every pane: the panes are built again (expansions are lost); the
    /// selected top-level row stays selected when it is still shown.
    pub fn set_runtime_hidden(&mut self, hide: bool) {
        self.hide_runtime = hide;
        let keep = self.pane().selected_item().map(|i| i.node);
        self.panes.clear();
        for kind in [
            PaneKind::TopDown,
            PaneKind::BottomUp,
            PaneKind::Flat,
            PaneKind::Data,
        ] {
            self.prepare(kind);
        }
        let pane = self.panes.get_mut(&self.view).expect("just built");
        let again = keep.and_then(|node| {
            pane.visible
                .iter()
                .copied()
                .find(|&id| pane.items[id as usize].node == node)
        });
        pane.select_id(again);
        self.detail_scroll = 0;
        self.switch(self.view);
        let w = &self.model.waiting;
        let share = if w.total == 0 {
            0.0
        } else {
            100.0 * (w.mpi + w.openmp) as f64 / w.total as f64
        };
        self.message = Some(if hide {
            format!("runtime rows hidden (MPI/OpenMP memory and frames; {share:.1}% of cpu samples were inside them): H shows them")
        } else {
            "runtime rows shown: H hides them".to_string()
        });
    }

    /// The pane in view.
    pub fn pane(&self) -> &Pane {
        &self.panes[&self.view]
    }

    /// The sort order in effect (bottleneck when `b` is on).
    pub fn effective_sort(&self) -> Sort {
        if self.bottleneck {
            Sort {
                key: SortKey::Bottleneck,
                descending: true,
            }
        } else {
            self.sort
        }
    }

    /// Shown metric columns.
    pub fn shown_columns(&self) -> Vec<Column> {
        self.columns
            .iter()
            .filter(|(_, shown)| *shown)
            .map(|(c, _)| *c)
            .collect()
    }

    /// Builds the pane `kind` if it does not exist yet.
    fn prepare(&mut self, kind: PaneKind) {
        if self.panes.contains_key(&kind) {
            return;
        }
        let mut pane = if self.hide_runtime {
            Pane::with_runtime_hidden(&self.model, kind)
        } else {
            Pane::new(&self.model, kind)
        };
        pane.set_sort(&self.model, self.effective_sort());
        // Open on the hottest path, like hpcviewer.
        match kind {
            PaneKind::TopDown => pane.expand_hot_path(&self.model, HOT_PATH_DEPTH),
            PaneKind::Data | PaneKind::BottomUp | PaneKind::Flat => {}
        }
        self.panes.insert(kind, pane);
    }

    fn switch(&mut self, kind: PaneKind) {
        self.view = kind;
        let sort = self.effective_sort();
        if !self.panes.contains_key(&kind) {
            self.prepare(kind);
        } else {
            let model = &self.model;
            let pane = self.panes.get_mut(&kind).expect("exists");
            if pane.sort() != Some(sort) {
                pane.set_sort(model, sort);
            }
        }
        self.sync_source();
    }

    /// Applies an action; returns true when the viewer should quit.
    pub fn apply(&mut self, action: Action) -> bool {
        self.message = None;
        if let Some(input) = &mut self.input {
            match action {
                Action::SearchChar(c) => input.push(c),
                Action::SearchBackspace => {
                    input.pop();
                }
                Action::SearchCommit => {
                    let q = self.input.take().unwrap_or_default();
                    if !q.is_empty() {
                        self.query = Some(q);
                        self.find(true, true);
                    }
                }
                Action::Escape => self.input = None,
                Action::Quit => return true,
                _ => {}
            }
            return false;
        }
        if self.help {
            // Any key closes the help; a key with an action of its own
            // (`c`, `j`, `x`, ...) then does it, so that it is not lost.
            self.help = false;
            if matches!(action, Action::Help | Action::Escape | Action::Other) {
                return false;
            }
        }
        if let Some(cursor) = self.chooser {
            let n = self.columns.len();
            match action {
                Action::Up => self.chooser = Some(cursor.saturating_sub(1)),
                Action::Down => self.chooser = Some((cursor + 1).min(n.saturating_sub(1))),
                Action::Toggle => {
                    let shown = self.columns.iter().filter(|c| c.1).count();
                    let c = &mut self.columns[cursor];
                    if c.1 && shown == 1 {
                        self.message = Some("at least one metric column stays shown".into());
                    } else {
                        c.1 = !c.1;
                    }
                }
                Action::Quit => return true,
                _ => self.chooser = None,
            }
            return false;
        }
        let page = self.page.max(1) as isize;
        match action {
            Action::Quit => return true,
            Action::Help => self.help = true,
            Action::Escape | Action::Other => {}
            Action::HideRuntime => self.set_runtime_hidden(!self.hide_runtime),
            Action::HotPath => {
                self.focus = Focus::Tree;
                let model = &self.model;
                let pane = self.panes.get_mut(&self.view).expect("exists");
                pane.expand_hot_path(model, HOT_PATH_DEPTH);
                self.detail_scroll = 0;
                self.sync_source();
            }
            Action::NextPane | Action::PrevPane => {
                let order = [Focus::Tree, Focus::Source, Focus::Detail];
                let i = order.iter().position(|f| *f == self.focus).unwrap_or(0);
                let step = if action == Action::NextPane { 1 } else { 2 };
                self.focus = order[(i + step) % 3];
            }
            Action::CodeView => {
                let next = match self.view {
                    PaneKind::TopDown => PaneKind::BottomUp,
                    PaneKind::BottomUp => PaneKind::Flat,
                    PaneKind::Flat | PaneKind::Data => PaneKind::TopDown,
                };
                self.focus = Focus::Tree;
                self.switch(next);
            }
            Action::DataView => {
                self.focus = Focus::Tree;
                self.switch(PaneKind::Data);
            }
            Action::Bottleneck => {
                self.bottleneck = !self.bottleneck;
                if self.bottleneck && self.model.cpu_metric.is_none() {
                    self.message =
                        Some("no cpu_samples metric: memory-boundness cannot be computed".into());
                }
                self.resort();
                if self.bottleneck {
                    // The rows to optimise first are at the top: show them.
                    let pane = self.panes.get_mut(&self.view).expect("exists");
                    pane.select_edge(false);
                    pane.offset = 0;
                    self.detail_scroll = 0;
                    self.sync_source();
                }
            }
            Action::SortNext => {
                let shown = self.shown_columns();
                let mut keys: Vec<SortKey> = shown.into_iter().map(SortKey::Column).collect();
                keys.push(SortKey::Name);
                let i = keys.iter().position(|k| *k == self.sort.key);
                let key = keys[i.map_or(0, |i| (i + 1) % keys.len())];
                self.sort = Sort {
                    key,
                    descending: key != SortKey::Name,
                };
                self.bottleneck = false;
                self.resort();
            }
            Action::SortReverse => {
                self.sort.descending = !self.sort.descending;
                self.bottleneck = false;
                self.resort();
            }
            Action::Columns => self.chooser = Some(0),
            Action::SearchStart => self.input = Some(String::new()),
            Action::NextMatch | Action::PrevMatch => {
                self.find(action == Action::NextMatch, false);
            }
            Action::FilterNext | Action::FilterPrev => {
                self.cycle_filter(action == Action::FilterNext)
            }
            Action::SearchChar(_) | Action::SearchBackspace | Action::SearchCommit => {}
            nav => match self.focus {
                Focus::Tree => {
                    let model = &self.model;
                    let pane = self.panes.get_mut(&self.view).expect("exists");
                    match nav {
                        Action::Up => pane.move_by(-1),
                        Action::Down => pane.move_by(1),
                        Action::PageUp => pane.move_by(-page),
                        Action::PageDown => pane.move_by(page),
                        Action::Home => pane.select_edge(false),
                        Action::End => pane.select_edge(true),
                        Action::Toggle => pane.toggle(model),
                        Action::Expand => pane.right(model),
                        Action::Collapse => pane.left(),
                        _ => {}
                    }
                    self.detail_scroll = 0;
                    self.sync_source();
                }
                Focus::Source => {
                    // Scrolls from the lines on screen, by a line or by the
                    // source pane's height, down to the last page (the
                    // file's last line at the bottom).
                    let height = self.source_page.max(1);
                    let cur = self.source_top(height);
                    let last = self.source_last_top(height);
                    let next = match nav {
                        Action::Up => cur.saturating_sub(1),
                        Action::Down => cur + 1,
                        Action::PageUp => cur.saturating_sub(height),
                        Action::PageDown => cur + height,
                        Action::Home => 0,
                        Action::End => last,
                        // Enter jumps back to the selected line.
                        _ => {
                            self.source.scroll = None;
                            return false;
                        }
                    };
                    self.source.scroll = Some(next.min(last));
                }
                Focus::Detail => {
                    // Stops at the last line (the view sets how far).
                    let page = self.detail_page.max(1);
                    let max = self.detail_max_scroll;
                    self.detail_scroll = match nav {
                        Action::Up => self.detail_scroll.saturating_sub(1),
                        Action::Down => self.detail_scroll + 1,
                        Action::PageUp => self.detail_scroll.saturating_sub(page),
                        Action::PageDown => self.detail_scroll.saturating_add(page),
                        Action::End => max,
                        _ => 0,
                    }
                    .min(max);
                }
            },
        }
        false
    }

    /// First source line shown (0-based) in a window of `height` lines:
    /// where the user scrolled to, else the selected line in the middle;
    /// never past the last page, so that the window is full down to the
    /// file's last line.
    pub fn source_top(&self, height: usize) -> usize {
        let follow = || {
            let line = self.source.line.unwrap_or(1) as usize;
            line.saturating_sub(1).saturating_sub(height.max(1) / 2)
        };
        self.source
            .scroll
            .unwrap_or_else(follow)
            .min(self.source_last_top(height))
    }

    /// First line of the last page of the source file in a window of
    /// `height` lines (0 when the file fits).
    fn source_last_top(&self, height: usize) -> usize {
        let len = self.source.text.as_ref().map_or(0, |t| t.len());
        len.saturating_sub(height.max(1))
    }

    fn resort(&mut self) {
        let sort = self.effective_sort();
        let (model, pane) = self.model_and_pane();
        pane.set_sort(model, sort);
        self.sync_source();
    }

    /// The model and the pane in view, for callers that need both.
    pub fn model_and_pane(&mut self) -> (&Model, &mut Pane) {
        let pane = self
            .panes
            .get_mut(&self.view)
            .expect("the pane in view exists");
        (&self.model, pane)
    }

    fn find(&mut self, forward: bool, fresh: bool) {
        let Some(q) = self.query.clone() else {
            self.message = Some("no search yet: press / to search".into());
            return;
        };
        let model = &self.model;
        let pane = self.panes.get_mut(&self.view).expect("exists");
        let found = if fresh {
            // A new search starts at the selection itself.
            let here = pane
                .selected_item()
                .is_some_and(|i| i.label.to_lowercase().contains(&q.to_lowercase()));
            here || pane.search(model, &q, forward)
        } else {
            pane.search(model, &q, forward)
        };
        self.message = Some(if found {
            format!("/{q}")
        } else {
            format!("not found: {q}")
        });
        self.focus = Focus::Tree;
        self.sync_source();
    }

    /// The filters this database supports: all, each MPI rank, each thread.
    pub fn filters(&self) -> Vec<Filter> {
        let mut out = vec![Filter::All];
        out.extend(self.model.db.info.ranks.iter().map(|&r| Filter::Rank(r)));
        if self.model.db.info.threads > 1 {
            out.extend((0..self.model.db.info.threads).map(Filter::Thread));
        }
        out
    }

    fn cycle_filter(&mut self, forward: bool) {
        let all = self.filters();
        if all.len() == 1 {
            self.message =
                Some("nothing to filter: one thread and no MPI ranks in this database".into());
            return;
        }
        let i = all.iter().position(|f| *f == self.filter).unwrap_or(0);
        let n = all.len();
        self.filter = all[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }];
        self.message = match self.filter {
            Filter::All => None,
            Filter::Rank(r) => Some(format!(
                "rank {r}: the 'rank {r} incl' column and the detail pane show each row's value in rank {r}"
            )),
            Filter::Thread(_) => Some(format!(
                "{}: data objects show their value in this thread (column and detail pane); other rows show the thread distribution",
                self.filter_label()
            )),
        };
    }

    /// "all", "rank 3", "thread 1".
    pub fn filter_label(&self) -> String {
        match self.filter {
            Filter::All => "all".into(),
            Filter::Rank(r) => format!("rank {r}"),
            Filter::Thread(t) => self.model.db.thread_label(t),
        }
    }

    /// Loads the selected row's source file (cached) and line.
    pub fn sync_source(&mut self) {
        let frame = self
            .panes
            .get(&self.view)
            .and_then(|p| p.selected_item())
            .and_then(|i| i.frame)
            .and_then(|f| self.model.db.frames.get(f as usize));
        let (file, line) = match frame {
            Some(f) => (f.file.clone(), f.line),
            None => (None, None),
        };
        if file == self.source.file && line == self.source.line {
            return;
        }
        self.source.scroll = None;
        self.source.line = line;
        self.source.file = file.clone();
        let Some(file) = file else {
            self.source.path = None;
            self.source.text = Err("no source location for this row".into());
            return;
        };
        let model = &self.model;
        let (path, text) = self
            .source_cache
            .entry(file.clone())
            .or_insert_with(|| match model.source_path(&file) {
                Some(path) => {
                    let text = std::fs::read(&path)
                        .map(|b| {
                            String::from_utf8_lossy(&b)
                                .lines()
                                .map(|l| l.replace('\t', "    "))
                                .collect()
                        })
                        .map_err(|e| format!("cannot read {}: {e}", path.display()));
                    (Some(path), text)
                }
                None => (
                    None,
                    Err(format!(
                        "source not available: {file} is neither in the database's src/ nor readable"
                    )),
                ),
            })
            .clone();
        self.source.path = path;
        self.source.text = text;
    }
}

#[cfg(test)]
mod tests;
