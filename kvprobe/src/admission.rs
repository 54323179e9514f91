//! Rule admission (docs/contracts/registry.md §9.4 and §2's `modelType` rule): may a strict rule serving
//! `model` through `mode` on the engine contract `contract_id` bind this published profile?
//!
//! [`admit`] answers `Ok(())` or the first [`AdmissionRefusal`] it finds, in this order:
//!
//! | Rule ([`Rule::as_str`]) | Refused when |
//! |---|---|
//! | `model_name_empty` | the rule's `model_name` is empty (or only whitespace) |
//! | `model_not_served` | `model_name` is neither `baseModel` nor, with `aliasPolicy: list`, an allowed alias (compared by slug, as [`Generation::profile_for_model`] looks names up) |
//! | `contracts_unavailable` | the compiled engine-contract catalog does not load |
//! | `unknown_contract` | `contract_id` is not a contract of that catalog (§10.3) |
//! | `contract_no_kv_plane` | the contract's engine has no KV plane and no encoder (llama.cpp) |
//! | `surface_not_supported` | a surface `mode` serves is not in `supportedApis` |
//! | `renderer_missing` | `mode` serves chat and the profile has no template, or the template does not compile |
//! | `engine_renderer` | chat on an engine that ignores the template for this `modelType` (`gpt_oss` on vLLM/TensorRT-LLM: Harmony; `mistral3` on vLLM/SGLang: mistral_common), for a profile without `modelType` whose tokenizer or template is harmony's (`kvtemplate::renderer_hint`), or for a Mistral `tokenizerFile` (`tekken.json`, `tokenizer.model.v7`), unless the rule names one engine release whose vectors prove kvexact's renderer for it (catalog `chat.renderers`: harmony and mistral_common on vLLM 0.31.0/0.33.0, mistral_common's text form for tekken on SGLang 0.5.19) |
//! | `quirk_incompatible` | an `engineQuirks` key is not a contract, or the contract's quirks cannot apply to it (`completionsBos` off SGLang, `completionsBos` without a resolvable BOS) |
//! | `tokenizer_unloadable` | `tokenizer.json` does not load |
//! | `encoder_unbuildable` | the encoder fails for any other reason (e.g. clock policy and template disagree) |
//!
//! The last four are decided by building the encoder exactly as the hot path will
//! ([`crate::bridge::encoder`]), then dropping it: admission costs one template compilation (the
//! tokenizer parsed when the registry was loaded is shared), never a request.
//!
//! The rule-level checks of §9.4 that need the rule itself (`kvExactMode`, P/D, the vLLM
//! none-hash seed, changing a bound profile) stay with the caller: they concern the rule, not
//! the profile.
//!
//! [`Generation::profile_for_model`]: kvprofile_core::Generation::profile_for_model

use std::fmt;

use kvprofile_core::contracts::{self, Engine};
use kvprofile_core::ids::slug;
use kvprofile_core::{AliasPolicy, Api, LoadedProfile, Profile};

use crate::fixtures::ApiMode;

/// The admission rules an [`AdmissionRefusal`] names. The string forms ([`Rule::as_str`]) are stable: the
/// C ABI hands them out as the error object's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// `model_name` is empty.
    ModelNameEmpty,
    /// `model_name` is neither the base model nor an allowed alias.
    ModelNotServed,
    /// The compiled engine-contract catalog does not load.
    ContractsUnavailable,
    /// The contract id is not in the engine-contract catalog.
    UnknownContract,
    /// The contract has no KV plane and no encoder (llama.cpp).
    ContractNoKvPlane,
    /// The rule serves a surface the profile does not list in `supportedApis`.
    SurfaceNotSupported,
    /// Chat is served but there is no compilable template.
    RendererMissing,
    /// The engine renders this `modelType`'s chat with its own renderer, not the template.
    EngineRenderer,
    /// The profile's engine quirks cannot apply to this contract.
    QuirkIncompatible,
    /// `tokenizer.json` does not load.
    TokenizerUnloadable,
    /// The encoder cannot be built for another reason.
    EncoderUnbuildable,
}

