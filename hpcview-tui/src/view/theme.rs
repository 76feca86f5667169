//! Colours and emphasis. With `NO_COLOR` set (and not empty) the viewer
//! uses no colours at all, only bold and reverse video.

use ratatui::style::{Color, Modifier, Style};

/// The styles of the viewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colours unless `NO_COLOR` is set to a non-empty value
    /// (<https://no-color.org>).
    pub fn from_env() -> Self {
        Self::from_no_color(std::env::var_os("NO_COLOR").as_deref())
    }

    /// The theme for a value of `NO_COLOR` (`None`: unset). An empty value
    /// counts as unset, as no-color.org asks.
    pub fn from_no_color(value: Option<&std::ffi::OsStr>) -> Self {
        Theme {
            color: !value.is_some_and(|v| !v.is_empty()),
        }
    }

    /// The selected row.
    pub fn selected(self, focused: bool) -> Style {
        match (self.color, focused) {
            (true, true) => Style::new()
                .bg(Color::Blue)
                .fg(Color::White)
                .add_modifier(Modifier::BOLD),
            (true, false) => Style::new().bg(Color::DarkGray),
            (false, true) => Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            (false, false) => Style::new().add_modifier(Modifier::REVERSED),
        }
    }

    /// The source line of the selection.
    pub fn highlight(self) -> Style {
        if self.color {
            Style::new()
                .bg(Color::Yellow)
                .fg(Color::Black)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }

    /// Border of a pane.
    pub fn border(self, focused: bool) -> Style {
        match (self.color, focused) {
            (true, true) => Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            (false, true) => Style::new().add_modifier(Modifier::BOLD),
            _ => Style::new(),
        }
    }

    /// Column headers and the title bar.
    pub fn header(self) -> Style {
        if self.color {
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }

    /// Secondary text (tags, gutters).
    pub fn dim(self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }

    /// The "optimise first" advice.
    pub fn alert(self) -> Style {
        if self.color {
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn no_color_values() {
        assert!(Theme::from_no_color(None).color);
        assert!(Theme::from_no_color(Some(OsStr::new(""))).color);
        assert!(!Theme::from_no_color(Some(OsStr::new("1"))).color);
        assert!(!Theme::from_no_color(Some(OsStr::new("0"))).color);
    }

    #[test]
    fn without_colour_no_style_has_a_colour() {
        let t = Theme::from_no_color(Some(OsStr::new("1")));
        let styles = [
            t.selected(true),
            t.selected(false),
            t.highlight(),
            t.border(true),
            t.border(false),
            t.header(),
            t.dim(),
            t.alert(),
        ];
        for s in styles {
            assert_eq!((s.fg, s.bg, s.underline_color), (None, None, None), "{s:?}");
        }
    }
}
