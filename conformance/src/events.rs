//! Checking decoded batches against the ground-truth vector files
//! (`testdata/vectors/{vllm,sglang,trtllm}/kv_events.json`).
//!
//! Used by this crate's tests and by `kvexact parity`. Each case's bytes are decoded with the
//! format the file's `engine`/`engine_version` speaks and compared **field by field** with the
//! case's `decoded` form; a failure names the first differing field path, expected vs got.
//!
//! Comparison rules (documented so that nothing is skipped silently):
//!
//! * Every key of the expected object is checked; a key the checker does not know is a
//!   failure, except the generator's provenance keys `python_class` and `wire_field_order`
//!   (SGLang) and prose `meaning` (TensorRT-LLM).
//! * `X_str` (decimal text) and `X_u64_hex` (16 hex digits) are compared with the decoded `X`.
//! * A decoded field absent from the expected object must be null.
//! * SGLang `metadata.cache_salt` is the decoded `cache_salt`.
//! * TensorRT-LLM blocks: `block_hash`, `n_tokens`, `hash_inputs.token_ids_u32` (the int32
//!   ids read as u32), `hash_inputs.cache_salt`, `hash_inputs.parent_hash_used` (the chain
//!   parent: `parent_hash` or 0 for the first block, the previous block after that),
//!   `hash_inputs.mm_keys` and `hash_inputs.uses_extra_ids` (a non-zero `token_extra_id` must
//!   have `true`) are checked. Not on the wire, so not checked: `full`,
//!   `block_index_in_sequence`, `lora_task_id` (V1 JSON omits the LoRA id) and
//!   `cache_salt_mode`.
//! * Replay cases: the request frames must equal [`kvhash::events::replay_request`]; every reply must
//!   decode, carry consecutive sequence numbers from `start_seq`, equal (payload and decoded
//!   batch) the live message with the same sequence, and end with the end marker.

use crate::CaseResult;
use kvhash::events::{
    decode_frames_schema, decode_json, decode_payload_schema, decode_replay_reply_schema,
    decode_server_info, replay_request, EventBatch, EventFormat, EventKind, EventSchema, Limits,
    ReplayReply,
};
use serde_json::{json, Map, Value};

/// Does this document look like a KV-event vector file? (A top-level `engine` and cases that
/// carry wire bytes: `frames_hex`, `payload_hex`, `reply_frames_hex`, `response_body`, or
/// SGLang's `expected.batches` / `expected.live_frames_hex`.) Block-hash files, whose cases
/// hold `inputs`/`expected` pages or blocks, are not claimed.
pub fn is_kv_events_file(doc: &Value) -> bool {
    let Some(engine) = doc.get("engine").and_then(Value::as_str) else {
        return false;
    };
    if !matches!(engine, "vllm" | "sglang" | "trtllm") {
        return false;
    }
    let Some(cases) = doc.get("cases").and_then(Value::as_array) else {
        return false;
    };
    !cases.is_empty()
        && cases.iter().all(|c| {
            [
                "frames_hex",
                "payload_hex",
                "reply_frames_hex",
                "response_body",
            ]
            .iter()
            .any(|k| c.get(k).is_some())
                || c.pointer("/expected/batches").is_some()
                || c.pointer("/expected/live_frames_hex").is_some()
        })
}

/// The `engine` and `engine_version` a KV-event vector file names at its top level.
pub fn engine_version(doc: &Value) -> Result<(&str, &str), String> {
    let engine = doc
        .get("engine")
        .and_then(Value::as_str)
        .ok_or("no top-level \"engine\"")?;
    let version = doc
        .get("engine_version")
        .and_then(Value::as_str)
        .ok_or("no top-level \"engine_version\"")?;
    Ok((engine, version))
}

