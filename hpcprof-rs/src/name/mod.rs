//! The naming stage (read -> merge -> **name** -> db): chooses every heap
//! object's allocation site ([`site`]) and names the object: the label the
//! program gave it (`hpcrun_label`, `hpcrun_register`), else the variable
//! its site's source line assigns ([`heap_name`]), else
//! `heap@function:line` or, without line information,
//! `heap@function+0xOFFSET` of the site.
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
//! * `heap_name`: the name of an object, walking its allocation path from
//!   the site outwards;
//! * `site`: choosing the allocation site outside the allocator and its
//!   wrappers;
//! * this module: the stage over all heap objects of a database.

mod fortran;
mod frames;
mod heap_name;
mod site;
mod source;
mod statement;
mod text;
mod through_params;

use std::collections::{BTreeSet, HashMap};

use formats::database::{DataObject, Frame, ObjectKind, LABEL_MODULE};

pub use fortran::fortran_allocated;
pub use frames::{is_runtime, short_function, without_parameters};
pub use heap_name::{heap_name, heap_name_with, names_at};
pub use site::{choose_sites, Wrappers};
pub use source::{is_library_source, SourceCache};
pub use statement::{assigned_name, constructor_class, is_return};
pub use text::scope_parts;

/// Sets `alloc_site`, `label` and `name` of the heap objects.
pub fn name_objects(objects: &mut [DataObject], frames: &[Frame], wrappers: &Wrappers) {
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
    let sites = choose_sites(&paths, frames, wrappers, &mut sources);

    // Objects whose sites are one source line reached by different call
    // instructions (`ALLOCATE(a(n), b(m))`): their order by offset.
    let line_key = |f: &Frame| (f.module.clone(), f.function.clone(), f.file.clone(), f.line);
    let mut offsets: HashMap<_, BTreeSet<u64>> = HashMap::new();
    for (path, site) in paths.iter().zip(&sites) {
        let Some(s) = site else { continue };
        let f = &frames[path[*s as usize] as usize];
        if let (Some(_), Some(off)) = (f.line, f.offset) {
            offsets.entry(line_key(f)).or_default().insert(off);
        }
    }

    let mut names = Vec::with_capacity(heap.len());
    for ((path, site), (_, label)) in paths.iter().zip(&sites).zip(&parts) {
        let name = match (label, site) {
            (Some(label), _) => label.clone(),
            (None, Some(s)) => {
                let f = &frames[path[*s as usize] as usize];
                let ordinal = f.offset.and_then(|off| {
                    let all = offsets.get(&line_key(f))?;
                    Some((all.iter().position(|&o| o == off)?, all.len()))
                });
                let frames_of: Vec<&Frame> = path.iter().map(|&f| &frames[f as usize]).collect();
                heap_name(&frames_of, *s as usize, ordinal, &mut sources)
            }
            (None, None) => "heap@[unknown]".to_string(),
        };
        names.push(name);
    }
    for (((&i, site), (_, label)), name) in heap.iter().zip(sites).zip(parts).zip(names) {
        let o = &mut objects[i];
        o.alloc_site = site;
        o.label = label;
        o.name = name;
    }
}

#[cfg(test)]
mod tests;
