//! Sites of many small blocks say so in their name: `heap@PairLJCut::coeff+0x2d6
//! (22 small blocks)`. The preload tracks blocks under `--min-bytes` by
//! site when the program's own code allocated them
//! (`objects::small_sites`); without debug information such a site is
//! named after its function, and the count tells the reader that the row
//! is many small tables read together (LAMMPS's pair coefficients: one
//! call of `PairLJCut::allocate` making a dozen `memory->create` tables
//! per rank), not one array. Objects of one name and site (several call
//! paths, ranks) are counted together, as the report and the viewer show
//! them as one row.

use std::collections::HashMap;

use formats::database::{DataObject, Frame, ObjectKind};

/// Blocks smaller than this on average are "small blocks" (the default
/// `--min-bytes`).
const SMALL_BLOCK_BYTES: u64 = 1024;

/// Appends ` (N small blocks)` to the names of the program's heap objects
/// named after their site (`heap@...`) whose blocks, counted over every
/// object of that name and site, are at least two and under
/// [`SMALL_BLOCK_BYTES`] on average.
pub fn name_small_block_sites(objects: &mut [DataObject], frames: &[Frame]) {
    let eligible = |o: &DataObject| {
        o.kind == ObjectKind::Heap
            && o.runtime.is_none()
            && o.label.is_none()
            && o.name.starts_with("heap@")
    };
    let key = |o: &DataObject| {
        let site = o
            .site_frame()
            .and_then(|f| frames.get(f as usize))
            .map(|f| f.site_text());
        (o.name.clone(), site)
    };
    let mut totals: HashMap<(String, Option<String>), (u64, u64)> = HashMap::new();
    for o in objects.iter().filter(|o| eligible(o)) {
        let t = totals.entry(key(o)).or_default();
        t.0 += o.bytes;
        t.1 += o.allocations;
    }
    for o in objects.iter_mut().filter(|o| eligible(o)) {
        let (bytes, n) = totals[&key(o)];
        if n >= 2 && bytes / n < SMALL_BLOCK_BYTES {
            o.name = format!("{} ({n} small blocks)", o.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_block_sites_are_counted_over_their_objects() {
        let frames = vec![
            Frame {
                function: "LAMMPS_NS::PairLJCut::coeff(int, char**)".into(),
                module: "/x/liblammps.so.0".into(),
                offset: Some(0x2d6),
                ..Default::default()
            },
            Frame {
                function: "main".into(),
                module: "/x/lmp".into(),
                ..Default::default()
            },
        ];
        let heap = |name: &str, bytes: u64, allocations: u64, site: u32| DataObject {
            kind: ObjectKind::Heap,
            name: name.into(),
            alloc_path: vec![1, site],
            alloc_site: Some(1),
            bytes,
            allocations,
            ..Default::default()
        };
        let mut objects = vec![
            // Two call paths to one site: 1 + 2 blocks of 32 bytes.
            heap("heap@PairLJCut::coeff+0x2d6", 32, 1, 0),
            heap("heap@PairLJCut::coeff+0x2d6", 64, 2, 0),
            // A big block, a named variable, a single small block.
            heap("heap@main", 1 << 20, 2, 1),
            heap("rows[i]", 64, 2, 1),
        ];
        let mut single = heap("heap@PairLJCut::coeff+0x2d6", 32, 1, 0);
        single.alloc_path = vec![1, 1];
        single.name = "heap@lonely".into();
        objects.push(single);
        name_small_block_sites(&mut objects, &frames);
        let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "heap@PairLJCut::coeff+0x2d6 (3 small blocks)",
                "heap@PairLJCut::coeff+0x2d6 (3 small blocks)",
                "heap@main",
                "rows[i]",
                "heap@lonely",
            ]
        );
    }
}
