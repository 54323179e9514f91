//! # kvindex — the exact prefix index
//!
//! kvexact computes the engines' block keys exactly; this crate turns them into the routing
//! decision: for a request's keys, the cached-token count each engine replica will report,
//! predicted from the replicas' own KV events with the engine's own hit rule.
//!
//! * [`HitRule`]: an engine release's prefix-hit rule, typed from the contract catalog's
//!   `prefixHit` entry (`kvprofile-core/data/contracts.yaml`), with the cache-hit replays that
//!   prove it (`testdata/vectors/cachehit/`). A release without a replay is predicted with
//!   its rule marked unproven ([`Outcome::Cached::proven`]); a geometry the rule does not
//!   state (a sliding-window group on a release whose replays show none) is refused.
//! * [`Index`]: per endpoint × data-parallel rank × KV-cache group × medium, the block copies
//!   the engine holds, fed by decoded events of every format kvhash decodes
//!   ([`Index::apply_frames`], [`Index::apply_payload`], [`Index::apply_json`]), with stream
//!   health ([`StreamState`]: sequence gaps with one replay asked per gap, restarts, the last
//!   sequence number; a stream the caller marks lost, [`Index::mark_lost`]), a hard per-rank
//!   capacity ([`Capacity`], checked against the engine's own by [`Index::check_capacity`]), [`Index::predict`] (one walk over the request's blocks for all
//!   endpoints, one lock-free probe per run of blocks with one holder set, no lock shared by
//!   all endpoints), feedback from the engine's reported counts
//!   ([`Index::observe`], [`PredictionDrift`]) and the inventory ([`Index::status`],
//!   [`Index::prometheus`]).
//! * [`lookup`]: the hit rules themselves, as pure functions (the slow, obvious form the
//!   index's walk is tested against).
//!
//! Memory: an index of one full-attention group (the common one) keeps its GPU keys as
//! run-compressed chains (`runs.rs`), which are their holders too (no table entry): 8 bytes
//! per distinct block in its run's array, and room to grow: an array starts with room for
//! sixteen blocks (up to 120 bytes unused in a run of fewer) and doubles when full, so a
//! longer run has up to as many again of room (a run that grew at the front keeps room there
//! too; a freed run keeps an array of up to 256 bytes and room for up to 8 partial holders for
//! the next run made in its place),
//! 16 bytes per entry of the places array the walk and the writers read (`locator.rs`: an
//! eighth to a quarter full right after it grew, 64 to 128 bytes per block, a quarter to half
//! full right after it shrank; it grows at three quarters, gone entries counted, and shrinks
//! at an eighth, so 21 to 128 bytes per block in between), about 160
//! bytes per run (a 112-byte header with the cover of up to 128 slots inline, the writers'
//! child list), 8 bytes per partial holder of a run (a slot holding a leading stretch of it)
//! and, per slot holding more than one copy of a key (vLLM's duplicate stores), an entry of
//! the writers' extra-copies map (about 17 bytes). Every other key (other media, indexes of
//! several KV-cache groups) has one table entry — 16 bytes of key (hash, group, medium) and
//! 24 of holders (a bitset of the first 128 slots and a pointer), about [`BYTES_PER_KEY`] =
//! 46 bytes with the hash map's control byte at its 7/8 load factor (up to twice that right
//! after the map grew), however many of the first 128 slots hold it; a slot holding more than
//! one copy, or a slot from the 129th on, is listed in one heap vector per key
//! ([`BYTES_PER_HOLDER`] = 8 bytes each, and the vector's 24).
//! [`Index::memory`] counts them all. Per rank,
//! the GPU capacity bounds the entries: a stream that stores more than the engine's pool
//! holds has lost removals, and the rank's entries are dropped ([`UnknownReason::Overflow`])
//! until its cache is known again. A thread that read an index (a prediction, or a batch
//! finding its endpoint) keeps the endpoint list and places array it last read, to check with
//! one atomic load that they are still current: an array replaced by a rebuild, or a dropped
//! index's, is freed once each such thread has read again or ended
//! ([`release_thread_view`] lets go of it now).
//!
//! Locking: a prediction takes no lock shared by all endpoints (it reads the chain keys' places
//! without a lock, then the read lock of each run shard it visits, one at a time; block by
//! block, the table shards' read locks). The one exception: a walk that met a place a writer
//! was moving four times running walks once more under the writers' mutex. Event application
//! holds the index's writers' mutex for a batch (batches apply one at a time, whichever
//! endpoint sends them) and, while the batch's ops run, the write lock of the one run shard
//! they last used (a prediction visiting that shard waits for them). A prediction that saw no
//! batch in progress or begun during its walk answers from that one state without checking
//! each rank again; otherwise each rank's seqlock version decides.
//! [`Index::predict_sparse`] answers the same, listing only the ranks that hold some of the
//! request or are unknown (the others have [`Index::nothing_cached`]).
//!
//! Where the events cannot show what the engine keys on, a prediction is
//! [`Outcome::Unknown`] with its [`UnknownReason`], never a count.
//!
//! ```
//! use kvindex::{Capacity, EndpointConfig, GroupKind, GroupSpec, HitRule, Index, IndexOptions, Request};
//! use kvhash::events::{EventFormat, EventSchema};
//! let index = Index::new(IndexOptions {
//!     rule: HitRule::for_release_id("vllm-kv-map-v3-r0.31").unwrap(),
//!     schema: EventSchema::family(EventFormat::VllmKvMapV3).clone(),
//!     block_size: 16,
//!     groups: vec![GroupSpec { kind: GroupKind::FullAttention, block_size: 16 }],
//!     max_slots: 64,
//! })
//! .unwrap();
//! let ep = index
//!     .add_endpoint(EndpointConfig {
//!         name: "vllm-0".into(),
//!         dp_ranks: 1,
//!         capacity: Capacity { gpu_blocks: 4095, other_blocks: 0 },
//!         lora_adapters: false,
//!         replay: true,
//!         starts_empty: true,
//!     })
//!     .unwrap();
//! let mut out = Vec::new();
//! index
//!     .predict(&Request { block_hashes: &[1, 2], prompt_tokens: 40, max_cached_tokens: None }, &mut out)
//!     .unwrap();
//! assert_eq!(out[0].endpoint, ep);
//! assert_eq!(out[0].outcome.tokens(), Some(0));
//! ```
#![warn(missing_docs)]

mod apply;
mod blocks;
mod config;
mod cover;
mod drift;
mod endpoint;
mod error;
mod feedback;
mod id;
mod index;
mod locator;
pub mod lookup;
mod predict;
mod prediction;
mod rule;
mod runs;
mod status;
mod stream;
mod table;
#[cfg(test)]
mod testing;
mod walk;

pub use apply::{Applied, FEED_BYTES_PER_BLOCK};
pub use config::{Capacity, CapacityMismatch, EndpointConfig, IndexOptions, MAX_BLOCKS_PER_RANK};
pub use drift::PredictionDrift;
pub use endpoint::MAX_MEDIA;
pub use error::Error;
pub use feedback::Observation;
pub use id::EndpointId;
pub use index::Index;
pub use predict::release_thread_view;
pub use prediction::{Outcome, Prediction, Request, UnknownReason, MAX_PROMPT_TOKENS};
pub use rule::{
    CacheReadParams, GroupKind, GroupSpec, HitRule, Lookup, PromptLogprobsRule, MAX_GROUPS,
};
pub use status::RankStatus;
pub use stream::{Step, StreamState};
pub use table::{BYTES_PER_HOLDER, BYTES_PER_KEY};
