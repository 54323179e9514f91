//! The `index_scale` bench's fleet: N endpoints of two data-parallel ranks each, every rank
//! (an "engine") holding `per_rank` blocks of whole prefixes, the stream that fills them from
//! empty, and a churn cycle that brings them back to that state. Everything is generated once,
//! before any timing, and is the same for every index.
//!
//! * Prefixes: 64 system prompts of 32..=512 blocks (0.5–8k tokens) with a skewed popularity;
//!   each engine holds conversations of up to 2,048 blocks (32k tokens) on them, and 15 % of
//!   its conversations continue a prefix of another engine's (a conversation routed elsewhere),
//!   so the fleet's prefixes form trees shared across endpoints.
//! * The churn cycle: each engine evicts, tail first, the blocks only its "out" conversations
//!   hold (about an eighth of what it holds) while it stores new conversations grown from its
//!   kept ones, then evicts those while it stores the out blocks back. Every engine is back
//!   where the fill left it at the end of a cycle, so the cycle repeats as long as a bench needs
//!   (each index's sequence numbers continue; the hashes repeat, as a popular prefix returns).
//! * A step is one engine's message of one scheduler step mixing four requests: a 512-token
//!   prefill chunk (32 blocks) of one and one block for each of three decoding ones (the
//!   prefill role rotating among them), after the removals that made room for them. Engines'
//!   steps are interleaved round robin, as a gateway receives them.
//! * Queries: built one by one from a counter (none repeats), 32..=2048 blocks: continuations
//!   and resends of held conversations, new conversations on the system prompts, cold prompts.

use super::workload::{extend, Batch, Block, Query, Rng, BLOCK_SIZE};
use std::collections::{HashMap, HashSet};

/// Data-parallel ranks per endpoint.
pub const RANKS: usize = 2;
/// The shortest query (512 tokens).
pub const MIN_QUERY_BLOCKS: usize = 32;
/// The longest query and conversation (32k tokens).
pub const MAX_QUERY_BLOCKS: usize = 2048;
/// Blocks a prefill chunk stores in one step (512 tokens).
const PREFILL_CHUNK: usize = 32;
/// Requests a step serves.
const REQUESTS_PER_STEP: usize = 4;

/// One engine's message: the requests it served in one step.
pub struct Step {
    /// `endpoint * RANKS + rank`.
    pub engine: usize,
    /// One part per request (removals on the first).
    pub parts: Vec<Batch>,
}

/// The generated fleet.
pub struct Fleet {
    pub endpoints: usize,
    /// Conversations each engine holds after the fill (the state every cycle returns to).
    pub held: Vec<Vec<Vec<Block>>>,
    pub prompts: Vec<Vec<Block>>,
    /// The stream that fills every engine from empty.
    pub fill: Vec<Step>,
    /// The churn cycle.
    pub cycle: Vec<Step>,
    /// The most blocks an engine holds at any point (each rank's declared capacity).
    pub capacity: u64,
    /// Block copies held after the fill (and after every cycle).
    pub copies: usize,
    /// Blocks stored and removed by one cycle.
    pub cycle_stored: usize,
    pub cycle_removed: usize,
    seed: u64,
}

/// Log-uniform in `lo..=hi`.
fn log_range(rng: &mut Rng, lo: usize, hi: usize) -> usize {
    let (a, b) = ((lo as f64).ln(), (hi as f64 + 1.0).ln());
    ((a + rng.unit() * (b - a)).exp() as usize).clamp(lo, hi)
}

/// A new conversation for an engine: a prefix of another engine's conversation (15 %) or a
/// skewed system prompt, then its own blocks.
fn conversation(prompts: &[Vec<Block>], others: &[Vec<Vec<Block>>], rng: &mut Rng) -> Vec<Block> {
    let mut c = if !others.is_empty() && rng.unit() < 0.15 {
        let e = &others[rng.range(0, others.len() - 1)];
        let s = &e[rng.range(0, e.len() - 1)];
        s[..rng.range(1, s.len())].to_vec()
    } else {
        let u = rng.unit();
        prompts[((u * u) * prompts.len() as f64) as usize].clone()
    };
    let n = log_range(rng, 16, 1536);
    extend(&mut c, n, rng);
    c.truncate(MAX_QUERY_BLOCKS);
    c
}

/// One request in flight in a churn phase: its blocks to store from `at`.
struct Work {
    parent: Option<u64>,
    blocks: Vec<Block>,
    at: usize,
}

