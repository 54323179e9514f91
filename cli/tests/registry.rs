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
