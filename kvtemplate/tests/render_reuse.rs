//! Render once per conversation (`render_split.rs`, `render_cache.rs`): which templates are
//! proven to allow it, and — the slow twin — every render through the cache equals the full
//! render of an encoder without one, text for text and error for error, over conversations
//! that grow, branch, get edited and change their tools, on the shipped templates and on
//! templates written to test the split's whitespace handling and its refusals.

use crate::common_models;

use common_models::*;
use kvtemplate::{Encoder, EncoderSpec, Engine, RefusalSet};
use minijinja::Value;
use proptest::prelude::*;
use std::sync::OnceLock;

const NOW: i64 = 1_721_997_296_000;

fn render_only(source: &str) -> Encoder {
    let mut spec = EncoderSpec::new(Engine::Vllm);
    spec.template_source = Some(source.to_string());
    if source.contains("strftime_now") {
        spec.clock_policy = Some(kvtemplate::ClockPolicy::UtcDate);
    }
    Encoder::new(spec).unwrap_or_else(|e| panic!("{e}: {source}"))
}

/// Templates written for the split: whitespace control of every kind around the loop's tags,
/// windows before and after, nested loops with `set`, `loop.last`, a header that reads the
/// first message, a footer, and `raise_exception` in the loop.
const SPLITTABLE: &[&str] = &[
    "{% for message in messages %}<{{ message.role }}>{{ message.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
    "{%- if messages[0].role == 'system' %}SYS:{{ messages[0].content }}\n{% endif -%}\n{%- for message in messages -%}\n    {{- message.role }}: {{ message.content }}\n  {%- if not loop.last %} | {% endif -%}\n{%- endfor -%}\n{{- '\\nEND' }}",
    "HEAD\n{%+ for m in messages +%}\n  [{{ loop.index }}]{{ m.content }}\n  {% endfor %}\nFOOT",
    "{% for message in messages %}\n{% if loop.index0 > 0 and messages[loop.index0 - 1].role == message.role %}{{ raise_exception('roles must alternate') }}{% endif %}\n{% if message.role == 'tool' and (loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool') %}<tools>{% endif %}\n{{ message.content }}\n{% if message.role == 'tool' and (loop.last or messages[loop.index0 + 1].role != 'tool') %}</tools>{% endif %}\n{% endfor %}",
    "{% for message in messages %}{% for part in message.content.split(' ') %}{% set w = part | upper %}{{ w }}{% if not loop.last %}_{% endif %}{% endfor %}{{ '.' if loop.index % 2 else '!' }}{% if loop.first %}^{% endif %}{% endfor %}",
    "{%- for message in messages %}\n{{ messages[loop.index0 + 2].content if (loop.index0 + 2) < 99 else '' }}|{{ message.content | trim }}\n{%- endfor %}",
    "{% for m in messages %}{% if m.role == 'assistant' %}{% set r = 'model' %}{% else %}{% set r = m.role %}{% endif %}{% set n = r | length %}<{{ r }}:{{ n }}>{{ m.content }}{% endfor %}",
];

