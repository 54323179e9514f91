//! Encoder behaviour beyond the vectors: completions per engine, truncation, the clock policy,
//! thread sharing, publish-time validation, and the strict path agreeing with the engine
//! emulation on plain chat.

use crate::common_models;

use common_models::*;
use kvtemplate::{
    validate_artifacts, ClockPolicy, Encoder, Engine, Error, Outcome, Refusal, ResultClass,
    ScratchBuf,
};
use proptest::prelude::*;
use std::sync::{Arc, OnceLock};

#[test]
fn encoder_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Encoder>();
    check::<Arc<Encoder>>();
}

#[test]
fn completions_per_engine_r1() {
    // docs/contracts/templates.md §11: vLLM/TRT-LLM no BOS, SGLang BOS 151646 + text.
    let text = "The capital of France is";
    let plain = [785, 6722, 315, 9625, 374];
    for (engine, want_bos) in [
        (Engine::Vllm, false),
        (Engine::Trtllm, false),
        (Engine::Sglang, true),
    ] {
        let enc = encoder(R1, engine);
        let mut out = [0u32; 16];
        let got = enc.encode_completions(text, &mut out);
        let Ok(Outcome::Done(n)) = got else {
            panic!("{engine:?}: {got:?}")
        };
        let ids = &out[..n.written];
        if want_bos {
            assert_eq!(ids.first(), Some(&151646));
            assert_eq!(&ids[1..], &plain);
        } else {
            assert_eq!(ids, &plain);
        }
        assert!(!n.truncated);
    }
}

#[test]
fn completions_bos_counts_against_the_cap() {
    let enc = encoder(R1, Engine::Sglang);
    let mut out = [0u32; 3];
    let got = enc.encode_completions("The capital of France is", &mut out);
    assert_eq!(
        got.ok(),
        Some(Outcome::Done(kvtemplate::Encoded {
            written: 3,
            truncated: true
        }))
    );
    assert_eq!(out, [151646, 785, 6722]);
}

#[test]
fn completions_empty_and_nul() {
    let enc = encoder(QWEN25, Engine::Vllm);
    let mut out = [0u32; 8];
    let err = enc.encode_completions("", &mut out).err();
    assert_eq!(err.map(|e| e.class()), Some(ResultClass::Request));
    assert_eq!(
        enc.encode_completions("a\0b", &mut out).ok(),
        Some(Outcome::Refused(Refusal::NulByte))
    );
    // The engine emulation: vLLM refuses the empty prompt, TRT-LLM encodes it to [].
    assert!(enc.engine_completions("").is_err());
    assert_eq!(
        encoder(QWEN25, Engine::Trtllm).engine_completions("").ok(),
        Some(vec![])
    );
}

#[test]
fn completions_bos_quirk_is_sglang_only() {
    let mut spec = spec(R1, Engine::Vllm);
    spec.completions_bos = true;
    let err = Encoder::new(spec).err();
    assert!(matches!(err, Some(Error::Spec(_))), "{err:?}");
    let mut spec = spec_for_bos(Some("<｜no such token｜>"));
    spec.completions_bos = true;
    assert!(matches!(Encoder::new(spec).err(), Some(Error::Spec(_))));
}

fn spec_for_bos(bos: Option<&str>) -> kvtemplate::EncoderSpec {
    let mut s = spec(R1, Engine::Sglang);
    s.bos_token = bos.map(str::to_string);
    s
}

#[test]
fn chat_truncates_at_max_ids() {
    let enc = encoder(QWEN25, Engine::Vllm);
    let body = br#"{"messages":[{"role":"user","content":"What is 2+2?"}]}"#;
    let full = enc.encode_chat_to_vec(body, 0, 4096).ok();
    let Some(Outcome::Done(full)) = full else {
        panic!("{full:?}")
    };
    assert_eq!(full.ids.len(), 36);
    let cut = enc.encode_chat_to_vec(body, 0, 10).ok();
    let Some(Outcome::Done(cut)) = cut else {
        panic!("{cut:?}")
    };
    assert!(cut.truncated);
    assert_eq!(cut.ids, full.ids[..10]);
}

const CLOCK_TEMPLATE: &str = "{{ bos_token }}Today Date: {{ strftime_now('%d %b %Y') }}\n{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";

#[test]
fn clock_policy_renders_from_the_callers_now() {
    let mut s = spec(LLAMA31, Engine::Vllm);
    s.template_source = Some(CLOCK_TEMPLATE.to_string());
    s.clock_policy = Some(ClockPolicy::UtcDate);
    let enc = Encoder::new(s).unwrap_or_else(|e| panic!("{e}"));
    let body = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
    let mut scratch = ScratchBuf::new();
    // 2024-07-26T23:59:59.999Z and one millisecond later.
    for (now, date) in [
        (1_722_038_399_999, "26 Jul 2024"),
        (1_722_038_400_000, "27 Jul 2024"),
    ] {
        let got = enc.render_chat(body, now, &mut scratch).ok();
        assert_eq!(got, Some(Outcome::Done(())));
        assert_eq!(
            scratch.rendered(),
            format!("<|begin_of_text|>Today Date: {date}\nuser: hi\n")
        );
    }
}

#[test]
fn clock_policy_must_agree_with_the_template() {
    let mut s = spec(LLAMA31, Engine::Vllm);
    s.template_source = Some(CLOCK_TEMPLATE.to_string());
    assert!(matches!(Encoder::new(s).err(), Some(Error::Spec(_))));
    let mut s = spec(LLAMA31, Engine::Vllm);
    s.clock_policy = Some(ClockPolicy::UtcDate);
    assert!(matches!(Encoder::new(s).err(), Some(Error::Spec(_))));
}

