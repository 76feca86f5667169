//! Stack accesses are named by the frame that holds them, through the
//! real pipeline (hpcrun-rs -e mem:soft, hpcprof-rs,
//! export): tests/programs/stack_frames.c reads big local arrays at
//! random, in the function that declares them, in a callee, in two
//! threads, and from a thread that reads another thread's array. The stack rows must be `stack: locals of <the function that
//! owns the array> (stack_frames.c:<its first line>)`, never
//! `<stack: thread N>`. Each assertion is a share that sampling noise on
//! a loaded machine cannot flip (the owner holds nearly all the stack
//! samples when measured; the bounds leave wide room), never a count or
//! an ordering.

use pipeline_tests::*;

const PROGRAM: &str = "stack_frames.c";

/// Random reads per run: about half a second of CPU time per thread
/// (over 100 samples at mem:soft's 2 ms period, in CPU time: load on the
/// machine stretches the run, not the sample count).
const ROUNDS: &str = "400000000";

/// Profiles `stack_frames MODE`; returns the data export.
fn measure(mode: &str) -> serde_json::Value {
    let dir = scratch(&format!("stack_frames-{mode}"));
    let exe = compile_test_program(PROGRAM, &dir, &["-pthread"]);
    let p = profile(&dir, "mem:soft", &exe, &[mode, ROUNDS]);
    assert!(
        p.program_stdout.contains("stack_frames"),
        "{}",
        p.program_stdout
    );
    export_json(&p.db, "data")
}

/// Sampled accesses (loads and stores) of an exported object.
fn accesses(o: &serde_json::Value) -> u64 {
    samples(o) + o["metrics"]["store_samples"].as_u64().unwrap_or(0)
}

fn stack_objects(data: &serde_json::Value) -> Vec<&serde_json::Value> {
    data["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter(|o| o["kind"] == "stack")
        .collect()
}

/// Line (1-based) of the definition of `function` in the program.
fn definition_line(function: &str) -> u64 {
    let path = root().join("tests/programs").join(PROGRAM);
    let text = std::fs::read_to_string(path).expect("read program");
    let needle = format!("static double {function}(");
    text.lines()
        .position(|l| l.contains(&needle))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("{function} not in {PROGRAM}"))
}

/// The stack row of `function`'s frames: named after it, its first line
/// (the line of its entry, at or just after the definition) and the
/// local `variable` the accesses fell in (from the DWARF).
fn frame_row<'a>(
    data: &'a serde_json::Value,
    function: &str,
    variable: &str,
) -> &'a serde_json::Value {
    let stacks = stack_objects(data);
    let row = stacks
        .iter()
        .find(|o| o["frame"]["function"] == function)
        .unwrap_or_else(|| panic!("no stack row of {function}: {data:#}"));
    let frame = &row["frame"];
    let line = frame["line"].as_u64().expect("the frame's line");
    let def = definition_line(function);
    assert!(
        (def..def + 3).contains(&line),
        "{function} defined at line {def}, named at line {line}"
    );
    assert!(
        frame["file"].as_str().unwrap().ends_with(PROGRAM),
        "{frame}"
    );
    assert_eq!(
        row["name"].as_str().unwrap(),
        format!("stack: locals of {function} ({PROGRAM}:{line}): {variable}")
    );
    row
}

/// All sampled stack accesses, after checking there are enough for shares
/// to mean something.
fn stack_total(data: &serde_json::Value) -> u64 {
    let total: u64 = stack_objects(data).iter().map(|o| accesses(o)).sum();
    assert!(total >= 40, "only {total} stack samples: {data:#}");
    total
}

/// Share of the stack samples that no frame held (`<stack: thread N>`).
fn whole_stack_share(data: &serde_json::Value) -> f64 {
    let rest: u64 = stack_objects(data)
        .iter()
        .filter(|o| o["name"].as_str().unwrap().starts_with("<stack: thread"))
        .map(|o| accesses(o))
        .sum();
    rest as f64 / stack_total(data) as f64
}

#[test]
fn a_local_array_is_named_by_its_functions_frame() {
    let data = measure("single");
    let total = stack_total(&data);
    let row = frame_row(&data, "hot_locals", "buf");
    let share = accesses(row) as f64 / total as f64;
    // Measured: every stack sample.
    assert!(share >= 0.8, "hot_locals holds {share:.2} of {total}");
    assert!(whole_stack_share(&data) <= 0.1, "{data:#}");
}

#[test]
fn an_array_read_by_a_callee_is_the_callers() {
    let data = measure("caller");
    let total = stack_total(&data);
    // reads_array() does the reads, one frame below the owner.
    let row = frame_row(&data, "owns_array", "buf");
    let share = accesses(row) as f64 / total as f64;
    assert!(share >= 0.8, "owns_array holds {share:.2} of {total}");
    let callee: u64 = stack_objects(&data)
        .iter()
        .filter(|o| o["frame"]["function"] == "reads_array")
        .map(|o| accesses(o))
        .sum();
    assert!(
        callee * 10 <= total,
        "reads_array holds {callee} of {total}"
    );
    assert!(whole_stack_share(&data) <= 0.1, "{data:#}");
}

#[test]
fn two_threads_name_two_functions() {
    let data = measure("threads");
    let total = stack_total(&data);
    let left = frame_row(&data, "left_locals", "left");
    let right = frame_row(&data, "right_locals", "right");
    // The threads do the same work: each about half.
    for (name, row) in [("left_locals", left), ("right_locals", right)] {
        let share = accesses(row) as f64 / total as f64;
        assert!(share >= 0.25, "{name} holds {share:.2} of {total}");
        // One thread's frames: all its samples in one thread.
        let threads = row["threads"].as_array().expect("threads");
        let top = threads.iter().map(samples).max().unwrap_or(0);
        assert_eq!(top, samples(row), "{name}: {threads:#?}");
    }
    assert!(
        (accesses(left) + accesses(right)) as f64 >= 0.8 * total as f64,
        "{data:#}"
    );
    let thread_of = |row: &serde_json::Value| {
        row["threads"]
            .as_array()
            .unwrap()
            .iter()
            .max_by_key(|t| samples(t))
            .map(|t| t["thread"].clone())
    };
    assert_ne!(thread_of(left), thread_of(right));
    assert!(whole_stack_share(&data) <= 0.1, "{data:#}");
}

#[test]
fn another_threads_array_is_named_by_its_frame_there() {
    let data = measure("shared");
    let total = stack_total(&data);
    // Both threads read shares_array's array: the main thread in its own
    // stack, the other thread in the main thread's.
    let row = frame_row(&data, "shares_array", "shared");
    let share = accesses(row) as f64 / total as f64;
    assert!(share >= 0.8, "shares_array holds {share:.2} of {total}");
    let threads = row["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 2, "{threads:#?}");
    for t in threads {
        let part = samples(t) as f64 / samples(row) as f64;
        assert!(part >= 0.2, "{} holds {part:.2} of {row:#}", t["thread"]);
    }
    assert!(whole_stack_share(&data) <= 0.1, "{data:#}");
}
