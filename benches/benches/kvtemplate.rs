//! kvtemplate hot path over the shared workload (`benches/workload/`, see its README):
//! per file, the strict chat path split into parse + refusal scan + render and tokenize, the
//! whole `encode_chat`, and — as the baseline in the same group — HF `tokenizers` encoding the
//! same rendered text alone. Throughput is in bytes of the request body. Model: Qwen2.5-7B-
//! Instruct (the model every workload body names), vLLM contract.
//!
//! gpt-oss (`gptoss_chat4k_render_tokenize`): kvexact's harmony encoder rendering and encoding
//! the chat-4k conversation as vLLM does (body in, ids out) and, with the `harmony-peer`
//! feature, the `openai-harmony` crate rendering and encoding the same conversation (its
//! `Conversation` built from the parsed messages inside the timed loop), same ids asserted.
//! The crate reads `o200k_base.tiktoken` from `TIKTOKEN_ENCODINGS_BASE`, which the bench
//! points at the gpt-oss model folder (testdata/, else ../shared/models/) if unset.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kvtemplate::{spec_from_model_dir, Encoder, Engine, Outcome, ScratchBuf};
use std::path::Path;

const MODEL: &str = "Qwen__Qwen2.5-7B-Instruct";
const NOW: i64 = 1_721_997_296_000;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bench(c: &mut Criterion) {
    let dir = root().join("../testdata/models").join(MODEL);
    let spec = spec_from_model_dir(&dir, Engine::Vllm).expect("model dir");
    let tok_bytes = spec.tokenizer_json.clone().expect("tokenizer.json");
    let enc = Encoder::new(spec).expect("encoder");
    let baseline = tokenizers::Tokenizer::from_bytes(&tok_bytes).expect("tokenizer");

    let mut g = c.benchmark_group("kvtemplate");
    for name in ["chat-short", "chat-4k", "chat-32k"] {
        let body =
            std::fs::read(root().join("workload").join(format!("{name}.json"))).expect("workload");
        let mut scratch = ScratchBuf::new();
        let mut out = vec![0u32; 65_536];
        assert_eq!(
            enc.render_chat(&body, NOW, &mut scratch).expect("render"),
            Outcome::Done(())
        );
        let rendered = scratch.rendered().to_string();
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(format!("{name}/parse_refuse_render"), |b| {
            b.iter(|| {
                enc.render_chat(black_box(&body), NOW, &mut scratch)
                    .expect("render")
            })
        });
        g.bench_function(format!("{name}/tokenize"), |b| {
            b.iter(|| {
                enc.tokenizer()
                    .expect("tokenizer")
                    .chat(Engine::Vllm, black_box(&rendered), false)
                    .expect("ids")
            })
        });
        g.bench_function(format!("{name}/encode_chat"), |b| {
            b.iter(|| {
                enc.encode_chat(black_box(&body), NOW, &mut out, &mut scratch)
                    .expect("encode")
            })
        });
        g.bench_function(format!("{name}/baseline_tokenizers_encode"), |b| {
            b.iter(|| {
                baseline
                    .encode_fast(black_box(rendered.as_str()), false)
                    .expect("ids")
                    .get_ids()
                    .len()
            })
        });
    }
    let body = std::fs::read(root().join("workload/completions-4k.json")).expect("workload");
    let prompt: String = serde_json::from_slice::<serde_json::Value>(&body).expect("json")
        ["prompt"]
        .as_str()
        .expect("prompt")
        .to_string();
    let mut out = vec![0u32; 65_536];
    g.throughput(Throughput::Bytes(prompt.len() as u64));
    g.bench_function("completions-4k/encode_completions", |b| {
        b.iter(|| {
            enc.encode_completions(black_box(&prompt), &mut out)
                .expect("encode")
        })
    });
    g.bench_function("completions-4k/baseline_tokenizers_encode", |b| {
        b.iter(|| {
            baseline
                .encode_fast(black_box(prompt.as_str()), true)
                .expect("ids")
                .get_ids()
                .len()
        })
    });
    g.finish();
}

