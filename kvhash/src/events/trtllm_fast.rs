//! The fast path for TensorRT-LLM `/kv_cache_events` bodies: one typed serde pass straight into
//! the event model, without building a `serde_json::Value` tree (and its map per token).
//!
//! It accepts a subset of what the checked decoder ([`super::trtllm`]) accepts and, on that
//! subset, gives exactly its result (the twin test below and the `events_trtllm` fuzz target
//! compare the two). Anything else — a type error anywhere, a duplicate key, an unknown event
//! type, a missing required field, a limit reached — returns `None`, and the caller runs the
//! checked decoder, which reports the error with its location. Unknown keys are ignored by
//! both.

use super::model::{
    BlockHash, BlockRemoved, Event, EventBatch, EventKind, TrtCreated, TrtDiff, TrtEnvelope,
    TrtMmKey, TrtStored, TrtStoredBlock, TrtToken, TrtUpdated,
};
use super::{EventFormat, Limits};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;

/// A struct read from a JSON object only: serde's derived structs also accept a JSON array of
/// their fields in order, which the checked decoder (rightly) refuses.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(PhantomData)).map(Obj)
    }
}

/// A block hash: an unsigned integer, or a negative (signed) spelling read as its 64 bits.
struct Hash(u64);

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Hash;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer hash")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Hash, E> {
                Ok(Hash(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Hash, E> {
                Ok(Hash(v as u64))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
struct Envelope {
    event_id: u64,
    #[serde(default)]
    window_size: Option<u64>,
    #[serde(default)]
    attention_dp_rank: Option<u32>,
    data: Obj<Data>,
}

/// Every field any event type has; which are required depends on `type`.
#[derive(Deserialize)]
struct Data {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    num_blocks_per_cache_level: Option<Vec<u64>>,
    #[serde(default)]
    parent_hash: Option<Hash>,
    #[serde(default)]
    blocks: Option<Vec<Obj<Block>>>,
    #[serde(default)]
    block_hashes: Option<Vec<Hash>>,
    #[serde(default)]
    block_hash: Option<Hash>,
    #[serde(default)]
    cache_level: Option<Obj<Diff>>,
    #[serde(default)]
    priority: Option<Obj<Diff>>,
}

#[derive(Deserialize)]
struct Diff {
    new_value: i64,
    old_value: i64,
}

#[derive(Deserialize)]
struct Block {
    block_hash: Hash,
    tokens: Vec<Tok>,
    #[serde(default)]
    cache_salt: Option<String>,
    #[serde(default)]
    cache_level: Option<i64>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    mm_keys: Option<Vec<Obj<MmKey>>>,
    #[serde(default)]
    lora_id: Option<i64>,
}

#[derive(Deserialize)]
struct Token {
    token_id: i64,
    #[serde(default)]
    token_extra_id: Option<u64>,
}

/// A token read straight into the model's form (one vector per block, no second pass).
struct Tok(TrtToken);

impl<'de> Deserialize<'de> for Tok {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Obj(t) = Obj::<Token>::deserialize(d)?;
        let token_id = token_id(t.token_id)
            .ok_or_else(|| de::Error::custom("token id outside -2^31..2^32-1"))?;
        Ok(Tok(TrtToken {
            token_id,
            token_extra_id: t.token_extra_id.unwrap_or(0),
        }))
    }
}

#[derive(Deserialize)]
struct MmKey {
    hash: String,
    start_offset: u64,
}

/// The token id as the checked decoder reads it: int32, or an unsigned spelling up to
/// 2^32-1 reinterpreted as the same 32 bits.
fn token_id(i: i64) -> Option<i32> {
    i32::try_from(i)
        .ok()
        .or_else(|| u32::try_from(i).ok().map(|u| u as i32))
}

/// Decodes `body` when it is in the fast path's subset; `None` sends it to the checked
/// decoder.
pub(crate) fn decode_body(
    format: EventFormat,
    body: &[u8],
    limits: &Limits,
) -> Option<EventBatch<'static>> {
    if body.len() > limits.max_input_bytes {
        return None;
    }
    let list: Vec<Obj<Envelope>> = serde_json::from_slice(body).ok()?;
    // Duplicate keys (also of keys this path ignores) are refused by the checked decoder.
    super::json_dups::check(body, limits).ok()?;
    let max = limits.max_elements;
    if list.len() > max || list.len() > limits.max_events {
        return None;
    }
    let mut events = Vec::with_capacity(list.len());
    for Obj(env) in list {
        let Obj(d) = env.data;
        let kind = match d.ty.as_str() {
            "created" => {
                let levels = d.num_blocks_per_cache_level?;
                if levels.len() > max {
                    return None;
                }
                EventKind::Created(TrtCreated {
                    num_blocks_per_cache_level: levels,
                })
            }
            "stored" => {
                let raw = d.blocks?;
                if raw.len() > max {
                    return None;
                }
                let mut blocks = Vec::with_capacity(raw.len());
                for Obj(b) in raw {
                    if b.tokens.len() > max || b.mm_keys.as_ref().is_some_and(|m| m.len() > max) {
                        return None;
                    }
                    let tokens: Vec<TrtToken> = b.tokens.into_iter().map(|Tok(t)| t).collect();
                    blocks.push(TrtStoredBlock {
                        block_hash: b.block_hash.0,
                        tokens,
                        cache_salt: b.cache_salt,
                        cache_level: b.cache_level,
                        priority: b.priority,
                        mm_keys: b
                            .mm_keys
                            .unwrap_or_default()
                            .into_iter()
                            .map(|Obj(k)| TrtMmKey {
                                hash: k.hash,
                                start_offset: k.start_offset,
                            })
                            .collect(),
                        lora_id: b.lora_id,
                    });
                }
                EventKind::Stored(TrtStored {
                    parent_hash: d.parent_hash.map(|h| h.0),
                    blocks,
                })
            }
            "removed" => {
                let hs = d.block_hashes?;
                if hs.len() > max {
                    return None;
                }
                EventKind::BlockRemoved(BlockRemoved {
                    block_hashes: hs.into_iter().map(|h| BlockHash::U64(h.0)).collect(),
                    medium: None,
                    group_idx: None,
                    locality: None,
                    ownership: None,
                })
            }
            "updated" => EventKind::Updated(TrtUpdated {
                block_hash: d.block_hash?.0,
                cache_level: d.cache_level.map(|Obj(x)| TrtDiff {
                    new_value: x.new_value,
                    old_value: x.old_value,
                }),
                priority: d.priority.map(|Obj(x)| TrtDiff {
                    new_value: x.new_value,
                    old_value: x.old_value,
                }),
            }),
            _ => return None,
        };
        events.push(Event {
            envelope: Some(TrtEnvelope {
                event_id: env.event_id,
                window_size: env.window_size,
                attention_dp_rank: env.attention_dp_rank,
            }),
            kind,
        });
    }
    Some(EventBatch {
        format,
        topic: None,
        seq: None,
        ts: None,
        rank: None,
        events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::trtllm::decode_body_checked;
    use proptest::prelude::*;

    const FORMAT: EventFormat = EventFormat::TrtllmKvHttpPreviewV1;

    fn bodies() -> Vec<String> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/vectors/trtllm/kv_events.json"
        );
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("vector")).expect("json");
        let out: Vec<String> = doc["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .filter(|c| c["decoded"].is_array())
            .map(|c| c["response_body"].as_str().expect("body").to_string())
            .collect();
        assert!(out.len() >= 7);
        out
    }

    /// The twin property: whenever the fast path decodes, the checked decoder gives the same.
    fn twin(body: &[u8], limits: &Limits) -> Option<EventBatch<'static>> {
        let fast = decode_body(FORMAT, body, limits);
        if let Some(b) = &fast {
            assert_eq!(
                decode_body_checked(FORMAT, body, limits).as_ref(),
                Ok(b),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        fast
    }

    #[test]
    fn every_engine_body_takes_the_fast_path_and_agrees() {
        for b in bodies() {
            assert!(twin(b.as_bytes(), &Limits::default()).is_some(), "{b}");
        }
    }

    #[test]
    fn shapes_outside_the_subset_go_to_the_checked_decoder() {
        let l = Limits::default();
        let stored = |blocks: &str| {
            format!(
                r#"[{{"event_id":1,"data":{{"type":"stored","parent_hash":null,"blocks":{blocks}}}}}]"#
            )
        };
        for body in [
            // A struct written as an array of its fields (serde would take it).
            r#"[{"event_id":1,"data":["removed",null,null,null,[5]]}]"#.to_string(),
            stored(r#"[{"block_hash":7,"tokens":[[1,0]]}]"#),
            // Duplicate keys (the checked decoder refuses them, naming the path).
            r#"[{"event_id":1,"event_id":2,"data":{"type":"removed","block_hashes":[5]}}]"#
                .to_string(),
            // Unknown type, missing required field, float hash.
            r#"[{"event_id":1,"data":{"type":"moved"}}]"#.to_string(),
            r#"[{"event_id":1,"data":{"type":"removed"}}]"#.to_string(),
            r#"[{"event_id":1,"data":{"type":"removed","block_hashes":[1.0]}}]"#.to_string(),
            // A token id outside -2^31..2^32-1.
            stored(r#"[{"block_hash":7,"tokens":[{"token_id":4294967296}]}]"#),
        ] {
            assert!(decode_body(FORMAT, body.as_bytes(), &l).is_none(), "{body}");
        }
        let dup = br#"[{"event_id":1,"event_id":2,"data":{"type":"removed","block_hashes":[5]}}]"#;
        match decode_body_checked(FORMAT, dup, &l) {
            Err(crate::Error::EventDuplicateField { at, field }) => {
                assert_eq!((at.path.as_str(), field.as_str()), ("$[0]", "event_id"));
            }
            other => panic!("duplicate key accepted: {other:?}"),
        }
        // A duplicate of a key both paths ignore is refused too.
        let ignored =
            br#"[{"event_id":1,"x":1,"x":2,"data":{"type":"removed","block_hashes":[5]}}]"#;
        assert!(decode_body(FORMAT, ignored, &l).is_none());
        assert!(decode_body_checked(FORMAT, ignored, &l).is_err());
        // Limits are the checked decoder's: one element over and the fast path steps aside.
        let tight = Limits {
            max_elements: 3,
            ..Limits::default()
        };
        let four = stored(
            r#"[{"block_hash":7,"tokens":[{"token_id":1},{"token_id":2},{"token_id":3},{"token_id":4}]}]"#,
        );
        assert!(decode_body(FORMAT, four.as_bytes(), &tight).is_none());
        assert!(decode_body_checked(FORMAT, four.as_bytes(), &tight).is_err());
        // Signed and unsigned spellings agree with the checked decoder.
        let spellings = stored(
            r#"[{"block_hash":-1,"tokens":[{"token_id":-1,"token_extra_id":null},{"token_id":4294967295}],"mm_keys":null,"lora_id":3}]"#,
        );
        let b = twin(spellings.as_bytes(), &l).expect("in the subset");
        let EventKind::Stored(s) = &b.events[0].kind else {
            panic!("stored")
        };
        assert_eq!(s.blocks[0].block_hash, u64::MAX);
        assert_eq!(s.blocks[0].tokens[1].token_id, -1);
    }

    /// JSON-ish edits: a byte replaced by one that changes the structure or a value.
    fn edit() -> impl Strategy<Value = (prop::sample::Index, u8, bool)> {
        (
            any::<prop::sample::Index>(),
            prop::sample::select(b"[]{},:\"0129-.enulltrf x\\".to_vec()),
            any::<bool>(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn fast_path_agrees_with_the_checked_decoder_on_edited_bodies(
            pick in any::<prop::sample::Index>(),
            edits in prop::collection::vec(edit(), 1..4),
        ) {
            let bodies = bodies();
            let mut body = bodies[pick.index(bodies.len())].clone().into_bytes();
            for (at, byte, insert) in edits {
                let i = at.index(body.len());
                if insert {
                    body.insert(i, byte);
                } else {
                    body[i] = byte;
                }
            }
            twin(&body, &Limits::default());
        }
    }
}
