//! Names of stack objects: the frames of one function on the threads'
//! stacks, `stack: locals of work (prog.c:12)` (the function, short, and
//! its first source line), the frame holding the sampled address as the
//! sample handler's unwind found it.

use std::collections::BTreeMap;

use formats::database::Frame;

use super::frames::{module_base, short_function};

/// `stack: locals of <function> (<file>:<line>)`, the file by its base
/// name and the line of the function's entry; `(<module>)` without line
/// information (nothing when the function name already says the module).
pub fn stack_frame_name(frame: &Frame) -> String {
    // A compiler's clone keeps its mark (`[clone ._omp_fn.0]`: the
    // outlined body of an OpenMP parallel region), after the short name.
    let (base, clone) = match frame.function.find(" [clone ") {
        Some(i) => frame.function.split_at(i),
        None => (frame.function.as_str(), ""),
    };
    let function = format!("{}{clone}", short_function(base));
    let file = frame
        .file
        .as_deref()
        .map(|f| f.rsplit('/').next().unwrap_or(f));
    let module = module_base(&frame.module);
    let place = match (file, frame.line) {
        (Some(f), Some(l)) => format!(" ({f}:{l})"),
        (Some(f), None) => format!(" ({f})"),
        _ if module.is_empty() || function.starts_with(module) => String::new(),
        _ => format!(" ({module})"),
    };
    format!("stack: locals of {function}{place}")
}

/// Variables shown after a frame's name at most.
const SHOWN_VARIABLES: usize = 3;

/// The variables of a frame that its sampled accesses touched (DWARF
/// names, with their sampled accesses), most accessed first: `buf, tmp`,
/// `a, b, c and 2 more`; empty when none was found.
pub fn frame_variables(vars: &BTreeMap<String, u64>) -> String {
    let mut list: Vec<(&String, u64)> = vars.iter().map(|(v, &n)| (v, n)).collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<&str> = list
        .iter()
        .take(SHOWN_VARIABLES)
        .map(|(v, _)| v.as_str())
        .collect();
    let mut text = shown.join(", ");
    if list.len() > SHOWN_VARIABLES {
        text.push_str(&format!(" and {} more", list.len() - SHOWN_VARIABLES));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: Option<&str>, line: Option<u32>, module: &str) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(str::to_string),
            line,
            module: module.into(),
            ..Frame::default()
        }
    }

    #[test]
    fn names_say_the_function_and_where_it_starts() {
        let f = frame(
            "CalcFBHourglassForceForElems(Domain&, double*, int)",
            Some("/src/lulesh/lulesh.cc"),
            Some(1024),
            "/bin/lulesh2.0",
        );
        assert_eq!(
            stack_frame_name(&f),
            "stack: locals of CalcFBHourglassForceForElems (lulesh.cc:1024)"
        );
        let f = frame(
            "CalcKinematicsForElems(Domain&, double, int) [clone ._omp_fn.0]",
            Some("lulesh.cc"),
            Some(1510),
            "/bin/lulesh2.0",
        );
        assert_eq!(
            stack_frame_name(&f),
            "stack: locals of CalcKinematicsForElems [clone ._omp_fn.0] (lulesh.cc:1510)"
        );
        let f = frame("work", None, None, "/usr/lib/libx.so.1");
        assert_eq!(stack_frame_name(&f), "stack: locals of work (libx.so.1)");
        let f = frame("libx.so.1+0x1234", None, None, "/usr/lib/libx.so.1");
        assert_eq!(stack_frame_name(&f), "stack: locals of libx.so.1+0x1234");
    }

    #[test]
    fn variables_most_accessed_first() {
        let vars: BTreeMap<String, u64> = [("a", 5), ("buf", 90), ("c", 5), ("d", 1)]
            .into_iter()
            .map(|(v, n)| (v.to_string(), n))
            .collect();
        assert_eq!(frame_variables(&vars), "buf, a, c and 1 more");
        assert_eq!(frame_variables(&BTreeMap::new()), "");
    }
}
