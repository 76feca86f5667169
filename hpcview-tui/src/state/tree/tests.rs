use super::*;
use crate::fixtures;

fn labels(pane: &Pane) -> Vec<String> {
    pane.visible
        .iter()
        .map(|&id| {
            let i = &pane.items[id as usize];
            format!("{}{}", "  ".repeat(i.depth as usize), i.label)
        })
        .collect()
}

fn root(pane: &Pane, label: &str) -> u32 {
    *pane
        .roots
        .iter()
        .find(|&&r| pane.items[r as usize].label == label)
        .unwrap_or_else(|| panic!("no root {label}"))
}

#[test]
fn data_pane_is_object_first() {
    let model = Model::new(fixtures::abc(), None);
    let mut pane = Pane::new(&model, PaneKind::Data);
    assert_eq!(labels(&pane)[..4], ["C", "B", "A", "<stack: thread 0>"]);
    pane.toggle(&model);
    let l = labels(&pane);
    assert_eq!(l[1], "  allocated at (4 frames, root first)");
    assert_eq!(l[2], "  _start");
    // The allocation path expands into its frames, root first.
    pane.move_by(1);
    pane.toggle(&model);
    let l = labels(&pane);
    assert_eq!(l[2], "    _start");
    assert_eq!(l[5], "    main  abc.c:32");
    assert_eq!(l[6], "  _start");
    let c = pane.visible[0];
    assert!((pane.share(&model, c) - 0.9).abs() < 1e-9);
    // C is accessed only by compute: its samples over compute's
    // cpu_samples (formats::views::bottleneck).
    let mem = pane.items[c as usize].mem.unwrap();
    assert!((mem - 900.0 / 1050.0).abs() < 1e-9, "{mem}");
    // Its first access-path node: compute's proxy, weighted.
    let path = pane.visible[6];
    let mem = pane.items[path as usize].mem.unwrap();
    assert!((mem - 1000.0 / 1050.0).abs() < 1e-9, "{mem}");
}

#[test]
fn bottom_up_lists_callers() {
    let model = Model::new(fixtures::abc(), None);
    let mut pane = Pane::new(&model, PaneKind::BottomUp);
    let compute = root(&pane, "compute");
    assert_eq!(pane.items[compute as usize].inc, [1000, 20, 1050]);
    pane.select_id(Some(compute));
    pane.toggle(&model);
    let caller = pane.items[compute as usize].children.as_ref().unwrap()[0];
    assert_eq!(pane.items[caller as usize].label, "main");
    assert_eq!(pane.items[caller as usize].tag, "caller");
    assert_eq!(pane.items[caller as usize].inc, [1000, 20, 1050]);
    // main's caller is __libc_start_call_main.
    pane.select_id(Some(caller));
    pane.toggle(&model);
    let up = pane.items[caller as usize].children.as_ref().unwrap()[0];
    assert_eq!(pane.items[up as usize].label, "__libc_start_call_main");
}

#[test]
fn flat_lists_lines() {
    let model = Model::new(fixtures::abc(), None);
    let mut pane = Pane::new(&model, PaneKind::Flat);
    let compute = root(&pane, "compute");
    pane.select_id(Some(compute));
    pane.toggle(&model);
    let lines: Vec<&str> = pane.items[compute as usize]
        .children
        .as_ref()
        .unwrap()
        .iter()
        .map(|&c| pane.items[c as usize].label.as_str())
        .collect();
    assert_eq!(lines, ["abc.c:25", "abc.c:24"]);
}

#[test]
fn top_down_sort_and_search() {
    let model = Model::new(fixtures::abc(), None);
    let mut pane = Pane::new(&model, PaneKind::TopDown);
    assert_eq!(labels(&pane), ["_start"]);
    assert!(pane.search(&model, "abc.c:25", true));
    let sel = pane.selected_item().unwrap();
    assert_eq!(sel.label, "compute  abc.c:25");
    assert!(!pane.search(&model, "no such thing", true));
    let pos = |pane: &Pane, s: &str| labels(pane).iter().position(|l| l.contains(s));
    assert!(pos(&pane, "main  abc.c:45") < pos(&pane, "main  abc.c:41"));
    pane.set_sort(
        &model,
        Sort {
            key: SortKey::Name,
            descending: false,
        },
    );
    assert!(pos(&pane, "main  abc.c:41") < pos(&pane, "main  abc.c:45"));
    // The selection survives the re-sort.
    assert_eq!(pane.selected_item().unwrap().label, "compute  abc.c:25");
}

#[test]
fn recursion_is_counted_once() {
    let model = Model::new(fixtures::recursive(), None);
    let pane = Pane::new(&model, PaneKind::BottomUp);
    let f = root(&pane, "f");
    // f -> f -> g: inclusive 10, not 20.
    assert_eq!(pane.items[f as usize].inc[0], 10);
}

