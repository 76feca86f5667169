//! The detail pane: what the selected row is, its values, its bottleneck
//! quadrant and its distribution over threads and ranks; for data objects
//! also size, allocation site and the per-object measurements: offset
//! histogram, hot range ([`formats::advice::hot_range`]), threads, the
//! page x thread map ([`super::heatmap`]), first touch, NUMA local/remote
//! and NUMA advice ([`formats::advice::numa`]); what the database does not
//! carry is shown as "not measured", never invented.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use super::tree::{count, percent};
use super::Theme;
use crate::report::object_site;
use crate::state::tree::Node;
use crate::state::{AppState, Filter};
use formats::database::Dist;

/// `0 B`, `512 B`, `8.0 MiB`.
pub(crate) fn bytes(b: u64) -> String {
    formats::advice::bytes_text(b)
}

fn dist_text(d: &Option<Dist>, what: &str, none: &str) -> String {
    match d {
        Some(d) => format!(
            "{what}: {} · min {:.0} max {:.0} mean {:.0} sd {:.0}",
            d.count, d.min, d.max, d.mean, d.stddev
        ),
        None => format!("{what}: {none}"),
    }
}

/// Width the detail lines are laid out for by [`lines`] (the page x
/// thread map's columns).
pub const DEFAULT_WIDTH: usize = 60;

/// The detail lines of the selected row for a pane [`DEFAULT_WIDTH`]
/// characters wide (also used by tests).
pub fn lines(app: &AppState) -> Vec<String> {
    lines_in(app, DEFAULT_WIDTH)
}

