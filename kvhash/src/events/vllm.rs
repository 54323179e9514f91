//! vLLM events (maps since 0.24, tagged arrays before) and the tagged-map events of
//! SGLang 0.5.20+, which share the map layout.
//!
//! Map events: `{"type": "BlockStored" | "BlockRemoved" | "AllBlocksCleared", field: value…}`
//! (vllm.md §7, sglang.md §9). Keys may come in any order; unknown keys are skipped (engines
//! add optional fields compatibly); a repeated key is an error. `BlockStored` requires
//! `block_hashes`, `parent_block_hash`, `token_ids` and `block_size`; `BlockRemoved` requires
//! `block_hashes`. Nil optional fields decode as `None`.

use super::model::{read_token_ids, BlockHash, BlockRemoved, BlockStored, EventKind, ExtraKey};
use super::msgpack::Reader;
use super::Location;
use crate::Error;

/// Whose map layout and hash form a map event follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// vLLM: hashes are uint64 (int mode) or bin (bytes mode).
    Vllm,
    /// SGLang: hashes are signed int64.
    Sglang,
}

/// Reads one block hash in the engine's form.
pub(crate) fn read_hash<'a>(r: &mut Reader<'a>, engine: Engine) -> Result<BlockHash<'a>, Error> {
    match engine {
        Engine::Vllm => {
            if matches!(r.peek("a block hash")?, 0xc4..=0xc6) {
                Ok(BlockHash::Bytes(r.bin("a block hash")?))
            } else {
                Ok(BlockHash::U64(r.u64("a block hash (uint64 or bin)")?))
            }
        }
        Engine::Sglang => Ok(BlockHash::I64(r.i64("a block hash (int64)")?)),
    }
}

/// Reads an array of block hashes.
pub(crate) fn read_hashes<'a>(
    r: &mut Reader<'a>,
    engine: Engine,
) -> Result<Vec<BlockHash<'a>>, Error> {
    let n = r.array("an array of block hashes")?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(read_hash(r, engine).map_err(|e| e.in_field(&format!("[{i}]")))?);
    }
    Ok(out)
}

/// Reads nil or a hash.
pub(crate) fn read_opt_hash<'a>(
    r: &mut Reader<'a>,
    engine: Engine,
) -> Result<Option<BlockHash<'a>>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        read_hash(r, engine).map(Some)
    }
}

pub(crate) fn opt_str<'a>(r: &mut Reader<'a>) -> Result<Option<&'a str>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.str("a string or nil").map(Some)
    }
}

pub(crate) fn opt_i64(r: &mut Reader<'_>) -> Result<Option<i64>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.i64("an integer or nil").map(Some)
    }
}

fn opt_u32(r: &mut Reader<'_>) -> Result<Option<u32>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.u32("an integer or nil").map(Some)
    }
}

fn opt_u64(r: &mut Reader<'_>) -> Result<Option<u64>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.u64("an integer or nil").map(Some)
    }
}

/// `extra_keys`: one entry per block, nil or an array of untagged keys.
pub(crate) fn read_extra_keys<'a>(
    r: &mut Reader<'a>,
) -> Result<Option<Vec<Option<Vec<ExtraKey<'a>>>>>, Error> {
    if r.nil()? {
        return Ok(None);
    }
    let n = r.array("an array of per-block extra keys")?;
    let mut blocks = Vec::with_capacity(n);
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
    let mut keys = Vec::with_capacity(n);
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

/// Collected map fields, each set at most once.
#[derive(Default)]
struct Fields<'a> {
    ty: Option<&'a str>,
    block_hashes: Option<Vec<BlockHash<'a>>>,
    parent: Option<Option<BlockHash<'a>>>,
    token_ids: Option<super::TokenIds<'a>>,
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
    lookahead: Option<Option<super::TokenIds<'a>>>,
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

