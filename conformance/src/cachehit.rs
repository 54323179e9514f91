//! The cache-hit replays (`cachehit/*.json`, format `kvexact-cachehit-v1`): each endpoint's
//! published ZMQ frames fed to a `kvindex::Index` in order, and at every query each
//! endpoint's predicted cached tokens compared with what the engine's own prefix lookup
//! reported; every `run` step's engine-computed `cached_tokens` goes through
//! [`kvindex::Index::observe`] against the prediction made at its query.
//!
//! Everything comes from the release the file names: the event schema and the block hasher
//! (`kvprobe::contract`, `kvprobe::bridge::hasher`), and the prefix-hit rule
//! (`kvindex::HitRule::for_version`). A query the index answers `unknown` for a reason the
//! release's catalog entry explains (its events do not show the LoRA namespace) is counted
//! apart; any other `unknown` fails.

use crate::CaseResult;
use kvindex::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
    Observation, Outcome, Request,
};
use kvprobe::deployment::{DeploymentKeys, RequestKeys};
use kvprofile_core::deployment::{Deployment, KeyForm, LoraAdapter, Speculative};
use kvprofile_core::HashAlgorithm;
use serde_json::Value;
use std::collections::HashMap;

/// The format tag of a cache-hit replay.
pub const FORMAT: &str = "kvexact-cachehit-v1";

/// Whether `doc` is a cache-hit replay.
pub fn detect(doc: &Value) -> bool {
    doc.get("format").and_then(Value::as_str) == Some(FORMAT)
}

/// The result of one replay.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Every judged query × endpoint and run.
    pub cases: Vec<CaseResult>,
    /// Queries × endpoints answered `unknown` for a reason the catalog explains.
    pub unknown: Vec<CaseResult>,
    /// Notes (the release and rule applied).
    pub notes: Vec<String>,
}

fn s<'a>(v: &'a Value, k: &str) -> Result<&'a str, String> {
    v.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string {k:?}"))
}

fn u(v: &Value, k: &str) -> Result<u64, String> {
    v.get(k)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("missing integer {k:?}"))
}

fn ids(v: &Value) -> Result<Vec<u32>, String> {
    v.get("token_ids")
        .and_then(Value::as_array)
        .ok_or("missing token_ids")?
        .iter()
        .map(|x| {
            x.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| "bad token id".to_string())
        })
        .collect()
}

