//! Parity checks for the template vector files (`testdata/vectors/templates/*.json`,
//! docs/contracts/templates.md §9 and §11) and the gateway's own chat-template and special-token
//! fixtures. Used by this crate's parity tests and by `kvexact parity`.
//!
//! Per chat case: the transformers render of the template-level `messages` must equal
//! `rendered` byte for byte (or raise the recorded `error`); the tokenizer must give
//! `token_ids`; and for every engine the emulated OpenAI request must give exactly
//! `engine_token_ids[engine]` (rendering `engine_rendered[engine]` where recorded), or fail
//! where `engine_errors` names the engine (with the engine's exact text when the template
//! raised). Per completion case: tokenizer-level ids, then `engine_token_ids[engine]` per engine.
//!
//! Which engines a template file records, and which release of each, is its
//! `engine_truth.engines` block ([`engine_versions`]): the reference files
//! (`vectors/templates/`) name vLLM 0.31.0, SGLang 0.5.19 and TensorRT-LLM 1.3.0rc29; a
//! per-release file (`vectors/versions/<engine>-<version>/templates/`) names one engine and
//! its release, and holds only that engine's `engine_*` values. [`check_file_with`] checks
//! each engine named there with the [`ChatRules`] the caller resolves for that release;
//! [`check_file`] accepts only the reference releases.
//!
//! [`check_file_lifted`] is the gateway's view of the same chat cases: each request goes
//! through the strict encoder ([`Encoder::encode_chat`]) with the refusal codes it hits
//! lifted, as far as the release's contract allows ([`LiftResolver`]), and must give exactly
//! `engine_token_ids[engine]`, or a refusal where `engine_errors` names the engine; with
//! nothing lifted it must refuse with the first code it hits.

use crate::{CaseResult, FileReport};
use kvtemplate::json::{Json, JsonObject};
use kvtemplate::spec_from_model_dir;
use kvtemplate::ChatRules;
use kvtemplate::Engine;
use kvtemplate::{Encoder, ScratchBuf};
use kvtemplate::{Outcome, Refusal, RefusalSet};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

/// Which kind of template vector document this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorKind {
    /// `templates/<profile>.json` (the reference releases).
    Templates,
    /// `versions/<engine>-<version>/templates/<profile>.json`: one engine release's values
    /// (`engine_truth.reference` names the reference file it was compared with).
    ReleaseTemplates,
    /// `gateway/kv_chat_template_parity.json`.
    GatewayChat,
    /// `gateway/kv_special_token_parity.json`.
    GatewaySpecialToken,
}

/// Recognises a document by its fields.
pub fn detect(doc: &serde_json::Value) -> Option<VectorKind> {
    let has = |k: &str| doc.get(k).is_some();
    if has("profile") && has("cases") && has("template_special_kwargs") {
        if doc.pointer("/engine_truth/reference").is_some() {
            Some(VectorKind::ReleaseTemplates)
        } else {
            Some(VectorKind::Templates)
        }
    } else if has("model_slug") && has("template_rules") && has("cases") {
        Some(VectorKind::GatewayChat)
    } else if has("prompt") && has("vllm_authoritative_ids") {
        Some(VectorKind::GatewaySpecialToken)
    } else {
        None
    }
}

/// Resolves the chat rules of one engine release, as [`check_file_with`] asks for them:
/// `(engine, version)` → rules, or `Err` (an unknown release) with the message the whole file
/// then fails with.
pub type RulesResolver<'r> = &'r dyn Fn(Engine, &str) -> Result<ChatRules, String>;

/// The resolver of the reference releases (vLLM 0.31.0, SGLang 0.5.19, TensorRT-LLM
/// 1.3.0rc29, [`ChatRules::reference_version`]): their [`ChatRules::reference`] rules; any
/// other release is an error saying that it needs its own rules.
pub fn reference_rules(engine: Engine, version: &str) -> Result<ChatRules, String> {
    let (Some(reference), Some(rules)) = (
        ChatRules::reference_version(engine),
        ChatRules::reference(engine),
    ) else {
        return Err(format!("{engine} has no chat path"));
    };
    if version == reference {
        Ok(rules)
    } else {
        Err(format!(
            "{} {version} is not the reference release ({} {reference}): its vectors need that \
             release's chat rules (check_file_with)",
            engine.as_str(),
            engine.as_str()
        ))
    }
}

/// Checks one file's bytes against the model directories under `models`, with the reference
/// releases' rules ([`reference_rules`]): a per-release template file fails as a whole (its
/// release needs its own rules, see [`check_file_with`]).
pub fn check_file(bytes: &[u8], models: &Path) -> Result<FileReport, String> {
    check_file_with(bytes, models, &reference_rules)
}

