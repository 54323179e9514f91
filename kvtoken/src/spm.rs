//! SentencePiece BPE models read from a `.model` file (a protobuf `ModelProto`), encoded as
//! the `sentencepiece` library does for mistral_common's v7 tokenizer
//! (docs/contracts/templates.md §13.9).
//!
//! The reader is a minimal hand-written protobuf decoder for the fields the encoding needs
//! (pieces with score and type, the trainer's model type, byte fallback and special ids, the
//! normaliser's name, charsmap and whitespace flags); every length is checked against the
//! input before use and bad input is a typed error ([`Error::Spm`]). Only the
//! configuration whose encoding is reproduced is accepted: a BPE model, the `identity`
//! normaliser (no charsmap), whitespace escaped to U+2581, extra whitespace kept, whitespace
//! as prefix; anything else is refused at load.
//!
//! Encoding (`sentencepiece`'s `bpe_model.cc`): the text gets the dummy-prefix U+2581 (when the
//! model asks for it and the text is not empty) and every U+0020 becomes U+2581; the result is
//! cut into characters, user-defined pieces matched first (longest) as unbreakable symbols;
//! then the adjacent pair whose concatenation is a vocabulary piece of the highest score is
//! merged (leftmost on ties) until none is left; a symbol that is not a piece becomes its
//! UTF-8 bytes' `<0xXX>` pieces (byte fallback) or `<unk>`. The merging runs on kvtoken's
//! id-based BPE with ranks = score order; [`SpmModel::encode_slow`] is the string-based twin.
//!
//! Word by word when the vocabulary proves it ([`SpmModel::merges_by_word`]): if no mergeable
//! piece (normal or user-defined) holds U+2581 right after another character, no symbol can
//! span the start of a white-space run (neither a user-defined match nor a merge result), and
//! the merges inside one stretch never depend on another (each merge is the lowest-ranked,
//! leftmost pair, which restricted to one stretch is that stretch's own lowest pair). So the
//! normalised text is cut before each white-space run, each word is merged on its
//! own and its ids are kept in the thread's word cache. Otherwise the whole text is merged at
//! once.

use std::collections::HashMap;
use std::path::Path;

use crate::bpe::merge;
use crate::encoder::CACHE_MAX_WORD;
use crate::error::Error;
use crate::merge_map::{Merge, MergeMap};

/// The largest `.model` file accepted.
pub const MAX_SPM_FILE_BYTES: usize = 64 << 20;
/// The most pieces accepted.
const MAX_PIECES: usize = 1 << 20;
/// The longest piece accepted, in bytes.
const MAX_PIECE_BYTES: usize = 1024;

/// SentencePiece piece types.
const NORMAL: u64 = 1;
const UNKNOWN: u64 = 2;
const CONTROL: u64 = 3;
const USER_DEFINED: u64 = 4;
const UNUSED: u64 = 5;
const BYTE: u64 = 6;

/// The whitespace mark.
const WS: char = '\u{2581}';

fn bad(what: impl Into<String>) -> Error {
    Error::Spm(what.into())
}

/// One protobuf field: its number and value.
enum Field<'a> {
    Varint(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

/// A bounds-checked protobuf reader over one message.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = *self
                .buf
                .get(self.at)
                .ok_or_else(|| bad("truncated varint"))?;
            self.at += 1;
            if shift == 63 && b > 1 {
                return Err(bad("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| bad("field runs past the end"))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// The next field, or `None` at the end of the message.
    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, Error> {
        if self.at >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Field::Varint(0)
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| bad("length overflow"))?;
                Field::Bytes(self.take(n)?)
            }
            5 => {
                let b = self.take(4)?;
                Field::Fixed32(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            w => return Err(bad(format!("unsupported wire type {w}"))),
        };
        if number == 0 {
            return Err(bad("field number 0"));
        }
        Ok(Some((number, field)))
    }
}

/// Whether `t` holds a U+2581 right after a character other than U+2581 (a piece that would
/// span the start of a white-space run).
fn ws_after_other(t: &str) -> bool {
    t.chars()
        .zip(t.chars().skip(1))
        .any(|(a, b)| b == WS && a != WS)
}

/// The words of a normalised text: cut before every U+2581 that follows another character
/// (each white-space run starts a word and stays whole).
fn words(norm: &str) -> impl Iterator<Item = &str> {
    let mut rest = norm;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut prev = WS;
        let cut = rest
            .char_indices()
            .find(|&(i, c)| {
                let at = i > 0 && c == WS && prev != WS;
                prev = c;
                at
            })
            .map_or(rest.len(), |(i, _)| i);
        let (word, tail) = rest.split_at(cut);
        rest = tail;
        Some(word)
    })
}

