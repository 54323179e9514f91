//! Mistral checkpoints on the gateway's path (templates.md §13.13): a registry profile that
//! pins the checkpoint's own tokenizer file (`tokenizerFile: tekken.json` /
//! `tokenizer.model.v7`), published with kvtemplate's validator, gives through
//! `kvprobe::bridge::encoder` — what `kvexact_encoder_new`, `route_keys` and attest build —
//! each engine release's own ids for every case of the non-Jinja vectors (vLLM 0.31.0 and
//! 0.33.0 with mistral_common; SGLang 0.5.19 re-encoding its text form for tekken), or a
//! refusal where the engine refused or the strict scan keeps a code; the block keys are the
//! hasher's over exactly those ids; a release no vectors prove refuses chat and completions.

use kvexact_conformance::emulator::mistral::MistralCheckpoint;
use kvexact_conformance::emulator::TempRegistry;
use kvexact_conformance::nonjinja::body_for;
use kvexact_conformance::templates::ids_of as ids;
use kvprofile_core::{LoadOptions, LoadedProfile, Registry, TrustPolicy};
use kvtemplate::json::{Json, JsonObject};
use kvtemplate::{ChatRenderer, Engine, Outcome, Refusal};
use std::path::{Path, PathBuf};

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

struct Staged {
    _reg: TempRegistry,
    generation: std::sync::Arc<kvprofile_core::Generation>,
}

fn stage(checkpoint: MistralCheckpoint) -> Staged {
    let reg = TempRegistry::copy_of(&testdata("registry")).expect("copy registry");
    reg.stage_mistral(&testdata(""), checkpoint)
        .expect("stage mistral");
    let generation = publish(&reg).expect("publish");
    Staged {
        _reg: reg,
        generation,
    }
}

/// Publishes `reg` as the gateway's loader does (kvtemplate's validator).
fn publish(
    reg: &TempRegistry,
) -> Result<std::sync::Arc<kvprofile_core::Generation>, kvprofile_core::RegistryError> {
    Registry::new().publish(
        reg.root(),
        &LoadOptions {
            policy: TrustPolicy::for_current_user(),
            ..LoadOptions::default()
        },
        &kvtemplate::KvtemplateValidator,
    )
}

impl Staged {
    fn profile(&self, checkpoint: MistralCheckpoint) -> &LoadedProfile {
        self.generation
            .profile(checkpoint.profile_id())
            .expect("profile")
    }
}

fn cases(checkpoint: MistralCheckpoint) -> Vec<u8> {
    std::fs::read(testdata(&format!(
        "vectors/templates-nonjinja/{}",
        checkpoint.vectors()
    )))
    .unwrap()
}

