//! The drift verifier through the C entry points (`ffi/src/drift.rs`):
//!
//! * every case of every KV-event vector file (`testdata/vectors/*/kv_events.json`, all three
//!   engines, every release kvexact has vectors of) fed through `kvexact_drift_feed_frames` /
//!   `kvexact_drift_feed` gives exactly the counters and report of a `kvprobe::drift::Verifier`
//!   fed the same bytes;
//! * vLLM 0.24.0's real event stream (`versions/vllm-0.24.0/kv_events.json`, every message in
//!   order, as one endpoint's stream) verifies clean: 0 mismatched, every stored block
//!   matched; one token id changed in a payload gives `drift` at once (policy 1 mismatch) with
//!   evidence naming the batch sequence number, the event, the block, the byte offset of its
//!   token ids and the published vs re-derived hash; a wrong seed gives a root mismatch;
//! * the counters struct (`struct_size` in and out), `kvexact_drift_unverifiable_name`, the
//!   finding (`hash_drift`), reset, predictions, LoRA paths (vLLM 0.31's LoRA case);
//! * the Prometheus exposition of two verifiers parses as the text format (HELP and TYPE once
//!   per family, before its samples; counters end in `_total`; labels escaped; one series per
//!   label set) and carries the counters;
//! * bad arguments: statuses, error codes, and nothing written on failure;
//! * one verifier shared by a feeder, a scraper and a predictor thread.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, CStr, CString};
use std::ptr::{null, null_mut};

use kvexact::drift::*;
use kvexact::enums::*;
use kvexact::error::*;
use kvexact::probe::kvexact_finding;
use kvexact::status::*;
use kvhash::events::{self, Limits};
use kvprobe::contract::{self, Contract};
use kvprobe::drift::{DriftConfig, DriftPolicy, PredictionConfig, Verifier};
use kvprobe::Engine;
use kvprofile_core::HashAlgorithm;
use serde_json::Value;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors");

fn cstr(p: *const c_char) -> String {
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

/// (status, code, message) of an error object, which is freed.
fn take_err(err: *mut kvexact_error) -> (i32, String, String) {
    assert!(!err.is_null(), "an error object was written");
    let out = unsafe {
        (
            kvexact_error_status(err),
            cstr(kvexact_error_code(err)),
            cstr(kvexact_error_message(err)),
        )
    };
    unsafe { kvexact_error_free(err) };
    out
}

fn doc(rel: &str) -> Value {
    let path = format!("{VECTORS}/{rel}");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("read vector")).expect("json")
}

fn case<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

// ---------------------------------------------------------------------------------------------
// Building verifiers

/// The rule's settings, as the C options carry them.
#[derive(Debug, Clone)]
struct Cfg {
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: Option<String>,
    loras: Vec<(String, String)>,
    map_capacity: usize,
    mismatches: u32,
    window_blocks: u64,
    predict_within_ms: u64,
}

impl Cfg {
    fn new(block_size: u32) -> Cfg {
        Cfg {
            algo: KVEXACT_HASH_ALGO_CONTRACT_DEFAULT,
            block_size,
            seed: None,
            loras: Vec::new(),
            map_capacity: 0,
            mismatches: 0,
            window_blocks: 0,
            predict_within_ms: 0,
        }
    }

    /// vLLM as the vectors' engine ran: seed "0", serving the adapter `sql-lora` (registered
    /// at `/adapters/sql-lora`), which the rule declares.
    fn vllm() -> Cfg {
        Cfg {
            seed: Some("0".into()),
            loras: vec![("sql-lora".into(), "/adapters/sql-lora".into())],
            ..Cfg::new(16)
        }
    }

    /// The same settings for `kvprobe::drift` (C defaults filled in as the library does).
    fn rust(&self) -> DriftConfig {
        let mut c = DriftConfig::new(self.block_size as usize);
        c.algo = match self.algo {
            KVEXACT_HASH_ALGO_CONTRACT_DEFAULT => None,
            KVEXACT_SHA256_CBOR => Some(HashAlgorithm::Sha256Cbor),
            KVEXACT_XXHASH_CBOR => Some(HashAlgorithm::XxhashCbor),
            KVEXACT_SHA256_PICKLE => Some(HashAlgorithm::Sha256),
            KVEXACT_XXHASH_PICKLE => Some(HashAlgorithm::Xxhash),
            KVEXACT_SHA256_SGLANG => Some(HashAlgorithm::Sha256Sglang),
            _ => Some(HashAlgorithm::BlockhashTrtllm),
        };
        c.hash_seed = self.seed.clone();
        c.lora_paths = self.loras.iter().cloned().collect();
        if self.map_capacity != 0 {
            c.map_capacity = self.map_capacity;
        }
        let d = DriftPolicy::default();
        c.policy = DriftPolicy {
            mismatches: if self.mismatches == 0 {
                d.mismatches
            } else {
                self.mismatches
            },
            window_blocks: if self.window_blocks == 0 {
                d.window_blocks
            } else {
                self.window_blocks
            },
        };
        if self.predict_within_ms != 0 {
            c.predictions = Some(PredictionConfig {
                capacity: 1 << 16,
                within: std::time::Duration::from_millis(self.predict_within_ms),
            });
        }
        c
    }
}

/// C options for `cfg`; `loras` must outlive the options.
fn options(cfg: &Cfg, loras: &[kvexact_drift_lora]) -> kvexact_drift_options {
    let (seed, seed_len) = match &cfg.seed {
        Some(s) if s.is_empty() => (c"".as_ptr().cast::<u8>(), 0),
        Some(s) => (s.as_ptr(), s.len()),
        None => (null(), 0),
    };
    kvexact_drift_options {
        struct_size: std::mem::size_of::<kvexact_drift_options>(),
        algo: cfg.algo,
        block_size: cfg.block_size,
        seed,
        seed_len,
        loras: if loras.is_empty() {
            null()
        } else {
            loras.as_ptr()
        },
        n_loras: loras.len(),
        map_capacity: cfg.map_capacity,
        window_blocks: cfg.window_blocks,
        mismatches: cfg.mismatches,
        reserved: 0,
        predict_within_ms: cfg.predict_within_ms,
        predict_capacity: 0,
    }
}

fn c_loras(cfg: &Cfg) -> Vec<kvexact_drift_lora> {
    cfg.loras
        .iter()
        .map(|(n, p)| kvexact_drift_lora {
            name: n.as_ptr(),
            name_len: n.len(),
            path: p.as_ptr(),
            path_len: p.len(),
        })
        .collect()
}

/// An owned verifier handle.
#[derive(Debug)]
struct V(*mut kvexact_drift_verifier);

// SAFETY: the verifier is documented as safe to share between threads.
unsafe impl Send for V {}
unsafe impl Sync for V {}

impl Drop for V {
    fn drop(&mut self) {
        unsafe { kvexact_drift_verifier_free(self.0) };
    }
}

