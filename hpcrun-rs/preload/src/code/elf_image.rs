//! What start-up needs of a module, read from its loaded image instead of
//! its file: the build id from the PT_NOTE segments and the unwind
//! sections from PT_GNU_EH_FRAME (the `.eh_frame_hdr` the loader mapped,
//! whose first field locates `.eh_frame`). The loader's program headers
//! (`dl_iterate_phdr`) say where they are; the section headers, which
//! the loader does not map, are never needed at start.
//!
//! Ranges are stated virtual addresses (runtime minus the load bias), as
//! the unwinder takes them ([`UnwindSections`]):
//! * `.eh_frame_hdr`: exactly PT_GNU_EH_FRAME.
//! * `.eh_frame`: from the address the header gives to the end of the
//!   PT_LOAD segment holding it. Its true end is only in the section
//!   headers; lookups go through the header's sorted table, which points
//!   at the section's entries only, so the longer slice finds the same
//!   entries.
//! * `.text`: the executable PT_LOAD segment. For ELF the unwinder takes
//!   only its start, as the base of `DW_EH_PE_textrel` pointers, which
//!   x86-64 compilers and linkers do not emit (nor `DW_EH_PE_datarel`
//!   ones, whose base `.got` is therefore left unset).

use super::unwind::UnwindSections;
use crate::sys::LoadedModule;

/// `NT_GNU_BUILD_ID`: a note of owner "GNU" holding the build id.
const NT_GNU_BUILD_ID: u32 = 3;

/// The build id and unwind sections of a loaded module, read from its
/// image. `None` when the image cannot answer (the unwind header has an
/// encoding this does not read): the caller reads the file instead.
pub fn facts(module: &LoadedModule) -> Option<(Option<Vec<u8>>, UnwindSections)> {
    let bias = module.bias;
    let build_id = module.notes.iter().find_map(|&(start, end, align)| {
        gnu_build_id(module.image_bytes(start, end)?, align).map(<[u8]>::to_vec)
    });
    let mut sections = UnwindSections::default();
    if let Some((start, end)) = module.eh_frame_hdr {
        let hdr = module.image_bytes(start, end)?;
        let eh_frame = eh_frame_address(hdr, start.wrapping_sub(bias))?;
        let (_, segment_end, _) = module.segments.iter().find(|&&(s, e, _)| {
            let at = eh_frame.wrapping_add(bias);
            at >= s && at < e
        })?;
        let text = module.segments.iter().find(|s| s.2)?;
        sections = UnwindSections {
            text: Some((text.0.wrapping_sub(bias), text.1.wrapping_sub(bias))),
            eh_frame: Some((eh_frame, segment_end.wrapping_sub(bias))),
            eh_frame_hdr: Some((start.wrapping_sub(bias), end.wrapping_sub(bias))),
            got: None,
        };
    }
    Some((build_id, sections))
}

/// The descriptor of the first GNU build-id note in `notes` (the bytes of
/// one PT_NOTE segment, whose entries are aligned to `align`: 4, or 8 for
/// segments aligned so).
pub fn gnu_build_id(notes: &[u8], align: u64) -> Option<&[u8]> {
    let align = if align <= 4 { 4 } else { 8 };
    let up = |n: usize| n.checked_add(align - 1).map(|n| n & !(align - 1));
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(notes.get(at..at + 4)?.try_into().ok()?))
    };
    let mut at = 0usize;
    while at + 12 <= notes.len() {
        let (namesz, descsz, kind) = (word(at)? as usize, word(at + 4)? as usize, word(at + 8)?);
        let name_at = at + 12;
        let desc_at = up(name_at.checked_add(namesz)?)?;
        let desc_end = desc_at.checked_add(descsz)?;
        let name = notes.get(name_at..name_at + namesz)?;
        let desc = notes.get(desc_at..desc_end)?;
        if kind == NT_GNU_BUILD_ID && name.strip_suffix(&[0]).unwrap_or(name) == b"GNU" {
            return Some(desc);
        }
        at = up(desc_end)?;
    }
    None
}

