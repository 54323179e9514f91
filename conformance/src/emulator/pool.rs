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
use std::collections::{HashMap, VecDeque};

/// One emulated engine's block pool.
#[derive(Debug)]
pub struct BlockPool {
    block_size: usize,
    /// Per block: its cached hash.
    hash_of: Vec<Option<u64>>,
    /// Per block: requests using it.
    refs: Vec<u32>,
    /// Free blocks, least recently freed first (evicted first).
    free: VecDeque<usize>,
    /// Cached blocks per hash (one hash may be cached in several blocks).
    cached: HashMap<u64, Vec<usize>>,
    seq: u64,
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
        }
    }

    /// Usable blocks (the capacity an index is given).
    pub fn usable(&self) -> usize {
        self.hash_of.len()
    }

    /// Serves a request of `tokens` whose full blocks hash to `hashes`; `None` when the pool
    /// cannot hold the request at all.
    pub fn serve(&mut self, tokens: &[u32], hashes: &[u64]) -> Option<Served> {
        let bs = self.block_size;
        let prompt_tokens = tokens.len();
        let max_hit = prompt_tokens.saturating_sub(1) / bs;
        let hit = hashes[..max_hit.min(hashes.len())]
            .iter()
            .take_while(|h| self.cached.contains_key(h))
            .count();
        let need = prompt_tokens.div_ceil(bs);
        let mut blocks: Vec<usize> = hashes[..hit].iter().map(|h| self.cached[h][0]).collect();
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
            if let Some(h) = self.hash_of[b].take() {
                if let Some(copies) = self.cached.get_mut(&h) {
                    copies.retain(|&x| x != b);
                    if copies.is_empty() {
                        self.cached.remove(&h);
                    }
                }
                removed.push(h);
            }
            self.refs[b] = 1;
            blocks.push(b);
        }
        // Every new full block is cached, also when another block already holds its hash
        // (a second copy, removed on its own later).
        let full = prompt_tokens / bs;
        for (j, &b) in blocks.iter().enumerate().take(full).skip(hit) {
            self.cached.entry(hashes[j]).or_default().push(b);
            self.hash_of[b] = Some(hashes[j]);
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
            let toks = &tokens[hit.min(full) * bs..full * bs];
            Some((seq, batch(&removed, stored, toks, parent, bs)))
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
