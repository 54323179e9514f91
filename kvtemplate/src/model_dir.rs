//! Building an [`EncoderSpec`] from a model directory (`<org>__<name>/` with `tokenizer.json`,
//! `tokenizer_config.json` and/or `chat_template*.jinja`, as in `testdata/models`), and the
//! publish-time artifact check.

use crate::encoder::{Encoder, EncoderSpec, SpecialTokenValue};
use crate::engine::Engine;
use crate::error::Error;
use crate::loader::AddedTokensRule;
use crate::template_facts::TemplateFacts;
use kvprofile_core::ClockPolicy;
use std::path::Path;

/// Tokenizer classes whose `add_bos_token` SGLang restores (docs/contracts/sglang.md §7).
const SGLANG_BOS_CLASSES: [&str; 7] = [
    "LlamaTokenizer",
    "LlamaTokenizerFast",
    "CodeLlamaTokenizer",
    "CodeLlamaTokenizerFast",
    "GemmaTokenizer",
    "GemmaTokenizerFast",
    "CohereTokenizerFast",
];

/// `special_tokens_map` names transformers binds in the template context, in its order.
const SPECIAL_NAMES: [&str; 8] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
    "additional_special_tokens",
];

fn dir_err(path: &Path, reason: impl Into<String>) -> Error {
    Error::ModelDir {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

fn token_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o
            .get("content")
            .and_then(|c| c.as_str())
            .map(str::to_string),
        _ => None,
    }
}

/// Reads a model directory into a spec for `engine`.
///
/// Template choice (testdata/models/PROVENANCE.md): `chat_template.hf.jinja` (the official bytes where a
/// directory also holds an unofficial copy), else `tokenizer_config.json` `chat_template`
/// (a string, or the `default` entry of a list), else `chat_template.jinja`. Special tokens come
/// from `tokenizer_config.json`. For SGLang, `completions_bos` is derived the way SGLang's
/// loader restores `add_bos_token` (class list above; missing or null `add_bos_token` = true);
/// the other engines never get it. `clock_policy` is `utc-date` exactly when the template calls
/// `strftime_now`; the content format is what vLLM's detector would pick.
pub fn spec_from_model_dir(dir: &Path, engine: Engine) -> Result<EncoderSpec, Error> {
    spec_from_model_dir_for(dir, engine, AddedTokensRule::default())
}

