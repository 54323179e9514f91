//! Every case of the vLLM block-hash vectors (all four algorithms) recomputes exactly.

use crate::common;
use kvexact_conformance::hashes::VectorFormat;

#[test]
fn sha256_cbor() {
    common::run("vllm/block_hashes.json", VectorFormat::Vllm, 42);
}

#[test]
fn sha256_pickle() {
    common::run("vllm/block_hashes_sha256.json", VectorFormat::Vllm, 42);
}

#[test]
fn xxhash_pickle() {
    common::run("vllm/block_hashes_xxhash.json", VectorFormat::Vllm, 41);
}

#[test]
fn xxhash_cbor() {
    common::run("vllm/block_hashes_xxhash_cbor.json", VectorFormat::Vllm, 41);
}

#[test]
fn gateway_kv_hash_vectors() {
    common::run("gateway/kv_hash_vectors.json", VectorFormat::Gateway, 16);
}
