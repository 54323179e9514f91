//! Agentic requests exactly: every chat case of the template vectors — the reference sets
//! (`testdata/vectors/templates/*.json`: vLLM 0.31.0, SGLang 0.5.19, TensorRT-LLM 1.3.0rc29)
//! and the per-release sets (`testdata/vectors/versions/*/templates/*.json`) — sent as the
//! OpenAI request the engines were sent, through the gateway's strict encoder with the codes
//! it hits lifted (as far as that release's contract allows, `chat.liftable` in the catalog),
//! yields exactly `engine_token_ids[engine]`, or a refusal where `engine_errors` names the
//! engine; with nothing lifted, the same request is refused with the first code it hits.
//! `kvexact_conformance::templates::check_file_lifted` does the checking; the releases are resolved
//! through the catalog here, as `kvexact parity --lifted` does.

use kvexact_conformance::templates::{check_file_lifted, LiftTally};
use kvprobe::contract;
use kvtemplate::{ChatRules, Engine, Refusal, RefusalSet};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata");

/// The catalog's answer for a release: its proven chat rules and its liftable codes.
fn resolve(e: Engine, version: &str) -> Result<(ChatRules, RefusalSet), String> {
    let c = contract::resolve(e, version).map_err(|e| e.to_string())?;
    let rules = c
        .chat()
        .copied()
        .ok_or_else(|| format!("{} has no proven chat rules", c.release_id()))?;
    Ok((rules, c.liftable()))
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut f: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    f.sort();
    f
}

/// Checks `files`; every case must pass. Returns the tally per `engine version` and the
/// number of chat cases.
fn run(files: &[PathBuf]) -> (BTreeMap<String, LiftTally>, usize) {
    let models = Path::new(TESTDATA).join("models");
    let mut per: BTreeMap<String, Vec<LiftTally>> = BTreeMap::new();
    let mut cases = 0;
    for p in files {
        let bytes = std::fs::read(p).unwrap();
        let rep = check_file_lifted(&bytes, &models, &resolve)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let fails: Vec<String> = rep
            .report
            .cases
            .iter()
            .filter_map(|c| c.failure.as_ref().map(|f| format!("{}: {f}", c.name)))
            .collect();
        assert!(
            fails.is_empty(),
            "{}: {} failed:\n{}",
            p.display(),
            fails.len(),
            fails.join("\n")
        );
        cases += rep.report.cases.len();
        for (e, v, t) in rep.engines {
            per.entry(format!("{} {v}", e.as_str()))
                .or_default()
                .push(t);
        }
    }
    let sums = per
        .into_iter()
        .map(|(k, ts)| (k, LiftTally::sum(&ts)))
        .collect();
    (sums, cases)
}

fn hits(t: &LiftTally) -> Vec<(&'static str, usize)> {
    t.hits.iter().map(|(r, n)| (r.as_str(), *n)).collect()
}

/// The codes the 167 chat cases of the five tokenizer profiles hit (the same requests for
/// every engine: hits depend on the request and the template, not the engine).
const REFERENCE_HITS: [(&str, usize); 8] = [
    ("tools", 23),
    ("template_kwargs", 4),
    ("add_generation_prompt", 16),
    ("continue_final_message", 5),
    ("multi_text_part", 5),
    ("trailing_assistant", 16),
    ("message_field", 10),
    ("null_content", 3),
];

