//! The ABI's enumerations and shared flags, and their one conversion each into the library
//! crates' types: engine families (`kvexact_engine`), served surfaces (`kvexact_api_mode`),
//! hash algorithms (`kvexact_hash_algo`) and the option flag `KVEXACT_OPTION_NO_CACHE`.
//!
//! Every enumeration is an integer typedef with `#define`d values rather than a C enum, so that
//! its size is fixed and an out-of-range value from C is `KVEXACT_ERR_INVALID_ARGUMENT` instead
//! of undefined behaviour. This module depends on nothing but [`crate::failure`], so that the
//! handle modules (registry, encoder, hasher, probes, contracts) can all use it without
//! importing one another.

use kvprobe::fixtures::ApiMode;
use kvprobe::Engine;
use kvprofile_core::{Api, HashAlgorithm};

use crate::failure::Failure;

// ---------------------------------------------------------------------------------------------
// Engines

/// An engine family, for the judges and `kvexact_contract_resolve`: `KVEXACT_VLLM`,
/// `KVEXACT_SGLANG`, `KVEXACT_TRTLLM`.
pub type kvexact_engine = u32;
/// vLLM.
pub const KVEXACT_VLLM: kvexact_engine = 0;
/// SGLang.
pub const KVEXACT_SGLANG: kvexact_engine = 1;
/// TensorRT-LLM.
pub const KVEXACT_TRTLLM: kvexact_engine = 2;

/// The engine of a C `kvexact_engine` (argument `engine`).
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

// ---------------------------------------------------------------------------------------------
// Served surfaces

/// The surfaces a rule serves (`kvexact_profile_admit`, `kvexact_fixtures_check`,
/// `kvexact_judge_oracle`), or the surface one fixture probes (`kvexact_fixture_info.api`):
/// `KVEXACT_API_BOTH`, `KVEXACT_API_COMPLETIONS`, `KVEXACT_API_CHAT` (the data-plane word's
/// values).
pub type kvexact_api_mode = u32;
/// The rule serves chat and completions (0).
pub const KVEXACT_API_BOTH: kvexact_api_mode = 0;
/// Completions only (1).
pub const KVEXACT_API_COMPLETIONS: kvexact_api_mode = 1;
/// Chat only (2).
pub const KVEXACT_API_CHAT: kvexact_api_mode = 2;

