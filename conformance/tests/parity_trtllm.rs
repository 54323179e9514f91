//! Every case of the TensorRT-LLM block-hash vectors recomputes exactly.

use crate::common;
use kvexact_conformance::hashes::VectorFormat;

#[test]
fn block_hashes() {
    common::run("trtllm/block_hashes.json", VectorFormat::Trtllm, 42);
}
