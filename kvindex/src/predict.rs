//! Predictions: a request's block keys in, each endpoint rank's cached tokens out
//! ([`Index::predict`], [`Index::predict_sparse`], [`Index::predict_endpoint`]). Two paths
//! give the same answers: the path of a moment no rank changed (`predict_quiet`: statuses from
//! the in-step bitset, no rank checked again) and the per-slot path (each rank's seqlock
//! version checked after the walk, a rank changed meanwhile answered again under its lock).
//! The walks themselves are in `walk.rs`.

use crate::endpoint::{status_reason, word_code, word_version, Endpoint, Endpoints, EpView};
use crate::id::EndpointId;
use crate::locator::{Slots, View, ViewCache};
use crate::prediction::{Outcome, Prediction, Request, UnknownReason, MAX_PROMPT_TOKENS};
use crate::rule::Lookup;
use crate::table::Key;
use crate::{Error, Index};
use std::cell::RefCell;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// Entries of the blank answer copied at a time (1.5 KiB): here (AMD EPYC, glibc) a copy of
/// 3 KiB went to `rep movsb`, whose start-up showed in 128-slot predictions (about 5 %), where
/// pieces take the vector loop.
const BLANK_PIECE: usize = 64;

/// A prediction's working memory, one per thread (reused: nothing allocated once warm).
#[derive(Default)]
pub(crate) struct Scratch {
    /// The candidates' slots.
    pub cands: Vec<u32>,
    /// Each rank's slot word read before the walk, in output order.
    pub words: Vec<u64>,
    /// Each candidate slot's hit, by slot (written by the walks, read for candidates only).
    pub hit: Vec<u32>,
    /// Candidate slots still matching (bitset).
    pub alive: Vec<u64>,
    /// Partial holders of the run in hand that stay candidates (bitset, zero between runs).
    pub keep: Vec<u64>,
    /// Candidates whose hit is 0 (bitset, written by the chain walk).
    pub zero: Vec<u64>,
    /// The candidates (bitset) of a prediction taken while nothing changed.
    pub cand_bits: Vec<u64>,
    /// A sparse prediction's entries with their places in the full answer, before they are put
    /// in that order.
    pub listed: Vec<(u32, Prediction)>,
}

/// A thread's prediction state: the view (endpoint list and places) it last predicted with,
/// and its working memory.
#[derive(Default)]
struct PerThread {
    view: ViewCache,
    scratch: Scratch,
}

thread_local! {
    static THREAD: RefCell<PerThread> = RefCell::new(PerThread::default());
}

/// Lets go of the view this thread kept from the last index it read (its endpoint list and
/// places array: a prediction, or a batch finding its endpoint, keeps them to check with one
/// atomic load that they are still current). Without this call they live until the thread
/// reads a newer view or another index, or ends; call it after dropping an index whose memory
/// should be returned now. The next read of an index loads its view again.
pub fn release_thread_view() {
    // A thread being torn down has nothing left to release; one inside a prediction (never
    // the case: nothing a prediction calls comes here) keeps its view.
    let _ = THREAD.try_with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            t.view = ViewCache::default();
        }
    });
}

impl Index {
    /// The most prompt tokens a hit of `req` may cover: the rule's (every token but the last,
    /// or the last `L` under look-ahead keys, the last two under bigram pages), bounded by
    /// the request's own cap ([`Request::max_cached_tokens`]).
    pub(crate) fn max_hit(&self, req: &Request<'_>) -> usize {
        let m = self.opts.rule.max_hit_tokens(req.prompt_tokens);
        match req.max_cached_tokens {
            Some(cap) => m.min(cap as usize),
            None => m,
        }
    }

    fn check_request(&self, req: &Request<'_>) -> Result<(), Error> {
        if req.prompt_tokens > MAX_PROMPT_TOKENS {
            return Err(Error::Request(format!(
                "{} prompt tokens (at most {MAX_PROMPT_TOKENS})",
                req.prompt_tokens
            )));
        }
        let need = self.blocks_in(self.opts.rule.max_hit_tokens(req.prompt_tokens));
        let full = self.blocks_in(req.prompt_tokens);
        if req.block_hashes.len() < need || req.block_hashes.len() > full {
            return Err(Error::Request(format!(
                "{} block hashes for {} prompt tokens of block size {} (expected {need}..={full})",
                req.block_hashes.len(),
                req.prompt_tokens,
                self.opts.block_size
            )));
        }
        Ok(())
    }

