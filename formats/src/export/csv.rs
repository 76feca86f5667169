//! The export as CSV: one row per object, function, region or
//! distribution of the view, with a header, the same rows (and filters)
//! as the JSON export's ([`build_with`](super::build_with)).

use crate::database::{Database, Dist, Frame};
use crate::views::{self, Thresholds};

use super::{region_kind, Options, View};

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn frame_text(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{}@{}:{}", f.function, file, line),
        _ => f.function_at(),
    }
}

/// The same rows as CSV, one per line, with a header.
pub fn to_csv(db: &Database, view: View, top: Option<usize>) -> String {
    to_csv_with(db, view, top, Options::default())
}

/// [`to_csv`] with `options`.
pub fn to_csv_with(db: &Database, view: View, top: Option<usize>, options: Options) -> String {
    let top = top.unwrap_or(usize::MAX);
    let metric_names: Vec<&str> = db.info.metrics.iter().map(|m| m.name.as_str()).collect();
    let mut out = String::new();
    match view {
        View::Data => {
            out.push_str("kind,name,bytes,allocations");
            for m in &metric_names {
                out.push(',');
                out.push_str(m);
            }
            out.push_str(
                ",share,alloc_path,first_touch_thread,alloc_site,misaligned_share,access_pattern,stride_bytes,stride_share\n",
            );
            for o in views::objects(db)
                .into_iter()
                .filter(|o| options.keeps_object(db, o.index))
                .take(top)
            {
                let path: Vec<String> = o.alloc_path.iter().map(|f| frame_text(f)).collect();
                let first_touch = o
                    .first_touch(db)
                    .map(|(t, _)| db.thread_label(t))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "{},{},{},{}",
                    o.kind.as_str(),
                    csv_field(o.name),
                    o.bytes,
                    o.allocations
                ));
                for v in &o.metrics {
                    out.push_str(&format!(",{v}"));
                }
                let access = crate::object_access::object_access(db, o.index, &o.metrics);
                let pattern = access.pattern.as_ref();
                let top = pattern.and_then(|p| p.strides.first());
                out.push_str(&format!(
                    ",{:.6},{},{},{},{},{},{},{}\n",
                    o.share,
                    csv_field(&path.join(" > ")),
                    csv_field(&first_touch),
                    csv_field(&o.alloc_site.map(frame_text).unwrap_or_default()),
                    opt_f64(access.misaligned.map(|m| m.1)),
                    pattern.map_or("", |p| match p.regularity {
                        crate::patterns::Regularity::Regular => "regular",
                        crate::patterns::Regularity::Irregular => "irregular",
                    }),
                    top.map(|s| s.bytes.to_string()).unwrap_or_default(),
                    opt_f64(top.map(|s| s.share)),
                ));
            }
        }
        View::Code => {
            out.push_str("function,module,file,line");
            for m in &metric_names {
                out.push(',');
                out.push_str(m);
            }
            out.push_str(",share\n");
            for f in views::functions(db)
                .into_iter()
                .filter(|f| options.keeps_module(f.module))
                .take(top)
            {
                out.push_str(&format!(
                    "{},{},{},{}",
                    csv_field(f.function),
                    csv_field(f.module),
                    csv_field(f.file.unwrap_or("")),
                    f.line.map(|l| l.to_string()).unwrap_or_default()
                ));
                for v in &f.metrics {
                    out.push_str(&format!(",{v}"));
                }
                out.push_str(&format!(",{:.6}\n", f.share));
            }
        }
        View::Bottleneck => {
            out.push_str("rank,region,kind,name,module,file,line");
            for m in &metric_names {
                out.push(',');
                out.push_str(m);
            }
            out.push_str(
                ",share,mem_time_share,code_cpu_samples,memory_bound,high_share,priority,advice,alloc_path\n",
            );
            for (i, r) in views::bottleneck(db, Thresholds::default())
                .into_iter()
                .filter(|r| !(options.hide_runtime && r.runtime))
                .take(top)
                .enumerate()
            {
                out.push_str(&format!(
                    "{},{},{},{},{},{},{}",
                    i + 1,
                    r.region.as_str(),
                    region_kind(r.region),
                    csv_field(r.name),
                    csv_field(r.module.unwrap_or("")),
                    csv_field(r.file.unwrap_or("")),
                    r.line.map(|l| l.to_string()).unwrap_or_default()
                ));
                for v in &r.metrics {
                    out.push_str(&format!(",{v}"));
                }
                let path: Vec<String> = r.alloc_path.iter().map(|f| frame_text(f)).collect();
                out.push_str(&format!(
                    ",{:.6},{},{},{},{},{},{},{}\n",
                    r.share,
                    opt_f64(r.mem_time_share),
                    r.code_cpu_samples,
                    r.memory_bound.map(|b| b.to_string()).unwrap_or_default(),
                    r.high_share,
                    r.quadrant.priority(),
                    csv_field(r.quadrant.advice()),
                    csv_field(&path.join(" > "))
                ));
            }
        }
        View::Threads => {
            out.push_str("scope,kind,name");
            for m in &metric_names {
                out.push(',');
                out.push_str(m);
            }
            out.push_str(",share,threads_count,threads_min,threads_max,threads_mean,threads_stddev,ranks_count,ranks_min,ranks_max,ranks_mean,ranks_stddev,thread_imbalance,rank_imbalance\n");
            for r in views::distributions(db)
                .into_iter()
                .filter(|r| !(options.hide_runtime && r.runtime))
                .take(top)
            {
                let kind = match r.scope {
                    views::Scope::Object(k) => k.as_str(),
                    _ => "",
                };
                out.push_str(&format!(
                    "{},{},{}",
                    csv_field(r.scope.as_str()),
                    kind,
                    csv_field(r.name)
                ));
                for v in &r.metrics {
                    out.push_str(&format!(",{v}"));
                }
                out.push_str(&format!(
                    ",{:.6},{},{},{},{}\n",
                    r.share,
                    dist_fields(r.threads),
                    dist_fields(r.ranks),
                    opt_f64(r.thread_imbalance()),
                    opt_f64(r.rank_imbalance())
                ));
            }
        }
    }
    out
}

fn opt_f64(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.6}")).unwrap_or_default()
}

fn dist_fields(d: Option<Dist>) -> String {
    match d {
        Some(d) => format!(
            "{},{},{},{:.6},{:.6}",
            d.count, d.min, d.max, d.mean, d.stddev
        ),
        None => ",,,,".to_string(),
    }
}
