//! Maps module-relative addresses to source frames with addr2line.
//!
//! One [`DebugInfo`] (an addr2line context over a mapping of the module's
//! file that we own, so that its pages can be given back: see
//! `debuginfo.rs`) per module file. [`Symbolizer`] is the streaming
//! form used by the merge: modules are registered by (path, build-id) as
//! profiles arrive, each module's debug information is opened on first use
//! and kept behind its own lock (one context per module; different modules
//! resolve in parallel), closed when idle, and resolved inline chains are
//! interned once into a shared frame table. [`resolve_all`] is the batch
//! form (one rayon task per module).
//! Every address yields its inline chain, outermost first;
//! an address without debug information yields one frame named after the
//! `.symtab`/`.dynsym` symbol that contains it, or `module+0xOFF`. Nothing
//! here fails: an unreadable module only produces a warning.
//!
//! A module without DWARF of its own is read from its separate debug file
//! ([`find_debug_file`]: by build-id under `/usr/lib/debug/.build-id/`, then
//! by `.gnu_debuglink` next to it, in `.debug/` and under
//! `/usr/lib/debug/<dir>/`; [`DEBUG_DIRS_ENV`] replaces `/usr/lib/debug`).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use formats::database::Frame;
use object::read::elf::{FileHeader, ProgramHeader};
use rayon::prelude::*;

mod debuginfo;
mod locals;
pub use debuginfo::{DebugInfo, RawFrame};
pub use locals::FrameLocal;

pub use formats::database::LABEL_MODULE;

/// The addresses to resolve in one module.
#[derive(Debug, Clone)]
pub struct ModuleRequest {
    /// Path of the module as the measured process loaded it.
    pub path: String,
    /// GNU build-id recorded at measurement time.
    pub build_id: Option<String>,
    /// File virtual addresses (runtime address minus load bias).
    pub addrs: Vec<u64>,
}

/// The frames of every requested address of one module.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Address -> inline chain, outermost first (never empty).
    pub frames: HashMap<u64, Vec<Frame>>,
    /// Problems worth telling the user about.
    pub warnings: Vec<String>,
}

/// Resolves every module of `requests` (in parallel); results in the same order.
pub fn resolve_all(requests: &[ModuleRequest]) -> Vec<Resolved> {
    requests.par_iter().map(resolve_module).collect()
}

/// Demangles a Rust (legacy or v0) or C++ symbol; other names are returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the hash suffix.
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle() {
                return s;
            }
        }
    }
    name.to_string()
}

/// Last path component of a module path.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').find(|s| !s.is_empty()).unwrap_or(path)
}

fn fallback_frame(module: &str, rel: u64, function: Option<String>) -> Frame {
    Frame {
        function: function.unwrap_or_else(|| format!("{}+0x{rel:x}", basename(module))),
        file: None,
        line: None,
        module: module.to_string(),
        inlined: false,
        offset: None,
    }
}

fn resolve_module(req: &ModuleRequest) -> Resolved {
    let mut out = Resolved::default();
    let loader = open_module(&req.path, req.build_id.as_deref(), &mut out.warnings);
    for &rel in &req.addrs {
        let chain = match &loader {
            Some(l) => lookup(l, &req.path, rel),
            None => vec![fallback_frame(&req.path, rel, None)],
        };
        out.frames.insert(rel, chain);
    }
    out
}

/// Opens the addr2line context of a module (`None`: frames fall back to
/// `module+0xOFFSET`). Problems are pushed to `warnings`; pseudo modules
/// ("[vdso]", "linux-vdso.so.1", "") are quietly `None`.
fn open_module(
    path: &str,
    build_id: Option<&str>,
    warnings: &mut Vec<String>,
) -> Option<DebugInfo> {
    if !path.starts_with('/') {
        return None;
    }
    if let Some(recorded) = build_id {
        if let Some(on_disk) = file_build_id(Path::new(path)) {
            if !on_disk.eq_ignore_ascii_case(recorded) {
                warnings.push(format!(
                    "{path} differs from the measured module (build-id {on_disk}, measured {recorded}); its source locations may be wrong"
                ));
            }
        }
    }
    // A module without DWARF of its own (stripped, or split with objcopy
    // --only-keep-debug) is read from its separate debug file, found by
    // build-id or `.gnu_debuglink` (see `find_debug_file`).
    let debug_file = if has_dwarf(Path::new(path)) {
        None
    } else {
        find_debug_file(Path::new(path), build_id, &debug_roots())
    };
    let loader = debug_file
        .as_deref()
        .and_then(|p| DebugInfo::open(p).ok())
        .map(Ok)
        .unwrap_or_else(|| DebugInfo::open(Path::new(path)));
    match loader {
        Ok(l) => Some(l),
        Err(e) => {
            warnings.push(format!(
                "cannot read {path} ({e}); its frames are shown as {}+0xOFFSET",
                basename(path)
            ));
            None
        }
    }
}