/// Templates the split must refuse, with what the refusal names.
const WHOLE: &[(&str, &str)] = &[
    ("{% for m in messages %}{{ loop.length }}{{ m.content }}{% endfor %}", "loop.length"),
    ("{% for m in messages %}{{ messages | length }}{% endfor %}", "messages"),
    ("{% set ns = namespace(last=0) %}{% for m in messages %}{% set ns.last = loop.index0 %}{% endfor %}{% for m in messages %}{{ ns.last }}{% endfor %}", "top-level loops"),
    ("{% set ns = namespace(n=0) %}{% for m in messages %}{{ ns.n }}{% endfor %}", "ns"),
    ("{% for m in messages %}{{ x }}{% set x = m.content %}{% endfor %}", "may not have set it"),
    ("{% for m in messages %}{% if m.role == 'user' %}{% set x = m.content %}{% endif %}{{ x }}{% endfor %}", "may not have set it"),
    ("{% for m in messages %}{% set x = 1 %}{% for p in [1] %}{% set x = p %}{% endfor %}{% endfor %}", "nested"),
    ("{% for m in messages %}{{ m.content }}{% if m.role == 'x' %}{% break %}{% endif %}{% endfor %}", "break"),
    ("{% set messages = messages[1:] %}{% for m in messages %}{{ m.content }}{% endfor %}", "messages"),
    ("{% for m in messages %}{{ strftime_now('%Y') }}{% endfor %}", "clock"),
    ("{% for m in messages %}{{ messages[-1].content }}{% endfor %}", "messages"),
    ("{% for m in messages if m.role != 'system' %}{{ m.content }}{% endfor %}", "filter"),
    ("{% for m in messages %}{{ loop.changed(m.role) }}{% endfor %}", "loop.changed"),
    ("{% for m in messages %}{{ loop.cycle('a', 'b') }}{% endfor %}", "loop.cycle"),
    ("{% for m in messages %}{{ loop.previtem }}{% endfor %}", "loop.previtem"),
    ("{% for m in messages %}{% set messages = [] %}{{ m.content }}{% endfor %}", "`messages`"),
    ("{% for m in messages %}{% for p in [1, 2] if loop.index0 > 0 %}{{ p }}{% endfor %}{% endfor %}", "nested loop's filter"),
    ("{% macro f(x) %}{{ x }}{% endmacro %}{% for m in messages %}{{ f(m.content) }}{% endfor %}", "`f`"),
    ("{{ messages | length }}", "0 top-level loops"),
];

#[test]
fn the_split_is_proven_or_refused_with_a_reason() {
    for src in SPLITTABLE {
        let enc = render_only(src);
        assert!(
            enc.render_reuse().is_ok(),
            "{src}: {:?}",
            enc.render_reuse()
        );
    }
    for (src, why) in WHOLE {
        let enc = render_only(src);
        match enc.render_reuse() {
            Err(reason) => assert!(reason.contains(why), "{src}: {reason}"),
            Ok(w) => panic!("{src} split with window {w:?}"),
        }
    }
    // Windows: the tool-grouping template reads one message back and one ahead.
    assert_eq!(render_only(SPLITTABLE[3]).render_reuse(), Ok((1, 1)));
    assert_eq!(render_only(SPLITTABLE[5]).render_reuse(), Ok((0, 2)));
    assert_eq!(render_only(SPLITTABLE[0]).render_reuse(), Ok((0, 0)));
}

/// The shipped templates: Qwen2.5 (groups tool results by looking one message back and one
/// ahead) and Gemma 2 are split; the others read state the header computes from the whole
/// list, reassign `messages`, or walk the messages twice, and are rendered whole.
#[test]
fn shipped_templates() {
    let status = |slug: &str| {
        encoder(slug, Engine::Vllm)
            .render_reuse()
            .map_err(str::to_owned)
    };
    assert_eq!(status(QWEN25), Ok((1, 1)));
    // Qwen3's pre-loop walks the messages backwards into the namespace its loop reads.
    assert!(status(QWEN3).is_err_and(|w| w.contains("`message` is also assigned")));
    // Llama 3.1 drops the system message by assigning `messages[1:]` to `messages`.
    assert!(status(LLAMA31).is_err_and(|w| w.contains("assigns `messages`")));
    // Gemma 2 sets `role` in both arms of an `if` before it reads it.
    assert_eq!(status(GEMMA2), Ok((0, 0)));
    // R1-Distill walks the messages twice (the system prompt is gathered first).
    assert!(status(R1).is_err_and(|w| w.contains("2 top-level loops")));
}

fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z ,.'?]{1,30}",
        1 => proptest::sample::select(vec![
            "\n", "  ", "<|im_end|>", "é", "\u{E000}kvexact-iteration\u{E001}", "{{", "%}",
        ])
        .prop_map(str::to_owned),
    ];
    proptest::collection::vec(piece, 0..5).prop_map(|v| v.concat())
}

fn role() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(vec!["user", "assistant", "tool", "system"])
}

fn message() -> impl Strategy<Value = (&'static str, String)> {
    (role(), text())
}

