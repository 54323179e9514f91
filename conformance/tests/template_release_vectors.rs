//! The per-release template vectors (`testdata/vectors/versions/<engine>-<version>/templates/`):
//! every case passes under that release's [`ChatRules`], and the same files checked with the
//! reference rules fail on exactly the cases the file marks `differs_from_reference` — so the
//! rules are what makes them pass.

use kvexact_conformance::templates::{check_file, check_file_with, engine_versions};
use kvexact_conformance::FileReport;
use kvtemplate::{ChatRules, Engine, TemplateErrorClass, ToolSerialization};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const PROFILES: [&str; 5] = [
    "gemma2-9b-it-v1",
    "llama31-8b-instruct-v1",
    "qwen25-7b-instruct-v1",
    "qwen3-06b-default-v1",
    "r1-distill-qwen-7b-v1",
];

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

fn read(set: &str, profile: &str) -> Vec<u8> {
    let rel = format!("vectors/versions/{set}/templates/{profile}.json");
    std::fs::read(testdata(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The releases whose rules these tests know, as a catalog would resolve them.
fn release_rules(engine: Engine, version: &str) -> Result<ChatRules, String> {
    let reference = ChatRules::reference(engine).ok_or("no chat path")?;
    match (engine, version) {
        (Engine::Vllm, "0.29.0") => {
            Ok(reference.with_template_error_class(TemplateErrorClass::ValueError))
        }
        (Engine::Sglang, "0.5.23") => {
            Ok(reference.with_tool_serialization(ToolSerialization::SglangRequestKeys))
        }
        _ => Err(format!("no rules for {} {version}", engine.as_str())),
    }
}

/// The reference rules for whatever release the file names.
fn reference_for_any(engine: Engine, _version: &str) -> Result<ChatRules, String> {
    ChatRules::reference(engine).ok_or_else(|| format!("{engine} has no chat path"))
}

fn check(bytes: &[u8], rules: &dyn Fn(Engine, &str) -> Result<ChatRules, String>) -> FileReport {
    check_file_with(bytes, &testdata("models"), rules).unwrap_or_else(|e| panic!("{e}"))
}

fn failed(report: &FileReport) -> BTreeSet<String> {
    report
        .cases
        .iter()
        .filter(|c| c.failure.is_some())
        .map(|c| c.name.rsplit('/').next().unwrap_or("").to_string())
        .collect()
}

/// `(case count, case ids with differs_from_reference.<engine>)` read from the file itself.
fn expected(bytes: &[u8], engine: Engine) -> (usize, BTreeSet<String>) {
    let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let cases = doc["cases"].as_array().cloned().unwrap_or_default();
    let differs = cases
        .iter()
        .filter(|c| c["differs_from_reference"].get(engine.as_str()).is_some())
        .filter_map(|c| c["id"].as_str().map(str::to_string))
        .collect();
    (cases.len(), differs)
}

/// Checks one release's set; returns (cases passed, cases that differ from the reference).
fn run_set(set: &str, engine: Engine, version: &str) -> (usize, usize) {
    let mut passed = 0;
    let mut differing = 0;
    for profile in PROFILES {
        let bytes = read(set, profile);
        assert_eq!(
            engine_versions(&bytes),
            Ok(vec![(engine, version.to_string())]),
            "{set}/{profile}"
        );
        let (n, differs) = expected(&bytes, engine);
        assert!(n > 0, "{set}/{profile}: no cases");

        // With the release's rules: every case passes.
        let report = check(&bytes, &release_rules);
        assert_eq!(report.cases.len(), n, "{set}/{profile}");
        let fails: Vec<String> = report
            .cases
            .iter()
            .filter_map(|c| c.failure.as_ref().map(|f| format!("{}: {f}", c.name)))
            .collect();
        assert!(
            fails.is_empty(),
            "{set}/{profile}: {} failed:\n{}",
            fails.len(),
            fails.join("\n")
        );
        passed += report.cases.len();

        // With the reference rules: exactly the cases marked differs_from_reference fail.
        let report = check(&bytes, &reference_for_any);
        assert_eq!(
            failed(&report),
            differs,
            "{set}/{profile}: reference rules must fail exactly on differs_from_reference"
        );
        differing += differs.len();
    }
    (passed, differing)
}

#[test]
fn vllm_0_29_0() {
    // 202 cases; the error class differs in 10 (gemma2 9, llama31 1).
    assert_eq!(run_set("vllm-0.29.0", Engine::Vllm, "0.29.0"), (202, 10));
}

#[test]
fn sglang_0_5_23() {
    // 202 cases; tools differ in 14 (llama31 5, qwen25 5, qwen3 4).
    assert_eq!(
        run_set("sglang-0.5.23", Engine::Sglang, "0.5.23"),
        (202, 14)
    );
}

#[test]
fn check_file_refuses_a_release_file_instead_of_using_reference_rules() {
    for (set, name) in [
        ("vllm-0.29.0", "vllm 0.29.0"),
        ("sglang-0.5.23", "sglang 0.5.23"),
    ] {
        let bytes = read(set, "qwen3-06b-default-v1");
        let err = check_file(&bytes, &testdata("models"))
            .err()
            .unwrap_or_default();
        assert!(
            err.contains(name) && err.contains("not the reference release"),
            "{set}: {err:?}"
        );
    }
}

#[test]
fn an_unresolved_release_fails_the_whole_file_with_the_resolvers_message() {
    let bytes = read("sglang-0.5.23", "gemma2-9b-it-v1");
    let refuse = |e: Engine, v: &str| Err(format!("catalog has no {} {v}", e.as_str()));
    let got = check_file_with(&bytes, &testdata("models"), &refuse).err();
    assert_eq!(got.as_deref(), Some("catalog has no sglang 0.5.23"));
}

#[test]
fn reference_files_name_the_reference_releases() {
    let bytes =
        std::fs::read(testdata("vectors/templates/qwen3-06b-default-v1.json")).unwrap_or_default();
    let want: Vec<(Engine, String)> = Engine::WITH_KV_PLANE
        .iter()
        .map(|e| (*e, ChatRules::reference_version(*e).unwrap().to_string()))
        .collect();
    assert_eq!(engine_versions(&bytes), Ok(want));
}

#[test]
fn rules_of_another_engine_are_refused_by_the_encoder() {
    let mut spec = kvtemplate::EncoderSpec::new(Engine::Vllm);
    spec.chat_rules = ChatRules::reference(Engine::Sglang);
    assert!(matches!(
        kvtemplate::Encoder::new(spec),
        Err(kvtemplate::Error::Spec(_))
    ));
}
