//! The verifier's pipelined path for events of plain blocks (`digest_wire_chain`, then each
//! block judged): every block of a clean chain matches, including each event's last block
//! (whose ids end the token array); a block whose published hash was changed mid-event is
//! the one named as evidence, with its own token ids and the hash re-derived for it, and the
//! blocks after it in the event are unverifiable (their parent did not match) rather than
//! matched on a digest computed ahead. Ids of every msgpack width, including wider-than-
//! shortest forms (which leave the transcoding path), at several block sizes.

use kvhash::events::{decode_payload_schema, Limits};
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvprobe::contract;
use kvprobe::drift::{DriftConfig, DriftPolicy, Verifier};
use kvprobe::Engine;

/// msgpack writer: shortest forms, or `wide` uint32 for every id (still valid msgpack).
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
    fn id(&mut self, v: u64, wide: bool) {
        if wide {
            self.0.push(0xce);
            self.0.extend((v as u32).to_be_bytes());
        } else {
            self.uint(v);
        }
    }
    fn str(&mut self, s: &str) {
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
}

/// One vLLM 0.31 `BlockStored` batch: events of `per_event` blocks, chained on each other.
/// The token ids are the last field of each event, so they end where the event ends.
fn payload(ids: &[u32], hashes: &[u64], bs: usize, per_event: usize, wide: bool) -> Vec<u8> {
    let mut e = Enc(Vec::new());
    e.array(3);
    e.0.push(0xcb);
    e.0.extend(1_767_225_600.5f64.to_be_bytes());
    let events = hashes.len().div_ceil(per_event);
    e.array(events);
    for (i, hs) in hashes.chunks(per_event).enumerate() {
        e.0.push(0x80 | 11);
        e.str("type");
        e.str("BlockStored");
        e.str("block_hashes");
        e.array(hs.len());
        hs.iter().for_each(|h| e.uint(*h));
        e.str("parent_block_hash");
        match i.checked_sub(1) {
            Some(p) => e.uint(hashes[p * per_event + per_event - 1]),
            None => e.0.push(0xc0),
        }
        e.str("block_size");
        e.uint(bs as u64);
        e.str("extra_keys");
        e.array(hs.len());
        hs.iter().for_each(|_| e.0.push(0xc0));
        e.str("lora_id");
        e.0.push(0xc0);
        e.str("medium");
        e.str("GPU");
        e.str("lora_name");
        e.0.push(0xc0);
        e.str("group_idx");
        e.uint(0);
        e.str("kv_cache_spec_kind");
        e.str("full_attention");
        e.str("token_ids");
        let first = i * per_event * bs;
        let toks = &ids[first..first + hs.len() * bs];
        e.array(toks.len());
        toks.iter().for_each(|t| e.id(u64::from(*t), wide));
    }
    e.uint(0);
    e.0
}

fn ids(n: usize, seed: u64) -> Vec<u32> {
    // Every msgpack width: fixints (both sides of 24), uint8, uint16, uint32.
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 33) as u32;
            match r % 5 {
                0 => r % 128,
                1 => 128 + r % 128,
                2 => 256 + r % 65_000,
                _ => 65_536 + r % 100_000,
            }
        })
        .collect()
}

fn verifier(bs: usize, mismatches: u32) -> Verifier {
    let c = contract::resolve(Engine::Vllm, "0.31.0").expect("contract");
    let mut cfg = DriftConfig::new(bs);
    cfg.policy = DriftPolicy {
        mismatches,
        window_blocks: 4096,
    };
    Verifier::new(&c, cfg).expect("verifier")
}

fn feed(v: &mut Verifier, bytes: &[u8]) {
    let c = contract::resolve(Engine::Vllm, "0.31.0").expect("contract");
    let batch = decode_payload_schema(c.events().expect("events"), bytes, &Limits::default())
        .expect("decode");
    v.feed(&batch);
}

#[test]
fn clean_chains_match_every_block_at_every_block_size_and_width() {
    for bs in [1usize, 2, 15, 16, 17, 64, 65] {
        for per_event in [1usize, 3, 10] {
            for wide in [false, true] {
                let blocks = 20;
                let ids = ids(blocks * bs, bs as u64 * 31 + per_event as u64);
                let h = VllmHasher::new(HashAlgo::Sha256Cbor, bs, Some("0")).expect("hasher");
                let mut hashes = vec![0u64; blocks];
                h.block_hashes_u64(&ids, &mut hashes).expect("hash");
                let mut v = verifier(bs, 1);
                feed(&mut v, &payload(&ids, &hashes, bs, per_event, wide));
                let k = v.counters();
                assert_eq!(
                    (k.blocks_seen, k.matched, k.mismatched, k.unverifiable),
                    (blocks as u64, blocks as u64, 0, 0),
                    "bs {bs}, {per_event} per event, wide {wide}: {k:?}"
                );
                assert!(v.verdict().is_none());
            }
        }
    }
}

#[test]
fn a_changed_hash_mid_event_is_named_with_its_tokens_and_its_successors_are_its_consequences() {
    let (bs, blocks, per_event) = (16usize, 30usize, 10usize);
    let ids = ids(blocks * bs, 7);
    let h = VllmHasher::new(HashAlgo::Sha256Cbor, bs, Some("0")).expect("hasher");
    let mut hashes = vec![0u64; blocks];
    h.block_hashes_u64(&ids, &mut hashes).expect("hash");
    for bad in [0usize, 5, 9, 10, 19, 25] {
        for wide in [false, true] {
            let mut published = hashes.clone();
            published[bad] ^= 0x1;
            let mut v = verifier(bs, 1);
            feed(&mut v, &payload(&ids, &published, bs, per_event, wide));
            let k = v.counters();
            // Every later block descends from the changed one (within its event, and later
            // events through the event's last block), so none is matched on a digest
            // computed ahead of the mismatch.
            assert_eq!(k.matched, bad as u64, "bad {bad}: {k:?}");
            assert_eq!(k.mismatched, 1, "bad {bad}: {k:?}");
            assert_eq!(k.blocks_seen, blocks as u64);
            // … and is the mismatch's consequence, not an unknown (docs/contracts/drift.md §1).
            assert_eq!(
                k.consequences,
                (blocks - bad - 1) as u64,
                "bad {bad}: {k:?}"
            );
            assert_eq!(k.unverifiable, 0, "bad {bad}: {k:?}");
            let e = v.verdict().expect("drift");
            assert_eq!(
                (e.event_index, e.block_index),
                (bad / per_event, bad % per_event)
            );
            let want: Vec<u64> = ids[bad * bs..(bad + 1) * bs]
                .iter()
                .map(|t| u64::from(*t))
                .collect();
            assert_eq!(e.tokens, want, "bad {bad}: the block's own ids");
            assert_eq!(e.published, published[bad]);
            assert_eq!(e.expected, Some(hashes[bad]), "the hash re-derived for it");
        }
    }
}
