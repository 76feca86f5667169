//! Function ranges from a module's unwind table (`.eh_frame_hdr` and the
//! FDEs of `.eh_frame`), for code that has no symbol: a stripped library
//! keeps only its exported functions in `.dynsym`, but the unwind table
//! still has one entry per function, static ones included.
//!
//! mem:soft decodes forward from a known instruction boundary (a function's
//! start, or an anchor found from one, [`crate::access::anchors`]); without one it
//! guesses the instruction before the IP backwards, and a wrong guess
//! decodes the bytes out of step: Open MPI's `mca_btl_vader.so` polls in a
//! static function, where `mov 0x28(%r14),%rax` read from its third byte
//! is `sub %r9b,-0xffeb722(%rcx)`, an access to an address of no object
//! (6-8% of LAMMPS's memory samples were `<unknown address>` this way).
//!
//! Only the usual encodings are read (GCC's and LLVM's: a table of 4-byte
//! offsets from the header, FDEs with 4-byte PC-relative starts); anything
//! else gives no ranges, and the module keeps its symbols alone.

/// `DW_EH_PE_udata4`.
const UDATA4: u8 = 0x03;
/// `DW_EH_PE_datarel | DW_EH_PE_sdata4`: the search table's encoding.
const DATAREL_SDATA4: u8 = 0x3b;
/// `DW_EH_PE_omit`.
const OMIT: u8 = 0xff;

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The functions (start, end) in the module's own virtual addresses that
/// its unwind table describes, sorted by start. `hdr` and `frame` are the
/// contents of `.eh_frame_hdr` and `.eh_frame` with their addresses.
pub fn function_ranges(hdr: (&[u8], u64), frame: (&[u8], u64)) -> Vec<(u64, u64)> {
    let (h, h_addr) = hdr;
    let (f, f_addr) = frame;
    // version, eh_frame_ptr encoding, fde_count encoding, table encoding.
    let (Some(&1), Some(&ptr_enc), Some(&count_enc), Some(&table_enc)) =
        (h.first(), h.get(1), h.get(2), h.get(3))
    else {
        return Vec::new();
    };
    // The eh_frame pointer: 4 bytes in every encoding compilers emit.
    if ptr_enc == OMIT || ptr_enc & 0x0f != 0x0b && ptr_enc & 0x0f != UDATA4 {
        return Vec::new();
    }
    if count_enc != UDATA4 || table_enc != DATAREL_SDATA4 {
        return Vec::new();
    }
    let Some(count) = u32_at(h, 8) else {
        return Vec::new();
    };
    let count = count as usize;
    let table = 12;
    if h.len() < table + count * 8 {
        return Vec::new();
    }
    let at = |i: usize| -> (u64, u64) {
        let start = u32_at(h, table + i * 8).unwrap_or(0) as i32;
        let fde = u32_at(h, table + i * 8 + 4).unwrap_or(0) as i32;
        (
            h_addr.wrapping_add_signed(start as i64),
            h_addr.wrapping_add_signed(fde as i64),
        )
    };
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let (start, fde) = at(i);
        // The FDE: length, CIE pointer, PC begin (PC-relative sdata4, as
        // checked against the table), PC range.
        let range = fde
            .checked_sub(f_addr)
            .map(|o| o as usize)
            .filter(|&o| u32_at(f, o).is_some_and(|len| len != 0 && len != u32::MAX))
            .and_then(|o| {
                let begin = u32_at(f, o + 8)? as i32;
                let pc = (f_addr + o as u64 + 8).wrapping_add_signed(begin as i64);
                (pc == start).then(|| u32_at(f, o + 12)).flatten()
            });
        let end = match range {
            Some(r) if r > 0 => start + r as u64,
            // Unreadable: up to the next function's start.
            _ => match (i + 1 < count).then(|| at(i + 1).0) {
                Some(next) if next > start => next,
                _ => continue,
            },
        };
        out.push((start, end));
    }
    out.sort_unstable();
    out
}

/// `ranges` that overlap none of `symbols` (sorted by start).
pub fn without_symbols(ranges: Vec<(u64, u64)>, symbols: &[(u64, u64)]) -> Vec<(u64, u64)> {
    // The furthest end among the symbols up to each one.
    let reach: Vec<u64> = symbols
        .iter()
        .scan(0u64, |m, &(_, e)| {
            *m = (*m).max(e);
            Some(*m)
        })
        .collect();
    ranges
        .into_iter()
        .filter(|&(s, e)| {
            // The symbols that start before `e` must all end by `s`.
            let i = symbols.partition_point(|f| f.0 < e);
            i == 0 || reach[i - 1] <= s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header and `.eh_frame` with FDEs for `funcs` (start, size).
    fn tables(funcs: &[(u64, u32)]) -> (Vec<u8>, u64, Vec<u8>, u64) {
        let h_addr = 0x9000u64;
        let f_addr = 0xa000u64;
        let mut f = Vec::new();
        // A CIE of 16 bytes (contents unread).
        f.extend_from_slice(&12u32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&[0; 8]);
        let mut entries = Vec::new();
        for &(start, size) in funcs {
            let o = f.len() as u64;
            f.extend_from_slice(&16u32.to_le_bytes());
            f.extend_from_slice(&((o + 4) as u32).to_le_bytes());
            let pc_field = f_addr + o + 8;
            f.extend_from_slice(&((start as i64 - pc_field as i64) as i32).to_le_bytes());
            f.extend_from_slice(&size.to_le_bytes());
            f.extend_from_slice(&[0; 4]);
            entries.push((start, f_addr + o));
        }
        let mut h = vec![1, 0x1b, UDATA4, DATAREL_SDATA4];
        h.extend_from_slice(&((f_addr as i64 - (h_addr + 4) as i64) as i32).to_le_bytes());
        h.extend_from_slice(&(funcs.len() as u32).to_le_bytes());
        for (start, fde) in entries {
            h.extend_from_slice(&((start as i64 - h_addr as i64) as i32).to_le_bytes());
            h.extend_from_slice(&((fde as i64 - h_addr as i64) as i32).to_le_bytes());
        }
        (h, h_addr, f, f_addr)
    }

    #[test]
    fn ranges_come_from_the_fdes() {
        let (h, ha, f, fa) = tables(&[(0x2000, 0x10), (0x4ab0, 0x298), (0x4d50, 0x6b0)]);
        assert_eq!(
            function_ranges((&h, ha), (&f, fa)),
            vec![(0x2000, 0x2010), (0x4ab0, 0x4d48), (0x4d50, 0x5400)]
        );
        // Another table encoding: nothing, not a guess.
        let mut other = h.clone();
        other[3] = 0x1b;
        assert!(function_ranges((&other, ha), (&f, fa)).is_empty());
        // A damaged FDE: up to the next start.
        let mut bad = f.clone();
        bad[16 + 8] ^= 0x40;
        let got = function_ranges((&h, ha), (&bad, fa));
        assert!(got.contains(&(0x2000, 0x4ab0)), "{got:x?}");
    }

    #[test]
    fn symbols_win() {
        let ranges = vec![(0x2000, 0x2010), (0x4ab0, 0x4d48), (0x4d50, 0x5400)];
        let symbols = [(0x4ab0, 0x4d48)];
        assert_eq!(
            without_symbols(ranges, &symbols),
            vec![(0x2000, 0x2010), (0x4d50, 0x5400)]
        );
        let ranges = vec![(0x4d50, 0x5400)];
        assert!(without_symbols(ranges.clone(), &[(0x5000, 0x5100)]).is_empty());
        assert!(without_symbols(ranges, &[(0x4d00, 0x4d60)]).is_empty());
    }
}