/// The gpt-oss harmony benches (see the module documentation).
fn bench_harmony(c: &mut Criterion) {
    use kvtemplate::harmony::{HarmonyConfig, HarmonyEncoder};
    let tok = std::fs::read(root().join("../testdata/models/openai__gpt-oss-20b/tokenizer.json"))
        .expect("gpt-oss tokenizer.json");
    let enc = HarmonyEncoder::from_tokenizer_json(&tok, HarmonyConfig::vllm()).expect("harmony");
    assert!(enc.ordinary().is_fast(), "{:?}", enc.ordinary().path());
    let body = std::fs::read(root().join("workload/chat-4k.json")).expect("workload");
    let ours = enc
        .engine_chat(&body, Some(NOW))
        .expect("render")
        .ids
        .expect("ids");
    eprintln!(
        "gptoss_chat4k: {} body bytes, {} tokens",
        body.len(),
        ours.len()
    );
    let mut g = c.benchmark_group("kvtemplate");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("gptoss_chat4k_render_tokenize", |b| {
        b.iter(|| {
            enc.engine_chat(black_box(&body), Some(NOW))
                .expect("render")
                .ids
                .map(|ids| ids.len())
        })
    });
    #[cfg(feature = "harmony-peer")]
    {
        let peer = peer::load();
        let msgs = peer::messages(&body);
        let theirs = peer::render(&peer, &msgs);
        assert_eq!(theirs, ours, "openai-harmony and kvexact ids differ");
        g.bench_function("gptoss_chat4k_render_tokenize_openai_harmony", |b| {
            b.iter(|| peer::render(&peer, black_box(&msgs)).len())
        });
    }
    g.finish();
}

/// The `openai-harmony` crate (0.0.8), the peer of `gptoss_chat4k_render_tokenize`.
#[cfg(feature = "harmony-peer")]
mod peer {
    use openai_harmony::chat::{Conversation, DeveloperContent, Message, Role, SystemContent};
    use openai_harmony::{load_harmony_encoding, HarmonyEncoding, HarmonyEncodingName};

    /// The conversation date of `super::NOW` (2024-07-26 UTC).
    const DATE: &str = "2024-07-26";

    /// The crate's gpt-oss encoding, its vocabulary read from a local `o200k_base.tiktoken`.
    pub fn load() -> HarmonyEncoding {
        if std::env::var_os("TIKTOKEN_ENCODINGS_BASE").is_none() {
            let local = super::root().join("../testdata/models/openai__gpt-oss-20b");
            let shared = super::root().join("../../shared/models/openai__gpt-oss-20b");
            let dir = [local, shared]
                .into_iter()
                .find(|d| d.join("o200k_base.tiktoken").is_file())
                .expect("o200k_base.tiktoken (set TIKTOKEN_ENCODINGS_BASE)");
            std::env::set_var("TIKTOKEN_ENCODINGS_BASE", dir);
        }
        load_harmony_encoding(HarmonyEncodingName::HarmonyGptOss).expect("openai-harmony")
    }

    /// The (role, text) of each message of a chat body.
    pub fn messages(body: &[u8]) -> Vec<(String, String)> {
        let v: serde_json::Value = serde_json::from_slice(body).expect("json");
        v["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| {
                let role = m["role"].as_str().expect("role").to_string();
                (
                    role,
                    m["content"].as_str().expect("text content").to_string(),
                )
            })
            .collect()
    }

    /// vLLM's conversation for these messages, rendered for completion by the crate.
    pub fn render(enc: &HarmonyEncoding, msgs: &[(String, String)]) -> Vec<u32> {
        let mut conv = vec![Message::from_role_and_content(
            Role::System,
            SystemContent::new().with_conversation_start_date(DATE),
        )];
        for (role, text) in msgs {
            conv.push(match role.as_str() {
                "system" | "developer" => Message::from_role_and_content(
                    Role::Developer,
                    DeveloperContent::new().with_instructions(text.clone()),
                ),
                "assistant" => Message::from_role_and_content(Role::Assistant, text.clone())
                    .with_channel("final"),
                _ => Message::from_role_and_content(Role::User, text.clone()),
            });
        }
        let conv = Conversation::from_messages(conv);
        enc.render_conversation_for_completion(&conv, Role::Assistant, None)
            .expect("render")
    }
}

criterion_group!(benches, bench, bench_harmony);
criterion_main!(benches);
