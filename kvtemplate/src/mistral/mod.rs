//! Mistral chat as the engines render it: mistral_common's instruct encoding, not a Jinja
//! template (docs/contracts/templates.md §13.6–§13.10).
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
//! SentencePiece v7 (`tokenizer.model.v7`, [`InstructVersion::V7`]) differs: system messages
//! stay in place as `[SYSTEM_PROMPT]…[/SYSTEM_PROMPT]`, an assistant message may carry text
//! and tool calls, a tool result is `[TOOL_RESULTS]` id `[TOOL_CONTENT]` content
//! `[/TOOL_RESULTS]`, and every text piece gets SentencePiece's dummy prefix
//! (docs/contracts/templates.md §13.10).
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
mod route;
mod schema;

pub(crate) use route::MistralRoute;
pub use route::{MistralRenderer, MistralTokenizerFile};

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
/// `tokenizer.json`, [`SPM_V7_CHECKPOINT`] for `tokenizer.model.v7` alone; `None` otherwise.
pub fn checkpoint_key(dir: &Path) -> Option<&'static str> {
    if dir.join("tokenizer.json").is_file() {
        return None;
    }
    if dir.join("tekken.json").is_file() {
        Some(TEKKEN_CHECKPOINT)
    } else if dir.join(SPM_V7_FILE).is_file() {
        Some(SPM_V7_CHECKPOINT)
    } else {
        None
    }
}

/// The SentencePiece v7 tokenizer file of a Mistral checkpoint.
pub const SPM_V7_FILE: &str = "tokenizer.model.v7";

/// The catalog key of a checkpoint whose tokenizer is `tokenizer.model.v7` alone (no
/// `tokenizer.json`, no `tekken.json`): what vLLM's `tokenizer_mode=auto` serves with its
/// mistral mode (mistral-spm-v7-v1 vectors, `mistral_common.checkpoint_layout`).
pub const SPM_V7_CHECKPOINT: &str = "files:tokenizer.model.v7";

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

/// The instruct encoding's version (mistral_common's `InstructTokenizerV3` / `V7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstructVersion {
    /// Tekken v3: the system prompt folded into the last user turn.
    V3,
    /// SentencePiece v7: `[SYSTEM_PROMPT]` in place, tool results with their id.
    V7,
}

/// The tokenizer of a Mistral checkpoint.
#[derive(Debug, Clone)]
enum Tok {
    Tekken(Arc<kvtoken::Tekkenizer>),
    Spm(Arc<kvtoken::SpmModel>),
}

impl Tok {
    fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), Error> {
        match self {
            Tok::Tekken(t) => t
                .encode_into(text, out)
                .map_err(|e| Error::Tokenize(e.to_string())),
            Tok::Spm(m) => {
                m.encode_into(text, out);
                Ok(())
            }
        }
    }

    /// Appends the ids of `text` until more than `max_ids` of them are known (tekken stops at
    /// the pre-token that crosses it, SentencePiece after the word that crosses it when its
    /// vocabulary proves the word split, else at the end of `text`); true when `text` has more
    /// than `max_ids` ids. The ids appended are the first ones of the whole encoding either
    /// way.
    fn encode_limited_into(
        &self,
        text: &str,
        max_ids: usize,
        out: &mut Vec<u32>,
    ) -> Result<bool, Error> {
        match self {
            Tok::Tekken(t) => t
                .encode_limited_into(text, max_ids, out)
                .map_err(|e| Error::Tokenize(e.to_string())),
            Tok::Spm(m) => Ok(m.encode_limited_into(text, max_ids, out)),
        }
    }

    fn special_id(&self, name: &str) -> Option<u32> {
        match self {
            Tok::Tekken(t) => t.special_id(name),
            Tok::Spm(m) => m.piece_id(name),
        }
    }
}

/// What [`MistralEncoder::engine_chat_capped`] gives.
#[derive(Debug)]
pub(crate) struct CappedChat {
    /// The text form and the first `cap` ids.
    pub chat: EngineChat,
    /// The whole encoding has more than `cap` ids.
    pub more: bool,
    /// The request's text (its pieces' text, SGLang's assistant prefix) holds a NUL; nothing
    /// was encoded then.
    pub nul: bool,
}

/// A control token of the instruct encoding.
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
    System,
    EndSystem,
    ToolContent,
}

