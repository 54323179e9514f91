//! The combined hot path: [`Pipeline`] gives exactly encoder ids + hasher hashes, with or
//! without the segment and prefix caches, one by one or batched.

use std::sync::Arc;

use kvhash::prefix_cache::PrefixCache;
use kvhash::sglang::SglangHasher;
use kvhash::trtllm::TrtllmHasher;
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;
use kvprobe::pipeline::{Counts, Pipeline};
use kvtemplate::{spec_from_model_dir, Encoder, Engine, Outcome, Refusal, ScratchBuf};

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/models/Qwen__Qwen2.5-7B-Instruct"
);
const WORKLOAD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../benches/workload");
const NOW: i64 = 1_721_997_296_000;

fn contracts() -> Vec<(Engine, BlockHasher)> {
    vec![
        (
            Engine::Vllm,
            VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))
                .unwrap()
                .into(),
        ),
        (Engine::Sglang, SglangHasher::new(16).unwrap().into()),
        (Engine::Trtllm, TrtllmHasher::new(32).unwrap().into()),
    ]
}

fn encoder(engine: Engine, segment_cache: usize) -> Arc<Encoder> {
    let spec = spec_from_model_dir(std::path::Path::new(MODEL), engine).unwrap();
    let mut enc = Encoder::new(spec).unwrap();
    enc.enable_segment_cache(segment_cache);
    Arc::new(enc)
}

fn turns() -> Vec<Vec<u8>> {
    (1..=40)
        .map(|k| {
            std::fs::read(format!(
                "{WORKLOAD}/agent-40turns-prefixes/turn-{k:02}.json"
            ))
            .unwrap()
        })
        .collect()
}

type Run = Vec<(Vec<u32>, Vec<u64>)>;

fn run(p: &Pipeline, bodies: &[Vec<u8>]) -> Run {
    let mut scratch = ScratchBuf::new();
    let mut ids = vec![0u32; 1 << 16];
    let mut hashes = vec![0u64; 1 << 13];
    bodies
        .iter()
        .map(|b| {
            let c = match p
                .encode_and_hash_chat(b, NOW, &mut ids, &mut hashes, &mut scratch)
                .unwrap()
            {
                Outcome::Done(c) => c,
                Outcome::Refused(r) => panic!("refused: {r:?}"),
            };
            assert!(!c.truncated);
            (ids[..c.ids].to_vec(), hashes[..c.hashes].to_vec())
        })
        .collect()
}

#[test]
fn agent_40_turns_cached_equals_uncached_and_the_slow_path() {
    let bodies = turns();
    for (engine, hasher) in contracts() {
        // Uncached: no segment cache, no prefix cache.
        let plain = Pipeline::new(encoder(engine, 0), hasher.clone());
        // Cached: fresh caches warmed by the earlier turns of this conversation only.
        let cached = Pipeline::new(encoder(engine, 64 << 20), hasher.clone())
            .with_prefix_cache(Arc::new(PrefixCache::new(1 << 16)));
        let a = run(&plain, &bodies);
        let b = run(&cached, &bodies);
        assert_eq!(a, b, "{engine:?}");
        // The slow obvious twin: stock tokenizers on the rendered text, hasher in full.
        let enc = plain.encoder();
        let stock = enc.tokenizer().unwrap().inner().stock();
        let mut scratch = ScratchBuf::new();
        for (k, (body, (ids, hashes))) in bodies.iter().zip(&a).enumerate().step_by(13) {
            assert_eq!(
                enc.render_chat(body, NOW, &mut scratch).unwrap(),
                Outcome::Done(())
            );
            let want = stock
                .encode(scratch.rendered(), false)
                .unwrap()
                .get_ids()
                .to_vec();
            assert_eq!(&want, ids, "{engine:?} turn {}", k + 1);
            let mut full = vec![0u64; want.len()];
            let n = hasher.block_hashes_u64(&want, &mut full).unwrap();
            assert_eq!(&full[..n], hashes.as_slice(), "{engine:?} turn {}", k + 1);
            assert_eq!(n, want.len() / hasher.block_size());
        }
        // The caches serve the later turns. vLLM and TensorRT-LLM encode the chat prompt
        // without special tokens: each turn after the first takes over the previous turn's
        // ids (the prompt cache, which reaches the earlier segments before the segment cache
        // does) and the new segments go through the segment cache. SGLang encodes this
        // model's chat prompt with special tokens on, which the prompt cache does not take:
        // the segment cache finds the earlier segments, as before.
        let tok = cached.encoder().tokenizer().unwrap();
        let seg = tok.segment_cache().unwrap().stats();
        let prompts = tok.prompt_cache().unwrap().stats();
        match engine {
            Engine::Sglang => {
                assert!(seg.hits > 0, "{engine:?} {seg:?}");
                assert_eq!(prompts.hits + prompts.misses, 0, "{engine:?} {prompts:?}");
            }
            _ => {
                assert!(
                    prompts.hits >= bodies.len() as u64 - 1 && prompts.pieces_reused > 0,
                    "{engine:?} {prompts:?}"
                );
                assert!(seg.misses > 0, "{engine:?} {seg:?}");
            }
        }
    }
    let vllm = Pipeline::new(encoder(Engine::Vllm, 1 << 20), contracts()[0].1.clone())
        .with_prefix_cache(Arc::new(PrefixCache::new(1 << 16)));
    run(&vllm, &bodies);
    assert!(vllm.prefix_cache().unwrap().stats().reused > 0);
}

