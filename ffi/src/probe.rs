//! Probes and readiness judgements (spec/gateway-integration.md §6.5): engine manifests, probe
//! fixtures, the tokenize / oracle / identity / geometry / served-model judges and the hash
//! challenge. The gateway keeps HTTP and scheduling; every judgement here takes the status and
//! body bytes it received and answers with a [`kvexact_finding`]. The logic is kvprobe's.
//!
//! Improvement on §6.5 applied throughout: judges return a `kvexact_status` and write the
//! finding to an out-parameter, instead of returning the finding by value. A NULL handle or an
//! out-of-range index is the caller's bug and must not read as an engine disagreement (which
//! would demote a healthy replica), so it is a status, and only a judged engine answer is a
//! finding.

use std::ffi::{c_char, CString};
use std::sync::{Arc, OnceLock};

use kvprobe::challenge::{Bootstrap, Challenge, ChallengeSpec, Observed, RankCoverage};
use kvprobe::fixtures::{self, ApiMode};
use kvprobe::identity::{self, Geometry};
use kvprobe::{Engine, Finding, Reason};
use kvprofile_core::{Api, FixtureSet, LoadedManifest};

use crate::encoder::{kvexact_encoder, EncoderInner};
use crate::error::{c_string_lossless, kvexact_error, Failure};
use crate::events::{kvexact_event, KVEXACT_EVENT_STORED};
use crate::handle::{
    arc_free, arc_into_raw, arc_ref, box_free, box_into_raw, box_mut, box_ref, copy_out, in_c_str,
    in_slice, in_str, out_param, out_slice, ArcHandle, BoxHandle, Out,
};
use crate::hasher::kvexact_hasher;
use crate::panic::{boundary, boundary_err};
use crate::registry::{kvexact_profile, kvexact_registry, registry_failure};
use crate::status::{kvexact_status, KVEXACT_ERR_CHALLENGE, KVEXACT_ERR_NOT_FOUND, KVEXACT_OK};

/// An engine family, for the judges and `kvexact_contract_resolve`: `KVEXACT_VLLM`,
/// `KVEXACT_SGLANG`, `KVEXACT_TRTLLM`.
pub type kvexact_engine = u32;
/// vLLM.
pub const KVEXACT_VLLM: kvexact_engine = 0;
/// SGLang.
pub const KVEXACT_SGLANG: kvexact_engine = 1;
/// TensorRT-LLM.
pub const KVEXACT_TRTLLM: kvexact_engine = 2;

/// `api_mode` value: the rule serves chat and completions (the data-plane word's 0).
pub const KVEXACT_API_BOTH: u32 = 0;
/// `api_mode` value: completions only (1).
pub const KVEXACT_API_COMPLETIONS: u32 = 1;
/// `api_mode` value: chat only (2).
pub const KVEXACT_API_CHAT: u32 = 2;

/// Longest `kvexact_finding.detail`, without its NUL.
pub const KVEXACT_FINDING_DETAIL_MAX: usize = kvprobe::finding::MAX_DETAIL;

/// One probe/challenge outcome.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_finding {
    /// 1 when the judged thing passed, else 0.
    pub ok: i32,
    /// 1 when the pass was earned through TensorRT-LLM's approved oracle (the rung then reads
    /// `TOKEN_PARITY_NOT_AVAILABLE_WITH_APPROVED_ORACLE`), else 0.
    pub oracle: i32,
    /// The reason code when `ok` is 0 (`"token_mismatch"`, `"identity_mismatch"`, … — the
    /// §8.4 vocabulary), a static NUL-terminated string never to be freed; NULL when `ok` is 1.
    pub reason: *const c_char,
    /// What was seen, NUL-terminated UTF-8 (cut at a character boundary to fit).
    pub detail: [c_char; 256],
}

/// The static, NUL-terminated string form of a reason.
fn reason_c(r: Reason) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Reason::ALL
            .iter()
            .map(|r| c_string_lossless(r.as_str()))
            .collect()
    });
    Reason::ALL
        .iter()
        .position(|x| *x == r)
        .and_then(|i| names.get(i))
        .map_or(std::ptr::null(), |c| c.as_ptr())
}

