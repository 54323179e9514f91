//! Mistral chat as the engines render it: mistral_common's instruct encoding, not a Jinja
//! template (docs/contracts/templates.md §13.5–§13.7).
//!
//! vLLM (`--tokenizer-mode mistral`, what `auto` picks for a checkpoint with `tekken.json`)
//! hands the request to mistral_common, which builds the ids piece by piece: control tokens
//! as ids (`<s>`, `[INST]`, `[/INST]`, `[AVAILABLE_TOOLS]`, `[TOOL_CALLS]`,
//! `[TOOL_RESULTS]`, `</s>`), each text piece tokenized on its own. For tekken v3
//! ([`MistralEncoder`]):
//!
//! * BOS first; each user turn `[INST]…[/INST]`; the system prompt(s) folded into the LAST
//!   user turn (`system + "\n\n" + user`), so a turn's prompt is not a prefix of the next
//!   one's; `[AVAILABLE_TOOLS]<json>[/AVAILABLE_TOOLS]` before the last user turn;
//! * assistant turns as text (trailing spaces cut) or `[TOOL_CALLS]<json>`, then EOS (none for
//!   a `continue_final_message` prefill); tool results `[TOOL_RESULTS]<json>[/TOOL_RESULTS]`;
//! * vLLM's chat route first cuts tool-call ids to their last 9 characters; ids mistral_common
//!   rejects then (not 9 letters/digits) are refused; its `/tokenize` route does not cut them
//!   and refuses any assistant `tool_calls` ([`MistralPath::VllmTokenize`]).
//!
//! SGLang 0.5.19 has no mistral tokenizer mode: it takes mistral_common's TEXT form of the
//! same encoding and tokenizes it as ordinary text (control-token strings become ordinary
//! pieces, no BOS id) — [`MistralPath::SglangText`]. Completions on both engines are BOS +
//! the prompt as ordinary text ([`MistralEncoder::engine_completions`]).
//!
//! Which engine release renders a checkpoint this way is catalog data (`chatRenderers` in
//! `kvprofile-core/data/contracts.yaml`), never decided here.

mod pyjson;
mod request;
mod schema;

use std::path::Path;
use std::sync::Arc;

use crate::engine::{ChatRequest, EngineChat};
use crate::limits::{InputLimits, Limit, LimitHit};
use crate::Error;
use request::Norm;

/// The catalog key (`chat.renderers`) of a checkpoint whose tokenizer is `tekken.json` alone
/// (no `tokenizer.json`): what vLLM's `tokenizer_mode=auto` serves with its mistral mode and
/// SGLang loads as a bare-tekken checkpoint (mistral-tekken-v1 vectors,
/// `mistral_common.checkpoint_layout`).
pub const TEKKEN_CHECKPOINT: &str = "files:tekken.json";

/// The catalog key of the model directory `dir` when its files, not its `config.json`
/// `model_type`, decide the renderer: [`TEKKEN_CHECKPOINT`] for `tekken.json` without
/// `tokenizer.json`; `None` otherwise.
pub fn checkpoint_key(dir: &Path) -> Option<&'static str> {
    (dir.join("tekken.json").is_file() && !dir.join("tokenizer.json").is_file())
        .then_some(TEKKEN_CHECKPOINT)
}

/// The engine path whose rendering is reproduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MistralPath {
    /// vLLM `/v1/chat/completions` (`OnlineRenderer.render_chat` with its Mistral fix-ups).
    VllmChat,
    /// vLLM `POST /tokenize` with messages (no fix-ups: ids not cut, `tool_calls` refused,
    /// `chat_template_kwargs` ignored).
    VllmTokenize,
    /// SGLang: mistral_common's text form re-encoded as ordinary text.
    SglangText,
}

/// A control token of the v3 instruct encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Bos,
    Eos,
    Inst,
    EndInst,
    Tools,
    EndTools,
    Results,
    EndResults,
    Calls,
}

impl Control {
    const ALL: [Control; 9] = [
        Control::Bos,
        Control::Eos,
        Control::Inst,
        Control::EndInst,
        Control::Tools,
        Control::EndTools,
        Control::Results,
        Control::EndResults,
        Control::Calls,
    ];

