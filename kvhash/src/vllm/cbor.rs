//! Hand-written canonical CBOR for the fixed shapes vLLM hashes (spec docs/contracts/vllm.md §4.1).
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

/// Writes the CBOR heads of `tokens` (at most [`FAST_MAX_BLOCK`]) into `m` from `at` on;
/// returns where they end (`None` if `m` is too short).
///
/// Two passes: first every id's form (0, 1, 2, 3 for the 1-, 2-, 3- and 5-byte heads, 4 for
/// the 9-byte one), each independent of the others so that the compiler does them in vector
/// registers; then one pass that writes each head through an 8-byte window with one table
/// look-up ([`FORM`]). The second pass is the only serial one (where each id starts depends
/// on the widths before it); its only compares are the window's bounds check and the
/// 9-byte branch, never taken for `u32` ids. Against the one-pass writer (each id's form by
/// compares in the serial loop) in the pipelined chain: 0.92× vs 0.86× of the raw SHA-256
/// bench (`benches/README.md`, `kvhash`).
#[inline(always)]
fn put_ids<T: TokenId>(m: &mut [u8], at: usize, tokens: &[T]) -> Option<usize> {
    let mut forms = [0u8; FAST_MAX_BLOCK];
    for (f, t) in forms.iter_mut().zip(tokens) {
        let v = t.to_u64();
        *f = u8::from(v >= 24)
            + u8::from(v >= 0x100)
            + u8::from(v >= 0x1_0000)
            + u8::from(v > 0xffff_ffff);
    }
    let mut pos = at;
    for (t, &f) in tokens.iter().zip(&forms) {
        let w = <&mut [u8; 9]>::try_from(m.get_mut(pos..pos + 9)?).ok()?;
        let v = t.to_u64();
        let Some(&e) = FORM.get(usize::from(f)) else {
            pos += uint_into(w, v);
            continue;
        };
        // The head byte on top, the value's bytes right behind it, the shift in the low
        // byte: that byte lies past the head (at most 5 of the 8 bytes) and is overwritten by
        // the next id, or by the null after the last one.
        let shift = (e & 63) as u32;
        let word = e | (v << shift);
        w[..8].copy_from_slice(&word.to_be_bytes());
        pos += 8 - (shift >> 3) as usize;
    }
    Some(pos)
}

/// Per form of [`put_ids`] (1-, 2-, 3- and 5-byte heads): the head byte in the top byte and
/// the left shift that puts the value right behind it in the low byte.
const FORM: [u64; 4] = [56, (24 << 56) | 48, (25 << 56) | 40, (26 << 56) | 24];

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
/// 3 + 32 + 2 head/parent bytes, 64 ids of at most 9 bytes, null, and the 65 bytes after it
/// that [`PlainSha256Cbor`]'s fixed-size padding fill writes (the length field lies within
/// them), rounded up to whole 64-byte compression blocks.
const FAST_BUF: usize = 704;

/// What [`PlainSha256Cbor::transcode`] does with one msgpack head byte.
#[derive(Clone, Copy)]
struct Wire {
    /// The CBOR head byte written.
    head: u8,
    /// Bytes it takes in CBOR.
    out_len: u8,
    /// Offset in the msgpack id of the bytes copied after the CBOR head (0: a fixint's own
    /// byte, 1: the value bytes after `0xcc`–`0xcf`).
    from: u8,
    /// Not an unsigned integer: 1.
    refused: u8,
    /// The id is in shortest form (its CBOR form is what vLLM's canonical CBOR writes) when
    /// the 8 bytes after the head, read big-endian, are at least `min` (the smallest value
    /// of its width, shifted to the top: `0xcc` 24, `0xcd` 2^8, `0xce` 2^16, `0xcf` 2^32).
    min: u64,
}