/// Where an address points, with module ids of a [`Symbolizer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Loc {
    /// Module id and file virtual address (runtime address minus bias).
    Module(u32, u64),
    /// In no loaded module: the raw runtime address.
    Unknown(u64),
}

/// Interned frames: the frame table of the database under construction.
#[derive(Debug, Default)]
pub struct Frames {
    pub list: Vec<Frame>,
    ids: HashMap<Frame, u32>,
}

impl Frames {
    pub fn intern(&mut self, frame: Frame) -> u32 {
        if let Some(&id) = self.ids.get(&frame) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(frame.clone());
        self.ids.insert(frame, id);
        id
    }
}

/// Allocation-path chains by (address, innermost call of the path).
type SiteChains = HashMap<(Loc, bool), Arc<[u32]>>;

/// One module of a [`Symbolizer`]; its loader is opened on first use.
struct ModuleSlot {
    path: String,
    build_id: Option<String>,
    loader: Mutex<LoaderState>,
}

/// Idle profiles after which a module opened for the first time is closed
/// (doubling at every reopening). Opening costs a burst of memory (the
/// parser reads a little of every unit, and the kernel maps 64 KiB around
/// each read: 21 MB of pages for a 32 MB program, released right after),
/// so a module is not closed while its threads' first profiles still
/// bring new addresses now and then: closing after one idle profile
/// reopened it once more in the merge benchmark and that burst, on top of
/// the memory freed but kept by malloc, raised the peak by up to 6 MB.
const FIRST_PATIENCE: u32 = 8;

/// Lookups after which a module's mapped pages are released.
const RELEASE_EVERY: u32 = 64;

/// The loader of a module and how much it is used.
#[derive(Default)]
struct LoaderState {
    /// `None` until opened (or after it was closed); then `Some(None)`
    /// when it cannot be read.
    loader: Option<Option<DebugInfo>>,
    /// Lookups since the last [`Symbolizer::profile_done`].
    lookups: u64,
    /// Lookups since the mapped pages were last released.
    unreleased: u32,
    /// Profiles merged in a row without a lookup.
    idle: u32,
    /// Idle profiles after which the loader is closed ([`FIRST_PATIENCE`],
    /// doubling at every reopening); 0 until first opened.
    patience: u32,
}

impl LoaderState {
    /// The loader, opened (again) if needed; counts the lookup.
    fn get(&mut self, open: impl FnOnce() -> Option<DebugInfo>) -> Option<&DebugInfo> {
        self.lookups += 1;
        self.idle = 0;
        if self.loader.is_none() {
            self.patience = (self.patience * 2).max(FIRST_PATIENCE);
        }
        self.loader.get_or_insert_with(open).as_ref()
    }

    /// A lookup was made: every [`RELEASE_EVERY`] lookups the pages of the
    /// mapped debug information are given back (see
    /// [`DebugInfo::release_pages`]), so that they do not add up in the
    /// merge's peak memory.
    fn looked_up(&mut self) {
        self.unreleased += 1;
        if self.unreleased >= RELEASE_EVERY {
            self.release_pages();
        }
    }

    fn release_pages(&mut self) {
        if let Some(Some(l)) = &self.loader {
            l.release_pages();
        }
        self.unreleased = 0;
    }

    /// A profile was merged: closes a loader that has been idle long
    /// enough.
    fn profile_done(&mut self) {
        if self.lookups > 0 {
            self.lookups = 0;
            self.release_pages();
            return;
        }
        if matches!(self.loader, Some(Some(_))) {
            self.idle += 1;
            if self.idle >= self.patience {
                self.loader = None;
                self.idle = 0;
            }
        }
    }
}

/// (path, build-id) -> module id, and the slots by id.
type ModuleTable = (HashMap<(String, Option<String>), u32>, Vec<Arc<ModuleSlot>>);

