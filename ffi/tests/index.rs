//! The prefix index through the C ABI:
//!
//! * every cache-hit replay of `testdata/vectors/cachehit/` (speculative decoding, adapters
//!   and salts included) replayed whole through the deployment calls
//!   (`kvexact_deployment_new`, `kvexact_hasher_new_for_deployment`,
//!   `kvexact_index_new_for_deployment`, `kvexact_block_hashes_keyed`) and
//!   `kvexact_index_feed_frames` / `kvexact_index_predict` / `kvexact_index_observe`: every
//!   prediction equals the engine's own count, every report is exact, and SGLang 0.5.19
//!   endpoints serving adapters are `unknown`;
//! * `kvexact_index_route_predict` equals `kvexact_route_keys` then `kvexact_index_predict`
//!   on growing conversations, and both equal the obvious prefix walk over the blocks an
//!   endpoint was fed (stores built from a real vLLM 0.31.0 payload with the hash replaced);
//! * its refusals and argument checks, with nothing of the prediction written.

use crate::route_common;

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::ptr::{null, null_mut};

use kvexact::contract::kvexact_contract_resolve;
use kvexact::deployment::*;
use kvexact::encoder::kvexact_encoder;
use kvexact::enums::*;
use kvexact::hasher::*;
use kvexact::index::*;
use kvexact::index_predict::*;
use kvexact::index_report::*;
use kvexact::refusal::*;
use kvexact::status::*;
use route_common::*;
use serde_json::Value;

const MODEL: &str = "Qwen/Qwen3-0.6B";

fn release_of(engine: kvexact_engine, version: &str) -> CString {
    let v = CString::new(version).unwrap();
    let (mut r, mut c) = (null(), null());
    let st = unsafe { kvexact_contract_resolve(engine, v.as_ptr(), &mut r, &mut c, null_mut()) };
    assert_eq!(st, KVEXACT_OK, "{version}");
    unsafe { std::ffi::CStr::from_ptr(r) }.to_owned()
}

fn new_index(
    release: &CString,
    block_size: u32,
    groups: &[kvexact_index_group],
) -> *mut kvexact_index {
    let opts = kvexact_index_options {
        struct_size: std::mem::size_of::<kvexact_index_options>() as u32,
        max_slots: 64,
        groups: if groups.is_empty() {
            null()
        } else {
            groups.as_ptr()
        },
        n_groups: groups.len(),
    };
    let mut ix = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_index_new(
            release.as_ptr(),
            null(),
            block_size,
            &opts,
            &mut ix,
            &mut err,
        )
    };
    assert_eq!(
        st,
        KVEXACT_OK,
        "{:?}",
        (st != KVEXACT_OK).then(|| take_err(err))
    );
    ix
}

fn add(ix: *const kvexact_index, name: &str, blocks: u64) -> u32 {
    add_with(ix, name, blocks, false)
}

fn add_with(ix: *const kvexact_index, name: &str, blocks: u64, lora_adapters: bool) -> u32 {
    let e = kvexact_index_endpoint {
        struct_size: std::mem::size_of::<kvexact_index_endpoint>() as u32,
        dp_ranks: 1,
        name: name.as_ptr(),
        name_len: name.len(),
        gpu_blocks: blocks,
        other_blocks: blocks,
        lora_adapters: u8::from(lora_adapters),
        replay: 0,
        starts_empty: 1,
    };
    let mut id = u32::MAX;
    let mut err = null_mut();
    let st = unsafe { kvexact_index_add_endpoint(ix, &e, &mut id, &mut err) };
    assert_eq!(
        st,
        KVEXACT_OK,
        "{:?}",
        (st != KVEXACT_OK).then(|| take_err(err))
    );
    id
}

fn applied() -> kvexact_index_applied {
    kvexact_index_applied {
        struct_size: std::mem::size_of::<kvexact_index_applied>() as u32,
        ..Default::default()
    }
}

fn feed(
    ix: *const kvexact_index,
    id: u32,
    rank: u32,
    topic: &[u8],
    seq: &[u8],
    payload: &[u8],
) -> kvexact_index_applied {
    let mut a = applied();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_index_feed_frames(
            ix,
            id,
            rank,
            topic.as_ptr(),
            topic.len(),
            seq.as_ptr(),
            seq.len(),
            payload.as_ptr(),
            payload.len(),
            &mut a,
            &mut err,
        )
    };
    assert_eq!(
        st,
        KVEXACT_OK,
        "{:?}",
        (st != KVEXACT_OK).then(|| take_err(err))
    );
    a
}

fn predict(
    ix: *const kvexact_index,
    hashes: &[u64],
    prompt: usize,
) -> Vec<kvexact_index_prediction> {
    predict_flags(ix, hashes, prompt, 0)
}

fn predict_flags(
    ix: *const kvexact_index,
    hashes: &[u64],
    prompt: usize,
    flags: u32,
) -> Vec<kvexact_index_prediction> {
    let mut out = vec![kvexact_index_prediction::default(); 16];
    let mut n = usize::MAX;
    let mut err = null_mut();
    let st = unsafe {
        kvexact_index_predict(
            ix,
            hashes.as_ptr(),
            hashes.len(),
            prompt,
            flags,
            out.as_mut_ptr(),
            out.len(),
            &mut n,
            &mut err,
        )
    };
    assert_eq!(
        st,
        KVEXACT_OK,
        "{:?}",
        (st != KVEXACT_OK).then(|| take_err(err))
    );
    out.truncate(n);
    out
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k}"))
}

