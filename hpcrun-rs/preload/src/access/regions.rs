//! What an unknown address was: the address-space region of a sample
//! that hit no known object (no tracked block or mapping, no static
//! variable or data section, no tracked thread's stack, no small-heap
//! window), named by the process's memory map.
//!
//! The signal handler cannot read `/proc/self/maps` (no I/O, no
//! allocation, no lock), so it only notes the sample's 2 MiB region in a
//! process-wide lock-free table ([`key`]; [`SLOTS`] regions, the first
//! sampled address of each kept) and keys the `<unknown address>` node by
//! the region's slot. When it gives a region a slot it raises a flag
//! ([`pending`]), and soon after, outside any handler, the region is
//! named from the memory map by the mapping that holds its first sampled
//! address ([`label`], [`label_new_regions`]): by the checkpoint helper
//! thread (every 50 ms) in a multi-threaded program, else by the
//! program's next allocation (`checkpoint::poll`). A region keeps the
//! first name that is a mapping's ([`name`]): memory a library maps and
//! unmaps by itself (MPICH's and UCX's shared-memory segments, which
//! UCX's memory hooks map around the profiler's, unmapped at
//! `MPI_Finalize`) is named by what it was, not by the memory map at
//! exit. The profile writer names the regions still unnamed from the map
//! when it writes. Labels: `[vdso]/[vvar]`, `[heap] outside any block
//! (malloc metadata)`, a glibc malloc arena, a guard page, an untracked
//! anonymous or file mapping, System V shared memory not attached through
//! the profiler's `shmat`, code or ELF tables of a loaded module (one
//! label for all modules), an address no mapping can hold (the null
//! page, beyond the 47-bit address space: recovered wrongly), or
//! [`NOT_MAPPED`] (unmapped before it could be named: a single-threaded
//! program that did not allocate between the region's first sample and
//! its unmapping). `hpcprof-rs` makes one row per label. A region is
//! named by its first sample: later samples in the same 2 MiB that fell
//! in a neighbouring mapping of another kind share its name (mappings of different kinds rarely share 2 MiB of unknown
//! addresses). A full table keys the sample 0, the plain `<unknown
//! address>` (counted in [`FULL`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;

use crate::code::modules::{self, ModuleData};
use crate::sys::Published;

/// Regions the table holds (1,024: 2 GiB of scattered unknown memory).
pub const SLOTS: usize = 1 << SLOT_BITS;
const SLOT_BITS: u32 = 10;
/// log2 of a region's size (2 MiB).
pub const REGION_SHIFT: u32 = 21;
const MAX_PROBE: usize = 32;

/// Per slot: the region's first sampled address with bit 0 set (so that
/// it is never 0, the free mark; same region, same page), 0 if free.
static FIRST: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Samples whose region found no slot (keyed 0).
pub static FULL: AtomicU64 = AtomicU64::new(0);
/// Per slot: the name its region got while its mapping was there, kept
/// for good (a region's slot is never reused).
static LABELS: [Published<String>; SLOTS] = [const { Published::new() }; SLOTS];
/// Raised by the handler when it gives a region a slot; lowered by
/// whoever names the new regions ([`label_new_regions`]).
static PENDING: AtomicBool = AtomicBool::new(false);

/// The label of an address that no mapping holds when it is named.
pub const NOT_MAPPED: &str = "not mapped at exit";

/// The key of `addr`'s region: its slot plus one, 0 when the table is
/// full. Lock-free and allocation-free (signal handlers).
pub fn key(addr: u64) -> u64 {
    let region = addr >> REGION_SHIFT;
    let hash = (region.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOT_BITS)) as usize;
    for i in 0..MAX_PROBE {
        let slot = (hash + i) % SLOTS;
        let here = &FIRST[slot];
        let v = match here.load(Relaxed) {
            0 => match here.compare_exchange(0, addr | 1, Relaxed, Relaxed) {
                Ok(_) => {
                    // Release: whoever sees the flag sees the slot.
                    PENDING.store(true, Release);
                    return slot as u64 + 1;
                }
                Err(v) => v,
            },
            v => v,
        };
        if v >> REGION_SHIFT == region {
            return slot as u64 + 1;
        }
    }
    FULL.fetch_add(1, Relaxed);
    0
}

