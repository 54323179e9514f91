//! Mistral checkpoints through the C entry points (templates.md §13.13): a registry profile
//! pinning `tekken.json` (or `tokenizer.model.v7`), an encoder built for an engine release
//! (`kvexact_encoder_new_with_options` with the version), and `kvexact_route_keys` gives the
//! engine's own ids for the vectors' cases — vLLM 0.31.0's mistral_common ids, SGLang 0.5.19's
//! text-form ids — and block keys equal to the hasher's over exactly those ids; completions
//! are BOS + the text; a release no vectors prove refuses with `KVEXACT_ERR_UNSUPPORTED`.

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use kvexact::encoder::*;
use kvexact::enums::*;
use kvexact::error::*;
use kvexact::hasher::*;
use kvexact::refusal::{KVEXACT_REFUSAL_NONE, KVEXACT_REFUSAL_TEMPLATE_RAISED};
use kvexact::registry::*;
use kvexact::route::*;
use kvexact::status::*;
use kvexact_conformance::emulator::mistral::MistralCheckpoint;
use kvexact_conformance::emulator::TempRegistry;
use serde_json::{json, Value};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

struct Handles {
    registry: *mut kvexact_registry,
    enc: *mut kvexact_encoder,
    hasher: *mut kvexact_hasher,
}

impl Drop for Handles {
    fn drop(&mut self) {
        unsafe {
            kvexact_encoder_free(self.enc);
            kvexact_hasher_free(self.hasher);
            kvexact_registry_free(self.registry);
        }
    }
}

fn open(
    reg: &TempRegistry,
    checkpoint: MistralCheckpoint,
    contract: &CStr,
    version: &CStr,
) -> Result<Handles, (kvexact_status, String)> {
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
    let model = checkpoint.model();
    let mut profile = null();
    let st =
        unsafe { kvexact_profile_by_model(registry, model.as_ptr(), model.len(), &mut profile) };
    assert_eq!(st, KVEXACT_OK);
    let mut opts: kvexact_encoder_options = unsafe { std::mem::zeroed() };
    opts.struct_size = std::mem::size_of::<kvexact_encoder_options>() as u32;
    opts.engine_version = version.as_ptr();
    let mut enc = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_encoder_new_with_options(profile, contract.as_ptr(), &opts, &mut enc, &mut err)
    };
    if st != KVEXACT_OK {
        let msg = message(err);
        unsafe { kvexact_registry_free(registry) };
        return Err((st, msg));
    }
    // vLLM takes the PYTHONHASHSEED; SGLang none.
    let vllm = contract.to_bytes().starts_with(b"vllm");
    let mut hasher = null_mut();
    let st = unsafe {
        kvexact_hasher_new_for_contract(
            contract.as_ptr(),
            version.as_ptr(),
            KVEXACT_HASH_ALGO_CONTRACT_DEFAULT,
            16,
            if vllm { c"0".as_ptr().cast() } else { null() },
            usize::from(vllm),
            &mut hasher,
            null_mut(),
        )
    };
    assert_eq!(st, KVEXACT_OK);
    Ok(Handles {
        registry,
        enc,
        hasher,
    })
}

fn message(err: *mut kvexact_error) -> String {
    if err.is_null() {
        return String::new();
    }
    let m = unsafe { CStr::from_ptr(kvexact_error_message(err)) }
        .to_string_lossy()
        .into_owned();
    unsafe { kvexact_error_free(err) };
    m
}

fn cases(checkpoint: MistralCheckpoint) -> Vec<Value> {
    let v: Value = serde_json::from_slice(
        &std::fs::read(
            testdata()
                .join("vectors/templates-nonjinja")
                .join(checkpoint.vectors()),
        )
        .unwrap(),
    )
    .unwrap();
    v["cases"].as_array().unwrap().clone()
}

/// `kvexact_route_keys` on `body`: (status, ids, keys, refusal).
fn route(h: &Handles, body: &[u8]) -> (kvexact_status, Vec<u32>, Vec<u64>, u32) {
    let mut ids = vec![0u32; 8192];
    let mut keys = vec![0u64; 512];
    let (mut ni, mut nb) = (0usize, 0usize);
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let st = unsafe {
        kvexact_route_keys(
            h.enc,
            h.hasher,
            body.as_ptr(),
            body.len(),
            0,
            ids.as_mut_ptr(),
            ids.len(),
            keys.as_mut_ptr(),
            keys.len(),
            &mut ni,
            &mut nb,
            &mut refusal,
            null_mut(),
        )
    };
    ids.truncate(ni);
    keys.truncate(nb);
    (st, ids, keys, refusal)
}

