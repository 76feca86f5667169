//! The header line of a table: which build was measured, on which
//! machine, and the run's details.
//!
//! `Build 09c1f5b, Intel(R) Xeon(R) Processor (GenuineIntel family 6 model
//! 167, AVX-512 yes, 2 cores): 2026-11-28, period 2000000 ns, ...` (one
//! line). The build is a commit; the details are free text that names no
//! path of a development machine.

use std::path::Path;
use std::process::Command;

use super::Error;

/// The header line's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The commit the measured tools were built from (`-dirty` with
    /// uncommitted changes).
    pub build: String,
    /// `/proc/cpuinfo`'s `model name`.
    pub cpu: String,
    /// `vendor_id`: GenuineIntel, AuthenticAMD.
    pub vendor: String,
    /// `cpu family` and `model`.
    pub family: u32,
    pub model: u32,
    /// The `avx512f` flag: the kernel saves AVX-512 state into every
    /// signal frame.
    pub avx512: bool,
    /// Logical CPUs.
    pub cores: u32,
    /// The date, period, load and anything else about the run.
    pub details: String,
}

/// Paths that a header must not name: a development machine's.
const LOCAL_PATHS: [&str; 2] = ["/work/", "/home/"];

impl Header {
    /// This machine (`/proc/cpuinfo`), the build `build` and `details`.
    pub fn this_machine(build: &str, details: &str) -> Header {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |k: &str| {
            info.lines()
                .find(|l| l.split(':').next().is_some_and(|n| n.trim() == k))
                .and_then(|l| l.split_once(':'))
                .map_or(String::new(), |(_, v)| v.trim().to_string())
        };
        let cores = info
            .lines()
            .filter(|l| l.split(':').next().is_some_and(|n| n.trim() == "processor"))
            .count() as u32;
        Header {
            build: build.to_string(),
            cpu: Some(field("model name"))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown CPU".into()),
            vendor: Some(field("vendor_id"))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown".into()),
            family: field("cpu family").parse().unwrap_or(0),
            model: field("model").parse().unwrap_or(0),
            avx512: field("flags").split_whitespace().any(|f| f == "avx512f"),
            cores: cores.max(1),
            details: details.to_string(),
        }
    }

    /// The line (no newline).
    pub fn render(&self) -> String {
        format!(
            "Build {}, {} ({} family {} model {}, AVX-512 {}, {} cores): {}",
            self.build,
            self.cpu,
            self.vendor,
            self.family,
            self.model,
            if self.avx512 { "yes" } else { "no" },
            self.cores,
            self.details
        )
    }

    /// Reads a header line; the error says which part is missing.
    pub fn parse(line: &str) -> Result<Header, Error> {
        let bad = |what: &str| Error::Header(format!("{what}: {line:?}"));
        for p in LOCAL_PATHS {
            if line.contains(p) {
                return Err(bad(&format!("names a local path ({p})")));
            }
        }
        let rest = line
            .strip_prefix("Build ")
            .ok_or_else(|| bad("does not start with `Build `"))?;
        let (build, rest) = rest
            .split_once(", ")
            .ok_or_else(|| bad("no `, ` after the build"))?;
        if build.is_empty() || build.contains(' ') {
            return Err(bad("the build is not one word (a commit)"));
        }
        let close = rest
            .find(" cores): ")
            .ok_or_else(|| bad("no `N cores): ` closing the machine"))?;
        let open = rest[..close]
            .rfind(" (")
            .ok_or_else(|| bad("no ` (` opening the machine"))?;
        let cpu = &rest[..open];
        let machine = &rest[open + 2..close];
        let details = &rest[close + " cores): ".len()..];
        // "GenuineIntel family 6 model 167, AVX-512 yes, 2"
        let parts: Vec<&str> = machine.split(", ").collect();
        let [id, avx, cores] = parts[..] else {
            return Err(bad(
                "the machine is not `VENDOR family F model M, AVX-512 yes|no, N`",
            ));
        };
        let words: Vec<&str> = id.split(' ').collect();
        let [vendor, "family", family, "model", model] = words[..] else {
            return Err(bad("not `VENDOR family F model M`"));
        };
        let avx512 = match avx {
            "AVX-512 yes" => true,
            "AVX-512 no" => false,
            _ => return Err(bad("not `AVX-512 yes` or `AVX-512 no`")),
        };
        let num = |s: &str, what: &str| s.parse::<u32>().map_err(|_| bad(what));
        if cpu.is_empty() || details.is_empty() {
            return Err(bad("no CPU model or no details"));
        }
        Ok(Header {
            build: build.to_string(),
            cpu: cpu.to_string(),
            vendor: vendor.to_string(),
            family: num(family, "the family is not a number")?,
            model: num(model, "the model is not a number")?,
            avx512,
            cores: num(cores, "the cores are not a number")?,
            details: details.to_string(),
        })
    }
}

/// `git rev-parse --short HEAD` in `root` (with `-dirty` when tracked
/// files have changes), or `unknown`.
pub fn git_head(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(h) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{h}-dirty")
            } else {
                h
            }
        }
        None => "unknown".into(),
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil(secs / 86_400);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let h = Header {
            build: "09c1f5b".into(),
            cpu: "Intel(R) Xeon(R) Processor".into(),
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 167,
            avx512: true,
            cores: 2,
            details: "2026-11-28, load average 2-4 (other builds running)".into(),
        };
        let line = h.render();
        assert_eq!(Header::parse(&line), Ok(h.clone()));
        let with_path = line.replace("2026", "/home/me/2026");
        assert!(Header::parse(&with_path).is_err());
        assert!(Header::parse(&line.replace("AVX-512 yes", "AVX512")).is_err());
        assert!(Header::parse("| workload |").is_err());
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(20_517), (2026, 3, 5));
        let here = Header::this_machine("abc", "x");
        assert_eq!(Header::parse(&here.render()), Ok(here));
    }
}
