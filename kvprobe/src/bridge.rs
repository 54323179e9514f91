//! Building the other crates' objects from a published profile and an engine release's
//! [`Contract`]: the encoder (kvtemplate, with the release's chat rules and the refusal codes
//! the rule lifts, where the release's contract allows them) and the block hasher (kvhash,
//! with the release's hashing rules) a rule attests and routes with.

use crate::contract::{Contract, HashContract};
use crate::{Engine, Error};
use kvhash::sglang::SglangHasher;
use kvhash::trtllm::TrtllmHasher;
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;
use kvprofile_core::{HashAlgorithm, LoadedProfile};
use kvtemplate::{Encoder, EncoderSpec, RefusalSet};

/// The reference release of an engine (vLLM 0.31.0, SGLang 0.5.19, TensorRT-LLM 1.3.0rc29):
/// what a caller that has no engine to ask (the demo, a test) names explicitly.
pub fn reference_version(engine: Engine) -> Option<&'static str> {
    kvtemplate::ChatRules::reference_version(engine)
}

/// The encoder of a published profile on an engine release: verified template and tokenizer
/// bytes, render policy, content format, the release's (else its contract's)
/// `completionsBos` quirk, and the release's chat rules where the vectors prove them. The
/// strict rules exactly: nothing lifted ([`encoder_with_lifts`] with
/// [`RefusalSet::EMPTY`]).
pub fn encoder(profile: &LoadedProfile, contract: &Contract) -> Result<Encoder, Error> {
    encoder_with_lifts(profile, contract, RefusalSet::EMPTY)
}

/// [`encoder`] lifting the strict-rule refusal codes `lifts`: requests that hit only those
/// are encoded as the release's serving path does ([`kvtemplate::Encoder::encode_chat`]).
/// Refused with [`Error::LiftNotAllowed`] (`LIFT_NOT_ALLOWED`, naming the code and the
/// release) when the release's contract does not list a code as liftable
/// ([`Contract::liftable`]) — before anything is compiled.
///
/// ```
/// use kvprobe::{contract, Engine};
/// use kvtemplate::RefusalSet;
/// let trt = contract::resolve(Engine::Trtllm, "1.3.0rc29").unwrap();
/// let lifts = RefusalSet::parse("tools,continue_final_message").unwrap();
/// let err = trt.check_lifts(lifts).unwrap_err();
/// assert_eq!(err.code(), "LIFT_NOT_ALLOWED");
/// assert!(err.to_string().contains("continue_final_message"));
/// assert!(err.to_string().contains("trtllm-kv-http-v2-r1.3.0rc29"));
/// ```
pub fn encoder_with_lifts(
    profile: &LoadedProfile,
    contract: &Contract,
    lifts: RefusalSet,
) -> Result<Encoder, Error> {
    contract.check_lifts(lifts)?;
    let spec = kvtemplate::spec_from_loaded(profile, contract.release_id())?;
    encoder_from_spec(spec, contract, lifts)
}

/// An encoder from an already built spec (a model directory, a test) under `contract`: the
/// release's chat rules where proven (else the engine's reference rules) and the lifts, which
/// must be the contract's ([`Contract::check_lifts`]).
///
/// The spec must have been built for the release's tokenizer loader (e.g.
/// `kvtemplate::spec_from_model_dir_for(dir, engine, contract.added_tokens_rule())`).
pub fn encoder_from_spec(
    spec: EncoderSpec,
    contract: &Contract,
    lifts: RefusalSet,
) -> Result<Encoder, Error> {
    let lifts = contract.check_lifts(lifts)?;
    let mut spec = spec.with_lifted(lifts);
    if let Some(rules) = contract.chat_or_reference() {
        spec.chat_rules = Some(rules);
    }
    let layout = spec
        .mistral_tokenizer
        .as_ref()
        .map(kvtemplate::mistral::MistralTokenizerFile::checkpoint_key);
    spec.renderer = renderer_of(contract, spec.model_type.as_deref(), layout)?;
    Ok(Encoder::new(spec)?)
}

