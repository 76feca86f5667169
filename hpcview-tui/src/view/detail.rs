//! The detail pane: what the selected row is, its values, its bottleneck
//! quadrant and its distribution over threads and ranks; for data objects
//! also size, allocation site and the per-object measurements that the
//! database does not carry yet (shown as "not measured", never invented).

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use super::tree::{count, percent};
use super::Theme;
use crate::report::alloc_site;
use crate::state::tree::Node;
use crate::state::{AppState, Filter};
use formats::database::Dist;

fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn dist_text(d: &Option<Dist>, what: &str, none: &str) -> String {
    match d {
        Some(d) => format!(
            "{what}: {} · min {:.0} max {:.0} mean {:.0} sd {:.0}",
            d.count, d.min, d.max, d.mean, d.stddev
        ),
        None => format!("{what}: {none}"),
    }
}

/// The detail lines of the selected row (also used by tests).
pub fn lines(app: &AppState) -> Vec<String> {
    let model = &app.model;
    let pane = app.pane();
    let Some(id) = pane.selected_id() else {
        return vec!["(nothing selected)".into()];
    };
    let item = &pane.items[id as usize];
    let mut out = Vec::new();
    if let Some(o) = item.object.filter(|_| matches!(item.node, Node::Object(_))) {
        let obj = &model.db.objects[o as usize];
        let allocs = match obj.allocations {
            0 => String::new(),
            1 => " · 1 allocation".to_string(),
            n => format!(" · {n} allocations"),
        };
        out.push(format!(
            "{} · {} · {}{allocs}",
            obj.name,
            obj.kind.as_str(),
            bytes(obj.bytes)
        ));
        if !obj.alloc_path.is_empty() {
            let path: Vec<_> = obj
                .alloc_path
                .iter()
                .map(|&f| &model.db.frames[f as usize])
                .collect();
            out.push(format!("allocated at: {}", alloc_site(&path)));
        }
    } else if let Some(f) = item.frame {
        let frame = &model.db.frames[f as usize];
        out.push(format!(
            "{}{}",
            frame.function,
            if frame.inlined { " (inlined)" } else { "" }
        ));
        match (&frame.file, frame.line) {
            (Some(file), Some(line)) => out.push(format!("{file}:{line}")),
            (Some(file), None) => out.push(file.clone()),
            _ => out.push("no source location".into()),
        }
        out.push(format!("module: {}", frame.module));
    } else {
        out.push(item.label.clone());
    }
    if item.has_metrics() {
        // The primary metric first; metrics this tree does not carry
        // (cpu_samples in the data tree) are left out.
        let order = std::iter::once(model.primary)
            .chain((0..model.columns).filter(|&m| m != model.primary));
        for m in order {
            let total = pane.totals.get(m).copied().unwrap_or(0);
            if total == 0 && m != model.primary {
                continue;
            }
            let (i, e) = (item.inc[m], item.exc[m]);
            out.push(format!(
                "{}: {} ({}) · excl {}",
                model.metric_name(m),
                count(i),
                percent(i, total),
                count(e),
            ));
        }
        let b = pane.bottleneck(model, id);
        let mem = b
            .mem
            .map(|m| format!("{:.0}%", 100.0 * m))
            .unwrap_or_else(|| "n/a (no cpu_samples)".into());
        out.push(format!(
            "{}: memory-bound proxy {mem}, share {:.1}%",
            b.quadrant.advice(),
            100.0 * b.share,
        ));
        let dist = match item.dist_node {
            Some(Node::Code(n)) => Some(&model.db.code.nodes[n as usize]),
            Some(Node::Data(n)) => Some(&model.db.data.nodes[n as usize]),
            _ => None,
        };
        let (threads, ranks) = match dist {
            Some(node) => (&node.threads, &node.ranks),
            None => (&None, &None),
        };
        let info = &model.db.info;
        let thread_none = if info.threads <= 1 {
            "one thread".to_string()
        } else {
            "not stored for this row".to_string()
        };
        let rank_none = if info.ranks.is_empty() {
            "not an MPI run".to_string()
        } else {
            "not stored for this row".to_string()
        };
        out.push(dist_text(threads, "threads", &thread_none));
        out.push(dist_text(ranks, "ranks", &rank_none));
        match app.filter {
            Filter::All => {}
            Filter::Rank(r) => match dist {
                Some(node) if !node.by_rank.is_empty() || !info.ranks.is_empty() => {
                    let tree = match item.dist_node {
                        Some(Node::Code(_)) => &model.db.code,
                        _ => &model.db.data,
                    };
                    let total = tree.nodes.first().map(|n| n.rank_value(r)).unwrap_or(0);
                    let v = node.rank_value(r);
                    out.push(format!(
                        "rank {r} alone: {} {} ({} of rank {r})",
                        count(v),
                        model.metric_name(model.primary),
                        percent(v, total)
                    ));
                }
                _ => out.push(format!("rank {r} alone: not stored for this row")),
            },
            Filter::Thread(t) => out.push(format!(
                "thread {t} alone: unavailable (the database stores no per-thread values)"
            )),
        }
    }
    if matches!(item.node, Node::Object(_)) {
        out.push("offset histogram: not measured".into());
        out.push("first touch: not measured".into());
        out.push("NUMA local/remote: not measured".into());
    }
    out
}

pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, app: &AppState, theme: Theme, focused: bool) {
    let block = Block::bordered()
        .title(Span::styled(" Detail ", theme.border(focused)))
        .border_style(theme.border(focused));
    let text: Vec<Line<'_>> = lines(app)
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                Line::from(Span::styled(l, theme.header()))
            } else if l.ends_with("not measured") || l.contains("unavailable") {
                Line::from(Span::styled(l, theme.dim()))
            } else {
                Line::from(l)
            }
        })
        .collect();
    frame.render_widget(
        Paragraph::new(text)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((app.detail_scroll.min(u16::MAX as usize) as u16, 0)),
        area,
    );
}
