//! The gateway's whole hot path: raw OpenAI body → parse, refusal scan, render,
//! tokenize, block hashes — through `kvprobe::pipeline::Pipeline` — per engine contract
//! (vLLM sha256_cbor block 16, SGLang page 16, TensorRT-LLM 32 tokens per block), over the
//! shared workload, with two baselines of the same rendered text in the same group: HF
//! `tokenizers` encoding it alone (`stock_encode`) and kvtoken encoding it alone
//! (`kvtoken_encode`). Model: Qwen2.5-7B-Instruct (template from its tokenizer_config.json).
//!
//! "Cold" pipelines have no segment or prefix cache (kvtoken's per-thread word cache, which
//! is always on, stays warm across iterations, as in a running gateway).
//!
//! `agent40_uncached` vs `agent40_cached`: the 40 requests of
//! `agent-40turns-prefixes/` in order, one iteration = one conversation. Cached: a fresh
//! segment cache and a fresh prefix cache at the start of each iteration, so only the
//! earlier turns of the same conversation warm them. (kvprobe/tests/pipeline.rs asserts
//! that ids and hashes are identical cached vs uncached.)

use std::path::Path;
use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use kvhash::prefix_cache::PrefixCache;
use kvhash::sglang::SglangHasher;
use kvhash::trtllm::TrtllmHasher;
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;
use kvprobe::pipeline::Pipeline;
use kvtemplate::{spec_from_model_dir, Encoder, Engine, Outcome, ScratchBuf};

const MODEL: &str = "Qwen__Qwen2.5-7B-Instruct";
const NOW: i64 = 1_721_997_296_000;
const SEGMENT_CACHE_BYTES: usize = 64 << 20;
const PREFIX_CACHE_BLOCKS: usize = 1 << 16;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(root().join("workload").join(rel)).expect("workload")
}

struct Contract {
    name: &'static str,
    cold: Pipeline,
    cached_encoder: Arc<Encoder>,
}

fn contracts() -> Vec<Contract> {
    let dir = root().join("../testdata/models").join(MODEL);
    let list: [(&str, Engine, BlockHasher); 3] = [
        (
            "vllm",
            Engine::Vllm,
            VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))
                .expect("hasher")
                .into(),
        ),
        (
            "sglang",
            Engine::Sglang,
            SglangHasher::new(16).expect("hasher").into(),
        ),
        (
            "trtllm",
            Engine::Trtllm,
            TrtllmHasher::new(32).expect("hasher").into(),
        ),
    ];
    list.into_iter()
        .map(|(name, engine, hasher)| {
            let spec = spec_from_model_dir(&dir, engine).expect("model dir");
            let cold = Arc::new(Encoder::new(spec.clone()).expect("encoder"));
            let mut cached = Encoder::new(spec).expect("encoder");
            cached.enable_segment_cache(SEGMENT_CACHE_BYTES);
            Contract {
                name,
                cold: Pipeline::new(cold, hasher),
                cached_encoder: Arc::new(cached),
            }
        })
        .collect()
}

struct Bufs {
    ids: Vec<u32>,
    hashes: Vec<u64>,
    scratch: ScratchBuf,
}

impl Bufs {
    fn new() -> Self {
        Bufs {
            ids: vec![0; 1 << 16],
            hashes: vec![0; 1 << 13],
            scratch: ScratchBuf::new(),
        }
    }

    fn chat(&mut self, p: &Pipeline, body: &[u8]) -> usize {
        match p
            .encode_and_hash_chat(
                body,
                NOW,
                &mut self.ids,
                &mut self.hashes,
                &mut self.scratch,
            )
            .expect("pipeline")
        {
            Outcome::Done(c) => c.hashes,
            Outcome::Refused(r) => panic!("refused: {r:?}"),
        }
    }
}