/// Decodes one map event (vLLM 0.24+, SGLang 0.5.20+).
pub(crate) fn decode_map_event<'a>(
    r: &mut Reader<'a>,
    engine: Engine,
) -> Result<EventKind<'a>, Error> {
    let map_at = r.pos();
    let n = r.map("an event map")?;
    let mut f = Fields::default();
    let limits_depth = 3; // batch array > events array > event map
    for _ in 0..n {
        let at = r.pos();
        let key = r.str("a field name")?;
        let res = match (key, engine) {
            ("type", _) => r
                .str("the event type")
                .and_then(|v| set(&mut f.ty, v, key, at)),
            ("block_hashes", _) => {
                read_hashes(r, engine).and_then(|v| set(&mut f.block_hashes, v, key, at))
            }
            ("parent_block_hash", _) => {
                read_opt_hash(r, engine).and_then(|v| set(&mut f.parent, v, key, at))
            }
            ("token_ids", _) => read_token_ids(r).and_then(|v| set(&mut f.token_ids, v, key, at)),
            ("block_size", _) => r
                .u32("an integer block size")
                .and_then(|v| set(&mut f.block_size, v, key, at)),
            ("lora_id", _) => opt_i64(r).and_then(|v| set(&mut f.lora_id, v, key, at)),
            ("medium", _) => opt_str(r).and_then(|v| set(&mut f.medium, v, key, at)),
            ("lora_name", _) => opt_str(r).and_then(|v| set(&mut f.lora_name, v, key, at)),
            ("session_id", _) => opt_str(r).and_then(|v| set(&mut f.session_id, v, key, at)),
            ("extra_keys", Engine::Vllm) => {
                read_extra_keys(r).and_then(|v| set(&mut f.extra_keys, v, key, at))
            }
            ("group_idx", Engine::Vllm) => {
                opt_u32(r).and_then(|v| set(&mut f.group_idx, v, key, at))
            }
            ("kv_cache_spec_kind", Engine::Vllm) => {
                opt_str(r).and_then(|v| set(&mut f.spec_kind, v, key, at))
            }
            ("kv_cache_spec_sliding_window", Engine::Vllm) => {
                opt_u64(r).and_then(|v| set(&mut f.sliding_window, v, key, at))
            }
            ("locality", Engine::Vllm) => opt_str(r).and_then(|v| set(&mut f.locality, v, key, at)),
            ("ownership", Engine::Vllm) => {
                opt_str(r).and_then(|v| set(&mut f.ownership, v, key, at))
            }
            ("lookahead_token_ids", Engine::Vllm) => {
                if r.nil()? {
                    set(&mut f.lookahead, None, key, at)
                } else {
                    read_token_ids(r).and_then(|v| set(&mut f.lookahead, Some(v), key, at))
                }
            }
            ("cache_salt", Engine::Sglang) => {
                opt_str(r).and_then(|v| set(&mut f.cache_salt, v, key, at))
            }
            _ => r.skip(limits_depth),
        };
        res.map_err(|e| e.in_field(key))?;
    }
    let missing = |field: &'static str| Error::EventMissingField {
        at: Location::offset(map_at),
        field,
    };
    let ty = f.ty.ok_or_else(|| missing("type"))?;
    match ty {
        "BlockStored" => Ok(EventKind::BlockStored(BlockStored {
            block_hashes: f.block_hashes.ok_or_else(|| missing("block_hashes"))?,
            parent_block_hash: f.parent.ok_or_else(|| missing("parent_block_hash"))?,
            token_ids: f.token_ids.ok_or_else(|| missing("token_ids"))?,
            block_size: f.block_size.ok_or_else(|| missing("block_size"))?,
            lora_id: f.lora_id.flatten(),
            medium: f.medium.flatten(),
            lora_name: f.lora_name.flatten(),
            extra_keys: f.extra_keys.flatten(),
            group_idx: f.group_idx.flatten(),
            kv_cache_spec_kind: f.spec_kind.flatten(),
            kv_cache_spec_sliding_window: f.sliding_window.flatten(),
            locality: f.locality.flatten(),
            ownership: f.ownership.flatten(),
            session_id: f.session_id.flatten(),
            lookahead_token_ids: f.lookahead.flatten(),
            cache_salt: f.cache_salt.flatten(),
        })),
        "BlockRemoved" => Ok(EventKind::BlockRemoved(BlockRemoved {
            block_hashes: f.block_hashes.ok_or_else(|| missing("block_hashes"))?,
            medium: f.medium.flatten(),
            group_idx: f.group_idx.flatten(),
            locality: f.locality.flatten(),
            ownership: f.ownership.flatten(),
        })),
        "AllBlocksCleared" => Ok(EventKind::AllBlocksCleared),
        other => Err(Error::EventUnknownType {
            at: Location::offset(map_at),
            name: other.to_string(),
        }),
    }
}