/// The C form of a finding.
pub fn finding_to_c(f: &Finding) -> kvexact_finding {
    let mut detail = [0 as c_char; 256];
    let mut cut = f.detail.len().min(KVEXACT_FINDING_DETAIL_MAX);
    while !f.detail.is_char_boundary(cut) {
        cut -= 1;
    }
    for (d, s) in detail.iter_mut().zip(f.detail.as_bytes()[..cut].iter()) {
        // A NUL inside the detail would cut it short in C; show it as a space.
        *d = if *s == 0 {
            b' ' as c_char
        } else {
            *s as c_char
        };
    }
    kvexact_finding {
        ok: i32::from(f.ok),
        oracle: i32::from(f.oracle),
        reason: f.reason.map_or(std::ptr::null(), reason_c),
        detail,
    }
}

fn write_finding(out: Out<kvexact_finding>, f: &Finding) -> Result<kvexact_status, Failure> {
    out.write(finding_to_c(f));
    Ok(KVEXACT_OK)
}

pub(crate) fn engine_of(e: kvexact_engine) -> Result<Engine, Failure> {
    match e {
        KVEXACT_VLLM => Ok(Engine::Vllm),
        KVEXACT_SGLANG => Ok(Engine::Sglang),
        KVEXACT_TRTLLM => Ok(Engine::Trtllm),
        other => Err(Failure::invalid(
            "engine",
            format_args!("{other} is not KVEXACT_VLLM, KVEXACT_SGLANG or KVEXACT_TRTLLM"),
        )),
    }
}

/// The `ApiMode` of a C `api_mode` (0 both, 1 completions, 2 chat).
pub fn api_mode_of(mode: u32) -> Result<ApiMode, Failure> {
    match mode {
        KVEXACT_API_BOTH => Ok(ApiMode::Both),
        KVEXACT_API_COMPLETIONS => Ok(ApiMode::Completions),
        KVEXACT_API_CHAT => Ok(ApiMode::Chat),
        other => Err(Failure::invalid(
            "api_mode",
            format_args!("{other} is not 0 (both), 1 (completions) or 2 (chat)"),
        )),
    }
}

