//! Applying an engine's KV events to the index, with the engine's own semantics:
//! every stored copy counted (vLLM stores one hash in two physical blocks and removes them
//! one by one), removals of blocks the index never saw counted and ignored, stores whose
//! parent is unknown kept (the engine holds them), `AllBlocksCleared` / TensorRT-LLM
//! `created` emptying the rank, and a batch applied whole or not at all.

use crate::endpoint::{Counters, Endpoint, RankState, MAX_MEDIA};
use crate::locator::Loc;
use crate::runs::Session;
use crate::stream::{Step, StreamState};
use crate::table::{Key, Medium};
use crate::{Error, Index};
use kvhash::events::{self, EventBatch, EventKind, Limits};

/// What became of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Applied; the rank is in step (or still catching up on a replay).
    Applied {
        /// Block copies stored.
        stored: u64,
        /// Block copies removed.
        removed: u64,
    },
    /// Already applied (a replay overlapping the live stream).
    Duplicate,
    /// A gap before this batch: ask the engine's replay endpoint for every batch from
    /// `from` on and feed them here; the rank is `unknown` until they are in.
    ReplayFrom {
        /// The first missing sequence number.
        from: u64,
    },
    /// A later batch past the same gap while the replay asked for is pending: dropped (the
    /// replay brings it), and nothing more to ask for. One gap gives one
    /// [`Applied::ReplayFrom`]; every later batch until the replay is in (or
    /// [`Index::replay_failed`]) gives this.
    ReplayPending {
        /// The first sequence number still missing.
        from: u64,
    },
    /// Batches were lost and cannot be replayed: the rank is `unknown` until the engine's
    /// cache is known again (`AllBlocksCleared`, a restart).
    Lost,
}

/// Bytes a feed call holds per block of its batch (one op each; one more per stored event and
/// per clear) beside the decoded batch, which the decoder's budget bounds
/// (`kvhash::events::Limits::max_decoded_bytes`, 64 MiB; a decoded block hash takes 24 of
/// it): the memory a feed call may use beyond that budget is at most this much per block
/// (32 bytes on 64-bit targets: ≤ 4/3 of the decoded bytes, ≤ 86 MiB at the default
/// budget), allocated once per batch; a thread keeps at most 64 Ki ops (2 MiB) between
/// batches.
pub const FEED_BYTES_PER_BLOCK: usize = std::mem::size_of::<Op>();

/// Ops a thread keeps allocated between batches (a larger buffer is dropped after its batch).
const MAX_KEPT_OPS: usize = 1 << 16;

thread_local! {
    static OPS: std::cell::Cell<Vec<Op>> = const { std::cell::Cell::new(Vec::new()) };
}

/// One event reduced to what the index keeps ([`FEED_BYTES_PER_BLOCK`] bytes).
enum Op {
    /// A stored block and its chain parent (the block before it in its event, or the
    /// event's parent).
    Store(Key, Option<u64>),
    /// A store's parent: counted when the rank does not hold it.
    Parent(Key),
    Remove(Key),
    /// TensorRT-LLM `removed`: the block leaves whichever medium holds it.
    RemoveAnyMedium(u64, u8),
    Clear,
}

impl Index {
    /// Decodes a ZMQ multipart message `[topic, seq, payload]` of `endpoint`'s rank `rank`
    /// under the index's event schema and applies it. A batch that does not decode is
    /// refused and leaves the rank out of step (a lost batch).
    pub fn apply_frames(
        &self,
        endpoint: crate::EndpointId,
        rank: u32,
        frames: &[&[u8]],
    ) -> Result<Applied, Error> {
        let ep = self.endpoint(endpoint)?;
        let r = self.rank_index(&ep, rank)?;
        match events::decode_frames_schema(&self.opts.schema, frames, &Limits::default()) {
            Ok(batch) => self.apply_batch_to(&ep, r, &batch),
            Err(e) => {
                self.reject(&ep, r);
                Err(Error::Decode(e))
            }
        }
    }