/// The `(engine, version)` pairs a template vector file records (`engine_truth.engines`), in
/// [`Engine::ALL`] order, so that a caller can resolve their [`ChatRules`] before
/// [`check_file_with`]. Fails on a document that is not a template vector file, an unknown
/// engine name or a missing version.
pub fn engine_versions(bytes: &[u8]) -> Result<Vec<(Engine, String)>, String> {
    let doc = kvtemplate::json::parse(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let top = doc.as_object().ok_or("not an object")?;
    engine_versions_of(top)
}

fn engine_versions_of(top: &JsonObject<'_>) -> Result<Vec<(Engine, String)>, String> {
    let engines = top
        .get("engine_truth")
        .and_then(Json::as_object)
        .and_then(|t| t.get("engines"))
        .and_then(Json::as_object)
        .ok_or("no `engine_truth.engines` object: cannot tell which engine releases it records")?;
    let mut out = Vec::new();
    for (name, v) in engines.effective() {
        let engine = Engine::from_name(name)
            .filter(|e| e.has_kv_plane())
            .ok_or_else(|| format!("engine_truth.engines: unknown engine `{name}`"))?;
        let version = v
            .as_object()
            .and_then(|o| o.get("version"))
            .and_then(Json::as_str)
            .ok_or_else(|| format!("engine_truth.engines.{name}.version must be a string"))?;
        out.push((engine, version.to_string()));
    }
    if out.is_empty() {
        return Err("engine_truth.engines names no engine".to_string());
    }
    out.sort_by_key(|(e, _)| Engine::ALL.iter().position(|a| a == e));
    Ok(out)
}

/// Checks one file's bytes against the model directories under `models`. A template vector
/// file is checked for each engine its `engine_truth.engines` names ([`engine_versions`]),
/// each with the rules `rules` resolves for that release; an `Err` from `rules` fails the whole
/// file with that message. The gateway fixtures record the vLLM reference release and are
/// checked as such (`rules` is not asked).
pub fn check_file_with(
    bytes: &[u8],
    models: &Path,
    rules: RulesResolver<'_>,
) -> Result<FileReport, String> {
    let probe: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    match detect(&probe) {
        Some(VectorKind::Templates | VectorKind::ReleaseTemplates) => {
            check_templates(bytes, models, rules)
        }
        Some(VectorKind::GatewayChat) => check_gateway_chat(&probe, models),
        Some(VectorKind::GatewaySpecialToken) => check_gateway_special(&probe, models),
        None => Err("not a template vector file".to_string()),
    }
}

pub(crate) fn slug(model: &str) -> String {
    model.replace('/', "__")
}

/// A vector file's id array (`None` when absent or not all ids).
pub fn ids_of(v: Option<&Json<'_>>) -> Option<Vec<u32>> {
    v?.as_array()?
        .iter()
        .map(|x| match x {
            Json::U64(n) => u32::try_from(*n).ok(),
            _ => None,
        })
        .collect()
}

fn obj_str<'j>(o: Option<&'j JsonObject<'_>>, key: &str) -> Option<&'j str> {
    o?.get(key)?.as_str()
}

pub(crate) fn first_diff(want: &[u32], got: &[u32]) -> String {
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    format!(
        "ids differ at {at} (want {} ids, got {}): want {:?} got {:?}",
        want.len(),
        got.len(),
        want.get(at..(at + 6).min(want.len())).unwrap_or(&[]),
        got.get(at..(at + 6).min(got.len())).unwrap_or(&[]),
    )
}

fn check_templates(
    bytes: &[u8],
    models: &Path,
    rules: RulesResolver<'_>,
) -> Result<FileReport, String> {
    let doc = kvtemplate::json::parse(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let top = doc.as_object().ok_or("not an object")?;
    let profile = top.get("profile").and_then(Json::as_str).unwrap_or("?");
    let model = top
        .get("model")
        .and_then(Json::as_str)
        .ok_or("no `model` field")?;
    let dir = models.join(slug(model));
    let tokenizer_available = !matches!(top.get("tokenizer_available"), Some(Json::Bool(false)));
    let releases = engine_versions_of(top)?;
    let mut resolved = Vec::with_capacity(releases.len());
    for (e, version) in &releases {
        resolved.push((*e, version.as_str(), rules(*e, version)?));
    }
    let mut report = FileReport::default();
    let mut encoders = Vec::new();
    for (e, version, chat_rules) in resolved {
        let mut spec = spec_from_model_dir(&dir, e).map_err(|e| e.to_string())?;
        spec.chat_rules = Some(chat_rules);
        encoders.push((e, Encoder::new(spec).map_err(|e| e.to_string())?));
        if Some(chat_rules) != ChatRules::reference(e) {
            report.notes.push(format!(
                "{profile}: {} {version} checked with toolSerialization {}, templateErrorClass {}",
                e.as_str(),
                chat_rules.tool_serialization,
                chat_rules.template_error_class
            ));
        }
    }
    let has_tok = encoders.iter().all(|(_, enc)| enc.has_tokenizer());
    if !tokenizer_available || !has_tok {
        report.notes.push(format!(
            "{profile}: render-only (no tokenizer for {model}); token ids and engine ids not checked"
        ));
    }
    let check_ids = tokenizer_available && has_tok;
    let cases = top
        .get("cases")
        .and_then(Json::as_array)
        .ok_or("no `cases` array")?;
    for case in cases {
        let c = case.as_object().ok_or("case is not an object")?;
        let id = c.get("id").and_then(Json::as_str).unwrap_or("?");
        let mut fails = Vec::new();
        match c.get("kind").and_then(Json::as_str) {
            Some("chat") => check_chat_case(c, &encoders, check_ids, &mut fails),
            Some("completion") if check_ids => check_completion_case(c, &encoders, &mut fails),
            Some("completion") => {}
            other => fails.push(format!("unknown case kind {other:?}")),
        }
        report.cases.push(CaseResult {
            name: format!("{profile}/{id}"),
            failure: (!fails.is_empty()).then(|| fails.join("; ")),
        });
    }
    Ok(report)
}

fn flag(c: &JsonObject<'_>, key: &str) -> Option<bool> {
    match c.get(key) {
        Some(Json::Bool(b)) => Some(*b),
        _ => None,
    }
}

/// The OpenAI body `engine_truth.py` sends for a chat case (docs/contracts/templates.md §11).
pub fn request_body(c: &JsonObject<'_>, model: &str) -> String {
    let msgs = c.get("request_messages").or_else(|| c.get("messages"));
    let msgs = msgs.map(client_form).unwrap_or(Json::Array(Vec::new()));
    let mut body: Vec<(Cow<'_, str>, Json<'_>)> = vec![
        (
            Cow::Borrowed("model"),
            Json::Str(Cow::Owned(model.to_string())),
        ),
        (Cow::Borrowed("messages"), msgs),
    ];
    if let Some(t) = c.get("tools") {
        body.push((Cow::Borrowed("tools"), t.clone()));
    }
    if flag(c, "add_generation_prompt") == Some(false) {
        body.push((Cow::Borrowed("add_generation_prompt"), Json::Bool(false)));
    }
    if flag(c, "continue_final_message") == Some(true) {
        body.push((Cow::Borrowed("continue_final_message"), Json::Bool(true)));
    }
    if let Some(k) = c.get("template_kwargs") {
        body.push((Cow::Borrowed("chat_template_kwargs"), k.clone()));
    }
    Json::Object(JsonObject(body)).to_json_string()
}

/// Messages as an OpenAI client sends them: object `arguments` JSON-encoded.
fn client_form<'a>(msgs: &Json<'a>) -> Json<'a> {
    match msgs {
        Json::Object(o) => Json::Object(JsonObject(
            o.0.iter()
                .map(|(k, v)| {
                    let nv = match (k.as_ref(), v) {
                        ("arguments", a @ Json::Object(_)) => {
                            Json::Str(Cow::Owned(a.to_json_string()))
                        }
                        _ => client_form(v),
                    };
                    (k.clone(), nv)
                })
                .collect(),
        )),
        Json::Array(a) => Json::Array(a.iter().map(client_form).collect()),
        other => other.clone(),
    }
}