/// The detail lines of the selected row for a pane `width` characters
/// wide.
pub fn lines_in(app: &AppState, width: usize) -> Vec<String> {
    let model = &app.model;
    let pane = app.pane();
    let Some(id) = pane.selected_id() else {
        return vec!["(nothing selected)".into()];
    };
    let item = &pane.items[id as usize];
    let mut out = Vec::new();
    if let Some(o) = item.object.filter(|_| matches!(item.node, Node::Object(_))) {
        let obj = &model.db.objects[o as usize];
        // A row that stands for several call paths to one site: their
        // allocations and bytes together.
        let members = model.row_objects(o);
        let of_all = |f: fn(&formats::database::DataObject) -> u64| -> u64 {
            members
                .iter()
                .map(|&m| f(&model.db.objects[m as usize]))
                .sum()
        };
        let merged = formats::database::DataObject {
            kind: obj.kind,
            allocations: of_all(|o| o.allocations),
            bytes: of_all(|o| o.bytes),
            blocks: obj.blocks,
            ..Default::default()
        };
        let allocs = match (merged.allocations, merged.blocks_text()) {
            (0, _) => String::new(),
            (1, _) => " · 1 allocation".to_string(),
            (_, Some(blocks)) => format!(" · {blocks}"),
            (n, None) => format!(" · {n} allocations"),
        };
        let peak = match obj.blocks {
            Some(b) if b.peak_live > 1 => format!(
                " · at most {} live at once",
                formats::notes::thousands(b.peak_live)
            ),
            _ => String::new(),
        };
        let paths = match members.len() {
            1 => String::new(),
            n => format!(" · {n} allocation call paths"),
        };
        out.push(format!(
            "{} · {} · {}{allocs}{peak}{paths}",
            obj.name,
            obj.kind.as_str(),
            bytes(of_all(|o| o.bytes))
        ));
        if !obj.alloc_path.is_empty() {
            let path: Vec<_> = obj
                .alloc_path
                .iter()
                .map(|&f| &model.db.frames[f as usize])
                .collect();
            let site = obj.site_frame().map(|f| &model.db.frames[f as usize]);
            out.push(format!("allocated at: {}", object_site(site, &path)));
            if let Some(label) = &obj.label {
                out.push(format!("named by the program: {label}"));
            }
        }
    } else if let Some(f) = item.frame {
        let frame = &model.db.frames[f as usize];
        out.push(format!(
            "{}{}",
            frame.function,
            if frame.inlined { " (inlined)" } else { "" }
        ));
        match (&frame.file, frame.line) {
            (Some(file), Some(line)) => out.push(format!("{file}:{line}")),
            (Some(file), None) => out.push(file.clone()),
            _ => out.push("no source location".into()),
        }
        out.push(format!("module: {}", frame.module));
    } else {
        out.push(item.label.clone());
    }
    if item.has_metrics() {
        // The primary metric first; metrics this tree does not carry
        // (cpu_samples in the data tree) are left out.
        let order = std::iter::once(model.primary)
            .chain((0..model.columns).filter(|&m| m != model.primary));
        // mem:soft's per-rule counts (`rule_*`) go on one line of their own.
        let mut rules = Vec::new();
        for m in order {
            let total = pane.totals.get(m).copied().unwrap_or(0);
            if total == 0 && m != model.primary {
                continue;
            }
            let (i, e) = (item.inc[m], item.exc[m]);
            if let Some(rule) = model.metric_name(m).strip_prefix("rule_") {
                if i > 0 {
                    rules.push(format!("{} {}", rule.replace('_', " "), count(i)));
                }
                continue;
            }
            out.push(format!(
                "{}: {} ({}) · excl {}",
                model.metric_name(m),
                count(i),
                percent(i, total),
                count(e),
            ));
        }
        if !rules.is_empty() {
            out.push(format!(
                "attributed by (mem:soft rules): {}",
                rules.join(" · ")
            ));
        }
        let b = pane.bottleneck(model, id);
        let mem = b
            .mem
            .map(|m| format!("{:.0}%", 100.0 * m))
            .unwrap_or_else(|| "n/a (no cpu_samples)".into());
        out.push(format!(
            "{}: memory-bound proxy {mem}, share {:.1}%",
            b.quadrant.advice(),
            100.0 * b.share,
        ));
        let dist = match item.dist_node {
            Some(Node::Code(n)) => Some(&model.db.code.nodes[n as usize]),
            Some(Node::Data(n)) => Some(&model.db.data.nodes[n as usize]),
            _ => None,
        };
        let (threads, ranks) = match dist {
            Some(node) => (&node.threads, &node.ranks),
            None => (&None, &None),
        };
        let info = &model.db.info;
        let thread_none = if info.threads <= 1 {
            "one thread".to_string()
        } else {
            "not stored for this row".to_string()
        };
        let rank_none = if info.ranks.is_empty() {
            "not an MPI run".to_string()
        } else {
            "not stored for this row".to_string()
        };
        out.push(dist_text(threads, "threads", &thread_none));
        out.push(dist_text(ranks, "ranks", &rank_none));
        match app.filter {
            Filter::All => {}
            Filter::Rank(r) => match dist {
                Some(node) if !node.by_rank.is_empty() || !info.ranks.is_empty() => {
                    let tree = match item.dist_node {
                        Some(Node::Code(_)) => &model.db.code,
                        _ => &model.db.data,
                    };
                    let total = tree.nodes.first().map(|n| n.rank_value(r)).unwrap_or(0);
                    let v = node.rank_value(r);
                    out.push(format!(
                        "rank {r} alone: {} {} ({} of rank {r})",
                        count(v),
                        model.metric_name(model.primary),
                        percent(v, total)
                    ));
                }
                _ => out.push(format!("rank {r} alone: not stored for this row")),
            },
            Filter::Thread(t) => match item.object.filter(|_| matches!(item.node, Node::Object(_)))
            {
                Some(o) => {
                    let obj = &model.db.objects[o as usize];
                    let v = obj.thread_value(t, model.primary);
                    let i = item.inc[model.primary];
                    out.push(format!(
                        "{} alone: {} {} ({} of this object)",
                        model.db.thread_label(t),
                        count(v),
                        model.metric_name(model.primary),
                        percent(v, i)
                    ));
                }
                None => out.push(format!(
                    "{} alone: stored for data objects only; see the thread distribution above",
                    model.db.thread_label(t)
                )),
            },
        }
    }
    if let Some(o) = item.object.filter(|_| matches!(item.node, Node::Object(_))) {
        object_lines(app, o, &item.inc, width, &mut out);
    }
    out
}

