//! Supported-models catalog (`validated-models.yaml`, docs/contracts/registry.md §10.1), weights indexes (§10.2) and
//! the engine support catalog (`support-catalog.yaml`, §10.3), as typed, validated models.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use kvprofile_core::contracts::{self, Engine};
use kvprofile_core::{DocKind, Result};

use crate::error::{invalid, schema};
use kvprofile_core::ids::{is_installer_profile_id, is_sha1_hex, is_sha256_hex, sha256_hex};
use kvprofile_core::Api;

/// `schemaVersion` of `validated-models.yaml`.
pub const MODELS_SCHEMA_VERSION: &str = "models.loxilb.io/v1alpha1";
/// `schemaVersion` of `support-catalog.yaml`.
pub const SUPPORT_SCHEMA_VERSION: &str = "engine-support.loxilb.io/v1alpha1";

/// An evidence gate value (`not_run` is not a pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// The gate passed.
    Pass,
    /// The gate failed.
    Fail,
    /// `not_run`: the gate has not been run (not a pass).
    NotRun,
    /// The gate does not apply.
    NA,
}

/// A qualification-row state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TupleState {
    /// Supported.
    Validated,
    /// Has evidence, not supported.
    Candidate,
    /// Refused with a reason.
    Blocked,
}

/// A deployment mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One engine does prefill and decode.
    Converged,
    /// Prefill/decode disaggregation.
    Pd,
}

/// `engines[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EngineRelease {
    /// Engine family.
    pub engine: Engine,
    /// Version (with `v` for vLLM/SGLang).
    pub version: String,
    /// Engine-contract profile id.
    pub contract: String,
    /// Registry image name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `sha256:<64 hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Why there is no registry image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_note: Option<String>,
}

/// `evidence` of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ValidationEvidence {
    /// `renderDifferential`.
    pub render_differential: Gate,
    /// `pdChat`.
    pub pd_chat: Gate,
    /// `pdCompletions`.
    pub pd_completions: Gate,
    /// `abPerf`.
    pub ab_perf: Gate,
}

/// One A/B performance point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PerfPoint {
    /// `topology`.
    pub topology: String,
    /// `surface`.
    pub surface: String,
    /// `corpus`.
    pub corpus: String,
    /// `rateRps`.
    pub rate_rps: f64,
    /// `requestsPerArm`.
    pub requests_per_arm: u64,
    /// `exactTtftP95Ms`.
    pub exact_ttft_p95_ms: f64,
    /// `baselineTtftP95Ms`.
    pub baseline_ttft_p95_ms: f64,
    /// `exactTtftP50Ms`.
    pub exact_ttft_p50_ms: f64,
    /// `baselineTtftP50Ms`.
    pub baseline_ttft_p50_ms: f64,
    /// `date`.
    pub date: String,
}

/// One model × engine-version row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Tuple {
    /// `engine`.
    pub engine: Engine,
    /// `engineVersion`.
    pub engine_version: String,
    /// `state`.
    pub state: TupleState,
    /// `reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `detail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `modes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<Vec<Mode>>,
    /// `apis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apis: Option<Vec<Api>>,
    /// `evidence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<ValidationEvidence>,
    /// `lastValidated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_validated: Option<String>,
    /// `launch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Vec<String>>,
    /// `perf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<Vec<PerfPoint>>,
}

/// `models[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelEntry {
    /// `profileId`.
    pub profile_id: String,
    /// `repo`.
    pub repo: String,
    /// `revision`.
    pub revision: String,
    /// `gated`.
    pub gated: bool,
    /// `tokenizerSha256`.
    pub tokenizer_sha256: String,
    /// `templateSha256`.
    pub template_sha256: String,
    /// `weightsIndexSha256`.
    pub weights_index_sha256: String,
    /// `tokenizerConfigSha256` (kvexact addition, docs/contracts/registry.md §10.1): the
    /// sha256 of the upstream `tokenizer_config.json` at `revision`, or `none` when the
    /// repository has none. Absent (`None`) in catalogs written without it (the gateway's):
    /// then the weights index, itself pinned, is the only pin of the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_config_sha256: Option<ConfigPin>,
    /// `tuples`.
    pub tuples: Vec<Tuple>,
}

