//! The first truth: Valgrind DHAT's heap access volume per allocation site.
//!
//! `valgrind --tool=dhat --fullpath-after= --dhat-out-file=F PROGRAM`
//! writes one record ("program point", `pps`) per allocation call stack
//! with the bytes read (`rb`) and written (`wb`) in the blocks allocated
//! there, over the whole run. Frames are strings in `ftbl`, such as
//! `0x1090C9: main (/work/x/gather.c:38)` or `0x48417B4: malloc (in
//! /usr/libexec/valgrind/vgpreload_dhat-amd64-linux.so)`. DHAT counts every
//! access the program makes, whatever it costs: it is access volume, not
//! time.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// One source position of a call stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub function: String,
    /// Source file as the debug information names it (absolute with
    /// `--fullpath-after=` when the program was compiled from a directory).
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl Frame {
    /// Parses DHAT's `ADDR: FUNCTION (FILE:LINE)` or `ADDR: FUNCTION (in
    /// OBJECT)`; just `[root]` has no address.
    pub fn parse(s: &str) -> Frame {
        let rest = s.split_once(": ").map_or(s, |(_, r)| r);
        let (function, place) = match rest.rfind(" (") {
            Some(i) if rest.ends_with(')') => (&rest[..i], &rest[i + 2..rest.len() - 1]),
            _ => (rest, ""),
        };
        let (file, line) = match place.rsplit_once(':') {
            Some((f, l)) if !place.starts_with("in ") => match l.parse() {
                Ok(l) => (Some(f.to_string()), Some(l)),
                Err(_) => (None, None),
            },
            _ => (None, None),
        };
        Frame {
            function: function.to_string(),
            file,
            line,
        }
    }

    /// The site key of a frame in the program's own code (see [`own_code`]).
    pub fn own_key(&self) -> Option<String> {
        match (&self.file, self.line) {
            (Some(f), Some(l)) if own_code(f) => Some(site_key(f, l)),
            _ => None,
        }
    }
}

/// Whether a source file is the program's own: an absolute path outside
/// the system's directories. glibc's sources appear relative
/// (`libio/./libio/genops.c`), the C++ library's headers under
/// `/usr/include`.
pub fn own_code(file: &str) -> bool {
    file.starts_with('/') && !file.starts_with("/usr/") && !file.starts_with("/lib")
}

/// How an allocation site is named on both sides: the file's base name and
/// the line (`gather.c:38`); directories differ between DWARF, Valgrind
/// and hpcprof-rs.
pub fn site_key(file: &str, line: u32) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    format!("{base}:{line}")
}

/// The variable a source line assigns (`int *index = malloc(...)` ->
/// `index`), to name objects the profiler did not see; `None` if the file
/// cannot be read or the line assigns nothing.
pub fn source_name(file: &str, line: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let l = text.lines().nth(line.checked_sub(1)? as usize)?;
    let eq = l.find('=')?;
    if l[eq + 1..].starts_with('=') {
        return None;
    }
    let lhs = l[..eq]
        .trim_end()
        .trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_');
    let start = lhs
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let name = &lhs[start..];
    (!name.is_empty()).then(|| name.to_string())
}

/// One allocation call stack's totals.
#[derive(Debug, Clone)]
pub struct Record {
    /// Site keys of the stack's frames in the program's own code,
    /// innermost (nearest the allocator) first.
    pub own: Vec<String>,
    /// The same frames' source files as DHAT names them.
    pub own_files: Vec<String>,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// What identifies a truth run: the command and the program's size and
/// modification time. Stored beside the outputs; a later harness run with
/// the same stamp reuses them.
pub fn stamp(command: &[String]) -> String {
    let meta = std::fs::metadata(&command[0]).ok();
    let mtime = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}\n{} {}\n",
        command.join(" "),
        meta.map_or(0, |m| m.len()),
        mtime
    )
}

/// [`run`], or the records of an earlier run in `dir` with the same
/// [`stamp`] unless `fresh`.
pub fn cached(command: &[String], dir: &Path, fresh: bool) -> Result<Vec<Record>> {
    let stamp_file = dir.join("dhat.stamp");
    let want = stamp(command);
    if !fresh && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(want.as_str()) {
        if let Ok(text) = std::fs::read_to_string(dir.join("dhat.json")) {
            return parse(&text);
        }
    }
    let records = run(command, dir)?;
    std::fs::write(&stamp_file, want)?;
    Ok(records)
}

