//! [`FastEncoder`]: the fast path for recognised configurations, HF `tokenizers` otherwise.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use daachorse::{DoubleArrayAhoCorasick, DoubleArrayAhoCorasickBuilder, MatchKind};
use serde_json::Value;
use tokenizers::Tokenizer;
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use std::collections::HashSet;

use crate::bpe::{self, BpeScratch, BytesMap, FxHasher, MergeMap};
use crate::bytelevel::ByteLevel;
use crate::config::{recognise, Flavor, Recognised};
use crate::cuts::{Cutter, NO_TOKEN};
use crate::pretok::{self, CharInfo};
use crate::pretok_o200k;
use crate::segment_cache::{SegmentCache, MIN_SEGMENT};
use crate::KvTokenError;

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
    nfc: String,
    chars: Vec<CharInfo>,
    /// Decoded chars for [`Flavor::O200k`].
    chars_o200k: Vec<pretok_o200k::CharInfo>,
    bpe: BpeScratch,
    caches: Vec<WordCache>,
    syms: Vec<u32>,
    cut: CutScratch,
}

/// Buffers for cutting long words ([`Cutter::cuts`]).
#[derive(Default)]
struct CutScratch {
    lo: Vec<(u32, u32)>,
    parts: Vec<(u32, u32)>,
    /// Where the `▁` of a normalized SentencePiece-style piece are.
    parts_of_spm: Vec<u32>,
}

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

/// Words longer than this (bytes) are not cached.
const CACHE_MAX_WORD: usize = 256;
/// A cache holding this many words is emptied before the next insertion.
const CACHE_MAX_WORDS: usize = 1 << 16;
/// A scratch keeps the caches of at most this many encoders (the oldest goes first).
const CACHE_MAX_ENCODERS: usize = 8;

/// Slots of a [`WordCache`]'s direct-mapped table (a power of two; 32 bytes each).
const SHORT_SLOTS: usize = 1 << 13;
/// Most ids a direct-mapped slot holds.
const SLOT_IDS: usize = 3;

/// One slot of the direct-mapped table: a word of up to 15 bytes packed with its length
/// ([`pack_short`]; 0, which no word of at least one byte packs to, marks an empty slot)
/// and its ids.
#[derive(Clone, Copy, Default)]
struct ShortSlot {
    key: u128,
    ids: [u32; SLOT_IDS],
    len: u32,
}

/// The ids of recently seen words, for one encoder (`uid`).
///
/// Words of up to 15 bytes with at most [`SLOT_IDS`] ids (nearly all words of chat text) live
/// in a direct-mapped table of [`SHORT_SLOTS`] slots (256 KiB): one multiply picks the slot,
/// one 128-bit compare of the packed word decides, a newer word evicts an older one. It
/// cannot return the ids of another word: the packed key holds every byte of the word and
/// its length, and a slot is only ever written as a whole with the key and the ids the
/// encoder computed for that key. Other words go to the hash maps.
struct WordCache {
    uid: u64,
    slots: Vec<ShortSlot>,
    /// Words of up to 15 bytes with more ids, packed into one integer (no memcmp).
    short: HashMap<u128, (u32, u32), BuildHasherDefault<FxHasher>>,
    /// Longer words.
    long: BytesMap<(u32, u32)>,
    ids: Vec<u32>,
    /// BPE of the parts of cut words, for an encoder whose words skip BPE when they are
    /// vocabulary tokens (`ignore_merges`): a part is always merged, so its ids cannot
    /// share the words' cache.
    parts: Option<Box<WordCache>>,
}

/// The first `b.len() < 8` bytes of `b`, little-endian, zero-extended.
#[inline]
fn load_partial(b: &[u8]) -> u64 {
    let n = b.len();
    let (first, last) = match n {
        0 => return 0,
        1 => return b.first().map_or(0, |&x| u64::from(x)),
        2 | 3 => (
            b.get(..2)
                .map_or(0, |x| u64::from(u16::from_le_bytes([x[0], x[1]]))),
            b.get(n - 2..)
                .map_or(0, |x| u64::from(u16::from_le_bytes([x[0], x[1]]))),
        ),
        _ => (
            b.get(..4).map_or(0, |x| {
                u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            }),
            b.get(n - 4..).map_or(0, |x| {
                u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            }),
        ),
    };
    // The two loads overlap on equal bytes; the last one is shifted into place.
    let width = if n < 4 { 2 } else { 4 };
    first | (last << (8 * (n - width)))
}

/// `word` packed into a `u128` with its length in the top byte, if it is under 16 bytes.
#[inline]
fn pack_short(word: &[u8]) -> Option<u128> {
    let n = word.len();
    if n >= 16 {
        return None;
    }
    let (lo, hi) = match word.split_first_chunk::<8>() {
        Some((head, tail)) => (u64::from_le_bytes(*head), load_partial(tail)),
        None => (load_partial(word), 0),
    };
    Some(u128::from(lo) | (u128::from(hi) << 64) | ((n as u128) << 120))
}

/// The slot of a packed word.
#[inline]
fn slot_of(key: u128) -> usize {
    let h =
        ((key as u64) ^ ((key >> 64) as u64).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 32) as usize & (SHORT_SLOTS - 1)
}

impl WordCache {
    fn new(uid: u64) -> Self {
        Self {
            uid,
            slots: vec![ShortSlot::default(); SHORT_SLOTS],
            short: HashMap::default(),
            long: BytesMap::default(),
            ids: Vec::new(),
            parts: None,
        }
    }

