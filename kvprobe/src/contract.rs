//! The engine contract of one engine release, as typed rules: the one place where the
//! catalog's data (`kvprofile-core`'s `releases`) becomes kvhash's hashing rules and event
//! schema and kvtemplate's chat rules.
//!
//! ```
//! use kvprobe::{contract, Engine};
//! let c = contract::resolve(Engine::Vllm, "0.24.0").unwrap();
//! assert_eq!(c.release_id(), "vllm-kv-map-v2-r0.24");
//! assert_eq!(c.contract_id(), "vllm-kv-map-v2");
//! let err = contract::resolve(Engine::Vllm, "0.35.0").unwrap_err();
//! assert_eq!(err.code(), "UNKNOWN_ENGINE_VERSION");
//! ```
//!
//! [`resolve`] takes an engine and the version the engine reports and returns exactly one
//! [`Contract`], or [`Error::Registry`] with `UNKNOWN_ENGINE_VERSION` naming the nearest known
//! releases — never a family default and never the newest rules. [`by_id`] takes a release id,
//! or a contract (gateway) id whose releases all share the rules asked for.
//! [`validate_builtin`] converts every release of the built-in catalog (a test runs it).

use crate::{Engine, Error};
use kvhash::events::{EventFormat, EventSchema, FieldSpec, ReplayFraming};
use kvhash::sglang::SglangRules;
use kvhash::trtllm::SaltVariant;
use kvhash::vllm::{ExtraKeyForm, NoneHashRule, VllmRules};
use kvprofile_core::contracts::{self, ContractCatalog, ContractProfile};
use kvprofile_core::releases::{self as rel, Release};
use kvprofile_core::HashAlgorithm;
use kvtemplate::ChatRules;
use kvtemplate::{Refusal, RefusalSet};
use serde_json::{json, Value};
use std::sync::OnceLock;

/// The hashing rules of a release, per engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashContract {
    /// vLLM.
    Vllm(VllmRules),
    /// SGLang.
    Sglang(SglangRules),
    /// TensorRT-LLM: the cache-salt variant, `None` when unknown (salted hashes refused).
    Trtllm(Option<SaltVariant>),
}

/// A token-probe route (catalog `chat.probeRoutes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRoute {
    /// The engine's tokenize route (vLLM `POST /tokenize`, SGLang `POST /v1/tokenize`).
    Tokenize,
    /// The chat route with `return_token_ids` (vLLM `POST /v1/chat/completions`, one token
    /// generated): the response's `prompt_token_ids` are the ids of the chat path itself.
    ChatCompletions,
}

impl ProbeRoute {
    /// The catalog name's route (`tokenize`, `chat-completions`).
    pub fn parse(s: &str) -> Option<ProbeRoute> {
        match s {
            "tokenize" => Some(ProbeRoute::Tokenize),
            "chat-completions" => Some(ProbeRoute::ChatCompletions),
            _ => None,
        }
    }

    /// The catalog name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeRoute::Tokenize => "tokenize",
            ProbeRoute::ChatCompletions => "chat-completions",
        }
    }
}

/// One engine release's contract, typed.
#[derive(Debug, Clone)]
pub struct Contract {
    release: &'static Release,
    profile: &'static ContractProfile,
    version: Option<String>,
    hash: Option<HashContract>,
    events: Option<EventSchema>,
    chat: Option<ChatRules>,
    liftable: RefusalSet,
}

