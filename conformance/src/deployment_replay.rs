//! The routing replay under deployments: one mixed workload — tenants with and without a
//! `cache_salt`, two LoRA adapters and the base model, sessions on shared system prompts,
//! each turn resending the conversation — sent to fleets of emulated engines launched with
//! other deployments (vLLM look-ahead keys for EAGLE and multi-module MTP, vLLM 0.34's
//! 64-token blocks, SGLang EAGLE bigram pages, adapters, salts), each fleet with small pools
//! that evict. Per fleet, each request is keyed the gateway's way from its body
//! ([`kvprobe::deployment::DeploymentKeys::body_keys`] → `request_hasher`), routed to the
//! endpoint the prefix index predicts most cached tokens for, and the index's prediction for
//! that endpoint is compared with the count the engine reports; the engine reads its own
//! adapter and salt from the same body ([`crate::emulator::engine_request_side`]), keys the
//! prompt with the emulator's hashing ([`crate::emulator::EventWriter::keys`]), and its
//! KV-event batches (the release's schema: look-ahead token ids, bigram pairs, adapter names,
//! block 0's salt) are fed back to the index.
//!
//! What must hold: every prediction equals the reported count, except on endpoints whose
//! release keeps adapters out of its events (SGLang 0.5.19 serving adapters), which answer
//! `unknown`; no request is refused. What `cargo run -p kvexact-conformance --example
//! route_replay -- --deployments` prints.

use crate::emulator::pool::{Ask, BlockPool};
use crate::emulator::writer::{EventWriter, RequestSide, WriterConfig};
use crate::emulator::{engine_request_side, Faults};
use kvindex::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
    Outcome, Request,
};
use kvprobe::deployment::DeploymentKeys;
use kvprobe::Engine;
use kvprofile_core::deployment::Deployment;
use serde_json::{json, Value};

/// The base model every fleet serves.
pub const BASE_MODEL: &str = "Qwen/Qwen3-0.6B";

/// The adapters a fleet that serves adapters declares: `(name, path)`.
pub const ADAPTERS: [(&str, &str); 2] = [
    ("sql-lora", "/adapters/sql-lora"),
    ("chat-lora", "/adapters/chat-lora"),
];

/// The tenants: `None` sends no `cache_salt`.
pub const TENANTS: [Option<&str>; 3] = [None, Some("tenant-a"), Some("tenant-b")];

/// One fleet: engines of one release launched with one deployment.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// A label.
    pub name: &'static str,
    /// Engine family.
    pub engine: Engine,
    /// Engine release version.
    pub version: &'static str,
    /// The deployment (YAML flow), as the engines were launched and the gateway declares.
    pub deployment: String,
    /// Engines in the fleet.
    pub endpoints: usize,
    /// Blocks of each engine's pool (small pools evict).
    pub pool_blocks: usize,
}

fn adapters_yaml() -> String {
    let list: Vec<String> = ADAPTERS
        .iter()
        .map(|(n, p)| format!("{{name: {n}, path: {p}}}"))
        .collect();
    format!("[{}]", list.join(", "))
}

