//! Every case of the KV-event vector files decodes and matches its `decoded` form, field by
//! field; plus direct typed assertions that do not go through the comparator.

use kvexact_conformance::events as vectors;
use kvhash::events::{
    decode_frames, decode_json, decode_payload, decode_replay_reply, BlockHash, EventFormat,
    EventKind, ReplayReply, TokenShape,
};
use serde_json::Value;

fn load(engine: &str) -> Value {
    let path = format!(
        "{}/../testdata/vectors/{engine}/kv_events.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// The family schema of the reference release's wire format (the release schemas, from the
/// contract catalog, are checked against every vector set in `kvprobe/tests`).
fn family(engine: &str) -> &'static kvhash::events::EventSchema {
    kvhash::events::EventSchema::family(match engine {
        "vllm" => EventFormat::VllmKvMapV3,
        "sglang" => EventFormat::SglangKvRankV1,
        _ => EventFormat::TrtllmKvHttpPreviewV1,
    })
}

fn check_all(engine: &str, expected_cases: usize) {
    let doc = load(engine);
    assert!(vectors::is_kv_events_file(&doc));
    let results = vectors::check_file(&doc, family(engine)).unwrap();
    assert_eq!(results.len(), expected_cases);
    let failures: Vec<_> = results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("{}: {f}", r.name)))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn vllm_vectors_all_pass() {
    check_all("vllm", 14);
}

#[test]
fn sglang_vectors_all_pass() {
    check_all("sglang", 12);
}

#[test]
fn trtllm_vectors_all_pass() {
    check_all("trtllm", 11);
}

/// Applies `edit` to a copy of the file and returns the failures of the named case.
fn tampered(engine: &str, case: &str, edit: impl Fn(&mut Value)) -> Option<String> {
    let mut doc = load(engine);
    let c = doc["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == case)
        .unwrap();
    edit(c);
    let results = vectors::check_file(&doc, family(engine)).unwrap();
    let failed: Vec<_> = results.iter().filter(|r| r.failure.is_some()).collect();
    assert!(failed.len() <= 1, "only the tampered case may fail");
    failed.first().and_then(|r| r.failure.clone())
}

#[test]
fn comparator_catches_every_kind_of_tampering() {
    // vLLM: a hash off by one, its _str twin, a token, an optional field, an unknown field.
    let f = tampered("vllm", "int_stored_prefill_no_parent", |c| {
        c["decoded"]["events"][0]["block_hashes"][1] = serde_json::json!(7403838778858983849u64);
    })
    .expect("tampered hash must fail");
    assert!(f.contains("decoded.events[0].block_hashes[1]"), "{f}");
    assert!(tampered("vllm", "int_stored_prefill_no_parent", |c| {
        c["decoded"]["events"][0]["block_hashes_str"][0] = "1".into();
    })
    .is_some());
    assert!(tampered("vllm", "int_stored_lora_salt_mm", |c| {
        c["decoded"]["events"][0]["extra_keys"][1][1][1] = serde_json::json!(-11);
    })
    .is_some());
    assert!(tampered("vllm", "int_stored_lora_salt_mm", |c| {
        c["decoded"]["events"][0]["session_id"] = Value::Null;
    })
    .is_some());
    assert!(tampered("vllm", "all_blocks_cleared_only", |c| {
        c["decoded"]["events"][0]["surprise"] = 1.into();
    })
    .is_some());
    assert!(tampered("vllm", "bytes_removed_on_eviction", |c| {
        c["decoded"]["events"][0]["block_hashes"][0]["$bytes"] = "00".into();
    })
    .is_some());
    assert!(tampered("vllm", "int_replay_from_seq1", |c| {
        c["reply_frames_hex"].as_array_mut().unwrap().pop();
    })
    .is_some());
    assert!(tampered("vllm", "int_dp_rank1_topic", |c| {
        c["topic"] = "other".into();
    })
    .is_some());
    // SGLang: salt, u64 hex twin, rank, a dropped event.
    assert!(tampered("sglang", "cache_salt_p16", |c| {
        c["expected"]["batches"][1]["decoded"]["events"][0]["metadata"]["cache_salt"] =
            "tenant-b".into();
    })
    .is_some());
    assert!(tampered("sglang", "encoding_edges", |c| {
        c["expected"]["batches"][0]["decoded"]["events"][1]["parent_block_hash_u64_hex"] =
            "ffffffffffffff7e".into();
    })
    .is_some());
    assert!(tampered("sglang", "dp_rank_2", |c| {
        c["expected"]["batches"][1]["decoded"]["attn_dp_rank"] = 0.into();
    })
    .is_some());
    assert!(tampered("sglang", "replay_from_seq_1", |c| {
        c["expected"]["client_request_frames_hex"][1] = "0000000000000002".into();
    })
    .is_some());
    // TensorRT-LLM: a token id, the chain parent, uses_extra_ids, an mm offset.
    assert!(tampered("trtllm", "drain_fresh_engine_first_request", |c| {
        c["decoded"][1]["blocks"][0]["hash_inputs"]["token_ids_u32"][0] = 1.into();
    })
    .is_some());
    assert!(tampered("trtllm", "drain_fresh_engine_first_request", |c| {
        c["decoded"][1]["blocks"][1]["hash_inputs"]["parent_hash_used"] = 0.into();
    })
    .is_some());
    assert!(tampered("trtllm", "drain_salt_extra_lora_mm", |c| {
        c["decoded"][1]["blocks"][0]["hash_inputs"]["uses_extra_ids"] = false.into();
    })
    .is_some());
    assert!(tampered("trtllm", "drain_salt_extra_lora_mm", |c| {
        c["decoded"][3]["blocks"][1]["hash_inputs"]["mm_keys"][0]["start_offset"] = 28.into();
    })
    .is_some());
    assert!(tampered("trtllm", "server_info_current", |c| {
        c["decoded"]["tokens_per_block"] = 64.into();
    })
    .is_some());
}

fn case<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

fn frames(v: &Value) -> Vec<Vec<u8>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| hex::decode(f.as_str().unwrap()).unwrap())
        .collect()
}

