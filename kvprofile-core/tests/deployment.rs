//! Deployments resolved against the built-in catalog's releases
//! (`kvprofile_core::deployment`): what each release honours, and the refusals that name the
//! option.

use kvprofile_core::deployment::{Deployment, KeyForm};
use kvprofile_core::{Engine, Release, Result};
fn release(id: &str, version: &str) -> Release {
    let cat = kvprofile_core::contracts::builtin().unwrap();
    let r = cat
        .resolve_release(
            if id == "sglang" {
                Engine::Sglang
            } else {
                Engine::Vllm
            },
            version,
        )
        .unwrap();
    r.clone()
}

fn parse(s: &str) -> Result<Deployment> {
    Deployment::parse(s.as_bytes(), "<test>")
}

#[test]
fn unknown_field_is_a_schema_error() {
    let e = parse("blockSize: 16\nspeculativ: {}\n").unwrap_err();
    assert_eq!(e.code(), "DEPLOYMENT_SCHEMA");
    let e = parse("speculative: {method: eagle, numSpeculativeTokens: 2, extra: 1}\n").unwrap_err();
    assert_eq!(e.code(), "DEPLOYMENT_SCHEMA");
}

#[test]
fn shape_errors_name_the_field() {
    let e = parse("blockSize: 0\n").unwrap_err();
    assert_eq!(e.code(), "DEPLOYMENT_INVALID");
    assert!(e.to_string().contains("blockSize"), "{e}");
    let e = parse("loraAdapters: [{name: a, path: /x}, {name: a, path: /y}]\n").unwrap_err();
    assert!(e.to_string().contains("declared twice"), "{e}");
    let e = parse("speculative: {method: eagle, numSpeculativeTokens: 0}\n").unwrap_err();
    assert!(e.to_string().contains("numSpeculativeTokens"), "{e}");
}

#[test]
fn vllm_lookahead_per_method() {
    let r = release("vllm", "0.33.0");
    let k = |s: &str| parse(s).unwrap().resolve(&r, "<test>");
    let eagle =
        k("blockSize: 16\nspeculative: {method: eagle, numSpeculativeTokens: 2}\n").unwrap();
    assert_eq!(eagle.key_form, KeyForm::Lookahead(1));
    assert_eq!(eagle.key_form.hit_offset(), 1);
    let single = k("blockSize: 16\nspeculative: {method: mtp, numSpeculativeTokens: 3}\n").unwrap();
    assert_eq!(single.key_form, KeyForm::Lookahead(1));
    let multi =
        k("blockSize: 16\nspeculative: {method: mtp, numSpeculativeTokens: 3, mtpModules: 3}\n")
            .unwrap();
    assert_eq!(multi.key_form, KeyForm::Lookahead(3));
    assert_eq!(multi.key_form.hit_offset(), 3);
    let e =
        k("blockSize: 16\nspeculative: {method: ngram, numSpeculativeTokens: 3}\n").unwrap_err();
    assert_eq!(e.code(), "DEPLOYMENT_UNSUPPORTED");
    assert!(e.to_string().contains("speculative.method"), "{e}");
    let e = k(
        "blockSize: 16\nspeculative: {method: eagle, numSpeculativeTokens: 2, \
               disableLookaheadBlockHashes: true}\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("disableLookaheadBlockHashes"), "{e}");
    let e = k("blockSize: 2\nspeculative: {method: mtp, numSpeculativeTokens: 3, mtpModules: 3}\n")
        .unwrap_err();
    assert!(e.to_string().contains("blockSize"), "{e}");
}

#[test]
fn vllm_0_34_defaults_to_64_token_blocks_and_keys_lookahead() {
    let r = release("vllm", "0.34.0");
    let k = parse("speculative: {method: mtp, numSpeculativeTokens: 3, mtpModules: 3}\n")
        .unwrap()
        .resolve(&r, "<test>")
        .unwrap();
    assert_eq!((k.block_size, k.key_form), (64, KeyForm::Lookahead(3)));
    let k = parse("{}")
        .unwrap()
        .resolve(&release("vllm", "0.33.0"), "<t>")
        .unwrap();
    assert_eq!(k.block_size, 16);
}

#[test]
fn releases_without_the_rule_refuse_speculative_decoding() {
    let r = release("vllm", "0.31.0");
    let e = parse("blockSize: 16\nspeculative: {method: eagle, numSpeculativeTokens: 2}\n")
        .unwrap()
        .resolve(&r, "<test>")
        .unwrap_err();
    assert_eq!(e.code(), "DEPLOYMENT_UNSUPPORTED");
}

#[test]
fn sglang_bigram_and_options_that_are_not_sglangs() {
    let r = release("sglang", "0.5.19");
    let k = parse("blockSize: 16\nspeculative: {method: EAGLE, numSpeculativeTokens: 4}\n")
        .unwrap()
        .resolve(&r, "<test>")
        .unwrap();
    assert_eq!(k.key_form, KeyForm::Bigram);
    assert_eq!(k.key_form.hit_offset(), 2);
    let e = parse("blockSize: 16\nhashSeed: '0'\n")
        .unwrap()
        .resolve(&r, "<t>")
        .unwrap_err();
    assert!(e.to_string().contains("hashSeed"), "{e}");
    let e = parse("blockSize: 16\nkvEventsFormat: dynamo\n")
        .unwrap()
        .resolve(&r, "<t>")
        .unwrap_err();
    assert!(e.to_string().contains("kvEventsFormat"), "{e}");
    // Absent, the block size is the release's default (catalog hash.defaultBlockSize).
    let k = parse("{}").unwrap().resolve(&r, "<t>").unwrap();
    assert_eq!(k.block_size, r.hash.as_ref().unwrap().default_block_size);
}

#[test]
fn vllm_adapters_need_their_path_from_0_31() {
    let r = release("vllm", "0.31.0");
    let e = parse("blockSize: 16\nloraAdapters: [{name: sql, path: ''}]\n")
        .unwrap()
        .resolve(&r, "<t>")
        .unwrap_err();
    assert!(e.to_string().contains("loraAdapters"), "{e}");
    let k = parse("blockSize: 16\nloraAdapters: [{name: sql, path: /a/sql}]\n")
        .unwrap()
        .resolve(&r, "<t>")
        .unwrap();
    assert_eq!(k.adapter("sql").map(|a| a.path.as_str()), Some("/a/sql"));
    assert!(k.adapters_in_keys);
    let e = parse("blockSize: 16\nhashAlgorithm: sha256_sglang\n")
        .unwrap()
        .resolve(&r, "<t>")
        .unwrap_err();
    assert!(e.to_string().contains("hashAlgorithm"), "{e}");
}