fn check_chat_case(
    c: &JsonObject<'_>,
    encoders: &[(Engine, Encoder)],
    check_ids: bool,
    fails: &mut Vec<String>,
) {
    let Some((_, hf)) = encoders.first() else {
        return;
    };
    // 1. transformers render of the template-level input.
    let messages: Vec<minijinja::Value> = c
        .get("messages")
        .and_then(Json::as_array)
        .unwrap_or(&[])
        .iter()
        .map(Json::to_value)
        .collect();
    let tools = c.get("tools").map(Json::to_value);
    let kwargs = c.get("template_kwargs").map(Json::to_value);
    let agp = flag(c, "add_generation_prompt").unwrap_or(true);
    let cfm = flag(c, "continue_final_message").unwrap_or(false);
    let want_rendered = c.get("rendered").and_then(Json::as_str);
    let want_error = c.get("error").and_then(Json::as_str);
    let got = hf.render_hf(messages, tools, agp, cfm, kwargs, None);
    match (&got, want_rendered, want_error) {
        (Ok(text), Some(want), _) if text == want => {}
        (Ok(text), Some(want), _) => fails.push(format!(
            "rendered differs:\n  want {want:?}\n  got  {text:?}"
        )),
        (Ok(text), None, _) => fails.push(format!("rendered {text:?}, want an error")),
        (Err(e), _, Some(want)) => {
            let msg = match e {
                kvtemplate::Error::TemplateRender(m) => m.clone(),
                other => other.to_string(),
            };
            if want.starts_with("TemplateError: ") && msg != want {
                fails.push(format!("error differs: want {want:?} got {msg:?}"));
            }
        }
        (Err(e), _, None) => fails.push(format!("render failed: {e}")),
    }
    if !check_ids {
        return;
    }
    // 2. tokenizer level: token_ids = encode(rendered, add_special_tokens=False).
    if let (Ok(text), Some(want)) = (&got, ids_of(c.get("token_ids"))) {
        match hf.tokenizer().and_then(|t| t.encode(text, false)) {
            Ok(ids) if ids == want => {}
            Ok(ids) => fails.push(format!("token_ids: {}", first_diff(&want, &ids))),
            Err(e) => fails.push(format!("token_ids: {e}")),
        }
    }
    // 3. each engine's OpenAI serving path.
    let body = request_body(c, "model");
    let engine_ids = c.get("engine_token_ids").and_then(Json::as_object);
    let engine_errors = c.get("engine_errors").and_then(Json::as_object);
    let engine_rendered = c.get("engine_rendered").and_then(Json::as_object);
    for (e, enc) in encoders {
        let name = e.as_str();
        let want_err = obj_str(engine_errors, name);
        let want = ids_of(engine_ids.and_then(|o| o.get(name)));
        let want_text = obj_str(engine_rendered, name).or(want_rendered);
        match (enc.engine_chat(body.as_bytes(), None), want) {
            (Ok(got), Some(want)) if want_err.is_none() => {
                if let Some(wt) = want_text {
                    if got.rendered != wt {
                        fails.push(format!(
                            "{name}: rendered differs:\n  want {wt:?}\n  got  {:?}",
                            got.rendered
                        ));
                    }
                }
                match got.ids {
                    Some(ids) if ids == want => {}
                    Some(ids) => fails.push(format!("{name}: {}", first_diff(&want, &ids))),
                    None => fails.push(format!("{name}: no ids")),
                }
            }
            (Ok(_), _) => fails.push(format!(
                "{name}: encoded, but the engine refuses: {}",
                want_err.unwrap_or("(no ids recorded)")
            )),
            // A template error (raised or failed): the engine's exact text (class and message).
            (Err(kvtemplate::Error::TemplateRender(msg)), _)
                if want_err.is_some_and(|w| w != msg) =>
            {
                fails.push(format!(
                    "{name}: error differs: want {:?} got {msg:?}",
                    want_err.unwrap_or("")
                ));
            }
            (Err(_), _) if want_err.is_some() => {}
            (Err(err), _) => fails.push(format!("{name}: failed: {err}")),
        }
    }
}

