//! vLLM events (maps since 0.24, tagged arrays before) and the tagged-map events of
//! SGLang 0.5.20+, which share the map layout.
//!
//! Map events: `{"type": "BlockStored" | "BlockRemoved" | "AllBlocksCleared", field: value…}`
//! (docs/contracts/vllm.md §7, docs/contracts/sglang.md §9). Which fields an event may carry, and which must be present,
//! is the [`EventSchema`] of the engine release: keys may come in any order; a key the
//! schema does not list is refused (a release schema) or skipped (a family schema); a
//! repeated key is an error. Nil optional fields decode as `None`.

use super::fields::{
    bad_len, opt_i64, opt_name, opt_str, opt_u32, opt_u64, read_hashes, read_opt_hash, read_tag,
    HashForm,
};
use super::model::{
    read_token_ids, BlockHash, BlockRemoved, BlockStored, EventKind, ExtraKey, TokenIds, TokenShape,
};
use super::msgpack::Reader;
use super::schema::{EventSchema, Field, FieldSpec, UnknownFields};
use super::Location;
use crate::Error;

/// `extra_keys`: one entry per block, nil or an array of untagged keys.
pub(crate) fn read_extra_keys<'a>(
    r: &mut Reader<'a>,
) -> Result<Option<Vec<Option<Vec<ExtraKey<'a>>>>>, Error> {
    if r.nil()? {
        return Ok(None);
    }
    let n = r.array("an array of per-block extra keys")?;
    let mut blocks = r.vec(n)?;
    for i in 0..n {
        let block = read_block_keys(r).map_err(|e| e.in_field(&format!("[{i}]")))?;
        blocks.push(block);
    }
    Ok(Some(blocks))
}

fn read_block_keys<'a>(r: &mut Reader<'a>) -> Result<Option<Vec<ExtraKey<'a>>>, Error> {
    if r.nil()? {
        return Ok(None);
    }
    let n = r.array("nil or an array of extra keys")?;
    let mut keys = r.vec(n)?;
    for i in 0..n {
        let key = read_key(r).map_err(|e| e.in_field(&format!("[{i}]")))?;
        keys.push(key);
    }
    Ok(Some(keys))
}

fn read_key<'a>(r: &mut Reader<'a>) -> Result<ExtraKey<'a>, Error> {
    let at = r.pos();
    match r.peek("an extra key")? {
        0xa0..=0xbf | 0xd9..=0xdb => Ok(ExtraKey::Text(r.str("a text key")?)),
        0xc4..=0xc6 => Ok(ExtraKey::Bytes(r.bin("a byte-string key")?)),
        0x90..=0x9f | 0xdc | 0xdd => {
            let n = r.array("a multimodal key")?;
            if n != 2 {
                return Err(Error::EventBadLength {
                    at: Location::offset(at),
                    what: "multimodal key",
                    expected: "2 ([identifier, offset])",
                    found: n as u64,
                });
            }
            let identifier = r.str("the multimodal identifier")?;
            let offset = r.i64("the multimodal offset")?;
            Ok(ExtraKey::Mm { identifier, offset })
        }
        b => Err(Error::EventUnexpectedType {
            at: Location::offset(at),
            expected: "a string, binary or [identifier, offset] key",
            found: super::msgpack::family(b),
        }),
    }
}

/// `lookahead_token_ids`: nil, or one flat id list per stored block.
fn read_lookahead<'a>(r: &mut Reader<'a>) -> Result<Option<Vec<TokenIds<'a>>>, Error> {
    if r.nil()? {
        return Ok(None);
    }
    let n = r.array("an array of per-block look-ahead id lists")?;
    let mut out = r.vec(n)?;
    for i in 0..n {
        let at = r.pos();
        let ids = read_token_ids(r).map_err(|e| e.in_field(&format!("[{i}]")))?;
        if ids.shape() != TokenShape::Flat {
            return Err(Error::EventInvalidValue {
                at: r.at(at),
                reason: "look-ahead ids must be flat integer lists".to_string(),
            });
        }
        out.push(ids);
    }
    Ok(Some(out))
}

/// Collected fields of one event, each set at most once.
#[derive(Default)]
struct Fields<'a> {
    ty: Option<&'a str>,
    block_hashes: Option<Vec<BlockHash<'a>>>,
    parent: Option<Option<BlockHash<'a>>>,
    token_ids: Option<TokenIds<'a>>,
    block_size: Option<u32>,
    lora_id: Option<Option<i64>>,
    medium: Option<Option<&'a str>>,
    lora_name: Option<Option<&'a str>>,
    extra_keys: Option<Option<Vec<Option<Vec<ExtraKey<'a>>>>>>,
    group_idx: Option<Option<u32>>,
    spec_kind: Option<Option<&'a str>>,
    sliding_window: Option<Option<u64>>,
    locality: Option<Option<&'a str>>,
    ownership: Option<Option<&'a str>>,
    session_id: Option<Option<&'a str>>,
    lookahead: Option<Option<Vec<TokenIds<'a>>>>,
    cache_salt: Option<Option<&'a str>>,
}