/// The hot-path key (`x`) reaches a leaf line in one step in every pane.
#[test]
fn hot_path_reaches_the_line_in_every_pane() {
    let model = Model::new(fixtures::abc(), None);
    for (kind, leaf) in [
        (PaneKind::Data, "compute  abc.c:25"),
        (PaneKind::TopDown, "compute  abc.c:25"),
        (PaneKind::Flat, "abc.c:25"),
        (PaneKind::BottomUp, "_start"),
    ] {
        let mut pane = Pane::new(&model, kind);
        pane.expand_hot_path(&model, 512);
        let item = pane.selected_item().unwrap();
        assert_eq!(item.label, leaf, "{kind:?}: {:#?}", labels(&pane));
        assert!(!item.expandable, "{kind:?}: {} is not a leaf", item.label);
        // Its ancestors are the hottest at every level: the first root.
        let mut top = pane.selected_id().unwrap();
        while let Some(p) = pane.items[top as usize].parent {
            top = p;
        }
        assert_eq!(top, pane.visible[0], "{kind:?}");
    }
}

/// An object's exclusive value is all of its accesses; its access-path
/// rows keep the tree's (the samples at that line).
#[test]
fn data_objects_have_their_exclusive_values() {
    let model = Model::new(fixtures::abc(), None);
    let mut pane = Pane::new(&model, PaneKind::Data);
    let c = pane.visible[0];
    assert_eq!(pane.items[c as usize].exc, pane.items[c as usize].inc);
    assert_eq!(pane.items[c as usize].exc[0], 900);
    pane.expand_hot_path(&model, 512);
    let leaf = pane.selected_item().unwrap();
    assert_eq!(leaf.exc, leaf.inc);
    let parent = pane.items[leaf.parent.unwrap() as usize].clone();
    assert_eq!(parent.exc[0], 0, "{}", parent.label);
}

/// Every row of `pane`, expanded all the way down.
fn all_labels(model: &Model, pane: &mut Pane) -> Vec<String> {
    let mut i = 0;
    while i < pane.visible.len() {
        let id = pane.visible[i];
        if !pane.items[id as usize].expanded {
            pane.expand(model, id);
        }
        i += 1;
    }
    labels(pane)
}

/// Runtime rows hidden: the runtime's object and functions are gone from
/// every pane, its frames inside call paths are replaced by the rows
/// below them (the worker's OpenMP region stays, under `start_thread`).
#[test]
fn runtime_rows_are_hidden_in_every_pane() {
    let model = Model::new(fixtures::abc_openmp(), None);
    for kind in [
        PaneKind::Data,
        PaneKind::TopDown,
        PaneKind::BottomUp,
        PaneKind::Flat,
    ] {
        let shown = all_labels(&model, &mut Pane::new(&model, kind));
        let mut pane = Pane::with_runtime_hidden(&model, kind);
        let hidden = all_labels(&model, &mut pane);
        let runtime = |l: &String| l.contains("gomp_") || l.contains("OpenMP runtime");
        assert!(shown.iter().any(runtime), "{kind:?}: {shown:#?}");
        assert!(!hidden.iter().any(runtime), "{kind:?}: {hidden:#?}");
        // The program's rows stay, at consistent depths.
        let must = if kind == PaneKind::Data {
            "C"
        } else {
            "compute"
        };
        assert!(
            hidden.iter().any(|l| l.trim_start().starts_with(must)),
            "{kind:?}: {hidden:#?}"
        );
        for &id in &pane.visible {
            let item = &pane.items[id as usize];
            let depth = item.parent.map_or(0, |p| pane.items[p as usize].depth + 1);
            assert_eq!(item.depth, depth, "{kind:?}: {}", item.label);
        }
        // Shares stay shares of the whole run.
        assert_eq!(pane.totals, Pane::new(&model, kind).totals, "{kind:?}");
    }
    // The worker's region hangs below start_thread, where libgomp was.
    let mut top = Pane::with_runtime_hidden(&model, PaneKind::TopDown);
    let rows = all_labels(&model, &mut top);
    let at = rows.iter().position(|l| l == "start_thread").unwrap();
    assert_eq!(rows[at + 1], "  compute._omp_fn.0  abc.c:25", "{rows:#?}");
    // And its caller, bottom-up, is start_thread.
    let mut up = Pane::with_runtime_hidden(&model, PaneKind::BottomUp);
    let f = root(&up, "compute._omp_fn.0");
    up.select_id(Some(f));
    up.toggle(&model);
    let caller = up.items[f as usize].children.as_ref().unwrap()[0];
    assert_eq!(up.items[caller as usize].label, "start_thread");
}
