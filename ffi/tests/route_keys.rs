//! `kvexact_route_keys` (and its batch form) is exactly the separate calls
//! `kvexact_encode_chat` + `kvexact_block_hashes_u64` (full blocks), id for id and hash for
//! hash, whatever the caches hold:
//!
//! * a proptest over multi-turn conversations (long messages, CJK, special-token text, tool
//!   requests, broken bodies), id and block caps, four hashers (vLLM `sha256_cbor` and
//!   `xxhash_cbor`, SGLang, TensorRT-LLM) and three encoders (strict vLLM and SGLang, vLLM
//!   0.31.0 lifting `tools`): the cached handles (small caches, constantly evicting, shared by
//!   every case) against uncached twins through the separate calls;
//! * the lifted tool request of the vectors (qwen3 `tools_request`, vLLM 0.31.0) gives the
//!   engine's own ids; strict, it is refused `tools`;
//! * the batch form equals one call per body, slot by slot;
//! * four threads on one encoder and one hasher agree with the uncached answers;
//! * options: versioned struct sizes, flags, lift refusals (`LIFT_NOT_ALLOWED` with the reason),
//!   unknown engine versions, counters and clearing.

use crate::route_common;

use std::ffi::CString;
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use kvexact::encoder::*;
use kvexact::enums::*;
use kvexact::hasher::*;
use kvexact::refusal::*;
use kvexact::route::*;
use kvexact::status::*;
use proptest::prelude::*;
use route_common::*;

const MODEL: &str = "Qwen/Qwen3-0.6B";

/// The handles the proptest shares between cases: (cached, uncached) encoder pairs and
/// (cached, uncached) hasher pairs.
struct Handles {
    encoders: Vec<(Shared<kvexact_encoder>, Shared<kvexact_encoder>)>,
    hashers: Vec<(Shared<kvexact_hasher>, Shared<kvexact_hasher>)>,
}

fn handles() -> &'static Handles {
    static H: OnceLock<Handles> = OnceLock::new();
    H.get_or_init(|| {
        let small = EncOpts {
            version: None,
            lifted: 0,
            cache: Some(16 * 1024),
        };
        let off = EncOpts {
            version: None,
            lifted: 0,
            cache: None,
        };
        let lifted_small = EncOpts {
            version: Some("0.31.0"),
            lifted: KVEXACT_REFUSAL_BIT_TOOLS,
            cache: Some(16 * 1024),
        };
        let lifted_off = EncOpts {
            version: Some("0.31.0"),
            lifted: KVEXACT_REFUSAL_BIT_TOOLS,
            cache: None,
        };
        let encoders = [
            ("vllm-kv-map-v2", &small, &off),
            ("sglang-kv-rank-v1", &small, &off),
            ("vllm-kv-map-v3", &lifted_small, &lifted_off),
        ]
        .into_iter()
        .map(|(c, on, off)| {
            (
                Shared(encoder(QWEN3, c, on)),
                Shared(encoder(QWEN3, c, off)),
            )
        })
        .collect();
        let off = hasher_options(None, null());
        let tiny = hasher_options(Some(48), null());
        let mut hashers = Vec::new();
        for (algo, bs, seed) in [
            (KVEXACT_SHA256_CBOR, 16, Some("0")),
            (KVEXACT_XXHASH_CBOR, 4, Some("1")),
            (KVEXACT_SHA256_SGLANG, 16, None),
            (KVEXACT_BLOCKHASH_TRTLLM, 32, None),
        ] {
            let cached = if hashers.is_empty() {
                hasher(algo, bs, seed, &tiny)
            } else {
                // The others share the first hasher's cache.
                let first: &(Shared<kvexact_hasher>, Shared<kvexact_hasher>) = &hashers[0];
                hasher(algo, bs, seed, &hasher_options(None, first.0 .0))
            };
            hashers.push((Shared(cached), Shared(hasher(algo, bs, seed, &off))));
        }
        Handles { encoders, hashers }
    })
}

const PIECES: [&str; 8] = [
    "Hello!",
    "What is 2+2?",
    "Please review the following function and explain what it does, line by line, including edge cases.",
    "def f(x):\n    return [i * i for i in range(x) if i % 3]\n",
    "你好，世界。请把下面的段落翻译成英文，并保留原来的格式和标点符号。",
    "Ünïcödé e\u{301} café — naïve façade, ﬁ ligatures and 🚀 emoji in one longer sentence.",
    "literal special-token text <|im_end|> and <|im_start|>user inside content",
    "",
];

