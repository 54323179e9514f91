//! The hash challenge (`kvexact_challenge`, docs/contracts/registry.md §8.5): the nonce prompt, its
//! expected tokens and block hashes, and the judging of the KV events the engine publishes.

use std::ffi::c_char;

use kvprobe::challenge::{Bootstrap, Challenge, ChallengeSpec, Observed};
use kvprobe::{Finding, Reason};

use crate::encoder::{kvexact_encoder, EncoderInner};
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::events::{kvexact_event, KVEXACT_EVENT_STORED};
use crate::failure::Failure;
use crate::handle::{
    arc_ref, box_free, box_into_raw, box_mut, box_ref, copy_out, in_c_str, in_slice, in_str,
    out_param, out_slice, BoxHandle,
};
use crate::hasher::kvexact_hasher;
use crate::panic::boundary;
use crate::status::{kvexact_status, KVEXACT_ERR_CHALLENGE, KVEXACT_OK};

use super::finding::{kvexact_finding, write_finding};

/// One armed hash challenge (docs/contracts/registry.md §8.5): the nonce prompt, its expected tokens and
/// block hashes, and the judging of the KV events the engine publishes for it. Opaque; owned
/// by one caller at a time (not for concurrent use). Free with `kvexact_challenge_free`.
pub struct kvexact_challenge {
    _private: [u8; 0],
}

impl BoxHandle for kvexact_challenge {
    type Inner = Challenge;
}

/// What a challenge needs from the rule besides the encoder and hasher.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_challenge_opts {
    /// The served model name put in the request body (UTF-8, `model_len` bytes).
    pub model: *const u8,
    /// Length of `model`.
    pub model_len: usize,
    /// Declared DP ranks (SGLang `kvDpRankCount`; 0 or 1 for one rank). An echo from a rank at
    /// or above this fails the challenge.
    pub dp_ranks: u32,
}

/// Arms a challenge: grows the nonce prompt through `encoder`'s completions encoding (the
/// engine's, with its contract quirks `cacheChunk` and `challengeLastBlock`) until it is long
/// enough, and computes the expected tokens and block hashes with `hasher` (the rule's).
///
/// `nonce` is 16 bytes, or NULL to draw them from the OS (`/dev/urandom`).
///
/// Improvement on §6.5: `opts` carries the served model name and declared DP ranks, which the
/// request body and the judging need and the encoder does not know.
///
/// Returns `KVEXACT_OK` and the challenge in `*out`; `KVEXACT_ERR_CHALLENGE` with code
/// `"challenge_failed"` (the readiness reason) when it cannot be built (prompt never long
/// enough, fewer than 2 expected blocks, `cacheChunk` not a multiple of the block size, nonce
/// unavailable); `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_challenge_free`) and `*err`; the
/// challenge keeps no reference to `encoder` or `hasher`.
///
/// # Safety
/// `encoder`, `hasher` are NULL or live; `nonce` is NULL or valid for 16 bytes; `opts` is NULL
/// or valid (and its `model` valid for `model_len` bytes); `out` and `err` are NULL or valid for
/// one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_new(
    encoder: *const kvexact_encoder,
    hasher: *const kvexact_hasher,
    nonce: *const u8,
    opts: *const kvexact_challenge_opts,
    out: *mut *mut kvexact_challenge,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let enc: &EncoderInner = arc_ref(encoder, "encoder")?;
            let h = arc_ref(hasher, "hasher")?;
            let opts = opts.as_ref().ok_or_else(|| Failure::null("opts"))?;
            let model = in_str(opts.model, opts.model_len, "opts.model")?;
            let out = out_param(out, "out")?;
            let challenge_failure = |f: Finding| {
                Failure::with_code(
                    KVEXACT_ERR_CHALLENGE,
                    Reason::ChallengeFailed.as_str(),
                    f.detail,
                )
            };
            let nonce: [u8; 16] = if nonce.is_null() {
                kvprobe::challenge::os_nonce().map_err(challenge_failure)?
            } else {
                let n = in_slice(nonce, 16, "nonce")?;
                n.try_into()
                    .map_err(|_| Failure::invalid("nonce", "not 16 bytes"))?
            };
            let quirks = enc.profile.profile.profile.quirks(&enc.contract_id);
            let spec = ChallengeSpec {
                model: model.to_string(),
                cache_chunk: quirks.cache_chunk,
                last_block_only: quirks.challenge_last_block,
                dp_ranks: opts.dp_ranks,
                lora: None,
                cache_salt: None,
            };
            let c = Challenge::new(&enc.encoder, h.block_hasher(), &spec, nonce)
                .map_err(challenge_failure)?;
            out.write(box_into_raw::<kvexact_challenge>(c));
            Ok(KVEXACT_OK)
        })
    }
}

