//! What a checkpoint's own files say about how the engines render its chat, for a profile or
//! model folder that names no `modelType` (config.json `model_type`).
//!
//! Which renderer an engine release uses is keyed by the model type or by the checkpoint's
//! tokenizer file (catalog `chat.renderers`, docs/contracts/templates.md §13). Without a model
//! type the key is missing, and the Jinja template would be rendered where the engine renders
//! otherwise: gpt-oss (its `tokenizer.json` carries harmony's special tokens, its template
//! writes them) is rendered by vLLM and TensorRT-LLM with harmony, never its Jinja template.
//! Such an encoder's chat is refused ([`unnamed_model_type`]) with the reason naming
//! `modelType`; completions stay exact (the tokenizer is the one the engine loads). A Mistral
//! tokenizer file pinned as `tokenizer.json` ([`mistral_file_kind`]) does not load as one:
//! the error names `tokenizerFile`.

use crate::engine::Engine;

/// harmony's control tokens (docs/contracts/templates.md §13): all of them are added tokens of
/// gpt-oss's `tokenizer.json`, and a harmony template writes the last three between messages.
pub const HARMONY_TOKENS: [&str; 6] = [
    "<|start|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|channel|>",
    "<|message|>",
];

/// The `model_type` whose chat some engines render with harmony.
const GPT_OSS: &str = "gpt_oss";

/// Whether every harmony control token is an added token of `tok`.
pub fn has_harmony_tokens(tok: &tokenizers::Tokenizer) -> bool {
    let added = tok.get_added_tokens_decoder();
    HARMONY_TOKENS
        .iter()
        .all(|h| added.values().any(|t| t.content == *h))
}

/// Whether a chat template writes harmony's message framing (`<|channel|>`, `<|message|>`).
pub fn template_writes_harmony(source: &str) -> bool {
    source.contains("<|channel|>") && source.contains("<|message|>")
}

/// Whether `engine` renders a `gpt_oss` model's chat with harmony in some release (vLLM: the
/// catalog's `chat.renderers`; TensorRT-LLM: its harmony adapter, docs/contracts/registry.md
/// §2 `modelType`), so that its Jinja template is not what the engine renders.
fn renders_gpt_oss_without_jinja(engine: Engine) -> bool {
    let in_catalog = kvprofile_core::contracts::builtin().map_or(true, |c| {
        c.releases.iter().any(|r| {
            r.engine == engine
                && r.chat
                    .as_ref()
                    .is_some_and(|c| c.renderers.contains_key(GPT_OSS))
        })
    });
    in_catalog || engine == Engine::Trtllm
}

/// For an encoder without a model type that would render chat with its Jinja template: the
/// reason chat must be refused when its tokenizer or template is harmony's (gpt-oss) on an
/// engine that renders gpt-oss with harmony; `None` when nothing says the engine renders
/// otherwise.
pub fn unnamed_model_type(
    engine: Engine,
    tokenizer: Option<&tokenizers::Tokenizer>,
    template: Option<&str>,
) -> Option<String> {
    let by_tokenizer = tokenizer.is_some_and(has_harmony_tokens);
    let by_template = template.is_some_and(template_writes_harmony);
    if !(by_tokenizer || by_template) || !renders_gpt_oss_without_jinja(engine) {
        return None;
    }
    let what = match (by_tokenizer, by_template) {
        (true, true) => "its tokenizer and template are harmony's",
        (true, false) => "its tokenizer carries harmony's special tokens",
        _ => "its template writes harmony's message framing",
    };
    Some(format!(
        "no modelType: {what} (gpt-oss), whose chat {} renders with harmony, not its Jinja \
         template, in the releases that name a renderer for model_type {GPT_OSS}; set the \
         profile's modelType (config.json model_type) so the release's renderer is chosen",
        engine.as_str()
    ))
}

/// A Mistral tokenizer file in place of `tokenizer.json`: `Some("tekken.json")` for tekken's
/// JSON (`config` with a `pattern`, `vocab` a list), `Some("tokenizer.model.v7")` for a
/// SentencePiece model (a protobuf, not JSON); `None` otherwise.
pub fn mistral_file_kind(bytes: &[u8]) -> Option<&'static str> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) => {
            let tekken = v.get("config").is_some_and(|c| c.get("pattern").is_some())
                && v.get("vocab").is_some_and(serde_json::Value::is_array)
                && v.get("model").is_none();
            tekken.then_some("tekken.json")
        }
        // A SentencePiece ModelProto opens with its first `pieces` entry (field 1, length
        // delimited: byte 0x0a) and is binary.
        Err(_) => (bytes.first() == Some(&0x0a)
            && (bytes.contains(&0) || std::str::from_utf8(bytes).is_err()))
        .then_some("tokenizer.model.v7"),
    }
}

/// The remedy for `tokenizer.json` bytes that do not load because they are a Mistral tokenizer
/// file ([`mistral_file_kind`]); `None` for any other bytes.
pub fn mistral_file_remedy(bytes: &[u8]) -> Option<String> {
    mistral_file_kind(bytes).map(|kind| {
        format!(
            "the tokenizer is a Mistral {kind}, not a tokenizer.json: set the profile's \
             tokenizerFile: {kind} (the engines render such a checkpoint with mistral_common, \
             not a Jinja template; modelType does not decide it)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_and_file_signatures() {
        assert!(template_writes_harmony(
            "<|start|>{{ m.role }}<|channel|>final<|message|>{{ m.content }}<|end|>"
        ));
        assert!(!template_writes_harmony(
            "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>"
        ));
        assert_eq!(
            mistral_file_kind(br#"{"config":{"pattern":"x"},"vocab":[]}"#),
            Some("tekken.json")
        );
        assert_eq!(
            mistral_file_kind(br#"{"model":{"type":"BPE"},"vocab":[]}"#),
            None
        );
        assert_eq!(
            mistral_file_kind(b"\x0a\x05he\x00lo"),
            Some("tokenizer.model.v7")
        );
        assert_eq!(mistral_file_kind(b"\n{}"), None);
        assert_eq!(mistral_file_kind(b""), None);
    }

    #[test]
    fn sglang_renders_gpt_oss_with_its_template() {
        let t = Some("<|channel|>a<|message|>b");
        assert!(unnamed_model_type(Engine::Sglang, None, t).is_none());
        let why = unnamed_model_type(Engine::Vllm, None, t).expect("refused on vLLM");
        assert!(why.contains("modelType"), "{why}");
        assert!(unnamed_model_type(Engine::Trtllm, None, t).is_some());
        assert!(unnamed_model_type(Engine::Vllm, None, Some("{{ x }}")).is_none());
    }
}
