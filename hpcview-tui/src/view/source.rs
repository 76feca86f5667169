//! The source pane: the selected row's file, read from the database's
//! `src/` copy (or the original path), with its line highlighted.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use super::{fit, fit_left, Theme};
use crate::state::AppState;

/// Draws the pane; returns its height in lines (what its keys scroll by).
pub(crate) fn draw(
    frame: &mut Frame<'_>,
    area: Rect,
    app: &AppState,
    theme: Theme,
    focused: bool,
) -> usize {
    let src = &app.source;
    let room = (area.width as usize).saturating_sub(12);
    let title = match (&src.file, src.line) {
        (Some(file), Some(line)) => format!(
            " Source: {}:{line} ",
            fit_left(file, room.saturating_sub(6))
        ),
        (Some(file), None) => format!(" Source: {} ", fit_left(file, room)),
        _ => " Source ".to_string(),
    };
    let block = Block::bordered()
        .title(Span::styled(title, theme.border(focused)))
        .border_style(theme.border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let height = inner.height as usize;
    let width = inner.width as usize;
    let lines = match &src.text {
        Err(why) => {
            let msg = if why.is_empty() {
                "(select a row with a source line)".to_string()
            } else {
                why.clone()
            };
            frame.render_widget(
                Paragraph::new(msg)
                    .style(theme.dim())
                    .wrap(Wrap { trim: true }),
                inner,
            );
            return height;
        }
        Ok(lines) => lines,
    };
    let top = app.source_top(height);
    let gutter = lines.len().to_string().len().max(3);
    let mut out = Vec::with_capacity(height);
    for (i, text) in lines.iter().enumerate().skip(top).take(height) {
        let n = i + 1;
        let here = src.line == Some(n as u32);
        let mark = if here { "▶" } else { " " };
        let body = fit(text, width.saturating_sub(gutter + 2));
        let line = Line::from(vec![
            Span::styled(format!("{n:>gutter$}{mark}"), theme.dim()),
            Span::raw(" "),
            Span::raw(body),
        ]);
        out.push(if here {
            line.style(theme.highlight())
        } else {
            line
        });
    }
    frame.render_widget(Paragraph::new(out), inner);
    height
}