    /// [`Index::apply_frames`] for a payload with its sequence number given apart (a replay
    /// reply's `(seq, payload)`, or a caller that split the frames itself).
    pub fn apply_payload(
        &self,
        endpoint: crate::EndpointId,
        rank: u32,
        seq: u64,
        payload: &[u8],
    ) -> Result<Applied, Error> {
        let ep = self.endpoint(endpoint)?;
        let r = self.rank_index(&ep, rank)?;
        match events::decode_payload_schema(&self.opts.schema, payload, &Limits::default()) {
            Ok(mut batch) => {
                batch.seq = Some(seq);
                self.apply_batch_to(&ep, r, &batch)
            }
            Err(e) => {
                self.reject(&ep, r);
                Err(Error::Decode(e))
            }
        }
    }

    /// Applies an already decoded batch (a caller that decodes once for several consumers,
    /// such as `kvexact watch`). Its `seq` must be set (ZMQ formats).
    pub fn apply_batch(
        &self,
        endpoint: crate::EndpointId,
        rank: u32,
        batch: &EventBatch<'_>,
    ) -> Result<Applied, Error> {
        let ep = self.endpoint(endpoint)?;
        let r = self.rank_index(&ep, rank)?;
        self.apply_batch_to(&ep, r, batch)
    }

    /// Decodes one drained TensorRT-LLM `/kv_cache_events` body and applies it; each event
    /// goes to the rank its `attention_dp_rank` names (0 when absent). Event ids must
    /// follow each other: a gap (another reader drained them) leaves every rank `unknown`
    /// until the engine's next `created`.
    pub fn apply_json(&self, endpoint: crate::EndpointId, body: &[u8]) -> Result<Applied, Error> {
        let ep = self.endpoint(endpoint)?;
        let batch = match events::decode_json(self.opts.schema.format(), body) {
            Ok(b) => b,
            Err(e) => {
                for r in 0..ep.config.dp_ranks as usize {
                    self.reject(&ep, r);
                }
                return Err(Error::Decode(e));
            }
        };
        self.apply_trt(&ep, &batch)
    }

    /// Applies an already decoded TensorRT-LLM drain body ([`Index::apply_json`] without the
    /// decoding).
    pub fn apply_trtllm_batch(
        &self,
        endpoint: crate::EndpointId,
        batch: &EventBatch<'_>,
    ) -> Result<Applied, Error> {
        let ep = self.endpoint(endpoint)?;
        self.apply_trt(&ep, batch)
    }

    fn reject(&self, ep: &Endpoint, r: usize) {
        // An endpoint removed meanwhile has nothing left to mark.
        let Ok(mut g) = ep.lock_live() else {
            return;
        };
        Counters::bump_locked(&ep.counters[r].rejected, 1);
        ep.begin(r);
        let st = &mut g[r];
        st.stream = match st.stream {
            StreamState::InStep { next: Some(n) } => StreamState::OutOfStep { lost_from: n },
            StreamState::Replaying { next, .. } => StreamState::OutOfStep { lost_from: next },
            StreamState::OutOfStep { lost_from } => StreamState::OutOfStep { lost_from },
            StreamState::Exhausted => StreamState::Exhausted,
            _ => StreamState::OutOfStep { lost_from: 0 },
        };
        ep.publish(r, st);
        ep.end(r);
    }

    /// The medium a store or removal names (the GPU when it names none).
    #[inline]
    fn medium_of(&self, name: Option<&str>) -> Result<Medium, Error> {
        match name {
            None | Some("GPU") => Ok(0),
            Some(n) => self.other_medium(n),
        }
    }

