//! A checkpoint without `modelType` whose files are one an engine renders without Jinja
//! (`kvtemplate::renderer_hint`), with the real model files of `testdata/models/`: gpt-oss's
//! `tokenizer.json` and template without its `config.json` refuse chat on vLLM and
//! TensorRT-LLM with the reason naming `modelType` (completions stay exact), render with Jinja
//! on SGLang (which renders gpt-oss with its template); a Mistral `tekken.json` pinned as
//! `tokenizer.json` names `tokenizerFile`.

use kvtemplate::{spec_from_model_dir, ChatRenderer, Encoder, EncoderSpec, Engine, Error, Outcome};
use std::path::{Path, PathBuf};

fn models() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/models")).to_path_buf()
}

/// A copy of gpt-oss's model folder without `config.json` (so no model type).
fn gpt_oss_without_config() -> PathBuf {
    let src = models().join("openai__gpt-oss-20b");
    let dir = std::env::temp_dir().join(format!("kvexact-hint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in [
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
    ] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    dir
}

const BODY: &[u8] = br#"{"model":"gpt-oss","messages":[{"role":"user","content":"hi"}]}"#;
const NOW: i64 = 1_773_480_600_000;

#[test]
fn gpt_oss_without_model_type_refuses_chat_where_the_engine_renders_harmony() {
    let dir = gpt_oss_without_config();
    for engine in [Engine::Vllm, Engine::Trtllm] {
        let spec = spec_from_model_dir(&dir, engine).unwrap();
        assert_eq!(spec.model_type, None);
        let enc = Encoder::new(spec).unwrap();
        let ChatRenderer::Unknown(why) = enc.renderer() else {
            panic!("{engine:?}: {:?}", enc.renderer());
        };
        assert!(
            why.contains("modelType") && why.contains("harmony"),
            "{why}"
        );
        match enc.encode_chat_to_vec(BODY, NOW, 4096) {
            Err(Error::Unsupported(m)) => assert!(m.contains("modelType"), "{m}"),
            other => panic!("{engine:?}: chat gave {other:?}"),
        }
        // Completions do not depend on the renderer: the same ids as with the model type.
        let mut named = spec_from_model_dir(&models().join("openai__gpt-oss-20b"), engine).unwrap();
        assert_eq!(named.model_type.as_deref(), Some("gpt_oss"));
        named.renderer = ChatRenderer::Jinja;
        let named = Encoder::new(named).unwrap();
        let mut a = vec![0u32; 64];
        let mut b = vec![0u32; 64];
        let (Outcome::Done(x), Outcome::Done(y)) = (
            enc.encode_completions("hello <|channel|> world", &mut a)
                .unwrap(),
            named
                .encode_completions("hello <|channel|> world", &mut b)
                .unwrap(),
        ) else {
            panic!("completions refused");
        };
        assert_eq!(a[..x.written], b[..y.written]);
    }
    // SGLang renders gpt-oss with its Jinja template: chat is served.
    let enc = Encoder::new(spec_from_model_dir(&dir, Engine::Sglang).unwrap()).unwrap();
    assert_eq!(enc.renderer(), ChatRenderer::Jinja);
    let out = enc.encode_chat_to_vec(BODY, NOW, 4096).unwrap();
    assert!(
        matches!(out, Outcome::Done(r) if r.text.contains("<|channel|>") || r.text.contains("<|message|>"))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_model_without_harmony_files_keeps_its_template() {
    let mut spec = spec_from_model_dir(&models().join("Qwen__Qwen3-0.6B"), Engine::Vllm).unwrap();
    spec.model_type = None;
    let enc = Encoder::new(spec).unwrap();
    assert_eq!(enc.renderer(), ChatRenderer::Jinja);
    assert!(matches!(
        enc.encode_chat_to_vec(BODY, NOW, 4096).unwrap(),
        Outcome::Done(_)
    ));
}

#[test]
fn a_mistral_file_as_tokenizer_json_names_tokenizer_file() {
    let tekken =
        std::fs::read(models().join("mistralai__Mistral-Nemo-Instruct-2407/tekken.json")).unwrap();
    let mut spec = EncoderSpec::new(Engine::Vllm);
    spec.tokenizer_json = Some(tekken);
    match Encoder::new(spec) {
        Err(Error::Spec(m)) => assert!(m.contains("tokenizerFile: tekken.json"), "{m}"),
        other => panic!("{other:?}"),
    }
    let spm =
        std::fs::read(models().join("mistralai__Mistral-Large-Instruct-2411/tokenizer.model.v7"))
            .unwrap();
    assert_eq!(
        kvtemplate::renderer_hint::mistral_file_kind(&spm),
        Some("tokenizer.model.v7")
    );
    let mut spec = EncoderSpec::new(Engine::Vllm);
    spec.tokenizer_json = Some(spm);
    match Encoder::new(spec) {
        Err(Error::Spec(m)) => assert!(m.contains("tokenizerFile: tokenizer.model.v7"), "{m}"),
        other => panic!("{other:?}"),
    }
}
