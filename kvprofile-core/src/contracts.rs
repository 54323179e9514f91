//! The engine-contract catalog (docs/contracts/registry.md §10.3): which contract profile ids exist, which engine and
//! engine versions each covers, its event wire format and its block-hash algorithms.
//!
//! The catalog kvexact trusts is compiled in from `data/contracts.yaml` ([`builtin`]); the same
//! typed model parses the gateway's own `engine-contracts/contracts.yaml`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::{DocKind, RegistryError, Result};

/// The catalog source compiled into the crate.
pub const BUILTIN_CONTRACTS_YAML: &str = include_str!("../data/contracts.yaml");

/// An inference engine family: the one engine vocabulary of every kvexact crate above kvhash
/// (kvtemplate, kvprobe, the C ABI's `kvexact_engine` converter and the CLI all use this type).
///
/// Names are exactly the catalog's (`vllm`, `sglang`, `trtllm`, `llamacpp`); the engine of a
/// contract or release id is looked up in the catalog ([`ContractCatalog::engine_of`]), never
/// read off the id's spelling.
///
/// ```
/// use kvprofile_core::Engine;
/// assert_eq!("sglang".parse::<Engine>(), Ok(Engine::Sglang));
/// assert!("sglang-kv-rank-v1".parse::<Engine>().is_err());
/// assert!(Engine::Trtllm.has_kv_plane() && !Engine::Llamacpp.has_kv_plane());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// vLLM.
    Vllm,
    /// SGLang.
    Sglang,
    /// TensorRT-LLM.
    Trtllm,
    /// llama.cpp (no KV plane).
    Llamacpp,
}

impl Engine {
    /// Every engine family, in catalog order.
    pub const ALL: [Engine; 4] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Trtllm,
        Engine::Llamacpp,
    ];

    /// The engines with a KV plane — block hashes, KV events and a chat path kvexact
    /// reproduces: vLLM, SGLang and TensorRT-LLM.
    pub const WITH_KV_PLANE: [Engine; 3] = [Engine::Vllm, Engine::Sglang, Engine::Trtllm];

    /// The engine named exactly `name` (`vllm`, `sglang`, `trtllm`, `llamacpp`); `None` for
    /// anything else, contract ids and other spellings included.
    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether the engine has a KV plane (false only for llama.cpp, whose contract
    /// `llamacpp-nokv-v1` routes without block hashes and has no chat path kvexact renders).
    pub fn has_kv_plane(self) -> bool {
        self != Engine::Llamacpp
    }

    /// The lowercase name used in every document (`vllm`, `sglang`, `trtllm`, `llamacpp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Trtllm => "trtllm",
            Engine::Llamacpp => "llamacpp",
        }
    }
}

/// A string that is not one of the four engine names ([`Engine::from_name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEngine(pub String);

impl fmt::Display for UnknownEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown engine {:?} (vllm, sglang, trtllm, llamacpp)",
            self.0
        )
    }
}

impl std::error::Error for UnknownEngine {}

impl std::str::FromStr for Engine {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> std::result::Result<Engine, UnknownEngine> {
        Engine::from_name(s).ok_or_else(|| UnknownEngine(s.to_string()))
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A block-hash algorithm an engine may be configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HashAlgorithm {
    /// vLLM `--prefix-caching-hash-algo sha256_cbor` (the contract default).
    Sha256Cbor,
    /// vLLM `xxhash_cbor`.
    XxhashCbor,
    /// vLLM `sha256` (pickle; the engine's own default).
    Sha256,
    /// vLLM `xxhash` (pickle).
    Xxhash,
    /// SGLang's raw-parent + little-endian u32 SHA-256 chain.
    Sha256Sglang,
    /// TensorRT-LLM's block hash (re-hashed from event token lists).
    BlockhashTrtllm,
}

impl HashAlgorithm {
    /// The engine whose algorithm this is.
    pub fn engine(self) -> Engine {
        match self {
            HashAlgorithm::Sha256Cbor
            | HashAlgorithm::XxhashCbor
            | HashAlgorithm::Sha256
            | HashAlgorithm::Xxhash => Engine::Vllm,
            HashAlgorithm::Sha256Sglang => Engine::Sglang,
            HashAlgorithm::BlockhashTrtllm => Engine::Trtllm,
        }
    }

    /// The name as written in documents (`sha256_cbor`, `sha256_sglang`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HashAlgorithm::Sha256Cbor => "sha256_cbor",
            HashAlgorithm::XxhashCbor => "xxhash_cbor",
            HashAlgorithm::Sha256 => "sha256",
            HashAlgorithm::Xxhash => "xxhash",
            HashAlgorithm::Sha256Sglang => "sha256_sglang",
            HashAlgorithm::BlockhashTrtllm => "blockhash_trtllm",
        }
    }
}

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
        let bad = |d: &str| {
            Err(RegistryError::invalid(
                DocKind::ContractCatalog,
                path,
                field,
                d,
            ))
        };
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

/// How far a capability is implemented for a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CapabilityState {
    /// Native implementation.
    Implemented,
    /// Through an adapter.
    Adapter,
    /// The engine lacks it.
    None,
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
    pub releases: Vec<crate::releases::Release>,
}

/// The schema version both catalogs carry.
pub const CONTRACTS_SCHEMA_VERSION: &str = "engine-contracts.loxilb.io/v1alpha1";

impl ContractCatalog {
    /// Parses and validates a catalog; `path` names the file in errors.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let cat: ContractCatalog = serde_yaml::from_slice(bytes)
            .map_err(|e| RegistryError::schema(DocKind::ContractCatalog, path, e))?;
        cat.validate(path)?;
        Ok(cat)
    }

    fn validate(&self, path: &str) -> Result<()> {
        let bad = |field: String, d: &str| {
            Err(RegistryError::invalid(
                DocKind::ContractCatalog,
                path,
                field,
                d,
            ))
        };
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
        RegistryError::invalid(
            DocKind::ContractCatalog,
            "<builtin contracts>",
            "",
            e.clone(),
        )
    })
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
        assert_eq!(id(Engine::Vllm, "0.34.0"), None);
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
        assert_eq!(cat.releases.len(), 20);
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
            (Engine::Vllm, "0.34.0"),
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
            .resolve_release(Engine::Vllm, "0.34.0")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("nearest below: 0.33.0 (vllm-kv-map-v3-r0.33"),
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
                "defaultAlgorithm: sha256_sglang\n    events:\n      format: sglang-kv-map-v2",
                "defaultAlgorithm: sha256\n    events:\n      format: sglang-kv-map-v2",
            ),
            ("      cacheSalt: std_hash_string\n", ""),
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
}
