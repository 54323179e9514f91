//! A JSON view of decoded batches, with the field names of the vectors' `decoded` forms.
//!
//! vLLM: `{"topic"?, "seq"?, "ts", "data_parallel_rank", "events": [{"type", field…}]}`;
//! SGLang: the same with `"attn_dp_rank"`; TensorRT-LLM: `{"events": [{"event_id", "type",
//! "window_size", "attention_dp_rank", data field…}]}`. Hashes keep the engine's form
//! (bytes as `{"$bytes": hex}`); 64-bit integers are exact JSON integers.

use super::model::{
    BlockHash, BlockRemoved, BlockStored, Event, EventBatch, EventKind, ExtraKey, TokenIds,
    TokenShape, TrtDiff,
};
use serde_json::{json, Map, Value};

fn hash(h: &BlockHash<'_>) -> Value {
    match *h {
        BlockHash::U64(v) => json!(v),
        BlockHash::I64(v) => json!(v),
        BlockHash::Bytes(b) => json!({ "$bytes": hex::encode(b) }),
    }
}

fn hashes(hs: &[BlockHash<'_>]) -> Value {
    Value::Array(hs.iter().map(hash).collect())
}

fn tokens(t: &TokenIds<'_>) -> Value {
    match t.shape() {
        TokenShape::Flat => Value::Array(t.values().map(|v| json!(v)).collect()),
        TokenShape::Bigrams => Value::Array(
            t.bigrams()
                .into_iter()
                .flatten()
                .map(|(a, b)| json!([a, b]))
                .collect(),
        ),
    }
}

fn extra_key(k: &ExtraKey<'_>) -> Value {
    match *k {
        ExtraKey::Text(s) => json!(s),
        ExtraKey::Bytes(b) => json!({ "$bytes": hex::encode(b) }),
        ExtraKey::Mm { identifier, offset } => json!([identifier, offset]),
    }
}

fn stored(s: &BlockStored<'_>, engine: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("BlockStored"));
    m.insert("block_hashes".into(), hashes(&s.block_hashes));
    m.insert(
        "parent_block_hash".into(),
        s.parent_block_hash.as_ref().map_or(Value::Null, hash),
    );
    m.insert("token_ids".into(), tokens(&s.token_ids));
    m.insert("block_size".into(), json!(s.block_size));
    m.insert("lora_id".into(), json!(s.lora_id));
    m.insert("medium".into(), json!(s.medium));
    m.insert("lora_name".into(), json!(s.lora_name));
    if engine == "vllm" {
        m.insert(
            "extra_keys".into(),
            match &s.extra_keys {
                None => Value::Null,
                Some(blocks) => Value::Array(
                    blocks
                        .iter()
                        .map(|b| match b {
                            None => Value::Null,
                            Some(keys) => Value::Array(keys.iter().map(extra_key).collect()),
                        })
                        .collect(),
                ),
            },
        );
        m.insert("group_idx".into(), json!(s.group_idx));
        m.insert("kv_cache_spec_kind".into(), json!(s.kv_cache_spec_kind));
        m.insert(
            "kv_cache_spec_sliding_window".into(),
            json!(s.kv_cache_spec_sliding_window),
        );
        m.insert("locality".into(), json!(s.locality));
        m.insert("ownership".into(), json!(s.ownership));
        m.insert(
            "lookahead_token_ids".into(),
            s.lookahead_token_ids.as_ref().map_or(Value::Null, |l| {
                Value::Array(l.iter().map(tokens).collect())
            }),
        );
    } else {
        m.insert("cache_salt".into(), json!(s.cache_salt));
    }
    m.insert("session_id".into(), json!(s.session_id));
    m
}

fn removed(r: &BlockRemoved<'_>, engine: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("BlockRemoved"));
    m.insert("block_hashes".into(), hashes(&r.block_hashes));
    if engine != "trtllm" {
        m.insert("medium".into(), json!(r.medium));
    }
    if engine == "vllm" {
        m.insert("group_idx".into(), json!(r.group_idx));
        m.insert("locality".into(), json!(r.locality));
        m.insert("ownership".into(), json!(r.ownership));
    }
    m
}

fn diff(d: &Option<TrtDiff>) -> Value {
    match d {
        None => Value::Null,
        Some(d) => {
            json!({"type": "event_diff", "new_value": d.new_value, "old_value": d.old_value})
        }
    }
}

/// One event as JSON.
pub(crate) fn event(e: &Event<'_>, engine: &str) -> Value {
    let mut m = Map::new();
    if let Some(env) = &e.envelope {
        m.insert("event_id".into(), json!(env.event_id));
        m.insert("type".into(), json!(trt_type(&e.kind)));
        m.insert("window_size".into(), json!(env.window_size));
        m.insert("attention_dp_rank".into(), json!(env.attention_dp_rank));
    }
    let body = match &e.kind {
        EventKind::BlockStored(s) => stored(s, engine),
        EventKind::BlockRemoved(r) => removed(r, engine),
        EventKind::AllBlocksCleared => {
            let mut m = Map::new();
            m.insert("type".into(), json!("AllBlocksCleared"));
            m
        }
        EventKind::Created(c) => {
            let mut m = Map::new();
            m.insert(
                "num_blocks_per_cache_level".into(),
                json!(c.num_blocks_per_cache_level),
            );
            m
        }
        EventKind::Stored(s) => {
            let mut m = Map::new();
            m.insert("parent_hash".into(), json!(s.parent_hash));
            let blocks = s
                .blocks
                .iter()
                .map(|b| {
                    json!({
                        "block_hash": b.block_hash,
                        "tokens": b.tokens.iter().map(|t| json!({
                            "token_id": t.token_id,
                            "token_extra_id": t.token_extra_id,
                        })).collect::<Vec<_>>(),
                        "cache_salt": b.cache_salt,
                        "cache_level": b.cache_level,
                        "priority": b.priority,
                        "mm_keys": b.mm_keys.iter().map(|k| json!({
                            "hash": k.hash,
                            "start_offset": k.start_offset,
                        })).collect::<Vec<_>>(),
                        "lora_id": b.lora_id,
                    })
                })
                .collect();
            m.insert("blocks".into(), Value::Array(blocks));
            m
        }
        EventKind::Updated(u) => {
            let mut m = Map::new();
            m.insert("block_hash".into(), json!(u.block_hash));
            m.insert("cache_level".into(), diff(&u.cache_level));
            m.insert("priority".into(), diff(&u.priority));
            m
        }
    };
    for (k, v) in body {
        if e.envelope.is_some() && k == "type" {
            continue;
        }
        m.insert(k, v);
    }
    Value::Object(m)
}

fn trt_type(k: &EventKind<'_>) -> &'static str {
    match k {
        EventKind::BlockRemoved(_) => "removed",
        other => other.type_name(),
    }
}

impl EventBatch<'_> {
    /// The batch as JSON, named like the vectors' `decoded` forms (see the module docs).
    pub fn to_json(&self) -> Value {
        let engine = self.format.engine();
        let mut m = Map::new();
        m.insert("format".into(), json!(self.format.as_str()));
        if let Some(t) = self.topic {
            m.insert("topic".into(), json!(t));
        }
        if let Some(s) = self.seq {
            m.insert("seq".into(), json!(s));
        }
        if engine != "trtllm" {
            m.insert("ts".into(), json!(self.ts));
            let rank_key = if engine == "sglang" {
                "attn_dp_rank"
            } else {
                "data_parallel_rank"
            };
            m.insert(rank_key.into(), json!(self.rank));
        }
        m.insert(
            "events".into(),
            Value::Array(self.events.iter().map(|e| event(e, engine)).collect()),
        );
        Value::Object(m)
    }
}
