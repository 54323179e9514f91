//! The exact prefix index (`kvindex`) behind the C ABI: an index per model pool and
//! engine release, its endpoints, and the KV events fed to it (docs/architecture.md, the
//! index beside kvprobe). Predictions, the combined route-and-predict call and feedback live
//! in [`index_predict`](crate::index_predict); counters, drift and Prometheus text in
//! [`index_report`](crate::index_report).
//!
//! Endpoint ids are `uint32_t`, never reused while the index lives. Every function may be
//! called from any thread at once on one index: request threads predict while event threads
//! feed (the index takes no lock shared by all endpoints on the predict path).

use std::ffi::c_char;
use std::sync::Arc;

use kvindex::{
    Applied, Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index,
    IndexOptions,
};

use crate::contract::contract_arg;
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::events::event_failure;
use crate::failure::Failure;
use crate::handle::{
    arc_clone, arc_free, arc_into_raw, arc_ref, in_slice, in_str, out_param, versioned_in,
    versioned_out, ArcHandle,
};
use crate::panic::boundary;
use crate::status::{
    kvexact_status, KVEXACT_ERR_DUPLICATE_ENDPOINT, KVEXACT_ERR_EVENT_SCHEMA,
    KVEXACT_ERR_INVALID_ARGUMENT, KVEXACT_ERR_NOT_FOUND, KVEXACT_ERR_PREFIX_HIT_RULE,
    KVEXACT_ERR_REGISTRY, KVEXACT_ERR_UNKNOWN_ENDPOINT, KVEXACT_OK,
};

/// The exact prefix index of one model pool under one engine release: per endpoint × DP
/// rank × KV-cache group × medium, the blocks the engine holds, from its own KV events.
/// Opaque, reference-counted and safe to share between threads (predict on request threads
/// while event threads feed). Free each reference (from `kvexact_index_new` or
/// `kvexact_index_retain`) once with `kvexact_index_free`.
pub struct kvexact_index {
    _private: [u8; 0],
}

impl ArcHandle for kvexact_index {
    type Inner = Index;
}

/// The kind of a KV-cache group (`kvexact_index_group.kind`): `KVEXACT_GROUP_FULL_ATTENTION`
/// or `KVEXACT_GROUP_SLIDING_WINDOW`.
pub type kvexact_group_kind = u32;
/// A full-attention KV-cache group (a hit is a chained prefix of cached blocks).
pub const KVEXACT_GROUP_FULL_ATTENTION: kvexact_group_kind = 0;
/// A sliding-window KV-cache group (`kvexact_index_group.sliding_window` tokens); only
/// releases whose catalog rule states such groups accept it.
pub const KVEXACT_GROUP_SLIDING_WINDOW: kvexact_group_kind = 1;

/// Default `kvexact_index_options.max_slots`: 1,024 endpoint × rank slots.
pub const KVEXACT_INDEX_DEFAULT_MAX_SLOTS: u32 = 1024;
/// Largest `kvexact_index_options.max_slots`: 1,048,576.
pub const KVEXACT_INDEX_MAX_SLOTS: u32 = 1 << 20;

/// One KV-cache group of the served model, in the engine's order (vLLM `group_idx`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvexact_index_group {
    /// `KVEXACT_GROUP_FULL_ATTENTION` or `KVEXACT_GROUP_SLIDING_WINDOW`.
    pub kind: kvexact_group_kind,
    /// Tokens per block of this group (the replays prove only the hash block size).
    pub block_size: u32,
    /// Sliding-window groups: the window in tokens (vLLM `sliding_window`, >= 1); 0 for
    /// full attention.
    pub sliding_window: u32,
}