fn try_new(id: &str, version: Option<&str>, cfg: &Cfg) -> Result<V, (i32, String, String)> {
    let id = CString::new(id).unwrap();
    let version = version.map(|v| CString::new(v).unwrap());
    let loras = c_loras(cfg);
    let opts = options(cfg, &loras);
    let mut out = null_mut();
    let mut err = null_mut();
    let s = unsafe {
        kvexact_drift_verifier_new(
            id.as_ptr(),
            version.as_ref().map_or(null(), |v| v.as_ptr()),
            &opts,
            &mut out,
            &mut err,
        )
    };
    if s == KVEXACT_OK {
        assert!(err.is_null() && !out.is_null());
        Ok(V(out))
    } else {
        assert!(out.is_null(), "nothing written on failure");
        let e = take_err(err);
        assert_eq!(e.0, s);
        Err(e)
    }
}

fn new(id: &str, version: Option<&str>, cfg: &Cfg) -> V {
    try_new(id, version, cfg).unwrap_or_else(|e| panic!("{id}: {e:?}"))
}

impl V {
    fn feed(&self, payload: &[u8]) -> Result<i32, (i32, String, String)> {
        let mut err = null_mut();
        let r = unsafe { kvexact_drift_feed(self.0, payload.as_ptr(), payload.len(), &mut err) };
        if r >= 0 {
            assert!(err.is_null());
            Ok(r)
        } else {
            Err(take_err(err))
        }
    }

    fn feed_frames(&self, f: &[Vec<u8>]) -> Result<i32, (i32, String, String)> {
        let mut err = null_mut();
        let r = unsafe {
            kvexact_drift_feed_frames(
                self.0,
                f[0].as_ptr(),
                f[0].len(),
                f[1].as_ptr(),
                f[1].len(),
                f[2].as_ptr(),
                f[2].len(),
                &mut err,
            )
        };
        if r >= 0 {
            assert!(err.is_null());
            Ok(r)
        } else {
            Err(take_err(err))
        }
    }

    fn counters(&self) -> kvexact_drift_counters {
        let mut c: kvexact_drift_counters = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<kvexact_drift_counters>();
        assert_eq!(
            unsafe { kvexact_drift_get_counters(self.0, &mut c) },
            KVEXACT_OK
        );
        assert_eq!(c.struct_size, std::mem::size_of::<kvexact_drift_counters>());
        c
    }

    fn report(&self) -> Value {
        let mut len = 0usize;
        assert_eq!(
            unsafe { kvexact_drift_report_json(self.0, null_mut(), 0, &mut len) },
            KVEXACT_ERR_BUFFER_TOO_SMALL
        );
        let mut buf = vec![0u8; len];
        let mut len2 = 0usize;
        assert_eq!(
            unsafe { kvexact_drift_report_json(self.0, buf.as_mut_ptr(), len, &mut len2) },
            KVEXACT_OK
        );
        assert_eq!(len2, len);
        serde_json::from_slice(&buf).expect("the report is JSON")
    }

    fn finding(&self) -> (bool, Option<String>, String) {
        let mut f: kvexact_finding = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { kvexact_drift_finding(self.0, &mut f) }, KVEXACT_OK);
        let detail = unsafe { CStr::from_ptr(f.detail.as_ptr()) }
            .to_str()
            .unwrap()
            .to_string();
        let reason = (!f.reason.is_null()).then(|| cstr(f.reason));
        (f.ok == 1, reason, detail)
    }
}

// ---------------------------------------------------------------------------------------------
// Vector messages (as kvprobe/tests/drift_vectors.rs reads them)

enum Msg {
    Frames(Vec<Vec<u8>>),
    Payload(Vec<u8>),
    Json(Vec<u8>),
}

fn messages(v: &Value, out: &mut Vec<Msg>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(f)) = o.get("frames_hex") {
                if f.len() == 3 && f.iter().all(Value::is_string) {
                    out.push(Msg::Frames(
                        f.iter()
                            .map(|x| hex::decode(x.as_str().unwrap()).unwrap())
                            .collect(),
                    ));
                    return;
                }
            }
            if let Some(Value::String(p)) = o.get("payload_hex") {
                out.push(Msg::Payload(hex::decode(p).unwrap()));
                return;
            }
            if let Some(Value::String(b)) = o.get("response_body") {
                if b.starts_with('[') {
                    out.push(Msg::Json(b.clone().into_bytes()));
                }
                return;
            }
            for (k, x) in o {
                if k != "reply_frames_hex" && k != "request_frames_hex" && k != "decoded" {
                    messages(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| messages(x, out)),
        _ => {}
    }
}

fn engine(name: &str) -> Engine {
    match name {
        "vllm" => Engine::Vllm,
        "sglang" => Engine::Sglang,
        _ => Engine::Trtllm,
    }
}

/// The rule a case's engine ran under (the files' notes and `inputs`).
fn case_cfg(engine: Engine, case: &Value) -> Cfg {
    let inputs = &case["inputs"];
    let mut cfg = match engine {
        Engine::Vllm => {
            // The adapters the case's inputs name, and no other (as kvprobe's drift_vectors).
            let mut c = Cfg {
                loras: Vec::new(),
                ..Cfg::vllm()
            };
            c.block_size = inputs["block_size"].as_u64().unwrap_or(16) as u32;
            if let Some(a) = inputs["hash_algo"].as_str() {
                c.algo = match a {
                    "sha256_cbor" => KVEXACT_SHA256_CBOR,
                    "xxhash_cbor" => KVEXACT_XXHASH_CBOR,
                    "sha256" => KVEXACT_SHA256_PICKLE,
                    "xxhash" => KVEXACT_XXHASH_PICKLE,
                    other => panic!("algo {other}"),
                };
            }
            if let Some(seed) = inputs.get("python_hash_seed") {
                c.seed = seed.as_str().map(str::to_string);
            }
            if let (Some(n), Some(p)) = (
                inputs["lora"]["name"].as_str(),
                inputs["lora"]["path"].as_str(),
            ) {
                c.loras.push((n.to_string(), p.to_string()));
            }
            c
        }
        Engine::Sglang => Cfg::new(inputs["page_size"].as_u64().unwrap_or(16) as u32),
        _ => Cfg::new(32),
    };
    // Every mismatch makes the verdict, so that the evidence is compared too.
    cfg.mismatches = 1;
    cfg.window_blocks = 1;
    cfg
}

/// Feeds `m` to both verifiers.
fn feed_both(c: &Contract, v: &V, r: &mut Verifier, m: &Msg) {
    let schema = c.events().unwrap();
    match m {
        Msg::Frames(f) => {
            let refs: Vec<&[u8]> = f.iter().map(Vec::as_slice).collect();
            let b = events::decode_frames_schema(schema, &refs, &Limits::default()).unwrap();
            r.feed_payload(&b, &f[2]);
            let got = v.feed_frames(f).unwrap();
            assert_eq!(got == KVEXACT_DRIFT_DETECTED, r.verdict().is_some());
        }
        Msg::Payload(p) => {
            let b = events::decode_payload_schema(schema, p, &Limits::default()).unwrap();
            r.feed_payload(&b, p);
            let got = v.feed(p).unwrap();
            assert_eq!(got == KVEXACT_DRIFT_DETECTED, r.verdict().is_some());
        }
        Msg::Json(body) => {
            let b = events::decode_json(schema.format(), body).unwrap();
            r.feed(&b);
            let got = v.feed(body).unwrap();
            assert_eq!(got == KVEXACT_DRIFT_DETECTED, r.verdict().is_some());
        }
    }
}

