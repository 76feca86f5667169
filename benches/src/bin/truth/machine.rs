//! This machine, for the report and the cache simulator: the CPU's vendor
//! and model (`/proc/cpuinfo`) and its data caches
//! (`/sys/devices/system/cpu/cpu0/cache/index*`). The header line of the
//! tables (build, machine, date) is `benches::doc_tables::Header`.

use std::path::Path;

/// One data (or unified) cache level of cpu0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cache {
    pub level: u32,
    pub size: u64,
    pub ways: u32,
    pub line: u32,
}

#[derive(Debug, Clone)]
pub struct Machine {
    /// `vendor_id`: AuthenticAMD, GenuineIntel, ...
    pub vendor: String,
    /// `model name`.
    pub model: String,
    /// Data and unified caches, L1 first.
    pub caches: Vec<Cache>,
}

fn sysfs(dir: &Path, name: &str) -> Option<String> {
    Some(
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .to_string(),
    )
}

/// `32K`, `512K`, `32768K`, `1M` as bytes.
fn size(s: &str) -> Option<u64> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "" => n,
        "K" => n << 10,
        "M" => n << 20,
        _ => return None,
    })
}

impl Machine {
    pub fn read() -> Machine {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |k: &str| {
            info.lines()
                .find(|l| l.split(':').next().is_some_and(|n| n.trim() == k))
                .and_then(|l| l.split_once(':'))
                .map_or("unknown".to_string(), |(_, v)| v.trim().to_string())
        };
        let mut caches = Vec::new();
        for i in 0..8 {
            let dir = Path::new("/sys/devices/system/cpu/cpu0/cache").join(format!("index{i}"));
            let Some(kind) = sysfs(&dir, "type") else {
                continue;
            };
            if kind == "Instruction" {
                continue;
            }
            let get = |n| sysfs(&dir, n);
            if let (Some(level), Some(sz), Some(ways), Some(line)) = (
                get("level").and_then(|s| s.parse().ok()),
                get("size").and_then(|s| size(&s)),
                get("ways_of_associativity").and_then(|s| s.parse().ok()),
                get("coherency_line_size").and_then(|s| s.parse().ok()),
            ) {
                caches.push(Cache {
                    level,
                    size: sz,
                    ways,
                    line,
                });
            }
        }
        caches.sort_by_key(|c| c.level);
        Machine {
            vendor: field("vendor_id"),
            model: field("model name"),
            caches,
        }
    }

    /// `L1d 32 KiB/8, L2 512 KiB/8, L3 32 MiB/16`.
    pub fn cache_summary(&self) -> String {
        self.caches
            .iter()
            .map(|c| {
                let kib = c.size >> 10;
                let sz = if kib >= 1024 && kib % 1024 == 0 {
                    format!("{} MiB", kib >> 10)
                } else {
                    format!("{kib} KiB")
                };
                let name = if c.level == 1 { "L1d" } else { "" };
                let name = if name.is_empty() {
                    format!("L{}", c.level)
                } else {
                    name.to_string()
                };
                format!("{name} {sz}/{}-way", c.ways)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The report heading for this vendor.
    pub fn vendor_heading(&self) -> String {
        match self.vendor.as_str() {
            "AuthenticAMD" => "AMD".to_string(),
            "GenuineIntel" => "Intel".to_string(),
            v => v.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size("32K"), Some(32 << 10));
        assert_eq!(size("32768K"), Some(32 << 20));
    }
}