fn check_completion_case(
    c: &JsonObject<'_>,
    encoders: &[(Engine, Encoder)],
    fails: &mut Vec<String>,
) {
    let Some(prompt) = c.get("prompt").and_then(Json::as_str) else {
        fails.push("completion case without a string prompt".to_string());
        return;
    };
    let Some((_, first)) = encoders.first() else {
        return;
    };
    // Tokenizer level (the raw tokenizers library, docs/contracts/templates.md §7).
    if let Ok(t) = first.tokenizer() {
        let lib_true = ids_of(c.get("tokenizers_lib_add_special_true"))
            .or_else(|| ids_of(c.get("token_ids_add_special_true")));
        let lib_false = ids_of(c.get("tokenizers_lib_add_special_false"))
            .or_else(|| ids_of(c.get("token_ids_add_special_false")));
        for (special, want) in [(true, lib_true), (false, lib_false)] {
            if let Some(want) = want {
                match t.encode(prompt, special) {
                    Ok(ids) if ids == want => {}
                    Ok(ids) => fails.push(format!(
                        "tokenizer add_special_tokens={special}: {}",
                        first_diff(&want, &ids)
                    )),
                    Err(e) => fails.push(format!("tokenizer: {e}")),
                }
            }
        }
    }
    let engine_ids = c.get("engine_token_ids").and_then(Json::as_object);
    let engine_errors = c.get("engine_errors").and_then(Json::as_object);
    for (e, enc) in encoders {
        let name = e.as_str();
        let want = ids_of(engine_ids.and_then(|o| o.get(name)));
        let want_err = obj_str(engine_errors, name).is_some() || want.is_none();
        match (enc.engine_completions(prompt), want) {
            (Ok(ids), Some(want)) if !want_err => {
                if ids != want {
                    fails.push(format!("{name}: {}", first_diff(&want, &ids)));
                }
            }
            (Ok(ids), _) => fails.push(format!(
                "{name}: encoded {} ids, but the engine refuses",
                ids.len()
            )),
            (Err(_), _) if want_err => {}
            (Err(err), _) => fails.push(format!("{name}: failed: {err}")),
        }
    }
}

