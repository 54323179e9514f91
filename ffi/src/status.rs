//! Status codes: `0` is success, `-1 … -7` are the gateway's encode-path codes, everything
//! else (arguments, buffers, registry, events, panics) is `<= -100`.

use std::ffi::c_char;

/// The result of every fallible call: `KVEXACT_OK` (0) or a negative `KVEXACT_ERR_*` value.
/// Functions that return a count (`int32_t`) use the same negative values for failures.
pub type kvexact_status = i32;

/// Success.
pub const KVEXACT_OK: kvexact_status = 0;
/// The request is malformed (bad JSON, empty prompt, wrong field types). Same value as the
/// gateway's `LLB_KV_TOK_ERR_REQUEST`.
pub const KVEXACT_ERR_REQUEST: kvexact_status = -1;
/// A strict-rule refusal; the reason is the `kvexact_refusal` out-value. Same value as the
/// gateway's `LLB_KV_TOK_ERR_UNSUPPORTED`.
pub const KVEXACT_ERR_UNSUPPORTED: kvexact_status = -2;
/// The profile cannot serve this request (missing renderer/surface, contract mismatch). Same
/// value as the gateway's `LLB_KV_TOK_ERR_PROFILE`.
pub const KVEXACT_ERR_PROFILE: kvexact_status = -3;
/// The chat template failed to render. Same value as `LLB_KV_TOK_ERR_RENDERER`.
pub const KVEXACT_ERR_RENDERER: kvexact_status = -4;
/// The tokenizer failed or is missing. Same value as `LLB_KV_TOK_ERR_TOKENIZER`.
pub const KVEXACT_ERR_TOKENIZER: kvexact_status = -5;
/// Any other encode-path failure. Same value as `LLB_KV_TOK_ERR_UNKNOWN`.
pub const KVEXACT_ERR_UNKNOWN: kvexact_status = -6;
/// Reserved for the caller's readiness fence; libkvexact never returns it. Same value as
/// `LLB_KV_TOK_ERR_NOT_READY`.
pub const KVEXACT_ERR_NOT_READY: kvexact_status = -7;

