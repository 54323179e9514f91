//! What the differential test files share: the shipped tokenizers (each loaded once per test
//! binary), the fast-vs-stock checks, the fragment pool generated texts are made of, long
//! runs, and reading the JSON corpora.
#![allow(dead_code)]

use std::sync::OnceLock;

use kvtoken::FastEncoder;
use proptest::prelude::*;

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

/// The byte spans of the fast pre-tokenizer of `MODELS[i]` equal `tokenizers`' own for
/// `text`; the error names the first split that differs.
pub fn check_spans(i: usize, text: &str) -> Result<(), String> {
    let stock = stock_spans(i, text)?;
    let Some(fast) = encoder(i).pre_tokenize_spans(text) else {
        return Err(format!("{}: no fast pre-tokenizer", MODELS[i].0));
    };
    if stock == fast {
        return Ok(());
    }
    let at = stock
        .iter()
        .zip(&fast)
        .position(|(a, b)| a != b)
        .unwrap_or(stock.len().min(fast.len()));
    let show = |s: &[(usize, usize)]| s.get(at).map(|&(a, b)| text[a..b].to_owned());
    Err(format!(
        "{}: splits of {text:?} differ at {at}: stock {:?} fast {:?}",
        MODELS[i].0,
        show(&stock),
        show(&fast)
    ))
}

/// Fragments every generated text draws on, whatever the tokenizer: contractions in every
/// case, white space of every kind, digits of several scripts, letters of many scripts,
/// combining marks, emoji, punctuation runs and control chars. Each test file adds its own
/// ([`pool`]).
pub const SHARED_POOL: &[&str] = &[
    "<|endoftext|>",
    "'s",
    "'S",
    "'t",
    "'re",
    "'RE",
    "'ve",
    "'m",
    "'ll",
    "'LL",
    "'d",
    "'D",
    "'ſ",
    "'ﬅ",
    "'K",
    "''",
    "'",
    "’s",
    "don't",
    "I'M",
    "y'all",
    "'rE",
    "'lL",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\n\n\n",
    " \n ",
    "\u{a0}",
    "\u{3000}",
    "\u{85}",
    "\u{2028}",
    "\u{200b}",
    "\u{feff}",
    "\u{b}",
    "\u{c}",
    "\u{1680}",
    "0",
    "7",
    "42",
    "123",
    "1234",
    "12345678",
    "٣",
    "½",
    "Ⅻ",
    "１２３",
    "²",
    "İstanbul",
    "ﬁ",
    "µ",
    "中文",
    "日本語",
    "한국어",
    "ひらがな",
    "カタカナ",
    "e\u{301}",
    "\u{301}",
    "مرحبا",
    "हिन्दी",
    "ไทย",
    "🚀",
    "👍🏽",
    "👨‍👩‍👧",
    "🇫🇷",
    "\u{fe0f}",
    "\u{0}",
    "\u{7f}",
    "!!!",
    "...",
    "?!",
    "->",
    "::",
    "{}",
    "();",
    "```",
    "#",
    "//",
    "/*",
    "*/",
    "$",
    "€",
    "__init__",
    "_x",
    "-y",
    "@z",
    "|>",
];

/// [`SHARED_POOL`] and a file's `own` fragments.
pub fn pool(own: &[&'static str]) -> Vec<&'static str> {
    SHARED_POOL.iter().chain(own).copied().collect()
}

/// Texts of up to 23 fragments drawn from `fragment`.
pub fn text_of(fragment: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment, 0..24).prop_map(|v| v.concat())
}

/// Long runs and repetitions (no split point, or splits every char or two): white space,
/// digits, letters, mixed case, CJK, combining marks, punctuation with `/`, added tokens.
pub fn long_runs() -> Vec<String> {
    vec![
        " ".repeat(5000),
        "\n".repeat(3000),
        "7".repeat(4001),
        "a".repeat(6000),
        "aB".repeat(3000),
        "=".repeat(3000),
        "ab".repeat(2000),
        " \n".repeat(1500),
        "中".repeat(2000),
        "e\u{301}".repeat(800),
        "!/".repeat(2000),
        format!("x{}y", " ".repeat(1000)),
        "<|im_end|>".repeat(300),
    ]
}

/// Every string value below `v`.
pub fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// A JSON file, parsed (panics naming the file otherwise).
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `.json` files of `dir`, sorted (none when it is missing).
pub fn json_files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "json"));
    files.sort();
    files
}
