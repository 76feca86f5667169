//! The second truth: simulated cache misses per allocation site, from
//! Valgrind lackey's trace of every data access (`--trace-mem=yes`) run
//! through [`crate::cachesim`], with the program's allocations logged into
//! the same stream by an LD_PRELOAD library
//! (benches/programs/truth_alloc_log.c) so that each access can be mapped
//! to the live heap block it falls in, and each block to its allocation
//! call stack (return addresses resolved with binutils' `addr2line`).
//!
//! Lackey is slow (about a minute per 100 M trace lines here), so the
//! workloads run a smaller input for it (`Workload::sim_args`).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::cachesim::Hierarchy;
use crate::dhat::{own_code, site_key};
use crate::machine::Cache;

/// One allocation call stack's simulated misses.
#[derive(Debug, Clone, Default)]
pub struct SimRecord {
    /// Own-code site keys and their files, innermost first (as
    /// [`crate::dhat::Record`]).
    pub own: Vec<String>,
    pub own_files: Vec<String>,
    /// Last-level-cache misses of accesses into its blocks.
    pub llc_misses: u64,
    /// Estimated cycles those accesses waited beyond L1 hits
    /// ([`crate::cachesim::stall_cycles`]).
    pub stall: u64,
}

/// Totals of a simulated run, for the report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub accesses: u64,
    pub llc_misses: u64,
    /// LLC misses in heap blocks logged with a stack.
    pub heap_llc_misses: u64,
}

/// Live blocks: start -> (end, stack id).
#[derive(Debug, Default)]
struct Blocks {
    live: BTreeMap<u64, (u64, usize)>,
    last: Option<(u64, u64, usize)>,
}

impl Blocks {
    fn find(&mut self, addr: u64) -> Option<usize> {
        if let Some((s, e, id)) = self.last {
            if addr >= s && addr < e {
                return Some(id);
            }
        }
        let (&s, &(e, id)) = self.live.range(..=addr).next_back()?;
        if addr < e {
            self.last = Some((s, e, id));
            Some(id)
        } else {
            None
        }
    }

    fn insert(&mut self, start: u64, size: u64, id: usize) {
        self.last = None;
        self.live.insert(start, (start + size.max(1), id));
    }

