//! A Mistral checkpoint on the gateway's path (docs/contracts/templates.md §13.13): the
//! profile pins `tekken.json` or `tokenizer.model.v7` (`tokenizerFile`), the engine release's
//! catalog entry names the mistral_common renderer, and the encoder's chat and completions
//! calls take [`MistralEncoder`] instead of a template and `tokenizer.json`.
//!
//! Chat: the §9.2 scan of the top-level keys (the codes that change more than the prompt, and
//! the shapes the strict path refuses unless the release lifts them), exactly as for a Jinja
//! encoder; then mistral_common's encoding on the engine's path. The request walker refuses
//! every message shape its vectors do not prove ([`crate::Error::Unsupported`]); a request the
//! engine answers with HTTP 400 caches nothing ([`Refusal::TemplateRaised`]).
//! Completions: BOS + the prompt as ordinary text, on both engines.

use super::{InstructVersion, MistralEncoder, MistralPath};
use crate::engine::Engine;
use crate::limits::{Limit, LimitHit};
use crate::refusal::{Outcome, Refusal};
use crate::strict::{too_large, Encoded};
use crate::{Encoder, Error, ScratchBuf};

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

impl Encoder {
    /// The proven Mistral renderer of this encoder, or the reason chat is unknown.
    fn mistral_proven<'m>(
        &self,
        m: &'m MistralRoute,
    ) -> Result<(&'m MistralEncoder, MistralRenderer), Error> {
        match m.renderer {
            Some(r) => Ok((&m.encoder, r)),
            None => Err(Error::Unsupported(
                self.chat_unknown.clone().unwrap_or_else(|| {
                    "no vectors prove this release's Mistral renderer".to_string()
                }),
            )),
        }
    }

    /// [`Encoder::encode_chat_capped`] on a Mistral encoder: the first `cap` ids in `scratch`
    /// (the pieces past them not encoded), mistral_common's text form beside them.
    pub(crate) fn mistral_chat(
        &self,
        m: &MistralRoute,
        body: &[u8],
        cap: usize,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        let (enc, renderer) = self.mistral_proven(m)?;
        if let Outcome::Refused(r) = self.scan_top_only(body, scratch, false)? {
            return Ok(Outcome::Refused(r));
        }
        let capped = match enc.engine_chat_capped(renderer.path, body, cap, true) {
            Ok(c) => c,
            // The engine answers HTTP 400: no prompt is cached.
            Err(Error::EngineRequest(_) | Error::Request(_)) => {
                return Ok(Outcome::Refused(Refusal::TemplateRaised))
            }
            Err(Error::InputTooLarge(hit)) => return Ok(too_large(scratch, hit)),
            Err(e) => return Err(e),
        };
        let chat = capped.chat;
        if capped.nul {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        scratch.ids = chat
            .ids
            .ok_or_else(|| Error::Tokenize("mistral_common produced no ids".to_string()))?;
        scratch.rendered = chat.rendered;
        Ok(Outcome::Done(Encoded {
            written: scratch.ids.len(),
            truncated: capped.more,
        }))
    }

    /// [`Encoder::encode_completions_capped`] on a Mistral encoder: BOS + the prompt as
    /// ordinary text, the first `cap` ids in `scratch`.
    pub(crate) fn mistral_completions(
        &self,
        m: &MistralRoute,
        text: &str,
        cap: usize,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        let (enc, _) = self.mistral_proven(m)?;
        scratch.limit = None;
        scratch.ids.clear();
        if text.is_empty() {
            return Err(Error::Request("empty prompt".to_string()));
        }
        if let Some(hit) = LimitHit::check(Limit::RenderedBytes, &self.limits, text.len()) {
            return Ok(too_large(scratch, hit));
        }
        if text.contains('\0') {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        let mut ids = enc.engine_completions(text)?;
        let truncated = ids.len() > cap;
        ids.truncate(cap);
        scratch.ids = ids;
        Ok(Outcome::Done(Encoded {
            written: scratch.ids.len(),
            truncated,
        }))
    }

    /// [`Encoder::engine_chat`] on a Mistral encoder.
    pub(crate) fn mistral_engine_chat(
        &self,
        m: &MistralRoute,
        body: &[u8],
    ) -> Result<crate::EngineChat, Error> {
        let (enc, renderer) = self.mistral_proven(m)?;
        enc.engine_chat(renderer.path, body)
    }

    /// [`Encoder::engine_completions`] on a Mistral encoder.
    pub(crate) fn mistral_engine_completions(
        &self,
        m: &MistralRoute,
        prompt: &str,
    ) -> Result<Vec<u32>, Error> {
        let (enc, _) = self.mistral_proven(m)?;
        enc.engine_completions(prompt)
    }
}
