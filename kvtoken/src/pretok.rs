//! A specialised matcher for the `Split` regex of the Qwen2 and Llama 3 pre-tokenizers:
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,K}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! with K = 1 (Qwen2) or 3 (Llama 3), run with Oniguruma's leftmost-first, backtracking
//! semantics and split with `Isolated` behaviour (every char belongs to exactly one match,
//! since every char starts some alternative).

use crate::classes::{class_of, LETTER, NUMBER, OTHER, SPACE};

/// The exact `Split` pattern of Qwen2 / Qwen2.5 / Qwen3 / R1-Distill-Qwen (one digit per split).
pub(crate) const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The exact `Split` pattern of Llama 3 / 3.1 (up to three digits per split).
pub(crate) const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// One char of the input: where it starts, its class and a key for the literal parts of the
/// pattern (`'`, `\r`/`\n` as `\n`, U+0020, and the case-folded letters of the contractions).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CharInfo {
    start: u32,
    class: u8,
    key: u8,
}

/// The literal key of `c` (0 if none).
#[inline]
fn key_of(c: char) -> u8 {
    match c {
        '\'' => b'\'',
        '\r' | '\n' => b'\n',
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

/// Decodes `text` into `chars` (cleared first). `text` must be shorter than 4 GiB.
pub(crate) fn scan(text: &str, chars: &mut Vec<CharInfo>) {
    chars.clear();
    chars.reserve(text.len());
    for (i, c) in text.char_indices() {
        chars.push(CharInfo {
            start: i as u32,
            class: class_of(c),
            key: key_of(c),
        });
    }
}

/// Calls `emit(start, end)` with the byte span of every split of `text`, in order, until it
/// returns `false`. `chars` must come from [`scan`] of the same `text`; `max_digits` is K of
/// the pattern.
pub(crate) fn split(
    text_len: usize,
    chars: &[CharInfo],
    max_digits: usize,
    mut emit: impl FnMut(usize, usize) -> bool,
) {
    let n = chars.len();
    let start_of = |i: usize| chars.get(i).map_or(text_len, |c| c.start as usize);
    let class_at = |i: usize| chars.get(i).map(|c| c.class);
    let key_at = |i: usize| chars.get(i).map_or(0, |c| c.key);
    let mut i = 0;
    while i < n {
        let j = match_at(n, i, max_digits, &class_at, &key_at);
        if !emit(start_of(i), start_of(j)) {
            return;
        }
        i = j;
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

/// [`split`] for an ASCII `text` (one char per byte), straight from the bytes: the same
/// matcher over the same classes and keys (`split_ascii_matches_split` checks it), without
/// decoding into [`CharInfo`]s. `text` must be ASCII (non-ASCII bytes read as class
/// [`OTHER`], which would be wrong).
pub(crate) fn split_ascii(
    text: &[u8],
    max_digits: usize,
    mut emit: impl FnMut(usize, usize) -> bool,
) {
    debug_assert!(text.is_ascii());
    let n = text.len();
    let class_at = |i: usize| {
        text.get(i).map(|&b| {
            crate::tables::ASCII
                .get(usize::from(b))
                .copied()
                .unwrap_or(OTHER)
        })
    };
    let key_at = |i: usize| {
        text.get(i)
            .and_then(|&b| ASCII_KEYS.get(usize::from(b)).copied())
            .unwrap_or(0)
    };
    let mut i = 0;
    while i < n {
        let j = match_at(n, i, max_digits, &class_at, &key_at);
        if !emit(i, j) {
            return;
        }
        i = j;
    }
}

/// The end (char index, exclusive) of the match starting at char `i` of `n`.
#[inline(always)]
fn match_at(
    n: usize,
    i: usize,
    max_digits: usize,
    class_at: &impl Fn(usize) -> Option<u8>,
    key_at: &impl Fn(usize) -> u8,
) -> usize {
    let run = |mut j: usize, cls: u8| {
        while class_at(j) == Some(cls) {
            j += 1;
        }
        j
    };
    let Some(class) = class_at(i) else {
        return n;
    };
    let key = key_at(i);
    // 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if key == b'\'' {
        match key_at(i + 1) {
            b's' | b't' | b'm' | b'd' => return i + 2,
            b'r' | b'v' if key_at(i + 2) == b'e' => return i + 3,
            b'l' if key_at(i + 2) == b'l' => return i + 3,
            _ => {}
        }
    }
    // 2. [^\r\n\p{L}\p{N}]?\p{L}+
    if class == LETTER {
        return run(i + 1, LETTER);
    }
    if class != NUMBER && key != b'\n' && class_at(i + 1) == Some(LETTER) {
        return run(i + 2, LETTER);
    }
    // 3. \p{N}{1,K}
    if class == NUMBER {
        let mut j = i + 1;
        while j < i + max_digits && class_at(j) == Some(NUMBER) {
            j += 1;
        }
        return j;
    }
    // 4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    let others_from = if class == OTHER {
        Some(i)
    } else if key == b' ' && class_at(i + 1) == Some(OTHER) {
        Some(i + 1)
    } else {
        None
    };
    if let Some(k) = others_from {
        let mut j = run(k, OTHER);
        while key_at(j) == b'\n' {
            j += 1;
        }
        return j;
    }
    // c is white space from here on.
    debug_assert_eq!(class, SPACE);
    let end = run(i, SPACE);
    // 5. \s*[\r\n]+ : ends just after the last \r or \n of the white-space run.
    if let Some(last) = (i..end).rev().find(|&k| key_at(k) == b'\n') {
        return last + 1;
    }
    // 6. \s+(?!\S) : the whole run at the end of the text, else all but its last char.
    if end == n {
        return end;
    }
    if end - i >= 2 {
        return end - 1;
    }
    // 7. \s+
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splits(text: &str, k: usize) -> Vec<&str> {
        let mut chars = Vec::new();
        scan(text, &mut chars);
        let mut out = Vec::new();
        split(text.len(), &chars, k, |a, b| {
            out.push(&text[a..b]);
            true
        });
        out
    }

    proptest::proptest! {
        /// The ASCII lane splits exactly like the general matcher.
        #[test]
        fn split_ascii_matches_split(
            t in "[ -~\t\r\n\x0b\x0c\x00-\x08]{0,80}|(('[sStTmMdD]|'[rRvV][eE]|'[lL][lL]|[a-z]+|[0-9]+| +|\n+|[!-/]+)){0,20}",
            k in 1usize..4,
        ) {
            let mut chars = Vec::new();
            scan(&t, &mut chars);
            let mut a = Vec::new();
            split(t.len(), &chars, k, |x, y| { a.push((x, y)); true });
            let mut b = Vec::new();
            split_ascii(t.as_bytes(), k, |x, y| { b.push((x, y)); true });
            proptest::prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn ascii_keys_match_key_of() {
        for b in 0u8..128 {
            assert_eq!(ASCII_KEYS[usize::from(b)], key_of(char::from(b)), "{b}");
        }
    }

    #[test]
    fn known_splits() {
        assert_eq!(
            splits("Hello world's  end\n\n  x 12345!!\n", 3),
            ["Hello", " world", "'s", " ", " end", "\n\n", " ", " x", " ", "123", "45", "!!\n"]
        );
        assert_eq!(splits("a1234", 1), ["a", "1", "2", "3", "4"]);
        assert_eq!(splits("x  ", 1), ["x", "  "]);
        assert_eq!(splits("'LL'Re'sa", 1), ["'LL", "'Re", "'s", "a"]);
    }
}
