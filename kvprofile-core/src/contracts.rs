//! The engine-contract catalog (docs/contracts/registry.md §10.3): which contract profile ids exist, which engine and
//! engine versions each covers, its event wire format and its block-hash algorithms.
//!
//! The catalog kvexact trusts is compiled in from `data/contracts.yaml` ([`builtin`]); the same
//! typed model parses the gateway's own `engine-contracts/contracts.yaml`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use crate::engine::{CapabilityState, Engine, HashAlgorithm, UnknownEngine};
use crate::error::{DocKind, Error, Result};
use crate::releases::{compare_versions, Release};

/// The catalog source compiled into the crate.
pub const BUILTIN_CONTRACTS_YAML: &str = include_str!("../data/contracts.yaml");

/// How an engine version selector is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VersionScheme {
    /// An inclusive semantic-version range.
    Semver,
    /// One exact version string.
    Exact,
}

/// Which engine versions a contract profile's decoder family speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VersionSelector {
    /// `semver` or `exact`.
    pub scheme: VersionScheme,
    /// Lower bound (semver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_inclusive: Option<String>,
    /// Upper bound (semver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_inclusive: Option<String>,
    /// The one version (exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
}

/// `vMAJOR.MINOR.PATCH` (leading `v` optional) → numbers; `None` for anything else.
fn parse_semver(v: &str) -> Option<(u64, u64, u64)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

impl VersionSelector {
    /// Does `version` (with or without the leading `v`) fall in this selector?
    pub fn matches(&self, version: &str) -> bool {
        let strip = |s: &str| s.strip_prefix('v').unwrap_or(s).to_string();
        match self.scheme {
            VersionScheme::Exact => self
                .exact
                .as_deref()
                .is_some_and(|e| strip(e) == strip(version)),
            VersionScheme::Semver => {
                let (Some(lo), Some(hi)) = (&self.min_inclusive, &self.max_inclusive) else {
                    return false;
                };
                match (parse_semver(lo), parse_semver(hi), parse_semver(version)) {
                    (Some(lo), Some(hi), Some(v)) => lo <= v && v <= hi,
                    _ => false,
                }
            }
        }
    }

    fn validate(&self, path: &str, field: &str) -> Result<()> {
        let bad = |d: &str| Err(Error::invalid(DocKind::ContractCatalog, path, field, d));
        match self.scheme {
            VersionScheme::Exact => {
                if self.exact.as_deref().is_none_or(str::is_empty)
                    || self.min_inclusive.is_some()
                    || self.max_inclusive.is_some()
                {
                    return bad("scheme exact needs `exact` and no range");
                }
            }
            VersionScheme::Semver => {
                let lo = self.min_inclusive.as_deref().and_then(parse_semver);
                let hi = self.max_inclusive.as_deref().and_then(parse_semver);
                match (lo, hi) {
                    (Some(lo), Some(hi)) if lo <= hi && self.exact.is_none() => {}
                    _ => {
                        return bad("scheme semver needs minInclusive <= maxInclusive, both vX.Y.Z")
                    }
                }
            }
        }
        Ok(())
    }
}

/// The four capability axes of a contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Capabilities {
    /// KV-event plane.
    pub kv_events: CapabilityState,
    /// Prefix routing.
    pub prefix_routing: CapabilityState,
    /// Prefill/decode routing.
    pub pd_routing: CapabilityState,
    /// Runtime identity probe.
    pub runtime_probe: CapabilityState,
}

/// One engine-contract profile (the keys of a profile's `engineQuirks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContractProfile {
    /// Contract profile id, e.g. `vllm-kv-map-v2`.
    pub id: String,
    /// Engine family.
    pub engine: Engine,
    /// Family default (a reference by engine family alone binds here).
    #[serde(default)]
    pub family_default: bool,
    /// Engine versions this decoder family speaks.
    pub versions: VersionSelector,
    /// Event transport id (or `none`).
    pub transport: String,
    /// Event wire format id (or `none`).
    pub wire_schema: String,
    /// Hash binding id (or `none`).
    pub hash_binding: String,
    /// P/D dialect id (or `none`).
    pub pd_dialect: String,
    /// Identity probe id.
    pub probe: String,
    /// Capability axes.
    pub capabilities: Capabilities,
    /// kvexact addition: block-hash algorithms, first = default (absent in the gateway's file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_algorithms: Option<Vec<HashAlgorithm>>,
}

