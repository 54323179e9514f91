//! The gateway's hot path in one call: `kvexact_route_keys` parses, refuses (or
//! lifts), renders, tokenizes and hashes a chat request, writing the ids and the block hashes
//! straight into the caller's buffers; `kvexact_route_keys_batch` does it for many bodies;
//! the caches of encoders (segments) and hashers (prefix chains) report their counters
//! (`kvexact_encoder_cache_stats`, `kvexact_hasher_cache_stats`) and can be emptied.
//!
//! Results are exactly those of the separate calls: `kvexact_encode_chat` with the same
//! `max_ids`, then `kvexact_block_hashes_u64` of the ids it wrote with `full_blocks_only = 1`
//! and the same `max_blocks` (`ffi/tests/route_keys.rs` proves it by proptest,
//! `fuzz/fuzz_targets/route_keys.rs` by fuzzing).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::deployment::{request_keys_failure, request_keys_refusal};
use crate::encoder::{chat_ids, kvexact_encoder};
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{arc_ref, in_slice, out_param, out_slice, versioned_out};
use crate::hasher::{kvexact_hasher, Hasher};
use crate::panic::boundary;
use crate::refusal::{kvexact_refusal, KVEXACT_REFUSAL_CACHE_SALT, KVEXACT_REFUSAL_NONE};
use crate::status::{kvexact_status, KVEXACT_ERR_PANIC, KVEXACT_ERR_UNSUPPORTED, KVEXACT_OK};
use kvtemplate::Refusal;

/// Counters of one cache (`kvexact_encoder_cache_stats`: the encoder's segment and prompt
/// caches, summed;
/// `kvexact_hasher_cache_stats`: the hasher's prefix-chain cache). Set `struct_size` to
/// `sizeof(kvexact_cache_stats)` before the call; the struct only ever grows at its end.
/// Counters count from the cache's creation (`*_cache_clear` keeps them).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvexact_cache_stats {
    /// `sizeof(kvexact_cache_stats)` as the caller compiled it (kept as is).
    pub struct_size: u32,
    /// 1 when the handle has a cache, 0 when it has none (every other field is then 0).
    pub enabled: u32,
    /// Encoder: segments (text between added tokens) whose ids were found — in the segment
    /// cache (segments of at least 64 bytes) or taken over with a recent prompt's ids (every
    /// segment before the cut). Prefix cache: blocks whose hash was reused.
    pub hits: u64,
    /// Segment cache: segments encoded and inserted. Prefix cache: blocks hashed (SGLang and
    /// TensorRT-LLM blocks, which are never cached, count here too).
    pub misses: u64,
    /// Entries dropped to stay within capacity (segment cache: a full shard is emptied;
    /// prompt cache: the oldest prompts of a set; prefix cache: CLOCK eviction of one block
    /// entry).
    pub evictions: u64,
    /// Bytes held now (encoder: text, ids and bookkeeping of both caches, as their capacities
    /// count them; prefix cache: an estimate of the tables' and recent requests' heap bytes).
    pub bytes: u64,
    /// Entries held now (segments and prompts; block entries).
    pub entries: u64,
    /// The capacity: bytes (the encoder's two caches together: `segment_cache_bytes`, half
    /// each) or block entries (prefix cache).
    pub capacity: u64,
}