/// [`spec_from_model_dir`] for an engine release whose tokenizer loader follows `rule`: with
/// [`AddedTokensRule::TokenizerConfig`] (transformers 5, the default) the tokenizer's added
/// tokens are `tokenizer_config.json`'s `added_tokens_decoder` when it has one; with
/// [`AddedTokensRule::Either`] a directory whose two files disagree is refused.
pub fn spec_from_model_dir_for(
    dir: &Path,
    engine: Engine,
    rule: AddedTokensRule,
) -> Result<EncoderSpec, Error> {
    if !dir.is_dir() {
        return Err(dir_err(dir, "not a directory"));
    }
    let mut spec = EncoderSpec::new(engine);
    spec.model_type = model_type_of_dir(dir)?;
    let tok_path = dir.join("tokenizer.json");
    if tok_path.is_file() {
        spec.tokenizer_json =
            Some(std::fs::read(&tok_path).map_err(|e| dir_err(&tok_path, e.to_string()))?);
    }
    let cfg_path = dir.join("tokenizer_config.json");
    let cfg: Option<serde_json::Map<String, serde_json::Value>> = if cfg_path.is_file() {
        let bytes = std::fs::read(&cfg_path).map_err(|e| dir_err(&cfg_path, e.to_string()))?;
        if let Some(tok) = &spec.tokenizer_json {
            if let Some(eff) = crate::loader::effective_tokenizer_json(tok, Some(&bytes), rule)? {
                spec.tokenizer_json = Some(eff);
            }
        }
        match serde_json::from_slice(&bytes) {
            Ok(serde_json::Value::Object(m)) => Some(m),
            Ok(_) => return Err(dir_err(&cfg_path, "not a JSON object")),
            Err(e) => return Err(dir_err(&cfg_path, e.to_string())),
        }
    } else {
        None
    };
    let hf = dir.join("chat_template.hf.jinja");
    let plain = dir.join("chat_template.jinja");
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| dir_err(p, e.to_string()));
    spec.template_source = if hf.is_file() {
        Some(read(&hf)?)
    } else if let Some(t) = cfg.as_ref().and_then(|c| c.get("chat_template")) {
        match t {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(list) => list
                .iter()
                .find(|e| e.get("name").and_then(|n| n.as_str()) == Some("default"))
                .and_then(|e| e.get("template"))
                .and_then(|t| t.as_str())
                .map(str::to_string),
            _ => {
                return Err(dir_err(
                    &cfg_path,
                    "chat_template is neither a string nor a list",
                ))
            }
        }
    } else if plain.is_file() {
        Some(read(&plain)?)
    } else {
        None
    };
    if let Some(cfg) = &cfg {
        for name in SPECIAL_NAMES {
            match (name, cfg.get(name)) {
                (_, None) | (_, Some(serde_json::Value::Null)) => {}
                ("additional_special_tokens", Some(serde_json::Value::Array(list))) => {
                    let l: Vec<String> = list.iter().filter_map(token_text).collect();
                    spec.extra_special_tokens
                        .push((name.to_string(), SpecialTokenValue::List(l)));
                }
                ("bos_token", Some(v)) => spec.bos_token = token_text(v),
                ("eos_token", Some(v)) => spec.eos_token = token_text(v),
                (_, Some(v)) => {
                    if let Some(t) = token_text(v) {
                        spec.extra_special_tokens
                            .push((name.to_string(), SpecialTokenValue::Text(t)));
                    }
                }
            }
        }
        let class = cfg
            .get("tokenizer_class")
            .and_then(|c| c.as_str())
            .unwrap_or("");
        let add_bos = !matches!(
            cfg.get("add_bos_token"),
            Some(serde_json::Value::Bool(false))
        );
        spec.completions_bos = engine == Engine::Sglang
            && SGLANG_BOS_CLASSES.contains(&class)
            && add_bos
            && spec.bos_token.is_some()
            && spec.tokenizer_json.is_some();
    }
    if let Some(src) = &spec.template_source {
        let facts = TemplateFacts::scan(src);
        if facts.uses_strftime_now {
            spec.clock_policy = Some(ClockPolicy::UtcDate);
        }
        spec.content_format = facts.detected_format();
    }
    Ok(spec)
}

/// The model's `config.json` `model_type` (what an engine release's chat renderer is keyed by,
/// docs/contracts/templates.md §13), `None` when the directory has no `config.json`; a
/// `config.json` that is not a JSON object, or whose `model_type` is not a string, is an error.
pub fn model_type_of_dir(dir: &Path) -> Result<Option<String>, Error> {
    let path = dir.join("config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = std::fs::read(&path).map_err(|e| dir_err(&path, e.to_string()))?;
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(m)) => match m.get("model_type") {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(t)) => Ok(Some(t.clone())),
            Some(_) => Err(dir_err(&path, "model_type is not a string")),
        },
        Ok(_) => Err(dir_err(&path, "not a JSON object")),
        Err(e) => Err(dir_err(&path, e.to_string())),
    }
}

/// The registry's publish-time check (docs/contracts/registry.md §2): the template compiles (with the
/// clock policy agreeing with it both ways), `tokenizer.json` loads, and — when a
/// `completionsBos` quirk is declared — the BOS token resolves to exactly one special added
/// token.
pub fn validate_artifacts(
    template_source: Option<&str>,
    tokenizer_json: &[u8],
    bos_token: Option<&str>,
    completions_bos: bool,
    clock_policy: Option<ClockPolicy>,
) -> Result<(), Error> {
    let mut spec = EncoderSpec::new(if completions_bos {
        Engine::Sglang
    } else {
        Engine::Vllm
    });
    spec.template_source = template_source.map(str::to_string);
    spec.tokenizer_json = Some(tokenizer_json.to_vec());
    spec.bos_token = bos_token.map(str::to_string);
    spec.completions_bos = completions_bos;
    spec.clock_policy = clock_policy;
    Encoder::new(spec).map(|_| ())
}
