//! Lifting strict-rule refusal codes ([`EncoderSpec::lifted`]): what each lift covers, that a
//! code not lifted still refuses with its own code in the §9.2 order, that requests the
//! engine rejects are refused (never ids), and that lifted ids go through the same output
//! paths as strict ones. Parity of every vector case through the lifted encoder is
//! `conformance/tests/lifted_parity.rs`.

use crate::common_models;

use common_models::*;
use kvtemplate::{Encoder, EncoderSpec, Engine, Error, Outcome, Refusal, RefusalSet, ScratchBuf};
use proptest::prelude::*;
use std::sync::OnceLock;

fn lifting(slug: &str, engine: Engine, lifts: RefusalSet) -> Encoder {
    Encoder::new(spec(slug, engine).with_lifted(lifts)).unwrap_or_else(|e| panic!("{slug}: {e}"))
}

fn all(slug: &str, engine: Engine) -> Encoder {
    lifting(slug, engine, RefusalSet::LIFTABLE)
}

fn codes(s: &str) -> RefusalSet {
    RefusalSet::parse(s).unwrap_or_else(|e| panic!("{e}"))
}

/// `None` = encoded (ids written), `Some(code)` = refused.
fn outcome(enc: &Encoder, body: &str) -> Option<Refusal> {
    let mut scratch = ScratchBuf::new();
    let mut out = [0u32; 4096];
    match enc.encode_chat(body.as_bytes(), 0, &mut out, &mut scratch) {
        Ok(Outcome::Done(n)) => {
            assert!(n.written > 0, "no ids for {body}");
            None
        }
        Ok(Outcome::Refused(r)) => Some(r),
        Err(e) => panic!("{body}: unexpected error {e}"),
    }
}

const U: &str = r#"{"role":"user","content":"What's the weather in Seoul?"}"#;
const TOOLS: &str = r#"[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]"#;
const CALL: &str = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Seoul\"}"}}]}"#;
const RESULT: &str = r#"{"role":"tool","tool_call_id":"call_1","content":"{\"temperature\": 21}"}"#;

fn body(messages: &[&str], extra: &str) -> String {
    format!(
        r#"{{"model":"m","messages":[{}]{extra}}}"#,
        messages.join(",")
    )
}

