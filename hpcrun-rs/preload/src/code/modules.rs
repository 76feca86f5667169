//! Loaded modules: their address ranges, build ids, unwind sections, function
//! symbols (to find instruction boundaries) and static variables (the
//! static-data map).
//!
//! A snapshot is built outside any signal handler (at load time, at each
//! `dlopen` and `dlclose`) and then only read; the handler and the hooks
//! reach it through an atomic pointer, inside a read section.
//!
//! A module's symbols (functions and static variables) are needed only to
//! attribute samples: they are read at the first need ([`read_symbols`]),
//! not at load, so a process that exits before its first sample (a shell
//! or build tool's short-lived child) never reads them. From then on,
//! modules loaded later are read whole at their `dlopen`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};

use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

use super::elf_image;
use super::unwind::{self, CodeModule, UnwindSections};
use crate::sys::{self, LoadedModule};

#[derive(Debug, Clone)]
pub struct ModuleInfo {
    pub path: String,
    pub bias: u64,
    pub build_id: Option<String>,
    /// Loaded segments (runtime addresses) and whether they are executable.
    pub segments: Vec<(u64, u64, bool)>,
    pub sections: UnwindSections,
    /// True for this library itself.
    pub is_self: bool,
    /// Whose code the module is: the program's, an MPI or OpenMP
    /// runtime's, or a system library's. Small heap blocks allocated right
    /// from the program's or a runtime's code get their allocation site
    /// ([`crate::objects::small_sites`]).
    pub owner: CodeOwner,
}

/// Whose code a module is ([`ModuleInfo::owner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeOwner {
    /// The program's own code: the executable or a library of its (such
    /// as `liblammps.so`).
    Program,
    /// An MPI library, its components and transports, or an OpenMP
    /// runtime ([`formats::runtimes::of_module`]).
    Runtime,
    /// The C++ standard library (`libstdc++`, `libc++`): its `operator
    /// new` makes the small objects of C++ programs, whose own code is
    /// found one frame further out.
    CxxRuntime,
    /// The C and C++ runtimes, the loader, the common system libraries
    /// they use, and this library itself.
    System,
}

/// A static variable at runtime addresses.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

/// One module as read once from its file; shared by every snapshot.
#[derive(Debug)]
pub struct ModuleData {
    pub info: ModuleInfo,
    /// Its symbols, once read ([`read_symbols`]).
    symbols: OnceLock<Symbols>,
}

/// A module's functions and static variables.
#[derive(Debug, Default)]
pub struct Symbols {
    /// Static variables sorted by start (the first `sorted_statics`), then
    /// one entry per data section (`.data`, `.bss`, `.rodata`) named
    /// `<.bss of libx.so>`: the fallback for an address in the module's
    /// data that no symbol covers (stripped libraries keep only their
    /// exported symbols).
    pub statics: Vec<Symbol>,
    /// How many of `statics` are symbols, sorted by start.
    pub sorted_statics: usize,
    /// Function (start, end) sorted by start.
    pub functions: Vec<(u64, u64)>,
}

impl ModuleData {
    /// A module whose symbols are known already.
    pub fn with_symbols(info: ModuleInfo, symbols: Symbols) -> ModuleData {
        ModuleData {
            info,
            symbols: OnceLock::from(symbols),
        }
    }

    /// Its symbols; `None` until they were read ([`read_symbols`]).
    /// Lock-free (a signal handler may ask).
    pub fn symbols(&self) -> Option<&Symbols> {
        self.symbols.get()
    }
}

/// The modules loaded at one moment. A replaced snapshot is freed once no
/// read section can still hold it (`sys::publish`); module data is shared
/// between snapshots.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// (stable module id, data).
    pub modules: Vec<(u32, Arc<ModuleData>)>,
    /// Every loaded segment as (start, end, index into `modules`,
    /// executable), sorted by start: the handler's address -> module lookups
    /// are a binary search, not a scan over every module (an MPI program
    /// loads a hundred or more).
    segments: Vec<(u64, u64, u32, bool)>,
    /// Segments of this library itself.
    own: Vec<(u64, u64)>,
}