/// Options of `kvexact_index_new`. Zero-initialise it and set `struct_size` to
/// `sizeof(kvexact_index_options)`: every zero field is the default, and NULL instead of the
/// struct means all defaults. The struct only ever grows at its end.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_index_options {
    /// `sizeof(kvexact_index_options)` as the caller compiled it.
    pub struct_size: u32,
    /// The most endpoint × rank slots the index holds (a hard bound on its bookkeeping);
    /// 0 = `KVEXACT_INDEX_DEFAULT_MAX_SLOTS`, at most `KVEXACT_INDEX_MAX_SLOTS`.
    pub max_slots: u32,
    /// The served model's KV-cache groups, group 0 first (borrowed for the call); NULL with
    /// `n_groups` 0 = one full-attention group of the index's block size.
    pub groups: *const kvexact_index_group,
    /// Number of `groups` (at most 8).
    pub n_groups: usize,
}

/// One endpoint (an engine replica) for `kvexact_index_add_endpoint`. Zero-initialise it and
/// set `struct_size` to `sizeof(kvexact_index_endpoint)`; the struct only ever grows at its
/// end.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_index_endpoint {
    /// `sizeof(kvexact_index_endpoint)` as the caller compiled it.
    pub struct_size: u32,
    /// Data-parallel ranks, 1..=1024: each rank is its own cache and its own event stream.
    pub dp_ranks: u32,
    /// The name the gateway knows it by (UTF-8, unique in the index; borrowed for the call).
    pub name: *const u8,
    /// Length of `name` in bytes.
    pub name_len: usize,
    /// Per-rank blocks of the engine's GPU pool (vLLM `num_gpu_blocks - 1`, SGLang
    /// `max_total_num_tokens / page_size`, TensorRT-LLM's primary blocks), 1..=4294967295: a
    /// stream that stores more has lost removals and is `unknown` until its cache is known
    /// again.
    pub gpu_blocks: u64,
    /// Per-rank blocks in every other medium together (CPU offloading, HiCache),
    /// 0..=4294967295.
    pub other_blocks: u64,
    /// 1: LoRA adapters are loaded on the endpoint (under a release whose events do not show
    /// the adapter, its predictions are then `unknown`, reason
    /// `KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS`). 0 or 1.
    pub lora_adapters: u8,
    /// 1: the engine keeps a replay buffer the caller can ask after a gap (vLLM / SGLang
    /// `replay_endpoint`): a gap is then `KVEXACT_APPLIED_REPLAY_FROM`, else
    /// `KVEXACT_APPLIED_LOST`. 0 or 1.
    pub replay: u8,
    /// 1: the engine starts now with an empty cache (just launched or reset): the first
    /// batch of any sequence number starts the stream. 0: the stream must show its start
    /// (sequence 0, `AllBlocksCleared`, TensorRT-LLM `created`) before the endpoint is
    /// predicted. 0 or 1.
    pub starts_empty: u8,
}

/// What became of one fed batch (`kvexact_index_applied.outcome`).
pub type kvexact_applied_outcome = u32;
/// Applied: the rank is in step (or still catching up on a replay).
pub const KVEXACT_APPLIED: kvexact_applied_outcome = 0;
/// Already applied (a replay overlapping the live stream): ignored.
pub const KVEXACT_APPLIED_DUPLICATE: kvexact_applied_outcome = 1;
/// A gap before this batch: ask the engine's replay endpoint for every batch from
/// `kvexact_index_applied.replay_from` on and feed them; the rank is `unknown` until they are
/// in (or `kvexact_index_replay_failed`). Once per gap: later batches past the same gap while
/// its replay is pending are `KVEXACT_APPLIED_REPLAY_PENDING` (ask nothing more).
pub const KVEXACT_APPLIED_REPLAY_FROM: kvexact_applied_outcome = 2;
/// Batches were lost and cannot be replayed: the rank is `unknown` until the engine's cache
/// is known again (`AllBlocksCleared`, a restart).
pub const KVEXACT_APPLIED_LOST: kvexact_applied_outcome = 3;
/// A later batch past a gap whose replay is pending (`replay_from` says from where): dropped,
/// as the replay brings it; ask for nothing more. One gap gives one
/// `KVEXACT_APPLIED_REPLAY_FROM` — the first batch past it — and every later batch until
/// the replay's batches are in gives `KVEXACT_APPLIED_REPLAY_PENDING`. If the replay cannot
/// be had, call `kvexact_index_replay_failed`: the rank is then `unknown` until its cache is
/// known again, and later batches are `KVEXACT_APPLIED_LOST`.
pub const KVEXACT_APPLIED_REPLAY_PENDING: kvexact_applied_outcome = 4;