/// Every case of `checkpoint`'s vectors on `engine` `version` through the registry profile:
/// (exact chat, exact completions, refused as the engine refused, refused by the strict scan).
fn run(
    checkpoint: MistralCheckpoint,
    engine: Engine,
    version: &str,
    truth: &str,
) -> (usize, usize, usize, usize) {
    let staged = stage(checkpoint);
    let lp = staged.profile(checkpoint);
    let contract = kvprobe::contract::resolve(engine, version).expect("release");
    let enc =
        kvprobe::bridge::encoder_with_lifts(lp, &contract, contract.liftable()).expect("encoder");
    assert!(
        matches!(enc.renderer(), ChatRenderer::Mistral(_)),
        "{version}: {:?}",
        enc.renderer()
    );
    let hasher = kvprobe::bridge::hasher(&contract, None, 16, Some("0")).expect("hasher");
    let enc = std::sync::Arc::new(enc);
    let pipeline = kvprobe::pipeline::Pipeline::new(std::sync::Arc::clone(&enc), hasher.clone());
    let bytes = cases(checkpoint);
    let doc = kvtemplate::json::parse(&bytes).unwrap();
    let all: Vec<&JsonObject<'_>> = doc
        .as_object()
        .and_then(|t| t.get("cases"))
        .and_then(Json::as_array)
        .unwrap()
        .iter()
        .filter_map(Json::as_object)
        .collect();
    let (mut chat, mut completions, mut refused, mut strict) = (0, 0, 0, 0);
    for c in all {
        let id = c.get("id").and_then(Json::as_str).unwrap_or("?");
        let want = ids(c
            .get("engine_token_ids")
            .and_then(Json::as_object)
            .and_then(|o| o.get(truth)));
        let engine_refused = c
            .get("engine_errors")
            .and_then(Json::as_object)
            .and_then(|o| o.get(truth))
            .is_some_and(|e| !matches!(e, Json::Null));
        let tag = format!("{} {version} {id}", engine.as_str());
        if c.get("kind").and_then(Json::as_str) == Some("completion") {
            let prompt = c.get("prompt").and_then(Json::as_str).unwrap();
            let want = want.expect("completion ids");
            let mut out = vec![0u32; want.len() + 8];
            match enc.encode_completions(prompt, &mut out) {
                Ok(Outcome::Done(e)) => {
                    assert_eq!(&out[..e.written], &want[..], "{tag}");
                    assert!(!e.truncated, "{tag}");
                }
                other => panic!("{tag}: {other:?}"),
            }
            completions += 1;
            continue;
        }
        let body = body_for(c, "vllm");
        match enc.encode_chat_to_vec(body.as_bytes(), 0, 1 << 20) {
            Ok(Outcome::Done(r)) => {
                assert!(
                    !engine_refused,
                    "{tag}: the engine refused, kvexact encoded"
                );
                assert_eq!(Some(&r.ids), want.as_ref(), "{tag}");
                assert!(!r.truncated, "{tag}");
                // Cut at a cap: exactly the first ids, `truncated` exactly when more.
                let n = r.ids.len();
                for cap in [0, 1, n / 2, n - 1, n] {
                    match enc.encode_chat_to_vec(body.as_bytes(), 0, cap) {
                        Ok(Outcome::Done(cut)) => {
                            assert_eq!(cut.ids, r.ids[..cap], "{tag} cap {cap}");
                            assert_eq!(cut.truncated, cap < n, "{tag} cap {cap}");
                        }
                        other => panic!("{tag} cap {cap}: {other:?}"),
                    }
                }
                // The block keys route_keys sends (the pipeline it runs): the hasher's over
                // exactly the engine's ids.
                let mut want_keys = vec![0u64; n / 16];
                let k = hasher
                    .block_hashes_u64(&r.ids, &mut want_keys)
                    .expect("hash");
                let mut ids_out = vec![0u32; 8];
                let mut keys = vec![0u64; n / 16 + 1];
                let mut scratch = kvtemplate::ScratchBuf::new();
                match pipeline.encode_and_hash_chat(
                    body.as_bytes(),
                    0,
                    &mut ids_out,
                    &mut keys,
                    &mut scratch,
                ) {
                    Ok(Outcome::Done(counts)) => {
                        assert_eq!(counts.hashes, k, "{tag}");
                        assert_eq!(&keys[..k], &want_keys[..k], "{tag}");
                    }
                    other => panic!("{tag}: route keys {other:?}"),
                }
                chat += 1;
            }
            Ok(Outcome::Refused(Refusal::TemplateRaised)) => {
                assert!(engine_refused, "{tag}: refused, the engine encoded");
                refused += 1;
            }
            // Codes the strict scan keeps on every renderer (not liftable): never a promise.
            Ok(Outcome::Refused(code @ (Refusal::ReasoningEffort | Refusal::Tools))) => {
                if code == Refusal::Tools {
                    let choice = c
                        .get("request_extra")
                        .and_then(Json::as_object)
                        .and_then(|o| o.get("tool_choice"));
                    assert!(
                        matches!(choice, Some(Json::Str(s)) if s != "auto"),
                        "{tag}: tools refused with tool_choice {choice:?}"
                    );
                }
                strict += 1;
            }
            Ok(Outcome::Refused(code)) => panic!("{tag}: refused {code:?}"),
            Err(kvtemplate::Error::Unsupported(why)) => {
                // A shape no vector proves: refused, never guessed; the engine refused it too
                // or the walker does not know it.
                eprintln!("{tag}: unsupported ({why})");
                strict += 1;
            }
            Err(e) => panic!("{tag}: {e}"),
        }
    }
    eprintln!(
        "{} {version} {}: {chat} chat exact, {completions} completions exact, {refused} refused \
         as the engine refused, {strict} refused by kvexact's scan",
        engine.as_str(),
        checkpoint.profile_id()
    );
    (chat, completions, refused, strict)
}

