//! Snapshot tests of every pane (ratatui `TestBackend` + insta) on a
//! hand-built database that mirrors `examples/abc` with fixed numbers
//! (`fixtures::abc`), written to disk with a `src/` copy of
//! `examples/abc/abc.c` (a frozen copy, `fixtures::ABC_SOURCE`) so that the
//! source pane reads it the way it reads a real database. The real pipeline's sample counts vary from run to run, so
//! the real-database checks (top object C, its share >= 70%) are structural
//! assertions in `tests/viewer.rs` of the `pipeline-tests` package.

use std::path::PathBuf;

use hpcview_tui::fixtures;
use hpcview_tui::state::baseline::Baseline;
use hpcview_tui::state::model::Model;
use hpcview_tui::state::{Action, AppState, Focus};
use hpcview_tui::view::{self, Theme};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn db_dir(name: &str) -> PathBuf {
    db_dir_of(name, &fixtures::abc())
}

fn db_dir_of(name: &str, db: &formats::database::Database) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpcview-panes-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    fixtures::write(db, &dir, &[(fixtures::ABC_FILE, fixtures::ABC_SOURCE)]).expect("write db");
    dir
}

fn app(name: &str) -> AppState {
    AppState::new(Model::open(&db_dir(name)).expect("open fixture db"))
}

fn screen(app: &mut AppState, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| view::draw(f, app, Theme { color: false }))
        .unwrap();
    view::text(term.backend().buffer())
}

fn keys(app: &mut AppState, actions: &[Action]) {
    for a in actions {
        assert!(!app.apply(a.clone()), "{a:?} quit");
    }
}

#[test]
fn data_pane() {
    let mut app = app("data");
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("data_pane", s);
}

#[test]
fn data_pane_object_expanded() {
    let mut app = app("data-exp");
    // C -> allocated at -> its frames; then the access path.
    keys(
        &mut app,
        &[Action::Toggle, Action::Down, Action::Toggle, Action::End],
    );
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("data_pane_object_expanded", s);
}

#[test]
fn hot_path() {
    let mut app = app("hot-path");
    // One keystroke from the top object to the line that reads it.
    keys(&mut app, &[Action::HotPath]);
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("hot_path", s);
}

#[test]
fn data_pane_80x24() {
    let mut app = app("data-80");
    let s = screen(&mut app, 80, 24);
    insta::assert_snapshot!("data_pane_80x24", s);
}

#[test]
fn code_top_down() {
    let mut app = app("topdown");
    keys(&mut app, &[Action::CodeView]);
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("code_top_down", s);
}

#[test]
fn code_bottom_up() {
    let mut app = app("bottomup");
    keys(&mut app, &[Action::CodeView, Action::CodeView]);
    app.query = Some("compute".into());
    keys(
        &mut app,
        &[
            Action::NextMatch,
            Action::Toggle,
            Action::Down,
            Action::Toggle,
        ],
    );
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("code_bottom_up", s);
}

#[test]
fn code_flat() {
    let mut app = app("flat");
    keys(
        &mut app,
        &[Action::CodeView, Action::CodeView, Action::CodeView],
    );
    app.query = Some("compute".into());
    keys(&mut app, &[Action::NextMatch, Action::Toggle, Action::Down]);
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("code_flat", s);
}

#[test]
fn bottleneck_order() {
    let mut app = app("bottleneck");
    keys(&mut app, &[Action::Bottleneck]);
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("bottleneck_order", s);
}

/// `H` in the bottleneck order of abc with an OpenMP worker: the
/// runtime's object is gone, the title says so and how much of the CPU
/// time was spent waiting inside the runtime.
#[test]
fn runtime_rows_hidden_in_bottleneck_order() {
    let dir = db_dir_of("runtime", &fixtures::abc_openmp());
    let mut app = AppState::new(Model::open(&dir).expect("open fixture db"));
    keys(&mut app, &[Action::Bottleneck]);
    let shown = screen(&mut app, 100, 30);
    assert!(shown.contains("OpenMP runtime: libgomp"), "{shown}");
    keys(&mut app, &[Action::HideRuntime]);
    let s = screen(&mut app, 100, 30);
    assert!(!s.contains("OpenMP runtime: libgomp"), "{s}");
    insta::assert_snapshot!("runtime_hidden_bottleneck", s);
}