fn set<T>(slot: &mut Option<T>, v: T, key: &str, at: usize) -> Result<(), Error> {
    if slot.is_some() {
        return Err(Error::EventDuplicateField {
            at: Location::offset(at),
            field: key.to_string(),
        });
    }
    *slot = Some(v);
    Ok(())
}

impl<'a> Fields<'a> {
    /// Reads the value of `field` (whose key or array slot starts at `at`).
    fn read(
        &mut self,
        r: &mut Reader<'a>,
        form: HashForm,
        field: Field,
        at: usize,
    ) -> Result<(), Error> {
        let k = field.name();
        match field {
            Field::BlockHashes => {
                read_hashes(r, form).and_then(|v| set(&mut self.block_hashes, v, k, at))
            }
            Field::ParentBlockHash => {
                read_opt_hash(r, form).and_then(|v| set(&mut self.parent, v, k, at))
            }
            Field::TokenIds => read_token_ids(r).and_then(|v| set(&mut self.token_ids, v, k, at)),
            Field::BlockSize => r
                .u32("an integer block size")
                .and_then(|v| set(&mut self.block_size, v, k, at)),
            Field::LoraId => opt_i64(r).and_then(|v| set(&mut self.lora_id, v, k, at)),
            Field::Medium => opt_name(r).and_then(|v| set(&mut self.medium, v, k, at)),
            Field::LoraName => opt_str(r).and_then(|v| set(&mut self.lora_name, v, k, at)),
            Field::ExtraKeys => {
                read_extra_keys(r).and_then(|v| set(&mut self.extra_keys, v, k, at))
            }
            Field::GroupIdx => opt_u32(r).and_then(|v| set(&mut self.group_idx, v, k, at)),
            Field::KvCacheSpecKind => opt_name(r).and_then(|v| set(&mut self.spec_kind, v, k, at)),
            Field::KvCacheSpecSlidingWindow => {
                opt_u64(r).and_then(|v| set(&mut self.sliding_window, v, k, at))
            }
            Field::Locality => opt_str(r).and_then(|v| set(&mut self.locality, v, k, at)),
            Field::Ownership => opt_str(r).and_then(|v| set(&mut self.ownership, v, k, at)),
            Field::SessionId => opt_str(r).and_then(|v| set(&mut self.session_id, v, k, at)),
            Field::LookaheadTokenIds => {
                read_lookahead(r).and_then(|v| set(&mut self.lookahead, v, k, at))
            }
            Field::CacheSalt => opt_str(r).and_then(|v| set(&mut self.cache_salt, v, k, at)),
        }
    }

    fn has(&self, field: Field) -> bool {
        match field {
            Field::BlockHashes => self.block_hashes.is_some(),
            Field::ParentBlockHash => self.parent.is_some(),
            Field::TokenIds => self.token_ids.is_some(),
            Field::BlockSize => self.block_size.is_some(),
            Field::LoraId => self.lora_id.is_some(),
            Field::Medium => self.medium.is_some(),
            Field::LoraName => self.lora_name.is_some(),
            Field::ExtraKeys => self.extra_keys.is_some(),
            Field::GroupIdx => self.group_idx.is_some(),
            Field::KvCacheSpecKind => self.spec_kind.is_some(),
            Field::KvCacheSpecSlidingWindow => self.sliding_window.is_some(),
            Field::Locality => self.locality.is_some(),
            Field::Ownership => self.ownership.is_some(),
            Field::SessionId => self.session_id.is_some(),
            Field::LookaheadTokenIds => self.lookahead.is_some(),
            Field::CacheSalt => self.cache_salt.is_some(),
        }
    }

    /// The event, once every field is read: required fields of the schema present.
    fn finish(self, schema: &EventSchema, at: usize, tag: &str) -> Result<EventKind<'a>, Error> {
        let missing = |field: Field| Error::EventMissingField {
            at: Location::offset(at),
            field: field.name(),
        };
        match tag {
            "BlockStored" => {
                if let Some(f) = schema.first_missing(true, |f| self.has(f)) {
                    return Err(missing(f));
                }
                Ok(EventKind::BlockStored(BlockStored {
                    block_hashes: self
                        .block_hashes
                        .ok_or_else(|| missing(Field::BlockHashes))?,
                    parent_block_hash: self
                        .parent
                        .ok_or_else(|| missing(Field::ParentBlockHash))?,
                    token_ids: self.token_ids.ok_or_else(|| missing(Field::TokenIds))?,
                    block_size: self.block_size.ok_or_else(|| missing(Field::BlockSize))?,
                    lora_id: self.lora_id.flatten(),
                    medium: self.medium.flatten(),
                    lora_name: self.lora_name.flatten(),
                    extra_keys: self.extra_keys.flatten(),
                    group_idx: self.group_idx.flatten(),
                    kv_cache_spec_kind: self.spec_kind.flatten(),
                    kv_cache_spec_sliding_window: self.sliding_window.flatten(),
                    locality: self.locality.flatten(),
                    ownership: self.ownership.flatten(),
                    session_id: self.session_id.flatten(),
                    lookahead_token_ids: self.lookahead.flatten(),
                    cache_salt: self.cache_salt.flatten(),
                }))
            }
            "BlockRemoved" => {
                if let Some(f) = schema.first_missing(false, |f| self.has(f)) {
                    return Err(missing(f));
                }
                Ok(EventKind::BlockRemoved(BlockRemoved {
                    block_hashes: self
                        .block_hashes
                        .ok_or_else(|| missing(Field::BlockHashes))?,
                    medium: self.medium.flatten(),
                    group_idx: self.group_idx.flatten(),
                    locality: self.locality.flatten(),
                    ownership: self.ownership.flatten(),
                }))
            }
            "AllBlocksCleared" => Ok(EventKind::AllBlocksCleared),
            other => Err(Error::EventUnknownType {
                at: Location::offset(at),
                name: other.to_string(),
            }),
        }
    }
}

