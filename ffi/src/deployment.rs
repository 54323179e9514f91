//! Deployments (docs/contracts/gateway-integration.md §9): how an engine was launched, as far
//! as it changes the keys or the hits — block size, hash algorithm and seed, speculative
//! decoding, the LoRA adapters it serves, SGLang's event format. One `kvexact_deployment`
//! builds the hasher (`kvexact_hasher_new_for_deployment`) and the prefix index
//! (`kvexact_index_new_for_deployment`) of that deployment, so the two never disagree; a
//! deployment hasher keys each request's `cache_salt` and adapter on the gateway's path
//! (`kvexact_route_keys`, `kvexact_index_route_predict`) and in
//! `kvexact_block_hashes_keyed`.

use std::ffi::c_char;
use std::sync::Arc;

use kvprobe::deployment::{DeploymentKeys, RequestKeys, RequestKeysError};
use kvprofile_core::deployment::Deployment;
use kvprofile_core::RegistryError;

use crate::contract::contract_failure;
use crate::enums::{engine_of, kvexact_engine};
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{
    arc_clone, arc_free, arc_into_raw, arc_ref, copy_out, in_c_str, in_slice, in_str, out_param,
    out_slice, versioned_in, ArcHandle,
};
use crate::hasher::{hasher_options, kvexact_hasher, kvexact_hasher_options, Hasher};
use crate::panic::boundary;
use crate::probe::manifest::kvexact_manifest;
use crate::refusal::{kvexact_refusal, KVEXACT_REFUSAL_CACHE_SALT};
use crate::status::{
    kvexact_status, KVEXACT_ERR_DEPLOYMENT_MISMATCH, KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED,
    KVEXACT_ERR_EVENT_DECODE, KVEXACT_ERR_INVALID_ARGUMENT, KVEXACT_ERR_REQUEST,
    KVEXACT_ERR_UNSUPPORTED, KVEXACT_OK,
};

/// A deployment resolved against one engine release. Opaque, immutable and
/// reference-counted: share one pointer between any number of threads; free each reference
/// once with `kvexact_deployment_free`.
pub struct kvexact_deployment {
    _private: [u8; 0],
}

impl ArcHandle for kvexact_deployment {
    type Inner = DeploymentKeys;
}

/// A kvprofile-core deployment error as a failure: `KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED` for an
/// option the release cannot honour, `KVEXACT_ERR_INVALID_ARGUMENT` for a document that does
/// not parse or breaks a field rule (codes `DEPLOYMENT_SCHEMA`, `DEPLOYMENT_INVALID`), the
/// contract statuses otherwise.
fn deployment_failure(e: &kvprobe::Error) -> Failure {
    match e {
        kvprobe::Error::Contract(RegistryError::DeploymentUnsupported { .. }) => {
            Failure::with_code(KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED, e.code(), e.to_string())
        }
        kvprobe::Error::Contract(
            r @ (RegistryError::Schema { .. }
            | RegistryError::Invalid { .. }
            | RegistryError::TooLarge { .. }),
        ) => Failure::with_code(KVEXACT_ERR_INVALID_ARGUMENT, r.code(), r.to_string()),
        other => contract_failure(other),
    }
}

/// Why a request's keys cannot be computed, as a failure: the engine rejects the salt
/// (`KVEXACT_ERR_REQUEST`, code `"SALT_REJECTED"`), or kvexact cannot key it or the adapter
/// (`KVEXACT_ERR_UNSUPPORTED`, codes `"SALT_UNKNOWN"`, `"UNKNOWN_ADAPTER"`, `"EXTRA_KEY"`:
/// an SGLang body with a radix `extra_key` of its own).
pub(crate) fn request_keys_failure(e: &RequestKeysError) -> Failure {
    let status = match e {
        RequestKeysError::SaltRejected(_) => KVEXACT_ERR_REQUEST,
        RequestKeysError::Hasher(_) => KVEXACT_ERR_INVALID_ARGUMENT,
        _ => KVEXACT_ERR_UNSUPPORTED,
    };
    let code = match e {
        RequestKeysError::SaltRejected(_) => "SALT_REJECTED",
        RequestKeysError::SaltUnknown(_) => "SALT_UNKNOWN",
        RequestKeysError::UnknownAdapter(_) => "UNKNOWN_ADAPTER",
        RequestKeysError::Hasher(_) => "HASHER",
        RequestKeysError::ExtraKey(_) => "EXTRA_KEY",
    };
    Failure::with_code(status, code, e.to_string())
}

