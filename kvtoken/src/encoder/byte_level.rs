//! The path of the byte-level flavours ([`Flavor::Qwen2`], [`Flavor::Llama3`],
//! [`Flavor::O200k`]): NFC where the tokenizer asks for it, the flavour's pre-tokenizer
//! ([`crate::pretok`]), then BPE of each pre-token's byte-level
//! symbols through the word cache.
//!
//! A pre-token of [`CUT_MIN`] bytes or more is cut where no merge output spans
//! ([`crate::cuts`]) when its first bytes cut densely (CJK, emoji), and merged part by part;
//! the automaton that finds the cuts is built once the encoder has merged [`CUTTER_AFTER`]
//! bytes of long words whole.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use serde_json::Value;
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use super::word_cache::{Cached, WordCache, CACHE_MAX_WORD};
use super::EncodeLimits;
use crate::bpe::{self, BpeScratch};
use crate::bytelevel::ByteLevel as ByteChars;
use crate::config::{Flavor, Recognised};
use crate::cuts::{Cutter, NO_TOKEN};
use crate::error::Error;
use crate::fxhash::BytesMap;
use crate::merge_map::{merges_from_json, MergeMap};
use crate::pretok::o200k::O200k;
use crate::pretok::qwen2_llama3::Qwen2Llama3;
use crate::pretok::{self, CharInfo};

/// Byte-level words of at least this many bytes are cut where no merge can join across
/// ([`crate::cuts`]) when the first [`CUT_PROBE`] bytes have at least one cut per
/// [`CUT_DENSITY`] bytes (CJK, emoji), else merged whole (letters, white space).
const CUT_MIN: usize = 128;
/// Bytes of long words an encoder merges whole before it builds its cutter: the build costs
/// about what merging this much text whole costs (~100 ms), so an encoder that sees few long
/// words never pays it, and one that sees many pays at most twice the best choice made in
/// hindsight (and tests that build many encoders do not each pay it).
const CUTTER_AFTER: u64 = 1 << 20;
/// Bytes of a long word searched for cuts before deciding whether to cut it.
const CUT_PROBE: usize = 256;
/// See [`CUT_MIN`].
const CUT_DENSITY: usize = 32;

/// Buffers of the byte-level path, reused across calls.
#[derive(Default)]
pub(super) struct ByteLevelScratch {
    /// The NFC form of a piece that is not NFC already.
    nfc: String,
    /// The pre-tokenizers' decoded chars.
    pre: PreScratch,
    /// The cuts of a long word.
    cut: CutScratch,
}

impl ByteLevelScratch {
    /// Whether every buffer is within what [`Self::trim`] keeps.
    #[cfg(test)]
    pub(super) fn within_caps(&self) -> bool {
        [
            self.nfc.capacity(),
            self.pre.chars.capacity(),
            self.cut.lo.capacity(),
            self.cut.parts.capacity(),
        ]
        .iter()
        .all(|&c| c <= super::MAX_KEPT)
    }

    /// Gives back the buffers a long input grew ([`super::drop_if_long`]).
    pub(super) fn trim(&mut self) {
        super::drop_if_long(&mut self.nfc);
        super::drop_if_long(&mut self.pre.chars);
        super::drop_if_long(&mut self.cut.lo);
        super::drop_if_long(&mut self.cut.parts);
    }
}

/// Decoded chars for the pre-tokenizers (their ASCII lanes need none).
#[derive(Default)]
pub(super) struct PreScratch {
    chars: Vec<CharInfo>,
}

/// Buffers for cutting long words ([`Cutter::cuts`]).
#[derive(Default)]
pub(super) struct CutScratch {
    /// The automaton's working buffer.
    lo: Vec<(u32, u32)>,
    /// The cuts found: where each part ends, and its id when it is one token.
    parts: Vec<(u32, u32)>,
}

