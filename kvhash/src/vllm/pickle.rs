//! Python pickle protocol 5 for the fixed shapes vLLM hashes with `sha256` / `xxhash`
//! (spec docs/contracts/vllm.md §4.2), byte-identical to CPython's `pickle.dumps(obj, protocol=5)`.
//!
//! The whole body sits in one frame; a body of 64 KiB or more would be split by CPython's
//! framer (and large strings written outside frames), which is refused with
//! [`Error::PickleTooLarge`] instead of being guessed.

use super::{BlockExtraKey, ExtraKeyForm, TokenId};
use crate::Error;

const PROTO: [u8; 2] = [0x80, 5];
const FRAME: u8 = 0x95;
const STOP: u8 = 0x2e;
const MEMOIZE: u8 = 0x94;
const MARK: u8 = 0x28;
const TUPLE: u8 = 0x74;
const NONE: u8 = 0x4e;
const BINGET: u8 = 0x68;
const LONG_BINGET: u8 = 0x6a;
/// CPython's `FRAME_SIZE_TARGET`.
const FRAME_LIMIT: usize = 64 * 1024;

/// Memo counter of one `pickle.dumps` call.
struct Memo(u32);

impl Memo {
    #[inline]
    fn put(&mut self, buf: &mut Vec<u8>) -> u32 {
        buf.push(MEMOIZE);
        let i = self.0;
        self.0 += 1;
        i
    }
}

fn get(buf: &mut Vec<u8>, index: u32) {
    if index < 256 {
        buf.extend_from_slice(&[BINGET, index as u8]);
    } else {
        buf.push(LONG_BINGET);
        buf.extend_from_slice(&index.to_le_bytes());
    }
}

/// An int, as `save_long` writes it.
#[inline(always)]
pub(crate) fn int(buf: &mut Vec<u8>, v: i128) {
    if (0..=0xff).contains(&v) {
        buf.extend_from_slice(&[0x4b, v as u8]);
    } else if (0..=0xffff).contains(&v) {
        let b = (v as u16).to_le_bytes();
        buf.extend_from_slice(&[0x4d, b[0], b[1]]);
    } else if (-0x8000_0000..=0x7fff_ffff).contains(&v) {
        let b = (v as i32).to_le_bytes();
        buf.extend_from_slice(&[0x4a, b[0], b[1], b[2], b[3]]);
    } else {
        let enc = encode_long(v);
        buf.extend_from_slice(&[0x8a, enc.1 as u8]);
        buf.extend_from_slice(&enc.0[..enc.1]);
    }
}

/// Python's `pickle.encode_long`: minimal two's-complement little-endian bytes.
fn encode_long(v: i128) -> ([u8; 16], usize) {
    let all = v.to_le_bytes();
    if v == 0 {
        return (all, 0);
    }
    let bit_length = 128 - v.unsigned_abs().leading_zeros() as usize;
    let mut n = (bit_length >> 3) + 1;
    if n > 16 {
        n = 16; // unreachable for i128 magnitudes below 2^127
    }
    if v < 0 && n > 1 && all[n - 1] == 0xff && (all[n - 2] & 0x80) != 0 {
        n -= 1;
    }
    (all, n)
}

fn bytes(buf: &mut Vec<u8>, memo: &mut Memo, b: &[u8]) {
    if b.len() < 256 {
        buf.extend_from_slice(&[0x43, b.len() as u8]);
    } else {
        buf.push(0x42);
        buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
    }
    buf.extend_from_slice(b);
    memo.put(buf);
}

fn text(buf: &mut Vec<u8>, memo: &mut Memo, s: &str) -> u32 {
    if s.len() < 256 {
        buf.extend_from_slice(&[0x8c, s.len() as u8]);
    } else {
        buf.push(0x58);
        buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
    }
    buf.extend_from_slice(s.as_bytes());
    memo.put(buf)
}

fn tuple_open(buf: &mut Vec<u8>, n: usize) {
    if n > 3 {
        buf.push(MARK);
    }
}

fn tuple_close(buf: &mut Vec<u8>, memo: &mut Memo, n: usize) {
    match n {
        0 => {
            buf.push(0x29);
            return;
        }
        1 => buf.push(0x85),
        2 => buf.push(0x86),
        3 => buf.push(0x87),
        _ => buf.push(TUPLE),
    }
    memo.put(buf);
}

/// Writes `80 05 95 <len>` and returns where the body starts.
fn begin(buf: &mut Vec<u8>) -> usize {
    buf.extend_from_slice(&PROTO);
    buf.push(FRAME);
    buf.extend_from_slice(&[0; 8]);
    buf.len()
}