fn status_u16(status: i32) -> Result<u16, Failure> {
    u16::try_from(status).map_err(|_| {
        Failure::invalid(
            "http_status",
            format_args!("{status} is not an HTTP status"),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Engine paths

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

// ---------------------------------------------------------------------------------------------
// Manifests

/// A profile's engine manifest (`manifests/<profile-id>.yaml`, spec/registry.md §4), the trust
/// root of identity probes. Opaque, immutable and reference-counted; release with
/// `kvexact_manifest_free`.
pub struct kvexact_manifest {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_manifest`.
#[derive(Debug)]
pub struct ManifestInner {
    /// The manifest, its file digest and path.
    pub loaded: LoadedManifest,
    digest: CString,
    engine_version: CString,
}

impl ArcHandle for kvexact_manifest {
    type Inner = ManifestInner;
}

/// Reads the manifest of `profile_id` beneath the root `registry` was loaded from, under the
/// same trust policy (a fresh read: manifests are read on demand, not at publish).
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; `KVEXACT_ERR_NOT_FOUND` (code
/// `"MANIFEST_MISSING"`, path `manifests/<id>.yaml`) when the profile has no manifest;
/// `KVEXACT_ERR_REGISTRY` with the registry's code and path when it is untrusted, unparseable,
/// names another profile, or the profile is unknown; `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_manifest_free`) and `*err`.
///
/// # Safety
/// `registry` is NULL or live; `profile_id` is valid for `n` bytes; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_load(
    registry: *const kvexact_registry,
    profile_id: *const u8,
    n: usize,
    out: *mut *mut kvexact_manifest,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let g = arc_ref(registry, "registry")?;
            let id = in_str(profile_id, n, "profile_id")?;
            let out = out_param(out, "out")?;
            let loaded = g
                .load_manifest(id)
                .map_err(|e| registry_failure(&e))?
                .ok_or_else(|| {
                    Failure::with_code(
                        KVEXACT_ERR_NOT_FOUND,
                        "MANIFEST_MISSING",
                        format!("profile {id} has no engine manifest"),
                    )
                    .at_path(format!("manifests/{id}.yaml"))
                })?;
            let digest = c_string_lossless(&loaded.digest);
            let engine_version = c_string_lossless(&loaded.manifest.engine_version);
            out.write(arc_into_raw(Arc::new(ManifestInner {
                loaded,
                digest,
                engine_version,
            })));
            Ok(KVEXACT_OK)
        })
    }
}

/// The manifest file's sha256 (64 lowercase hex digits, NUL-terminated), for receipts; NULL
/// when `manifest` is NULL. Valid while the manifest lives; never free it.
///
/// # Safety
/// `manifest` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_digest(
    manifest: *const kvexact_manifest,
) -> *const c_char {
    boundary(|| Ok(unsafe { arc_ref(manifest, "manifest") }?.digest.as_ptr()))
}

/// The engine version the manifest pins (NUL-terminated); NULL when `manifest` is NULL. Valid
/// while the manifest lives; never free it.
///
/// # Safety
/// `manifest` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_engine_version(
    manifest: *const kvexact_manifest,
) -> *const c_char {
    boundary(|| {
        Ok(unsafe { arc_ref(manifest, "manifest") }?
            .engine_version
            .as_ptr())
    })
}

/// Releases a manifest reference. NULL is accepted and ignored.
///
/// # Safety
/// `manifest` is NULL or a live reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_free(manifest: *mut kvexact_manifest) {
    boundary(|| {
        unsafe { arc_free(manifest.cast_const()) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Fixtures

/// One engine's probe-fixture set for a profile (`probefixtures/<profile-id>/<engine>/`,
/// spec/registry.md §5). Opaque, immutable and reference-counted; release with
/// `kvexact_fixtures_free`.
pub struct kvexact_fixtures {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_fixtures`.
#[derive(Debug)]
pub struct FixturesInner {
    /// The loaded, checked set.
    pub set: FixtureSet,
    names: Vec<CString>,
}

impl ArcHandle for kvexact_fixtures {
    type Inner = FixturesInner;
}

/// What `kvexact_fixture_describe` tells about one fixture. Pointers stay valid while the fixture
/// set lives.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_fixture_info {
    /// The fixture's name (its file stem), NUL-terminated.
    pub name: *const c_char,
    /// The surface it probes: `KVEXACT_API_COMPLETIONS` (1) or `KVEXACT_API_CHAT` (2).
    pub api: u32,
    /// 1 for a clock fixture (`oracleNow`): its ids are re-derived at the answer's time.
    pub clock: u8,
}

/// Reads `engine`'s fixture set for `profile_id` beneath the root `registry` was loaded from,
/// under the same trust policy, and checks it against the profile (model names, clock
/// pairing).
///
/// Returns `KVEXACT_OK` and a new reference in `*out`, or `KVEXACT_ERR_REGISTRY` with the
/// registry's code and the offending file (the readiness reason is then
/// `probe_fixtures_missing`), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_fixtures_free`) and `*err`.
///
/// # Safety
/// `registry` is NULL or live; `profile_id` is valid for `n` bytes; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_load(
    registry: *const kvexact_registry,
    profile_id: *const u8,
    n: usize,
    engine: kvexact_engine,
    out: *mut *mut kvexact_fixtures,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let g = arc_ref(registry, "registry")?;
            let id = in_str(profile_id, n, "profile_id")?;
            let engine = engine_of(engine)?;
            let out = out_param(out, "out")?;
            let set = g
                .load_fixtures(id, engine)
                .map_err(|e| registry_failure(&e))?;
            let names = set
                .fixtures
                .iter()
                .map(|f| c_string_lossless(&f.name))
                .collect();
            out.write(arc_into_raw(Arc::new(FixturesInner { set, names })));
            Ok(KVEXACT_OK)
        })
    }
}