/// Resolves a deployment document against the release of `engine` at `engine_version`
/// (NUL-terminated, as the engine reports it). `doc` / `doc_len`: the deployment as JSON or
/// YAML (the engine manifest's `deployment` object, docs/contracts/gateway-integration.md §9):
/// `blockSize`, `hashAlgorithm`, `hashSeed`, `speculative` (`method`,
/// `numSpeculativeTokens`, `mtpModules`, `disableEagleBlockDrop`,
/// `disableLookaheadBlockHashes`), `loraAdapters` (`name`, `path`), `kvEventsFormat`; an
/// empty document (`{}`) is the release's defaults.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; otherwise, with an error object:
/// `KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED` (code `"DEPLOYMENT_UNSUPPORTED"`, the message naming
/// the option and why: e.g. a speculative method no vectors prove for the release, no block
/// size where the release states no default), `KVEXACT_ERR_INVALID_ARGUMENT` (an unknown field
/// or a wrong type: code `"DEPLOYMENT_SCHEMA"`; a value out of range or an adapter declared
/// twice: `"DEPLOYMENT_INVALID"`; `engine` not a KV engine; a hasher the release cannot build,
/// e.g. an unset seed under NONE_HASH rule A), `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
/// `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE`, `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not written
/// on failure.
///
/// Ownership: the caller owns `*out` (free with `kvexact_deployment_free`) and `*err`; the
/// arguments are only read during the call.
///
/// # Safety
/// `engine_version` is NULL or NUL-terminated; `doc` is valid for `doc_len` bytes; `out` and
/// `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_deployment_new(
    engine: kvexact_engine,
    engine_version: *const c_char,
    doc: *const u8,
    doc_len: usize,
    out: *mut *mut kvexact_deployment,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let engine = engine_of(engine)?;
            let version = in_c_str(engine_version, "engine_version")?;
            let doc = in_slice(doc, doc_len, "doc")?;
            let contract =
                kvprobe::contract::resolve(engine, version).map_err(|e| contract_failure(&e))?;
            let d = Deployment::parse(doc, "<deployment>")
                .map_err(|e| deployment_failure(&kvprobe::Error::Contract(e)))?;
            let keys = DeploymentKeys::new(contract, &d, "<deployment>")
                .map_err(|e| deployment_failure(&e))?;
            out.write(arc_into_raw(Arc::new(keys)));
            Ok(KVEXACT_OK)
        })
    }
}

/// The deployment an engine manifest declares (`deployment:`; absent: the release's
/// defaults), resolved against the release of `engine` at the manifest's `engineVersion`.
/// Statuses as `kvexact_deployment_new`; the error's path is the manifest's.
///
/// # Safety
/// `manifest` is NULL or live; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_deployment_from_manifest(
    manifest: *const kvexact_manifest,
    engine: kvexact_engine,
    out: *mut *mut kvexact_deployment,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let m = arc_ref(manifest, "manifest")?;
            let out = out_param(out, "out")?;
            let engine = engine_of(engine)?;
            let mf = &m.loaded.manifest;
            let contract = kvprobe::contract::resolve(engine, &mf.engine_version)
                .map_err(|e| contract_failure(&e))?;
            let d = mf.deployment.clone().unwrap_or_default();
            let keys = DeploymentKeys::new(contract, &d, &m.loaded.path)
                .map_err(|e| deployment_failure(&e))?;
            out.write(arc_into_raw(Arc::new(keys)));
            Ok(KVEXACT_OK)
        })
    }
}