/// The C counters equal kvprobe's.
fn assert_counters_eq(c: &kvexact_drift_counters, r: &Verifier, what: &str) {
    let k = r.counters();
    let pairs = [
        (c.batches, k.batches),
        (c.events, k.events),
        (c.stored_events, k.stored_events),
        (c.removed_events, k.removed_events),
        (c.cleared_events, k.cleared_events),
        (c.other_events, k.other_events),
        (c.blocks_seen, k.blocks_seen),
        (c.rederived, k.rederived),
        (c.matched, k.matched),
        (c.mismatched, k.mismatched),
        (c.mismatched_root, k.mismatched_root),
        (c.mismatched_chained, k.mismatched_chained),
        (c.mismatched_block_size, k.mismatched_block_size),
        (c.mismatched_keys, k.mismatched_keys),
        (c.unverifiable, k.unverifiable),
        (c.drift, u64::from(r.verdict().is_some())),
    ];
    for (i, (a, b)) in pairs.iter().enumerate() {
        assert_eq!(a, b, "{what}: counter {i}: {c:?} vs {k:?}");
    }
    for (i, n) in c.unverifiable_by_reason.iter().enumerate() {
        let name = kvexact_drift_unverifiable_name(i as u32);
        let want = if name.is_null() {
            0
        } else {
            let name = cstr(name);
            k.unverifiable_by_reason
                .nonzero()
                .find(|(r, _)| r.as_str() == name)
                .map_or(0, |(_, n)| n)
        };
        assert_eq!(*n, want, "{what}: reason slot {i}");
    }
    assert_eq!(
        c.unverifiable_by_reason.iter().sum::<u64>(),
        c.unverifiable,
        "{what}"
    );
}

#[test]
fn every_vector_case_gives_the_counters_and_report_of_kvprobe() {
    let mut files: Vec<String> = ["vllm", "sglang", "trtllm"]
        .iter()
        .map(|e| format!("{e}/kv_events.json"))
        .collect();
    let mut versions: Vec<String> = std::fs::read_dir(format!("{VECTORS}/versions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|d| {
            std::path::Path::new(&format!("{VECTORS}/versions/{d}/kv_events.json")).exists()
        })
        .map(|d| format!("versions/{d}/kv_events.json"))
        .collect();
    versions.sort();
    files.extend(versions);
    let (mut cases, mut blocks, mut drifted) = (0, 0, 0);
    let mut engines = BTreeSet::new();
    for f in &files {
        let d = doc(f);
        let e = engine(d["engine"].as_str().unwrap());
        let version = d["engine_version"].as_str().unwrap();
        let c = contract::resolve(e, version).unwrap();
        for case in d["cases"].as_array().unwrap() {
            let mut msgs = Vec::new();
            messages(case, &mut msgs);
            if msgs.is_empty() {
                continue;
            }
            let what = format!("{f} {}", case["name"].as_str().unwrap());
            let cfg = case_cfg(e, case);
            // By contract id + the version the engine reports (as a gateway does).
            let v = new(c.contract_id(), Some(version), &cfg);
            let mut r = Verifier::new(&c, cfg.rust()).unwrap();
            for m in &msgs {
                feed_both(&c, &v, &mut r, m);
            }
            let k = v.counters();
            assert_counters_eq(&k, &r, &what);
            let mut report = v.report();
            let finding = report.as_object_mut().unwrap().remove("finding").unwrap();
            assert_eq!(
                report.as_object_mut().unwrap().remove("undecodable"),
                Some(0.into())
            );
            assert_eq!(report, serde_json::to_value(r.report()).unwrap(), "{what}");
            assert_eq!(finding, serde_json::to_value(r.finding()).unwrap());
            cases += 1;
            blocks += k.blocks_seen;
            drifted += k.drift;
            engines.insert(e.to_string());
        }
    }
    assert_eq!(engines.len(), 3, "{engines:?}");
    assert!(
        cases > 100 && blocks > 200,
        "{cases} cases, {blocks} blocks"
    );
    // The one TensorRT-LLM LoRA block V1 JSON cannot re-derive (kvprobe's drift_vectors).
    assert!(drifted >= 1);
}

// ---------------------------------------------------------------------------------------------
// One vLLM 0.24.0 stream

/// Every 3-frame message of vLLM 0.24.0's vectors, in document order.
fn vllm_024_stream() -> Vec<Vec<Vec<u8>>> {
    let d = doc("versions/vllm-0.24.0/kv_events.json");
    let mut msgs = Vec::new();
    messages(&d["cases"], &mut msgs);
    // A message captured as a payload only gets an empty topic and the next sequence number.
    let mut seq = 0u64;
    msgs.into_iter()
        .map(|m| {
            let f = match m {
                Msg::Frames(f) => f,
                Msg::Payload(p) => vec![Vec::new(), seq.to_be_bytes().to_vec(), p],
                Msg::Json(_) => panic!("vLLM vectors are msgpack"),
            };
            seq = u64::from_be_bytes(f[1].as_slice().try_into().unwrap()) + 1;
            f
        })
        .collect()
}

#[test]
fn a_clean_vllm_stream_verifies_with_no_mismatch() {
    let stream = vllm_024_stream();
    assert!(stream.len() >= 10);
    let by_frames = new("vllm-kv-map-v2-r0.24", None, &Cfg::vllm());
    let by_payload = new("vllm-kv-map-v2", Some("0.24.0"), &Cfg::vllm());
    for f in &stream {
        assert_eq!(by_frames.feed_frames(f), Ok(KVEXACT_OK));
        assert_eq!(by_payload.feed(&f[2]), Ok(KVEXACT_OK));
    }
    for v in [&by_frames, &by_payload] {
        let k = v.counters();
        assert_eq!(k.batches, stream.len() as u64);
        assert_eq!(k.mismatched, 0, "{k:?}");
        assert_eq!(k.drift, 0);
        // In one stream every decode block finds its parent: everything re-derives.
        assert!(k.blocks_seen >= 10, "{k:?}");
        assert_eq!(k.matched, k.blocks_seen, "{k:?}");
        assert_eq!(k.rederived, k.blocks_seen);
        assert!(k.removed_events > 0 && k.cleared_events > 0, "{k:?}");
        assert_eq!(k.map_capacity, 1 << 16);
        assert_eq!(k.map_bytes, kvexact_drift_map_bytes(1 << 16) as u64);
        assert_eq!(k.predictions, 0);
        let (ok, reason, detail) = v.finding();
        assert!(ok && reason.is_none(), "{detail}");
        assert!(detail.contains("0 drift"), "{detail}");
        let r = v.report();
        assert_eq!(r["verdict"], "clean");
        assert_eq!(r["release_id"], "vllm-kv-map-v2-r0.24");
        assert!(r["evidence"].is_null());
    }
    assert_eq!(by_payload.report()["engine_version"], "0.24.0");
}

