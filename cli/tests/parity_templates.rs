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
