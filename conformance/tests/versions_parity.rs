//! Every vector set of every engine release (`testdata/vectors/versions/*/`, plus the
//! reference sets `vllm/`, `sglang/`, `trtllm/`) recomputes exactly under the contract its
//! file names — resolved through the catalog, as `kvexact parity` does — and the rules are
//! not decoration: the neighbouring release's rules fail the cases where the two differ.

use kvexact_conformance::events as event_vectors;
use kvexact_conformance::hashes::{self as hashes, FileRules};
use kvprobe::contract::{self, Contract};
use kvprobe::Engine;
use serde_json::Value;
use std::path::{Path, PathBuf};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors");

fn engine(name: &str) -> Engine {
    match name {
        "vllm" => Engine::Vllm,
        "sglang" => Engine::Sglang,
        _ => Engine::Trtllm,
    }
}

/// Every block-hash and KV-event file of the release sets.
fn files() -> Vec<PathBuf> {
    let mut dirs = vec![
        Path::new(VECTORS).join("vllm"),
        Path::new(VECTORS).join("sglang"),
        Path::new(VECTORS).join("trtllm"),
    ];
    let mut versions: Vec<PathBuf> = std::fs::read_dir(Path::new(VECTORS).join("versions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    versions.sort();
    dirs.extend(versions);
    let mut out = Vec::new();
    for d in dirs {
        let mut f: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        f.sort();
        out.extend(f);
    }
    out
}

fn load(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn contract_of(doc: &Value) -> Contract {
    let e = doc["engine"].as_str().unwrap();
    let v = doc["engine_version"].as_str().unwrap();
    contract::resolve(engine(e), v).unwrap_or_else(|err| panic!("{e} {v}: {err}"))
}

fn rules(c: &Contract) -> FileRules {
    let mut r = FileRules {
        default_block_size: c.default_block_size().map(|b| b as usize),
        ..FileRules::default()
    };
    if let Ok(v) = c.vllm_rules() {
        r.vllm = v;
    }
    if let Ok(s) = c.sglang_rules() {
        r.sglang = s;
    }
    r
}

/// The failing case names of one file under contract `c`.
fn failures(doc: &Value, c: &Contract) -> (usize, Vec<String>) {
    if hashes::detect(doc).is_some() {
        let res = hashes::check_document(doc, &rules(c)).unwrap();
        let bad = res
            .iter()
            .filter_map(|r| r.failure.as_ref().map(|f| format!("{}: {f}", r.name)))
            .collect();
        (res.len(), bad)
    } else {
        assert!(event_vectors::is_kv_events_file(doc));
        let res = event_vectors::check_file(doc, c.events().unwrap()).unwrap();
        let bad = res
            .iter()
            .filter_map(|r| r.failure.as_ref().map(|f| format!("{}: {f}", r.name)))
            .collect();
        (res.len(), bad)
    }
}

#[test]
fn every_release_set_passes_under_its_own_contract() {
    let mut total = 0;
    let mut files_seen = 0;
    for p in files() {
        let doc = load(&p);
        let c = contract_of(&doc);
        let (n, bad) = failures(&doc, &c);
        assert!(n > 0, "{}: no cases", p.display());
        assert!(
            bad.is_empty(),
            "{} under {}:\n{}",
            p.display(),
            c.release_id(),
            bad.join("\n")
        );
        total += n;
        files_seen += 1;
    }
    // 9 vLLM sets of 5 files, 3 SGLang sets of 2, the 3 reference folders (5 + 2 + 2).
    assert_eq!(files_seen, 9 * 5 + 3 * 2 + 9);
    assert_eq!(total, 2122);
}

#[test]
fn a_neighbouring_releases_rules_fail_where_they_differ() {
    // (vector set, the release whose rules are wrongly applied, files that must fail)
    let cases: &[(&str, &str, &str, &[&str])] = &[
        // K1 vs K2: the multimodal key gains the offset.
        (
            "vllm-0.17.0",
            "vllm",
            "0.19.0",
            &["block_hashes.json", "block_hashes_sha256.json"],
        ),
        // Array fields: group_idx (0.20) and kv_cache_spec_* (0.22).
        ("vllm-0.17.0", "vllm", "0.20.0", &["kv_events.json"]),
        ("vllm-0.20.0", "vllm", "0.22.0", &["kv_events.json"]),
        ("vllm-0.23.0", "vllm", "0.20.0", &["kv_events.json"]),
        // Replay framing: the topic frame arrives with 0.26.
        ("vllm-0.24.0", "vllm", "0.26.0", &["kv_events.json"]),
        ("vllm-0.26.0", "vllm", "0.24.0", &["kv_events.json"]),
        // NONE_HASH rule B's unset-seed case does not exist under rule A.
        ("vllm-0.29.0", "vllm", "0.28.0", &["block_hashes.json"]),
        // K2 vs K3: tagged keys.
        (
            "vllm-0.30.0",
            "vllm",
            "0.31.0",
            &["block_hashes.json", "block_hashes_xxhash.json"],
        ),
        // Look-ahead hashing does not exist before 0.33; nor does lookahead_token_ids.
        (
            "vllm-0.33.0",
            "vllm",
            "0.32.0",
            &["block_hashes.json", "kv_events.json"],
        ),
        // The default block size: 16 before 0.34, 64 from 0.34 (the default_bs64_* cases).
        (
            "vllm-0.34.0",
            "vllm",
            "0.33.0",
            &[
                "block_hashes.json",
                "block_hashes_sha256.json",
                "block_hashes_xxhash.json",
                "block_hashes_xxhash_cbor.json",
            ],
        ),
        // SGLang: arrays vs maps, replay topic frame, wide pages.
        ("sglang-0.5.20", "sglang", "0.5.19", &["kv_events.json"]),
        ("sglang-0.5.22", "sglang", "0.5.20", &["kv_events.json"]),
        ("sglang-0.5.23", "sglang", "0.5.22", &["block_hashes.json"]),
    ];
    for (set, e, wrong, must_fail) in cases {
        let c = contract::resolve(engine(e), wrong).unwrap();
        for f in *must_fail {
            let p = Path::new(VECTORS).join("versions").join(set).join(f);
            let (_, bad) = failures(&load(&p), &c);
            assert!(
                !bad.is_empty(),
                "{set}/{f} passes under {} too: the rule is not tested",
                c.release_id()
            );
        }
    }
}

#[test]
fn every_file_names_a_known_release_and_unknown_ones_are_refused() {
    for p in files() {
        let doc = load(&p);
        contract_of(&doc);
    }
    let mut doc = load(&Path::new(VECTORS).join("versions/vllm-0.24.0/block_hashes.json"));
    doc["engine_version"] = Value::from("0.35.0");
    let err = contract::resolve(Engine::Vllm, doc["engine_version"].as_str().unwrap()).unwrap_err();
    assert_eq!(err.code(), "UNKNOWN_ENGINE_VERSION");
}