/// A shared, thread-safe symboliser for a streaming merge (see the module
/// documentation). Resolved chains are cached: each (module, address) is
/// looked up once per merge, whichever worker meets it first.
#[derive(Default)]
pub struct Symbolizer {
    /// (path, build-id) -> module id, and the slots by id.
    modules: Mutex<ModuleTable>,
    frames: Mutex<Frames>,
    chains: Mutex<HashMap<Loc, Arc<[u32]>>>,
    /// Chains of allocation-path addresses ([`Symbolizer::site_chain`]).
    site_chains: Mutex<SiteChains>,
    /// Function frames of stack objects ([`Symbolizer::function_frame`]).
    function_frames: Mutex<HashMap<Loc, u32>>,
    /// The variables of a function's frame ([`Symbolizer::frame_variable`]).
    frame_locals: Mutex<HashMap<Loc, Arc<[FrameLocal]>>>,
    warnings: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer").finish_non_exhaustive()
    }
}

/// Locks a mutex even if another worker panicked while holding it (the data
/// are caches and tables that stay consistent between statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Symbolizer {
    /// The id of a module, registered on first sight.
    pub fn module_id(&self, path: &str, build_id: Option<&str>) -> u32 {
        let mut guard = lock(&self.modules);
        let (ids, slots) = &mut *guard;
        let key = (path.to_string(), build_id.map(str::to_string));
        if let Some(&id) = ids.get(&key) {
            return id;
        }
        let id = slots.len() as u32;
        slots.push(Arc::new(ModuleSlot {
            path: key.0.clone(),
            build_id: key.1.clone(),
            loader: Mutex::new(LoaderState::default()),
        }));
        ids.insert(key, id);
        id
    }

    /// The interned inline chain (outermost first, never empty) of `loc`.
    pub fn chain(&self, loc: Loc) -> Arc<[u32]> {
        if let Some(c) = lock(&self.chains).get(&loc) {
            return c.clone();
        }
        let frames = match loc {
            Loc::Unknown(formats::measurement::PARTIAL_UNWIND_ADDRESS) => vec![Frame {
                function: formats::measurement::PARTIAL_UNWIND_FRAME.to_string(),
                ..Frame::default()
            }],
            Loc::Unknown(addr) => vec![Frame {
                function: format!("[unknown]+0x{addr:x}"),
                module: "[unknown]".to_string(),
                ..Frame::default()
            }],
            Loc::Module(m, rel) => {
                let slot = lock(&self.modules).1[m as usize].clone();
                let mut state = lock(&slot.loader);
                let loader = state.get(|| {
                    let mut warnings = Vec::new();
                    let l = open_module(&slot.path, slot.build_id.as_deref(), &mut warnings);
                    let mut all = lock(&self.warnings);
                    // A module opened again warns again: keep one copy.
                    warnings.retain(|w| !all.contains(w));
                    all.extend(warnings);
                    l
                });
                let frames = match loader {
                    Some(l) => lookup(l, &slot.path, rel),
                    None => vec![fallback_frame(&slot.path, rel, None)],
                };
                state.looked_up();
                frames
            }
        };
        let ids: Arc<[u32]> = {
            let mut table = lock(&self.frames);
            frames.into_iter().map(|f| table.intern(f)).collect()
        };
        lock(&self.chains).entry(loc).or_insert(ids).clone()
    }

    /// The physical function's frame of `loc` (the outermost of its
    /// inline chain), without offset.
    pub fn outer_frame(&self, loc: Loc) -> Frame {
        let chain = self.chain(loc);
        lock(&self.frames).list[chain[0] as usize].clone()
    }

    /// The chain of an allocation-path address: as [`Symbolizer::chain`],
    /// but a function frame without line information carries the return
    /// address's offset from the function's start, so that two call sites
    /// in one function (which only the offset tells apart without debug
    /// information) stay two allocation sites. An `innermost` address (the
    /// calls up to the program's own, see `merge::resolve`) always
    /// carries it: the calls of one line (`ALLOCATE(a(n), b(m))`,
    /// `std::vector<double> a(n), b(n);`) are different sites.
    pub fn site_chain(&self, loc: Loc, innermost: bool) -> Arc<[u32]> {
        if let Some(c) = lock(&self.site_chains).get(&(loc, innermost)) {
            return c.clone();
        }
        let chain = self.chain(loc);
        let outer = lock(&self.frames).list[chain[0] as usize].clone();
        let start = match loc {
            Loc::Module(m, rel) if (innermost || outer.line.is_none()) && !outer.inlined => {
                let slot = lock(&self.modules).1[m as usize].clone();
                let mut state = lock(&slot.loader);
                let start = state
                    .get(|| open_module(&slot.path, slot.build_id.as_deref(), &mut Vec::new()))
                    .and_then(|l| l.symbol_start(rel));
                start.map(|s| rel + 1 - s)
            }
            _ => None,
        };
        let ids: Arc<[u32]> = match start {
            Some(offset) => {
                let mut table = lock(&self.frames);
                let mut ids = chain.to_vec();
                ids[0] = table.intern(Frame {
                    offset: Some(offset),
                    ..outer
                });
                ids.into()
            }
            None => chain,
        };
        lock(&self.site_chains)
            .entry((loc, innermost))
            .or_insert(ids)
            .clone()
    }

    /// The frame that names a function's stack frame (a stack object):
    /// the function containing `loc` (the outermost of its inline chain:
    /// the frame is the physical function's), at the source line of its
    /// entry (the function's first line), not inlined, without offset.
    pub fn function_frame(&self, loc: Loc) -> u32 {
        if let Some(&f) = lock(&self.function_frames).get(&loc) {
            return f;
        }
        let chain = self.chain(loc);
        let outer = lock(&self.frames).list[chain[0] as usize].clone();
        // The entry, when `loc` is not it already (the preload records the
        // function's start where it knows it).
        let entry = match loc {
            Loc::Module(m, rel) => {
                let slot = lock(&self.modules).1[m as usize].clone();
                let mut state = lock(&slot.loader);
                state
                    .get(|| open_module(&slot.path, slot.build_id.as_deref(), &mut Vec::new()))
                    .and_then(|l| l.symbol_start(rel))
                    .filter(|&start| start != rel)
                    .map(|start| Loc::Module(m, start))
            }
            Loc::Unknown(_) => None,
        };
        let at_entry = entry.map(|e| {
            let c = self.chain(e);
            lock(&self.frames).list[c[0] as usize].clone()
        });
        let (file, line) = match at_entry {
            Some(e) if e.function == outer.function => (e.file, e.line),
            _ => (outer.file, outer.line),
        };
        let id = lock(&self.frames).intern(Frame {
            function: outer.function,
            file,
            line,
            module: outer.module,
            inlined: false,
            offset: None,
        });
        *lock(&self.function_frames).entry(loc).or_insert(id)
    }

    /// The name of the variable at `offset` from the CFA in a frame of the
    /// function at `loc` (its DWARF locals, see `locals`); `None` without
    /// debug information or when no variable of the frame is there (a
    /// spill, a register save).
    pub fn frame_variable(&self, loc: Loc, offset: i64) -> Option<String> {
        let cached = lock(&self.frame_locals).get(&loc).cloned();
        let locals = match cached {
            Some(l) => l,
            None => {
                let found: Arc<[FrameLocal]> = match loc {
                    Loc::Module(m, rel) => {
                        let slot = lock(&self.modules).1[m as usize].clone();
                        let mut state = lock(&slot.loader);
                        state
                            .get(|| {
                                open_module(&slot.path, slot.build_id.as_deref(), &mut Vec::new())
                            })
                            .map(|l| l.frame_locals(rel))
                            .unwrap_or_default()
                            .into()
                    }
                    Loc::Unknown(_) => Arc::from(Vec::new()),
                };
                lock(&self.frame_locals).entry(loc).or_insert(found).clone()
            }
        };
        locals::variable_at(&locals, offset).map(|l| l.name.clone())
    }

    /// The frame that carries a label the program gave an allocation path
    /// (`hpcrun_label`/`hpcrun_register`): module [`LABEL_MODULE`], the
    /// label as its function; the innermost frame of the path.
    pub fn label_frame(&self, label: &str) -> u32 {
        lock(&self.frames).intern(Frame {
            function: label.to_string(),
            module: LABEL_MODULE.to_string(),
            ..Frame::default()
        })
    }

    /// Tells the symboliser that a profile has been merged. A module whose
    /// debug information served no lookup during the last 8 profiles is
    /// closed: its parsed tables (about 10 MB for a 32 MB program, more as
    /// units are parsed) would otherwise stay in memory until the end of
    /// the merge, while the threads of a program mostly share their code
    /// and new addresses become rare after the first profiles. A later
    /// lookup opens it again, and it then waits twice as many idle profiles
    /// before it is closed again (so at most log2(profiles) reopenings).
    /// The mapped pages of an open module are released after every profile
    /// that used it (and every 64 lookups).
    pub fn profile_done(&self) {
        let slots = lock(&self.modules).1.clone();
        for slot in slots {
            lock(&slot.loader).profile_done();
        }
    }

    /// A copy of the frame table, by id (to send a partial merge to
    /// another process, see `merge::Share`).
    pub fn frame_list(&self) -> Vec<Frame> {
        lock(&self.frames).list.clone()
    }

    /// The id of `frame` in this symboliser's table, interned on first sight
    /// (frames of a partial merge from another process).
    pub fn intern_frame(&self, frame: Frame) -> u32 {
        lock(&self.frames).intern(frame)
    }

    /// The warnings so far.
    pub fn warning_list(&self) -> Vec<String> {
        lock(&self.warnings).clone()
    }

    /// Adds warnings not given yet (from another process's partial merge).
    pub fn add_warnings(&self, more: Vec<String>) {
        let mut all = lock(&self.warnings);
        for w in more {
            if !all.contains(&w) {
                all.push(w);
            }
        }
    }

    /// The frame table and the warnings; the symboliser is done.
    pub fn finish(self) -> (Frames, Vec<String>) {
        let frames = self.frames.into_inner().unwrap_or_else(|e| e.into_inner());
        let warnings = self
            .warnings
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        (frames, warnings)
    }
}