#[test]
fn source_pane_focused_and_scrolled() {
    let mut app = app("source");
    keys(
        &mut app,
        &[Action::CodeView, Action::NextPane, Action::Home],
    );
    assert_eq!(app.focus, Focus::Source);
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("source_pane", s);
}

#[test]
fn help_popup() {
    let mut app = app("help");
    keys(&mut app, &[Action::Help]);
    let s = screen(&mut app, 80, 24);
    insta::assert_snapshot!("help_popup", s);
}

#[test]
fn column_chooser_and_search_prompt() {
    let mut app = app("columns");
    keys(
        &mut app,
        &[
            Action::Columns,
            Action::Down,
            Action::Down,
            Action::Down,
            Action::Down,
            Action::Toggle,
        ],
    );
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("column_chooser", s);
    keys(
        &mut app,
        &[
            Action::Escape,
            Action::SearchStart,
            Action::SearchChar('m'),
            Action::SearchChar('a'),
        ],
    );
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("search_prompt", s);
}

#[test]
fn detail_pane_hot_range_and_heat_map() {
    let mut app = app("heat");
    // Focus the detail pane and scroll down to the object's measurements.
    keys(&mut app, &[Action::NextPane, Action::NextPane]);
    assert_eq!(app.focus, Focus::Detail);
    keys(&mut app, &vec![Action::Down; 10]);
    let s = screen(&mut app, 100, 30);
    insta::assert_snapshot!("detail_heat_map", s);
    // One row per thread, on one line each: thread 0 in C's first half,
    // thread 1 in its second (2 buckets per column in a 43-column pane).
    let half = |c: &str| c.repeat(8);
    for row in [
        format!("thread 0 |{}{}| 50%", half("█"), half(" ")),
        format!("thread 1 |{}{}| 50%", half(" "), half("█")),
    ] {
        assert!(s.contains(&row), "no {row:?}:\n{s}");
    }
    assert!(s.contains("hot range: 90% of its samples in bytes"), "{s}");
}

#[test]
fn delta_columns_against_a_baseline() {
    let before = db_dir("baseline-before");
    let after = std::env::temp_dir().join(format!("hpcview-panes-{}-after", std::process::id()));
    let _ = std::fs::remove_dir_all(&after);
    fixtures::write(
        &fixtures::abc_faster(),
        &after,
        &[(fixtures::ABC_FILE, fixtures::ABC_SOURCE)],
    )
    .unwrap();
    let model = Model::open(&after).unwrap();
    let before_db = hpcview_tui::state::model::load(&before).unwrap();
    // The path is only shown: a fixed one keeps the snapshot stable.
    let base = Baseline::new("runs/before".into(), before_db, &model.db);
    let mut app = AppState::new(model).with_baseline(base);
    let s = screen(&mut app, 100, 30);
    let row = |s: &str, what: &str| -> String {
        s.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what}:\n{s}"))
            .to_string()
    };
    assert!(s.contains("samples excl Δshare name"), "{s}");
    assert!(s.contains("Δshare vs baseline runs/before"), "{s}");
    // C: 90% -> 75%, B: 7% -> 17.5%, A: 3% -> 7.5%.
    assert!(row(&s, "[heap] C").contains(" -15.0 "), "{s}");
    assert!(row(&s, "[heap] B").contains(" +10.5 "), "{s}");
    assert!(row(&s, "[heap] A").contains("  +4.5 "), "{s}");
    // The flat pane: compute fell from 100% to 400 of 400 memory samples
    // (its exclusive share did not change).
    keys(
        &mut app,
        &[Action::CodeView, Action::CodeView, Action::CodeView],
    );
    let s = screen(&mut app, 100, 30);
    assert!(row(&s, "[fn] compute").contains("   0.0 "), "{s}");
    // Bottleneck order keeps the column.
    keys(&mut app, &[Action::DataView, Action::Bottleneck]);
    let s = screen(&mut app, 100, 30);
    assert!(row(&s, "[heap] C").contains(" -15.0 "), "{s}");
    keys(&mut app, &[Action::Bottleneck]);
    insta::assert_snapshot!("data_pane_baseline", screen(&mut app, 100, 30));
}

