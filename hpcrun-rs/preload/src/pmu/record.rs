//! Parsing the bodies of perf ring records: `PERF_RECORD_SAMPLE` for a given
//! `sample_type`, and the loss and throttling records.
//!
//! The field order is the one documented for `PERF_RECORD_SAMPLE` in
//! linux/perf_event.h: identifier, ip, pid/tid, time, addr, id, stream_id,
//! cpu/res, period, read values, callchain, raw, branch stack, user
//! registers, user stack, weight (u64, or the `perf_sample_weight` struct),
//! data_src, transaction, interrupt registers, phys_addr, aux, cgroup,
//! data_page_size, code_page_size. Every field is present only when its
//! `PERF_SAMPLE_*` bit is set. Values are in the host's byte order.
//!
//! Parsing borrows from the record (the raw block is a slice into it),
//! never allocates and never panics: a body that ends early is an error.

use perf_event_open_sys::bindings as pe;

use super::ring::RecordHeader;

/// What the kernel was asked to write into each sample: the fields of
/// `perf_event_attr` that decide the sample layout.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SampleLayout {
    pub sample_type: u64,
    /// `read_format` (only used with `PERF_SAMPLE_READ`).
    pub read_format: u64,
    /// `branch_sample_type` (only used with `PERF_SAMPLE_BRANCH_STACK`).
    pub branch_sample_type: u64,
    /// `sample_regs_user` (only used with `PERF_SAMPLE_REGS_USER`).
    pub regs_user: u64,
    /// `sample_regs_intr` (only used with `PERF_SAMPLE_REGS_INTR`).
    pub regs_intr: u64,
}

impl SampleLayout {
    pub fn new(sample_type: u64) -> SampleLayout {
        SampleLayout {
            sample_type,
            ..Default::default()
        }
    }

    fn has(&self, bit: u32) -> bool {
        self.sample_type & bit as u64 != 0
    }
}

/// `union perf_sample_weight` in its `PERF_SAMPLE_WEIGHT_STRUCT` form.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WeightStruct {
    /// Intel: the load latency (cycles); AMD IBS: the data cache miss latency.
    pub var1_dw: u32,
    /// Intel: the instruction latency; AMD IBS: tag-to-retire cycles.
    pub var2_w: u16,
    pub var3_w: u16,
}

/// One decoded `PERF_RECORD_SAMPLE`. Fields whose `PERF_SAMPLE_*` bit was not
/// requested are 0 (`raw`: `None`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sample<'a> {
    /// `PERF_SAMPLE_IDENTIFIER` (first) or `PERF_SAMPLE_ID`.
    pub id: u64,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    /// The sampled data address (`PERF_SAMPLE_ADDR`).
    pub addr: u64,
    pub stream_id: u64,
    pub cpu: u32,
    pub period: u64,
    /// Number of entries in the callchain (the entries are skipped).
    pub callchain_len: u64,
    /// The `PERF_SAMPLE_RAW` block (its `size` bytes, padding included).
    pub raw: Option<&'a [u8]>,
    /// `PERF_SAMPLE_WEIGHT`, or `var1_dw` of `PERF_SAMPLE_WEIGHT_STRUCT`.
    pub weight: u64,
    /// The weight struct, when `PERF_SAMPLE_WEIGHT_STRUCT` was requested.
    pub weight_struct: Option<WeightStruct>,
    /// `union perf_mem_data_src` (see [`super::datasrc`]).
    pub data_src: u64,
    pub transaction: u64,
    pub phys_addr: u64,
    pub cgroup: u64,
    pub data_page_size: u64,
    pub code_page_size: u64,
}