/// Every module read so far, by stable id (index); never shrinks, so ids
/// in trees stay meaningful after a dlclose.
static CACHE: Mutex<Cache> = Mutex::new(Cache {
    modules: Vec::new(),
    by_bias: BTreeMap::new(),
});

struct Cache {
    modules: Vec<Arc<ModuleData>>,
    /// Ids by load bias: a refresh (at every dlopen and dlclose; an MPI
    /// library makes a hundred or more) finds each loaded module without
    /// comparing it with every module ever read.
    by_bias: BTreeMap<u64, Vec<usize>>,
}

impl Cache {
    fn find(&self, module: &LoadedModule) -> Option<usize> {
        self.by_bias.get(&module.bias)?.iter().copied().find(|&id| {
            let m = &self.modules[id].info;
            m.path == module.path && m.segments == module.segments
        })
    }

    fn add(&mut self, data: ModuleData) -> usize {
        let id = self.modules.len();
        self.by_bias.entry(data.info.bias).or_default().push(id);
        self.modules.push(Arc::new(data));
        id
    }
}

static SNAPSHOT: sys::Published<Snapshot> = sys::Published::new();

/// The current snapshot (safe in a signal handler); valid only inside a
/// read section (`sys::reading`).
pub fn get() -> Option<&'static Snapshot> {
    SNAPSHOT.get()
}

/// Serialises refreshes (dlopen/dlclose from several threads).
static REFRESH: Mutex<()> = Mutex::new(());

/// Reads the loaded modules (new ones from their files) and publishes a new
/// snapshot and unwinder. `except` leaves out the module loaded at that
/// bias (used just before dlclose unmaps it).
pub fn refresh(except: Option<u64>) {
    let _serial = REFRESH.lock().unwrap_or_else(|e| e.into_inner());
    let own = sys::own_address();
    let mut snapshot = Snapshot::default();
    let loaded = sys::loaded_modules();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    for (index, module) in loaded.into_iter().enumerate() {
        if except == Some(module.bias) && !module.path.is_empty() {
            continue;
        }
        let id = match cache.find(&module) {
            Some(id) => {
                // Read before symbols were wanted, then unloaded while
                // they were read for the loaded modules: read now.
                let m = &cache.modules[id];
                if SYMBOLS_WANTED.load(Acquire) && m.symbols.get().is_none() {
                    let _ = m.symbols.set(read_module_symbols(&m.info));
                }
                id
            }
            None => {
                // The executable (first) is never "this library": when the
                // library is linked into one (benchmarks), its code is the
                // program's.
                let is_self =
                    index > 0 && module.segments.iter().any(|&(s, e, _)| own >= s && own < e);
                cache.add(read_module(&module, is_self, SYMBOLS_WANTED.load(Acquire)))
            }
        };
        snapshot
            .modules
            .push((id as u32, cache.modules[id].clone()));
    }
    drop(cache);
    snapshot.index();
    unwind::refresh(snapshot.modules.iter().map(|(_, m)| CodeModule {
        path: &m.info.path,
        bias: m.info.bias,
        segments: &m.info.segments,
        sections: &m.info.sections,
    }));
    SNAPSHOT.publish(snapshot);
    if except.is_some() {
        // The module is unmapped next: a handler or hook that took the
        // previous unwinder (which reads the module's tables in place) must
        // be done with it first. Bounded: a reader stopped for longer (by a
        // debugger, say) is not waited for.
        sys::wait_for_readers(READERS_WAIT_NS);
    }
}

/// Set once symbols were asked for ([`read_symbols`]): from then on,
/// modules are read with their symbols as they are loaded.
static SYMBOLS_WANTED: AtomicBool = AtomicBool::new(false);