impl Contract {
    /// The release entry (catalog data).
    pub fn release(&self) -> &'static Release {
        self.release
    }

    /// The release id, e.g. `vllm-kv-map-v2-r0.24`.
    pub fn release_id(&self) -> &'static str {
        &self.release.id
    }

    /// The contract (gateway) id it refines, e.g. `vllm-kv-map-v2`: the key of profile
    /// quirks and gateway rules.
    pub fn contract_id(&self) -> &'static str {
        &self.profile.id
    }

    /// The contract profile.
    pub fn profile(&self) -> &'static ContractProfile {
        self.profile
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.release.engine
    }

    /// The engine version it was resolved from (`None` when built from an id).
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Hashing rules (`None`: no KV plane).
    pub fn hash(&self) -> Option<HashContract> {
        self.hash
    }

    /// vLLM hashing rules, or an error naming the engine.
    pub fn vllm_rules(&self) -> Result<VllmRules, Error> {
        match self.hash {
            Some(HashContract::Vllm(r)) => Ok(r),
            _ => Err(Error::Config(format!(
                "{} is not a vLLM contract",
                self.release_id()
            ))),
        }
    }

    /// SGLang hashing rules, or an error naming the engine.
    pub fn sglang_rules(&self) -> Result<SglangRules, Error> {
        match self.hash {
            Some(HashContract::Sglang(r)) => Ok(r),
            _ => Err(Error::Config(format!(
                "{} is not an SGLang contract",
                self.release_id()
            ))),
        }
    }

    /// The KV-event schema (`None`: no KV plane). TensorRT-LLM: the family schema of its
    /// JSON format.
    pub fn events(&self) -> Option<&EventSchema> {
        self.events.as_ref()
    }

    /// The event wire family.
    pub fn event_format(&self) -> Option<EventFormat> {
        self.events.as_ref().map(EventSchema::format)
    }

    /// Where the release's tokenizer loader takes the added tokens from (catalog
    /// `tokenizer.addedTokens`; engines without a chat path: the default).
    pub fn added_tokens_rule(&self) -> kvtemplate::AddedTokensRule {
        self.release
            .tokenizer
            .as_ref()
            .and_then(|t| t.added_tokens.parse().ok())
            .unwrap_or_default()
    }

    /// Chat-path rules proven for this version (`None`: no vectors; the strict path only).
    pub fn chat(&self) -> Option<&ChatRules> {
        self.chat.as_ref()
    }

    /// The chat renderer this release uses for a model whose `config.json` `model_type` is
    /// `model_type` (catalog `chat.renderers`, docs/contracts/templates.md §13), or of the
    /// checkpoint-layout key `files:tekken.json` (`kvtemplate::mistral::checkpoint_key`):
    /// `Ok(Some("harmony"))` for gpt-oss on vLLM 0.31.0/0.33.0, `Ok(Some("mistral-tekken-v3"))`
    /// for a bare-tekken checkpoint on them; `Ok(None)` = the checkpoint's
    /// Jinja template (a model type no release of the engine renders otherwise, or no model
    /// type). A model type that some release of the engine renders without Jinja is an error
    /// on every version whose vectors do not prove its renderer: kvexact cannot know it.
    pub fn chat_renderer(&self, model_type: Option<&str>) -> Result<Option<&'static str>, Error> {
        let Some(t) = model_type else {
            return Ok(None);
        };
        if let Some(r) = self.proven_chat_entry(|rules| rules.renderers.get(t)) {
            return Ok(Some(r.as_str()));
        }
        let engine = self.release.engine;
        let elsewhere = kvprofile_core::contracts::builtin().map_or(true, |c| {
            c.releases.iter().any(|r| {
                r.engine == engine && r.chat.as_ref().is_some_and(|c| c.renderers.contains_key(t))
            })
        });
        if elsewhere {
            return Err(Error::Config(format!(
                "{} {}: no vectors prove how it renders chat for model_type {t} (other releases \
                 of {engine} do not use its Jinja template)",
                self.release_id(),
                self.version.as_deref().unwrap_or("(no version)")
            )));
        }
        Ok(None)
    }

    /// The route whose token ids take the path of chat requests rendered by `renderer` on
    /// this release (catalog `chat.probeRoutes`, docs/contracts/templates.md §13.12): the
    /// tokenize route for the Jinja template; for harmony on vLLM 0.31.0/0.33.0 the chat route
    /// (`/tokenize` renders gpt-oss with its Jinja template). `None`: no route is known to take
    /// that path (a probe of it proves nothing; the ladder must not pass on it).
    pub fn probe_route(&self, renderer: &kvtemplate::ChatRenderer) -> Option<ProbeRoute> {
        let name = match renderer {
            kvtemplate::ChatRenderer::Jinja => return Some(ProbeRoute::Tokenize),
            kvtemplate::ChatRenderer::Harmony(_) => "harmony",
            kvtemplate::ChatRenderer::Mistral(r) => r.catalog_name(),
            kvtemplate::ChatRenderer::Unknown(_) => return None,
        };
        self.proven_chat_entry(|rules| rules.probe_routes.get(name))
            .and_then(|s| ProbeRoute::parse(s))
    }

    /// An entry of the release's proven chat rules: of the contract's version, or — with no
    /// version — the same entry for every version of the release (else `None`).
    fn proven_chat_entry(
        &self,
        get: impl Fn(&'static kvprofile_core::releases::ReleaseChatRules) -> Option<&'static String>,
    ) -> Option<&'static String> {
        let release: &'static Release = self.release;
        match self.version.as_deref() {
            Some(v) => release.chat_for(v).and_then(&get),
            None => {
                let mut all = release
                    .versions
                    .iter()
                    .map(|v| release.chat_for(v).and_then(&get));
                let first = all.next()??;
                all.all(|x| x == Some(first)).then_some(first)
            }
        }
    }

    /// The strict-rule refusal codes an encoder for this contract may lift (the release's
    /// `chat.liftable`), where its chat rules are proven ([`Contract::chat`]); plus
    /// `cache_salt` where the release's salt handling is catalog data
    /// (`deployment.cacheSalt`: the salt changes the keys, not the prompt).
    /// `kvprobe::bridge::encoder_with_lifts` refuses any other lift.
    pub fn liftable(&self) -> RefusalSet {
        self.liftable
    }

    /// Whether `lifts` may be lifted on this contract: `Ok` with them, or
    /// [`Error::LiftNotAllowed`] naming the first code (in scan order) that may not, the
    /// release, and why.
    pub fn check_lifts(&self, lifts: RefusalSet) -> Result<RefusalSet, Error> {
        let Some(code) = lifts.difference(self.liftable).first() else {
            return Ok(lifts);
        };
        let reason = if self.chat.is_none() {
            match self.version() {
                Some(v) => format!(
                    "no chat rules are proven for {} {v} (no vectors of its serving code): only the strict rules apply",
                    self.engine()
                ),
                None => "no chat rules are proven for every version it covers: name the engine version".to_string(),
            }
        } else if self.liftable.is_empty() {
            "its contract lifts no refusal code".to_string()
        } else {
            format!(
                "its contract does not define the engine's behaviour for it (liftable: {})",
                self.liftable
            )
        };
        Err(Error::LiftNotAllowed {
            code: code.as_str(),
            release: self.release_id().to_string(),
            reason,
        })
    }

    /// The chat rules an encoder uses: the proven ones, else the engine's reference rules
    /// (which the strict path never depends on: it refuses everything they decide).
    pub fn chat_or_reference(&self) -> Option<ChatRules> {
        self.chat.or_else(|| ChatRules::reference(self.engine()))
    }

    /// The gateway-facing default algorithm (the contract's first `hashAlgorithms`).
    pub fn default_algorithm(&self) -> Option<HashAlgorithm> {
        self.profile.default_hash_algorithm()
    }

    /// The block size the release's engine uses when none is configured (catalog
    /// `hash.defaultBlockSize`: vLLM `CacheConfig.DEFAULT_BLOCK_SIZE`, 16 up to 0.33 and 64
    /// from 0.34; TensorRT-LLM 32; SGLang the gateway's default 16); `None` without a KV plane.
    /// A hasher or index built without an explicit block size takes this one.
    pub fn default_block_size(&self) -> Option<u32> {
        self.release.hash.as_ref().map(|h| h.default_block_size)
    }

    /// The contract as JSON (what `kvexact contracts --json` and the C ABI print per release).
    pub fn to_json(&self) -> Value {
        let r = self.release;
        let mut v = release_json(r);
        if let (Some(obj), Some(version)) = (v.as_object_mut(), &self.version) {
            obj.insert("resolved_version".into(), json!(version));
            obj.insert("chat_proven".into(), json!(self.chat.is_some()));
            obj.insert(
                "liftable".into(),
                json!(self.liftable.iter().map(|r| r.as_str()).collect::<Vec<_>>()),
            );
        }
        v
    }
}

