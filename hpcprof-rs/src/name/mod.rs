//! The naming stage (read -> merge -> **name** -> db): chooses every heap
//! object's allocation site ([`site`]) and names the object: the label the
//! program gave it (`hpcrun_label`, `hpcrun_register`), else the variable
//! its site's source line assigns ([`heap_name`]), else
//! `heap@function:line` or, without line information,
//! `heap@function+0xOFFSET` of the site. Memory a runtime allocated (the
//! innermost frame outside the allocator and system libraries is in an MPI
//! library or an OpenMP runtime, [`formats::runtimes`]) is named as that
//! runtime's (`Open MPI: shared-memory transport /dev/shm/...`,
//! `OpenMP runtime: libgomp at ...`) and marked `runtime`.
//!
//! The modules, each using only those above it:
//!
//! * `text`: source text, language-neutral (brackets, separators, scoped
//!   names);
//! * `source`: source files read once, the program's own vs libraries';
//! * `frames`: runtime and system library frames, short function names;
//! * `fortran`, `statement` (C, C++, Rust) and `through_params` (a name
//!   rewritten through the caller's arguments): what one source line says,
//!   per language;
//! * `layers`: the program's own allocation layers (storage classes,
//!   compiler-made copies) and the element type of the arrays they make;
//! * `heap_name`: the name of an object, walking its allocation path from
//!   the site outwards;
//! * `library_call`: a library function's own temporary buffers (`qsort
//!   buffer (GridInit.c:51)`), named after the call;
//! * `small_blocks`: a site of many small blocks says how many;
//! * `site`: choosing the allocation site outside the allocator and its
//!   wrappers;
//! * `stack`: the names of stack objects (a function's frames);
//! * this module: the stage over all heap objects of a database.

mod fortran;
mod frames;
mod heap_name;
mod layers;
mod library_call;
mod site;
mod small_blocks;
mod source;
mod stack;
mod statement;
mod text;
mod through_params;

use std::collections::{BTreeSet, HashMap};

use formats::database::{DataObject, Frame, ObjectKind, LABEL_MODULE};
use formats::runtimes::Runtime;

pub use fortran::fortran_allocated;
pub use frames::{is_runtime, short_function, without_parameters};
pub use heap_name::{heap_name, heap_name_with, names_at};
pub use site::{choose_sites, Wrappers};
pub use source::{is_library_source, SourceCache};
pub use stack::{frame_variables, stack_frame_name};
pub use statement::{assigned_name, constructor_class, is_return};
pub use text::scope_parts;