#[test]
fn tekken_profile_gives_each_engine_release_its_ids() {
    for version in ["0.31.0", "0.33.0"] {
        let (chat, completions, refused, strict) =
            run(MistralCheckpoint::NemoTekken, Engine::Vllm, version, "vllm");
        // Every case vLLM encoded, except 3 the strict scan keeps (reasoning_effort twice,
        // tool_choice "none").
        assert_eq!((chat, refused, strict), (24, 8, 3));
        assert_eq!(completions, 6);
        assert_eq!(chat + refused + strict, 35);
    }
    let (chat, completions, refused, strict) = run(
        MistralCheckpoint::NemoTekken,
        Engine::Sglang,
        "0.5.19",
        "sglang",
    );
    assert_eq!((chat, refused, strict), (24, 8, 3));
    assert_eq!(completions, 6);
    assert_eq!(chat + refused + strict, 35);
}

#[test]
fn spm_v7_profile_gives_vllm_its_ids() {
    for version in ["0.31.0", "0.33.0"] {
        let (chat, completions, refused, strict) =
            run(MistralCheckpoint::LargeSpmV7, Engine::Vllm, version, "vllm");
        assert_eq!((chat, refused, strict), (25, 7, 3));
        assert_eq!(completions, 6);
        assert_eq!(chat + refused + strict, 35);
    }
}

#[test]
fn a_release_without_proven_renderer_refuses_chat_and_completions() {
    for (checkpoint, engine, version) in [
        // vLLM 0.28.0: no non-Jinja vectors, while later releases render it with mistral_common.
        (MistralCheckpoint::NemoTekken, Engine::Vllm, "0.28.0"),
        // SGLang 0.5.19 cannot load a SentencePiece-only folder: no renderer in the catalog.
        (MistralCheckpoint::LargeSpmV7, Engine::Sglang, "0.5.19"),
    ] {
        let staged = stage(checkpoint);
        let lp = staged.profile(checkpoint);
        let contract = kvprobe::contract::resolve(engine, version).expect("release");
        let enc = kvprobe::bridge::encoder(lp, &contract).expect("encoder");
        assert!(
            matches!(enc.renderer(), ChatRenderer::Unknown(_)),
            "{version}: {:?}",
            enc.renderer()
        );
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        assert!(matches!(
            enc.encode_chat_to_vec(body, 0, 64),
            Err(kvtemplate::Error::Unsupported(_))
        ));
        let mut out = [0u32; 64];
        assert!(matches!(
            enc.encode_completions("Hello world", &mut out),
            Err(kvtemplate::Error::Unsupported(_))
        ));
        assert!(matches!(
            enc.engine_completions("Hello world"),
            Err(kvtemplate::Error::Unsupported(_))
        ));
    }
    // A contract id spanning releases names no renderer either.
    let staged = stage(MistralCheckpoint::NemoTekken);
    let lp = staged.profile(MistralCheckpoint::NemoTekken);
    let enc = kvprobe::bridge::encoder_for_id(lp, "vllm-kv-map-v3").expect("encoder");
    assert!(matches!(enc.renderer(), ChatRenderer::Unknown(_)));
}