/// A record of the ring, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    /// `PERF_RECORD_LOST`: the ring was full; `lost` records were dropped.
    Lost {
        id: u64,
        lost: u64,
    },
    /// `PERF_RECORD_LOST_SAMPLES`: samples the PMU driver dropped.
    LostSamples {
        lost: u64,
    },
    /// `PERF_RECORD_THROTTLE`: too many interrupts, the event is paused.
    Throttle {
        time: u64,
        id: u64,
        stream_id: u64,
    },
    /// `PERF_RECORD_UNTHROTTLE`: sampling resumed.
    Unthrottle {
        time: u64,
        id: u64,
        stream_id: u64,
    },
    /// Any other record type (mmap, comm, aux, ...): ignored.
    Other(u32),
}

/// Why a record body could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// The body ended inside `field`.
    Truncated { field: &'static str },
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Truncated { field } => write!(f, "record ends inside field {field}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Reads native-endian words from a record body.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, field: &'static str) -> Result<&'a [u8], ParseError> {
        let n = usize::try_from(n).map_err(|_| ParseError::Truncated { field })?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(ParseError::Truncated { field })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, ParseError> {
        let b = self.take(8, field)?;
        Ok(u64::from_ne_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, ParseError> {
        let b = self.take(4, field)?;
        Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Skips `count` u64 words.
    fn skip_words(&mut self, count: u64, field: &'static str) -> Result<(), ParseError> {
        let bytes = count
            .checked_mul(8)
            .ok_or(ParseError::Truncated { field })?;
        self.take(bytes, field).map(|_| ())
    }
}

/// Skips a `struct read_format` as laid out for `read_format`.
fn skip_read(c: &mut Cursor, read_format: u64) -> Result<(), ParseError> {
    let has = |bit: u32| read_format & bit as u64 != 0;
    let per_value = 1 + has(pe::PERF_FORMAT_ID) as u64 + has(pe::PERF_FORMAT_LOST) as u64;
    let times = has(pe::PERF_FORMAT_TOTAL_TIME_ENABLED) as u64
        + has(pe::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
    if has(pe::PERF_FORMAT_GROUP) {
        // { u64 nr; [time_enabled]; [time_running]; { value; [id]; [lost] } cntr[nr] }
        let nr = c.u64("read.nr")?;
        c.skip_words(times, "read.times")?;
        let words = nr.checked_mul(per_value).ok_or(ParseError::Truncated {
            field: "read.values",
        })?;
        c.skip_words(words, "read.values")
    } else {
        // { value; [time_enabled]; [time_running]; [id]; [lost] }
        c.skip_words(per_value + times, "read")
    }
}

/// Parses a `PERF_RECORD_SAMPLE` body (the bytes after the header).
pub fn parse_sample<'a>(body: &'a [u8], layout: &SampleLayout) -> Result<Sample<'a>, ParseError> {
    let mut c = Cursor {
        bytes: body,
        pos: 0,
    };
    let mut s = Sample::default();
    if layout.has(pe::PERF_SAMPLE_IDENTIFIER) {
        s.id = c.u64("identifier")?;
    }
    if layout.has(pe::PERF_SAMPLE_IP) {
        s.ip = c.u64("ip")?;
    }
    if layout.has(pe::PERF_SAMPLE_TID) {
        s.pid = c.u32("pid")?;
        s.tid = c.u32("tid")?;
    }
    if layout.has(pe::PERF_SAMPLE_TIME) {
        s.time = c.u64("time")?;
    }
    if layout.has(pe::PERF_SAMPLE_ADDR) {
        s.addr = c.u64("addr")?;
    }
    if layout.has(pe::PERF_SAMPLE_ID) {
        s.id = c.u64("id")?;
    }
    if layout.has(pe::PERF_SAMPLE_STREAM_ID) {
        s.stream_id = c.u64("stream_id")?;
    }
    if layout.has(pe::PERF_SAMPLE_CPU) {
        s.cpu = c.u32("cpu")?;
        c.u32("cpu.res")?;
    }
    if layout.has(pe::PERF_SAMPLE_PERIOD) {
        s.period = c.u64("period")?;
    }
    if layout.has(pe::PERF_SAMPLE_READ) {
        skip_read(&mut c, layout.read_format)?;
    }
    if layout.has(pe::PERF_SAMPLE_CALLCHAIN) {
        s.callchain_len = c.u64("callchain.nr")?;
        c.skip_words(s.callchain_len, "callchain.ips")?;
    }
    if layout.has(pe::PERF_SAMPLE_RAW) {
        // u32 size, then size bytes; the kernel pads size so that the two
        // end on a u64 boundary.
        let size = c.u32("raw.size")?;
        s.raw = Some(c.take(size as u64, "raw.data")?);
    }
    if layout.has(pe::PERF_SAMPLE_BRANCH_STACK) {
        // { u64 nr; [u64 hw_idx]; { from, to, flags } lbr[nr]; [u64 counters[nr]] }
        let nr = c.u64("branch.nr")?;
        if layout.branch_sample_type & pe::PERF_SAMPLE_BRANCH_HW_INDEX as u64 != 0 {
            c.u64("branch.hw_idx")?;
        }
        let per_entry =
            3 + (layout.branch_sample_type & pe::PERF_SAMPLE_BRANCH_COUNTERS as u64 != 0) as u64;
        let words = nr.checked_mul(per_entry).ok_or(ParseError::Truncated {
            field: "branch.entries",
        })?;
        c.skip_words(words, "branch.entries")?;
    }
    // { u64 abi; u64 regs[weight(mask)] }, no regs when abi is NONE.
    if layout.has(pe::PERF_SAMPLE_REGS_USER) && c.u64("regs_user.abi")? != 0 {
        c.skip_words(layout.regs_user.count_ones() as u64, "regs_user")?;
    }
    if layout.has(pe::PERF_SAMPLE_STACK_USER) {
        // { u64 size; char data[size]; u64 dyn_size (only if size != 0) }
        let size = c.u64("stack_user.size")?;
        if size != 0 {
            c.take(size, "stack_user.data")?;
            c.u64("stack_user.dyn_size")?;
        }
    }
    if layout.has(pe::PERF_SAMPLE_WEIGHT) || layout.has(pe::PERF_SAMPLE_WEIGHT_STRUCT) {
        let w = c.u64("weight")?;
        if layout.has(pe::PERF_SAMPLE_WEIGHT_STRUCT) {
            let ws = WeightStruct {
                var1_dw: w as u32,
                var2_w: (w >> 32) as u16,
                var3_w: (w >> 48) as u16,
            };
            s.weight = ws.var1_dw as u64;
            s.weight_struct = Some(ws);
        } else {
            s.weight = w;
        }
    }
    if layout.has(pe::PERF_SAMPLE_DATA_SRC) {
        s.data_src = c.u64("data_src")?;
    }
    if layout.has(pe::PERF_SAMPLE_TRANSACTION) {
        s.transaction = c.u64("transaction")?;
    }
    // { u64 abi; u64 regs[weight(mask)] }, no regs when abi is NONE.
    if layout.has(pe::PERF_SAMPLE_REGS_INTR) && c.u64("regs_intr.abi")? != 0 {
        c.skip_words(layout.regs_intr.count_ones() as u64, "regs_intr")?;
    }
    if layout.has(pe::PERF_SAMPLE_PHYS_ADDR) {
        s.phys_addr = c.u64("phys_addr")?;
    }
    if layout.has(pe::PERF_SAMPLE_AUX) {
        let size = c.u64("aux.size")?;
        c.take(size, "aux.data")?;
    }
    if layout.has(pe::PERF_SAMPLE_CGROUP) {
        s.cgroup = c.u64("cgroup")?;
    }
    if layout.has(pe::PERF_SAMPLE_DATA_PAGE_SIZE) {
        s.data_page_size = c.u64("data_page_size")?;
    }
    if layout.has(pe::PERF_SAMPLE_CODE_PAGE_SIZE) {
        s.code_page_size = c.u64("code_page_size")?;
    }
    Ok(s)
}

/// Parses one record of the ring (`body` excludes the header). The
/// `sample_id` trailer of non-sample records (`sample_id_all`) is ignored.
pub fn parse<'a>(
    header: &RecordHeader,
    body: &'a [u8],
    layout: &SampleLayout,
) -> Result<Record<'a>, ParseError> {
    let mut c = Cursor {
        bytes: body,
        pos: 0,
    };
    Ok(match header.kind {
        pe::PERF_RECORD_SAMPLE => Record::Sample(parse_sample(body, layout)?),
        pe::PERF_RECORD_LOST => Record::Lost {
            id: c.u64("lost.id")?,
            lost: c.u64("lost.lost")?,
        },
        pe::PERF_RECORD_LOST_SAMPLES => Record::LostSamples {
            lost: c.u64("lost_samples.lost")?,
        },
        kind @ (pe::PERF_RECORD_THROTTLE | pe::PERF_RECORD_UNTHROTTLE) => {
            let time = c.u64("throttle.time")?;
            let id = c.u64("throttle.id")?;
            let stream_id = c.u64("throttle.stream_id")?;
            if kind == pe::PERF_RECORD_THROTTLE {
                Record::Throttle {
                    time,
                    id,
                    stream_id,
                }
            } else {
                Record::Unthrottle {
                    time,
                    id,
                    stream_id,
                }
            }
        }
        other => Record::Other(other),
    })
}

/// Running counts of what a ring delivered besides samples.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub samples: u64,
    /// Sum of `PERF_RECORD_LOST` counts: records lost because the ring was
    /// full.
    pub lost: u64,
    /// Sum of `PERF_RECORD_LOST_SAMPLES` counts.
    pub lost_samples: u64,
    pub throttle: u64,
    pub unthrottle: u64,
    pub other: u64,
    /// Records that could not be parsed.
    pub bad: u64,
}