/// The `ApiMode` of a C `kvexact_api_mode` (argument `api_mode`).
pub(crate) fn api_mode_of(mode: kvexact_api_mode) -> Result<ApiMode, Failure> {
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

/// The C value of one surface.
pub(crate) fn api_mode_to_c(api: Api) -> kvexact_api_mode {
    match api {
        Api::Completions => KVEXACT_API_COMPLETIONS,
        Api::Chat => KVEXACT_API_CHAT,
    }
}

// ---------------------------------------------------------------------------------------------
// Hash algorithms

/// Which engine hash chain a hasher computes (`KVEXACT_SHA256_CBOR` …). Values 0–3 are
/// §6.4's; 4 and 5 add vLLM's pickle-serialised variants; `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT`
/// (only for `kvexact_hasher_new_for_contract`) asks for the contract's default.
pub type kvexact_hash_algo = u32;

/// vLLM `sha256_cbor` (the contract's default): SHA-256 over canonical CBOR
/// `[parent, [ids], extra]`; u64 form = last 8 digest bytes, big-endian.
pub const KVEXACT_SHA256_CBOR: kvexact_hash_algo = 0;
/// vLLM `xxhash_cbor`: XXH3-128 over the same CBOR; u64 form = last 8 digest bytes, big-endian.
pub const KVEXACT_XXHASH_CBOR: kvexact_hash_algo = 1;
/// SGLang page hash: SHA-256(parent32 ‖ ids as u32 LE); u64 form = first 8 bytes, big-endian.
pub const KVEXACT_SHA256_SGLANG: kvexact_hash_algo = 2;
/// TensorRT-LLM V1 block key hash (64-bit, parent-chained; partial tail blocks defined).
pub const KVEXACT_BLOCKHASH_TRTLLM: kvexact_hash_algo = 3;
/// vLLM `sha256` (pickle serialisation); u64 form = last 8 digest bytes, big-endian.
pub const KVEXACT_SHA256_PICKLE: kvexact_hash_algo = 4;
/// vLLM `xxhash` (pickle serialisation); u64 form = last 8 digest bytes, big-endian.
pub const KVEXACT_XXHASH_PICKLE: kvexact_hash_algo = 5;
/// Only for `kvexact_hasher_new_for_contract`: the contract's default algorithm (the first of
/// its gateway `hashAlgorithms`: `sha256_cbor` for vLLM; SGLang's and TensorRT-LLM's only
/// one). Not the engine's own default (vLLM's is `sha256`, the release's `default_algorithm`
/// in `kvexact_contracts_json`). `kvexact_hasher_new` refuses it.
pub const KVEXACT_HASH_ALGO_CONTRACT_DEFAULT: kvexact_hash_algo = 0xFFFF_FFFF;

/// The catalog algorithm of a C `kvexact_hash_algo` (`None`: the contract's default);
/// `name` is the argument's name in the error.
pub(crate) fn algorithm_of(
    algo: kvexact_hash_algo,
    name: &str,
) -> Result<Option<HashAlgorithm>, Failure> {
    Ok(Some(match algo {
        KVEXACT_HASH_ALGO_CONTRACT_DEFAULT => return Ok(None),
        KVEXACT_SHA256_CBOR => HashAlgorithm::Sha256Cbor,
        KVEXACT_XXHASH_CBOR => HashAlgorithm::XxhashCbor,
        KVEXACT_SHA256_PICKLE => HashAlgorithm::Sha256,
        KVEXACT_XXHASH_PICKLE => HashAlgorithm::Xxhash,
        KVEXACT_SHA256_SGLANG => HashAlgorithm::Sha256Sglang,
        KVEXACT_BLOCKHASH_TRTLLM => HashAlgorithm::BlockhashTrtllm,
        other => {
            return Err(Failure::invalid(
                name,
                format_args!("unknown hash algorithm {other}"),
            ))
        }
    }))
}

// ---------------------------------------------------------------------------------------------
// Option flags

/// `kvexact_encoder_options.flags` / `kvexact_hasher_options.flags`: no cache for this
/// handle (every call computes everything; results are the same).
pub const KVEXACT_OPTION_NO_CACHE: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::KVEXACT_ERR_INVALID_ARGUMENT;

    #[test]
    fn every_value_converts_and_out_of_range_is_an_invalid_argument() {
        assert_eq!(engine_of(KVEXACT_VLLM).ok(), Some(Engine::Vllm));
        assert_eq!(engine_of(KVEXACT_SGLANG).ok(), Some(Engine::Sglang));
        assert_eq!(engine_of(KVEXACT_TRTLLM).ok(), Some(Engine::Trtllm));
        assert_eq!(
            engine_of(3).map_err(|f| f.status),
            Err(KVEXACT_ERR_INVALID_ARGUMENT)
        );
        for (c, m) in [
            (KVEXACT_API_BOTH, ApiMode::Both),
            (KVEXACT_API_COMPLETIONS, ApiMode::Completions),
            (KVEXACT_API_CHAT, ApiMode::Chat),
        ] {
            assert_eq!(api_mode_of(c).ok(), Some(m));
        }
        assert_eq!(
            api_mode_of(3).map_err(|f| f.status),
            Err(KVEXACT_ERR_INVALID_ARGUMENT)
        );
        assert_eq!(api_mode_to_c(Api::Completions), KVEXACT_API_COMPLETIONS);
        assert_eq!(api_mode_to_c(Api::Chat), KVEXACT_API_CHAT);
        let algos = [
            (KVEXACT_SHA256_CBOR, HashAlgorithm::Sha256Cbor),
            (KVEXACT_XXHASH_CBOR, HashAlgorithm::XxhashCbor),
            (KVEXACT_SHA256_SGLANG, HashAlgorithm::Sha256Sglang),
            (KVEXACT_BLOCKHASH_TRTLLM, HashAlgorithm::BlockhashTrtllm),
            (KVEXACT_SHA256_PICKLE, HashAlgorithm::Sha256),
            (KVEXACT_XXHASH_PICKLE, HashAlgorithm::Xxhash),
        ];
        for (c, a) in algos {
            assert_eq!(algorithm_of(c, "algo").ok(), Some(Some(a)));
        }
        assert_eq!(
            algorithm_of(KVEXACT_HASH_ALGO_CONTRACT_DEFAULT, "algo").ok(),
            Some(None)
        );
        assert_eq!(
            algorithm_of(6, "algo").map_err(|f| f.status),
            Err(KVEXACT_ERR_INVALID_ARGUMENT)
        );
    }
}
