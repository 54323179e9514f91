//! kvtoken's fast path must give exactly HF `tokenizers`' ids. The first input byte picks the
//! shipped tokenizer (and `add_special_tokens`); the rest, read as UTF-8 (lossily, so every
//! input is exercised), is the text.
//!
//! `KVTOKEN_FUZZ_MODEL=<name or index>` pins every input to one tokenizer (the first byte then
//! only picks `add_special_tokens`), so each tokenizer can get a run of its own (gemma-2
//! takes the SentencePiece-style fast path, the others the byte-level one):
//! `KVTOKEN_FUZZ_MODEL=meta-llama__Llama-3.1-8B-Instruct cargo fuzz run fast_tokenizer`.
#![no_main]

use std::sync::OnceLock;

use kvtoken::FastEncoder;
use libfuzzer_sys::fuzz_target;

const MODELS: [&str; 5] = [
    "Qwen__Qwen2.5-7B-Instruct",
    "Qwen__Qwen3-0.6B",
    "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B",
    "meta-llama__Llama-3.1-8B-Instruct",
    "google__gemma-2-9b-it",
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

/// The tokenizer pinned by `KVTOKEN_FUZZ_MODEL`, if any (an unknown value stops the run).
fn pinned() -> Option<usize> {
    static PINNED: OnceLock<Option<usize>> = OnceLock::new();
    *PINNED.get_or_init(|| {
        let v = std::env::var("KVTOKEN_FUZZ_MODEL").ok()?;
        let i = MODELS
            .iter()
            .position(|m| *m == v)
            .or_else(|| v.parse::<usize>().ok().filter(|i| *i < MODELS.len()))
            .unwrap_or_else(|| panic!("KVTOKEN_FUZZ_MODEL={v}: not one of {MODELS:?} or 0..5"));
        eprintln!("fast_tokenizer: pinned to {}", MODELS[i]);
        Some(i)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let i = pinned().unwrap_or(usize::from(sel) % MODELS.len());
    let add = sel & 0x80 != 0;
    let text = String::from_utf8_lossy(rest);
    let enc = encoder(i);
    let fast = enc.encode(&text, add).expect("fast encode");
    let stock = enc.encode_stock(&text, add).expect("stock encode");
    assert_eq!(
        fast, stock,
        "{}: {text:?} add_special_tokens={add}",
        MODELS[i]
    );
});
