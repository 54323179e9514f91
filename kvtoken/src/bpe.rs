//! Byte-level BPE over token ids: the same merge order as HF `tokenizers` (always the adjacent
//! pair of lowest merge rank, leftmost on ties), without strings.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[cfg(test)]
use crate::merge_map::Merge;
use crate::merge_map::MergeMap;
use crate::runs::{merge_runs, RunScratch};

/// Words of at most this many symbols are merged by rescanning a rank array (cache friendly);
/// longer ones with a priority queue ([`merge_queue`], and [`merge_buckets`] from
/// [`LONG_WORD`] symbols on), so no word costs quadratic time.
const SMALL_WORD: usize = 48;

/// Reusable buffers for [`merge`].
#[derive(Default)]
pub(crate) struct BpeScratch {
    syms: Vec<u32>,
    ranks: Vec<(u32, u32)>,
    prev: Vec<usize>,
    next: Vec<usize>,
    heap: BinaryHeap<Reverse<(u32, usize, u32)>>,
    prev32: Vec<u32>,
    next32: Vec<u32>,
    queue: MergeQueue,
    nodes: Vec<Node>,
    rank_queue: RankQueue,
    runs: RunScratch,
    /// Where [`merge_buckets`] leaves what its look-ahead reads (so they are not optimised
    /// away); never used.
    touched: u32,
}

/// A [`BpeScratch`] that merged a word of more symbols than this gives its buffers back
/// ([`BpeScratch::trim`]): what a thread keeps is sized by ordinary words, not by the longest
/// input it ever saw.
pub(crate) const MAX_KEPT_SYMS: usize = 1 << 15;

/// A [`BpeScratch`] whose rank queue took more pushes than this since it was made gives its
/// buffers back. A bucket's buffer is at most twice the longest it ever was, or four
/// positions after its first push, so the buffers together hold at most four positions per
/// push: this bounds them (8 MB, besides 24 bytes per rank for the bucket array) however many
/// long words pass through.
pub(crate) const MAX_KEPT_PUSHES: usize = 1 << 19;

impl BpeScratch {
    /// Gives the buffers back when they grew past what ordinary words need
    /// ([`MAX_KEPT_SYMS`], [`MAX_KEPT_PUSHES`]). `syms` holds every word merged, whole, so its
    /// capacity is the longest word since the last trim, and every per-word buffer is a
    /// small multiple of it; the rank queue's buckets keep their capacity from word to word,
    /// so they are bounded by the pushes counted instead.
    pub(crate) fn trim(&mut self) {
        if self.syms.capacity() > MAX_KEPT_SYMS || self.rank_queue.pushed > MAX_KEPT_PUSHES {
            *self = BpeScratch::default();
        }
    }

    /// Whether the buffers are within what [`BpeScratch::trim`] keeps.
    #[cfg(test)]
    pub(crate) fn within_caps(&self) -> bool {
        self.syms.capacity() <= MAX_KEPT_SYMS && self.rank_queue.pushed <= MAX_KEPT_PUSHES
    }

    /// Bytes the buffers hold (their capacities), for the tests of [`BpeScratch::trim`].
    #[cfg(test)]
    pub(crate) fn kept_bytes(&self) -> usize {
        use std::mem::size_of_val;
        fn cap<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        let q = &self.rank_queue;
        cap(&self.syms)
            + cap(&self.ranks)
            + cap(&self.prev)
            + cap(&self.next)
            + self.heap.capacity() * size_of_val(&Reverse((0u32, 0usize, 0u32)))
            + cap(&self.prev32)
            + cap(&self.next32)
            + cap(&self.nodes)
            + cap(&q.buckets)
            + q.buckets.iter().map(cap).sum::<usize>()
            + cap(&q.cur)
            + q.low.capacity() * 8
            + self.queue.buckets.iter().map(cap).sum::<usize>()
            + cap(&self.queue.spare)
    }
}

/// One symbol of a word in [`merge_buckets`]: its id ([`NONE`] once merged into its left
/// neighbour) and the positions of its live neighbours, side by side so that a merge
/// touches one or two cache lines.
#[derive(Clone, Copy)]
struct Node {
    sym: u32,
    prev: u32,
    next: u32,
}

