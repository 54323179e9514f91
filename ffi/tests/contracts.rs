//! Engine contracts per release through the C entry points (`ffi/src/contract.rs`):
//!
//! * `kvexact_contract_resolve`: known versions of the three engines give exactly the release
//!   and contract `kvprobe::contract::resolve` gives, as static strings (same pointer on every
//!   call); an unknown version is `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION` with the code
//!   `UNKNOWN_ENGINE_VERSION` and the nearest releases in the message, nothing written; bad
//!   engine values and NULL arguments;
//! * `kvexact_contracts_json`: the document `kvprobe::contract::catalog_json` gives, with the
//!   size-query convention;
//! * `kvexact_hasher_new_for_contract`: for vLLM 0.17.0 (NONE_HASH rule A), 0.24.0 and 0.31.0
//!   with seed "0", the hashes `kvprobe::bridge::hasher` gives for the same ids, by contract
//!   id + version and by release id; the engines' own vectors
//!   (`testdata/vectors/versions/vllm-*/block_hashes.json`); an unset seed under rule A
//!   refused, under rule B equal to `kvexact_hasher_new`'s reference hasher; SGLang 0.5.23;
//!   unknown version, contract mismatch, unknown and ambiguous ids, algorithm of another
//!   engine, seeds for non-vLLM releases, `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT` refused by
//!   `kvexact_hasher_new`;
//! * `kvexact_event_decoder_new_for_contract`: every vLLM 0.20.0 payload
//!   (`testdata/vectors/versions/vllm-0.20.0/kv_events.json`) decodes under the 0.20 release
//!   schema as under the family schema, while the 0.17 release decoder refuses the stored
//!   events (`schema_mismatch`); TensorRT-LLM releases take a re-hasher, vLLM ones do not.

use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

use kvexact::contract::*;
use kvexact::enums::*;
use kvexact::error::*;
use kvexact::events::*;
use kvexact::hasher::*;
use kvexact::status::*;
use kvprobe::{contract, Engine};
use serde_json::Value;

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

