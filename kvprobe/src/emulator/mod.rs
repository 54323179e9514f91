//! A loopback engine emulator for tests and the `emulator` example (feature `emulator`).
//!
//! It serves what the readiness ladder asks of vLLM, SGLang and TensorRT-LLM on 127.0.0.1:
//! the identity endpoint, the served-model endpoint, the tokenize route (answers computed with
//! kvtemplate's engine encoders), `/v1/completions` — which computes the prompt's completions
//! encoding, its block hashes with kvhash and publishes the `BlockStored` events on a real ZMQ
//! PUB socket in the engine's msgpack wire format (vLLM, SGLang), or queues them as JSON for
//! TensorRT-LLM's `POST /kv_cache_events` drain. [`Faults`] make it answer wrongly on purpose.
//!
//! Every thread stops by itself when [`EmulatorConfig::lifetime`] (default 30 s) is over, and
//! when the [`Emulator`] is dropped.

pub mod http;
pub mod msgpack;
pub mod registry;

pub use registry::TempRegistry;

use crate::bridge;
use crate::Engine;
use http::{Request, Response};
use kvhash::events::EventFormat;
use kvhash::BlockHasher;
use kvprofile_core::{LoadOptions, Registry, StructuralValidator, TrustPolicy};
use kvtemplate::Encoder;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Deliberate misbehaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// The tokenize response lacks `count`.
    pub broken_tokenize_schema: bool,
    /// `/v1/completions` publishes nothing.
    pub no_events: bool,
    /// Published events carry extra keys (vLLM `extra_keys`, SGLang/TRT `cache_salt`).
    pub extra_keys: bool,
    /// Published events are undecodable bytes.
    pub garbage_events: bool,
    /// The identity endpoint answers this much later.
    pub slow_identity: Option<Duration>,
    /// The identity endpoint answers with a body over the probe cap.
    pub oversized_identity: bool,
    /// TensorRT-LLM `/server_info` reports this `kv_cache_hash_algo` (`None` = correct).
    pub trt_hash_algo: Option<String>,
}

/// How to emulate.
#[derive(Clone)]
pub struct EmulatorConfig {
    /// Engine family.
    pub engine: Engine,
    /// Served model name.
    pub model: String,
    /// Reported version (vLLM `/version`, SGLang `/get_server_info`).
    pub version: String,
    /// SGLang `revision`.
    pub revision: Option<String>,
    /// The engine's tokenization (completions and chat).
    pub encoder: Arc<Encoder>,
    /// Tokens per KV block.
    pub block_size: usize,
    /// vLLM `PYTHONHASHSEED`.
    pub hash_seed: Option<String>,
    /// Event wire format.
    pub event_format: EventFormat,
    /// Faults.
    pub faults: Faults,
    /// After this long every thread stops.
    pub lifetime: Duration,
    /// HTTP port (0 = ephemeral).
    pub http_port: u16,
    /// ZMQ port (0 = ephemeral).
    pub zmq_port: u16,
}

impl std::fmt::Debug for EmulatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorConfig")
            .field("engine", &self.engine)
            .field("model", &self.model)
            .field("version", &self.version)
            .field("block_size", &self.block_size)
            .field("faults", &self.faults)
            .finish()
    }
}

impl EmulatorConfig {
    /// A correct engine for a registry profile: the profile's tokenizer and template through the
    /// engine's encoder, the manifest's version and revision (or the contract's default
    /// version), block size 16 (TensorRT-LLM 32), vLLM seed `"0"`.
    pub fn from_registry(
        root: &Path,
        profile_id: &str,
        engine: Engine,
    ) -> Result<EmulatorConfig, crate::Error> {
        let generation = Registry::new().publish(
            root,
            &LoadOptions {
                policy: TrustPolicy::for_current_user(),
                ..LoadOptions::default()
            },
            &StructuralValidator,
        )?;
        let loaded = generation
            .profile(profile_id)
            .ok_or_else(|| crate::Error::Config(format!("no profile {profile_id}")))?;
        let manifest = generation.load_manifest(profile_id).ok().flatten();
        let version = manifest
            .as_ref()
            .map(|m| m.manifest.engine_version.clone())
            .unwrap_or_else(|| {
                match engine {
                    Engine::Vllm => "0.28.0",
                    Engine::Sglang => "0.5.18",
                    _ => "1.3.0rc24",
                }
                .to_string()
            });
        let contract = bridge::contract_for(engine, Some(&version))?;
        let encoder = bridge::encoder(loaded, &contract.id)?;
        let event_format =
            EventFormat::from_engine_version(engine.as_str(), &version).unwrap_or(match engine {
                Engine::Vllm => EventFormat::VllmKvMapV2,
                Engine::Sglang => EventFormat::SglangKvRankV1,
                _ => EventFormat::TrtllmKvHttpPreviewV1,
            });
        Ok(EmulatorConfig {
            engine,
            model: loaded.profile.base_model.clone(),
            version,
            revision: manifest.and_then(|m| m.manifest.model_revision),
            encoder: Arc::new(encoder),
            block_size: if engine == Engine::Trtllm { 32 } else { 16 },
            hash_seed: Some("0".to_string()),
            event_format,
            faults: Faults::default(),
            lifetime: Duration::from_secs(30),
            http_port: 0,
            zmq_port: 0,
        })
    }
}

