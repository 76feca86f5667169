//! Synthetic `hpcrun-rs` measurement files for benchmarks and scale tests.
//!
//! [`Config`] describes a run: threads spread over processes (MPI ranks or
//! one process), a program of a few hundred distinct call paths drawn from a
//! pool of functions, heap objects (allocation sites with their own call
//! paths), static variables and the unknown-data objects (stacks, small
//! heap blocks, unknown and unrecovered addresses). [`generate`] builds the
//! profile of one thread, deterministic for a given seed, with realistic
//! imbalance (threads and ranks sample paths with different weights).
//! Addresses fall into one module that points at a real file (so that the
//! merge opens and symbolises it) and, for a few frames, outside every
//! module.
//!
//! ```
//! let cfg = benches::Config { threads: 4, ranks: 2, ..benches::Config::default() };
//! let p = benches::generate(&cfg, 3);
//! assert_eq!(p.process.rank, Some(1));
//! p.validate().unwrap();
//! ```

pub mod doc_tables;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use formats::measurement::{
    AllocSite, Cct, CctNode, EventInfo, MetricInfo, Module, NodeKey, ObjectRef, ProcessInfo,
    SampleStats, StaticVar, ThreadInfo, ThreadProfile,
};

/// What to generate.
#[derive(Debug, Clone)]
pub struct Config {
    /// Thread profiles in total.
    pub threads: u32,
    /// MPI ranks (one process each); 0: one process, no MPI.
    pub ranks: u32,
    /// Distinct call paths of the program.
    pub paths: u32,
    /// Functions the paths are drawn from.
    pub functions: u32,
    /// Heap allocation sites and static variables.
    pub heap_sites: u32,
    pub statics: u32,
    /// Mean memory samples per call path per thread.
    pub samples_per_path: u32,
    /// The module the addresses point into (a real ELF file, or `None`:
    /// every address is outside any module).
    pub module: Option<PathBuf>,
    /// Size of the module's text range the addresses fall into.
    pub module_len: u64,
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            threads: 1000,
            ranks: 0,
            paths: 300,
            functions: 400,
            heap_sites: 40,
            statics: 12,
            samples_per_path: 20,
            module: None,
            module_len: 0x10_0000,
            seed: 42,
        }
    }
}

impl Config {
    /// Number of processes (one per rank, or one).
    pub fn processes(&self) -> u32 {
        self.ranks.max(1)
    }

    /// Process index of thread `t` (threads are dealt out in blocks).
    pub fn process_of(&self, t: u32) -> u32 {
        let per = self.threads.div_ceil(self.processes()).max(1);
        (t / per).min(self.processes() - 1)
    }
}

/// splitmix64: small, fast, good enough for synthetic data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, n) (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Load bias of the module: runtime = file address + bias.
const BIAS: u64 = 0x5555_0000_0000;
/// Runtime addresses below this are outside every module.
const OUTSIDE: u64 = 0x7f00_0000_0000;

/// The program shared by all threads: call paths (runtime addresses,
/// outermost first, leaf = sampled instruction), allocation sites, statics.
#[derive(Debug, Clone)]
pub struct Program {
    pub paths: Vec<Vec<u64>>,
    /// Per path: objects it touches, as (object, weight).
    pub touches: Vec<Vec<(ObjectRef, u32)>>,
    pub sites: Vec<AllocSite>,
    pub statics: Vec<StaticVar>,
    pub module: Option<Module>,
}