/// The chat renderer of a model on a release (catalog `chat.renderers`, proven by the
/// release's templates-nonjinja vectors), keyed by the checkpoint's layout where its files
/// decide (`layout`: `files:tekken.json`, `files:tokenizer.model.v7` — a profile's
/// `tokenizerFile`), else by its `model_type`: harmony with vLLM's default server settings for
/// gpt-oss on vLLM 0.31.0/0.33.0, mistral_common's encoding for a bare-tekken or SentencePiece
/// v7 checkpoint where the release's vectors prove it, Jinja for a model type no release of
/// the engine renders otherwise; [`kvtemplate::ChatRenderer::Unknown`] (chat refused;
/// completions kept for a Jinja model, refused for a Mistral checkpoint) where no vectors prove
/// the release's renderer ([`Contract::chat_renderer`]) or the release has none for the
/// layout.
pub fn renderer_of(
    contract: &Contract,
    model_type: Option<&str>,
    layout: Option<&str>,
) -> Result<kvtemplate::ChatRenderer, Error> {
    let known = match contract.chat_renderer(layout.or(model_type)) {
        Ok(r) => r,
        Err(e) => return Ok(kvtemplate::ChatRenderer::Unknown(e.to_string())),
    };
    match (known, layout) {
        (None, None) => Ok(kvtemplate::ChatRenderer::Jinja),
        (None, Some(l)) => Ok(kvtemplate::ChatRenderer::Unknown(format!(
            "{}: no vectors prove how this release serves a checkpoint of layout {l}",
            contract.release_id()
        ))),
        (Some("harmony"), None) => Ok(kvtemplate::ChatRenderer::Harmony(
            kvtemplate::harmony::HarmonyConfig::vllm(),
        )),
        (Some(name), Some(_)) => match kvtemplate::mistral::MistralRenderer::from_catalog(name) {
            Some(r) => Ok(kvtemplate::ChatRenderer::Mistral(r)),
            None => Err(Error::Config(format!(
                "{}: chat renderer {name} is not one kvtemplate has for a checkpoint layout",
                contract.release_id()
            ))),
        },
        (Some(name), None) => Err(Error::Config(format!(
            "{}: chat renderer {name} is not one kvtemplate has for a model type",
            contract.release_id()
        ))),
    }
}

/// The encoder of a published profile for a contract or release id (the admission check, the
/// C ABI's `kvexact_encoder_new`): the release's chat rules when the id names one release,
/// the engine's reference rules otherwise (the strict path never depends on them).
pub fn encoder_for_id(profile: &LoadedProfile, contract_id: &str) -> Result<Encoder, Error> {
    match crate::contract::by_id(contract_id) {
        Ok(c) => encoder(profile, &c),
        Err(_) => {
            let mut spec = kvtemplate::spec_from_loaded(profile, contract_id)?;
            // No release named: for a model type some release of the engine renders without
            // its Jinja template (or a Mistral checkpoint), which renderer serves chat is
            // unknown.
            let key = profile
                .profile
                .tokenizer_file()
                .checkpoint_key()
                .or(profile.profile.model_type.as_deref());
            if spec.mistral_tokenizer.is_some() {
                spec.renderer = kvtemplate::ChatRenderer::Unknown(format!(
                    "{contract_id}: a Mistral checkpoint ({}) is rendered per engine release: \
                     name the engine release",
                    key.unwrap_or_default()
                ));
            } else if let Some(t) = key {
                let catalog = kvprofile_core::contracts::builtin()
                    .map_err(|e| Error::Config(format!("engine-contract catalog: {e}")))?;
                if catalog.releases.iter().any(|r| {
                    r.engine == spec.engine
                        && r.chat.as_ref().is_some_and(|c| c.renderers.contains_key(t))
                }) {
                    spec.renderer = kvtemplate::ChatRenderer::Unknown(format!(
                        "{contract_id}: model_type {t} is rendered without its Jinja template by \
                         some {} releases: name the engine release",
                        spec.engine
                    ));
                }
            }
            Ok(Encoder::new(spec)?)
        }
    }
}