/// Checks every case of a KV-event vector file, decoding with `schema`: the event schema of
/// the file's engine release, which the caller resolves from [`engine_version`] through the
/// contract catalog (TensorRT-LLM: the family schema of its JSON format). `Err` when the
/// file itself is unusable or names another engine than the schema's.
pub fn check_file(doc: &Value, schema: &EventSchema) -> Result<Vec<CaseResult>, String> {
    let (engine, _) = engine_version(doc)?;
    if engine != schema.format().engine() {
        return Err(format!(
            "the file is {engine}, the schema is {}",
            schema.format()
        ));
    }
    let cases = doc
        .get("cases")
        .and_then(Value::as_array)
        .ok_or("no \"cases\" array")?;
    Ok(cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let name = case
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("case #{i}"), str::to_string);
            let failure = match engine {
                "vllm" => check_vllm_case(schema, case, cases),
                "sglang" => check_sglang_case(schema, case),
                _ => check_trtllm_case(schema.format(), case),
            }
            .err();
            CaseResult { name, failure }
        })
        .collect())
}

fn decode_payload<'a>(schema: &EventSchema, p: &'a [u8]) -> Result<EventBatch<'a>, kvhash::Error> {
    decode_payload_schema(schema, p, &Limits::default())
}

fn decode_frames<'a>(
    schema: &EventSchema,
    f: &[&'a [u8]],
) -> Result<EventBatch<'a>, kvhash::Error> {
    decode_frames_schema(schema, f, &Limits::default())
}

fn hex_of(v: &Value, what: &str) -> Result<Vec<u8>, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("{what} is not a string"))?;
    hex::decode(s).map_err(|e| format!("{what}: bad hex: {e}"))
}

fn hex_frames(v: &Value, what: &str) -> Result<Vec<Vec<u8>>, String> {
    v.as_array()
        .ok_or_else(|| format!("{what} is not an array"))?
        .iter()
        .enumerate()
        .map(|(i, f)| hex_of(f, &format!("{what}[{i}]")))
        .collect()
}

fn refs(frames: &[Vec<u8>]) -> Vec<&[u8]> {
    frames.iter().map(Vec::as_slice).collect()
}

fn check_vllm_case(schema: &EventSchema, case: &Value, all: &[Value]) -> Result<(), String> {
    if let Some(req) = case.get("request_frames_hex") {
        let start = case
            .pointer("/inputs/start_seq")
            .and_then(Value::as_u64)
            .ok_or("replay case without inputs.start_seq")?;
        check_request(req, start)?;
        let replies = case.get("reply_frames_hex").ok_or("no reply_frames_hex")?;
        // References: every other case's live frames, by payload.
        let reference = |seq: u64, payload: &[u8]| -> Result<(), String> {
            let hex_payload = hex::encode(payload);
            let found = all.iter().find(|c| {
                c.get("payload_hex").and_then(Value::as_str) == Some(hex_payload.as_str())
                    && c.get("seq").and_then(Value::as_u64) == Some(seq)
            });
            match found {
                Some(c) => Ok(c.get("decoded").cloned().unwrap_or(Value::Null)),
                None => Err(format!("reply seq {seq}: no live case with this payload")),
            }
            .and_then(|expected| {
                let batch = decode_payload(schema, payload).map_err(|e| e.to_string())?;
                compare(&expected, &batch.to_json(), "decoded", &[])
            })
        };
        return check_replies(schema, replies, start, reference);
    }
    let batch_frames;
    let payload;
    let batch = match case.get("frames_hex") {
        Some(f) if !f.is_null() => {
            batch_frames = hex_frames(f, "frames_hex")?;
            let b = decode_frames(schema, &refs(&batch_frames)).map_err(|e| e.to_string())?;
            expect_eq("seq", case.get("seq"), b.seq.map(|s| json!(s)))?;
            expect_eq("topic", case.get("topic"), b.topic.map(|t| json!(t)))?;
            if let (Some(p), Some(f2)) = (case.get("payload_hex"), batch_frames.get(2)) {
                if hex_of(p, "payload_hex")? != *f2 {
                    return Err("payload_hex differs from frames_hex[2]".to_string());
                }
            }
            b
        }
        _ => {
            payload = hex_of(
                case.get("payload_hex")
                    .ok_or("no frames_hex or payload_hex")?,
                "payload_hex",
            )?;
            decode_payload(schema, &payload).map_err(|e| e.to_string())?
        }
    };
    let expected = case.get("decoded").ok_or("no decoded")?;
    compare(expected, &batch.to_json(), "decoded", &[])
}

