//! Profile documents (`<root>/<profile-id>.yaml`, docs/contracts/registry.md §2): strict parse and field rules.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::contracts::{self, Engine};
use crate::error::{DocKind, Error, Result};
use crate::ids::{is_sha256_hex, is_valid_profile_id, slug};
use crate::locator::Locator;

/// A request surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
}

/// Which model names resolve to the profile (there is deliberately no `any`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AliasPolicy {
    /// Only `baseModel`.
    BaseModelOnly,
    /// `baseModel` and every entry of `allowedAliases`.
    List,
}

/// How engines hand message content to the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TemplateContentFormat {
    /// Content is a string.
    String,
    /// The template loops over OpenAI content parts.
    Openai,
}

/// The only clock policy: render `strftime_now` from UTC "now".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClockPolicy {
    /// `utc-date`.
    #[serde(rename = "utc-date")]
    UtcDate,
}

/// The closed request-feature vocabulary of `supportedFeatures` / `excludedFeatures`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// `plain`.
    Plain,
    /// `system`.
    System,
    /// `multi_turn`.
    MultiTurn,
    /// `tools`.
    Tools,
    /// `tool_calls`.
    ToolCalls,
    /// `multimodal`.
    Multimodal,
    /// `cache_salt`.
    CacheSalt,
    /// `lora_adapter`.
    LoraAdapter,
    /// `prompt_embeds`.
    PromptEmbeds,
    /// `thinking`.
    Thinking,
    /// `template_kwargs`.
    TemplateKwargs,
}

/// `tokenizerFile` (kvexact addition): the upstream file `tokenizerArtifact` pins, which is
/// also the file the engines load the tokenizer from. `tekken.json` and `tokenizer.model.v7`
/// name a Mistral checkpoint that has no `tokenizer.json`. Engines render such a checkpoint
/// with mistral_common, not a Jinja template. Which releases do so is catalog data
/// (`chat.renderers` keys `files:tekken.json` and `files:tokenizer.model.v7`,
/// docs/contracts/templates.md §13.6–§13.10 and §13.13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TokenizerFile {
    /// `tokenizer.json` (the default): a Hugging Face tokenizer.
    #[default]
    #[serde(rename = "tokenizer.json")]
    TokenizerJson,
    /// `tekken.json`: mistral_common's tekken tokenizer.
    #[serde(rename = "tekken.json")]
    Tekken,
    /// `tokenizer.model.v7`: mistral_common's SentencePiece v7 tokenizer.
    #[serde(rename = "tokenizer.model.v7")]
    SpmV7,
}

impl TokenizerFile {
    /// The file name, as written in the profile.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenizerFile::TokenizerJson => "tokenizer.json",
            TokenizerFile::Tekken => "tekken.json",
            TokenizerFile::SpmV7 => "tokenizer.model.v7",
        }
    }

    /// The catalog's checkpoint-layout key (`files:<file>`) for a Mistral tokenizer file,
    /// `None` for `tokenizer.json`.
    pub fn checkpoint_key(self) -> Option<&'static str> {
        match self {
            TokenizerFile::TokenizerJson => None,
            TokenizerFile::Tekken => Some("files:tekken.json"),
            TokenizerFile::SpmV7 => Some("files:tokenizer.model.v7"),
        }
    }

    /// Whether this is a Mistral tokenizer file rather than `tokenizer.json`.
    pub fn is_mistral(self) -> bool {
        self != TokenizerFile::TokenizerJson
    }
}

/// `renderPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RenderPolicy {
    /// Engine chat default; must be `true` when chat is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_generation_prompt: Option<bool>,
    /// Bound to `bos_token`; also the BOS id source for `completionsBos`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bos_token: Option<String>,
    /// Bound to `eos_token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eos_token: Option<String>,
    /// `utc-date` when the template calls `strftime_now`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_policy: Option<ClockPolicy>,
}