    /// The cache of cut words' parts (see [`WordCache::parts`]), made on first use.
    fn parts(&mut self) -> &mut WordCache {
        let uid = self.uid;
        self.parts
            .get_or_insert_with(|| Box::new(WordCache::new(uid)))
    }

    #[inline]
    fn get(&self, word: &[u8]) -> Option<&[u32]> {
        let &(at, len) = match pack_short(word) {
            Some(key) => {
                if let Some(slot) = self.slots.get(slot_of(key)).filter(|s| s.key == key) {
                    return slot.ids.get(..slot.len as usize);
                }
                self.short.get(&key)?
            }
            None => self.long.get(word)?,
        };
        self.ids.get(at as usize..(at as usize + len as usize))
    }

    /// [`insert`](Self::insert) into the direct-mapped slots only: nothing for a word of
    /// 16 bytes or more or more than [`SLOT_IDS`] ids.
    fn insert_slot(&mut self, word: &[u8], ids: &[u32]) {
        if ids.len() <= SLOT_IDS {
            if let Some(key) = pack_short(word) {
                self.insert(word, ids);
                debug_assert!(self.slots.get(slot_of(key)).is_some_and(|s| s.key == key));
            }
        }
    }

    fn insert(&mut self, word: &[u8], ids: &[u32]) {
        let key = pack_short(word);
        if let Some(key) = key.filter(|_| ids.len() <= SLOT_IDS) {
            if let Some(slot) = self.slots.get_mut(slot_of(key)) {
                let mut inline = [0; SLOT_IDS];
                if let Some(dst) = inline.get_mut(..ids.len()) {
                    dst.copy_from_slice(ids);
                }
                *slot = ShortSlot {
                    key,
                    ids: inline,
                    len: ids.len() as u32,
                };
                return;
            }
        }
        if self.short.len() + self.long.len() >= CACHE_MAX_WORDS {
            self.short.clear();
            self.long.clear();
            self.ids.clear();
        }
        let entry = (self.ids.len() as u32, ids.len() as u32);
        self.ids.extend_from_slice(ids);
        match key {
            Some(key) => self.short.insert(key, entry),
            None => self.long.insert(word.into(), entry),
        };
    }
}

/// Which words [`FastPath::through_cache`] caches.
#[derive(Clone, Copy)]
enum Cached {
    /// Words of at most this many bytes, in the slots or the hash maps.
    UpTo(usize),
    /// Words of under 16 bytes with at most [`SLOT_IDS`] ids, in the direct-mapped slots.
    SlotsOnly,
}

/// `out.extend_from_slice(ids)`, without a `memcpy` call for the one to three ids of a
/// cached word.
#[inline]
fn extend_short(out: &mut Vec<u32>, ids: &[u32]) {
    match *ids {
        [a] => out.push(a),
        [a, b] => out.extend([a, b]),
        [a, b, c] => out.extend([a, b, c]),
        _ => out.extend_from_slice(ids),
    }
}

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The tables of the fast path.
struct FastPath {
    /// Identifies this encoder's word cache in a [`Scratch`].
    uid: u64,
    cfg: Recognised,
    /// Id of the byte-level char of each byte.
    byte_ids: [u32; 256],
    merges: MergeMap,
    /// The model vocabulary keyed by raw bytes; only filled when `ignore_merges`.
    vocab: BytesMap<u32>,
    /// Added tokens (all non-normalized, no strip/single-word flags), leftmost-longest.
    added: Option<DoubleArrayAhoCorasick<u32>>,
    /// When every added token starts with the same ASCII byte: that byte and the longest
    /// added token's length in bytes ([`FastPath::next_added`] then jumps between
    /// occurrences of the byte instead of running the automaton over every byte).
    added_lead: Option<(char, usize)>,
    /// Otherwise, when the added tokens start with at most [`MAX_LEADS`] distinct bytes
    /// (gemma-2: `<`, `\n`, `\t`, `[`, and `▁`'s first byte): bit `b` set for each, and the
    /// longest added token's length (the same jump, to the next byte of the set).
    added_leads: Option<([u64; 4], usize)>,
    /// The tables of [`Flavor::SentencePieceBpe`].
    spm: Option<SpmTables>,
    /// The bytes of every merge output, one after the other (byte-level flavours only)...
    outputs: Vec<u8>,
    /// ... where each ends, and its id.
    output_ends: Vec<(u32, u32)>,
    /// The automaton over `outputs`, built once [`CUTTER_AFTER`] bytes of long words were
    /// merged whole (or by [`FastEncoder::prepare_long_words`]).
    cutter: OnceLock<Option<Cutter>>,
    /// Bytes of long words merged whole while `cutter` was not built.
    long_bytes: AtomicU64,
}

/// Most distinct first bytes of added tokens for [`FastPath::added_leads`].
const MAX_LEADS: u32 = 8;

/// No id (a char outside the vocabulary, a byte without a `<0xNN>` token).
const NO_ID: u32 = u32::MAX;

/// `▁`, what the SentencePiece-style normalizer puts for U+0020.
const SPM_SPACE: char = '\u{2581}';
/// [`SPM_SPACE`] in UTF-8.
const SPM_SPACE_UTF8: [u8; 3] = [0xE2, 0x96, 0x81];

