//! The caches never change an answer: a cache keyed wrongly is a silent zero-hit outage (or,
//! worse, wrong routing keys). Each test builds two tokenizers or hashers that differ in
//! exactly one component of the cache key, makes them share one cache, warms it with the
//! first, and proves that nothing the first stored reaches the second: the second's answers
//! equal its uncached answers (which differ from the first's, so a crossed entry would show),
//! and its first pass finds no entry at all (hits unchanged). Then the second's own entries
//! are found (the cache does work for it), and the first still gets its own answers.
//!
//! * Segment cache (`kvtoken::SegmentCache`, keyed by the parsed tokenizer and the segment
//!   bytes): tokenizer identity (two vocabularies; the same vocabulary with one merge fewer,
//!   where a bytes-only key would hand out wrong ids; the same file parsed twice) and the
//!   added-token set. An encoder's engine contract does not reach a segment's ids (it only
//!   changes what is rendered and the special tokens around segments); encoders of several
//!   contracts on one profile are checked against their uncached twins through the C ABI.
//! * Prefix-chain cache (`kvhash::prefix_cache::PrefixCache`, keyed by the SHA-256 of the
//!   hasher's whole configuration and verified token for token): through the C ABI, hashers
//!   sharing one cache (`share_cache_with`) that differ in algorithm, seed, block size or
//!   engine; through kvhash, the extra keys (LoRA, multimodal item), the cache salt and the
//!   engine release's extra-key form (vLLM 0.17's K1, 0.20's K2, 0.31's K3), which the ABI's
//!   hashers do not take. The release's NONE_HASH rule (A before 0.29, B after) gives the same
//!   chain whenever a seed is set and a refusal (rule A) when it is not, so through the ABI a
//!   0.17.0 hasher is checked to equal the reference, not to differ from it.

use crate::route_common;

use std::ptr::null;

use kvexact::encoder::*;
use kvexact::enums::*;
use kvexact::hasher::*;
use kvexact::refusal::*;
use kvhash::prefix_cache::PrefixCache;
use kvhash::vllm::{HashAlgo, LoraKey, MmFeature, VllmExtras, VllmHasher};
use kvhash::BlockHasher;
use kvtoken::{FastEncoder, SegmentCache};
use route_common::*;

