//! What the prefix index holds and how its predictions fared: per-rank counters
//! (`kvexact_index_status`), the first prediction the engine contradicted
//! (`kvexact_index_prediction_drift`, the routing-level twin of `hash_drift`) and the
//! Prometheus text a gateway serves (`kvexact_index_prometheus`). For metrics and operators,
//! not for every request: each walks every endpoint under its own lock.

use kvindex::StreamState;

use crate::failure::Failure;
use crate::handle::{arc_ref, copy_out, out_param, out_slice};
use crate::index::kvexact_index;
use crate::panic::boundary;
use crate::status::{kvexact_status, KVEXACT_ERR_BUFFER_TOO_SMALL, KVEXACT_OK};

/// Where a rank's event stream stands (`kvexact_index_rank_status.stream`).
pub type kvexact_stream_state = u32;
/// Every batch since a point where the engine's cache was known has been applied.
pub const KVEXACT_STREAM_IN_STEP: kvexact_stream_state = 0;
/// No point where the engine's cache was known has been seen yet.
pub const KVEXACT_STREAM_UNSYNCED: kvexact_stream_state = 1;
/// Batches were lost and have been asked for again (replay).
pub const KVEXACT_STREAM_REPLAYING: kvexact_stream_state = 2;
/// Batches were lost and cannot be replayed (or batch 2^64 - 1 was applied: no later batch
/// can follow it in order).
pub const KVEXACT_STREAM_OUT_OF_STEP: kvexact_stream_state = 3;
/// The caller marked the stream lost (`kvexact_index_mark_lost`): unknown until the next
/// batch's sequence number shows what was lost.
pub const KVEXACT_STREAM_LOST: kvexact_stream_state = 4;

/// `kvexact_index_rank_status.endpoint` of an endpoint removed while the status was read.
pub const KVEXACT_INDEX_NO_ENDPOINT: u32 = u32::MAX;

/// One rank's inventory and counters (`kvexact_index_status`). A fixed layout (an array
/// element: no `struct_size`). Counters count from the endpoint's addition.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvexact_index_rank_status {
    /// The endpoint's id (`KVEXACT_INDEX_NO_ENDPOINT` if it was removed meanwhile).
    pub endpoint: u32,
    /// The data-parallel rank.
    pub rank: u32,
    /// `KVEXACT_STREAM_IN_STEP`, `_UNSYNCED`, `_REPLAYING`, `_OUT_OF_STEP` or `_LOST`.
    pub stream: kvexact_stream_state,
    /// 1 when the stream stored more than the engine's pool (removals lost), else 0.
    pub overflow: u32,
    /// Block copies held on the GPU.
    pub held_gpu: u64,
    /// Block copies held in every other medium together.
    pub held_other: u64,
    /// Event batches seen.
    pub batches: u64,
    /// Block copies stored.
    pub stored: u64,
    /// Block copies removed.
    pub removed: u64,
    /// Removals of blocks the rank did not hold.
    pub removed_unknown: u64,
    /// Stores whose parent block the rank did not hold (kept: the engine holds them).
    pub stored_orphan: u64,
    /// Sequence gaps found.
    pub gaps: u64,
    /// Batches refused (not decodable, or not for this geometry).
    pub rejected: u64,
    /// Times the stream stored more than the pool holds.
    pub overflows: u64,
    /// Engine restarts seen (sequence back at 0).
    pub restarts: u64,
    /// Observations judged exact.
    pub observed_exact: u64,
    /// Observations where the index predicted more than the engine had.
    pub observed_over: u64,
    /// Observations where the index predicted less than the engine had.
    pub observed_under: u64,
    /// Observations of unknown predictions.
    pub observed_unjudged: u64,
}

fn stream_code(s: &StreamState) -> kvexact_stream_state {
    match s {
        StreamState::InStep { .. } => KVEXACT_STREAM_IN_STEP,
        StreamState::Unsynced => KVEXACT_STREAM_UNSYNCED,
        StreamState::Replaying { .. } => KVEXACT_STREAM_REPLAYING,
        StreamState::OutOfStep { .. } | StreamState::Exhausted => KVEXACT_STREAM_OUT_OF_STEP,
    }
}

