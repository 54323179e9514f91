//! One minimal request per strict-rule refusal code (docs/contracts/registry.md §9.2), the scan order,
//! and the exact-key semantics.

use crate::common_models;

use common_models::*;
use kvtemplate::{Encoder, Engine, Outcome, Refusal, ScratchBuf};

const NOW: i64 = 1_721_997_296_000;

fn outcome(enc: &Encoder, body: &str) -> Option<Refusal> {
    let mut scratch = ScratchBuf::new();
    let mut out = [0u32; 4096];
    match enc.encode_chat(body.as_bytes(), NOW, &mut out, &mut scratch) {
        Ok(Outcome::Done(n)) => {
            assert!(n.written > 0, "no ids for {body}");
            None
        }
        Ok(Outcome::Refused(r)) => Some(r),
        Err(e) => panic!("{body}: unexpected error {e}"),
    }
}

const U: &str = r#"{"role":"user","content":"hi"}"#;

fn with_user(extra: &str) -> String {
    format!(r#"{{"model":"m","messages":[{U}]{extra}}}"#)
}

#[test]
fn each_refusal_code_on_qwen3() {
    let enc = encoder(QWEN3, Engine::Vllm);
    let table: Vec<(String, Option<Refusal>)> = vec![
        // 0: shape
        ("not json".into(), Some(Refusal::Unparseable)),
        ("[1]".into(), Some(Refusal::Unparseable)),
        (r#"{"model":"m"}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":"hi"}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":[]}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":["hi"]}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":[{"role":1,"content":"x"}]}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":[{"content":"x"}]}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":[{"role":"user","content":5}]}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":[{"role":"user","content":[{"text":"x"}]}]}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":[{"role":"user","content":[{"type":"text"}]}]}"#.into(), Some(Refusal::Unparseable)),
        (r#"{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}"#.into(), Some(Refusal::Unparseable)),
        // 1..12: top-level fields
        (with_user(r#","tools":[{"type":"function","function":{"name":"f"}}]"#), Some(Refusal::Tools)),
        (with_user(r#","tool_choice":"none""#), Some(Refusal::Tools)),
        (with_user(r#","tools":null,"tool_choice":null"#), None),
        (with_user(r#","cache_salt":"s""#), Some(Refusal::CacheSalt)),
        (with_user(r#","prompt_embeds":"AAAA""#), Some(Refusal::PromptEmbeds)),
        (with_user(r#","chat_template_kwargs":{}"#), Some(Refusal::TemplateKwargs)),
        (with_user(r#","add_generation_prompt":false"#), Some(Refusal::AddGenerationPrompt)),
        (with_user(r#","add_generation_prompt":"true""#), Some(Refusal::AddGenerationPrompt)),
        (with_user(r#","add_generation_prompt":1"#), Some(Refusal::AddGenerationPrompt)),
        (with_user(r#","add_generation_prompt":true"#), None),
        (with_user(r#","add_generation_prompt":null"#), None),
        (with_user(r#","continue_final_message":true"#), Some(Refusal::ContinueFinalMessage)),
        (with_user(r#","continue_final_message":false"#), None),
        (with_user(r#","add_special_tokens":true"#), Some(Refusal::AddSpecialTokens)),
        (with_user(r#","add_special_tokens":false"#), None),
        (with_user(r#","documents":[]"#), Some(Refusal::Documents)),
        (with_user(r#","reasoning_effort":"low""#), Some(Refusal::ReasoningEffort)),
        (with_user(r#","chat_template":"{{ 1 }}""#), Some(Refusal::ChatTemplate)),
        (with_user(r#","truncate_prompt_tokens":8"#), Some(Refusal::TruncatePromptTokens)),
        (with_user(r#","prompt_token_ids":[1,2]"#), Some(Refusal::PromptTokenIds)),
        (with_user(r#","prompt_token_ids_b64":"AQ==""#), Some(Refusal::PromptTokenIds)),
        // 13..19: messages
        (r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"hi"}]}]}"#.into(), Some(Refusal::Multimodal)),
        (r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}"#.into(), Some(Refusal::MultiTextPart)),
        (r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"","x":1}]}]}"#.into(), None),
        (format!(r#"{{"messages":[{U},{{"role":"assistant","content":"4"}}]}}"#), Some(Refusal::TrailingAssistant)),
        (format!(r#"{{"messages":[{{"role":"developer","content":"be brief"}},{U}]}}"#), Some(Refusal::DeveloperRole)),
        (r#"{"messages":[{"role":"user","content":"hi","tools":[]}]}"#.into(), Some(Refusal::MessageTools)),
        (r#"{"messages":[{"role":"user","content":"hi","tools":null}]}"#.into(), None),
        (format!(r#"{{"messages":[{{"role":"assistant","content":"x","reasoning_content":"r"}},{U}]}}"#), Some(Refusal::MessageField)),
        (r#"{"messages":[{"role":"user","content":"hi","x_unmentioned":"v"}]}"#.into(), None),
        (r#"{"messages":[{"role":"user","content":"hi","reasoning_content":null}]}"#.into(), None),
        (r#"{"messages":[{"role":"user","content":null}]}"#.into(), Some(Refusal::NullContent)),
        (r#"{"messages":[{"role":"user"}]}"#.into(), Some(Refusal::NullContent)),
        // 22: NUL in the rendered text
        (r#"{"messages":[{"role":"user","content":"a\u0000b"}]}"#.into(), Some(Refusal::NulByte)),
        // plain requests pass
        (with_user(""), None),
        (r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#.into(), None),
    ];
    let mut wrong = Vec::new();
    for (body, want) in &table {
        let got = outcome(&enc, body);
        if got != *want {
            wrong.push(format!("{body}: want {want:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn scan_order_first_hit_wins() {
    let enc = encoder(QWEN3, Engine::Vllm);
    // unparseable messages beat every field refusal
    assert_eq!(
        outcome(&enc, r#"{"tools":[1],"messages":[{"role":2}]}"#),
        Some(Refusal::Unparseable)
    );
    // tools (1) beats cache_salt (2) whatever the key order
    assert_eq!(
        outcome(
            &enc,
            &with_user(r#","cache_salt":"s","tool_choice":"auto""#)
        ),
        Some(Refusal::Tools)
    );
    // documents (8) beats prompt_token_ids (12); add_special_tokens (7) beats documents (8)
    assert_eq!(
        outcome(
            &enc,
            &with_user(r#","prompt_token_ids":[1],"documents":[]"#)
        ),
        Some(Refusal::Documents)
    );
    assert_eq!(
        outcome(
            &enc,
            &with_user(r#","documents":[],"add_special_tokens":true"#)
        ),
        Some(Refusal::AddSpecialTokens)
    );
    // a field refusal beats any message refusal
    assert_eq!(
        outcome(
            &enc,
            r#"{"messages":[{"role":"assistant","content":[{"type":"image_url"}]}],"reasoning_effort":"x"}"#
        ),
        Some(Refusal::ReasoningEffort)
    );
    // multimodal (13) in a later message beats trailing assistant (15) and developer (16)
    assert_eq!(
        outcome(
            &enc,
            r#"{"messages":[{"role":"developer","content":"d"},{"role":"user","content":[{"type":"input_audio"}]},{"role":"assistant","content":"a"}]}"#
        ),
        Some(Refusal::Multimodal)
    );
    // null content (19) only after message_field (18)
    assert_eq!(
        outcome(
            &enc,
            r#"{"messages":[{"role":"user","content":null,"tool_calls":[]}]}"#
        ),
        Some(Refusal::MessageField)
    );
}

#[test]
fn exact_keys_last_duplicate_wins() {
    let enc = encoder(QWEN3, Engine::Vllm);
    assert_eq!(
        outcome(&enc, &with_user(r#","tools":[1],"tools":null"#)),
        None
    );
    assert_eq!(
        outcome(&enc, &with_user(r#","tools":null,"tools":[1]"#)),
        Some(Refusal::Tools)
    );
    assert_eq!(
        outcome(&enc, &with_user(r#","Tools":[1],"CACHE_SALT":"x""#)),
        None
    );
    assert_eq!(
        outcome(
            &enc,
            r#"{"messages":[{"role":"user","content":"hi","role":"assistant"}]}"#
        ),
        Some(Refusal::TrailingAssistant)
    );
    assert_eq!(
        outcome(
            &enc,
            r#"{"messages":[{"role":"assistant","content":"a"}],"messages":[{"role":"user","content":"b"}]}"#
        ),
        None
    );
}

#[test]
fn null_content_renders_empty_where_the_template_does_not_test_it() {
    let enc = encoder(QWEN25, Engine::Vllm);
    assert_eq!(
        outcome(&enc, r#"{"messages":[{"role":"user","content":null}]}"#),
        None
    );
}

#[test]
fn template_raised_on_gemma_system_role() {
    let enc = encoder(GEMMA2, Engine::Sglang);
    assert_eq!(
        outcome(
            &enc,
            &format!(r#"{{"messages":[{{"role":"system","content":"s"}},{U}]}}"#)
        ),
        Some(Refusal::TemplateRaised)
    );
    assert_eq!(
        outcome(&enc, &format!(r#"{{"messages":[{U},{U}]}}"#)),
        Some(Refusal::TemplateRaised)
    );
}

fn custom(template: &str, openai: bool) -> Encoder {
    let mut spec = spec(QWEN25, Engine::Vllm);
    spec.template_source = Some(template.to_string());
    if openai {
        spec.content_format = kvtemplate::ContentFormat::OpenAi;
    }
    Encoder::new(spec).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn template_rendering_nothing_is_refused() {
    let enc = custom("{% for m in messages %}{% endfor %}", false);
    assert_eq!(outcome(&enc, &with_user("")), Some(Refusal::TemplateRaised));
}

#[test]
fn content_shape_dependence() {
    // Loops over parts when given a list, prints strings as they are: shape-independent.
    let stable = custom(
        "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif %}{% endfor %}",
        true,
    );
    assert_eq!(outcome(&stable, &with_user("")), None);
    // Prints differently for string and list content: refused.
    let shaky = custom(
        "{% for m in messages %}{{ m.content is string }}{% endfor %}",
        true,
    );
    assert_eq!(outcome(&shaky, &with_user("")), Some(Refusal::ContentShape));
    // The same template, but engines use string format and it never mentions media: no check.
    let plain = custom(
        "{% for m in messages %}{{ m.content is string }}{% endfor %}",
        false,
    );
    assert_eq!(outcome(&plain, &with_user("")), None);
    // SGLang's heuristic: the source mentions "image".
    let media = custom(
        "{# image #}{% for m in messages %}{{ m.content is string }}{% endfor %}",
        false,
    );
    assert_eq!(outcome(&media, &with_user("")), Some(Refusal::ContentShape));
}

#[test]
fn refusal_classes() {
    assert_eq!(Refusal::Unparseable.class().code(), -1);
    for r in Refusal::ALL.iter().skip(1) {
        assert_eq!(r.class().code(), -2, "{r}");
    }
}