/// The offset of `needle` in `hay` (exactly one occurrence).
fn find_once(hay: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = hay
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hits.len(), 1, "{needle:02x?}");
    hits[0]
}

#[test]
fn a_changed_token_is_drift_with_evidence() {
    let d = doc("versions/vllm-0.24.0/kv_events.json");
    let frames = |name: &str| -> Vec<Vec<u8>> {
        case(&d, name)["frames_hex"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| hex::decode(x.as_str().unwrap()).unwrap())
            .collect()
    };
    let prefill = frames("int_stored_prefill_no_parent");
    let mut decode = frames("int_stored_decode_with_parent");
    // The decode event's token ids: msgpack array16 of 16 (dc 00 10), first id 56282 (cd dbda).
    let ids_at = find_once(&decode[2], &[0xdc, 0x00, 0x10, 0xcd, 0xdb, 0xda]);
    decode[2][ids_at + 5] ^= 1; // 56282 → 56283
    let cfg = Cfg {
        mismatches: 1,
        ..Cfg::vllm()
    };
    let v = new("vllm-kv-map-v2-r0.24", None, &cfg);
    assert_eq!(v.feed_frames(&prefill), Ok(KVEXACT_OK));
    assert_eq!(v.feed_frames(&decode), Ok(KVEXACT_DRIFT_DETECTED));
    let k = v.counters();
    assert_eq!(
        (k.blocks_seen, k.matched, k.mismatched, k.mismatched_chained),
        (3, 2, 1, 1)
    );
    assert_eq!(k.drift, 1);
    // Sticky: the next clean batch still reports drift.
    assert_eq!(v.feed_frames(&prefill), Ok(KVEXACT_DRIFT_DETECTED));
    let r = v.report();
    assert_eq!(r["verdict"], "drift");
    let e = &r["evidence"];
    assert_eq!(e["kind"], "chained");
    assert_eq!(e["release_id"], "vllm-kv-map-v2-r0.24");
    assert_eq!(e["batch_index"], 1);
    assert_eq!(e["batch_seq"], 1);
    assert_eq!(
        (e["event_index"].as_u64(), e["block_index"].as_u64()),
        (Some(0), Some(0))
    );
    // The offset of the first id, past the array header.
    assert_eq!(e["token_ids_offset"].as_u64(), Some(ids_at as u64 + 3));
    assert_eq!(e["published"].as_u64(), Some(580_158_946_789_763_506));
    assert_eq!(e["parent"].as_u64(), Some(7_403_838_778_858_983_848));
    assert_eq!(e["tokens"][0], 56283);
    assert_eq!(e["tokens"].as_array().unwrap().len(), 16);
    assert!(e["expected"]
        .as_u64()
        .is_some_and(|x| x != 580_158_946_789_763_506));
    assert_eq!(e["mismatches_in_window"], 1);
    assert_eq!(r["finding"]["ok"], false);
    assert_eq!(r["finding"]["reason"], "hash_drift");
    let (ok, reason, detail) = v.finding();
    assert!(!ok);
    assert_eq!(reason.as_deref(), Some("hash_drift"));
    assert!(detail.contains("vllm-kv-map-v2-r0.24"), "{detail}");

    // Reset: clean again, counters kept.
    assert_eq!(unsafe { kvexact_drift_reset_verdict(v.0) }, KVEXACT_OK);
    assert_eq!(v.counters().drift, 0);
    assert_eq!(v.counters().mismatched, 1);
    assert_eq!(v.feed_frames(&prefill), Ok(KVEXACT_OK));
    assert!(v.finding().0);
}

#[test]
fn a_wrong_seed_is_drift_at_the_first_root_and_the_rest_its_consequences() {
    let stream = vllm_024_stream();
    let wrong = Cfg {
        seed: Some("1".into()),
        ..Cfg::vllm()
    };
    let v = new("vllm-kv-map-v2-r0.24", None, &wrong);
    let mut first_drift = None;
    for (i, f) in stream.iter().enumerate() {
        if v.feed_frames(f) == Ok(KVEXACT_DRIFT_DETECTED) && first_drift.is_none() {
            first_drift = Some(i);
        }
    }
    let k = v.counters();
    eprintln!("{k:?}");
    assert!(k.mismatched_root >= 3, "{k:?}");
    // Every root mismatches; no block matches: a block chained on a mismatched root is its
    // consequence — also bytes_stored_decode_with_parent's, re-derived on the full parent
    // digest its event publishes (the seed only enters at roots) and equal to it.
    assert_eq!((k.matched, k.mismatched_chained), (0, 0), "{k:?}");
    assert_eq!(
        k.matched + k.mismatched + k.consequences + k.unverifiable,
        k.blocks_seen
    );
    assert!(k.consequences > 0, "{k:?}");
    // One root mismatch is a verdict on its own: the first message.
    assert_eq!(first_drift, Some(0));
    assert_eq!(k.verdict, KVEXACT_DRIFT_VERDICT_DRIFT as u64);
    let r = v.report();
    assert_eq!(r["evidence"]["kind"], "root");
    assert_eq!(r["evidence"]["batch_index"], 0);
    assert_eq!(r["evidence"]["mismatches_in_window"], 1);
}

#[test]
fn lora_paths_from_the_options() {
    let d = doc("vllm/kv_events.json");
    let c = case(&d, "int_stored_lora_salt_mm");
    let mut msgs = Vec::new();
    messages(c, &mut msgs);
    let Msg::Frames(f) = &msgs[0] else {
        panic!("frames")
    };
    let name = c["inputs"]["lora"]["name"].as_str().unwrap();
    let path = c["inputs"]["lora"]["path"].as_str().unwrap();
    let with = Cfg {
        loras: vec![
            ("other".into(), "/adapters/other".into()),
            (name.into(), path.into()),
        ],
        ..Cfg::vllm()
    };
    let v = new("vllm-kv-map-v3", Some("0.31.0"), &with);
    assert_eq!(v.feed_frames(f), Ok(KVEXACT_OK));
    assert_eq!((v.counters().blocks_seen, v.counters().matched), (3, 3));
    // An adapter the options do not declare: the engine keys its blocks with extra keys the
    // rule does not know — drift at once, the keys as evidence (docs/contracts/drift.md §2).
    let undeclared = Cfg {
        loras: vec![("other".into(), "/adapters/other".into())],
        ..Cfg::vllm()
    };
    let v = new("vllm-kv-map-v3", Some("0.31.0"), &undeclared);
    assert_eq!(v.feed_frames(f), Ok(KVEXACT_DRIFT_DETECTED));
    let k = v.counters();
    assert_eq!((k.matched, k.unverifiable, k.mismatched_keys), (0, 0, 3));
    assert_eq!(k.verdict, KVEXACT_DRIFT_VERDICT_DRIFT as u64);
    assert_eq!(
        unsafe { kvexact_drift_verdict(v.0) },
        KVEXACT_DRIFT_VERDICT_DRIFT
    );
    let r = v.report();
    assert_eq!(r["verdict"], "drift");
    assert_eq!(r["evidence"]["kind"], "keys");
    assert_eq!(r["evidence"]["keys"][0], format!("lora_name={name}"));
}