    fn name(self) -> &'static str {
        match self {
            Control::Bos => "<s>",
            Control::Eos => "</s>",
            Control::Inst => "[INST]",
            Control::EndInst => "[/INST]",
            Control::Tools => "[AVAILABLE_TOOLS]",
            Control::EndTools => "[/AVAILABLE_TOOLS]",
            Control::Results => "[TOOL_RESULTS]",
            Control::EndResults => "[/TOOL_RESULTS]",
            Control::Calls => "[TOOL_CALLS]",
        }
    }
}

/// One piece of the encoding: a control token or a text tokenized on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Control(Control),
    Text(String),
}

/// The tekken v3 instruct encoder; `Send + Sync`, share it with `Arc`.
pub struct MistralEncoder {
    tok: Arc<kvtoken::Tekkenizer>,
    /// Ids of [`Control::ALL`], in that order.
    controls: [u32; 9],
    limits: InputLimits,
}

impl std::fmt::Debug for MistralEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MistralEncoder")
            .field("tokenizer", &self.tok)
            .finish_non_exhaustive()
    }
}

impl MistralEncoder {
    /// Builds the encoder from the bytes of a tekken `tekken.json` of version `v3` (the
    /// only instruct version with vectors); any other version, or a file without the v3
    /// control tokens, fails with [`Error::TokenizerLoad`].
    pub fn from_tekken_json(bytes: &[u8]) -> Result<MistralEncoder, Error> {
        let tok = kvtoken::Tekkenizer::from_bytes(bytes)
            .map_err(|e| Error::TokenizerLoad(e.to_string()))?;
        Self::from_tekkenizer(Arc::new(tok))
    }

    /// Builds the encoder from a model directory's `tekken.json`.
    pub fn from_model_dir(dir: &Path) -> Result<MistralEncoder, Error> {
        let path = dir.join("tekken.json");
        let tok = kvtoken::Tekkenizer::from_file(&path)
            .map_err(|e| Error::TokenizerLoad(format!("{}: {e}", path.display())))?;
        Self::from_tekkenizer(Arc::new(tok))
    }

    /// Builds the encoder over a loaded tekken tokenizer (version `v3`).
    pub fn from_tekkenizer(tok: Arc<kvtoken::Tekkenizer>) -> Result<MistralEncoder, Error> {
        if tok.version() != Some("v3") {
            return Err(Error::TokenizerLoad(format!(
                "tekken version {:?}: only v3 has a mistral instruct encoding here",
                tok.version()
            )));
        }
        let mut controls = [0u32; 9];
        for (slot, c) in controls.iter_mut().zip(Control::ALL) {
            *slot = tok.special_id(c.name()).ok_or_else(|| {
                Error::TokenizerLoad(format!("no control token {} in tekken.json", c.name()))
            })?;
        }
        Ok(MistralEncoder {
            tok,
            controls,
            limits: InputLimits::default(),
        })
    }

    /// This encoder with the work bounds `limits`.
    #[must_use]
    pub fn with_limits(mut self, limits: InputLimits) -> MistralEncoder {
        self.limits = limits;
        self
    }

    /// The tekken tokenizer.
    pub fn tokenizer(&self) -> &kvtoken::Tekkenizer {
        &self.tok
    }

    fn control_id(&self, c: Control) -> u32 {
        let i = Control::ALL.iter().position(|a| *a == c).unwrap_or(0);
        self.controls.get(i).copied().unwrap_or(0)
    }