/// The first sampled address of the region keyed `key` (`None` for 0 or
/// a free slot).
pub fn first_address(key: u64) -> Option<u64> {
    let slot = usize::try_from(key.checked_sub(1)?).ok()?;
    match FIRST.get(slot)?.load(Relaxed) {
        0 => None,
        v => Some(v & !1),
    }
}

/// True if a region got its slot and was not named since (one relaxed
/// load: the allocation hooks ask at every call).
pub fn pending() -> bool {
    PENDING.load(Relaxed)
}

/// Names the regions that got their slot since the last call (when
/// [`pending`]) from the memory map now, for good where a mapping holds
/// the address. Not for signal handlers: reads `/proc/self/maps` and
/// allocates (the library's own heap); callers on a program thread run
/// it with the hooks off.
pub fn label_new_regions() {
    if !PENDING.load(Relaxed) || !PENDING.swap(false, AcqRel) {
        return;
    }
    let _no_cancel = crate::sys::cancel::NoCancel::new();
    let maps = read_maps();
    if maps.is_empty() {
        return; // Unreadable (no descriptor left): the writer tries again.
    }
    // The loaded modules from the published snapshot (lock-free: no lock
    // that a fork could leave held in the child).
    let modules: Vec<Arc<ModuleData>> = {
        let _section = crate::sys::reading();
        modules::get()
            .map(|snap| snap.modules.iter().map(|(_, m)| m.clone()).collect())
            .unwrap_or_default()
    };
    let segments = module_segments(&modules);
    for (slot, kept) in LABELS.iter().enumerate() {
        let key = slot as u64 + 1;
        if let (None, Some(address)) = (kept.get(), first_address(key)) {
            name(key, address, &maps, &segments);
        }
    }
}

/// The label of the region keyed `key` whose first sampled address is
/// `address`: the one it was given while mapped, else what `maps` has at
/// `address` (kept for good if a mapping holds it).
pub fn name(key: u64, address: u64, maps: &[Mapping], segments: &[Segment]) -> String {
    let Some(kept) = key
        .checked_sub(1)
        .and_then(|slot| LABELS.get(slot as usize))
    else {
        return label(maps, segments, address);
    };
    if let Some(l) = kept.get() {
        return l.clone();
    }
    let l = label(maps, segments, address);
    if l == NOT_MAPPED {
        return l;
    }
    kept.publish_leaked_once(l).clone()
}

/// The loaded segments of `modules`, for [`label`].
pub fn module_segments(modules: &[Arc<ModuleData>]) -> Vec<Segment<'_>> {
    modules
        .iter()
        .flat_map(|m| {
            m.info.segments.iter().map(|&(start, end, exec)| Segment {
                start,
                end,
                exec,
                path: &m.info.path,
            })
        })
        .collect()
}

/// One line of `/proc/self/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// The path or pseudo-name (`[heap]`), empty for an anonymous mapping.
    pub name: String,
}

/// The mappings of a `/proc/PID/maps` text, in address order (lines that
/// do not parse are left out).
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let (range, perms) = (fields.next()?, fields.next()?);
            let (start, end) = range.split_once('-')?;
            let perms = perms.as_bytes();
            // Offset, device, inode, then the name after spaces.
            let name = fields.nth(3).unwrap_or("").trim_start();
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                read: perms.first() == Some(&b'r'),
                write: perms.get(1) == Some(&b'w'),
                exec: perms.get(2) == Some(&b'x'),
                name: name.to_string(),
            })
        })
        .collect()
}

/// This process's mappings now (empty if the map cannot be read). Once
/// the kernel refused the library's heap memory, only what the first
/// bytes of the map's text hold that the reserve can spare (the text and
/// its mappings are sized by the process's mappings, not by the
/// library's tables): at most a quarter of what it can spare, up to
/// 1 MiB; the mappings after them are left out.
pub fn read_maps() -> Vec<Mapping> {
    if !crate::sys::heap::short_of_memory() {
        return std::fs::read_to_string("/proc/self/maps")
            .map(|t| parse_maps(&t))
            .unwrap_or_default();
    }
    use std::io::Read;
    let spare = crate::sys::heap::reserve_left().saturating_sub(crate::sys::heap::KEPT);
    let limit = (spare / 4).min(1 << 20);
    let mut text: Vec<u8> = Vec::new();
    // (Room for the end-of-file probe: the read never grows the buffer.)
    if limit == 0 || text.try_reserve_exact(limit + 64).is_err() {
        return Vec::new();
    }
    let Ok(file) = std::fs::File::open("/proc/self/maps") else {
        return Vec::new();
    };
    let _ = file.take(limit as u64).read_to_end(&mut text);
    // A line cut by the limit is left out.
    let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    std::str::from_utf8(&text[..whole])
        .map(parse_maps)
        .unwrap_or_default()
}

