//! Sampling noise: whether two totals differ by more than their Poisson
//! noise ([`beyond_noise`]), whether a row's share changed beyond it
//! ([`share_z`], [`share_beyond_noise`]: the conditional binomial test),
//! the warnings when two runs did different work (`noise_warnings`),
//! and what `--fail-if-worse` fails on ([`worse`]: the application's
//! objects only, [`is_application_object`]).

use super::percent::{change_pct, pct_text};
use super::{Diff, Total};
use crate::database::ObjectKind;

/// Whether an object is the application's own: a heap object or static
/// variable that no runtime owns (`runtime` is `DataObject::runtime`),
/// not a `<...>` bucket (small heap objects, unknown addresses, a
/// module's section). Thread stacks and unknown data are not.
pub fn is_application_object(kind: ObjectKind, name: &str, runtime: Option<&str>) -> bool {
    matches!(kind, ObjectKind::Heap | ObjectKind::Static)
        && runtime.is_none()
        && !name.starts_with('<')
}

/// Standard deviations of the difference of two sample counts beyond
/// which [`beyond_noise`] calls it real.
pub const NOISE_SIGMAS: f64 = 3.0;

/// True when two sample counts differ by more than their sampling noise:
/// `|a - b| > 3 sqrt(a + b)` (each a Poisson count).
pub fn beyond_noise(a: u64, b: u64) -> bool {
    beyond_noise_at(a, b, NOISE_SIGMAS)
}

/// [`beyond_noise`] at `sigmas` standard deviations: `|a - b| > sigmas
/// sqrt(a + b)`.
pub fn beyond_noise_at(a: u64, b: u64, sigmas: f64) -> bool {
    let (a, b) = (a as f64, b as f64);
    (a - b).abs() > sigmas * (a + b).sqrt()
}

/// The two-sided probability of a normal variable beyond `sigmas`
/// standard deviations, `erfc(sigmas / sqrt 2)` (Abramowitz and Stegun
/// 7.1.26, absolute error under 1.5e-7): 0.0027 at 3, 6.3e-5 at 4.
pub fn two_sided_p(sigmas: f64) -> f64 {
    let x = sigmas.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    (poly * (-x * x).exp()).clamp(0.0, 1.0)
}

/// The change of a row's share between two runs in standard errors: the
/// row had `before` of `total_before` samples and `after` of
/// `total_after`. Both counts are Poisson counts; if the share did not
/// change, the `n = before + after` samples of the row fall in the after
/// run with probability `q = total_after / (total_before + total_after)`
/// (the conditional test of two Poisson rates), so `z = (after - n q) /
/// sqrt(n q (1 - q))`, with a continuity correction of half a sample
/// toward 0. 0 when a run has no samples or the row has none.
pub fn share_z(before: u64, total_before: u64, after: u64, total_after: u64) -> f64 {
    let n = before + after;
    if total_before == 0 || total_after == 0 || n == 0 {
        return 0.0;
    }
    let q = total_after as f64 / (total_before as f64 + total_after as f64);
    let expected = n as f64 * q;
    let sd = (n as f64 * q * (1.0 - q)).sqrt();
    if sd <= 0.0 || sd.is_nan() {
        return 0.0;
    }
    let off = after as f64 - expected;
    off.signum() * (off.abs() - 0.5).max(0.0) / sd
}

/// Rows of at most this many samples (both runs) are judged by the exact
/// binomial test: the normal approximation of [`share_z`] calls a row of
/// 0 -> 2 samples a change.
pub(super) const EXACT_UP_TO: u64 = 1000;

/// The two-sided probability of `after` or a count further from its
/// expectation among `before + after` samples, each in the after run
/// with probability `q`, by the binomial distribution (twice the smaller
/// tail, at most 1).
pub(super) fn binomial_p(before: u64, after: u64, q: f64) -> f64 {
    let n = before + after;
    if q <= 0.0 || q >= 1.0 {
        return 1.0;
    }
    // log pmf(k), from log pmf(0) = n ln(1 - q), by the ratio of
    // successive terms.
    let ratio = (q / (1.0 - q)).ln();
    let mut log_pmf = n as f64 * (1.0 - q).ln();
    let (mut lower, mut upper) = (0.0, 0.0);
    for k in 0..=n {
        let pmf = log_pmf.exp();
        if k <= after {
            lower += pmf;
        }
        if k >= after {
            upper += pmf;
        }
        if k < n {
            log_pmf += ((n - k) as f64 / (k + 1) as f64).ln() + ratio;
        }
    }
    (2.0 * f64::min(lower, upper)).min(1.0)
}

/// True when a row's share changed by more than sampling noise explains:
/// `|`[`share_z`]`| > 3`, or for a row of at most 1,000 samples the exact
/// binomial test at the same level (0.27%, two-sided).
pub fn share_beyond_noise(before: u64, total_before: u64, after: u64, total_after: u64) -> bool {
    share_beyond_noise_at(before, total_before, after, total_after, NOISE_SIGMAS)
}

