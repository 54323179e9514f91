//! Predictions of the prefix index: a request's block keys in, each endpoint and
//! rank's cached-token count out (`kvexact_index_predict`), the gateway's hot path in one
//! call (`kvexact_index_route_predict`: `kvexact_route_keys` then the prediction), and the
//! engine's reported count fed back (`kvexact_index_observe`).
//!
//! Predictions go straight into the caller's array: the index's walk runs over the hashes in
//! place and each thread reuses one scratch vector, so nothing is allocated per block.

use std::cell::RefCell;

use kvindex::{EndpointId, Observation, Outcome, Prediction, Request, UnknownReason};

use crate::encoder::kvexact_encoder;
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{arc_ref, in_slice, in_str, out_param, out_slice, Out};
use crate::hasher::kvexact_hasher;
use crate::index::{index_failure, kvexact_index};
use crate::refusal::{kvexact_refusal, KVEXACT_REFUSAL_NONE};
use crate::route::route_one;
use crate::status::{kvexact_status, KVEXACT_ERR_BUFFER_TOO_SMALL, KVEXACT_OK};

/// What a prediction says (`kvexact_index_prediction.status`).
pub type kvexact_prediction_status = u32;
/// The engine will report `tokens` cached tokens.
pub const KVEXACT_PREDICTION_CACHED: kvexact_prediction_status = 0;
/// The index cannot know: see `unknown_reason`. Never route on it as a hit.
pub const KVEXACT_PREDICTION_UNKNOWN: kvexact_prediction_status = 1;

/// Why a prediction is unknown (`kvexact_index_prediction.unknown_reason`).
pub type kvexact_unknown_reason = u32;
/// Not unknown (the prediction is `KVEXACT_PREDICTION_CACHED`).
pub const KVEXACT_UNKNOWN_NONE: kvexact_unknown_reason = 0;
/// The stream has not shown a point where the engine's cache was known (joined midway).
pub const KVEXACT_UNKNOWN_UNSYNCED: kvexact_unknown_reason = 1;
/// Batches were lost; a replay was asked for and has not caught up yet.
pub const KVEXACT_UNKNOWN_REPLAYING: kvexact_unknown_reason = 2;
/// Batches were lost and cannot be replayed (no replay buffer, or a rejected batch).
pub const KVEXACT_UNKNOWN_OUT_OF_STEP: kvexact_unknown_reason = 3;
/// The stream stored more than the engine's pool holds: removals were lost.
pub const KVEXACT_UNKNOWN_OVERFLOW: kvexact_unknown_reason = 4;
/// Adapters are loaded and the release's events do not tell adapter blocks from base blocks
/// (the catalog's `loraInHashes: false`, e.g. SGLang 0.5.19): explained by the catalog.
pub const KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS: kvexact_unknown_reason = 5;
/// The caller said the rank's stream was lost (`kvexact_index_mark_lost`, or kvexact's
/// subscriber after a dropped queue or a dead connection): unknown until the next batch's
/// sequence number shows what was lost.
pub const KVEXACT_UNKNOWN_STREAM_LOST: kvexact_unknown_reason = 6;

/// Flags of a request (`kvexact_index_predict`'s `flags`): it skips reading the prefix cache
/// (vLLM `prompt_logprobs`): no hit. (A request's LoRA adapter and `cache_salt` are in its
/// hashes where the release's events show them; where they do not, endpoints with adapters
/// loaded are `KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS` whatever the request names.)
pub const KVEXACT_PREDICT_SKIP_PREFIX_CACHE: u32 = 2;
/// Flag of a prediction (`kvexact_index_predict`'s `flags`): list only the endpoint ranks whose
/// prediction is not "cached, 0 tokens" — those holding some of the request and those that
/// are unknown — in the same order as the full answer; every rank not listed is
/// `KVEXACT_PREDICTION_CACHED` with `tokens` 0, `other_media_tokens` 0 on an index of one
/// KV-cache group (-1 on several) and the release's `proven`. The form of the peers'
/// answers, and the cheaper one where most endpoints hold nothing of the request.
pub const KVEXACT_PREDICT_SPARSE: u32 = 4;

/// How the engine's reported count compared with the prediction (`kvexact_index_observe`).
pub type kvexact_observation = u32;
/// Predicted = reported.
pub const KVEXACT_OBSERVATION_EXACT: kvexact_observation = 0;
/// The index predicted more than the engine had.
pub const KVEXACT_OBSERVATION_OVER: kvexact_observation = 1;
/// The index predicted less than the engine had.
pub const KVEXACT_OBSERVATION_UNDER: kvexact_observation = 2;
/// The prediction was unknown: nothing to judge.
pub const KVEXACT_OBSERVATION_UNJUDGED: kvexact_observation = 3;