/// The tables of the byte-level path.
pub(super) struct ByteLevel {
    /// Which pre-tokenizer, and how many digits a split holds.
    flavor: Flavor,
    /// Whether pieces are NFC-normalized first.
    nfc: bool,
    /// Whether a pre-token that is a vocabulary token is that token, unmerged.
    ignore_merges: bool,
    /// The merges, on ids.
    pub(super) merges: MergeMap,
    /// Id of the byte-level char of each byte.
    pub(super) byte_ids: [u32; 256],
    /// The model vocabulary keyed by raw bytes; only filled when `ignore_merges`.
    vocab: BytesMap<u32>,
    /// The bytes of every merge output, one after the other...
    outputs: Vec<u8>,
    /// ... where each ends, and its id.
    output_ends: Vec<(u32, u32)>,
    /// The automaton over `outputs`, built once [`CUTTER_AFTER`] bytes of long words were
    /// merged whole (or by [`ByteLevel::cutter`] directly).
    cutter: OnceLock<Option<Cutter>>,
    /// Bytes of long words merged whole while `cutter` was not built.
    long_bytes: AtomicU64,
}

impl ByteLevel {
    /// The tables of `cfg`'s byte-level flavour for `vocab` and the merges of `json` (the
    /// `tokenizer.json`). Refuses a vocabulary without every byte-level char, and merges
    /// that are not byte-level text.
    pub(super) fn new(
        cfg: &Recognised,
        vocab: &HashMap<String, u32>,
        json: &Value,
    ) -> Result<Self, String> {
        let bl = ByteChars::new();
        let mut byte_ids = [0u32; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            let c = bl.char_of(b as u8).to_string();
            *slot = *vocab
                .get(&c)
                .ok_or_else(|| format!("byte-level char {c:?} missing from the vocabulary"))?;
        }
        let (mut outputs, mut output_ends) = (Vec::new(), Vec::new());
        let merges = merges_from_json(json, vocab, |joined, id| {
            if !bl.decode_into(joined, &mut outputs) {
                return Err(format!("merge {joined:?} is not byte-level"));
            }
            output_ends.push((outputs.len() as u32, id));
            Ok(())
        })?;
        let mut by_bytes = BytesMap::default();
        if cfg.ignore_merges {
            for (tok, &id) in vocab {
                if let Some(bytes) = bl.decode(tok) {
                    by_bytes.insert(bytes.into_boxed_slice(), id);
                }
            }
        }
        Ok(Self {
            flavor: cfg.flavor,
            nfc: cfg.nfc,
            ignore_merges: cfg.ignore_merges,
            merges: MergeMap::new(&merges),
            byte_ids,
            vocab: by_bytes,
            outputs,
            output_ends,
            cutter: OnceLock::new(),
            long_bytes: AtomicU64::new(0),
        })
    }

    /// The cutter of this table's merge outputs, built on first use (once per encoder):
    /// each output with its id when BPE of its bytes is that one id.
    pub(super) fn cutter(&self) -> Option<&Cutter> {
        self.cutter
            .get_or_init(|| {
                let mut bpe = BpeScratch::default();
                let mut ids = Vec::new();
                let mut start = 0usize;
                Cutter::new(self.output_ends.iter().filter_map(|&(end, id)| {
                    let o = self.outputs.get(start..end as usize)?;
                    start = end as usize;
                    ids.clear();
                    let syms = o.iter().map(|&b| self.byte_ids[usize::from(b)]);
                    bpe::merge(&self.merges, syms, &mut bpe, &mut ids);
                    Some((o, if ids == [id] { id } else { NO_TOKEN }))
                }))
            })
            .as_ref()
    }

    /// Calls `emit(start, end)` with the byte span of every pre-token of `text` (already
    /// normalized) until it returns `false`: the flavour's pre-tokenizer, its ASCII lane
    /// for ASCII text.
    #[inline]
    pub(super) fn pre_tokenize(
        &self,
        text: &str,
        s: &mut PreScratch,
        emit: impl FnMut(usize, usize) -> bool,
    ) {
        if self.flavor == Flavor::O200k {
            pretok::split(&O200k, text, &mut s.chars, emit);
        } else {
            let m = Qwen2Llama3 {
                max_digits: self.flavor.max_digits(),
            };
            pretok::split(&m, text, &mut s.chars, emit);
        }
    }

