//! The added tokens of a tokenizer (`<|im_start|>`, `<start_of_turn>`, …): found in the
//! text before anything else, leftmost-longest as `tokenizers` finds them. Each match is
//! one id and splits the text into pieces that are encoded on their own.

use daachorse::{DoubleArrayAhoCorasick, DoubleArrayAhoCorasickBuilder, MatchKind};

/// Most distinct first bytes of added tokens for [`AddedTokens::leads`].
const MAX_LEADS: u32 = 8;

/// The added tokens (all non-normalized, no strip/single-word flags) and how to find them.
pub(super) struct AddedTokens {
    /// The automaton, leftmost-longest; `None` when there are no added tokens.
    pub(super) ac: Option<DoubleArrayAhoCorasick<u32>>,
    /// When every added token starts with the same ASCII byte: that byte and the longest
    /// added token's length in bytes ([`AddedTokens::next`] then jumps between occurrences
    /// of the byte instead of running the automaton over every byte).
    lead: Option<(char, usize)>,
    /// Otherwise, when the added tokens start with at most [`MAX_LEADS`] distinct bytes
    /// (gemma-2: `<`, `\n`, `\t`, `[`, and `▁`'s first byte): bit `b` set for each, and the
    /// longest added token's length (the same jump, to the next byte of the set).
    leads: Option<([u64; 4], usize)>,
    /// The longest added token's length in bytes (0 without added tokens): no match can
    /// span more bytes than this.
    pub(super) longest: usize,
}

impl AddedTokens {
    /// The matcher of `patterns` (each added token's content and id); refuses what the
    /// automaton builder refuses.
    pub(super) fn new(patterns: Vec<(String, u32)>) -> Result<Self, String> {
        let first = patterns.first().and_then(|(p, _)| p.chars().next());
        let lead = first
            .filter(|c| c.is_ascii() && patterns.iter().all(|(p, _)| p.starts_with(*c)))
            .map(|c| (c, patterns.iter().map(|(p, _)| p.len()).max().unwrap_or(0)));
        let longest = patterns.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
        let mut bits = [0u64; 4];
        for b in patterns.iter().filter_map(|(p, _)| p.bytes().next()) {
            bits[usize::from(b / 64)] |= 1 << (b % 64);
        }
        let leads = (lead.is_none()
            && !patterns.is_empty()
            && bits.iter().map(|w| w.count_ones()).sum::<u32>() <= MAX_LEADS)
            .then_some((bits, longest));
        let ac = if patterns.is_empty() {
            None
        } else {
            Some(
                DoubleArrayAhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build_with_values(patterns)
                    .map_err(|e| format!("added tokens: {e}"))?,
            )
        };
        Ok(Self {
            ac,
            lead,
            leads,
            longest,
        })
    }

    /// The first added-token match of `text` at or after byte `from` (leftmost-longest,
    /// as the automaton's `leftmost_find_iter` from `from`): `(start, end, id)`.
    /// With [`lead`](Self::lead) a match can only start at that byte, so only the bytes
    /// from each occurrence of it to the longest token's length are searched: the leftmost
    /// match of that window starts at its first byte exactly when some token matches there,
    /// and it is then the longest one there, as in the whole text.
    /// `next_matches_the_automaton` checks it against the automaton's own iterator.
    #[inline]
    pub(super) fn next(&self, text: &str, mut from: usize) -> Option<(usize, usize, u32)> {
        let ac = self.ac.as_ref()?;
        let bytes = text.as_bytes();
        let Some((lead, longest)) = self.lead else {
            if let Some((leads, longest)) = &self.leads {
                return Self::next_of_set(ac, bytes, from, leads, *longest);
            }
            let m = ac.leftmost_find_iter(bytes.get(from..)?).next()?;
            return Some((from + m.start(), from + m.end(), m.value()));
        };
        loop {
            let at = from + text.get(from..)?.find(lead)?;
            let window = bytes.get(at..(at + longest).min(bytes.len()))?;
            if let Some(m) = ac.leftmost_find_iter(window).next() {
                if m.start() == 0 {
                    return Some((at, at + m.end(), m.value()));
                }
            }
            from = at + 1;
        }
    }

    /// [`next`](Self::next) with [`leads`](Self::leads): the same window search at each
    /// byte of the set.
    fn next_of_set(
        ac: &DoubleArrayAhoCorasick<u32>,
        bytes: &[u8],
        from: usize,
        leads: &[u64; 4],
        longest: usize,
    ) -> Option<(usize, usize, u32)> {
        let is_lead = |b: u8| leads[usize::from(b / 64)] & (1 << (b % 64)) != 0;
        let mut at = from;
        loop {
            at += bytes.get(at..)?.iter().position(|&b| is_lead(b))?;
            let window = bytes.get(at..(at + longest).min(bytes.len()))?;
            if let Some(m) = ac.leftmost_find_iter(window).next() {
                if m.start() == 0 {
                    return Some((at, at + m.end(), m.value()));
                }
            }
            at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::encoders;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// `next` (the lead-byte jump when the tokenizer allows it) finds exactly the
        /// matches of the automaton's own leftmost-longest iterator, for every shipped
        /// tokenizer, on text made of added tokens, their pieces and their lead byte.
        #[test]
        fn next_matches_the_automaton(parts in proptest::collection::vec((0usize..1000, 0u8..8, "[a-z<|>_ \\n\\t\\[▁’@]{0,6}"), 0..40)) {
            prop_assert_eq!(encoders().len(), 6, "a shipped tokenizer is missing or slow");
            for enc in encoders() {
                let Some(fast) = enc.fast.as_ref() else { continue };
                let added = &fast.added;
                let Some(ac) = added.ac.as_ref() else { continue };
                let tokens: Vec<String> = enc.stock().get_added_tokens_decoder().values().map(|t| t.content.clone()).collect();
                let mut text = String::new();
                for (i, how, filler) in &parts {
                    let tok = &tokens[i % tokens.len()];
                    match how {
                        0 | 1 => text.push_str(tok),
                        2 => text.push_str(tok.get(..tok.len() / 2).unwrap_or("")),
                        3 => text.push_str(tok.get(tok.len() / 2..).unwrap_or("")),
                        4 => text.push('<'),
                        _ => text.push_str(filler),
                    }
                }
                let expected: Vec<(usize, usize, u32)> = ac
                    .leftmost_find_iter(&text)
                    .map(|m| (m.start(), m.end(), m.value()))
                    .collect();
                let mut got = Vec::new();
                let mut from = 0;
                while let Some(m) = added.next(&text, from) {
                    got.push(m);
                    from = m.1;
                }
                prop_assert_eq!(got, expected, "{:?}", text);
            }
        }
    }
}
