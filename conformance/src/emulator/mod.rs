//! A loopback engine emulator for tests and the `emulator` example.
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

pub mod gptoss;
pub mod http;
pub mod mistral;
pub mod msgpack;
pub mod pool;
pub mod registry;
pub mod replay;
pub mod workload;
pub mod writer;

pub use registry::TempRegistry;
pub use workload::{Shape, Workload};
pub use writer::{EventWriter, Published, RequestSide, WriterConfig};

use http::{Request, Response};
use kvprobe::bridge;
use kvprobe::contract::{self, Contract};
use kvprobe::Engine;
use kvprofile_core::deployment::{Deployment, Keying};
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
    /// A fault of the hashes themselves, switched on mid-stream: completions after the first
    /// [`Faults::drift_after`] are hashed (and published) under it.
    pub drift: Option<DriftFault>,
    /// Completions served correctly before [`Faults::drift`] applies.
    pub drift_after: u64,
    /// The chat route answers with the tokenize route's ids (a chat path rendered as the
    /// tokenize route renders it, e.g. gpt-oss through its Jinja template).
    pub chat_like_tokenize: bool,
}

/// A way the engine's hashes drift from its release's contract (what `kvprobe::drift` must
/// catch). Each applies to every completion once switched on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriftFault {
    /// vLLM: hashed with this `PYTHONHASHSEED` instead of the configured one. SGLang and
    /// TensorRT-LLM have no hash seed (their chains' only seed is the cache salt): hashed
    /// with this cache salt, which the events do not show.
    Seed(String),
    /// Hashed and published in blocks of this many tokens (a restart with another
    /// `--block-size` / `--page-size` / `tokens_per_block`).
    BlockSize(usize),
    /// Hashed with this cache salt, which the events do not show.
    HiddenSalt(String),
    /// Published with a salt key the hash does not use (vLLM `extra_keys`, SGLang and
    /// TensorRT-LLM `cache_salt`): published keys that do not match.
    UnhashedKeys,
    /// Hashed with a LoRA the events do not show: vLLM the served adapter's key (or
    /// [`writer::FAULT_LORA`]) with neither `lora_name` nor `extra_keys`; TensorRT-LLM a LoRA
    /// task id; SGLang published hashes namespaced as 0.5.23 does for LoRA traffic, without
    /// `lora_name`.
    HiddenLora,
    /// vLLM: LoRA requests hashed with this adapter path instead of the served one (an
    /// adapter reloaded from elsewhere under the same name).
    LoraPath(String),
    /// Hashed with another algorithm than the release's: vLLM another `--prefix-caching-hash-algo`
    /// (pickle SHA-256 where the release defaults to CBOR, else CBOR SHA-256); SGLang and
    /// TensorRT-LLM vLLM's CBOR SHA-256 chain in their 64-bit form (an engine build hashing
    /// differently).
    Algorithm,
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
    /// The tokenize route's own chat render where it differs from the chat route's (vLLM's
    /// `/tokenize` renders gpt-oss with its Jinja template, its chat route with harmony);
    /// `None`: the tokenize route renders as [`EmulatorConfig::encoder`].
    pub tokenize_encoder: Option<Arc<Encoder>>,
    /// Tokens per KV block.
    pub block_size: usize,
    /// vLLM `PYTHONHASHSEED`.
    pub hash_seed: Option<String>,
    /// The engine release whose hashing rules and event schema the emulator follows (set
    /// `version` apart from it to emulate an engine that reports another version).
    pub contract: Contract,
    /// vLLM LoRA adapter `(name, path)` served beside the base model: `/v1/models` lists it
    /// (`root` = path) and a completions request naming it is hashed with its LoRA key and
    /// published with `lora_name` and its untagged `extra_keys`.
    pub lora: Option<(String, String)>,
    /// Faults.
    pub faults: Faults,
    /// After this long every thread stops.
    pub lifetime: Duration,
    /// HTTP port (0 = ephemeral).
    pub http_port: u16,
    /// ZMQ port (0 = ephemeral).
    pub zmq_port: u16,
    /// Emulate a prefix cache of this many blocks ([`WriterConfig::prefix_cache`]); `None`:
    /// every completion stores all its blocks.
    pub prefix_cache: Option<usize>,
    /// vLLM hybrid-model group blocks ([`WriterConfig::group_blocks`]); 1 = plain.
    pub group_blocks: usize,
    /// The options the engine was launched with ([`EmulatorConfig::with_deployment`]):
    /// `None`, the default deployment.
    pub deployment: Option<Deployment>,
    /// [`EmulatorConfig::deployment`] resolved against the release.
    pub keying: Option<Keying>,
    /// Emulate the engine's prefix cache as a block pool of this many blocks
    /// ([`pool::BlockPool::with_events`]: hits, least-recently-freed eviction, removals):
    /// completions report the hit as `usage.prompt_tokens_details.cached_tokens`, as vLLM
    /// and SGLang do, and publish the pool's batches (vLLM, SGLang). `GET
    /// /emulator/kv_batches` (the emulator's own route, no engine's) answers
    /// `{"published": n}`, the batches published so far. `None`: [`EmulatorConfig::prefix_cache`]'s
    /// writer.
    pub pool_blocks: Option<usize>,
}