/// The buffers of one [`SpmModel::encode_into`] call, reused from part to part.
#[derive(Default)]
struct PartBuffers<'t> {
    syms: Vec<&'t str>,
    ids: Vec<u32>,
    merged: Vec<u32>,
}

/// One piece of the model.
struct Piece {
    text: String,
    score: f32,
    kind: u64,
}

fn piece_of(buf: &[u8]) -> Result<Piece, Error> {
    let mut r = Reader::new(buf);
    let mut p = Piece {
        text: String::new(),
        score: 0.0,
        kind: NORMAL,
    };
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1, Field::Bytes(b)) => {
                if b.len() > MAX_PIECE_BYTES {
                    return Err(bad("piece too long"));
                }
                p.text = std::str::from_utf8(b)
                    .map_err(|_| bad("piece is not UTF-8"))?
                    .to_string();
            }
            (2, Field::Fixed32(bits)) => p.score = f32::from_bits(bits),
            (3, Field::Varint(t)) => p.kind = t,
            (1..=3, _) => return Err(bad("piece field of the wrong wire type")),
            _ => {}
        }
    }
    Ok(p)
}

/// A loaded SentencePiece BPE model; `Send + Sync`.
pub struct SpmModel {
    /// Mergeable pieces (normal and user-defined) by text.
    pieces: HashMap<String, u32>,
    /// Every piece's text, by id.
    texts: Vec<String>,
    /// Scores, by id.
    scores: Vec<f32>,
    /// User-defined pieces, longest first (matched before merging).
    user_defined: Vec<(String, u32)>,
    /// The bytes some user-defined piece starts with.
    user_first: [bool; 256],
    /// `<0xXX>` ids, when byte fallback is on.
    bytes: Option<[u32; 256]>,
    unk_id: u32,
    bos_id: u32,
    eos_id: u32,
    add_dummy_prefix: bool,
    merges: MergeMap,
    /// Pieces that are single characters, by character.
    chars: HashMap<char, u32>,
    /// The same for ASCII and U+2581, the characters of most text, by code point
    /// (`u32::MAX`: no piece); index 128 is U+2581.
    common_chars: [u32; 129],
    /// No mergeable piece holds a U+2581 right after another character: no symbol can span
    /// the start of a white-space run, so the text is merged word by word ([`words`]).
    split_words: bool,
    /// This model's word cache in each thread's scratch (words merged word by word only).
    uid: u64,
}

impl std::fmt::Debug for SpmModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpmModel")
            .field("pieces", &self.texts.len())
            .field("byte_fallback", &self.bytes.is_some())
            .field("merges_by_word", &self.split_words)
            .finish_non_exhaustive()
    }
}