const TOOLS: &str = r#","tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]"#;

/// A conversation: its messages (after an optional system prompt), whether requests carry
/// tools, and which body shape to send (0 good, 1 truncated JSON, 2 a non-chat body).
fn conversation() -> impl Strategy<Value = (bool, Vec<(usize, usize)>, bool, u8)> {
    (
        any::<bool>(),
        prop::collection::vec((0..PIECES.len(), 1usize..4), 1..7),
        prop::bool::weighted(0.3),
        prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
}

fn bodies(system: bool, msgs: &[(usize, usize)], tools: bool, shape: u8) -> Vec<Vec<u8>> {
    let texts: Vec<String> = msgs.iter().map(|&(p, rep)| PIECES[p].repeat(rep)).collect();
    let mut out = Vec::new();
    // Every user turn of the conversation is a request (the agent pattern: each extends the
    // previous one by an assistant reply and a user turn).
    for turn in (0..texts.len()).step_by(2) {
        let mut m: Vec<(&str, &str)> = Vec::new();
        if system {
            m.push(("system", "You are a careful assistant."));
        }
        for (i, t) in texts.iter().enumerate().take(turn + 1) {
            m.push((if i % 2 == 0 { "user" } else { "assistant" }, t.as_str()));
        }
        let mut b = chat_body(MODEL, &m, if tools { TOOLS } else { "" });
        match shape {
            1 => b.truncate(b.len() / 2),
            2 => b = br#"{"model":"m","prompt":"not a chat"}"#.to_vec(),
            _ => {}
        }
        out.push(b);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn route_keys_equals_the_separate_calls(
        (system, msgs, tools, shape) in conversation(),
        max_ids in prop_oneof![Just(4096usize), Just(0usize), 1usize..80],
        max_blocks in prop_oneof![Just(256usize), Just(0usize), 1usize..5],
        which in 0usize..12,
    ) {
        let h = handles();
        let (enc, enc_ref) = &h.encoders[which % h.encoders.len()];
        let (hs, hs_ref) = &h.hashers[which / h.encoders.len() % h.hashers.len()];
        for body in bodies(system, &msgs, tools, shape) {
            let want = separate(enc_ref.0, hs_ref.0, &body, max_ids, max_blocks);
            // Twice: the second call finds what the first one cached.
            for _ in 0..2 {
                let got = route(enc.0, hs.0, &body, max_ids, max_blocks);
                prop_assert_eq!(&got, &want, "{}", String::from_utf8_lossy(&body));
            }
            // The separate calls on the cached handles give the same too.
            prop_assert_eq!(separate(enc.0, hs.0, &body, max_ids, max_blocks), want);
        }
    }
}

#[test]
fn the_lifted_tool_request_gives_the_engines_ids() {
    let (body, want) = vector_case(
        "templates/qwen3-06b-default-v1.json",
        "tools_request",
        "vllm",
    );
    let lifted = encoder(
        QWEN3,
        "vllm-kv-map-v3",
        &EncOpts {
            version: Some("0.31.0"),
            lifted: KVEXACT_REFUSAL_BIT_TOOLS,
            cache: Some(0),
        },
    );
    let h = hasher(
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        &hasher_options(Some(0), null()),
    );
    let got = route(lifted, h, &body, 4096, 256);
    assert_eq!(got.status, KVEXACT_OK, "{}", refusal_name(got.refusal));
    assert_eq!(got.ids, want);
    assert_eq!(got.hashes.len(), want.len() / 16);
    assert_eq!(got, separate(lifted, h, &body, 4096, 256));
    // Again, through the warm caches.
    assert_eq!(route(lifted, h, &body, 4096, 256), got);
    assert!(hasher_stats(h).hits >= got.hashes.len() as u64);
    // Strict: refused with its first code.
    let strict = encoder(
        QWEN3,
        "vllm-kv-map-v3",
        &EncOpts {
            version: Some("0.31.0"),
            lifted: 0,
            cache: Some(0),
        },
    );
    let r = route(strict, h, &body, 4096, 256);
    assert_eq!(r.status, KVEXACT_ERR_UNSUPPORTED);
    assert_eq!(refusal_name(r.refusal), "tools");
    unsafe {
        kvexact_encoder_free(lifted);
        kvexact_encoder_free(strict);
        kvexact_hasher_free(h);
    }
}

#[test]
fn the_batch_equals_one_call_per_body() {
    let h = handles();
    let (enc, _) = &h.encoders[2];
    let (hs, _) = &h.hashers[0];
    let mut bodies: Vec<Vec<u8>> = bodies(true, &[(2, 3), (3, 2), (4, 2), (5, 1), (0, 1)], true, 0);
    bodies.push(b"{not json".to_vec());
    bodies.push(chat_body(MODEL, &[("user", "hi")], r#","documents":[]"#));
    bodies.push(Vec::new());
    let (max_ids, max_blocks) = (200usize, 7usize);
    let reqs: Vec<kvexact_route_request> = bodies
        .iter()
        .map(|b| kvexact_route_request {
            body: if b.is_empty() { null() } else { b.as_ptr() },
            len: b.len(),
            now_unix_ms: NOW,
        })
        .collect();
    let n = reqs.len();
    let mut ids = vec![0u32; n * max_ids];
    let mut hashes = vec![0u64; n * max_blocks];
    let mut results = vec![kvexact_route_result::default(); n];
    let mut err = null_mut();
    let st = unsafe {
        kvexact_route_keys_batch(
            enc.0,
            hs.0,
            reqs.as_ptr(),
            n,
            ids.as_mut_ptr(),
            max_ids,
            hashes.as_mut_ptr(),
            max_blocks,
            results.as_mut_ptr(),
            &mut err,
        )
    };
    assert_eq!(st, KVEXACT_OK);
    assert!(err.is_null());
    let mut statuses = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let one = route(enc.0, hs.0, body, max_ids, max_blocks);
        let r = results[i];
        statuses.push(r.status);
        assert_eq!((r.status, r.refusal), (one.status, one.refusal), "body {i}");
        if r.status == KVEXACT_OK {
            let slot_ids = &ids[i * max_ids..i * max_ids + r.n_ids];
            let slot_hashes = &hashes[i * max_blocks..i * max_blocks + r.n_blocks];
            assert_eq!(slot_ids, one.ids.as_slice(), "body {i}");
            assert_eq!(slot_hashes, one.hashes.as_slice(), "body {i}");
        } else {
            assert_eq!((r.n_ids, r.n_blocks), (0, 0));
        }
    }
    assert!(statuses.iter().filter(|&&s| s == KVEXACT_OK).count() >= 3);
    assert!(statuses.contains(&KVEXACT_ERR_UNSUPPORTED));
    // Arguments are checked before anything is written.
    let mut untouched = vec![kvexact_route_result::default(); n];
    let st = unsafe {
        kvexact_route_keys_batch(
            enc.0,
            hs.0,
            reqs.as_ptr(),
            n,
            null_mut(),
            max_ids,
            hashes.as_mut_ptr(),
            max_blocks,
            untouched.as_mut_ptr(),
            null_mut(),
        )
    };
    assert_eq!(st, KVEXACT_ERR_NULL_ARGUMENT);
    assert!(untouched
        .iter()
        .all(|r| *r == kvexact_route_result::default()));
    let st = unsafe {
        kvexact_route_keys_batch(
            enc.0,
            hs.0,
            reqs.as_ptr(),
            usize::MAX / 2,
            ids.as_mut_ptr(),
            max_ids,
            hashes.as_mut_ptr(),
            max_blocks,
            untouched.as_mut_ptr(),
            null_mut(),
        )
    };
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    // An empty batch is fine with NULL everything.
    let st = unsafe {
        kvexact_route_keys_batch(
            enc.0,
            hs.0,
            null(),
            0,
            null_mut(),
            0,
            null_mut(),
            0,
            null_mut(),
            null_mut(),
        )
    };
    assert_eq!(st, KVEXACT_OK);
}

#[test]
fn threads_share_one_encoder_and_one_hasher() {
    let h = handles();
    let enc = Shared(h.encoders[0].0 .0);
    let enc_ref = Shared(h.encoders[0].1 .0);
    let hs = Shared(h.hashers[0].0 .0);
    let hs_ref = Shared(h.hashers[0].1 .0);
    let convs: Vec<Vec<Vec<u8>>> = (0..4)
        .map(|t| {
            bodies(
                t % 2 == 0,
                &[(2, 2), (t, 2), (4, 1), (5, 2), (3, 1)],
                false,
                0,
            )
        })
        .collect();
    std::thread::scope(|s| {
        for conv in &convs {
            let (enc, enc_ref, hs, hs_ref) = (&enc, &enc_ref, &hs, &hs_ref);
            s.spawn(move || {
                for _ in 0..3 {
                    for body in conv {
                        let want = separate(enc_ref.0, hs_ref.0, body, 4096, 256);
                        assert_eq!(route(enc.0, hs.0, body, 4096, 256), want);
                    }
                }
            });
        }
    });
}

#[test]
fn arguments_are_checked_and_nothing_is_written_on_failure() {
    let h = handles();
    let (enc, _) = &h.encoders[0];
    let (hs, _) = &h.hashers[0];
    let body = chat_body(MODEL, &[("user", "hi")], "");
    let mut ids = [0u32; 8];
    let mut hashes = [0u64; 2];
    let (mut ni, mut nb) = (7usize, 7usize);
    let mut refusal = 5;
    for (e, hh, idp, nip, nbp) in [
        (
            null(),
            hs.0.cast_const(),
            ids.as_mut_ptr(),
            &mut ni as *mut usize,
            &mut nb as *mut usize,
        ),
        (
            enc.0.cast_const(),
            null(),
            ids.as_mut_ptr(),
            &mut ni,
            &mut nb,
        ),
        (
            enc.0.cast_const(),
            hs.0.cast_const(),
            null_mut(),
            &mut ni,
            &mut nb,
        ),
        (
            enc.0.cast_const(),
            hs.0.cast_const(),
            ids.as_mut_ptr(),
            null_mut(),
            &mut nb,
        ),
        (
            enc.0.cast_const(),
            hs.0.cast_const(),
            ids.as_mut_ptr(),
            &mut ni,
            null_mut(),
        ),
    ] {
        let st = unsafe {
            kvexact_route_keys(
                e,
                hh,
                body.as_ptr(),
                body.len(),
                NOW,
                idp,
                8,
                hashes.as_mut_ptr(),
                2,
                nip,
                nbp,
                &mut refusal,
                null_mut(),
            )
        };
        assert_eq!(st, KVEXACT_ERR_NULL_ARGUMENT);
        assert_eq!(refusal, KVEXACT_REFUSAL_NONE);
        refusal = 5;
    }
    assert_eq!((ni, nb), (7, 7));
    assert_eq!(ids, [0; 8]);
    // A refusal writes the refusal and an error object, not the counts.
    let tools = chat_body(MODEL, &[("user", "hi")], TOOLS);
    let mut err = null_mut();
    let st = unsafe {
        kvexact_route_keys(
            enc.0,
            hs.0,
            tools.as_ptr(),
            tools.len(),
            NOW,
            ids.as_mut_ptr(),
            8,
            hashes.as_mut_ptr(),
            2,
            &mut ni,
            &mut nb,
            &mut refusal,
            &mut err,
        )
    };
    assert_eq!(st, KVEXACT_ERR_UNSUPPORTED);
    assert_eq!(refusal, KVEXACT_REFUSAL_TOOLS);
    assert_eq!(take_err(err).1, "tools");
    assert_eq!((ni, nb), (7, 7));
}

fn lift_error(contract: &str, version: Option<&str>, lifted: u32) -> (i32, String, String) {
    try_encoder(
        QWEN3,
        contract,
        &EncOpts {
            version,
            lifted,
            cache: Some(0),
        },
    )
    .map(|e| unsafe { kvexact_encoder_free(e) })
    .expect_err("refused")
}

#[test]
fn lifts_are_refused_at_construction_with_the_reason() {
    // TensorRT-LLM rejects continue_final_message itself: not liftable there.
    let (st, code, msg) = lift_error(
        "trtllm-kv-http-v2",
        Some("1.3.0rc29"),
        KVEXACT_REFUSAL_BIT_TOOLS | KVEXACT_REFUSAL_BIT_CONTINUE_FINAL_MESSAGE,
    );
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_LIFT_NOT_ALLOWED, "LIFT_NOT_ALLOWED")
    );
    assert!(
        msg.contains("continue_final_message") && msg.contains("trtllm-kv-http-v2-r1.3.0rc29"),
        "{msg}"
    );
    // A contract spanning releases names no one release's chat rules: lifting needs the
    // version (refused as not liftable, or as a contract whose releases differ).
    let (st, code, msg) = lift_error("vllm-kv-map-v3", None, KVEXACT_REFUSAL_BIT_TOOLS);
    assert!(
        st == KVEXACT_ERR_LIFT_NOT_ALLOWED
            || (st == KVEXACT_ERR_INVALID_ARGUMENT && code == "CONFIG"),
        "{st} {code}: {msg}"
    );
    // A release without chat vectors lifts nothing.
    let (st, _, msg) = lift_error("vllm-kv-map-v3", Some("0.32.0"), KVEXACT_REFUSAL_BIT_TOOLS);
    assert_eq!(st, KVEXACT_ERR_LIFT_NOT_ALLOWED);
    assert!(msg.contains("no chat rules are proven"), "{msg}");
    // A code no release lifts.
    let bit = kvexact_refusal_bit(KVEXACT_REFUSAL_DOCUMENTS);
    let (st, _, msg) = lift_error("vllm-kv-map-v3", Some("0.31.0"), bit);
    assert_eq!(st, KVEXACT_ERR_LIFT_NOT_ALLOWED);
    assert!(msg.contains("documents"), "{msg}");
    // Bits that name no code, unknown versions, versions of another contract.
    let (st, _, _) = lift_error("vllm-kv-map-v3", Some("0.31.0"), 1 << 30);
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    let (st, code, _) = lift_error("vllm-kv-map-v3", Some("0.99.0"), 0);
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION")
    );
    let (st, code, _) = lift_error("vllm-kv-map-v2", Some("0.31.0"), 0);
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_CONTRACT_MISMATCH, "CONTRACT_MISMATCH")
    );
    assert_eq!(
        unsafe { std::ffi::CStr::from_ptr(kvexact_status_name(KVEXACT_ERR_LIFT_NOT_ALLOWED)) },
        c"lift_not_allowed"
    );
    // The same lift on a release that defines it builds.
    let ok = encoder(
        QWEN3,
        "sglang-kv-map-v2",
        &EncOpts {
            version: Some("0.5.23"),
            lifted: KVEXACT_REFUSAL_BIT_TOOLS | KVEXACT_REFUSAL_BIT_CONTINUE_FINAL_MESSAGE,
            cache: None,
        },
    );
    unsafe { kvexact_encoder_free(ok) };
}