/// Sets `alloc_site`, `label` and `name` of the heap objects.
/// `all_paths` are every allocation path of the run (root first), also
/// those no sample reached ([`crate::merge::MergedDb::alloc_paths`]): the
/// program's allocation layers are decided from all of them, so that the
/// decision does not depend on which objects were sampled.
pub fn name_objects(
    objects: &mut [DataObject],
    frames: &[Frame],
    all_paths: &[Vec<u32>],
    wrappers: &Wrappers,
) {
    let heap: Vec<usize> = (0..objects.len())
        .filter(|&i| objects[i].kind == ObjectKind::Heap && !objects[i].alloc_path.is_empty())
        .collect();
    // The path without a final label frame, and the label.
    let split = |o: &DataObject| -> (usize, Option<String>) {
        let path = &o.alloc_path;
        match path.last().map(|&f| &frames[f as usize]) {
            Some(f) if f.module == LABEL_MODULE => (path.len() - 1, Some(f.function.clone())),
            _ => (path.len(), None),
        }
    };
    let parts: Vec<(usize, Option<String>)> = heap.iter().map(|&i| split(&objects[i])).collect();
    let paths: Vec<&[u32]> = heap
        .iter()
        .zip(&parts)
        .map(|(&i, (len, _))| &objects[i].alloc_path[..*len])
        .collect();
    let mut sources = SourceCache::default();
    // The objects' paths first, then the run's other paths (without a
    // final label frame).
    let mut decide_from = paths.clone();
    decide_from.extend(all_paths.iter().map(|p| match p.last() {
        Some(&f) if frames[f as usize].module == LABEL_MODULE => &p[..p.len() - 1],
        _ => &p[..],
    }));
    let (mut sites, layers) =
        site::choose_sites_and_layers(&decide_from, frames, wrappers, &mut sources);
    sites.truncate(paths.len());
    // A library call's own buffer (`qsort`'s): named after the call and
    // sited at the program's frame that made it.
    let buffers: Vec<Option<String>> = paths
        .iter()
        .zip(sites.iter_mut())
        .map(|(path, site)| {
            let frames_of: Vec<&Frame> = path.iter().map(|&f| &frames[f as usize]).collect();
            let (at, name) = library_call::buffer(&frames_of)?;
            *site = Some(at as u32);
            Some(name)
        })
        .collect();

    // Objects whose sites are one source line reached by different call
    // instructions (`ALLOCATE(a(n), b(m))`, `double *cold = malloc(a),
    // *hot = malloc(b);`): their order by offset among all the line's
    // allocation calls (the merge keeps those of objects without samples
    // too, so that one sampled object of two still knows its rank).
    let line_key = |f: &Frame| (f.module.clone(), f.function.clone(), f.file.clone(), f.line);
    let mut offsets: HashMap<_, BTreeSet<u64>> = HashMap::new();
    for f in frames {
        if let (Some(_), Some(off)) = (f.line, f.offset) {
            if f.module != LABEL_MODULE {
                offsets.entry(line_key(f)).or_default().insert(off);
            }
        }
    }

    let mut names = Vec::with_capacity(heap.len());
    for ((((path, site), (_, label)), buffer), &object) in
        paths.iter().zip(&sites).zip(&parts).zip(buffers).zip(&heap)
    {
        let name = match (label, site, buffer) {
            (Some(label), _, _) => label.clone(),
            (None, Some(_), Some(buffer)) => buffer,
            (None, Some(s), None) => {
                let f = &frames[path[*s as usize] as usize];
                let ordinal = f.offset.and_then(|off| {
                    let all = offsets.get(&line_key(f))?;
                    Some((all.iter().position(|&o| o == off)?, all.len()))
                });
                let frames_of: Vec<&Frame> = path.iter().map(|&f| &frames[f as usize]).collect();
                let after = &frames_of[*s as usize + 1..];
                let name = heap_name(&frames_of, *s as usize, ordinal, &mut sources);
                let name = layers::container_of_subscript(&name, after).unwrap_or(name);
                // The element type of the array, when the frames past the
                // site tell it (`allocate<double>`, `std::vector<Cell>`).
                match layers::element_type(after, &layers) {
                    Some(ty) if !name.starts_with("heap@") => {
                        let bytes = objects[object].blocks.as_ref().map(|b| b.max_bytes);
                        format!("{name}{}", layers::array_suffix(ty, bytes))
                    }
                    _ => name,
                }
            }
            (None, None, _) => "heap@[unknown]".to_string(),
        };
        names.push(name);
    }
    for (((&i, site), (_, label)), name) in heap.iter().zip(sites).zip(parts).zip(names) {
        let path = &objects[i].alloc_path;
        // The runtime's frame that names the part: the chosen site when it
        // is the runtime's (a wrapper inside it was passed over), else the
        // innermost one.
        let runtime = runtime_of(path, frames).map(|(r, f)| {
            let at_site = site
                .and_then(|s| path.get(s as usize))
                .filter(|&&s| formats::runtimes::of_module(&frames[s as usize].module) == Some(r));
            (r, at_site.copied().unwrap_or(f))
        });
        let o = &mut objects[i];
        o.alloc_site = site;
        o.name = match runtime {
            Some((r, f)) => runtime_name(r, &frames[f as usize], label.as_deref()),
            None => name,
        };
        o.runtime = runtime.map(|(r, _)| r.name.to_string());
        o.label = label;
    }
    small_blocks::name_small_block_sites(objects, frames);
    name_runtime_statics(objects);
}

