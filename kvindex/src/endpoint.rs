//! Per-endpoint bookkeeping: each data-parallel rank's stream state, held-block counts per
//! medium and counters. Written under the endpoint's mutex; the prediction path reads only
//! the per-rank status and version atomics, the in-step bitset and the index-wide counts of
//! changes begun and ended.

use crate::config::EndpointConfig;
use crate::id::EndpointId;
use crate::prediction::UnknownReason;
use crate::stream::StreamState;
use crate::Error;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The most storage media an index tells apart (GPU included).
pub const MAX_MEDIA: usize = 8;

/// Status codes ([`Endpoint::code`]): 0 = in step; otherwise an [`UnknownReason`].
pub(crate) fn status_code(state: &StreamState, overflow: bool, lost: bool) -> u8 {
    if overflow {
        return 4;
    }
    if lost {
        return 5;
    }
    match state {
        StreamState::InStep { .. } => 0,
        StreamState::Unsynced => 1,
        StreamState::Replaying { .. } => 2,
        StreamState::OutOfStep { .. } | StreamState::Exhausted => 3,
    }
}

pub(crate) fn status_reason(code: u8) -> Option<UnknownReason> {
    match code {
        0 => None,
        1 => Some(UnknownReason::Unsynced),
        2 => Some(UnknownReason::Replaying),
        4 => Some(UnknownReason::Overflow),
        5 => Some(UnknownReason::StreamLost),
        _ => Some(UnknownReason::OutOfStep),
    }
}

/// Counters of one rank (monotonic). The `observed_*` counters are bumped by any thread
/// ([`Counters::bump`]); every other one only under the endpoint's lock
/// ([`Counters::bump_locked`]).
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

    /// [`Counters::bump`] for a counter written only under its endpoint's lock, which the
    /// caller holds: a load and a store (a locked add costs about 20 cycles on the writers'
    /// path, a batch's counters are three of them), readers still load it whole.
    #[inline]
    pub fn bump_locked(c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
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
    /// The caller said the stream was lost ([`crate::Index::mark_lost`]): unknown until the
    /// next batch's number tells what was lost, or the cache is known again.
    pub lost: bool,
}

/// The slots' shared state, one table for the whole index.
///
/// * `words`: one word per slot (the prediction reads every slot's word in a row): a seqlock
///   version (bits 8.., odd while the rank's state is being changed) and the rank's status code
///   (bits 0..8: 0 in step, else the unknown reason's code).
/// * `in_step`: a bit per slot, set while its status code is 0 (published with the word).
/// * `began` / `ended`: changes to any rank begun and ended, index-wide. A prediction that
///   reads them equal before its walk and `began` unchanged after it saw no change at all, so
///   it may take every rank's status from `in_step` and skip the per-slot version checks.
pub(crate) struct SlotTable {
    pub words: Box<[AtomicU64]>,
    pub in_step: Box<[AtomicU64]>,
    pub began: AtomicU64,
    pub ended: AtomicU64,
}

