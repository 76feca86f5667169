//! The object map's tests: blocks of every size class inserted, found and
//! forgotten; labels as part of a site's identity; registered ranges
//! nested in heap blocks; churn of many small blocks.

use super::*;

#[test]
fn blocks_of_both_sizes_are_found_and_forgotten() {
    assert!(init(true, 0) || get().is_some());
    let objs = get().unwrap();
    let a = objs.site(&[1, 2, 3]).unwrap();
    let b = objs.site(&[4, 5]).unwrap();
    assert_ne!(a, b);
    assert_eq!(objs.site(&[1, 2, 3]), Some(a));
    // A small block spanning a granule boundary, and a big block.
    let small = 0x7000_0000_fc00;
    objs.insert(small, 3000, a, 0, 0);
    objs.insert(0x7100_0000_0000, 64 << 20, b, 0, 0);
    assert_eq!(objs.lookup(small).site(), Some(a));
    assert_eq!(objs.lookup(small + 2999).site(), Some(a));
    assert_eq!(objs.lookup(small + 3000), Lookup::NotFound);
    assert_eq!(objs.lookup(0x7100_0000_0000 + (40 << 20)).site(), Some(b));
    assert!(objs.is_tracked_start(small));
    objs.remove(small);
    assert_eq!(objs.lookup(small + 100), Lookup::NotFound);
    assert!(!objs.is_tracked_start(small));
    // Reuse of the same address by another site.
    objs.insert(small, 2000, b, 0, 0);
    assert_eq!(objs.lookup(small + 100).site(), Some(b));
    objs.remove(small);
    objs.remove(0x7100_0000_0000);
    assert_eq!(objs.lookup(0x7100_0000_0000 + 5), Lookup::NotFound);
}

#[test]
fn medium_blocks_live_in_their_own_table_next_to_small_ones() {
    assert!(init(true, 0) || get().is_some());
    let objs = get().unwrap();
    let m = objs.site(&[31, 32]).unwrap();
    let s = objs.site(&[33]).unwrap();
    // A 200 KB block not aligned to 64 KiB, with a small block right
    // after it in the same 64 KiB granule.
    let medium = 0x7200_0000_3000;
    let size = 200_000;
    objs.insert(medium, size, m, 0, 0);
    objs.insert(medium + size, 100, s, 0, 0);
    for off in [0, 1, 65_535, 65_536, 150_000, size - 1] {
        assert_eq!(objs.lookup(medium + off).site(), Some(m), "offset {off}");
    }
    assert_eq!(objs.lookup(medium + size).site(), Some(s));
    assert_eq!(objs.lookup(medium - 1), Lookup::NotFound);
    assert!(objs.is_tracked_start(medium));
    // Relabelling finds it in its table.
    assert!(objs.relabel(medium + 70_000, b"grid"));
    let labelled = objs.lookup(medium + 10).site().unwrap();
    assert_eq!(
        objs.site_info(labelled).unwrap().1.label().as_deref(),
        Some("grid")
    );
    objs.remove(medium);
    for off in [0, 65_536, size - 1] {
        assert_eq!(objs.lookup(medium + off), Lookup::NotFound);
    }
    assert_eq!(objs.lookup(medium + size).site(), Some(s));
    objs.remove(medium + size);
    // Exactly MEDIUM_BYTES goes to the medium table, one byte less to
    // the small one; both are found whole.
    for len in [MEDIUM_BYTES, MEDIUM_BYTES - 1] {
        objs.insert(medium, len, m, 0, 0);
        assert_eq!(objs.lookup(medium + len - 1).site(), Some(m));
        assert_eq!(objs.lookup(medium + len), Lookup::NotFound);
        objs.remove(medium);
        assert_eq!(objs.lookup(medium), Lookup::NotFound);
    }
}

#[test]
fn labels_are_part_of_a_sites_identity() {
    assert!(init(true, 0) || get().is_some());
    let objs = get().unwrap();
    let plain = objs.site(&[71, 72]).unwrap();
    let a = objs.labelled_site(&[71, 72], b"particles").unwrap();
    let b = objs.labelled_site(&[71, 72], b"cells").unwrap();
    assert_ne!(plain, a);
    assert_ne!(a, b);
    assert_eq!(objs.labelled_site(&[71, 72], b"cells"), Some(b));
    assert_eq!(objs.labelled_site(&[71, 72], b""), Some(plain));
    let (frames, site) = objs.site_info(b).unwrap();
    assert_eq!(frames, vec![71, 72]);
    assert_eq!(site.label().as_deref(), Some("cells"));
    assert_eq!(objs.site_info(plain).unwrap().1.label(), None);
    // Cut to LABEL_BYTES, without a split character at the end.
    let long = "é".repeat(40);
    let cut = objs.labelled_site(&[71, 72], long.as_bytes()).unwrap();
    let label = objs.site_info(cut).unwrap().1.label().unwrap();
    assert_eq!(label, "é".repeat(31));
    let bad = objs.labelled_site(&[71, 72], b"a\xffb").unwrap();
    assert_eq!(
        objs.site_info(bad).unwrap().1.label().unwrap(),
        "a\u{fffd}b"
    );
}

