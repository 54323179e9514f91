//! Registry generations (docs/contracts/registry.md §7): an all-or-nothing load of a registry root into an immutable,
//! reference-counted snapshot with its `setDigest`, lookups, discovery entries and drift check.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::artifacts::{resolve_bos_id, ArtifactReceipt, VerifiedArtifact, VerifiedArtifacts};
use crate::contracts::Engine;
use crate::error::{ArtifactRole, Error, Result};
use crate::fixtures::{fixture_dir, FixtureSet, FIXTURES_DIR};
use crate::ids::{sha256_hex, slug};
use crate::locator::Locator;
use crate::manifest::LoadedManifest;
use crate::profile::{AliasPolicy, Api, Feature, Profile};
use crate::trust::{TrustPolicy, TrustedRoot};
use crate::validator::ArtifactValidator;

/// The directory beneath the root holding engine manifests.
pub const MANIFESTS_DIR: &str = "manifests";

/// When manifests and probe fixtures are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttestationCheck {
    /// As the gateway does: on demand by the readiness controller, not at publish
    /// ([`Generation::load_manifest`], [`Generation::load_fixtures`]).
    #[default]
    Deferred,
    /// Also at publish: every present manifest and fixture set must load and pass the
    /// structural checks, else the whole load is refused (what `kvexact registry verify` does).
    AtPublish,
}

/// Options of a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// Trust policy (owners, caps, resolution).
    pub policy: TrustPolicy,
    /// When attestation files are checked.
    pub attestation: AttestationCheck,
}

/// Manifest and fixture sets of one profile, read at publish under
/// [`AttestationCheck::AtPublish`].
#[derive(Debug, Clone)]
pub struct AttestationFiles {
    /// `manifests/<id>.yaml` when present.
    pub manifest: Option<LoadedManifest>,
    /// Every present fixture set (vLLM, SGLang, TRT-LLM order).
    pub fixture_sets: Vec<FixtureSet>,
}

/// One published profile with its verified bytes.
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    /// The document.
    pub profile: Profile,
    /// Document path relative to the root (`<file>.yaml`).
    pub document_path: String,
    /// sha256 of the document bytes.
    pub document_sha256: String,
    /// Verified tokenizer/template bytes and the BOS id.
    pub artifacts: VerifiedArtifacts,
    /// The generation number this entry was published in.
    pub generation: u64,
    /// Present under [`AttestationCheck::AtPublish`].
    pub attestation: Option<AttestationFiles>,
    /// What the validator built while checking the artifacts (kvtemplate keeps the parsed
    /// tokenizer here, shared by every encoder built from this profile).
    pub prepared: Option<crate::Prepared>,
}

impl LoadedProfile {
    /// The discovery entry of this profile (docs/contracts/registry.md §7).
    pub fn discovery_entry(&self) -> DiscoveryEntry {
        let p = &self.profile;
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        DiscoveryEntry {
            profile_id: p.profile_id.clone(),
            gen: self.generation,
            base_model: p.base_model.clone(),
            alias_policy: p.alias_policy,
            allowed_aliases: p.allowed_aliases.clone().unwrap_or_default(),
            supported_apis: p.supported_apis.clone(),
            supported_features: p.supported_features.clone().unwrap_or_default(),
            excluded_features: p.excluded_features.clone().unwrap_or_default(),
            tokenizer_revision: s(&p.tokenizer_revision),
            tokenizer_sha256: p.tokenizer_sha256.clone(),
            template_sha256: s(&p.template_sha256),
            template_content_format: p
                .template_content_format
                .map(|f| match f {
                    crate::profile::TemplateContentFormat::String => "string",
                    crate::profile::TemplateContentFormat::Openai => "openai",
                })
                .unwrap_or_default()
                .to_string(),
            renderer_engine: s(&p.renderer_engine),
            renderer_version: s(&p.renderer_version),
            oracle_engine: s(&p.oracle_engine),
            oracle_version: s(&p.oracle_version),
        }
    }
}