/// A panic was caught at the ABI boundary (a bug in libkvexact; the call had no effect).
pub const KVEXACT_ERR_PANIC: kvexact_status = -100;
/// A required pointer argument was NULL.
pub const KVEXACT_ERR_NULL_ARGUMENT: kvexact_status = -101;
/// An argument is out of range (unknown enum value, block size 0, invalid UTF-8 …).
pub const KVEXACT_ERR_INVALID_ARGUMENT: kvexact_status = -102;
/// The caller's output buffer is too small; the needed length was written to the length
/// out-parameter and nothing else was written.
pub const KVEXACT_ERR_BUFFER_TOO_SMALL: kvexact_status = -103;
/// The engine defines no hash for what was asked (e.g. a trailing partial block under vLLM,
/// which never hashes partial blocks). libkvexact refuses rather than invent a value.
pub const KVEXACT_ERR_HASH_UNDEFINED: kvexact_status = -104;
/// A result does not fit the return type (e.g. more than `INT32_MAX` blocks).
pub const KVEXACT_ERR_OVERFLOW: kvexact_status = -105;
/// vLLM's NONE_HASH (the root of every block-hash chain) is random in the engine for this
/// configuration, so no hash kvexact computes could match: `PYTHONHASHSEED` unset with an
/// xxhash algorithm, or with any algorithm under a release of NONE_HASH rule A (vLLM
/// 0.17–0.28). Set `PYTHONHASHSEED` on the engine and pass it as the hasher's seed. Returned
/// by the hasher constructors (`kvexact_hasher_new*`), error code `"none_hash_unreproducible"`.
pub const KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE: kvexact_status = -106;
/// A vLLM pickle-serialised block (`KVEXACT_SHA256_PICKLE`, `KVEXACT_XXHASH_PICKLE`) does not
/// fit one CPython pickle frame (65,535 bytes: a very large block size), whose splitting rules
/// kvexact does not reproduce. Returned by the hashing calls, which then write nothing.
pub const KVEXACT_ERR_PICKLE_TOO_LARGE: kvexact_status = -107;
/// A hashing option the engine release's rules do not have (e.g. look-ahead hashing before
/// vLLM 0.33); error code `"hash_rule_unsupported"`.
pub const KVEXACT_ERR_HASH_RULE_UNSUPPORTED: kvexact_status = -108;
/// Loading or checking the registry failed; the error object names the code and the file.
pub const KVEXACT_ERR_REGISTRY: kvexact_status = -110;
/// No profile matches the model name or id; also an engine contract or release id that the
/// contract catalog does not have (error code `"UNKNOWN_NAME"`).
pub const KVEXACT_ERR_NOT_FOUND: kvexact_status = -111;
/// An event payload does not follow the decoder's wire schema (`schema_mismatch`).
pub const KVEXACT_ERR_EVENT_SCHEMA: kvexact_status = -120;
/// An event payload is not decodable at all (`decode_error`).
pub const KVEXACT_ERR_EVENT_DECODE: kvexact_status = -121;
/// A hash challenge could not be armed (the readiness reason is `challenge_failed`).
pub const KVEXACT_ERR_CHALLENGE: kvexact_status = -130;
/// The engine version is not one the contract catalog has a release for (error code
/// `"UNKNOWN_ENGINE_VERSION"`, its message naming the nearest known releases). libkvexact
/// never falls back to a family default or to the newest rules: the caller must not hash or
/// decode for that engine until kvexact knows its release.
pub const KVEXACT_ERR_UNKNOWN_ENGINE_VERSION: kvexact_status = -140;
/// The engine version is a known release, but of another contract than the one named (error
/// code `"CONTRACT_MISMATCH"`): the rule's contract id does not fit the engine it points at.
pub const KVEXACT_ERR_CONTRACT_MISMATCH: kvexact_status = -141;
/// A refusal code asked to be lifted (`kvexact_encoder_options.lifted`) where the engine
/// release's contract does not define the engine's behaviour for it (error code
/// `"LIFT_NOT_ALLOWED"`, its message naming the code, the release and why): refused when the
/// encoder is built, never at request time.
pub const KVEXACT_ERR_LIFT_NOT_ALLOWED: kvexact_status = -142;
/// A deployment option the engine release cannot be keyed under (error code
/// `"DEPLOYMENT_UNSUPPORTED"`, its message naming the option and why: no vectors prove the
/// release's keys or hits under it, or the release has no such option): refused when the
/// deployment is resolved (`kvexact_deployment_new`), never at request time.
pub const KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED: kvexact_status = -143;
/// The live engine shows a deployment option otherwise than declared (error code
/// `"DEPLOYMENT_MISMATCH"`, its path the option — `blockSize`, `speculative`,
/// `loraAdapters` — and its message every mismatch): `kvexact_deployment_check`. The
/// endpoint is not keyed as declared: never route it on the declared keys.
pub const KVEXACT_ERR_DEPLOYMENT_MISMATCH: kvexact_status = -144;
/// The engine release has no prefix-hit rule in the contract catalog, or the index's KV-cache
/// groups are outside what its rule states (error code `"PREFIX_HIT_RULE"`): the prefix
/// index refuses rather than guess the engine's hit rule (`kvexact_index_new`).
pub const KVEXACT_ERR_PREFIX_HIT_RULE: kvexact_status = -160;
/// No endpoint with this id in the prefix index (never added, or removed); error code
/// `"UNKNOWN_ENDPOINT"`.
pub const KVEXACT_ERR_UNKNOWN_ENDPOINT: kvexact_status = -161;
/// An endpoint of this name is already in the prefix index (`kvexact_index_add_endpoint`);
/// error code `"DUPLICATE_ENDPOINT"`.
pub const KVEXACT_ERR_DUPLICATE_ENDPOINT: kvexact_status = -162;