/// Steps of one phase of one engine: `removals` evicted in this order while `work` is stored,
/// four requests at a time. Returns the steps and the most blocks held meanwhile.
fn phase(
    engine: usize,
    mut held: usize,
    removals: Vec<u64>,
    work: Vec<Work>,
    steps: &mut Vec<Vec<Batch>>,
) -> usize {
    let mut most = held;
    let mut queue = work.into_iter();
    let mut active: Vec<Work> = Vec::new();
    let mut rm = 0;
    let mut k = 0usize;
    loop {
        while active.len() < REQUESTS_PER_STEP {
            match queue.next() {
                Some(w) => active.push(w),
                None => break,
            }
        }
        if active.is_empty() && rm == removals.len() {
            return most;
        }
        let mut parts = Vec::new();
        let prefill = k % active.len().max(1);
        for (j, w) in active.iter_mut().enumerate() {
            let n = if j == prefill { PREFILL_CHUNK } else { 1 }.min(w.blocks.len() - w.at);
            let parent = match w.at {
                0 => w.parent,
                a => Some(w.blocks[a - 1].chain),
            };
            parts.push(Batch {
                endpoint: engine,
                seq: 0,
                removed: Vec::new(),
                parent,
                stored: w.blocks[w.at..w.at + n].to_vec(),
            });
            w.at += n;
        }
        active.retain(|w| w.at < w.blocks.len());
        let stored: usize = parts.iter().map(|p| p.stored.len()).sum();
        let n = if stored == 0 {
            removals.len() - rm
        } else {
            stored.min(removals.len() - rm)
        };
        let removed = removals[rm..rm + n].to_vec();
        rm += n;
        held = held - n + stored;
        most = most.max(held);
        match parts.first_mut() {
            Some(p) => p.removed = removed,
            None => parts.push(Batch {
                endpoint: engine,
                seq: 0,
                removed,
                parent: None,
                stored: Vec::new(),
            }),
        }
        steps.push(parts);
        k += 1;
    }
}

/// Generates the fleet: `endpoints` endpoints × [`RANKS`] engines of `per_rank` blocks.
pub fn generate(endpoints: usize, per_rank: usize, seed: u64) -> Fleet {
    let mut rng = Rng::new(seed ^ (endpoints as u64) << 32);
    let prompts: Vec<Vec<Block>> = (0..64)
        .map(|_| {
            let mut b = Vec::new();
            let n = log_range(&mut rng, 32, 512);
            extend(&mut b, n, &mut rng);
            b
        })
        .collect();
    let engines = endpoints * RANKS;
    let mut held: Vec<Vec<Vec<Block>>> = Vec::with_capacity(engines);
    let mut fill = Vec::new();
    let mut per_engine: Vec<Vec<Vec<Batch>>> = Vec::with_capacity(engines);
    let mut capacity = 0usize;
    for e in 0..engines {
        // The fill: conversations until the engine holds `per_rank` blocks.
        let mut uses: HashMap<u64, u32> = HashMap::new();
        let mut seqs: Vec<Vec<Block>> = Vec::new();
        while uses.len() < per_rank {
            let mut c = conversation(&prompts, &held, &mut rng);
            let hit = c.iter().take_while(|b| uses.contains_key(&b.chain)).count();
            c.truncate(hit + (per_rank - uses.len()));
            if c.len() == hit {
                continue;
            }
            for b in &c {
                *uses.entry(b.chain).or_insert(0) += 1;
            }
            fill.push(Step {
                engine: e,
                parts: vec![Batch {
                    endpoint: e,
                    seq: 0,
                    removed: Vec::new(),
                    parent: hit.checked_sub(1).map(|i| c[i].chain),
                    stored: c[hit..].to_vec(),
                }],
            });
            seqs.push(c);
        }
        // The out conversations: the blocks only they hold, about an eighth of the engine.
        let target = per_rank / 8;
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.range(0, i));
        }
        let (mut out, mut kept, mut out_blocks) = (Vec::new(), Vec::new(), 0);
        for &i in &order {
            let s = &seqs[i];
            let from = s
                .iter()
                .position(|b| uses[&b.chain] == 1)
                .unwrap_or(s.len());
            if out_blocks < target && from < s.len() && out.len() + 1 < seqs.len() {
                out_blocks += s.len() - from;
                out.push((i, from));
            } else {
                kept.push(i);
            }
        }
        // The new conversations, each grown from a prefix of a kept one (held throughout).
        let mut fresh: Vec<Work> = Vec::new();
        let mut fresh_blocks = 0;
        while fresh_blocks < out_blocks {
            let k = &seqs[kept[rng.range(0, kept.len() - 1)]];
            let cut = rng.range(1, k.len().min(MAX_QUERY_BLOCKS - 16));
            let mut c = k[..cut].to_vec();
            let n = log_range(&mut rng, 16, 512).min(out_blocks - fresh_blocks + 16);
            extend(&mut c, n, &mut rng);
            c.truncate(MAX_QUERY_BLOCKS);
            fresh_blocks += c.len() - cut;
            fresh.push(Work {
                parent: Some(c[cut - 1].chain),
                blocks: c[cut..].to_vec(),
                at: 0,
            });
        }
        let out_tail: Vec<u64> = out
            .iter()
            .flat_map(|&(i, from)| seqs[i][from..].iter().rev().map(|b| b.chain))
            .collect();
        let fresh_tail: Vec<u64> = fresh
            .iter()
            .flat_map(|w| w.blocks.iter().rev().map(|b| b.chain))
            .collect();
        let back: Vec<Work> = out
            .iter()
            .map(|&(i, from)| Work {
                parent: from.checked_sub(1).map(|p| seqs[i][p].chain),
                blocks: seqs[i][from..].to_vec(),
                at: 0,
            })
            .collect();
        let mut steps = Vec::new();
        let a = phase(e, per_rank, out_tail, fresh, &mut steps);
        let held_mid = per_rank - out_blocks + fresh_blocks;
        let b = phase(e, held_mid, fresh_tail, back, &mut steps);
        capacity = capacity.max(a).max(b);
        per_engine.push(steps);
        held.push(seqs);
    }
    // Round robin over the engines.
    let mut cycle = Vec::new();
    let longest = per_engine.iter().map(Vec::len).max().unwrap_or(0);
    let mut iters: Vec<_> = per_engine.into_iter().map(Vec::into_iter).collect();
    for _ in 0..longest {
        for (e, it) in iters.iter_mut().enumerate() {
            if let Some(parts) = it.next() {
                cycle.push(Step { engine: e, parts });
            }
        }
    }
    let cycle_stored = cycle
        .iter()
        .flat_map(|s| &s.parts)
        .map(|p| p.stored.len())
        .sum();
    let cycle_removed = cycle
        .iter()
        .flat_map(|s| &s.parts)
        .map(|p| p.removed.len())
        .sum();
    Fleet {
        endpoints,
        held,
        prompts,
        fill,
        cycle,
        capacity: capacity as u64,
        copies: engines * per_rank,
        cycle_stored,
        cycle_removed,
        seed,
    }
}