/// `kvexact_index_mark_lost`'s `rank` for every rank of the endpoint.
pub const KVEXACT_INDEX_ALL_RANKS: u32 = u32::MAX;

/// `kvexact_index_check_capacity`'s `*mismatch` bit: the GPU blocks differ.
pub const KVEXACT_CAPACITY_GPU_DIFFERS: u32 = 1;
/// `kvexact_index_check_capacity`'s `*mismatch` bit: the other-media blocks differ.
pub const KVEXACT_CAPACITY_OTHER_DIFFERS: u32 = 2;
/// `kvexact_index_check_capacity`'s `other_blocks` when the engine states none.
pub const KVEXACT_CAPACITY_NOT_STATED: u64 = u64::MAX;

/// The outcome of a feed call. Set `struct_size` to `sizeof(kvexact_index_applied)` before
/// the call; written only on success; the struct only ever grows at its end.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvexact_index_applied {
    /// `sizeof(kvexact_index_applied)` as the caller compiled it (kept as is).
    pub struct_size: u32,
    /// `KVEXACT_APPLIED`, `KVEXACT_APPLIED_DUPLICATE`, `KVEXACT_APPLIED_REPLAY_FROM`,
    /// `KVEXACT_APPLIED_LOST` or `KVEXACT_APPLIED_REPLAY_PENDING`.
    pub outcome: kvexact_applied_outcome,
    /// `KVEXACT_APPLIED`: block copies stored; else 0.
    pub stored: u64,
    /// `KVEXACT_APPLIED`: block copies removed; else 0.
    pub removed: u64,
    /// `KVEXACT_APPLIED_REPLAY_FROM` and `_REPLAY_PENDING`: the first missing sequence
    /// number; else 0.
    pub replay_from: u64,
}

impl From<Applied> for kvexact_index_applied {
    fn from(a: Applied) -> Self {
        let mut out = kvexact_index_applied::default();
        match a {
            Applied::Applied { stored, removed } => {
                out.outcome = KVEXACT_APPLIED;
                out.stored = stored;
                out.removed = removed;
            }
            Applied::Duplicate => out.outcome = KVEXACT_APPLIED_DUPLICATE,
            Applied::ReplayFrom { from } => {
                out.outcome = KVEXACT_APPLIED_REPLAY_FROM;
                out.replay_from = from;
            }
            Applied::Lost => out.outcome = KVEXACT_APPLIED_LOST,
            Applied::ReplayPending { from } => {
                out.outcome = KVEXACT_APPLIED_REPLAY_PENDING;
                out.replay_from = from;
            }
        }
        out
    }
}

/// A `kvindex` error as a failure: the code is `kvindex::Error::code`'s (`"PREFIX_HIT_RULE"`,
/// `"UNKNOWN_ENDPOINT"` …), decoding errors keep the event decoder's statuses and codes.
pub(crate) fn index_failure(e: &kvindex::Error) -> Failure {
    use kvindex::Error as E;
    let status = match e {
        E::Decode(d) => return event_failure(d),
        E::Rule(_) => KVEXACT_ERR_PREFIX_HIT_RULE,
        E::UnknownEndpoint(_) => KVEXACT_ERR_UNKNOWN_ENDPOINT,
        E::DuplicateEndpoint(_) => KVEXACT_ERR_DUPLICATE_ENDPOINT,
        E::Options(_) | E::Rank { .. } | E::Request(_) => KVEXACT_ERR_INVALID_ARGUMENT,
        E::Event(_) => KVEXACT_ERR_EVENT_SCHEMA,
        E::Catalog(_) => KVEXACT_ERR_REGISTRY,
    };
    Failure::with_code(status, e.code(), e.to_string())
}