/// A catalog's `tokenizerConfigSha256`: the sha256 of the upstream `tokenizer_config.json`,
/// or `none` (the repository has no such file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ConfigPin {
    /// 64 lowercase hex digits.
    Sha256(String),
    /// `none`: the upstream repository has no `tokenizer_config.json`.
    NoneUpstream,
}

impl ConfigPin {
    /// The pinned sha256, if any.
    pub fn sha256(&self) -> Option<&str> {
        match self {
            ConfigPin::Sha256(s) => Some(s),
            ConfigPin::NoneUpstream => None,
        }
    }
}

impl TryFrom<String> for ConfigPin {
    type Error = String;

    fn try_from(s: String) -> std::result::Result<Self, String> {
        if s == "none" {
            Ok(ConfigPin::NoneUpstream)
        } else if is_sha256_hex(&s) {
            Ok(ConfigPin::Sha256(s))
        } else {
            Err(format!(
                "tokenizerConfigSha256 {s:?} must be 64 lowercase hex digits or `none`"
            ))
        }
    }
}

impl From<ConfigPin> for String {
    fn from(p: ConfigPin) -> String {
        match p {
            ConfigPin::Sha256(s) => s,
            ConfigPin::NoneUpstream => "none".into(),
        }
    }
}

/// The whole `validated-models.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SupportedModels {
    /// `schemaVersion`.
    pub schema_version: String,
    /// `engines`.
    pub engines: Vec<EngineRelease>,
    /// `launchAll`.
    #[serde(default)]
    pub launch_all: Vec<String>,
    /// `excludedFeatures`.
    #[serde(default)]
    pub excluded_features: Vec<String>,
    /// `models`.
    pub models: Vec<ModelEntry>,
}

/// `YYYY-MM-DD` with month/day ranges checked.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| {
        b.get(r)
            .filter(|d| d.iter().all(u8::is_ascii_digit))
            .map(|d| d.iter().fold(0u32, |a, &c| a * 10 + u32::from(c - b'0')))
    };
    b.len() == 10
        && b.get(4) == Some(&b'-')
        && b.get(7) == Some(&b'-')
        && num(0..4).is_some()
        && num(5..7).is_some_and(|m| (1..=12).contains(&m))
        && num(8..10).is_some_and(|d| (1..=31).contains(&d))
}

fn image_digest_ok(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(is_sha256_hex)
}

fn no_dups<T: Ord>(v: &[T]) -> bool {
    v.iter().collect::<BTreeSet<_>>().len() == v.len()
}