/// True once every loaded module's symbols were read ([`read_symbols`]).
pub fn symbols_read() -> bool {
    SYMBOLS_WANTED.load(Acquire)
}

/// Reads the symbols of every module of the current snapshot that has none
/// yet, and has modules loaded later read with theirs. `wait` false (in a
/// signal handler): gives up, returning false, when a refresh is under
/// way instead of waiting for it. Takes no lock but the refresh mutex,
/// and calls nothing in libc but `open`, `fstat`, `mmap`, `munmap` and
/// `close` (and the library's own heap): a signal handler may call it
/// when the thread it interrupted holds none of these, alone in its
/// process.
pub fn read_symbols(wait: bool) -> bool {
    if SYMBOLS_WANTED.load(Acquire) {
        return true;
    }
    let _serial = match REFRESH.try_lock() {
        Ok(guard) => guard,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) if wait => {
            REFRESH.lock().unwrap_or_else(|e| e.into_inner())
        }
        Err(std::sync::TryLockError::WouldBlock) => return false,
    };
    if SYMBOLS_WANTED.load(Acquire) {
        return true;
    }
    // Snapshots are replaced only under the refresh mutex, held here.
    let section = sys::reading();
    if let Some(snapshot) = SNAPSHOT.get() {
        for (_, m) in &snapshot.modules {
            if m.symbols.get().is_none() {
                let _ = m.symbols.set(read_module_symbols(&m.info));
            }
        }
    }
    drop(section);
    SYMBOLS_WANTED.store(true, Release);
    true
}

/// How long `dlclose` waits for readers of the unwinder that still has the
/// module (a handler takes tens of microseconds; a preempted one, a
/// scheduler slice or a few).
const READERS_WAIT_NS: u64 = 100_000_000;

/// Every module ever read, by stable id (for the file's module table).
pub fn all_modules() -> Vec<Arc<ModuleData>> {
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .modules
        .clone()
}

/// The static variable `index` of module `id`.
pub fn static_symbol(id: u32, index: u32) -> Option<Symbol> {
    let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .modules
        .get(id as usize)?
        .symbols()?
        .statics
        .get(index as usize)
        .cloned()
}

/// Base-name prefixes of system libraries that are never the program's
/// own code (besides [`formats::runtimes`]' C library, loader and MPI and
/// OpenMP runtimes): language runtimes and what MPI libraries load.
const SYSTEM_LIBRARIES: &[&str] = &[
    "libstdc++",
    "libc++",
    "libgcc_s",
    "libgfortran",
    "libquadmath",
    "libm.so",
    "libdl",
    "librt",
    "libevent",
    "libhwloc",
    "libltdl",
    "libudev",
    "libz.so",
    "libnl",
    "libxml2",
    "liblzma",
    "libcrypto",
    "libssl",
    "libnuma",
    "libpython",
    "libffi",
    "libjemalloc",
    "libtcmalloc",
    "libmimalloc",
];

/// Whose code the module at `path` is (see [`ModuleInfo::owner`]).
fn owner_of_module(path: &str) -> CodeOwner {
    let base = path.rsplit('/').next().unwrap_or(path);
    if base.starts_with("libstdc++") || base.starts_with("libc++") {
        CodeOwner::CxxRuntime
    } else if path.is_empty()
        || formats::runtimes::is_system_module(path)
        || SYSTEM_LIBRARIES.iter().any(|p| base.starts_with(p))
    {
        CodeOwner::System
    } else if formats::runtimes::of_module(path).is_some()
        || path.contains("/openmpi/")
        || path.contains("/mpich/")
    {
        CodeOwner::Runtime
    } else {
        CodeOwner::Program
    }
}