/// One endpoint rank's prediction for a request. A fixed layout (an array element: it has no
/// `struct_size` and never changes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvexact_index_prediction {
    /// The endpoint's id.
    pub endpoint: u32,
    /// The data-parallel rank.
    pub rank: u32,
    /// `KVEXACT_PREDICTION_CACHED` or `KVEXACT_PREDICTION_UNKNOWN`.
    pub status: kvexact_prediction_status,
    /// `KVEXACT_UNKNOWN_NONE` when cached, else why it is unknown (`KVEXACT_UNKNOWN_*`).
    pub unknown_reason: kvexact_unknown_reason,
    /// Cached: 1 when a cache-hit replay of the release proves its rule, 0 when the rule is
    /// predicted unproven. 0 when unknown.
    pub proven: u32,
    /// Always 0.
    pub reserved: u32,
    /// Cached: the cached tokens the engine will report (its GPU prefix-cache hit); 0 when
    /// unknown.
    pub tokens: u64,
    /// Cached: further prompt tokens held in other media (CPU offloading, HiCache) right after
    /// the GPU hit, never part of `tokens`; -1 where the rule does not say (several KV-cache
    /// groups) or the prediction is unknown.
    pub other_media_tokens: i64,
}

fn reason_code(r: UnknownReason) -> kvexact_unknown_reason {
    match r {
        UnknownReason::Unsynced => KVEXACT_UNKNOWN_UNSYNCED,
        UnknownReason::Replaying => KVEXACT_UNKNOWN_REPLAYING,
        UnknownReason::OutOfStep => KVEXACT_UNKNOWN_OUT_OF_STEP,
        UnknownReason::Overflow => KVEXACT_UNKNOWN_OVERFLOW,
        UnknownReason::LoraNotInEvents => KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS,
        UnknownReason::StreamLost => KVEXACT_UNKNOWN_STREAM_LOST,
    }
}

fn reason_of(code: kvexact_unknown_reason) -> Option<UnknownReason> {
    Some(match code {
        KVEXACT_UNKNOWN_UNSYNCED => UnknownReason::Unsynced,
        KVEXACT_UNKNOWN_REPLAYING => UnknownReason::Replaying,
        KVEXACT_UNKNOWN_OUT_OF_STEP => UnknownReason::OutOfStep,
        KVEXACT_UNKNOWN_OVERFLOW => UnknownReason::Overflow,
        KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS => UnknownReason::LoraNotInEvents,
        KVEXACT_UNKNOWN_STREAM_LOST => UnknownReason::StreamLost,
        _ => return None,
    })
}

impl From<&Prediction> for kvexact_index_prediction {
    fn from(p: &Prediction) -> Self {
        let mut out = kvexact_index_prediction {
            endpoint: p.endpoint.0,
            rank: p.rank,
            other_media_tokens: -1,
            ..Default::default()
        };
        match p.outcome {
            Outcome::Cached {
                tokens,
                other_media_tokens,
                proven,
            } => {
                out.status = KVEXACT_PREDICTION_CACHED;
                out.tokens = u64::from(tokens);
                out.other_media_tokens = other_media_tokens.map_or(-1, i64::from);
                out.proven = u32::from(proven);
            }
            Outcome::Unknown(r) => {
                out.status = KVEXACT_PREDICTION_UNKNOWN;
                out.unknown_reason = reason_code(r);
            }
        }
        out
    }
}

/// The outcome a C prediction stands for (for `kvexact_index_observe`).
fn outcome_of(p: &kvexact_index_prediction) -> Result<Outcome, Failure> {
    match p.status {
        KVEXACT_PREDICTION_CACHED => {
            // The index never predicts more than a prompt's tokens, which it bounds to 32
            // bits: a larger count is not one of its predictions.
            let bounded = |what: &'static str, t: u64| {
                u32::try_from(t).map_err(|_| {
                    Failure::invalid(what, format_args!("{t} tokens is not a prediction"))
                })
            };
            Ok(Outcome::Cached {
                tokens: bounded("prediction.tokens", p.tokens)?,
                other_media_tokens: match u64::try_from(p.other_media_tokens) {
                    Ok(t) => Some(bounded("prediction.other_media_tokens", t)?),
                    Err(_) => None,
                },
                proven: p.proven != 0,
            })
        }
        KVEXACT_PREDICTION_UNKNOWN => reason_of(p.unknown_reason)
            .map(Outcome::Unknown)
            .ok_or_else(|| {
                Failure::invalid(
                    "prediction.unknown_reason",
                    format_args!("unknown reason code {}", p.unknown_reason),
                )
            }),
        s => Err(Failure::invalid(
            "prediction.status",
            format_args!("unknown status {s}"),
        )),
    }
}

