//! The routing replay: an agentic, multi-turn workload sent to several emulated vLLM engines
//! ([`crate::emulator::pool`]: prefix caching with LRU eviction), routed by the prefix index
//! or round-robin. For every request the index's prediction for the chosen endpoint is
//! compared with the count the engine reports, and the engines' KV-event batches are fed back
//! to the index — what `cargo run -p kvexact-conformance --example route_replay` prints.

use crate::emulator::pool::BlockPool;
use kvhash::events::{EventFormat, EventSchema};
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvindex::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
    Observation, Request,
};

/// How requests are routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The endpoint with the most predicted cached tokens (ties: the least loaded, then the
    /// first).
    Prefix,
    /// Endpoint `i mod n` for request `i`.
    RoundRobin,
}

/// The workload and the engines.
#[derive(Debug, Clone, Copy)]
pub struct ReplayConfig {
    /// Emulated engines.
    pub endpoints: usize,
    /// Blocks of each engine's pool (small pools evict).
    pub pool_blocks: usize,
    /// Conversations / agent loops.
    pub sessions: usize,
    /// Turns per session.
    pub turns: usize,
    /// Distinct system prompts the sessions share.
    pub system_prompts: usize,
    /// Workload seed.
    pub seed: u64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            endpoints: 4,
            pool_blocks: 400,
            sessions: 24,
            turns: 6,
            system_prompts: 3,
            seed: 20261202,
        }
    }
}

/// One routed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Request number.
    pub id: usize,
    /// Session and turn.
    pub session: usize,
    /// Turn within the session.
    pub turn: usize,
    /// The endpoint it went to.
    pub endpoint: usize,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// The index's prediction for that endpoint (`None`: unknown).
    pub predicted: Option<u64>,
    /// What the engine reported.
    pub reported: u64,
}

/// The replay's outcome.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every request.
    pub lines: Vec<Line>,
    /// Cached tokens the engines reported, over all requests.
    pub cached_tokens: u64,
    /// Prompt tokens over all requests.
    pub prompt_tokens: u64,
    /// Requests whose prediction equals the engine's count.
    pub exact: usize,
    /// Block copies the engines evicted.
    pub evictions: u64,
}

impl Report {
    /// Cached / prompt tokens.
    pub fn hit_rate(&self) -> f64 {
        self.cached_tokens as f64 / self.prompt_tokens.max(1) as f64
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 33)).wrapping_mul(0xff51afd7ed558ccd) ^ (x >> 29)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn tokens(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| 1000 + self.below(140_000) as u32).collect()
    }
}

/// The requests: sessions on shared system prompts, each turn resending the whole history
/// plus a new message (agent loops append tool results the same way), sessions interleaved.
fn workload(cfg: &ReplayConfig) -> Vec<(usize, usize, Vec<u32>)> {
    let mut rng = Rng(cfg.seed);
    let systems: Vec<Vec<u32>> = (0..cfg.system_prompts)
        .map(|_| {
            let n = 150 + rng.below(250) as usize;
            rng.tokens(n)
        })
        .collect();
    let mut history: Vec<Vec<u32>> = (0..cfg.sessions)
        .map(|_| systems[rng.below(cfg.system_prompts as u64) as usize].clone())
        .collect();
    let mut turn = vec![0usize; cfg.sessions];
    let mut out = Vec::new();
    let total = cfg.sessions * cfg.turns;
    while out.len() < total {
        let s = rng.below(cfg.sessions as u64) as usize;
        if turn[s] == cfg.turns {
            continue;
        }
        let user = 20 + rng.below(120) as usize;
        let msg = rng.tokens(user);
        history[s].extend(&msg);
        out.push((s, turn[s], history[s].clone()));
        let answer = 10 + rng.below(80) as usize;
        let reply = rng.tokens(answer);
        history[s].extend(&reply);
        turn[s] += 1;
    }
    out
}

/// Runs the replay under `policy`.
pub fn replay(cfg: &ReplayConfig, policy: Policy) -> Result<Report, String> {
    let bs = 16usize;
    let hasher = VllmHasher::new(HashAlgo::Sha256Cbor, bs, Some("0")).map_err(|e| e.to_string())?;
    let index = Index::new(IndexOptions {
        rule: HitRule::for_release_id("vllm-kv-map-v3-r0.31").map_err(|e| e.to_string())?,
        schema: EventSchema::family(EventFormat::VllmKvMapV3).clone(),
        block_size: bs as u32,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: bs as u32,
        }],
        max_slots: cfg.endpoints as u32,
    })
    .map_err(|e| e.to_string())?;
    let mut pools: Vec<BlockPool> = (0..cfg.endpoints)
        .map(|_| BlockPool::new(cfg.pool_blocks, bs))
        .collect();
    let ids: Vec<EndpointId> = (0..cfg.endpoints)
        .map(|i| {
            index.add_endpoint(EndpointConfig {
                name: format!("vllm-{i}"),
                dp_ranks: 1,
                capacity: Capacity {
                    gpu_blocks: pools[i].usable() as u64,
                    other_blocks: 0,
                },
                lora_adapters: false,
                replay: false,
                starts_empty: true,
            })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut load = vec![0usize; cfg.endpoints];
    let mut report = Report {
        lines: Vec::new(),
        cached_tokens: 0,
        prompt_tokens: 0,
        exact: 0,
        evictions: 0,
    };
    let mut preds = Vec::new();
    let mut hashes = Vec::new();
    for (id, (session, turn, tokens)) in workload(cfg).into_iter().enumerate() {
        hashes.resize(tokens.len() / bs, 0);
        let n = hasher
            .block_hashes_u64(&tokens, &mut hashes)
            .map_err(|e| e.to_string())?;
        hashes.truncate(n);
        let req = Request {
            block_hashes: &hashes,
            prompt_tokens: tokens.len(),

            max_cached_tokens: None,
        };
        index.predict(&req, &mut preds).map_err(|e| e.to_string())?;
        let e = match policy {
            Policy::RoundRobin => id % cfg.endpoints,
            Policy::Prefix => (0..cfg.endpoints)
                .max_by_key(|&i| {
                    (
                        preds[i].outcome.tokens().unwrap_or(0),
                        std::cmp::Reverse(load[i]),
                        std::cmp::Reverse(i),
                    )
                })
                .unwrap_or(0),
        };
        load[e] += 1;
        let served = pools[e].serve(&tokens, &hashes).ok_or_else(|| {
            format!(
                "request {id} does not fit a pool of {} blocks",
                cfg.pool_blocks
            )
        })?;
        let obs = index
            .observe(
                ids[e],
                0,
                &format!("req-{id}"),
                preds[e].outcome,
                served.cached_tokens,
            )
            .map_err(|e| e.to_string())?;
        if obs == Observation::Exact {
            report.exact += 1;
        }
        if let Some((seq, payload)) = &served.batch {
            index
                .apply_payload(ids[e], 0, *seq, payload)
                .map_err(|e| e.to_string())?;
        }
        report.cached_tokens += served.cached_tokens;
        report.prompt_tokens += tokens.len() as u64;
        report.lines.push(Line {
            id,
            session,
            turn,
            endpoint: e,
            prompt_tokens: tokens.len(),
            predicted: preds[e].outcome.tokens(),
            reported: served.cached_tokens,
        });
    }
    report.evictions = index.status().iter().map(|s| s.removed).sum();
    Ok(report)
}
