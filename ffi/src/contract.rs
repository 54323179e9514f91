//! Engine contracts per release (`kvprobe::contract`): resolving the version an engine
//! reports to exactly one release of the built-in catalog, the catalog as JSON, and hashers
//! and event decoders built with a release's own rules.
//!
//! The release and contract ids are the catalog's, which lives for the process: they are
//! handed to C as static NUL-terminated strings, never to be freed.

use std::ffi::{c_char, CString};
use std::sync::{Arc, OnceLock};

use kvprobe::contract::{self, Contract, HashContract};
use kvprofile_core::RegistryError;

use crate::enums::{algorithm_of, engine_of, kvexact_engine, kvexact_hash_algo};
use crate::error::{c_string_lossless, kvexact_error, Failure};
use crate::events::{kvexact_event_decoder, rehash_arg, EventDecoder};
use crate::handle::{arc_into_raw, box_into_raw, copy_out, in_c_str, out_param, out_slice};
use crate::hasher::{
    hash_failure, hasher_options, kvexact_hasher, kvexact_hasher_options, seed_arg, Hasher,
};
use crate::panic::{boundary, boundary_err};
use crate::status::{
    kvexact_status, KVEXACT_ERR_CONTRACT_MISMATCH, KVEXACT_ERR_INVALID_ARGUMENT,
    KVEXACT_ERR_LIFT_NOT_ALLOWED, KVEXACT_ERR_NOT_FOUND, KVEXACT_ERR_REGISTRY, KVEXACT_ERR_UNKNOWN,
    KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, KVEXACT_OK,
};

/// A kvprobe contract error as a failure. The code is kvprobe's (`UNKNOWN_ENGINE_VERSION`,
/// `UNKNOWN_NAME`, `CONFIG`, `LIFT_NOT_ALLOWED`, …); the status follows it. An encoder error
/// keeps kvtemplate's class (`KVEXACT_ERR_RENDERER`, …) and class code; a hasher error is
/// mapped as `kvexact_hasher_new`'s are (`KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE`, …).
pub(crate) fn contract_failure(e: &kvprobe::Error) -> Failure {
    use kvprobe::Error as E;
    let status = match e {
        E::Contract(RegistryError::UnknownEngineVersion { .. }) => {
            KVEXACT_ERR_UNKNOWN_ENGINE_VERSION
        }
        E::ContractMismatch { .. } => KVEXACT_ERR_CONTRACT_MISMATCH,
        E::LiftNotAllowed { .. } => KVEXACT_ERR_LIFT_NOT_ALLOWED,
        E::Encoder(t) => return Failure::new(t.class().code(), t.to_string()),
        E::UnknownName { .. } => KVEXACT_ERR_NOT_FOUND,
        E::Hasher(h) => return hash_failure(h.clone()),
        E::Config(_) => KVEXACT_ERR_INVALID_ARGUMENT,
        E::Registry(_) | E::Contract(_) => KVEXACT_ERR_REGISTRY,
        _ => KVEXACT_ERR_UNKNOWN,
    };
    Failure::with_code(status, e.code(), e.to_string())
}

