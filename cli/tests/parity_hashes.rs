//! `kvexact parity` on the block-hash vector files: the testdata copies pass; a tampered
//! copy fails with exit 1 and a failure line naming the case and block.

use std::path::PathBuf;
use std::process::Command;

fn vectors(rel: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors")).join(rel)
}

const FILES: [&str; 7] = [
    "vllm/block_hashes.json",
    "vllm/block_hashes_sha256.json",
    "vllm/block_hashes_xxhash.json",
    "vllm/block_hashes_xxhash_cbor.json",
    "sglang/block_hashes.json",
    "trtllm/block_hashes.json",
    "gateway/kv_hash_vectors.json",
];

#[test]
fn all_block_hash_vectors_pass() {
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .arg("parity")
        .args(FILES.iter().map(|f| vectors(f)))
        .output()
        .expect("run kvexact");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.ends_with(" 0 failed"), "{stdout}");
    let passed: usize = last
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // 42 + 42 + 41 + 41 + 37 + 42 vector cases plus the gateway fixtures.
    assert!(passed >= 245 + 16, "{stdout}");
    assert!(out.status.success(), "{stdout}");
}

fn tampered(rel: &str, from: &str, to: &str, name: &str) -> (std::process::Output, PathBuf) {
    let text = std::fs::read_to_string(vectors(rel)).expect("read");
    assert!(text.contains(from));
    let dir = std::env::temp_dir().join(format!("kvexact-parity-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("tampered.json");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .arg("parity")
        .arg(&path)
        .output()
        .expect("run kvexact");
    (out, dir)
}

#[test]
fn tampered_vllm_digest_fails() {
    // Block 0 of plain_len16_bs16_seed0 (spec docs/contracts/vllm.md §9), last hex digit changed.
    let (out, dir) = tampered(
        "vllm/block_hashes.json",
        "f9d53502c97d3d332a59b5140280a0524bcbbcb9c3fa4814c8276235dc1ec349",
        "f9d53502c97d3d332a59b5140280a0524bcbbcb9c3fa4814c8276235dc1ec348",
        "vllm",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL")
            && stdout.contains("plain_len16_bs16_seed0")
            && stdout.contains("block 0"),
        "{stdout}"
    );
    assert!(
        stdout.lines().last().unwrap_or("").ends_with(" 1 failed"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tampered_trtllm_hash_fails() {
    let (out, dir) = tampered(
        "trtllm/block_hashes.json",
        "\"block_hash_str\": \"11698258173249394544\"",
        "\"block_hash_str\": \"11698258173249394545\"",
        "trtllm",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("worked_example_tpb2: block 1"), "{stdout}");
    let _ = std::fs::remove_dir_all(dir);
}