fn flag(v: u8, name: &str) -> Result<bool, Failure> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Failure::invalid(
            name,
            format_args!("{v} is neither 0 nor 1"),
        )),
    }
}

/// The groups of a `kvexact_index_options`.
///
/// # Safety
/// `o.groups` is NULL or valid for `o.n_groups` reads.
pub(crate) unsafe fn groups_of(
    o: &kvexact_index_options,
    block_size: u32,
) -> Result<Vec<GroupSpec>, Failure> {
    let gs = unsafe { in_slice(o.groups, o.n_groups, "options.groups") }?;
    if gs.is_empty() {
        return Ok(vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size,
        }]);
    }
    if gs.len() > kvindex::MAX_GROUPS {
        return Err(Failure::invalid(
            "options.n_groups",
            format_args!("at most {} KV-cache groups", kvindex::MAX_GROUPS),
        ));
    }
    gs.iter()
        .map(|g| {
            let kind = match (g.kind, g.sliding_window) {
                (KVEXACT_GROUP_FULL_ATTENTION, 0) => GroupKind::FullAttention,
                (KVEXACT_GROUP_FULL_ATTENTION, _) => {
                    return Err(Failure::invalid(
                        "options.groups[].sliding_window",
                        "must be 0 for a full-attention group",
                    ))
                }
                (KVEXACT_GROUP_SLIDING_WINDOW, window) => GroupKind::SlidingWindow { window },
                (k, _) => {
                    return Err(Failure::invalid(
                        "options.groups[].kind",
                        format_args!("unknown group kind {k}"),
                    ))
                }
            };
            Ok(GroupSpec {
                kind,
                block_size: g.block_size,
            })
        })
        .collect()
}

/// Creates a prefix index for the endpoints of one model pool under one engine release. The
/// release is named by `contract_id` and `engine_version` exactly as for
/// `kvexact_hasher_new_for_contract` (a release id with `engine_version` NULL, or a contract
/// id with the version the engine reports); the index decodes events with the release's exact
/// schema and predicts with the release's prefix-hit rule from the contract catalog
/// (`prefixHit`: the longest chained prefix, the last prompt token never a hit, block/page
/// alignment, hybrid groups combined as the engine combines them). A release whose rule no
/// cache-hit replay proves predicts with `proven = 0`.
///
/// `block_size`: tokens per hashed block (vLLM `--block-size`, SGLang page size, TensorRT-LLM
/// tokens per block), >= 1, the block size of the request keys. `options`: NULL or a
/// `kvexact_index_options` (KV-cache groups, max slots).
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; otherwise, with an error object: the
/// release statuses of `kvexact_hasher_new_for_contract` (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
/// `KVEXACT_ERR_CONTRACT_MISMATCH`, `KVEXACT_ERR_NOT_FOUND`), `KVEXACT_ERR_PREFIX_HIT_RULE`
/// (the release has no prefix-hit rule, or the groups are outside what it states),
/// `KVEXACT_ERR_INVALID_ARGUMENT` (block size 0, bad options, a release without KV events),
/// `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not written on failure.
///
/// Ownership: the caller owns `*out` (free with `kvexact_index_free`) and `*err`; the strings
/// and options are only read during the call.
///
/// # Safety
/// `contract_id` and `engine_version` are NULL or NUL-terminated; `options` is NULL or valid
/// for its `struct_size` bytes with `groups` valid for `n_groups` reads; `out` and `err` are
/// NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_new(
    contract_id: *const c_char,
    engine_version: *const c_char,
    block_size: u32,
    options: *const kvexact_index_options,
    out: *mut *mut kvexact_index,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let opts = versioned_in(options, "options")?;
            if block_size == 0 {
                return Err(Failure::invalid("block_size", "must be at least 1"));
            }
            let (groups, max_slots) = match opts {
                None => (
                    groups_of(
                        &kvexact_index_options {
                            struct_size: 0,
                            max_slots: 0,
                            groups: std::ptr::null(),
                            n_groups: 0,
                        },
                        block_size,
                    )?,
                    0,
                ),
                Some(o) => (groups_of(&o, block_size)?, o.max_slots),
            };
            let max_slots = match max_slots {
                0 => KVEXACT_INDEX_DEFAULT_MAX_SLOTS,
                n if n > KVEXACT_INDEX_MAX_SLOTS => {
                    return Err(Failure::invalid(
                        "options.max_slots",
                        format_args!("at most {KVEXACT_INDEX_MAX_SLOTS}"),
                    ))
                }
                n => n,
            };
            let c = contract_arg(contract_id, engine_version)?;
            let schema = c.events().ok_or_else(|| {
                Failure::invalid(
                    "contract_id",
                    format_args!("{} has no KV events", c.release_id()),
                )
            })?;
            let rule = HitRule::for_release_id(c.release_id()).map_err(|e| index_failure(&e))?;
            let index = Index::new(IndexOptions {
                rule,
                schema: schema.clone(),
                block_size,
                groups,
                max_slots,
            })
            .map_err(|e| index_failure(&e))?;
            out.write(arc_into_raw(Arc::new(index)));
            Ok(KVEXACT_OK)
        })
    }
}