/// `engineQuirks.<contract-id>`: measured engine × model behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EngineQuirks {
    /// Completions prompt encoded as `BOS + encode(text, no specials)` (SGLang only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub completions_bos: bool,
    /// The challenge passes when the last expected block is echoed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub challenge_last_block: bool,
    /// The engine caches a prompt only in chunks of this many tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_chunk: Option<u32>,
}

/// A profile document (`ModelPromptProfile`), exactly as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Profile {
    /// Registry key.
    pub profile_id: String,
    /// Served model name.
    pub base_model: String,
    /// `config.json` `model_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_type: Option<String>,
    /// Contract id → quirks.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::ids::unique_map"
    )]
    pub engine_quirks: BTreeMap<String, EngineQuirks>,
    /// Upstream revision of the tokenizer (audit only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_revision: Option<String>,
    /// Locator of `tokenizer.json` beneath `artifacts/`.
    pub tokenizer_artifact: String,
    /// Pin of the tokenizer bytes.
    pub tokenizer_sha256: String,
    /// Which upstream file `tokenizerArtifact` pins (kvexact addition, optional;
    /// `tokenizer.json` when absent). See [`TokenizerFile`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_file: Option<TokenizerFile>,
    /// Locator of the pinned upstream `tokenizer_config.json` (kvexact addition, optional):
    /// engines on transformers 5 take their added tokens from its `added_tokens_decoder`
    /// (the catalog's `tokenizer.addedTokens` per release); without it kvexact uses
    /// `tokenizer.json`'s list, as the gateway does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_config_artifact: Option<String>,
    /// Pin of the `tokenizer_config.json` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_config_sha256: Option<String>,
    /// Locator of the chat template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_artifact: Option<String>,
    /// Pin of the template bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_sha256: Option<String>,
    /// `string` or `openai`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_content_format: Option<TemplateContentFormat>,
    /// Render policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_policy: Option<RenderPolicy>,
    /// Audit: renderer on the serving path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renderer_engine: Option<String>,
    /// Audit: renderer version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renderer_version: Option<String>,
    /// Audit: parity oracle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_engine: Option<String>,
    /// Audit: oracle version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_version: Option<String>,
    /// Surfaces this profile can serve.
    pub supported_apis: Vec<Api>,
    /// Which model names resolve here.
    pub alias_policy: AliasPolicy,
    /// Extra served names (with `list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_aliases: Option<Vec<String>>,
    /// Declared supported features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported_features: Option<Vec<Feature>>,
    /// Declared excluded features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_features: Option<Vec<Feature>>,
}

