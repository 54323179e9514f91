//! The live driver: runs the whole ladder against one running engine as the gateway would —
//! real HTTP for identity, probes and the challenge completion, a ZMQ SUB socket on the
//! engine's event port (vLLM, SGLang) or the destructive `POST /kv_cache_events` drain
//! (TensorRT-LLM) — and evaluates the evidence with [`crate::ladder::evaluate`].

use crate::bridge;
use crate::challenge::{self, observe_event, Challenge, ChallengeSpec, RankCoverage};
use crate::chat_route;
use crate::contract::Contract;
use crate::deployment::{DeploymentKeys, RequestKeys};
use crate::deployment_check::{self, Mismatch};
use crate::fixtures::{self, ApiMode};
use crate::identity::{self, Geometry, MAX_PROBE_BODY};
use crate::ladder::{self, EndpointEvidence, Evidence, ManifestEvidence, Observation, Verdict};
use crate::transport::{HttpClient, ZmqSubscriber};
use crate::{Engine, Error, Finding, Reason};
use kvhash::events::{self, EventFormat, EventSchema};
use kvhash::trtllm::TrtllmHasher;
use kvhash::BlockHasher;
use kvprofile_core::{LoadOptions, LoadedProfile, Registry, StructuralValidator, TrustPolicy};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The TRT drain path.
pub const DRAIN_PATH: &str = "/kv_cache_events";
/// Cap on a drained body (events can be many).
pub const MAX_DRAIN_BODY: usize = 16 << 20;
/// Cap on vLLM's `/metrics` text read for a declared deployment's cache configuration.
pub const MAX_METRICS_BODY: usize = 4 << 20;

/// What `kvexact attest` is asked to do.
#[derive(Debug, Clone)]
pub struct AttestConfig {
    /// Registry root.
    pub registry: PathBuf,
    /// Profile id.
    pub profile_id: String,
    /// Engine family.
    pub engine: Engine,
    /// HTTP endpoint `host:port`.
    pub endpoint: String,
    /// KV-event endpoint `host:port` (ZMQ; vLLM/SGLang). Default: the HTTP host, port 5557.
    pub events: Option<String>,
    /// `kvBlockSize` (default: the release's `hash.defaultBlockSize`, e.g. vLLM 0.34: 64).
    pub block_size: Option<u32>,
    /// vLLM none-hash seed (`PYTHONHASHSEED` pair), default `"0"`.
    pub hash_seed: Option<String>,
    /// Declared DP ranks (SGLang), default 1.
    pub dp_ranks: u16,
    /// Surfaces the rule serves (default: the profile's).
    pub api_mode: Option<ApiMode>,
    /// Challenge timeout (default 15 s).
    pub challenge_timeout: Duration,
    /// Per-call HTTP deadline (default 5 s).
    pub probe_timeout: Duration,
    /// The functional-only opt-in (no manifest → `READY_FUNCTIONAL_ONLY`).
    pub functional_only: bool,
    /// A fixed nonce (tests); `None` = from the OS.
    pub nonce: Option<[u8; 16]>,
    /// Trust policy for the registry (default: root and the current user).
    pub trust: TrustPolicy,
    /// Pause after subscribing before the challenge is sent (default 300 ms).
    pub settle: Duration,
    /// vLLM: run the hash challenge on this LoRA adapter (the request's `model`; its path is
    /// read from `/v1/models` `root`), so that the release's LoRA key is proven too.
    pub lora: Option<String>,
}

impl AttestConfig {
    /// Defaults for everything but the required fields.
    pub fn new(
        registry: PathBuf,
        profile_id: &str,
        engine: Engine,
        endpoint: &str,
    ) -> AttestConfig {
        AttestConfig {
            registry,
            profile_id: profile_id.to_string(),
            engine,
            endpoint: endpoint.to_string(),
            events: None,
            block_size: None,
            hash_seed: None,
            dp_ranks: 1,
            api_mode: None,
            challenge_timeout: Duration::from_secs(15),
            probe_timeout: Duration::from_secs(5),
            functional_only: false,
            nonce: None,
            trust: TrustPolicy::for_current_user(),
            settle: Duration::from_millis(300),
            lora: None,
        }
    }

