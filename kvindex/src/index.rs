//! The index: its parts (the holder table, the chains, the endpoints and their slots) and
//! the endpoints' admission and removal. Event application is in `apply.rs`, predictions in
//! `predict.rs` and `walk.rs`, feedback in `feedback.rs`, the inventory in `status.rs`.

use crate::config::{EndpointConfig, IndexOptions};
use crate::drift::PredictionDrift;
use crate::endpoint::{Endpoint, Endpoints, SlotTable, SlotWords, MAX_MEDIA};
use crate::id::EndpointId;
use crate::rule::GroupKind;
use crate::runs::{Runs, Session};
use crate::table::Table;
use crate::Error;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The prefix index of one model pool under one engine release (see [`IndexOptions`]).
///
/// `Send + Sync`: request threads call [`Index::predict`] while event threads apply batches.
/// A prediction takes no lock shared by all endpoints: it loads the endpoint list and the chain
/// keys' places lock-free (one atomic load for both, `locator.rs`), walks the request's blocks
/// once for every endpoint — through the run-compressed chains (`runs.rs`: one lock-free probe
/// of the places per run of blocks with one holder set, the run's shard read-locked) for an
/// index of one full-attention group, else one table probe per block — taking one shard's
/// read lock at a time, and checks each rank's sequence counter, so every rank's answer
/// reflects whole batches only (a rank changed during the walk is answered again under its own
/// endpoint's lock). When no change was in progress before the walk and none began during it (two
/// index-wide counters say so), the per-rank checks are skipped and the statuses come from an
/// in-step bitset. Writers (event application) hold one mutex per batch, and while its ops run
/// the write lock of the run shard they last used.
/// [`Index::predict_sparse`] gives the same answers, listing only the ranks that hold some of
/// the request or are unknown.
pub struct Index {
    pub(crate) opts: IndexOptions,
    /// The holders of every key outside the chains (and of the chain keys too in an index
    /// made [`Index::with_twin`]).
    pub(crate) table: Table,
    /// The chains of GPU keys, kept when the index has one full-attention group: they hold
    /// those keys' holders ([`Runs::holding`]), and the table does not.
    pub(crate) runs: Runs,
    pub(crate) chains: bool,
    /// The table also counts the chain keys' copies, written and never read but by
    /// [`Index::self_check`] (tests and fuzzing).
    pub(crate) twin: bool,
    /// Walks that met a place a writer was moving and walked again.
    pub(crate) fallbacks: AtomicU64,
    /// Every slot's seqlock version and status ([`crate::endpoint::SlotWords`]).
    pub(crate) words: SlotWords,
    admin: Mutex<Admin>,
    /// Medium names by index; 0 is the GPU.
    pub(crate) media: RwLock<Vec<String>>,
    /// `media.len()`, read lock-free on the predict path.
    pub(crate) media_count: AtomicU8,
    pub(crate) drift: Mutex<Option<PredictionDrift>>,
    /// `log2(block_size)` when the block size is a power of two (every engine's default): a
    /// token count's whole blocks by a shift, not a division, on the predict path.
    block_shift: Option<u32>,
}

struct Admin {
    next_id: u32,
    /// Slot in use, per slot.
    used: Vec<bool>,
}

impl Index {
    /// An empty index. Refused when the groups are outside the rule
    /// ([`crate::HitRule::check_groups`]), the block size is 0, or `max_slots` is 0 or above
    /// 2^20.
    pub fn new(opts: IndexOptions) -> Result<Self, Error> {
        if opts.block_size == 0 {
            return Err(Error::Options("block size 0".into()));
        }
        if opts.max_slots == 0 || opts.max_slots > 1 << 20 {
            return Err(Error::Options("max_slots must be in 1..=1048576".into()));
        }
        opts.rule.check_groups(opts.block_size, &opts.groups)?;
        let chains =
            opts.groups.len() == 1 && matches!(opts.groups[0].kind, GroupKind::FullAttention);
        Ok(Index {
            table: Table::new(),
            runs: Runs::new(),
            chains,
            twin: false,
            fallbacks: AtomicU64::new(0),
            words: Arc::new(SlotTable::new(opts.max_slots as usize)),
            admin: Mutex::new(Admin {
                next_id: 0,
                used: vec![false; opts.max_slots as usize],
            }),
            media: RwLock::new(vec!["GPU".to_string()]),
            media_count: AtomicU8::new(1),
            drift: Mutex::new(None),
            block_shift: opts
                .block_size
                .is_power_of_two()
                .then(|| opts.block_size.trailing_zeros()),
            opts,
        })
    }

