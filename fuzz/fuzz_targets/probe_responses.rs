//! Engine answers the readiness judges parse (tokenize, identity, geometry, served model) and
//! the readiness evidence the C ABI reads as JSON, on arbitrary bytes: every judge returns a
//! finding — never a panic — whose failure carries a reason and whose detail fits the C
//! buffer; a body that passes the tokenize judge holds exactly the expected ids; evidence that
//! parses evaluates, and its verdict round-trips through JSON.
#![no_main]

use kvprobe::fixtures::judge_tokenize;
use kvprobe::identity::{judge_geometry, judge_identity, judge_served_model, Geometry};
use kvprobe::{evaluate, Engine, Evidence, Finding, Verdict};
use kvprofile_core::EngineManifest;
use libfuzzer_sys::fuzz_target;

const EXPECTED: [u32; 5] = [785, 6722, 315, 9625, 374];

fn check(f: &Finding) {
    assert_eq!(f.ok, f.reason.is_none(), "{f:?}");
    assert!(f.detail.len() <= kvprobe::finding::MAX_DETAIL);
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let status = if which & 0x80 != 0 {
        200
    } else {
        u16::from(which) * 3
    };
    let engine = [Engine::Vllm, Engine::Sglang, Engine::Trtllm][usize::from(which) % 3];
    match (which >> 2) % 5 {
        0 => {
            let f = judge_tokenize(&EXPECTED, status, body);
            check(&f);
            if f.ok {
                let v: serde_json::Value = serde_json::from_slice(body).expect("passed as JSON");
                let ids: Vec<u64> = v["tokens"]
                    .as_array()
                    .expect("tokens")
                    .iter()
                    .map(|t| t.as_u64().expect("id"))
                    .collect();
                assert_eq!(ids, EXPECTED.map(u64::from));
            }
        }
        1 => {
            let m = EngineManifest {
                profile_id: "p".into(),
                image_digest: "sha256:00".into(),
                engine_version: "0.28.0".into(),
                model_revision: Some("c1899de289a04d12100db370d81485cdf75e47ca".into()),
                tokenizer_revision: None,
                template_digest: None,
                serve_args: None,
                deployment: None,
            };
            check(&judge_identity(engine, &m, status, body));
        }
        2 => {
            let rule = Geometry {
                block_size: 16,
                zmq_port: 5557,
                dp_ranks: 2,
            };
            check(&judge_geometry(engine, status, body, &rule));
        }
        3 => check(&judge_served_model(engine, status, body, "Qwen/Qwen3-0.6B")),
        _ => {
            if let Ok(ev) = serde_json::from_slice::<Evidence>(body) {
                let v = evaluate(&ev);
                let json = serde_json::to_vec(&v).expect("verdict serialises");
                let back: Verdict = serde_json::from_slice(&json).expect("verdict parses");
                assert_eq!(back, v);
            }
        }
    }
});
