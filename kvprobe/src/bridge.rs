//! Building the other crates' objects from a published profile: the engine contract, the
//! encoder (kvtemplate) and the block hasher (kvhash) a rule attests with.

use crate::{Engine, Error};
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::{sglang::SglangHasher, trtllm::TrtllmHasher, BlockHasher};
use kvprofile_core::contracts::{self, ContractProfile};
use kvprofile_core::{HashAlgorithm, LoadedProfile};
use kvtemplate::Encoder;

/// The engine contract for `engine`: the one whose version selector matches `version` when
/// given and known, else the family default.
pub fn contract_for(
    engine: Engine,
    version: Option<&str>,
) -> Result<&'static ContractProfile, Error> {
    let catalog = contracts::builtin()?;
    if let Some(c) = version.and_then(|v| catalog.resolve(engine, v)) {
        return Ok(c);
    }
    catalog
        .profiles
        .iter()
        .find(|p| p.engine == engine && p.family_default)
        .ok_or_else(|| Error::Config(format!("no engine contract for {engine}")))
}

/// kvtemplate's engine family for a registry engine (`None`: llama.cpp, no KV plane).
pub fn template_engine(engine: Engine) -> Option<kvtemplate::Engine> {
    match engine {
        Engine::Vllm => Some(kvtemplate::Engine::Vllm),
        Engine::Sglang => Some(kvtemplate::Engine::Sglang),
        Engine::Trtllm => Some(kvtemplate::Engine::Trtllm),
        Engine::Llamacpp => None,
    }
}

/// The encoder of a published profile for one engine contract (kvtemplate's adapter: verified
/// template and tokenizer bytes, render policy, content format, the contract's
/// `completionsBos` quirk).
pub fn encoder(profile: &LoadedProfile, contract_id: &str) -> Result<Encoder, Error> {
    Ok(kvtemplate::profile::encoder_from_loaded(
        profile,
        contract_id,
    )?)
}

/// The block hasher of a rule: vLLM `sha256_cbor` (or `xxhash_cbor`) with the rule's
/// none-hash seed (`PYTHONHASHSEED` string), SGLang's page chain, TensorRT-LLM's V1 block key.
pub fn hasher(
    engine: Engine,
    algo: Option<HashAlgorithm>,
    block_size: usize,
    hash_seed: Option<&str>,
) -> Result<BlockHasher, Error> {
    Ok(match engine {
        Engine::Vllm => {
            let a = match algo {
                None | Some(HashAlgorithm::Sha256Cbor) => HashAlgo::Sha256Cbor,
                Some(HashAlgorithm::XxhashCbor) => HashAlgo::XxhashCbor,
                Some(other) => {
                    return Err(Error::Config(format!("{other:?} is not a vLLM algorithm")))
                }
            };
            VllmHasher::new(a, block_size, hash_seed)?.into()
        }
        Engine::Sglang => SglangHasher::new(block_size)?.into(),
        Engine::Trtllm => TrtllmHasher::new(block_size)?.into(),
        Engine::Llamacpp => return Err(Error::Config("llama.cpp has no KV plane".into())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contracts_resolve() {
        assert_eq!(
            contract_for(Engine::Vllm, Some("0.28.0")).unwrap().id,
            "vllm-kv-map-v2"
        );
        assert_eq!(
            contract_for(Engine::Vllm, Some("0.20.1")).unwrap().id,
            "vllm-kv-array-v1"
        );
        assert_eq!(
            contract_for(Engine::Vllm, None).unwrap().id,
            "vllm-kv-map-v2"
        );
        assert_eq!(
            contract_for(Engine::Sglang, Some("0.5.18")).unwrap().id,
            "sglang-kv-rank-v1"
        );
        assert_eq!(
            contract_for(Engine::Trtllm, Some("1.3.0rc24")).unwrap().id,
            "trtllm-kv-http-preview-v1"
        );
        assert!(hasher(Engine::Llamacpp, None, 16, None).is_err());
        assert!(hasher(
            Engine::Vllm,
            Some(HashAlgorithm::Sha256Sglang),
            16,
            Some("0")
        )
        .is_err());
        assert_eq!(
            hasher(Engine::Trtllm, None, 32, None).unwrap().block_size(),
            32
        );
    }
}
