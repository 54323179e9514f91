//! SGLang's SHA-256 page chain (target SGLang 0.5.19; `docs/contracts/sglang.md` §1–3).
//!
//! ```text
//! digest_0 = SHA256(           u32le(t_0) || ... || u32le(t_P-1))
//! digest_i = SHA256(digest_i-1 || u32le(t_iP) || ... )
//! ```
//!
//! With a `cache_salt` the chain is seeded: `SHA256("sglang-cache-salt-v1" || 0x00 || salt)`
//! stands in as the parent of page 0. Only full pages are published; the published
//! `block_hash` is the first 8 digest bytes big-endian as a signed int64
//! ([`Digest::first8_be`] gives the same bits as `u64`). Token ids must fit in `u32`:
//! the checked entry points ([`SglangChain::extend_checked`],
//! [`SglangHasher::block_hashes_u64_checked`]) reject others as SGLang does.
//!
//! ```
//! use kvhash::sglang::SglangHasher;
//! let h = SglangHasher::new(16).unwrap();
//! let mut out = [0u64; 2];
//! assert_eq!(h.block_hashes_u64(&[7u32; 40], &mut out).unwrap(), 2);
//! assert!(h.block_hashes_u64_checked(&[-1i64; 16], &mut out).is_err());
//! ```

use crate::{Digest, Error};
use sha2::{Digest as _, Sha256};
use std::borrow::Borrow;

/// Prefix of the cache-salt seed message.
pub const SALT_DOMAIN: &[u8] = b"sglang-cache-salt-v1";

/// The SGLang hashing rules that differ between engine releases (selected by the contract
/// catalog; kvhash never looks at a version).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SglangRules {
    /// SGLang ≥ 0.5.23: ids up to `2^63 - 1` are accepted, and a page holding any id
    /// `>= 2^32` is hashed as `0xff` followed by every unit as u64 little-endian ("wide
    /// page"). Before: every id must fit in `u32`.
    pub wide_pages: bool,
}

impl SglangRules {
    /// SGLang 0.5.19, the reference release (no wide pages).
    pub const REFERENCE: SglangRules = SglangRules { wide_pages: false };

    /// The text SGLang's hash binding raises for an id it refuses (`IndexError`).
    pub const fn refusal_message(self, value: i128) -> &'static str {
        if self.wide_pages {
            if value < 0 {
                "token id must be a non-negative int64"
            } else {
                "token id does not fit in int64"
            }
        } else {
            "token id does not fit in uint32"
        }
    }

    /// The accepted id range, in words.
    pub const fn range(self) -> &'static str {
        if self.wide_pages {
            "0..2^63"
        } else {
            "0..2^32"
        }
    }
}

impl Default for SglangRules {
    /// [`SglangRules::REFERENCE`].
    fn default() -> Self {
        SglangRules::REFERENCE
    }
}

/// How token ids become hashed units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum KeyMode {
    /// One unit per token (the normal case).
    #[default]
    Plain,
    /// EAGLE speculative decoding: unit `j` is the bigram `(t_j, t_j+1)`, hashed as
    /// `u32le(t_j) || u32le(t_j+1)`; N tokens make N-1 units.
    EagleBigram,
}

/// `SHA256("sglang-cache-salt-v1" || 0x00 || utf8(salt))`, the seed of a salted chain.
pub fn salt_seed(salt: &str) -> Digest {
    let mut h = Sha256::new();
    h.update(SALT_DOMAIN);
    h.update([0u8]);
    h.update(salt.as_bytes());
    Digest::sha256(h.finalize().into())
}

/// The signed int64 SGLang publishes for a page digest.
pub fn published_i64(d: &Digest) -> i64 {
    d.first8_be() as i64
}

/// What is fixed for one request: page size, key mode and salt.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SglangHasher {
    page_size: usize,
    mode: KeyMode,
    seed: Option<Digest>,
    rules: SglangRules,
    /// The KV-event namespace seed the published hashes are re-hashed under
    /// ([`crate::sglang_namespace`]); `None`: published as computed.
    namespace: Option<[u8; 32]>,
}

impl SglangHasher {
    /// An unsalted plain hasher with `page_size` tokens per page.
    pub fn new(page_size: usize) -> Result<Self, Error> {
        if page_size == 0 {
            return Err(Error::ZeroBlockSize);
        }
        Ok(SglangHasher {
            page_size,
            mode: KeyMode::Plain,
            seed: None,
            rules: SglangRules::REFERENCE,
            namespace: None,
        })
    }

    /// The same hasher under the rules of another engine release.
    pub fn with_rules(mut self, rules: SglangRules) -> Self {
        self.rules = rules;
        self
    }