impl Control {
    const ALL: [Control; 12] = [
        Control::Bos,
        Control::Eos,
        Control::Inst,
        Control::EndInst,
        Control::Tools,
        Control::EndTools,
        Control::Results,
        Control::EndResults,
        Control::Calls,
        Control::System,
        Control::EndSystem,
        Control::ToolContent,
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
            Control::System => "[SYSTEM_PROMPT]",
            Control::EndSystem => "[/SYSTEM_PROMPT]",
            Control::ToolContent => "[TOOL_CONTENT]",
        }
    }
}

/// One piece of the encoding: a control token or a text tokenized on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Control(Control),
    Text(String),
}

/// The mistral instruct encoder of one checkpoint (tekken v3 or SentencePiece v7); `Send +
/// Sync`, share it with `Arc`.
pub struct MistralEncoder {
    tok: Tok,
    version: InstructVersion,
    /// Ids of [`Control::ALL`], in that order.
    controls: [u32; 12],
    limits: InputLimits,
}

impl std::fmt::Debug for MistralEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MistralEncoder")
            .field("tokenizer", &self.tok)
            .field("version", &self.version)
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

    /// Builds the encoder from a model directory: its `tekken.json` (v3), else its
    /// `tokenizer.model.v7` (SentencePiece v7).
    pub fn from_model_dir(dir: &Path) -> Result<MistralEncoder, Error> {
        let tekken = dir.join("tekken.json");
        if tekken.is_file() {
            let tok = kvtoken::Tekkenizer::from_file(&tekken)
                .map_err(|e| Error::TokenizerLoad(format!("{}: {e}", tekken.display())))?;
            return Self::from_tekkenizer(Arc::new(tok));
        }
        let spm = dir.join(SPM_V7_FILE);
        let model = kvtoken::SpmModel::from_file(&spm)
            .map_err(|e| Error::TokenizerLoad(format!("{}: {e}", spm.display())))?;
        Self::from_spm_v7(Arc::new(model))
    }

    /// Builds the v7 encoder over a SentencePiece `tokenizer.model.v7`.
    pub fn from_spm_v7(model: Arc<kvtoken::SpmModel>) -> Result<MistralEncoder, Error> {
        Self::with_tok(Tok::Spm(model), InstructVersion::V7)
    }

    fn with_tok(tok: Tok, version: InstructVersion) -> Result<MistralEncoder, Error> {
        let mut controls = [0u32; 12];
        for (slot, c) in controls.iter_mut().zip(Control::ALL) {
            *slot = tok.special_id(c.name()).ok_or_else(|| {
                Error::TokenizerLoad(format!("no control token {} in the tokenizer", c.name()))
            })?;
        }
        Ok(MistralEncoder {
            tok,
            version,
            controls,
            limits: InputLimits::default(),
        })
    }

    /// The instruct version this encoder reproduces.
    pub fn version(&self) -> InstructVersion {
        self.version
    }

    /// Builds the encoder over a loaded tekken tokenizer (version `v3`).
    pub fn from_tekkenizer(tok: Arc<kvtoken::Tekkenizer>) -> Result<MistralEncoder, Error> {
        if tok.version() != Some("v3") {
            return Err(Error::TokenizerLoad(format!(
                "tekken version {:?}: only v3 has a mistral instruct encoding here",
                tok.version()
            )));
        }
        Self::with_tok(Tok::Tekken(tok), InstructVersion::V3)
    }

    /// This encoder with the work bounds `limits`.
    #[must_use]
    pub fn with_limits(mut self, limits: InputLimits) -> MistralEncoder {
        self.limits = limits;
        self
    }

    /// The ids of `text` as ordinary text (mistral_common `encode(text, bos=False,
    /// eos=False)`).
    pub fn encode_text(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.tok.encode_into(text, &mut out)?;
        Ok(out)
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
        Ok(self.engine_chat_capped(path, body, usize::MAX, false)?.chat)
    }

    /// [`MistralEncoder::engine_chat`] with the ids cut at `cap`: the pieces are encoded one
    /// after another only until more than `cap` ids are known, so the work past the cap is at
    /// most one piece (tekken stops inside it, at the pre-token that crosses the cap). The
    /// ids are exactly the whole encoding's first `cap`; `rendered` is mistral_common's text
    /// form of the whole request on tekken, and of the ids returned on SentencePiece (its
    /// pieces). With `strict`, a request whose text holds a NUL is not encoded (`nul`, no
    /// ids): the strict rules refuse it.
    pub(crate) fn engine_chat_capped(
        &self,
        path: MistralPath,
        body: &[u8],
        cap: usize,
        strict: bool,
    ) -> Result<CappedChat, Error> {
        if let Some(hit) = LimitHit::check(Limit::BodyBytes, &self.limits, body.len()) {
            return Err(Error::InputTooLarge(hit));
        }
        let req = ChatRequest::parse(body)?;
        let n = req.messages().map_err(Error::EngineRequest)?.len();
        if let Some(hit) = LimitHit::check(Limit::Messages, &self.limits, n) {
            return Err(Error::InputTooLarge(hit));
        }
        if path == MistralPath::SglangText && self.version != InstructVersion::V3 {
            return Err(Error::Unsupported(
                "mistral: SGLang's text path is proven for tekken v3 only".to_string(),
            ));
        }
        let request = request::request(&req, path, self.version)?;
        let pieces = self.pieces(&request)?;
        let text_form: String = pieces
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
            text_form.len() + prefix_len,
        ) {
            return Err(Error::InputTooLarge(hit));
        }
        let nul = text_form.contains('\0')
            || request
                .sglang_prefix
                .as_ref()
                .is_some_and(|p| p.contains('\0'));
        if nul && strict {
            // Refused by the strict rules: nothing to encode.
            return Ok(CappedChat {
                chat: EngineChat {
                    rendered: text_form,
                    ids: None,
                },
                more: false,
                nul,
            });
        }
        // Each text appended while at most `cap` ids are known; true once more are.
        let encode = |text: &str, ids: &mut Vec<u32>| {
            self.tok
                .encode_limited_into(text, cap.saturating_sub(ids.len()), ids)
        };
        let mut ids = Vec::with_capacity((text_form.len() / 3 + 8).min(cap.saturating_add(1)));
        let mut more = false;
        match path {
            MistralPath::VllmChat | MistralPath::VllmTokenize => {
                for p in &pieces {
                    if ids.len() > cap {
                        break;
                    }
                    match p {
                        Piece::Control(c) => ids.push(self.control_id(*c)),
                        Piece::Text(t) => {
                            if encode(t, &mut ids)? {
                                more = true;
                                break;
                            }
                        }
                    }
                }
            }
            MistralPath::SglangText => {
                more = encode(&text_form, &mut ids)?;
                if let (false, Some(prefix)) = (more, &request.sglang_prefix) {
                    more = encode(prefix, &mut ids)?;
                }
            }
        }
        let more = more || ids.len() > cap;
        ids.truncate(cap);
        // mistral_common's text form: the pieces' text (SentencePiece pieces keep U+2581 and
        // `<0xXX>`), which for tekken is the text of the pieces above.
        let rendered = match &self.tok {
            Tok::Tekken(_) => text_form,
            Tok::Spm(m) => ids.iter().filter_map(|&i| m.piece(i)).collect(),
        };
        Ok(CappedChat {
            chat: EngineChat {
                rendered,
                ids: Some(ids),
            },
            more,
            nul,
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
        self.tok.encode_into(prompt, &mut ids)?;
        Ok(ids)
    }

    /// mistral_common's `encode_instruct` (v3 or v7): the pieces of the normalised request.
    fn pieces(&self, request: &request::Request<'_>) -> Result<Vec<Piece>, Error> {
        let v7 = self.version == InstructVersion::V7;
        let (system_prompt, messages) = request::normalise(&request.messages, self.version)?;
        let last_user = messages.iter().rposition(|m| matches!(m, Norm::User(_)));
        let mut out = vec![Piece::Control(Control::Bos)];
        for (i, m) in messages.iter().enumerate() {
            match m {
                Norm::System(content) => {
                    out.push(Piece::Control(Control::System));
                    out.push(Piece::Text(content.clone()));
                    out.push(Piece::Control(Control::EndSystem));
                }
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
                        // v7: the text, then the calls.
                        (false, false) if v7 => {
                            out.push(Piece::Text(content.trim_end_matches(' ').to_string()));
                            out.push(Piece::Control(Control::Calls));
                            out.push(Piece::Text(request::calls_json(calls)?));
                        }
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
                Norm::Tool { id, content } if v7 => {
                    out.push(Piece::Control(Control::Results));
                    out.push(Piece::Text(id.clone()));
                    out.push(Piece::Control(Control::ToolContent));
                    out.push(Piece::Text(content.clone()));
                    out.push(Piece::Control(Control::EndResults));
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