/// The catalog's release and contract ids as NUL-terminated strings that live for the process.
fn static_id(id: &str) -> Result<*const c_char, Failure> {
    static IDS: OnceLock<Vec<(&'static str, CString)>> = OnceLock::new();
    let ids = IDS.get_or_init(|| match contract::catalog() {
        Ok(cat) => cat
            .releases
            .iter()
            .map(|r| r.id.as_str())
            .chain(cat.profiles.iter().map(|p| p.id.as_str()))
            .map(|s| (s, c_string_lossless(s)))
            .collect(),
        Err(_) => Vec::new(),
    });
    ids.iter()
        .find(|(s, _)| *s == id)
        .map(|(_, c)| c.as_ptr())
        .ok_or_else(|| Failure::new(KVEXACT_ERR_UNKNOWN, format!("{id} is not a catalog id")))
}

/// The contract named `id` (a release id or a contract id), at `version` when given: with a
/// version, the release it resolves to, which must be `id` or refine the contract `id`.
fn contract_for(id: &str, version: Option<&str>) -> Result<Contract, Failure> {
    contract::resolve_within(id, version).map_err(|e| contract_failure(&e))
}

/// The contract of a `(contract_id, engine_version)` argument pair (`engine_version` may be
/// NULL), as [`contract_for`].
///
/// # Safety
/// Both are NULL or NUL-terminated.
pub(crate) unsafe fn contract_arg(
    id: *const c_char,
    version: *const c_char,
) -> Result<Contract, Failure> {
    let id = unsafe { in_c_str(id, "contract_id") }?;
    let version = if version.is_null() {
        None
    } else {
        Some(unsafe { in_c_str(version, "engine_version") }?)
    };
    contract_for(id, version)
}

/// Resolves the version an engine reports (`version`, NUL-terminated, e.g. vLLM's
/// `/version` `"0.24.0"`; a leading `v` and a `+local` build label are ignored) to exactly one
/// release of the built-in contract catalog. Never a family default, never the newest rules.
///
/// On success writes the release id (e.g. `"vllm-kv-map-v2-r0.24"`) to `*release_id` and the
/// contract (gateway) id it refines (e.g. `"vllm-kv-map-v2"`, the key of profile quirks and
/// rules) to `*contract_id`, and returns `KVEXACT_OK`. Otherwise returns
/// `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION` (error code `"UNKNOWN_ENGINE_VERSION"`, the message
/// naming the nearest known releases), `KVEXACT_ERR_INVALID_ARGUMENT` (`engine` not
/// `KVEXACT_VLLM`, `KVEXACT_SGLANG` or `KVEXACT_TRTLLM`; `version` not UTF-8) or
/// `KVEXACT_ERR_NULL_ARGUMENT`, and writes neither output.
///
/// Ownership: both strings are static (they live for the process); never free them. The
/// caller owns `*err` (free with `kvexact_error_free`); `version` is only read during the call.
///
/// # Safety
/// `version` is NULL or NUL-terminated; `release_id`, `contract_id` and `err` are NULL or valid
/// for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_contract_resolve(
    engine: kvexact_engine,
    version: *const c_char,
    release_id: *mut *const c_char,
    contract_id: *mut *const c_char,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let engine = engine_of(engine)?;
            let version = in_c_str(version, "version")?;
            let release_out = out_param(release_id, "release_id")?;
            let contract_out = out_param(contract_id, "contract_id")?;
            let c = contract::resolve(engine, version).map_err(|e| contract_failure(&e))?;
            let (r, k) = (static_id(c.release_id())?, static_id(c.contract_id())?);
            release_out.write(r);
            contract_out.write(k);
            Ok(KVEXACT_OK)
        })
    }
}

/// Writes the built-in contract catalog as compact UTF-8 JSON, no NUL (the document
/// `kvexact contracts --json` prints, without its indentation):
/// `{"schema":"kvexact-contracts/v1","generation":…,"releases":[{"release":…,"contract":…,
/// "engine":…,"versions":[…],"range":…,"hash":{…},"events":{…},"chat":{…},"evidence":{…}}]}`,
/// one entry per release in catalog order.
///
/// Size query and statuses as `kvexact_registry_discovery_json`: whenever the call returns
/// `KVEXACT_OK` or `KVEXACT_ERR_BUFFER_TOO_SMALL`, `*len` holds the document's length; `buf`
/// may be NULL with `cap` 0 to ask for it. `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `len` (or a
/// NULL `buf` with `cap` > 0). The document is the same for every call in one process.
///
/// Ownership: `buf` stays the caller's; nothing is allocated for the caller.
///
/// # Safety
/// `buf` is NULL or valid for `cap` writes; `len` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_contracts_json(
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let json = contract::catalog_json().map_err(|e| contract_failure(&e))?;
        let text = serde_json::to_string(&json)
            .map_err(|e| Failure::new(KVEXACT_ERR_UNKNOWN, e.to_string()))?;
        copy_out(text.as_bytes(), buf, len, "contract catalog")
    })
}