    /// Encodes a piece of text without added tokens into `out` under `limits`: normalizes,
    /// pre-tokenizes and BPE-encodes it, stopping after the pre-token that brings `out` to
    /// `limits.max_ids` ids, and refusing a pre-token over `limits.max_word_bytes`. Returns
    /// whether the whole piece was encoded.
    pub(super) fn encode_piece(
        &self,
        piece: &str,
        limits: &EncodeLimits,
        s: &mut ByteLevelScratch,
        bpe: &mut BpeScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        let ByteLevelScratch { nfc, pre, cut } = s;
        let text =
            if self.nfc && !piece.is_ascii() && is_nfc_quick(piece.chars()) != IsNormalized::Yes {
                nfc.clear();
                nfc.extend(piece.nfc().map(|(c, _)| c));
                nfc.as_str()
            } else {
                piece
            };
        let bytes = text.as_bytes();
        let mut failed = None;
        let mut end = 0;
        let emit = |a: usize, b: usize| {
            end = b;
            let Some(word) = bytes.get(a..b) else {
                return true;
            };
            if word.len() > limits.max_word_bytes {
                failed = Some(word.len());
                return false;
            }
            self.encode_word(word, bpe, cut, cache, out);
            out.len() < limits.max_ids
        };
        self.pre_tokenize(text, pre, emit);
        match failed {
            Some(bytes) => Err(Error::WordTooLong {
                bytes,
                max: limits.max_word_bytes,
            }),
            None => Ok(end == text.len()),
        }
    }

    /// The ids of one pre-token: a single byte's id, a cached word's, the vocabulary
    /// token it is (`ignore_merges`), or its BPE (part by part when long and cut densely).
    #[inline]
    fn encode_word(
        &self,
        word: &[u8],
        bpe: &mut BpeScratch,
        cut: &mut CutScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        let how = Cached::UpTo(CACHE_MAX_WORD);
        self.through_cache(word, cache, how, out, |cache, out| {
            let direct = if self.ignore_merges {
                self.vocab.get(word).copied()
            } else {
                None
            };
            match direct {
                Some(id) => out.push(id),
                None if word.len() >= CUT_MIN => self.encode_long_word(word, bpe, cut, cache, out),
                None => self.merge_bytes(word, bpe, out),
            }
        });
    }

    /// The ids of `word` through `cache`: a single byte's id, a cached word's ids, or what
    /// `encode` appends (then cached as `how` says).
    #[inline]
    fn through_cache(
        &self,
        word: &[u8],
        cache: &mut WordCache,
        how: Cached,
        out: &mut Vec<u32>,
        encode: impl FnOnce(&mut WordCache, &mut Vec<u32>),
    ) {
        if let [b] = word {
            out.push(self.byte_ids[usize::from(*b)]);
            return;
        }
        let cacheable = match how {
            Cached::UpTo(max) => word.len() <= max,
            Cached::SlotsOnly => word.len() < 16,
        };
        if cacheable && cache.append(word, out) {
            return;
        }
        let first = out.len();
        encode(cache, out);
        if cacheable {
            let ids = out.get(first..).unwrap_or_default();
            match how {
                Cached::UpTo(_) => cache.insert(word, ids),
                Cached::SlotsOnly => cache.insert_slot(word, ids),
            }
        }
    }

    /// BPE of `word`'s byte-level symbols, whole.
    #[inline]
    fn merge_bytes(&self, word: &[u8], bpe: &mut BpeScratch, out: &mut Vec<u32>) {
        let ids = word.iter().map(|&b| self.byte_ids[usize::from(b)]);
        bpe::merge(&self.merges, ids, bpe, out);
    }

    /// BPE of a long byte-level word: part by part between its cuts ([`crate::cuts`]) when
    /// the cutter is built and the word's first bytes cut densely, else whole.
    #[cold]
    fn encode_long_word(
        &self,
        word: &[u8],
        bpe: &mut BpeScratch,
        cut: &mut CutScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        let whole = |bpe: &mut BpeScratch, out: &mut Vec<u32>| self.merge_bytes(word, bpe, out);
        let built = match self.cutter.get() {
            Some(built) => built.as_ref(),
            None => {
                let seen = self
                    .long_bytes
                    .fetch_add(word.len() as u64, Ordering::Relaxed);
                if seen + (word.len() as u64) < CUTTER_AFTER {
                    return whole(bpe, out);
                }
                self.cutter()
            }
        };
        let Some(cutter) = built else {
            return whole(bpe, out);
        };
        self.encode_by_parts(cutter, word, bpe, cut, cache, out);
    }

