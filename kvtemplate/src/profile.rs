//! The adapter from kvprofile-core's published profile to an [`EncoderSpec`], and the
//! publish-time [`ArtifactValidator`] that compiles templates and loads tokenizers exactly as
//! the encoders will.

use crate::encoder::{Encoder, EncoderSpec};
use crate::engine::Engine;
use crate::error::Error;
use crate::loader::AddedTokensRule;
use crate::mistral::MistralTokenizerFile;
use crate::template_facts::ContentFormat;
use kvprofile_core::profile::TemplateContentFormat;
use kvprofile_core::TokenizerFile;
use kvprofile_core::{ArtifactValidator, LoadedProfile, Prepared, Profile, VerifiedArtifacts};
use kvtoken::FastEncoder;
use std::sync::Arc;

/// Builds the spec for `profile` on the engine contract `contract_id` — a contract id
/// (`sglang-kv-rank-v1`), an engine-release id (`vllm-kv-map-v3-r0.31`) or a bare engine name
/// (`vllm`, the publish-time validator's) — from the verified artifact bytes. The engine is the
/// catalog's ([`kvprofile_core::ContractCatalog::engine_of`]); any other id is refused.
pub fn spec_from_profile(
    profile: &Profile,
    artifacts: &VerifiedArtifacts,
    contract_id: &str,
) -> Result<EncoderSpec, Error> {
    spec_with(profile, artifacts, contract_id, None)
}

/// [`spec_from_profile`], with the tokenizer already parsed when `parsed` is given (then the
/// `tokenizer.json` bytes are not copied into the spec).
fn spec_with(
    profile: &Profile,
    artifacts: &VerifiedArtifacts,
    contract_id: &str,
    parsed: Option<Arc<FastEncoder>>,
) -> Result<EncoderSpec, Error> {
    // The engine and the quirks come from the contract catalog: a release id takes the
    // quirks keyed by itself, else by the contract it refines; a bare engine name (the
    // publish-time validator's) has none of its own.
    let catalog = kvprofile_core::contracts::builtin()
        .map_err(|e| Error::Spec(format!("engine-contract catalog: {e}")))?;
    let rule = added_tokens_rule_of(catalog, contract_id)?;
    let (engine, quirks) = if let Some(r) = catalog.release(contract_id) {
        (r.engine, profile.quirks_for_release(r))
    } else if let Some(c) = catalog.profile(contract_id) {
        (c.engine, profile.quirks(contract_id))
    } else if let Some(e) = Engine::from_name(contract_id) {
        (e, profile.quirks(contract_id))
    } else {
        return Err(Error::Spec(format!(
            "unknown engine contract {contract_id:?} (not a contract or release id of the \
             engine-contract catalog, nor an engine name)"
        )));
    };
    if !engine.has_kv_plane() {
        return Err(Error::NoChatPath(engine));
    }
    let mut spec = EncoderSpec::new(engine);
    // A Mistral checkpoint (`tokenizerFile` tekken.json / tokenizer.model.v7): its file goes
    // to mistral_common's encoder; no template, no tokenizer.json, no added-token doubt.
    if let Some(file) = mistral_file_of(profile, artifacts) {
        spec.mistral_tokenizer = Some(file);
        spec.model_type = profile.model_type.clone();
        spec.completions_bos = quirks.completions_bos;
        return Ok(spec);
    }
    // The engine's loader may take its added tokens from the pinned tokenizer_config.json
    // (transformers 5): then the tokenizer is the one it effectively builds.
    let effective = match &artifacts.tokenizer_config {
        Some(cfg) => crate::loader::effective_tokenizer_json(
            &artifacts.tokenizer.bytes,
            Some(&cfg.bytes),
            rule,
        )?,
        None => None,
    };
    // No pinned config under a loader that reads one: which added tokens it keeps is not
    // known; texts holding one in doubt are refused (`ambiguous_added_token`).
    spec.refuse_loader_ambiguity =
        artifacts.tokenizer_config.is_none() && rule != AddedTokensRule::TokenizerJson;
    // A model some engine release renders without Jinja (catalog `chat.renderers`): that
    // renderer builds its own encoder from the tokenizer bytes, so they go into the spec.
    spec.model_type = profile.model_type.clone();
    let non_jinja = profile.model_type.as_deref().is_some_and(|t| {
        catalog
            .releases
            .iter()
            .any(|r| r.chat.as_ref().is_some_and(|c| c.renderers.contains_key(t)))
    });
    match (effective, parsed) {
        (Some(bytes), _) => spec.tokenizer_json = Some(bytes),
        (None, Some(p)) => {
            spec.parsed_tokenizer = Some(p);
            if non_jinja {
                spec.tokenizer_json = Some(artifacts.tokenizer.bytes.to_vec());
            }
        }
        (None, None) => spec.tokenizer_json = Some(artifacts.tokenizer.bytes.to_vec()),
    }
    spec.template_source = match &artifacts.template {
        Some(t) => Some(
            t.as_str()
                .ok_or_else(|| {
                    Error::Spec(format!(
                        "{}: template is not UTF-8",
                        t.receipt.relative_path
                    ))
                })?
                .to_string(),
        ),
        None => None,
    };
    if let Some(rp) = &profile.render_policy {
        spec.bos_token = rp.bos_token.clone();
        spec.eos_token = rp.eos_token.clone();
        spec.add_generation_prompt = rp.add_generation_prompt.unwrap_or(true);
        spec.clock_policy = rp.clock_policy;
    }
    spec.content_format = match profile.template_content_format {
        Some(TemplateContentFormat::Openai) => ContentFormat::OpenAi,
        _ => ContentFormat::String,
    };
    spec.completions_bos = quirks.completions_bos;
    Ok(spec)
}

