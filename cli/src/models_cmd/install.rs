//! `kvexact models install`: stage the profile registry for one engine exactly as the gateway
//! reads it (docs/contracts/registry.md §1, §11), and optionally the pinned weights snapshot.
//!
//! Per selected model, before anything is written: the banked template's sha256 must be the
//! catalog's `templateSha256`; the committed profile must parse strictly and carry the catalog's
//! repo, revision, tokenizer and template pins; the engine manifest of the engine's set must
//! parse and carry the engine digest, version (without `v`) and revision; the weights index must
//! hash to `weightsIndexSha256`; the tokenizer (already staged, from `--from-snapshot`, or
//! downloaded) must hash to `tokenizerSha256`. Then every destination is checked for symlinks,
//! the fixture directory is wiped (dropped fixtures disappear) and each file is written
//! atomically (`0644`, directories `0755`):
//!
//! ```text
//! <registry>/artifacts/sha256/<tokenizerSha256>     tokenizer.json bytes
//! <registry>/artifacts/sha256/<templateSha256>      banked chat_template.jinja bytes
//! <registry>/<id>.yaml                              committed profile
//! <registry>/manifests/<id>.yaml                    engine manifest of --engine's set
//! <registry>/probefixtures/<id>/{,sglang/,trtllm/}  committed *.json fixtures
//! <tokenizers>/<org>__<name>/tokenizer.json         same tokenizer bytes
//! <weights>/<org>__<name>/<rev>/<file>              with --weights-dir: every indexed file
//! ```
//!
//! Weights: files that already verify are skipped; the rest need free space ≥ remaining + 1 GiB;
//! downloads resume `.part` files with HTTP Range; a file that does not verify is renamed
//! `<file>.rejected` (`WEIGHT_SHA_MISMATCH`). `--from-snapshot DIR` takes the tokenizer and
//! weights from `DIR/<org>__<name>/<rev>/<file>` (the `--weights-dir` layout) instead of the hub,
//! for air-gapped hosts: nothing is downloaded, and the same pins are checked.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use kvprofile_core::catalog::{ModelEntry, Tuple, TupleState, WeightsIndex};
use kvprofile_core::ids::slug;
use kvprofile_core::{EngineManifest, Profile};

use super::download::{part_path, read_token, Hub};
use super::fsops::{
    commit_temp, create_temp, ensure_dir, no_symlink_below, remove_tree, safe_root, stage_file,
};
use super::list;
use super::sources::{manifest_set, read_file, sha256_hex, state_str, SourceTree, FIXTURE_SUBDIRS};
use super::verify_weights::{check_file, FileCheck};
use super::{gb, print_json, rev12, Common, Refusal, Status};

/// Free space kept beyond the download (docs/contracts/registry.md §11: remaining + 1 GB).
const SPACE_MARGIN: u64 = 1 << 30;

/// Arguments of `kvexact models install`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Print the catalog's models (as `kvexact models list`) and stop.
    #[arg(long)]
    pub list: bool,
    /// Check and print what would be staged; write nothing, download nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Engine the registry is staged for (selects its engine-manifest set).
    #[arg(long, default_value = "vllm")]
    pub engine: String,
    /// Comma-separated profile ids (default: every model with a row for the engine).
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// Also install `candidate` rows (not supported; explicit opt-in).
    #[arg(long)]
    pub include_candidates: bool,
    /// Registry root (absolute).
    #[arg(long, default_value = "/etc/loxilb/kvprofiles")]
    pub registry_dir: PathBuf,
    /// Tokenizer directory (absolute).
    #[arg(long, default_value = "/etc/loxilb/tokenizers")]
    pub tokenizer_dir: PathBuf,
    /// Also download and verify the pinned weights snapshot under this directory (absolute).
    #[arg(long)]
    pub weights_dir: Option<PathBuf>,
    /// Hub access token file, mode 0600 or stricter (default: env HF_TOKEN_FILE). Hub URL: env
    /// HF_ENDPOINT (default https://huggingface.co).
    #[arg(long)]
    pub hf_token_file: Option<PathBuf>,
    /// Take tokenizer and weights from DIR/<org>__<name>/<rev>/ instead of the hub.
    #[arg(long, value_name = "DIR")]
    pub from_snapshot: Option<PathBuf>,
    /// Also `docker pull <image>@<digest>` of the engine (none for an engine without a registry
    /// image: `SKIP_NO_PULLABLE_IMAGE`).
    #[arg(long)]
    pub pull_image: bool,
}

