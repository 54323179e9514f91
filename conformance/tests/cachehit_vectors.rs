//! Every cache-hit replay in `testdata/vectors/cachehit/`: each endpoint's predicted cached
//! tokens equal the engine's own count at every query, every run's reported count is
//! observed as exact, and the only `unknown`s are the ones the release's catalog explains
//! (SGLang 0.5.19 with LoRA adapters loaded: its events show no LoRA namespace).

use kvexact_conformance::cachehit;
use std::path::PathBuf;

fn files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors/cachehit");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_replay_predicts_the_engines_own_counts() {
    let files = files();
    assert_eq!(
        files.len(),
        20,
        "the 20 replays of vLLM 0.31.0 / 0.33.0 / 0.34.0 and SGLang 0.5.19 (5 with speculative decoding)"
    );
    let (mut passed, mut unknown) = (0usize, 0usize);
    for f in &files {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        let r = cachehit::check(&doc).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let failed: Vec<_> = r.cases.iter().filter(|c| c.failure.is_some()).collect();
        assert!(failed.is_empty(), "{}: {failed:#?}", f.display());
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let queries = doc["counts"]["queries"].as_u64().unwrap() as usize;
        let runs = doc["counts"]["runs"].as_u64().unwrap() as usize;
        // Every query is judged for every endpoint, every run once.
        assert_eq!(
            r.cases.len() + r.unknown.len(),
            queries * 3 + runs,
            "{name}"
        );
        if name == "sglang-0.5.19-lora-salt.json" {
            assert_eq!(r.cases.len(), 0, "adapters are loaded on every endpoint");
        } else {
            assert!(r.unknown.is_empty(), "{name}: {:?}", r.unknown.first());
        }
        passed += r.cases.len();
        unknown += r.unknown.len();
    }
    assert_eq!((passed, unknown), (5395, 309));
}

#[test]
fn the_replays_exercise_hits_evictions_and_duplicates() {
    // A replay where every expected count is 0 would pass a predictor that always says 0.
    for f in files() {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let steps = doc["steps"].as_array().unwrap();
        let hits = steps
            .iter()
            .filter(|s| s["kind"] == "query")
            .flat_map(|s| s["expected_cached_tokens"].as_object().unwrap().values())
            .filter(|v| v.as_u64().unwrap() > 0)
            .count();
        assert!(hits >= 10, "{}: only {hits} hits", f.display());
    }
}

fn load(name: &str) -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/vectors/cachehit")
        .join(name);
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn failures(doc: &serde_json::Value) -> usize {
    let r = cachehit::check(doc).unwrap();
    r.cases.iter().filter(|c| c.failure.is_some()).count()
}

#[test]
fn speculative_replays_fail_when_read_as_plain_deployments() {
    // The deployment is what makes these replays pass: read as plain (the header's
    // `deployment` object dropped), the look-ahead and bigram replays fail by the dozen.
    for name in [
        "vllm-0.33.0-specdec-l1.json",
        "vllm-0.33.0-specdec-l3.json",
        "vllm-0.34.0-specdec-l1.json",
        "vllm-0.34.0-specdec-l3.json",
        "sglang-0.5.19-eagle.json",
    ] {
        let mut doc = load(name);
        assert_eq!(failures(&doc), 0, "{name}");
        doc.as_object_mut().unwrap().remove("deployment");
        let n = failures(&doc);
        assert!(n >= 50, "{name} read as plain: only {n} failures");
    }
}

#[test]
fn a_deployment_field_not_modelled_refuses_the_file() {
    let mut doc = load("vllm-0.33.0-specdec-l1.json");
    doc["deployment"]["kv_transfer_config"] = serde_json::json!({"kv_connector": "X"});
    let e = cachehit::check(&doc).unwrap_err();
    assert!(
        e.contains("DEPLOYMENT_UNSUPPORTED") && e.contains("kv_transfer_config"),
        "{e}"
    );
    let mut doc = load("vllm-0.33.0-specdec-l1.json");
    doc["deployment"]["something_new"] = serde_json::json!(1);
    let e = cachehit::check(&doc).unwrap_err();
    assert!(e.contains("something_new"), "{e}");
    let mut doc = load("sglang-0.5.19-eagle.json");
    doc["deployment"]["speculative"]["speculative_algorithm"] = serde_json::json!("NGRAM");
    let e = cachehit::check(&doc).unwrap_err();
    assert!(e.contains("speculative.method"), "{e}");
}

