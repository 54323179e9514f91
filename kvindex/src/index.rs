//! The index: endpoints in, predictions out.

use crate::config::{EndpointConfig, IndexOptions};
use crate::endpoint::{
    status_reason, word_code, word_version, Endpoint, EndpointId, Endpoints, EpView, SlotTable,
    SlotWords, MAX_MEDIA,
};
use crate::feedback::PredictionDrift;
use crate::lookup;
use crate::prediction::{Outcome, Prediction, Request, UnknownReason};
use crate::rule::{GroupKind, Lookup};
use crate::runs::{chain_key, Runs, Writer};
use crate::table::{Key, Table};
use crate::Error;
use arc_swap::ArcSwap;
use std::cell::RefCell;
use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The prefix index of one model pool under one engine release (see [`IndexOptions`]).
///
/// `Send + Sync`: request threads call [`Index::predict`] while event threads apply batches.
/// A prediction takes no lock shared by all endpoints: it loads the endpoint list lock-free,
/// walks the request's blocks once for every endpoint — through the run-compressed chains
/// (`runs.rs`: one sharded-table probe per run of blocks with one holder set) for an index of
/// one full-attention group, else one probe per block — taking one shard's read lock at a
/// time, and checks each rank's sequence counter, so every rank's answer reflects whole
/// batches only (a rank changed during the walk is answered again under its own endpoint's
/// lock). When no change was in progress before the walk and none began during it (two
/// index-wide counters say so), the per-rank checks are skipped and the statuses come from an
/// in-step bitset. Writers (event application) hold one mutex per batch.
/// [`Index::predict_sparse`] gives the same answers, listing only the ranks that hold some of
/// the request or are unknown.
pub struct Index {
    pub(crate) opts: IndexOptions,
    pub(crate) table: Table,
    /// The chains of GPU keys, kept when the index has one full-attention group.
    pub(crate) runs: Runs,
    pub(crate) chains: bool,
    /// Walks that met a place a writer was moving and walked the table instead.
    fallbacks: AtomicU64,
    pub(crate) endpoints: ArcSwap<Endpoints>,
    /// Every slot's seqlock version and status ([`crate::endpoint::SlotWords`]).
    words: SlotWords,
    admin: Mutex<Admin>,
    /// Medium names by index; 0 is the GPU.
    pub(crate) media: RwLock<Vec<String>>,
    /// `media.len()`, read lock-free on the predict path.
    pub(crate) media_count: AtomicU8,
    pub(crate) drift: Mutex<Option<PredictionDrift>>,
}

struct Admin {
    next_id: u32,
    /// Slot in use, per slot.
    used: Vec<bool>,
}

