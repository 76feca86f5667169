//! The program's own allocation layers: the classes and compiler-made
//! members between the code that wants an array and the allocator.
//!
//! C++ codes reach `new` through their own storage classes (a vector
//! class, a `BulkStorage<T>` whose `setCapacity` does `_data = new
//! T[n];`), through the copies and assignments the compiler writes for the
//! classes that hold them, and through `allocate<T>(n)` helpers. The
//! helpers return the block and are wrappers by their source
//! ([`super::site`], rule 3); this module finds the rest, from every
//! allocation path of the run (sampled or not) and the source, so that the
//! same program and input give the same decision every time:
//!
//! * a **storage class** stores every block it allocates, over all paths,
//!   in one member of its own (`_data`, `this->storage`), and is a
//!   template or makes that storage in two functions or more (its
//!   constructor and `reserve`, its copy): all its member functions
//!   (construction, `reserve`, growth, copy, assignment) are the layer,
//!   and the block belongs to whoever holds the container. A class whose
//!   blocks go to two members or more (`pressure` and `density`), or a
//!   plain class that fills its one member in one function
//!   (`Solver::setup`), names them and is not a layer;
//! * a **compiler-made member** (an implicit copy constructor or copy
//!   assignment, whose line is the class's definition, `class Domain`)
//!   only forwards the copy of its members.
//!
//! Classes are compared without their template arguments
//! (`BulkStorage<double>` and `BulkStorage<Facet>` are one class).

use std::collections::{HashMap, HashSet};

use formats::database::Frame;

use super::frames::{last_component, without_parameters};
use super::source::SourceCache;
use super::statement::{assignment_target, constructor_class, line_name, Named};
use super::text::{code_part, scope_parts};

/// `name` without template arguments: `BulkStorage<double>::setCapacity`
/// -> `BulkStorage<>::setCapacity`.
pub(super) fn generic(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0u32;
    for c in name.chars() {
        match c {
            '<' => {
                if depth == 0 {
                    out.push('<');
                }
                depth += 1;
            }
            '>' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push('>');
                }
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A demangled function split into its return type (template functions
/// carry one: `double* MemoryControl::allocate<double>(int)`), and its
/// qualified name without parameters (`MemoryControl::allocate<double>`).
pub(super) fn return_type_and_name(function: &str) -> (Option<&str>, &str) {
    let bare = without_parameters(function);
    if bare.starts_with("operator") {
        return (None, bare);
    }
    // The last space outside brackets separates the return type.
    let mut depth = 0i32;
    let mut split = None;
    for (i, c) in bare.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => split = Some(i),
            _ => {}
        }
    }
    match split {
        Some(i) if !bare[i + 1..].starts_with("operator") && !bare[..i].ends_with("operator") => {
            (Some(bare[..i].trim()), bare[i + 1..].trim())
        }
        _ => (None, bare),
    }
}

/// The method a frame calls, as a line may spell it: the last name
/// component of the next inner frame's function, without template
/// arguments (`BulkStorage<double>::setCapacity(int)` -> `setCapacity`).
pub(super) fn callee_method(callee: &Frame) -> String {
    let (_, name) = return_type_and_name(&callee.function);
    let last = last_component(name);
    last.split('<').next().unwrap_or(last).to_string()
}

/// The class (or namespace) a function belongs to, without template
/// arguments: `BulkStorage<double>::setCapacity(int)` -> `BulkStorage<>`.
pub(super) fn class_of(function: &str) -> Option<String> {
    let (_, name) = return_type_and_name(function);
    let parts = scope_parts(name);
    let [.., class, _] = parts.as_slice() else {
        return None;
    };
    Some(generic(&parts[..parts.len() - 1].join("::"))).filter(|_| !class.is_empty())
}

/// The first template argument of a class or function name
/// (`std::vector<double, std::allocator<double> >` -> `double`).
pub(super) fn first_template_argument(name: &str) -> Option<&str> {
    let open = name.find('<')?;
    let mut depth = 0i32;
    for (i, c) in name[open..].char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(name[open + 1..open + i].trim());
                }
            }
            ',' if depth == 1 => return Some(name[open + 1..open + i].trim()),
            _ => {}
        }
    }
    None
}