    fn remove(&mut self, start: u64) {
        self.last = None;
        self.live.remove(&start);
    }
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

/// Per stack: LLC misses and estimated stall cycles.
type PerStack = HashMap<String, (u64, u64)>;

/// Feeds one lackey/allocation-log stream through the caches; returns the
/// per-stack LLC misses and stall cycles (keyed by the stack's frame
/// text) and the totals.
pub fn simulate(input: impl BufRead, caches: &[Cache]) -> Result<(PerStack, Totals)> {
    let mut h = Hierarchy::new(caches);
    let mut blocks = Blocks::default();
    let mut stacks: Vec<String> = Vec::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut misses: Vec<(u64, u64)> = Vec::new();
    let mut t = Totals::default();
    for line in input.split(b'\n') {
        let line = line?;
        let Ok(line) = std::str::from_utf8(&line) else {
            continue;
        };
        let b = line.as_bytes();
        if b.len() > 3 && b[0] == b' ' && matches!(b[1], b'L' | b'S' | b'M') {
            let Some((a, sz)) = line[3..].split_once(',') else {
                continue;
            };
            let (Some(addr), Ok(size)) = (hex(a), sz.trim().parse::<u64>()) else {
                continue;
            };
            t.accesses += 1;
            let out = h.access(addr, size);
            if out.llc {
                t.llc_misses += 1;
            }
            if out.stall > 0 {
                if let Some(id) = blocks.find(addr) {
                    misses[id].0 += u64::from(out.llc);
                    misses[id].1 += out.stall;
                    t.heap_llc_misses += u64::from(out.llc);
                }
            }
        } else if let Some(rest) = line.strip_prefix("A ") {
            let mut parts = rest.splitn(3, ' ');
            let (Some(addr), Some(size), stack) = (
                parts.next().and_then(hex),
                parts.next().and_then(|s| s.parse().ok()),
                parts.next().unwrap_or(""),
            ) else {
                continue;
            };
            let id = *ids.entry(stack.to_string()).or_insert_with(|| {
                stacks.push(stack.to_string());
                misses.push((0, 0));
                stacks.len() - 1
            });
            blocks.insert(addr, size, id);
        } else if let Some(addr) = line.strip_prefix("F ").and_then(hex) {
            blocks.remove(addr);
        }
    }
    let per_stack = stacks.into_iter().zip(misses).collect();
    Ok((per_stack, t))
}

/// Resolves `module+offset` return addresses to source frames (innermost
/// inlined frame first) with `addr2line -i -p -a`, per module. Position-
/// independent modules only (offsets from the load base; every gcc build
/// on Debian is PIE).
fn resolve(addrs: &[(String, u64)]) -> HashMap<(String, u64), Vec<(String, u32)>> {
    let mut by_module: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (m, off) in addrs {
        by_module.entry(m.as_str()).or_default().push(*off);
    }
    let mut out = HashMap::new();
    for (module, offs) in by_module {
        let Ok(child) = Command::new("addr2line")
            .args(["-i", "-p", "-a", "-e", module])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        else {
            continue;
        };
        let mut child = child;
        if let Some(mut stdin) = child.stdin.take() {
            for off in &offs {
                // The call instruction, not the return address.
                let _ = writeln!(stdin, "{:x}", off.saturating_sub(1));
            }
        }
        let Ok(o) = child.wait_with_output() else {
            continue;
        };
        let text = String::from_utf8_lossy(&o.stdout);
        let mut groups: Vec<Vec<(String, u32)>> = Vec::new();
        for l in text.lines() {
            let (place, new) = match l.strip_prefix(" (inlined by) ") {
                Some(p) => (p, false),
                None => (l.split_once(": ").map_or(l, |(_, p)| p), true),
            };
            if new {
                groups.push(Vec::new());
            }
            let place = place.split(" (discriminator").next().unwrap_or(place);
            if let Some((f, line)) = place.rsplit_once(':') {
                if let (Ok(line), Some(g)) = (line.trim().parse(), groups.last_mut()) {
                    g.push((f.to_string(), line));
                }
            }
        }
        for (off, g) in offs.into_iter().zip(groups) {
            out.insert((module.to_string(), off), g);
        }
    }
    out
}

/// Turns per-stack misses into records with own-code frames.
fn records(per_stack: PerStack) -> Vec<SimRecord> {
    let parse = |f: &str| -> Option<(String, u64)> {
        let (m, off) = f.rsplit_once('+')?;
        Some((m.to_string(), hex(off)?))
    };
    let mut addrs: Vec<(String, u64)> = per_stack
        .keys()
        .flat_map(|s| s.split(',').filter_map(parse))
        .collect();
    addrs.sort();
    addrs.dedup();
    let frames = resolve(&addrs);
    per_stack
        .into_iter()
        .map(|(stack, (llc, stall))| {
            let mut r = SimRecord {
                llc_misses: llc,
                stall,
                ..SimRecord::default()
            };
            for a in stack.split(',').filter_map(parse) {
                for (file, line) in frames.get(&a).into_iter().flatten() {
                    if own_code(file) {
                        r.own.push(site_key(file, *line));
                        r.own_files.push(file.clone());
                    }
                }
            }
            r
        })
        .collect()
}

/// Builds the allocation-log library into `dir` (unless fresh).
fn shim(root: &Path, dir: &Path) -> Result<std::path::PathBuf> {
    let src = root.join("benches/programs/truth_alloc_log.c");
    let out = dir.join("truth_alloc_log.so");
    let fresh = match (std::fs::metadata(&src), std::fs::metadata(&out)) {
        (Ok(s), Ok(o)) => o.modified()? >= s.modified()?,
        _ => false,
    };
    if !fresh {
        std::fs::create_dir_all(dir)?;
        let ok = Command::new("gcc")
            .args(["-O2", "-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .context("cannot run gcc")?
            .success();
        if !ok {
            bail!("gcc failed on {}", src.display());
        }
    }
    Ok(out)
}

/// [`run`], or the records of an earlier run in `dir` with the same
/// command, binary and caches unless `fresh` (totals are then zero).
pub fn cached(
    root: &Path,
    bin: &Path,
    command: &[String],
    dir: &Path,
    caches: &[Cache],
    fresh: bool,
) -> Result<(Vec<SimRecord>, Totals)> {
    let stamp_file = dir.join("sim.stamp");
    let out = dir.join("sim.tsv");
    let want = format!("{}{caches:?} stall\n", crate::dhat::stamp(command));
    if !fresh && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(want.as_str()) {
        if let Ok(text) = std::fs::read_to_string(&out) {
            return Ok((load(&text), Totals::default()));
        }
    }
    let (records, totals) = run(root, bin, command, dir, caches)?;
    std::fs::write(&out, save(&records))?;
    std::fs::write(&stamp_file, want)?;
    Ok((records, totals))
}

/// One record per line: misses and stall cycles (`misses/stall`), then
/// key and file pairs, tab-separated.
fn save(records: &[SimRecord]) -> String {
    let mut s = String::new();
    for r in records {
        s.push_str(&format!("{}/{}", r.llc_misses, r.stall));
        for (k, f) in r.own.iter().zip(&r.own_files) {
            s.push('\t');
            s.push_str(k);
            s.push('\t');
            s.push_str(f);
        }
        s.push('\n');
    }
    s
}

fn load(text: &str) -> Vec<SimRecord> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.split('\t');
            let (misses, stall) = parts.next()?.split_once('/')?;
            let mut r = SimRecord {
                llc_misses: misses.parse().ok()?,
                stall: stall.parse().ok()?,
                ..SimRecord::default()
            };
            while let (Some(k), Some(f)) = (parts.next(), parts.next()) {
                r.own.push(k.to_string());
                r.own_files.push(f.to_string());
            }
            Some(r)
        })
        .collect()
}

