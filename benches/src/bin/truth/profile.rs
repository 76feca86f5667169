//! The answer under test: `hpcrun-rs -e mem:soft` on the program, then
//! `hpcprof-rs` and `hpcprof-rs export DB --view data --format json`
//! (schema: formats/src/export.rs). Each object's weight is its sampled
//! accesses (`reads` + `writes`, i.e. the `samples` and `store_samples`
//! metrics, timer overruns included); heap objects are keyed by their
//! allocation site (`alloc_site`, chosen by hpcprof-rs outside allocator
//! wrappers) with the same key as the truth ([`crate::dhat::site_key`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::dhat::site_key;

/// One exported object.
#[derive(Debug, Clone)]
pub struct Object {
    /// `heap`, `static`, `stack` or `unknown`.
    pub kind: String,
    pub name: String,
    /// Heap objects with a source line: the allocation site key.
    pub site: Option<String>,
    /// Sampled loads.
    pub reads: u64,
    /// Sampled store-only accesses.
    pub writes: u64,
}

/// What one profiled run gave.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub objects: Vec<Object>,
    /// `stats.samples`: timer samples taken.
    pub samples: u64,
    /// `stats.memory_samples`: load samples.
    pub loads: u64,
    /// `stats.store_samples`: store-only samples.
    pub stores: u64,
    /// `stats.address_recovered` (of the loads: the profiler's
    /// `recovery_rate` is recovered / loads).
    pub recovered: u64,
}

/// The hpcrun-rs and hpcprof-rs binaries of one build.
#[derive(Debug, Clone)]
pub struct Tools {
    pub hpcrun: PathBuf,
    pub hpcprof: PathBuf,
}

impl Tools {
    /// `hpcrun` and the `hpcprof-rs` beside it.
    pub fn beside(hpcrun: PathBuf) -> Result<Tools> {
        let hpcprof = hpcrun.with_file_name("hpcprof-rs");
        for p in [&hpcrun, &hpcprof] {
            if !p.is_file() {
                bail!(
                    "{} not found (cargo build --release -p hpcrun-rs -p hpcrun-preload -p hpcprof-rs)",
                    p.display()
                );
            }
        }
        Ok(Tools { hpcrun, hpcprof })
    }
}

fn check(cmd: &mut Command, what: &str) -> Result<Vec<u8>> {
    check_or(cmd, what, false)
}

/// With `tolerant`, a non-zero exit is a note, not an error (hpcrun-rs
/// exits with the program's status; some programs exit non-zero after a
/// complete run); a missing output is caught by the next step.
fn check_or(cmd: &mut Command, what: &str, tolerant: bool) -> Result<Vec<u8>> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() && tolerant {
        eprintln!("truth: note: {what}: {}", out.status);
    } else if !out.status.success() {
        bail!(
            "{what}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// Profiles `command` in `dir` (which must not hold an earlier run) with
/// `event` and the extra hpcrun-rs options `opts`.
pub fn run(
    tools: &Tools,
    event: &str,
    opts: &[String],
    command: &[String],
    dir: &Path,
) -> Result<Profile> {
    let measurements = dir.join("measurements");
    let db = dir.join("db");
    for d in [&measurements, &db] {
        if d.exists() {
            std::fs::remove_dir_all(d).with_context(|| format!("{}", d.display()))?;
        }
    }
    check_or(
        Command::new(&tools.hpcrun)
            .current_dir(dir)
            .args(["-e", event])
            .args(opts)
            .arg("-o")
            .arg(&measurements)
            .args(command),
        "hpcrun-rs",
        true,
    )?;
    check(
        Command::new(&tools.hpcprof)
            .arg("-o")
            .arg(&db)
            .arg(&measurements),
        "hpcprof-rs",
    )?;
    let json = check(
        Command::new(&tools.hpcprof)
            .arg("export")
            .arg(&db)
            .args(["--view", "data", "--format", "json"]),
        "hpcprof-rs export",
    )?;
    parse(&json)
}

/// Parses `hpcprof-rs export --view data --format json`.
pub fn parse(json: &[u8]) -> Result<Profile> {
    let v: serde_json::Value = serde_json::from_slice(json).context("export is not JSON")?;
    if v["format"] != "hpcprof-rs/export" || v["view"] != "data" {
        bail!("not a data-view export of hpcprof-rs");
    }
    let num = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    let stats = &v["stats"];
    let mut p = Profile {
        samples: num(&stats["samples"]),
        loads: num(&stats["memory_samples"]),
        stores: num(&stats["store_samples"]),
        recovered: num(&stats["address_recovered"]),
        objects: Vec::new(),
    };
    for o in v["objects"].as_array().context("export without objects")? {
        let site = &o["alloc_site"];
        let site = match (site["file"].as_str(), site["line"].as_u64()) {
            (Some(f), Some(l)) if o["kind"] == "heap" => Some(site_key(f, l as u32)),
            _ => None,
        };
        p.objects.push(Object {
            kind: o["kind"].as_str().unwrap_or("?").to_string(),
            name: o["name"].as_str().unwrap_or("?").to_string(),
            site,
            reads: num(&o["reads"]),
            writes: num(&o["writes"]),
        });
    }
    Ok(p)
}

impl Profile {
    /// Adds another run's objects (by kind, name and site) and counters.
    pub fn absorb(&mut self, other: Profile) {
        self.samples += other.samples;
        self.loads += other.loads;
        self.stores += other.stores;
        self.recovered += other.recovered;
        for o in other.objects {
            match self
                .objects
                .iter_mut()
                .find(|m| m.kind == o.kind && m.name == o.name && m.site == o.site)
            {
                Some(m) => {
                    m.reads += o.reads;
                    m.writes += o.writes;
                }
                None => self.objects.push(o),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_objects_get_their_site_key() {
        let json = br#"{"format":"hpcprof-rs/export","view":"data",
            "stats":{"samples":10,"memory_samples":6,"store_samples":2,"address_recovered":5,"recovery_rate":0.83},
            "objects":[
              {"kind":"heap","name":"grid","alloc_site":{"function":"main","file":"/a/g.c","line":39},"reads":5,"writes":1},
              {"kind":"stack","name":"<stack: thread 0>","alloc_site":null,"reads":0,"writes":1}]}"#;
        let p = parse(json).unwrap();
        assert_eq!(p.objects[0].site.as_deref(), Some("g.c:39"));
        assert_eq!(p.objects[1].site, None);
        assert_eq!((p.samples, p.loads, p.stores, p.recovered), (10, 6, 2, 5));
    }
}
