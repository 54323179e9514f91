//! The vectors of models the engines do not render with Jinja (testdata copies of
//! `templates-nonjinja/`), through `kvexact parity`'s dispatch (catalog-resolved renderer per
//! engine path): gpt-oss must pass on every engine path with truth in the file (vLLM chat via
//! harmony, vLLM `/tokenize` and SGLang via the Jinja template, completions); Mistral tekken
//! must pass on every path too (vLLM chat and `/tokenize` via mistral_common's instruct
//! encoding, SGLang via its text form re-encoded, completions); Mistral SentencePiece v7
//! likewise on the vLLM paths (SGLang has no truth for it).

use kvexact_conformance::parity::{check_path, Options};
use std::path::{Path, PathBuf};

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

fn report(file: &str) -> kvexact_conformance::FileReport {
    let models = testdata("models");
    let opts = Options {
        models: Some(&models),
        lifted: false,
    };
    check_path(&testdata(file), opts).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn gptoss_every_engine_path() {
    let r = report("vectors/templates-nonjinja/gptoss-20b-v1.json");
    let failed: Vec<String> = r
        .cases
        .iter()
        .filter_map(|c| c.failure.as_ref().map(|f| format!("{}: {f}", c.name)))
        .collect();
    // 41 chat cases × 3 paths + 6 completion cases × 2 engines.
    assert_eq!(r.cases.len(), 41 * 3 + 6 * 2, "{:?}", r.notes);
    for path in ["/vllm", "/vllm_tokenize", "/sglang"] {
        assert!(r.cases.iter().any(|c| c.name.ends_with(path)), "{path}");
    }
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("vllm (vllm 0.31.0) via harmony")),
        "{:?}",
        r.notes
    );
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn mistral_tekken_every_engine_path() {
    let r = report("vectors/templates-nonjinja/mistral-tekken-v1.json");
    let failed: Vec<String> = r
        .cases
        .iter()
        .filter_map(|c| c.failure.as_ref().map(|f| format!("{}: {f}", c.name)))
        .collect();
    // 35 chat cases × 3 paths + 6 completion cases × 2 engines.
    assert_eq!(r.cases.len(), 35 * 3 + 6 * 2, "{:?}", r.notes);
    for (path, how) in [
        ("vllm", "mistral_common's instruct encoding"),
        ("vllm_tokenize", "mistral_common's instruct encoding"),
        ("sglang", "text form re-encoded"),
    ] {
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains(&format!("{path} (")) && n.contains(how)),
            "{path}: {:?}",
            r.notes
        );
    }
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn mistral_spm_v7_every_engine_path() {
    let r = report("vectors/templates-nonjinja/mistral-spm-v7-v1.json");
    let failed: Vec<String> = r
        .cases
        .iter()
        .filter_map(|c| c.failure.as_ref().map(|f| format!("{}: {f}", c.name)))
        .collect();
    // SGLang did not run (it cannot load the checkpoint): 35 chat cases × 2 vLLM paths + 6
    // completion cases on vLLM.
    assert_eq!(r.cases.len(), 35 * 2 + 6, "{:?}", r.notes);
    assert!(
        r.notes.iter().any(|n| n.contains(
            "vllm (vllm 0.31.0) via mistral_common's instruct encoding (SentencePiece v7)"
        )),
        "{:?}",
        r.notes
    );
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