    /// The release's rules.
    pub fn rules(&self) -> SglangRules {
        self.rules
    }

    /// The same hasher with a request `cache_salt` (`None` or empty = no salt).
    pub fn with_cache_salt(mut self, salt: Option<&str>) -> Self {
        self.seed = salt.filter(|s| !s.is_empty()).map(salt_seed);
        self
    }

    /// The same hasher publishing its hashes under a KV-event namespace seed
    /// ([`crate::sglang_namespace::namespace_seed`]; `None`: not namespaced). The page chain
    /// itself is unchanged; only [`SglangHasher::block_hashes_u64`] (and its checked form)
    /// give the namespaced values. [`SglangHasher::page_digests`] stays the page hash.
    pub fn with_event_namespace(mut self, seed: Option<[u8; 32]>) -> Self {
        self.namespace = seed;
        self
    }

    /// The KV-event namespace seed, if any.
    pub fn event_namespace(&self) -> Option<&[u8; 32]> {
        self.namespace.as_ref()
    }

    /// The published `u64` of a page digest: its first 8 bytes, namespaced when the hasher
    /// has a namespace.
    pub fn published_u64(&self, d: &Digest) -> u64 {
        match &self.namespace {
            None => d.first8_be(),
            Some(seed) => crate::sglang_namespace::namespaced_u64(seed, d.first8_be()),
        }
    }

    /// The same hasher with another key mode.
    pub fn with_mode(mut self, mode: KeyMode) -> Self {
        self.mode = mode;
        self
    }

    /// Tokens (units) per page.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The key mode.
    pub fn mode(&self) -> KeyMode {
        self.mode
    }

    /// The salt seed digest, if salted.
    pub fn salt_seed(&self) -> Option<Digest> {
        self.seed
    }

    /// A fresh chain borrowing this hasher.
    pub fn chain(&self) -> SglangChain<&SglangHasher> {
        SglangChain::new(self)
    }

    /// Digests of the full pages of `ids` into `out`; stops when `out` is full. Returns the
    /// number written.
    pub fn page_digests(&self, ids: &[u32], out: &mut [Digest]) -> Result<usize, Error> {
        let mut n = 0;
        self.one_shot(ids, out.len(), |d| {
            if let Some(slot) = out.get_mut(n) {
                *slot = d;
            }
            n += 1;
        });
        Ok(n)
    }

    /// Published hashes (as `u64` bit patterns) of the full pages of `ids` into `out`;
    /// stops when `out` is full. Returns the number written.
    pub fn block_hashes_u64(&self, ids: &[u32], out: &mut [u64]) -> Result<usize, Error> {
        let mut n = 0;
        self.one_shot(ids, out.len(), |d| {
            if let Some(slot) = out.get_mut(n) {
                *slot = self.published_u64(&d);
            }
            n += 1;
        });
        Ok(n)
    }

    /// As [`SglangHasher::block_hashes_u64`] for ids of a wider type; any id outside the
    /// release's range ([`SglangRules::range`]) is rejected ([`Error::TokenIdOutOfRange`])
    /// before anything is hashed.
    pub fn block_hashes_u64_checked<T: Copy + Into<i128>>(
        &self,
        ids: &[T],
        out: &mut [u64],
    ) -> Result<usize, Error> {
        check_ids(ids, self.rules)?;
        let mut n = 0;
        let mut chain = self.chain();
        let units = self.units_for(ids.len(), out.len());
        chain.feed(ids.get(..units).unwrap_or(&[]), to_u64, &mut |d: Digest| {
            if let Some(slot) = out.get_mut(n) {
                *slot = self.published_u64(&d);
            }
            n += 1;
        });
        Ok(n)
    }

    /// Number of full pages `n_tokens` ids yield (EAGLE bigram mode: `n - 1` units).
    pub fn page_count(&self, n_tokens: usize) -> usize {
        let overlap = usize::from(self.mode == KeyMode::EagleBigram);
        n_tokens.saturating_sub(overlap) / self.page_size
    }

    /// Tokens to feed so that at most `max_pages` full pages come out.
    fn units_for(&self, len: usize, max_pages: usize) -> usize {
        let overlap = usize::from(self.mode == KeyMode::EagleBigram);
        let units = len.saturating_sub(overlap);
        let pages = (units / self.page_size).min(max_pages);
        if pages == 0 {
            0
        } else {
            pages * self.page_size + overlap
        }
    }

    fn one_shot(&self, ids: &[u32], max_pages: usize, mut sink: impl FnMut(Digest)) {
        let used = self.units_for(ids.len(), max_pages);
        self.chain()
            .feed(ids.get(..used).unwrap_or(&[]), u64::from, &mut sink);
    }
}