fn json_ids(v: Option<&serde_json::Value>) -> Option<Vec<u32>> {
    v?.as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}

/// The gateway's chat-template fixture: vLLM strict chat path, rendered and ids.
fn check_gateway_chat(doc: &serde_json::Value, models: &Path) -> Result<FileReport, String> {
    let slug = doc
        .get("model_slug")
        .and_then(|s| s.as_str())
        .ok_or("no model_slug")?;
    let spec = spec_from_model_dir(&models.join(slug), Engine::Vllm).map_err(|e| e.to_string())?;
    let enc = Encoder::new(spec).map_err(|e| e.to_string())?;
    let cases = doc
        .get("cases")
        .and_then(|c| c.as_object())
        .ok_or("cases is not an object")?;
    let mut report = FileReport::default();
    for (name, case) in cases {
        let mut fails = Vec::new();
        let body =
            serde_json::json!({ "model": doc.get("model"), "messages": case.get("messages") });
        let body = body.to_string();
        let mut scratch = ScratchBuf::new();
        let mut out = vec![0u32; 4096];
        match enc.encode_chat(body.as_bytes(), 0, &mut out, &mut scratch) {
            Ok(Outcome::Done(n)) => {
                if Some(scratch.rendered()) != case.get("rendered_exact").and_then(|r| r.as_str()) {
                    fails.push(format!("rendered differs: got {:?}", scratch.rendered()));
                }
                let got = out.get(..n.written).unwrap_or(&[]);
                match json_ids(case.get("templated_ids")) {
                    Some(want) if want == got => {}
                    Some(want) => fails.push(first_diff(&want, got)),
                    None => fails.push("no templated_ids".to_string()),
                }
            }
            Ok(Outcome::Refused(r)) => fails.push(format!("refused: {r}")),
            Err(e) => fails.push(format!("failed: {e}")),
        }
        report.cases.push(CaseResult {
            name: format!("gateway-chat/{name}"),
            failure: (!fails.is_empty()).then(|| fails.join("; ")),
        });
    }
    Ok(report)
}

/// The gateway's special-token fixture: vLLM completions of a prompt with `<|im_end|>` text.
fn check_gateway_special(doc: &serde_json::Value, models: &Path) -> Result<FileReport, String> {
    let model = doc
        .get("model")
        .and_then(|m| m.as_str())
        .ok_or("no model")?;
    let prompt = doc
        .get("prompt")
        .and_then(|m| m.as_str())
        .ok_or("no prompt")?;
    let spec =
        spec_from_model_dir(&models.join(slug(model)), Engine::Vllm).map_err(|e| e.to_string())?;
    let enc = Encoder::new(spec).map_err(|e| e.to_string())?;
    let mut report = FileReport::default();
    let mut out = vec![0u32; 4096];
    let mut fails = Vec::new();
    match enc.encode_completions(prompt, &mut out) {
        Ok(Outcome::Done(n)) => {
            let got = out.get(..n.written).unwrap_or(&[]);
            match json_ids(doc.get("vllm_authoritative_ids")) {
                Some(want) if want == got => {}
                Some(want) => fails.push(first_diff(&want, got)),
                None => fails.push("no vllm_authoritative_ids".to_string()),
            }
        }
        Ok(Outcome::Refused(r)) => fails.push(format!("refused: {r}")),
        Err(e) => fails.push(format!("failed: {e}")),
    }
    report.cases.push(CaseResult {
        name: "gateway-special-token/vllm_authoritative_ids".to_string(),
        failure: (!fails.is_empty()).then(|| fails.join("; ")),
    });
    Ok(report)
}