/// The inline chain of one address, outermost first (never empty).
fn lookup(loader: &DebugInfo, module: &str, rel: u64) -> Vec<Frame> {
    // The DWARF yields innermost first.
    let mut chain = loader.frames(rel);
    // An address just past a function's end (a call to a function that
    // does not return was its last instruction) belongs to that function.
    let symbol = || {
        loader
            .symbol(rel)
            .or_else(|| loader.symbol(rel.checked_sub(1)?))
            .map(demangle)
            .or_else(|| {
                // No symbol: the unwind table's function, by its start.
                let start = loader
                    .unwind_start(rel)
                    .or_else(|| loader.unwind_start(rel.checked_sub(1)?))?;
                Some(format!("{}: function at +0x{start:x}", basename(module)))
            })
    };
    if chain.is_empty() {
        return vec![fallback_frame(module, rel, symbol())];
    }
    chain.reverse();
    chain
        .into_iter()
        .enumerate()
        .map(
            |(
                i,
                RawFrame {
                    function,
                    file,
                    line,
                },
            )| {
                let function = match function {
                    Some(f) => demangle(&f),
                    None if i == 0 => {
                        symbol().unwrap_or_else(|| format!("{}+0x{rel:x}", basename(module)))
                    }
                    None => "[inlined]".to_string(),
                };
                Frame {
                    function,
                    file,
                    line,
                    module: module.to_string(),
                    inlined: i > 0,
                    offset: None,
                }
            },
        )
        .collect()
}

