//! [`EventWriter`]: what the emulated engine publishes for one completion — the block hashes
//! of the prompt under the release's rules (or under a fault), written in the release's event
//! schema — with an optional prefix cache (only blocks not yet cached are stored, chained on
//! the last cached one; evictions publish `BlockRemoved`). The emulator's HTTP path and tests
//! that drive a verifier directly share it.

use super::{DriftFault, Faults};
use kvhash::events::{EventFormat, Field};
use kvhash::sglang::SglangHasher;
use kvhash::trtllm::{SaltVariant, TrtllmHasher};
use kvhash::vllm::{HashAlgo, LoraKey, VllmExtras, VllmHasher};
use kvprobe::contract::{Contract, HashContract};
use kvprobe::{Engine, Error};
use kvprofile_core::deployment::{EventNamespace, KeyForm, Keying};
use serde_json::{json, Value};
use std::collections::{HashSet, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

/// The salt key the `extra_keys` / [`DriftFault::UnhashedKeys`] faults publish.
pub const FAULT_SALT: &str = "tenant-x";
/// The adapter [`DriftFault::HiddenLora`] hashes with when the engine serves none.
pub const FAULT_LORA: (&str, &str) = ("drift-lora", "/adapters/drift-lora");

/// What an [`EventWriter`] is built from (the publishing part of an emulator configuration).
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// Engine family.
    pub engine: Engine,
    /// The release whose hashing rules and event schema are followed.
    pub contract: Contract,
    /// Tokens per KV block.
    pub block_size: usize,
    /// vLLM `PYTHONHASHSEED`.
    pub hash_seed: Option<String>,
    /// vLLM LoRA adapter `(name, path)` served beside the base model.
    pub lora: Option<(String, String)>,
    /// Faults.
    pub faults: Faults,
    /// Emulate a prefix cache of this many blocks: a completion stores only the blocks not
    /// cached yet (parent = the last cached one), and blocks pushed out (oldest first) are
    /// published as removed. `None`: every completion stores all its blocks from the root.
    pub prefix_cache: Option<usize>,
    /// vLLM hybrid-model group blocks: publish every `k`-th hash with `block_size` `k` × the
    /// block size (the group block is keyed by its last sub-block's hash). 1 = plain.
    pub group_blocks: usize,
    /// The options the engine was launched with, where they change its keys (a resolved
    /// deployment): its adapters (beside [`WriterConfig::lora`]), look-ahead hashing with
    /// `lookahead_token_ids` (vLLM) or bigram pages with token pairs (SGLang). Its block
    /// size is [`WriterConfig::block_size`]'s to set. `None`: the default deployment.
    pub keying: Option<Keying>,
}

/// What one request asks of the engine's keys besides its token ids, as the engine read it
/// from the request (the emulator's HTTP layer, or a test).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestSide<'a> {
    /// The adapter the request selected (its served name); `None`: the base model.
    pub lora: Option<&'a str>,
    /// The request's `cache_salt`, where the engine keys it (`None`: unsalted).
    pub salt: Option<&'a str>,
}

/// One completion's publication.
#[derive(Debug, Clone, PartialEq)]
pub enum Published {
    /// Nothing (every block was cached, or the `no_events` fault).
    Nothing,
    /// A msgpack `[ts, events, rank]` batch (vLLM, SGLang): ZMQ frame 2.
    Msgpack(Vec<u8>),
    /// TensorRT-LLM drain events (the elements of a `POST /kv_cache_events` body).
    Json(Vec<Value>),
}

/// Hashes and writes the events of completions.
#[derive(Debug)]
pub struct EventWriter {
    cfg: WriterConfig,
    completions: u64,
    cached: HashSet<u64>,
    order: VecDeque<u64>,
    trt_next_id: u64,
    trt_created: bool,
}

/// How one completion is hashed and shown.
struct Plan<'a> {
    block_size: usize,
    form: KeyForm,
    seed: Option<&'a str>,
    hashed_lora: Option<(&'a str, &'a str)>,
    hashed_salt: Option<&'a str>,
    shown_lora: Option<&'a str>,
    shown_salt: bool,
    block0_salt: Option<&'a str>,
    sglang_lora_namespace: bool,
    /// SGLang: the KV-event namespace seed the published hashes are re-hashed under (the
    /// deployment's event format, the request's adapter and salt).
    sglang_seed: Option<[u8; 32]>,
    other_algorithm: bool,
}