#[test]
fn option_structs_are_versioned() {
    let contract = CString::new("vllm-kv-map-v2").unwrap();
    let build = |o: *const kvexact_encoder_options| -> i32 {
        let mut enc = null_mut();
        let st = unsafe {
            kvexact_encoder_new_with_options(
                profile(QWEN3),
                contract.as_ptr(),
                o,
                &mut enc,
                null_mut(),
            )
        };
        unsafe { kvexact_encoder_free(enc) };
        st
    };
    let base = encoder_options(
        &EncOpts {
            version: None,
            lifted: 0,
            cache: Some(0),
        },
        &None,
    );
    assert_eq!(build(null()), KVEXACT_OK);
    assert_eq!(build(&base), KVEXACT_OK);
    let mut small = base;
    small.struct_size = 8;
    assert_eq!(build(&small), KVEXACT_ERR_INVALID_ARGUMENT);
    // A newer caller's larger struct: fine while its extra fields are zero.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Newer {
        v1: kvexact_encoder_options,
        extra: u64,
    }
    let mut newer = Newer { v1: base, extra: 0 };
    newer.v1.struct_size = std::mem::size_of::<Newer>() as u32;
    assert_eq!(build(&newer.v1), KVEXACT_OK);
    newer.extra = 1;
    assert_eq!(build(&newer.v1), KVEXACT_ERR_INVALID_ARGUMENT);
    let mut bad = base;
    bad.flags = 2;
    assert_eq!(build(&bad), KVEXACT_ERR_INVALID_ARGUMENT);
    let mut bad = base;
    bad.flags = KVEXACT_OPTION_NO_CACHE;
    bad.segment_cache_bytes = 1;
    assert_eq!(build(&bad), KVEXACT_ERR_INVALID_ARGUMENT);
    let mut bad = base;
    bad.segment_cache_bytes = KVEXACT_SEGMENT_CACHE_MAX_BYTES + 1;
    assert_eq!(build(&bad), KVEXACT_ERR_INVALID_ARGUMENT);
    let mut bad = base;
    bad.reserved = 1;
    assert_eq!(build(&bad), KVEXACT_ERR_INVALID_ARGUMENT);

    // Hasher options.
    let hbuild = |o: *const kvexact_hasher_options| -> i32 {
        let mut h = null_mut();
        let st = unsafe {
            kvexact_hasher_new_with_options(
                KVEXACT_SHA256_CBOR,
                16,
                b"0".as_ptr(),
                1,
                o,
                &mut h,
                null_mut(),
            )
        };
        unsafe { kvexact_hasher_free(h) };
        st
    };
    let off = hasher(
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        &hasher_options(None, null()),
    );
    assert_eq!(hbuild(null()), KVEXACT_OK);
    let mut o = hasher_options(Some(0), null());
    assert_eq!(hbuild(&o), KVEXACT_OK);
    o.struct_size = 4;
    assert_eq!(hbuild(&o), KVEXACT_ERR_INVALID_ARGUMENT);
    assert_eq!(
        hbuild(&hasher_options(None, off)),
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    let mut o = hasher_options(Some(5), null());
    o.share_cache_with = handles().hashers[0].0 .0;
    assert_eq!(hbuild(&o), KVEXACT_ERR_INVALID_ARGUMENT);
    let o = hasher_options(Some(KVEXACT_PREFIX_CACHE_MAX_ENTRIES + 1), null());
    assert_eq!(hbuild(&o), KVEXACT_ERR_INVALID_ARGUMENT);
    let mut o = hasher_options(None, null());
    o.prefix_cache_entries = 3;
    assert_eq!(hbuild(&o), KVEXACT_ERR_INVALID_ARGUMENT);
    // A hasher without a cache reports enabled = 0.
    assert_eq!(hasher_stats(off).enabled, 0);
    unsafe { kvexact_hasher_free(off) };
}