/// Resolves one engine release, as [`check_file_lifted`] asks for it: `(engine, version)` →
/// the release's chat rules and the refusal codes its contract lets an encoder lift, or `Err`
/// (an unknown release, or one without proven chat rules) with the message the whole file
/// then fails with.
pub type LiftResolver<'r> = &'r dyn Fn(Engine, &str) -> Result<(ChatRules, RefusalSet), String>;

/// What [`check_file_lifted`] found for one engine of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiftTally {
    /// Chat cases checked (render-only files: none, they hold no engine truth).
    pub cases: usize,
    /// Cases that hit no scan code: the strict path, whatever is lifted.
    pub strict: usize,
    /// Cases that hit only codes the release may lift: encoded with those lifted.
    pub lifted: usize,
    /// Cases that hit a code the release may not lift (the encoder refuses them; the engine
    /// must refuse them too).
    pub not_liftable: usize,
    /// Cases whose ids are exactly `engine_token_ids[engine]`.
    pub ids: usize,
    /// Cases refused where `engine_errors` names the engine.
    pub refused: usize,
    /// How many cases hit each scan code.
    pub hits: BTreeMap<Refusal, usize>,
}

impl LiftTally {
    fn add(&mut self, other: &LiftTally) {
        self.cases += other.cases;
        self.strict += other.strict;
        self.lifted += other.lifted;
        self.not_liftable += other.not_liftable;
        self.ids += other.ids;
        self.refused += other.refused;
        for (r, n) in &other.hits {
            *self.hits.entry(*r).or_default() += n;
        }
    }

    /// Sums tallies (e.g. the files of one engine).
    pub fn sum<'t>(tallies: impl IntoIterator<Item = &'t LiftTally>) -> LiftTally {
        let mut out = LiftTally::default();
        for t in tallies {
            out.add(t);
        }
        out
    }
}

impl std::fmt::Display for LiftTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} chat cases: {} exact ids, {} refused as the engine refuses ({} strict, {} lifted, {} not liftable)",
            self.cases, self.ids, self.refused, self.strict, self.lifted, self.not_liftable
        )?;
        if !self.hits.is_empty() {
            let hits: Vec<String> = self.hits.iter().map(|(r, n)| format!("{r} {n}")).collect();
            write!(f, "; hits: {}", hits.join(", "))?;
        }
        Ok(())
    }
}

/// The result of [`check_file_lifted`]: the cases (as [`check_file_with`] reports them) and
/// one tally per engine the file records.
#[derive(Debug, Clone, Default)]
pub struct LiftedReport {
    /// One entry per chat case (completion cases are not requests the lift concerns).
    pub report: FileReport,
    /// `(engine, version, tally)` in [`Engine::ALL`] order.
    pub engines: Vec<(Engine, String, LiftTally)>,
}

