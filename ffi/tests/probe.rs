//! §6.5 through the C entry points, on the sample registry (testdata/registry): fixture sets
//! against the files on disk, tokenize judging with the banked ids (and with corrupted ones),
//! the TensorRT-LLM oracle, manifests and identity, geometry, served model, and the hash
//! challenge checked against an independent encode + hash through the hot-path functions.

use std::ffi::{c_char, CStr};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use kvexact::encoder::*;
use kvexact::enums::*;
use kvexact::error::*;
use kvexact::events::*;
use kvexact::hasher::*;
use kvexact::probe::*;
use kvexact::registry::*;
use kvexact::status::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const QWEN3: &str = "qwen3-06b-default-v1";
const QWEN25: &str = "qwen25-7b-instruct-v1";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/registry")
}

fn cstr(p: *const c_char) -> String {
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

/// (ok, oracle, reason, detail) of a finding.
fn parts(f: &kvexact_finding) -> (bool, bool, Option<String>, String) {
    let detail = unsafe { CStr::from_ptr(f.detail.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let reason = (!f.reason.is_null()).then(|| cstr(f.reason));
    (f.ok == 1, f.oracle == 1, reason, detail)
}

fn blank() -> kvexact_finding {
    kvexact_finding {
        ok: -1,
        oracle: -1,
        reason: null(),
        detail: [0; 256],
    }
}

fn err_code(err: *mut kvexact_error) -> String {
    let c = cstr(unsafe { kvexact_error_code(err) });
    unsafe { kvexact_error_free(err) };
    c
}

struct Fixture {
    name: String,
    request: Vec<u8>,
    api: String,
    ids: Vec<u32>,
}

/// The fixture files of a set, read independently of kvprofile-core.
fn fixtures_on_disk(profile: &str, engine_dir: &str) -> Vec<Fixture> {
    let dir = root().join("probefixtures").join(profile).join(engine_dir);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let file = p.file_name().unwrap().to_str().unwrap().to_string();
        let Some(name) = file.strip_suffix(".request.json") else {
            continue;
        };
        let expect: Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!("{name}.expect.json"))).unwrap(),
        )
        .unwrap();
        out.push(Fixture {
            name: name.to_string(),
            request: std::fs::read(&p).unwrap(),
            api: expect["api"].as_str().unwrap().to_string(),
            ids: expect["expectedTokenIds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect(),
        });
    }
    assert!(!out.is_empty(), "{}", dir.display());
    out
}

fn tokenize_body(ids: &[u32]) -> Vec<u8> {
    serde_json::to_vec(&json!({"count": ids.len(), "tokens": ids, "max_model_len": 40960})).unwrap()
}

struct Reg(*mut kvexact_registry);

impl Reg {
    fn load() -> Reg {
        let r = root();
        let bytes = r.as_os_str().as_encoded_bytes();
        let mut reg = null_mut();
        let mut err = null_mut();
        let st = unsafe {
            kvexact_registry_load(bytes.as_ptr(), bytes.len(), null(), 1, &mut reg, &mut err)
        };
        assert_eq!(st, KVEXACT_OK);
        Reg(reg)
    }

    fn profile(&self, id: &str) -> *const kvexact_profile {
        let mut p = null();
        assert_eq!(
            unsafe { kvexact_profile_by_id(self.0, id.as_ptr(), id.len(), &mut p) },
            KVEXACT_OK
        );
        p
    }

    fn encoder(&self, id: &str, contract: &CStr) -> *mut kvexact_encoder {
        let p = self.profile(id);
        let mut enc = null_mut();
        let st = unsafe { kvexact_encoder_new(p, contract.as_ptr(), &mut enc, null_mut()) };
        assert_eq!(st, KVEXACT_OK, "{id} {contract:?}");
        unsafe { kvexact_profile_free(p) };
        enc
    }

    fn fixtures(&self, id: &str, engine: kvexact_engine) -> *mut kvexact_fixtures {
        let mut fx = null_mut();
        let mut err = null_mut();
        let st = unsafe {
            kvexact_fixtures_load(self.0, id.as_ptr(), id.len(), engine, &mut fx, &mut err)
        };
        assert_eq!(st, KVEXACT_OK, "{id}/{engine}");
        fx
    }
}