fn release_json(r: &Release) -> Value {
    let hash = r.hash.as_ref().map(|h| {
        json!({
            "algorithms": h.algorithms.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
            "default_algorithm": h.default_algorithm.as_str(),
            "none_hash": h.none_hash,
            "extra_keys": h.extra_keys,
            "lookahead": h.lookahead,
            "wide_pages": h.wide_pages,
            "cache_salt": h.cache_salt,
            "default_block_size": h.default_block_size,
        })
    });
    let events = r.events.as_ref().map(|e| {
        json!({
            "format": e.format,
            "block_stored": e.block_stored,
            "block_removed": e.block_removed,
            "replay": e.replay,
        })
    });
    let chat = r.chat.as_ref().map(|c| {
        json!({
            "versions": c.versions,
            "tool_serialization": c.tool_serialization,
            "template_error_class": c.template_error_class,
            "empty_tools": c.empty_tools.as_deref().unwrap_or("refused"),
            "liftable": c.liftable,
            "vectors": c.vectors,
            "renderers": c.renderers,
            "probe_routes": c.probe_routes,
        })
    });
    json!({
        "release": r.id,
        "contract": r.contract,
        "engine": r.engine.as_str(),
        "versions": r.versions,
        "range": r.range(),
        "hash": hash,
        "events": events,
        "chat": chat,
        "tokenizer": r.tokenizer.as_ref().map(|t| json!({
            "transformers": t.transformers,
            "added_tokens": t.added_tokens,
        })),
        "evidence": {"vectors": r.evidence.vectors, "note": r.evidence.note},
        // The launch options the release's keys and hits are known for
        // (docs/contracts/gateway-integration.md §9): speculative methods with their key rule
        // and replays, the request path's cache_salt rules.
        "deployment": r.deployment.as_ref().map(|d| json!({
            "speculative": d.speculative.iter().map(|s| json!({
                "keys": s.keys, "methods": s.methods, "vectors": s.vectors,
            })).collect::<Vec<_>>(),
            "cache_salt": d.cache_salt.as_ref().map(|c| json!({
                "empty": c.empty, "max_chars": c.max_chars, "forbidden": c.forbidden,
                "vectors": c.vectors,
            })),
            "kv_events_formats": d.kv_events_formats,
            "event_namespaces": d.event_namespaces.iter().map(|n| json!({
                "format": n.format, "seed": n.seed, "vectors": n.vectors,
            })).collect::<Vec<_>>(),
        })),
    })
}