/// Checks every chat case of a template vector file through the strict encoder, per engine
/// the file records, under the chat rules and liftable codes `resolve` gives for that
/// release. Per case and engine:
///
/// 1. the codes the request hits ([`Encoder::refusals_hit`]); with nothing lifted the encoder
///    must refuse with the first of them (the strict rules unchanged);
/// 2. if the release may lift them all: encoded with exactly those lifted, and again with
///    every liftable code lifted, the result must be `engine_token_ids[engine]` (and the
///    engine's rendered text) — through [`Encoder::encode_chat`] into a buffer of the exact
///    size, into a buffer one id short (truncated), and [`Encoder::encode_chat_to_vec`] — or,
///    where `engine_errors` names the engine, the refusal [`Refusal::TemplateRaised`];
/// 3. otherwise the encoder refuses with the first code it may not lift, and the engine must
///    reject the request (`engine_errors`).
///
/// Render-only files (no tokenizer) hold no engine truth: their cases are listed as passed
/// without engine checks, with a note.
pub fn check_file_lifted(
    bytes: &[u8],
    models: &Path,
    resolve: LiftResolver<'_>,
) -> Result<LiftedReport, String> {
    let probe: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if !matches!(
        detect(&probe),
        Some(VectorKind::Templates | VectorKind::ReleaseTemplates)
    ) {
        return Err("not a template vector file (the lifted check takes templates/*.json and versions/*/templates/*.json)".to_string());
    }
    let doc = kvtemplate::json::parse(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let top = doc.as_object().ok_or("not an object")?;
    let profile = top.get("profile").and_then(Json::as_str).unwrap_or("?");
    let model = top
        .get("model")
        .and_then(Json::as_str)
        .ok_or("no `model` field")?;
    let dir = models.join(slug(model));
    let tokenizer_available = !matches!(top.get("tokenizer_available"), Some(Json::Bool(false)));
    let cases = top
        .get("cases")
        .and_then(Json::as_array)
        .ok_or("no `cases` array")?;
    let chat_cases: Vec<&JsonObject<'_>> = cases
        .iter()
        .filter_map(Json::as_object)
        .filter(|c| c.get("kind").and_then(Json::as_str) == Some("chat"))
        .collect();
    let mut out = LiftedReport::default();
    let mut fails: Vec<Vec<String>> = vec![Vec::new(); chat_cases.len()];
    let mut shared: Option<std::sync::Arc<kvtoken::FastEncoder>> = None;
    for (e, version) in engine_versions_of(top)? {
        let (chat_rules, liftable) = resolve(e, &version)?;
        let mut base = spec_from_model_dir(&dir, e).map_err(|e| e.to_string())?;
        base.chat_rules = Some(chat_rules);
        if let (None, Some(bytes)) = (&shared, &base.tokenizer_json) {
            shared = Some(kvtemplate::parse_tokenizer(bytes).map_err(|e| e.to_string())?);
        }
        if base.tokenizer_json.is_some() {
            base.parsed_tokenizer = shared.clone();
        }
        let mut tally = LiftTally::default();
        if !tokenizer_available || base.tokenizer_json.is_none() {
            out.report.notes.push(format!(
                "{profile}: render-only (no tokenizer for {model}): no engine truth, {} not checked",
                e.as_str()
            ));
            out.engines.push((e, version, tally));
            continue;
        }
        let mut encoders: BTreeMap<u32, Encoder> = BTreeMap::new();
        for (c, case_fails) in chat_cases.iter().zip(fails.iter_mut()) {
            let res = check_lifted_case(c, e, &base, liftable, &mut encoders, &mut tally);
            if let Err(why) = res {
                case_fails.push(format!("{}: {why}", e.as_str()));
            }
        }
        out.engines.push((e, version, tally));
    }
    for (c, f) in chat_cases.iter().zip(fails) {
        let id = c.get("id").and_then(Json::as_str).unwrap_or("?");
        out.report.cases.push(CaseResult {
            name: format!("{profile}/{id}"),
            failure: (!f.is_empty()).then(|| f.join("; ")),
        });
    }
    Ok(out)
}

/// The encoder of `base` lifting `lifts`, built once per set.
fn lifted_encoder<'m>(
    encoders: &'m mut BTreeMap<u32, Encoder>,
    base: &kvtemplate::EncoderSpec,
    lifts: RefusalSet,
) -> Result<&'m Encoder, String> {
    use std::collections::btree_map::Entry;
    match encoders.entry(lifts.bits()) {
        Entry::Occupied(o) => Ok(o.into_mut()),
        Entry::Vacant(v) => {
            let enc = Encoder::new(base.clone().with_lifted(lifts))
                .map_err(|e| format!("encoder lifting {{{lifts}}}: {e}"))?;
            Ok(v.insert(enc))
        }
    }
}

/// What one encoder gave for a body: the rendered text and ids, or the refusal.
type Got = Outcome<(String, Vec<u32>)>;

fn encode_once(enc: &Encoder, body: &[u8], cap: usize) -> Result<Got, String> {
    let mut scratch = ScratchBuf::new();
    let mut out = vec![0u32; cap];
    match enc.encode_chat(body, 0, &mut out, &mut scratch) {
        Ok(Outcome::Done(n)) => {
            out.truncate(n.written);
            Ok(Outcome::Done((scratch.rendered().to_string(), out)))
        }
        Ok(Outcome::Refused(r)) => Ok(Outcome::Refused(r)),
        Err(e) => Err(format!("failed: {e}")),
    }
}

fn describe(got: &Got) -> String {
    match got {
        Outcome::Done((_, ids)) => format!("{} ids", ids.len()),
        Outcome::Refused(r) => format!("refused {r}"),
    }
}