fn tokenizer_json(model: &str) -> serde_json::Value {
    let p = repo()
        .join("testdata/models")
        .join(model)
        .join("tokenizer.json");
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

fn fast(json: &serde_json::Value) -> FastEncoder {
    let e = FastEncoder::from_bytes(&serde_json::to_vec(json).unwrap()).unwrap();
    assert!(e.is_fast(), "{:?}", e.path());
    e
}

/// Text with several segments of at least 64 bytes between added tokens (Qwen's and
/// Llama 3's), and the made-up added token `<|kvx|>` inside one of them.
fn text() -> String {
    let a = "The quick brown fox jumps over the lazy dog, then writes a longer report. ".repeat(3);
    let b = "Ünïcödé, 你好世界, numbers 12345 and <|kvx|> a made-up token in the middle of text.";
    format!(
        "<|im_start|>system\n{a}<|im_end|>\n<|im_start|>user\n{b}<|im_end|>\n\
         <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{a}{b}<|eot_id|>"
    )
}

/// Runs the separation protocol on two encoders sharing `cache`.
fn segments_do_not_cross(a: &FastEncoder, b: &FastEncoder, what: &str) {
    let cache = SegmentCache::new(1 << 20);
    let t = text();
    let plain_a = a.encode(&t, false).unwrap();
    let plain_b = b.encode(&t, false).unwrap();
    assert_ne!(
        plain_a, plain_b,
        "{what}: the two must disagree for the test to mean anything"
    );
    let mut got = Vec::new();
    a.encode_into_cached(&t, false, &cache, &mut got).unwrap();
    assert_eq!(got, plain_a);
    let warm = cache.stats();
    assert!(warm.misses >= 3, "{what}: {warm:?}");
    a.encode_into_cached(&t, false, &cache, &mut got).unwrap();
    assert_eq!(got, plain_a);
    assert!(cache.stats().hits > warm.hits, "{what}: the cache is used");
    // b: nothing of a's is found; its ids are its own.
    let before = cache.stats();
    b.encode_into_cached(&t, false, &cache, &mut got).unwrap();
    assert_eq!(got, plain_b, "{what}");
    assert_eq!(cache.stats().hits, before.hits, "{what}: an entry crossed");
    b.encode_into_cached(&t, false, &cache, &mut got).unwrap();
    assert_eq!(got, plain_b, "{what}");
    assert!(
        cache.stats().hits > before.hits,
        "{what}: b's own entries are found"
    );
    a.encode_into_cached(&t, false, &cache, &mut got).unwrap();
    assert_eq!(got, plain_a, "{what}");
}

#[test]
fn segment_cache_keys_separate_tokenizers() {
    let qwen = tokenizer_json("Qwen__Qwen2.5-7B-Instruct");
    let llama = tokenizer_json("meta-llama__Llama-3.1-8B-Instruct");
    segments_do_not_cross(&fast(&qwen), &fast(&llama), "two vocabularies");

    // The same vocabulary and added tokens, one merge fewer (the one that makes " quick"):
    // the same segment bytes give other ids, so only the tokenizer's identity tells the
    // entries apart.
    let mut fewer = qwen.clone();
    let merges = fewer["model"]["merges"].as_array_mut().unwrap();
    let joined = |m: &serde_json::Value| match m {
        serde_json::Value::String(s) => s.replace(' ', ""),
        serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
        _ => String::new(),
    };
    let before = merges.len();
    merges.retain(|m| joined(m) != "\u{120}quick");
    assert_eq!(merges.len(), before - 1, "the merge of \" quick\"");
    let a = fast(&qwen);
    segments_do_not_cross(&a, &fast(&fewer), "one merge fewer");

    // The same file parsed twice: two tokenizers as far as the cache knows (no sharing, and
    // no crossing either; ids equal, so only the hit counts can show a crossing).
    let cache = SegmentCache::new(1 << 20);
    let (x, y) = (fast(&qwen), fast(&qwen));
    let t = text();
    let mut got = Vec::new();
    x.encode_into_cached(&t, false, &cache, &mut got).unwrap();
    let before = cache.stats();
    y.encode_into_cached(&t, false, &cache, &mut got).unwrap();
    assert_eq!(got, x.encode(&t, false).unwrap());
    assert_eq!(cache.stats().hits, before.hits);
}

#[test]
fn segment_cache_keys_separate_added_token_sets() {
    let qwen = tokenizer_json("Qwen__Qwen2.5-7B-Instruct");
    let mut more = qwen.clone();
    let next = more["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .max()
        .unwrap()
        + 1;
    more["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "id": next, "content": "<|kvx|>", "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true
        }));
    segments_do_not_cross(&fast(&qwen), &fast(&more), "one added token more");
}

/// Encoders of one profile on several contracts (strict vLLM, SGLang, TensorRT-LLM, and
/// vLLM 0.31.0 lifting tools), each with its segment cache, give their uncached twins'
/// routing keys on a growing conversation.
#[test]
fn encoders_per_contract_match_their_uncached_twins() {
    let h = hasher(
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        &hasher_options(None, null()),
    );
    let long = "A long enough message to be cached as a segment, repeated. ".repeat(4);
    let mut msgs: Vec<(&str, String)> = vec![("user", long.clone())];
    for (contract, version, lifted) in [
        ("vllm-kv-map-v2", None, 0),
        ("sglang-kv-rank-v1", None, 0),
        ("trtllm-kv-http-v1", None, 0),
        ("vllm-kv-map-v3", Some("0.31.0"), KVEXACT_REFUSAL_BIT_TOOLS),
    ] {
        let on = encoder(
            QWEN3,
            contract,
            &EncOpts {
                version,
                lifted,
                cache: Some(0),
            },
        );
        let off = encoder(
            QWEN3,
            contract,
            &EncOpts {
                version,
                lifted,
                cache: None,
            },
        );
        assert_eq!(encoder_stats(off).enabled, 0);
        for turn in 0..4 {
            let m: Vec<(&str, &str)> = msgs.iter().map(|(r, c)| (*r, c.as_str())).collect();
            let body = chat_body("Qwen/Qwen3-0.6B", &m, "");
            let want = separate(off, h, &body, 4096, 256);
            assert_eq!(want.status, 0, "{contract}");
            assert_eq!(
                route(on, h, &body, 4096, 256),
                want,
                "{contract} turn {turn}"
            );
            msgs.push(("assistant", format!("Reply {turn}: {long}")));
            msgs.push(("user", format!("Question {turn}: {long}")));
        }
        assert!(encoder_stats(on).hits > 0, "{contract}");
        msgs.truncate(1);
        unsafe {
            kvexact_encoder_free(on);
            kvexact_encoder_free(off);
        }
    }
    unsafe { kvexact_hasher_free(h) };
}

