//! Prints a summary of a measurement file: `cargo run -p formats --example dump -- FILE`.

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).expect("read");
        match formats::measurement::ThreadProfile::from_bytes(&bytes) {
            Ok(p) => {
                println!(
                    "{path}: pid {} tid {} index {}",
                    p.process.pid, p.thread.tid, p.thread.index
                );
                println!("  events {:?}", p.events);
                println!("  stats {:?}", p.stats);
                println!(
                    "  nodes: code {} heap {} static {} unknown {}",
                    p.code.nodes.len(),
                    p.heap.nodes.len(),
                    p.statics_tree.nodes.len(),
                    p.unknown.nodes.len()
                );
                for (i, s) in p.alloc_sites.iter().enumerate() {
                    println!(
                        "  site {i}: {:x?} allocs {} bytes {}",
                        s.frames, s.allocations, s.bytes
                    );
                }
                for a in &p.allocations {
                    println!(
                        "  allocation {:#x} size {} site {} freed {}",
                        a.address,
                        a.size,
                        a.site,
                        a.free_unix_ns.is_some()
                    );
                }
                for st in &p.object_stats {
                    for site in &st.sites {
                        println!("  {:?} site {:#x}: {:?}", st.object, site.ip, site.counts);
                    }
                }
                for s in &p.statics {
                    println!("  static {} {:#x} {}", s.name, s.address, s.size);
                }
                let mut leaves: Vec<(u64, Vec<u64>)> = p
                    .code
                    .nodes
                    .iter()
                    .filter_map(|n| match n.key {
                        formats::measurement::NodeKey::Call(a)
                            if n.metrics.iter().any(|&m| m > 0) =>
                        {
                            Some((a, n.metrics.clone()))
                        }
                        _ => None,
                    })
                    .collect();
                leaves.sort();
                for (a, m) in leaves {
                    println!("  code leaf {a:#x}: {m:?}");
                }
                for (name, tree) in [
                    ("heap", &p.heap),
                    ("static", &p.statics_tree),
                    ("unknown", &p.unknown),
                ] {
                    let inc = {
                        let mut v: Vec<u64> = tree
                            .nodes
                            .iter()
                            .map(|n| n.metrics.first().copied().unwrap_or(0))
                            .collect();
                        for i in (1..v.len()).rev() {
                            let p = tree.nodes[i].parent as usize;
                            v[p] += v[i];
                        }
                        v
                    };
                    for (i, n) in tree.nodes.iter().enumerate() {
                        if let formats::measurement::NodeKey::Object(o) = n.key {
                            println!("  {name} object {o:?}: {} samples", inc[i]);
                        }
                    }
                }
            }
            Err(e) => println!("{path}: {e}"),
        }
    }
}
