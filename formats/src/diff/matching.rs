//! Matching the rows of two runs: an object by its kind, name and
//! allocation site ([`alloc_site`]: the source file's last component and
//! line, never an address), a function by its name, a line by its
//! function, file name and line. Each run's rows become a table keyed by
//! that match; `rows` pairs the two tables into matched, new and
//! vanished rows, judges each row's share against noise
//! ([`super::noise`]) and orders them.

use std::collections::BTreeMap;

use super::noise::{is_application_object, share_beyond_noise_at, share_z};
use super::percent::change_pct;
use super::{Row, Side, Status};
use crate::database::{DataObject, Database, Frame};
use crate::views;

/// The allocation site of a heap object: the one hpcprof-rs chose
/// (`DataObject::alloc_site`, outside allocator wrappers); for databases
/// written before sites were chosen, the innermost frame of its allocation
/// path with a file and a line outside system sources. `None` for static,
/// stack and unknown objects.
pub fn alloc_site<'a>(db: &'a Database, obj: &DataObject) -> Option<&'a Frame> {
    if let Some(f) = obj.site_frame() {
        return db.frames.get(f as usize);
    }
    // A database written before sites were chosen: the innermost frame
    // with a line outside system sources.
    obj.alloc_path
        .iter()
        .rev()
        .filter_map(|&f| db.frames.get(f as usize))
        .find(|f| f.line.is_some() && f.file.as_deref().is_some_and(|file| !is_system(file)))
}

/// True for source files of the system (the C library, compiler runtimes,
/// system headers): not a place a user allocates from.
pub(super) fn is_system(file: &str) -> bool {
    file.starts_with("/usr/")
        || file.starts_with("./")
        || file.starts_with("../")
        || file.contains("/rustc/")
        || file.contains("/glibc")
}

/// The last component of a path: the part of a file name that survives a
/// move of the build directory.
pub(super) fn base(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// "file.c:12" of a frame, with the file's last component only.
pub(super) fn site_text(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{}:{line}", base(file)),
        (Some(file), None) => base(file).to_string(),
        // No line information: the function and the call's offset.
        _ => f.function_at(),
    }
}

/// Key -> (kind, name, site, bytes, side) of one run.
pub(super) type Table = BTreeMap<String, (String, String, String, Option<u64>, Side)>;

/// What matches an object across two runs: kind, name and allocation site
/// ("abc.c:31"); the key of its row in [`Diff::objects`](super::Diff::objects) ([`Row::key`]).
pub fn object_key(db: &Database, obj: &DataObject) -> String {
    let site = alloc_site(db, obj).map(site_text).unwrap_or_default();
    format!("{}\u{0}{}\u{0}{site}", obj.kind.as_str(), obj.name)
}

impl Row {
    /// The key this row was matched by: [`object_key`] for objects, the
    /// function's name for functions, function and "file:line" for lines.
    pub fn key(&self) -> String {
        match self.kind.as_str() {
            "function" => self.name.clone(),
            "line" => format!("{}\u{0}{}", self.name, self.site),
            kind => format!("{kind}\u{0}{}\u{0}{}", self.name, self.site),
        }
    }
}

/// Keys of the application's objects ([`is_application_object`]).
pub(super) fn application_keys(db: &Database) -> std::collections::BTreeSet<String> {
    db.objects
        .iter()
        .filter(|o| is_application_object(o.kind, &o.name, o.runtime.as_deref()))
        .map(|o| object_key(db, o))
        .collect()
}

/// Prefix of the rows of unknown addresses named by their mapping
/// (databases since 1d0ac84; before, one `<unknown address>` row).
pub(super) const UNKNOWN_IN: &str = "<unknown address: ";
pub(super) const UNKNOWN: &str = "<unknown address>";

/// True if `db` names its unknown addresses by mapping: by its format
/// revision (a database of that revision whose samples reached no unknown
/// mapping has no such row), or, in a database without one, by its rows.
pub(super) fn labels_unknown(db: &Database) -> bool {
    db.info.format >= 1 || db.objects.iter().any(|o| o.name.starts_with(UNKNOWN_IN))
}

/// The objects of `db` by [`object_key`]; `fold_unknown`: the rows of
/// unknown addresses named by mapping are counted as one `<unknown
/// address>` row, to match a database that has only that row.
pub(super) fn object_table(db: &Database, fold_unknown: bool) -> Table {
    let mut t = Table::new();
    for o in views::objects(db) {
        let site = db
            .objects
            .get(o.index as usize)
            .and_then(|obj| alloc_site(db, obj))
            .map(site_text)
            .unwrap_or_default();
        let name = match fold_unknown && o.name.starts_with(UNKNOWN_IN) {
            true => UNKNOWN,
            false => o.name,
        };
        let key = format!("{}\u{0}{name}\u{0}{site}", o.kind.as_str());
        let samples = o.metrics[db.info.primary_metric as usize];
        let e = t.entry(key).or_insert_with(|| {
            (
                o.kind.as_str().to_string(),
                name.to_string(),
                site.clone(),
                Some(0),
                Side::default(),
            )
        });
        e.3 = e.3.map(|b| b + o.bytes);
        e.4.samples += samples;
        e.4.share += o.share;
    }
    t
}