/// The deployment a replay's header describes, through `kvexact_deployment_new` (the
/// header's own `deployment` object translated by the parity checker, which refuses fields it
/// does not model): its hasher and its index.
fn deployment_of_replay(doc: &Value) -> *mut kvexact_deployment {
    let (d, stated) = kvexact_conformance::cachehit::deployment_of(doc).unwrap();
    let json = serde_json::to_string(&d).unwrap();
    let engine = match doc["engine"].as_str().unwrap() {
        "vllm" => KVEXACT_VLLM,
        _ => KVEXACT_SGLANG,
    };
    let v = CString::new(doc["engine_version"].as_str().unwrap()).unwrap();
    let mut dep = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_deployment_new(
            engine,
            v.as_ptr(),
            json.as_ptr(),
            json.len(),
            &mut dep,
            &mut err,
        )
    };
    assert_eq!(
        st,
        KVEXACT_OK,
        "{json}: {:?}",
        (st != KVEXACT_OK).then(|| take_err(err))
    );
    // The engine's own statement of its look-ahead agrees with what the ABI resolved.
    let mut len = 0usize;
    let mut buf = vec![0u8; 4096];
    assert_eq!(
        unsafe { kvexact_deployment_json(dep, buf.as_mut_ptr(), buf.len(), &mut len) },
        KVEXACT_OK
    );
    let resolved: Value = serde_json::from_slice(&buf[..len]).unwrap();
    if let Some(l) = stated.lookahead {
        let form = if l == 0 {
            "plain".to_string()
        } else {
            format!("lookahead-{l}")
        };
        assert_eq!(resolved["keyForm"], form.as_str());
    }
    if stated.bigram == Some(true) {
        assert_eq!(resolved["keyForm"], "bigram");
    }
    dep
}

