//! The header in front of every file: magic, version, flags, then MessagePack.

use serde::{de::DeserializeOwned, Serialize};

/// Length of the header in bytes.
pub const HEADER_LEN: usize = 16;

/// Why a file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("file is too short to be a {what} ({len} bytes; truncated or empty)")]
    Truncated { what: &'static str, len: usize },
    #[error("not a {what} (bad magic bytes)")]
    BadMagic { what: &'static str },
    #[error("{what} format version {found} is newer than this tool understands (up to {supported}); upgrade the tools")]
    NewerVersion {
        what: &'static str,
        found: u32,
        supported: u32,
    },
    #[error("{what} is damaged: {source}")]
    Corrupt {
        what: &'static str,
        #[source]
        source: rmp_serde::decode::Error,
    },
    #[error("{what} is inconsistent: {msg}")]
    Invalid { what: &'static str, msg: String },
    #[error("could not encode {what}: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: rmp_serde::encode::Error,
    },
}

/// Describes one file kind: its magic, current version and a name for errors.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    pub magic: [u8; 8],
    pub version: u32,
    pub what: &'static str,
}

/// Header + MessagePack body (struct fields by name, so that later versions
/// can add fields).
pub fn encode<T: Serialize>(kind: Kind, value: &T) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(&kind.magic);
    out.extend_from_slice(&kind.version.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    rmp_serde::encode::write_named(&mut out, value).map_err(|source| FormatError::Encode {
        what: kind.what,
        source,
    })?;
    Ok(out)
}

/// [`encode`] straight into a writer (no intermediate buffer: a large
/// database is not held twice in memory).
pub fn encode_to<T: Serialize, W: std::io::Write>(
    kind: Kind,
    value: &T,
    mut out: W,
) -> Result<(), FormatError> {
    let io = |e: std::io::Error| FormatError::Encode {
        what: kind.what,
        source: <rmp_serde::encode::Error as serde::ser::Error>::custom(e),
    };
    out.write_all(&kind.magic).map_err(io)?;
    out.write_all(&kind.version.to_le_bytes()).map_err(io)?;
    out.write_all(&0u32.to_le_bytes()).map_err(io)?;
    rmp_serde::encode::write_named(&mut out, value).map_err(|source| FormatError::Encode {
        what: kind.what,
        source,
    })?;
    Ok(())
}

/// Checks the header and decodes the body. Never panics on bad input.
pub fn decode<T: DeserializeOwned>(kind: Kind, bytes: &[u8]) -> Result<T, FormatError> {
    let what = kind.what;
    if bytes.len() < HEADER_LEN {
        if bytes.len() >= 8 && bytes[..8] != kind.magic {
            return Err(FormatError::BadMagic { what });
        }
        return Err(FormatError::Truncated {
            what,
            len: bytes.len(),
        });
    }
    if bytes[..8] != kind.magic {
        return Err(FormatError::BadMagic { what });
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version > kind.version {
        return Err(FormatError::NewerVersion {
            what,
            found: version,
            supported: kind.version,
        });
    }
    let body = &bytes[HEADER_LEN..];
    if body.is_empty() {
        return Err(FormatError::Truncated {
            what,
            len: bytes.len(),
        });
    }
    // `from_slice` borrows lengths from the input, so a corrupt length
    // prefix cannot make it allocate more than the file holds.
    rmp_serde::from_slice(body).map_err(|source| FormatError::Corrupt { what, source })
}