fn u64_of(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// One request: encode `body` into `ids`, hash the ids written into `hashes`; the counts, and
/// whether the prompt had more ids than `ids` holds (the rest cut).
pub(crate) fn route_one(
    enc: &crate::encoder::EncoderInner,
    h: &Hasher,
    body: &[u8],
    now_unix_ms: i64,
    ids: &mut [u32],
    hashes: &mut [u64],
    refusal: &mut kvexact_refusal,
) -> Result<(usize, usize, bool), Failure> {
    // A deployment's hasher keys the body's salt and adapter; they are read and checked
    // before anything is written, so a request without keys leaves the buffers alone.
    let keyed = match h.deployment() {
        Some(dep) => {
            let keys = dep.body_keys(body).map_err(|e| key_failure(&e, refusal))?;
            if keys.cache_salt.is_none() && keys.adapter.is_none() {
                None
            } else {
                Some(
                    dep.request_hasher(keys.as_keys())
                        .map_err(|e| key_failure(&e, refusal))?,
                )
            }
        }
        None => {
            let sglang = matches!(h.block_hasher(), kvhash::BlockHasher::Sglang(_));
            let lifted_salt = enc.encoder.lifted().contains(Refusal::CacheSalt);
            // One read of the body's top level, only where a check needs it.
            let top = if sglang || lifted_salt {
                kvtemplate::json::RawObject::parse(body).ok().flatten()
            } else {
                None
            };
            if let Some(top) = &top {
                // SGLang keys its radix cache by a request's own `extra_key` and by the
                // adapter `lora_path` selects: a plain hasher holds neither, so the prediction
                // from its keys would be a hit the engine does not have.
                let field = ["extra_key", "lora_path"]
                    .into_iter()
                    .find(|k| sglang && top.present(k));
                if let Some(field) = field {
                    return Err(Failure::with_code(
                        KVEXACT_ERR_UNSUPPORTED,
                        "ENGINE_CACHE_KEY",
                        format!(
                            "{field}: SGLang keys its radix cache by it, and this hasher does \
                             not (a deployment's hasher keys a declared adapter's lora_path; \
                             no hasher keys a request's own extra_key)"
                        ),
                    ));
                }
                if lifted_salt && top.present("cache_salt") {
                    // The encoder lets the salt through, but this hasher cannot key it:
                    // hashing the request unsalted would give keys no engine holds.
                    *refusal = KVEXACT_REFUSAL_CACHE_SALT;
                    return Err(Failure::with_code(
                        KVEXACT_ERR_UNSUPPORTED,
                        "cache_salt",
                        "cache_salt is lifted, but the hasher is not a deployment's \
                         (kvexact_hasher_new_for_deployment): the salt cannot be keyed",
                    ));
                }
            }
            None
        }
    };
    let (n, truncated) = chat_ids(enc, body, now_unix_ms, ids, refusal)?;
    let written = ids.get(..n).unwrap_or(&[]);
    let blocks = match &keyed {
        None => h.hash_u64(written, true, hashes)?,
        Some(k) => h.hash_u64_with(k, written, hashes)?,
    };
    Ok((n, blocks, truncated))
}

/// A request-keys failure on the gateway's path, with its refusal (`cache_salt` for a salt).
fn key_failure(
    e: &kvprobe::deployment::RequestKeysError,
    refusal: &mut kvexact_refusal,
) -> Failure {
    if let Some(r) = request_keys_refusal(e) {
        *refusal = r;
    }
    request_keys_failure(e)
}

/// The gateway's hot path in one call: the strict refusal scan of the raw chat request
/// `body` (or the lifted path, for an encoder with lifted codes), the render at `now_unix_ms`
/// (UTC), tokenization into `ids_out` (at most `max_ids` ids, the rest cut as
/// `kvexact_encode_chat` cuts them), then the block hashes of the ids written into
/// `hashes_out` (full blocks only, at most `max_blocks`: the routing keys an engine can
/// hold). Neither the body nor the ids are copied on the way: the body is parsed in place,
/// the ids are written once into `ids_out` and hashed from there. With the encoder's segment
/// cache, the segments of earlier turns are found instead of re-encoded; with the hasher's
/// prefix-chain cache, the chain resumes after the longest prefix already hashed.
///
/// Exactly what `kvexact_encode_chat(encoder, body, len, now_unix_ms, ids_out, max_ids,
/// refusal_out)` followed by `kvexact_block_hashes_u64(hasher, ids_out, n, 1, hashes_out,
/// max_blocks)` give, id for id and hash for hash, whatever the caches hold.
///
/// On success returns `KVEXACT_OK`, with the counts in `*n_ids` and `*n_blocks`. Otherwise a
/// negative status as `kvexact_encode_chat` (`KVEXACT_ERR_UNSUPPORTED` with the refusal in
/// `*refusal_out`, `KVEXACT_ERR_REQUEST`, `KVEXACT_ERR_RENDERER`, `KVEXACT_ERR_TOKENIZER`)
/// or `kvexact_block_hashes_u64` (`KVEXACT_ERR_INVALID_ARGUMENT` for a pickle-serialised
/// block that does not fit a frame), `KVEXACT_ERR_NULL_ARGUMENT` (`encoder`, `hasher`,
/// `n_ids` or `n_blocks` NULL, a NULL buffer with a non-zero capacity), with an error object
/// in `*err` when `err` is not NULL. `*n_ids` and `*n_blocks` are written only on success;
/// `hashes_out` too, and `ids_out` too except after a hashing failure (which only the pickle
/// algorithms can have, once the ids are known: then `ids_out` holds them).
///
/// `refusal_out` may be NULL; when not NULL it is always written, as by
/// `kvexact_encode_chat`.
///
/// Request fields that key the engine's cache are read before anything is written: with a
/// deployment's hasher (`kvexact_hasher_new_for_deployment`) the body's `cache_salt` and
/// adapter are keyed (`kvexact_block_hashes_keyed`'s failures otherwise); with any other
/// hasher a lifted `cache_salt` is `KVEXACT_ERR_UNSUPPORTED` (refusal `cache_salt`), and for
/// SGLang a non-null `extra_key` or `lora_path` is `KVEXACT_ERR_UNSUPPORTED` (code
/// `"ENGINE_CACHE_KEY"`, refusal none): SGLang keys its radix cache by them, so hashing the
/// prompt alone would predict hits the engine does not have.
///
/// Thread safety: any number of threads may call it at once on one encoder and one hasher.
///
/// Ownership: every buffer is borrowed for the call; the caller owns `*err`.
///
/// # Safety
/// `encoder` and `hasher` are NULL or live handles; `body` is valid for `len` bytes;
/// `ids_out` for `max_ids` writes and `hashes_out` for `max_blocks` writes (not aliasing each
/// other); `n_ids`, `n_blocks`, `refusal_out` and `err` are NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_route_keys(
    encoder: *const kvexact_encoder,
    hasher: *const kvexact_hasher,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    ids_out: *mut u32,
    max_ids: usize,
    hashes_out: *mut u64,
    max_blocks: usize,
    n_ids: *mut usize,
    n_blocks: *mut usize,
    refusal_out: *mut kvexact_refusal,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let r = unsafe {
        boundary_err(err, || {
            let enc = arc_ref(encoder, "encoder")?;
            let h = arc_ref(hasher, "hasher")?;
            let body = in_slice(body, len, "body")?;
            let ids = out_slice(ids_out, max_ids, "ids_out")?;
            let hashes = out_slice(hashes_out, max_blocks, "hashes_out")?;
            let n_ids = out_param(n_ids, "n_ids")?;
            let n_blocks = out_param(n_blocks, "n_blocks")?;
            let (ni, nb, _) = route_one(enc, h, body, now_unix_ms, ids, hashes, &mut refusal)?;
            n_ids.write(ni);
            n_blocks.write(nb);
            Ok(KVEXACT_OK)
        })
    };
    if !refusal_out.is_null() {
        // SAFETY: the caller guarantees validity when not NULL.
        unsafe { refusal_out.write(refusal) };
    }
    r
}