/// Takes another reference to `index` (each freed once with `kvexact_index_free`); returns
/// `index`, or NULL when `index` is NULL.
///
/// # Safety
/// `index` is NULL or a live index.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_retain(index: *const kvexact_index) -> *const kvexact_index {
    boundary(|| {
        let a = unsafe { arc_clone(index, "index") }?;
        Ok(Arc::into_raw(a).cast())
    })
}

/// Releases one reference to `index`; the last one frees it. NULL is ignored.
///
/// # Safety
/// `index` is NULL or a live reference, not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_free(index: *const kvexact_index) {
    boundary(|| {
        unsafe { arc_free(index) };
        Ok(())
    })
}

/// Adds an endpoint (one slot per data-parallel rank) and writes its id to `*id`.
///
/// Returns `KVEXACT_OK`, or with an error object: `KVEXACT_ERR_DUPLICATE_ENDPOINT` (the name
/// is taken), `KVEXACT_ERR_INVALID_ARGUMENT` (`dp_ranks` outside 1..=1024, `gpu_blocks` 0,
/// `gpu_blocks` or `other_blocks` above 4294967295,
/// a flag other than 0/1, the name not UTF-8, `struct_size` too small, no free slots left
/// under `max_slots`: code `"INVALID_OPTIONS"`), `KVEXACT_ERR_NULL_ARGUMENT`. `*id` is written
/// only on success.
///
/// # Safety
/// `index` is NULL or a live index; `endpoint` is NULL or valid for its `struct_size` bytes
/// with `name` valid for `name_len` bytes; `id` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_add_endpoint(
    index: *const kvexact_index,
    endpoint: *const kvexact_index_endpoint,
    id: *mut u32,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let id = out_param(id, "id")?;
            let e = versioned_in(endpoint, "endpoint")?.ok_or_else(|| Failure::null("endpoint"))?;
            let name = in_str(e.name, e.name_len, "endpoint.name")?;
            let config = EndpointConfig {
                name: name.to_string(),
                dp_ranks: e.dp_ranks,
                capacity: Capacity {
                    gpu_blocks: e.gpu_blocks,
                    other_blocks: e.other_blocks,
                },
                lora_adapters: flag(e.lora_adapters, "endpoint.lora_adapters")?,
                replay: flag(e.replay, "endpoint.replay")?,
                starts_empty: flag(e.starts_empty, "endpoint.starts_empty")?,
            };
            let new = index.add_endpoint(config).map_err(|e| index_failure(&e))?;
            id.write(new.0);
            Ok(KVEXACT_OK)
        })
    }
}

