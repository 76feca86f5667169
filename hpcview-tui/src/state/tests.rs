//! Unit tests of [`super::AppState`]: keys, views, sort, search, filter,
//! popups and scrolling on the hand-built fixtures.

use super::*;
use crate::fixtures;
use crate::state::bottleneck::Quadrant;

#[test]
fn keys_switch_views_and_sort() {
    let mut app = AppState::new(Model::new(fixtures::abc(), None));
    assert_eq!(app.view, PaneKind::Data);
    app.apply(Action::CodeView);
    assert_eq!(app.view, PaneKind::TopDown);
    // The top-down pane opens on the hottest path: compute's line.
    assert_eq!(
        app.pane().selected_item().unwrap().label,
        "compute  abc.c:25"
    );
    app.apply(Action::CodeView);
    assert_eq!(app.view, PaneKind::BottomUp);
    app.apply(Action::CodeView);
    assert_eq!(app.view, PaneKind::Flat);
    app.apply(Action::DataView);
    app.apply(Action::SortReverse);
    assert_eq!(app.pane().selected_item().unwrap().label, "C");
    app.apply(Action::Home);
    assert_ne!(app.pane().selected_item().unwrap().label, "C");
    app.apply(Action::Bottleneck);
    app.apply(Action::Home);
    assert_eq!(app.pane().selected_item().unwrap().label, "C");
}

#[test]
fn search_prompt() {
    let mut app = AppState::new(Model::new(fixtures::abc(), None));
    app.apply(Action::SearchStart);
    for c in "main".chars() {
        app.apply(Action::SearchChar(c));
    }
    app.apply(Action::SearchCommit);
    let first = app.pane().selected_id();
    assert!(app.pane().selected_item().unwrap().label.contains("main"));
    app.apply(Action::NextMatch);
    assert_ne!(app.pane().selected_id(), first);
    app.apply(Action::PrevMatch);
    assert_eq!(app.pane().selected_id(), first);
}

#[test]
fn filter_is_honest() {
    let mut app = AppState::new(Model::new(fixtures::abc(), None));
    app.apply(Action::FilterNext);
    assert_eq!(app.filter, Filter::Thread(0));
    assert!(app
        .message
        .as_deref()
        .unwrap()
        .contains("data objects show their value in this thread"));
    // The data-centric pane: the top object's value in thread 0 is in
    // the detail pane (C: 360 of 900 samples in thread 0).
    app.apply(Action::DataView);
    let mut detail = String::new();
    for _ in 0..20 {
        detail = crate::view::detail::lines(&app).join("\n");
        if detail.starts_with("C ·") {
            break;
        }
        app.apply(Action::Down);
    }
    assert!(
        detail.contains("thread 0 alone: 360 samples (40.0% of this object)"),
        "{detail}"
    );
    let mut mpi = fixtures::abc();
    mpi.info.ranks = vec![0, 1];
    let mut app = AppState::new(Model::new(mpi, None));
    app.apply(Action::FilterPrev);
    assert_eq!(app.filter, Filter::Thread(1));
    app.apply(Action::FilterNext);
    app.apply(Action::FilterNext);
    assert_eq!(app.filter, Filter::Rank(0));
    assert!(app.message.as_deref().unwrap().contains("value in rank 0"));
    let mut single = fixtures::abc();
    single.info.ranks.clear();
    single.info.threads = 1;
    let mut app = AppState::new(Model::new(single, None));
    app.apply(Action::FilterNext);
    assert_eq!(app.filter, Filter::All);
    assert!(app
        .message
        .as_deref()
        .unwrap()
        .contains("nothing to filter"));
}

#[test]
fn help_closes_on_any_key_and_the_key_acts() {
    let mut app = AppState::new(Model::new(fixtures::abc(), None));
    for closer in [Action::Other, Action::Escape, Action::Help] {
        app.apply(Action::Help);
        assert!(app.help);
        app.apply(closer.clone());
        assert!(!app.help, "{closer:?} did not close the help");
        assert_eq!(app.view, PaneKind::Data);
    }
    // `c` closes it and switches to the code-centric pane.
    app.apply(Action::Help);
    app.apply(Action::CodeView);
    assert!(!app.help);
    assert_eq!(app.view, PaneKind::TopDown);
    app.apply(Action::Help);
    assert!(app.apply(Action::Quit));
}

#[test]
fn hot_path_key_selects_the_line_from_any_focus() {
    let mut app = AppState::new(Model::new(fixtures::abc(), None));
    app.apply(Action::NextPane);
    app.apply(Action::HotPath);
    assert_eq!(app.focus, Focus::Tree);
    assert_eq!(
        app.pane().selected_item().unwrap().label,
        "compute  abc.c:25"
    );
    assert_eq!(app.source.line, Some(25));
}