fn ids(n: u32) -> Vec<u32> {
    (0..n)
        .map(|i| i.wrapping_mul(2_654_435_761) % 150_000)
        .collect()
}

/// `kvexact_block_hashes_u64` of `ids` (full blocks).
fn hashes(h: *const kvexact_hasher, ids: &[u32]) -> Vec<u64> {
    let mut out = vec![0u64; ids.len()];
    let n = unsafe {
        kvexact_block_hashes_u64(h, ids.as_ptr(), ids.len(), 1, out.as_mut_ptr(), out.len())
    };
    assert!(n >= 0, "status {n}");
    out.truncate(n as usize);
    out
}

/// The separation protocol for two ABI hashers: `b` shares `a`'s cache; `b_ref` is `b`
/// without a cache.
fn chains_do_not_cross(
    a: *const kvexact_hasher,
    a_ref: *const kvexact_hasher,
    b: *const kvexact_hasher,
    b_ref: *const kvexact_hasher,
    what: &str,
    b_cached: bool,
) {
    let turn = ids(16 * 24 + 5);
    let (want_a, want_b) = (hashes(a_ref, &turn), hashes(b_ref, &turn));
    assert!(!want_b.is_empty());
    assert_ne!(want_a, want_b, "{what}: the two must disagree");
    assert_eq!(hashes(a, &turn), want_a);
    assert_eq!(hashes(a, &turn), want_a);
    let warm = hasher_stats(a);
    assert!(
        warm.hits >= want_a.len() as u64,
        "{what}: the cache is used: {warm:?}"
    );
    assert_eq!(hasher_stats(b), warm, "{what}: one cache");
    assert_eq!(hashes(b, &turn), want_b, "{what}");
    assert_eq!(hasher_stats(b).hits, warm.hits, "{what}: an entry crossed");
    assert_eq!(hashes(b, &turn), want_b, "{what}");
    // b's own entries are found (SGLang and TensorRT-LLM chains are never cached).
    assert_eq!(hasher_stats(b).hits > warm.hits, b_cached, "{what}");
    assert_eq!(hashes(a, &turn), want_a, "{what}");
}

#[test]
fn prefix_cache_keys_separate_hasher_configurations() {
    let base_opts = hasher_options(Some(4096), null());
    let off = hasher_options(None, null());
    let a = hasher(KVEXACT_SHA256_CBOR, 16, Some("0"), &base_opts);
    let a_ref = hasher(KVEXACT_SHA256_CBOR, 16, Some("0"), &off);
    let share = hasher_options(None, a);
    type Make = Box<dyn Fn(&kvexact_hasher_options) -> *mut kvexact_hasher>;
    let variants: Vec<(&str, Make)> = vec![
        (
            "algorithm",
            Box::new(|o| hasher(KVEXACT_XXHASH_CBOR, 16, Some("0"), o)),
        ),
        (
            "seed",
            Box::new(|o| hasher(KVEXACT_SHA256_CBOR, 16, Some("1"), o)),
        ),
        (
            "block size",
            Box::new(|o| hasher(KVEXACT_SHA256_CBOR, 32, Some("0"), o)),
        ),
        (
            "engine (SGLang)",
            Box::new(|o| hasher(KVEXACT_SHA256_SGLANG, 16, None, o)),
        ),
    ];
    for (what, make) in variants {
        let (b, b_ref) = (make(&share), make(&off));
        chains_do_not_cross(a, a_ref, b, b_ref, what, !what.contains("SGLang"));
        unsafe {
            kvexact_hasher_free(b);
            kvexact_hasher_free(b_ref);
        }
    }
    releases_agree_where_the_abi_can_hash(a, a_ref, &share, &off);
    // The cache outlives the hasher that made it while another shares it.
    let b = hasher(KVEXACT_SHA256_CBOR, 16, Some("0"), &share);
    unsafe { kvexact_hasher_free(a) };
    let turn = ids(16 * 10);
    let before = hasher_stats(b);
    assert_eq!(hashes(b, &turn), hashes(a_ref, &turn));
    assert!(
        hasher_stats(b).hits > before.hits,
        "same configuration: shared entries"
    );
    unsafe {
        kvexact_hasher_free(b);
        kvexact_hasher_free(a_ref);
    }
}