/// Reads the tag of a tagged-array event and returns it with the array length.
pub(crate) fn read_tag<'a>(r: &mut Reader<'a>) -> Result<(usize, usize, &'a str), Error> {
    let at = r.pos();
    let n = r.array("a tagged event array")?;
    if n == 0 {
        return Err(Error::EventBadLength {
            at: Location::offset(at),
            what: "event array",
            expected: "at least 1 (the tag)",
            found: 0,
        });
    }
    let tag = r.str("the event tag").map_err(|e| e.in_field("[0]"))?;
    Ok((at, n, tag))
}

pub(crate) fn bad_len(at: usize, what: &'static str, expected: &'static str, n: usize) -> Error {
    Error::EventBadLength {
        at: Location::offset(at),
        what,
        expected,
        found: n as u64,
    }
}

/// Decodes one vLLM 0.17–0.23 tagged-array event:
/// `["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium, lora_name?,
/// extra_keys?]`, `["BlockRemoved", hashes, medium?]`, `["AllBlocksCleared"]`.
pub(crate) fn decode_array_event<'a>(r: &mut Reader<'a>) -> Result<EventKind<'a>, Error> {
    let (at, n, tag) = read_tag(r)?;
    match tag {
        "BlockStored" => {
            if !(7..=9).contains(&n) {
                return Err(bad_len(at, "BlockStored array", "7 to 9", n));
            }
            let block_hashes =
                read_hashes(r, Engine::Vllm).map_err(|e| e.in_field("block_hashes"))?;
            let parent_block_hash =
                read_opt_hash(r, Engine::Vllm).map_err(|e| e.in_field("parent_block_hash"))?;
            let token_ids = read_token_ids(r).map_err(|e| e.in_field("token_ids"))?;
            let block_size = r
                .u32("an integer block size")
                .map_err(|e| e.in_field("block_size"))?;
            let lora_id = opt_i64(r).map_err(|e| e.in_field("lora_id"))?;
            let medium = opt_str(r).map_err(|e| e.in_field("medium"))?;
            let lora_name = if n >= 8 {
                opt_str(r).map_err(|e| e.in_field("lora_name"))?
            } else {
                None
            };
            let extra_keys = if n >= 9 {
                read_extra_keys(r).map_err(|e| e.in_field("extra_keys"))?
            } else {
                None
            };
            Ok(EventKind::BlockStored(BlockStored {
                block_hashes,
                parent_block_hash,
                token_ids,
                block_size,
                lora_id,
                medium,
                lora_name,
                extra_keys,
                group_idx: None,
                kv_cache_spec_kind: None,
                kv_cache_spec_sliding_window: None,
                locality: None,
                ownership: None,
                session_id: None,
                lookahead_token_ids: None,
                cache_salt: None,
            }))
        }
        "BlockRemoved" => {
            if !(2..=3).contains(&n) {
                return Err(bad_len(at, "BlockRemoved array", "2 or 3", n));
            }
            let block_hashes =
                read_hashes(r, Engine::Vllm).map_err(|e| e.in_field("block_hashes"))?;
            let medium = if n == 3 {
                opt_str(r).map_err(|e| e.in_field("medium"))?
            } else {
                None
            };
            Ok(EventKind::BlockRemoved(BlockRemoved {
                block_hashes,
                medium,
                group_idx: None,
                locality: None,
                ownership: None,
            }))
        }
        "AllBlocksCleared" => {
            if n != 1 {
                return Err(bad_len(at, "AllBlocksCleared array", "1", n));
            }
            Ok(EventKind::AllBlocksCleared)
        }
        other => Err(Error::EventUnknownType {
            at: Location::offset(at),
            name: other.to_string(),
        }),
    }
}
