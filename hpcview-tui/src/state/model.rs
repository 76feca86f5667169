//! The loaded database plus the indices every pane needs: children lists
//! (CSR) and inclusive metrics of both trees, and the memory-boundness proxy
//! of every function (see [`super::bottleneck`]), and the NUMA advice of
//! the objects.
//!
//! Built once when the viewer opens a database; everything else reads it.
//!
//! ```
//! use hpcview_tui::state::model::Model;
//! let model = Model::new(formats::database::Database::default(), None);
//! assert_eq!(model.code.children(0).len(), 0);
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use formats::advice::NumaFinding;
use formats::database::{Database, Frame, NodeKind, ObjectKind, Tree, FILE_NAME};
use formats::views::mem_time_share;

/// Children lists and inclusive metrics of one tree.
#[derive(Debug, Default)]
pub struct TreeIndex {
    /// `columns` values per node.
    inclusive: Vec<u64>,
    /// Exclusive values, `columns` per node (missing entries are 0).
    exclusive: Vec<u64>,
    child_start: Vec<u32>,
    child_list: Vec<u32>,
    columns: usize,
}

impl TreeIndex {
    /// Builds the index in two linear passes (parents precede children).
    pub fn build(tree: &Tree, columns: usize) -> Self {
        let n = tree.nodes.len();
        let mut exclusive = vec![0u64; n * columns];
        for (i, node) in tree.nodes.iter().enumerate() {
            for (slot, v) in exclusive[i * columns..(i + 1) * columns]
                .iter_mut()
                .zip(&node.exclusive)
            {
                *slot = *v;
            }
        }
        let mut inclusive = exclusive.clone();
        for i in (1..n).rev() {
            let p = tree.nodes[i].parent as usize;
            for m in 0..columns {
                inclusive[p * columns + m] += inclusive[i * columns + m];
            }
        }
        // CSR children lists in node order.
        let mut counts = vec![0u32; n + 1];
        for node in tree.nodes.iter().skip(1) {
            counts[node.parent as usize + 1] += 1;
        }
        for i in 1..=n {
            counts[i] += counts[i - 1];
        }
        let child_start = counts.clone();
        let mut fill = counts;
        let mut child_list = vec![0u32; n.saturating_sub(1)];
        for (i, node) in tree.nodes.iter().enumerate().skip(1) {
            let p = node.parent as usize;
            child_list[fill[p] as usize] = i as u32;
            fill[p] += 1;
        }
        TreeIndex {
            inclusive,
            exclusive,
            child_start,
            child_list,
            columns,
        }
    }

    /// Children of node `n`, in node order.
    pub fn children(&self, n: u32) -> &[u32] {
        let n = n as usize;
        if n + 1 >= self.child_start.len() {
            return &[];
        }
        &self.child_list[self.child_start[n] as usize..self.child_start[n + 1] as usize]
    }

    /// Inclusive values of node `n`.
    pub fn inclusive(&self, n: u32) -> &[u64] {
        let n = n as usize;
        self.inclusive
            .get(n * self.columns..(n + 1) * self.columns)
            .unwrap_or(&[])
    }

    /// Exclusive values of node `n`.
    pub fn exclusive(&self, n: u32) -> &[u64] {
        let n = n as usize;
        self.exclusive
            .get(n * self.columns..(n + 1) * self.columns)
            .unwrap_or(&[])
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.child_start.len().saturating_sub(1)
    }

