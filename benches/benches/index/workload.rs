//! The `index` bench's workload: a seeded agentic / multi-turn request stream over N endpoints,
//! served by a simulated prefix cache per endpoint (LRU over leaf blocks, a hard capacity), and
//! the KV events those caches publish, batch by batch. Everything is generated once, before any
//! timing, and is the same for every index: the same blocks, the same order.
//!
//! Shape of the traffic:
//! * a few system prompts (16..96 blocks) shared by most conversations, chosen with a skew
//!   (the first ones are the popular ones);
//! * chat conversations (2..8 turns, each turn appends an assistant reply and a user message)
//!   and agent loops (10..40 turns, each resending the whole growing prefix with 1..4 new
//!   blocks of tool call and result);
//! * requests routed to the conversation's home endpoint (85 %) or to any other one (15 %), so
//!   most endpoints hold partial copies of the popular prefixes;
//! * evictions: each endpoint holds at most `capacity` blocks; a request that needs room
//!   evicts the least recently used leaf blocks first (vLLM frees a request's blocks tail
//!   first), so every endpoint's cache stays a set of whole prefixes and the peers' trees,
//!   which drop a block's descendants with it, see the same cache as the engine.
//!
//! Block identities: each new block gets a fresh random content id (what the peers call the
//! local / content hash: the hash of the block's tokens alone) and a chain hash
//! (`mix(parent chain hash, content id)`, what the engine publishes in `block_hashes`).

use std::collections::{BTreeSet, HashMap};

/// Tokens per block (vLLM's default `--block-size`).
pub const BLOCK_SIZE: usize = 16;

/// A deterministic generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// splitmix64's finaliser.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One block of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// The chain hash the engine publishes.
    pub chain: u64,
    /// The hash of the block's tokens alone.
    pub content: u64,
}

impl Block {
    pub fn after(parent: Option<&Block>, content: u64) -> Block {
        let p = parent.map_or(0x6b76_6578_6163_7421, |b| b.chain);
        Block {
            chain: mix(p ^ content.rotate_left(17) ^ 0xA076_1D64_78BD_642F),
            content,
        }
    }

    /// The block's 16 token ids (derived from its content id).
    pub fn tokens(&self) -> impl Iterator<Item = u32> + '_ {
        (0..BLOCK_SIZE as u64).map(move |i| (mix(self.content ^ i) % 151_000) as u32)
    }
}

/// What one endpoint published for one request: one batch (removals first, as vLLM evicts
/// while allocating, then the stored blocks after `parent`).
#[derive(Debug, Clone)]
pub struct Batch {
    pub endpoint: usize,
    /// The endpoint's sequence number (0, 1, 2, ... per endpoint).
    pub seq: u64,
    pub removed: Vec<u64>,
    pub parent: Option<u64>,
    pub stored: Vec<Block>,
}

/// A query: a request's full blocks and its prompt length.
#[derive(Debug, Clone)]
pub struct Query {
    pub blocks: Vec<Block>,
    pub prompt_tokens: usize,
}

impl Query {
    fn new(blocks: Vec<Block>, rng: &mut Rng) -> Query {
        // A partial last block of 1..=15 tokens: every full block can be hit.
        let prompt_tokens = blocks.len() * BLOCK_SIZE + rng.range(1, BLOCK_SIZE - 1);
        Query {
            blocks,
            prompt_tokens,
        }
    }
    pub fn chains(&self) -> Vec<u64> {
        self.blocks.iter().map(|b| b.chain).collect()
    }
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    pub fn contents(&self) -> Vec<u64> {
        self.blocks.iter().map(|b| b.content).collect()
    }
}

/// The generated workload.
pub struct Workload {
    pub endpoints: usize,
    /// Blocks each endpoint's cache holds at most.
    pub capacity: u64,
    pub batches: Vec<Batch>,
    pub queries: Vec<Query>,
    /// The chat-4k-sized query (4042 prompt tokens, 252 blocks), held whole by a few endpoints.
    pub chat4k: Query,
    /// What each endpoint holds after the whole stream (chain hashes).
    pub held: Vec<std::collections::HashSet<u64>>,
    pub stats: Stats,
}

