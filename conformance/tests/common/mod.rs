//! Shared by the block-hash parity tests: run every case of a vector file under testdata/.

use kvexact_conformance::hashes::{check_document, detect, FileRules, VectorFormat};

/// Checks every case of `testdata/vectors/<rel>` (a reference set: vLLM 0.31, SGLang
/// 0.5.19, TensorRT-LLM 1.3.0rc29) under the reference rules; panics listing every failure.
/// The per-release sets are checked with the catalog's rules in `kvprobe/tests`.
pub fn run(rel: &str, format: VectorFormat, min_cases: usize) {
    let path = format!("{}/../testdata/vectors/{rel}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(detect(&doc), Some(format), "{rel}: format");
    let results = check_document(&doc, &FileRules::default()).expect("document");
    assert!(
        results.len() >= min_cases,
        "{rel}: only {} cases",
        results.len()
    );
    let failures: Vec<String> = results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("{}: {f}", r.name)))
        .collect();
    assert!(failures.is_empty(), "{rel}:\n{}", failures.join("\n"));
}
