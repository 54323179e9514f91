//! `kvexact encode` as an operator runs it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn model(slug: &str) -> std::path::PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/models")).join(slug)
}

fn encode(args: &[&str], dir: &str, body: &str) -> (i32, serde_json::Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .arg("encode")
        .arg("--model-dir")
        .arg(model(dir))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(body.as_bytes());
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("kvexact: {e}"));
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn chat_matches_the_gateway_fixture() {
    let (rc, v) = encode(
        &["--engine", "vllm"],
        "Qwen__Qwen2.5-7B-Instruct",
        r#"{"model":"Qwen/Qwen2.5-7B-Instruct","messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"What is 2+2?"}]}"#,
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(
        v["rendered"],
        "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    let want = [
        151644, 8948, 198, 2610, 525, 264, 50537, 17847, 13, 151645, 198, 151644, 872, 198, 3838,
        374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198,
    ];
    assert_eq!(v["token_ids"], serde_json::json!(want));
}

#[test]
fn refusal_is_printed_with_its_code() {
    let (rc, v) = encode(
        &["--engine", "sglang"],
        "Qwen__Qwen3-0.6B",
        r#"{"messages":[{"role":"user","content":"hi"}],"cache_salt":"x"}"#,
    );
    assert_eq!(rc, 3);
    assert_eq!(v["refusal"], "cache_salt");
    assert_eq!(v["class"], -2);
}

#[test]
fn completions_with_sglang_bos_and_cap() {
    let (rc, v) = encode(
        &[
            "--engine",
            "sglang",
            "--api",
            "completions",
            "--max-ids",
            "3",
        ],
        "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B",
        r#"{"prompt":"The capital of France is"}"#,
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["token_ids"], serde_json::json!([151646, 785, 6722]));
    assert_eq!(v["truncated"], true);
}

#[test]
fn bad_engine_and_bad_now_are_usage_errors() {
    let (rc, _) = encode(&["--engine", "tgi"], "Qwen__Qwen3-0.6B", "{}");
    assert_eq!(rc, 2);
    let (rc, _) = encode(
        &["--engine", "vllm", "--now", "yesterday"],
        "Qwen__Qwen3-0.6B",
        "{}",
    );
    assert_eq!(rc, 2);
}

#[test]
fn unparseable_body_is_a_request_class_refusal() {
    let (rc, v) = encode(&["--engine", "trtllm"], "Qwen__Qwen3-0.6B", "not json");
    assert_eq!(rc, 3);
    assert_eq!(v["refusal"], "unparseable");
    assert_eq!(v["class"], -1);
}

#[test]
fn registry_profile_lookup_by_model_name() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(["encode", "--registry"])
        .arg(root)
        .args(["--model", "Qwen/Qwen3-0.6B", "--engine", "vllm"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(br#"{"messages":[{"role":"user","content":"What is 2+2?"}]}"#);
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(
        v["rendered"],
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        v["token_ids"],
        serde_json::json!([
            151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198
        ])
    );
}
