//! kvtoken's segment cache must never change ids: encoding through a (small, shared,
//! constantly evicting) `SegmentCache` gives exactly the uncached fast-path ids, which give
//! exactly HF `tokenizers`' ids. The first input byte picks the shipped tokenizer and
//! `add_special_tokens`; the rest, read as UTF-8 (lossily), is a prompt that is also encoded
//! again with a special token and a copy of itself appended (multi-turn shape, so cached
//! pieces are found).
#![no_main]

use std::sync::OnceLock;

use kvtoken::{FastEncoder, SegmentCache};
use libfuzzer_sys::fuzz_target;

const MODELS: [&str; 5] = [
    "Qwen__Qwen2.5-7B-Instruct",
    "Qwen__Qwen3-0.6B",
    "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B",
    "meta-llama__Llama-3.1-8B-Instruct",
    "google__gemma-2-9b-it",
];

const SPECIALS: [&str; 5] = [
    "<|im_end|>\n<|im_start|>user\n",
    "<|im_end|>\n<|im_start|>assistant\n<think>\n",
    "<｜User｜>",
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n",
    "<end_of_turn>\n<start_of_turn>user\n",
];

static ENCODERS: [OnceLock<FastEncoder>; 5] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];

fn encoder(i: usize) -> &'static FastEncoder {
    ENCODERS[i].get_or_init(|| {
        let path = format!(
            "{}/../testdata/models/{}/tokenizer.json",
            env!("CARGO_MANIFEST_DIR"),
            MODELS[i]
        );
        FastEncoder::from_file(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    })
}

fn cache() -> &'static SegmentCache {
    static CACHE: OnceLock<SegmentCache> = OnceLock::new();
    CACHE.get_or_init(|| SegmentCache::new(64 * 1024))
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let i = usize::from(sel) % MODELS.len();
    let add = sel & 0x80 != 0;
    let text = String::from_utf8_lossy(rest);
    let enc = encoder(i);
    let turn2 = format!(
        "{text}{}{text}",
        SPECIALS[usize::from(sel >> 3) % SPECIALS.len()]
    );
    let mut cached = Vec::new();
    for t in [text.as_ref(), turn2.as_str()] {
        let plain = enc.encode(t, add).expect("fast encode");
        for _ in 0..2 {
            enc.encode_into_cached(t, add, cache(), &mut cached)
                .expect("cached encode");
            assert_eq!(
                cached, plain,
                "{}: {t:?} add_special_tokens={add}",
                MODELS[i]
            );
        }
    }
    let stock = enc.encode_stock(&turn2, add).expect("stock encode");
    assert_eq!(
        cached, stock,
        "{}: {turn2:?} add_special_tokens={add}",
        MODELS[i]
    );
});
