//! kvtoken's fast encoder vs stock HF `tokenizers` on the same rendered prompts (the bench
//! workload's chat-4k and chat-32k requests, rendered with a minimal ChatML / Llama 3 format —
//! the exact template rendering is kvtemplate's job; this is only input text). Throughput in
//! bytes of prompt text; `add_special_tokens = false` (the engines' chat path).
//!
//! Besides chat text: gemma-2 on chat-4k (Gemma's turn format), gpt-oss on chat-4k (harmony
//! framing, o200k), Mistral's tekken on chat-4k's messages and the adversarial mix
//! (`tekken_*_fast`: kvtoken's split; `tekken_*_regex`: fancy-regex's, tiktoken's own; the same
//! merges after both), Mistral Large's SentencePiece v7 `.model` on the same texts
//! (`spmv7_*_fast`: kvtoken's id-based merging; `spmv7_chat4k_slow`: its string-based twin), and an
//! adversarial mix
//! generated here (long white-space runs, 64 KiB words, digit runs of every `Nd` digit kind,
//! CJK without spaces, emoji ZWJ runs), whole (`*_adversarial_*`) and per class
//! (`*_adv_<class>_*`).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kvtoken::FastEncoder;
use serde_json::Value;

const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/models");

fn workload(name: &str) -> Value {
    let candidates = [
        format!("{}/workload/{name}", env!("CARGO_MANIFEST_DIR")),
        format!(
            "{}/../../shared/bench/workload/{name}",
            env!("CARGO_MANIFEST_DIR")
        ),
    ];
    for path in &candidates {
        if let Ok(bytes) = std::fs::read(path) {
            return serde_json::from_slice(&bytes).expect("workload json");
        }
    }
    panic!("workload {name} not found in {candidates:?}");
}

fn messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or("user").to_owned(), content)
        })
        .collect()
}

fn chatml(msgs: &[(String, String)]) -> String {
    let mut s = String::new();
    if msgs.first().is_none_or(|(r, _)| r != "system") {
        s.push_str("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n");
    }
    for (role, content) in msgs {
        s.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
    }
    s.push_str("<|im_start|>assistant\n");
    s
}