impl SlotTable {
    pub fn new(slots: usize) -> Self {
        SlotTable {
            words: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            in_step: (0..slots.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            began: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    /// Sets slot `slot`'s in-step bit from its status code (no write when it already says so:
    /// nearly every batch leaves it as it was, and readers load it without ordering).
    fn set_in_step(&self, slot: usize, code: u8) {
        let bit = 1u64 << (slot % 64);
        let now = self.in_step[slot / 64].load(Ordering::Relaxed) & bit != 0;
        if now == (code == 0) {
            return;
        }
        if code == 0 {
            self.in_step[slot / 64].fetch_or(bit, Ordering::AcqRel);
        } else {
            self.in_step[slot / 64].fetch_and(!bit, Ordering::AcqRel);
        }
    }
}

/// The index's slot table, shared with its endpoints.
pub(crate) type SlotWords = Arc<SlotTable>;

/// The version in a slot word.
#[inline]
pub(crate) fn word_version(word: u64) -> u64 {
    word >> 8
}

/// The status code in a slot word.
#[inline]
pub(crate) fn word_code(word: u64) -> u8 {
    word as u8
}

/// What the prediction needs of an endpoint, kept in a row with the others.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EpView {
    pub id: EndpointId,
    pub first_slot: u32,
    pub ranks: u32,
    pub lora_adapters: bool,
}

/// The endpoint list one prediction reads: the endpoints and their views, in the order they
/// were added (dereferences to the endpoints).
#[derive(Default)]
pub(crate) struct Endpoints {
    pub list: Vec<Arc<Endpoint>>,
    pub views: Vec<EpView>,
    /// The endpoints' slots (bitset), and those of endpoints with adapters loaded.
    pub slots: Vec<u64>,
    pub lora_slots: Vec<u64>,
    /// Per slot, the index of its endpoint in `views` (`u32::MAX`: no endpoint here).
    pub view_of: Vec<u32>,
    /// The endpoints' slots increase in `views` order (no slot reused out of order since the
    /// endpoints were added): a walk over the slot bitset meets the ranks in output order.
    pub in_slot_order: bool,
    /// Every rank's place in the output is its slot (slots `0..n` all taken, in output
    /// order): a full answer's entry is found without [`Endpoints::out_of`].
    pub slot_is_place: bool,
    /// One prediction per rank in output order, each "nothing cached" (the index's
    /// [`crate::Index::nothing_cached`]): a full answer starts as a copy of it and only the
    /// ranks that differ are written.
    pub blank: Vec<crate::Prediction>,
    /// Per slot, its rank's place in the output (`u32::MAX`: no endpoint here).
    pub out_of: Vec<u32>,
    /// Per slot, its rank's entry of `blank` (one load where a sparse answer lists the rank;
    /// a slot without an endpoint has a placeholder never read).
    pub by_slot: Vec<crate::Prediction>,
}

impl Endpoints {
    /// The list for `list`, in that order; `nothing` is the index's "nothing cached" outcome.
    pub fn new(list: Vec<Arc<Endpoint>>, nothing: crate::Outcome) -> Self {
        let views: Vec<EpView> = list
            .iter()
            .map(|e| EpView {
                id: e.id,
                first_slot: e.first_slot,
                ranks: e.config.dp_ranks,
                lora_adapters: e.config.lora_adapters,
            })
            .collect();
        let end = views
            .iter()
            .map(|v| (v.first_slot + v.ranks) as usize)
            .max()
            .unwrap_or(0);
        let mut slots = vec![0u64; end.div_ceil(64)];
        let mut lora_slots = vec![0u64; end.div_ceil(64)];
        let mut view_of = vec![u32::MAX; end];
        for (i, v) in views.iter().enumerate() {
            for slot in v.first_slot as usize..(v.first_slot + v.ranks) as usize {
                slots[slot / 64] |= 1 << (slot % 64);
                if v.lora_adapters {
                    lora_slots[slot / 64] |= 1 << (slot % 64);
                }
                view_of[slot] = i as u32;
            }
        }
        let in_slot_order = views.windows(2).all(|w| w[0].first_slot < w[1].first_slot);
        let mut blank = Vec::new();
        let mut out_of = vec![u32::MAX; end];
        let placeholder = crate::Prediction {
            endpoint: EndpointId(u32::MAX),
            rank: 0,
            outcome: nothing,
        };
        let mut by_slot = vec![placeholder; end];
        for v in &views {
            for r in 0..v.ranks {
                let slot = (v.first_slot + r) as usize;
                out_of[slot] = blank.len() as u32;
                let p = crate::Prediction {
                    endpoint: v.id,
                    rank: r,
                    outcome: nothing,
                };
                by_slot[slot] = p;
                blank.push(p);
            }
        }
        let slot_is_place = out_of
            .iter()
            .enumerate()
            .all(|(slot, &at)| at as usize == slot);
        Endpoints {
            list,
            views,
            slots,
            lora_slots,
            view_of,
            in_slot_order,
            slot_is_place,
            blank,
            out_of,
            by_slot,
        }
    }
}

impl std::ops::Deref for Endpoints {
    type Target = [Arc<Endpoint>];
    fn deref(&self) -> &[Arc<Endpoint>] {
        &self.list
    }
}

/// One endpoint.
pub(crate) struct Endpoint {
    pub id: EndpointId,
    pub config: EndpointConfig,
    /// Slot of rank 0; rank `r` is `first_slot + r`.
    pub first_slot: u32,
    /// The index's slot words (this endpoint's are `first_slot..first_slot + dp_ranks`).
    words: SlotWords,
    pub counters: Box<[Counters]>,
    pub inner: Mutex<Vec<RankState>>,
    /// TensorRT-LLM: the next drained event id (one drain per endpoint); `None` before the
    /// first event when the endpoint starts empty.
    pub trt_next_event: Mutex<Option<u64>>,
    /// Removed from the index (set under the lock, before its slots are cleared and freed):
    /// a writer that found the endpoint before its removal and takes the lock after it
    /// changes nothing ([`Endpoint::lock_live`]), since its slots may be another endpoint's by
    /// then.
    retired: AtomicBool,
}

impl Endpoint {
    pub fn new(id: EndpointId, config: EndpointConfig, first_slot: u32, words: SlotWords) -> Self {
        let ranks = config.dp_ranks as usize;
        let start = if config.starts_empty {
            StreamState::InStep { next: None }
        } else {
            StreamState::Unsynced
        };
        let code = status_code(&start, false, false);
        for slot in first_slot as usize..first_slot as usize + ranks {
            // A new version (a slot reused from a removed endpoint reads as changed) and the
            // starting status.
            let w = &words.words[slot];
            let cur = w.load(Ordering::Acquire);
            w.store(
                (cur & !0xff).wrapping_add(2 << 8) | u64::from(code),
                Ordering::Release,
            );
            words.set_in_step(slot, code);
        }
        Endpoint {
            id,
            first_slot,
            words,
            counters: (0..ranks).map(|_| Counters::default()).collect(),
            inner: Mutex::new(vec![
                RankState {
                    stream: start,
                    held: [0; MAX_MEDIA],
                    overflow: false,
                    lost: false,
                };
                ranks
            ]),
            trt_next_event: Mutex::new(None),
            retired: AtomicBool::new(false),
            config,
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Vec<RankState>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock of an endpoint still in the index, for a change of its ranks;
    /// [`Error::UnknownEndpoint`] once it was removed (its slots are not its own any more).
    pub fn lock_live(&self) -> Result<std::sync::MutexGuard<'_, Vec<RankState>>, Error> {
        let g = self.lock();
        if self.retired.load(Ordering::Relaxed) {
            return Err(Error::UnknownEndpoint(self.id.0));
        }
        Ok(g)
    }

    /// Whether the endpoint was removed; the caller holds its lock (`_held`).
    pub fn is_retired(&self, _held: &std::sync::MutexGuard<'_, Vec<RankState>>) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Marks the endpoint removed; the caller holds its lock (`_held`).
    pub fn retire(&self, _held: &std::sync::MutexGuard<'_, Vec<RankState>>) {
        self.retired.store(true, Ordering::Relaxed);
    }

    #[inline]
    fn word(&self, rank: usize) -> &AtomicU64 {
        &self.words.words[self.first_slot as usize + rank]
    }

    /// A rank's status code.
    pub fn code(&self, rank: usize) -> u8 {
        word_code(self.word(rank).load(Ordering::Acquire))
    }

    /// Publishes a rank's status after a change made under the lock (only the lock's
    /// holder writes the rank's word).
    pub fn publish(&self, rank: usize, st: &RankState) {
        let w = self.word(rank);
        let cur = w.load(Ordering::Acquire);
        let code = status_code(&st.stream, st.overflow, st.lost);
        w.store((cur & !0xff) | u64::from(code), Ordering::Release);
        self.words
            .set_in_step(self.first_slot as usize + rank, code);
    }

    /// Marks the start of a change to `rank` (seqlock odd; one more change begun index-wide).
    /// The caller holds the endpoint's lock: only its holder writes the rank's word, so its
    /// version moves by a load and a store (the index-wide count, which every endpoint's
    /// writers move, by a locked add).
    pub fn begin(&self, rank: usize) {
        self.words.began.fetch_add(1, Ordering::AcqRel);
        let w = self.word(rank);
        w.store(
            w.load(Ordering::Relaxed).wrapping_add(1 << 8),
            Ordering::Relaxed,
        );
        // The change's writes come after both counts (a reader that sees one of them sees the
        // counts moved).
        fence(Ordering::Release);
    }

    /// Marks the end of a change to `rank` (seqlock even; one more change ended index-wide);
    /// the caller holds the endpoint's lock, as for [`Endpoint::begin`].
    pub fn end(&self, rank: usize) {
        let w = self.word(rank);
        w.store(
            w.load(Ordering::Relaxed).wrapping_add(1 << 8),
            Ordering::Release,
        );
        self.words.ended.fetch_add(1, Ordering::Release);
    }
}
