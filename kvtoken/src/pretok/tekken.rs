//! A specialised matcher for the pre-tokenizer pattern of Mistral's tekken files
//! (`config.pattern` of `tekken.json`, run by tiktoken with `fancy-regex`):
//!
//! ```text
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
//! |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
//! |\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! (one line in the file). It is o200k's pattern ([`super::o200k`]) without the contractions
//! and with one digit per number, and fancy-regex runs it with the same leftmost-first,
//! backtracking semantics Oniguruma gives o200k's, over the same classes: the matcher is
//! o200k's `match_at::<false, 1>` over o200k's class tables. The unit tests check the classes
//! against fancy-regex for every scalar value, and the splits against fancy-regex running the
//! pattern (every scalar in several contexts, and generated text).
//!
//! One thing fancy-regex does that the matcher does not: it fails. Its VM runs `\s+(?!\S)`
//! itself (the other alternatives go to the `regex` crate, which never fails), pushing one
//! backtrack entry per white-space char onto a stack of at most a million entries, so a run
//! of about a million white-space chars without a newline makes tiktoken's `find_iter` return
//! an error (mistral_common then raises). A text with a white-space run of
//! [`MAX_SPACE_RUN`] chars or more is therefore left to fancy-regex itself
//! ([`has_long_space_run`]); the matcher splits only texts where fancy-regex cannot fail.

use super::o200k::{self, S};
use super::Matcher;
use crate::tables_o200k::ASCII;

/// The exact pre-tokenizer pattern of Mistral's tekken files (the v3 `tekken.json` of Mistral
/// Nemo in `testdata/models`), as the file's `config.pattern` holds it; a file with any other
/// pattern is split by fancy-regex.
pub(crate) const TEKKEN_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The longest white-space run (in chars) of a text the matcher splits: far below the run
/// that overflows fancy-regex's backtracking stack (999,999 chars for fancy-regex 0.20.2, a
/// stack of 1,000,000 entries), so that on every text the matcher splits fancy-regex succeeds.
pub(crate) const MAX_SPACE_RUN: usize = 1 << 16;

/// The matcher of [`TEKKEN_PATTERN`]; its classes are o200k's bit sets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tekken;

impl Matcher for Tekken {
    const ASCII: &'static [u8; 128] = &ASCII;

    #[inline]
    fn class_of(c: char) -> u8 {
        o200k::bits_of(c)
    }

    #[inline(always)]
    fn match_at(
        &self,
        n: usize,
        i: usize,
        class_at: &impl Fn(usize) -> Option<u8>,
        key_at: &impl Fn(usize) -> u8,
    ) -> usize {
        o200k::match_at::<false, 1>(n, i, class_at, key_at)
    }
}

