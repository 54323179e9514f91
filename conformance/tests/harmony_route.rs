//! gpt-oss through the gateway's own chat call (`kvtemplate::Encoder::encode_chat`, what
//! `route_keys` and the C ABI run): the encoder `kvprobe::bridge` builds for vLLM 0.31.0 and
//! 0.33.0 renders with harmony (catalog `chat.renderers`, model type from `config.json`) and
//! gives vLLM's chat ids for every case of `templates-nonjinja/gptoss-20b-v1.json` (or refuses
//! where vLLM refused); SGLang 0.5.19's encoder keeps the checkpoint's Jinja template.

use kvexact_conformance::nonjinja::{body_for, fixed_clock_ms};
use kvexact_conformance::templates::ids_of as ids;
use kvtemplate::json::{Json, JsonObject};
use kvtemplate::{ChatRenderer, Engine, Outcome, Refusal};
use std::path::{Path, PathBuf};

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

fn encoder(engine: Engine, version: &str) -> kvtemplate::Encoder {
    let contract = kvprobe::contract::resolve(engine, version).expect("release");
    let dir = testdata("models/openai__gpt-oss-20b");
    let spec = kvtemplate::spec_from_model_dir_for(&dir, engine, contract.added_tokens_rule())
        .expect("spec");
    kvprobe::bridge::encoder_from_spec(spec, &contract, contract.liftable()).expect("encoder")
}

#[test]
fn vllm_routes_gptoss_with_harmony_exactly() {
    let bytes = std::fs::read(testdata("vectors/templates-nonjinja/gptoss-20b-v1.json")).unwrap();
    let doc = kvtemplate::json::parse(&bytes).unwrap();
    let top = doc.as_object().unwrap();
    let now_ms = fixed_clock_ms(top).unwrap().expect("harmony.fixed_clock");
    let cases: Vec<&JsonObject<'_>> = top
        .get("cases")
        .and_then(Json::as_array)
        .unwrap()
        .iter()
        .filter_map(Json::as_object)
        .filter(|c| c.get("kind").and_then(Json::as_str) == Some("chat"))
        .collect();
    for version in ["0.31.0", "0.33.0"] {
        let enc = encoder(Engine::Vllm, version);
        assert!(
            matches!(enc.renderer(), ChatRenderer::Harmony(_)),
            "{version}"
        );
        let (mut exact, mut refused, mut strict, mut server_env) = (0, 0, 0, 0);
        for c in &cases {
            let id = c.get("id").and_then(Json::as_str).unwrap_or("?");
            if c.get("engine_env")
                .is_some_and(|e| !matches!(e, Json::Null))
            {
                // A server started with other harmony settings: not the encoder's defaults.
                server_env += 1;
                continue;
            }
            let body = body_for(c, "vllm");
            let want = ids(c
                .get("engine_token_ids")
                .and_then(Json::as_object)
                .and_then(|o| o.get("vllm")));
            let engine_refused = c
                .get("engine_errors")
                .and_then(Json::as_object)
                .and_then(|o| o.get("vllm"))
                .is_some_and(|e| !matches!(e, Json::Null));
            match enc.encode_chat_to_vec(body.as_bytes(), now_ms, 1 << 20) {
                Ok(Outcome::Done(r)) => {
                    assert!(
                        !engine_refused,
                        "{version} {id}: vLLM refused, kvexact encoded"
                    );
                    assert_eq!(Some(&r.ids), want.as_ref(), "{version} {id}");
                    assert!(!r.truncated);
                    exact += 1;
                    // Cut at a cap: exactly the first ids, `truncated` exactly when more.
                    let n = r.ids.len();
                    for cap in [0, 1, n / 2, n - 1, n] {
                        match enc.encode_chat_to_vec(body.as_bytes(), now_ms, cap) {
                            Ok(Outcome::Done(cut)) => {
                                assert_eq!(cut.ids, r.ids[..cap], "{version} {id} cap {cap}");
                                assert_eq!(cut.truncated, cap < n, "{version} {id} cap {cap}");
                            }
                            other => panic!("{version} {id} cap {cap}: {other:?}"),
                        }
                    }
                }
                Ok(Outcome::Refused(Refusal::TemplateRaised)) => {
                    assert!(engine_refused, "{version} {id}: refused, vLLM encoded");
                    refused += 1;
                }
                Ok(Outcome::Refused(Refusal::Tools)) => {
                    // The strict scan's tools lift covers `tool_choice` absent, null or
                    // "auto" only (as for a Jinja encoder).
                    let choice = c
                        .get("request_extra")
                        .and_then(Json::as_object)
                        .and_then(|o| o.get("tool_choice"));
                    assert!(
                        matches!(choice, Some(Json::Str(s)) if s != "auto")
                            || matches!(choice, Some(Json::Object(_))),
                        "{version} {id}: tools refused with tool_choice {choice:?}"
                    );
                    strict += 1;
                }
                Ok(Outcome::Refused(code)) => panic!("{version} {id}: refused {code:?}"),
                Err(e) => panic!("{version} {id}: {e}"),
            }
        }
        eprintln!(
            "vLLM {version}: {exact} exact, {refused} refused as vLLM refused, {strict} refused \
             by the strict tools scope, {server_env} with other server settings"
        );
        assert!(exact >= 30, "{exact}");
        assert_eq!(exact + refused + strict + server_env, cases.len());
    }
}