    /// [`Index::new`], with the table also counting the chain keys' copies: the slow,
    /// obvious twin of the chains, which nothing reads but [`Index::self_check`]. For tests
    /// and fuzzing (every event costs one more table change; predictions are the same).
    #[doc(hidden)]
    pub fn with_twin(opts: IndexOptions) -> Result<Self, Error> {
        let mut ix = Index::new(opts)?;
        ix.twin = true;
        Ok(ix)
    }

    /// The whole blocks in `tokens` tokens.
    #[inline]
    pub(crate) fn blocks_in(&self, tokens: usize) -> usize {
        match self.block_shift {
            Some(s) => tokens >> s,
            None => tokens / self.opts.block_size as usize,
        }
    }

    /// The options the index was made with.
    pub fn options(&self) -> &IndexOptions {
        &self.opts
    }

    /// Adds an endpoint (one slot per data-parallel rank). Its id is new: ids are never
    /// reused, and once 2^32 - 1 ids (`0..u32::MAX`) have been handed out over the index's
    /// life, a further add is refused ([`Error::Options`]).
    pub fn add_endpoint(&self, config: EndpointConfig) -> Result<EndpointId, Error> {
        if config.dp_ranks == 0 || config.dp_ranks > 1024 {
            return Err(Error::Options("dp_ranks must be in 1..=1024".into()));
        }
        if config.capacity.gpu_blocks == 0 {
            return Err(Error::Options("GPU capacity of 0 blocks".into()));
        }
        let cap = config.capacity;
        if cap.gpu_blocks.max(cap.other_blocks) > crate::config::MAX_BLOCKS_PER_RANK {
            return Err(Error::Options(format!(
                "capacity of {} GPU / {} other blocks per rank: at most {} each",
                cap.gpu_blocks,
                cap.other_blocks,
                crate::config::MAX_BLOCKS_PER_RANK
            )));
        }
        let mut admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let eps = self.endpoints();
        if eps.iter().any(|e| e.config.name == config.name) {
            return Err(Error::DuplicateEndpoint(config.name));
        }
        // Ids are never reused (a stale handle must not reach a new endpoint), and `u32::MAX`
        // is the placeholder of a slot without an endpoint: the last id is refused, not
        // wrapped.
        if admin.next_id == u32::MAX {
            return Err(Error::Options(
                "every endpoint id has been used (an index adds at most 2^32 - 1 endpoints \
                 over its life)"
                    .into(),
            ));
        }
        let n = config.dp_ranks as usize;
        let first = (0..admin.used.len().saturating_sub(n - 1))
            .find(|&s| admin.used[s..s + n].iter().all(|u| !u))
            .ok_or_else(|| Error::Options(format!("no {n} free slots left (max_slots)")))?;
        admin.used[first..first + n]
            .iter_mut()
            .for_each(|u| *u = true);
        let id = EndpointId(admin.next_id);
        admin.next_id += 1;
        let ep = Arc::new(Endpoint::new(id, config, first as u32, self.words.clone()));
        let mut next: Vec<Arc<Endpoint>> = eps.iter().cloned().collect();
        next.push(ep);
        self.runs
            .places
            .set_endpoints(Arc::new(Endpoints::new(next, self.nothing_cached())));
        Ok(id)
    }

    /// Removes an endpoint and everything it held. A batch, reset or replay failure for it
    /// that was under way on another thread and reaches the endpoint's lock after the removal
    /// changes nothing and returns [`Error::UnknownEndpoint`] (its slots may be another
    /// endpoint's by then).
    pub fn remove_endpoint(&self, id: EndpointId) -> Result<(), Error> {
        let mut admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let eps = self.endpoints();
        let ep = eps
            .iter()
            .find(|e| e.id == id)
            .cloned()
            .ok_or(Error::UnknownEndpoint(id.0))?;
        let next: Vec<Arc<Endpoint>> = eps.iter().filter(|e| e.id != id).cloned().collect();
        self.runs
            .places
            .set_endpoints(Arc::new(Endpoints::new(next, self.nothing_cached())));
        let g = ep.lock();
        // A writer that found the endpoint before this and takes its lock after changes
        // nothing: its slots are cleared below and may be another endpoint's next.
        ep.retire(&g);
        let mut w = self.runs.session();
        let mut dropped = [0u64; MAX_MEDIA];
        for r in 0..ep.config.dp_ranks {
            // A change like a batch's: a prediction under way sees it and answers the rank
            // again (unknown, see `Endpoint::is_retired`).
            ep.begin(r as usize);
            self.clear_slot(&mut w, ep.first_slot + r, &mut dropped);
            ep.end(r as usize);
        }
        let f = ep.first_slot as usize;
        admin.used[f..f + ep.config.dp_ranks as usize]
            .iter_mut()
            .for_each(|u| *u = false);
        Ok(())
    }