#[test]
fn mistral_keeps_the_strict_refusals_that_change_more_than_the_prompt() {
    let staged = stage(MistralCheckpoint::NemoTekken);
    let lp = staged.profile(MistralCheckpoint::NemoTekken);
    let contract = kvprobe::contract::resolve(Engine::Vllm, "0.31.0").unwrap();
    let enc = kvprobe::bridge::encoder(lp, &contract).expect("encoder");
    for (key, value, code) in [
        ("cache_salt", "\"s\"", Refusal::CacheSalt),
        ("prompt_token_ids", "[1,2]", Refusal::PromptTokenIds),
        ("chat_template", "\"x\"", Refusal::ChatTemplate),
        ("documents", "[]", Refusal::Documents),
        ("reasoning_effort", "\"high\"", Refusal::ReasoningEffort),
        (
            "tools",
            r#"[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]"#,
            Refusal::Tools,
        ),
    ] {
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"{key}":{value}}}"#
        );
        assert_eq!(
            enc.encode_chat_to_vec(body.as_bytes(), 0, 64).unwrap(),
            Outcome::Refused(code),
            "{key}"
        );
        assert!(
            enc.refusals_hit(body.as_bytes()).unwrap().contains(code),
            "{key}"
        );
    }
    // NUL in a message is refused; a body over the bound is InputTooLarge.
    let body = br#"{"model":"m","messages":[{"role":"user","content":"a\u0000b"}]}"#;
    assert_eq!(
        enc.encode_chat_to_vec(body, 0, 64).unwrap(),
        Outcome::Refused(Refusal::NulByte)
    );
    let mut out = [0u32; 8];
    assert_eq!(
        enc.encode_completions("a\0b", &mut out).unwrap(),
        Outcome::Refused(Refusal::NulByte)
    );
    // render_chat leaves mistral_common's text form.
    let mut scratch = kvtemplate::ScratchBuf::new();
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    assert!(matches!(
        enc.render_chat(body, 0, &mut scratch),
        Ok(Outcome::Done(()))
    ));
    assert_eq!(scratch.rendered(), "<s>[INST]hi[/INST]");
}