fn vector(rel: &str) -> Value {
    let path = format!("{}/../testdata/vectors/{rel}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("read vector")).expect("json")
}

/// Pseudo-random token ids (a fixed LCG: the same ids on every run).
fn ids(n: usize) -> Vec<u32> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((x >> 33) % 151_000) as u32
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// kvexact_contract_resolve

fn resolve(
    engine: u32,
    version: &CStr,
) -> Result<(String, String, *const c_char), (i32, String, String)> {
    let sentinel = c"sentinel".as_ptr();
    let (mut r, mut c) = (sentinel, sentinel);
    let mut err: *mut kvexact_error = null_mut();
    let st =
        unsafe { kvexact_contract_resolve(engine, version.as_ptr(), &mut r, &mut c, &mut err) };
    if st != KVEXACT_OK {
        assert_eq!((r, c), (sentinel, sentinel), "outputs written on failure");
        let e = take_err(err);
        assert_eq!(e.0, st);
        return Err(e);
    }
    assert!(err.is_null());
    Ok((cstr(r), cstr(c), r))
}

#[test]
fn resolve_known_versions() {
    for (engine, e, version, release, contract_id) in [
        (
            KVEXACT_VLLM,
            Engine::Vllm,
            c"0.17.0",
            "vllm-kv-array-v1-r0.17",
            "vllm-kv-array-v1",
        ),
        (
            KVEXACT_VLLM,
            Engine::Vllm,
            c"0.24.0",
            "vllm-kv-map-v2-r0.24",
            "vllm-kv-map-v2",
        ),
        (
            KVEXACT_VLLM,
            Engine::Vllm,
            c"v0.25.1",
            "vllm-kv-map-v2-r0.24",
            "vllm-kv-map-v2",
        ),
        (
            KVEXACT_VLLM,
            Engine::Vllm,
            c"0.31.0",
            "vllm-kv-map-v3-r0.31",
            "vllm-kv-map-v3",
        ),
        (
            KVEXACT_SGLANG,
            Engine::Sglang,
            c"0.5.23",
            "sglang-kv-map-v2-r0.5.23",
            "sglang-kv-map-v2",
        ),
        (
            KVEXACT_TRTLLM,
            Engine::Trtllm,
            c"1.3.0rc29",
            "trtllm-kv-http-v2-r1.3.0rc29",
            "trtllm-kv-http-v2",
        ),
    ] {
        let (r, c, ptr) = resolve(engine, version).unwrap_or_else(|e| panic!("{version:?}: {e:?}"));
        assert_eq!(
            (r.as_str(), c.as_str()),
            (release, contract_id),
            "{version:?}"
        );
        // The library's answer, and a static string: the same pointer every time.
        let lib = contract::resolve(e, version.to_str().unwrap()).unwrap();
        assert_eq!(
            (lib.release_id(), lib.contract_id()),
            (release, contract_id)
        );
        assert_eq!(resolve(engine, version).unwrap().2, ptr);
    }
}

#[test]
fn resolve_refuses_unknown_versions_and_bad_arguments() {
    for (engine, version) in [
        (KVEXACT_VLLM, c"0.35.0"),
        (KVEXACT_VLLM, c"0.16.0"),
        (KVEXACT_VLLM, c""),
        (KVEXACT_SGLANG, c"0.5.17"),
        (KVEXACT_TRTLLM, c"1.3.0rc30"),
    ] {
        let (st, code, msg) = resolve(engine, version).unwrap_err();
        assert_eq!(st, KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "{version:?}: {msg}");
        assert_eq!(code, "UNKNOWN_ENGINE_VERSION");
        assert!(msg.contains("nearest"), "{msg}");
    }
    let (_, _, msg) = resolve(KVEXACT_VLLM, c"0.35.0").unwrap_err();
    assert!(
        msg.contains("vllm-kv-map-v3-r0.34"),
        "names the nearest release: {msg}"
    );
    assert_eq!(
        cstr(kvexact::status::kvexact_status_name(
            KVEXACT_ERR_UNKNOWN_ENGINE_VERSION
        )),
        "unknown_engine_version"
    );

    assert_eq!(
        resolve(7, c"0.24.0").unwrap_err().0,
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        resolve(KVEXACT_VLLM, c"\xff").unwrap_err().0,
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    let mut p: *const c_char = null();
    unsafe {
        assert_eq!(
            kvexact_contract_resolve(KVEXACT_VLLM, null(), &mut p, &mut p, null_mut()),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_contract_resolve(
                KVEXACT_VLLM,
                c"0.24.0".as_ptr(),
                null_mut(),
                &mut p,
                null_mut()
            ),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_contract_resolve(
                KVEXACT_VLLM,
                c"0.24.0".as_ptr(),
                &mut p,
                null_mut(),
                null_mut()
            ),
            KVEXACT_ERR_NULL_ARGUMENT
        );
    }
    assert!(p.is_null());
}

// ---------------------------------------------------------------------------------------------
// kvexact_contracts_json

#[test]
fn contracts_json_is_the_catalog() {
    let want = serde_json::to_string(&contract::catalog_json().unwrap()).unwrap();
    let mut len = 0usize;
    // Size query.
    assert_eq!(
        unsafe { kvexact_contracts_json(null_mut(), 0, &mut len) },
        KVEXACT_ERR_BUFFER_TOO_SMALL
    );
    assert_eq!(len, want.len());
    // Too small: nothing but the length is written.
    let mut small = vec![0xAAu8; len - 1];
    let mut len2 = 0usize;
    assert_eq!(
        unsafe { kvexact_contracts_json(small.as_mut_ptr(), small.len(), &mut len2) },
        KVEXACT_ERR_BUFFER_TOO_SMALL
    );
    assert_eq!(len2, want.len());
    assert!(small.iter().all(|&b| b == 0xAA));
    // Exact size.
    let mut buf = vec![0u8; len];
    assert_eq!(
        unsafe { kvexact_contracts_json(buf.as_mut_ptr(), buf.len(), &mut len2) },
        KVEXACT_OK
    );
    assert_eq!(std::str::from_utf8(&buf).unwrap(), want);
    let doc: Value = serde_json::from_slice(&buf).unwrap();
    assert_eq!(doc["schema"], "kvexact-contracts/v1");
    let releases = doc["releases"].as_array().unwrap();
    assert!(releases
        .iter()
        .any(|r| r["release"] == "vllm-kv-map-v2-r0.24"));
    // NULL arguments.
    unsafe {
        assert_eq!(
            kvexact_contracts_json(buf.as_mut_ptr(), buf.len(), null_mut()),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_contracts_json(null_mut(), 10, &mut len2),
            KVEXACT_ERR_NULL_ARGUMENT
        );
    }
}

// ---------------------------------------------------------------------------------------------
// kvexact_hasher_new_for_contract

/// A hasher by contract, or (status, code, message); on failure `*out` is not written.
fn hasher_for(
    id: &CStr,
    version: Option<&CStr>,
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: Option<&str>,
) -> Result<*mut kvexact_hasher, (i32, String, String)> {
    let sentinel = std::ptr::NonNull::<kvexact_hasher>::dangling().as_ptr();
    let mut h = sentinel;
    let mut err: *mut kvexact_error = null_mut();
    let (sp, sl) = seed.map_or((null(), 0), |s| (s.as_ptr(), s.len()));
    let st = unsafe {
        kvexact_hasher_new_for_contract(
            id.as_ptr(),
            version.map_or(null(), CStr::as_ptr),
            algo,
            block_size,
            sp,
            sl,
            &mut h,
            &mut err,
        )
    };
    if st != KVEXACT_OK {
        assert_eq!(h, sentinel, "out written on failure");
        let e = take_err(err);
        assert_eq!(e.0, st);
        return Err(e);
    }
    assert!(err.is_null() && !h.is_null());
    Ok(h)
}

fn hashes(h: *const kvexact_hasher, ids: &[u32]) -> Vec<u64> {
    let mut out = vec![0u64; ids.len() + 1];
    let n = unsafe {
        kvexact_block_hashes_u64(h, ids.as_ptr(), ids.len(), 1, out.as_mut_ptr(), out.len())
    };
    assert!(n >= 0, "status {n}");
    out.truncate(n as usize);
    out
}

fn free(h: *mut kvexact_hasher) {
    unsafe { kvexact_hasher_free(h) };
}

/// What `kvprobe::bridge::hasher` gives for the same contract, ids and seed.
fn bridge_hashes(
    c: &contract::Contract,
    block_size: usize,
    seed: Option<&str>,
    ids: &[u32],
) -> Vec<u64> {
    let h = kvprobe::bridge::hasher(c, None, block_size, seed).unwrap();
    let mut out = vec![0u64; ids.len() / block_size];
    let n = h.block_hashes_u64(ids, &mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn hasher_by_contract_equals_the_bridge() {
    let ids = ids(16 * 9 + 5);
    for (contract_id, release, version) in [
        (c"vllm-kv-array-v1", c"vllm-kv-array-v1-r0.17", "0.17.0"),
        (c"vllm-kv-map-v2", c"vllm-kv-map-v2-r0.24", "0.24.0"),
        (c"vllm-kv-map-v3", c"vllm-kv-map-v3-r0.31", "0.31.0"),
    ] {
        let c = contract::resolve(Engine::Vllm, version).unwrap();
        let want = bridge_hashes(&c, 16, Some("0"), &ids);
        assert_eq!(want.len(), 9);
        let v = std::ffi::CString::new(version).unwrap();
        for (id, ver) in [
            (contract_id, Some(v.as_c_str())),
            (release, Some(v.as_c_str())),
            (release, None),
        ] {
            for algo in [KVEXACT_HASH_ALGO_CONTRACT_DEFAULT, KVEXACT_SHA256_CBOR] {
                let h = hasher_for(id, ver, algo, 16, Some("0"))
                    .unwrap_or_else(|e| panic!("{id:?} {ver:?}: {e:?}"));
                assert_eq!(hashes(h, &ids), want, "{id:?} {ver:?} algo {algo}");
                free(h);
            }
        }
        // Another algorithm follows the bridge too.
        let h = hasher_for(release, None, KVEXACT_XXHASH_CBOR, 16, Some("0")).unwrap();
        let b = kvprobe::bridge::hasher(
            &c,
            Some(kvprofile_core::HashAlgorithm::XxhashCbor),
            16,
            Some("0"),
        )
        .unwrap();
        let mut want_x = vec![0u64; 9];
        b.block_hashes_u64(&ids, &mut want_x).unwrap();
        assert_eq!(hashes(h, &ids), want_x);
        free(h);
    }
    // SGLang 0.5.23 (wide pages; no seed) and TensorRT-LLM.
    let c = contract::resolve(Engine::Sglang, "0.5.23").unwrap();
    let h = hasher_for(
        c"sglang-kv-map-v2",
        Some(c"0.5.23"),
        KVEXACT_HASH_ALGO_CONTRACT_DEFAULT,
        16,
        None,
    )
    .unwrap();
    assert_eq!(hashes(h, &ids), bridge_hashes(&c, 16, None, &ids));
    free(h);
    let c = contract::resolve(Engine::Trtllm, "1.3.0rc29").unwrap();
    let h = hasher_for(
        c"trtllm-kv-http-v2",
        Some(c"1.3.0rc29"),
        KVEXACT_BLOCKHASH_TRTLLM,
        32,
        None,
    )
    .unwrap();
    assert_eq!(hashes(h, &ids), bridge_hashes(&c, 32, None, &ids));
    free(h);
}

/// The engines' own vectors (plain ids, `sha256_cbor`, PYTHONHASHSEED=0): the hasher of the
/// release each vector set was produced by reproduces it.
#[test]
fn hasher_by_contract_reproduces_release_vectors() {
    let mut checked = 0;
    for (dir, version) in [
        ("vllm-0.17.0", c"0.17.0"),
        ("vllm-0.24.0", c"0.24.0"),
        ("vllm-0.33.0", c"0.33.0"),
    ] {
        let doc = vector(&format!("versions/{dir}/block_hashes.json"));
        let release = resolve(KVEXACT_VLLM, version).unwrap().0;
        let release = std::ffi::CString::new(release).unwrap();
        for case in doc["cases"].as_array().unwrap() {
            let inputs = &case["inputs"];
            let plain = inputs["hash_algo"] == "sha256_cbor"
                && inputs["lora"].is_null()
                && inputs["cache_salt"].is_null()
                && inputs["mm_features"].as_array().is_some_and(Vec::is_empty)
                && inputs.get("prompt_embeds").is_none_or(Value::is_null)
                && inputs
                    .get("num_hash_lookahead_tokens")
                    .is_none_or(|v| v.is_null() || v == 0);
            let Some(tokens) = inputs["token_ids"].as_array().filter(|_| plain) else {
                continue;
            };
            let Some(tokens) = tokens
                .iter()
                .map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()))
                .collect::<Option<Vec<u32>>>()
            else {
                continue; // ids beyond u32 (the C ABI takes uint32_t)
            };
            let seed = inputs["python_hash_seed"].as_str();
            let bs = inputs["block_size"].as_u64().unwrap() as u32;
            let want: Vec<u64> = case["expected"]["block_hashes_int"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            let name = case["name"].as_str().unwrap();
            for (id, ver) in [
                (release.as_c_str(), None),
                (release.as_c_str(), Some(version)),
            ] {
                let h = hasher_for(id, ver, KVEXACT_SHA256_CBOR, bs, seed)
                    .unwrap_or_else(|e| panic!("{dir} {name}: {e:?}"));
                assert_eq!(hashes(h, &tokens), want, "{dir} {name}");
                free(h);
            }
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} cases");
}

#[test]
fn hasher_by_contract_refusals() {
    // NONE_HASH rule A (vLLM 0.17–0.28): an unset seed is random in the engine: refused.
    for (id, ver) in [
        (c"vllm-kv-array-v1", Some(c"0.17.0")),
        (c"vllm-kv-map-v2-r0.24", None),
    ] {
        let (st, code, msg) = hasher_for(id, ver, KVEXACT_SHA256_CBOR, 16, None).unwrap_err();
        assert_eq!(
            (st, code.as_str()),
            (
                KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE,
                "none_hash_unreproducible"
            ),
            "{msg}"
        );
        assert!(msg.contains("PYTHONHASHSEED"), "{msg}");
    }
    // Rule B (0.29+): unset is H("vllm-none-hash") for SHA-256 — the reference hasher's.
    let ids = ids(64);
    let h = hasher_for(
        c"vllm-kv-map-v3",
        Some(c"0.31.0"),
        KVEXACT_SHA256_CBOR,
        16,
        None,
    )
    .unwrap();
    let mut r: *mut kvexact_hasher = null_mut();
    assert_eq!(
        unsafe {
            kvexact_hasher_new(
                KVEXACT_SHA256_CBOR,
                16,
                null(),
                0,
                &mut r,
                std::ptr::null_mut(),
            )
        },
        KVEXACT_OK
    );
    assert_eq!(hashes(h, &ids), hashes(r, &ids));
    free(h);
    free(r);
    // ... but xxhash with an unset seed stays random under rule B.
    let (st, code, msg) =
        hasher_for(c"vllm-kv-map-v3-r0.31", None, KVEXACT_XXHASH_CBOR, 16, None).unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (
            KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE,
            "none_hash_unreproducible"
        ),
        "{msg}"
    );
    // The reference-rules constructor reports the same status, code and kvhash message.
    let mut e: *mut kvexact_error = null_mut();
    let mut r: *mut kvexact_hasher = null_mut();
    assert_eq!(
        unsafe { kvexact_hasher_new(KVEXACT_XXHASH_CBOR, 16, null(), 0, &mut r, &mut e) },
        KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE
    );
    assert!(r.is_null() && !e.is_null());
    let (code2, msg2) = unsafe {
        (
            CStr::from_ptr(kvexact_error_code(e))
                .to_str()
                .unwrap()
                .to_string(),
            CStr::from_ptr(kvexact_error_message(e))
                .to_str()
                .unwrap()
                .to_string(),
        )
    };
    unsafe { kvexact_error_free(e) };
    assert_eq!(code2, "none_hash_unreproducible");
    assert!(
        msg2.contains("PYTHONHASHSEED") && msg2.contains("xxhash"),
        "{msg2}"
    );
    // An empty seed is a set seed.
    let h = hasher_for(
        c"vllm-kv-map-v2-r0.24",
        None,
        KVEXACT_SHA256_CBOR,
        16,
        Some(""),
    )
    .unwrap();
    free(h);

    // Unknown version, mismatch, unknown and ambiguous ids.
    let (st, code, msg) = hasher_for(
        c"vllm-kv-map-v3",
        Some(c"0.35.0"),
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
    )
    .unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION"),
        "{msg}"
    );
    for (id, ver) in [
        (c"vllm-kv-map-v2", c"0.31.0"),
        (c"vllm-kv-map-v2-r0.26", c"0.24.0"),
        (c"sglang-kv-map-v2", c"0.5.19"),
    ] {
        let (st, code, msg) =
            hasher_for(id, Some(ver), KVEXACT_HASH_ALGO_CONTRACT_DEFAULT, 16, None).unwrap_err();
        assert_eq!(
            (st, code.as_str()),
            (KVEXACT_ERR_CONTRACT_MISMATCH, "CONTRACT_MISMATCH"),
            "{id:?} {ver:?}: {msg}"
        );
    }
    for ver in [None, Some(c"0.24.0")] {
        let (st, code, _) =
            hasher_for(c"vllm-kv-nope-v9", ver, KVEXACT_SHA256_CBOR, 16, Some("0")).unwrap_err();
        assert_eq!((st, code.as_str()), (KVEXACT_ERR_NOT_FOUND, "UNKNOWN_NAME"));
    }
    let (st, code, msg) = hasher_for(
        c"vllm-kv-array-v1",
        None,
        KVEXACT_SHA256_CBOR,
        16,
        Some("0"),
    )
    .unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "CONFIG")
    );
    assert!(
        msg.contains("vllm-kv-array-v1-r0.17"),
        "names the releases: {msg}"
    );

    // Arguments: another engine's algorithm, unknown algo, block size 0, seeds for
    // non-vLLM releases, non-UTF-8 seed, NULLs.
    let (st, code, _) = hasher_for(
        c"vllm-kv-map-v3-r0.31",
        None,
        KVEXACT_SHA256_SGLANG,
        16,
        Some("0"),
    )
    .unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "CONFIG")
    );
    let (st, code, _) = hasher_for(
        c"sglang-kv-map-v2-r0.5.23",
        None,
        KVEXACT_SHA256_CBOR,
        16,
        None,
    )
    .unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "CONFIG")
    );
    let (st, code, _) = hasher_for(c"vllm-kv-map-v3-r0.31", None, 99, 16, Some("0")).unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument")
    );
    let (st, _, _) = hasher_for(
        c"vllm-kv-map-v3-r0.31",
        None,
        KVEXACT_SHA256_CBOR,
        0,
        Some("0"),
    )
    .unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    let (st, _, msg) = hasher_for(
        c"sglang-kv-map-v2-r0.5.23",
        None,
        KVEXACT_HASH_ALGO_CONTRACT_DEFAULT,
        16,
        Some("0"),
    )
    .unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT, "{msg}");
    let (st, _, msg) = hasher_for(
        c"llamacpp-nokv-v1-r0.3.0",
        None,
        KVEXACT_HASH_ALGO_CONTRACT_DEFAULT,
        16,
        None,
    )
    .unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT, "{msg}");
    let mut h: *mut kvexact_hasher = null_mut();
    unsafe {
        let bad = [0xffu8];
        assert_eq!(
            kvexact_hasher_new_for_contract(
                c"vllm-kv-map-v3-r0.31".as_ptr(),
                null(),
                KVEXACT_SHA256_CBOR,
                16,
                bad.as_ptr(),
                1,
                &mut h,
                null_mut()
            ),
            KVEXACT_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            kvexact_hasher_new_for_contract(
                null(),
                null(),
                KVEXACT_SHA256_CBOR,
                16,
                null(),
                0,
                &mut h,
                null_mut()
            ),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_hasher_new_for_contract(
                c"vllm-kv-map-v3-r0.31".as_ptr(),
                null(),
                KVEXACT_SHA256_CBOR,
                16,
                null(),
                1,
                &mut h,
                null_mut()
            ),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_hasher_new_for_contract(
                c"vllm-kv-map-v3-r0.31".as_ptr(),
                null(),
                KVEXACT_SHA256_CBOR,
                16,
                null(),
                0,
                null_mut(),
                null_mut()
            ),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        // The sentinel is only for the contract functions.
        assert_eq!(
            kvexact_hasher_new(
                KVEXACT_HASH_ALGO_CONTRACT_DEFAULT,
                16,
                null(),
                0,
                &mut h,
                std::ptr::null_mut()
            ),
            KVEXACT_ERR_INVALID_ARGUMENT
        );
    }
    assert!(h.is_null());
}