/// The stated address of `.eh_frame` from the first field of
/// `.eh_frame_hdr` (`hdr`, at stated address `hdr_address`): version 1,
/// then the pointer's encoding, two more encodings, the pointer.
/// `None` for a version or encoding this does not read.
pub fn eh_frame_address(hdr: &[u8], hdr_address: u64) -> Option<u64> {
    let (&version, &encoding) = (hdr.first()?, hdr.get(1)?);
    if version != 1 {
        return None;
    }
    let field = hdr.get(4..)?;
    let fixed = |n: usize| -> Option<[u8; 8]> {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(field.get(..n)?);
        Some(b)
    };
    let value = match encoding & 0x0f {
        0x00 | 0x04 | 0x0c => u64::from_le_bytes(fixed(8)?),
        0x02 => u16::from_le_bytes(fixed(2)?[..2].try_into().ok()?) as u64,
        0x03 => u32::from_le_bytes(fixed(4)?[..4].try_into().ok()?) as u64,
        0x0a => i16::from_le_bytes(fixed(2)?[..2].try_into().ok()?) as i64 as u64,
        0x0b => i32::from_le_bytes(fixed(4)?[..4].try_into().ok()?) as i64 as u64,
        _ => return None,
    };
    match encoding & 0x70 {
        0x00 => Some(value),
        // Relative to the field itself.
        0x10 => Some(hdr_address.wrapping_add(4).wrapping_add(value)),
        // Relative to the start of `.eh_frame_hdr`.
        0x30 => Some(hdr_address.wrapping_add(value)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
        let pad = |v: &mut Vec<u8>| v.resize(v.len().div_ceil(align) * align, 0);
        let mut v = Vec::new();
        v.extend((name.len() as u32).to_ne_bytes());
        v.extend((desc.len() as u32).to_ne_bytes());
        v.extend(kind.to_ne_bytes());
        v.extend(name);
        pad(&mut v);
        v.extend(desc);
        pad(&mut v);
        v
    }

    #[test]
    fn the_build_id_is_the_gnu_note_of_type_3_at_either_alignment() {
        for align in [4usize, 8] {
            let mut seg = note(b"GNU\0", 5, &[1; 12], align); // a property note
            seg.extend(note(b"Go\0\0", 3, &[7; 5], align)); // another owner
            seg.extend(note(b"GNU\0", 3, &[0xab, 0xcd, 0xef], align));
            assert_eq!(
                gnu_build_id(&seg, align as u64),
                Some(&[0xab, 0xcd, 0xef][..]),
                "align {align}"
            );
            assert_eq!(gnu_build_id(&seg[..seg.len() - 8], align as u64), None);
        }
        assert_eq!(gnu_build_id(&[], 4), None);
        // Sizes that run past the segment end the walk.
        let mut bad = note(b"GNU\0", 3, &[1; 20], 4);
        bad[4] = 0xff;
        assert_eq!(gnu_build_id(&bad, 4), None);
    }

    #[test]
    fn the_eh_frame_pointer_is_decoded_in_the_encodings_linkers_emit() {
        // pcrel | sdata4 (what GNU ld, gold, lld and mold write).
        let mut hdr = vec![1, 0x1b, 0x03, 0x3b];
        hdr.extend((-0x2000i32).to_le_bytes());
        assert_eq!(eh_frame_address(&hdr, 0x10_0000), Some(0x10_0004 - 0x2000));
        // datarel | udata4, absptr.
        let mut hdr = vec![1, 0x33, 0x03, 0x3b];
        hdr.extend(0x40u32.to_le_bytes());
        assert_eq!(eh_frame_address(&hdr, 0x1000), Some(0x1040));
        let mut hdr = vec![1, 0x00, 0x03, 0x3b];
        hdr.extend(0x1234_5678u64.to_le_bytes());
        assert_eq!(eh_frame_address(&hdr, 0x1000), Some(0x1234_5678));
        // Unknown version, omitted pointer, short header.
        assert_eq!(eh_frame_address(&[2, 0x1b, 3, 0x3b, 0, 0, 0, 0], 0), None);
        assert_eq!(eh_frame_address(&[1, 0xff, 3, 0x3b, 0, 0, 0, 0], 0), None);
        assert_eq!(eh_frame_address(&[1, 0x1b, 3, 0x3b, 0, 0], 0), None);
    }
}