#[test]
fn reference_sets_give_each_engines_ids_through_the_lifted_strict_encoder() {
    let files = json_files(&Path::new(TESTDATA).join("vectors/templates"));
    assert_eq!(files.len(), 6);
    let (per, cases) = run(&files);
    for (k, t) in &per {
        println!("templates/ {k}: {t}");
    }
    // 199 chat cases in six files; EXAONE's 32 are render-only (no engine truth).
    assert_eq!(cases, 199);
    let vllm = &per["vllm 0.31.0"];
    let sglang = &per["sglang 0.5.19"];
    let trt = &per["trtllm 1.3.0rc29"];
    for t in [vllm, sglang, trt] {
        assert_eq!(t.cases, 167);
        assert_eq!(hits(t), REFERENCE_HITS);
        assert_eq!(t.ids + t.refused, t.cases);
        assert_eq!(t.strict + t.lifted + t.not_liftable, t.cases);
    }
    // (exact ids, refused as the engine refuses, cases that needed a lift, not liftable)
    let counts = |t: &LiftTally| (t.ids, t.refused, t.lifted, t.not_liftable);
    // 114 cases hit no code (the strict path), 53 need lifts; the refusals are the template
    // errors the engines raise (Gemma 2's system role and alternation, Llama 3.1's tools
    // without a user message, SGLang's relabelled final assistant turn on Gemma 2).
    assert_eq!(counts(vllm), (157, 10, 53, 0));
    assert_eq!(counts(sglang), (155, 12, 53, 0));
    // TensorRT-LLM: continue_final_message is not liftable there (the engine refuses it with
    // HTTP 400), so its 5 cases stay refused with that code.
    assert_eq!(counts(trt), (152, 15, 48, 5));
}

#[test]
fn release_sets_give_their_releases_ids_through_the_lifted_strict_encoder() {
    let mut files = Vec::new();
    for set in ["vllm-0.29.0", "sglang-0.5.23"] {
        files.extend(json_files(
            &Path::new(TESTDATA).join(format!("vectors/versions/{set}/templates")),
        ));
    }
    assert_eq!(files.len(), 10);
    let (per, cases) = run(&files);
    for (k, t) in &per {
        println!("versions/ {k}: {t}");
    }
    assert_eq!(cases, 2 * 167);
    assert_eq!(per.len(), 2);
    let counts = |t: &LiftTally| (t.cases, t.ids, t.refused, t.lifted);
    assert_eq!(counts(&per["vllm 0.29.0"]), (167, 157, 10, 53));
    assert_eq!(counts(&per["sglang 0.5.23"]), (167, 155, 12, 53));
    for t in per.values() {
        assert_eq!(hits(t), REFERENCE_HITS);
    }
}