/// A prediction's flags: (the request skips the prefix cache, the answer is sparse).
fn request_flags(flags: u32) -> Result<(bool, bool), Failure> {
    if flags & !(KVEXACT_PREDICT_SKIP_PREFIX_CACHE | KVEXACT_PREDICT_SPARSE) != 0 {
        return Err(Failure::invalid(
            "flags",
            format_args!("unknown flag bits {flags:#x}"),
        ));
    }
    Ok((
        flags & KVEXACT_PREDICT_SKIP_PREFIX_CACHE != 0,
        flags & KVEXACT_PREDICT_SPARSE != 0,
    ))
}

thread_local! {
    /// Each thread's predictions before they are copied out (reused: no allocation once warm).
    static PREDICTIONS: RefCell<Vec<Prediction>> = const { RefCell::new(Vec::new()) };
}

/// Predicts `req` into `out`: the count goes to `count` (also when the buffer is too small,
/// which is `KVEXACT_ERR_BUFFER_TOO_SMALL` with nothing else written).
fn predict_into(
    index: &kvindex::Index,
    req: &Request<'_>,
    sparse: bool,
    out: &mut [kvexact_index_prediction],
    count: Out<usize>,
) -> Result<kvexact_status, Failure> {
    PREDICTIONS.with(|cell| {
        // A re-entrant call (impossible from C, but never a panic) gets its own vector.
        let mut own = Vec::new();
        let mut guard = cell.try_borrow_mut().ok();
        let preds: &mut Vec<Prediction> = match guard.as_deref_mut() {
            Some(v) => v,
            None => &mut own,
        };
        if sparse {
            index.predict_sparse(req, preds)
        } else {
            index.predict(req, preds)
        }
        .map_err(|e| index_failure(&e))?;
        count.write(preds.len());
        let cap = out.len();
        let dst = out.get_mut(..preds.len()).ok_or_else(|| {
            Failure::new(
                KVEXACT_ERR_BUFFER_TOO_SMALL,
                format!(
                    "buffer too small for {} predictions ({} given)",
                    preds.len(),
                    cap
                ),
            )
        })?;
        for (d, p) in dst.iter_mut().zip(preds.iter()) {
            *d = p.into();
        }
        Ok(KVEXACT_OK)
    })
}

/// Predicts, for a request's block keys, the cached tokens every endpoint rank of the index
/// will report, by the release's hit rule (one entry per endpoint and rank, endpoints in the
/// order they were added, ranks in order).
///
/// `hashes` / `n_hashes`: the request's full-block chain hashes at the index's block size, in
/// the engine's event integer form, as `kvexact_block_hashes_u64` (full blocks only) of a
/// hasher of the same release writes them; at least `(prompt_tokens - 1) / block_size` of
/// them (the blocks a hit may reach) and at most `prompt_tokens / block_size`.
/// `prompt_tokens`: the prompt's token count, at most 2^32 - 1 (`KVEXACT_ERR_INVALID_ARGUMENT`
/// past it). `flags`: 0 or any of
/// `KVEXACT_PREDICT_SKIP_PREFIX_CACHE` and `KVEXACT_PREDICT_SPARSE` (only the ranks whose
/// prediction is not "cached, 0 tokens", in the same order; `*count` and the buffer size
/// then count those).
///
/// On success returns `KVEXACT_OK`, writes `*count` predictions to `out` (capacity `cap`)
/// and the count to `*count`. `KVEXACT_ERR_BUFFER_TOO_SMALL`: `cap` is below the number of
/// endpoint ranks, which is written to `*count` (nothing else is written; `(NULL, 0)` asks
/// for it). Otherwise, with an error object: `KVEXACT_ERR_INVALID_ARGUMENT` (code
/// `"INVALID_REQUEST"`: a hash count outside the range above; unknown flag bits),
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// Thread safety: any number of threads may predict while others feed; each rank's answer
/// reflects whole batches only. Nothing is allocated per block or per call once a thread's
/// scratch has grown to the endpoint count.
///
/// # Safety
/// `index` is NULL or a live index; `hashes` is NULL or valid for `n_hashes` reads; `out` is
/// NULL or valid for `cap` writes; `count` and `err` are NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_index_predict(
    index: *const kvexact_index,
    hashes: *const u64,
    n_hashes: usize,
    prompt_tokens: usize,
    flags: u32,
    out: *mut kvexact_index_prediction,
    cap: usize,
    count: *mut usize,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let hashes = in_slice(hashes, n_hashes, "hashes")?;
            let out = out_slice(out, cap, "out")?;
            let count = out_param(count, "count")?;
            let (skip, sparse) = request_flags(flags)?;
            let req = Request {
                block_hashes: hashes,
                prompt_tokens,
                max_cached_tokens: skip.then_some(0),
            };
            predict_into(index, &req, sparse, out, count)
        })
    }
}

