//! The judges (docs/contracts/registry.md §5.3, §8.4): an engine's tokenize, oracle, identity, geometry
//! and served-model answers against the fixtures, the manifest or the rule, and the engine
//! routes those answers come from.

use std::ffi::c_char;

use kvprobe::fixtures;
use kvprobe::identity::{self, Geometry};

use crate::encoder::{kvexact_encoder, EncoderInner};
use crate::enums::{
    api_mode_of, engine_of, kvexact_api_mode, kvexact_engine, KVEXACT_SGLANG, KVEXACT_TRTLLM,
    KVEXACT_VLLM,
};
use crate::handle::{arc_ref, in_slice, in_str, out_param};
use crate::panic::boundary;
use crate::status::kvexact_status;

use super::finding::{kvexact_finding, write_finding};
use super::fixtures::{fixture_at, kvexact_fixtures};
use super::manifest::kvexact_manifest;
use super::status_u16;

/// The identity route of an engine: `"/version"` (vLLM), `"/get_server_info"` (SGLang),
/// `"/server_info"` (TensorRT-LLM); NULL for an unknown engine. Static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_identity_path(engine: kvexact_engine) -> *const c_char {
    match engine {
        KVEXACT_VLLM => c"/version".as_ptr(),
        KVEXACT_SGLANG => c"/get_server_info".as_ptr(),
        KVEXACT_TRTLLM => c"/server_info".as_ptr(),
        _ => std::ptr::null(),
    }
}

/// The tokenize route fixtures are POSTed to: `"/tokenize"` (vLLM), `"/v1/tokenize"` (SGLang);
/// NULL for TensorRT-LLM, which has none (use `kvexact_judge_oracle`) and for an unknown
/// engine. Static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_tokenize_path(engine: kvexact_engine) -> *const c_char {
    match engine {
        KVEXACT_VLLM => c"/tokenize".as_ptr(),
        KVEXACT_SGLANG => c"/v1/tokenize".as_ptr(),
        _ => std::ptr::null(),
    }
}

/// The served-model route: `"/get_model_info"` (SGLang), else `"/v1/models"`; NULL for an
/// unknown engine. Static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_served_model_path(engine: kvexact_engine) -> *const c_char {
    match engine {
        KVEXACT_SGLANG => c"/get_model_info".as_ptr(),
        KVEXACT_VLLM | KVEXACT_TRTLLM => c"/v1/models".as_ptr(),
        _ => std::ptr::null(),
    }
}

/// Judges an engine's tokenize response to fixture `i` (docs/contracts/registry.md §5.3): a 200 JSON body
/// with integer `count`, integer-array `tokens`, integer `max_model_len` and `count ==
/// len(tokens)` (else `probe_schema_mismatch`), whose tokens equal the expected ids exactly
/// (else `token_mismatch` naming the first differing index). A clock fixture's ids are
/// re-derived by `encoder` at `now_unix_ms` (the answer's time, Unix ms UTC), once more a minute
/// earlier when the UTC date rolled over in between. A chat fixture whose requests the
/// tokenize route renders another way under `encoder` (harmony on vLLM: probe it with
/// `kvexact_fixture_probe` / `kvexact_judge_probe`) fails `profile_resolution_fault`.
///
/// Writes the finding to `*out` and returns `KVEXACT_OK`; `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range, status outside 0..=65535) write nothing.
///
/// # Safety
/// `encoder` and `fixtures` are NULL or live; `body` is valid for `len` bytes; `out` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_judge_tokenize(
    encoder: *const kvexact_encoder,
    fixtures: *const kvexact_fixtures,
    i: usize,
    http_status: i32,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let enc: &EncoderInner = unsafe { arc_ref(encoder, "encoder") }?;
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let out = unsafe { out_param(out, "out") }?;
        let status = status_u16(http_status)?;
        let f = fixture_at(fx, i)?;
        let finding = match super::route::on_tokenize_route(enc, f) {
            Ok(()) => fixtures::judge_fixture(&enc.encoder, f, status, body, now_unix_ms),
            Err(finding) => finding,
        };
        write_finding(out, &finding)
    })
}

