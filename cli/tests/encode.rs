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

/// A vector case as the engines were sent it (`kvexact_conformance::templates::request_body`) and the
/// ids `engine` produced for it.
fn vector_case(file: &str, id: &str, engine: &str) -> (String, serde_json::Value) {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors")).join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let doc = kvtemplate::json::parse(&bytes).unwrap_or(kvtemplate::json::Json::Null);
    let case = doc
        .as_object()
        .and_then(|o| o.get("cases"))
        .and_then(|c| c.as_array())
        .and_then(|cases| {
            cases.iter().find(|c| {
                c.as_object()
                    .and_then(|o| o.get("id"))
                    .and_then(|i| i.as_str())
                    == Some(id)
            })
        })
        .and_then(|c| c.as_object())
        .unwrap_or_else(|| panic!("{file}#{id}"));
    let body = kvexact_conformance::templates::request_body(case, "Qwen/Qwen3-0.6B");
    let want: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let want = want["cases"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == id))
        .map(|c| c["engine_token_ids"][engine].clone())
        .unwrap_or_default();
    (body, want)
}

#[test]
fn allow_lifts_codes_and_gives_the_engines_ids() {
    let (body, want) = vector_case(
        "templates/qwen3-06b-default-v1.json",
        "tool_call_history",
        "sglang",
    );
    assert!(want.as_array().is_some_and(|w| !w.is_empty()));
    // Strict: refused with the first code it hits.
    let (rc, v) = encode(&["--engine", "sglang"], "Qwen__Qwen3-0.6B", &body);
    assert_eq!((rc, v["refusal"].as_str()), (3, Some("tools")), "{v}");
    // Not every code it hits lifted: the next one refuses.
    let (rc, v) = encode(
        &["--engine", "sglang", "--allow", "tools"],
        "Qwen__Qwen3-0.6B",
        &body,
    );
    assert_eq!(
        (rc, v["refusal"].as_str()),
        (3, Some("message_field")),
        "{v}"
    );
    // All lifted: SGLang 0.5.19's own ids.
    let (rc, v) = encode(
        &[
            "--engine",
            "sglang",
            "--allow",
            "tools,message_field,null_content",
        ],
        "Qwen__Qwen3-0.6B",
        &body,
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["token_ids"], want);
    // SGLang 0.5.23 serialises the tools differently: its own ids.
    let (body, want) = vector_case(
        "versions/sglang-0.5.23/templates/qwen3-06b-default-v1.json",
        "tools_request",
        "sglang",
    );
    let (rc, v) = encode(
        &[
            "--engine",
            "sglang",
            "--engine-version",
            "0.5.23",
            "--allow",
            "tools",
        ],
        "Qwen__Qwen3-0.6B",
        &body,
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["token_ids"], want);
}

#[test]
fn allow_refuses_lifts_the_release_does_not_define() {
    let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    // TensorRT-LLM rejects continue_final_message itself: not liftable there.
    let (rc, v) = encode(
        &[
            "--engine",
            "trtllm",
            "--allow",
            "tools,continue_final_message",
        ],
        "Qwen__Qwen3-0.6B",
        body,
    );
    let err = v["error"].as_str().unwrap_or("");
    assert_eq!(rc, 2, "{v}");
    assert!(
        err.starts_with("REFUSED LIFT_NOT_ALLOWED:")
            && err.contains("continue_final_message")
            && err.contains("trtllm-kv-http-v2-r1.3.0rc29"),
        "{err}"
    );
    // A release without chat vectors lifts nothing.
    let (rc, v) = encode(
        &[
            "--engine",
            "vllm",
            "--engine-version",
            "0.32.0",
            "--allow",
            "tools",
        ],
        "Qwen__Qwen3-0.6B",
        body,
    );
    let err = v["error"].as_str().unwrap_or("");
    assert_eq!(rc, 2, "{v}");
    assert!(
        err.contains("LIFT_NOT_ALLOWED") && err.contains("no chat rules are proven"),
        "{err}"
    );
    // A code no release lifts, and a name that is no code.
    let (rc, v) = encode(
        &["--engine", "vllm", "--allow", "documents"],
        "Qwen__Qwen3-0.6B",
        body,
    );
    assert_eq!(rc, 2, "{v}");
    assert!(
        v["error"].as_str().unwrap_or("").contains("documents"),
        "{v}"
    );
    let (rc, v) = encode(
        &["--engine", "vllm", "--allow", "tools,tool_calls"],
        "Qwen__Qwen3-0.6B",
        body,
    );
    assert_eq!(rc, 2, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or("")
            .starts_with("REFUSED UNKNOWN_REFUSAL_CODE"),
        "{v}"
    );
    // An empty list lifts nothing: the strict path.
    let (rc, v) = encode(
        &["--engine", "vllm", "--allow", ""],
        "Qwen__Qwen3-0.6B",
        body,
    );
    assert_eq!(rc, 0, "{v}");
}

