//! [`PrefixCache`] against the uncached chain: same hashes for random conversations,
//! configurations, capacities (eviction pressure) and threads; and only new blocks hashed.

use kvhash::prefix_cache::PrefixCache;
use kvhash::sglang::SglangHasher;
use kvhash::vllm::{HashAlgo, LoraKey, MmFeature, VllmExtras, VllmHasher};
use kvhash::{BlockHasher, Digest};
use proptest::prelude::*;
use std::sync::Arc;

fn uncached(h: &BlockHasher, ids: &[u32], cap: usize) -> (usize, Vec<u64>) {
    let mut out = vec![0u64; cap];
    let n = h.block_hashes_u64(ids, &mut out).unwrap();
    (n, out)
}

fn cached(c: &PrefixCache, h: &BlockHasher, ids: &[u32], cap: usize) -> (usize, Vec<u64>) {
    let mut out = vec![0u64; cap];
    let n = c.block_hashes_u64(h, ids, &mut out).unwrap();
    (n, out)
}

/// A hasher from a small configuration space, so that configurations collide often.
fn hasher(cfg: (u8, u8, u8, u8)) -> BlockHasher {
    let (algo, bs, seed, extra) = cfg;
    let algo = HashAlgo::ALL[usize::from(algo % 4)];
    let bs = [1usize, 2, 4, 16, 24][usize::from(bs % 5)];
    let seed = ["0", "1"][usize::from(seed % 2)];
    if extra % 5 == 4 {
        return SglangHasher::new(bs).unwrap().into();
    }
    let extras = match extra % 5 {
        0 => VllmExtras::default(),
        1 => VllmExtras {
            cache_salt: Some("s".into()),
            ..Default::default()
        },
        2 => VllmExtras {
            lora: Some(LoraKey {
                name: "a".into(),
                path: "/a".into(),
            }),
            ..Default::default()
        },
        _ => VllmExtras {
            mm_features: vec![MmFeature {
                identifier: "img".into(),
                offset: 3,
                length: 5,
            }],
            ..Default::default()
        },
    };
    VllmHasher::new(algo, bs, Some(seed))
        .unwrap()
        .with_extras(extras)
        .unwrap()
        .into()
}

/// Conversations: each request is a random earlier request's ids (or nothing), cut at a
/// random point, extended by random ids; ids from a tiny alphabet so blocks repeat.
/// One request of a generated conversation: (which earlier request it starts from, where
/// that one is cut, the ids appended, the configuration).
type Step = (usize, usize, Vec<u32>, (u8, u8, u8, u8));

fn conversation() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (
            any::<usize>(),
            any::<usize>(),
            proptest::collection::vec(0u32..4, 0..40),
            (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
        ),
        1..25,
    )
}

fn requests(conv: &[Step]) -> Vec<(Vec<u32>, BlockHasher)> {
    let mut reqs: Vec<(Vec<u32>, BlockHasher)> = Vec::new();
    for (from, cut, tail, cfg) in conv {
        let mut ids = if reqs.is_empty() {
            Vec::new()
        } else {
            let base = &reqs[from % reqs.len()].0;
            base[..cut % (base.len() + 1)].to_vec()
        };
        ids.extend(tail);
        reqs.push((ids, hasher(*cfg)));
    }
    reqs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn cached_equals_uncached(
        conv in conversation(),
        capacity in prop_oneof![Just(0usize), 1usize..40, Just(100_000)],
        out_len in prop_oneof![Just(usize::MAX), 0usize..30],
    ) {
        let cache = PrefixCache::new(capacity);
        for (ids, h) in requests(&conv) {
            let cap = out_len.min(ids.len() + 1);
            prop_assert_eq!(cached(&cache, &h, &ids, cap), uncached(&h, &ids, cap));
        }
        prop_assert!(cache.len() <= cache.capacity());
    }

    #[test]
    fn cached_full_digests_equal_uncached(conv in conversation(), capacity in 1usize..60) {
        let cache = PrefixCache::new(capacity);
        for (ids, h) in requests(&conv) {
            let BlockHasher::Vllm(v) = h else { continue };
            let mut a = vec![Digest::sha256([0; 32]); ids.len() + 1];
            let mut b = a.clone();
            let na = cache.vllm_block_hashes(&v, &ids, &mut a).unwrap();
            let nb = v.block_hashes(&ids, &mut b).unwrap();
            prop_assert_eq!((na, &a), (nb, &b));
        }
    }
}