/// The `/v1/completions` body to POST for the challenge:
/// `{"model":…,"prompt":…,"max_tokens":1,"temperature":0}`; with `bootstrap_host` non-NULL
/// (SGLang P/D rules) also `"bootstrap_host":…,"bootstrap_port":…,"bootstrap_room":…`.
/// `bootstrap_room` must be non-negative (a random 63-bit value).
///
/// Writes the needed length to `*len`; when `cap` is smaller returns
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else (`buf` may be NULL with `cap` 0 to ask
/// for the size); else copies the body (no NUL) and returns `KVEXACT_OK`.
///
/// # Safety
/// `challenge` is NULL or live; `bootstrap_host` is NULL or NUL-terminated; `buf` is NULL or
/// valid for `cap` bytes; `len` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_request_body(
    challenge: *const kvexact_challenge,
    bootstrap_host: *const c_char,
    bootstrap_port: u16,
    bootstrap_room: i64,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let c = unsafe { box_ref(challenge, "challenge") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let bootstrap = if bootstrap_host.is_null() {
            None
        } else {
            let host = unsafe { in_c_str(bootstrap_host, "bootstrap_host") }?;
            if bootstrap_room < 0 {
                return Err(Failure::invalid("bootstrap_room", "negative"));
            }
            Some(Bootstrap {
                host: host.to_string(),
                port: bootstrap_port,
                room: bootstrap_room,
            })
        };
        copy_out(
            &c.request_body_with(bootstrap.as_ref()),
            buf,
            len,
            "request body",
        )
    })
}

/// The challenge's expected block hashes and tokens (for logs and receipts). The pointers point
/// into the challenge (valid while it lives).
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `challenge` is NULL or live; the four out-parameters are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_expected(
    challenge: *const kvexact_challenge,
    hashes: *mut *const u64,
    n_hashes: *mut usize,
    tokens: *mut *const u32,
    n_tokens: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let c = unsafe { box_ref(challenge, "challenge") }?;
        let hashes = unsafe { out_param(hashes, "hashes") }?;
        let n_hashes = unsafe { out_param(n_hashes, "n_hashes") }?;
        let tokens = unsafe { out_param(tokens, "tokens") }?;
        let n_tokens = unsafe { out_param(n_tokens, "n_tokens") }?;
        hashes.write(c.expected_hashes().as_ptr());
        n_hashes.write(c.expected_hashes().len());
        tokens.write(c.expected_tokens().as_ptr());
        n_tokens.write(c.expected_tokens().len());
        Ok(KVEXACT_OK)
    })
}

/// The observation a decoded event gives the challenge (stored events only).
///
/// # Safety
/// `ev`'s pointers are valid for their counts (as `kvexact_event_decode` returns them).
unsafe fn observed(ev: &kvexact_event) -> Result<Option<Observed>, Failure> {
    if ev.kind != KVEXACT_EVENT_STORED {
        return Ok(None);
    }
    let hashes = unsafe { in_slice(ev.hashes, ev.n_hashes, "ev.hashes") }?;
    let tokens = unsafe { in_slice(ev.token_ids, ev.n_tokens, "ev.token_ids") }?;
    Ok(Some(Observed {
        hashes: hashes.to_vec(),
        token_ids: (!tokens.is_empty()).then(|| tokens.iter().map(|&t| u64::from(t)).collect()),
        block_size: (ev.block_size != 0).then_some(ev.block_size),
        has_lora: ev.has_lora != 0,
        lora_name: None,
        has_extra_keys: ev.has_extra_keys != 0,
        rehash_mismatch: ev.rehash_mismatch != 0,
    }))
}

/// Feeds one decoded event from the challenged endpoint's stream (as `kvexact_event_decode`
/// returned it; only stored events count). `dp_rank` is the batch's DP rank, or -1 when the
/// stream carries none. Returns 1 once the challenge is decided (passed or failed), 0 while it
/// still waits, or a negative status (`KVEXACT_ERR_NULL_ARGUMENT`,
/// `KVEXACT_ERR_INVALID_ARGUMENT`) when the arguments are unusable.
///
/// # Safety
/// `challenge` is NULL or live and not used concurrently; `ev` is NULL or a valid event whose
/// pointers are valid for their counts.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_observe(
    challenge: *mut kvexact_challenge,
    dp_rank: i64,
    ev: *const kvexact_event,
) -> i32 {
    boundary(|| {
        let c = unsafe { box_mut(challenge, "challenge") }?;
        let ev = unsafe { ev.as_ref() }.ok_or_else(|| Failure::null("ev"))?;
        let rank =
            match dp_rank {
                -1 => None,
                r => Some(u32::try_from(r).map_err(|_| {
                    Failure::invalid("dp_rank", format_args!("{r} (use -1 for none)"))
                })?),
            };
        let finished = match unsafe { observed(ev) }? {
            Some(o) => c.observe(rank, &o),
            None => c.finished(),
        };
        Ok(i32::from(finished))
    })
}

/// The challenge's outcome: a pass once every expected hash (or, quirk `challengeLastBlock`,
/// the last one) was echoed with matching tokens; `challenge_failed` for a wrong echo (LoRA or
/// extra keys, different tokens, an undeclared rank, a TensorRT-LLM hash its tokens do not
/// give); `challenge_timeout` when undecided (`timed_out` non-zero says the caller's wait —
/// 15 s by default — ended).
///
/// Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `challenge` is NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_result(
    challenge: *const kvexact_challenge,
    timed_out: i32,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let c = unsafe { box_ref(challenge, "challenge") }?;
        let out = unsafe { out_param(out, "out") }?;
        write_finding(out, &c.result(timed_out != 0))
    })
}

/// Frees a challenge. NULL is accepted and ignored.
///
/// # Safety
/// `challenge` is NULL or live and not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_challenge_free(challenge: *mut kvexact_challenge) {
    boundary(|| {
        unsafe { box_free(challenge) };
        Ok(())
    })
}