fn bench(c: &mut Criterion) {
    let contracts = contracts();
    let first = &contracts[0].cold;
    let fast = first.encoder().tokenizer().expect("tokenizer").inner();
    assert!(fast.is_fast(), "{:?}", fast.path());
    let stock = fast.stock();
    let mut bufs = Bufs::new();
    let mut kv_ids = Vec::new();

    let mut g = c.benchmark_group("e2e");
    g.sample_size(10);
    for name in ["chat-short", "chat-4k", "chat-32k"] {
        let body = read(&format!("{name}.json"));
        let mut scratch = ScratchBuf::new();
        first
            .encoder()
            .render_chat(&body, NOW, &mut scratch)
            .expect("render");
        let rendered = scratch.rendered().to_string();
        for k in &contracts {
            g.bench_function(format!("{name}/{}/pipeline", k.name), |b| {
                b.iter(|| bufs.chat(&k.cold, black_box(&body)))
            });
        }
        // What bounds the pipeline beyond tokenizing: parse, refusal scan and render alone.
        g.bench_function(format!("{name}/render_only"), |b| {
            b.iter(|| {
                first
                    .encoder()
                    .render_chat(black_box(&body), NOW, &mut scratch)
                    .expect("render")
            })
        });
        g.bench_function(format!("{name}/stock_encode"), |b| {
            b.iter(|| {
                stock
                    .encode_fast(black_box(rendered.as_str()), false)
                    .expect("ids")
                    .get_ids()
                    .len()
            })
        });
        g.bench_function(format!("{name}/kvtoken_encode"), |b| {
            b.iter(|| {
                fast.encode_into(black_box(&rendered), false, &mut kv_ids)
                    .expect("ids");
                kv_ids.len()
            })
        });
    }

    let body: serde_json::Value =
        serde_json::from_slice(&read("completions-4k.json")).expect("json");
    let prompt = body["prompt"].as_str().expect("prompt").to_string();
    for k in &contracts {
        g.bench_function(format!("completions-4k/{}/pipeline", k.name), |b| {
            b.iter(|| {
                match k
                    .cold
                    .encode_and_hash_completions(
                        black_box(&prompt),
                        &mut bufs.ids,
                        &mut bufs.hashes,
                        &mut bufs.scratch,
                    )
                    .expect("pipeline")
                {
                    Outcome::Done(c) => c.hashes,
                    Outcome::Refused(r) => panic!("refused: {r:?}"),
                }
            })
        });
    }
    g.bench_function("completions-4k/stock_encode", |b| {
        b.iter(|| {
            stock
                .encode_fast(black_box(prompt.as_str()), true)
                .expect("ids")
                .get_ids()
                .len()
        })
    });
    g.bench_function("completions-4k/kvtoken_encode", |b| {
        b.iter(|| {
            fast.encode_into(black_box(&prompt), true, &mut kv_ids)
                .expect("ids");
            kv_ids.len()
        })
    });

    let turns: Vec<Vec<u8>> = (1..=40)
        .map(|t| read(&format!("agent-40turns-prefixes/turn-{t:02}.json")))
        .collect();
    let rendered: Vec<String> = turns
        .iter()
        .map(|body| {
            let mut scratch = ScratchBuf::new();
            first
                .encoder()
                .render_chat(body, NOW, &mut scratch)
                .expect("render");
            scratch.rendered().to_string()
        })
        .collect();
    for k in &contracts {
        g.bench_function(format!("agent40_uncached/{}", k.name), |b| {
            b.iter(|| {
                turns
                    .iter()
                    .map(|t| bufs.chat(&k.cold, black_box(t)))
                    .sum::<usize>()
            })
        });
        g.bench_function(format!("agent40_cached/{}", k.name), |b| {
            b.iter(|| {
                // Fresh caches per conversation: only earlier turns warm them.
                if let Ok(t) = k.cached_encoder.tokenizer() {
                    if let Some(seg) = t.segment_cache() {
                        seg.clear();
                    }
                    if let Some(prompts) = t.prompt_cache() {
                        prompts.clear();
                    }
                }
                let p = Pipeline::new(k.cached_encoder.clone(), k.cold.hasher().clone())
                    .with_prefix_cache(Arc::new(PrefixCache::new(PREFIX_CACHE_BLOCKS)));
                turns
                    .iter()
                    .map(|t| bufs.chat(&p, black_box(t)))
                    .sum::<usize>()
            })
        });
    }
    let mut scratch = ScratchBuf::new();
    g.bench_function("agent40/render_only", |b| {
        b.iter(|| {
            for t in &turns {
                let _ = first
                    .encoder()
                    .render_chat(black_box(t), NOW, &mut scratch)
                    .expect("render");
            }
        })
    });
    g.bench_function("agent40/stock_encode", |b| {
        b.iter(|| {
            rendered
                .iter()
                .map(|r| {
                    stock
                        .encode_fast(black_box(r.as_str()), false)
                        .expect("ids")
                        .get_ids()
                        .len()
                })
                .sum::<usize>()
        })
    });
    g.bench_function("agent40/kvtoken_encode", |b| {
        b.iter(|| {
            rendered
                .iter()
                .map(|r| {
                    fast.encode_into(black_box(r), false, &mut kv_ids)
                        .expect("ids");
                    kv_ids.len()
                })
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