/// Removes endpoint `id` and everything it held. Returns `KVEXACT_OK`,
/// `KVEXACT_ERR_UNKNOWN_ENDPOINT` or `KVEXACT_ERR_NULL_ARGUMENT` (with an error object).
///
/// # Safety
/// `index` is NULL or a live index; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_remove_endpoint(
    index: *const kvexact_index,
    id: u32,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            index
                .remove_endpoint(EndpointId(id))
                .map_err(|e| index_failure(&e))?;
            Ok(KVEXACT_OK)
        })
    }
}

/// Endpoint `id` restarted (a new identity, an empty cache): drops what it held and starts
/// each rank's stream afresh, in step from its next batch. Statuses as
/// `kvexact_index_remove_endpoint`.
///
/// # Safety
/// As `kvexact_index_remove_endpoint`.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_reset_endpoint(
    index: *const kvexact_index,
    id: u32,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            index
                .reset_endpoint(EndpointId(id))
                .map_err(|e| index_failure(&e))?;
            Ok(KVEXACT_OK)
        })
    }
}

/// The caller could not get the replay `KVEXACT_APPLIED_REPLAY_FROM` asked for (the
/// engine's buffer no longer reaches back): rank `rank` of endpoint `id` stays `unknown`
/// until its cache is known again. Returns `KVEXACT_OK`, `KVEXACT_ERR_UNKNOWN_ENDPOINT`,
/// `KVEXACT_ERR_INVALID_ARGUMENT` (code `"UNKNOWN_RANK"`) or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// As `kvexact_index_remove_endpoint`.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_replay_failed(
    index: *const kvexact_index,
    id: u32,
    rank: u32,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            index
                .replay_failed(EndpointId(id), rank)
                .map_err(|e| index_failure(&e))?;
            Ok(KVEXACT_OK)
        })
    }
}

/// The caller says the event stream of rank `rank` of endpoint `id` (every rank:
/// `KVEXACT_INDEX_ALL_RANKS`) was lost — its subscription died or reconnected, its queue
/// dropped batches — so batches may have gone by unseen. Its predictions are `unknown`
/// (`KVEXACT_UNKNOWN_STREAM_LOST`) from this call on, not from a later batch; the next batch
/// fed decides by its sequence number: the next one (nothing lost: in step again), a gap
/// (`KVEXACT_APPLIED_REPLAY_FROM`, or `KVEXACT_APPLIED_LOST` without replay) or a restart.
/// A rank that has seen no batch yet waits for the engine's start (sequence 0, an emptied
/// cache). A TensorRT-LLM endpoint is decided by its next drained event id. Returns
/// `KVEXACT_OK`, `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT` (code
/// `"UNKNOWN_RANK"`) or `KVEXACT_ERR_NULL_ARGUMENT`, with an error object.
///
/// # Safety
/// As `kvexact_index_remove_endpoint`.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_mark_lost(
    index: *const kvexact_index,
    id: u32,
    rank: u32,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let rank = (rank != KVEXACT_INDEX_ALL_RANKS).then_some(rank);
            index
                .mark_lost(EndpointId(id), rank)
                .map_err(|e| index_failure(&e))?;
            Ok(KVEXACT_OK)
        })
    }
}

