//! Popups: the key help (`?`) and the column chooser (`o`).

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use super::{centered, Theme};
use crate::state::AppState;

/// Every key, as the help popup and docs/VIEWER.md list them.
pub const KEYS: &[(&str, &str)] = &[
    ("↑ k / ↓ j", "move up / down"),
    ("PgUp / PgDn", "page up / down"),
    ("Home g / End G", "first / last row"),
    ("Enter / Space", "expand or collapse"),
    ("x", "hot path: expand down to the hottest line"),
    ("→ l / ← h", "expand, child / collapse, parent"),
    ("Tab / Shift-Tab", "next / previous pane"),
    ("c", "code-centric; again: callers, flat"),
    ("d", "data-centric (objects)"),
    ("b", "bottleneck-priority order on/off"),
    ("s / r", "sort by next column / reverse"),
    ("o", "choose metric columns"),
    ("/  n / N", "search / next / previous match"),
    ("f / F", "next / previous rank-thread filter"),
    ("H", "hide / show MPI and OpenMP runtime rows"),
    ("?", "this help"),
    ("Esc", "close popup, cancel search"),
    ("q / Ctrl-C", "quit"),
];

pub(crate) fn help(frame: &mut Frame<'_>, area: Rect, theme: Theme) {
    let rect = centered(area, 62, KEYS.len() as u16 + 4);
    let mut lines: Vec<Line<'_>> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<16}"), theme.header()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        " any key closes this help (and then does its action)",
        theme.dim(),
    )));
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Keys ")),
        rect,
    );
}

pub(crate) fn columns(
    frame: &mut Frame<'_>,
    area: Rect,
    app: &AppState,
    cursor: usize,
    theme: Theme,
) {
    let rect = centered(area, 44, app.columns.len() as u16 + 4);
    let mut lines: Vec<Line<'_>> = app
        .columns
        .iter()
        .enumerate()
        .map(|(i, (c, shown))| {
            let text = format!(
                " [{}] {} {}",
                if *shown { "x" } else { " " },
                app.model.metric_name(c.metric),
                if c.exclusive {
                    "exclusive"
                } else {
                    "inclusive"
                }
            );
            if i == cursor {
                Line::from(Span::styled(text, theme.selected(true)))
            } else {
                Line::from(text)
            }
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        " Space: show/hide  Esc: close",
        theme.dim(),
    )));
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Columns ")),
        rect,
    );
}