#[test]
fn harmony_keeps_the_strict_refusals_that_change_more_than_the_prompt() {
    let enc = encoder(Engine::Vllm, "0.31.0");
    let now = 1_767_225_600_000;
    // cache_salt is lifted as keys only (the release's salt rules are catalog data): the
    // prompt is the one without it.
    let plain = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let salted = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"cache_salt":"s"}"#;
    assert_eq!(
        enc.encode_chat_to_vec(salted.as_bytes(), now, 64).unwrap(),
        enc.encode_chat_to_vec(plain.as_bytes(), now, 64).unwrap()
    );
    for (key, value, code) in [
        ("prompt_token_ids", "[1,2]", Refusal::PromptTokenIds),
        ("chat_template", "\"x\"", Refusal::ChatTemplate),
        ("documents", "[]", Refusal::Documents),
    ] {
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"{key}":{value}}}"#
        );
        assert_eq!(
            enc.encode_chat_to_vec(body.as_bytes(), now, 64).unwrap(),
            Outcome::Refused(code),
            "{key}"
        );
    }
    // reasoning_effort is harmony's own parameter: rendered, not refused.
    let body =
        br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}"#;
    assert!(matches!(
        enc.encode_chat_to_vec(body, now, 1 << 16).unwrap(),
        Outcome::Done(_)
    ));
    // Not lifted, tools are refused as on the strict path.
    let strict = {
        let contract = kvprobe::contract::resolve(Engine::Vllm, "0.31.0").unwrap();
        let dir = testdata("models/openai__gpt-oss-20b");
        let spec =
            kvtemplate::spec_from_model_dir_for(&dir, Engine::Vllm, contract.added_tokens_rule())
                .unwrap();
        kvprobe::bridge::encoder_from_spec(spec, &contract, kvtemplate::RefusalSet::EMPTY).unwrap()
    };
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}"#;
    assert_eq!(
        strict.encode_chat_to_vec(body, now, 64).unwrap(),
        Outcome::Refused(Refusal::Tools)
    );
}

#[test]
fn sglang_keeps_the_jinja_template() {
    let enc = encoder(Engine::Sglang, "0.5.19");
    assert_eq!(enc.renderer(), ChatRenderer::Jinja);
}

#[test]
fn a_release_without_proven_renderer_refuses_chat_and_keeps_completions() {
    // vLLM 0.28.0: no templates-nonjinja vectors, while later releases render gpt-oss with
    // harmony: which renderer serves chat is unknown.
    let enc = encoder(Engine::Vllm, "0.28.0");
    assert!(
        matches!(enc.renderer(), ChatRenderer::Unknown(_)),
        "{:?}",
        enc.renderer()
    );
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    assert!(matches!(
        enc.encode_chat_to_vec(body, 1_767_225_600_000, 64),
        Err(kvtemplate::Error::Unsupported(_))
    ));
    assert!(matches!(
        enc.engine_chat(body, Some(1_767_225_600_000)),
        Err(kvtemplate::Error::Unsupported(_))
    ));
    let mut out = [0u32; 64];
    assert!(matches!(
        enc.encode_completions("Hello world", &mut out),
        Ok(Outcome::Done(_))
    ));
}