/// Environment variable naming the directories searched for separate debug
/// files (colon-separated, like GDB's `debug-file-directory`); default
/// `/usr/lib/debug`.
pub const DEBUG_DIRS_ENV: &str = "HPCPROF_RS_DEBUG_DIRS";

/// The global debug directories: `$HPCPROF_RS_DEBUG_DIRS`, else `/usr/lib/debug`.
pub fn debug_roots() -> Vec<PathBuf> {
    match std::env::var_os(DEBUG_DIRS_ENV) {
        Some(dirs) if !dirs.is_empty() => std::env::split_paths(&dirs).collect(),
        _ => vec![PathBuf::from("/usr/lib/debug")],
    }
}

/// True if the ELF file at `path` carries DWARF (a `.debug_info` section).
fn has_dwarf(path: &Path) -> bool {
    use object::{Object, ObjectSection};
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // SAFETY: the map is read-only; a file changed underneath us can only
    // yield wrong answers from the parser, which checks every bound.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return false;
    };
    object::File::parse(&*map).is_ok_and(|f| {
        f.section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0)
    })
}

/// `.gnu_debuglink` (file name, CRC-32) and GNU build-id of an ELF file.
fn debug_links(path: &Path) -> (Option<(String, u32)>, Option<String>) {
    use object::Object;
    let Ok(file) = std::fs::File::open(path) else {
        return (None, None);
    };
    // SAFETY: as in `has_dwarf`.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return (None, None);
    };
    let Ok(obj) = object::File::parse(&*map) else {
        return (None, None);
    };
    let link = obj
        .gnu_debuglink()
        .ok()
        .flatten()
        .and_then(|(name, crc)| Some((std::str::from_utf8(name).ok()?.to_string(), crc)));
    let id = obj
        .build_id()
        .ok()
        .flatten()
        .map(|b| b.iter().map(|b| format!("{b:02x}")).collect());
    (link, id)
}

