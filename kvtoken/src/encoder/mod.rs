//! [`FastEncoder`]: exactly the ids of HF `tokenizers`, through a fast path for the
//! configurations kvexact recognises and through `tokenizers` itself otherwise.
//!
//! This module holds the public API; the fast path is in its submodules, one topic each:
//!
//! * [`fast_path`]: the fast path's build and its encode loop (added tokens, then pieces);
//! * [`added`]: finding the added tokens;
//! * [`byte_level`]: NFC, pre-tokenizers and BPE of byte-level words (Qwen2, Llama 3, o200k);
//! * [`sentencepiece`]: gemma-2's SentencePiece-style BPE;
//! * [`word_cache`]: the per-thread cache of words' ids.

mod added;
mod byte_level;
mod fast_path;
mod sentencepiece;
#[cfg(test)]
mod testing;
mod word_cache;

use std::cell::RefCell;
use std::path::Path;

use serde_json::Value;
use tokenizers::Tokenizer;

use crate::bpe::BpeScratch;
use crate::config::Flavor;
use crate::error::Error;
use crate::prompt_cache::{PromptCache, Reuse};
use crate::segment_cache::SegmentCache;
use byte_level::{ByteLevelScratch, PreScratch};
use fast_path::FastPath;
use sentencepiece::SpmScratch;
pub(crate) use word_cache::{next_uid, WordCache, CACHE_MAX_WORD};

/// Which path an encoder takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncoderPath {
    /// The specialised matcher and BPE for a recognised configuration.
    Fast(Flavor),
    /// HF `tokenizers`, unchanged; the string says why the configuration was not recognised.
    Fallback(String),
}

/// Per-thread buffers, reused across calls so a warm encode allocates nothing but `out`'s
/// growth. One per thread is kept internally; hold your own to pass to
/// [`FastEncoder::encode_with_scratch`] if you prefer.
#[derive(Default)]
pub struct Scratch {
    /// The word caches of the last few encoders used with this scratch.
    caches: Vec<WordCache>,
    /// BPE's buffers.
    bpe: BpeScratch,
    /// The byte-level path's buffers.
    byte_level: ByteLevelScratch,
    /// The SentencePiece path's buffers.
    spm: SpmScratch,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// A buffer that can hold more than this many elements (bytes for a string) after a call is
/// given back ([`Scratch::trim`]), as is every BPE buffer after a word of more symbols
/// ([`crate::bpe::MAX_KEPT_SYMS`], the same figure): a thread keeps what ordinary requests
/// need, not what the longest input it ever encoded needed.
const MAX_KEPT: usize = crate::bpe::MAX_KEPT_SYMS;

/// Drops `buf`'s allocation when it can hold more than [`MAX_KEPT`] elements.
pub(super) fn drop_if_long<B: Buffer>(buf: &mut B) {
    if buf.capacity() > MAX_KEPT {
        *buf = B::default();
    }
}

/// A growable buffer ([`drop_if_long`]).
pub(super) trait Buffer: Default {
    /// Elements it can hold without growing.
    fn capacity(&self) -> usize;
}

impl<T> Buffer for Vec<T> {
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
}

impl Buffer for String {
    fn capacity(&self) -> usize {
        String::capacity(self)
    }
}

impl Scratch {
    /// Gives back the buffers that grew past what ordinary inputs need (after a long word or
    /// a long SentencePiece text); the word caches are bounded on their own.
    fn trim(&mut self) {
        self.bpe.trim();
        self.byte_level.trim();
        self.spm.trim();
    }
}

/// `f` with this thread's [`Scratch`], or a fresh one when it is in use (a call made from
/// inside another on the same thread); the scratch is trimmed after `f`.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let r = f(&mut scratch);
            scratch.trim();
            r
        }
        Err(_) => f(&mut Scratch::default()),
    })
}

/// `f` with the BPE buffers of this thread's [`Scratch`] (the SentencePiece `.model` path's
/// share: it merges whole texts, with no word cache).
pub(crate) fn with_bpe_scratch<R>(f: impl FnOnce(&mut BpeScratch) -> R) -> R {
    with_scratch(|s| f(&mut s.bpe))
}

/// `f` with encoder `uid`'s word cache and the BPE buffers of this thread's [`Scratch`]: the
/// tekken tokenizer's share of what the fast paths keep per thread.
pub(crate) fn with_word_cache<R>(
    uid: u64,
    f: impl FnOnce(&mut WordCache, &mut BpeScratch) -> R,
) -> R {
    with_scratch(|s| {
        let Scratch { caches, bpe, .. } = s;
        f(word_cache::cache_of(caches, uid), bpe)
    })
}

