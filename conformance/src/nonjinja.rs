//! Parity checks for the vector files of models the engines do not render with a Jinja
//! template (`testdata/vectors/templates-nonjinja/*.json`, docs/contracts/templates.md §13):
//! gpt-oss (vLLM renders chat with harmony; its `/tokenize` and SGLang use the checkpoint's
//! Jinja template) and Mistral (vLLM `--tokenizer-mode mistral`, mistral_common).
//!
//! Every chat case is checked once per engine path the file records (`engine_token_ids` /
//! `engine_errors`: `vllm` = `/v1/chat/completions`, `vllm_tokenize` = `POST /tokenize`,
//! `sglang`), each path through the renderer its release uses for the model
//! ([`PathRenderer`], resolved from the contract catalog by the caller); completion cases once
//! per engine. One [`CaseResult`] per case and path, named `<profile>/<case>/<path>`: a path
//! passes only when it gives exactly the recorded ids, or refuses where the engine refused.
//! A path kvexact has no renderer for fails with the reason (`unsupported: …`), never passes.

use crate::templates::{first_diff, ids_of, slug};
use crate::{CaseResult, FileReport};
use kvtemplate::harmony::{HarmonyConfig, HarmonyEncoder};
use kvtemplate::json::{Json, JsonObject};
use kvtemplate::mistral::{InstructVersion, MistralEncoder, MistralPath};
use kvtemplate::{spec_from_model_dir, ChatRules, Encoder, Engine};
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

/// How one engine release renders this file's model on its chat path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRenderer {
    /// The checkpoint's Jinja chat template under the release's chat rules.
    Jinja(ChatRules),
    /// gpt-oss harmony (vLLM).
    Harmony,
    /// mistral_common's tekken v3 instruct encoding, ids built piece by piece (vLLM
    /// `--tokenizer-mode mistral`).
    MistralTekken,
    /// mistral_common's text form of the same encoding, re-encoded as plain text (SGLang's
    /// bare-tekken checkpoints).
    MistralTekkenText,
    /// mistral_common's SentencePiece v7 instruct encoding (vLLM `--tokenizer-mode mistral`).
    MistralSpmV7,
    /// No renderer kvexact reproduces (e.g. mistral_common): every case of the path fails
    /// with this reason.
    Unsupported(&'static str),
}

/// Resolves from the contract catalog: `(engine, version, key)` → the chat renderer of that
/// release for a model whose catalog key is `key` (the checkpoint-layout key of
/// `kvtemplate::mistral::checkpoint_key` where the files decide, else the `config.json`
/// `model_type`), and the release's chat rules (for its Jinja paths).
pub type PathResolver<'r> =
    &'r dyn Fn(Engine, &str, Option<&str>) -> Result<(PathRenderer, Option<ChatRules>), String>;

/// Recognises a non-Jinja vector file (`renderer` is `harmony` or `mistral_common`).
pub fn detect(doc: &serde_json::Value) -> bool {
    doc.get("profile").is_some()
        && doc.get("cases").is_some()
        && matches!(
            doc.get("renderer").and_then(|r| r.as_str()),
            Some("harmony" | "mistral_common")
        )
}

/// The engine paths of a chat case and the engine each runs on.
const CHAT_PATHS: [(&str, Engine); 3] = [
    ("vllm", Engine::Vllm),
    ("vllm_tokenize", Engine::Vllm),
    ("sglang", Engine::Sglang),
];

