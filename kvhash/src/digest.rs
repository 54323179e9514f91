//! [`Digest`]: a block hash's full digest bytes (32 for SHA-256, 16 for XXH3-128).

use crate::Error;
use std::fmt;

/// The full digest of one block, as the engine chains it: 32 bytes (SHA-256) or 16 bytes
/// (XXH3-128, big-endian).
///
/// Stored inline (no allocation); [`Digest::as_bytes`] gives exactly the digest bytes.
///
/// ```
/// use kvhash::Digest;
/// let d = Digest::from_slice(&[0xab; 32]).unwrap();
/// assert_eq!(d.len(), 32);
/// assert_eq!(d.last8_be(), 0xabab_abab_abab_abab);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(C, align(8))]
pub struct Digest {
    bytes: [u8; 32],
    len: u8,
}

impl Digest {
    /// A SHA-256 digest.
    #[inline]
    pub const fn sha256(bytes: [u8; 32]) -> Self {
        Digest { bytes, len: 32 }
    }

    /// An XXH3-128 digest (big-endian bytes of the 128-bit value).
    #[inline]
    pub const fn xxh3_128(bytes: [u8; 16]) -> Self {
        let mut all = [0u8; 32];
        let mut i = 0;
        while i < 16 {
            all[i] = bytes[i];
            i += 1;
        }
        Digest {
            bytes: all,
            len: 16,
        }
    }

    /// A digest from its bytes; only 16- and 32-byte digests exist.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        let mut all = [0u8; 32];
        match bytes.len() {
            16 | 32 => {
                all[..bytes.len()].copy_from_slice(bytes);
                Ok(Digest {
                    bytes: all,
                    len: bytes.len() as u8,
                })
            }
            got => Err(Error::DigestLength { expected: 32, got }),
        }
    }

    /// A digest from lowercase or uppercase hex (32 or 64 hex digits).
    pub fn from_hex(hex_text: &str) -> Result<Self, Error> {
        let bytes = hex::decode(hex_text).map_err(|_| Error::DigestLength {
            expected: 32,
            got: hex_text.len() / 2,
        })?;
        Self::from_slice(&bytes)
    }

    /// The digest bytes (16 or 32 of them).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Number of digest bytes (16 or 32).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The last 8 bytes read big-endian: vLLM's KV-event integer form
    /// (`int.from_bytes(digest, "big") mod 2^64`).
    #[inline]
    pub fn last8_be(&self) -> u64 {
        let n = self.len as usize;
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.bytes[n - 8..n]);
        u64::from_be_bytes(w)
    }

    /// The first 8 bytes read big-endian: SGLang's published `block_hash` bit pattern
    /// (reinterpret as `i64` for the signed value SGLang prints).
    #[inline]
    pub fn first8_be(&self) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.bytes[..8]);
        u64::from_be_bytes(w)
    }

    /// Lowercase hex of the digest bytes.
    pub fn to_hex(&self) -> String {
        hex::encode(self.as_bytes())
    }
}

/// SHA-256 initial state.
pub(crate) const SHA256_H0: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// One-shot SHA-256 of a message held in memory: full 64-byte blocks are compressed straight
/// from `msg` (sha2's `compress256`, SHA-NI when the CPU has it), only the padded tail is
/// copied. Same result as `sha2::Sha256::digest`, without the streaming buffer.
#[inline]
pub(crate) fn sha256_oneshot(msg: &[u8]) -> [u8; 32] {
    let mut state = SHA256_H0;
    let full = msg.len() / 64 * 64;
    compress_blocks(&mut state, &msg[..full]);
    let rem = &msg[full..];
    let mut tail = [0u8; 128];
    tail[..rem.len()].copy_from_slice(rem);
    match pad_in_place(&mut tail, rem.len(), msg.len()) {
        Some(n) => compress_blocks(&mut state, &tail[..n]),
        // A remainder is under 64 bytes: its padding always fits the 128-byte tail.
        None => unreachable!("SHA-256 tail padding fits 128 bytes"),
    }
    state_bytes(&state)
}

/// Writes the SHA-256 padding of a `msg_len`-byte message whose last block's bytes end at
/// `at` in `buf`: `0x80`, zeros, the message length in bits (big-endian). Returns the padded
/// length (a multiple of 64), or `None` when `buf` is too short for it. Bytes from `at` on
/// are overwritten, whatever they held.
#[inline]
pub(crate) fn pad_in_place(buf: &mut [u8], at: usize, msg_len: usize) -> Option<usize> {
    let total = (at + 9).div_ceil(64) * 64;
    *buf.get_mut(at)? = 0x80;
    buf.get_mut(at + 1..total - 8)?.fill(0);
    buf.get_mut(total - 8..total)?
        .copy_from_slice(&(msg_len as u64).wrapping_mul(8).to_be_bytes());
    Some(total)
}

/// Compresses the whole 64-byte blocks of `blocks` into `state` (a trailing partial block,
/// which callers never pass, would be ignored).
///
/// All of them in one `compress256` call: each call loads and shuffles the state in and out
/// and checks the CPU's features, which a block-by-block loop paid on every block (a short
/// vLLM block's message is two compression blocks). `block_buffer`'s eager buffer is only the
/// safe view of the bytes as whole blocks here: with nothing buffered it hands every whole
/// block to the closure at once, straight from `blocks`, and keeps none.
#[inline]
pub(crate) fn compress_blocks(state: &mut [u32; 8], blocks: &[u8]) {
    use sha2::digest::block_buffer::EagerBuffer;
    use sha2::digest::consts::U64;
    let whole = blocks.len() / 64 * 64;
    EagerBuffer::<U64>::default().digest_blocks(&blocks[..whole], |b| sha2::compress256(state, b));
}

/// The digest bytes of a final SHA-256 state (big-endian words).
#[inline]
pub(crate) fn state_bytes(state: &[u32; 8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, w) in out.chunks_exact_mut(4).zip(state) {
        o.copy_from_slice(&w.to_be_bytes());
    }
    out
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.to_hex())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl AsRef<[u8]> for Digest {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn oneshot_sha256_matches_sha2(msg in proptest::collection::vec(any::<u8>(), 0..400)) {
            use sha2::Digest as _;
            let want: [u8; 32] = sha2::Sha256::digest(&msg).into();
            prop_assert_eq!(sha256_oneshot(&msg), want);
        }
    }

    #[test]
    fn lengths() {
        assert!(Digest::from_slice(&[0; 16]).is_ok());
        assert_eq!(
            Digest::from_slice(&[0; 20]),
            Err(Error::DigestLength {
                expected: 32,
                got: 20
            })
        );
        let x = Digest::xxh3_128([1; 16]);
        assert_eq!(x.as_bytes(), &[1; 16]);
        assert_eq!(x.last8_be(), 0x0101_0101_0101_0101);
    }
}