impl ContractProfile {
    /// The event wire format id (`wireSchema`), e.g. `vllm-kv-tagged-map-v2`; `None` for `none`.
    pub fn event_format(&self) -> Option<&str> {
        (self.wire_schema != "none").then_some(self.wire_schema.as_str())
    }

    /// The default block-hash algorithm, if the contract has a KV plane.
    pub fn default_hash_algorithm(&self) -> Option<HashAlgorithm> {
        self.hash_algorithms.as_ref()?.first().copied()
    }
}

/// The closed binding vocabularies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bindings {
    /// Transport ids.
    pub transports: Vec<String>,
    /// Wire schema ids.
    pub wire_schemas: Vec<String>,
    /// Hash binding ids.
    pub hash_bindings: Vec<String>,
    /// P/D dialect ids.
    pub pd_dialects: Vec<String>,
    /// Probe ids.
    pub probes: Vec<String>,
}

/// A whole engine-contract catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContractCatalog {
    /// `engine-contracts.loxilb.io/v1alpha1`.
    pub schema_version: String,
    /// Monotonic catalog generation (1).
    pub generation: u32,
    /// ABI-frozen engine wire ids.
    #[serde(deserialize_with = "crate::ids::unique_map")]
    pub engine_ids: BTreeMap<Engine, u32>,
    /// Closed vocabularies.
    pub bindings: Bindings,
    /// Contract profiles.
    pub profiles: Vec<ContractProfile>,
    /// kvexact addition: the engine releases refining the profiles (absent in the gateway's
    /// file). See [`crate::releases`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<Release>,
}

/// The schema version both catalogs carry.
pub const CONTRACTS_SCHEMA_VERSION: &str = "engine-contracts.loxilb.io/v1alpha1";

impl ContractCatalog {
    /// Parses and validates a catalog; `path` names the file in errors.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let cat: ContractCatalog = serde_yaml::from_slice(bytes)
            .map_err(|e| Error::schema(DocKind::ContractCatalog, path, e))?;
        cat.validate(path)?;
        Ok(cat)
    }

    fn validate(&self, path: &str) -> Result<()> {
        let bad =
            |field: String, d: &str| Err(Error::invalid(DocKind::ContractCatalog, path, field, d));
        if self.schema_version != CONTRACTS_SCHEMA_VERSION {
            return bad("schemaVersion".into(), "unknown schema version");
        }
        if self.generation == 0 {
            return bad("generation".into(), "must be >= 1");
        }
        let mut ids = BTreeSet::new();
        let mut defaults = BTreeSet::new();
        let known = |list: &[String], v: &str| v == "none" || list.iter().any(|x| x == v);
        for (i, p) in self.profiles.iter().enumerate() {
            let f = |k: &str| format!("profiles[{i}].{k}");
            if !crate::ids::is_valid_profile_id(&p.id) {
                return bad(f("id"), "not a safe id");
            }
            if !ids.insert(p.id.as_str()) {
                return bad(f("id"), "duplicate contract id");
            }
            if p.family_default && !defaults.insert(p.engine) {
                return bad(f("familyDefault"), "second family default for the engine");
            }
            p.versions.validate(path, &f("versions"))?;
            let b = &self.bindings;
            if !known(&b.transports, &p.transport) {
                return bad(f("transport"), "not in bindings.transports");
            }
            if !known(&b.wire_schemas, &p.wire_schema) {
                return bad(f("wireSchema"), "not in bindings.wireSchemas");
            }
            if !known(&b.hash_bindings, &p.hash_binding) {
                return bad(f("hashBinding"), "not in bindings.hashBindings");
            }
            if !known(&b.pd_dialects, &p.pd_dialect) {
                return bad(f("pdDialect"), "not in bindings.pdDialects");
            }
            if !b.probes.iter().any(|x| x == &p.probe) {
                return bad(f("probe"), "not in bindings.probes");
            }
            if p.engine != Engine::Llamacpp && !self.engine_ids.contains_key(&p.engine) {
                return bad(f("engine"), "engine has no wire id");
            }
            if let Some(algos) = &p.hash_algorithms {
                let ok = algos.iter().all(|a| a.engine() == p.engine);
                if !ok {
                    return bad(f("hashAlgorithms"), "algorithm of another engine");
                }
                if algos.is_empty() != (p.capabilities.kv_events == CapabilityState::None) {
                    return bad(
                        f("hashAlgorithms"),
                        "must be empty exactly when the contract has no KV events",
                    );
                }
            }
        }
        self.validate_releases(path)
    }

    /// The contract profile with this id.
    pub fn profile(&self, id: &str) -> Option<&ContractProfile> {
        self.profiles.iter().find(|p| p.id == id)
    }

    /// The engine of a contract profile id or an engine-release id, as the catalog records it
    /// (`None`: no such id). The id's spelling is never read: `vllm-kv-v1` is unknown.
    pub fn engine_of(&self, id: &str) -> Option<Engine> {
        match self.release(id) {
            Some(r) => Some(r.engine),
            None => self.profile(id).map(|p| p.engine),
        }
    }

    /// The contract profile of `engine` whose selector matches `version`.
    pub fn resolve(&self, engine: Engine, version: &str) -> Option<&ContractProfile> {
        self.profiles
            .iter()
            .find(|p| p.engine == engine && p.versions.matches(version))
    }
}