/// A running emulator. Dropping it stops and joins every thread.
pub struct Emulator {
    http_addr: String,
    zmq_addr: Option<String>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("http", &self.http_addr)
            .field("zmq", &self.zmq_addr)
            .finish()
    }
}

struct Shared {
    cfg: EmulatorConfig,
    hasher: BlockHasher,
    zmq_port: u16,
    publish: Option<mpsc::Sender<Vec<u8>>>,
    trt_queue: Mutex<TrtQueue>,
}

#[derive(Default)]
struct TrtQueue {
    next_id: u64,
    created: bool,
    events: VecDeque<Value>,
}

impl Emulator {
    /// Starts the HTTP server (and, for vLLM/SGLang, the ZMQ publisher) on 127.0.0.1.
    pub fn start(cfg: EmulatorConfig) -> Result<Emulator, crate::Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + cfg.lifetime;
        let listener = TcpListener::bind(("127.0.0.1", cfg.http_port))?;
        let http_addr = listener.local_addr()?.to_string();
        let hasher = bridge::hasher(cfg.engine, None, cfg.block_size, cfg.hash_seed.as_deref())?;
        let mut threads = Vec::new();
        let (publish, zmq_port) = if cfg.engine == Engine::Trtllm {
            (None, 0)
        } else {
            let (tx, rx) = mpsc::channel::<Vec<u8>>();
            let (port_tx, port_rx) = mpsc::channel::<Result<u16, String>>();
            let st = stop.clone();
            let port = cfg.zmq_port;
            threads.push(std::thread::spawn(move || {
                publisher(port, rx, port_tx, st, deadline)
            }));
            let port = port_rx
                .recv_timeout(Duration::from_secs(10))
                .map_err(|e| crate::Error::Config(format!("ZMQ publisher did not start: {e}")))?
                .map_err(crate::Error::Config)?;
            (Some(tx), port)
        };
        let zmq_addr = publish.as_ref().map(|_| format!("127.0.0.1:{zmq_port}"));
        let shared = Arc::new(Shared {
            cfg,
            hasher,
            zmq_port,
            publish,
            trt_queue: Mutex::new(TrtQueue::default()),
        });
        let st = stop.clone();
        threads.push(std::thread::spawn(move || {
            let sh = shared;
            http::serve(listener, st, deadline, move |r| route(&sh, r));
        }));
        Ok(Emulator {
            http_addr,
            zmq_addr,
            stop,
            threads,
        })
    }

    /// The HTTP endpoint `127.0.0.1:port`.
    pub fn endpoint(&self) -> &str {
        &self.http_addr
    }

    /// The ZMQ event endpoint `127.0.0.1:port` (vLLM, SGLang).
    pub fn events_endpoint(&self) -> Option<&str> {
        self.zmq_addr.as_deref()
    }

    /// Blocks until the lifetime is over (the standalone example).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn publisher(
    port: u16,
    rx: mpsc::Receiver<Vec<u8>>,
    port_tx: mpsc::Sender<Result<u16, String>>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
) {
    use zeromq::{Socket, SocketSend};
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = port_tx.send(Err(e.to_string()));
            return;
        }
    };
    let _guard = rt.enter();
    let mut sock = zeromq::PubSocket::new();
    let bound = rt.block_on(sock.bind(&format!("tcp://127.0.0.1:{port}")));
    let port = match bound {
        Ok(zeromq::Endpoint::Tcp(_, p)) => p,
        Ok(other) => {
            let _ = port_tx.send(Err(format!("unexpected endpoint {other}")));
            return;
        }
        Err(e) => {
            let _ = port_tx.send(Err(e.to_string()));
            return;
        }
    };
    let _ = port_tx.send(Ok(port));
    let mut seq: u64 = 0;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(payload) => {
                let mut msg = zeromq::ZmqMessage::from(Vec::<u8>::new());
                msg.push_back(seq.to_be_bytes().to_vec().into());
                msg.push_back(payload.into());
                seq += 1;
                let _ = rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(2), sock.send(msg)).await
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = rt.block_on(async { tokio::time::timeout(Duration::from_secs(1), sock.close()).await });
}

