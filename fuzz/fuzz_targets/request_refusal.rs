//! Request parser + strict refusal scan on arbitrary bytes: never panics, and the borrowed
//! exact-key JSON tree agrees with `serde_json::Value` (its slow twin).
#![no_main]

use kvtemplate::{json, spec_from_model_dir, Encoder, Engine, ScratchBuf};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn encoder() -> &'static Encoder {
    static ENC: OnceLock<Encoder> = OnceLock::new();
    ENC.get_or_init(|| {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/models/Qwen__Qwen3-0.6B"
        );
        let mut spec =
            spec_from_model_dir(std::path::Path::new(dir), Engine::Vllm).expect("model dir");
        spec.fuel = Some(1_000_000);
        Encoder::new(spec).expect("encoder")
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(slow) = serde_json::from_slice::<serde_json::Value>(data) {
        let fast = json::parse(data).expect("serde_json accepted it, so must we");
        assert_eq!(fast.to_serde(), slow);
    }
    let _ = json::RawObject::parse(data);
    let mut scratch = ScratchBuf::new();
    let mut out = [0u32; 256];
    let _ = encoder().encode_chat(data, 0, &mut out, &mut scratch);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = encoder().encode_completions(text, &mut out);
    }
});