/// A min-priority queue of `(rank, position)` pairs (ordered by rank, then position) with
/// one bucket per rank: a push is an append, a pop of a new rank sorts that rank's bucket
/// (BPE pushes a rank's positions mostly in increasing order, so the sort is mostly a
/// check). Ranks are visited in increasing order; a pair pushed at or below the rank being
/// popped (a merge table where using a token can come before making it) goes to a binary
/// heap that pops first when its minimum is lower. Pops always return the minimum present,
/// for any order of pushes (`rank_queue_pops_in_order` checks it against a binary heap).
///
/// Memory: one `Vec` per rank of the largest table seen (24 bytes each: 3.6 MB for
/// Qwen2.5's 151k merges, 6.7 MB for Llama 3.1's 280k) plus the buckets' capacity, held by
/// a [`BpeScratch`] from its first word of [`LONG_WORD`] symbols on.
#[derive(Default)]
pub(crate) struct RankQueue {
    /// Positions of each rank `>= floor`, unsorted.
    buckets: Vec<Vec<u32>>,
    /// Bit `r` set iff `buckets[r]` is non-empty.
    bits: Vec<u64>,
    /// Bit `w` set iff `bits[w] != 0`.
    summary: Vec<u64>,
    /// The sorted positions of rank `floor - 1`, popped from `at` on.
    cur: Vec<u32>,
    at: usize,
    /// Ranks below this are pushed to `low`.
    floor: u64,
    /// Pairs of rank `< floor`, as `rank << 32 | position`.
    low: BinaryHeap<Reverse<u64>>,
    /// Positions in `buckets`.
    len: usize,
    /// `cur[..ahead_to]` were handed out by [`RankQueue::ahead`].
    ahead_to: usize,
    /// Positions pushed to `buckets` since the queue was made (what bounds their capacity).
    pushed: usize,
}

/// How many positions [`RankQueue::ahead`] hands out at once.
const AHEAD: usize = 64;

impl RankQueue {
    /// Empties the queue and makes room for ranks below `ranks`.
    fn reset(&mut self, ranks: usize) {
        if self.len > 0 {
            for b in &mut self.buckets {
                b.clear();
            }
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.summary.iter_mut().for_each(|w| *w = 0);
            self.len = 0;
        }
        if self.buckets.len() < ranks {
            self.buckets.resize_with(ranks, Vec::new);
        }
        let words = self.buckets.len().div_ceil(64);
        self.bits.resize(words, 0);
        self.summary.resize(words.div_ceil(64), 0);
        self.cur.clear();
        self.at = 0;
        self.ahead_to = 0;
        self.floor = 0;
        self.low.clear();
    }

    /// The next positions of the current rank that are about to be popped and were not
    /// handed out before (empty while enough are): the merge loop reads their symbols in
    /// one branch-free pass, so the cache misses of a whole window overlap instead of
    /// stalling one pop each.
    #[inline]
    fn ahead(&mut self) -> &[u32] {
        if self.at + AHEAD / 2 < self.ahead_to {
            return &[];
        }
        let from = self.ahead_to.max(self.at);
        let to = (from + AHEAD).min(self.cur.len());
        self.ahead_to = to;
        self.cur.get(from..to).unwrap_or_default()
    }

    #[inline(always)]
    fn push(&mut self, rank: u32, pos: u32) {
        let r = rank as usize;
        if u64::from(rank) < self.floor {
            self.low
                .push(Reverse((u64::from(rank) << 32) | u64::from(pos)));
            return;
        }
        if r >= self.buckets.len() {
            // Not after `reset(map.ranks)`; grown rather than queued wrongly.
            self.grow(r + 1);
        }
        if let Some(b) = self.buckets.get_mut(r) {
            if b.is_empty() {
                if let Some(w) = self.bits.get_mut(r / 64) {
                    *w |= 1 << (r % 64);
                }
                if let Some(w) = self.summary.get_mut(r / 4096) {
                    *w |= 1 << ((r / 64) % 64);
                }
            }
            b.push(pos);
            self.len += 1;
            self.pushed += 1;
        }
    }

    /// Grows the buckets to hold rank `ranks - 1`, keeping what is queued.
    #[cold]
    fn grow(&mut self, ranks: usize) {
        self.buckets.resize_with(ranks, Vec::new);
        let words = ranks.div_ceil(64);
        self.bits.resize(words, 0);
        self.summary.resize(words.div_ceil(64), 0);
    }

