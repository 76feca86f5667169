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

/// The body of `bytes` after a header of `kind`: an error for a file too
/// short for the header, of another kind or of a newer version.
fn body(kind: Kind, bytes: &[u8]) -> Result<&[u8], FormatError> {
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
    Ok(&bytes[HEADER_LEN..])
}

/// Checks the header and decodes the body. Never panics on bad input.
pub fn decode<T: DeserializeOwned>(kind: Kind, bytes: &[u8]) -> Result<T, FormatError> {
    let what = kind.what;
    let body = body(kind, bytes)?;
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

/// The leading fields of a body, decoded one at a time (`encode` writes
/// a map of field names to values, in the struct's order): a reader can
/// take the first few fields of a large file without decoding, or even
/// reading, the rest. Never panics on bad input.
pub struct Fields<'a> {
    what: &'static str,
    rest: &'a [u8],
    left: u32,
    len: usize,
}

impl<'a> Fields<'a> {
    /// Checks the header of `bytes` (the whole file or its start) and
    /// opens its body.
    pub fn new(kind: Kind, bytes: &'a [u8]) -> Result<Self, FormatError> {
        let what = kind.what;
        let short = FormatError::Truncated {
            what,
            len: bytes.len(),
        };
        let body = body(kind, bytes)?;
        let (&marker, after) = body.split_first().ok_or(short)?;
        let (left, rest) = match marker {
            0x80..=0x8f => (u32::from(marker & 0x0f), after),
            0xde if after.len() >= 2 => (
                u32::from(u16::from_be_bytes([after[0], after[1]])),
                &after[2..],
            ),
            0xdf if after.len() >= 4 => (
                u32::from_be_bytes([after[0], after[1], after[2], after[3]]),
                &after[4..],
            ),
            0xde | 0xdf => {
                return Err(FormatError::Truncated {
                    what,
                    len: bytes.len(),
                })
            }
            _ => {
                return Err(FormatError::Invalid {
                    what,
                    msg: "its body is not a map of fields".into(),
                })
            }
        };
        Ok(Fields {
            what,
            rest,
            left,
            len: bytes.len(),
        })
    }

    /// The next field's name; None after the last field.
    pub fn next_name(&mut self) -> Result<Option<String>, FormatError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        self.value().map(Some)
    }

    /// The value of the field whose name was just read.
    pub fn value<T: DeserializeOwned>(&mut self) -> Result<T, FormatError> {
        let mut de = rmp_serde::Deserializer::new(std::io::Cursor::new(self.rest));
        match T::deserialize(&mut de) {
            Ok(value) => {
                let used = usize::try_from(de.position())
                    .unwrap_or(usize::MAX)
                    .min(self.rest.len());
                self.rest = &self.rest[used..];
                Ok(value)
            }
            Err(source) => Err(FormatError::Corrupt {
                what: self.what,
                source,
            }),
        }
    }

    /// Steps over the value of the field whose name was just read.
    pub fn skip(&mut self) -> Result<(), FormatError> {
        self.value::<serde::de::IgnoredAny>().map(|_| ())
    }

    /// Bytes given to [`Fields::new`] (for messages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes were given.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
