//! gpt-oss through harmony (`kvtemplate::harmony`, docs/contracts/templates.md §13) against the
//! vLLM 0.31.0 ids of `testdata/vectors/templates-nonjinja/gptoss-20b-v1.json` (vLLM 0.33.0
//! gives the same), plus the refusals and bounds kvexact adds.

use kvtemplate::harmony::{HarmonyConfig, HarmonyEncoder};
use kvtemplate::{Error, InputLimits};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

fn encoder() -> &'static HarmonyEncoder {
    static ENC: OnceLock<HarmonyEncoder> = OnceLock::new();
    ENC.get_or_init(|| {
        let tok = std::fs::read(testdata("models/openai__gpt-oss-20b/tokenizer.json"))
            .expect("gpt-oss tokenizer.json");
        HarmonyEncoder::from_tokenizer_json(&tok, HarmonyConfig::vllm()).expect("loads")
    })
}

fn vectors() -> Value {
    let bytes = std::fs::read(testdata("vectors/templates-nonjinja/gptoss-20b-v1.json"))
        .expect("vector file");
    serde_json::from_slice(&bytes).expect("JSON")
}

/// 2026-03-14T09:30:00 UTC, the vectors' `harmony.fixed_clock`.
const NOW_MS: i64 = 1_773_480_600_000;

/// The chat body the generator posted (`engine_truth.request_rule`), in document order (tool
/// schemas render in their key order, so the case is read with `kvtemplate::json`).
fn body(raw: &kvtemplate::json::JsonObject<'_>) -> String {
    use kvtemplate::json::{Json, JsonObject};
    use std::borrow::Cow;
    let mut b: Vec<(Cow<'_, str>, Json<'_>)> = vec![
        ("model".into(), Json::Str("gpt-oss".into())),
        (
            "messages".into(),
            raw.get("messages").cloned().unwrap_or(Json::Null),
        ),
    ];
    if let Some(t) = raw.get("tools") {
        b.push(("tools".into(), t.clone()));
    }
    if let Some(Json::Bool(false)) = raw.get("add_generation_prompt") {
        b.push(("add_generation_prompt".into(), Json::Bool(false)));
    }
    if let Some(Json::Bool(true)) = raw.get("continue_final_message") {
        b.push(("continue_final_message".into(), Json::Bool(true)));
    }
    if let Some(k) = raw.get("template_kwargs") {
        b.push(("chat_template_kwargs".into(), k.clone()));
    }
    if let Some(Json::Object(extra)) = raw.get("request_extra") {
        for (k, v) in &extra.0 {
            b.push((k.clone(), v.clone()));
        }
    }
    Json::Object(JsonObject(b)).to_json_string()
}

fn config_for(c: &Value) -> HarmonyConfig {
    let mut config = HarmonyConfig::vllm();
    if let Some(Value::Object(env)) = c.get("engine_env") {
        for (k, v) in env {
            match (k.as_str(), v.as_str()) {
                ("VLLM_SYSTEM_START_DATE", Some(d)) => config.start_date = Some(d.to_string()),
                ("VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS", Some(v)) => {
                    config.instructions_in_system = v == "1"
                }
                other => panic!("engine_env {other:?} not modelled"),
            }
        }
    }
    config
}

#[test]
fn every_chat_case_gives_vllms_ids_or_refusal() {
    let doc = vectors();
    let bytes = std::fs::read(testdata("vectors/templates-nonjinja/gptoss-20b-v1.json")).unwrap();
    let raw = kvtemplate::json::parse(&bytes).unwrap();
    let raw_cases = raw
        .as_object()
        .and_then(|o| o.get("cases"))
        .and_then(|c| c.as_array())
        .unwrap();
    let mut checked = 0;
    for (c, rc) in doc["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .zip(raw_cases)
    {
        if c["kind"] != "chat" {
            continue;
        }
        let id = c["id"].as_str().unwrap_or("?");
        let enc = encoder().reconfigured(config_for(c));
        let got = enc.engine_chat(body(rc.as_object().unwrap()).as_bytes(), Some(NOW_MS));
        match (&c["engine_token_ids"]["vllm"], &c["engine_errors"]["vllm"]) {
            (Value::Array(want), _) => {
                let want: Vec<u32> = want.iter().map(|v| v.as_u64().unwrap() as u32).collect();
                let got = got.unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(
                    got.rendered,
                    c["rendered"].as_str().unwrap(),
                    "{id}: rendered"
                );
                assert_eq!(got.ids.as_deref(), Some(&want[..]), "{id}: ids");
            }
            (_, Value::String(want)) => match got {
                Err(Error::EngineRequest(m)) => assert_eq!(&m, want, "{id}"),
                other => panic!("{id}: want the refusal {want:?}, got {other:?}"),
            },
            _ => panic!("{id}: no vllm truth"),
        }
        checked += 1;
    }
    assert_eq!(checked, 41);
}

#[test]
fn the_date_is_the_requests_utc_date_or_the_servers_fixed_one() {
    let b = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
    let late = encoder()
        .engine_chat(b, Some(NOW_MS + 14 * 3_600_000 + 29 * 60_000))
        .unwrap();
    assert!(late.rendered.contains("Current date: 2026-03-14\n"));
    let next = encoder()
        .engine_chat(b, Some(NOW_MS + 14 * 3_600_000 + 30 * 60_000))
        .unwrap();
    assert!(next.rendered.contains("Current date: 2026-03-15\n"));
    assert!(matches!(
        encoder().engine_chat(b, None),
        Err(Error::Unsupported(_))
    ));
    let mut fixed = HarmonyConfig::vllm();
    fixed.start_date = Some("2025-01-01".into());
    let f = encoder().reconfigured(fixed).engine_chat(b, None).unwrap();
    assert!(f.rendered.contains("Current date: 2025-01-01\n"));
}

#[test]
fn shapes_no_vector_covers_are_refused() {
    for b in [
        r#"{"messages":[{"role":"user","content":"hi","name":"bob"}]}"#,
        r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}"#,
        r#"{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}"#,
        r#"{"messages":[{"role":"system","content":""},{"role":"user","content":"hi"}]}"#,
        r#"{"messages":[{"role":"user","content":null}]}"#,
        r#"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"object","default":{"x":1}}}}}}]}"#,
        r#"{"messages":[{"role":"user","content":"hi"}],"tools":[]}"#,
    ] {
        match encoder().engine_chat(b.as_bytes(), Some(NOW_MS)) {
            Err(Error::Unsupported(_)) => {}
            other => panic!("{b}: want unsupported, got {other:?}"),
        }
    }
    for b in [
        r#"{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true,"continue_final_message":true}"#,
        r#"{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":3}"#,
        r#"{"messages":[{"role":"wizard","content":"hi"}]}"#,
    ] {
        assert!(
            matches!(
                encoder().engine_chat(b.as_bytes(), Some(NOW_MS)),
                Err(Error::EngineRequest(_))
            ),
            "{b}"
        );
    }
    assert!(matches!(
        encoder().engine_chat(b"[", Some(NOW_MS)),
        Err(Error::Request(_))
    ));
}

