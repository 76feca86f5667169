//! ratatui widgets that draw an [`AppState`]: a title bar, the outline
//! pane (code-centric or data-centric), the source pane, the detail pane and
//! a status bar; the help and column-chooser popups on top.
//!
//! ```
//! use ratatui::{backend::TestBackend, Terminal};
//! use hpcview_tui::{state::{AppState, model::Model}, view::{self, Theme}};
//! let mut app = AppState::new(Model::new(hpcview_tui::fixtures::abc(), None));
//! let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
//! term.draw(|f| view::draw(f, &mut app, Theme { color: false })).unwrap();
//! let screen = view::text(term.backend().buffer());
//! assert!(screen.contains("Data-centric"));
//! ```

pub mod detail;
pub mod heatmap;
mod popup;
mod source;
mod theme;
mod tree;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub use popup::KEYS;
pub use theme::Theme;

use crate::state::{AppState, Focus};

/// Draws the whole screen and records the tree pane's height in `app.page`
/// and the source pane's in `app.source_page`.
pub fn draw(frame: &mut Frame<'_>, app: &mut AppState, theme: Theme) {
    let area = frame.area();
    let body = area.height.saturating_sub(2);
    let bottom = (body * 9 / 20).clamp(4.min(body), 14);
    let [header, main, lower, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(bottom),
        Constraint::Length(1),
    ])
    .areas(area);
    let source_w = if lower.width >= 120 { 60 } else { 55 };
    let [src, det] = Layout::horizontal([
        Constraint::Percentage(source_w),
        Constraint::Percentage(100 - source_w),
    ])
    .areas(lower);

    frame.render_widget(Paragraph::new(title_bar(app, theme)), header);
    tree::draw(frame, main, app, theme);
    app.source_page = source::draw(frame, src, app, theme, app.focus == Focus::Source).max(1);
    let (max_scroll, height) = detail::draw(frame, det, app, theme, app.focus == Focus::Detail);
    app.detail_max_scroll = max_scroll;
    app.detail_page = height.max(1);
    app.detail_scroll = app.detail_scroll.min(max_scroll);
    frame.render_widget(Paragraph::new(status_bar(app, theme)), footer);
    if app.help {
        popup::help(frame, area, theme);
    }
    if let Some(cursor) = app.chooser {
        popup::columns(frame, area, app, cursor, theme);
    }
}

fn title_bar(app: &AppState, theme: Theme) -> Line<'static> {
    let info = &app.model.db.info;
    let events = if info.events.is_empty() {
        "no events".to_string()
    } else {
        info.events.join(",")
    };
    let ranks = if info.ranks.is_empty() {
        String::new()
    } else {
        format!(" {} ranks ·", info.ranks.len())
    };
    let text = format!(
        " hpcview-tui │ {events} │{ranks} {} proc · {} thr │ metric: {} │ filter: {} │ order: {}",
        info.processes,
        info.threads,
        app.model.metric_name(app.model.primary),
        app.filter_label(),
        sort_label(app),
    );
    Line::from(Span::styled(text, theme.header()))
}

/// "samples incl ▼", "name ▲", "bottleneck ▼".
pub fn sort_label(app: &AppState) -> String {
    use crate::state::tree::SortKey;
    let s = app.effective_sort();
    let arrow = if s.descending { "▼" } else { "▲" };
    let key = match s.key {
        SortKey::Bottleneck => "bottleneck".to_string(),
        SortKey::Name => "name".to_string(),
        SortKey::Column(c) => format!(
            "{} {}",
            app.model.metric_name(c.metric),
            if c.exclusive { "excl" } else { "incl" }
        ),
    };
    format!("{key} {arrow}")
}

fn status_bar(app: &AppState, theme: Theme) -> Line<'static> {
    if let Some(input) = &app.input {
        return Line::from(vec![
            Span::styled(" search: /", theme.header()),
            Span::raw(format!("{input}▏  (Enter: find, Esc: cancel)")),
        ]);
    }
    if let Some(msg) = &app.message {
        return Line::from(Span::raw(format!(" {msg}")));
    }
    let keys = Span::styled(
        " ?:help q:quit x:hot path c:code d:data b:bottleneck s/r:sort o:columns /:search f:filter Tab:pane",
        theme.dim(),
    );
    // Losses of the measurement stay in sight.
    let info = &app.model.db.info;
    let mut lost: Vec<String> = Vec::new();
    match info.losses.as_slice() {
        [] => {}
        [one] => lost.push(format!("lost: {}", one.text)),
        [first, rest @ ..] => lost.push(format!("lost: {} (+{} more)", first.text, rest.len())),
    }
    lost.extend(formats::notes::untracked_blocks_short(
        &info.stats.untracked_blocks,
    ));
    if lost.is_empty() {
        Line::from(keys)
    } else {
        Line::from(vec![
            Span::styled(format!(" {} ", lost.join("; ")), theme.alert()),
            keys,
        ])
    }
}

/// Shortens `s` to `max` characters, ending in `…` when cut.
pub(crate) fn fit(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else if max == 0 {
        String::new()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// Shortens `s` from the left (for paths), starting with `…` when cut.
pub(crate) fn fit_left(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_string()
    } else if max == 0 {
        String::new()
    } else {
        let mut t = String::from("…");
        t.extend(s.chars().skip(n - (max - 1)));
        t
    }
}

/// The text of a buffer, one line per row, trailing spaces removed (for
/// tests and captures).
pub fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        let mut skip = 0;
        for x in area.left()..area.right() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let sym = buf[(x, y)].symbol();
            line.push_str(sym);
            let w = unicode_width(sym);
            skip = w.saturating_sub(1);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn unicode_width(s: &str) -> usize {
    // Every glyph the viewer draws is one column wide, except CJK and
    // similar characters from source files, which the buffer stores as a
    // wide symbol followed by an empty cell.
    s.chars()
        .map(|c| {
            if (c as u32) >= 0x1100 && is_wide(c) {
                2
            } else {
                1
            }
        })
        .sum::<usize>()
        .max(1)
}

fn is_wide(c: char) -> bool {
    matches!(c as u32, 0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6 | 0x1F300..=0x1F64F | 0x20000..=0x3FFFD)
}

/// A centred rectangle of at most `w` x `h` inside `area`.
pub(crate) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}