#[test]
fn every_cache_hit_replay_is_exact_through_the_abi() {
    // Every replay, speculative decoding, adapters and salts included, through the
    // deployment calls: kvexact_deployment_new → kvexact_hasher_new_for_deployment,
    // kvexact_index_new_for_deployment → kvexact_block_hashes_keyed per query.
    let dir = repo().join("testdata/vectors/cachehit");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 14, "{files:?}");
    let (mut judged, mut hits, mut exact, mut sparse_listed, mut unknown) = (0, 0, 0, 0, 0);
    for f in &files {
        let doc: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        let dep = deployment_of_replay(&doc);
        let bs = u(&doc, "block_size") as u32;
        let mut h = null_mut();
        let mut err = null_mut();
        let opts = hasher_options(None, null());
        let st = unsafe { kvexact_hasher_new_for_deployment(dep, &opts, &mut h, &mut err) };
        assert_eq!(st, KVEXACT_OK);
        let groups: Vec<kvexact_index_group> = doc["kv_cache_groups"]
            .as_array()
            .map(|gs| {
                gs.iter()
                    .map(|g| kvexact_index_group {
                        kind: if g["kv_cache_spec_kind"] == "sliding_window" {
                            KVEXACT_GROUP_SLIDING_WINDOW
                        } else {
                            KVEXACT_GROUP_FULL_ATTENTION
                        },
                        block_size: u(g, "block_size") as u32,
                        sliding_window: g["kv_cache_spec_sliding_window"].as_u64().unwrap_or(0)
                            as u32,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let iopts = kvexact_index_options {
            struct_size: std::mem::size_of::<kvexact_index_options>() as u32,
            max_slots: 64,
            groups: if groups.is_empty() {
                null()
            } else {
                groups.as_ptr()
            },
            n_groups: groups.len(),
        };
        let mut ix = null_mut();
        let st = unsafe { kvexact_index_new_for_deployment(dep, &iopts, &mut ix, &mut err) };
        assert_eq!(
            st,
            KVEXACT_OK,
            "{:?}",
            (st != KVEXACT_OK).then(|| take_err(err))
        );
        let adapters = doc["lora_adapters"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        let cap = doc["usable_blocks"]
            .as_u64()
            .unwrap_or_else(|| u(&doc, "kv_capacity_pages"));
        let names: Vec<String> = doc["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        let ids: HashMap<String, u32> = names
            .iter()
            .map(|n| (n.clone(), add_with(ix, n, cap, adapters)))
            .collect();
        // SGLang 0.5.19 publishes adapter blocks under the base model's hashes: an endpoint
        // serving adapters is `unknown`, never a number.
        let adapters_unknown = adapters && doc["engine"] == "sglang";
        let mut at_query: HashMap<u64, Vec<kvexact_index_prediction>> = HashMap::new();
        for s in doc["steps"].as_array().unwrap() {
            match s["kind"].as_str().unwrap() {
                "events" => {
                    let seq = hex::decode(s["seq_frame_hex"].as_str().unwrap()).unwrap();
                    let payload = hex::decode(s["payload_hex"].as_str().unwrap()).unwrap();
                    let a = feed(
                        ix,
                        ids[s["endpoint"].as_str().unwrap()],
                        u(s, "dp_rank") as u32,
                        s["topic"].as_str().unwrap().as_bytes(),
                        &seq,
                        &payload,
                    );
                    assert_eq!(a.outcome, KVEXACT_APPLIED);
                }
                "query" => {
                    let toks: Vec<u32> = s["token_ids"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t.as_u64().unwrap() as u32)
                        .collect();
                    let salt = s["cache_salt"].as_str();
                    let lora = s["lora_name"].as_str();
                    let keys = kvexact_request_keys {
                        struct_size: std::mem::size_of::<kvexact_request_keys>() as u32,
                        has_cache_salt: u32::from(salt.is_some()),
                        cache_salt: salt.map_or(null(), str::as_ptr),
                        cache_salt_len: salt.map_or(0, str::len),
                        adapter: lora.map_or(null(), str::as_ptr),
                        adapter_len: lora.map_or(0, str::len),
                    };
                    let mut hashes = vec![0u64; toks.len() / bs as usize];
                    let mut n = usize::MAX;
                    let st = unsafe {
                        kvexact_block_hashes_keyed(
                            h,
                            &keys,
                            toks.as_ptr(),
                            toks.len(),
                            hashes.as_mut_ptr(),
                            hashes.len(),
                            &mut n,
                            &mut err,
                        )
                    };
                    assert_eq!(
                        st,
                        KVEXACT_OK,
                        "{:?}",
                        (st != KVEXACT_OK).then(|| take_err(err))
                    );
                    hashes.truncate(n);
                    let preds = predict(ix, &hashes, toks.len());
                    assert_eq!(preds.len(), names.len());
                    if adapters_unknown {
                        for p in &preds {
                            assert_eq!(
                                (p.status, p.unknown_reason),
                                (
                                    KVEXACT_PREDICTION_UNKNOWN,
                                    KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS
                                )
                            );
                            unknown += 1;
                        }
                        at_query.insert(u(s, "id"), preds);
                        continue;
                    }
                    // The sparse answer: the same entries, without the ranks that are
                    // cached with 0 tokens (and 0 or "not stated" in other media).
                    let listed: Vec<kvexact_index_prediction> = preds
                        .iter()
                        .filter(|p| {
                            !(p.status == KVEXACT_PREDICTION_CACHED
                                && p.tokens == 0
                                && p.other_media_tokens <= 0)
                        })
                        .copied()
                        .collect();
                    assert_eq!(
                        predict_flags(ix, &hashes, toks.len(), KVEXACT_PREDICT_SPARSE),
                        listed,
                        "{} query {} (sparse)",
                        f.display(),
                        s["id"]
                    );
                    sparse_listed += listed.len();
                    for p in &preds {
                        let name = &names[p.endpoint as usize];
                        let want = u(&s["expected_cached_tokens"], name);
                        assert_eq!(
                            (p.status, p.tokens, p.proven),
                            (KVEXACT_PREDICTION_CACHED, want, 1),
                            "{} query {} {name}",
                            f.display(),
                            s["id"]
                        );
                        judged += 1;
                        hits += usize::from(want > 0);
                    }
                    at_query.insert(u(s, "id"), preds);
                }
                _ => {
                    let p = at_query[&u(s, "query")][ids[s["endpoint"].as_str().unwrap()] as usize];
                    let mut obs = 99;
                    let st = unsafe {
                        kvexact_index_observe(
                            ix,
                            &p,
                            b"q".as_ptr(),
                            1,
                            u(s, "cached_tokens"),
                            &mut obs,
                            null_mut(),
                        )
                    };
                    let want = if adapters_unknown {
                        KVEXACT_OBSERVATION_UNJUDGED
                    } else {
                        KVEXACT_OBSERVATION_EXACT
                    };
                    assert_eq!((st, obs), (KVEXACT_OK, want));
                    exact += usize::from(!adapters_unknown);
                }
            }
        }
        let mut len = usize::MAX;
        assert_eq!(
            unsafe { kvexact_index_prediction_drift(ix, null_mut(), 0, &mut len) },
            KVEXACT_OK
        );
        assert_eq!(len, 0, "{}", f.display());
        unsafe { kvexact_index_free(ix) };
        unsafe { kvexact_hasher_free(h) };
        unsafe { kvexact_deployment_free(dep) };
    }
    eprintln!(
        "{} replays: {judged} predictions equal the engines' ({hits} hits), {exact} reports exact, {unknown} unknown; sparse answers list {sparse_listed}",
        files.len()
    );
    assert!(
        judged > 2000
            && hits > 600
            && exact > 400
            && unknown > 200
            && sparse_listed >= hits
            && sparse_listed < judged,
        "{judged} {hits} {exact} {sparse_listed} {unknown}"
    );
}

/// A vLLM 0.31.0 `BlockStored` of one block (the replay's seq-1 payload of vllm-0), with its
/// block hash replaced: the index keys on the published hash only.
fn stored_payload(hash: u64) -> Vec<u8> {
    const TEMPLATE: &str = "93cb41da556e40100000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf8bd0d82b163b177bb1706172656e745f626c6f636b5f68617368cf92379ed936085f99a9746f6b656e5f696473dc0010cd05b9cd1fe00dcd420acd0dd2cd104bcd0ed5cd4013cd0e570dce0002505dccc6ce0002505cce00012d23ccc6cd0cb7aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797391c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00";
    let mut p = hex::decode(TEMPLATE).unwrap();
    let old = 10074790045995964283u64.to_be_bytes();
    let at = p
        .windows(8)
        .position(|w| w == old)
        .expect("the template's hash");
    p[at..at + 8].copy_from_slice(&hash.to_be_bytes());
    p
}

struct Routed {
    status: i32,
    refusal: kvexact_refusal,
    n_ids: usize,
    n_blocks: usize,
    count: usize,
    hashes: Vec<u64>,
    preds: Vec<kvexact_index_prediction>,
}

#[allow(clippy::too_many_arguments)]
fn route_predict(
    ix: *const kvexact_index,
    enc: *const kvexact_encoder,
    h: *const kvexact_hasher,
    body: &[u8],
    max_ids: usize,
    max_blocks: usize,
    cap: usize,
) -> Routed {
    route_predict_flags(ix, enc, h, body, max_ids, max_blocks, cap, 0)
}

#[allow(clippy::too_many_arguments)]
fn route_predict_flags(
    ix: *const kvexact_index,
    enc: *const kvexact_encoder,
    h: *const kvexact_hasher,
    body: &[u8],
    max_ids: usize,
    max_blocks: usize,
    cap: usize,
    flags: u32,
) -> Routed {
    let mut ids = vec![0u32; max_ids];
    let mut hashes = vec![0u64; max_blocks];
    let mut preds = vec![
        kvexact_index_prediction {
            endpoint: 0xEE,
            ..Default::default()
        };
        cap
    ];
    let (mut ni, mut nb, mut n) = (usize::MAX, usize::MAX, usize::MAX);
    let mut refusal = 999;
    let mut err = null_mut();
    let st = unsafe {
        kvexact_index_route_predict(
            ix,
            enc,
            h,
            body.as_ptr(),
            body.len(),
            NOW,
            flags,
            ids.as_mut_ptr(),
            max_ids,
            hashes.as_mut_ptr(),
            max_blocks,
            &mut ni,
            &mut nb,
            preds.as_mut_ptr(),
            cap,
            &mut n,
            &mut refusal,
            &mut err,
        )
    };
    if st == KVEXACT_OK {
        assert!(err.is_null());
        hashes.truncate(nb);
        preds.truncate(n);
    } else {
        let (es, _, _) = take_err(err);
        assert_eq!(es, st);
        assert_eq!(
            (ni, nb),
            (usize::MAX, usize::MAX),
            "counts written on failure"
        );
    }
    Routed {
        status: st,
        refusal,
        n_ids: ni,
        n_blocks: nb,
        count: n,
        hashes,
        preds,
    }
}

#[test]
fn route_predict_is_route_keys_then_predict_and_the_prefix_walk() {
    let release = release_of(KVEXACT_VLLM, "0.31.0");
    let enc = encoder(
        QWEN3,
        "vllm-kv-map-v3",
        &EncOpts {
            version: Some("0.31.0"),
            lifted: 0,
            cache: Some(1 << 20),
        },
    );
    let h = hasher_for_contract(
        release.to_str().unwrap(),
        None,
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        &hasher_options(Some(0), null()),
    );
    let ix = new_index(&release, 16, &[]);
    let a = add(ix, "a", 4095);
    let b = add(ix, "b", 4095);
    // Endpoint a holds the blocks of each earlier turn, b only the first turn's first block.
    let mut held: HashSet<u64> = HashSet::new();
    let mut seq = 0u64;
    let turns = [
        "Please review the following function and explain what it does, line by line.",
        "def f(x):\n    return [i * i for i in range(x) if i % 3]\n",
        "Now rewrite it with a generator and explain the difference in memory use.",
        "你好，世界。请把下面的段落翻译成英文，并保留原来的格式和标点符号。",
    ];
    let mut msgs: Vec<(&str, &str)> = vec![("system", "You are a careful assistant.")];
    let mut checked_hits = 0;
    for (t, text) in turns.iter().enumerate() {
        if t > 0 {
            msgs.push((
                "assistant",
                "Here is my answer, step by step, with the reasons for each.",
            ));
        }
        msgs.push(("user", text));
        let body = chat_body(MODEL, &msgs, "");
        let one = route_predict(ix, enc, h, &body, 4096, 256, 8);
        assert_eq!(one.status, KVEXACT_OK);
        // Ids cut at max_ids: the prompt's length, so its hit, is unknown — refused, never a
        // count from the cut prompt.
        let cut = route_predict(ix, enc, h, &body, one.n_ids - 1, 256, 8);
        assert_eq!(cut.status, KVEXACT_ERR_INVALID_ARGUMENT, "turn {t}");
        // The separate calls.
        let keys = route(enc, h, &body, 4096, 256);
        assert_eq!(keys.status, KVEXACT_OK);
        assert_eq!((one.n_ids, &one.hashes), (keys.ids.len(), &keys.hashes));
        assert_eq!(one.n_blocks, keys.hashes.len());
        assert_eq!(one.preds, predict(ix, &keys.hashes, keys.ids.len()));
        // The obvious walk: leading blocks a holds, never the last prompt token.
        let reach = (one.n_ids - 1) / 16;
        let walk = one.hashes[..reach]
            .iter()
            .take_while(|x| held.contains(x))
            .count() as u64
            * 16;
        assert_eq!(one.preds.len(), 2);
        assert_eq!(
            (one.preds[0].endpoint, one.preds[0].tokens),
            (a, walk),
            "turn {t}"
        );
        assert_eq!(one.preds[1].endpoint, b);
        let b_want = if t > 0 { 16 } else { 0 };
        assert_eq!(one.preds[1].tokens, b_want, "turn {t}");
        checked_hits += usize::from(walk > 0);
        // The sparse form: the same keys, and only the endpoints with a hit.
        let sparse = route_predict_flags(ix, enc, h, &body, 4096, 256, 8, KVEXACT_PREDICT_SPARSE);
        assert_eq!(sparse.status, KVEXACT_OK);
        assert_eq!((sparse.n_ids, &sparse.hashes), (one.n_ids, &one.hashes));
        let listed: Vec<_> = one.preds.iter().filter(|p| p.tokens > 0).copied().collect();
        assert_eq!(
            (sparse.count, &sparse.preds),
            (listed.len(), &listed),
            "turn {t}"
        );
        // The engine ran the request on a: it stores every full block.
        for &x in &one.hashes {
            if held.insert(x) {
                let r = feed(ix, a, 0, b"", &seq.to_be_bytes(), &stored_payload(x));
                assert_eq!(r.outcome, KVEXACT_APPLIED);
                seq += 1;
            }
        }
        if t == 0 {
            feed(
                ix,
                b,
                0,
                b"",
                &0u64.to_be_bytes(),
                &stored_payload(one.hashes[0]),
            );
        }
    }
    assert_eq!(checked_hits, turns.len() - 1);

    // A too-small prediction buffer: the needed count, neither id nor block count written.
    let body = chat_body(MODEL, &msgs, "");
    let r = route_predict(ix, enc, h, &body, 4096, 256, 1);
    assert_eq!((r.status, r.count), (KVEXACT_ERR_BUFFER_TOO_SMALL, 2));
    assert_eq!(r.preds[0].endpoint, 0xEE);
    // Too few block slots for the blocks a hit may reach: refused as predict refuses it.
    let r = route_predict(ix, enc, h, &body, 4096, 2, 8);
    assert_eq!(
        (r.status, r.count),
        (KVEXACT_ERR_INVALID_ARGUMENT, usize::MAX)
    );
    // A strict refusal: the refusal written, nothing of the prediction.
    let tools =
        r#","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]"#;
    let r = route_predict(ix, enc, h, &chat_body(MODEL, &msgs, tools), 4096, 256, 8);
    assert_eq!(
        (r.status, r.refusal, r.count),
        (KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_TOOLS, usize::MAX)
    );
    // A hasher of another block size.
    let h32 = hasher_for_contract(
        release.to_str().unwrap(),
        None,
        KVEXACT_SHA256_CBOR,
        32,
        Some("0"),
        &hasher_options(None, null()),
    );
    let r = route_predict(ix, enc, h32, &body, 4096, 256, 8);
    assert_eq!(r.status, KVEXACT_ERR_INVALID_ARGUMENT);
    assert_eq!(r.refusal, KVEXACT_REFUSAL_NONE);
    let r = route_predict(null(), enc, h, &body, 4096, 256, 8);
    assert_eq!(r.status, KVEXACT_ERR_NULL_ARGUMENT);

    // Counters: a's stores counted, both in step.
    let mut st = vec![kvexact_index_rank_status::default(); 2];
    let mut n = 0;
    assert_eq!(
        unsafe { kvexact_index_status(ix, st.as_mut_ptr(), 2, &mut n) },
        KVEXACT_OK
    );
    assert_eq!(st[0].held_gpu, held.len() as u64);
    assert_eq!(st[0].stored, held.len() as u64);
    assert_eq!(
        (st[1].held_gpu, st[0].stream, st[1].stream),
        (1, KVEXACT_STREAM_IN_STEP, KVEXACT_STREAM_IN_STEP)
    );
    unsafe {
        kvexact_index_free(ix);
        kvexact_hasher_free(h);
        kvexact_hasher_free(h32);
        kvexact::encoder::kvexact_encoder_free(enc);
    }
}

#[test]
fn options_and_endpoints_are_checked() {
    let release = release_of(KVEXACT_SGLANG, "0.5.19");
    let mut ix = null_mut();
    // A struct_size from a newer header with an unknown field set.
    #[repr(C)]
    struct Newer {
        o: kvexact_index_options,
        extra: u64,
    }
    let newer = Newer {
        o: kvexact_index_options {
            struct_size: std::mem::size_of::<Newer>() as u32,
            max_slots: 0,
            groups: null(),
            n_groups: 0,
        },
        extra: 1,
    };
    let st =
        unsafe { kvexact_index_new(release.as_ptr(), null(), 16, &newer.o, &mut ix, null_mut()) };
    assert_eq!((st, ix.is_null()), (KVEXACT_ERR_INVALID_ARGUMENT, true));
    // SGLang has no sliding-window groups.
    let g = [
        kvexact_index_group {
            kind: KVEXACT_GROUP_FULL_ATTENTION,
            block_size: 16,
            sliding_window: 0,
        },
        kvexact_index_group {
            kind: KVEXACT_GROUP_SLIDING_WINDOW,
            block_size: 16,
            sliding_window: 64,
        },
    ];
    let opts = kvexact_index_options {
        struct_size: std::mem::size_of::<kvexact_index_options>() as u32,
        max_slots: 0,
        groups: g.as_ptr(),
        n_groups: 2,
    };
    let mut err = null_mut();
    let st = unsafe { kvexact_index_new(release.as_ptr(), null(), 16, &opts, &mut ix, &mut err) };
    assert_eq!(st, KVEXACT_ERR_PREFIX_HIT_RULE);
    assert_eq!(take_err(err).1, "PREFIX_HIT_RULE");
    let bad = kvexact_index_group {
        kind: 7,
        block_size: 16,
        sliding_window: 0,
    };
    let opts = kvexact_index_options {
        groups: &bad,
        n_groups: 1,
        ..opts
    };
    let st = unsafe { kvexact_index_new(release.as_ptr(), null(), 16, &opts, &mut ix, null_mut()) };
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    // A version no release has.
    let v = CString::new("0.0.1").unwrap();
    let c = CString::new("sglang-kv-rank-v1").unwrap();
    let st = unsafe { kvexact_index_new(c.as_ptr(), v.as_ptr(), 16, null(), &mut ix, null_mut()) };
    assert_eq!(st, KVEXACT_ERR_UNKNOWN_ENGINE_VERSION);
    assert!(ix.is_null());

    let ix = new_index(&release, 16, &[]);
    let mut e = kvexact_index_endpoint {
        struct_size: std::mem::size_of::<kvexact_index_endpoint>() as u32,
        dp_ranks: 0,
        name: b"x".as_ptr(),
        name_len: 1,
        gpu_blocks: 10,
        other_blocks: 0,
        lora_adapters: 0,
        replay: 0,
        starts_empty: 0,
    };
    let mut id = 77;
    assert_eq!(
        unsafe { kvexact_index_add_endpoint(ix, &e, &mut id, null_mut()) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    e.dp_ranks = 1;
    e.name = [0xffu8].as_ptr();
    assert_eq!(
        unsafe { kvexact_index_add_endpoint(ix, &e, &mut id, null_mut()) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(id, 77);
    e.name = b"x".as_ptr();
    // A capacity past the index's 32-bit copy counters.
    e.gpu_blocks = u64::from(u32::MAX) + 1;
    assert_eq!(
        unsafe { kvexact_index_add_endpoint(ix, &e, &mut id, null_mut()) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    e.gpu_blocks = 10;
    e.other_blocks = u64::MAX;
    assert_eq!(
        unsafe { kvexact_index_add_endpoint(ix, &e, &mut id, null_mut()) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(id, 77);
    e.other_blocks = 0;
    e.lora_adapters = 1;
    assert_eq!(
        unsafe { kvexact_index_add_endpoint(ix, &e, &mut id, null_mut()) },
        KVEXACT_OK
    );
    // SGLang 0.5.19's events do not show the adapter: unknown with adapters loaded.
    let p = predict(ix, &[1], 20);
    assert_eq!(
        (p[0].status, p[0].unknown_reason),
        (KVEXACT_PREDICTION_UNKNOWN, KVEXACT_UNKNOWN_UNSYNCED)
    );
    assert_eq!(
        unsafe { kvexact_index_reset_endpoint(ix, id, null_mut()) },
        KVEXACT_OK
    );
    let p = predict(ix, &[1], 20);
    assert_eq!(
        (p[0].status, p[0].unknown_reason),
        (
            KVEXACT_PREDICTION_UNKNOWN,
            KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS
        )
    );
    assert_eq!(p[0].other_media_tokens, -1);
    // Token counts are 32-bit: a longer prompt, or a prediction handed back with a larger
    // count, is refused.
    let mut out = [kvexact_index_prediction::default(); 4];
    let mut n = usize::MAX;
    let too_long = u32::MAX as usize + 1;
    assert_eq!(
        unsafe {
            kvexact_index_predict(
                ix,
                [1u64].as_ptr(),
                1,
                too_long,
                0,
                out.as_mut_ptr(),
                out.len(),
                &mut n,
                null_mut(),
            )
        },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(n, usize::MAX);
    let mut obs = 99;
    for (tokens, other) in [(u64::from(u32::MAX) + 1, 0), (16, i64::from(u32::MAX) + 1)] {
        let big = kvexact_index_prediction {
            endpoint: id,
            status: KVEXACT_PREDICTION_CACHED,
            tokens,
            other_media_tokens: other,
            ..Default::default()
        };
        assert_eq!(
            unsafe { kvexact_index_observe(ix, &big, b"q".as_ptr(), 1, 0, &mut obs, null_mut()) },
            KVEXACT_ERR_INVALID_ARGUMENT
        );
    }
    assert_eq!(obs, 99);
    assert_eq!(
        unsafe { kvexact_index_replay_failed(ix, id, 1, null_mut()) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_index_replay_failed(ix, 9, 0, null_mut()) },
        KVEXACT_ERR_UNKNOWN_ENDPOINT
    );
    // Applied out-struct too small: refused before any work.
    let mut a = kvexact_index_applied {
        struct_size: 4,
        ..Default::default()
    };
    let st = unsafe { kvexact_index_feed_json(ix, id, b"[]".as_ptr(), 2, &mut a, null_mut()) };
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    let mut n = 0;
    let mut st_buf = [kvexact_index_rank_status::default(); 1];
    assert_eq!(
        unsafe { kvexact_index_status(ix, st_buf.as_mut_ptr(), 1, &mut n) },
        KVEXACT_OK
    );
    assert_eq!(st_buf[0].rejected, 0);
    // Prometheus text is whole or not written.
    let mut len = 0;
    assert_eq!(
        unsafe { kvexact_index_prometheus(ix, null_mut(), 0, &mut len) },
        KVEXACT_ERR_BUFFER_TOO_SMALL
    );
    let mut buf = vec![0u8; len];
    assert_eq!(
        unsafe { kvexact_index_prometheus(ix, buf.as_mut_ptr(), len, &mut len) },
        KVEXACT_OK
    );
    assert!(String::from_utf8(buf)
        .unwrap()
        .contains("kvexact_index_in_step{endpoint=\"x\",rank=\"0\"} 1"));
    unsafe { kvexact_index_free(ix) };
}

/// Request threads predict through the ABI while an event thread feeds one shared index: in
/// the shared-prefix replay nothing is ever removed, so each endpoint's count for a fixed
/// request can only grow while it is fed, each answer reflects whole batches (a multiple of
/// the block size), and every thread ends at the count of the fully fed index.
#[test]
fn predictions_run_while_events_are_fed() {
    let path = repo().join("testdata/vectors/cachehit/vllm-0.31.0-shared-prefix.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let release = release_of(KVEXACT_VLLM, "0.31.0");
    let h = hasher_for_contract(
        release.to_str().unwrap(),
        None,
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
        &hasher_options(None, null()),
    );
    let ix = Shared(new_index(&release, 16, &[]));
    let names: Vec<String> = doc["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let ids: HashMap<String, u32> = names
        .iter()
        .map(|n| (n.clone(), add(ix.0, n, 4095)))
        .collect();
    let steps = doc["steps"].as_array().unwrap();
    // Every query's keys; the threads ask them all, round after round.
    let queries: Vec<(Vec<u64>, usize)> = steps
        .iter()
        .filter(|s| s["kind"] == "query")
        .map(|s| {
            let toks: Vec<u32> = s["token_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect();
            let mut hashes = vec![0u64; toks.len() / 16];
            let n = unsafe {
                kvexact_block_hashes_u64(
                    h,
                    toks.as_ptr(),
                    toks.len(),
                    1,
                    hashes.as_mut_ptr(),
                    hashes.len(),
                )
            };
            assert_eq!(n as usize, hashes.len());
            (hashes, toks.len())
        })
        .collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    let seen: Vec<Vec<Vec<u64>>> = std::thread::scope(|sc| {
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (ix, queries, done) = (&ix, &queries, &done);
                sc.spawn(move || {
                    let mut last = vec![vec![0u64; 3]; queries.len()];
                    loop {
                        let finished = done.load(std::sync::atomic::Ordering::Acquire);
                        for (q, (hashes, prompt)) in queries.iter().enumerate() {
                            let p = predict(ix.0, hashes, *prompt);
                            for (e, pr) in p.iter().enumerate() {
                                assert_eq!(pr.status, KVEXACT_PREDICTION_CACHED);
                                assert_eq!(pr.tokens % 16, 0);
                                assert!(
                                    pr.tokens >= last[q][e],
                                    "query {q} endpoint {e}: {} after {}",
                                    pr.tokens,
                                    last[q][e]
                                );
                                last[q][e] = pr.tokens;
                            }
                        }
                        if finished {
                            return last;
                        }
                    }
                })
            })
            .collect();
        for s in steps.iter().filter(|s| s["kind"] == "events") {
            let seq = hex::decode(s["seq_frame_hex"].as_str().unwrap()).unwrap();
            let payload = hex::decode(s["payload_hex"].as_str().unwrap()).unwrap();
            feed(
                ix.0,
                ids[s["endpoint"].as_str().unwrap()],
                0,
                b"",
                &seq,
                &payload,
            );
        }
        done.store(true, std::sync::atomic::Ordering::Release);
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let fed: Vec<Vec<u64>> = queries
        .iter()
        .map(|(hs, n)| predict(ix.0, hs, *n).iter().map(|p| p.tokens).collect())
        .collect();
    assert!(fed.iter().flatten().any(|&t| t > 0));
    for s in &seen {
        assert_eq!(s, &fed);
    }
    unsafe {
        kvexact_index_free(ix.0);
        kvexact_hasher_free(h);
    }
}

#[test]
fn drift_verifiers_of_a_deployment_rederive_speculative_and_adapter_blocks() {
    // kvexact_drift_verifier_new_for_deployment: every block the engines of the EAGLE (bigram
    // pages), look-ahead and adapter replays published re-derives; none is unverifiable.
    use kvexact::drift::*;
    for name in [
        "sglang-0.5.19-eagle.json",
        "vllm-0.33.0-specdec-l3.json",
        "vllm-0.33.0-lora-salt.json",
    ] {
        let doc: Value = serde_json::from_slice(
            &std::fs::read(repo().join("testdata/vectors/cachehit").join(name)).unwrap(),
        )
        .unwrap();
        let dep = deployment_of_replay(&doc);
        let mut verifiers: HashMap<String, *mut kvexact_drift_verifier> = HashMap::new();
        for s in doc["steps"].as_array().unwrap() {
            if s["kind"] != "events" {
                continue;
            }
            let v = *verifiers
                .entry(s["endpoint"].as_str().unwrap().to_string())
                .or_insert_with(|| {
                    let mut v = null_mut();
                    let mut err = null_mut();
                    let st = unsafe {
                        kvexact_drift_verifier_new_for_deployment(dep, null(), &mut v, &mut err)
                    };
                    assert_eq!(
                        st,
                        KVEXACT_OK,
                        "{:?}",
                        (st != KVEXACT_OK).then(|| take_err(err))
                    );
                    v
                });
            let topic = s["topic"].as_str().unwrap().as_bytes();
            let seq = hex::decode(s["seq_frame_hex"].as_str().unwrap()).unwrap();
            let payload = hex::decode(s["payload_hex"].as_str().unwrap()).unwrap();
            let st = unsafe {
                kvexact_drift_feed_frames(
                    v,
                    topic.as_ptr(),
                    topic.len(),
                    seq.as_ptr(),
                    seq.len(),
                    payload.as_ptr(),
                    payload.len(),
                    null_mut(),
                )
            };
            assert_eq!(st, KVEXACT_OK, "{name}");
        }
        let mut matched = 0;
        for (ep, v) in verifiers {
            let mut c: kvexact_drift_counters = unsafe { std::mem::zeroed() };
            c.struct_size = std::mem::size_of::<kvexact_drift_counters>();
            assert_eq!(unsafe { kvexact_drift_get_counters(v, &mut c) }, KVEXACT_OK);
            assert_eq!(
                (c.unverifiable, c.mismatched, c.matched),
                (0, 0, c.blocks_seen),
                "{name} {ep}"
            );
            matched += c.matched;
            unsafe { kvexact_drift_verifier_free(v) };
        }
        assert!(matched > 50, "{name}: {matched}");
        unsafe { kvexact_deployment_free(dep) };
    }
}

/// Issue #59 through the C ABI: batch 2^64 − 1 is applied once (then the stream is out of
/// step: a second batch of that number with another block is lost, not applied); a stream
/// marked lost is `unknown` (`KVEXACT_UNKNOWN_STREAM_LOST`) at once and in step again at
/// the next number; one gap gives one `KVEXACT_APPLIED_REPLAY_FROM`, later batches
/// `KVEXACT_APPLIED_REPLAY_PENDING`; the declared capacity is checked against the engine's.
#[test]
fn stream_health_the_caller_can_state() {
    let release = release_of(KVEXACT_VLLM, "0.31.0");
    let ix = new_index(&release, 16, &[]);
    let (c, d) = (0xC0FF_EE00_0000_0001u64, 0xC0FF_EE00_0000_0002u64);
    let status = |ix: *const kvexact_index| {
        let mut st = vec![kvexact_index_rank_status::default(); 8];
        let mut n = 0;
        assert_eq!(
            unsafe { kvexact_index_status(ix, st.as_mut_ptr(), st.len(), &mut n) },
            KVEXACT_OK
        );
        st.truncate(n);
        st
    };
    // The last sequence number.
    let e = add(ix, "e", 100);
    let max = u64::MAX.to_be_bytes();
    assert_eq!(
        feed(ix, e, 0, b"", &max, &stored_payload(c)).outcome,
        KVEXACT_APPLIED
    );
    assert_eq!(
        feed(ix, e, 0, b"", &max, &stored_payload(d)).outcome,
        KVEXACT_APPLIED_LOST
    );
    let p = predict(ix, &[d], 17);
    assert_eq!(
        (p[0].status, p[0].unknown_reason),
        (KVEXACT_PREDICTION_UNKNOWN, KVEXACT_UNKNOWN_OUT_OF_STEP),
        "block D was never applied"
    );
    assert_eq!(status(ix)[0].stream, KVEXACT_STREAM_OUT_OF_STEP);
    assert_eq!(
        unsafe { kvexact_index_remove_endpoint(ix, e, null_mut()) },
        KVEXACT_OK
    );

    // Marked lost: unknown at once, in step again at the next number.
    let e = add(ix, "f", 100);
    assert_eq!(
        feed(ix, e, 0, b"", &0u64.to_be_bytes(), &stored_payload(c)).outcome,
        KVEXACT_APPLIED
    );
    assert_eq!(predict(ix, &[c], 17)[0].tokens, 16);
    assert_eq!(
        unsafe { kvexact_index_mark_lost(ix, e, KVEXACT_INDEX_ALL_RANKS, null_mut()) },
        KVEXACT_OK
    );
    let p = predict(ix, &[c], 17);
    assert_eq!(
        (p[0].status, p[0].unknown_reason),
        (KVEXACT_PREDICTION_UNKNOWN, KVEXACT_UNKNOWN_STREAM_LOST)
    );
    assert_eq!(status(ix)[0].stream, KVEXACT_STREAM_LOST);
    assert_eq!(
        feed(ix, e, 0, b"", &1u64.to_be_bytes(), &stored_payload(d)).outcome,
        KVEXACT_APPLIED
    );
    assert_eq!(predict(ix, &[c], 17)[0].tokens, 16);
    assert_eq!(status(ix)[0].stream, KVEXACT_STREAM_IN_STEP);
    let mut err = null_mut();
    assert_eq!(
        unsafe { kvexact_index_mark_lost(ix, e, 1, &mut err) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(take_err(err).1, "UNKNOWN_RANK");
    assert_eq!(
        unsafe { kvexact_index_mark_lost(ix, 999, 0, null_mut()) },
        KVEXACT_ERR_UNKNOWN_ENDPOINT
    );
    assert_eq!(
        unsafe { kvexact_index_mark_lost(null(), e, 0, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );

    // One REPLAY_FROM per gap.
    let name = "g";
    let ep = kvexact_index_endpoint {
        struct_size: std::mem::size_of::<kvexact_index_endpoint>() as u32,
        dp_ranks: 1,
        name: name.as_ptr(),
        name_len: name.len(),
        gpu_blocks: 100,
        other_blocks: 0,
        lora_adapters: 0,
        replay: 1,
        starts_empty: 1,
    };
    let mut g = 0;
    assert_eq!(
        unsafe { kvexact_index_add_endpoint(ix, &ep, &mut g, null_mut()) },
        KVEXACT_OK
    );
    feed(ix, g, 0, b"", &0u64.to_be_bytes(), &stored_payload(c));
    let first = feed(ix, g, 0, b"", &5u64.to_be_bytes(), &stored_payload(d));
    assert_eq!(
        (first.outcome, first.replay_from),
        (KVEXACT_APPLIED_REPLAY_FROM, 1)
    );
    for seq in 6..14u64 {
        let a = feed(ix, g, 0, b"", &seq.to_be_bytes(), &stored_payload(d));
        assert_eq!(
            (a.outcome, a.replay_from),
            (KVEXACT_APPLIED_REPLAY_PENDING, 1),
            "batch {seq}"
        );
    }
    assert_eq!(status(ix).iter().find(|s| s.endpoint == g).unwrap().gaps, 1);
    assert_eq!(
        unsafe { kvexact_index_replay_failed(ix, g, 0, null_mut()) },
        KVEXACT_OK
    );
    assert_eq!(
        feed(ix, g, 0, b"", &14u64.to_be_bytes(), &stored_payload(d)).outcome,
        KVEXACT_APPLIED_LOST
    );

    // The declared capacity against the engine's.
    let mut m = u32::MAX;
    assert_eq!(
        unsafe {
            kvexact_index_check_capacity(
                ix,
                g,
                100,
                KVEXACT_CAPACITY_NOT_STATED,
                &mut m,
                null_mut(),
            )
        },
        KVEXACT_OK
    );
    assert_eq!(m, 0);
    assert_eq!(
        unsafe { kvexact_index_check_capacity(ix, g, 4095, 7, &mut m, null_mut()) },
        KVEXACT_OK
    );
    assert_eq!(
        m,
        KVEXACT_CAPACITY_GPU_DIFFERS | KVEXACT_CAPACITY_OTHER_DIFFERS
    );
    assert_eq!(
        unsafe { kvexact_index_check_capacity(ix, g, 100, 0, null_mut(), null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    unsafe { kvexact_index_free(ix) };
}

#[test]
fn an_engine_launched_otherwise_than_declared_names_the_option() {
    // kvexact_deployment_check over the replays' own events: the declared deployment agrees
    // with every batch; a plain deployment declared for a speculative engine, or another
    // block size, is DEPLOYMENT_MISMATCH naming the option.
    let check = |dep: *const kvexact_deployment, payload: &[u8]| {
        let mut err = null_mut();
        let st = unsafe {
            kvexact_deployment_check(
                dep,
                KVEXACT_DEPLOYMENT_EVIDENCE_EVENTS,
                payload.as_ptr(),
                payload.len(),
                &mut err,
            )
        };
        (st, (st != KVEXACT_OK).then(|| take_err(err)))
    };
    let declare = |engine: kvexact_engine, version: &str, doc: &str| {
        let v = CString::new(version).unwrap();
        let mut d = null_mut();
        let st = unsafe {
            kvexact_deployment_new(
                engine,
                v.as_ptr(),
                doc.as_ptr(),
                doc.len(),
                &mut d,
                null_mut(),
            )
        };
        assert_eq!(st, KVEXACT_OK, "{doc}");
        d
    };
    for (name, engine, version, wrong_doc, option) in [
        (
            "vllm-0.33.0-specdec-l1.json",
            KVEXACT_VLLM,
            "0.33.0",
            r#"{"hashSeed": "0", "hashAlgorithm": "sha256_cbor"}"#,
            "speculative",
        ),
        (
            "vllm-0.34.0-specdec-l3.json",
            KVEXACT_VLLM,
            "0.34.0",
            r#"{"hashSeed": "0", "speculative": {"method": "eagle", "numSpeculativeTokens": 3}}"#,
            "speculative",
        ),
        (
            "sglang-0.5.19-eagle.json",
            KVEXACT_SGLANG,
            "0.5.19",
            r#"{"blockSize": 16}"#,
            "speculative",
        ),
        (
            "vllm-0.34.0-shared-prefix.json",
            KVEXACT_VLLM,
            "0.34.0",
            r#"{"hashSeed": "0", "blockSize": 16}"#,
            "blockSize",
        ),
    ] {
        let doc: Value = serde_json::from_slice(
            &std::fs::read(repo().join("testdata/vectors/cachehit").join(name)).unwrap(),
        )
        .unwrap();
        let right = deployment_of_replay(&doc);
        let wrong = declare(engine, version, wrong_doc);
        let (mut batches, mut caught) = (0, 0);
        for s in doc["steps"].as_array().unwrap() {
            if s["kind"] != "events" {
                continue;
            }
            let payload = hex::decode(s["payload_hex"].as_str().unwrap()).unwrap();
            assert_eq!(check(right, &payload), (KVEXACT_OK, None), "{name}");
            if let (KVEXACT_ERR_DEPLOYMENT_MISMATCH, Some((_, code, msg))) = check(wrong, &payload)
            {
                assert_eq!(code, "DEPLOYMENT_MISMATCH");
                assert!(msg.starts_with(option), "{name}: {msg}");
                caught += 1;
            }
            batches += 1;
        }
        // Every batch that stores a block shows it; a batch of removals alone does not.
        assert!(
            caught > 0 && caught <= batches,
            "{name}: {caught} of {batches}"
        );
        unsafe { kvexact_deployment_free(right) };
        unsafe { kvexact_deployment_free(wrong) };
    }
    // vLLM's /metrics: the cache configuration gauge shows the block size and algorithm.
    let d = declare(KVEXACT_VLLM, "0.34.0", r#"{"hashSeed": "0"}"#);
    let metrics = |b: u32, a: &str| {
        format!("# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{block_size=\"{b}\",enable_prefix_caching=\"True\",num_gpu_blocks=\"2048\",prefix_caching_hash_algo=\"{a}\"}} 1.0\n")
    };
    let check_metrics = |text: &str| {
        let mut err = null_mut();
        let st = unsafe {
            kvexact_deployment_check(
                d,
                KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_METRICS,
                text.as_ptr(),
                text.len(),
                &mut err,
            )
        };
        (st, (st != KVEXACT_OK).then(|| take_err(err)))
    };
    // 0.34 without --block-size: 64-token blocks, sha256.
    assert_eq!(check_metrics(&metrics(64, "sha256")), (KVEXACT_OK, None));
    let (st, e) = check_metrics(&metrics(16, "sha256"));
    assert_eq!(st, KVEXACT_ERR_DEPLOYMENT_MISMATCH);
    assert!(e.unwrap().2.starts_with("blockSize"));
    let (st, e) = check_metrics(&metrics(64, "xxhash"));
    assert_eq!(st, KVEXACT_ERR_DEPLOYMENT_MISMATCH);
    assert!(e.unwrap().2.starts_with("hashAlgorithm"));
    assert_eq!(
        check_metrics("vllm:num_requests_running 0\n"),
        (KVEXACT_OK, None)
    );
    unsafe { kvexact_deployment_free(d) };
}
