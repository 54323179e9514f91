//! The engine's tokenizer loader: which added tokens the tokenizer an engine release serves
//! with keeps. Ground truth `testdata/vectors/loader/gemma2-9b-it-added-tokens.json`
//! (transformers 5.12.1 and 4.57.6 on the pinned gemma-2 files; how to regenerate it is in
//! `scripts/gen_loader_vectors.py`).

use kvtemplate::{spec_from_model_dir_for, AddedTokensRule, Encoder, Engine};
use serde_json::Value;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata"))
}

fn encoder(model: &str, rule: AddedTokensRule) -> Result<Encoder, kvtemplate::Error> {
    let spec = spec_from_model_dir_for(&root().join("models").join(model), Engine::Vllm, rule)?;
    Encoder::new(spec)
}

#[test]
fn each_loader_gives_its_own_stacks_ids() {
    let doc: Value = serde_json::from_slice(
        &std::fs::read(root().join("vectors/loader/gemma2-9b-it-added-tokens.json")).unwrap(),
    )
    .unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() > 900);
    let mut differing = 0;
    for (rule, stack) in [
        (AddedTokensRule::TokenizerConfig, "tf5"),
        (AddedTokensRule::TokenizerJson, "tf4"),
    ] {
        let enc = encoder("google__gemma-2-9b-it", rule).unwrap();
        let tok = enc.tokenizer().unwrap();
        for c in cases {
            let text = c["text"].as_str().unwrap();
            let want: Vec<u32> = c["ids"][stack]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let got = tok.encode(text, false).unwrap();
            assert_eq!(got, want, "{stack} {text:?}");
            if stack == "tf5" && c["ids"]["tf5"] != c["ids"]["tf4"] {
                differing += 1;
            }
        }
    }
    // The two stacks really differ on this model (the test can fail).
    assert_eq!(differing, 25);
}

#[test]
fn a_release_that_allows_both_stacks_refuses_a_model_whose_files_disagree() {
    let e = encoder("google__gemma-2-9b-it", AddedTokensRule::Either).unwrap_err();
    assert!(
        e.to_string().contains("disagree on 32 added token(s)"),
        "{e}"
    );
    // Models whose two files agree are exact under either stack.
    for m in [
        "Qwen__Qwen2.5-7B-Instruct",
        "Qwen__Qwen3-0.6B",
        "meta-llama__Llama-3.1-8B-Instruct",
        "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B",
    ] {
        encoder(m, AddedTokensRule::Either).unwrap_or_else(|e| panic!("{m}: {e}"));
    }
}