/// Runs `command` (program first) under DHAT in `dir`; returns the records.
pub fn run(command: &[String], dir: &Path) -> Result<Vec<Record>> {
    let out = dir.join("dhat.json");
    let _ = std::fs::remove_file(&out);
    let status = Command::new("valgrind")
        .args(["--tool=dhat", "--fullpath-after=", "--log-file=/dev/null"])
        .arg(format!("--dhat-out-file={}", out.display()))
        .args(command)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .context("cannot run valgrind (apt-get install valgrind)")?;
    // Some programs exit non-zero after a complete run (XSBench with a
    // non-default lookup count: "invalid checksum"): the output decides.
    if !status.success() {
        eprintln!("truth: note: {} under DHAT: {status}", command.join(" "));
    }
    if !out.is_file() {
        bail!(
            "valgrind --tool=dhat {}: {status}, no output",
            command.join(" ")
        );
    }
    let text = std::fs::read_to_string(&out).with_context(|| format!("{}", out.display()))?;
    parse(&text)
}

/// Parses a DHAT (`dhatFileVersion` 2, heap mode) output file.
pub fn parse(text: &str) -> Result<Vec<Record>> {
    let v: serde_json::Value = serde_json::from_str(text).context("DHAT output is not JSON")?;
    if v["mode"] != "heap" {
        bail!("DHAT output is not in heap mode: {}", v["mode"]);
    }
    let frames: Vec<Frame> = v["ftbl"]
        .as_array()
        .context("DHAT output without ftbl")?
        .iter()
        .map(|f| Frame::parse(f.as_str().unwrap_or("")))
        .collect();
    let num = |p: &serde_json::Value, k: &str| p[k].as_u64().unwrap_or(0);
    let mut records = Vec::new();
    for p in v["pps"].as_array().context("DHAT output without pps")? {
        let (own, own_files) = p["fs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| {
                let f = frames.get(i.as_u64()? as usize)?;
                Some((f.own_key()?, f.file.clone()?))
            })
            .unzip();
        records.push(Record {
            own,
            own_files,
            read_bytes: num(p, "rb"),
            write_bytes: num(p, "wb"),
        });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_with_and_without_lines() {
        let f = Frame::parse("0x1090C9: main (/work/x/gather.c:38)");
        assert_eq!(f.function, "main");
        assert_eq!(f.own_key().as_deref(), Some("gather.c:38"));
        let f = Frame::parse("0x48417B4: malloc (in /usr/libexec/valgrind/vgpreload_dhat.so)");
        assert_eq!(
            (f.function.as_str(), f.file, f.line),
            ("malloc", None, None)
        );
        let f = Frame::parse("0x48D28CB: _IO_file_doallocate (libio/./libio/filedoalloc.c:101)");
        assert_eq!(f.line, Some(101));
        assert_eq!(f.own_key(), None);
        let f = Frame::parse("0x10A0: std::vector<int, std::allocator<int> >::vector(unsigned long) (/usr/include/c++/12/bits/stl_vector.h:557)");
        assert_eq!(f.own_key(), None);
        assert_eq!(Frame::parse("[root]").function, "[root]");
    }

    #[test]
    fn source_names() {
        let f = std::env::temp_dir().join(format!("truth-name-{}.c", std::process::id()));
        std::fs::write(
            &f,
            "int *index = malloc(n);\n  m_x.resize(n);\n  m_dx = Allocate<Real_t>(n) ;\n",
        )
        .unwrap();
        let f = f.to_str().unwrap();
        assert_eq!(source_name(f, 1).as_deref(), Some("index"));
        assert_eq!(source_name(f, 2), None);
        assert_eq!(source_name(f, 3).as_deref(), Some("m_dx"));
        assert_eq!(source_name(f, 9), None);
        let _ = std::fs::remove_file(f);
    }

    #[test]
    fn records_keep_own_frames_innermost_first() {
        let text = r#"{"dhatFileVersion":2,"mode":"heap","pps":[
            {"tb":64,"tbk":2,"rb":10,"wb":20,"fs":[1,2,3]}],
            "ftbl":["[root]","0x1: malloc (in /x/vg.so)","0x2: alloc (/s/a.c:5)","0x3: main (/s/m.c:9)"]}"#;
        let r = parse(text).unwrap();
        assert_eq!(r[0].own, ["a.c:5", "m.c:9"]);
        assert_eq!(r[0].own_files, ["/s/a.c", "/s/m.c"]);
        assert_eq!((r[0].read_bytes, r[0].write_bytes), (10, 20));
    }
}
