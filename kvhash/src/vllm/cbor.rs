//! Hand-written canonical CBOR for the fixed shapes vLLM hashes (spec vllm.md §4.1).
//!
//! Only definite-length arrays, unsigned/negative integers, byte strings, text strings and
//! null occur. Every head uses the shortest argument, as RFC 8949 deterministic encoding
//! (and `cbor2.dumps(..., canonical=True)`) requires.

use super::{BlockExtraKey, ExtraKeyForm, TokenId};

const MAJOR_UINT: u8 = 0;
const MAJOR_NINT: u8 = 1;
const MAJOR_BYTES: u8 = 2;
const MAJOR_TEXT: u8 = 3;
const MAJOR_ARRAY: u8 = 4;
const NULL: u8 = 0xf6;

/// Writes a head: major type plus the shortest argument.
#[inline(always)]
pub(crate) fn head(buf: &mut Vec<u8>, major: u8, v: u64) {
    let m = major << 5;
    if v < 24 {
        buf.push(m | v as u8);
    } else if v <= 0xff {
        buf.extend_from_slice(&[m | 24, v as u8]);
    } else if v <= 0xffff {
        let b = (v as u16).to_be_bytes();
        buf.extend_from_slice(&[m | 25, b[0], b[1]]);
    } else if v <= 0xffff_ffff {
        let b = (v as u32).to_be_bytes();
        buf.extend_from_slice(&[m | 26, b[0], b[1], b[2], b[3]]);
    } else {
        let b = v.to_be_bytes();
        buf.extend_from_slice(&[m | 27, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    }
}

/// Unsigned integers (token ids), written into a pre-sized tail of `buf` through a
/// fixed 9-byte window per id, so that the hot loop has no capacity checks or calls.
#[inline(always)]
fn uints<T: TokenId>(buf: &mut Vec<u8>, tokens: &[T]) {
    let start = buf.len();
    buf.resize(start + tokens.len() * 9, 0);
    // A local slice keeps pointer and length in registers (stores through `buf` itself
    // would force a reload of the Vec's fields after every byte store).
    let (_, out) = buf.split_at_mut(start);
    let mut pos = 0;
    for t in tokens {
        let Some(window) = out.get_mut(pos..pos + 9) else {
            break;
        };
        let Ok(w) = <&mut [u8; 9]>::try_from(window) else {
            break;
        };
        let v = t.to_u64();
        pos += match u32::try_from(v) {
            Ok(v32) => uint32_into(w, v32),
            Err(_) => uint_into(w, v),
        };
    }
    buf.truncate(start + pos);
}

/// Branch-free major-0 head of a 32-bit value (token ids straddle the 1-, 2-, 3- and
/// 5-byte forms at random, which defeats branch prediction). Writes 8 bytes of `w`,
/// returns how many belong to the head.
///
/// `k` = 0, 1, 2, 3 for the 1-, 2-, 3- and 5-byte forms; the head byte sits in the top
/// byte of a big-endian word with the value shifted right behind it (for v < 24 the value
/// itself is the head byte), and the length is `8 - shift / 8`.
#[inline(always)]
fn uint32_into(w: &mut [u8; 9], v: u32) -> usize {
    const HEAD: [u64; 4] = [0, 24 << 56, 25 << 56, 26 << 56];
    const SHIFT: [u32; 4] = [56, 48, 40, 24];
    let k = (usize::from(v >= 24) + usize::from(v >= 0x100) + usize::from(v >= 0x1_0000)) & 3;
    let shift = SHIFT[k];
    let word = HEAD[k] | (u64::from(v) << shift);
    w[..8].copy_from_slice(&word.to_be_bytes());
    8 - (shift >> 3) as usize
}

/// Writes the major-0 head of `v` at the start of `w`; returns its length.
#[inline]
fn uint_into(w: &mut [u8; 9], v: u64) -> usize {
    if v < 24 {
        w[0] = v as u8;
        1
    } else if v <= 0xff {
        w[0] = 24;
        w[1] = v as u8;
        2
    } else if v <= 0xffff {
        let b = (v as u16).to_be_bytes();
        w[0] = 25;
        w[1] = b[0];
        w[2] = b[1];
        3
    } else if v <= 0xffff_ffff {
        let b = (v as u32).to_be_bytes();
        w[0] = 26;
        w[1..5].copy_from_slice(&b);
        5
    } else {
        w[0] = 27;
        w[1..9].copy_from_slice(&v.to_be_bytes());
        9
    }
}

/// A signed integer (major 0 or 1).
#[inline]
pub(crate) fn int(buf: &mut Vec<u8>, v: i64) {
    if v >= 0 {
        head(buf, MAJOR_UINT, v as u64);
    } else {
        // -1 - v never overflows for negative v.
        head(buf, MAJOR_NINT, (-1 - v) as u64);
    }
}

/// A byte string.
#[inline]
pub(crate) fn bytes(buf: &mut Vec<u8>, b: &[u8]) {
    head(buf, MAJOR_BYTES, b.len() as u64);
    buf.extend_from_slice(b);
}

/// A text string (UTF-8).
#[inline]
pub(crate) fn text(buf: &mut Vec<u8>, s: &str) {
    head(buf, MAJOR_TEXT, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

/// `ser(S)` for the NONE_HASH seed string.
pub(crate) fn encode_seed(buf: &mut Vec<u8>, seed: &str) {
    text(buf, seed);
}

/// Largest block the stack fast path takes: `[parent, tokens, null]` with 9-byte ids and
/// the SHA-256 padding must fit in [`FAST_BUF`] bytes.
pub(crate) const FAST_MAX_BLOCK: usize = 64;
/// 3 + 32 + 2 head/parent bytes, 64 ids of at most 9 bytes, null, 9 padding bytes, rounded
/// up to whole 64-byte compression blocks.
const FAST_BUF: usize = 640;

/// SHA-256 of `[parent, [t0..tB-1], null]` (a block without extra keys, B ≤ 64), built and
/// padded in one stack buffer reused for every block of a chain: the contract's hot path.
///
/// The constant bytes (outer array head, byte-string head of the parent, array head of the
/// ids) are written once by [`PlainSha256Cbor::new`]; per block only the parent, the ids,
/// the null, the padding and the length are written, and only the compression blocks the
/// message occupies are hashed.
pub(crate) struct PlainSha256Cbor {
    m: [u8; FAST_BUF],
    /// Offset of the first id.
    ids_at: usize,
    /// Ids per block.
    len: usize,
}

impl PlainSha256Cbor {
    /// The buffer for blocks of `block_size` ids; `None` when they may not fit.
    #[inline]
    pub(crate) fn new(block_size: usize) -> Option<Self> {
        if block_size == 0 || block_size > FAST_MAX_BLOCK {
            return None;
        }
        let mut m = [0u8; FAST_BUF];
        m[0] = (MAJOR_ARRAY << 5) | 3;
        m[1] = (MAJOR_BYTES << 5) | 24;
        m[2] = 32;
        // Array head of the ids: 1 byte below 24 ids, else 2 (block_size ≤ 64 < 256).
        let ids_at = if block_size < 24 {
            m[35] = (MAJOR_ARRAY << 5) | block_size as u8;
            36
        } else {
            m[35] = (MAJOR_ARRAY << 5) | 24;
            m[36] = block_size as u8;
            37
        };
        Some(PlainSha256Cbor {
            m,
            ids_at,
            len: block_size,
        })
    }

    /// The block size it was built for.
    #[inline]
    pub(crate) fn block_size(&self) -> usize {
        self.len
    }

    /// The digest of one block (`tokens.len()` must be the block size given to
    /// [`PlainSha256Cbor::new`]; `None` otherwise).
    #[inline]
    pub(crate) fn hash<T: TokenId>(&mut self, parent: &[u8; 32], tokens: &[T]) -> Option<[u8; 32]> {
        if tokens.len() != self.len {
            return None;
        }
        let m = &mut self.m;
        // Ids first: they do not depend on the previous block's digest, so the CPU can
        // encode them while that digest is still being computed.
        let mut pos = self.ids_at;
        for t in tokens {
            let w = <&mut [u8; 9]>::try_from(m.get_mut(pos..pos + 9)?).ok()?;
            let v = t.to_u64();
            pos += match u32::try_from(v) {
                Ok(v32) => uint32_into(w, v32),
                Err(_) => uint_into(w, v),
            };
        }
        self.finish(parent, pos)
    }

    /// The digest of one block whose ids are `len` msgpack unsigned integers at the start of
    /// `raw` (a KV event's token-id bytes), transcoded straight into their CBOR heads — the
    /// two encodings are both big-endian with the same width thresholds above 23 — and the
    /// number of bytes they took. `None` (nothing consumed; decode and use
    /// [`PlainSha256Cbor::hash`], the slow twin) when an id is not in msgpack's shortest form
    /// (whose CBOR form would differ), is not an unsigned integer, or when fewer than 9 bytes
    /// follow an id (the last ids of a payload: the window reads 9 bytes).
    #[inline]
    pub(crate) fn hash_msgpack(
        &mut self,
        parent: &[u8; 32],
        raw: &[u8],
    ) -> Option<([u8; 32], usize)> {
        let (pos, used) = self.transcode(raw)?;
        Some((self.finish(parent, pos)?, used))
    }

    /// The first half of [`PlainSha256Cbor::hash_msgpack`]: the ids into the buffer. Returns
    /// where they end in the buffer and how many input bytes they took; [`Self::finish`]
    /// hashes them with their parent.
    #[inline]
    fn transcode(&mut self, raw: &[u8]) -> Option<(usize, usize)> {
        let m = &mut self.m;
        let mut pos = self.ids_at;
        let mut ip = 0usize;
        let mut bad = false;
        for _ in 0..self.len {
            let src = <&[u8; 9]>::try_from(raw.get(ip..ip + 9)?).ok()?;
            let w = <&mut [u8; 9]>::try_from(m.get_mut(pos..pos + 9)?).ok()?;
            let b = src[0];
            let fix = b < 0x80;
            let k = u32::from(b & 3);
            // Payload bytes on the msgpack side (0 for a positive fixint).
            let nb = if fix { 0 } else { 1usize << k };
            let mut tail = [0u8; 8];
            tail.copy_from_slice(&src[1..9]);
            let word = if fix {
                u64::from(b)
            } else {
                u64::from_le_bytes(tail)
            };
            w[0] = if fix {
                if b < 24 {
                    b
                } else {
                    24
                }
            } else {
                24 + (b & 3)
            };
            w[1..9].copy_from_slice(&word.to_le_bytes());
            // Only 0xcc–0xcf, and only where CBOR's shortest form has the same width: a 1-byte
            // value of at least 24, a 2/4/8-byte one that does not fit in half as many.
            let v = u64::from_be_bytes(tail) >> ((64 - 8 * nb as u32) & 63);
            let shortest = if nb == 1 {
                v >= 24
            } else {
                (v >> ((4 * nb as u32) & 63)) != 0
            };
            bad |= !fix && ((b & 0xfc) != 0xcc || !shortest);
            pos += 1 + if fix { usize::from(b >= 24) } else { nb };
            ip += 1 + nb;
        }
        if bad {
            return None;
        }
        Some((pos, ip))
    }

    /// The parent, the null, the SHA-256 padding after the ids (which end at `pos`), and the
    /// digest.
    #[inline]
    fn finish(&mut self, parent: &[u8; 32], pos: usize) -> Option<[u8; 32]> {
        let m = &mut self.m;
        m.get_mut(3..35)?.copy_from_slice(parent);
        // Null, then the padding: zeros up to the length field (the 8-byte id windows and
        // earlier, longer blocks leave bytes behind that must not be hashed as padding).
        let len = pos + 1;
        *m.get_mut(pos)? = NULL;
        let total = crate::digest::pad_in_place(m, len, len)?;
        let mut state = crate::digest::SHA256_H0;
        crate::digest::compress_blocks(&mut state, m.get(..total)?);
        Some(crate::digest::state_bytes(&state))
    }
}

/// `[parent, [t0..tB-1], extra]` for one block, where `extra` is `null` or the keys in
/// `form`, and with look-ahead tokens `[keys-or-null, a0, …, aL-1]`.
#[inline]
pub(crate) fn encode_block<'k, T: TokenId>(
    buf: &mut Vec<u8>,
    parent: &[u8],
    tokens: &[T],
    keys: impl ExactSizeIterator<Item = BlockExtraKey<'k>>,
    form: ExtraKeyForm,
    ahead: &[u64],
) {
    buf.reserve(48 + (tokens.len() + ahead.len()) * 9);
    buf.push((MAJOR_ARRAY << 5) | 3);
    bytes(buf, parent);
    head(buf, MAJOR_ARRAY, tokens.len() as u64);
    uints(buf, tokens);
    if !ahead.is_empty() {
        head(buf, MAJOR_ARRAY, 1 + ahead.len() as u64);
    }
    encode_keys(buf, keys, form);
    if !ahead.is_empty() {
        uints(buf, ahead);
    }
}

/// The block's key tuple (or `null`).
fn encode_keys<'k>(
    buf: &mut Vec<u8>,
    keys: impl ExactSizeIterator<Item = BlockExtraKey<'k>>,
    form: ExtraKeyForm,
) {
    if keys.len() == 0 {
        buf.push(NULL);
        return;
    }
    let tagged = form == ExtraKeyForm::K3;
    head(buf, MAJOR_ARRAY, keys.len() as u64);
    for key in keys {
        match key {
            BlockExtraKey::Lora { name, path } => {
                if tagged {
                    head(buf, MAJOR_ARRAY, 3);
                    text(buf, "lora");
                    text(buf, name);
                    text(buf, path);
                } else {
                    text(buf, name);
                }
            }
            BlockExtraKey::Mm { identifier, offset } => match form {
                ExtraKeyForm::K1 => text(buf, identifier),
                ExtraKeyForm::K2 => {
                    head(buf, MAJOR_ARRAY, 2);
                    text(buf, identifier);
                    int(buf, offset);
                }
                ExtraKeyForm::K3 => {
                    head(buf, MAJOR_ARRAY, 3);
                    text(buf, "mm");
                    text(buf, identifier);
                    int(buf, offset);
                }
            },
            BlockExtraKey::CacheSalt(salt) => {
                if tagged {
                    head(buf, MAJOR_ARRAY, 2);
                    text(buf, "cache_salt");
                }
                text(buf, salt);
            }
            BlockExtraKey::PromptEmbeds(d) => {
                if tagged {
                    head(buf, MAJOR_ARRAY, 2);
                    text(buf, "prompt_embeds");
                }
                bytes(buf, d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_free_heads_match() {
        for v in [
            0u32,
            1,
            23,
            24,
            25,
            255,
            256,
            65535,
            65536,
            151_999,
            u32::MAX,
        ] {
            let (mut a, mut b) = ([0u8; 9], [0u8; 9]);
            let na = uint32_into(&mut a, v);
            let nb = uint_into(&mut b, u64::from(v));
            assert_eq!(a[..na], b[..nb], "{v}");
        }
    }
}