/// Reads a newly loaded module: its build id and unwind sections, and
/// with `symbols` its symbols too (else they are read at the first need).
/// The build id and unwind sections come from the loaded image
/// ([`elf_image`]); the file is opened only for the symbols, or when the
/// image cannot answer.
fn read_module(loaded: &LoadedModule, is_self: bool, symbols: bool) -> ModuleData {
    let mut info = ModuleInfo {
        path: loaded.path.clone(),
        bias: loaded.bias,
        build_id: None,
        segments: loaded.segments.clone(),
        sections: UnwindSections::default(),
        is_self,
        owner: match is_self {
            true => CodeOwner::System,
            false => owner_of_module(&loaded.path),
        },
    };
    let module = |info: ModuleInfo, symbols: Option<Symbols>| ModuleData {
        symbols: symbols.map_or_else(OnceLock::new, OnceLock::from),
        info,
    };
    if loaded.path.is_empty() || loaded.path.starts_with("linux-vdso") {
        return module(info, Some(Symbols::default()));
    }
    if let Some((build_id, sections)) = elf_image::facts(loaded) {
        info.build_id = build_id.map(|id| hex(&id));
        info.sections = sections;
        let read = (symbols || is_self).then(|| read_module_symbols(&info));
        return module(info, read);
    }
    let Some(mapped) = sys::MappedFile::open(&loaded.path) else {
        return module(info, Some(Symbols::default()));
    };
    let Ok(file) = object::File::parse(mapped.bytes()) else {
        return module(info, Some(Symbols::default()));
    };
    let (build_id, sections) = file_facts(&file);
    info.build_id = build_id;
    info.sections = sections;
    let read = (symbols || is_self).then(|| symbols_of(&file, &info));
    module(info, read)
}

/// A build id as lowercase hex.
fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The build id (hex) and unwind sections of a module, from its file.
fn file_facts(file: &object::File<'_>) -> (Option<String>, UnwindSections) {
    let build_id = file.build_id().ok().flatten().map(hex);
    let range = |name: &str| {
        file.section_by_name(name)
            .map(|s| (s.address(), s.address() + s.size()))
    };
    let sections = UnwindSections {
        text: range(".text"),
        eh_frame: range(".eh_frame"),
        eh_frame_hdr: range(".eh_frame_hdr"),
        got: range(".got"),
    };
    (build_id, sections)
}

/// Reads the symbols of a module whose other data was read already.
fn read_module_symbols(info: &ModuleInfo) -> Symbols {
    if info.is_self || info.path.is_empty() || info.path.starts_with("linux-vdso") {
        return Symbols::default();
    }
    let Some(mapped) = sys::MappedFile::open(&info.path) else {
        return Symbols::default();
    };
    let Ok(file) = object::File::parse(mapped.bytes()) else {
        return Symbols::default();
    };
    symbols_of(&file, info)
}

/// Modules whose symbols were not read because the kernel had refused
/// the library's heap memory and the reserve could not spare them.
static SYMBOLS_LEFT_OUT: AtomicU64 = AtomicU64::new(0);

/// Modules whose symbols were left out short of memory (for the notice
/// on the refused memory, `sandbox::notices`).
pub fn symbols_left_out() -> u64 {
    SYMBOLS_LEFT_OUT.load(Relaxed)
}

/// Heap bytes that reading `file`'s symbols may take at most: its symbol
/// table's entries (a name each) and its unwind table's functions, twice
/// (vectors that grow).
fn symbols_bytes(file: &object::File<'_>) -> usize {
    let symbols = file.symbols().count().max(file.dynamic_symbols().count());
    let unwound = file
        .section_by_name(".eh_frame_hdr")
        .map_or(0, |s| s.size() as usize / 8);
    2 * (symbols * (std::mem::size_of::<Symbol>() + 48) + unwound * 48)
}

