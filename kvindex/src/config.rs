//! What an index and its endpoints are configured with.

use crate::rule::{GroupSpec, HitRule};
use kvhash::events::EventSchema;

/// One index serves the endpoints of one model pool under one engine release: the same
/// block keys (hash rules, block size, seed) and the same KV-cache groups on every endpoint.
/// A gateway routing a model over two releases (a rolling upgrade) keeps two indexes.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// The release's prefix-hit rule ([`HitRule::for_release_id`]).
    pub rule: HitRule,
    /// The release's event schema (`kvprobe::contract::Contract::events`): batches are decoded
    /// with exactly the release's fields.
    pub schema: EventSchema,
    /// Tokens per hashed block (vLLM `--block-size`, SGLang page size, TensorRT-LLM tokens
    /// per block): the block size of the request keys.
    pub block_size: u32,
    /// The served model's KV-cache groups, in the engine's order (group 0 first).
    pub groups: Vec<GroupSpec>,
    /// The most endpoint × rank slots the index holds (a hard bound on its bookkeeping).
    pub max_slots: u32,
}

/// How many blocks a slot (one data-parallel rank of an endpoint) may hold.
///
/// The GPU figure is the engine's own pool (vLLM `num_gpu_blocks - 1`, SGLang
/// `max_total_num_tokens / page_size`, TensorRT-LLM's primary blocks): an engine can never
/// cache more, so a stream that would exceed it has lost removals. Other media (CPU
/// offloading, SGLang HiCache) are bounded by `other_blocks`. Neither may exceed
/// [`MAX_BLOCKS_PER_RANK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Blocks of the GPU pool (every KV-cache group together).
    pub gpu_blocks: u64,
    /// Blocks in every other medium together.
    pub other_blocks: u64,
}

/// The `capacity_mismatch` finding: the capacity an endpoint was declared with
/// ([`EndpointConfig::capacity`]) differs from what the engine states
/// ([`crate::Index::check_capacity`]). A declared GPU pool larger than the engine's lets a
/// stream that lost removals go unnoticed longer (the overflow bound is the only check on
/// them); a smaller one makes a full pool an overflow (`unknown`, never a wrong count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityMismatch {
    /// The endpoint's name.
    pub endpoint: String,
    /// The capacity it was declared with.
    pub declared: Capacity,
    /// The GPU blocks per rank the engine states.
    pub stated_gpu_blocks: u64,
    /// The other-media blocks per rank the engine states (`None`: not stated, not compared).
    pub stated_other_blocks: Option<u64>,
}

impl std::fmt::Display for CapacityMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "capacity_mismatch: endpoint {} was declared {} GPU / {} other blocks per rank, the \
             engine states {} GPU",
            self.endpoint,
            self.declared.gpu_blocks,
            self.declared.other_blocks,
            self.stated_gpu_blocks
        )?;
        match self.stated_other_blocks {
            Some(o) => write!(f, " / {o} other"),
            None => Ok(()),
        }
    }
}

/// The largest capacity of one medium class of a rank, in blocks (2^32 - 1; engines' pools are
/// far smaller): the index counts a rank's copies of one block in 32 bits, and the capacity
/// bounds them.
pub const MAX_BLOCKS_PER_RANK: u64 = u32::MAX as u64;

/// One endpoint (an engine replica) of the pool.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// The name the gateway knows it by (unique in the index).
    pub name: String,
    /// Data-parallel ranks: each rank is its own cache and its own event stream.
    pub dp_ranks: u32,
    /// Per-rank capacity.
    pub capacity: Capacity,
    /// LoRA adapters are loaded on the endpoint. Under a rule whose events do not show the
    /// adapter (`loraInHashes: false`), the endpoint's predictions are `unknown` then.
    pub lora_adapters: bool,
    /// The engine keeps a replay buffer the caller (or kvexact's subscriber) can ask after a
    /// gap (vLLM / SGLang `replay_endpoint`).
    pub replay: bool,
    /// The engine starts now with an empty cache (the caller just launched or reset it): the
    /// first batch of any sequence number starts the stream. Otherwise the stream must show
    /// its start (sequence 0, `AllBlocksCleared`, TensorRT-LLM `created`) before the
    /// endpoint is predicted.
    pub starts_empty: bool,
}