#[test]
fn contracts_resolve_names_the_liftable_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(["contracts", "--resolve", "trtllm", "1.3.0rc29", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let lifts: Vec<&str> = j["liftable"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    assert!(
        lifts.contains(&"tools") && !lifts.contains(&"continue_final_message"),
        "{j}"
    );
    assert_eq!(
        j["chat"]["liftable"].as_array().map(Vec::len),
        Some(7),
        "{j}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(["contracts", "--resolve", "vllm", "0.32.0"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    // 0.32.0 has no chat vectors: only cache_salt, whose rules are its release's
    // deployment.cacheSalt (keys only, the prompt unchanged).
    assert!(text.contains("liftable cache_salt"), "{text}");
}

#[test]
fn a_body_over_the_bound_is_refused_with_the_bound_named() {
    // 9 MiB on stdin: only the default 8 MiB bound plus one byte is read.
    let big = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "a ".repeat(9 << 19)
    );
    let (rc, v) = encode(&["--engine", "vllm"], "Qwen__Qwen2.5-7B-Instruct", &big);
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["refusal"], "input_too_large");
    assert_eq!(v["limit"]["name"], "max_body_bytes");
    assert_eq!(v["limit"]["max"], 8 << 20);
    assert_eq!(v["limit"]["actual"], (8 << 20) + 1);
    // A file's size is known: its length is the figure reported.
    let dir = std::env::temp_dir().join(format!("kvexact-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("body.json");
    std::fs::write(&file, &big).unwrap();
    let (rc, v) = encode(
        &["--engine", "vllm", file.to_str().unwrap()],
        "Qwen__Qwen2.5-7B-Instruct",
        "",
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["limit"]["actual"], big.len());
    assert_eq!(
        v["detail"],
        format!(
            "input_too_large: {} bytes, over max_body_bytes = 8388608",
            big.len()
        )
    );
}

#[test]
fn the_bounds_are_flags() {
    let body = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"again"}]}"#;
    let (rc, v) = encode(
        &["--engine", "vllm", "--max-messages", "2"],
        "Qwen__Qwen2.5-7B-Instruct",
        body,
    );
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["limit"]["name"], "max_messages");
    assert_eq!(v["limit"]["actual"], 3);
    let (rc, v) = encode(
        &["--engine", "vllm", "--max-word-bytes", "8"],
        "Qwen__Qwen2.5-7B-Instruct",
        r#"{"messages":[{"role":"user","content":"incomprehensibilities"}]}"#,
    );
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["limit"]["name"], "max_word_bytes");
    let (rc, v) = encode(&["--engine", "vllm"], "Qwen__Qwen2.5-7B-Instruct", body);
    assert_eq!(rc, 0, "{v}");
}

