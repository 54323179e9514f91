//! The pre-tokenizers of the byte-level flavours: each `Split` regex run as a hand-written
//! [`Matcher`] with Oniguruma's leftmost-first, backtracking semantics, split with
//! `Isolated` behaviour (every char starts some alternative, so every char belongs to
//! exactly one split).
//!
//! * [`qwen2_llama3`]: the pattern of Qwen2 / Qwen2.5 / Qwen3 / R1-Distill-Qwen and Llama 3;
//! * [`o200k`]: gpt-oss's o200k pattern;
//! * [`tekken`]: the pattern of Mistral's tekken files (run by fancy-regex in tiktoken, with
//!   the same semantics), o200k's matcher without contractions.
//!
//! This module holds what the matchers share: the chars of the input, each with its class
//! and its literal key ([`CharInfo`]), and the two lanes that drive a matcher over a text —
//! decoded chars, or straight from the bytes of ASCII text (no decoding; the same matcher
//! over the same classes and keys, which each matcher's tests check).

pub(crate) mod o200k;
pub(crate) mod qwen2_llama3;
pub(crate) mod tekken;

/// A pre-tokenizer regex as a matcher over classified chars.
pub(crate) trait Matcher {
    /// The class of each ASCII char (for [`split_ascii`]); [`Matcher::class_of`] of it.
    const ASCII: &'static [u8; 128];

    /// The class of `c` as the matcher reads it (class number or class bits; 0 for a char
    /// beyond the text in the ASCII lane).
    fn class_of(c: char) -> u8;

    /// The end (char index, exclusive) of the match starting at char `i` of `n` (`i < n`),
    /// reading the chars through `class_at` (`None` past the end) and `key_at` (0 past the
    /// end).
    fn match_at(
        &self,
        n: usize,
        i: usize,
        class_at: &impl Fn(usize) -> Option<u8>,
        key_at: &impl Fn(usize) -> u8,
    ) -> usize;
}

/// One char of the input: where it starts, its class and its literal key ([`key_of`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CharInfo {
    start: u32,
    class: u8,
    key: u8,
}

/// The literal key of `c` for the literal parts of the patterns (`'`, `\r`/`\n` as `\n`,
/// `/`, U+0020, the case-folded letters of the contractions), 0 if none. A matcher compares
/// keys only with the literals of its own pattern (`/` is o200k's alone).
#[inline]
fn key_of(c: char) -> u8 {
    match c {
        '\'' => b'\'',
        '\r' | '\n' => b'\n',
        '/' => b'/',
        ' ' => b' ',
        // Oniguruma's (?i) simple case folding onto the contraction letters; U+017F LATIN
        // SMALL LETTER LONG S folds to `s`. (Kelvin sign folds to `k`, not used here.)
        's' | 'S' | '\u{17F}' => b's',
        't' | 'T' => b't',
        'r' | 'R' => b'r',
        'e' | 'E' => b'e',
        'v' | 'V' => b'v',
        'm' | 'M' => b'm',
        'l' | 'L' => b'l',
        'd' | 'D' => b'd',
        _ => 0,
    }
}

/// The literal key of each ASCII byte, as [`key_of`].
static ASCII_KEYS: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = match b as u8 {
            b'\'' => b'\'',
            b'\r' | b'\n' => b'\n',
            b'/' => b'/',
            b' ' => b' ',
            b's' | b'S' => b's',
            b't' | b'T' => b't',
            b'r' | b'R' => b'r',
            b'e' | b'E' => b'e',
            b'v' | b'V' => b'v',
            b'm' | b'M' => b'm',
            b'l' | b'L' => b'l',
            b'd' | b'D' => b'd',
            _ => 0,
        };
        b += 1;
    }
    t
};