#[test]
fn a_mistral_profile_is_checked_at_publish() {
    // A tekken.json profile must not carry a template; a file that does not load fails publish.
    let reg = TempRegistry::copy_of(&testdata("registry")).expect("copy registry");
    reg.stage_mistral(&testdata(""), MistralCheckpoint::NemoTekken)
        .unwrap();
    let id = MistralCheckpoint::NemoTekken.profile_id();
    let doc = std::fs::read_to_string(reg.root().join(format!("{id}.yaml"))).unwrap();
    let with_template = doc.replace(
        "renderPolicy:",
        "templateArtifact: sha256/0000000000000000000000000000000000000000000000000000000000000000\n\
         templateSha256: 0000000000000000000000000000000000000000000000000000000000000000\n\
         templateContentFormat: string\nrenderPolicy:",
    );
    let err = kvprofile_core::Profile::parse(with_template.as_bytes(), "p.yaml").unwrap_err();
    assert!(err.to_string().contains("tekken.json"), "{err}");
    // The SentencePiece file under tokenizerFile tekken.json: publish refuses it.
    let spm = std::fs::read(testdata(
        "models/mistralai__Mistral-Large-Instruct-2411/tokenizer.model.v7",
    ))
    .unwrap();
    let h = hex_sha(&spm);
    reg.write(&format!("artifacts/sha256/{h}"), &spm).unwrap();
    let wrong = doc
        .lines()
        .map(|l| {
            if l.starts_with("tokenizerArtifact:") {
                format!("tokenizerArtifact: sha256/{h}")
            } else if l.starts_with("tokenizerSha256:") {
                format!("tokenizerSha256: {h}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    reg.write(&format!("{id}.yaml"), wrong.as_bytes()).unwrap();
    let err = publish(&reg).unwrap_err();
    assert!(err.to_string().contains("tekken.json"), "{err}");
}

fn hex_sha(b: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(b))
}

#[test]
fn admission_admits_own_renderers_on_a_proven_release_only() {
    use kvprobe::admission::{admit, Rule};
    use kvprobe::fixtures::ApiMode;
    let rule = |r: Result<(), kvprobe::admission::AdmissionRefusal>| r.err().map(|e| e.rule);
    let staged = stage(MistralCheckpoint::NemoTekken);
    let nemo = staged.profile(MistralCheckpoint::NemoTekken);
    let m = MistralCheckpoint::NemoTekken.model();
    // Releases whose every version's vectors prove the renderer.
    for release in ["vllm-kv-map-v3-r0.33", "sglang-kv-rank-v2-r0.5.19"] {
        assert_eq!(admit(nemo, m, release, ApiMode::Both), Ok(()), "{release}");
    }
    // A contract id (its releases differ), a release without vectors, or one with a version
    // no vectors cover (vllm-kv-map-v3-r0.31 also spans 0.32.0): chat refused.
    for c in [
        "vllm-kv-map-v3-r0.31",
        "vllm-kv-map-v3",
        "vllm-kv-map-v2-r0.24",
        "sglang-kv-rank-v2",
    ] {
        let r = admit(nemo, m, c, ApiMode::Chat);
        assert_eq!(rule(r.clone()), Some(Rule::EngineRenderer), "{c}: {r:?}");
        assert!(r.unwrap_err().detail.contains("tekken.json"));
    }
    let staged = stage(MistralCheckpoint::LargeSpmV7);
    let large = staged.profile(MistralCheckpoint::LargeSpmV7);
    let m = MistralCheckpoint::LargeSpmV7.model();
    assert_eq!(
        admit(large, m, "vllm-kv-map-v3-r0.33", ApiMode::Chat),
        Ok(())
    );
    // SGLang 0.5.19 cannot load a SentencePiece-only checkpoint.
    assert_eq!(
        rule(admit(large, m, "sglang-kv-rank-v2-r0.5.19", ApiMode::Chat)),
        Some(Rule::EngineRenderer)
    );
    // gpt-oss: harmony on vLLM 0.33.0's release; the vLLM contract, the release that also
    // spans 0.32.0, and TensorRT-LLM refused.
    let reg = TempRegistry::copy_of(&testdata("registry")).expect("copy registry");
    reg.stage_gptoss(&testdata("")).unwrap();
    let generation = publish(&reg).expect("publish");
    let gptoss = generation
        .profile(kvexact_conformance::emulator::gptoss::GPTOSS_PROFILE)
        .unwrap();
    let m = kvexact_conformance::emulator::gptoss::GPTOSS_MODEL;
    assert_eq!(
        admit(gptoss, m, "vllm-kv-map-v3-r0.33", ApiMode::Both),
        Ok(())
    );
    for c in [
        "vllm-kv-map-v3",
        "vllm-kv-map-v3-r0.31",
        "trtllm-kv-http-v2-r1.3.0rc29",
    ] {
        assert_eq!(
            rule(admit(gptoss, m, c, ApiMode::Chat)),
            Some(Rule::EngineRenderer),
            "{c}"
        );
        assert_eq!(admit(gptoss, m, c, ApiMode::Completions), Ok(()), "{c}");
    }
}

/// A NUL anywhere in the request's text is refused on both checkpoints whatever the cap: the
/// check reads the text form, not the ids (which stop at the cap, and which SentencePiece
/// spells `<0x00>`), so a NUL in a turn past the cap is refused as one before it.
#[test]
fn a_nul_is_refused_whatever_the_cap_on_both_tokenizers() {
    let bodies = [
        br#"{"model":"m","messages":[{"role":"user","content":"a\u0000b"}]}"#.to_vec(),
        // A conversation whose NUL sits in its last turn, far past a small cap.
        format!(
            r#"{{"model":"m","messages":[{{"role":"system","content":"{sys}"}},{{"role":"user","content":"hi"}},{{"role":"assistant","content":"hello"}},{{"role":"user","content":"then\u0000"}}]}}"#,
            sys = "You are a careful assistant. ".repeat(40)
        )
        .into_bytes(),
    ];
    for checkpoint in [MistralCheckpoint::NemoTekken, MistralCheckpoint::LargeSpmV7] {
        let staged = stage(checkpoint);
        let lp = staged.profile(checkpoint);
        let contract = kvprobe::contract::resolve(Engine::Vllm, "0.31.0").unwrap();
        let enc = kvprobe::bridge::encoder(lp, &contract).expect("encoder");
        for body in &bodies {
            // The same body without its NUL encodes: the refusal is the NUL's alone.
            let clean = String::from_utf8(body.clone())
                .unwrap()
                .replace("\\u0000", "");
            let n = match enc.encode_chat_to_vec(clean.as_bytes(), 0, 1 << 20) {
                Ok(Outcome::Done(r)) => r.ids.len(),
                other => panic!("{}: {other:?}", checkpoint.profile_id()),
            };
            for cap in [0, 1, 16, n, 1 << 20] {
                assert_eq!(
                    enc.encode_chat_to_vec(body, 0, cap).unwrap(),
                    Outcome::Refused(Refusal::NulByte),
                    "{} cap {cap}",
                    checkpoint.profile_id()
                );
            }
        }
    }
}
