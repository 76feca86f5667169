//! Where a sample becomes an attributed access: the signal handlers.
//!
//! A sample arrives as a signal: the `mem:soft` or `cpu-time` timer, a
//! hardware record from [`crate::pmu`], a page fault, a watchpoint trap.
//! [`handler`] takes it on the interrupted thread, without allocating or
//! locking: [`attribute`] finds the instruction the period belongs to and
//! the data address it used (with [`crate::access`]), the object map
//! ([`crate::objects`]) or the static-variable map ([`crate::code`]) names
//! the object, the unwinder ([`crate::code::unwind`]) gives the call
//! path.
//!
//! Hands to the next step: the access, inserted as a path with its metrics
//! into the thread's calling-context trees ([`crate::cct`]) and its
//! per-access tables, both in the thread's state ([`crate::threads`]).

pub mod attribute;
pub mod handler;