fn check_lifted_case(
    c: &JsonObject<'_>,
    e: Engine,
    base: &kvtemplate::EncoderSpec,
    liftable: RefusalSet,
    encoders: &mut BTreeMap<u32, Encoder>,
    tally: &mut LiftTally,
) -> Result<(), String> {
    let name = e.as_str();
    let body = request_body(c, "model");
    let body = body.as_bytes();
    let want_err = obj_str(c.get("engine_errors").and_then(Json::as_object), name);
    let want = ids_of(
        c.get("engine_token_ids")
            .and_then(Json::as_object)
            .and_then(|o| o.get(name)),
    );
    let want_text = obj_str(c.get("engine_rendered").and_then(Json::as_object), name)
        .or_else(|| c.get("rendered").and_then(Json::as_str));
    tally.cases += 1;
    let strict = lifted_encoder(encoders, base, RefusalSet::EMPTY)?;
    let hits = strict.refusals_hit(body).map_err(|e| e.to_string())?;
    for r in hits.iter() {
        *tally.hits.entry(r).or_default() += 1;
    }
    let cap = want.as_ref().map_or(4096, |w| w.len().max(1));
    // 1. Lifting nothing changes nothing: the first code hit refuses.
    if let Some(first) = hits.first() {
        let got = encode_once(strict, body, cap)?;
        if got != Outcome::Refused(first) {
            return Err(format!(
                "nothing lifted: {} where the strict scan refuses {first}",
                describe(&got)
            ));
        }
    }
    // 3. A code the release may not lift: the encoder refuses, so must the engine.
    if let Some(blocked) = hits.difference(liftable).first() {
        tally.not_liftable += 1;
        let enc = lifted_encoder(encoders, base, hits.intersection(liftable))?;
        let got = encode_once(enc, body, cap)?;
        if got != Outcome::Refused(blocked) {
            return Err(format!(
                "hits {blocked}, which this release may not lift, yet {}",
                describe(&got)
            ));
        }
        return match want_err {
            Some(_) => {
                tally.refused += 1;
                Ok(())
            }
            None => Err(format!(
                "refused {blocked} (not liftable on this release) but the engine encodes it"
            )),
        };
    }
    if hits.is_empty() {
        tally.strict += 1;
    } else {
        tally.lifted += 1;
    }
    // 2. Encoded with exactly the codes hit lifted, and with everything liftable lifted.
    let mut sets = vec![hits];
    if liftable != hits {
        sets.push(liftable);
    }
    let mut outcome = None;
    for lifts in sets {
        let enc = lifted_encoder(encoders, base, lifts)?;
        let got = encode_once(enc, body, cap)?;
        match (&got, want_err, &want) {
            (Outcome::Refused(Refusal::TemplateRaised), Some(_), _) => {}
            (got, Some(err), _) => {
                return Err(format!(
                    "lifting {{{lifts}}}: {} but the engine refuses ({err})",
                    describe(got)
                ))
            }
            (Outcome::Done((text, ids)), None, Some(want)) => {
                if ids != want {
                    return Err(format!("lifting {{{lifts}}}: {}", first_diff(want, ids)));
                }
                if let Some(wt) = want_text {
                    if text != wt {
                        return Err(format!(
                            "lifting {{{lifts}}}: rendered differs:\n  want {wt:?}\n  got  {text:?}"
                        ));
                    }
                }
                check_output_paths(enc, body, want)
                    .map_err(|why| format!("lifting {{{lifts}}}: {why}"))?;
            }
            (got, None, None) => {
                return Err(format!(
                    "lifting {{{lifts}}}: {} but the vectors record no ids",
                    describe(got)
                ))
            }
            (Outcome::Refused(r), None, Some(_)) => {
                return Err(format!(
                    "lifting {{{lifts}}}: refused {r}, want the engine's ids"
                ))
            }
        }
        outcome = Some(got);
    }
    match outcome {
        Some(Outcome::Done(_)) => tally.ids += 1,
        Some(Outcome::Refused(_)) => tally.refused += 1,
        None => {}
    }
    Ok(())
}

/// The same ids through a buffer one id short (cut, `truncated`; tokenization stopped there,
/// the scratch holding exactly those ids) and through [`Encoder::encode_chat_to_vec`] (whole,
/// and capped one short).
fn check_output_paths(enc: &Encoder, body: &[u8], want: &[u32]) -> Result<(), String> {
    let short = want.len().saturating_sub(1);
    let cut = !want.is_empty();
    let mut scratch = ScratchBuf::new();
    let mut out = vec![0u32; short];
    match enc.encode_chat(body, 0, &mut out, &mut scratch) {
        Ok(Outcome::Done(n)) if n.written == short && n.truncated == cut => {
            if out.get(..short) != want.get(..short) || want.get(..short) != Some(scratch.ids()) {
                return Err("a short buffer does not hold the first ids".to_string());
            }
        }
        other => return Err(format!("a short buffer gave {other:?}")),
    }
    for (max, cut) in [(want.len(), false), (short, cut)] {
        match enc.encode_chat_to_vec(body, 0, max) {
            Ok(Outcome::Done(r)) if r.truncated == cut && want.get(..max) == Some(&r.ids[..]) => {}
            other => return Err(format!("encode_chat_to_vec(max {max}) gave {other:?}")),
        }
    }
    Ok(())
}
