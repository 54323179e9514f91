//! The prefix walks behind a prediction: every candidate slot's hit in one pass over the
//! request's blocks through the run-compressed chains (one probe of the places per run,
//! `runs.rs`, `locator.rs`), and one slot's hit under the release's lookup (several KV-cache
//! groups: the table block by block; a rank answered again: a chain key's holders read from
//! its run). A read of the chains that met a place a writer was moving is done again, and
//! after [`WALK_TRIES`] such reads under the writers' mutex.

use crate::locator::Slots;
use crate::lookup;
use crate::predict::Scratch;
use crate::prediction::Request;
use crate::rule::Lookup;
use crate::table::Key;
use crate::Index;
use std::sync::atomic::Ordering;

/// Lock-free reads of the chains that may meet a place a writer is moving (each such read is
/// done again) before the reader takes the writers' mutex, under which nothing moves: a
/// move is a few stores, so a second read nearly always finds the key's new place.
pub(crate) const WALK_TRIES: u32 = 4;

/// The words of the bitsets a walk over an index of up to 128 slots keeps in arrays
/// ([`Index::walk_sized`]).
const NARROW: usize = 2;

/// How many leading hashes `a` and `b` share (four compared at a time while they agree).
#[inline]
fn common_prefix(a: &[u64], b: &[u64]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut k = 0;
    while k + 4 <= n && a[k..k + 4] == b[k..k + 4] {
        k += 4;
    }
    while k < n && a[k] == b[k] {
        k += 1;
    }
    k
}