/// Takes another reference to `deployment` and returns it (NULL when `deployment` is NULL).
///
/// Ownership: the caller owns the returned reference and frees it with
/// `kvexact_deployment_free`.
///
/// # Safety
/// `deployment` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_deployment_retain(
    deployment: *const kvexact_deployment,
) -> *const kvexact_deployment {
    boundary(|| {
        Ok(
            arc_into_raw::<kvexact_deployment>(unsafe { arc_clone(deployment, "deployment") }?)
                .cast_const(),
        )
    })
}

/// Releases one reference to a deployment. NULL is accepted and ignored.
///
/// # Safety
/// `deployment` is NULL or a reference from `kvexact_deployment_new*` or
/// `kvexact_deployment_retain` not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_deployment_free(deployment: *const kvexact_deployment) {
    boundary(|| {
        unsafe { arc_free(deployment) };
        Ok(())
    })
}

/// The resolved deployment as JSON (UTF-8, not NUL-terminated): `{"release", "engine",
/// "blockSize", "hashAlgorithm", "hashSeed", "keyForm" ("plain", "lookahead-L", "bigram"),
/// "hitOffset", "keyFormVectors", "adapters": [{"name", "path"}], "adaptersInKeys",
/// "cacheSalt"}` — what the hasher and the index are built from, for logs and operators.
/// Size query and statuses as `kvexact_contracts_json`.
///
/// # Safety
/// `deployment` is NULL or live; `buf` is NULL or valid for `cap` writes; `len` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_deployment_json(
    deployment: *const kvexact_deployment,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let d = unsafe { arc_ref(deployment, "deployment") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let text = kvprobe::deployment::keying_json(d.keying()).to_string();
        copy_out(text.as_bytes(), buf, len, "deployment")
    })
}

/// A hasher of the deployment: its release's rules, block size, algorithm, seed and key form
/// (vLLM look-ahead, SGLang bigram pages). It hashes plain requests (no salt, the base model)
/// through every hash call; `kvexact_block_hashes_keyed` hashes a request with a salt or an
/// adapter; and `kvexact_route_keys` / `kvexact_index_route_predict` given this hasher key
/// each request's `cache_salt` and adapter from its body (an encoder must lift `cache_salt`,
/// `kvexact_encoder_options.lifted`, for salted requests to reach the hasher). `options`:
/// NULL or a `kvexact_hasher_options` (the prefix-chain cache), as
/// `kvexact_hasher_new_with_options`.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; `KVEXACT_ERR_INVALID_ARGUMENT` (bad
/// options), `KVEXACT_ERR_NULL_ARGUMENT`, with an error object. `*out` is not written on
/// failure.
///
/// # Safety
/// `deployment` is NULL or live; `options` is NULL or valid for its `struct_size` bytes;
/// `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_new_for_deployment(
    deployment: *const kvexact_deployment,
    options: *const kvexact_hasher_options,
    out: *mut *mut kvexact_hasher,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let d = arc_clone(deployment, "deployment")?;
            let out = out_param(out, "out")?;
            let cache = hasher_options(options)?;
            let h = Hasher::for_deployment(d).with_cache(cache);
            out.write(arc_into_raw(Arc::new(h)));
            Ok(KVEXACT_OK)
        })
    }
}

/// A request's keys beyond its token ids, for `kvexact_block_hashes_keyed`. Zero-initialise it
/// and set `struct_size` to `sizeof(kvexact_request_keys)`; the struct only ever grows at its
/// end.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_request_keys {
    /// `sizeof(kvexact_request_keys)` as the caller compiled it.
    pub struct_size: u32,
    /// 1: the request has a `cache_salt` (`cache_salt` / `cache_salt_len`, UTF-8, may be
    /// empty); 0: none.
    pub has_cache_salt: u32,
    /// The salt's bytes (borrowed for the call).
    pub cache_salt: *const u8,
    /// Length of `cache_salt` in bytes.
    pub cache_salt_len: usize,
    /// The adapter the request names (its name as the deployment declares it, UTF-8,
    /// borrowed for the call); NULL for the base model.
    pub adapter: *const u8,
    /// Length of `adapter` in bytes.
    pub adapter_len: usize,
}