/// Checks endpoint `id`'s declared capacity (`kvexact_index_endpoint.gpu_blocks`,
/// `.other_blocks`) against what its engine states, per rank in the index's blocks: vLLM's
/// `num_gpu_blocks` less its null block (`vllm:cache_config_info`), SGLang's
/// `max_total_num_tokens / page_size` (server info), TensorRT-LLM's
/// `num_blocks_per_cache_level` (its `created` event). `other_blocks`
/// `KVEXACT_CAPACITY_NOT_STATED` is not compared. Writes to `*mismatch` 0 when they agree,
/// else the `KVEXACT_CAPACITY_*_DIFFERS` bits that differ (the `capacity_mismatch`
/// finding): the declared figure stays the bound — re-add the endpoint with the engine's
/// figure. Returns `KVEXACT_OK`, `KVEXACT_ERR_UNKNOWN_ENDPOINT` or
/// `KVEXACT_ERR_NULL_ARGUMENT` (with an error object); `*mismatch` is written only on
/// success.
///
/// # Safety
/// `index` is NULL or a live index; `mismatch` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_check_capacity(
    index: *const kvexact_index,
    id: u32,
    gpu_blocks: u64,
    other_blocks: u64,
    mismatch: *mut u32,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let mismatch = out_param(mismatch, "mismatch")?;
            let other = (other_blocks != KVEXACT_CAPACITY_NOT_STATED).then_some(other_blocks);
            let found = index
                .check_capacity(EndpointId(id), gpu_blocks, other)
                .map_err(|e| index_failure(&e))?;
            let bits = found.map_or(0, |m| {
                let mut b = 0;
                if m.declared.gpu_blocks != m.stated_gpu_blocks {
                    b |= KVEXACT_CAPACITY_GPU_DIFFERS;
                }
                if m.stated_other_blocks
                    .is_some_and(|o| o != m.declared.other_blocks)
                {
                    b |= KVEXACT_CAPACITY_OTHER_DIFFERS;
                }
                b
            });
            mismatch.write(bits);
            Ok(KVEXACT_OK)
        })
    }
}

/// The id of the endpoint named `name` (UTF-8, `len` bytes) in `*id`. Returns `KVEXACT_OK`,
/// `KVEXACT_ERR_NOT_FOUND` (no such endpoint), `KVEXACT_ERR_INVALID_ARGUMENT` (not UTF-8) or
/// `KVEXACT_ERR_NULL_ARGUMENT`; `*id` is written only on success.
///
/// # Safety
/// `index` is NULL or a live index; `name` is NULL or valid for `len` bytes; `id` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_endpoint_id(
    index: *const kvexact_index,
    name: *const u8,
    len: usize,
    id: *mut u32,
) -> kvexact_status {
    boundary(|| {
        let index = unsafe { arc_ref(index, "index") }?;
        let name = unsafe { in_str(name, len, "name") }?;
        let id = unsafe { out_param(id, "id") }?;
        let found = index.endpoint_id(name).ok_or_else(|| {
            Failure::new(
                KVEXACT_ERR_NOT_FOUND,
                format!("no endpoint {name:?} in the index"),
            )
        })?;
        id.write(found.0);
        Ok(KVEXACT_OK)
    })
}

/// Writes a feed's outcome (after the work: `applied` is checked first).
fn applied_out(
    applied: *mut kvexact_index_applied,
    outcome: Result<Applied, kvindex::Error>,
) -> Result<kvexact_status, Failure> {
    let a = outcome.map_err(|e| index_failure(&e))?;
    unsafe { versioned_out(applied, "applied", a.into()) }?;
    Ok(KVEXACT_OK)
}

/// Checks the `applied` out-struct before any work, so that a bad one changes nothing.
///
/// # Safety
/// `applied` is NULL or valid for reads of its first 4 bytes.
unsafe fn check_applied(applied: *mut kvexact_index_applied) -> Result<(), Failure> {
    if applied.is_null() {
        return Err(Failure::null("applied"));
    }
    if !applied.is_aligned() {
        return Err(Failure::invalid("applied", "pointer is not aligned"));
    }
    let size = unsafe { applied.cast::<u32>().read() } as usize;
    if size < std::mem::size_of::<kvexact_index_applied>() {
        return Err(Failure::invalid(
            "applied",
            "struct_size is too small: set struct_size = sizeof(kvexact_index_applied)",
        ));
    }
    Ok(())
}

