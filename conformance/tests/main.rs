//! The integration tests of `kvexact-conformance` as one test binary: each file of `tests/` is
//! a module of this one (`mod attest_emulator;` is `tests/attest_emulator.rs`), so cargo
//! compiles and links the binary once instead of once per file, and libtest runs all the tests
//! side by side on every core instead of one file's binary after another (a binary holding one
//! long test keeps one core busy). One file's tests:
//! `cargo test -p kvexact-conformance --test conformance attest_emulator::`. `drift_alloc.rs`
//! stays a binary of its own (it installs a counting global allocator, which would count every
//! other test's allocations here). Test files are not found by cargo (`autotests = false`): a
//! new one needs its `mod` line.

// Helpers shared by several files (once here; each file names them with `use crate::…`).
mod common;

mod attest_deployment;
mod attest_emulator;
mod attest_harmony;
mod attest_mistral;
mod cachehit_vectors;
mod deployment_replay;
mod drift_deployment;
mod drift_emulator;
mod drift_live;
mod drift_prefix_sharing;
mod events_vectors;
mod feed_live;
mod harmony_route;
mod layering;
mod lifted_parity;
mod mistral_route;
mod nonjinja_vectors;
mod parity_sglang;
mod parity_trtllm;
mod parity_vllm;
mod route_replay;
mod template_release_vectors;
mod template_vectors;
mod test_binaries;
mod versions_parity;
