//! Staging the profile registry (`kvexact models install`) for one engine exactly as the gateway
//! reads it (docs/contracts/registry.md §1, §11), and optionally the pinned weights snapshot.
//!
//! Per selected model, before anything is written: the banked template's sha256 must be the
//! catalog's `templateSha256`; the committed profile must parse strictly and carry the catalog's
//! repo, revision, tokenizer and template pins; the engine manifest of the engine's set must
//! parse and carry the engine digest, version (without `v`) and revision; the weights index must
//! hash to `weightsIndexSha256`; the tokenizer (already staged, from `--from-snapshot`, or
//! downloaded) must hash to `tokenizerSha256`. When the repository has a
//! `tokenizer_config.json` (its weights-index line; the catalog's `tokenizerConfigSha256` must
//! agree: [`crate::tokenizer_config`]), it is found the same way and must match the index line
//! (size and digest) and the catalog's sha256; the staged profile then pins it
//! (`tokenizerConfigArtifact` / `tokenizerConfigSha256` inserted after `tokenizerSha256`), so
//! that the encoder loads the added tokens the engine's transformers 5 loads. Then every
//! destination is checked for symlinks, the fixture directory is wiped (dropped fixtures
//! disappear) and each file is written atomically (`0644`, directories `0755`):
//!
//! ```text
//! <registry>/artifacts/sha256/<tokenizerSha256>     tokenizer.json bytes
//! <registry>/artifacts/sha256/<configSha256>        tokenizer_config.json bytes (when upstream has one)
//! <registry>/artifacts/sha256/<templateSha256>      banked chat_template.jinja bytes
//! <registry>/<id>.yaml                              committed profile (+ the config pin)
//! <registry>/manifests/<id>.yaml                    engine manifest of --engine's set
//! <registry>/probefixtures/<id>/{,sglang/,trtllm/}  committed *.json fixtures
//! <tokenizers>/<org>__<name>/tokenizer.json         same tokenizer bytes
//! <tokenizers>/<org>__<name>/tokenizer_config.json  same config bytes (when upstream has one)
//! <weights>/<org>__<name>/<rev>/<file>              with --weights-dir: every indexed file
//! ```
//!
//! Nothing of a model is written before all of its pins verify: a config that does not match
//! is `TOKENIZER_CONFIG_SHA_MISMATCH` with nothing staged.
//!
//! Weights: files that already verify are skipped; the rest need free space ≥ remaining + 1 GiB;
//! downloads resume `.part` files with HTTP Range; a file that does not verify is renamed
//! `<file>.rejected` (`WEIGHT_SHA_MISMATCH`). A snapshot directory
//! ([`InstallOptions::from_snapshot`]) gives the tokenizer and the weights as
//! `DIR/<org>__<name>/<rev>/<file>` (the weights layout) instead of the hub, for air-gapped
//! hosts: nothing is downloaded, and the same pins are checked.
//!
//! [`install`] reports its progress as [`InstallEvent`]s (the command prints each one's
//! `Display` line) and returns an [`InstallReport`]; downloads go through the caller's
//! [`Fetch`].

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use crate::catalog::{ModelEntry, SupportedModels, Tuple, TupleState, WeightsIndex};
use crate::error::{Error, Result};
use crate::fsops::{
    commit_temp, create_temp, ensure_dir, free_bytes, no_symlink_below, remove_tree, safe_root,
    stage_file,
};
use crate::hub::{part_path, read_token, Fetch, Hub};
use crate::source_tree::{manifest_set, read_file, SourceTree, FIXTURE_SUBDIRS};
use crate::tokenizer_config::{self as tcfg, ConfigPlan};
use crate::weights::{check_file, FileCheck};
use crate::{gb, refuse, rev12, state_str, RefusalCode};
use kvprofile_core::ids::{sha256_hex, slug};
use kvprofile_core::{EngineManifest, Profile};

/// Free space kept beyond the download (docs/contracts/registry.md §11: remaining + 1 GB).
pub const SPACE_MARGIN: u64 = 1 << 30;

/// What to install, where, and from where.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// Engine the registry is staged for (selects its engine-manifest set), e.g. `vllm`.
    pub engine: String,
    /// Profile ids to install (empty: every model with a row for the engine).
    pub models: Vec<String>,
    /// Also install `candidate` rows (not supported; explicit opt-in).
    pub include_candidates: bool,
    /// Check and report what would be staged; write nothing, download nothing.
    pub dry_run: bool,
    /// Registry root (absolute, no `..`).
    pub registry_dir: PathBuf,
    /// Tokenizer directory (absolute, no `..`).
    pub tokenizer_dir: PathBuf,
    /// Also fetch and verify the pinned weights snapshot under this directory (absolute).
    pub weights_dir: Option<PathBuf>,
    /// Hub access token file, mode 0600 or stricter.
    pub token_file: Option<PathBuf>,
    /// Take tokenizer and weights from `DIR/<org>__<name>/<rev>/` instead of the hub.
    pub from_snapshot: Option<PathBuf>,
    /// Hub endpoint (`None` or blank: [`crate::hub::DEFAULT_ENDPOINT`]).
    pub endpoint: Option<String>,
    /// Free bytes on the filesystem holding a path ([`free_bytes`]; `None`: unknown, no check).
    pub free_bytes: fn(&Path) -> Option<u64>,
}

impl InstallOptions {
    /// Options for `engine` into `registry_dir` and `tokenizer_dir`: every model with a
    /// validated row, no weights, no token, the default hub, the real free space.
    pub fn new(
        engine: impl Into<String>,
        registry_dir: impl Into<PathBuf>,
        tokenizer_dir: impl Into<PathBuf>,
    ) -> Self {
        InstallOptions {
            engine: engine.into(),
            models: Vec::new(),
            include_candidates: false,
            dry_run: false,
            registry_dir: registry_dir.into(),
            tokenizer_dir: tokenizer_dir.into(),
            weights_dir: None,
            token_file: None,
            from_snapshot: None,
            endpoint: None,
            free_bytes,
        }
    }
}

/// A step of [`install`], in the order it happens. `Display` is the command's human line
/// (progress notes of downloads go to stderr: [`InstallEvent::is_download_note`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallEvent {
    /// A selected model is skipped (`SKIP_<WHY> …`).
    Skip {
        /// The model.
        profile_id: String,
        /// `SKIP_NO_ROW …`, `SKIP_BLOCKED …`, `SKIP_CANDIDATE …`, `SKIP_GATED_NO_TOKEN …`.
        why: String,
    },
    /// A model's install begins.
    Begin {
        /// The model.
        profile_id: String,
        /// Its hub repository.
        repo: String,
        /// Its pinned revision.
        revision: String,
        /// The engine installed for.
        engine: String,
        /// The row's state.
        state: TupleState,
    },
    /// The tokenizer was already staged and verifies.
    TokenizerStaged {
        /// Its pinned sha256.
        sha256: String,
    },
    /// The tokenizer was taken from the snapshot and verifies.
    TokenizerFromSnapshot {
        /// Its pinned sha256.
        sha256: String,
    },
    /// Dry run: the tokenizer would be downloaded from `url`.
    WouldDownload {
        /// The hub URL.
        url: String,
    },
    /// The tokenizer was downloaded and verifies.
    TokenizerDownloaded {
        /// Its pinned sha256.
        sha256: String,
    },
    /// The upstream `tokenizer_config.json` verifies against its pins and will be pinned in
    /// the profile.
    TokenizerConfig {
        /// Where it came from.
        source: ConfigSource,
        /// Its sha256.
        sha256: String,
    },
    /// The repository has no `tokenizer_config.json`: the profile pins none.
    NoTokenizerConfig {
        /// Whether the catalog says `none` (else only the weights index lists none).
        declared: bool,
    },
    /// The registry files were staged (or would be, in a dry run).
    Registry {
        /// Whether this is a dry run.
        dry_run: bool,
        /// How many files.
        files: usize,
        /// The registry root.
        registry_dir: PathBuf,
        /// The tokenizer directory.
        tokenizer_dir: PathBuf,
    },
    /// The weights plan: how many files already verify and how much is left to fetch.
    WeightsPlan {
        /// Files that already verify.
        verified: usize,
        /// Files in the index.
        files: usize,
        /// Bytes left to fetch.
        bytes: u64,
        /// Copied from the snapshot (not downloaded).
        copy: bool,
        /// The snapshot's destination directory.
        dir: PathBuf,
    },
    /// A weights file was fetched and verifies.
    WeightVerified {
        /// The file name.
        name: String,
        /// Its size.
        size: u64,
    },
    /// A progress note of a download (resume, lost connection).
    DownloadNote {
        /// The file being downloaded.
        file: String,
        /// A weights file (else the tokenizer).
        weights: bool,
        /// The note.
        note: String,
    },
}