// ---------------------------------------------------------------------------------------------
// kvexact_event_decoder_new_for_contract

fn decoder_for(
    id: &CStr,
    version: Option<&CStr>,
    rehash: *const kvexact_hasher,
) -> Result<*mut kvexact_event_decoder, (i32, String, String)> {
    let mut d: *mut kvexact_event_decoder = null_mut();
    let mut err: *mut kvexact_error = null_mut();
    let st = unsafe {
        kvexact_event_decoder_new_for_contract(
            id.as_ptr(),
            version.map_or(null(), CStr::as_ptr),
            rehash,
            &mut d,
            &mut err,
        )
    };
    if st != KVEXACT_OK {
        assert!(d.is_null(), "out written on failure");
        let e = take_err(err);
        assert_eq!(e.0, st);
        return Err(e);
    }
    assert!(err.is_null() && !d.is_null());
    Ok(d)
}

/// (kind, hashes, tokens, block size, flags, parent, rank) of each event, or (status, code).
type Decoded = Vec<(u8, Vec<u64>, Vec<u32>, u32, u8, u8, u8, u64, i64)>;

fn decode(
    dec: *mut kvexact_event_decoder,
    payload: &[u8],
) -> Result<(Decoded, i64), (i32, String)> {
    let mut events: *const kvexact_event = null();
    let (mut n, mut rank) = (777usize, 777i64);
    let mut err: *mut kvexact_error = null_mut();
    let st = unsafe {
        kvexact_event_decode(
            dec,
            payload.as_ptr(),
            payload.len(),
            &mut events,
            &mut n,
            &mut rank,
            &mut err,
        )
    };
    if st != KVEXACT_OK {
        assert_eq!(
            (events, n, rank),
            (null(), 777, 777),
            "outputs written on failure"
        );
        let (s, code, _) = take_err(err);
        assert_eq!(s, st);
        return Err((st, code));
    }
    let evs = if n == 0 {
        &[][..]
    } else {
        unsafe { std::slice::from_raw_parts(events, n) }
    };
    let out = evs
        .iter()
        .map(|e| unsafe {
            (
                e.kind,
                if e.n_hashes == 0 {
                    vec![]
                } else {
                    std::slice::from_raw_parts(e.hashes, e.n_hashes).to_vec()
                },
                if e.n_tokens == 0 {
                    vec![]
                } else {
                    std::slice::from_raw_parts(e.token_ids, e.n_tokens).to_vec()
                },
                e.block_size,
                e.has_lora,
                e.has_extra_keys,
                e.has_parent,
                e.parent_hash,
                e.dp_rank,
            )
        })
        .collect();
    Ok((out, rank))
}

