//! The segment cache is exact: ids through a [`SegmentCache`] equal ids without it (and
//! `tokenizers`' own ids) for every shipped tokenizer, on arbitrary prompts, cold or warm.

use crate::common;

use std::sync::OnceLock;

use common::{encoder, MODELS};
use kvtoken::SegmentCache;
use proptest::prelude::*;

/// One cache shared by every case and every encoder: entries of one encoder must never be
/// served to another, and earlier cases warm it for later ones.
fn shared() -> &'static SegmentCache {
    static CACHE: OnceLock<SegmentCache> = OnceLock::new();
    CACHE.get_or_init(|| SegmentCache::new(1 << 20))
}

/// Special tokens of the shipped tokenizers, their look-alikes, and NFC-relevant text.
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
    "<｜end▁of▁sentence｜>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<|im_start",
    "im_end|>",
    "<|im_start|",
    "<<|im_end|>>",
    "<|eot_id|",
    "< |im_end|>",
    "<|IM_END|>",
    "<think >",
    "e\u{301}",
    "\u{e9}",
    "A\u{30a}",
    "\u{212b}",
    "\u{1100}\u{1161}\u{11a8}",
    "\u{ac01}",
    "\u{fb05}",
    "\u{17f}",
    "\u{3000}",
    "\u{a0}",
    "\r\n",
    "\n\n",
    "    ",
    "user\n",
    "assistant\n",
    "system\nYou are a helpful assistant.",
    "It's 2024-07-26; we'll test 12345 numbers.",
    "🚀",
];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(POOL).prop_map(str::to_owned),
        2 => "[a-zA-Z ,.'\\n]{10,120}",
        1 => any::<char>().prop_map(String::from),
        1 => "\\PC{0,40}",
        1 => "[\\u{300}-\\u{36f}\\u{1100}-\\u{11ff}\\u{ac00}-\\u{ac20}a-e ]{1,80}",
    ]
}

fn prompt() -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment(), 0..30).prop_map(|v| v.concat())
}

fn check(t: &str) -> Result<(), TestCaseError> {
    let cache = shared();
    let mut cached = Vec::new();
    for (i, (name, _)) in MODELS.iter().enumerate() {
        let enc = encoder(i);
        for add in [false, true] {
            let plain = enc
                .encode(t, add)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            // Twice: the first call may fill the cache, the second then reads it.
            for _ in 0..2 {
                enc.encode_into_cached(t, add, cache, &mut cached)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&plain, &cached, "{} add={} {:?}", name, add, t);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn cached_ids_equal_uncached_ids(t in prompt()) {
        check(&t)?;
    }

    #[test]
    fn cached_ids_equal_uncached_on_arbitrary_strings(t in any::<String>()) {
        check(&t)?;
    }

    /// Multi-turn shape: a conversation re-sent with one more turn each time.
    #[test]
    fn growing_conversations_stay_exact(turns in proptest::collection::vec(prompt(), 1..6)) {
        let mut convo = String::new();
        for turn in &turns {
            convo.push_str("<|im_start|>user\n");
            convo.push_str(turn);
            convo.push_str("<|im_end|>\n<|start_header_id|>assistant<|end_header_id|>\n\n");
            check(&convo)?;
        }
    }
}

#[test]
fn the_cache_is_hit_and_matches_stock() {
    let cache = SegmentCache::new(1 << 20);
    let enc = encoder(0);
    let body =
        "Ünïcödé e\u{301} café — a long enough message to be cached as a segment. ".repeat(4);
    let text = format!("<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n");
    let mut a = Vec::new();
    let mut b = Vec::new();
    enc.encode_into_cached(&text, false, &cache, &mut a)
        .unwrap();
    enc.encode_into_cached(&text, false, &cache, &mut b)
        .unwrap();
    let stock = enc
        .stock()
        .encode(text.as_str(), false)
        .unwrap()
        .get_ids()
        .to_vec();
    assert_eq!(a, stock);
    assert_eq!(b, stock);
    let st = cache.stats();
    assert_eq!((st.misses, st.hits), (1, 1), "{st:?}");
}

#[test]
fn a_tiny_cache_stays_exact_while_evicting() {
    // About one piece per shard (text, ids and ENTRY_OVERHEAD): shards empty constantly.
    let cache = SegmentCache::new(512 * 16);
    let enc = encoder(3);
    let mut got = Vec::new();
    for n in 0..50 {
        let text = format!(
            "<|eot_id|>{} number {n}<|eot_id|>",
            "word ".repeat(20 + n % 7)
        );
        enc.encode_into_cached(&text, true, &cache, &mut got)
            .unwrap();
        assert_eq!(got, enc.encode(&text, true).unwrap());
        assert!(cache.bytes_held() <= cache.capacity_bytes());
    }
    let st = cache.stats();
    assert!(st.clears > 0 && st.evicted >= st.clears, "{st:?}");
    assert!(!cache.is_empty());
    cache.clear();
    assert_eq!((cache.len(), cache.bytes_held()), (0, 0));
    assert_eq!(cache.stats(), st, "clear keeps the counters");
}

#[test]
fn bytes_held_counts_text_ids_and_overhead() {
    let cache = SegmentCache::new(1 << 20);
    let enc = encoder(0);
    let body = "a message long enough to be cached as one segment of its own. ".repeat(3);
    let text = format!("<|im_start|>user\n{body}<|im_end|>\n");
    let mut ids = Vec::new();
    enc.encode_into_cached(&text, false, &cache, &mut ids)
        .unwrap();
    let piece = enc.encode(&body, false).unwrap();
    // One piece cached: `user\n` + body (the text between the two added tokens).
    assert_eq!(cache.len(), 1);
    let piece_text = format!("user\n{body}");
    let piece_ids = enc.encode(&piece_text, false).unwrap();
    assert!(piece_ids.len() >= piece.len());
    assert_eq!(
        cache.bytes_held(),
        piece_text.len() + 4 * piece_ids.len() + kvtoken::segment_cache::ENTRY_OVERHEAD
    );
}

#[test]
fn fallback_encoders_bypass_the_cache() {
    let fallback = common::fallback_encoder();
    assert!(!fallback.is_fast());
    let cache = SegmentCache::new(1 << 20);
    let text = "<start_of_turn>user\n".to_string() + &"long text ".repeat(20);
    let mut got = Vec::new();
    fallback
        .encode_into_cached(&text, true, &cache, &mut got)
        .unwrap();
    assert_eq!(got, fallback.encode(&text, true).unwrap());
    assert_eq!(cache.stats().misses + cache.stats().hits, 0);
}