fn llama3(msgs: &[(String, String)]) -> String {
    let mut s = String::from("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    let mut rest = msgs;
    if let Some(((role, content), tail)) = msgs.split_first() {
        if role == "system" {
            s.push_str(content.trim());
            rest = tail;
        }
    }
    s.push_str("<|eot_id|>");
    for (role, content) in rest {
        s.push_str(&format!(
            "<|start_header_id|>{role}<|end_header_id|>\n\n{}<|eot_id|>",
            content.trim()
        ));
    }
    s.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
    s
}

fn gemma(msgs: &[(String, String)]) -> String {
    // Gemma's template has no system role: the system text opens the first user turn.
    let mut s = String::from("<bos>");
    let mut pending = String::new();
    for (role, content) in msgs {
        if role == "system" {
            pending = format!("{}\n\n", content.trim());
            continue;
        }
        let role = if role == "assistant" {
            "model"
        } else {
            role.as_str()
        };
        s.push_str(&format!(
            "<start_of_turn>{role}\n{pending}{}<end_of_turn>\n",
            content.trim()
        ));
        pending.clear();
    }
    s.push_str("<start_of_turn>model\n");
    s
}

/// gpt-oss's harmony framing (the system message vLLM writes, the leading system message as
/// developer instructions, assistant turns on the final channel).
fn harmony(msgs: &[(String, String)]) -> String {
    let mut s = String::from("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2024-07-26\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>");
    for (role, content) in msgs {
        match role.as_str() {
            "system" | "developer" => s.push_str(&format!(
                "<|start|>developer<|message|># Instructions\n\n{content}<|end|>"
            )),
            "assistant" => s.push_str(&format!(
                "<|start|>assistant<|channel|>final<|message|>{content}<|end|>"
            )),
            role => s.push_str(&format!("<|start|>{role}<|message|>{content}<|end|>")),
        }
    }
    s.push_str("<|start|>assistant");
    s
}

/// A small deterministic generator (xorshift64*), so every run sees the same text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The zero of every `Nd` (decimal digit) block, Unicode 14: each is followed by 1..9.
const ND_ZEROS: &[u32] = &[
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// Bytes of text per adversarial class.
const ADV_BYTES: usize = 256 * 1024;

/// The adversarial classes: (name, text of about [`ADV_BYTES`]).
fn adversarial() -> Vec<(&'static str, String)> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let fill = |rng: &mut Rng, f: &mut dyn FnMut(&mut Rng, &mut String)| {
        let mut s = String::new();
        while s.len() < ADV_BYTES {
            f(rng, &mut s);
        }
        s
    };
    let word = |rng: &mut Rng, s: &mut String, len: usize| {
        for _ in 0..len {
            s.push(char::from(b'a' + rng.below(26) as u8));
        }
    };
    // Runs of 1..8192 of one white-space char or a mix, between short words.
    let spaces = fill(&mut rng, &mut |rng, s| {
        let n = 1 << rng.below(14);
        let n = n + rng.below(n);
        match rng.below(5) {
            0 => s.extend(std::iter::repeat_n(' ', n)),
            1 => s.extend(std::iter::repeat_n('\t', n)),
            2 => s.extend(std::iter::repeat_n('\n', n)),
            3 => s.extend((0..n).map(|_| [' ', '\t', '\n', '\r'][rng.below(4)])),
            _ => s.extend((0..n).map(|_| [' ', '\u{a0}', '\u{3000}', '\n'][rng.below(4)])),
        }
        let len = 1 + rng.below(8);
        word(rng, s, len);
    });
    // 64 KiB words: random lower-case letters, and one letter repeated.
    let long_words = fill(&mut rng, &mut |rng, s| {
        if rng.below(2) == 0 {
            word(rng, s, 64 * 1024);
        } else {
            s.extend(std::iter::repeat_n('a', 64 * 1024));
        }
        s.push(' ');
    });
    // Runs of 1..64 digits of one Nd kind, and of mixed kinds.
    let digits = fill(&mut rng, &mut |rng, s| {
        let n = 1 + rng.below(64);
        let one = ND_ZEROS[rng.below(ND_ZEROS.len())];
        let mixed = rng.below(2) == 0;
        for _ in 0..n {
            let zero = if mixed {
                ND_ZEROS[rng.below(ND_ZEROS.len())]
            } else {
                one
            };
            s.extend(char::from_u32(zero + rng.below(10) as u32));
        }
        s.push([' ', ',', 'x'][rng.below(3)]);
    });
    // CJK ideographs without spaces, runs of up to 4096 chars between punctuation.
    let cjk = fill(&mut rng, &mut |rng, s| {
        for _ in 0..1 + rng.below(4096) {
            s.extend(char::from_u32(0x4E00 + rng.below(0x5200) as u32));
        }
        s.push('。');
    });
    // Emoji ZWJ sequences (families, professions, skin tones) without spaces.
    const EMOJI: &[&str] = &[
        "👨\u{200d}👩\u{200d}👧\u{200d}👦",
        "👩🏽\u{200d}💻",
        "🏳\u{fe0f}\u{200d}🌈",
        "🧑🏿\u{200d}🤝\u{200d}🧑🏻",
        "❤\u{fe0f}\u{200d}🔥",
        "🚀",
        "🇯🇵",
    ];
    let emoji = fill(&mut rng, &mut |rng, s| {
        for _ in 0..1 + rng.below(256) {
            s.push_str(EMOJI[rng.below(EMOJI.len())]);
        }
        s.push(' ');
    });
    let classes = vec![
        ("spaces", spaces),
        ("longword", long_words),
        ("digits", digits),
        ("cjk", cjk),
        ("emoji", emoji),
    ];
    let mut mix = String::new();
    for (_, text) in &classes {
        mix.push_str(text);
    }
    let mut all = vec![("adversarial", mix)];
    all.extend(classes);
    all
}

fn bench(c: &mut Criterion) {
    let load = |m: &str| {
        FastEncoder::from_file(format!("{MODELS}/{m}/tokenizer.json")).expect("tokenizer")
    };
    let qwen = load("Qwen__Qwen2.5-7B-Instruct");
    let llama = load("meta-llama__Llama-3.1-8B-Instruct");
    let gemma2 = load("google__gemma-2-9b-it");
    let gptoss = load("openai__gpt-oss-20b");
    assert!(qwen.is_fast() && llama.is_fast() && gptoss.is_fast());
    eprintln!("gemma-2 path: {:?}", gemma2.path());
    let chat4k = messages(&workload("chat-4k.json"));
    let chat32k = messages(&workload("chat-32k.json"));

    let mut group = c.benchmark_group("kvtoken");
    let mut cases = vec![
        ("qwen25_chat4k".to_owned(), &qwen, chatml(&chat4k)),
        ("llama31_chat4k".to_owned(), &llama, llama3(&chat4k)),
        ("qwen25_chat32k".to_owned(), &qwen, chatml(&chat32k)),
        ("llama31_chat32k".to_owned(), &llama, llama3(&chat32k)),
        ("gemma2_chat4k".to_owned(), &gemma2, gemma(&chat4k)),
        ("gptoss_chat4k".to_owned(), &gptoss, harmony(&chat4k)),
    ];
    for (class, text) in adversarial() {
        for (model, enc) in [("qwen25", &qwen), ("llama31", &llama)] {
            let name = if class == "adversarial" {
                format!("{model}_adversarial")
            } else {
                format!("{model}_adv_{class}")
            };
            cases.push((name, enc, text.clone()));
        }
    }
    if let Ok(only) = std::env::var("KVTOKEN_BENCH_ONLY") {
        cases.retain(|(name, _, _)| name.contains(only.as_str()));
    }
    for (name, enc, text) in &cases {
        let mut out = Vec::new();
        enc.encode_into(text, false, &mut out).expect("encode");
        let stock = enc.stock().encode(text.as_str(), false).expect("encode");
        assert_eq!(out, stock.get_ids(), "{name}: fast != stock");
        eprintln!("{name}: {} bytes, {} tokens", text.len(), out.len());
        group.throughput(Throughput::Bytes(text.len() as u64));
        // Stock `tokenizers` needs about a second per adversarial text.
        group.sample_size(if name.contains("_adv") { 10 } else { 100 });
        group.bench_function(format!("{name}_fast"), |b| {
            b.iter(|| {
                enc.encode_into(black_box(text), false, &mut out)
                    .expect("encode");
                black_box(out.len())
            })
        });
        group.bench_function(format!("{name}_hf"), |b| {
            b.iter(|| {
                let e = enc
                    .stock()
                    .encode(black_box(text.as_str()), false)
                    .expect("encode");
                black_box(e.get_ids().len())
            })
        });
    }
    // Mistral's tekken (Nemo's tekken.json): kvtoken's split against fancy-regex's split
    // (tiktoken's own, the same merges after it), on each message's text (mistral_common
    // tokenizes every text piece on its own) and on the adversarial mix.
    let tekken = kvtoken::Tekkenizer::from_file(format!(
        "{MODELS}/mistralai__Mistral-Nemo-Instruct-2407/tekken.json"
    ))
    .expect("tekken.json");
    let pieces: Vec<String> = chat4k.iter().map(|(_, c)| c.clone()).collect();
    let adv: Vec<String> = adversarial()
        .into_iter()
        .filter(|(class, _)| *class == "adversarial")
        .map(|(_, t)| t)
        .collect();
    for (name, texts) in [("tekken_chat4k", &pieces), ("tekken_adversarial", &adv)] {
        if std::env::var("KVTOKEN_BENCH_ONLY").is_ok_and(|only| !name.contains(only.as_str())) {
            continue;
        }
        let mut ids = 0;
        for t in texts.iter() {
            let fast = tekken.encode(t).expect("encode");
            assert_eq!(
                fast,
                tekken.encode_regex_split(t).expect("encode"),
                "{name}"
            );
            ids += fast.len();
        }
        let bytes: usize = texts.iter().map(String::len).sum();
        eprintln!("{name}: {bytes} bytes, {ids} tokens");
        group.throughput(Throughput::Bytes(bytes as u64));
        group.sample_size(if name.contains("adversarial") {
            10
        } else {
            100
        });
        let mut out = Vec::new();
        group.bench_function(format!("{name}_fast"), |b| {
            b.iter(|| {
                out.clear();
                for t in texts.iter() {
                    tekken.encode_into(black_box(t), &mut out).expect("encode");
                }
                black_box(out.len())
            })
        });
        group.bench_function(format!("{name}_regex"), |b| {
            b.iter(|| {
                let mut n = 0;
                for t in texts.iter() {
                    n += tekken
                        .encode_regex_split(black_box(t))
                        .expect("encode")
                        .len();
                }
                black_box(n)
            })
        });
    }
    // Mistral Large's SentencePiece v7 `.model` (the `sentencepiece` library's BPE: no
    // pre-tokenizer, the pair of best score merged across each whole text): kvtoken's
    // id-based merging against its string-based twin (`SpmModel::encode_slow`), on chat-4k's
    // messages one by one (ids asserted equal before timing), and kvtoken's alone on the
    // adversarial mix (the twin rescans the whole text per merge: quadratic on 64 KiB words).
    let spm = kvtoken::SpmModel::from_file(format!(
        "{MODELS}/mistralai__Mistral-Large-Instruct-2411/tokenizer.model.v7"
    ))
    .expect("tokenizer.model.v7");
    for (name, texts) in [("spmv7_chat4k", &pieces), ("spmv7_adversarial", &adv)] {
        if std::env::var("KVTOKEN_BENCH_ONLY").is_ok_and(|only| !name.contains(only.as_str())) {
            continue;
        }
        let twin = name == "spmv7_chat4k";
        let mut ids = 0;
        for t in texts.iter() {
            let fast = spm.encode(t);
            if twin {
                assert_eq!(fast, spm.encode_slow(t), "{name}");
            }
            ids += fast.len();
        }
        let bytes: usize = texts.iter().map(String::len).sum();
        eprintln!("{name}: {bytes} bytes, {ids} tokens");
        group.throughput(Throughput::Bytes(bytes as u64));
        group.sample_size(10);
        let mut out = Vec::new();
        group.bench_function(format!("{name}_fast"), |b| {
            b.iter(|| {
                out.clear();
                for t in texts.iter() {
                    spm.encode_into(black_box(t), &mut out);
                }
                black_box(out.len())
            })
        });
        if !twin {
            continue;
        }
        group.bench_function(format!("{name}_slow"), |b| {
            b.iter(|| {
                let mut n = 0;
                for t in texts.iter() {
                    n += spm.encode_slow(black_box(t)).len();
                }
                black_box(n)
            })
        });
    }
    // One 10 MB pre-token (lower-case letters, no spaces): the worst case of BPE on a word.
    // Stock `tokenizers` takes seconds per call here, so only the fast path is timed.
    let mut rng = Rng(7);
    let word: String = (0..10_000_000)
        .map(|_| char::from(b'a' + rng.below(26) as u8))
        .collect();
    group.sample_size(10);
    group.throughput(Throughput::Bytes(word.len() as u64));
    for (model, enc) in [("qwen25", &qwen), ("llama31", &llama)] {
        let name = format!("{model}_word10mb_fast");
        if std::env::var("KVTOKEN_BENCH_ONLY").is_ok_and(|only| !name.contains(only.as_str())) {
            continue;
        }
        let mut out = Vec::new();
        group.bench_function(name, |b| {
            b.iter(|| {
                enc.encode_into(black_box(&word), false, &mut out)
                    .expect("encode");
                black_box(out.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
