//! Worker threads' call paths hang below the code that created them
//! (HPCToolkit's rule): `tests/programs/thread_creators.c`
//! starts two workers from `spawn_workers` (called by `main`), and one
//! worker starts a helper from `spawn_helper`; every thread sums one
//! array in `sum_array`. The preload records each thread's creation path
//! (`ThreadInfo::created_at`, the creating thread's own path appended) and
//! hpcprof-rs hangs the thread's tree below it, in the code-centric tree
//! and in the data-centric access paths. The per-thread split stays: every
//! thread is still in the database, and a node's thread distribution
//! counts them.

use formats::database::{Database, NodeKind, Tree};
use pipeline_tests::*;

/// The function names on the path from the root to node `n`, root first.
fn path(db: &Database, tree: &Tree, mut n: u32) -> Vec<String> {
    let mut out = Vec::new();
    while n != u32::MAX {
        let node = &tree.nodes[n as usize];
        if let NodeKind::Frame(f) = node.kind {
            out.push(db.frames[f as usize].function.clone());
        }
        n = node.parent;
    }
    out.reverse();
    out
}

/// Whether `names` holds `want` in this order (not necessarily adjacent).
fn in_order(names: &[String], want: &[&str]) -> bool {
    let mut it = names.iter();
    want.iter().all(|w| it.any(|n| n == w))
}

#[test]
fn threads_hang_below_their_creators() {
    let dir = scratch("thread-creators");
    let exe = compile_test_program("thread_creators.c", &dir, &["-pthread"]);
    let run = profile(&dir, "mem:soft@1000000", &exe, &[]);
    let bytes = std::fs::read(run.db.join("profile.db")).expect("read the database");
    let db = Database::from_bytes(&bytes).expect("decode the database");
    assert_eq!(db.info.threads, 4, "main, two workers, a helper");

    // Every sampled sum_array node of the code tree, by its path.
    let mut workers = 0u64;
    let mut helper = 0u64;
    let mut helper_node = None;
    for (i, node) in db.code.nodes.iter().enumerate() {
        let NodeKind::Frame(f) = node.kind else {
            continue;
        };
        let samples = node.exclusive.first().copied().unwrap_or(0);
        if db.frames[f as usize].function != "sum_array" || samples == 0 {
            continue;
        }
        let p = path(&db, &db.code, i as u32);
        if p.iter().any(|n| n == "helper") {
            // helper was started by worker 0, which spawn_workers started.
            assert!(
                in_order(
                    &p,
                    &[
                        "main",
                        "spawn_workers",
                        "start_thread",
                        "worker",
                        "spawn_helper",
                        "start_thread",
                        "helper",
                        "sum_array"
                    ]
                ),
                "{p:?}"
            );
            helper += samples;
            helper_node = Some((i as u32, samples));
        } else if p.iter().any(|n| n == "worker") {
            assert!(
                in_order(&p, &["main", "spawn_workers", "start_thread", "worker"]),
                "{p:?}"
            );
            workers += samples;
        } else {
            panic!("sum_array outside a worker: {p:?}");
        }
    }
    assert!(
        workers > 0 && helper > 0,
        "workers {workers}, helper {helper}"
    );

    // No thread's root is left at the top: every top-level frame of the
    // code-centric tree that has samples is the main thread's `_start`.
    for &c in children(&db.code, 0).iter() {
        if let NodeKind::Frame(f) = db.code.nodes[c as usize].kind {
            let name = &db.frames[f as usize].function;
            assert!(
                name == "_start" || inclusive(&db.code, c) == 0,
                "a thread's root at the top: {name}"
            );
        }
    }

    // The data-centric access paths of the array hang below the creators
    // too.
    let data_obj = db
        .objects
        .iter()
        .find(|o| o.name == "data" && !o.alloc_path.is_empty())
        .expect("the heap array `data`");
    let mut stitched = 0;
    for (i, node) in db.data.nodes.iter().enumerate() {
        if node.exclusive.first().copied().unwrap_or(0) == 0 {
            continue;
        }
        let mut n = i as u32;
        while n != u32::MAX && n != data_obj.node {
            n = db.data.nodes[n as usize].parent;
        }
        if n != data_obj.node {
            continue;
        }
        let p = path(&db, &db.data, i as u32);
        if p.iter().any(|f| f == "worker") {
            assert!(in_order(&p, &["main", "spawn_workers", "worker"]), "{p:?}");
            stitched += 1;
        }
    }
    assert!(stitched > 0, "no access path of `data` below a worker");

    // The per-thread split stays: the helper's sum_array node is one
    // thread's (its distribution over the four threads: max = its value,
    // min 0), and `export --view threads` still lists four threads.
    let (node, value) = helper_node.expect("the helper's sum_array node");
    let dist = db.code.nodes[node as usize]
        .threads
        .as_ref()
        .expect("a thread distribution");
    assert_eq!(dist.max, value as f64, "{dist:?}");
    assert_eq!(dist.min, 0.0, "{dist:?}");
    let export = export_json(&run.db, "threads");
    assert_eq!(export["source"]["threads"], 4, "{export}");
}

fn children(tree: &Tree, n: u32) -> Vec<u32> {
    (0..tree.nodes.len() as u32)
        .filter(|&i| tree.nodes[i as usize].parent == n)
        .collect()
}

fn inclusive(tree: &Tree, n: u32) -> u64 {
    let mut total = 0;
    for (i, node) in tree.nodes.iter().enumerate() {
        let mut m = i as u32;
        while m != u32::MAX && m != n {
            m = tree.nodes[m as usize].parent;
        }
        if m == n {
            total += node.exclusive.first().copied().unwrap_or(0);
        }
    }
    total
}