/// Runs `command` under lackey in `dir` and simulates `caches`; returns
/// per-stack records and totals.
pub fn run(
    root: &Path,
    bin: &Path,
    command: &[String],
    dir: &Path,
    caches: &[Cache],
) -> Result<(Vec<SimRecord>, Totals)> {
    let shim = shim(root, bin)?;
    let mut child = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes", "--log-fd=2"])
        .args(command)
        .current_dir(dir)
        .env("LD_PRELOAD", &shim)
        .env("TRUTH_ALLOC_FD", "2")
        .env("TRUTH_ALLOC_EXE", &command[0])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run valgrind (apt-get install valgrind)")?;
    let stderr = child.stderr.take().context("no stderr pipe")?;
    let result = simulate(BufReader::with_capacity(1 << 20, stderr), caches);
    let status = child.wait()?;
    let (per_stack, totals) = result?;
    if !status.success() {
        bail!("valgrind --tool=lackey {}: {status}", command.join(" "));
    }
    Ok((records(per_stack), totals))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_map_to_live_blocks() {
        let caches = [Cache {
            level: 1,
            size: 1024,
            ways: 2,
            line: 64,
        }];
        let trace = "==1== Lackey\nA 1000 128 ./p+10\nI  0401000,3\n L 00001000,8\n L 00001040,8\n S 00001000,8\n L 00005000,8\nF 1000\n L 00001080,8\n";
        let (per_stack, t) = simulate(trace.as_bytes(), &caches).unwrap();
        assert_eq!(t.accesses, 5);
        assert_eq!(t.llc_misses, 4);
        // 0x1000 and 0x1040 miss inside the block; 0x5000 and the access
        // after the free are outside it.
        assert_eq!(per_stack["./p+10"].0, 2);
        // A single level: every miss is a memory access.
        assert_eq!(per_stack["./p+10"].1, 2 * crate::cachesim::LATENCY[2]);
        assert_eq!(t.heap_llc_misses, 2);
    }

    #[test]
    fn saved_records_load_back() {
        let r = SimRecord {
            own: vec!["a.c:5".into(), "m.c:9".into()],
            own_files: vec!["/s/a.c".into(), "/s/m.c".into()],
            llc_misses: 42,
            stall: 7,
        };
        let back = load(&save(&[r.clone(), SimRecord::default()]));
        assert_eq!(
            (back[0].own.clone(), back[0].own_files.clone()),
            (r.own, r.own_files)
        );
        assert_eq!((back[0].llc_misses, back[1].llc_misses), (42, 0));
        assert_eq!(back[0].stall, 7);
    }
}