impl std::fmt::Debug for EmulatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorConfig")
            .field("engine", &self.engine)
            .field("model", &self.model)
            .field("version", &self.version)
            .field("release", &self.contract.release_id())
            .field("block_size", &self.block_size)
            .field("faults", &self.faults)
            .finish()
    }
}

impl EmulatorConfig {
    /// A correct engine for a registry profile: the profile's tokenizer and template through the
    /// engine's encoder, the manifest's version and revision (or the engine's reference
    /// release), block size 16 (TensorRT-LLM 32), vLLM seed `"0"`.
    pub fn from_registry(
        root: &Path,
        profile_id: &str,
        engine: Engine,
    ) -> Result<EmulatorConfig, kvprobe::Error> {
        Self::from_registry_at(root, profile_id, engine, None)
    }

    /// [`EmulatorConfig::from_registry`] as engine release `version` (`None`: the manifest's,
    /// else the reference release): the emulator reports that version and follows that
    /// release's contract.
    pub fn from_registry_at(
        root: &Path,
        profile_id: &str,
        engine: Engine,
        version: Option<&str>,
    ) -> Result<EmulatorConfig, kvprobe::Error> {
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
            .ok_or_else(|| kvprobe::Error::Config(format!("no profile {profile_id}")))?;
        let manifest = generation.load_manifest(profile_id).ok().flatten();
        let version = match version {
            Some(v) => v.to_string(),
            None => manifest
                .as_ref()
                .map(|m| m.manifest.engine_version.clone())
                .or_else(|| bridge::reference_version(engine).map(str::to_string))
                .ok_or_else(|| kvprobe::Error::Config(format!("{engine} has no KV plane")))?,
        };
        let contract = contract::resolve(engine, &version)?;
        let encoder = bridge::encoder(loaded, &contract)?;
        // The tokenize route never takes a non-Jinja renderer (templates.md §13.1).
        let tokenize_encoder = match encoder.renderer() {
            kvtemplate::ChatRenderer::Jinja => None,
            // vLLM's /tokenize hands a Mistral request to mistral_common without the chat
            // route's fix-ups (templates.md §13.8).
            kvtemplate::ChatRenderer::Mistral(r)
                if r.path == kvtemplate::mistral::MistralPath::VllmChat =>
            {
                let mut spec = kvtemplate::spec_from_loaded(loaded, contract.release_id())?;
                spec.chat_rules = contract.chat_or_reference().or(spec.chat_rules);
                spec.renderer =
                    kvtemplate::ChatRenderer::Mistral(kvtemplate::mistral::MistralRenderer {
                        path: kvtemplate::mistral::MistralPath::VllmTokenize,
                        ..r
                    });
                Some(Arc::new(Encoder::new(spec)?))
            }
            // SGLang's text path: its tokenize route is not modelled; nor is a Mistral
            // checkpoint's on a release no vectors prove.
            kvtemplate::ChatRenderer::Mistral(_) => None,
            _ if loaded.profile.tokenizer_file().is_mistral() => None,
            _ => {
                let mut spec = kvtemplate::spec_from_loaded(loaded, contract.release_id())?;
                spec.chat_rules = contract.chat_or_reference().or(spec.chat_rules);
                spec.renderer = kvtemplate::ChatRenderer::Jinja;
                Some(Arc::new(Encoder::new(spec)?))
            }
        };
        Ok(EmulatorConfig {
            engine,
            model: loaded.profile.base_model.clone(),
            version,
            revision: manifest.and_then(|m| m.manifest.model_revision),
            encoder: Arc::new(encoder),
            tokenize_encoder,
            // The release's default block size (catalog `hash.defaultBlockSize`).
            block_size: contract
                .default_block_size()
                .map_or(if engine == Engine::Trtllm { 32 } else { 16 }, |b| {
                    b as usize
                }),
            hash_seed: Some("0".to_string()),
            contract,
            lora: None,
            faults: Faults::default(),
            lifetime: Duration::from_secs(30),
            http_port: 0,
            zmq_port: 0,
            prefix_cache: None,
            group_blocks: 1,
            deployment: None,
            keying: None,
            pool_blocks: None,
        })
    }

