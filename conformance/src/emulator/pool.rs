//! An emulated vLLM block pool with prefix caching, for the routing replay: requests hit the
//! longest cached prefix (never the last prompt token), take free blocks in least-recently
//! freed order (evicting the cached ones, `BlockRemoved`), cache their full blocks
//! (`BlockStored`) and free them again at the end, tail first — vLLM's `BlockPool`
//! behaviour as docs/contracts/vllm.md and the cache-hit replays show it. Each request's
//! events are one `vllm-kv-map-v3` msgpack batch with the next sequence number, and the
//! request's response carries the engine's own count (`cached_tokens`).
//!
//! Emulation, not engine truth: the index is proven by the engines' own replays
//! (`testdata/vectors/cachehit/`); this pool is what the operator's replay runs against.

use super::msgpack::Writer;
use super::writer::{step_batch, RequestSide, WriterConfig};
use kvprofile_core::deployment::KeyForm;
use kvprofile_core::Engine;
use std::collections::{HashMap, VecDeque};

/// One emulated engine's block pool.
#[derive(Debug)]
pub struct BlockPool {
    block_size: usize,
    /// Per block: its cached key (namespace, published hash).
    hash_of: Vec<Option<(u32, u64)>>,
    /// Per block: requests using it.
    refs: Vec<u32>,
    /// Free blocks, least recently freed first (evicted first).
    free: VecDeque<usize>,
    /// Cached blocks per key (one hash may be cached in several blocks).
    cached: HashMap<(u32, u64), Vec<usize>>,
    seq: u64,
    /// The engine and deployment whose events the pool publishes (`None`: vLLM 0.31's
    /// plain map form, [`BlockPool::new`]).
    events: Option<WriterConfig>,
}

/// One request to a [`BlockPool::with_events`] pool, as the engine sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask<'a> {
    /// The adapter and salt the engine read from the request.
    pub side: RequestSide<'a>,
    /// The engine's own cache namespace beyond the published hash (SGLang 0.5.19 keys its
    /// radix tree by the adapter, which its events do not show): requests in different
    /// namespaces never share blocks. 0 where the hash already holds every key.
    pub namespace: u32,
}

/// What one request did to the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Cached tokens the engine reports for the request.
    pub cached_tokens: u64,
    /// The batch's sequence number and msgpack payload (`None`: nothing changed).
    pub batch: Option<(u64, Vec<u8>)>,
}

impl BlockPool {
    /// A pool of `blocks` blocks of `block_size` tokens (vLLM keeps one as its null block:
    /// `blocks - 1` are usable).
    pub fn new(blocks: usize, block_size: usize) -> BlockPool {
        let usable = blocks.saturating_sub(1);
        BlockPool {
            block_size,
            hash_of: vec![None; usable],
            refs: vec![0; usable],
            free: (0..usable).collect(),
            cached: HashMap::new(),
            seq: 0,
            events: None,
        }
    }

    /// A pool of `blocks` blocks of `events.block_size` tokens publishing `events`' engine
    /// release in its schema under its deployment ([`WriterConfig::keying`]): look-ahead or
    /// bigram keys (a request hits at most ⌊(n − L)/B⌋ blocks, ⌊(n − 2)/P⌋ pages; ⌊(n − 1)/B⌋
    /// for plain keys), the shown adapter and salt ([`step_batch`]). SGLang frees pages the
    /// same least-recently-freed way (emulation: the index is proven on the engines' own
    /// replays, `testdata/vectors/cachehit/`).
    pub fn with_events(blocks: usize, events: WriterConfig) -> BlockPool {
        let mut p = BlockPool::new(blocks, events.block_size);
        if events.engine != Engine::Vllm {
            // Only vLLM keeps a null block.
            p = BlockPool::new(blocks + 1, events.block_size);
        }
        p.events = Some(events);
        p
    }

    /// Usable blocks (the capacity an index is given).
    pub fn usable(&self) -> usize {
        self.hash_of.len()
    }

    /// Serves a request of `tokens` whose full blocks hash to `hashes`; `None` when the pool
    /// cannot hold the request at all.
    pub fn serve(&mut self, tokens: &[u32], hashes: &[u64]) -> Option<Served> {
        self.serve_ask(tokens, hashes, Ask::default())
    }