/// Every rank's inventory and counters, endpoints in the order they were added: writes
/// `*count` entries to `out` (capacity `cap`) and returns `KVEXACT_OK`.
/// `KVEXACT_ERR_BUFFER_TOO_SMALL`: `cap` is below the number of ranks, written to `*count`
/// with nothing else (`(NULL, 0)` asks for it); `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `index` is NULL or a live index; `out` is NULL or valid for `cap` writes; `count` is NULL
/// or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_status(
    index: *const kvexact_index,
    out: *mut kvexact_index_rank_status,
    cap: usize,
    count: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let index = unsafe { arc_ref(index, "index") }?;
        let out = unsafe { out_slice(out, cap, "out") }?;
        let count = unsafe { out_param(count, "count") }?;
        let st = index.status();
        count.write(st.len());
        let dst = out.get_mut(..st.len()).ok_or_else(|| {
            Failure::new(
                KVEXACT_ERR_BUFFER_TOO_SMALL,
                format!("buffer too small for {} rank statuses", st.len()),
            )
        })?;
        for (d, r) in dst.iter_mut().zip(&st) {
            let held_gpu = r.held.first().map_or(0, |(_, n)| *n);
            let held_other = r.held.iter().skip(1).map(|(_, n)| *n).sum();
            *d = kvexact_index_rank_status {
                endpoint: index
                    .endpoint_id(&r.endpoint)
                    .map_or(KVEXACT_INDEX_NO_ENDPOINT, |e| e.0),
                rank: r.rank,
                stream: if r.lost {
                    KVEXACT_STREAM_LOST
                } else {
                    stream_code(&r.stream)
                },
                overflow: u32::from(r.overflow),
                held_gpu,
                held_other,
                batches: r.batches,
                stored: r.stored,
                removed: r.removed,
                removed_unknown: r.removed_unknown,
                stored_orphan: r.stored_orphan,
                gaps: r.gaps,
                rejected: r.rejected,
                overflows: r.overflows,
                restarts: r.restarts,
                observed_exact: r.observed[0],
                observed_over: r.observed[1],
                observed_under: r.observed[2],
                observed_unjudged: r.observed[3],
            };
        }
        Ok(KVEXACT_OK)
    })
}

/// The first prediction the engine contradicted (`kvexact_index_observe` judged it over or
/// under), as compact UTF-8 JSON, no NUL: `{"finding":"prediction_drift","endpoint":…,
/// "rank":…,"request":…,"predicted":…,"reported":…,"release":…,"message":…}`. When no
/// prediction was contradicted, `*len` is 0 and nothing is written (`KVEXACT_OK`).
///
/// Size query and statuses as `kvexact_contracts_json`: `KVEXACT_OK` or
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` with `*len` the document's length (`(NULL, 0)` asks for
/// it), `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `index` is NULL or a live index; `buf` is NULL or valid for `cap` writes; `len` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_prediction_drift(
    index: *const kvexact_index,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let index = unsafe { arc_ref(index, "index") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let text = match index.prediction_drift() {
            None => String::new(),
            Some(d) => serde_json::json!({
                "finding": "prediction_drift",
                "endpoint": d.endpoint,
                "rank": d.rank,
                "request": d.request,
                "predicted": d.predicted,
                "reported": d.reported,
                "release": d.release_id,
                "message": d.to_string(),
            })
            .to_string(),
        };
        copy_out(text.as_bytes(), buf, len, "prediction drift")
    })
}

/// The Prometheus text exposition of every rank's gauges and counters
/// (`kvexact_index_blocks_held`, `kvexact_index_in_step`, `kvexact_index_*_total`,
/// `kvexact_index_observed_total`, `kvexact_index_table_bytes`,
/// `kvexact_index_prediction_drift`), UTF-8, no NUL. Size query and statuses as
/// `kvexact_index_prediction_drift` (the text can grow between a size query and the call:
/// retry on `KVEXACT_ERR_BUFFER_TOO_SMALL`).
///
/// # Safety
/// As `kvexact_index_prediction_drift`.
#[no_mangle]
pub unsafe extern "C" fn kvexact_index_prometheus(
    index: *const kvexact_index,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let index = unsafe { arc_ref(index, "index") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        copy_out(index.prometheus().as_bytes(), buf, len, "Prometheus text")
    })
}