/// TensorRT-LLM's approved oracle (no tokenize route): re-derives every fixture of the surfaces
/// `api_mode` serves through `encoder` and compares with the banked ids; a fixture naming
/// another model than `model` or lacking prompt/messages is `probe_schema_mismatch`. A pass has
/// `oracle` = 1. `now_unix_ms` is used for clock fixtures without `oracleNow`.
///
/// Improvement on §6.5: the rule's `model` and `api_mode` are parameters, since the oracle
/// checks the fixtures against the rule and probes only the surfaces it serves.
///
/// Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `encoder` and `fixtures` are NULL or live; `model` is valid for `model_len` bytes; `out` is
/// NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_judge_oracle(
    encoder: *const kvexact_encoder,
    fixtures: *const kvexact_fixtures,
    model: *const u8,
    model_len: usize,
    api_mode: kvexact_api_mode,
    now_unix_ms: i64,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let enc: &EncoderInner = unsafe { arc_ref(encoder, "encoder") }?;
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let model = unsafe { in_str(model, model_len, "model") }?;
        let mode = api_mode_of(api_mode)?;
        let out = unsafe { out_param(out, "out") }?;
        write_finding(
            out,
            &fixtures::judge_oracle(&enc.encoder, &fx.set, mode, model, now_unix_ms),
        )
    })
}

/// Judges an identity response (the body of `kvexact_identity_path(engine)`) against the
/// manifest: vLLM/SGLang `version` must equal the pinned engine version (SGLang: and
/// `revision` the pinned model revision); TensorRT-LLM must describe its KV contract
/// (`kv_cache_hash_algo` `"v1_block_key"`, integer `tokens_per_block`). Failures are
/// `identity_mismatch`, or `probe_schema_mismatch` for a non-200 / non-JSON / oversized body.
///
/// Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `manifest` is NULL or live; `body` is valid for `len` bytes; `out` is NULL or valid for one
/// write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_judge_identity(
    engine: kvexact_engine,
    manifest: *const kvexact_manifest,
    http_status: i32,
    body: *const u8,
    len: usize,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let engine = engine_of(engine)?;
        let m = unsafe { arc_ref(manifest, "manifest") }?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let out = unsafe { out_param(out, "out") }?;
        let status = status_u16(http_status)?;
        write_finding(
            out,
            &identity::judge_identity(engine, &m.loaded.manifest, status, body),
        )
    })
}

/// Challenge preflight: the rule's KV geometry against the engine's server info — SGLang
/// `/get_server_info` (`page_size`, `kv_events.endpoint_port_base`, `kv_events.dp_size`),
/// TensorRT-LLM `/server_info` (`tokens_per_block`, hash mode); vLLM publishes none and always
/// passes. Failures are `engine_geometry_mismatch`.
///
/// Improvement on §6.5: `http_status` is passed too (a non-200 answer is
/// `probe_schema_mismatch`, not a geometry verdict).
///
/// Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `server_info` is valid for `len` bytes; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_judge_geometry(
    engine: kvexact_engine,
    http_status: i32,
    server_info: *const u8,
    len: usize,
    block_size: u32,
    zmq_port: u16,
    dp_ranks: u16,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let engine = engine_of(engine)?;
        let body = unsafe { in_slice(server_info, len, "server_info") }?;
        let out = unsafe { out_param(out, "out") }?;
        let status = status_u16(http_status)?;
        let rule = Geometry {
            block_size,
            zmq_port,
            dp_ranks,
        };
        write_finding(out, &identity::judge_geometry(engine, status, body, &rule))
    })
}

/// Served-model preflight (addition to §6.5): the body of `kvexact_served_model_path(engine)`
/// must list `model` (SGLang `/get_model_info` `served_model_name` or `model_path`, else
/// `/v1/models` `data[].id`); else `identity_mismatch` (`probe_schema_mismatch` for a body
/// that is not the route's JSON).
///
/// Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `body` is valid for `len` bytes; `model` for `model_len` bytes; `out` is NULL or valid for
/// one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_judge_served_model(
    engine: kvexact_engine,
    http_status: i32,
    body: *const u8,
    len: usize,
    model: *const u8,
    model_len: usize,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let engine = engine_of(engine)?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let model = unsafe { in_str(model, model_len, "model") }?;
        let out = unsafe { out_param(out, "out") }?;
        let status = status_u16(http_status)?;
        write_finding(
            out,
            &identity::judge_served_model(engine, status, body, model),
        )
    })
}
