//! The registry (docs/contracts/gateway-integration.md §6.2): immutable, reference-counted generations
//! loaded all-or-nothing from a registry root, profile lookups, the discovery and profile
//! documents as JSON, the drift check and rule admission (kvprobe::admission).

use std::ffi::{c_char, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use kvprofile_core::{Generation, LoadOptions, LoadedProfile, RegistryError, TrustPolicy};
use kvtemplate::KvtemplateValidator;

use crate::enums::{api_mode_of, kvexact_api_mode};
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{
    arc_clone, arc_free, arc_into_raw, arc_ref, copy_out, in_c_str, in_slice, in_str, out_param,
    out_slice, ArcHandle,
};
use crate::panic::boundary;
use crate::status::{
    kvexact_status, KVEXACT_ERR_NOT_FOUND, KVEXACT_ERR_PROFILE, KVEXACT_ERR_REGISTRY,
    KVEXACT_ERR_UNKNOWN, KVEXACT_OK,
};

/// One immutable registry generation: every profile with its verified artifact bytes, templates
/// compiled and tokenizers checked at load. Opaque and reference-counted; share it between
/// threads freely. Release each reference (from `kvexact_registry_load` or
/// `kvexact_registry_retain`) once with `kvexact_registry_free`; the generation lives until its
/// last reference — including those held by profiles and encoders — is gone.
pub struct kvexact_registry {
    _private: [u8; 0],
}

/// One published profile. Opaque and reference-counted; it keeps its generation alive, so it
/// stays valid after the registry handle it came from is freed. Release with
/// `kvexact_profile_free`.
pub struct kvexact_profile {
    _private: [u8; 0],
}

/// Options of `kvexact_registry_load`. Pass NULL for the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_registry_opts {
    /// Owner uid trusted besides 0 (the gateway passes `geteuid()`).
    pub trusted_uid: u32,
    /// Cap on a profile document's size; 0 = default (1 MiB).
    pub max_profile_bytes: u64,
    /// Cap on an artifact's size (tokenizer.json, template); 0 = default (64 MiB).
    pub max_artifact_bytes: u64,
}

/// The Rust value behind a `kvexact_registry`.
pub type RegistryInner = Generation;

impl ArcHandle for kvexact_registry {
    type Inner = RegistryInner;
}

/// The Rust value behind a `kvexact_profile`: the profile and the generation it belongs to.
#[derive(Debug)]
pub struct ProfileView {
    /// Keeps the generation (and so the profile's bytes) alive.
    pub generation: Arc<Generation>,
    /// The profile.
    pub profile: Arc<LoadedProfile>,
    id: CString,
}

impl ArcHandle for kvexact_profile {
    type Inner = ProfileView;
}

/// A registry error as a failure: status `KVEXACT_ERR_REGISTRY`, the registry's own code
/// (`INSECURE_MODE`, `TOKENIZER_SHA_MISMATCH` …) and the file, relative to the root.
pub fn registry_failure(e: &RegistryError) -> Failure {
    Failure::with_code(KVEXACT_ERR_REGISTRY, e.code(), e.to_string()).at_path(e.path())
}

fn load_options(opts: Option<&kvexact_registry_opts>) -> LoadOptions {
    let mut o = LoadOptions {
        policy: TrustPolicy::for_current_user(),
        ..LoadOptions::default()
    };
    if let Some(opts) = opts {
        o.policy.trusted_uid = Some(opts.trusted_uid);
        if opts.max_profile_bytes != 0 {
            o.policy.caps.profile = opts.max_profile_bytes;
        }
        if opts.max_artifact_bytes != 0 {
            o.policy.caps.artifact = opts.max_artifact_bytes;
        }
    }
    o
}

