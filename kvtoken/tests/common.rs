//! Shared loading of the shipped tokenizers (each loaded once per test binary).
#![allow(dead_code)]

use std::sync::OnceLock;

use kvtoken::FastEncoder;

/// Model folders under testdata/models with a tokenizer.json, and whether the fast path is
/// expected.
pub const MODELS: &[(&str, bool)] = &[
    ("Qwen__Qwen2.5-7B-Instruct", true),
    ("Qwen__Qwen3-0.6B", true),
    ("deepseek-ai__DeepSeek-R1-Distill-Qwen-7B", true),
    ("meta-llama__Llama-3.1-8B-Instruct", true),
    ("google__gemma-2-9b-it", true),
    ("openai__gpt-oss-20b", true),
];

pub fn models_dir() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/models")
}

static ENCODERS: [OnceLock<FastEncoder>; 6] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];

/// The encoder of `MODELS[i]`.
pub fn encoder(i: usize) -> &'static FastEncoder {
    ENCODERS[i].get_or_init(|| {
        let path = format!("{}/{}/tokenizer.json", models_dir(), MODELS[i].0);
        match FastEncoder::from_file(&path) {
            Ok(e) => e,
            Err(e) => panic!("loading {path}: {e}"),
        }
    })
}

/// Index in MODELS of a model folder.
pub fn index_of(folder: &str) -> usize {
    match MODELS.iter().position(|(m, _)| *m == folder) {
        Some(i) => i,
        None => panic!("unknown model {folder}"),
    }
}

/// Asserts fast == stock ids for `text` with both `add_special_tokens` values.
pub fn assert_same(i: usize, text: &str) -> Result<(), String> {
    let enc = encoder(i);
    for add in [false, true] {
        let stock = enc
            .stock()
            .encode(text, add)
            .map_err(|e| e.to_string())?
            .get_ids()
            .to_vec();
        let fast = enc.encode(text, add).map_err(|e| e.to_string())?;
        if stock != fast {
            return Err(format!(
                "{}: ids differ for {text:?} (add_special_tokens={add})\nstock {stock:?}\nfast  {fast:?}",
                MODELS[i].0
            ));
        }
    }
    Ok(())
}

/// The byte spans `tokenizers`' own pre-tokenizer splits `text` into.
pub fn stock_spans(i: usize, text: &str) -> Result<Vec<(usize, usize)>, String> {
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
    let enc = encoder(i);
    let pre = enc.stock().get_pre_tokenizer().ok_or("no pre-tokenizer")?;
    let mut pts = PreTokenizedString::from(text);
    pre.pre_tokenize(&mut pts).map_err(|e| e.to_string())?;
    Ok(pts
        .get_splits(OffsetReferential::Original, OffsetType::Byte)
        .into_iter()
        .map(|(_, o, _)| o)
        .collect())
}

/// An encoder on the fallback path: gemma-2's tokenizer with a normalizer the fast path
/// does not implement (a lowercasing step after the `▁` replacement).
pub fn fallback_encoder() -> &'static FastEncoder {
    static FALLBACK: OnceLock<FastEncoder> = OnceLock::new();
    FALLBACK.get_or_init(|| {
        let path = format!("{}/google__gemma-2-9b-it/tokenizer.json", models_dir());
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut json: serde_json::Value =
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        let replace = json["normalizer"].take();
        json["normalizer"] = serde_json::json!({
            "type": "Sequence",
            "normalizers": [replace, {"type": "Lowercase"}],
        });
        let bytes = serde_json::to_vec(&json).unwrap_or_else(|e| panic!("{e}"));
        match FastEncoder::from_bytes(&bytes) {
            Ok(e) => e,
            Err(e) => panic!("fallback encoder: {e}"),
        }
    })
}
