//! `kvexact events decode` and `kvexact parity` on the KV-event vectors.

use std::path::PathBuf;
use std::process::{Command, Output};

fn vectors(engine: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors"))
        .join(engine)
        .join("kv_events.json")
}

fn kvexact(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(args)
        .output()
        .expect("run kvexact")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn parity_passes_on_every_kv_events_file() {
    let files: Vec<String> = ["vllm", "sglang", "trtllm"]
        .iter()
        .map(|e| vectors(e).display().to_string())
        .collect();
    let args: Vec<&str> = std::iter::once("parity")
        .chain(files.iter().map(String::as_str))
        .collect();
    let out = kvexact(&args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.trim_end().ends_with("37 passed, 0 failed"),
        "{stdout}"
    );
}

#[test]
fn parity_fails_on_a_tampered_copy() {
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(vectors("vllm")).unwrap()).unwrap();
    doc["cases"][2]["decoded"]["events"][1]["block_hashes"][0] = serde_json::json!(12345);
    let path = std::env::temp_dir().join(format!(
        "kvexact-events-tampered-{}.json",
        std::process::id()
    ));
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = kvexact(&["parity", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("int_removed_on_eviction"), "{stdout}");
    assert!(
        stdout.contains("decoded.events[1].block_hashes[0]: expected 12345"),
        "{stdout}"
    );
    // The replay case cross-checks its replies against the live cases, so it fails too.
    assert!(stdout.contains("12 passed, 2 failed"), "{stdout}");
}

const PAYLOAD: &str = "93cb41da556e401000009181a474797065b0416c6c426c6f636b73436c656172656401";

#[test]
fn decode_prints_json_for_frames_payload_and_json() {
    let out = kvexact(&[
        "events",
        "decode",
        "--format",
        "vllm-kv-map-v3",
        "--frames-hex",
        "6b76",
        "0000000000000007",
        PAYLOAD,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seq"], 7);
    assert_eq!(v["topic"], "kv");
    assert_eq!(v["data_parallel_rank"], 1);
    assert_eq!(v["events"][0]["type"], "AllBlocksCleared");

    let out = kvexact(&[
        "events",
        "decode",
        "--format",
        "vllm-kv-map-v2",
        "--payload-hex",
        PAYLOAD,
    ]);
    assert_eq!(out.status.code(), Some(0));

    let body =
        std::env::temp_dir().join(format!("kvexact-events-body-{}.json", std::process::id()));
    std::fs::write(
        &body,
        r#"[{"event_id":4,"data":{"type":"removed","block_hashes":[18446744073709551615]},"window_size":32768}]"#,
    )
    .unwrap();
    let out = kvexact(&[
        "events",
        "decode",
        "--format",
        "trtllm-kv-http-v1",
        "--json",
        body.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_file(&body);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["events"][0]["block_hashes"][0].as_u64(), Some(u64::MAX));
}

#[test]
fn decode_errors_and_usage() {
    // Truncated payload: exit 1 with the location.
    let out = kvexact(&[
        "events",
        "decode",
        "--format",
        "vllm-kv-map-v3",
        "--payload-hex",
        &PAYLOAD[..40],
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("byte"), "{err}");
    // Unknown format id, bad hex, wrong input kind, no input: exit 2.
    for args in [
        vec![
            "events",
            "decode",
            "--format",
            "vllm-kv-map-v9",
            "--payload-hex",
            PAYLOAD,
        ],
        vec![
            "events",
            "decode",
            "--format",
            "vllm-kv-map-v3",
            "--payload-hex",
            "zz",
        ],
        vec![
            "events",
            "decode",
            "--format",
            "trtllm-kv-http-v1",
            "--payload-hex",
            PAYLOAD,
        ],
        vec!["events", "decode", "--format", "vllm-kv-map-v3"],
    ] {
        let out = kvexact(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