/// Counts of the stream.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub requests: usize,
    pub stored: usize,
    pub removed: usize,
    pub held: usize,
    pub distinct_held: usize,
}

/// One block in a simulated cache.
struct Node {
    parent: Option<u64>,
    children: u32,
    last: u64,
}

/// One endpoint's prefix cache.
struct Engine {
    cap: usize,
    held: HashMap<u64, Node>,
    /// Evictable blocks (no cached child), by last use.
    leaves: BTreeSet<(u64, u64)>,
    tick: u64,
    seq: u64,
}

impl Engine {
    fn new(cap: usize) -> Engine {
        Engine {
            cap,
            held: HashMap::new(),
            leaves: BTreeSet::new(),
            tick: 0,
            seq: 0,
        }
    }

    fn touch(&mut self, h: u64) {
        let tick = self.tick;
        let n = self.held.get_mut(&h).expect("held");
        if n.children == 0 {
            self.leaves.remove(&(n.last, h));
            self.leaves.insert((tick, h));
        }
        n.last = tick;
    }

    /// Serves a request: the cached prefix is reused, the rest stored, LRU leaves evicted first.
    fn serve(&mut self, endpoint: usize, blocks: &[Block]) -> Batch {
        self.tick += 1;
        let hit = blocks
            .iter()
            .take_while(|b| self.held.contains_key(&b.chain))
            .count();
        for b in &blocks[..hit] {
            self.touch(b.chain);
        }
        let mut want = blocks.len() - hit;
        let mut removed = Vec::new();
        while self.held.len() + want > self.cap {
            let Some(&(last, h)) = self.leaves.iter().next() else {
                break;
            };
            if last == self.tick {
                break; // only this request's own blocks are left
            }
            self.leaves.remove(&(last, h));
            let n = self.held.remove(&h).expect("leaf held");
            removed.push(h);
            if let Some(p) = n.parent {
                let pn = self.held.get_mut(&p).expect("parent held");
                pn.children -= 1;
                if pn.children == 0 {
                    self.leaves.insert((pn.last, p));
                }
            }
        }
        want = want.min(self.cap.saturating_sub(self.held.len()));
        let stored: Vec<Block> = blocks[hit..hit + want].to_vec();
        let parent = hit.checked_sub(1).map(|i| blocks[i].chain);
        let mut prev = parent;
        for b in &stored {
            if let Some(p) = prev {
                let pn = self.held.get_mut(&p).expect("parent held");
                if pn.children == 0 {
                    self.leaves.remove(&(pn.last, p));
                }
                pn.children += 1;
            }
            self.held.insert(
                b.chain,
                Node {
                    parent: prev,
                    children: 0,
                    last: self.tick,
                },
            );
            self.leaves.insert((self.tick, b.chain));
            prev = Some(b.chain);
        }
        let seq = self.seq;
        self.seq += 1;
        Batch {
            endpoint,
            seq,
            removed,
            parent,
            stored,
        }
    }
}

struct Conv {
    blocks: Vec<Block>,
    agent: bool,
    turns_left: usize,
    home: usize,
}

pub fn extend(blocks: &mut Vec<Block>, n: usize, rng: &mut Rng) {
    for _ in 0..n {
        let b = Block::after(blocks.last(), rng.next());
        blocks.push(b);
    }
}

fn new_conv(systems: &[Vec<Block>], endpoints: usize, rng: &mut Rng) -> Conv {
    // Skewed choice: the first system prompts are the popular ones.
    let u = rng.unit();
    let sys = &systems[((u * u) * systems.len() as f64) as usize];
    let agent = rng.unit() < 0.4;
    let mut blocks = sys.clone();
    let first = if agent {
        rng.range(4, 24)
    } else {
        rng.range(2, 16)
    };
    extend(&mut blocks, first, rng);
    Conv {
        blocks,
        agent,
        turns_left: if agent {
            rng.range(10, 40)
        } else {
            rng.range(2, 8)
        },
        home: rng.range(0, endpoints - 1),
    }
}