impl SupportedModels {
    /// Strict parse then [`SupportedModels::validate`].
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let m: SupportedModels =
            serde_yaml::from_slice(bytes).map_err(|e| schema(DocKind::SupportedModels, path, e))?;
        m.validate(path)?;
        Ok(m)
    }

    /// The rules of docs/contracts/registry.md §10.1.
    pub fn validate(&self, path: &str) -> Result<()> {
        let bad = |f: String, d: &str| Err(invalid(DocKind::SupportedModels, path, f, d));
        if self.schema_version != MODELS_SCHEMA_VERSION {
            return bad("schemaVersion".into(), "unknown schema version");
        }
        let catalog = contracts::builtin()?;
        let mut releases = BTreeSet::new();
        for (i, e) in self.engines.iter().enumerate() {
            let f = |k: &str| format!("engines[{i}].{k}");
            if !releases.insert((e.engine, e.version.as_str())) {
                return bad(f("version"), "duplicate (engine, version)");
            }
            let wants_v = matches!(e.engine, Engine::Vllm | Engine::Sglang);
            if wants_v != e.version.starts_with('v') {
                return bad(
                    f("version"),
                    "vLLM/SGLang versions carry a leading v, others none",
                );
            }
            match catalog.profile(&e.contract) {
                Some(c) if c.engine == e.engine && c.versions.matches(&e.version) => {}
                Some(_) => {
                    return bad(f("contract"), "contract does not cover this engine version")
                }
                None => return bad(f("contract"), "not an engine-contract profile id"),
            }
            if e.digest.as_deref().is_some_and(|d| !image_digest_ok(d)) {
                return bad(f("digest"), "must be sha256:<64 lowercase hex>");
            }
            if e.image.is_none() && e.image_note.is_none() {
                return bad(f("image"), "image or imageNote required");
            }
        }
        let mut ids = BTreeSet::new();
        for (i, m) in self.models.iter().enumerate() {
            let f = |k: &str| format!("models[{i}].{k}");
            if !is_installer_profile_id(&m.profile_id) {
                return bad(f("profileId"), "must match ^[a-z0-9][a-z0-9.-]{0,62}$");
            }
            if !ids.insert(m.profile_id.as_str()) {
                return bad(f("profileId"), "duplicate profile id");
            }
            match m.repo.split_once('/') {
                Some((org, name)) if !org.is_empty() && !name.is_empty() && !name.contains('/') => {
                }
                _ => return bad(f("repo"), "must be <org>/<name>"),
            }
            if !is_sha1_hex(&m.revision) {
                return bad(f("revision"), "must be a 40-hex commit, never a branch");
            }
            for (k, v) in [
                ("tokenizerSha256", &m.tokenizer_sha256),
                ("templateSha256", &m.template_sha256),
                ("weightsIndexSha256", &m.weights_index_sha256),
            ] {
                if !is_sha256_hex(v) {
                    return bad(f(k), "must be 64 lowercase hex digits");
                }
            }
            let mut rows = BTreeSet::new();
            for (j, t) in m.tuples.iter().enumerate() {
                let f = |k: &str| format!("models[{i}].tuples[{j}].{k}");
                if !releases.contains(&(t.engine, t.engine_version.as_str())) {
                    return bad(f("engineVersion"), "not listed in engines");
                }
                if !rows.insert((t.engine, t.engine_version.as_str())) {
                    return bad(f("engineVersion"), "duplicate row");
                }
                if t.state == TupleState::Blocked {
                    if t.reason.as_deref().is_none_or(str::is_empty) {
                        return bad(f("reason"), "blocked rows need a reason");
                    }
                    if t.detail.as_deref().is_none_or(str::is_empty) {
                        return bad(f("detail"), "blocked rows need a detail");
                    }
                    continue;
                }
                let (Some(modes), Some(apis), Some(ev), Some(date)) =
                    (&t.modes, &t.apis, &t.evidence, &t.last_validated)
                else {
                    return bad(
                        f("state"),
                        "non-blocked rows need modes, apis, evidence, lastValidated",
                    );
                };
                if modes.is_empty() || !no_dups(modes) {
                    return bad(f("modes"), "non-empty subset of converged, pd");
                }
                if apis.is_empty() || !no_dups(apis) {
                    return bad(f("apis"), "non-empty subset of completions, chat");
                }
                if !is_date(date) {
                    return bad(f("lastValidated"), "must be YYYY-MM-DD");
                }
                let has_perf = t.perf.as_ref().is_some_and(|p| !p.is_empty());
                if (ev.ab_perf == Gate::Pass) != has_perf {
                    return bad(
                        f("evidence.abPerf"),
                        "pass exactly when perf points are present",
                    );
                }
                if let Some(p) = t.perf.iter().flatten().find(|p| !is_date(&p.date)) {
                    return bad(f("perf.date"), &format!("{:?} must be YYYY-MM-DD", p.date));
                }
                if t.state == TupleState::Validated {
                    let chat = apis.contains(&Api::Chat);
                    let compl = apis.contains(&Api::Completions);
                    let pd = modes.contains(&Mode::Pd);
                    let need = [
                        (chat, ev.render_differential, "evidence.renderDifferential"),
                        (pd && chat, ev.pd_chat, "evidence.pdChat"),
                        (pd && compl, ev.pd_completions, "evidence.pdCompletions"),
                        (true, ev.ab_perf, "evidence.abPerf"),
                    ];
                    if let Some((_, _, k)) = need.iter().find(|(n, g, _)| *n && *g != Gate::Pass) {
                        return bad(f(k), "a validated row needs pass");
                    }
                }
            }
        }
        Ok(())
    }

    /// Validated rows also need their engine release promoted `validated` in the support
    /// catalog.
    pub fn check_support(&self, support: &SupportCatalog, path: &str) -> Result<()> {
        for (i, m) in self.models.iter().enumerate() {
            for (j, t) in m.tuples.iter().enumerate() {
                if t.state != TupleState::Validated {
                    continue;
                }
                let promoted = support.entries.iter().any(|e| {
                    e.engine == t.engine
                        && e.version == t.engine_version
                        && e.promotion == Promotion::Validated
                });
                if !promoted {
                    return Err(invalid(
                        DocKind::SupportedModels,
                        path,
                        format!("models[{i}].tuples[{j}].state"),
                        "validated row without a validated support-catalog entry",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The row of one model on one engine version.
    pub fn tuple(&self, profile_id: &str, engine: Engine, version: &str) -> Option<&Tuple> {
        self.models
            .iter()
            .find(|m| m.profile_id == profile_id)?
            .tuples
            .iter()
            .find(|t| t.engine == engine && t.engine_version == version)
    }
}

/// Hash algorithm of a weights-index line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsAlgo {
    /// sha256 of the bytes (LFS files), 64 hex.
    Sha256,
    /// git blob SHA-1 of `"blob <size>\0" + bytes`, 40 hex.
    Gitblob,
}

/// One line of a weights index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsEntry {
    /// Algorithm.
    pub algo: WeightsAlgo,
    /// Lowercase hex digest.
    pub hex: String,
    /// Size in bytes.
    pub size: u64,
    /// Top-level file name.
    pub name: String,
}

/// A weights index (`scripts/models/weights/<profileId>.index`, docs/contracts/registry.md §10.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsIndex {
    /// Lines, sorted by name.
    pub entries: Vec<WeightsEntry>,
    /// sha256 of the file (the `weightsIndexSha256` pin).
    pub sha256: String,
}

/// Files the index never lists.
fn skipped_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let stem = lower.split('.').next().unwrap_or("");
    matches!(
        stem,
        "readme" | "license" | "notice" | "use_policy" | "usage_policy"
    ) || lower == ".gitattributes"
        || [".md", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"]
            .iter()
            .any(|ext| lower.ends_with(ext))
}

impl WeightsIndex {
    /// Parses and validates an index: `<algo>:<hex> <size> <name>` per line, sorted by name,
    /// trailing newline, safe names, no skipped files.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let bad = |f: String, d: &str| Err(invalid(DocKind::WeightsIndex, path, f, d));
        let Ok(text) = std::str::from_utf8(bytes) else {
            return bad("".into(), "not UTF-8");
        };
        if text.is_empty() {
            return bad("".into(), "empty index");
        }
        let Some(body) = text.strip_suffix('\n') else {
            return bad("".into(), "missing trailing newline");
        };
        let mut entries: Vec<WeightsEntry> = Vec::new();
        for (n, line) in body.split('\n').enumerate() {
            let f = format!("line {}", n + 1);
            let mut parts = line.splitn(3, ' ');
            let (Some(digest), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                return bad(f, "want `<algo>:<hex> <size> <name>`");
            };
            let (algo, hex) = match digest.split_once(':') {
                Some(("sha256", h)) if is_sha256_hex(h) => (WeightsAlgo::Sha256, h),
                Some(("gitblob", h)) if is_sha1_hex(h) => (WeightsAlgo::Gitblob, h),
                _ => return bad(f, "digest must be sha256:<64 hex> or gitblob:<40 hex>"),
            };
            if size.is_empty() || !size.bytes().all(|b| b.is_ascii_digit()) {
                return bad(f, "size must be decimal digits");
            }
            let Ok(size) = size.parse::<u64>() else {
                return bad(f, "size out of range");
            };
            if name.is_empty()
                || name == "."
                || name == ".."
                || name.starts_with('-')
                || name.contains('/')
                || name.chars().any(char::is_control)
            {
                return bad(f, "unsafe file name");
            }
            if skipped_name(name) {
                return bad(f, "file the index never lists (README/LICENSE/*.md/image…)");
            }
            if let Some(prev) = entries.last() {
                if prev.name.as_str() >= name {
                    return bad(f, "names must be sorted and unique");
                }
            }
            entries.push(WeightsEntry {
                algo,
                hex: hex.to_string(),
                size,
                name: name.to_string(),
            });
        }
        Ok(WeightsIndex {
            entries,
            sha256: sha256_hex(bytes),
        })
    }

    /// Sum of the indexed sizes (the snapshot size).
    pub fn total_size(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The line of the top-level file `name`, if the index lists it.
    pub fn entry(&self, name: &str) -> Option<&WeightsEntry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// Support-catalog promotion state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Promotion {
    /// `observed`: seen running, no evidence yet.
    Observed,
    /// `candidate`: evidence being gathered.
    Candidate,
    /// `validated`: supported, with its evidence bundle.
    Validated,
    /// `blocked`: known not to work.
    Blocked,
    /// `deprecated`: no longer supported.
    Deprecated,
}

/// How a capability is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Implementation {
    /// `native`: the engine implements it itself.
    Native,
    /// `adapter`: implemented by a kvexact adapter.
    Adapter,
    /// `none`: not implemented.
    None,
}

/// Evidence gates of one capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapabilityGates {
    /// `source`.
    pub source: Gate,
    /// `fixture`.
    pub fixture: Gate,
    /// `synthetic`.
    pub synthetic: Gate,
    /// `realEngine`.
    pub real_engine: Gate,
}

