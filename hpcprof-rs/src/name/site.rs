//! Chooses each heap object's allocation site: the frame of its allocation
//! path where the application asked for the memory, outside the allocator
//! and the wrappers around it.
//!
//! Objects stay keyed by their full allocation path; the site is what is
//! shown and what names the object. Walking a path from the innermost frame
//! (the caller of `malloc`) outwards, a frame is skipped when it is
//!
//! 1. part of a language runtime or system library: its module is glibc,
//!    libstdc++, libgfortran, libc++, the loader, libgcc, libpython or a
//!    malloc replacement; its function is a runtime allocator (`operator
//!    new`, `__rust_alloc`, `alloc::`, `std::`, `__gnu_cxx::`,
//!    `_gfortran_`); or its source file is a library header
//!    ([`is_library_source`]: inlined `std::vector` or `RawVec` code);
//! 2. named by the user: `--alloc-wrapper PATTERN` (a glob on the
//!    demangled function name, with or without its parameter list);
//! 3. a wrapper by its source: the line returns the allocation (`return
//!    calloc(n, s);`) or assigns a local that the function returns a few
//!    lines later (`ptr = calloc(n, s); ... return(ptr);`);
//! 4. part of the program's allocation layer ([`super::layers`]): a
//!    member function of a storage class (a class that keeps every block
//!    it allocates in one member of its own: a vector class's
//!    constructor, copy constructor, `reserve` and `push_back`, a
//!    `Storage<T>::setCapacity`), or a copy the compiler wrote (`class
//!    Domain` as the line of `Domain::operator=`); found from every
//!    allocation path of the run, sampled or not;
//! 5. a wrapper by how it is used: the innermost remaining frame of
//!    allocations reached from at least two distinct call sites
//!    (`hypre_CAlloc`, `Memory::srealloc`; a template's instantiations for
//!    several element types count as one function), or, without line information, a
//!    function whose own name says it allocates (`alloc` in its last name
//!    component: `MyPage<int>::allocate`, `xcalloc`); unless its source line
//!    names what it allocates (`g->data = malloc(n);` in a function called
//!    from two places keeps its own site). Step 5 repeats until no new
//!    wrapper appears, so two-level wrappers (`my_alloc` -> `xcalloc`)
//!    are found too.
//!
//! A process's entry frame (`_start`) is never a site. A path with no
//! frame of the program's own, that of a program run by a language
//! runtime (`python3 script.py`: libpython's frames, from `Py_BytesMain`
//! to its allocator), is sited by the same rules among the runtime's
//! frames (rule 1 then skips system libraries only). If every frame is
//! still skipped, the site is the innermost frame that is not part of a
//! runtime (the entry frame of a path of start-up code only).

use std::collections::{HashMap, HashSet};

use formats::database::{Frame, LABEL_MODULE};

use super::frames::{is_runtime, is_start_up, is_system, last_component, without_parameters};
use super::heap_name::names_at_calling;
use super::layers::{callee_method, generic, return_type_and_name, Layers};
use super::source::SourceCache;

/// User-given wrapper patterns (`--alloc-wrapper`).
#[derive(Debug, Default, Clone)]
pub struct Wrappers {
    patterns: Vec<glob::Pattern>,
}