#[test]
fn detail_pane_scrolling_stops_at_its_end() {
    let mut app = AppState::new(Model::new(fixtures::abc(), None));
    // The view sets these when it draws: 30 lines, 8 shown.
    app.detail_max_scroll = 22;
    app.detail_page = 8;
    app.focus = Focus::Detail;
    for _ in 0..10 {
        app.apply(Action::PageDown);
    }
    assert_eq!(app.detail_scroll, 22);
    app.apply(Action::Down);
    assert_eq!(app.detail_scroll, 22);
    app.apply(Action::PageUp);
    assert_eq!(app.detail_scroll, 14);
    app.apply(Action::Home);
    assert_eq!(app.detail_scroll, 0);
    app.apply(Action::End);
    assert_eq!(app.detail_scroll, 22);
}

#[test]
fn column_chooser_keeps_one_column() {
    let mut app = AppState::new(Model::new(fixtures::abc(), None));
    app.apply(Action::Columns);
    app.apply(Action::Toggle); // hide samples inclusive
    app.apply(Action::Down);
    app.apply(Action::Toggle); // hide samples exclusive: refused
    assert_eq!(app.shown_columns().len(), 1);
    app.apply(Action::Escape);
    assert!(app.chooser.is_none());
}

#[test]
fn runtime_key_hides_and_shows_runtime_rows() {
    let mut app = AppState::new(Model::new(fixtures::abc_openmp(), None));
    let names = |app: &AppState| -> Vec<String> {
        app.pane()
            .visible
            .iter()
            .map(|&id| app.pane().items[id as usize].label.clone())
            .collect()
    };
    assert!(names(&app).iter().any(|n| n.starts_with("OpenMP runtime")));
    // Select B, then hide: B stays selected, the runtime's object is gone.
    app.apply(Action::Down);
    assert_eq!(app.pane().selected_item().unwrap().label, "B");
    app.apply(Action::HideRuntime);
    assert!(app.hide_runtime);
    assert!(!names(&app).iter().any(|n| n.starts_with("OpenMP runtime")));
    assert_eq!(app.pane().selected_item().unwrap().label, "B");
    // 300 of 1,780 cpu samples were inside libgomp.
    let msg = app.message.clone().unwrap();
    assert!(
        msg.contains("runtime rows hidden") && msg.contains("16.9%"),
        "{msg}"
    );
    // Every pane hides them, also one opened later.
    app.apply(Action::CodeView);
    app.apply(Action::CodeView);
    app.apply(Action::CodeView);
    assert!(!names(&app).iter().any(|n| n.starts_with("gomp_")));
    app.apply(Action::HideRuntime);
    assert!(!app.hide_runtime);
    assert!(names(&app).iter().any(|n| n.starts_with("gomp_")));
}

fn selected(app: &AppState) -> String {
    app.pane().selected_item().unwrap().label.clone()
}

/// With runtime rows hidden, the hot path follows the cost that stays in
/// view: the MPI branch (the hottest with the runtime shown) only leads
/// to rows the library's frames hid, so `x` goes to `compute` instead, in
/// the code-centric pane and below an object.
#[test]
fn hot_path_follows_what_stays_in_view() {
    let mut app = AppState::new(Model::new(fixtures::abc_mpi(), None));
    app.apply(Action::CodeView);
    assert_eq!(selected(&app), "MPI_Sendrecv");
    app.apply(Action::Home);
    app.apply(Action::HotPath);
    assert_eq!(selected(&app), "MPI_Sendrecv");

    app.apply(Action::HideRuntime);
    // The top-down pane opens on the hot path again: compute's line.
    assert_eq!(selected(&app), "compute  abc.c:25");
    app.apply(Action::Home);
    assert_eq!(selected(&app), "_start");
    app.apply(Action::HotPath);
    assert_eq!(selected(&app), "compute  abc.c:25");

    // Below C: 1510 of its 2410 samples are through main:49 (1500 inside
    // MPI_Sendrecv), 900 through compute.
    app.apply(Action::DataView);
    app.apply(Action::Home);
    assert_eq!(selected(&app), "C");
    app.apply(Action::HotPath);
    assert_eq!(selected(&app), "compute  abc.c:25");
    app.apply(Action::HideRuntime);
    app.apply(Action::Home);
    assert_eq!(selected(&app), "C");
    app.apply(Action::HotPath);
    assert_eq!(selected(&app), "MPI_Sendrecv");
}