/// The functions and static variables of `file`, loaded as `info` says.
/// Once the kernel refused the library's heap memory, none when the
/// reserve cannot spare them (`sys::heap::can_spare`; counted): their
/// size is the module's, not the library's.
fn symbols_of(file: &object::File<'_>, info: &ModuleInfo) -> Symbols {
    let mut data = Symbols::default();
    if info.is_self {
        // The library's own code and data are never the program's: its
        // samples are dropped as the profiler's, its frames skipped, so
        // its symbols (thousands) are not read: a short-lived process
        // starts faster.
        return data;
    }
    if sys::heap::short_of_memory() && !sys::heap::can_spare(symbols_bytes(file)) {
        SYMBOLS_LEFT_OUT.fetch_add(1, Relaxed);
        return data;
    }
    let range = |name: &str| {
        file.section_by_name(name)
            .map(|s| (s.address(), s.address() + s.size()))
    };
    let bias = info.bias;
    let mut add = |sym: &object::Symbol<'_, '_>| {
        if sym.size() == 0 || sym.is_undefined() {
            return;
        }
        let start = sym.address().wrapping_add(bias);
        let end = start.wrapping_add(sym.size());
        match sym.kind() {
            SymbolKind::Text => data.functions.push((start, end)),
            SymbolKind::Data => {
                let in_tls = sym
                    .section_index()
                    .and_then(|i| file.section_by_index(i).ok())
                    .is_some_and(|s| {
                        matches!(s.kind(), SectionKind::Tls | SectionKind::UninitializedTls)
                    });
                // Thread-local variables have per-thread addresses: left out.
                if !in_tls {
                    if let Ok(name) = sym.name() {
                        data.statics.push(Symbol {
                            start,
                            end,
                            name: name.to_string(),
                        });
                    }
                }
            }
            _ => {}
        }
    };
    let mut any = false;
    for sym in file.symbols() {
        any = true;
        add(&sym);
    }
    if !any {
        for sym in file.dynamic_symbols() {
            add(&sym);
        }
    }
    data.statics.sort_by_key(|s| s.start);
    data.sorted_statics = data.statics.len();
    let base = info.path.rsplit('/').next().unwrap_or(&info.path);
    for section in [".data", ".bss", ".rodata"] {
        if let Some((start, end)) = range(section).filter(|(s, e)| e > s) {
            data.statics.push(Symbol {
                start: start.wrapping_add(bias),
                end: end.wrapping_add(bias),
                name: format!("<{section} of {base}>"),
            });
        }
    }
    data.functions.sort_unstable();
    // Functions without a symbol (a stripped library's static functions):
    // their ranges from the unwind table, so that mem:soft decodes them
    // from a real instruction boundary.
    let contents = |name: &str| {
        let s = file.section_by_name(name)?;
        Some((s.data().ok()?, s.address()))
    };
    if let (Some(hdr), Some(frame)) = (contents(".eh_frame_hdr"), contents(".eh_frame")) {
        let unnamed = super::eh_ranges::without_symbols(
            super::eh_ranges::function_ranges(hdr, frame),
            &data
                .functions
                .iter()
                .map(|&(s, e)| (s.wrapping_sub(bias), e.wrapping_sub(bias)))
                .collect::<Vec<_>>(),
        );
        data.functions.extend(
            unnamed
                .into_iter()
                .map(|(s, e)| (s.wrapping_add(bias), e.wrapping_add(bias))),
        );
        data.functions.sort_unstable();
    }
    data
}

impl Snapshot {
    /// A snapshot of these modules, indexed.
    pub fn new(modules: Vec<(u32, Arc<ModuleData>)>) -> Snapshot {
        let mut snapshot = Snapshot {
            modules,
            ..Snapshot::default()
        };
        snapshot.index();
        snapshot
    }

    /// Builds the sorted segment table and the own-code ranges.
    fn index(&mut self) {
        self.segments.clear();
        self.own.clear();
        for (i, (_, m)) in self.modules.iter().enumerate() {
            for &(start, end, exec) in &m.info.segments {
                if start < end {
                    self.segments.push((start, end, i as u32, exec));
                    if m.info.is_self {
                        self.own.push((start, end));
                    }
                }
            }
        }
        self.segments.sort_unstable_by_key(|s| s.0);
    }