/// Generates the workload for `endpoints` endpoints: `requests_per_endpoint × endpoints`
/// requests, then the queries.
pub fn generate(endpoints: usize, seed: u64) -> Workload {
    let mut rng = Rng::new(seed ^ endpoints as u64);
    let capacity = 512usize;
    let requests = endpoints * 48;
    let systems: Vec<Vec<Block>> = (0..6 + endpoints / 16)
        .map(|_| {
            let mut b = Vec::new();
            let n = rng.range(16, 96);
            extend(&mut b, n, &mut rng);
            b
        })
        .collect();
    let mut engines: Vec<Engine> = (0..endpoints).map(|_| Engine::new(capacity)).collect();
    let mut convs: Vec<Conv> = (0..2 * endpoints)
        .map(|_| new_conv(&systems, endpoints, &mut rng))
        .collect();
    let mut batches = Vec::with_capacity(requests + 8);
    let mut stats = Stats::default();
    for _ in 0..requests {
        let ci = rng.range(0, convs.len() - 1);
        let c = &mut convs[ci];
        let ep = if rng.unit() < 0.85 {
            c.home
        } else {
            rng.range(0, endpoints - 1)
        };
        batches.push(engines[ep].serve(ep, &c.blocks));
        // The next turn: the reply and the next message (chat), or a tool call and its
        // result (agent), appended to everything sent so far.
        c.turns_left -= 1;
        if c.turns_left == 0 {
            convs[ci] = new_conv(&systems, endpoints, &mut rng);
        } else if c.agent {
            let n = rng.range(1, 4);
            extend(&mut c.blocks, n, &mut rng);
        } else {
            let n = rng.range(3, 20);
            extend(&mut c.blocks, n, &mut rng);
        }
    }
    // The chat-4k request (4042 tokens = 252 full blocks on the most popular system prompt),
    // served last by three endpoints so that its walk runs the whole length.
    let mut chat = systems[0].clone();
    let more = 252 - chat.len();
    extend(&mut chat, more, &mut rng);
    for ep in [0, endpoints / 2, endpoints - 1] {
        batches.push(engines[ep].serve(ep, &chat));
    }
    let chat4k = Query {
        blocks: chat,
        prompt_tokens: 4042,
    };
    for b in &batches {
        stats.requests += 1;
        stats.stored += b.stored.len();
        stats.removed += b.removed.len();
    }
    // Queries: next turns of live conversations, new conversations on the shared system
    // prompts, resends of earlier prefixes, and cold requests.
    let mut queries = Vec::new();
    for i in 0..512 {
        let mut blocks = match i % 8 {
            0..=3 => convs[rng.range(0, convs.len() - 1)].blocks.clone(),
            4 | 5 => systems[rng.range(0, systems.len() - 1)].clone(),
            6 => {
                let c = &convs[rng.range(0, convs.len() - 1)].blocks;
                c[..rng.range(1, c.len())].to_vec()
            }
            _ => Vec::new(),
        };
        let n = rng.range(1, 8);
        extend(&mut blocks, n, &mut rng);
        queries.push(Query::new(blocks, &mut rng));
    }
    let held: Vec<std::collections::HashSet<u64>> = engines
        .iter()
        .map(|e| e.held.keys().copied().collect())
        .collect();
    stats.held = held.iter().map(|h| h.len()).sum();
    stats.distinct_held = held
        .iter()
        .flatten()
        .collect::<std::collections::HashSet<_>>()
        .len();
    Workload {
        endpoints,
        capacity: capacity as u64,
        batches,
        queries,
        chat4k,
        held,
        stats,
    }
}

/// The slow, obvious count: for each endpoint, how many leading blocks of the query it holds.
pub fn expected_hits(w: &Workload, q: &Query) -> Vec<usize> {
    let max_blocks = (q.prompt_tokens - 1) / BLOCK_SIZE;
    w.held
        .iter()
        .map(|h| {
            q.blocks[..max_blocks.min(q.blocks.len())]
                .iter()
                .take_while(|b| h.contains(&b.chain))
                .count()
        })
        .collect()
}
