//! [`EventSchema`]: exactly which fields one engine release writes in its msgpack KV events,
//! and how its replay replies are framed.
//!
//! The wire *family* ([`EventFormat`]: tagged arrays or tagged maps, hash form, batch layout)
//! says how bytes are read; the schema says which fields appear, in which order (arrays) and
//! which may be absent (maps omit fields left at their default). Schemas are data: the
//! engine-contract catalog (`kvprofile-core`) lists them per release range, and
//! [`EventSchema::new`] checks such a list. A decoder built from a release's schema refuses
//! an event whose fields that release never writes ([`Error::EventUnknownField`]) — an
//! engine speaking another release is detected, never half-read.
//!
//! [`EventSchema::family`] is the union of the releases of one family (every field any of
//! them writes; unknown map keys skipped): what the format-only entry points
//! (`decode_payload(format, …)`) use.

use super::format::EventFormat;
use crate::Error;
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// A field of a `BlockStored` or `BlockRemoved` event (wire name in [`Field::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `block_hashes`.
    BlockHashes,
    /// `parent_block_hash`.
    ParentBlockHash,
    /// `token_ids`.
    TokenIds,
    /// `block_size`.
    BlockSize,
    /// `lora_id`.
    LoraId,
    /// `medium`.
    Medium,
    /// `lora_name`.
    LoraName,
    /// `extra_keys` (vLLM).
    ExtraKeys,
    /// `group_idx` (vLLM ≥ 0.20).
    GroupIdx,
    /// `kv_cache_spec_kind` (vLLM ≥ 0.22).
    KvCacheSpecKind,
    /// `kv_cache_spec_sliding_window` (vLLM ≥ 0.22).
    KvCacheSpecSlidingWindow,
    /// `locality` (vLLM ≥ 0.26).
    Locality,
    /// `ownership` (vLLM ≥ 0.29).
    Ownership,
    /// `session_id` (vLLM ≥ 0.30, SGLang ≥ 0.5.20).
    SessionId,
    /// `lookahead_token_ids` (vLLM ≥ 0.33): one list of look-ahead ids per stored block.
    LookaheadTokenIds,
    /// `cache_salt` (SGLang: a plain field from 0.5.20, the 8th-element metadata map before).
    CacheSalt,
}

impl Field {
    /// Every field, in vLLM's declaration order (SGLang's `cache_salt` last).
    pub const ALL: [Field; 16] = [
        Field::BlockHashes,
        Field::ParentBlockHash,
        Field::TokenIds,
        Field::BlockSize,
        Field::LoraId,
        Field::Medium,
        Field::LoraName,
        Field::ExtraKeys,
        Field::GroupIdx,
        Field::KvCacheSpecKind,
        Field::KvCacheSpecSlidingWindow,
        Field::Locality,
        Field::Ownership,
        Field::SessionId,
        Field::LookaheadTokenIds,
        Field::CacheSalt,
    ];