    /// True for an empty index.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A function of the code-centric tree: name and module.
pub type FunctionKey<'a> = (&'a str, &'a str);

/// The database and its indices.
#[derive(Debug)]
pub struct Model {
    pub db: Database,
    /// The database directory (for `src/`), when it was read from disk.
    pub dir: Option<PathBuf>,
    /// Metric columns of every node (at least 1).
    pub columns: usize,
    /// Index of the primary metric.
    pub primary: usize,
    /// Index of the `samples` metric (memory-access samples), if present.
    pub samples_metric: Option<usize>,
    /// Index of the `cpu_samples` metric (all samples), if present.
    pub cpu_metric: Option<usize>,
    pub code: TreeIndex,
    pub data: TreeIndex,
    /// Function id of every frame (frames of the same function and module
    /// share it).
    pub frame_function: Vec<u32>,
    /// Number of distinct functions.
    pub functions: usize,
    /// Function id of every code-tree node (`u32::MAX` for non-frames): a
    /// compact copy for the bottom-up and flat panes.
    pub code_function: Vec<u32>,
    /// Exclusive primary metric (`samples`) and `cpu_samples` of every
    /// function in the code-centric tree (for the memory-boundness proxy).
    pub function_mem: Vec<(u64, u64)>,
    /// Per data node: (samples in functions with a proxy, sum of samples x
    /// that function's proxy) over its subtree.
    data_mem: Vec<(u64, f64)>,
    /// Proxy of every object, by the rule of `formats::views::bottleneck`.
    pub object_mem: Vec<Option<f64>>,
    /// Proxy of every function (by function id), by the same rule.
    pub function_bottleneck: Vec<Option<f64>>,
    /// NUMA advice ([`formats::advice::numa`]) for the objects that need
    /// some, computed once.
    pub numa: Vec<NumaFinding>,
    /// Per frame: its module is an MPI library or an OpenMP runtime
    /// ([`formats::runtimes::of_module`]): the rows `H` hides.
    pub runtime_frame: Vec<bool>,
    /// The CPU samples spent inside those runtimes (the "waiting in
    /// MPI/OpenMP" share of the bottleneck view).
    pub waiting: formats::runtimes::Waiting,
    /// Per code-tree node: the primary metric of its subtree outside the
    /// runtimes' frames, what stays in view below it when `H` hides them
    /// (the hot path follows it then).
    pub code_program: Vec<u64>,
    /// Per data-tree node: the same outside the runtimes' frames and the
    /// objects a runtime allocated.
    pub data_program: Vec<u64>,
    /// Per object: the object whose row shows it. Heap objects of one name
    /// and allocation site reached by several call paths (a function
    /// inlined into two callers, one line run by two threads) are one row
    /// of the data pane, as in `--report` (`report::merge_duplicates`):
    /// the one with the most samples; every other object points to
    /// itself.
    pub row_of: Vec<u32>,
    /// The objects a merged row stands for (the row's own first), by the
    /// row's object; objects alone in their row are not in it.
    pub same_object: HashMap<u32, Vec<u32>>,
}

impl Model {
    /// Indexes a database; `dir` is where its `src/` lives.
    pub fn new(db: Database, dir: Option<PathBuf>) -> Self {
        let columns = db.info.metrics.len().max(1);
        let primary = db.info.primary_metric as usize;
        let find = |name: &str| db.info.metrics.iter().position(|m| m.name == name);
        let samples_metric = find("samples");
        let cpu_metric = find("cpu_samples");
        let code = TreeIndex::build(&db.code, columns);
        let data = TreeIndex::build(&db.data, columns);
        let mut ids: HashMap<FunctionKey<'_>, u32> = HashMap::new();
        let frame_function: Vec<u32> = db
            .frames
            .iter()
            .map(|f| {
                let next = ids.len() as u32;
                *ids.entry((f.function.as_str(), f.module.as_str()))
                    .or_insert(next)
            })
            .collect();
        let functions = ids.len();
        let code_function: Vec<u32> = db
            .code
            .nodes
            .iter()
            .map(|n| match n.kind {
                NodeKind::Frame(f) => frame_function[f as usize],
                _ => u32::MAX,
            })
            .collect();
        let mut function_mem = vec![(0u64, 0u64); functions];
        if let Some(c) = cpu_metric {
            let s = primary;
            for (i, node) in db.code.nodes.iter().enumerate() {
                if let NodeKind::Frame(f) = node.kind {
                    let exc = code.exclusive(i as u32);
                    let e = &mut function_mem[frame_function[f as usize] as usize];
                    e.0 += exc[s];
                    e.1 += exc[c];
                }
            }
        }
        let mut data_mem = Vec::new();
        if cpu_metric.is_some() {
            let s = primary;
            let proxy: Vec<Option<f64>> = function_mem
                .iter()
                .map(|&(s, c)| (c > 0).then(|| s as f64 / c as f64))
                .collect();
            data_mem = vec![(0u64, 0f64); db.data.nodes.len()];
            for (i, node) in db.data.nodes.iter().enumerate() {
                if let NodeKind::Frame(f) = node.kind {
                    let v = data.exclusive(i as u32)[s];
                    if let Some(p) = proxy[frame_function[f as usize] as usize] {
                        data_mem[i] = (v, v as f64 * p);
                    }
                }
            }
            for i in (1..db.data.nodes.len()).rev() {
                let p = db.data.nodes[i].parent as usize;
                let (w, x) = data_mem[i];
                data_mem[p].0 += w;
                data_mem[p].1 += x;
            }
        }
        let (object_mem, function_bottleneck) = Self::proxies(
            &db,
            &data,
            &frame_function,
            &function_mem,
            cpu_metric.is_some(),
        );
        let numa = formats::advice::numa(&db);
        let runtime_frame: Vec<bool> = db
            .frames
            .iter()
            .map(|f| formats::runtimes::of_module(&f.module).is_some())
            .collect();
        let waiting = formats::runtimes::waiting(&db);
        let (row_of, same_object) = Self::same_objects(&db, &data, primary);
        let code_program = Self::program_values(&db, &db.code, &code, &runtime_frame, primary);
        let data_program = Self::program_values(&db, &db.data, &data, &runtime_frame, primary);
        Model {
            code_program,
            data_program,
            row_of,
            same_object,
            numa,
            runtime_frame,
            waiting,
            db,
            dir,
            columns,
            primary,
            samples_metric,
            cpu_metric,
            code,
            data,
            frame_function,
            functions,
            code_function,
            function_mem,
            data_mem,
            object_mem,
            function_bottleneck,
        }
    }