/// [`share_beyond_noise`] at `sigmas` standard deviations (the exact
/// test at [`two_sided_p`]`(sigmas)`).
pub fn share_beyond_noise_at(
    before: u64,
    total_before: u64,
    after: u64,
    total_after: u64,
    sigmas: f64,
) -> bool {
    let n = before + after;
    if total_before == 0 || total_after == 0 || n == 0 {
        return false;
    }
    if n <= EXACT_UP_TO {
        let q = total_after as f64 / (total_before as f64 + total_after as f64);
        binomial_p(before, after, q) < two_sided_p(sigmas)
    } else {
        share_z(before, total_before, after, total_after).abs() > sigmas
    }
}

/// The relative difference of two run times that `samples_before` and
/// `samples_after` samples can resolve: `3 sqrt(1/N_b + 1/N_a)`
/// (infinite without samples).
pub fn time_resolution(samples_before: u64, samples_after: u64) -> f64 {
    time_resolution_at(samples_before, samples_after, NOISE_SIGMAS)
}

/// [`time_resolution`] at `sigmas` standard deviations.
pub fn time_resolution_at(samples_before: u64, samples_after: u64, sigmas: f64) -> f64 {
    if samples_before == 0 || samples_after == 0 {
        return f64::INFINITY;
    }
    sigmas * (1.0 / samples_before as f64 + 1.0 / samples_after as f64).sqrt()
}

/// What [`Diff::warnings`] says (see the module documentation).
pub(super) fn noise_warnings(t: &Total, sigmas: f64) -> Vec<String> {
    let mut out = Vec::new();
    // All samples when the event counts them (cpu_samples), else the
    // memory samples.
    let (b, a) = match (t.cpu_before, t.cpu_after) {
        (Some(b), Some(a)) => (b, a),
        _ => (t.before, t.after),
    };
    if beyond_noise_at(b, a, sigmas) {
        out.push(format!(
            "the runs' total samples differ by more than sampling noise: {b} -> {a} ({}), \
             noise is within {:.0} samples ({sigmas} sqrt(before + after)); the runs did different \
             work or ran under different conditions (machine load, input, period): compare \
             shares (d.share) rather than sample counts",
            pct_text(change_pct(b, a)),
            sigmas * ((a + b) as f64).sqrt()
        ));
    }
    if let (Some(tb), Some(ta)) = (t.cpu_time_before_ns, t.cpu_time_after_ns) {
        let rel = (ta as f64 - tb as f64).abs() / (0.5 * (ta + tb) as f64);
        let resolution = time_resolution_at(b, a, sigmas);
        if rel > resolution {
            out.push(format!(
                "the runs' CPU times differ by more than their noise: {:.2} s -> {:.2} s ({}), \
                 more than the {:.1}% these samples resolve ({sigmas} sqrt(1/N_before + 1/N_after))",
                tb as f64 / 1e9,
                ta as f64 / 1e9,
                pct_text(change_pct(tb, ta)),
                100.0 * resolution
            ));
        }
    }
    out
}

/// Reasons to fail `--fail-if-worse PCT`: the memory time of the
/// application's objects rose by more than `pct` percent and by more than
/// its sampling noise ([`beyond_noise`]), or a matched application object
/// ([`is_application_object`]) holding at least `min_share` of either run
/// rose by more than `pct` percent and its row changed beyond noise with
/// a growing share ([`Row::beyond_noise`](super::Row::beyond_noise), `z > 0`: the row's verdict).
/// Thread stacks, runtime objects and the `<...>` buckets are not judged.
/// The total follows the run's CPU time, which machine load changes too:
/// when no application object's share rose beyond noise, its reason says
/// that every object rose alike. Empty when nothing got worse beyond
/// noise.
pub fn worse(d: &Diff, pct: f64, min_share: f64) -> Vec<String> {
    let mut out = Vec::new();
    let limit = 1.0 + pct / 100.0;
    let (tb, ta) = (d.total.application_before, d.total.application_after);
    if ta as f64 > tb as f64 * limit && ta > 0 && beyond_noise_at(tb, ta, d.noise_sigmas) {
        let share_rose = d.objects.iter().any(|r| {
            r.application && r.beyond_noise && r.z > 0.0 && r.before.is_some() && r.after.is_some()
        });
        out.push(format!(
            "total memory time rose from {tb} to {ta} samples in the application's objects ({}), \
             beyond sampling noise ({:.0} samples){}",
            pct_text(change_pct(tb, ta)),
            d.noise_sigmas * ((ta + tb) as f64).sqrt(),
            if share_rose {
                ""
            } else {
                "; no object's share rose beyond noise: every object took longer alike, as \
                 under another machine load or CPU frequency, or after a change that slows all \
                 code (compiler flags)"
            }
        ));
    }
    for r in &d.objects {
        let (Some(b), Some(a)) = (r.before, r.after) else {
            continue;
        };
        if !r.application || !r.beyond_noise || r.z <= 0.0 {
            continue;
        }
        if b.share.max(a.share) < min_share {
            continue;
        }
        if a.samples as f64 > b.samples as f64 * limit {
            out.push(format!(
                "object {} ({}) rose from {} to {} samples ({}), its share from {:.1}% to {:.1}% \
                 (z {:+.1}, beyond sampling noise)",
                r.name,
                if r.site.is_empty() {
                    r.kind.as_str()
                } else {
                    &r.site
                },
                b.samples,
                a.samples,
                pct_text(r.change_pct),
                100.0 * b.share,
                100.0 * a.share,
                r.z
            ));
        }
    }
    out
}