fn bad(r: &Release, what: impl std::fmt::Display) -> Error {
    Error::Config(format!("contract catalog release {}: {what}", r.id))
}

fn hash_contract(r: &Release) -> Result<Option<HashContract>, Error> {
    let Some(h) = &r.hash else {
        return Ok(None);
    };
    Ok(Some(match r.engine {
        Engine::Vllm => {
            let none_hash: NoneHashRule = h
                .none_hash
                .as_deref()
                .unwrap_or("")
                .parse()
                .map_err(|e| bad(r, e))?;
            let extra_keys: ExtraKeyForm = h
                .extra_keys
                .as_deref()
                .unwrap_or("")
                .parse()
                .map_err(|e| bad(r, e))?;
            HashContract::Vllm(VllmRules {
                none_hash,
                extra_keys,
                lookahead: h.lookahead,
            })
        }
        Engine::Sglang => HashContract::Sglang(SglangRules {
            wide_pages: h.wide_pages,
        }),
        Engine::Trtllm => HashContract::Trtllm(match h.cache_salt.as_deref() {
            Some("unknown") => None,
            Some(s) => Some(s.parse().map_err(|e| bad(r, e))?),
            None => return Err(bad(r, "no cacheSalt")),
        }),
        Engine::Llamacpp => return Err(bad(r, "llama.cpp has no hash rules")),
    }))
}

