//! TensorRT-LLM `POST /kv_cache_events` bodies (docs/contracts/trtllm.md §6) and `/server_info`.
//!
//! The body is a JSON array of envelopes `{"event_id", "data": {"type": …}, "window_size",
//! "attention_dp_rank"?}`. Integers are read from serde_json's exact integer forms (u64 /
//! i64); a float (including an integer too large for 64 bits, which serde_json turns into a
//! float) where an integer is required is an error. Hashes printed signed are reinterpreted
//! as their 64 bits (spec: "accept a signed spelling defensively"). Unknown keys and `type`
//! tags of nested objects are ignored, as the spec asks; unknown event types are errors.

use super::model::{
    BlockHash, BlockRemoved, Event, EventBatch, EventKind, TrtCreated, TrtDiff, TrtEnvelope,
    TrtMmKey, TrtStored, TrtStoredBlock, TrtToken, TrtUpdated,
};
use super::{EventFormat, Limits, Location};
use crate::Error;
use serde_json::{Map, Value};

type Obj = Map<String, Value>;

fn found(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float (or an integer beyond 64 bits)",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn unexpected(path: &str, expected: &'static str, v: &Value) -> Error {
    Error::EventUnexpectedType {
        at: Location::path(path),
        expected,
        found: found(v),
    }
}

fn obj<'v>(v: &'v Value, path: &str) -> Result<&'v Obj, Error> {
    v.as_object()
        .ok_or_else(|| unexpected(path, "an object", v))
}

fn arr<'v>(v: &'v Value, path: &str, limits: &Limits) -> Result<&'v Vec<Value>, Error> {
    let a = v
        .as_array()
        .ok_or_else(|| unexpected(path, "an array", v))?;
    if a.len() > limits.max_elements {
        return Err(Error::EventLimitExceeded {
            at: Location::path(path),
            limit: "element count",
            max: limits.max_elements as u64,
        });
    }
    Ok(a)
}

fn field<'v>(o: &'v Obj, key: &'static str, path: &str) -> Result<&'v Value, Error> {
    o.get(key).ok_or_else(|| Error::EventMissingField {
        at: Location::path(path),
        field: key,
    })
}

/// A present, non-null value, or `None`.
fn opt<'v>(o: &'v Obj, key: &str) -> Option<&'v Value> {
    o.get(key).filter(|v| !v.is_null())
}

fn out_of_range(path: &str, v: &Value, range: &'static str) -> Error {
    Error::EventIntegerOutOfRange {
        at: Location::path(path),
        value: v.to_string(),
        range,
    }
}

fn u64_of(v: &Value, path: &str) -> Result<u64, Error> {
    match v {
        Value::Number(n) if !n.is_f64() => n
            .as_u64()
            .ok_or_else(|| out_of_range(path, v, "0..=2^64-1")),
        _ => Err(unexpected(path, "a non-negative integer", v)),
    }
}

fn i64_of(v: &Value, path: &str) -> Result<i64, Error> {
    match v {
        Value::Number(n) if !n.is_f64() => n
            .as_i64()
            .ok_or_else(|| out_of_range(path, v, "-2^63..=2^63-1")),
        _ => Err(unexpected(path, "an integer", v)),
    }
}

/// A u64 hash; a negative (signed) spelling is reinterpreted as its 64 bits.
fn hash_of(v: &Value, path: &str) -> Result<u64, Error> {
    match v {
        Value::Number(n) if !n.is_f64() => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Ok(u),
            (None, Some(i)) => Ok(i as u64),
            _ => Err(out_of_range(path, v, "-2^63..=2^64-1")),
        },
        _ => Err(unexpected(path, "an integer hash", v)),
    }
}

fn u32_of(v: &Value, path: &str) -> Result<u32, Error> {
    let u = u64_of(v, path)?;
    u32::try_from(u).map_err(|_| out_of_range(path, v, "0..=2^32-1"))
}

/// A token id: int32 as the engine prints it; an unsigned spelling up to 2^32-1 is accepted
/// and reinterpreted as the same 32 bits.
fn token_id_of(v: &Value, path: &str) -> Result<i32, Error> {
    let i = i64_of(v, path)?;
    if let Ok(t) = i32::try_from(i) {
        return Ok(t);
    }
    u32::try_from(i)
        .map(|u| u as i32)
        .map_err(|_| out_of_range(path, v, "-2^31..=2^32-1"))
}

fn string_of(v: &Value, path: &str) -> Result<String, Error> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| unexpected(path, "a string", v))
}

/// Decodes a whole body: the typed fast path ([`super::trtllm_fast`]) when the body is in its
/// subset, else the checked decoder (which gives the same result, or the located error).
pub(crate) fn decode_body(
    format: EventFormat,
    body: &[u8],
    limits: &Limits,
) -> Result<EventBatch<'static>, Error> {
    match super::trtllm_fast::decode_body(format, body, limits) {
        Some(batch) => Ok(batch),
        None => decode_body_checked(format, body, limits),
    }
}