impl SpmModel {
    /// Reads a `.model` file's bytes. Fails with [`Error::Spm`] on a malformed
    /// protobuf or a configuration other than the one reproduced (module docs), and
    /// [`Error::FileTooLarge`] over [`MAX_SPM_FILE_BYTES`].
    pub fn from_bytes(bytes: &[u8]) -> Result<SpmModel, Error> {
        if bytes.len() > MAX_SPM_FILE_BYTES {
            return Err(Error::FileTooLarge {
                bytes: bytes.len(),
                max: MAX_SPM_FILE_BYTES,
            });
        }
        let mut r = Reader::new(bytes);
        let mut pieces: Vec<Piece> = Vec::new();
        let (mut model_type, mut byte_fallback, mut as_suffix) = (1u64, false, false);
        let (mut unk, mut bos, mut eos) = (0i64, 1i64, 2i64);
        let (mut name, mut charsmap) = (String::new(), 0usize);
        let (mut dummy, mut remove_ws, mut escape_ws) = (true, true, true);
        while let Some((n, f)) = r.next()? {
            match (n, f) {
                (1, Field::Bytes(b)) => {
                    if pieces.len() >= MAX_PIECES {
                        return Err(bad("too many pieces"));
                    }
                    pieces.push(piece_of(b)?);
                }
                (2, Field::Bytes(b)) => {
                    let mut t = Reader::new(b);
                    while let Some((n, f)) = t.next()? {
                        match (n, f) {
                            (3, Field::Varint(v)) => model_type = v,
                            (24, Field::Varint(v)) => as_suffix = v != 0,
                            (35, Field::Varint(v)) => byte_fallback = v != 0,
                            // int32 fields: negative values are 10-byte varints.
                            (40, Field::Varint(v)) => unk = v as i64,
                            (41, Field::Varint(v)) => bos = v as i64,
                            (42, Field::Varint(v)) => eos = v as i64,
                            _ => {}
                        }
                    }
                }
                (3, Field::Bytes(b)) => {
                    let mut t = Reader::new(b);
                    while let Some((n, f)) = t.next()? {
                        match (n, f) {
                            (1, Field::Bytes(s)) => {
                                name = String::from_utf8_lossy(s).into_owned();
                            }
                            (2, Field::Bytes(s)) => charsmap = s.len(),
                            (3, Field::Varint(v)) => dummy = v != 0,
                            (4, Field::Varint(v)) => remove_ws = v != 0,
                            (5, Field::Varint(v)) => escape_ws = v != 0,
                            _ => {}
                        }
                    }
                }
                (1..=3, _) => return Err(bad("ModelProto field of the wrong wire type")),
                _ => {}
            }
        }
        if model_type != 2 {
            return Err(bad(format!("model type {model_type} is not BPE")));
        }
        if name != "identity" || charsmap != 0 {
            return Err(bad(format!(
                "normaliser {name:?} (charsmap {charsmap} bytes): only identity is reproduced"
            )));
        }
        if remove_ws || !escape_ws || as_suffix {
            return Err(bad(
                "whitespace handling other than escaped, kept, as prefix",
            ));
        }
        let n = pieces.len();
        let id_of = |v: i64, what: &str| {
            u32::try_from(v)
                .ok()
                .filter(|&i| (i as usize) < n)
                .ok_or_else(|| bad(format!("{what} id {v} out of range")))
        };
        let (unk_id, bos_id, eos_id) = (id_of(unk, "unk")?, id_of(bos, "bos")?, id_of(eos, "eos")?);
        if pieces[unk_id as usize].kind != UNKNOWN {
            return Err(bad("the unk id is not the unknown piece"));
        }
        let mut map: HashMap<String, u32> = HashMap::with_capacity(n);
        let mut user_defined = Vec::new();
        let mut byte_ids = [u32::MAX; 256];
        for (i, p) in pieces.iter().enumerate() {
            let id = i as u32;
            match p.kind {
                NORMAL | USER_DEFINED => {
                    if p.text.is_empty() {
                        return Err(bad(format!("piece {i} is empty")));
                    }
                    if map.insert(p.text.clone(), id).is_some() {
                        return Err(bad(format!("piece {i} is a duplicate")));
                    }
                    if p.kind == USER_DEFINED {
                        user_defined.push((p.text.clone(), id));
                    }
                }
                BYTE => {
                    let hex = p
                        .text
                        .strip_prefix("<0x")
                        .and_then(|h| h.strip_suffix('>'))
                        .filter(|h| h.len() == 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| bad(format!("byte piece {:?}", p.text)))?;
                    byte_ids[hex as usize] = id;
                }
                UNUSED => return Err(bad("unused pieces are not reproduced")),
                CONTROL | UNKNOWN => {}
                k => return Err(bad(format!("piece type {k}"))),
            }
        }
        let bytes = if byte_fallback {
            if byte_ids.contains(&u32::MAX) {
                return Err(bad("byte fallback without all 256 byte pieces"));
            }
            Some(byte_ids)
        } else {
            None
        };
        user_defined.sort_by_key(|u| std::cmp::Reverse(u.0.len()));
        // Ranks: pieces by score, highest first; equal scores share a rank (the merge then
        // goes to the leftmost pair, as sentencepiece's comparison does).
        let mut order: Vec<u32> = map.values().copied().collect();
        order.sort_by(|&a, &b| {
            pieces[b as usize]
                .score
                .total_cmp(&pieces[a as usize].score)
        });
        let mut rank = vec![0u32; n];
        let mut r = 0u32;
        for (k, &id) in order.iter().enumerate() {
            if k > 0 && pieces[order[k - 1] as usize].score != pieces[id as usize].score {
                r += 1;
            }
            rank[id as usize] = r;
        }
        let user: std::collections::HashSet<u32> = user_defined.iter().map(|u| u.1).collect();
        let mut table: Vec<Merge> = Vec::new();
        for (text, &id) in &map {
            for (cut, _) in text.char_indices().skip(1) {
                let (a, b) = text.split_at(cut);
                if let (Some(&ia), Some(&ib)) = (map.get(a), map.get(b)) {
                    if !user.contains(&ia) && !user.contains(&ib) {
                        table.push(((ia, ib), (rank[id as usize], id)));
                    }
                }
            }
        }
        let chars: HashMap<char, u32> = map
            .iter()
            .filter(|(t, id)| t.chars().count() == 1 && !user.contains(id))
            .filter_map(|(t, &id)| Some((t.chars().next()?, id)))
            .collect();
        let split_words = map.keys().all(|t| !ws_after_other(t));
        Ok(SpmModel {
            split_words,
            uid: crate::encoder::next_uid(),
            merges: MergeMap::new(&table),
            texts: pieces.iter().map(|p| p.text.clone()).collect(),
            scores: pieces.iter().map(|p| p.score).collect(),
            pieces: map,
            user_first: {
                let mut first = [false; 256];
                for &b in user_defined
                    .iter()
                    .filter_map(|(u, _)| u.as_bytes().first())
                {
                    first[usize::from(b)] = true;
                }
                first
            },
            user_defined,
            bytes,
            unk_id,
            bos_id,
            eos_id,
            add_dummy_prefix: dummy,
            common_chars: {
                let mut t = [u32::MAX; 129];
                for (&c, &id) in &chars {
                    match c {
                        WS => t[128] = id,
                        c if c.is_ascii() => t[c as usize] = id,
                        _ => {}
                    }
                }
                t
            },
            chars,
        })
    }