fn body_json(r: &Request) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_slice::<Value>(&r.body) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn route(sh: &Shared, r: &Request) -> Response {
    let cfg = &sh.cfg;
    let path = r.path.split('?').next().unwrap_or("");
    let e = cfg.engine;
    match (r.method.as_str(), path, e) {
        ("GET", "/version", Engine::Vllm) => identity(cfg, json!({ "version": cfg.version })),
        ("GET", "/get_server_info" | "/server_info", Engine::Sglang) => identity(
            cfg,
            json!({
                "model_path": cfg.model, "served_model_name": cfg.model, "revision": cfg.revision,
                "page_size": cfg.block_size, "dp_size": 1, "version": cfg.version,
                "kv_events": { "publisher": "zmq", "endpoint_host": "*", "endpoint_port_base": sh.zmq_port,
                               "topic": "", "block_size": cfg.block_size, "dp_size": 1 }
            }),
        ),
        ("GET", "/server_info", Engine::Trtllm) => identity(
            cfg,
            json!({
                "disaggregated_params": null, "max_batch_size": 2048,
                "kv_cache_hash_algo": cfg.faults.trt_hash_algo.clone().unwrap_or_else(|| "v1_block_key".into()),
                "tokens_per_block": cfg.block_size
            }),
        ),
        ("GET", "/get_model_info", Engine::Sglang) => Response::json(&json!({
            "model_path": cfg.model, "served_model_name": cfg.model, "tokenizer_path": cfg.model, "is_generation": true
        })),
        ("GET", "/v1/models", _) => Response::json(&json!({
            "object": "list",
            "data": [{ "id": cfg.model, "object": "model", "created": 0, "owned_by": e.as_str(), "root": cfg.model }]
        })),
        ("POST", "/tokenize", Engine::Vllm)
        | ("POST", "/tokenize" | "/v1/tokenize", Engine::Sglang) => tokenize(cfg, r),
        ("POST", "/v1/completions", _) => completions(sh, r),
        ("POST", "/kv_cache_events", Engine::Trtllm) => {
            let mut q = sh.trt_queue.lock().unwrap_or_else(|p| p.into_inner());
            let events: Vec<Value> = q.events.drain(..).collect();
            Response::json(&Value::Array(events))
        }
        _ => Response::error(404, "not found"),
    }
}

