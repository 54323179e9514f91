//! The path of [`Flavor::SentencePieceBpe`](crate::Flavor::SentencePieceBpe) (gemma-2):
//! `Replace(" ", "▁")` as the normalizer, no pre-tokenizer, BPE over the chars of a piece
//! with byte fallback (`<0xNN>`) for chars outside the vocabulary.
//!
//! The stock tokenizer merges a whole piece at once; here a piece is cut before each `▁`
//! across which no merge can join ([`SpmTables::joins_space`]), and the parts are merged
//! and cached one by one — the same ids, as the cut can never be merged across.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use serde_json::Value;

use super::word_cache::{WordCache, CACHE_MAX_WORD};
use super::EncodeLimits;
use crate::bpe::{self, BpeScratch};
use crate::error::Error;
use crate::fxhash::FxHasher;
use crate::merge_map::{merges_from_json, MergeMap};

/// No id (a char outside the vocabulary, a byte without a `<0xNN>` token).
const NO_ID: u32 = u32::MAX;

/// `▁`, what the SentencePiece-style normalizer puts for U+0020.
pub(super) const SPM_SPACE: char = '\u{2581}';
/// [`SPM_SPACE`] in UTF-8.
const SPM_SPACE_UTF8: [u8; 3] = [0xE2, 0x96, 0x81];

/// Buffers of the SentencePiece path, reused across calls.
#[derive(Default)]
pub(super) struct SpmScratch {
    /// The normalized piece.
    norm: String,
    /// Where the `▁` of the normalized piece are.
    spaces: Vec<u32>,
    /// The BPE input symbols of one part.
    syms: Vec<u32>,
}

impl SpmScratch {
    /// Whether every buffer is within what [`Self::trim`] keeps.
    #[cfg(test)]
    pub(super) fn within_caps(&self) -> bool {
        [
            self.norm.capacity(),
            self.spaces.capacity(),
            self.syms.capacity(),
        ]
        .iter()
        .all(|&c| c <= super::MAX_KEPT)
    }

    /// Gives back the buffers a long input grew ([`super::drop_if_long`]).
    pub(super) fn trim(&mut self) {
        super::drop_if_long(&mut self.norm);
        super::drop_if_long(&mut self.spaces);
        super::drop_if_long(&mut self.syms);
    }
}

/// The tables of [`Flavor::SentencePieceBpe`](crate::Flavor::SentencePieceBpe): the merges,
/// the symbols of a char, and where a normalized piece splits into parts that BPE encodes
/// independently.
pub(super) struct SpmTables {
    /// The merges, on ids.
    pub(super) merges: MergeMap,
    /// Id of each ASCII char that is a vocabulary token, else [`NO_ID`].
    ascii: [u32; 128],
    /// Ids of the other one-char vocabulary tokens.
    chars: HashMap<char, u32, BuildHasherDefault<FxHasher>>,
    /// Id of `<0xNN>` for each byte (byte fallback), else [`NO_ID`].
    bytes: [u32; 256],
    /// Chars `x` such that some merge result contains `x▁`. Before a `▁` that follows any
    /// other non-`▁` char, no merge can ever join the symbols on the two sides (the merged
    /// token would contain `x▁`, or `>▁` for a byte-fallback symbol), so BPE of the piece is
    /// the concatenation of BPE of its parts: the piece is cut there.
    joins_space: HashSet<char, BuildHasherDefault<FxHasher>>,
}

impl SpmTables {
    /// The tables for `vocab` (the model's, without added tokens) and the merges of `json`
    /// (the `tokenizer.json`); `added` are the added tokens' contents. Refuses a vocabulary
    /// where the model could emit its unknown token (a char outside the vocabulary with a
    /// byte that has no `<0xNN>` token), or where `▁` itself is not a token.
    pub(super) fn new(
        vocab: &HashMap<String, u32>,
        added: &[String],
        json: &Value,
    ) -> Result<Self, String> {
        let mut tables = Self::chars_of(vocab, added)?;
        let merges = merges_from_json(json, vocab, |joined, _| {
            tables.note_merge(joined);
            Ok(())
        })?;
        tables.merges = MergeMap::new(&merges);
        Ok(tables)
    }

    /// The char and byte tables (no merges yet; see [`SpmTables::new`]).
    fn chars_of(vocab: &HashMap<String, u32>, added: &[String]) -> Result<Self, String> {
        let mut ascii = [NO_ID; 128];
        let mut chars = HashMap::default();
        for (tok, &id) in vocab {
            let mut it = tok.chars();
            if let (Some(c), None) = (it.next(), it.next()) {
                if c.is_ascii() {
                    ascii[c as usize] = id;
                } else {
                    chars.insert(c, id);
                }
            }
        }
        let mut bytes = [NO_ID; 256];
        for (b, slot) in bytes.iter_mut().enumerate() {
            if let Some(&id) = vocab.get(&format!("<0x{b:02X}>")) {
                *slot = id;
                continue;
            }
            // Without <0xNN>, the byte must never need a fallback: an ASCII char that is a
            // token, or an added token by itself (split off before the model sees it).
            let c = char::from(b as u8);
            let covered = b < 0x80
                && (ascii[b] != NO_ID
                    || added
                        .iter()
                        .any(|a| a.as_str() == c.encode_utf8(&mut [0; 4])));
            if !covered {
                return Err(format!("no <0x{b:02X}> byte-fallback token"));
            }
        }
        if !chars.contains_key(&SPM_SPACE) {
            return Err("\u{2581} is not a token".into());
        }
        Ok(Self {
            merges: MergeMap::new(&[]),
            ascii,
            chars,
            bytes,
            joins_space: HashSet::default(),
        })
    }