/// What [`Flavor::SentencePieceBpe`] needs besides the merges: the symbols of a char, and
/// where a normalized piece splits into words that BPE encodes independently.
struct SpmTables {
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
    fn symbols(&self, word: &str, out: &mut Vec<u32>) {
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
/// # Ok::<(), kvtoken::KvTokenError>(())
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
    pub fn from_bytes(json: &[u8]) -> Result<Self, KvTokenError> {
        let stock = Tokenizer::from_bytes(json).map_err(|e| KvTokenError::Load(e.to_string()))?;
        let value: Value =
            serde_json::from_slice(json).map_err(|e| KvTokenError::Load(e.to_string()))?;
        Ok(Self::build(stock, &value))
    }

    /// Builds an encoder from a `tokenizer.json` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, KvTokenError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| KvTokenError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes)
    }

    /// Builds an encoder from a loaded `tokenizers::Tokenizer` (its configuration is read back
    /// through its JSON serialisation).
    pub fn from_tokenizer(stock: Tokenizer) -> Result<Self, KvTokenError> {
        let json = stock
            .to_string(false)
            .map_err(|e| KvTokenError::Load(e.to_string()))?;
        let value: Value =
            serde_json::from_str(&json).map_err(|e| KvTokenError::Load(e.to_string()))?;
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
        if let Some(fast) = self.fast.as_ref().filter(|f| f.spm.is_none()) {
            let _ = fast.cutter();
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
    ) -> Result<(), KvTokenError> {
        if self.fast.is_none() {
            return self.encode_stock_into(text, add_special_tokens, out);
        }
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => {
                self.encode_with_scratch(&mut scratch, text, add_special_tokens, out)
            }
            Err(_) => {
                self.encode_with_scratch(&mut Scratch::default(), text, add_special_tokens, out)
            }
        })
    }

    /// [`encode_into`](Self::encode_into) with caller-held buffers.
    pub fn encode_with_scratch(
        &self,
        scratch: &mut Scratch,
        text: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), KvTokenError> {
        out.clear();
        match &self.fast {
            Some(fast) if u32::try_from(text.len()).is_ok() => {
                fast.encode(scratch, text, add_special_tokens, out);
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
    ) -> Result<(), KvTokenError> {
        match &self.fast {
            Some(fast) if u32::try_from(text.len()).is_ok() => {
                out.clear();
                SCRATCH.with(|cell| match cell.try_borrow_mut() {
                    Ok(mut scratch) => {
                        fast.encode_cached(&mut scratch, text, add_special_tokens, cache, out)
                    }
                    Err(_) => fast.encode_cached(
                        &mut Scratch::default(),
                        text,
                        add_special_tokens,
                        cache,
                        out,
                    ),
                });
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
    /// ([`KvTokenError::WordTooLong`]) before it is encoded. The fallback path cannot see its
    /// pre-tokens nor stop early: it encodes everything and cuts, and refuses a text longer
    /// than `limits.max_fallback_bytes` ([`KvTokenError::FallbackTooLong`]) before encoding.
    pub fn encode_limited(
        &self,
        text: &str,
        add_special_tokens: bool,
        limits: &EncodeLimits,
        out: &mut Vec<u32>,
    ) -> Result<bool, KvTokenError> {
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
    ) -> Result<bool, KvTokenError> {
        out.clear();
        // One id more than asked shows whether the encoding goes on.
        let probe = EncodeLimits {
            max_ids: limits.max_ids.saturating_add(1),
            ..*limits
        };
        match &self.fast {
            Some(fast) if u32::try_from(text.len()).is_ok() => {
                SCRATCH.with(|cell| match cell.try_borrow_mut() {
                    Ok(mut scratch) => fast.encode_limited(
                        &mut scratch,
                        text,
                        add_special_tokens,
                        &probe,
                        cache,
                        out,
                    ),
                    Err(_) => fast.encode_limited(
                        &mut Scratch::default(),
                        text,
                        add_special_tokens,
                        &probe,
                        cache,
                        out,
                    ),
                })?;
            }
            _ if text.len() > limits.max_fallback_bytes => {
                return Err(KvTokenError::FallbackTooLong {
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

    /// Encodes `text` and returns the ids.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, KvTokenError> {
        let mut out = Vec::new();
        self.encode_into(text, add_special_tokens, &mut out)?;
        Ok(out)
    }

    /// The reference: HF `tokenizers`' own ids for `text`.
    pub fn encode_stock(
        &self,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, KvTokenError> {
        let mut out = Vec::new();
        self.encode_stock_into(text, add_special_tokens, &mut out)?;
        Ok(out)
    }

    fn encode_stock_into(
        &self,
        text: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), KvTokenError> {
        let enc = self
            .stock
            .encode(text, add_special_tokens)
            .map_err(|e| KvTokenError::Encode(e.to_string()))?;
        out.clear();
        out.extend_from_slice(enc.get_ids());
        Ok(())
    }

    /// The byte spans the fast pre-tokenizer splits `text` into (no normalization, no added
    /// tokens), for comparison with `tokenizers`' pre-tokenizer; `None` on the fallback path.
    pub fn pre_tokenize_spans(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        let fast = self.fast.as_ref().filter(|f| f.spm.is_none())?;
        let mut spans = Vec::new();
        let emit = |a, b| {
            spans.push((a, b));
            true
        };
        // The same dispatch as the encoder: the ASCII lane for ASCII text.
        let max_digits = fast.cfg.flavor.max_digits();
        if fast.cfg.flavor == Flavor::O200k {
            pretok_o200k::split(text, &mut Vec::new(), emit);
        } else if text.is_ascii() {
            pretok::split_ascii(text.as_bytes(), max_digits, emit);
        } else {
            let mut chars = Vec::new();
            pretok::scan(text, &mut chars);
            pretok::split(text.len(), &chars, max_digits, emit);
        }
        Some(spans)
    }
}

/// Bounds on one encode call ([`FastEncoder::encode_limited`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeLimits {
    /// Ids wanted (the caller's cap); work stops once they are known.
    pub max_ids: usize,
    /// Longest pre-token (byte run the pre-tokenizer does not split) encoded; longer is
    /// refused ([`KvTokenError::WordTooLong`]).
    pub max_word_bytes: usize,
    /// Longest text handed whole to the stock tokenizer on the fallback path (where
    /// pre-tokens are invisible and work cannot stop at `max_ids`); longer is refused
    /// ([`KvTokenError::FallbackTooLong`]).
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

impl FastPath {
    fn new(stock: &Tokenizer, json: &Value) -> Result<Self, String> {
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
        let lead = patterns.first().and_then(|(p, _)| p.chars().next());
        let added_lead = lead
            .filter(|c| c.is_ascii() && patterns.iter().all(|(p, _)| p.starts_with(*c)))
            .map(|c| (c, patterns.iter().map(|(p, _)| p.len()).max().unwrap_or(0)));
        let longest = patterns.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
        let mut leads = [0u64; 4];
        for b in patterns.iter().filter_map(|(p, _)| p.bytes().next()) {
            leads[usize::from(b / 64)] |= 1 << (b % 64);
        }
        let added_leads = (added_lead.is_none()
            && !patterns.is_empty()
            && leads.iter().map(|w| w.count_ones()).sum::<u32>() <= MAX_LEADS)
            .then_some((leads, longest));
        let added = if patterns.is_empty() {
            None
        } else {
            Some(
                DoubleArrayAhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build_with_values(patterns)
                    .map_err(|e| format!("added tokens: {e}"))?,
            )
        };

        let bl = ByteLevel::new();
        let vocab = stock.get_vocab(false);
        let is_spm = cfg.flavor == Flavor::SentencePieceBpe;
        let mut byte_ids = [0u32; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate().filter(|_| !is_spm) {
            let c = bl.char_of(b as u8).to_string();
            *slot = *vocab
                .get(&c)
                .ok_or_else(|| format!("byte-level char {c:?} missing from the vocabulary"))?;
        }
        let mut spm = if is_spm {
            let added: Vec<String> = stock
                .get_added_tokens_decoder()
                .values()
                .map(|t| t.content.clone())
                .collect();
            Some(SpmTables::new(&vocab, &added)?)
        } else {
            None
        };

        let model = json.get("model").unwrap_or(&Value::Null);
        let merges_json = model
            .get("merges")
            .and_then(Value::as_array)
            .ok_or("model.merges missing")?;
        let mut merges = Vec::with_capacity(merges_json.len());
        let (mut outputs, mut output_ends) = (Vec::new(), Vec::new());
        let mut rank = 0u32;
        for m in merges_json {
            let (a, b) = match m {
                Value::String(line) => {
                    if line.starts_with("#version") {
                        continue;
                    }
                    let mut parts = line.split(' ');
                    match (parts.next(), parts.next(), parts.next()) {
                        (Some(a), Some(b), None) => (a, b),
                        _ => return Err(format!("bad merge {line:?}")),
                    }
                }
                Value::Array(pair) => match pair.as_slice() {
                    [Value::String(a), Value::String(b)] => (a.as_str(), b.as_str()),
                    _ => return Err("bad merge pair".into()),
                },
                _ => return Err("bad merge".into()),
            };
            let id = |s: &str| {
                vocab
                    .get(s)
                    .copied()
                    .ok_or_else(|| format!("merge token {s:?} not in vocab"))
            };
            let joined = format!("{a}{b}");
            if let Some(t) = spm.as_mut() {
                let mut prev = None;
                for c in joined.chars() {
                    match prev {
                        Some(p) if c == SPM_SPACE && p != SPM_SPACE => {
                            t.joins_space.insert(p);
                        }
                        _ => {}
                    }
                    prev = Some(c);
                }
            }
            if !is_spm {
                outputs.extend(
                    bl.decode(&joined)
                        .ok_or_else(|| format!("merge {joined:?} is not byte-level"))?,
                );
                output_ends.push((outputs.len() as u32, id(&joined)?));
            }
            merges.push(((id(a)?, id(b)?), (rank, id(&joined)?)));
            rank += 1;
        }
        let merges = MergeMap::new(&merges);

        let mut by_bytes = BytesMap::default();
        if cfg.ignore_merges {
            for (tok, &id) in &vocab {
                if let Some(bytes) = bl.decode(tok) {
                    by_bytes.insert(bytes.into_boxed_slice(), id);
                }
            }
        }
        Ok(Self {
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            cfg,
            byte_ids,
            merges,
            vocab: by_bytes,
            added,
            added_lead,
            added_leads,
            spm,
            outputs,
            output_ends,
            cutter: OnceLock::new(),
            long_bytes: AtomicU64::new(0),
        })
    }

    /// The cutter of this table's merge outputs, built on first use (once per encoder):
    /// each output with its id when BPE of its bytes is that one id.
    fn cutter(&self) -> Option<&Cutter> {
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

    /// The first added-token match of `text` at or after byte `from` (leftmost-longest,
    /// as the automaton's `leftmost_find_iter` from `from`): `(start, end, id)`.
    /// With [`added_lead`](Self::added_lead) a match can only start at that byte, so only
    /// the bytes from each occurrence of it to the longest token's length are searched: the
    /// leftmost match of that window starts at its first byte exactly when some token
    /// matches there, and it is then the longest one there, as in the whole text.
    /// `next_added_matches_the_automaton` checks it against the automaton's own iterator.
    #[inline]
    fn next_added(&self, text: &str, mut from: usize) -> Option<(usize, usize, u32)> {
        let ac = self.added.as_ref()?;
        let bytes = text.as_bytes();
        let Some((lead, longest)) = self.added_lead else {
            if let Some((leads, longest)) = &self.added_leads {
                return Self::next_added_of_set(ac, bytes, from, leads, *longest);
            }
            let m = ac.leftmost_find_iter(bytes.get(from..)?).next()?;
            return Some((from + m.start(), from + m.end(), m.value()));
        };
        loop {
            let at = from + text.get(from..)?.find(lead)?;
            let window = bytes.get(at..(at + longest).min(bytes.len()))?;
            if let Some(m) = ac.leftmost_find_iter(window).next() {
                if m.start() == 0 {
                    return Some((at, at + m.end(), m.value()));
                }
            }
            from = at + 1;
        }
    }

    /// [`next_added`](Self::next_added) with [`added_leads`](Self::added_leads): the same
    /// window search at each byte of the set.
    fn next_added_of_set(
        ac: &DoubleArrayAhoCorasick<u32>,
        bytes: &[u8],
        from: usize,
        leads: &[u64; 4],
        longest: usize,
    ) -> Option<(usize, usize, u32)> {
        let is_lead = |b: u8| leads[usize::from(b / 64)] & (1 << (b % 64)) != 0;
        let mut at = from;
        loop {
            at += bytes.get(at..)?.iter().position(|&b| is_lead(b))?;
            let window = bytes.get(at..(at + longest).min(bytes.len()))?;
            if let Some(m) = ac.leftmost_find_iter(window).next() {
                if m.start() == 0 {
                    return Some((at, at + m.end(), m.value()));
                }
            }
            at += 1;
        }
    }

    fn encode(&self, s: &mut Scratch, text: &str, add_special_tokens: bool, out: &mut Vec<u32>) {
        if add_special_tokens {
            out.extend_from_slice(&self.cfg.prefix);
        }
        let mut last = 0;
        while let Some((start, end, id)) = self.next_added(text, last) {
            if let Some(piece) = text.get(last..start) {
                self.encode_piece(s, piece, out);
            }
            out.push(id);
            last = end;
        }
        if let Some(piece) = text.get(last..) {
            self.encode_piece(s, piece, out);
        }
        if add_special_tokens {
            out.extend_from_slice(&self.cfg.suffix);
        }
    }

    /// [`encode`](Self::encode) under `limits`: stops once `out` holds `limits.max_ids` ids
    /// (pre-token by pre-token, so the ids are a prefix of the full encoding; the last
    /// pre-token may overshoot) and refuses a pre-token longer than `limits.max_word_bytes`.
    fn encode_limited(
        &self,
        s: &mut Scratch,
        text: &str,
        add_special_tokens: bool,
        limits: &EncodeLimits,
        cache: Option<&SegmentCache>,
        out: &mut Vec<u32>,
    ) -> Result<(), KvTokenError> {
        if add_special_tokens {
            out.extend_from_slice(&self.cfg.prefix);
        }
        let mut last = 0;
        while let Some((start, end, id)) = self.next_added(text, last) {
            if out.len() >= limits.max_ids {
                return Ok(());
            }
            if let Some(piece) = text.get(last..start) {
                self.encode_piece_limited_cached(s, piece, limits, cache, out)?;
            }
            if out.len() >= limits.max_ids {
                return Ok(());
            }
            out.push(id);
            last = end;
        }
        if out.len() >= limits.max_ids {
            return Ok(());
        }
        if let Some(piece) = text.get(last..) {
            self.encode_piece_limited_cached(s, piece, limits, cache, out)?;
        }
        if add_special_tokens && out.len() < limits.max_ids {
            out.extend_from_slice(&self.cfg.suffix);
        }
        Ok(())
    }

    /// [`encode`](Self::encode) with each long piece between added tokens looked up in (or
    /// inserted into) `cache`.
    fn encode_cached(
        &self,
        s: &mut Scratch,
        text: &str,
        add_special_tokens: bool,
        cache: &SegmentCache,
        out: &mut Vec<u32>,
    ) {
        if add_special_tokens {
            out.extend_from_slice(&self.cfg.prefix);
        }
        let mut last = 0;
        while let Some((start, end, id)) = self.next_added(text, last) {
            if let Some(piece) = text.get(last..start) {
                self.encode_piece_cached(s, piece, cache, out);
            }
            out.push(id);
            last = end;
        }
        if let Some(piece) = text.get(last..) {
            self.encode_piece_cached(s, piece, cache, out);
        }
        if add_special_tokens {
            out.extend_from_slice(&self.cfg.suffix);
        }
    }

    /// [`encode_piece_limited`](Self::encode_piece_limited) through `cache` when given: a
    /// cached piece is copied whole (the caller cuts); only a completely encoded piece is
    /// inserted.
    fn encode_piece_limited_cached(
        &self,
        s: &mut Scratch,
        piece: &str,
        limits: &EncodeLimits,
        cache: Option<&SegmentCache>,
        out: &mut Vec<u32>,
    ) -> Result<bool, KvTokenError> {
        let Some(cache) = cache.filter(|_| piece.len() >= MIN_SEGMENT) else {
            return self.encode_piece_limited(s, piece, limits, out);
        };
        if cache.get_into(self.uid, piece.as_bytes(), out) {
            return Ok(true);
        }
        let first = out.len();
        let done = self.encode_piece_limited(s, piece, limits, out)?;
        if done {
            cache.insert(
                self.uid,
                piece.as_bytes(),
                out.get(first..).unwrap_or_default(),
            );
        }
        Ok(done)
    }

    fn encode_piece_cached(
        &self,
        s: &mut Scratch,
        piece: &str,
        cache: &SegmentCache,
        out: &mut Vec<u32>,
    ) {
        if piece.len() < MIN_SEGMENT {
            return self.encode_piece(s, piece, out);
        }
        if cache.get_into(self.uid, piece.as_bytes(), out) {
            return;
        }
        let first = out.len();
        self.encode_piece(s, piece, out);
        cache.insert(
            self.uid,
            piece.as_bytes(),
            out.get(first..).unwrap_or_default(),
        );
    }

    /// Normalizes, pre-tokenizes and BPE-encodes a piece of text without added tokens.
    fn encode_piece(&self, s: &mut Scratch, piece: &str, out: &mut Vec<u32>) {
        // Unlimited: never fails, always completes.
        let _ = self.encode_piece_limited(s, piece, &EncodeLimits::NONE, out);
    }

    /// [`encode_piece`](Self::encode_piece), stopping after the pre-token that brings `out`
    /// to `limits.max_ids` ids, and refusing a pre-token over `limits.max_word_bytes`.
    /// Returns whether the whole piece was encoded.
    fn encode_piece_limited(
        &self,
        s: &mut Scratch,
        piece: &str,
        limits: &EncodeLimits,
        out: &mut Vec<u32>,
    ) -> Result<bool, KvTokenError> {
        if piece.is_empty() {
            return Ok(true);
        }
        let Scratch {
            nfc,
            chars,
            chars_o200k,
            bpe,
            caches,
            syms,
            cut,
        } = s;
        let cache = match caches.iter().position(|c| c.uid == self.uid) {
            Some(i) => &mut caches[i],
            None => {
                if caches.len() >= CACHE_MAX_ENCODERS {
                    caches.remove(0);
                }
                caches.push(WordCache::new(self.uid));
                let last = caches.len() - 1;
                &mut caches[last]
            }
        };
        if let Some(spm) = &self.spm {
            let spaces = &mut cut.parts_of_spm;
            return self.encode_piece_spm(spm, piece, limits, nfc, spaces, syms, bpe, cache, out);
        }
        let text = if self.cfg.nfc
            && !piece.is_ascii()
            && is_nfc_quick(piece.chars()) != IsNormalized::Yes
        {
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
        let max_digits = self.cfg.flavor.max_digits();
        if self.cfg.flavor == Flavor::O200k {
            pretok_o200k::split(text, chars_o200k, emit);
        } else if bytes.is_ascii() {
            pretok::split_ascii(bytes, max_digits, emit);
        } else {
            pretok::scan(text, chars);
            pretok::split(text.len(), chars, max_digits, emit);
        }
        match failed {
            Some(bytes) => Err(KvTokenError::WordTooLong {
                bytes,
                max: limits.max_word_bytes,
            }),
            None => Ok(end == text.len()),
        }
    }

    /// [`encode_piece_limited`](Self::encode_piece_limited) for
    /// [`Flavor::SentencePieceBpe`]: `▁` for U+0020, then BPE over the chars of each part
    /// of the piece between cuts (see [`SpmTables::joins_space`]); a part is the unit of
    /// `limits` (the stock tokenizer's pre-token is the whole piece).
    #[allow(clippy::too_many_arguments)]
    fn encode_piece_spm(
        &self,
        spm: &SpmTables,
        piece: &str,
        limits: &EncodeLimits,
        norm: &mut String,
        spaces: &mut Vec<u32>,
        syms: &mut Vec<u32>,
        bpe: &mut BpeScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<bool, KvTokenError> {
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
        let mut emit = |a: usize, b: usize, out: &mut Vec<u32>| -> Result<bool, KvTokenError> {
            let Some(word) = text.get(a..b) else {
                return Ok(true);
            };
            if word.len() > limits.max_word_bytes {
                return Err(KvTokenError::WordTooLong {
                    bytes: word.len(),
                    max: limits.max_word_bytes,
                });
            }
            self.encode_word_spm(spm, word, syms, bpe, cache, out);
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
            if prev == SPM_SPACE || !spm.cut_before_space(prev) {
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

    /// BPE of one part of a normalized SentencePiece-style piece, through `cache`.
    fn encode_word_spm(
        &self,
        spm: &SpmTables,
        word: &str,
        syms: &mut Vec<u32>,
        bpe: &mut BpeScratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        let cacheable = word.len() <= CACHE_MAX_WORD;
        if cacheable {
            if let Some(ids) = cache.get(word.as_bytes()) {
                extend_short(out, ids);
                return;
            }
        }
        let first = out.len();
        syms.clear();
        spm.symbols(word, syms);
        if let [id] = syms.as_slice() {
            out.push(*id);
        } else {
            bpe::merge(&self.merges, syms.iter().copied(), bpe, out);
        }
        if cacheable {
            cache.insert(word.as_bytes(), out.get(first..).unwrap_or_default());
        }
    }

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
            let direct = if self.cfg.ignore_merges {
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
        if cacheable {
            if let Some(ids) = cache.get(word) {
                extend_short(out, ids);
                return;
            }
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
    fn encode_by_parts(
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
        let cache = if self.cfg.ignore_merges {
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
    /// `cache`'s direct-mapped slots only: the parts of a long word are mostly unique (random
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

impl SpmTables {
    /// The tables for `vocab` (the model's, without added tokens); `added` are the added
    /// tokens' contents. Refuses a vocabulary where the model could emit its unknown token
    /// (a char outside the vocabulary with a byte that has no `<0xNN>` token), or where `▁`
    /// itself is not a token.
    fn new(vocab: &HashMap<String, u32>, added: &[String]) -> Result<Self, String> {
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
            ascii,
            chars,
            bytes,
            joins_space: HashSet::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{pack_short, FastEncoder, Scratch, SpmTables, WordCache, SPM_SPACE};
    use crate::bpe::{self, BpeScratch};
    use crate::cuts::NO_TOKEN;
    use crate::runs;
    use proptest::prelude::*;
    use std::collections::HashMap;
    use std::sync::OnceLock;

    const MODELS: &[&str] = &[
        "Qwen__Qwen2.5-7B-Instruct",
        "Qwen__Qwen3-0.6B",
        "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B",
        "meta-llama__Llama-3.1-8B-Instruct",
        "LGAI-EXAONE__EXAONE-3.5-7.8B-Instruct",
        "google__gemma-2-9b-it",
        "openai__gpt-oss-20b",
    ];

    /// The fast-path encoders of the shipped tokenizers (those that have a `tokenizer.json`).
    fn encoders() -> &'static [FastEncoder] {
        static ENCODERS: OnceLock<Vec<FastEncoder>> = OnceLock::new();
        ENCODERS.get_or_init(|| {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/models");
            MODELS
                .iter()
                .filter_map(|m| FastEncoder::from_file(format!("{dir}/{m}/tokenizer.json")).ok())
                .filter(FastEncoder::is_fast)
                .collect()
        })
    }

    /// A long pre-token of one kind: `(kind, seed, length in chars)`.
    fn long_word(kind: u8, seed: u64, len: usize) -> String {
        let mut x = seed | 1;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        const ZWJ: &[&str] = &[
            "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
            "\u{1F469}\u{1F3FD}\u{200D}\u{1F4BB}",
            "\u{2764}\u{FE0F}\u{200D}\u{1F525}",
            "\u{1F680}",
        ];
        let unit = [' ', '\t', '\n', 'a', '=', '7'][next(6)];
        (0..len)
            .map(|_| match kind % 6 {
                0 => unit.to_string(),
                1 => char::from(b'a' + next(26) as u8).to_string(),
                2 => char::from_u32(0x4E00 + next(0x5200) as u32)
                    .unwrap_or('中')
                    .to_string(),
                3 => ZWJ[next(ZWJ.len())].to_string(),
                4 => [" ", "\t", "\n", "\r", "\u{3000}"][next(5)].to_string(),
                _ => {
                    ["ab", " ", "\u{4E2D}", "\u{1F680}", "x", "\u{E9}", "ing"][next(7)].to_string()
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// `next_added` (the lead-byte jump when the tokenizer allows it) finds exactly the
        /// matches of the automaton's own leftmost-longest iterator, for every shipped
        /// tokenizer, on text made of added tokens, their pieces and their lead byte.
        #[test]
        fn next_added_matches_the_automaton(parts in proptest::collection::vec((0usize..1000, 0u8..8, "[a-z<|>_ \\n\\t\\[▁’@]{0,6}"), 0..40)) {
            prop_assert_eq!(encoders().len(), 6, "a shipped tokenizer is missing or slow");
            for enc in encoders() {
                let Some(fast) = enc.fast.as_ref() else { continue };
                let Some(ac) = fast.added.as_ref() else { continue };
                let tokens: Vec<String> = enc.stock().get_added_tokens_decoder().values().map(|t| t.content.clone()).collect();
                let mut text = String::new();
                for (i, how, filler) in &parts {
                    let tok = &tokens[i % tokens.len()];
                    match how {
                        0 | 1 => text.push_str(tok),
                        2 => text.push_str(tok.get(..tok.len() / 2).unwrap_or("")),
                        3 => text.push_str(tok.get(tok.len() / 2..).unwrap_or("")),
                        4 => text.push('<'),
                        _ => text.push_str(filler),
                    }
                }
                let expected: Vec<(usize, usize, u32)> = ac
                    .leftmost_find_iter(&text)
                    .map(|m| (m.start(), m.end(), m.value()))
                    .collect();
                let mut got = Vec::new();
                let mut from = 0;
                while let Some(m) = fast.next_added(&text, from) {
                    got.push(m);
                    from = m.1;
                }
                prop_assert_eq!(got, expected, "{:?}", text);
            }
        }

        /// Long pre-tokens (runs, random letters, CJK, emoji ZWJ, mixed white space, mixed)
        /// through every shipped tokenizer's merges: `bpe::merge` (which takes the bucket
        /// queue at this length) gives the ids of the `tokenizers` algorithm.
        #[test]
        fn long_words_merge_like_the_reference(kind in 0u8..6, seed in any::<u64>(), len in 1024usize..2500) {
            let word = long_word(kind, seed, len);
            prop_assert_eq!(encoders().len(), 6, "a shipped tokenizer is missing or slow");
            for enc in encoders() {
                let Some(fast) = enc.fast.as_ref() else { continue };
                let mut syms = Vec::new();
                match &fast.spm {
                    Some(spm) => spm.symbols(&word.replace(' ', "\u{2581}"), &mut syms),
                    None => syms.extend(word.bytes().map(|b| fast.byte_ids[usize::from(b)])),
                }
                let mut s = BpeScratch::default();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                bpe::merge(&fast.merges, syms.iter().copied(), &mut s, &mut a);
                bpe::merge_reference(&fast.merges, syms.iter().copied(), &mut s, &mut b);
                prop_assert_eq!(a, b, "{:?}", enc.path());
            }
        }
    }

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
                let Some(fast) = enc.fast.as_ref().filter(|f| f.spm.is_none()) else { continue };
                let bytes = word.as_bytes();
                let mut s = Scratch::default();
                let mut cache = WordCache::new(0);
                let (mut got, mut want) = (Vec::new(), Vec::new());
                let cutter = fast.cutter().expect("a cutter");
                fast.encode_by_parts(cutter, bytes, &mut s.bpe, &mut s.cut, &mut cache, &mut got);
                let syms = bytes.iter().map(|&b| fast.byte_ids[usize::from(b)]);
                bpe::merge_reference(&fast.merges, syms, &mut BpeScratch::default(), &mut want);
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
            for unit in [" ", "\t", "\n", "=", "a", "-"] {
                for n in [50, 129, 1000, 8191, 20_000] {
                    let word = unit.repeat(n);
                    let mut syms = Vec::new();
                    match &fast.spm {
                        Some(spm) => spm.symbols(&word.replace(' ', "\u{2581}"), &mut syms),
                        None => syms.extend(word.bytes().map(|b| fast.byte_ids[usize::from(b)])),
                    }
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    let answered = runs::merge_runs(
                        &fast.merges,
                        &syms,
                        &mut runs::RunScratch::default(),
                        &mut got,
                    );
                    bpe::merge_reference(
                        &fast.merges,
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

    #[test]
    fn cuts_only_where_no_merge_joins_across() {
        let vocab: HashMap<String, u32> = ["a", "b", ">", "\u{2581}"]
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .chain((0..256).map(|b| (format!("<0x{b:02X}>"), 100 + b)))
            .collect();
        let mut t = match SpmTables::new(&vocab, &[]) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        assert!(t.cut_before_space('a') && t.cut_before_space('é'));
        t.joins_space.insert('a');
        t.joins_space.insert('>');
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
        assert!(SpmTables::new(&missing, &[]).is_err());
    }

    /// The word-level `pack_short` equals packing byte by byte (the slow, obvious twin).
    #[test]
    fn pack_short_matches_bytewise_packing() {
        let mut buf = [0u8; 20];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2000 {
            for b in &mut buf {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = if round % 3 == 0 {
                    (x % 3) as u8
                } else {
                    x as u8
                };
            }
            for n in 0..=buf.len() {
                let word = &buf[..n];
                let slow = (n < 16).then(|| {
                    let mut k = [0u8; 16];
                    k[..n].copy_from_slice(word);
                    k[15] = n as u8;
                    u128::from_le_bytes(k)
                });
                assert_eq!(pack_short(word), slow, "{word:?}");
            }
        }
    }

    /// The cache returns exactly the ids inserted for a word, whatever evicts whom.
    #[test]
    fn word_cache_returns_what_was_inserted() {
        let mut c = super::WordCache::new(1);
        let mut model: HashMap<Vec<u8>, Vec<u32>> = HashMap::new();
        let mut x = 7u64;
        for i in 0..60_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = 1 + (x % 24) as usize;
            let word: Vec<u8> = (0..n)
                .map(|k| b"ab\0z"[((x >> (2 * k)) % 4) as usize])
                .collect();
            if let Some(ids) = c.get(&word) {
                assert_eq!(Some(&ids.to_vec()), model.get(&word), "{word:?}");
                continue;
            }
            let ids: Vec<u32> = (0..(x >> 40) % 6).map(|k| i + k as u32).collect();
            c.insert(&word, &ids);
            model.insert(word, ids);
        }
    }

    #[test]
    fn short_keys_are_distinct_and_bounded() {
        assert_ne!(pack_short(b"a"), pack_short(b"a\0"));
        assert_ne!(pack_short(b""), pack_short(b"\0"));
        assert_eq!(
            pack_short(b"0123456789abcde").map(|k| (k >> 120) as u8),
            Some(15)
        );
        assert_eq!(pack_short(b"0123456789abcdef"), None);
    }
}