/// A discovery entry (`GET /config/ai/model-profiles/{id}`): no locator, path or root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryEntry {
    /// `profileId`.
    pub profile_id: String,
    /// `gen`.
    pub gen: u64,
    /// `baseModel`.
    pub base_model: String,
    /// `aliasPolicy`.
    pub alias_policy: AliasPolicy,
    /// `allowedAliases`.
    pub allowed_aliases: Vec<String>,
    /// `supportedApis`.
    pub supported_apis: Vec<Api>,
    /// `supportedFeatures`.
    pub supported_features: Vec<Feature>,
    /// `excludedFeatures`.
    pub excluded_features: Vec<Feature>,
    /// `tokenizerRevision`.
    pub tokenizer_revision: String,
    /// `tokenizerSha256`.
    pub tokenizer_sha256: String,
    /// `templateSha256`.
    pub template_sha256: String,
    /// `templateContentFormat`.
    pub template_content_format: String,
    /// `rendererEngine`.
    pub renderer_engine: String,
    /// `rendererVersion`.
    pub renderer_version: String,
    /// `oracleEngine`.
    pub oracle_engine: String,
    /// `oracleVersion`.
    pub oracle_version: String,
}

/// The discovery document (`GET /config/ai/model-profiles`), sorted by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Discovery {
    /// Generation number (0 = none published).
    pub registry_generation: u64,
    /// The generation's `setDigest`.
    pub set_digest: String,
    /// Entries sorted by profile id.
    pub profiles: Vec<DiscoveryEntry>,
}

/// An immutable registry generation. Share it as `Arc<Generation>`; in-flight users keep the
/// generation they started with alive while a newer one is published.
#[derive(Debug)]
pub struct Generation {
    number: u64,
    root: Option<PathBuf>,
    policy: TrustPolicy,
    profiles: BTreeMap<String, Arc<LoadedProfile>>,
    by_slug: HashMap<String, String>,
    set_digest: String,
}

/// `setDigest` (docs/contracts/registry.md §7) over profiles in ascending id order: `id NUL sha256(doc) NUL` then,
/// per artifact receipt in load order, `relative path NUL sha256 NUL`; sha256, lowercase hex.
pub fn set_digest<'a>(profiles: impl IntoIterator<Item = &'a LoadedProfile>) -> String {
    let mut sorted: Vec<&LoadedProfile> = profiles.into_iter().collect();
    sorted.sort_by(|a, b| a.profile.profile_id.cmp(&b.profile.profile_id));
    let mut h = Sha256::new();
    for p in sorted {
        for part in [p.profile.profile_id.as_str(), p.document_sha256.as_str()] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        for r in p.artifacts.receipts() {
            for part in [r.relative_path.as_str(), r.sha256.as_str()] {
                h.update(part.as_bytes());
                h.update([0u8]);
            }
        }
    }
    hex::encode(h.finalize())
}

fn template_uses_clock(bytes: &[u8]) -> bool {
    bytes
        .windows(b"strftime_now".len())
        .any(|w| w == b"strftime_now")
}

struct ArtifactCache(HashMap<String, VerifiedArtifact>);

impl ArtifactCache {
    fn get(
        &mut self,
        root: &TrustedRoot,
        rel: &str,
        pin: &str,
        role: ArtifactRole,
    ) -> Result<VerifiedArtifact> {
        if let Some(a) = self.0.get(rel) {
            if a.receipt.sha256 != pin {
                return Err(Error::DigestMismatch {
                    path: rel.to_string(),
                    role,
                    actual: a.receipt.sha256.clone(),
                    pinned: pin.to_string(),
                });
            }
            return Ok(a.clone());
        }
        let a = VerifiedArtifact::read(root, rel, pin, role)?;
        self.0.insert(rel.to_string(), a.clone());
        Ok(a)
    }
}

fn locator_path(text: &str, pin: &str, doc: &str, field: &str) -> Result<String> {
    Locator::parse(text, pin)
        .map(|l| l.relative_path())
        .map_err(|d| Error::UnsafePath {
            path: doc.to_string(),
            detail: format!("{field}: {d}"),
        })
}

