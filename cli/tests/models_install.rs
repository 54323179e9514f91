//! `kvexact models install`: staging a registry from a synthetic tree, downloads from a
//! loopback HTTP server (never the internet), resume after a dropped connection, pin-mismatch and
//! unsafe-path refusals, air-gapped snapshots.

use crate::models_common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kvprofile_core::{AttestationCheck, LoadOptions, Registry, StructuralValidator, TrustPolicy};
use models_common::*;

struct Env {
    _tmp: tempfile::TempDir,
    tree: Tree,
    reg: PathBuf,
    tok: PathBuf,
    weights: PathBuf,
    base: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    let tree = Tree::new(&base.join("repo"));
    Env {
        reg: base.join("etc/kvprofiles"),
        tok: base.join("etc/tokenizers"),
        weights: base.join("weights"),
        tree,
        base,
        _tmp: tmp,
    }
}

impl Env {
    fn install(&self, hub: Option<&TestHub>, extra: &[&str]) -> Run {
        let mut c = kvexact();
        c.args(["models", "install", "--catalog"])
            .arg(self.tree.catalog())
            .arg("--registry-dir")
            .arg(&self.reg)
            .arg("--tokenizer-dir")
            .arg(&self.tok)
            .args(extra);
        c.env(
            "HF_ENDPOINT",
            hub.map_or("http://127.0.0.1:9".to_string(), |h| h.url()),
        );
        run(c)
    }

