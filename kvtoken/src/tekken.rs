//! Mistral's tekken tokenizer (`tekken.json`): tiktoken-style byte-level BPE
//! (docs/contracts/templates.md §13.7).
//!
//! A `tekken.json` holds a vocabulary of base64 token bytes with their ranks, the
//! pre-tokenizer pattern, and (in newer files) the control tokens. mistral_common's
//! `Tekkenizer` puts the control tokens on the first `default_num_special_tokens` ids and
//! the first `default_vocab_size - num_special` ranks after them: id = rank + number of
//! control tokens. Text is split with the file's pattern as the `fancy-regex` engine tiktoken
//! itself runs it — by kvtoken's hand-written matcher when the pattern is the one Mistral's
//! files carry (`pretok::tekken`, checked against fancy-regex), by fancy-regex itself for any
//! other pattern or a text fancy-regex could fail on — and each piece is encoded as tiktoken
//! does: a piece that is a vocabulary token is that token; any other is merged from its bytes,
//! always the adjacent pair whose concatenation has the lowest rank (leftmost on ties); a
//! pre-token seen before on the thread takes its ids from the word cache the fast paths keep
//! (`encoder/word_cache.rs`, one cache per tokenizer, keyed by every byte of the pre-token).
//! The merging runs on kvtoken's id-based BPE (kvtoken's `bpe` module) with a merge table built
//! from the ranks (pair → rank of the concatenation); [`Tekkenizer::encode_slow`] is its slow
//! twin over byte strings.
//!
//! Control-token strings in text are ordinary text (mistral_common's `encode` never matches
//! them): the instruct encoding adds control tokens as ids.

use std::path::Path;

use serde::Deserialize;

use crate::bpe::{merge, BpeScratch};
use crate::encoder::{next_uid, with_word_cache, WordCache, CACHE_MAX_WORD};
use crate::error::Error;
use crate::fxhash::BytesMap;
use crate::merge_map::{Merge, MergeMap};
use crate::pretok::tekken::{has_long_space_run, Tekken, TEKKEN_PATTERN};
use crate::pretok::{self, CharInfo};

/// The largest `tekken.json` accepted (the shipped v3 file is 19 MB).
pub const MAX_TEKKEN_FILE_BYTES: usize = 64 << 20;
/// The most vocabulary entries accepted.
const MAX_VOCAB: usize = 1 << 20;
/// The most control tokens accepted.
const MAX_SPECIAL: usize = 1 << 16;
/// The longest pre-tokenizer pattern accepted.
const MAX_PATTERN_BYTES: usize = 4096;
/// The longest single token accepted, in bytes.
const MAX_TOKEN_BYTES: usize = 1024;

thread_local! {
    /// The chars of a non-ASCII text being split (reused call after call).
    static CHARS: std::cell::Cell<Vec<CharInfo>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Chars of split scratch a thread keeps between calls (a larger buffer is dropped).
const MAX_KEPT_CHARS: usize = 1 << 16;

/// mistral_common's control tokens of a tekken file without a `special_tokens` list
/// (`Tekkenizer.DEPRECATED_SPECIAL_TOKENS`, ids 0..20); the rest are `<SPECIAL_{id}>`.
const DEPRECATED_SPECIALS: [&str; 20] = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
];

#[derive(Deserialize)]
struct File {
    config: Config,
    vocab: Vec<VocabEntry>,
    #[serde(default)]
    special_tokens: Option<Vec<SpecialEntry>>,
}

#[derive(Deserialize)]
struct Config {
    pattern: String,
    default_vocab_size: usize,
    default_num_special_tokens: usize,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize)]
struct VocabEntry {
    rank: usize,
    token_bytes: String,
}

#[derive(Deserialize)]
struct SpecialEntry {
    rank: usize,
    token_str: String,
}

/// A loaded tekken tokenizer; `Send + Sync`.
pub struct Tekkenizer {
    /// Rank of each vocabulary token, keyed by its bytes.
    ranks: BytesMap<u32>,
    /// Bytes of each rank.
    tokens: Vec<Box<[u8]>>,
    /// Rank of each single byte.
    byte_rank: [u32; 256],
    merges: MergeMap,
    pattern: fancy_regex::Regex,
    /// The pattern is [`TEKKEN_PATTERN`]: split by the hand-written matcher.
    matcher: bool,
    /// Its word cache in each thread's scratch (the fast paths' caches, `encoder/word_cache.rs`).
    uid: u64,
    specials: Vec<String>,
    version: Option<String>,
}

