//! `kvexact registry verify|show` run as a binary against testdata/registry.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn testdata() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata"))
}

fn kvexact(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(args)
        .output()
        .unwrap()
}

fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    fs::set_permissions(dst, fs::Permissions::from_mode(0o755)).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).unwrap();
            fs::set_permissions(&to, fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

fn sample() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    copy_tree(&testdata().join("registry"), &root);
    (tmp, root)
}

fn library_digest(root: &Path) -> String {
    let o = kvprofile_core::LoadOptions {
        policy: kvprofile_core::TrustPolicy::for_current_user(),
        attestation: kvprofile_core::AttestationCheck::AtPublish,
    };
    kvprofile_core::Generation::load(root, 1, &o, &kvprofile_core::StructuralValidator)
        .unwrap()
        .set_digest()
        .to_string()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn verify_prints_profiles_and_set_digest() {
    let (_tmp, root) = sample();
    let out = kvexact(&["registry", "verify", root.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("validator: kvtemplate"),
        "says which validator ran"
    );
    assert!(
        stdout.contains("qwen3-06b-default-v1\n  baseModel: Qwen/Qwen3-0.6B"),
        "{stdout}"
    );
    assert!(stdout.contains("qwen25-7b-instruct-v1"));
    assert!(stdout.contains("fixtures: vllm 8, sglang 7, trtllm 8"));
    let last = stdout.lines().last().unwrap();
    assert_eq!(last, format!("setDigest: {}", library_digest(&root)));
}

#[test]
fn verify_json_is_the_discovery_document() {
    let (_tmp, root) = sample();
    let out = kvexact(&["registry", "verify", root.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["registryGeneration"], 1);
    assert_eq!(v["setDigest"], library_digest(&root));
    let ids: Vec<_> = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["profileId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["qwen25-7b-instruct-v1", "qwen3-06b-default-v1"]);
    assert_eq!(v["profiles"][1]["gen"], 1);
    assert!(
        !text(&out.stdout).contains("artifacts/"),
        "no locators in discovery"
    );
}

#[test]
fn verify_refusals_name_the_file_and_exit_2() {
    let (_tmp, root) = sample();
    let doc = root.join("qwen3-06b-default-v1.yaml");
    fs::set_permissions(&doc, fs::Permissions::from_mode(0o664)).unwrap();
    let out = kvexact(&["registry", "verify", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "REFUSED INSECURE_MODE: qwen3-06b-default-v1.yaml: mode 0664 exceeds 0644"
    );
    fs::set_permissions(&doc, fs::Permissions::from_mode(0o644)).unwrap();

    // A tampered fixture request (fixture drift).
    let req = root.join("probefixtures/qwen25-7b-instruct-v1/sglang/basic-ascii.request.json");
    fs::write(
        &req,
        b"{\"model\": \"Qwen/Qwen2.5-7B-Instruct\", \"prompt\": \"x\"}",
    )
    .unwrap();
    let out = kvexact(&["registry", "verify", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("REFUSED PROBE_FIXTURE_DRIFT: probefixtures/qwen25-7b-instruct-v1/sglang/basic-ascii.request.json: request drift"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let out = kvexact(&["registry", "verify", root.join("nope").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("REFUSED ROOT_MISSING: "));
}

#[test]
fn trusted_uid_option() {
    let (_tmp, root) = sample();
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    let other = euid.wrapping_add(4242).to_string();
    let out = kvexact(&[
        "registry",
        "verify",
        root.to_str().unwrap(),
        "--trusted-uid",
        &other,
    ]);
    if euid == 0 {
        // Root-owned files are always trusted.
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    } else {
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).starts_with("REFUSED FOREIGN_OWNER: .: owned by uid"));
    }
    let me = euid.to_string();
    let out = kvexact(&[
        "registry",
        "verify",
        root.to_str().unwrap(),
        "--trusted-uid",
        &me,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn show_prints_the_profile_with_artifact_digests_and_sizes() {
    let (_tmp, root) = sample();
    let out = kvexact(&[
        "registry",
        "show",
        root.to_str().unwrap(),
        "qwen3-06b-default-v1",
    ]);
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(s.contains("profileId: qwen3-06b-default-v1"), "{s}");
    assert!(s.contains("sha256: aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"));
    assert!(s.contains("size: 11422654"));
    let out = kvexact(&[
        "registry",
        "show",
        root.to_str().unwrap(),
        "qwen25-7b-instruct-v1",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["profile"]["allowedAliases"][0], "qwen2.5-7b-instruct");
    assert_eq!(v["artifacts"][0]["size"], 7031645);
    assert_eq!(v["artifacts"][1]["role"], "template");
    let out = kvexact(&["registry", "show", root.to_str().unwrap(), "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("REFUSED UNKNOWN_PROFILE: nope:"));
}

#[test]
fn checked_in_registry_verifies_in_place() {
    let root = testdata().join("registry");
    let out = kvexact(&["registry", "verify", root.to_str().unwrap()]);
    let err = text(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(text(&out.stdout).contains("setDigest: ")),
        // A checkout made with a group-writable umask or by another user is refused for it.
        _ => assert!(
            err.starts_with("REFUSED WRITABLE_DIRECTORY")
                || err.starts_with("REFUSED INSECURE_MODE")
                || err.starts_with("REFUSED FOREIGN_OWNER"),
            "{err}"
        ),
    }
}

/// Adds a gemma-2 profile in the gateway's format (tokenizer.json alone, or with its
/// tokenizer_config.json pinned) to the sample registry at `root`.
fn add_gemma(root: &Path, with_config: bool) {
    use sha2::{Digest, Sha256};
    let gemma = testdata().join("models/google__gemma-2-9b-it");
    let put = |rel: &str| -> String {
        let bytes = fs::read(gemma.join(rel)).unwrap();
        let sha = hex::encode(Sha256::digest(&bytes));
        let p = root.join("artifacts/sha256").join(&sha);
        fs::write(&p, &bytes).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        sha
    };
    let (tok, tpl) = (put("tokenizer.json"), put("chat_template.hf.jinja"));
    let mut doc = format!(
        "profileId: gemma2-9b-it-v1\nbaseModel: google/gemma-2-9b-it\nmodelType: gemma2\n\
         tokenizerArtifact: sha256/{tok}\ntokenizerSha256: {tok}\n"
    );
    if with_config {
        let cfg = put("tokenizer_config.json");
        doc.push_str(&format!(
            "tokenizerConfigArtifact: sha256/{cfg}\ntokenizerConfigSha256: {cfg}\n"
        ));
    }
    doc.push_str(&format!(
        "templateArtifact: sha256/{tpl}\ntemplateSha256: {tpl}\ntemplateContentFormat: string\n\
         renderPolicy:\n  addGenerationPrompt: true\n  bosToken: \"<bos>\"\n  eosToken: \"<eos>\"\n\
         supportedApis:\n  - completions\n  - chat\naliasPolicy: base_model_only\n"
    ));
    let p = root.join("gemma2-9b-it-v1.yaml");
    fs::write(&p, doc).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn verify_warns_about_a_profile_whose_loader_ambiguity_is_refused() {
    let (_tmp, root) = sample();
    add_gemma(&root, false);
    let out = kvexact(&["registry", "verify", root.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let warning = stdout
        .lines()
        .find(|l| l.contains("WARNING gemma2-9b-it-v1: no tokenizerConfigArtifact"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(warning.contains("ambiguous_added_token"), "{warning}");
    assert!(warning.contains("pin tokenizerConfigArtifact"), "{warning}");
    // The Qwen profiles pin no config either, but every added token of theirs is special or
    // outside the model's vocabulary: kept by every loader, no warning.
    assert_eq!(stdout.matches("WARNING").count(), 1, "{stdout}");
    // With the config pinned: no warning.
    let (_tmp2, root2) = sample();
    add_gemma(&root2, true);
    let out = kvexact(&["registry", "verify", root2.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("gemma2-9b-it-v1"), "{stdout}");
    assert!(!stdout.contains("WARNING"), "{stdout}");
}
