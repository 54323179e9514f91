//! BPE of a word made of a few runs of one symbol each (`"        "`, `"\t\t\t\t"`,
//! `"========"`, `"aaaa…"`), in time that does not grow with the runs' lengths.
//!
//! The `tokenizers` algorithm pops the pair of lowest rank, leftmost on ties. While no pair
//! of a rank below `r` is ever present, the pops of rank `r` are every occurrence of that
//! rank's pair, left to right, an occurrence consumed by the one on its left (`a a a` →
//! `aa a`) being skipped as the heap skips a stale entry. A merge of rank `r` makes a token
//! `X` and, for a moment, two new pairs: `(left, X)`, whose left symbol is final (every
//! occurrence to its left is done), so the pair is still there once the pass is over, and
//! `(X, y)` with `y` the symbol right of the occurrence, which the next occurrence may
//! consume. So [`merge_runs`] applies one rank per pass over a run-length list (a run of `n`
//! symbols `a` under the merge `(a, a)` becomes `⌊n/2⌋` of the merged token, then `n mod 2`
//! of `a`), checks every `(X, y)` it makes, and checks that the next rank present is above
//! `r`: where a table lets a lower rank appear (a merge that uses a token before the merge
//! that makes it, as some of Llama 3's do) it gives up and the caller merges the word with
//! the queue, so the answer is the heap's on any table.
//!
//! The slow twin is the heap ([`crate::bpe`]'s `merge_heap`): `runs_merge_like_the_heap`
//! compares them on random tables, `long_words_merge_like_the_reference` on every shipped
//! tokenizer.

use crate::merge_map::MergeMap;

/// A word of more runs than this is not merged run-wise (the per-rank pass touches every
/// run, so many runs would cost more than the queue).
pub(crate) const MAX_RUNS: usize = 16;

/// Reusable buffers for [`merge_runs`].
#[derive(Default)]
pub(crate) struct RunScratch {
    runs: Vec<(u32, u32)>,
    next: Vec<(u32, u32)>,
}

/// Appends `(sym, count)` to `runs`, joining it to the last run when it holds the same
/// symbol (so adjacent runs always differ).
#[inline]
fn push(runs: &mut Vec<(u32, u32)>, sym: u32, count: u32) {
    if count == 0 {
        return;
    }
    match runs.last_mut() {
        Some((s, c)) if *s == sym => *c += count,
        _ => runs.push((sym, count)),
    }
}