/// The engine release, through the ABI. vLLM 0.17.0–0.28.0 derive NONE_HASH by rule A and
/// 0.29.0 on by rule B (`shared/vectors/versions/README.md`); the rules differ only when
/// `PYTHONHASHSEED` is unset, where rule A draws random bytes per process, so a 0.17.0 hasher
/// without a seed is refused. With a seed both rules hash the seed string; and the releases'
/// extra-key forms (K1/K2/K3) differ only for LoRA, multimodal, salt and embedding keys,
/// which the ABI's hashers do not take. So for every input an ABI hasher accepts, a 0.17.0
/// hasher's chain *is* the reference chain: there is no pair of results for a shared cache
/// to mix up here (the release's keys are separated in `prefix_cache_keys_separate_engine_releases`,
/// through kvhash, where the extra keys exist). What is checked: the refusal, the equality,
/// and that sharing the cache still gives each hasher its uncached answers (the release is
/// part of the fingerprint, so the two do not even share entries).
fn releases_agree_where_the_abi_can_hash(
    a: *const kvexact_hasher,
    a_ref: *const kvexact_hasher,
    share: &kvexact_hasher_options,
    off: &kvexact_hasher_options,
) {
    let old = |seed: Option<&str>, o: &kvexact_hasher_options| {
        let contract = std::ffi::CString::new("vllm-kv-array-v1").unwrap();
        let version = std::ffi::CString::new("0.17.0").unwrap();
        let (sp, sl) = seed.map_or((null(), 0), |s| (s.as_ptr(), s.len()));
        let mut h = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        let st = unsafe {
            kvexact::hasher::kvexact_hasher_new_for_contract_with_options(
                contract.as_ptr(),
                version.as_ptr(),
                KVEXACT_SHA256_CBOR,
                16,
                sp,
                sl,
                o,
                &mut h,
                &mut err,
            )
        };
        (st, h, err)
    };
    // Rule A, seed unset: refused (random per engine process), with nothing written.
    let (st, h, err) = old(None, off);
    assert_eq!(st, kvexact::status::KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE);
    assert!(h.is_null());
    let (_, _, msg) = take_err(err);
    assert!(msg.contains("random"), "{msg}");
    // Rule B (the reference), seed unset: H("vllm-none-hash"), computed.
    let unset = hasher(KVEXACT_SHA256_CBOR, 16, None, off);
    let turn = ids(16 * 24 + 5);
    assert_eq!(hashes(unset, &turn).len(), 24);
    assert_ne!(
        hashes(unset, &turn),
        hashes(a_ref, &turn),
        "unset vs seed \"0\""
    );
    unsafe { kvexact_hasher_free(unset) };
    // Seed set: rule A = rule B, hash for hash, cached or not, sharing a's cache.
    let b_ref = hasher_for_contract(
        "vllm-kv-array-v1",
        Some("0.17.0"),
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        off,
    );
    let b = hasher_for_contract(
        "vllm-kv-array-v1",
        Some("0.17.0"),
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        share,
    );
    let want = hashes(a_ref, &turn);
    assert_eq!(
        hashes(b_ref, &turn),
        want,
        "0.17.0 with a seed is the reference chain"
    );
    for _ in 0..2 {
        assert_eq!(hashes(a, &turn), want);
        assert_eq!(hashes(b, &turn), want);
    }
    unsafe {
        kvexact_hasher_free(b);
        kvexact_hasher_free(b_ref);
    }
}

fn vllm(extras: VllmExtras) -> BlockHasher {
    VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))
        .unwrap()
        .with_extras(extras)
        .unwrap()
        .into()
}

#[test]
fn prefix_cache_keys_separate_extra_keys_and_salt() {
    let turn = ids(16 * 20);
    let plain = vllm(VllmExtras::default());
    let variants = [
        (
            "LoRA adapter",
            VllmExtras {
                lora: Some(LoraKey {
                    name: "a".into(),
                    path: "/adapters/a".into(),
                }),
                ..Default::default()
            },
        ),
        (
            "another LoRA path",
            VllmExtras {
                lora: Some(LoraKey {
                    name: "a".into(),
                    path: "/adapters/b".into(),
                }),
                ..Default::default()
            },
        ),
        (
            "multimodal item",
            VllmExtras {
                mm_features: vec![MmFeature {
                    identifier: "img0".into(),
                    offset: 40,
                    length: 8,
                }],
                ..Default::default()
            },
        ),
        (
            "cache salt",
            VllmExtras {
                cache_salt: Some("tenant-a".into()),
                ..Default::default()
            },
        ),
    ];
    let run = |c: &PrefixCache, h: &BlockHasher| {
        let mut out = vec![0u64; 64];
        let n = c.block_hashes_u64(h, &turn, &mut out).unwrap();
        out.truncate(n);
        out
    };
    let uncached = |h: &BlockHasher| {
        let mut out = vec![0u64; 64];
        let n = h.block_hashes_u64(&turn, &mut out).unwrap();
        out.truncate(n);
        out
    };
    for (what, extras) in variants {
        let other = vllm(extras);
        let cache = PrefixCache::new(1000);
        let (want_a, want_b) = (uncached(&plain), uncached(&other));
        assert_ne!(want_a, want_b, "{what}");
        assert_eq!(run(&cache, &plain), want_a);
        assert_eq!(run(&cache, &plain), want_a);
        let warm = cache.stats();
        assert!(warm.reused > 0);
        assert_eq!(run(&cache, &other), want_b, "{what}");
        assert_eq!(
            cache.stats().reused,
            warm.reused,
            "{what}: an entry crossed"
        );
        assert_eq!(run(&cache, &other), want_b, "{what}");
        assert!(cache.stats().reused > warm.reused, "{what}");
        // Salts differ from each other too.
        if what == "cache salt" {
            let salt_b = vllm(VllmExtras {
                cache_salt: Some("tenant-b".into()),
                ..Default::default()
            });
            let before = cache.stats();
            assert_eq!(run(&cache, &salt_b), uncached(&salt_b));
            assert_eq!(cache.stats().reused, before.reused);
        }
    }
}