    /// Predicts every endpoint's cached tokens for `req`, one entry per endpoint and rank in
    /// the order the endpoints were added; `out` is cleared first.
    pub fn predict(&self, req: &Request<'_>, out: &mut Vec<Prediction>) -> Result<(), Error> {
        self.predict_with(req, out, false, true)
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
        self.predict_with(req, out, true, true)
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
        self.predict_with(req, out, sparse, false)
    }

    /// The three entry points: the request checked, then the path of a moment no rank
    /// changed when `quiet` allows it and it holds, else the per-slot path.
    fn predict_with(
        &self,
        req: &Request<'_>,
        out: &mut Vec<Prediction>,
        sparse: bool,
        quiet: bool,
    ) -> Result<(), Error> {
        self.check_request(req)?;
        out.clear();
        THREAD.with(|t| {
            let t = &mut *t.borrow_mut();
            // The endpoint list and the places, in one load (of the thread's cached view).
            let view = self.runs.places.cached(&mut t.view);
            // A walk's first probe is of the first block: its entry comes in while the
            // answer is set up (a hint: nothing is read when no walk follows).
            view.slots
                .prefetch(req.block_hashes.first().copied().into_iter());
            let (eps, s) = (&view.endpoints, &mut t.scratch);
            if !(quiet && self.predict_quiet(eps, &view.slots, req, s, out, sparse)) {
                out.clear();
                self.predict_into(&eps.views, eps, req, s, out, sparse);
            }
        });
        Ok(())
    }

    /// `f` on the current view (endpoint list and places), read through this thread's cached
    /// view ([`ViewCache`]), or by a plain load when a prediction of this thread holds the
    /// cache (never the case today: nothing a prediction calls comes back here).
    pub(crate) fn with_view<R>(&self, f: impl Fn(&View) -> R) -> R {
        THREAD
            .try_with(|t| match t.try_borrow_mut() {
                Ok(mut t) => Some(f(self.runs.places.cached(&mut t.view))),
                Err(_) => None,
            })
            .ok()
            .flatten()
            .unwrap_or_else(|| f(&self.runs.places.read()))
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
        THREAD.with(|t| {
            let s = &mut t.borrow_mut().scratch;
            self.predict_into(&view, &one, req, s, &mut out, false);
        });
        Ok(out)
    }