fn to_u64<T: Copy + Into<i128>>(t: T) -> u64 {
    // Only called after `check_ids`.
    t.into() as u64
}

fn check_ids<T: Copy + Into<i128>>(ids: &[T], rules: SglangRules) -> Result<(), Error> {
    let max = if rules.wide_pages {
        i64::MAX as i128
    } else {
        u32::MAX as i128
    };
    for (index, t) in ids.iter().enumerate() {
        let v: i128 = (*t).into();
        if !(0..=max).contains(&v) {
            return Err(Error::TokenIdOutOfRange {
                engine: "sglang",
                index,
                value: v,
                range: rules.range(),
            });
        }
    }
    Ok(())
}

/// The running state of one token sequence: parent digest, pages so far, and the tokens
/// of the current partial page (in EAGLE mode also the last token, which starts the next
/// bigram).
#[derive(Debug, Clone)]
pub struct SglangChain<H: Borrow<SglangHasher>> {
    hasher: H,
    parent: Option<Digest>,
    pages: u64,
    pending: Vec<u64>,
    buf: Vec<u8>,
}

impl<H: Borrow<SglangHasher>> SglangChain<H> {
    /// A chain before page 0.
    pub fn new(hasher: H) -> Self {
        let h = hasher.borrow();
        let parent = h.seed;
        let cap = 32 + h.page_size * 8;
        SglangChain {
            hasher,
            parent,
            pages: 0,
            pending: Vec::new(),
            buf: Vec::with_capacity(cap),
        }
    }

    /// A chain resumed after `pages` full pages whose last page digest is `parent` (`None`:
    /// before page 0 of an unsalted chain; the salt seed: before page 0 of a salted one), as
    /// when re-deriving a published page from its event and its parent's digest. The
    /// hasher's own salt seed is not used: `parent` stands in for it.
    pub fn resume(hasher: H, parent: Option<Digest>, pages: u64) -> Self {
        let mut chain = SglangChain::new(hasher);
        chain.parent = parent;
        chain.pages = pages;
        chain
    }

    /// Moves this chain to the state [`SglangChain::resume`] gives (parent `parent` after
    /// `pages` pages, no partial page), keeping its buffers: re-deriving one event after
    /// another allocates nothing once the buffers have grown.
    pub fn reset(&mut self, parent: Option<Digest>, pages: u64) {
        self.parent = parent;
        self.pages = pages;
        self.pending.clear();
    }

    /// Digest of the last full page (the salt seed, or `None`, before page 0).
    pub fn parent(&self) -> Option<Digest> {
        self.parent
    }

    /// Full pages hashed so far.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Appends tokens; calls `sink` with the digest of every page that becomes full.
    pub fn extend(&mut self, ids: &[u32], mut sink: impl FnMut(Digest)) {
        self.feed(ids, u64::from, &mut sink);
    }

    /// As [`SglangChain::extend`] for ids of a wider type; rejects (before hashing
    /// anything) ids outside the release's range ([`SglangRules::range`]).
    pub fn extend_checked<T: Copy + Into<i128>>(
        &mut self,
        ids: &[T],
        mut sink: impl FnMut(Digest),
    ) -> Result<(), Error> {
        check_ids(ids, self.hasher.borrow().rules)?;
        self.feed(ids, to_u64, &mut sink);
        Ok(())
    }

    /// The digest the current partial page would have (SGLang computes it but never
    /// publishes it); `None` when there is no partial unit.
    pub fn partial_digest(&mut self) -> Option<Digest> {
        let h = self.hasher.borrow();
        let overlap = usize::from(h.mode == KeyMode::EagleBigram);
        if self.pending.len() <= overlap {
            return None;
        }
        let units = self.pending.len() - overlap;
        let pending = std::mem::take(&mut self.pending);
        let d = self.digest_units(&pending, units, |t| t);
        self.pending = pending;
        Some(d)
    }

    fn feed<T: Copy>(&mut self, ids: &[T], conv: impl Fn(T) -> u64, sink: &mut impl FnMut(Digest)) {
        let (p, overlap) = {
            let h = self.hasher.borrow();
            (h.page_size, usize::from(h.mode == KeyMode::EagleBigram))
        };
        let need = p + overlap;
        let mut rest = ids;
        loop {
            if !self.pending.is_empty() {
                let take = (need - self.pending.len()).min(rest.len());
                let (head, tail) = rest.split_at(take);
                self.pending.extend(head.iter().map(|t| conv(*t)));
                rest = tail;
                if self.pending.len() < need {
                    return;
                }
                let pending = std::mem::take(&mut self.pending);
                let d = self.digest_units(&pending, p, |t| t);
                self.pending = pending;
                self.pending.drain(..p);
                self.advance(d, sink);
                continue;
            }
            match rest.get(..need) {
                Some(page) => {
                    let d = self.digest_units(page, p, &conv);
                    self.advance(d, sink);
                    rest = rest.get(p..).unwrap_or(&[]);
                }
                None => {
                    self.pending.extend(rest.iter().map(|t| conv(*t)));
                    return;
                }
            }
        }
    }

