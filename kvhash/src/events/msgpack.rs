//! A small, strict, borrowing msgpack reader.
//!
//! Only what KV-event payloads need: every integer width (positive/negative fixint,
//! uint8/16/32/64, int8/16/32/64), float32/64, nil, bool, str (fixstr/str8/16/32), bin,
//! array and map headers (fix/16/32). Ext values are refused. Every read is bounds-checked
//! and reports the byte offset where the offending value starts; strings and byte strings are
//! borrowed from the input, never copied. Array and map lengths are checked against the bytes
//! left (every element needs at least one byte), so a forged length can never make a caller
//! pre-allocate more than the input size.

use super::{Limits, Location};
use crate::Error;

/// A msgpack integer, normalised: non-negative values are always `U`, whatever their width on
/// the wire (msgpack's signed formats may carry non-negative values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Int {
    /// 0 ..= 2^64-1.
    U(u64),
    /// -2^63 ..= -1.
    Neg(i64),
}

impl Int {
    /// The value as decimal text (for error messages).
    pub(crate) fn to_text(self) -> String {
        match self {
            Int::U(v) => v.to_string(),
            Int::Neg(v) => v.to_string(),
        }
    }
}

/// The msgpack type family of a head byte, for "found …" messages.
pub(crate) fn family(b: u8) -> &'static str {
    match b {
        0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3 => "integer",
        0x80..=0x8f | 0xde | 0xdf => "map",
        0x90..=0x9f | 0xdc | 0xdd => "array",
        0xa0..=0xbf | 0xd9..=0xdb => "string",
        0xc0 => "nil",
        0xc2 | 0xc3 => "bool",
        0xc4..=0xc6 => "binary",
        0xca | 0xcb => "float",
        0xc7..=0xc9 | 0xd4..=0xd8 => "ext",
        0xc1 => "reserved byte 0xc1",
    }
}

