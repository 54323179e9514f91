//! Unit tests' small index: vLLM 0.31's rule and map-v3 schema, one full-attention group of
//! 16-token blocks.

use crate::endpoint::Endpoint;
use crate::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
};
use kvhash::events::{EventFormat, EventSchema};
use std::sync::Arc;

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

/// A slot taken over: endpoint `x` added and looked up (the handle a writer or a prediction
/// under way holds), then removed, and endpoint `y` added into the slot it freed (in step
/// from its first batch when `y_starts_empty`). Returns x's stale handle and y's handle.
pub fn slot_taken_over(ix: &Index, y_starts_empty: bool) -> (Arc<Endpoint>, Arc<Endpoint>) {
    let x: EndpointId = ix.add_endpoint(endpoint("x", true)).unwrap();
    let stale = ix.endpoint(x).unwrap();
    ix.remove_endpoint(x).unwrap();
    let y = ix.add_endpoint(endpoint("y", y_starts_empty)).unwrap();
    let own = ix.endpoint(y).unwrap();
    assert_eq!(stale.first_slot, own.first_slot, "the slot is reused");
    (stale, own)
}