/// A loaded module's segment: runtime range, executable, module path.
pub struct Segment<'a> {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    pub path: &'a str,
}

/// glibc's arena heaps (`HEAP_MAX_SIZE` on 64-bit): each is a mapping of
/// this size aligned to it, read-write as far as used, no-access above.
const ARENA_BYTES: u64 = 64 << 20;
/// The largest no-access mapping below a read-write one that is taken for
/// a thread stack's guard (glibc's default guard is a page, programs set
/// up to a few).
const MAX_GUARD_BYTES: u64 = 1 << 20;

/// Linux's default `vm.mmap_min_addr`: nothing is mapped below it.
pub const LOWEST_MAPPABLE: u64 = 0x10000;
/// The end of x86-64's 47-bit user address space: higher addresses are
/// mapped only on request (5-level paging), never by default.
pub const USER_TOP: u64 = 1 << 47;
/// The end of the user address space with 5-level paging (57-bit).
pub const USER_TOP_5LEVEL: u64 = 1 << 56;
/// The label of an address below [`LOWEST_MAPPABLE`].
const NULL_PAGE: &str =
    "null page (never mapped: a null pointer's offset, or an address recovered wrongly)";
/// The label of an address above [`USER_TOP`] in a process with no
/// mapping there.
const OUTSIDE: &str =
    "beyond the 47-bit address space (never mapped: an address recovered wrongly)";

/// Why a System V segment is an unknown address: the profiler's `shmat`
/// hook tracks the segments it sees.
const NOT_SHMAT: &str =
    "not tracked (attached by a raw system call or a library's own call of libc's shmat)";

/// The key of a System V segment's memory-map name (`/SYSV0000abcd
/// (deleted)`: the kernel's name for every attached segment).
fn sysv_key(name: &str) -> Option<u32> {
    let hex = name.strip_prefix("/SYSV")?;
    let hex = hex.strip_suffix(" (deleted)").unwrap_or(hex);
    (hex.len() == 8).then(|| u32::from_str_radix(hex, 16).ok())?
}