/// Decodes one map event (vLLM 0.24+, SGLang 0.5.20+) under `schema`: a key the schema
/// lists for the event's type is read; any other key is refused (a release schema) or
/// skipped (a family schema).
pub(crate) fn decode_map_event<'a>(
    r: &mut Reader<'a>,
    form: HashForm,
    schema: &EventSchema,
) -> Result<EventKind<'a>, Error> {
    let map_at = r.pos();
    let n = r.map("an event map")?;
    let mut f = Fields::default();
    // Keys read before `type` (msgspec writes it first; other writers may not).
    let mut deferred: Vec<(Field, usize)> = Vec::new();
    let limits_depth = 3; // batch array > events array > event map
    for _ in 0..n {
        let at = r.pos();
        let key = r.str("a field name")?;
        if key == "type" {
            r.str("the event type")
                .and_then(|v| set(&mut f.ty, v, key, at))
                .map_err(|e| e.in_field(key))?;
            continue;
        }
        let stored = f.ty.map(|t| t == "BlockStored");
        let allowed = Field::from_name(key).filter(|fl| match stored {
            Some(st) => schema.allows(st, *fl),
            None => schema.allows(true, *fl) || schema.allows(false, *fl),
        });
        match (allowed, schema.unknown_fields()) {
            (Some(field), _) => {
                f.read(r, form, field, at).map_err(|e| e.in_field(key))?;
                if stored.is_none() {
                    deferred.push((field, at));
                }
            }
            (None, UnknownFields::Skip) => r.skip(limits_depth).map_err(|e| e.in_field(key))?,
            (None, UnknownFields::Refuse) => {
                return Err(Error::EventUnknownField {
                    at: Location::offset(at),
                    field: key.to_string(),
                })
            }
        }
    }
    let ty = f.ty.ok_or(Error::EventMissingField {
        at: Location::offset(map_at),
        field: "type",
    })?;
    if schema.unknown_fields() == UnknownFields::Refuse {
        let st = ty == "BlockStored";
        if let Some((field, at)) = deferred.iter().find(|(fl, _)| !schema.allows(st, *fl)) {
            return Err(Error::EventUnknownField {
                at: Location::offset(*at),
                field: field.name().to_string(),
            });
        }
    }
    f.finish(schema, map_at, ty)
}

/// Decodes one vLLM 0.17–0.23 tagged-array event under `schema`: the tag, then the
/// schema's fields in order (`["BlockStored", hashes, parent, token_ids, block_size, lora_id,
/// medium, lora_name, extra_keys, group_idx?, …]`); the array may end early only before a
/// trailing run of optional fields. `["AllBlocksCleared"]` has no fields.
pub(crate) fn decode_array_event<'a>(
    r: &mut Reader<'a>,
    schema: &EventSchema,
) -> Result<EventKind<'a>, Error> {
    let (at, n, tag) = read_tag(r)?;
    let (list, what): (&[FieldSpec], &'static str) = match tag {
        "BlockStored" => (schema.block_stored(), "BlockStored array"),
        "BlockRemoved" => (schema.block_removed(), "BlockRemoved array"),
        "AllBlocksCleared" => {
            if n != 1 {
                return Err(bad_len(at, "AllBlocksCleared array", "1", n));
            }
            return Ok(EventKind::AllBlocksCleared);
        }
        other => {
            return Err(Error::EventUnknownType {
                at: Location::offset(at),
                name: other.to_string(),
            })
        }
    };
    let fields = n - 1;
    let min = list.iter().rposition(|s| !s.optional).map_or(0, |i| i + 1);
    if fields < min || fields > list.len() {
        return Err(Error::EventBadLength {
            at: Location::offset(at),
            what,
            expected: if min == list.len() {
                "the release's field count plus the tag"
            } else {
                "between the release's required and total field counts plus the tag"
            },
            found: n as u64,
        });
    }
    let mut f = Fields::default();
    for spec in list.iter().take(fields) {
        let fat = r.pos();
        f.read(r, HashForm::U64OrBin, spec.field, fat)
            .map_err(|e| e.in_field(spec.field.name()))?;
    }
    f.finish(schema, at, tag)
}
