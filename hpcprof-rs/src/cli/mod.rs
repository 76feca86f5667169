//! `hpcprof-rs`'s command line, by step: the arguments ([`args`]), the
//! merge and what it prints ([`merge`], [`summary`]), each subcommand's
//! driver ([`export`], [`diff`], [`advise`]) and the paths they read and
//! write ([`paths`]). The work itself is the `hpcprof_rs` library's and
//! `formats`'.

pub(crate) mod advise;
pub(crate) mod args;
pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod merge;
pub(crate) mod paths;
pub(crate) mod summary;