impl Index {
    /// One slot's hit under the release's lookup: blocks for a single full-attention group,
    /// tokens for several groups.
    pub(crate) fn slot_hit(&self, req: &Request<'_>, slot: u32) -> usize {
        let present = |g: usize, j: usize| {
            req.block_hashes.get(j).is_some_and(|&h| {
                self.holds_now(
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
                lookup::vllm_hit_tokens_within(&self.opts.groups, self.max_hit(req), present)
            }
            _ => {
                let max_blocks = self.blocks_in(self.max_hit(req));
                lookup::prefix_hit(max_blocks, |j| present(0, j))
            }
        }
    }

    /// Whether `slot` holds `key` now (the per-slot answers, outside the writers' mutex): the
    /// table, or the chains for a chain key, read again when a writer was moving its place,
    /// and after [`WALK_TRIES`] such reads under the writers' mutex.
    pub(crate) fn holds_now(&self, key: &Key, slot: u32) -> bool {
        if !self.in_chains(key) {
            return self.table.holds(key, slot);
        }
        for _ in 0..WALK_TRIES {
            if let Some(held) = self.runs.holds_now(key.hash, slot) {
                return held;
            }
        }
        let mut w = self.runs.session();
        self.runs
            .holding(&mut w, key.hash, slot)
            .is_some_and(|h| h.holds)
    }

    /// [`Index::walk_runs`] until a walk meets no place a writer was moving: walked again
    /// from the same candidates (counted in [`Index::walk_fallbacks`]), and after
    /// [`WALK_TRIES`] such walks under the writers' mutex, where nothing moves.
    pub(crate) fn walk_runs_until_done(&self, req: &Request<'_>, s: &mut Scratch) {
        s.cand_bits.clear();
        s.cand_bits.extend_from_slice(&s.alive);
        let mut tries = 1;
        // The places as they are now, loaded again for each walk.
        while !self.walk_runs(req, s, &self.runs.places.read().slots) {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            s.alive.clear();
            s.alive.extend_from_slice(&s.cand_bits);
            if tries == WALK_TRIES {
                let _w = self.runs.writer();
                let done = self.walk_runs(req, s, &self.runs.places.read().slots);
                debug_assert!(done, "no place moves under the writers' mutex");
                return;
            }
            tries += 1;
        }
    }

    /// Every candidate's prefix hit (one full-attention group) through the chains: one probe
    /// of the places per run the request's blocks pass through, the run's hashes compared in a
    /// loop and its cover ANDed with the candidates once. False when a place read was being
    /// moved by a writer (the caller walks again, [`Index::walk_runs_until_done`]; the hits
    /// written so far are overwritten).
    /// `zero` ends with the candidates whose hit is 0; `hit` is written for the other
    /// candidates only (a candidate in `zero` may keep an earlier prediction's entry).
    pub(crate) fn walk_runs(&self, req: &Request<'_>, s: &mut Scratch, places: &Slots) -> bool {
        let Scratch {
            hit,
            alive,
            keep,
            zero,
            ..
        } = s;
        let hit = &mut hit[..];
        self.walk_sized(req, places, alive, keep, zero, |slot, j| hit[slot] = j)
    }

    /// [`Index::walk_runs_with`] with `keep` and `zero` sized to `alive` and cleared. On an
    /// index of up to 128 slots (the common size) the three bitsets are arrays of a known
    /// length during the walk (`alive` and `zero` copied back after it, `keep` left as it
    /// was): no bounds checks and no loops over a length read from memory (a tenth of the
    /// instructions of a prediction over 128 slots).
    #[inline(always)]
    pub(crate) fn walk_sized(
        &self,
        req: &Request<'_>,
        places: &Slots,
        alive: &mut [u64],
        keep: &mut Vec<u64>,
        zero: &mut Vec<u64>,
        put: impl FnMut(usize, u32),
    ) -> bool {
        let n = alive.len();
        if n <= NARROW {
            let mut a = [0u64; NARROW];
            a[..n].copy_from_slice(alive);
            let (mut k, mut z) = ([0u64; NARROW], [0u64; NARROW]);
            let walked = self.walk_runs_with(req, places, &mut a, &mut k, &mut z, put);
            alive.copy_from_slice(&a[..n]);
            zero.clear();
            zero.extend_from_slice(&z[..n]);
            walked
        } else {
            keep.clear();
            keep.resize(n, 0);
            zero.clear();
            zero.resize(n, 0);
            self.walk_runs_with(req, places, alive, keep, zero, put)
        }
    }

    /// [`Index::walk_runs`] handing each candidate's non-zero hit to `put(slot, hit)` (once per
    /// candidate, in no particular order) instead of writing the scratch's `hit`: the
    /// prediction of a moment no rank changed writes the answers straight into its output.
    /// `alive` holds the candidates (bitset); `keep` and `zero` are working sets, at least as
    /// long and all zero ([`Index::walk_sized`] makes them so; `zero` ends with the candidates
    /// whose hit is 0, which `put` never sees). False as for [`Index::walk_runs`]: what `put`
    /// was handed by then is to be dropped.
    #[inline(always)]
    pub(crate) fn walk_runs_with(
        &self,
        req: &Request<'_>,
        places: &Slots,
        alive: &mut [u64],
        keep: &mut [u64],
        zero: &mut [u64],
        mut put: impl FnMut(usize, u32),
    ) -> bool {
        debug_assert!(keep.len() >= alive.len() && zero.len() >= alive.len());
        debug_assert!(keep.iter().chain(zero.iter()).all(|&w| w == 0));
        let max_blocks = self.blocks_in(self.max_hit(req));
        let hashes = &req.block_hashes[..max_blocks];
        #[cfg(test)]
        if crate::runs::stale::take() {
            return false;
        }
        let mut j = 0usize;
        while j < max_blocks && alive.iter().any(|&a| a != 0) {
            let h = hashes[j];
            let Some(loc) = places.find(h) else {
                break;
            };
            // The run, under its shard's read lock until the next block (a place that names no
            // run, or another block, was being moved by a writer).
            let (shard, at) = self.runs.shard_of(loc.run);
            let Some(run) = shard.get(at) else {
                return false;
            };
            let Some(i) = run.index_of(loc.pos) else {
                return false;
            };
            let hs = run.hashes();
            if hs[i] != h {
                return false;
            }
            // Where the next run's walk would begin if the request goes on past this run's end:
            // its places entry comes in while this run is compared.
            if let Some(&next) = hashes.get(j + hs.len() - i) {
                places.prefetch(std::iter::once(next));
            }
            let matched = 1 + common_prefix(&hs[i + 1..], &hashes[j + 1..]);
            // A partial holder holds the matched blocks up to its end: it stays a candidate
            // when it holds them all, else its hit ends there (one pass over the partial
            // holders; the survivors, in `keep`, are ORed with the cover below; `keep` is all
            // zero between runs). Partial holders are outside the cover: when every candidate
            // left is in it, none of them is one.
            let outside = run.has_partial()
                && alive
                    .iter()
                    .enumerate()
                    .any(|(w, &a)| a & !run.cover_word(w) != 0);
            if outside {
                for (s, held) in run.partial() {
                    let (w, bit) = (s as usize / 64, 1u64 << (s % 64));
                    let Some(a) = alive.get_mut(w) else {
                        continue;
                    };
                    if *a & bit == 0 {
                        continue;
                    }
                    // `held.saturating_sub(i) < matched`: the request's matched blocks of
                    // this run end at array index `i + matched`.
                    if held < i + matched {
                        let reach = held.saturating_sub(i);
                        if j + reach == 0 {
                            zero[w] |= bit;
                        } else {
                            put(s as usize, (j + reach) as u32);
                        }
                        *a &= !bit;
                    } else {
                        keep[w] |= bit;
                    }
                }
            }
            for ((w, a), k) in alive.iter_mut().enumerate().zip(keep.iter_mut()) {
                let c = run.cover_word(w) | std::mem::take(k);
                let mut gone = *a & !c;
                if j == 0 {
                    // Most candidates of a wide index drop out here: their hit is the bit
                    // alone, no entry written.
                    zero[w] |= gone;
                    gone = 0;
                }
                while gone != 0 {
                    let b = gone.trailing_zeros() as usize;
                    gone &= gone - 1;
                    put(w * 64 + b, j as u32);
                }
                *a &= c;
            }
            j += matched;
        }
        for (w, &a) in alive.iter().enumerate() {
            if j == 0 {
                zero[w] |= a;
                continue;
            }
            let mut left = a;
            while left != 0 {
                let b = left.trailing_zeros() as usize;
                left &= left - 1;
                put(w * 64 + b, j as u32);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{common_prefix, WALK_TRIES};
    use crate::runs::stale;
    use crate::table::Key;
    use crate::testing::{endpoint, index};
    use crate::Request;
    use proptest::prelude::*;

    /// A walk, or a per-slot read, that keeps meeting a place a writer is moving is done again,
    /// and after `WALK_TRIES` such tries under the writers' mutex: the same answer.
    #[test]
    fn reads_that_keep_meeting_moved_places_end_under_the_writers_mutex() {
        let ix = index(4);
        for name in ["a", "b"] {
            ix.add_endpoint(endpoint(name, true)).unwrap();
        }
        // Slot 0 holds blocks 1..=4, slot 1 blocks 1..=2 (a partial holder of the run).
        {
            let mut w = ix.runs.session();
            for (slot, n) in [(0u32, 4u64), (1, 2)] {
                let (mut parent, mut at) = (None, None);
                for h in 1..=n {
                    let c = ix.runs.store(&mut w, h, slot, parent, at);
                    (parent, at) = (Some(h), Some(c.loc));
                }
            }
        }
        let hashes = [1u64, 2, 3, 4, 5];
        let req = Request {
            block_hashes: &hashes,
            prompt_tokens: 5 * 16 + 1,
            max_cached_tokens: None,
        };
        let (mut want, mut got) = (Vec::new(), Vec::new());
        ix.predict(&req, &mut want).unwrap();
        let tokens: Vec<_> = want.iter().map(|p| p.outcome.tokens()).collect();
        assert_eq!(tokens, [Some(64), Some(32)]);
        // The quiet path's walk, then WALK_TRIES walks fail; the last walk holds the mutex.
        stale::force(1 + WALK_TRIES);
        ix.predict(&req, &mut got).unwrap();
        assert_eq!((got, stale::left()), (want, 0));
        assert_eq!(ix.walk_fallbacks(), u64::from(WALK_TRIES));
        for (hash, slot, held) in [(3, 0, true), (3, 1, false), (2, 1, true), (9, 0, false)] {
            let key = Key {
                hash,
                group: 0,
                medium: 0,
            };
            stale::force(WALK_TRIES);
            assert_eq!(ix.holds_now(&key, slot), held, "block {hash}, slot {slot}");
        }
    }

    proptest! {
        /// The shared prefix equals the element-by-element count, wherever the first
        /// difference falls (in or after a group of four, past either end).
        #[test]
        fn common_prefix_equals_the_plain_count(
            a in prop::collection::vec(0..3u64, 0..40),
            b in prop::collection::vec(0..3u64, 0..40),
            shared in prop::collection::vec(any::<u64>(), 0..20),
        ) {
            let a: Vec<u64> = shared.iter().chain(&a).copied().collect();
            let b: Vec<u64> = shared.iter().chain(&b).copied().collect();
            let want = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), want);
        }
    }
}
