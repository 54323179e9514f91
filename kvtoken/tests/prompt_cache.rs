//! The prompt cache is exact: `FastEncoder::encode_limited_reusing` gives what
//! `encode_limited` without any cache gives (the slow twin: the whole text encoded from its
//! start), ids and answer, for every shipped tokenizer, on conversations that grow turn by
//! turn, on texts edited at any byte after a shared start (an added token completed, cut or
//! changed across the join), and under any cap and word bound.

use crate::common;

use std::sync::OnceLock;

use common::{encoder, MODELS};
use kvtoken::{EncodeLimits, PromptCache, SegmentCache};
use proptest::prelude::*;

/// One cache shared by every case and every encoder: entries of one encoder must never be
/// served to another, and earlier cases warm it for later ones.
fn shared() -> &'static PromptCache {
    static CACHE: OnceLock<PromptCache> = OnceLock::new();
    CACHE.get_or_init(|| PromptCache::new(1 << 20))
}

/// Added tokens of the shipped tokenizers, pieces of them (a join may complete one), and
/// chat text.
const POOL: &[&str] = &[
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<think>",
    "</think>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|start|>",
    "<|message|>",
    "<|end|>",
    "<|im_",
    "start|>",
    "end|>",
    "<|",
    "|>",
    "<",
    "<|eot_",
    "id|>",
    "<|start_header",
    "\n",
    "\n\n",
    "  ",
    "user\n",
    "assistant\n",
    "system\nYou are a helpful assistant.",
    "It's 2024-07-26; we'll test 12345 numbers.",
    "e\u{301}",
    "🚀",
];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(POOL).prop_map(str::to_owned),
        2 => "[a-zA-Z ,.'\\n]{10,120}",
        1 => any::<char>().prop_map(String::from),
        1 => "\\PC{0,40}",
    ]
}

fn chunk() -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment(), 0..12).prop_map(|v| v.concat())
}

/// What a turn does to the previous text.
#[derive(Debug, Clone)]
enum Step {
    /// A chat turn in one of the shipped framings, appended.
    Turn(usize, String, String),
    /// Text appended as it is (may complete an added token begun before the join).
    Append(String),
    /// The text cut at a byte (rounded down to a char boundary), then text appended.
    Edit(usize, String),
    /// A text of its own (another conversation).
    Fresh(String),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..3, chunk(), chunk()).prop_map(|(f, u, a)| Step::Turn(f, u, a)),
        2 => chunk().prop_map(Step::Append),
        2 => (any::<usize>(), chunk()).prop_map(|(at, s)| Step::Edit(at, s)),
        1 => chunk().prop_map(Step::Fresh),
    ]
}

fn apply(text: &mut String, step: &Step) {
    match step {
        Step::Turn(0, u, a) => {
            // Qwen's framing: the generation prompt of the last turn becomes the reply's head.
            text.push_str(&format!(
                "<|im_start|>user\n{u}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>\n"
            ));
        }
        Step::Turn(1, u, a) => {
            text.push_str(&format!(
                "<|start_header_id|>user<|end_header_id|>\n\n{u}<|eot_id|>\
                 <|start_header_id|>assistant<|end_header_id|>\n\n{a}<|eot_id|>"
            ));
        }
        Step::Turn(_, u, a) => {
            text.push_str(&format!(
                "<start_of_turn>user\n{u}<end_of_turn>\n<start_of_turn>model\n{a}<end_of_turn>\n"
            ));
        }
        Step::Append(s) => text.push_str(s),
        Step::Edit(at, s) => {
            let mut cut = if text.is_empty() {
                0
            } else {
                at % (text.len() + 1)
            };
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(s);
        }
        Step::Fresh(s) => *text = s.clone(),
    }
}

/// `encode_limited_reusing` (with and without a segment cache) against the plain bounded
/// encode, for every shipped encoder; the text is encoded twice (the second time it is the
/// stored prompt itself).
fn check(
    prompts: &PromptCache,
    text: &str,
    cap: usize,
    max_word: usize,
) -> Result<(), TestCaseError> {
    let segments = SegmentCache::new(1 << 16);
    for (i, (name, _)) in MODELS.iter().enumerate() {
        let enc = encoder(i);
        let limits = EncodeLimits {
            max_ids: cap,
            max_word_bytes: max_word,
            max_fallback_bytes: usize::MAX,
        };
        let mut plain = Vec::new();
        let want = enc
            .encode_limited(text, false, &limits, &mut plain)
            .map_err(|e| e.to_string());
        for seg in [None, Some(&segments)] {
            let mut got = Vec::new();
            let answer = enc
                .encode_limited_reusing(text, &limits, seg, prompts, &mut got)
                .map_err(|e| e.to_string());
            prop_assert_eq!(&answer, &want, "{} cap={} {:?}", name, cap, text);
            if want.is_ok() {
                prop_assert_eq!(&got, &plain, "{} cap={} {:?}", name, cap, text);
            }
        }
    }
    Ok(())
}

fn cap() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(usize::MAX), 1 => 0usize..200]
}

fn word_bound() -> impl Strategy<Value = usize> {
    prop_oneof![4 => Just(usize::MAX), 1 => 4usize..40]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// A conversation re-sent turn after turn, edited and restarted on the way, through one
    /// cache shared with every other case.
    #[test]
    fn reused_ids_equal_the_whole_encoding(
        steps in proptest::collection::vec((step(), cap(), word_bound()), 1..10),
    ) {
        let mut text = String::new();
        for (s, cap, word) in &steps {
            apply(&mut text, s);
            check(shared(), &text, *cap, *word)?;
        }
    }

    /// The same through a cache too small to hold much: entries come and go.
    #[test]
    fn a_small_cache_stays_exact(
        steps in proptest::collection::vec((step(), cap()), 1..8),
    ) {
        let small = PromptCache::new(4096);
        let mut text = String::new();
        for (s, cap) in &steps {
            apply(&mut text, s);
            check(&small, &text, *cap, usize::MAX)?;
        }
        prop_assert!(small.bytes_held() <= small.capacity_bytes());
    }
}

/// A growing conversation takes over the previous turn's ids (the cache is used, not only
/// bypassed), and the ids stay those of the stock tokenizer.
#[test]
fn a_growing_conversation_reuses_the_previous_turn() {
    let enc = encoder(0);
    let prompts = PromptCache::new(1 << 20);
    let mut text = String::from("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n");
    let mut got = Vec::new();
    for turn in 0..6 {
        text.push_str(&format!(
            "<|im_start|>user\nQuestion {turn}: how do caches work?<|im_end|>\n\
             <|im_start|>assistant\n"
        ));
        let more = enc
            .encode_limited_reusing(&text, &EncodeLimits::NONE, None, &prompts, &mut got)
            .unwrap();
        assert!(!more);
        let stock = enc.stock().encode(text.as_str(), false).unwrap();
        assert_eq!(got, stock.get_ids(), "turn {turn}");
        text.push_str(&format!("Answer {turn}: they keep things.<|im_end|>\n"));
    }
    let st = prompts.stats();
    assert_eq!(st.misses, 1, "{st:?}");
    assert_eq!(st.hits, 5, "{st:?}");
    assert!(st.pieces_reused > 5, "{st:?}");
}
