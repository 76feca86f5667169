//! `hpcview-tui`: looks at an `hpcprof-rs` database in a terminal.
//!
//! The crate is split like tokio-console's viewer:
//!
//! * [`state`]: plain data, no terminal: the loaded database with its
//!   indices ([`state::model`]), the outlines of the panes (tree
//!   flattening, expansion, sorting, search, selection: [`state::tree`]),
//!   the bottleneck priority ([`state::bottleneck`]) and the whole viewer
//!   state ([`state::AppState`]), changed only through [`state::Action`]s;
//! * [`view`]: ratatui widgets that draw an `AppState`;
//! * [`app`]: the crossterm event loop (keys -> actions -> redraw);
//! * [`report`]: the headless text report (`--report`);
//! * [`fixtures`]: hand-built databases for tests and benchmarks.
//!
//! ```
//! use hpcview_tui::state::{model::Model, Action, AppState};
//! let mut app = AppState::new(Model::new(hpcview_tui::fixtures::abc(), None));
//! app.apply(Action::Bottleneck);
//! assert_eq!(app.pane().selected_item().unwrap().label, "C");
//! ```

#![forbid(unsafe_code)]

pub mod app;
pub mod findings;
#[doc(hidden)]
pub mod fixtures;
pub mod report;
pub mod state;
pub mod view;