/// A tokenizer that computes exactly the ids of HF `tokenizers` for the same `tokenizer.json`,
/// through a specialised path when it recognises the configuration ([`EncoderPath::Fast`]) and
/// through `tokenizers` itself otherwise. `Send + Sync`; share it behind an `Arc`.
///
/// ```no_run
/// let enc = kvtoken::FastEncoder::from_file("tokenizer.json")?;
/// let mut ids = Vec::new();
/// enc.encode_into("<|im_start|>user\nHi<|im_end|>\n", false, &mut ids)?;
/// assert!(enc.is_fast());
/// # Ok::<(), kvtoken::Error>(())
/// ```
pub struct FastEncoder {
    stock: Tokenizer,
    fast: Option<FastPath>,
    path: EncoderPath,
}

impl std::fmt::Debug for FastEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastEncoder")
            .field("path", &self.path)
            .finish()
    }
}

/// Probe texts encoded by both paths when an encoder is built; any difference means fallback.
const PROBES: &[&str] = &[
    "",
    "Hello, world! It's 2024-07-26 and we'll test   spacing\n\n\tand tabs.",
    "<|im_start|>user\n你好，世界<|im_end|>\n<|begin_of_text|><|eot_id|> <think>x</think>",
    "Ünïcödé e\u{301} ﬅ 'ſ  \u{3000}x\r\n 12345 🚀🚀 ",
];

impl FastEncoder {
    /// Builds an encoder from the bytes of a `tokenizer.json`.
    pub fn from_bytes(json: &[u8]) -> Result<Self, Error> {
        let stock = Tokenizer::from_bytes(json).map_err(|e| Error::Load(e.to_string()))?;
        let value: Value = serde_json::from_slice(json).map_err(|e| Error::Load(e.to_string()))?;
        Ok(Self::build(stock, &value))
    }

