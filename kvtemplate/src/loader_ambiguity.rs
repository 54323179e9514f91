//! Loader ambiguity: the added tokens an engine's tokenizer loader may or may not keep when the
//! profile pins no `tokenizer_config.json` (docs/contracts/registry.md §9.2
//! `ambiguous_added_token`).
//!
//! An engine release whose loader takes its added tokens from `tokenizer_config.json`
//! (transformers 5: catalog `tokenizer.addedTokens` `tokenizer-config`, or `either`) builds the
//! tokenizer the model repository's config describes. A profile in the gateway's own format
//! pins `tokenizer.json` alone: kvexact then cannot know which of `tokenizer.json`'s added
//! tokens the config lists. For google/gemma-2-9b-it the two disagree on 32 tokens (tab runs,
//! `[toxicity=0]`, `<unused99>`): text holding one is split differently by the engine
//! (`testdata/vectors/loader/`).
//!
//! Which tokens are in doubt: a *non-special* added token whose content is also an entry of
//! the model's own vocabulary under the same id. Such a token may be listed or not — either
//! way its id stays reachable, only the splitting of text around it changes, which is how the
//! gemma-2 files came to disagree. A special token (the config names it among its special
//! tokens), or an added token the model's vocabulary does not hold (dropping it would make its
//! id unreachable), is kept by every loader. A text that holds the content of a token in doubt
//! is refused; any other text tokenizes the same whichever tokens the config lists (added-token
//! matching only acts where a token's content occurs).

use kvtoken::FastEncoder;
use tokenizers::Model;

/// The added tokens in doubt of one tokenizer, and a scan for them.
#[derive(Debug, Clone)]
pub struct LoaderAmbiguity {
    /// `(id, content)`, by id.
    tokens: Vec<(u32, String)>,
    /// For each first byte, the indices into `tokens` of the contents starting with it,
    /// longest first.
    by_lead: Vec<Vec<u32>>,
}

impl LoaderAmbiguity {
    /// The tokens in doubt of `tok` (see the module docs); `None` when there are none.
    pub fn of(tok: &FastEncoder) -> Option<LoaderAmbiguity> {
        let stock = tok.stock();
        let model = stock.get_model();
        let mut tokens: Vec<(u32, String)> = stock
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(id, t)| {
                !t.special && !t.content.is_empty() && model.token_to_id(&t.content) == Some(*id)
            })
            .map(|(id, t)| (id, t.content))
            .collect();
        if tokens.is_empty() {
            return None;
        }
        tokens.sort();
        let mut by_lead = vec![Vec::new(); 256];
        for (i, (_, c)) in tokens.iter().enumerate() {
            if let Some(b) = c.bytes().next() {
                by_lead[usize::from(b)].push(i as u32);
            }
        }
        for list in &mut by_lead {
            list.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].1.len()));
        }
        Some(LoaderAmbiguity { tokens, by_lead })
    }

    /// The tokens in doubt, `(id, content)` by id.
    pub fn tokens(&self) -> &[(u32, String)] {
        &self.tokens
    }

    /// The first token in doubt whose content `text` holds (the leftmost occurrence, the
    /// longest content there), if any. One pass over the bytes of `text`.
    pub fn first_in(&self, text: &str) -> Option<(u32, &str)> {
        let bytes = text.as_bytes();
        for (at, b) in bytes.iter().enumerate() {
            let Some(list) = self.by_lead.get(usize::from(*b)) else {
                continue;
            };
            for &i in list {
                let (id, c) = &self.tokens[i as usize];
                if bytes[at..].starts_with(c.as_bytes()) {
                    return Some((*id, c));
                }
            }
        }
        None
    }

    /// The obvious twin of [`LoaderAmbiguity::first_in`]'s yes/no answer (tests).
    pub fn holds_any_naive(&self, text: &str) -> bool {
        self.tokens.iter().any(|(_, c)| text.contains(c.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A byte-level BPE with two added tokens: `<a>` in the vocabulary (in doubt when not
    /// special), `<z>` outside it (kept by every loader).
    fn tok(special_a: bool) -> FastEncoder {
        let json = format!(
            r#"{{"version":"1.0","truncation":null,"padding":null,
            "added_tokens":[
              {{"id":5,"content":"<a>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":{special_a}}},
              {{"id":9,"content":"<z>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":false}}],
            "normalizer":null,
            "pre_tokenizer":{{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}},
            "post_processor":null,
            "decoder":{{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}},
            "model":{{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,
              "end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":false,
              "vocab":{{"<":0,"a":1,">":2,"z":3,"b":4,"<a>":5}},"merges":[]}}}}"#
        );
        FastEncoder::from_bytes(json.as_bytes()).unwrap()
    }

    #[test]
    fn only_non_special_tokens_of_the_model_vocabulary_are_in_doubt() {
        let a = LoaderAmbiguity::of(&tok(false)).unwrap();
        assert_eq!(a.tokens(), &[(5, "<a>".to_string())]);
        assert_eq!(a.first_in("b<z>b<a>"), Some((5, "<a>")));
        assert_eq!(a.first_in("b<z>b<"), None);
        assert!(LoaderAmbiguity::of(&tok(true)).is_none());
    }

    proptest! {
        #[test]
        fn the_scan_agrees_with_the_naive_search(s in "[<a>zb\t\n]{0,40}") {
            let a = LoaderAmbiguity::of(&tok(false)).unwrap();
            prop_assert_eq!(a.first_in(&s).is_some(), a.holds_any_naive(&s));
        }
    }
}
