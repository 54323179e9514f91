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
        // serde_json accepted it, so must we, unless it holds an integer literal beyond 128
        // bits (Python reads it exactly; kvexact refuses it).
        match json::parse(data) {
            Ok(fast) => assert!(same(&fast.to_serde(), &slow)),
            Err(e) => assert!(json::integer_too_large(&e), "{e}"),
        }
    }
    let _ = json::RawObject::parse(data);
    let mut scratch = ScratchBuf::new();
    let mut out = [0u32; 256];
    let _ = encoder().encode_chat(data, 0, &mut out, &mut scratch);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = encoder().encode_completions(text, &mut out);
    }
});

/// Equal trees, numbers compared by value: serde_json reads the literal `-0` as the float
/// -0.0 where Python (and kvexact) read the integer 0.
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => match (x.as_u64(), y.as_u64(), x.as_i64(), y.as_i64()) {
            (Some(p), Some(q), _, _) => p == q,
            (_, _, Some(p), Some(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        },
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