/// The engine release where it does change a chain: the extra-key form of the release's
/// rules, read from the contract catalog (vLLM 0.17.0: K1, 0.20.0–0.30.0: K2, 0.31.0 on: K3;
/// the NONE_HASH rule, A or B, changes nothing once a seed is set). Two hashers with the same
/// algorithm, block size, seed and extra keys, differing only in the release, share one cache
/// and never see each other's blocks.
#[test]
fn prefix_cache_keys_separate_engine_releases() {
    let rules = |version: &str| {
        kvprobe::contract::resolve_within("vllm-kv-array-v1", Some(version))
            .or_else(|_| kvprobe::contract::resolve_within("vllm-kv-map-v3", Some(version)))
            .unwrap_or_else(|e| panic!("{version}: {e}"))
            .vllm_rules()
            .unwrap()
    };
    let with = |version: &str, extras: VllmExtras| -> BlockHasher {
        VllmHasher::with_rules(rules(version), HashAlgo::Sha256Cbor, 16, Some("0"))
            .unwrap()
            .with_extras(extras)
            .unwrap()
            .into()
    };
    let lora = VllmExtras {
        lora: Some(LoraKey {
            name: "a".into(),
            path: "/adapters/a".into(),
        }),
        ..Default::default()
    };
    let mm = VllmExtras {
        mm_features: vec![MmFeature {
            identifier: "img0".into(),
            offset: 40,
            length: 8,
        }],
        ..Default::default()
    };
    let turn = ids(16 * 20);
    let run = |c: Option<&PrefixCache>, h: &BlockHasher| {
        let mut out = vec![0u64; 64];
        let n = match c {
            Some(c) => c.block_hashes_u64(h, &turn, &mut out).unwrap(),
            None => h.block_hashes_u64(&turn, &mut out).unwrap(),
        };
        out.truncate(n);
        out
    };
    for (what, a, b) in [
        (
            "LoRA: 0.17.0 (K1) vs 0.31.0 (K3)",
            with("0.31.0", lora.clone()),
            with("0.17.0", lora.clone()),
        ),
        (
            "LoRA: 0.29.0 (K2) vs 0.31.0 (K3)",
            with("0.31.0", lora.clone()),
            with("0.29.0", lora),
        ),
        (
            "multimodal: 0.17.0 (K1) vs 0.20.0 (K2)",
            with("0.20.0", mm.clone()),
            with("0.17.0", mm),
        ),
    ] {
        let cache = PrefixCache::new(1000);
        let (want_a, want_b) = (run(None, &a), run(None, &b));
        assert_ne!(want_a, want_b, "{what}: the two must disagree");
        assert_eq!(run(Some(&cache), &a), want_a, "{what}");
        assert_eq!(run(Some(&cache), &a), want_a, "{what}");
        let warm = cache.stats();
        assert!(warm.reused > 0, "{what}");
        assert_eq!(run(Some(&cache), &b), want_b, "{what}");
        assert_eq!(
            cache.stats().reused,
            warm.reused,
            "{what}: an entry crossed"
        );
        assert_eq!(run(Some(&cache), &b), want_b, "{what}");
        assert!(
            cache.stats().reused > warm.reused,
            "{what}: b's own entries are found"
        );
        assert_eq!(run(Some(&cache), &a), want_a, "{what}");
    }
}