#[test]
fn bounds_are_checked_before_the_work() {
    let small = encoder()
        .reconfigured(HarmonyConfig::vllm())
        .with_limits(InputLimits {
            max_body_bytes: 64,
            ..InputLimits::default()
        });
    let long = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(100)
    );
    assert!(matches!(
        small.engine_chat(long.as_bytes(), Some(NOW_MS)),
        Err(Error::InputTooLarge(_))
    ));
    // One long word: o200k is on kvtoken's fast path, which sees pre-tokens, so the word
    // is over the word bound before it is encoded.
    assert!(
        encoder().ordinary().is_fast(),
        "{:?}",
        encoder().ordinary().path()
    );
    let tight = encoder()
        .reconfigured(HarmonyConfig::vllm())
        .with_limits(InputLimits {
            max_word_bytes: 1000,
            ..InputLimits::default()
        });
    let word = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "y".repeat(2000)
    );
    match tight.engine_chat(word.as_bytes(), Some(NOW_MS)) {
        Err(Error::InputTooLarge(hit)) => {
            assert_eq!(hit.limit, kvtemplate::Limit::WordBytes);
            assert_eq!((hit.max, hit.actual), (1000, 2000));
        }
        other => panic!("want input_too_large, got {other:?}"),
    }
    // The same text in words of under the bound is encoded.
    let words = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "y ".repeat(1000)
    );
    assert!(tight.engine_chat(words.as_bytes(), Some(NOW_MS)).is_ok());
    // On kvtoken's fallback path (a layout it does not recognise: a Lowercase normalizer),
    // the whole piece is over the fallback bound before the stock tokenizer sees it.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/models/openai__gpt-oss-20b/tokenizer.json"
    );
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("tokenizer.json")).expect("JSON");
    json["normalizer"] = serde_json::json!({"type": "Lowercase"});
    let bytes = serde_json::to_vec(&json).expect("JSON");
    let slow = HarmonyEncoder::from_tokenizer_json(&bytes, HarmonyConfig::vllm())
        .expect("loads")
        .with_limits(InputLimits {
            max_fallback_bytes: 1000,
            ..InputLimits::default()
        });
    assert!(!slow.ordinary().is_fast(), "{:?}", slow.ordinary().path());
    match slow.engine_chat(word.as_bytes(), Some(NOW_MS)) {
        Err(Error::InputTooLarge(hit)) => assert_eq!(hit.limit, kvtemplate::Limit::FallbackBytes),
        other => panic!("want input_too_large, got {other:?}"),
    }
}

/// Realistic traffic: each turn of a growing conversation (no reasoning to drop) renders to
/// ids whose head, up to the final `<|start|>assistant`, is a prefix of the next turn's, so
/// its KV blocks are shared.
#[test]
fn growing_conversations_share_their_prefix() {
    let mut msgs = vec![
        json!({"role": "system", "content": "You are terse."}),
        json!({"role": "user", "content": "Name a prime."}),
    ];
    let mut prev: Option<Vec<u32>> = None;
    for turn in 0..6 {
        let b = json!({"messages": msgs}).to_string();
        let ids = encoder()
            .engine_chat(b.as_bytes(), Some(NOW_MS))
            .unwrap()
            .ids
            .unwrap();
        if let Some(p) = &prev {
            let head = &p[..p.len() - 2];
            assert_eq!(&ids[..head.len()], head, "turn {turn}");
        }
        prev = Some(ids);
        msgs.push(json!({"role": "assistant", "content": format!("{} is prime.", 2 * turn + 3)}));
        msgs.push(json!({"role": "user", "content": "Another <|end|> one?"}));
    }
}
