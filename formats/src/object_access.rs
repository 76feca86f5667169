//! How one data object of a database was accessed, for the outputs
//! (export, viewer, report): its misaligned share, its access pattern over
//! all its sites and each site's own pattern ([`crate::patterns`]).

use serde::Serialize;

use crate::database::{Database, Frame};
use crate::patterns::{
    object_pattern, Pattern, Regularity, StrideCounts, StrideShare, StrideSource,
};

/// What the database says about how one object was accessed.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectAccess<'a> {
    /// Sampled accesses that spanned two cache lines, and their share of
    /// the object's sampled accesses (`None` without the
    /// `misaligned_samples` column or without accesses).
    pub misaligned: Option<(u64, f64)>,
    /// The object's pattern over all its sites.
    pub pattern: Option<Pattern>,
    /// Its sites, most sampled first, with their own patterns.
    pub sites: Vec<(&'a Frame, &'a StrideCounts, Option<Pattern>)>,
}

/// Access patterns of object `index` of `db`, whose inclusive metric
/// values are `metrics` (columns of `DbInfo::metrics`).
pub fn object_access<'a>(db: &'a Database, index: u32, metrics: &[u64]) -> ObjectAccess<'a> {
    let col = |name: &str| {
        db.metric_column(name)
            .map(|c| metrics.get(c).copied().unwrap_or(0))
    };
    let misaligned = col("misaligned_samples").and_then(|m| {
        let accesses = col("samples").unwrap_or(0) + col("store_samples").unwrap_or(0);
        (accesses > 0).then(|| (m, m as f64 / accesses as f64))
    });
    let Some(obj) = db.objects.get(index as usize) else {
        return ObjectAccess {
            misaligned,
            pattern: None,
            sites: Vec::new(),
        };
    };
    let sites = obj
        .sites
        .iter()
        .filter_map(|s| {
            Some((
                db.frames.get(s.frame as usize)?,
                &s.counts,
                s.counts.pattern(),
            ))
        })
        .collect();
    ObjectAccess {
        misaligned,
        pattern: object_pattern(obj.sites.iter().map(|s| &s.counts)),
        sites,
    }
}

/// An access site in the export.
#[derive(Debug, Serialize)]
pub struct AccessSiteOut<'a> {
    pub function: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    /// Sampled accesses with a recovered address at this site.
    pub samples: u64,
    /// `regular` or `irregular` (absent: too few observations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Regularity>,
    /// `decoder` or `samples`: where the strides come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<StrideSource>,
    pub strides: Vec<StrideShare>,
    /// Share of the samples whose address depends on data (decoder).
    pub data_dependent_share: f64,
    /// GCD of the deltas between sampled addresses (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_gcd: Option<u64>,
    /// Size of one element of the operand (absent: unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub element_bytes: Option<u32>,
}

impl<'a> ObjectAccess<'a> {
    /// The export form of the sites.
    pub fn sites_out(&self) -> Vec<AccessSiteOut<'a>> {
        self.sites
            .iter()
            .map(|(f, c, p)| AccessSiteOut {
                function: &f.function,
                file: f.file.as_deref(),
                line: f.line,
                samples: c.samples,
                pattern: p.as_ref().map(|p| p.regularity),
                source: p.as_ref().map(|p| p.source),
                strides: p.as_ref().map(|p| p.strides.clone()).unwrap_or_default(),
                data_dependent_share: p.as_ref().map_or(0.0, |p| p.data_dependent),
                delta_gcd: (c.delta_gcd > 0).then_some(c.delta_gcd),
                element_bytes: (c.element_bytes > 0).then_some(c.element_bytes),
            })
            .collect()
    }
}
