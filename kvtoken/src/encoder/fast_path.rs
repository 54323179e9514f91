//! The fast path of a [`FastEncoder`](super::FastEncoder): built from a `tokenizer.json`
//! whose configuration [`crate::config`] recognises, it finds the added tokens
//! ([`super::added`]) and encodes the pieces between them with the tables of its layout —
//! byte-level BPE ([`super::byte_level`]) or SentencePiece-style BPE
//! ([`super::sentencepiece`]).

use serde_json::Value;
use tokenizers::Tokenizer;

use super::added::AddedTokens;
use super::byte_level::ByteLevel;
use super::sentencepiece::SpmTables;
use super::word_cache::{cache_of, next_uid};
use super::{EncodeLimits, Scratch};
use crate::config::{recognise, Flavor, Recognised};
use crate::error::Error;
use crate::segment_cache::{SegmentCache, MIN_SEGMENT};

/// The tables a fast path encodes pieces with, one layout per kind of BPE.
// One per encoder, built once and never moved after: the variants are not boxed, so that
// the hot path reads its tables without an indirection.
#[allow(clippy::large_enum_variant)]
pub(super) enum Tables {
    /// Byte-level BPE: [`Flavor::Qwen2`], [`Flavor::Llama3`], [`Flavor::O200k`].
    ByteLevel(ByteLevel),
    /// SentencePiece-style BPE: [`Flavor::SentencePieceBpe`].
    SentencePiece(SpmTables),
}

impl Tables {
    /// The merges, on ids.
    #[cfg(test)]
    pub(super) fn merges(&self) -> &crate::merge_map::MergeMap {
        match self {
            Tables::ByteLevel(t) => &t.merges,
            Tables::SentencePiece(t) => &t.merges,
        }
    }

    /// The byte-level tables, if that is the layout.
    pub(super) fn byte_level(&self) -> Option<&ByteLevel> {
        match self {
            Tables::ByteLevel(t) => Some(t),
            Tables::SentencePiece(_) => None,
        }
    }
}

/// Everything the fast path needs: the configuration, the added tokens and the tables.
pub(super) struct FastPath {
    /// Identifies this encoder's word cache in a [`Scratch`] (and its entries in the
    /// segment and prompt caches).
    pub(super) uid: u64,
    /// The recognised configuration.
    pub(super) cfg: Recognised,
    /// The added tokens and how to find them.
    pub(super) added: AddedTokens,
    /// How the pieces between added tokens are encoded.
    pub(super) tables: Tables,
}

impl FastPath {
    /// The fast path of `stock`'s configuration (`json` is its `tokenizer.json`), or why
    /// there is none.
    pub(super) fn new(stock: &Tokenizer, json: &Value) -> Result<Self, String> {
        let cfg = recognise(json)?;
        let added_vocab = stock.get_added_vocabulary();
        if added_vocab.get_encode_special_tokens() {
            return Err("encode_special_tokens is set".into());
        }
        if stock.get_truncation().is_some() || stock.get_padding().is_some() {
            return Err("truncation or padding configured".into());
        }
        let mut patterns: Vec<(String, u32)> = Vec::new();
        for (id, tok) in stock.get_added_tokens_decoder() {
            if tok.lstrip || tok.rstrip || tok.single_word || tok.normalized {
                return Err(format!(
                    "added token {:?} has lstrip/rstrip/single_word/normalized",
                    tok.content
                ));
            }
            patterns.push((tok.content.clone(), id));
        }
        let added = AddedTokens::new(patterns)?;
        let vocab = stock.get_vocab(false);
        let tables = if cfg.flavor == Flavor::SentencePieceBpe {
            let added: Vec<String> = stock
                .get_added_tokens_decoder()
                .values()
                .map(|t| t.content.clone())
                .collect();
            Tables::SentencePiece(SpmTables::new(&vocab, &added, json)?)
        } else {
            Tables::ByteLevel(ByteLevel::new(&cfg, &vocab, json)?)
        };
        Ok(Self {
            uid: next_uid(),
            cfg,
            added,
            tables,
        })
    }

    /// Encodes `text` into `out` (appending), the post-processor's special tokens around it
    /// when `add_special_tokens`: each added token is its id, each piece between them is
    /// encoded by the tables (through `cache` when given and the piece is long enough).
    ///
    /// Under `limits` it stops once `out` holds `limits.max_ids` ids (pre-token by
    /// pre-token, so the ids are a prefix of the full encoding; the last pre-token may
    /// overshoot) and refuses a pre-token longer than `limits.max_word_bytes`; with
    /// [`EncodeLimits::NONE`] it encodes everything and cannot fail.
    pub(super) fn encode(
        &self,
        s: &mut Scratch,
        text: &str,
        add_special_tokens: bool,
        limits: &EncodeLimits,
        cache: Option<&SegmentCache>,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        self.encode_cut(s, text, add_special_tokens, limits, cache, out, None)
    }

