//! The hot-path encoder (spec/gateway-integration.md §6.3): one per profile × engine contract,
//! built once (template compiled, tokenizer loaded) and shared by every worker thread.

use std::cell::RefCell;
use std::ffi::c_char;
use std::sync::Arc;

use kvtemplate::{Encoder, Outcome, Refusal, ScratchBuf};

use crate::error::{kvexact_error, Failure};
use crate::handle::{
    arc_clone, arc_free, arc_into_raw, arc_ref, in_c_str, in_slice, out_param, out_slice, ArcHandle,
};
use crate::panic::{boundary, boundary_err};
use crate::refusal::{kvexact_refusal, KVEXACT_REFUSAL_NONE, KVEXACT_REFUSAL_TEMPLATE_RAISED};
use crate::registry::{kvexact_profile, ProfileView};
use crate::status::{
    kvexact_status, KVEXACT_ERR_BUFFER_TOO_SMALL, KVEXACT_ERR_REQUEST, KVEXACT_ERR_UNSUPPORTED,
    KVEXACT_OK,
};

/// An encoder for one profile on one engine contract (e.g. `"vllm-kv-v1"`,
/// `"sglang-kv-rank-v1"`): the compiled chat template and the pinned tokenizer, with the
/// contract's quirks. Opaque, immutable and reference-counted; share one between all worker
/// threads. It keeps its profile and generation alive. Release with `kvexact_encoder_free`.
pub struct kvexact_encoder {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_encoder`.
#[derive(Debug)]
pub struct EncoderInner {
    /// The kvtemplate encoder.
    pub encoder: Encoder,
    /// Keeps the profile's generation alive.
    pub profile: Arc<ProfileView>,
    /// The engine contract the encoder was built for (its quirks drive the challenge).
    pub contract_id: String,
}

impl ArcHandle for kvexact_encoder {
    type Inner = EncoderInner;
}

thread_local! {
    /// Render scratch space reused by the calls made on this thread (no state survives
    /// between calls: it is only a buffer).
    static SCRATCH: RefCell<ScratchBuf> = RefCell::new(ScratchBuf::new());
}

/// Runs `f` with this thread's scratch buffer (a fresh one if it is somehow in use).
fn with_scratch<R>(f: impl FnOnce(&mut ScratchBuf) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut ScratchBuf::new()),
    })
}

/// A kvtemplate error as a failure with the gateway's typed code (§9.3).
fn template_failure(e: &kvtemplate::Error) -> Failure {
    Failure::new(e.class().code(), e.to_string())
}

/// The C value of a refusal (kvtemplate's discriminants are the ABI's values).
fn refusal_value(r: Refusal) -> kvexact_refusal {
    u32::try_from(r as i32).unwrap_or(KVEXACT_REFUSAL_TEMPLATE_RAISED)
}

/// Builds the encoder of `profile` for the engine contract `contract_id` (NUL-terminated; its
/// first `-` segment names the engine: `vllm`, `sglang`, `trtllm`). Compiles the template; the
/// tokenizer parsed when the registry was loaded is shared, not parsed again (milliseconds:
/// still do it at publish time, not per request).
///
/// Returns `KVEXACT_OK` and a new reference in `*out`, or a negative status with an error
/// object: `KVEXACT_ERR_PROFILE` (unknown contract, quirk not valid for it),
/// `KVEXACT_ERR_RENDERER` (template does not compile), `KVEXACT_ERR_TOKENIZER` (tokenizer does
/// not load), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_encoder_free`) and `*err`.
///
/// # Safety
/// `profile` is NULL or a live profile; `contract_id` is NULL or a NUL-terminated string;
/// `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_new(
    profile: *const kvexact_profile,
    contract_id: *const c_char,
    out: *mut *mut kvexact_encoder,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let view = arc_clone(profile, "profile")?;
            let contract = in_c_str(contract_id, "contract_id")?;
            let out = out_param(out, "out")?;
            let lp = &view.profile;
            let encoder =
                kvtemplate::encoder_from_loaded(lp, contract).map_err(|e| template_failure(&e))?;
            out.write(arc_into_raw(Arc::new(EncoderInner {
                encoder,
                profile: view,
                contract_id: contract.to_string(),
            })));
            Ok(KVEXACT_OK)
        })
    }
}

/// Takes another reference to `encoder` and returns it (NULL when `encoder` is NULL).
///
/// # Safety
/// `encoder` is NULL or a live encoder.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_retain(
    encoder: *const kvexact_encoder,
) -> *const kvexact_encoder {
    boundary(|| {
        Ok(arc_into_raw::<kvexact_encoder>(unsafe { arc_clone(encoder, "encoder") }?).cast_const())
    })
}

/// Releases one encoder reference. NULL is accepted and ignored.
///
/// # Safety
/// `encoder` is NULL or a reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_free(encoder: *mut kvexact_encoder) {
    boundary(|| {
        unsafe { arc_free(encoder) };
        Ok(())
    })
}