    /// A medium other than the GPU, registered on first sight.
    fn other_medium(&self, name: &str) -> Result<Medium, Error> {
        if let Some(i) = self
            .media
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .position(|m| m == name)
        {
            return Ok(i as Medium);
        }
        let mut m = self.media.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = m.iter().position(|x| x == name) {
            return Ok(i as Medium);
        }
        if m.len() >= MAX_MEDIA || name.len() > 64 {
            return Err(Error::Event(format!(
                "medium {name:?}: the index tells {MAX_MEDIA} media apart"
            )));
        }
        m.push(name.to_string());
        self.media_count
            .store(m.len() as u8, std::sync::atomic::Ordering::Release);
        Ok((m.len() - 1) as Medium)
    }

    fn group_of(
        &self,
        idx: Option<u32>,
        kind: Option<&str>,
        block_size: Option<u32>,
    ) -> Result<u8, Error> {
        let g = idx.unwrap_or(0) as usize;
        let spec = self.opts.groups.get(g).ok_or_else(|| {
            Error::Event(format!(
                "KV-cache group {g}: the index has {} group(s)",
                self.opts.groups.len()
            ))
        })?;
        if let Some(k) = kind {
            if k != spec.kind.as_str() {
                return Err(Error::Event(format!(
                    "group {g} is {k}, the index has {}",
                    spec.kind.as_str()
                )));
            }
        }
        if let Some(bs) = block_size {
            if bs != spec.block_size {
                return Err(Error::Event(format!(
                    "group {g} publishes block size {bs}, the index has {}",
                    spec.block_size
                )));
            }
        }
        Ok(g as u8)
    }

    /// The ops of a ZMQ batch, or why it cannot be applied (nothing applied then).
    fn ops(&self, batch: &EventBatch<'_>, ops: &mut Vec<Op>) -> Result<(), Error> {
        ops.clear();
        // Room for every op at once (one per block, one per stored event's parent, one per
        // clear): grown by doubling, a batch of N blocks held up to 3 × N ops while its
        // buffer moved (a 2 M-block batch peaked at 123 MB with its decoded batch).
        let n: usize = batch
            .events
            .iter()
            .map(|e| match &e.kind {
                EventKind::BlockStored(s) => s.block_hashes.len() + 1,
                EventKind::BlockRemoved(s) => s.block_hashes.len(),
                _ => 1,
            })
            .fold(0usize, usize::saturating_add);
        ops.reserve_exact(n);
        for e in &batch.events {
            match &e.kind {
                EventKind::BlockStored(s) => {
                    let g = self.group_of(s.group_idx, s.kv_cache_spec_kind, Some(s.block_size))?;
                    let m = self.medium_of(s.medium)?;
                    let mut parent = s.parent_block_hash.map(|p| p.to_u64());
                    if let Some(p) = parent {
                        ops.push(Op::Parent(Key {
                            hash: p,
                            group: g,
                            medium: m,
                        }));
                    }
                    for h in &s.block_hashes {
                        let hash = h.to_u64();
                        ops.push(Op::Store(
                            Key {
                                hash,
                                group: g,
                                medium: m,
                            },
                            parent,
                        ));
                        parent = Some(hash);
                    }
                }
                EventKind::BlockRemoved(s) => {
                    let g = self.group_of(s.group_idx, None, None)?;
                    let m = self.medium_of(s.medium)?;
                    ops.extend(s.block_hashes.iter().map(|h| {
                        Op::Remove(Key {
                            hash: h.to_u64(),
                            group: g,
                            medium: m,
                        })
                    }));
                }
                EventKind::AllBlocksCleared | EventKind::Created(_) => ops.push(Op::Clear),
                EventKind::Stored(_) | EventKind::Updated(_) => {
                    return Err(Error::Event("a TensorRT-LLM event in a ZMQ batch".into()))
                }
            }
        }
        Ok(())
    }

    fn apply_batch_to(
        &self,
        ep: &Endpoint,
        r: usize,
        batch: &EventBatch<'_>,
    ) -> Result<Applied, Error> {
        // The ops buffer is the thread's, reused batch after batch (taken out while in use).
        let mut ops = OPS.with(|o| o.take());
        let out = self.apply_ops_to(ep, r, batch, &mut ops);
        ops.clear();
        if ops.capacity() <= MAX_KEPT_OPS {
            OPS.with(|o| o.replace(ops));
        }
        out
    }