/// One capability of a support entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityEvidence {
    /// `implementation`.
    pub implementation: Implementation,
    /// `evidence`.
    pub evidence: CapabilityGates,
}

/// The image a validated entry ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SupportImage {
    /// `sha256:<64 hex>`.
    pub platform_digest: String,
}

/// One exact identity tuple of the support catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SupportEntry {
    /// `engine`.
    pub engine: Engine,
    /// `version`.
    pub version: String,
    /// `revision`.
    pub revision: String,
    /// `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<SupportImage>,
    /// `gatewayRelease`.
    pub gateway_release: String,
    /// `profile`.
    pub profile: String,
    /// `promotion`.
    pub promotion: Promotion,
    /// `evidenceBundle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_bundle: Option<String>,
    /// `capabilities`.
    #[serde(deserialize_with = "kvprofile_core::ids::unique_map")]
    pub capabilities: BTreeMap<String, CapabilityEvidence>,
}

/// The whole `support-catalog.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SupportCatalog {
    /// `schemaVersion`.
    pub schema_version: String,
    /// `entries`.
    pub entries: Vec<SupportEntry>,
}

impl SupportCatalog {
    /// Strict parse and the catalog's own rules: every entry's contract exists for its engine
    /// and version; a `validated` entry carries a 40-hex revision, an image digest, an evidence
    /// bundle and a real-engine pass on every implemented capability.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let c: SupportCatalog =
            serde_yaml::from_slice(bytes).map_err(|e| schema(DocKind::SupportCatalog, path, e))?;
        let bad = |f: String, d: &str| Err(invalid(DocKind::SupportCatalog, path, f, d));
        if c.schema_version != SUPPORT_SCHEMA_VERSION {
            return bad("schemaVersion".into(), "unknown schema version");
        }
        let catalog = contracts::builtin()?;
        for (i, e) in c.entries.iter().enumerate() {
            let f = |k: &str| format!("entries[{i}].{k}");
            match catalog.profile(&e.profile) {
                Some(p) if p.engine == e.engine && p.versions.matches(&e.version) => {}
                _ => return bad(f("profile"), "contract does not cover this engine version"),
            }
            if e.image
                .as_ref()
                .is_some_and(|im| !image_digest_ok(&im.platform_digest))
            {
                return bad(
                    f("image.platformDigest"),
                    "must be sha256:<64 lowercase hex>",
                );
            }
            if e.promotion == Promotion::Validated {
                if !is_sha1_hex(&e.revision) {
                    return bad(f("revision"), "validated entries need the 40-hex revision");
                }
                if e.image.is_none() {
                    return bad(f("image"), "validated entries need the image digest");
                }
                if e.evidence_bundle.as_deref().is_none_or(str::is_empty) {
                    return bad(
                        f("evidenceBundle"),
                        "validated entries need an evidence bundle",
                    );
                }
                if let Some((k, _)) = e.capabilities.iter().find(|(_, c)| {
                    c.implementation != Implementation::None && c.evidence.real_engine != Gate::Pass
                }) {
                    return bad(
                        f(&format!("capabilities.{k}")),
                        "validated needs realEngine pass",
                    );
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_index_rules() {
        let good = "gitblob:3e3aaf51a035cb5092d9f6827a0dc074657ba88c 877 config.json\nsha256:1ff795ff6a07e6a68085d206fb84417da2f083f68391c2843cd2b8ac6df8538f 2471645608 model.safetensors\n";
        let idx = WeightsIndex::parse(good.as_bytes(), "w").unwrap();
        assert_eq!(idx.entries.len(), 2);
        assert_eq!(idx.total_size(), 2471645608 + 877);
        for bad in [
            good.trim_end(),
            "",
            &good.replace("config.json", "z.json"),
            &good.replace("config.json", "README.md"),
            &good.replace("config.json", "-x"),
            &good.replace("config.json", "a/b"),
            &good.replace(" 877 ", " +877 "),
            &good.replace("gitblob:3e", "md5:3e"),
            &good.replace("gitblob:3e3a", "gitblob:3e3"),
            &format!("{good}\n"),
        ] {
            assert!(WeightsIndex::parse(bad.as_bytes(), "w").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tokenizer_config_pins() {
        let entry = |pin: &str| {
            let doc = format!(
                "profileId: m-v1\nrepo: o/m\nrevision: {}\ngated: false\n\
                 tokenizerSha256: {h}\ntemplateSha256: {h}\nweightsIndexSha256: {h}\n{pin}tuples: []\n",
                "1".repeat(40),
                h = "a".repeat(64)
            );
            serde_yaml::from_str::<ModelEntry>(&doc).map(|m| m.tokenizer_config_sha256)
        };
        assert_eq!(entry("").unwrap(), None);
        assert_eq!(
            entry("tokenizerConfigSha256: none\n").unwrap(),
            Some(ConfigPin::NoneUpstream)
        );
        let hex = "b".repeat(64);
        let pin = entry(&format!("tokenizerConfigSha256: {hex}\n")).unwrap();
        assert_eq!(pin.as_ref().and_then(ConfigPin::sha256), Some(hex.as_str()));
        for bad in ["None", "\"\"", &"B".repeat(64), &"b".repeat(63)] {
            let e = entry(&format!("tokenizerConfigSha256: {bad}\n")).unwrap_err();
            assert!(
                e.to_string().contains("64 lowercase hex digits or `none`"),
                "{e}"
            );
        }
        assert_eq!(String::from(ConfigPin::NoneUpstream), "none");
    }

    #[test]
    fn dates() {
        assert!(is_date("2026-10-01"));
        assert!(!is_date("2026-13-01"));
        assert!(!is_date("2026-1-01"));
    }
}
