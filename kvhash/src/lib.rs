//! # kvhash — exact KV-cache block hashes, per engine
//!
//! Pure computation: token ids in, block hashes out. Depends on no other kvexact crate.
//!
//! * [`vllm`]: vLLM's prefix-cache chain (`sha256_cbor`, `sha256`, `xxhash`, `xxhash_cbor`).
//! * [`sglang`]: SGLang's sha256 page chain.
//! * [`trtllm`]: TensorRT-LLM's V1 block-key hash.
//! * [`BlockHasher`]: any of the three, "ids in, u64 hashes out"; [`Digest`]: full digests.
//! * [`prefix_cache`]: block hashes of already-seen prefixes reused across turns.
//! * [`events`]: decoding of each engine's KV-event wire format into one typed model.

#![warn(missing_docs)]

pub mod digest;
pub mod error;
pub mod events;
pub mod hasher;
mod location;
pub mod prefix_cache;
pub mod sglang;
pub mod sglang_namespace;
pub mod trtllm;
pub mod vllm;

pub use digest::Digest;
pub use error::Error;
pub use hasher::BlockHasher;
