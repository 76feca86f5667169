//! What one sampled access is: the pieces the sample handler
//! ([`crate::sample`]) runs to attribute a sample, and the per-access
//! tables it fills. Pure data structures and decoders over [`crate::sys`];
//! nothing here knows about threads or files.
//!
//! * The instruction: [`soft`] (the `mem:soft` decoder: the instruction
//!   before the interrupted IP, its data address from the registers),
//!   [`anchors`] (known instruction boundaries, so a function is decoded
//!   from its start once), [`blame`] (which instruction a period belongs
//!   to, and by which rule), [`in_flight`] (a load sample shared with the
//!   loop's other loads in flight, by their memory traffic).
//! * Its shape: [`stride`] (the stride from the decoded loop),
//!   [`patterns`] (the per-thread stride tables of each access site).
//! * Its memory: [`pages`] (first touch), [`numa`] (local or remote
//!   node), [`regions`] (the address-space region of an address no object
//!   holds), [`caches`] (the machine's cache sizes), [`watch`]
//!   (watchpoints on sampled words: sharing and reuse).
//! * Its cost: [`handler_time`] (the histogram of the handler's time per
//!   sample).
//!
//! Hands to the next step: the attribution of an access (instruction, data
//! address, rule, stride, page facts) to [`crate::sample`], which inserts
//! it into the thread's trees; the tables, held per thread in
//! [`crate::threads`], are read by [`crate::output`] into the profile.

pub mod anchors;
pub mod blame;
pub mod caches;
pub mod handler_time;
pub mod in_flight;
pub mod numa;
pub mod pages;
pub mod patterns;
pub mod regions;
pub mod soft;
pub mod stride;
pub mod watch;
