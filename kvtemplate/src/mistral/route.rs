//! A Mistral checkpoint on the gateway's path (docs/contracts/templates.md §13.13): the
//! profile pins `tekken.json` or `tokenizer.model.v7` (`tokenizerFile`), the engine release's
//! catalog entry names the mistral_common renderer, and the encoder's chat and completions
//! calls take [`MistralEncoder`] instead of a template and `tokenizer.json`.
//!
//! This module holds the route (tokenizer file, renderer, the checks that they fit); the
//! gateway's chat and completions calls on it are in `strict/mistral_chat.rs`. The request
//! walker refuses every message shape its vectors do not prove ([`crate::Error::Unsupported`]).

use super::{InstructVersion, MistralEncoder, MistralPath};
use crate::engine::Engine;
use crate::{EngineChat, Error};

/// Which mistral_common renderer an engine release uses for a checkpoint (catalog
/// `chat.renderers` values `mistral-tekken-v3`, `mistral-spm-v7`, `mistral-text-tekken-v3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MistralRenderer {
    /// The engine path reproduced.
    pub path: MistralPath,
    /// The instruct version (tekken v3 or SentencePiece v7).
    pub version: InstructVersion,
}

impl MistralRenderer {
    /// The renderer a catalog name stands for; `None` for a name that is not a mistral one.
    pub fn from_catalog(name: &str) -> Option<MistralRenderer> {
        let (path, version) = match name {
            "mistral-tekken-v3" => (MistralPath::VllmChat, InstructVersion::V3),
            "mistral-spm-v7" => (MistralPath::VllmChat, InstructVersion::V7),
            "mistral-text-tekken-v3" => (MistralPath::SglangText, InstructVersion::V3),
            _ => return None,
        };
        Some(MistralRenderer { path, version })
    }

    /// The catalog name of this renderer (`chat.renderers`, `chat.probeRoutes` keys).
    pub fn catalog_name(self) -> &'static str {
        match (self.path, self.version) {
            (MistralPath::SglangText, _) => "mistral-text-tekken-v3",
            (_, InstructVersion::V3) => "mistral-tekken-v3",
            (_, InstructVersion::V7) => "mistral-spm-v7",
        }
    }

    /// The engine whose serving path this renderer reproduces.
    pub fn engine(self) -> Engine {
        match self.path {
            MistralPath::VllmChat | MistralPath::VllmTokenize => Engine::Vllm,
            MistralPath::SglangText => Engine::Sglang,
        }
    }
}

/// The bytes of a Mistral tokenizer file (the profile's `tokenizerFile` and the artifact it
/// pins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MistralTokenizerFile {
    /// `tekken.json`.
    Tekken(Vec<u8>),
    /// `tokenizer.model.v7`.
    SpmV7(Vec<u8>),
}

impl MistralTokenizerFile {
    /// The catalog's checkpoint-layout key of this file (`chat.renderers`):
    /// [`super::TEKKEN_CHECKPOINT`] or [`super::SPM_V7_CHECKPOINT`].
    pub fn checkpoint_key(&self) -> &'static str {
        match self {
            MistralTokenizerFile::Tekken(_) => super::TEKKEN_CHECKPOINT,
            MistralTokenizerFile::SpmV7(_) => super::SPM_V7_CHECKPOINT,
        }
    }

    /// Loads the tokenizer and its instruct encoder (tekken v3 or SentencePiece v7).
    pub fn encoder(&self) -> Result<MistralEncoder, Error> {
        match self {
            MistralTokenizerFile::Tekken(b) => MistralEncoder::from_tekken_json(b),
            MistralTokenizerFile::SpmV7(b) => {
                let m = kvtoken::SpmModel::from_bytes(b)
                    .map_err(|e| Error::TokenizerLoad(format!("tokenizer.model.v7: {e}")))?;
                MistralEncoder::from_spm_v7(std::sync::Arc::new(m))
            }
        }
    }
}

/// An encoder's Mistral side: the instruct encoder and, where the release's renderer is
/// proven, the path it reproduces (`None`: chat and completions refused with the reason in
/// the encoder's unknown renderer).
#[derive(Debug)]
pub(crate) struct MistralRoute {
    pub(crate) encoder: MistralEncoder,
    pub(crate) renderer: Option<MistralRenderer>,
}

impl MistralRoute {
    /// Builds the route for `file` on `engine` under `renderer` (`None`: not proven),
    /// checking that the renderer fits the file and the engine.
    pub(crate) fn new(
        file: &MistralTokenizerFile,
        renderer: Option<MistralRenderer>,
        engine: Engine,
        limits: crate::InputLimits,
    ) -> Result<MistralRoute, Error> {
        let encoder = file.encoder()?.with_limits(limits);
        if let Some(r) = renderer {
            if r.version != encoder.version() {
                return Err(Error::Spec(format!(
                    "renderer {} does not fit a {:?} tokenizer",
                    r.catalog_name(),
                    encoder.version()
                )));
            }
            if r.engine() != engine {
                return Err(Error::Spec(format!(
                    "renderer {} is {}'s, not {}'s",
                    r.catalog_name(),
                    r.engine().as_str(),
                    engine.as_str()
                )));
            }
        }
        Ok(MistralRoute { encoder, renderer })
    }
}

impl MistralRoute {
    /// The proven renderer of this route, or the reason chat is unknown (`chat_unknown`: the
    /// encoder's, when the release names a renderer kvexact does not know).
    pub(crate) fn proven(
        &self,
        chat_unknown: Option<&str>,
    ) -> Result<(&MistralEncoder, MistralRenderer), Error> {
        match self.renderer {
            Some(r) => Ok((&self.encoder, r)),
            None => Err(Error::Unsupported(chat_unknown.map_or_else(
                || "no vectors prove this release's Mistral renderer".to_string(),
                str::to_string,
            ))),
        }
    }

    /// [`crate::Encoder::engine_chat`] on a Mistral encoder.
    pub(crate) fn engine_chat(
        &self,
        chat_unknown: Option<&str>,
        body: &[u8],
    ) -> Result<EngineChat, Error> {
        let (enc, renderer) = self.proven(chat_unknown)?;
        enc.engine_chat(renderer.path, body)
    }

    /// [`crate::Encoder::engine_completions`] on a Mistral encoder.
    pub(crate) fn engine_completions(
        &self,
        chat_unknown: Option<&str>,
        prompt: &str,
    ) -> Result<Vec<u32>, Error> {
        let (enc, _) = self.proven(chat_unknown)?;
        enc.engine_completions(prompt)
    }
}