/// CRC-32 of a file's contents (the checksum `.gnu_debuglink` records).
fn file_crc32(path: &Path) -> Option<u32> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(hasher.finalize()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// `<root>/.build-id/ab/cdef….debug` for a hex build-id.
fn build_id_path(root: &Path, build_id: &str) -> Option<PathBuf> {
    if build_id.len() < 3 || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let id = build_id.to_ascii_lowercase();
    Some(
        root.join(".build-id")
            .join(&id[..2])
            .join(format!("{}.debug", &id[2..])),
    )
}

/// The separate debug file of the module at `path`, searched the way GDB
/// does:
///
/// 1. by build-id (the one recorded at measurement time, then the file's
///    own): `<root>/.build-id/ab/cdef….debug` in every debug root;
/// 2. by `.gnu_debuglink` name, checking its CRC-32: next to the module
///    (`<dir>/<name>`), in `<dir>/.debug/<name>`, then
///    `<root>/<dir>/<name>` in every debug root (`/usr/lib/debug/usr/lib/...`).
///
/// `None` when nothing matches (the module itself is then used).
pub fn find_debug_file(path: &Path, build_id: Option<&str>, roots: &[PathBuf]) -> Option<PathBuf> {
    let (link, own_id) = debug_links(path);
    let ids = build_id
        .into_iter()
        .chain(own_id.as_deref().filter(|own| Some(*own) != build_id));
    for id in ids {
        for root in roots {
            if let Some(p) = build_id_path(root, id).filter(|p| p.is_file()) {
                return Some(p);
            }
        }
    }
    let (name, crc) = link?;
    let name = Path::new(&name);
    // A debuglink is a plain file name; anything else is not trusted.
    if name.components().count() != 1 || name.file_name().is_none() {
        return None;
    }
    let dir = path.parent()?;
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    if dir.is_absolute() {
        let relative = dir.strip_prefix("/").unwrap_or(dir);
        candidates.extend(roots.iter().map(|r| r.join(relative).join(name)));
    }
    candidates
        .into_iter()
        // The module's own name may be its debuglink: never the module itself.
        .filter(|c| c.as_path() != path && c.is_file())
        .find(|c| file_crc32(c) == Some(crc))
}

/// The GNU build-id of an ELF file, from the notes of its program headers
/// (which sit at the start of the file: only the first 64 KiB are read).
pub fn file_build_id(path: &Path) -> Option<String> {
    let mut head = Vec::with_capacity(64 * 1024);
    std::fs::File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    build_id_from_head(&head)
}

fn build_id_from_head(data: &[u8]) -> Option<String> {
    fn notes<Elf: FileHeader<Endian = object::Endianness>>(data: &[u8]) -> Option<String> {
        let header = Elf::parse(data).ok()?;
        let endian = header.endian().ok()?;
        for phdr in header.program_headers(endian, data).ok()? {
            let Ok(Some(mut notes)) = phdr.notes(endian, data) else {
                continue;
            };
            while let Ok(Some(note)) = notes.next() {
                if note.name() == object::elf::ELF_NOTE_GNU
                    && note.n_type(endian) == object::elf::NT_GNU_BUILD_ID
                {
                    return Some(note.desc().iter().map(|b| format!("{b:02x}")).collect());
                }
            }
        }
        None
    }
    // EI_CLASS: 1 = 32-bit, 2 = 64-bit.
    match data.get(4) {
        Some(2) => notes::<object::elf::FileHeader64<object::Endianness>>(data),
        Some(1) => notes::<object::elf::FileHeader32<object::Endianness>>(data),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