/// Eight levels of a bar, lowest first.
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Width of the histogram line, in buckets.
const HISTOGRAM_WIDTH: usize = 32;

/// The histogram as one line of bar characters (`HISTOGRAM_WIDTH` wide at
/// most; finer layouts are summed into that many columns), and the share
/// of the hottest tenth of the object.
pub fn histogram_text(h: &formats::database::ObjectHistogram, bytes: u64) -> (String, String) {
    let n = h.layout.buckets(bytes.max(1)).max(1) as usize;
    let width = n.min(HISTOGRAM_WIDTH);
    let mut cols = vec![0u64; width];
    for &(b, c) in &h.counts {
        let col = ((b as usize).min(n - 1) * width) / n;
        cols[col] += c;
    }
    let max = cols.iter().copied().max().unwrap_or(0).max(1);
    let bar: String = cols
        .iter()
        .map(|&c| {
            if c == 0 {
                ' '
            } else {
                BARS[((c * 8 - 1) / max).min(7) as usize]
            }
        })
        .collect();
    let total: u64 = cols.iter().sum();
    // Share of the accesses in the first and in the hottest tenth.
    let tenth = (width / 10).max(1);
    let first: u64 = cols[..tenth].iter().sum();
    let hottest = cols
        .windows(tenth)
        .enumerate()
        .map(|(i, w)| (w.iter().sum::<u64>(), i))
        .max()
        .unwrap_or((0, 0));
    let pct = |v: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * v as f64 / total as f64
        }
    };
    let summary = format!(
        "first {:.0}% of the object: {:.0}% of accesses · hottest {:.0}% (from {:.0}%): {:.0}%",
        100.0 * tenth as f64 / width as f64,
        pct(first),
        100.0 * tenth as f64 / width as f64,
        100.0 * hottest.1 as f64 / width as f64,
        pct(hottest.0)
    );
    (bar, summary)
}