/// Where a verified `tokenizer_config.json` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Already staged in the tokenizer directory.
    Staged,
    /// The `--from-snapshot` directory.
    Snapshot,
    /// Downloaded from the hub.
    Downloaded,
}

impl InstallEvent {
    /// Whether this is a download progress note (the command prints those on stderr, even
    /// with `--json`; every other event is a human stdout line).
    pub fn is_download_note(&self) -> bool {
        matches!(self, InstallEvent::DownloadNote { .. })
    }
}

impl fmt::Display for InstallEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallEvent::Skip { profile_id, why } => write!(f, "{profile_id}: {why}"),
            InstallEvent::Begin {
                profile_id,
                repo,
                revision,
                engine,
                state,
            } => write!(
                f,
                "{profile_id}: {repo}@{} for {engine} ({})",
                rev12(revision),
                state_str(*state)
            ),
            InstallEvent::TokenizerStaged { sha256 } => write!(
                f,
                "  tokenizer.json already staged and verified ({})",
                rev12(sha256)
            ),
            InstallEvent::TokenizerFromSnapshot { sha256 } => write!(
                f,
                "  tokenizer.json taken from the snapshot and verified ({})",
                rev12(sha256)
            ),
            InstallEvent::WouldDownload { url } => write!(f, "  would download {url}"),
            InstallEvent::TokenizerDownloaded { sha256 } => write!(
                f,
                "  tokenizer.json downloaded and verified ({})",
                rev12(sha256)
            ),
            InstallEvent::TokenizerConfig { source, sha256 } => write!(
                f,
                "  tokenizer_config.json {} and verified ({}); the profile pins it",
                match source {
                    ConfigSource::Staged => "already staged",
                    ConfigSource::Snapshot => "taken from the snapshot",
                    ConfigSource::Downloaded => "downloaded",
                },
                rev12(sha256)
            ),
            InstallEvent::NoTokenizerConfig { declared } => write!(
                f,
                "  tokenizer_config.json: none upstream ({}); the profile keeps tokenizer.json's added tokens",
                if *declared {
                    "catalog: none; weights index: none"
                } else {
                    "weights index: none"
                }
            ),
            InstallEvent::Registry {
                dry_run,
                files,
                registry_dir,
                tokenizer_dir,
            } => write!(
                f,
                "  {} {files} registry files under {} and {}",
                if *dry_run { "would stage" } else { "staged" },
                registry_dir.display(),
                tokenizer_dir.display()
            ),
            InstallEvent::WeightsPlan {
                verified,
                files,
                bytes,
                copy,
                dir,
            } => write!(
                f,
                "  weights: {verified}/{files} files already verified, {} to {} into {}",
                gb(*bytes),
                if *copy { "copy" } else { "download" },
                dir.display()
            ),
            InstallEvent::WeightVerified { name, size } => {
                write!(f, "    verified {name} ({})", gb(*size))
            }
            InstallEvent::DownloadNote {
                file,
                weights,
                note,
            } => {
                let indent = if *weights { "    " } else { "  " };
                write!(f, "{indent}{file}: {note}")
            }
        }
    }
}

/// What was done with one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordAction {
    /// Skipped (see the record's detail).
    Skip,
    /// Staged.
    Installed,
    /// Dry run: would be staged.
    WouldInstall,
}

impl RecordAction {
    /// `skip`, `installed`, `would-install`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordAction::Skip => "skip",
            RecordAction::Installed => "installed",
            RecordAction::WouldInstall => "would-install",
        }
    }
}

/// The weights part of a model's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsOutcome {
    /// The snapshot's destination directory.
    pub dir: String,
    /// Files in the index.
    pub files: usize,
    /// Files that already verified.
    pub already_verified: usize,
    /// Bytes that were left to fetch.
    pub bytes_to_fetch: u64,
    /// Files fetched (and verified) by this run.
    pub fetched: Vec<String>,
}

/// One model of an [`InstallReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRecord {
    /// The model.
    pub profile_id: String,
    /// What was done.
    pub action: RecordAction,
    /// The skip reason, or `<repo>@<rev12> for <engine> (<state>)`.
    pub detail: String,
    /// Every staged (or would-be staged) path; empty for a skip.
    pub staged: Vec<String>,
    /// The sha256 of the `tokenizer_config.json` pinned in the staged profile (`None`: the
    /// repository has none, a skip, or a dry run that has not seen the bytes and whose
    /// catalog declares no sha256).
    pub tokenizer_config_sha256: Option<String>,
    /// The weights outcome (with a weights directory; never for a skip).
    pub weights: Option<WeightsOutcome>,
}

/// What [`install`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallReport {
    /// The engine.
    pub engine: String,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Models installed (or that would be).
    pub installed: usize,
    /// Models skipped.
    pub skipped: usize,
    /// One record per selected model, in catalog order.
    pub models: Vec<ModelRecord>,
}

/// Where [`install`] reports its [`InstallEvent`]s.
type Events<'e> = &'e mut dyn FnMut(&InstallEvent);

/// Everything `install_one` needs besides the model.
struct Ctx<'a> {
    tree: &'a SourceTree,
    opts: &'a InstallOptions,
    reg: PathBuf,
    tokdir: PathBuf,
    weights: Option<PathBuf>,
    snapshot: Option<PathBuf>,
    hub: Hub<'a>,
    work: WorkDir,
}

/// A private scratch directory (mode 0700) removed on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!("kvexact-models-{}-{nanos}", std::process::id()));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&p)
            .map_err(|e| refuse(RefusalCode::WriteFailed, format!("{}: {e}", p.display())))?;
        Ok(WorkDir(p))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// What [`select`] decided for one model.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection<'a> {
    /// Install the model for this (last matching) row.
    Install(&'a Tuple),
    /// Skip it: `SKIP_NO_ROW …`, `SKIP_BLOCKED …` or `SKIP_CANDIDATE …`.
    Skip(String),
}

/// The models of `c` to install for `engine`, in catalog order: `wanted` (blank entries
/// ignored; empty: every model) must all be in the catalog (`UNKNOWN_MODEL`); a model without
/// a row for the engine, a blocked row and (without `include_candidates`) a candidate row are
/// skipped with a reason.
pub fn select<'a>(
    c: &'a SupportedModels,
    engine: &str,
    wanted: &[String],
    include_candidates: bool,
) -> Result<Vec<(&'a ModelEntry, Selection<'a>)>> {
    let wanted: Vec<&str> = wanted
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    for w in &wanted {
        if !c.models.iter().any(|m| m.profile_id == *w) {
            return Err(refuse(
                RefusalCode::UnknownModel,
                format!("{w} is not in the catalog (see list)"),
            ));
        }
    }
    let mut picks = Vec::new();
    for m in &c.models {
        if !wanted.is_empty() && !wanted.contains(&m.profile_id.as_str()) {
            continue;
        }
        let Some(t) = m.tuples.iter().rev().find(|t| t.engine.as_str() == engine) else {
            picks.push((m, Selection::Skip(format!("SKIP_NO_ROW no {engine} row"))));
            continue;
        };
        let action = match t.state {
            TupleState::Blocked => Selection::Skip(format!(
                "SKIP_BLOCKED {}: {}",
                t.reason.as_deref().unwrap_or(""),
                t.detail.as_deref().unwrap_or("")
            )),
            TupleState::Candidate if !include_candidates => {
                Selection::Skip("SKIP_CANDIDATE not supported; --include-candidates opts in".into())
            }
            _ => Selection::Install(t),
        };
        picks.push((m, action));
    }
    Ok(picks)
}

