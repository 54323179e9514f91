//! Drift caught in production: every block hash an engine publishes, re-derived from the event
//! stream itself, continuously.
//!
//! The hash challenge (§8.5) proves agreement once, before READY. Afterwards an engine may be
//! upgraded, restarted with another seed or block size, or given a LoRA, while the rule stays
//! bound. Every `BlockStored` event carries its blocks' token ids (and, for vLLM, their
//! untagged extra keys), and every chain is anchored at the root (vLLM's NONE_HASH, SGLang's
//! empty or salt-seeded parent, TensorRT-LLM's 0), so each published hash can be re-derived
//! exactly: a root block from the seed, its tokens and keys; a later block from a parent
//! already re-derived — its 64-bit published form mapped to the full digest the chain goes on
//! with ([`Verifier`] keeps them in a bounded map). A mismatch is direct evidence that the
//! engine no longer computes what its release's contract says.
//!
//! ```
//! use kvprobe::drift::{DriftConfig, Verifier};
//! use kvprobe::{contract, Engine};
//! use kvhash::events::{decode_payload_schema, Limits};
//! let c = contract::resolve(Engine::Vllm, "0.31.0").unwrap();
//! let mut v = Verifier::new(&c, DriftConfig::new(16)).unwrap();
//! // Case `int_stored_prefill_no_parent` of vLLM 0.31's vectors: two plain blocks.
//! # let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
//! #     concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors/vllm/kv_events.json")).unwrap()).unwrap();
//! # let case = doc["cases"].as_array().unwrap().iter().find(|c| c["name"] == "int_stored_prefill_no_parent").unwrap();
//! # let payload = hex::decode(case["payload_hex"].as_str().unwrap()).unwrap();
//! let batch = decode_payload_schema(c.events().unwrap(), &payload, &Limits::default()).unwrap();
//! v.feed_payload(&batch, &payload);
//! assert_eq!((v.counters().blocks_seen, v.counters().matched), (2, 2));
//! assert!(v.verdict().is_none());
//! ```
//!
//! ## What is re-derived, and what is not
//!
//! Never a guess: a block is *re-derived* (and then *matched* or *mismatched*) only when the
//! contract fixes every input of its hash; otherwise it is *unverifiable* with a reason
//! ([`Unverifiable`]). Per engine:
//!
//! * vLLM ([`kvhash::vllm::BlockRehasher`]): the release's algorithm, NONE_HASH rule and
//!   extra-key form. Untagged releases (K1, K2) hash exactly the keys the event publishes; a
//!   tagged release (K3, vLLM ≥ 0.31) hashes `("lora", name, path)` — the path comes from
//!   [`DriftConfig::lora_paths`] (the server's `/v1/models` `root`), the event does not carry
//!   it; an adapter [`DriftConfig::lora_paths`] does not declare is [`MismatchKind::Keys`]
//!   evidence under every release) — and the other keys tagged in vLLM's fixed order (LoRA, multimodal, salt on block 0,
//!   embeddings). A key layout the release cannot produce is evidence
//!   ([`MismatchKind::Keys`]). Look-ahead blocks (0.33) are re-derived from
//!   `lookahead_token_ids` when they carry no other key. An event whose `block_size` is `k` ×
//!   the rule's block size is a hybrid model's group block, identified by its last sub-block's
//!   hash (≥ 0.24; up to 0.23 by the concatenation of its `k` sub-hashes, whose 64-bit form is
//!   the same): its `k` sub-blocks are re-derived in turn (plain blocks only). A block size
//!   that is no multiple is evidence ([`MismatchKind::BlockSize`]).
//! * SGLang ([`kvhash::sglang::SglangChain`]): the page chain, seeded by the event's
//!   `cache_salt` at the root; a page size other than the rule's is evidence. EAGLE bigram
//!   events and events naming a LoRA (0.5.22's `dynamo` format and 0.5.23 namespace their
//!   hashes with a seed the event does not carry) are unverifiable.
//! * TensorRT-LLM ([`kvhash::trtllm::TrtllmHasher`]): chained on the published 64-bit parent,
//!   so no map is needed; salt (release's variant), extra ids and hex multimodal keys are
//!   mixed as the event lists them. A UUID multimodal key, a LoRA id (V1 JSON never carries the
//!   task id) and a salt under a release whose salt variant is unknown are unverifiable. A
//!   block longer than the rule's, or a short (partial) block that is not the last of its
//!   event, is evidence. A LoRA request is invisible in V1 JSON: its blocks mismatch, which is
//!   what they are to a gateway that routes without the adapter's task id.
//!
//! ## The verdict
//!
//! Three values ([`Verdict`], docs/contracts/drift.md §2), [`Verifier::state`]:
//!
//! * `drift`, sticky until [`Verifier::reset_verdict`], with the first offending block as
//!   [`DriftEvidence`] (batch sequence number and index, event index, block index, byte offset
//!   of the event's token ids in the payload for msgpack formats fed with
//!   [`Verifier::feed_payload`], the block's tokens and published extra keys, expected and
//!   published hash, the release used). One mismatched *root* block is enough (nothing but a
//!   different seed, algorithm, extra key or tokenizer makes block 0 differ), and so is one
//!   block of a block size the rule does not allow ([`MismatchKind::BlockSize`], on the
//!   first event) or with extra keys the rule does not declare ([`MismatchKind::Keys`]: an
//!   unknown LoRA adapter among them). Chained mismatches make it after
//!   [`DriftPolicy::mismatches`] of them within the last [`DriftPolicy::window_blocks`]
//!   stored blocks.
//! * `unverifiable` when no stored block was seen, or fewer than half of them were
//!   re-derived: the reasons are counted ([`Counters::unverifiable_by_reason`]). Never
//!   `clean` for a stream the verifier cannot judge.
//! * `clean` otherwise.
//!
//! Blocks chained on a mismatched block are re-derived against the engine's published parent
//! where the wire gives its full digest (vLLM's bytes mode); otherwise they are counted as
//! [`Counters::consequences`] of the mismatch the evidence names, not as unverifiable.
//! [`Verifier::finding`] is the ladder's `hash_drift` observation
//! ([`crate::ladder::EndpointEvidence::drift`]), which demotes a READY rule.
//!
//! ## Memory and allocation
//!
//! Bounded, and fixed at construction: the map holds at most [`DriftConfig::map_capacity`]
//! entries ([`map_bytes`] bytes: 88 per entry on 64-bit targets, about 5.5 MiB for the
//! default 65 536), evicting with CLOCK; a ghost table of the same size remembers recently
//! evicted keys (so a child of an evicted parent reads `parent_evicted`, approximately); the
//! window keeps at most `mismatches` pieces of evidence; the prediction tracker (optional) its
//! fixed capacity. Token and look-ahead buffers grow to the largest event seen and are reused:
//! verifying a correct engine's stream allocates nothing per block (a counting-allocator test
//! checks it). Evidence is built only for mismatches, and no longer once the verdict is
//! `drift`.
//!
//! `BlockRemoved`, `AllBlocksCleared` and TensorRT-LLM's `created` leave the map alone: it is a
//! memo of derivations (published hash → digest), which stay true after the engine evicts a
//! block, and a block stored again later (vLLM re-announces prefix hits in report mode
//! "full", every engine re-stores an evicted prefix) then still has its parent.

mod book;
mod config;
mod map;
pub mod metrics;
mod predict;
mod report;
mod sglang;
mod trtllm;
mod verifier;
mod vllm;

#[cfg(feature = "live")]
pub mod watch;

pub use map::SLOT_BYTES;
pub use predict::{PredictionConfig, PredictionCounters};

pub(crate) use book::*;
pub use config::*;
pub use report::*;
pub use verifier::*;