fn values(msgs: &[(&str, String)]) -> Vec<Value> {
    msgs.iter()
        .map(|(r, c)| {
            Value::from(minijinja::value::Serde(
                serde_json::json!({"role": r, "content": c}),
            ))
        })
        .collect()
}

/// What an encoder renders (errors as text).
fn render(
    enc: &Encoder,
    msgs: &[(&str, String)],
    agp: bool,
    kwargs: Option<Value>,
) -> Result<String, String> {
    enc.render_hf(values(msgs), None, agp, false, kwargs, Some(NOW))
        .map_err(|e| e.to_string())
}

/// One step of traffic: append messages, go back to an earlier turn (a retry or a branch),
/// edit one earlier message, or flip the generation prompt.
#[derive(Debug, Clone)]
enum Step {
    Append(Vec<(&'static str, String)>),
    Truncate(usize),
    Edit(usize, String),
    Flip,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => proptest::collection::vec(message(), 1..4).prop_map(Step::Append),
        1 => (0usize..20).prop_map(Step::Truncate),
        1 => (0usize..20, text()).prop_map(|(i, t)| Step::Edit(i, t)),
        1 => Just(Step::Flip),
    ]
}

fn warm_cold(src: &str) -> (Encoder, Encoder) {
    let mut warm = render_only(src);
    warm.enable_segment_cache(1 << 20);
    (warm, render_only(src))
}

fn split_pairs() -> &'static Vec<(Encoder, Encoder)> {
    static P: OnceLock<Vec<(Encoder, Encoder)>> = OnceLock::new();
    P.get_or_init(|| SPLITTABLE.iter().map(|s| warm_cold(s)).collect())
}