impl Rule {
    /// Every rule, in the order [`admit`] checks them.
    pub const ALL: &'static [Rule] = &[
        Rule::ModelNameEmpty,
        Rule::ModelNotServed,
        Rule::ContractsUnavailable,
        Rule::UnknownContract,
        Rule::ContractNoKvPlane,
        Rule::SurfaceNotSupported,
        Rule::RendererMissing,
        Rule::EngineRenderer,
        Rule::QuirkIncompatible,
        Rule::TokenizerUnloadable,
        Rule::EncoderUnbuildable,
    ];

    /// The stable machine name, e.g. `"model_not_served"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Rule::ModelNameEmpty => "model_name_empty",
            Rule::ModelNotServed => "model_not_served",
            Rule::ContractsUnavailable => "contracts_unavailable",
            Rule::UnknownContract => "unknown_contract",
            Rule::ContractNoKvPlane => "contract_no_kv_plane",
            Rule::SurfaceNotSupported => "surface_not_supported",
            Rule::RendererMissing => "renderer_missing",
            Rule::EngineRenderer => "engine_renderer",
            Rule::QuirkIncompatible => "quirk_incompatible",
            Rule::TokenizerUnloadable => "tokenizer_unloadable",
            Rule::EncoderUnbuildable => "encoder_unbuildable",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a rule may not bind the profile: the [`Rule`] and a message for operators. Its
/// `Display` form is `"<rule>: <detail>"`, so every message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: {detail}")]
pub struct AdmissionRefusal {
    /// The rule that refused.
    pub rule: Rule,
    /// What was found (profile id, model name, contract …), without the rule name.
    pub detail: String,
}

impl AdmissionRefusal {
    fn new(rule: Rule, detail: impl Into<String>) -> AdmissionRefusal {
        AdmissionRefusal {
            rule,
            detail: detail.into(),
        }
    }
}

fn api_name(api: Api) -> &'static str {
    match api {
        Api::Chat => "chat",
        Api::Completions => "completions",
    }
}

/// Does `model` name this profile: its base model or, with `aliasPolicy: list`, one of its
/// allowed aliases, compared by slug (`/` → `__`) as the registry's lookup does.
pub fn serves_model(profile: &Profile, model: &str) -> bool {
    let want = slug(model);
    if slug(&profile.base_model) == want {
        return true;
    }
    profile.alias_policy == AliasPolicy::List
        && profile
            .allowed_aliases
            .iter()
            .flatten()
            .any(|a| slug(a) == want)
}

/// The engine that renders `model_type`'s chat with its own renderer instead of the chat
/// template (docs/contracts/registry.md §2 `modelType`), and that renderer's name.
fn engine_renderer(model_type: &str, engine: Engine) -> Option<&'static str> {
    match (model_type, engine) {
        ("gpt_oss", Engine::Vllm | Engine::Trtllm) => Some("Harmony"),
        ("mistral3", Engine::Vllm | Engine::Sglang) => Some("mistral_common"),
        _ => None,
    }
}

/// Whether `contract_id` names one engine release whose catalog renderer for the profile
/// (`chat.renderers`, by tokenizer file or model type) is proven and is one kvexact has
/// (harmony, mistral_common): the reason when not.
fn proven_own_renderer(
    profile: &LoadedProfile,
    catalog: &contracts::ContractCatalog,
    contract_id: &str,
) -> Result<(), String> {
    if catalog.release(contract_id).is_none() {
        return Err(format!(
            "the rule names contract {contract_id}, not one engine release whose vectors \
             prove that renderer"
        ));
    }
    let encoder = crate::bridge::encoder_for_id(profile, contract_id).map_err(|e| e.to_string())?;
    match encoder.renderer() {
        kvtemplate::ChatRenderer::Harmony(_) | kvtemplate::ChatRenderer::Mistral(_) => Ok(()),
        kvtemplate::ChatRenderer::Unknown(why) => Err(why),
        kvtemplate::ChatRenderer::Jinja => Err(format!(
            "no vectors of {contract_id} prove that renderer for this checkpoint"
        )),
    }
}