    /// The engine launched with `deployment`'s options (block size, hash algorithm and seed,
    /// speculative decoding, adapters): `/v1/models` (vLLM) lists its adapters,
    /// `/get_server_info` (SGLang) shows its page size, speculative algorithm and
    /// `lora_paths`, and completions select an adapter and key a `cache_salt` the way the
    /// engine reads them from the request — vLLM: `model` = the adapter's name, a salt
    /// that is empty is rejected (HTTP 400); SGLang: `model` = `base:adapter` or
    /// `lora_path`, an empty salt is none — hashed under the deployment's key form.
    /// Options the release cannot honour are an error, as they are for a gateway.
    pub fn with_deployment(
        mut self,
        deployment: Deployment,
    ) -> Result<EmulatorConfig, kvprobe::Error> {
        let keying = deployment
            .resolve(self.contract.release(), "emulator deployment")
            .map_err(kvprobe::Error::Contract)?;
        self.block_size = keying.block_size as usize;
        self.hash_seed = keying.hash_seed.clone();
        self.deployment = Some(deployment);
        self.keying = Some(keying);
        Ok(self)
    }

    /// The adapters served, `(name, path)`: the deployment's, else [`EmulatorConfig::lora`].
    pub fn adapters(&self) -> Vec<(String, String)> {
        match &self.keying {
            Some(k) if !k.adapters.is_empty() => k
                .adapters
                .iter()
                .map(|a| (a.name.clone(), a.path.clone()))
                .collect(),
            _ => self.lora.iter().cloned().collect(),
        }
    }

    /// The speculative-decoding method launched with (`None`: none).
    fn speculative_method(&self) -> Option<&str> {
        self.deployment
            .as_ref()
            .and_then(|d| d.speculative.as_ref())
            .map(|s| s.method.as_str())
    }

    /// The publishing part of the configuration.
    pub fn writer_config(&self) -> WriterConfig {
        WriterConfig {
            engine: self.engine,
            contract: self.contract.clone(),
            block_size: self.block_size,
            hash_seed: self.hash_seed.clone(),
            lora: self.lora.clone(),
            faults: self.faults.clone(),
            prefix_cache: self.prefix_cache,
            group_blocks: self.group_blocks,
            keying: self.keying.clone(),
        }
    }
}

