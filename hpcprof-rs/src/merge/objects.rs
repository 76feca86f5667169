//! Data objects under construction: their identity across profiles
//! ([`ObjKey`]), what the merge gathers about each beyond the tree
//! ([`ObjExtra`]: access histogram, per-thread values, access sites) and
//! the data tree with its objects ([`DataBuilder`]).

use std::collections::{BTreeMap, HashMap};

use formats::database::{DataObject, ObjectKind};
use formats::patterns::StrideCounts;
use serde::{Deserialize, Serialize};

use super::tree::{Key, TreeBuilder, STACKS};

/// Identity of a data object across profiles.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) enum ObjKey {
    Heap(Vec<u32>),
    Static(String),
    Stack(u32),
    /// A function's frames on the threads' stacks: the function's frame
    /// ([`crate::symbolize::Symbolizer::function_frame`]).
    StackFrame(u32),
    SmallHeap,
    Unknown,
    /// Unknown addresses in mappings of one kind: the label the profiles
    /// gave their regions (`formats::measurement::UnknownRegion`), one
    /// object for all regions, threads and ranks with that label.
    UnknownIn(String),
    NotRecovered,
}

impl ObjKey {
    pub(super) fn kind(&self) -> ObjectKind {
        match self {
            ObjKey::Heap(_) | ObjKey::SmallHeap => ObjectKind::Heap,
            ObjKey::Static(_) => ObjectKind::Static,
            ObjKey::Stack(_) | ObjKey::StackFrame(_) => ObjectKind::Stack,
            ObjKey::Unknown | ObjKey::UnknownIn(_) | ObjKey::NotRecovered => ObjectKind::Unknown,
        }
    }

    pub(super) fn default_name(&self) -> String {
        match self {
            // Set once all objects exist (it reads sources).
            ObjKey::Heap(_) => "heap@[unknown]".to_string(),
            ObjKey::Static(name) => name.clone(),
            ObjKey::Stack(n) => format!("<stack: thread {n}>"),
            // Set once the frames are final (`finish`).
            ObjKey::StackFrame(_) => "stack: locals of [unknown]".to_string(),
            ObjKey::SmallHeap => "<small heap objects>".to_string(),
            ObjKey::Unknown => "<unknown address>".to_string(),
            ObjKey::UnknownIn(label) => format!("<unknown address: {label}>"),
            ObjKey::NotRecovered => "<address not recovered>".to_string(),
        }
    }
}

/// Per-object facts beyond the tree: access histogram and per-thread
/// values.
#[derive(Debug, Default)]
pub(super) struct ObjExtra {
    /// bucket -> sampled accesses.
    pub(super) histogram: BTreeMap<u32, u64>,
    /// Inclusive metrics (database columns) of the object in each thread,
    /// by index into the partial result's `InfoAcc::threads`.
    pub(super) by_thread: Vec<(u32, Vec<u64>)>,
    /// The access histogram of each thread (same indices), sparse.
    pub(super) histogram_by_thread: Vec<(u32, Vec<(u32, u64)>)>,
    /// Access sites: innermost frame of the sampled instruction -> its
    /// stride observations, summed over threads.
    pub(super) sites: HashMap<u32, StrideCounts>,
    /// Sharing events (watchpoint traps) by [`SharingKey`].
    pub(super) sharing: BTreeMap<SharingKey, u64>,
    /// Reuse outcomes per bucket (`formats::patterns::REUSE_BUCKETS`).
    pub(super) reuse: Vec<u64>,
    /// A stack frame's variables that its access sites touched (DWARF
    /// names), with those sites' sampled accesses.
    pub(super) frame_vars: BTreeMap<String, u64>,
}

/// What tells sharing events apart: (true sharing, line offset in the
/// object, thread that trapped (index as in `ObjExtra::by_thread`), the
/// other thread's index in its process, frame of the trapping access,
/// frame of the other thread's sampled access).
pub(super) type SharingKey = (bool, i64, u32, u32, u32, u32);

impl ObjExtra {
    /// Adds `other`, whose thread indices are `thread_offset` lower than
    /// ours (its threads follow ours).
    pub(super) fn absorb(&mut self, other: ObjExtra, thread_offset: u32) {
        for (b, n) in other.histogram {
            let e = self.histogram.entry(b).or_default();
            *e = e.saturating_add(n);
        }
        self.by_thread.extend(
            other
                .by_thread
                .into_iter()
                .map(|(t, values)| (t + thread_offset, values)),
        );
        self.histogram_by_thread.extend(
            other
                .histogram_by_thread
                .into_iter()
                .map(|(t, counts)| (t + thread_offset, counts)),
        );
        for (frame, counts) in other.sites {
            self.sites.entry(frame).or_default().absorb(&counts);
        }
        for ((t, l, thread, o, f, of), n) in other.sharing {
            let e = self
                .sharing
                .entry((t, l, thread + thread_offset, o, f, of))
                .or_default();
            *e = e.saturating_add(n);
        }
        add_values(&mut self.reuse, &other.reuse);
        for (name, n) in other.frame_vars {
            let e = self.frame_vars.entry(name).or_default();
            *e = e.saturating_add(n);
        }
    }
}

/// Adds `values` into `into`, growing it as needed.
pub(super) fn add_values(into: &mut Vec<u64>, values: &[u64]) {
    if into.len() < values.len() {
        into.resize(values.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(values) {
        *a = a.saturating_add(*b);
    }
}

/// The data tree and its objects under construction.
pub(super) struct DataBuilder {
    pub(super) tb: TreeBuilder,
    pub(super) heap_root: u32,
    pub(super) static_root: u32,
    pub(super) unknown_root: u32,
    pub(super) objects: Vec<DataObject>,
    /// Parallel to `objects`.
    pub(super) extras: Vec<ObjExtra>,
    pub(super) keys: Vec<ObjKey>,
    pub(super) object_ids: HashMap<ObjKey, u32>,
}

impl DataBuilder {
    pub(super) fn new() -> Self {
        let mut tb = TreeBuilder::new();
        let heap_root = tb.child(0, Key::Root(1));
        let static_root = tb.child(0, Key::Root(2));
        let unknown_root = tb.child(0, Key::Root(3));
        DataBuilder {
            tb,
            heap_root,
            static_root,
            unknown_root,
            objects: Vec::new(),
            extras: Vec::new(),
            keys: Vec::new(),
            object_ids: HashMap::new(),
        }
    }

    /// The id of an object, created on first use. Heap objects hang below
    /// their allocation path, stack objects below the stacks group of the
    /// unknown root, the others directly below their root.
    pub(super) fn object(&mut self, key: &ObjKey) -> u32 {
        if let Some(&id) = self.object_ids.get(key) {
            return id;
        }
        let id = self.objects.len() as u32;
        let (parent, alloc_path) = match key {
            ObjKey::Heap(path) => (self.tb.path(self.heap_root, path), path.clone()),
            ObjKey::Static(_) => (self.static_root, Vec::new()),
            ObjKey::Stack(_) | ObjKey::StackFrame(_) => (
                self.tb.child(self.unknown_root, Key::Root(STACKS)),
                Vec::new(),
            ),
            _ => (self.unknown_root, Vec::new()),
        };
        let node = self.tb.child(parent, Key::Object(id));
        self.objects.push(DataObject {
            kind: key.kind(),
            name: key.default_name(),
            alloc_path,
            bytes: 0,
            allocations: 0,
            node,
            ..Default::default()
        });
        self.extras.push(ObjExtra::default());
        self.keys.push(key.clone());
        self.object_ids.insert(key.clone(), id);
        id
    }
}