/// Stages the profile registry of `tree`'s catalog for `opts.engine` (module docs).
///
/// Refuses, before anything of the refused model is written: `UNKNOWN_ENGINE`, `UNSAFE_PATH`
/// (a root that is relative or has `..`; a symlink at or below a root), `SNAPSHOT_MISSING`,
/// `TOKEN_FILE_MODE` / `TOKEN_FILE_EMPTY`, `UNKNOWN_MODEL`, then per model the pin refusals of
/// the module docs (`TOKENIZER_CONFIG_SHA_MISMATCH` among them), the download refusals and
/// `WRITE_FAILED`, `DISK_SPACE`, `WEIGHT_SHA_MISMATCH`. Models before a refused one stay
/// installed.
pub fn install(
    tree: &SourceTree,
    opts: &InstallOptions,
    fetch: &dyn Fetch,
    on_event: &mut dyn FnMut(&InstallEvent),
) -> Result<InstallReport> {
    if !tree
        .catalog
        .engines
        .iter()
        .any(|e| e.engine.as_str() == opts.engine)
    {
        return Err(refuse(RefusalCode::UnknownEngine, opts.engine.clone()));
    }
    let reg = safe_root(&opts.registry_dir, "--registry-dir")?;
    let tokdir = safe_root(&opts.tokenizer_dir, "--tokenizer-dir")?;
    let weights = opts
        .weights_dir
        .as_deref()
        .map(|w| safe_root(w, "--weights-dir"))
        .transpose()?;
    let snapshot = match &opts.from_snapshot {
        Some(s) if s.is_dir() => Some(s.clone()),
        Some(s) => {
            return Err(refuse(
                RefusalCode::SnapshotMissing,
                format!("{} is not a directory", s.display()),
            ))
        }
        None => None,
    };
    let token = opts.token_file.as_deref().map(read_token).transpose()?;
    let picks = select(
        &tree.catalog,
        &opts.engine,
        &opts.models,
        opts.include_candidates,
    )?;
    let ctx = Ctx {
        tree,
        opts,
        reg,
        tokdir,
        weights,
        snapshot,
        hub: Hub::new(opts.endpoint.as_deref(), token, fetch),
        work: WorkDir::new()?,
    };
    let mut report = InstallReport {
        engine: opts.engine.clone(),
        dry_run: opts.dry_run,
        installed: 0,
        skipped: 0,
        models: Vec::new(),
    };
    for (m, action) in picks {
        let pid = &m.profile_id;
        let skip = |why: String| ModelRecord {
            profile_id: pid.clone(),
            action: RecordAction::Skip,
            detail: why,
            staged: Vec::new(),
            tokenizer_config_sha256: None,
            weights: None,
        };
        let t = match action {
            Selection::Skip(why) => {
                on_event(&InstallEvent::Skip {
                    profile_id: pid.clone(),
                    why: why.clone(),
                });
                report.models.push(skip(why));
                report.skipped += 1;
                continue;
            }
            Selection::Install(t) => t,
        };
        if m.gated && !ctx.hub.has_token() && !opts.dry_run && ctx.snapshot.is_none() {
            let why = format!(
                "SKIP_GATED_NO_TOKEN {} is gated; pass --hf-token-file",
                m.repo
            );
            on_event(&InstallEvent::Skip {
                profile_id: pid.clone(),
                why: why.clone(),
            });
            report.models.push(skip(why));
            report.skipped += 1;
            continue;
        }
        on_event(&InstallEvent::Begin {
            profile_id: pid.clone(),
            repo: m.repo.clone(),
            revision: m.revision.clone(),
            engine: opts.engine.clone(),
            state: t.state,
        });
        report.models.push(install_one(&ctx, m, t, on_event)?);
        report.installed += 1;
    }
    Ok(report)
}

/// What `--pull-image` would pull for an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImagePlan {
    /// The engine's release has no registry image (`SKIP_NO_PULLABLE_IMAGE`).
    NoPullableImage {
        /// The catalog's `imageNote` (or `no registry image`).
        note: String,
    },
    /// `docker pull <reference>` (`<image>@<digest>`).
    Pull {
        /// The digest-pinned reference.
        reference: String,
    },
}

/// The digest-pinned image of `engine`'s (last) release in `c` (`UNKNOWN_ENGINE`).
pub fn image_plan(c: &SupportedModels, engine: &str) -> Result<ImagePlan> {
    let Some(e) = c.engines.iter().rev().find(|e| e.engine.as_str() == engine) else {
        return Err(refuse(RefusalCode::UnknownEngine, engine.to_string()));
    };
    Ok(match (&e.image, &e.digest) {
        (Some(image), Some(digest)) => ImagePlan::Pull {
            reference: format!("{image}@{digest}"),
        },
        _ => ImagePlan::NoPullableImage {
            note: e
                .image_note
                .clone()
                .unwrap_or_else(|| "no registry image".into()),
        },
    })
}

/// `PROFILE_DRIFT` for `pid`.
fn drift(pid: &str, what: String) -> Error {
    refuse(RefusalCode::ProfileDrift, format!("{pid}: {what}"))
}

/// The committed documents of one model, all pins checked.
struct Committed {
    profile: Vec<u8>,
    manifest: Vec<u8>,
    template: Vec<u8>,
    fixtures: Vec<(PathBuf, Vec<u8>)>,
    index: WeightsIndex,
}

/// Reads the committed documents of `m` for the row `t`, checking every pin.
fn load_committed(tree: &SourceTree, m: &ModelEntry, t: &Tuple) -> Result<Committed> {
    let pid = &m.profile_id;
    let set = manifest_set(t.engine).ok_or_else(|| {
        refuse(
            RefusalCode::NoEngineManifest,
            format!("no committed engine manifest set for {}", t.engine),
        )
    })?;
    let profile_rel = format!("profiles/{pid}.yaml");
    let profile = tree.committed_file(&profile_rel)?;
    let manifest_rel = format!("{set}/{pid}.yaml");
    let manifest = tree.committed_file(&manifest_rel)?;
    let template =
        tree.committed_file(&format!("templates/{}/chat_template.jinja", slug(&m.repo)))?;
    let got = sha256_hex(&template);
    if got != m.template_sha256 {
        return Err(refuse(
            RefusalCode::TemplateShaMismatch,
            format!(
                "{pid}: banked chat template hashes to {got}, catalog pins {}",
                m.template_sha256
            ),
        ));
    }
    let p = Profile::parse(&profile, &profile_rel).map_err(|e| drift(pid, e.to_string()))?;
    let checks = [
        ("profileId", p.profile_id.as_str(), Some(pid.as_str())),
        ("baseModel", p.base_model.as_str(), Some(m.repo.as_str())),
        (
            "tokenizerSha256",
            p.tokenizer_sha256.as_str(),
            Some(m.tokenizer_sha256.as_str()),
        ),
        (
            "tokenizerRevision",
            p.tokenizer_revision.as_deref().unwrap_or("(none)"),
            Some(m.revision.as_str()),
        ),
        (
            "templateSha256",
            p.template_sha256.as_deref().unwrap_or("(none)"),
            Some(m.template_sha256.as_str()),
        ),
    ];
    for (k, have, want) in checks {
        if Some(have) != want {
            return Err(drift(
                pid,
                format!(
                    "committed profile {k} {have} is not the catalog's {}",
                    want.unwrap_or("")
                ),
            ));
        }
    }
    let em = EngineManifest::parse(&manifest, &manifest_rel, Some(pid))
        .map_err(|e| drift(pid, e.to_string()))?;
    let release = tree
        .catalog
        .engines
        .iter()
        .find(|e| e.engine == t.engine && e.version == t.engine_version);
    let digest = release
        .and_then(|e| e.digest.as_deref())
        .unwrap_or("(none)");
    if em.image_digest != digest {
        return Err(drift(
            pid,
            format!(
                "{manifest_rel} imageDigest {} is not the engine digest {digest}",
                em.image_digest
            ),
        ));
    }
    let want_ver = t
        .engine_version
        .strip_prefix('v')
        .unwrap_or(&t.engine_version);
    if em.engine_version != want_ver {
        return Err(drift(
            pid,
            format!(
                "{manifest_rel} engineVersion {} is not {want_ver}",
                em.engine_version
            ),
        ));
    }
    if em.model_revision.as_deref() != Some(m.revision.as_str()) {
        return Err(drift(
            pid,
            format!(
                "{manifest_rel} modelRevision is not the catalog revision {}",
                m.revision
            ),
        ));
    }
    let (ipath, index) = tree.read_index(pid)?;
    if index.sha256 != m.weights_index_sha256 {
        return Err(refuse(
            RefusalCode::IndexShaMismatch,
            format!(
                "{}: hashes to {}, catalog pins {}",
                tree.shown(&ipath),
                index.sha256,
                m.weights_index_sha256
            ),
        ));
    }
    let mut fixtures = Vec::new();
    for sub in FIXTURE_SUBDIRS {
        let dir_rel = if sub.is_empty() {
            format!("probefixtures/{pid}")
        } else {
            format!("probefixtures/{pid}/{sub}")
        };
        if !tree.committed_dir(&dir_rel) {
            continue;
        }
        let mut names: Vec<String> = fs::read_dir(tree.fixtures().join(&dir_rel))
            .map_err(|e| refuse(RefusalCode::CommittedFile, format!("{dir_rel}: {e}")))?
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        for n in names {
            let bytes = tree.committed_file(&format!("{dir_rel}/{n}"))?;
            fixtures.push((
                Path::new("probefixtures").join(pid).join(sub).join(&n),
                bytes,
            ));
        }
    }
    if fixtures.is_empty() {
        return Err(refuse(
            RefusalCode::CommittedFile,
            format!("{pid}: no committed probe fixtures"),
        ));
    }
    Ok(Committed {
        profile,
        manifest,
        template,
        fixtures,
        index,
    })
}