impl Profile {
    /// Strict parse (unknown key, wrong type, missing key → error) then [`Profile::validate`].
    /// `path` (relative to the root) names the file in errors.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let p: Profile =
            serde_yaml::from_slice(bytes).map_err(|e| Error::schema(DocKind::Profile, path, e))?;
        p.validate(path)?;
        Ok(p)
    }

    /// Does the profile serve `api`?
    pub fn supports(&self, api: Api) -> bool {
        self.supported_apis.contains(&api)
    }

    /// Every model name resolving to this profile: base model first, then aliases.
    pub fn model_names(&self) -> Vec<&str> {
        let mut v = vec![self.base_model.as_str()];
        if let Some(a) = &self.allowed_aliases {
            v.extend(a.iter().map(String::as_str));
        }
        v
    }

    /// The declared clock policy, if any.
    pub fn clock_policy(&self) -> Option<ClockPolicy> {
        self.render_policy.as_ref().and_then(|r| r.clock_policy)
    }

    /// Quirks for one contract id (defaults when none are declared).
    pub fn quirks(&self, contract_id: &str) -> EngineQuirks {
        self.engine_quirks
            .get(contract_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The quirks that apply on an engine release: those keyed by the release id, else those
    /// keyed by the contract it refines, else none.
    pub fn quirks_for_release(&self, release: &crate::releases::Release) -> EngineQuirks {
        self.engine_quirks
            .get(&release.id)
            .or_else(|| self.engine_quirks.get(&release.contract))
            .cloned()
            .unwrap_or_default()
    }

    /// The upstream tokenizer file (`tokenizerFile`, default `tokenizer.json`).
    pub fn tokenizer_file(&self) -> TokenizerFile {
        self.tokenizer_file.unwrap_or_default()
    }

    /// True when any contract sets `completionsBos`.
    pub fn needs_bos_id(&self) -> bool {
        self.engine_quirks.values().any(|q| q.completions_bos)
    }

    /// The field rules of docs/contracts/registry.md §2 (everything checkable without reading other files).
    pub fn validate(&self, path: &str) -> Result<()> {
        let bad = |field: &str, d: &str| Err(Error::invalid(DocKind::Profile, path, field, d));
        if !is_valid_profile_id(&self.profile_id) {
            return bad("profileId", "must match ^[A-Za-z0-9][A-Za-z0-9._-]*$");
        }
        if self.base_model.trim().is_empty() {
            return bad("baseModel", "must be non-empty");
        }
        // Quirks: keys are compiled contract ids, each entry sets at least one quirk.
        let catalog = contracts::builtin()?;
        for (cid, q) in &self.engine_quirks {
            let field = format!("engineQuirks.{cid}");
            let contract = match catalog.profile(cid) {
                Some(c) => c,
                None => match catalog
                    .release(cid)
                    .and_then(|r| catalog.profile(&r.contract))
                {
                    Some(c) => c,
                    None => return bad(&field, "not an engine-contract profile or release id"),
                },
            };
            if !q.completions_bos && !q.challenge_last_block && q.cache_chunk.is_none() {
                return bad(&field, "must set at least one quirk");
            }
            if q.cache_chunk == Some(0) {
                return bad(&format!("{field}.cacheChunk"), "must be > 0");
            }
            if q.completions_bos && contract.engine != Engine::Sglang {
                return bad(
                    &format!("{field}.completionsBos"),
                    "only the SGLang encoder accepts completionsBos",
                );
            }
        }
        if self.needs_bos_id()
            && self
                .render_policy
                .as_ref()
                .and_then(|r| r.bos_token.as_deref())
                .is_none()
        {
            return bad("renderPolicy.bosToken", "required by completionsBos");
        }
        // Tokenizer pin and locator.
        if !is_sha256_hex(&self.tokenizer_sha256) {
            return bad("tokenizerSha256", "must be 64 lowercase hex digits");
        }
        Locator::parse(&self.tokenizer_artifact, &self.tokenizer_sha256)
            .map_err(|d| Error::invalid(DocKind::Profile, path, "tokenizerArtifact", d))?;
        match (
            &self.tokenizer_config_artifact,
            &self.tokenizer_config_sha256,
        ) {
            (Some(loc), Some(pin)) => {
                if !is_sha256_hex(pin) {
                    return bad("tokenizerConfigSha256", "must be 64 lowercase hex digits");
                }
                Locator::parse(loc, pin).map_err(|d| {
                    Error::invalid(DocKind::Profile, path, "tokenizerConfigArtifact", d)
                })?;
            }
            (Some(_), None) => {
                return bad(
                    "tokenizerConfigSha256",
                    "required with tokenizerConfigArtifact",
                )
            }
            (None, Some(_)) => {
                return bad(
                    "tokenizerConfigSha256",
                    "forbidden without tokenizerConfigArtifact",
                )
            }
            (None, None) => {}
        }
        // Surfaces.
        if self.supported_apis.is_empty() {
            return bad("supportedApis", "must be non-empty");
        }
        if self.supported_apis.iter().collect::<BTreeSet<_>>().len() != self.supported_apis.len() {
            return bad("supportedApis", "duplicate entry");
        }
        let chat = self.supports(Api::Chat);
        // A Mistral tokenizer file: mistral_common renders chat and builds the completions
        // ids (BOS + text), so there is no template, no tokenizer config and no quirk that
        // reads tokenizer.json.
        let mistral = self.tokenizer_file().is_mistral();
        if mistral {
            let file = self.tokenizer_file().as_str();
            let forbid = |field: &str| {
                bad(
                    field,
                    &format!("forbidden with tokenizerFile {file} (mistral_common renders it)"),
                )
            };
            if self.template_artifact.is_some() || self.template_sha256.is_some() {
                return forbid("templateArtifact");
            }
            if self.template_content_format.is_some() {
                return forbid("templateContentFormat");
            }
            if self.tokenizer_config_artifact.is_some() {
                return forbid("tokenizerConfigArtifact");
            }
            if self.needs_bos_id() {
                return forbid("engineQuirks.completionsBos");
            }
            if self.clock_policy().is_some() {
                return forbid("renderPolicy.clockPolicy");
            }
        }
        // Template trio.
        match (&self.template_artifact, &self.template_sha256) {
            (Some(loc), Some(pin)) => {
                if !is_sha256_hex(pin) {
                    return bad("templateSha256", "must be 64 lowercase hex digits");
                }
                Locator::parse(loc, pin)
                    .map_err(|d| Error::invalid(DocKind::Profile, path, "templateArtifact", d))?;
                if self.template_content_format.is_none() {
                    return bad("templateContentFormat", "required with templateArtifact");
                }
            }
            (Some(_), None) => return bad("templateSha256", "required with templateArtifact"),
            (None, Some(_)) => return bad("templateSha256", "forbidden without templateArtifact"),
            (None, None) => {
                if chat && !mistral {
                    return bad(
                        "templateArtifact",
                        "required when supportedApis contains chat",
                    );
                }
                if self.template_content_format.is_some() {
                    return bad(
                        "templateContentFormat",
                        "forbidden without templateArtifact",
                    );
                }
                if self.clock_policy().is_some() {
                    return bad("renderPolicy.clockPolicy", "requires a template");
                }
            }
        }
        if chat {
            let agp = self
                .render_policy
                .as_ref()
                .and_then(|r| r.add_generation_prompt);
            if agp != Some(true) {
                return bad(
                    "renderPolicy.addGenerationPrompt",
                    "must be true when chat is supported",
                );
            }
        }
        // Aliases.
        match (self.alias_policy, &self.allowed_aliases) {
            (AliasPolicy::BaseModelOnly, Some(_)) => {
                return bad(
                    "allowedAliases",
                    "forbidden with aliasPolicy base_model_only",
                )
            }
            (AliasPolicy::List, None) => {
                return bad("allowedAliases", "required with aliasPolicy list")
            }
            (AliasPolicy::List, Some(list)) => {
                if list.is_empty() {
                    return bad("allowedAliases", "must be non-empty with aliasPolicy list");
                }
                let mut seen = BTreeSet::from([slug(&self.base_model)]);
                for a in list {
                    if a.trim().is_empty() {
                        return bad("allowedAliases", "empty alias");
                    }
                    if !seen.insert(slug(a)) {
                        return bad("allowedAliases", &format!("duplicate alias {a:?}"));
                    }
                }
            }
            (AliasPolicy::BaseModelOnly, None) => {}
        }
        // Feature lists.
        for (field, list) in [
            ("supportedFeatures", &self.supported_features),
            ("excludedFeatures", &self.excluded_features),
        ] {
            if let Some(l) = list {
                if l.iter().collect::<BTreeSet<_>>().len() != l.len() {
                    return bad(field, "duplicate entry");
                }
            }
        }
        if let (Some(s), Some(e)) = (&self.supported_features, &self.excluded_features) {
            if let Some(f) = s.iter().find(|f| e.contains(f)) {
                return bad("excludedFeatures", &format!("{f:?} is also supported"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const R1: &str = "profileId: r1-distill-qwen-15b-v1
baseModel: deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B
modelType: qwen2
engineQuirks:
  sglang-kv-rank-v1:
    completionsBos: true
tokenizerRevision: ad9f0ae0864d7fbcd1cd905e3c6c5b069cc8b562
tokenizerArtifact: sha256/88145e3c3249adc2546ede277e9819d6e405e19072456e4b521cbc724bd60773
tokenizerSha256: 88145e3c3249adc2546ede277e9819d6e405e19072456e4b521cbc724bd60773
templateArtifact: sha256/56a1447ad31926fdc21fb07e56e5642bd9c850c4f52d8c8af7bbe5f079a84f5f
templateSha256: 56a1447ad31926fdc21fb07e56e5642bd9c850c4f52d8c8af7bbe5f079a84f5f
templateContentFormat: string
renderPolicy:
  addGenerationPrompt: true
  bosToken: \"<｜begin▁of▁sentence｜>\"
  eosToken: \"<｜end▁of▁sentence｜>\"
supportedApis:
  - completions
  - chat
aliasPolicy: base_model_only
";

    fn refuse(from: &str, to: &str) -> Error {
        assert!(R1.contains(from), "fixture lacks {from:?}");
        let doc = R1.replacen(from, to, 1);
        match Profile::parse(doc.as_bytes(), "p.yaml") {
            Ok(_) => panic!("accepted after {from:?} -> {to:?}"),
            Err(e) => {
                assert_eq!(e.path(), "p.yaml");
                e
            }
        }
    }

    #[test]
    fn real_profile_parses() {
        let p = Profile::parse(R1.as_bytes(), "p.yaml").unwrap();
        assert!(p.needs_bos_id());
        assert!(p.quirks("sglang-kv-rank-v1").completions_bos);
        assert!(!p.quirks("vllm-kv-map-v2").completions_bos);
        assert_eq!(p.supported_apis, [Api::Completions, Api::Chat]);
    }

    #[test]
    fn schema_errors_name_the_field() {
        let e = refuse("modelType: qwen2", "modelType: qwen2\nblockSize: 16");
        assert_eq!(e.code(), "PROFILE_SCHEMA");
        assert!(e.to_string().contains("blockSize"), "{e}");
        let e = refuse(
            "    completionsBos: true",
            "    completionsBos: true\n    hashAlgo: x",
        );
        assert!(e.to_string().contains("hashAlgo"), "{e}");
        let e = refuse("completionsBos: true", "completionsBos: 1");
        assert_eq!(e.code(), "PROFILE_SCHEMA");
        let e = refuse("  - chat", "  - embeddings");
        assert_eq!(e.code(), "PROFILE_SCHEMA");
        let e = refuse("aliasPolicy: base_model_only", "aliasPolicy: any");
        assert_eq!(e.code(), "PROFILE_SCHEMA");
        let e = refuse("profileId: r1-distill-qwen-15b-v1\n", "");
        assert!(e.to_string().contains("profileId"), "{e}");
        let e = refuse(
            "aliasPolicy: base_model_only",
            "aliasPolicy: base_model_only\n---\na: 1",
        );
        assert_eq!(e.code(), "PROFILE_SCHEMA");
        // Duplicate keys (top level and inside engineQuirks) are refused, not "last wins".
        let e = refuse("modelType: qwen2", "modelType: qwen2\nmodelType: llama");
        assert_eq!(e.code(), "PROFILE_SCHEMA");
        let e = refuse(
            "    completionsBos: true",
            "    completionsBos: true\n  sglang-kv-rank-v1:\n    cacheChunk: 64",
        );
        assert_eq!(e.code(), "PROFILE_SCHEMA");
        // YAML merge keys are not a way to smuggle fields in.
        let e = refuse(
            "aliasPolicy: base_model_only",
            "aliasPolicy: base_model_only\n<<: {x: 1}",
        );
        assert_eq!(e.code(), "PROFILE_SCHEMA");
    }

    #[test]
    fn field_rules() {
        let cases = [
            ("profileId: r1", "profileId: ../r1", "profileId"),
            ("sglang-kv-rank-v1:", "sglang-kv-rank-v9:", "engineQuirks.sglang-kv-rank-v9"),
            ("sglang-kv-rank-v1:", "vllm-kv-map-v2:", "engineQuirks.vllm-kv-map-v2.completionsBos"),
            ("completionsBos: true", "completionsBos: false", "engineQuirks.sglang-kv-rank-v1"),
            ("completionsBos: true", "cacheChunk: 0", "engineQuirks.sglang-kv-rank-v1.cacheChunk"),
            ("  bosToken: \"<｜begin▁of▁sentence｜>\"\n", "", "renderPolicy.bosToken"),
            ("tokenizerSha256: 88", "tokenizerSha256: 98", "tokenizerArtifact"),
            ("tokenizerSha256: 88145e3c", "tokenizerSha256: 88145E3C", "tokenizerSha256"),
            ("templateArtifact: sha256/", "templateArtifact: ../", "templateArtifact"),
            ("templateContentFormat: string\n", "", "templateContentFormat"),
            ("  addGenerationPrompt: true", "  addGenerationPrompt: false", "renderPolicy.addGenerationPrompt"),
            ("  - completions\n  - chat", "  - chat\n  - chat", "supportedApis"),
            ("aliasPolicy: base_model_only", "aliasPolicy: list", "allowedAliases"),
            ("aliasPolicy: base_model_only", "aliasPolicy: list\nallowedAliases: []", "allowedAliases"),
            ("aliasPolicy: base_model_only", "aliasPolicy: list\nallowedAliases: [a, a]", "allowedAliases"),
            ("aliasPolicy: base_model_only", "aliasPolicy: list\nallowedAliases: ['']", "allowedAliases"),
            ("aliasPolicy: base_model_only", "aliasPolicy: base_model_only\nallowedAliases: [a]", "allowedAliases"),
            ("aliasPolicy: base_model_only", "aliasPolicy: base_model_only\nsupportedFeatures: [tools]\nexcludedFeatures: [tools]", "excludedFeatures"),
            ("aliasPolicy: base_model_only", "aliasPolicy: base_model_only\nsupportedFeatures: [plain, plain]", "supportedFeatures"),
            ("baseModel: deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "baseModel: ' '", "baseModel"),
        ];
        for (from, to, field) in cases {
            match refuse(from, to) {
                Error::Invalid { field: f, .. } => assert_eq!(f, field, "{to}"),
                e => panic!("{to}: {e}"),
            }
        }
        // Unknown feature name is a schema error.
        assert_eq!(
            refuse(
                "aliasPolicy: base_model_only",
                "aliasPolicy: base_model_only\nsupportedFeatures: [telepathy]"
            )
            .code(),
            "PROFILE_SCHEMA"
        );
    }

    #[test]
    fn completions_only_profile_without_template() {
        let doc = "profileId: c\nbaseModel: o/m\ntokenizerArtifact: tok/tokenizer.json\ntokenizerSha256: {h}\nsupportedApis: [completions]\naliasPolicy: list\nallowedAliases: [m, o2/m]\n"
            .replace("{h}", &"ab".repeat(32));
        let p = Profile::parse(doc.as_bytes(), "c.yaml").unwrap();
        assert_eq!(p.model_names(), ["o/m", "m", "o2/m"]);
        let with_clock = doc.replace(
            "supportedApis",
            "renderPolicy: {clockPolicy: utc-date}\nsupportedApis",
        );
        assert!(Profile::parse(with_clock.as_bytes(), "c.yaml").is_err());
        let chat = doc.replace("[completions]", "[chat]");
        assert!(Profile::parse(chat.as_bytes(), "c.yaml").is_err());
    }
}
