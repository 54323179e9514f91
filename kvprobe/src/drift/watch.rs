//! The live watch behind `kvexact watch` (feature `live`): one endpoint's KV events consumed
//! as the gateway would — a ZMQ SUB socket on every rank's publisher (vLLM, SGLang) or the
//! destructive `POST /kv_cache_events` drain (TensorRT-LLM; there must never be two readers
//! of one drain) — and fed to a [`Verifier`], with a status callback while it runs.

use super::{Counters, DriftConfig, Verifier};
use crate::attest::{DRAIN_PATH, MAX_DRAIN_BODY};
use crate::contract::Contract;
use crate::identity;
use crate::transport::{HttpClient, ZmqSubscriber};
use crate::{Engine, Error};
use kvhash::events::{self, Limits};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where the events come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSource {
    /// ZMQ publishers `host:port` (one per DP rank), subscribed to everything.
    Zmq(Vec<String>),
    /// TensorRT-LLM's drain on the serving endpoint `host:port`. Destructive: the watch must
    /// be its only reader.
    Drain(String),
}

/// A consumer of every decoded batch besides the verifier (the prefix index behind `kvexact
/// watch`'s inventory): one decoding, one reader of a TensorRT-LLM drain.
#[derive(Clone)]
pub struct Tap(pub std::sync::Arc<dyn Fn(&events::EventBatch<'_>) + Send + Sync>);

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}

/// What to watch.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Every decoded batch is also given to this, after the verifier.
    pub tap: Option<Tap>,
    /// The endpoint's engine release.
    pub contract: Contract,
    /// The rule's settings and the verifier's bounds.
    pub drift: DriftConfig,
    /// Where the events come from.
    pub source: EventSource,
    /// Stop after this long (`None`: until the stop flag).
    pub duration: Option<Duration>,
    /// Pause between two drains (TensorRT-LLM).
    pub drain_interval: Duration,
    /// Connect / HTTP deadline.
    pub timeout: Duration,
    /// How often the status callback runs.
    pub status_interval: Duration,
}

impl WatchConfig {
    /// Defaults: no time limit, drain every 200 ms, 5 s deadlines, status every second.
    pub fn new(contract: Contract, drift: DriftConfig, source: EventSource) -> WatchConfig {
        WatchConfig {
            tap: None,
            contract,
            drift,
            source,
            duration: None,
            drain_interval: Duration::from_millis(200),
            timeout: Duration::from_secs(5),
            status_interval: Duration::from_secs(1),
        }
    }
}

/// A status snapshot while the watch runs.
#[derive(Debug, Clone, Copy)]
pub struct WatchStatus<'a> {
    /// Time since the watch started.
    pub elapsed: Duration,
    /// Events per second since the previous snapshot.
    pub events_per_s: f64,
    /// The verifier's counters.
    pub counters: &'a Counters,
    /// Whether the verdict is `drift`.
    pub drift: bool,
    /// Messages or bodies that did not decode.
    pub undecodable: u64,
}

/// The end of a watch.
#[derive(Debug)]
pub struct WatchOutcome {
    /// The verifier, with its counters and verdict.
    pub verifier: Verifier,
    /// How long it ran.
    pub elapsed: Duration,
    /// Messages or bodies that did not decode.
    pub undecodable: u64,
    /// The last decoding or transport error.
    pub last_error: Option<String>,
    /// TensorRT-LLM: jumps in `event_id` (events the engine dropped before the drain).
    pub drain_gaps: u64,
}