/// A listed entry that must be a regular file: a symlink is [`Error::Symlink`],
/// anything else [`Error::NotRegularFile`], both naming `path`.
fn not_a_file(entry: &crate::trust::DirEntry, path: &str) -> Result<()> {
    use crate::trust::EntryKind;
    match entry.kind {
        EntryKind::File => Ok(()),
        EntryKind::Symlink => Err(Error::Symlink {
            path: path.to_string(),
        }),
        EntryKind::Dir => Err(Error::NotRegularFile {
            path: path.to_string(),
            kind: "directory",
        }),
        EntryKind::Other => Err(Error::NotRegularFile {
            path: path.to_string(),
            kind: "FIFO, socket or device",
        }),
    }
}

/// Under [`AttestationCheck::Deferred`] (the C ABI's and the gateway's publish) manifests and
/// fixtures are read later, on demand; their *types* are still checked at publish, so that a
/// FIFO, directory or symlink staged as `manifests/<id>.yaml` or as a fixture refuses the load
/// here, as `kvexact registry verify` (which reads them) does.
fn check_staged_types(root: &TrustedRoot, id: &str) -> Result<()> {
    if root.dir_exists(MANIFESTS_DIR)? {
        let name = format!("{id}.yaml");
        for e in root.list_dir(MANIFESTS_DIR)? {
            if e.name == name {
                not_a_file(&e, &format!("{MANIFESTS_DIR}/{name}"))?;
            }
        }
    }
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Trtllm] {
        let dir = fixture_dir(id, engine);
        if !root.dir_exists(&dir)? {
            continue;
        }
        for e in root.list_dir(&dir)? {
            if e.name.ends_with(".json") {
                not_a_file(&e, &format!("{dir}/{}", e.name))?;
            }
        }
    }
    Ok(())
}