/// Loads the registry at `root` (a path as bytes, no NUL needed) as generation
/// `generation_number` (assigned by the caller, process-monotonic). All or nothing: trust
/// policy, strict parsing, artifact digests, template compilation and tokenizer loading must
/// all pass, else nothing is returned and the caller keeps serving its previous handle.
///
/// Files checked at load: every `*.yaml` of the root (a profile; one that is a symlink,
/// directory, FIFO or device is refused with `SYMLINK` / `NOT_REGULAR_FILE` naming it — the
/// gateway's own loader skips such an entry instead), each profile's pinned tokenizer and
/// template artifacts (read and digest-verified), and the *type* of every staged
/// `manifests/<id>.yaml` and `probefixtures/<id>/[sglang/|trtllm/]*.json` (must be regular
/// files). Their *contents* are read later, by `kvexact_manifest_load` and
/// `kvexact_fixtures_load` (`kvexact registry verify` reads them at load).
///
/// `opts` may be NULL: trust uid 0 and this process's effective uid, default size caps.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; or `KVEXACT_ERR_NULL_ARGUMENT`,
/// `KVEXACT_ERR_INVALID_ARGUMENT`, or `KVEXACT_ERR_REGISTRY` with an error object whose code
/// is the registry's (e.g. `"INSECURE_MODE"`, `"TOKENIZER_SHA_MISMATCH"`) and whose path names
/// the offending file relative to `root`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_registry_free`) and `*err` (free with
/// `kvexact_error_free`); `root` and `opts` are only read during the call.
///
/// # Safety
/// `root` is valid for `root_len` bytes; `opts` is NULL or valid; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_registry_load(
    root: *const u8,
    root_len: usize,
    opts: *const kvexact_registry_opts,
    generation_number: u64,
    out: *mut *mut kvexact_registry,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let root = in_slice(root, root_len, "root")?;
            if root.is_empty() {
                return Err(Failure::invalid("root", "empty path"));
            }
            let opts = load_options(opts.as_ref());
            let root = Path::new(std::ffi::OsStr::from_bytes(root));
            let generation = Generation::load(root, generation_number, &opts, &KvtemplateValidator)
                .map_err(|e| registry_failure(&e))?;
            out.write(arc_into_raw(Arc::new(generation)));
            Ok(KVEXACT_OK)
        })
    }
}

/// Takes another reference to `registry` and returns it (NULL when `registry` is NULL).
///
/// Ownership: the caller owns the returned reference (free with `kvexact_registry_free`).
///
/// # Safety
/// `registry` is NULL or a live registry handle.
#[no_mangle]
pub unsafe extern "C" fn kvexact_registry_retain(
    registry: *mut kvexact_registry,
) -> *mut kvexact_registry {
    boundary(|| {
        Ok(arc_into_raw::<kvexact_registry>(unsafe {
            arc_clone(registry, "registry")
        }?))
    })
}

/// Releases one reference to a registry generation. NULL is accepted and ignored. Profiles and
/// encoders obtained from it stay valid (they hold their own references).
///
/// # Safety
/// `registry` is NULL or a reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_registry_free(registry: *mut kvexact_registry) {
    boundary(|| {
        unsafe { arc_free(registry) };
        Ok(())
    })
}

/// The generation number given to `kvexact_registry_load` (0 when `registry` is NULL).
///
/// # Safety
/// `registry` is NULL or a live registry handle.
#[no_mangle]
pub unsafe extern "C" fn kvexact_registry_generation(registry: *const kvexact_registry) -> u64 {
    boundary(|| Ok(unsafe { arc_ref(registry, "registry") }?.number()))
}

/// Writes the generation's `setDigest` (docs/contracts/registry.md §7) as 64 lowercase hex characters and
/// a NUL into `out_hex`, which must hold 65 bytes. Returns `KVEXACT_OK` or
/// `KVEXACT_ERR_NULL_ARGUMENT`; `out_hex` is written only on success.
///
/// # Safety
/// `registry` is NULL or a live registry handle; `out_hex` is NULL or valid for 65 bytes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_registry_set_digest(
    registry: *const kvexact_registry,
    out_hex: *mut c_char,
) -> kvexact_status {
    boundary(|| {
        let g = unsafe { arc_ref(registry, "registry") }?;
        let out = unsafe { out_slice(out_hex.cast::<u8>(), 65, "out_hex") }?;
        let digest = g.set_digest().as_bytes();
        let dst = out.get_mut(..digest.len()).ok_or_else(|| {
            Failure::new(
                crate::status::KVEXACT_ERR_OVERFLOW,
                "set digest longer than 64 bytes",
            )
        })?;
        dst.copy_from_slice(digest);
        if let Some(nul) = out.get_mut(digest.len()) {
            *nul = 0;
        }
        Ok(KVEXACT_OK)
    })
}