#[test]
fn predictions_are_counted() {
    let d = doc("versions/vllm-0.24.0/kv_events.json");
    let prefill: Vec<Vec<u8>> = case(&d, "int_stored_prefill_no_parent")["frames_hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| hex::decode(x.as_str().unwrap()).unwrap())
        .collect();
    let hashes = [8_054_659_170_381_590_746u64, 7_403_838_778_858_983_848];
    let cfg = Cfg {
        predict_within_ms: 60_000,
        ..Cfg::vllm()
    };
    let v = new("vllm-kv-map-v2-r0.24", None, &cfg);
    assert_eq!(
        unsafe { kvexact_drift_predict(v.0, hashes.as_ptr(), 2) },
        KVEXACT_OK
    );
    assert_eq!(v.counters().predicted_pending, 2);
    assert_eq!(v.feed_frames(&prefill), Ok(KVEXACT_OK));
    // Predicted again after they were stored: prefix hits.
    assert_eq!(
        unsafe { kvexact_drift_predict(v.0, hashes.as_ptr(), 1) },
        KVEXACT_OK
    );
    assert_eq!(unsafe { kvexact_drift_predict(v.0, null(), 0) }, KVEXACT_OK);
    let k = v.counters();
    assert_eq!(k.predictions, 1);
    assert_eq!(
        (
            k.predicted,
            k.predicted_stored_within,
            k.predicted_already_stored,
            k.predicted_pending
        ),
        (3, 2, 1, 0),
        "{k:?}"
    );
    // Without tracking: refused, not silently ignored.
    let plain = new("vllm-kv-map-v2-r0.24", None, &Cfg::vllm());
    assert_eq!(
        unsafe { kvexact_drift_predict(plain.0, hashes.as_ptr(), 2) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_drift_predict(v.0, null(), 2) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
}

#[test]
fn trtllm_and_sglang_bodies_through_feed() {
    // TensorRT-LLM: a drained JSON body; frames are refused.
    let d = doc("trtllm/kv_events.json");
    let mut msgs = Vec::new();
    messages(&d["cases"], &mut msgs);
    let v = new("trtllm-kv-http-v2", Some("1.3.0rc29"), &Cfg::new(32));
    let mut bodies = 0;
    for m in &msgs {
        if let Msg::Json(b) = m {
            assert!(v.feed(b).is_ok());
            bodies += 1;
        }
    }
    assert!(bodies > 3);
    let k = v.counters();
    assert!(k.matched > 0 && k.batches == bodies, "{k:?}");
    let f = vec![vec![], vec![0; 8], b"[]".to_vec()];
    let e = v.feed_frames(&f).unwrap_err();
    assert_eq!(e.0, KVEXACT_ERR_INVALID_ARGUMENT, "{e:?}");
    // A body that is not JSON: decode_error, counted, nothing fed.
    let e = v.feed(b"{not json").unwrap_err();
    assert_eq!(
        (e.0, e.1.as_str()),
        (KVEXACT_ERR_EVENT_DECODE, "decode_error")
    );
    assert_eq!(v.counters().undecodable, 1);
    assert_eq!(v.counters().batches, bodies);
    assert_eq!(v.report()["undecodable"], 1);

    // SGLang 0.5.23: payloads.
    let d = doc("versions/sglang-0.5.23/kv_events.json");
    let mut msgs = Vec::new();
    messages(&d["cases"], &mut msgs);
    let v = new("sglang-kv-map-v2-r0.5.23", None, &Cfg::new(16));
    for m in &msgs {
        match m {
            Msg::Frames(f) => assert!(v.feed_frames(f).is_ok()),
            Msg::Payload(p) => assert!(v.feed(p).is_ok()),
            Msg::Json(_) => panic!("SGLang sends msgpack"),
        }
    }
    assert!(v.counters().matched > 0);
}

#[test]
fn another_releases_payload_is_a_schema_mismatch() {
    // vLLM 0.20.0 added group_idx: its BlockStored has a field 0.17.0 never writes.
    let d = doc("versions/vllm-0.20.0/kv_events.json");
    let p = hex::decode(
        case(&d, "int_stored_decode_with_parent")["payload_hex"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let v = new("vllm-kv-array-v1-r0.17", None, &Cfg::vllm());
    let e = v.feed(&p).unwrap_err();
    assert_eq!(
        (e.0, e.1.as_str()),
        (KVEXACT_ERR_EVENT_SCHEMA, "schema_mismatch"),
        "{e:?}"
    );
    let k = v.counters();
    assert_eq!((k.undecodable, k.batches), (1, 0));
    // A bad sequence frame.
    let e = v.feed_frames(&[vec![], vec![0; 4], p.clone()]).unwrap_err();
    assert_eq!(e.0, KVEXACT_ERR_EVENT_DECODE, "{e:?}");
    assert_eq!(v.counters().undecodable, 2);
}

// ---------------------------------------------------------------------------------------------
// Counters struct

#[test]
fn counters_struct_size_in_and_out() {
    let v = new("vllm-kv-map-v2-r0.24", None, &Cfg::vllm());
    let size = std::mem::size_of::<kvexact_drift_counters>();
    // A caller with a larger (newer) struct: this library's bytes, and the count.
    #[repr(C)]
    struct Bigger {
        c: kvexact_drift_counters,
        later: [u64; 4],
    }
    let mut b: Bigger = unsafe { std::mem::zeroed() };
    b.c.struct_size = std::mem::size_of::<Bigger>();
    b.later = [7; 4];
    assert_eq!(
        unsafe { kvexact_drift_get_counters(v.0, &mut b.c) },
        KVEXACT_OK
    );
    assert_eq!(b.c.struct_size, size);
    assert_eq!(b.c.map_capacity, 1 << 16);
    assert_eq!(b.later, [7; 4], "nothing past this library's struct");
    // Nothing fed: nothing verified, the verdict is unverifiable (never clean).
    assert_eq!(b.c.verdict, KVEXACT_DRIFT_VERDICT_UNVERIFIABLE as u64);
    assert_eq!(
        unsafe { kvexact_drift_verdict(v.0) },
        KVEXACT_DRIFT_VERDICT_UNVERIFIABLE
    );
    assert_eq!(
        unsafe { kvexact_drift_verdict(null()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    // A caller built against the first layout (up to `predicted_pending`): accepted, the
    // appended `consequences` and `verdict` left alone.
    let v1 = std::mem::offset_of!(kvexact_drift_counters, consequences);
    let mut old: kvexact_drift_counters = unsafe { std::mem::zeroed() };
    old.struct_size = v1;
    old.verdict = 77;
    assert_eq!(
        unsafe { kvexact_drift_get_counters(v.0, &mut old) },
        KVEXACT_OK
    );
    assert_eq!(
        (old.struct_size, old.map_capacity, old.verdict),
        (v1, 1 << 16, 77)
    );
    // Too small: refused, nothing written.
    let mut c: kvexact_drift_counters = unsafe { std::mem::zeroed() };
    c.struct_size = 16;
    c.batches = 99;
    assert_eq!(
        unsafe { kvexact_drift_get_counters(v.0, &mut c) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!((c.struct_size, c.batches), (16, 99));
    assert_eq!(
        unsafe { kvexact_drift_get_counters(v.0, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_drift_get_counters(null(), &mut c) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    // Slot names: the kvprobe reason codes, then NULL.
    assert_eq!(
        cstr(kvexact_drift_unverifiable_name(0)),
        "parent_never_seen"
    );
    let named = (0..KVEXACT_DRIFT_UNVERIFIABLE_SLOTS as u32)
        .filter(|&i| !kvexact_drift_unverifiable_name(i).is_null())
        .count();
    assert_eq!(named, kvprobe::drift::Unverifiable::ALL.len());
    assert!(kvexact_drift_unverifiable_name(named as u32).is_null());
    assert!(kvexact_drift_unverifiable_name(u32::MAX).is_null());
}

// ---------------------------------------------------------------------------------------------
// Prometheus

fn label(name: &'static str, value: &'static str) -> kvexact_drift_label {
    kvexact_drift_label {
        name: name.as_ptr(),
        name_len: name.len(),
        value: value.as_ptr(),
        value_len: value.len(),
    }
}

fn prometheus(series: &[kvexact_drift_series]) -> Result<String, (i32, String, String)> {
    let mut len = 0usize;
    let mut err = null_mut();
    let s = unsafe {
        kvexact_drift_prometheus(
            series.as_ptr(),
            series.len(),
            null_mut(),
            0,
            &mut len,
            &mut err,
        )
    };
    if s != KVEXACT_ERR_BUFFER_TOO_SMALL && s != KVEXACT_OK {
        return Err(take_err(err));
    }
    if s == KVEXACT_ERR_BUFFER_TOO_SMALL {
        // Like every failure, the size query writes an error object.
        assert_eq!(take_err(err).1, "buffer_too_small");
        err = null_mut();
    }
    let mut buf = vec![0u8; len];
    let s = unsafe {
        kvexact_drift_prometheus(
            series.as_ptr(),
            series.len(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut len,
            &mut err,
        )
    };
    assert_eq!(s, KVEXACT_OK);
    assert!(err.is_null());
    Ok(String::from_utf8(buf).unwrap())
}

/// A sample: metric name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the text exposition format strictly enough for these tests: comment lines
/// `# HELP name text` and `# TYPE name counter|gauge` once per family before its samples,
/// samples `name{l="v",…} value` with escaped values, no family interleaved, no series twice.
fn parse_exposition(text: &str) -> Vec<Sample> {
    assert!(text.ends_with('\n'));
    let mut help = BTreeSet::new();
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap();
            assert!(!text.is_empty());
            assert!(help.insert(name.to_string()), "second HELP for {name}");
            if let Some(c) = current.replace(name.to_string()) {
                done.insert(c);
            }
            assert!(!done.contains(name), "{name} interleaved");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(current.as_deref(), Some(name), "TYPE after HELP");
            assert!(matches!(kind, "counter" | "gauge"), "{kind}");
            assert!(types.insert(name.to_string(), kind.to_string()).is_none());
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter {name}");
            } else {
                assert!(!name.ends_with("_total"), "gauge {name}");
            }
            continue;
        }
        assert!(!line.starts_with('#'), "{line}");
        let brace = line.find('{').unwrap();
        let name = &line[..brace];
        assert_eq!(
            current.as_deref(),
            Some(name),
            "sample {name} outside its family"
        );
        assert!(types.contains_key(name), "{name} without TYPE");
        assert!(name.starts_with("kvexact_drift_"));
        let close = line.rfind('}').unwrap();
        let (body, value) = (&line[brace + 1..close], line[close + 1..].trim_start());
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
        // Labels: name="value" with \\, \", \n escapes.
        let mut labels = BTreeMap::new();
        let mut chars = body.chars().peekable();
        loop {
            let mut k = String::new();
            while let Some(&c) = chars.peek() {
                if c == '=' {
                    break;
                }
                k.push(c);
                chars.next();
            }
            assert_eq!(chars.next(), Some('='));
            assert_eq!(chars.next(), Some('"'));
            let mut v = String::new();
            loop {
                match chars.next().expect("unterminated value") {
                    '\\' => match chars.next() {
                        Some('\\') => v.push('\\'),
                        Some('"') => v.push('"'),
                        Some('n') => v.push('\n'),
                        other => panic!("bad escape {other:?}"),
                    },
                    '"' => break,
                    '\n' => panic!("raw newline"),
                    c => v.push(c),
                }
            }
            assert!(labels.insert(k.clone(), v).is_none(), "label {k} twice");
            match chars.next() {
                Some(',') => continue,
                None => break,
                other => panic!("{other:?} in {line}"),
            }
        }
        assert!(
            seen.insert(format!("{name}{labels:?}")),
            "series twice: {line}"
        );
        out.push((name.to_string(), labels, value));
    }
    out
}

fn value(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    let hits: Vec<f64> = samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && want
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| *v)
        .collect();
    assert_eq!(hits.len(), 1, "{name} {want:?}");
    hits[0]
}

#[test]
fn prometheus_exposition_of_two_verifiers() {
    let stream = vllm_024_stream();
    let clean = new("vllm-kv-map-v2-r0.24", None, &Cfg::vllm());
    let wrong = new(
        "vllm-kv-map-v2-r0.24",
        None,
        &Cfg {
            seed: Some("1".into()),
            predict_within_ms: 1000,
            ..Cfg::vllm()
        },
    );
    for f in &stream {
        clean.feed_frames(f).unwrap();
        wrong.feed_frames(f).unwrap();
    }
    assert_eq!(
        unsafe { kvexact_drift_predict(wrong.0, [1u64, 2].as_ptr(), 2) },
        KVEXACT_OK
    );
    let l1 = [
        label("endpoint", "10.0.0.1:8000"),
        label("rule", "r\"1\\\n"),
    ];
    let l2 = [
        label("endpoint", "10.0.0.2:8000"),
        label("rule", "r\"1\\\n"),
    ];
    let series = [
        kvexact_drift_series {
            verifier: clean.0,
            labels: l1.as_ptr(),
            n_labels: 2,
        },
        kvexact_drift_series {
            verifier: wrong.0,
            labels: l2.as_ptr(),
            n_labels: 2,
        },
    ];
    let text = prometheus(&series).unwrap();
    if std::env::var_os("KVEXACT_SHOW").is_some() {
        eprintln!("{text}");
    }
    let samples = parse_exposition(&text);
    let e1 = [
        ("endpoint", "10.0.0.1:8000"),
        ("rule", "r\"1\\\n"),
        ("release", "vllm-kv-map-v2-r0.24"),
    ];
    let e2 = [("endpoint", "10.0.0.2:8000")];
    let k1 = clean.counters();
    let k2 = wrong.counters();
    assert_eq!(
        value(&samples, "kvexact_drift_batches_total", &e1),
        k1.batches as f64
    );
    assert_eq!(
        value(&samples, "kvexact_drift_blocks_total", &e1),
        k1.blocks_seen as f64
    );
    assert_eq!(
        value(&samples, "kvexact_drift_blocks_matched_total", &e1),
        k1.matched as f64
    );
    assert_eq!(value(&samples, "kvexact_drift_detected", &e1), 0.0);
    assert_eq!(value(&samples, "kvexact_drift_detected", &e2), 1.0);
    assert_eq!(
        value(
            &samples,
            "kvexact_drift_blocks_mismatched_total",
            &[e2[0], ("kind", "root")]
        ),
        k2.mismatched_root as f64
    );
    assert_eq!(
        value(
            &samples,
            "kvexact_drift_events_total",
            &[e1[0], ("kind", "removed")]
        ),
        k1.removed_events as f64
    );
    // Every reason is exported, 0 included.
    let reasons = samples
        .iter()
        .filter(|(n, l, _)| {
            n == "kvexact_drift_blocks_unverifiable_total" && l["endpoint"] == "10.0.0.1:8000"
        })
        .count();
    assert_eq!(reasons, kvprobe::drift::Unverifiable::ALL.len());
    // Predictions only for the verifier that tracks them.
    assert_eq!(
        value(&samples, "kvexact_drift_predicted_hashes_total", &e2),
        2.0
    );
    assert_eq!(
        value(&samples, "kvexact_drift_predictions_pending", &e2),
        2.0
    );
    assert!(!samples
        .iter()
        .any(|(n, l, _)| n.contains("predict") && l["endpoint"] == "10.0.0.1:8000"));
    // No labels: just the release.
    let bare = [kvexact_drift_series {
        verifier: clean.0,
        labels: null(),
        n_labels: 0,
    }];
    let s = parse_exposition(&prometheus(&bare).unwrap());
    assert_eq!(s[0].1.len(), 1, "{:?}", s[0]);
    assert!(!prometheus(&bare).unwrap().contains("predict"));
    // No series: an empty exposition.
    assert_eq!(prometheus(&[]).unwrap(), "");

    // Refusals.
    let refuse = |labels: &[kvexact_drift_label], twice: bool| {
        let one = kvexact_drift_series {
            verifier: clean.0,
            labels: labels.as_ptr(),
            n_labels: labels.len(),
        };
        let series = if twice { vec![one, one] } else { vec![one] };
        let e = prometheus(&series).unwrap_err();
        assert_eq!(e.0, KVEXACT_ERR_INVALID_ARGUMENT, "{e:?}");
        e.2
    };
    assert!(refuse(&[label("release", "x")], false).contains("set by the exposition"));
    assert!(refuse(&[label("kind", "x")], false).contains("set by the exposition"));
    assert!(refuse(&[label("__name__", "x")], false).contains("not a Prometheus"));
    assert!(refuse(&[label("a-b", "x")], false).contains("not a Prometheus"));
    assert!(refuse(&[label("a", "x"), label("a", "y")], false).contains("twice"));
    assert!(refuse(&[label("a", "x")], true).contains("repeats"));
    let null_verifier = [kvexact_drift_series {
        verifier: null(),
        labels: null(),
        n_labels: 0,
    }];
    assert_eq!(
        prometheus(&null_verifier).unwrap_err().0,
        KVEXACT_ERR_NULL_ARGUMENT
    );
    let mut len = 0;
    assert_eq!(
        unsafe { kvexact_drift_prometheus(null(), 1, null_mut(), 0, &mut len, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe {
            kvexact_drift_prometheus(series.as_ptr(), 2, null_mut(), 0, null_mut(), null_mut())
        },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    // A too small buffer: BUFFER_TOO_SMALL with the length, nothing else written.
    let mut buf = vec![b'#'; 10];
    let mut len = 0;
    assert_eq!(
        unsafe {
            kvexact_drift_prometheus(
                series.as_ptr(),
                2,
                buf.as_mut_ptr(),
                10,
                &mut len,
                null_mut(),
            )
        },
        KVEXACT_ERR_BUFFER_TOO_SMALL
    );
    assert_eq!(len, text.len());
    assert_eq!(buf, vec![b'#'; 10]);
}

// ---------------------------------------------------------------------------------------------
// Bad arguments

#[test]
fn bad_arguments_are_statuses_and_nothing_is_written() {
    let err_of =
        |id: &str, version: Option<&str>, cfg: &Cfg| try_new(id, version, cfg).unwrap_err();
    let vllm = Cfg::vllm();
    let e = err_of("vllm-kv-map-v2", Some("0.35.0"), &vllm);
    assert_eq!(
        (e.0, e.1.as_str()),
        (KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION")
    );
    let e = err_of("vllm-kv-map-v3", Some("0.24.0"), &vllm);
    assert_eq!(
        (e.0, e.1.as_str()),
        (KVEXACT_ERR_CONTRACT_MISMATCH, "CONTRACT_MISMATCH")
    );
    let e = err_of("no-such-contract", None, &vllm);
    assert_eq!((e.0, e.1.as_str()), (KVEXACT_ERR_NOT_FOUND, "UNKNOWN_NAME"));
    let e = err_of("vllm-kv-map-v2", None, &vllm);
    assert_eq!(
        (e.0, e.1.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "CONFIG"),
        "{e:?}"
    );
    let e = err_of("vllm-kv-map-v2-r0.24", None, &Cfg::new(0));
    assert_eq!(e.0, KVEXACT_ERR_INVALID_ARGUMENT);
    assert!(e.2.contains("block_size"), "{e:?}");
    let e = err_of(
        "vllm-kv-map-v2-r0.24",
        None,
        &Cfg {
            algo: 77,
            ..Cfg::vllm()
        },
    );
    assert_eq!(e.0, KVEXACT_ERR_INVALID_ARGUMENT);
    let e = err_of(
        "vllm-kv-map-v2-r0.24",
        None,
        &Cfg {
            algo: KVEXACT_SHA256_SGLANG,
            ..Cfg::vllm()
        },
    );
    assert_eq!(
        (e.0, e.1.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "CONFIG"),
        "{e:?}"
    );
    let e = err_of(
        "sglang-kv-map-v2-r0.5.23",
        None,
        &Cfg {
            seed: Some("0".into()),
            ..Cfg::new(16)
        },
    );
    assert!(e.2.contains("seed"), "{e:?}");
    let e = err_of(
        "vllm-kv-map-v2-r0.24",
        None,
        &Cfg {
            map_capacity: KVEXACT_DRIFT_MAX_CAPACITY + 1,
            ..Cfg::vllm()
        },
    );
    assert!(e.2.contains("map_capacity"), "{e:?}");
    let e = err_of(
        "vllm-kv-map-v3-r0.31",
        None,
        &Cfg {
            loras: vec![("a".into(), "/x".into()), ("a".into(), "/y".into())],
            ..Cfg::vllm()
        },
    );
    assert!(e.2.contains("twice"), "{e:?}");
    // An unset seed is accepted (roots under a random NONE_HASH are unverifiable, not refused).
    drop(new(
        "vllm-kv-array-v1-r0.17",
        None,
        &Cfg {
            seed: None,
            ..Cfg::vllm()
        },
    ));

    // struct_size and raw pointers.
    let id = c"vllm-kv-map-v2-r0.24";
    let mut opts = options(&vllm, &[]);
    let sentinel = std::ptr::NonNull::<kvexact_drift_verifier>::dangling().as_ptr();
    let mut out = sentinel;
    let call = |opts: *const kvexact_drift_options, out: &mut *mut kvexact_drift_verifier| {
        let mut err = null_mut();
        let s = unsafe { kvexact_drift_verifier_new(id.as_ptr(), null(), opts, out, &mut err) };
        if s == KVEXACT_OK {
            (s, String::new())
        } else {
            let e = take_err(err);
            assert_eq!(e.0, s);
            (s, e.2)
        }
    };
    opts.struct_size = 8;
    let (s, m) = call(&opts, &mut out);
    assert_eq!(s, KVEXACT_ERR_INVALID_ARGUMENT);
    assert!(m.contains("struct_size"), "{m}");
    assert_eq!(out, sentinel);
    let (s, _) = call(null(), &mut out);
    assert_eq!(s, KVEXACT_ERR_NULL_ARGUMENT);
    assert_eq!(out, sentinel);
    opts.struct_size = std::mem::size_of::<kvexact_drift_options>();
    opts.reserved = 1;
    assert_eq!(call(&opts, &mut out).0, KVEXACT_ERR_INVALID_ARGUMENT);
    opts.reserved = 0;
    // A newer caller's larger struct: accepted when the unknown tail is 0, refused otherwise.
    #[repr(C)]
    struct Newer {
        o: kvexact_drift_options,
        later: u64,
    }
    let mut n = Newer { o: opts, later: 0 };
    n.o.struct_size = std::mem::size_of::<Newer>();
    let (s, m) = call(&n.o, &mut out);
    assert_eq!(s, KVEXACT_OK, "{m}");
    assert_ne!(out, sentinel);
    unsafe { kvexact_drift_verifier_free(out) };
    out = sentinel;
    n.later = 5;
    let (s, m) = call(&n.o, &mut out);
    assert_eq!(s, KVEXACT_ERR_INVALID_ARGUMENT);
    assert!(m.contains("does not know"), "{m}");
    assert_eq!(out, sentinel);
    // A garbage size is refused before anything past the struct is read.
    opts.struct_size = usize::MAX;
    let (s, m) = call(&opts, &mut out);
    assert_eq!(s, KVEXACT_ERR_INVALID_ARGUMENT);
    assert!(m.contains("implausible"), "{m}");
    assert_eq!(out, sentinel);
    opts.struct_size = std::mem::size_of::<kvexact_drift_options>();
    // NULL out, NULL id; a NULL err is fine.
    assert_eq!(
        unsafe { kvexact_drift_verifier_new(id.as_ptr(), null(), &opts, null_mut(), null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_drift_verifier_new(null(), null(), &opts, &mut out, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(out, sentinel);
    // Seed NULL with a length.
    let mut bad_seed = opts;
    bad_seed.seed_len = 3;
    bad_seed.seed = null();
    assert_eq!(call(&bad_seed, &mut out).0, KVEXACT_ERR_NULL_ARGUMENT);

    // Calls on a NULL verifier.
    let mut err = null_mut();
    assert_eq!(
        unsafe { kvexact_drift_feed(null(), b"x".as_ptr(), 1, &mut err) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(take_err(err).1, "null_argument");
    assert_eq!(
        unsafe { kvexact_drift_feed_frames(null(), null(), 0, null(), 0, null(), 0, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    let v = new("vllm-kv-map-v2-r0.24", None, &vllm);
    assert_eq!(
        unsafe { kvexact_drift_feed(v.0, null(), 4, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    // An empty payload is not a batch.
    assert_eq!(v.feed(&[]).unwrap_err().0, KVEXACT_ERR_EVENT_DECODE);
    assert_eq!(
        unsafe { kvexact_drift_reset_verdict(null()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    let mut f: kvexact_finding = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { kvexact_drift_finding(null(), &mut f) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_drift_finding(v.0, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    let mut len = 0;
    assert_eq!(
        unsafe { kvexact_drift_report_json(null(), null_mut(), 0, &mut len) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_drift_report_json(v.0, null_mut(), 0, null_mut()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_drift_report_json(v.0, null_mut(), 5, &mut len) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    unsafe { kvexact_drift_verifier_free(null_mut()) };
}

// ---------------------------------------------------------------------------------------------
// Threads

#[test]
fn one_verifier_shared_by_a_feeder_a_scraper_and_a_predictor() {
    let stream = vllm_024_stream();
    let v = std::sync::Arc::new(new(
        "vllm-kv-map-v2-r0.24",
        None,
        &Cfg {
            predict_within_ms: 60_000,
            ..Cfg::vllm()
        },
    ));
    let rounds = 50;
    std::thread::scope(|s| {
        let feeder = {
            let v = v.clone();
            let stream = &stream;
            s.spawn(move || {
                for _ in 0..rounds {
                    for f in stream {
                        assert_eq!(v.feed_frames(f), Ok(KVEXACT_OK));
                    }
                }
            })
        };
        let scraper = {
            let v = v.clone();
            s.spawn(move || {
                let l = [label("endpoint", "e")];
                let series = [kvexact_drift_series {
                    verifier: v.0,
                    labels: l.as_ptr(),
                    n_labels: 1,
                }];
                for _ in 0..100 {
                    let k = v.counters();
                    assert_eq!(k.matched + k.mismatched + k.unverifiable, k.blocks_seen);
                    // The text may grow between the size query and the copy: retry.
                    let mut len = 0usize;
                    let mut buf = Vec::new();
                    loop {
                        let st = unsafe {
                            kvexact_drift_prometheus(
                                series.as_ptr(),
                                1,
                                buf.as_mut_ptr(),
                                buf.len(),
                                &mut len,
                                null_mut(),
                            )
                        };
                        if st == KVEXACT_OK {
                            break;
                        }
                        assert_eq!(st, KVEXACT_ERR_BUFFER_TOO_SMALL);
                        buf.resize(len + 64, 0);
                    }
                    parse_exposition(std::str::from_utf8(&buf[..len]).unwrap());
                }
            })
        };
        let predictor = {
            let v = v.clone();
            s.spawn(move || {
                for i in 0..1000u64 {
                    let h = [i, 7_403_838_778_858_983_848];
                    assert_eq!(
                        unsafe { kvexact_drift_predict(v.0, h.as_ptr(), 2) },
                        KVEXACT_OK
                    );
                }
            })
        };
        feeder.join().unwrap();
        scraper.join().unwrap();
        predictor.join().unwrap();
    });
    let k = v.counters();
    assert_eq!(k.batches, rounds * stream.len() as u64);
    assert_eq!(k.mismatched, 0);
    assert!(k.predicted >= 1000);
}
