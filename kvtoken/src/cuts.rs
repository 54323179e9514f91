//! Where a long byte-level word can be cut into parts that BPE merges independently.
//!
//! A merge joins two adjacent symbols into the token whose bytes are theirs, one after the
//! other (`tokenizers` refuses a merge whose result is not in the vocabulary). So if no
//! merge *output* occurs in the word spanning a position `p` (starting before `p` and ending
//! after it), no merge can ever join a symbol left of `p` to one right of it: every pair
//! across `p` is absent from the table, whatever the two sides have become. The heap's pops
//! of the two sides then interleave without touching each other, each side popping its own
//! pairs in its own (rank, position) order, so BPE of the word is BPE of `word[..p]`
//! followed by BPE of `word[p..]`. CJK without spaces cuts nearly at every char (Qwen2.5:
//! parts of 1.9 bytes on average, none over 6), letters and white-space runs nearly nowhere.
//!
//! [`Cutter::cuts`] finds every such position in one pass of an Aho-Corasick automaton over
//! the merge outputs, taking the longest output ending at each byte (the one reaching
//! furthest left). A part that is exactly one output whose own BPE is that one token (most
//! CJK chars) comes with its id, so it needs no merging and no cache. The slow twin is merging the whole word (`cut_words_merge_like_whole_words`
//! on every shipped tokenizer); `cuts_are_where_no_output_spans` checks the positions
//! against a brute-force search of every output at every start.

use daachorse::DoubleArrayAhoCorasick;

/// No id: the part is not one output whose BPE is itself.
pub(crate) const NO_TOKEN: u32 = u32::MAX;

/// The merge outputs of one table, for finding cuts.
pub(crate) struct Cutter {
    /// Each output's value: its id if BPE of its bytes is that one id, else [`NO_TOKEN`].
    ac: DoubleArrayAhoCorasick<u32>,
}

impl Cutter {
    /// The cutter for the merge outputs `outputs`: `(bytes, value)` with the value as in
    /// [`Cutter::ac`] (duplicate byte strings allowed; the first value is kept). `None` when
    /// there are none or the automaton cannot be built.
    pub(crate) fn new<'a>(outputs: impl Iterator<Item = (&'a [u8], u32)>) -> Option<Self> {
        let mut pats: Vec<(&[u8], u32)> = outputs.filter(|(o, _)| o.len() >= 2).collect();
        pats.sort_by(|a, b| a.0.cmp(b.0));
        pats.dedup_by(|later, first| later.0 == first.0);
        if pats.is_empty() {
            return None;
        }
        let ac = DoubleArrayAhoCorasick::with_values(pats).ok()?;
        Some(Self { ac })
    }

    /// Appends to `parts`, in order, the parts of `word` between the positions that no merge
    /// output occurring in `word` spans: `(end, id)`, `id` the part's value when the part is
    /// exactly one output (else [`NO_TOKEN`]); the last part ends at `word.len()`. `lo` is
    /// scratch.
    pub(crate) fn cuts(&self, word: &[u8], lo: &mut Vec<(u32, u32)>, parts: &mut Vec<(u32, u32)>) {
        let n = word.len();
        if n >= u32::MAX as usize {
            return;
        }
        if n < 2 {
            parts.push((n as u32, NO_TOKEN));
            return;
        }
        // lo[e]: the start of the longest output ending at e (u32::MAX: none), its value.
        lo.clear();
        lo.resize(n + 1, (u32::MAX, NO_TOKEN));
        for m in self.ac.find_overlapping_no_suffix_iter(word) {
            if let Some(slot) = lo.get_mut(m.end()) {
                *slot = (m.start() as u32, m.value());
            }
        }
        // p is spanned iff some output ending after p starts before it. Walking down from
        // the end, `end` is where the part being built ends.
        let first = parts.len();
        let mut reach = u32::MAX;
        let mut end = n as u32;
        let value_of = |start: u32, end: u32| match lo.get(end as usize) {
            Some(&(s, v)) if s == start => v,
            _ => NO_TOKEN,
        };
        for p in (1..n as u32).rev() {
            reach = reach.min(lo.get(p as usize + 1).map_or(u32::MAX, |l| l.0));
            if reach >= p {
                parts.push((end, value_of(p, end)));
                end = p;
            }
        }
        parts.push((end, value_of(0, end)));
        if let Some(new) = parts.get_mut(first..) {
            new.reverse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute(outputs: &[Vec<u8>], word: &[u8]) -> Vec<u32> {
        (1..word.len())
            .filter(|&p| {
                !outputs.iter().any(|o| {
                    o.len() >= 2
                        && (p.saturating_sub(o.len() - 1)..p)
                            .any(|s| word.get(s..s + o.len()) == Some(o.as_slice()))
                })
            })
            .map(|p| p as u32)
            .collect()
    }

    proptest! {
        /// The parts end exactly at the brute-force cuts and at the word's end; a part's id
        /// is the value of the output it equals, if any.
        #[test]
        fn cuts_are_where_no_output_spans(
            outputs in proptest::collection::vec(proptest::collection::vec(0u8..4, 1..6), 1..30),
            word in proptest::collection::vec(0u8..4, 0..200),
        ) {
            prop_assume!(outputs.iter().any(|o| o.len() >= 2));
            let value = |o: &[u8]| outputs.iter().position(|x| x.as_slice() == o).map(|i| i as u32 * 3);
            let Some(c) = Cutter::new(outputs.iter().map(|o| (o.as_slice(), value(o).unwrap_or(0)))) else {
                return Err(TestCaseError::fail("no cutter"));
            };
            let (mut lo, mut parts) = (Vec::new(), vec![(7, 7)]);
            c.cuts(&word, &mut lo, &mut parts);
            prop_assert_eq!(parts.first(), Some(&(7, 7)));
            let mut ends = brute(&outputs, &word);
            ends.push(word.len() as u32);
            let got_ends: Vec<u32> = parts[1..].iter().map(|p| p.0).collect();
            prop_assert_eq!(&got_ends, &ends);
            let mut start = 0;
            for &(end, id) in &parts[1..] {
                let part = &word[start as usize..end as usize];
                let want = value(part).filter(|_| part.len() >= 2).unwrap_or(NO_TOKEN);
                prop_assert_eq!(id, want, "{:?}", part);
                start = end;
            }
        }
    }
}
