//! Differential tests: the fast path gives exactly the ids (and pre-tokenizer splits) of HF
//! `tokenizers` for every shipped tokenizer, on arbitrary Unicode and on real corpora.

use crate::common;

use common::{
    assert_same, check_spans, encoder, fallback_encoder, index_of, json_files, long_runs, pool,
    read_json, strings, text_of, MODELS,
};
use kvtoken::{EncoderPath, Flavor};
use proptest::prelude::*;

/// Fragments that exercise every branch of the regex, the added-token matcher and NFC.
/// Fragments of this file's own: added tokens of every shipped tokenizer and near misses,
/// NFC corners, scripts and code points the shared pool lacks (see
/// [`common::SHARED_POOL`] for the rest).
const POOL: &[&str] = &[
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "<|im_start",
    "<|im_start|",
    "im_start|>",
    "<|IM_START|>",
    "< |im_end|>",
    "<<|im_end|>>",
    "<|reserved_special_token_5|>",
    "<|fim_prefix|>",
    "<bos>",
    "<start_of_turn>",
    " '",
    "'vE",
    "'l",
    "'r",
    "\u{2009}",
    "hello",
    "Hello",
    " world",
    "ÀÉÎ",
    "Straße",
    "ǅ",
    "ﾊﾝｶｸ",
    "a\u{308}",
    "\u{1100}\u{1161}\u{11a8}",
    "\u{212b}",
    "\u{2126}",
    "\u{f900}",
    "\u{0345}",
    "\u{1e9b}\u{323}",
    "\u{0958}",
    "\u{2adc}",
    "\u{1d15e}",
    "שלום",
    "\u{200f}",
    "\u{202e}",
    "ქართული",
    "\u{1f600}",
    "\u{1}",
    "\u{9f}",
    "\u{e000}",
    "\u{10ffff}",
    "\u{fffd}",
    "\u{fffe}",
    "\u{31350}",
    "\u{1e030}",
    "\u{2ebf0}",
    "\u{11f00}",
    "\u{1f8b0}",
    "`ls`",
    "=",
    "==",
    "<",
    ">",
    "|",
    "<|",
];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(pool(POOL)).prop_map(str::to_owned),
        2 => any::<char>().prop_map(String::from),
        1 => "\\PC{0,6}",
        1 => "[ \\t\\r\\n\\u{a0}\\u{3000}]{1,12}",
        1 => "[0-9]{1,9}",
        1 => "[a-zA-Z]{1,10}",
        1 => "[\\u{300}-\\u{36f}\\u{1100}-\\u{11ff}\\u{ac00}-\\u{ac20}a-e]{1,6}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    text_of(fragment())
}

#[test]
fn shipped_tokenizers_take_the_expected_path() {
    for (i, (name, fast)) in MODELS.iter().enumerate() {
        let enc = encoder(i);
        assert_eq!(enc.is_fast(), *fast, "{name}: {:?}", enc.path());
    }
    assert_eq!(encoder(0).path(), &EncoderPath::Fast(Flavor::Qwen2));
    assert_eq!(encoder(3).path(), &EncoderPath::Fast(Flavor::Llama3));
    assert_eq!(
        encoder(4).path(),
        &EncoderPath::Fast(Flavor::SentencePieceBpe)
    );
    assert_eq!(encoder(5).path(), &EncoderPath::Fast(Flavor::O200k));
    assert!(matches!(fallback_encoder().path(), EncoderPath::Fallback(r) if !r.is_empty()));
}