    /// [`Model::code_program`] or [`Model::data_program`] of `tree`: every
    /// node's primary value summed over its subtree, leaving out the
    /// exclusive values of runtime frames and everything below an object a
    /// runtime allocated (the rows `H` hides). One pass down for the
    /// objects, one up for the sums (parents precede children).
    fn program_values(
        db: &Database,
        tree: &Tree,
        index: &TreeIndex,
        runtime_frame: &[bool],
        primary: usize,
    ) -> Vec<u64> {
        let n = tree.nodes.len();
        let mut dropped = vec![false; n];
        let mut sum = vec![0u64; n];
        for (i, node) in tree.nodes.iter().enumerate() {
            let inherited = i > 0 && dropped[node.parent as usize];
            let (runtime_object, runtime_row) = match node.kind {
                NodeKind::Object(o) => (
                    db.objects
                        .get(o as usize)
                        .is_some_and(|o| o.runtime.is_some()),
                    false,
                ),
                NodeKind::Frame(f) => (
                    false,
                    runtime_frame.get(f as usize).copied().unwrap_or(false),
                ),
                NodeKind::Root(_) => (false, false),
            };
            dropped[i] = inherited || runtime_object;
            if !dropped[i] && !runtime_row {
                sum[i] = index.exclusive(i as u32).get(primary).copied().unwrap_or(0);
            }
        }
        for i in (1..n).rev() {
            let p = tree.nodes[i].parent as usize;
            sum[p] += sum[i];
        }
        sum
    }

    /// [`Model::row_of`] and [`Model::same_object`]: heap objects grouped
    /// by name and allocation site ([`crate::findings::object_identity`]),
    /// each group shown by its member with the most samples (the first by
    /// index on a tie).
    fn same_objects(
        db: &Database,
        data: &TreeIndex,
        primary: usize,
    ) -> (Vec<u32>, HashMap<u32, Vec<u32>>) {
        let mut groups: HashMap<(String, String), Vec<u32>> = HashMap::new();
        for (i, o) in db.objects.iter().enumerate() {
            if o.kind == ObjectKind::Heap && o.site_frame().is_some() {
                groups
                    .entry(crate::findings::object_identity(db, i as u32))
                    .or_default()
                    .push(i as u32);
            }
        }
        let mut row_of: Vec<u32> = (0..db.objects.len() as u32).collect();
        let mut same = HashMap::new();
        for mut members in groups.into_values().filter(|m| m.len() > 1) {
            let value = |o: u32| {
                let node = db.objects[o as usize].node;
                data.inclusive(node).get(primary).copied().unwrap_or(0)
            };
            members.sort_by(|&a, &b| value(b).cmp(&value(a)).then(a.cmp(&b)));
            for &m in &members {
                row_of[m as usize] = members[0];
            }
            same.insert(members[0], members);
        }
        (row_of, same)
    }

    /// The objects the row of object `o` (a row's object, `row_of[o] ==
    /// o`) stands for: itself and the objects merged into it
    /// ([`Model::same_object`]).
    pub fn row_objects(&self, o: u32) -> &[u32] {
        match self.same_object.get(&o) {
            Some(members) => members,
            None => std::slice::from_ref(&self.row_of[o as usize]),
        }
    }

