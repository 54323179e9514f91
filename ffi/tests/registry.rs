//! The registry extras of §6.2 through the C entry points, on the sample registry
//! (testdata/registry):
//!
//! * `kvexact_registry_discovery_json`: equals the discovery document of an independently
//!   loaded generation, names both profiles and the set digest `kvexact_registry_set_digest`
//!   reports; size query, exact-size and too-small buffers (nothing written), NULL arguments;
//! * `kvexact_registry_verify_disk`: passes on the tree it was loaded from; on a copy, after
//!   the load, one flipped template byte and one edited profile document are `PROFILE_DRIFT`
//!   naming the file, while the untouched profile still passes; unknown ids are NOT_FOUND;
//! * `kvexact_profile_json`: the document's top-level scalars as written in the YAML file,
//!   aliases and render policy, size query;
//! * `kvexact_profile_admit`: both profiles admitted on the vLLM, SGLang and TensorRT-LLM
//!   contracts (base model, slug form, alias), and every refusal the real profiles can reach
//!   — empty model, another profile's model or alias, an unknown contract, llama.cpp's
//!   KV-less contract — with `KVEXACT_ERR_PROFILE`, the rule as the error code and a message
//!   naming it; bad `api_mode`, non-UTF-8 and NULL arguments. (Neither sample profile carries
//!   engine quirks, a `modelType` with its own engine renderer or a single surface; those
//!   rules are covered by kvprobe's admission unit tests on edited profiles.)

use std::ffi::{c_char, CStr};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use kvexact::enums::{KVEXACT_API_BOTH, KVEXACT_API_CHAT, KVEXACT_API_COMPLETIONS};
use kvexact::error::*;
use kvexact::registry::*;
use kvexact::status::*;
use kvprofile_core::{Generation, LoadOptions, TrustPolicy};
use serde_json::Value;

const QWEN3: &str = "qwen3-06b-default-v1";
const QWEN25: &str = "qwen25-7b-instruct-v1";
const QWEN3_MODEL: &str = "Qwen/Qwen3-0.6B";
const QWEN25_MODEL: &str = "Qwen/Qwen2.5-7B-Instruct";
const QWEN25_ALIAS: &str = "qwen2.5-7b-instruct";
const QWEN3_TEMPLATE: &str =
    "artifacts/sha256/87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5";
const GEN: u64 = 42;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/registry")
}

fn cstr(p: *const c_char) -> String {
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

/// (status, code, message, path) of an error object, which is freed.
fn take_err(err: *mut kvexact_error) -> (i32, String, String, Option<String>) {
    assert!(!err.is_null(), "an error object was written");
    let out = unsafe {
        let path = kvexact_error_path(err);
        (
            kvexact_error_status(err),
            cstr(kvexact_error_code(err)),
            cstr(kvexact_error_message(err)),
            (!path.is_null()).then(|| cstr(path)),
        )
    };
    unsafe { kvexact_error_free(err) };
    out
}

fn load(path: &Path) -> *mut kvexact_registry {
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut reg = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        kvexact_registry_load(bytes.as_ptr(), bytes.len(), null(), GEN, &mut reg, &mut err)
    };
    if st != KVEXACT_OK {
        panic!("load {}: {:?}", path.display(), take_err(err));
    }
    assert!(!reg.is_null());
    reg
}

/// The sample registry, loaded once for every test (never freed).
struct Shared(*mut kvexact_registry);
// SAFETY: registry handles are immutable and documented as shareable between threads.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

fn registry() -> *const kvexact_registry {
    static R: OnceLock<Shared> = OnceLock::new();
    R.get_or_init(|| Shared(load(&root()))).0
}

fn profile(id: &str) -> *const kvexact_profile {
    let mut p = null();
    let st = unsafe { kvexact_profile_by_id(registry(), id.as_ptr(), id.len(), &mut p) };
    assert_eq!(st, KVEXACT_OK, "{id}");
    p
}