fn identity(cfg: &EmulatorConfig, v: Value) -> Response {
    let mut resp = Response::json(&v);
    if cfg.faults.oversized_identity {
        let pad = "x".repeat(300 * 1024);
        resp = Response::json(&json!({ "padding": pad }));
    }
    resp.delay = cfg.faults.slow_identity;
    resp
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn tokenize(cfg: &EmulatorConfig, r: &Request) -> Response {
    let Some(body) = body_json(r) else {
        return Response::error(400, "body is not a JSON object");
    };
    let ids = if let Some(Value::String(p)) = body.get("prompt") {
        let add_special = body
            .get("add_special_tokens")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let res = if add_special {
            cfg.encoder.engine_completions(p)
        } else {
            cfg.encoder.tokenizer().and_then(|t| t.encode(p, false))
        };
        res.map_err(|e| e.to_string())
    } else if body.contains_key("messages") {
        match cfg.encoder.engine_chat(&r.body, Some(now_ms())) {
            Ok(c) => c.ids.ok_or_else(|| "no tokenizer".to_string()),
            Err(e) => Err(e.to_string()),
        }
    } else {
        Err("need prompt or messages".to_string())
    };
    match ids {
        Ok(ids) => {
            let mut v = json!({ "count": ids.len(), "max_model_len": 40960, "tokens": ids, "token_strs": null });
            if cfg.faults.broken_tokenize_schema {
                if let Some(o) = v.as_object_mut() {
                    o.remove("count");
                }
            }
            Response::json(&v)
        }
        Err(e) => Response::error(400, &e),
    }
}

fn completions(sh: &Shared, r: &Request) -> Response {
    let cfg = &sh.cfg;
    let Some(body) = body_json(r) else {
        return Response::error(400, "body is not a JSON object");
    };
    if body.get("model").and_then(Value::as_str) != Some(cfg.model.as_str()) {
        return Response::error(404, "model not served");
    }
    let Some(Value::String(prompt)) = body.get("prompt") else {
        return Response::error(400, "need a text prompt");
    };
    let ids = match cfg.encoder.engine_completions(prompt) {
        Ok(ids) => ids,
        Err(e) => return Response::error(400, &e.to_string()),
    };
    if !cfg.faults.no_events {
        publish_stored(sh, &ids);
    }
    Response::json(&json!({
        "id": "cmpl-emulator", "object": "text_completion", "created": 0, "model": cfg.model,
        "choices": [{ "index": 0, "text": " ok", "finish_reason": "length" }],
        "usage": { "prompt_tokens": ids.len(), "completion_tokens": 1, "total_tokens": ids.len() + 1 }
    }))
}

fn publish_stored(sh: &Shared, ids: &[u32]) {
    let cfg = &sh.cfg;
    let bs = cfg.block_size.max(1);
    let full = ids.len() / bs;
    let mut hashes = vec![0u64; full];
    let n = sh.hasher.block_hashes_u64(ids, &mut hashes).unwrap_or(0);
    hashes.truncate(n);
    let tokens = ids.get(..n * bs).unwrap_or(&[]);
    match cfg.engine {
        Engine::Trtllm => {
            let mut q = sh.trt_queue.lock().unwrap_or_else(|p| p.into_inner());
            if !q.created {
                q.created = true;
                let id = q.next_id;
                q.next_id += 1;
                q.events.push_back(json!({ "event_id": id, "data": { "type": "created", "num_blocks_per_cache_level": [4096, 0] }, "window_size": 32768 }));
            }
            let blocks: Vec<Value> = hashes
                .iter()
                .zip(tokens.chunks(bs))
                .map(|(h, t)| {
                    json!({
                        "type": "stored_block", "block_hash": h,
                        "tokens": t.iter().map(|&id| json!({ "type": "unique_token", "token_id": id as i32, "token_extra_id": 0 })).collect::<Vec<_>>(),
                        "cache_salt": if cfg.faults.extra_keys { json!("tenant-x") } else { Value::Null },
                        "cache_level": 0, "priority": 35, "mm_keys": []
                    })
                })
                .collect();
            let id = q.next_id;
            q.next_id += 1;
            if cfg.faults.garbage_events {
                q.events.push_back(json!({ "event_id": id, "data": { "type": "stored", "parent_hash": "nope", "blocks": 7 }, "window_size": 32768 }));
            } else {
                q.events.push_back(json!({ "event_id": id, "data": { "type": "stored", "parent_hash": null, "blocks": blocks }, "window_size": 32768 }));
            }
        }
        _ => {
            let payload = if cfg.faults.garbage_events {
                vec![0xc1, 0xff, 0x00, 0x13]
            } else {
                stored_payload(cfg, &hashes, tokens)
            };
            if let Some(tx) = &sh.publish {
                let _ = tx.send(payload);
            }
        }
    }
}

fn stored_payload(cfg: &EmulatorConfig, hashes: &[u64], tokens: &[u32]) -> Vec<u8> {
    let mut w = msgpack::Writer::new();
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    w.array(3).f64(ts).array(1);
    match cfg.event_format {
        EventFormat::SglangKvRankV1 => {
            w.array(if cfg.faults.extra_keys { 8 } else { 7 })
                .str("BlockStored");
            w.array(hashes.len());
            for h in hashes {
                w.int(*h as i64);
            }
            w.nil().array(tokens.len());
            for t in tokens {
                w.uint(u64::from(*t));
            }
            w.uint(cfg.block_size as u64).nil().str("GPU");
            if cfg.faults.extra_keys {
                w.map(1).str("cache_salt").str("tenant-x");
            }
        }
        EventFormat::VllmKvArrayV1 => {
            w.array(9).str("BlockStored");
            vllm_fields(&mut w, cfg, hashes, tokens);
        }
        _ => {
            w.map(11).str("type").str("BlockStored");
            w.str("block_hashes");
            w.array(hashes.len());
            for h in hashes {
                w.uint(*h);
            }
            w.str("parent_block_hash")
                .nil()
                .str("token_ids")
                .array(tokens.len());
            for t in tokens {
                w.uint(u64::from(*t));
            }
            w.str("block_size").uint(cfg.block_size as u64);
            w.str("lora_id")
                .nil()
                .str("medium")
                .str("GPU")
                .str("lora_name")
                .nil();
            w.str("extra_keys").array(hashes.len());
            for _ in hashes {
                if cfg.faults.extra_keys {
                    w.array(1).str("tenant-x");
                } else {
                    w.nil();
                }
            }
            w.str("group_idx")
                .uint(0)
                .str("kv_cache_spec_kind")
                .str("full_attention");
        }
    }
    w.uint(0);
    w.into_bytes()
}

fn vllm_fields(w: &mut msgpack::Writer, cfg: &EmulatorConfig, hashes: &[u64], tokens: &[u32]) {
    w.array(hashes.len());
    for h in hashes {
        w.uint(*h);
    }
    w.nil().array(tokens.len());
    for t in tokens {
        w.uint(u64::from(*t));
    }
    w.uint(cfg.block_size as u64)
        .nil()
        .str("GPU")
        .nil()
        .array(hashes.len());
    for _ in hashes {
        if cfg.faults.extra_keys {
            w.array(1).str("tenant-x");
        } else {
            w.nil();
        }
    }
}