/// Merges `syms` run-wise and appends the resulting ids to `out`; `false` (and `out`
/// untouched) when the word has (or comes to have) more than [`MAX_RUNS`] runs, or the
/// table lets a pair of a lower rank appear while a rank is applied, for the caller to merge
/// another way. Needs fewer than `u32::MAX` symbols.
pub(crate) fn merge_runs(
    merges: &MergeMap,
    syms: &[u32],
    s: &mut RunScratch,
    out: &mut Vec<u32>,
) -> bool {
    if syms.len() >= u32::MAX as usize {
        return false;
    }
    let RunScratch { runs, next } = s;
    runs.clear();
    for &sym in syms {
        push(runs, sym, 1);
        if runs.len() > MAX_RUNS {
            return false;
        }
    }
    let mut last_rank = None;
    loop {
        // The pair of lowest rank present: inside a run of two or more, or across two runs.
        let mut best: Option<(u32, u32, u32, u32)> = None;
        for (i, &(a, count)) in runs.iter().enumerate() {
            let mut consider = |b: u32| {
                if let Some((rank, id)) = merges.get(a, b) {
                    if best.is_none_or(|(r, ..)| rank < r) {
                        best = Some((rank, id, a, b));
                    }
                }
            };
            if count >= 2 {
                consider(a);
            }
            if let Some(&(b, _)) = runs.get(i + 1) {
                consider(b);
            }
        }
        let Some((rank, id, a, b)) = best else {
            break;
        };
        if last_rank.is_some_and(|last| rank <= last) {
            // A pair below the rank last applied: the heap would have taken it earlier.
            return false;
        }
        last_rank = Some(rank);
        // `(X, y)` of rank at or below `rank`: the heap would take it before the next
        // occurrence of this rank.
        let jumps_ahead = |y: u32| merges.get(id, y).is_some_and(|(r, _)| r <= rank);
        next.clear();
        if a == b {
            for (i, &(sym, count)) in runs.iter().enumerate() {
                if sym != a || count < 2 {
                    push(next, sym, count);
                    continue;
                }
                // Each occurrence but the last has an `a` on its right; the last has an `a`
                // when the run is odd, else the next run's symbol.
                let after_last = if count % 2 == 1 {
                    Some(a)
                } else {
                    runs.get(i + 1).map(|r| r.0)
                };
                if (count >= 4 && jumps_ahead(a)) || after_last.is_some_and(jumps_ahead) {
                    return false;
                }
                push(next, id, count / 2);
                push(next, a, count % 2);
            }
        } else {
            // Every `a`-run followed by a `b`-run gives its last symbol and the `b`-run's
            // first to one merged token; since `a != b`, no symbol is in two occurrences.
            for (i, &(sym, count)) in runs.iter().enumerate() {
                let took_first = sym == b && i > 0 && runs.get(i - 1).is_some_and(|r| r.0 == a);
                let gives_last = sym == a && runs.get(i + 1).is_some_and(|r| r.0 == b);
                if gives_last {
                    // Right of the occurrence: the `b`-run's second symbol, or the next run's.
                    let y = match runs.get(i + 1) {
                        Some(&(_, n)) if n >= 2 => Some(b),
                        _ => runs.get(i + 2).map(|r| r.0),
                    };
                    if y.is_some_and(jumps_ahead) {
                        return false;
                    }
                }
                let left = count - u32::from(took_first) - u32::from(gives_last);
                push(next, sym, left);
                if gives_last {
                    push(next, id, 1);
                }
            }
        }
        std::mem::swap(runs, next);
        if runs.len() > MAX_RUNS {
            return false;
        }
    }
    for &(sym, count) in runs.iter() {
        out.extend(std::iter::repeat_n(sym, count as usize));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::{self, BpeScratch};
    use crate::merge_map::Merge;
    use proptest::prelude::*;

    /// A random rank-ordered table: every merge comes after all the merges making its
    /// inputs. Merge `k` joins two ids made before it (the base ids `0..base`, or the outputs
    /// of earlier merges), into id `base + k` or, sometimes, into the id the merge before it
    /// makes when no merge so far, this one included, takes that id as an input (else a
    /// merge making it again would come after one that uses it; no merge makes one of its
    /// own inputs, a token is longer than its parts). Every pair is merged once, as in a
    /// tokenizer's table (a pair listed again would replace the earlier merge's rank).
    fn ordered_table(base: u32, picks: &[(u32, u32, bool)]) -> Vec<Merge> {
        let mut merges: Vec<Merge> = Vec::new();
        let mut pairs = std::collections::HashSet::new();
        let mut inputs = std::collections::HashSet::new();
        for &(x, y, reuse) in picks {
            let k = merges.len() as u32;
            let made = base + k;
            let pick = |v: u32| v % made;
            let (a, b) = (pick(x), pick(y));
            if !pairs.insert((a, b)) {
                continue;
            }
            let out = match merges.last() {
                Some(&(_, (_, id))) if reuse && !inputs.contains(&id) && id != a && id != b => id,
                _ => made,
            };
            inputs.insert(a);
            inputs.insert(b);
            merges.push(((a, b), (k, out)));
        }
        merges
    }

    fn runs_word(parts: &[(u32, u16)]) -> Vec<u32> {
        parts
            .iter()
            .flat_map(|&(sym, n)| std::iter::repeat_n(sym, usize::from(n)))
            .collect()
    }

    proptest! {
        /// On rank-ordered tables (every merge after those making its inputs) a single run
        /// is always merged run-wise, to the heap's ids.
        #[test]
        fn runs_merge_like_the_heap_on_ordered_tables(
            picks in proptest::collection::vec((any::<u32>(), any::<u32>(), proptest::bool::weighted(0.1)), 0..40),
            parts in proptest::collection::vec((0u32..4, 1u16..300), 0..6),
        ) {
            let m = MergeMap::new(&ordered_table(4, &picks));
            let word = runs_word(&parts);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            let answered = merge_runs(&m, &word, &mut RunScratch::default(), &mut got);
            bpe::merge_reference(&m, word.iter().copied(), &mut BpeScratch::default(), &mut want);
            if answered {
                prop_assert_eq!(got, want);
            } else {
                prop_assert!(got.is_empty());
                prop_assert!(parts.len() > 1, "a single run refused: {:?}", parts);
            }
        }

        /// On any table it never answers differently from the heap.
        #[test]
        fn runs_never_differ_on_any_table(
            table in proptest::collection::vec(((0u32..8, 0u32..8), 0u32..8), 0..30),
            parts in proptest::collection::vec((0u32..8, 1u16..200), 0..5),
        ) {
            let m = MergeMap::new(&bpe::ranked(&table));
            let word = runs_word(&parts);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            if merge_runs(&m, &word, &mut RunScratch::default(), &mut got) {
                bpe::merge_reference(&m, word.iter().copied(), &mut BpeScratch::default(), &mut want);
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn a_run_halves_under_its_pair() {
        // a(0) b(1); aa(2) = a+a, aaaa(3) = aa+aa, aab(4) = aa+b
        let m = MergeMap::new(&[((0, 0), (0, 2)), ((2, 2), (1, 3)), ((2, 1), (2, 4))]);
        let mut out = Vec::new();
        assert!(merge_runs(
            &m,
            &[0; 11],
            &mut RunScratch::default(),
            &mut out
        ));
        assert_eq!(out, [3, 3, 2, 0]);
        out.clear();
        let word = [0, 0, 0, 0, 0, 0, 1];
        assert!(merge_runs(&m, &word, &mut RunScratch::default(), &mut out));
        assert_eq!(out, [3, 4]);
    }

    #[test]
    fn gives_up_where_a_lower_rank_would_jump_ahead() {
        // aaa(3) = aa(2) + a(0) has rank 0, below aa's own merge: the heap makes `aaa` as
        // soon as the first `aa` exists (a a a a a a → aaa aaa), a pass per rank would not.
        let m = MergeMap::new(&[((2, 0), (0, 3)), ((0, 0), (1, 2))]);
        let mut out = Vec::new();
        assert!(!merge_runs(
            &m,
            &[0; 6],
            &mut RunScratch::default(),
            &mut out
        ));
        assert!(out.is_empty());
        bpe::merge_reference(&m, [0; 6].into_iter(), &mut BpeScratch::default(), &mut out);
        assert_eq!(out, [3, 3]);
    }
}