    fn token_file(&self, token: &str, mode: u32) -> PathBuf {
        let p = self.base.join("hf-token");
        fs::write(&p, format!("{token}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        p
    }
}

fn hub_for(t: &Tree) -> HubConfig {
    HubConfig {
        files: t.hub_files(),
        ..Default::default()
    }
}

/// Every file and directory under `root` (relative), sorted.
fn listing(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            out.push(p.strip_prefix(root).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut v = Vec::new();
    if root.exists() {
        walk(root, root, &mut v);
    }
    v.sort();
    v
}

fn assert_modes(root: &Path) {
    for rel in listing(root) {
        let p = root.join(&rel);
        let md = fs::symlink_metadata(&p).unwrap();
        assert!(!md.file_type().is_symlink(), "{rel}");
        let want = if md.is_dir() { 0o755 } else { 0o644 };
        assert_eq!(mode_of(&p), want, "{rel}");
    }
    assert_eq!(mode_of(root), 0o755);
}

#[test]
fn stages_the_registry_and_weights_exactly_as_the_gateway_reads_them() {
    let e = env();
    let hub = TestHub::start(hub_for(&e.tree));
    let w = e.weights.display().to_string();
    let r = e.install(
        Some(&hub),
        &[
            "--models",
            "tiny-a-v1",
            "--include-candidates",
            "--weights-dir",
            &w,
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let a = model_a();
    let tok = sha(&a.tokenizer);
    let tpl = sha(&a.template);
    let mut want = vec![
        "artifacts".to_string(),
        "artifacts/sha256".into(),
        format!("artifacts/sha256/{tok}"),
        format!("artifacts/sha256/{tpl}"),
        "manifests".into(),
        "manifests/tiny-a-v1.yaml".into(),
        "probefixtures".into(),
        "probefixtures/tiny-a-v1".into(),
        "tiny-a-v1.yaml".into(),
    ];
    for sub in ["", "sglang/", "trtllm/"] {
        if !sub.is_empty() {
            want.push(format!(
                "probefixtures/tiny-a-v1/{}",
                sub.trim_end_matches('/')
            ));
        }
        for f in [
            "basic-ascii.expect.json",
            "basic-ascii.request.json",
            "chat-user-only.expect.json",
            "chat-user-only.request.json",
        ] {
            want.push(format!("probefixtures/tiny-a-v1/{sub}{f}"));
        }
    }
    want.sort();
    assert_eq!(listing(&e.reg), want);
    assert_modes(&e.reg);
    assert_modes(&e.tok);
    assert_modes(&e.weights);
    assert_eq!(
        read(&e.reg.join(format!("artifacts/sha256/{tok}"))),
        a.tokenizer
    );
    assert_eq!(
        read(&e.reg.join(format!("artifacts/sha256/{tpl}"))),
        a.template
    );
    assert_eq!(
        read(&e.reg.join("tiny-a-v1.yaml")),
        read(&e.tree.fx().join("profiles/tiny-a-v1.yaml"))
    );
    assert_eq!(
        read(&e.reg.join("manifests/tiny-a-v1.yaml")),
        read(&e.tree.fx().join("manifests/tiny-a-v1.yaml"))
    );
    assert_eq!(
        read(&e.tok.join("org-a__Tiny-A/tokenizer.json")),
        a.tokenizer
    );
    for (n, b, _) in a.snapshot() {
        assert_eq!(
            read(&e.weights.join("org-a__Tiny-A").join(&a.rev).join(&n)),
            b,
            "{n}"
        );
    }
    assert_eq!(
        listing(&e.weights).len(),
        2 + 3,
        "no .part or temp file left: {:?}",
        listing(&e.weights)
    );
    assert!(
        r.stdout
            .contains("tiny-a-v1: org-a/Tiny-A@111111111111 for vllm (candidate)"),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .contains("  tokenizer.json downloaded and verified"));
    assert!(r.stdout.contains("  staged 17 registry files under "));
    assert!(r.stdout.contains("    verified model.safetensors (0.0 GB)"));
    assert!(r.stdout.contains(
        "installed 1 model(s), skipped 0.\nThe gateway reads the registry when it starts"
    ));

    // The gateway's loader (kvprofile-core, the same trust policy) publishes it.
    let opts = LoadOptions {
        policy: TrustPolicy::for_current_user(),
        attestation: AttestationCheck::AtPublish,
    };
    let g = Registry::new()
        .publish(&e.reg, &opts, &StructuralValidator)
        .expect("the staged registry loads");
    assert_eq!(g.number(), 1);

    // A second run needs no download: the tokenizer and every weight already verify.
    let before = hub.seen().len();
    let r = e.install(
        Some(&hub),
        &[
            "--models",
            "tiny-a-v1",
            "--include-candidates",
            "--weights-dir",
            &w,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("already staged and verified"));
    assert!(r
        .stdout
        .contains("weights: 3/3 files already verified, 0.0 GB to download"));
    assert_eq!(hub.seen().len(), before);
    // Requests went to the resolve URLs, without a token.
    assert!(hub.seen().iter().all(|s| s
        .path
        .starts_with("/org-a/Tiny-A/resolve/1111111111111111111111111111111111111111/")
        && s.auth.is_none()));
}

#[test]
fn a_dropped_connection_is_resumed_with_a_range_request() {
    let e = env();
    let a = model_a();
    let path = format!("/org-a/Tiny-A/resolve/{}/model.safetensors", a.rev);
    let mut cfg = hub_for(&e.tree);
    // The first two responses stop after 1 MB and after 1 MB more.
    cfg.drop_after.insert(path.clone(), (1_000_000, 2));
    let hub = TestHub::start(cfg);
    let w = e.weights.display().to_string();
    let r = e.install(
        Some(&hub),
        &[
            "--models",
            "tiny-a-v1",
            "--include-candidates",
            "--weights-dir",
            &w,
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let seen: Vec<Seen> = hub.seen().into_iter().filter(|s| s.path == path).collect();
    let ranges: Vec<Option<String>> = seen.iter().map(|s| s.range.clone()).collect();
    assert_eq!(
        ranges,
        vec![
            None,
            Some("bytes=1000000-".into()),
            Some("bytes=2000000-".into())
        ],
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("resuming at byte 1000000"),
        "{}",
        r.stderr
    );
    let model = a
        .snapshot()
        .into_iter()
        .find(|f| f.0 == "model.safetensors")
        .unwrap()
        .1;
    assert_eq!(
        read(
            &e.weights
                .join("org-a__Tiny-A")
                .join(&a.rev)
                .join("model.safetensors")
        ),
        model
    );
}

#[test]
fn a_partial_file_from_an_earlier_run_is_resumed() {
    let e = env();
    let a = model_a();
    let path = format!("/org-a/Tiny-A/resolve/{}/model.safetensors", a.rev);
    let mut cfg = hub_for(&e.tree);
    cfg.drop_after.insert(path.clone(), (700_000, 100));
    let hub = TestHub::start(cfg);
    let w = e.weights.display().to_string();
    let args = [
        "--models",
        "tiny-a-v1",
        "--include-candidates",
        "--weights-dir",
        &w,
    ];
    let r = e.install(Some(&hub), &args);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("REFUSED DOWNLOAD_FAILED: "),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("rerun to resume"));
    let part = e
        .weights
        .join("org-a__Tiny-A")
        .join(&a.rev)
        .join("model.safetensors.part");
    assert_eq!(fs::metadata(&part).unwrap().len(), 4 * 700_000);
    drop(hub);
    // The network is back: the next run sends one Range request for the rest.
    let hub = TestHub::start(hub_for(&e.tree));
    let r = e.install(Some(&hub), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen: Vec<Seen> = hub.seen().into_iter().filter(|s| s.path == path).collect();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].range.as_deref(), Some("bytes=2800000-"));
    assert_eq!(seen[0].status, 206);
    assert!(!part.exists());
}

#[test]
fn pin_mismatches_are_refused_before_anything_is_staged() {
    let e = env();
    let a = model_a();
    // The hub serves a different tokenizer.
    let mut cfg = hub_for(&e.tree);
    cfg.files.insert(
        format!("/org-a/Tiny-A/resolve/{}/tokenizer.json", a.rev),
        b"{\"tampered\": true}".to_vec(),
    );
    let hub = TestHub::start(cfg);
    let r = e.install(
        Some(&hub),
        &["--models", "tiny-a-v1", "--include-candidates"],
    );
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stderr.starts_with(
            "REFUSED TOKENIZER_SHA_MISMATCH: tiny-a-v1: downloaded tokenizer.json hashes to "
        ),
        "{}",
        r.stderr
    );
    assert!(listing(&e.reg).is_empty(), "{:?}", listing(&e.reg));
    assert!(listing(&e.tok).is_empty());
    drop(hub);

    let hub = TestHub::start(hub_for(&e.tree));
    let fx = e.tree.fx();
    let cases: Vec<(PathBuf, &str, &str, &str)> = vec![
        (
            fx.join(format!("templates/{}/chat_template.jinja", a.slug())),
            "assistant",
            "Assistant",
            "REFUSED TEMPLATE_SHA_MISMATCH: ",
        ),
        (
            fx.join("profiles/tiny-a-v1.yaml"),
            "tokenizerRevision: 1111",
            "tokenizerRevision: 3111",
            "REFUSED PROFILE_DRIFT: ",
        ),
        (
            fx.join("profiles/tiny-a-v1.yaml"),
            "supportedApis:",
            "kvBlockSize: 16\nsupportedApis:",
            "REFUSED PROFILE_DRIFT: ",
        ),
        (
            fx.join("manifests/tiny-a-v1.yaml"),
            "\"0.28.0\"",
            "\"0.28.1\"",
            "REFUSED PROFILE_DRIFT: ",
        ),
        (
            fx.join("manifests/tiny-a-v1.yaml"),
            VLLM_DIGEST,
            SGLANG_DIGEST,
            "REFUSED PROFILE_DRIFT: ",
        ),
        (
            e.tree.root.join("scripts/models/weights/tiny-a-v1.index"),
            " config.json",
            " config.jsn",
            "REFUSED INDEX_SHA_MISMATCH: ",
        ),
    ];
    for (file, from, to, want) in cases {
        let orig = fs::read_to_string(&file).unwrap();
        fs::write(&file, orig.replacen(from, to, 1)).unwrap();
        let r = e.install(
            Some(&hub),
            &["--models", "tiny-a-v1", "--include-candidates"],
        );
        assert_eq!(r.code, 2, "{want}");
        assert!(r.stderr.starts_with(want), "{want}: {}", r.stderr);
        assert!(listing(&e.reg).is_empty());
        fs::write(&file, orig).unwrap();
    }
    fs::remove_file(fx.join("manifests/tiny-a-v1.yaml")).unwrap();
    let r = e.install(
        Some(&hub),
        &["--models", "tiny-a-v1", "--include-candidates"],
    );
    assert!(
        r.stderr.starts_with("REFUSED COMMITTED_FILE: "),
        "{}",
        r.stderr
    );
}

#[test]
fn a_weight_that_does_not_verify_is_kept_as_rejected() {
    let e = env();
    let a = model_a();
    let mut cfg = hub_for(&e.tree);
    let p = format!("/org-a/Tiny-A/resolve/{}/config.json", a.rev);
    let mut bad = cfg.files[&p].clone();
    bad[0] ^= 1;
    cfg.files.insert(p, bad);
    let hub = TestHub::start(cfg);
    let w = e.weights.display().to_string();
    let r = e.install(
        Some(&hub),
        &[
            "--models",
            "tiny-a-v1",
            "--include-candidates",
            "--weights-dir",
            &w,
        ],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("REFUSED WEIGHT_SHA_MISMATCH: tiny-a-v1: config.json"),
        "{}",
        r.stderr
    );
    let dir = e.weights.join("org-a__Tiny-A").join(&a.rev);
    assert!(dir.join("config.json.rejected").exists());
    assert!(!dir.join("config.json").exists());
}

#[test]
fn selection_skips_with_a_typed_reason() {
    let e = env();
    let hub = TestHub::start(hub_for(&e.tree));
    // Candidates need the opt-in.
    let r = e.install(Some(&hub), &[]);
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stdout,
        "tiny-a-v1: SKIP_CANDIDATE not supported; --include-candidates opts in\n\
         tiny-g-v1: SKIP_CANDIDATE not supported; --include-candidates opts in\n\
         installed 0 model(s), skipped 2.\nNothing was installed.\n"
    );
    // Blocked rows and models without a row.
    let r = e.install(Some(&hub), &["--engine", "sglang", "--include-candidates"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout
            .contains("tiny-a-v1: SKIP_BLOCKED architecture_unsupported: no `TinyForCausalLM`.\n"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("tiny-g-v1: SKIP_NO_ROW no sglang row\n"));
    // Gated without a token.
    let r = e.install(
        Some(&hub),
        &["--models", "tiny-g-v1", "--include-candidates"],
    );
    assert!(
        r.stdout.starts_with(
            "tiny-g-v1: SKIP_GATED_NO_TOKEN org-g/Tiny-G is gated; pass --hf-token-file\n"
        ),
        "{}",
        r.stdout
    );
    assert!(listing(&e.reg).is_empty());
    assert!(hub.seen().is_empty());
    for (args, want) in [
        (
            vec!["--models", "nope-v1"],
            "REFUSED UNKNOWN_MODEL: nope-v1",
        ),
        (
            vec!["--engine", "llamacpp"],
            "REFUSED UNKNOWN_ENGINE: llamacpp",
        ),
    ] {
        let r = e.install(Some(&hub), &args);
        assert_eq!(r.code, 2);
        assert!(r.stderr.starts_with(want), "{}", r.stderr);
    }
}

#[test]
fn gated_models_send_the_token_only_as_a_bearer_header() {
    let e = env();
    let mut cfg = hub_for(&e.tree);
    cfg.token = Some("hf_secret".into());
    let hub = TestHub::start(cfg);
    let loose = e.token_file("hf_secret", 0o640);
    let r = e.install(
        Some(&hub),
        &[
            "--models",
            "tiny-g-v1",
            "--include-candidates",
            "--hf-token-file",
            loose.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("REFUSED TOKEN_FILE_MODE: "),
        "{}",
        r.stderr
    );
    let empty = e.token_file("  ", 0o600);
    let r = e.install(
        Some(&hub),
        &[
            "--models",
            "tiny-g-v1",
            "--include-candidates",
            "--hf-token-file",
            empty.to_str().unwrap(),
        ],
    );
    assert!(
        r.stderr.starts_with("REFUSED TOKEN_FILE_EMPTY: "),
        "{}",
        r.stderr
    );
    let wrong = e.token_file("hf_other", 0o600);
    let r = e.install(
        Some(&hub),
        &[
            "--models",
            "tiny-g-v1",
            "--include-candidates",
            "--hf-token-file",
            wrong.to_str().unwrap(),
        ],
    );
    assert!(
        r.stderr
            .starts_with("REFUSED DOWNLOAD_DENIED: HTTP 401 for "),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("hf_other"));
    // The token file may also come from HF_TOKEN_FILE.
    let good = e.token_file("hf_secret", 0o600);
    let mut c = kvexact();
    c.args([
        "models",
        "install",
        "--models",
        "tiny-g-v1",
        "--include-candidates",
        "--catalog",
    ])
    .arg(e.tree.catalog())
    .arg("--registry-dir")
    .arg(&e.reg)
    .arg("--tokenizer-dir")
    .arg(&e.tok)
    .env("HF_ENDPOINT", format!("{}/", hub.url()))
    .env("HF_TOKEN_FILE", &good);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("hf_secret") && !r.stderr.contains("hf_secret"));
    assert!(hub
        .seen()
        .iter()
        .any(|s| s.status == 200 && s.auth.as_deref() == Some("Bearer hf_secret")));
    assert_eq!(
        read(&e.tok.join("org-g__Tiny-G/tokenizer.json")),
        model_g().tokenizer
    );
}

#[test]
fn forbidden_downloads_are_denied() {
    let e = env();
    let a = model_a();
    let mut cfg = hub_for(&e.tree);
    cfg.forbidden
        .push(format!("/org-a/Tiny-A/resolve/{}/tokenizer.json", a.rev));
    let hub = TestHub::start(cfg);
    let r = e.install(
        Some(&hub),
        &["--models", "tiny-a-v1", "--include-candidates"],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("REFUSED DOWNLOAD_DENIED: HTTP 403 for "),
        "{}",
        r.stderr
    );
    let r = e.install(None, &["--models", "tiny-a-v1", "--include-candidates"]);
    assert!(
        r.stderr.starts_with("REFUSED DOWNLOAD_FAILED: "),
        "{}",
        r.stderr
    );
}

#[test]
fn symlinks_and_relative_roots_are_refused() {
    let e = env();
    let hub = TestHub::start(hub_for(&e.tree));
    let elsewhere = e.base.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::create_dir_all(&e.reg).unwrap();
    std::os::unix::fs::symlink(&elsewhere, e.reg.join("manifests")).unwrap();
    let r = e.install(
        Some(&hub),
        &["--models", "tiny-a-v1", "--include-candidates"],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("REFUSED UNSAFE_PATH: "),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("manifests is a symlink"));
    assert!(listing(&elsewhere).is_empty());
    assert_eq!(listing(&e.reg), vec!["manifests"]);
    fs::remove_file(e.reg.join("manifests")).unwrap();

    // A symlinked root.
    let link = e.base.join("reglink");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let mut c = kvexact();
    c.args([
        "models",
        "install",
        "--models",
        "tiny-a-v1",
        "--include-candidates",
        "--catalog",
    ])
    .arg(e.tree.catalog())
    .arg("--registry-dir")
    .arg(&link)
    .arg("--tokenizer-dir")
    .arg(&e.tok)
    .env("HF_ENDPOINT", hub.url());
    let r = run(c);
    assert!(
        r.stderr.starts_with("REFUSED UNSAFE_PATH: "),
        "{}",
        r.stderr
    );
    assert!(listing(&elsewhere).is_empty());

    for dir in ["relative/registry", "/abs/../escape"] {
        let mut c = kvexact();
        c.args(["models", "install", "--catalog"])
            .arg(e.tree.catalog())
            .args(["--registry-dir", dir]);
        let r = run(c);
        assert_eq!(r.code, 2);
        assert!(
            r.stderr.starts_with("REFUSED UNSAFE_PATH: --registry-dir"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn dry_run_writes_and_downloads_nothing() {
    let e = env();
    let hub = TestHub::start(hub_for(&e.tree));
    let w = e.weights.display().to_string();
    let r = e.install(
        Some(&hub),
        &["--dry-run", "--include-candidates", "--weights-dir", &w],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "  would download {}/org-a/Tiny-A/resolve/",
            hub.url()
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("  would stage 17 registry files under "));
    assert!(r
        .stdout
        .contains("  weights: 0/3 files already verified, 0.0 GB to download into "));
    assert!(
        r.stdout.ends_with("would install 2 model(s), skipped 0.\n"),
        "{}",
        r.stdout
    );
    assert!(hub.seen().is_empty());
    assert!(!e.reg.exists() && !e.tok.exists() && !e.weights.exists());

    let r = e.install(Some(&hub), &["--dry-run", "--pull-image"]);
    assert!(
        r.stdout.contains(&format!(
            "image: would pull vllm/vllm-openai@{VLLM_DIGEST}\n"
        )),
        "{}",
        r.stdout
    );
    let r = e.install(
        Some(&hub),
        &["--dry-run", "--pull-image", "--engine", "trtllm"],
    );
    assert!(
        r.stdout
            .contains("image: SKIP_NO_PULLABLE_IMAGE trtllm: locally built\n"),
        "{}",
        r.stdout
    );

    let r = e.install(Some(&hub), &["--dry-run", "--include-candidates", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["dryRun"], true);
    assert_eq!(v["installed"], 2);
    assert_eq!(v["models"][0]["action"], "would-install");
    assert_eq!(v["models"][0]["staged"].as_array().unwrap().len(), 17);
}

#[test]
fn an_air_gapped_host_installs_from_a_snapshot_and_dropped_fixtures_disappear() {
    let e = env();
    let snap = e.base.join("snapshot");
    e.tree.write_snapshot(&snap);
    let w = e.weights.display().to_string();
    let s = snap.display().to_string();
    // No hub at all (HF_ENDPOINT points at a closed port); a gated model needs no token here.
    let r = e.install(
        None,
        &[
            "--include-candidates",
            "--from-snapshot",
            &s,
            "--weights-dir",
            &w,
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r
        .stdout
        .contains("tokenizer.json taken from the snapshot and verified"));
    assert!(r.stdout.contains("installed 2 model(s), skipped 0."));
    let g = model_g();
    assert_eq!(
        read(&e.weights.join(g.slug()).join(&g.rev).join("config.json")),
        g.files[0].1
    );
    assert_modes(&e.weights);

    // A fixture dropped from the committed set disappears from the registry on re-install.
    fs::remove_file(
        e.tree
            .fx()
            .join("probefixtures/tiny-a-v1/sglang/basic-ascii.expect.json"),
    )
    .unwrap();
    let r = e.install(
        None,
        &[
            "--include-candidates",
            "--from-snapshot",
            &s,
            "--models",
            "tiny-a-v1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!e
        .reg
        .join("probefixtures/tiny-a-v1/sglang/basic-ascii.expect.json")
        .exists());
    assert!(e
        .reg
        .join("probefixtures/tiny-a-v1/sglang/basic-ascii.request.json")
        .exists());

    // A snapshot with a wrong tokenizer is refused; one without it names the file.
    let a = model_a();
    fs::remove_dir_all(&e.reg).unwrap();
    let tokp = snap.join(a.slug()).join(&a.rev).join("tokenizer.json");
    fs::write(&tokp, b"{}").unwrap();
    let r = e.install(
        None,
        &[
            "--include-candidates",
            "--from-snapshot",
            &s,
            "--models",
            "tiny-a-v1",
        ],
    );
    assert!(
        r.stderr
            .starts_with("REFUSED TOKENIZER_SHA_MISMATCH: tiny-a-v1: snapshot tokenizer.json"),
        "{}",
        r.stderr
    );
    fs::remove_file(&tokp).unwrap();
    let r = e.install(
        None,
        &[
            "--include-candidates",
            "--from-snapshot",
            &s,
            "--models",
            "tiny-a-v1",
        ],
    );
    assert!(
        r.stderr.starts_with("REFUSED SNAPSHOT_MISSING: "),
        "{}",
        r.stderr
    );
}

/// The loader vectors of google/gemma-2-9b-it: (text, the engine's ids under transformers 5).
fn gemma_cases() -> Vec<(String, Vec<u32>)> {
    let doc: serde_json::Value = serde_json::from_slice(&read(
        &testdata().join("vectors/loader/gemma2-9b-it-added-tokens.json"),
    ))
    .unwrap();
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let ids = c["ids"]["tf5"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            (c["text"].as_str().unwrap().to_string(), ids)
        })
        .collect()
}

/// A synthetic tree whose one model is google/gemma-2-9b-it with its real tokenizer.json,
/// tokenizer_config.json and chat template (`testdata/models/google__gemma-2-9b-it`; the
/// revision is made up), pinned as a catalog pins them.
fn gemma_tree(root: &Path) -> (Tree, Vec<u8>) {
    let dir = testdata().join("models/google__gemma-2-9b-it");
    let cfg = read(&dir.join("tokenizer_config.json"));
    let m = Model {
        id: "gemma2-9b-it-v1",
        repo: "google/gemma-2-9b-it",
        rev: "3".repeat(40),
        gated: false,
        tokenizer: read(&dir.join("tokenizer.json")),
        template: read(&dir.join("chat_template.hf.jinja")),
        files: vec![
            (
                "config.json".into(),
                br#"{"model_type":"gemma2"}"#.to_vec(),
                false,
            ),
            ("tokenizer_config.json".into(), cfg.clone(), false),
        ],
        config_decl: Some(sha(&cfg)),
    };
    let t = Tree::with_models(root, vec![m.clone()]);
    // The committed profile as the gateway's generator writes it (tokenizer.json alone).
    let profile = format!(
        "profileId: {id}\nbaseModel: {repo}\nmodelType: gemma2\ntokenizerRevision: {rev}\n\
         tokenizerArtifact: sha256/{tok}\ntokenizerSha256: {tok}\ntemplateArtifact: sha256/{tpl}\n\
         templateSha256: {tpl}\ntemplateContentFormat: string\nrenderPolicy:\n  addGenerationPrompt: true\n\
         \x20 bosToken: \"<bos>\"\n  eosToken: \"<eos>\"\nsupportedApis:\n  - completions\n  - chat\n\
         aliasPolicy: base_model_only\n",
        id = m.id,
        repo = m.repo,
        rev = m.rev,
        tok = sha(&m.tokenizer),
        tpl = sha(&m.template)
    );
    write(
        &t.fx().join("profiles/gemma2-9b-it-v1.yaml"),
        profile.as_bytes(),
    );
    (t, cfg)
}

fn publish(reg: &Path) -> std::sync::Arc<kvprofile_core::Generation> {
    Registry::new()
        .publish(
            reg,
            &LoadOptions {
                policy: TrustPolicy::for_current_user(),
                attestation: AttestationCheck::AtPublish,
            },
            &kvtemplate::KvtemplateValidator,
        )
        .unwrap_or_else(|e| panic!("{} {e}", e.code()))
}

/// Completions-encodes every loader case under `release`: (exact, ambiguous_added_token
/// refusals); any other outcome or other ids fail.
fn encode_cases(
    g: &kvprofile_core::Generation,
    engine: kvprobe::Engine,
    version: &str,
    cases: &[(String, Vec<u32>)],
) -> (usize, usize) {
    let c = kvprobe::contract::resolve(engine, version).unwrap();
    let enc = kvprobe::bridge::encoder(g.profile("gemma2-9b-it-v1").unwrap(), &c).unwrap();
    let (mut exact, mut refused) = (0, 0);
    let mut out = vec![0u32; 1 << 14];
    for (text, want) in cases {
        match enc.encode_completions(text, &mut out).unwrap() {
            kvtemplate::Outcome::Done(e) => {
                // vLLM and SGLang encode a completions prompt with the BOS (<bos> = 2) first.
                let got = &out[..e.written];
                assert_eq!(got.first(), Some(&2), "{version} {text:?}");
                assert_eq!(&got[1..], &want[..], "{version} {text:?}: other ids");
                exact += 1;
            }
            kvtemplate::Outcome::Refused(r) => {
                assert_eq!(r, kvtemplate::Refusal::AmbiguousAddedToken, "{text:?}");
                refused += 1;
            }
        }
    }
    (exact, refused)
}

#[test]
fn gemma2_is_installed_with_its_config_pinned_and_gives_the_engines_ids_instead_of_refusing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let (tree, cfg) = gemma_tree(&base.join("repo"));
    let (reg, tok) = (base.join("etc/kvprofiles"), base.join("etc/tokenizers"));
    let hub = TestHub::start(HubConfig {
        files: tree.hub_files(),
        ..Default::default()
    });
    let mut c = kvexact();
    c.args([
        "models",
        "install",
        "--include-candidates",
        "--json",
        "--catalog",
    ])
    .arg(tree.catalog())
    .arg("--registry-dir")
    .arg(&reg)
    .arg("--tokenizer-dir")
    .arg(&tok)
    .env("HF_ENDPOINT", hub.url());
    let r = run(c);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let cfg_sha = sha(&cfg);
    assert_eq!(
        cfg_sha,
        "ee86abd85a5ddbbf0801ba60c8589953adf81f950fe140f31c2285f750dc8264"
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["models"][0]["tokenizerConfigSha256"], cfg_sha.as_str());
    assert_eq!(v["models"][0]["staged"].as_array().unwrap().len(), 19);
    assert_eq!(
        read(&reg.join("artifacts/sha256").join(&cfg_sha)),
        cfg,
        "the config artifact"
    );
    assert_eq!(
        read(&tok.join("google__gemma-2-9b-it/tokenizer_config.json")),
        cfg
    );
    assert!(hub.seen().iter().any(|s| s
        .path
        .ends_with("/resolve/3333333333333333333333333333333333333333/tokenizer_config.json")
        && s.status == 200));
    let staged = String::from_utf8(read(&reg.join("gemma2-9b-it-v1.yaml"))).unwrap();
    assert!(
        staged.contains(&format!(
            "tokenizerConfigArtifact: sha256/{cfg_sha}\ntokenizerConfigSha256: {cfg_sha}\n"
        )),
        "{staged}"
    );

    // The staged registry publishes under the trust policy, and the catalog's engine
    // (vLLM 0.28.0, transformers 5) and SGLang 0.5.18 encode every text of the loader corpus
    // (122 with tab runs, 126 with newlines) with the engine's ids, never refusing.
    let cases = gemma_cases();
    assert_eq!(cases.len(), 999);
    assert_eq!(cases.iter().filter(|c| c.0.contains('\t')).count(), 122);
    assert_eq!(cases.iter().filter(|c| c.0.contains('\n')).count(), 126);
    let g = publish(&reg);
    for (engine, version) in [
        (kvprobe::Engine::Vllm, "0.28.0"),
        (kvprobe::Engine::Sglang, "0.5.18"),
    ] {
        assert_eq!(
            encode_cases(&g, engine, version, &cases),
            (999, 0),
            "{version}"
        );
    }

    // The operator's check loads it with no loader-ambiguity warning.
    let mut c = kvexact();
    c.args(["registry", "verify"]).arg(&reg);
    let r = run(c);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("gemma2-9b-it-v1"), "{}", r.stdout);
    assert!(!r.stdout.contains("WARNING"), "{}", r.stdout);

    // The same profile without the pin (the gateway's format, what the installer staged before)
    // refuses the texts it cannot know: the test above can fail.
    let gateway: String = staged
        .lines()
        .filter(|l| !l.starts_with("tokenizerConfig"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(gateway, staged);
    fs::write(reg.join("gemma2-9b-it-v1.yaml"), gateway).unwrap();
    let g = publish(&reg);
    let (exact, refused) = encode_cases(&g, kvprobe::Engine::Vllm, "0.28.0", &cases);
    eprintln!("gateway format on vLLM 0.28.0: {exact} exact, {refused} refused");
    assert_eq!(exact + refused, 999);
    assert!(refused > 0, "{refused}");
    let mut c = kvexact();
    c.args(["registry", "verify"]).arg(&reg);
    let r = run(c);
    assert!(
        r.stdout
            .contains("WARNING gemma2-9b-it-v1: no tokenizerConfigArtifact"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_gemma2_config_that_differs_from_its_pin_is_refused_with_nothing_staged() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let (tree, cfg) = gemma_tree(&base.join("repo"));
    let (reg, tok) = (base.join("etc/kvprofiles"), base.join("etc/tokenizers"));
    // The hub serves the config with one byte changed (same size): e.g. a newer revision's
    // added tokens.
    let mut files = tree.hub_files();
    let path = format!(
        "/google/gemma-2-9b-it/resolve/{}/tokenizer_config.json",
        "3".repeat(40)
    );
    let mut other = cfg.clone();
    let at = other.len() / 2;
    other[at] ^= 0x01;
    files.insert(path, other);
    let hub = TestHub::start(HubConfig {
        files,
        ..Default::default()
    });
    let mut c = kvexact();
    c.args(["models", "install", "--include-candidates", "--catalog"])
        .arg(tree.catalog())
        .arg("--registry-dir")
        .arg(&reg)
        .arg("--tokenizer-dir")
        .arg(&tok)
        .env("HF_ENDPOINT", hub.url());
    let r = run(c);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stderr.starts_with(
            "REFUSED TOKENIZER_CONFIG_SHA_MISMATCH: gemma2-9b-it-v1: downloaded tokenizer_config.json has gitblob "
        ),
        "{}",
        r.stderr
    );
    assert!(listing(&reg).is_empty(), "{:?}", listing(&reg));
    assert!(listing(&tok).is_empty(), "{:?}", listing(&tok));
}
