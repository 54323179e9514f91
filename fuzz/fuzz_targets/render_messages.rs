//! Render arbitrary message lists with every pinned template (render-only encoders): never
//! panics, stays within the execution budget, and the strict path renders exactly what the
//! vLLM engine emulation renders whenever it does not refuse.
#![no_main]

use arbitrary::Arbitrary;
use kvtemplate::{spec_from_model_dir, Encoder, Engine, Outcome, ScratchBuf};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[derive(Debug, Arbitrary)]
enum Role {
    System,
    User,
    Assistant,
    Tool,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Content {
    Text(String),
    Null,
    Absent,
    Parts(Vec<(bool, String)>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    template: u8,
    messages: Vec<(Role, Content, Option<String>)>,
}

const MODELS: [&str; 6] = [
    "Qwen__Qwen2.5-7B-Instruct",
    "Qwen__Qwen3-0.6B",
    "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B",
    "meta-llama__Llama-3.1-8B-Instruct",
    "google__gemma-2-9b-it",
    "LGAI-EXAONE__EXAONE-3.5-7.8B-Instruct",
];

fn encoders() -> &'static Vec<Encoder> {
    static ENC: OnceLock<Vec<Encoder>> = OnceLock::new();
    ENC.get_or_init(|| {
        MODELS
            .iter()
            .map(|m| {
                let dir = format!("{}/../testdata/models/{m}", env!("CARGO_MANIFEST_DIR"));
                let mut spec = spec_from_model_dir(std::path::Path::new(&dir), Engine::Vllm)
                    .expect("model dir");
                spec.tokenizer_json = None;
                spec.fuel = Some(1_000_000);
                Encoder::new(spec).expect("encoder")
            })
            .collect()
    })
}

fuzz_target!(|input: Input| {
    let msgs: Vec<serde_json::Value> = input
        .messages
        .into_iter()
        .map(|(role, content, extra)| {
            let role = match role {
                Role::System => "system".to_string(),
                Role::User => "user".to_string(),
                Role::Assistant => "assistant".to_string(),
                Role::Tool => "tool".to_string(),
                Role::Other(s) => s,
            };
            let mut m = serde_json::Map::new();
            m.insert("role".into(), role.into());
            match content {
                Content::Text(t) => {
                    m.insert("content".into(), t.into());
                }
                Content::Null => {
                    m.insert("content".into(), serde_json::Value::Null);
                }
                Content::Absent => {}
                Content::Parts(parts) => {
                    let parts: Vec<serde_json::Value> = parts
                        .into_iter()
                        .map(|(text, s)| {
                            if text {
                                serde_json::json!({"type": "text", "text": s})
                            } else {
                                serde_json::json!({"type": "image_url", "image_url": {"url": s}})
                            }
                        })
                        .collect();
                    m.insert("content".into(), parts.into());
                }
            }
            if let Some(name) = extra {
                m.insert("name".into(), name.into());
            }
            serde_json::Value::Object(m)
        })
        .collect();
    let body = serde_json::json!({ "messages": msgs }).to_string();
    let encs = encoders();
    let enc = &encs[usize::from(input.template) % encs.len()];
    let mut scratch = ScratchBuf::new();
    let strict = enc.render_chat(body.as_bytes(), 0, &mut scratch);
    let full = enc.engine_chat(body.as_bytes(), Some(0));
    if let (Ok(Outcome::Done(())), Ok(full)) = (strict, full) {
        assert_eq!(scratch.rendered(), full.rendered);
    }
});
