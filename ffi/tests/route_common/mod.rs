//! Helpers shared by the route-keys and cache-key tests: the sample registry loaded once,
//! encoders and hashers with options, and the two ways of computing routing keys (one call,
//! or the separate calls) as comparable values.
#![allow(dead_code)]

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use kvexact::encoder::*;
use kvexact::enums::*;
use kvexact::error::*;
use kvexact::hasher::*;
use kvexact::refusal::*;
use kvexact::registry::*;
use kvexact::route::*;
use kvexact::status::*;

pub const QWEN3: &str = "qwen3-06b-default-v1";
pub const QWEN25: &str = "qwen25-7b-instruct-v1";
pub const NOW: i64 = 1_721_997_296_000;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A handle shared by tests on any thread (handles are immutable and thread-safe).
pub struct Shared<T>(pub *mut T);
// SAFETY: every libkvexact handle used here is documented as shareable between threads.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// (status, code, message) of an error object, which is freed.
pub fn take_err(err: *mut kvexact_error) -> (i32, String, String) {
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

pub fn registry() -> *const kvexact_registry {
    static R: OnceLock<Shared<kvexact_registry>> = OnceLock::new();
    R.get_or_init(|| {
        let root = repo().join("testdata/registry");
        let bytes = root.as_os_str().as_encoded_bytes();
        let mut reg = null_mut();
        let mut err = null_mut();
        let st = unsafe {
            kvexact_registry_load(bytes.as_ptr(), bytes.len(), null(), 7, &mut reg, &mut err)
        };
        assert_eq!(
            st,
            KVEXACT_OK,
            "{:?}",
            (st != KVEXACT_OK).then(|| take_err(err))
        );
        Shared(reg)
    })
    .0
}

pub fn profile(id: &str) -> *const kvexact_profile {
    let mut p = null();
    let st = unsafe { kvexact_profile_by_id(registry(), id.as_ptr(), id.len(), &mut p) };
    assert_eq!(st, KVEXACT_OK, "{id}");
    p
}

/// Encoder options: engine version, lift mask, segment-cache bytes (`None`: no cache).
pub struct EncOpts<'a> {
    pub version: Option<&'a str>,
    pub lifted: u32,
    pub cache: Option<u64>,
}

pub fn encoder_options(o: &EncOpts<'_>, version: &Option<CString>) -> kvexact_encoder_options {
    kvexact_encoder_options {
        struct_size: std::mem::size_of::<kvexact_encoder_options>() as u32,
        lifted: o.lifted,
        engine_version: version.as_ref().map_or(null(), |v| v.as_ptr()),
        segment_cache_bytes: o.cache.unwrap_or(0),
        flags: if o.cache.is_none() {
            KVEXACT_OPTION_NO_CACHE
        } else {
            0
        },
        reserved: 0,
        max_body_bytes: 0,
        max_rendered_bytes: 0,
        max_word_bytes: 0,
        max_fallback_bytes: 0,
        max_messages: 0,
        reserved2: 0,
    }
}

/// Builds an encoder, or returns the failure (status, code, message).
pub fn try_encoder(
    profile_id: &str,
    contract: &str,
    o: &EncOpts<'_>,
) -> Result<*mut kvexact_encoder, (i32, String, String)> {
    let contract = CString::new(contract).unwrap();
    let version = o.version.map(|v| CString::new(v).unwrap());
    let opts = encoder_options(o, &version);
    let mut enc = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_encoder_new_with_options(
            profile(profile_id),
            contract.as_ptr(),
            &opts,
            &mut enc,
            &mut err,
        )
    };
    if st == KVEXACT_OK {
        assert!(err.is_null());
        Ok(enc)
    } else {
        assert!(enc.is_null());
        Err(take_err(err))
    }
}

pub fn encoder(profile_id: &str, contract: &str, o: &EncOpts<'_>) -> *mut kvexact_encoder {
    try_encoder(profile_id, contract, o).unwrap_or_else(|e| panic!("{contract}: {e:?}"))
}