    fn apply_ops_to(
        &self,
        ep: &Endpoint,
        r: usize,
        batch: &EventBatch<'_>,
        ops: &mut Vec<Op>,
    ) -> Result<Applied, Error> {
        let Some(seq) = batch.seq else {
            return Err(Error::Event(
                "a ZMQ batch without its sequence number".into(),
            ));
        };
        if let Some(br) = batch.rank {
            if br as usize != r {
                return Err(Error::Rank {
                    rank: br,
                    ranks: ep.config.dp_ranks,
                });
            }
        }
        if let Err(e) = self.ops(batch, ops) {
            self.reject(ep, r);
            return Err(e);
        }
        let ops = &ops[..];
        let mut g = ep.lock_live()?;
        let mut w = self.runs.session();
        let st = &mut g[r];
        let step = st.stream.step(seq, ep.config.replay);
        let c = &ep.counters[r];
        let out = match step {
            Step::Duplicate => {
                Counters::bump_locked(&c.duplicates, 1);
                return Ok(Applied::Duplicate);
            }
            _ => {
                // Past a stream marked lost ([`Index::mark_lost`]), the batch's number tells
                // what was lost: nothing (the next number: in step again), a gap (replayed or
                // lost) or everything before a restart.
                st.lost = false;
                self.after_step(&mut w, ep, r, st, seq, step, ops)
            }
        };
        Counters::bump_locked(&c.batches, 1);
        ep.publish(r, st);
        ep.end(r);
        Ok(out)
    }

    /// Applies one batch's step (not a duplicate) to rank `r`, after `ep.begin(r)` is due.
    #[allow(clippy::too_many_arguments)]
    fn after_step(
        &self,
        w: &mut Session<'_>,
        ep: &Endpoint,
        r: usize,
        st: &mut RankState,
        seq: u64,
        step: Step,
        ops: &[Op],
    ) -> Applied {
        let c = &ep.counters[r];
        match step {
            Step::Duplicate => Applied::Duplicate,
            Step::Apply | Step::Restart => {
                ep.begin(r);
                if step == Step::Restart {
                    Counters::bump_locked(&c.restarts, 1);
                    self.clear_rank(w, ep, r, st);
                }
                let (stored, removed) = self.run_ops(w, ep, r, st, ops);
                // A restart starts the stream over: a replay pending for the old one is moot.
                st.stream = if step == Step::Restart {
                    StreamState::known_after(seq)
                } else {
                    st.stream.applied(seq)
                };
                Applied::Applied { stored, removed }
            }
            Step::ReplayFrom { from } => {
                ep.begin(r);
                Counters::bump_locked(&c.gaps, 1);
                st.stream = st.stream.after_gap(seq, step);
                Applied::ReplayFrom { from }
            }
            Step::ReplayPending { from } => {
                ep.begin(r);
                st.stream = st.stream.after_gap(seq, step);
                Applied::ReplayPending { from }
            }
            Step::Lost => {
                ep.begin(r);
                // A batch that empties the cache makes it known again from there on.
                match ops.iter().rposition(|o| matches!(o, Op::Clear)) {
                    Some(i) => {
                        let (stored, removed) = self.run_ops(w, ep, r, st, &ops[i..]);
                        st.stream = StreamState::known_after(seq);
                        Applied::Applied { stored, removed }
                    }
                    None => {
                        if st.stream.in_step() {
                            Counters::bump_locked(&c.gaps, 1);
                        }
                        st.stream = st.stream.after_gap(seq, step);
                        Applied::Lost
                    }
                }
            }
        }
    }

    /// Whether a key sits in the chains.
    #[inline]
    pub(crate) fn in_chains(&self, k: &Key) -> bool {
        self.chains && k.group == 0 && k.medium == 0
    }

