//! Configuration passed by `hpcrun-rs` through the environment: the
//! contract (variable names, grammars, defaults, [`Config`]) is the
//! `hpcrun-abi` crate's, shared with the launcher; this module reads it
//! once per process.

use std::sync::OnceLock;

pub use hpcrun_abi::config::RunConfig as Config;

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Reads the configuration once (outside any signal handler).
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| Config::from_env(|name| std::env::var(name).ok()))
}

/// The configuration if it has been read.
pub fn try_get() -> Option<&'static Config> {
    CONFIG.get()
}
