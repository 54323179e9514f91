//! A specialised matcher for the `Split` regex of the Qwen2 and Llama 3 pre-tokenizers:
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,K}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! with K = 1 (Qwen2) or 3 (Llama 3) — tiktoken's cl100k pattern, with K = 1 for Qwen2.

use super::Matcher;
use crate::classes::{class_of, LETTER, NUMBER, OTHER, SPACE};

/// The exact `Split` pattern of Qwen2 / Qwen2.5 / Qwen3 / R1-Distill-Qwen (one digit per split).
pub(crate) const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The exact `Split` pattern of Llama 3 / 3.1 (up to three digits per split).
pub(crate) const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The matcher of [`QWEN2_PATTERN`] (`max_digits` 1) and [`LLAMA3_PATTERN`] (3).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Qwen2Llama3 {
    /// K of the pattern's `\p{N}{1,K}`.
    pub(crate) max_digits: usize,
}

impl Matcher for Qwen2Llama3 {
    const ASCII: &'static [u8; 128] = &crate::tables::ASCII;

    #[inline]
    fn class_of(c: char) -> u8 {
        class_of(c)
    }

    #[inline(always)]
    fn match_at(
        &self,
        n: usize,
        i: usize,
        class_at: &impl Fn(usize) -> Option<u8>,
        key_at: &impl Fn(usize) -> u8,
    ) -> usize {
        match_at(n, i, self.max_digits, class_at, key_at)
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
    use super::super::both_lanes;
    use super::*;

    fn splits(text: &str, k: usize) -> Vec<&str> {
        let m = Qwen2Llama3 { max_digits: k };
        let mut out = Vec::new();
        super::super::split(&m, text, &mut Vec::new(), |a, b| {
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
            let [a, b] = both_lanes(&Qwen2Llama3 { max_digits: k }, &t);
            proptest::prop_assert_eq!(a, b);
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
        // The non-ASCII lane: `/` and U+017F keys, a letter after punctuation.
        assert_eq!(splits("ſ/é 'ſ x", 1), ["ſ", "/é", " '", "ſ", " x"]);
    }
}