    /// [`encode_long_word`](Self::encode_long_word) with `cutter`: part by part when the
    /// word's first bytes cut densely, else whole.
    pub(super) fn encode_by_parts(
        &self,
        cutter: &Cutter,
        word: &[u8],
        bpe: &mut BpeScratch,
        cut: &mut CutScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        let whole = |bpe: &mut BpeScratch, out: &mut Vec<u32>| self.merge_bytes(word, bpe, out);
        let probe = word.get(..CUT_PROBE).unwrap_or(word);
        cut.parts.clear();
        cutter.cuts(probe, &mut cut.lo, &mut cut.parts);
        if cut.parts.len() * CUT_DENSITY <= probe.len() {
            return whole(bpe, out);
        }
        cut.parts.clear();
        cutter.cuts(word, &mut cut.lo, &mut cut.parts);
        let cache = if self.ignore_merges {
            cache.parts()
        } else {
            cache
        };
        let mut start = 0;
        for &(end, id) in &cut.parts {
            let end = end as usize;
            if id != NO_TOKEN {
                out.push(id);
            } else if let Some(part) = word.get(start..end) {
                self.encode_part(part, bpe, cache, out);
            }
            start = end;
        }
    }

    /// BPE of one part of a cut word (always merged: no vocabulary short cut), through
    /// `cache`'s set-associative table only: the parts of a long word are mostly unique (random
    /// letters cut into parts of tens of bytes), so they are not worth a hash-map entry.
    #[inline]
    fn encode_part(
        &self,
        part: &[u8],
        bpe: &mut BpeScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        self.through_cache(part, cache, Cached::SlotsOnly, out, |_, out| {
            self.merge_bytes(part, bpe, out)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{encoders, long_word};
    use super::super::word_cache::WordCache;
    use super::CutScratch;
    use crate::bpe::{self, BpeScratch};
    use crate::cuts::NO_TOKEN;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        /// Long words cut where no merge output spans ([`crate::cuts`]) and merged part by
        /// part give the ids of merging them whole, on every shipped byte-level tokenizer
        /// (CJK, emoji ZWJ, mixed, letters, runs); CJK is cut densely enough to take the
        /// part-by-part path.
        #[test]
        fn cut_words_merge_like_whole_words(kind in 0u8..6, seed in any::<u64>(), len in 100usize..1500) {
            let word = long_word(kind, seed, len);
            prop_assert_eq!(encoders().len(), 6, "a shipped tokenizer is missing or slow");
            for enc in encoders() {
                let Some(bl) = enc.fast.as_ref().and_then(|f| f.tables.byte_level()) else { continue };
                let bytes = word.as_bytes();
                let mut cache = WordCache::new(0);
                let (mut got, mut want) = (Vec::new(), Vec::new());
                let cutter = bl.cutter().expect("a cutter");
                let mut bpe = BpeScratch::default();
                bl.encode_by_parts(cutter, bytes, &mut bpe, &mut CutScratch::default(), &mut cache, &mut got);
                let syms = bytes.iter().map(|&b| bl.byte_ids[usize::from(b)]);
                bpe::merge_reference(&bl.merges, syms, &mut BpeScratch::default(), &mut want);
                prop_assert_eq!(&got, &want, "{:?}", enc.path());
                if kind == 2 {
                    let (mut lo, mut parts) = (Vec::new(), Vec::new());
                    cutter.cuts(bytes, &mut lo, &mut parts);
                    prop_assert!(parts.len() * 8 > bytes.len(), "CJK cut in {} parts in {} bytes", parts.len(), bytes.len());
                    let whole = parts.iter().filter(|p| p.1 != NO_TOKEN).count();
                    prop_assert!(whole * 3 > parts.len(), "{whole} of {} parts are one token", parts.len());
                }
            }
        }
    }
}