    /// The memory-boundness proxies of every object and every function (by
    /// function id): the shared rule of `formats::views::bottleneck` (what
    /// `hpcprof-rs export --view bottleneck` prints), computed here on ids
    /// instead of strings so that a database of a million nodes still opens
    /// within a second; a test checks that both agree. An object's proxy is
    /// the memory samples of the functions that accessed it over their
    /// `cpu_samples`; with the measuring machine's L2 size (mem:soft), a
    /// function's samples of heap and static data count as memory only when
    /// the data it accessed does not fit in L2, stack data never, other data
    /// always. Rows that rule leaves out (nothing sampled) have a proxy of 0
    /// when cpu_samples exist.
    fn proxies(
        db: &Database,
        data: &TreeIndex,
        frame_function: &[u32],
        function_mem: &[(u64, u64)],
        has_cpu: bool,
    ) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
        let primary = db.info.primary_metric as usize;
        let zero = has_cpu.then_some(0.0);
        let mut object_mem = vec![zero; db.objects.len()];
        let mut function_bottleneck = vec![zero; function_mem.len()];
        if !has_cpu {
            return (object_mem, function_bottleneck);
        }
        let ratio = |num: u64, den: u64| mem_time_share(num, den, true);
        // The functions whose instructions accessed each object, with the
        // object's samples at each.
        let n = db.data.nodes.len();
        let mut owner = vec![u32::MAX; n];
        let mut accessors: Vec<Vec<(u32, u64)>> = vec![Vec::new(); db.objects.len()];
        for (i, node) in db.data.nodes.iter().enumerate().skip(1) {
            owner[i] = match node.kind {
                NodeKind::Object(o) => o,
                _ => owner[node.parent as usize],
            };
            if let (o, NodeKind::Frame(f)) = (owner[i], &node.kind) {
                let exc = data.exclusive(i as u32);
                if o != u32::MAX && exc.iter().any(|&v| v > 0) {
                    let v = exc.get(primary).copied().unwrap_or(0);
                    accessors[o as usize].push((frame_function[*f as usize], v));
                }
            }
        }
        // Memory samples per function (None: every sample is memory time).
        let l2 = db.info.stats.cache_bytes.l2;
        let memory: Option<Vec<u64>> =
            (l2 != 0 && !db.info.stats.attribution.is_empty()).then(|| {
                let sized = |o: &formats::database::DataObject| {
                    matches!(o.kind, ObjectKind::Heap | ObjectKind::Static)
                };
                let mut working_set = vec![0u64; function_mem.len()];
                for (o, acc) in db.objects.iter().zip(&accessors) {
                    if sized(o) {
                        let mut fns: Vec<u32> = acc.iter().map(|a| a.0).collect();
                        fns.sort_unstable();
                        fns.dedup();
                        for f in fns {
                            working_set[f as usize] += o.bytes;
                        }
                    }
                }
                let mut memory = vec![0u64; function_mem.len()];
                for (o, acc) in db.objects.iter().zip(&accessors) {
                    for &(f, v) in acc {
                        // Lines that bounce between threads are memory
                        // time whatever the object's size.
                        let resident = o.sharing.is_empty()
                            && match o.kind {
                                ObjectKind::Stack => true,
                                _ if sized(o) => working_set[f as usize] <= l2,
                                _ => false,
                            };
                        if !resident {
                            memory[f as usize] += v;
                        }
                    }
                }
                memory
            });
        for (f, &(s, c)) in function_mem.iter().enumerate() {
            let num = memory.as_ref().map_or(s, |m| m[f]);
            function_bottleneck[f] = ratio(num, c);
        }
        for (o, acc) in accessors.into_iter().enumerate() {
            let mut fns: Vec<u32> = acc.iter().map(|a| a.0).collect();
            fns.sort_unstable();
            fns.dedup();
            let den: u64 = fns.iter().map(|&f| function_mem[f as usize].1).sum();
            let num = match &memory {
                Some(m) => fns.iter().map(|&f| m[f as usize]).sum(),
                None => data.inclusive(db.objects[o].node)[primary],
            };
            object_mem[o] = ratio(num, den);
        }
        (object_mem, function_bottleneck)
    }

    /// Reads a database directory (or its `profile.db` file) and indexes it.
    /// Errors name the file: missing, unreadable, damaged, newer version.
    pub fn open(path: &Path) -> Result<Self> {
        let db = load(path)?;
        let dir = if path.is_dir() {
            Some(path.to_path_buf())
        } else {
            path.parent().map(Path::to_path_buf)
        };
        Ok(Model::new(db, dir))
    }