/// Calls a size-query function the documented way: size query, too small by one (nothing
/// written), exact size, larger buffer (bytes past the document untouched). Returns the bytes.
fn fetch(f: impl Fn(*mut u8, usize, *mut usize) -> kvexact_status) -> Vec<u8> {
    let mut len = usize::MAX;
    assert_eq!(f(null_mut(), 0, &mut len), KVEXACT_ERR_BUFFER_TOO_SMALL);
    let n = len;
    assert!(n > 2 && n < 1 << 20, "needed length {n}");
    let mut small = vec![0xAAu8; n - 1];
    len = 0;
    assert_eq!(
        f(small.as_mut_ptr(), small.len(), &mut len),
        KVEXACT_ERR_BUFFER_TOO_SMALL
    );
    assert_eq!(len, n);
    assert!(
        small.iter().all(|&b| b == 0xAA),
        "nothing written when too small"
    );
    let mut exact = vec![0u8; n];
    len = 0;
    assert_eq!(f(exact.as_mut_ptr(), n, &mut len), KVEXACT_OK);
    assert_eq!(len, n);
    let mut big = vec![0xAAu8; n + 8];
    len = 0;
    assert_eq!(f(big.as_mut_ptr(), big.len(), &mut len), KVEXACT_OK);
    assert_eq!(len, n);
    assert_eq!(&big[..n], &exact[..]);
    assert!(big[n..].iter().all(|&b| b == 0xAA));
    // A NULL length pointer, or a NULL buffer with a capacity, is refused and writes nothing.
    assert_eq!(
        f(exact.as_mut_ptr(), n, null_mut()),
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(f(null_mut(), n, &mut len), KVEXACT_ERR_NULL_ARGUMENT);
    exact
}

#[test]
fn discovery_json_is_the_generations_discovery_document() {
    let reg = registry();
    let bytes = fetch(|b, c, l| unsafe { kvexact_registry_discovery_json(reg, b, c, l) });
    let got: Value = serde_json::from_slice(&bytes).expect("discovery JSON parses");

    // An independent load of the same root, serialized by serde_json.
    let opts = LoadOptions {
        policy: TrustPolicy::for_current_user(),
        ..LoadOptions::default()
    };
    let g = Generation::load(&root(), GEN, &opts, &kvtemplate::KvtemplateValidator).unwrap();
    let want = serde_json::to_value(g.discovery()).unwrap();
    assert_eq!(got, want);

    let mut hex = [0 as c_char; 65];
    assert_eq!(
        unsafe { kvexact_registry_set_digest(reg, hex.as_mut_ptr()) },
        KVEXACT_OK
    );
    assert_eq!(got["setDigest"], cstr(hex.as_ptr()));
    assert_eq!(got["registryGeneration"], GEN);
    let ids: Vec<&str> = got["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["profileId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [QWEN25, QWEN3]);
    let q25 = &got["profiles"][0];
    assert_eq!(q25["baseModel"], QWEN25_MODEL);
    assert_eq!(q25["aliasPolicy"], "list");
    assert_eq!(q25["allowedAliases"][0], QWEN25_ALIAS);
    assert_eq!(q25["gen"], GEN);
    // No locator, path or root leaks into discovery.
    let text = String::from_utf8(bytes).unwrap();
    assert!(!text.contains("artifacts/") && !text.contains("testdata"));

    let mut len = 7usize;
    assert_eq!(
        unsafe { kvexact_registry_discovery_json(null(), null_mut(), 0, &mut len) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(len, 7);
}

#[test]
fn profile_json_is_the_parsed_document() {
    for id in [QWEN3, QWEN25] {
        let p = profile(id);
        let bytes = fetch(|b, c, l| unsafe { kvexact_profile_json(p, b, c, l) });
        let v: Value = serde_json::from_slice(&bytes).expect("profile JSON parses");
        // Every top-level `key: scalar` line of the YAML file, read without a YAML parser.
        let yaml = fs::read_to_string(root().join(format!("{id}.yaml"))).unwrap();
        let mut seen = 0;
        for line in yaml.lines() {
            if line.starts_with(' ') || line.starts_with('-') {
                continue;
            }
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            assert_eq!(v[key], value.trim_matches('"'), "{id} {key}");
            seen += 1;
        }
        assert!(seen >= 8, "{id}: {seen} scalars");
        assert_eq!(v["profileId"], id);
        assert_eq!(
            v["supportedApis"],
            serde_json::json!(["completions", "chat"])
        );
        assert_eq!(v["renderPolicy"]["addGenerationPrompt"], true);
        assert_eq!(v["renderPolicy"]["eosToken"], "<|im_end|>");
        assert!(v.get("engineQuirks").is_none());
        unsafe { kvexact_profile_free(p) };
    }
    let p = profile(QWEN25);
    let v: Value = serde_json::from_slice(&fetch(|b, c, l| unsafe {
        kvexact_profile_json(p, b, c, l)
    }))
    .unwrap();
    assert_eq!(v["baseModel"], QWEN25_MODEL);
    assert_eq!(v["allowedAliases"], serde_json::json!([QWEN25_ALIAS]));
    unsafe { kvexact_profile_free(p) };

    let mut len = 7usize;
    assert_eq!(
        unsafe { kvexact_profile_json(null(), null_mut(), 0, &mut len) },
        KVEXACT_ERR_NULL_ARGUMENT
    );
    assert_eq!(len, 7);
}

/// A copy of the sample registry with the modes the trust policy accepts (directories 0755,
/// files 0644), removed on drop.
struct TempRegistry(PathBuf);

impl TempRegistry {
    fn copy_of(src: &Path) -> TempRegistry {
        static N: AtomicU64 = AtomicU64::new(0);
        let dst = std::env::temp_dir().join(format!(
            "kvexact-ffi-registry-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dst);
        copy_dir(src, &dst);
        TempRegistry(dst)
    }
}

impl Drop for TempRegistry {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    fs::set_permissions(dst, fs::Permissions::from_mode(0o755)).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).unwrap();
            fs::set_permissions(&to, fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

fn verify(
    reg: *const kvexact_registry,
    id: &str,
) -> Result<(), (i32, String, String, Option<String>)> {
    let mut err = null_mut();
    let st = unsafe { kvexact_registry_verify_disk(reg, id.as_ptr(), id.len(), &mut err) };
    if st == KVEXACT_OK {
        assert!(err.is_null());
        return Ok(());
    }
    let e = take_err(err);
    assert_eq!(e.0, st);
    Err(e)
}

#[test]
fn verify_disk_detects_drift_after_load() {
    // The tree the shared registry was loaded from is unchanged.
    for id in [QWEN3, QWEN25] {
        assert_eq!(verify(registry(), id), Ok(()));
    }
    let (st, code, _, _) = verify(registry(), "no-such-profile").unwrap_err();
    assert_eq!((st, code.as_str()), (KVEXACT_ERR_NOT_FOUND, "not_found"));

    let tmp = TempRegistry::copy_of(&root());
    let reg = load(&tmp.0);
    assert_eq!(verify(reg, QWEN3), Ok(()));
    assert_eq!(verify(reg, QWEN25), Ok(()));

    // One template byte flipped after the load: the Qwen3 profile drifted, Qwen2.5 did not.
    let tpl = tmp.0.join(QWEN3_TEMPLATE);
    let mut bytes = fs::read(&tpl).unwrap();
    bytes[100] ^= 0x01;
    fs::write(&tpl, &bytes).unwrap();
    let (st, code, msg, path) = verify(reg, QWEN3).unwrap_err();
    assert_eq!(st, KVEXACT_ERR_REGISTRY);
    assert_eq!(code, "PROFILE_DRIFT");
    assert_eq!(path.as_deref(), Some(QWEN3_TEMPLATE));
    assert!(msg.contains("sha256"), "{msg}");
    assert_eq!(verify(reg, QWEN25), Ok(()));

    // An edited profile document drifts too, and names the document.
    let doc = tmp.0.join(format!("{QWEN25}.yaml"));
    let mut text = fs::read_to_string(&doc).unwrap();
    text.push_str("# edited\n");
    fs::write(&doc, text).unwrap();
    let (st, code, _, path) = verify(reg, QWEN25).unwrap_err();
    assert_eq!((st, code.as_str()), (KVEXACT_ERR_REGISTRY, "PROFILE_DRIFT"));
    assert_eq!(path, Some(format!("{QWEN25}.yaml")));

    // A file the trust policy no longer accepts is reported with the policy's code.
    fs::set_permissions(&doc, fs::Permissions::from_mode(0o666)).unwrap();
    let (st, code, _, path) = verify(reg, QWEN25).unwrap_err();
    assert_eq!((st, code.as_str()), (KVEXACT_ERR_REGISTRY, "INSECURE_MODE"));
    assert_eq!(path, Some(format!("{QWEN25}.yaml")));

    // NULL and non-UTF-8 arguments; NULL err is allowed.
    unsafe {
        assert_eq!(
            kvexact_registry_verify_disk(null(), QWEN3.as_ptr(), QWEN3.len(), null_mut()),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_registry_verify_disk(reg, null(), 3, null_mut()),
            KVEXACT_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kvexact_registry_verify_disk(reg, b"\xff\xfe".as_ptr(), 2, null_mut()),
            KVEXACT_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            kvexact_registry_verify_disk(reg, QWEN3.as_ptr(), QWEN3.len(), null_mut()),
            KVEXACT_ERR_REGISTRY
        );
        kvexact_registry_free(reg);
    }
}

fn admit(
    p: *const kvexact_profile,
    model: &[u8],
    contract: &CStr,
    mode: u32,
) -> Result<(), (i32, String, String, Option<String>)> {
    let mut err = null_mut();
    let st = unsafe {
        kvexact_profile_admit(
            p,
            model.as_ptr(),
            model.len(),
            contract.as_ptr(),
            mode,
            &mut err,
        )
    };
    if st == KVEXACT_OK {
        assert!(err.is_null());
        return Ok(());
    }
    let e = take_err(err);
    assert_eq!(e.0, st);
    Err(e)
}

/// Asserts a refusal by `rule`: `KVEXACT_ERR_PROFILE`, the rule as code, a message naming it,
/// no path.
fn refused(r: Result<(), (i32, String, String, Option<String>)>, rule: &str) -> String {
    let (st, code, msg, path) = r.expect_err(rule);
    assert_eq!(st, KVEXACT_ERR_PROFILE, "{rule}: {msg}");
    assert_eq!(code, rule, "{msg}");
    assert!(msg.starts_with(&format!("{rule}: ")), "{msg}");
    assert_eq!(path, None);
    msg
}

#[test]
fn admit_accepts_both_profiles_on_every_engine() {
    for (id, model) in [(QWEN3, QWEN3_MODEL), (QWEN25, QWEN25_MODEL)] {
        let p = profile(id);
        for c in [
            c"vllm-kv-map-v2",
            c"sglang-kv-rank-v1",
            c"trtllm-kv-http-v1",
        ] {
            assert_eq!(
                admit(p, model.as_bytes(), c, KVEXACT_API_BOTH),
                Ok(()),
                "{id} {c:?}"
            );
        }
        unsafe { kvexact_profile_free(p) };
    }
    // One surface at a time, the slug form of a name, the alias of the list-policy profile.
    let p = profile(QWEN3);
    assert_eq!(
        admit(
            p,
            b"Qwen__Qwen3-0.6B",
            c"vllm-kv-array-v1",
            KVEXACT_API_CHAT
        ),
        Ok(())
    );
    unsafe { kvexact_profile_free(p) };
    let p = profile(QWEN25);
    assert_eq!(
        admit(
            p,
            QWEN25_ALIAS.as_bytes(),
            c"trtllm-kv-http-preview-v1",
            KVEXACT_API_COMPLETIONS
        ),
        Ok(())
    );
    unsafe { kvexact_profile_free(p) };
}

#[test]
fn admit_refusals_name_the_rule() {
    let p3 = profile(QWEN3);
    let p25 = profile(QWEN25);
    let c = c"vllm-kv-map-v2";

    refused(admit(p3, b"", c, KVEXACT_API_BOTH), "model_name_empty");
    refused(admit(p3, b"   ", c, KVEXACT_API_CHAT), "model_name_empty");
    // (NULL, 0) is the empty model name.
    let mut err = null_mut();
    let st = unsafe { kvexact_profile_admit(p3, null(), 0, c.as_ptr(), 0, &mut err) };
    assert_eq!(st, KVEXACT_ERR_PROFILE);
    assert_eq!(take_err(err).1, "model_name_empty");

    for (p, model) in [
        (p3, QWEN25_MODEL),      // another profile's base model
        (p3, QWEN25_ALIAS),      // another profile's alias
        (p3, "qwen/qwen3-0.6b"), // names compare exactly (by slug)
        (p25, QWEN3_MODEL),
        (p25, "Qwen2.5-7B-Instruct"),
    ] {
        let msg = refused(
            admit(p, model.as_bytes(), c, KVEXACT_API_BOTH),
            "model_not_served",
        );
        assert!(msg.contains(model), "{msg}");
    }

    for contract in [c"vllm-kv-v9", c"", c"vllm", c"SGLANG-KV-RANK-V1"] {
        refused(
            admit(p25, QWEN25_MODEL.as_bytes(), contract, KVEXACT_API_BOTH),
            "unknown_contract",
        );
    }
    let msg = refused(
        admit(
            p3,
            QWEN3_MODEL.as_bytes(),
            c"llamacpp-nokv-v1",
            KVEXACT_API_COMPLETIONS,
        ),
        "contract_no_kv_plane",
    );
    assert!(msg.contains("llamacpp-nokv-v1"), "{msg}");

    // Argument errors are not refusals.
    let (st, code, _, _) = admit(p3, QWEN3_MODEL.as_bytes(), c, 3).unwrap_err();
    assert_eq!(
        (st, code.as_str()),
        (KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument")
    );
    let (st, _, _, _) = admit(p3, b"\xffQwen", c, KVEXACT_API_BOTH).unwrap_err();
    assert_eq!(st, KVEXACT_ERR_INVALID_ARGUMENT);
    let m = QWEN3_MODEL.as_bytes();
    unsafe {
        for st in [
            kvexact_profile_admit(null(), m.as_ptr(), m.len(), c.as_ptr(), 0, null_mut()),
            kvexact_profile_admit(p3, null(), 4, c.as_ptr(), 0, null_mut()),
            kvexact_profile_admit(p3, m.as_ptr(), m.len(), null(), 0, null_mut()),
        ] {
            assert_eq!(st, KVEXACT_ERR_NULL_ARGUMENT);
        }
        // A refusal without an error object still returns its status.
        assert_eq!(
            kvexact_profile_admit(p3, b"x/y".as_ptr(), 3, c.as_ptr(), 0, null_mut()),
            KVEXACT_ERR_PROFILE
        );
        kvexact_profile_free(p3);
        kvexact_profile_free(p25);
    }
}