impl EventWriter {
    /// A writer; checks that the configuration can hash (seed, block size, LoRA engine).
    pub fn new(cfg: WriterConfig) -> Result<EventWriter, Error> {
        if cfg.block_size == 0 || cfg.group_blocks == 0 {
            return Err(Error::Config(
                "block size and group blocks must be > 0".into(),
            ));
        }
        if let Some(k) = &cfg.keying {
            if k.engine != cfg.engine || k.block_size as usize != cfg.block_size {
                return Err(Error::Config(format!(
                    "the deployment is {}'s with blocks of {}, the writer {}'s with blocks of {}",
                    k.engine, k.block_size, cfg.engine, cfg.block_size
                )));
            }
        }
        if cfg.lora.is_some() && cfg.engine != Engine::Vllm {
            return Err(Error::Config(
                "the emulator serves LoRA adapters for vLLM only".into(),
            ));
        }
        if cfg.group_blocks > 1 && cfg.engine != Engine::Vllm {
            return Err(Error::Config("group blocks are a vLLM feature".into()));
        }
        let w = EventWriter {
            cfg,
            completions: 0,
            cached: HashSet::new(),
            order: VecDeque::new(),
            trt_next_id: 0,
            trt_created: false,
        };
        // Fail now, not at the first request, when the rules cannot hash (e.g. rule A and no
        // seed).
        w.hashes(&[], RequestSide::default(), false)?;
        if w.cfg.faults.drift.is_some() {
            w.hashes(&[], RequestSide::default(), true)?;
        }
        Ok(w)
    }

    /// The configuration.
    pub fn config(&self) -> &WriterConfig {
        &self.cfg
    }

    /// Completions written so far.
    pub fn completions(&self) -> u64 {
        self.completions
    }

    /// Whether the drift fault applies to the next completion.
    pub fn drift_active(&self) -> bool {
        self.cfg.faults.drift.is_some() && self.completions >= self.cfg.faults.drift_after
    }

    /// The served adapter `name` (its name and path): the deployment's, else
    /// [`WriterConfig::lora`].
    fn served(&self, name: &str) -> Option<(&str, &str)> {
        let c = &self.cfg;
        c.keying
            .as_ref()
            .and_then(|k| k.adapter(name))
            .map(|a| (a.name.as_str(), a.path.as_str()))
            .or_else(|| {
                c.lora
                    .as_ref()
                    .filter(|(n, _)| n == name)
                    .map(|(n, p)| (n.as_str(), p.as_str()))
            })
    }