impl Drop for Reg {
    fn drop(&mut self) {
        unsafe { kvexact_registry_free(self.0) };
    }
}

/// Every fixture of a tokenize engine: request bytes and surface as on disk; the banked ids
/// pass; one changed id, a shorter answer, HTTP 500 and a body without `count` fail with the
/// right reason.
fn check_tokenize_set(
    reg: &Reg,
    profile: &str,
    engine: kvexact_engine,
    dir: &str,
    contract: &CStr,
) {
    let enc = reg.encoder(profile, contract);
    let fx = reg.fixtures(profile, engine);
    let disk = fixtures_on_disk(profile, dir);
    let n = unsafe { kvexact_fixtures_count(fx) };
    assert_eq!(n, disk.len(), "{profile}/{dir}: fixture count");
    let p = reg.profile(profile);
    let mut f = blank();
    assert_eq!(
        unsafe { kvexact_fixtures_check(fx, p, KVEXACT_API_BOTH, &mut f) },
        KVEXACT_OK
    );
    assert!(parts(&f).0, "{profile}/{dir}: {:?}", parts(&f));
    unsafe { kvexact_profile_free(p) };
    for i in 0..n {
        let mut info = kvexact_fixture_info {
            name: null(),
            api: 99,
            clock: 9,
        };
        assert_eq!(
            unsafe { kvexact_fixture_describe(fx, i, &mut info) },
            KVEXACT_OK
        );
        let name = cstr(info.name);
        let want = disk
            .iter()
            .find(|d| d.name == name)
            .expect("fixture on disk");
        assert_eq!(
            info.api,
            if want.api == "chat" {
                KVEXACT_API_CHAT
            } else {
                KVEXACT_API_COMPLETIONS
            },
            "{name}"
        );
        assert_eq!(
            info.clock, 0,
            "{name}: no clock fixtures in the sample registry"
        );
        let (mut ptr, mut len) = (null(), 0usize);
        assert_eq!(
            unsafe { kvexact_fixture_request(fx, i, &mut ptr, &mut len) },
            KVEXACT_OK
        );
        assert_eq!(
            unsafe { std::slice::from_raw_parts(ptr, len) },
            &want.request[..],
            "{name}"
        );

        let judge = |status: i32, body: &[u8]| {
            let mut f = blank();
            let st = unsafe {
                kvexact_judge_tokenize(enc, fx, i, status, body.as_ptr(), body.len(), 0, &mut f)
            };
            assert_eq!(st, KVEXACT_OK);
            parts(&f)
        };
        let ok = judge(200, &tokenize_body(&want.ids));
        assert!(ok.0 && ok.2.is_none(), "{profile}/{dir}/{name}: {ok:?}");
        let mut wrong = want.ids.clone();
        let k = wrong.len() / 2;
        wrong[k] ^= 1;
        let bad = judge(200, &tokenize_body(&wrong));
        assert_eq!(bad.2.as_deref(), Some("token_mismatch"), "{name}: {bad:?}");
        assert!(bad.3.contains(&format!("index {k}")), "{name}: {}", bad.3);
        let short = judge(200, &tokenize_body(&want.ids[..want.ids.len() - 1]));
        assert_eq!(
            short.2.as_deref(),
            Some("token_mismatch"),
            "{name}: {short:?}"
        );
        let e500 = judge(500, b"{}");
        assert_eq!(e500.2.as_deref(), Some("probe_schema_mismatch"));
        let nocount = judge(200, br#"{"tokens":[1],"max_model_len":4}"#);
        assert_eq!(nocount.2.as_deref(), Some("probe_schema_mismatch"));
    }
    // Out of range index and a status that is not HTTP: arguments, not findings.
    let mut f = blank();
    let st = unsafe { kvexact_judge_tokenize(enc, fx, n, 200, b"{}".as_ptr(), 2, 0, &mut f) };
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    let st = unsafe { kvexact_judge_tokenize(enc, fx, 0, -1, b"{}".as_ptr(), 2, 0, &mut f) };
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    assert_eq!(f.ok, -1, "nothing written on an argument error");
    unsafe {
        kvexact_fixtures_free(fx);
        kvexact_encoder_free(enc);
    }
}

#[test]
fn probes_judges_and_challenge() {
    let reg = Reg::load();

    // Paths.
    assert_eq!(cstr(kvexact_tokenize_path(KVEXACT_VLLM)), "/tokenize");
    assert_eq!(cstr(kvexact_tokenize_path(KVEXACT_SGLANG)), "/v1/tokenize");
    assert!(kvexact_tokenize_path(KVEXACT_TRTLLM).is_null());
    assert_eq!(
        cstr(kvexact_identity_path(KVEXACT_SGLANG)),
        "/get_server_info"
    );
    assert_eq!(cstr(kvexact_served_model_path(KVEXACT_VLLM)), "/v1/models");
    assert!(kvexact_identity_path(9).is_null());

    // Tokenize judging, vLLM (both profiles) and SGLang.
    check_tokenize_set(&reg, QWEN3, KVEXACT_VLLM, "", c"vllm-kv-map-v2");
    check_tokenize_set(&reg, QWEN25, KVEXACT_VLLM, "", c"vllm-kv-map-v2");
    check_tokenize_set(&reg, QWEN3, KVEXACT_SGLANG, "sglang", c"sglang-kv-rank-v1");

    // TensorRT-LLM: the approved oracle re-derives every fixture.
    let enc = reg.encoder(QWEN3, c"trtllm-kv-http-preview-v1");
    let fx = reg.fixtures(QWEN3, KVEXACT_TRTLLM);
    assert_eq!(
        unsafe { kvexact_fixtures_count(fx) },
        fixtures_on_disk(QWEN3, "trtllm").len()
    );
    let oracle = |model: &str, mode: u32| {
        let mut f = blank();
        let st =
            unsafe { kvexact_judge_oracle(enc, fx, model.as_ptr(), model.len(), mode, 0, &mut f) };
        (st, parts(&f))
    };
    let (st, ok) = oracle("Qwen/Qwen3-0.6B", KVEXACT_API_BOTH);
    assert_eq!(st, KVEXACT_OK);
    assert!(ok.0 && ok.1, "{ok:?}");
    let (_, other) = oracle("Qwen/Qwen2.5-7B-Instruct", KVEXACT_API_BOTH);
    assert_eq!(
        other.2.as_deref(),
        Some("probe_schema_mismatch"),
        "{other:?}"
    );
    assert_eq!(oracle("Qwen/Qwen3-0.6B", 3).0, KVEXACT_ERR_INVALID_ARGUMENT);
    unsafe {
        kvexact_fixtures_free(fx);
        kvexact_encoder_free(enc);
    }

    // Fixture loading failures are registry errors naming the problem.
    let mut fx = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_fixtures_load(reg.0, b"nope".as_ptr(), 4, KVEXACT_VLLM, &mut fx, &mut err)
    };
    assert_eq!(st, KVEXACT_ERR_REGISTRY);
    assert!(fx.is_null());
    assert!(!err_code(err).is_empty());
    let st = unsafe {
        kvexact_fixtures_load(reg.0, QWEN3.as_ptr(), QWEN3.len(), 7, &mut fx, null_mut())
    };
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);

    // Manifest and identity.
    let mut m = null_mut();
    let st =
        unsafe { kvexact_manifest_load(reg.0, QWEN3.as_ptr(), QWEN3.len(), &mut m, null_mut()) };
    assert_eq!(st, KVEXACT_OK);
    let file = std::fs::read(root().join("manifests").join(format!("{QWEN3}.yaml"))).unwrap();
    assert_eq!(
        cstr(unsafe { kvexact_manifest_digest(m) }),
        hex::encode(Sha256::digest(&file))
    );
    assert_eq!(
        cstr(unsafe { kvexact_manifest_engine_version(m) }),
        "0.28.0"
    );
    let identity = |engine: kvexact_engine, status: i32, body: &str| {
        let mut f = blank();
        let st =
            unsafe { kvexact_judge_identity(engine, m, status, body.as_ptr(), body.len(), &mut f) };
        assert_eq!(st, KVEXACT_OK);
        parts(&f)
    };
    assert!(identity(KVEXACT_VLLM, 200, r#"{"version":"0.28.0"}"#).0);
    let v = identity(KVEXACT_VLLM, 200, r#"{"version":"0.27.1"}"#);
    assert_eq!(v.2.as_deref(), Some("identity_mismatch"), "{v:?}");
    assert!(v.3.contains("0.27.1"));
    assert_eq!(
        identity(KVEXACT_VLLM, 200, r#"{"v":1}"#).2.as_deref(),
        Some("probe_schema_mismatch")
    );
    let rev = "c1899de289a04d12100db370d81485cdf75e47ca";
    assert!(
        identity(
            KVEXACT_SGLANG,
            200,
            &format!(r#"{{"version":"0.28.0","revision":"{rev}"}}"#)
        )
        .0
    );
    assert_eq!(
        identity(
            KVEXACT_SGLANG,
            200,
            r#"{"version":"0.28.0","revision":"main"}"#
        )
        .2
        .as_deref(),
        Some("identity_mismatch")
    );
    assert!(
        identity(
            KVEXACT_TRTLLM,
            200,
            r#"{"kv_cache_hash_algo":"v1_block_key","tokens_per_block":32}"#
        )
        .0
    );
    assert_eq!(
        identity(KVEXACT_TRTLLM, 200, r#"{"tokens_per_block":32}"#)
            .2
            .as_deref(),
        Some("identity_mismatch")
    );
    unsafe { kvexact_manifest_free(m) };
    let mut m = null_mut();
    let mut err = null_mut();
    let st = unsafe { kvexact_manifest_load(reg.0, b"nope".as_ptr(), 4, &mut m, &mut err) };
    assert_eq!(st, KVEXACT_ERR_REGISTRY);
    assert!(m.is_null());
    unsafe { kvexact_error_free(err) };

    // Geometry and served model.
    let geometry = |engine: kvexact_engine, body: &str, bs: u32| {
        let mut f = blank();
        let st = unsafe {
            kvexact_judge_geometry(engine, 200, body.as_ptr(), body.len(), bs, 5557, 1, &mut f)
        };
        assert_eq!(st, KVEXACT_OK);
        parts(&f)
    };
    let sg = r#"{"page_size":16,"kv_events":{"endpoint_port_base":5557,"dp_size":1}}"#;
    assert!(geometry(KVEXACT_SGLANG, sg, 16).0);
    assert_eq!(
        geometry(KVEXACT_SGLANG, sg, 32).2.as_deref(),
        Some("engine_geometry_mismatch")
    );
    assert_eq!(
        geometry(KVEXACT_SGLANG, r#"{"page_size":16}"#, 16)
            .2
            .as_deref(),
        Some("engine_geometry_mismatch")
    );
    let trt = r#"{"tokens_per_block":32,"kv_cache_hash_algo":"v1_block_key"}"#;
    assert!(geometry(KVEXACT_TRTLLM, trt, 32).0);
    assert_eq!(
        geometry(KVEXACT_TRTLLM, trt, 16).2.as_deref(),
        Some("engine_geometry_mismatch")
    );
    assert!(geometry(KVEXACT_VLLM, "", 16).0);
    let served = |engine: kvexact_engine, body: &str, model: &str| {
        let mut f = blank();
        let st = unsafe {
            kvexact_judge_served_model(
                engine,
                200,
                body.as_ptr(),
                body.len(),
                model.as_ptr(),
                model.len(),
                &mut f,
            )
        };
        assert_eq!(st, KVEXACT_OK);
        parts(&f)
    };
    let cards = r#"{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model"}]}"#;
    assert!(served(KVEXACT_VLLM, cards, "Qwen/Qwen3-0.6B").0);
    assert_eq!(
        served(KVEXACT_VLLM, cards, "other").2.as_deref(),
        Some("identity_mismatch")
    );
    assert!(
        served(
            KVEXACT_SGLANG,
            r#"{"model_path":"Qwen/Qwen3-0.6B"}"#,
            "Qwen/Qwen3-0.6B"
        )
        .0
    );

    check_challenge(&reg);
}

fn challenge(
    enc: *const kvexact_encoder,
    h: *const kvexact_hasher,
    nonce: &[u8; 16],
    dp_ranks: u32,
) -> *mut kvexact_challenge {
    let model = "Qwen/Qwen3-0.6B";
    let opts = kvexact_challenge_opts {
        model: model.as_ptr(),
        model_len: model.len(),
        dp_ranks,
    };
    let mut c = null_mut();
    let mut err = null_mut();
    let st = unsafe { kvexact_challenge_new(enc, h, nonce.as_ptr(), &opts, &mut c, &mut err) };
    assert_eq!(st, KVEXACT_OK);
    c
}

fn expected(c: *const kvexact_challenge) -> (Vec<u64>, Vec<u32>) {
    let (mut h, mut nh, mut t, mut nt) = (null(), 0usize, null(), 0usize);
    assert_eq!(
        unsafe { kvexact_challenge_expected(c, &mut h, &mut nh, &mut t, &mut nt) },
        KVEXACT_OK
    );
    unsafe {
        (
            std::slice::from_raw_parts(h, nh).to_vec(),
            std::slice::from_raw_parts(t, nt).to_vec(),
        )
    }
}

fn stored(hashes: &[u64], tokens: &[u32], block_size: u32) -> kvexact_event {
    kvexact_event {
        kind: KVEXACT_EVENT_STORED,
        hashes: hashes.as_ptr(),
        n_hashes: hashes.len(),
        token_ids: tokens.as_ptr(),
        n_tokens: tokens.len(),
        block_size,
        has_lora: 0,
        has_extra_keys: 0,
        has_parent: 0,
        parent_hash: 0,
        rehash_mismatch: 0,
        dp_rank: -1,
        event_id: -1,
    }
}

fn result(c: *const kvexact_challenge, timed_out: i32) -> (bool, bool, Option<String>, String) {
    let mut f = blank();
    assert_eq!(
        unsafe { kvexact_challenge_result(c, timed_out, &mut f) },
        KVEXACT_OK
    );
    parts(&f)
}

fn check_challenge(reg: &Reg) {
    let enc = reg.encoder(QWEN3, c"vllm-kv-map-v2");
    let mut h = null_mut();
    let seed = b"0";
    assert_eq!(
        unsafe {
            kvexact_hasher_new(
                KVEXACT_SHA256_CBOR,
                16,
                seed.as_ptr(),
                seed.len(),
                &mut h,
                std::ptr::null_mut(),
            )
        },
        KVEXACT_OK
    );
    let nonce = [0x5a_u8; 16];
    let c = challenge(enc, h, &nonce, 1);

    // The request body: size query, then the body.
    let mut len = 0usize;
    let st = unsafe { kvexact_challenge_request_body(c, null(), 0, 0, null_mut(), 0, &mut len) };
    assert_eq!(st, KVEXACT_ERR_BUFFER_TOO_SMALL);
    let mut buf = vec![0u8; len];
    let st = unsafe {
        kvexact_challenge_request_body(c, null(), 0, 0, buf.as_mut_ptr(), buf.len(), &mut len)
    };
    assert_eq!(st, KVEXACT_OK);
    let body: Value = serde_json::from_slice(&buf).unwrap();
    assert_eq!(body["model"], "Qwen/Qwen3-0.6B");
    assert_eq!(body["max_tokens"], 1);
    assert_eq!(body["temperature"], 0);
    let prompt = body["prompt"].as_str().unwrap().to_string();
    let head = format!(
        "loxilb kv exact attestation challenge nonce {}",
        "5a".repeat(16)
    );
    assert!(prompt.starts_with(&head), "{prompt}");
    let tail = &prompt[head.len()..];
    // The nonce alone may make the prompt long enough; any growth is whole tails.
    assert!(tail
        .replace(" the quick brown fox jumps over the lazy dog", "")
        .is_empty());
    // SGLang P/D bootstrap fields.
    let mut pd = vec![0u8; 4096];
    let st = unsafe {
        kvexact_challenge_request_body(
            c,
            c"10.1.2.3".as_ptr(),
            8998,
            77,
            pd.as_mut_ptr(),
            pd.len(),
            &mut len,
        )
    };
    assert_eq!(st, KVEXACT_OK);
    let pd: Value = serde_json::from_slice(&pd[..len]).unwrap();
    assert_eq!(
        (
            pd["bootstrap_host"].as_str(),
            pd["bootstrap_port"].as_u64(),
            pd["bootstrap_room"].as_i64()
        ),
        (Some("10.1.2.3"), Some(8998), Some(77))
    );
    assert_eq!(pd["prompt"], body["prompt"]);
    let st = unsafe {
        kvexact_challenge_request_body(
            c,
            c"h".as_ptr(),
            1,
            -1,
            buf.as_mut_ptr(),
            buf.len(),
            &mut len,
        )
    };
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);

    // Expected tokens and hashes = the hot path's encode + hash of the prompt, whole blocks.
    let (hashes, tokens) = expected(c);
    let mut ids = vec![0u32; 4096];
    let n = unsafe {
        kvexact_encode_completions(enc, prompt.as_ptr(), prompt.len(), ids.as_mut_ptr(), 4096)
    };
    assert!(n >= 32, "{n}");
    ids.truncate(n as usize / 16 * 16);
    assert_eq!(tokens, ids);
    let mut want = vec![0u64; ids.len() / 16];
    let nb = unsafe {
        kvexact_block_hashes_u64(h, ids.as_ptr(), ids.len(), 1, want.as_mut_ptr(), want.len())
    };
    assert_eq!(nb as usize, want.len());
    assert_eq!(hashes, want);
    assert!(hashes.len() >= 2);

    // Echo of every block in one stored event (block_size 16) → pass.
    assert!(!result(c, 0).0, "undecided before any echo");
    let unrelated = [1u64, 2];
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, -1, &stored(&unrelated, &tokens[..32], 16)) },
        0
    );
    let ev = stored(&hashes, &tokens, 16);
    assert_eq!(unsafe { kvexact_challenge_observe(c, 0, &ev) }, 1);
    let ok = result(c, 0);
    assert!(ok.0 && ok.2.is_none(), "{ok:?}");
    unsafe { kvexact_challenge_free(c) };

    // Wrong tokens for an echoed block → challenge_failed, decided at once.
    let c = challenge(enc, h, &nonce, 1);
    let mut bad = tokens.clone();
    bad[3] += 1;
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, -1, &stored(&hashes, &bad, 16)) },
        1
    );
    assert_eq!(result(c, 0).2.as_deref(), Some("challenge_failed"));
    unsafe { kvexact_challenge_free(c) };

    // A TensorRT-LLM re-hash mismatch, LoRA, an undeclared rank → challenge_failed.
    for tweak in 0..3 {
        let c = challenge(enc, h, &nonce, 2);
        let mut ev = stored(&hashes[..1], &tokens[..16], 16);
        let rank = match tweak {
            0 => {
                ev.rehash_mismatch = 1;
                0
            }
            1 => {
                ev.has_lora = 1;
                1
            }
            _ => 2,
        };
        assert_eq!(
            unsafe { kvexact_challenge_observe(c, rank, &ev) },
            1,
            "tweak {tweak}"
        );
        assert_eq!(
            result(c, 0).2.as_deref(),
            Some("challenge_failed"),
            "tweak {tweak}"
        );
        unsafe { kvexact_challenge_free(c) };
    }

    // Only the first block echoed, then the wait ends → challenge_timeout.
    let c = challenge(enc, h, &nonce, 1);
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, -1, &stored(&hashes[..1], &tokens[..16], 16)) },
        0
    );
    let removed = kvexact_event {
        kind: KVEXACT_EVENT_REMOVED,
        ..stored(&hashes, &[], 0)
    };
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, -1, &removed) },
        0,
        "removals do not count"
    );
    let t = result(c, 1);
    assert_eq!(t.2.as_deref(), Some("challenge_timeout"), "{t:?}");
    assert!(t.3.contains(&format!("1 of {}", hashes.len())), "{}", t.3);
    // Argument errors: negative statuses, the challenge is untouched.
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, -2, &ev) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, 0, null()) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { kvexact_challenge_observe(null_mut(), 0, &ev) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    unsafe { kvexact_challenge_free(c) };

    // A different nonce gives a different prompt and different hashes; a NULL nonce draws one.
    let c2 = challenge(enc, h, &[0x11; 16], 1);
    assert_ne!(expected(c2).0, hashes);
    unsafe { kvexact_challenge_free(c2) };
    let opts = kvexact_challenge_opts {
        model: b"m".as_ptr(),
        model_len: 1,
        dp_ranks: 1,
    };
    let mut c3 = null_mut();
    assert_eq!(
        unsafe { kvexact_challenge_new(enc, h, null(), &opts, &mut c3, null_mut()) },
        KVEXACT_OK
    );
    assert_ne!(expected(c3).0, hashes);
    unsafe { kvexact_challenge_free(c3) };

    // SGLang rank coverage: two declared ranks, the first challenge echoed by rank 0 only →
    // retry; an undecided challenge does not count; rank 1 echoes the next → covered.
    let mut cov = null_mut();
    assert_eq!(
        unsafe { kvexact_rank_coverage_new(2, &mut cov, std::ptr::null_mut()) },
        KVEXACT_OK
    );
    let c = challenge(enc, h, &nonce, 2);
    assert_eq!(
        unsafe { kvexact_rank_coverage_record(cov, c) },
        KVEXACT_ERR_INVALID_ARGUMENT,
        "an undecided challenge does not count"
    );
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, 0, &stored(&hashes, &tokens, 16)) },
        1
    );
    assert_eq!(
        unsafe { kvexact_rank_coverage_record(cov, c) },
        1,
        "rank 1 still missing"
    );
    let mut f = blank();
    assert_eq!(
        unsafe { kvexact_rank_coverage_result(cov, &mut f) },
        KVEXACT_OK
    );
    let r = parts(&f);
    assert_eq!(r.2.as_deref(), Some("challenge_failed"));
    assert!(r.3.contains("[1]"), "{}", r.3);
    unsafe { kvexact_challenge_free(c) };
    let c = challenge(enc, h, &[0x22; 16], 2);
    let (h2, t2) = expected(c);
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, 1, &stored(&h2, &t2, 16)) },
        1
    );
    assert_eq!(
        unsafe { kvexact_rank_coverage_record(cov, c) },
        0,
        "decided"
    );
    assert_eq!(
        unsafe { kvexact_rank_coverage_result(cov, &mut f) },
        KVEXACT_OK
    );
    assert!(parts(&f).0, "{:?}", parts(&f));
    unsafe {
        kvexact_challenge_free(c);
        kvexact_rank_coverage_free(cov);
        kvexact_rank_coverage_free(null_mut());
    }
    // One declared rank and a stream without ranks: the first passed challenge decides.
    let mut cov = null_mut();
    assert_eq!(
        unsafe { kvexact_rank_coverage_new(0, &mut cov, std::ptr::null_mut()) },
        KVEXACT_OK
    );
    let c = challenge(enc, h, &nonce, 1);
    assert_eq!(
        unsafe { kvexact_challenge_observe(c, -1, &stored(&hashes, &tokens, 16)) },
        1
    );
    assert_eq!(unsafe { kvexact_rank_coverage_record(cov, c) }, 0);
    assert_eq!(
        unsafe { kvexact_rank_coverage_result(cov, &mut f) },
        KVEXACT_OK
    );
    assert!(parts(&f).0);
    assert_eq!(
        unsafe { kvexact_rank_coverage_record(null_mut(), c) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    unsafe {
        kvexact_challenge_free(c);
        kvexact_rank_coverage_free(cov);
    }

    // A hasher whose blocks the prompt cannot fill twice → KVEXACT_ERR_CHALLENGE / challenge_failed.
    let mut big = null_mut();
    assert_eq!(
        unsafe {
            kvexact_hasher_new(
                KVEXACT_SHA256_CBOR,
                4096,
                seed.as_ptr(),
                1,
                &mut big,
                std::ptr::null_mut(),
            )
        },
        KVEXACT_OK
    );
    let mut c4 = null_mut();
    let mut err = null_mut();
    let st = unsafe { kvexact_challenge_new(enc, big, nonce.as_ptr(), &opts, &mut c4, &mut err) };
    assert_eq!(st, KVEXACT_ERR_CHALLENGE);
    assert!(c4.is_null());
    assert_eq!(err_code(err), "challenge_failed");
    let st = unsafe { kvexact_challenge_new(enc, h, nonce.as_ptr(), null(), &mut c4, null_mut()) };
    assert_eq!(st, KVEXACT_ERR_NULL_ARGUMENT);
    unsafe {
        kvexact_hasher_free(big);
        kvexact_hasher_free(h);
        kvexact_encoder_free(enc);
    }
}

/// The ladder through JSON: evidence with every rung green is READY with three receipts; a
/// token mismatch stops at PROFILE_VALIDATED with its reason; bad JSON and unknown keys are
/// argument errors; the size query protocol holds.
#[test]
fn readiness_evaluate_json() {
    let eval = |doc: &str| -> Result<Value, (i32, String)> {
        let mut len = 0usize;
        let mut err = null_mut();
        let st = unsafe {
            kvexact_readiness_evaluate(doc.as_ptr(), doc.len(), null_mut(), 0, &mut len, &mut err)
        };
        if st != KVEXACT_ERR_BUFFER_TOO_SMALL {
            return Err((st, err_code(err)));
        }
        let mut buf = vec![0u8; len];
        let st = unsafe {
            kvexact_readiness_evaluate(
                doc.as_ptr(),
                doc.len(),
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                null_mut(),
            )
        };
        assert_eq!(st, KVEXACT_OK);
        Ok(serde_json::from_slice(&buf[..len]).unwrap())
    };
    let pass = json!({"finding": {"ok": true, "reason": null, "detail": "ok"}, "timeUnixMs": 5});
    let mut ev = json!({
        "manifest": {"kind": "present", "digest": "ab"},
        "fixtures": {"ok": true, "reason": null, "detail": "7 fixtures"},
        "endpoints": [{"endpoint": "10.0.0.1:8000", "identity": pass, "tokenParity": pass, "challenge": pass}],
    });
    let v = eval(&ev.to_string()).unwrap();
    assert_eq!(v["enforcedState"], "READY", "{v}");
    assert_eq!(v["reasonCodes"], json!([]));
    assert_eq!(v["receipts"].as_array().unwrap().len(), 3);
    assert_eq!(v["receipts"][0]["manifestDigest"], "ab");
    ev["endpoints"][0]["tokenParity"]["finding"] =
        json!({"ok": false, "reason": "token_mismatch", "detail": "index 3"});
    let v = eval(&ev.to_string()).unwrap();
    assert_eq!(v["enforcedState"], "PROFILE_VALIDATED");
    assert_eq!(v["reasonCodes"], json!(["token_mismatch"]));
    let v = eval("{}").unwrap();
    assert_eq!(v["enforcedState"], "PROFILE_VALIDATED");
    assert_eq!(v["reasonCodes"], json!(["no_endpoints"]));
    let (st, code) = eval(r#"{"bogus":1}"#).unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    assert_eq!(code, "invalid_argument");
    assert_eq!(
        eval("not json").unwrap_err().0,
        KVEXACT_ERR_INVALID_ARGUMENT
    );
}