/// The gateway's hot path in one call, without entering any other runtime: exactly
/// `kvexact_route_keys(encoder, hasher, body, len, now_unix_ms, ids_out, max_ids, hashes_out,
/// max_blocks, n_ids, n_blocks, refusal_out, err)` — the refusal scan, render, tokenization
/// and full-block hashes of the chat request — then `kvexact_index_predict(index, hashes_out,
/// *n_blocks, *n_ids, flags, out, cap, count, err)` on the keys just written.
///
/// `hasher` must be of the index's release and block size (a block size other than the
/// index's is `KVEXACT_ERR_INVALID_ARGUMENT`); `max_blocks` must reach the blocks a hit may
/// reach (`(n_ids - 1) / block_size`), else the prediction is refused as
/// `kvexact_index_predict` refuses it. A prompt with more ids than `max_ids` (which
/// `kvexact_route_keys` cuts) is `KVEXACT_ERR_INVALID_ARGUMENT`: its length, and so the
/// engine's hit, is not known.
///
/// Returns `KVEXACT_OK` with `*n_ids`, `*n_blocks`, `*count` and the predictions written.
/// Otherwise the statuses of `kvexact_route_keys` (then nothing of the prediction is written)
/// or of `kvexact_index_predict` (then `ids_out` and `hashes_out` hold the request's keys but
/// `*n_ids` and `*n_blocks` are not written; `KVEXACT_ERR_BUFFER_TOO_SMALL` writes the needed
/// prediction count to `*count`), with an error object in `*err` when `err` is not NULL.
/// `refusal_out` may be NULL; when not NULL it is always written, as by `kvexact_route_keys`.
///
/// Thread safety: any number of threads at once on the same handles.
///
/// # Safety
/// `index`, `encoder` and `hasher` are NULL or live handles; `body` is valid for `len` bytes;
/// `ids_out` for `max_ids` writes, `hashes_out` for `max_blocks` writes and `out` for `cap`
/// writes (none aliasing another); `n_ids`, `n_blocks`, `count`, `refusal_out` and `err` are
/// NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_index_route_predict(
    index: *const kvexact_index,
    encoder: *const kvexact_encoder,
    hasher: *const kvexact_hasher,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    flags: u32,
    ids_out: *mut u32,
    max_ids: usize,
    hashes_out: *mut u64,
    max_blocks: usize,
    n_ids: *mut usize,
    n_blocks: *mut usize,
    out: *mut kvexact_index_prediction,
    cap: usize,
    count: *mut usize,
    refusal_out: *mut kvexact_refusal,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let r = unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let enc = arc_ref(encoder, "encoder")?;
            let h = arc_ref(hasher, "hasher")?;
            let body = in_slice(body, len, "body")?;
            let ids = out_slice(ids_out, max_ids, "ids_out")?;
            let hashes = out_slice(hashes_out, max_blocks, "hashes_out")?;
            let n_ids = out_param(n_ids, "n_ids")?;
            let n_blocks = out_param(n_blocks, "n_blocks")?;
            let out = out_slice(out, cap, "out")?;
            let count = out_param(count, "count")?;
            let (skip, sparse) = request_flags(flags)?;
            let bs = h.block_hasher().block_size();
            if bs != index.options().block_size as usize {
                return Err(Failure::invalid(
                    "hasher",
                    format_args!(
                        "block size {bs}, the index's is {}",
                        index.options().block_size
                    ),
                ));
            }
            let (ni, nb, truncated) =
                route_one(enc, h, body, now_unix_ms, ids, hashes, &mut refusal)?;
            if truncated {
                // The prompt is longer than `ids_out`: its length, and so the engine's hit
                // (which never covers the last prompt token), is not known here.
                return Err(Failure::invalid(
                    "max_ids",
                    format_args!("the prompt has more than {max_ids} ids; its hit is unknown"),
                ));
            }
            let req = Request {
                block_hashes: hashes.get(..nb).unwrap_or(&[]),
                prompt_tokens: ni,
                max_cached_tokens: skip.then_some(0),
            };
            let st = predict_into(index, &req, sparse, out, count)?;
            n_ids.write(ni);
            n_blocks.write(nb);
            Ok(st)
        })
    };
    if !refusal_out.is_null() {
        // SAFETY: the caller guarantees validity when not NULL.
        unsafe { refusal_out.write(refusal) };
    }
    r
}