impl Fleet {
    /// Engines (endpoint × rank slots).
    pub fn engines(&self) -> usize {
        self.endpoints * RANKS
    }

    /// Query number `i` (every number gives another query): 0 continues a held conversation
    /// of a random engine after a random cut, 1 starts a new one on a system prompt, 2 resends
    /// a held conversation whole, 3 is cold. 32..=2048 blocks, a partial last block.
    pub fn query(&self, i: u64) -> Query {
        let mut rng = Rng::new(self.seed ^ 0x5155_4552_5900_0000 ^ i.wrapping_mul(0x9E37));
        let held = &self.held[rng.range(0, self.held.len() - 1)];
        let conv = &held[rng.range(0, held.len() - 1)];
        let mut blocks = match i % 4 {
            0 => conv[..rng.range(1, conv.len())].to_vec(),
            1 => self.prompts[rng.range(0, self.prompts.len() - 1)].clone(),
            2 => conv.clone(),
            _ => Vec::new(),
        };
        let more = match i % 4 {
            0 => rng.range(1, 64),
            1 => rng.range(1, 256),
            2 => 0,
            _ => log_range(&mut rng, MIN_QUERY_BLOCKS, MAX_QUERY_BLOCKS),
        };
        extend(&mut blocks, more, &mut rng);
        if blocks.len() < MIN_QUERY_BLOCKS {
            let n = MIN_QUERY_BLOCKS - blocks.len();
            extend(&mut blocks, n, &mut rng);
        }
        blocks.truncate(MAX_QUERY_BLOCKS);
        let prompt_tokens = blocks.len() * BLOCK_SIZE + rng.range(1, BLOCK_SIZE - 1);
        Query {
            blocks,
            prompt_tokens,
        }
    }

    /// The slow, obvious count of `queries`: per query and engine, the leading blocks it
    /// holds after the fill (every full block of a query can hit: its last block is partial).
    pub fn expected(&self, queries: &[Query]) -> Vec<Vec<usize>> {
        let sets: Vec<HashSet<u64>> = self
            .held
            .iter()
            .map(|s| s.iter().flatten().map(|b| b.chain).collect())
            .collect();
        queries
            .iter()
            .map(|q| {
                sets.iter()
                    .map(|h| q.blocks.iter().take_while(|b| h.contains(&b.chain)).count())
                    .collect()
            })
            .collect()
    }
}