/// Hashes `ids` (`n` token ids) as the deployment of `hasher` keys a request with `keys`
/// (NULL: a plain request): the salt as the release keys it (after the engine's own checks of
/// the value: vLLM refuses an empty salt, one over 128 characters or with `@`, `/`, `\` or
/// NUL), the adapter as the release keys it (vLLM's LoRA extra key; SGLang 0.5.23's default
/// event format and the `dynamo` format of 0.5.22/0.5.23: the page hashes published under
/// the namespace of the adapter's id, `uuid5(name, path)`, and the salt where the format
/// takes it; SGLang 0.5.19–0.5.22's default format and TensorRT-LLM publish no adapter in
/// their keys: the hashes are the base model's, and the index answers `unknown` for
/// endpoints serving adapters). Full blocks only; writes at most `max_blocks`
/// hashes and their count to `*n_out`.
///
/// Returns `KVEXACT_OK`; `KVEXACT_ERR_REQUEST` (code `"SALT_REJECTED"`: the engine answers such
/// a request with HTTP 400, so it has no keys), `KVEXACT_ERR_UNSUPPORTED` (`"SALT_UNKNOWN"`:
/// the release's salt handling is not catalog data, or the value is one no vector shows;
/// `"UNKNOWN_ADAPTER"`: the deployment serves no such adapter), `KVEXACT_ERR_INVALID_ARGUMENT`
/// (`hasher` not built by `kvexact_hasher_new_for_deployment`; a salt or adapter not UTF-8),
/// `KVEXACT_ERR_NULL_ARGUMENT`, or the hashing statuses of `kvexact_block_hashes_u64`, with an
/// error object. `hashes_out` and `*n_out` are written only on success.
///
/// # Safety
/// `hasher` is NULL or live; `keys` is NULL or valid for its `struct_size` bytes with its
/// pointers valid for their lengths; `ids` is valid for `n` reads; `hashes_out` for
/// `max_blocks` writes; `n_out` and `err` are NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_block_hashes_keyed(
    hasher: *const kvexact_hasher,
    keys: *const kvexact_request_keys,
    ids: *const u32,
    n: usize,
    hashes_out: *mut u64,
    max_blocks: usize,
    n_out: *mut usize,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let h = arc_ref(hasher, "hasher")?;
            let k = versioned_in(keys, "keys")?;
            let ids = in_slice(ids, n, "ids")?;
            let out = out_slice(hashes_out, max_blocks, "hashes_out")?;
            let n_out = out_param(n_out, "n_out")?;
            let Some(dep) = h.deployment() else {
                return Err(Failure::invalid(
                    "hasher",
                    "not a deployment's hasher (kvexact_hasher_new_for_deployment)",
                ));
            };
            let (salt, adapter) = match k {
                None => (None, None),
                Some(k) => (
                    match k.has_cache_salt {
                        0 => None,
                        1 => Some(in_str(k.cache_salt, k.cache_salt_len, "keys.cache_salt")?),
                        v => {
                            return Err(Failure::invalid(
                                "keys.has_cache_salt",
                                format_args!("{v}: 0 or 1"),
                            ))
                        }
                    },
                    if k.adapter.is_null() {
                        None
                    } else {
                        Some(in_str(k.adapter, k.adapter_len, "keys.adapter")?)
                    },
                ),
            };
            let keyed = dep
                .request_hasher(RequestKeys {
                    cache_salt: salt,
                    adapter,
                })
                .map_err(|e| request_keys_failure(&e))?;
            let written = h.hash_u64_with(&keyed, ids, out)?;
            n_out.write(written);
            Ok(KVEXACT_OK)
        })
    }
}

/// The refusal a request's keys map to on the gateway's path: `cache_salt` for a salt that
/// cannot be keyed or is rejected; none for an adapter (its failure has its own code).
pub(crate) fn request_keys_refusal(e: &RequestKeysError) -> Option<kvexact_refusal> {
    match e {
        RequestKeysError::SaltRejected(_) | RequestKeysError::SaltUnknown(_) => {
            Some(KVEXACT_REFUSAL_CACHE_SALT)
        }
        _ => None,
    }
}