#[test]
fn validate_artifacts_checks_template_tokenizer_and_bos() {
    let tok = std::fs::read(model_dir(R1).join("tokenizer.json")).unwrap_or_default();
    let bos = "<｜begin▁of▁sentence｜>";
    assert!(validate_artifacts(Some("{{ messages }}"), &tok, Some(bos), true, None).is_ok());
    let bad = validate_artifacts(Some("{% if %}"), &tok, None, false, None).err();
    assert_eq!(bad.map(|e| e.class()), Some(ResultClass::Renderer));
    let bad = validate_artifacts(None, b"{not json", None, false, None).err();
    assert_eq!(bad.map(|e| e.class()), Some(ResultClass::Tokenizer));
    let bad = validate_artifacts(None, &tok, Some("<think>"), true, None).err();
    assert!(
        matches!(bad, Some(Error::Spec(_))),
        "<think> is not special: {bad:?}"
    );
}

#[test]
fn special_tokens_match_the_vectors_template_kwargs() {
    // template_special_kwargs of each vector file = what spec_from_model_dir binds.
    for (slug, file) in [
        (QWEN25, "qwen25-7b-instruct-v1.json"),
        (QWEN3, "qwen3-06b-default-v1.json"),
        (R1, "r1-distill-qwen-7b-v1.json"),
        (LLAMA31, "llama31-8b-instruct-v1.json"),
        (GEMMA2, "gemma2-9b-it-v1.json"),
    ] {
        let path = model_dir("").join("../vectors/templates").join(file);
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap_or_default()).unwrap_or_default();
        let want = doc
            .get("template_special_kwargs")
            .cloned()
            .unwrap_or_default();
        let s = spec(slug, Engine::Vllm);
        let mut got = serde_json::Map::new();
        if let Some(b) = &s.bos_token {
            got.insert("bos_token".into(), b.clone().into());
        }
        if let Some(e) = &s.eos_token {
            got.insert("eos_token".into(), e.clone().into());
        }
        for (k, v) in &s.extra_special_tokens {
            let v = match v {
                kvtemplate::SpecialTokenValue::Text(t) => serde_json::Value::from(t.clone()),
                kvtemplate::SpecialTokenValue::List(l) => serde_json::Value::from(l.clone()),
            };
            got.insert(k.clone(), v);
        }
        assert_eq!(serde_json::Value::Object(got), want, "{slug}");
    }
}

#[test]
fn one_encoder_many_threads() {
    let enc = Arc::new(encoder(QWEN25, Engine::Vllm));
    let body = br#"{"messages":[{"role":"user","content":"What is 2+2?"}]}"#;
    let want = enc.encode_chat_to_vec(body, 0, 4096).ok();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let enc = Arc::clone(&enc);
            std::thread::spawn(move || {
                (0..20)
                    .map(|_| enc.encode_chat_to_vec(body, 0, 4096).ok())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for got in h.join().unwrap_or_default() {
            assert_eq!(got, want);
        }
    }
}

fn llama_pair() -> &'static (Encoder, Encoder) {
    static PAIR: OnceLock<(Encoder, Encoder)> = OnceLock::new();
    PAIR.get_or_init(|| {
        (
            encoder(LLAMA31, Engine::Vllm),
            encoder(LLAMA31, Engine::Sglang),
        )
    })
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ,.!?\n\t]{0,40}",
        "[ \u{a0}\u{3000}\u{1c}x<|>{}%#é東😀]{0,12}",
        Just("<|eot_id|>".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// The strict fast path (borrowed parse, restricted context) gives exactly the ids of the
    /// full engine emulation (the slow twin) on every plain request it does not refuse.
    #[test]
    fn strict_path_agrees_with_engine_emulation(
        system in proptest::option::of(arb_text()),
        turns in prop::collection::vec((arb_text(), arb_text()), 0..3),
        last in arb_text(),
    ) {
        let mut msgs = Vec::new();
        if let Some(s) = system {
            msgs.push(serde_json::json!({"role": "system", "content": s}));
        }
        for (u, a) in turns {
            msgs.push(serde_json::json!({"role": "user", "content": u}));
            msgs.push(serde_json::json!({"role": "assistant", "content": a}));
        }
        msgs.push(serde_json::json!({"role": "user", "content": [{"type": "text", "text": last}]}));
        let body = serde_json::json!({"model": "m", "messages": msgs}).to_string();
        let (vllm, sglang) = llama_pair();
        for enc in [vllm, sglang] {
            let strict = enc.encode_chat_to_vec(body.as_bytes(), 0, usize::MAX);
            let full = enc.engine_chat(body.as_bytes(), None);
            match (strict, full) {
                (Ok(Outcome::Done(s)), Ok(f)) => {
                    prop_assert_eq!(&s.text, &f.rendered);
                    prop_assert_eq!(Some(s.ids), f.ids);
                }
                (Ok(Outcome::Refused(r)), _) => prop_assert!(false, "refused {}", r),
                (s, f) => prop_assert!(false, "strict {:?} vs engine {:?}", s, f),
            }
        }
    }

    /// Arbitrary bytes never panic the strict path; they are encoded, refused or an error.
    #[test]
    fn arbitrary_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let (vllm, _) = llama_pair();
        let mut scratch = ScratchBuf::new();
        let mut out = [0u32; 64];
        let _ = vllm.encode_chat(&bytes, 0, &mut out, &mut scratch);
        let _ = vllm.engine_chat(&bytes, None);
    }
}
