//! `kvexact parity` over every template vector file and the gateway's template fixtures.

use std::path::Path;
use std::process::Command;

fn testdata() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata"))
}

#[test]
fn all_template_vectors_pass() {
    let td = testdata();
    let mut files: Vec<_> = std::fs::read_dir(td.join("vectors/templates"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    assert_eq!(files.len(), 6, "{files:?}");
    files.push(td.join("vectors/gateway/kv_chat_template_parity.json"));
    files.push(td.join("vectors/gateway/kv_special_token_parity.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .arg("parity")
        .arg("--models")
        .arg(td.join("models"))
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.ends_with(" 0 failed"), "{stdout}");
    let passed: usize = last
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // 241 template cases (39+39+42+41+41+39) + 3 gateway chat cases + 1 special-token case.
    assert_eq!(passed, 245, "{stdout}");
    assert!(stdout.contains("render-only"), "{stdout}");
}

#[test]
fn template_vectors_need_models() {
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .arg("parity")
        .arg(testdata().join("vectors/gateway/kv_special_token_parity.json"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--models"));
}

#[test]
fn lifted_parity_sends_chat_cases_through_the_strict_encoder() {
    let td = testdata();
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(["parity", "--lifted", "--models"])
        .arg(td.join("models"))
        .arg(td.join("vectors/templates/qwen3-06b-default-v1.json"))
        .arg(td.join("vectors/versions/sglang-0.5.23/templates/qwen3-06b-default-v1.json"))
        .arg(td.join("vectors/gateway/kv_chat_template_parity.json"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // 34 chat cases per Qwen3 file (completion cases are not requests a lift concerns), and
    // the 3 gateway chat cases checked as without --lifted.
    assert_eq!(
        stdout.lines().last(),
        Some("71 passed, 0 failed"),
        "{stdout}"
    );
    for line in [
        "lifted vllm 0.31.0: 34 chat cases",
        "lifted sglang 0.5.19: 34 chat cases",
        "lifted trtllm 1.3.0rc29: 34 chat cases",
        "lifted sglang 0.5.23: 34 chat cases",
    ] {
        assert!(stdout.contains(line), "{line}:\n{stdout}");
    }
}