/// `b` shows the top of the bottleneck order: the first row is selected
/// and the pane scrolled to it, wherever the selection was.
#[test]
fn bottleneck_key_shows_the_top() {
    let mut app = AppState::new(Model::new(fixtures::synthetic(20_000), None));
    app.page = 10;
    for _ in 0..5 {
        app.apply(Action::PageDown);
    }
    let _ = app.visible_deltas(10);
    assert!(app.pane().selected > 10 && app.pane().offset > 0);
    app.apply(Action::Bottleneck);
    assert!(app.bottleneck);
    assert_eq!(app.pane().selected, 0);
    assert_eq!(app.pane().offset, 0);
    // The same in a code-centric pane.
    app.apply(Action::Bottleneck);
    app.apply(Action::CodeView);
    app.apply(Action::CodeView);
    assert_eq!(app.view, PaneKind::BottomUp);
    for _ in 0..3 {
        app.apply(Action::PageDown);
    }
    assert!(app.pane().selected > 0);
    app.apply(Action::Bottleneck);
    assert_eq!(app.pane().selected, 0);
    assert_eq!(app.pane().offset, 0);
}

/// In bottleneck order the runtimes' rows come after the program's, even
/// when they would rank first: MPI's buffer (2000 samples, memory bound)
/// after C, `MPI_Sendrecv` after `compute`.
#[test]
fn runtime_rows_come_last_in_bottleneck_order() {
    let mut app = AppState::new(Model::new(fixtures::abc_mpi(), None));
    let rows = |app: &AppState| -> Vec<(String, bool)> {
        let pane = app.pane();
        pane.visible
            .iter()
            .map(|&id| {
                let item = &pane.items[id as usize];
                (item.label.clone(), item.runtime)
            })
            .collect()
    };
    // By its figures alone the library's buffer would rank first: it is
    // memory bound (2000 of MPI_Sendrecv's 4000 cpu samples), C is not
    // (2410 of its accessors' 5062).
    {
        let pane = app.pane();
        let quadrant = |prefix: &str| {
            let id = pane
                .visible
                .iter()
                .copied()
                .find(|&id| pane.items[id as usize].label.starts_with(prefix))
                .unwrap();
            pane.bottleneck(&app.model, id).quadrant
        };
        assert_eq!(quadrant("Open MPI"), Quadrant::OptimiseFirst);
        assert_ne!(quadrant("C"), Quadrant::OptimiseFirst);
    }
    app.apply(Action::Bottleneck);
    for kind in [PaneKind::Data, PaneKind::BottomUp, PaneKind::Flat] {
        while app.view != kind {
            app.apply(Action::CodeView);
        }
        let r = rows(&app);
        let first_runtime = r.iter().position(|(_, rt)| *rt).expect("a runtime row");
        assert!(first_runtime > 0, "{kind:?}: {r:?}");
        assert!(
            r[first_runtime..].iter().all(|(_, rt)| *rt),
            "{kind:?}: {r:?}"
        );
        let top = if kind == PaneKind::Data {
            "C"
        } else {
            "compute"
        };
        assert!(r[0].0.starts_with(top), "{kind:?}: {r:?}");
    }
    // Sorted by samples the runtime's function stays above compute.
    app.apply(Action::Bottleneck);
    let r = rows(&app);
    let at = |name: &str| r.iter().position(|(l, _)| l == name).unwrap();
    assert!(at("MPI_Sendrecv") < at("compute"), "{r:?}");
}

/// The source pane scrolls from the lines on screen: Down after Tab shows
/// the next line at the bottom (the first line shown moves by one, from
/// the window centred on the selected line), End shows the last page with
/// the file's last line at the bottom, PageDown stops there too.
#[test]
fn source_pane_scrolls_from_what_is_shown() {
    let dir = std::env::temp_dir().join(format!("hpcview-source-{}", std::process::id()));
    fixtures::write(
        &fixtures::abc(),
        &dir,
        &[(fixtures::ABC_FILE, fixtures::ABC_SOURCE)],
    )
    .unwrap();
    let mut app = AppState::new(Model::open(&dir).unwrap());
    let lines = fixtures::ABC_SOURCE.lines().count();
    app.apply(Action::CodeView);
    assert_eq!(app.source.line, Some(25));
    // A source pane of 9 lines, a tree pane of 30 rows: the selected line
    // 25 is in the middle, lines 21 to 29.
    app.page = 30;
    app.source_page = 9;
    assert_eq!(app.source_top(9), 20);
    app.apply(Action::NextPane);
    assert_eq!(app.focus, Focus::Source);
    app.apply(Action::Down);
    assert_eq!(app.source_top(9), 21);
    app.apply(Action::Up);
    app.apply(Action::Up);
    assert_eq!(app.source_top(9), 19);
    app.apply(Action::PageDown);
    assert_eq!(app.source_top(9), 28);
    app.apply(Action::End);
    assert_eq!(app.source_top(9), lines - 9);
    app.apply(Action::Down);
    app.apply(Action::PageDown);
    assert_eq!(app.source_top(9), lines - 9);
    app.apply(Action::Home);
    assert_eq!(app.source_top(9), 0);
    // Enter follows the selected line again.
    app.apply(Action::Toggle);
    assert_eq!(app.source_top(9), 20);
    std::fs::remove_dir_all(&dir).ok();
}