impl std::fmt::Debug for Tekkenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tekkenizer")
            .field("version", &self.version)
            .field("num_special", &self.specials.len())
            .field("ranks", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

fn bad(what: impl Into<String>) -> Error {
    Error::Tekken(what.into())
}

/// Standard base64 (with padding), as Python's `base64.b64decode` accepts it from tekken
/// files; anything else is an error.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (i, chunk) in b.chunks(4).enumerate() {
        let last = i + 1 == b.len() / 4;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut acc = 0u32;
        for &c in &chunk[..4 - pad] {
            acc = (acc << 6) | val(c)?;
        }
        acc <<= 6 * pad as u32;
        let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

impl Tekkenizer {
    /// Loads a `tekken.json` from its bytes. Fails with [`Error::Tekken`] on a file
    /// that is not a tekken file mistral_common would load the same way (ranks out of order,
    /// duplicate tokens, a bad pattern, missing single bytes, …) and
    /// [`Error::FileTooLarge`] over [`MAX_TEKKEN_FILE_BYTES`]; all bounds are checked
    /// before the tables are built.
    pub fn from_bytes(bytes: &[u8]) -> Result<Tekkenizer, Error> {
        if bytes.len() > MAX_TEKKEN_FILE_BYTES {
            return Err(Error::FileTooLarge {
                bytes: bytes.len(),
                max: MAX_TEKKEN_FILE_BYTES,
            });
        }
        let file: File =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a tekken file: {e}")))?;
        let cfg = &file.config;
        if cfg.pattern.len() > MAX_PATTERN_BYTES {
            return Err(bad("pattern too long"));
        }
        let n_special = cfg.default_num_special_tokens;
        if n_special > MAX_SPECIAL || n_special < DEPRECATED_SPECIALS.len() {
            return Err(bad(format!("{n_special} special tokens")));
        }
        if file.vocab.len() > MAX_VOCAB {
            return Err(bad(format!("{} vocabulary entries", file.vocab.len())));
        }
        let n_ranks = cfg
            .default_vocab_size
            .checked_sub(n_special)
            .filter(|&n| n >= 256 && n <= file.vocab.len())
            .ok_or_else(|| {
                bad(format!(
                    "vocab size {} with {n_special} special tokens and {} entries",
                    cfg.default_vocab_size,
                    file.vocab.len()
                ))
            })?;
        // mistral_common keeps the first `n_ranks` entries.
        let mut tokens: Vec<Box<[u8]>> = Vec::with_capacity(n_ranks);
        let mut ranks: BytesMap<u32> = BytesMap::default();
        ranks.reserve(n_ranks);
        for (i, e) in file.vocab.iter().take(n_ranks).enumerate() {
            if e.rank != i {
                return Err(bad(format!("entry {i} has rank {}", e.rank)));
            }
            if e.token_bytes.len() > MAX_TOKEN_BYTES * 4 / 3 + 4 {
                return Err(bad(format!("token {i} too long")));
            }
            let t = base64_decode(&e.token_bytes)
                .ok_or_else(|| bad(format!("token {i}: bad base64")))?;
            if t.is_empty() {
                return Err(bad(format!("token {i} is empty")));
            }
            let t: Box<[u8]> = t.into();
            if ranks.insert(t.clone(), i as u32).is_some() {
                return Err(bad(format!("token {i} is a duplicate")));
            }
            tokens.push(t);
        }
        let mut byte_rank = [0u32; 256];
        for (b, slot) in byte_rank.iter_mut().enumerate() {
            *slot = *ranks
                .get(&[b as u8][..])
                .ok_or_else(|| bad(format!("no token for byte {b:#04x}")))?;
        }
        // Pair -> rank of the concatenation, for every split of every token into two tokens.
        let mut table: Vec<Merge> = Vec::new();
        for (r, t) in tokens.iter().enumerate() {
            for cut in 1..t.len() {
                let (a, b) = t.split_at(cut);
                if let (Some(&ra), Some(&rb)) = (ranks.get(a), ranks.get(b)) {
                    table.push(((ra, rb), (r as u32, r as u32)));
                }
            }
        }
        let merges = MergeMap::new(&table);
        let pattern = fancy_regex::Regex::new(&cfg.pattern)
            .map_err(|e| bad(format!("pattern does not compile: {e}")))?;
        let specials = match &file.special_tokens {
            None => (0..n_special)
                .map(|i| match DEPRECATED_SPECIALS.get(i) {
                    Some(s) => (*s).to_string(),
                    None => format!("<SPECIAL_{i}>"),
                })
                .collect(),
            Some(list) => {
                if list.len() > n_special {
                    return Err(bad("more special tokens than default_num_special_tokens"));
                }
                let mut names: Vec<Option<String>> = vec![None; n_special];
                for s in list {
                    let slot = names
                        .get_mut(s.rank)
                        .ok_or_else(|| bad(format!("special token rank {}", s.rank)))?;
                    if slot.replace(s.token_str.clone()).is_some() {
                        return Err(bad(format!("special token rank {} twice", s.rank)));
                    }
                }
                names
                    .into_iter()
                    .enumerate()
                    .map(|(i, n)| n.unwrap_or_else(|| format!("<SPECIAL_{i}>")))
                    .collect()
            }
        };
        Ok(Tekkenizer {
            ranks,
            tokens,
            byte_rank,
            merges,
            matcher: cfg.pattern == TEKKEN_PATTERN,
            uid: next_uid(),
            pattern,
            specials,
            version: cfg.version.clone(),
        })
    }

    /// Loads a `tekken.json` file (size checked before reading it whole).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Tekkenizer, Error> {
        let path = path.as_ref();
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_TEKKEN_FILE_BYTES as u64 {
            return Err(Error::FileTooLarge {
                bytes: usize::try_from(len).unwrap_or(usize::MAX),
                max: MAX_TEKKEN_FILE_BYTES,
            });
        }
        let bytes = std::fs::read(path).map_err(io)?;
        Self::from_bytes(&bytes)
    }

    /// The file's `config.version` (`v3`, `v7`, …), if given.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// How many control tokens come before the ranks (id = rank + this).
    pub fn num_special(&self) -> u32 {
        self.specials.len() as u32
    }

    /// Ids in all: control tokens and ranks.
    pub fn vocab_size(&self) -> u32 {
        (self.specials.len() + self.tokens.len()) as u32
    }

    /// The id of the control token `name` (`<s>`, `[INST]`, …).
    pub fn special_id(&self, name: &str) -> Option<u32> {
        self.specials
            .iter()
            .position(|s| s == name)
            .map(|i| i as u32)
    }

    /// The name of control token `id`.
    pub fn special_name(&self, id: u32) -> Option<&str> {
        self.specials.get(id as usize).map(String::as_str)
    }

    /// The bytes of ordinary token `id` (`None` for a control token or an id out of range).
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        let rank = id.checked_sub(self.num_special())?;
        self.tokens.get(rank as usize).map(|t| &t[..])
    }

    /// Calls `piece` with each pre-token of `text` in order while it returns true; true when
    /// it stopped the walk early. The hand-written matcher where it splits as fancy-regex
    /// does, else fancy-regex.
    fn split<'t>(
        &self,
        text: &'t str,
        mut piece: impl FnMut(&'t str) -> bool,
    ) -> Result<bool, Error> {
        if !self.matcher || has_long_space_run(text) {
            return self.split_regex(text, piece);
        }
        let mut chars = CHARS.with(|c| c.take());
        let mut stopped = false;
        pretok::split(&Tekken, text, &mut chars, |a, b| {
            stopped = !piece(&text[a..b]);
            !stopped
        });
        if chars.capacity() <= MAX_KEPT_CHARS {
            CHARS.with(|c| c.set(chars));
        }
        Ok(stopped)
    }

    /// [`split`](Self::split) by fancy-regex running the file's pattern, as tiktoken does
    /// (the slow twin of the hand-written matcher, and the split of any other pattern).
    fn split_regex<'t>(
        &self,
        text: &'t str,
        mut piece: impl FnMut(&'t str) -> bool,
    ) -> Result<bool, Error> {
        for m in self.pattern.find_iter(text) {
            let m = m.map_err(|e| Error::Encode(format!("tekken pattern: {e}")))?;
            if !piece(m.as_str()) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Appends the ids of `text` as ordinary text (mistral_common `encode(text, bos=False,
    /// eos=False)`) to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), Error> {
        self.encode_limited_into(text, usize::MAX, out).map(|_| ())
    }

    /// [`encode_into`](Self::encode_into) that stops once more than `max_ids` ids of `text`
    /// are known: the pre-tokens are merged one after another (each on its own, as tiktoken
    /// does), so the ids appended are exactly the first ones of the whole encoding, at least
    /// `max_ids` of them when there are that many (the last pre-token's ids may go past it).
    /// True when `text` has ids past those appended or past `max_ids` (the caller cuts).
    pub fn encode_limited_into(
        &self,
        text: &str,
        max_ids: usize,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        self.encode_pieces(text, max_ids, out, false)
    }

    /// [`encode_limited_into`](Self::encode_limited_into), split by fancy-regex alone (and no
    /// word cache) when `regex_split`. Nothing is appended when it fails.
    fn encode_pieces(
        &self,
        text: &str,
        max_ids: usize,
        out: &mut Vec<u32>,
        regex_split: bool,
    ) -> Result<bool, Error> {
        let start = out.len();
        let split = if regex_split {
            let mut bpe = BpeScratch::default();
            self.split_regex(text, |p| {
                out.len() - start <= max_ids && {
                    self.encode_piece(p.as_bytes(), &mut bpe, out);
                    true
                }
            })
        } else {
            with_word_cache(self.uid, |cache, bpe| {
                self.split(text, |p| {
                    out.len() - start <= max_ids && {
                        self.encode_cached(p.as_bytes(), cache, bpe, out);
                        true
                    }
                })
            })
        };
        let stopped = match split {
            Ok(s) => s,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        };
        let offset = self.num_special();
        for id in &mut out[start..] {
            *id += offset;
        }
        Ok(stopped || out.len() - start > max_ids)
    }

    /// Appends the ranks of one pre-token: the vocabulary token it is, else merged from its
    /// bytes.
    #[inline]
    fn encode_piece(&self, bytes: &[u8], bpe: &mut BpeScratch, out: &mut Vec<u32>) {
        if let Some(&r) = self.ranks.get(bytes) {
            out.push(r);
        } else {
            merge(
                &self.merges,
                bytes.iter().map(|&b| self.byte_rank[b as usize]),
                bpe,
                out,
            );
        }
    }

    /// [`encode_piece`](Self::encode_piece) through the word cache: a pre-token of up to
    /// [`CACHE_MAX_WORD`] bytes seen before on this thread takes its ranks from the cache
    /// (keyed by every byte of the pre-token; a pre-token's ranks depend on it alone).
    #[inline]
    fn encode_cached(
        &self,
        bytes: &[u8],
        cache: &mut WordCache,
        bpe: &mut BpeScratch,
        out: &mut Vec<u32>,
    ) {
        if let [b] = bytes {
            out.push(self.byte_rank[usize::from(*b)]);
            return;
        }
        if bytes.len() > CACHE_MAX_WORD {
            return self.encode_piece(bytes, bpe, out);
        }
        if cache.append(bytes, out) {
            return;
        }
        let first = out.len();
        self.encode_piece(bytes, bpe, out);
        cache.insert(bytes, out.get(first..).unwrap_or_default());
    }

    /// [`encode`](Self::encode) with the text split by fancy-regex (tiktoken's own split)
    /// whatever the pattern: the baseline of the `kvtoken` bench's tekken ids and a twin in
    /// the tests.
    #[doc(hidden)]
    pub fn encode_regex_split(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_pieces(text, usize::MAX, &mut out, true)?;
        Ok(out)
    }

    /// The ids of `text` as ordinary text.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, &mut out)?;
        Ok(out)
    }

    /// The slow, obvious twin of [`encode`](Self::encode) for tests: each pre-token merged
    /// over byte strings by rescanning for the adjacent pair whose concatenation has the
    /// lowest rank (tiktoken's `_byte_pair_merge`), with tiktoken's whole-piece look-up first.
    /// Its split is fancy-regex's (the twin of the hand-written matcher too).
    pub fn encode_slow(&self, text: &str) -> Result<Vec<u32>, Error> {
        let offset = self.num_special();
        let mut out = Vec::new();
        self.split_regex(text, |p| {
            let bytes = p.as_bytes();
            if let Some(&r) = self.ranks.get(bytes) {
                out.push(r + offset);
                return true;
            }
            let mut parts: Vec<Vec<u8>> = bytes.iter().map(|&b| vec![b]).collect();
            loop {
                let mut best: Option<(u32, usize)> = None;
                for i in 0..parts.len().saturating_sub(1) {
                    let joined = [parts[i].as_slice(), parts[i + 1].as_slice()].concat();
                    if let Some(&r) = self.ranks.get(joined.as_slice()) {
                        if best.is_none_or(|(b, _)| r < b) {
                            best = Some((r, i));
                        }
                    }
                }
                let Some((_, i)) = best else { break };
                let right = parts.remove(i + 1);
                parts[i].extend_from_slice(&right);
            }
            out.extend(parts.iter().map(|p| self.ranks[p.as_slice()] + offset));
            true
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::base64_decode;

    #[test]
    fn base64_round_trips_known_values() {
        assert_eq!(base64_decode("AA==").unwrap(), vec![0]);
        assert_eq!(base64_decode("ICgiKg==").unwrap(), b" (\"*".to_vec());
        assert_eq!(base64_decode("YWJj").unwrap(), b"abc".to_vec());
        assert_eq!(base64_decode("YWI=").unwrap(), b"ab".to_vec());
        assert!(base64_decode("YW=I").is_none());
        assert!(base64_decode("YWJ").is_none());
        assert!(base64_decode("Y$Jj").is_none());
        assert!(base64_decode("YQ==YWJj").is_none());
    }
}