/// Creates a hasher with the hashing rules of one engine release (`kvprobe::bridge::hasher`):
/// vLLM's NONE_HASH rule, extra-key form and look-ahead ability, SGLang's id rules,
/// TensorRT-LLM's V1 block key. The release is named by `contract_id` (NUL-terminated) and
/// `engine_version`:
///
/// * `engine_version` NULL: `contract_id` is a release id (`"vllm-kv-map-v2-r0.24"`), or a
///   contract id whose releases all share the rules (`"sglang-kv-rank-v1"`); a contract id
///   whose releases differ is `KVEXACT_ERR_INVALID_ARGUMENT` (code `"CONFIG"`, the message
///   naming them): give the version.
/// * `engine_version` not NULL (NUL-terminated, as the engine reports it): it is resolved as by
///   `kvexact_contract_resolve`, and the release it names must be `contract_id` or refine the
///   contract `contract_id`, else `KVEXACT_ERR_CONTRACT_MISMATCH`.
///
/// `algo`: a `kvexact_hash_algo` of the release's engine, or
/// `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT` (`sha256_cbor` for vLLM). `block_size` >= 1. `seed` /
/// `seed_len`: vLLM's `PYTHONHASHSEED`, with `kvexact_hasher_new`'s convention (`(NULL, 0)`
/// unset, non-NULL with length 0 the empty string, UTF-8); under NONE_HASH rule A (vLLM
/// 0.17–0.28) an unset seed is refused for every algorithm, under rule B for the xxhash ones,
/// because the engine then draws a random NONE_HASH. SGLang and TensorRT-LLM take no seed.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; otherwise a negative status with an
/// error object (code in parentheses): `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`
/// (`"UNKNOWN_ENGINE_VERSION"`), `KVEXACT_ERR_CONTRACT_MISMATCH` (`"CONTRACT_MISMATCH"`),
/// `KVEXACT_ERR_NOT_FOUND` (`"UNKNOWN_NAME"`: no such contract or release id),
/// `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE` (`"none_hash_unreproducible"`: the unset seed above),
/// `KVEXACT_ERR_HASH_RULE_UNSUPPORTED` (`"hash_rule_unsupported"`: another refusal of the
/// release's hashing rules), `KVEXACT_ERR_INVALID_ARGUMENT` (`"CONFIG"`: algorithm of another
/// engine, ambiguous contract id, a release without KV plane; `"invalid_argument"`: unknown
/// `algo` value, seed not UTF-8 or given to a non-vLLM release, block size 0),
/// `KVEXACT_ERR_NULL_ARGUMENT`.
/// `*out` is not written on failure.
///
/// The hasher is used exactly like one from `kvexact_hasher_new` (which keeps the reference
/// rules, vLLM 0.31's, whatever the engine runs), with the same default prefix-chain cache
/// (`kvexact_hasher_new_for_contract_with_options` sets it).
///
/// Ownership: the caller owns `*out` (free with `kvexact_hasher_free`) and `*err` (free with
/// `kvexact_error_free`); the strings and `seed` are only read during the call.
///
/// # Safety
/// `contract_id` and `engine_version` are NULL or NUL-terminated; `seed` is NULL or valid for
/// `seed_len` bytes; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_new_for_contract(
    contract_id: *const c_char,
    engine_version: *const c_char,
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: *const u8,
    seed_len: usize,
    out: *mut *mut kvexact_hasher,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        kvexact_hasher_new_for_contract_with_options(
            contract_id,
            engine_version,
            algo,
            block_size,
            seed,
            seed_len,
            std::ptr::null(),
            out,
            err,
        )
    }
}