    /// What the engine path `path` renders and tokenizes for a raw OpenAI chat body:
    /// `rendered` is mistral_common's text form. A request the engine refuses fails with
    /// [`Error::EngineRequest`]; a request shape no vector covers with
    /// [`Error::Unsupported`]; a body, message count or rendered text over a bound with
    /// [`Error::InputTooLarge`] (checked before tokenizing).
    pub fn engine_chat(&self, path: MistralPath, body: &[u8]) -> Result<EngineChat, Error> {
        if let Some(hit) = LimitHit::check(Limit::BodyBytes, &self.limits, body.len()) {
            return Err(Error::InputTooLarge(hit));
        }
        let req = ChatRequest::parse(body).map_err(Error::Request)?;
        let n = req.messages().map_err(Error::EngineRequest)?.len();
        if let Some(hit) = LimitHit::check(Limit::Messages, &self.limits, n) {
            return Err(Error::InputTooLarge(hit));
        }
        let request = request::request(&req, path)?;
        let pieces = self.pieces(&request)?;
        let rendered: String = pieces
            .iter()
            .map(|p| match p {
                Piece::Control(c) => c.name(),
                Piece::Text(t) => t.as_str(),
            })
            .collect();
        let prefix_len = request.sglang_prefix.as_ref().map_or(0, String::len);
        if let Some(hit) = LimitHit::check(
            Limit::RenderedBytes,
            &self.limits,
            rendered.len() + prefix_len,
        ) {
            return Err(Error::InputTooLarge(hit));
        }
        let encode = |text: &str, out: &mut Vec<u32>| {
            self.tok
                .encode_into(text, out)
                .map_err(|e| Error::Tokenize(e.to_string()))
        };
        let mut ids = Vec::with_capacity(rendered.len() / 3 + 8);
        match path {
            MistralPath::VllmChat | MistralPath::VllmTokenize => {
                for p in &pieces {
                    match p {
                        Piece::Control(c) => ids.push(self.control_id(*c)),
                        Piece::Text(t) => encode(t, &mut ids)?,
                    }
                }
            }
            MistralPath::SglangText => {
                encode(&rendered, &mut ids)?;
                if let Some(prefix) = &request.sglang_prefix {
                    encode(prefix, &mut ids)?;
                }
            }
        }
        Ok(EngineChat {
            rendered,
            ids: Some(ids),
        })
    }

    /// What vLLM and SGLang cache for a text `/v1/completions` prompt: BOS + the prompt as
    /// ordinary text; an empty prompt is refused, as both engines do; a prompt over
    /// the rendered-bytes bound with [`Error::InputTooLarge`].
    pub fn engine_completions(&self, prompt: &str) -> Result<Vec<u32>, Error> {
        if prompt.is_empty() {
            return Err(Error::EngineRequest("prompt cannot be empty".to_string()));
        }
        if let Some(hit) = LimitHit::check(Limit::RenderedBytes, &self.limits, prompt.len()) {
            return Err(Error::InputTooLarge(hit));
        }
        let mut ids = vec![self.control_id(Control::Bos)];
        self.tok
            .encode_into(prompt, &mut ids)
            .map_err(|e| Error::Tokenize(e.to_string()))?;
        Ok(ids)
    }

    /// mistral_common's v3 `encode_instruct`: the pieces of the normalised request.
    fn pieces(&self, request: &request::Request<'_>) -> Result<Vec<Piece>, Error> {
        let (system_prompt, messages) = request::normalise(&request.messages)?;
        let last_user = messages.iter().rposition(|m| matches!(m, Norm::User(_)));
        let mut out = vec![Piece::Control(Control::Bos)];
        for (i, m) in messages.iter().enumerate() {
            match m {
                Norm::User(content) => {
                    let is_last = Some(i) == last_user;
                    if is_last && !request.tools.is_empty() {
                        out.push(Piece::Control(Control::Tools));
                        out.push(Piece::Text(request::tools_json(&request.tools)));
                        out.push(Piece::Control(Control::EndTools));
                    }
                    out.push(Piece::Control(Control::Inst));
                    match (&system_prompt, is_last) {
                        (Some(sp), true) => out.push(Piece::Text(format!("{sp}\n\n{content}"))),
                        _ => out.push(Piece::Text(content.clone())),
                    }
                    out.push(Piece::Control(Control::EndInst));
                }
                Norm::Assistant {
                    content,
                    calls,
                    prefix,
                } => {
                    match (content.is_empty(), calls.is_empty()) {
                        (true, false) => {
                            out.push(Piece::Control(Control::Calls));
                            out.push(Piece::Text(request::calls_json(calls)?));
                        }
                        (false, true) => {
                            out.push(Piece::Text(content.trim_end_matches(' ').to_string()))
                        }
                        (false, false) => {
                            return Err(Error::EngineRequest(
                                "ValueError: Cannot have tool calls and content defined in the \
                                 same assistant message"
                                    .to_string(),
                            ))
                        }
                        (true, true) => {
                            return Err(Error::EngineRequest(
                                "TokenizerException: Invalid assistant message".to_string(),
                            ))
                        }
                    }
                    if !prefix {
                        out.push(Piece::Control(Control::Eos));
                    }
                }
                Norm::Tool { id, content } => {
                    out.push(Piece::Control(Control::Results));
                    out.push(Piece::Text(request::result_json(id, content)?));
                    out.push(Piece::Control(Control::EndResults));
                }
            }
        }
        Ok(out)
    }
}
