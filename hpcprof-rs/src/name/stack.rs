//! Names of stack objects: the frames of one function on the threads'
//! stacks, `stack: locals of work (prog.c:12)` (the function, short, and
//! its first source line), the frame holding the sampled address as the
//! sample handler's unwind found it.

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
}