#[test]
fn registered_ranges_win_over_the_blocks_around_them() {
    assert!(init(true, 0) || get().is_some());
    let objs = get().unwrap();
    let pool_site = objs.site(&[81]).unwrap();
    let inner = objs.labelled_site(&[82], b"inner").unwrap();
    let outer = objs.labelled_site(&[82], b"outer").unwrap();
    let pool = 0x7300_0000_0000u64;
    objs.insert(pool, 64 << 20, pool_site, 0, 0);
    // A registered range at the pool's start, a small and a big one
    // inside, and one registered range nested in another.
    objs.register(pool, 1 << 20, inner, 0, 0);
    objs.register(pool + (2 << 20), 100, inner, 0, 0);
    objs.register(pool + (8 << 20), 16 << 20, outer, 0, 0);
    for i in 0..20 {
        objs.register(pool + (10 << 20) + i * 4096, 2048, inner, 0, 0);
    }
    let site = |addr| objs.lookup(addr).site();
    assert_eq!(site(pool), Some(inner));
    assert_eq!(site(pool + (1 << 20)), Some(pool_site));
    assert_eq!(site(pool + (2 << 20) + 99), Some(inner));
    assert_eq!(site(pool + (2 << 20) + 100), Some(pool_site));
    assert_eq!(site(pool + (8 << 20) + 5), Some(outer));
    assert_eq!(site(pool + (10 << 20) + 3 * 4096 + 10), Some(inner));
    // Between nested ranges: the enclosing one, up to 16 back...
    assert_eq!(site(pool + (10 << 20) + 3 * 4096 + 3000), Some(outer));
    // ... beyond that the heap block around it.
    assert_eq!(site(pool + (10 << 20) + 19 * 4096 + 3000), Some(pool_site));
    // hpcrun_label on a registered range and on the pool.
    assert!(objs.relabel(pool + 10, b"renamed"));
    let renamed = objs.labelled_site(&[82], b"renamed").unwrap();
    assert_eq!(site(pool + 20), Some(renamed));
    assert!(objs.relabel(pool + (1 << 20), b"pool"));
    let named_pool = objs.labelled_site(&[81], b"pool").unwrap();
    assert_eq!(site(pool + (1 << 20)), Some(named_pool));
    assert_eq!(
        objs.site_info(named_pool)
            .unwrap()
            .1
            .allocations
            .load(Relaxed),
        1
    );
    assert!(!objs.relabel(0x10, b"nowhere"));
    // Unregistered: the pool again.
    assert!(objs.unregister(pool));
    assert!(!objs.unregister(pool));
    assert_eq!(site(pool), Some(named_pool));
    for i in 0..20 {
        assert!(objs.unregister(pool + (10 << 20) + i * 4096));
    }
    objs.unregister(pool + (2 << 20));
    objs.unregister(pool + (8 << 20));
    objs.remove(pool);
    assert_eq!(objs.lookup(pool + 5), Lookup::NotFound);
}

#[test]
fn many_small_blocks_and_churn() {
    assert!(init(true, 0) || get().is_some());
    let objs = get().unwrap();
    let s = objs.site(&[9, 9, 9]).unwrap();
    let base = 0x5000_0000_0000u64;
    for round in 0..4 {
        for i in 0..20_000u64 {
            objs.insert(base + i * 4096, 1500 + round, s, 0, 0);
        }
        for i in (0..20_000u64).step_by(97) {
            assert_eq!(objs.lookup(base + i * 4096 + 1000).site(), Some(s));
            assert_eq!(objs.lookup(base + i * 4096 + 3000), Lookup::NotFound);
        }
        for i in 0..20_000u64 {
            objs.remove(base + i * 4096);
        }
        assert_eq!(objs.lookup(base + 4096 * 5 + 10), Lookup::NotFound);
    }
}

#[test]
fn the_big_block_map_holds_every_block_that_fits_under_a_limit() {
    assert_eq!(big_capacity(None), big::CAPACITY);
    // 300,000 KiB hold 1,171 blocks of 256 KiB.
    assert_eq!(big_capacity(Some(300_000 << 10)), 2048);
    assert_eq!(big_capacity(Some(1 << 20)), 256);
    assert_eq!(big_capacity(Some(u64::MAX)), big::CAPACITY);
    for limit in [1u64 << 28, 3 << 30, 17 << 30] {
        assert!(big_capacity(Some(limit)) as u64 >= (limit / BIG_BYTES).min(big::CAPACITY as u64));
    }
}