    /// Reads a `.model` file (size checked before reading it whole).
    pub fn from_file(path: impl AsRef<Path>) -> Result<SpmModel, Error> {
        let path = path.as_ref();
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_SPM_FILE_BYTES as u64 {
            return Err(Error::FileTooLarge {
                bytes: usize::try_from(len).unwrap_or(usize::MAX),
                max: MAX_SPM_FILE_BYTES,
            });
        }
        Self::from_bytes(&std::fs::read(path).map_err(io)?)
    }

    /// The number of pieces (ids).
    pub fn vocab_size(&self) -> u32 {
        self.texts.len() as u32
    }

    /// The id of the piece `text` (any type).
    pub fn piece_id(&self, text: &str) -> Option<u32> {
        self.texts.iter().position(|t| t == text).map(|i| i as u32)
    }

    /// The text of piece `id`.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    /// The BOS id.
    pub fn bos_id(&self) -> u32 {
        self.bos_id
    }

    /// The EOS id.
    pub fn eos_id(&self) -> u32 {
        self.eos_id
    }

    /// Whether the text is merged word by word (cut before every white-space run): true when
    /// no mergeable piece holds a U+2581 right after another character, so no merge can span
    /// such a cut and the ids are those of merging the whole text; else the whole text is
    /// merged at once.
    pub fn merges_by_word(&self) -> bool {
        self.split_words
    }

