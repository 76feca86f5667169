//! Unit tests of the library heap: size classes, large blocks, the
//! reserve (its freed ranges joined and reused), and blocks allocated
//! and freed across threads.

use super::*;

#[test]
fn classes_fit_sizes_and_alignments() {
    for size in 1..=LARGEST_CLASS {
        let c = class_of(size, 8).unwrap();
        assert!(CLASSES[c] >= size);
        assert!(c == 0 || CLASSES[c - 1] < size);
    }
    assert_eq!(class_of(LARGEST_CLASS + 1, 8), None);
    for align in [32, 64, 128, 256, 4096] {
        for size in [1, 17, 100, 4000, 9000] {
            if let Some(c) = class_of(size, align) {
                assert!(
                    CLASSES[c] >= size && CLASSES[c] % align == 0,
                    "{size} {align}"
                );
                assert!(CLASSES[c].is_power_of_two());
            }
        }
    }
    assert_eq!(class_of(8, 8192), None);
}

#[test]
fn blocks_are_aligned_distinct_and_reused() {
    let mut blocks = Vec::new();
    for (size, align) in [
        (24, 8),
        (24, 8),
        (100, 64),
        (5000, 4096),
        (70_000, 16),
        (3, 65536),
    ] {
        let p = alloc(size, align);
        assert!(!p.is_null());
        assert_eq!(p as usize % align, 0, "{size} {align}");
        // SAFETY: a fresh block of `size` bytes.
        unsafe { std::ptr::write_bytes(p, 0xAB, size) };
        blocks.push((p, size, align));
    }
    assert_ne!(blocks[0].0, blocks[1].0);
    for &(p, size, align) in &blocks {
        // SAFETY: allocated above with this layout.
        unsafe { dealloc(p, size, align) };
    }
}

#[test]
fn realloc_keeps_contents_across_classes_and_mappings() {
    let mut p = alloc(10, 8);
    // SAFETY: blocks of the sizes written.
    unsafe {
        std::ptr::copy_nonoverlapping(b"0123456789".as_ptr(), p, 10);
        for (old, new) in [
            (10, 3000),
            (3000, 200_000),
            (200_000, 900_000),
            (900_000, 20),
        ] {
            p = realloc(p, old, 8, new);
            assert!(!p.is_null());
            assert_eq!(std::slice::from_raw_parts(p, 10), b"0123456789");
        }
        dealloc(p, 20, 8);
        let c = c_malloc(5);
        assert!(is_c_block(c));
        std::ptr::copy_nonoverlapping(b"abcde".as_ptr(), c, 5);
        let c = c_realloc(c, 100_000);
        assert_eq!(std::slice::from_raw_parts(c, 5), b"abcde");
        c_free(c);
        // No block starts a page, and each is told from the others
        // and freed whole, whatever its offset.
        let blocks: Vec<*mut u8> = (0..2000).map(|i| c_malloc(8 + i % 300)).collect();
        for &b in &blocks {
            assert_ne!(b as usize % PAGE, 0);
            assert!(is_c_block(b));
        }
        for b in blocks {
            c_free(b);
        }
        let g = std::hint::black_box(libc::malloc(24) as *mut u8);
        assert!(!is_c_block(g));
        libc::free(g as *mut libc::c_void);
    }
}

#[test]
fn freed_ranges_of_the_reserve_are_joined_and_reused() {
    map_reserve();
    let a = from_reserve(3 * PAGE) as usize;
    assert_ne!(a, 0);
    assert!(in_reserve(a) && in_reserve(a + 3 * PAGE - 1));
    let before = reserve_left();
    // Freed out of order: the three pages become one range.
    keep_for_reuse(a + 2 * PAGE, PAGE);
    keep_for_reuse(a, PAGE);
    keep_for_reuse(a + PAGE, PAGE);
    assert_eq!(reserve_left(), before + 3 * PAGE);
    // SAFETY: the range is ours; it must come back zeroed.
    unsafe { (a as *mut u8).add(PAGE).write(7) };
    let p = reuse(3 * PAGE) as usize;
    assert_eq!(p, a);
    // SAFETY: as above.
    assert_eq!(unsafe { (a as *const u8).add(PAGE).read() }, 0);
    assert_eq!(reserve_left(), before);
    assert!(reuse(PAGE).is_null());
}

#[test]
fn threads_allocate_and_free_each_others_blocks() {
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                for i in 0..20_000usize {
                    let size = 1 + (i * 37 + t * 11) % 3000;
                    let p = alloc(size, 8);
                    // SAFETY: a fresh block of `size` bytes.
                    unsafe { p.write(t as u8) };
                    kept.push((p as usize, size));
                    if kept.len() > 64 {
                        let (q, s) = kept.swap_remove(i % 64);
                        // SAFETY: allocated above with this layout.
                        unsafe {
                            assert_eq!(*(q as *const u8), t as u8);
                            dealloc(q as *mut u8, s, 8);
                        }
                    }
                }
                kept
            })
        })
        .collect();
    // Freed by this thread.
    for h in handles {
        for (p, s) in h.join().unwrap() {
            // SAFETY: as above.
            unsafe { dealloc(p as *mut u8, s, 8) };
        }
    }
}

#[test]
fn the_reserve_is_a_32nd_of_an_address_space_limit_between_8_and_16_mib() {
    assert_eq!(reserve_bytes(None), RESERVE);
    assert_eq!(reserve_bytes(Some(100 << 20)), LIMITED_RESERVE_MIN);
    assert_eq!(reserve_bytes(Some(320 << 20)), 10 << 20);
    assert_eq!(
        reserve_bytes(Some(300_000 << 10)),
        ((300_000 << 10) / 32) & !(PAGE - 1)
    );
    assert_eq!(reserve_bytes(Some(4 << 30)), RESERVE);
    assert_eq!(reserve_bytes(Some(u64::MAX)), RESERVE);
}