/// `TOKENIZER_SHA_MISMATCH` for `pid`.
fn tokenizer_mismatch(pid: &str, got: &str, want: &str, from: &str) -> Error {
    refuse(
        RefusalCode::TokenizerShaMismatch,
        format!("{pid}: {from} tokenizer.json hashes to {got}, pinned {want}"),
    )
}

/// Finds the tokenizer bytes: already staged, from the snapshot, or downloaded (`None` in a dry
/// run that would download).
fn tokenizer(ctx: &Ctx, m: &ModelEntry, ev: Events<'_>) -> Result<Option<Vec<u8>>> {
    let pid = &m.profile_id;
    let want = &m.tokenizer_sha256;
    let art_rel = Path::new("artifacts/sha256").join(want);
    no_symlink_below(&ctx.reg, &art_rel)?;
    let staged = ctx.reg.join(&art_rel);
    if fs::symlink_metadata(&staged).is_ok_and(|md| md.is_file()) {
        if let Ok(b) = read_file(&staged) {
            if sha256_hex(&b) == *want {
                ev(&InstallEvent::TokenizerStaged {
                    sha256: want.clone(),
                });
                return Ok(Some(b));
            }
        }
    }
    if let Some(snap) = &ctx.snapshot {
        let src = snap
            .join(slug(&m.repo))
            .join(&m.revision)
            .join("tokenizer.json");
        let b = read_file(&src).map_err(|e| {
            refuse(
                RefusalCode::SnapshotMissing,
                format!("{}: {e}", src.display()),
            )
        })?;
        let got = sha256_hex(&b);
        if got != *want {
            return Err(tokenizer_mismatch(pid, &got, want, "snapshot"));
        }
        ev(&InstallEvent::TokenizerFromSnapshot {
            sha256: want.clone(),
        });
        return Ok(Some(b));
    }
    let url = ctx.hub.resolve_url(&m.repo, &m.revision, "tokenizer.json");
    if ctx.opts.dry_run {
        ev(&InstallEvent::WouldDownload { url });
        return Ok(None);
    }
    let dest = ctx.work.0.join(format!("{pid}.tokenizer.json"));
    ctx.hub.download(&url, &dest, None, &mut |s: &str| {
        ev(&InstallEvent::DownloadNote {
            file: "tokenizer.json".into(),
            weights: false,
            note: s.to_string(),
        })
    })?;
    let b = read_file(&dest).map_err(|e| {
        refuse(
            RefusalCode::DownloadFailed,
            format!("{}: {e}", dest.display()),
        )
    })?;
    let got = sha256_hex(&b);
    if got != *want {
        return Err(tokenizer_mismatch(pid, &got, want, "downloaded"));
    }
    ev(&InstallEvent::TokenizerDownloaded {
        sha256: want.clone(),
    });
    Ok(Some(b))
}

/// Finds the `tokenizer_config.json` bytes the plan pins: already staged beside the tokenizer,
/// from the snapshot, or downloaded (bounded by the indexed size); each checked against both
/// pins before anything is staged. `None`: the repository has none, or a dry run that would
/// download it.
fn tokenizer_config(
    ctx: &Ctx,
    m: &ModelEntry,
    plan: &ConfigPlan,
    ev: Events<'_>,
) -> Result<Option<(Vec<u8>, String)>> {
    let pid = &m.profile_id;
    let (entry, want) = match plan {
        ConfigPlan::NoneUpstream { declared } => {
            ev(&InstallEvent::NoTokenizerConfig {
                declared: *declared,
            });
            return Ok(None);
        }
        ConfigPlan::Pinned { entry, sha256 } => (entry, sha256.as_deref()),
    };
    let found = |b: Vec<u8>, from: &str, source: ConfigSource, ev: Events<'_>| {
        let sha = tcfg::verify(pid, entry, want, &b, from)?;
        ev(&InstallEvent::TokenizerConfig {
            source,
            sha256: sha.clone(),
        });
        Ok(Some((b, sha)))
    };
    let staged_rel = Path::new(&slug(&m.repo)).join(tcfg::FILE);
    no_symlink_below(&ctx.tokdir, &staged_rel)?;
    let staged = ctx.tokdir.join(&staged_rel);
    if fs::symlink_metadata(&staged).is_ok_and(|md| md.is_file() && md.len() == entry.size) {
        if let Ok(b) = read_file(&staged) {
            if tcfg::verify(pid, entry, want, &b, "staged").is_ok() {
                return found(b, "staged", ConfigSource::Staged, ev);
            }
        }
    }
    if let Some(snap) = &ctx.snapshot {
        let src = snap.join(slug(&m.repo)).join(&m.revision).join(tcfg::FILE);
        let b = read_file(&src).map_err(|e| {
            refuse(
                RefusalCode::SnapshotMissing,
                format!("{}: {e}", src.display()),
            )
        })?;
        return found(b, "snapshot", ConfigSource::Snapshot, ev);
    }
    let url = ctx.hub.resolve_url(&m.repo, &m.revision, tcfg::FILE);
    if ctx.opts.dry_run {
        ev(&InstallEvent::WouldDownload { url });
        return Ok(None);
    }
    let dest = ctx.work.0.join(format!("{pid}.{}", tcfg::FILE));
    ctx.hub
        .download(&url, &dest, Some(entry.size), &mut |s: &str| {
            ev(&InstallEvent::DownloadNote {
                file: tcfg::FILE.into(),
                weights: false,
                note: s.to_string(),
            })
        })?;
    let b = read_file(&dest).map_err(|e| {
        refuse(
            RefusalCode::DownloadFailed,
            format!("{}: {e}", dest.display()),
        )
    })?;
    found(b, "downloaded", ConfigSource::Downloaded, ev)
}