    /// The configured block size, else the release's default (catalog
    /// `hash.defaultBlockSize`: vLLM 16 up to 0.33, 64 from 0.34; TensorRT-LLM 32).
    fn block_size(&self, contract: &Contract) -> u32 {
        self.block_size.or(contract.default_block_size()).unwrap_or(
            if self.engine == Engine::Trtllm {
                32
            } else {
                16
            },
        )
    }

    fn events_endpoint(&self) -> String {
        self.events.clone().unwrap_or_else(|| {
            let host = self
                .endpoint
                .rsplit_once(':')
                .map_or(self.endpoint.as_str(), |(h, _)| h);
            format!("{host}:5557")
        })
    }
}

/// The outcome of `kvexact attest`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttestReport {
    /// Profile id.
    pub profile_id: String,
    /// Engine family.
    pub engine: Engine,
    /// HTTP endpoint.
    pub endpoint: String,
    /// The engine version the contract was resolved from (the version the engine reports;
    /// TensorRT-LLM, which reports none in its identity probe: the manifest's).
    pub engine_version: Option<String>,
    /// The engine release used (`vllm-kv-map-v2-r0.24`); `None` when no version resolved.
    pub release_id: Option<String>,
    /// The contract (gateway id) it refines (`vllm-kv-map-v2`).
    pub contract_id: Option<String>,
    /// The release's rules as `kvexact contracts --json` prints them.
    pub contract: Option<serde_json::Value>,
    /// Manifest digest, when one was in force.
    pub manifest_digest: Option<String>,
    /// The ladder's verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn obs(f: Finding) -> Option<Observation> {
    Some(Observation::at(f, now_ms()))
}

