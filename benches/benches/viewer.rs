//! hpcview-tui on a synthetic database of 1 million tree nodes
//! (`hpcview_tui::fixtures::synthetic`: half code tree, half data tree,
//! 1000 heap objects, 5000 frames):
//!
//! * `viewer/open_1m_nodes`: read + decode + validate `profile.db`, build
//!   the indices and the data-centric pane, draw the first screen (goal:
//!   at most 1 s);
//! * `viewer/key/*`: one keypress (crossterm key -> action -> state change)
//!   plus a full redraw on a 100x30 `TestBackend` (goal: at most 50 ms);
//! * `viewer/first/*`: keypresses whose first use does O(n) work (building
//!   the bottom-up pane, a search over the whole tree), each on a fresh
//!   viewer.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use hpcview_tui::state::model::Model;
use hpcview_tui::state::AppState;
use hpcview_tui::{app, fixtures, view};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

const NODES: usize = 1_000_000;

fn press(state: &mut AppState, term: &mut Terminal<TestBackend>, code: KeyCode) {
    let key = KeyEvent::new(code, KeyModifiers::NONE);
    if let Some(action) = app::keymap(state, key) {
        state.apply(action);
    }
    term.draw(|f| view::draw(f, state, view::Theme { color: true }))
        .unwrap();
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("hpcview-bench-{}", std::process::id()));
    let db = fixtures::synthetic(NODES);
    let nodes = db.code.nodes.len() + db.data.nodes.len();
    fixtures::write(&db, &dir, &[]).unwrap();
    drop(db);
    eprintln!(
        "viewer bench: {nodes} tree nodes, profile.db {} bytes",
        std::fs::metadata(dir.join("profile.db")).unwrap().len()
    );

    breakdown(&dir);

    let mut g = c.benchmark_group("viewer");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("open_1m_nodes", |b| {
        // Until the first screen is drawn; freeing the viewer afterwards
        // (at exit) is not part of opening.
        b.iter_with_large_drop(|| {
            let mut state = AppState::new(Model::open(&dir).unwrap());
            let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
            term.draw(|f| view::draw(f, &mut state, view::Theme { color: true }))
                .unwrap();
            black_box(state.pane().visible.len());
            state
        })
    });

    let mut state = AppState::new(Model::open(&dir).unwrap());
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    press(&mut state, &mut term, KeyCode::Null);
    g.sample_size(100);
    g.measurement_time(Duration::from_secs(3));
    let keys: &[(&str, &[KeyCode])] = &[
        ("down_j", &[KeyCode::Char('j')]),
        ("up_k", &[KeyCode::Char('k')]),
        ("page_down_up", &[KeyCode::PageDown, KeyCode::PageUp]),
        ("end_home", &[KeyCode::End, KeyCode::Home]),
        ("expand_collapse_enter", &[KeyCode::Enter]),
        (
            "code_data_views_c_d",
            &[KeyCode::Char('c'), KeyCode::Char('d')],
        ),
        ("bottleneck_b", &[KeyCode::Char('b')]),
        ("sort_s", &[KeyCode::Char('s')]),
        ("reverse_r", &[KeyCode::Char('r')]),
        ("tab", &[KeyCode::Tab]),
        ("help", &[KeyCode::Char('?'), KeyCode::Esc]),
    ];
    for (name, seq) in keys {
        g.bench_function(format!("key/{name}"), |b| {
            b.iter(|| {
                for &k in *seq {
                    press(&mut state, &mut term, k);
                }
            })
        });
    }
    // Search: type "/object_99", Enter, then n repeatedly (steady state).
    press(&mut state, &mut term, KeyCode::Char('d'));
    for k in "/object_99".chars() {
        press(&mut state, &mut term, KeyCode::Char(k));
    }
    press(&mut state, &mut term, KeyCode::Enter);
    g.bench_function("key/search_next_n", |b| {
        b.iter(|| press(&mut state, &mut term, KeyCode::Char('n')))
    });

    // First use of keys that do O(n) work, each on a fresh viewer.
    g.sample_size(10);
    g.bench_function("first/c_top_down", |b| {
        b.iter_custom(|iters| fresh(&dir, iters, &[KeyCode::Char('c')]))
    });
    g.bench_function("first/c_c_bottom_up", |b| {
        b.iter_custom(|iters| fresh(&dir, iters, &[KeyCode::Char('c'), KeyCode::Char('c')]))
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One opening, step by step (printed, for docs/PERFORMANCE.md).
fn breakdown(dir: &std::path::Path) {
    for _ in 0..3 {
        let t = Instant::now();
        let bytes = std::fs::read(dir.join("profile.db")).unwrap();
        let read = t.elapsed();
        let t = Instant::now();
        let db = formats::database::Database::from_bytes(&bytes).unwrap();
        let decode = t.elapsed();
        let t = Instant::now();
        let model = Model::new(db, Some(dir.to_path_buf()));
        let index = t.elapsed();
        let t = Instant::now();
        let mut state = AppState::new(model);
        let pane = t.elapsed();
        let t = Instant::now();
        let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
        term.draw(|f| view::draw(f, &mut state, view::Theme { color: true }))
            .unwrap();
        let draw = t.elapsed();
        eprintln!(
            "open breakdown: read {read:?}, decode+validate {decode:?}, indices {index:?}, data pane {pane:?}, first draw {draw:?}"
        );
    }
}

/// Total time of the last key of `seq` (after the others), on fresh
/// viewers.
fn fresh(dir: &std::path::Path, iters: u64, seq: &[KeyCode]) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut state = AppState::new(Model::open(dir).unwrap());
        let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
        press(&mut state, &mut term, KeyCode::Null);
        let (last, before) = seq.split_last().unwrap();
        for &k in before {
            press(&mut state, &mut term, k);
        }
        let t = Instant::now();
        press(&mut state, &mut term, *last);
        total += t.elapsed();
    }
    total
}

criterion_group!(benches, bench);
criterion_main!(benches);