    /// The text the model merges: dummy prefix, spaces as U+2581.
    fn normalise(&self, text: &str) -> String {
        if text.is_empty() {
            return String::new();
        }
        let mut out = String::with_capacity(text.len() + 3);
        if self.add_dummy_prefix {
            out.push(WS);
        }
        out.extend(text.chars().map(|c| if c == ' ' { WS } else { c }));
        out
    }

    /// The initial symbols of `norm`: user-defined pieces (longest first) or characters.
    fn symbols<'t>(&self, norm: &'t str) -> Vec<&'t str> {
        let mut out = Vec::with_capacity(norm.len());
        self.symbols_into(norm, &mut out);
        out
    }

    /// [`symbols`](Self::symbols) appended to `out`.
    fn symbols_into<'t>(&self, norm: &'t str, out: &mut Vec<&'t str>) {
        let mut rest = norm;
        while let Some(c) = rest.chars().next() {
            // Only a byte some user-defined piece starts with can start one (none is empty).
            let n = if self.user_first[usize::from(rest.as_bytes()[0])] {
                self.user_defined
                    .iter()
                    .find(|(u, _)| rest.starts_with(u.as_str()))
                    .map_or(c.len_utf8(), |(u, _)| u.len())
            } else {
                c.len_utf8()
            };
            out.push(&rest[..n]);
            rest = &rest[n..];
        }
    }

    /// The id of the piece that is the single character `c`, if any.
    #[inline]
    fn char_id(&self, c: char) -> Option<u32> {
        let slot = match c {
            WS => 128,
            c if c.is_ascii() => c as usize,
            _ => return self.chars.get(&c).copied(),
        };
        Some(self.common_chars[slot]).filter(|&id| id != u32::MAX)
    }

    /// Appends the ids of a final symbol (byte fallback or `<unk>` when it is no piece).
    fn emit(&self, sym: &str, out: &mut Vec<u32>) {
        match (self.pieces.get(sym), &self.bytes) {
            (Some(&id), _) => out.push(id),
            (None, Some(b)) => out.extend(sym.bytes().map(|x| b[x as usize])),
            (None, None) => out.push(self.unk_id),
        }
    }

    /// Appends the ids of `text` (sentencepiece `encode`, no BOS/EOS) to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        self.encode_limited_into(text, usize::MAX, out);
    }

    /// Appends the ids of `text` until more than `max_ids` of them are known; true when `text`
    /// has more than `max_ids` ids. The ids appended are the first ones of the whole encoding.
    /// Merged word by word ([`merges_by_word`](Self::merges_by_word)), it stops after the word
    /// that crosses `max_ids`; merged whole, it encodes the whole text.
    pub fn encode_limited_into(&self, text: &str, max_ids: usize, out: &mut Vec<u32>) -> bool {
        let start = out.len();
        let norm = self.normalise(text);
        let mut buf = PartBuffers::default();
        if self.split_words {
            // A word's ids depend on the word alone: the thread's word cache for this model
            // (exact: keyed by every byte of the word) and its BPE buffers.
            crate::encoder::with_word_cache(self.uid, |cache, scratch| {
                for word in words(&norm) {
                    if out.len() - start > max_ids {
                        break;
                    }
                    if word.len() > CACHE_MAX_WORD {
                        self.encode_part(word, &mut buf, scratch, out);
                    } else if cache.append(word.as_bytes(), out) {
                    } else {
                        let first = out.len();
                        self.encode_part(word, &mut buf, scratch, out);
                        cache.insert(word.as_bytes(), out.get(first..).unwrap_or_default());
                    }
                }
            });
        } else {
            // This thread's BPE buffers, reused (a fresh set per call allocated a bucket per
            // rank, every call).
            crate::encoder::with_bpe_scratch(|scratch| {
                self.encode_part(&norm, &mut buf, scratch, out);
            });
        }
        out.len() - start > max_ids
    }

    /// Appends the ids of `part` of the normalised text, merged on its own.
    fn encode_part<'t>(
        &self,
        part: &'t str,
        buf: &mut PartBuffers<'t>,
        scratch: &mut crate::bpe::BpeScratch,
        out: &mut Vec<u32>,
    ) {
        let PartBuffers { syms, ids, merged } = buf;
        syms.clear();
        self.symbols_into(part, syms);
        // Symbols that are no piece get ids past the vocabulary (no merge touches them).
        let base = self.vocab_size();
        ids.clear();
        ids.extend(syms.iter().enumerate().map(|(k, s)| {
            let mut cs = s.chars();
            match (cs.next(), cs.next()) {
                (Some(c), None) => self.char_id(c),
                _ => self.pieces.get(*s).copied(),
            }
            .unwrap_or(base + k as u32)
        }));
        merged.clear();
        merge(&self.merges, ids.iter().copied(), scratch, merged);
        // Placeholders come back unchanged and in order: map each to its symbol.
        for &id in merged.iter() {
            match id.checked_sub(base) {
                Some(k) => self.emit(syms[k as usize], out),
                None => out.push(id),
            }
        }
    }

    /// The ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(text, &mut out);
        out
    }

    /// The slow, obvious twin of [`encode`](Self::encode) for tests: sentencepiece's BPE
    /// over strings, rescanning for the adjacent pair whose concatenation is the piece of
    /// highest score (leftmost on ties); user-defined symbols never merge.
    pub fn encode_slow(&self, text: &str) -> Vec<u32> {
        let norm = self.normalise(text);
        let mut syms: Vec<(String, bool)> = self
            .symbols(&norm)
            .into_iter()
            .map(|s| {
                let frozen = self.user_defined.iter().any(|(u, _)| u == s);
                (s.to_string(), frozen)
            })
            .collect();
        loop {
            let mut best: Option<(f32, usize)> = None;
            for i in 0..syms.len().saturating_sub(1) {
                if syms[i].1 || syms[i + 1].1 {
                    continue;
                }
                let joined = format!("{}{}", syms[i].0, syms[i + 1].0);
                if let Some(&id) = self.pieces.get(&joined) {
                    let score = self.scores[id as usize];
                    if best.is_none_or(|(b, _)| score > b) {
                        best = Some((score, i));
                    }
                }
            }
            let Some((_, i)) = best else { break };
            let right = syms.remove(i + 1);
            syms[i].0.push_str(&right.0);
        }
        let mut out = Vec::new();
        for (s, _) in &syms {
            self.emit(s, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes_field(n: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn varint_field(n: u64, v: u64, out: &mut Vec<u8>) {
        varint(n << 3, out);
        varint(v, out);
    }

    /// A `.model` file of a BPE model with `<unk>`, `<s>`, `</s>`, the given normal pieces
    /// with their scores, no byte fallback, the identity normaliser and a dummy prefix.
    fn model_file(pieces: &[(&str, f32)]) -> Vec<u8> {
        let mut out = Vec::new();
        let specials = [("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL)];
        let all = specials
            .iter()
            .map(|&(t, k)| (t, 0.0, k))
            .chain(pieces.iter().map(|&(t, s)| (t, s, NORMAL)));
        for (text, score, kind) in all {
            let mut p = Vec::new();
            bytes_field(1, text.as_bytes(), &mut p);
            varint(2 << 3 | 5, &mut p);
            p.extend_from_slice(&score.to_bits().to_le_bytes());
            varint_field(3, kind, &mut p);
            bytes_field(1, &p, &mut out);
        }
        let mut t = Vec::new();
        varint_field(3, 2, &mut t);
        bytes_field(2, &t, &mut out);
        let mut n = Vec::new();
        bytes_field(1, b"identity", &mut n);
        varint_field(3, 1, &mut n);
        varint_field(4, 0, &mut n);
        bytes_field(3, &n, &mut out);
        out
    }

    proptest! {
        /// The words are the text cut before every U+2581 that follows another character,
        /// nothing lost or added.
        #[test]
        fn words_cut_before_each_white_space_run(v in prop::collection::vec(prop::sample::select(vec!['a', 'é', WS, '東']), 0..40)) {
            let norm: String = v.iter().collect();
            let got: Vec<&str> = words(&norm).collect();
            prop_assert_eq!(got.concat(), norm.clone());
            let mut want = Vec::new();
            let mut start = 0;
            for k in 1..v.len() {
                if v[k] == WS && v[k - 1] != WS {
                    want.push(v[start..k].iter().collect::<String>());
                    start = k;
                }
            }
            if !v.is_empty() {
                want.push(v[start..].iter().collect::<String>());
            }
            prop_assert_eq!(got, want);
        }

        /// Random small vocabularies, some with pieces spanning the start of a white-space
        /// run (then merged whole), some without (then word by word): the ids equal the slow
        /// twin's, which always merges the whole text.
        #[test]
        fn small_vocabularies_equal_the_slow_twin(
            extra in prop::collection::vec((prop::sample::select(vec![
                "ab", "ba", "aa", "bb", "▁a", "▁b", "▁▁", "a▁", "b▁", "▁ab", "ab▁", "a▁b", "▁▁a",
                "aab", "▁ba", "bab▁",
            ]), -50i32..0), 0..10),
            text in prop::collection::vec(prop::sample::select(vec!["a", "b", " ", "  "]), 0..30),
        ) {
            let mut pieces: Vec<(&str, f32)> = vec![("a", -100.0), ("b", -100.0), ("▁", -100.0)];
            for (t, s) in extra {
                if !pieces.iter().any(|p| p.0 == t) {
                    pieces.push((t, s as f32));
                }
            }
            let m = SpmModel::from_bytes(&model_file(&pieces)).expect("loads");
            prop_assert_eq!(m.split_words, !pieces.iter().any(|p| ws_after_other(p.0)));
            let text = text.concat();
            prop_assert_eq!(m.encode(&text), m.encode_slow(&text));
        }
    }

    /// A piece that spans the start of a white-space run (`a▁`) keeps the text whole: split
    /// into words, `a b` could not give it.
    #[test]
    fn a_piece_across_a_word_start_keeps_the_text_whole() {
        let with = SpmModel::from_bytes(&model_file(&[
            ("a", -10.0),
            ("b", -10.0),
            ("▁", -10.0),
            ("▁a", -3.0),
            ("a▁", -1.0),
        ]))
        .expect("loads");
        assert!(!with.split_words);
        // ▁a▁b: `a▁` (score -1) beats `▁a` (-3).
        assert_eq!(with.encode("a b"), [3 + 2, 3 + 4, 3 + 1]);
        assert_eq!(with.encode("a b"), with.encode_slow("a b"));
        let without = SpmModel::from_bytes(&model_file(&[
            ("a", -10.0),
            ("b", -10.0),
            ("▁", -10.0),
            ("▁a", -3.0),
        ]))
        .expect("loads");
        assert!(without.split_words);
        assert_eq!(without.encode("a b"), [3 + 3, 3 + 2, 3 + 1]);
    }
}