    /// What every answer starts from: whether the rule is proven, whether an endpoint with
    /// adapters loaded is unknown (a rule whose hashes do not carry the adapter cannot tell
    /// base and adapter blocks apart there, whichever the request uses), and a hit entry per
    /// slot in the scratch.
    #[inline]
    fn begin_answer(&self, s: &mut Scratch) -> (bool, bool) {
        let slots = self.opts.max_slots as usize;
        if s.hit.len() < slots {
            s.hit.resize(slots, 0);
        }
        (self.opts.rule.proven(), !self.opts.rule.lora_in_hashes)
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
        let (proven, lora_unknown) = self.begin_answer(s);
        // First pass: every rank's slot word (status and seqlock version), and the candidates
        // (ranks in step whose blocks the events show).
        s.cands.clear();
        s.words.clear();
        s.alive.clear();
        for ep in views.iter() {
            let candidate = !(req.skips_cache() || lora_unknown && ep.lora_adapters);
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
                self.walk_runs_until_done(req, s);
                // The chain walk writes no entry for a candidate whose hit is 0.
                for (w, &z) in s.zero.iter().enumerate() {
                    let mut bits = z;
                    while bits != 0 {
                        let b = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        s.hit[w * 64 + b] = 0;
                    }
                }
            } else {
                // Several KV-cache groups (an index of one group, always a full-attention one,
                // keeps the chains): each candidate under the release's lookup, block by block
                // in the table.
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
        let bs = self.opts.block_size;
        let mut k = 0usize;
        for (ei, ep) in views.iter().enumerate() {
            let candidate = !(req.skips_cache() || lora_unknown && ep.lora_adapters);
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
                                    tokens: hit * bs,
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
        places: &Slots,
        req: &Request<'_>,
        s: &mut Scratch,
        out: &mut Vec<Prediction>,
        sparse: bool,
    ) -> bool {
        let t = &*self.words;
        if !self.chains || req.skips_cache() || self.media_count.load(Ordering::Acquire) > 1 {
            return false;
        }
        let ended = t.ended.load(Ordering::Acquire);
        let began = t.began.load(Ordering::Acquire);
        if began != ended {
            return false;
        }
        let (proven, lora_unknown) = self.begin_answer(s);
        s.alive.clear();
        s.cand_bits.clear();
        for (w, &m) in eps.slots.iter().enumerate() {
            let mut a = t.in_step[w].load(Ordering::Relaxed) & m;
            if lora_unknown {
                a &= !eps.lora_slots[w];
            }
            // Pushed to both here: a copy of the words just stored (a call to memmove)
            // stalled on reading them back.
            s.alive.push(a);
            s.cand_bits.push(a);
        }
        let bs = self.opts.block_size;
        let cached = |hit: u32| Outcome::Cached {
            tokens: hit * bs,
            other_media_tokens: Some(0),
            proven,
        };
        let walked = if sparse {
            self.walk_runs(req, s, places)
        } else {
            // Every rank "nothing cached" (one copy), and the walk writes each matched
            // candidate's answer over its entry as its hit ends (no pass over a hit array;
            // a candidate whose hit is 0 keeps its entry). The ranks that are not candidates
            // are written below. A false return below leaves `out` half written: the caller
            // clears it before the per-slot path.
            for piece in eps.blank.chunks(BLANK_PIECE) {
                out.extend_from_slice(piece);
            }
            let Scratch {
                alive, keep, zero, ..
            } = s;
            let (out_of, entries) = (&eps.out_of[..], &mut out[..]);
            let direct = eps.slot_is_place;
            let put = |slot, hit| {
                let at = if direct {
                    slot
                } else {
                    match out_of.get(slot) {
                        Some(&at) => at as usize,
                        None => return,
                    }
                };
                // A candidate's blank entry is "nothing cached": its count alone changes.
                if let Some(Prediction {
                    outcome: Outcome::Cached { tokens, .. },
                    ..
                }) = entries.get_mut(at)
                {
                    *tokens = hit * bs;
                }
            };
            self.walk_sized(req, places, alive, keep, zero, put)
        };
        if !walked {
            return false;
        }
        fence(Ordering::Acquire);
        if t.began.load(Ordering::Relaxed) != began {
            return false;
        }
        if sparse {
            // Slots in output order (the usual case: no endpoint removed and another added in
            // its slots): the entries go straight out, no sort.
            let direct = eps.in_slot_order;
            s.listed.clear();
            // The usual moment: every rank is a candidate (in step, no adapters to make it
            // unknown), so the answer is the matched candidates alone, in slot order: one pass
            // over their bits (the loop below also lists the ranks that are not candidates).
            let all_walked = eps
                .slots
                .iter()
                .zip(&s.cand_bits)
                .all(|(&m, &c)| m & !c == 0);
            if direct && all_walked {
                let Scratch {
                    cand_bits,
                    zero,
                    hit,
                    ..
                } = &*s;
                for (w, (&c, &z)) in cand_bits.iter().zip(zero.iter()).enumerate() {
                    let mut bits = c & !z;
                    while bits != 0 {
                        let b = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let slot = w * 64 + b;
                        if let (Some(blank), Some(&h)) = (eps.by_slot.get(slot), hit.get(slot)) {
                            debug_assert!(h > 0, "a matched candidate hits");
                            out.push(Prediction {
                                endpoint: blank.endpoint,
                                rank: blank.rank,
                                outcome: cached(h),
                            });
                        }
                    }
                }
                return true;
            }
            let nothing = self.nothing_cached();
            for (w, &m) in eps.slots.iter().enumerate() {
                let cand = s.cand_bits[w];
                // The matched candidates (hit above 0: never "nothing cached") and the ranks
                // that are not candidates.
                let matched = cand & !s.zero[w];
                let mut bits = matched | (m & !cand);
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let slot = w * 64 + b;
                    let Some(&blank) = eps.by_slot.get(slot) else {
                        continue;
                    };
                    let outcome = if matched & (1 << b) != 0 {
                        debug_assert!(s.hit[slot] > 0, "a matched candidate hits");
                        cached(s.hit[slot])
                    } else {
                        let v = &eps.views[eps.view_of[slot] as usize];
                        let o = self.not_walked(t.words[slot].load(Ordering::Relaxed), v, proven);
                        if o == nothing {
                            continue;
                        }
                        o
                    };
                    let p = Prediction { outcome, ..blank };
                    if direct {
                        out.push(p);
                    } else {
                        s.listed.push((eps.out_of[slot], p));
                    }
                }
            }
            if !direct {
                s.listed.sort_unstable_by_key(|&(at, _)| at);
                out.extend(s.listed.iter().map(|&(_, p)| p));
            }
        } else {
            // The matched candidates are written (by the walk); the ranks that are not
            // candidates (out of step, adapters) over their entries now.
            for (w, &m) in eps.slots.iter().enumerate() {
                let mut bits = m & !s.cand_bits[w];
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let slot = w * 64 + b;
                    let Some(e) = out.get_mut(eps.out_of[slot] as usize) else {
                        continue;
                    };
                    let v = &eps.views[eps.view_of[slot] as usize];
                    e.outcome = self.not_walked(t.words[slot].load(Ordering::Relaxed), v, proven);
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
        let g = ep.lock();
        if ep.is_retired(&g) {
            // Removed during the prediction: the index no longer follows its stream (what the
            // engine holds is not known), and its slot may be another endpoint's.
            return Outcome::Unknown(UnknownReason::Unsynced);
        }
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
            let max_blocks = self.blocks_in(self.max_hit(req));
            let more = (hit_units..max_blocks)
                .take_while(|&j| {
                    (0..media).any(|m| {
                        self.holds_now(
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
            Some((more * bs) as u32)
        };
        Outcome::Cached {
            tokens: tokens as u32,
            other_media_tokens: other,
            proven,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::release_thread_view;
    use crate::testing::{endpoint, index, slot_taken_over};
    use crate::{Outcome, Request, UnknownReason};
    use std::sync::Arc;

    fn request() -> Request<'static> {
        Request {
            block_hashes: &[1, 2],
            prompt_tokens: 40,
            max_cached_tokens: None,
        }
    }

    /// A thread keeps the view of the last index it predicted with after that index is
    /// dropped, and lets go of it when asked (or when it reads another index's).
    #[test]
    fn a_dropped_index_view_is_freed_when_the_thread_lets_go() {
        let new = || {
            let ix = index(2);
            ix.add_endpoint(endpoint("a", true)).unwrap();
            ix
        };
        let mut out = Vec::new();
        for release in [true, false] {
            let ix = new();
            ix.predict(&request(), &mut out).unwrap();
            assert_eq!(out.len(), 1);
            let slots = Arc::downgrade(&ix.runs.places.read().slots);
            drop(ix);
            assert!(slots.upgrade().is_some(), "kept by the thread's view");
            if release {
                release_thread_view();
            } else {
                // Another index's read replaces the view.
                new().predict(&request(), &mut out).unwrap();
            }
            assert!(slots.upgrade().is_none(), "freed (release: {release})");
        }
    }

    /// A rank answered again after its endpoint was removed during the prediction is unknown
    /// (the index no longer follows its stream), whatever the endpoint added next into its
    /// slot holds (here: in step, nothing cached).
    #[test]
    fn a_removed_endpoint_answered_again_is_unknown() {
        let ix = index(1);
        let (stale, own) = slot_taken_over(&ix, true);
        let (proven, slot) = (ix.opts.rule.proven(), own.first_slot);
        let again = |ep| ix.answer_again(ep, 0, &request(), slot, true, 1, proven);
        assert_eq!(again(&stale), Outcome::Unknown(UnknownReason::Unsynced));
        assert_eq!(again(&own), ix.nothing_cached());
    }
}