/// The first half of [`PlainSha256Cbor::hash_msgpack`]: the ids into the buffer. Returns
/// where they end in the buffer and how many input bytes they took; [`PlainSha256Cbor::finish`]
/// hashes them with their parent.
///
/// Per id: one look-up of its msgpack head byte in [`WIRE`] gives the CBOR head, its CBOR
/// width, where its value bytes start and the shortest-form test; the value bytes are moved
/// as one 8-byte word whatever the width (the bytes past the id are overwritten by the next
/// id or lie past the message). `raw` must hold 9 bytes from every id's start (at least
/// `len * 9` bytes); `None` otherwise, and for an id that is not transcodable.
#[inline]
fn transcode_ids(
    m: &mut [u8; FAST_BUF],
    ids_at: usize,
    len: usize,
    raw: &[u8],
) -> Option<(usize, usize)> {
    let mut pos = ids_at;
    let mut ip = 0usize;
    let mut bad = 0u8;
    for _ in 0..len {
        let id = <&[u8; 9]>::try_from(raw.get(ip..ip + 9)?).ok()?;
        pos = put_id(m, pos, id, &mut bad)?;
        // The input width from the head byte itself rather than the table: this add is
        // the loop-carried chain.
        ip += msgpack_uint_width(id[0]);
    }
    if bad != 0 || ip > raw.len() {
        return None;
    }
    Some((pos, ip))
}

/// Writes the CBOR form of the msgpack id at the start of `id` at `m[pos..]`,
/// returning the position after it; sets `bad` for a head that is not an unsigned integer
/// or not in shortest form. Writes 9 bytes whatever the width (the bytes past the id are
/// overwritten by the next one, or lie past the message).
#[inline(always)]
fn put_id(m: &mut [u8], pos: usize, id: &[u8; 9], bad: &mut u8) -> Option<usize> {
    let w = <&mut [u8; 9]>::try_from(m.get_mut(pos..pos + 9)?).ok()?;
    let e = WIRE[usize::from(id[0])];
    let mut after = [0u8; 8];
    after.copy_from_slice(&id[1..9]);
    // Shortest form: the 8 bytes after the head, big-endian, reach `min`.
    *bad |= u8::from(u64::from_be_bytes(after) < e.min) | e.refused;
    let mut word = [0u8; 8];
    word.copy_from_slice(id.get(usize::from(e.from)..usize::from(e.from) + 8)?);
    w[0] = e.head;
    w[1..9].copy_from_slice(&word);
    Some(pos + usize::from(e.out_len))
}

/// Bytes a msgpack unsigned integer with head byte `b` takes: 1 for a positive fixint,
/// 1 + 1/2/4/8 for `0xcc`–`0xcf`. Any other head reads as some width and is refused by the
/// caller through [`WIRE`].
#[inline(always)]
const fn msgpack_uint_width(b: u8) -> usize {
    let b = b as usize;
    1 + ((b >> 7) << (b & 3))
}