#[test]
fn vllm_typed_decode_without_the_comparator() {
    let doc = load("vllm");
    let c = case(&doc, "int_stored_decode_with_parent");
    let fr = frames(&c["frames_hex"]);
    let refs: Vec<&[u8]> = fr.iter().map(Vec::as_slice).collect();
    let b = decode_frames(EventFormat::VllmKvMapV3, &refs).unwrap();
    assert_eq!(
        (b.seq, b.topic, b.rank, b.ts),
        (Some(1), Some(""), Some(0), Some(1767225600.25))
    );
    let EventKind::BlockStored(s) = &b.events[0].kind else {
        panic!()
    };
    assert_eq!(s.block_hashes, vec![BlockHash::U64(580158946789763506)]);
    assert_eq!(
        s.parent_block_hash,
        Some(BlockHash::U64(7403838778858983848))
    );
    assert_eq!(s.token_ids.len(), 16);
    assert_eq!(s.token_ids.to_vec().unwrap()[..2], [56282, 106207]);
    assert_eq!(s.kv_cache_spec_kind, Some("full_attention"));

    // Bytes mode: the indexed u64 is the digest's last 8 bytes, big-endian, which is the
    // int-mode value for the same tokens (docs/contracts/vllm.md §5).
    let c = case(&doc, "bytes_stored_prefill_no_parent");
    let p = hex::decode(c["payload_hex"].as_str().unwrap()).unwrap();
    let b = decode_payload(EventFormat::VllmKvMapV3, &p).unwrap();
    let EventKind::BlockStored(s) = &b.events[0].kind else {
        panic!()
    };
    let BlockHash::Bytes(d) = s.block_hashes[0] else {
        panic!()
    };
    assert_eq!(d.len(), 32);
    assert_eq!(
        s.block_hashes[0].to_u64(),
        u64::from_be_bytes(d[24..].try_into().unwrap())
    );

    // Replay: three batches then the end marker.
    let c = case(&doc, "int_replay_from_seq1");
    let mut seqs = Vec::new();
    for r in c["reply_frames_hex"].as_array().unwrap() {
        let fr = frames(r);
        let refs: Vec<&[u8]> = fr.iter().map(Vec::as_slice).collect();
        match decode_replay_reply(EventFormat::VllmKvMapV3, &refs).unwrap() {
            ReplayReply::Batch(b) => seqs.push(b.seq.unwrap()),
            ReplayReply::End => seqs.push(u64::MAX),
        }
    }
    assert_eq!(seqs, [1, 2, 3, u64::MAX]);
}