    fn plan<'a>(&'a self, req: RequestSide<'a>, drift: bool) -> Plan<'a> {
        let c = &self.cfg;
        let served = req.lora.and_then(|n| self.served(n));
        // vLLM keys an adapter into every block and shows its name; SGLang (0.5.19) and
        // TensorRT-LLM keep adapters out of their published keys.
        let vllm = c.engine == Engine::Vllm;
        let mut p = Plan {
            block_size: c.block_size,
            form: c.keying.as_ref().map_or(KeyForm::Plain, |k| k.key_form),
            seed: c.hash_seed.as_deref(),
            hashed_lora: served.filter(|_| vllm || c.keying.is_none()),
            hashed_salt: req.salt,
            // SGLang names an adapter in its events only under an event namespace.
            shown_lora: served
                .filter(|_| {
                    vllm || c
                        .keying
                        .as_ref()
                        .is_some_and(|k| k.event_namespace.is_some())
                })
                .map(|(n, _)| n),
            shown_salt: c.faults.extra_keys,
            block0_salt: req.salt.filter(|_| vllm),
            sglang_lora_namespace: false,
            sglang_seed: match (c.engine, c.keying.as_ref().and_then(|k| k.event_namespace)) {
                (Engine::Sglang, Some(ns)) => {
                    use kvhash::sglang_namespace::{lora_id, namespace_seed};
                    let id = served.map(|(n, p)| lora_id(n, p));
                    let salt = req.salt.filter(|s| !s.is_empty());
                    match ns {
                        EventNamespace::RegisteredLora => {
                            id.map(|id| namespace_seed(Some(&id), None))
                        }
                        EventNamespace::ExtraKeyAndSalt => (id.is_some() || salt.is_some())
                            .then(|| namespace_seed(id.as_deref(), salt)),
                    }
                }
                _ => None,
            },
            other_algorithm: false,
        };
        let fault = if drift { c.faults.drift.as_ref() } else { None };
        match fault {
            None => {}
            Some(DriftFault::Seed(s)) if c.engine == Engine::Vllm => p.seed = Some(s),
            Some(DriftFault::Seed(s) | DriftFault::HiddenSalt(s)) => p.hashed_salt = Some(s),
            Some(DriftFault::BlockSize(n)) => p.block_size = *n,
            Some(DriftFault::UnhashedKeys) => p.shown_salt = true,
            Some(DriftFault::HiddenLora) => match c.engine {
                Engine::Sglang => p.sglang_lora_namespace = true,
                _ => {
                    p.hashed_lora = Some(
                        c.lora
                            .as_ref()
                            .map_or(FAULT_LORA, |(n, p)| (n.as_str(), p.as_str())),
                    );
                    p.shown_lora = None;
                }
            },
            Some(DriftFault::Algorithm) => p.other_algorithm = true,
            Some(DriftFault::LoraPath(path)) => {
                if let Some((n, _)) = p.hashed_lora {
                    p.hashed_lora = Some((n, path));
                }
            }
        }
        p
    }

    /// The published hashes (64-bit form) of every block of `ids` under the plan.
    fn hashes(&self, ids: &[u32], req: RequestSide<'_>, drift: bool) -> Result<Vec<u64>, Error> {
        let p = self.plan(req, drift);
        let c = &self.cfg;
        let bs = p.block_size;
        let mut out = vec![0u64; ids.len() / bs];
        if p.other_algorithm && c.engine != Engine::Vllm {
            // Another engine build: vLLM's CBOR SHA-256 chain, in the 64-bit form.
            VllmHasher::new(HashAlgo::Sha256Cbor, bs, Some("0"))?
                .block_hashes_u64(ids, &mut out)?;
            return Ok(out);
        }
        match c.contract.hash() {
            Some(HashContract::Vllm(rules)) => {
                // The deployment's algorithm (absent there: the engine's own default), else the
                // gateway contract's.
                let mut algo = kvprobe::bridge::vllm_algo(
                    c.keying
                        .as_ref()
                        .map(|k| k.hash_algorithm)
                        .or(c.contract.default_algorithm()),
                )?;
                if p.other_algorithm {
                    algo = if algo == HashAlgo::Sha256Cbor {
                        HashAlgo::Sha256
                    } else {
                        HashAlgo::Sha256Cbor
                    };
                }
                let mut h = VllmHasher::with_rules(rules, algo, bs, p.seed)?;
                let extras = VllmExtras {
                    lora: p.hashed_lora.map(|(name, path)| LoraKey {
                        name: name.into(),
                        path: path.into(),
                    }),
                    cache_salt: p.hashed_salt.map(str::to_string),
                    ..VllmExtras::default()
                };
                if let KeyForm::Lookahead(l) = p.form {
                    h = h.with_lookahead(l as usize)?;
                }
                if !extras.is_plain() {
                    h = h.with_extras(extras)?;
                }
                let n = h.block_hashes_u64(ids, &mut out)?;
                out.truncate(n);
            }
            Some(HashContract::Sglang(rules)) => {
                let mut h = SglangHasher::new(bs)?
                    .with_rules(rules)
                    .with_cache_salt(p.hashed_salt)
                    .with_event_namespace(p.sglang_seed);
                if p.form == KeyForm::Bigram {
                    h = h.with_mode(kvhash::sglang::KeyMode::EagleBigram);
                }
                let n = h.block_hashes_u64(ids, &mut out)?;
                out.truncate(n);
                if p.sglang_lora_namespace {
                    for x in &mut out {
                        *x = namespaced(*x);
                    }
                }
            }
            Some(HashContract::Trtllm(variant)) => {
                let mut h = TrtllmHasher::new(bs)?;
                if let Some(s) = p.hashed_salt {
                    h = h.with_cache_salt(variant.unwrap_or(SaltVariant::StdHashString), s)?;
                }
                if p.hashed_lora.is_some() {
                    h = h.with_lora_task_id(1);
                }
                h.block_hashes_u64(ids, &mut out)?;
            }
            None => return Err(Error::Config("the release has no KV plane".into())),
        }
        Ok(out)
    }