/// Set-level checks before any probe (spec/registry.md §5.2): a fixture for every surface the
/// rule serves (`api_mode` 0 both, 1 completions, 2 chat) and clock pairing against the profile.
/// Writes the finding (`probe_fixtures_missing` on failure) to `*out`.
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`
/// (nothing written).
///
/// # Safety
/// `fixtures` and `profile` are NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_check(
    fixtures: *const kvexact_fixtures,
    profile: *const kvexact_profile,
    api_mode: u32,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let p = unsafe { arc_ref(profile, "profile") }?;
        let mode = api_mode_of(api_mode)?;
        let out = unsafe { out_param(out, "out") }?;
        write_finding(
            out,
            &fixtures::check_fixtures(&fx.set, &p.profile.profile, mode),
        )
    })
}

/// Number of fixtures in the set (0 when `fixtures` is NULL).
///
/// # Safety
/// `fixtures` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_count(fixtures: *const kvexact_fixtures) -> usize {
    boundary(|| Ok(unsafe { arc_ref(fixtures, "fixtures") }?.set.fixtures.len()))
}

fn fixture_at(fx: &FixturesInner, i: usize) -> Result<&kvprofile_core::Fixture, Failure> {
    fx.set.fixtures.get(i).ok_or_else(|| {
        Failure::invalid(
            "i",
            format_args!("fixture {i} of {}", fx.set.fixtures.len()),
        )
    })
}

/// The request body of fixture `i`, to POST verbatim to the engine's tokenize route
/// (`kvexact_tokenize_path`). `*bytes` points into the set (valid while it lives; not
/// NUL-terminated); `*len` is its length.
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range) /
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `fixtures` is NULL or live; `bytes` and `len` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixture_request(
    fixtures: *const kvexact_fixtures,
    i: usize,
    bytes: *mut *const u8,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let bytes = unsafe { out_param(bytes, "bytes") }?;
        let len = unsafe { out_param(len, "len") }?;
        let f = fixture_at(fx, i)?;
        bytes.write(f.request_bytes.as_ptr());
        len.write(f.request_bytes.len());
        Ok(KVEXACT_OK)
    })
}

/// Name, surface and clock flag of fixture `i` (addition to §6.5: the gateway probes only the
/// fixtures of the surfaces a rule serves, §5.2.4, and needs the surface to filter).
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range) /
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `fixtures` is NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixture_describe(
    fixtures: *const kvexact_fixtures,
    i: usize,
    out: *mut kvexact_fixture_info,
) -> kvexact_status {
    boundary(|| {
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let out = unsafe { out_param(out, "out") }?;
        let f = fixture_at(fx, i)?;
        let name = fx.names.get(i).map_or(std::ptr::null(), |c| c.as_ptr());
        out.write(kvexact_fixture_info {
            name,
            api: match f.expect.api {
                Api::Completions => KVEXACT_API_COMPLETIONS,
                Api::Chat => KVEXACT_API_CHAT,
            },
            clock: u8::from(f.expect.oracle_now.is_some()),
        });
        Ok(KVEXACT_OK)
    })
}

/// Releases a fixture-set reference. NULL is accepted and ignored.
///
/// # Safety
/// `fixtures` is NULL or a live reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_free(fixtures: *mut kvexact_fixtures) {
    boundary(|| {
        unsafe { arc_free(fixtures.cast_const()) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Judges

/// Judges an engine's tokenize response to fixture `i` (spec/registry.md §5.3): a 200 JSON body
/// with integer `count`, integer-array `tokens`, integer `max_model_len` and `count ==
/// len(tokens)` (else `probe_schema_mismatch`), whose tokens equal the expected ids exactly
/// (else `token_mismatch` naming the first differing index). A clock fixture's ids are
/// re-derived by `encoder` at `now_unix_ms` (the answer's time, Unix ms UTC), once more a minute
/// earlier when the UTC date rolled over in between.
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
        write_finding(
            out,
            &fixtures::judge_fixture(&enc.encoder, f, status, body, now_unix_ms),
        )
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
    api_mode: u32,
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

// ---------------------------------------------------------------------------------------------
// The hash challenge

/// One armed hash challenge (spec/registry.md §8.5): the nonce prompt, its expected tokens and
/// block hashes, and the judging of the KV events the engine publishes for it. Opaque; owned
/// by one caller at a time (not for concurrent use). Free with `kvexact_challenge_free`.
pub struct kvexact_challenge {
    _private: [u8; 0],
}

impl BoxHandle for kvexact_challenge {
    type Inner = Challenge;
}

/// What a challenge needs from the rule besides the encoder and hasher.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_challenge_opts {
    /// The served model name put in the request body (UTF-8, `model_len` bytes).
    pub model: *const u8,
    /// Length of `model`.
    pub model_len: usize,
    /// Declared DP ranks (SGLang `kvDpRankCount`; 0 or 1 for one rank). An echo from a rank at
    /// or above this fails the challenge.
    pub dp_ranks: u32,
}