fn read_optional_manifest(root: &TrustedRoot, id: &str) -> Result<Option<LoadedManifest>> {
    let path = format!("{MANIFESTS_DIR}/{id}.yaml");
    match root.read_file(&path, root.policy().caps.manifest) {
        Ok((bytes, _)) => LoadedManifest::from_bytes(&bytes, &path, id).map(Some),
        Err(Error::Missing { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_attestation(root: &TrustedRoot, p: &Profile) -> Result<AttestationFiles> {
    let manifest = read_optional_manifest(root, &p.profile_id)?;
    let mut fixture_sets = Vec::new();
    if root.dir_exists(&format!("{FIXTURES_DIR}/{}", p.profile_id))? {
        for engine in [Engine::Vllm, Engine::Sglang, Engine::Trtllm] {
            if engine != Engine::Vllm && !root.dir_exists(&fixture_dir(&p.profile_id, engine))? {
                continue;
            }
            let set = FixtureSet::load(root, &p.profile_id, engine)?;
            set.check_against(p)?;
            fixture_sets.push(set);
        }
    }
    Ok(AttestationFiles {
        manifest,
        fixture_sets,
    })
}

impl Generation {
    /// Generation 0: nothing published.
    pub fn empty() -> Self {
        Generation {
            number: 0,
            root: None,
            policy: TrustPolicy::default(),
            profiles: BTreeMap::new(),
            by_slug: HashMap::new(),
            set_digest: set_digest(std::iter::empty()),
        }
    }

    /// Loads `root` as generation `number`, all or nothing: trust policy (§6) → strict parse and
    /// field rules (§2) → tokenizer read and digest check → BOS id when `completionsBos` → template
    /// read, digest check and clock-policy check → `validator` → duplicate id and model-name
    /// collision checks → (with [`AttestationCheck::AtPublish`]) manifests and fixture sets.
    /// The first error refuses the load.
    pub fn load(
        root: &Path,
        number: u64,
        opts: &LoadOptions,
        validator: &dyn ArtifactValidator,
    ) -> Result<Self> {
        let troot = TrustedRoot::open(root, opts.policy)?;
        let caps = opts.policy.caps;
        let mut profiles: BTreeMap<String, Arc<LoadedProfile>> = BTreeMap::new();
        let mut by_slug: HashMap<String, String> = HashMap::new();
        let mut cache = ArtifactCache(HashMap::new());
        for entry in troot.list_dir(".")? {
            // Every *.yaml entry of the root is a profile document. The gateway's loader skips
            // one that is not a regular file (docs/contracts/registry.md §6); kvexact refuses it instead, naming the
            // file, so that a root whose only profile is a symlink never publishes an empty
            // generation (QUIRKS.md, "Registry").
            if !entry.name.ends_with(".yaml") {
                continue;
            }
            not_a_file(&entry, &entry.name)?;
            let doc = entry.name;
            let (bytes, _) = troot.read_file(&doc, caps.profile)?;
            let profile = Profile::parse(&bytes, &doc)?;
            if let Some(prev) = profiles.get(&profile.profile_id) {
                return Err(Error::DuplicateProfile {
                    path: doc,
                    other: prev.document_path.clone(),
                    id: profile.profile_id,
                });
            }
            let tok_rel = locator_path(
                &profile.tokenizer_artifact,
                &profile.tokenizer_sha256,
                &doc,
                "tokenizerArtifact",
            )?;
            let tokenizer = cache.get(
                &troot,
                &tok_rel,
                &profile.tokenizer_sha256,
                ArtifactRole::Tokenizer,
            )?;
            let bos_token_id = match profile
                .render_policy
                .as_ref()
                .and_then(|r| r.bos_token.as_deref())
            {
                Some(bos) if profile.needs_bos_id() => Some(
                    resolve_bos_id(&tokenizer.bytes, bos, &doc).map_err(|e| match e {
                        Error::BosUnresolved { detail, .. } => Error::BosUnresolved {
                            path: doc.clone(),
                            detail: format!("{detail} ({tok_rel})"),
                        },
                        other => other,
                    })?,
                ),
                _ => None,
            };
            let template = match (&profile.template_artifact, &profile.template_sha256) {
                (Some(loc), Some(pin)) => {
                    let rel = locator_path(loc, pin, &doc, "templateArtifact")?;
                    let t = cache.get(&troot, &rel, pin, ArtifactRole::Template)?;
                    let uses = template_uses_clock(&t.bytes);
                    let declared = profile.clock_policy().is_some();
                    if uses != declared {
                        return Err(Error::ClockPolicy {
                            path: doc,
                            detail: if uses {
                                format!("template {rel} calls strftime_now but no clockPolicy is declared")
                            } else {
                                format!("clockPolicy declared but template {rel} never calls strftime_now")
                            },
                        });
                    }
                    Some(t)
                }
                _ => None,
            };
            let tokenizer_config = match (
                &profile.tokenizer_config_artifact,
                &profile.tokenizer_config_sha256,
            ) {
                (Some(loc), Some(pin)) => {
                    let rel = locator_path(loc, pin, &doc, "tokenizerConfigArtifact")?;
                    Some(cache.get(&troot, &rel, pin, ArtifactRole::TokenizerConfig)?)
                }
                _ => None,
            };
            let artifacts = VerifiedArtifacts {
                tokenizer,
                template,
                tokenizer_config,
                bos_token_id,
            };
            let prepared = validator
                .prepare_profile(&profile, &artifacts)
                .map_err(|detail| Error::ArtifactRejected {
                    path: doc.clone(),
                    profile_id: profile.profile_id.clone(),
                    detail,
                })?;
            for name in profile.model_names() {
                let s = slug(name);
                if let Some(other_id) = by_slug.get(&s) {
                    let other = profiles
                        .get(other_id)
                        .map(|p| p.document_path.clone())
                        .unwrap_or_default();
                    return Err(Error::ModelNameCollision {
                        path: doc,
                        other,
                        other_id: other_id.clone(),
                        name: name.to_string(),
                    });
                }
            }
            for name in profile.model_names() {
                by_slug.insert(slug(name), profile.profile_id.clone());
            }
            let attestation = match opts.attestation {
                AttestationCheck::Deferred => {
                    check_staged_types(&troot, &profile.profile_id)?;
                    None
                }
                AttestationCheck::AtPublish => {
                    check_staged_types(&troot, &profile.profile_id)?;
                    Some(read_attestation(&troot, &profile)?)
                }
            };
            let loaded = LoadedProfile {
                document_sha256: sha256_hex(&bytes),
                document_path: doc,
                artifacts,
                generation: number,
                attestation,
                profile,
                prepared,
            };
            profiles.insert(loaded.profile.profile_id.clone(), Arc::new(loaded));
        }
        let digest = set_digest(profiles.values().map(|p| p.as_ref()));
        Ok(Generation {
            number,
            root: Some(root.to_path_buf()),
            policy: opts.policy,
            profiles,
            by_slug,
            set_digest: digest,
        })
    }

    /// The generation number (0 = none published).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The `setDigest` (docs/contracts/registry.md §7).
    pub fn set_digest(&self) -> &str {
        &self.set_digest
    }

    /// The root this generation was loaded from (`None` for generation 0).
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Number of profiles.
    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    /// True when no profile is published.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// Profiles in ascending id order.
    pub fn profiles(&self) -> impl Iterator<Item = &Arc<LoadedProfile>> {
        self.profiles.values()
    }

    /// Lookup by profile id.
    pub fn profile(&self, id: &str) -> Option<&Arc<LoadedProfile>> {
        self.profiles.get(id)
    }

    /// Lookup by a request's model name (compared by slug; base model or allowed alias).
    pub fn profile_for_model(&self, model: &str) -> Option<&Arc<LoadedProfile>> {
        self.by_slug
            .get(&slug(model))
            .and_then(|id| self.profiles.get(id))
    }

    /// The discovery document (docs/contracts/registry.md §7).
    pub fn discovery(&self) -> Discovery {
        Discovery {
            registry_generation: self.number,
            set_digest: self.set_digest.clone(),
            profiles: self
                .profiles
                .values()
                .map(|p| p.discovery_entry())
                .collect(),
        }
    }

    fn open_root(&self, what: &str) -> Result<TrustedRoot> {
        let root = self.root.as_deref().ok_or_else(|| Error::UnknownProfile {
            path: what.to_string(),
        })?;
        TrustedRoot::open(root, self.policy)
    }

    /// Drift check (docs/contracts/registry.md §7): re-reads the profile's document and every artifact receipt
    /// beneath this generation's root under the trust policy and compares sha256. A trust
    /// failure is returned as such; a changed digest is [`Error::Drift`].
    pub fn verify_disk(&self, profile_id: &str) -> Result<()> {
        let p = self
            .profile(profile_id)
            .ok_or_else(|| Error::UnknownProfile {
                path: profile_id.to_string(),
            })?;
        let root = self.open_root(profile_id)?;
        let caps = self.policy.caps;
        let check = |rel: &str, want: &str, cap: u64| -> Result<()> {
            let (bytes, _) = root.read_file(rel, cap)?;
            let now = sha256_hex(&bytes);
            if now != want {
                return Err(Error::Drift {
                    path: rel.to_string(),
                    detail: format!("sha256 now {now}, receipt {want}"),
                });
            }
            Ok(())
        };
        check(&p.document_path, &p.document_sha256, caps.profile)?;
        for r in p.artifacts.receipts() {
            check(&r.relative_path, &r.sha256, caps.artifact)?;
        }
        Ok(())
    }

    /// Reads `manifests/<id>.yaml` beneath this generation's root (`Ok(None)` when absent).
    pub fn load_manifest(&self, profile_id: &str) -> Result<Option<LoadedManifest>> {
        if self.profile(profile_id).is_none() {
            return Err(Error::UnknownProfile {
                path: profile_id.to_string(),
            });
        }
        read_optional_manifest(&self.open_root(profile_id)?, profile_id)
    }

    /// Reads `engine`'s fixture set for the profile beneath this generation's root and checks
    /// it against the profile (model names, clock pairing).
    pub fn load_fixtures(&self, profile_id: &str, engine: Engine) -> Result<FixtureSet> {
        let p = self
            .profile(profile_id)
            .ok_or_else(|| Error::UnknownProfile {
                path: profile_id.to_string(),
            })?;
        let set = FixtureSet::load(&self.open_root(profile_id)?, profile_id, engine)?;
        set.check_against(&p.profile)?;
        Ok(set)
    }

    /// Every artifact receipt of every profile, in setDigest order.
    pub fn receipts(&self) -> impl Iterator<Item = (&str, &ArtifactReceipt)> {
        self.profiles.values().flat_map(|p| {
            p.artifacts
                .receipts()
                .map(move |r| (p.profile.profile_id.as_str(), r))
        })
    }
}