/// [`encoder_for_id`] lifting `lifts` (plain integers or names for a C caller:
/// [`RefusalSet::from_bits`], [`RefusalSet::from_codes`], [`RefusalSet::parse`]). Lifts need
/// one release whose chat rules are proven: a release id, or a contract id with a single
/// release; a contract id spanning releases, or an id the catalog does not know, refuses any
/// non-empty lift ([`Error::LiftNotAllowed`], or the catalog's error).
pub fn encoder_for_id_with_lifts(
    profile: &LoadedProfile,
    contract_id: &str,
    lifts: RefusalSet,
) -> Result<Encoder, Error> {
    if lifts.is_empty() {
        return encoder_for_id(profile, contract_id);
    }
    let c = crate::contract::by_id(contract_id)?;
    encoder_with_lifts(profile, &c, lifts)
}

/// The block hasher of a rule on an engine release: vLLM with the release's NONE_HASH rule,
/// extra-key form and look-ahead ability, the algorithm (`None`: the contract's default,
/// `sha256_cbor`) and the none-hash seed (`PYTHONHASHSEED` string); SGLang's page chain with
/// the release's id rules; TensorRT-LLM's V1 block key.
pub fn hasher(
    contract: &Contract,
    algo: Option<HashAlgorithm>,
    block_size: usize,
    hash_seed: Option<&str>,
) -> Result<BlockHasher, Error> {
    Ok(match contract.hash() {
        Some(HashContract::Vllm(rules)) => {
            let algo = algo.or(contract.default_algorithm());
            VllmHasher::with_rules(rules, vllm_algo(algo)?, block_size, hash_seed)?.into()
        }
        Some(HashContract::Sglang(rules)) => {
            check_algo(algo, HashAlgorithm::Sha256Sglang)?;
            SglangHasher::new(block_size)?.with_rules(rules).into()
        }
        Some(HashContract::Trtllm(_)) => {
            check_algo(algo, HashAlgorithm::BlockhashTrtllm)?;
            TrtllmHasher::new(block_size)?.into()
        }
        None => {
            return Err(Error::Config(format!(
                "{} has no KV plane",
                contract.release_id()
            )))
        }
    })
}

/// kvhash's algorithm for a catalog name (vLLM only).
pub fn vllm_algo(algo: Option<HashAlgorithm>) -> Result<HashAlgo, Error> {
    Ok(match algo {
        None | Some(HashAlgorithm::Sha256Cbor) => HashAlgo::Sha256Cbor,
        Some(HashAlgorithm::XxhashCbor) => HashAlgo::XxhashCbor,
        Some(HashAlgorithm::Sha256) => HashAlgo::Sha256,
        Some(HashAlgorithm::Xxhash) => HashAlgo::Xxhash,
        Some(other) => {
            return Err(Error::Config(format!(
                "{} is not a vLLM algorithm",
                other.as_str()
            )))
        }
    })
}