/// Arms a challenge: grows the nonce prompt through `encoder`'s completions encoding (the
/// engine's, with its contract quirks `cacheChunk` and `challengeLastBlock`) until it is long
/// enough, and computes the expected tokens and block hashes with `hasher` (the rule's).
///
/// `nonce` is 16 bytes, or NULL to draw them from the OS (`/dev/urandom`).
///
/// Improvement on §6.5: `opts` carries the served model name and declared DP ranks, which the
/// request body and the judging need and the encoder does not know.
///
/// Returns `KVEXACT_OK` and the challenge in `*out`; `KVEXACT_ERR_CHALLENGE` with code
/// `"challenge_failed"` (the readiness reason) when it cannot be built (prompt never long
/// enough, fewer than 2 expected blocks, `cacheChunk` not a multiple of the block size, nonce
/// unavailable); `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_challenge_free`) and `*err`; the
/// challenge keeps no reference to `encoder` or `hasher`.
///
/// # Safety
/// `encoder`, `hasher` are NULL or live; `nonce` is NULL or valid for 16 bytes; `opts` is NULL
/// or valid (and its `model` valid for `model_len` bytes); `out` and `err` are NULL or valid for
/// one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_new(
    encoder: *const kvexact_encoder,
    hasher: *const kvexact_hasher,
    nonce: *const u8,
    opts: *const kvexact_challenge_opts,
    out: *mut *mut kvexact_challenge,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let enc: &EncoderInner = arc_ref(encoder, "encoder")?;
            let h = arc_ref(hasher, "hasher")?;
            let opts = opts.as_ref().ok_or_else(|| Failure::null("opts"))?;
            let model = in_str(opts.model, opts.model_len, "opts.model")?;
            let out = out_param(out, "out")?;
            let challenge_failure = |f: Finding| {
                Failure::with_code(
                    KVEXACT_ERR_CHALLENGE,
                    Reason::ChallengeFailed.as_str(),
                    f.detail,
                )
            };
            let nonce: [u8; 16] = if nonce.is_null() {
                kvprobe::challenge::os_nonce().map_err(challenge_failure)?
            } else {
                let n = in_slice(nonce, 16, "nonce")?;
                n.try_into()
                    .map_err(|_| Failure::invalid("nonce", "not 16 bytes"))?
            };
            let quirks = enc.profile.profile.profile.quirks(&enc.contract_id);
            let spec = ChallengeSpec {
                model: model.to_string(),
                cache_chunk: quirks.cache_chunk,
                last_block_only: quirks.challenge_last_block,
                dp_ranks: opts.dp_ranks,
                lora: None,
            };
            let c = Challenge::new(&enc.encoder, h.block_hasher(), &spec, nonce)
                .map_err(challenge_failure)?;
            out.write(box_into_raw::<kvexact_challenge>(c));
            Ok(KVEXACT_OK)
        })
    }
}

/// The `/v1/completions` body to POST for the challenge:
/// `{"model":…,"prompt":…,"max_tokens":1,"temperature":0}`; with `bootstrap_host` non-NULL
/// (SGLang P/D rules) also `"bootstrap_host":…,"bootstrap_port":…,"bootstrap_room":…`.
/// `bootstrap_room` must be non-negative (a random 63-bit value).
///
/// Writes the needed length to `*len`; when `cap` is smaller returns
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else (`buf` may be NULL with `cap` 0 to ask
/// for the size); else copies the body (no NUL) and returns `KVEXACT_OK`.
///
/// # Safety
/// `challenge` is NULL or live; `bootstrap_host` is NULL or NUL-terminated; `buf` is NULL or
/// valid for `cap` bytes; `len` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_request_body(
    challenge: *const kvexact_challenge,
    bootstrap_host: *const c_char,
    bootstrap_port: u16,
    bootstrap_room: i64,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let c = unsafe { box_ref(challenge, "challenge") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let bootstrap = if bootstrap_host.is_null() {
            None
        } else {
            let host = unsafe { in_c_str(bootstrap_host, "bootstrap_host") }?;
            if bootstrap_room < 0 {
                return Err(Failure::invalid("bootstrap_room", "negative"));
            }
            Some(Bootstrap {
                host: host.to_string(),
                port: bootstrap_port,
                room: bootstrap_room,
            })
        };
        copy_out(
            &c.request_body_with(bootstrap.as_ref()),
            buf,
            len,
            "request body",
        )
    })
}