/// Feeds one ZMQ multipart message of endpoint `id`'s rank `rank` — the three frames
/// `[topic, seq, payload]` as received (vLLM / SGLang publishers) — decoded with the index
/// release's exact event schema and applied whole, with the engine's semantics (duplicate
/// stores counted per copy, `AllBlocksCleared`, stores with an unknown parent, removals of
/// unknown blocks) and stream health (sequence gaps, replays, restarts). The outcome goes to
/// `*applied` (`struct_size` set by the caller).
///
/// Returns `KVEXACT_OK`; otherwise, with an error object: `KVEXACT_ERR_EVENT_SCHEMA` /
/// `KVEXACT_ERR_EVENT_DECODE` (the frames do not decode: the batch is lost, and the rank is
/// `unknown` until its cache is known again — a rejected batch is counted), code
/// `"EVENT_REJECTED"` under `KVEXACT_ERR_EVENT_SCHEMA` (a KV-cache group or medium the index
/// was not configured for), `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT`
/// (`"UNKNOWN_RANK"`; `applied.struct_size` too small), `KVEXACT_ERR_NULL_ARGUMENT`.
/// `*applied` is written only on success.
///
/// # Safety
/// `index` is NULL or a live index; each frame pointer is NULL or valid for its length;
/// `applied` is NULL or valid for its `struct_size` bytes; `err` is NULL or valid for one
/// write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_index_feed_frames(
    index: *const kvexact_index,
    id: u32,
    rank: u32,
    topic: *const u8,
    topic_len: usize,
    seq: *const u8,
    seq_len: usize,
    payload: *const u8,
    payload_len: usize,
    applied: *mut kvexact_index_applied,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let topic = in_slice(topic, topic_len, "topic")?;
            let seq = in_slice(seq, seq_len, "seq")?;
            let payload = in_slice(payload, payload_len, "payload")?;
            check_applied(applied)?;
            applied_out(
                applied,
                index.apply_frames(EndpointId(id), rank, &[topic, seq, payload]),
            )
        })
    }
}

/// `kvexact_index_feed_frames` for a payload whose sequence number is given apart (a replay
/// reply's `(seq, payload)`, or a subscriber that split the frames itself). Statuses as
/// `kvexact_index_feed_frames`.
///
/// # Safety
/// As `kvexact_index_feed_frames`.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_feed_payload(
    index: *const kvexact_index,
    id: u32,
    rank: u32,
    seq: u64,
    payload: *const u8,
    payload_len: usize,
    applied: *mut kvexact_index_applied,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let payload = in_slice(payload, payload_len, "payload")?;
            check_applied(applied)?;
            applied_out(
                applied,
                index.apply_payload(EndpointId(id), rank, seq, payload),
            )
        })
    }
}

/// Feeds one drained TensorRT-LLM `/kv_cache_events` body (JSON, `len` bytes) of endpoint
/// `id`: each event goes to the rank its `attention_dp_rank` names (0 when absent); event ids
/// must follow each other (a gap — another reader drained them — leaves every rank `unknown`
/// until the engine's next `created`: `KVEXACT_APPLIED_LOST`). Statuses as
/// `kvexact_index_feed_frames`.
///
/// # Safety
/// As `kvexact_index_feed_frames`.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_feed_json(
    index: *const kvexact_index,
    id: u32,
    body: *const u8,
    len: usize,
    applied: *mut kvexact_index_applied,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_ref(index, "index")?;
            let body = in_slice(body, len, "body")?;
            check_applied(applied)?;
            applied_out(applied, index.apply_json(EndpointId(id), body))
        })
    }
}
