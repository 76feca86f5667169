//! The measuring machine's data cache sizes, from sysfs
//! (`/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`), written
//! into every profile so that hpcprof-rs can tell cache-resident data from
//! data that must come from memory (docs/GUIDE.md, "How mem:soft
//! attributes a sample"). Read once, outside any signal handler.

use std::sync::OnceLock;

use formats::measurement::CacheBytes;

static CACHES: OnceLock<CacheBytes> = OnceLock::new();

/// The data caches of CPU 0 (zeros where sysfs does not say).
pub fn get() -> CacheBytes {
    *CACHES.get_or_init(|| read("/sys/devices/system/cpu/cpu0/cache"))
}

/// The data caches if they were read already (the signal handler reads
/// nothing from files: start-up reads them).
pub fn read_already() -> Option<CacheBytes> {
    CACHES.get().copied()
}

/// `32K`, `1024K`, `32M` or a plain byte count.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "" => n,
        "K" => n << 10,
        "M" => n << 20,
        "G" => n << 30,
        _ => return None,
    })
}

fn read(dir: &str) -> CacheBytes {
    let mut out = CacheBytes::default();
    for i in 0..8 {
        let field = |name: &str| std::fs::read_to_string(format!("{dir}/index{i}/{name}")).ok();
        // The indices are numbered from 0 without gaps: the first missing
        // one ends the list (every process reads this: few files).
        let Some(kind) = field("type") else {
            break;
        };
        let kind = kind.trim();
        if kind == "Instruction" {
            continue;
        }
        let (Some(level), Some(size)) = (field("level"), field("size")) else {
            continue;
        };
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_size(&size)) else {
            continue;
        };
        match level {
            1 => out.l1d = size,
            2 => out.l2 = size,
            _ => {}
        }
        if size > 0 && level >= 2 {
            out.llc = out.llc.max(size);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32K\n"), Some(32 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("x"), None);
    }
}