/// The challenge's expected block hashes and tokens (for logs and receipts). The pointers point
/// into the challenge (valid while it lives).
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `challenge` is NULL or live; the four out-parameters are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_expected(
    challenge: *const kvexact_challenge,
    hashes: *mut *const u64,
    n_hashes: *mut usize,
    tokens: *mut *const u32,
    n_tokens: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let c = unsafe { box_ref(challenge, "challenge") }?;
        let hashes = unsafe { out_param(hashes, "hashes") }?;
        let n_hashes = unsafe { out_param(n_hashes, "n_hashes") }?;
        let tokens = unsafe { out_param(tokens, "tokens") }?;
        let n_tokens = unsafe { out_param(n_tokens, "n_tokens") }?;
        hashes.write(c.expected_hashes().as_ptr());
        n_hashes.write(c.expected_hashes().len());
        tokens.write(c.expected_tokens().as_ptr());
        n_tokens.write(c.expected_tokens().len());
        Ok(KVEXACT_OK)
    })
}

/// The observation a decoded event gives the challenge (stored events only).
///
/// # Safety
/// `ev`'s pointers are valid for their counts (as `kvexact_event_decode` returns them).
unsafe fn observed(ev: &kvexact_event) -> Result<Option<Observed>, Failure> {
    if ev.kind != KVEXACT_EVENT_STORED {
        return Ok(None);
    }
    let hashes = unsafe { in_slice(ev.hashes, ev.n_hashes, "ev.hashes") }?;
    let tokens = unsafe { in_slice(ev.token_ids, ev.n_tokens, "ev.token_ids") }?;
    Ok(Some(Observed {
        hashes: hashes.to_vec(),
        token_ids: (!tokens.is_empty()).then(|| tokens.iter().map(|&t| u64::from(t)).collect()),
        block_size: (ev.block_size != 0).then_some(ev.block_size),
        has_lora: ev.has_lora != 0,
        lora_name: None,
        has_extra_keys: ev.has_extra_keys != 0,
        rehash_mismatch: ev.rehash_mismatch != 0,
    }))
}

/// Feeds one decoded event from the challenged endpoint's stream (as `kvexact_event_decode`
/// returned it; only stored events count). `dp_rank` is the batch's DP rank, or -1 when the
/// stream carries none. Returns 1 once the challenge is decided (passed or failed), 0 while it
/// still waits, or a negative status (`KVEXACT_ERR_NULL_ARGUMENT`,
/// `KVEXACT_ERR_INVALID_ARGUMENT`) when the arguments are unusable.
///
/// # Safety
/// `challenge` is NULL or live and not used concurrently; `ev` is NULL or a valid event whose
/// pointers are valid for their counts.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_observe(
    challenge: *mut kvexact_challenge,
    dp_rank: i64,
    ev: *const kvexact_event,
) -> i32 {
    boundary(|| {
        let c = unsafe { box_mut(challenge, "challenge") }?;
        let ev = unsafe { ev.as_ref() }.ok_or_else(|| Failure::null("ev"))?;
        let rank =
            match dp_rank {
                -1 => None,
                r => Some(u32::try_from(r).map_err(|_| {
                    Failure::invalid("dp_rank", format_args!("{r} (use -1 for none)"))
                })?),
            };
        let finished = match unsafe { observed(ev) }? {
            Some(o) => c.observe(rank, &o),
            None => c.finished(),
        };
        Ok(i32::from(finished))
    })
}

/// The challenge's outcome: a pass once every expected hash (or, quirk `challengeLastBlock`,
/// the last one) was echoed with matching tokens; `challenge_failed` for a wrong echo (LoRA or
/// extra keys, different tokens, an undeclared rank, a TensorRT-LLM hash its tokens do not
/// give); `challenge_timeout` when undecided (`timed_out` non-zero says the caller's wait —
/// 15 s by default — ended).
///
/// Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `challenge` is NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_result(
    challenge: *const kvexact_challenge,
    timed_out: i32,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let c = unsafe { box_ref(challenge, "challenge") }?;
        let out = unsafe { out_param(out, "out") }?;
        write_finding(out, &c.result(timed_out != 0))
    })
}

/// Frees a challenge. NULL is accepted and ignored.
///
/// # Safety
/// `challenge` is NULL or live and not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_free(challenge: *mut kvexact_challenge) {
    boundary(|| {
        unsafe { box_free(challenge) };
        Ok(())
    })
}

/// SGLang rank coverage (spec/registry.md §8.5.6): with several DP ranks declared, challenges
/// are repeated with fresh nonces until every declared rank echoed one, within 4 attempts per
/// rank. Opaque; owned by one caller at a time. Free with `kvexact_rank_coverage_free`.
pub struct kvexact_rank_coverage {
    _private: [u8; 0],
}

impl BoxHandle for kvexact_rank_coverage {
    type Inner = RankCoverage;
}