/// Judges whether a rule serving `model` through `mode` on the engine contract `contract_id`
/// (e.g. `vllm-kv-map-v2`) may bind `profile`. Returns the first refusal in the order of the
/// module table. Builds (and drops) the profile's encoder for the contract.
pub fn admit(
    profile: &LoadedProfile,
    model: &str,
    contract_id: &str,
    mode: ApiMode,
) -> Result<(), AdmissionRefusal> {
    let p = &profile.profile;
    let id = &p.profile_id;
    if model.trim().is_empty() {
        return Err(AdmissionRefusal::new(
            Rule::ModelNameEmpty,
            format!("the rule names no model (profile {id})"),
        ));
    }
    if !serves_model(p, model) {
        let aliases = match (p.alias_policy, &p.allowed_aliases) {
            (AliasPolicy::List, Some(a)) => format!(" nor an allowed alias {a:?}"),
            _ => " (aliasPolicy base_model_only)".to_string(),
        };
        return Err(AdmissionRefusal::new(
            Rule::ModelNotServed,
            format!(
                "model {model:?} is not profile {id}'s baseModel {:?}{aliases}",
                p.base_model
            ),
        ));
    }
    let catalog = contracts::builtin()
        .map_err(|e| AdmissionRefusal::new(Rule::ContractsUnavailable, e.to_string()))?;
    let contract = catalog
        .profile(contract_id)
        .or_else(|| {
            catalog
                .release(contract_id)
                .and_then(|r| catalog.profile(&r.contract))
        })
        .ok_or_else(|| {
            AdmissionRefusal::new(
                Rule::UnknownContract,
                format!("{contract_id:?} is not an engine contract or release"),
            )
        })?;
    if !contract.engine.has_kv_plane() {
        return Err(AdmissionRefusal::new(
            Rule::ContractNoKvPlane,
            format!(
                "contract {contract_id} ({}) has no KV plane and no encoder",
                contract.engine
            ),
        ));
    }
    for api in [Api::Chat, Api::Completions] {
        if mode.serves(api) && !p.supports(api) {
            return Err(AdmissionRefusal::new(
                Rule::SurfaceNotSupported,
                format!(
                    "the rule serves {} but profile {id} supports {:?}",
                    api_name(api),
                    p.supported_apis
                        .iter()
                        .map(|a| api_name(*a))
                        .collect::<Vec<_>>()
                ),
            ));
        }
    }
    let chat = mode.serves(Api::Chat);
    // A checkpoint the engines render without its Jinja template (a Mistral tokenizer file, or
    // a model type with its own renderer): chat is admitted only on one engine release whose
    // vectors prove kvexact's renderer for it (catalog `chat.renderers`).
    let own_renderer = match p.model_type.as_deref() {
        _ if p.tokenizer_file().is_mistral() => Some((
            format!("tokenizerFile {}", p.tokenizer_file().as_str()),
            "mistral_common",
        )),
        Some(mt) => engine_renderer(mt, contract.engine).map(|r| (format!("modelType {mt}"), r)),
        None => None,
    };
    if let (true, Some((what, renderer))) = (chat, own_renderer) {
        if let Err(why) = proven_own_renderer(profile, catalog, contract_id) {
            return Err(AdmissionRefusal::new(
                Rule::EngineRenderer,
                format!(
                    "{} renders profile {id}'s chat ({what}) with {renderer}, not a chat \
                     template, and {why}; completions stay allowed",
                    contract.engine
                ),
            ));
        }
    } else if chat && profile.artifacts.template.is_none() {
        return Err(AdmissionRefusal::new(
            Rule::RendererMissing,
            format!("the rule serves chat but profile {id} has no chat template"),
        ));
    }
    if let Some(key) = p
        .engine_quirks
        .keys()
        .find(|k| catalog.profile(k).is_none() && catalog.release(k).is_none())
    {
        return Err(AdmissionRefusal::new(
            Rule::QuirkIncompatible,
            format!("profile {id}: engineQuirks key {key:?} is not an engine contract"),
        ));
    }
    let quirks = match catalog.release(contract_id) {
        Some(r) => p.quirks_for_release(r),
        None => p.quirks(contract_id),
    };
    if quirks.completions_bos && contract.engine != Engine::Sglang {
        return Err(AdmissionRefusal::new(
            Rule::QuirkIncompatible,
            format!(
                "profile {id}: engineQuirks.{contract_id}.completionsBos is an SGLang quirk; \
                 contract {contract_id} is {}",
                contract.engine
            ),
        ));
    }
    match crate::bridge::encoder_for_id(profile, contract_id) {
        // No modelType, but the files are a checkpoint the engine renders without its Jinja
        // template (gpt-oss's harmony tokens: `kvtemplate::renderer_hint`): chat refused.
        Ok(enc) if chat && p.model_type.is_none() => match enc.renderer() {
            kvtemplate::ChatRenderer::Unknown(why) => Err(AdmissionRefusal::new(
                Rule::EngineRenderer,
                format!("profile {id} on {contract_id}: {why}; completions stay allowed"),
            )),
            _ => Ok(()),
        },
        Ok(_) => Ok(()),
        Err(e) => {
            let rule = match &e {
                crate::Error::Encoder(kvtemplate::Error::TemplateCompile(_)) => {
                    Rule::RendererMissing
                }
                crate::Error::Encoder(
                    kvtemplate::Error::TokenizerLoad(_) | kvtemplate::Error::Tokenize(_),
                ) => Rule::TokenizerUnloadable,
                crate::Error::Encoder(kvtemplate::Error::Spec(_)) if quirks.completions_bos => {
                    Rule::QuirkIncompatible
                }
                _ => Rule::EncoderUnbuildable,
            };
            Err(AdmissionRefusal::new(
                rule,
                format!("profile {id} on {contract_id}: {e}"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvprofile_core::{EngineQuirks, Generation, LoadOptions, TrustPolicy};
    use std::path::Path;
    use std::sync::{Arc, OnceLock};

    const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
    const QWEN3: &str = "qwen3-06b-default-v1";
    const QWEN25: &str = "qwen25-7b-instruct-v1";

    fn generation() -> &'static Generation {
        static G: OnceLock<Generation> = OnceLock::new();
        G.get_or_init(|| {
            let opts = LoadOptions {
                policy: TrustPolicy::for_current_user(),
                ..LoadOptions::default()
            };
            Generation::load(
                Path::new(REGISTRY),
                1,
                &opts,
                &kvtemplate::KvtemplateValidator,
            )
            .expect("testdata/registry loads")
        })
    }

    fn loaded(id: &str) -> LoadedProfile {
        LoadedProfile::clone(generation().profile(id).expect("profile"))
    }

    /// A tiny `tokenizer.json` with `<|endoftext|>` as a special added token.
    const TINY_TOKENIZER: &str = r#"{"version":"1.0","added_tokens":[{"id":0,"content":"<|endoftext|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"model":{"type":"WordLevel","vocab":{"<|endoftext|>":0,"<unk>":1,"a":2},"unk_token":"<unk>"}}"#;

    /// The Qwen3 profile (real template) with the tiny tokenizer, for edited copies: the rules
    /// under test do not depend on the vocabulary, and a 10 MB tokenizer per case is slow.
    fn light() -> LoadedProfile {
        let mut lp = loaded(QWEN3);
        lp.artifacts.tokenizer.bytes = Arc::from(TINY_TOKENIZER.as_bytes());
        lp
    }

    fn rule(r: Result<(), AdmissionRefusal>) -> Option<Rule> {
        r.err().map(|e| {
            assert!(
                e.to_string().starts_with(&format!("{}: ", e.rule.as_str())),
                "message names the rule: {e}"
            );
            e.rule
        })
    }

    #[test]
    fn rule_names_are_unique_snake_case() {
        for (i, r) in Rule::ALL.iter().enumerate() {
            let s = r.as_str();
            assert!(
                s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{s}"
            );
            assert!(Rule::ALL[i + 1..].iter().all(|o| o.as_str() != s));
            assert_eq!(r.to_string(), s);
        }
    }

    #[test]
    fn admission_real_profiles_admit() {
        let g = generation();
        // (Each admission loads the real tokenizer: a few cases only; the ffi tests run the
        // full profile × contract matrix.)
        let p = g.profile(QWEN3).unwrap();
        assert_eq!(
            admit(p, "Qwen/Qwen3-0.6B", "vllm-kv-map-v2", ApiMode::Both),
            Ok(())
        );
        // The slug form of the name.
        assert_eq!(
            admit(p, "Qwen__Qwen3-0.6B", "trtllm-kv-http-v1", ApiMode::Chat),
            Ok(())
        );
        let p25 = g.profile(QWEN25).unwrap();
        assert_eq!(
            admit(
                p25,
                "Qwen/Qwen2.5-7B-Instruct",
                "sglang-kv-rank-v1",
                ApiMode::Both
            ),
            Ok(())
        );
        // The listed alias of the list-policy profile.
        assert_eq!(
            admit(
                p25,
                "qwen2.5-7b-instruct",
                "trtllm-kv-http-preview-v1",
                ApiMode::Completions
            ),
            Ok(())
        );
    }

    #[test]
    fn admission_model_name_rules() {
        let g = generation();
        let p = g.profile(QWEN3).unwrap();
        let c = "vllm-kv-map-v2";
        for m in ["", "  "] {
            assert_eq!(
                rule(admit(p, m, c, ApiMode::Both)),
                Some(Rule::ModelNameEmpty)
            );
        }
        for m in [
            "Qwen/Qwen2.5-7B-Instruct", // another profile's model
            "qwen2.5-7b-instruct",      // another profile's alias
            "qwen/qwen3-0.6b",          // case matters
            "Qwen/Qwen3-0.6B ",
            "Qwen3-0.6B",
        ] {
            assert_eq!(
                rule(admit(p, m, c, ApiMode::Both)),
                Some(Rule::ModelNotServed),
                "{m:?}"
            );
        }
        // The model rules come before the contract rules.
        assert_eq!(
            rule(admit(p, "x/y", "nope-v1", ApiMode::Both)),
            Some(Rule::ModelNotServed)
        );
    }

    #[test]
    fn admission_aliases_follow_the_alias_policy() {
        let mut lp = light();
        lp.profile.allowed_aliases = Some(vec!["org/my-alias".into()]);
        lp.profile.alias_policy = AliasPolicy::List;
        let c = "sglang-kv-rank-v1";
        for m in ["org/my-alias", "org__my-alias", "Qwen/Qwen3-0.6B"] {
            assert_eq!(admit(&lp, m, c, ApiMode::Completions), Ok(()), "{m}");
        }
        // Aliases count only under `aliasPolicy: list`.
        lp.profile.alias_policy = AliasPolicy::BaseModelOnly;
        assert_eq!(
            rule(admit(&lp, "org/my-alias", c, ApiMode::Completions)),
            Some(Rule::ModelNotServed)
        );
    }

    #[test]
    fn admission_contract_rules() {
        let g = generation();
        let p = g.profile(QWEN25).unwrap();
        let m = "Qwen/Qwen2.5-7B-Instruct";
        for c in [
            "",
            "vllm",
            "vllm-kv-v1",
            "sglang-kv-rank-v9",
            "VLLM-KV-MAP-V2",
        ] {
            assert_eq!(
                rule(admit(p, m, c, ApiMode::Both)),
                Some(Rule::UnknownContract),
                "{c:?}"
            );
        }
        assert_eq!(
            rule(admit(p, m, "llamacpp-nokv-v1", ApiMode::Completions)),
            Some(Rule::ContractNoKvPlane)
        );
    }

    #[test]
    fn admission_surfaces_and_renderer() {
        // A completions-only profile without a template (a valid §2 document).
        let mut lp = light();
        lp.profile.supported_apis = vec![Api::Completions];
        lp.profile.template_artifact = None;
        lp.profile.template_sha256 = None;
        lp.profile.template_content_format = None;
        lp.artifacts.template = None;
        let (m, c) = ("Qwen/Qwen3-0.6B", "vllm-kv-map-v2");
        assert_eq!(admit(&lp, m, c, ApiMode::Completions), Ok(()));
        for mode in [ApiMode::Chat, ApiMode::Both] {
            assert_eq!(
                rule(admit(&lp, m, c, mode)),
                Some(Rule::SurfaceNotSupported)
            );
        }
        // A chat-only profile refuses a rule serving completions too.
        let mut chat_only = light();
        chat_only.profile.supported_apis = vec![Api::Chat];
        assert_eq!(admit(&chat_only, m, c, ApiMode::Chat), Ok(()));
        assert_eq!(
            rule(admit(&chat_only, m, c, ApiMode::Both)),
            Some(Rule::SurfaceNotSupported)
        );
        // Chat declared but no template bytes: renderer missing.
        let mut no_tpl = light();
        no_tpl.artifacts.template = None;
        assert_eq!(
            rule(admit(&no_tpl, m, c, ApiMode::Chat)),
            Some(Rule::RendererMissing)
        );
        assert_eq!(admit(&no_tpl, m, c, ApiMode::Completions), Ok(()));
        // A template that does not compile.
        let mut bad_tpl = light();
        if let Some(t) = bad_tpl.artifacts.template.as_mut() {
            t.bytes = Arc::from(&b"{% if %}"[..]);
        }
        assert_eq!(
            rule(admit(&bad_tpl, m, c, ApiMode::Chat)),
            Some(Rule::RendererMissing)
        );
    }

    #[test]
    fn admission_engine_renderer_follows_model_type() {
        let m = "Qwen/Qwen3-0.6B";
        for (model_type, refused) in [
            (
                "gpt_oss",
                ["vllm-kv-map-v2", "vllm-kv-array-v1", "trtllm-kv-http-v1"],
            ),
            (
                "mistral3",
                ["vllm-kv-map-v2", "vllm-kv-array-v1", "sglang-kv-rank-v1"],
            ),
        ] {
            let mut lp = light();
            lp.profile.model_type = Some(model_type.into());
            for c in refused {
                for mode in [ApiMode::Chat, ApiMode::Both] {
                    let r = admit(&lp, m, c, mode);
                    assert_eq!(
                        rule(r.clone()),
                        Some(Rule::EngineRenderer),
                        "{model_type} {c}"
                    );
                    assert!(r.unwrap_err().detail.contains(model_type));
                }
                assert_eq!(admit(&lp, m, c, ApiMode::Completions), Ok(()), "{c}");
            }
            let allowed = if model_type == "gpt_oss" {
                "sglang-kv-rank-v1"
            } else {
                "trtllm-kv-http-preview-v1"
            };
            assert_eq!(
                admit(&lp, m, allowed, ApiMode::Both),
                Ok(()),
                "{model_type}"
            );
        }
        // Only the exact model_type values.
        let mut lp = light();
        lp.profile.model_type = Some("gpt-oss".into());
        assert_eq!(admit(&lp, m, "vllm-kv-map-v2", ApiMode::Chat), Ok(()));
    }

    /// No modelType, but gpt-oss's real tokenizer (harmony's special tokens): chat refused on
    /// the engines that render gpt-oss with harmony, the reason naming modelType; completions,
    /// and chat on SGLang (which renders gpt-oss with its template), admitted.
    #[test]
    fn admission_refuses_harmony_files_without_model_type() {
        let m = "Qwen/Qwen3-0.6B";
        let tok = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/models/openai__gpt-oss-20b/tokenizer.json"
        ))
        .expect("gpt-oss tokenizer.json");
        let mut lp = loaded(QWEN3);
        lp.artifacts.tokenizer.bytes = Arc::from(tok);
        lp.profile.model_type = None;
        for c in ["vllm-kv-map-v3", "trtllm-kv-http-v1"] {
            let r = admit(&lp, m, c, ApiMode::Chat);
            assert_eq!(rule(r.clone()), Some(Rule::EngineRenderer), "{c}");
            assert!(r.unwrap_err().detail.contains("modelType"), "{c}");
            assert_eq!(admit(&lp, m, c, ApiMode::Completions), Ok(()), "{c}");
        }
        assert_eq!(admit(&lp, m, "sglang-kv-rank-v1", ApiMode::Both), Ok(()));
    }

    #[test]
    fn admission_quirks() {
        let m = "Qwen/Qwen3-0.6B";
        let bos = |q: &mut LoadedProfile, contract: &str| {
            q.profile.engine_quirks.insert(
                contract.into(),
                EngineQuirks {
                    completions_bos: true,
                    ..EngineQuirks::default()
                },
            );
        };
        // completionsBos keyed to a vLLM contract: refused there, harmless elsewhere.
        let mut lp = light();
        bos(&mut lp, "vllm-kv-map-v2");
        assert_eq!(
            rule(admit(&lp, m, "vllm-kv-map-v2", ApiMode::Completions)),
            Some(Rule::QuirkIncompatible)
        );
        assert_eq!(
            admit(&lp, m, "trtllm-kv-http-v1", ApiMode::Completions),
            Ok(())
        );
        // completionsBos on SGLang needs a BOS the tokenizer resolves.
        let mut lp = light();
        bos(&mut lp, "sglang-kv-rank-v1");
        assert_eq!(
            rule(admit(&lp, m, "sglang-kv-rank-v1", ApiMode::Both)),
            Some(Rule::QuirkIncompatible)
        );
        assert_eq!(admit(&lp, m, "vllm-kv-map-v2", ApiMode::Both), Ok(()));
        if let Some(rp) = lp.profile.render_policy.as_mut() {
            rp.bos_token = Some("<|endoftext|>".into());
        }
        assert_eq!(admit(&lp, m, "sglang-kv-rank-v1", ApiMode::Both), Ok(()));
        // A quirk keyed to something that is not a contract.
        let mut lp = light();
        lp.profile.engine_quirks.insert(
            "vllm-kv-v9".into(),
            EngineQuirks {
                challenge_last_block: true,
                ..EngineQuirks::default()
            },
        );
        let r = admit(&lp, m, "vllm-kv-map-v2", ApiMode::Both);
        assert_eq!(rule(r.clone()), Some(Rule::QuirkIncompatible));
        assert!(r.unwrap_err().detail.contains("vllm-kv-v9"));
    }

    #[test]
    fn admission_tokenizer_and_encoder() {
        let (m, c) = ("Qwen/Qwen3-0.6B", "vllm-kv-map-v2");
        let mut lp = light();
        lp.artifacts.tokenizer.bytes = Arc::from(&b"{\"not\": \"a tokenizer\"}"[..]);
        for mode in [ApiMode::Completions, ApiMode::Both] {
            assert_eq!(
                rule(admit(&lp, m, c, mode)),
                Some(Rule::TokenizerUnloadable)
            );
        }
        // A clock policy the template does not use: the encoder refuses.
        let mut lp = light();
        if let Some(rp) = lp.profile.render_policy.as_mut() {
            rp.clock_policy = Some(kvprofile_core::ClockPolicy::UtcDate);
        }
        assert_eq!(
            rule(admit(&lp, m, c, ApiMode::Both)),
            Some(Rule::EncoderUnbuildable)
        );
    }
}