#[test]
fn concurrent_threads_agree_with_uncached() {
    let cache = Arc::new(PrefixCache::new(64));
    let hashers: Vec<BlockHasher> = (0..4u8).map(|i| hasher((i, 3, i, i % 4))).collect();
    let hashers = Arc::new(hashers);
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let cache = Arc::clone(&cache);
            let hashers = Arc::clone(&hashers);
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for turn in 0..60u32 {
                    ids.extend((0..37).map(|i| (i * 7 + turn * 13 + t) % 5));
                    let h = &hashers[(turn as usize + t as usize) % hashers.len()];
                    assert_eq!(
                        cached(&cache, h, &ids, ids.len()),
                        uncached(h, &ids, ids.len())
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(cache.len() <= cache.capacity());
    assert!(cache.stats().evicted > 0);
}

/// The agent-40turns pattern: every turn extends the previous one, so each turn hashes
/// exactly its new full blocks and reuses all the others.
#[test]
fn growing_conversation_hashes_only_new_blocks() {
    const TURNS: [usize; 8] = [244, 625, 983, 1251, 1481, 1641, 1944, 2296];
    let h: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))
        .unwrap()
        .into();
    let ids: Vec<u32> = (0..TURNS[7] as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) % 152_000)
        .collect();
    let cache = PrefixCache::new(1 << 16);
    let mut prev_blocks = 0u64;
    for len in TURNS {
        let before = cache.stats();
        let got = cached(&cache, &h, &ids[..len], len / 16);
        assert_eq!(got, uncached(&h, &ids[..len], len / 16));
        let after = cache.stats();
        let blocks = (len / 16) as u64;
        assert_eq!(
            after.hashed - before.hashed,
            blocks - prev_blocks,
            "turn of {len}"
        );
        assert_eq!(after.reused - before.reused, prev_blocks, "turn of {len}");
        prev_blocks = blocks;
    }
    // Same conversation, another configuration: nothing is shared.
    let other: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("1"))
        .unwrap()
        .into();
    let before = cache.stats();
    cached(&cache, &other, &ids, 1000);
    assert_eq!(cache.stats().reused, before.reused);
}

/// Configurations that differ only in extra keys never share entries, even with the same
/// NONE_HASH, tokens and block size.
#[test]
fn configs_differing_in_extras_do_not_share() {
    let ids: Vec<u32> = (0..64).collect();
    let cache = PrefixCache::new(1000);
    for extra in 0..4u8 {
        let h = hasher((0, 3, 0, extra));
        assert_eq!(cached(&cache, &h, &ids, 8), uncached(&h, &ids, 8));
    }
    assert_eq!(cache.stats().reused, 0);
}

/// `clear` drops every entry and memo but keeps the counters; `bytes_held` follows what is
/// held and stays within its documented bound.
#[test]
fn clear_and_bytes_held() {
    let h: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))
        .unwrap()
        .into();
    let cache = PrefixCache::new(4096);
    assert_eq!(cache.bytes_held(), 0);
    let ids: Vec<u32> = (0..16 * 300).map(|i| i % 1000).collect();
    assert_eq!(cached(&cache, &h, &ids, 300), uncached(&h, &ids, 300));
    let held = cache.bytes_held();
    assert!(held >= 300 * (PrefixCache::ENTRY_BYTES / 2), "{held}");
    assert!(
        held <= cache.capacity() * (2 * PrefixCache::ENTRY_BYTES + 4 * 16 + 48),
        "{held}"
    );
    // A second pass takes every block from the memo.
    let before = cache.stats();
    assert_eq!(cached(&cache, &h, &ids, 300), uncached(&h, &ids, 300));
    assert_eq!(cache.stats().reused - before.reused, 300);
    let stats = cache.stats();
    cache.clear();
    assert!(cache.is_empty());
    assert_eq!(cache.bytes_held(), 0);
    assert_eq!(cache.stats(), stats);
    // After a clear everything is hashed again, with the same results.
    assert_eq!(cached(&cache, &h, &ids, 300), uncached(&h, &ids, 300));
    assert_eq!(cache.stats().hashed - stats.hashed, 300);
}

/// Many unrelated conversations, each growing over several turns, interleaved: memos are
/// spread over shards and bounded, and every answer is the uncached one.
#[test]
fn interleaved_conversations_stay_exact_and_bounded() {
    let h: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))
        .unwrap()
        .into();
    let cache = PrefixCache::new(2000);
    let convs: Vec<Vec<u32>> = (0..200u32)
        .map(|c| {
            (0..16 * 20)
                .map(|i| (i * 31 + c * 7919) % 150_000)
                .collect()
        })
        .collect();
    for turn in 1..=5usize {
        for ids in &convs {
            let part = &ids[..16 * 4 * turn];
            assert_eq!(cached(&cache, &h, part, 100), uncached(&h, part, 100));
        }
    }
    assert!(cache.len() <= cache.capacity());
    assert!(cache.stats().reused > 0);
}
