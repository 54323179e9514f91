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
        15,
        "the 15 replays of vLLM 0.31.0 / 0.33.0 / 0.34.0 and SGLang 0.5.19"
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
    assert_eq!((passed, unknown), (3870, 309));
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