/// A running emulator. Dropping it stops and joins every thread.
pub struct Emulator {
    http_addr: String,
    zmq_addr: Option<String>,
    /// The replay socket's address and the batches it serves (vLLM, SGLang).
    replay: Option<(String, Arc<replay::Log>)>,
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
    writer: Mutex<EventWriter>,
    zmq_port: u16,
    publish: Option<mpsc::Sender<Vec<u8>>>,
    trt_queue: Mutex<VecDeque<Value>>,
    /// [`EmulatorConfig::pool_blocks`]'s pool and the batches it published.
    pool: Option<Mutex<(pool::BlockPool, u64)>>,
}

impl Emulator {
    /// Starts the HTTP server (and, for vLLM/SGLang, the ZMQ publisher) on 127.0.0.1.
    pub fn start(cfg: EmulatorConfig) -> Result<Emulator, kvprobe::Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + cfg.lifetime;
        let listener = TcpListener::bind(("127.0.0.1", cfg.http_port))?;
        let http_addr = listener.local_addr()?.to_string();
        let writer = EventWriter::new(cfg.writer_config())?;
        let mut threads = Vec::new();
        let mut replay_log = None;
        let (publish, zmq_port) = if cfg.engine == Engine::Trtllm {
            (None, 0)
        } else {
            let (tx, rx) = mpsc::channel::<Vec<u8>>();
            let (port_tx, port_rx) = mpsc::channel::<Result<u16, String>>();
            let st = stop.clone();
            let port = cfg.zmq_port;
            let log = Arc::new(replay::Log::default());
            let l = log.clone();
            threads.push(std::thread::spawn(move || {
                publisher(port, rx, port_tx, st, deadline, &l)
            }));
            replay_log = Some(log);
            let port = port_rx
                .recv_timeout(Duration::from_secs(10))
                .map_err(|e| kvprobe::Error::Config(format!("ZMQ publisher did not start: {e}")))?
                .map_err(kvprobe::Error::Config)?;
            (Some(tx), port)
        };
        let zmq_addr = publish.as_ref().map(|_| format!("127.0.0.1:{zmq_port}"));
        let pool = match cfg.pool_blocks {
            None => None,
            Some(_) if cfg.engine == Engine::Trtllm => {
                return Err(kvprobe::Error::Config(
                    "the pool publishes msgpack batches: vLLM and SGLang only".into(),
                ))
            }
            Some(n) => Some(Mutex::new((
                pool::BlockPool::with_events(n, cfg.writer_config()),
                0,
            ))),
        };
        let replay = match replay_log {
            Some(log) => {
                let framing = cfg.contract.events().map_or(
                    kvhash::events::ReplayFraming::Topic,
                    kvhash::events::EventSchema::replay,
                );
                let (port_tx, port_rx) = mpsc::channel::<Result<u16, String>>();
                let (st, l) = (stop.clone(), log.clone());
                threads.push(std::thread::spawn(move || {
                    replay::serve(l, framing, 0, port_tx, st, deadline)
                }));
                let port = port_rx
                    .recv_timeout(Duration::from_secs(10))
                    .map_err(|e| {
                        kvprobe::Error::Config(format!("replay socket did not start: {e}"))
                    })?
                    .map_err(kvprobe::Error::Config)?;
                Some((format!("127.0.0.1:{port}"), log))
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            cfg,
            writer: Mutex::new(writer),
            zmq_port,
            publish,
            trt_queue: Mutex::new(VecDeque::new()),
            pool,
        });
        let st = stop.clone();
        threads.push(std::thread::spawn(move || {
            let sh = shared;
            http::serve(listener, st, deadline, move |r| route(&sh, r));
        }));
        Ok(Emulator {
            http_addr,
            zmq_addr,
            replay,
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

    /// The replay socket `127.0.0.1:port` (a ROUTER answering a DEALER's `[empty, seq]` with
    /// the kept batches from `seq` on; vLLM, SGLang).
    pub fn replay_endpoint(&self) -> Option<&str> {
        self.replay.as_ref().map(|(a, _)| a.as_str())
    }

    /// The next event batch is numbered and kept for replay but not published: a sequence
    /// gap for every subscriber (vLLM, SGLang; nothing otherwise).
    pub fn drop_next_event_batch(&self) {
        if let Some((_, log)) = &self.replay {
            log.drop_next();
        }
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
    log: &replay::Log,
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
                let publish = log.record(seq, &payload);
                let mut msg = zeromq::ZmqMessage::from(Vec::<u8>::new());
                msg.push_back(seq.to_be_bytes().to_vec().into());
                msg.push_back(payload.into());
                seq += 1;
                if !publish {
                    continue;
                }
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
        ("GET", "/get_server_info" | "/server_info", Engine::Sglang) => {
            let lora_paths: Option<Vec<String>> = cfg.keying.as_ref().map(|_| {
                cfg.adapters()
                    .iter()
                    .map(|(n, p)| format!("{n}={p}"))
                    .collect()
            });
            identity(
                cfg,
                json!({
                    "model_path": cfg.model, "served_model_name": cfg.model, "revision": cfg.revision,
                    "page_size": cfg.block_size, "dp_size": 1, "version": cfg.version,
                    "speculative_algorithm": cfg.speculative_method(),
                    "lora_paths": lora_paths.filter(|l| !l.is_empty()),
                    "kv_events": { "publisher": "zmq", "endpoint_host": "*", "endpoint_port_base": sh.zmq_port,
                                   "topic": "", "block_size": cfg.block_size, "dp_size": 1 }
                }),
            )
        }
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
        ("GET", "/v1/models", _) => {
            let mut data = vec![
                json!({ "id": cfg.model, "object": "model", "created": 0, "owned_by": e.as_str(), "root": cfg.model, "parent": null }),
            ];
            for (name, path) in cfg.adapters() {
                data.push(json!({ "id": name, "object": "model", "created": 0, "owned_by": e.as_str(), "root": path, "parent": cfg.model }));
            }
            Response::json(&json!({ "object": "list", "data": data }))
        }
        ("GET", "/metrics", Engine::Vllm) => {
            // vLLM's cache configuration gauge (labels: every CacheConfig field).
            let algo = cfg.keying.as_ref().map_or_else(
                || {
                    cfg.contract
                        .default_algorithm()
                        .map_or("sha256_cbor", |a| a.as_str())
                },
                |k| k.hash_algorithm.as_str(),
            );
            let text = format!(
                "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
                 # TYPE vllm:cache_config_info gauge\n\
                 vllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",\
                 num_gpu_blocks=\"{}\",prefix_caching_hash_algo=\"{algo}\"}} 1.0\n",
                cfg.block_size,
                cfg.prefix_cache.unwrap_or(4096) + 1,
            );
            Response {
                status: 200,
                body: text.into_bytes(),
                delay: None,
            }
        }
        ("GET", "/version", Engine::Trtllm) => identity(cfg, json!({ "version": cfg.version })),
        ("POST", "/tokenize", Engine::Vllm)
        | ("POST", "/tokenize" | "/v1/tokenize", Engine::Sglang) => tokenize(cfg, r),
        ("POST", "/v1/completions", _) => completions(sh, r),
        ("GET", "/emulator/kv_batches", _) => {
            let published = sh
                .pool
                .as_ref()
                .map_or(0, |p| p.lock().unwrap_or_else(|e| e.into_inner()).1);
            Response::json(&json!({ "published": published }))
        }
        ("POST", "/reset_prefix_cache", Engine::Vllm) => {
            publish(sh, |w| w.reset_prefix_cache());
            Response::json(&json!({}))
        }
        ("POST", "/v1/chat/completions", Engine::Vllm | Engine::Sglang) => chat(sh, r),
        ("POST", "/kv_cache_events", Engine::Trtllm) => {
            let mut q = sh.trt_queue.lock().unwrap_or_else(|p| p.into_inner());
            let events: Vec<Value> = q.drain(..).collect();
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
        let enc = cfg.tokenize_encoder.as_ref().unwrap_or(&cfg.encoder);
        match enc.engine_chat(&r.body, Some(now_ms())) {
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
    let side = match request_side(cfg, &body) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let ids = match body.get("prompt") {
        Some(Value::String(prompt)) => match cfg.encoder.engine_completions(prompt) {
            Ok(ids) => ids,
            Err(e) => return Response::error(400, &e.to_string()),
        },
        // A prompt of token ids, as both engines take it.
        Some(Value::Array(items)) => match items
            .iter()
            .map(|v| v.as_u64().and_then(|t| u32::try_from(t).ok()))
            .collect::<Option<Vec<u32>>>()
        {
            Some(ids) if !ids.is_empty() => ids,
            _ => return Response::error(400, "prompt ids must be non-negative 32-bit integers"),
        },
        _ => return Response::error(400, "need a text prompt or token ids"),
    };
    let side = RequestSide {
        lora: side.0.as_deref(),
        salt: side.1.as_deref(),
    };
    let cached = match &sh.pool {
        None => {
            publish(sh, |w| w.completion_keyed(&ids, side));
            0
        }
        Some(pool) => match pool_step(sh, pool, &ids, side) {
            Ok(c) => c,
            Err(resp) => return resp,
        },
    };
    Response::json(&json!({
        "id": "cmpl-emulator", "object": "text_completion", "created": 0, "model": cfg.model,
        "choices": [{ "index": 0, "text": " ok", "finish_reason": "length" }],
        "usage": { "prompt_tokens": ids.len(), "completion_tokens": 1, "total_tokens": ids.len() + 1,
                   "prompt_tokens_details": { "cached_tokens": cached } }
    }))
}

/// One request through [`EmulatorConfig::pool_blocks`]'s pool: the engine's keys for it
/// (the adapter in SGLang 0.5.19's radix namespace, which its hashes do not hold), the hit,
/// the batch published; the cached tokens, or the engine's error answer.
#[allow(clippy::result_large_err)]
fn pool_step(
    sh: &Shared,
    pool: &Mutex<(pool::BlockPool, u64)>,
    ids: &[u32],
    side: RequestSide<'_>,
) -> Result<u64, Response> {
    let keys = sh
        .writer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .keys(ids, side)
        .map_err(|e| Response::error(400, &e.to_string()))?;
    let adapters = sh.cfg.adapters();
    let in_keys = sh.cfg.keying.as_ref().is_none_or(|k| k.adapters_in_keys);
    let namespace = match side.lora {
        Some(a) if !in_keys => 1 + adapters.iter().position(|(n, _)| n == a).unwrap_or(0) as u32,
        _ => 0,
    };
    let mut g = pool.lock().unwrap_or_else(|p| p.into_inner());
    let served =
        g.0.serve_ask(ids, &keys, pool::Ask { side, namespace })
            .ok_or_else(|| Response::error(503, "the request does not fit the KV cache"))?;
    if let Some((_, payload)) = served.batch {
        g.1 += 1;
        if let Some(tx) = &sh.publish {
            let _ = tx.send(payload);
        }
    }
    Ok(served.cached_tokens)
}

/// The chat route: the chat path's prompt ids (the engine's renderer), published as a
/// completion's are; `prompt_token_ids` in the answer when the request asks
/// `return_token_ids` (vLLM).
fn chat(sh: &Shared, r: &Request) -> Response {
    let cfg = &sh.cfg;
    let Some(body) = body_json(r) else {
        return Response::error(400, "body is not a JSON object");
    };
    let side = match request_side(cfg, &body) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let enc = if cfg.faults.chat_like_tokenize {
        cfg.tokenize_encoder.as_ref().unwrap_or(&cfg.encoder)
    } else {
        &cfg.encoder
    };
    let ids = match enc.engine_chat(&r.body, Some(now_ms())) {
        Ok(c) => match c.ids {
            Some(ids) => ids,
            None => return Response::error(500, "no tokenizer"),
        },
        Err(e) => return Response::error(400, &e.to_string()),
    };
    publish(sh, |w| {
        w.completion_keyed(
            &ids,
            RequestSide {
                lora: side.0.as_deref(),
                salt: side.1.as_deref(),
            },
        )
    });
    let mut v = json!({
        "id": "chatcmpl-emulator", "object": "chat.completion", "created": 0, "model": cfg.model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" }, "finish_reason": "length" }],
        "usage": { "prompt_tokens": ids.len(), "completion_tokens": 1, "total_tokens": ids.len() + 1 }
    });
    if cfg.engine == Engine::Vllm && body.get("return_token_ids") == Some(&Value::Bool(true)) {
        v["prompt_token_ids"] = json!(ids);
    }
    Response::json(&v)
}

/// The adapter and salt a request selects, read as the engine reads them (see
/// [`EmulatorConfig::with_deployment`]), or the engine's error answer.
#[allow(clippy::result_large_err)]
fn request_side(
    cfg: &EmulatorConfig,
    body: &serde_json::Map<String, Value>,
) -> Result<Selected, Response> {
    engine_request_side(cfg.engine, &cfg.model, &cfg.adapters(), body)
        .map_err(|(status, msg)| Response::error(status, msg))
}

/// The adapter and salt a request selects (`None`: the base model, unsalted).
pub type Selected = (Option<String>, Option<String>);

/// The adapter and salt an engine of `engine` serving `model` and `adapters` (`(name, path)`)
/// reads from a request body, or its error answer (status, message): vLLM selects an
/// adapter by `model` = its name and rejects an empty `cache_salt`; SGLang by `model` =
/// `base:adapter` or `lora_path`, and an empty salt is none; any other `model` is not
/// served (404).
pub fn engine_request_side(
    engine: Engine,
    base_model: &str,
    adapters: &[(String, String)],
    body: &serde_json::Map<String, Value>,
) -> Result<Selected, (u16, &'static str)> {
    let served = |n: &str| adapters.iter().any(|(a, _)| a == n);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    let lora = match engine {
        Engine::Sglang => {
            let named = match model.split_once(':') {
                Some((base, a)) if base == base_model && !a.trim().is_empty() => {
                    Some(a.trim().to_string())
                }
                Some(_) => return Err((404, "model not served")),
                None if model == base_model => body
                    .get("lora_path")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                None => return Err((404, "model not served")),
            };
            match named {
                Some(a) if !served(&a) => {
                    return Err((400, "adapter not loaded"));
                }
                other => other,
            }
        }
        _ if model == base_model => None,
        _ if served(model) => Some(model.to_string()),
        _ => return Err((404, "model not served")),
    };
    let salt = match body.get("cache_salt") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => match engine {
            Engine::Sglang => None,
            _ => return Err((400, "cache_salt must be non-empty")),
        },
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err((400, "cache_salt must be a string")),
    };
    Ok((lora, salt))
}

/// Publishes what `f` makes the writer write.
fn publish(sh: &Shared, f: impl FnOnce(&mut EventWriter) -> Published) {
    let published = f(&mut sh.writer.lock().unwrap_or_else(|p| p.into_inner()));
    match published {
        Published::Nothing => {}
        Published::Json(events) => sh
            .trt_queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(events),
        Published::Msgpack(payload) => {
            if let Some(tx) = &sh.publish {
                let _ = tx.send(payload);
            }
        }
    }
}