    /// The lowest rank `>= from` with a non-empty bucket.
    fn next_rank(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let first = *self.bits.get(w)? & (u64::MAX << (from % 64));
        if first != 0 {
            return Some(w * 64 + first.trailing_zeros() as usize);
        }
        w += 1;
        let mut sw = w / 64;
        let mut mask = if w.is_multiple_of(64) {
            u64::MAX
        } else {
            u64::MAX << (w % 64)
        };
        loop {
            let s = *self.summary.get(sw)? & mask;
            if s != 0 {
                let w = sw * 64 + s.trailing_zeros() as usize;
                let bits = *self.bits.get(w)?;
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            sw += 1;
            mask = u64::MAX;
        }
    }

    /// The pair of lowest rank, leftmost on ties.
    #[inline]
    fn pop(&mut self) -> Option<(u32, u32)> {
        loop {
            let unpack = |k: u64| ((k >> 32) as u32, k as u32);
            if let Some(&pos) = self.cur.get(self.at) {
                let head = ((self.floor - 1) << 32) | u64::from(pos);
                if let Some(&Reverse(l)) = self.low.peek() {
                    if l < head {
                        self.low.pop();
                        return Some(unpack(l));
                    }
                }
                self.at += 1;
                return Some(unpack(head));
            }
            if let Some(Reverse(l)) = self.low.pop() {
                return Some(unpack(l));
            }
            if self.len == 0 {
                return None;
            }
            let r = self.next_rank(self.floor as usize)?;
            let bucket = self.buckets.get_mut(r)?;
            self.cur.clear();
            std::mem::swap(&mut self.cur, bucket);
            self.len -= self.cur.len();
            if let Some(w) = self.bits.get_mut(r / 64) {
                *w &= !(1 << (r % 64));
                if *w == 0 {
                    if let Some(s) = self.summary.get_mut(r / 4096) {
                        *s &= !(1 << ((r / 64) % 64));
                    }
                }
            }
            if !self.cur.is_sorted() {
                // A few ascending runs (one per rank whose merges pushed here): merged.
                self.cur.sort();
            }
            self.at = 0;
            self.ahead_to = 0;
            self.floor = r as u64 + 1;
        }
    }
}

/// A min-priority queue of `u64` keys that is fast when keys are mostly pushed in increasing
/// order (BPE: a merge mostly creates pairs of higher rank): a radix heap for keys not below
/// the last key popped from it, and a binary heap for the others (which are then below every
/// key in the radix heap, so are popped first). Pops always return the minimum key present.
pub(crate) struct MergeQueue {
    /// Bucket `i > 0` holds keys whose highest bit differing from `last` is bit `i - 1`;
    /// bucket 0 holds keys equal to `last`.
    buckets: [Vec<u64>; 65],
    /// Keys below `last`.
    low: BinaryHeap<Reverse<u64>>,
    last: u64,
    /// Keys in `buckets`.
    len: usize,
    spare: Vec<u64>,
}

impl Default for MergeQueue {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| Vec::new()),
            low: BinaryHeap::new(),
            last: 0,
            len: 0,
            spare: Vec::new(),
        }
    }
}

impl MergeQueue {
    fn clear(&mut self) {
        for b in &mut self.buckets {
            b.clear();
        }
        self.low.clear();
        self.last = 0;
        self.len = 0;
    }

    #[inline]
    fn bucket_of(&self, key: u64) -> usize {
        64 - (key ^ self.last).leading_zeros() as usize
    }