/// The checked decoder: every value read from a `serde_json::Value` tree, every error located.
/// Bytes charged per JSON value (and object key) the checked decoder's `serde_json::Value`
/// tree may hold: a `Value` plus a map entry's key and node share.
const VALUE_COST: usize = 2 * std::mem::size_of::<Value>();

/// An upper bound of the values and object keys in a JSON text: one, plus one per `,`, `:`
/// and `[` outside strings (every value but the first follows one of them). A linear scan,
/// allocation-free; malformed text gives some bound, and the parser reports the error.
pub(crate) fn value_bound(body: &[u8]) -> usize {
    let (mut n, mut in_str, mut esc) = (1usize, false, false);
    for &b in body {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_str = true,
                b',' | b':' | b'[' => n += 1,
                _ => {}
            }
        }
    }
    n
}

pub(crate) fn decode_body_checked(
    format: EventFormat,
    body: &[u8],
    limits: &Limits,
) -> Result<EventBatch<'static>, Error> {
    if body.len() > limits.max_input_bytes {
        return Err(Error::EventLimitExceeded {
            at: Location::offset(0),
            limit: "body size",
            max: limits.max_input_bytes as u64,
        });
    }
    // The `Value` tree takes tens of bytes per value, however short its text: charge an upper
    // bound of its size against the payload's decoded-bytes budget before building it.
    let items = value_bound(body);
    if items.saturating_mul(VALUE_COST) > limits.max_decoded_bytes {
        return Err(Error::EventLimitExceeded {
            at: Location::offset(0),
            limit: "decoded bytes per payload",
            max: limits.max_decoded_bytes as u64,
        });
    }
    let doc: Value = serde_json::from_slice(body).map_err(|e| Error::EventJsonSyntax {
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    })?;
    super::json_dups::check(body, limits)?;
    let list = arr(&doc, "$", limits)?;
    if list.len() > limits.max_events {
        return Err(Error::EventLimitExceeded {
            at: Location::path("$"),
            limit: "events per batch",
            max: limits.max_events as u64,
        });
    }
    let mut events = Vec::with_capacity(list.len());
    for (i, env) in list.iter().enumerate() {
        events.push(decode_envelope(env, &format!("$[{i}]"), limits)?);
    }
    Ok(EventBatch {
        format,
        topic: None,
        seq: None,
        ts: None,
        rank: None,
        events,
    })
}

fn decode_envelope(v: &Value, path: &str, limits: &Limits) -> Result<Event<'static>, Error> {
    let o = obj(v, path)?;
    let event_id = u64_of(field(o, "event_id", path)?, &format!("{path}.event_id"))?;
    let window_size = opt(o, "window_size")
        .map(|w| u64_of(w, &format!("{path}.window_size")))
        .transpose()?;
    let attention_dp_rank = opt(o, "attention_dp_rank")
        .map(|w| u32_of(w, &format!("{path}.attention_dp_rank")))
        .transpose()?;
    let dpath = format!("{path}.data");
    let data = obj(field(o, "data", path)?, &dpath)?;
    let tpath = format!("{dpath}.type");
    let ty = field(data, "type", &dpath)?;
    let ty = ty
        .as_str()
        .ok_or_else(|| unexpected(&tpath, "a string", ty))?;
    let kind = match ty {
        "created" => {
            let p = format!("{dpath}.num_blocks_per_cache_level");
            let levels = arr(
                field(data, "num_blocks_per_cache_level", &dpath)?,
                &p,
                limits,
            )?;
            let num_blocks_per_cache_level = levels
                .iter()
                .enumerate()
                .map(|(i, x)| u64_of(x, &format!("{p}[{i}]")))
                .collect::<Result<_, _>>()?;
            EventKind::Created(TrtCreated {
                num_blocks_per_cache_level,
            })
        }
        "stored" => EventKind::Stored(decode_stored(data, &dpath, limits)?),
        "removed" => {
            let p = format!("{dpath}.block_hashes");
            let hs = arr(field(data, "block_hashes", &dpath)?, &p, limits)?;
            let block_hashes = hs
                .iter()
                .enumerate()
                .map(|(i, x)| hash_of(x, &format!("{p}[{i}]")).map(BlockHash::U64))
                .collect::<Result<_, _>>()?;
            EventKind::BlockRemoved(BlockRemoved {
                block_hashes,
                medium: None,
                group_idx: None,
                locality: None,
                ownership: None,
            })
        }
        "updated" => {
            let block_hash = hash_of(
                field(data, "block_hash", &dpath)?,
                &format!("{dpath}.block_hash"),
            )?;
            let diff = |key: &str| -> Result<Option<TrtDiff>, Error> {
                let Some(d) = opt(data, key) else {
                    return Ok(None);
                };
                let p = format!("{dpath}.{key}");
                let d = obj(d, &p)?;
                Ok(Some(TrtDiff {
                    new_value: i64_of(field(d, "new_value", &p)?, &format!("{p}.new_value"))?,
                    old_value: i64_of(field(d, "old_value", &p)?, &format!("{p}.old_value"))?,
                }))
            };
            EventKind::Updated(TrtUpdated {
                block_hash,
                cache_level: diff("cache_level")?,
                priority: diff("priority")?,
            })
        }
        other => {
            return Err(Error::EventUnknownType {
                at: Location::path(tpath),
                name: other.to_string(),
            })
        }
    };
    Ok(Event {
        envelope: Some(TrtEnvelope {
            event_id,
            window_size,
            attention_dp_rank,
        }),
        kind,
    })
}