impl Counts {
    pub fn note(&mut self, record: &Result<Record, ParseError>) {
        match record {
            Ok(Record::Sample(_)) => self.samples += 1,
            Ok(Record::Lost { lost, .. }) => self.lost += lost,
            Ok(Record::LostSamples { lost }) => self.lost_samples += lost,
            Ok(Record::Throttle { .. }) => self.throttle += 1,
            Ok(Record::Unthrottle { .. }) => self.unthrottle += 1,
            Ok(Record::Other(_)) => self.other += 1,
            Err(_) => self.bad += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: u32 = pe::PERF_SAMPLE_IP;
    const TID: u32 = pe::PERF_SAMPLE_TID;
    const TIME: u32 = pe::PERF_SAMPLE_TIME;
    const ADDR: u32 = pe::PERF_SAMPLE_ADDR;
    const CPU: u32 = pe::PERF_SAMPLE_CPU;
    const WEIGHT: u32 = pe::PERF_SAMPLE_WEIGHT;
    const DATA_SRC: u32 = pe::PERF_SAMPLE_DATA_SRC;

    /// Builds a body from words and u32 pairs.
    #[derive(Default)]
    struct Body(Vec<u8>);
    impl Body {
        fn u64(mut self, v: u64) -> Self {
            self.0.extend_from_slice(&v.to_ne_bytes());
            self
        }
        fn u32s(mut self, a: u32, b: u32) -> Self {
            self.0.extend_from_slice(&a.to_ne_bytes());
            self.0.extend_from_slice(&b.to_ne_bytes());
            self
        }
        fn raw(mut self, data: &[u8]) -> Self {
            // size includes the padding that aligns u32 + data to 8 bytes.
            let padded = (4 + data.len()).div_ceil(8) * 8 - 4;
            self.0.extend_from_slice(&(padded as u32).to_ne_bytes());
            self.0.extend_from_slice(data);
            self.0.resize(self.0.len() + padded - data.len(), 0);
            self
        }
    }

    fn layout(bits: u32) -> SampleLayout {
        SampleLayout::new(bits as u64)
    }

    #[test]
    fn intel_pebs_load_latency_layout() {
        // IP|TID|TIME|ADDR|CPU|WEIGHT|DATA_SRC, what mem:latency requests on
        // Intel (mem-loads with ldlat): weight = load latency in cycles.
        let body = Body::default()
            .u64(0x40_1234)
            .u32s(100, 101)
            .u64(123_456_789)
            .u64(0x7f00_dead_beef)
            .u32s(3, 0)
            .u64(187)
            .u64(0x6810_0142)
            .0;
        let s = parse_sample(
            &body,
            &layout(IP | TID | TIME | ADDR | CPU | WEIGHT | DATA_SRC),
        )
        .unwrap();
        assert_eq!(s.ip, 0x40_1234);
        assert_eq!((s.pid, s.tid), (100, 101));
        assert_eq!(s.time, 123_456_789);
        assert_eq!(s.addr, 0x7f00_dead_beef);
        assert_eq!(s.cpu, 3);
        assert_eq!(s.weight, 187);
        assert_eq!(s.weight_struct, None);
        assert_eq!(s.data_src, 0x6810_0142);
        assert_eq!(s.raw, None);
    }

    #[test]
    fn intel_weight_struct_splits_latencies() {
        // Sapphire Rapids style: var1_dw = cache latency, var2_w = instruction latency.
        let w = 250u64 | 31 << 32 | 7 << 48;
        let body = Body::default().u64(0x40_0000).u64(0x1000).u64(w).u64(0x1).0;
        let s = parse_sample(
            &body,
            &layout(IP | ADDR | pe::PERF_SAMPLE_WEIGHT_STRUCT | DATA_SRC),
        )
        .unwrap();
        assert_eq!(s.weight, 250);
        assert_eq!(
            s.weight_struct,
            Some(WeightStruct {
                var1_dw: 250,
                var2_w: 31,
                var3_w: 7
            })
        );
        assert_eq!(s.data_src, 1);
    }

    #[test]
    fn amd_ibs_layout_with_raw_block() {
        // IP|TID|TIME|ADDR|CPU|WEIGHT|DATA_SRC|RAW: RAW sits between PERIOD
        // and WEIGHT; IBS raw = u32 caps + u64 registers (size 4 + 8n, no
        // padding needed).
        let mut raw = Vec::new();
        raw.extend_from_slice(&0x7ffu32.to_ne_bytes());
        for r in 0..7u64 {
            raw.extend_from_slice(&(0x1000 + r).to_ne_bytes());
        }
        let body = Body::default()
            .u64(0x40_1000)
            .u32s(7, 8)
            .u64(99)
            .u64(0x5555_0000)
            .u32s(1, 0)
            .raw(&raw)
            .u64(42)
            .u64(0x1234)
            .0;
        let s = parse_sample(
            &body,
            &layout(IP | TID | TIME | ADDR | CPU | WEIGHT | DATA_SRC | pe::PERF_SAMPLE_RAW),
        )
        .unwrap();
        assert_eq!(s.raw, Some(&raw[..]));
        assert_eq!(s.weight, 42);
        assert_eq!(s.data_src, 0x1234);
        assert_eq!(s.addr, 0x5555_0000);
    }

    #[test]
    fn raw_padding_is_skipped() {
        let body = Body::default().raw(&[1, 2, 3]).u64(77).0;
        let s = parse_sample(&body, &layout(pe::PERF_SAMPLE_RAW | WEIGHT)).unwrap();
        assert_eq!(s.raw.unwrap()[..3], [1, 2, 3]);
        assert_eq!(s.raw.unwrap().len(), 4);
        assert_eq!(s.weight, 77);
    }

    #[test]
    fn arm_spe_sample_layout() {
        // With SPE the sample body carries only the generic fields (the SPE
        // packets come through the AUX area): TID|TIME|CPU|IDENTIFIER.
        let body = Body::default().u64(5).u32s(1, 2).u64(3).u32s(4, 0).0;
        let s = parse_sample(
            &body,
            &layout(pe::PERF_SAMPLE_IDENTIFIER | TID | TIME | CPU),
        )
        .unwrap();
        assert_eq!((s.id, s.pid, s.tid, s.time, s.cpu), (5, 1, 2, 3, 4));
    }

    #[test]
    fn every_field_in_kernel_order() {
        let layout = SampleLayout {
            sample_type: (pe::PERF_SAMPLE_IDENTIFIER
                | IP
                | TID
                | TIME
                | ADDR
                | pe::PERF_SAMPLE_ID
                | pe::PERF_SAMPLE_STREAM_ID
                | CPU
                | pe::PERF_SAMPLE_PERIOD
                | pe::PERF_SAMPLE_READ
                | pe::PERF_SAMPLE_CALLCHAIN
                | pe::PERF_SAMPLE_RAW
                | pe::PERF_SAMPLE_BRANCH_STACK
                | pe::PERF_SAMPLE_REGS_USER
                | pe::PERF_SAMPLE_STACK_USER
                | WEIGHT
                | DATA_SRC
                | pe::PERF_SAMPLE_TRANSACTION
                | pe::PERF_SAMPLE_REGS_INTR
                | pe::PERF_SAMPLE_PHYS_ADDR
                | pe::PERF_SAMPLE_AUX
                | pe::PERF_SAMPLE_CGROUP
                | pe::PERF_SAMPLE_DATA_PAGE_SIZE
                | pe::PERF_SAMPLE_CODE_PAGE_SIZE) as u64,
            read_format: (pe::PERF_FORMAT_TOTAL_TIME_ENABLED
                | pe::PERF_FORMAT_TOTAL_TIME_RUNNING
                | pe::PERF_FORMAT_ID) as u64,
            branch_sample_type: pe::PERF_SAMPLE_BRANCH_HW_INDEX as u64,
            regs_user: 0b1011,
            regs_intr: 0b11,
        };
        let body = Body::default()
            .u64(1) // identifier
            .u64(2) // ip
            .u32s(3, 4) // pid, tid
            .u64(5) // time
            .u64(6) // addr
            .u64(7) // id
            .u64(8) // stream_id
            .u32s(9, 0) // cpu, res
            .u64(10) // period
            .u64(11)
            .u64(12)
            .u64(13)
            .u64(14) // read: value, enabled, running, id
            .u64(2)
            .u64(0xa)
            .u64(0xb) // callchain: nr, ips
            .raw(&[0xee; 12]) // raw
            .u64(1)
            .u64(0)
            .u64(1)
            .u64(2)
            .u64(3) // branch: nr, hw_idx, from/to/flags
            .u64(2)
            .u64(1)
            .u64(2)
            .u64(3) // regs_user: abi 64, 3 regs
            .u64(16)
            .u64(0)
            .u64(0)
            .u64(16) // stack_user: size, data, dyn_size
            .u64(15) // weight
            .u64(16) // data_src
            .u64(17) // transaction
            .u64(2)
            .u64(1)
            .u64(2) // regs_intr
            .u64(18) // phys_addr
            .u64(8)
            .u64(0) // aux: size, data
            .u64(19) // cgroup
            .u64(4096) // data_page_size
            .u64(2 << 20) // code_page_size
            .0;
        let s = parse_sample(&body, &layout).unwrap();
        assert_eq!(s.id, 7);
        assert_eq!(s.ip, 2);
        assert_eq!((s.pid, s.tid, s.time, s.addr), (3, 4, 5, 6));
        assert_eq!((s.stream_id, s.cpu, s.period), (8, 9, 10));
        assert_eq!(s.callchain_len, 2);
        assert_eq!(s.raw.unwrap().len(), 12);
        assert_eq!((s.weight, s.data_src, s.transaction), (15, 16, 17));
        assert_eq!((s.phys_addr, s.cgroup), (18, 19));
        assert_eq!((s.data_page_size, s.code_page_size), (4096, 2 << 20));
    }

    #[test]
    fn group_read_and_no_regs_abi() {
        let layout = SampleLayout {
            sample_type: (pe::PERF_SAMPLE_READ | pe::PERF_SAMPLE_REGS_USER | IP) as u64,
            read_format: (pe::PERF_FORMAT_GROUP | pe::PERF_FORMAT_ID) as u64,
            regs_user: 0xff,
            ..Default::default()
        };
        let body = Body::default()
            .u64(0x99) // ip
            .u64(2) // read: nr
            .u64(1)
            .u64(10)
            .u64(2)
            .u64(20) // 2 x (value, id)
            .u64(0) // regs_user: abi NONE, no registers
            .0;
        assert_eq!(parse_sample(&body, &layout).unwrap().ip, 0x99);
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let full = Body::default()
            .u64(0x40_1234)
            .u32s(100, 101)
            .u64(1)
            .u64(2)
            .u32s(3, 0)
            .u64(4)
            .u64(5)
            .0;
        let l = layout(IP | TID | TIME | ADDR | CPU | WEIGHT | DATA_SRC);
        for cut in 0..full.len() {
            assert!(parse_sample(&full[..cut], &l).is_err(), "cut at {cut}");
        }
        // Absurd sizes inside the body.
        let body = Body::default().u64(u64::MAX).0;
        assert!(parse_sample(&body, &layout(pe::PERF_SAMPLE_CALLCHAIN)).is_err());
        let body = Body::default().u32s(u32::MAX, 0).0;
        assert!(parse_sample(&body, &layout(pe::PERF_SAMPLE_RAW)).is_err());
        assert_eq!(
            parse_sample(&[], &layout(IP)).unwrap_err(),
            ParseError::Truncated { field: "ip" }
        );
    }

    fn header(kind: u32, body: &[u8]) -> RecordHeader {
        RecordHeader {
            kind,
            misc: 0,
            size: 8 + body.len() as u16,
        }
    }

    #[test]
    fn lost_and_throttle_records_are_counted() {
        let l = layout(IP);
        let mut counts = Counts::default();
        let lost = Body::default().u64(1).u64(17).u64(0xdead).0; // + sample_id trailer
        let r = parse(&header(pe::PERF_RECORD_LOST, &lost), &lost, &l);
        assert_eq!(r, Ok(Record::Lost { id: 1, lost: 17 }));
        counts.note(&r);
        let thr = Body::default().u64(100).u64(1).u64(2).0;
        let r = parse(&header(pe::PERF_RECORD_THROTTLE, &thr), &thr, &l);
        assert_eq!(
            r,
            Ok(Record::Throttle {
                time: 100,
                id: 1,
                stream_id: 2
            })
        );
        counts.note(&r);
        let r = parse(&header(pe::PERF_RECORD_UNTHROTTLE, &thr), &thr, &l);
        assert!(matches!(r, Ok(Record::Unthrottle { time: 100, .. })));
        counts.note(&r);
        let ls = Body::default().u64(5).0;
        let r = parse(&header(pe::PERF_RECORD_LOST_SAMPLES, &ls), &ls, &l);
        counts.note(&r);
        let s = Body::default().u64(0x40).0;
        let r = parse(&header(pe::PERF_RECORD_SAMPLE, &s), &s, &l);
        counts.note(&r);
        let r = parse(&header(pe::PERF_RECORD_MMAP2, &s), &s, &l);
        assert_eq!(r, Ok(Record::Other(pe::PERF_RECORD_MMAP2)));
        counts.note(&r);
        let r = parse(&header(pe::PERF_RECORD_LOST, &[]), &[], &l);
        counts.note(&r);
        assert_eq!(
            counts,
            Counts {
                samples: 1,
                lost: 17,
                lost_samples: 5,
                throttle: 1,
                unthrottle: 1,
                other: 1,
                bad: 1
            }
        );
    }
}