fn event_schema(r: &Release) -> Result<Option<EventSchema>, Error> {
    let Some(e) = &r.events else {
        return Ok(None);
    };
    let format: EventFormat = e.format.parse().map_err(|x| bad(r, x))?;
    if format.engine() != r.engine.as_str() {
        return Err(bad(r, format!("{format} is not a {} format", r.engine)));
    }
    if format.transport() == kvhash::events::Transport::HttpJson {
        if !e.block_stored.is_empty() || !e.block_removed.is_empty() || e.replay.is_some() {
            return Err(bad(r, "a JSON format has no msgpack fields or replay"));
        }
        return Ok(Some(EventSchema::family(format).clone()));
    }
    let fields = |l: &[String]| -> Result<Vec<FieldSpec>, Error> {
        l.iter()
            .map(|s| s.parse::<FieldSpec>().map_err(|x| bad(r, x)))
            .collect()
    };
    let replay: ReplayFraming = e
        .replay
        .as_deref()
        .unwrap_or("")
        .parse()
        .map_err(|x| bad(r, x))?;
    EventSchema::new(
        format,
        fields(&e.block_stored)?,
        fields(&e.block_removed)?,
        replay,
    )
    .map(Some)
    .map_err(|x| bad(r, x))
}

fn chat_rules(r: &Release, version: Option<&str>) -> Result<Option<ChatRules>, Error> {
    let Some(c) = &r.chat else {
        return Ok(None);
    };
    let Some(reference) = ChatRules::reference(r.engine) else {
        return Err(bad(r, "chat rules on an engine without a chat path"));
    };
    let engine = r.engine;
    let rules = reference
        .with_tool_serialization(c.tool_serialization.parse().map_err(|e| bad(r, e))?)
        .with_template_error_class(c.template_error_class.parse().map_err(|e| bad(r, e))?)
        .with_empty_tools(match &c.empty_tools {
            Some(e) => e.parse().map_err(|e| bad(r, e))?,
            None => kvtemplate::EmptyTools::Refused,
        });
    rules.check_engine(engine).map_err(|e| bad(r, e))?;
    for (model_type, renderer) in &c.renderers {
        let known = matches!(
            (renderer.as_str(), engine),
            (
                "harmony" | "mistral-tekken-v3" | "mistral-spm-v7",
                kvtemplate::Engine::Vllm
            ) | ("mistral-text-tekken-v3", kvtemplate::Engine::Sglang)
        );
        if !known {
            return Err(bad(
                r,
                format!(
                    "chat.renderers.{model_type}: {renderer} is not a renderer kvtemplate has for {engine} (harmony, mistral-tekken-v3 and mistral-spm-v7 on vllm, mistral-text-tekken-v3 on sglang)"
                ),
            ));
        }
    }
    // A renderer without a route has no faithful token probe: its chat fixtures never pass.
    for (renderer, route) in &c.probe_routes {
        if !c.renderers.values().any(|x| x == renderer) || ProbeRoute::parse(route).is_none() {
            return Err(bad(
                r,
                format!(
                    "chat.probeRoutes.{renderer}: {route} (a renderer of chat.renderers, a route)"
                ),
            ));
        }
    }
    let proven = match version {
        Some(v) => r.chat_for(v).is_some(),
        // By id: only when the rules are proven for every version of the release.
        None => r.versions.iter().all(|v| c.versions.contains(v)),
    };
    Ok(proven.then_some(rules))
}