    /// The hashes (64-bit form) the engine keys and publishes for the prompt `ids` of a
    /// request keyed with `req` (the deployment's key form; no fault).
    pub fn keys(&self, ids: &[u32], req: RequestSide<'_>) -> Result<Vec<u64>, Error> {
        self.hashes(ids, req, false)
    }

    /// vLLM's `POST /reset_prefix_cache`: the prefix cache emptied, published as one
    /// `AllBlocksCleared` batch (vLLM and SGLang; TensorRT-LLM publishes nothing).
    pub fn reset_prefix_cache(&mut self) -> Published {
        self.cached.clear();
        self.order.clear();
        if self.cfg.engine == Engine::Trtllm || self.cfg.faults.no_events {
            return Published::Nothing;
        }
        let Some(schema) = self.cfg.contract.events() else {
            return Published::Nothing;
        };
        use super::msgpack::Writer;
        let mut w = Writer::new();
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        w.array(3).f64(ts).array(1);
        match schema.format() {
            EventFormat::VllmKvArrayV1 | EventFormat::SglangKvRankV1 => {
                w.array(1).str("AllBlocksCleared");
            }
            _ => {
                w.map(1).str("type").str("AllBlocksCleared");
            }
        }
        w.uint(0);
        Published::Msgpack(w.into_bytes())
    }

    /// The events of one completion over the prompt ids `ids` (for the LoRA adapter `lora`,
    /// when it names the served one).
    pub fn completion(&mut self, ids: &[u32], lora: Option<&str>) -> Published {
        self.completion_keyed(ids, RequestSide { lora, salt: None })
    }

    /// The events of one completion over the prompt ids `ids`, keyed with the request's
    /// adapter and salt as the engine keys them (vLLM: LoRA and `cache_salt` extra keys,
    /// shown in `extra_keys` — the salt on block 0 only; SGLang: the salted chain, nothing
    /// shown; TensorRT-LLM: the salt value), under the deployment's key form.
    pub fn completion_keyed(&mut self, ids: &[u32], req: RequestSide<'_>) -> Published {
        let drift = self.drift_active();
        self.completions += 1;
        if self.cfg.faults.no_events {
            return Published::Nothing;
        }
        let Ok(hashes) = self.hashes(ids, req, drift) else {
            return Published::Nothing;
        };
        let plan = self.plan(req, drift);
        let bs = plan.block_size;
        let form = plan.form;
        let shown_lora = plan.shown_lora.map(str::to_string);
        let shown_salt = plan.shown_salt;
        let block0_salt = plan.block0_salt.map(str::to_string);
        // Group blocks: every k-th hash stands for k blocks.
        let k = self.cfg.group_blocks;
        let group = |v: &[u64]| -> Vec<u64> { v.iter().skip(k - 1).step_by(k).copied().collect() };
        let published = group(&hashes);
        let ebs = bs * k;
        // The prefix cache: blocks cached from block 0 are not stored again.
        let mut first = 0;
        if self.cfg.prefix_cache.is_some() {
            while published
                .get(first)
                .is_some_and(|h| self.cached.contains(h))
            {
                first += 1;
            }
        }
        let new = &published[first..];
        let parent = first.checked_sub(1).and_then(|i| published.get(i).copied());
        let tokens = ids
            .get(first * ebs..(first + new.len()) * ebs)
            .unwrap_or(&[]);
        let mut removed = Vec::new();
        if let Some(cap) = self.cfg.prefix_cache {
            for h in new {
                if self.cached.insert(*h) {
                    self.order.push_back(*h);
                }
            }
            while self.order.len() > cap {
                if let Some(old) = self.order.pop_front() {
                    self.cached.remove(&old);
                    removed.push(old);
                }
            }
        }
        if new.is_empty() && removed.is_empty() {
            return Published::Nothing;
        }
        let sglang = self.cfg.engine == Engine::Sglang;
        let shown = Shown {
            lora: shown_lora.as_deref(),
            // SGLang shows a request's salt in `cache_salt`.
            salt: if shown_salt {
                Some(FAULT_SALT)
            } else {
                req.salt.filter(|s| sglang && !s.is_empty())
            },
            block0_salt: block0_salt.as_deref(),
        };
        let blocks = Blocks {
            hashes: new,
            parent,
            tokens,
            ids,
            first,
            block_size: ebs,
            form: if k == 1 { form } else { KeyForm::Plain },
        };
        match self.cfg.engine {
            Engine::Trtllm => {
                Published::Json(self.trt_events(new, parent, tokens, bs, &shown, &removed))
            }
            _ => {
                if self.cfg.faults.garbage_events {
                    return Published::Msgpack(vec![0xc1, 0xff, 0x00, 0x13]);
                }
                Published::Msgpack(msgpack_batch(&self.cfg, &blocks, &shown, &removed, false))
            }
        }
    }

