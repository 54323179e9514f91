//! The integration tests of `kvprobe` as one test binary: each file of `tests/` is a module of
//! this one (`mod drift_runs;` is `tests/drift_runs.rs`), so cargo compiles and links the
//! binary once instead of once per file, and libtest runs all the tests side by side on every
//! core instead of one file's binary after another (a binary holding one long test keeps one
//! core busy). One file's tests: `cargo test -p kvprobe --test kvprobe drift_runs::`. Test
//! files are not found by cargo (`autotests = false`): a new one needs its `mod` line.

mod drift_runs;
mod drift_vectors;
mod pipeline;
#[cfg(feature = "live")]
mod subscriber;
mod tokenizer_loader;