    /// [`BlockPool::serve`] for a request the engine keys with `ask`.
    pub fn serve_ask(&mut self, tokens: &[u32], hashes: &[u64], ask: Ask<'_>) -> Option<Served> {
        let bs = self.block_size;
        let prompt_tokens = tokens.len();
        let offset = self
            .events
            .as_ref()
            .and_then(|e| e.keying.as_ref())
            .map_or(KeyForm::Plain, |k| k.key_form)
            .hit_offset();
        let max_hit = prompt_tokens.saturating_sub(offset) / bs;
        let ns = ask.namespace;
        let hit = hashes[..max_hit.min(hashes.len())]
            .iter()
            .take_while(|&&h| self.cached.contains_key(&(ns, h)))
            .count();
        let need = prompt_tokens.div_ceil(bs);
        let mut blocks: Vec<usize> = hashes[..hit]
            .iter()
            .map(|&h| self.cached[&(ns, h)][0])
            .collect();
        for &b in &blocks {
            if self.refs[b] == 0 {
                self.free.retain(|&x| x != b);
            }
            self.refs[b] += 1;
        }
        if self.free.len() < need - hit {
            for &b in &blocks {
                self.release(b);
            }
            return None;
        }
        let mut removed = Vec::new();
        for _ in hit..need {
            let b = self.free.pop_front()?;
            if let Some(key) = self.hash_of[b].take() {
                if let Some(copies) = self.cached.get_mut(&key) {
                    copies.retain(|&x| x != b);
                    if copies.is_empty() {
                        self.cached.remove(&key);
                    }
                }
                removed.push(key.1);
            }
            self.refs[b] = 1;
            blocks.push(b);
        }
        // Every new keyed block is cached, also when another block already holds its hash
        // (a second copy, removed on its own later).
        let full = hashes.len().min(prompt_tokens / bs);
        for (j, &b) in blocks.iter().enumerate().take(full).skip(hit) {
            self.cached.entry((ns, hashes[j])).or_default().push(b);
            self.hash_of[b] = Some((ns, hashes[j]));
        }
        let stored = &hashes[hit.min(full)..full];
        // The request ends: its blocks are freed, the tail first.
        for &b in blocks.iter().rev() {
            self.release(b);
        }
        let batch = if stored.is_empty() && removed.is_empty() {
            None
        } else {
            let parent = hit.checked_sub(1).map(|p| hashes[p]);
            let seq = self.seq;
            self.seq += 1;
            let payload = match &self.events {
                Some(cfg) => step_batch(
                    cfg,
                    tokens,
                    hit.min(full),
                    stored,
                    parent,
                    ask.side,
                    &removed,
                ),
                None => {
                    let toks = &tokens[hit.min(full) * bs..full * bs];
                    batch(&removed, stored, toks, parent, bs)
                }
            };
            Some((seq, payload))
        };
        Some(Served {
            cached_tokens: (hit * bs) as u64,
            batch,
        })
    }

    fn release(&mut self, b: usize) {
        self.refs[b] -= 1;
        if self.refs[b] == 0 {
            self.free.push_back(b);
        }
    }
}

/// `[ts, [BlockRemoved?, BlockStored?], nil]` in vLLM 0.31's map form.
fn batch(
    removed: &[u64],
    stored: &[u64],
    tokens: &[u32],
    parent: Option<u64>,
    bs: usize,
) -> Vec<u8> {
    let mut w = Writer::new();
    w.array(3).f64(1.0);
    w.array(usize::from(!removed.is_empty()) + usize::from(!stored.is_empty()));
    if !removed.is_empty() {
        w.map(4)
            .str("type")
            .str("BlockRemoved")
            .str("block_hashes")
            .array(removed.len());
        for &h in removed {
            w.uint(h);
        }
        w.str("medium").str("GPU").str("group_idx").uint(0);
    }
    if !stored.is_empty() {
        w.map(9)
            .str("type")
            .str("BlockStored")
            .str("block_hashes")
            .array(stored.len());
        for &h in stored {
            w.uint(h);
        }
        w.str("parent_block_hash");
        match parent {
            Some(p) => w.uint(p),
            None => w.nil(),
        };
        w.str("token_ids").array(tokens.len());
        for &t in tokens {
            w.uint(u64::from(t));
        }
        w.str("block_size").uint(bs as u64);
        w.str("lora_id")
            .nil()
            .str("medium")
            .str("GPU")
            .str("lora_name")
            .nil();
        w.str("group_idx").uint(0);
    }
    w.nil();
    w.into_bytes()
}