    /// The wire name.
    pub const fn name(self) -> &'static str {
        match self {
            Field::BlockHashes => "block_hashes",
            Field::ParentBlockHash => "parent_block_hash",
            Field::TokenIds => "token_ids",
            Field::BlockSize => "block_size",
            Field::LoraId => "lora_id",
            Field::Medium => "medium",
            Field::LoraName => "lora_name",
            Field::ExtraKeys => "extra_keys",
            Field::GroupIdx => "group_idx",
            Field::KvCacheSpecKind => "kv_cache_spec_kind",
            Field::KvCacheSpecSlidingWindow => "kv_cache_spec_sliding_window",
            Field::Locality => "locality",
            Field::Ownership => "ownership",
            Field::SessionId => "session_id",
            Field::LookaheadTokenIds => "lookahead_token_ids",
            Field::CacheSalt => "cache_salt",
        }
    }

    /// The field with this wire name.
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether `BlockRemoved` can carry the field.
    const fn on_removed(self) -> bool {
        matches!(
            self,
            Field::BlockHashes
                | Field::Medium
                | Field::GroupIdx
                | Field::Locality
                | Field::Ownership
        )
    }

    /// Whether an SGLang release can write the field.
    const fn sglang(self) -> bool {
        matches!(
            self,
            Field::BlockHashes
                | Field::ParentBlockHash
                | Field::TokenIds
                | Field::BlockSize
                | Field::LoraId
                | Field::Medium
                | Field::LoraName
                | Field::SessionId
                | Field::CacheSalt
        )
    }

    /// Whether a vLLM release can write the field.
    const fn vllm(self) -> bool {
        !matches!(self, Field::CacheSalt)
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field as one release writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldSpec {
    /// The field.
    pub field: Field,
    /// The field has a default and may be absent: a map omits it when it holds the default;
    /// an array may end before it (only a trailing run of optional fields).
    pub optional: bool,
}

impl FieldSpec {
    const fn req(field: Field) -> Self {
        FieldSpec {
            field,
            optional: false,
        }
    }
    const fn opt(field: Field) -> Self {
        FieldSpec {
            field,
            optional: true,
        }
    }
}

impl FromStr for FieldSpec {
    type Err = Error;

    /// `name` (always present) or `name?` (may be absent).
    fn from_str(s: &str) -> Result<Self, Error> {
        let (name, optional) = match s.strip_suffix('?') {
            Some(n) => (n, true),
            None => (s, false),
        };
        let field = Field::from_name(name).ok_or_else(|| Error::UnknownName {
            what: "KV-event field",
            name: s.to_string(),
        })?;
        Ok(FieldSpec { field, optional })
    }
}

impl fmt::Display for FieldSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.field, if self.optional { "?" } else { "" })
    }
}

/// How replay replies (the ROUTER side of the replay socket) are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplayFraming {
    /// `[empty, seq, payload]` (vLLM ≤ 0.25, SGLang ≤ 0.5.21).
    Plain,
    /// `[empty, topic, seq, payload]`, end marker `[empty, empty, ff…ff, empty]` (vLLM ≥ 0.26,
    /// SGLang ≥ 0.5.22).
    Topic,
    /// Either (only in a [`EventSchema::family`] spanning both).
    Either,
}

impl ReplayFraming {
    /// The stable name (`plain`, `topic`, `either`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ReplayFraming::Plain => "plain",
            ReplayFraming::Topic => "topic",
            ReplayFraming::Either => "either",
        }
    }
}

impl FromStr for ReplayFraming {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "plain" => Ok(ReplayFraming::Plain),
            "topic" => Ok(ReplayFraming::Topic),
            _ => Err(Error::UnknownName {
                what: "replay framing",
                name: s.to_string(),
            }),
        }
    }
}

/// What a map decoder does with a key the schema does not list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnknownFields {
    /// Refuse it ([`Error::EventUnknownField`]): a release schema.
    Refuse,
    /// Skip it: a family schema (engines add optional fields compatibly).
    Skip,
}

/// The msgpack event fields of one engine release (or the union of a family).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventSchema {
    format: EventFormat,
    block_stored: Cow<'static, [FieldSpec]>,
    block_removed: Cow<'static, [FieldSpec]>,
    replay: ReplayFraming,
    unknown: UnknownFields,
}

use Field as F;