/// gpt-oss on vLLM 0.31.0 renders through harmony (catalog `chat.renderers`), on SGLang
/// through the Jinja template: the ids of templates-nonjinja/gptoss-20b-v1.json#system_user.
#[test]
fn gptoss_chat_takes_the_releases_renderer() {
    let body = r#"{"messages":[{"role":"system","content":"You are a terse assistant. Answer in one sentence."},{"role":"user","content":"What is 2+2?"}]}"#;
    let bytes = std::fs::read(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/vectors/templates-nonjinja"
        ))
        .join("gptoss-20b-v1.json"),
    )
    .unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let case = doc["cases"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == "system_user"))
        .cloned()
        .unwrap_or_default();
    let now = "2026-03-14T09:30:00Z";
    let (rc, v) = encode(
        &[
            "--engine",
            "vllm",
            "--engine-version",
            "0.31.0",
            "--now",
            now,
        ],
        "openai__gpt-oss-20b",
        body,
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["renderer"], "harmony");
    assert_eq!(v["token_ids"], case["engine_token_ids"]["vllm"]);
    assert_ne!(case["engine_token_ids"]["vllm"], serde_json::Value::Null);
    let (rc, v) = encode(
        &[
            "--engine",
            "sglang",
            "--engine-version",
            "0.5.19",
            "--now",
            now,
        ],
        "openai__gpt-oss-20b",
        body,
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["renderer"], serde_json::Value::Null);
    assert_eq!(v["token_ids"], case["engine_token_ids"]["sglang"]);
    // A vLLM release whose vectors do not prove the renderer of gpt_oss: refused, not Jinja.
    let (rc, v) = encode(
        &[
            "--engine",
            "vllm",
            "--engine-version",
            "0.29.0",
            "--now",
            now,
        ],
        "openai__gpt-oss-20b",
        body,
    );
    assert_eq!(rc, 1, "{v}");
    assert!(v["error"].as_str().unwrap_or("").contains("gpt_oss"), "{v}");
}

/// One case of a templates-nonjinja vector file.
fn nonjinja_case(file: &str, id: &str) -> serde_json::Value {
    let bytes = std::fs::read(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/vectors/templates-nonjinja"
        ))
        .join(file),
    )
    .unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    doc["cases"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == id))
        .cloned()
        .unwrap_or_default()
}

/// A Mistral checkpoint (tekken.json / tokenizer.model.v7 alone) encodes through the
/// release's mistral_common renderer (catalog `chat.renderers."files:…"`): vLLM's ids,
/// SGLang's text path, completions; an unproven release is refused, never Jinja.
#[test]
fn mistral_checkpoints_take_the_mistral_common_path() {
    let body = r#"{"messages":[{"role":"system","content":"You are a terse assistant. Answer in one sentence."},{"role":"user","content":"What is 2+2?"}]}"#;
    let tekken = "mistralai__Mistral-Nemo-Instruct-2407";
    let case = nonjinja_case("mistral-tekken-v1.json", "system_user");
    assert_ne!(case["engine_token_ids"]["vllm"], serde_json::Value::Null);
    for (engine, version, path, renderer) in [
        ("vllm", "0.31.0", "vllm", "mistral-tekken-v3"),
        ("vllm", "0.33.0", "vllm", "mistral-tekken-v3"),
        ("sglang", "0.5.19", "sglang", "mistral-text-tekken-v3"),
    ] {
        let (rc, v) = encode(
            &["--engine", engine, "--engine-version", version],
            tekken,
            body,
        );
        assert_eq!(rc, 0, "{v}");
        assert_eq!(v["renderer"], renderer);
        assert_eq!(v["token_ids"], case["engine_token_ids"][path], "{engine}");
    }
    let completion = nonjinja_case("mistral-tekken-v1.json", "completion_0");
    let (rc, v) = encode(
        &[
            "--engine",
            "vllm",
            "--engine-version",
            "0.31.0",
            "--api",
            "completions",
        ],
        tekken,
        &serde_json::json!({ "prompt": completion["prompt"] }).to_string(),
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["token_ids"], completion["engine_token_ids"]["vllm"]);
    let (rc, v) = encode(
        &["--engine", "vllm", "--engine-version", "0.29.0"],
        tekken,
        body,
    );
    assert_eq!(rc, 1, "{v}");
    let spm = nonjinja_case("mistral-spm-v7-v1.json", "system_user");
    let (rc, v) = encode(
        &["--engine", "vllm", "--engine-version", "0.31.0"],
        "mistralai__Mistral-Large-Instruct-2411",
        body,
    );
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["renderer"], "mistral-spm-v7");
    assert_eq!(v["token_ids"], spm["engine_token_ids"]["vllm"]);
}