#[test]
fn encoder_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<kvtoken::FastEncoder>();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn ids_match_stock_on_arbitrary_text(t in text()) {
        for i in 0..MODELS.len() {
            if let Err(e) = assert_same(i, &t) {
                return Err(TestCaseError::fail(e));
            }
        }
    }

    #[test]
    fn ids_match_stock_on_arbitrary_strings(t in any::<String>()) {
        for i in 0..MODELS.len() {
            if let Err(e) = assert_same(i, &t) {
                return Err(TestCaseError::fail(e));
            }
        }
    }

    #[test]
    fn splits_match_stock_pre_tokenizer(t in text()) {
        for (i, (_, fast)) in MODELS.iter().enumerate() {
            // SentencePiece-style BPE has no pre-tokenizer to compare with.
            if !*fast || encoder(i).path() == &EncoderPath::Fast(Flavor::SentencePieceBpe) {
                continue;
            }
            check_spans(i, &t).map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn long_runs_match_stock() {
    let runs = long_runs();
    for prepared in [false, true] {
        for t in &runs {
            for i in 0..MODELS.len() {
                if prepared {
                    encoder(i).prepare_long_words();
                }
                if let Err(e) = assert_same(i, t) {
                    panic!("prepared {prepared}: {}", &e[..e.len().min(2000)]);
                }
            }
        }
    }
}

/// Vector file prefix -> model folder.
const VECTOR_MODELS: &[(&str, &str)] = &[
    ("qwen25-", "Qwen__Qwen2.5-7B-Instruct"),
    ("qwen3-", "Qwen__Qwen3-0.6B"),
    ("r1-distill-", "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B"),
    ("llama31-", "meta-llama__Llama-3.1-8B-Instruct"),
    ("gemma2-", "google__gemma-2-9b-it"),
];

#[test]
fn template_vectors_corpus_matches_stock_and_engines() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors/templates");
    let files = json_files(dir);
    assert!(files.len() >= 5, "template vectors missing in {dir}");
    let (mut texts, mut truths) = (0usize, 0usize);
    for path in files {
        let v = read_json(&path);
        let fname = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let own = VECTOR_MODELS
            .iter()
            .find(|(p, _)| fname.starts_with(p))
            .map(|(_, m)| index_of(m));
        for case in v
            .get("cases")
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
        {
            let mut all = Vec::new();
            strings(
                case.get("messages").unwrap_or(&serde_json::Value::Null),
                &mut all,
            );
            for key in ["rendered", "prompt"] {
                if let Some(s) = case.get(key).and_then(|s| s.as_str()) {
                    all.push(s.to_owned());
                }
            }
            for t in &all {
                for i in 0..MODELS.len() {
                    assert_same(i, t).unwrap_or_else(|e| panic!("{fname}: {e}"));
                }
                texts += 1;
            }
            // The engines' own ids, where the vectors carry them for a shipped tokenizer.
            let Some(i) = own else { continue };
            let enc = encoder(i);
            // Engine ids are what `tokenizers` gives where the vectors say so; elsewhere (R1's
            // BOS, trap T2) the vectors record the `tokenizers` ids separately.
            let lib_matches =
                case.get("tokenizers_lib_matches").and_then(|b| b.as_bool()) == Some(true);
            let expect = |key: &str| -> Option<Vec<u32>> {
                let lib_key = key.replace("token_ids_", "tokenizers_lib_");
                let v = match case.get(&lib_key) {
                    Some(v) => v,
                    None if lib_matches => case.get(key)?,
                    None => return None,
                };
                serde_json::from_value(v.clone()).ok()
            };
            if let (Some(r), Some(ids)) = (
                case.get("rendered").and_then(|s| s.as_str()),
                expect("token_ids"),
            ) {
                assert_eq!(
                    enc.encode(r, false).ok(),
                    Some(ids),
                    "{fname} {:?}",
                    case.get("id")
                );
                truths += 1;
            }
            if let Some(p) = case.get("prompt").and_then(|s| s.as_str()) {
                for (key, add) in [
                    ("token_ids_add_special_true", true),
                    ("token_ids_add_special_false", false),
                ] {
                    if let Some(ids) = expect(key) {
                        assert_eq!(
                            enc.encode(p, add).ok(),
                            Some(ids),
                            "{fname} {:?} {key}",
                            case.get("id")
                        );
                        truths += 1;
                    }
                }
            }
        }
    }
    assert!(
        texts > 200 && truths > 100,
        "only {texts} texts / {truths} truths checked"
    );
    eprintln!("checked {texts} texts on every tokenizer, {truths} against engine ids");
}

#[test]
fn bench_workload_corpus_matches_stock() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../benches/workload");
    let mut files = json_files(dir);
    files.extend(
        json_files(&format!("{dir}/agent-40turns-prefixes"))
            .into_iter()
            .take(1),
    );
    if files.is_empty() {
        eprintln!("note: {dir} not present; workload corpus skipped");
        return;
    }
    for path in files {
        let mut all = Vec::new();
        strings(&read_json(&path), &mut all);
        let joined = all.join("\n");
        all.push(joined);
        for t in &all {
            for i in 0..MODELS.len() {
                assert_same(i, t)
                    .unwrap_or_else(|e| panic!("{}: {}", path.display(), &e[..e.len().min(3000)]));
            }
        }
    }
}

/// gemma-2 (SentencePiece-style BPE): the texts that take its special corners.
#[test]
fn sentencepiece_corners_match_stock() {
    let gemma = index_of("google__gemma-2-9b-it");
    let texts = [
        // Byte fallback: chars outside the vocabulary, alone, in words and after spaces.
        "\u{1}\u{2}\u{7f}",
        "a\u{1}b \u{10FFFD} x\u{E000}y",
        "𓀀𓀁 𐍈 \u{1F9FF}\u{1FAE8}",
        "\u{0}",
        // Literal ▁, and text that looks like byte tokens or added tokens.
        "▁ ▁▁a ▁x▁y",
        "<0x41><0x09> <unk> <pad>",
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
        "<start_of_turn <end_of_turn>> <<bos>>",
        // White space: runs of spaces, tabs (added tokens), newlines (added tokens), others.
        "a  b   c    d",
        "\t\t x \t\t\t\ty",
        "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n x",
        " \u{a0}\u{3000} \r\n \u{2028}",
        "    leading and trailing    ",
        // Punctuation next to spaces, digits, CJK without spaces, emoji ZWJ.
        "Hello, world! It's 2024-07-26 (really?) -- yes.",
        "1234567890 ١٢٣ ௧௨௩",
        "你好，世界。今天天气很好",
        "👨\u{200d}👩\u{200d}👧\u{200d}👦 👩🏽\u{200d}💻",
    ];
    for t in texts {
        assert_same(gemma, t).unwrap_or_else(|e| panic!("{e}"));
        assert_same(gemma, &t.repeat(3)).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A long pre-token (no split point) on every tokenizer: exactly stock's ids.
#[test]
fn long_words_match_stock() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut letters = String::new();
    for _ in 0..40_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        letters.push(char::from(b'a' + (x % 26) as u8));
    }
    let cjk: String = letters
        .bytes()
        .take(8000)
        .map(|b| char::from_u32(0x4E00 + u32::from(b) * 97).unwrap_or('中'))
        .collect();
    let emoji = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{1F680}\u{2764}\u{FE0F}".repeat(300);
    let texts = [
        letters,
        cjk,
        emoji,
        "\u{1}x".repeat(3000),
        "ab".repeat(10_000),
    ];
    // Whole (an encoder builds its cutter only after 1 MiB of long words), then cut.
    for prepared in [false, true] {
        for t in &texts {
            for i in 0..MODELS.len() {
                if prepared {
                    encoder(i).prepare_long_words();
                }
                if let Err(e) = assert_same(i, t) {
                    panic!("prepared {prepared}: {}", &e[..e.len().min(2000)]);
                }
            }
        }
    }
}
