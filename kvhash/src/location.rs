//! [`Location`]: where in a KV event's input a decoding error happened. A leaf module: the
//! error type ([`crate::Error`]) and the decoders ([`crate::events`]) both name it, and it
//! names neither (its public path stays `kvhash::events::Location`).

use std::fmt;

/// Where in the input a decoding error happened: the frame (multipart input), the byte offset
/// (inside that frame's payload, or the payload given alone) and a field path such as
/// `events[2].block_hashes[0]` or, for JSON, `$[3].data.blocks[0].block_hash`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    /// Index of the ZMQ frame, when the input was a multipart message.
    pub frame: Option<usize>,
    /// Byte offset inside the payload (msgpack formats).
    pub offset: Option<usize>,
    /// Field path; empty when the error is not inside a known field.
    pub path: String,
}

impl Location {
    /// A location at a byte offset.
    pub fn offset(offset: usize) -> Self {
        Location {
            offset: Some(offset),
            ..Location::default()
        }
    }

    /// A location at a JSON path.
    pub fn path(path: impl Into<String>) -> Self {
        Location {
            path: path.into(),
            ..Location::default()
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(fr) = self.frame {
            parts.push(format!("frame {fr}"));
        }
        if let Some(o) = self.offset {
            parts.push(format!("byte {o}"));
        }
        if !self.path.is_empty() {
            parts.push(self.path.clone());
        }
        if parts.is_empty() {
            f.write_str("start of input")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}
