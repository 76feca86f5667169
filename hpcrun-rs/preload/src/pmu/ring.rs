//! Reading a perf_event mmap ring buffer from a signal handler.
//!
//! The kernel writes records (each a `perf_event_header` followed by a body,
//! sizes multiples of 8) into a power-of-two data area that follows the
//! `perf_event_mmap_page` control page, and advances `data_head`; the
//! reader consumes from `data_tail` to `data_head` and then publishes the
//! new `data_tail`, which frees the space (linux/perf_event.h: read
//! `data_head`, then an acquire barrier; a release barrier, then write
//! `data_tail`).
//!
//! [`drain`] is the pure core: it works on (data area, head, tail) and is
//! tested with constructed buffers. [`Ring`] applies it to a live mapping
//! (made by [`crate::sys::map_perf_ring`]); it neither allocates nor locks: a
//! record that wraps around the end of the data area is copied into a
//! fixed-size stack buffer of [`MAX_RECORD`] bytes, and a larger one is
//! skipped and counted.

use crate::sys;

/// Largest record that can be delivered when it wraps around the end of the
/// data area (it is copied into a stack buffer of this size).
pub const MAX_RECORD: usize = 512;

/// `struct perf_event_header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// `type`: `PERF_RECORD_*`.
    pub kind: u32,
    pub misc: u16,
    /// Size of the whole record, header included.
    pub size: u16,
}

impl RecordHeader {
    pub const SIZE: usize = 8;

    pub fn from_bytes(b: [u8; 8]) -> RecordHeader {
        RecordHeader {
            kind: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            misc: u16::from_ne_bytes([b[4], b[5]]),
            size: u16::from_ne_bytes([b[6], b[7]]),
        }
    }

    pub fn to_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.kind.to_ne_bytes());
        b[4..6].copy_from_slice(&self.misc.to_ne_bytes());
        b[6..].copy_from_slice(&self.size.to_ne_bytes());
        b
    }
}

/// What one [`drain`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DrainStats {
    /// Records handed to the callback.
    pub records: u64,
    /// Records that wrapped around the end of the data area and were larger
    /// than [`MAX_RECORD`]: skipped.
    pub too_large: u64,
    /// Times the ring was found inconsistent (a header smaller than itself,
    /// a record running past `data_head`, `data_head` behind `data_tail` or
    /// more than the data area ahead of it, a data area whose size is not a
    /// power of two): everything up to `data_head` was skipped.
    pub corrupt: u64,
}

impl DrainStats {
    pub fn add(&mut self, other: &DrainStats) {
        self.records += other.records;
        self.too_large += other.too_large;
        self.corrupt += other.corrupt;
    }
}

