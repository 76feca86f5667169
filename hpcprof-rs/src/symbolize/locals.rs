//! The variables of a function's stack frame, from its DWARF: each local
//! and parameter whose location is one `DW_OP_fbreg` from a frame base the
//! CFA defines (gcc's `DW_OP_call_frame_cfa`, or `%rbp` after the usual
//! prologue), as its offset from the CFA and its size. The sample handler
//! records where in its frame a stack access fell (data address minus the
//! frame's CFA); these name the variable there.

use gimli::{AttributeValue, DebuggingInformationEntry, Operation, Reader, UnitOffset, UnitRef};

/// One variable of a frame: it occupies `[offset, offset + size)` from the
/// frame's CFA (offsets are negative: the frame lies below its CFA).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameLocal {
    pub name: String,
    pub offset: i64,
    pub size: u64,
}

/// Distance from the CFA to a frame base in `%rbp` after `push %rbp; mov
/// %rsp,%rbp` (return address and saved `%rbp`).
const RBP_BELOW_CFA: i64 = 16;

/// The variables in the frame of the function (a `DW_TAG_subprogram` of
/// `unit`, with its inlined subroutines and lexical blocks) whose code
/// covers `probe`; empty if none does or its frame base is not the CFA.
pub fn frame_locals<R: Reader>(
    unit: UnitRef<'_, R>,
    probe: u64,
) -> Result<Vec<FrameLocal>, gimli::Error> {
    let mut cursor = unit.entries();
    let mut inside: Option<(isize, i64)> = None;
    let mut out = Vec::new();
    while let Some(e) = cursor.next_dfs()? {
        let depth = e.depth();
        match inside {
            Some((d, _)) if depth <= d => break,
            None if e.tag() == gimli::DW_TAG_subprogram && covers(unit, e, probe)? => {
                match frame_base(unit, e) {
                    Some(base) => inside = Some((depth, base)),
                    None => return Ok(Vec::new()),
                }
            }
            Some((_, base))
                if matches!(
                    e.tag(),
                    gimli::DW_TAG_variable | gimli::DW_TAG_formal_parameter
                ) =>
            {
                if let Some(local) = local(unit, e, base) {
                    out.push(local);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The variable that holds `offset` (from the CFA): the smallest one that
/// covers it (block-scoped variables may share a slot with an outer one).
pub fn variable_at(locals: &[FrameLocal], offset: i64) -> Option<&FrameLocal> {
    locals
        .iter()
        .filter(|l| l.size > 0 && offset >= l.offset && offset - l.offset < l.size as i64)
        .min_by_key(|l| l.size)
}

fn covers<R: Reader>(
    unit: UnitRef<'_, R>,
    e: &DebuggingInformationEntry<R>,
    probe: u64,
) -> Result<bool, gimli::Error> {
    let mut ranges = unit.die_ranges(e)?;
    while let Some(r) = ranges.next()? {
        if r.begin <= probe && probe < r.end {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Where the subprogram's frame base is, from the CFA: 0 for
/// `DW_OP_call_frame_cfa`, -16 for `DW_OP_reg6` (`%rbp`).
fn frame_base<R: Reader>(unit: UnitRef<'_, R>, e: &DebuggingInformationEntry<R>) -> Option<i64> {
    let Some(AttributeValue::Exprloc(expr)) = e.attr_value(gimli::DW_AT_frame_base) else {
        return None;
    };
    let mut ops = expr.operations(unit.encoding());
    let first = ops.next().ok()??;
    if !matches!(ops.next(), Ok(None)) {
        return None;
    }
    match first {
        Operation::CallFrameCFA => Some(0),
        Operation::Register { register } if register == gimli::X86_64::RBP => Some(-RBP_BELOW_CFA),
        _ => None,
    }
}

/// A variable at one frame offset (`DW_OP_fbreg`), named and sized by its
/// own attributes or its abstract origin's (an inlined or out-of-line
/// instance).
fn local<R: Reader>(
    unit: UnitRef<'_, R>,
    e: &DebuggingInformationEntry<R>,
    base: i64,
) -> Option<FrameLocal> {
    let Some(AttributeValue::Exprloc(expr)) = e.attr_value(gimli::DW_AT_location) else {
        return None;
    };
    let mut ops = expr.operations(unit.encoding());
    let Ok(Some(Operation::FrameOffset { offset })) = ops.next() else {
        return None;
    };
    if !matches!(ops.next(), Ok(None)) {
        return None;
    }
    let origin = match e.attr_value(gimli::DW_AT_abstract_origin) {
        Some(AttributeValue::UnitRef(o)) => unit.entry(o).ok(),
        _ => None,
    };
    let attr = |at: gimli::DwAt| {
        e.attr_value(at)
            .or_else(|| origin.as_ref().and_then(|o| o.attr_value(at)))
    };
    let name = unit.attr_string(attr(gimli::DW_AT_name)?).ok()?;
    let name = name.to_string_lossy().ok()?.into_owned();
    let size = match attr(gimli::DW_AT_type) {
        Some(AttributeValue::UnitRef(t)) => type_size(unit, t, 0).unwrap_or(0),
        _ => 0,
    };
    Some(FrameLocal {
        name,
        offset: base.wrapping_add(offset),
        size,
    })
}

/// Bytes of the type at `t`: its `DW_AT_byte_size`, through typedefs and
/// qualifiers, and arrays as element size times their bounds.
fn type_size<R: Reader>(unit: UnitRef<'_, R>, t: UnitOffset<R::Offset>, depth: u32) -> Option<u64> {
    if depth > 16 {
        return None;
    }
    let e = unit.entry(t).ok()?;
    if let Some(size) = e
        .attr_value(gimli::DW_AT_byte_size)
        .and_then(|v| v.udata_value())
    {
        return Some(size);
    }
    let inner = match e.attr_value(gimli::DW_AT_type) {
        Some(AttributeValue::UnitRef(o)) => Some(o),
        _ => None,
    };
    if e.tag() != gimli::DW_TAG_array_type {
        return type_size(unit, inner?, depth + 1);
    }
    let element = type_size(unit, inner?, depth + 1)?;
    let mut count = 1u64;
    let mut tree = unit.entries_tree(Some(t)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let c = child.entry();
        if c.tag() != gimli::DW_TAG_subrange_type {
            continue;
        }
        let n = match c
            .attr_value(gimli::DW_AT_count)
            .and_then(|v| v.udata_value())
        {
            Some(n) => n,
            None => c
                .attr_value(gimli::DW_AT_upper_bound)
                .and_then(|v| v.udata_value())?
                .checked_add(1)?,
        };
        count = count.checked_mul(n)?;
    }
    element.checked_mul(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(name: &str, offset: i64, size: u64) -> FrameLocal {
        FrameLocal {
            name: name.into(),
            offset,
            size,
        }
    }

    #[test]
    fn the_smallest_covering_variable_names_an_offset() {
        let locals = [l("buf", -8208, 8192), l("i", -16, 4), l("tmp", -8208, 8)];
        assert_eq!(variable_at(&locals, -8000).unwrap().name, "buf");
        assert_eq!(variable_at(&locals, -8208).unwrap().name, "tmp");
        assert_eq!(variable_at(&locals, -16).unwrap().name, "i");
        assert_eq!(variable_at(&locals, -13).unwrap().name, "i");
        assert_eq!(variable_at(&locals, -12), None);
        assert_eq!(variable_at(&locals, -8209), None);
    }
}
