//! gpt-oss's o200k tokenizer on the fast path ([`Flavor::O200k`]): its pre-tokenizer splits
//! exactly as Oniguruma (run by `tokenizers`) does for every Unicode scalar value in several
//! contexts, and the ids equal the stock tokenizer's on generated text that takes every
//! branch of the regex (case runs, contractions, CJK, combining marks, digits, punctuation
//! with trailing `\r`, `\n`, `/`, white space, emoji). The bench corpora and long runs are
//! checked on gpt-oss with every other shipped tokenizer in `differential.rs`.

use crate::common;

use common::{assert_same, check_spans, encoder, index_of, pool, text_of};
use kvtoken::{EncodeLimits, EncoderPath, Error, Flavor};
use proptest::prelude::*;

fn gptoss() -> usize {
    index_of("openai__gpt-oss-20b")
}

fn check_gptoss_spans(text: &str) -> Result<(), String> {
    check_spans(gptoss(), text)
}

#[test]
fn gptoss_takes_the_o200k_fast_path() {
    let enc = encoder(gptoss());
    assert_eq!(enc.path(), &EncoderPath::Fast(Flavor::O200k));
}

/// Every scalar next to each class the pattern names: a lower-case and an upper-case letter,
/// a digit, a space, itself, CJK, a combining mark, an apostrophe contraction, `/`, `\r\n`.
#[test]
fn splits_match_oniguruma_for_every_scalar() {
    let mut text = String::new();
    let flush = |text: &mut String| {
        if let Err(e) = check_gptoss_spans(text) {
            panic!("{e}");
        }
        text.clear();
    };
    for c in (0u32..=0x10FFFF).filter_map(char::from_u32) {
        for ctx in ["a", "A", "1", " ", "", "中", "\u{301}", "'s", "/", "\r\n"] {
            text.push(c);
            text.push_str(ctx);
        }
        text.push(c);
        text.push('\n');
        if text.len() > 200_000 {
            flush(&mut text);
        }
    }
    flush(&mut text);
}

/// Fragments that take every branch of the o200k regex.
/// Fragments of this file's own: case runs, marks, `\r\n/` after punctuation and
/// harmony's added tokens (see [`common::SHARED_POOL`] for the rest).
const POOL: &[&str] = &[
    "'T",
    "'VE",
    "'M",
    "’S",
    "DON'T",
    "we'll",
    "You'Re",
    "it’s",
    "camelCase",
    "HTTPServer",
    "XMLHttpRequest",
    "ALLCAPS",
    "Title",
    "iPhone",
    "McDonald",
    "ǅungla",
    "ǈ",
    "Ǆ",
    "ǆ",
    "ᾈ",
    "ß",
    "ẞ",
    "ª",
    "ˆ",
    "ʰ",
    "ー",
    "々",
    "E\u{301}",
    "\u{301}\u{302}",
    "a\u{308}b",
    "A\u{20DD}",
    "\u{0903}",
    "\u{1AB0}",
    "\u{20DD}",
    "!",
    "/",
    "//\n",
    "!/",
    "!\r\n",
    "!\n/\r",
    ".\n\n",
    "?/\r\n/",
    "<|start|>",
    "<|message|>",
    "<|end|>",
    "<|channel|>",
    "<|return|>",
    "<|call|>",
    "<|constrain|>",
    "<|start",
];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(pool(POOL)).prop_map(str::to_owned),
        2 => "[a-z]{1,8}",
        2 => "[A-Z]{1,8}",
        2 => "[A-Z][a-z]{1,8}",
        1 => "[a-z]{1,4}[A-Z][a-z]{1,4}",
        1 => any::<char>().prop_map(String::from),
        1 => "\\PC{0,6}",
        1 => "[ \\t\\r\\n\\u{a0}\\u{3000}]{1,12}",
        1 => "[0-9]{1,9}",
        1 => "[!-/:-@\\[-`{-~]{1,4}[\\r\\n/]{0,4}",
        1 => "[\\u{300}-\\u{36f}\\u{4e00}-\\u{4e30}\\u{3041}-\\u{3060}A-Za-z'’]{1,8}",
        1 => "[\\u{1f300}-\\u{1f6ff}\\u{200d}\\u{fe0f}]{1,4}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    text_of(fragment())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The fast ids are the stock tokenizer's (with and without special tokens).
    #[test]
    fn ids_match_stock(t in text()) {
        assert_same(gptoss(), &t).map_err(TestCaseError::fail)?;
    }

    /// The fast splits are the stock pre-tokenizer's.
    #[test]
    fn splits_match_stock(t in text()) {
        check_gptoss_spans(&t).map_err(TestCaseError::fail)?;
    }
}

/// Hand-picked corners: the case backtracking (`U*W+` backing off inside a run of letters
/// that are both), contractions after upper-case runs, punctuation runs taking `\r\n/`.
#[test]
fn corners_match_stock() {
    let texts = [
        "中文字 ABC",
        "ABCdef ABC'S abc'S ÀÉÎôû",
        "HELLO'll HELLO'LL Hello'Re",
        "ǅǅǅa ǅA Aǅ aǅ ǈǈ",
        "ʰʰA Aʰʰa ʰ'S",
        "e\u{301}\u{301}A \u{301}A\u{301}a \u{301}\u{301}",
        "!\u{301}a !\u{301} !A\u{301}",
        "x!!/\r\n/\n/y  //\n\n  ",
        "  \n\t \r\n  x\u{3000}\u{3000}y  ",
        "12345678 ١٢٣٤ 1a2b",
        "你好，世界。今天天气很好！",
        "👨\u{200d}👩\u{200d}👧 A👍🏽b",
    ];
    for t in texts {
        assert_same(gptoss(), t).unwrap_or_else(|e| panic!("{e}"));
        check_gptoss_spans(t).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Adversarial inputs stay bounded: a pre-token over the byte bound is refused before it is
/// encoded. (Long runs and long words give the stock ids on every shipped tokenizer, gpt-oss
/// included: `differential.rs`.)
#[test]
fn long_words_over_the_bound_are_refused() {
    let enc = encoder(gptoss());
    let limits = EncodeLimits {
        max_word_bytes: 1000,
        ..EncodeLimits::NONE
    };
    let mut out = Vec::new();
    let cjk: String = (0..3000u32)
        .map(|k| char::from_u32(0x4E00 + (k * 7919) % 0x5000).unwrap_or('中'))
        .collect();
    for long in ["a".repeat(5000), "A".repeat(5000), cjk, "!".repeat(4000)] {
        let r = enc.encode_limited(&long, false, &limits, &mut out);
        assert!(matches!(r, Err(Error::WordTooLong { .. })), "{r:?}");
    }
}