#[test]
fn the_engines_stated_lookahead_must_match_the_deployment() {
    // Multi-module MTP with 3 speculative tokens resolves to L = 3; a header claiming the
    // engine hashed with another L (or another module count) is caught, not replayed.
    let mut doc = load("vllm-0.33.0-specdec-l3.json");
    doc["deployment"]["num_hash_lookahead_tokens"] = serde_json::json!(2);
    let e = cachehit::check(&doc).unwrap_err();
    assert!(e.contains("num_hash_lookahead_tokens = 2"), "{e}");
    let mut doc = load("vllm-0.33.0-specdec-l3.json");
    doc["deployment"]["speculative"]["num_nextn_predict_layers"] = serde_json::json!(1);
    let e = cachehit::check(&doc).unwrap_err();
    assert!(e.contains("lookahead-1"), "{e}");
    let mut doc = load("sglang-0.5.19-eagle.json");
    doc["deployment"]["radix_is_eagle"] = serde_json::json!(false);
    assert!(cachehit::check(&doc).is_err());
}

#[test]
fn drift_rederives_every_block_of_every_deployment() {
    // Every block each replay's engines published (look-ahead blocks, bigram pages, LoRA and
    // salted blocks included) re-derives under the replay's deployment
    // (`DriftConfig::for_keying`): none unverifiable, none mismatched.
    use kvhash::events::{self, Limits};
    use kvprobe::deployment::DeploymentKeys;
    use kvprobe::drift::{DriftConfig, Verifier};
    let (mut total, mut bigram, mut lookahead) = (0u64, 0u64, 0u64);
    for f in files() {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let (d, _) = cachehit::deployment_of(&doc).unwrap();
        let c = kvexact_conformance::contract::contract_of(
            doc["engine"].as_str().unwrap(),
            doc["engine_version"].as_str().unwrap(),
        )
        .unwrap();
        let keys = DeploymentKeys::new(c.clone(), &d, "<replay>").unwrap();
        let mut verifiers = std::collections::HashMap::new();
        for s in doc["steps"].as_array().unwrap() {
            if s["kind"] != "events" {
                continue;
            }
            let name = s["endpoint"].as_str().unwrap().to_string();
            let v = verifiers.entry(name).or_insert_with(|| {
                Verifier::new(&c, DriftConfig::for_keying(keys.keying())).unwrap()
            });
            let topic = s["topic"].as_str().unwrap().as_bytes().to_vec();
            let seq = hex::decode(s["seq_frame_hex"].as_str().unwrap()).unwrap();
            let payload = hex::decode(s["payload_hex"].as_str().unwrap()).unwrap();
            let frames: [&[u8]; 3] = [&topic, &seq, &payload];
            let b = events::decode_frames_schema(c.events().unwrap(), &frames, &Limits::default())
                .unwrap();
            v.feed_payload(&b, &payload);
        }
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for v in verifiers.values() {
            let k = v.counters();
            assert_eq!(k.mismatched, 0, "{name}: {}", v.summary());
            if name.contains("hybrid") {
                // Sliding-window group blocks whose parent the window already dropped are
                // unverifiable in any deployment (docs/contracts/drift.md): not this test's.
                continue;
            }
            assert_eq!(k.unverifiable, 0, "{name}: {}", v.summary());
            assert_eq!(k.matched, k.blocks_seen, "{name}");
            total += k.matched;
            if name.contains("eagle") {
                bigram += k.matched;
            }
            if name.contains("specdec") {
                lookahead += k.matched;
            }
        }
    }
    assert!(
        total > 1000 && bigram > 100 && lookahead > 100,
        "{total} {bigram} {lookahead}"
    );
}
