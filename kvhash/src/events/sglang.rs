//! SGLang 0.5.18–0.5.19 tagged positional-array events (docs/contracts/sglang.md §4).
//!
//! `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]`
//! plus an optional 8th element `{"cache_salt": str}`; `["BlockRemoved", block_hashes,
//! medium]`; `["AllBlocksCleared"]`. Hashes are signed int64 in any msgpack integer width.
//! The 0.5.20+ tagged maps are decoded by the shared map decoder (`vllm.rs`).

use super::fields::{
    bad_len, opt_i64, opt_name, opt_str, read_hashes, read_opt_hash, read_tag, HashForm,
};
use super::model::{read_token_ids, BlockRemoved, BlockStored, EventKind};
use super::msgpack::Reader;
use super::schema::{EventSchema, Field};
use super::Location;
use crate::Error;

/// Decodes one tagged-array event (the 8th element only where `schema` lists `cache_salt`).
pub(crate) fn decode_array_event<'a>(
    r: &mut Reader<'a>,
    schema: &EventSchema,
) -> Result<EventKind<'a>, Error> {
    let (at, n, tag) = read_tag(r)?;
    match tag {
        "BlockStored" => {
            let salted = schema.allows(true, Field::CacheSalt);
            if !(7..=7 + usize::from(salted)).contains(&n) {
                return Err(bad_len(
                    at,
                    "BlockStored array",
                    if salted { "7 or 8" } else { "7" },
                    n,
                ));
            }
            let block_hashes =
                read_hashes(r, HashForm::I64).map_err(|e| e.in_field("block_hashes"))?;
            let parent_block_hash =
                read_opt_hash(r, HashForm::I64).map_err(|e| e.in_field("parent_block_hash"))?;
            let token_ids = read_token_ids(r).map_err(|e| e.in_field("token_ids"))?;
            let block_size = r
                .u32("an integer block size")
                .map_err(|e| e.in_field("block_size"))?;
            let lora_id = opt_i64(r).map_err(|e| e.in_field("lora_id"))?;
            let medium = opt_name(r).map_err(|e| e.in_field("medium"))?;
            let cache_salt = if n == 8 {
                read_metadata(r).map_err(|e| e.in_field("metadata"))?
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
                lora_name: None,
                extra_keys: None,
                group_idx: None,
                kv_cache_spec_kind: None,
                kv_cache_spec_sliding_window: None,
                locality: None,
                ownership: None,
                session_id: None,
                lookahead_token_ids: None,
                cache_salt,
            }))
        }
        "BlockRemoved" => {
            if n != 3 {
                return Err(bad_len(at, "BlockRemoved array", "3", n));
            }
            let block_hashes =
                read_hashes(r, HashForm::I64).map_err(|e| e.in_field("block_hashes"))?;
            let medium = opt_name(r).map_err(|e| e.in_field("medium"))?;
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

/// The 8th element: a map with `cache_salt` (str or nil); unknown keys are skipped.
fn read_metadata<'a>(r: &mut Reader<'a>) -> Result<Option<&'a str>, Error> {
    let n = r.map("the metadata map {\"cache_salt\": …}")?;
    let mut salt: Option<Option<&'a str>> = None;
    for _ in 0..n {
        let at = r.pos();
        let key = r.str("a field name")?;
        if key == "cache_salt" {
            if salt.is_some() {
                return Err(Error::EventDuplicateField {
                    at: Location::offset(at),
                    field: key.to_string(),
                });
            }
            salt = Some(opt_str(r).map_err(|e| e.in_field(key))?);
        } else {
            r.skip(4)?;
        }
    }
    Ok(salt.flatten())
}