/// Runs the ladder once. `Err` only for what stops an operator before any engine is asked:
/// the registry does not load or lacks the profile.
pub fn attest(cfg: &AttestConfig) -> Result<AttestReport, Error> {
    if cfg.engine == Engine::Llamacpp {
        return Err(Error::Config("llama.cpp has no KV plane to attest".into()));
    }
    let generation = Registry::new().publish(
        &cfg.registry,
        &LoadOptions {
            policy: cfg.trust,
            ..LoadOptions::default()
        },
        &StructuralValidator,
    )?;
    let loaded = generation
        .profile(&cfg.profile_id)
        .ok_or_else(|| {
            Error::Config(format!(
                "profile {:?} is not in the registry",
                cfg.profile_id
            ))
        })?
        .clone();
    let mut ev = Evidence {
        endpoints: vec![EndpointEvidence {
            endpoint: cfg.endpoint.clone(),
            ..EndpointEvidence::default()
        }],
        functional_only_optin: cfg.functional_only,
        ..Evidence::default()
    };
    // Rung 1: drift.
    if let Err(e) = generation.verify_disk(&cfg.profile_id) {
        ev.profile_drift = Some(e.to_string());
    }
    // The manifest (trust root).
    let manifest = match generation.load_manifest(&cfg.profile_id) {
        Ok(Some(m)) => Some(m),
        Ok(None) => {
            ev.manifest = ManifestEvidence::Missing {
                detail: format!("manifests/{}.yaml is absent", cfg.profile_id),
            };
            None
        }
        Err(e) => {
            ev.manifest = ManifestEvidence::Missing {
                detail: e.to_string(),
            };
            None
        }
    };
    if let Some(m) = &manifest {
        ev.manifest = ManifestEvidence::Present {
            digest: m.digest.clone(),
        };
    }
    let mode = cfg
        .api_mode
        .unwrap_or_else(|| ApiMode::of_profile(&loaded.profile));
    let mut report = AttestReport {
        profile_id: cfg.profile_id.clone(),
        engine: cfg.engine,
        endpoint: cfg.endpoint.clone(),
        engine_version: None,
        release_id: None,
        contract_id: None,
        contract: None,
        manifest_digest: manifest.as_ref().map(|m| m.digest.clone()),
        verdict: ladder::evaluate(&ev),
    };
    let http = HttpClient::new(&cfg.endpoint, cfg.probe_timeout, MAX_PROBE_BODY);
    // Rung 2: fixtures, identity, token parity.
    let set = match generation.load_fixtures(&cfg.profile_id, cfg.engine) {
        Ok(set) => {
            ev.fixtures = Some(fixtures::check_fixtures(&set, &loaded.profile, mode));
            Some(set)
        }
        Err(e) => {
            ev.fixtures = Some(fixtures::fixtures_load_failure(&e));
            None
        }
    };
    let rung1_ok = ev.profile_drift.is_none() && ev.fixtures.as_ref().is_some_and(|f| f.ok);
    let done = |ev: &Evidence, report: &mut AttestReport| {
        report.verdict = ladder::evaluate(ev);
    };
    let (Some(set), true) = (set, rung1_ok) else {
        done(&ev, &mut report);
        return Ok(report);
    };
    // Identity: the engine's own version, judged against the manifest; then the contract of
    // exactly that release (an unknown release is an identity mismatch, never READY).
    let ep = &mut ev.endpoints[0];
    let identity = http.get(identity::identity_path(cfg.engine));
    let mut reported = match &identity {
        Ok(r) if r.status == 200 => identity::reported_version(cfg.engine, &r.body),
        _ => None,
    };
    if let Some(m) = &manifest {
        let f = match &identity {
            Ok(r) => identity::judge_identity(cfg.engine, &m.manifest, r.status, &r.body),
            Err(f) => f.clone(),
        };
        let ok = f.ok;
        ep.identity = obs(f);
        if !ok {
            done(&ev, &mut report);
            return Ok(report);
        }
        if reported.is_none() {
            // TensorRT-LLM's identity probe has no version: the manifest pins it.
            reported = Some(m.manifest.engine_version.clone());
        }
    }
    let Some(version) = reported else {
        ep.identity = obs(Finding::fail(
            Reason::ProbeSchemaMismatch,
            format!(
                "{}: no engine version to resolve the contract from",
                identity::identity_path(cfg.engine)
            ),
        ));
        done(&ev, &mut report);
        return Ok(report);
    };
    report.engine_version = Some(version.clone());
    let contract = match crate::contract::resolve(cfg.engine, &version) {
        Ok(c) => c,
        Err(e) => {
            ep.identity = obs(Finding::fail(
                Reason::IdentityMismatch,
                format!("engine version {version:?}: {}: {e}", e.code()),
            ));
            done(&ev, &mut report);
            return Ok(report);
        }
    };
    report.release_id = Some(contract.release_id().to_string());
    report.contract_id = Some(contract.contract_id().to_string());
    report.contract = Some(contract.to_json());
    let quirks = loaded.profile.quirks_for_release(contract.release());
    let encoder = match bridge::encoder(&loaded, &contract) {
        Ok(e) => e,
        Err(e) => {
            ev.profile_drift
                .get_or_insert(format!("no validated encoder: {e}"));
            report.verdict = ladder::evaluate(&ev);
            return Ok(report);
        }
    };
    let parity = match fixtures::tokenize_path(cfg.engine) {
        Some(_) => {
            let mut result = None;
            let probed = fixtures::probed(&set, mode);
            // Each fixture on the route whose ids its requests get (catalog chat.probeRoutes).
            let chat_route = contract.probe_route(&encoder.renderer());
            for fx in &probed {
                let f = match chat_route::probe_for(cfg.engine, chat_route, fx) {
                    Err(f) => f,
                    Ok(p) => match http.post_json(p.path, &p.body) {
                        Ok(r) => chat_route::judge_probe(
                            &encoder,
                            fx,
                            p.route,
                            r.status,
                            &r.body,
                            now_ms(),
                        ),
                        Err(f) => f,
                    },
                };
                if !f.ok {
                    result = Some(f);
                    break;
                }
            }
            result.unwrap_or_else(|| {
                Finding::pass(format!("{} fixture(s) answered exactly", probed.len()))
            })
        }
        None => fixtures::judge_oracle(&encoder, &set, mode, &loaded.profile.base_model, now_ms()),
    };
    let ok = parity.ok;
    ev.endpoints[0].token_parity = obs(parity);
    if !ok {
        done(&ev, &mut report);
        return Ok(report);
    }
    // The declared deployment (the manifest's `deployment:`), keyed on this release: an
    // option the release cannot honour is a deployment mismatch, never READY.
    let keys = match manifest
        .as_ref()
        .and_then(|m| m.manifest.deployment.as_ref())
    {
        None => None,
        Some(d) => match DeploymentKeys::new(contract.clone(), d, "manifest deployment") {
            Ok(k) => Some(k),
            Err(e) => {
                ev.endpoints[0].challenge = obs(Finding::fail(
                    Reason::DeploymentMismatch,
                    format!("the declared deployment cannot be keyed: {e}"),
                ));
                done(&ev, &mut report);
                return Ok(report);
            }
        },
    };
    // Rung 4: the hash challenge.
    let f = run_challenge(
        cfg,
        &loaded,
        &encoder,
        &http,
        &contract,
        &quirks,
        keys.as_ref(),
        &mut ev.drain_fault,
    );
    ev.endpoints[0].challenge = obs(f);
    done(&ev, &mut report);
    Ok(report)
}

