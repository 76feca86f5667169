//! The offset-histogram layout grammar (`--histogram`, `HPCRUN_HISTOGRAM`):
//! `N` equal buckets over the object (1 to [`MAX_BUCKETS`], default 32),
//! `cacheline` (64-byte buckets), `page` (4 KiB buckets) or `bytes:N`.

use formats::measurement::HistogramLayout;

/// Most buckets of one object's histogram.
pub const MAX_BUCKETS: u32 = 1 << 16;

/// Parses a layout; an empty (or blank) spec is the default layout.
pub fn parse(spec: &str) -> Option<HistogramLayout> {
    let bytes = |size| HistogramLayout::Bytes {
        size,
        max_buckets: MAX_BUCKETS,
    };
    match spec.trim() {
        "" => Some(HistogramLayout::default()),
        "cacheline" => Some(bytes(64)),
        "page" => Some(bytes(4096)),
        s => match s.strip_prefix("bytes:") {
            Some(n) => n.parse().ok().filter(|&n| n > 0).map(bytes),
            None => s
                .parse()
                .ok()
                .filter(|&n| n > 0 && n <= MAX_BUCKETS)
                .map(HistogramLayout::Fraction),
        },
    }
}
