//! Distributions over threads and ranks: [`Acc`], the streaming summary
//! of a node's value (count of non-zero values, sum, sum of squares, min,
//! max) that becomes a [`Dist`] once the number of threads (or ranks) is
//! known.

use formats::database::Dist;
use serde::{Deserialize, Serialize};

/// Streaming summary of a value over threads (or ranks); only non-zero
/// values are added, the zeros are implied by the final count.
///
/// 40 bytes (one per tree node): the sum of squares is kept in 96 bits
/// (`sumsq_hi`, `sumsq_lo`; saturating at 2^96, i.e. values of 2^48 per
/// thread) instead of a 16-byte aligned `u128`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Acc {
    pub(super) count: u32,
    pub(super) sumsq_hi: u32,
    pub(super) sumsq_lo: u64,
    pub(super) sum: u64,
    pub(super) min: u64,
    pub(super) max: u64,
}

impl Default for Acc {
    fn default() -> Self {
        Acc {
            count: 0,
            sumsq_hi: 0,
            sumsq_lo: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

/// Largest sum of squares an [`Acc`] holds.
pub(super) const SUMSQ_MAX: u128 = (1 << 96) - 1;

impl Acc {
    pub(super) fn sumsq(&self) -> u128 {
        (u128::from(self.sumsq_hi) << 64) | u128::from(self.sumsq_lo)
    }

    pub(super) fn add_sumsq(&mut self, v: u128) {
        let s = self.sumsq().saturating_add(v).min(SUMSQ_MAX);
        self.sumsq_hi = (s >> 64) as u32;
        self.sumsq_lo = s as u64;
    }

    pub(super) fn add(&mut self, v: u64) {
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        self.add_sumsq(u128::from(v) * u128::from(v));
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub(super) fn absorb(&mut self, o: &Acc) {
        self.count += o.count;
        self.sum = self.sum.saturating_add(o.sum);
        self.add_sumsq(o.sumsq());
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// The summary over `n` threads (or ranks), those not added being 0.
    pub(super) fn dist(&self, n: u32) -> Dist {
        let n = n.max(self.count);
        if n == 0 {
            return Dist::default();
        }
        let nf = f64::from(n);
        let mean = self.sum as f64 / nf;
        // Population variance (n*sumsq - sum^2) / n^2, exact in u128 when
        // it fits.
        let sum = u128::from(self.sum);
        let sumsq = self.sumsq();
        let var = match (u128::from(n).checked_mul(sumsq), sum.checked_mul(sum)) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / (nf * nf),
            _ => (sumsq as f64 / nf - mean * mean).max(0.0),
        };
        Dist {
            count: n,
            min: if self.count < n || self.count == 0 {
                0.0
            } else {
                self.min as f64
            },
            max: self.max as f64,
            mean,
            stddev: var.sqrt(),
        }
    }
}