/// Hasher options: `None` no cache, `Some(0)` default, `Some(n)` n entries; or share another's.
pub fn hasher_options(
    entries: Option<u64>,
    share: *const kvexact_hasher,
) -> kvexact_hasher_options {
    kvexact_hasher_options {
        struct_size: std::mem::size_of::<kvexact_hasher_options>() as u32,
        flags: if entries.is_none() && share.is_null() {
            KVEXACT_OPTION_NO_CACHE
        } else {
            0
        },
        prefix_cache_entries: entries.unwrap_or(0),
        share_cache_with: share,
    }
}

pub fn hasher(
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: Option<&str>,
    opts: &kvexact_hasher_options,
) -> *mut kvexact_hasher {
    let (sp, sl) = seed.map_or((null(), 0), |s| (s.as_ptr(), s.len()));
    let mut h = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_hasher_new_with_options(algo, block_size, sp, sl, opts, &mut h, &mut err)
    };
    assert_eq!(
        st,
        KVEXACT_OK,
        "{:?}",
        (st != KVEXACT_OK).then(|| take_err(err))
    );
    h
}

pub fn hasher_for_contract(
    contract: &str,
    version: Option<&str>,
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: Option<&str>,
    opts: &kvexact_hasher_options,
) -> *mut kvexact_hasher {
    let contract = CString::new(contract).unwrap();
    let version = version.map(|v| CString::new(v).unwrap());
    let (sp, sl) = seed.map_or((null(), 0), |s| (s.as_ptr(), s.len()));
    let mut h = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact::hasher::kvexact_hasher_new_for_contract_with_options(
            contract.as_ptr(),
            version.as_ref().map_or(null(), |v| v.as_ptr()),
            algo,
            block_size,
            sp,
            sl,
            opts,
            &mut h,
            &mut err,
        )
    };
    assert_eq!(
        st,
        KVEXACT_OK,
        "{:?}",
        (st != KVEXACT_OK).then(|| take_err(err))
    );
    h
}

/// What routing one body gave: status, refusal, ids, hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    pub status: i32,
    pub refusal: kvexact_refusal,
    pub ids: Vec<u32>,
    pub hashes: Vec<u64>,
}

/// `kvexact_route_keys` in one call.
pub fn route(
    enc: *const kvexact_encoder,
    h: *const kvexact_hasher,
    body: &[u8],
    max_ids: usize,
    max_blocks: usize,
) -> Keys {
    let mut ids = vec![0xEEEE_EEEEu32; max_ids];
    let mut hashes = vec![0xEEEE_EEEE_EEEE_EEEEu64; max_blocks];
    let (mut ni, mut nb) = (usize::MAX, usize::MAX);
    let mut refusal = 999;
    let mut err = null_mut();
    let st = unsafe {
        kvexact_route_keys(
            enc,
            h,
            body.as_ptr(),
            body.len(),
            NOW,
            ids.as_mut_ptr(),
            max_ids,
            hashes.as_mut_ptr(),
            max_blocks,
            &mut ni,
            &mut nb,
            &mut refusal,
            &mut err,
        )
    };
    if st != KVEXACT_OK {
        let (es, _, _) = take_err(err);
        assert_eq!(es, st);
        assert_eq!(
            (ni, nb),
            (usize::MAX, usize::MAX),
            "counts written on failure"
        );
        return Keys {
            status: st,
            refusal,
            ids: Vec::new(),
            hashes: Vec::new(),
        };
    }
    assert!(err.is_null());
    assert!(ni <= max_ids && nb <= max_blocks);
    assert!(
        ids[ni..].iter().all(|&i| i == 0xEEEE_EEEE),
        "ids past n_ids"
    );
    assert!(hashes[nb..].iter().all(|&x| x == 0xEEEE_EEEE_EEEE_EEEE));
    ids.truncate(ni);
    hashes.truncate(nb);
    Keys {
        status: st,
        refusal,
        ids,
        hashes,
    }
}