fn hash(h: &Handles, ids: &[u32]) -> Vec<u64> {
    let mut out = vec![0u64; ids.len() / 16];
    let n = unsafe {
        kvexact_block_hashes_u64(
            h.hasher,
            ids.as_ptr(),
            ids.len(),
            1,
            out.as_mut_ptr(),
            out.len(),
        )
    };
    assert!(n >= 0, "{n}");
    out.truncate(n as usize);
    out
}

#[test]
fn route_keys_give_each_engine_its_mistral_ids() {
    for (checkpoint, contract, version, truth) in [
        (
            MistralCheckpoint::NemoTekken,
            c"vllm-kv-map-v3",
            c"0.31.0",
            "vllm",
        ),
        (
            MistralCheckpoint::NemoTekken,
            c"sglang-kv-rank-v2",
            c"0.5.19",
            "sglang",
        ),
        (
            MistralCheckpoint::LargeSpmV7,
            c"vllm-kv-map-v3",
            c"0.33.0",
            "vllm",
        ),
    ] {
        let reg = TempRegistry::copy_of(&testdata().join("registry")).unwrap();
        reg.stage_mistral(&testdata(), checkpoint).unwrap();
        let h = open(&reg, checkpoint, contract, version).expect("encoder");
        let mut exact = 0;
        for id in [
            "single_user",
            "system_user",
            "multi_turn",
            "long_conversation",
        ] {
            let all = cases(checkpoint);
            let c = all.iter().find(|c| c["id"] == id).unwrap();
            let want: Vec<u32> =
                serde_json::from_value(c["engine_token_ids"][truth].clone()).unwrap();
            let body = serde_json::to_vec(
                &json!({"model": checkpoint.model(), "messages": c["messages"]}),
            )
            .unwrap();
            let (st, ids, keys, refusal) = route(&h, &body);
            assert_eq!(
                (st, refusal),
                (KVEXACT_OK, 0),
                "{checkpoint:?} {truth} {id}"
            );
            assert_eq!(ids, want, "{checkpoint:?} {truth} {id}");
            assert_eq!(keys, hash(&h, &want), "{checkpoint:?} {truth} {id}");
            exact += 1;
        }
        assert_eq!(exact, 4);
        // Completions: BOS + the text.
        let all = cases(checkpoint);
        let c = all.iter().find(|c| c["kind"] == "completion").unwrap();
        let want: Vec<u32> = serde_json::from_value(c["engine_token_ids"][truth].clone()).unwrap();
        let prompt = c["prompt"].as_str().unwrap();
        let mut ids = vec![0u32; 4096];
        let n = unsafe {
            kvexact_encode_completions(
                h.enc,
                prompt.as_ptr(),
                prompt.len(),
                ids.as_mut_ptr(),
                ids.len() as u32,
            )
        };
        assert!(n > 0, "{n}");
        assert_eq!(
            &ids[..n as usize],
            &want[..],
            "{checkpoint:?} {truth} completions"
        );
    }
}

#[test]
fn a_release_without_proven_renderer_refuses() {
    let checkpoint = MistralCheckpoint::NemoTekken;
    let reg = TempRegistry::copy_of(&testdata().join("registry")).unwrap();
    reg.stage_mistral(&testdata(), checkpoint).unwrap();
    let h = open(&reg, checkpoint, c"vllm-kv-map-v2", c"0.28.0").expect("encoder");
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let (st, ids, keys, _) = route(&h, body);
    assert_eq!(st, KVEXACT_ERR_UNSUPPORTED);
    assert!(ids.is_empty() && keys.is_empty());
    let mut out = [0u32; 16];
    let n = unsafe {
        kvexact_encode_completions(h.enc, b"hi".as_ptr(), 2, out.as_mut_ptr(), out.len() as u32)
    };
    assert_eq!(n, KVEXACT_ERR_UNSUPPORTED);
    // The typed call names why: no vectors prove this release's renderer.
    let mut r = 0;
    let n = unsafe {
        kvexact_encode_completions_with_refusal(
            h.enc,
            b"hi".as_ptr(),
            2,
            out.as_mut_ptr(),
            out.len() as u32,
            &mut r,
        )
    };
    assert_eq!(
        (n, r),
        (KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_TEMPLATE_RAISED)
    );
}