/// The fleets of the default replay: vLLM 0.33 with EAGLE (L = 1) and adapters; vLLM 0.34
/// with 3-module MTP (L = 3) at its default 64-token blocks, with adapters; vLLM 0.31 plain
/// with adapters; SGLang 0.5.19 with EAGLE (bigram pages); SGLang 0.5.19 serving adapters
/// (`unknown`: its events do not show them).
pub fn default_fleets() -> Vec<Fleet> {
    let a = adapters_yaml();
    vec![
        Fleet {
            name: "vllm-0.33-eagle",
            engine: Engine::Vllm,
            version: "0.33.0",
            deployment: format!("{{hashSeed: '0', speculative: {{method: eagle, numSpeculativeTokens: 3}}, loraAdapters: {a}}}"),
            endpoints: 3,
            pool_blocks: 220,
        },
        Fleet {
            name: "vllm-0.34-mtp3",
            engine: Engine::Vllm,
            version: "0.34.0",
            deployment: format!("{{hashSeed: '0', speculative: {{method: mtp, numSpeculativeTokens: 3, mtpModules: 3}}, loraAdapters: {a}}}"),
            endpoints: 3,
            pool_blocks: 60,
        },
        Fleet {
            name: "vllm-0.31-plain",
            engine: Engine::Vllm,
            version: "0.31.0",
            deployment: format!("{{hashSeed: '0', loraAdapters: {a}}}"),
            endpoints: 3,
            pool_blocks: 220,
        },
        Fleet {
            name: "sglang-0.5.19-eagle",
            engine: Engine::Sglang,
            version: "0.5.19",
            deployment: "{blockSize: 16, speculative: {method: EAGLE, numSpeculativeTokens: 3}}"
                .into(),
            endpoints: 3,
            pool_blocks: 220,
        },
        Fleet {
            name: "sglang-0.5.19-adapters",
            engine: Engine::Sglang,
            version: "0.5.19",
            deployment: format!("{{blockSize: 16, loraAdapters: {a}}}"),
            endpoints: 2,
            pool_blocks: 220,
        },
    ]
}

/// The workload.
#[derive(Debug, Clone, Copy)]
pub struct MixedConfig {
    /// Conversations.
    pub sessions: usize,
    /// Turns per conversation.
    pub turns: usize,
    /// Distinct system prompts the sessions share (across tenants and adapters).
    pub system_prompts: usize,
    /// Workload seed.
    pub seed: u64,
}

impl Default for MixedConfig {
    fn default() -> Self {
        MixedConfig {
            sessions: 18,
            turns: 5,
            system_prompts: 2,
            seed: 20261207,
        }
    }
}

/// One request as one fleet routed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixedLine {
    /// Request number.
    pub id: usize,
    /// Session.
    pub session: usize,
    /// The tenant's salt.
    pub tenant: Option<String>,
    /// The adapter the request names (`None`: the base model).
    pub adapter: Option<String>,
    /// The endpoint it went to.
    pub endpoint: usize,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// The index's prediction for that endpoint.
    pub predicted: Result<u64, String>,
    /// What the engine reported.
    pub reported: u64,
}

/// One fleet's outcome.
#[derive(Debug, Clone)]
pub struct FleetReport {
    /// The fleet.
    pub fleet: Fleet,
    /// Every request.
    pub lines: Vec<MixedLine>,
    /// Predictions equal to the engine's count.
    pub exact: usize,
    /// Predictions `unknown` (with their reasons in the lines).
    pub unknown: usize,
    /// Predictions that differ from the engine's count.
    pub wrong: usize,
    /// Cached tokens reported over all requests.
    pub cached_tokens: u64,
    /// Block copies the engines evicted.
    pub evictions: u64,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn tokens(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| 1000 + self.below(140_000) as u32).collect()
    }
}