/// The finding of the options the engine shows otherwise than declared.
fn mismatch(found: &[Mismatch]) -> Option<Finding> {
    (!found.is_empty()).then(|| {
        let all: Vec<String> = found.iter().map(Mismatch::to_string).collect();
        Finding::fail(
            Reason::DeploymentMismatch,
            format!(
                "the engine runs another deployment than declared: {}",
                all.join("; ")
            ),
        )
    })
}

/// The JSON body of a 200 answer, if any.
fn json_of(r: &Result<crate::transport::HttpReply, Finding>) -> Option<serde_json::Value> {
    match r {
        Ok(r) if r.status == 200 => serde_json::from_slice(&r.body).ok(),
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn run_challenge(
    cfg: &AttestConfig,
    loaded: &LoadedProfile,
    encoder: &kvtemplate::Encoder,
    http: &HttpClient,
    contract: &Contract,
    quirks: &kvprofile_core::EngineQuirks,
    keys: Option<&DeploymentKeys>,
    drain_fault: &mut Option<(Reason, String)>,
) -> Finding {
    let model = loaded.profile.base_model.as_str();
    let bs = match keys {
        None => cfg.block_size(contract),
        Some(k) => {
            let declared = k.keying().block_size;
            if let Some(b) = cfg.block_size.filter(|&b| b != declared) {
                return Finding::fail(
                    Reason::DeploymentMismatch,
                    format!("blockSize: the manifest's deployment declares {declared}, the attestation was given {b}"),
                );
            }
            declared
        }
    };
    // Preflight: served model, the declared deployment where the engine shows it, geometry.
    let served_resp = http.get(identity::served_model_path(cfg.engine));
    let served = match &served_resp {
        Ok(r) => identity::judge_served_model(cfg.engine, r.status, &r.body, model),
        Err(f) => f.clone(),
    };
    if !served.ok {
        return served;
    }
    if let Some(k) = keys {
        let shown = match cfg.engine {
            Engine::Vllm => {
                let mut m = json_of(&served_resp)
                    .map(|v| deployment_check::check_vllm_models(k, &v))
                    .unwrap_or_default();
                let metrics = HttpClient::new(&cfg.endpoint, cfg.probe_timeout, MAX_METRICS_BODY);
                if let Ok(r) = metrics.get("/metrics") {
                    if r.status == 200 {
                        m.extend(deployment_check::check_vllm_metrics(
                            k,
                            &String::from_utf8_lossy(&r.body),
                        ));
                    }
                }
                m
            }
            Engine::Sglang => json_of(&http.get(identity::identity_path(cfg.engine)))
                .map(|v| deployment_check::check_sglang_server_info(k, &v))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if let Some(f) = mismatch(&shown) {
            return f;
        }
    }
    let events_ep = cfg.events_endpoint();
    let zmq_port = events_ep
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .unwrap_or(5557);
    let geometry = Geometry {
        block_size: bs,
        zmq_port,
        dp_ranks: cfg.dp_ranks.max(1),
    };
    if cfg.engine != Engine::Vllm {
        let path = identity::identity_path(cfg.engine);
        let g = match http.get(path) {
            Ok(r) => identity::judge_geometry(cfg.engine, r.status, &r.body, &geometry),
            Err(f) => f,
        };
        if !g.ok {
            return g;
        }
    }
    let Some(schema) = contract.events().cloned() else {
        return Finding::fail(
            Reason::ChallengeFailed,
            format!("{} has no KV events", contract.release_id()),
        );
    };
    let plain = match keys {
        // The declared deployment's keys (block size, algorithm, seed, look-ahead or bigram).
        Some(k) => Ok(k.hasher().clone()),
        None => bridge::hasher(
            contract,
            None,
            bs as usize,
            Some(cfg.hash_seed.as_deref().unwrap_or("0")),
        ),
    };
    let mut hasher = match plain {
        Ok(h) => h,
        Err(e) => return Finding::fail(Reason::ChallengeFailed, format!("no hasher: {e}")),
    };
    let mut challenge_model = model.to_string();
    if let Some(name) = &cfg.lora {
        let BlockHasher::Vllm(h) = hasher else {
            return Finding::fail(
                Reason::ChallengeFailed,
                "a LoRA challenge needs a vLLM engine",
            );
        };
        let path = match http.get(identity::served_model_path(cfg.engine)) {
            Ok(r) => match identity::lora_path(r.status, &r.body, name) {
                Ok(p) => p,
                Err(f) => return f,
            },
            Err(f) => return f,
        };
        let extras = kvhash::vllm::VllmExtras {
            lora: Some(kvhash::vllm::LoraKey {
                name: name.clone(),
                path,
            }),
            ..Default::default()
        };
        hasher = match h.with_extras(extras) {
            Ok(h) => h.into(),
            Err(e) => return Finding::fail(Reason::ChallengeFailed, format!("no hasher: {e}")),
        };
        challenge_model = name.clone();
    }
    let spec = ChallengeSpec {
        model: challenge_model,
        cache_chunk: quirks.cache_chunk,
        last_block_only: quirks.challenge_last_block,
        dp_ranks: u32::from(geometry.dp_ranks),
        lora: cfg.lora.clone(),
        cache_salt: None,
    };
    let mut source = match cfg.engine {
        Engine::Trtllm => {
            let drain = HttpClient::new(&cfg.endpoint, cfg.probe_timeout, MAX_DRAIN_BODY);
            let mut d = Drain {
                http: drain,
                timeout: cfg.probe_timeout,
                last_id: None,
                format: schema.format(),
            };
            // Take ownership: empty the buffer of events older than the challenge.
            if let Err(f) = d.poll(cfg.probe_timeout, &mut |_| {}) {
                return f;
            }
            Source::Trt(d)
        }
        _ => {
            let host = events_ep
                .rsplit_once(':')
                .map_or(events_ep.as_str(), |(h, _)| h);
            let eps: Vec<String> = (0..geometry.dp_ranks)
                .map(|r| format!("{host}:{}", zmq_port.saturating_add(r)))
                .collect();
            match ZmqSubscriber::connect(&eps, cfg.probe_timeout) {
                Ok(s) => {
                    s.settle(cfg.settle);
                    Source::Zmq(s, schema)
                }
                Err(e) => {
                    return Finding::fail(
                        Reason::ChallengeTimeout,
                        format!("no KV events: cannot subscribe to {events_ep}: {e}"),
                    )
                }
            }
        }
    };
    let trt = TrtllmHasher::new(bs as usize).ok();
    let mut coverage = RankCoverage::new(u32::from(geometry.dp_ranks));
    loop {
        let nonce = match cfg.nonce {
            Some(n) if coverage == RankCoverage::new(u32::from(geometry.dp_ranks)) => n,
            _ => match challenge::os_nonce() {
                Ok(n) => n,
                Err(f) => return f,
            },
        };
        let mut ch = match Challenge::new(encoder, &hasher, &spec, nonce) {
            Ok(c) => c,
            Err(f) => return f,
        };
        let f = one_challenge(cfg, &mut source, &mut ch, trt.as_ref(), keys, drain_fault);
        if !f.ok {
            return f;
        }
        if cfg.engine == Engine::Sglang {
            coverage.record_challenge(&ch);
            if !coverage.complete() {
                if !coverage.may_retry() {
                    return coverage.result();
                }
                continue;
            }
        }
        let Some(k) = keys else {
            return f;
        };
        return keyed_challenges(
            cfg,
            encoder,
            &mut source,
            &spec,
            k,
            trt.as_ref(),
            drain_fault,
            f,
        );
    }
}

/// After the plain challenge passed under a declared deployment: one challenge with a
/// tenant's `cache_salt` where the release keys salts, and one on the first declared adapter
/// where the release keys adapters (unless the operator chose the adapter), each judged
/// under the keys the deployment gives that request.
#[allow(clippy::too_many_arguments)]
fn keyed_challenges(
    cfg: &AttestConfig,
    encoder: &kvtemplate::Encoder,
    source: &mut Source,
    spec: &ChallengeSpec,
    keys: &DeploymentKeys,
    trt: Option<&TrtllmHasher>,
    drain_fault: &mut Option<(Reason, String)>,
    plain: Finding,
) -> Finding {
    let mut detail = plain.detail.clone();
    let nonce = |i: u8| -> Result<[u8; 16], Finding> {
        match cfg.nonce {
            Some(mut n) => {
                n[0] ^= i;
                Ok(n)
            }
            None => challenge::os_nonce(),
        }
    };
    let mut runs: Vec<(&str, ChallengeSpec, RequestKeys<'_>)> = Vec::new();
    let salt;
    // TensorRT-LLM's drain is judged by re-deriving each block from its tokens with the
    // plain hasher, so a salted challenge cannot be judged there: not run.
    if keys.keying().cache_salt.is_some() && cfg.engine != Engine::Trtllm {
        let n = match nonce(0x5a) {
            Ok(n) => n,
            Err(f) => return f,
        };
        salt = format!(
            "kvexact-attest-{}",
            n.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        runs.push((
            "salted",
            ChallengeSpec {
                cache_salt: Some(salt.clone()),
                ..spec.clone()
            },
            RequestKeys {
                cache_salt: Some(&salt),
                adapter: None,
            },
        ));
    }
    if cfg.lora.is_none() && keys.adapters_in_keys() && cfg.engine == Engine::Vllm {
        if let Some(a) = keys.keying().adapters.first() {
            runs.push((
                "adapter",
                ChallengeSpec {
                    model: a.name.clone(),
                    lora: Some(a.name.clone()),
                    ..spec.clone()
                },
                RequestKeys {
                    cache_salt: None,
                    adapter: Some(&a.name),
                },
            ));
        }
    }
    for (i, (what, spec, req)) in runs.iter().enumerate() {
        let hasher = match keys.request_hasher(*req) {
            Ok(h) => h,
            Err(e) => {
                return Finding::fail(
                    Reason::DeploymentMismatch,
                    format!("the {what} challenge cannot be keyed: {e}"),
                )
            }
        };
        let n = match nonce(0xa0 + i as u8) {
            Ok(n) => n,
            Err(f) => return f,
        };
        let mut ch = match Challenge::new(encoder, &hasher, spec, n) {
            Ok(c) => c,
            Err(f) => return f,
        };
        let f = one_challenge(cfg, source, &mut ch, trt, Some(keys), drain_fault);
        if !f.ok {
            return Finding {
                detail: format!("{what} challenge: {}", f.detail),
                ..f
            };
        }
        detail = format!("{detail}; {what} challenge: {}", f.detail);
    }
    Finding { detail, ..plain }
}

/// The DP rank a challenge judges: SGLang's `attn_dp_rank`; other engines' ranks are not
/// declared per rule.
fn rank_of(engine: Engine, rank: Option<u32>) -> Option<u32> {
    (engine == Engine::Sglang).then_some(rank).flatten()
}

enum Source {
    Zmq(ZmqSubscriber, EventSchema),
    Trt(Drain),
}

struct Drain {
    http: HttpClient,
    timeout: Duration,
    last_id: Option<u64>,
    format: EventFormat,
}

impl Drain {
    /// One drain; calls `sink` for each decoded event. A gap in `event_id` is recorded by the
    /// caller through the returned flag.
    fn poll(
        &mut self,
        timeout: Duration,
        sink: &mut dyn FnMut(&events::Event<'_>),
    ) -> Result<Option<String>, Finding> {
        // Never wait past the caller's deadline (nor less than 100 ms, nor more than a probe).
        let limit = timeout.clamp(
            Duration::from_millis(100),
            self.timeout.max(Duration::from_millis(100)),
        );
        let http = HttpClient::new(self.http.endpoint(), limit, MAX_DRAIN_BODY);
        let r = http.post_json(DRAIN_PATH, b"")?;
        if r.status != 200 {
            return Err(Finding::fail(
                Reason::ChallengeFailed,
                format!("{DRAIN_PATH}: HTTP {}", r.status),
            ));
        }
        let batch = match events::decode_json(self.format, &r.body) {
            Ok(b) => b,
            Err(e) => return Ok(Some(format!("undecodable drain body: {e}"))),
        };
        let mut gap = None;
        for e in &batch.events {
            if let Some(env) = &e.envelope {
                if let Some(last) = self.last_id {
                    if env.event_id != last.wrapping_add(1) && gap.is_none() {
                        gap = Some(format!("event_id jumped from {last} to {}", env.event_id));
                    }
                }
                self.last_id = Some(env.event_id);
            }
            sink(e);
        }
        Ok(gap.map(|g| format!("gap: {g}")))
    }
}

fn one_challenge(
    cfg: &AttestConfig,
    source: &mut Source,
    ch: &mut Challenge,
    trt: Option<&TrtllmHasher>,
    keys: Option<&DeploymentKeys>,
    drain_fault: &mut Option<(Reason, String)>,
) -> Finding {
    // The watch is armed (subscribed / drained) before sending; one deadline covers the
    // inference and the wait for its events.
    let deadline = Instant::now() + cfg.challenge_timeout;
    let infer = HttpClient::new(&cfg.endpoint, cfg.challenge_timeout, MAX_PROBE_BODY);
    match infer.post_json("/v1/completions", &ch.request_body()) {
        Ok(r) if r.status == 200 => {}
        Ok(r) => {
            return Finding::fail(
                Reason::ChallengeFailed,
                format!("challenge inference: HTTP {}", r.status),
            )
        }
        Err(f) => return f,
    }
    let mut undecodable = 0usize;
    let mut last_error = String::new();
    while !ch.finished() && Instant::now() < deadline {
        match source {
            Source::Zmq(sub, schema) => match sub.recv_until(deadline) {
                None => break,
                Some(Err(e)) => {
                    last_error = e;
                    break;
                }
                Some(Ok(frames)) => {
                    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                    match events::decode_frames_schema(schema, &refs, &events::Limits::default()) {
                        Ok(batch) => {
                            // Every batch shows the deployment's block size and key form.
                            if let Some(f) = keys
                                .and_then(|k| mismatch(&deployment_check::check_events(k, &batch)))
                            {
                                return f;
                            }
                            for e in &batch.events {
                                for o in observe_event(e, None) {
                                    ch.observe(rank_of(cfg.engine, batch.rank), &o);
                                }
                            }
                        }
                        Err(e) => {
                            undecodable += 1;
                            last_error = e.to_string();
                        }
                    }
                }
            },
            Source::Trt(d) => {
                let left = deadline.saturating_duration_since(Instant::now());
                let r = d.poll(left, &mut |e| {
                    for o in observe_event(e, trt) {
                        ch.observe(None, &o);
                    }
                });
                match r {
                    Err(f) => return f,
                    Ok(Some(msg)) if msg.starts_with("gap: ") => {
                        drain_fault.get_or_insert((Reason::DrainSequenceGap, msg));
                    }
                    Ok(Some(msg)) => {
                        undecodable += 1;
                        last_error = msg;
                    }
                    Ok(None) => {}
                }
                if !ch.finished() {
                    std::thread::sleep(
                        Duration::from_millis(50)
                            .min(deadline.saturating_duration_since(Instant::now())),
                    );
                }
            }
        }
    }
    let mut f = ch.result(true);
    if !f.ok && undecodable > 0 {
        f.detail = format!(
            "{}; {undecodable} undecodable message(s), last: {last_error}",
            f.detail
        );
        f = Finding::fail(f.reason.unwrap_or(Reason::ChallengeTimeout), f.detail);
    }
    f
}