#[test]
fn decoder_by_contract_holds_the_release_schema() {
    let doc = vector("versions/vllm-0.20.0/kv_events.json");
    let family = {
        let mut d: *mut kvexact_event_decoder = null_mut();
        assert_eq!(
            unsafe {
                kvexact_event_decoder_new(
                    c"vllm-kv-array-v1".as_ptr(),
                    null(),
                    &mut d,
                    std::ptr::null_mut(),
                )
            },
            KVEXACT_OK
        );
        d
    };
    let r020_by_version = decoder_for(c"vllm-kv-array-v1", Some(c"0.20.0"), null()).unwrap();
    let r020_by_id = decoder_for(c"vllm-kv-array-v1-r0.20", None, null()).unwrap();
    let r017 = decoder_for(c"vllm-kv-array-v1", Some(c"0.17.0"), null()).unwrap();
    let (mut decoded, mut refused) = (0, 0);
    for case in doc["cases"].as_array().unwrap() {
        let Some(hex_payload) = case["payload_hex"].as_str() else {
            continue;
        };
        let name = case["name"].as_str().unwrap();
        let payload = hex::decode(hex_payload).unwrap();
        let want = decode(family, &payload).unwrap_or_else(|e| panic!("{name}: family {e:?}"));
        assert_eq!(
            decode(r020_by_version, &payload),
            Ok(want.clone()),
            "{name}"
        );
        assert_eq!(decode(r020_by_id, &payload), Ok(want.clone()), "{name}");
        decoded += 1;
        let stored = want.0.iter().any(|e| e.0 == KVEXACT_EVENT_STORED);
        match decode(r017, &payload) {
            Err((st, code)) => {
                assert_eq!(
                    (st, code.as_str()),
                    (KVEXACT_ERR_EVENT_SCHEMA, "schema_mismatch"),
                    "{name}"
                );
                refused += 1;
            }
            // Events without a BlockStored carry no field 0.20 added.
            Ok(got) => {
                assert!(
                    !stored,
                    "{name}: 0.17's decoder accepted a 0.20 BlockStored"
                );
                assert_eq!(got, want, "{name}");
            }
        }
    }
    assert!(
        decoded >= 10 && refused >= 5,
        "decoded {decoded}, refused {refused}"
    );
    unsafe {
        for d in [family, r020_by_version, r020_by_id, r017] {
            kvexact_event_decoder_free(d);
        }
    }
}