    /// Name of metric `m`.
    pub fn metric_name(&self, m: usize) -> &str {
        self.db
            .info
            .metrics
            .get(m)
            .map(|x| x.name.as_str())
            .unwrap_or("samples")
    }

    /// The frame of a tree node kind, if it is one.
    pub fn frame(&self, kind: &NodeKind) -> Option<&Frame> {
        match kind {
            NodeKind::Frame(f) => self.db.frames.get(*f as usize),
            _ => None,
        }
    }

    /// Where the source of `file` is: the copy in `DB/src/` (absolute path
    /// without the leading `/`), else the original path if it is readable.
    pub fn source_path(&self, file: &str) -> Option<PathBuf> {
        if let Some(dir) = &self.dir {
            let rel = file.trim_start_matches('/');
            if !rel.is_empty() && !rel.split('/').any(|c| c == "..") {
                let copy = dir.join("src").join(rel);
                if copy.is_file() {
                    return Some(copy);
                }
            }
        }
        let original = PathBuf::from(file);
        (original.is_absolute() && original.is_file()).then_some(original)
    }

    /// The memory-boundness proxy of a data node: the proxies of the
    /// functions that accessed it, weighted by its samples in each.
    pub fn data_proxy(&self, node: u32) -> Option<f64> {
        self.cpu_metric?;
        let &(w, x) = self.data_mem.get(node as usize)?;
        Some(if w > 0 { x / w as f64 } else { 0.0 })
    }

    /// The memory-boundness proxy of a function: its exclusive `samples` over
    /// its exclusive `cpu_samples` (None without those metrics or samples).
    pub fn function_proxy(&self, function: u32) -> Option<f64> {
        let (s, c) = *self.function_mem.get(function as usize)?;
        (self.cpu_metric.is_some() && c > 0).then(|| s as f64 / c as f64)
    }
}

/// Reads a database directory (or its `profile.db`); errors name the file.
pub fn load(path: &Path) -> Result<Database> {
    if !path.exists() {
        anyhow::bail!("database {} does not exist", path.display());
    }
    let file = if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    Database::from_bytes(&bytes).with_context(|| format!("cannot use {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use formats::views::{bottleneck, Region, Thresholds};

    /// The proxies agree with `formats::views::bottleneck` (the rule of
    /// `hpcprof-rs export --view bottleneck`).
    fn agrees(db: Database) {
        let model = Model::new(db.clone(), None);
        let rows = bottleneck(&db, Thresholds::default());
        assert!(!rows.is_empty());
        for row in rows {
            let mine = match row.region {
                Region::Object(_) => {
                    let o = db
                        .objects
                        .iter()
                        .position(|o| {
                            o.name == row.name
                                && o.alloc_path.len() == row.alloc_path.len()
                                && o.alloc_path
                                    .iter()
                                    .zip(&row.alloc_path)
                                    .all(|(&f, g)| db.frames[f as usize] == **g)
                        })
                        .unwrap();
                    model.object_mem[o]
                }
                Region::Function => {
                    let f = db
                        .frames
                        .iter()
                        .position(|f| {
                            f.function == row.name && Some(f.module.as_str()) == row.module
                        })
                        .unwrap();
                    model.function_bottleneck[model.frame_function[f] as usize]
                }
            };
            match (mine, row.mem_time_share) {
                (Some(a), Some(b)) => assert!((a - b).abs() < 1e-12, "{}: {a} vs {b}", row.name),
                (a, b) => assert_eq!(a, b, "{}", row.name),
            }
        }
    }

    #[test]
    fn proxies_match_formats_views_bottleneck() {
        agrees(fixtures::abc());
        agrees(fixtures::synthetic(20_000));
        let mut no_cpu = fixtures::abc();
        no_cpu.info.metrics.truncate(1);
        agrees(no_cpu);
        // With the machine's L2 size and mem:soft's rule counters, cache-
        // resident data is compute and an object shares its loop's memory
        // time (abc's A, B and C are read in one function).
        for l2 in [1 << 20, 1 << 40] {
            let mut cached = fixtures::abc();
            cached.info.stats.cache_bytes.l2 = l2;
            cached.info.stats.attribution.insert("landed".into(), 1);
            agrees(cached.clone());
            // An object whose lines bounce between threads is memory time
            // however small: the function that touches it is too.
            cached.objects[0]
                .sharing
                .push(formats::database::SharingLine {
                    true_sharing: false,
                    events: 3,
                    ..Default::default()
                });
            agrees(cached);
        }
    }
}
