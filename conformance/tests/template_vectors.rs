//! Every case of the template vectors (testdata copies) and the gateway's parity fixtures.

use kvexact_conformance::templates::check_file;
use std::path::Path;

fn testdata(rel: &str) -> std::path::PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

fn run(file: &str, min_cases: usize) {
    let bytes = std::fs::read(testdata(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let report = check_file(&bytes, &testdata("models")).unwrap_or_else(|e| panic!("{file}: {e}"));
    let failed: Vec<String> = report
        .cases
        .iter()
        .filter_map(|c| c.failure.as_ref().map(|f| format!("{}: {f}", c.name)))
        .collect();
    assert!(
        report.cases.len() >= min_cases,
        "{file}: only {} cases",
        report.cases.len()
    );
    assert!(
        failed.is_empty(),
        "{file}: {} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn qwen25() {
    run("vectors/templates/qwen25-7b-instruct-v1.json", 39);
}

#[test]
fn qwen3() {
    run("vectors/templates/qwen3-06b-default-v1.json", 41);
}

#[test]
fn llama31() {
    run("vectors/templates/llama31-8b-instruct-v1.json", 42);
}

#[test]
fn r1_distill() {
    run("vectors/templates/r1-distill-qwen-7b-v1.json", 41);
}

#[test]
fn gemma2() {
    run("vectors/templates/gemma2-9b-it-v1.json", 39);
}

#[test]
fn exaone35_render_only() {
    let bytes = std::fs::read(testdata("vectors/templates/exaone35-78b-instruct-v1.json"))
        .unwrap_or_default();
    let report = check_file(&bytes, &testdata("models")).unwrap_or_default();
    assert!(report.notes.iter().any(|n| n.contains("render-only")));
    run("vectors/templates/exaone35-78b-instruct-v1.json", 39);
}

#[test]
fn gateway_chat_template_parity() {
    run("vectors/gateway/kv_chat_template_parity.json", 3);
}

#[test]
fn gateway_special_token_parity() {
    run("vectors/gateway/kv_special_token_parity.json", 1);
}