/// Per-object measurements: histogram, threads, first touch, NUMA,
/// access patterns.
fn object_lines(app: &AppState, o: u32, inc: &[u64], width: usize, out: &mut Vec<String>) {
    let model = &app.model;
    let db = &model.db;
    let obj = &db.objects[o as usize];
    match &obj.histogram {
        Some(h) => {
            let (bar, summary) = histogram_text(h, obj.bytes);
            out.push(format!("offset histogram |{bar}|"));
            out.push(format!("  {summary}"));
            out.extend(hot_range_line(obj));
        }
        // Many blocks of unknown extent: no one offset space.
        None if obj.name == "<small heap objects>" => {
            out.push("offset histogram: none (the blocks of this row have no known start)".into())
        }
        None => out.push("offset histogram: not measured (no recovered address in it)".into()),
    }
    // What this bucket holds, and why: small blocks the profiler could
    // not track (by reason), or none (blocks allocated before it was
    // ready or on threads it did not measure).
    if obj.name == "<small heap objects>" {
        out.push(
            formats::notes::untracked_blocks(&db.info.stats.untracked_blocks).unwrap_or_else(
                || {
                    "small heap blocks allocated before the profiler was ready or on a thread it did not measure (every other small block is tracked at its site)"
                        .into()
                },
            ),
        );
    }
    if !obj.by_thread.is_empty() {
        let p = model.primary;
        let total: u64 = obj
            .by_thread
            .iter()
            .map(|(_, v)| v.get(p).copied().unwrap_or(0))
            .sum();
        let mut rows: Vec<(u64, u32)> = obj
            .by_thread
            .iter()
            .map(|(t, v)| (v.get(p).copied().unwrap_or(0), *t))
            .collect();
        rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let shown: Vec<String> = rows
            .iter()
            .take(6)
            .map(|&(v, t)| format!("{} {}", db.thread_label(t), percent(v, total)))
            .collect();
        let more = if rows.len() > 6 {
            format!(" (+{} more)", rows.len() - 6)
        } else {
            String::new()
        };
        out.push(format!("by thread: {}{more}", shown.join(", ")));
    }
    out.extend(super::heatmap::lines(db, obj, width));
    let first_touch = db
        .metric_column("first_touch")
        .and_then(|c| obj.top_thread(c));
    match first_touch {
        Some((t, share)) => out.push(format!(
            "first touch: {} ({:.0}% of the sampled pages)",
            db.thread_label(t),
            100.0 * share
        )),
        None if db.metric_column("first_touch").is_some() => {
            out.push("first touch: no sampled page fault in it".into())
        }
        None => out.push("first touch: not measured (hpcrun-rs -e page-faults)".into()),
    }
    match (
        db.metric_column("numa_local"),
        db.metric_column("numa_remote"),
    ) {
        (Some(l), Some(r)) => {
            let v = |c: usize| inc.get(c).copied().unwrap_or(0);
            let (l, r) = (v(l), v(r));
            out.push(format!(
                "NUMA: {} local, {} remote ({} remote)",
                count(l),
                count(r),
                percent(r, l + r)
            ));
        }
        _ => out.push(
            "NUMA local/remote: not measured (hpcrun-rs --numa, or a multi-node machine)".into(),
        ),
    }
    if let Some(f) = model.numa.iter().find(|f| f.object == o) {
        out.extend(numa_lines(f));
    }
    // How it was accessed: misalignment, stride (databases from before
    // these measurements say nothing).
    if crate::findings::measured(db) {
        out.extend(crate::findings::lines(db, o, inc));
    }
}

/// "hot range: 90% of its samples in bytes 0 B-8.0 MiB (of 64.0 MiB)":
/// the smallest byte range holding 90% of the object's sampled accesses.
pub fn hot_range_line(obj: &formats::database::DataObject) -> Option<String> {
    let (start, end, held) = formats::advice::hot_range(obj, 0.9)?;
    let unit = (obj.bytes / obj.allocations.max(1)).max(1);
    let each = if obj.allocations > 1 {
        format!(", in each of its {} allocations", obj.allocations)
    } else {
        String::new()
    };
    Some(format!(
        "hot range: {:.0}% of its samples in bytes {}-{} (of {}{each})",
        100.0 * held,
        bytes(start),
        bytes(end),
        bytes(unit)
    ))
}

/// The NUMA advice and its evidence in plain words.
pub fn numa_lines(f: &formats::advice::NumaFinding) -> Vec<String> {
    let shares: Vec<String> = f
        .thread_shares
        .iter()
        .take(4)
        .map(|(t, s)| format!("{t} {:.0}%", 100.0 * s))
        .collect();
    let more = if f.thread_shares.len() > 4 {
        format!(" and {} more", f.thread_shares.len() - 4)
    } else {
        String::new()
    };
    let mut evidence = format!(
        "  evidence: accesses by {}{more} ({} threads)",
        shares.join(", "),
        f.threads
    );
    if let Some(o) = f.ownership {
        evidence.push_str(&format!(
            "; {:.0}% of the accesses fall in parts used by one thread",
            100.0 * o
        ));
    }
    match (f.numa_local, f.numa_remote) {
        (Some(l), Some(r)) => evidence.push_str(&format!(
            "; {} local, {} remote ({} remote)",
            count(l),
            count(r),
            percent(r, l + r)
        )),
        _ => evidence.push_str("; local/remote not measured"),
    }
    vec![
        format!(
            "NUMA: first touched by {} ({:.0}% of pages), {:.0}% of accesses by other threads: {}",
            f.first_touch_thread,
            100.0 * f.first_touch_share,
            100.0 * f.accessed_by_others,
            f.action.advice()
        ),
        evidence,
    ]
}