/// Records the engine's reported cached tokens for a request routed to `prediction`'s
/// endpoint and rank (what the engine puts in its response:
/// `usage.prompt_tokens_details.cached_tokens` on the OpenAI routes where enabled, SGLang's
/// `meta_info.cached_tokens` on its native route) against `prediction`, the entry
/// `kvexact_index_predict` wrote for it when it was routed. `request` / `request_len`: the
/// caller's label of the request (UTF-8; its first 256 characters are kept), named by the
/// `prediction_drift` finding when this is the first wrong prediction.
///
/// Writes `KVEXACT_OBSERVATION_EXACT`, `_OVER`, `_UNDER` or `_UNJUDGED` (an unknown
/// prediction) to `*observation` and counts it per rank. Returns `KVEXACT_OK`; otherwise,
/// with an error object: `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT`
/// (`"UNKNOWN_RANK"`; a status or reason code libkvexact does not define; a token count in
/// `prediction` past 2^32 - 1, which no prediction has; the label not UTF-8),
/// `KVEXACT_ERR_NULL_ARGUMENT`. `*observation` is written only on success.
///
/// # Safety
/// `index` is NULL or a live index; `prediction` is NULL or valid for one read; `request` is
/// NULL or valid for `request_len` bytes; `observation` and `err` are NULL or valid for one
/// write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_observe(
    index: *const kvexact_index,
    prediction: *const kvexact_index_prediction,
    request: *const u8,
    request_len: usize,
    reported_tokens: u64,
    observation: *mut kvexact_observation,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let p = prediction
                .as_ref()
                .ok_or_else(|| Failure::null("prediction"))?;
            let label = in_str(request, request_len, "request")?;
            let obs_out = out_param(observation, "observation")?;
            let outcome = outcome_of(p)?;
            let obs = index
                .observe(
                    EndpointId(p.endpoint),
                    p.rank,
                    label,
                    outcome,
                    reported_tokens,
                )
                .map_err(|e| index_failure(&e))?;
            obs_out.write(match obs {
                Observation::Exact => KVEXACT_OBSERVATION_EXACT,
                Observation::Over => KVEXACT_OBSERVATION_OVER,
                Observation::Under => KVEXACT_OBSERVATION_UNDER,
                Observation::Unjudged => KVEXACT_OBSERVATION_UNJUDGED,
            });
            Ok(KVEXACT_OK)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_round_trips_through_the_c_struct() {
        let outcomes = [
            Outcome::Cached {
                tokens: 48,
                other_media_tokens: Some(16),
                proven: true,
            },
            Outcome::Cached {
                tokens: 0,
                other_media_tokens: None,
                proven: false,
            },
            Outcome::Unknown(UnknownReason::Unsynced),
            Outcome::Unknown(UnknownReason::Replaying),
            Outcome::Unknown(UnknownReason::OutOfStep),
            Outcome::Unknown(UnknownReason::Overflow),
            Outcome::Unknown(UnknownReason::LoraNotInEvents),
            Outcome::Unknown(UnknownReason::StreamLost),
        ];
        for o in outcomes {
            let p = Prediction {
                endpoint: EndpointId(3),
                rank: 1,
                outcome: o,
            };
            let c = kvexact_index_prediction::from(&p);
            assert_eq!((c.endpoint, c.rank, c.reserved), (3, 1, 0));
            assert_eq!(outcome_of(&c).unwrap(), o);
        }
        let bad = kvexact_index_prediction {
            status: 7,
            ..Default::default()
        };
        assert!(outcome_of(&bad).is_err());
        let bad = kvexact_index_prediction {
            status: KVEXACT_PREDICTION_UNKNOWN,
            unknown_reason: 0,
            ..Default::default()
        };
        assert!(outcome_of(&bad).is_err());
        assert!(request_flags(8).is_err());
        assert!(request_flags(1).is_err(), "bit 0 is no flag");
        assert_eq!(request_flags(2).unwrap(), (true, false));
        assert_eq!(request_flags(4).unwrap(), (false, true));
        assert_eq!(request_flags(6).unwrap(), (true, true));
    }
}