/// Checks and stages one model (and its weights); returns its record.
fn install_one(ctx: &Ctx, m: &ModelEntry, t: &Tuple, ev: Events<'_>) -> Result<ModelRecord> {
    let pid = &m.profile_id;
    let c = load_committed(ctx.tree, m, t)?;
    let cfg_plan = tcfg::plan(pid, m.tokenizer_config_sha256.as_ref(), &c.index)?;
    let tok = tokenizer(ctx, m, ev)?;
    let cfg = tokenizer_config(ctx, m, &cfg_plan, ev)?;
    let dry = ctx.opts.dry_run;
    // The config's sha256: verified bytes, else (a dry run) the catalog's pin.
    let cfg_sha: Option<String> = match (&cfg, &cfg_plan) {
        (Some((_, sha)), _) => Some(sha.clone()),
        (None, ConfigPlan::Pinned { sha256, .. }) => sha256.clone(),
        (None, ConfigPlan::NoneUpstream { .. }) => None,
    };
    let profile = match (&cfg, &cfg_plan) {
        (Some((_, sha)), _) => tcfg::staged_profile(pid, &c.profile, Some(sha))?,
        (None, ConfigPlan::NoneUpstream { .. }) => tcfg::staged_profile(pid, &c.profile, None)?,
        // A dry run that has not seen the config: the profile would be pinned then.
        (None, ConfigPlan::Pinned { .. }) => c.profile.clone(),
    };
    let empty: &[u8] = &[];
    let tok_bytes: &[u8] = tok.as_deref().unwrap_or(empty);
    let mut plan: Vec<(&Path, PathBuf, &[u8])> = vec![(
        &ctx.reg,
        Path::new("artifacts/sha256").join(&m.tokenizer_sha256),
        tok_bytes,
    )];
    let pinned = matches!(cfg_plan, ConfigPlan::Pinned { .. });
    let cfg_bytes: &[u8] = cfg.as_ref().map_or(empty, |(b, _)| b);
    if pinned {
        let name = cfg_sha
            .clone()
            .unwrap_or_else(|| "<sha256 of tokenizer_config.json>".into());
        plan.push((
            &ctx.reg,
            Path::new("artifacts/sha256").join(name),
            cfg_bytes,
        ));
    }
    plan.extend([
        (
            &*ctx.reg,
            Path::new("artifacts/sha256").join(&m.template_sha256),
            &c.template[..],
        ),
        (
            &*ctx.reg,
            PathBuf::from(format!("{pid}.yaml")),
            &profile[..],
        ),
        (
            &*ctx.reg,
            Path::new("manifests").join(format!("{pid}.yaml")),
            &c.manifest[..],
        ),
    ]);
    for (rel, bytes) in &c.fixtures {
        plan.push((&ctx.reg, rel.clone(), bytes));
    }
    plan.push((
        &ctx.tokdir,
        Path::new(&slug(&m.repo)).join("tokenizer.json"),
        tok_bytes,
    ));
    if pinned {
        plan.push((
            &ctx.tokdir,
            Path::new(&slug(&m.repo)).join(tcfg::FILE),
            cfg_bytes,
        ));
    }
    let fixture_dir = Path::new("probefixtures").join(pid);
    no_symlink_below(&ctx.reg, &fixture_dir)?;
    for (root, rel, _) in &plan {
        no_symlink_below(root, rel)?;
    }
    if !dry {
        remove_tree(&ctx.reg, &fixture_dir)?;
        for (root, rel, bytes) in &plan {
            stage_file(root, rel, bytes)?;
        }
    }
    ev(&InstallEvent::Registry {
        dry_run: dry,
        files: plan.len(),
        registry_dir: ctx.reg.clone(),
        tokenizer_dir: ctx.tokdir.clone(),
    });
    let staged: Vec<String> = plan
        .iter()
        .map(|(root, rel, _)| root.join(rel).display().to_string())
        .collect();
    let weights = match &ctx.weights {
        Some(w) => Some(weights(ctx, m, &c.index, w, ev)?),
        None => None,
    };
    Ok(ModelRecord {
        profile_id: pid.clone(),
        action: if dry {
            RecordAction::WouldInstall
        } else {
            RecordAction::Installed
        },
        detail: format!(
            "{}@{} for {} ({})",
            m.repo,
            rev12(&m.revision),
            t.engine,
            state_str(t.state)
        ),
        staged,
        tokenizer_config_sha256: cfg_sha,
        weights,
    })
}

/// Verifies, fetches and verifies the weights of `m` under `wroot`.
fn weights(
    ctx: &Ctx,
    m: &ModelEntry,
    idx: &WeightsIndex,
    wroot: &Path,
    ev: Events<'_>,
) -> Result<WeightsOutcome> {
    let pid = &m.profile_id;
    let wrel = Path::new(&slug(&m.repo)).join(&m.revision);
    let wdir = wroot.join(&wrel);
    let sink = AtomicU64::new(0);
    let mut todo = Vec::new();
    for e in &idx.entries {
        let rel = wrel.join(&e.name);
        no_symlink_below(wroot, &rel)?;
        no_symlink_below(wroot, &part_path(&rel))?;
        let dest = wroot.join(&rel);
        let present = fs::symlink_metadata(&dest).is_ok_and(|md| md.is_file());
        if present && check_file(&dest, e, &sink) == FileCheck::Match {
            continue;
        }
        todo.push(e);
    }
    let need: u64 = todo.iter().map(|e| e.size).sum();
    let n = idx.entries.len();
    ev(&InstallEvent::WeightsPlan {
        verified: n - todo.len(),
        files: n,
        bytes: need,
        copy: ctx.snapshot.is_some(),
        dir: wdir.clone(),
    });
    let mut fetched = Vec::new();
    if !ctx.opts.dry_run && !todo.is_empty() {
        ensure_dir(wroot, &wrel)?;
        let partial: u64 = todo
            .iter()
            .filter_map(|e| fs::symlink_metadata(part_path(&wdir.join(&e.name))).ok())
            .map(|md| md.len())
            .sum();
        let remaining = need.saturating_sub(partial);
        if let Some(free) = (ctx.opts.free_bytes)(&wdir) {
            if free < remaining.saturating_add(SPACE_MARGIN) {
                return Err(refuse(
                    RefusalCode::DiskSpace,
                    format!(
                        "{}: {} free, {} needed plus 1 GiB margin",
                        wdir.display(),
                        gb(free),
                        gb(remaining)
                    ),
                ));
            }
        }
        for e in &todo {
            let dest = wdir.join(&e.name);
            match &ctx.snapshot {
                Some(snap) => copy_from_snapshot(
                    &snap.join(slug(&m.repo)).join(&m.revision).join(&e.name),
                    &wdir,
                    &e.name,
                )?,
                None => {
                    let url = ctx.hub.resolve_url(&m.repo, &m.revision, &e.name);
                    ctx.hub
                        .download(&url, &dest, Some(e.size), &mut |s: &str| {
                            ev(&InstallEvent::DownloadNote {
                                file: e.name.clone(),
                                weights: true,
                                note: s.to_string(),
                            })
                        })?;
                }
            }
            if check_file(&dest, e, &sink) != FileCheck::Match {
                let mut rejected = dest.clone().into_os_string();
                rejected.push(".rejected");
                let _ = fs::rename(&dest, &rejected);
                return Err(refuse(
                    RefusalCode::WeightShaMismatch,
                    format!(
                        "{pid}: {} does not match the index (kept as {}.rejected)",
                        e.name, e.name
                    ),
                ));
            }
            ev(&InstallEvent::WeightVerified {
                name: e.name.clone(),
                size: e.size,
            });
            fetched.push(e.name.clone());
        }
    }
    Ok(WeightsOutcome {
        dir: wdir.display().to_string(),
        files: n,
        already_verified: n - todo.len(),
        bytes_to_fetch: need,
        fetched,
    })
}

