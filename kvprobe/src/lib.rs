//! # kvprobe — token probes, identity, hash challenge, readiness
//!
//! Where kvexact's pieces meet to prove, before routing, that an engine agrees with the
//! gateway (docs/contracts/registry.md §4–§8):
//!
//! * [`contract`]: the engine contract of one engine release (`resolve(engine, version)`),
//!   typed from the catalog: kvhash's hashing rules and event schema, kvtemplate's chat rules.
//! * [`identity`]: identity (§4.1), geometry and served-model judging per engine.
//! * [`fixtures`]: fixture-set checks (§5.2), tokenize-response judging (§5.3) and TRT-LLM's
//!   approved oracle.
//! * [`challenge`]: the hash challenge (§8.5) — prompt growth through the engine's completions
//!   encoding (kvtemplate), expected hashes (kvhash), judging of decoded KV events.
//! * [`drift`]: continuous re-derivation of every block hash an endpoint publishes, with a
//!   `hash_drift` verdict and its evidence.
//! * [`ladder`]: the readiness ladder (§8.3) as a pure state machine with the [`State`] and
//!   [`Reason`] vocabularies (§8.2, §8.4); [`cadence`]: kicks and the per-tick decision.
//! * `feed` (feature `live`): event transports kvexact can own for the prefix index — ZMQ SUB
//!   per endpoint × rank with replay, and TensorRT-LLM's drain republished over ZMQ PUB.
//! * `attest` (feature `live`, on by default): the live driver behind `kvexact attest` — real
//!   HTTP, a ZMQ SUB socket (vLLM, SGLang) or the `POST /kv_cache_events` drain (TRT-LLM).
//!
//! Every judgement takes plain inputs (HTTP status and body bytes, decoded events) and returns
//! a [`Finding`], so the C ABI can call them one at a time.
#![warn(missing_docs)]

pub mod admission;
pub mod bridge;
pub mod cadence;
pub mod challenge;
pub mod chat_route;
pub mod contract;
pub mod deployment;
pub mod deployment_check;
pub mod drift;
pub mod error;
pub mod finding;
pub mod fixtures;
pub mod identity;
pub mod ladder;
pub mod pipeline;
pub mod reason;
pub mod state;

#[cfg(feature = "live")]
pub mod attest;
#[cfg(feature = "live")]
pub mod feed;
#[cfg(feature = "live")]
pub mod subscriber;
#[cfg(feature = "live")]
pub mod transport;

pub use error::Error;
pub use finding::Finding;
pub use kvprofile_core::Engine;
pub use ladder::{evaluate, Evidence, Verdict};
pub use reason::Reason;
pub use state::State;
