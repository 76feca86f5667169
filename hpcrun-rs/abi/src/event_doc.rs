//! What each event does, in one table: `hpcrun-rs --help`'s EVENTS
//! section ([`help_section`]), `hpcrun-rs --list-events` (each event's
//! [`EventDoc::what`]) and docs/GUIDE.md's event table ([`guide_table`],
//! written between the `<!-- table: events -->` markers by `just
//! guide-events` and checked by hpcrun-rs/tests/events_docs.rs) are all
//! written from [`DOCS`].
//!
//! ```
//! use hpcrun_abi::event::Event;
//! use hpcrun_abi::event_doc::{doc, help_section};
//! assert_eq!(doc(Event::MemSoft).usage(), "mem:soft[@NS]");
//! assert!(help_section(80).lines().all(|l| l.chars().count() <= 80));
//! ```

use crate::event::{
    Event, DEFAULT_PAGE_FAULT_PERIOD, DEFAULT_SOFT_PERIOD_NS, DEFAULT_WATCH_EVERY,
    MIN_TIMER_PERIOD_NS,
};

/// One event's description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventDoc {
    pub event: Event,
    /// What it measures, in one sentence (no line breaks).
    pub what: &'static str,
    /// Which machines run it.
    pub runs_on: &'static str,
}

/// Every event, in the order of `--help`, `--list-events` and the GUIDE.
pub const DOCS: [EventDoc; 7] = [
    EventDoc {
        event: Event::MemSoft,
        what: "software memory-access sampling: a timer (--timer) interrupts the thread, the code \
               before the interrupted instruction is decoded, the access that stalled is found \
               (walking back from a consumer to its load; divides, FP chains and constants are \
               compute) and its data address is computed from the registers; also records \
               misaligned accesses and strides per access site (the same decode, cached per \
               instruction)",
        runs_on: "everywhere Linux has software perf events: VMs, containers, CI runners; no \
                  hardware PMU needed",
    },
    EventDoc {
        event: Event::CpuTime,
        what: "plain timer sampling on the same timer, code-centric only (no data addresses)",
        runs_on: "everywhere mem:soft runs",
    },
    EventDoc {
        event: Event::MemLatency,
        what: "hardware load sampling: Intel PEBS mem-loads above 30 cycles of latency (every N \
               such loads), AMD IBS op sampling (every N ops); where the machine has no such PMU it falls back to mem:soft with a note on stderr \
               (--strict: an error)",
        runs_on: "machines whose PMU is visible in /sys/bus/event_source/devices (not VMs without \
                  PMU passthrough); Arm SPE is detected but its samples are not read yet",
    },
    EventDoc {
        event: Event::MemStores,
        what: "hardware store sampling: Intel PEBS mem-stores, AMD IBS op; the same fallback as \
               mem:latency",
        runs_on: "as mem:latency",
    },
    EventDoc {
        event: Event::PageFaults,
        what: "minor page faults of user code (first touches, copies on write) with their data \
               addresses (every fault costs about 35 us, so the default samples about 2% of a \
               fault-bound phase; @1 gives exact page counts): which thread first touched each \
               object's pages (first_touch, in 4 KiB pages: a transparent huge page's one fault \
               counts its 512, each for the object it holds) and from where; alone or next to a \
               timer source (-e mem:soft -e \
               page-faults)",
        runs_on: "everywhere mem:soft runs",
    },
    EventDoc {
        event: Event::Sharing,
        what: "true and false sharing between threads per object and cache line: a sample arms \
               hardware watchpoints on its cache line in up to 4 other threads (about 2 us per \
               armed thread, one signal per trap); runs on a memory source's samples (adds \
               mem:soft when none is given, refuses cpu-time)",
        runs_on: "x86-64 with /sys/bus/event_source/devices/breakpoint (every Linux x86-64 \
                  kernel, VMs included)",
    },
    EventDoc {
        event: Event::Reuse,
        what: "temporal reuse per object: a watchpoint on the sampled word in the same thread \
               times its next touch (1 debug register, one signal per trap); runs on a memory \
               source's samples, as sharing",
        runs_on: "as sharing",
    },
];

/// The description of `event`.
pub fn doc(event: Event) -> &'static EventDoc {
    DOCS.iter()
        .find(|d| d.event == event)
        .expect("every event has a description")
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl EventDoc {
    /// `mem:soft[@NS]`, `page-faults[@N]`: the name and what its period
    /// counts.
    pub fn usage(&self) -> String {
        let unit = match self.event.period_unit() {
            "ns" => "NS",
            _ => "N",
        };
        format!("{}[@{unit}]", self.event.name())
    }

    /// The period without `@`, in words, with the default's number.
    pub fn default_period(&self) -> String {
        let name = self.event.name();
        match self.event {
            Event::MemSoft | Event::CpuTime => format!(
                "every {} ns = {} ms of each thread's user CPU time (at least {} ns)",
                thousands(DEFAULT_SOFT_PERIOD_NS),
                DEFAULT_SOFT_PERIOD_NS as f64 / 1e6,
                thousands(MIN_TIMER_PERIOD_NS),
            ),
            Event::PageFaults => format!(
                "every {}th fault ({name}@1: every fault)",
                DEFAULT_PAGE_FAULT_PERIOD
            ),
            Event::MemLatency | Event::MemStores => {
                "set by the PMU (PEBS 10,007 loads or stores, IBS 262,144 ops)".to_string()
            }
            Event::Sharing | Event::Reuse => format!(
                "every{} sample ({name}@N: every N-th)",
                if DEFAULT_WATCH_EVERY == 1 {
                    String::new()
                } else {
                    format!(" {DEFAULT_WATCH_EVERY}th")
                }
            ),
        }
    }
}

/// `text` broken into lines of at most `width` characters at spaces (a
/// longer word gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Column of the descriptions in [`help_section`].
const HELP_INDENT: usize = 20;

/// The EVENTS section of `hpcrun-rs --help`, lines of at most `width`
/// characters: per event its usage, what it measures and its default.
pub fn help_section(width: usize) -> String {
    let text_width = width.saturating_sub(HELP_INDENT).max(20);
    let mut out = String::from("EVENTS:\n");
    for d in &DOCS {
        let mut lines = wrap(&format!("{}.", d.what), text_width);
        lines.extend(wrap(
            &format!("Default: {}.", d.default_period()),
            text_width,
        ));
        for (i, line) in lines.iter().enumerate() {
            let lead = if i == 0 {
                format!("  {:<w$}", d.usage(), w = HELP_INDENT - 2)
            } else {
                " ".repeat(HELP_INDENT)
            };
            out.push_str(&format!("{lead}{line}\n"));
        }
    }
    for line in wrap(
        "hpcrun-rs --list-events tells what this machine supports, and why not.",
        width.saturating_sub(2),
    ) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// docs/GUIDE.md's event table (Markdown, one row per event).
pub fn guide_table() -> String {
    let mut out = String::from("| event | what | default period | where |\n|---|---|---|---|\n");
    for d in &DOCS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            d.usage(),
            d.what,
            d.default_period(),
            d.runs_on
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_once_and_the_help_fits_80_columns() {
        for e in Event::ALL {
            assert_eq!(DOCS.iter().filter(|d| d.event == e).count(), 1, "{e}");
        }
        let help = help_section(80);
        for line in help.lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
        for d in &DOCS {
            assert!(help.contains(&format!("  {} ", d.usage())), "{help}");
            assert!(!d.what.contains('|') && !d.runs_on.contains('|'));
        }
        assert_eq!(thousands(2_000_000), "2,000,000");
        assert_eq!(thousands(256), "256");
    }
}