/// Writes STOP and patches the frame length.
fn finish(buf: &mut Vec<u8>, body_start: usize) -> Result<(), Error> {
    buf.push(STOP);
    let len = buf.len() - body_start;
    if len >= FRAME_LIMIT {
        return Err(Error::PickleTooLarge { len });
    }
    // Bodies are never shorter than 4 bytes here (a text or bytes opcode + MEMOIZE + STOP),
    // so CPython always writes the frame header.
    if let Some(slot) = buf.get_mut(body_start - 8..body_start) {
        slot.copy_from_slice(&(len as u64).to_le_bytes());
    }
    Ok(())
}

/// `pickle.dumps(seed, protocol=5)` for the NONE_HASH seed string.
pub(crate) fn encode_seed(buf: &mut Vec<u8>, seed: &str) -> Result<(), Error> {
    let start = begin(buf);
    let mut memo = Memo(0);
    text(buf, &mut memo, seed);
    finish(buf, start)
}

/// `pickle.dumps((parent, (t0, ..), extra), protocol=5)` for one block, where `extra` is
/// `None` or the keys in `form`, and with look-ahead tokens `(keys-or-None, a0, …, aL-1)`.
pub(crate) fn encode_block<'k, T: TokenId>(
    buf: &mut Vec<u8>,
    parent: &[u8],
    tokens: &[T],
    keys: impl ExactSizeIterator<Item = BlockExtraKey<'k>>,
    form: ExtraKeyForm,
    ahead: &[u64],
) -> Result<(), Error> {
    buf.reserve(64 + (tokens.len() + ahead.len()) * 5);
    let start = begin(buf);
    let mut memo = Memo(0);
    bytes(buf, &mut memo, parent);
    tuple_open(buf, tokens.len());
    for t in tokens {
        int(buf, t.to_u64() as i128);
    }
    tuple_close(buf, &mut memo, tokens.len());
    if !ahead.is_empty() {
        tuple_open(buf, 1 + ahead.len());
    }
    encode_keys(buf, &mut memo, keys, form);
    if !ahead.is_empty() {
        for t in ahead {
            int(buf, *t as i128);
        }
        tuple_close(buf, &mut memo, 1 + ahead.len());
    }
    tuple_close(buf, &mut memo, 3);
    finish(buf, start)
}

/// The block's key tuple (or `None`). Every key string is its own object in vLLM except the
/// tag literals, so a repeated tag is a memo reference and nothing else is.
fn encode_keys<'k>(
    buf: &mut Vec<u8>,
    memo: &mut Memo,
    keys: impl ExactSizeIterator<Item = BlockExtraKey<'k>>,
    form: ExtraKeyForm,
) {
    let n = keys.len();
    if n == 0 {
        buf.push(NONE);
        return;
    }
    let tagged = form == ExtraKeyForm::K3;
    tuple_open(buf, n);
    let mut mm_tag: Option<u32> = None;
    for key in keys {
        match key {
            BlockExtraKey::Lora { name, path } => {
                if tagged {
                    text(buf, memo, "lora");
                    text(buf, memo, name);
                    text(buf, memo, path);
                    tuple_close(buf, memo, 3);
                } else {
                    text(buf, memo, name);
                }
            }
            BlockExtraKey::Mm { identifier, offset } => match form {
                ExtraKeyForm::K1 => {
                    text(buf, memo, identifier);
                }
                ExtraKeyForm::K2 => {
                    text(buf, memo, identifier);
                    int(buf, offset as i128);
                    tuple_close(buf, memo, 2);
                }
                ExtraKeyForm::K3 => {
                    match mm_tag {
                        Some(i) => get(buf, i),
                        None => mm_tag = Some(text(buf, memo, "mm")),
                    }
                    text(buf, memo, identifier);
                    int(buf, offset as i128);
                    tuple_close(buf, memo, 3);
                }
            },
            BlockExtraKey::CacheSalt(salt) => {
                if tagged {
                    text(buf, memo, "cache_salt");
                    text(buf, memo, salt);
                    tuple_close(buf, memo, 2);
                } else {
                    text(buf, memo, salt);
                }
            }
            BlockExtraKey::PromptEmbeds(d) => {
                if tagged {
                    text(buf, memo, "prompt_embeds");
                    bytes(buf, memo, d);
                    tuple_close(buf, memo, 2);
                } else {
                    bytes(buf, memo, d);
                }
            }
        }
    }
    tuple_close(buf, memo, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_zero_matches_spec() {
        let mut buf = Vec::new();
        encode_seed(&mut buf, "0").unwrap();
        assert_eq!(hex::encode(&buf), "80059505000000000000008c0130942e");
    }

    #[test]
    fn longs() {
        let cases: &[(i128, &str)] = &[
            (2147483648, "0000008000"),
            (4294967295, "ffffffff00"),
            (-2147483649, "ffffff7fff"),
            (18446744073709551615, "ffffffffffffffff00"),
            (-1, "ff"),
            (-128, "80"),
            (-129, "7fff"),
        ];
        for (v, want) in cases {
            let (b, n) = encode_long(*v);
            assert_eq!(hex::encode(&b[..n]), *want, "{v}");
        }
    }
}