/// The Mistral tokenizer file a profile pins (`tokenizerFile` tekken.json /
/// tokenizer.model.v7), with its verified bytes; `None` for `tokenizer.json`.
fn mistral_file_of(
    profile: &Profile,
    artifacts: &VerifiedArtifacts,
) -> Option<MistralTokenizerFile> {
    let bytes = || artifacts.tokenizer.bytes.to_vec();
    match profile.tokenizer_file() {
        TokenizerFile::TokenizerJson => None,
        TokenizerFile::Tekken => Some(MistralTokenizerFile::Tekken(bytes())),
        TokenizerFile::SpmV7 => Some(MistralTokenizerFile::SpmV7(bytes())),
    }
}

/// The added-tokens rule of the engine release `contract_id` names (its catalog
/// `tokenizer.addedTokens`): for a contract id, the rule all its releases share, else
/// [`AddedTokensRule::Either`]; for a bare engine name, the reference releases' rule
/// ([`AddedTokensRule::TokenizerConfig`], transformers 5).
pub fn added_tokens_rule_of(
    catalog: &kvprofile_core::ContractCatalog,
    contract_id: &str,
) -> Result<AddedTokensRule, Error> {
    let rule_of = |r: &kvprofile_core::Release| -> Result<AddedTokensRule, Error> {
        match &r.tokenizer {
            Some(t) => t.added_tokens.parse(),
            None => Ok(AddedTokensRule::default()),
        }
    };
    if let Some(r) = catalog.release(contract_id) {
        return rule_of(r);
    }
    if catalog.profile(contract_id).is_some() {
        let mut rules = catalog
            .releases
            .iter()
            .filter(|r| r.contract == contract_id)
            .map(rule_of);
        let first = rules.next().transpose()?.unwrap_or_default();
        for r in rules {
            if r? != first {
                return Ok(AddedTokensRule::Either);
            }
        }
        return Ok(first);
    }
    Ok(AddedTokensRule::default())
}

/// Builds the encoder for `profile` × `contract_id`.
pub fn encoder_from_profile(
    profile: &Profile,
    artifacts: &VerifiedArtifacts,
    contract_id: &str,
) -> Result<Encoder, Error> {
    Encoder::new(spec_from_profile(profile, artifacts, contract_id)?)
}