    /// The endpoint restarted (a new identity, an empty cache): drops what it held and starts
    /// its streams afresh, in step from their next batch.
    pub fn reset_endpoint(&self, id: EndpointId) -> Result<(), Error> {
        let ep = self.endpoint(id)?;
        let mut g = ep.lock_live()?;
        let mut w = self.runs.session();
        for (r, st) in g.iter_mut().enumerate() {
            ep.begin(r);
            self.clear_rank(&mut w, &ep, r, st);
            st.stream = crate::stream::StreamState::InStep { next: None };
            st.lost = false;
            ep.publish(r, st);
            ep.end(r);
        }
        *ep.trt_next_event.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// The caller could not get the replay it was asked for (the engine's buffer no longer
    /// reaches back): the rank stays unknown until the cache is known again.
    pub fn replay_failed(&self, id: EndpointId, rank: u32) -> Result<(), Error> {
        let ep = self.endpoint(id)?;
        let mut g = ep.lock_live()?;
        let r = self.rank_index(&ep, rank)?;
        ep.begin(r);
        let st = &mut g[r];
        if let crate::stream::StreamState::Replaying { next, .. } = st.stream {
            st.stream = crate::stream::StreamState::OutOfStep { lost_from: next };
        }
        ep.publish(r, st);
        ep.end(r);
        Ok(())
    }

    /// The caller says rank `rank` of endpoint `id` (every rank: `None`) lost its stream — its
    /// subscription died or reconnected, or its queue dropped batches — so batches may have
    /// gone by unseen: its predictions are `unknown` ([`crate::UnknownReason::StreamLost`])
    /// from now on, until a batch's sequence number shows what was lost: the next number
    /// (nothing: in step again), a gap (replayed, or lost until the cache is known again) or
    /// a restart. A rank that had seen no batch yet (added as starting empty) cannot tell:
    /// it waits for the engine's start (sequence 0 or an emptied cache). A TensorRT-LLM
    /// endpoint's ranks are decided by the next drained event's id the same way.
    pub fn mark_lost(&self, id: EndpointId, rank: Option<u32>) -> Result<(), Error> {
        let ep = self.endpoint(id)?;
        let ranks = match rank {
            Some(r) => {
                let r = self.rank_index(&ep, r)?;
                r..r + 1
            }
            None => 0..ep.config.dp_ranks as usize,
        };
        // A TensorRT-LLM drain numbers its events per endpoint (`trt_next_event`), its ranks
        // stay `InStep { next: None }` between `created` events.
        let trt = matches!(
            self.opts.schema.format(),
            kvhash::events::EventFormat::TrtllmKvHttpV1
                | kvhash::events::EventFormat::TrtllmKvHttpPreviewV1
        );
        let next_unknown = trt
            && ep
                .trt_next_event
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none();
        let mut g = ep.lock_live()?;
        for r in ranks {
            ep.begin(r);
            let st = &mut g[r];
            let unnumbered = st.stream == (crate::stream::StreamState::InStep { next: None });
            if unnumbered && (!trt || next_unknown) {
                // No number seen yet: the next batch's cannot show what went by.
                st.stream = crate::stream::StreamState::Unsynced;
            }
            st.lost = true;
            ep.publish(r, st);
            ep.end(r);
        }
        Ok(())
    }

    /// Checks endpoint `id`'s declared capacity against the one its engine states, per rank
    /// and in the index's blocks: vLLM's `num_gpu_blocks` less its null block (the
    /// `vllm:cache_config_info` metric), SGLang's `max_total_num_tokens / page_size` (its
    /// server info), TensorRT-LLM's `num_blocks_per_cache_level` (its `created` event; the
    /// secondary level is `other_blocks`). `Ok(None)`: they agree; `Ok(Some(finding))`:
    /// they differ — the declared figure stays the bound, the caller decides (re-add the
    /// endpoint with the engine's figure, alert). `other_blocks` `None` is not compared.
    pub fn check_capacity(
        &self,
        id: EndpointId,
        gpu_blocks: u64,
        other_blocks: Option<u64>,
    ) -> Result<Option<crate::CapacityMismatch>, Error> {
        let ep = self.endpoint(id)?;
        let declared = ep.config.capacity;
        let same = declared.gpu_blocks == gpu_blocks
            && other_blocks.is_none_or(|o| o == declared.other_blocks);
        Ok((!same).then(|| crate::CapacityMismatch {
            endpoint: ep.config.name.clone(),
            declared,
            stated_gpu_blocks: gpu_blocks,
            stated_other_blocks: other_blocks,
        }))
    }

    /// The endpoint list now.
    pub(crate) fn endpoints(&self) -> Arc<Endpoints> {
        self.runs.places.read().endpoints.clone()
    }

    /// The endpoint `id` (found in the list's views, one array, not through each endpoint):
    /// the list is in id order and ids are given in turn, so with no endpoint removed since
    /// the first one listed was added, `id` sits at its distance from that one's id (tried
    /// first); else the views are searched.
    pub(crate) fn endpoint(&self, id: EndpointId) -> Result<Arc<Endpoint>, Error> {
        self.with_view(|v| {
            let eps = &v.endpoints;
            let views = &eps.views;
            let guess = views
                .first()
                .map_or(usize::MAX, |f| id.0.wrapping_sub(f.id.0) as usize);
            let at = match views.get(guess) {
                Some(e) if e.id == id => Some(guess),
                _ => views.iter().position(|e| e.id == id),
            };
            at.and_then(|i| eps.get(i)).cloned()
        })
        .ok_or(Error::UnknownEndpoint(id.0))
    }

    /// The endpoint of a name.
    pub fn endpoint_id(&self, name: &str) -> Option<EndpointId> {
        self.with_view(|v| {
            v.endpoints
                .iter()
                .find(|e| e.config.name == name)
                .map(|e| e.id)
        })
    }

    /// The name of an endpoint.
    pub fn endpoint_name(&self, id: EndpointId) -> Option<String> {
        self.endpoint(id).ok().map(|e| e.config.name.clone())
    }

    /// The data-parallel ranks of an endpoint.
    pub fn endpoint_ranks(&self, id: EndpointId) -> Option<u32> {
        self.endpoint(id).ok().map(|e| e.config.dp_ranks)
    }

    /// Every endpoint, in the order they were added.
    pub fn endpoint_ids(&self) -> Vec<EndpointId> {
        self.endpoints().iter().map(|e| e.id).collect()
    }

    pub(crate) fn rank_index(&self, ep: &Endpoint, rank: u32) -> Result<usize, Error> {
        if rank >= ep.config.dp_ranks {
            return Err(Error::Rank {
                rank,
                ranks: ep.config.dp_ranks,
            });
        }
        Ok(rank as usize)
    }

    /// Drops what a rank holds (under the endpoint's lock and the writers' mutex, inside
    /// begin/end).
    pub(crate) fn clear_rank(
        &self,
        w: &mut Session<'_>,
        ep: &Endpoint,
        r: usize,
        st: &mut crate::endpoint::RankState,
    ) {
        let mut dropped = [0u64; MAX_MEDIA];
        self.clear_slot(w, ep.first_slot + r as u32, &mut dropped);
        st.held = [0; MAX_MEDIA];
        st.overflow = false;
    }

    /// Drops every copy a slot holds, from the table and the chains.
    fn clear_slot(&self, w: &mut Session<'_>, slot: u32, dropped: &mut [u64]) {
        self.table.clear_slot(slot, dropped);
        if self.chains {
            self.runs.clear_slot(w, slot);
        }
    }

    /// Checks the chains against their twin: every GPU key the twin table counts sits at one
    /// place in the chains, whose holders and extra copies equal the twin's, and the chains
    /// hold nothing else (`Err` names the first difference). For tests and the fuzz target:
    /// the index must be made [`Index::with_twin`] (an index of several groups keeps no
    /// chains: `Ok`).
    #[doc(hidden)]
    pub fn self_check(&self) -> Result<(), String> {
        if !self.chains {
            return Ok(());
        }
        if !self.twin {
            return Err(
                "self_check compares the chains with the twin table: make the index \
                        with Index::with_twin"
                    .into(),
            );
        }
        self.runs.check(&self.table)
    }

    /// Walks that met a place a writer was moving and walked again (0 on an index nobody
    /// writes to while it predicts).
    #[doc(hidden)]
    pub fn walk_fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::Index;
    use crate::{GroupKind, GroupSpec, HitRule, IndexOptions};
    use kvhash::events::{EventFormat, EventSchema};
    use proptest::prelude::*;

    fn index(block_size: u32) -> Index {
        Index::new(IndexOptions {
            rule: HitRule::for_release_id("vllm-kv-map-v3-r0.31").unwrap(),
            schema: EventSchema::family(EventFormat::VllmKvMapV3).clone(),
            block_size,
            groups: vec![GroupSpec {
                kind: GroupKind::FullAttention,
                block_size,
            }],
            max_slots: 1,
        })
        .unwrap()
    }

    /// Endpoints are found by id after adds and removals, a removed id is never found again,
    /// and the last id is refused without taking slots (never wrapped to an old one).
    #[test]
    fn endpoints_are_found_by_id_and_ids_run_out_cleanly() {
        use crate::testing::endpoint;
        use crate::{EndpointId, Error};
        let ix = crate::testing::index(4);
        let ids: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| ix.add_endpoint(endpoint(n, true)).unwrap())
            .collect();
        ix.remove_endpoint(ids[1]).unwrap();
        ix.remove_endpoint(ids[0]).unwrap();
        let e = ix.add_endpoint(endpoint("e", true)).unwrap();
        for (id, name) in [(ids[2], "c"), (ids[3], "d"), (e, "e")] {
            assert_eq!(ix.endpoint(id).unwrap().config.name, name);
        }
        for gone in [ids[0], ids[1], EndpointId(e.0 + 1)] {
            assert!(matches!(ix.endpoint(gone), Err(Error::UnknownEndpoint(_))));
        }
        ix.remove_endpoint(ids[2]).unwrap();
        ix.admin.lock().unwrap().next_id = u32::MAX - 1;
        let last = ix.add_endpoint(endpoint("f", true)).unwrap();
        assert_eq!(last, EndpointId(u32::MAX - 1));
        let used = ix.admin.lock().unwrap().used.clone();
        assert!(matches!(
            ix.add_endpoint(endpoint("g", true)),
            Err(Error::Options(_))
        ));
        assert_eq!(ix.admin.lock().unwrap().used, used, "no slot taken");
        assert_eq!(ix.endpoint(last).unwrap().config.name, "f");
    }