/// The shipped templates that split, through an engine's own path (every liftable code
/// lifted): Qwen2.5 on vLLM, Gemma 2 on SGLang (it raises unless roles alternate).
fn engine_pairs() -> &'static Vec<(&'static str, Encoder, Encoder)> {
    static P: OnceLock<Vec<(&'static str, Encoder, Encoder)>> = OnceLock::new();
    P.get_or_init(|| {
        [(QWEN25, Engine::Vllm), (GEMMA2, Engine::Sglang)]
            .into_iter()
            .map(|(slug, engine)| {
                let make = || {
                    Encoder::new(spec(slug, engine).with_lifted(RefusalSet::LIFTABLE))
                        .expect("encoder")
                };
                let mut warm = make();
                warm.enable_segment_cache(1 << 20);
                (slug, warm, make())
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Two conversations interleaved on one warm encoder (they share the first message), each
    /// growing, branching and edited: every render equals the cold encoder's full render.
    #[test]
    fn split_renders_equal_full_renders(
        first in message(),
        a in proptest::collection::vec(step(), 1..12),
        b in proptest::collection::vec(step(), 1..12),
        kw in proptest::bool::ANY,
    ) {
        for (t, (warm, cold)) in split_pairs().iter().enumerate() {
            let mut convs = [vec![first.clone()], vec![first.clone()]];
            let mut agp = [true, true];
            let steps: Vec<(usize, &Step)> = a.iter().map(|s| (0, s)).zip(b.iter().map(|s| (1, s)))
                .flat_map(|(x, y)| [x, y]).collect();
            for (c, s) in steps {
                match s {
                    Step::Append(m) => convs[c].extend(m.iter().cloned()),
                    Step::Truncate(n) => { let n = (*n).max(1).min(convs[c].len()); convs[c].truncate(n) }
                    Step::Edit(i, t) => { let n = convs[c].len(); convs[c][i % n].1 = t.clone() }
                    Step::Flip => agp[c] = !agp[c],
                }
                let kwargs = kw.then(|| Value::from(minijinja::value::Serde(serde_json::json!({"x": c}))));
                let want = render(cold, &convs[c], agp[c], kwargs.clone());
                let got = render(warm, &convs[c], agp[c], kwargs);
                prop_assert_eq!(&got, &want, "template {} conversation {:?}", t, &convs[c]);
            }
        }
    }

    /// Qwen2.5 and Gemma 2 through the engine path, with tool calls and tool results (Qwen2.5
    /// groups them by looking back and ahead), the tools changing mid-conversation, and
    /// conversations Gemma refuses (roles not alternating: the error must be the same).
    #[test]
    fn qwen_engine_renders_equal_full_renders(
        steps in proptest::collection::vec(step(), 1..16),
        tools_at in 0usize..16,
    ) {
        for (slug, warm, cold) in engine_pairs() {
        let mut conv: Vec<serde_json::Value> = vec![serde_json::json!({"role": "system", "content": "You are terse."})];
        for (k, s) in steps.iter().enumerate() {
            match s {
                Step::Append(m) => for (r, c) in m {
                    conv.push(match *r {
                        "assistant" if c.len() % 2 == 1 => serde_json::json!({"role": "assistant", "content": null,
                            "tool_calls": [{"id": format!("c{k}"), "type": "function",
                                "function": {"name": "lookup", "arguments": {"q": c}}}]}),
                        "system" => serde_json::json!({"role": "user", "content": c}),
                        r => serde_json::json!({"role": r, "content": c}),
                    })
                },
                Step::Truncate(n) => { let n = (*n).max(1).min(conv.len()); conv.truncate(n) }
                Step::Edit(i, t) => { let n = conv.len(); conv[i % n]["content"] = serde_json::json!(t) }
                Step::Flip => {}
            }
            let mut body = serde_json::json!({"model": "m", "messages": conv});
            if k >= tools_at {
                body["tools"] = serde_json::json!([{"type": "function", "function": {"name": "lookup",
                    "description": "Look it up", "parameters": {"type": "object",
                    "properties": {"q": {"type": "string"}}}}}]);
            }
            let body = serde_json::to_vec(&body).expect("json");
            let want = cold.engine_chat(&body, Some(NOW)).map(|c| (c.rendered, c.ids)).map_err(|e| e.to_string());
            let got = warm.engine_chat(&body, Some(NOW)).map(|c| (c.rendered, c.ids)).map_err(|e| e.to_string());
            prop_assert_eq!(got, want, "{}", slug);
        }
        }
    }
}

/// The agent workload's 40 turns through Qwen2.5: each turn after the first reuses the
/// previous turn's render, and every render equals the full one.
#[test]
fn the_agent_conversation_renders_each_message_once() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benches/workload/agent-40turns.json"
    );
    let full: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("workload")).unwrap();
    let msgs = full["messages"].as_array().expect("messages").clone();
    let (warm, cold) = warm_cold_qwen();
    let before = warm.render_cache_stats().expect("qwen splits");
    let mut turns = 0;
    for (i, m) in msgs.iter().enumerate() {
        if m["role"] != "user" {
            continue;
        }
        let mut t = full.clone();
        t["messages"] = serde_json::Value::Array(msgs[..=i].to_vec());
        let body = serde_json::to_vec(&t).unwrap();
        let want = cold
            .engine_chat(&body, Some(NOW))
            .map(|c| c.rendered)
            .map_err(|e| e.to_string());
        assert!(want.is_ok(), "{want:?}");
        let got = warm
            .engine_chat(&body, Some(NOW))
            .map(|c| c.rendered)
            .map_err(|e| e.to_string());
        assert_eq!(got, want, "turn ending at message {i}");
        turns += 1;
    }
    let after = warm.render_cache_stats().unwrap();
    assert_eq!(turns, 40);
    assert_eq!(after.hits - before.hits, 39, "{before:?} → {after:?}");
    assert_eq!(after.fallbacks, before.fallbacks);
}

fn warm_cold_qwen() -> (Encoder, Encoder) {
    let make = || {
        Encoder::new(spec(QWEN25, Engine::Vllm).with_lifted(RefusalSet::LIFTABLE)).expect("qwen")
    };
    let mut warm = make();
    warm.enable_segment_cache(16 << 20);
    (warm, make())
}

/// A message holding the marker itself: the render falls back to the full one (same text).
#[test]
fn a_message_holding_the_marker_renders_whole() {
    let (warm, cold) = warm_cold(SPLITTABLE[0]);
    let msgs = vec![("user", "a \u{E000}kvexact-iteration\u{E001} b".to_string())];
    assert_eq!(
        render(&warm, &msgs, true, None),
        render(&cold, &msgs, true, None)
    );
    assert_eq!(warm.render_cache_stats().unwrap().fallbacks, 1);
}

/// The strict path (no lifted codes: `role` and `content` only) of the split shipped
/// templates, with and without caches.
fn strict_pairs() -> &'static Vec<(&'static str, Encoder, Encoder)> {
    static P: OnceLock<Vec<(&'static str, Encoder, Encoder)>> = OnceLock::new();
    P.get_or_init(|| {
        [(QWEN25, Engine::Vllm), (GEMMA2, Engine::Sglang)]
            .into_iter()
            .map(|(slug, engine)| {
                let mut warm = encoder(slug, engine);
                warm.enable_segment_cache(1 << 20);
                (slug, warm, encoder(slug, engine))
            })
            .collect()
    })
}

fn strict_render(enc: &Encoder, body: &[u8]) -> Result<(String, String), String> {
    let mut scratch = kvtemplate::ScratchBuf::new();
    enc.render_chat(body, NOW, &mut scratch)
        .map(|o| (format!("{o:?}"), scratch.rendered().to_string()))
        .map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Conversations that grow, go back and get edited, with text parts and nulls among the
    /// contents: the strict render with caches equals the one without, outcome and text.
    #[test]
    fn strict_renders_equal_full_renders(
        steps in proptest::collection::vec(step(), 1..16),
        parts in proptest::bool::ANY,
    ) {
        for (slug, warm, cold) in strict_pairs() {
            let mut conv: Vec<serde_json::Value> = Vec::new();
            for s in &steps {
                match s {
                    Step::Append(m) => for (r, c) in m {
                        let role = if *r == "tool" { "user" } else { r };
                        let content = if parts && c.len() % 3 == 0 {
                            serde_json::json!([{"type": "text", "text": c}, {"type": "text", "text": "x"}])
                        } else {
                            serde_json::json!(c)
                        };
                        conv.push(serde_json::json!({"role": role, "content": content}));
                    },
                    Step::Truncate(n) => { let n = (*n).max(1).min(conv.len()); conv.truncate(n) }
                    Step::Edit(i, t) if !conv.is_empty() => { let n = conv.len(); conv[i % n]["content"] = serde_json::json!(t) }
                    _ => {}
                }
                let body = serde_json::to_vec(&serde_json::json!({"model": "m", "messages": conv})).expect("json");
                prop_assert_eq!(strict_render(warm, &body), strict_render(cold, &body), "{}", slug);
            }
        }
    }
}

/// Thirty conversations sharing a system prompt, turns interleaved, through a cache a few
/// entries large: entries are evicted and re-made all along, and every render equals the full
/// one.
#[test]
fn an_evicting_cache_renders_what_the_full_render_does() {
    for src in [SPLITTABLE[0], SPLITTABLE[3]] {
        let mut warm = render_only(src);
        warm.enable_segment_cache(32 << 10);
        let cold = render_only(src);
        let mut convs: Vec<Vec<(&str, String)>> =
            vec![vec![("system", "You are terse.".to_string())]; 30];
        for turn in 0..12 {
            for (c, conv) in convs.iter_mut().enumerate() {
                let role = if (turn + c) % 5 == 4 {
                    "tool"
                } else if turn % 2 == 0 {
                    "user"
                } else {
                    "assistant"
                };
                conv.push((
                    role,
                    format!(
                        "conversation {c} turn {turn} {}",
                        "x".repeat((c * 7 + turn * 13) % 90)
                    ),
                ));
                assert_eq!(
                    render(&warm, conv, true, None),
                    render(&cold, conv, true, None),
                    "{src} {c} {turn}"
                );
            }
        }
        let st = warm.render_cache_stats().expect("split");
        assert!(st.hits > 0 && st.bytes <= st.capacity, "{st:?}");
    }
}