/// The release's `chat.liftable` codes, typed; each must be a code kvtemplate can lift.
fn liftable(r: &Release) -> Result<RefusalSet, Error> {
    let Some(c) = &r.chat else {
        return Ok(RefusalSet::EMPTY);
    };
    let mut set = RefusalSet::EMPTY;
    for name in &c.liftable {
        let code: Refusal = name.parse().map_err(|e| bad(r, e))?;
        if !code.can_lift() {
            return Err(bad(
                r,
                format!(
                    "chat.liftable: kvtemplate cannot lift {code} (it can lift: {})",
                    RefusalSet::LIFTABLE
                ),
            ));
        }
        set.insert(code);
    }
    Ok(set)
}

fn build(
    cat: &'static ContractCatalog,
    r: &'static Release,
    version: Option<&str>,
) -> Result<Contract, Error> {
    if let Some(t) = &r.tokenizer {
        t.added_tokens
            .parse::<kvtemplate::AddedTokensRule>()
            .map_err(|e| bad(r, e))?;
    }
    let profile = cat
        .profile(&r.contract)
        .ok_or_else(|| bad(r, "refines no contract"))?;
    let chat = chat_rules(r, version)?;
    let liftable = liftable(r)?;
    Ok(Contract {
        release: r,
        profile,
        version: version.map(str::to_string),
        hash: hash_contract(r)?,
        events: event_schema(r)?,
        liftable: {
            let mut l = if chat.is_some() {
                liftable
            } else {
                RefusalSet::EMPTY
            };
            // `cache_salt` changes the keys, not the prompt: it is liftable wherever the
            // release's salt handling is catalog data (`deployment.cacheSalt`), chat rules
            // or not; the hasher of a deployment then keys the salt
            // (`kvprobe::deployment::DeploymentKeys::request_hasher`).
            if r.deployment
                .as_ref()
                .is_some_and(|d| d.cache_salt.is_some())
            {
                l.insert(Refusal::CacheSalt);
            }
            l
        },
        chat,
    })
}

/// The built-in catalog.
pub fn catalog() -> Result<&'static ContractCatalog, Error> {
    Ok(contracts::builtin()?)
}

/// The contract of `engine` at `version` (as the engine reports it; a leading `v` and a
/// `+local` build label are ignored): exactly one release, or `UNKNOWN_ENGINE_VERSION`.
pub fn resolve(engine: Engine, version: &str) -> Result<Contract, Error> {
    let cat = catalog()?;
    let r = cat
        .resolve_release(engine, version)
        .map_err(Error::Contract)?;
    build(cat, r, Some(version))
}

/// The contract a rule bound to `id` (a release or contract id) uses: with `version`, the
/// release that version resolves to, which must be `id` or refine it
/// ([`Error::ContractMismatch`] otherwise); without, [`by_id`].
pub fn resolve_within(id: &str, version: Option<&str>) -> Result<Contract, Error> {
    let Some(version) = version else {
        return by_id(id);
    };
    let cat = catalog()?;
    let engine = cat
        .release(id)
        .map(|r| r.engine)
        .or_else(|| cat.profile(id).map(|p| p.engine))
        .ok_or_else(|| Error::UnknownName {
            what: "engine contract or release id",
            name: id.to_string(),
        })?;
    let c = resolve(engine, version)?;
    if c.release_id() != id && c.contract_id() != id {
        return Err(Error::ContractMismatch {
            engine,
            version: version.to_string(),
            release: c.release_id().to_string(),
            contract: c.contract_id().to_string(),
            named: id.to_string(),
        });
    }
    Ok(c)
}