#[test]
fn decoder_by_contract_refusals_and_rehash() {
    // TensorRT-LLM: re-hash allowed; vLLM: not.
    let mut trt: *mut kvexact_hasher = null_mut();
    assert_eq!(
        unsafe {
            kvexact_hasher_new(
                KVEXACT_BLOCKHASH_TRTLLM,
                32,
                null(),
                0,
                &mut trt,
                std::ptr::null_mut(),
            )
        },
        KVEXACT_OK
    );
    let d = decoder_for(c"trtllm-kv-http-v2", Some(c"1.3.0rc29"), trt).unwrap();
    unsafe { kvexact_event_decoder_free(d) };
    let d = decoder_for(c"trtllm-kv-http-v1-r1.2.1", None, null()).unwrap();
    unsafe { kvexact_event_decoder_free(d) };
    let (st, _, _) = decoder_for(c"vllm-kv-map-v3-r0.31", None, trt).unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    let mut sg: *mut kvexact_hasher = null_mut();
    assert_eq!(
        unsafe {
            kvexact_hasher_new(
                KVEXACT_SHA256_SGLANG,
                16,
                null(),
                0,
                &mut sg,
                std::ptr::null_mut(),
            )
        },
        KVEXACT_OK
    );
    let (st, _, _) = decoder_for(c"trtllm-kv-http-v2-r1.3.0rc29", None, sg).unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    free(trt);
    free(sg);
    // Ids and versions as for the hasher.
    let (st, code, _) = decoder_for(c"vllm-kv-map-v3", Some(c"0.35.0"), null()).unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION")
    );
    let (st, code, _) = decoder_for(c"vllm-kv-map-v3", Some(c"0.24.0"), null()).unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_CONTRACT_MISMATCH, "CONTRACT_MISMATCH")
    );
    let (st, code, _) = decoder_for(c"nope", None, null()).unwrap_err();
    assert_eq!((st, code.as_str()), (KVEXACT_ERR_NOT_FOUND, "UNKNOWN_NAME"));
    let (st, code, _) = decoder_for(c"vllm-kv-map-v3", None, null()).unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "CONFIG")
    );
    let (st, _, _) = decoder_for(c"llamacpp-nokv-v1", Some(c"0.3.0"), null()).unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    let mut d: *mut kvexact_event_decoder = null_mut();
    unsafe {
        assert_eq!(
            kvexact_event_decoder_new_for_contract(null(), null(), null(), &mut d, null_mut()),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_event_decoder_new_for_contract(
                c"vllm-kv-map-v3-r0.31".as_ptr(),
                null(),
                null(),
                null_mut(),
                null_mut()
            ),
            KVEXACT_ERR_NULL_ARGUMENT
        );
    }
    assert!(d.is_null());
}