fn agent() -> String {
    body(&[U, CALL, RESULT], &format!(r#","tools":{TOOLS}"#))
}

#[test]
fn only_codes_kvtemplate_can_lift_are_accepted() {
    let err = Encoder::new(spec(QWEN3, Engine::Vllm).with_lifted(codes("tools,documents")));
    assert!(
        matches!(&err, Err(Error::Spec(m)) if m.contains("documents cannot be lifted")),
        "{err:?}"
    );
    for r in Refusal::ALL {
        let got = Encoder::new(EncoderSpec::new(Engine::Vllm).with_lifted(RefusalSet::of(&[r])));
        assert_eq!(got.is_ok(), r.can_lift(), "{r}");
    }
    assert_eq!(all(QWEN3, Engine::Vllm).lifted(), RefusalSet::LIFTABLE);
    assert_eq!(encoder(QWEN3, Engine::Vllm).lifted(), RefusalSet::EMPTY);
}

#[test]
fn lifted_requests_give_the_engines_ids_on_every_output_path() {
    for slug in [QWEN25, QWEN3, LLAMA31, R1] {
        for engine in Engine::WITH_KV_PLANE {
            let strict = encoder(slug, engine);
            let lifted = all(slug, engine);
            let b = agent();
            // Strict: refused with the first code (tools); lifted: the engine's own ids.
            assert_eq!(outcome(&strict, &b), Some(Refusal::Tools), "{slug}");
            let want = lifted
                .engine_chat(b.as_bytes(), Some(0))
                .unwrap_or_else(|e| panic!("{slug} {engine:?}: {e}"));
            let want_ids = want.ids.unwrap_or_default();
            assert!(want_ids.len() > 8);
            let got = lifted.encode_chat_to_vec(b.as_bytes(), 0, usize::MAX);
            let Ok(Outcome::Done(r)) = got else {
                panic!("{slug} {engine:?}: {got:?}")
            };
            assert_eq!(
                (r.text.as_str(), &r.ids[..]),
                (want.rendered.as_str(), &want_ids[..])
            );
            assert!(!r.truncated);
            // The caller's buffer, cut at its size; tokenization stops there (the scratch
            // holds the same first ids).
            let mut scratch = ScratchBuf::new();
            let mut out = vec![0u32; 5];
            let n = lifted.encode_chat(b.as_bytes(), 0, &mut out, &mut scratch);
            assert!(
                matches!(n, Ok(Outcome::Done(e)) if e.written == 5 && e.truncated),
                "{n:?}"
            );
            assert_eq!(&out[..], &want_ids[..5]);
            assert_eq!(scratch.ids(), &want_ids[..5]);
            assert_eq!(scratch.rendered(), want.rendered);
            let capped = lifted.encode_chat_to_vec(b.as_bytes(), 0, 7);
            assert!(
                matches!(&capped, Ok(Outcome::Done(r)) if r.truncated && r.ids[..] == want_ids[..7]),
                "{capped:?}"
            );
            // render_chat leaves the same prompt.
            let mut scratch = ScratchBuf::new();
            assert!(matches!(
                lifted.render_chat(b.as_bytes(), 0, &mut scratch),
                Ok(Outcome::Done(()))
            ));
            assert_eq!(scratch.rendered(), want.rendered);
        }
    }
}

#[test]
fn a_code_not_lifted_refuses_with_its_own_code() {
    let enc = lifting(QWEN3, Engine::Vllm, codes("tools"));
    // tools lifted: the history's tool_calls (message_field) and null content are not.
    assert_eq!(outcome(&enc, &agent()), Some(Refusal::MessageField));
    let enc = lifting(QWEN3, Engine::Vllm, codes("tools,message_field"));
    assert_eq!(outcome(&enc, &agent()), Some(Refusal::NullContent));
    let enc = lifting(
        QWEN3,
        Engine::Vllm,
        codes("tools,message_field,null_content"),
    );
    assert_eq!(outcome(&enc, &agent()), None);
    // Later codes that are never liftable keep refusing, in scan order.
    let tools = format!(r#","tools":{TOOLS}"#);
    // cache_salt is liftable, but only as keys: lifted, the request renders as without it.
    let b = body(&[U], &format!(r#"{tools},"cache_salt":"s""#));
    assert_eq!(outcome(&enc, &b), Some(Refusal::CacheSalt));
    let salted = lifting(
        QWEN3,
        Engine::Vllm,
        codes("tools,message_field,null_content,cache_salt"),
    );
    let unsalted = body(&[U], &tools);
    assert_eq!(
        salted.encode_chat_to_vec(b.as_bytes(), 0, 1 << 20).unwrap(),
        salted
            .encode_chat_to_vec(unsalted.as_bytes(), 0, 1 << 20)
            .unwrap()
    );
    for (extra, want) in [
        (r#","documents":[{"text":"d"}]"#, Refusal::Documents),
        (r#","add_special_tokens":true"#, Refusal::AddSpecialTokens),
        (r#","reasoning_effort":"low""#, Refusal::ReasoningEffort),
        (r#","prompt_token_ids":[1]"#, Refusal::PromptTokenIds),
    ] {
        let b = body(&[U], &format!("{tools}{extra}"));
        assert_eq!(outcome(&enc, &b), Some(want), "{extra}");
        assert_eq!(
            outcome(&all(QWEN3, Engine::Vllm), &b),
            Some(want),
            "{extra}"
        );
    }
    let b = body(&[r#"{"role":"developer","content":"d"}"#, U], &tools);
    assert_eq!(
        outcome(&all(QWEN3, Engine::Vllm), &b),
        Some(Refusal::DeveloperRole)
    );
    let b = body(
        &[r#"{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}"#],
        &tools,
    );
    assert_eq!(
        outcome(&all(QWEN3, Engine::Vllm), &b),
        Some(Refusal::Multimodal)
    );
    let b = body(&[r#"{"role":"user","content":"hi","tools":[]}"#], &tools);
    assert_eq!(
        outcome(&all(QWEN3, Engine::Vllm), &b),
        Some(Refusal::MessageTools)
    );
}

#[test]
fn each_lift_covers_what_the_vectors_prove_and_no_more() {
    let enc = all(QWEN3, Engine::Vllm);
    let tools = format!(r#","tools":{TOOLS}"#);
    let table: Vec<(String, Option<Refusal>)> = vec![
        // tools: a non-empty list with tool_choice absent, null or "auto".
        (body(&[U], &tools), None),
        (
            body(&[U], &format!(r#"{tools},"tool_choice":"auto""#)),
            None,
        ),
        (body(&[U], &format!(r#"{tools},"tool_choice":null"#)), None),
        (
            body(&[U], &format!(r#"{tools},"tool_choice":"none""#)),
            Some(Refusal::Tools),
        ),
        (
            body(&[U], &format!(r#"{tools},"tool_choice":"required""#)),
            Some(Refusal::Tools),
        ),
        (
            body(
                &[U],
                &format!(
                    r#"{tools},"tool_choice":{{"type":"function","function":{{"name":"get_weather"}}}}"#
                ),
            ),
            Some(Refusal::Tools),
        ),
        (body(&[U], r#","tools":[]"#), Some(Refusal::Tools)),
        (body(&[U], r#","tool_choice":"auto""#), Some(Refusal::Tools)),
        (
            body(&[U], r#","tools":{"type":"function"}"#),
            Some(Refusal::Tools),
        ),
        // A malformed tool: the engine rejects the request (HTTP 400) -> refused, no ids.
        (
            body(&[U], r#","tools":[{"type":"function","function":{}}]"#),
            Some(Refusal::TemplateRaised),
        ),
        // template_kwargs: an object without engine-bound names.
        (
            body(&[U], r#","chat_template_kwargs":{"enable_thinking":false}"#),
            None,
        ),
        (body(&[U], r#","chat_template_kwargs":{}"#), None),
        (
            body(
                &[U],
                r#","chat_template_kwargs":{"add_generation_prompt":false}"#,
            ),
            Some(Refusal::TemplateKwargs),
        ),
        (
            body(&[U], r#","chat_template_kwargs":{"messages":[]}"#),
            Some(Refusal::TemplateKwargs),
        ),
        (
            body(&[U], r#","chat_template_kwargs":{"tools":null}"#),
            Some(Refusal::TemplateKwargs),
        ),
        (
            body(&[U], r#","chat_template_kwargs":"x""#),
            Some(Refusal::TemplateKwargs),
        ),
        // add_generation_prompt / continue_final_message: JSON booleans only.
        (body(&[U], r#","add_generation_prompt":false"#), None),
        (
            body(&[U], r#","add_generation_prompt":"false""#),
            Some(Refusal::AddGenerationPrompt),
        ),
        (
            body(&[U], r#","add_generation_prompt":0"#),
            Some(Refusal::AddGenerationPrompt),
        ),
        (
            body(&[U], r#","continue_final_message":"yes""#),
            Some(Refusal::ContinueFinalMessage),
        ),
        // continue_final_message continues an assistant message, nothing else.
        (
            body(
                &[U],
                r#","continue_final_message":true,"add_generation_prompt":false"#,
            ),
            Some(Refusal::ContinueFinalMessage),
        ),
        // vLLM rejects continue_final_message with the default add_generation_prompt=true.
        (
            body(
                &[U, r#"{"role":"assistant","content":"It is"}"#],
                r#","continue_final_message":true"#,
            ),
            Some(Refusal::TemplateRaised),
        ),
        (
            body(
                &[U, r#"{"role":"assistant","content":"It is"}"#],
                r#","continue_final_message":true,"add_generation_prompt":false"#,
            ),
            None,
        ),
        // message_field: assistant tool_calls and tool tool_call_id with the proven shapes.
        (body(&[U, CALL, RESULT], &tools), None),
        (
            body(
                &[
                    U,
                    r#"{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":""}}]}"#,
                    RESULT,
                ],
                "",
            ),
            Some(Refusal::MessageField),
        ),
        (
            body(
                &[
                    U,
                    r#"{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":"not json"}}]}"#,
                    RESULT,
                ],
                "",
            ),
            Some(Refusal::MessageField),
        ),
        (
            body(
                &[
                    U,
                    r#"{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":{"a":1}}}]}"#,
                    RESULT,
                ],
                "",
            ),
            None,
        ),
        (
            body(
                &[U, r#"{"role":"assistant","content":"","tool_calls":[]}"#, U],
                "",
            ),
            Some(Refusal::MessageField),
        ),
        (
            body(&[r#"{"role":"user","content":"hi","tool_calls":[]}"#], ""),
            Some(Refusal::MessageField),
        ),
        // Fields no vector proves stay refused: name, reasoning_content (Qwen3 mentions both).
        (
            body(&[r#"{"role":"user","content":"hi","name":"ann"}"#], ""),
            Some(Refusal::MessageField),
        ),
        (
            body(
                &[
                    U,
                    r#"{"role":"assistant","content":"a","reasoning_content":"r"}"#,
                    U,
                ],
                "",
            ),
            Some(Refusal::MessageField),
        ),
        // Null keys are not hits (and the lifted render drops them, as the engines do).
        (
            body(
                &[
                    U,
                    r#"{"role":"assistant","content":"a","tool_calls":null,"name":null}"#,
                ],
                "",
            ),
            None,
        ),
        // multi_text_part, trailing_assistant, null_content: every hit.
        (
            body(
                &[
                    r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
                ],
                "",
            ),
            None,
        ),
        (
            body(&[U, r#"{"role":"assistant","content":"It is"}"#], ""),
            None,
        ),
        (body(&[r#"{"role":"user","content":null}"#], ""), None),
        // Nothing hit: the strict path.
        (body(&[U], ""), None),
    ];
    let mut wrong = Vec::new();
    for (b, want) in &table {
        let got = outcome(&enc, b);
        if got != *want {
            wrong.push(format!("{b}: want {want:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn null_keys_are_dropped_like_the_engines_do() {
    // Llama 3.1 tests `'tool_calls' in message`: a null tool_calls key kept in the dict would
    // make it raise; vLLM drops it (and SGLang's dump has no such key), so it renders.
    for engine in Engine::WITH_KV_PLANE {
        let enc = all(LLAMA31, engine);
        let with_null = body(
            &[
                U,
                r#"{"role":"assistant","content":"Sunny.","tool_calls":null}"#,
                U,
            ],
            &format!(r#","tools":{TOOLS}"#),
        );
        let without = body(
            &[U, r#"{"role":"assistant","content":"Sunny."}"#, U],
            &format!(r#","tools":{TOOLS}"#),
        );
        let a = enc.encode_chat_to_vec(with_null.as_bytes(), 0, 8192);
        let b = enc.encode_chat_to_vec(without.as_bytes(), 0, 8192);
        assert!(matches!(&a, Ok(Outcome::Done(_))), "{engine:?}: {a:?}");
        assert_eq!(a.ok(), b.ok(), "{engine:?}");
    }
}

#[test]
fn engine_rejections_are_refusals_never_ids() {
    // TensorRT-LLM forbids the unknown field continue_final_message, even `false`.
    let enc = all(QWEN3, Engine::Trtllm);
    let b = body(
        &[U],
        &format!(r#","tools":{TOOLS},"continue_final_message":false"#),
    );
    assert_eq!(outcome(&enc, &b), Some(Refusal::TemplateRaised));
    // Gemma 2 raises on a system message (a template error on the lifted path too).
    let enc = all(GEMMA2, Engine::Vllm);
    let b = body(
        &[r#"{"role":"system","content":"s"}"#, U],
        r#","add_generation_prompt":false"#,
    );
    assert_eq!(outcome(&enc, &b), Some(Refusal::TemplateRaised));
    // Llama 3.1 raises on tools without a user message.
    let enc = all(LLAMA31, Engine::Sglang);
    let b = body(
        &[r#"{"role":"system","content":"s"}"#],
        &format!(r#","tools":{TOOLS}"#),
    );
    assert_eq!(outcome(&enc, &b), Some(Refusal::TemplateRaised));
    // NUL in the lifted render.
    let enc = all(QWEN3, Engine::Vllm);
    let b = body(
        &[r#"{"role":"user","content":"a\u0000b"}"#],
        &format!(r#","tools":{TOOLS}"#),
    );
    assert_eq!(outcome(&enc, &b), Some(Refusal::NulByte));
}

#[test]
fn shape_sensitive_templates_are_not_lifted() {
    let mut spec = spec(QWEN25, Engine::Vllm).with_lifted(RefusalSet::LIFTABLE);
    spec.template_source = Some(
        "{# image #}{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}{% if tools %}T{% endif %}"
            .to_string(),
    );
    let enc = Encoder::new(spec).unwrap_or_else(|e| panic!("{e}"));
    // Shape-independent, so the strict path encodes it; the lifted path is not proven for
    // templates that may see list content.
    assert_eq!(outcome(&enc, &body(&[U], "")), None);
    assert_eq!(
        outcome(&enc, &body(&[U], &format!(r#","tools":{TOOLS}"#))),
        Some(Refusal::ContentShape)
    );
}

#[test]
fn refusals_hit_lists_every_scan_code() {
    let enc = encoder(QWEN3, Engine::Vllm);
    let b = body(
        &[U, CALL, RESULT, r#"{"role":"assistant","content":"Sunny"}"#],
        &format!(r#","tools":{TOOLS},"cache_salt":"s","add_generation_prompt":false"#),
    );
    let hits = enc.refusals_hit(b.as_bytes()).unwrap_or_default();
    assert_eq!(
        hits.to_string(),
        "tools,cache_salt,add_generation_prompt,trailing_assistant,message_field,null_content"
    );
    assert_eq!(outcome(&enc, &b), hits.first());
    assert_eq!(
        enc.refusals_hit(b"nope").unwrap_or_default(),
        codes("unparseable")
    );
    assert!(enc
        .refusals_hit(body(&[U], "").as_bytes())
        .unwrap_or_default()
        .is_empty());
}

#[test]
fn sglang_continue_final_message_appends_the_prefix_ids() {
    let enc = all(R1, Engine::Sglang);
    let b = body(
        &[U, r#"{"role":"assistant","content":"It is"}"#],
        r#","continue_final_message":true"#,
    );
    let want = enc
        .engine_chat(b.as_bytes(), Some(0))
        .unwrap_or_else(|e| panic!("{e}"));
    let got = enc.encode_chat_to_vec(b.as_bytes(), 0, 4096);
    let Ok(Outcome::Done(r)) = got else {
        panic!("{got:?}")
    };
    assert_eq!(Some(r.ids.clone()), want.ids);
    assert_eq!(r.text, want.rendered);
    // The appended ids are more than the rendered text's.
    let text_ids = enc
        .tokenizer()
        .and_then(|t| t.encode(&r.text, false))
        .unwrap_or_default();
    assert!(r.ids.len() > text_ids.len());
}

fn qwen_pair() -> &'static [Encoder; 3] {
    static ENC: OnceLock<[Encoder; 3]> = OnceLock::new();
    ENC.get_or_init(|| Engine::WITH_KV_PLANE.map(|e| all(QWEN25, e)))
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ,.!?\n\t]{0,30}",
        "[ \u{a0}x<|>{}%#é東😀\"\\\\]{0,10}",
        Just("<|im_end|>".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// Agentic conversations (tools, tool calls, tool results, a final assistant turn,
    /// add_generation_prompt) through the lifted strict encoder give exactly the engine
    /// emulation's ids and text (the slow twin), on all three engines.
    #[test]
    fn lifted_path_agrees_with_engine_emulation(
        question in arb_text(),
        args in arb_text(),
        result in arb_text(),
        answer in proptest::option::of(arb_text()),
        with_tools in any::<bool>(),
        agp in proptest::option::of(any::<bool>()),
    ) {
        let args = serde_json::json!({"q": args}).to_string();
        let mut msgs = vec![
            serde_json::json!({"role": "user", "content": question}),
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": args}}
            ]}),
            serde_json::json!({"role": "tool", "tool_call_id": "c1", "content": result}),
        ];
        if let Some(a) = answer {
            msgs.push(serde_json::json!({"role": "assistant", "content": a}));
        }
        let mut body = serde_json::json!({"model": "m", "messages": msgs});
        if with_tools {
            body["tools"] = serde_json::from_str(TOOLS).unwrap_or_default();
        }
        if let Some(agp) = agp {
            body["add_generation_prompt"] = serde_json::json!(agp);
        }
        let body = body.to_string();
        for enc in qwen_pair() {
            let lifted = enc.encode_chat_to_vec(body.as_bytes(), 0, usize::MAX);
            let full = enc.engine_chat(body.as_bytes(), Some(0));
            match (lifted, full) {
                (Ok(Outcome::Done(s)), Ok(f)) => {
                    prop_assert_eq!(&s.text, &f.rendered);
                    prop_assert_eq!(Some(s.ids), f.ids);
                }
                (s, f) => prop_assert!(false, "lifted {:?} vs engine {:?}", s, f),
            }
        }
    }
}

#[test]
fn tool_call_arguments_keep_integers_beyond_64_bits_exact_or_refuse() {
    // The engines parse `arguments` with `json.loads`: the integer stays exact (Qwen's
    // template `tojson`s it), `-0` is 0. serde_json alone printed 1.2345678901234568e+23.
    let call = |args: &str| {
        format!(
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"get_weather","arguments":{}}}}}]}}"#,
            serde_json::Value::String(args.to_string())
        )
    };
    let exact = call(r#"{"city": "Seoul", "id": 123456789012345678901234, "z": -0}"#);
    for engine in Engine::WITH_KV_PLANE {
        let enc = all(QWEN3, engine);
        let b = body(&[U, &exact, RESULT], &format!(r#","tools":{TOOLS}"#));
        let want = enc
            .engine_chat(b.as_bytes(), Some(0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            want.rendered
                .contains(r#"{"city": "Seoul", "id": 123456789012345678901234, "z": 0}"#),
            "{}",
            want.rendered
        );
        let got = enc.encode_chat_to_vec(b.as_bytes(), 0, 4096);
        let Ok(Outcome::Done(r)) = got else {
            panic!("{got:?}")
        };
        assert_eq!(r.text, want.rendered);
        assert_eq!(Some(r.ids), want.ids);
        // Beyond 128 bits: refused as unsupported by the emulation; the lifted path does not
        // count such a call as proven (refused with the message-field code), never ids.
        let huge = call(r#"{"city": "Seoul", "id": 1234567890123456789012345678901234567890}"#);
        let b = body(&[U, &huge, RESULT], &format!(r#","tools":{TOOLS}"#));
        assert!(
            matches!(
                enc.engine_chat(b.as_bytes(), Some(0)),
                Err(Error::Unsupported(_))
            ),
            "{engine:?}"
        );
        let got = enc.encode_chat_to_vec(b.as_bytes(), 0, 4096);
        assert!(
            matches!(got, Ok(Outcome::Refused(Refusal::MessageField))),
            "{got:?}"
        );
    }
}

/// `"tools": []` (vLLM 0.34, `ChatCompletionRequest.check_tool_usage`): treated as omitted
/// under `EmptyTools::Omitted` — the lifted request gives the ids of the request without
/// `tools`, for `tool_choice` absent, `"auto"`, `"required"` or `"none"`, and a named
/// `tool_choice` still refuses; under the reference rules (vLLM ≤ 0.33, which answers HTTP 400)
/// it refuses with `tools`, lifted or not.
#[test]
fn an_empty_tools_list_is_omitted_only_where_the_release_says_so() {
    use kvtemplate::{ChatRules, EmptyTools};
    let v34 = ChatRules::reference(Engine::Vllm)
        .unwrap()
        .with_empty_tools(EmptyTools::Omitted);
    assert!(v34.check_engine(Engine::Vllm).is_ok());
    assert!(v34.check_engine(Engine::Sglang).is_err());
    for slug in [QWEN25, QWEN3, LLAMA31] {
        let on34 = Encoder::new(
            spec(slug, Engine::Vllm)
                .with_chat_rules(v34)
                .with_lifted(RefusalSet::LIFTABLE),
        )
        .unwrap();
        let on33 = all(slug, Engine::Vllm);
        let ids = |enc: &Encoder, b: &str| -> Vec<u32> {
            let mut scratch = ScratchBuf::new();
            let mut out = [0u32; 4096];
            match enc.encode_chat(b.as_bytes(), 0, &mut out, &mut scratch) {
                Ok(Outcome::Done(n)) => out[..n.written].to_vec(),
                other => panic!("{slug} {b}: {other:?}"),
            }
        };
        let plain = ids(&on34, &body(&[U], ""));
        for extra in [
            r#","tools":[]"#,
            r#","tools":[],"tool_choice":"auto""#,
            r#","tools":[],"tool_choice":"required""#,
            r#","tools":[],"tool_choice":"none""#,
            r#","tools":[],"tool_choice":null"#,
        ] {
            let b = body(&[U], extra);
            assert_eq!(ids(&on34, &b), plain, "{slug} {extra}");
            assert_eq!(outcome(&on33, &b), Some(Refusal::Tools), "{slug} {extra}");
            assert_eq!(
                outcome(&encoder(slug, Engine::Vllm), &b),
                Some(Refusal::Tools),
                "strict {slug}"
            );
        }
        let named = body(
            &[U],
            r#","tools":[],"tool_choice":{"type":"function","function":{"name":"f"}}"#,
        );
        assert_eq!(outcome(&on34, &named), Some(Refusal::Tools), "{slug}");
    }
}
