//! The preload library inside real programs: exact allocation semantics,
//! tracking of every entry point, threads, fork and the allocation log.

use std::collections::HashSet;
use std::process::Command;

use pipeline_tests::*;

#[test]
fn allocation_entry_points_keep_glibc_semantics_and_are_tracked() {
    let dir = scratch("alloc-semantics");
    let exe = compile_c("../tests/programs/alloc_semantics.c", &dir, &[]);
    let native = run(&mut Command::new(&exe));
    let native_out = ok_stdout(&native, "native alloc_semantics");
    assert!(native_out.starts_with("ok "), "{native_out}");
    let (profiled, measurements) = hpcrun(&dir, "mem:soft", &exe, &[]);
    assert_eq!(ok_stdout(&profiled, "profiled alloc_semantics"), native_out);

    let profiles = read_profiles(&measurements);
    assert_eq!(profiles.len(), 1);
    let log = &profiles[0].allocations;
    let sizes: HashSet<u64> = log.iter().map(|a| a.size).collect();
    // malloc, calloc, realloc (twice), reallocarray, posix_memalign,
    // aligned_alloc, memalign, valloc, pvalloc, malloc again.
    for expected in [
        1 << 20,
        4096 * 4,
        2000,
        200000,
        4000,
        10000,
        4096,
        3000,
        5000,
        50000,
    ] {
        assert!(
            sizes.contains(&expected),
            "no tracked allocation of {expected} bytes in {log:#?}"
        );
    }
    // Nothing below --min-bytes (1024) is tracked.
    assert!(log.iter().all(|a| a.size >= 1024), "{log:#?}");
    // Every block the program freed has a free time after its allocation.
    let big = log.iter().find(|a| a.size == 1 << 20).unwrap();
    assert!(big.free_unix_ns.is_some_and(|f| f >= big.alloc_unix_ns));
    // Each allocation names a site whose path reaches main.
    for a in log {
        assert!(!profiles[0].alloc_sites[a.site as usize].frames.is_empty());
    }
}
