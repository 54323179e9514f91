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
use crate::emulator::{engine_request_side, Emulator, EmulatorConfig, Faults, TempRegistry};
use kvindex::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
    Outcome, Request,
};
use kvprobe::deployment::DeploymentKeys;
use kvprobe::feed::{Source, ZmqFeed};
use kvprobe::transport::HttpClient;
use kvprobe::Engine;
use kvprofile_core::deployment::Deployment;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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
/// (`unknown`: its events do not show them); SGLang 0.5.23 serving adapters (its default
/// event format namespaces each adapter's pages); SGLang 0.5.22 with the `dynamo` event
/// format (adapters and salts namespaced).
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
        Fleet {
            name: "sglang-0.5.23-adapters",
            engine: Engine::Sglang,
            version: "0.5.23",
            deployment: format!("{{blockSize: 16, loraAdapters: {a}}}"),
            endpoints: 3,
            pool_blocks: 220,
        },
        Fleet {
            name: "sglang-0.5.22-dynamo",
            engine: Engine::Sglang,
            version: "0.5.22",
            deployment: format!("{{blockSize: 16, kvEventsFormat: dynamo, loraAdapters: {a}}}"),
            endpoints: 3,
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

/// Where a fleet's requests are served and how their events reach the index.
trait Engines {
    /// Serves request `id` (body `body`, prompt `tokens`) on endpoint `e`; the engine's
    /// events are applied to `index` (endpoint `ep`) before it returns. The cached tokens the
    /// engine reported.
    fn serve(
        &mut self,
        e: usize,
        id: usize,
        body: &Value,
        tokens: &[u32],
        index: &Index,
        ep: EndpointId,
    ) -> Result<u64, String>;
}

/// The fleet's engines in this process: the emulator's keys and pools, batches applied as
/// returned.
struct InProcess {
    engine: Engine,
    keys: EventWriter,
    served: Vec<(String, String)>,
    adapters_in_keys: bool,
    pools: Vec<BlockPool>,
}

impl Engines for InProcess {
    fn serve(
        &mut self,
        e: usize,
        id: usize,
        body: &Value,
        tokens: &[u32],
        index: &Index,
        ep: EndpointId,
    ) -> Result<u64, String> {
        // The engine's own reading of the body and its own keys.
        let Value::Object(obj) = body else {
            return Err("body is not an object".into());
        };
        let (lora, salt) = engine_request_side(self.engine, BASE_MODEL, &self.served, obj)
            .map_err(|(s, m)| format!("the engine answers {s}: {m}"))?;
        let side = RequestSide {
            lora: lora.as_deref(),
            salt: salt.as_deref(),
        };
        let hashes = self.keys.keys(tokens, side).map_err(|e| e.to_string())?;
        // SGLang 0.5.19 keys its radix tree by the adapter, which its hashes do not hold.
        let namespace = match (self.adapters_in_keys, &lora) {
            (false, Some(a)) => {
                1 + self.served.iter().position(|(n, _)| n == a).unwrap_or(0) as u32
            }
            _ => 0,
        };
        let done = self.pools[e]
            .serve_ask(tokens, &hashes, Ask { side, namespace })
            .ok_or_else(|| format!("request {id} does not fit a pool"))?;
        if let Some((seq, payload)) = &done.batch {
            index
                .apply_payload(ep, 0, *seq, payload)
                .map_err(|e| e.to_string())?;
        }
        Ok(done.cached_tokens)
    }
}

/// The fleet's engines as emulators on loopback sockets ([`Emulator`] launched with the
/// deployment and a block pool): requests over HTTP, the reported count from
/// `usage.prompt_tokens_details.cached_tokens`, events over ZMQ through a [`ZmqFeed`].
struct Live {
    emulators: Vec<Emulator>,
    feed: ZmqFeed,
}

impl Engines for Live {
    fn serve(
        &mut self,
        e: usize,
        id: usize,
        body: &Value,
        tokens: &[u32],
        index: &Index,
        _ep: EndpointId,
    ) -> Result<u64, String> {
        let emu = &self.emulators[e];
        let http = HttpClient::new(emu.endpoint(), Duration::from_secs(10), 1 << 20);
        let mut b = body.clone();
        b["prompt"] = json!(tokens);
        let bytes = serde_json::to_vec(&b).map_err(|e| e.to_string())?;
        let r = http
            .post_json("/v1/completions", &bytes)
            .map_err(|f| format!("request {id}: {}", f.detail))?;
        if r.status != 200 {
            return Err(format!(
                "request {id}: HTTP {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        let v: Value = serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
        let cached = v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .ok_or_else(|| format!("request {id}: no cached_tokens in {v}"))?;
        // Every batch the engine published so far reaches the index before the next
        // prediction (the emulator's own count; an engine's stream would be followed
        // asynchronously). Batches of any endpoint are applied as they arrive.
        let published = http
            .get("/emulator/kv_batches")
            .ok()
            .and_then(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .and_then(|v| v["published"].as_u64())
            .ok_or_else(|| format!("request {id}: no published count"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let applied = |index: &Index| index.status().get(e).map_or(0, |s| s.batches);
        while applied(index) < published {
            let Some(d) = self.feed.recv_until(deadline) else {
                return Err(format!(
                    "request {id}: {} of {published} batches of endpoint {e} arrived",
                    applied(index)
                ));
            };
            let frames: Vec<&[u8]> = d.frames.iter().map(Vec::as_slice).collect();
            index
                .apply_frames(ep_of(index, d.source)?, 0, &frames)
                .map_err(|e| e.to_string())?;
        }
        Ok(cached)
    }
}

/// The index endpoint of source `source` (endpoints were added in source order).
fn ep_of(index: &Index, source: usize) -> Result<EndpointId, String> {
    index
        .endpoint_ids()
        .get(source)
        .copied()
        .ok_or_else(|| format!("no endpoint for source {source}"))
}

/// Runs the workload against one fleet in this process (the emulator's pools and keys).
pub fn replay_fleet(fleet: &Fleet, cfg: &MixedConfig) -> Result<FleetReport, String> {
    run_fleet(fleet, cfg, false)
}

/// Runs the workload against one fleet of emulators on loopback sockets: HTTP requests,
/// the engines' reported `cached_tokens`, their KV events over ZMQ.
pub fn replay_fleet_live(fleet: &Fleet, cfg: &MixedConfig) -> Result<FleetReport, String> {
    run_fleet(fleet, cfg, true)
}

fn run_fleet(fleet: &Fleet, cfg: &MixedConfig, live: bool) -> Result<FleetReport, String> {
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
    // The engines' side: launched with the same options.
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
    let served: Vec<(String, String)> = k
        .adapters
        .iter()
        .map(|a| (a.name.clone(), a.path.clone()))
        .collect();
    let usable = BlockPool::with_events(fleet.pool_blocks, wcfg.clone()).usable();
    let mut engines: Box<dyn Engines> = if live {
        Box::new(start_live(fleet, &deployment)?)
    } else {
        Box::new(InProcess {
            engine: fleet.engine,
            keys: EventWriter::new(wcfg.clone()).map_err(|e| err(&e))?,
            served: served.clone(),
            adapters_in_keys: k.adapters_in_keys,
            pools: (0..fleet.endpoints)
                .map(|_| BlockPool::with_events(fleet.pool_blocks, wcfg.clone()))
                .collect(),
        })
    };
    let ids: Vec<EndpointId> = (0..fleet.endpoints)
        .map(|i| {
            index.add_endpoint(EndpointConfig {
                name: format!("{}-{i}", fleet.name),
                dp_ranks: 1,
                capacity: Capacity {
                    gpu_blocks: usable as u64,
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
        let predicted = match preds[e].outcome {
            Outcome::Cached { tokens, .. } => Ok(u64::from(tokens)),
            Outcome::Unknown(r) => Err(format!("{r:?}")),
        };
        let reported = engines
            .serve(e, id, &b, &tokens, &index, ids[e])
            .map_err(|m| err(&m))?;
        match &predicted {
            Ok(p) if *p == reported => report.exact += 1,
            Ok(_) => report.wrong += 1,
            Err(_) => report.unknown += 1,
        }
        index
            .observe(ids[e], 0, &format!("req-{id}"), preds[e].outcome, reported)
            .map_err(|e| err(&e))?;
        report.cached_tokens += reported;
        report.lines.push(MixedLine {
            id,
            session,
            tenant: tenant.map(str::to_string),
            adapter: adapter.map(str::to_string),
            endpoint: e,
            prompt_tokens: tokens.len(),
            predicted,
            reported,
        });
    }
    report.evictions = index.status().iter().map(|s| s.removed).sum();
    Ok(report)
}

/// The conformance registry (the project's own, `testdata/registry`).
const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
/// Its profile serving [`BASE_MODEL`].
const PROFILE: &str = "qwen3-06b-default-v1";
/// The model revision an SGLang manifest pins.
const REVISION: &str = "c1899de289a04d12100db370d81485cdf75e47ca";

/// Starts `fleet.endpoints` emulators launched with `deployment`, each with a block pool,
/// and one feed subscribed to all of them.
fn start_live(fleet: &Fleet, deployment: &Deployment) -> Result<Live, String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", fleet.name);
    let reg = TempRegistry::copy_of(std::path::Path::new(REGISTRY)).map_err(|e| err(&e))?;
    let rev = (fleet.engine != Engine::Vllm).then_some(REVISION);
    reg.stage_manifest_version(PROFILE, fleet.engine, Some(fleet.version), rev)
        .map_err(|e| err(&e))?;
    let mut cfg =
        EmulatorConfig::from_registry_at(reg.root(), PROFILE, fleet.engine, Some(fleet.version))
            .map_err(|e| err(&e))?
            .with_deployment(deployment.clone())
            .map_err(|e| err(&e))?;
    if cfg.model != BASE_MODEL {
        return Err(err(&format!("the profile serves {}", cfg.model)));
    }
    cfg.pool_blocks = Some(fleet.pool_blocks);
    cfg.lifetime = Duration::from_secs(300);
    let emulators = (0..fleet.endpoints)
        .map(|_| Emulator::start(cfg.clone()).map_err(|e| err(&e)))
        .collect::<Result<Vec<_>, _>>()?;
    let sources = emulators
        .iter()
        .map(|e| {
            Ok(Source {
                publisher: e
                    .events_endpoint()
                    .ok_or_else(|| err(&"no event endpoint"))?
                    .to_string(),
                replay: None,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let feed = ZmqFeed::connect(sources, Duration::from_secs(5)).map_err(|e| err(&e))?;
    feed.settle(Duration::from_millis(300));
    Ok(Live { emulators, feed })
}