pub(super) fn code_tables(db: &Database) -> (Table, Table) {
    let primary = db.info.primary_metric as usize;
    let mut functions = Table::new();
    let mut lines = Table::new();
    for f in views::functions(db) {
        let e = functions.entry(f.function.to_string()).or_insert_with(|| {
            (
                "function".into(),
                f.function.to_string(),
                String::new(),
                None,
                Side::default(),
            )
        });
        e.4.samples += f.metrics[primary];
        e.4.share += f.share;
        if e.2.is_empty() {
            e.2 = f.file.map(base).unwrap_or("").to_string();
        }
        for l in &f.lines {
            let site = match (l.file, l.line) {
                (Some(file), Some(line)) => format!("{}:{line}", base(file)),
                (Some(file), None) => base(file).to_string(),
                _ => String::new(),
            };
            let e = lines
                .entry(format!("{}\u{0}{site}", f.function))
                .or_insert_with(|| {
                    (
                        "line".into(),
                        f.function.to_string(),
                        site.clone(),
                        None,
                        Side::default(),
                    )
                });
            e.4.samples += l.metrics[primary];
            e.4.share += l.share;
        }
    }
    (functions, lines)
}

pub(super) fn rows(before: Table, mut after: Table, sigmas: f64) -> Vec<Row> {
    // Each table splits its run's samples: its sums are the totals the
    // shares are judged against.
    let total = |t: &Table| t.values().map(|e| e.4.samples).sum::<u64>();
    let (total_before, total_after) = (total(&before), total(&after));
    let mut out = Vec::new();
    for (key, (kind, name, site, bytes, b)) in before {
        let row = match after.remove(&key) {
            Some((_, _, _, bytes_after, a)) => Row {
                status: Status::Matched,
                kind,
                name,
                site,
                bytes: bytes_after,
                before: Some(b),
                after: Some(a),
                delta_share: a.share - b.share,
                delta_samples: a.samples as i64 - b.samples as i64,
                change_pct: change_pct(b.samples, a.samples),
                application: true,
                z: 0.0,
                beyond_noise: false,
            },
            None => Row {
                status: Status::Vanished,
                kind,
                name,
                site,
                bytes,
                before: Some(b),
                after: None,
                delta_share: -b.share,
                delta_samples: -(b.samples as i64),
                change_pct: change_pct(b.samples, 0),
                application: true,
                z: 0.0,
                beyond_noise: false,
            },
        };
        out.push(row);
    }
    for (_, (kind, name, site, bytes, a)) in after {
        out.push(Row {
            status: Status::New,
            kind,
            name,
            site,
            bytes,
            before: None,
            after: Some(a),
            delta_share: a.share,
            delta_samples: a.samples as i64,
            change_pct: None,
            application: true,
            z: 0.0,
            beyond_noise: false,
        });
    }
    // Rows without samples in either run are no change.
    out.retain(|r| r.before.map_or(0, |s| s.samples) + r.after.map_or(0, |s| s.samples) > 0);
    for r in &mut out {
        let (b, a) = (
            r.before.map_or(0, |s| s.samples),
            r.after.map_or(0, |s| s.samples),
        );
        r.z = share_z(b, total_before, a, total_after);
        r.beyond_noise = share_beyond_noise_at(b, total_before, a, total_after, sigmas);
    }
    out.sort_by(|x, y| {
        y.beyond_noise
            .cmp(&x.beyond_noise)
            .then_with(|| {
                y.delta_samples
                    .unsigned_abs()
                    .cmp(&x.delta_samples.unsigned_abs())
            })
            .then_with(|| x.name.cmp(&y.name))
            .then_with(|| x.site.cmp(&y.site))
    });
    out
}

pub(super) fn cpu_samples(db: &Database) -> Option<u64> {
    let col = db.metric_column(views::CPU_SAMPLES)?;
    let inc = db.code.inclusive(db.info.metrics.len().max(1));
    inc.first().and_then(|r| r.get(col)).copied()
}

pub(super) fn data_total(db: &Database) -> u64 {
    let primary = db.info.primary_metric as usize;
    views::objects(db).iter().map(|o| o.metrics[primary]).sum()
}