    /// [`encode`](Self::encode), noting in `cuts` (when given) each added-token match's end:
    /// `(byte offset in text, out.len() after its id)` — where the pieces before it are done
    /// and the scan goes on from that byte alone.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn encode_cut(
        &self,
        s: &mut Scratch,
        text: &str,
        add_special_tokens: bool,
        limits: &EncodeLimits,
        cache: Option<&SegmentCache>,
        out: &mut Vec<u32>,
        mut cuts: Option<&mut Vec<(usize, usize)>>,
    ) -> Result<(), Error> {
        if add_special_tokens {
            out.extend_from_slice(&self.cfg.prefix);
        }
        let mut last = 0;
        while let Some((start, end, id)) = self.added.next(text, last) {
            if out.len() >= limits.max_ids {
                return Ok(());
            }
            if let Some(piece) = text.get(last..start) {
                self.encode_piece_cached(s, piece, limits, cache, out)?;
            }
            if out.len() >= limits.max_ids {
                return Ok(());
            }
            out.push(id);
            if let Some(c) = cuts.as_deref_mut() {
                c.push((end, out.len()));
            }
            last = end;
        }
        if out.len() >= limits.max_ids {
            return Ok(());
        }
        if let Some(piece) = text.get(last..) {
            self.encode_piece_cached(s, piece, limits, cache, out)?;
        }
        if add_special_tokens && out.len() < limits.max_ids {
            out.extend_from_slice(&self.cfg.suffix);
        }
        Ok(())
    }

    /// [`encode_piece`](Self::encode_piece) through `cache` when given: a cached piece is
    /// copied whole (the caller cuts); only a completely encoded piece is inserted.
    fn encode_piece_cached(
        &self,
        s: &mut Scratch,
        piece: &str,
        limits: &EncodeLimits,
        cache: Option<&SegmentCache>,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        let Some(cache) = cache.filter(|_| piece.len() >= MIN_SEGMENT) else {
            return self.encode_piece(s, piece, limits, out);
        };
        if cache.get_into(self.uid, piece.as_bytes(), out) {
            return Ok(true);
        }
        let first = out.len();
        let done = self.encode_piece(s, piece, limits, out)?;
        if done {
            cache.insert(
                self.uid,
                piece.as_bytes(),
                out.get(first..).unwrap_or_default(),
            );
        }
        Ok(done)
    }

    /// Encodes a piece of text without added tokens, stopping after the pre-token that
    /// brings `out` to `limits.max_ids` ids and refusing a pre-token over
    /// `limits.max_word_bytes`. Returns whether the whole piece was encoded.
    fn encode_piece(
        &self,
        s: &mut Scratch,
        piece: &str,
        limits: &EncodeLimits,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        if piece.is_empty() {
            return Ok(true);
        }
        let cache = cache_of(&mut s.caches, self.uid);
        match &self.tables {
            Tables::ByteLevel(t) => {
                t.encode_piece(piece, limits, &mut s.byte_level, &mut s.bpe, cache, out)
            }
            Tables::SentencePiece(t) => {
                t.encode_piece(piece, limits, &mut s.spm, &mut s.bpe, cache, out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{encoders, long_word};
    use super::Tables;
    use crate::bpe::{self, BpeScratch};
    use crate::runs;
    use proptest::prelude::*;

    /// The BPE input symbols of `word` under `tables` (`▁` for U+0020 in SentencePiece).
    fn symbols(tables: &Tables, word: &str) -> Vec<u32> {
        let mut syms = Vec::new();
        match tables {
            Tables::SentencePiece(t) => t.symbols(&word.replace(' ', "\u{2581}"), &mut syms),
            Tables::ByteLevel(t) => syms.extend(word.bytes().map(|b| t.byte_ids[usize::from(b)])),
        }
        syms
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Long pre-tokens (runs, random letters, CJK, emoji ZWJ, mixed white space, mixed)
        /// through every shipped tokenizer's merges: `bpe::merge` (which takes the bucket
        /// queue at this length) gives the ids of the `tokenizers` algorithm.
        #[test]
        fn long_words_merge_like_the_reference(kind in 0u8..6, seed in any::<u64>(), len in 1024usize..2500) {
            let word = long_word(kind, seed, len);
            prop_assert_eq!(encoders().len(), 6, "a shipped tokenizer is missing or slow");
            for enc in encoders() {
                let Some(fast) = enc.fast.as_ref() else { continue };
                let syms = symbols(&fast.tables, &word);
                let merges = fast.tables.merges();
                let mut s = BpeScratch::default();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                bpe::merge(merges, syms.iter().copied(), &mut s, &mut a);
                bpe::merge_reference(merges, syms.iter().copied(), &mut s, &mut b);
                prop_assert_eq!(a, b, "{:?}", enc.path());
            }
        }
    }

    /// Runs of one char (white space, `=`, a letter) of any length are merged run-wise by
    /// every shipped tokenizer (the run-length pass answers), to the reference's ids.
    #[test]
    fn runs_of_one_char_merge_run_wise() {
        assert_eq!(
            encoders().len(),
            6,
            "a shipped tokenizer is missing or slow"
        );
        for enc in encoders() {
            let Some(fast) = enc.fast.as_ref() else {
                continue;
            };
            let merges = fast.tables.merges();
            for unit in [" ", "\t", "\n", "=", "a", "-"] {
                for n in [50, 129, 1000, 8191, 20_000] {
                    let syms = symbols(&fast.tables, &unit.repeat(n));
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    let answered =
                        runs::merge_runs(merges, &syms, &mut runs::RunScratch::default(), &mut got);
                    bpe::merge_reference(
                        merges,
                        syms.iter().copied(),
                        &mut BpeScratch::default(),
                        &mut want,
                    );
                    assert!(
                        answered,
                        "{:?}: {unit:?} x {n} not merged run-wise",
                        enc.path()
                    );
                    assert_eq!(got, want, "{:?}: {unit:?} x {n}", enc.path());
                }
            }
        }
    }
}
