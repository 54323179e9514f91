//! The gateway's chat and completions calls on a Mistral encoder (docs/contracts/templates.md
//! §13.13): the §9.2 scan of the top-level keys, exactly as for a Jinja encoder, then
//! mistral_common's encoding on the engine's path ([`crate::mistral`]); a request the engine
//! answers with HTTP 400 caches nothing ([`Refusal::TemplateRaised`]). Completions: BOS + the
//! prompt as ordinary text, on both engines.
//!
//! It sits under `strict` (the gateway's chat call), above [`crate::mistral`] (the renderer)
//! and the encoder that holds it, so no module names itself through the others.

use super::{too_large, Encoded};
use crate::limits::{Limit, LimitHit};
use crate::mistral::MistralRoute;
use crate::refusal::{Outcome, Refusal};
use crate::{Encoder, Error, ScratchBuf};

impl Encoder {
    /// [`Encoder::encode_chat_capped`] on a Mistral encoder: the first `cap` ids in `scratch`
    /// (the pieces past them not encoded), mistral_common's text form beside them.
    pub(crate) fn mistral_chat(
        &self,
        m: &MistralRoute,
        body: &[u8],
        cap: usize,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        let (enc, renderer) = m.proven(self.chat_unknown.as_deref())?;
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
        let (enc, _) = m.proven(self.chat_unknown.as_deref())?;
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
}