/// A cursor over one msgpack buffer.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    limits: Limits,
    /// What is left of [`Limits::max_decoded_bytes`].
    budget: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8], limits: &Limits) -> Self {
        Reader {
            buf,
            pos: 0,
            limits: limits.clone(),
            budget: limits.max_decoded_bytes,
        }
    }

    /// An empty vector with room for `n` values, charged against the payload's decoded-bytes
    /// budget first ([`Limits::max_decoded_bytes`]): over budget, nothing is allocated and
    /// the answer is [`Error::EventLimitExceeded`] at the current offset.
    pub(crate) fn vec<T>(&mut self, n: usize) -> Result<Vec<T>, Error> {
        let bytes = n.saturating_mul(std::mem::size_of::<T>());
        match self.budget.checked_sub(bytes) {
            Some(left) => {
                self.budget = left;
                Ok(Vec::with_capacity(n))
            }
            None => Err(Error::EventLimitExceeded {
                at: self.at(self.pos),
                limit: "decoded bytes per payload",
                max: self.limits.max_decoded_bytes as u64,
            }),
        }
    }

    /// The current byte offset.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The bytes between two offsets already read (used by lazy views).
    pub(crate) fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        self.buf.get(start..end).unwrap_or(&[])
    }

    /// A location at `offset`.
    pub(crate) fn at(&self, offset: usize) -> Location {
        Location::offset(offset)
    }

    fn truncated(&self, expected: &'static str) -> Error {
        Error::EventTruncated {
            at: self.at(self.buf.len()),
            expected,
        }
    }

    fn unexpected(&self, offset: usize, expected: &'static str, b: u8) -> Error {
        Error::EventUnexpectedType {
            at: self.at(offset),
            expected,
            found: family(b),
        }
    }

    /// The next head byte without consuming it.
    pub(crate) fn peek(&self, expected: &'static str) -> Result<u8, Error> {
        self.buf
            .get(self.pos)
            .copied()
            .ok_or_else(|| self.truncated(expected))
    }

    fn byte(&mut self, expected: &'static str) -> Result<u8, Error> {
        let b = self.peek(expected)?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize, expected: &'static str) -> Result<&'a [u8], Error> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or_else(|| self.truncated(expected))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| self.truncated(expected))?;
        self.pos = end;
        Ok(s)
    }

    fn be<const N: usize>(&mut self, expected: &'static str) -> Result<[u8; N], Error> {
        let s = self.take(N, expected)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    /// Consumes a nil if one is next; returns whether it did.
    pub(crate) fn nil(&mut self) -> Result<bool, Error> {
        if self.peek("a value")? == 0xc0 {
            self.pos += 1;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Reads an integer of any width.
    pub(crate) fn int(&mut self, expected: &'static str) -> Result<Int, Error> {
        let start = self.pos;
        let b = self.byte(expected)?;
        let v = match b {
            0x00..=0x7f => Int::U(u64::from(b)),
            0xe0..=0xff => Int::Neg(i64::from(b as i8)),
            0xcc => Int::U(u64::from(self.be::<1>(expected)?[0])),
            0xcd => Int::U(u64::from(u16::from_be_bytes(self.be(expected)?))),
            0xce => Int::U(u64::from(u32::from_be_bytes(self.be(expected)?))),
            0xcf => Int::U(u64::from_be_bytes(self.be(expected)?)),
            0xd0 => signed(i64::from(i8::from_be_bytes(self.be(expected)?))),
            0xd1 => signed(i64::from(i16::from_be_bytes(self.be(expected)?))),
            0xd2 => signed(i64::from(i32::from_be_bytes(self.be(expected)?))),
            0xd3 => signed(i64::from_be_bytes(self.be(expected)?)),
            _ => return Err(self.unexpected(start, expected, b)),
        };
        Ok(v)
    }

    /// Skips up to `max` integers in msgpack's unsigned forms (positive fixint, uint 8 / 16 /
    /// 32 / 64: each a valid [`Reader::u64`]), stopping before anything else or before one the
    /// buffer ends inside; returns how many were skipped. The fast lane of a token-id array:
    /// whatever it stops at is read by the checked path, which accepts and refuses exactly as
    /// before.
    #[inline]
    pub(crate) fn skip_uints(&mut self, max: usize) -> usize {
        let buf = self.buf;
        let mut pos = self.pos;
        let mut n = 0;
        // The width by table look-up, not a branch per form: a vocabulary of ~150k ids mixes
        // uint 16 and uint 32 at random, and a mispredicted branch per id was most of the scan.
        while n < max {
            let Some(&b) = buf.get(pos) else {
                break;
            };
            let w = usize::from(UINT_WIDTH[usize::from(b)]);
            if w == 0 || buf.len() - pos < w {
                break;
            }
            pos += w;
            n += 1;
        }
        self.pos = pos;
        n
    }

    /// Reads an integer that must lie in `0 ..= u64::MAX`.
    pub(crate) fn u64(&mut self, expected: &'static str) -> Result<u64, Error> {
        let start = self.pos;
        match self.int(expected)? {
            Int::U(v) => Ok(v),
            n @ Int::Neg(_) => Err(out_of_range(start, n, "0..=2^64-1")),
        }
    }

    /// Reads an integer that must fit `u32`.
    pub(crate) fn u32(&mut self, expected: &'static str) -> Result<u32, Error> {
        let start = self.pos;
        let n = self.int(expected)?;
        match n {
            Int::U(v) => u32::try_from(v).map_err(|_| out_of_range(start, n, "0..=2^32-1")),
            Int::Neg(_) => Err(out_of_range(start, n, "0..=2^32-1")),
        }
    }

    /// Reads an integer that must fit `i64`.
    pub(crate) fn i64(&mut self, expected: &'static str) -> Result<i64, Error> {
        let start = self.pos;
        let n = self.int(expected)?;
        match n {
            Int::U(v) => i64::try_from(v).map_err(|_| out_of_range(start, n, "-2^63..=2^63-1")),
            Int::Neg(v) => Ok(v),
        }
    }

    /// Reads a float32 or float64.
    pub(crate) fn f64(&mut self, expected: &'static str) -> Result<f64, Error> {
        let start = self.pos;
        match self.byte(expected)? {
            0xcb => Ok(f64::from_be_bytes(self.be(expected)?)),
            0xca => Ok(f64::from(f32::from_be_bytes(self.be(expected)?))),
            b => Err(self.unexpected(start, expected, b)),
        }
    }

    /// Reads a str, borrowed and checked as UTF-8.
    pub(crate) fn str(&mut self, expected: &'static str) -> Result<&'a str, Error> {
        let start = self.pos;
        let b = self.byte(expected)?;
        let len = match b {
            0xa0..=0xbf => usize::from(b & 0x1f),
            0xd9 => usize::from(self.be::<1>(expected)?[0]),
            0xda => usize::from(u16::from_be_bytes(self.be(expected)?)),
            0xdb => u32::from_be_bytes(self.be(expected)?) as usize,
            _ => return Err(self.unexpected(start, expected, b)),
        };
        self.check_len(start, len, self.limits.max_string_bytes, "string length")?;
        let bytes = self.take(len, expected)?;
        std::str::from_utf8(bytes).map_err(|_| Error::EventInvalidUtf8 { at: self.at(start) })
    }

    /// Reads a bin value, borrowed.
    pub(crate) fn bin(&mut self, expected: &'static str) -> Result<&'a [u8], Error> {
        let start = self.pos;
        let b = self.byte(expected)?;
        let len = match b {
            0xc4 => usize::from(self.be::<1>(expected)?[0]),
            0xc5 => usize::from(u16::from_be_bytes(self.be(expected)?)),
            0xc6 => u32::from_be_bytes(self.be(expected)?) as usize,
            _ => return Err(self.unexpected(start, expected, b)),
        };
        self.check_len(start, len, self.limits.max_string_bytes, "binary length")?;
        self.take(len, expected)
    }

    /// Reads an array header; the length is checked against the limits and the bytes left.
    pub(crate) fn array(&mut self, expected: &'static str) -> Result<usize, Error> {
        let start = self.pos;
        let b = self.byte(expected)?;
        let len = match b {
            0x90..=0x9f => usize::from(b & 0x0f),
            0xdc => usize::from(u16::from_be_bytes(self.be(expected)?)),
            0xdd => u32::from_be_bytes(self.be(expected)?) as usize,
            _ => return Err(self.unexpected(start, expected, b)),
        };
        self.check_count(start, len, 1)?;
        Ok(len)
    }

    /// Reads a map header; returns the number of entries.
    pub(crate) fn map(&mut self, expected: &'static str) -> Result<usize, Error> {
        let start = self.pos;
        let b = self.byte(expected)?;
        let len = match b {
            0x80..=0x8f => usize::from(b & 0x0f),
            0xde => usize::from(u16::from_be_bytes(self.be(expected)?)),
            0xdf => u32::from_be_bytes(self.be(expected)?) as usize,
            _ => return Err(self.unexpected(start, expected, b)),
        };
        self.check_count(start, len, 2)?;
        Ok(len)
    }

    fn check_len(
        &self,
        start: usize,
        len: usize,
        max: usize,
        what: &'static str,
    ) -> Result<(), Error> {
        if len > max {
            return Err(Error::EventLimitExceeded {
                at: self.at(start),
                limit: what,
                max: max as u64,
            });
        }
        Ok(())
    }

    fn check_count(&self, start: usize, len: usize, min_bytes_each: usize) -> Result<(), Error> {
        self.check_len(start, len, self.limits.max_elements, "element count")?;
        if len.saturating_mul(min_bytes_each) > self.remaining() {
            return Err(self.truncated("the elements the header announces"));
        }
        Ok(())
    }

    /// Skips one value of any type, nested at most `max_depth` levels (counting from
    /// `depth`, the nesting level the value sits at). Iterative: no recursion.
    pub(crate) fn skip(&mut self, depth: usize) -> Result<(), Error> {
        // Stack of "values still to skip" per open container.
        let mut pending: Vec<usize> = Vec::new();
        let mut todo = 1usize;
        loop {
            while todo == 0 {
                match pending.pop() {
                    Some(t) => todo = t,
                    None => return Ok(()),
                }
            }
            todo -= 1;
            let start = self.pos;
            let b = self.peek("a value")?;
            let children = match b {
                0x80..=0x8f | 0xde | 0xdf => self.map("a map")?.saturating_mul(2),
                0x90..=0x9f | 0xdc | 0xdd => self.array("an array")?,
                0xa0..=0xbf | 0xd9..=0xdb => {
                    self.str("a string")?;
                    0
                }
                0xc4..=0xc6 => {
                    self.bin("a binary")?;
                    0
                }
                0xc0 | 0xc2 | 0xc3 => {
                    self.pos += 1;
                    0
                }
                0xca | 0xcb => {
                    self.f64("a float")?;
                    0
                }
                0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3 => {
                    self.int("an integer")?;
                    0
                }
                _ => return Err(self.unexpected(start, "a msgpack value (no ext)", b)),
            };
            if children > 0 {
                if depth + pending.len() + 1 > self.limits.max_depth {
                    return Err(Error::EventLimitExceeded {
                        at: self.at(start),
                        limit: "nesting depth",
                        max: self.limits.max_depth as u64,
                    });
                }
                pending.push(todo);
                todo = children;
            }
        }
    }
}

/// Bytes of a msgpack integer in an unsigned form by its head byte (positive fixint, uint 8 /
/// 16 / 32 / 64); 0 for every other head.
static UINT_WIDTH: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x80 {
        t[b] = 1;
        b += 1;
    }
    t[0xcc] = 2;
    t[0xcd] = 3;
    t[0xce] = 5;
    t[0xcf] = 9;
    t
};

fn signed(v: i64) -> Int {
    if v >= 0 {
        Int::U(v as u64)
    } else {
        Int::Neg(v)
    }
}

fn out_of_range(offset: usize, n: Int, range: &'static str) -> Error {
    Error::EventIntegerOutOfRange {
        at: Location::offset(offset),
        value: n.to_text(),
        range,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rd(b: &[u8]) -> Int {
        let l = Limits::default();
        let mut r = Reader::new(b, &l);
        let v = r.int("int").unwrap();
        assert_eq!(r.remaining(), 0);
        v
    }

    #[test]
    fn every_integer_width() {
        assert_eq!(rd(&[0x05]), Int::U(5));
        assert_eq!(rd(&[0xff]), Int::Neg(-1));
        assert_eq!(rd(&[0xe0]), Int::Neg(-32));
        assert_eq!(rd(&[0xcc, 0x80]), Int::U(128));
        assert_eq!(rd(&[0xcd, 0x01, 0x00]), Int::U(256));
        assert_eq!(rd(&[0xce, 0xff, 0xff, 0xff, 0xff]), Int::U(u32::MAX as u64));
        assert_eq!(
            rd(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Int::U(u64::MAX)
        );
        assert_eq!(rd(&[0xd0, 0x7f]), Int::U(127));
        assert_eq!(rd(&[0xd0, 0x80]), Int::Neg(-128));
        assert_eq!(rd(&[0xd1, 0xff, 0x7f]), Int::Neg(-129));
        assert_eq!(rd(&[0xd2, 0x80, 0, 0, 0]), Int::Neg(i32::MIN as i64));
        assert_eq!(rd(&[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]), Int::Neg(i64::MIN));
        assert_eq!(rd(&[0xd3, 0, 0, 0, 0, 0, 0, 0, 9]), Int::U(9));
    }

    #[test]
    fn forged_lengths_and_depth_are_refused() {
        let l = Limits::default();
        let mut r = Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x00], &l);
        assert!(r.array("a").is_err());
        let deep = vec![0x91u8; 10_000];
        let mut r = Reader::new(&deep, &l);
        assert!(matches!(r.skip(0), Err(Error::EventLimitExceeded { .. })));
        let mut r = Reader::new(&[0xd4, 0x01, 0x02], &l);
        assert!(matches!(r.skip(0), Err(Error::EventUnexpectedType { .. })));
        let mut r = Reader::new(&[0xa2, 0xff, 0xfe], &l);
        assert!(matches!(r.str("s"), Err(Error::EventInvalidUtf8 { .. })));
    }
}
