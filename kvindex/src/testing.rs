//! Unit tests' small index: vLLM 0.31's rule and map-v3 schema, one full-attention group of
//! 16-token blocks.

use crate::{Capacity, EndpointConfig, GroupKind, GroupSpec, HitRule, Index, IndexOptions};
use kvhash::events::{EventFormat, EventSchema};

/// An index of `max_slots` slots.
pub fn index(max_slots: u32) -> Index {
    Index::new(IndexOptions {
        rule: HitRule::for_release_id("vllm-kv-map-v3-r0.31").unwrap(),
        schema: EventSchema::family(EventFormat::VllmKvMapV3).clone(),
        block_size: 16,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: 16,
        }],
        max_slots,
    })
    .unwrap()
}

/// One rank of 64 GPU blocks, no replay; in step from its first batch when `starts_empty`,
/// else unsynced until a batch shows its cache.
pub fn endpoint(name: &str, starts_empty: bool) -> EndpointConfig {
    EndpointConfig {
        name: name.into(),
        dp_ranks: 1,
        capacity: Capacity {
            gpu_blocks: 64,
            other_blocks: 0,
        },
        lora_adapters: false,
        replay: false,
        starts_empty,
    }
}