#[test]
fn sglang_typed_decode_without_the_comparator() {
    let doc = load("sglang");
    let b0 = &case(&doc, "encoding_edges")["expected"]["batches"][0];
    let p = hex::decode(b0["payload_hex"].as_str().unwrap()).unwrap();
    let b = decode_payload(EventFormat::SglangKvRankV1, &p).unwrap();
    let EventKind::BlockStored(s) = &b.events[0].kind else {
        panic!()
    };
    assert_eq!(
        s.block_hashes,
        [i64::from(-1), 0, i64::MAX, i64::MIN]
            .map(BlockHash::I64)
            .to_vec()
    );
    assert_eq!(s.block_hashes[0].to_u64(), u64::MAX);
    assert_eq!(s.medium, None);
    let EventKind::BlockStored(s) = &b.events[1].kind else {
        panic!()
    };
    assert_eq!(s.parent_block_hash, Some(BlockHash::I64(-129)));
    assert_eq!(s.parent_block_hash.unwrap().to_u64(), 0xffffffffffffff7f);
    assert_eq!(s.lora_id, Some(7));

    let b1 = &case(&doc, "cache_salt_p16")["expected"]["batches"][1];
    let p = hex::decode(b1["payload_hex"].as_str().unwrap()).unwrap();
    let b = decode_payload(EventFormat::SglangKvRankV1, &p).unwrap();
    let EventKind::BlockStored(s) = &b.events[0].kind else {
        panic!()
    };
    assert_eq!(s.cache_salt, Some("tenant-a"));

    let b1 = &case(&doc, "eagle_bigram_p16")["expected"]["batches"][1];
    let p = hex::decode(b1["payload_hex"].as_str().unwrap()).unwrap();
    let b = decode_payload(EventFormat::SglangKvRankV1, &p).unwrap();
    let EventKind::BlockStored(s) = &b.events[0].kind else {
        panic!()
    };
    assert_eq!(s.token_ids.shape(), TokenShape::Bigrams);
    assert!(s.token_ids.ids().is_none());
    assert_eq!(s.token_ids.bigrams().unwrap().next(), Some((83321, 145569)));
}

#[test]
fn trtllm_typed_decode_without_the_comparator() {
    let doc = load("trtllm");
    let body = case(&doc, "drain_salt_extra_lora_mm")["response_body"]
        .as_str()
        .unwrap();
    let b = decode_json(EventFormat::TrtllmKvHttpPreviewV1, body.as_bytes()).unwrap();
    let EventKind::Stored(s) = &b.events[0].kind else {
        panic!()
    };
    assert_eq!(s.blocks[0].block_hash, 14887250062803690526);
    assert_eq!(s.blocks[0].cache_salt.as_deref(), Some("tenant-A"));
    let last = b.events.last().unwrap();
    let EventKind::Stored(s) = &last.kind else {
        panic!()
    };
    assert_eq!(s.blocks[0].tokens[0].token_id, -1294967296);
    assert_eq!(s.blocks[0].tokens[0].token_id_u32(), 3000000000);
    assert_eq!(last.envelope.unwrap().event_id, 10);
}
