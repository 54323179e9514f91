//! A specialised matcher for the `Split` regex of the o200k pre-tokenizer (gpt-oss):
//!
//! ```text
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! (one line in `tokenizer.json`), run with Oniguruma's leftmost-first, backtracking
//! semantics and split with `Isolated` behaviour. Call `P = [^\r\n\p{L}\p{N}]`,
//! `U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, `W = [\p{Ll}\p{Lm}\p{Lo}\p{M}]`; `\p{Lm}`, `\p{Lo}`
//! and the marks are in both `U` and `W`, and the marks are also in `P` and in
//! `[^\s\p{L}\p{N}]`. At a start `s` (after the optional `P`), `U*W+` takes the longest
//! `U`-run, then backs off one char at a time until a `W` char follows (a run of CJK backs
//! off one char and the `W+` takes it back); the `W` run then extends greedily. The
//! optional `P` is tried taken first, then not. Every char starts some alternative, so
//! every char belongs to exactly one split.
//!
//! The classes come from tables generated from Oniguruma (`tables_o200k.rs`, checked for
//! every scalar by `classes_match_oniguruma_for_every_scalar`); the splits are checked
//! against `tokenizers`' own pre-tokenizer for every scalar in several contexts
//! (`tests/o200k.rs`) and on generated text. The chars and the two lanes that drive the
//! matcher are [`super`]'s, shared with the Qwen2 / Llama 3 matcher. Mistral's tekken pattern
//! is this one without the contractions and with `\p{N}` for `\p{N}{1,3}`: its matcher
//! ([`super::tekken`]) is [`match_at`] with those two parameters and these classes.

use super::Matcher;
use crate::tables_o200k::{ASCII, RANGES};

/// `\p{L}`.
const L: u8 = 1;
/// `\p{N}`.
const N: u8 = 2;
/// `\s`.
pub(super) const S: u8 = 4;
/// `U` (see the module documentation).
const U: u8 = 8;
/// `W` (see the module documentation).
const W: u8 = 16;

/// The exact `Split` pattern of the o200k pre-tokenizer (gpt-oss).
pub(crate) const O200K_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The class bits of `c` as Oniguruma sees it (and fancy-regex: `super::tekken` checks it).
#[inline]
pub(super) fn bits_of(c: char) -> u8 {
    let cp = c as u32;
    if cp < 0x80 {
        return ASCII.get(cp as usize).copied().unwrap_or(0);
    }
    let i = RANGES.partition_point(|&(_, last, _)| last < cp);
    match RANGES.get(i) {
        Some(&(first, _, bits)) if first <= cp => bits,
        _ => 0,
    }
}

/// The matcher of [`O200K_PATTERN`]; its classes are bit sets ([`bits_of`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct O200k;

impl Matcher for O200k {
    const ASCII: &'static [u8; 128] = &ASCII;

    #[inline]
    fn class_of(c: char) -> u8 {
        bits_of(c)
    }

    #[inline(always)]
    fn match_at(
        &self,
        n: usize,
        i: usize,
        class_at: &impl Fn(usize) -> Option<u8>,
        key_at: &impl Fn(usize) -> u8,
    ) -> usize {
        match_at::<true, 3>(n, i, class_at, key_at)
    }
}

