//! The debug information of one module: its file memory-mapped, an addr2line
//! context and a symbol table over the mapping, split DWARF (`.dwo` files and
//! `.dwp` packages) loaded on demand.
//!
//! This replaces addr2line's own `Loader` for one reason: memory. The merge
//! resolves each address once, so a module's DWARF is read in a burst at
//! the start of a merge and then hardly at all, but every page of the
//! mapping the parser touched stays resident and counts in the process's
//! peak memory. Opening the context of a large program (a CU header and its
//! ranges in every unit, the symbol table) touches most of the file: 21 MB
//! of hpcprof-rs's own 32 MB. Here the mapping is ours, and
//! [`DebugInfo::release_pages`] gives its pages back to the kernel; a later
//! read maps them again from the page cache. What the context parsed (on the
//! heap) is kept.
//!
//! The bytes the context reads live in the mappings (and, for compressed
//! sections, in buffers) that [`Storage`] owns. The context refers to them
//! with a `'static` lifetime, which never leaves this module: every public
//! method returns owned data or borrows `self`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use addr2line::{Context, LookupContinuation, LookupResult, SplitDwarfLoad};
use gimli::UnwindSection;
use memmap2::{Mmap, UncheckedAdvice};
use object::{Object, ObjectSection};

type Reader = gimli::EndianSlice<'static, gimli::RunTimeEndian>;

/// One frame of an inline chain, as the DWARF says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// Mangled (linkage) or plain name of the function.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// The mappings and buffers the context reads. Never shrinks before drop.
#[derive(Default)]
struct Storage {
    maps: RefCell<Vec<Mmap>>,
    buffers: RefCell<Vec<Box<[u8]>>>,
}

impl Storage {
    /// Maps `path` read-only and keeps the mapping.
    fn map(&self, path: &Path) -> std::io::Result<&'static [u8]> {
        let file = File::open(path)?;
        // SAFETY: a read-only mapping; a file changed underneath us can only
        // yield wrong answers from the parsers, which check every bound.
        let map = unsafe { Mmap::map(&file)? };
        // SAFETY: the bytes are the mapping's, not the `Mmap` value's, so
        // they stay put when the value moves into the vector. They are
        // unmapped only when `self` drops, after every holder of this
        // reference (`DebugInfo` declares `inner` before `storage`, and no
        // `'static` reference leaves this module).
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(map.as_ptr(), map.len()) };
        self.maps.borrow_mut().push(map);
        Ok(bytes)
    }

    /// Keeps a buffer (a decompressed section).
    fn keep(&self, buffer: Vec<u8>) -> &'static [u8] {
        let buffer = buffer.into_boxed_slice();
        // SAFETY: as in `map`: the bytes are on the heap, owned by `self`
        // until it drops, and do not move with the box.
        let bytes: &'static [u8] =
            unsafe { std::slice::from_raw_parts(buffer.as_ptr(), buffer.len()) };
        self.buffers.borrow_mut().push(buffer);
        bytes
    }

    /// Drops the resident pages of every mapping (they are read again from
    /// the page cache, or the file, when touched).
    fn release_pages(&self) {
        for map in self.maps.borrow().iter() {
            // SAFETY: the mapping is read-only, never written: after
            // MADV_DONTNEED its pages are mapped again from the file (the
            // page cache) when touched, with the same bytes, so the
            // references into it stay valid.
            let _ = unsafe { map.unchecked_advise(UncheckedAdvice::DontNeed) };
        }
    }
}

/// What reads the mappings. Holds `'static` references into [`Storage`].
struct Inner {
    ctx: Context<Reader>,
    symbols: object::SymbolMap<object::SymbolMapName<'static>>,
    /// `<module>.dwp`, if there is one.
    package: Option<gimli::DwarfPackage<Reader>>,
    /// Directory of the module (a `.dwo` file is also looked for there).
    dir: Option<PathBuf>,
    /// A module without a full symbol table (`.symtab`): its functions'
    /// address ranges from the unwind table (`.eh_frame`), sorted, so
    /// that the code of a function without a symbol is still one function.
    unwind_ranges: Vec<(u64, u64)>,
}

/// The debug information of one module (see the module documentation).
pub struct DebugInfo {
    // Declared before `storage`: dropped first, as it refers into it.
    inner: Inner,
    storage: Storage,
}

