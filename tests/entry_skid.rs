//! Skid across function boundaries: a sample that
//! lands on a function's first instruction was entered by a call or a
//! jump; nothing before it (the previous function's padding, a CRT stub
//! such as `frame_dummy`) ran just before. The period belongs to the
//! function that was running.

use pipeline_tests::*;

/// (function, cpu_samples) of the code view's functions, and their total.
fn functions(db: &std::path::Path) -> (Vec<(String, u64)>, u64) {
    let code = export_json(db, "code");
    let rows: Vec<(String, u64)> = code["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap_or("").to_string(),
                f["metrics"]["cpu_samples"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let total = rows.iter().map(|r| r.1).sum();
    (rows, total)
}

/// `hot_entry` is entered 400 million times through a pointer; its first
/// instruction follows `before_entry`'s or a CRT stub's padding, which
/// took 13% of the samples.
#[test]
fn a_function_entry_is_charged_to_the_function_entered() {
    let dir = scratch("entry-skid");
    let exe = compile_test_program("entry_skid.c", &dir, &[]);
    let p = profile(&dir, "mem:soft", &exe, &[]);
    assert!(p.program_stdout.starts_with("entry_skid"));
    let (rows, total) = functions(&p.db);
    assert!(total >= 100, "too few samples: {rows:?}");
    let hot = rows.iter().find(|r| r.0 == "hot_entry").map_or(0, |r| r.1);
    assert!(hot > 0, "no sample in hot_entry: {rows:?}");
    // Everything but main's loop and hot_entry: start-up, the exit, the
    // timer's own ticks; far below the 13% the padding took.
    let elsewhere: u64 = rows
        .iter()
        .filter(|r| r.0 != "main" && r.0 != "hot_entry")
        .map(|r| r.1)
        .sum();
    assert!(
        elsewhere * 100 <= total * 3,
        "{elsewhere} of {total} samples outside main and hot_entry: {rows:?}"
    );
}

/// `std::function` calls land on `_M_invoke`'s first instruction, right
/// after `frame_dummy` (8% of the samples) or the other `_M_invoke`'s
/// padding (a symbol-less `function_skid+0x...`, 8%).
#[test]
fn std_function_calls_are_not_charged_to_frame_dummy() {
    let dir = scratch("function-skid");
    let exe = compile_test_program("function_skid.cpp", &dir, &[]);
    let p = profile(&dir, "mem:soft", &exe, &[]);
    assert!(p.program_stdout.starts_with("function_skid"));
    let (rows, total) = functions(&p.db);
    assert!(total >= 100, "too few samples: {rows:?}");
    let stray: u64 = rows
        .iter()
        .filter(|r| r.0 == "frame_dummy" || r.0.starts_with("function_skid+0x"))
        .map(|r| r.1)
        .sum();
    assert!(
        stray * 100 <= total,
        "{stray} of {total} samples in frame_dummy or padding: {rows:?}"
    );
}