/// Builds the program of `cfg` (the same for every thread).
pub fn program(cfg: &Config) -> Program {
    let mut rng = Rng::new(cfg.seed);
    let text = cfg.module_len.max(0x2000);
    let in_module = cfg.module.is_some();
    // Function entry points; a few live outside every module (JIT code,
    // stripped libraries).
    let functions: Vec<u64> = (0..cfg.functions.max(2))
        .map(|i| {
            if !in_module || i % 50 == 49 {
                OUTSIDE + u64::from(i) * 0x1000
            } else {
                BIAS + 0x1000 + rng.below(text - 0x2000)
            }
        })
        .collect();
    let site = |rng: &mut Rng, f: u64| f + rng.below(0x200);
    // Paths grow from main by random walks, so they share prefixes.
    let main = functions[0];
    let mut paths: Vec<Vec<u64>> = Vec::new();
    while paths.len() < cfg.paths as usize {
        let depth = 3 + rng.below(10) as usize;
        let mut path = vec![main + 0x40];
        // Reuse a prefix of an earlier path half of the time.
        if !paths.is_empty() && rng.below(2) == 0 {
            let other = &paths[rng.below(paths.len() as u64) as usize];
            let keep = 1 + rng.below(other.len().saturating_sub(1).max(1) as u64) as usize;
            path = other[..keep.min(other.len() - 1).max(1)].to_vec();
        }
        while path.len() < depth {
            let f = functions[1 + rng.below(functions.len() as u64 - 1) as usize];
            path.push(site(&mut rng, f));
        }
        paths.push(path);
    }
    let sites: Vec<AllocSite> = (0..cfg.heap_sites)
        .map(|_| {
            let depth = 2 + rng.below(5) as usize;
            let frames: Vec<u64> = (0..depth)
                .map(|d| {
                    if d + 1 == depth {
                        main + 0x80
                    } else {
                        let f = functions[1 + rng.below(functions.len() as u64 - 1) as usize];
                        site(&mut rng, f)
                    }
                })
                .collect();
            let allocations = 1 + rng.below(100);
            let bytes = allocations * (1 << (10 + rng.below(14)));
            AllocSite {
                frames,
                allocations,
                bytes,
                max_bytes: bytes / allocations,
                label: None,
                ..Default::default()
            }
        })
        .collect();
    let statics: Vec<StaticVar> = (0..cfg.statics)
        .map(|i| StaticVar {
            name: format!("_ZN3app6tables{}5TABLE17h0123456789abcdefE", i),
            module: in_module.then_some(0),
            address: BIAS + text + u64::from(i) * 0x1_0000,
            size: 0x1_0000,
        })
        .collect();
    let touches = (0..paths.len())
        .map(|_| {
            let n = 1 + rng.below(3);
            (0..n)
                .map(|_| {
                    let r = rng.below(100);
                    let obj = if r < 70 && cfg.heap_sites > 0 {
                        ObjectRef::HeapSite(rng.below(u64::from(cfg.heap_sites)) as u32)
                    } else if r < 85 && cfg.statics > 0 {
                        ObjectRef::Static(rng.below(u64::from(cfg.statics)) as u32)
                    } else {
                        match rng.below(4) {
                            0 => ObjectRef::Stack(0),
                            1 => ObjectRef::SmallHeap,
                            2 => ObjectRef::Unknown,
                            _ => ObjectRef::NotRecovered,
                        }
                    };
                    (obj, 1 + rng.below(10) as u32)
                })
                .collect()
        })
        .collect();
    let module = cfg.module.as_ref().map(|p| Module {
        path: p.display().to_string(),
        build_id: None,
        bias: BIAS,
        ranges: vec![(BIAS, BIAS + text + u64::from(cfg.statics) * 0x1_0000)],
    });
    Program {
        paths,
        touches,
        sites,
        statics,
        module,
    }
}

/// Inserts paths into a [`Cct`] (node 0 is the root).
struct CctBuilder {
    cct: Cct,
    /// (parent, encoded key) -> node.
    index: HashMap<(u32, u8, u64), u32>,
}

impl CctBuilder {
    fn new() -> Self {
        CctBuilder {
            cct: Cct::default(),
            index: HashMap::new(),
        }
    }

    fn child(&mut self, parent: u32, key: NodeKey) -> u32 {
        let code = match key {
            NodeKey::Root => (0, 0),
            NodeKey::Call(a) => (1, a),
            NodeKey::Object(o) => match o {
                ObjectRef::HeapSite(i) => (2, u64::from(i)),
                ObjectRef::Static(i) => (3, u64::from(i)),
                ObjectRef::Stack(i) => (4, u64::from(i)),
                ObjectRef::SmallHeap => (5, 0),
                ObjectRef::Unknown => (6, 0),
                ObjectRef::NotRecovered => (7, 0),
                ObjectRef::StackFrame(a) => (8, a),
                ObjectRef::UnknownRegion(i) => (9, u64::from(i)),
            },
        };
        let nodes = &mut self.cct.nodes;
        *self
            .index
            .entry((parent, code.0, code.1))
            .or_insert_with(|| {
                nodes.push(CctNode {
                    parent,
                    key,
                    metrics: Vec::new(),
                });
                (nodes.len() - 1) as u32
            })
    }

    fn insert(&mut self, start: u32, path: &[u64], metrics: &[u64]) {
        let leaf = path
            .iter()
            .fold(start, |n, &a| self.child(n, NodeKey::Call(a)));
        let m = &mut self.cct.nodes[leaf as usize].metrics;
        if m.len() < metrics.len() {
            m.resize(metrics.len(), 0);
        }
        for (a, b) in m.iter_mut().zip(metrics) {
            *a += b;
        }
    }
}

/// The profile of thread `t` of the run `cfg` describes.
pub fn generate(cfg: &Config, t: u32) -> ThreadProfile {
    generate_with(cfg, &program(cfg), t)
}