/// A prefix index for the endpoints of one deployment: the release's prefix-hit rule under
/// the deployment's key form (look-ahead keys hit at most ⌊(n − L)/B⌋ blocks, bigram pages
/// ⌊(n − 2)/P⌋), its block size and event schema, exactly as `kvexact_index_new` builds one
/// from a release; feed it the deployment's endpoints and predict with keys from the
/// deployment's hasher. Endpoints serving adapters (`kvexact_index_endpoint.lora_adapters`)
/// predict `unknown` where the release's events do not show adapters (SGLang 0.5.19,
/// TensorRT-LLM). `options`: NULL or a `kvexact_index_options` (KV-cache groups, max slots).
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; otherwise, with an error object,
/// `KVEXACT_ERR_PREFIX_HIT_RULE` (the release has no prefix-hit rule, or the groups are
/// outside what it states: look-ahead keys over several groups are not proven),
/// `KVEXACT_ERR_INVALID_ARGUMENT` (bad options), `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not
/// written on failure.
///
/// # Safety
/// `deployment` is NULL or live; `options` is NULL or valid for its `struct_size` bytes with
/// `groups` valid for `n_groups` reads; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_new_for_deployment(
    deployment: *const kvexact_deployment,
    options: *const crate::index::kvexact_index_options,
    out: *mut *mut crate::index::kvexact_index,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    use crate::index::{
        groups_of, index_failure, kvexact_index_options, KVEXACT_INDEX_DEFAULT_MAX_SLOTS,
        KVEXACT_INDEX_MAX_SLOTS,
    };
    unsafe {
        boundary_err(err, || {
            let d = arc_ref(deployment, "deployment")?;
            let out = out_param(out, "out")?;
            let opts = versioned_in(options, "options")?;
            let k = d.keying();
            let o = opts.unwrap_or(kvexact_index_options {
                struct_size: 0,
                max_slots: 0,
                groups: std::ptr::null(),
                n_groups: 0,
            });
            let groups = groups_of(&o, k.block_size)?;
            let max_slots = match o.max_slots {
                0 => KVEXACT_INDEX_DEFAULT_MAX_SLOTS,
                n if n > KVEXACT_INDEX_MAX_SLOTS => {
                    return Err(Failure::invalid(
                        "options.max_slots",
                        format_args!("at most {KVEXACT_INDEX_MAX_SLOTS}"),
                    ))
                }
                n => n,
            };
            let schema = d.contract().events().ok_or_else(|| {
                Failure::invalid(
                    "deployment",
                    format_args!("{} has no KV events", k.release_id),
                )
            })?;
            let rule = kvindex::HitRule::for_keying(k).map_err(|e| index_failure(&e))?;
            let index = kvindex::Index::new(kvindex::IndexOptions {
                rule,
                schema: schema.clone(),
                block_size: k.block_size,
                groups,
                max_slots,
            })
            .map_err(|e| index_failure(&e))?;
            out.write(arc_into_raw(Arc::new(index)));
            Ok(KVEXACT_OK)
        })
    }
}

/// What `kvexact_deployment_check` is given: one ZMQ message's msgpack payload (frame 2) of
/// the endpoint's KV events (vLLM, SGLang).
pub const KVEXACT_DEPLOYMENT_EVIDENCE_EVENTS: u32 = 1;
/// SGLang's `GET /get_server_info` body (JSON).
pub const KVEXACT_DEPLOYMENT_EVIDENCE_SGLANG_SERVER_INFO: u32 = 2;
/// vLLM's `GET /v1/models` body (JSON).
pub const KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_MODELS: u32 = 3;
/// vLLM's `GET /metrics` body (Prometheus text; its `vllm:cache_config_info` gauge's
/// `block_size` and `prefix_caching_hash_algo` labels).
pub const KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_METRICS: u32 = 4;