/// Encodes a text completions prompt (`text`, `len` bytes of UTF-8, no NUL needed) into the ids
/// the engine caches, using the contract's completions encoding (tokenizer with special tokens;
/// SGLang `completionsBos`: BOS + ids without specials, the BOS counting against `max_ids`).
///
/// Writes at most `max_ids` ids (the rest is cut, as the gateway's 4096-id cap does) and
/// returns how many, or a negative status: `KVEXACT_ERR_REQUEST` (empty text, not UTF-8),
/// `KVEXACT_ERR_UNSUPPORTED` (NUL byte in the text), `KVEXACT_ERR_TOKENIZER`,
/// `KVEXACT_ERR_PROFILE`, `KVEXACT_ERR_NULL_ARGUMENT`. `out_ids` is written only on success.
///
/// # Safety
/// `encoder` is NULL or a live encoder; `text` is valid for `len` bytes; `out_ids` is valid for
/// `max_ids` writes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encode_completions(
    encoder: *const kvexact_encoder,
    text: *const u8,
    len: usize,
    out_ids: *mut u32,
    max_ids: u32,
) -> i32 {
    boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let text = unsafe { in_slice(text, len, "text") }?;
        let text = std::str::from_utf8(text)
            .map_err(|e| Failure::new(KVEXACT_ERR_REQUEST, format!("prompt is not UTF-8: {e}")))?;
        let cap = (max_ids as usize).min(i32::MAX as usize);
        let out = unsafe { out_slice(out_ids, cap, "out_ids") }?;
        match enc.encoder.encode_completions(text, out) {
            Ok(Outcome::Done(e)) => Ok(i32::try_from(e.written).unwrap_or(i32::MAX)),
            Ok(Outcome::Refused(r)) => Err(Failure::with_code(
                KVEXACT_ERR_UNSUPPORTED,
                r.as_str(),
                "refused",
            )),
            Err(e) => Err(template_failure(&e)),
        }
    })
}

/// The gateway's chat call: strict refusal scan of the raw request `body` (JSON, exact keys),
/// render of the profile's template at `now_unix_ms` (UTC; one instant per request), encoding
/// without special tokens.
///
/// Writes at most `max_ids` ids and returns how many, or a negative status:
/// `KVEXACT_ERR_UNSUPPORTED` (a strict-rule refusal; its reason in `*refusal_out`),
/// `KVEXACT_ERR_REQUEST` (e.g. clock out of range), `KVEXACT_ERR_RENDERER` (no template),
/// `KVEXACT_ERR_TOKENIZER`, `KVEXACT_ERR_NULL_ARGUMENT`. `out_ids` is written only on success.
///
/// `refusal_out` may be NULL; when not NULL it is always written: the refusal for
/// `KVEXACT_ERR_UNSUPPORTED`, `KVEXACT_REFUSAL_NONE` otherwise.
///
/// # Safety
/// `encoder` is NULL or a live encoder; `body` is valid for `len` bytes; `out_ids` is valid for
/// `max_ids` writes; `refusal_out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encode_chat(
    encoder: *const kvexact_encoder,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    out_ids: *mut u32,
    max_ids: u32,
    refusal_out: *mut kvexact_refusal,
) -> i32 {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let r = boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let cap = (max_ids as usize).min(i32::MAX as usize);
        let out = unsafe { out_slice(out_ids, cap, "out_ids") }?;
        match with_scratch(|s| enc.encoder.encode_chat(body, now_unix_ms, out, s)) {
            Ok(Outcome::Done(e)) => Ok(i32::try_from(e.written).unwrap_or(i32::MAX)),
            Ok(Outcome::Refused(r)) => {
                refusal = refusal_value(r);
                Err(Failure::with_code(
                    KVEXACT_ERR_UNSUPPORTED,
                    r.as_str(),
                    "refused",
                ))
            }
            Err(e) => {
                let f = template_failure(&e);
                if f.status == KVEXACT_ERR_UNSUPPORTED {
                    refusal = KVEXACT_REFUSAL_TEMPLATE_RAISED;
                }
                Err(f)
            }
        }
    });
    if !refusal_out.is_null() {
        // SAFETY: the caller guarantees validity when not NULL.
        unsafe { refusal_out.write(refusal) };
    }
    r
}

/// Debug/oracle: the prompt `kvexact_encode_chat` would tokenize, as UTF-8 bytes (no NUL).
///
/// Writes the needed length to `*len_out`; when `cap` is smaller, returns
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else (`buf` may be NULL with `cap` 0 to
/// ask for the size). Otherwise copies the prompt into `buf` and returns `KVEXACT_OK`. Other
/// statuses and `refusal_out` as for `kvexact_encode_chat`.
///
/// # Safety
/// As `kvexact_encode_chat`; `buf` is NULL or valid for `cap` writes; `len_out` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_render_chat(
    encoder: *const kvexact_encoder,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
    refusal_out: *mut kvexact_refusal,
) -> kvexact_status {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let r = boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let len_out = unsafe { out_param(len_out, "len_out") }?;
        let out = unsafe { out_slice(buf, cap, "buf") }?;
        with_scratch(|s| match enc.encoder.render_chat(body, now_unix_ms, s) {
            Ok(Outcome::Done(())) => {
                let text = s.rendered().as_bytes();
                len_out.write(text.len());
                let dst = out.get_mut(..text.len()).ok_or_else(|| {
                    Failure::new(
                        KVEXACT_ERR_BUFFER_TOO_SMALL,
                        "buffer too small for the prompt",
                    )
                })?;
                dst.copy_from_slice(text);
                Ok(KVEXACT_OK)
            }
            Ok(Outcome::Refused(r)) => {
                refusal = refusal_value(r);
                Err(Failure::with_code(
                    KVEXACT_ERR_UNSUPPORTED,
                    r.as_str(),
                    "refused",
                ))
            }
            Err(e) => {
                let f = template_failure(&e);
                if f.status == KVEXACT_ERR_UNSUPPORTED {
                    refusal = KVEXACT_REFUSAL_TEMPLATE_RAISED;
                }
                Err(f)
            }
        })
    });
    if !refusal_out.is_null() {
        // SAFETY: the caller guarantees validity when not NULL.
        unsafe { refusal_out.write(refusal) };
    }
    r
}