/// A request of the workload: session, tenant, adapter index (`None`: base), prompt ids.
type Sent = (usize, Option<&'static str>, Option<usize>, Vec<u32>);

/// The requests: sessions on shared system prompts, each with a tenant and an adapter (or
/// the base model), each turn resending the whole conversation plus a new message, sessions
/// interleaved. The same system prompt under other tenants or adapters must not hit.
fn workload(cfg: &MixedConfig) -> Vec<Sent> {
    let mut rng = Rng(cfg.seed | 1);
    let systems: Vec<Vec<u32>> = (0..cfg.system_prompts)
        .map(|_| {
            let n = 150 + rng.below(250) as usize;
            rng.tokens(n)
        })
        .collect();
    struct S {
        history: Vec<u32>,
        tenant: Option<&'static str>,
        adapter: Option<usize>,
        turn: usize,
    }
    let mut sessions: Vec<S> = (0..cfg.sessions)
        .map(|i| S {
            history: systems[rng.below(cfg.system_prompts as u64) as usize].clone(),
            tenant: TENANTS[i % TENANTS.len()],
            adapter: match (i / TENANTS.len()) % 3 {
                0 => None,
                k => Some(k - 1),
            },
            turn: 0,
        })
        .collect();
    let mut out = Vec::new();
    while out.len() < cfg.sessions * cfg.turns {
        let s = rng.below(cfg.sessions as u64) as usize;
        let sess = &mut sessions[s];
        if sess.turn == cfg.turns {
            continue;
        }
        let user = 20 + rng.below(120) as usize;
        let msg = rng.tokens(user);
        sess.history.extend(&msg);
        out.push((s, sess.tenant, sess.adapter, sess.history.clone()));
        let reply = 10 + rng.below(80) as usize;
        let r = rng.tokens(reply);
        sess.history.extend(&r);
        sess.turn += 1;
    }
    out
}

/// The request body a client of `engine` sends for `adapter` and `tenant` (the prompt is
/// not read by either side here: the ids are the workload's).
fn body(engine: Engine, adapter: Option<&str>, tenant: Option<&str>) -> Value {
    let model = match (engine, adapter) {
        (_, None) => BASE_MODEL.to_string(),
        (Engine::Sglang, Some(a)) => format!("{BASE_MODEL}:{a}"),
        (_, Some(a)) => a.to_string(),
    };
    let mut v = json!({ "model": model, "prompt": "", "max_tokens": 1 });
    if let Some(t) = tenant {
        v["cache_salt"] = json!(t);
    }
    v
}

/// Runs the workload against one fleet.
pub fn replay_fleet(fleet: &Fleet, cfg: &MixedConfig) -> Result<FleetReport, String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", fleet.name);
    let contract = kvprobe::contract::resolve(fleet.engine, fleet.version).map_err(|e| err(&e))?;
    let deployment =
        Deployment::parse(fleet.deployment.as_bytes(), fleet.name).map_err(|e| err(&e))?;
    // The gateway's side: the declared deployment.
    let keys =
        DeploymentKeys::new(contract.clone(), &deployment, fleet.name).map_err(|e| err(&e))?;
    let k = keys.keying().clone();
    let bs = k.block_size;
    let schema = contract.events().ok_or_else(|| err(&"no KV events"))?;
    let index = Index::new(IndexOptions {
        rule: HitRule::for_keying(&k).map_err(|e| err(&e))?,
        schema: schema.clone(),
        block_size: bs,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: bs,
        }],
        max_slots: fleet.endpoints as u32,
    })
    .map_err(|e| err(&e))?;
    // The engines' side: launched with the same options, keyed by the emulator.
    let wcfg = WriterConfig {
        engine: fleet.engine,
        contract: contract.clone(),
        block_size: bs as usize,
        hash_seed: k.hash_seed.clone(),
        lora: None,
        faults: Faults::default(),
        prefix_cache: None,
        group_blocks: 1,
        keying: Some(k.clone()),
    };
    let engine_keys = EventWriter::new(wcfg.clone()).map_err(|e| err(&e))?;
    let served: Vec<(String, String)> = k
        .adapters
        .iter()
        .map(|a| (a.name.clone(), a.path.clone()))
        .collect();
    let mut pools: Vec<BlockPool> = (0..fleet.endpoints)
        .map(|_| BlockPool::with_events(fleet.pool_blocks, wcfg.clone()))
        .collect();
    let ids: Vec<EndpointId> = (0..fleet.endpoints)
        .map(|i| {
            index.add_endpoint(EndpointConfig {
                name: format!("{}-{i}", fleet.name),
                dp_ranks: 1,
                capacity: Capacity {
                    gpu_blocks: pools[i].usable() as u64,
                    other_blocks: 0,
                },
                lora_adapters: !k.adapters.is_empty(),
                replay: false,
                starts_empty: true,
            })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| err(&e))?;
    let mut load = vec![0usize; fleet.endpoints];
    let mut report = FleetReport {
        fleet: fleet.clone(),
        lines: Vec::new(),
        exact: 0,
        unknown: 0,
        wrong: 0,
        cached_tokens: 0,
        evictions: 0,
    };
    let mut preds = Vec::new();
    for (id, (session, tenant, adapter, tokens)) in workload(cfg).into_iter().enumerate() {
        // A fleet that serves no adapters gets the session's requests on the base model.
        let adapter = adapter
            .filter(|_| !served.is_empty())
            .map(|i| ADAPTERS[i].0);
        let b = body(fleet.engine, adapter, tenant);
        let bytes = serde_json::to_vec(&b).map_err(|e| err(&e))?;
        // Gateway: keys from the body, as route_keys reads them.
        let req_keys = keys.body_keys(&bytes).map_err(|e| err(&e))?;
        let hasher = keys
            .request_hasher(req_keys.as_keys())
            .map_err(|e| format!("{}: request {id} refused: {e}", fleet.name))?;
        let n = hasher.hash_count(tokens.len(), false).unwrap_or(0);
        let mut hashes = vec![0u64; n];
        let n = hasher
            .block_hashes_u64(&tokens, &mut hashes)
            .map_err(|e| err(&e))?;
        hashes.truncate(n);
        let req = Request {
            block_hashes: &hashes,
            prompt_tokens: tokens.len(),
            max_cached_tokens: None,
        };
        index.predict(&req, &mut preds).map_err(|e| err(&e))?;
        let e = (0..fleet.endpoints)
            .max_by_key(|&i| {
                (
                    preds[i].outcome.tokens().unwrap_or(0),
                    std::cmp::Reverse(load[i]),
                    std::cmp::Reverse(i),
                )
            })
            .unwrap_or(0);
        load[e] += 1;
        // Engine: its own reading of the body and its own keys.
        let Value::Object(obj) = &b else {
            return Err(err(&"body is not an object"));
        };
        let (lora, salt) = engine_request_side(fleet.engine, BASE_MODEL, &served, obj)
            .map_err(|(s, m)| format!("{}: the engine answers {s}: {m}", fleet.name))?;
        let side = RequestSide {
            lora: lora.as_deref(),
            salt: salt.as_deref(),
        };
        let engine_hashes = engine_keys.keys(&tokens, side).map_err(|e| err(&e))?;
        // SGLang 0.5.19 keys its radix tree by the adapter, which its hashes do not hold.
        let namespace = match (k.adapters_in_keys, &lora) {
            (false, Some(a)) => 1 + served.iter().position(|(n, _)| n == a).unwrap_or(0) as u32,
            _ => 0,
        };
        let done = pools[e]
            .serve_ask(&tokens, &engine_hashes, Ask { side, namespace })
            .ok_or_else(|| err(&format!("request {id} does not fit a pool")))?;
        let predicted = match preds[e].outcome {
            Outcome::Cached { tokens, .. } => Ok(u64::from(tokens)),
            Outcome::Unknown(r) => Err(format!("{r:?}")),
        };
        match &predicted {
            Ok(p) if *p == done.cached_tokens => report.exact += 1,
            Ok(_) => report.wrong += 1,
            Err(_) => report.unknown += 1,
        }
        index
            .observe(
                ids[e],
                0,
                &format!("req-{id}"),
                preds[e].outcome,
                done.cached_tokens,
            )
            .map_err(|e| err(&e))?;
        if let Some((seq, payload)) = &done.batch {
            index
                .apply_payload(ids[e], 0, *seq, payload)
                .map_err(|e| err(&e))?;
        }
        report.cached_tokens += done.cached_tokens;
        report.lines.push(MixedLine {
            id,
            session,
            tenant: tenant.map(str::to_string),
            adapter: adapter.map(str::to_string),
            endpoint: e,
            prompt_tokens: tokens.len(),
            predicted,
            reported: done.cached_tokens,
        });
    }
    report.evictions = index.status().iter().map(|s| s.removed).sum();
    Ok(report)
}
