//! gpt-oss through the C entry points (templates.md §13.11–§13.12): an encoder built for vLLM
//! 0.31.0 renders chat with harmony (`kvexact_encode_chat` gives vLLM's chat ids), its chat
//! fixtures are probed on `/v1/chat/completions` (`kvexact_fixture_probe`,
//! `kvexact_judge_probe`), completions fixtures on `/tokenize`, and `kvexact_judge_tokenize`
//! refuses to pass a chat fixture the tokenize route renders another way.

use std::ffi::{c_char, CStr};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use kvexact::encoder::*;
use kvexact::enums::*;
use kvexact::probe::*;
use kvexact::refusal::KVEXACT_REFUSAL_NONE;
use kvexact::registry::*;
use kvexact::status::*;
use kvexact_conformance::emulator::gptoss::{GPTOSS_MODEL, GPTOSS_PROFILE};
use kvexact_conformance::emulator::TempRegistry;
use serde_json::{json, Value};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

fn blank() -> kvexact_finding {
    kvexact_finding {
        ok: -1,
        oracle: -1,
        reason: null(),
        detail: [0; 256],
    }
}

fn reason(f: &kvexact_finding) -> Option<String> {
    (!f.reason.is_null()).then(|| {
        unsafe { CStr::from_ptr(f.reason) }
            .to_string_lossy()
            .into_owned()
    })
}