static BUILTIN: OnceLock<std::result::Result<ContractCatalog, String>> = OnceLock::new();

/// The engine-contract catalog compiled into kvexact (`data/contracts.yaml`); every profile
/// carries `hashAlgorithms`.
pub fn builtin() -> Result<&'static ContractCatalog> {
    let parsed = BUILTIN.get_or_init(|| {
        let cat = ContractCatalog::parse(BUILTIN_CONTRACTS_YAML.as_bytes(), "<builtin contracts>")
            .map_err(|e| e.to_string())?;
        if let Some(p) = cat.profiles.iter().find(|p| p.hash_algorithms.is_none()) {
            return Err(format!(
                "<builtin contracts>: {} lacks hashAlgorithms",
                p.id
            ));
        }
        Ok(cat)
    });
    parsed.as_ref().map_err(|e| {
        Error::invalid(
            DocKind::ContractCatalog,
            "<builtin contracts>",
            "",
            e.clone(),
        )
    })
}

/// The release entries of the catalog ([`crate::releases`]): lookup, resolution and validation.
impl ContractCatalog {
    /// The release entry with this id.
    pub fn release(&self, id: &str) -> Option<&Release> {
        self.releases.iter().find(|r| r.id == id)
    }

    /// The releases that refine contract `contract_id`.
    pub fn releases_of<'a>(&'a self, contract_id: &'a str) -> impl Iterator<Item = &'a Release> {
        self.releases
            .iter()
            .filter(move |r| r.contract == contract_id)
    }

    /// The one release of `engine` that covers `version`, or
    /// [`Error::UnknownEngineVersion`] naming the nearest known releases. Never a
    /// family default, never the newest rules.
    pub fn resolve_release(&self, engine: Engine, version: &str) -> Result<&Release> {
        if let Some(r) = self
            .releases
            .iter()
            .find(|r| r.engine == engine && r.covers(version))
        {
            return Ok(r);
        }
        let mut known: Vec<(&str, &Release)> = self
            .releases
            .iter()
            .filter(|r| r.engine == engine)
            .flat_map(|r| r.versions.iter().map(move |v| (v.as_str(), r)))
            .collect();
        known.sort_by(|a, b| compare_versions(a.0, b.0));
        let describe = |(v, r): &(&str, &Release)| format!("{v} ({}, {})", r.id, r.range());
        let below = known
            .iter()
            .rev()
            .find(|(v, _)| compare_versions(v, version) == Ordering::Less)
            .map(describe);
        let above = known
            .iter()
            .find(|(v, _)| compare_versions(v, version) == Ordering::Greater)
            .map(describe);
        let ranges: Vec<String> = self
            .releases
            .iter()
            .filter(|r| r.engine == engine)
            .map(Release::range)
            .collect();
        let detail = if ranges.is_empty() {
            format!("the catalog has no {engine} release")
        } else {
            format!(
                "not a release kvexact has rules for (known: {}); nearest below: {}; nearest above: {}",
                ranges.join(", "),
                below.unwrap_or_else(|| "none".into()),
                above.unwrap_or_else(|| "none".into()),
            )
        };
        Err(Error::UnknownEngineVersion {
            path: "<contracts>".to_string(),
            engine,
            version: version.to_string(),
            detail,
        })
    }