/// The deployment a replay's header describes, in kvexact's terms
/// ([`kvprofile_core::deployment::Deployment`]): block size, algorithm and seed, the LoRA
/// adapters (`lora_adapters`), and the engine's own `deployment` object, translated field by
/// field. A field of that object this translation does not model refuses the file: a
/// deployment kvexact does not model must never be predicted from plain keys. Returns the
/// deployment and the look-ahead / bigram facts the engine stated, to be checked against what
/// the deployment resolves to.
pub fn deployment_of(doc: &Value) -> Result<(Deployment, Stated), String> {
    let engine = s(doc, "engine")?;
    let mut d = Deployment {
        block_size: Some(u(doc, "block_size")? as u32),
        ..Deployment::default()
    };
    d.hash_algorithm = match s(doc, "hash_algo")? {
        "sha256_cbor" => Some(HashAlgorithm::Sha256Cbor),
        "sha256" => Some(HashAlgorithm::Sha256),
        "xxhash_cbor" => Some(HashAlgorithm::XxhashCbor),
        "xxhash" => Some(HashAlgorithm::Xxhash),
        "sglang_native" => None,
        other => return Err(format!("unknown hash_algo {other:?}")),
    };
    d.hash_seed = doc
        .get("hash_seed")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(a) = doc.get("lora_adapters").and_then(Value::as_array) {
        for ad in a {
            d.lora_adapters.push(LoraAdapter {
                name: s(ad, "lora_name")?.to_string(),
                path: ad
                    .get("lora_path")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            });
        }
    }
    let mut stated = Stated::default();
    let Some(dep) = doc.get("deployment") else {
        return Ok((d, stated));
    };
    let obj = dep.as_object().ok_or("deployment: not an object")?;
    let refuse =
        |k: &str| format!("REFUSED DEPLOYMENT_UNSUPPORTED: deployment field {k:?} is not modelled");
    let b = |v: &Value, k: &str| -> Result<bool, String> {
        v.as_bool()
            .ok_or_else(|| format!("deployment.{k}: not a boolean"))
    };
    match engine {
        "vllm" => {
            for (k, v) in obj {
                match k.as_str() {
                    "speculative" if v.is_null() => {}
                    "speculative" => {
                        let sp = v
                            .as_object()
                            .ok_or("deployment.speculative: not an object")?;
                        let mut spec = Speculative {
                            method: String::new(),
                            num_speculative_tokens: 0,
                            mtp_modules: None,
                            disable_eagle_block_drop: false,
                            disable_lookahead_block_hashes: false,
                        };
                        for (sk, sv) in sp {
                            match sk.as_str() {
                                "method" => {
                                    spec.method =
                                        sv.as_str().ok_or("speculative.method")?.to_string()
                                }
                                "num_speculative_tokens" => {
                                    spec.num_speculative_tokens =
                                        sv.as_u64().ok_or("num_speculative_tokens")? as u32
                                }
                                "num_nextn_predict_layers" => {
                                    spec.mtp_modules =
                                        Some(sv.as_u64().ok_or("num_nextn_predict_layers")? as u32)
                                }
                                "multi_module_mtp" => stated.multi_module_mtp = Some(b(sv, sk)?),
                                "disable_eagle_block_drop" => {
                                    spec.disable_eagle_block_drop = b(sv, sk)?
                                }
                                "disable_lookahead_block_hashes" => {
                                    spec.disable_lookahead_block_hashes = b(sv, sk)?
                                }
                                other => return Err(refuse(&format!("speculative.{other}"))),
                            }
                        }
                        d.speculative = Some(spec);
                    }
                    "enable_prefix_caching" if v.as_bool() == Some(true) => {}
                    "kv_transfer_config" if v.is_null() => {}
                    "num_hash_lookahead_tokens" => {
                        stated.lookahead = Some(v.as_u64().ok_or("num_hash_lookahead_tokens")?)
                    }
                    // What the engine derives from the speculative config for its own
                    // scheduling (re-prefillable tokens, reserved slots): it shows in the
                    // events the index reads, not in the keys.
                    "num_prefill_lookahead_tokens" | "num_lookahead_tokens" => {}
                    "use_eagle_block_drop" => stated.block_drop = Some(b(v, k)?),
                    other => return Err(refuse(other)),
                }
            }
        }
        "sglang" => {
            for (k, v) in obj {
                match k.as_str() {
                    "speculative" if v.is_null() => {}
                    "speculative" => {
                        let sp = v
                            .as_object()
                            .ok_or("deployment.speculative: not an object")?;
                        let mut spec = Speculative {
                            method: String::new(),
                            num_speculative_tokens: 0,
                            mtp_modules: None,
                            disable_eagle_block_drop: false,
                            disable_lookahead_block_hashes: false,
                        };
                        for (sk, sv) in sp {
                            match sk.as_str() {
                                "speculative_algorithm" => {
                                    spec.method =
                                        sv.as_str().ok_or("speculative_algorithm")?.to_string()
                                }
                                "speculative_num_draft_tokens" => {
                                    spec.num_speculative_tokens =
                                        sv.as_u64().ok_or("speculative_num_draft_tokens")? as u32
                                }
                                // Drafting shape: how many tokens are drafted per step, not
                                // what the radix tree keys.
                                "speculative_num_steps" | "speculative_eagle_topk" => {}
                                other => return Err(refuse(&format!("speculative.{other}"))),
                            }
                        }
                        d.speculative = Some(spec);
                    }
                    "radix_is_eagle" => stated.bigram = Some(b(v, k)?),
                    other => return Err(refuse(other)),
                }
            }
        }
        other => return Err(refuse(&format!("{other} deployment"))),
    }
    Ok((d, stated))
}

/// What a replay's engine stated about its keys (`deployment` header), checked against what
/// kvexact resolves the deployment to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stated {
    /// vLLM `num_hash_lookahead_tokens`.
    pub lookahead: Option<u64>,
    /// vLLM `use_eagle_block_drop` (after look-ahead hashing cleared it).
    pub block_drop: Option<bool>,
    /// vLLM `speculative.multi_module_mtp`.
    pub multi_module_mtp: Option<bool>,
    /// SGLang `radix_is_eagle`.
    pub bigram: Option<bool>,
}