const VLLM_STORED_UNION: &[FieldSpec] = &[
    FieldSpec::req(F::BlockHashes),
    FieldSpec::req(F::ParentBlockHash),
    FieldSpec::req(F::TokenIds),
    FieldSpec::req(F::BlockSize),
    FieldSpec::opt(F::LoraId),
    FieldSpec::opt(F::Medium),
    FieldSpec::opt(F::LoraName),
    FieldSpec::opt(F::ExtraKeys),
    FieldSpec::opt(F::GroupIdx),
    FieldSpec::opt(F::KvCacheSpecKind),
    FieldSpec::opt(F::KvCacheSpecSlidingWindow),
    FieldSpec::opt(F::Locality),
    FieldSpec::opt(F::Ownership),
    FieldSpec::opt(F::SessionId),
    FieldSpec::opt(F::LookaheadTokenIds),
];
const VLLM_REMOVED_UNION: &[FieldSpec] = &[
    FieldSpec::req(F::BlockHashes),
    FieldSpec::opt(F::Medium),
    FieldSpec::opt(F::GroupIdx),
    FieldSpec::opt(F::Locality),
    FieldSpec::opt(F::Ownership),
];
const SGLANG_ARRAY_STORED: &[FieldSpec] = &[
    FieldSpec::req(F::BlockHashes),
    FieldSpec::req(F::ParentBlockHash),
    FieldSpec::req(F::TokenIds),
    FieldSpec::req(F::BlockSize),
    FieldSpec::req(F::LoraId),
    FieldSpec::req(F::Medium),
    FieldSpec::opt(F::CacheSalt),
];
const SGLANG_MAP_STORED_UNION: &[FieldSpec] = &[
    FieldSpec::req(F::BlockHashes),
    FieldSpec::req(F::ParentBlockHash),
    FieldSpec::req(F::TokenIds),
    FieldSpec::req(F::BlockSize),
    FieldSpec::opt(F::LoraId),
    FieldSpec::opt(F::Medium),
    FieldSpec::opt(F::CacheSalt),
    FieldSpec::opt(F::SessionId),
    FieldSpec::opt(F::LoraName),
];
const SGLANG_REMOVED: &[FieldSpec] = &[FieldSpec::req(F::BlockHashes), FieldSpec::opt(F::Medium)];
const SGLANG_ARRAY_REMOVED: &[FieldSpec] =
    &[FieldSpec::req(F::BlockHashes), FieldSpec::req(F::Medium)];

impl EventSchema {
    /// A release schema: `format`'s wire family with exactly these fields (in wire order)
    /// and this replay framing; keys outside the lists are refused. Checked:
    /// `block_hashes`, `parent_block_hash`, `token_ids`, `block_size` are listed and not
    /// optional (`block_hashes` on `BlockRemoved`), no field twice, every field one the
    /// engine has (and `BlockRemoved` can carry), in arrays optional fields only as a
    /// trailing run; SGLang's array family is exactly its fixed layout (with `cache_salt?`
    /// as the metadata map). TensorRT-LLM formats have no msgpack schema (an error).
    pub fn new(
        format: EventFormat,
        block_stored: Vec<FieldSpec>,
        block_removed: Vec<FieldSpec>,
        replay: ReplayFraming,
    ) -> Result<Self, Error> {
        let bad = |reason: String| Err(Error::EventSchema { reason });
        let engine_has: fn(Field) -> bool = match format {
            EventFormat::VllmKvArrayV1 | EventFormat::VllmKvMapV2 | EventFormat::VllmKvMapV3 => {
                Field::vllm
            }
            EventFormat::SglangKvRankV1 | EventFormat::SglangKvMapV2 => Field::sglang,
            EventFormat::TrtllmKvHttpV1 | EventFormat::TrtllmKvHttpPreviewV1 => {
                return bad(format!("{format} is JSON; it has no msgpack field schema"))
            }
        };
        if replay == ReplayFraming::Either {
            return bad("a release schema has one replay framing".to_string());
        }
        let array = matches!(
            format,
            EventFormat::VllmKvArrayV1 | EventFormat::SglangKvRankV1
        );
        for (what, list, required) in [
            (
                "BlockStored",
                &block_stored,
                &[
                    F::BlockHashes,
                    F::ParentBlockHash,
                    F::TokenIds,
                    F::BlockSize,
                ][..],
            ),
            ("BlockRemoved", &block_removed, &[F::BlockHashes][..]),
        ] {
            for (i, s) in list.iter().enumerate() {
                if list[..i].iter().any(|x| x.field == s.field) {
                    return bad(format!("{what} lists {} twice", s.field));
                }
                if !engine_has(s.field) || (what == "BlockRemoved" && !s.field.on_removed()) {
                    return bad(format!(
                        "{what} of {} cannot carry {}",
                        format.engine(),
                        s.field
                    ));
                }
                if array && !s.optional && list[..i].iter().any(|x| x.optional) {
                    return bad(format!(
                        "{what}: in an array only a trailing run of fields may be optional ({} follows an optional field)",
                        s.field
                    ));
                }
            }
            for r in required {
                match list.iter().find(|s| s.field == *r) {
                    None => return bad(format!("{what} must list {r}")),
                    Some(s) if s.optional => return bad(format!("{what}: {r} is always present")),
                    Some(_) => {}
                }
            }
        }
        if format == EventFormat::SglangKvRankV1
            && (block_stored.iter().map(|s| s.field).collect::<Vec<_>>()
                != SGLANG_ARRAY_STORED
                    .iter()
                    .map(|s| s.field)
                    .collect::<Vec<_>>()
                || block_removed.iter().map(|s| s.field).collect::<Vec<_>>()
                    != [F::BlockHashes, F::Medium])
        {
            return bad(
                "sglang-kv-rank-v1 arrays are exactly [block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium] (+ cache_salt? metadata) and [block_hashes, medium]"
                    .to_string(),
            );
        }
        Ok(EventSchema {
            format,
            block_stored: Cow::Owned(block_stored),
            block_removed: Cow::Owned(block_removed),
            replay,
            unknown: UnknownFields::Refuse,
        })
    }