/// The end (char index, exclusive) of the match starting at char `i` of `n` (`i < n`) of
/// the o200k-shaped pattern: `CONTRACTIONS`, whether the two word alternatives end with
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?`; `MAX_DIGITS`, the `k` of `\p{N}{1,k}` (1 for a bare
/// `\p{N}`).
#[inline(always)]
pub(super) fn match_at<const CONTRACTIONS: bool, const MAX_DIGITS: usize>(
    n: usize,
    i: usize,
    bits_at: &impl Fn(usize) -> Option<u8>,
    key_at: &impl Fn(usize) -> u8,
) -> usize {
    let Some(bits) = bits_at(i) else {
        return n;
    };
    let has = |j: usize, m: u8| bits_at(j).is_some_and(|b| b & m != 0);
    let run = |mut j: usize, m: u8| {
        while has(j, m) {
            j += 1;
        }
        j
    };
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)? at `e`.
    let contraction = |e: usize| {
        if CONTRACTIONS && key_at(e) == b'\'' {
            match key_at(e + 1) {
                b's' | b't' | b'm' | b'd' => return e + 2,
                b'r' | b'v' if key_at(e + 2) == b'e' => return e + 3,
                b'l' if key_at(e + 2) == b'l' => return e + 3,
                _ => {}
            }
        }
        e
    };
    let key = key_at(i);
    // [^\r\n\p{L}\p{N}]? : taken first when it can be, then not.
    let in_p = bits & (L | N) == 0 && key != b'\n';
    let starts: &[usize] = if in_p { &[i + 1, i] } else { &[i] };
    // 1. P? U* W+ C?
    for &s in starts {
        let u_end = run(s, U);
        // The longest U-run, then one char fewer at a time until a W char follows.
        let mut t = u_end;
        loop {
            if has(t, W) {
                return contraction(run(t, W));
            }
            if t == s {
                break;
            }
            t -= 1;
        }
    }
    // 2. P? U+ W* C?
    for &s in starts {
        if has(s, U) {
            return contraction(run(run(s, U), W));
        }
    }
    // 3. \p{N}{1,MAX_DIGITS}
    if bits & N != 0 {
        let mut j = i + 1;
        while j < i + MAX_DIGITS && has(j, N) {
            j += 1;
        }
        return j;
    }
    // 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    let other = |j: usize| bits_at(j).is_some_and(|b| b & (L | N | S) == 0);
    let others_from = if other(i) {
        Some(i)
    } else if key == b' ' && other(i + 1) {
        Some(i + 1)
    } else {
        None
    };
    if let Some(k) = others_from {
        let mut j = k;
        while other(j) {
            j += 1;
        }
        while matches!(key_at(j), b'\n' | b'/') {
            j += 1;
        }
        return j;
    }
    // The char is white space from here on (every other char started an alternative above).
    debug_assert!(bits & S != 0);
    let end = run(i, S);
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

/// Checks the class bits of every scalar value against a regex engine: each category pattern
/// (`\p{L}+`, …) matches exactly the scalars the table gives its bit, `find(pattern, text)`
/// giving the byte spans of the pattern's matches in `text` (one search over all scalars per
/// pattern). o200k's engine is Oniguruma; tekken's, fancy-regex (`super::tekken`).
#[cfg(test)]
pub(super) fn check_classes_for_every_scalar(find: impl Fn(&str, &str) -> Vec<(usize, usize)>) {
    let mut all = String::new();
    let mut starts = Vec::new();
    for c in (0u32..=0x10FFFF).filter_map(char::from_u32) {
        starts.push((all.len(), c));
        all.push(c);
    }
    let cases = [
        (r"\p{L}+", L),
        (r"\p{N}+", N),
        (r"\s+", S),
        (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+", U),
        (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]+", W),
    ];
    for (pattern, bit) in cases {
        let mut want = vec![false; starts.len()];
        for (s, e) in find(pattern, &all) {
            let first = starts.partition_point(|&(b, _)| b < s);
            let last = starts.partition_point(|&(b, _)| b < e);
            for w in &mut want[first..last] {
                *w = true;
            }
        }
        for (&(_, c), &w) in starts.iter().zip(&want) {
            assert_eq!(bits_of(c) & bit != 0, w, "{pattern} U+{:04X}", c as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::both_lanes;
    use super::*;
    use tokenizers::utils::SysRegex;

    fn splits(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        super::super::split(&O200k, text, &mut Vec::new(), |a, b| {
            out.push(&text[a..b]);
            true
        });
        out
    }

    /// The class bits of every scalar value are Oniguruma's.
    #[test]
    fn classes_match_oniguruma_for_every_scalar() {
        check_classes_for_every_scalar(|pattern, text| match SysRegex::new(pattern) {
            Ok(re) => re.find_iter(text).collect(),
            Err(e) => panic!("{pattern}: {e}"),
        });
    }

    proptest::proptest! {
        /// The ASCII lane splits exactly like the general lane.
        #[test]
        fn ascii_lane_matches_the_general_lane(
            t in "[ -~\t\r\n\x0b\x0c\x00-\x08]{0,80}|(('[sStTmMdD]|'[rRvV][eE]|'[lL][lL]|[a-z]+|[A-Z]+|[0-9]+| +|\n+|[!-/]+)){0,20}",
        ) {
            let [a, b] = both_lanes(&O200k, &t);
            proptest::prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn known_splits() {
        assert_eq!(
            splits("Hello world's  end\n\n  x 12345!!\n/ HTTPServer camelCase I'M"),
            [
                "Hello",
                " world's",
                " ",
                " end",
                "\n\n",
                " ",
                " x",
                " ",
                "123",
                "45",
                "!!\n/",
                " HTTPServer",
                " camel",
                "Case",
                " I'M"
            ]
        );
        // A run of CJK: U* takes it all, backs off one char, W+ takes it back.
        assert_eq!(splits("中文字 ABC"), ["中文字", " ABC"]);
        // A contraction only follows a word; ` '` is punctuation after a space.
        assert_eq!(splits("'s 's"), ["'s", " '", "s"]);
        for t in [
            "Hello world's  end\n\n  x 12345!!\n/ HTTPServer camelCase I'M",
            "中文字 ABC",
            "'s 's",
        ] {
            assert_eq!(splits(t), regex_splits(t), "{t:?}");
        }
    }

    /// The slow twin: Oniguruma itself running the pattern (every char starts a match, so
    /// the matches are the `Isolated` splits).
    fn regex_splits(text: &str) -> Vec<&str> {
        static RE: std::sync::OnceLock<SysRegex> = std::sync::OnceLock::new();
        let re = RE.get_or_init(|| match SysRegex::new(O200K_PATTERN) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        });
        re.find_iter(text).map(|(a, b)| &text[a..b]).collect()
    }

    proptest::proptest! {
        /// The matcher splits as Oniguruma runs the pattern, on text mixing every class.
        #[test]
        fn splits_match_the_regex(
            t in r"([a-zA-Z]{1,6}|[ \t\r\n]{1,4}|[0-9]{1,5}|[!-/]{1,3}|'[sStTdDmM]|'[lL][lL]|'[rRvV][eE]|[\u{300}-\u{36f}]|[ǅǈʰー々]|[\u{4e00}-\u{4e10}]{1,3}|\PC){0,24}",
        ) {
            proptest::prop_assert_eq!(splits(&t), regex_splits(&t), "{:?}", t);
        }
    }
}
