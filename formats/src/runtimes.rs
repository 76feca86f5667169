//! Runtimes as runtimes: which modules are an MPI library (Open MPI,
//! MPICH, UCX, libfabric, verbs) or an OpenMP runtime (libgomp, libomp),
//! how their memory is named (`Open MPI: shared-memory transport ...`),
//! and how much of the sampled CPU time a run spent inside them
//! ([`waiting`]: polling for messages, spinning at barriers).
//!
//! `hpcprof-rs` sets [`DataObject::runtime`](crate::database::DataObject)
//! on heap objects whose allocation path's innermost frame outside the
//! system libraries is in a runtime; reports group those rows, hide them
//! on request, and give them no findings (a program cannot pad or reorder
//! a runtime's barrier).
//!
//! ```
//! use formats::runtimes::{of_module, Family};
//! let r = of_module("/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so").unwrap();
//! assert_eq!(r.name, "Open MPI");
//! assert_eq!(r.family, Family::Mpi);
//! assert_eq!(of_module("/usr/lib/x86_64-linux-gnu/libgomp.so.1").unwrap().name, "OpenMP runtime");
//! assert!(of_module("/home/me/a.out").is_none());
//! ```

use crate::database::{Database, NodeKind};

/// What kind of runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Message passing: MPI libraries and their transports.
    Mpi,
    /// Thread teams: OpenMP runtimes.
    OpenMp,
}

/// A runtime a module belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Runtime {
    /// As shown before a runtime object's name: `Open MPI`, `MPICH`,
    /// `MPI`, `UCX`, `libfabric`, `RDMA verbs`, `OpenMP runtime`.
    pub name: &'static str,
    pub family: Family,
}

const fn mpi(name: &'static str) -> Runtime {
    Runtime {
        name,
        family: Family::Mpi,
    }
}

/// (base-name prefix, runtime), first match wins.
const MODULES: &[(&str, Runtime)] = &[
    ("libmpich", mpi("MPICH")),
    ("libmpl.", mpi("MPICH")),
    ("libopen-pal", mpi("Open MPI")),
    ("libopen-rte", mpi("Open MPI")),
    ("libopen-orted", mpi("Open MPI")),
    ("libpmix", mpi("Open MPI")),
    ("libprrte", mpi("Open MPI")),
    ("libmca_common_", mpi("Open MPI")),
    ("mca_", mpi("Open MPI")),
    ("libmpi_", mpi("MPI")),
    ("libmpi.", mpi("MPI")),
    ("libmpi++", mpi("MPI")),
    ("libucp", mpi("UCX")),
    ("libuct", mpi("UCX")),
    ("libucs", mpi("UCX")),
    ("libucm", mpi("UCX")),
    ("libfabric", mpi("libfabric")),
    ("libpsm2", mpi("libfabric")),
    ("libibverbs", mpi("RDMA verbs")),
    ("librdmacm", mpi("RDMA verbs")),
    ("libmlx5", mpi("RDMA verbs")),
    (
        "libgomp",
        Runtime {
            name: "OpenMP runtime",
            family: Family::OpenMp,
        },
    ),
    (
        "libomp.",
        Runtime {
            name: "OpenMP runtime",
            family: Family::OpenMp,
        },
    ),
    (
        "libiomp",
        Runtime {
            name: "OpenMP runtime",
            family: Family::OpenMp,
        },
    ),
];