    fn trt_events(
        &mut self,
        new: &[u64],
        parent: Option<u64>,
        tokens: &[u32],
        bs: usize,
        shown: &Shown<'_>,
        removed: &[u64],
    ) -> Vec<Value> {
        let mut out = Vec::new();
        let mut id = || {
            let i = self.trt_next_id;
            self.trt_next_id += 1;
            i
        };
        if !self.trt_created {
            self.trt_created = true;
            out.push(json!({ "event_id": id(), "data": { "type": "created", "num_blocks_per_cache_level": [4096, 0] }, "window_size": 32768 }));
        }
        if self.cfg.faults.garbage_events {
            out.push(json!({ "event_id": id(), "data": { "type": "stored", "parent_hash": "nope", "blocks": 7 }, "window_size": 32768 }));
            return out;
        }
        if !new.is_empty() {
            let blocks: Vec<Value> = new
                .iter()
                .zip(tokens.chunks(bs))
                .map(|(h, t)| {
                    json!({
                        "type": "stored_block", "block_hash": h,
                        "tokens": t.iter().map(|&id| json!({ "type": "unique_token", "token_id": id as i32, "token_extra_id": 0 })).collect::<Vec<_>>(),
                        "cache_salt": shown.salt,
                        "cache_level": 0, "priority": 35, "mm_keys": []
                    })
                })
                .collect();
            out.push(json!({ "event_id": id(), "data": { "type": "stored", "parent_hash": parent, "blocks": blocks }, "window_size": 32768 }));
        }
        if !removed.is_empty() {
            out.push(json!({ "event_id": id(), "data": { "type": "removed", "block_hashes": removed }, "window_size": 32768 }));
        }
        out
    }
}

/// One step's batch of an engine whose prefix cache the caller keeps (the routing replay's
/// pools, [`super::pool`]): the `removed` hashes first, then blocks `first..first +
/// hashes.len()` of the prompt `ids` stored under `parent`, in the release's event schema,
/// showing what the engine shows of the request (vLLM: the adapter's name on every block,
/// the salt on block 0 only; look-ahead token ids; SGLang bigram token pairs).
pub fn step_batch(
    cfg: &WriterConfig,
    ids: &[u32],
    first: usize,
    hashes: &[u64],
    parent: Option<u64>,
    req: RequestSide<'_>,
    removed: &[u64],
) -> Vec<u8> {
    let bs = cfg.block_size;
    let vllm = cfg.engine == Engine::Vllm;
    let form = cfg.keying.as_ref().map_or(KeyForm::Plain, |k| k.key_form);
    let flat = match form {
        KeyForm::Bigram => &[][..],
        _ => ids
            .get(first * bs..(first + hashes.len()) * bs)
            .unwrap_or(&[]),
    };
    let blocks = Blocks {
        hashes,
        parent,
        tokens: flat,
        ids,
        first,
        block_size: bs,
        form,
    };
    let namespaced = cfg
        .keying
        .as_ref()
        .is_some_and(|k| k.event_namespace.is_some());
    let shown = Shown {
        lora: req.lora.filter(|_| vllm || namespaced),
        salt: req.salt.filter(|s| !vllm && !s.is_empty()),
        block0_salt: req.salt.filter(|_| vllm),
    };
    msgpack_batch(cfg, &blocks, &shown, removed, true)
}

