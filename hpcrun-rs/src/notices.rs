//! Notices the preload library left in the output directory
//! (`.hpcrun-notices`: a count, a tab and a text per line, appended by
//! every measured process): a measurement the program damaged or left
//! empty, with its cause and fix. The launcher prints each distinct text
//! once, with the number of threads that reported it (as a warning, or
//! as a note when the text opens with `note: `).

use std::collections::BTreeMap;
use std::path::Path;

/// File name, as the preload library writes it.
pub const FILE: &str = ".hpcrun-notices";

/// The distinct notices of `dir` with their summed counts.
pub fn read(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(dir.join(FILE)) else {
        return out;
    };
    for line in text.lines() {
        if let Some((n, notice)) = line.split_once('\t') {
            let n: u64 = n.parse().unwrap_or(1);
            *out.entry(notice.to_string()).or_default() += n;
        }
    }
    out
}

/// The lines to print for `dir`.
pub fn lines(dir: &Path) -> Vec<String> {
    read(dir)
        .into_iter()
        .map(|(notice, n)| {
            let threads = if n == 1 { "thread" } else { "threads" };
            match notice.strip_prefix("note: ") {
                Some(note) => format!("hpcrun-rs: note: {note} ({n} {threads})"),
                None => format!("hpcrun-rs: warning: {notice} ({n} {threads})"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_notices_are_summed() {
        let dir = std::env::temp_dir().join(format!("hpcrun-notices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(FILE),
            "1\tA: fix it\n2\tA: fix it\n1\tB\nnonsense\n",
        )
        .unwrap();
        assert_eq!(
            lines(&dir),
            [
                "hpcrun-rs: warning: A: fix it (3 threads)",
                "hpcrun-rs: warning: B (1 thread)"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