impl Stated {
    /// Checks the engine's statements against the resolved key form.
    pub fn check(&self, form: KeyForm) -> Result<(), String> {
        let l = match form {
            KeyForm::Lookahead(l) => u64::from(l),
            _ => 0,
        };
        if let Some(want) = self.lookahead {
            if want != l {
                return Err(format!(
                    "the engine hashed with num_hash_lookahead_tokens = {want}, the deployment \
                     resolves to {}",
                    form.name()
                ));
            }
        }
        if self.block_drop == Some(true) {
            return Err("the engine drops the last EAGLE block on hits: not modelled".into());
        }
        if let Some(multi) = self.multi_module_mtp {
            if multi != (l > 1) {
                return Err(format!(
                    "the engine's multi_module_mtp = {multi} disagrees with {}",
                    form.name()
                ));
            }
        }
        if let Some(bigram) = self.bigram {
            if bigram != (form == KeyForm::Bigram) {
                return Err(format!(
                    "the engine's radix_is_eagle = {bigram} disagrees with {}",
                    form.name()
                ));
            }
        }
        Ok(())
    }
}

/// Replays one file.
pub fn check(doc: &Value) -> Result<Replay, String> {
    let engine = s(doc, "engine")?;
    let version = s(doc, "engine_version")?;
    let contract = crate::contract::contract_of(engine, version)?;
    let (deployment, stated) = deployment_of(doc)?;
    let keys = DeploymentKeys::new(contract.clone(), &deployment, "<replay header>")
        .map_err(|e| format!("REFUSED {}: {e}", e.code()))?;
    stated.check(keys.keying().key_form)?;
    let rule =
        HitRule::for_keying(keys.keying()).map_err(|e| format!("REFUSED {}: {e}", e.code()))?;
    let schema = contract
        .events()
        .ok_or_else(|| format!("{} has no KV events", contract.release_id()))?
        .clone();
    let block_size = keys.keying().block_size;

    let groups = match doc.get("kv_cache_groups").and_then(Value::as_array) {
        Some(gs) => gs
            .iter()
            .map(|g| {
                let bs = u(g, "block_size")? as u32;
                let kind = match s(g, "kv_cache_spec_kind")? {
                    "full_attention" => GroupKind::FullAttention,
                    "sliding_window" => GroupKind::SlidingWindow {
                        window: u(g, "kv_cache_spec_sliding_window")? as u32,
                    },
                    k => return Err(format!("unknown group kind {k:?}")),
                };
                Ok(GroupSpec {
                    kind,
                    block_size: bs,
                })
            })
            .collect::<Result<Vec<_>, String>>()?,
        None => vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size,
        }],
    };
    let gpu_blocks = match doc.get("usable_blocks").and_then(Value::as_u64) {
        Some(b) => b,
        None => u(doc, "kv_capacity_pages")?,
    };
    let serves_adapters = !keys.keying().adapters.is_empty();
    let index = Index::new(IndexOptions {
        rule: rule.clone(),
        schema,
        block_size,
        groups,
        max_slots: 64,
    })
    .map_err(|e| format!("REFUSED {}: {e}", e.code()))?;
    let publishers = doc.get("endpoint_publishers");
    let mut eps: HashMap<String, EndpointId> = HashMap::new();
    let names: Vec<String> = doc
        .get("endpoints")
        .and_then(Value::as_array)
        .ok_or("missing endpoints")?
        .iter()
        .map(|e| {
            e.as_str()
                .map(str::to_string)
                .ok_or_else(|| "bad endpoint".to_string())
        })
        .collect::<Result<_, _>>()?;
    for name in &names {
        let rank = publishers
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("dp_rank"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let id = index
            .add_endpoint(EndpointConfig {
                name: name.clone(),
                dp_ranks: rank as u32 + 1,
                capacity: Capacity {
                    gpu_blocks,
                    other_blocks: gpu_blocks,
                },
                lora_adapters: serves_adapters,
                replay: false,
                // Each replay begins with the engines' launch: empty caches, whose first
                // batch (sequence 0) may come after the first queries.
                starts_empty: true,
            })
            .map_err(|e| e.to_string())?;
        eps.insert(name.clone(), id);
    }

    let mut out = Replay {
        notes: vec![format!(
            "{} rule {} with {} keys ({}) over {} endpoints",
            rule.release_id,
            rule.lookup.as_str(),
            rule.key_form.name(),
            if rule.proven() { "proven" } else { "unproven" },
            names.len()
        )],
        ..Replay::default()
    };
    let mut at_query: HashMap<u64, Vec<kvindex::Prediction>> = HashMap::new();
    let mut preds = Vec::new();
    let mut hashes = vec![0u64; 0];
    for (i, step) in doc
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("missing steps")?
        .iter()
        .enumerate()
    {
        match s(step, "kind")? {
            "events" => {
                let ep = eps[s(step, "endpoint")?];
                let rank = u(step, "dp_rank")? as u32;
                let topic = s(step, "topic")?.as_bytes().to_vec();
                let seq = hex::decode(s(step, "seq_frame_hex")?).map_err(|e| e.to_string())?;
                let payload = hex::decode(s(step, "payload_hex")?).map_err(|e| e.to_string())?;
                index
                    .apply_frames(ep, rank, &[&topic, &seq, &payload])
                    .map_err(|e| format!("step {i}: {e}"))?;
            }
            "query" => {
                let qid = u(step, "id")?;
                let tokens = ids(step)?;
                let lora = step.get("lora_name").and_then(Value::as_str);
                let salt = step.get("cache_salt").and_then(Value::as_str);
                let h = keys
                    .request_hasher(RequestKeys {
                        cache_salt: salt,
                        adapter: lora,
                    })
                    .map_err(|e| format!("query {qid}: {e}"))?;
                hashes.resize(h.block_count(tokens.len()), 0);
                let n = h
                    .block_hashes_u64(&tokens, &mut hashes)
                    .map_err(|e| e.to_string())?;
                hashes.truncate(n);
                index
                    .predict(
                        &Request {
                            block_hashes: &hashes,
                            prompt_tokens: tokens.len(),

                            max_cached_tokens: None,
                        },
                        &mut preds,
                    )
                    .map_err(|e| format!("query {qid}: {e}"))?;
                let expected = step
                    .get("expected_cached_tokens")
                    .ok_or("missing expected_cached_tokens")?;
                for p in &preds {
                    let name = index.endpoint_name(p.endpoint).unwrap_or_default();
                    let want = u(expected, &name)?;
                    let case = format!("q{qid}/{name}");
                    match p.outcome {
                        Outcome::Cached { tokens, .. } if u64::from(tokens) == want => {
                            out.cases.push(CaseResult {
                                name: case,
                                failure: None,
                            })
                        }
                        Outcome::Cached { tokens, .. } => out.cases.push(CaseResult {
                            name: case,
                            failure: Some(format!(
                                "predicted {tokens} cached tokens, the engine had {want}"
                            )),
                        }),
                        Outcome::Unknown(r) if r.explained_by_catalog() && !rule.lora_in_hashes => {
                            out.unknown.push(CaseResult {
                                name: case,
                                failure: Some(format!(
                                    "unknown ({}); the engine had {want}",
                                    r.as_str()
                                )),
                            })
                        }
                        Outcome::Unknown(r) => out.cases.push(CaseResult {
                            name: case,
                            failure: Some(format!(
                                "unknown ({}) not explained by the catalog; the engine had {want}",
                                r.as_str()
                            )),
                        }),
                    }
                }
                at_query.insert(qid, preds.clone());
            }
            "run" => {
                let qid = u(step, "query")?;
                let name = s(step, "endpoint")?;
                let ep = eps[name];
                let reported = u(step, "cached_tokens")?;
                let Some(p) = at_query
                    .get(&qid)
                    .and_then(|ps| ps.iter().find(|p| p.endpoint == ep))
                else {
                    return Err(format!("run of query {qid} before the query"));
                };
                let obs = index
                    .observe(ep, p.rank, &format!("q{qid}"), p.outcome, reported)
                    .map_err(|e| e.to_string())?;
                let case = CaseResult {
                    name: format!("q{qid}/run@{name}"),
                    failure: match obs {
                        Observation::Exact => None,
                        other => Some(format!(
                            "observe: {} (engine computed {reported})",
                            other.as_str()
                        )),
                    },
                };
                if obs == Observation::Unjudged
                    && matches!(p.outcome, Outcome::Unknown(r) if r.explained_by_catalog())
                {
                    out.unknown.push(case);
                } else {
                    out.cases.push(case);
                }
            }
            other => return Err(format!("step {i}: unknown kind {other:?}")),
        }
    }
    if let Some(d) = index.prediction_drift() {
        out.notes.push(d.to_string());
    }
    Ok(out)
}