/// Copies a snapshot file into `dir/name` atomically (the digest is checked by the caller).
fn copy_from_snapshot(src: &Path, dir: &Path, name: &str) -> Result<()> {
    let mut input = fs::File::open(src).map_err(|e| {
        refuse(
            RefusalCode::SnapshotMissing,
            format!("{}: {e}", src.display()),
        )
    })?;
    let (tmp, mut f) = create_temp(dir, name)?;
    if let Err(e) = std::io::copy(&mut input, &mut f) {
        let _ = fs::remove_file(&tmp);
        return Err(refuse(
            RefusalCode::WriteFailed,
            format!("{}: {e}", dir.join(name).display()),
        ));
    }
    commit_temp(&tmp, f, &dir.join(name))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::testtree::{sha, write, FakeHub, TestTree, ENDPOINT};

    struct Env {
        t: TestTree,
        out: tempfile::TempDir,
    }

    impl Env {
        fn new() -> Env {
            Env {
                t: TestTree::new(),
                out: tempfile::tempdir().unwrap(),
            }
        }

        fn opts(&self) -> InstallOptions {
            let mut o = InstallOptions::new(
                "vllm",
                self.out.path().join("reg"),
                self.out.path().join("tok"),
            );
            o.include_candidates = true;
            o.endpoint = Some(format!("{ENDPOINT}/"));
            o
        }

        fn token(&self, text: &str, mode: u32) -> PathBuf {
            let p = self.out.path().join("token");
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        }

        fn run(&self, o: &InstallOptions, hub: &FakeHub) -> (Result<InstallReport>, Vec<String>) {
            let mut lines = Vec::new();
            let r = install(&self.t.load(), o, hub, &mut |e: &InstallEvent| {
                lines.push(e.to_string())
            });
            (r, lines)
        }
    }

    fn code(r: Result<InstallReport>) -> &'static str {
        r.map(|_| ()).unwrap_err().code()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn stages_registry_and_weights_through_the_fetcher() {
        let e = Env::new();
        let hub = FakeHub::for_tree(&e.t);
        let mut o = e.opts();
        o.models = vec!["tiny-a-v1".into()];
        o.weights_dir = Some(e.out.path().join("w"));
        let (r, lines) = e.run(&o, &hub);
        let r = r.unwrap();
        let a = &e.t.models[0];
        let reg = e.out.path().join("reg");
        let tok_sha = sha(&a.tokenizer);
        assert_eq!(
            lines[..4],
            [
                "tiny-a-v1: org-a/Tiny-A@111111111111 for vllm (candidate)".to_string(),
                format!(
                    "  tokenizer.json downloaded and verified ({})",
                    &tok_sha[..12]
                ),
                "  tokenizer_config.json: none upstream (weights index: none); the profile keeps \
                 tokenizer.json's added tokens"
                    .to_string(),
                format!(
                    "  staged 9 registry files under {} and {}",
                    reg.display(),
                    e.out.path().join("tok").display()
                ),
            ]
        );
        assert_eq!(r.installed, 1);
        assert_eq!(r.skipped, 0);
        let rec = &r.models[0];
        assert_eq!(rec.action, RecordAction::Installed);
        assert_eq!(rec.detail, "org-a/Tiny-A@111111111111 for vllm (candidate)");
        assert_eq!(rec.staged.len(), 9);
        let staged_tok = reg.join("artifacts/sha256").join(&tok_sha);
        assert_eq!(std::fs::read(&staged_tok).unwrap(), a.tokenizer);
        assert_eq!(mode(&staged_tok), 0o644);
        assert_eq!(mode(&reg.join("artifacts")), 0o755);
        assert_eq!(
            std::fs::read(reg.join("tiny-a-v1.yaml")).unwrap(),
            TestTree::profile_text(a).into_bytes()
        );
        assert!(reg
            .join("probefixtures/tiny-a-v1/sglang/basic.expect.json")
            .is_file());
        let w = rec.weights.as_ref().unwrap();
        assert_eq!(w.files, 3);
        assert_eq!(w.already_verified, 0);
        assert_eq!(
            w.fetched,
            ["config.json", "model.safetensors", "tokenizer.json"]
        );
        let wdir = e.out.path().join("w/org-a__Tiny-A").join(&a.rev);
        for (n, b, _) in a.snapshot() {
            assert_eq!(std::fs::read(wdir.join(n)).unwrap(), b);
        }
        assert!(hub
            .seen()
            .iter()
            .all(|s| s.token.is_none() && s.range.is_none()));
        assert_eq!(
            hub.seen()[0].url,
            format!("{ENDPOINT}/org-a/Tiny-A/resolve/{}/tokenizer.json", a.rev)
        );
        // A second run finds everything staged and verified and fetches nothing.
        let (r2, lines2) = e.run(&o, &hub);
        assert_eq!(
            r2.unwrap().models[0]
                .weights
                .as_ref()
                .unwrap()
                .already_verified,
            3
        );
        assert!(lines2[1].starts_with("  tokenizer.json already staged and verified"));
        assert_eq!(hub.seen().len(), 4);
    }

    #[test]
    fn a_dropped_connection_is_resumed_with_a_range_request() {
        let e = Env::new();
        let hub = FakeHub::for_tree(&e.t);
        let a = &e.t.models[0];
        let url = format!(
            "{ENDPOINT}/org-a/Tiny-A/resolve/{}/model.safetensors",
            a.rev
        );
        hub.drop_after
            .lock()
            .unwrap()
            .insert(url.clone(), (1000, 1));
        let mut o = e.opts();
        o.models = vec!["tiny-a-v1".into()];
        o.weights_dir = Some(e.out.path().join("w"));
        let (r, lines) = e.run(&o, &hub);
        r.unwrap();
        assert!(
            lines.contains(&"    model.safetensors: resuming at byte 1000".to_string()),
            "{lines:?}"
        );
        let tries: Vec<_> = hub.seen().into_iter().filter(|s| s.url == url).collect();
        assert_eq!(tries.len(), 2);
        assert_eq!(tries[1].range, Some(1000));
    }

    #[test]
    fn selection_skips_with_a_typed_reason() {
        let e = Env::new();
        let hub = FakeHub::for_tree(&e.t);
        let tree = e.t.load();
        let picks = select(&tree.catalog, "sglang", &[], false).unwrap();
        assert_eq!(
            picks[0].1,
            Selection::Skip("SKIP_BLOCKED architecture_unsupported: no `TinyForCausalLM`.".into())
        );
        assert_eq!(
            picks[1].1,
            Selection::Skip("SKIP_NO_ROW no sglang row".into())
        );
        let picks = select(
            &tree.catalog,
            "vllm",
            &[" tiny-g-v1 ".into(), "".into()],
            false,
        )
        .unwrap();
        assert_eq!(picks.len(), 1);
        assert_eq!(
            picks[0].1,
            Selection::Skip("SKIP_CANDIDATE not supported; --include-candidates opts in".into())
        );
        let e2 = select(&tree.catalog, "vllm", &["nope-v1".into()], false).unwrap_err();
        assert_eq!(e2.code(), "UNKNOWN_MODEL");
        assert_eq!(e2.to_string(), "nope-v1 is not in the catalog (see list)");
        let mut o = e.opts();
        o.engine = "llamacpp".into();
        assert_eq!(code(e.run(&o, &hub).0), "UNKNOWN_ENGINE");
        // Gated without a token: skipped, nothing fetched.
        let (r, lines) = e.run(&e.opts(), &hub);
        let r = r.unwrap();
        assert_eq!((r.installed, r.skipped), (1, 1));
        assert_eq!(
            lines.last().unwrap(),
            "tiny-g-v1: SKIP_GATED_NO_TOKEN org-g/Tiny-G is gated; pass --hf-token-file"
        );
        assert_eq!(r.models[1].action, RecordAction::Skip);
    }

    #[test]
    fn the_token_file_must_be_private_and_is_sent_as_given() {
        let e = Env::new();
        let hub = FakeHub::for_tree(&e.t);
        let mut o = e.opts();
        o.token_file = Some(e.token("hf_secret\n", 0o644));
        let err = e.run(&o, &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "TOKEN_FILE_MODE");
        assert!(err
            .to_string()
            .ends_with(" must not be readable by group or others (chmod 600)"));
        o.token_file = Some(e.token("  \n", 0o600));
        assert_eq!(code(e.run(&o, &hub).0), "TOKEN_FILE_EMPTY");
        o.token_file = Some(e.token("hf_secret\n", 0o600));
        let (r, _) = e.run(&o, &hub);
        assert_eq!(r.unwrap().installed, 2);
        assert!(hub
            .seen()
            .iter()
            .all(|s| s.token.as_deref() == Some("hf_secret")));
    }

    #[test]
    fn unsafe_roots_and_symlinks_are_refused() {
        let e = Env::new();
        let hub = FakeHub::for_tree(&e.t);
        let mut o = e.opts();
        o.registry_dir = PathBuf::from("relative/reg");
        let err = e.run(&o, &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "UNSAFE_PATH");
        assert_eq!(
            err.to_string(),
            "--registry-dir \"relative/reg\" must be absolute without '..'"
        );
        o.registry_dir = e.out.path().join("a/../reg");
        assert_eq!(code(e.run(&o, &hub).0), "UNSAFE_PATH");
        let elsewhere = e.out.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, e.out.path().join("reg")).unwrap();
        let err = e.run(&e.opts(), &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "UNSAFE_PATH");
        assert!(err.to_string().ends_with("/reg is a symlink"), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }

    #[test]
    fn pin_mismatches_are_refused_before_anything_is_staged() {
        let e = Env::new();
        let hub = FakeHub::for_tree(&e.t);
        let idx = e.t.root.join("scripts/models/weights/tiny-a-v1.index");
        let mut text = std::fs::read_to_string(&idx).unwrap();
        text = text.replace(" config.json", " config.jsonx");
        write(&idx, text.as_bytes());
        let err = e.run(&e.opts(), &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "INDEX_SHA_MISMATCH");
        assert!(err
            .to_string()
            .starts_with("scripts/models/weights/tiny-a-v1.index: hashes to "));
        assert!(!e.out.path().join("reg").exists());
        assert!(hub.seen().is_empty());

        let e = Env::new();
        let mut hub = FakeHub::for_tree(&e.t);
        let a = &e.t.models[0];
        hub.files.insert(
            format!("{ENDPOINT}/org-a/Tiny-A/resolve/{}/tokenizer.json", a.rev),
            b"{}".to_vec(),
        );
        let err = e.run(&e.opts(), &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "TOKENIZER_SHA_MISMATCH");
        assert_eq!(
            err.to_string(),
            format!(
                "tiny-a-v1: downloaded tokenizer.json hashes to {}, pinned {}",
                sha(b"{}"),
                sha(&a.tokenizer)
            )
        );
        assert!(!e.out.path().join("reg").exists());

        let e = Env::new();
        write(
            &e.t.fx().join("templates/org-a__Tiny-A/chat_template.jinja"),
            b"edited",
        );
        assert_eq!(
            code(e.run(&e.opts(), &FakeHub::default()).0),
            "TEMPLATE_SHA_MISMATCH"
        );
        let e = Env::new();
        write(
            &e.t.fx().join("manifests/tiny-a-v1.yaml"),
            TestTree::manifest_text(&e.t.models[0], "sha256:00", "0.28.0").as_bytes(),
        );
        assert_eq!(
            code(e.run(&e.opts(), &FakeHub::default()).0),
            "PROFILE_DRIFT"
        );
    }

    #[test]
    fn disk_space_and_rejected_weights() {
        let e = Env::new();
        let hub = FakeHub::for_tree(&e.t);
        let mut o = e.opts();
        o.models = vec!["tiny-a-v1".into()];
        o.weights_dir = Some(e.out.path().join("w"));
        o.free_bytes = |_| Some(SPACE_MARGIN);
        let err = e.run(&o, &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "DISK_SPACE");
        assert!(
            err.to_string()
                .ends_with(": 1.1 GB free, 0.0 GB needed plus 1 GiB margin"),
            "{err}"
        );
        o.free_bytes = |_| None;
        let mut hub = FakeHub::for_tree(&e.t);
        let a = &e.t.models[0];
        hub.files.insert(
            format!("{ENDPOINT}/org-a/Tiny-A/resolve/{}/config.json", a.rev),
            br#"{"model_type":"tinY"}"#.to_vec(),
        );
        let err = e.run(&o, &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "WEIGHT_SHA_MISMATCH");
        assert_eq!(
            err.to_string(),
            "tiny-a-v1: config.json does not match the index (kept as config.json.rejected)"
        );
        let wdir = e.out.path().join("w/org-a__Tiny-A").join(&a.rev);
        assert!(wdir.join("config.json.rejected").is_file());
        assert!(!wdir.join("config.json").exists());
    }

    #[test]
    fn denied_downloads_and_dry_runs() {
        let e = Env::new();
        let hub = FakeHub {
            status: Some(401),
            ..FakeHub::for_tree(&e.t)
        };
        let err = e.run(&e.opts(), &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "DOWNLOAD_DENIED");
        assert!(
            err.to_string()
                .starts_with("HTTP 401 for http://hub.invalid/org-a/"),
            "{err}"
        );
        let mut o = e.opts();
        o.dry_run = true;
        o.weights_dir = Some(e.out.path().join("w"));
        let (r, lines) = e.run(&o, &hub);
        let r = r.unwrap();
        assert_eq!((r.installed, r.skipped), (2, 0));
        assert_eq!(r.models[0].action, RecordAction::WouldInstall);
        assert!(lines[1].starts_with("  would download http://hub.invalid/org-a/Tiny-A/resolve/"));
        assert!(lines[3].starts_with("  would stage 9 registry files under "));
        assert!(
            lines[4].starts_with("  weights: 0/3 files already verified, 0.0 GB to download into ")
        );
        assert!(!e.out.path().join("reg").exists());
        assert!(!e.out.path().join("w").exists());
        assert_eq!(hub.seen().len(), 1);
    }

    #[test]
    fn an_air_gapped_host_installs_from_a_snapshot() {
        let e = Env::new();
        let snap = e.out.path().join("snap");
        e.t.write_snapshot(&snap);
        let mut o = e.opts();
        o.from_snapshot = Some(snap.clone());
        o.weights_dir = Some(e.out.path().join("w"));
        let hub = FakeHub::default();
        let (r, lines) = e.run(&o, &hub);
        assert_eq!(r.unwrap().installed, 2);
        assert!(hub.seen().is_empty());
        assert!(lines[1].starts_with("  tokenizer.json taken from the snapshot and verified"));
        assert!(lines[4].contains(" to copy into "), "{lines:?}");
        // Dropped fixtures disappear on the next install.
        let fx = e.out.path().join("reg/probefixtures/tiny-a-v1/stale.json");
        write(&fx, b"{}");
        e.run(&o, &hub).0.unwrap();
        assert!(!fx.exists());
        o.from_snapshot = Some(e.out.path().join("none"));
        assert_eq!(code(e.run(&o, &hub).0), "SNAPSHOT_MISSING");
    }

    #[test]
    fn image_plans() {
        let t = TestTree::new();
        let c = t.load().catalog;
        assert_eq!(
            image_plan(&c, "vllm").unwrap(),
            ImagePlan::Pull {
                reference: format!("vllm/vllm-openai@{}", crate::testtree::VLLM_DIGEST)
            }
        );
        assert_eq!(
            image_plan(&c, "sglang").unwrap(),
            ImagePlan::NoPullableImage {
                note: "locally built".into()
            }
        );
        assert_eq!(
            image_plan(&c, "trtllm").unwrap_err().code(),
            "UNKNOWN_ENGINE"
        );
    }

    /// An upstream `tokenizer_config.json` with an added token tokenizer.json lacks.
    const CFG: &[u8] =
        br#"{"added_tokens_decoder": {"0": {"content": "a", "special": false}}, "model_max_length": 4096}"#;

    /// The tree with tiny-a given [`CFG`] upstream (pinned by the index and the catalog).
    fn with_config() -> Env {
        Env {
            t: TestTree::with(|ms| ms[0] = ms[0].clone().with_config(CFG)),
            out: tempfile::tempdir().unwrap(),
        }
    }

    fn cfg_url(e: &Env) -> String {
        format!(
            "{ENDPOINT}/org-a/Tiny-A/resolve/{}/tokenizer_config.json",
            e.t.models[0].rev
        )
    }

    #[test]
    fn the_upstream_config_is_downloaded_verified_and_pinned_in_the_profile() {
        let e = with_config();
        let hub = FakeHub::for_tree(&e.t);
        let mut o = e.opts();
        o.models = vec!["tiny-a-v1".into()];
        let (r, lines) = e.run(&o, &hub);
        let r = r.unwrap();
        let cfg_sha = sha(CFG);
        assert_eq!(
            lines[2],
            format!(
                "  tokenizer_config.json downloaded and verified ({}); the profile pins it",
                &cfg_sha[..12]
            )
        );
        assert!(
            lines[3].starts_with("  staged 11 registry files under "),
            "{lines:?}"
        );
        let rec = &r.models[0];
        assert_eq!(
            rec.tokenizer_config_sha256.as_deref(),
            Some(cfg_sha.as_str())
        );
        let reg = e.out.path().join("reg");
        let tok = e.out.path().join("tok/org-a__Tiny-A");
        assert_eq!(
            std::fs::read(reg.join("artifacts/sha256").join(&cfg_sha)).unwrap(),
            CFG
        );
        assert_eq!(
            std::fs::read(tok.join("tokenizer_config.json")).unwrap(),
            CFG
        );
        assert_eq!(mode(&tok.join("tokenizer_config.json")), 0o644);
        assert!(rec
            .staged
            .contains(&tok.join("tokenizer_config.json").display().to_string()));
        // The staged profile is the committed one with the two pin lines after tokenizerSha256.
        let committed = TestTree::profile_text(&e.t.models[0]);
        let tok_line = format!("tokenizerSha256: {}\n", sha(&e.t.models[0].tokenizer));
        let want = committed.replace(
            &tok_line,
            &format!(
                "{tok_line}tokenizerConfigArtifact: sha256/{cfg_sha}\ntokenizerConfigSha256: {cfg_sha}\n"
            ),
        );
        assert_ne!(want, committed);
        assert_eq!(
            std::fs::read_to_string(reg.join("tiny-a-v1.yaml")).unwrap(),
            want
        );
        // The staged registry publishes under the trust policy, the config verified with it.
        let g = kvprofile_core::Registry::new()
            .publish(
                &reg,
                &kvprofile_core::LoadOptions {
                    policy: kvprofile_core::TrustPolicy::for_current_user(),
                    ..kvprofile_core::LoadOptions::default()
                },
                &kvprofile_core::StructuralValidator,
            )
            .unwrap_or_else(|e| panic!("{} {e}", e.code()));
        let p = g.profile("tiny-a-v1").unwrap();
        let cfg = p
            .artifacts
            .tokenizer_config
            .as_ref()
            .expect("config loaded");
        assert_eq!(&cfg.bytes[..], CFG);
        // A second run finds the config staged and fetches nothing.
        let before = hub.seen().len();
        let (r2, lines2) = e.run(&o, &hub);
        r2.unwrap();
        assert!(
            lines2[2].starts_with("  tokenizer_config.json already staged and verified"),
            "{lines2:?}"
        );
        assert_eq!(hub.seen().len(), before);
        assert_eq!(
            hub.seen().iter().filter(|s| s.url == cfg_url(&e)).count(),
            1
        );
        // A dry run names both downloads and the same files.
        let e = with_config();
        let mut o = e.opts();
        o.models = vec!["tiny-a-v1".into()];
        o.dry_run = true;
        let (r, lines) = e.run(&o, &FakeHub::for_tree(&e.t));
        assert_eq!(lines[2], format!("  would download {}", cfg_url(&e)));
        assert!(
            lines[3].starts_with("  would stage 11 registry files"),
            "{lines:?}"
        );
        assert_eq!(
            r.unwrap().models[0].tokenizer_config_sha256.as_deref(),
            Some(cfg_sha.as_str())
        );
        assert!(!e.out.path().join("reg").exists());
    }

    #[test]
    fn a_config_that_is_not_its_pin_is_refused_with_nothing_staged() {
        let nothing_staged = |e: &Env| {
            assert!(!e.out.path().join("reg").exists());
            assert!(!e.out.path().join("tok").exists());
        };
        // Other bytes of the same size: the index's git blob id differs.
        let e = with_config();
        let mut hub = FakeHub::for_tree(&e.t);
        let mut other = CFG.to_vec();
        let at = other.len() - 5;
        other[at] = b'8';
        hub.files.insert(cfg_url(&e), other.clone());
        let err = e.run(&e.opts(), &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
        assert!(
            err.to_string()
                .starts_with("tiny-a-v1: downloaded tokenizer_config.json has gitblob "),
            "{err}"
        );
        nothing_staged(&e);
        // A longer file is cut at the indexed size (the download's cap) and never staged.
        let mut hub = FakeHub::for_tree(&e.t);
        hub.files.insert(cfg_url(&e), [CFG, b" "].concat());
        let err = e.run(&e.opts(), &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "DOWNLOAD_FAILED");
        assert!(err.to_string().contains("more than the"), "{err}");
        nothing_staged(&e);
        // The index and the bytes agree but the catalog pins another sha256.
        let e = Env {
            t: TestTree::with(|ms| {
                ms[0] = ms[0].clone().with_config(CFG);
                ms[0].config_decl = Some("e".repeat(64));
            }),
            out: tempfile::tempdir().unwrap(),
        };
        let err = e
            .run(&e.opts(), &FakeHub::for_tree(&e.t))
            .0
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
        assert_eq!(
            err.to_string(),
            format!(
                "tiny-a-v1: downloaded tokenizer_config.json hashes to {}, pinned {}",
                sha(CFG),
                "e".repeat(64)
            )
        );
        nothing_staged(&e);
        // A catalog that says `none` while the index lists one: refused before any download.
        let e = Env {
            t: TestTree::with(|ms| {
                ms[0] = ms[0].clone().with_config(CFG);
                ms[0].config_decl = Some("none".into());
            }),
            out: tempfile::tempdir().unwrap(),
        };
        let hub = FakeHub::for_tree(&e.t);
        let err = e.run(&e.opts(), &hub).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
        assert!(hub.seen().is_empty());
        nothing_staged(&e);
        // A committed profile pinning another config is drift.
        let e = with_config();
        let prof = e.t.fx().join("profiles/tiny-a-v1.yaml");
        let text = std::fs::read_to_string(&prof).unwrap().replace(
            "templateArtifact:",
            &format!(
                "tokenizerConfigArtifact: sha256/{h}\ntokenizerConfigSha256: {h}\ntemplateArtifact:",
                h = "f".repeat(64)
            ),
        );
        write(&prof, text.as_bytes());
        let err = e
            .run(&e.opts(), &FakeHub::for_tree(&e.t))
            .0
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.code(), "PROFILE_DRIFT");
        nothing_staged(&e);
        // From a snapshot: the same pins; a snapshot without the file names it.
        let e = with_config();
        let snap = e.out.path().join("snap");
        e.t.write_snapshot(&snap);
        let mut o = e.opts();
        o.from_snapshot = Some(snap.clone());
        let cfg_path = snap
            .join("org-a__Tiny-A")
            .join(&e.t.models[0].rev)
            .join("tokenizer_config.json");
        write(&cfg_path, &other);
        let err = e.run(&o, &FakeHub::default()).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
        assert!(
            err.to_string().contains("snapshot tokenizer_config.json"),
            "{err}"
        );
        nothing_staged(&e);
        std::fs::remove_file(&cfg_path).unwrap();
        let err = e.run(&o, &FakeHub::default()).0.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), "SNAPSHOT_MISSING");
        nothing_staged(&e);
        write(&cfg_path, CFG);
        let (r, lines) = e.run(&o, &FakeHub::default());
        assert_eq!(r.unwrap().installed, 2);
        assert!(
            lines[2].starts_with("  tokenizer_config.json taken from the snapshot and verified"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_model_without_a_config_upstream_is_staged_as_before() {
        for (decl, why) in [
            (None, "weights index: none"),
            (Some("none"), "catalog: none; weights index: none"),
        ] {
            let e = Env {
                t: TestTree::with(|ms| ms[0].config_decl = decl.map(str::to_string)),
                out: tempfile::tempdir().unwrap(),
            };
            let hub = FakeHub::for_tree(&e.t);
            let mut o = e.opts();
            o.models = vec!["tiny-a-v1".into()];
            let (r, lines) = e.run(&o, &hub);
            let r = r.unwrap();
            assert_eq!(
                lines[2],
                format!(
                    "  tokenizer_config.json: none upstream ({why}); the profile keeps \
                     tokenizer.json's added tokens"
                )
            );
            assert_eq!(r.models[0].tokenizer_config_sha256, None);
            assert_eq!(r.models[0].staged.len(), 9);
            assert_eq!(
                std::fs::read_to_string(e.out.path().join("reg/tiny-a-v1.yaml")).unwrap(),
                TestTree::profile_text(&e.t.models[0])
            );
            assert!(!e
                .out
                .path()
                .join("tok/org-a__Tiny-A/tokenizer_config.json")
                .exists());
            assert!(hub
                .seen()
                .iter()
                .all(|s| !s.url.ends_with("tokenizer_config.json")));
        }
        // A catalog pinning a config the index does not list is refused.
        let e = Env {
            t: TestTree::with(|ms| ms[0].config_decl = Some(sha(CFG))),
            out: tempfile::tempdir().unwrap(),
        };
        let err = e
            .run(&e.opts(), &FakeHub::for_tree(&e.t))
            .0
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
        assert!(
            err.to_string()
                .ends_with("but the weights index lists no tokenizer_config.json"),
            "{err}"
        );
    }
}