/// Draws the detail pane; returns how far it can scroll (wrapped lines
/// beyond the pane's height) and its height, for PgUp/PgDn.
pub(crate) fn draw(
    frame: &mut Frame<'_>,
    area: Rect,
    app: &AppState,
    theme: Theme,
    focused: bool,
) -> (usize, usize) {
    let block = Block::bordered()
        .title(Span::styled(" Detail ", theme.border(focused)))
        .border_style(theme.border(focused));
    let width = area.width.saturating_sub(2) as usize;
    let text: Vec<Line<'_>> = lines_in(app, width)
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                Line::from(Span::styled(l, theme.header()))
            } else if l.ends_with("not measured") || l.contains("unavailable") {
                Line::from(Span::styled(l, theme.dim()))
            } else {
                Line::from(l)
            }
        })
        .collect();
    let height = area.height.saturating_sub(2) as usize;
    let paragraph = Paragraph::new(text).wrap(Wrap { trim: false });
    let max_scroll = paragraph.line_count(width as u16).saturating_sub(height);
    let scroll = app.detail_scroll.min(max_scroll).min(u16::MAX as usize) as u16;
    frame.render_widget(paragraph.block(block).scroll((scroll, 0)), area);
    (max_scroll, height)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use crate::state::model::Model;
    use formats::measurement::MetricInfo;

    fn detail(db: formats::database::Database) -> Vec<String> {
        let app = AppState::new(Model::new(db, None));
        assert_eq!(app.pane().selected_item().unwrap().label, "C");
        lines(&app)
    }

    #[test]
    fn hot_range_and_heat_map_of_c() {
        let l = detail(fixtures::abc());
        // C: 90 accesses in each of buckets 0-7, 6 in the 24 others (864):
        // 0-17 hold 780 (90.3%); buckets of 64,000,000 / 32 bytes.
        assert!(
            l.contains(&"hot range: 90% of its samples in bytes 0 B-34.3 MiB (of 61.0 MiB)".into()),
            "{l:#?}"
        );
        let map = l
            .iter()
            .position(|x| x.starts_with("page x thread map"))
            .unwrap();
        let half = |c: char| c.to_string().repeat(16);
        assert_eq!(
            l[map + 1],
            format!("thread 0 |{}{}| 50%", half('█'), half(' '))
        );
        assert_eq!(
            l[map + 2],
            format!("thread 1 |{}{}| 50%", half(' '), half('█'))
        );
        assert!(l[map + 3].contains("░▒▓█"), "{l:#?}");
        // No first-touch data in this database: no NUMA advice.
        assert!(
            !l.iter().any(|x| x.starts_with("NUMA: first touched")),
            "{l:#?}"
        );
    }

    #[test]
    fn numa_advice_with_its_evidence() {
        let mut db = fixtures::abc();
        db.info.metrics.push(MetricInfo {
            name: "first_touch".into(),
            unit: "pages".into(),
            description: String::new(),
        });
        // Thread 0 first-touched C's pages; thread 1 made 60% of its
        // accesses, each thread in its own half.
        for o in &mut db.objects {
            for (t, v) in &mut o.by_thread {
                v.push(if *t == 0 { 50 } else { 0 });
            }
        }
        db.validate().unwrap();
        let l = detail(db).join("\n");
        assert!(
            l.contains(
                "NUMA: first touched by thread 0 (100% of pages), 60% of accesses by other threads: initialise in parallel"
            ),
            "{l}"
        );
        assert!(
            l.contains("evidence: accesses by thread 1 60%, thread 0 40% (2 threads); 100% of the accesses fall in parts used by one thread; local/remote not measured"),
            "{l}"
        );
    }
}
