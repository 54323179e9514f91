//! The publish-time artifact check hook: kvprofile-core stays below kvtemplate, so template
//! compilation and tokenizer loading are done by a validator passed into the load.

use std::any::Any;
use std::sync::Arc;

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::artifacts::VerifiedArtifacts;
use crate::profile::{Profile, TokenizerFile};

/// What a validator built while checking a profile, kept with the published profile
/// ([`crate::LoadedProfile::prepared`]); its owner downcasts it back.
pub type Prepared = Arc<dyn Any + Send + Sync>;

/// Checks a profile's verified artifacts at publish (docs/contracts/registry.md §2): every template must compile
/// with the environment the renderer uses and every tokenizer must load. An `Err` refuses the
/// whole generation with [`crate::Error::ArtifactRejected`].
pub trait ArtifactValidator: Send + Sync {
    /// Validates one profile; the message of an `Err` is shown to the operator.
    fn validate_profile(
        &self,
        profile: &Profile,
        artifacts: &VerifiedArtifacts,
    ) -> Result<(), String>;

    /// Validates the profile and returns what the check built that is worth keeping with the
    /// published profile (e.g. the parsed tokenizer), so that everything built from the
    /// profile later reuses it instead of building it again. The default keeps nothing.
    fn prepare_profile(
        &self,
        profile: &Profile,
        artifacts: &VerifiedArtifacts,
    ) -> Result<Option<Prepared>, String> {
        self.validate_profile(profile, artifacts).map(|()| None)
    }

    /// A short name for logs and the CLI (e.g. `structural`, `kvtemplate`).
    fn name(&self) -> &str {
        "unnamed"
    }
}

/// A validator that checks only structure: `tokenizer.json` is a JSON object with a `model`
/// key (`tekken.json`: with `config` and `vocab`; `tokenizer.model.v7`: not empty), and the
/// template (if any) is non-empty UTF-8. It does **not** compile templates or
/// build tokenizers; use the renderer's validator (kvtemplate) for that.
#[derive(Debug, Clone, Copy, Default)]
pub struct StructuralValidator;

#[derive(Deserialize)]
struct TokenizerShape {
    #[allow(dead_code)]
    model: IgnoredAny,
}

/// `tekken.json`'s shape: an object with `config` and `vocab`.
#[derive(Deserialize)]
struct TekkenShape {
    #[allow(dead_code)]
    config: IgnoredAny,
    #[allow(dead_code)]
    vocab: IgnoredAny,
}

impl ArtifactValidator for StructuralValidator {
    fn validate_profile(
        &self,
        profile: &Profile,
        artifacts: &VerifiedArtifacts,
    ) -> Result<(), String> {
        let bytes = &artifacts.tokenizer.bytes;
        let path = &artifacts.tokenizer.receipt.relative_path;
        match profile.tokenizer_file() {
            TokenizerFile::TokenizerJson => serde_json::from_slice::<TokenizerShape>(bytes)
                .map(|_| ())
                .map_err(|e| format!("{path}: not a tokenizer.json object: {e}"))?,
            TokenizerFile::Tekken => serde_json::from_slice::<TekkenShape>(bytes)
                .map(|_| ())
                .map_err(|e| format!("{path}: not a tekken.json object: {e}"))?,
            // A SentencePiece model is a protobuf: kvtemplate's validator parses it.
            TokenizerFile::SpmV7 if bytes.is_empty() => {
                return Err(format!("{path}: empty tokenizer.model.v7"))
            }
            TokenizerFile::SpmV7 => {}
        }
        if let Some(t) = &artifacts.template {
            match t.as_str() {
                Some(s) if !s.is_empty() => {}
                Some(_) => return Err(format!("{}: empty template", t.receipt.relative_path)),
                None => {
                    return Err(format!(
                        "{}: template is not UTF-8",
                        t.receipt.relative_path
                    ))
                }
            }
        }
        Ok(())
    }

    fn name(&self) -> &str {
        "structural"
    }
}