/// The contract named `id`: a release id, or a contract id whose releases all share the
/// hashing rules and the event schema (a single-release contract, for instance). A contract
/// id whose releases differ is refused naming them: give the engine version instead.
pub fn by_id(id: &str) -> Result<Contract, Error> {
    let cat = catalog()?;
    if let Some(r) = cat.release(id) {
        return build(cat, r, None);
    }
    if cat.profile(id).is_none() {
        return Err(Error::UnknownName {
            what: "engine contract or release id",
            name: id.to_string(),
        });
    }
    let mut all = cat
        .releases
        .iter()
        .filter(|r| r.contract == id)
        .map(|r| build(cat, r, None));
    let first = all
        .next()
        .ok_or_else(|| Error::Config(format!("contract {id} has no release")))??;
    let mut names = vec![first.release_id()];
    let mut same = true;
    for c in all {
        let c = c?;
        same &= c.hash == first.hash && c.events == first.events;
        names.push(c.release_id());
    }
    if !same {
        return Err(Error::Config(format!(
            "contract {id} spans releases with different rules ({}); name the release or resolve the engine version",
            names.join(", ")
        )));
    }
    if names.len() > 1 {
        // The releases agree on hashes and events; chat rules are per version.
        return Ok(Contract {
            chat: None,
            liftable: RefusalSet::EMPTY,
            ..first
        });
    }
    Ok(first)
}

/// Every release of the built-in catalog, typed (validated once; an error names the release).
pub fn all() -> Result<&'static [Contract], Error> {
    static ALL: OnceLock<Result<Vec<Contract>, String>> = OnceLock::new();
    let r = ALL.get_or_init(|| {
        let cat = catalog().map_err(|e| e.to_string())?;
        cat.releases
            .iter()
            .map(|r| build(cat, r, None).map_err(|e| e.to_string()))
            .collect()
    });
    r.as_deref().map_err(|e| Error::Config(e.clone()))
}

/// Converts every release of the built-in catalog; the first inconsistency is the error.
pub fn validate_builtin() -> Result<(), Error> {
    all().map(|_| ())
}

/// The catalog as JSON: `{"schema": "kvexact-contracts/v1", "releases": [...]}`, one entry per
/// release in catalog order (engine, versions, range, contract, rules, evidence).
pub fn catalog_json() -> Result<Value, Error> {
    let cat = catalog()?;
    validate_builtin()?;
    Ok(json!({
        "schema": "kvexact-contracts/v1",
        "generation": cat.generation,
        "releases": cat.releases.iter().map(release_json).collect::<Vec<_>>(),
    }))
}

