//! Mistral chat as vLLM (chat route and `/tokenize`) and SGLang encode it, against every case
//! of `testdata/vectors/templates-nonjinja/mistral-tekken-v1.json` (tekken v3) and
//! `mistral-spm-v7-v1.json` (SentencePiece v7, vLLM only) (vLLM 0.33.0 gives the same ids):
//! exactly the engine path's ids, or a refusal where the path refused —
//! an engine refusal ([`Error::EngineRequest`]) with the engine's message where kvexact
//! reproduces it, never [`Error::Unsupported`] standing in for one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kvtemplate::json::{Json, JsonObject};
use kvtemplate::mistral::{MistralEncoder, MistralPath};
use kvtemplate::{Error, InputLimits};

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

const DIR: &str = "models/mistralai__Mistral-Nemo-Instruct-2407";

fn encoder() -> &'static MistralEncoder {
    static E: OnceLock<MistralEncoder> = OnceLock::new();
    E.get_or_init(|| MistralEncoder::from_model_dir(&testdata(DIR)).expect("tekken.json loads"))
}

const SPM_DIR: &str = "models/mistralai__Mistral-Large-Instruct-2411";

fn spm_encoder() -> &'static MistralEncoder {
    static E: OnceLock<MistralEncoder> = OnceLock::new();
    E.get_or_init(|| {
        MistralEncoder::from_model_dir(&testdata(SPM_DIR)).expect("tokenizer.model.v7 loads")
    })
}

fn vector_bytes() -> Vec<u8> {
    file_bytes("mistral-tekken-v1.json")
}

fn file_bytes(name: &str) -> Vec<u8> {
    std::fs::read(testdata(&format!("vectors/templates-nonjinja/{name}"))).expect("vector file")
}