/// Why a module's debug information cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not an object file: {0}")]
    Object(#[from] object::Error),
    #[error("bad DWARF: {0}")]
    Dwarf(#[from] gimli::Error),
}

/// The function ranges of the unwind table (`.eh_frame`'s FDEs), sorted
/// by start; empty without one.
fn unwind_ranges(file: &object::File<'static>) -> Vec<(u64, u64)> {
    let Some(section) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let eh = gimli::EhFrame::new(data, endian(file));
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut ranges = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(|_, bases, o| eh.cie_from_offset(bases, o)) {
                let start = fde.initial_address();
                ranges.push((start, start.saturating_add(fde.len())));
            }
        }
    }
    ranges.sort_unstable();
    ranges
}

fn endian(file: &object::File<'_>) -> gimli::RunTimeEndian {
    if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    }
}

/// A DWARF section of `file` (decompressed if needed; empty if missing).
fn section(file: &object::File<'static>, name: Option<&str>, storage: &Storage) -> Reader {
    let data = name
        .and_then(|n| file.section_by_name(n))
        .and_then(|s| s.uncompressed_data().ok());
    let bytes = match data {
        Some(Cow::Borrowed(b)) => b,
        Some(Cow::Owned(v)) => storage.keep(v),
        None => &[],
    };
    gimli::EndianSlice::new(bytes, endian(file))
}

/// The DWARF of `file`; of a split unit's `.dwo` file if `split` (its
/// sections are named `.debug_*.dwo`).
fn load_dwarf(
    file: &object::File<'static>,
    split: bool,
    storage: &Storage,
) -> gimli::Dwarf<Reader> {
    let name = |id: gimli::SectionId| {
        if split {
            id.dwo_name()
        } else {
            Some(id.name())
        }
    };
    gimli::Dwarf::load(|id| Ok::<_, std::convert::Infallible>(section(file, name(id), storage)))
        .unwrap_or_else(|never| match never {})
}