    /// One more copy of `k` in `slot`: in the table, or for a chain key in the chains (a copy
    /// past the slot's first in the extra-copies map); returns a chain key's place (`last`:
    /// the place of the block just stored or named, to chain the next one on without a
    /// probe).
    fn add_key(
        &self,
        w: &mut Session<'_>,
        k: Key,
        parent: Option<u64>,
        last: Option<(u64, Loc)>,
        slot: u32,
    ) -> Option<(u64, Loc)> {
        if !self.in_chains(&k) {
            self.table.add(k, slot);
            return None;
        }
        let parent_loc = parent.and_then(|p| match last {
            Some((h, l)) if h == p => Some(l),
            _ => self.runs.place(w, p),
        });
        // The chains hold a chain key's holders (no table entry).
        let c = self.runs.store(w, k.hash, slot, parent, parent_loc);
        if self.twin {
            let a = self.table.add(k, slot);
            debug_assert_eq!(
                (a.new_key, a.first_for_slot),
                (c.new_key, c.first),
                "key {:#x}, slot {slot}: the twin table and the chains disagree",
                k.hash
            );
        }
        let loc = c.loc;
        Some((k.hash, loc))
    }

    /// One copy fewer of `k` in `slot`, from the table or the chains; false when it held none.
    fn remove_key(&self, w: &mut Session<'_>, k: Key, slot: u32) -> bool {
        if !self.in_chains(&k) {
            return self.table.remove(k, slot).is_some();
        }
        let Some(c) = self.runs.remove(w, k.hash, slot) else {
            return false;
        };
        if self.twin {
            let r = self.table.remove(k, slot);
            debug_assert_eq!(
                r.map(|r| (r.last_for_slot, r.key_gone)),
                Some((c.first, c.gone)),
                "key {:#x}, slot {slot}: the twin table and the chains disagree",
                k.hash
            );
        }
        true
    }

    /// Runs ops on one rank (under its lock and the writers' mutex, inside begin/end).
    fn run_ops(
        &self,
        w: &mut Session<'_>,
        ep: &Endpoint,
        r: usize,
        st: &mut RankState,
        ops: &[Op],
    ) -> (u64, u64) {
        let slot = ep.first_slot + r as u32;
        let c = &ep.counters[r];
        let (mut stored, mut removed) = (0u64, 0u64);
        let mut last: Option<(u64, Loc)> = None;
        // Every chain key's places entry asked for first, so that the probes' cache misses
        // overlap instead of each op waiting for its own (a wide index's array is past a
        // core's cache). A key kept in the table (another group or medium) is asked for too:
        // a hint with no effect, cheaper than telling the keys apart here (measured).
        if self.chains {
            let keys = ops.iter().filter_map(|op| match op {
                Op::Store(k, _) | Op::Remove(k) | Op::Parent(k) => Some(k.hash),
                Op::RemoveAnyMedium(..) | Op::Clear => None,
            });
            self.runs.prefetch(w, keys);
        }
        for op in ops {
            match *op {
                Op::Clear => {
                    Counters::bump_locked(&c.cleared, 1);
                    self.clear_rank(w, ep, r, st);
                    st.stream = StreamState::InStep { next: None };
                    last = None;
                }
                _ if st.overflow => {}
                Op::Parent(k) => {
                    let (holds, place) = if self.in_chains(&k) {
                        let h = self.runs.holding(w, k.hash, slot);
                        (h.is_some_and(|h| h.holds), h.map(|h| (k.hash, h.loc)))
                    } else {
                        (self.table.holds(&k, slot), None)
                    };
                    if !holds {
                        Counters::bump_locked(&c.stored_orphan, 1);
                    }
                    last = place;
                }
                Op::Store(k, parent) => {
                    let m = usize::from(k.medium);
                    let cap = if m == 0 {
                        ep.config.capacity.gpu_blocks
                    } else {
                        ep.config.capacity.other_blocks
                    };
                    let held: u64 = if m == 0 {
                        st.held[0]
                    } else {
                        st.held[1..].iter().sum()
                    };
                    if held >= cap {
                        // More than the engine's pool holds: removals were lost. Nothing the
                        // rank holds can be trusted; drop it all (the memory bound) and say
                        // unknown until the cache is known again.
                        Counters::bump_locked(&c.overflows, 1);
                        self.clear_rank(w, ep, r, st);
                        st.overflow = true;
                        continue;
                    }
                    last = self.add_key(w, k, parent, last, slot);
                    st.held[m] += 1;
                    stored += 1;
                }
                Op::Remove(k) => {
                    last = None;
                    if self.remove_key(w, k, slot) {
                        st.held[usize::from(k.medium)] -= 1;
                        removed += 1;
                    } else {
                        Counters::bump_locked(&c.removed_unknown, 1);
                    }
                }
                Op::RemoveAnyMedium(h, g) => {
                    last = None;
                    let hit = (0..MAX_MEDIA as u8).find(|&m| {
                        self.remove_key(
                            w,
                            Key {
                                hash: h,
                                group: g,
                                medium: m,
                            },
                            slot,
                        )
                    });
                    match hit {
                        Some(m) => {
                            st.held[usize::from(m)] -= 1;
                            removed += 1;
                        }
                        None => Counters::bump_locked(&c.removed_unknown, 1),
                    }
                }
            }
        }
        Counters::bump_locked(&c.stored, stored);
        Counters::bump_locked(&c.removed, removed);
        // Readers wait for the shard the ops last changed no longer than the ops took.
        w.release();
        (stored, removed)
    }