    proptest! {
        /// The lookup by id (its guess from the first id, then the search) equals a plain
        /// list, through any adds and removals (removed ids before, among and after those
        /// left; ids never given).
        #[test]
        fn endpoints_found_by_id_equal_a_plain_list(
            ops in prop::collection::vec((any::<bool>(), any::<prop::sample::Index>()), 1..60),
        ) {
            use crate::testing::endpoint;
            let ix = crate::testing::index(8);
            let (mut live, mut all) = (Vec::new(), Vec::new());
            for (k, (add, pick)) in ops.into_iter().enumerate() {
                if (add || live.is_empty()) && live.len() < 8 {
                    let id = ix.add_endpoint(endpoint(&format!("e{k}"), true)).unwrap();
                    live.push(id);
                    all.push(id);
                } else {
                    let id = live.remove(pick.index(live.len()));
                    ix.remove_endpoint(id).unwrap();
                }
                let never = crate::EndpointId(all.last().map_or(0, |l| l.0 + 1));
                for &id in all.iter().chain([&never]) {
                    let found = ix.endpoint(id).ok().map(|e| e.id);
                    prop_assert_eq!(found, live.contains(&id).then_some(id));
                }
            }
        }

        /// A token count's whole blocks equal the division, for block sizes that are powers
        /// of two (the shift) and those that are not (hybrid models' odd sizes).
        #[test]
        fn whole_blocks_equal_the_division(
            bs in prop_oneof![Just(1u32), Just(16), Just(528), 1u32..5000],
            tokens in prop_oneof![any::<usize>(), 0usize..100_000],
        ) {
            let ix = index(bs);
            prop_assert_eq!(ix.blocks_in(tokens), tokens / bs as usize);
            prop_assert_eq!(ix.blocks_in(usize::MAX), usize::MAX / bs as usize);
        }
    }
}