/// One engine path's encoder.
enum PathEncoder {
    Jinja(Box<Encoder>),
    Harmony(HarmonyEncoder),
    Mistral(Arc<MistralEncoder>, MistralPath),
    Unsupported(&'static str),
}

/// How one engine path encodes a completion prompt.
enum CompletionEncoder {
    Jinja(Box<Encoder>),
    Mistral(Arc<MistralEncoder>),
}

/// Checks one non-Jinja vector file against the model directories under `models`, each
/// engine release its `engine_truth.engines` names resolved by `resolve`.
pub fn check_file(
    bytes: &[u8],
    models: &Path,
    resolve: PathResolver<'_>,
) -> Result<FileReport, String> {
    let doc = kvtemplate::json::parse(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let top = doc.as_object().ok_or("not an object")?;
    let profile = top.get("profile").and_then(Json::as_str).unwrap_or("?");
    let model = top
        .get("model")
        .and_then(Json::as_str)
        .ok_or("no `model` field")?;
    let dir = models.join(slug(model));
    let model_type = kvtemplate::model_type_of_dir(&dir).map_err(|e| e.to_string())?;
    // A checkpoint whose files decide its renderer (tekken.json or tokenizer.model.v7 alone)
    // is looked up by that layout; other checkpoints without tokenizer.json have no renderer
    // here.
    let layout = kvtemplate::mistral::checkpoint_key(&dir);
    let renderer_key = layout.or(model_type.as_deref());
    let no_tokenizer = layout.is_none() && !dir.join("tokenizer.json").is_file();
    // One tekken encoder shared by the paths that use it, loaded on first use.
    let mut mistral: Option<Arc<MistralEncoder>> = None;
    let mut mistral_encoder = || -> Result<Arc<MistralEncoder>, String> {
        if let Some(m) = &mistral {
            return Ok(Arc::clone(m));
        }
        let m = Arc::new(MistralEncoder::from_model_dir(&dir).map_err(|e| e.to_string())?);
        mistral = Some(Arc::clone(&m));
        Ok(m)
    };
    let now_ms = fixed_clock_ms(top)?;
    let engines = top
        .get("engine_truth")
        .and_then(Json::as_object)
        .and_then(|t| t.get("engines"))
        .and_then(Json::as_object)
        .ok_or("no `engine_truth.engines` object")?;
    let version_of = |name: &str| {
        engines
            .get(name)
            .and_then(Json::as_object)
            // `covered: false` / `ran: false`: the generator has no truth for that engine.
            .filter(|o| {
                !matches!(o.get("covered"), Some(Json::Bool(false)))
                    && !matches!(o.get("ran"), Some(Json::Bool(false)))
            })
            .and_then(|o| o.get("version"))
            .and_then(Json::as_str)
            .map(str::to_string)
    };
    let mut report = FileReport::default();
    // One encoder per path (and one per engine for completions).
    let mut paths: Vec<(&str, Engine, PathEncoder, Option<CompletionEncoder>)> = Vec::new();
    // The renderer the catalog names must be the instruct version the files hold.
    let check_version = |rend: PathRenderer, enc: &MistralEncoder| -> Result<(), String> {
        let want = match rend {
            PathRenderer::MistralSpmV7 => InstructVersion::V7,
            _ => InstructVersion::V3,
        };
        if enc.version() == want {
            Ok(())
        } else {
            Err(format!(
                "the catalog's renderer {rend:?} does not match the checkpoint's files ({:?})",
                enc.version()
            ))
        }
    };
    for (path, engine) in CHAT_PATHS {
        let Some(version) = version_of(path) else {
            continue;
        };
        let (rend, rules) = if no_tokenizer {
            (
                PathRenderer::Unsupported(
                    "no tokenizer.json, tekken.json or tokenizer.model.v7: no tokenizer kvexact \
                     reads",
                ),
                None,
            )
        } else {
            resolve(engine, &version, renderer_key)?
        };
        // `/tokenize` never takes the harmony path (vLLM's `OnlineRenderer.preprocess_chat`).
        let rend = match (path, rend) {
            ("vllm_tokenize", PathRenderer::Harmony) => match rules {
                Some(r) => PathRenderer::Jinja(r),
                None => PathRenderer::Unsupported("no chat rules for /tokenize"),
            },
            (_, r) => r,
        };
        if matches!(
            rend,
            PathRenderer::MistralTekken
                | PathRenderer::MistralTekkenText
                | PathRenderer::MistralSpmV7
        ) {
            check_version(rend, &*mistral_encoder()?)?;
        }
        // Completions never render: the checkpoint's tokenizer on the prompt.
        let completions = match rend {
            PathRenderer::Unsupported(_) => None,
            PathRenderer::MistralTekken
            | PathRenderer::MistralTekkenText
            | PathRenderer::MistralSpmV7 => Some(CompletionEncoder::Mistral(mistral_encoder()?)),
            _ => {
                let mut spec = spec_from_model_dir(&dir, engine).map_err(|e| e.to_string())?;
                spec.chat_rules = rules.or(spec.chat_rules);
                Some(CompletionEncoder::Jinja(Box::new(
                    Encoder::new(spec).map_err(|e| e.to_string())?,
                )))
            }
        };
        let enc = match rend {
            PathRenderer::Jinja(rules) => {
                let mut spec = spec_from_model_dir(&dir, engine).map_err(|e| e.to_string())?;
                spec.chat_rules = Some(rules);
                PathEncoder::Jinja(Box::new(Encoder::new(spec).map_err(|e| e.to_string())?))
            }
            PathRenderer::Harmony => {
                let tok = std::fs::read(dir.join("tokenizer.json"))
                    .map_err(|e| format!("{}: {e}", dir.join("tokenizer.json").display()))?;
                let enc = HarmonyEncoder::from_tokenizer_json(&tok, HarmonyConfig::vllm())
                    .map_err(|e| e.to_string())?;
                PathEncoder::Harmony(enc)
            }
            PathRenderer::MistralTekken | PathRenderer::MistralSpmV7 => PathEncoder::Mistral(
                mistral_encoder()?,
                if path == "vllm_tokenize" {
                    MistralPath::VllmTokenize
                } else {
                    MistralPath::VllmChat
                },
            ),
            PathRenderer::MistralTekkenText => {
                PathEncoder::Mistral(mistral_encoder()?, MistralPath::SglangText)
            }
            PathRenderer::Unsupported(why) => PathEncoder::Unsupported(why),
        };
        report.notes.push(format!(
            "{profile}: {path} ({} {version}) via {}",
            engine.as_str(),
            match &enc {
                PathEncoder::Jinja(_) => "the Jinja chat template",
                PathEncoder::Harmony(_) => "harmony",
                PathEncoder::Mistral(_, MistralPath::SglangText) =>
                    "mistral_common's text form re-encoded as plain text (tekken)",
                PathEncoder::Mistral(m, _) => match m.version() {
                    InstructVersion::V3 => "mistral_common's instruct encoding (tekken v3)",
                    InstructVersion::V7 => "mistral_common's instruct encoding (SentencePiece v7)",
                },
                PathEncoder::Unsupported(w) => w,
            }
        ));
        paths.push((path, engine, enc, completions));
    }
    let cases = top
        .get("cases")
        .and_then(Json::as_array)
        .ok_or("no `cases` array")?;
    for case in cases {
        let c = case.as_object().ok_or("case is not an object")?;
        let id = c.get("id").and_then(Json::as_str).unwrap_or("?");
        match c.get("kind").and_then(Json::as_str) {
            Some("chat") => {
                for (path, _, enc, _) in &paths {
                    let failure = check_chat_path(c, path, enc, now_ms).err();
                    report.cases.push(CaseResult {
                        name: format!("{profile}/{id}/{path}"),
                        failure,
                    });
                }
            }
            Some("completion") => {
                for (path, _, enc, completions) in &paths {
                    if *path == "vllm_tokenize" {
                        continue;
                    }
                    let failure = match (completions, enc) {
                        (Some(e), _) => check_completion_path(c, path, e).err(),
                        (None, PathEncoder::Unsupported(why)) => {
                            Some(format!("unsupported: {why}"))
                        }
                        (None, _) => Some("no completions encoder".to_string()),
                    };
                    report.cases.push(CaseResult {
                        name: format!("{profile}/{id}/{path}"),
                        failure,
                    });
                }
            }
            other => report.cases.push(CaseResult {
                name: format!("{profile}/{id}"),
                failure: Some(format!("unknown case kind {other:?}")),
            }),
        }
    }
    Ok(report)
}

/// The instant the file's servers ran at (`harmony.fixed_clock`, the vectors' naive local
/// time read as UTC: the servers run in UTC), in Unix ms; `None` when the file pins none.
pub fn fixed_clock_ms(top: &JsonObject<'_>) -> Result<Option<i64>, String> {
    top.get("harmony")
        .and_then(Json::as_object)
        .and_then(|h| h.get("fixed_clock"))
        .and_then(Json::as_object)
        .and_then(|c| c.get("value"))
        .and_then(Json::as_str)
        .map(|v| {
            kvtemplate::parse_rfc3339(&format!("{v}Z"))
                .ok_or_else(|| format!("harmony.fixed_clock.value {v:?}"))
        })
        .transpose()
}

/// The OpenAI body the generator sent on `path` (`engine_truth.request_rule`) for the case
/// `c` of a non-Jinja vector file.
pub fn body_for(c: &JsonObject<'_>, path: &str) -> String {
    let mut body: Vec<(Cow<'_, str>, Json<'_>)> =
        vec![(Cow::Borrowed("model"), Json::Str(Cow::Borrowed("model")))];
    let msgs = c
        .get("messages")
        .cloned()
        .unwrap_or(Json::Array(Vec::new()));
    body.push((Cow::Borrowed("messages"), msgs));
    if let Some(t) = c.get("tools") {
        body.push((Cow::Borrowed("tools"), t.clone()));
    }
    if matches!(c.get("add_generation_prompt"), Some(Json::Bool(false))) {
        body.push((Cow::Borrowed("add_generation_prompt"), Json::Bool(false)));
    }
    if matches!(c.get("continue_final_message"), Some(Json::Bool(true))) {
        body.push((Cow::Borrowed("continue_final_message"), Json::Bool(true)));
    }
    if let Some(k) = c.get("template_kwargs") {
        body.push((Cow::Borrowed("chat_template_kwargs"), k.clone()));
    }
    // /tokenize takes only TokenizeChatRequest's fields.
    if path != "vllm_tokenize" {
        if let Some(extra) = c.get("request_extra").and_then(Json::as_object) {
            for (k, v) in extra.effective() {
                body.push((Cow::Owned(k.to_string()), v.clone()));
            }
        }
    }
    Json::Object(JsonObject(body)).to_json_string()
}

/// The harmony settings of a case's server process (`engine_env`).
fn harmony_env(c: &JsonObject<'_>, base: &HarmonyConfig) -> Result<HarmonyConfig, String> {
    let mut config = base.clone();
    if let Some(env) = c.get("engine_env").and_then(Json::as_object) {
        for (k, v) in env.effective() {
            let v = v
                .as_str()
                .ok_or_else(|| format!("engine_env.{k} is not a string"))?;
            match k {
                "VLLM_SYSTEM_START_DATE" => config.start_date = Some(v.to_string()),
                "VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS" => {
                    config.instructions_in_system = matches!(v, "1" | "true" | "True")
                }
                other => return Err(format!("engine_env {other} is not modelled")),
            }
        }
    }
    Ok(config)
}

fn check_chat_path(
    c: &JsonObject<'_>,
    path: &str,
    enc: &PathEncoder,
    now_ms: Option<i64>,
) -> Result<(), String> {
    let want = ids_of(
        c.get("engine_token_ids")
            .and_then(Json::as_object)
            .and_then(|o| o.get(path)),
    );
    let want_err = c
        .get("engine_errors")
        .and_then(Json::as_object)
        .and_then(|o| o.get(path))
        .and_then(Json::as_str);
    let body = body_for(c, path);
    let got = match enc {
        PathEncoder::Unsupported(why) => return Err(format!("unsupported: {why}")),
        PathEncoder::Jinja(e) => e.engine_chat(body.as_bytes(), now_ms),
        PathEncoder::Mistral(m, mpath) => {
            if c.get("engine_env")
                .is_some_and(|e| !matches!(e, Json::Null))
            {
                return Err("engine_env is not modelled for mistral".to_string());
            }
            m.engine_chat(*mpath, body.as_bytes())
        }
        PathEncoder::Harmony(h) => {
            let config = harmony_env(c, h.config())?;
            if config == *h.config() {
                h.engine_chat(body.as_bytes(), now_ms)
            } else {
                h.reconfigured(config).engine_chat(body.as_bytes(), now_ms)
            }
        }
    };
    match (got, want, want_err) {
        (Ok(g), Some(want), None) => match g.ids {
            Some(ids) if ids == want => Ok(()),
            Some(ids) => Err(first_diff(&want, &ids)),
            None => Err("no ids".to_string()),
        },
        (Ok(g), _, err) => Err(format!(
            "encoded {} ids, but the engine refuses: {}",
            g.ids.map_or(0, |i| i.len()),
            err.unwrap_or("(no ids recorded)")
        )),
        (
            Err(kvtemplate::Error::EngineRequest(m) | kvtemplate::Error::TemplateRender(m)),
            _,
            Some(w),
        ) if m != w
            && (w.starts_with("VLLMValidationError: Harmony")
                || w.starts_with("VLLMValidationError: reasoning_effort=")) =>
        {
            Err(format!("refusal differs: want {w:?} got {m:?}"))
        }
        (Err(_), _, Some(_)) => Ok(()),
        (Err(e), _, None) => Err(format!("failed: {e}")),
    }
}

fn check_completion_path(
    c: &JsonObject<'_>,
    path: &str,
    enc: &CompletionEncoder,
) -> Result<(), String> {
    let prompt = c
        .get("prompt")
        .and_then(Json::as_str)
        .ok_or("completion case without a string prompt")?;
    let want = ids_of(
        c.get("engine_token_ids")
            .and_then(Json::as_object)
            .and_then(|o| o.get(path)),
    );
    let got = match enc {
        CompletionEncoder::Jinja(e) => e.engine_completions(prompt),
        CompletionEncoder::Mistral(m) => m.engine_completions(prompt),
    };
    match (got, want) {
        (Ok(ids), Some(want)) if ids == want => Ok(()),
        (Ok(ids), Some(want)) => Err(first_diff(&want, &ids)),
        (Ok(ids), None) => Err(format!("encoded {} ids, but the engine refuses", ids.len())),
        (Err(_), None) => Ok(()),
        (Err(e), Some(_)) => Err(format!("failed: {e}")),
    }
}