    /// The loaded segment containing `addr`.
    fn segment(&self, addr: u64) -> Option<&(u64, u64, u32, bool)> {
        let pos = self.segments.partition_point(|s| s.0 <= addr);
        // Segments do not overlap; look back one in case of a zero-size gap.
        self.segments[..pos]
            .iter()
            .rev()
            .take(2)
            .find(|s| addr < s.1)
    }

    fn module_containing(&self, addr: u64) -> Option<&(u32, Arc<ModuleData>)> {
        let seg = self.segment(addr)?;
        self.modules.get(seg.2 as usize)
    }

    /// The executable segment containing `addr`.
    pub fn exec_segment(&self, addr: u64) -> Option<(u64, u64)> {
        self.segment(addr)
            .filter(|s| s.3)
            .map(|&(start, end, _, _)| (start, end))
    }

    /// Whose code `addr` is ([`ModuleInfo::owner`]); `None` outside the
    /// modules' executable segments.
    pub fn code_owner(&self, addr: u64) -> Option<CodeOwner> {
        self.segment(addr)
            .filter(|s| s.3)
            .and_then(|s| self.modules.get(s.2 as usize))
            .map(|(_, m)| m.info.owner)
    }

    /// True if `addr` is code of this library itself.
    pub fn is_own_code(&self, addr: u64) -> bool {
        self.own.iter().any(|&(s, e)| addr >= s && addr < e)
    }

    /// The static variable containing `addr`, as (module id, index, start,
    /// end), looked up in the module that owns the *data* address
    /// (`None` while the module's symbols are unread).
    pub fn static_at(&self, addr: u64) -> Option<(u32, u32, u64, u64)> {
        let (id, m) = self.module_containing(addr)?;
        let m = m.symbols()?;
        let sorted = &m.statics[..m.sorted_statics.min(m.statics.len())];
        let pos = sorted.partition_point(|s| s.start <= addr);
        // Symbols may nest (aliases); look back a little for a container.
        let lo = pos.saturating_sub(4);
        (lo..pos)
            .rev()
            .find(|&i| addr < sorted[i].end)
            // No symbol: the data section around it, if any.
            .or_else(|| {
                (sorted.len()..m.statics.len())
                    .find(|&i| addr >= m.statics[i].start && addr < m.statics[i].end)
            })
            .map(|i| (*id, i as u32, m.statics[i].start, m.statics[i].end))
    }

    /// True if `addr` (the target of a RIP-relative operand with no index)
    /// is a compiler constant: no symbol covers it and it lies in a
    /// module's `.rodata`, or in no known data section at all. A named
    /// variable, or an unnamed address in `.data`/`.bss` (a stripped
    /// library's variable), is data (`blame.rs`).
    pub fn is_constant_data(&self, addr: u64) -> bool {
        let Some((id, index, ..)) = self.static_at(addr) else {
            return true;
        };
        let Some(m) = self
            .modules
            .iter()
            .find(|(i, _)| *i == id)
            .and_then(|(_, m)| m.symbols())
        else {
            return false;
        };
        (index as usize) >= m.sorted_statics
            && m.statics
                .get(index as usize)
                .is_some_and(|s| s.name.starts_with("<.rodata"))
    }

    /// Start of the function containing `addr` (`None` while the module's
    /// symbols are unread).
    pub fn function_start(&self, addr: u64) -> Option<u64> {
        let (_, m) = self.module_containing(addr)?;
        let m = m.symbols()?;
        let pos = m.functions.partition_point(|f| f.0 <= addr);
        if pos == 0 {
            return None;
        }
        let (start, end) = m.functions[pos - 1];
        (addr < end).then_some(start)
    }
}

#[cfg(test)]
mod tests;