/// Static variables of runtimes, by the symbol prefixes their libraries
/// reserve (a static object keeps no module): (prefix, runtime name).
const RUNTIME_STATICS: &[(&str, &str)] = &[
    ("ompi_", "Open MPI"),
    ("opal_", "Open MPI"),
    ("orte_", "Open MPI"),
    ("mca_", "Open MPI"),
    ("pmix_", "Open MPI"),
    ("MPIR_", "MPICH"),
    ("MPIDI_", "MPICH"),
    ("MPID_", "MPICH"),
    ("ucs_", "UCX"),
    ("ucp_", "UCX"),
    ("uct_", "UCX"),
    ("gomp_", "OpenMP runtime"),
    ("__kmp", "OpenMP runtime"),
];

/// Marks and renames the static variables of runtimes
/// (`Open MPI: opal_uses_threads`, see [`RUNTIME_STATICS`]) and the data
/// sections of runtime modules that the preload names when no symbol
/// covers an address (`Open MPI: <.bss of mca_btl_vader.so>`).
pub fn name_runtime_statics(objects: &mut [DataObject]) {
    for o in objects.iter_mut().filter(|o| o.kind == ObjectKind::Static) {
        // `<.bss of mca_btl_vader.so>`: a runtime module's data section.
        let section_of = o
            .name
            .strip_prefix("<.")
            .and_then(|n| n.split_once(" of "))
            .and_then(|(_, m)| m.strip_suffix('>'))
            .and_then(formats::runtimes::of_module)
            .map(|r| r.name);
        let by_prefix = || {
            RUNTIME_STATICS
                .iter()
                .find(|(p, _)| o.name.starts_with(p))
                .map(|(_, r)| *r)
        };
        if let Some(r) = section_of.or_else(by_prefix) {
            o.name = format!("{r}: {}", o.name);
            o.runtime = Some(r.to_string());
        }
    }
}

/// The runtime that allocated through `path` (root first, a final label
/// frame allowed) and its innermost frame in that runtime: the innermost
/// frame outside the allocator and system libraries decides. `None` when
/// that frame is the program's (or a library that is no runtime).
fn runtime_of(path: &[u32], frames: &[Frame]) -> Option<(Runtime, u32)> {
    let &f = path.iter().rev().find(|&&f| {
        let frame = &frames[f as usize];
        frame.module != LABEL_MODULE
            && !is_runtime(frame)
            && !formats::runtimes::is_system_module(&frame.module)
    })?;
    formats::runtimes::of_module(&frames[f as usize].module).map(|r| (r, f))
}

/// `Open MPI: shared-memory transport /dev/shm/vader_segment.vm.1.0` (a
/// mapped file), `OpenMP runtime: libgomp at gomp_new_team`,
/// `OpenMP runtime: libgomp.so.1+0xd138` (no symbol): the runtime, the
/// part of it (`component`) and the file or the function.
fn runtime_name(r: Runtime, frame: &Frame, label: Option<&str>) -> String {
    let part = formats::runtimes::component(&frame.module, label);
    match label {
        Some(l) => format!("{}: {part} {l}", r.name),
        None => {
            let base = frame.module.rsplit('/').next().unwrap_or("");
            let function = match frame.offset {
                Some(_) => frame.function_at(),
                None => short_function(&frame.function),
            };
            if !base.is_empty() && function.starts_with(base) {
                // No symbol: `libgomp.so.1+0xd138` names the part already.
                if base.starts_with(part.as_str()) {
                    format!("{}: {function}", r.name)
                } else {
                    format!("{}: {part} ({function})", r.name)
                }
            } else {
                format!("{}: {part} at {function}", r.name)
            }
        }
    }
}

#[cfg(test)]
mod tests;