/// One request of `kvexact_route_keys_batch`: a chat body (`len` bytes, borrowed for the
/// call) and the instant to render it at.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_route_request {
    /// The raw chat request body (NULL only with `len` 0).
    pub body: *const u8,
    /// Its length in bytes.
    pub len: usize,
    /// The render instant, Unix milliseconds (UTC), as `kvexact_route_keys`' `now_unix_ms`.
    pub now_unix_ms: i64,
}

/// The outcome of one request of `kvexact_route_keys_batch`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvexact_route_result {
    /// What `kvexact_route_keys` returns for this request (`KVEXACT_OK` or a negative status;
    /// `KVEXACT_ERR_PANIC` if this request hit an internal error, which affects no other).
    pub status: kvexact_status,
    /// The refusal, as `kvexact_route_keys` writes it (`KVEXACT_REFUSAL_NONE` unless the
    /// status is `KVEXACT_ERR_UNSUPPORTED`).
    pub refusal: kvexact_refusal,
    /// Ids written at the start of this request's id slot (0 unless the status is OK).
    pub n_ids: usize,
    /// Hashes written at the start of this request's hash slot (0 unless the status is OK).
    pub n_blocks: usize,
}

/// `kvexact_route_keys` for `n` requests in one call (a burst), one after the other on the
/// calling thread, with caller-owned buffers in fixed slots:
///
/// * request `i`'s ids go to `ids_out + i * max_ids` (at most `max_ids` of them), its hashes
///   to `hashes_out + i * max_blocks` (at most `max_blocks`), so `ids_out` holds
///   `n * max_ids` ids and `hashes_out` `n * max_blocks` hashes;
/// * `results[i]` receives request `i`'s status, refusal and counts; a request's result is
///   exactly what `kvexact_route_keys` with the same arguments gives (one request's failure
///   affects no other), and the slots of a request that failed hold unspecified values.
///
/// Returns `KVEXACT_OK` when the arguments are valid (whatever each request's outcome: read
/// `results`), or, with nothing written anywhere, `KVEXACT_ERR_NULL_ARGUMENT` (a NULL handle,
/// `requests` or `results` NULL with `n > 0`, a NULL buffer with a non-zero size) or
/// `KVEXACT_ERR_INVALID_ARGUMENT` (`n * max_ids` or `n * max_blocks` overflows), with an error
/// object in `*err` when `err` is not NULL.
///
/// Ownership: `requests`, their bodies and every buffer are borrowed for the call; the caller
/// owns `*err`.
///
/// # Safety
/// `encoder` and `hasher` are NULL or live handles; `requests` is NULL or valid for `n` reads,
/// each body valid for its `len` bytes; `results` is NULL or valid for `n` writes; `ids_out`
/// is NULL or valid for `n * max_ids` writes and `hashes_out` for `n * max_blocks` writes;
/// `err` is NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_route_keys_batch(
    encoder: *const kvexact_encoder,
    hasher: *const kvexact_hasher,
    requests: *const kvexact_route_request,
    n: usize,
    ids_out: *mut u32,
    max_ids: usize,
    hashes_out: *mut u64,
    max_blocks: usize,
    results: *mut kvexact_route_result,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let enc = arc_ref(encoder, "encoder")?;
            let h = arc_ref(hasher, "hasher")?;
            let requests = in_slice(requests, n, "requests")?;
            let total_ids = n
                .checked_mul(max_ids)
                .ok_or_else(|| Failure::invalid("max_ids", "n * max_ids overflows"))?;
            let total_blocks = n
                .checked_mul(max_blocks)
                .ok_or_else(|| Failure::invalid("max_blocks", "n * max_blocks overflows"))?;
            let ids = out_slice(ids_out, total_ids, "ids_out")?;
            let hashes = out_slice(hashes_out, total_blocks, "hashes_out")?;
            let results = out_slice(results, n, "results")?;
            // Every body is checked before anything is written.
            let bodies = requests
                .iter()
                .map(|r| in_slice(r.body, r.len, "requests[].body"))
                .collect::<Result<Vec<&[u8]>, Failure>>()?;
            let mut id_slots = ids.chunks_mut(max_ids.max(1));
            let mut hash_slots = hashes.chunks_mut(max_blocks.max(1));
            for ((req, body), res) in requests.iter().zip(bodies).zip(results.iter_mut()) {
                let id_slot = if max_ids == 0 {
                    &mut [][..]
                } else {
                    id_slots.next().unwrap_or(&mut [])
                };
                let hash_slot = if max_blocks == 0 {
                    &mut [][..]
                } else {
                    hash_slots.next().unwrap_or(&mut [])
                };
                let mut refusal = KVEXACT_REFUSAL_NONE;
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    route_one(
                        enc,
                        h,
                        body,
                        req.now_unix_ms,
                        id_slot,
                        hash_slot,
                        &mut refusal,
                    )
                }));
                *res = match outcome {
                    Ok(Ok((ni, nb, _))) => kvexact_route_result {
                        status: KVEXACT_OK,
                        refusal,
                        n_ids: ni,
                        n_blocks: nb,
                    },
                    Ok(Err(f)) => kvexact_route_result {
                        status: f.status,
                        refusal,
                        n_ids: 0,
                        n_blocks: 0,
                    },
                    Err(_) => kvexact_route_result {
                        status: KVEXACT_ERR_PANIC,
                        refusal: KVEXACT_REFUSAL_NONE,
                        n_ids: 0,
                        n_blocks: 0,
                    },
                };
            }
            Ok(KVEXACT_OK)
        })
    }
}