/// Every status with its stable name, in one table (names are the `kvexact_error_code` of
/// errors that carry no finer code).
const NAMES: &[(kvexact_status, &str)] = &[
    (KVEXACT_OK, "ok\0"),
    (KVEXACT_ERR_REQUEST, "request\0"),
    (KVEXACT_ERR_UNSUPPORTED, "unsupported\0"),
    (KVEXACT_ERR_PROFILE, "profile\0"),
    (KVEXACT_ERR_RENDERER, "renderer\0"),
    (KVEXACT_ERR_TOKENIZER, "tokenizer\0"),
    (KVEXACT_ERR_UNKNOWN, "unknown\0"),
    (KVEXACT_ERR_NOT_READY, "not_ready\0"),
    (KVEXACT_ERR_PANIC, "panic\0"),
    (KVEXACT_ERR_NULL_ARGUMENT, "null_argument\0"),
    (KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument\0"),
    (KVEXACT_ERR_BUFFER_TOO_SMALL, "buffer_too_small\0"),
    (KVEXACT_ERR_HASH_UNDEFINED, "hash_undefined\0"),
    (KVEXACT_ERR_OVERFLOW, "overflow\0"),
    (
        KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE,
        "none_hash_unreproducible\0",
    ),
    (KVEXACT_ERR_PICKLE_TOO_LARGE, "pickle_too_large\0"),
    (KVEXACT_ERR_HASH_RULE_UNSUPPORTED, "hash_rule_unsupported\0"),
    (KVEXACT_ERR_REGISTRY, "registry\0"),
    (KVEXACT_ERR_NOT_FOUND, "not_found\0"),
    (KVEXACT_ERR_EVENT_SCHEMA, "schema_mismatch\0"),
    (KVEXACT_ERR_EVENT_DECODE, "decode_error\0"),
    (KVEXACT_ERR_CHALLENGE, "challenge_failed\0"),
    (
        KVEXACT_ERR_UNKNOWN_ENGINE_VERSION,
        "unknown_engine_version\0",
    ),
    (KVEXACT_ERR_CONTRACT_MISMATCH, "contract_mismatch\0"),
    (KVEXACT_ERR_LIFT_NOT_ALLOWED, "lift_not_allowed\0"),
    (
        KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED,
        "deployment_unsupported\0",
    ),
    (KVEXACT_ERR_DEPLOYMENT_MISMATCH, "deployment_mismatch\0"),
    (KVEXACT_ERR_PREFIX_HIT_RULE, "prefix_hit_rule\0"),
    (KVEXACT_ERR_UNKNOWN_ENDPOINT, "unknown_endpoint\0"),
    (KVEXACT_ERR_DUPLICATE_ENDPOINT, "duplicate_endpoint\0"),
];

/// The stable name of a status (with its NUL terminator), or `None` for an unknown value.
pub(crate) fn name_with_nul(status: kvexact_status) -> Option<&'static str> {
    NAMES.iter().find(|(s, _)| *s == status).map(|(_, n)| *n)
}

/// The stable name of a status without the NUL terminator (`"null_argument"`), or
/// `"unrecognized_status"`.
pub(crate) fn name(status: kvexact_status) -> &'static str {
    name_with_nul(status)
        .map(|n| n.trim_end_matches('\0'))
        .unwrap_or("unrecognized_status")
}

/// The stable lower-case name of a status (`"ok"`, `"request"`, `"null_argument"` …), or
/// `"unrecognized_status"` for a value libkvexact does not define.
///
/// Ownership: the string is static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_status_name(status: kvexact_status) -> *const c_char {
    name_with_nul(status)
        .unwrap_or("unrecognized_status\0")
        .as_ptr()
        .cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_nul_terminated() {
        for (i, (s, n)) in NAMES.iter().enumerate() {
            assert!(n.ends_with('\0') && !n[..n.len() - 1].contains('\0'));
            assert!(NAMES[i + 1..].iter().all(|(t, m)| t != s && m != n));
        }
        assert_eq!(name(KVEXACT_ERR_NULL_ARGUMENT), "null_argument");
        assert_eq!(name(12345), "unrecognized_status");
    }
}
