//! kvprofile-core profile → encoder, and the publish-time validator.

use crate::common_models;

use common_models::*;
use kvprofile_core::{
    ArtifactReceipt, ArtifactValidator, Profile, VerifiedArtifact, VerifiedArtifacts,
};
use kvtemplate::{encoder_from_profile, spec_from_profile, KvtemplateValidator, Outcome};
use std::sync::Arc;

const PIN: &str = "88145e3c3249adc2546ede277e9819d6e405e19072456e4b521cbc724bd60773";
const TPIN: &str = "56a1447ad31926fdc21fb07e56e5642bd9c850c4f52d8c8af7bbe5f079a84f5f";

fn profile() -> Profile {
    let yaml = format!(
        r#"profileId: r1-distill-qwen-7b-v1
baseModel: deepseek-ai/DeepSeek-R1-Distill-Qwen-7B
modelType: qwen2
engineQuirks:
  sglang-kv-rank-v1:
    completionsBos: true
tokenizerArtifact: sha256/{PIN}
tokenizerSha256: {PIN}
templateArtifact: sha256/{TPIN}
templateSha256: {TPIN}
templateContentFormat: string
renderPolicy:
  addGenerationPrompt: true
  bosToken: "<｜begin▁of▁sentence｜>"
  eosToken: "<｜end▁of▁sentence｜>"
supportedApis:
  - completions
  - chat
aliasPolicy: base_model_only
"#
    );
    Profile::parse(yaml.as_bytes(), "r1.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn artifact(bytes: Vec<u8>) -> VerifiedArtifact {
    VerifiedArtifact {
        receipt: ArtifactReceipt {
            relative_path: "artifacts/test".into(),
            sha256: String::new(),
            size: bytes.len() as u64,
            mode: 0o644,
            uid: 0,
            inode: 0,
            loaded_at: std::time::SystemTime::now(),
        },
        bytes: Arc::from(bytes),
    }
}

fn artifacts(template: &str) -> VerifiedArtifacts {
    let tok = std::fs::read(model_dir(R1).join("tokenizer.json")).unwrap_or_default();
    VerifiedArtifacts {
        tokenizer: artifact(tok),
        template: Some(artifact(template.as_bytes().to_vec())),
        tokenizer_config: None,
        bos_token_id: Some(151646),
    }
}

fn r1_template() -> String {
    spec(R1, kvtemplate::Engine::Vllm)
        .template_source
        .unwrap_or_default()
}

#[test]
fn profile_encoders_follow_the_contract_quirks() {
    let p = profile();
    let a = artifacts(&r1_template());
    let mut out = [0u32; 16];
    let sglang =
        encoder_from_profile(&p, &a, "sglang-kv-rank-v1").unwrap_or_else(|e| panic!("{e}"));
    let got = sglang
        .encode_completions("The capital of France is", &mut out)
        .ok();
    assert!(matches!(got, Some(Outcome::Done(n)) if n.written == 6));
    assert_eq!(out[..6], [151646, 785, 6722, 315, 9625, 374]);
    let vllm = encoder_from_profile(&p, &a, "vllm-kv-map-v3").unwrap_or_else(|e| panic!("{e}"));
    let got = vllm
        .encode_completions("The capital of France is", &mut out)
        .ok();
    assert!(matches!(got, Some(Outcome::Done(n)) if n.written == 5));
    // chat: one BOS, from the template
    let chat = vllm
        .encode_chat_to_vec(br#"{"messages":[{"role":"user","content":"hi"}]}"#, 0, 64)
        .ok();
    let Some(Outcome::Done(r)) = chat else {
        panic!("{chat:?}")
    };
    assert!(r.text.starts_with("<｜begin▁of▁sentence｜><｜User｜>hi"));
    assert_eq!(r.ids.iter().filter(|&&i| i == 151646).count(), 1);
}

#[test]
fn the_engine_is_the_catalogs_never_the_ids_spelling() {
    let p = profile();
    let a = artifacts(&r1_template());
    // Catalog contract ids, release ids and bare engine names resolve; the engine comes from
    // the catalog entry.
    for id in [
        "vllm-kv-array-v1",
        "vllm-kv-map-v3-r0.31",
        "trtllm-kv-http-v2",
        "sglang",
    ] {
        let spec = spec_from_profile(&p, &a, id).unwrap_or_else(|e| panic!("{id}: {e}"));
        let want = kvprofile_core::contracts::builtin()
            .unwrap()
            .engine_of(id)
            .or(kvtemplate::Engine::from_name(id));
        assert_eq!(Some(spec.engine), want, "{id}");
    }
    // Ids that merely look like an engine's are refused, whatever their first segment says.
    for id in ["vllm-kv-v1", "sglang-kv-rank-v9", "trtllm-", "VLLM", ""] {
        let e = spec_from_profile(&p, &a, id).err();
        assert!(
            matches!(&e, Some(kvtemplate::Error::Spec(m)) if m.contains("unknown engine contract")),
            "{id}: {e:?}"
        );
    }
    // llama.cpp is a catalog engine without a chat path.
    let e = spec_from_profile(&p, &a, "llamacpp-nokv-v1").err();
    assert!(
        matches!(
            e,
            Some(kvtemplate::Error::NoChatPath(kvtemplate::Engine::Llamacpp))
        ),
        "{e:?}"
    );
    let e = kvtemplate::Encoder::new(kvtemplate::EncoderSpec::new(kvtemplate::Engine::Llamacpp));
    assert!(matches!(e, Err(kvtemplate::Error::NoChatPath(_))));
}

#[test]
fn validator_compiles_templates_and_loads_tokenizers() {
    let p = profile();
    assert_eq!(KvtemplateValidator.name(), "kvtemplate");
    assert!(KvtemplateValidator
        .validate_profile(&p, &artifacts(&r1_template()))
        .is_ok());
    let bad = KvtemplateValidator.validate_profile(&p, &artifacts("{% for %}"));
    assert!(bad.is_err_and(|e| e.contains("r1-distill-qwen-7b-v1")));
    let clock = KvtemplateValidator.validate_profile(&p, &artifacts("{{ strftime_now('%Y') }}"));
    assert!(
        clock.is_err(),
        "strftime_now without clockPolicy must be refused"
    );
}

/// The validator keeps the tokenizer it parsed; encoders built from the published profile share
/// it (no second parse) and give exactly the ids of a fresh parse; replaced tokenizer bytes are
/// never served by the kept tokenizer.
#[test]
fn loaded_profiles_share_the_parsed_tokenizer() {
    use kvprofile_core::LoadedProfile;
    use kvtemplate::{encoder_from_loaded, ParsedTokenizer};
    let p = profile();
    let a = artifacts(&r1_template());
    let prepared = KvtemplateValidator
        .prepare_profile(&p, &a)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(prepared.is_some());
    let lp = LoadedProfile {
        profile: p.clone(),
        document_path: "r1.yaml".into(),
        document_sha256: String::new(),
        artifacts: a.clone(),
        generation: 1,
        attestation: None,
        prepared,
    };
    let kept = ParsedTokenizer::of(&lp).expect("kept with the profile");
    let inner = |e: &kvtemplate::Encoder| -> *const kvtoken::FastEncoder {
        e.tokenizer()
            .map(|t| t.inner() as *const _)
            .unwrap_or(std::ptr::null())
    };
    let sglang = encoder_from_loaded(&lp, "sglang-kv-rank-v1").unwrap_or_else(|e| panic!("{e}"));
    let vllm = encoder_from_loaded(&lp, "vllm-kv-map-v3").unwrap_or_else(|e| panic!("{e}"));
    assert!(std::ptr::eq(inner(&sglang), Arc::as_ptr(&kept.encoder)));
    assert!(std::ptr::eq(inner(&vllm), Arc::as_ptr(&kept.encoder)));
    let fresh = encoder_from_profile(&p, &a, "sglang-kv-rank-v1").unwrap_or_else(|e| panic!("{e}"));
    assert!(!std::ptr::eq(inner(&fresh), Arc::as_ptr(&kept.encoder)));
    for text in [
        "The capital of France is",
        "  spaces\n\nand 12345 digits ü 中文 🙂",
    ] {
        let (mut x, mut y) = ([0u32; 64], [0u32; 64]);
        let nx = sglang.encode_completions(text, &mut x).ok();
        let ny = fresh.encode_completions(text, &mut y).ok();
        let (Some(Outcome::Done(nx)), Some(Outcome::Done(ny))) = (nx, ny) else {
            panic!("{text:?}")
        };
        assert_eq!(x[..nx.written], y[..ny.written], "{text:?}");
    }
    // Replaced bytes (a new allocation, even with equal content) are parsed afresh.
    let mut replaced = lp.clone();
    replaced.artifacts.tokenizer.bytes = Arc::from(lp.artifacts.tokenizer.bytes.to_vec());
    assert!(ParsedTokenizer::of(&replaced).is_none());
    let own = encoder_from_loaded(&replaced, "vllm-kv-map-v3").unwrap_or_else(|e| panic!("{e}"));
    assert!(!std::ptr::eq(inner(&own), Arc::as_ptr(&kept.encoder)));
}