/// The counters of `encoder`'s segment, prompt and render caches, summed (the render cache's
/// hits are renders that reused a conversation's earlier render; zero with `enabled = 0`
/// when it has none, e.g. built with `KVEXACT_OPTION_NO_CACHE`) written to `*stats`, whose
/// `struct_size` the caller sets. Returns `KVEXACT_OK`, `KVEXACT_ERR_NULL_ARGUMENT` or
/// `KVEXACT_ERR_INVALID_ARGUMENT` (`struct_size` too small); `*stats` is written only on
/// success. Locks each of the caches' 16 shards and 16 sets (and the render cache) in turn: for
/// metrics, not for every request.
///
/// # Safety
/// `encoder` is NULL or a live encoder; `stats` is NULL or valid for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_cache_stats(
    encoder: *const kvexact_encoder,
    stats: *mut kvexact_cache_stats,
) -> kvexact_status {
    boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let mut out = kvexact_cache_stats::default();
        let tok = enc.encoder.tokenizer().ok();
        if let Some(c) = tok.and_then(|t| t.segment_cache()) {
            let st = c.stats();
            out = kvexact_cache_stats {
                struct_size: 0,
                enabled: 1,
                hits: st.hits,
                misses: st.misses,
                evictions: st.evicted,
                bytes: u64_of(c.bytes_held()),
                entries: u64_of(c.len()),
                capacity: u64_of(c.capacity_bytes()),
            };
        }
        if let Some(p) = tok.and_then(|t| t.prompt_cache()) {
            let st = p.stats();
            out.enabled = 1;
            out.hits = out.hits.saturating_add(st.pieces_reused);
            out.evictions = out.evictions.saturating_add(st.evicted);
            out.bytes = out.bytes.saturating_add(u64_of(p.bytes_held()));
            out.entries = out.entries.saturating_add(u64_of(p.len()));
            out.capacity = out.capacity.saturating_add(u64_of(p.capacity_bytes()));
        }
        if let Some(r) = enc.encoder.render_cache_stats().filter(|r| r.capacity > 0) {
            out.enabled = 1;
            out.hits = out.hits.saturating_add(r.hits);
            out.misses = out.misses.saturating_add(r.misses);
            out.bytes = out.bytes.saturating_add(r.bytes);
            out.entries = out.entries.saturating_add(r.entries);
            out.capacity = out.capacity.saturating_add(r.capacity);
        }
        unsafe { versioned_out(stats, "stats", out) }?;
        Ok(KVEXACT_OK)
    })
}

