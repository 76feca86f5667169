//! The interactive event loop: crossterm events -> [`Action`]s ->
//! [`AppState::apply`] -> [`view::draw`].
//!
//! The terminal is put into raw mode on the alternate screen by
//! `ratatui::try_init`, which also installs a panic hook that restores it
//! (leaves the alternate screen, disables raw mode) *before* the panic
//! message is printed, so that the message lands on the user's normal
//! screen; [`run`] restores it on every other return path. With
//! [`TEST_PANIC_ENV`] set the viewer panics right after its first draw: the
//! end-to-end tests use it to check that restore. The screen is redrawn after
//! every key and on every resize. Nothing here needs a specific terminal:
//! plain crossterm escape sequences work through SSH and tmux.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::DefaultTerminal;

use crate::state::{baseline::Baseline, model::Model, Action, AppState};
use crate::view::{self, Theme};

/// The action of a key in the current state (None: ignored).
pub fn keymap(app: &AppState, key: KeyEvent) -> Option<Action> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c')) {
        return Some(Action::Quit);
    }
    if app.input.is_some() {
        return match key.code {
            KeyCode::Char(c) => Some(Action::SearchChar(c)),
            KeyCode::Backspace => Some(Action::SearchBackspace),
            KeyCode::Enter => Some(Action::SearchCommit),
            KeyCode::Esc => Some(Action::Escape),
            _ => None,
        };
    }
    Some(match key.code {
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Char('b') if ctrl => Action::PageUp,
        KeyCode::Char('f') if ctrl => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Home,
        KeyCode::End | KeyCode::Char('G') => Action::End,
        KeyCode::Enter | KeyCode::Char(' ') => Action::Toggle,
        KeyCode::Right | KeyCode::Char('l') => Action::Expand,
        KeyCode::Left | KeyCode::Char('h') => Action::Collapse,
        KeyCode::Tab => Action::NextPane,
        KeyCode::BackTab => Action::PrevPane,
        KeyCode::Char('c') => Action::CodeView,
        KeyCode::Char('d') => Action::DataView,
        KeyCode::Char('b') => Action::Bottleneck,
        KeyCode::Char('s') => Action::SortNext,
        KeyCode::Char('r') => Action::SortReverse,
        KeyCode::Char('o') => Action::Columns,
        KeyCode::Char('/') => Action::SearchStart,
        KeyCode::Char('n') => Action::NextMatch,
        KeyCode::Char('N') => Action::PrevMatch,
        KeyCode::Char('f') => Action::FilterNext,
        KeyCode::Char('F') => Action::FilterPrev,
        KeyCode::Char('x') => Action::HotPath,
        KeyCode::Char('H') => Action::HideRuntime,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Esc => Action::Escape,
        _ => Action::Other,
    })
}

/// Environment variable that makes the viewer panic after its first draw
/// (a hidden test hook: tests/viewer.rs checks the terminal comes back).
pub const TEST_PANIC_ENV: &str = "HPCVIEW_TEST_PANIC";

/// Runs the viewer on a loaded model (compared with `baseline`, if any;
/// runtime rows hidden with `hide_runtime`) until the user quits.
pub fn run(model: Model, baseline: Option<Baseline>, hide_runtime: bool) -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!("standard input/output is not a terminal; use --report for a text report");
    }
    let mut app = AppState::new(model);
    app.baseline = baseline;
    if hide_runtime {
        app.set_runtime_hidden(true);
    }
    let theme = Theme::from_env();
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    let panic_after_draw = std::env::var_os(TEST_PANIC_ENV).is_some_and(|v| !v.is_empty());
    let result = event_loop(&mut terminal, &mut app, theme, panic_after_draw);
    ratatui::try_restore().context("cannot restore the terminal")?;
    result
}

fn event_loop(
    terminal: &mut DefaultTerminal,
    app: &mut AppState,
    theme: Theme,
    panic_after_draw: bool,
) -> Result<()> {
    loop {
        terminal
            .draw(|f| view::draw(f, app, theme))
            .context("cannot draw")?;
        if panic_after_draw {
            panic!("{TEST_PANIC_ENV} is set: panicking after the first draw");
        }
        match event::read().context("cannot read terminal events")? {
            Event::Key(key) if key.kind != KeyEventKind::Release => {
                if let Some(action) = keymap(app, key) {
                    if app.apply(action) {
                        return Ok(());
                    }
                }
            }
            // Resize (and anything else): redraw.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn keys_map_to_actions() {
        let mut app = AppState::new(Model::new(fixtures::abc(), None));
        assert_eq!(keymap(&app, key(KeyCode::Char('j'))), Some(Action::Down));
        assert_eq!(keymap(&app, key(KeyCode::Up)), Some(Action::Up));
        assert_eq!(keymap(&app, key(KeyCode::Char('q'))), Some(Action::Quit));
        assert_eq!(keymap(&app, key(KeyCode::Char('x'))), Some(Action::HotPath));
        // Keys without an action still reach the state (they close the help).
        assert_eq!(keymap(&app, key(KeyCode::Char('a'))), Some(Action::Other));
        assert_eq!(keymap(&app, key(KeyCode::Char('1'))), Some(Action::Other));
        assert_eq!(
            keymap(
                &app,
                KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
            ),
            Some(Action::Quit)
        );
        app.apply(Action::SearchStart);
        // In the search prompt letters are text, not commands.
        assert_eq!(
            keymap(&app, key(KeyCode::Char('q'))),
            Some(Action::SearchChar('q'))
        );
        assert_eq!(keymap(&app, key(KeyCode::Esc)), Some(Action::Escape));
    }
}