    /// Checks the releases against the profiles: ids unique and well-formed, each refining a
    /// profile of the same engine whose version selector matches every listed version, no
    /// version in two releases, hash/event rules present exactly when the contract has a KV
    /// plane, algorithms of the right engine, chat versions among the release's, liftable
    /// codes well-formed and unique (which codes exist is kvtemplate's: `kvprobe::contract`
    /// checks the built-in catalog's).
    pub(crate) fn validate_releases(&self, path: &str) -> Result<()> {
        let bad = |field: String, d: String| {
            Err(Error::invalid(DocKind::ContractCatalog, path, field, d))
        };
        let mut ids = BTreeSet::new();
        let mut seen: BTreeSet<(Engine, String)> = BTreeSet::new();
        for (i, r) in self.releases.iter().enumerate() {
            let f = |k: &str| format!("releases[{i}].{k}");
            if !crate::ids::is_valid_profile_id(&r.id) || !ids.insert(r.id.as_str()) {
                return bad(f("id"), format!("{:?}: not a unique safe id", r.id));
            }
            if self.profile(&r.id).is_some() {
                return bad(f("id"), "a release id must not be a contract id".into());
            }
            let Some(p) = self.profile(&r.contract) else {
                return bad(f("contract"), format!("{:?} is not a contract", r.contract));
            };
            if p.engine != r.engine {
                return bad(f("engine"), format!("contract {} is {}", p.id, p.engine));
            }
            if r.versions.is_empty() {
                return bad(f("versions"), "must list at least one version".into());
            }
            for v in &r.versions {
                if v.starts_with('v') || v.contains('+') || v.trim() != v || v.is_empty() {
                    return bad(f("versions"), format!("{v:?}: write the plain version"));
                }
                if !p.versions.matches(v) {
                    return bad(
                        f("versions"),
                        format!("{v} is outside contract {}'s versions", p.id),
                    );
                }
                if !seen.insert((r.engine, v.clone())) {
                    return bad(
                        f("versions"),
                        format!("{} {v} is in two releases", r.engine),
                    );
                }
            }
            let kv = p.capabilities.kv_events != CapabilityState::None;
            if r.hash.is_some() != kv || r.events.is_some() != kv {
                return bad(
                    f("hash"),
                    "hash and events rules are required exactly when the contract has a KV plane"
                        .into(),
                );
            }
            if let Some(h) = &r.hash {
                if h.algorithms.is_empty() || !h.algorithms.contains(&h.default_algorithm) {
                    return bad(
                        f("hash.defaultAlgorithm"),
                        "must be one of algorithms".into(),
                    );
                }
                if let Some(a) = h.algorithms.iter().find(|a| a.engine() != r.engine) {
                    return bad(f("hash.algorithms"), format!("{a:?} is not {}'s", r.engine));
                }
                let vllm = r.engine == Engine::Vllm;
                if vllm != (h.none_hash.is_some() && h.extra_keys.is_some())
                    || (!vllm && h.lookahead)
                    || (r.engine != Engine::Sglang && h.wide_pages)
                    || (r.engine == Engine::Trtllm) != h.cache_salt.is_some()
                {
                    return bad(f("hash"), format!("rules that {} does not have", r.engine));
                }
                if h.default_block_size == 0 {
                    return bad(f("hash.defaultBlockSize"), "must be at least 1".into());
                }
            }
            if let Some(p) = r
                .prefix_hit
                .as_ref()
                .and_then(|p| p.prompt_logprobs.as_ref())
            {
                if r.engine != Engine::Vllm || !matches!(p.as_str(), "skip" | "cap-at-start") {
                    return bad(
                        f("prefixHit.promptLogprobs"),
                        format!("{p:?}: not a {} rule (skip, cap-at-start: vLLM)", r.engine),
                    );
                }
            }
            let wants_tokenizer = r.engine != Engine::Llamacpp;
            if r.tokenizer.is_some() != wants_tokenizer {
                return bad(
                    f("tokenizer"),
                    "required exactly for engines with a chat or completions path".into(),
                );
            }
            if let Some(t) = &r.tokenizer {
                if !matches!(
                    t.added_tokens.as_str(),
                    "tokenizer-json" | "tokenizer-config" | "either"
                ) {
                    return bad(
                        f("tokenizer.addedTokens"),
                        format!(
                            "{:?}: tokenizer-json, tokenizer-config or either",
                            t.added_tokens
                        ),
                    );
                }
            }
            if let Some(d) = &r.deployment {
                let lookahead = r.hash.as_ref().is_some_and(|h| h.lookahead);
                if r.hash.is_none() {
                    return bad(f("deployment"), "a release without a KV plane".into());
                }
                d.validate(r.engine, lookahead, path, &f("deployment"))?;
            }
            if let Some(c) = &r.chat {
                if c.versions.is_empty() || c.versions.iter().any(|v| !r.versions.contains(v)) {
                    return bad(
                        f("chat.versions"),
                        "must be a non-empty subset of the release's versions".into(),
                    );
                }
                let mut codes = BTreeSet::new();
                for code in &c.liftable {
                    let well_formed = code.starts_with(|ch: char| ch.is_ascii_lowercase())
                        && code.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_');
                    if !well_formed || !codes.insert(code.as_str()) {
                        return bad(
                            f("chat.liftable"),
                            format!("{code:?}: not a unique refusal code name"),
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_are_exact_and_round_trip() {
        for e in Engine::ALL {
            assert_eq!(Engine::from_name(e.as_str()), Some(e));
            assert_eq!(e.as_str().parse::<Engine>(), Ok(e));
            let yaml = serde_yaml::to_string(&e).unwrap();
            assert_eq!(yaml.trim(), e.as_str());
        }
        for bad in [
            "",
            "VLLM",
            "vllm-kv-array-v1",
            "tensorrt_llm",
            "vllm ",
            "llama.cpp",
        ] {
            assert_eq!(Engine::from_name(bad), None, "{bad:?}");
            assert_eq!(bad.parse::<Engine>(), Err(UnknownEngine(bad.to_string())));
        }
        assert_eq!(
            Engine::ALL
                .iter()
                .filter(|e| e.has_kv_plane())
                .copied()
                .collect::<Vec<_>>(),
            Engine::WITH_KV_PLANE
        );
    }

    #[test]
    fn the_engine_of_an_id_is_the_catalogs() {
        let cat = builtin().unwrap();
        for p in &cat.profiles {
            assert_eq!(cat.engine_of(&p.id), Some(p.engine), "{}", p.id);
        }
        for r in &cat.releases {
            assert_eq!(cat.engine_of(&r.id), Some(r.engine), "{}", r.id);
        }
        assert_eq!(cat.engine_of("vllm-kv-map-v3-r0.31"), Some(Engine::Vllm));
        for unknown in ["vllm-kv-v1", "sglang", "", "trtllm-kv-http-v9"] {
            assert_eq!(cat.engine_of(unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn builtin_catalog_is_complete() {
        let cat = builtin().unwrap();
        let ids: Vec<_> = cat.profiles.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "vllm-kv-array-v1",
                "vllm-kv-map-v2",
                "sglang-kv-rank-v1",
                "trtllm-kv-http-v1",
                "trtllm-kv-http-preview-v1",
                "llamacpp-nokv-v1",
                "vllm-kv-map-v3",
                "sglang-kv-rank-v2",
                "sglang-kv-map-v2",
                "trtllm-kv-http-v2"
            ]
        );
        assert_eq!(cat.engine_ids[&Engine::Sglang], 1);
        let map = cat.profile("vllm-kv-map-v2").unwrap();
        assert_eq!(
            map.default_hash_algorithm(),
            Some(HashAlgorithm::Sha256Cbor)
        );
        assert_eq!(map.event_format(), Some("vllm-kv-tagged-map-v2"));
        assert_eq!(
            cat.profile("llamacpp-nokv-v1").unwrap().event_format(),
            None
        );
    }

    #[test]
    fn version_selectors() {
        let cat = builtin().unwrap();
        let id = |e, v| cat.resolve(e, v).map(|p| p.id.as_str());
        assert_eq!(id(Engine::Vllm, "0.28.0"), Some("vllm-kv-map-v2"));
        assert_eq!(id(Engine::Vllm, "v0.24.0"), Some("vllm-kv-map-v2"));
        assert_eq!(id(Engine::Vllm, "0.23.0"), Some("vllm-kv-array-v1"));
        assert_eq!(id(Engine::Vllm, "0.16.9"), None);
        assert_eq!(id(Engine::Vllm, "0.29.0"), Some("vllm-kv-map-v3"));
        assert_eq!(id(Engine::Vllm, "0.34.0"), Some("vllm-kv-map-v3"));
        assert_eq!(id(Engine::Vllm, "0.35.0"), None);
        assert_eq!(id(Engine::Sglang, "0.5.18"), Some("sglang-kv-rank-v1"));
        assert_eq!(id(Engine::Sglang, "0.5.19"), Some("sglang-kv-rank-v2"));
        assert_eq!(
            id(Engine::Trtllm, "1.3.0rc24"),
            Some("trtllm-kv-http-preview-v1")
        );
        assert_eq!(id(Engine::Trtllm, "1.2.1"), Some("trtllm-kv-http-v1"));
        assert_eq!(id(Engine::Vllm, "0.28"), None);
    }

    #[test]
    fn every_release_resolves_to_itself_and_nothing_else_resolves() {
        let cat = builtin().unwrap();
        assert_eq!(cat.releases.len(), 21);
        for r in &cat.releases {
            for v in &r.versions {
                assert_eq!(cat.resolve_release(r.engine, v).unwrap().id, r.id, "{v}");
                let with_v = format!("v{v}+cu126");
                assert_eq!(cat.resolve_release(r.engine, &with_v).unwrap().id, r.id);
            }
        }
        let id = |e, v| cat.resolve_release(e, v).map(|r| r.id.as_str());
        assert_eq!(id(Engine::Vllm, "0.24.0").unwrap(), "vllm-kv-map-v2-r0.24");
        assert_eq!(
            id(Engine::Vllm, "0.18.1").unwrap(),
            "vllm-kv-array-v1-r0.17"
        );
        assert_eq!(
            id(Engine::Vllm, "0.19.0").unwrap(),
            "vllm-kv-array-v1-r0.19"
        );
        assert_eq!(
            id(Engine::Sglang, "0.5.23").unwrap(),
            "sglang-kv-map-v2-r0.5.23"
        );
        assert_eq!(
            id(Engine::Trtllm, "1.3.0rc29").unwrap(),
            "trtllm-kv-http-v2-r1.3.0rc29"
        );
        // Inside a contract's range but not a release: refused, never the neighbour's rules.
        for (e, v) in [
            (Engine::Vllm, "0.16.0"),
            (Engine::Vllm, "0.35.0"),
            (Engine::Vllm, "0.33.1"),
            (Engine::Vllm, "0.17.2"),
            (Engine::Vllm, "0.31.1.dev3"),
            (Engine::Vllm, "0.31"),
            (Engine::Sglang, "0.5.17"),
            (Engine::Sglang, "0.5.24"),
            (Engine::Trtllm, "1.3.0rc25"),
            (Engine::Vllm, ""),
        ] {
            let err = cat.resolve_release(e, v).unwrap_err();
            assert_eq!(err.code(), "UNKNOWN_ENGINE_VERSION", "{v}");
        }
        let msg = cat
            .resolve_release(Engine::Vllm, "0.35.0")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("nearest below: 0.34.0 (vllm-kv-map-v3-r0.34"),
            "{msg}"
        );
        assert!(msg.contains("nearest above: none"), "{msg}");
        let msg = cat
            .resolve_release(Engine::Vllm, "0.17.2")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("nearest below: 0.17.1") && msg.contains("above: 0.18.0"),
            "{msg}"
        );
    }

    #[test]
    fn bad_releases_are_refused() {
        let good = BUILTIN_CONTRACTS_YAML;
        for (from, to) in [
            ("versions: [0.19.0]", "versions: [0.19.0, 0.18.1]"),
            ("versions: [0.19.0]", "versions: [0.19.0, 0.40.0]"),
            ("versions: [0.19.0]", "versions: []"),
            ("versions: [0.19.0]", "versions: [v0.19.0]"),
            ("addedTokens: either", "addedTokens: maybe"),
            (
                "contract: vllm-kv-array-v1\n",
                "contract: sglang-kv-rank-v1\n",
            ),
            ("contract: vllm-kv-array-v1\n", "contract: nope\n"),
            (
                "- id: vllm-kv-array-v1-r0.19",
                "- id: vllm-kv-array-v1-r0.17",
            ),
            (
                "      noneHash: A\n      extraKeys: K1\n",
                "      extraKeys: K1\n",
            ),
            (
                "defaultAlgorithm: sha256_sglang\n      defaultBlockSize: 16\n    events:\n      format: sglang-kv-map-v2",
                "defaultAlgorithm: sha256\n      defaultBlockSize: 16\n    events:\n      format: sglang-kv-map-v2",
            ),
            ("      cacheSalt: std_hash_string\n", ""),
            ("defaultBlockSize: 64", "defaultBlockSize: 0"),
            ("promptLogprobs: cap-at-start", "promptLogprobs: cap-at-end"),
            ("      defaultBlockSize: 32\n", ""),
            (
                "      versions: [0.29.0]\n      toolSerialization",
                "      versions: [0.30.0]\n      toolSerialization",
            ),
        ] {
            assert!(good.contains(from), "{from}");
            let bad = good.replacen(from, to, 1);
            assert!(
                ContractCatalog::parse(bad.as_bytes(), "c.yaml").is_err(),
                "{to}"
            );
        }
    }

    #[test]
    fn bad_catalogs_are_refused() {
        let good = BUILTIN_CONTRACTS_YAML;
        for (from, to) in [
            ("generation: 1", "generation: 0"),
            ("exact: v0.5.18", "exact: ''"),
            ("wireSchema: vllm-kv-tagged-map-v2", "wireSchema: nope"),
            (
                "hashAlgorithms: [sha256_sglang]",
                "hashAlgorithms: [sha256_cbor]",
            ),
            ("hashAlgorithms: [sha256_sglang]", "hashAlgorithms: [md5]"),
            (
                "    probe: sglang-server-info-v1",
                "    probe: sglang-server-info-v1\n    extra: 1",
            ),
        ] {
            assert!(good.contains(from), "{from}");
            let bad = good.replacen(from, to, 1);
            assert!(
                ContractCatalog::parse(bad.as_bytes(), "c.yaml").is_err(),
                "{to}"
            );
        }
    }

    #[test]
    fn liftable_codes_are_data() {
        let cat = builtin().unwrap();
        let lift = |id: &str| {
            cat.release(id)
                .and_then(|r| r.chat.as_ref())
                .map(|c| c.liftable.clone())
                .unwrap_or_default()
        };
        assert!(lift("vllm-kv-map-v3-r0.31").contains(&"tools".to_string()));
        let trt = lift("trtllm-kv-http-v2-r1.3.0rc29");
        assert!(trt.contains(&"tools".to_string()));
        assert!(!trt.contains(&"continue_final_message".to_string()));
        assert!(lift("vllm-kv-map-v3-r0.30").is_empty());
        let good = BUILTIN_CONTRACTS_YAML;
        let from = "      liftable: [tools, template_kwargs,";
        assert!(good.contains(from));
        for to in [
            "      liftable: [tools, tools, template_kwargs,",
            "      liftable: [Tools, template_kwargs,",
            "      liftable: [tool-calls, template_kwargs,",
            "      liftable: ['', template_kwargs,",
        ] {
            let bad = good.replacen(from, to, 1);
            let err = ContractCatalog::parse(bad.as_bytes(), "c.yaml").unwrap_err();
            assert!(err.to_string().contains("chat.liftable"), "{to}: {err}");
        }
        // Absent = nothing liftable.
        let none = good.replacen(
            "      liftable: [tools, template_kwargs, add_generation_prompt, continue_final_message, multi_text_part, trailing_assistant, message_field, null_content]\n",
            "",
            1,
        );
        let cat = ContractCatalog::parse(none.as_bytes(), "c.yaml").unwrap();
        assert!(cat
            .releases
            .iter()
            .any(|r| r.chat.as_ref().is_some_and(|c| c.liftable.is_empty())));
    }
}
