//! Names of mapped memory. A file-backed or shared mapping (`mmap` of a
//! file, of a `shm_open` or `memfd_create` descriptor) is a data object
//! named by its file, and a System V segment (`shmat`) by its key: the
//! name is the label of the mapping's site, so mappings of different
//! files from one call path stay apart (Open MPI's shared-memory
//! transport maps one `/dev/shm/vader_segment.*` file per rank from one
//! place). Pure byte formatting into a fixed buffer: the `mmap` and
//! `shmat` hooks build names without allocating.

use super::LABEL_BYTES;

/// A mapping's name, at most [`LABEL_BYTES`] bytes.
#[derive(Clone, Copy)]
pub struct MapName {
    bytes: [u8; LABEL_BYTES],
    len: usize,
}

impl MapName {
    fn new() -> MapName {
        MapName {
            bytes: [0; LABEL_BYTES],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(LABEL_BYTES - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// What a mapping whose file cannot be named is called.
pub const UNNAMED_FILE: &[u8] = b"<mapped file>";
const DELETED: &[u8] = b" (deleted)";
const CUT: &[u8] = b"...";

/// The name of a mapping of the file at `path` (as `/proc/self/fd` links
/// read): without the kernel's ` (deleted)` suffix (a segment file is
/// often unlinked once every process has it mapped, and its name must not
/// change with that); a path longer than [`LABEL_BYTES`] keeps its end
/// (the file name) after `...`, cut at a character boundary.
pub fn file_name(path: &[u8]) -> MapName {
    let path = path.strip_suffix(DELETED).unwrap_or(path);
    let mut name = MapName::new();
    if path.is_empty() {
        name.push(UNNAMED_FILE);
    } else if path.len() <= LABEL_BYTES {
        name.push(path);
    } else {
        let mut from = path.len() - (LABEL_BYTES - CUT.len());
        // Not inside a UTF-8 sequence (continuation bytes are 10xxxxxx).
        while from < path.len() && path[from] & 0xC0 == 0x80 {
            from += 1;
        }
        name.push(CUT);
        name.push(&path[from..]);
    }
    name
}

/// The name of System V shared-memory segment `id` with key `key`:
/// `SysV shm key 0x0000abcd`, or `SysV shm id 42` for a private segment
/// (`IPC_PRIVATE`, key 0), whose id is what the processes share.
pub fn shm_name(key: i32, id: i32) -> MapName {
    let mut name = MapName::new();
    if key != 0 {
        name.push(b"SysV shm key 0x");
        let k = key as u32;
        for shift in (0..8).rev() {
            name.push(&[b"0123456789abcdef"[(k >> (shift * 4)) as usize & 15]]);
        }
    } else {
        name.push(b"SysV shm id ");
        let mut digits = [0u8; 10];
        let (mut n, mut v) = (0, id.max(0) as u32);
        loop {
            digits[9 - n] = b'0' + (v % 10) as u8;
            n += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        name.push(&digits[10 - n..]);
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: MapName) -> String {
        String::from_utf8(n.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn files_are_named_by_their_path_without_deleted() {
        assert_eq!(text(file_name(b"/tmp/data.bin")), "/tmp/data.bin");
        assert_eq!(
            text(file_name(b"/dev/shm/vader_segment.vm.1f2e0001.0 (deleted)")),
            "/dev/shm/vader_segment.vm.1f2e0001.0"
        );
        assert_eq!(text(file_name(b"")), "<mapped file>");
    }

    #[test]
    fn long_paths_keep_their_end() {
        let long = format!("/scratch/{}/é{}.dat", "d".repeat(40), "x".repeat(30));
        let name = text(file_name(long.as_bytes()));
        assert!(name.len() <= LABEL_BYTES, "{name}");
        assert!(name.starts_with("..."), "{name}");
        assert!(name.ends_with("xxx.dat"), "{name}");
        // A name cut inside the two-byte character starts after it.
        let cut = format!("/{}é{}", "a".repeat(10), "b".repeat(LABEL_BYTES - 4));
        let name = text(file_name(cut.as_bytes()));
        assert_eq!(name, format!("...{}", "b".repeat(LABEL_BYTES - 4)));
    }

    #[test]
    fn segments_are_named_by_key_or_id() {
        assert_eq!(text(shm_name(0x1234abcd, 7)), "SysV shm key 0x1234abcd");
        assert_eq!(text(shm_name(-1, 7)), "SysV shm key 0xffffffff");
        assert_eq!(text(shm_name(0, 0)), "SysV shm id 0");
        assert_eq!(text(shm_name(0, 98314)), "SysV shm id 98314");
    }
}