#[test]
fn batch_equals_one_by_one_and_isolates_refusals() {
    let bodies = turns();
    let (engine, hasher) = contracts().remove(0);
    let p = Pipeline::new(encoder(engine, 1 << 20), hasher);
    let one = run(&p, &bodies[..5]);
    let refused = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[]}"#;
    let broken = b"{not json";
    let mut batch: Vec<&[u8]> = bodies[..5].iter().map(Vec::as_slice).collect();
    batch.insert(2, refused);
    batch.insert(4, broken);
    let (mut ids, mut hashes, mut items) = (Vec::new(), Vec::new(), Vec::new());
    let mut scratch = ScratchBuf::new();
    p.encode_and_hash_chat_batch(&batch, NOW, &mut ids, &mut hashes, &mut items, &mut scratch);
    assert_eq!(items.len(), 7);
    assert!(matches!(
        items[2].outcome,
        Ok(Outcome::Refused(Refusal::Tools))
    ));
    assert!(matches!(
        items[4].outcome,
        Ok(Outcome::Refused(Refusal::Unparseable))
    ));
    assert!(items[2].ids.is_empty() && items[4].hashes.is_empty());
    let done: Vec<_> = items
        .iter()
        .filter(|i| matches!(i.outcome, Ok(Outcome::Done(()))))
        .map(|i| {
            (
                ids[i.ids.clone()].to_vec(),
                hashes[i.hashes.clone()].to_vec(),
            )
        })
        .collect();
    assert_eq!(done, one);
}

#[test]
fn caps_truncate_ids_but_hashes_cover_the_prompt() {
    let body = std::fs::read(format!("{WORKLOAD}/chat-short.json")).unwrap();
    let (engine, hasher) = contracts().remove(2);
    let p = Pipeline::new(encoder(engine, 0), hasher);
    let mut scratch = ScratchBuf::new();
    let (mut ids, mut hashes) = ([0u32; 10], [0u64; 2]);
    let got = p
        .encode_and_hash_chat(&body, NOW, &mut ids, &mut hashes, &mut scratch)
        .unwrap();
    assert_eq!(
        got,
        Outcome::Done(Counts {
            ids: 10,
            truncated: true,
            hashes: 2
        })
    );
    // Tokenization stopped once both buffers could be filled: the scratch holds exactly the
    // first two blocks' ids of the full prompt, and the hashes are theirs.
    let full = match p
        .encoder()
        .encode_chat_to_vec(&body, NOW, usize::MAX)
        .unwrap()
    {
        Outcome::Done(r) => r.ids,
        other => panic!("{other:?}"),
    };
    let bs = p.hasher().block_size();
    assert!(full.len() > 4 * bs);
    assert_eq!(scratch.ids(), &full[..2 * bs]);
    assert_eq!(&ids[..], &full[..10]);
    let mut want = [0u64; 2];
    p.hasher().block_hashes_u64(&full, &mut want).unwrap();
    assert_eq!(hashes, want);
}

#[test]
fn completions_twin_matches_the_encoder() {
    let body: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{WORKLOAD}/completions-4k.json")).unwrap())
            .unwrap();
    let prompt = body["prompt"].as_str().unwrap();
    for (engine, hasher) in contracts() {
        let p = Pipeline::new(encoder(engine, 1 << 20), hasher.clone());
        let mut scratch = ScratchBuf::new();
        let (mut ids, mut hashes) = (vec![0u32; 8192], vec![0u64; 1024]);
        for _ in 0..2 {
            let c = match p
                .encode_and_hash_completions(prompt, &mut ids, &mut hashes, &mut scratch)
                .unwrap()
            {
                Outcome::Done(c) => c,
                Outcome::Refused(r) => panic!("{r:?}"),
            };
            let want = p.encoder().engine_completions(prompt).unwrap();
            assert_eq!(&ids[..c.ids], want.as_slice(), "{engine:?}");
            let mut h = vec![0u64; 1024];
            let n = hasher.block_hashes_u64(&want, &mut h).unwrap();
            assert_eq!(&hashes[..c.hashes], &h[..n], "{engine:?}");
        }
        assert!(matches!(
            p.encode_and_hash_completions("a\0b", &mut ids, &mut hashes, &mut scratch),
            Ok(Outcome::Refused(Refusal::NulByte))
        ));
        assert!(p
            .encode_and_hash_completions("", &mut ids, &mut hashes, &mut scratch)
            .is_err());
    }
}

#[test]
fn pipeline_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Pipeline>();
}