    #[inline]
    fn push(&mut self, key: u64) {
        if key < self.last {
            self.low.push(Reverse(key));
            return;
        }
        let i = self.bucket_of(key);
        if let Some(b) = self.buckets.get_mut(i) {
            b.push(key);
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<u64> {
        if let Some(Reverse(key)) = self.low.pop() {
            return Some(key);
        }
        if self.len == 0 {
            return None;
        }
        if self.buckets[0].is_empty() {
            let i = self.buckets.iter().position(|b| !b.is_empty())?;
            let mut items =
                std::mem::replace(&mut self.buckets[i], std::mem::take(&mut self.spare));
            self.last = items.iter().copied().min()?;
            for &key in &items {
                let j = self.bucket_of(key);
                if let Some(b) = self.buckets.get_mut(j) {
                    b.push(key);
                }
            }
            items.clear();
            self.spare = items;
        }
        self.len -= 1;
        self.buckets[0].pop()
    }
}

/// Words of at least this many symbols are merged by [`merge_buckets`].
const LONG_WORD: usize = 128;

/// Rank marking "no merge" for a pair.
const NONE: u32 = u32::MAX;

/// Merges the symbols `word` (byte-level ids) and appends the resulting ids to `out`.
pub(crate) fn merge(
    merges: &MergeMap,
    word: impl Iterator<Item = u32>,
    scratch: &mut BpeScratch,
    out: &mut Vec<u32>,
) {
    scratch.syms.clear();
    scratch.syms.extend(word);
    if scratch.syms.len() <= SMALL_WORD {
        merge_small(merges, scratch, out);
    } else if merge_runs(merges, &scratch.syms, &mut scratch.runs, out) {
        // A few runs of one symbol each (white space, `====`, `aaaa`): merged run-wise.
    } else if scratch.syms.len() >= LONG_WORD && scratch.syms.len() < u32::MAX as usize {
        merge_buckets(merges, scratch, out);
    } else if scratch.syms.len() < u32::MAX as usize {
        merge_queue(merges, scratch, out);
    } else {
        merge_heap(merges, scratch, out);
    }
}

/// [`merge_heap`] with `u32` links and `(rank << 32 | position)` keys in a [`MergeQueue`]:
/// the same merges in the same order (lowest rank, then leftmost), less memory traffic.
/// Needs fewer than `u32::MAX` symbols.
fn merge_queue(merges: &MergeMap, s: &mut BpeScratch, out: &mut Vec<u32>) {
    let n = s.syms.len();
    let (syms, prev, next, q) = (&mut s.syms, &mut s.prev32, &mut s.next32, &mut s.queue);
    prev.clear();
    next.clear();
    prev.extend((0..n as u32).map(|i| i.wrapping_sub(1)));
    next.extend(1..=n as u32);
    q.clear();
    let key = |rank: u32, pos: u32| (u64::from(rank) << 32) | u64::from(pos);
    for (i, w) in syms.windows(2).enumerate() {
        if let Some((rank, _)) = merges.get(w[0], w[1]) {
            q.push(key(rank, i as u32));
        }
    }
    // A removed symbol is marked by NONE in syms.
    while let Some(k) = q.pop() {
        let (rank, pos) = ((k >> 32) as u32, k as u32 as usize);
        let Some(&left) = syms.get(pos) else {
            continue;
        };
        let Some(&right_pos) = next.get(pos) else {
            continue;
        };
        let right_pos = right_pos as usize;
        let (Some(&right), true) = (syms.get(right_pos), left != NONE) else {
            continue;
        };
        // Stale entry: the pair at `pos` is no longer the one of this rank.
        let new_id = match merges.get(left, right) {
            Some((r, id)) if r == rank => id,
            _ => continue,
        };
        syms[pos] = new_id;
        syms[right_pos] = NONE;
        let after = next.get(right_pos).copied().unwrap_or(n as u32);
        next[pos] = after;
        if let Some(p) = prev.get_mut(after as usize) {
            *p = pos as u32;
        }
        let before = prev[pos];
        if let Some(&b) = syms.get(before as usize) {
            if let Some((r, _)) = merges.get(b, new_id) {
                q.push(key(r, before));
            }
        }
        if let Some(&a) = syms.get(after as usize) {
            if let Some((r, _)) = merges.get(new_id, a) {
                q.push(key(r, pos as u32));
            }
        }
    }
    out.extend(syms.iter().copied().filter(|&id| id != NONE));
}

/// [`merge_heap`] over a flat [`Node`] array with a [`RankQueue`]: the same merges in the
/// same order (lowest rank, then leftmost), each merge touching its neighbourhood only.
/// Needs fewer than `u32::MAX` symbols.
fn merge_buckets(merges: &MergeMap, s: &mut BpeScratch, out: &mut Vec<u32>) {
    let n = s.syms.len();
    let (nodes, q) = (&mut s.nodes, &mut s.rank_queue);
    nodes.clear();
    nodes.extend(s.syms.iter().enumerate().map(|(i, &sym)| Node {
        sym,
        prev: (i as u32).wrapping_sub(1),
        next: i as u32 + 1,
    }));
    q.reset(merges.rank_count());
    for (i, w) in s.syms.windows(2).enumerate() {
        if let Some((rank, _)) = merges.get(w[0], w[1]) {
            q.push(rank, i as u32);
        }
    }
    let mut touched = 0u32;
    while let Some((rank, pos)) = q.pop() {
        for &p in q.ahead() {
            touched ^= nodes.get(p as usize).map_or(0, |n| n.sym);
        }
        let pos = pos as usize;
        let Some(&Node {
            sym: left, next, ..
        }) = nodes.get(pos)
        else {
            continue;
        };
        let right_pos = next as usize;
        let Some(&Node {
            sym: right,
            next: after,
            ..
        }) = nodes.get(right_pos)
        else {
            continue;
        };
        if left == NONE {
            continue;
        }
        // Stale entry: the pair at `pos` is no longer the one of this rank.
        let new_id = match merges.get(left, right) {
            Some((r, id)) if r == rank => id,
            _ => continue,
        };
        let before = match nodes.get_mut(pos) {
            Some(node) => {
                node.sym = new_id;
                node.next = after;
                node.prev
            }
            None => continue,
        };
        if let Some(node) = nodes.get_mut(right_pos) {
            node.sym = NONE;
        }
        if let Some(node) = nodes.get_mut(after as usize) {
            node.prev = pos as u32;
            if let Some((r, _)) = merges.get(new_id, node.sym) {
                q.push(r, pos as u32);
            }
        }
        if let Some(node) = nodes.get(before as usize) {
            if let Some((r, _)) = merges.get(node.sym, new_id) {
                q.push(r, before);
            }
        }
    }
    debug_assert!(n == nodes.len());
    s.touched = touched;
    out.extend(nodes.iter().map(|n| n.sym).filter(|&id| id != NONE));
}

/// A merges table of `(pair, merged id)` with ranks the list positions, as in `tokenizers`.
#[cfg(test)]
pub(crate) fn ranked(table: &[((u32, u32), u32)]) -> Vec<Merge> {
    table
        .iter()
        .enumerate()
        .map(|(r, &(p, id))| (p, (r as u32, id)))
        .collect()
}

/// The slow, obvious twin of [`merge`] for tests: always the `tokenizers` algorithm.
#[cfg(test)]
pub(crate) fn merge_reference(
    merges: &MergeMap,
    word: impl Iterator<Item = u32>,
    scratch: &mut BpeScratch,
    out: &mut Vec<u32>,
) {
    scratch.syms.clear();
    scratch.syms.extend(word);
    merge_heap(merges, scratch, out);
}

/// Rescans the ranks of the adjacent pairs for the lowest (leftmost on ties) after each merge.
fn merge_small(merges: &MergeMap, s: &mut BpeScratch, out: &mut Vec<u32>) {
    let syms = &mut s.syms;
    let ranks = &mut s.ranks;
    ranks.clear();
    ranks.extend(
        syms.windows(2)
            .map(|w| merges.get(w[0], w[1]).unwrap_or((NONE, 0))),
    );
    loop {
        let mut best = NONE;
        let mut at = usize::MAX;
        for (i, &(r, _)) in ranks.iter().enumerate() {
            if r < best {
                best = r;
                at = i;
            }
        }
        if best == NONE {
            break;
        }
        let Some(&(_, new_id)) = ranks.get(at) else {
            break;
        };
        // syms[at], syms[at + 1] -> new_id; pair `at` disappears, its neighbours change.
        syms[at] = new_id;
        syms.remove(at + 1);
        ranks.remove(at);
        if at > 0 {
            ranks[at - 1] = merges.get(syms[at - 1], new_id).unwrap_or((NONE, 0));
        }
        if at < ranks.len() {
            ranks[at] = merges.get(new_id, syms[at + 1]).unwrap_or((NONE, 0));
        }
    }
    out.extend_from_slice(syms);
}

/// The `tokenizers` algorithm: a heap of `(rank, position)` over a linked list of symbols.
fn merge_heap(merges: &MergeMap, s: &mut BpeScratch, out: &mut Vec<u32>) {
    let n = s.syms.len();
    s.prev.clear();
    s.next.clear();
    s.prev.extend((0..n).map(|i| i.wrapping_sub(1)));
    s.next.extend(1..=n);
    s.heap.clear();
    for (i, w) in s.syms.windows(2).enumerate() {
        if let Some((rank, new_id)) = merges.get(w[0], w[1]) {
            s.heap.push(Reverse((rank, i, new_id)));
        }
    }
    // A removed symbol is marked by NONE in syms.
    while let Some(Reverse((rank, pos, new_id))) = s.heap.pop() {
        let Some(&left) = s.syms.get(pos) else {
            continue;
        };
        let right_pos = s.next[pos];
        let (Some(&right), true) = (s.syms.get(right_pos), left != NONE) else {
            continue;
        };
        // Stale entry: the pair at `pos` is no longer the one this entry was made for.
        match merges.get(left, right) {
            Some((r, id)) if r == rank && id == new_id => {}
            _ => continue,
        }
        s.syms[pos] = new_id;
        s.syms[right_pos] = NONE;
        let after = s.next[right_pos];
        s.next[pos] = after;
        if let Some(p) = s.prev.get_mut(after) {
            *p = pos;
        }
        let before = s.prev[pos];
        if let Some(&b) = s.syms.get(before) {
            if let Some((r, id)) = merges.get(b, new_id) {
                s.heap.push(Reverse((r, before, id)));
            }
        }
        if let Some(&a) = s.syms.get(after) {
            if let Some((r, id)) = merges.get(new_id, a) {
                s.heap.push(Reverse((r, pos, id)));
            }
        }
    }
    out.extend(s.syms.iter().copied().filter(|&id| id != NONE));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn table() -> MergeMap {
        // ids 0..4 are symbols a b c d; merges build ab(10) bc(11) abc(12) cd(13) aa(14)
        MergeMap::new(&[
            ((1, 2), (0, 11)),
            ((0, 1), (1, 10)),
            ((10, 2), (2, 12)),
            ((0, 11), (3, 12)),
            ((2, 3), (4, 13)),
            ((0, 0), (5, 14)),
            ((14, 14), (6, 15)),
        ])
    }

    proptest! {
        #[test]
        fn small_and_heap_agree(word in proptest::collection::vec(0u32..4, 0..120)) {
            let m = table();
            let mut s = BpeScratch::default();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            s.syms.clear();
            s.syms.extend(word.iter().copied());
            merge_small(&m, &mut s, &mut a);
            s.syms.clear();
            s.syms.extend(word.iter().copied());
            merge_heap(&m, &mut s, &mut b);
            prop_assert_eq!(&a, &b);
            let mut c = Vec::new();
            s.syms.clear();
            s.syms.extend(word.iter().copied());
            merge_queue(&m, &mut s, &mut c);
            prop_assert_eq!(&a, &c);
            let mut d = Vec::new();
            s.syms.clear();
            s.syms.extend(word.iter().copied());
            merge_buckets(&m, &mut s, &mut d);
            prop_assert_eq!(a, d);
        }

        /// Random merge tables (merged ids reused as inputs in any order, so pushes
        /// below the last popped rank happen): the queue-based merge equals the heap one.
        #[test]
        fn queue_and_heap_agree_on_random_tables(
            table in proptest::collection::vec(((0u32..12, 0u32..12), 0u32..12), 0..60),
            word in proptest::collection::vec(0u32..12, 0..400),
        ) {
            let m = MergeMap::new(&ranked(&table));
            let mut s = BpeScratch::default();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            s.syms.clear();
            s.syms.extend(word.iter().copied());
            merge_heap(&m, &mut s, &mut a);
            s.syms.clear();
            s.syms.extend(word.iter().copied());
            merge_queue(&m, &mut s, &mut b);
            prop_assert_eq!(&a, &b);
            let mut c = Vec::new();
            s.syms.clear();
            s.syms.extend(word.iter().copied());
            merge_buckets(&m, &mut s, &mut c);
            prop_assert_eq!(a, c);
        }

        /// The rank queue pops pairs in increasing order, whatever the order of pushes,
        /// including pushes below the rank last popped; reused across rounds.
        #[test]
        fn rank_queue_pops_in_order(
            rounds in proptest::collection::vec(
                proptest::collection::vec(proptest::option::of((0u32..200, 0u32..50)), 0..300),
                1..3,
            ),
        ) {
            let mut q = RankQueue::default();
            for ops in rounds {
                q.reset(100);
                let mut model = BinaryHeap::new();
                for op in ops {
                    match op {
                        Some((r, p)) => {
                            q.push(r, p);
                            model.push(Reverse((r, p)));
                        }
                        None => prop_assert_eq!(q.pop(), model.pop().map(|Reverse(k)| k)),
                    }
                }
                while let Some(Reverse(k)) = model.pop() {
                    prop_assert_eq!(q.pop(), Some(k));
                }
                prop_assert_eq!(q.pop(), None);
            }
        }

        /// The merge map finds every pair of its table (the last duplicate's value) and no
        /// other, filter or not.
        #[test]
        fn merge_map_is_the_hash_map(
            table in proptest::collection::vec(((0u32..40, 0u32..40), (0u32..1000, 0u32..99)), 0..300),
        ) {
            let m = MergeMap::new(&table);
            let model: HashMap<(u32, u32), (u32, u32)> = table.iter().copied().collect();
            for a in 0..45 {
                for b in 0..45 {
                    prop_assert_eq!(m.get(a, b), model.get(&(a, b)).copied());
                }
            }
        }

        /// The queue pops keys in increasing order, whatever the order of pushes.
        #[test]
        fn queue_pops_in_order(ops in proptest::collection::vec(proptest::option::of(0u64..1 << 40), 0..300)) {
            let mut q = MergeQueue::default();
            let mut model = BinaryHeap::new();
            for op in ops {
                match op {
                    Some(k) => {
                        q.push(k);
                        model.push(Reverse(k));
                    }
                    None => prop_assert_eq!(q.pop(), model.pop().map(|Reverse(k)| k)),
                }
            }
            while let Some(Reverse(k)) = model.pop() {
                prop_assert_eq!(q.pop(), Some(k));
            }
            prop_assert_eq!(q.pop(), None);
        }
    }

    #[test]
    fn merges_lowest_rank_first() {
        let m = table();
        let mut s = BpeScratch::default();
        let mut out = Vec::new();
        merge(&m, [0, 1, 2].into_iter(), &mut s, &mut out);
        assert_eq!(out, [12]); // bc first (rank 0), then a+bc (rank 3)
        out.clear();
        merge(&m, [0, 0, 0, 0, 0].into_iter(), &mut s, &mut out);
        assert_eq!(out, [15, 0]);
    }

    /// A word of symbols cycling through `a b c d` (no run of one symbol: merged by the
    /// queue or the buckets, not run-wise).
    fn mixed_word(len: usize) -> impl Iterator<Item = u32> {
        (0..len).map(|i| [0, 1, 2, 3, 1, 0, 3, 2][i % 8])
    }

    /// After an ordinary word the buffers stay for the next one; after a word longer than
    /// `MAX_KEPT_SYMS` they are given back, and merging goes on the same.
    #[test]
    fn trim_gives_back_what_a_long_word_grew() {
        let m = table();
        let mut s = BpeScratch::default();
        let (mut out, mut want) = (Vec::new(), Vec::new());
        merge(&m, mixed_word(300), &mut s, &mut out);
        s.trim();
        let kept = s.kept_bytes();
        assert!(kept > 0, "an ordinary word's buffers are kept");
        merge(&m, mixed_word(300), &mut s, &mut Vec::new());
        s.trim();
        assert!(s.kept_bytes() >= kept, "and still kept after the next");
        out.clear();
        merge(&m, mixed_word(MAX_KEPT_SYMS + 1), &mut s, &mut out);
        assert!(s.kept_bytes() > MAX_KEPT_SYMS * 4);
        s.trim();
        assert_eq!(s.kept_bytes(), 0);
        merge_reference(&m, mixed_word(MAX_KEPT_SYMS + 1), &mut s, &mut want);
        assert_eq!(out, want);
        s.trim();
        assert_eq!(s.kept_bytes(), 0);
    }

    /// Many long words below `MAX_KEPT_SYMS`: what the rank queue's buckets keep stays within
    /// four positions per push counted, and the pushes counted trigger a trim.
    #[test]
    fn trim_bounds_the_rank_queue_over_many_words() {
        let m = table();
        let mut s = BpeScratch::default();
        let mut out = Vec::new();
        let mut trimmed = 0;
        for _ in 0..400 {
            out.clear();
            merge(&m, mixed_word(4000), &mut s, &mut out);
            let pushed = s.rank_queue.pushed;
            let buckets: usize = s
                .rank_queue
                .buckets
                .iter()
                .map(|b| b.capacity())
                .sum::<usize>()
                + s.rank_queue.cur.capacity();
            assert!(
                buckets <= 4 * pushed.max(1),
                "{buckets} positions kept for {pushed} pushes"
            );
            s.trim();
            if s.kept_bytes() == 0 {
                trimmed += 1;
            }
            assert!(s.rank_queue.pushed <= MAX_KEPT_PUSHES);
        }
        assert!(trimmed > 0, "the pushes counted trimmed the scratch");
    }
}