/// Checks the deployment against what the live engine shows of it (docs/contracts/
/// gateway-integration.md §9), for attestation and while serving: `evidence` names what
/// `bytes` / `len` hold (`KVEXACT_DEPLOYMENT_EVIDENCE_EVENTS`: a KV-event payload, decoded with
/// the release's schema — the block size of every stored block, vLLM's
/// `lookahead_token_ids` (one list of `L` tokens per block under look-ahead keys, none
/// otherwise), SGLang's bigram pairs (EAGLE) or flat ids, the adapters the blocks name;
/// `_SGLANG_SERVER_INFO`: `page_size`, `speculative_algorithm`, `lora_paths`;
/// `_VLLM_MODELS`: each declared adapter listed with its path as `root`, no other adapter;
/// `_VLLM_METRICS`: the block size and hash algorithm of `vllm:cache_config_info`).
/// What the engine does not show is not judged.
///
/// Returns `KVEXACT_OK` when nothing disagrees; `KVEXACT_ERR_DEPLOYMENT_MISMATCH` (code
/// `"DEPLOYMENT_MISMATCH"`, path the first option that disagrees, the message every
/// mismatch: "speculative: declared lookahead-1, the engine shows blocks without
/// lookahead_token_ids") — a gateway must not route the endpoint on the declared keys
/// then; `KVEXACT_ERR_EVENT_DECODE` / `KVEXACT_ERR_INVALID_ARGUMENT` for bytes that are not
/// the named evidence, an unknown `evidence`, or evidence of another engine;
/// `KVEXACT_ERR_NULL_ARGUMENT`; with an error object.
///
/// # Safety
/// `deployment` is NULL or live; `bytes` is valid for `len` bytes; `err` is NULL or valid for
/// one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_deployment_check(
    deployment: *const kvexact_deployment,
    evidence: u32,
    bytes: *const u8,
    len: usize,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    use kvprobe::deployment_check as check;
    unsafe {
        boundary_err(err, || {
            let d = arc_ref(deployment, "deployment")?;
            let bytes = in_slice(bytes, len, "bytes")?;
            let engine = d.engine();
            let json = || {
                serde_json::from_slice::<serde_json::Value>(bytes)
                    .map_err(|e| Failure::invalid("bytes", format_args!("not JSON: {e}")))
            };
            let wrong = |what: &str| {
                Failure::invalid(
                    "evidence",
                    format_args!("{what} is not evidence of a {engine} deployment"),
                )
            };
            let found = match evidence {
                KVEXACT_DEPLOYMENT_EVIDENCE_EVENTS => {
                    let schema = d.contract().events().ok_or_else(|| wrong("events"))?;
                    let batch = kvhash::events::decode_payload_schema(
                        schema,
                        bytes,
                        &kvhash::events::Limits::default(),
                    )
                    .map_err(|e| {
                        Failure::with_code(KVEXACT_ERR_EVENT_DECODE, "decode_error", e.to_string())
                    })?;
                    check::check_events(d, &batch)
                }
                KVEXACT_DEPLOYMENT_EVIDENCE_SGLANG_SERVER_INFO => {
                    if engine != kvprofile_core::Engine::Sglang {
                        return Err(wrong("/get_server_info"));
                    }
                    check::check_sglang_server_info(d, &json()?)
                }
                KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_MODELS => {
                    if engine != kvprofile_core::Engine::Vllm {
                        return Err(wrong("/v1/models"));
                    }
                    check::check_vllm_models(d, &json()?)
                }
                KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_METRICS => {
                    if engine != kvprofile_core::Engine::Vllm {
                        return Err(wrong("/metrics"));
                    }
                    let text = std::str::from_utf8(bytes)
                        .map_err(|e| Failure::invalid("bytes", format_args!("not UTF-8: {e}")))?;
                    check::check_vllm_metrics(d, text)
                }
                other => {
                    return Err(Failure::invalid(
                        "evidence",
                        format_args!("{other}: not a KVEXACT_DEPLOYMENT_EVIDENCE_* value"),
                    ))
                }
            };
            match found.first() {
                None => Ok(KVEXACT_OK),
                Some(first) => Err(Failure::with_code(
                    KVEXACT_ERR_DEPLOYMENT_MISMATCH,
                    "DEPLOYMENT_MISMATCH",
                    found
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                )
                .at_path(first.option)),
            }
        })
    }
}