    fn apply_trt(&self, ep: &Endpoint, batch: &EventBatch<'_>) -> Result<Applied, Error> {
        let ranks = ep.config.dp_ranks as usize;
        // Per event: its rank and ops, all validated before anything is applied.
        let mut per: Vec<(u64, usize, Vec<Op>)> = Vec::with_capacity(batch.events.len());
        let host = self.medium_of(Some("trtllm-secondary"))?;
        for e in &batch.events {
            let env = e
                .envelope
                .ok_or_else(|| Error::Event("a TensorRT-LLM event without its envelope".into()))?;
            let rank = env.attention_dp_rank.unwrap_or(0) as usize;
            if rank >= ranks {
                return Err(Error::Rank {
                    rank: rank as u32,
                    ranks: ranks as u32,
                });
            }
            let level = |l: Option<i64>| match l {
                None | Some(0) => Ok(0),
                Some(1) => Ok(host),
                Some(x) => Err(Error::Event(format!("cache level {x}"))),
            };
            let g = 0u8;
            let mut ops = Vec::new();
            match &e.kind {
                EventKind::Created(_) => ops.push(Op::Clear),
                EventKind::Stored(s) => {
                    let mut parent = s.parent_hash;
                    for b in &s.blocks {
                        ops.push(Op::Store(
                            Key {
                                hash: b.block_hash,
                                group: g,
                                medium: level(b.cache_level)?,
                            },
                            parent,
                        ));
                        parent = Some(b.block_hash);
                    }
                }
                EventKind::BlockRemoved(s) => {
                    ops.extend(
                        s.block_hashes
                            .iter()
                            .map(|h| Op::RemoveAnyMedium(h.to_u64(), g)),
                    );
                }
                EventKind::Updated(u) => {
                    if let Some(d) = u.cache_level {
                        let (old, new) = (level(Some(d.old_value))?, level(Some(d.new_value))?);
                        if old != new {
                            ops.push(Op::Remove(Key {
                                hash: u.block_hash,
                                group: g,
                                medium: old,
                            }));
                            ops.push(Op::Store(
                                Key {
                                    hash: u.block_hash,
                                    group: g,
                                    medium: new,
                                },
                                None,
                            ));
                        }
                    }
                }
                EventKind::BlockStored(_) | EventKind::AllBlocksCleared => {
                    return Err(Error::Event("a ZMQ event in a TensorRT-LLM body".into()))
                }
            }
            per.push((env.event_id, rank, ops));
        }
        let mut next = ep.trt_next_event.lock().unwrap_or_else(|e| e.into_inner());
        let mut g = ep.lock_live()?;
        let mut w = self.runs.session();
        for r in 0..ranks {
            ep.begin(r);
        }
        let (mut stored, mut removed) = (0, 0);
        let mut lost = false;
        for (id, rank, ops) in &per {
            let in_order = match *next {
                None => true,
                Some(n) => *id == n,
            };
            let clears = ops.iter().any(|o| matches!(o, Op::Clear));
            if !in_order && *id > next.unwrap_or(0) && !clears {
                // Drained by someone else: every rank lost events.
                for (r, st) in g.iter_mut().enumerate() {
                    if st.stream.in_step() {
                        Counters::bump_locked(&ep.counters[r].gaps, 1);
                    }
                    st.stream = StreamState::OutOfStep {
                        lost_from: next.unwrap_or(0),
                    };
                }
                lost = true;
            }
            if !in_order && *id < next.unwrap_or(0) {
                Counters::bump_locked(&ep.counters[*rank].duplicates, 1);
                continue;
            }
            // An event past the last one seen shows what a marked loss lost: nothing (in
            // order) or a gap (every rank out of step above).
            for st in g.iter_mut() {
                st.lost = false;
            }
            // After event id 2^64 - 1 only 0 follows in order: the same id again is a gap,
            // never an event applied twice. (No vector shows whether TensorRT-LLM's counter
            // wraps there; either way only 0 can come next in order, and an engine that
            // restarts at 0 begins with `created`, which empties the ranks.)
            *next = Some(id.wrapping_add(1));
            let st = &mut g[*rank];
            if clears || st.stream.in_step() {
                let (s, rm) = self.run_ops(&mut w, ep, *rank, st, ops);
                stored += s;
                removed += rm;
                if clears {
                    st.stream = StreamState::InStep { next: None };
                }
            }
        }
        for (r, st) in g.iter().enumerate() {
            Counters::bump_locked(&ep.counters[r].batches, 1);
            ep.publish(r, st);
            ep.end(r);
        }
        Ok(if lost {
            Applied::Lost
        } else {
            Applied::Applied { stored, removed }
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{index, slot_taken_over};
    use crate::{Error, Outcome, Request, UnknownReason};
    use kvhash::events::{Event, EventBatch, EventFormat, EventKind};

    /// A writer that found an endpoint before its removal changes nothing once the endpoint
    /// is gone, though its slot now belongs to an endpoint added after: that endpoint keeps
    /// its own state (here: not yet in step), where the stale batch would have put it in step.
    #[test]
    fn a_batch_through_a_removed_endpoint_changes_nothing() {
        let ix = index(1);
        let (stale, own) = slot_taken_over(&ix, false);
        // A cleared cache is a known one: applied to the slot, it would put it in step.
        let batch = EventBatch {
            format: EventFormat::VllmKvMapV3,
            topic: None,
            seq: Some(1),
            ts: None,
            rank: None,
            events: vec![Event {
                envelope: None,
                kind: EventKind::AllBlocksCleared,
            }],
        };
        assert!(matches!(
            ix.apply_batch_to(&stale, 0, &batch),
            Err(Error::UnknownEndpoint(_))
        ));
        let mut out = Vec::new();
        let req = Request {
            block_hashes: &[1],
            prompt_tokens: 20,
            max_cached_tokens: None,
        };
        ix.predict(&req, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].endpoint, own.id);
        assert_eq!(out[0].outcome, Outcome::Unknown(UnknownReason::Unsynced));
        // Through its own handle the same batch applies.
        assert!(ix.apply_batch_to(&own, 0, &batch).is_ok());
        ix.predict(&req, &mut out).unwrap();
        assert_eq!(out[0].outcome, ix.nothing_cached());
    }
}
