//! SGLang: re-deriving each page of a `BlockStored` event from its parent's digest.

use super::map::Value;
use super::{offset_in, rederived_mismatch, BlockAt, Book, Outcome, Parent, Tokens, Unverifiable};
use crate::Error;
use kvhash::events::{BlockHash, BlockStored, TokenShape};
use kvhash::sglang::{SglangChain, SglangHasher, SglangRules};
use kvhash::Digest;
use kvprofile_core::deployment::EventNamespace;
use std::collections::BTreeMap;

pub(crate) struct SglangDeriver {
    chain: SglangChain<SglangHasher>,
    page_size: usize,
    /// The deployment keys bigram pages (EAGLE): events carry token pairs.
    bigram_pages: bool,
    /// The event format's namespace, and the declared adapters (name → path).
    namespace: Option<EventNamespace>,
    lora_paths: BTreeMap<String, String>,
}

impl SglangDeriver {
    pub(crate) fn new(
        rules: SglangRules,
        page_size: usize,
        bigram_pages: bool,
        namespace: Option<EventNamespace>,
        lora_paths: BTreeMap<String, String>,
    ) -> Result<SglangDeriver, Error> {
        let mut hasher = SglangHasher::new(page_size)?.with_rules(rules);
        if bigram_pages {
            hasher = hasher.with_mode(kvhash::sglang::KeyMode::EagleBigram);
        }
        Ok(SglangDeriver {
            chain: SglangChain::new(hasher),
            page_size,
            bigram_pages,
            namespace,
            lora_paths,
        })
    }

    /// The namespace seed an event's pages are published under: `Ok(None)` for page hashes,
    /// `Err(())` when it cannot be known (an adapter not declared, or any adapter without a
    /// namespace rule).
    fn seed_of(&self, s: &BlockStored<'_>) -> Result<Option<[u8; 32]>, ()> {
        use kvhash::sglang_namespace::{lora_id, namespace_seed};
        if s.lora_id.is_some() {
            return Err(());
        }
        let id = match s.lora_name {
            None => None,
            Some(_) if self.namespace.is_none() => return Err(()),
            Some(n) => Some(lora_id(n, self.lora_paths.get(n).ok_or(())?)),
        };
        let salt = s.cache_salt.filter(|c| !c.is_empty());
        Ok(match self.namespace {
            None => None,
            Some(EventNamespace::RegisteredLora) => id.map(|id| namespace_seed(Some(&id), None)),
            Some(EventNamespace::ExtraKeyAndSalt) => {
                (id.is_some() || salt.is_some()).then(|| namespace_seed(id.as_deref(), salt))
            }
        })
    }