    /// Builds an encoder from a `tokenizer.json` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes)
    }

    /// Builds an encoder from a loaded `tokenizers::Tokenizer` (its configuration is read back
    /// through its JSON serialisation).
    pub fn from_tokenizer(stock: Tokenizer) -> Result<Self, Error> {
        let json = stock
            .to_string(false)
            .map_err(|e| Error::Load(e.to_string()))?;
        let value: Value = serde_json::from_str(&json).map_err(|e| Error::Load(e.to_string()))?;
        Ok(Self::build(stock, &value))
    }

    fn build(stock: Tokenizer, json: &Value) -> Self {
        let mut enc = Self {
            stock,
            fast: None,
            path: EncoderPath::Fallback(String::new()),
        };
        match FastPath::new(&enc.stock, json) {
            Err(reason) => enc.path = EncoderPath::Fallback(reason),
            Ok(fast) => {
                let flavor = fast.cfg.flavor;
                enc.fast = Some(fast);
                match enc.self_check() {
                    Ok(()) => enc.path = EncoderPath::Fast(flavor),
                    Err(reason) => {
                        enc.fast = None;
                        enc.path = EncoderPath::Fallback(reason);
                    }
                }
            }
        }
        enc
    }

    fn self_check(&self) -> Result<(), String> {
        let mut fast = Vec::new();
        for text in PROBES {
            for add in [false, true] {
                let stock = self.encode_stock(text, add).map_err(|e| e.to_string())?;
                self.encode_into(text, add, &mut fast)
                    .map_err(|e| e.to_string())?;
                if stock != fast {
                    return Err(format!(
                        "self-check failed on {text:?} (add_special_tokens={add})"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Builds now what the fast path otherwise builds once it has merged 1 MiB of long
    /// pre-tokens (128 bytes or more) whole: the automaton over the merge outputs that cuts
    /// long words where no merge can join across (CJK, emoji, random letters then encode
    /// several times faster). Takes about a tenth of a second for a 150k-merge table. Ids
    /// are the same either way; call it at load time to keep that cost off a request.
    /// Nothing for a SentencePiece-style or fallback encoder.
    pub fn prepare_long_words(&self) {
        if let Some(t) = self.fast.as_ref().and_then(|f| f.tables.byte_level()) {
            let _ = t.cutter();
        }
    }

    /// Which path this encoder takes.
    pub fn path(&self) -> &EncoderPath {
        &self.path
    }

    /// Whether this encoder takes the fast path.
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    /// The reference `tokenizers::Tokenizer` (also the fallback path).
    pub fn stock(&self) -> &Tokenizer {
        &self.stock
    }

    /// Encodes `text` into `out` (cleared first): exactly `Tokenizer::encode(text,
    /// add_special_tokens)`'s ids. Uses a thread-local [`Scratch`].
    pub fn encode_into(
        &self,
        text: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        if self.fast.is_none() {
            return self.encode_stock_into(text, add_special_tokens, out);
        }
        with_scratch(|scratch| self.encode_with_scratch(scratch, text, add_special_tokens, out))
    }

    /// [`encode_into`](Self::encode_into) with caller-held buffers.
    pub fn encode_with_scratch(
        &self,
        scratch: &mut Scratch,
        text: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        out.clear();
        match &self.fast {
            Some(fast) if u32::try_from(text.len()).is_ok() => {
                // Unbounded: never refuses a word, never stops early.
                let done = fast.encode(
                    scratch,
                    text,
                    add_special_tokens,
                    &EncodeLimits::NONE,
                    None,
                    out,
                );
                debug_assert!(done.is_ok());
                scratch.trim();
                Ok(())
            }
            _ => self.encode_stock_into(text, add_special_tokens, out),
        }
    }

    /// [`encode_into`](Self::encode_into) through a [`SegmentCache`]: pieces between added
    /// tokens found in `cache` are copied instead of encoded, the others encoded and
    /// inserted. Exactly the same ids as without the cache; on the fallback path the cache
    /// is not used.
    pub fn encode_into_cached(
        &self,
        text: &str,
        add_special_tokens: bool,
        cache: &SegmentCache,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        match &self.fast {
            Some(fast) if u32::try_from(text.len()).is_ok() => {
                out.clear();
                let limits = EncodeLimits::NONE;
                let done = with_scratch(|scratch| {
                    fast.encode(scratch, text, add_special_tokens, &limits, Some(cache), out)
                });
                debug_assert!(done.is_ok());
                Ok(())
            }
            _ => self.encode_into(text, add_special_tokens, out),
        }
    }

    /// Encodes the first `limits.max_ids` ids of `text` into `out` (cleared first), doing no
    /// more work than needed for them on the fast path, and returns whether the full
    /// encoding has more: `out` is then exactly the first `max_ids` ids of
    /// [`encode_into`](Self::encode_into)'s result (a prefix: each pre-token encodes on its
    /// own). A pre-token longer than `limits.max_word_bytes` is refused
    /// ([`Error::WordTooLong`]) before it is encoded. The fallback path cannot see its
    /// pre-tokens nor stop early: it encodes everything and cuts, and refuses a text longer
    /// than `limits.max_fallback_bytes` ([`Error::FallbackTooLong`]) before encoding.
    pub fn encode_limited(
        &self,
        text: &str,
        add_special_tokens: bool,
        limits: &EncodeLimits,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        self.encode_limited_cached(text, add_special_tokens, limits, None, out)
    }

    /// [`encode_limited`](Self::encode_limited) through a [`SegmentCache`] when given (the
    /// same ids; only pieces encoded whole are inserted).
    pub fn encode_limited_cached(
        &self,
        text: &str,
        add_special_tokens: bool,
        limits: &EncodeLimits,
        cache: Option<&SegmentCache>,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        out.clear();
        // One id more than asked shows whether the encoding goes on.
        let probe = EncodeLimits {
            max_ids: limits.max_ids.saturating_add(1),
            ..*limits
        };
        match &self.fast {
            Some(fast) if u32::try_from(text.len()).is_ok() => {
                with_scratch(|scratch| {
                    fast.encode(scratch, text, add_special_tokens, &probe, cache, out)
                })?;
            }
            _ if text.len() > limits.max_fallback_bytes => {
                return Err(Error::FallbackTooLong {
                    bytes: text.len(),
                    max: limits.max_fallback_bytes,
                })
            }
            _ => self.encode_stock_into(text, add_special_tokens, out)?,
        }
        let more = out.len() > limits.max_ids;
        out.truncate(limits.max_ids);
        Ok(more)
    }

    /// [`encode_limited_cached`](Self::encode_limited_cached) without special tokens
    /// (`add_special_tokens = false`), taking over the ids of a prompt in `prompts` up to the
    /// last cut proven safe for `text` (see [`crate::prompt_cache`]) and encoding only the
    /// rest; `text` is then stored for the next prompt when it was encoded completely.
    /// Exactly the same ids and answer as without `prompts`. On the fallback path `prompts`
    /// is not used.
    pub fn encode_limited_reusing(
        &self,
        text: &str,
        limits: &EncodeLimits,
        cache: Option<&SegmentCache>,
        prompts: &PromptCache,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        let Some(fast) = self
            .fast
            .as_ref()
            .filter(|_| u32::try_from(text.len()).is_ok())
        else {
            return self.encode_limited_cached(text, false, limits, cache, out);
        };
        out.clear();
        let word = limits.max_word_bytes;
        let reuse = prompts.find(fast.uid, word, fast.added.longest, text);
        let (from, taken) = match &reuse {
            Some(r) => (r.bytes, r.entry.ids.get(..r.ids).unwrap_or_default()),
            None => (0, &[][..]),
        };
        if taken.len() > limits.max_ids {
            out.extend_from_slice(taken.get(..limits.max_ids).unwrap_or_default());
            return Ok(true);
        }
        out.extend_from_slice(taken);
        let mut cuts: Vec<(usize, usize)> = match &reuse {
            Some(Reuse {
                entry,
                cut_index: Some(i),
                ..
            }) => entry.cuts.get(..=*i).unwrap_or_default().to_vec(),
            Some(Reuse {
                entry,
                cut_index: None,
                ..
            }) => entry.cuts.to_vec(),
            None => Vec::new(),
        };
        let rest = text.get(from..).unwrap_or_default();
        // One id more than asked shows whether the encoding goes on.
        let probe = EncodeLimits {
            max_ids: (limits.max_ids - taken.len()).saturating_add(1),
            ..*limits
        };
        let base = out.len();
        let first_new_cut = cuts.len();
        if !rest.is_empty() {
            let mut tail = Vec::new();
            with_scratch(|scratch| {
                fast.encode_cut(
                    scratch,
                    rest,
                    false,
                    &probe,
                    cache,
                    &mut tail,
                    Some(&mut cuts),
                )
            })?;
            out.extend_from_slice(&tail);
        }
        let more = out.len() > limits.max_ids;
        out.truncate(limits.max_ids);
        if !more {
            for c in cuts.iter_mut().skip(first_new_cut) {
                *c = (c.0 + from, c.1 + base);
            }
            let replaces = reuse.as_ref().map(|r| &r.entry);
            if reuse.as_ref().is_none_or(|r| r.cut_index.is_some()) {
                prompts.insert(fast.uid, word, text, out, cuts, replaces);
            }
        }
        Ok(more)
    }

    /// Encodes `text` and returns the ids.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.encode_into(text, add_special_tokens, &mut out)?;
        Ok(out)
    }

    /// The reference: HF `tokenizers`' own ids for `text`.
    pub fn encode_stock(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.encode_stock_into(text, add_special_tokens, &mut out)?;
        Ok(out)
    }

    fn encode_stock_into(
        &self,
        text: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        let enc = self
            .stock
            .encode(text, add_special_tokens)
            .map_err(|e| Error::Encode(e.to_string()))?;
        out.clear();
        out.extend_from_slice(enc.get_ids());
        Ok(())
    }

    /// The byte spans the fast pre-tokenizer splits `text` into (no normalization, no added
    /// tokens), for comparison with `tokenizers`' pre-tokenizer; `None` on the fallback path.
    pub fn pre_tokenize_spans(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        let tables = self.fast.as_ref()?.tables.byte_level()?;
        let mut spans = Vec::new();
        tables.pre_tokenize(text, &mut PreScratch::default(), |a, b| {
            spans.push((a, b));
            true
        });
        Some(spans)
    }
}

/// Bounds on one encode call ([`FastEncoder::encode_limited`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeLimits {
    /// Ids wanted (the caller's cap); work stops once they are known.
    pub max_ids: usize,
    /// Longest pre-token (byte run the pre-tokenizer does not split) encoded; longer is
    /// refused ([`Error::WordTooLong`]).
    pub max_word_bytes: usize,
    /// Longest text handed whole to the stock tokenizer on the fallback path (where
    /// pre-tokens are invisible and work cannot stop at `max_ids`); longer is refused
    /// ([`Error::FallbackTooLong`]).
    pub max_fallback_bytes: usize,
}

impl EncodeLimits {
    /// No bounds.
    pub const NONE: EncodeLimits = EncodeLimits {
        max_ids: usize::MAX,
        max_word_bytes: usize::MAX,
        max_fallback_bytes: usize::MAX,
    };
}

#[cfg(test)]
mod tests {
    use super::testing::{encoders, long_word};
    use super::SCRATCH;

    /// A thread that encoded a long input keeps no more than ordinary inputs need, whatever
    /// path the input took (one long pre-token of each kind, cut or merged whole), and the ids
    /// are the stock tokenizer's.
    #[test]
    fn a_long_input_leaves_the_thread_scratch_within_its_caps() {
        for enc in encoders() {
            for kind in 0..6u8 {
                let text = long_word(kind, 7 + u64::from(kind), 40_000);
                let mut ids = Vec::new();
                enc.encode_into(&text, false, &mut ids).expect("encodes");
                let mut want = Vec::new();
                enc.encode_stock_into(&text, false, &mut want)
                    .expect("stock");
                assert_eq!(ids, want, "kind {kind}");
                SCRATCH.with(|c| {
                    let s = c.borrow();
                    assert!(s.bpe.within_caps(), "BPE buffers after kind {kind}");
                    assert!(
                        s.byte_level.within_caps(),
                        "byte-level buffers after kind {kind}"
                    );
                    assert!(
                        s.spm.within_caps(),
                        "SentencePiece buffers after kind {kind}"
                    );
                });
            }
        }
    }
}