/// [`generate`] with the program built once.
pub fn generate_with(cfg: &Config, prog: &Program, t: u32) -> ThreadProfile {
    let process = cfg.process_of(t);
    let first = (0..t)
        .rev()
        .take_while(|&u| cfg.process_of(u) == process)
        .count() as u32;
    let index = first;
    let mut rng = Rng::new(cfg.seed ^ (u64::from(t) + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    // Imbalance: each rank and each thread has its own intensity.
    let rank_scale = 0.5 + (f64::from(process) * 0.37).fract();
    let thread_scale = 0.5 + rng.unit();
    let mut code = CctBuilder::new();
    let mut heap = CctBuilder::new();
    let mut statics = CctBuilder::new();
    let mut unknown = CctBuilder::new();
    let mut stats = SampleStats::default();
    for (path, touches) in prog.paths.iter().zip(&prog.touches) {
        if rng.below(10) == 0 {
            continue; // this thread never ran this path
        }
        let mean = f64::from(cfg.samples_per_path) * rank_scale * thread_scale;
        let samples = (mean * 2.0 * rng.unit()) as u64;
        if samples == 0 {
            continue;
        }
        let cpu = samples + samples / 3;
        code.insert(0, path, &[samples, cpu]);
        stats.samples += cpu;
        stats.memory_samples += samples;
        let total_w: u32 = touches.iter().map(|&(_, w)| w).sum();
        let mut left = samples;
        for (i, &(obj, w)) in touches.iter().enumerate() {
            let n = if i + 1 == touches.len() {
                left
            } else {
                samples * u64::from(w) / u64::from(total_w.max(1))
            };
            left -= n;
            if n == 0 {
                continue;
            }
            let obj = match obj {
                ObjectRef::Stack(_) => ObjectRef::Stack(index),
                o => o,
            };
            let tree = match obj {
                ObjectRef::HeapSite(_) => &mut heap,
                ObjectRef::Static(_) => &mut statics,
                _ => &mut unknown,
            };
            let node = tree.child(0, NodeKey::Object(obj));
            tree.insert(node, path, &[n]);
            if obj != ObjectRef::NotRecovered {
                stats.address_recovered += n;
                stats.recovered_previous += n;
            }
        }
    }
    if rng.below(4) == 0 {
        stats
            .dropped
            .insert("in profiler code".into(), rng.below(5) + 1);
    }
    let pid = 10_000 + process;
    ThreadProfile {
        process: ProcessInfo {
            pid,
            host: format!("node{}", process / 8),
            rank: (cfg.ranks > 0).then_some(process),
            exe: "/opt/app/bin/app".into(),
            command: vec!["/opt/app/bin/app".into(), "input.dat".into()],
            run_id: format!("bench-{}", cfg.seed),
        },
        thread: ThreadInfo {
            tid: pid * 1000 + index,
            index,
            stack: (
                0x7000_0000_0000 - u64::from(index + 1) * 0x80_0000,
                0x7000_0000_0000 - u64::from(index) * 0x80_0000,
            ),
            start_unix_ns: 1_700_000_000_000_000_000,
            end_unix_ns: 1_700_000_010_000_000_000,
            created_at: Vec::new(),
        },
        events: vec![EventInfo {
            name: "mem:soft".into(),
            period: 100_000,
            unit: "ns".into(),
        }],
        metrics: vec![
            MetricInfo {
                name: "samples".into(),
                unit: "samples".into(),
                description: "memory-access samples".into(),
            },
            MetricInfo {
                name: "cpu_samples".into(),
                unit: "samples".into(),
                description: "all samples".into(),
            },
        ],
        modules: prog.module.iter().cloned().collect(),
        alloc_sites: prog.sites.clone(),
        statics: prog.statics.clone(),
        code: code.cct,
        heap: heap.cct,
        statics_tree: statics.cct,
        unknown: unknown.cct,
        stats,
        ..ThreadProfile::default()
    }
}

/// File name of thread `t`'s profile, as the preload library names it.
pub fn file_name(p: &ThreadProfile) -> String {
    format!(
        "app.{}.{}.{}.{}",
        p.process.host,
        p.process.pid,
        p.thread.tid,
        formats::measurement::EXTENSION
    )
}

/// Writes every thread's profile into `dir` (created); returns the total
/// bytes written.
pub fn write_all(cfg: &Config, dir: &Path) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let prog = program(cfg);
    let mut total = 0;
    for t in 0..cfg.threads {
        let p = generate_with(cfg, &prog, t);
        let bytes = p.to_bytes().map_err(std::io::Error::other)?;
        total += bytes.len() as u64;
        std::fs::write(dir.join(file_name(&p)), bytes)?;
    }
    Ok(total)
}
