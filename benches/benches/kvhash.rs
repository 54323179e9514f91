//! Block-hash chains, 4096 tokens each, throughput in bytes of token ids (4 per id) —
//! except `raw_sha256_vllm_bytes_4096`, which hashes exactly the 256 messages the vLLM
//! chain feeds to SHA-256 and reports their byte count, so that
//! `vllm_sha256_cbor_4096` / `raw_sha256_vllm_bytes_4096` (both in those bytes) shows the
//! cost of serializing on top of SHA-256. `raw_sha256_vllm_bytes_4096_chained` hashes the
//! same messages one after the other with a data dependency, as a chain must.
//!
//! What bounds `vllm_sha256_cbor_4096` against `raw_sha256_vllm_bytes_4096` (goal ≥ 0.8×,
//! 0.90–0.92× on the Intel Xeon host of 2026-12-07, benches/README.md): the SHA-256
//! compressions (two per 16-id block: ~100 message bytes padded to 128) take as long in the
//! chain as in the raw loop (`perf record`: ~78 % of the chain's time); the rest is writing
//! each block's CBOR (16 ids, the parent, the null, the padding) and the chain's bookkeeping,
//! against the raw loop's own streaming-buffer work. The chain's stores are ordered so that
//! SHA-256's 16-byte message loads, which cannot forward from the narrower stores that wrote
//! the message, wait only for the parent's stores (`PlainSha256Cbor::hash_run`): before that
//! order, every block waited for the retirement of the next block's id writing (0.79×).
//!
//! `vllm_agent40_uncached` / `vllm_agent40_cached`: the 40 requests of a growing agent
//! conversation (request k is a prefix of request k+1; Qwen2.5 per-turn token counts of
//! `agent-40turns-prefixes`, pseudo-random ids), hashed in order without and with a fresh
//! [`kvhash::prefix_cache::PrefixCache`]; throughput in bytes of token ids of all 40.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kvexact_benches::pseudo_random_ids;
use kvhash::prefix_cache::PrefixCache;
use kvhash::sglang::SglangHasher;
use kvhash::trtllm::TrtllmHasher;
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;
use sha2::{Digest as _, Sha256};

const N: usize = 4096;

/// Qwen2.5 prompt tokens of each request of `agent-40turns-prefixes`
/// (shared/bench/workload/README.md).
const AGENT40: [usize; 40] = [
    244, 625, 983, 1251, 1481, 1641, 1944, 2296, 2768, 3160, 3412, 3692, 3903, 4137, 4434, 4733,
    5151, 5546, 5856, 6145, 6282, 6576, 6917, 7222, 7678, 7937, 8319, 8597, 8768, 9071, 9279, 9676,
    10019, 10319, 10689, 10943, 11177, 11439, 11709, 12258,
];

fn bench(c: &mut Criterion) {
    let ids = pseudo_random_ids(N, 152_000, 0x5eed);
    let vllm = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).expect("hasher");
    let sglang = SglangHasher::new(16).expect("hasher");
    let trtllm = TrtllmHasher::new(32).expect("hasher");

    // The exact SHA-256 inputs of the vLLM chain, with the real parent digests.
    let mut chain = vllm.chain();
    let mut messages = Vec::with_capacity(N / 16);
    for block in ids.chunks_exact(16) {
        messages.push(chain.serialize_next(block, &[]).expect("serialize"));
        chain.extend(block, |_| {}).expect("extend");
    }
    let vllm_bytes: usize = messages.iter().map(Vec::len).sum();

    let mut g = c.benchmark_group("kvhash");
    let mut out = vec![0u64; N / 16];

    g.throughput(Throughput::Bytes(vllm_bytes as u64));
    g.bench_function("raw_sha256_vllm_bytes_4096", |b| {
        b.iter(|| {
            let mut acc = 0u8;
            for m in &messages {
                acc ^= Sha256::digest(black_box(m))[31];
            }
            acc
        })
    });
    // The same messages, each waiting for the previous digest as the real chain must
    // (the plain loop above lets the CPU overlap independent SHA-256 computations).
    g.bench_function("raw_sha256_vllm_bytes_4096_chained", |b| {
        b.iter(|| {
            let mut prev = 0u8;
            for i in 0..messages.len() {
                // Always 0 (a u8 shifted by 8), but only known once `prev` is.
                let dep = usize::from(black_box(prev)) >> 8;
                if let Some(m) = messages.get(i + dep) {
                    prev = Sha256::digest(m)[31];
                }
            }
            prev
        })
    });
    g.bench_function("vllm_sha256_cbor_4096", |b| {
        b.iter(|| {
            vllm.block_hashes_u64(black_box(&ids), &mut out)
                .expect("hash")
        })
    });

    // A growing conversation: 40 requests, each a prefix of the next.
    let convo = pseudo_random_ids(AGENT40[39], 152_000, 0xa6e7);
    let block_hasher: BlockHasher = vllm.clone().into();
    let total: usize = AGENT40.iter().sum();
    let mut out40 = vec![0u64; AGENT40[39] / 16];
    g.throughput(Throughput::Bytes((total * 4) as u64));
    g.bench_function("vllm_agent40_uncached", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for len in AGENT40 {
                let n = block_hasher
                    .block_hashes_u64(black_box(&convo[..len]), &mut out40)
                    .expect("hash");
                acc ^= out40[..n].last().copied().unwrap_or(0);
            }
            acc
        })
    });
    g.bench_function("vllm_agent40_cached", |b| {
        b.iter_batched(
            || PrefixCache::new(1 << 16),
            |cache| {
                let mut acc = 0u64;
                for len in AGENT40 {
                    let n = cache
                        .block_hashes_u64(&block_hasher, black_box(&convo[..len]), &mut out40)
                        .expect("hash");
                    acc ^= out40[..n].last().copied().unwrap_or(0);
                }
                (cache, acc)
            },
            BatchSize::SmallInput,
        )
    });

    g.throughput(Throughput::Bytes((N * 4) as u64));
    g.bench_function("sglang_4096", |b| {
        b.iter(|| {
            sglang
                .block_hashes_u64(black_box(&ids), &mut out)
                .expect("hash")
        })
    });
    g.bench_function("trtllm_4096", |b| {
        b.iter(|| {
            trtllm
                .block_hashes_u64(black_box(&ids), &mut out)
                .expect("hash")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
