//! Loaded modules: their address ranges, build ids, unwind sections, function
//! symbols (to find instruction boundaries) and static variables (the
//! static-data map).
//!
//! A snapshot is built outside any signal handler (at load time) and then
//! only read; the handler reaches it through an atomic pointer.

use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

use crate::ffi::{self, LoadedModule};

/// What the unwinder needs of a module (stated virtual addresses).
#[derive(Debug, Clone, Default)]
pub struct UnwindSections {
    pub text: Option<(u64, u64)>,
    pub eh_frame: Option<(u64, u64)>,
    pub eh_frame_hdr: Option<(u64, u64)>,
    pub got: Option<(u64, u64)>,
}

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
}

/// A static variable or function symbol at runtime addresses.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub module: u32,
}

#[derive(Debug, Default)]
pub struct Snapshot {
    pub modules: Vec<ModuleInfo>,
    /// Static variables sorted by start.
    pub statics: Vec<Symbol>,
    /// Function (start, end) sorted by start.
    pub functions: Vec<(u64, u64)>,
}

static SNAPSHOT: ffi::Published<Snapshot> = ffi::Published::new();

/// The current snapshot (safe in a signal handler).
pub fn get() -> Option<&'static Snapshot> {
    SNAPSHOT.get()
}

/// Reads all loaded modules and publishes a new snapshot.
pub fn refresh() -> &'static Snapshot {
    let own = ffi::own_address();
    let mut snapshot = Snapshot::default();
    for (index, loaded) in ffi::loaded_modules().into_iter().enumerate() {
        let is_self = loaded.segments.iter().any(|&(s, e, _)| own >= s && own < e);
        let info = read_module(&loaded, index as u32, is_self, &mut snapshot);
        snapshot.modules.push(info);
    }
    snapshot.statics.sort_by_key(|s| s.start);
    snapshot.functions.sort_unstable();
    SNAPSHOT.publish(snapshot)
}

fn read_module(loaded: &LoadedModule, index: u32, is_self: bool, out: &mut Snapshot) -> ModuleInfo {
    let mut info = ModuleInfo {
        path: loaded.path.clone(),
        bias: loaded.bias,
        build_id: None,
        segments: loaded.segments.clone(),
        sections: UnwindSections::default(),
        is_self,
    };
    if loaded.path.is_empty() || loaded.path.starts_with("linux-vdso") {
        return info;
    }
    let Some(mapped) = ffi::MappedFile::open(&loaded.path) else {
        return info;
    };
    let Ok(file) = object::File::parse(mapped.bytes()) else {
        return info;
    };
    info.build_id = file
        .build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
    let range = |name: &str| {
        file.section_by_name(name)
            .map(|s| (s.address(), s.address() + s.size()))
    };
    info.sections = UnwindSections {
        text: range(".text"),
        eh_frame: range(".eh_frame"),
        eh_frame_hdr: range(".eh_frame_hdr"),
        got: range(".got"),
    };
    let bias = loaded.bias;
    let mut add = |sym: &object::Symbol<'_, '_>| {
        if sym.size() == 0 || sym.is_undefined() {
            return;
        }
        let start = sym.address().wrapping_add(bias);
        let end = start.wrapping_add(sym.size());
        match sym.kind() {
            SymbolKind::Text => out.functions.push((start, end)),
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
                        out.statics.push(Symbol {
                            start,
                            end,
                            name: name.to_string(),
                            module: index,
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
    info
}

impl Snapshot {
    /// The module whose loaded segments contain `addr`.
    pub fn module_of(&self, addr: u64) -> Option<(u32, &ModuleInfo)> {
        self.modules
            .iter()
            .enumerate()
            .find(|(_, m)| m.segments.iter().any(|&(s, e, _)| addr >= s && addr < e))
            .map(|(i, m)| (i as u32, m))
    }

    /// The executable segment containing `addr`.
    pub fn exec_segment(&self, addr: u64) -> Option<(u64, u64)> {
        self.modules.iter().find_map(|m| {
            m.segments
                .iter()
                .find(|&&(s, e, x)| x && addr >= s && addr < e)
                .map(|&(s, e, _)| (s, e))
        })
    }

    /// True if `addr` is code of this library itself.
    pub fn is_own_code(&self, addr: u64) -> bool {
        self.modules
            .iter()
            .any(|m| m.is_self && m.segments.iter().any(|&(s, e, _)| addr >= s && addr < e))
    }

    /// Index of the static variable containing `addr`.
    pub fn static_at(&self, addr: u64) -> Option<u32> {
        let pos = self.statics.partition_point(|s| s.start <= addr);
        if pos == 0 {
            return None;
        }
        // Symbols may nest (aliases); look back a little for a container.
        let lo = pos.saturating_sub(4);
        (lo..pos)
            .rev()
            .find(|&i| addr < self.statics[i].end)
            .map(|i| i as u32)
    }

    /// Start of the function containing `addr`.
    pub fn function_start(&self, addr: u64) -> Option<u64> {
        let pos = self.functions.partition_point(|f| f.0 <= addr);
        if pos == 0 {
            return None;
        }
        let (start, end) = self.functions[pos - 1];
        (addr < end).then_some(start)
    }
}
