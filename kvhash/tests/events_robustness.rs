//! Malformed, truncated, oversized and unexpected input: always a typed error that says
//! where, never a panic.

use kvhash::events::{
    decode_frames, decode_json, decode_json_with, decode_payload, decode_payload_with,
    decode_replay_reply, EventFormat, Limits,
};
use kvhash::Error;
use serde_json::Value;

fn load(engine: &str) -> Value {
    let path = format!(
        "{}/../testdata/vectors/{engine}/kv_events.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every msgpack payload of a vector file (vLLM `payload_hex`, SGLang batches' `payload_hex`).
fn payloads(engine: &str) -> Vec<Vec<u8>> {
    fn walk(v: &Value, out: &mut Vec<Vec<u8>>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "payload_hex" {
                        if let Some(s) = x.as_str() {
                            out.push(hex::decode(s).unwrap());
                        }
                    } else {
                        walk(x, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&load(engine), &mut out);
    assert!(!out.is_empty());
    out
}

fn bodies() -> Vec<Vec<u8>> {
    load("trtllm")["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["decoded"].is_array())
        .map(|c| c["response_body"].as_str().unwrap().as_bytes().to_vec())
        .collect()
}

const MSGPACK: [(&str, EventFormat); 2] = [
    ("vllm", EventFormat::VllmKvMapV3),
    ("sglang", EventFormat::SglangKvRankV1),
];

#[test]
fn truncation_at_every_offset_is_an_error_with_a_location() {
    for (engine, fmt) in MSGPACK {
        for p in payloads(engine) {
            assert!(decode_payload(fmt, &p).is_ok());
            for cut in 0..p.len() {
                let err = decode_payload(fmt, &p[..cut]).expect_err("a strict prefix must fail");
                let at = err.event_location().expect("located");
                assert!(at.offset.is_some(), "{err}");
            }
        }
    }
    for b in bodies() {
        assert!(decode_json(EventFormat::TrtllmKvHttpPreviewV1, &b).is_ok());
        for cut in 0..b.len() {
            assert!(decode_json(EventFormat::TrtllmKvHttpPreviewV1, &b[..cut]).is_err());
        }
    }
}

#[test]
fn single_byte_corruption_never_panics() {
    for (engine, fmt) in MSGPACK {
        for p in payloads(engine) {
            for i in 0..p.len() {
                for v in [0x00, 0x80, 0xc1, 0xcf, 0xdd, 0xff] {
                    let mut q = p.clone();
                    q[i] = v;
                    let _ = decode_payload(fmt, &q);
                    // Other formats on the same bytes must also fail cleanly or decode.
                    for other in EventFormat::ALL {
                        let _ = decode_payload(other, &q);
                    }
                }
            }
        }
    }
    for b in bodies().into_iter().take(3) {
        for i in (0..b.len()).step_by(7) {
            for v in [b'"', b'[', b'{', b'-', b'9', b'.', b'e', 0xff] {
                let mut q = b.clone();
                q[i] = v;
                let _ = decode_json(EventFormat::TrtllmKvHttpPreviewV1, &q);
            }
        }
    }
}

#[test]
fn errors_name_frame_offset_and_path() {
    let doc = load("vllm");
    let c = &doc["cases"][0];
    let frames: Vec<Vec<u8>> = c["frames_hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| hex::decode(f.as_str().unwrap()).unwrap())
        .collect();
    // Cut the payload inside the token ids.
    let cut = frames[2].len() - 120;
    let refs: Vec<&[u8]> = vec![&frames[0], &frames[1], &frames[2][..cut]];
    let err = decode_frames(EventFormat::VllmKvMapV3, &refs).unwrap_err();
    let at = err.event_location().unwrap();
    assert_eq!(at.frame, Some(2));
    assert_eq!(at.path, "events[0].token_ids");
    assert!(err.to_string().contains("frame 2"), "{err}");

    // A hash encoded as a negative integer in vLLM: out of range, located.
    let mut p = frames[2].clone();
    let pos = p.windows(2).position(|w| w == [0x92, 0xcf]).unwrap() + 1;
    p[pos] = 0xd3; // int64 …
    p[pos + 1] = 0xff; // … with the top bit set: negative
    let err = decode_payload(EventFormat::VllmKvMapV3, &p).unwrap_err();
    assert!(
        matches!(&err, Error::EventIntegerOutOfRange { at, .. } if at.path == "events[0].block_hashes[0]"),
        "{err:?}"
    );

    // Wrong frame count and a short sequence frame.
    assert!(matches!(
        decode_frames(EventFormat::VllmKvMapV3, &refs[..2]),
        Err(Error::EventFrameCount { found: 2, .. })
    ));
    let bad_seq: Vec<&[u8]> = vec![&frames[0], &frames[1][..7], &frames[2]];
    assert!(matches!(
        decode_frames(EventFormat::VllmKvMapV3, &bad_seq),
        Err(Error::EventBadFrame { frame: 1, .. })
    ));
    // Replay: 4 frames for vLLM 0.31, non-empty delimiter refused.
    let reply: Vec<&[u8]> = vec![b"x", b"", &frames[1], &frames[2]];
    assert!(matches!(
        decode_replay_reply(EventFormat::VllmKvMapV3, &reply),
        Err(Error::EventBadFrame { frame: 0, .. })
    ));

    // TRT: JSON path, float where an integer is required, integer beyond 64 bits.
    let body = br#"[{"event_id":1,"data":{"type":"removed","block_hashes":[1,2.0]}}]"#;
    let err = decode_json(EventFormat::TrtllmKvHttpV1, body).unwrap_err();
    assert!(
        matches!(&err, Error::EventUnexpectedType { at, .. } if at.path == "$[0].data.block_hashes[1]"),
        "{err:?}"
    );
    let body =
        br#"[{"event_id":1,"data":{"type":"removed","block_hashes":[18446744073709551616]}}]"#;
    assert!(decode_json(EventFormat::TrtllmKvHttpV1, body).is_err());
    let body =
        br#"[{"event_id":1,"data":{"type":"removed","block_hashes":[18446744073709551615, -1]}}]"#;
    let b = decode_json(EventFormat::TrtllmKvHttpV1, body).unwrap();
    assert_eq!(b.events.len(), 1);
}

#[test]
fn unknown_event_types_are_refused_not_guessed() {
    // [ts, [{"type": "BlockMoved"}], 0]
    let p = hex::decode("93cb41da556e401000009181a474797065aa426c6f636b4d6f76656400").unwrap();
    assert!(matches!(
        decode_payload(EventFormat::VllmKvMapV3, &p),
        Err(Error::EventUnknownType { name, .. }) if name == "BlockMoved"
    ));
    // ["BlockMoved"] as a tagged array.
    let p = hex::decode("93cb41da556e401000009191aa426c6f636b4d6f76656400").unwrap();
    assert!(matches!(
        decode_payload(EventFormat::SglangKvRankV1, &p),
        Err(Error::EventUnknownType { .. })
    ));
    let body = br#"[{"event_id":1,"data":{"type":"teleported"}}]"#;
    assert!(matches!(
        decode_json(EventFormat::TrtllmKvHttpPreviewV1, body),
        Err(Error::EventUnknownType { .. })
    ));
    // A map event without "type", and with a duplicate key.
    let p = hex::decode("93cb41da556e401000009180".to_string() + "00").unwrap();
    assert!(matches!(
        decode_payload(EventFormat::VllmKvMapV3, &p),
        Err(Error::EventMissingField { field: "type", .. })
    ));
    let p = hex::decode(
        "93cb41da556e401000009182a474797065b0416c6c426c6f636b73436c6561726564a474797065b0416c6c426c6f636b73436c656172656400",
    )
    .unwrap();
    assert!(matches!(
        decode_payload(EventFormat::VllmKvMapV3, &p),
        Err(Error::EventDuplicateField { .. })
    ));
    // Trailing bytes after the batch.
    let p = hex::decode("93cb41da556e401000009181a474797065b0416c6c426c6f636b73436c65617265640100")
        .unwrap();
    assert!(matches!(
        decode_payload(EventFormat::VllmKvMapV3, &p),
        Err(Error::EventTrailingBytes { count: 1, .. })
    ));
    // JSON for a msgpack format and the reverse.
    assert!(matches!(
        decode_json(EventFormat::VllmKvMapV3, b"[]"),
        Err(Error::EventWrongInputKind { .. })
    ));
    assert!(matches!(
        decode_payload(EventFormat::TrtllmKvHttpV1, &[0x90]),
        Err(Error::EventWrongInputKind { .. })
    ));
}

#[test]
fn oversized_and_deeply_nested_input_hits_the_caps() {
    // Deep nesting inside an unknown (skipped) map field.
    let mut p =
        hex::decode("93cb41da556e401000009182a474797065b0416c6c426c6f636b73436c6561726564a178")
            .unwrap();
    p.extend(std::iter::repeat_n(0x91u8, 100_000));
    p.push(0x00);
    p.push(0x00);
    assert!(matches!(
        decode_payload(EventFormat::VllmKvMapV3, &p),
        Err(Error::EventLimitExceeded {
            limit: "nesting depth",
            ..
        })
    ));
    // An array header announcing 2^32-1 elements in a tiny payload.
    let p = hex::decode("93cb41da556e40100000ddffffffff00").unwrap();
    assert!(decode_payload(EventFormat::VllmKvMapV3, &p).is_err());
    // Tight limits: payload size, events per batch, element count, string size.
    let doc = load("vllm");
    let p = hex::decode(doc["cases"][0]["payload_hex"].as_str().unwrap()).unwrap();
    let tight = |f: fn(&mut Limits)| {
        let mut l = Limits::default();
        f(&mut l);
        decode_payload_with(EventFormat::VllmKvMapV3, &p, &l)
    };
    assert!(matches!(
        tight(|l| l.max_input_bytes = 10),
        Err(Error::EventLimitExceeded {
            limit: "payload size",
            ..
        })
    ));
    assert!(matches!(
        tight(|l| l.max_events = 0),
        Err(Error::EventLimitExceeded {
            limit: "events per batch",
            ..
        })
    ));
    assert!(matches!(
        tight(|l| l.max_elements = 8),
        Err(Error::EventLimitExceeded {
            limit: "element count",
            ..
        })
    ));
    assert!(matches!(
        tight(|l| l.max_string_bytes = 4),
        Err(Error::EventLimitExceeded {
            limit: "string length",
            ..
        })
    ));
    // JSON: deep nesting is refused by the parser's recursion limit, not a stack overflow.
    let deep = "[".repeat(100_000);
    assert!(matches!(
        decode_json(EventFormat::TrtllmKvHttpV1, deep.as_bytes()),
        Err(Error::EventJsonSyntax { .. })
    ));
    let l = Limits {
        max_input_bytes: 4,
        ..Limits::default()
    };
    assert!(matches!(
        decode_json_with(EventFormat::TrtllmKvHttpV1, b"[   ]", &l),
        Err(Error::EventLimitExceeded { .. })
    ));
}

#[test]
fn trtllm_token_ids_outside_the_common_shape_take_the_checked_path() {
    use kvhash::events::EventKind;
    let body = br#"[{"event_id":0,"data":{"type":"stored","parent_hash":null,"blocks":[{"block_hash":1,"tokens":[{"token_id":3000000000},{"token_id":-1,"token_extra_id":null}]}]}}]"#;
    let b = decode_json(EventFormat::TrtllmKvHttpV1, body).unwrap();
    let EventKind::Stored(s) = &b.events[0].kind else {
        panic!()
    };
    let ids: Vec<u32> = s.blocks[0]
        .tokens
        .iter()
        .map(|t| t.token_id_u32())
        .collect();
    assert_eq!(ids, [3000000000, u32::MAX]);
    let body = br#"[{"event_id":0,"data":{"type":"stored","parent_hash":null,"blocks":[{"block_hash":1,"tokens":[{"token_id":5},{"token_id":1.0}]}]}}]"#;
    let err = decode_json(EventFormat::TrtllmKvHttpV1, body).unwrap_err();
    assert_eq!(
        err.event_location().unwrap().path,
        "$[0].data.blocks[0].tokens[1].token_id"
    );
    let body = br#"[{"event_id":0,"data":{"type":"stored","parent_hash":null,"blocks":[{"block_hash":1,"tokens":[{"token_id":4294967296}]}]}}]"#;
    assert!(matches!(
        decode_json(EventFormat::TrtllmKvHttpV1, body),
        Err(Error::EventIntegerOutOfRange { .. })
    ));
}
