//! What the encoder's unit tests share: the shipped tokenizers' fast-path encoders and
//! generated long words.

use std::sync::OnceLock;

use super::FastEncoder;

/// Model folders under `testdata/models` (those without a `tokenizer.json` are skipped).
const MODELS: &[&str] = &[
    "Qwen__Qwen2.5-7B-Instruct",
    "Qwen__Qwen3-0.6B",
    "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B",
    "meta-llama__Llama-3.1-8B-Instruct",
    "LGAI-EXAONE__EXAONE-3.5-7.8B-Instruct",
    "google__gemma-2-9b-it",
    "openai__gpt-oss-20b",
];

/// The fast-path encoders of the shipped tokenizers (those that have a `tokenizer.json`).
pub(super) fn encoders() -> &'static [FastEncoder] {
    static ENCODERS: OnceLock<Vec<FastEncoder>> = OnceLock::new();
    ENCODERS.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/models");
        MODELS
            .iter()
            .filter_map(|m| FastEncoder::from_file(format!("{dir}/{m}/tokenizer.json")).ok())
            .filter(FastEncoder::is_fast)
            .collect()
    })
}

/// A long pre-token of one kind: `(kind, seed, length in chars)`.
pub(super) fn long_word(kind: u8, seed: u64, len: usize) -> String {
    let mut x = seed | 1;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    const ZWJ: &[&str] = &[
        "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        "\u{1F469}\u{1F3FD}\u{200D}\u{1F4BB}",
        "\u{2764}\u{FE0F}\u{200D}\u{1F525}",
        "\u{1F680}",
    ];
    let unit = [' ', '\t', '\n', 'a', '=', '7'][next(6)];
    (0..len)
        .map(|_| match kind % 6 {
            0 => unit.to_string(),
            1 => char::from(b'a' + next(26) as u8).to_string(),
            2 => char::from_u32(0x4E00 + next(0x5200) as u32)
                .unwrap_or('中')
                .to_string(),
            3 => ZWJ[next(ZWJ.len())].to_string(),
            4 => [" ", "\t", "\n", "\r", "\u{3000}"][next(5)].to_string(),
            _ => ["ab", " ", "\u{4E2D}", "\u{1F680}", "x", "\u{E9}", "ing"][next(7)].to_string(),
        })
        .collect()
}
