//! A conversation re-sent turn after turn through an encoder with its caches on (the prompt
//! cache takes over the previous turn's ids up to a proven cut, the segment cache finds
//! earlier segments) gives exactly what an encoder without caches gives: the slow twin renders
//! the whole conversation and tokenizes the whole prompt from its start. Outcome, ids and
//! truncation are compared request by request, for realistic shapes: a system prompt and
//! growing turns, agent loops with tool calls and tool results (lifted codes), text that looks
//! like the templates' own markers, and caps that cut the prompt.

use crate::common_models;

use common_models::*;
use kvtemplate::{Encoder, Engine, Outcome, RefusalSet, ScratchBuf};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::OnceLock;

const NOW: i64 = 1_721_997_296_000;

/// (warm, cold) encoders of each model: caches on and off, every liftable code lifted (tool
/// calls and tools then take the engine's own render).
fn pairs() -> &'static Vec<(&'static str, Encoder, Encoder)> {
    static PAIRS: OnceLock<Vec<(&'static str, Encoder, Encoder)>> = OnceLock::new();
    PAIRS.get_or_init(|| {
        [
            (QWEN25, Engine::Vllm),
            (QWEN3, Engine::Vllm),
            (LLAMA31, Engine::Vllm),
            (GEMMA2, Engine::Sglang),
            (R1, Engine::Trtllm),
        ]
        .into_iter()
        .map(|(slug, engine)| {
            let make = || {
                Encoder::new(spec(slug, engine).with_lifted(RefusalSet::LIFTABLE))
                    .unwrap_or_else(|e| panic!("{slug}: {e}"))
            };
            let mut warm = make();
            warm.enable_segment_cache(1 << 20);
            (slug, warm, make())
        })
        .collect()
    })
}

/// Message text: prose, the templates' own markers, white space and non-ASCII.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z ,.'?]{1,60}",
        1 => proptest::sample::select(vec![
            "<|im_end|>", "<|im_start|>", "<|eot_id|>", "<end_of_turn>", "<think>", "</think>",
            "<tool_response>", "<|im_", "end|>", "\n", "\n\n", "  ", "é", "🚀", "<｜User｜>",
        ])
        .prop_map(str::to_owned),
    ];
    proptest::collection::vec(piece, 1..8).prop_map(|v| v.concat())
}

/// One exchange of the conversation.
#[derive(Debug, Clone)]
enum Turn {
    /// A user message, then the assistant's reply.
    Chat(String, String),
    /// A user message, an assistant tool call, the tool's result, then the reply.
    Tool(String, String, String),
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        3 => (text(), text()).prop_map(|(u, a)| Turn::Chat(u, a)),
        1 => (text(), text(), text()).prop_map(|(u, r, a)| Turn::Tool(u, r, a)),
    ]
}

/// Every request the gateway sees over the conversation: the messages up to each user
/// message and each tool result (what the model is asked to continue), with the tools.
fn requests(system: &Option<String>, turns: &[Turn], tools: bool) -> Vec<Vec<u8>> {
    let mut msgs: Vec<Value> = Vec::new();
    if let Some(s) = system {
        msgs.push(json!({"role": "system", "content": s}));
    }
    let mut out = Vec::new();
    let mut body = |msgs: &[Value]| {
        let mut b = json!({"model": "m", "messages": msgs});
        if tools {
            b["tools"] = json!([{"type": "function", "function": {"name": "lookup",
                "description": "Look it up", "parameters": {"type": "object",
                "properties": {"q": {"type": "string"}}}}}]);
        }
        out.push(serde_json::to_vec(&b).expect("json"));
    };
    for (i, t) in turns.iter().enumerate() {
        match t {
            Turn::Chat(u, a) => {
                msgs.push(json!({"role": "user", "content": u}));
                body(&msgs);
                msgs.push(json!({"role": "assistant", "content": a}));
            }
            Turn::Tool(u, r, a) => {
                msgs.push(json!({"role": "user", "content": u}));
                body(&msgs);
                let id = format!("call_{i}");
                msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": id, "type": "function",
                     "function": {"name": "lookup", "arguments": {"q": u}}}]}));
                msgs.push(json!({"role": "tool", "tool_call_id": id, "content": r}));
                body(&msgs);
                msgs.push(json!({"role": "assistant", "content": a}));
            }
        }
    }
    out
}

/// What an encoder gives for one request: outcome, ids, truncation (errors as text).
fn encode(enc: &Encoder, body: &[u8], cap: usize) -> Result<Outcome<(Vec<u32>, bool)>, String> {
    let mut scratch = ScratchBuf::new();
    match enc.encode_chat_capped(body, NOW, cap, &mut scratch) {
        Ok(o) => Ok(o.map(|e| (scratch.ids().to_vec(), e.truncated))),
        Err(e) => Err(e.to_string()),
    }
}

fn cap() -> impl Strategy<Value = usize> {
    prop_oneof![4 => Just(usize::MAX), 1 => 1usize..400]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn cached_turns_equal_full_render_and_tokenize(
        system in proptest::option::of(text()),
        turns in proptest::collection::vec(turn(), 1..7),
        tools in proptest::bool::weighted(0.3),
        caps in proptest::collection::vec(cap(), 32),
    ) {
        let bodies = requests(&system, &turns, tools);
        for (slug, warm, cold) in pairs() {
            for (i, body) in bodies.iter().enumerate() {
                let c = caps[i % caps.len()];
                let want = encode(cold, body, c);
                let got = encode(warm, body, c);
                prop_assert_eq!(&got, &want, "{} request {} cap {}", slug, i, c);
            }
        }
    }
}

/// The agent workload's conversation (benches/workload): every turn through the warm encoder
/// equals the cold one, and the prompt cache is what serves the later turns.
#[test]
fn the_agent_conversation_reuses_each_turn() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benches/workload/agent-40turns.json"
    );
    let full: Value = serde_json::from_slice(&std::fs::read(path).expect("workload")).unwrap();
    let msgs = full["messages"].as_array().expect("messages").clone();
    let (_, warm, cold) = pairs().first().expect("qwen");
    let before = warm.tokenizer().unwrap().prompt_cache().unwrap().stats();
    let mut turns = 0;
    for (i, m) in msgs.iter().enumerate() {
        if m["role"] != "user" {
            continue;
        }
        let mut t = full.clone();
        t["messages"] = Value::Array(msgs[..=i].to_vec());
        let body = serde_json::to_vec(&t).unwrap();
        let want = encode(cold, &body, usize::MAX);
        assert!(matches!(want, Ok(Outcome::Done(_))), "{want:?}");
        assert_eq!(
            encode(warm, &body, usize::MAX),
            want,
            "turn ending at message {i}"
        );
        turns += 1;
    }
    let after = warm.tokenizer().unwrap().prompt_cache().unwrap().stats();
    assert_eq!(turns, 40);
    assert!(
        after.hits - before.hits >= 39,
        "every turn after the first takes over the previous one: {before:?} → {after:?}"
    );
}
