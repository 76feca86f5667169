//! The outline pane: metric columns (value and percentage of the total),
//! optional bottleneck columns, with a baseline the change of each row's
//! share (`Δshare`, percentage points, or `new`), then the indented tree
//! label. In bottleneck order the pane's title says how much of the CPU
//! time was spent waiting inside MPI libraries and OpenMP runtimes.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use super::{fit, fit_left, sort_label, Theme};
use crate::state::tree::{Column, Item, Pane, SortKey};
use crate::state::{AppState, Focus};

/// Width of a metric cell: value (8) + space + percentage (6).
const CELL: usize = 15;
const MEM: usize = 5;
const ADVICE: usize = 12;
/// Width of the delta column ("+100.0", "new").
const DELTA: usize = 6;

/// Compact count: `1234567` -> `1234567`, `123456789` -> `123.5M`.
pub(crate) fn count(v: u64) -> String {
    if v < 100_000_000 {
        v.to_string()
    } else if v < 100_000_000_000 {
        format!("{:.1}M", v as f64 / 1e6)
    } else {
        format!("{:.1}G", v as f64 / 1e9)
    }
}

pub(crate) fn percent(v: u64, total: u64) -> String {
    if total == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * v as f64 / total as f64)
    }
}

fn cell(item: &Item, c: Column, totals: &[u64]) -> String {
    if !item.has_metrics() {
        return " ".repeat(CELL);
    }
    let vals = if c.exclusive { &item.exc } else { &item.inc };
    let v = vals.get(c.metric).copied().unwrap_or(0);
    let total = totals.get(c.metric).copied().unwrap_or(0);
    format!("{:>8} {:>6}", count(v), percent(v, total))
}

/// "· waiting in MPI/OpenMP 65.4% ": the share of the CPU samples
/// (`cpu_samples`) inside the runtimes ([`formats::runtimes::waiting`]);
/// empty when there are none.
fn waiting_title(app: &AppState) -> String {
    let w = &app.model.waiting;
    if w.mpi + w.openmp == 0 || w.total == 0 {
        return String::new();
    }
    format!(
        "· waiting in MPI/OpenMP {} ",
        percent(w.mpi + w.openmp, w.total)
    )
}

pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, app: &mut AppState, theme: Theme) {
    let focused = app.focus == Focus::Tree;
    let mut title = format!(
        " {} · {} ",
        app.pane().kind.title(),
        if app.bottleneck {
            "bottleneck order".to_string()
        } else {
            format!("by {}", sort_label(app))
        }
    );
    if app.bottleneck {
        title.push_str(&waiting_title(app));
    }
    if app.hide_runtime {
        title.push_str("· runtime rows hidden (H) ");
    }
    if let Some(b) = &app.baseline {
        let room = (area.width as usize).saturating_sub(title.chars().count() + 24);
        let path = fit_left(&b.path.display().to_string(), room.max(12));
        title.push_str(&format!("· Δshare vs baseline {path} "));
    }
    let block = Block::bordered()
        .title(Span::styled(title, theme.border(focused)))
        .border_style(theme.border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = (inner.height as usize).saturating_sub(1);
    app.page = rows.max(1);
    let columns = app.shown_columns();
    let bottleneck = app.bottleneck;
    let sort = app.effective_sort();
    let width = inner.width as usize;
    let deltas = app.visible_deltas(rows);

    let mut lines = Vec::with_capacity(rows + 1);
    // Column headers.
    let mut head = String::from(" ");
    for c in &columns {
        let mark = match sort.key {
            SortKey::Column(s) if s == *c => {
                if sort.descending {
                    "▼"
                } else {
                    "▲"
                }
            }
            _ => "",
        };
        let name = format!(
            "{mark}{} {}",
            app.model.metric_name(c.metric),
            if c.exclusive { "excl" } else { "incl" }
        );
        head.push_str(&format!("{:>CELL$} ", fit(&name, CELL)));
    }
    if bottleneck {
        head.push_str(&format!("{:>MEM$} {:<ADVICE$} ", "mem%", "advice"));
    }
    if deltas.is_some() {
        head.push_str(&format!("{:>DELTA$} ", "Δshare"));
    }
    let rank = match app.filter {
        crate::state::Filter::Rank(r) => Some(r),
        _ => None,
    };
    if let Some(r) = rank {
        head.push_str(&format!("{:>CELL$} ", fit(&format!("rank {r} incl"), CELL)));
    }
    // Thread filter: objects carry per-thread values.
    let thread = match app.filter {
        crate::state::Filter::Thread(t) => Some(t),
        _ => None,
    };
    if let Some(t) = thread {
        let label = format!("{} incl", app.model.db.thread_label(t));
        head.push_str(&format!("{:>CELL$} ", fit(&label, CELL)));
    }
    let name_mark = if sort.key == SortKey::Name {
        " ▲▼"
    } else {
        ""
    };
    head.push_str(&format!("name{name_mark}"));
    lines.push(Line::from(Span::styled(fit(&head, width), theme.header())));

    let (model, pane): (_, &mut Pane) = app.model_and_pane();
    // The selected rank's total: its value at the root of the pane's tree.
    let rank_total = rank.map(|r| {
        let tree = match pane.kind {
            crate::state::tree::PaneKind::Data => &model.db.data,
            _ => &model.db.code,
        };
        tree.nodes.first().map(|n| n.rank_value(r)).unwrap_or(0)
    });
    let primary = model.primary;
    let thread_total = thread.map(|t| {
        model
            .db
            .objects
            .iter()
            .map(|o| o.thread_value(t, primary))
            .sum::<u64>()
    });
    pane.scroll_into_view(rows);
    let end = (pane.offset + rows).min(pane.visible.len());
    let sel_style = theme.selected(focused);
    for pos in pane.offset..end {
        let id = pane.visible[pos];
        let item = &pane.items[id as usize];
        // A visible cursor, also without colours and in text captures.
        let mut spans = vec![Span::raw(if pos == pane.selected { "›" } else { " " })];
        let mut used = 1;
        for c in &columns {
            let s = format!("{} ", cell(item, *c, &pane.totals));
            used += s.chars().count();
            spans.push(Span::raw(s));
        }
        if bottleneck {
            let b = pane.bottleneck(model, id);
            let (mem, advice) = if item.has_metrics() {
                (
                    b.mem
                        .map(|m| format!("{:.0}%", 100.0 * m))
                        .unwrap_or_else(|| "n/a".into()),
                    if item.runtime {
                        "runtime"
                    } else {
                        crate::state::bottleneck::short(b.quadrant)
                    },
                )
            } else {
                (String::new(), "")
            };
            let style = if b.quadrant == crate::state::bottleneck::Quadrant::OptimiseFirst
                && item.has_metrics()
                && !item.runtime
            {
                theme.alert()
            } else {
                ratatui::style::Style::new()
            };
            spans.push(Span::raw(format!("{mem:>MEM$} ")));
            spans.push(Span::styled(format!("{advice:<ADVICE$} "), style));
            used += MEM + ADVICE + 2;
        }
        if let Some(deltas) = &deltas {
            let d = deltas
                .get(pos - pane.offset)
                .copied()
                .flatten()
                .map(|d| d.text())
                .unwrap_or_default();
            spans.push(Span::raw(format!("{d:>DELTA$} ")));
            used += DELTA + 1;
        }
        if let (Some(r), Some(total)) = (rank, rank_total) {
            let node = match item.dist_node {
                Some(crate::state::tree::Node::Code(n)) => Some(&model.db.code.nodes[n as usize]),
                Some(crate::state::tree::Node::Data(n)) => Some(&model.db.data.nodes[n as usize]),
                _ => None,
            };
            let s = match node {
                Some(n) if item.has_metrics() => {
                    let v = n.rank_value(r);
                    format!("{:>8} {:>6} ", count(v), percent(v, total))
                }
                _ => format!("{:>CELL$} ", ""),
            };
            used += s.chars().count();
            spans.push(Span::raw(s));
        }
        if let (Some(t), Some(total)) = (thread, thread_total) {
            let s = match item.object {
                Some(o) if matches!(item.node, crate::state::tree::Node::Object(_)) => {
                    let v = model.db.objects[o as usize].thread_value(t, primary);
                    format!("{:>8} {:>6} ", count(v), percent(v, total))
                }
                _ => format!("{:>CELL$} ", ""),
            };
            used += s.chars().count();
            spans.push(Span::raw(s));
        }
        let indent = (2 * item.depth as usize).min(width.saturating_sub(used) / 2);
        let marker = if item.expanded {
            "▾ "
        } else if item.expandable {
            "▸ "
        } else {
            "  "
        };
        let tag = if item.tag.is_empty() {
            String::new()
        } else {
            format!("[{}] ", item.tag)
        };
        let room = width.saturating_sub(used + indent + 2);
        let tag_len = tag.chars().count().min(room);
        spans.push(Span::raw(format!("{}{marker}", " ".repeat(indent))));
        spans.push(Span::styled(fit(&tag, tag_len), theme.dim()));
        let label = fit(&item.label, room - tag_len);
        let left = room - tag_len - label.chars().count();
        spans.push(Span::raw(label));
        if let Some(site) = item.site.as_deref().filter(|_| left > 4) {
            spans.push(Span::styled(fit(&format!("  {site}"), left), theme.dim()));
        }
        let mut line = Line::from(spans);
        if pos == pane.selected {
            line = line.style(sel_style);
        }
        lines.push(line);
    }
    if pane.visible.is_empty() {
        lines.push(Line::from("  (nothing measured)"));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
