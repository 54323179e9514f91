//! `kvexact_event_decode` against every vLLM KV-event vector with a payload
//! (testdata/vectors/vllm/kv_events.json, vLLM 0.31.0 → schema `vllm-kv-map-v3`): kinds, u64
//! hashes (ints as sent, digest bytes → last 8 bytes big-endian), parents, token ids, DP rank.

use kvexact::events::*;
use kvexact::status::*;
use serde_json::Value;

fn u64_of(v: &Value) -> u64 {
    if let Some(b) = v.get("$bytes").and_then(Value::as_str) {
        let bytes = hex::decode(b).expect("hex");
        let tail = &bytes[bytes.len() - 8..];
        return u64::from_be_bytes(tail.try_into().expect("8 bytes"));
    }
    if let Some(s) = v.as_str() {
        return s.parse::<i128>().expect("decimal") as u64;
    }
    v.as_u64().expect("u64")
}

#[test]
fn vllm_event_vectors() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/vectors/vllm/kv_events.json"
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
    let mut dec: *mut kvexact_event_decoder = std::ptr::null_mut();
    let st = unsafe {
        kvexact_event_decoder_new(c"vllm-kv-map-v3".as_ptr(), std::ptr::null(), &mut dec)
    };
    assert_eq!(st, KVEXACT_OK);
    let mut checked = 0;
    for case in doc["cases"].as_array().expect("cases") {
        let (Some(hex_payload), Some(decoded)) =
            (case["payload_hex"].as_str(), case.get("decoded"))
        else {
            continue;
        };
        let name = case["name"].as_str().unwrap_or("?");
        let payload = hex::decode(hex_payload).expect("hex");
        let mut events: *const kvexact_event = std::ptr::null();
        let (mut n, mut rank) = (0usize, 0i64);
        let st = unsafe {
            kvexact_event_decode(
                dec,
                payload.as_ptr(),
                payload.len(),
                &mut events,
                &mut n,
                &mut rank,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(st, KVEXACT_OK, "{name}");
        let want_rank = decoded["data_parallel_rank"].as_i64().unwrap_or(-1);
        assert_eq!(rank, want_rank, "{name}: rank");
        let want = decoded["events"].as_array().expect("events");
        assert_eq!(n, want.len(), "{name}: event count");
        let got = unsafe { std::slice::from_raw_parts(events, n) };
        for (g, w) in got.iter().zip(want) {
            let kind = match w["type"].as_str() {
                Some("BlockStored") => KVEXACT_EVENT_STORED,
                Some("BlockRemoved") => KVEXACT_EVENT_REMOVED,
                _ => KVEXACT_EVENT_ALL_CLEARED,
            };
            assert_eq!(g.kind, kind, "{name}");
            let hashes = unsafe { std::slice::from_raw_parts(g.hashes, g.n_hashes) };
            let want_h: Vec<u64> = w["block_hashes_str"]
                .as_array()
                .or(w["block_hashes"].as_array())
                .map(|a| a.iter().map(u64_of).collect())
                .unwrap_or_default();
            assert_eq!(hashes, &want_h[..], "{name}: hashes");
            if kind == KVEXACT_EVENT_STORED {
                let toks = unsafe { std::slice::from_raw_parts(g.token_ids, g.n_tokens) };
                let want_t: Vec<u32> = w["token_ids"]
                    .as_array()
                    .expect("tokens")
                    .iter()
                    .map(|t| t.as_u64().expect("id") as u32)
                    .collect();
                assert_eq!(toks, &want_t[..], "{name}: tokens");
                assert_eq!(g.block_size as u64, w["block_size"].as_u64().expect("bs"));
                let parent = w
                    .get("parent_block_hash_str")
                    .or(w.get("parent_block_hash"))
                    .filter(|p| !p.is_null());
                assert_eq!(g.has_parent == 1, parent.is_some(), "{name}: parent");
                if let Some(p) = parent {
                    assert_eq!(g.parent_hash, u64_of(p), "{name}: parent hash");
                }
                assert_eq!(
                    g.has_lora == 1,
                    !w["lora_id"].is_null() || !w["lora_name"].is_null(),
                    "{name}: lora"
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} cases");

    // Garbage is a decode error with an error object; nothing is written.
    let mut err: *mut kvexact::error::kvexact_error = std::ptr::null_mut();
    let mut events: *const kvexact_event = std::ptr::null();
    let (mut n, mut rank) = (77usize, 77i64);
    let st = unsafe {
        kvexact_event_decode(
            dec,
            b"\xc1\xc1".as_ptr(),
            2,
            &mut events,
            &mut n,
            &mut rank,
            &mut err,
        )
    };
    assert!(
        st == KVEXACT_ERR_EVENT_DECODE || st == KVEXACT_ERR_EVENT_SCHEMA,
        "{st}"
    );
    assert_eq!((n, rank), (77, 77));
    assert!(!err.is_null());
    unsafe { kvexact::error::kvexact_error_free(err) };
    unsafe { kvexact_event_decoder_free(dec) };

    // Unknown and TensorRT-LLM schemas are refused at creation.
    let mut d2: *mut kvexact_event_decoder = std::ptr::null_mut();
    for id in [c"nope-v1", c"trtllm-kv-http-v1"] {
        let st = unsafe { kvexact_event_decoder_new(id.as_ptr(), std::ptr::null(), &mut d2) };
        assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    }
    assert!(d2.is_null());
}