fn profile_handle(
    generation: Arc<Generation>,
    profile: &Arc<LoadedProfile>,
) -> *const kvexact_profile {
    let id = crate::error::c_string_lossless(&profile.profile.profile_id);
    arc_into_raw::<kvexact_profile>(Arc::new(ProfileView {
        generation,
        profile: Arc::clone(profile),
        id,
    }))
    .cast_const()
}

/// Looks up the profile serving a request's `model` name (compared by slug: the base model or
/// an allowed alias).
///
/// Returns `KVEXACT_OK` and a new profile reference in `*out`; `KVEXACT_ERR_NOT_FOUND` when no
/// profile serves the model; `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`
/// (`model` not UTF-8).
///
/// Improvement on §6.2 (which calls the result a borrowed view): `*out` is an owned reference
/// that keeps its generation alive, so it stays valid whatever order the caller (e.g. Go
/// finalizers) releases handles in. Free it with `kvexact_profile_free`.
///
/// # Safety
/// `registry` is NULL or a live registry handle; `model` is valid for `n` bytes; `out` is NULL
/// or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_profile_by_model(
    registry: *const kvexact_registry,
    model: *const u8,
    n: usize,
    out: *mut *const kvexact_profile,
) -> kvexact_status {
    boundary(|| {
        let generation = unsafe { arc_clone(registry, "registry") }?;
        let model = unsafe { in_str(model, n, "model") }?;
        let out = unsafe { out_param(out, "out") }?;
        let profile = generation
            .profile_for_model(model)
            .ok_or_else(|| {
                Failure::new(
                    KVEXACT_ERR_NOT_FOUND,
                    format!("no profile serves model {model:?}"),
                )
            })?
            .clone();
        out.write(profile_handle(generation, &profile));
        Ok(KVEXACT_OK)
    })
}

/// Looks up a profile by its `profileId`. Returns and owns as `kvexact_profile_by_model`.
///
/// # Safety
/// As `kvexact_profile_by_model`.
#[no_mangle]
pub unsafe extern "C" fn kvexact_profile_by_id(
    registry: *const kvexact_registry,
    id: *const u8,
    n: usize,
    out: *mut *const kvexact_profile,
) -> kvexact_status {
    boundary(|| {
        let generation = unsafe { arc_clone(registry, "registry") }?;
        let id = unsafe { in_str(id, n, "id") }?;
        let out = unsafe { out_param(out, "out") }?;
        let profile = generation
            .profile(id)
            .ok_or_else(|| Failure::new(KVEXACT_ERR_NOT_FOUND, format!("no profile {id:?}")))?
            .clone();
        out.write(profile_handle(generation, &profile));
        Ok(KVEXACT_OK)
    })
}

/// The profile's `profileId` (NUL-terminated), or `""` when `profile` is NULL.
///
/// Ownership: the string belongs to `profile` and lives as long as it.
///
/// # Safety
/// `profile` is NULL or a live profile handle.
#[no_mangle]
pub unsafe extern "C" fn kvexact_profile_id(profile: *const kvexact_profile) -> *const c_char {
    let p: *const c_char = boundary(|| Ok(unsafe { arc_ref(profile, "profile") }?.id.as_ptr()));
    if p.is_null() {
        c"".as_ptr()
    } else {
        p
    }
}

/// The number of the generation the profile belongs to (0 when `profile` is NULL).
///
/// # Safety
/// `profile` is NULL or a live profile handle.
#[no_mangle]
pub unsafe extern "C" fn kvexact_profile_generation(profile: *const kvexact_profile) -> u64 {
    boundary(|| Ok(unsafe { arc_ref(profile, "profile") }?.generation.number()))
}