#[test]
fn counters_count_and_clearing_keeps_results() {
    let enc = encoder(
        QWEN25,
        "vllm-kv-map-v2",
        &EncOpts {
            version: None,
            lifted: 0,
            cache: Some(0),
        },
    );
    let h = hasher(
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        &hasher_options(Some(0), null()),
    );
    let es = encoder_stats(enc);
    assert_eq!(es.enabled, 1);
    assert_eq!(es.capacity, KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES);
    assert_eq!((es.hits, es.misses, es.entries, es.bytes), (0, 0, 0, 0));
    let hs = hasher_stats(h);
    assert_eq!(
        (hs.enabled, hs.capacity),
        (1, KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES)
    );
    let long = PIECES[2].repeat(8);
    let turn1 = chat_body("Qwen/Qwen2.5-7B-Instruct", &[("user", &long)], "");
    let turn2 = chat_body(
        "Qwen/Qwen2.5-7B-Instruct",
        &[
            ("user", &long),
            ("assistant", &PIECES[3].repeat(6)),
            ("user", &long),
        ],
        "",
    );
    let a = route(enc, h, &turn1, 4096, 256);
    let b = route(enc, h, &turn2, 4096, 256);
    assert_eq!(a.status, KVEXACT_OK);
    assert_eq!(b.status, KVEXACT_OK);
    let es = encoder_stats(enc);
    assert!(es.hits >= 1 && es.misses >= 2 && es.entries >= 2, "{es:?}");
    assert!(
        es.bytes > long.len() as u64 && es.bytes <= es.capacity,
        "{es:?}"
    );
    let hs = hasher_stats(h);
    assert_eq!(
        hs.hits,
        a.hashes.len() as u64,
        "turn 2 reused turn 1's blocks: {hs:?}"
    );
    assert_eq!(hs.misses, b.hashes.len() as u64, "{hs:?}");
    assert!(
        hs.entries as usize == b.hashes.len() && hs.bytes > 0,
        "{hs:?}"
    );
    // Clearing empties the caches, keeps the counters and changes no result.
    assert_eq!(unsafe { kvexact_encoder_cache_clear(enc) }, KVEXACT_OK);
    assert_eq!(unsafe { kvexact_hasher_cache_clear(h) }, KVEXACT_OK);
    let (es2, hs2) = (encoder_stats(enc), hasher_stats(h));
    assert_eq!(
        (es2.entries, es2.bytes, hs2.entries, hs2.bytes),
        (0, 0, 0, 0)
    );
    assert_eq!((es2.hits, hs2.misses), (es.hits, hs.misses));
    assert_eq!(route(enc, h, &turn2, 4096, 256), b);
    // A stats struct too small is refused; a larger one keeps its tail.
    let mut s = kvexact_cache_stats {
        struct_size: 8,
        ..Default::default()
    };
    assert_eq!(
        unsafe { kvexact_hasher_cache_stats(h, &mut s) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    #[repr(C)]
    struct Newer {
        v1: kvexact_cache_stats,
        tail: u64,
    }
    let mut n = Newer {
        v1: kvexact_cache_stats {
            struct_size: std::mem::size_of::<Newer>() as u32,
            ..Default::default()
        },
        tail: 77,
    };
    assert_eq!(
        unsafe { kvexact_hasher_cache_stats(h, &mut n.v1) },
        KVEXACT_OK
    );
    assert_eq!(n.v1.struct_size as usize, std::mem::size_of::<Newer>());
    assert_eq!((n.v1.enabled, n.tail), (1, 77));
    assert_eq!(
        unsafe { kvexact_encoder_cache_stats(null(), &mut n.v1) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_encoder_cache_stats(enc, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    unsafe {
        kvexact_encoder_free(enc);
        kvexact_hasher_free(h);
    }
}

/// SGLang keys its radix cache by a request's own `extra_key` and by the adapter `lora_path`
/// selects: with a hasher that is not a deployment's, such a body is refused before anything
/// is written (`ENGINE_CACHE_KEY`), never hashed as the base model's prompt; a null field is
/// absent, and other engines' hashers ignore the SGLang-only fields.
#[test]
fn sglang_cache_key_fields_are_refused_with_a_plain_hasher() {
    let h = handles();
    let enc = h.encoders[1].1 .0;
    let sglang = h.hashers[2].1 .0;
    let vllm = h.hashers[0].1 .0;
    let msgs = [("system", PIECES[2]), ("user", PIECES[1])];
    let plain = route(
        enc,
        sglang,
        &chat_body("Qwen/Qwen3-0.6B", &msgs, ""),
        4096,
        256,
    );
    assert_eq!(plain.status, KVEXACT_OK);
    for extra in [r#","extra_key":"session-7""#, r#","lora_path":"sql-lora""#] {
        let body = chat_body("Qwen/Qwen3-0.6B", &msgs, extra);
        let k = route(enc, sglang, &body, 4096, 256);
        assert_eq!(k.status, KVEXACT_ERR_UNSUPPORTED, "{extra}");
        assert_eq!(k.refusal, KVEXACT_REFUSAL_NONE, "{extra}");
        let mut err = null_mut();
        let (mut ni, mut nb) = (0usize, 0usize);
        let mut ids = vec![0u32; 4096];
        let mut hashes = vec![0u64; 256];
        let st = unsafe {
            kvexact_route_keys(
                enc,
                sglang,
                body.as_ptr(),
                body.len(),
                NOW,
                ids.as_mut_ptr(),
                ids.len(),
                hashes.as_mut_ptr(),
                hashes.len(),
                &mut ni,
                &mut nb,
                null_mut(),
                &mut err,
            )
        };
        assert_eq!(st, KVEXACT_ERR_UNSUPPORTED);
        assert_eq!(take_err(err).1, "ENGINE_CACHE_KEY");
        // The same body through a vLLM hasher: the fields are not vLLM's keys.
        assert_eq!(route(enc, vllm, &body, 4096, 256).status, KVEXACT_OK);
    }
    let null = chat_body(
        "Qwen/Qwen3-0.6B",
        &msgs,
        r#","extra_key":null,"lora_path":null"#,
    );
    assert_eq!(route(enc, sglang, &null, 4096, 256), plain);
}