impl DebugInfo {
    /// Maps `path` (an ELF file with DWARF, or without: then only its
    /// symbol table answers) and parses its unit index.
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let storage = Storage::default();
        let file = object::File::parse(storage.map(path)?)?;
        let mut dwarf = load_dwarf(&file, false, &storage);
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        let ctx = Context::from_dwarf(dwarf)?;
        let symbols = file.symbol_map();
        let unwind_ranges = if file.section_by_name(".symtab").is_none() {
            unwind_ranges(&file)
        } else {
            Vec::new()
        };
        let package = Self::open_package(path, &storage);
        let info = DebugInfo {
            inner: Inner {
                ctx,
                symbols,
                package,
                dir: path.parent().map(Path::to_path_buf),
                unwind_ranges,
            },
            storage,
        };
        info.release_pages();
        Ok(info)
    }

    /// `<module>.dwp` (the DWARF package of a split-DWARF build), if any.
    fn open_package(path: &Path, storage: &Storage) -> Option<gimli::DwarfPackage<Reader>> {
        let mut name = path.file_name()?.to_os_string();
        name.push(".dwp");
        let dwp = path.with_file_name(name);
        if !dwp.is_file() {
            return None;
        }
        let file = object::File::parse(storage.map(&dwp).ok()?).ok()?;
        let empty = gimli::EndianSlice::new(&[][..], endian(&file));
        gimli::DwarfPackage::load(
            |id| Ok::<_, gimli::Error>(section(&file, id.dwo_name(), storage)),
            empty,
        )
        .ok()
    }

    /// Gives the resident pages of the mapped files back to the kernel.
    pub fn release_pages(&self) {
        self.storage.release_pages();
    }

    /// The inline chain at `probe` (a file virtual address), innermost
    /// first; empty when the DWARF does not cover it.
    pub fn frames(&self, probe: u64) -> Vec<RawFrame> {
        let mut lookup = self.inner.ctx.find_frames(probe);
        let mut iter = loop {
            match lookup {
                LookupResult::Output(Ok(iter)) => break iter,
                LookupResult::Output(Err(_)) => return Vec::new(),
                LookupResult::Load { load, continuation } => {
                    lookup = continuation.resume(self.load_dwo(load));
                }
            }
        };
        let mut out = Vec::new();
        while let Ok(Some(frame)) = iter.next() {
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.raw_name().ok())
                .map(|n| n.into_owned());
            let (file, line) = match frame.location {
                Some(loc) => (loc.file.map(str::to_string), loc.line),
                None => (None, None),
            };
            out.push(RawFrame {
                function,
                file,
                line,
            });
        }
        out
    }

    /// The variables of the frame of the function whose code covers
    /// `probe` (see `locals`); empty without DWARF for it.
    pub fn frame_locals(&self, probe: u64) -> Vec<super::FrameLocal> {
        let mut lookup = self.inner.ctx.find_dwarf_and_unit(probe);
        let unit = loop {
            match lookup {
                LookupResult::Output(unit) => break unit,
                LookupResult::Load { load, continuation } => {
                    lookup = continuation.resume(self.load_dwo(load));
                }
            }
        };
        unit.and_then(|u| super::locals::frame_locals(u, probe).ok())
            .unwrap_or_default()
    }

    /// The start address of the symbol-table entry containing `probe`,
    /// else of the unwind table's function range containing it.
    pub fn symbol_start(&self, probe: u64) -> Option<u64> {
        self.inner
            .symbols
            .containing(probe)
            .map(|s| s.address())
            .or_else(|| self.unwind_start(probe))
    }

    /// The start of the unwind table's function range containing `probe`
    /// (modules without a full symbol table only).
    pub fn unwind_start(&self, probe: u64) -> Option<u64> {
        let ranges = &self.inner.unwind_ranges;
        let i = ranges.partition_point(|&(start, _)| start <= probe);
        let &(start, end) = ranges.get(i.checked_sub(1)?)?;
        (probe < end).then_some(start)
    }

    /// The (mangled) name of the symbol-table entry containing `probe`.
    pub fn symbol(&self, probe: u64) -> Option<&str> {
        self.inner.symbols.containing(probe).map(|s| s.name())
    }

    /// The split unit a skeleton unit refers to: from the `.dwp` package,
    /// else from its `.dwo` file (at the recorded compilation directory and
    /// name, or by its name next to the module); `None` if not found or
    /// not the right unit.
    fn load_dwo(&self, load: SplitDwarfLoad<Reader>) -> Option<Arc<gimli::Dwarf<Reader>>> {
        if let Some(package) = &self.inner.package {
            if let Ok(Some(unit)) = package.find_cu(load.dwo_id, &load.parent) {
                return Some(Arc::new(unit));
            }
        }
        let name = Path::new(std::str::from_utf8(load.path?.slice()).ok()?).to_path_buf();
        let mut candidates = Vec::new();
        match load
            .comp_dir
            .and_then(|d| std::str::from_utf8(d.slice()).ok())
        {
            Some(dir) => candidates.push(Path::new(dir).join(&name)),
            None => candidates.push(name.clone()),
        }
        if let (Some(dir), Some(base)) = (&self.inner.dir, name.file_name()) {
            candidates.push(dir.join(base));
        }
        candidates.into_iter().find_map(|path| {
            let file = object::File::parse(self.storage.map(&path).ok()?).ok()?;
            let mut dwo = load_dwarf(&file, true, &self.storage);
            let header = dwo.units().next().ok()??;
            let unit = dwo.unit(header).ok()?;
            if unit.dwo_id != Some(load.dwo_id) {
                return None;
            }
            dwo.make_dwo(&load.parent);
            Some(Arc::new(dwo))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident kB of this process's mappings of `path` (/proc/self/smaps).
    fn resident_kb(path: &Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut ours = false;
        let mut total = 0;
        for line in smaps.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields
                .first()
                .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
            {
                ours = fields.get(5).is_some_and(|p| Path::new(p) == path);
            } else if ours && fields.first() == Some(&"Rss:") {
                total += fields[1].parse::<u64>().unwrap();
            }
        }
        total
    }

    #[test]
    fn released_pages_leave_the_process() {
        // A copy of this test binary: its mapping is this test's alone.
        let dir = std::env::temp_dir().join(format!("hpcprof-debuginfo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("module");
        std::fs::copy(std::env::current_exe().unwrap(), &copy).unwrap();

        let info = DebugInfo::open(&copy).unwrap();
        assert_eq!(resident_kb(&copy), 0, "open gives its pages back");
        let addr = info
            .inner
            .symbols
            .symbols()
            .iter()
            .find(|s| {
                crate::symbolize::demangle(s.name())
                    .ends_with("debuginfo::tests::released_pages_leave_the_process")
            })
            .expect("this test's symbol")
            .address()
            + 4;
        let frames = info.frames(addr);
        let outer = frames.last().expect("frames of this test");
        assert!(outer.file.as_deref().unwrap().ends_with("debuginfo.rs"));
        assert!(resident_kb(&copy) > 0, "the lookup read the mapping");
        info.release_pages();
        assert_eq!(resident_kb(&copy), 0);
        // Pages come back on demand, with the same bytes.
        assert_eq!(info.frames(addr), frames);

        drop(info);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