/// The counters of `hasher`'s prefix-chain cache (shared with every hasher made with
/// `share_cache_with` pointing at it, or at a hasher sharing it), as
/// `kvexact_encoder_cache_stats`.
///
/// # Safety
/// `hasher` is NULL or a live hasher; `stats` is NULL or valid for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_cache_stats(
    hasher: *const kvexact_hasher,
    stats: *mut kvexact_cache_stats,
) -> kvexact_status {
    boundary(|| {
        let h = unsafe { arc_ref(hasher, "hasher") }?;
        let mut out = kvexact_cache_stats::default();
        if let Some(c) = h.prefix_cache() {
            let st = c.stats();
            out = kvexact_cache_stats {
                struct_size: 0,
                enabled: 1,
                hits: st.reused,
                misses: st.hashed,
                evictions: st.evicted,
                bytes: u64_of(c.bytes_held()),
                entries: u64_of(c.len()),
                capacity: u64_of(c.capacity()),
            };
        }
        unsafe { versioned_out(stats, "stats", out) }?;
        Ok(KVEXACT_OK)
    })
}

/// Empties `encoder`'s segment, prompt and render caches (the counters are kept; nothing changes in
/// any result). A no-op for an encoder without them. Returns `KVEXACT_OK` or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `encoder` is NULL or a live encoder.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_cache_clear(
    encoder: *const kvexact_encoder,
) -> kvexact_status {
    boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let tok = enc.encoder.tokenizer().ok();
        if let Some(c) = tok.and_then(|t| t.segment_cache()) {
            c.clear();
        }
        if let Some(p) = tok.and_then(|t| t.prompt_cache()) {
            p.clear();
        }
        enc.encoder.clear_render_cache();
        Ok(KVEXACT_OK)
    })
}

/// Empties `hasher`'s prefix-chain cache — for every hasher sharing it — keeping the
/// counters. A no-op for a hasher without one. Returns `KVEXACT_OK` or
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `hasher` is NULL or a live hasher.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_cache_clear(
    hasher: *const kvexact_hasher,
) -> kvexact_status {
    boundary(|| {
        if let Some(c) = unsafe { arc_ref(hasher, "hasher") }?.prefix_cache() {
            c.clear();
        }
        Ok(KVEXACT_OK)
    })
}
