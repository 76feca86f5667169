//! Matches the truth's allocation sites with the profiler's heap objects
//! and measures their agreement ([`crate::stats`]) on the heap objects,
//! each side renormalised over them.
//!
//! Keys: a profiler object's key is its allocation site (`file:line`,
//! outside allocator wrappers as hpcprof-rs chose it). A DHAT call stack's
//! key is its innermost frame in the program's own code that is also some
//! profiler object's site; failing that, its innermost own frame that is
//! not a wrapper (a line that allocates for several different callers,
//! such as LULESH's `Allocate<T>`); failing that, its innermost own frame.
//! Stacks with no frame in the program's own code (the C library's and
//! the loader's own blocks) are left out, as are the profiler's heap
//! objects without a site (`<small heap objects>`, blocks under
//! `--min-bytes`): they count in the context columns.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::dhat::Record;
use crate::profile::Profile;
use crate::stats;
use crate::trace::SimRecord;

/// Objects with less than this share on both sides are left out of the
/// rank correlation (their ranks would be noise, or ties at zero).
pub const MIN_SHARE: f64 = 0.005;

/// One allocation site, both sides.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    pub key: String,
    /// The profiler's name of the object (else the key).
    pub name: String,
    /// DHAT: bytes read + written, bytes read.
    pub truth_access: f64,
    pub truth_reads: f64,
    /// Simulated last-level-cache misses, when simulated.
    pub truth_misses: Option<f64>,
    /// Simulated stall cycles (latency-weighted misses), when simulated.
    pub truth_stall: Option<f64>,
    /// mem:soft: sampled loads + stores, sampled loads.
    pub prof_access: f64,
    pub prof_reads: f64,
}

/// The key of each call stack, given as its own-code site keys innermost
/// first (see the module comment).
pub fn record_keys(stacks: &[&[String]], profiler_sites: &BTreeSet<String>) -> Vec<Option<String>> {
    let mut callers: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for own in stacks {
        for (i, k) in own.iter().enumerate() {
            let next = own.get(i + 1).map_or("", String::as_str);
            callers.entry(k.as_str()).or_default().insert(next);
        }
    }
    let wrapper = |k: &str| callers.get(k).is_some_and(|c| c.len() > 1);
    stacks
        .iter()
        .map(|own| {
            // Never past the first non-wrapper frame: a stack the profiler
            // did not see must not borrow an outer frame that happens to
            // be another object's site (`new Domain` in LULESH's main).
            let end = own.iter().position(|k| !wrapper(k)).unwrap_or(0);
            own.iter()
                .take(end + 1)
                .find(|k| profiler_sites.contains(*k))
                .or(own.get(end))
                .cloned()
        })
        .collect()
}

/// Joins the truth and the profile by site key; entries sorted by truth
/// access volume, largest first. `sim`: simulated misses per call stack.
pub fn join(records: &[Record], profile: &Profile, sim: Option<&[SimRecord]>) -> Vec<Entry> {
    let sites: BTreeSet<String> = profile
        .objects
        .iter()
        .filter_map(|o| o.site.clone())
        .collect();
    let mut by_key: BTreeMap<String, Entry> = BTreeMap::new();
    let stacks: Vec<&[String]> = records.iter().map(|r| r.own.as_slice()).collect();
    for (r, key) in records.iter().zip(record_keys(&stacks, &sites)) {
        let Some(key) = key else { continue };
        let e = entry(&mut by_key, &key);
        if e.name == e.key {
            let pos = r.own.iter().position(|k| *k == key);
            let file = pos.and_then(|i| r.own_files.get(i));
            let line = key.rsplit_once(':').and_then(|(_, l)| l.parse().ok());
            if let (Some(file), Some(line)) = (file, line) {
                if let Some(n) = crate::dhat::source_name(file, line) {
                    e.name = n;
                }
            }
        }
        e.truth_access += (r.read_bytes + r.write_bytes) as f64;
        e.truth_reads += r.read_bytes as f64;
    }
    for o in &profile.objects {
        let Some(key) = &o.site else { continue };
        let e = entry(&mut by_key, key);
        if e.prof_access == 0.0 {
            e.name.clone_from(&o.name);
        }
        e.prof_access += (o.reads + o.writes) as f64;
        e.prof_reads += o.reads as f64;
    }
    if let Some(sim) = sim {
        let stacks: Vec<&[String]> = sim.iter().map(|r| r.own.as_slice()).collect();
        for (r, key) in sim.iter().zip(record_keys(&stacks, &sites)) {
            let Some(key) = key else { continue };
            let e = entry(&mut by_key, &key);
            *e.truth_misses.get_or_insert(0.0) += r.llc_misses as f64;
            *e.truth_stall.get_or_insert(0.0) += r.stall as f64;
        }
        for e in by_key.values_mut() {
            e.truth_misses.get_or_insert(0.0);
            e.truth_stall.get_or_insert(0.0);
        }
    }
    let mut v: Vec<Entry> = by_key.into_values().collect();
    v.sort_by(|a, b| {
        b.truth_access
            .total_cmp(&a.truth_access)
            .then(b.prof_access.total_cmp(&a.prof_access))
    });
    v
}

