//! # kvhash — exact KV-cache block hashes, per engine
//!
//! Pure computation: token ids in, block hashes out. Depends on no other kvexact crate.
//!
//! * [`vllm`]: vLLM's prefix-cache chain (`sha256_cbor`, `sha256`, `xxhash`, `xxhash_cbor`).
//! * [`sglang`]: SGLang's sha256 page chain.
//! * [`trtllm`]: TensorRT-LLM's V1 block-key hash.
//! * [`events`]: decoding of each engine's KV-event wire format into one typed model.

pub mod error;
pub mod events;
pub mod sglang;
pub mod trtllm;
pub mod vllm;

pub use error::Error;