    /// Records in [`joins_space`](Self::joins_space) every char followed by `▁` in the
    /// result `joined` of a merge.
    fn note_merge(&mut self, joined: &str) {
        let mut prev = None;
        for c in joined.chars() {
            match prev {
                Some(p) if c == SPM_SPACE && p != SPM_SPACE => {
                    self.joins_space.insert(p);
                }
                _ => {}
            }
            prev = Some(c);
        }
    }

    /// The id of `c` as one vocabulary token.
    #[inline]
    fn char_id(&self, c: char) -> u32 {
        if c.is_ascii() {
            self.ascii[c as usize]
        } else {
            self.chars.get(&c).copied().unwrap_or(NO_ID)
        }
    }

    /// Appends the BPE input symbols of `word` (a char's token, or its bytes' `<0xNN>`).
    #[inline]
    pub(super) fn symbols(&self, word: &str, out: &mut Vec<u32>) {
        for c in word.chars() {
            match self.char_id(c) {
                NO_ID => {
                    let mut buf = [0u8; 4];
                    for &b in c.encode_utf8(&mut buf).as_bytes() {
                        out.push(self.bytes[usize::from(b)]);
                    }
                }
                id => out.push(id),
            }
        }
    }

    /// Whether a piece may be cut just before a `▁` that follows `prev` (not `▁`).
    #[inline]
    fn cut_before_space(&self, prev: char) -> bool {
        if self.joins_space.is_empty() {
            return true;
        }
        let key = if self.char_id(prev) == NO_ID {
            '>'
        } else {
            prev
        };
        !self.joins_space.contains(&key)
    }

    /// Encodes a piece of text without added tokens into `out` under `limits`: `▁` for
    /// U+0020, then BPE over the chars of each part of the piece between cuts (see
    /// [`SpmTables::joins_space`]); a part is the unit of `limits` (the stock tokenizer's
    /// pre-token is the whole piece). Returns whether the whole piece was encoded.
    pub(super) fn encode_piece(
        &self,
        piece: &str,
        limits: &EncodeLimits,
        s: &mut SpmScratch,
        bpe: &mut BpeScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        let SpmScratch { norm, spaces, syms } = s;
        // `▁` for each U+0020, noting where every `▁` of the result is (from a space, or
        // one the text had), in one pass over the bytes.
        norm.clear();
        spaces.clear();
        let bytes = piece.as_bytes();
        let mut run = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if b == b' ' {
                norm.push_str(piece.get(run..i).unwrap_or_default());
                spaces.push(norm.len() as u32);
                norm.push(SPM_SPACE);
                run = i + 1;
            } else if b == SPM_SPACE_UTF8[0]
                && bytes.get(i + 1..i + 3) == Some(&SPM_SPACE_UTF8[1..])
            {
                spaces.push((norm.len() + i - run) as u32);
            }
        }
        norm.push_str(piece.get(run..).unwrap_or_default());
        let text = norm.as_str();
        let mut start = 0;
        let mut emit = |a: usize, b: usize, out: &mut Vec<u32>| -> Result<bool, Error> {
            let Some(word) = text.get(a..b) else {
                return Ok(true);
            };
            if word.len() > limits.max_word_bytes {
                return Err(Error::WordTooLong {
                    bytes: word.len(),
                    max: limits.max_word_bytes,
                });
            }
            self.encode_word(word, syms, bpe, cache, out);
            Ok(out.len() < limits.max_ids)
        };
        for &i in spaces.iter() {
            let i = i as usize;
            if i == start {
                continue;
            }
            let Some(prev) = text.get(..i).and_then(|t| t.chars().next_back()) else {
                continue;
            };
            if prev == SPM_SPACE || !self.cut_before_space(prev) {
                continue;
            }
            if !emit(start, i, out)? {
                return Ok(false);
            }
            start = i;
        }
        if start < text.len() {
            emit(start, text.len(), out)?;
        }
        Ok(true)
    }

    /// BPE of one part of a normalized piece, through `cache`.
    fn encode_word(
        &self,
        word: &str,
        syms: &mut Vec<u32>,
        bpe: &mut BpeScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        let cacheable = word.len() <= CACHE_MAX_WORD;
        if cacheable && cache.append(word.as_bytes(), out) {
            return;
        }
        let first = out.len();
        syms.clear();
        self.symbols(word, syms);
        if let [id] = syms.as_slice() {
            out.push(*id);
        } else {
            bpe::merge(&self.merges, syms.iter().copied(), bpe, out);
        }
        if cacheable {
            cache.insert(word.as_bytes(), out.get(first..).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SpmTables, SPM_SPACE};
    use std::collections::HashMap;

    #[test]
    fn cuts_only_where_no_merge_joins_across() {
        let vocab: HashMap<String, u32> = ["a", "b", ">", "\u{2581}"]
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .chain((0..256).map(|b| (format!("<0x{b:02X}>"), 100 + b)))
            .collect();
        let mut t = match SpmTables::chars_of(&vocab, &[]) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        assert!(t.cut_before_space('a') && t.cut_before_space('é'));
        t.note_merge("a\u{2581}");
        t.note_merge("x>\u{2581}\u{2581}");
        assert!(!t.cut_before_space('a') && t.cut_before_space('b'));
        // 'é' is not a token: its byte-fallback symbols end in '>'.
        assert!(!t.cut_before_space('é'));
        let mut syms = Vec::new();
        t.symbols("a\u{2581}é", &mut syms);
        assert_eq!(syms, [0, 3, 100 + 0xC3, 100 + 0xA9]);
        assert_eq!(t.char_id(SPM_SPACE), 3);
        // A byte without <0xNN> that is not an ASCII token: refused.
        let mut missing = vocab.clone();
        missing.remove("<0x80>");
        assert!(SpmTables::chars_of(&missing, &[]).is_err());
    }
}
