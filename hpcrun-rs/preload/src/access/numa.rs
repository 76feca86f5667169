//! NUMA locality of sampled accesses: the node of the CPU a sample ran on
//! (from `/sys/devices/system/node/node*/cpulist`, read at start) against
//! the node of the page it touched (`move_pages` in query mode,
//! rate-limited and cached). Samples count as `numa_local` or
//! `numa_remote`; accesses whose page node was not queried count as
//! neither.
//!
//! On a machine with one node every page is local and no query is made.
//! The columns appear when the machine has several nodes, or on request
//! (`hpcrun-rs --numa`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::sys;

/// CPUs covered by the CPU -> node table.
pub const MAX_CPUS: usize = 4096;
/// Where the kernel describes the nodes.
pub const SYSFS_NODES: &str = "/sys/devices/system/node";

/// CPU -> node + 1 (0: unknown).
static CPU_NODE: [AtomicU16; MAX_CPUS] = [const { AtomicU16::new(0) }; MAX_CPUS];
static NODES: AtomicU32 = AtomicU32::new(0);
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Direct-mapped cache of page -> node: `page << 12 | (node + 1)`.
const CACHE_SLOTS: usize = 4096;
static PAGE_CACHE: [AtomicU64; CACHE_SLOTS] = [const { AtomicU64::new(0) }; CACHE_SLOTS];
/// Rate limit: a query costs `QUERY_COST` credits; every sample earns one,
/// up to `MAX_CREDIT`.
static CREDIT: AtomicU64 = AtomicU64::new(MAX_CREDIT);
const QUERY_COST: u64 = 8;
const MAX_CREDIT: u64 = 256;
/// Samples whose page node was not looked up (rate limit or not present).
pub static NOT_QUERIED: AtomicU64 = AtomicU64::new(0);

/// Parses a kernel CPU list ("0-3,8-11,16").
pub fn parse_cpulist(s: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: u32 = a
            .trim()
            .parse()
            .map_err(|_| format!("bad CPU list '{s}'"))?;
        let b: u32 = b
            .trim()
            .parse()
            .map_err(|_| format!("bad CPU list '{s}'"))?;
        if b < a || b - a > MAX_CPUS as u32 {
            return Err(format!("bad CPU range '{part}'"));
        }
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

/// The nodes under `root` (e.g. `/sys/devices/system/node`) with their
/// CPUs, sorted by node.
pub fn read_topology(root: &Path) -> Result<Vec<(u32, Vec<u32>)>, String> {
    let dir = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut nodes = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(n) = name
            .strip_prefix("node")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let list = entry.path().join("cpulist");
        let text =
            std::fs::read_to_string(&list).map_err(|e| format!("{}: {e}", list.display()))?;
        nodes.push((n, parse_cpulist(&text)?));
    }
    nodes.sort();
    Ok(nodes)
}

/// Loads the topology (outside any signal handler); `force` turns the
/// metrics on even on a one-node machine.
pub fn init(root: &Path, force: bool) {
    // One node online (`online` lists "0"): every page is local, and the
    // CPU -> node table is never asked; one small read instead of the
    // directory's.
    if let Ok(online) = std::fs::read_to_string(root.join("online")) {
        if parse_cpulist(&online).is_ok_and(|nodes| nodes.len() == 1) {
            NODES.store(1, Relaxed);
            ENABLED.store(force, Relaxed);
            return;
        }
    }
    let nodes = read_topology(root).unwrap_or_default();
    for (node, cpus) in &nodes {
        for &c in cpus {
            if let Some(slot) = CPU_NODE.get(c as usize) {
                slot.store((*node as u16).saturating_add(1), Relaxed);
            }
        }
    }
    NODES.store(nodes.len() as u32, Relaxed);
    ENABLED.store(force || nodes.len() > 1, Relaxed);
}

/// True when the NUMA columns are recorded.
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// The node of `cpu` per the loaded topology.
pub fn node_of_cpu(cpu: u32) -> Option<u32> {
    let v = CPU_NODE.get(cpu as usize)?.load(Relaxed);
    (v > 0).then(|| u32::from(v) - 1)
}

/// Whether the page of `addr` is on the node of the CPU running this
/// sample; `None` when NUMA is off or either node is unknown. Safe in a
/// signal handler: no allocation, no lock.
pub fn is_local(addr: u64) -> Option<bool> {
    if !enabled() {
        return None;
    }
    let credit = CREDIT.load(Relaxed);
    if credit < MAX_CREDIT {
        CREDIT.store(credit + 1, Relaxed);
    }
    if NODES.load(Relaxed) <= 1 {
        // One node: every page is on it.
        return Some(true);
    }
    let cpu_node = node_of_cpu(sys::current_cpu()?)?;
    let page_node = page_node_cached(addr)?;
    Some(cpu_node == page_node)
}

fn page_node_cached(addr: u64) -> Option<u32> {
    let page = addr >> 12;
    let slot = &PAGE_CACHE[(page as usize ^ (page as usize >> 12)) % CACHE_SLOTS];
    let v = slot.load(Relaxed);
    if v != 0 && v >> 12 == page {
        return Some((v & 0xfff) as u32 - 1);
    }
    let credit = CREDIT.load(Relaxed);
    if credit < QUERY_COST {
        NOT_QUERIED.fetch_add(1, Relaxed);
        return None;
    }
    CREDIT.store(credit - QUERY_COST, Relaxed);
    let Some(node) = sys::page_node(addr) else {
        NOT_QUERIED.fetch_add(1, Relaxed);
        return None;
    };
    if node < 0xffe {
        slot.store(page << 12 | u64::from(node + 1), Relaxed);
    }
    Some(node)
}

/// Local or remote, given the two nodes (the rule the handler applies).
pub fn classify(cpu_node: u32, page_node: u32) -> bool {
    cpu_node == page_node
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/numa")
            .join(name)
    }

    #[test]
    fn cpulists_parse() {
        assert_eq!(parse_cpulist("0-3,8-9\n").unwrap(), vec![0, 1, 2, 3, 8, 9]);
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert_eq!(parse_cpulist("").unwrap(), Vec::<u32>::new());
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a-b").is_err());
        assert!(parse_cpulist("0-4294967295").is_err());
    }

    #[test]
    fn a_two_node_fixture_maps_cpus_to_nodes() {
        let nodes = read_topology(&fixture("two_nodes")).unwrap();
        assert_eq!(
            nodes,
            vec![
                (0, vec![0, 1, 2, 3, 8, 9, 10, 11]),
                (1, vec![4, 5, 6, 7, 12, 13, 14, 15])
            ]
        );
        // The classification the handler applies: CPU 5 is on node 1.
        let node_of = |cpu| nodes.iter().find(|(_, c)| c.contains(&cpu)).map(|n| n.0);
        assert!(classify(node_of(5).unwrap(), 1));
        assert!(!classify(node_of(9).unwrap(), 1));
    }

    #[test]
    fn one_node_and_this_machine() {
        assert_eq!(
            read_topology(&fixture("one_node")).unwrap(),
            vec![(0, vec![0, 1])]
        );
        assert!(read_topology(Path::new("/nonexistent")).is_err());
        // This machine: every CPU belongs to some node, and a touched page
        // has a node.
        if let Ok(nodes) = read_topology(Path::new(SYSFS_NODES)) {
            assert!(!nodes.is_empty());
            let x = Box::new(7u64);
            let node = sys::page_node(&*x as *const u64 as u64);
            assert!(node.is_some_and(|n| nodes.iter().any(|(k, _)| *k == n)));
        }
    }
}