/// Colours used anywhere on the screen, as (fg, bg, underline) of cells
/// that are not the terminal's default.
fn colours(
    app: &mut AppState,
    theme: Theme,
) -> Vec<(
    ratatui::style::Color,
    ratatui::style::Color,
    ratatui::style::Color,
)> {
    use ratatui::style::Color;
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    term.draw(|f| view::draw(f, app, theme)).unwrap();
    term.backend()
        .buffer()
        .content()
        .iter()
        .map(|c| (c.fg, c.bg, c.underline_color))
        .filter(|&c| c != (Color::Reset, Color::Reset, Color::Reset))
        .collect()
}

#[test]
fn no_color_emits_no_colour_on_any_pane() {
    let no_color = Theme::from_no_color(Some(std::ffi::OsStr::new("1")));
    assert!(!no_color.color);
    let with_colour = Theme::from_no_color(None);
    let mut app = app("no-color");
    // Every pane, the focus on each part, the bottleneck order, the popups
    // and the search prompt.
    let steps: [&[Action]; 9] = [
        &[],
        &[Action::Toggle, Action::Down],
        &[Action::Bottleneck],
        &[Action::CodeView],
        &[Action::NextPane],
        &[Action::NextPane],
        &[Action::CodeView, Action::CodeView],
        &[Action::Help],
        &[Action::Escape, Action::Columns],
    ];
    for (i, step) in steps.iter().enumerate() {
        keys(&mut app, step);
        let used = colours(&mut app, no_color);
        assert!(used.is_empty(), "step {i}: colours with NO_COLOR: {used:?}");
        // The same screen in colour does use colours (the check is live).
        assert!(!colours(&mut app, with_colour).is_empty(), "step {i}");
    }
    keys(&mut app, &[Action::Escape, Action::SearchStart]);
    assert!(colours(&mut app, no_color).is_empty());
}

/// PgDn in the detail pane stops at its last line: the pane is never
/// scrolled into blank space, and PgUp then moves at once.
#[test]
fn detail_pane_stops_at_its_end() {
    let mut app = app("detail-end");
    keys(&mut app, &[Action::NextPane, Action::NextPane]);
    assert_eq!(app.focus, Focus::Detail);
    let _ = screen(&mut app, 100, 30);
    let max = app.detail_max_scroll;
    assert!(max > 0 && max < 100, "{max}");
    keys(&mut app, &vec![Action::PageDown; 20]);
    let s = screen(&mut app, 100, 30);
    assert_eq!(app.detail_scroll, max);
    // The detail pane's last text row (above its bottom border) is not
    // blank.
    let rows: Vec<&str> = s.lines().collect();
    let last = rows[rows.len() - 3];
    let detail = last.rsplit('│').nth(1).unwrap_or("");
    assert!(!detail.trim().is_empty(), "blank last row:\n{s}");
    keys(&mut app, &[Action::PageUp]);
    assert!(app.detail_scroll < max);
}

/// Small blocks the profiler could not track stay in sight: the status
/// line opens with how many.
#[test]
fn status_line_says_how_many_small_blocks_went_untracked() {
    let mut db = fixtures::abc();
    db.info.stats.untracked_blocks.insert(
        "tracking memory cap reached, raise --max-tracking-memory".into(),
        formats::measurement::UntrackedBlocks {
            blocks: 186_112,
            bytes: 30 << 20,
        },
    );
    let dir = db_dir_of("untracked", &db);
    let mut app = AppState::new(Model::open(&dir).expect("open fixture db"));
    let s = screen(&mut app, 120, 30);
    let status = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        status.starts_with(" 186,112 small blocks untracked "),
        "{status:?}\n{s}"
    );
}
