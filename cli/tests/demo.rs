//! `kvexact demo`, the embedded default: it must load the shipped sample registry, and its
//! ids and hashes must agree with the model-directory path (`kvexact encode --model-dir`) and
//! with straight-line re-computations of the vLLM and SGLang chains written here.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const BODY: &str = r#"{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"system","content":"You route requests."},{"role":"user","content":"Name three reasons a prefix cache can miss, one line each, and explain which of them an exact router can avoid."}]}"#;

fn kvexact(args: &[&str], stdin: Option<&str>) -> (i32, Vec<u8>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run kvexact: {e}"));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().expect("kvexact output");
    (out.status.code().unwrap_or(-1), out.stdout)
}

fn ids_of(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("token_ids array")
        .iter()
        .map(|x| u32::try_from(x.as_u64().expect("id")).expect("u32 id"))
        .collect()
}

/// vLLM sha256_cbor with PYTHONHASHSEED=0, written out byte by byte (spec docs/contracts/vllm.md §1–4).
fn vllm_reference(ids: &[u32], bs: usize) -> Vec<u64> {
    fn uint(out: &mut Vec<u8>, major: u8, n: u64) {
        let m = major << 5;
        if n < 24 {
            out.push(m | n as u8);
        } else if n < 256 {
            out.extend([m | 24, n as u8]);
        } else if n < 65536 {
            out.push(m | 25);
            out.extend((n as u16).to_be_bytes());
        } else {
            out.push(m | 26);
            out.extend((n as u32).to_be_bytes());
        }
    }
    let mut parent: Vec<u8> = Sha256::digest([0x61, b'0']).to_vec(); // ser("0")
    let mut out = Vec::new();
    for block in ids.chunks_exact(bs) {
        let mut msg = vec![0x83, 0x58, 0x20];
        msg.extend(&parent);
        uint(&mut msg, 4, block.len() as u64);
        for &t in block {
            uint(&mut msg, 0, u64::from(t));
        }
        msg.push(0xf6);
        parent = Sha256::digest(&msg).to_vec();
        out.push(u64::from_be_bytes(parent[24..32].try_into().unwrap()));
    }
    out
}

/// SGLang's page chain (spec docs/contracts/sglang.md §1).
fn sglang_reference(ids: &[u32], page: usize) -> Vec<u64> {
    let mut parent: Option<Vec<u8>> = None;
    let mut out = Vec::new();
    for block in ids.chunks_exact(page) {
        let mut h = Sha256::new();
        if let Some(p) = &parent {
            h.update(p);
        }
        for &t in block {
            h.update(t.to_le_bytes());
        }
        let d = h.finalize().to_vec();
        out.push(u64::from_be_bytes(d[0..8].try_into().unwrap()));
        parent = Some(d);
    }
    out
}

#[test]
fn demo_agrees_with_encode_and_with_reference_chains() {
    let dir = tempfile::tempdir().expect("tempdir");
    let req = dir.path().join("request.json");
    std::fs::write(&req, BODY).expect("write request");
    let req = req.to_str().expect("utf-8 path");

    let (rc, out) = kvexact(&["demo", "--json", req], None);
    assert_eq!(rc, 0, "{}", String::from_utf8_lossy(&out));
    let demo: serde_json::Value = serde_json::from_slice(&out).expect("demo JSON");
    assert_eq!(demo["profile"], "qwen3-06b-default-v1");
    let engines = demo["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 3);

    let model = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/models/Qwen__Qwen3-0.6B"
    ));
    let model = model.to_str().expect("utf-8 path");
    for e in engines {
        let name = e["engine"].as_str().expect("engine name");
        let (rc, out) = kvexact(
            &["encode", "--model-dir", model, "--engine", name],
            Some(BODY),
        );
        assert_eq!(rc, 0, "{}", String::from_utf8_lossy(&out));
        let enc: serde_json::Value = serde_json::from_slice(&out).expect("encode JSON");
        assert_eq!(e["rendered"], enc["rendered"], "{name}: rendered");
        let ids = ids_of(&e["token_ids"]);
        assert_eq!(ids, ids_of(&enc["token_ids"]), "{name}: ids");
        assert!(ids.len() > 40, "{name}: {} ids", ids.len());

        let hashes: Vec<u64> = e["block_hashes_u64"]
            .as_array()
            .expect("hashes")
            .iter()
            .map(|h| h.as_u64().expect("u64"))
            .collect();
        let bs = e["block_size"].as_u64().expect("block size") as usize;
        assert_eq!(hashes.len(), ids.len() / bs, "{name}: full blocks only");
        match name {
            "vllm" => assert_eq!(hashes, vllm_reference(&ids, bs)),
            "sglang" => assert_eq!(hashes, sglang_reference(&ids, bs)),
            _ => assert_eq!(bs, 32),
        }
    }
}

#[test]
fn demo_text_output_names_every_engine() {
    let (rc, out) = kvexact(&["demo"], None);
    assert_eq!(rc, 0);
    let text = String::from_utf8(out).expect("utf-8");
    for needle in [
        "setDigest",
        "== vllm",
        "== sglang",
        "== trtllm",
        "token ids",
        "block hashes",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

/// The default registry is compiled in: `kvexact demo` works from a directory that has no
/// source tree nearby (as after `cargo install --path cli`), gives the same ids and hashes as
/// the checked-in registry named explicitly, and leaves no directory behind.
#[test]
fn demo_runs_from_any_directory_on_the_embedded_registry() {
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::tempdir().expect("tempdir for TMPDIR");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
            .args(args)
            .current_dir(elsewhere.path())
            .env("TMPDIR", tmp.path())
            .output()
            .expect("run kvexact");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")
    };
    let embedded = run(&["demo", "--json", "--now-ms", "0"]);
    assert_eq!(embedded["registry"], "(embedded sample registry)");
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/registry");
    let explicit = run(&[
        "demo",
        "--json",
        "--now-ms",
        "0",
        "--registry",
        checked_in.to_str().expect("utf-8 path"),
    ]);
    let engines = embedded["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 3, "{embedded}");
    assert_eq!(embedded["set_digest"], explicit["set_digest"]);
    for (i, engine) in ["vllm", "sglang", "trtllm"].into_iter().enumerate() {
        assert_eq!(engines[i]["engine"], engine);
        for field in ["token_ids", "block_hashes_u64"] {
            let a = &engines[i][field];
            assert!(
                a.as_array().is_some_and(|v| !v.is_empty()),
                "{engine} {field}: {embedded}"
            );
            assert_eq!(a, &explicit["engines"][i][field], "{engine} {field}");
        }
    }
    assert_eq!(
        std::fs::read_dir(tmp.path()).expect("read TMPDIR").count(),
        0,
        "the private copy is removed"
    );
}