/// The separate calls: `kvexact_encode_chat`, then `kvexact_block_hashes_u64` of the ids it
/// wrote (full blocks only).
pub fn separate(
    enc: *const kvexact_encoder,
    h: *const kvexact_hasher,
    body: &[u8],
    max_ids: usize,
    max_blocks: usize,
) -> Keys {
    let mut ids = vec![0u32; max_ids];
    let mut refusal = 999;
    let n = unsafe {
        kvexact_encode_chat(
            enc,
            body.as_ptr(),
            body.len(),
            NOW,
            ids.as_mut_ptr(),
            u32::try_from(max_ids).unwrap(),
            &mut refusal,
        )
    };
    if n < 0 {
        return Keys {
            status: n,
            refusal,
            ids: Vec::new(),
            hashes: Vec::new(),
        };
    }
    ids.truncate(n as usize);
    let mut hashes = vec![0u64; max_blocks];
    let nb = unsafe {
        kvexact::hasher::kvexact_block_hashes_u64(
            h,
            ids.as_ptr(),
            ids.len(),
            1,
            hashes.as_mut_ptr(),
            max_blocks,
        )
    };
    if nb < 0 {
        return Keys {
            status: nb,
            refusal,
            ids: Vec::new(),
            hashes: Vec::new(),
        };
    }
    hashes.truncate(nb as usize);
    Keys {
        status: KVEXACT_OK,
        refusal,
        ids,
        hashes,
    }
}

pub fn encoder_stats(enc: *const kvexact_encoder) -> kvexact_cache_stats {
    let mut s = kvexact_cache_stats {
        struct_size: std::mem::size_of::<kvexact_cache_stats>() as u32,
        ..Default::default()
    };
    assert_eq!(
        unsafe { kvexact_encoder_cache_stats(enc, &mut s) },
        KVEXACT_OK
    );
    s
}

pub fn hasher_stats(h: *const kvexact_hasher) -> kvexact_cache_stats {
    let mut s = kvexact_cache_stats {
        struct_size: std::mem::size_of::<kvexact_cache_stats>() as u32,
        ..Default::default()
    };
    assert_eq!(unsafe { kvexact_hasher_cache_stats(h, &mut s) }, KVEXACT_OK);
    s
}

/// A chat body from `(role, content)` pairs (JSON-escaped by serde_json), with `extra`
/// top-level members appended verbatim (e.g. `,"tools":[…]`).
pub fn chat_body(model: &str, messages: &[(&str, &str)], extra: &str) -> Vec<u8> {
    let msgs: Vec<String> = messages
        .iter()
        .map(|(r, c)| {
            format!(
                "{{\"role\":{},\"content\":{}}}",
                serde_json::to_string(r).unwrap(),
                serde_json::to_string(c).unwrap()
            )
        })
        .collect();
    format!(
        "{{\"model\":{},\"messages\":[{}]{extra}}}",
        serde_json::to_string(model).unwrap(),
        msgs.join(",")
    )
    .into_bytes()
}

/// A vector case as the engines were sent it (`kvexact_conformance::templates::request_body`) and the
/// ids `engine` produced for it.
pub fn vector_case(file: &str, id: &str, engine: &str) -> (Vec<u8>, Vec<u32>) {
    let path = repo().join("testdata/vectors").join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let doc = kvtemplate::json::parse(&bytes).unwrap_or(kvtemplate::json::Json::Null);
    let case = doc
        .as_object()
        .and_then(|o| o.get("cases"))
        .and_then(|c| c.as_array())
        .and_then(|cases| {
            cases.iter().find(|c| {
                c.as_object()
                    .and_then(|o| o.get("id"))
                    .and_then(|i| i.as_str())
                    == Some(id)
            })
        })
        .and_then(|c| c.as_object())
        .unwrap_or_else(|| panic!("{file}#{id}"));
    let body = kvexact_conformance::templates::request_body(case, "Qwen/Qwen3-0.6B");
    let want: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let ids = want["cases"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == id))
        .and_then(|c| c["engine_token_ids"][engine].as_array())
        .map(|a| a.iter().map(|v| v.as_u64().unwrap() as u32).collect())
        .unwrap_or_else(|| panic!("{file}#{id}: no engine_token_ids.{engine}"));
    (body.into_bytes(), ids)
}

/// The refusal name of a value.
pub fn refusal_name(r: kvexact_refusal) -> String {
    cstr(kvexact_refusal_name(r))
}