/// [`Wire`] for every head byte: positive fixints and `0xcc`–`0xcf` transcode; any other
/// byte (not an unsigned integer) is refused.
static WIRE: [Wire; 256] = {
    let mut t = [Wire {
        head: 0,
        out_len: 1,
        from: 0,
        refused: 1,
        min: 0,
    }; 256];
    let mut b = 0usize;
    while b < 0x80 {
        // 0..=23 is its own CBOR head; 24..=127 is `0x18 b`.
        t[b] = if b < 24 {
            Wire {
                head: b as u8,
                out_len: 1,
                from: 0,
                refused: 0,
                min: 0,
            }
        } else {
            Wire {
                head: 0x18,
                out_len: 2,
                from: 0,
                refused: 0,
                min: 0,
            }
        };
        b += 1;
    }
    // uint8 (shortest from 24: below, CBOR writes the value in its head), uint16 (high byte
    // non-zero), uint32 (high 16 bits non-zero), uint64 (high 32 bits non-zero).
    t[0xcc] = Wire {
        head: 0x18,
        out_len: 2,
        from: 1,
        refused: 0,
        min: 24 << 56,
    };
    t[0xcd] = Wire {
        head: 0x19,
        out_len: 3,
        from: 1,
        refused: 0,
        min: 1 << 56,
    };
    t[0xce] = Wire {
        head: 0x1a,
        out_len: 5,
        from: 1,
        refused: 0,
        min: 1 << 48,
    };
    t[0xcf] = Wire {
        head: 0x1b,
        out_len: 9,
        from: 1,
        refused: 0,
        min: 1 << 32,
    };
    t
};

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
    /// The zero-padded copy of a block at the end of its bytes ([`Self::transcode`]).
    pad: [u8; FAST_MAX_BLOCK * 9],
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
            pad: [0; FAST_MAX_BLOCK * 9],
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
        // Ids first: they do not depend on the previous block's digest, so the CPU can
        // encode them while that digest is still being computed.
        let total = self.prepare(tokens)?;
        self.set_parent(parent);
        self.digest(total)
    }

    /// The digest of one block whose ids are `len` msgpack unsigned integers at the start of
    /// `raw` (a KV event's token-id bytes), transcoded straight into their CBOR heads — the
    /// two encodings are both big-endian with the same width thresholds above 23 — and the
    /// number of bytes they took. `None` (nothing consumed; decode and use
    /// [`PlainSha256Cbor::hash`], the slow twin) when an id is not in msgpack's shortest form
    /// (whose CBOR form would differ), is not an unsigned integer, or when `raw` ends before
    /// the block's ids do.
    #[inline]
    pub(crate) fn hash_msgpack(
        &mut self,
        parent: &[u8; 32],
        raw: &[u8],
    ) -> Option<([u8; 32], usize)> {
        let (pos, used) = self.transcode(raw)?;
        Some((self.finish(parent, pos)?, used))
    }

    /// [`PlainSha256Cbor::hash_msgpack`] of consecutive blocks chained on each other: block
    /// `k`'s digest is block `k + 1`'s parent, written to `out[k]`. Returns how many blocks
    /// were digested (fewer than `out.len()` where one is not transcodable: the caller hashes
    /// it and the rest the slow way) and the input bytes they took.
    ///
    /// Software-pipelined over `self` and `other` (built for the same block size) in
    /// [`PlainSha256Cbor::hash_run`]'s store order: block `k + 1`'s ids, null and padding are
    /// in one buffer before block `k`'s SHA-256 runs on the other; right after that digest
    /// comes block `k + 1`'s parent store, and only then block `k + 2`'s transcoding (into
    /// the buffer block `k` has left), so block `k + 1`'s loads wait for the parent's stores
    /// alone.
    pub(crate) fn hash_msgpack_chain(
        &mut self,
        other: &mut PlainSha256Cbor,
        parent: &[u8; 32],
        raw: &[u8],
        out: &mut [crate::Digest],
    ) -> (usize, usize) {
        if other.len != self.len || out.is_empty() {
            return (0, 0);
        }
        let (mut a, mut b) = (self, other);
        let Some((mut total, first)) = a.transcode_padded(raw) else {
            return (0, 0);
        };
        a.set_parent(parent);
        let blocks = out.len();
        // Block k + 1, transcoded and padded (its padded length and input bytes).
        let mut ahead = match raw.get(first..) {
            Some(rest) if blocks > 1 => b.transcode_padded(rest),
            _ => None,
        };
        // Input bytes of the blocks digested, and of those plus block k.
        let (mut used, mut next) = (0usize, first);
        for (k, slot) in out.iter_mut().enumerate() {
            let Some(d) = a.digest(total) else {
                return (k, used);
            };
            if ahead.is_some() {
                b.set_parent(&d);
            }
            *slot = crate::Digest::sha256(d);
            used = next;
            let Some((t, n)) = ahead else {
                return (k + 1, used);
            };
            // `a` is free again: block k + 2 goes there.
            next += n;
            ahead = match raw.get(next..) {
                Some(rest) if k + 2 < blocks => a.transcode_padded(rest),
                _ => None,
            };
            std::mem::swap(&mut a, &mut b);
            total = t;
        }
        (blocks, used)
    }

    /// [`transcode`](Self::transcode) and [`pad`](Self::pad): the padded length and the input
    /// bytes the block took.
    #[inline]
    fn transcode_padded(&mut self, raw: &[u8]) -> Option<(usize, usize)> {
        let (pos, used) = self.transcode(raw)?;
        Some((self.pad(pos)?, used))
    }

    /// [`transcode_ids`] of the block at the start of `raw`, which may end right after
    /// the block's ids (an event's last block): each id's window reads 9 bytes, so a block
    /// that could read past the end is transcoded from a copy padded with zeros (a zero is
    /// a valid fixint: what it read past the end must not count).
    #[inline]
    fn transcode(&mut self, raw: &[u8]) -> Option<(usize, usize)> {
        let need = self.len * 9;
        if raw.len() >= need {
            return transcode_ids(&mut self.m, self.ids_at, self.len, raw);
        }
        let pad = &mut self.pad;
        pad.get_mut(..raw.len())?.copy_from_slice(raw);
        pad.get_mut(raw.len()..need)?.fill(0);
        let (pos, used) = transcode_ids(&mut self.m, self.ids_at, self.len, pad.get(..need)?)?;
        (used <= raw.len()).then_some((pos, used))
    }

    /// The parent, the null, the SHA-256 padding after the ids (which end at `pos`), and the
    /// digest.
    #[inline]
    fn finish(&mut self, parent: &[u8; 32], pos: usize) -> Option<[u8; 32]> {
        self.set_parent(parent);
        let total = self.pad(pos)?;
        self.digest(total)
    }

    /// The parent's bytes into the message.
    #[inline(always)]
    fn set_parent(&mut self, parent: &[u8; 32]) {
        if let Some(p) = self.m.get_mut(3..35) {
            p.copy_from_slice(parent);
        }
    }

    /// The null after the ids (which end at `pos`) and the SHA-256 padding; returns the
    /// padded length.
    ///
    /// Null, `0x80`, then zeros up to the length field (the 8-byte id windows and earlier,
    /// longer blocks leave bytes behind that must not be hashed as padding). Those zeros never
    /// span more than 64 bytes, so a fixed-size fill (a few vector stores, no `memset` call)
    /// covers them, and the length goes over its end.
    #[inline(always)]
    fn pad(&mut self, pos: usize) -> Option<usize> {
        let m = &mut self.m;
        let len = pos + 1;
        let total = (len + 9).div_ceil(64) * 64;
        let tail = <&mut [u8; 66]>::try_from(m.get_mut(pos..pos + 66)?).ok()?;
        *tail = [0; 66];
        tail[0] = NULL;
        tail[1] = 0x80;
        m.get_mut(total - 8..total)?
            .copy_from_slice(&(len as u64).wrapping_mul(8).to_be_bytes());
        Some(total)
    }

    /// SHA-256 of the first `total` bytes of the message, padded.
    #[inline(always)]
    fn digest(&self, total: usize) -> Option<[u8; 32]> {
        let mut state = crate::digest::SHA256_H0;
        crate::digest::compress_blocks(&mut state, self.m.get(..total)?);
        Some(crate::digest::state_bytes(&state))
    }

    /// Block `tokens`' ids, null and padding, without the parent; returns the padded length.
    #[inline(always)]
    fn prepare<T: TokenId>(&mut self, tokens: &[T]) -> Option<usize> {
        if tokens.len() != self.len {
            return None;
        }
        let pos = put_ids(&mut self.m, self.ids_at, tokens)?;
        self.pad(pos)
    }

    /// The chain over consecutive blocks: block `k`'s digest is block `k + 1`'s parent and
    /// goes to `sink`, in order. `tokens` holds whole blocks (a trailing partial one is left).
    /// Returns how many blocks were digested and the last digest (`parent` if none); a block
    /// this buffer cannot take stops it (the caller hashes it and the rest the slow way).
    ///
    /// Software-pipelined over `self` and a second buffer, ordered for the store buffer:
    /// SHA-256 reads the message in 16-byte loads, which cannot take their bytes from the
    /// narrower or misaligned stores that wrote them (ids through 8-byte windows, the parent
    /// at offset 3) until those stores have retired and reached the cache — and a store
    /// retires only after everything before it in program order. So right after block `k`'s
    /// digest, the next instructions write it as block `k + 1`'s parent into the other
    /// buffer, whose ids, null and padding were written one block earlier; only then come
    /// the sink and block `k + 2`'s ids (into the buffer block `k` has left). Block `k + 1`'s
    /// loads wait for the parent's two stores alone, not for the retirement of a whole
    /// block's id writing queued between them and block `k`'s digest.
    #[inline]
    pub(crate) fn hash_run<T: TokenId>(
        &mut self,
        parent: &[u8; 32],
        tokens: &[T],
        mut sink: impl FnMut([u8; 32]),
    ) -> (usize, [u8; 32]) {
        let mut parent = *parent;
        let mut blocks = tokens.chunks_exact(self.len);
        let Some(first) = blocks.next() else {
            return (0, parent);
        };
        let Some(mut total) = self.prepare(first) else {
            return (0, parent);
        };
        self.set_parent(&parent);
        // The second buffer only for a run of two blocks or more.
        let mut other = if blocks.len() > 0 {
            Self::new(self.len)
        } else {
            None
        };
        let mut next = match other.as_mut() {
            Some(b) => blocks.next().and_then(|blk| b.prepare(blk)),
            None => None,
        };
        let mut a = self;
        let mut spare = other.as_mut();
        let mut done = 0;
        while let Some(d) = a.digest(total) {
            if let (Some(b), Some(_)) = (spare.as_deref_mut(), next) {
                b.set_parent(&d);
            }
            sink(d);
            parent = d;
            done += 1;
            let (Some(b), Some(t)) = (spare.take(), next) else {
                break;
            };
            // `a` is free again: block k + 2 goes there.
            next = blocks.next().and_then(|blk| a.prepare(blk));
            spare = Some(a);
            a = b;
            total = t;
        }
        (done, parent)
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

    /// msgpack's shortest unsigned form (what msgspec writes).
    fn msgpack_uint(out: &mut Vec<u8>, v: u64) {
        match v {
            0..=0x7f => out.push(v as u8),
            0x80..=0xff => out.extend([0xcc, v as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend((v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend((v as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend(v.to_be_bytes());
            }
        }
    }

    /// A block whose ids end exactly where the bytes do (an event's last block) transcodes
    /// too, equal to the encoding from decoded ids; a block cut short does not.
    #[test]
    fn transcoding_reaches_the_end_of_the_bytes() {
        let widths = [
            0u64,
            23,
            24,
            127,
            128,
            255,
            256,
            65_535,
            65_536,
            151_999,
            u32::MAX.into(),
        ];
        for n in [1usize, 2, 7, 16, 63, 64] {
            let ids: Vec<u64> = (0..n).map(|i| widths[(i * 7 + n) % widths.len()]).collect();
            let mut raw = Vec::new();
            ids.iter().for_each(|v| msgpack_uint(&mut raw, *v));
            let parent = [0x5a; 32];
            let mut fast = PlainSha256Cbor::new(n).expect("fits");
            let want = fast.hash(&parent, &ids).expect("slow twin");
            let (got, used) = fast.hash_msgpack(&parent, &raw).expect("transcodes");
            assert_eq!((got, used), (want, raw.len()), "{n} ids");
            let mut longer = raw.clone();
            longer.extend([0xcd, 0x12, 0x34]);
            assert_eq!(fast.hash_msgpack(&parent, &longer), Some((want, raw.len())));
            assert_eq!(
                fast.hash_msgpack(&parent, &raw[..raw.len() - 1]),
                None,
                "{n} cut"
            );
        }
    }

    /// The width the transcoder steps by is msgpack's for every unsigned-integer head.
    #[test]
    fn input_width_of_every_unsigned_head() {
        for b in 0u8..0x80 {
            assert_eq!(msgpack_uint_width(b), 1);
        }
        for (b, w) in [(0xcc, 2), (0xcd, 3), (0xce, 5), (0xcf, 9)] {
            assert_eq!(msgpack_uint_width(b), w);
        }
    }

    /// Non-shortest and non-integer heads are never transcoded (their CBOR would differ).
    #[test]
    fn non_shortest_forms_are_refused() {
        let parent = [7u8; 32];
        for raw in [
            &[0xcc, 23][..],
            &[0xcd, 0x00, 0xff],
            &[0xce, 0x00, 0x00, 0xff, 0xff],
            &[0xcf, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
            &[0xc0],
            &[0xd0, 0x01],
            &[0xff],
        ] {
            let mut fast = PlainSha256Cbor::new(1).expect("fits");
            assert_eq!(fast.hash_msgpack(&parent, raw), None, "{raw:02x?}");
        }
    }
}