/// Copies `out.len()` bytes starting at ring offset `pos` (taken modulo the
/// data size), wrapping around the end. `data.len()` is a power of two.
fn copy_wrapped(data: &[u8], pos: u64, out: &mut [u8]) {
    let size = data.len();
    let start = (pos & (size as u64 - 1)) as usize;
    let first = out.len().min(size - start);
    out[..first].copy_from_slice(&data[start..start + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

/// Hands every complete record in `[tail, head)` of the ring data area
/// `data` to `f` as (header, body without the header), oldest first, and
/// returns the new tail (always `head`: the reader consumes everything)
/// with counts. `head` and `tail` are the free-running byte counters of
/// `perf_event_mmap_page`; positions are taken modulo `data.len()`, which
/// must be a power of two. Never panics and never allocates.
pub fn drain(
    data: &[u8],
    head: u64,
    tail: u64,
    mut f: impl FnMut(&RecordHeader, &[u8]),
) -> (u64, DrainStats) {
    let mut stats = DrainStats::default();
    let size = data.len();
    if head == tail {
        return (head, stats);
    }
    if size < RecordHeader::SIZE
        || !size.is_power_of_two()
        || head < tail
        || head - tail > size as u64
    {
        stats.corrupt += 1;
        return (head, stats);
    }
    let mut buf = [0u8; MAX_RECORD];
    let mut pos = tail;
    while pos < head {
        let avail = head - pos;
        if avail < RecordHeader::SIZE as u64 {
            stats.corrupt += 1;
            break;
        }
        let mut hb = [0u8; RecordHeader::SIZE];
        copy_wrapped(data, pos, &mut hb);
        let header = RecordHeader::from_bytes(hb);
        let len = header.size as usize;
        if len < RecordHeader::SIZE || len as u64 > avail {
            stats.corrupt += 1;
            break;
        }
        let start = (pos & (size as u64 - 1)) as usize;
        if start + len <= size {
            f(&header, &data[start + RecordHeader::SIZE..start + len]);
            stats.records += 1;
        } else if len <= MAX_RECORD {
            copy_wrapped(data, pos, &mut buf[..len]);
            f(&header, &buf[RecordHeader::SIZE..len]);
            stats.records += 1;
        } else {
            stats.too_large += 1;
        }
        pos += len as u64;
    }
    (head, stats)
}

/// A live perf ring of one event of the calling thread.
pub struct Ring {
    mem: sys::RingMemory,
}

impl Ring {
    /// Wraps a mapping made by [`crate::sys::map_perf_ring`].
    pub fn new(mem: sys::RingMemory) -> Ring {
        Ring { mem }
    }

    /// Size of the data area in bytes.
    pub fn data_size(&self) -> usize {
        self.mem.data().len()
    }

    /// Consumes every record the kernel has written since the last call,
    /// handing each to `f`, then frees their space. Safe in a signal
    /// handler; call it from one thread at a time (the ring's owner).
    pub fn for_each_record(&self, f: impl FnMut(&RecordHeader, &[u8])) -> DrainStats {
        let head = self.mem.head();
        let tail = self.mem.tail();
        let (new_tail, stats) = drain(self.mem.data(), head, tail, f);
        self.mem.set_tail(new_tail);
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `body_words` u64 words, each word = `tag * 1000 + i`.
    fn record(kind: u32, tag: u64, body_words: usize) -> Vec<u8> {
        let size = (8 + 8 * body_words) as u16;
        let mut v = RecordHeader {
            kind,
            misc: 0,
            size,
        }
        .to_bytes()
        .to_vec();
        for i in 0..body_words {
            v.extend_from_slice(&(tag * 1000 + i as u64).to_ne_bytes());
        }
        v
    }

    /// Writes `bytes` into the ring at free-running position `pos`.
    fn put(data: &mut [u8], pos: u64, bytes: &[u8]) {
        let size = data.len() as u64;
        for (i, b) in bytes.iter().enumerate() {
            data[((pos + i as u64) % size) as usize] = *b;
        }
    }

    fn collect(data: &[u8], head: u64, tail: u64) -> (u64, DrainStats, Vec<(u32, Vec<u64>)>) {
        let mut out = Vec::new();
        let (t, s) = drain(data, head, tail, |h, body| {
            let words = body
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .collect();
            out.push((h.kind, words));
        });
        (t, s, out)
    }

    #[test]
    fn empty_ring_consumes_nothing() {
        let data = [0u8; 64];
        let (t, s, out) = collect(&data, 40, 40);
        assert_eq!((t, s, out.len()), (40, DrainStats::default(), 0));
    }

    #[test]
    fn records_in_order() {
        let mut data = vec![0u8; 128];
        let a = record(9, 1, 2);
        let b = record(2, 2, 2);
        put(&mut data, 0, &a);
        put(&mut data, 24, &b);
        let (t, s, out) = collect(&data, 48, 0);
        assert_eq!(t, 48);
        assert_eq!(s.records, 2);
        assert_eq!(out[0], (9, vec![1000, 1001]));
        assert_eq!(out[1], (2, vec![2000, 2001]));
    }

    #[test]
    fn a_record_wrapping_around_the_end_is_reassembled() {
        let mut data = vec![0u8; 64];
        // Free-running positions far beyond the size: 1000 * 64 + 40.
        let tail = 64_000 + 40;
        let a = record(9, 7, 4); // 40 bytes: 24 before the end, 16 after.
        put(&mut data, tail, &a);
        let b = record(9, 8, 1);
        put(&mut data, tail + 40, &b);
        let (t, s, out) = collect(&data, tail + 56, tail);
        assert_eq!(t, tail + 56);
        assert_eq!(s.records, 2);
        assert_eq!(out[0], (9, vec![7000, 7001, 7002, 7003]));
        assert_eq!(out[1], (9, vec![8000]));
    }

    #[test]
    fn the_header_itself_may_wrap() {
        // Not produced by the kernel (records are 8-byte aligned and the
        // size a power of two), but handled.
        let mut data = vec![0u8; 64];
        let tail = 60;
        let a = record(9, 3, 1);
        put(&mut data, tail, &a);
        let (_, s, out) = collect(&data, tail + 16, tail);
        assert_eq!(s.records, 1);
        assert_eq!(out[0], (9, vec![3000]));
    }

    #[test]
    fn a_wrapping_record_larger_than_the_stack_buffer_is_skipped() {
        let mut data = vec![0u8; 2048];
        let tail = 2048 - 16;
        let big = record(9, 1, (MAX_RECORD + 64) / 8); // > MAX_RECORD
        put(&mut data, tail, &big);
        let small = record(9, 2, 1);
        put(&mut data, tail + big.len() as u64, &small);
        let head = tail + (big.len() + small.len()) as u64;
        let (t, s, out) = collect(&data, head, tail);
        assert_eq!(t, head);
        assert_eq!((s.records, s.too_large), (1, 1));
        assert_eq!(out[0], (9, vec![2000]));
    }

    #[test]
    fn a_large_record_that_does_not_wrap_is_delivered_in_place() {
        let mut data = vec![0u8; 2048];
        let big = record(9, 1, (MAX_RECORD + 64) / 8);
        put(&mut data, 0, &big);
        let (_, s, out) = collect(&data, big.len() as u64, 0);
        assert_eq!((s.records, s.too_large), (1, 0));
        assert_eq!(out[0].1.len(), (MAX_RECORD + 64) / 8);
    }

    #[test]
    fn garbage_is_skipped_and_counted_without_panicking() {
        // Header claiming size 0, size 4, or more than what was written.
        for bad in [0u16, 4, 200] {
            let mut data = vec![0u8; 64];
            put(
                &mut data,
                0,
                &RecordHeader {
                    kind: 9,
                    misc: 0,
                    size: bad,
                }
                .to_bytes(),
            );
            let (t, s, out) = collect(&data, 32, 0);
            assert_eq!(t, 32, "size {bad}");
            assert_eq!(s.corrupt, 1, "size {bad}");
            assert!(out.is_empty());
        }
        // Head behind tail, head too far ahead, a non-power-of-two area,
        // an area too small for a header.
        let data = vec![0u8; 64];
        assert_eq!(collect(&data, 8, 16).1.corrupt, 1);
        assert_eq!(collect(&data, 200, 0).1.corrupt, 1);
        assert_eq!(collect(&[0u8; 48], 16, 0).1.corrupt, 1);
        assert_eq!(collect(&[0u8; 4], 4, 0).1.corrupt, 1);
        // Fewer than 8 bytes between tail and head.
        assert_eq!(collect(&data, 4, 0).1.corrupt, 1);
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small deterministic generator; every (head, tail) pair over a
        // garbage area must return without panicking.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut data = vec![0u8; 256];
        for _ in 0..2000 {
            for b in data.iter_mut() {
                *b = next() as u8;
            }
            let tail = next() % 10_000;
            let head = tail + next() % 300;
            let _ = drain(&data, head, tail, |_, _| {});
        }
    }
}

/// The live path on this machine: a software page-fault event with data
/// addresses (works without a PMU) delivers its samples through a real
/// ring.
#[cfg(test)]
mod live_tests {
    use super::super::record::{self, Record, SampleLayout};
    use crate::sys;
    use perf_event_open_sys::bindings as pe;

    #[test]
    fn page_fault_samples_arrive_through_a_mapped_ring() {
        let sample_type = (pe::PERF_SAMPLE_IP | pe::PERF_SAMPLE_TID | pe::PERF_SAMPLE_ADDR) as u64;
        let mut attr = pe::perf_event_attr {
            type_: pe::PERF_TYPE_SOFTWARE,
            config: pe::PERF_COUNT_SW_PAGE_FAULTS as u64,
            sample_type,
            ..Default::default()
        };
        attr.__bindgen_anon_1.sample_period = 1;
        attr.set_disabled(1);
        attr.set_exclude_kernel(1);
        attr.set_exclude_hv(1);
        let fd = match sys::open_perf_event(&mut attr, -1) {
            Ok(fd) => fd,
            Err(errno) => {
                eprintln!("perf_event_open(page-faults) failed (errno {errno}): skipped");
                return;
            }
        };
        let ring = super::Ring::new(sys::map_perf_ring(fd, 8).expect("map the ring"));
        assert!(sys::enable_event(fd));
        // Fault in fresh anonymous pages.
        let pages = 16;
        let mem = sys::map_zeroed::<std::sync::atomic::AtomicU64>(pages * 512).unwrap();
        let start = mem.as_ptr() as u64;
        for i in 0..pages {
            // A read of a fresh anonymous page faults (maps the zero page).
            std::hint::black_box(mem[i * 512].load(std::sync::atomic::Ordering::Relaxed));
        }
        sys::disable_event(fd);
        let layout = SampleLayout::new(sample_type);
        let tid = sys::gettid();
        let mut in_range = 0;
        let stats = ring.for_each_record(|h, body| {
            if let Ok(Record::Sample(s)) = record::parse(h, body, &layout) {
                assert_eq!(s.tid, tid);
                if s.addr >= start && s.addr < start + (pages * 4096) as u64 {
                    in_range += 1;
                }
            }
        });
        sys::close_event(fd);
        assert_eq!(stats.corrupt, 0);
        assert!(stats.records >= pages as u64, "{stats:?}");
        assert_eq!(in_range, pages, "one page fault per fresh page");
        // Everything was consumed: a second drain finds nothing.
        assert_eq!(ring.for_each_record(|_, _| {}).records, 0);
    }
}