/// Starts rank coverage for `declared` DP ranks (0 counts as 1). Returns `KVEXACT_OK` and the
/// tracker in `*out` (free with `kvexact_rank_coverage_free`), or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_new(
    declared: u32,
    out: *mut *mut kvexact_rank_coverage,
) -> kvexact_status {
    boundary(|| {
        let out = unsafe { out_param(out, "out") }?;
        out.write(box_into_raw::<kvexact_rank_coverage>(RankCoverage::new(
            declared,
        )));
        Ok(KVEXACT_OK)
    })
}

/// Records a challenge that passed (`kvexact_challenge_result` ok) by the ranks that echoed it
/// (a stream without ranks counts as rank 0), then says what to do next: 1 = run another
/// challenge with a fresh nonce, 0 = decided (read `kvexact_rank_coverage_result`), or a
/// negative status (`KVEXACT_ERR_NULL_ARGUMENT`; `KVEXACT_ERR_INVALID_ARGUMENT` when the
/// challenge has not passed — a failed challenge fails the rung by itself).
///
/// # Safety
/// `coverage` is NULL or live and not used concurrently; `challenge` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_record(
    coverage: *mut kvexact_rank_coverage,
    challenge: *const kvexact_challenge,
) -> i32 {
    boundary(|| {
        let cov = unsafe { box_mut(coverage, "coverage") }?;
        let c = unsafe { box_ref(challenge, "challenge") }?;
        if !c.result(false).ok {
            return Err(Failure::invalid(
                "challenge",
                "only a passed challenge counts towards rank coverage",
            ));
        }
        cov.record_challenge(c);
        Ok(i32::from(cov.may_retry()))
    })
}

/// The coverage verdict: a pass once every declared rank echoed, else `challenge_failed`
/// naming the ranks that never did. Returns `KVEXACT_OK` with `*out` written, or
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `coverage` is NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_result(
    coverage: *const kvexact_rank_coverage,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let cov = unsafe { box_ref(coverage, "coverage") }?;
        let out = unsafe { out_param(out, "out") }?;
        write_finding(out, &cov.result())
    })
}

/// Frees a rank-coverage tracker. NULL is accepted and ignored.
///
/// # Safety
/// `coverage` is NULL or live and not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_free(coverage: *mut kvexact_rank_coverage) {
    boundary(|| {
        unsafe { box_free(coverage) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// The readiness ladder

/// One pass of the readiness ladder (spec/registry.md §8.3) over the evidence the gateway
/// gathered, as JSON in and JSON out (addition to §6.5: the ladder's inputs are a tree of
/// optional findings per endpoint, which JSON carries to Go without a dozen C structs).
///
/// `evidence_json` is kvprobe's `Evidence` in camelCase JSON; every key is optional (defaults:
/// profile bound, fence and eligible acknowledged, adapter available, manifest missing,
/// nothing probed), an unknown key is refused. Findings are
/// `{"ok":…,"oracle":…,"reason":"token_mismatch"|null,"detail":"…"}`, observations
/// `{"finding":{…},"timeUnixMs":…}`, the manifest `{"kind":"present","digest":"…"}` or
/// `{"kind":"missing","detail":"…"}`. The verdict written to `buf` is
/// `{"enforcedState":"READY",…,"reasonCodes":[…],"detail":"…","receipts":[…]}`.
///
/// Writes the verdict's length to `*len`; when `cap` is smaller returns
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else; else copies it (no NUL) and returns
/// `KVEXACT_OK`. Evidence that is not valid JSON of that shape is
/// `KVEXACT_ERR_INVALID_ARGUMENT` with an error object naming the problem.
///
/// # Safety
/// `evidence_json` is valid for `evidence_len` bytes; `buf` is NULL or valid for `cap` bytes;
/// `len` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_readiness_evaluate(
    evidence_json: *const u8,
    evidence_len: usize,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let json = in_slice(evidence_json, evidence_len, "evidence_json")?;
            let len = out_param(len, "len")?;
            let buf = out_slice(buf, cap, "buf")?;
            let ev: kvprobe::Evidence =
                serde_json::from_slice(json).map_err(|e| Failure::invalid("evidence_json", e))?;
            let verdict = serde_json::to_vec(&kvprobe::evaluate(&ev))
                .map_err(|e| Failure::new(crate::status::KVEXACT_ERR_UNKNOWN, e.to_string()))?;
            copy_out(&verdict, buf, len, "verdict")
        })
    }
}