fn expect_eq(what: &str, expected: Option<&Value>, got: Option<Value>) -> Result<(), String> {
    match expected {
        None => Ok(()),
        Some(e) if Some(e) == got.as_ref() => Ok(()),
        Some(e) => Err(format!(
            "{what}: expected {e}, got {}",
            got.unwrap_or(Value::Null)
        )),
    }
}

fn check_request(req: &Value, start: u64) -> Result<(), String> {
    let got = replay_request(start);
    let want = hex_frames(req, "request frames")?;
    if want != got {
        return Err(format!(
            "replay request: expected {:?}, built {:?}",
            want.iter().map(hex::encode).collect::<Vec<_>>(),
            got.iter().map(hex::encode).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

fn check_replies(
    schema: &EventSchema,
    replies: &Value,
    start: u64,
    reference: impl Fn(u64, &[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let replies = replies.as_array().ok_or("replies are not an array")?;
    let mut next = start;
    for (i, r) in replies.iter().enumerate() {
        let frames = hex_frames(r, &format!("reply[{i}]"))?;
        let fr = refs(&frames);
        let last = i + 1 == replies.len();
        match decode_replay_reply_schema(schema, &fr).map_err(|e| format!("reply[{i}]: {e}"))? {
            ReplayReply::End if last => return Ok(()),
            ReplayReply::End => {
                return Err(format!("reply[{i}]: end marker before the last reply"))
            }
            ReplayReply::Batch(b) => {
                if last {
                    return Err("replies do not end with the end marker".to_string());
                }
                if b.seq != Some(next) {
                    return Err(format!("reply[{i}]: seq {:?}, expected {next}", b.seq));
                }
                let payload = fr.last().copied().unwrap_or_default();
                reference(next, payload).map_err(|e| format!("reply[{i}]: {e}"))?;
                next += 1;
            }
        }
    }
    Err("no replies".to_string())
}

const SGLANG_IGNORED: &[&str] = &["python_class", "wire_field_order"];

fn check_sglang_case(schema: &EventSchema, case: &Value) -> Result<(), String> {
    let expected = case.get("expected").ok_or("no expected")?;
    if let Some(live) = expected.get("live_frames_hex") {
        let start = case
            .pointer("/inputs/start_seq")
            .and_then(Value::as_u64)
            .ok_or("replay case without inputs.start_seq")?;
        check_request(
            expected
                .get("client_request_frames_hex")
                .ok_or("no client_request_frames_hex")?,
            start,
        )?;
        let live: Vec<Vec<Vec<u8>>> = live
            .as_array()
            .ok_or("live_frames_hex is not an array")?
            .iter()
            .enumerate()
            .map(|(i, f)| hex_frames(f, &format!("live_frames_hex[{i}]")))
            .collect::<Result<_, _>>()?;
        let reference = |seq: u64, payload: &[u8]| -> Result<(), String> {
            for frames in &live {
                let b = decode_frames(schema, &refs(frames)).map_err(|e| e.to_string())?;
                if b.seq == Some(seq) {
                    if frames.get(2).map(Vec::as_slice) != Some(payload) {
                        return Err(format!("payload differs from the live batch {seq}"));
                    }
                    let r = decode_payload(schema, payload).map_err(|e| e.to_string())?;
                    return if r.events == b.events && r.ts == b.ts && r.rank == b.rank {
                        Ok(())
                    } else {
                        Err(format!("decoded reply differs from the live batch {seq}"))
                    };
                }
            }
            Err(format!("no live batch with seq {seq}"))
        };
        return check_replies(
            schema,
            expected
                .get("client_received_frames_hex")
                .ok_or("no client_received_frames_hex")?,
            start,
            reference,
        );
    }
    let batches = expected
        .get("batches")
        .and_then(Value::as_array)
        .ok_or("no expected.batches")?;
    for (i, b) in batches.iter().enumerate() {
        if b.get("published").and_then(Value::as_bool) == Some(false) {
            if b.get("frames_hex").is_some() {
                return Err(format!("batches[{i}]: unpublished batch with frames"));
            }
            continue;
        }
        let frames = hex_frames(
            b.get("frames_hex")
                .ok_or(format!("batches[{i}]: no frames_hex"))?,
            &format!("batches[{i}].frames_hex"),
        )?;
        let got =
            decode_frames(schema, &refs(&frames)).map_err(|e| format!("batches[{i}]: {e}"))?;
        expect_eq(
            &format!("batches[{i}].seq"),
            b.get("seq"),
            got.seq.map(|s| json!(s)),
        )?;
        expect_eq(
            &format!("batches[{i}].topic_utf8"),
            b.get("topic_utf8"),
            got.topic.map(|t| json!(t)),
        )?;
        if let Some(p) = b.get("payload_hex") {
            if Some(&hex_of(p, "payload_hex")?) != frames.get(2) {
                return Err(format!(
                    "batches[{i}]: payload_hex differs from frames_hex[2]"
                ));
            }
        }
        let want = b
            .get("decoded")
            .ok_or(format!("batches[{i}]: no decoded"))?;
        compare(
            want,
            &got.to_json(),
            &format!("batches[{i}].decoded"),
            SGLANG_IGNORED,
        )?;
    }
    Ok(())
}

const TRT_IGNORED: &[&str] = &[
    "meaning",
    "full",
    "block_index_in_sequence",
    "lora_task_id",
    "cache_salt_mode",
];

fn check_trtllm_case(format: EventFormat, case: &Value) -> Result<(), String> {
    let body = case
        .get("response_body")
        .and_then(Value::as_str)
        .ok_or("no response_body string")?;
    let expected = case.get("decoded").ok_or("no decoded")?;
    if expected.get("kv_cache_hash_algo").is_some() {
        let info = decode_server_info(body.as_bytes()).map_err(|e| e.to_string())?;
        let got = json!({
            "kv_cache_hash_algo": info.kv_cache_hash_algo,
            "tokens_per_block": info.tokens_per_block,
        });
        return compare(expected, &got, "decoded", &[]);
    }
    let batch = decode_json(format, body.as_bytes()).map_err(|e| e.to_string())?;
    compare(expected, &trt_view(&batch), "decoded", TRT_IGNORED)
}

/// The decoded TensorRT-LLM batch in the shape of the vectors' `decoded` (derived fields
/// computed from the wire data only).
fn trt_view(batch: &EventBatch<'_>) -> Value {
    let events = batch
        .events
        .iter()
        .map(|e| {
            let mut m = Map::new();
            if let Some(env) = &e.envelope {
                m.insert("event_id".into(), json!(env.event_id));
                m.insert("window_size".into(), json!(env.window_size));
                m.insert("attention_dp_rank".into(), json!(env.attention_dp_rank));
            }
            match &e.kind {
                EventKind::Created(_) => {
                    m.insert("type".into(), json!("created"));
                }
                EventKind::Stored(s) => {
                    m.insert("type".into(), json!("stored"));
                    m.insert("parent_hash".into(), json!(s.parent_hash));
                    let mut parent = s.parent_hash.unwrap_or(0);
                    let blocks: Vec<Value> = s
                        .blocks
                        .iter()
                        .map(|b| {
                            let v = json!({
                                "block_hash": b.block_hash,
                                "n_tokens": b.tokens.len(),
                                "hash_inputs": {
                                    "token_ids_u32": b.tokens.iter().map(|t| t.token_id_u32()).collect::<Vec<_>>(),
                                    "any_token_extra_id_nonzero": b.tokens.iter().any(|t| t.token_extra_id != 0),
                                    "cache_salt": b.cache_salt,
                                    "parent_hash_used": parent,
                                    "mm_keys": b.mm_keys.iter().map(|k| json!({
                                        "hash_hex": k.hash,
                                        "start_offset": k.start_offset,
                                    })).collect::<Vec<_>>(),
                                },
                            });
                            parent = b.block_hash;
                            v
                        })
                        .collect();
                    m.insert("blocks".into(), Value::Array(blocks));
                }
                EventKind::BlockRemoved(r) => {
                    m.insert("type".into(), json!("removed"));
                    let hs: Vec<u64> = r.block_hashes.iter().map(|h| h.to_u64()).collect();
                    m.insert("block_hashes".into(), json!(hs));
                }
                EventKind::Updated(u) => {
                    m.insert("type".into(), json!("updated"));
                    m.insert("block_hash".into(), json!(u.block_hash));
                }
                other => {
                    m.insert("type".into(), json!(other.type_name()));
                }
            }
            Value::Object(m)
        })
        .collect();
    Value::Array(events)
}

/// Keys the checker adds to decoded output that expected forms need not name.
const GOT_ONLY: &[&str] = &["format", "topic", "seq"];

fn decimal_text(v: &Value) -> Value {
    match v {
        Value::Number(n) => Value::String(n.to_string()),
        Value::Array(a) => Value::Array(a.iter().map(decimal_text).collect()),
        other => other.clone(),
    }
}

fn u64_hex(v: &Value) -> Value {
    match v {
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Value::String(format!("{u:016x}")),
            (None, Some(i)) => Value::String(format!("{:016x}", i as u64)),
            _ => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(u64_hex).collect()),
        other => other.clone(),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 120 {
        let cut = (0..=117)
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}...", &s[..cut])
    } else {
        s
    }
}

fn differ(path: &str, expected: &Value, got: &Value) -> String {
    format!("{path}: expected {}, got {}", short(expected), short(got))
}

/// Compares an expected `decoded` form with a decoded view, field by field (rules in the
/// module docs). `ignored` names expected keys that carry no wire data.
pub fn compare(expected: &Value, got: &Value, path: &str, ignored: &[&str]) -> Result<(), String> {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            let mut covered: Vec<&str> = Vec::new();
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                if ignored.contains(&k.as_str()) {
                    continue;
                }
                if k == "metadata" {
                    let mo = ev
                        .as_object()
                        .ok_or_else(|| format!("{p}: not an object"))?;
                    for (mk, mv) in mo {
                        if mk != "cache_salt" {
                            return Err(format!("{p}.{mk}: field the checker does not know"));
                        }
                        let gv = g.get("cache_salt").unwrap_or(&Value::Null);
                        if mv != gv {
                            return Err(differ(&format!("{p}.cache_salt"), mv, gv));
                        }
                    }
                    covered.push("cache_salt");
                    continue;
                }
                if k == "uses_extra_ids" {
                    let any = g.get("any_token_extra_id_nonzero") == Some(&Value::Bool(true));
                    if any && ev != &Value::Bool(true) {
                        return Err(format!(
                            "{p}: expected {ev}, but a token has a non-zero token_extra_id"
                        ));
                    }
                    covered.push("any_token_extra_id_nonzero");
                    continue;
                }
                if let Some(base) = k.strip_suffix("_str") {
                    let gv = g.get(base).unwrap_or(&Value::Null);
                    let t = decimal_text(gv);
                    if ev != &t {
                        return Err(differ(&p, ev, &t));
                    }
                    continue;
                }
                if let Some(base) = k.strip_suffix("_u64_hex") {
                    let gv = g.get(base).unwrap_or(&Value::Null);
                    let t = u64_hex(gv);
                    if ev != &t {
                        return Err(differ(&p, ev, &t));
                    }
                    continue;
                }
                let Some(gv) = g.get(k) else {
                    return Err(format!(
                        "{p}: field the decoder does not produce (expected {})",
                        short(ev)
                    ));
                };
                compare(ev, gv, &p, ignored)?;
                covered.push(k);
            }
            for (k, gv) in g {
                if !e.contains_key(k)
                    && !covered.contains(&k.as_str())
                    && !GOT_ONLY.contains(&k.as_str())
                    && !gv.is_null()
                {
                    return Err(format!(
                        "{path}.{k}: decoded {} but the expected form has no such field",
                        short(gv)
                    ));
                }
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(g)) => {
            if e.len() != g.len() {
                return Err(format!(
                    "{path}: expected {} elements, got {}",
                    e.len(),
                    g.len()
                ));
            }
            for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                compare(ev, gv, &format!("{path}[{i}]"), ignored)?;
            }
            Ok(())
        }
        _ if expected == got => Ok(()),
        _ => Err(differ(path, expected, got)),
    }
}