/// Builds the encoder for a published profile × `contract_id`, reusing the tokenizer the
/// registry's [`KvtemplateValidator`] parsed at publish (no second parse of `tokenizer.json`;
/// every encoder of the profile shares it). Falls back to parsing the bytes when the profile
/// was published by another validator or its artifacts were replaced since.
pub fn encoder_from_loaded(profile: &LoadedProfile, contract_id: &str) -> Result<Encoder, Error> {
    Encoder::new(spec_from_loaded(profile, contract_id)?)
}

/// The spec [`encoder_from_loaded`] builds, for a caller that sets more of it (the engine
/// release's [`crate::ChatRules`]) before [`Encoder::new`].
pub fn spec_from_loaded(profile: &LoadedProfile, contract_id: &str) -> Result<EncoderSpec, Error> {
    let parsed = ParsedTokenizer::of(profile).map(|p| Arc::clone(&p.encoder));
    spec_with(&profile.profile, &profile.artifacts, contract_id, parsed)
}

/// What [`KvtemplateValidator`] keeps with a published profile: the parsed tokenizer and the
/// bytes it was parsed from.
#[derive(Debug)]
pub struct ParsedTokenizer {
    /// The parsed tokenizer.
    pub encoder: Arc<FastEncoder>,
    /// The verified `tokenizer.json` bytes it was parsed from (compared by identity).
    pub source: Arc<[u8]>,
}

impl ParsedTokenizer {
    /// The parsed tokenizer kept with `profile`, when it was parsed from the profile's current
    /// tokenizer bytes.
    pub fn of(profile: &LoadedProfile) -> Option<&ParsedTokenizer> {
        profile
            .prepared
            .as_ref()?
            .downcast_ref::<ParsedTokenizer>()
            .filter(|p| Arc::ptr_eq(&p.source, &profile.artifacts.tokenizer.bytes))
    }
}

/// The renderer's publish-time check: the template compiles in the HF-equivalent
/// environment (clock policy agreeing with it both ways), `tokenizer.json` loads, and every
/// contract carrying `completionsBos` is an SGLang contract whose BOS resolves.
#[derive(Debug, Clone, Copy, Default)]
pub struct KvtemplateValidator;

impl ArtifactValidator for KvtemplateValidator {
    fn validate_profile(
        &self,
        profile: &Profile,
        artifacts: &VerifiedArtifacts,
    ) -> Result<(), String> {
        self.prepare_profile(profile, artifacts).map(|_| ())
    }

    /// Validates as [`Self::validate_profile`] and keeps the parsed tokenizer
    /// ([`ParsedTokenizer`]) for [`encoder_from_loaded`].
    fn prepare_profile(
        &self,
        profile: &Profile,
        artifacts: &VerifiedArtifacts,
    ) -> Result<Option<Prepared>, String> {
        // A Mistral checkpoint: its tokenizer file must load as mistral_common's encoder.
        if let Some(file) = mistral_file_of(profile, artifacts) {
            file.encoder().map_err(|e| {
                format!(
                    "{}: {}: {e}",
                    profile.profile_id,
                    profile.tokenizer_file().as_str()
                )
            })?;
            return Ok(None);
        }
        let parsed = crate::tokenize::parse(&artifacts.tokenizer.bytes).map_err(|e| {
            match crate::renderer_hint::mistral_file_remedy(&artifacts.tokenizer.bytes) {
                Some(remedy) => format!("{}: {e}; {remedy}", profile.profile_id),
                None => format!("{}: {e}", profile.profile_id),
            }
        })?;
        let mut contracts: Vec<&str> = profile
            .engine_quirks
            .iter()
            .filter(|(_, q)| q.completions_bos)
            .map(|(id, _)| id.as_str())
            .collect();
        if contracts.is_empty() {
            contracts.push("vllm");
        }
        for contract in contracts {
            let spec = spec_with(profile, artifacts, contract, Some(Arc::clone(&parsed)))
                .map_err(|e| format!("{}: {e}", profile.profile_id))?;
            Encoder::new(spec).map_err(|e| format!("{} ({contract}): {e}", profile.profile_id))?;
        }
        Ok(Some(Arc::new(ParsedTokenizer {
            encoder: parsed,
            source: Arc::clone(&artifacts.tokenizer.bytes),
        })))
    }

    fn name(&self) -> &str {
        "kvtemplate"
    }
}