/// Releases one profile reference. NULL is accepted and ignored.
///
/// # Safety
/// `profile` is NULL or a reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_profile_free(profile: *const kvexact_profile) {
    boundary(|| {
        unsafe { arc_free(profile) };
        Ok(())
    })
}

/// Writes the generation's discovery document (docs/contracts/registry.md §7, what
/// `GET /config/ai/model-profiles` serves) as compact UTF-8 JSON, no NUL:
/// `{"registryGeneration":…,"setDigest":"…","profiles":[{"profileId":…,"gen":…,"baseModel":…,
/// "aliasPolicy":…,"allowedAliases":[…],"supportedApis":[…],…}]}`, profiles sorted by id; no
/// locator, path or root appears in it.
///
/// Size query: whenever the call returns `KVEXACT_OK` or `KVEXACT_ERR_BUFFER_TOO_SMALL`,
/// `*len` holds the document's length. When `cap` is smaller, returns
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else; `buf` may be NULL with `cap` 0 to
/// ask for the size. Otherwise copies the document into `buf` and returns `KVEXACT_OK`.
/// `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `registry` or `len` (or a NULL `buf` with `cap` > 0).
/// The document is the same for every call on one handle.
///
/// Ownership: `buf` stays the caller's; nothing is allocated for the caller.
///
/// # Safety
/// `registry` is NULL or a live registry handle; `buf` is NULL or valid for `cap` writes; `len`
/// is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_registry_discovery_json(
    registry: *const kvexact_registry,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let g = unsafe { arc_ref(registry, "registry") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let json = serde_json::to_string(&g.discovery())
            .map_err(|e| Failure::new(KVEXACT_ERR_UNKNOWN, e.to_string()))?;
        copy_out(json.as_bytes(), buf, len, "discovery document")
    })
}

/// Drift check (docs/contracts/registry.md §7) of one profile: re-reads its document and every artifact
/// it was published with beneath the generation's root, under the same trust policy, and
/// compares each sha256 with the load-time receipt.
///
/// Returns `KVEXACT_OK` when nothing changed; `KVEXACT_ERR_REGISTRY` with an error object whose
/// code is `"PROFILE_DRIFT"` (bytes changed) or a trust-policy code (`"INSECURE_MODE"`,
/// `"MISSING"`, `"SYMLINK"` …) and whose path names the file relative to the root (e.g.
/// `"artifacts/sha256/<hex>"`); `KVEXACT_ERR_NOT_FOUND` when the generation has no profile
/// `profile_id` (improvement on §6.2: the same status as `kvexact_profile_by_id`, not a
/// registry failure); `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT` (`profile_id`
/// not UTF-8).
///
/// This reads files (a tokenizer may be megabytes): run it from the control plane, not per
/// request. The generation itself never changes; drift only tells the caller to reload.
///
/// Ownership: the caller owns `*err` (free with `kvexact_error_free`); `profile_id` is only
/// read during the call.
///
/// # Safety
/// `registry` is NULL or a live registry handle; `profile_id` is valid for `n` bytes; `err` is
/// NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_registry_verify_disk(
    registry: *const kvexact_registry,
    profile_id: *const u8,
    n: usize,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let g = arc_ref(registry, "registry")?;
            let id = in_str(profile_id, n, "profile_id")?;
            if g.profile(id).is_none() {
                return Err(Failure::new(
                    KVEXACT_ERR_NOT_FOUND,
                    format!("no profile {id:?} in generation {}", g.number()),
                ));
            }
            g.verify_disk(id).map_err(|e| registry_failure(&e))?;
            Ok(KVEXACT_OK)
        })
    }
}