/// `--deployment`: the request's salt and adapter read from the body, its block hashes under
/// the deployment's keys (vLLM 0.33 EAGLE look-ahead: ⌊(n − 1)/16⌋ blocks, each also over the
/// next token; the salt on block 0; the adapter's K3 key on every block), recomputed here
/// from kvhash's own parts; a release that cannot honour an option is refused.
#[test]
fn deployment_keys_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("deployment.yaml");
    std::fs::write(
        &d,
        "hashSeed: '0'\nspeculative: {method: eagle, numSpeculativeTokens: 3}\nloraAdapters: [{name: sql-lora, path: /adapters/sql-lora}]\n",
    )
    .unwrap();
    let d = d.to_str().unwrap();
    let body = |model: &str, salt: Option<&str>| {
        let salt = salt.map_or(String::new(), |s| format!(r#","cache_salt":"{s}""#));
        format!(
            r#"{{"model":"{model}"{salt},"messages":[{{"role":"system","content":"You answer questions about databases in detail, with examples and caveats."}},{{"role":"user","content":"What is an index in a relational database, and when should I add one to a table?"}}]}}"#
        )
    };
    let args = [
        "--engine",
        "vllm",
        "--engine-version",
        "0.33.0",
        "--deployment",
        d,
    ];
    let (rc, salted) = encode(
        &args,
        "Qwen__Qwen3-0.6B",
        &body("sql-lora", Some("tenant-a")),
    );
    assert_eq!(rc, 0, "{salted}");
    assert_eq!(salted["keys"]["cache_salt"], "tenant-a");
    assert_eq!(salted["keys"]["adapter"], "sql-lora");
    assert_eq!(salted["deployment"]["keyForm"], "lookahead-1");
    let ids: Vec<u32> = serde_json::from_value(salted["token_ids"].clone()).unwrap();
    let rules = kvhash::vllm::VllmRules {
        none_hash: kvhash::vllm::NoneHashRule::B,
        extra_keys: kvhash::vllm::ExtraKeyForm::K3,
        lookahead: true,
    };
    let h =
        kvhash::vllm::VllmHasher::with_rules(rules, kvhash::vllm::HashAlgo::Sha256, 16, Some("0"))
            .unwrap()
            .with_lookahead(1)
            .unwrap()
            .with_extras(kvhash::vllm::VllmExtras {
                lora: Some(kvhash::vllm::LoraKey {
                    name: "sql-lora".into(),
                    path: "/adapters/sql-lora".into(),
                }),
                cache_salt: Some("tenant-a".into()),
                ..Default::default()
            })
            .unwrap();
    let mut want = vec![0u64; ids.len() / 16];
    let n = h.block_hashes_u64(&ids, &mut want).unwrap();
    want.truncate(n);
    assert_eq!(n, (ids.len() - 1) / 16);
    assert_eq!(salted["block_hashes"], serde_json::json!(want));
    // The same prompt on the base model without a salt: other keys from block 0 on.
    let (rc, plain) = encode(&args, "Qwen__Qwen3-0.6B", &body("Qwen/Qwen3-0.6B", None));
    assert_eq!(rc, 0, "{plain}");
    assert_eq!(plain["token_ids"], salted["token_ids"]);
    assert_ne!(plain["block_hashes"][0], salted["block_hashes"][0]);
    assert_eq!(plain["keys"]["adapter"], serde_json::Value::Null);
    // An empty salt is one vLLM rejects: refused, never hashed unsalted.
    let (rc, v) = encode(&args, "Qwen__Qwen3-0.6B", &body("sql-lora", Some("")));
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["refusal"], "cache_salt");
    // vLLM 0.31 has no look-ahead rule: the deployment is refused before anything is read.
    let old = [
        "--engine",
        "vllm",
        "--engine-version",
        "0.31.0",
        "--deployment",
        d,
    ];
    let (rc, v) = encode(&old, "Qwen__Qwen3-0.6B", &body("sql-lora", None));
    assert_eq!(rc, 2, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("DEPLOYMENT_UNSUPPORTED"),
        "{v}"
    );
}
