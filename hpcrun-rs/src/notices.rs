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

/// Name prefix of the files that take a process's messages when it has
/// no standard error of its own (`hpcrun-rs.messages.<pid>`, written by
/// the preload library).
pub const MESSAGES_PREFIX: &str = "hpcrun-rs.messages.";

/// The lines that point at `dir`'s message files, if any.
pub fn message_file_lines(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(MESSAGES_PREFIX))
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            format!(
                "hpcrun-rs: messages of a process whose standard error was gone (closed by the program) are in {}",
                f.display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_files_are_pointed_at() {
        let dir = std::env::temp_dir().join(format!("hpcrun-messages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("hpcrun-rs.messages.42"), "hpcrun-rs: x\n").unwrap();
        std::fs::write(dir.join("a.hpcrun"), "").unwrap();
        let lines = message_file_lines(&dir);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].ends_with("hpcrun-rs.messages.42"), "{lines:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