fn entry<'a>(m: &'a mut BTreeMap<String, Entry>, k: &str) -> &'a mut Entry {
    m.entry(k.to_string()).or_insert_with(|| Entry {
        key: k.to_string(),
        name: k.to_string(),
        ..Entry::default()
    })
}

/// Agreement of one truth with the profiler.
#[derive(Debug, Clone, Default)]
pub struct Agreement {
    /// Objects in the rank correlation (share >= [`MIN_SHARE`] on a side).
    pub objects: usize,
    /// Names of each side's top object.
    pub truth_top: Option<String>,
    pub prof_top: Option<String>,
    pub spearman: Option<f64>,
    pub tvd: Option<f64>,
}

impl Agreement {
    /// Whether both sides have the same top object (`None` if a side has
    /// no weight).
    pub fn top1(&self) -> Option<bool> {
        Some(self.truth_top.as_ref()? == self.prof_top.as_ref()?)
    }
}

/// Agreement between the truth weights `truth` and the profiler weights
/// `prof` of `entries`.
pub fn agreement(
    entries: &[Entry],
    truth: impl Fn(&Entry) -> f64,
    prof: impl Fn(&Entry) -> f64,
) -> Agreement {
    let a: Vec<f64> = entries.iter().map(&truth).collect();
    let b: Vec<f64> = entries.iter().map(&prof).collect();
    let (sa, sb) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
    let keep: Vec<usize> = (0..entries.len())
        .filter(|&i| (sa > 0.0 && a[i] / sa >= MIN_SHARE) || (sb > 0.0 && b[i] / sb >= MIN_SHARE))
        .collect();
    let ka: Vec<f64> = keep.iter().map(|&i| a[i]).collect();
    let kb: Vec<f64> = keep.iter().map(|&i| b[i]).collect();
    Agreement {
        objects: keep.len(),
        truth_top: stats::top(&a).map(|i| entries[i].name.clone()),
        prof_top: stats::top(&b).map(|i| entries[i].name.clone()),
        spearman: stats::spearman(&ka, &kb),
        tvd: stats::tvd(&a, &b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Object;

    fn rec(own: &[&str], rb: u64) -> Record {
        Record {
            own: own.iter().map(|s| s.to_string()).collect(),
            own_files: own.iter().map(|s| format!("/nonexistent/{s}")).collect(),
            read_bytes: rb,
            write_bytes: 0,
        }
    }

    #[test]
    fn wrappers_are_skipped_and_profiler_sites_win() {
        let records = [
            rec(&["lulesh.h:10", "lulesh.cc:100"], 1),
            rec(&["lulesh.h:10", "lulesh.cc:200"], 1),
            rec(&["k.c:5", "k.c:50"], 1),
        ];
        let stacks: Vec<&[String]> = records.iter().map(|r| r.own.as_slice()).collect();
        let keys = record_keys(&stacks, &BTreeSet::new());
        assert_eq!(keys[0].as_deref(), Some("lulesh.cc:100"));
        assert_eq!(keys[2].as_deref(), Some("k.c:5"));
        // A profiler site inside the first non-wrapper frame wins; one
        // outside it (another object's) does not.
        let sites = BTreeSet::from(["lulesh.h:10".to_string(), "k.c:50".to_string()]);
        let keys = record_keys(&stacks, &sites);
        assert_eq!(keys[0].as_deref(), Some("lulesh.h:10"));
        assert_eq!(keys[2].as_deref(), Some("k.c:5"));
    }

    #[test]
    fn join_and_agree() {
        let records = [rec(&["g.c:38"], 100), rec(&["g.c:39"], 300), rec(&[], 5)];
        let object = |site: Option<&str>, name: &str, reads| Object {
            kind: "heap".into(),
            name: name.into(),
            site: site.map(String::from),
            reads,
            writes: 0,
        };
        let profile = Profile {
            objects: vec![
                object(Some("g.c:39"), "grid", 90),
                object(Some("g.c:38"), "index", 10),
                object(None, "<small heap objects>", 50),
            ],
            ..Profile::default()
        };
        let e = join(&records, &profile, None);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].name.as_str(), e[0].prof_reads), ("grid", 90.0));
        let a = agreement(&e, |e| e.truth_access, |e| e.prof_access);
        assert_eq!(a.top1(), Some(true));
        assert!((a.tvd.unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(a.spearman, None);
    }
}
