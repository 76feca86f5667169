//! Access patterns of data objects: the stride of each access site (a
//! sampled instruction under an object) and its classification.
//!
//! The preload library keeps, per thread and per (object, instruction),
//! two small sets of counted values (see docs/GUIDE.md, "Access
//! patterns"):
//!
//! * `strides`: the per-iteration element stride the decoder derived from
//!   the instruction's loop (base/index registers stepped by constants or
//!   loop-invariant registers, the unroll factor, the operand's element
//!   size), one count per sample;
//! * `deltas`: the difference between this sample's address and the
//!   previous sampled address of the same instruction in the same object
//!   and thread. Samples are far apart in time, so a delta is a multiple
//!   of the true stride plus whatever the outer loops moved; deltas are
//!   used where the decoder gives nothing, and tell a data-dependent
//!   (irregular) access from a walk.
//!
//! ```
//! use formats::patterns::{StrideCounts, Regularity};
//! let site = StrideCounts {
//!     element_bytes: 8,
//!     strides: vec![(320_000, 95), (8, 5)],
//!     ..Default::default()
//! };
//! let p = site.pattern().unwrap();
//! assert_eq!(p.regularity, Regularity::Regular);
//! assert_eq!(p.strides[0].bytes, 320_000);
//! assert_eq!(p.strides[0].elements, Some(40_000));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counted values the preload keeps per site and thread, for each kind.
pub const STRIDE_SLOTS: usize = 4;

/// A site is regular when one stride has at least this share of its
/// observations.
pub const REGULAR_SHARE: f64 = 0.6;

/// Deltas needed before a site without a decoder stride is classified.
pub const MIN_DELTAS: u64 = 3;

/// Strides listed per site or object.
pub const TOP_STRIDES: usize = 3;

/// Strides with a smaller share are not listed (the deltas of an
/// irregular access are all different: listing them says nothing).
pub const MIN_LISTED_SHARE: f64 = 0.05;

/// Reuse buckets of the watchpoint reuse analysis (`-e reuse`): the
/// thread CPU time until a sampled word was touched again by the same
/// thread, or that it was not touched before the watch was re-armed for
/// a later sample (one to a few sampling periods). Bucket `i` of the
/// measurement and database histograms is `REUSE_BUCKETS[i]`. The time
/// includes the trap's own delivery (10-50 us in a VM): the first bucket
/// means "at once" (a table, a loop-carried value).
pub const REUSE_BUCKETS: [&str; 5] = ["< 100 us", "< 1 ms", "< 10 ms", ">= 10 ms", "not reused"];

/// What was observed at one access site (per thread in a measurement
/// file, summed over threads in a database).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrideCounts {
    /// Sampled accesses with a recovered address at this site.
    #[serde(default)]
    pub samples: u64,
    /// Size of one element of the operand (8 for a double, also for a
    /// 16-byte vector of doubles); 0 when unknown.
    #[serde(default)]
    pub element_bytes: u32,
    /// Decoder strides, (bytes, samples), signed (negative: walking down).
    #[serde(default)]
    pub strides: Vec<(i64, u64)>,
    /// Decoder strides that did not fit the preload's slots.
    #[serde(default)]
    pub other_strides: u64,
    /// Samples whose address the decoder found to depend on data (an
    /// address register loaded from memory in the loop: indirection,
    /// pointer chase): irregular by construction.
    #[serde(default)]
    pub data_dependent: u64,
    /// Sampled address deltas, (bytes, count).
    #[serde(default)]
    pub deltas: Vec<(i64, u64)>,
    /// Deltas that did not fit the slots.
    #[serde(default)]
    pub other_deltas: u64,
    /// Greatest common divisor of the non-zero deltas (0: none).
    #[serde(default)]
    pub delta_gcd: u64,
}

/// Where a pattern's strides come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StrideSource {
    /// The instruction's loop, decoded.
    Decoder,
    /// Deltas between sampled addresses.
    Samples,
}

/// Regular: one dominant stride ([`REGULAR_SHARE`]); irregular otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Regularity {
    Regular,
    Irregular,
}

/// One stride with its share of the observations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StrideShare {
    /// Signed bytes between consecutive accesses.
    pub bytes: i64,
    /// `bytes` in elements of the operand (`None` when the element size
    /// is unknown or does not divide it).
    pub elements: Option<i64>,
    pub share: f64,
}

/// A classified site or object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pattern {
    pub regularity: Regularity,
    pub source: StrideSource,
    /// The observations the shares are of.
    pub observations: u64,
    /// The top strides, largest share first.
    pub strides: Vec<StrideShare>,
    /// Share of the observations whose address depends on data.
    pub data_dependent: f64,
}

fn elements(bytes: i64, element: u32) -> Option<i64> {
    let e = i64::from(element);
    (e > 0 && bytes % e == 0).then(|| bytes / e)
}

