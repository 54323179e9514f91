//! Every case of the SGLang block-hash vectors recomputes exactly; error cases are rejected.

use crate::common;
use kvexact_conformance::hashes::VectorFormat;

#[test]
fn block_hashes() {
    common::run("sglang/block_hashes.json", VectorFormat::Sglang, 37);
}