/// The member of its own object that a member function's allocating line
/// stores the block in: a constructor's member (`: data(n)`, `data = new
/// T[n];`), or in another member function an assignment without a
/// declaration to `this->x` or to a name that can only be a member (the
/// class is a template, or the name follows a member convention: `_x`,
/// `m_x`, `x_`). `None` otherwise.
fn stored_member(frame: &Frame, sources: &mut SourceCache) -> Option<String> {
    let (Some(file), Some(line)) = (frame.file.as_deref(), frame.line) else {
        return None;
    };
    let lines = sources.lines(file)?;
    let idx = line as usize;
    if idx == 0 || idx > lines.len() {
        return None;
    }
    let head = |m: &str| -> String {
        let m = m.strip_prefix("this->").unwrap_or(m);
        m.split(['.', '[', '-']).next().unwrap_or(m).to_string()
    };
    if constructor_class(&frame.function).is_some() {
        return match line_name(lines, idx, true) {
            Some(Named::Member(m)) => Some(head(&m)),
            _ => None,
        };
    }
    let class = class_of(&frame.function)?;
    let (name, declared) = assignment_target(&lines[idx - 1])?;
    if declared {
        return None;
    }
    let member = head(&name);
    let by_convention = member.starts_with('_')
        || member.starts_with("m_")
        || member.ends_with('_')
        || name.starts_with("this->");
    let ident = member.chars().all(|c| c.is_alphanumeric() || c == '_');
    (ident && (by_convention || class.contains('<'))).then_some(member)
}

/// True when the frame's line is where its class is defined (`class
/// Domain`, `struct Cell {`): a member the compiler wrote.
fn compiler_made(frame: &Frame, sources: &mut SourceCache) -> bool {
    let (Some(file), Some(line)) = (frame.file.as_deref(), frame.line) else {
        return false;
    };
    let Some(text) = sources
        .lines(file)
        .and_then(|l| l.get((line as usize).checked_sub(1)?))
    else {
        return false;
    };
    let code = code_part(text);
    let last = last_component(return_type_and_name(&frame.function).1);
    let special = last == "operator=" || constructor_class(&frame.function).is_some();
    special
        && (code.starts_with("class ") || code.starts_with("struct ") || code.contains("= default"))
}

/// The allocation layers of one run.
#[derive(Debug, Default)]
pub(super) struct Layers {
    /// Storage classes, without template arguments.
    storage: HashSet<String>,
}

impl Layers {
    /// Finds the storage classes from the innermost program frame of
    /// every allocation path (`inner`: the frame past the allocator and
    /// the wrappers that return the block, per path).
    pub(super) fn find(
        inner: impl IntoIterator<Item = u32>,
        frames: &[Frame],
        sources: &mut SourceCache,
    ) -> Layers {
        // Per class: the members it stores blocks in, and the functions
        // that do.
        let mut members: HashMap<String, (HashSet<String>, HashSet<String>)> = HashMap::new();
        let mut seen = HashSet::new();
        for f in inner {
            if !seen.insert(f) {
                continue;
            }
            let frame = &frames[f as usize];
            let Some(class) = class_of(&frame.function) else {
                continue;
            };
            if let Some(m) = stored_member(frame, sources) {
                let e = members.entry(class).or_default();
                e.0.insert(m);
                e.1.insert(generic(return_type_and_name(&frame.function).1));
            }
        }
        // One member; a template, or a class that makes its storage in
        // two ways or more (construction and growth, copy): a container.
        // A plain class that fills one member once (`Solver::setup`
        // doing `work_ = new double[n];`) names that member itself.
        let storage = members
            .into_iter()
            .filter(|(c, (m, f))| m.len() == 1 && (c.contains('<') || f.len() >= 2))
            .map(|(c, _)| c)
            .collect();
        Layers { storage }
    }

    /// True when the frame is part of the program's allocation layer: a
    /// member function of a storage class, or a compiler-made member.
    pub(super) fn contains(&self, frame: &Frame, sources: &mut SourceCache) -> bool {
        class_of(&frame.function).is_some_and(|c| self.storage.contains(&c))
            || compiler_made(frame, sources)
    }
}

/// The size in bytes of a C++ fundamental type or pointer as demangled
/// names spell it (x86-64 and aarch64 Linux), `None` for others.
fn type_size(ty: &str) -> Option<u64> {
    if ty.ends_with('*') {
        return Some(8);
    }
    Some(match ty {
        "char" | "signed char" | "unsigned char" | "bool" | "std::byte" => 1,
        "short" | "unsigned short" => 2,
        "int" | "unsigned int" | "float" | "char32_t" | "wchar_t" => 4,
        "long" | "unsigned long" | "long long" | "unsigned long long" | "double" => 8,
        "long double" | "__int128" | "unsigned __int128" => 16,
        "std::complex<double>" => 16,
        "std::complex<float>" => 8,
        _ => return None,
    })
}

/// Containers of the standard library whose first template argument is
/// their element type.
const ELEMENT_CONTAINERS: &[&str] = &[
    "std::vector<",
    "std::__cxx11::vector<",
    "std::valarray<",
    "std::deque<",
    "std::unique_ptr<",
    "std::_Vector_base<",
];