/// Adds (value, count) pairs into a map.
fn add_into(map: &mut BTreeMap<i64, u64>, pairs: &[(i64, u64)]) {
    for &(v, n) in pairs {
        let e = map.entry(v).or_default();
        *e = e.saturating_add(n);
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Ranks counted strides: the top [`TOP_STRIDES`] with their shares of
/// `total` (which includes uncounted observations), and the regularity.
fn rank(
    counts: &BTreeMap<i64, u64>,
    total: u64,
    element: impl Fn(i64) -> u32,
) -> (Regularity, Vec<StrideShare>) {
    let mut list: Vec<(i64, u64)> = counts.iter().map(|(&v, &n)| (v, n)).collect();
    // Largest count first; ties: the smaller stride.
    list.sort_by_key(|&(v, n)| (std::cmp::Reverse(n), v.unsigned_abs(), v));
    let share = |n: u64| n as f64 / total.max(1) as f64;
    let regular = list
        .first()
        .is_some_and(|&(_, n)| share(n) >= REGULAR_SHARE);
    let strides = list
        .into_iter()
        .filter(|&(_, n)| share(n) >= MIN_LISTED_SHARE)
        .take(TOP_STRIDES)
        .map(|(bytes, n)| StrideShare {
            bytes,
            elements: elements(bytes, element(bytes)),
            share: share(n),
        })
        .collect();
    let regularity = if regular {
        Regularity::Regular
    } else {
        Regularity::Irregular
    };
    (regularity, strides)
}

impl StrideCounts {
    /// Adds another thread's (or site's) counts.
    pub fn absorb(&mut self, other: &StrideCounts) {
        self.samples = self.samples.saturating_add(other.samples);
        if self.element_bytes == 0 {
            self.element_bytes = other.element_bytes;
        }
        let mut strides = BTreeMap::new();
        add_into(&mut strides, &self.strides);
        add_into(&mut strides, &other.strides);
        self.strides = strides.into_iter().collect();
        let mut deltas = BTreeMap::new();
        add_into(&mut deltas, &self.deltas);
        add_into(&mut deltas, &other.deltas);
        self.deltas = deltas.into_iter().collect();
        self.other_strides = self.other_strides.saturating_add(other.other_strides);
        self.data_dependent = self.data_dependent.saturating_add(other.data_dependent);
        self.other_deltas = self.other_deltas.saturating_add(other.other_deltas);
        self.delta_gcd = gcd(self.delta_gcd, other.delta_gcd);
    }

    /// Observations of the decoder (strides and data-dependent).
    pub fn stride_observations(&self) -> u64 {
        self.strides.iter().map(|s| s.1).sum::<u64>() + self.other_strides + self.data_dependent
    }

    /// Observations of deltas.
    pub fn delta_observations(&self) -> u64 {
        self.deltas.iter().map(|s| s.1).sum::<u64>() + self.other_deltas
    }

    /// The source whose observations classify this site: the decoder
    /// when it gave strides, else the deltas when there are at least
    /// [`MIN_DELTAS`]; `None` without either.
    pub fn source(&self) -> Option<StrideSource> {
        if self.stride_observations() > 0 {
            Some(StrideSource::Decoder)
        } else if self.delta_observations() >= MIN_DELTAS {
            Some(StrideSource::Samples)
        } else {
            None
        }
    }

    /// The site's pattern (see [`StrideCounts::source`]).
    pub fn pattern(&self) -> Option<Pattern> {
        let source = self.source()?;
        let (pairs, total) = match source {
            StrideSource::Decoder => (&self.strides, self.stride_observations()),
            StrideSource::Samples => (&self.deltas, self.delta_observations()),
        };
        let mut map = BTreeMap::new();
        add_into(&mut map, pairs);
        let (regularity, strides) = rank(&map, total, |_| self.element_bytes);
        let data = match source {
            StrideSource::Decoder => self.data_dependent,
            StrideSource::Samples => 0,
        };
        Some(Pattern {
            regularity,
            source,
            observations: total,
            strides,
            data_dependent: data as f64 / total as f64,
        })
    }
}

/// The pattern of an object over all its sites, sample-weighted: each
/// site contributes the observations of its own source; the dominant
/// stride is the one most observations saw. `None` when no site has a
/// pattern.
pub fn object_pattern<'a>(sites: impl IntoIterator<Item = &'a StrideCounts>) -> Option<Pattern> {
    let mut map = BTreeMap::new();
    // Stride -> (element size of the site that contributed most of it).
    let mut element: BTreeMap<i64, (u64, u32)> = BTreeMap::new();
    let mut total = 0u64;
    let mut data = 0u64;
    let mut by_source = [0u64; 2];
    for s in sites {
        let Some(source) = s.source() else {
            continue;
        };
        let (pairs, n) = match source {
            StrideSource::Decoder => (&s.strides, s.stride_observations()),
            StrideSource::Samples => (&s.deltas, s.delta_observations()),
        };
        total += n;
        if source == StrideSource::Decoder {
            data += s.data_dependent;
        }
        by_source[usize::from(source == StrideSource::Samples)] += n;
        add_into(&mut map, pairs);
        for &(v, c) in pairs {
            let e = element.entry(v).or_default();
            if c > e.0 {
                *e = (c, s.element_bytes);
            }
        }
    }
    if total == 0 {
        return None;
    }
    let (regularity, strides) = rank(&map, total, |v| element.get(&v).map_or(0, |e| e.1));
    let source = if by_source[0] >= by_source[1] {
        StrideSource::Decoder
    } else {
        StrideSource::Samples
    };
    Some(Pattern {
        regularity,
        source,
        observations: total,
        strides,
        data_dependent: data as f64 / total as f64,
    })
}

/// "320000 bytes (40000 doubles)", "8 bytes (1 element)", "-16 bytes".
pub fn stride_text(s: &StrideShare) -> String {
    match s.elements {
        Some(1) | Some(-1) => format!("{} bytes ({} element)", s.bytes, s.elements.unwrap_or(1)),
        Some(e) => format!("{} bytes ({e} elements)", s.bytes),
        None => format!("{} bytes", s.bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder(strides: &[(i64, u64)], other: u64) -> StrideCounts {
        StrideCounts {
            element_bytes: 8,
            strides: strides.to_vec(),
            other_strides: other,
            ..Default::default()
        }
    }

    #[test]
    fn one_dominant_stride_is_regular() {
        let p = decoder(&[(8, 60), (16, 40)], 0).pattern().unwrap();
        assert_eq!(p.regularity, Regularity::Regular);
        assert_eq!(p.source, StrideSource::Decoder);
        assert_eq!(p.strides[0].bytes, 8);
        assert_eq!(p.strides[0].elements, Some(1));
        assert!((p.strides[0].share - 0.6).abs() < 1e-12);
    }

    #[test]
    fn no_dominant_stride_is_irregular() {
        // 59%: below the threshold.
        let p = decoder(&[(8, 59), (16, 41)], 0).pattern().unwrap();
        assert_eq!(p.regularity, Regularity::Irregular);
        // Observations that did not fit the slots count against the share.
        let p = decoder(&[(8, 50)], 50).pattern().unwrap();
        assert_eq!(p.regularity, Regularity::Irregular);
        assert!((p.strides[0].share - 0.5).abs() < 1e-12);
    }

    #[test]
    fn deltas_classify_only_without_decoder_strides() {
        let mut s = StrideCounts {
            element_bytes: 8,
            deltas: vec![(24, 1), (-4096, 1), (800, 1), (72, 1)],
            other_deltas: 6,
            ..Default::default()
        };
        let p = s.pattern().unwrap();
        assert_eq!(p.source, StrideSource::Samples);
        assert_eq!(p.regularity, Regularity::Irregular);
        assert_eq!(p.observations, 10);
        // Too few deltas: no pattern.
        s.deltas.truncate(2);
        s.other_deltas = 0;
        assert!(s.pattern().is_none());
        // Decoder strides win over any deltas.
        s.strides = vec![(-8, 3)];
        let p = s.pattern().unwrap();
        assert_eq!(p.source, StrideSource::Decoder);
        assert_eq!(p.strides[0].bytes, -8);
        assert_eq!(p.strides[0].elements, Some(-1));
    }

    #[test]
    fn data_dependent_addresses_are_irregular() {
        let s = StrideCounts {
            strides: vec![(8, 2)],
            data_dependent: 98,
            ..Default::default()
        };
        let p = s.pattern().unwrap();
        assert_eq!(p.regularity, Regularity::Irregular);
        assert_eq!(p.source, StrideSource::Decoder);
        assert!((p.data_dependent - 0.98).abs() < 1e-12);
        // 2%: below the listed share.
        assert!(p.strides.is_empty());
    }

    #[test]
    fn elements_need_a_dividing_element_size() {
        let mut s = decoder(&[(12, 5)], 0);
        assert_eq!(s.pattern().unwrap().strides[0].elements, None);
        s.element_bytes = 0;
        s.strides = vec![(16, 5)];
        assert_eq!(s.pattern().unwrap().strides[0].elements, None);
    }

    #[test]
    fn absorb_sums_per_stride_and_keeps_the_gcd() {
        let mut a = StrideCounts {
            samples: 5,
            strides: vec![(8, 3), (16, 2)],
            delta_gcd: 24,
            ..Default::default()
        };
        let b = StrideCounts {
            samples: 4,
            element_bytes: 8,
            strides: vec![(8, 4)],
            other_strides: 1,
            delta_gcd: 40,
            ..Default::default()
        };
        a.absorb(&b);
        assert_eq!(a.samples, 9);
        assert_eq!(a.element_bytes, 8);
        assert_eq!(a.strides, vec![(8, 7), (16, 2)]);
        assert_eq!(a.other_strides, 1);
        assert_eq!(a.delta_gcd, 8);
    }

    #[test]
    fn object_pattern_weights_sites_by_samples() {
        let heavy = decoder(&[(320_000, 90)], 0);
        let light = decoder(&[(8, 10)], 0);
        let p = object_pattern([&heavy, &light]).unwrap();
        assert_eq!(p.regularity, Regularity::Regular);
        assert_eq!(p.strides[0].bytes, 320_000);
        assert_eq!(p.strides[0].elements, Some(40_000));
        assert!((p.strides[0].share - 0.9).abs() < 1e-12);
        assert!(object_pattern(std::iter::empty()).is_none());
    }
}