/// The body the generator posted on `path` (`engine_truth.request_rule`), in document order.
fn body(raw: &JsonObject<'_>, path: &str) -> String {
    use std::borrow::Cow;
    let mut b: Vec<(Cow<'_, str>, Json<'_>)> = vec![
        ("model".into(), Json::Str("m".into())),
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
    if path != "vllm_tokenize" {
        if let Some(Json::Object(extra)) = raw.get("request_extra") {
            for (k, v) in &extra.0 {
                b.push((k.clone(), v.clone()));
            }
        }
    }
    Json::Object(JsonObject(b)).to_json_string()
}

fn ids(v: Option<&Json<'_>>) -> Option<Vec<u32>> {
    match v? {
        Json::Array(a) => Some(
            a.iter()
                .map(|x| match x {
                    Json::U64(n) => *n as u32,
                    other => panic!("id {other:?}"),
                })
                .collect(),
        ),
        _ => None,
    }
}

const PATHS: [(&str, MistralPath); 3] = [
    ("vllm", MistralPath::VllmChat),
    ("vllm_tokenize", MistralPath::VllmTokenize),
    ("sglang", MistralPath::SglangText),
];

#[test]
fn every_chat_case_gives_each_paths_ids_or_refusal() {
    let (exact, refusals) = check_file(&vector_bytes(), encoder(), &PATHS);
    assert_eq!(exact + refusals, 35 * 3);
    assert!(exact >= 70, "{exact}");
}

#[test]
fn spm_v7_every_chat_case_gives_vllms_ids_or_refusal() {
    assert_eq!(
        spm_encoder().version(),
        kvtemplate::mistral::InstructVersion::V7
    );
    let (exact, refusals) = check_file(
        &file_bytes("mistral-spm-v7-v1.json"),
        spm_encoder(),
        &PATHS[..2],
    );
    assert_eq!(exact + refusals, 35 * 2);
    assert!(exact >= 50, "{exact}");
    // SGLang cannot load such a checkpoint: no text path is claimed.
    assert!(matches!(
        spm_encoder().engine_chat(
            MistralPath::SglangText,
            br#"{"messages":[{"role":"user","content":"hi"}]}"#
        ),
        Err(Error::Unsupported(_))
    ));
}

/// Checks every chat case of a vector file on `paths`: (exact id lists, refusals).
fn check_file(bytes: &[u8], enc: &MistralEncoder, paths: &[(&str, MistralPath)]) -> (usize, usize) {
    let doc = kvtemplate::json::parse(bytes).unwrap();
    let cases = doc
        .as_object()
        .unwrap()
        .get("cases")
        .unwrap()
        .as_array()
        .unwrap();
    let (mut exact, mut refusals, mut same_message) = (0, 0, 0);
    for case in cases {
        let c = case.as_object().unwrap();
        let id = c.get("id").and_then(Json::as_str).unwrap();
        if c.get("kind").and_then(Json::as_str) != Some("chat") {
            continue;
        }
        for &(name, path) in paths {
            let want = ids(c
                .get("engine_token_ids")
                .and_then(Json::as_object)
                .and_then(|o| o.get(name)));
            let want_err = c
                .get("engine_errors")
                .and_then(Json::as_object)
                .and_then(|o| o.get(name))
                .and_then(Json::as_str);
            let got = enc.engine_chat(path, body(c, name).as_bytes());
            match (got, want, want_err) {
                (Ok(g), Some(w), None) => {
                    assert_eq!(g.ids.unwrap(), w, "{id}/{name}");
                    if path != MistralPath::SglangText {
                        // The text form is mistral_common's (`rendered`), where recorded.
                        let text = c
                            .get("engine_rendered")
                            .and_then(Json::as_object)
                            .and_then(|o| o.get(name))
                            .or(c.get("rendered"))
                            .and_then(Json::as_str)
                            .unwrap();
                        assert_eq!(g.rendered, text, "{id}/{name}");
                    }
                    exact += 1;
                }
                (Err(Error::EngineRequest(m)), None, Some(w)) => {
                    refusals += 1;
                    // SGLang retries a failed render with tools in another shape and reports
                    // that error; vLLM's message is mistral_common's or its own.
                    if m == w {
                        same_message += 1;
                    }
                }
                (got, want, err) => panic!(
                    "{id}/{name}: got {:?}, want ids {:?} / refusal {err:?}",
                    got.map(|g| g.ids),
                    want.map(|w| w.len())
                ),
            }
        }
    }
    assert!(same_message >= 12, "{same_message} of {refusals}");
    (exact, refusals)
}

#[test]
fn completions_are_bos_plus_text() {
    check_completions(&vector_bytes(), encoder(), &["vllm", "sglang"]);
    check_completions(
        &file_bytes("mistral-spm-v7-v1.json"),
        spm_encoder(),
        &["vllm"],
    );
}

fn check_completions(bytes: &[u8], enc: &MistralEncoder, engines: &[&str]) {
    let doc = kvtemplate::json::parse(bytes).unwrap();
    let cases = doc
        .as_object()
        .unwrap()
        .get("cases")
        .unwrap()
        .as_array()
        .unwrap();
    let mut n = 0;
    for case in cases {
        let c = case.as_object().unwrap();
        if c.get("kind").and_then(Json::as_str) != Some("completion") {
            continue;
        }
        let prompt = c.get("prompt").and_then(Json::as_str).unwrap();
        let got = enc.engine_completions(prompt).unwrap();
        for &name in engines {
            let want = ids(c
                .get("engine_token_ids")
                .and_then(Json::as_object)
                .and_then(|o| o.get(name)));
            assert_eq!(Some(&got), want.as_ref(), "{name}");
        }
        n += 1;
    }
    assert_eq!(n, 6);
    assert!(matches!(
        enc.engine_completions(""),
        Err(Error::EngineRequest(_))
    ));
}

fn chat(path: MistralPath, body: &str) -> Result<Vec<u32>, Error> {
    encoder()
        .engine_chat(path, body.as_bytes())
        .map(|c| c.ids.unwrap())
}

fn text(t: &str) -> Vec<u32> {
    encoder().encode_text(t).unwrap()
}

/// Rules of mistral_common's normalisation and validation that the vectors do not exercise
/// one by one but that follow from the same code paths.
#[test]
fn normalisation_and_validation_rules() {
    let v = MistralPath::VllmChat;
    // BOS [INST] text [/INST]
    let one = chat(v, r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
    let mut want = vec![1, 3];
    want.extend(text("hi"));
    want.push(4);
    assert_eq!(one, want);
    // A system message after the last user message still goes into the last user turn.
    let late = chat(
        v,
        r#"{"messages":[{"role":"user","content":"hi"},{"role":"system","content":"S"}]}"#,
    )
    .unwrap();
    let mut want = vec![1, 3];
    want.extend(text("S\n\nhi"));
    want.push(4);
    assert_eq!(late, want);
    // Assistant text loses its trailing spaces.
    let trailing = chat(
        v,
        r#"{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b  "},{"role":"user","content":"c"}]}"#,
    )
    .unwrap();
    let mut want = vec![1, 3];
    want.extend(text("a"));
    want.push(4);
    want.extend(text("b"));
    want.extend([2, 3]);
    want.extend(text("c"));
    want.push(4);
    assert_eq!(trailing, want);
    // Tool-call ids: cut to 9 on the chat route, then checked.
    let call = |id: &str| {
        format!(
            r#"{{"messages":[{{"role":"user","content":"q"}},{{"role":"assistant","tool_calls":[{{"id":"{id}","type":"function","function":{{"name":"f","arguments":"{{}}"}}}}]}},{{"role":"tool","tool_call_id":"{id}","content":"ok"}}]}}"#
        )
    };
    assert!(chat(v, &call("xxabcdefghi")).is_ok());
    assert!(matches!(
        chat(v, &call("abc")),
        Err(Error::EngineRequest(_))
    ));
    assert!(matches!(
        chat(MistralPath::SglangText, &call("xxabcdefghi")),
        Err(Error::EngineRequest(_))
    ));
    // A plain-text tool result is dumped as a JSON string.
    let ok = encoder()
        .engine_chat(v, call("abcdefghi").as_bytes())
        .unwrap();
    assert!(
        ok.rendered
            .ends_with(r#"[TOOL_RESULTS]{"content": "ok", "call_id": "abcdefghi"}[/TOOL_RESULTS]"#),
        "{}",
        ok.rendered
    );
    // Engine refusals.
    for bad in [
        r#"{"messages":[]}"#,
        r#"{"messages":[{"role":"assistant","content":"x"}]}"#,
        r#"{"messages":[{"role":"user","content":"a"},{"role":"tool","tool_call_id":"abcdefghi","content":"x"}]}"#,
        r#"{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"bad name"}}]}"#,
        r#"{"messages":[{"role":"user","content":"a"}],"chat_template":"x"}"#,
    ] {
        assert!(
            matches!(chat(v, bad), Err(Error::EngineRequest(_))),
            "{bad}: {:?}",
            chat(v, bad)
        );
    }
    // Shapes no vector proves: refused as unsupported, never guessed.
    for shape in [
        r#"{"messages":[{"role":"user","content":"a","name":"n"}]}"#,
        r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}"#,
        r#"{"messages":[{"role":"user","content":"a"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}]}"#,
        r#"{"messages":[{"role":"user","content":"a"}],"reasoning_effort":"low"}"#,
        r#"{"messages":[{"role":"user","content":"a"}],"add_generation_prompt":false}"#,
        r#"{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"string","pattern":"^a"}}}}}]}"#,
        r#"{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","a":1,"a":2}}}]}"#,
        r#"{"messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"abcdefghi","type":"function","function":{"name":"f","arguments":"{\"x\": 123456789012345678901234}"}}]},{"role":"tool","tool_call_id":"abcdefghi","content":"ok"}]}"#,
    ] {
        assert!(
            matches!(chat(v, shape), Err(Error::Unsupported(_))),
            "{shape}: {:?}",
            chat(v, shape)
        );
    }
    // An invalid draft-7 schema is the engine's refusal... kvexact refuses it too (as a shape
    // it cannot prove valid).
    assert!(chat(
        v,
        r#"{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"nonsense"}}}]}"#
    )
    .is_err());
}

#[test]
fn bounds_are_checked_before_the_work() {
    let small = MistralEncoder::from_model_dir(&testdata(DIR))
        .unwrap()
        .with_limits(InputLimits {
            max_body_bytes: 64,
            ..InputLimits::default()
        });
    let long = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(100)
    );
    assert!(matches!(
        small.engine_chat(MistralPath::VllmChat, long.as_bytes()),
        Err(Error::InputTooLarge(_))
    ));
    let small = small.with_limits(InputLimits {
        max_rendered_bytes: 16,
        ..InputLimits::default()
    });
    let body = r#"{"messages":[{"role":"user","content":"a rather long user message"}]}"#;
    assert!(matches!(
        small.engine_chat(MistralPath::VllmChat, body.as_bytes()),
        Err(Error::InputTooLarge(_))
    ));
    assert!(matches!(
        small.engine_completions("a rather long completion prompt"),
        Err(Error::InputTooLarge(_))
    ));
}

/// Realistic traffic: each turn of a growing conversation re-encodes the whole prompt; on
/// vLLM the system prompt moves to the last user turn, so turn n's ids are NOT a prefix of
/// turn n+1's when a system prompt is present, and are when it is not.
#[test]
fn growing_conversations_and_the_moving_system_prompt() {
    let turns = ["Hi!", "Name a prime.", "Another one?", "Which is larger?"];
    for system in [None, Some("Be terse.")] {
        let mut msgs: Vec<String> = Vec::new();
        if let Some(s) = system {
            msgs.push(format!(r#"{{"role":"system","content":"{s}"}}"#));
        }
        let mut prev: Option<Vec<u32>> = None;
        for (i, t) in turns.iter().enumerate() {
            msgs.push(format!(r#"{{"role":"user","content":"{t}"}}"#));
            let body = format!(r#"{{"messages":[{}]}}"#, msgs.join(","));
            let ids = chat(MistralPath::VllmChat, &body).unwrap();
            if let Some(p) = &prev {
                let is_prefix = ids.starts_with(&p[..p.len()]);
                assert_eq!(is_prefix, system.is_none(), "turn {i}");
            }
            // The answer, then EOS, before the next turn.
            msgs.push(format!(r#"{{"role":"assistant","content":"answer {i}"}}"#));
            prev = Some(ids);
        }
    }
}