fn decode_stored(data: &Obj, dpath: &str, limits: &Limits) -> Result<TrtStored, Error> {
    let parent_hash = opt(data, "parent_hash")
        .map(|p| hash_of(p, &format!("{dpath}.parent_hash")))
        .transpose()?;
    let bpath = format!("{dpath}.blocks");
    let blocks_v = arr(field(data, "blocks", dpath)?, &bpath, limits)?;
    let mut blocks = Vec::with_capacity(blocks_v.len());
    for (i, b) in blocks_v.iter().enumerate() {
        let p = format!("{bpath}[{i}]");
        let o = obj(b, &p)?;
        let block_hash = hash_of(field(o, "block_hash", &p)?, &format!("{p}.block_hash"))?;
        let tp = format!("{p}.tokens");
        let toks = arr(field(o, "tokens", &p)?, &tp, limits)?;
        let mut tokens = Vec::with_capacity(toks.len());
        for (j, t) in toks.iter().enumerate() {
            if let Some(tok) = fast_token(t) {
                tokens.push(tok);
                continue;
            }
            let q = format!("{tp}[{j}]");
            let to = obj(t, &q)?;
            let token_id = token_id_of(field(to, "token_id", &q)?, &format!("{q}.token_id"))?;
            let token_extra_id = opt(to, "token_extra_id")
                .map(|x| u64_of(x, &format!("{q}.token_extra_id")))
                .transpose()?
                .unwrap_or(0);
            tokens.push(TrtToken {
                token_id,
                token_extra_id,
            });
        }
        let cache_salt = opt(o, "cache_salt")
            .map(|x| string_of(x, &format!("{p}.cache_salt")))
            .transpose()?;
        let cache_level = opt(o, "cache_level")
            .map(|x| i64_of(x, &format!("{p}.cache_level")))
            .transpose()?;
        let priority = opt(o, "priority")
            .map(|x| i64_of(x, &format!("{p}.priority")))
            .transpose()?;
        let lora_id = opt(o, "lora_id")
            .map(|x| i64_of(x, &format!("{p}.lora_id")))
            .transpose()?;
        let mut mm_keys = Vec::new();
        if let Some(mk) = opt(o, "mm_keys") {
            let mp = format!("{p}.mm_keys");
            for (j, k) in arr(mk, &mp, limits)?.iter().enumerate() {
                let q = format!("{mp}[{j}]");
                let ko = obj(k, &q)?;
                mm_keys.push(TrtMmKey {
                    hash: string_of(field(ko, "hash", &q)?, &format!("{q}.hash"))?,
                    start_offset: u64_of(
                        field(ko, "start_offset", &q)?,
                        &format!("{q}.start_offset"),
                    )?,
                });
            }
        }
        blocks.push(TrtStoredBlock {
            block_hash,
            tokens,
            cache_salt,
            cache_level,
            priority,
            mm_keys,
            lora_id,
        });
    }
    Ok(TrtStored {
        parent_hash,
        blocks,
    })
}

/// The common token shape without building any path text; `None` sends the token down the
/// checked path, which accepts a superset and reports errors with their location.
fn fast_token(t: &Value) -> Option<TrtToken> {
    let o = t.as_object()?;
    let token_id = i32::try_from(o.get("token_id")?.as_i64()?).ok()?;
    let token_extra_id = match o.get("token_extra_id") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64()?,
    };
    Some(TrtToken {
        token_id,
        token_extra_id,
    })
}

/// What TensorRT-LLM's `GET /server_info` says about its KV events (docs/contracts/trtllm.md §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrtServerInfo {
    /// `kv_cache_hash_algo` (`"v1_block_key"` for this contract); `None` on builds too old
    /// to describe their events.
    pub kv_cache_hash_algo: Option<String>,
    /// `tokens_per_block`; `None` when absent.
    pub tokens_per_block: Option<u64>,
}

/// Decodes a `/server_info` body (a JSON object; other keys are ignored).
pub fn decode_server_info(body: &[u8]) -> Result<TrtServerInfo, Error> {
    let doc: Value = serde_json::from_slice(body).map_err(|e| Error::EventJsonSyntax {
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    })?;
    let o = obj(&doc, "$")?;
    Ok(TrtServerInfo {
        kv_cache_hash_algo: opt(o, "kv_cache_hash_algo")
            .map(|v| string_of(v, "$.kv_cache_hash_algo"))
            .transpose()?,
        tokens_per_block: opt(o, "tokens_per_block")
            .map(|v| u64_of(v, "$.tokens_per_block"))
            .transpose()?,
    })
}