/// Writes the profile document as compact UTF-8 JSON, no NUL: the parsed and validated
/// `<profile-id>.yaml` (docs/contracts/registry.md §2) serialized again, with the same camelCase keys
/// (`profileId`, `baseModel`, `engineQuirks`, `renderPolicy` …) and optional keys the document
/// leaves out omitted. It is not the file's bytes (comments, key order and YAML formatting
/// are gone) and adds nothing resolved at load (no artifact bytes, paths or BOS id).
///
/// Size query and statuses as `kvexact_registry_discovery_json` (NULL `profile` →
/// `KVEXACT_ERR_NULL_ARGUMENT`).
///
/// # Safety
/// `profile` is NULL or a live profile handle; `buf` is NULL or valid for `cap` writes; `len`
/// is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_profile_json(
    profile: *const kvexact_profile,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let view = unsafe { arc_ref(profile, "profile") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let json = serde_json::to_string(&view.profile.profile)
            .map_err(|e| Failure::new(KVEXACT_ERR_UNKNOWN, e.to_string()))?;
        copy_out(json.as_bytes(), buf, len, "profile document")
    })
}

/// Rule admission (docs/contracts/registry.md §9.4, §2 `modelType`): may a strict rule that serves
/// `model` (the rule's `model_name`, `model_len` bytes of UTF-8, no NUL needed) through
/// `api_mode` (`KVEXACT_API_BOTH` 0, `KVEXACT_API_COMPLETIONS` 1, `KVEXACT_API_CHAT` 2) on the
/// engine contract `contract_id` (NUL-terminated, e.g. `"vllm-kv-map-v2"`,
/// `"sglang-kv-rank-v1"`, `"trtllm-kv-http-v1"`) bind this profile?
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_PROFILE` with an error object whose code is the rule
/// that refused and whose message starts with it (`"<rule>: <detail>"`); first hit wins:
/// `"model_name_empty"`, `"model_not_served"` (not `baseModel` nor, with `aliasPolicy: list`,
/// an allowed alias; compared by slug like `kvexact_profile_by_model`),
/// `"contracts_unavailable"`, `"unknown_contract"`, `"contract_no_kv_plane"` (llama.cpp),
/// `"surface_not_supported"` (a served surface not in `supportedApis`), `"renderer_missing"`
/// (chat without a compilable template), `"engine_renderer"` (chat for `gpt_oss` on vLLM or
/// TensorRT-LLM, `mistral3` on vLLM or SGLang), `"quirk_incompatible"`,
/// `"tokenizer_unloadable"`, `"encoder_unbuildable"`. Also `KVEXACT_ERR_NULL_ARGUMENT` and
/// `KVEXACT_ERR_INVALID_ARGUMENT` (`api_mode` out of range, `model` or `contract_id` not
/// UTF-8).
///
/// Improvement on §6.2: the refusal status is the gateway's `KVEXACT_ERR_PROFILE` (-3) for
/// every rule, and the rule is the machine-readable error code instead of being only inside
/// the message text. Rule-level checks that need the rule itself (`kvExactMode`, P/D, the vLLM
/// none-hash seed) stay with the caller.
///
/// Builds the encoder `kvexact_encoder_new` would build, then drops it: milliseconds to a
/// second; call it at rule create/replace, not per request.
///
/// Ownership: the caller owns `*err` (free with `kvexact_error_free`); `model` and
/// `contract_id` are only read during the call.
///
/// # Safety
/// `profile` is NULL or a live profile handle; `model` is valid for `model_len` bytes;
/// `contract_id` is NULL or NUL-terminated; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_profile_admit(
    profile: *const kvexact_profile,
    model: *const u8,
    model_len: usize,
    contract_id: *const c_char,
    api_mode: kvexact_api_mode,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let view = arc_ref(profile, "profile")?;
            let model = in_str(model, model_len, "model")?;
            let contract = in_c_str(contract_id, "contract_id")?;
            let mode = api_mode_of(api_mode)?;
            kvprobe::admission::admit(&view.profile, model, contract, mode).map_err(|r| {
                Failure::with_code(KVEXACT_ERR_PROFILE, r.rule.as_str(), r.to_string())
            })?;
            Ok(KVEXACT_OK)
        })
    }
}