    pub(crate) fn stored(
        &mut self,
        book: &mut Book,
        s: &BlockStored<'_>,
        event_index: usize,
        payload: Option<&[u8]>,
        tokens: &mut Vec<u64>,
    ) {
        let n = s.block_hashes.len();
        let ebs = s.block_size as usize;
        let flat = s.token_ids.shape() == TokenShape::Flat;
        let whole: Option<Outcome> = if ebs != self.page_size {
            Some(Outcome::block_size(
                "event page size is not the rule's block size",
            ))
        } else if flat == self.bigram_pages {
            // Bigram pairs from a deployment declared without EAGLE, or flat ids from one
            // declared with it: the events are not the deployment's.
            Some(if flat {
                Outcome::keys("flat token ids where the deployment keys bigram pages")
            } else {
                Outcome::Unverifiable(Unverifiable::EagleBigrams)
            })
        } else if s.token_ids.is_empty() {
            Some(Outcome::Unverifiable(Unverifiable::NoTokenIds))
        } else if n.checked_mul(ebs) != Some(s.token_ids.len()) {
            Some(Outcome::Unverifiable(Unverifiable::Malformed))
        } else if self.seed_of(s).is_err() {
            Some(Outcome::Unverifiable(Unverifiable::LoraNotRederivable))
        } else {
            None
        };
        let seed = self.seed_of(s).ok().flatten();
        let mut ids = s.token_ids.values();
        let token_ids_offset = offset_in(payload, s.token_ids.wire_bytes());
        let mut parent = match &s.parent_block_hash {
            None => Parent::Root,
            Some(h) => book.parent(h.to_u64()),
        };
        let parent_u64 = s.parent_block_hash.as_ref().map(BlockHash::to_u64);
        let mut pairs = s.token_ids.bigrams();
        for (i, published) in s.block_hashes.iter().enumerate() {
            // Never more than the event holds (its block_size is the engine's word).
            tokens.resize(ebs.min(s.token_ids.len()), 0);
            let got = if flat {
                ids.read_into(tokens)
            } else {
                // A bigram page: `ebs` consecutive pairs (t_j, t_j+1) are the `ebs + 1`
                // tokens t_j ... t_j+ebs; pairs that do not chain are malformed.
                tokens.clear();
                let mut ok = true;
                if let Some(ps) = pairs.as_mut() {
                    for (a, b) in ps.by_ref().take(ebs) {
                        match tokens.last() {
                            None => tokens.extend([a, b]),
                            Some(&last) if last == a => tokens.push(b),
                            Some(_) => ok = false,
                        }
                    }
                }
                if ok && tokens.len() == ebs + 1 {
                    tokens.len()
                } else {
                    0
                }
            };
            tokens.truncate(got);
            let toks = &tokens[..];
            let root = matches!(parent, Parent::Root);
            let published_u64 = published.to_u64();
            let at = || BlockAt {
                event_index,
                block_index: i,
                event_id: None,
                token_ids_offset,
                tokens: Tokens::U64(toks),
                event_block_size: ebs as u64,
                parent: if i == 0 {
                    parent_u64
                } else {
                    s.block_hashes.get(i - 1).map(BlockHash::to_u64)
                },
                published: published_u64,
                published_bytes: None,
                keys: s
                    .lora_name
                    .map(|n| format!("lora_name={n}"))
                    .into_iter()
                    .chain(s.cache_salt.map(|c| format!("cache_salt={c}")))
                    .collect(),
            };
            let outcome = match whole {
                Some(o) => o,
                None if toks.is_empty() => Outcome::Unverifiable(Unverifiable::Malformed),
                None => self.derive(
                    parent,
                    toks,
                    s.cache_salt,
                    published.to_u64(),
                    root,
                    seed.as_ref(),
                ),
            };
            book.record(published_u64, outcome, at);
            parent = outcome.next_parent();
        }
    }

    fn derive(
        &mut self,
        parent: Parent,
        toks: &[u64],
        salt: Option<&str>,
        published: u64,
        root: bool,
        seed: Option<&[u8; 32]>,
    ) -> Outcome {
        let pd: Option<Digest> = match parent {
            Parent::Root => salt
                .filter(|s| !s.is_empty())
                .map(kvhash::sglang::salt_seed),
            Parent::Digest(d) => Some(d),
            Parent::Unavailable(r) => return Outcome::Unverifiable(r),
        };
        self.chain.reset(pd, 0);
        let mut got = None;
        if self.chain.extend_checked(toks, |d| got = Some(d)).is_err() {
            return Outcome::Unverifiable(Unverifiable::TokenOutOfRange);
        }
        // The page digest is the chain's; the published hash its namespaced form.
        let shown = |d: &Digest| match seed {
            None => d.first8_be(),
            Some(s) => kvhash::sglang_namespace::namespaced_u64(s, d.first8_be()),
        };
        match got {
            Some(d) if shown(&d) == published => Outcome::Matched(Value::Derived(d)),
            Some(d) => rederived_mismatch(root, shown(&d), Some(d)),
            None => Outcome::Unverifiable(Unverifiable::Malformed),
        }
    }
}
