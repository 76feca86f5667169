//! Bottleneck priority: memory-boundness x latency share, with the advice of
//! the quadrant table in docs/FORMATS.md (`--view bottleneck`). The rule
//! itself (proxy, thresholds, quadrant, order) is `formats::views`'s; this
//! module applies it to the viewer's rows.
//!
//! `mem:soft` measures no latency and no instruction count, so the
//! memory-boundness used here is a proxy that the software source can
//! measure: the **share of sampled CPU time spent on memory-accessing
//! instructions**, `samples / cpu_samples` (`samples` counts the timer's
//! sample periods whose skid-corrected instruction reads or writes memory,
//! `cpu_samples` all its sample periods), taken from the code-centric tree
//! for the code in question:
//!
//! * a code-centric node (top-down, callers, flat): its own inclusive
//!   `samples / cpu_samples`;
//! * a data object or access-path node: the proxy of every function whose
//!   instructions accessed it (that function's exclusive `samples /
//!   cpu_samples` in the code-centric tree), weighted by the node's samples
//!   in that function.
//!
//! Data objects (data pane) and functions (bottom-up and flat panes) take
//! their proxy and quadrant from `formats::views::bottleneck`, the rule that
//! `hpcprof-rs export --view bottleneck` uses: a function's proxy is its
//! exclusive `samples / cpu_samples`, its share its exclusive share; an
//! object's proxy is its `samples` over the summed `cpu_samples` of the
//! functions whose instructions accessed it. Rows inside the trees (call
//! path nodes, callers, lines, access paths) use the same rule on their own
//! values: a code node its inclusive `samples / cpu_samples`, an access-path
//! node the proxy of the functions that accessed it through that path,
//! weighted by its samples in each.
//!
//! The latency share is the node's share of the primary metric's total.
//! Both are "high" at or above [`MEM_HIGH`] and [`SHARE_HIGH`]. The
//! bottleneck order is by quadrant (optimise first, low priority, little
//! benefit, no need), then by `share x proxy`; the viewer puts the rows of
//! MPI libraries and OpenMP runtimes after the program's, among siblings
//! at every level (the panes' sort in [`super::tree`]).
//!
//! ```
//! use hpcview_tui::state::bottleneck::{classify, Quadrant};
//! let b = classify(Some(0.9), 0.8);
//! assert_eq!(b.quadrant, Quadrant::OptimiseFirst);
//! assert!((b.score - 0.72).abs() < 1e-12);
//! assert_eq!(classify(Some(0.2), 0.8).quadrant, Quadrant::LittleBenefit);
//! ```

pub use formats::views::Quadrant;
use formats::views::{priority_score, Thresholds};

/// Proxy at or above which code counts as memory bound: more than half of
/// its sampled time is on memory-accessing instructions (the same
/// threshold as `formats::views::bottleneck`, i.e. `hpcprof-rs export
/// --view bottleneck`).
pub const MEM_HIGH: f64 = formats::views::MEM_TIME_SHARE_HIGH;

/// Share of the total at or above which a node counts as a large share.
pub const SHARE_HIGH: f64 = formats::views::SHARE_HIGH;

/// A short form of the advice for a table column.
pub fn short(q: Quadrant) -> &'static str {
    match q {
        Quadrant::NoNeed => "no need",
        Quadrant::LittleBenefit => "little gain",
        Quadrant::LowPriority => "low priority",
        Quadrant::OptimiseFirst => "OPTIMISE 1st",
    }
}

/// The bottleneck figures of one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bottleneck {
    /// Memory-boundness proxy (None without a `cpu_samples` metric).
    pub mem: Option<f64>,
    /// Share of the primary metric's total.
    pub share: f64,
    /// `share x mem` (`share` without a proxy), the order within a quadrant.
    pub score: f64,
    pub quadrant: Quadrant,
}

/// Classifies a node by its proxy and share. Without a proxy the node is
/// ranked as if memory bound (every `samples` sample is a memory access),
/// as `formats::views::bottleneck` does.
pub fn classify(mem: Option<f64>, share: f64) -> Bottleneck {
    let (_, _, quadrant) = Thresholds::default().classify(share, mem);
    Bottleneck {
        mem,
        share,
        score: priority_score(share, mem),
        quadrant,
    }
}

/// `num / den` capped at 1 (0 when `den` is 0), None without a `cpu_samples`
/// metric (`has_cpu` false): [`formats::views::mem_time_share`].
pub use formats::views::mem_time_share as ratio;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadrants() {
        assert_eq!(classify(Some(0.1), 0.01).quadrant, Quadrant::NoNeed);
        assert_eq!(classify(Some(0.1), 0.5).quadrant, Quadrant::LittleBenefit);
        assert_eq!(classify(Some(0.9), 0.01).quadrant, Quadrant::LowPriority);
        assert_eq!(
            classify(Some(MEM_HIGH), SHARE_HIGH).quadrant,
            Quadrant::OptimiseFirst
        );
        assert_eq!(classify(None, 0.5).quadrant, Quadrant::OptimiseFirst);
        assert_eq!(classify(None, 0.5).score, 0.5);
        assert_eq!(ratio(1, 0, true), Some(0.0));
        assert_eq!(ratio(1, 4, true), Some(0.25));
        assert_eq!(ratio(5, 4, true), Some(1.0));
        assert_eq!(ratio(1, 4, false), None);
    }
}
