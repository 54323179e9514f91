//! kvtoken's fast encoder vs stock HF `tokenizers` on the same rendered prompts (the bench
//! workload's chat-4k and chat-32k requests, rendered with a minimal ChatML / Llama 3 format —
//! the exact template rendering is kvtemplate's job; this is only input text). Throughput in
//! bytes of prompt text; `add_special_tokens = false` (the engines' chat path).

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

fn bench(c: &mut Criterion) {
    let load = |m: &str| {
        FastEncoder::from_file(format!("{MODELS}/{m}/tokenizer.json")).expect("tokenizer")
    };
    let qwen = load("Qwen__Qwen2.5-7B-Instruct");
    let llama = load("meta-llama__Llama-3.1-8B-Instruct");
    assert!(qwen.is_fast() && llama.is_fast());
    let chat4k = messages(&workload("chat-4k.json"));
    let chat32k = messages(&workload("chat-32k.json"));

    let mut group = c.benchmark_group("kvtoken");
    let cases = [
        ("qwen25_chat4k", &qwen, chatml(&chat4k)),
        ("llama31_chat4k", &llama, llama3(&chat4k)),
        ("qwen25_chat32k", &qwen, chatml(&chat32k)),
        ("llama31_chat32k", &llama, llama3(&chat32k)),
    ];
    for (name, enc, text) in &cases {
        let mut out = Vec::new();
        enc.encode_into(text, false, &mut out).expect("encode");
        let stock = enc.stock().encode(text.as_str(), false).expect("encode");
        assert_eq!(out, stock.get_ids(), "{name}: fast != stock");
        eprintln!("{name}: {} bytes, {} tokens", text.len(), out.len());
        group.throughput(Throughput::Bytes(text.len() as u64));
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
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
