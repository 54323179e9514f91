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

mod committed;
mod fetch;
mod report;
mod stage;
mod weights;

use committed::*;
use fetch::*;
pub use report::*;
use stage::*;
use weights::*;

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