/// Human lines go to stdout unless `--json`.
struct Out {
    json: bool,
}

impl Out {
    fn say(&self, s: &str) {
        if !self.json {
            println!("{s}");
        }
    }
}

/// Everything `install_one` needs besides the model.
struct Ctx<'a> {
    tree: &'a SourceTree,
    args: &'a Args,
    reg: PathBuf,
    tokdir: PathBuf,
    weights: Option<PathBuf>,
    snapshot: Option<PathBuf>,
    hub: Hub,
    work: WorkDir,
    out: Out,
}

/// A private scratch directory (mode 0700) removed on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> Result<Self, Refusal> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!("kvexact-models-{}-{nanos}", std::process::id()));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&p)
            .map_err(|e| Refusal::new("WRITE_FAILED", format!("{}: {e}", p.display())))?;
        Ok(WorkDir(p))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Free bytes for an unprivileged user on the filesystem holding `p` (nearest existing ancestor).
fn free_bytes(p: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = p.ancestors().find(|a| a.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value for it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a valid, writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// What to do with one model.
enum Action<'a> {
    Install(&'a Tuple),
    Skip(String),
}

fn select<'a>(
    c: &'a kvprofile_core::catalog::SupportedModels,
    a: &Args,
) -> Result<Vec<(&'a ModelEntry, Action<'a>)>, Refusal> {
    let wanted: Vec<&str> = a
        .models
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    for w in &wanted {
        if !c.models.iter().any(|m| m.profile_id == *w) {
            return Err(Refusal::new(
                "UNKNOWN_MODEL",
                format!("{w} is not in the catalog (see list)"),
            ));
        }
    }
    let mut picks = Vec::new();
    for m in &c.models {
        if !wanted.is_empty() && !wanted.contains(&m.profile_id.as_str()) {
            continue;
        }
        let Some(t) = m
            .tuples
            .iter()
            .rev()
            .find(|t| t.engine.as_str() == a.engine)
        else {
            picks.push((m, Action::Skip(format!("SKIP_NO_ROW no {} row", a.engine))));
            continue;
        };
        let action = match t.state {
            TupleState::Blocked => Action::Skip(format!(
                "SKIP_BLOCKED {}: {}",
                t.reason.as_deref().unwrap_or(""),
                t.detail.as_deref().unwrap_or("")
            )),
            TupleState::Candidate if !a.include_candidates => {
                Action::Skip("SKIP_CANDIDATE not supported; --include-candidates opts in".into())
            }
            _ => Action::Install(t),
        };
        picks.push((m, action));
    }
    Ok(picks)
}

fn drift(pid: &str, what: String) -> Refusal {
    Refusal::new("PROFILE_DRIFT", format!("{pid}: {what}"))
}

/// The committed documents of one model, all pins checked.
struct Committed {
    profile: Vec<u8>,
    manifest: Vec<u8>,
    template: Vec<u8>,
    fixtures: Vec<(PathBuf, Vec<u8>)>,
    index: WeightsIndex,
}

fn load_committed(tree: &SourceTree, m: &ModelEntry, t: &Tuple) -> Result<Committed, Refusal> {
    let pid = &m.profile_id;
    let set = manifest_set(t.engine).ok_or_else(|| {
        Refusal::new(
            "NO_ENGINE_MANIFEST",
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
        return Err(Refusal::new(
            "TEMPLATE_SHA_MISMATCH",
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
        return Err(Refusal::new(
            "INDEX_SHA_MISMATCH",
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
            .map_err(|e| Refusal::new("COMMITTED_FILE", format!("{dir_rel}: {e}")))?
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
        return Err(Refusal::new(
            "COMMITTED_FILE",
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

fn tokenizer_mismatch(pid: &str, got: &str, want: &str, from: &str) -> Refusal {
    Refusal::new(
        "TOKENIZER_SHA_MISMATCH",
        format!("{pid}: {from} tokenizer.json hashes to {got}, pinned {want}"),
    )
}

/// Finds the tokenizer bytes: already staged, from the snapshot, or downloaded (`None` in a dry
/// run that would download).
fn tokenizer(ctx: &Ctx, m: &ModelEntry) -> Result<Option<Vec<u8>>, Refusal> {
    let pid = &m.profile_id;
    let want = &m.tokenizer_sha256;
    let art_rel = Path::new("artifacts/sha256").join(want);
    no_symlink_below(&ctx.reg, &art_rel)?;
    let staged = ctx.reg.join(&art_rel);
    if fs::symlink_metadata(&staged).is_ok_and(|md| md.is_file()) {
        if let Ok(b) = read_file(&staged) {
            if sha256_hex(&b) == *want {
                ctx.out.say(&format!(
                    "  tokenizer.json already staged and verified ({})",
                    rev12(want)
                ));
                return Ok(Some(b));
            }
        }
    }
    if let Some(snap) = &ctx.snapshot {
        let src = snap
            .join(slug(&m.repo))
            .join(&m.revision)
            .join("tokenizer.json");
        let b = read_file(&src)
            .map_err(|e| Refusal::new("SNAPSHOT_MISSING", format!("{}: {e}", src.display())))?;
        let got = sha256_hex(&b);
        if got != *want {
            return Err(tokenizer_mismatch(pid, &got, want, "snapshot"));
        }
        ctx.out.say(&format!(
            "  tokenizer.json taken from the snapshot and verified ({})",
            rev12(want)
        ));
        return Ok(Some(b));
    }
    let url = ctx.hub.resolve_url(&m.repo, &m.revision, "tokenizer.json");
    if ctx.args.dry_run {
        ctx.out.say(&format!("  would download {url}"));
        return Ok(None);
    }
    let dest = ctx.work.0.join(format!("{pid}.tokenizer.json"));
    ctx.hub
        .fetch(&url, &dest, None, &|s| eprintln!("  tokenizer.json: {s}"))?;
    let b = read_file(&dest)
        .map_err(|e| Refusal::new("DOWNLOAD_FAILED", format!("{}: {e}", dest.display())))?;
    let got = sha256_hex(&b);
    if got != *want {
        return Err(tokenizer_mismatch(pid, &got, want, "downloaded"));
    }
    ctx.out.say(&format!(
        "  tokenizer.json downloaded and verified ({})",
        rev12(want)
    ));
    Ok(Some(b))
}

fn install_one(ctx: &Ctx, m: &ModelEntry, t: &Tuple) -> Result<serde_json::Value, Refusal> {
    let pid = &m.profile_id;
    let c = load_committed(ctx.tree, m, t)?;
    let tok = tokenizer(ctx, m)?;
    let dry = ctx.args.dry_run;
    let empty: &[u8] = &[];
    let tok_bytes: &[u8] = tok.as_deref().unwrap_or(empty);
    let mut plan: Vec<(&Path, PathBuf, &[u8])> = vec![
        (
            &ctx.reg,
            Path::new("artifacts/sha256").join(&m.tokenizer_sha256),
            tok_bytes,
        ),
        (
            &ctx.reg,
            Path::new("artifacts/sha256").join(&m.template_sha256),
            &c.template,
        ),
        (&ctx.reg, PathBuf::from(format!("{pid}.yaml")), &c.profile),
        (
            &ctx.reg,
            Path::new("manifests").join(format!("{pid}.yaml")),
            &c.manifest,
        ),
    ];
    for (rel, bytes) in &c.fixtures {
        plan.push((&ctx.reg, rel.clone(), bytes));
    }
    plan.push((
        &ctx.tokdir,
        Path::new(&slug(&m.repo)).join("tokenizer.json"),
        tok_bytes,
    ));
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
    ctx.out.say(&format!(
        "  {} {} registry files under {} and {}",
        if dry { "would stage" } else { "staged" },
        plan.len(),
        ctx.reg.display(),
        ctx.tokdir.display()
    ));
    let staged: Vec<String> = plan
        .iter()
        .map(|(root, rel, _)| root.join(rel).display().to_string())
        .collect();
    let weights = match &ctx.weights {
        Some(w) => weights(ctx, m, &c.index, w)?,
        None => serde_json::Value::Null,
    };
    Ok(serde_json::json!({
        "profileId": pid,
        "action": if dry { "would-install" } else { "installed" },
        "detail": format!("{}@{} for {} ({})", m.repo, rev12(&m.revision), t.engine, state_str(t.state)),
        "staged": staged,
        "weights": weights,
    }))
}

fn weights(
    ctx: &Ctx,
    m: &ModelEntry,
    idx: &WeightsIndex,
    wroot: &Path,
) -> Result<serde_json::Value, Refusal> {
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
    ctx.out.say(&format!(
        "  weights: {}/{n} files already verified, {} to {} into {}",
        n - todo.len(),
        gb(need),
        if ctx.snapshot.is_some() {
            "copy"
        } else {
            "download"
        },
        wdir.display()
    ));
    let mut fetched = Vec::new();
    if !ctx.args.dry_run && !todo.is_empty() {
        ensure_dir(wroot, &wrel)?;
        let partial: u64 = todo
            .iter()
            .filter_map(|e| fs::symlink_metadata(part_path(&wdir.join(&e.name))).ok())
            .map(|md| md.len())
            .sum();
        let remaining = need.saturating_sub(partial);
        if let Some(free) = free_bytes(&wdir) {
            if free < remaining.saturating_add(SPACE_MARGIN) {
                return Err(Refusal::new(
                    "DISK_SPACE",
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
                    let name = e.name.clone();
                    ctx.hub
                        .fetch(&url, &dest, Some(e.size), &|s| eprintln!("    {name}: {s}"))?;
                }
            }
            if check_file(&dest, e, &sink) != FileCheck::Match {
                let mut rejected = dest.clone().into_os_string();
                rejected.push(".rejected");
                let _ = fs::rename(&dest, &rejected);
                return Err(Refusal::new(
                    "WEIGHT_SHA_MISMATCH",
                    format!(
                        "{pid}: {} does not match the index (kept as {}.rejected)",
                        e.name, e.name
                    ),
                ));
            }
            ctx.out
                .say(&format!("    verified {} ({})", e.name, gb(e.size)));
            fetched.push(e.name.clone());
        }
    }
    Ok(serde_json::json!({
        "dir": wdir.display().to_string(),
        "files": n,
        "alreadyVerified": n - todo.len(),
        "bytesToFetch": need,
        "fetched": fetched,
    }))
}

/// Copies a snapshot file into `dir/name` atomically (the digest is checked by the caller).
fn copy_from_snapshot(src: &Path, dir: &Path, name: &str) -> Result<(), Refusal> {
    let mut input = fs::File::open(src)
        .map_err(|e| Refusal::new("SNAPSHOT_MISSING", format!("{}: {e}", src.display())))?;
    let (tmp, mut f) = create_temp(dir, name)?;
    if let Err(e) = std::io::copy(&mut input, &mut f) {
        let _ = fs::remove_file(&tmp);
        return Err(Refusal::new(
            "WRITE_FAILED",
            format!("{}: {e}", dir.join(name).display()),
        ));
    }
    commit_temp(&tmp, f, &dir.join(name))
}

/// `--pull-image`: the digest-pinned image of the engine's (last) release.
fn pull_image(tree: &SourceTree, a: &Args, out: &Out) -> Result<serde_json::Value, Refusal> {
    let Some(e) = tree
        .catalog
        .engines
        .iter()
        .rev()
        .find(|e| e.engine.as_str() == a.engine)
    else {
        return Err(Refusal::new("UNKNOWN_ENGINE", a.engine.clone()));
    };
    let (Some(image), Some(digest)) = (&e.image, &e.digest) else {
        let note = e.image_note.as_deref().unwrap_or("no registry image");
        out.say(&format!(
            "image: SKIP_NO_PULLABLE_IMAGE {}: {note}",
            a.engine
        ));
        return Ok(serde_json::json!({"action": "skip", "detail": note}));
    };
    let reference = format!("{image}@{digest}");
    if a.dry_run {
        out.say(&format!("image: would pull {reference}"));
        return Ok(serde_json::json!({"action": "would-pull", "reference": reference}));
    }
    let status = std::process::Command::new("docker")
        .args(["pull", &reference])
        .status()
        .map_err(|e| Refusal::new("DOWNLOAD_FAILED", format!("docker pull {reference}: {e}")))?;
    if !status.success() {
        return Err(Refusal::new(
            "DOWNLOAD_FAILED",
            format!("docker pull {reference}: {status}"),
        ));
    }
    out.say(&format!("image: pulled {reference}"));
    Ok(serde_json::json!({"action": "pulled", "reference": reference}))
}

/// Runs `kvexact models install`.
pub fn run(a: &Args) -> Result<Status, Refusal> {
    let tree = SourceTree::load(&a.common.catalog)?;
    if a.list {
        list::print(&tree.catalog, a.common.json);
        return Ok(Status::Ok);
    }
    if !tree
        .catalog
        .engines
        .iter()
        .any(|e| e.engine.as_str() == a.engine)
    {
        return Err(Refusal::new("UNKNOWN_ENGINE", a.engine.clone()));
    }
    let reg = safe_root(&a.registry_dir, "--registry-dir")?;
    let tokdir = safe_root(&a.tokenizer_dir, "--tokenizer-dir")?;
    let weights = a
        .weights_dir
        .as_deref()
        .map(|w| safe_root(w, "--weights-dir"))
        .transpose()?;
    let snapshot = match &a.from_snapshot {
        Some(s) if s.is_dir() => Some(s.clone()),
        Some(s) => {
            return Err(Refusal::new(
                "SNAPSHOT_MISSING",
                format!("{} is not a directory", s.display()),
            ))
        }
        None => None,
    };
    let token_file = a.hf_token_file.clone().or_else(|| {
        std::env::var_os("HF_TOKEN_FILE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let token = token_file.as_deref().map(read_token).transpose()?;
    let picks = select(&tree.catalog, a)?;
    let ctx = Ctx {
        tree: &tree,
        args: a,
        reg,
        tokdir,
        weights,
        snapshot,
        hub: Hub::new(token.clone()),
        work: WorkDir::new()?,
        out: Out {
            json: a.common.json,
        },
    };
    let (mut done, mut skipped) = (0usize, 0usize);
    let mut records = Vec::new();
    for (m, action) in picks {
        let pid = &m.profile_id;
        let t = match action {
            Action::Skip(why) => {
                ctx.out.say(&format!("{pid}: {why}"));
                records
                    .push(serde_json::json!({"profileId": pid, "action": "skip", "detail": why}));
                skipped += 1;
                continue;
            }
            Action::Install(t) => t,
        };
        if m.gated && token.is_none() && !a.dry_run && ctx.snapshot.is_none() {
            let why = format!(
                "SKIP_GATED_NO_TOKEN {} is gated; pass --hf-token-file",
                m.repo
            );
            ctx.out.say(&format!("{pid}: {why}"));
            records.push(serde_json::json!({"profileId": pid, "action": "skip", "detail": why}));
            skipped += 1;
            continue;
        }
        ctx.out.say(&format!(
            "{pid}: {}@{} for {} ({})",
            m.repo,
            rev12(&m.revision),
            a.engine,
            state_str(t.state)
        ));
        records.push(install_one(&ctx, m, t)?);
        done += 1;
    }
    let image = if a.pull_image {
        pull_image(&tree, a, &ctx.out)?
    } else {
        serde_json::Value::Null
    };
    let verb = if a.dry_run {
        "would install"
    } else {
        "installed"
    };
    if a.common.json {
        print_json(&serde_json::json!({
            "ok": true,
            "engine": a.engine,
            "dryRun": a.dry_run,
            "installed": done,
            "skipped": skipped,
            "models": records,
            "image": image,
        }));
    } else {
        println!("{verb} {done} model(s), skipped {skipped}.");
        if done > 0 && !a.dry_run {
            println!("The gateway reads the registry when it starts: restart it to load the staged profiles.");
        }
        if done == 0 && !a.dry_run && !a.pull_image {
            println!("Nothing was installed.");
        }
    }
    Ok(Status::Ok)
}
