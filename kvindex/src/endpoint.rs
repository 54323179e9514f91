//! Per-endpoint bookkeeping: each data-parallel rank's stream state, held-block counts per
//! medium and counters. Written under the endpoint's mutex; the prediction path reads only
//! the per-rank status and version atomics.

use crate::config::EndpointConfig;
use crate::prediction::UnknownReason;
use crate::stream::StreamState;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// An endpoint's handle in one index (never reused while the index lives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(pub u32);

/// The most storage media an index tells apart (GPU included).
pub const MAX_MEDIA: usize = 8;

/// Status codes in [`Endpoint::status`]: 0 = in step; otherwise an [`UnknownReason`].
pub(crate) fn status_code(state: &StreamState, overflow: bool) -> u8 {
    if overflow {
        return 4;
    }
    match state {
        StreamState::InStep { .. } => 0,
        StreamState::Unsynced => 1,
        StreamState::Replaying { .. } => 2,
        StreamState::OutOfStep { .. } => 3,
    }
}

pub(crate) fn status_reason(code: u8) -> Option<UnknownReason> {
    match code {
        0 => None,
        1 => Some(UnknownReason::Unsynced),
        2 => Some(UnknownReason::Replaying),
        4 => Some(UnknownReason::Overflow),
        _ => Some(UnknownReason::OutOfStep),
    }
}

/// Counters of one rank (monotonic).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub batches: AtomicU64,
    pub stored: AtomicU64,
    pub removed: AtomicU64,
    pub removed_unknown: AtomicU64,
    pub stored_orphan: AtomicU64,
    pub cleared: AtomicU64,
    pub restarts: AtomicU64,
    pub gaps: AtomicU64,
    pub duplicates: AtomicU64,
    pub rejected: AtomicU64,
    pub overflows: AtomicU64,
    pub observed_exact: AtomicU64,
    pub observed_over: AtomicU64,
    pub observed_under: AtomicU64,
    pub observed_unjudged: AtomicU64,
}

impl Counters {
    pub fn bump(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// What the mutex guards for one rank.
#[derive(Debug, Clone)]
pub(crate) struct RankState {
    pub stream: StreamState,
    /// Copies held per medium index.
    pub held: [u64; MAX_MEDIA],
    /// The stream stored more than the pool holds; cleared by the cache becoming known.
    pub overflow: bool,
}

/// One endpoint.
pub(crate) struct Endpoint {
    pub id: EndpointId,
    pub config: EndpointConfig,
    /// Slot of rank 0; rank `r` is `first_slot + r`.
    pub first_slot: u32,
    /// Seqlock per rank: odd while the rank's state is being changed.
    pub versions: Box<[AtomicU64]>,
    /// Per rank: 0 in step, else the unknown reason's code.
    pub status: Box<[AtomicU8]>,
    pub counters: Box<[Counters]>,
    pub inner: Mutex<Vec<RankState>>,
    /// TensorRT-LLM: the next drained event id (one drain per endpoint); `None` before the
    /// first event when the endpoint starts empty.
    pub trt_next_event: Mutex<Option<u64>>,
}

impl Endpoint {
    pub fn new(id: EndpointId, config: EndpointConfig, first_slot: u32) -> Self {
        let ranks = config.dp_ranks as usize;
        let start = if config.starts_empty {
            StreamState::InStep { next: None }
        } else {
            StreamState::Unsynced
        };
        let code = status_code(&start, false);
        Endpoint {
            id,
            first_slot,
            versions: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
            status: (0..ranks).map(|_| AtomicU8::new(code)).collect(),
            counters: (0..ranks).map(|_| Counters::default()).collect(),
            inner: Mutex::new(vec![
                RankState {
                    stream: start,
                    held: [0; MAX_MEDIA],
                    overflow: false,
                };
                ranks
            ]),
            trt_next_event: Mutex::new(None),
            config,
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Vec<RankState>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes a rank's status after a change made under the lock.
    pub fn publish(&self, rank: usize, st: &RankState) {
        self.status[rank].store(status_code(&st.stream, st.overflow), Ordering::Release);
    }

    /// Marks the start of a change to `rank` (seqlock odd).
    pub fn begin(&self, rank: usize) {
        self.versions[rank].fetch_add(1, Ordering::AcqRel);
    }

    /// Marks the end of a change to `rank` (seqlock even).
    pub fn end(&self, rank: usize) {
        self.versions[rank].fetch_add(1, Ordering::Release);
    }
}
