//! Verifying a correct engine's stream allocates nothing per block: a counting global
//! allocator around `Verifier::feed` over already-decoded batches, for each engine (vLLM with
//! plain and LoRA blocks under a tagged release, SGLang, TensorRT-LLM), after a warm-up that
//! sizes the reused buffers.

use kvexact_conformance::emulator::{EventWriter, Faults, Published, WriterConfig};
use kvhash::events::{self, EventBatch, Limits};
use kvprobe::contract::{self, Contract};
use kvprobe::drift::{DriftConfig, PredictionConfig, Verifier};
use kvprobe::Engine;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

/// The bytes of `n` completions (prompts of 3–8 blocks on 8 shared prefixes).
fn publications(c: &Contract, bs: usize, n: usize) -> Vec<(Vec<u8>, bool)> {
    let lora = ("sql-lora".to_string(), "/adapters/sql-lora".to_string());
    let mut w = EventWriter::new(WriterConfig {
        engine: c.engine(),
        contract: c.clone(),
        block_size: bs,
        hash_seed: Some("0".into()),
        lora: (c.engine() == Engine::Vllm).then(|| lora.clone()),
        faults: Faults::default(),
        prefix_cache: Some(1 << 16),
        group_blocks: 1,
        keying: None,
    })
    .unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let prefixes: Vec<Vec<u32>> = (0..8)
        .map(|_| (0..2 * bs).map(|_| (next() % 150_000) as u32).collect())
        .collect();
    let mut out = Vec::new();
    for i in 0..n {
        let mut ids = prefixes[i % prefixes.len()].clone();
        let blocks = 1 + (next() % 6) as usize;
        ids.extend((0..blocks * bs + 5).map(|_| (next() % 150_000) as u32));
        let lora = (c.engine() == Engine::Vllm && i % 3 == 0).then_some("sql-lora");
        match w.completion(&ids, lora) {
            Published::Msgpack(p) => out.push((p, false)),
            Published::Json(e) => out.push((serde_json::to_vec(&e).unwrap(), true)),
            Published::Nothing => {}
        }
    }
    out
}

fn decode<'a>(c: &Contract, p: &'a [u8], json: bool) -> EventBatch<'a> {
    if json {
        events::decode_json(c.event_format().unwrap(), p).unwrap()
    } else {
        events::decode_payload_schema(c.events().unwrap(), p, &Limits::default()).unwrap()
    }
}

#[test]
fn verifying_a_correct_stream_allocates_nothing_per_block() {
    for (engine, version, bs) in [
        (Engine::Vllm, "0.31.0", 16),
        (Engine::Vllm, "0.24.0", 16),
        (Engine::Sglang, "0.5.20", 16),
        (Engine::Trtllm, "1.3.0rc29", 32),
    ] {
        let c = contract::resolve(engine, version).unwrap();
        let pubs = publications(&c, bs, 600);
        let batches: Vec<EventBatch<'_>> = pubs.iter().map(|(p, j)| decode(&c, p, *j)).collect();
        let mut cfg = DriftConfig::new(bs);
        cfg.lora_paths
            .insert("sql-lora".into(), "/adapters/sql-lora".into());
        cfg.predictions = Some(PredictionConfig::default());
        let mut v = Verifier::new(&c, cfg).unwrap();
        let (warm, steady) = batches.split_at(100);
        for b in warm {
            v.feed(b);
        }
        let blocks_before = v.counters().blocks_seen;
        let now = Instant::now();
        let n = allocations(|| {
            for (b, (p, _)) in steady.iter().zip(&pubs[100..]) {
                v.feed_at(b, Some(p), now);
            }
        });
        let k = v.counters();
        let blocks = k.blocks_seen - blocks_before;
        assert!(blocks > 1000, "{engine}: {blocks}");
        assert_eq!(k.mismatched, 0, "{engine}");
        assert_eq!(k.matched, k.blocks_seen, "{engine}: {k:?}");
        assert_eq!(
            n, 0,
            "{engine} {version}: {n} allocations over {blocks} blocks"
        );
        eprintln!("{engine} {version}: {blocks} blocks verified, {n} allocations");
    }
}
