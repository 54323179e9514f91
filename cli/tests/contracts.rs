//! `kvexact contracts` and how every command resolves engine versions through the catalog:
//! the matrix lists every release; `parity` applies each file's release and refuses an
//! unknown version; `demo`, `encode` and `events decode` take a version and refuse unknown
//! ones with `UNKNOWN_ENGINE_VERSION`.

use std::path::PathBuf;
use std::process::{Command, Output};

fn kvexact(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(args)
        .output()
        .expect("run kvexact")
}

fn vectors(rel: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors")).join(rel)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_matrix_lists_every_release_range() {
    let out = kvexact(&["contracts"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for range in [
        "0.17.0–0.18.1",
        "0.19.0",
        "0.19.1",
        "0.20.0–0.21.0",
        "0.22.0–0.23.0",
        "0.24.0–0.25.1",
        "0.26.0–0.28.0",
        "0.29.0",
        "0.30.0",
        "0.31.0–0.32.0",
        "0.33.0",
        "0.34.0",
        "0.5.18",
        "0.5.19",
        "0.5.20–0.5.21",
        "0.5.22",
        "0.5.23",
        "1.2.1",
        "1.3.0rc24",
        "1.3.0rc29",
    ] {
        assert!(text.contains(range), "{range} missing:\n{text}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&kvexact(&["contracts", "--json"]).stdout).expect("JSON");
    let releases = json["releases"].as_array().expect("releases");
    assert_eq!(releases.len(), 21);
    let versions: usize = releases
        .iter()
        .map(|r| r["versions"].as_array().map_or(0, Vec::len))
        .sum();
    // vLLM 0.17.0–0.34.0: 26 releases on PyPI; SGLang 0.5.18–0.5.23: 6; TRT-LLM 3; llama.cpp 1.
    assert_eq!(versions, 26 + 6 + 3 + 1);
    for r in releases {
        assert!(r["evidence"]["note"]
            .as_str()
            .is_some_and(|n| !n.is_empty()));
    }
}

#[test]
fn resolve_names_one_release_or_refuses() {
    let out = kvexact(&["contracts", "--resolve", "vllm", "0.24.0"]);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("vllm-kv-map-v2-r0.24"),
        "{}",
        stdout(&out)
    );
    let out = kvexact(&["contracts", "--resolve", "sglang", "0.5.23", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["release"], "sglang-kv-map-v2-r0.5.23");
    assert_eq!(j["hash"]["wide_pages"], true);
    let out = kvexact(&["contracts", "--resolve", "vllm", "0.34.0", "--json"]);
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["release"], "vllm-kv-map-v3-r0.34");
    assert_eq!(j["hash"]["default_block_size"], 64);
    assert_eq!(j["chat"]["empty_tools"], "omitted");
    let out = kvexact(&["contracts", "--resolve", "vllm", "0.35.0"]);
    assert_eq!(out.status.code(), Some(2));
    let t = stdout(&out);
    assert!(t.starts_with("REFUSED UNKNOWN_ENGINE_VERSION:"), "{t}");
    assert!(t.contains("nearest below: 0.34.0"), "{t}");
}

#[test]
fn parity_applies_each_files_release_and_refuses_unknown_versions() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in std::fs::read_dir(vectors("versions")).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "json") {
                files.push(f);
            }
        }
    }
    for r in ["vllm", "sglang", "trtllm"] {
        for f in std::fs::read_dir(vectors(r)).unwrap() {
            files.push(f.unwrap().path());
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .arg("parity")
        .args(&files)
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.ends_with("2122 passed, 0 failed\n"), "{text}");
    assert!(
        text.contains("rules of vllm-kv-array-v1-r0.17 (vllm 0.17.0)"),
        "{text}"
    );
    assert!(
        text.contains("decoded with sglang-kv-map-v2-r0.5.22"),
        "{text}"
    );

    // The same file under a version no release covers: refused, not checked with the
    // neighbour's rules.
    let doc = std::fs::read_to_string(vectors("versions/vllm-0.33.0/block_hashes.json")).unwrap();
    let dir = std::env::temp_dir().join(format!("kvexact-contracts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("future.json");
    std::fs::write(
        &p,
        doc.replacen(
            "\"engine_version\": \"0.33.0\"",
            "\"engine_version\": \"0.35.0\"",
            1,
        ),
    )
    .unwrap();
    let out = kvexact(&["parity", p.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("REFUSED UNKNOWN_ENGINE_VERSION"), "{text}");
    assert!(text.ends_with("0 passed, 0 failed\n"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_encode_and_events_take_a_release() {
    let out = kvexact(&[
        "demo",
        "--json",
        "--vllm-version",
        "0.24.0",
        "--sglang-version",
        "0.5.23",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["engines"][0]["release"], "vllm-kv-map-v2-r0.24");
    assert_eq!(j["engines"][1]["release"], "sglang-kv-map-v2-r0.5.23");
    assert_eq!(j["engines"][2]["release"], "trtllm-kv-http-v2-r1.3.0rc29");
    let out = kvexact(&["demo", "--vllm-version", "0.16.0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("REFUSED UNKNOWN_ENGINE_VERSION"));

    let dir = vectors("../models/Qwen__Qwen3-0.6B");
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args([
            "encode",
            "--model-dir",
            dir.to_str().unwrap(),
            "--engine",
            "vllm",
        ])
        .args(["--engine-version", "0.99.0", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stdout(&out).contains("UNKNOWN_ENGINE_VERSION"),
        "{}",
        stdout(&out)
    );

    // A 0.20.0 array event (10 elements, group_idx) decodes under 0.20.0's schema and is
    // refused under 0.17.0's (9 elements), which the family decoder would have accepted.
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(vectors("versions/vllm-0.20.0/kv_events.json")).unwrap(),
    )
    .unwrap();
    let payload = doc["cases"][0]["payload_hex"].as_str().unwrap();
    let ok = kvexact(&[
        "events",
        "decode",
        "--engine",
        "vllm",
        "--engine-version",
        "0.20.0",
        "--payload-hex",
        payload,
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let old = kvexact(&[
        "events",
        "decode",
        "--engine",
        "vllm",
        "--engine-version",
        "0.17.0",
        "--payload-hex",
        payload,
    ]);
    assert_eq!(old.status.code(), Some(1));
    let fam = kvexact(&[
        "events",
        "decode",
        "--format",
        "vllm-kv-array-v1",
        "--payload-hex",
        payload,
    ]);
    assert!(fam.status.success());
    let unknown = kvexact(&[
        "events",
        "decode",
        "--engine",
        "vllm",
        "--engine-version",
        "0.9.0",
        "--payload-hex",
        payload,
    ]);
    assert_eq!(unknown.status.code(), Some(2));
}