/// One candidate slot of a prediction.
#[derive(Default)]
struct Scratch {
    /// The candidates' slots.
    cands: Vec<u32>,
    /// Each rank's slot word read before the walk, in output order.
    words: Vec<u64>,
    /// Each candidate slot's hit, by slot (written by the walks, read for candidates only).
    hit: Vec<u32>,
    active: Vec<u32>,
    mark: Vec<u32>,
    stamp: u32,
    /// Candidate slots still matching (bitset).
    alive: Vec<u64>,
    /// Partial holders of the run in hand that stay candidates (bitset, zero between runs).
    keep: Vec<u64>,
    /// Candidates whose hit is 0 (bitset, written by the chain walk).
    zero: Vec<u64>,
    /// The candidates (bitset) of a prediction taken while nothing changed.
    cand_bits: Vec<u64>,
    /// A sparse prediction's entries before they are put in endpoint order.
    listed: Vec<(u32, Prediction)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
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
            fallbacks: AtomicU64::new(0),
            endpoints: ArcSwap::from_pointee(Endpoints::default()),
            words: Arc::new(SlotTable::new(opts.max_slots as usize)),
            admin: Mutex::new(Admin {
                next_id: 0,
                used: vec![false; opts.max_slots as usize],
            }),
            media: RwLock::new(vec!["GPU".to_string()]),
            media_count: AtomicU8::new(1),
            drift: Mutex::new(None),
            opts,
        })
    }

    /// The options the index was made with.
    pub fn options(&self) -> &IndexOptions {
        &self.opts
    }

    /// Adds an endpoint (one slot per data-parallel rank).
    pub fn add_endpoint(&self, config: EndpointConfig) -> Result<EndpointId, Error> {
        if config.dp_ranks == 0 || config.dp_ranks > 1024 {
            return Err(Error::Options("dp_ranks must be in 1..=1024".into()));
        }
        if config.capacity.gpu_blocks == 0 {
            return Err(Error::Options("GPU capacity of 0 blocks".into()));
        }
        let mut admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let eps = self.endpoints.load();
        if eps.iter().any(|e| e.config.name == config.name) {
            return Err(Error::DuplicateEndpoint(config.name));
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
        self.endpoints
            .store(Arc::new(Endpoints::new(next, self.nothing_cached())));
        Ok(id)
    }

    /// Removes an endpoint and everything it held.
    pub fn remove_endpoint(&self, id: EndpointId) -> Result<(), Error> {
        let mut admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let eps = self.endpoints.load();
        let ep = eps
            .iter()
            .find(|e| e.id == id)
            .cloned()
            .ok_or(Error::UnknownEndpoint(id.0))?;
        let next: Vec<Arc<Endpoint>> = eps.iter().filter(|e| e.id != id).cloned().collect();
        self.endpoints
            .store(Arc::new(Endpoints::new(next, self.nothing_cached())));
        let _g = ep.lock();
        let mut w = self.runs.writer();
        let mut dropped = [0u64; MAX_MEDIA];
        for r in 0..ep.config.dp_ranks {
            self.clear_slot(&mut w, ep.first_slot + r, &mut dropped);
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
        let mut g = ep.lock();
        let mut w = self.runs.writer();
        for (r, st) in g.iter_mut().enumerate() {
            ep.begin(r);
            self.clear_rank(&mut w, &ep, r, st);
            st.stream = crate::stream::StreamState::InStep { next: None };
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
        let mut g = ep.lock();
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

    pub(crate) fn endpoint(&self, id: EndpointId) -> Result<Arc<Endpoint>, Error> {
        self.endpoints
            .load()
            .iter()
            .find(|e| e.id == id)
            .cloned()
            .ok_or(Error::UnknownEndpoint(id.0))
    }

    /// The endpoint of a name.
    pub fn endpoint_id(&self, name: &str) -> Option<EndpointId> {
        self.endpoints
            .load()
            .iter()
            .find(|e| e.config.name == name)
            .map(|e| e.id)
    }

    /// The name of an endpoint.
    pub fn endpoint_name(&self, id: EndpointId) -> Option<String> {
        self.endpoint(id).ok().map(|e| e.config.name.clone())
    }

    /// Every endpoint, in the order they were added.
    pub fn endpoint_ids(&self) -> Vec<EndpointId> {
        self.endpoints.load().iter().map(|e| e.id).collect()
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
        w: &mut Writer,
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
    fn clear_slot(&self, w: &mut Writer, slot: u32, dropped: &mut [u64]) {
        self.table.clear_slot(slot, dropped);
        if self.chains {
            self.runs.clear_slot(w, slot);
        }
    }

    /// Checks the index's own bookkeeping: every GPU key's place in the chains holds it under
    /// a cover equal to its holders, and the chains hold nothing else (`Err` names the first
    /// difference). For tests and the fuzz target: it reads the whole table.
    #[doc(hidden)]
    pub fn self_check(&self) -> Result<(), String> {
        if self.chains {
            self.runs.check(&self.table)
        } else {
            Ok(())
        }
    }

    /// Walks that met a place a writer was moving and walked the table block by block
    /// instead (0 on an index nobody writes to while it predicts).
    #[doc(hidden)]
    pub fn walk_fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    fn check_request(&self, req: &Request<'_>) -> Result<(), Error> {
        let bs = self.opts.block_size as usize;
        let need = lookup::max_hit_tokens(req.prompt_tokens) / bs;
        let full = req.prompt_tokens / bs;
        if req.block_hashes.len() < need || req.block_hashes.len() > full {
            return Err(Error::Request(format!(
                "{} block hashes for {} prompt tokens of block size {bs} (expected {need}..={full})",
                req.block_hashes.len(),
                req.prompt_tokens
            )));
        }
        Ok(())
    }

    /// Predicts every endpoint's cached tokens for `req`, one entry per endpoint and rank in
    /// the order the endpoints were added; `out` is cleared first.
    pub fn predict(&self, req: &Request<'_>, out: &mut Vec<Prediction>) -> Result<(), Error> {
        self.check_request(req)?;
        out.clear();
        let eps = self.endpoints.load();
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            if !self.predict_quiet(&eps, req, &mut s, out, false) {
                out.clear();
                self.predict_into(&eps.views, &eps, req, &mut s, out, false);
            }
        });
        Ok(())
    }

    /// [`Index::predict`] listing only the ranks whose outcome differs from
    /// [`Index::nothing_cached`] (the matched ranks and the unknown ones), in the same order;
    /// every rank not listed has that outcome. The same walk and the same consistency as
    /// `predict` (each listed or omitted rank's answer reflects whole batches only), without
    /// writing an entry per rank that holds none of the request: the form a router that
    /// scores the matched endpoints wants. `out` is cleared first.
    pub fn predict_sparse(
        &self,
        req: &Request<'_>,
        out: &mut Vec<Prediction>,
    ) -> Result<(), Error> {
        self.check_request(req)?;
        out.clear();
        let eps = self.endpoints.load();
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            if !self.predict_quiet(&eps, req, &mut s, out, true) {
                out.clear();
                self.predict_into(&eps.views, &eps, req, &mut s, out, true);
            }
        });
        Ok(())
    }

    /// [`Index::predict`] (`sparse` false) or [`Index::predict_sparse`] through the per-slot
    /// path alone (each rank's version checked after the walk), never the path of a moment no
    /// rank changed: the twin the tests compare that path with.
    #[doc(hidden)]
    pub fn predict_per_slot(
        &self,
        req: &Request<'_>,
        out: &mut Vec<Prediction>,
        sparse: bool,
    ) -> Result<(), Error> {
        self.check_request(req)?;
        out.clear();
        let eps = self.endpoints.load();
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            self.predict_into(&eps.views, &eps, req, &mut s, out, sparse);
        });
        Ok(())
    }

    /// The outcome of a rank in step that holds none of a request's blocks (the outcome
    /// [`Index::predict_sparse`] leaves out).
    pub fn nothing_cached(&self) -> Outcome {
        Outcome::Cached {
            tokens: 0,
            other_media_tokens: (self.opts.groups.len() == 1).then_some(0),
            proven: self.opts.rule.proven(),
        }
    }

    /// One endpoint's predictions (one per rank).
    pub fn predict_endpoint(
        &self,
        id: EndpointId,
        req: &Request<'_>,
    ) -> Result<Vec<Prediction>, Error> {
        self.check_request(req)?;
        let ep = self.endpoint(id)?;
        let view = [EpView {
            id: ep.id,
            first_slot: ep.first_slot,
            ranks: ep.config.dp_ranks,
            lora_adapters: ep.config.lora_adapters,
        }];
        let one = [ep];
        let mut out = Vec::new();
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            self.predict_into(&view, &one, req, &mut s, &mut out, false);
        });
        Ok(out)
    }

    /// Predictions for the endpoints `views` describes (`eps` in the same order); `sparse`:
    /// only those that differ from [`Index::nothing_cached`].
    fn predict_into(
        &self,
        views: &[EpView],
        eps: &[Arc<Endpoint>],
        req: &Request<'_>,
        s: &mut Scratch,
        out: &mut Vec<Prediction>,
        sparse: bool,
    ) {
        let proven = self.opts.rule.proven();
        // A rule whose hashes do not carry the adapter cannot tell base and adapter blocks
        // apart on an endpoint with adapters loaded, whichever the request uses.
        let lora_unknown = !self.opts.rule.lora_in_hashes;
        let slots = self.opts.max_slots as usize;
        if s.hit.len() < slots {
            s.hit.resize(slots, 0);
        }
        // First pass: every rank's slot word (status and seqlock version), and the candidates
        // (ranks in step whose blocks the events show).
        s.cands.clear();
        s.words.clear();
        s.alive.clear();
        for ep in views.iter() {
            let candidate = !(req.skip_prefix_cache || lora_unknown && ep.lora_adapters);
            for r in 0..ep.ranks {
                let slot = ep.first_slot + r;
                let word = self.words.words[slot as usize].load(Ordering::Acquire);
                s.words.push(word);
                if candidate && word_code(word) == 0 {
                    s.cands.push(slot);
                    let w = slot as usize / 64;
                    if s.alive.len() <= w {
                        s.alive.resize(w + 1, 0);
                    }
                    s.alive[w] |= 1u64 << (slot % 64);
                }
            }
        }
        let single_full = self.opts.groups.len() == 1;
        if !s.cands.is_empty() {
            if self.chains {
                if !self.walk_runs(req, s) {
                    self.fallbacks.fetch_add(1, Ordering::Relaxed);
                    self.walk_prefix(req, s);
                }
            } else if single_full {
                self.walk_prefix(req, s);
            } else {
                for i in 0..s.cands.len() {
                    let slot = s.cands[i];
                    s.hit[slot as usize] = self.slot_hit(req, slot) as u32;
                }
            }
        }
        fence(Ordering::Acquire);
        let media = self.media_count.load(Ordering::Acquire);
        // Second pass: each rank's answer; a candidate whose version moved during the walk is
        // answered again under its endpoint's lock.
        if !sparse {
            out.reserve(s.words.len());
        }
        let nothing = self.nothing_cached();
        // One full-attention group on the GPU alone (the common index): the answer is the hit
        // in tokens, nothing on other media.
        let plain = single_full && media <= 1;
        let bs = self.opts.block_size as u64;
        let mut k = 0usize;
        for (ei, ep) in views.iter().enumerate() {
            let candidate = !(req.skip_prefix_cache || lora_unknown && ep.lora_adapters);
            for r in 0..ep.ranks {
                let slot = ep.first_slot + r;
                let word = s.words[k];
                k += 1;
                let outcome = if candidate && word_code(word) == 0 {
                    let now = self.words.words[slot as usize].load(Ordering::Relaxed);
                    let version = word_version(word);
                    if word_version(now) == version && version & 1 == 0 {
                        let hit = s.hit[slot as usize];
                        if plain {
                            if sparse && hit == 0 {
                                continue;
                            }
                            // Pushed here, whole: an answer built apart and copied in stalled
                            // on its own partial stores.
                            out.push(Prediction {
                                endpoint: ep.id,
                                rank: r,
                                outcome: Outcome::Cached {
                                    tokens: u64::from(hit) * bs,
                                    other_media_tokens: Some(0),
                                    proven,
                                },
                            });
                            continue;
                        }
                        self.cached(req, slot, hit as usize, single_full, media, proven)
                    } else {
                        self.answer_again(&eps[ei], r, req, slot, single_full, media, proven)
                    }
                } else {
                    self.not_walked(word, ep, proven)
                };
                if sparse && outcome == nothing {
                    continue;
                }
                out.push(Prediction {
                    endpoint: ep.id,
                    rank: r,
                    outcome,
                });
            }
        }
    }

    /// The prediction of a moment no rank changed, for the common index (the chains, GPU only):
    /// when no change was in progress before the walk and none began during it, every rank's
    /// status comes from the in-step bitset and no per-slot version is checked again; a sparse
    /// answer then touches only the matched and the unknown ranks. False (with `out` to be
    /// cleared) when that does not hold: the caller takes the per-slot path.
    fn predict_quiet(
        &self,
        eps: &Endpoints,
        req: &Request<'_>,
        s: &mut Scratch,
        out: &mut Vec<Prediction>,
        sparse: bool,
    ) -> bool {
        let t = &*self.words;
        if !self.chains || req.skip_prefix_cache || self.media_count.load(Ordering::Acquire) > 1 {
            return false;
        }
        let ended = t.ended.load(Ordering::Acquire);
        let began = t.began.load(Ordering::Acquire);
        if began != ended {
            return false;
        }
        let proven = self.opts.rule.proven();
        let lora_unknown = !self.opts.rule.lora_in_hashes;
        let slots = self.opts.max_slots as usize;
        if s.hit.len() < slots {
            s.hit.resize(slots, 0);
        }
        s.alive.clear();
        for (w, &m) in eps.slots.iter().enumerate() {
            let mut a = t.in_step[w].load(Ordering::Relaxed) & m;
            if lora_unknown {
                a &= !eps.lora_slots[w];
            }
            s.alive.push(a);
        }
        s.cand_bits.clear();
        s.cand_bits.extend_from_slice(&s.alive);
        if !self.walk_runs(req, s) {
            return false;
        }
        fence(Ordering::Acquire);
        if t.began.load(Ordering::Relaxed) != began {
            return false;
        }
        let bs = self.opts.block_size as u64;
        let cached = |hit: u32| Outcome::Cached {
            tokens: u64::from(hit) * bs,
            other_media_tokens: Some(0),
            proven,
        };
        if sparse {
            let nothing = self.nothing_cached();
            // Slots in output order (the usual case: no endpoint removed and another added in
            // its slots): the entries go straight out, no sort.
            let direct = eps.in_slot_order;
            s.listed.clear();
            for (w, &m) in eps.slots.iter().enumerate() {
                let cand = s.cand_bits[w];
                // The matched candidates and the ranks that are not candidates.
                let mut bits = (cand & !s.zero[w]) | (m & !cand);
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let slot = w * 64 + b;
                    let vi = eps.view_of[slot];
                    let v = &eps.views[vi as usize];
                    let outcome = if cand & (1 << b) != 0 {
                        cached(s.hit[slot])
                    } else {
                        self.not_walked(t.words[slot].load(Ordering::Relaxed), v, proven)
                    };
                    if outcome != nothing {
                        let p = Prediction {
                            endpoint: v.id,
                            rank: slot as u32 - v.first_slot,
                            outcome,
                        };
                        if direct {
                            out.push(p);
                        } else {
                            s.listed.push((vi, p));
                        }
                    }
                }
            }
            if !direct {
                s.listed.sort_unstable_by_key(|&(vi, p)| (vi, p.rank));
                out.extend(s.listed.iter().map(|&(_, p)| p));
            }
        } else {
            // Every rank "nothing cached" (one copy), then the matched candidates and the
            // ranks that are not candidates written over their entries.
            out.extend_from_slice(&eps.blank);
            for (w, &m) in eps.slots.iter().enumerate() {
                let cand = s.cand_bits[w];
                let mut bits = (cand & !s.zero[w]) | (m & !cand);
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let slot = w * 64 + b;
                    let Some(e) = out.get_mut(eps.out_of[slot] as usize) else {
                        continue;
                    };
                    e.outcome = if cand & (1 << b) != 0 {
                        cached(s.hit[slot])
                    } else {
                        let v = &eps.views[eps.view_of[slot] as usize];
                        self.not_walked(t.words[slot].load(Ordering::Relaxed), v, proven)
                    };
                }
            }
        }
        true
    }

    /// A rank the walk did not visit: its status, or the adapter or the request's cache skip
    /// decide.
    #[cold]
    fn not_walked(&self, word: u64, ep: &EpView, proven: bool) -> Outcome {
        match status_reason(word_code(word)) {
            Some(reason) => Outcome::Unknown(reason),
            None if !self.opts.rule.lora_in_hashes && ep.lora_adapters => {
                Outcome::Unknown(UnknownReason::LoraNotInEvents)
            }
            None => Outcome::Cached {
                tokens: 0,
                other_media_tokens: Some(0),
                proven,
            },
        }
    }

    /// A candidate whose version moved during the walk: answered again under its endpoint's
    /// lock.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn answer_again(
        &self,
        ep: &Endpoint,
        rank: u32,
        req: &Request<'_>,
        slot: u32,
        single_full: bool,
        media: u8,
        proven: bool,
    ) -> Outcome {
        let _g = ep.lock();
        match status_reason(ep.code(rank as usize)) {
            Some(reason) => Outcome::Unknown(reason),
            None => {
                let hit = self.slot_hit(req, slot);
                self.cached(req, slot, hit, single_full, media, proven)
            }
        }
    }

    #[inline]
    fn cached(
        &self,
        req: &Request<'_>,
        slot: u32,
        hit_units: usize,
        single_full: bool,
        media: u8,
        proven: bool,
    ) -> Outcome {
        let bs = self.opts.block_size as usize;
        let tokens = match self.opts.rule.lookup {
            Lookup::VllmCoordinator if !single_full => hit_units,
            _ => hit_units * bs,
        };
        let other = if !single_full {
            None
        } else if media <= 1 {
            Some(0)
        } else {
            let max_blocks = lookup::max_hit_tokens(req.prompt_tokens) / bs;
            let more = (hit_units..max_blocks)
                .take_while(|&j| {
                    (0..media).any(|m| {
                        self.table.holds(
                            &Key {
                                hash: req.block_hashes[j],
                                group: 0,
                                medium: m,
                            },
                            slot,
                        )
                    })
                })
                .count();
            Some((more * bs) as u64)
        };
        Outcome::Cached {
            tokens: tokens as u64,
            other_media_tokens: other,
            proven,
        }
    }

    /// One slot's hit under the release's lookup: blocks for a single full-attention group,
    /// tokens for several groups.
    fn slot_hit(&self, req: &Request<'_>, slot: u32) -> usize {
        let present = |g: usize, j: usize| {
            req.block_hashes.get(j).is_some_and(|&h| {
                self.table.holds(
                    &Key {
                        hash: h,
                        group: g as u8,
                        medium: 0,
                    },
                    slot,
                )
            })
        };
        match self.opts.rule.lookup {
            Lookup::VllmCoordinator if self.opts.groups.len() > 1 => {
                lookup::vllm_hit_tokens(&self.opts.groups, req.prompt_tokens, present)
            }
            _ => {
                let max_blocks =
                    lookup::max_hit_tokens(req.prompt_tokens) / self.opts.block_size as usize;
                lookup::prefix_hit(max_blocks, |j| present(0, j))
            }
        }
    }

    /// Every candidate's prefix hit (one full-attention group) through the chains: one table
    /// probe per run the request's blocks pass through, the run's hashes compared in a loop
    /// and its cover ANDed with the candidates once. False when a place read was being moved
    /// by a writer (the caller then walks the table; the hits written so far are overwritten).
    /// `zero` ends with the candidates whose hit is 0.
    fn walk_runs(&self, req: &Request<'_>, s: &mut Scratch) -> bool {
        let max_blocks = lookup::max_hit_tokens(req.prompt_tokens) / self.opts.block_size as usize;
        // `alive` holds the candidates (the first pass set it).
        let hashes = &req.block_hashes[..max_blocks];
        s.keep.clear();
        s.keep.resize(s.alive.len(), 0);
        s.zero.clear();
        s.zero.resize(s.alive.len(), 0);
        let (hit, alive, keep, zero) = (&mut s.hit, &mut s.alive, &mut s.keep, &mut s.zero);
        let mut j = 0usize;
        while j < max_blocks && alive.iter().any(|&a| a != 0) {
            let h = hashes[j];
            let Some(loc) = self.table.loc(&chain_key(h)) else {
                break;
            };
            let next = self
                .runs
                .read(loc.run, |run| {
                    let i = run.index_of(loc.pos)?;
                    let hs = run.hashes();
                    if hs[i] != h {
                        return None;
                    }
                    let matched = 1 + hs[i + 1..]
                        .iter()
                        .zip(&hashes[j + 1..])
                        .take_while(|(a, b)| a == b)
                        .count();
                    if !run.has_partial() {
                        for (w, a) in alive.iter_mut().enumerate() {
                            let c = run.cover_word(w);
                            let mut gone = *a & !c;
                            if j == 0 {
                                zero[w] |= gone;
                            }
                            while gone != 0 {
                                let b = gone.trailing_zeros() as usize;
                                gone &= gone - 1;
                                hit[w * 64 + b] = j as u32;
                            }
                            *a &= c;
                        }
                        return Some(j + matched);
                    }
                    // A partial holder holds the matched blocks up to its end: it stays a
                    // candidate when it holds them all, else its hit ends there (one pass
                    // over the partial holders; the survivors are ORed with the cover).
                    for (s, held) in run.partial() {
                        let (w, bit) = (s as usize / 64, 1u64 << (s % 64));
                        let Some(a) = alive.get_mut(w) else {
                            continue;
                        };
                        if *a & bit == 0 {
                            continue;
                        }
                        let reach = held.saturating_sub(i);
                        if reach < matched {
                            hit[s as usize] = (j + reach) as u32;
                            if j + reach == 0 {
                                zero[w] |= bit;
                            }
                            *a &= !bit;
                        } else {
                            keep[w] |= bit;
                        }
                    }
                    for ((w, a), k) in alive.iter_mut().enumerate().zip(keep.iter_mut()) {
                        let c = run.cover_word(w) | std::mem::take(k);
                        let mut gone = *a & !c;
                        if j == 0 {
                            zero[w] |= gone;
                        }
                        while gone != 0 {
                            let b = gone.trailing_zeros() as usize;
                            gone &= gone - 1;
                            hit[w * 64 + b] = j as u32;
                        }
                        *a &= c;
                    }
                    Some(j + matched)
                })
                .flatten();
            match next {
                Some(n) => j = n,
                None => return false,
            }
        }
        for (w, &a) in alive.iter().enumerate() {
            if j == 0 {
                zero[w] |= a;
            }
            let mut left = a;
            while left != 0 {
                let b = left.trailing_zeros() as usize;
                left &= left - 1;
                hit[w * 64 + b] = j as u32;
            }
        }
        true
    }

    /// Every candidate's prefix hit (one full-attention group) in one walk: each block is
    /// looked up once, and the walk ends when no candidate still matches.
    fn walk_prefix(&self, req: &Request<'_>, s: &mut Scratch) {
        debug_assert!(matches!(self.opts.groups[0].kind, GroupKind::FullAttention));
        let max_blocks = lookup::max_hit_tokens(req.prompt_tokens) / self.opts.block_size as usize;
        let slots = self.opts.max_slots as usize;
        if s.mark.len() < slots {
            s.mark.resize(slots, 0);
        }
        s.active.clear();
        s.active.extend_from_slice(&s.cands);
        let mut j = 0usize;
        while j < max_blocks && !s.active.is_empty() {
            if s.stamp == u32::MAX {
                s.mark.iter_mut().for_each(|m| *m = 0);
                s.stamp = 0;
            }
            s.stamp += 1;
            let stamp = s.stamp;
            let key = Key {
                hash: req.block_hashes[j],
                group: 0,
                medium: 0,
            };
            let mark = &mut s.mark;
            self.table.with_holders(&key, |h| {
                for &(slot, _) in h {
                    if let Some(m) = mark.get_mut(slot as usize) {
                        *m = stamp;
                    }
                }
            });
            let hit = &mut s.hit;
            let mark = &s.mark;
            s.active.retain(|&slot| {
                if mark[slot as usize] == stamp {
                    true
                } else {
                    hit[slot as usize] = j as u32;
                    false
                }
            });
            j += 1;
        }
        for &slot in &s.active {
            s.hit[slot as usize] = j as u32;
        }
    }
}