/// What was at `addr` in `maps` (address order), with the loaded
/// modules' `segments`: the text after `<unknown address: ` of its row.
pub fn label(maps: &[Mapping], segments: &[Segment], addr: u64) -> String {
    let i = maps.partition_point(|m| m.end <= addr);
    let Some(m) = maps.get(i).filter(|m| m.start <= addr) else {
        return if addr < LOWEST_MAPPABLE {
            NULL_PAGE.into()
        } else if addr >= USER_TOP
            && !maps
                .iter()
                .any(|m| m.start >= USER_TOP && m.start < USER_TOP_5LEVEL)
        {
            OUTSIDE.into()
        } else {
            NOT_MAPPED.into()
        };
    };
    let below = i.checked_sub(1).and_then(|j| maps.get(j));
    let above = maps.get(i + 1);
    let no_access = !m.read && !m.write && !m.exec;
    // An arena heap: starts aligned, and with the no-access rest of its
    // reservation above it (if any) spans it exactly.
    let arena_start = |m: &Mapping| {
        m.name.is_empty() && m.start % ARENA_BYTES == 0 && m.end - m.start <= ARENA_BYTES
    };
    let in_arena = |rw: &Mapping, rest: Option<&Mapping>| {
        arena_start(rw)
            && (rw.end - rw.start == ARENA_BYTES
                || rest.is_some_and(|r| {
                    r.name.is_empty()
                        && !r.read
                        && !r.write
                        && r.start == rw.end
                        && r.end == rw.start + ARENA_BYTES
                }))
    };
    if let Some(key) = sysv_key(&m.name) {
        return match key {
            0 => format!("System V shared memory (IPC_PRIVATE) {NOT_SHMAT}"),
            key => format!("System V shared memory (key {key:#010x}) {NOT_SHMAT}"),
        };
    }
    match m.name.as_str() {
        "[vdso]" | "[vvar]" | "[vvar_vclock]" | "[vsyscall]" => "[vdso]/[vvar]".into(),
        "[heap]" => "[heap] outside any block (malloc metadata)".into(),
        "[stack]" => "[stack] outside the main thread's tracked stack".into(),
        "" if no_access => {
            if below.is_some_and(|b| in_arena(b, Some(m))) {
                "glibc malloc arena, reserved part".into()
            } else if m.end - m.start <= MAX_GUARD_BYTES
                && above.is_some_and(|a| a.start == m.end && a.read && a.write)
            {
                "guard page of a thread stack".into()
            } else {
                "no-access mapping (reserved address space)".into()
            }
        }
        "" if in_arena(m, above) => "glibc malloc arena outside any block (malloc metadata)".into(),
        "" if below.is_some_and(|b| {
            b.name.is_empty()
                && !b.read
                && !b.write
                && b.end == m.start
                && b.end - b.start <= MAX_GUARD_BYTES
        }) =>
        {
            "anonymous mapping above a guard page (stack of a thread not tracked)".into()
        }
        "" => "anonymous mapping not tracked (made before the profiler started, by the loader or by a raw system call)".into(),
        name if name.starts_with('[') => format!("mapping {name}"),
        path => {
            let path = path.strip_suffix(" (deleted)").unwrap_or(path);
            let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
            // A loaded module's segment (or a mapping of its file: the
            // loader's own path may differ from the map's; or a shared
            // library the loader is loading, named before the profiler
            // knows the module), one row per kind over all modules: the
            // accesses below it say whose.
            let library = |p: &str| {
                let b = base(p);
                b.ends_with(".so") || b.contains(".so.")
            };
            let code = match segments.iter().find(|s| s.start <= addr && addr < s.end) {
                Some(s) => Some(s.exec),
                None => (library(path) || segments.iter().any(|s| base(s.path) == base(path)))
                    .then_some(m.exec),
            };
            match code {
                Some(true) => "code of a loaded module (read as data)".into(),
                Some(false) => ".got, .data.rel.ro or ELF tables of a loaded module".into(),
                None => format!("file mapping {path}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
555555554000-555555556000 r--p 00000000 08:01 131 /usr/bin/prog
555555556000-555555558000 r-xp 00002000 08:01 131 /usr/bin/prog
555555559000-55555557a000 rw-p 00000000 00:00 0                          [heap]
7ffff0000000-7ffff0021000 rw-p 00000000 00:00 0 
7ffff0021000-7ffff4000000 ---p 00000000 00:00 0 
7ffff5000000-7ffff5001000 ---p 00000000 00:00 0 
7ffff5001000-7ffff5801000 rw-p 00000000 00:00 0 
7ffff6000000-7ffff6100000 rw-p 00000000 00:00 0 
7ffff7000000-7ffff7100000 r--p 00000000 08:01 77 /usr/lib/locale/locale-archive
7ffff7200000-7ffff7201000 rw-s 00000000 00:05 12 /dev/shm/seg name (deleted)
7ffff7300000-7ffff7303000 rw-s 00000000 00:01 7 /SYSV00000000 (deleted)
7ffff7400000-7ffff7401000 rw-s 00000000 00:01 8 /SYSV0001e240 (deleted)
7ffff7500000-7ffff7501000 r--p 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30
7ffff7fc1000-7ffff7fc5000 r--p 00000000 00:00 0                          [vvar]
7ffff7fc5000-7ffff7fc7000 r-xp 00000000 00:00 0                          [vdso]
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]
";

    fn label_of(addr: u64) -> String {
        let maps = parse_maps(MAPS);
        let segments = [Segment {
            start: 0x5555_5555_6000,
            end: 0x5555_5555_8000,
            exec: true,
            path: "/usr/bin/prog",
        }];
        label(&maps, &segments, addr)
    }

    #[test]
    fn maps_lines_parse_with_names_that_hold_spaces() {
        let maps = parse_maps(MAPS);
        assert_eq!(maps.len(), 16);
        assert_eq!(maps[2].name, "[heap]");
        assert!(maps[2].read && maps[2].write && !maps[2].exec);
        assert_eq!(maps[3].name, "");
        assert_eq!(maps[9].name, "/dev/shm/seg name (deleted)");
        assert_eq!(
            (maps[15].start, maps[15].end),
            (0x7fff_fffd_e000, 0x7fff_ffff_f000)
        );
    }

    #[test]
    fn every_kind_of_mapping_has_its_label() {
        assert_eq!(label_of(0x7fff_f7fc_1008), "[vdso]/[vvar]");
        assert_eq!(label_of(0x7fff_f7fc_6000), "[vdso]/[vvar]");
        assert_eq!(
            label_of(0x5555_5556_0000),
            "[heap] outside any block (malloc metadata)"
        );
        assert_eq!(
            label_of(0x7fff_f000_0010),
            "glibc malloc arena outside any block (malloc metadata)"
        );
        assert_eq!(
            label_of(0x7fff_f100_0000),
            "glibc malloc arena, reserved part"
        );
        assert_eq!(label_of(0x7fff_f500_0010), "guard page of a thread stack");
        assert_eq!(
            label_of(0x7fff_f500_2000),
            "anonymous mapping above a guard page (stack of a thread not tracked)"
        );
        assert!(label_of(0x7fff_f600_0000).starts_with("anonymous mapping not tracked"));
        assert_eq!(
            label_of(0x7fff_f700_0100),
            "file mapping /usr/lib/locale/locale-archive"
        );
        assert_eq!(label_of(0x7fff_f720_0000), "file mapping /dev/shm/seg name");
        // A library mapped before the profiler knows it as a module.
        assert_eq!(
            label_of(0x7fff_f750_0000),
            ".got, .data.rel.ro or ELF tables of a loaded module"
        );
        assert_eq!(
            label_of(0x7fff_f730_2000),
            format!("System V shared memory (IPC_PRIVATE) {NOT_SHMAT}")
        );
        assert_eq!(
            label_of(0x7fff_f740_0000),
            format!("System V shared memory (key 0x0001e240) {NOT_SHMAT}")
        );
        assert_eq!(
            label_of(0x5555_5555_6100),
            "code of a loaded module (read as data)"
        );
        // Outside the module's segments, a mapping of its file.
        assert_eq!(
            label_of(0x5555_5555_4000),
            ".got, .data.rel.ro or ELF tables of a loaded module"
        );
        assert_eq!(
            label_of(0x7fff_ffff_e000),
            "[stack] outside the main thread's tracked stack"
        );
        assert_eq!(label_of(0x1000), NULL_PAGE);
        assert_eq!(label_of(0x1_5689_6d0a_f940), OUTSIDE);
        assert_eq!(label_of(0x5555_5555_8800), "not mapped at exit");
    }

    #[test]
    fn a_region_keeps_its_slot_and_first_address() {
        let a = 0x7f12_3440_0123;
        let k = key(a);
        assert_ne!(k, 0);
        assert_eq!(key(a + 0x1000), k, "same 2 MiB region");
        assert_ne!(key(a + (2 << 20)), k, "next region");
        assert_eq!(first_address(k), Some(a & !1));
        assert_eq!(first_address(0), None);
        assert_eq!(first_address(SLOTS as u64 + 1), None);
    }

    #[test]
    fn a_region_keeps_the_name_it_got_while_mapped() {
        let maps = parse_maps(MAPS);
        // A region named while mapped keeps its name once unmapped.
        let a = 0x7fff_f600_0040;
        let k = key(a);
        assert!(pending());
        let named = name(k, a, &maps, &[]);
        assert!(
            named.starts_with("anonymous mapping not tracked"),
            "{named}"
        );
        assert_eq!(name(k, a, &[], &[]), named);
        // One unmapped when first named is named again later.
        let b = 0x7fff_f740_0010;
        let k = key(b);
        assert_eq!(name(k, b, &[], &[]), NOT_MAPPED);
        assert!(name(k, b, &maps, &[]).starts_with("System V shared memory (key"));
        assert!(name(k, b, &[], &[]).starts_with("System V shared memory (key"));
        // Without a slot (full table): named from the map given.
        assert_eq!(name(0, b, &[], &[]), NOT_MAPPED);
    }
}