/// Runs the watch until `cfg.duration` passes or `stop` is set. `Err` when the source cannot
/// be reached at all (subscribe or first drain) or the verifier cannot be built.
pub fn run(
    cfg: &WatchConfig,
    stop: &AtomicBool,
    status: &mut dyn FnMut(&WatchStatus<'_>),
) -> Result<WatchOutcome, Error> {
    let mut v = Verifier::new(&cfg.contract, cfg.drift.clone())?;
    let schema = cfg
        .contract
        .events()
        .ok_or_else(|| Error::Config(format!("{} has no KV events", cfg.contract.release_id())))?
        .clone();
    let start = Instant::now();
    let end = cfg.duration.map(|d| start + d);
    let mut undecodable = 0u64;
    let mut last_error = None;
    let mut drain_gaps = 0u64;
    let mut last_id: Option<u64> = None;
    let mut tick = start + cfg.status_interval;
    let mut last_events = 0u64;
    let mut last_tick = start;
    let mut report = |v: &Verifier, undecodable: u64, now: Instant| {
        let events = v.counters().events;
        let dt = now.duration_since(last_tick).as_secs_f64().max(1e-6);
        status(&WatchStatus {
            elapsed: now.duration_since(start),
            events_per_s: (events - last_events) as f64 / dt,
            counters: v.counters(),
            drift: v.verdict().is_some(),
            undecodable,
        });
        last_events = events;
        last_tick = now;
    };
    let done = |now: Instant| stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e);
    match &cfg.source {
        EventSource::Zmq(eps) => {
            let mut sub = ZmqSubscriber::connect(eps, cfg.timeout).map_err(|e| {
                Error::Config(format!("cannot subscribe to {}: {e}", eps.join(", ")))
            })?;
            loop {
                let now = Instant::now();
                if done(now) {
                    break;
                }
                if now >= tick {
                    report(&v, undecodable, now);
                    tick = now + cfg.status_interval;
                }
                // Wake at least every 100 ms to look at the stop flag.
                let until = [Some(tick), end, Some(now + Duration::from_millis(100))]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(tick);
                match sub.recv_until(until) {
                    None => {}
                    Some(Err(e)) => {
                        last_error = Some(e);
                        break;
                    }
                    Some(Ok(frames)) => {
                        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                        match events::decode_frames_schema(&schema, &refs, &Limits::default()) {
                            Ok(batch) => {
                                v.feed_payload(&batch, refs.get(2).copied().unwrap_or(&[]));
                                if let Some(t) = &cfg.tap {
                                    (t.0)(&batch);
                                }
                            }
                            Err(e) => {
                                undecodable += 1;
                                last_error = Some(e.to_string());
                            }
                        }
                    }
                }
            }
        }
        EventSource::Drain(ep) => {
            let http = HttpClient::new(ep, cfg.timeout, MAX_DRAIN_BODY);
            let mut first = true;
            loop {
                let now = Instant::now();
                if done(now) {
                    break;
                }
                if now >= tick {
                    report(&v, undecodable, now);
                    tick = now + cfg.status_interval;
                }
                match http.post_json(DRAIN_PATH, b"") {
                    Ok(r) if r.status == 200 => {
                        match events::decode_json(schema.format(), &r.body) {
                            Ok(batch) => {
                                for e in &batch.events {
                                    if let Some(env) = &e.envelope {
                                        if last_id
                                            .is_some_and(|l| env.event_id != l.wrapping_add(1))
                                        {
                                            drain_gaps += 1;
                                        }
                                        last_id = Some(env.event_id);
                                    }
                                }
                                v.feed(&batch);
                                if let Some(t) = &cfg.tap {
                                    (t.0)(&batch);
                                }
                            }
                            Err(e) => {
                                undecodable += 1;
                                last_error = Some(e.to_string());
                            }
                        }
                    }
                    Ok(r) => {
                        let msg = format!("{DRAIN_PATH}: HTTP {}", r.status);
                        if first {
                            return Err(Error::Config(msg));
                        }
                        last_error = Some(msg);
                    }
                    Err(f) => {
                        if first {
                            return Err(Error::Config(f.detail));
                        }
                        last_error = Some(f.detail);
                    }
                }
                first = false;
                let pause = cfg.drain_interval.min(end.map_or(cfg.drain_interval, |e| {
                    e.saturating_duration_since(Instant::now())
                }));
                std::thread::sleep(pause);
            }
        }
    }
    let now = Instant::now();
    report(&v, undecodable, now);
    Ok(WatchOutcome {
        verifier: v,
        elapsed: now.duration_since(start),
        undecodable,
        last_error,
        drain_gaps,
    })
}

/// The version the engine at `endpoint` reports: vLLM `GET /version`, SGLang
/// `GET /get_server_info`, TensorRT-LLM `GET /version`.
pub fn engine_version(engine: Engine, endpoint: &str, timeout: Duration) -> Result<String, String> {
    let http = HttpClient::new(endpoint, timeout, identity::MAX_PROBE_BODY);
    let path = match engine {
        Engine::Trtllm => "/version",
        e => identity::identity_path(e),
    };
    let r = http
        .get(path)
        .map_err(|f| format!("{endpoint}{path}: {}", f.detail))?;
    if r.status != 200 {
        return Err(format!("{endpoint}{path}: HTTP {}", r.status));
    }
    let reported = match engine {
        Engine::Trtllm => serde_json::from_slice::<Value>(&r.body)
            .ok()
            .and_then(|v| v.get("version")?.as_str().map(str::to_string)),
        e => identity::reported_version(e, &r.body),
    };
    reported.ok_or_else(|| format!("{endpoint}{path}: no version in the answer"))
}

/// vLLM: the LoRA adapters `/v1/models` lists (`id` → `root`, the path a tagged release
/// hashes). Cards without a `parent` (the base model) are left out.
pub fn lora_paths(endpoint: &str, timeout: Duration) -> Result<BTreeMap<String, String>, String> {
    let http = HttpClient::new(endpoint, timeout, identity::MAX_PROBE_BODY);
    let r = http
        .get("/v1/models")
        .map_err(|f| format!("{endpoint}/v1/models: {}", f.detail))?;
    if r.status != 200 {
        return Err(format!("{endpoint}/v1/models: HTTP {}", r.status));
    }
    let v: Value =
        serde_json::from_slice(&r.body).map_err(|e| format!("{endpoint}/v1/models: {e}"))?;
    let mut out = BTreeMap::new();
    for card in v
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let parent = card.get("parent").is_some_and(|p| !p.is_null());
        if let (true, Some(id), Some(root)) = (
            parent,
            card.get("id").and_then(Value::as_str),
            card.get("root").and_then(Value::as_str),
        ) {
            out.insert(id.to_string(), root.to_string());
        }
    }
    Ok(out)
}