    fn advance(&mut self, d: Digest, sink: &mut impl FnMut(Digest)) {
        self.parent = Some(d);
        self.pages += 1;
        sink(d);
    }

    /// SHA-256 of parent || `units` units taken from `tokens`: each unit's ids as u32 LE, or,
    /// on a wide page (the release has wide pages and a unit's id, the bigram overlap
    /// included, is `>= 2^32`), `0xff` then each id as u64 LE.
    #[inline]
    fn digest_units<T: Copy>(
        &mut self,
        tokens: &[T],
        units: usize,
        conv: impl Fn(T) -> u64,
    ) -> Digest {
        let h = self.hasher.borrow();
        let eagle = h.mode == KeyMode::EagleBigram;
        let wide_rule = h.rules.wide_pages;
        let buf = &mut self.buf;
        buf.clear();
        if let Some(parent) = &self.parent {
            buf.extend_from_slice(parent.as_bytes());
        }
        let raw = tokens.get(..units + usize::from(eagle)).unwrap_or(tokens);
        let wide = wide_rule && raw.iter().any(|t| conv(*t) > u64::from(u32::MAX));
        if wide {
            buf.push(0xff);
            if eagle {
                for pair in tokens.windows(2).take(units) {
                    if let [a, b] = pair {
                        buf.extend_from_slice(&conv(*a).to_le_bytes());
                        buf.extend_from_slice(&conv(*b).to_le_bytes());
                    }
                }
            } else {
                for t in tokens.iter().take(units) {
                    buf.extend_from_slice(&conv(*t).to_le_bytes());
                }
            }
        } else if eagle {
            for pair in tokens.windows(2).take(units) {
                if let [a, b] = pair {
                    buf.extend_from_slice(&(conv(*a) as u32).to_le_bytes());
                    buf.extend_from_slice(&(conv(*b) as u32).to_le_bytes());
                }
            }
        } else {
            let start = buf.len();
            let tokens = tokens.get(..units).unwrap_or(tokens);
            buf.resize(start + 4 * tokens.len(), 0);
            if let Some(tail) = buf.get_mut(start..) {
                for (w, t) in tail.chunks_exact_mut(4).zip(tokens) {
                    w.copy_from_slice(&(conv(*t) as u32).to_le_bytes());
                }
            }
        }
        Digest::sha256(crate::digest::sha256_oneshot(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumed_chain_continues_the_digests() {
        let ids: Vec<u32> = (1..=48).collect();
        for salt in [None, Some("tenant-a")] {
            let h = SglangHasher::new(16).unwrap().with_cache_salt(salt);
            let mut all = Vec::new();
            h.chain().extend(&ids, |d| all.push(d));
            // From the salt seed (or nothing) before page 0, and from page 1's digest.
            let mut c = SglangChain::resume(&h, h.salt_seed(), 0);
            let mut got = Vec::new();
            c.extend(&ids[..16], |d| got.push(d));
            c.reset(Some(all[1]), 2);
            c.extend(&ids[32..], |d| got.push(d));
            assert_eq!(got, [all[0], all[2]]);
            assert_eq!((c.pages(), c.parent()), (3, Some(all[2])));
        }
        // A reset drops a partial page.
        let h = SglangHasher::new(4).unwrap();
        let mut c = SglangChain::resume(&h, None, 0);
        c.extend(&[1, 2], |_| {});
        c.reset(None, 0);
        let mut got = Vec::new();
        c.extend(&[1, 2, 3, 4], |d| got.push(d));
        let mut want = [0u64; 1];
        h.block_hashes_u64(&[1, 2, 3, 4], &mut want).unwrap();
        assert_eq!(got[0].first8_be(), want[0]);
    }

    #[test]
    fn rejects_out_of_range() {
        let h = SglangHasher::new(16).unwrap();
        let mut out = [0u64; 1];
        let mut ids = [1i64; 16];
        ids[15] = 1 << 32;
        assert!(matches!(
            h.block_hashes_u64_checked(&ids, &mut out),
            Err(Error::TokenIdOutOfRange { index: 15, .. })
        ));
        assert_eq!(SglangHasher::new(0), Err(Error::ZeroBlockSize));
    }
}
