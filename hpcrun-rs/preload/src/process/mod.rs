//! The process around the flow: what starts, forks and ends the
//! measurement, and keeps the profiler's signals its own.
//!
//! * [`lifecycle`]: at load (`.init_array`) reads the configuration, sets
//!   up the maps, the unwinder and the signal handlers, then measures the
//!   main thread; starts afresh in a forked child; at thread exit and
//!   process exit hands every thread's state to [`crate::output`].
//! * [`signal_hooks`]: the interposed `sigaction` family, which keeps the
//!   sample handlers of [`crate::sample`] installed whatever the program
//!   does with its own signals.
//! * [`forwarded`]: a signal that reaches the program both directly and
//!   through the launcher's forwarding runs the program's action once.
//!
//! The top layer: the only folder that may import every other.

pub mod forwarded;
pub mod lifecycle;
pub mod signal_hooks;