fn base(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// The runtime the module at `module` (a path) belongs to, if any. A
/// `libmpi.so` is Open MPI's or MPICH's by its directory (`openmpi`,
/// `mpich`) or Open MPI's soname (`libmpi.so.40`), plain `MPI` otherwise.
pub fn of_module(module: &str) -> Option<Runtime> {
    let b = base(module);
    let (_, r) = MODULES.iter().find(|(p, _)| b.starts_with(p))?;
    if r.name == "MPI" {
        let lower = module.to_ascii_lowercase();
        // Open MPI 4 and 5's soname (Debian keeps it outside `openmpi/`).
        if lower.contains("openmpi") || b.starts_with("libmpi.so.40") {
            return Some(mpi("Open MPI"));
        }
        if lower.contains("mpich") {
            return Some(mpi("MPICH"));
        }
    }
    Some(*r)
}

/// The C library, the loader, the threads library and the vDSO: frames a
/// runtime calls to wait (futex, poll, sched_yield) and allocate, skipped
/// when looking for the code a sample or an allocation belongs to.
pub fn is_system_module(module: &str) -> bool {
    let b = base(module);
    [
        "libc.so",
        "libc-",
        "ld-linux",
        "ld-2.",
        "libpthread",
        "linux-vdso",
        "[vdso]",
    ]
    .iter()
    .any(|p| b.starts_with(p))
}

/// What part of a runtime the module is, for object names: `shared-memory
/// transport` (Open MPI's vader/sm and their segment files),
/// `pml ob1` (an Open MPI component), `MPI library`, `libgomp`, ...
/// `label` is the object's label (a mapped file's name), if any.
pub fn component(module: &str, label: Option<&str>) -> String {
    let b = base(module);
    let stem = b.split(".so").next().unwrap_or(b);
    let shared = |s: &str| s.contains("vader") || s.contains("sm_segment") || s.contains("btl_sm");
    if shared(stem) || label.is_some_and(shared) || stem.starts_with("mca_smsc") {
        return "shared-memory transport".to_string();
    }
    if let Some(rest) = stem.strip_prefix("mca_") {
        return rest.replacen('_', " ", 1);
    }
    if stem.starts_with("libmpi") || stem.starts_with("libmpich") {
        return "MPI library".to_string();
    }
    if stem.starts_with("libopen-pal") {
        return "portability layer (OPAL)".to_string();
    }
    if ["libopen-rte", "libopen-orted", "libpmix", "libprrte"]
        .iter()
        .any(|p| stem.starts_with(p))
    {
        return "run-time environment".to_string();
    }
    stem.to_string()
}

/// CPU samples spent inside runtimes: a sample counts for the runtime of
/// the innermost frame of its call path outside the system libraries
/// ([`is_system_module`]): a spin or poll loop in libgomp or Open MPI,
/// and the futex or `sched_yield` they call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Waiting {
    /// The metric counted: `cpu_samples` when the database has it (all
    /// timer samples), else the primary metric.
    pub metric: String,
    /// Samples of the metric in the whole code tree.
    pub total: u64,
    /// Samples inside MPI libraries and their transports.
    pub mpi: u64,
    /// Samples inside OpenMP runtimes.
    pub openmp: u64,
    /// Per runtime name, most samples first.
    pub by_runtime: Vec<(&'static str, u64)>,
}

impl Waiting {
    /// Share of `total` in MPI libraries.
    pub fn mpi_share(&self) -> f64 {
        share(self.mpi, self.total)
    }

    /// Share of `total` in OpenMP runtimes.
    pub fn openmp_share(&self) -> f64 {
        share(self.openmp, self.total)
    }

    /// The "Waiting in MPI/OpenMP: 65.4% of cpu_samples (...)" line of
    /// `hpcview-tui --report` and `hpcprof-rs advise` (with its newline);
    /// empty when no sample was inside a runtime.
    pub fn line(&self) -> String {
        if self.mpi + self.openmp == 0 {
            return String::new();
        }
        let pct = |n: u64| format!("{:.1}%", 100.0 * share(n, self.total));
        let per: Vec<String> = self
            .by_runtime
            .iter()
            .map(|(n, v)| format!("{n} {}", pct(*v)))
            .collect();
        format!(
            "Waiting in MPI/OpenMP: {} of {} ({} of {}: {}): time inside the runtimes' code (polling for messages, spinning at barriers), i.e. communication or load imbalance\n",
            pct(self.mpi + self.openmp),
            self.metric,
            self.mpi + self.openmp,
            self.total,
            per.join(", ")
        )
    }
}

fn share(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 / total as f64
    }
}

/// The CPU samples of `db` spent inside MPI and OpenMP runtimes.
pub fn waiting(db: &Database) -> Waiting {
    let column = db
        .metric_column("cpu_samples")
        .unwrap_or(db.info.primary_metric as usize);
    let metric = db
        .info
        .metrics
        .get(column)
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let nodes = &db.code.nodes;
    // The runtime each node's samples belong to: the innermost non-system
    // frame from the node to the root decides (memoised per node).
    let mut decided: Vec<Option<Option<Runtime>>> = vec![None; nodes.len()];
    let mut out = Waiting {
        metric,
        ..Default::default()
    };
    let mut by: std::collections::HashMap<&'static str, u64> = Default::default();
    for (i, node) in nodes.iter().enumerate() {
        let value = node.exclusive.get(column).copied().unwrap_or(0);
        if value == 0 {
            continue;
        }
        out.total += value;
        let runtime = owner(db, i, &mut decided);
        if let Some(r) = runtime {
            match r.family {
                Family::Mpi => out.mpi += value,
                Family::OpenMp => out.openmp += value,
            }
            *by.entry(r.name).or_default() += value;
        }
    }
    out.by_runtime = by.into_iter().collect();
    out.by_runtime
        .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    out
}