/// Whether `text` has a run of at least [`MAX_SPACE_RUN`] white-space (`\s`) chars, or is
/// too long for the matcher's char positions (4 GiB): then it is split by fancy-regex.
pub(crate) fn has_long_space_run(text: &str) -> bool {
    if text.len() < MAX_SPACE_RUN {
        return false;
    }
    if text.len() >= u32::MAX as usize {
        return true;
    }
    let mut run = 0usize;
    for c in text.chars() {
        if o200k::bits_of(c) & S != 0 {
            run += 1;
            if run >= MAX_SPACE_RUN {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{both_lanes, split};
    use super::*;

    fn regex() -> &'static fancy_regex::Regex {
        static RE: std::sync::OnceLock<fancy_regex::Regex> = std::sync::OnceLock::new();
        RE.get_or_init(|| match fancy_regex::Regex::new(TEKKEN_PATTERN) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        })
    }

    fn splits(text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        split(&Tekken, text, &mut Vec::new(), |a, b| {
            out.push((a, b));
            true
        });
        out
    }

    /// The slow twin: fancy-regex running the pattern, as tiktoken does (every char starts a
    /// match, so the matches are the splits).
    fn regex_splits(text: &str) -> Vec<(usize, usize)> {
        regex()
            .find_iter(text)
            .map(|m| match m {
                Ok(m) => (m.start(), m.end()),
                Err(e) => panic!("{e}"),
            })
            .collect()
    }

    /// o200k's class bits are fancy-regex's for every scalar value.
    #[test]
    fn classes_match_fancy_regex_for_every_scalar() {
        o200k::check_classes_for_every_scalar(|pattern, text| {
            let re = match fancy_regex::Regex::new(pattern) {
                Ok(r) => r,
                Err(e) => panic!("{pattern}: {e}"),
            };
            re.find_iter(text)
                .map(|m| match m {
                    Ok(m) => (m.start(), m.end()),
                    Err(e) => panic!("{pattern}: {e}"),
                })
                .collect()
        });
    }

    /// Every scalar value next to each class and to itself, split as fancy-regex splits it.
    #[test]
    fn splits_match_fancy_regex_for_every_scalar() {
        let mut text = String::new();
        for c in (0u32..=0x10FFFF).filter_map(char::from_u32) {
            // c "a" c "1" c " " c c "\n" c "'s" "A" c c " " "!" c
            for x in [
                c, 'a', c, '1', c, ' ', c, c, '\n', c, '\'', 's', 'A', c, c, ' ', '!', c,
            ] {
                text.push(x);
            }
        }
        let want = regex_splits(&text);
        let got = splits(&text);
        if want != got {
            let at = want.iter().zip(&got).position(|(a, b)| a != b).unwrap_or(0);
            let (a, b) = want[at.min(want.len() - 1)];
            panic!(
                "splits differ at {at}: fancy-regex {:?}, matcher {:?}",
                &text[a..b],
                got.get(at).map(|&(x, y)| &text[x..y])
            );
        }
    }

    #[test]
    fn known_splits() {
        let t = "Hello world's  end\n\n  x 12345!!\n/ HTTPServer camelCase I'M 中文字 ABC";
        let got: Vec<&str> = splits(t).iter().map(|&(a, b)| &t[a..b]).collect();
        assert_eq!(
            got,
            [
                "Hello",
                " world",
                "'s",
                " ",
                " end",
                "\n\n",
                " ",
                " x",
                " ",
                "1",
                "2",
                "3",
                "4",
                "5",
                "!!\n/",
                " HTTPServer",
                " camel",
                "Case",
                " I",
                "'M",
                " 中文字",
                " ABC"
            ]
        );
        assert_eq!(splits(t), regex_splits(t));
    }

    /// The texts left to fancy-regex: a white-space run of [`MAX_SPACE_RUN`] chars or more
    /// (of any white-space chars, ASCII or not); shorter runs are split by the matcher, and
    /// there fancy-regex does not fail.
    #[test]
    fn long_space_runs_are_left_to_fancy_regex() {
        let below = " \u{3000}".repeat(MAX_SPACE_RUN / 2 - 1) + "x";
        assert!(!has_long_space_run(&below));
        assert_eq!(splits(&below), regex_splits(&below));
        let at = " \u{3000}".repeat(MAX_SPACE_RUN / 2) + "x";
        assert!(has_long_space_run(&at));
        let broken = format!("{}x{}", " ".repeat(MAX_SPACE_RUN - 1), "\t".repeat(100));
        assert!(!has_long_space_run(&broken));
        // Where fancy-regex fails: the run the matcher never sees.
        let huge = " ".repeat(1 << 20);
        assert!(has_long_space_run(&huge));
        assert!(regex().find_iter(&huge).any(|m| m.is_err()));
    }

    proptest::proptest! {
        /// The ASCII lane splits exactly like the general lane.
        #[test]
        fn ascii_lane_matches_the_general_lane(
            t in "[ -~\t\r\n\x0b\x0c\x00-\x08]{0,80}|(('[sStTmMdD]|[a-z]+|[A-Z]+|[0-9]+| +|\n+|[!-/]+)){0,20}",
        ) {
            let [a, b] = both_lanes(&Tekken, &t);
            proptest::prop_assert_eq!(a, b);
        }

        /// The matcher splits as fancy-regex runs the pattern, on text mixing every class.
        #[test]
        fn splits_match_fancy_regex(
            t in r"([a-zA-Z]{1,6}|[ \t\r\n\u{a0}\u{3000}]{1,4}|[0-9٠-٩]{1,5}|[!-/]{1,3}|'[sStTdDmM]|'[lL][lL]|[\u{300}-\u{36f}]|[ǅǈʰー々]|[\u{4e00}-\u{4e10}]{1,3}|\PC){0,24}",
        ) {
            proptest::prop_assert_eq!(splits(&t), regex_splits(&t), "{:?}", t);
        }
    }
}
