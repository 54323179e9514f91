//! Block-hash chains, 4096 tokens each, throughput in bytes of token ids (4 per id) —
//! except `raw_sha256_vllm_bytes_4096`, which hashes exactly the 256 messages the vLLM
//! chain feeds to SHA-256 and reports their byte count, so that
//! `vllm_sha256_cbor_4096` / `raw_sha256_vllm_bytes_4096` (both in those bytes) shows the
//! cost of serializing on top of SHA-256. `raw_sha256_vllm_bytes_4096_chained` hashes the
//! same messages one after the other with a data dependency, as a chain must.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kvexact_benches::pseudo_random_ids;
use kvhash::sglang::SglangHasher;
use kvhash::trtllm::TrtllmHasher;
use kvhash::vllm::{HashAlgo, VllmHasher};
use sha2::{Digest as _, Sha256};

const N: usize = 4096;

fn bench(c: &mut Criterion) {
    let ids = pseudo_random_ids(N, 152_000, 0x5eed);
    let vllm = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).expect("hasher");
    let sglang = SglangHasher::new(16).expect("hasher");
    let trtllm = TrtllmHasher::new(32).expect("hasher");

    // The exact SHA-256 inputs of the vLLM chain, with the real parent digests.
    let mut chain = vllm.chain();
    let mut messages = Vec::with_capacity(N / 16);
    for block in ids.chunks_exact(16) {
        messages.push(chain.serialize_next(block).expect("serialize"));
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
                let dep = usize::from(black_box(prev)) & 0;
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
