//! Drift verification: re-deriving 1000 published vLLM blocks (`sha256_cbor`, block size 16,
//! seed "0") from their `BlockStored` events — 100 events of 10 blocks, one chain, each event's
//! parent the previous event's last hash — against hashing the same 1000 blocks with the plain
//! chain (`VllmHasher::block_hashes_u64`), in the same run. Throughput in blocks.
//!
//! * `drift/verify_vllm_1000_blocks`: `Verifier::feed` of the already-decoded batch (the
//!   verifier's steady state: parents found in its map, tokens copied out of the payload,
//!   each block re-hashed, compared and recorded).
//! * `drift/plain_chain_vllm_1000_blocks`: the baseline.
//! * `drift/decode_and_verify_vllm_1000_blocks`: decoding the batch too.
//!
//! Target: verify ≤ 1.3 × plain (measured 1.22–1.25×, see the README). With
//! `KVEXACT_BENCH_MIN_RATIO=1` the bench also prints the ratio of the fastest of 2000 runs of
//! each (robust on a busy machine).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kvexact_benches::pseudo_random_ids;
use kvhash::events::{decode_payload_schema, Limits};
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvprobe::contract;
use kvprobe::drift::{DriftConfig, Verifier};
use kvprobe::Engine;

const BLOCKS: usize = 1000;
const PER_EVENT: usize = 10;
const BS: usize = 16;

/// Smallest-width msgpack (msgspec's choices), just what a vLLM map event needs.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn uint(&mut self, v: u64) {
        match v {
            0..=0x7f => self.0.push(v as u8),
            0x80..=0xff => self.0.extend([0xcc, v as u8]),
            0x100..=0xffff => {
                self.0.push(0xcd);
                self.0.extend((v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.0.push(0xce);
                self.0.extend((v as u32).to_be_bytes());
            }
            _ => {
                self.0.push(0xcf);
                self.0.extend(v.to_be_bytes());
            }
        }
    }
    fn str(&mut self, s: &str) {
        assert!(s.len() < 32);
        self.0.push(0xa0 | s.len() as u8);
        self.0.extend(s.as_bytes());
    }
    fn array(&mut self, n: usize) {
        if n < 16 {
            self.0.push(0x90 | n as u8);
        } else {
            self.0.push(0xdc);
            self.0.extend((n as u16).to_be_bytes());
        }
    }
    fn map(&mut self, n: usize) {
        self.0.push(0x80 | n as u8);
    }
    fn nil(&mut self) {
        self.0.push(0xc0);
    }
}

/// `[ts, [BlockStored × 100], 0]` as vLLM 0.31 writes it.
fn payload(ids: &[u32], hashes: &[u64]) -> Vec<u8> {
    let mut e = Enc::default();
    e.array(3);
    e.0.push(0xcb);
    e.0.extend(1_767_225_600.25f64.to_be_bytes());
    e.array(BLOCKS / PER_EVENT);
    for (i, hs) in hashes.chunks(PER_EVENT).enumerate() {
        e.map(11);
        e.str("type");
        e.str("BlockStored");
        e.str("block_hashes");
        e.array(hs.len());
        hs.iter().for_each(|h| e.uint(*h));
        e.str("parent_block_hash");
        match i.checked_sub(1) {
            Some(p) => e.uint(hashes[p * PER_EVENT + PER_EVENT - 1]),
            None => e.nil(),
        }
        e.str("token_ids");
        let toks = &ids[i * PER_EVENT * BS..(i + 1) * PER_EVENT * BS];
        e.array(toks.len());
        toks.iter().for_each(|t| e.uint(u64::from(*t)));
        e.str("block_size");
        e.uint(BS as u64);
        e.str("lora_id");
        e.nil();
        e.str("medium");
        e.str("GPU");
        e.str("lora_name");
        e.nil();
        e.str("extra_keys");
        e.array(hs.len());
        hs.iter().for_each(|_| e.nil());
        e.str("group_idx");
        e.uint(0);
        e.str("kv_cache_spec_kind");
        e.str("full_attention");
    }
    e.uint(0);
    e.0
}

fn bench(c: &mut Criterion) {
    let ids = pseudo_random_ids(BLOCKS * BS, 152_000, 0xd41f7);
    let vllm = VllmHasher::new(HashAlgo::Sha256Cbor, BS, Some("0")).expect("hasher");
    let mut hashes = vec![0u64; BLOCKS];
    assert_eq!(
        vllm.block_hashes_u64(&ids, &mut hashes).expect("hash"),
        BLOCKS
    );
    let c31 = contract::resolve(Engine::Vllm, "0.31.0").expect("contract");
    let schema = c31.events().expect("events");
    let bytes = payload(&ids, &hashes);
    let batch = decode_payload_schema(schema, &bytes, &Limits::default()).expect("decode");
    let mut v = Verifier::new(&c31, DriftConfig::new(BS)).expect("verifier");
    v.feed(&batch);
    assert_eq!(v.counters().matched, BLOCKS as u64, "{:?}", v.counters());

    if std::env::var_os("KVEXACT_BENCH_MIN_RATIO").is_some() {
        // On a busy machine: the fastest of 2000 runs of each, three times.
        let mut out = vec![0u64; BLOCKS];
        let fastest = |f: &mut dyn FnMut()| {
            (0..2000)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        };
        for _ in 0..3 {
            let p = fastest(&mut || {
                black_box(
                    vllm.block_hashes_u64(black_box(&ids), &mut out)
                        .expect("hash"),
                );
            });
            let q = fastest(&mut || v.feed(black_box(&batch)));
            eprintln!(
                "fastest: plain {:.1} us, verify {:.1} us, ratio {:.3}",
                p * 1e6,
                q * 1e6,
                q / p
            );
        }
    }
    let mut g = c.benchmark_group("drift");
    g.throughput(Throughput::Elements(BLOCKS as u64));
    let mut out = vec![0u64; BLOCKS];
    g.bench_function("plain_chain_vllm_1000_blocks", |b| {
        b.iter(|| {
            vllm.block_hashes_u64(black_box(&ids), &mut out)
                .expect("hash")
        })
    });
    g.bench_function("verify_vllm_1000_blocks", |b| {
        b.iter(|| {
            v.feed(black_box(&batch));
        })
    });
    g.bench_function("decode_and_verify_vllm_1000_blocks", |b| {
        b.iter(|| {
            let batch = decode_payload_schema(schema, black_box(&bytes), &Limits::default())
                .expect("decode");
            v.feed(&batch);
        })
    });
    g.finish();
    let k = v.counters();
    assert_eq!(k.mismatched, 0);
    assert_eq!(k.matched, k.blocks_seen);
}

criterion_group!(benches, bench);
criterion_main!(benches);