/// SGLang [`DriftFault::HiddenLora`]: a published hash re-hashed into a namespace the events
/// do not name (as 0.5.23 does for LoRA traffic).
fn namespaced(h: u64) -> u64 {
    kvhash::sglang::salt_seed(&format!("emulator-lora-namespace:{h:016x}")).first8_be()
}

/// What the events show besides hashes and tokens.
struct Shown<'a> {
    lora: Option<&'a str>,
    /// A salt shown on every block (the faults).
    salt: Option<&'a str>,
    /// vLLM: the request's salt, an extra key of its block 0 only.
    block0_salt: Option<&'a str>,
}

/// The blocks one `BlockStored` event stores.
struct Blocks<'a> {
    hashes: &'a [u64],
    parent: Option<u64>,
    /// Their tokens (flat, `hashes.len()` × `block_size`).
    tokens: &'a [u32],
    /// The whole prompt (look-ahead tokens, bigram pairs).
    ids: &'a [u32],
    /// The prompt's index of the first block.
    first: usize,
    block_size: usize,
    form: KeyForm,
}

/// One `[ts, [BlockStored, BlockRemoved?], 0]` batch, written field by field from the
/// release's event schema: an array carries every field; a map omits the optional fields
/// that are nil.
fn msgpack_batch(
    cfg: &WriterConfig,
    blocks: &Blocks<'_>,
    shown: &Shown<'_>,
    removed: &[u64],
    removed_first: bool,
) -> Vec<u8> {
    use super::msgpack::Writer;
    let Blocks {
        hashes,
        parent,
        tokens,
        ids,
        first,
        block_size,
        form,
    } = *blocks;
    let mut w = Writer::new();
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let n_events = usize::from(!hashes.is_empty()) + usize::from(!removed.is_empty());
    w.array(3).f64(ts).array(n_events);
    let Some(schema) = cfg.contract.events() else {
        return w.into_bytes();
    };
    let sglang = cfg.engine == Engine::Sglang;
    let lora = shown.lora;
    // vLLM shows the salt in `extra_keys`, SGLang in `cache_salt`.
    let salt = shown.salt.filter(|_| sglang);
    let vllm_salt = shown.salt.filter(|_| !sglang);
    let hash = |w: &mut Writer, h: u64| {
        if sglang {
            w.int(h as i64);
        } else {
            w.uint(h);
        }
    };
    // The value of each field; `None` = nil.
    let present = |f: Field| match f {
        Field::ParentBlockHash => parent.is_some(),
        Field::KvCacheSpecSlidingWindow | Field::Locality | Field::Ownership | Field::SessionId => {
            false
        }
        Field::LookaheadTokenIds => matches!(form, KeyForm::Lookahead(_)),
        Field::LoraId => lora.is_some() && !sglang,
        Field::LoraName => lora.is_some(),
        Field::CacheSalt => salt.is_some(),
        _ => true,
    };
    let write = |w: &mut Writer, f: Field, hashes: &[u64]| match f {
        Field::BlockHashes => {
            w.array(hashes.len());
            for h in hashes {
                hash(w, *h);
            }
        }
        Field::ParentBlockHash => match parent {
            Some(p) => hash(w, p),
            None => {
                w.nil();
            }
        },
        Field::TokenIds if form == KeyForm::Bigram => {
            // SGLang EAGLE: unit `j` is the pair `(t_j, t_j+1)`.
            let units = first * block_size..(first + hashes.len()) * block_size;
            w.array(units.len());
            for j in units {
                w.array(2)
                    .uint(u64::from(ids[j]))
                    .uint(u64::from(ids[j + 1]));
            }
        }
        Field::TokenIds => {
            w.array(tokens.len());
            for t in tokens {
                w.uint(u64::from(*t));
            }
        }
        Field::LookaheadTokenIds => match form {
            KeyForm::Lookahead(l) => {
                // Block `i`'s look-ahead: the `L` tokens after it.
                w.array(hashes.len());
                for i in 0..hashes.len() {
                    let end = (first + i + 1) * block_size;
                    w.array(l as usize);
                    for t in &ids[end..end + l as usize] {
                        w.uint(u64::from(*t));
                    }
                }
            }
            _ => {
                w.nil();
            }
        },
        Field::BlockSize => {
            w.uint(block_size as u64);
        }
        Field::LoraId if lora.is_some() && !sglang => {
            w.uint(1);
        }
        Field::LoraName => match lora {
            Some(n) => {
                w.str(n);
            }
            None => {
                w.nil();
            }
        },
        Field::Medium => {
            w.str("GPU");
        }
        Field::ExtraKeys => {
            w.array(hashes.len());
            for i in 0..hashes.len() {
                // The request's salt is block 0's extra key only.
                let salt = vllm_salt.or(shown.block0_salt.filter(|_| first + i == 0));
                match (lora, salt) {
                    (Some(n), None) => w.array(1).str(n),
                    (Some(n), Some(s)) => w.array(2).str(n).str(s),
                    (None, Some(s)) => w.array(1).str(s),
                    (None, None) => w.nil(),
                };
            }
        }
        Field::GroupIdx => {
            w.uint(0);
        }
        Field::KvCacheSpecKind => {
            w.str("full_attention");
        }
        Field::CacheSalt => match salt {
            Some(s) => {
                w.str(s);
            }
            None => {
                w.nil();
            }
        },
        _ => {
            w.nil();
        }
    };
    let removed_present = |f: Field| !matches!(f, Field::Locality | Field::Ownership);
    let write_stored = |w: &mut Writer| {
        let fields = schema.block_stored();
        match schema.format() {
            EventFormat::SglangKvRankV1 => {
                // Six positional fields, the salt as the 8th element's metadata map.
                w.array(if salt.is_some() { 8 } else { 7 })
                    .str("BlockStored");
                for s in fields.iter().filter(|s| s.field != Field::CacheSalt) {
                    write(w, s.field, hashes);
                }
                if let Some(s) = salt {
                    w.map(1).str("cache_salt").str(s);
                }
            }
            EventFormat::VllmKvArrayV1 => {
                w.array(1 + fields.len()).str("BlockStored");
                for s in fields {
                    write(w, s.field, hashes);
                }
            }
            _ => {
                let kept: Vec<Field> = fields
                    .iter()
                    .filter(|s| !s.optional || present(s.field))
                    .map(|s| s.field)
                    .collect();
                w.map(1 + kept.len()).str("type").str("BlockStored");
                for f in kept {
                    w.str(f.name());
                    write(w, f, hashes);
                }
            }
        }
    };
    let write_removed = |w: &mut Writer| {
        let fields = schema.block_removed();
        match schema.format() {
            EventFormat::SglangKvRankV1 | EventFormat::VllmKvArrayV1 => {
                w.array(1 + fields.len()).str("BlockRemoved");
                for s in fields {
                    write(w, s.field, removed);
                }
            }
            _ => {
                let kept: Vec<Field> = fields
                    .iter()
                    .filter(|s| !s.optional || removed_present(s.field))
                    .map(|s| s.field)
                    .collect();
                w.map(1 + kept.len()).str("type").str("BlockRemoved");
                for f in kept {
                    w.str(f.name());
                    write(w, f, removed);
                }
            }
        }
    };
    if removed_first && !removed.is_empty() {
        write_removed(&mut w);
    }
    if !hashes.is_empty() {
        write_stored(&mut w);
    }
    if !removed_first && !removed.is_empty() {
        write_removed(&mut w);
    }
    w.uint(0);
    w.into_bytes()
}