/// The normalised form of a version string (see [`rel::normalise`]).
pub fn normalise_version(version: &str) -> &str {
    rel::normalise(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gpt-oss renders with harmony on the vLLM releases whose templates-nonjinja vectors
    /// prove it (0.31.0, 0.33.0), with its Jinja template everywhere else.
    #[test]
    fn chat_renderer_is_per_release_and_model_type() {
        let r = |e, v: &str, t: Option<&str>| resolve(e, v).unwrap().chat_renderer(t);
        assert_eq!(
            r(Engine::Vllm, "0.31.0", Some("gpt_oss")).unwrap(),
            Some("harmony")
        );
        assert_eq!(
            r(Engine::Vllm, "0.33.0", Some("gpt_oss")).unwrap(),
            Some("harmony")
        );
        assert!(r(Engine::Vllm, "0.32.0", Some("gpt_oss")).is_err());
        assert!(r(Engine::Vllm, "0.29.0", Some("gpt_oss")).is_err());
        assert_eq!(r(Engine::Vllm, "0.31.0", Some("qwen2")).unwrap(), None);
        assert_eq!(r(Engine::Vllm, "0.29.0", Some("qwen2")).unwrap(), None);
        assert_eq!(r(Engine::Vllm, "0.31.0", None).unwrap(), None);
        assert_eq!(r(Engine::Sglang, "0.5.19", Some("gpt_oss")).unwrap(), None);
        // A bare-tekken checkpoint: mistral_common ids on vLLM, its text form on SGLang.
        let tekken = Some(kvtemplate::mistral::TEKKEN_CHECKPOINT);
        assert_eq!(
            r(Engine::Vllm, "0.31.0", tekken).unwrap(),
            Some("mistral-tekken-v3")
        );
        assert_eq!(
            r(Engine::Vllm, "0.33.0", tekken).unwrap(),
            Some("mistral-tekken-v3")
        );
        assert_eq!(
            r(Engine::Sglang, "0.5.19", tekken).unwrap(),
            Some("mistral-text-tekken-v3")
        );
        assert!(r(Engine::Vllm, "0.29.0", tekken).is_err());
        let spm = Some(kvtemplate::mistral::SPM_V7_CHECKPOINT);
        assert_eq!(
            r(Engine::Vllm, "0.31.0", spm).unwrap(),
            Some("mistral-spm-v7")
        );
        assert_eq!(
            r(Engine::Vllm, "0.33.0", spm).unwrap(),
            Some("mistral-spm-v7")
        );
        assert!(r(Engine::Vllm, "0.32.0", spm).is_err());
        assert!(r(Engine::Sglang, "0.5.18", tekken).is_err());
    }

    #[test]
    fn every_builtin_release_converts() {
        validate_builtin().unwrap();
        assert_eq!(all().unwrap().len(), catalog().unwrap().releases.len());
    }

    #[test]
    fn rules_follow_the_behaviour_table() {
        let v = |ver| resolve(Engine::Vllm, ver).unwrap().vllm_rules().unwrap();
        assert_eq!(v("0.17.0").extra_keys, ExtraKeyForm::K1);
        assert_eq!(v("0.18.1").extra_keys, ExtraKeyForm::K1);
        assert_eq!(v("0.19.0").extra_keys, ExtraKeyForm::K2);
        assert_eq!(v("0.30.0").extra_keys, ExtraKeyForm::K2);
        assert_eq!(v("0.31.0").extra_keys, ExtraKeyForm::K3);
        assert_eq!(v("0.28.0").none_hash, NoneHashRule::A);
        assert_eq!(v("0.29.0").none_hash, NoneHashRule::B);
        assert!(v("0.33.0").lookahead && !v("0.32.0").lookahead);
        let s = |ver| resolve(Engine::Sglang, ver).unwrap();
        assert!(s("0.5.23").sglang_rules().unwrap().wide_pages);
        assert!(!s("0.5.22").sglang_rules().unwrap().wide_pages);
        assert_eq!(s("0.5.22").events().unwrap().replay(), ReplayFraming::Topic);
        assert_eq!(s("0.5.21").events().unwrap().replay(), ReplayFraming::Plain);
        let t = resolve(Engine::Trtllm, "1.3.0rc24").unwrap();
        assert_eq!(t.hash(), Some(HashContract::Trtllm(None)));
        // Chat rules exist only where the vectors prove them.
        assert!(resolve(Engine::Vllm, "0.31.0").unwrap().chat().is_some());
        assert!(resolve(Engine::Vllm, "0.32.0").unwrap().chat().is_none());
        assert!(resolve(Engine::Vllm, "0.30.0").unwrap().chat().is_none());
    }

    #[test]
    fn ids_resolve_when_unambiguous() {
        assert_eq!(
            by_id("sglang-kv-rank-v1").unwrap().release_id(),
            "sglang-kv-rank-v1-r0.5.18"
        );
        assert_eq!(
            by_id("vllm-kv-map-v3-r0.31").unwrap().contract_id(),
            "vllm-kv-map-v3"
        );
        let e = by_id("vllm-kv-array-v1").unwrap_err().to_string();
        assert!(
            e.contains("vllm-kv-array-v1-r0.17") && e.contains("r0.22"),
            "{e}"
        );
        assert!(by_id("nope").is_err());
        assert_eq!(
            resolve_within("vllm-kv-map-v2", Some("0.25.1"))
                .unwrap()
                .release_id(),
            "vllm-kv-map-v2-r0.24"
        );
        let e = resolve_within("vllm-kv-map-v2", Some("0.31.0")).unwrap_err();
        assert_eq!(e.code(), "CONTRACT_MISMATCH");
        let e = resolve_within("vllm-kv-map-v2", Some("0.99.0")).unwrap_err();
        assert_eq!(e.code(), "UNKNOWN_ENGINE_VERSION");
        assert!(e.to_string().starts_with("unknown vllm version"), "{e}");
        assert!(
            catalog_json().unwrap()["releases"]
                .as_array()
                .unwrap()
                .len()
                >= 19
        );
    }
}
