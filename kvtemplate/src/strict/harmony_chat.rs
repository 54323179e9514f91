//! The gateway's chat call on a harmony encoder (docs/contracts/templates.md §13.11): the
//! §9.2 scan of the top-level keys, then vLLM's harmony render straight to ids.
//!
//! What the scan keeps: the codes that change more than the prompt text (`cache_salt`,
//! `prompt_embeds`, `prompt_token_ids`, …) and the shapes the gateway's strict path refuses
//! unless the release lifts them (`tools`, `add_generation_prompt`, `continue_final_message`,
//! `chat_template_kwargs`), exactly as for a Jinja encoder. What it drops: `reasoning_effort`,
//! harmony's own parameter (the system message carries it; vLLM validates it, and its refusal
//! is the engine's). The message-level scan is the Jinja template's business; the harmony
//! conversation builder refuses every message shape its vectors do not prove
//! ([`crate::Error::Unsupported`]).
//!
//! It sits under `strict` (the gateway's chat call), above [`crate::harmony`] (the renderer)
//! and the encoder that holds it, so no module names itself through the others.

use super::{too_large, Encoded};
use crate::harmony::HarmonyEncoder;
use crate::refusal::{Outcome, Refusal};
use crate::{Encoder, Error, ScratchBuf};

impl Encoder {
    /// [`Encoder::encode_chat_capped`] on a harmony encoder: the first `cap` ids in
    /// `scratch` (the pieces past them not encoded), the rendered text beside them.
    pub(crate) fn harmony_chat(
        &self,
        h: &HarmonyEncoder,
        body: &[u8],
        now_unix_ms: i64,
        cap: usize,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        if let Outcome::Refused(r) = self.scan_top_only(body, scratch, true)? {
            return Ok(Outcome::Refused(r));
        }
        let (chat, truncated) = match h.engine_chat_capped(body, Some(now_unix_ms), cap) {
            Ok(c) => c,
            // vLLM answers HTTP 400: no prompt is cached.
            Err(Error::EngineRequest(_) | Error::Request(_)) => {
                return Ok(Outcome::Refused(Refusal::TemplateRaised))
            }
            Err(Error::InputTooLarge(hit)) => return Ok(too_large(scratch, hit)),
            Err(e) => return Err(e),
        };
        if chat.rendered.contains('\0') {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        let ids = chat
            .ids
            .ok_or_else(|| Error::Tokenize("harmony produced no ids".to_string()))?;
        scratch.ids.extend_from_slice(&ids);
        scratch.rendered = chat.rendered;
        Ok(Outcome::Done(Encoded {
            written: scratch.ids.len(),
            truncated,
        }))
    }
}
