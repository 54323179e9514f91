//! kvtemplate hot path over the shared workload (`benches/workload/`, see its README):
//! per file, the strict chat path split into parse + refusal scan + render and tokenize, the
//! whole `encode_chat`, and — as the baseline in the same group — HF `tokenizers` encoding the
//! same rendered text alone. Throughput is in bytes of the request body. Model: Qwen2.5-7B-
//! Instruct (the model every workload body names), vLLM contract.

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

criterion_group!(benches, bench);
criterion_main!(benches);