fn check_algo(algo: Option<HashAlgorithm>, only: HashAlgorithm) -> Result<(), Error> {
    match algo {
        None => Ok(()),
        Some(a) if a == only => Ok(()),
        Some(a) => Err(Error::Config(format!(
            "{} is not {}'s algorithm",
            a.as_str(),
            only.engine()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::resolve;
    use kvtemplate::Refusal;

    #[test]
    fn hashers_follow_the_release() {
        let v24 = resolve(Engine::Vllm, "0.24.0").unwrap();
        let BlockHasher::Vllm(h) = hasher(&v24, None, 16, Some("0")).unwrap() else {
            panic!("not vLLM")
        };
        assert_eq!(h.rules().extra_keys, kvhash::vllm::ExtraKeyForm::K2);
        // Rule A: an unset seed is random per engine process, so it is refused.
        assert!(matches!(
            hasher(&v24, None, 16, None),
            Err(Error::Hasher(kvhash::Error::UnreproducibleNoneHash { .. }))
        ));
        let v31 = resolve(Engine::Vllm, "0.31.0").unwrap();
        assert!(hasher(&v31, None, 16, None).is_ok());
        assert!(hasher(&v31, Some(HashAlgorithm::Sha256Sglang), 16, Some("0")).is_err());
        let s = resolve(Engine::Sglang, "0.5.23").unwrap();
        let BlockHasher::Sglang(h) = hasher(&s, None, 16, None).unwrap() else {
            panic!("not SGLang")
        };
        assert!(h.rules().wide_pages);
        let t = resolve(Engine::Trtllm, "1.3.0rc29").unwrap();
        assert_eq!(hasher(&t, None, 32, None).unwrap().block_size(), 32);
        let l = crate::contract::by_id("llamacpp-nokv-v1").unwrap();
        assert!(hasher(&l, None, 16, None).is_err());
        assert_eq!(reference_version(Engine::Sglang), Some("0.5.19"));
    }

    #[test]
    fn lifts_follow_the_contract() {
        let all = RefusalSet::parse(
            "tools,template_kwargs,add_generation_prompt,continue_final_message,\
             multi_text_part,trailing_assistant,message_field,null_content",
        )
        .unwrap();
        // cache_salt is liftable where the release's salt handling is catalog data
        // (`deployment.cacheSalt`).
        let salt = RefusalSet::parse("cache_salt").unwrap();
        for (e, v, salted) in [
            (Engine::Vllm, "0.29.0", false),
            (Engine::Vllm, "0.31.0", true),
            (Engine::Vllm, "0.33.0", true),
            (Engine::Sglang, "0.5.19", true),
            (Engine::Sglang, "0.5.20", false),
            // SGLang 0.5.23: non-empty salts keyed (its block-hash vectors' salted case).
            (Engine::Sglang, "0.5.23", true),
        ] {
            let c = resolve(e, v).unwrap();
            let want = if salted { all.union(salt) } else { all };
            assert_eq!(c.liftable(), want, "{e} {v}");
            assert_eq!(c.check_lifts(all).unwrap(), all);
        }
        let cfm = RefusalSet::parse("continue_final_message").unwrap();
        let trt = resolve(Engine::Trtllm, "1.3.0rc29").unwrap();
        assert_eq!(trt.liftable(), all.difference(cfm).union(salt));
        let err = trt.check_lifts(all).unwrap_err();
        assert!(
            matches!(&err, Error::LiftNotAllowed { code: "continue_final_message", release, .. }
                if release == "trtllm-kv-http-v2-r1.3.0rc29"),
            "{err}"
        );
        // No chat rules proven (no vectors of the serving code): nothing is liftable.
        let tools = RefusalSet::parse("tools").unwrap();
        for (e, v) in [
            (Engine::Vllm, "0.32.0"),
            (Engine::Vllm, "0.24.0"),
            (Engine::Sglang, "0.5.21"),
            (Engine::Trtllm, "1.3.0rc24"),
        ] {
            let c = resolve(e, v).unwrap();
            // Only cache_salt, where the release's salt rules are catalog data (0.32.0 is
            // in vLLM 0.31.0's release): it changes the keys, not the prompt.
            assert!(c.liftable().difference(salt).is_empty(), "{e} {v}");
            assert_eq!(c.liftable().contains(Refusal::CacheSalt), v == "0.32.0");
            let err = c.check_lifts(tools).unwrap_err();
            assert_eq!(err.code(), "LIFT_NOT_ALLOWED");
            assert!(
                err.to_string().contains("no chat rules are proven"),
                "{err}"
            );
            assert!(c.check_lifts(RefusalSet::EMPTY).is_ok());
        }
        // Never liftable anywhere: a code no vector exercises.
        let docs = RefusalSet::parse("documents").unwrap();
        let err = resolve(Engine::Vllm, "0.31.0").unwrap().check_lifts(docs);
        assert!(err.unwrap_err().to_string().contains("documents"));
        // By id: a single release with proven rules lifts; a contract spanning releases not.
        let c = crate::contract::by_id("vllm-kv-map-v3-r0.29").unwrap();
        assert_eq!(c.liftable(), all);
        let c = crate::contract::by_id("vllm-kv-map-v3-r0.31").unwrap();
        assert_eq!(
            c.liftable(),
            salt,
            "0.32.0 has no chat vectors; its salt rules are data"
        );
        assert!(crate::contract::by_id("vllm-kv-map-v3")
            .map(|c| c.liftable().is_empty())
            .unwrap_or(true));
    }
}