#[test]
fn the_lifted_path_uses_the_releases_rules() {
    // SGLang 0.5.23's set checked with 0.5.19's tool serialisation: exactly the 14 tool cases
    // the file marks as differing from the reference fail (the lifted requests are rendered
    // under the encoder's chat rules, not some fixed shape).
    let reference = |e: Engine, v: &str| {
        let (_, lifts) = resolve(e, v)?;
        Ok((ChatRules::reference(e).ok_or("no chat path")?, lifts))
    };
    let models = Path::new(TESTDATA).join("models");
    let mut failed = 0;
    let mut marked = 0;
    for p in json_files(&Path::new(TESTDATA).join("vectors/versions/sglang-0.5.23/templates")) {
        let bytes = std::fs::read(&p).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let differs: Vec<&str> = doc["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["differs_from_reference"].get("sglang").is_some())
            .filter_map(|c| c["id"].as_str())
            .collect();
        let rep = check_file_lifted(&bytes, &models, &reference).unwrap();
        let bad: Vec<&str> = rep
            .report
            .cases
            .iter()
            .filter(|c| c.failure.is_some())
            .filter_map(|c| c.name.rsplit('/').next())
            .collect();
        assert_eq!(bad, differs, "{}", p.display());
        failed += bad.len();
        marked += differs.len();
    }
    assert_eq!((failed, marked), (14, 14));
}

#[test]
fn a_release_without_proven_chat_rules_fails_the_lifted_check() {
    // vLLM 0.32.0 shares 0.31.0's release but not its chat vectors: nothing is liftable but
    // cache_salt (keys only: the release's salt rules are catalog data), and the lifted check
    // of a file naming it is refused by the resolver.
    let c = contract::resolve(kvprobe::Engine::Vllm, "0.32.0").unwrap();
    assert_eq!(c.liftable(), RefusalSet::of(&[Refusal::CacheSalt]));
    assert!(resolve(Engine::Vllm, "0.32.0").is_err());
    // The codes the catalog lists are exactly the ones kvtemplate can lift, less TensorRT-LLM's
    // continue_final_message.
    let trt = contract::resolve(kvprobe::Engine::Trtllm, "1.3.0rc29").unwrap();
    assert_eq!(
        trt.liftable(),
        RefusalSet::LIFTABLE.difference(RefusalSet::of(&[Refusal::ContinueFinalMessage]))
    );
}

#[test]
fn the_hot_path_routes_lifted_requests_with_the_engines_block_hashes() {
    use kvprobe::bridge;
    use kvprobe::pipeline::Pipeline;
    use kvtemplate::{Outcome, ScratchBuf};
    use std::sync::Arc;
    // An agent turn: tools, the assistant's tool call, the tool's result (Qwen2.5 template).
    let body = br#"{"model":"m","messages":[
        {"role":"user","content":"Weather in Seoul?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Seoul\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"{\"temperature\": 21}"}],
        "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}"#;
    let dir = Path::new(TESTDATA).join("models/Qwen__Qwen2.5-7B-Instruct");
    for (e, v) in [
        (Engine::Vllm, "0.31.0"),
        (Engine::Sglang, "0.5.23"),
        (Engine::Trtllm, "1.3.0rc29"),
    ] {
        let c = contract::resolve(e, v).unwrap();
        let spec = kvtemplate::spec_from_model_dir(&dir, e).unwrap();
        let lifts = RefusalSet::parse("tools,message_field").unwrap();
        let enc = Arc::new(bridge::encoder_from_spec(spec, &c, lifts).unwrap());
        let want = enc.engine_chat(body, Some(0)).unwrap().ids.unwrap();
        let hasher = bridge::hasher(&c, None, 16, Some("0")).unwrap();
        let mut want_hashes = vec![0u64; want.len() / 16];
        let n = hasher.block_hashes_u64(&want, &mut want_hashes).unwrap();
        assert!(n >= 2, "{e:?}: {n} blocks");
        let p = Pipeline::new(enc, hasher);
        let mut scratch = ScratchBuf::new();
        let mut ids = vec![0u32; 4096];
        let mut hashes = vec![0u64; 256];
        let got = p
            .encode_and_hash_chat(body, 0, &mut ids, &mut hashes, &mut scratch)
            .unwrap();
        let Outcome::Done(counts) = got else {
            panic!("{e:?}: {got:?}")
        };
        assert_eq!(&ids[..counts.ids], &want[..], "{e:?}");
        assert_eq!(&hashes[..counts.hashes], &want_hashes[..n], "{e:?}");
        // Batched, beside a request that still refuses (cache_salt is never liftable).
        let salted = br#"{"messages":[{"role":"user","content":"hi"}],"cache_salt":"s"}"#;
        let (mut bids, mut bhashes, mut items) = (Vec::new(), Vec::new(), Vec::new());
        p.encode_and_hash_chat_batch(
            &[body, salted],
            0,
            &mut bids,
            &mut bhashes,
            &mut items,
            &mut scratch,
        );
        assert_eq!(&bids[items[0].ids.clone()], &want[..]);
        assert_eq!(&bhashes[items[0].hashes.clone()], &want_hashes[..n]);
        assert!(matches!(
            items[1].outcome,
            Ok(Outcome::Refused(Refusal::CacheSalt))
        ));
        // The same body on the strict encoder refuses.
        let strict = bridge::encoder_from_spec(
            kvtemplate::spec_from_model_dir(&dir, e).unwrap(),
            &c,
            RefusalSet::EMPTY,
        )
        .unwrap();
        assert!(matches!(
            strict.encode_chat_to_vec(body, 0, 4096),
            Ok(Outcome::Refused(Refusal::Tools))
        ));
    }
}