/// `kvexact_hasher_new_for_contract` with options (`options` NULL: its defaults, a
/// prefix-chain cache of `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES`): the prefix-chain cache's
/// capacity, none, or another hasher's cache to share (see `kvexact_hasher_options`).
/// Statuses as `kvexact_hasher_new_for_contract`, and `KVEXACT_ERR_INVALID_ARGUMENT` for bad
/// options.
///
/// # Safety
/// As `kvexact_hasher_new_for_contract`; `options` is NULL or valid for its `struct_size`
/// bytes, with `share_cache_with` NULL or a live hasher.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_hasher_new_for_contract_with_options(
    contract_id: *const c_char,
    engine_version: *const c_char,
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: *const u8,
    seed_len: usize,
    options: *const kvexact_hasher_options,
    out: *mut *mut kvexact_hasher,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let seed = seed_arg(seed, seed_len)?;
            let cache = hasher_options(options)?;
            let algo = algorithm_of(algo, "algo")?;
            let block_size = usize::try_from(block_size)
                .map_err(|_| Failure::invalid("block_size", "too large"))?;
            if block_size == 0 {
                return Err(Failure::invalid("block_size", "must be at least 1"));
            }
            let c = contract_arg(contract_id, engine_version)?;
            let seed = seed
                .map(std::str::from_utf8)
                .transpose()
                .map_err(|e| Failure::invalid("seed", format_args!("not UTF-8: {e}")))?;
            if seed.is_some() && !matches!(c.hash(), Some(HashContract::Vllm(_))) {
                return Err(Failure::invalid(
                    "seed",
                    format_args!(
                        "only vLLM releases take a NONE_HASH seed ({} is not one); pass NULL",
                        c.release_id()
                    ),
                ));
            }
            let inner = kvprobe::bridge::hasher(&c, algo, block_size, seed)
                .map_err(|e| contract_failure(&e))?;
            out.write(arc_into_raw(Arc::new(
                Hasher::from_block_hasher(inner).with_cache(cache),
            )));
            Ok(KVEXACT_OK)
        })
    }
}

/// Creates an event decoder with the exact KV-event schema of one engine release (the
/// release named by `contract_id` and `engine_version` as for
/// `kvexact_hasher_new_for_contract`): the fields, in wire order, that this release writes,
/// and no others. A payload carrying a field the release never writes (a map key, or an
/// array of another length) is `KVEXACT_ERR_EVENT_SCHEMA` (`"schema_mismatch"`): the engine
/// runs another release than its contract says. `kvexact_event_decoder_new` instead takes a
/// wire schema id and accepts every release of that family. For TensorRT-LLM the release's
/// schema is its JSON format's (the same as `kvexact_event_decoder_new`'s).
///
/// `rehash`: as for `kvexact_event_decoder_new` (NULL, or a TensorRT-LLM hasher for a
/// TensorRT-LLM release; NULL for vLLM and SGLang).
///
/// Returns `KVEXACT_OK` and the decoder in `*out`; otherwise the statuses of
/// `kvexact_hasher_new_for_contract` for the id and version (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
/// `KVEXACT_ERR_CONTRACT_MISMATCH`, `KVEXACT_ERR_NOT_FOUND`, `KVEXACT_ERR_INVALID_ARGUMENT`
/// with `"CONFIG"` for an ambiguous contract id), `KVEXACT_ERR_INVALID_ARGUMENT` (a release
/// without KV events; `rehash` not allowed or not a TensorRT-LLM hasher),
/// `KVEXACT_ERR_NULL_ARGUMENT`, with an error object. `*out` is not written on failure.
///
/// Ownership: the caller owns `*out` (free with `kvexact_event_decoder_free`) and `*err`; the
/// decoder copies `rehash`'s configuration (the caller may free `rehash` right after).
///
/// # Safety
/// `contract_id` and `engine_version` are NULL or NUL-terminated; `rehash` is NULL or a live
/// hasher; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_event_decoder_new_for_contract(
    contract_id: *const c_char,
    engine_version: *const c_char,
    rehash: *const kvexact_hasher,
    out: *mut *mut kvexact_event_decoder,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let c = contract_arg(contract_id, engine_version)?;
            let schema = c.events().ok_or_else(|| {
                Failure::invalid(
                    "contract_id",
                    format_args!("{} has no KV events", c.release_id()),
                )
            })?;
            let rehash = rehash_arg(rehash, schema.format())?;
            out.write(box_into_raw::<kvexact_event_decoder>(EventDecoder::new(
                schema.clone(),
                rehash,
            )));
            Ok(KVEXACT_OK)
        })
    }
}
