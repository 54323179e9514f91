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
use kvhash::vllm::{LoraKey, VllmExtras};
use kvhash::BlockHasher;
use kvindex::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
    Observation, Outcome, Request,
};
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

/// Replays one file.
pub fn check(doc: &Value) -> Result<Replay, String> {
    let engine = s(doc, "engine")?;
    let version = s(doc, "engine_version")?;
    let contract = crate::parity::contract_of(engine, version)?;
    let rule = HitRule::for_version(contract.engine(), version)
        .map_err(|e| format!("REFUSED {}: {e}", e.code()))?;
    let schema = contract
        .events()
        .ok_or_else(|| format!("{} has no KV events", contract.release_id()))?
        .clone();
    let block_size = u(doc, "block_size")? as u32;
    let algo = match s(doc, "hash_algo")? {
        "sha256_cbor" => Some(HashAlgorithm::Sha256Cbor),
        "sha256" => Some(HashAlgorithm::Sha256),
        "xxhash_cbor" => Some(HashAlgorithm::XxhashCbor),
        "xxhash" => Some(HashAlgorithm::Xxhash),
        "sglang_native" => None,
        other => return Err(format!("unknown hash_algo {other:?}")),
    };
    let seed = doc.get("hash_seed").and_then(Value::as_str);
    let hasher = kvprobe::bridge::hasher(&contract, algo, block_size as usize, seed)
        .map_err(|e| e.to_string())?;

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
    let adapters: Vec<&Value> = doc
        .get("lora_adapters")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let lora_path: HashMap<&str, &str> = adapters
        .iter()
        .filter_map(|a| {
            Some((
                a.get("lora_name")?.as_str()?,
                a.get("lora_path").and_then(Value::as_str).unwrap_or(""),
            ))
        })
        .collect();

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
                lora_adapters: !adapters.is_empty(),
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
            "{} rule {} ({}) over {} endpoints",
            rule.release_id,
            rule.lookup.as_str(),
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
                let h = request_hasher(&hasher, lora, salt, &lora_path)?;
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

/// The hasher of one request: the file's hasher with the request's LoRA and salt.
fn request_hasher(
    base: &BlockHasher,
    lora: Option<&str>,
    salt: Option<&str>,
    paths: &HashMap<&str, &str>,
) -> Result<BlockHasher, String> {
    Ok(match base {
        BlockHasher::Vllm(h) => {
            let lora = match lora {
                None => None,
                Some(name) => Some(LoraKey {
                    name: name.to_string(),
                    path: paths
                        .get(name)
                        .ok_or_else(|| format!("adapter {name:?} not in lora_adapters"))?
                        .to_string(),
                }),
            };
            let extras = VllmExtras {
                lora,
                cache_salt: salt.map(str::to_string),
                ..VllmExtras::default()
            };
            h.clone()
                .with_extras(extras)
                .map_err(|e| e.to_string())?
                .into()
        }
        BlockHasher::Sglang(h) => h.clone().with_cache_salt(salt).into(),
        BlockHasher::Trtllm(h) => {
            if lora.is_some() || salt.is_some() {
                return Err("TensorRT-LLM replays with LoRA or salt are not supported".into());
            }
            h.clone().into()
        }
    })
}