/// Calls `emit(start, end)` with the byte span of every split of `text` by `m`, in order,
/// until it returns `false`; `chars` is scratch. ASCII text goes through [`split_ascii`],
/// other text through [`scan`] and [`split_chars`]. `text` must be shorter than 4 GiB.
#[inline]
pub(crate) fn split<M: Matcher>(
    m: &M,
    text: &str,
    chars: &mut Vec<CharInfo>,
    emit: impl FnMut(usize, usize) -> bool,
) {
    if text.is_ascii() {
        split_ascii(m, text.as_bytes(), emit);
    } else {
        scan::<M>(text, chars);
        split_chars(m, text.len(), chars, emit);
    }
}

/// Decodes `text` into `chars` (cleared first) with `M`'s classes. `text` must be shorter
/// than 4 GiB.
pub(crate) fn scan<M: Matcher>(text: &str, chars: &mut Vec<CharInfo>) {
    chars.clear();
    chars.reserve(text.len());
    for (i, c) in text.char_indices() {
        chars.push(CharInfo {
            start: i as u32,
            class: M::class_of(c),
            key: key_of(c),
        });
    }
}

/// [`split`] over `chars`, which must come from [`scan`] of the same text with the same
/// matcher.
pub(crate) fn split_chars<M: Matcher>(
    m: &M,
    text_len: usize,
    chars: &[CharInfo],
    mut emit: impl FnMut(usize, usize) -> bool,
) {
    let n = chars.len();
    let start_of = |i: usize| chars.get(i).map_or(text_len, |c| c.start as usize);
    let class_at = |i: usize| chars.get(i).map(|c| c.class);
    let key_at = |i: usize| chars.get(i).map_or(0, |c| c.key);
    let mut i = 0;
    while i < n {
        let j = m.match_at(n, i, &class_at, &key_at);
        if !emit(start_of(i), start_of(j)) {
            return;
        }
        i = j;
    }
}

/// [`split`] of an ASCII `text` (one char per byte), straight from the bytes: the same
/// matcher over the same classes and keys, without decoding into [`CharInfo`]s. `text` must
/// be ASCII (a non-ASCII byte would read as class 0, which would be wrong).
pub(crate) fn split_ascii<M: Matcher>(
    m: &M,
    text: &[u8],
    mut emit: impl FnMut(usize, usize) -> bool,
) {
    debug_assert!(text.is_ascii());
    let n = text.len();
    let class_at = |i: usize| {
        text.get(i)
            .map(|&b| M::ASCII.get(usize::from(b)).copied().unwrap_or(0))
    };
    let key_at = |i: usize| {
        text.get(i)
            .and_then(|&b| ASCII_KEYS.get(usize::from(b)).copied())
            .unwrap_or(0)
    };
    let mut i = 0;
    while i < n {
        let j = m.match_at(n, i, &class_at, &key_at);
        if !emit(i, j) {
            return;
        }
        i = j;
    }
}

/// The splits of an ASCII `text` by `m` through both lanes — decoded chars ([`scan`],
/// [`split_chars`]) and straight from the bytes ([`split_ascii`]) — which each matcher's tests
/// check are equal.
#[cfg(test)]
pub(crate) fn both_lanes<M: Matcher>(m: &M, text: &str) -> [Vec<(usize, usize)>; 2] {
    let mut chars = Vec::new();
    scan::<M>(text, &mut chars);
    let mut a = Vec::new();
    split_chars(m, text.len(), &chars, |x, y| {
        a.push((x, y));
        true
    });
    let mut b = Vec::new();
    split_ascii(m, text.as_bytes(), |x, y| {
        b.push((x, y));
        true
    });
    [a, b]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_keys_match_key_of() {
        for b in 0u8..128 {
            assert_eq!(ASCII_KEYS[usize::from(b)], key_of(char::from(b)), "{b}");
        }
    }

    /// Both matchers' ASCII class tables are their `class_of`.
    #[test]
    fn ascii_classes_match_class_of() {
        for b in 0u8..128 {
            let c = char::from(b);
            assert_eq!(
                qwen2_llama3::Qwen2Llama3::ASCII[usize::from(b)],
                qwen2_llama3::Qwen2Llama3::class_of(c)
            );
            assert_eq!(
                o200k::O200k::ASCII[usize::from(b)],
                o200k::O200k::class_of(c)
            );
        }
    }
}