#[test]
fn gptoss_encodes_with_harmony_and_probes_the_chat_route() {
    let reg = TempRegistry::copy_of(&testdata().join("registry")).unwrap();
    reg.stage_gptoss(&testdata()).unwrap();
    let root = reg.root().as_os_str().as_encoded_bytes();
    let mut registry = null_mut();
    let st = unsafe {
        kvexact_registry_load(
            root.as_ptr(),
            root.len(),
            null(),
            1,
            &mut registry,
            null_mut(),
        )
    };
    assert_eq!(st, KVEXACT_OK);
    let mut profile = null();
    let st = unsafe {
        kvexact_profile_by_model(
            registry,
            GPTOSS_MODEL.as_ptr(),
            GPTOSS_MODEL.len(),
            &mut profile,
        )
    };
    assert_eq!(st, KVEXACT_OK);
    let mut opts: kvexact_encoder_options = unsafe { std::mem::zeroed() };
    opts.struct_size = std::mem::size_of::<kvexact_encoder_options>() as u32;
    opts.engine_version = c"0.31.0".as_ptr();
    let mut enc = null_mut();
    let st = unsafe {
        kvexact_encoder_new_with_options(
            profile,
            c"vllm-kv-map-v3".as_ptr(),
            &opts,
            &mut enc,
            null_mut(),
        )
    };
    assert_eq!(st, KVEXACT_OK);

    // The hot path: vLLM's chat ids (harmony), at the vectors' clock.
    let vectors: Value = serde_json::from_slice(
        &std::fs::read(testdata().join("vectors/templates-nonjinja/gptoss-20b-v1.json")).unwrap(),
    )
    .unwrap();
    let clock = format!(
        "{}Z",
        vectors["harmony"]["fixed_clock"]["value"].as_str().unwrap()
    );
    let now = kvtemplate::parse_rfc3339(&clock).unwrap();
    let case = vectors["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "multi_turn")
        .unwrap();
    let want: Vec<u32> = serde_json::from_value(case["engine_token_ids"]["vllm"].clone()).unwrap();
    let body =
        serde_json::to_vec(&json!({"model": GPTOSS_MODEL, "messages": case["messages"]})).unwrap();
    let mut ids = vec![0u32; 4096];
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let n = unsafe {
        kvexact_encode_chat(
            enc,
            body.as_ptr(),
            body.len(),
            now,
            ids.as_mut_ptr(),
            ids.len() as u32,
            &mut refusal,
        )
    };
    assert!(n > 0, "{n} refusal {refusal}");
    assert_eq!(&ids[..n as usize], &want[..]);

    // The probes.
    let mut fx = null_mut();
    let st = unsafe {
        kvexact_fixtures_load(
            registry,
            GPTOSS_PROFILE.as_ptr(),
            GPTOSS_PROFILE.len(),
            KVEXACT_VLLM,
            &mut fx,
            null_mut(),
        )
    };
    assert_eq!(st, KVEXACT_OK);
    let n = unsafe { kvexact_fixtures_count(fx) };
    assert_eq!(n, 4);
    let (mut chat, mut completions) = (0, 0);
    for i in 0..n {
        let mut info: kvexact_fixture_info = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { kvexact_fixture_describe(fx, i, &mut info) },
            KVEXACT_OK
        );
        let mut path: *const c_char = null();
        let mut len = 0usize;
        // Size query, then the body.
        let st = unsafe { kvexact_fixture_probe(enc, fx, i, &mut path, null_mut(), 0, &mut len) };
        assert!(st == KVEXACT_ERR_BUFFER_TOO_SMALL || (st == KVEXACT_OK && len == 0));
        let mut buf = vec![0u8; len];
        let st = unsafe {
            kvexact_fixture_probe(enc, fx, i, &mut path, buf.as_mut_ptr(), buf.len(), &mut len)
        };
        assert_eq!(st, KVEXACT_OK);
        let path = unsafe { CStr::from_ptr(path) }
            .to_str()
            .unwrap()
            .to_string();
        let sent: Value = serde_json::from_slice(&buf).unwrap();
        // The banked ids, answered at the fixtures' clock.
        let mut req_p: *const u8 = null();
        let mut req_n = 0usize;
        assert_eq!(
            unsafe { kvexact_fixture_request(fx, i, &mut req_p, &mut req_n) },
            KVEXACT_OK
        );
        if info.api == KVEXACT_API_CHAT {
            chat += 1;
            assert_eq!(path, "/v1/chat/completions");
            assert_eq!(sent["return_token_ids"], true);
            assert_eq!(sent["max_tokens"], 1);
            let want = banked(reg.root(), i, fx);
            let answer =
                serde_json::to_vec(&json!({"id": "c", "prompt_token_ids": want, "choices": []}))
                    .unwrap();
            let mut f = blank();
            assert_eq!(
                unsafe {
                    kvexact_judge_probe(enc, fx, i, 200, answer.as_ptr(), answer.len(), now, &mut f)
                },
                KVEXACT_OK
            );
            assert_eq!(f.ok, 1, "{:?}", reason(&f));
            // One id off: a mismatch.
            let mut off = want.clone();
            off[3] += 1;
            let answer = serde_json::to_vec(&json!({"prompt_token_ids": off})).unwrap();
            let mut f = blank();
            unsafe {
                kvexact_judge_probe(enc, fx, i, 200, answer.as_ptr(), answer.len(), now, &mut f)
            };
            assert_eq!((f.ok, reason(&f).as_deref()), (0, Some("token_mismatch")));
            // The tokenize judge never passes a chat fixture the tokenize route renders otherwise.
            let tok = serde_json::to_vec(
                &json!({"count": want.len(), "tokens": want, "max_model_len": 8192}),
            )
            .unwrap();
            let mut f = blank();
            unsafe {
                kvexact_judge_tokenize(enc, fx, i, 200, tok.as_ptr(), tok.len(), now, &mut f)
            };
            assert_eq!(
                (f.ok, reason(&f).as_deref()),
                (0, Some("profile_resolution_fault"))
            );
        } else {
            completions += 1;
            assert_eq!(path, "/tokenize");
            assert_eq!(buf, unsafe { std::slice::from_raw_parts(req_p, req_n) });
        }
    }
    assert_eq!((chat, completions), (3, 1));
    unsafe {
        kvexact_fixtures_free(fx);
        kvexact_encoder_free(enc);
        kvexact_profile_free(profile);
        kvexact_registry_free(registry);
    }
}

/// Fixture `i`'s banked ids, read from its expect file on disk.
fn banked(root: &Path, i: usize, fx: *const kvexact_fixtures) -> Vec<u32> {
    let mut info: kvexact_fixture_info = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { kvexact_fixture_describe(fx, i, &mut info) },
        KVEXACT_OK
    );
    let name = unsafe { CStr::from_ptr(info.name) }.to_str().unwrap();
    let e: Value = serde_json::from_slice(
        &std::fs::read(root.join(format!("probefixtures/{GPTOSS_PROFILE}/{name}.expect.json")))
            .unwrap(),
    )
    .unwrap();
    serde_json::from_value(e["expectedTokenIds"].clone()).unwrap()
}