/// The element type of the array a path allocates, from the frames past
/// its site (`after`, innermost last): a template function that returns
/// `T*` (`allocate<T>`), a storage class `Storage<T>`, or a standard
/// container `std::vector<T>`. The innermost one that says decides.
pub(super) fn element_type<'a>(after: &[&'a Frame], layers: &Layers) -> Option<&'a str> {
    for frame in after.iter().rev() {
        let (ret, name) = return_type_and_name(&frame.function);
        if let (Some(ret), Some(arg)) = (ret, first_template_argument(last_component(name))) {
            if ret.strip_suffix('*').map(str::trim) == Some(arg) {
                return Some(arg);
            }
        }
        let parts = scope_parts(name);
        if parts.len() >= 2 {
            let class = parts[..parts.len() - 1].join("::");
            let class_start = &name[..class.len()];
            if ELEMENT_CONTAINERS.iter().any(|c| class.starts_with(c))
                || layers.storage.contains(&generic(&class))
            {
                if let Some(arg) = first_template_argument(scope_parts(class_start).last()?) {
                    return Some(arg);
                }
            }
        }
    }
    None
}

/// `lookup` for `lookup[i * 7]` when the block was made by a standard
/// container's subscript operator (`std::unordered_map::operator[]`, in
/// the frames past the site, `after`): the object is the container, not
/// one element.
pub(super) fn container_of_subscript(name: &str, after: &[&Frame]) -> Option<String> {
    let made_by_subscript = after.iter().any(|f| {
        let (_, n) = return_type_and_name(&f.function);
        n.starts_with("std::") && last_component(n) == "operator[]"
    });
    if !made_by_subscript || !name.ends_with(']') {
        return None;
    }
    let mut depth = 0i32;
    for (i, c) in name.char_indices().rev() {
        match c {
            ']' => depth += 1,
            '[' => {
                depth -= 1;
                if depth == 0 {
                    return Some(name[..i].to_string()).filter(|n| !n.is_empty());
                }
            }
            _ => {}
        }
    }
    None
}

/// ` : double[262,144]` (or ` : Cell[]` when the element size is not
/// known): the element type and count of an array of `bytes` bytes.
pub(super) fn array_suffix(ty: &str, bytes: Option<u64>) -> String {
    let ty = ty.replace("std::__cxx11::", "std::");
    match (type_size(&ty), bytes) {
        (Some(size), Some(bytes)) if bytes > 0 && bytes % size == 0 => {
            format!(" : {ty}[{}]", formats::notes::thousands(bytes / size))
        }
        _ => format!(" : {ty}[]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_without_template_arguments() {
        assert_eq!(
            generic("BulkStorage<std::pair<int, double> >::setCapacity"),
            "BulkStorage<>::setCapacity"
        );
        assert_eq!(
            class_of("BulkStorage<double>::setCapacity(int, Policy)").as_deref(),
            Some("BulkStorage<>")
        );
        assert_eq!(
            class_of("double* MemoryControl::allocate<double>(int, MemoryControl::Policy)")
                .as_deref(),
            Some("MemoryControl")
        );
        assert_eq!(class_of("main"), None);
        assert_eq!(
            return_type_and_name("MC_Vector* MemoryControl::allocate<MC_Vector>(int)"),
            (Some("MC_Vector*"), "MemoryControl::allocate<MC_Vector>")
        );
        assert_eq!(
            return_type_and_name("operator new(unsigned long)"),
            (None, "operator new")
        );
        assert_eq!(
            first_template_argument("std::vector<double, std::allocator<double> >"),
            Some("double")
        );
    }

    #[test]
    fn element_types_and_counts() {
        let frame = |function: &str| Frame {
            function: function.to_string(),
            ..Frame::default()
        };
        let layers = Layers::default();
        let helper = frame("Cell* Memory::allocate<Cell>(int)");
        assert_eq!(element_type(&[&helper], &layers), Some("Cell"));
        let vector =
            frame("std::vector<double, std::allocator<double> >::_M_default_append(unsigned long)");
        assert_eq!(element_type(&[&vector], &layers), Some("double"));
        let plain = frame("make_grid(int)");
        assert_eq!(element_type(&[&plain], &layers), None);
        assert_eq!(
            array_suffix("double", Some(2_097_152)),
            " : double[262,144]"
        );
        assert_eq!(array_suffix("Cell", Some(4096)), " : Cell[]");
        assert_eq!(array_suffix("int", Some(10)), " : int[]");
        let subscript = frame("std::__detail::_Map_base<int, std::pair<int const, double>, std::allocator<std::pair<int const, double> >, std::__detail::_Select1st, std::equal_to<int>, std::hash<int>, std::__detail::_Mod_range_hashing, std::__detail::_Default_ranged_hash, std::__detail::_Prime_rehash_policy, std::__detail::_Hashtable_traits<false, false, true>, true>::operator[](int&&)");
        assert_eq!(
            container_of_subscript("domain->lookup[i * 7]", &[&subscript]).as_deref(),
            Some("domain->lookup")
        );
        assert_eq!(container_of_subscript("grid[i]", &[&plain]), None);
    }
}