impl Wrappers {
    /// Compiles the patterns; a bad one is an error naming it.
    pub fn new(patterns: &[String]) -> Result<Self, String> {
        let patterns = patterns
            .iter()
            .map(|p| {
                glob::Pattern::new(p)
                    .map_err(|e| format!("--alloc-wrapper {p:?} is not a valid pattern: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Wrappers { patterns })
    }

    fn matches(&self, function: &str) -> bool {
        let bare = without_parameters(function);
        self.patterns
            .iter()
            .any(|p| p.matches(function) || p.matches(bare))
    }
}

/// What the source says of a frame's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// No line information or unreadable source.
    Unknown,
    /// The line returns the allocation: a wrapper (rule 3).
    Returns,
    /// The line names what it allocates.
    Names,
    /// The line says neither.
    Silent,
}

pub(super) fn source_of(frame: &Frame, callee: Option<&str>, sources: &mut SourceCache) -> Source {
    let (Some(file), Some(line)) = (frame.file.as_deref(), frame.line) else {
        return Source::Unknown;
    };
    let Some(lines) = sources.lines(file) else {
        return Source::Unknown;
    };
    match names_at_calling(lines, line as usize, &frame.function, callee) {
        None => Source::Unknown,
        Some(None) => Source::Returns,
        Some(Some(true)) => Source::Names,
        Some(Some(false)) => Source::Silent,
    }
}

/// True when a function without line information says by its name that it
/// allocates (`alloc` in its last name component, any case).
pub(super) fn allocates_by_name(frame: &Frame) -> bool {
    frame.line.is_none()
        && last_component(without_parameters(&frame.function))
            .to_ascii_lowercase()
            .contains("alloc")
}

/// Chooses the allocation site of every path (root first, frame indices
/// into `frames`): the index into the path, `None` for an empty path. A
/// final [`LABEL_MODULE`] frame is never the site.
pub fn choose_sites(
    paths: &[&[u32]],
    frames: &[Frame],
    wrappers: &Wrappers,
    sources: &mut SourceCache,
) -> Vec<Option<u32>> {
    choose_sites_and_layers(paths, frames, wrappers, sources).0
}

/// [`choose_sites`], and the allocation layers it found.
pub(super) fn choose_sites_and_layers(
    paths: &[&[u32]],
    frames: &[Frame],
    wrappers: &Wrappers,
    sources: &mut SourceCache,
) -> (Vec<Option<u32>>, Layers) {
    let (mut pos, layers) = rules(paths, frames, wrappers, sources, is_runtime);
    // Paths with no frame of the program's own: a program run by a
    // language runtime (`python3 script.py`, all of whose frames are
    // libpython's) is sited among the runtime's frames, by the same rules.
    let inside: Vec<usize> = (0..paths.len()).filter(|&i| pos[i].is_none()).collect();
    if !inside.is_empty() {
        let subset: Vec<&[u32]> = inside.iter().map(|&i| paths[i]).collect();
        let (again, _) = rules(&subset, frames, wrappers, sources, is_system);
        for (&i, p) in inside.iter().zip(again) {
            pos[i] = p;
        }
    }
    let sites = paths
        .iter()
        .zip(pos)
        .map(|(path, p)| {
            let p = p.or_else(|| {
                // Everything skipped: the innermost frame outside
                // runtimes (the entry frame of a path of start-up code
                // only).
                (0..path.len())
                    .rev()
                    .find(|&i| {
                        let frame = &frames[path[i] as usize];
                        frame.module != LABEL_MODULE && !is_runtime(frame)
                    })
                    .or_else(|| path.len().checked_sub(1))
            });
            p.map(|i| i as u32)
        })
        .collect();
    (sites, layers)
}

/// Rules 1-5 with `rule1` deciding which frames are a runtime's: per path,
/// the index of its site, `None` when every frame is skipped.
fn rules(
    paths: &[&[u32]],
    frames: &[Frame],
    wrappers: &Wrappers,
    sources: &mut SourceCache,
    rule1: fn(&Frame) -> bool,
) -> (Vec<Option<usize>>, Layers) {
    // (skipped by rules 1-3, what the source says), per frame; what a
    // line says depends on the function it calls (`flux.setCapacity(n);`
    // names `flux`).
    let mut facts: HashMap<u32, (bool, Source)> = HashMap::new();
    for path in paths {
        for (i, &f) in path.iter().enumerate() {
            if facts.contains_key(&f) {
                continue;
            }
            let frame = &frames[f as usize];
            let callee = path.get(i + 1).map(|&c| callee_method(&frames[c as usize]));
            let source = source_of(frame, callee.as_deref(), sources);
            let skip = frame.module == LABEL_MODULE
                || rule1(frame)
                || is_start_up(frame, i, path.get(i + 1).map(|&n| &frames[n as usize]))
                || wrappers.matches(&frame.function)
                || source == Source::Returns;
            facts.insert(f, (skip, source));
        }
    }
    // Rule 4: the program's allocation layers, from the innermost frame
    // of every path past the allocator and the wrappers that return the
    // block.
    let innermost = |facts: &HashMap<u32, (bool, Source)>, path: &[u32]| {
        (0..path.len())
            .rev()
            .find(|&i| !facts.get(&path[i]).is_some_and(|f| f.0))
            .map(|i| path[i])
    };
    let inner: Vec<u32> = paths.iter().filter_map(|p| innermost(&facts, p)).collect();
    let layers = Layers::find(inner, frames, sources);
    for (&f, fact) in facts.iter_mut() {
        if !fact.0 && layers.contains(&frames[f as usize], sources) {
            fact.0 = true;
        }
    }
    let facts = |f: u32| facts.get(&f).copied().unwrap_or((false, Source::Unknown));
    // Walks outwards from `from` (inclusive) past skipped frames.
    let settle = |path: &[u32], from: usize| -> Option<usize> {
        (0..=from).rev().find(|&i| !facts(path[i]).0)
    };
    let mut pos: Vec<Option<usize>> = paths
        .iter()
        .map(|p| p.len().checked_sub(1).and_then(|i| settle(p, i)))
        .collect();

    // Rule 5, until nothing changes.
    // Functions are compared without their template arguments: one
    // template instantiated for several element types is one function.
    let function_key = |f: u32| {
        let frame = &frames[f as usize];
        (
            frame.module.as_str(),
            generic(return_type_and_name(&frame.function).1),
        )
    };
    let mut wrapper_functions: HashSet<(&str, String)> = HashSet::new();
    loop {
        let mut callers: HashMap<(&str, String), HashSet<Option<u32>>> = HashMap::new();
        for (path, p) in paths.iter().zip(&pos) {
            if let Some(i) = *p {
                let caller = i.checked_sub(1).map(|c| path[c]);
                callers
                    .entry(function_key(path[i]))
                    .or_default()
                    .insert(caller);
            }
        }
        let mut changed = false;
        for (path, p) in paths.iter().zip(pos.iter_mut()) {
            let Some(i) = *p else { continue };
            let f = path[i];
            let key = function_key(f);
            let by_use = wrapper_functions.contains(&key)
                || callers.get(&key).is_some_and(|c| c.len() >= 2)
                || allocates_by_name(&frames[f as usize]);
            if !by_use || facts(f).1 == Source::Names || i == 0 {
                continue;
            }
            wrapper_functions.insert(key);
            let next = settle(path, i - 1);
            if next.is_some() {
                *p = next;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    (pos, layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, module: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            function: function.to_string(),
            file: file.map(str::to_string),
            line,
            module: module.to_string(),
            inlined: false,
            offset: None,
        }
    }

    /// LAMMPS without debug information: `Memory::srealloc` reached from
    /// two callers, `MyPage::allocate` from one; start-up frames in libc.
    #[test]
    fn wrappers_without_line_information() {
        let frames = vec![
            frame("lmp+0x1260", "/usr/bin/lmp", None, None), // 0
            frame(
                "__libc_start_call_main",
                "/lib/x86_64-linux-gnu/libc.so.6",
                Some("./csu/x.h"),
                Some(58),
            ), // 1
            frame("LAMMPS_NS::AtomVec::grow(int)", "/usr/bin/lmp", None, None), // 2
            frame(
                "LAMMPS_NS::Memory::srealloc(void*, long, char const*)",
                "/usr/lib/liblammps.so.0",
                None,
                None,
            ), // 3
            frame(
                "LAMMPS_NS::NeighList::grow(int, int)",
                "/usr/bin/lmp",
                None,
                None,
            ), // 4
            frame(
                "LAMMPS_NS::MyPage<int>::init(int, int, int)",
                "/usr/bin/lmp",
                None,
                None,
            ), // 5
            frame(
                "LAMMPS_NS::MyPage<int>::allocate()",
                "/usr/bin/lmp",
                None,
                None,
            ), // 6
        ];
        let a = [0, 1, 2, 3];
        let b = [0, 1, 4, 3];
        let c = [0, 1, 5, 6];
        let d = [0, 1]; // only start-up frames
        let paths: Vec<&[u32]> = vec![&a, &b, &c, &d];
        let sites = choose_sites(
            &paths,
            &frames,
            &Wrappers::default(),
            &mut SourceCache::default(),
        );
        assert_eq!(sites, vec![Some(2), Some(2), Some(2), Some(0)]);
    }

    /// `python3 script.py`: every frame but `_start` is libpython's. The
    /// site is found among them by the same rules (the arena allocator;
    /// past `PyMem_Realloc` and `list_resize`, each reached from two
    /// callers, the list operation), never `_start`.
    #[test]
    fn a_program_run_by_a_language_runtime_is_sited_inside_it() {
        let py = "/usr/lib/libpython3.11.so.1.0";
        let frames = vec![
            frame("_start", "/usr/bin/python3.11", None, None), // 0
            frame(
                "__libc_start_call_main",
                "/lib/x86_64-linux-gnu/libc.so.6",
                None,
                None,
            ), // 1
            frame("Py_BytesMain", py, Some("Modules/main.c"), Some(734)), // 2
            frame("new_arena", py, Some("Objects/obmalloc.c"), Some(1641)), // 3
            frame(
                "_PyObject_ArenaMmap",
                py,
                Some("Objects/obmalloc.c"),
                Some(152),
            ), // 4
            frame("list_resize", py, Some("Objects/listobject.c"), Some(64)), // 5
            frame("PyMem_Realloc", py, Some("Objects/obmalloc.c"), Some(620)), // 6
            frame("list_extend", py, Some("Objects/listobject.c"), Some(900)), // 7
            frame("app1", py, Some("Objects/listobject.c"), Some(330)), // 8
            frame("dict_resize", py, Some("Objects/dictobject.c"), Some(500)), // 9
        ];
        let arena = [0, 1, 2, 3, 4];
        let by_extend = [0, 1, 2, 7, 5, 6];
        let by_append = [0, 1, 2, 8, 5, 6];
        let dict = [0, 1, 2, 9, 6];
        let paths: Vec<&[u32]> = vec![&arena, &by_extend, &by_append, &dict];
        let sites = choose_sites(
            &paths,
            &frames,
            &Wrappers::default(),
            &mut SourceCache::default(),
        );
        // Indices into each path: `_PyObject_ArenaMmap`, `list_extend`,
        // `app1`, `dict_resize`.
        assert_eq!(sites, vec![Some(4), Some(3), Some(3), Some(3)]);
    }

    /// hypre: `hypre_CAlloc` returns what it allocates (rule 3), so the
    /// site is the line that calls the `hypre_CTAlloc` macro.
    #[test]
    fn wrappers_by_source() {
        let dir = std::env::temp_dir().join(format!("site-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let memory = dir.join("hypre_memory.c");
        std::fs::write(
            &memory,
            "char *hypre_CAlloc(int count, int elt_size)\n{\n   char *ptr;\n   \
             int size = count*elt_size;\n   if (size > 0)\n   {\n      \
             ptr = calloc(count, elt_size);\n   }\n   else\n   {\n      ptr = NULL;\n   }\n   \
             return(ptr);\n}\n",
        )
        .unwrap();
        let creates = dir.join("par_strength.c");
        std::fs::write(
            &creates,
            "void f(void)\n{\n   hypre_CSRMatrixJ(S_diag) = hypre_CTAlloc(int, num_nonzeros_diag);\n}\n",
        )
        .unwrap();
        let (m, c) = (memory.to_str().unwrap(), creates.to_str().unwrap());
        let frames = vec![
            frame("main", "/amg", Some(c), Some(1)), // 0
            frame("hypre_BoomerAMGCreateS", "/amg", Some(c), Some(3)), // 1
            frame("hypre_CAlloc", "/amg", Some(m), Some(7)), // 2
        ];
        let a = [0, 1, 2];
        let paths: Vec<&[u32]> = vec![&a];
        let mut sources = SourceCache::default();
        let sites = choose_sites(&paths, &frames, &Wrappers::default(), &mut sources);
        assert_eq!(sites, vec![Some(1)]);
        let path: Vec<&Frame> = a.iter().map(|&f| &frames[f as usize]).collect();
        let name = crate::name::heap_name(&path, 1, None, &mut sources);
        assert_eq!(name, "hypre_CSRMatrixJ(S_diag)");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A storage template keeps its block in one member: its
    /// `setCapacity` is the layer, and the site is the line that calls it
    /// for each array, named after the container. A copy the compiler
    /// wrote (`Mesh::operator=` at `class Mesh`) is passed over too.
    #[test]
    fn storage_classes_and_compiler_made_copies_are_layers() {
        let dir = std::env::temp_dir().join(format!("site-layers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("store.h");
        std::fs::write(
            &store,
            "template <typename T> class Storage {\n public:\n  void setCapacity(int n) {\n    \
             _block = new T[n];\n  }\n  T *_block;\n};\nclass Mesh {\n  Storage<double> x;\n};\n",
        )
        .unwrap();
        let code = dir.join("domain.cpp");
        std::fs::write(
            &code,
            "void init(Domain *d) {\n  d->flux.setCapacity(10);\n  d->cells.setCapacity(20);\n  \
             *d->mesh = other;\n}\n",
        )
        .unwrap();
        let (st, c) = (store.to_str().unwrap(), code.to_str().unwrap());
        let new = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
        let frames = vec![
            frame("init(Domain*)", "/app", Some(c), Some(2)), // 0
            frame("init(Domain*)", "/app", Some(c), Some(3)), // 1
            frame(
                "Storage<double>::setCapacity(int)",
                "/app",
                Some(st),
                Some(4),
            ), // 2
            frame("Storage<int>::setCapacity(int)", "/app", Some(st), Some(4)), // 3
            frame("operator new[](unsigned long)", new, None, None), // 4
            frame("init(Domain*)", "/app", Some(c), Some(4)), // 5
            frame("Mesh::operator=(Mesh const&)", "/app", Some(st), Some(8)), // 6
        ];
        let a = [0, 2, 4];
        let b = [1, 3, 4];
        let copy = [5, 6, 2, 4];
        let paths: Vec<&[u32]> = vec![&a, &b, &copy];
        let mut sources = SourceCache::default();
        let sites = choose_sites(&paths, &frames, &Wrappers::default(), &mut sources);
        assert_eq!(sites, vec![Some(0), Some(0), Some(0)]);
        let path: Vec<&Frame> = a.iter().map(|&f| &frames[f as usize]).collect();
        assert_eq!(
            crate::name::heap_name(&path, 0, None, &mut sources),
            "d->flux"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn user_patterns_and_runtime_frames() {
        let frames = vec![
            frame("main", "/app", None, None),                    // 0
            frame("make_grid", "/app", None, None),               // 1
            frame("pool_get(unsigned long)", "/app", None, None), // 2
            frame(
                "operator new(unsigned long)",
                "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                None,
                None,
            ), // 3
        ];
        let a = [0, 1, 2, 3];
        let paths: Vec<&[u32]> = vec![&a];
        let none = choose_sites(
            &paths,
            &frames,
            &Wrappers::default(),
            &mut SourceCache::default(),
        );
        assert_eq!(none, vec![Some(2)]);
        let w = Wrappers::new(&["pool_*".to_string()]).unwrap();
        let with = choose_sites(&paths, &frames, &w, &mut SourceCache::default());
        assert_eq!(with, vec![Some(1)]);
        assert!(Wrappers::new(&["[".to_string()]).is_err());
    }
}