/// The runtime whose code node `i` of the code tree is in (the innermost
/// non-system frame from `i` to the root), memoised in `decided`.
fn owner(db: &Database, i: usize, decided: &mut [Option<Option<Runtime>>]) -> Option<Runtime> {
    let nodes = &db.code.nodes;
    let mut chain = Vec::new();
    let mut at = i;
    let verdict = loop {
        if let Some(v) = decided[at] {
            break v;
        }
        chain.push(at);
        let node = &nodes[at];
        let frame = match node.kind {
            NodeKind::Frame(f) => db.frames.get(f as usize),
            _ => None,
        };
        match frame {
            Some(f) if !is_system_module(&f.module) && !f.module.is_empty() => {
                break of_module(&f.module);
            }
            _ => {}
        }
        if node.parent == u32::MAX || node.parent as usize >= nodes.len() {
            break None;
        }
        at = node.parent as usize;
    };
    for c in chain {
        decided[c] = Some(verdict);
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_classified() {
        let om = "/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40";
        assert_eq!(of_module(om).unwrap().name, "Open MPI");
        assert_eq!(
            of_module("/usr/lib/x86_64-linux-gnu/libmpich.so.12")
                .unwrap()
                .name,
            "MPICH"
        );
        assert_eq!(of_module("/opt/x/libmpi.so.12").unwrap().name, "MPI");
        assert_eq!(
            of_module("/usr/lib/x86_64-linux-gnu/libmpi.so.40")
                .unwrap()
                .name,
            "Open MPI"
        );
        assert_eq!(of_module("/usr/lib/libucp.so.0").unwrap().name, "UCX");
        assert_eq!(
            of_module("/usr/lib/libomp.so.5").unwrap().family,
            Family::OpenMp
        );
        assert!(of_module("/usr/lib/libm.so.6").is_none());
        assert!(is_system_module("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(!is_system_module("/usr/lib/libgomp.so.1"));
    }

    #[test]
    fn waiting_counts_samples_inside_runtimes() {
        use crate::database::{Frame, TreeNode};
        use crate::measurement::MetricInfo;
        let frame = |function: &str, module: &str| Frame {
            function: function.into(),
            module: module.into(),
            ..Default::default()
        };
        let node = |parent: u32, f: u32, v: u64| TreeNode {
            parent,
            kind: NodeKind::Frame(f),
            exclusive: vec![0, v],
            threads: None,
            ranks: None,
            by_rank: Vec::new(),
        };
        let mut db = Database::default();
        db.info.metrics = ["samples", "cpu_samples"]
            .iter()
            .map(|n| MetricInfo {
                name: n.to_string(),
                ..Default::default()
            })
            .collect();
        db.frames = vec![
            frame("main", "/bin/app"),
            frame("gomp_barrier_wait", "/usr/lib/libgomp.so.1"),
            frame("futex_wait", "/lib/x86_64-linux-gnu/libc.so.6"),
            frame("memcpy", "/lib/x86_64-linux-gnu/libc.so.6"),
        ];
        db.code.nodes.push(node(0, 0, 70)); // 1: main
        db.code.nodes.push(node(1, 1, 30)); // 2: main > libgomp
        db.code.nodes.push(node(2, 2, 10)); // 3: ... > libgomp > libc
        db.code.nodes.push(node(1, 3, 5)); // 4: main > libc (the program's)
        let w = waiting(&db);
        assert_eq!(w.metric, "cpu_samples");
        assert_eq!((w.total, w.openmp, w.mpi), (115, 40, 0));
        assert_eq!(w.by_runtime, vec![("OpenMP runtime", 40)]);
        assert!((w.openmp_share() - 40.0 / 115.0).abs() < 1e-12);
        assert!(w.line().starts_with(
            "Waiting in MPI/OpenMP: 34.8% of cpu_samples (40 of 115: OpenMP runtime 34.8%)"
        ));
        assert_eq!(Waiting::default().line(), "");
    }

    #[test]
    fn components_are_named() {
        let vader = "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so";
        assert_eq!(component(vader, None), "shared-memory transport");
        assert_eq!(
            component(
                "/x/libopen-pal.so.40",
                Some("/dev/shm/vader_segment.vm.1.0")
            ),
            "shared-memory transport"
        );
        assert_eq!(component("/x/mca_pml_ob1.so", None), "pml ob1");
        assert_eq!(component("/x/libmpi.so.40", None), "MPI library");
        assert_eq!(component("/usr/lib/libgomp.so.1", None), "libgomp");
    }
}
