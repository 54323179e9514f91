//! The adapter from kvprofile-core's published profile to an [`EncoderSpec`], and the
//! publish-time [`ArtifactValidator`] that compiles templates and loads tokenizers exactly as
//! the encoders will.

use crate::encoder::{Encoder, EncoderSpec};
use crate::engine::Engine;
use crate::env::ClockPolicy;
use crate::error::Error;
use crate::template_facts::ContentFormat;
use kvprofile_core::profile::TemplateContentFormat;
use kvprofile_core::{ArtifactValidator, Profile, VerifiedArtifacts};

/// Builds the spec for `profile` on the engine contract `contract_id` (e.g.
/// `sglang-kv-rank-v1`; its first `-` segment names the engine) from the verified artifact bytes.
pub fn spec_from_profile(
    profile: &Profile,
    artifacts: &VerifiedArtifacts,
    contract_id: &str,
) -> Result<EncoderSpec, Error> {
    let engine = Engine::parse(contract_id)
        .ok_or_else(|| Error::Spec(format!("unknown engine contract {contract_id:?}")))?;
    let mut spec = EncoderSpec::new(engine);
    spec.tokenizer_json = Some(artifacts.tokenizer.bytes.to_vec());
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
        spec.clock_policy = match rp.clock_policy {
            Some(kvprofile_core::ClockPolicy::UtcDate) => ClockPolicy::UtcDate,
            None => ClockPolicy::None,
        };
    }
    spec.content_format = match profile.template_content_format {
        Some(TemplateContentFormat::Openai) => ContentFormat::OpenAi,
        _ => ContentFormat::String,
    };
    spec.completions_bos = profile.quirks(contract_id).completions_bos;
    Ok(spec)
}

/// Builds the encoder for `profile` × `contract_id`.
pub fn encoder_from_profile(
    profile: &Profile,
    artifacts: &VerifiedArtifacts,
    contract_id: &str,
) -> Result<Encoder, Error> {
    Encoder::new(spec_from_profile(profile, artifacts, contract_id)?)
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
            let spec = spec_from_profile(profile, artifacts, contract)
                .map_err(|e| format!("{}: {e}", profile.profile_id))?;
            Encoder::new(spec).map_err(|e| format!("{} ({contract}): {e}", profile.profile_id))?;
        }
        Ok(())
    }

    fn name(&self) -> &str {
        "kvtemplate"
    }
}