    /// The union schema of a wire family: every field any release of the family writes,
    /// all but the event's required ones optional, unknown map keys skipped, either replay
    /// framing where the family has both. Used by the format-only entry points.
    pub fn family(format: EventFormat) -> &'static EventSchema {
        static ARRAY: EventSchema = EventSchema::fam(
            EventFormat::VllmKvArrayV1,
            VLLM_STORED_UNION,
            VLLM_REMOVED_UNION,
            ReplayFraming::Plain,
        );
        static MAP_V2: EventSchema = EventSchema::fam(
            EventFormat::VllmKvMapV2,
            VLLM_STORED_UNION,
            VLLM_REMOVED_UNION,
            ReplayFraming::Either,
        );
        static MAP_V3: EventSchema = EventSchema::fam(
            EventFormat::VllmKvMapV3,
            VLLM_STORED_UNION,
            VLLM_REMOVED_UNION,
            ReplayFraming::Topic,
        );
        static SG_ARRAY: EventSchema = EventSchema::fam(
            EventFormat::SglangKvRankV1,
            SGLANG_ARRAY_STORED,
            SGLANG_ARRAY_REMOVED,
            ReplayFraming::Plain,
        );
        static SG_MAP: EventSchema = EventSchema::fam(
            EventFormat::SglangKvMapV2,
            SGLANG_MAP_STORED_UNION,
            SGLANG_REMOVED,
            ReplayFraming::Either,
        );
        static TRT_V1: EventSchema =
            EventSchema::fam(EventFormat::TrtllmKvHttpV1, &[], &[], ReplayFraming::Plain);
        static TRT_PREVIEW: EventSchema = EventSchema::fam(
            EventFormat::TrtllmKvHttpPreviewV1,
            &[],
            &[],
            ReplayFraming::Plain,
        );
        match format {
            EventFormat::VllmKvArrayV1 => &ARRAY,
            EventFormat::VllmKvMapV2 => &MAP_V2,
            EventFormat::VllmKvMapV3 => &MAP_V3,
            EventFormat::SglangKvRankV1 => &SG_ARRAY,
            EventFormat::SglangKvMapV2 => &SG_MAP,
            EventFormat::TrtllmKvHttpV1 => &TRT_V1,
            EventFormat::TrtllmKvHttpPreviewV1 => &TRT_PREVIEW,
        }
    }

    const fn fam(
        format: EventFormat,
        stored: &'static [FieldSpec],
        removed: &'static [FieldSpec],
        replay: ReplayFraming,
    ) -> EventSchema {
        EventSchema {
            format,
            block_stored: Cow::Borrowed(stored),
            block_removed: Cow::Borrowed(removed),
            replay,
            unknown: UnknownFields::Skip,
        }
    }

    /// The wire family.
    pub fn format(&self) -> EventFormat {
        self.format
    }

    /// `BlockStored` fields in wire order.
    pub fn block_stored(&self) -> &[FieldSpec] {
        &self.block_stored
    }

    /// `BlockRemoved` fields in wire order.
    pub fn block_removed(&self) -> &[FieldSpec] {
        &self.block_removed
    }

    /// Replay-reply framing.
    pub fn replay(&self) -> ReplayFraming {
        self.replay
    }

    /// What happens to unlisted map keys.
    pub fn unknown_fields(&self) -> UnknownFields {
        self.unknown
    }

    /// Whether `BlockStored` (`stored = true`) or `BlockRemoved` may carry `field`.
    pub(crate) fn allows(&self, stored: bool, field: Field) -> bool {
        let list = if stored {
            &self.block_stored
        } else {
            &self.block_removed
        };
        list.iter().any(|s| s.field == field)
    }

    /// The required fields of `BlockStored` / `BlockRemoved` that are missing from `present`.
    pub(crate) fn first_missing(
        &self,
        stored: bool,
        present: impl Fn(Field) -> bool,
    ) -> Option<Field> {
        let list = if stored {
            &self.block_stored
        } else {
            &self.block_removed
        };
        list.iter()
            .find(|s| !s.optional && !present(s.field))
            .map(|s| s.field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(s: &[&str]) -> Vec<FieldSpec> {
        s.iter().map(|x| x.parse().unwrap()).collect()
    }

    #[test]
    fn release_schemas_are_checked() {
        let stored = specs(&[
            "block_hashes",
            "parent_block_hash",
            "token_ids",
            "block_size",
            "lora_id",
            "medium",
            "lora_name",
            "extra_keys",
        ]);
        let removed = specs(&["block_hashes", "medium"]);
        assert!(EventSchema::new(
            EventFormat::VllmKvArrayV1,
            stored.clone(),
            removed.clone(),
            ReplayFraming::Plain
        )
        .is_ok());
        let bad = [
            (
                specs(&["block_hashes", "token_ids", "block_size"]),
                "parent",
            ),
            (
                specs(&[
                    "block_hashes",
                    "parent_block_hash",
                    "token_ids",
                    "block_size",
                    "cache_salt",
                ]),
                "vllm salt",
            ),
            (
                specs(&[
                    "block_hashes",
                    "parent_block_hash",
                    "token_ids",
                    "block_size",
                    "medium?",
                    "lora_id",
                ]),
                "gap",
            ),
            (
                specs(&[
                    "block_hashes",
                    "block_hashes",
                    "parent_block_hash",
                    "token_ids",
                    "block_size",
                ]),
                "twice",
            ),
        ];
        for (s, why) in bad {
            assert!(
                EventSchema::new(
                    EventFormat::VllmKvArrayV1,
                    s,
                    removed.clone(),
                    ReplayFraming::Plain
                )
                .is_err(),
                "{why}"
            );
        }
        assert!(EventSchema::new(
            EventFormat::VllmKvMapV3,
            stored.clone(),
            specs(&["block_hashes", "token_ids"]),
            ReplayFraming::Topic
        )
        .is_err());
        assert!(EventSchema::new(
            EventFormat::TrtllmKvHttpV1,
            stored,
            removed,
            ReplayFraming::Plain
        )
        .is_err());
        assert!("nope?".parse::<FieldSpec>().is_err());
        assert_eq!(
            "extra_keys?".parse::<FieldSpec>().unwrap().to_string(),
            "extra_keys?"
        );
    }
}
